/* One case of the model-shape property that the fuzz target (tests/fuzz/fuzz_shapes.c) and the
 * unit test (tests/unit/test_emu_shapes.c) share: bytes pick a model shape (degenerate values
 * first: 0, 1, the limits and one past them), a GPU, the vLLM limits and the KV dtype; then
 *   - st_emu_model_check accepts exactly the shapes within its ranges, naming the field otherwise;
 *   - the memory plan either refuses with a reason or gives 1..ST_EMU_BLOCKS_MAX blocks whose
 *     tokens and bytes agree with the shape (no wrapped count), enough for one max_model_len
 *     request in whole blocks (else such a request would wait forever);
 *   - the block pool of that many blocks (up to ~4e9: allocated as used) stays consistent under
 *     takes, hashes, touches and releases picked by the bytes;
 *   - the engine model serves two small requests to the end in a bounded number of steps.
 * Returns 0 (every step ran), 1 (the shape was refused, rightly), 2 (the memory plan refused it,
 * with a reason), or -1 with what broke in why. Bounded time whatever the bytes. */
#ifndef ST_TEST_EMU_SHAPES_H
#define ST_TEST_EMU_SHAPES_H
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu/blocks.h"
#include "emu/catalog.h"
#include "emu/config.h"
#include "emu/sim.h"
#include "load/record.h"

typedef struct shape_bytes {
    const uint8_t *p;
    size_t n, at;
} shape_bytes;

static inline uint32_t shape_u32(shape_bytes *b)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v = v << 8 | (b->at < b->n ? b->p[b->at++] : 0);
    return v;
}

static inline uint8_t shape_u8(shape_bytes *b) { return b->at < b->n ? b->p[b->at++] : 0; }

/* A count near the interesting values of [lo, hi] (lo <= hi): out of it one time in sixteen (0,
 * hi + 1 or UINT32_MAX), else lo, lo + 1, hi, any, or small (up to lo + 255: the tiny models
 * that overflowed). */
static inline uint32_t shape_pick(shape_bytes *b, uint32_t lo, uint32_t hi)
{
    uint8_t k = shape_u8(b);
    uint32_t r = shape_u32(b);
    uint32_t span = hi - lo + 1 ? hi - lo + 1 : UINT32_MAX;
    switch (k % 32) {
    case 0: return k & 32 ? 0 : UINT32_MAX;
    case 1: return hi + 1;
    case 2:
    case 3: return lo;
    case 4: return lo + (span > 1);
    case 5:
    case 6:
    case 7: return hi;
    case 8:
    case 9:
    case 10:
    case 11:
    case 12:
    case 13:
    case 14:
    case 15:
    case 16:
    case 17: /* any in the range, of any magnitude (a random shift: about log-uniform) */
        return lo + ((r >> 5) >> (r & 31)) % span;
    default: /* small */ return lo + r % (span < 256 ? span : 256);
    }
}

