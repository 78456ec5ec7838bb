/* vLLM's n-gram proposer and its offline replay (load/ngram.h). */
#include "load/ngram.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int st_ngram_params_check(const st_ngram_params *p, char *err, size_t errlen)
{
    if (p->k < 1 || p->k > ST_NGRAM_K_MAX) {
        snprintf(err, errlen, "k (num_speculative_tokens) must be 1..%u, not %u", ST_NGRAM_K_MAX, p->k);
        return -1;
    }
    if (p->min_n < 1 || p->max_n > ST_NGRAM_N_MAX || p->min_n > p->max_n) {
        snprintf(err, errlen, "the lookup window must be 1 <= min <= max <= %u, not %u..%u", ST_NGRAM_N_MAX, p->min_n,
                 p->max_n);
        return -1;
    }
    return 0;
}

static int parse_u32(const char **s, uint32_t *out)
{
    char *end;
    errno = 0;
    if (**s < '0' || **s > '9')
        return -1;
    unsigned long v = strtoul(*s, &end, 10);
    if (errno || v > 0xffffffffUL)
        return -1;
    *out = (uint32_t)v;
    *s = end;
    return 0;
}

int st_ngram_params_parse(const char *s, st_ngram_params *p, char *err, size_t errlen)
{
    const char *in = s;
    if (!strncmp(s, "ngram:", 6))
        s += 6;
    p->k = 0;
    p->min_n = ST_NGRAM_DEFAULT_MIN;
    p->max_n = ST_NGRAM_DEFAULT_MAX;
    p->max_model_len = 0;
    uint32_t *fields[4] = { &p->k, &p->min_n, &p->max_n, &p->max_model_len };
    int n = 0;
    for (;;) {
        if (n == 4 || parse_u32(&s, fields[n])) {
            snprintf(err, errlen, "'%s': expected ngram:K[,MIN,MAX[,MAX_MODEL_LEN]] (whole numbers)", in);
            return -1;
        }
        n++;
        if (*s == '\0')
            break;
        if (*s != ',') {
            snprintf(err, errlen, "'%s': expected ngram:K[,MIN,MAX[,MAX_MODEL_LEN]] (whole numbers)", in);
            return -1;
        }
        s++;
    }
    if (n == 2) {
        snprintf(err, errlen, "'%s': give both MIN and MAX (ngram:K,MIN,MAX)", in);
        return -1;
    }
    char why[200];
    if (st_ngram_params_check(p, why, sizeof why)) {
        snprintf(err, errlen, "'%s': %s", in, why);
        return -1;
    }
    return 0;
}

int st_ngram_params_parse_list(const char *s, st_ngram_params *out, int max, char *err, size_t errlen)
{
    const char *body = !strncmp(s, "ngram:", 6) ? s + 6 : s;
    size_t klen = strcspn(body, ",");
    const char *rest = body + klen; /* "" or ",MIN,MAX..." */
    uint32_t ks[ST_NGRAM_K_MAX];
    int nk = 0;
    const char *dots = strstr(body, "..");
    if (dots && dots < rest) {
        const char *p = body, *q = dots + 2;
        uint32_t lo, hi;
        if (parse_u32(&p, &lo) || p != dots || parse_u32(&q, &hi) || q != rest || lo < 1 || hi < lo ||
            hi > ST_NGRAM_K_MAX) {
            snprintf(err, errlen, "'%s': a range of K is LO..HI with 1 <= LO <= HI <= %u", s, ST_NGRAM_K_MAX);
            return -1;
        }
        for (uint32_t k = lo; k <= hi; k++)
            ks[nk++] = k;
    } else if (memchr(body, '/', klen)) {
        const char *p = body;
        while (p < rest) {
            uint32_t k;
            if (nk == (int)ST_NGRAM_K_MAX || parse_u32(&p, &k) || (p < rest && *p != '/')) {
                snprintf(err, errlen, "'%s': a list of K is K1/K2/... (whole numbers)", s);
                return -1;
            }
            ks[nk++] = k;
            if (*p == '/')
                p++;
        }
    } else {
        if (max < 1) {
            snprintf(err, errlen, "too many sets of n-gram parameters");
            return -1;
        }
        return st_ngram_params_parse(s, out, err, errlen) ? -1 : 1;
    }
    if (nk > max) {
        snprintf(err, errlen, "'%s': %d values of K, at most %d sets in all", s, nk, max);
        return -1;
    }
    for (int i = 0; i < nk; i++) {
        char one[160];
        snprintf(one, sizeof one, "ngram:%u%.140s", ks[i], rest);
        if (st_ngram_params_parse(one, &out[i], err, errlen))
            return -1;
    }
    return nk;
}

