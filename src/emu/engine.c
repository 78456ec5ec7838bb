/* vLLM V1 scheduler (FCFS) over the paged KV cache. See engine.h and docs/engine-model.md. */
#include "emu/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/util.h"
#include "emu/blocks.h"
#include "emu/consts.h"
#include "emu/specstep.h"
#include "emu/steptime.h"

typedef struct emu_req {
    uint64_t id;
    void *user;
    uint32_t *tokens;              /* the prompt's ids (n_prompt of them, room for cap_prompt); generated token q
                         is st_emu_output_token(id, q): computed where needed, not stored */
    uint32_t n_tokens, cap_tokens; /* prompt and generated tokens; at most prompt + max_tokens */
    uint32_t cap_prompt;
    uint32_t n_prompt, max_tokens, n_out;
    uint32_t num_computed; /* tokens whose KV is in the cache */
    uint32_t *blocks;      /* labels of the named ones: [0, n_named) */
    uint32_t n_blocks, cap_blocks;
    uint32_t n_named; /* blocks [0, n_named) are named, the rest held anonymously (blocks.h; anon_from) */
    uint64_t *bhash;  /* hashes of full blocks, computed lazily (room for cap_blocks) */
    uint32_t n_bhash;
    uint32_t n_cached;      /* leading blocks already registered in the cache */
    uint32_t cached_tokens; /* prefix hit at first admission */
    uint32_t kv_external;   /* prompt tokens whose KV it brings (st_emu_req_params), until admitted */
    int seeded;             /* st_emu_req_params.seeded: no ids kept, blocks keyed by seed (req_block_hash) */
    int listed;             /* a seeded request's blocks were listed (list_generated): a lookup can hit */
    int unlisted;           /* seeded and not replayed: its keyed blocks stay unlisted until a preemption */
    uint64_t seed;
    uint32_t keyed_from; /* st_emu_req_params.keyed_from: ids before it kept in tokens and hashed */
    int admitted_once;
    uint64_t admit_seq;
    st_ns arrival, first_scheduled, first_token;
    st_ns ready;                   /* when the API server has handed it to the engine core (front-end model) */
    double fe_factor;              /* its API-server costs relative to a completions request */
    int held;                      /* st_emu_hold: left out of the steps while running */
    uint32_t spec_draft, spec_acc; /* this step's draft tokens to verify and how many are accepted */
} emu_req;

struct st_emu_engine {
    st_emu_config cfg;
    st_emu_memory mem;
    st_clock clock;
    st_emu_blocks pool;
    int oom;               /* a block pool allocation failed (also a release's, a listing's): st_emu_step fails */
    int no_output_prompts; /* st_emu_set_output_prompts(e, 0): generated blocks stay unlisted */
    /* waiting: a ring deque; running: an array in admission order */
    emu_req **wq;
    uint32_t wq_head, wq_len, wq_cap;
    emu_req **run;
    uint32_t n_run, cap_run;
    uint64_t admit_counter;
    /* per-step scratch */
    emu_req **sched;
    uint32_t *sched_new;
    uint32_t cap_sched, cap_sched_new;
    st_emu_event *events;
    double *sched_fe; /* per event: its request's front-end factor */
    st_emu_seq_work *work;
    uint32_t cap_work;
    uint32_t cap_events, cap_sched_fe;
    uint64_t *admitted, *preempted;
    uint32_t cap_admitted, cap_preempted;
    uint32_t *scratch_blocks;
    uint32_t cap_scratch;
    /* st_emu_skip_steps scratch: per sequence of the run (running index): its result entry, the run's step it
     * takes its next block at, the run's step of its first decode (SKIP_NONE: none in the run, a chunked
     * prefill), and the next sequence of its group; per group (a step mod block_size), the first and last
     * sequence: a sequence is in the group of the steps it takes a block at (until it finishes in the run:
     * skip_leave_group), and the group of step p + 1 registers a full block at step p (skip_prepare), each in
     * running order */
    st_emu_skip_seq *skip_seq;
    st_ns *skip_start, *skip_due;
    uint64_t *skip_first;
    uint32_t *skip_j0, *skip_next, *skip_head, *skip_tail, *skip_gsize; /* skip_gsize: per group, its size */
    double *skip_share; /* per sequence: its tokens' share of the API server's queue (ns) */
    /* sums of k equal shares skip_sums_u, added one by one from 0 as frontend_due adds them: skip_sums[k] for
     * k < n_skip_sums (a run whose shares are all equal: skip_retire) */
    double *skip_sums, skip_sums_u;
    uint32_t n_skip_sums, cap_skip_sums;
    /* with hooks, per sequence: (the step it finishes in << 32 | running index), in a queue of those that came
     * in increasing order (skip_fin[skip_fin_head..n_skip_fin)) or else in a min-heap (skip_fin_push) */
    uint64_t *skip_fin, *skip_heap;
    uint32_t skip_fin_head, n_skip_fin, n_skip_heap, cap_skip_share, cap_skip_fin, cap_skip_heap;
    /* the step time's terms but for the context, per batch shape (tokens, decodes, sequences, sampled rows):
     * every step's time, in st_emu_step and in runs, takes them from here */
    st_emu_step_cache step_cache;
    uint32_t cap_skip_seq, cap_skip_start, cap_skip_due, cap_skip_first, cap_skip_j0, cap_skip_next, cap_skip_group;
    uint32_t cap_skip_runs;     /* sequences every per-sequence array of a run has room for (skip_reserve) */
    st_ns fe_free;              /* the API server's work queue is busy until then (engine time) */
    st_ns fe_batch, fe_pre;     /* when the latest step's token work began on it, and the queue's end before it */
    st_ns last_start, last_end; /* the previous step's start and end (-1 before the first) */
    st_emu_stats st;
    uint32_t *hash_ids; /* block_size ids: a block with generated tokens, for its hash */
    /* finished requests kept with their buffers for the next ones (no allocation per request) */
    struct emu_req **spare;
    uint32_t n_spare;
};

/* Finished requests an engine keeps for reuse (their arrays with them). */
#define EMU_SPARE_REQS 256u

uint32_t st_emu_output_token(uint64_t id, uint32_t n, uint32_t vocab)
{
    uint64_t x = id * 0x9e3779b97f4a7c15ULL + n + 0x1234567ULL;
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 29;
    /* avoid the lowest ids (special tokens in real vocabularies) */
    uint32_t lo = vocab > 1000 ? 1000 : 0;
    return lo + (uint32_t)(x % (vocab - lo));
}

void st_emu_output_tokens(uint64_t id, uint32_t from, uint32_t n, uint32_t vocab, uint32_t *out)
{
    uint32_t lo = vocab > 1000 ? 1000 : 0;
    uint64_t d = vocab - lo; /* x % d by multiplication (Lemire, Kaser, Kurz, "Faster remainder by direct
                                computation", 2019: exact for every 64-bit x with a 128-bit M) */
    unsigned __int128 M = ~(unsigned __int128)0 / d + 1;
    uint64_t base = id * 0x9e3779b97f4a7c15ULL + 0x1234567ULL;
    for (uint32_t k = 0; k < n; k++) {
        uint64_t x = base + from + k; /* st_emu_output_token's mixing */
        x ^= x >> 31;
        x *= 0xbf58476d1ce4e5b9ULL;
        x ^= x >> 29;
        unsigned __int128 low = M * x;
        unsigned __int128 hi = (unsigned __int128)(uint64_t)(low >> 64) * d;
        unsigned __int128 lw = (unsigned __int128)(uint64_t)low * d;
        out[k] = lo + (uint32_t)((hi + (lw >> 64)) >> 64);
    }
}

/* st_grow for the engine's uint32_t capacities. */
static int grow(void **p, uint32_t *cap, uint32_t need, size_t elem)
{
    size_t c = *cap;
    if (st_grow(p, &c, need, elem, 16) || c > UINT32_MAX)
        return -1;
    *cap = (uint32_t)c;
    return 0;
}

int st_emu_engine_new(const st_emu_config *cfg, st_clock clock, st_emu_engine **out, st_emu_memory *mem_out, char *err,
                      size_t errlen)
{
    *out = NULL;
    st_emu_engine *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    e->cfg = *cfg;
    e->clock = clock;
    if (st_emu_spec_check(&cfg->spec, err, errlen)) {
        free(e);
        return -1;
    }
    int rc = st_emu_memory_plan(&e->cfg, &e->mem, err, errlen);
    if (mem_out)
        *mem_out = e->mem;
    if (rc < 0) {
        free(e);
        return -1;
    }
    if (st_emu_blocks_init(&e->pool, e->mem.num_blocks, e->cfg.block_size) < 0) {
        snprintf(err, errlen, "out of memory for %u blocks", e->mem.num_blocks);
        free(e);
        return -1;
    }
    e->hash_ids = malloc((size_t)e->cfg.block_size * sizeof *e->hash_ids);
    e->spare = malloc(EMU_SPARE_REQS * sizeof *e->spare);
    if (!e->hash_ids || !e->spare) {
        snprintf(err, errlen, "out of memory");
        st_emu_blocks_free(&e->pool);
        free(e->hash_ids);
        free(e->spare);
        free(e);
        return -1;
    }
    e->st.num_blocks = e->mem.num_blocks;
    e->last_start = e->last_end = -1;
    e->fe_batch = -1;
    *out = e;
    return 0;
}

static void req_destroy(emu_req *r)
{
    if (!r)
        return;
    free(r->tokens);
    free(r->blocks);
    free(r->bhash);
    free(r);
}

/* A request leaves the engine: kept for reuse while there is room. */
static void req_free(st_emu_engine *e, emu_req *r)
{
    if (r && e->n_spare < EMU_SPARE_REQS)
        e->spare[e->n_spare++] = r;
    else
        req_destroy(r);
}

/* Room for n elements of elem bytes in *p (capacity *cap); contents are not kept. 0 or -1. */
static int room_for(void **p, uint32_t *cap, uint32_t n, size_t elem)
{
    if (n <= *cap && *p)
        return 0;
    void *q = malloc((size_t)(n ? n : 1) * elem);
    if (!q)
        return -1;
    free(*p);
    *p = q;
    *cap = n ? n : 1;
    return 0;
}