static inline int shape_case(const uint8_t *data, size_t size, char *why, size_t whylen)
{
    shape_bytes b = { data, size, 0 };
    st_emu_model m;
    memset(&m, 0, sizeof m);
    snprintf(m.name, sizeof m.name, "shape");
    m.layers = shape_pick(&b, 1, ST_EMU_MAX_LAYERS);
    m.hidden = shape_pick(&b, 1, ST_EMU_MAX_HIDDEN);
    m.intermediate = shape_pick(&b, 1, ST_EMU_MAX_INTERMEDIATE);
    m.heads = shape_pick(&b, 1, ST_EMU_MAX_HEADS);
    m.kv_heads = shape_pick(&b, 1, m.heads);
    m.head_dim = shape_pick(&b, 1, ST_EMU_MAX_HEAD_DIM);
    m.vocab = shape_pick(&b, 1, ST_EMU_MAX_VOCAB);
    m.max_position = shape_pick(&b, 1, ST_EMU_MAX_POSITION);
    m.tied_embeddings = shape_u8(&b) & 1;
    if (shape_u8(&b) & 1) {
        m.experts = shape_pick(&b, 1, ST_EMU_MAX_EXPERTS);
        m.experts_per_tok = shape_pick(&b, 1, m.experts);
        m.moe_intermediate = shape_pick(&b, 1, ST_EMU_MAX_INTERMEDIATE);
        m.shared_intermediate = shape_pick(&b, 0, ST_EMU_MAX_INTERMEDIATE);
        m.dense_layers = shape_pick(&b, 0, m.layers);
    }
    m.weight_dtype = (st_emu_dtype)(shape_u8(&b) % 5);
    int in_range = m.layers >= 1 && m.layers <= ST_EMU_MAX_LAYERS && m.hidden >= 1 && m.hidden <= ST_EMU_MAX_HIDDEN &&
                   m.intermediate >= 1 && m.intermediate <= ST_EMU_MAX_INTERMEDIATE && m.heads >= 1 &&
                   m.heads <= ST_EMU_MAX_HEADS && m.kv_heads >= 1 && m.kv_heads <= m.heads && m.head_dim >= 1 &&
                   m.head_dim <= ST_EMU_MAX_HEAD_DIM && m.vocab >= 1 && m.vocab <= ST_EMU_MAX_VOCAB &&
                   m.max_position >= 1 && m.max_position <= ST_EMU_MAX_POSITION && m.experts <= ST_EMU_MAX_EXPERTS &&
                   /* a dense model's expert fields are unused: 0 experts per token, any expert size */
                   (m.experts ? m.experts_per_tok >= 1 && m.experts_per_tok <= m.experts && m.moe_intermediate >= 1
                              : m.experts_per_tok == 0) &&
                   m.moe_intermediate <= ST_EMU_MAX_INTERMEDIATE && m.shared_intermediate <= ST_EMU_MAX_INTERMEDIATE &&
                   m.dense_layers <= m.layers;
    char err[1024] = "";
    int ok = st_emu_model_check(&m, err, sizeof err) == 0;
    if (ok != in_range) {
        snprintf(why, whylen, "st_emu_model_check says %s for a shape %s its ranges (%s)", ok ? "yes" : "no",
                 in_range ? "within" : "outside", err);
        return -1;
    }
    if (!ok) {
        if (strncmp(err, "model shape: ", 13) || !strstr(err, " is ") || !strstr(err, "expected an integer in [")) {
            snprintf(why, whylen, "a refusal that does not name the field, the value and the range: %s", err);
            return -1;
        }
        return 1;
    }
    st_emu_model_count_params(&m);
    if (!(m.params > 0) || !isfinite(m.params) || !(m.active_params > 0) || m.active_params > m.params * (1 + 1e-9)) {
        snprintf(why, whylen, "parameters %g (active %g)", m.params, m.active_params);
        return -1;
    }
    /* a GPU of the catalog, or a custom one from 1 GiB to its limit (about 1 PiB) */
    static const char *gpus[] = { "H100", "H200", "A100", "L40S", "RTX4090" };
    st_emu_gpu g;
    uint8_t gk = shape_u8(&b);
    if (gk % 6 < 5) {
        if (st_emu_gpu_find(gpus[gk % 6], &g, err, sizeof err)) {
            snprintf(why, whylen, "catalog GPU %s: %s", gpus[gk % 6], err);
            return -1;
        }
    } else {
        char text[200];
        snprintf(text, sizeof text, "name=custom\nmemory_gib=%u\nbf16_tflops=1000\nbandwidth_tbs=3\n",
                 1 + shape_u32(&b) % (uint32_t)ST_EMU_GPU_FIELD_MAX);
        if (st_emu_gpu_parse(text, strlen(text), &g, err, sizeof err)) {
            snprintf(why, whylen, "custom GPU: %s", err);
            return -1;
        }
    }
    st_emu_config c;
    st_emu_config_init(&c, &g, &m);
    static const uint32_t tps[] = { 1, 2, 4, 8, 3 }, bss[] = { 8, 16, 32, 64, 128 };
    c.tp = tps[shape_u8(&b) % 5];
    c.block_size = bss[shape_u8(&b) % 5];
    c.kv_dtype = shape_u8(&b) & 1 ? ST_EMU_FP8 : ST_EMU_BF16;
    c.gpu_memory_utilization = (1 + shape_u8(&b) % 100) / 100.0;
    uint8_t lim = shape_u8(&b);
    if (lim & 1)
        c.max_model_len = 1 + shape_u32(&b) % m.max_position;
    if (lim & 2)
        c.max_num_seqs = 1 + shape_u32(&b) % 2048;
    if (lim & 4)
        c.max_num_batched_tokens = 1 + shape_u32(&b) % 65536;
    st_emu_memory mem;
    if (st_emu_memory_plan(&c, &mem, err, sizeof err)) {
        if (!err[0] || mem.refusal == ST_EMU_START_OK) {
            snprintf(why, whylen, "a refused plan without a reason (refusal %d)", (int)mem.refusal);
            return -1;
        }
        return 2;
    }
    double block_bytes = mem.kv_bytes_per_token * c.block_size;
    if (mem.num_blocks < 1 || mem.num_blocks > ST_EMU_BLOCKS_MAX ||
        mem.kv_tokens != (uint64_t)mem.num_blocks * c.block_size || !(block_bytes > 0) ||
        (double)mem.num_blocks * block_bytes > mem.kv_bytes * (1 + 1e-9) ||
        ((double)mem.num_blocks + 1) * block_bytes <= mem.kv_bytes * (1 - 1e-9) ||
        mem.kv_tokens < mem.max_model_len) { /* one max_model_len request fits in whole blocks */
        snprintf(why, whylen, "plan: %u blocks of %u tokens, %llu tokens, %g bytes per block, %g KV bytes",
                 mem.num_blocks, c.block_size, (unsigned long long)mem.kv_tokens, block_bytes, mem.kv_bytes);
        return -1;
    }
    /* the pool of that many blocks, driven by the bytes */
    st_emu_blocks p;
    if (st_emu_blocks_init(&p, mem.num_blocks, c.block_size)) {
        snprintf(why, whylen, "a pool of %u blocks could not be made", mem.num_blocks);
        return -1;
    }
    uint32_t held[64], nheld = 0, tmp[64];
    int rc = 0;
    for (int op = 0; op < 64 && rc == 0; op++) {
        uint8_t k = shape_u8(&b);
        if (k % 4 == 0 || nheld == 0) {
            uint32_t want = 1 + k / 4 % 16;
            if (want > 64 - nheld)
                want = 64 - nheld;
            uint32_t before = p.nfree;
            int t = st_emu_blocks_take(&p, want, held + nheld);
            if (t == 0)
                nheld += want;
            if ((t == 0) != (want <= before) || (t == 0 && p.nfree != before - want)) {
                snprintf(why, whylen, "take %u of %u free: %d, %u free after", want, before, t, p.nfree);
                rc = -1;
            }
        } else if (k % 4 == 1) {
            uint64_t h = st_emu_block_hash(k, &nheld, 1);
            uint32_t blk = held[k % nheld];
            int had = st_emu_blocks_has_hash(&p, blk); /* a block keeps its first hash */
            st_emu_blocks_set_hash(&p, blk, h);
            uint32_t f = st_emu_blocks_lookup(&p, h);
            if (f == ST_EMU_NIL && !had) {
                snprintf(why, whylen, "a hash set is not found");
                rc = -1;
            } else if (f != ST_EMU_NIL && nheld < 64) { /* a prefix-cache hit: one more reference, released later */
                st_emu_blocks_touch(&p, f);
                held[nheld++] = f;
            }
        } else {
            uint32_t r = 1 + k / 4 % nheld;
            memcpy(tmp, held + nheld - r, r * sizeof *tmp);
            nheld -= r;
            st_emu_blocks_release(&p, tmp, r);
        }
        if (rc == 0 && st_emu_blocks_check(&p, err, sizeof err)) {
            snprintf(why, whylen, "pool of %u blocks after op %d: %s", p.n, op, err);
            rc = -1;
        }
        if (rc == 0 && (p.used > p.n || p.room < p.used || p.mcap < 2 * (uint64_t)p.mcount)) {
            snprintf(why, whylen, "pool sizes: %u used of %u, room %u, map %llu for %llu", p.used, p.n, p.room,
                     (unsigned long long)p.mcap, (unsigned long long)p.mcount);
            rc = -1;
        }
    }
    st_emu_blocks_release(&p, held, nheld);
    if (rc == 0 && (p.nfree != p.n || st_emu_blocks_check(&p, err, sizeof err))) {
        snprintf(why, whylen, "pool after releasing everything: %u free of %u (%s)", p.nfree, p.n, err);
        rc = -1;
    }
    st_emu_blocks_free(&p);
    if (rc)
        return rc;
    /* two small requests through the engine model, to the end */
    uint32_t in = mem.max_model_len > 2 ? (mem.max_model_len - 1 < 48 ? mem.max_model_len - 1 : 48) : 1;
    uint32_t ids[48];
    for (uint32_t i = 0; i < in; i++)
        ids[i] = i % m.vocab;
    st_emu_sim_item items[2] = {
        { .arrival = 0, .input_ids = ids, .input_len = in, .output_len = mem.max_model_len > in + 4 ? 4 : 1 },
        { .arrival = 1000000, .input_ids = ids, .input_len = in, .output_len = mem.max_model_len > in + 4 ? 4 : 1 },
    };
    st_record rec[2];
    st_emu_sim_stats st;
    if (st_emu_sim_run(&c, items, 2, rec, &st, err, sizeof err)) {
        snprintf(why, whylen, "the engine model did not run: %s", err);
        return -1;
    }
    for (int i = 0; i < 2; i++)
        st_record_free(&rec[i]);
    if (st.completed + st.rejected != 2 || st.steps > 1000) {
        snprintf(why, whylen, "two requests: %u completed, %u rejected in %llu steps", st.completed, st.rejected,
                 (unsigned long long)st.steps);
        return -1;
    }
    return 0;
}

#endif