/* vLLM: _find_longest_matched_ngram_and_propose_tokens. tokens reversed are read through
 * R(i) = tokens[n - 1 - i]; lps[i] is the longest v < i + 1 (v <= max_n) with R[0..v) ==
 * R[i+1-v..i+1), stored for the first max_n positions only. */
uint32_t st_ngram_propose(const uint32_t *tokens, size_t n, const st_ngram_params *p, uint32_t *out)
{
    size_t total = n;
    if (total < p->min_n)
        return 0;
    int64_t k = p->k;
    if (p->max_model_len) {
        int64_t room = (int64_t)p->max_model_len - (int64_t)total;
        if (room < k)
            k = room;
    }
    if (k <= 0)
        return 0;
#define R(i) tokens[total - 1 - (i)]
    uint32_t lps[ST_NGRAM_N_MAX] = { 0 };
    uint32_t max_n = p->max_n;
    size_t longest = 0, position = 0;
    size_t prev = 0, i = 1;
    while (i < total) {
        if (R(prev) == R(i)) {
            prev++;
            if (prev >= longest) { /* the latest position reversed: the earliest occurrence */
                longest = prev;
                position = i;
            }
            if (i < max_n)
                lps[i] = (uint32_t)prev;
            if (prev == max_n)
                prev = lps[max_n - 1];
            i++;
        } else if (prev != 0) {
            prev = lps[prev - 1];
        } else {
            i++;
        }
    }
#undef R
    if (longest < p->min_n)
        return 0;
    size_t start = total - 1 - position + longest;
    if ((int64_t)(total - start) < k)
        k = (int64_t)(total - start);
    for (int64_t j = 0; j < k; j++)
        out[j] = tokens[start + (size_t)j];
    return (uint32_t)k;
}

/* ---- the incremental proposer ---- */

/* One entry per distinct n-gram: its length and its earliest end position + 1 (0: empty). */
typedef struct slot {
    uint32_t end1;
    uint32_t n;
} slot;

struct st_ngram_replay {
    st_ngram_params p;
    slot *tab;
    size_t cap;   /* slots in use for this request: a power of two */
    size_t alloc; /* slots allocated */
    const uint32_t *ids;
    size_t inserted; /* ends [0, inserted) are in the table */
};

static uint64_t mix(uint64_t h, uint32_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdULL;
    return h ^ (h >> 32);
}

st_ngram_replay *st_ngram_replay_new(const st_ngram_params *p)
{
    st_ngram_replay *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->p = *p;
    return r;
}

void st_ngram_replay_free(st_ngram_replay *r)
{
    if (!r)
        return;
    free(r->tab);
    free(r);
}

int st_ngram_replay_reset(st_ngram_replay *r, size_t n_max)
{
    size_t want = 16;
    size_t entries = n_max * (size_t)(r->p.max_n - r->p.min_n + 1);
    while (want < 2 * entries)
        want <<= 1;
    if (want > r->alloc) {
        slot *t = realloc(r->tab, want * sizeof *t);
        if (!t)
            return -1;
        r->tab = t;
        r->alloc = want;
    }
    /* the part this request needs: a larger table left by a longer request is not cleared */
    memset(r->tab, 0, want * sizeof *r->tab);
    r->cap = want;
    r->inserted = 0;
    r->ids = NULL;
    return 0;
}

/* The slot of the n-gram ids[end+1-n..end] (an empty one when absent). */
static slot *find(st_ngram_replay *r, uint64_t h, size_t end, uint32_t n)
{
    size_t mask = r->cap - 1, at = (size_t)h & mask;
    const uint32_t *g = r->ids + end + 1 - n;
    for (;;) {
        slot *s = &r->tab[at];
        if (!s->end1)
            return s;
        if (s->n == n && !memcmp(r->ids + s->end1 - n, g, n * sizeof *g))
            return s;
        at = (at + 1) & mask;
    }
}

/* Adds the n-grams ending at end (when not seen earlier). */
static void insert_end(st_ngram_replay *r, size_t end)
{
    uint64_t h = 0;
    uint32_t lim = r->p.max_n < end + 1 ? r->p.max_n : (uint32_t)(end + 1);
    for (uint32_t n = 1; n <= lim; n++) {
        h = mix(h, r->ids[end + 1 - n]);
        if (n < r->p.min_n)
            continue;
        slot *s = find(r, h ^ n, end, n);
        if (!s->end1) {
            s->end1 = (uint32_t)end + 1;
            s->n = n;
        }
    }
}