void st_emu_engine_free(st_emu_engine *e)
{
    if (!e)
        return;
    for (uint32_t i = 0; i < e->wq_len; i++)
        req_destroy(e->wq[(e->wq_head + i) % e->wq_cap]);
    for (uint32_t i = 0; i < e->n_run; i++)
        req_destroy(e->run[i]);
    for (uint32_t i = 0; i < e->n_spare; i++)
        req_destroy(e->spare[i]);
    free(e->spare);
    free(e->hash_ids);
    free(e->wq);
    free(e->run);
    free(e->sched);
    free(e->sched_new);
    free(e->events);
    free(e->sched_fe);
    free(e->work);
    free(e->admitted);
    free(e->preempted);
    free(e->scratch_blocks);
    free(e->skip_seq);
    free(e->skip_start);
    free(e->skip_due);
    free(e->skip_first);
    free(e->skip_j0);
    free(e->skip_next);
    free(e->skip_head);
    free(e->skip_tail);
    free(e->skip_gsize);
    free(e->skip_share);
    st_emu_step_cache_free(&e->step_cache);
    free(e->skip_sums);
    free(e->skip_fin);
    free(e->skip_heap);
    st_emu_blocks_free(&e->pool);
    free(e);
}

const st_emu_config *st_emu_engine_config(const st_emu_engine *e) { return &e->cfg; }
const st_emu_memory *st_emu_engine_memory(const st_emu_engine *e) { return &e->mem; }

/* ---- waiting deque ---- */
static int wq_reserve(st_emu_engine *e)
{
    if (e->wq_len < e->wq_cap)
        return 0;
    uint32_t nc = e->wq_cap ? e->wq_cap * 2 : 64;
    emu_req **n = malloc(nc * sizeof *n);
    if (!n)
        return -1;
    for (uint32_t i = 0; i < e->wq_len; i++)
        n[i] = e->wq[(e->wq_head + i) % e->wq_cap];
    free(e->wq);
    e->wq = n;
    e->wq_cap = nc;
    e->wq_head = 0;
    return 0;
}
static int wq_ensure(st_emu_engine *e, uint32_t need)
{
    while (e->wq_cap < need) {
        uint32_t keep = e->wq_len;
        e->wq_len = e->wq_cap; /* full: wq_reserve grows */
        int rc = wq_reserve(e);
        e->wq_len = keep;
        if (rc < 0)
            return -1;
    }
    return 0;
}
static int wq_push_back(st_emu_engine *e, emu_req *r)
{
    if (wq_reserve(e) < 0)
        return -1;
    e->wq[(e->wq_head + e->wq_len) % e->wq_cap] = r;
    e->wq_len++;
    return 0;
}
static int wq_push_front(st_emu_engine *e, emu_req *r)
{
    if (wq_reserve(e) < 0)
        return -1;
    e->wq_head = (e->wq_head + e->wq_cap - 1) % e->wq_cap;
    e->wq[e->wq_head] = r;
    e->wq_len++;
    return 0;
}
static emu_req *wq_front(st_emu_engine *e) { return e->wq_len ? e->wq[e->wq_head] : NULL; }
static void wq_pop_front(st_emu_engine *e)
{
    e->wq_head = (e->wq_head + 1) % e->wq_cap;
    e->wq_len--;
}

/* Whether a running request is not held (it can take a step). */
static int any_running(const st_emu_engine *e)
{
    for (uint32_t i = 0; i < e->n_run; i++)
        if (!e->run[i]->held)
            return 1;
    return 0;
}

int st_emu_has_work(const st_emu_engine *e) { return e->wq_len > 0 || any_running(e); }

st_ns st_emu_next_ready(const st_emu_engine *e)
{
    if (any_running(e))
        return e->clock.now(e->clock.ctx);
    if (e->wq_len == 0)
        return -1;
    return e->wq[e->wq_head]->ready;
}

static int find_live(const st_emu_engine *e, uint64_t id, int *in_wait, uint32_t *idx)
{
    for (uint32_t i = 0; i < e->n_run; i++)
        if (e->run[i]->id == id) {
            *in_wait = 0;
            *idx = i;
            return 0;
        }
    for (uint32_t i = 0; i < e->wq_len; i++)
        if (e->wq[(e->wq_head + i) % e->wq_cap]->id == id) {
            *in_wait = 1;
            *idx = i;
            return 0;
        }
    return -1;
}

/* The prompt's form: not empty, a seeded one's ids up to its keyed part, the ids it keeps in the
 * vocabulary (a seed's own are). ST_EMU_ADD_OK or ST_EMU_ADD_INVALID with vLLM's message. */
static int check_prompt(const st_emu_engine *e, const st_emu_req_params *p, char *err, size_t errlen)
{
    if (p->n_ids == 0 || (!p->ids && !p->seeded)) {
        snprintf(err, errlen, "The prompt cannot be empty.");
        return ST_EMU_ADD_INVALID;
    }
    if (p->seeded && p->keyed_from && (p->keyed_from >= p->n_ids || !p->ids)) {
        snprintf(err, errlen, "internal error: a seeded prompt's ids end before its keyed part");
        return ST_EMU_ADD_INVALID;
    }
    uint32_t n_kept = p->seeded ? p->keyed_from : p->n_ids;
    for (uint32_t i = 0; i < n_kept; i++)
        if (p->ids[i] >= e->cfg.model.vocab) {
            snprintf(err, errlen, "Token id %u is out of vocabulary", p->ids[i]);
            return ST_EMU_ADD_INVALID;
        }
    return ST_EMU_ADD_OK;
}

int st_emu_add_request(st_emu_engine *e, const st_emu_req_params *p, char *err, size_t errlen)
{
    uint32_t L = e->mem.max_model_len;
    if (check_prompt(e, p, err, errlen) != ST_EMU_ADD_OK)
        return ST_EMU_ADD_INVALID;
    uint32_t n_kept = p->seeded ? p->keyed_from : p->n_ids; /* the ids it keeps (hashes) */
    if (p->n_ids >= L || (p->max_tokens && (p->max_tokens > L || (uint64_t)p->n_ids + p->max_tokens > L))) {
        uint64_t m = p->max_tokens; /* quoted as the client sent it */
        if (p->n_ids >= L && !p->max_tokens)
            snprintf(err, errlen,
                     "This model's maximum context length is %u tokens. However, your request has "
                     "%u input tokens. Please reduce the length of the input messages.",
                     L, p->n_ids);
        else
            snprintf(err, errlen,
                     "You passed %u input tokens and requested %llu output tokens. However, the "
                     "model's context length is only %u tokens, resulting in a maximum input length "
                     "of %lld tokens. Please reduce the length of the input prompt.",
                     p->n_ids, (unsigned long long)m, L, (long long)L - (long long)m);
        return ST_EMU_ADD_TOO_LONG;
    }
    emu_req *r = e->n_spare ? e->spare[--e->n_spare] : calloc(1, sizeof *r);
    if (!r)
        goto nomem;
    { /* a spare one keeps its arrays; everything else starts afresh */
        uint32_t *tk = r->tokens, *bl = r->blocks, cp = r->cap_prompt, cb = r->cap_blocks;
        uint64_t *bh = r->bhash;
        *r = (emu_req){ .tokens = tk, .blocks = bl, .bhash = bh, .cap_prompt = cp, .cap_blocks = cb };
    }
    r->id = p->id;
    r->user = p->user;
    r->n_prompt = p->n_ids;
    r->seeded = p->seeded != 0;
    r->unlisted = r->seeded && !p->replayed;
    r->seed = p->seed;
    r->keyed_from = r->seeded ? p->keyed_from : 0;
    r->max_tokens = p->max_tokens ? (uint32_t)p->max_tokens : L - p->n_ids; /* <= L: checked above */
    r->cap_tokens = r->n_prompt + r->max_tokens;
    uint32_t maxblocks = (r->cap_tokens + e->cfg.block_size - 1) / e->cfg.block_size;
    if (n_kept && room_for((void **)&r->tokens, &r->cap_prompt, n_kept, sizeof *r->tokens) < 0)
        goto nomem;
    uint32_t cb = r->cap_blocks; /* blocks and bhash share one capacity */
    if (room_for((void **)&r->bhash, &cb, maxblocks, sizeof *r->bhash) < 0)
        goto nomem;
    if (room_for((void **)&r->blocks, &r->cap_blocks, maxblocks, sizeof *r->blocks) < 0)
        goto nomem;
    if (n_kept)
        memcpy(r->tokens, p->ids, (size_t)n_kept * sizeof *p->ids);
    uint32_t given = n_kept / e->cfg.block_size; /* blocks hashed from its ids: the chain may be given */
    if (p->hashes && given) {
        r->n_bhash = p->n_hashes < given ? p->n_hashes : given;
        memcpy(r->bhash, p->hashes, (size_t)r->n_bhash * sizeof *r->bhash);
    }
    r->n_tokens = p->n_ids;
    r->kv_external = p->kv_external < p->n_ids ? p->kv_external : p->n_ids - 1;
    r->arrival = p->arrival >= 0 ? p->arrival : e->clock.now(e->clock.ctx);
    r->first_scheduled = r->first_token = -1;
    r->ready = r->arrival;
    if (!e->cfg.no_frontend) {
        /* The API server handles requests in order on one core: this one's parsing and
         * tokenisation start when it is free, then the fixed latency to the engine core. */
        const st_emu_tuning *t = &e->cfg.tune;
        r->fe_factor = st_emu_fe_factor(t, p->chat);
        st_ns cost = (st_ns)(st_emu_fe_request_cpu_s(&e->cfg, p->chat) * 1e9), done;
        if (r->arrival < e->fe_batch) {
            /* it reached the server while the latest step ran, before that step's tokens did
             * (a virtual-time caller adds it after the step): handled ahead of them; their
             * delivery times stand, the queue's end moves by its cost */
            st_ns start = e->fe_pre > r->arrival ? e->fe_pre : r->arrival;
            done = e->fe_pre = start + cost;
            e->fe_free += cost;
        } else {
            st_ns start = e->fe_free > r->arrival ? e->fe_free : r->arrival;
            done = e->fe_free = start + cost;
        }
        r->ready = done + (st_ns)(t->fe_latency_s * r->fe_factor * 1e9);
    }
    if (wq_push_back(e, r) < 0)
        goto nomem;
    return ST_EMU_ADD_OK;
nomem:
    req_destroy(r);
    snprintf(err, errlen, "out of memory");
    return ST_EMU_ADD_NOMEM;
}

/* The first of r's blocks that no lookup finds until a preemption lists them (list_generated), held
 * anonymously (blocks.h): every block when prefix caching is off, a seeded request's unlisted keyed
 * blocks (cache_full_blocks), else none. A request's named blocks come first: its hits and the blocks
 * before this one. */
static uint32_t anon_from(const st_emu_engine *e, const emu_req *r)
{
    if (!e->cfg.enable_prefix_caching)
        return 0;
    return r->unlisted ? r->keyed_from / e->cfg.block_size : UINT32_MAX;
}

