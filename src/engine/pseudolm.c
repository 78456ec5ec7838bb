/* The emulator's pseudo language model (engine/pseudolm.h). */
#include "engine/pseudolm.h"

#include <math.h>

#include "core/rng.h"

/* A uniform in (0, 1) from 53 bits of z. */
static double unit(uint64_t z) { return ((double)(z >> 11) + 0.5) / 9007199254740992.0; }

void st_plm_init(st_plm *m, uint32_t vocab, int weight_bits, int kv_bits)
{
    double w = weight_bits >= 16 ? 0 : weight_bits >= 8 ? ST_PLM_NOISE_8BIT : ST_PLM_NOISE_4BIT;
    double kv = kv_bits >= 16 ? 0 : ST_PLM_NOISE_KV8;
    m->vocab = vocab > 2 ? vocab : 2;
    m->noise = sqrt(w * w + kv * kv);
    m->salt = st_splitmix64_of(((uint64_t)(unsigned)weight_bits << 8) | (uint64_t)(unsigned)kv_bits);
}

uint64_t st_plm_hash_ids(const uint32_t *ids, uint32_t n)
{
    uint64_t h = 0x706c6dULL; /* "plm" */
    for (uint32_t i = 0; i < n; i++)
        h = st_plm_extend(h, ids[i]);
    return h;
}

uint64_t st_plm_extend(uint64_t h, uint32_t token)
{
    return st_splitmix64_of(h ^ ((uint64_t)token * 0x2545f4914f6cdd1dULL));
}

void st_plm_next(const st_plm *m, uint64_t h, uint32_t k, uint32_t *ids, double *logp)
{
    uint32_t cand[ST_PLM_CANDIDATES];
    double lg[ST_PLM_CANDIDATES];
    double mx = -INFINITY;
    for (uint32_t j = 0; j < ST_PLM_CANDIDATES; j++) {
        uint64_t z = st_splitmix64_of(h + j);
        uint32_t id = 1 + (uint32_t)(z % (m->vocab - 1));
        for (uint32_t q = 0; m->vocab > 2 * ST_PLM_CANDIDATES && q < j; q++) /* distinct candidates */
            if (cand[q] == id) {
                id = 1 + (id % (m->vocab - 1));
                q = (uint32_t)-1;
            }
        cand[j] = id;
        lg[j] = -ST_PLM_SLOPE * j;
        if (m->noise > 0) {
            uint64_t a = st_splitmix64_of(z ^ m->salt), b = st_splitmix64_of(a);
            lg[j] += m->noise * sqrt(-2 * log(unit(a))) * cos(6.283185307179586 * unit(b));
        }
        if (lg[j] > mx)
            mx = lg[j];
    }
    double s = 0;
    for (uint32_t j = 0; j < ST_PLM_CANDIDATES; j++)
        s += exp(lg[j] - mx);
    double lse = mx + log(s);
    if (k > ST_PLM_CANDIDATES)
        k = ST_PLM_CANDIDATES;
    /* the k largest, in order (selection: k and the candidates are small) */
    unsigned char used[ST_PLM_CANDIDATES] = { 0 };
    for (uint32_t i = 0; i < k; i++) {
        int best = -1;
        for (uint32_t j = 0; j < ST_PLM_CANDIDATES; j++)
            if (!used[j] && (best < 0 || lg[j] > lg[best]))
                best = (int)j;
        used[best] = 1;
        ids[i] = cand[best];
        logp[i] = lg[best] - lse;
    }
}