uint32_t st_ngram_replay_propose(st_ngram_replay *r, const uint32_t *ids, size_t n, uint32_t *out)
{
    const st_ngram_params *p = &r->p;
    r->ids = ids;
    /* every occurrence ends before the last token */
    while (r->inserted + 1 < n)
        insert_end(r, r->inserted++);
    if (n < p->min_n)
        return 0;
    int64_t k = p->k;
    if (p->max_model_len) {
        int64_t room = (int64_t)p->max_model_len - (int64_t)n;
        if (room < k)
            k = room;
    }
    if (k <= 0)
        return 0;
    uint64_t h[ST_NGRAM_N_MAX + 1];
    uint32_t lim = p->max_n < n - 1 ? p->max_n : (uint32_t)(n - 1);
    uint64_t acc = 0;
    for (uint32_t m = 1; m <= lim; m++) {
        acc = mix(acc, ids[n - m]);
        h[m] = acc;
    }
    for (uint32_t m = lim; m >= p->min_n && m >= 1; m--) {
        slot *s = find(r, h[m] ^ m, n - 1, m);
        if (!s->end1)
            continue;
        size_t start = s->end1; /* the token after the occurrence */
        if ((int64_t)(n - start) < k)
            k = (int64_t)(n - start);
        for (int64_t j = 0; j < k; j++)
            out[j] = ids[start + (size_t)j];
        return (uint32_t)k;
    }
    return 0;
}

int st_ngram_replay_request(st_ngram_replay *r, const uint32_t *ids, size_t n_prompt, size_t n_completion,
                            st_ngram_acc *acc)
{
    size_t total = n_prompt + n_completion;
    if (total > ST_NGRAM_TOKENS_MAX)
        return -1;
    st_ngram_acc one;
    memset(&one, 0, sizeof one);
    one.requests = 1;
    if (n_completion > 1) {
        if (st_ngram_replay_reset(r, total))
            return -1;
        one.decode_tokens = n_completion - 1;
        uint32_t draft[ST_NGRAM_K_MAX];
        size_t t = n_prompt + 1; /* the prefill sampled the first token */
        while (t < total) {
            uint32_t j = st_ngram_replay_propose(r, ids, t, draft);
            one.steps++;
            if (j == 0) {
                one.no_proposal++;
                t++;
                continue;
            }
            size_t left = total - t;
            if (j > left) {
                one.truncated += j - left;
                j = (uint32_t)left;
            }
            one.drafts++;
            one.draft_tokens += j;
            uint32_t a = 0;
            while (a < j && draft[a] == ids[t + a])
                a++;
            for (uint32_t i = 0; i < j; i++)
                one.drafted_pos[i]++;
            for (uint32_t i = 0; i < a; i++)
                one.accepted_pos[i]++;
            one.accepted += a;
            t += (size_t)a + 1;
        }
    }
    st_ngram_acc_add(acc, &one);
    return 0;
}

void st_ngram_acc_add(st_ngram_acc *into, const st_ngram_acc *a)
{
    into->requests += a->requests;
    into->decode_tokens += a->decode_tokens;
    into->steps += a->steps;
    into->no_proposal += a->no_proposal;
    into->drafts += a->drafts;
    into->draft_tokens += a->draft_tokens;
    into->accepted += a->accepted;
    into->truncated += a->truncated;
    for (uint32_t i = 0; i < ST_NGRAM_K_MAX; i++) {
        into->accepted_pos[i] += a->accepted_pos[i];
        into->drafted_pos[i] += a->drafted_pos[i];
    }
}

static double ratio(uint64_t a, uint64_t b) { return b ? (double)a / (double)b : NAN; }

void st_ngram_figures_of(const st_ngram_acc *a, st_ngram_figures *f)
{
    memset(f, 0, sizeof *f);
    f->acceptance_rate = ratio(a->accepted, a->draft_tokens);
    f->mean_accept_len = a->drafts ? 1.0 + (double)a->accepted / (double)a->drafts : NAN;
    f->no_proposal_share = ratio(a->no_proposal, a->steps);
    f->tokens_per_step = ratio(a->decode_tokens, a->steps);
    for (uint32_t i = 0; i < ST_NGRAM_K_MAX; i++) {
        f->pos_rate[i] = ratio(a->accepted_pos[i], a->drafts);
        if (a->drafted_pos[i])
            f->n_pos = i + 1;
    }
}