/* Of the next `need` blocks r takes, how many are named. */
static uint32_t named_part(const st_emu_engine *e, const emu_req *r, uint32_t need)
{
    uint32_t from = anon_from(e, r);
    if (r->n_named < r->n_blocks || r->n_blocks >= from)
        return 0;
    return from - r->n_blocks < need ? from - r->n_blocks : need;
}

/* Takes r's next `need` blocks from the pool, in order: named, then anonymous from anon_from on (the same
 * blocks from the same places of the free queue as naming them all). 0, -1 too few free (nothing taken),
 * -2 out of memory. */
static int take_blocks(st_emu_engine *e, emu_req *r, uint32_t need)
{
    if (need > e->pool.nfree)
        return -1;
    uint32_t named = named_part(e, r, need);
    if (named) {
        int rc = st_emu_blocks_take(&e->pool, named, r->blocks + r->n_named);
        if (rc < 0)
            return rc;
        r->n_named += named;
    }
    if (need > named)
        st_emu_blocks_take_anon(&e->pool, need - named); /* cannot fail: checked above */
    r->n_blocks += need;
    return 0;
}

/* Releases r's blocks, the last first (vLLM frees a request's blocks in reverse): its anonymous tail,
 * those never registered before the registered ones (unlisted: [n_named, n_cached)), then the named. */
static void req_release_blocks(st_emu_engine *e, emu_req *r)
{
    uint32_t anon = r->n_blocks - r->n_named;
    if (anon) {
        uint32_t full = r->n_cached > r->n_named ? r->n_cached - r->n_named : 0;
        if (full > anon)
            full = anon;
        st_emu_blocks_release_anon(&e->pool, anon - full, full);
        if (e->pool.failed)
            e->oom = 1;
    }
    st_emu_blocks_release(&e->pool, r->blocks, r->n_named);
    r->n_blocks = r->n_named = 0;
    r->n_cached = 0;
}

void st_emu_set_output_prompts(st_emu_engine *e, int on) { e->no_output_prompts = !on; }

int st_emu_hold(st_emu_engine *e, uint64_t id, int on)
{
    int w;
    uint32_t idx;
    if (find_live(e, id, &w, &idx) < 0)
        return -1;
    emu_req *r = w ? e->wq[(e->wq_head + idx) % e->wq_cap] : e->run[idx];
    r->held = on != 0;
    return 0;
}

int st_emu_abort(st_emu_engine *e, uint64_t id)
{
    int w;
    uint32_t idx;
    if (find_live(e, id, &w, &idx) < 0)
        return -1;
    emu_req *r;
    if (w) {
        uint32_t pos = (e->wq_head + idx) % e->wq_cap;
        r = e->wq[pos];
        for (uint32_t i = idx; i + 1 < e->wq_len; i++)
            e->wq[(e->wq_head + i) % e->wq_cap] = e->wq[(e->wq_head + i + 1) % e->wq_cap];
        e->wq_len--;
    } else {
        r = e->run[idx];
        memmove(&e->run[idx], &e->run[idx + 1], (e->n_run - idx - 1) * sizeof *e->run);
        e->n_run--;
    }
    req_release_blocks(e, r);
    e->st.finished_abort++;
    req_free(e, r);
    return 0;
}

/* Key of full block j of a seeded request (st_emu_req_params.seeded), after its parent's key: a
 * block within the prompt holds ids that depend on (seed, j) alone, which the chain from the seed
 * carries; a block with generated tokens holds the prompt's tail and the request's output tokens,
 * which depend on (seed, n_prompt, id): the parent carries the seed, the rest is mixed in. Equal
 * keys, equal ids; different ones, different ids, except for a 64-bit collision (the same odds as
 * two hashes of different ids, or a key against a hash). Never 0 (st_emu_block_hash's "no hash"). */
static uint64_t seeded_key(const emu_req *r, uint64_t parent, uint32_t j, uint32_t bs)
{
    uint32_t j0 = r->keyed_from / bs; /* the first keyed block: the seed (and the ids before keyed_from) */
    if (j == j0) {
        uint32_t head = r->keyed_from - j0 * bs;
        uint64_t p0 = head ? st_emu_block_hash(parent, r->tokens + (size_t)j0 * bs, head) : parent;
        parent = p0 ^ st_mix64(r->seed ^ 0x5eedb10c5eedb10cULL ^ ((uint64_t)head << 40));
    }
    uint64_t h = st_mix64(parent + 0x632be59bd9b4e019ULL * (j + 1));
    if ((uint64_t)(j + 1) * bs > r->n_prompt)
        h = st_mix64(h ^ st_mix64(r->id * 0x9e3779b97f4a7c15ULL + r->n_prompt));
    return h ? h : 1;
}

/* Hash of full block k of r (computed once, chained). A block within the prompt hashes the
 * prompt's ids in place; one with generated tokens gets them from st_emu_output_token. A seeded
 * request's blocks get their keys instead (seeded_key). */
static uint64_t req_block_hash(st_emu_engine *e, emu_req *r, uint32_t k)
{
    uint32_t bs = e->cfg.block_size;
    while (r->n_bhash <= k) {
        uint32_t j = r->n_bhash;
        uint64_t parent = j ? r->bhash[j - 1] : 0;
        if (r->seeded && (uint64_t)(j + 1) * bs > r->keyed_from) {
            r->bhash[j] = seeded_key(r, parent, j, bs);
            r->n_bhash++;
            continue;
        }
        uint64_t from = (uint64_t)j * bs;
        const uint32_t *ids = r->tokens + from;
        if (from + bs > r->n_prompt) {
            for (uint32_t q = 0; q < bs; q++) {
                uint64_t pos = from + q;
                e->hash_ids[q] = pos < r->n_prompt
                                     ? r->tokens[pos]
                                     : st_emu_output_token(r->id, (uint32_t)(pos - r->n_prompt), e->cfg.model.vocab);
            }
            ids = e->hash_ids;
        }
        r->bhash[j] = st_emu_block_hash(parent, ids, bs);
        r->n_bhash++;
    }
    return r->bhash[k];
}

/* Registers the request's newly full blocks (up to `tokens` computed tokens) in the cache. */
static void cache_full_blocks(st_emu_engine *e, emu_req *r, uint32_t tokens)
{
    if (!e->cfg.enable_prefix_caching)
        return;
    uint32_t full = tokens / e->cfg.block_size;
    if (full > r->n_blocks)
        full = r->n_blocks;
    if (r->n_cached >= r->n_named) { /* none named left to register: anonymous ones are registered by */
        if (full > r->n_cached)      /* n_cached alone (req_release_blocks) */
            r->n_cached = full;
        return;
    }
    uint32_t listed = full; /* blocks from here on hold generated tokens: unlisted when no prompt carries them */
    if (e->no_output_prompts && listed > r->n_prompt / e->cfg.block_size)
        listed = r->n_prompt / e->cfg.block_size;
    if (r->unlisted && listed > r->keyed_from / e->cfg.block_size) /* no other request looks its keyed */
        listed = r->keyed_from / e->cfg.block_size; /* blocks up (its promise): unlisted until a preemption */
    if (listed > r->n_cached + 1) { /* several blocks (an admitted prompt): their map slots fetched ahead */
        req_block_hash(e, r, listed - 1);
        for (uint32_t k = r->n_cached; k < listed; k++)
            st_emu_blocks_prefetch(&e->pool, r->blocks[k], r->bhash[k]);
    }
    /* (listed <= n_named: anonymous blocks are unlisted ones, registered by n_cached alone) */
    uint32_t named = full < r->n_named ? full : r->n_named;
    for (uint32_t k = r->n_cached; k < named; k++) {
        if (k < listed)
            st_emu_blocks_set_hash(&e->pool, r->blocks[k], req_block_hash(e, r, k));
        else
            st_emu_blocks_set_unlisted(&e->pool, r->blocks[k]);
    }
    if (full > r->n_cached)
        r->n_cached = full;
}

/* Whether allocate_slots(e, r, num_new, hits, n_hits) finds its blocks (the blocks to take in
 * *need); changes nothing. */
static int slots_fit(const st_emu_engine *e, const emu_req *r, uint32_t num_new, const uint32_t *hits, uint32_t n_hits,
                     uint32_t *need)
{
    uint32_t bs = e->cfg.block_size;
    uint32_t total = r->num_computed + n_hits * bs + num_new;
    uint32_t need_total = (total + bs - 1) / bs;
    uint32_t have = r->n_blocks + n_hits;
    *need = need_total > have ? need_total - have : 0;
    uint32_t evictable_hits = 0;
    for (uint32_t i = 0; i < n_hits; i++)
        if (st_emu_blocks_ref(&e->pool, hits[i]) == 0)
            evictable_hits++;
    return (uint64_t)*need + evictable_hits <= e->pool.nfree;
}

/* vLLM's allocate_slots: room for num_new more tokens after num_computed (+ hits blocks
 * given in `hits`, already looked up). 0 or -1 (nothing changed). */
static int allocate_slots(st_emu_engine *e, emu_req *r, uint32_t num_new, const uint32_t *hits, uint32_t n_hits)
{
    uint32_t bs = e->cfg.block_size;
    uint32_t need;
    if (!slots_fit(e, r, num_new, hits, n_hits, &need))
        return -1;
    if (st_emu_blocks_reserve(&e->pool, need) < 0) {
        e->oom = 1; /* st_emu_step fails */
        return -1;
    }
    for (uint32_t i = 0; i < n_hits; i++) { /* (hits come first: a waiting request holds no blocks) */
        st_emu_blocks_touch(&e->pool, hits[i]);
        r->blocks[r->n_named++] = hits[i];
        r->n_blocks++;
    }
    if (n_hits) {
        r->n_cached = r->n_blocks;
    }
    if (need && take_blocks(e, r, need) < 0)
        return -1; /* cannot happen: checked above, room reserved */
    uint32_t total = r->num_computed + n_hits * bs + num_new;
    cache_full_blocks(e, r, total < r->n_tokens ? total : r->n_tokens); /* never the draft tokens */
    return 0;
}

/* Whether waiting request r (its n_hits leading blocks cached, in `hits`) may be admitted to compute
 * num_new tokens now: room for those, and from EMU_VLLM_FULL_ISL_VERSION on for all of its tokens
 * (vllm/v1/core/kv_cache_manager.py, allocate_slots: with full_sequence_must_fit, the whole
 * sequence's blocks against the free ones before the chunk's). Changes nothing. */
static int admission_fits(const st_emu_engine *e, const emu_req *r, uint32_t num_new, const uint32_t *hits,
                          uint32_t n_hits)
{
    uint32_t need;
    if (e->cfg.vllm_version >= EMU_VLLM_FULL_ISL_VERSION &&
        !slots_fit(e, r, r->n_tokens - n_hits * e->cfg.block_size, hits, n_hits, &need))
        return 0;
    return slots_fit(e, r, num_new, hits, n_hits, &need);
}

static int push_u64(uint64_t **arr, uint32_t *n, uint32_t *cap, uint64_t v)
{
    if (grow((void **)arr, cap, *n + 1, sizeof **arr) < 0)
        return -1;
    (*arr)[(*n)++] = v;
    return 0;
}

/* Lists r's unlisted blocks (st_emu_set_output_prompts; all of a seeded request's) before it releases
 * them on a preemption: its recomputation looks them up by their hashes, as it would have found them
 * listed. (No other block holds their hashes, and a request's released blocks are evicted last first,
 * so those that stay cached are a leading run, as they would be listed.) */
static void list_generated(st_emu_engine *e, emu_req *r)
{
    if (!e->no_output_prompts && !r->unlisted)
        return;
    r->listed = 1;
    if (r->n_cached > r->n_named) { /* the anonymous ones it lists get named */
        if (st_emu_blocks_name(&e->pool, r->n_cached - r->n_named, r->blocks + r->n_named) < 0) {
            e->oom = 1;
            return;
        }
        r->n_named = r->n_cached;
    }
    for (uint32_t k = (r->unlisted ? r->keyed_from : r->n_prompt) / e->cfg.block_size; k < r->n_cached; k++)
        st_emu_blocks_set_hash(&e->pool, r->blocks[k], req_block_hash(e, r, k));
}

static void preempt(st_emu_engine *e, emu_req *r, uint32_t *n_pre)
{
    list_generated(e, r);
    req_release_blocks(e, r);
    r->num_computed = 0;
    e->st.preemptions++;
    wq_push_front(e, r); /* capacity: the deque never holds more than all live requests */
    push_u64(&e->preempted, n_pre, &e->cap_preempted, r->id);
}

/* The prefix-cache lookup of waiting request r: its leading cached blocks into
 * e->scratch_blocks, *n_hits of them. 0, or -1 out of memory. */
static int prefix_hits(st_emu_engine *e, emu_req *r, uint32_t *n_hits)
{
    uint32_t bs = e->cfg.block_size;
    *n_hits = 0;
    if (!e->cfg.enable_prefix_caching)
        return 0;
    /* the last token is always recomputed: at most (n_tokens - 1) / bs full blocks */
    uint32_t maxb = (r->n_tokens - 1) / bs;
    if (r->unlisted && !r->listed && maxb > r->keyed_from / bs) /* none holds its keys yet */
        maxb = r->keyed_from / bs;
    if (grow((void **)&e->scratch_blocks, &e->cap_scratch, maxb + 1, sizeof *e->scratch_blocks) < 0)
        return -1;
    for (uint32_t k = 0; k < maxb; k++) {
        uint32_t b = st_emu_blocks_lookup(&e->pool, req_block_hash(e, r, k));
        if (b == ST_EMU_NIL)
            break;
        e->scratch_blocks[(*n_hits)++] = b;
    }
    return 0;
}

/* With async scheduling the engine core schedules step N+1 as soon as step N is handed to
 * the GPU (vllm/v1/engine/core.py, step_with_batch_queue: the batch queue holds two steps):
 * while the engine is busy, a step starting at `now` was scheduled when the previous one
 * started, so only requests that had reached the engine core by then can join it; one arriving
 * later waits a step more than without async scheduling. An idle engine schedules at once. */
static st_ns admission_cutoff(const st_emu_engine *e, st_ns now)
{
    if (st_emu_async_scheduling(&e->cfg) && e->last_start >= 0 && now >= e->last_end &&
        now - e->last_end <= (st_ns)(EMU_ASYNC_BUSY_GAP_S * 1e9))
        return e->last_start;
    return now;
}

/* One step's scheduling state: the token budget left, and the counts of scheduled, preempted
 * and admitted requests. */
typedef struct step_sched {
    uint32_t budget, n_sched, n_pre, n_adm;
} step_sched;

/* The per-step arrays for `live` requests, grown before the step so that it never allocates in
 * its middle. 0, or -1 out of memory. */
static int step_reserve(st_emu_engine *e, uint32_t live)
{
    if (grow((void **)&e->sched, &e->cap_sched, live, sizeof *e->sched) < 0 ||
        grow((void **)&e->sched_new, &e->cap_sched_new, live, sizeof *e->sched_new) < 0 ||
        grow((void **)&e->events, &e->cap_events, live, sizeof *e->events) < 0 ||
        grow((void **)&e->sched_fe, &e->cap_sched_fe, live, sizeof *e->sched_fe) < 0 ||
        grow((void **)&e->work, &e->cap_work, live, sizeof *e->work) < 0)
        return -1;
    /* the waiting deque must take every running request back, the running list every
     * waiting one, without allocating in the middle of a step */
    if (wq_ensure(e, live + 1) < 0 || grow((void **)&e->run, &e->cap_run, live + 1, sizeof *e->run) < 0)
        return -1;
    return 0;
}

/* The tokens running request r computes this step: its new tokens, plus with speculation the
 * draft a decode verifies, trimmed to the budget (the draft first). */
static uint32_t running_new_tokens(st_emu_engine *e, emu_req *r, uint32_t budget)
{
    uint32_t num_new = r->n_tokens - r->num_computed;
    r->spec_draft = r->spec_acc = 0;
    if (e->cfg.spec.k && num_new == 1 && r->n_out > 0 && r->n_out + 1 < r->max_tokens && !r->held) {
        /* a decode with speculation verifies its draft in the same step (no draft past max_tokens) */
        r->spec_draft = st_emu_spec_draw(&e->cfg.spec, r->id, r->n_out, r->max_tokens - r->n_out - 1, &r->spec_acc);
        num_new += r->spec_draft;
    }
    if (num_new > budget) {
        uint32_t cut = num_new - budget < r->spec_draft ? num_new - budget : r->spec_draft;
        r->spec_draft -= cut; /* the token budget trims the draft first */
        if (r->spec_acc > r->spec_draft)
            r->spec_acc = r->spec_draft;
        num_new = budget;
    }
    return num_new;
}

/* Phase 1: running requests (decodes and unfinished chunked prefills), in admission order,
 * preempting the most recently admitted when blocks run out. 0, or -1 out of memory. */
static int schedule_running(st_emu_engine *e, step_sched *sc)
{
    for (uint32_t i = 0; i < e->n_run && sc->budget > 0;) {
        emu_req *r = e->run[i];
        uint32_t num_new = running_new_tokens(e, r, sc->budget);
        if (num_new == 0 || r->held) { /* a held request waits for its client, KV kept */
            i++;
            continue;
        }
        int scheduled = 1;
        while (allocate_slots(e, r, num_new, NULL, 0) < 0) {
            if (e->oom)
                return -1;
            emu_req *victim = e->run[--e->n_run]; /* the most recently admitted */
            preempt(e, victim, &sc->n_pre);
            if (victim == r) {
                scheduled = 0;
                break;
            }
        }
        if (!scheduled) {
            r->spec_draft = r->spec_acc = 0;
            break;
        }
        e->sched[sc->n_sched] = r;
        e->sched_new[sc->n_sched++] = num_new;
        sc->budget -= num_new;
        i++;
    }
    return 0;
}

/* Moves waiting request r (the head), its hit_tokens + ext tokens already computed, to the end of the
 * running list: admitted at `now`. */
static void admit_head(st_emu_engine *e, emu_req *r, uint32_t hit_tokens, uint32_t ext, st_ns now)
{
    wq_pop_front(e);
    e->run[e->n_run++] = r;
    r->num_computed = hit_tokens + ext;
    r->kv_external = 0; /* a preemption frees them: recomputed when admitted again */
    r->spec_draft = r->spec_acc = 0;
    r->admit_seq = ++e->admit_counter;
    if (e->cfg.enable_prefix_caching) {
        e->st.prefix_queries += r->n_tokens;
        e->st.prefix_hits += hit_tokens;
    }
    if (!r->admitted_once) {
        r->admitted_once = 1;
        r->cached_tokens = hit_tokens + ext;
        r->first_scheduled = now;
    }
}

/* admit_head, and num_new of its tokens scheduled this step. */
static void admit(st_emu_engine *e, step_sched *sc, emu_req *r, uint32_t hit_tokens, uint32_t ext, uint32_t num_new,
                  st_ns now)
{
    admit_head(e, r, hit_tokens, ext, now);
    push_u64(&e->admitted, &sc->n_adm, &e->cap_admitted, r->id);
    e->sched[sc->n_sched] = r;
    e->sched_new[sc->n_sched++] = num_new;
    sc->budget -= num_new;
}

/* Phase 2: waiting requests, only when nothing was preempted this step. 0; -1 out of memory;
 * -2 when the head can never fit. */
static int schedule_waiting(st_emu_engine *e, step_sched *sc, st_ns cutoff, st_ns now)
{
    while (sc->n_pre == 0 && e->wq_len > 0 && sc->budget > 0 && e->n_run < e->mem.max_num_seqs) {
        emu_req *r = wq_front(e);
        if (r->ready > cutoff)
            break; /* still in the API server (or arrived after this step was scheduled): FIFO, so
                      the ones behind it are too */
        uint32_t n_hits = 0, bs = e->cfg.block_size;
        if (prefix_hits(e, r, &n_hits) < 0)
            return -1;
        uint32_t hit_tokens = n_hits * bs;
        /* a KV connector's tokens beyond the local hit: allocated with the new ones, computed */
        uint32_t ext = r->kv_external > hit_tokens ? r->kv_external - hit_tokens : 0;
        uint32_t num_new = r->n_tokens - hit_tokens - ext;
        if (num_new > sc->budget)
            num_new = sc->budget;
        if (!admission_fits(e, r, ext + num_new, e->scratch_blocks, n_hits) ||
            allocate_slots(e, r, ext + num_new, e->scratch_blocks, n_hits) < 0) {
            if (e->oom)
                return -1;
            if (e->n_run == 0 && sc->n_sched == 0)
                return -2; /* every block is free or evictable and it still does not fit: it never will */
            break;
        }
        admit(e, sc, r, hit_tokens, ext, num_new, now);
    }
    return 0;
}

/* Request r's part of a step's batch b: nn tokens after its num_computed, r->spec_draft of them drafts
 * (a verification: 1 + draft tokens, each scored). Whether it is a decode; *sampled: whether it produces
 * a token (an lm_head row). */
static int batch_add(st_emu_batch *b, const emu_req *r, uint32_t nn, uint8_t *sampled)
{
    uint32_t real = nn - r->spec_draft; /* the tokens that are not drafts */
    double prior = r->num_computed;
    int decode = r->n_out > 0 && real == 1 && r->num_computed + 1 == r->n_tokens;
    b->tokens += nn;
    b->seqs++;
    if (decode)
        b->decode_tokens += nn;
    *sampled = r->num_computed + real == r->n_tokens;
    if (*sampled)
        b->sampled += 1 + r->spec_draft;
    b->attn_pairs += nn * prior + (double)nn * (nn + 1) / 2.0;
    b->kv_read_tokens += prior;
    return decode;
}

/* Phase 3: the step time of the n_sched scheduled requests, into res and e->work; the step's end. */
static st_ns step_time(st_emu_engine *e, uint32_t n_sched, st_ns now, st_emu_step_result *res)
{
    st_emu_batch b = { 0 };
    uint32_t spec_seqs = 0; /* decodes the proposer drafts for, and the context it reads */
    double spec_ctx = 0;
    for (uint32_t i = 0; i < n_sched; i++) {
        emu_req *r = e->sched[i];
        uint32_t nn = e->sched_new[i];
        st_emu_seq_work *wk = &e->work[i];
        *wk = (st_emu_seq_work){ .id = r->id, .user = r->user, .new_tokens = nn, .context = r->num_computed };
        wk->decode = (uint8_t)batch_add(&b, r, nn, &wk->sampled);
        if (wk->decode && e->cfg.spec.k) {
            spec_seqs++;
            spec_ctx += r->num_computed;
        }
    }
    st_emu_step_breakdown bd;
    double secs = st_emu_step_cache_seconds(&e->step_cache, &e->cfg, &b, &bd) +
                  st_emu_spec_proposer_seconds(&e->cfg, spec_seqs, spec_ctx);
    st_ns dur = (st_ns)(secs * 1e9);
    if (dur < 1)
        dur = 1;
    st_ns end = now + dur;
    e->last_start = now;
    e->last_end = end;
    res->duration = dur;
    res->tokens = b.tokens;
    res->decode_tokens = b.decode_tokens;
    res->prefill_tokens = b.tokens - b.decode_tokens;
    res->seqs = b.seqs;
    res->compute_s = bd.compute_s;
    res->memory_s = bd.memory_s;
    res->work = e->work;
    return end;
}

/* Request r's n_emit tokens of a step ending at `end`, as event ev. */
static void fill_event(st_emu_engine *e, emu_req *r, st_emu_event *ev, uint32_t n_emit, st_ns end)
{
    memset(ev, 0, sizeof *ev);
    ev->id = r->id;
    ev->user = r->user;
    ev->n_tokens = n_emit;
    ev->n_out = r->n_out;
    ev->prompt_tokens = r->n_prompt;
    ev->cached_tokens = r->cached_tokens;
    ev->arrival = r->arrival;
    ev->queued = r->ready;
    ev->first_scheduled = r->first_scheduled;
    if (r->n_out == n_emit) {
        ev->first = 1;
        r->first_token = end;
        e->st.prompt_tokens += r->n_prompt;
    }
    ev->first_token = r->first_token;
    if (r->n_out >= r->max_tokens || r->n_tokens >= e->mem.max_model_len)
        ev->finish = ST_EMU_FINISH_LENGTH;
}

/* Phase 4: applies the step's output to the n_sched scheduled requests: the events of those that
 * produced tokens, their count. */
static uint32_t apply_output(st_emu_engine *e, uint32_t n_sched, st_ns end)
{
    uint32_t n_ev = 0;
    for (uint32_t i = 0; i < n_sched; i++) {
        emu_req *r = e->sched[i];
        /* a verification keeps the KV of the accepted draft tokens; the rejected ones' slots are reused */
        r->num_computed += e->sched_new[i] - (r->spec_draft - r->spec_acc);
        if (r->num_computed < r->n_tokens)
            continue; /* chunked prefill: no token yet */
        uint32_t n_emit = 1 + r->spec_acc;
        for (uint32_t j = 0; j < n_emit; j++) {
            if (r->n_tokens < r->cap_tokens)
                r->n_tokens++; /* the token itself is st_emu_output_token's (req_block_hash) */
            r->n_out++;
        }
        e->st.generation_tokens += n_emit;
        if (r->spec_draft) {
            e->st.spec_drafts++;
            e->st.spec_draft_tokens += r->spec_draft;
            e->st.spec_accepted += r->spec_acc;
            for (uint32_t j = 0; j < r->spec_acc && j < ST_EMU_SPEC_MAX_K; j++)
                e->st.spec_accepted_pos[j]++;
        }
        r->spec_draft = r->spec_acc = 0;
        e->sched_fe[n_ev] = r->fe_factor > 0 ? r->fe_factor : 1.0;
        fill_event(e, r, &e->events[n_ev++], n_emit, end);
    }
    return n_ev;
}

/* Finished requests leave the running list and free their blocks. */
static void release_finished(st_emu_engine *e)
{
    uint32_t w = 0;
    for (uint32_t i = 0; i < e->n_run; i++) {
        emu_req *r = e->run[i];
        if (r->n_out >= r->max_tokens || (r->n_out > 0 && r->n_tokens >= e->mem.max_model_len)) {
            req_release_blocks(e, r);
            e->st.finished_length++;
            req_free(e, r);
        } else {
            e->run[w++] = r;
        }
    }
    e->n_run = w;
}

/* The API server detokenises and streams every token, one after another on its queue: a
 * token reaches its client when the server has handled it (the step's end while it keeps up). */
static void frontend_due(st_emu_engine *e, uint32_t n_ev, st_ns end)
{
    if (!e->cfg.no_frontend && n_ev) {
        st_ns start = e->fe_free > end ? e->fe_free : end;
        e->fe_pre = e->fe_free;
        e->fe_batch = start;
        double per = e->cfg.tune.fe_token_cpu_s * 1e9, done = 0;
        for (uint32_t i = 0; i < n_ev; i++) {
            done += per * e->sched_fe[i];
            e->events[i].due = start + (st_ns)done;
        }
        e->fe_free = start + (st_ns)done;
    } else {
        for (uint32_t i = 0; i < n_ev; i++)
            e->events[i].due = end;
    }
}

int st_emu_step(st_emu_engine *e, st_emu_step_result *res)
{
    memset(res, 0, sizeof *res);
    st_ns now = e->clock.now(e->clock.ctx);
    res->start = now;
    if (e->oom)
        return -1; /* a release or a listing ran out of memory (an abort's, a step's): the pool lost blocks */
    if (!st_emu_has_work(e))
        return 1;
    if (step_reserve(e, e->n_run + e->wq_len) < 0)
        return -1;
    step_sched sc = { .budget = e->mem.max_num_batched_tokens };
    st_ns cutoff = admission_cutoff(e, now);
    if (schedule_running(e, &sc) < 0)
        return -1;
    int rc = schedule_waiting(e, &sc, cutoff, now);
    if (rc < 0)
        return rc;
    if (sc.n_sched == 0)
        return 1; /* nothing schedulable yet (the waiting head is still in the API server) */
    st_ns end = step_time(e, sc.n_sched, now, res);
    uint32_t n_ev = apply_output(e, sc.n_sched, end);
    release_finished(e);
    if (e->oom)
        return -1; /* a preemption's listing or a release ran out of memory (the step's allocations did not) */
    frontend_due(e, n_ev, end);
    res->due_base = !e->cfg.no_frontend && n_ev ? e->fe_batch : end;
    res->events = e->events;
    res->n_events = n_ev;
    res->admitted = e->admitted;
    res->n_admitted = sc.n_adm;
    res->preempted = e->preempted;
    res->n_preempted = sc.n_pre;
    e->st.steps++;
    return 0;
}

/* ---- runs of steps (st_emu_skip_steps) -----------------------------------------------------
 * Between two events every step schedules the same running requests, one decode token each: the
 * step's batch differs from the previous one only in its context (one token more per sequence),
 * blocks are taken at known steps (a sequence's next block when its tokens cross a block
 * boundary) and full blocks registered in the prefix cache at known steps. A waiting request the
 * step admits joins the run: its prefill is in that step's batch, and from the next step on it is
 * one more decode (a chunked prefill ends the run with its step). With a driver that follows the run
 * (st_emu_skip_steps_hooked), a request's last step does not end it either: the request leaves in the
 * run and the driver sends what is due between steps. The run below applies exactly what
 * st_emu_step would, in the same order (block takes and registrations step by step in running order,
 * then the admissions, the step time from st_emu_step_seconds of the same batch), without the
 * scheduler's per-step passes over the queues, the per-step events or the driver's per-step work. */

#define SKIP_NONE UINT32_MAX
#define SKIP_DEAD (UINT32_MAX - 1) /* skip_j0 of a sequence that finished in the run (hooks) */
#define SKIP_DEAD_MAX 32u          /* finished entries a run keeps at least before it ends to drop them */

/* A run of steps in progress: its decodes and their computed context, the engine's clocks and the API
 * server's queue as of the step being applied. */
typedef struct skip_run {
    uint32_t n; /* sequences that decode in the step being applied */
    uint32_t bs, budget;
    int bs_pow2; /* bs is a power of two (vLLM's are): j mod bs without a division */
    int async;   /* st_emu_async_scheduling */
    st_ns t, fe_free, fe_pre, fe_batch, fe_total, last_start, last_end;
    double fe_done; /* the API server's work on one step's tokens, in running order (ns, as frontend_due sums) */
    uint64_t C, kmax, j;
    st_emu_skip_hooks *hooks; /* NULL: the run ends with the first step in which a request finishes */
    uint32_t alive;           /* sequences in the run that have not finished (the running requests) */
    uint32_t dead;            /* with hooks: those that have (their entries stay until the run ends) */
    uint32_t dead_end;        /* with hooks: 1 + the highest running index of those (0: none) */
    /* with hooks, while every sequence in the run has the same share u of the API server's queue: a live
     * sequence's place on it is skip_sums[its rank among the live ones + 1], whichever have finished, and
     * stale says that some finished since the live ones' due_off were last written (skip_write_offs) */
    int uniform, stale;
    double u;
    uint32_t running_peak, waiting_peak; /* the counts st_emu_get_stats gives after each step, at their highest */
    uint32_t nfree_min;                  /* and the fewest free blocks (the highest KV usage: skip_kv_peak) */
} skip_run;

/* The counts after a step (its finished requests gone), as st_emu_get_stats gives them, into the run's
 * peaks. */
static void skip_note_counts(const st_emu_engine *e, skip_run *s)
{
    if (s->alive > s->running_peak)
        s->running_peak = s->alive;
    if (e->wq_len > s->waiting_peak)
        s->waiting_peak = e->wq_len;
    if (e->pool.nfree < s->nfree_min)
        s->nfree_min = e->pool.nfree;
}

/* The highest KV usage st_emu_get_stats gave after a step of the run: its usage with the fewest free blocks
 * (1 - nfree / n, rounded, never falls as nfree falls). */
static double skip_kv_peak(const st_emu_engine *e, const skip_run *s)
{
    double pool_n = e->pool.n, kv = pool_n ? 1.0 - s->nfree_min / pool_n : 0;
    return kv > 0 ? kv : 0;
}

/* Room for the run's per-sequence arrays for n sequences and its bs groups. 0, or -1 out of memory. */
static int skip_reserve(st_emu_engine *e, uint32_t n, uint32_t bs)
{
    if (n <= e->cap_skip_runs && bs <= e->cap_skip_group)
        return 0;
    if (grow((void **)&e->skip_seq, &e->cap_skip_seq, n, sizeof *e->skip_seq) < 0 ||
        grow((void **)&e->skip_first, &e->cap_skip_first, n, sizeof *e->skip_first) < 0 ||
        grow((void **)&e->skip_j0, &e->cap_skip_j0, n, sizeof *e->skip_j0) < 0 ||
        grow((void **)&e->skip_next, &e->cap_skip_next, n, sizeof *e->skip_next) < 0 ||
        grow((void **)&e->skip_share, &e->cap_skip_share, n, sizeof *e->skip_share) < 0 ||
        grow((void **)&e->skip_fin, &e->cap_skip_fin, n, sizeof *e->skip_fin) < 0 ||
        grow((void **)&e->skip_heap, &e->cap_skip_heap, n, sizeof *e->skip_heap) < 0 ||
        grow((void **)&e->run, &e->cap_run, n, sizeof *e->run) < 0)
        return -1;
    if (e->cap_skip_group < bs) {
        uint32_t *h = realloc(e->skip_head, (size_t)bs * sizeof *h);
        if (!h)
            return -1;
        e->skip_head = h;
        uint32_t *t = realloc(e->skip_tail, (size_t)bs * sizeof *t);
        if (!t)
            return -1;
        e->skip_tail = t;
        uint32_t *z = realloc(e->skip_gsize, (size_t)bs * sizeof *z);
        if (!z)
            return -1;
        e->skip_gsize = z;
        e->cap_skip_group = bs;
    }
    e->cap_skip_runs = n;
    return 0;
}

/* Sequence i (running index) that decodes from the run's step j0 on, with nc computed tokens in nb
 * blocks before it: it takes its next block at the step where nc + (j - j0) + 1 first exceeds nb * bs
 * (then every bs steps), j = j0 + nb * bs - nc, and registers a full block one step before each take
 * (cache_full_blocks): put in that step's group (mod bs), after the sequences before it. */
static void skip_join_group(st_emu_engine *e, const skip_run *s, uint32_t i, uint32_t j0, uint64_t nc, uint64_t nb)
{
    uint64_t first = j0 + nb * s->bs - nc;
    uint32_t p = (uint32_t)(s->bs_pow2 ? first & (s->bs - 1) : first % s->bs);
    e->skip_first[i] = first;
    e->skip_j0[i] = j0;
    e->skip_next[i] = SKIP_NONE;
    if (e->skip_tail[p] == SKIP_NONE)
        e->skip_head[p] = i;
    else
        e->skip_next[e->skip_tail[p]] = i;
    e->skip_tail[p] = i;
    e->skip_gsize[p]++;
}

/* Sequence i, finished in the run, out of its group (skip_join_group): the steps' walks over the groups
 * pass only the running ones. */
static void skip_leave_group(st_emu_engine *e, const skip_run *s, uint32_t i)
{
    uint64_t first = e->skip_first[i];
    uint32_t p = (uint32_t)(s->bs_pow2 ? first & (s->bs - 1) : first % s->bs), prev = SKIP_NONE, a;
    for (a = e->skip_head[p]; a != i && a != SKIP_NONE; a = e->skip_next[a])
        prev = a;
    if (a == SKIP_NONE)
        return; /* not there (never: a sequence that finishes in a run has joined its group) */
    if (prev == SKIP_NONE)
        e->skip_head[p] = e->skip_next[i];
    else
        e->skip_next[prev] = e->skip_next[i];
    if (e->skip_tail[p] == i)
        e->skip_tail[p] = prev;
    e->skip_gsize[p]--;
}

/* The steps a request that decodes next has before it finishes: at max_tokens or at max_model_len
 * (0: it has finished). */
static uint64_t skip_steps_left(const st_emu_engine *e, const emu_req *r)
{
    uint64_t fin = r->n_out < r->max_tokens ? r->max_tokens - r->n_out : 0;
    uint64_t fin_len = r->n_tokens < e->mem.max_model_len ? e->mem.max_model_len - r->n_tokens : 0;
    return fin_len < fin ? fin_len : fin;
}

static void skip_heap_push(st_emu_engine *e, uint64_t key)
{
    uint64_t *h = e->skip_heap;
    uint32_t k = e->n_skip_heap++;
    while (k > 0 && h[(k - 1) / 2] > key) {
        h[k] = h[(k - 1) / 2];
        k = (k - 1) / 2;
    }
    h[k] = key;
}

static void skip_heap_pop(st_emu_engine *e)
{
    uint64_t *h = e->skip_heap, last = h[--e->n_skip_heap];
    uint32_t k = 0, n = e->n_skip_heap;
    for (;;) {
        uint32_t c = 2 * k + 1;
        if (c >= n)
            break;
        if (c + 1 < n && h[c + 1] < h[c])
            c++;
        if (h[c] >= last)
            break;
        h[k] = h[c];
        k = c;
    }
    if (n)
        h[k] = last;
}

/* With hooks: sequence i finishes in the run's step `step` (room: skip_reserve). Running order is
 * admission order, and requests admitted earlier mostly finish earlier: a key above every one queued goes
 * to the back of the queue, any other into the heap. */
static void skip_fin_push(st_emu_engine *e, uint64_t step, uint32_t i)
{
    uint64_t key = step << 32 | i;
    if (e->skip_fin_head == e->n_skip_fin || key > e->skip_fin[e->n_skip_fin - 1])
        e->skip_fin[e->n_skip_fin++] = key;
    else
        skip_heap_push(e, key);
}

/* With hooks: the sequence that finishes first (the lowest key of the queue's front and the heap's top),
 * taken out if it finishes in step j. Its running index, or SKIP_NONE when none does. */
static uint32_t skip_fin_take(st_emu_engine *e, uint64_t j)
{
    uint64_t q = e->skip_fin_head < e->n_skip_fin ? e->skip_fin[e->skip_fin_head] : UINT64_MAX;
    uint64_t h = e->n_skip_heap ? e->skip_heap[0] : UINT64_MAX, key = h < q ? h : q;
    if (key == UINT64_MAX || key >> 32 != j)
        return SKIP_NONE;
    if (h < q)
        skip_heap_pop(e);
    else
        e->skip_fin_head++;
    return (uint32_t)(key & 0xffffffffu);
}

/* skip_sums for shares u up to skip_sums[m]. 0, or -1 out of memory. */
static int skip_sums_upto(st_emu_engine *e, double u, uint32_t m)
{
    if (e->n_skip_sums && e->skip_sums_u != u)
        e->n_skip_sums = 0;
    if (m >= e->n_skip_sums && grow((void **)&e->skip_sums, &e->cap_skip_sums, m + 1, sizeof *e->skip_sums) < 0)
        return -1;
    if (e->n_skip_sums == 0) {
        e->skip_sums[0] = 0;
        e->skip_sums_u = u;
        e->n_skip_sums = 1;
    }
    for (; e->n_skip_sums <= m; e->n_skip_sums++)
        e->skip_sums[e->n_skip_sums] = e->skip_sums[e->n_skip_sums - 1] + u; /* as frontend_due sums */
    return 0;
}

/* With s->uniform: the due_off of the live sequences before running index `end`, from their ranks. */
static void skip_write_offs(st_emu_engine *e, skip_run *s, uint32_t end)
{
    uint32_t rank = 0;
    for (uint32_t i = 0; i < end; i++)
        if (e->skip_j0[i] != SKIP_DEAD)
            e->skip_seq[i].due_off = (st_ns)e->skip_sums[++rank];
    s->stale = 0;
}

/* Sequence `end` joins the run with another share than the others' (or none), or the sums ran out of
 * memory: the live ones before it get their due_off, and the run goes on without s->uniform. */
static void skip_leave_uniform(st_emu_engine *e, skip_run *s, uint32_t end)
{
    if (s->stale)
        skip_write_offs(e, s, end);
    s->uniform = 0;
}

/* One pass over the running requests (skip_reserve first). Whether every one is a decode that does not
 * finish within the run (0) or not (1); when it is, the computed context s->C, the run's longest length
 * s->kmax, the groups (skip_join_group), and each sequence's result entry with its offset on the API
 * server's queue. */
static int skip_prepare(st_emu_engine *e, skip_run *s)
{
    uint32_t bs = s->bs, n = s->n;
    st_emu_skip_seq *sq = e->skip_seq;
    double per = e->cfg.tune.fe_token_cpu_s * 1e9, done = 0;
    int caching = e->cfg.enable_prefix_caching;
    s->C = 0;
    s->kmax = UINT64_MAX;
    for (uint32_t p = 0; p < bs; p++) {
        e->skip_head[p] = e->skip_tail[p] = SKIP_NONE;
        e->skip_gsize[p] = 0;
    }
    for (uint32_t i = 0; i < n; i++) {
        const emu_req *r = e->run[i];
        uint64_t room = (uint64_t)r->n_blocks * bs;
        if (r->held || r->n_out == 0 || r->num_computed + 1 != r->n_tokens || r->n_out >= r->max_tokens ||
            r->n_tokens >= e->mem.max_model_len || room < r->num_computed)
            return 1;
        /* full blocks: num_computed / bs (at most n_blocks: room >= num_computed); st_emu_step would
         * register more than the newly full block when fewer are registered */
        if (caching && ((uint64_t)r->n_cached + 1) * bs <= r->num_computed)
            return 1;
        /* step j (0-based) emits output token n_out + j + 1; the run ends with the first step in which a
         * request finishes */
        uint64_t fin = skip_steps_left(e, r);
        if (s->hooks)
            skip_fin_push(e, fin - 1, i);
        else if (fin < s->kmax)
            s->kmax = fin;
        s->C += r->num_computed;
        skip_join_group(e, s, i, 0, r->num_computed, r->n_blocks);
        e->skip_share[i] = per * (r->fe_factor > 0 ? r->fe_factor : 1.0);
        done += e->skip_share[i]; /* st_emu_step's API-server queue */
        sq[i] = (st_emu_skip_seq){ .id = r->id, .user = r->user, .n_out = r->n_out, .due_off = (st_ns)done };
    }
    s->fe_done = done;
    s->u = e->skip_share[0];
    s->uniform = s->hooks != NULL;
    for (uint32_t i = 1; i < n && s->uniform; i++)
        s->uniform = e->skip_share[i] == s->u;
    if (s->uniform && skip_sums_upto(e, s->u, n) < 0)
        s->uniform = 0; /* (out of memory: the sums made one by one) */
    return 0;
}

/* Phase 1 of step s->j (p = j mod bs): each decode's allocate_slots (a take, then cache_full_blocks), in
 * running order: the group of step p takes, the group of step p + 1 registers. 0, or -1 out of memory. */
static int skip_allocate(st_emu_engine *e, const skip_run *s, uint32_t p)
{
    const uint64_t *first = e->skip_first;
    const uint32_t *next = e->skip_next;
    int caching = e->cfg.enable_prefix_caching;
    uint64_t j = s->j;
    uint32_t a = e->skip_head[p], g = caching ? e->skip_head[p + 1 == s->bs ? 0 : p + 1] : SKIP_NONE;
    /* Anonymous takes (a sequence past its named blocks) are counted, and their blocks popped together
     * before the next take or registration of a named block and at the end: the same units from the same
     * places of the free queue, in the same order against every operation on named blocks (which alone
     * read or change the cache map). An anonymous sequence's registration is n_cached alone
     * (cache_full_blocks). */
    uint32_t anon = 0;
    while (a != SKIP_NONE || g != SKIP_NONE) {
        uint32_t i = a < g ? a : g;
        emu_req *r = e->run[i];
        if (a == i) {
            a = next[a];
            if (j >= first[i]) {
                if (r->n_named < r->n_blocks) { /* take_blocks' anonymous take (named_part 0) */
                    anon++;
                    r->n_blocks++;
                } else {
                    if (anon)
                        st_emu_blocks_take_anon(&e->pool, anon); /* (the step's takes fit: skip_one_step) */
                    anon = 0;
                    int tr = take_blocks(e, r, 1);
                    if (tr < 0) {
                        e->oom = tr == -2;
                        return -1;
                    }
                }
            }
        }
        if (g == i) {
            g = next[g]; /* (a sequence that finished in the run left its group: skip_leave_group) */
            uint32_t tokens = r->num_computed + (uint32_t)(j - e->skip_j0[i]) + 1;
            if (r->n_cached >= r->n_named) { /* cache_full_blocks of anonymous blocks */
                uint32_t full = tokens / s->bs;
                if (full > r->n_blocks)
                    full = r->n_blocks;
                if (full > r->n_cached)
                    r->n_cached = full;
                continue;
            }
            if (anon)
                st_emu_blocks_take_anon(&e->pool, anon);
            anon = 0;
            cache_full_blocks(e, r, tokens);
        }
    }
    if (anon)
        st_emu_blocks_take_anon(&e->pool, anon);
    return 0;
}

/* Phase 2 of step s->j: the waiting requests st_emu_step's schedule_waiting would admit, admitted as it
 * does, their part of the step's batch in x, and each one's result entry: a prefill that completes
 * emits its token at this step and decodes from the next one on; a chunked one ends the run with this
 * step. The count admitted, or -1 out of memory. */
static int skip_admit(st_emu_engine *e, skip_run *s, st_emu_batch *x)
{
    if (e->wq_len == 0)
        return 0;
    st_ns cutoff = s->j == 0 ? admission_cutoff(e, s->t) : (s->async ? s->last_start : s->t); /* busy: t == last_end */
    double per = e->cfg.tune.fe_token_cpu_s * 1e9;
    int admitted = 0;
    while (e->wq_len > 0 && s->budget > s->n + x->tokens && s->alive < e->mem.max_num_seqs) {
        emu_req *r = wq_front(e);
        if (r->ready > cutoff)
            break;
        uint32_t n_hits, i = e->n_run;
        if (skip_reserve(e, i + 1, s->bs) < 0 || prefix_hits(e, r, &n_hits) < 0)
            return -1;
        uint32_t hit = n_hits * s->bs, ext = r->kv_external > hit ? r->kv_external - hit : 0;
        uint32_t num_new = r->n_tokens - hit - ext, left = s->budget - s->n - x->tokens;
        if (num_new > left)
            num_new = left;
        if (!admission_fits(e, r, ext + num_new, e->scratch_blocks, n_hits) ||
            allocate_slots(e, r, ext + num_new, e->scratch_blocks, n_hits) < 0) {
            if (e->oom)
                return -1;
            break;
        }
        admit_head(e, r, hit, ext, s->t);
        admitted++;
        uint8_t sampled;
        batch_add(x, r, num_new, &sampled);
        r->num_computed += num_new;
        st_emu_skip_seq *sq = &e->skip_seq[i];
        *sq = (st_emu_skip_seq){ .id = r->id, .user = r->user, .n_out = r->n_out, .from = SKIP_NONE };
        if (!sampled) { /* a chunked prefill: no token, no share of the queue; the run ends with this step */
            if (s->uniform)
                skip_leave_uniform(e, s, i);
            sq->due_off = (st_ns)s->fe_done;
            e->skip_j0[i] = SKIP_NONE;
            e->skip_first[i] = UINT64_MAX;
            e->skip_share[i] = 0;
            s->kmax = s->j + 1;
            s->alive++;
            break;
        }
        /* its token (apply_output, fill_event): the step's end is set once the batch is complete */
        sq->from = (uint32_t)s->j;
        sq->cached_tokens = r->cached_tokens;
        if (r->n_tokens < r->cap_tokens)
            r->n_tokens++;
        r->n_out++;
        if (r->n_out == 1) {
            sq->first = 1;
            e->st.prompt_tokens += r->n_prompt;
        }
        e->skip_share[i] = per * (r->fe_factor > 0 ? r->fe_factor : 1.0);
        if (s->uniform && (e->skip_share[i] != s->u || skip_sums_upto(e, s->u, s->alive + 1) < 0))
            skip_leave_uniform(e, s, i);
        s->fe_done += e->skip_share[i];
        sq->due_off = s->fe_total = (st_ns)s->fe_done;
        uint64_t left_steps = skip_steps_left(e, r);
        s->alive++;
        if (s->hooks)
            skip_fin_push(e, s->j + left_steps, i);
        else if (s->j + 1 + left_steps < s->kmax) {
            s->kmax = s->j + 1 + left_steps;
        }
        if (r->held) /* st_emu_hold: st_emu_step leaves it out of the steps after this one, a run cannot */
            s->kmax = s->j + 1;
        skip_join_group(e, s, i, (uint32_t)s->j + 1, r->num_computed, r->n_blocks);
    }
    return admitted;
}

/* With s->uniform, sequence i that finishes in step s->j after `gone` others of the step (those before it):
 * its rank among the live ones before the step (as when their due_off were last summed). */
static uint32_t skip_rank(const st_emu_engine *e, const skip_run *s, uint32_t i, uint32_t gone)
{
    uint32_t dead = s->dead; /* finished before i: every one when i is past the highest of them */
    if (i < s->dead_end) {
        dead = 0;
        for (uint32_t k = 0; k < i; k++)
            dead += e->skip_j0[k] == SKIP_DEAD;
    }
    return i - (dead - gone);
}

/* With hooks, after step s->j: the sequences whose last token was in it leave the engine as
 * st_emu_step's release_finished has them leave (in running order), each given to hooks->finished; the
 * others' places on the API server's queue close up (the same sums frontend_due makes: from skip_sums
 * by rank with s->uniform, else summed here); the counts after the step. 0. */
static int skip_retire(st_emu_engine *e, skip_run *s)
{
    uint64_t j = s->j;
    st_emu_skip_seq *sq = e->skip_seq;
    uint32_t gone = 0;
    for (uint32_t i; (i = skip_fin_take(e, j)) != SKIP_NONE;) {
        uint32_t j0 = e->skip_j0[i];
        emu_req *r = e->run[i];
        uint32_t steps = (uint32_t)(j + 1 - j0); /* its decodes in the run (none: it finished at admission) */
        r->n_tokens += steps < r->cap_tokens - r->n_tokens ? steps : r->cap_tokens - r->n_tokens;
        r->n_out += steps;
        r->num_computed += steps;
        s->C -= r->num_computed; /* its context after the step, summed in */
        s->n--;
        uint32_t tokens = (uint32_t)(j + 1 - sq[i].from);
        e->st.generation_tokens += tokens;
        sq[i].finish = ST_EMU_FINISH_LENGTH;
        req_release_blocks(e, r);
        e->st.finished_length++;
        req_free(e, r);
        if (s->uniform)
            sq[i].due_off = (st_ns)e->skip_sums[skip_rank(e, s, i, gone) + 1];
        skip_leave_group(e, s, i);
        e->skip_j0[i] = SKIP_DEAD;
        e->skip_first[i] = UINT64_MAX;
        e->skip_share[i] = 0;
        s->alive--;
        s->dead++;
        if (i >= s->dead_end)
            s->dead_end = i + 1;
        gone++;
        st_ns due = e->skip_due[j] + (e->cfg.no_frontend ? 0 : sq[i].due_off);
        s->hooks->next = s->hooks->finished(s->hooks->arg, &sq[i], tokens, due);
    }
    if (gone) {
        if (s->uniform) { /* the live ones' due_off are written when needed: skip_write_offs */
            s->fe_done = e->skip_sums[s->alive];
            s->stale = 1;
        } else {
            double done = 0;
            for (uint32_t i = 0; i < e->n_run; i++)
                if (e->skip_j0[i] != SKIP_DEAD) {
                    done += e->skip_share[i];
                    sq[i].due_off = (st_ns)done;
                }
            s->fe_done = done;
        }
        s->fe_total = (st_ns)s->fe_done;
        /* nothing left to run; or more finished entries than running ones, which the passes over the run's
         * entries (above, skip_rank) would walk: the run ends here, and the next one starts with the running
         * ones alone */
        if (s->alive == 0 || (s->dead > SKIP_DEAD_MAX && s->dead > s->alive))
            s->kmax = j + 1;
    }
    return 0;
}

/* Step s->j of the run: its block takes and registrations, its admissions, then its time and the API
 * server's queue. 0; 1 when the run ends before it because it would preempt; -1 out of memory. */
static int skip_one_step(st_emu_engine *e, skip_run *s)
{
    uint64_t j = s->j;
    uint32_t p = (uint32_t)(s->bs_pow2 ? j & (s->bs - 1) : j % s->bs);
    /* blocks this step takes, in running order (at most its group's size); the run ends before a step
     * that would preempt */
    uint32_t takes = 0;
    if (e->skip_gsize[p] > e->pool.nfree)
        for (uint32_t a = e->skip_head[p]; a != SKIP_NONE; a = e->skip_next[a])
            takes += j >= e->skip_first[a];
    if (takes > e->pool.nfree)
        return 1;
    if ((j + 2 > e->cap_skip_start &&
         grow((void **)&e->skip_start, &e->cap_skip_start, (uint32_t)j + 2, sizeof *e->skip_start) < 0) ||
        (j + 1 > e->cap_skip_due &&
         grow((void **)&e->skip_due, &e->cap_skip_due, (uint32_t)j + 1, sizeof *e->skip_due) < 0))
        return -1;
    if (skip_allocate(e, s, p) < 0)
        return -1;
    uint32_t n0 = e->n_run;
    st_emu_batch x = { 0 };
    if (skip_admit(e, s, &x) < 0)
        return -1;
    /* the step's whole batch, as st_emu_step's step_time sums it: its n decodes and the admissions (x, zero
     * when there are none: adding 0.0 leaves the context sums as they are) */
    st_emu_batch b = { .tokens = s->n + x.tokens,
                       .decode_tokens = s->n + x.decode_tokens,
                       .seqs = s->n + x.seqs,
                       .sampled = s->n + x.sampled,
                       .attn_pairs = (double)(s->C + s->n) + x.attn_pairs,
                       .kv_read_tokens = (double)s->C + x.kv_read_tokens };
    double secs = st_emu_step_cache_seconds(&e->step_cache, &e->cfg, &b, NULL);
    st_ns dur = (st_ns)(secs * 1e9);
    if (dur < 1)
        dur = 1;
    st_ns end = s->t + dur;
    e->skip_start[j] = s->t;
    if (!e->cfg.no_frontend) {
        st_ns start = s->fe_free > end ? s->fe_free : end;
        s->fe_pre = s->fe_free;
        s->fe_batch = start;
        s->fe_free = start + s->fe_total;
        e->skip_due[j] = start;
    } else {
        e->skip_due[j] = end;
    }
    s->last_start = s->t;
    s->last_end = end;
    s->C += s->n;
    for (uint32_t i = n0; i < e->n_run; i++) /* the admitted ones that produced a token decode from now on */
        if (e->skip_j0[i] != SKIP_NONE) {
            emu_req *r = e->run[i];
            if (e->skip_seq[i].first)
                r->first_token = end;
            e->skip_seq[i].first_due = e->skip_due[j] + (e->cfg.no_frontend ? 0 : e->skip_seq[i].due_off);
            s->C += r->num_computed;
            s->n++;
        }
    s->t = end;
    return s->hooks ? skip_retire(e, s) : 0;
}

/* Applies the run's k steps to the running requests (st_emu_step's finish for those that end)
 * and the engine's counters and clocks; the result into res. */
static void skip_finish(st_emu_engine *e, skip_run *s, uint32_t k, st_emu_skip_result *res)
{
    uint32_t n = e->n_run;
    st_emu_skip_seq *sq = e->skip_seq;
    if (s->stale)
        skip_write_offs(e, s, n);
    e->skip_start[k] = s->t;
    uint32_t w = 0, finished = 0;
    uint64_t generated = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (e->skip_j0[i] == SKIP_DEAD)
            continue; /* finished in the run, given to the hooks */
        emu_req *r = e->run[i];
        uint32_t j0 = e->skip_j0[i], steps = j0 == SKIP_NONE || j0 >= k ? 0 : k - j0;
        r->n_tokens += steps < r->cap_tokens - r->n_tokens ? steps : r->cap_tokens - r->n_tokens;
        r->n_out += steps;
        r->num_computed += steps;
        if (sq[i].from == SKIP_NONE)
            sq[i].from = k; /* a chunked prefill: no token in the run */
        generated += k - sq[i].from;
        if (r->n_out >= r->max_tokens || (r->n_out > 0 && r->n_tokens >= e->mem.max_model_len)) {
            sq[i].finish = ST_EMU_FINISH_LENGTH; /* st_emu_step's release_finished */
            req_release_blocks(e, r);
            e->st.finished_length++;
            req_free(e, r);
            finished++;
        } else {
            sq[i].finish = ST_EMU_NOT_FINISHED;
            e->run[w++] = r;
        }
    }
    e->n_run = w;
    s->alive -= finished;
    skip_note_counts(e, s); /* after the last step */
    res->running_peak = s->running_peak;
    res->kv_usage_peak = skip_kv_peak(e, s);
    res->waiting_peak = s->waiting_peak;
    e->st.generation_tokens += generated;
    e->st.steps += k;
    e->st.steps_skipped += k;
    e->fe_free = s->fe_free;
    e->fe_pre = s->fe_pre;
    e->fe_batch = s->fe_batch;
    e->last_start = s->last_start;
    e->last_end = s->last_end;
    if (e->cfg.no_frontend)
        for (uint32_t i = 0; i < n; i++)
            sq[i].due_off = 0;
    res->steps = k;
    res->seqs = n;
    res->seq = sq;
    res->start = e->skip_start;
    res->due = e->skip_due;
}

int st_emu_skip_steps_hooked(st_emu_engine *e, st_ns horizon, st_emu_skip_hooks *hooks, st_emu_skip_result *res)
{
    memset(res, 0, sizeof *res);
    skip_run s = { .n = e->n_run,
                   .bs = e->cfg.block_size,
                   .budget = e->mem.max_num_batched_tokens,
                   .hooks = hooks,
                   .nfree_min = UINT32_MAX };
    s.bs_pow2 = (s.bs & (s.bs - 1)) == 0;
    s.async = st_emu_async_scheduling(&e->cfg);
    st_ns now = e->clock.now(e->clock.ctx);
    if (s.n == 0 || now >= horizon || e->oom || s.n > s.budget || e->cfg.spec.k)
        return 1; /* with speculation every step draws its drafts: st_emu_step */
    if (skip_reserve(e, s.n, s.bs) < 0)
        return -1;
    e->n_skip_heap = e->skip_fin_head = e->n_skip_fin = 0;
    if (skip_prepare(e, &s))
        return 1;
    s.alive = s.n;
    s.fe_free = e->fe_free;
    s.last_start = e->last_start;
    s.last_end = e->last_end;
    s.fe_pre = e->fe_pre;
    s.fe_batch = e->fe_batch;
    s.fe_total = e->skip_seq[s.n - 1].due_off;
    s.t = now;
    for (s.j = 0; s.j < s.kmax && s.t < horizon; s.j++) {
        if (s.j > 0)
            skip_note_counts(e, &s);       /* after the step before (the last one's: skip_finish) */
        if (hooks && s.t >= hooks->next) { /* the driver's events due by this step: the engine as between steps */
            e->fe_free = s.fe_free;
            e->fe_pre = s.fe_pre;
            e->fe_batch = s.fe_batch;
            hooks->next = hooks->due(hooks->arg, s.t);
            s.fe_free = e->fe_free;
            s.fe_pre = e->fe_pre;
        }
        int rc = skip_one_step(e, &s);
        if (rc < 0)
            return -1;
        if (rc > 0)
            break;
    }
    if (s.j == 0)
        return e->oom ? -1 : 1;
    skip_finish(e, &s, (uint32_t)s.j, res);
    return e->oom ? -1 : 0; /* a finished request's release ran out of memory (in the run, or here) */
}

int st_emu_skip_steps(st_emu_engine *e, st_ns horizon, st_emu_skip_result *res)
{
    return st_emu_skip_steps_hooked(e, horizon, NULL, res);
}

void st_emu_get_stats(const st_emu_engine *e, st_emu_stats *s)
{
    *s = e->st;
    s->running = e->n_run;
    s->waiting = e->wq_len;
    s->num_blocks = e->pool.n;
    s->free_blocks = e->pool.nfree;
    s->kv_usage = e->pool.n ? 1.0 - (double)e->pool.nfree / e->pool.n : 0;
    s->evictions = e->pool.evictions;
}

int st_emu_reset_prefix_cache(st_emu_engine *e) { return st_emu_blocks_reset_cache(&e->pool); }

int st_emu_engine_check(const st_emu_engine *e, char *err, size_t errlen)
{
    if (st_emu_blocks_check(&e->pool, err, errlen) < 0)
        return -1;
    uint32_t *cnt = calloc(e->pool.used ? e->pool.used : 1, sizeof *cnt); /* blocks never taken: held by none */
    if (!cnt) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = 0;
    unsigned long long anon = 0;
    for (uint32_t i = 0; i < e->n_run && !rc; i++) {
        const emu_req *r = e->run[i];
        uint32_t need = (r->num_computed + e->cfg.block_size - 1) / e->cfg.block_size;
        if (r->n_blocks < need) {
            snprintf(err, errlen, "request %llu has %u blocks for %u computed tokens", (unsigned long long)r->id,
                     r->n_blocks, r->num_computed);
            rc = -1;
        }
        if (r->n_named > r->n_blocks) {
            snprintf(err, errlen, "request %llu has %u named of %u blocks", (unsigned long long)r->id, r->n_named,
                     r->n_blocks);
            rc = -1;
        } else if (r->n_named < r->n_blocks && r->n_named < anon_from(e, r)) { /* named ones come first */
            snprintf(err, errlen, "request %llu holds blocks anonymously from %u on, before its block %u",
                     (unsigned long long)r->id, r->n_named, anon_from(e, r));
            rc = -1;
        } else if (r->n_cached > r->n_blocks) {
            snprintf(err, errlen, "request %llu has %u of its %u blocks registered", (unsigned long long)r->id,
                     r->n_cached, r->n_blocks);
            rc = -1;
        }
        for (uint32_t k = 0; k < r->n_named && !rc; k++)
            cnt[r->blocks[k]]++;
        anon += r->n_blocks - r->n_named;
    }
    if (!rc && anon != e->pool.anon) {
        snprintf(err, errlen, "requests hold %llu anonymous blocks, the pool %u", anon, e->pool.anon);
        rc = -1;
    }
    for (uint32_t i = 0; i < e->wq_len && !rc; i++) {
        const emu_req *r = e->wq[(e->wq_head + i) % e->wq_cap];
        if (r->n_blocks) {
            snprintf(err, errlen, "waiting request %llu holds %u blocks", (unsigned long long)r->id, r->n_blocks);
            rc = -1;
        }
    }
    for (uint32_t b = 0; b < e->pool.used && !rc; b++)
        if (cnt[b] != st_emu_blocks_ref(&e->pool, b)) {
            snprintf(err, errlen, "block %u: ref %u but held %u times", b, st_emu_blocks_ref(&e->pool, b), cnt[b]);
            rc = -1;
        }
    free(cnt);
    return rc;
}
