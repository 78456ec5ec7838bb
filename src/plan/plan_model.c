#include "plan/plan_model.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/executor.h"
#include "plan/plan_spec.h"
#include "audit/sweep.h"
#include "core/buf.h"
#include "emu/config.h"
#include "emu/consts.h"
#include "core/util.h"
#include "emu/sim.h"
#include "emu/specstep.h"
#include "emu/steptime.h"
#include "load/record.h"
#include "load/wlcache.h"
#include "load/workload.h"

#define PLAN_SPEC_MAX ((size_t)1 << 20)
/* Saturation runs remembered (by engine configuration and clients). */
#define PLAN_MEMO_MAX 4096

typedef struct memo {
    uint64_t key;
    double rps, tps;
    uint32_t running;
} memo;

/* The proven bound's grid (docs/plan.md, "The proven bound"): sampled sequences a step and the
 * other tokens of a step, each from 0/1 up in steps of at most PLAN_GRID_RATIO; a cell's step
 * time is the engine model's for its smallest corner, its yield the largest. */
#define PLAN_GRID_RATIO 1.1
#define PLAN_GRID_MAX 200
#define PLAN_GRID_SEQS_MAX 65536.0
#define PLAN_GRID_TOKENS_MAX 2097152.0
/* A candidate past the grid: a rate bound that prunes nothing. */
#define PLAN_NO_BOUND_RPS 1e9

/* Candidates that share a GPU, GPUs per replica, checkpoint and KV cache dtype share one engine
 * configuration (before the memory plan: a candidate's limits go in) and one table of step-time
 * lower bounds. */
typedef struct group {
    uint64_t key;
    int ok; /* 0: the configuration could not be built (why) */
    char why[ST_PLAN_WHY_MAX];
    st_emu_config cfg; /* from the candidate's audit spec, limits as the first one set them */
    double *cell;      /* [ns - 1][np - 1] step-time lower bounds (NULL until built) */
} group;

/* The LP bounds memo: one per (group, sequences a step, token budget). */
typedef struct lpmemo {
    uint64_t key;
    double tps;
} lpmemo;

struct st_plan_model {
    const char *base_name, *base_text;
    size_t base_len;
    const st_spec *base;
    double tolerance;
    volatile sig_atomic_t *stop; /* the interruption flag (NULL: never) */
    st_workload w;               /* the spec's workload, ST_PLAN_BOUND_MAX requests, built once (read-only) */
    st_emu_sim_item *items;      /* w as engine-model items */
    st_wlcache *workloads;       /* the evaluations' generated workloads, shared (load/wlcache.h) */
    /* the workload's extremes for the proven bound (any request the searches send) */
    double in_min;  /* the shortest prompt (tokens) */
    double u_min;   /* the fewest prompt tokens a request must prefill (its own, past a shared prefix) */
    double rho;     /* the fewest prefill tokens past the sampled one, per output token */
    double out_min; /* the fewest output tokens a request asks for */
    double longest; /* the most tokens a request holds (prompt + output; 0: unknown) */
    double gs[PLAN_GRID_MAX], gp[PLAN_GRID_MAX]; /* the grid's sequences and tokens */
    int ns, np;
    pthread_mutex_t mu; /* guards what follows */
    memo memo[PLAN_MEMO_MAX];
    int n_memo, runs, hits;
    group **groups; /* each its own allocation: a pointer to one stays valid as the list grows */
    size_t n_groups, cap_groups;
    lpmemo *lp;
    size_t n_lp, cap_lp;
};

/* The candidate's audit spec, parsed. 0, or -1 with why. */
static int candidate_spec(const st_plan_model *m, const st_plan_candidate *c, st_spec *out, char *why, size_t n)
{
    st_buf b;
    st_buf_init(&b, PLAN_SPEC_MAX);
    int rc = st_plan_spec_write_model(m->base_name, m->base_text, m->base_len, c, &b, why, n);
    if (rc == 0 && st_spec_parse(m->base_name, b.data, b.len, out, why, n))
        rc = -1;
    st_buf_free(&b);
    return rc;
}

/* A completion: when it ended and the output tokens it delivered. */
typedef struct done_at {
    st_ns end;
    uint32_t tokens;
} done_at;

static int by_end(const void *a, const void *b)
{
    const done_at *x = a, *y = b;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* Completions per second in the middle half of a closed-loop run that keeps `clients` requests
 * in flight (the engine's maximum throughput on this workload), and in *tps the output tokens a
 * second those completions delivered. */
static double saturated_rps(const st_plan_model *m, const st_emu_config *cfg, uint32_t clients, uint32_t *max_running,
                            double *tps, char *why, size_t n)
{
    uint32_t reqs = clients * ST_PLAN_BOUND_PER_CLIENT;
    reqs = reqs < ST_PLAN_BOUND_MIN ? ST_PLAN_BOUND_MIN : reqs > ST_PLAN_BOUND_MAX ? ST_PLAN_BOUND_MAX : reqs;
    if (reqs > m->w.n)
        reqs = m->w.n;
    double rps = -1;
    st_record *recs = calloc(reqs ? reqs : 1, sizeof *recs);
    done_at *ends = calloc(reqs ? reqs : 1, sizeof *ends);
    st_emu_sim_stats st;
    if (!recs || !ends) {
        snprintf(why, n, "out of memory");
        goto out;
    }
    st_emu_run_opts o = { .clients = clients, .stop = m->stop, .no_token_times = 1 }; /* it reads the ends only */
    int stopped = 0;
    if (st_emu_sim_run_opts(cfg, m->items, reqs, &o, recs, &st, &stopped, why, n))
        goto out;
    if (stopped) {
        snprintf(why, n, "interrupted");
        goto out;
    }
    *max_running = st.max_running;
    uint32_t k = 0;
    for (uint32_t i = 0; i < reqs; i++)
        if (recs[i].status == ST_REQ_OK && recs[i].end > 0)
            ends[k++] = (done_at){ recs[i].end, recs[i].output_tokens };
    if (k < 8) {
        snprintf(why, n, "only %u of %u requests completed when saturated", k, reqs);
        goto out;
    }
    qsort(ends, k, sizeof *ends, by_end);
    uint32_t a = k / 4, b = 3 * k / 4;
    double span = (double)(ends[b].end - ends[a].end) / 1e9, tokens = 0;
    if (span > 0) {
        for (uint32_t i = a + 1; i <= b; i++)
            tokens += ends[i].tokens;
        rps = (double)(b - a) / span;
    } else { /* every middle completion at one instant: the whole run */
        span = (double)ends[k - 1].end / 1e9;
        for (uint32_t i = 0; i < k; i++)
            tokens += ends[i].tokens;
        rps = (double)k / span;
    }
    *tps = tokens / span;
out:
    st_records_free(recs, reqs);
    free(ends);
    return rps;
}

/* What --max-model-len changes on the engine: when every request of the workload fits in it,
 * only the KV cache's size (its blocks); otherwise also which requests it refuses. */
typedef struct lenkey {
    char s[48];
} lenkey;

static lenkey len_key(const st_plan_model *m, const st_emu_memory *mem)
{
    lenkey k;
    if (m->longest > 0 && m->longest <= mem->max_model_len)
        snprintf(k.s, sizeof k.s, "fits:%u", mem->num_blocks);
    else
        snprintf(k.s, sizeof k.s, "len:%u:%u", mem->max_model_len, mem->num_blocks);
    return k;
}

static uint64_t fnv(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h ? h : 1;
}

/* What sets a candidate's decoding apart in the keys: its speculation method, draft length and
 * acceptance (one method's candidates share one acceptance object), or the baseline's own. */
typedef struct spectag {
    char s[96];
} spectag;

static spectag spec_tag(const st_plan_candidate *c)
{
    spectag t;
    if (c->spec)
        snprintf(t.s, sizeof t.s, "spec:%p:%d", (const void *)c->spec, c->spec_k);
    else
        snprintf(t.s, sizeof t.s, "%s", c->base_spec ? "base" : "plain");
    return t;
}

/* The saturation run of an engine configuration with `clients`, from the memo when an equal one
 * ran already (key: everything that shapes the run). */
static double saturated_memo(st_plan_model *m, const st_emu_config *cfg, const st_plan_candidate *c,
                             const st_emu_memory *mem, uint32_t clients, uint32_t *running, double *tps, char *why,
                             size_t n)
{
    char k[512];
    snprintf(k, sizeof k, "%s|%d|%s|%s|%u|%u|%u|%s|%s", c->gpu, c->tp, c->model, c->kv_dtype, clients,
             mem->max_num_seqs, mem->max_num_batched_tokens, len_key(m, mem).s, spec_tag(c).s);
    uint64_t key = fnv(k);
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < m->n_memo; i++)
        if (m->memo[i].key == key) {
            double r = m->memo[i].rps;
            *running = m->memo[i].running;
            *tps = m->memo[i].tps;
            m->hits++;
            pthread_mutex_unlock(&m->mu);
            return r;
        }
    pthread_mutex_unlock(&m->mu);
    double r = saturated_rps(m, cfg, clients, running, tps, why, n);
    pthread_mutex_lock(&m->mu);
    m->runs++;
    if (r > 0 && m->n_memo < PLAN_MEMO_MAX)
        m->memo[m->n_memo++] = (memo){ key, r, *tps, *running };
    pthread_mutex_unlock(&m->mu);
    return r;
}

/* The candidate's engine configuration and memory plan. 0, or -1 with vLLM's refusal in why. */
static int engine_of(st_plan_model *m, const st_plan_candidate *c, st_emu_config *cfg, st_emu_memory *mem,
                     uint32_t *fit, char *why, size_t n)
{
    st_spec s;
    if (candidate_spec(m, c, &s, why, n))
        return -1;
    int rc = -1;
    if (st_exec_model_config(&s, &s.configs[0], cfg, NULL, 0, NULL, why, n) || st_emu_memory_plan(cfg, mem, why, n))
        goto out;
    /* requests the KV cache holds at once (a shared prefix is cached once: each request holds
     * the rest of its context) */
    double ctx = st_spec_mean_input(&s) - s.workload.shared_prefix + s.workload.output_tokens;
    double f = ctx > 0 ? floor((double)mem->kv_tokens / ctx) + 1 : mem->max_num_seqs;
    *fit = f < mem->max_num_seqs ? (uint32_t)f : mem->max_num_seqs;
    if (*fit < 1)
        *fit = 1;
    rc = 0;
out:
    st_spec_free(&s);
    return rc;
}

static int interrupted(const st_plan_model *m, char *why, size_t n)
{
    if (!m->stop || !*m->stop)
        return 0;
    snprintf(why, n, "interrupted");
    return 1;
}

void st_plan_model_set_stop(st_plan_model *m, volatile sig_atomic_t *stop) { m->stop = stop; }

static uint64_t group_key(const st_plan_candidate *c)
{
    char k[512];
    snprintf(k, sizeof k, "%s|%d|%s|%s|%s", c->gpu, c->tp, c->model, c->kv_dtype, spec_tag(c).s);
    return fnv(k);
}

/* The step time no step of sq sampled sequences and pt other tokens can beat on cfg (graphs
 * up to the widest capture: eager is never faster): every term of the step model grows with
 * the tokens, the sequences and the context read, and a sampled sequence's context plus its
 * tokens this step is at least the shortest prompt. */
static double step_lb(const st_plan_model *m, const st_emu_config *cfg, double sq, double sq_hi, double pt,
                      double pt_hi)
{
    double kv = sq * m->in_min - sq_hi - pt_hi;
    if (kv < 0)
        kv = 0;
    st_emu_batch b = {
        .tokens = (uint32_t)(sq + pt),
        .decode_tokens = 0,
        .seqs = (uint32_t)sq,
        .sampled = (uint32_t)sq,
        .attn_pairs = kv + sq + pt,
        .kv_read_tokens = kv,
    };
    return st_emu_step_seconds(cfg, &b, NULL);
}

/* The group of c: found, or built (its engine configuration from c's audit spec, and the table
 * of step-time lower bounds over the grid). NULL only when out of memory. */
static const group *group_of(st_plan_model *m, const st_plan_candidate *c)
{
    uint64_t key = group_key(c);
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < m->n_groups; i++)
        if (m->groups[i]->key == key) {
            const group *g = m->groups[i];
            pthread_mutex_unlock(&m->mu);
            return g;
        }
    pthread_mutex_unlock(&m->mu);
    group g = { .key = key };
    st_spec sp;
    if (candidate_spec(m, c, &sp, g.why, sizeof g.why) == 0) {
        g.ok = !st_exec_model_config(&sp, &sp.configs[0], &g.cfg, NULL, 0, NULL, g.why, sizeof g.why);
        st_spec_free(&sp);
    }
    if (g.ok) {
        /* the table's engine: CUDA graphs up to their widest capture (a lower step time than any
         * candidate's eager steps) */
        st_emu_config t = g.cfg;
        t.max_num_seqs = EMU_CUDA_GRAPH_MAX;
        t.max_num_batched_tokens = EMU_CUDA_GRAPH_MAX;
        t.max_model_len = t.model.max_position;
        t.enforce_eager = 0;
        g.cell = malloc(sizeof *g.cell * (size_t)(m->ns - 1) * (size_t)(m->np - 1));
        if (!g.cell)
            return NULL;
        for (int i = 0; i + 1 < m->ns; i++)
            for (int j = 0; j + 1 < m->np; j++)
                g.cell[i * (m->np - 1) + j] = step_lb(m, &t, m->gs[i], m->gs[i + 1], m->gp[j], m->gp[j + 1]);
    }
    group *x = malloc(sizeof *x);
    if (!x) {
        free(g.cell);
        return NULL;
    }
    *x = g;
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < m->n_groups; i++)
        if (m->groups[i]->key == key) { /* another thread built it meanwhile: the same values */
            const group *r = m->groups[i];
            pthread_mutex_unlock(&m->mu);
            free(x->cell);
            free(x);
            return r;
        }
    if (st_grow((void **)&m->groups, &m->cap_groups, m->n_groups + 1, sizeof *m->groups, 64)) {
        pthread_mutex_unlock(&m->mu);
        free(x->cell);
        free(x);
        return NULL;
    }
    m->groups[m->n_groups++] = x;
    pthread_mutex_unlock(&m->mu);
    return x;
}

typedef struct pt2 {
    double g, a;
} pt2;

static int by_g(const void *x, const void *y)
{
    double a = ((const pt2 *)x)->g, b = ((const pt2 *)y)->g;
    return a < b ? -1 : a > b;
}

/* max sum x_k a_k subject to sum x_k g_k >= 0, sum x_k = 1, x >= 0 (time shares of step kinds:
 * a = output tokens a second, g = spare prefill tokens a second): a single point with g >= 0,
 * or the upper hull of the points (g, a) where it crosses g = 0. */
static double lp_max(pt2 *v, size_t n)
{
    double best = 0;
    int neg = 0, pos = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i].g >= 0 && v[i].a > best)
            best = v[i].a;
        neg |= v[i].g < 0;
        pos |= v[i].g >= 0;
    }
    if (!neg || !pos)
        return best;
    qsort(v, n, sizeof *v, by_g);
    /* upper hull, monotone chain, in place */
    size_t h = 0;
    for (size_t i = 0; i < n; i++) {
        while (h >= 2) {
            pt2 o = v[h - 2], p = v[h - 1], q = v[i];
            double cross = (p.g - o.g) * (q.a - o.a) - (p.a - o.a) * (q.g - o.g);
            if (cross < 0)
                break;
            h--;
        }
        v[h++] = v[i];
    }
    for (size_t i = 0; i + 1 < h; i++)
        if (v[i].g < 0 && v[i + 1].g >= 0) {
            double w = v[i + 1].g - v[i].g;
            double at0 = w > 0 ? v[i].a + (v[i + 1].a - v[i].a) * (0 - v[i].g) / w : v[i + 1].a;
            return at0 > best ? at0 : best;
        }
    return best;
}

/* The most output tokens a second the group's engine delivers with at most smax sequences a
 * step and a token budget of budget, over any mix of steps that prefills at least rho tokens
 * (past the sampled one) per output token. */
static double lp_bound(st_plan_model *m, const group *g, const st_emu_config *cfg, double smax, double budget)
{
    char k[64];
    snprintf(k, sizeof k, "%016llx|%.0f|%.0f", (unsigned long long)g->key, smax, budget);
    uint64_t key = fnv(k);
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < m->n_lp; i++)
        if (m->lp[i].key == key) {
            double r = m->lp[i].tps;
            pthread_mutex_unlock(&m->mu);
            return r;
        }
    pthread_mutex_unlock(&m->mu);
    size_t cap = (size_t)(m->ns + 1) * (size_t)m->np;
    pt2 *v = malloc(sizeof *v * cap);
    if (!v)
        return INFINITY;
    size_t n = 0;
    st_emu_config t = *cfg;
    t.max_num_seqs = EMU_CUDA_GRAPH_MAX;
    t.enforce_eager = 0;
    for (int i = 0; i + 1 < m->ns && m->gs[i] <= smax; i++)
        for (int j = 0; j + 1 < m->np && m->gs[i] + m->gp[j] <= budget; j++) {
            double s_hi = m->gs[i + 1] < smax ? m->gs[i + 1] : smax;
            double p_hi = m->gp[j + 1] < budget - m->gs[i] ? m->gp[j + 1] : budget - m->gs[i];
            double tt = g->cell[i * (m->np - 1) + j];
            if (!(tt > 0))
                continue;
            v[n++] = (pt2){ (p_hi - m->rho * s_hi) / tt, s_hi / tt };
        }
    /* the row of exactly smax sequences (where a full batch's optimum lies), at its own times */
    for (int j = 0; j + 1 < m->np && smax + m->gp[j] <= budget && n < cap; j++) {
        double p_hi = m->gp[j + 1] < budget - smax ? m->gp[j + 1] : budget - smax;
        double tt = step_lb(m, &t, smax, smax, m->gp[j], p_hi);
        if (tt > 0)
            v[n++] = (pt2){ (p_hi - m->rho * smax) / tt, smax / tt };
    }
    double r = lp_max(v, n);
    free(v);
    pthread_mutex_lock(&m->mu);
    if (st_grow((void **)&m->lp, &m->cap_lp, m->n_lp + 1, sizeof *m->lp, 256) == 0)
        m->lp[m->n_lp++] = (lpmemo){ key, r };
    pthread_mutex_unlock(&m->mu);
    return r;
}

/* The proven bound: the candidate's memory plan (its group's engine configuration with its
 * limits), the most sequences a step can sample (--max-num-seqs, the KV cache at the fewest
 * tokens a request holds, the token budget), and the LP over the group's step-time table. */
static int screen(void *arg, st_plan_candidate *c, char *why, size_t n)
{
    st_plan_model *m = arg;
    if (interrupted(m, why, n))
        return -1;
    const group *g = group_of(m, c);
    if (!g) {
        snprintf(why, n, "out of memory");
        return -1;
    }
    if (!g->ok) {
        snprintf(why, n, "%s", g->why);
        return -1;
    }
    st_emu_config cfg = g->cfg;
    st_emu_memory mem;
    cfg.max_num_seqs = (uint32_t)c->max_num_seqs;
    cfg.max_num_batched_tokens = (uint32_t)c->max_batched;
    cfg.max_model_len = (uint32_t)c->max_model_len;
    if (st_emu_memory_plan(&cfg, &mem, why, n))
        return -1;
    double per_seq = ceil(m->u_min / cfg.block_size);
    double kv_seqs = floor((double)mem.num_blocks / (per_seq > 1 ? per_seq : 1));
    double smax = mem.max_num_seqs;
    if (kv_seqs < smax)
        smax = kv_seqs;
    if (mem.max_num_batched_tokens < smax)
        smax = mem.max_num_batched_tokens;
    double budget = mem.max_num_batched_tokens;
    if (smax < 1) {
        snprintf(why, n, "the KV cache holds no request of this workload");
        return -1;
    }
    if (smax > m->gs[m->ns - 1] || budget > m->gp[m->np - 1]) {
        /* past the grid (limits beyond the plan's lists, e.g. the current setup's defaults): no
         * proven bound, the candidate is refined and evaluated */
        c->bound_tps = 0;
        c->bound_rps = PLAN_NO_BOUND_RPS;
        c->same = 0;
        return 0;
    }
    double tps = lp_bound(m, g, &cfg, smax, budget);
    if (!(tps > 0)) {
        snprintf(why, n, "the engine model gives no step time for this configuration");
        return -1;
    }
    /* a speculating sequence emits at most 1 + k tokens a step, and its verification step costs at
     * least the plain step of the same sequences (more tokens, a proposer's time): the plain
     * bound times 1 + k is a bound (docs/plan.md "Speculative decoding") */
    if (g->cfg.spec.k)
        tps *= 1.0 + g->cfg.spec.k;
    c->bound_tps = tps;
    c->bound_rps = tps / m->out_min;
    /* candidates whose engines are the same (a --max-model-len every request fits in, with the
     * same KV cache) are evaluated once; refine may widen this (a --max-num-seqs never reached) */
    char key[512];
    snprintf(key, sizeof key, "%s|%d|%s|%s|%ld|%ld|%s|%s", c->gpu, c->tp, c->model, c->kv_dtype, (long)mem.max_num_seqs,
             (long)mem.max_num_batched_tokens, len_key(m, &mem).s, spec_tag(c).s);
    c->same = fnv(key);
    return 0;
}

/* The tight bound: the engine's maximum throughput on the model, its batch kept full. */
static int refine(void *arg, st_plan_candidate *c, char *why, size_t n)
{
    st_plan_model *m = arg;
    st_emu_config cfg;
    st_emu_memory mem;
    uint32_t fit, running = 0;
    if (interrupted(m, why, n))
        return -1;
    if (engine_of(m, c, &cfg, &mem, &fit, why, n))
        return -1;
    /* clients past what the KV cache holds only wait: a quarter more than the fit keeps it full */
    uint32_t clients = fit + fit / 4 + 1;
    if (clients > mem.max_num_seqs)
        clients = mem.max_num_seqs;
    double tps = 0;
    double rps = saturated_memo(m, &cfg, c, &mem, clients, &running, &tps, why, n);
    if (!(rps > 0))
        return -1;
    double b = rps * ST_PLAN_BOUND_MARGIN;
    c->bound_rps = b < c->bound_rps ? b : c->bound_rps;
    /* the same margin on the output tokens the saturated run delivered: the cost bound prices a
     * candidate on its requests' tokens, not on the most a request may ask for */
    c->est_tps = tps > 0 ? tps * ST_PLAN_BOUND_MARGIN : 0;
    /* a --max-num-seqs the batch never reached (the KV cache binds first) changes nothing */
    char key[512];
    snprintf(key, sizeof key, "%s|%d|%s|%s|%ld|%ld|%s|%s", c->gpu, c->tp, c->model, c->kv_dtype,
             running >= mem.max_num_seqs ? (long)mem.max_num_seqs : -1L, (long)mem.max_num_batched_tokens,
             len_key(m, &mem).s, spec_tag(c).s);
    c->same = fnv(key);
    return 0;
}

static int evaluate(void *arg, st_plan_candidate *c, char *why, size_t n)
{
    st_plan_model *m = arg;
    if (interrupted(m, why, n))
        return -1;
    st_spec s;
    if (candidate_spec(m, c, &s, why, n))
        return -1;
    st_executor *x = NULL;
    int rc = -1;
    if (st_exec_model_new(&s, NULL, &x, why, n))
        goto out;
    x->stop = m->stop;
    x->workloads = m->workloads; /* candidates probe the same rates: their prompts are drawn once */
    st_sweep_bisect_result r;
    if (st_sweep_bisect(&s, x, 0, m->tolerance, &r, why, n))
        goto out;
    if (r.failed_start) {
        snprintf(why, n, "%s", r.why);
        goto out;
    }
    c->capacity_rps = r.pass_rate > 0 ? r.capacity_rps : 0;
    c->capacity_capped = r.pass_rate > 0 && !isfinite(r.fail_rate); /* the highest rate searched passed */
    /* as the audit and predict price it: the capacity times the output tokens per request the
     * runs delivered (the spec's nominal length when the search measured none) */
    c->output_tps =
        isfinite(r.output_tps) && r.pass_rate > 0 ? r.output_tps : c->capacity_rps * s.workload.output_tokens;
    c->ttft_p95_ms = r.ttft_ms;
    c->tpot_p95_ms = r.tpot_ms;
    if (!(r.pass_rate > 0))
        snprintf(why, n, "met the SLO at no rate down to %.3g req/s", r.fail_rate);
    rc = 0;
out:
    if (x)
        st_executor_free(x);
    st_spec_free(&s);
    return rc;
}

/* The spec's workload for the saturation runs (st_sweep_workload), synthetic prompts lazy: only the
 * engine model reads them (load/workload.h st_work_item.lazy), the same prompts. */
static int bound_workload(const st_spec *s, st_workload *w, char *err, size_t errlen)
{
    if (s->workload.kind != ST_WL_SYNTHETIC || s->workload.sessions.on || s->workload.agent)
        return st_sweep_workload(s, s->workload.seed, ST_PLAN_BOUND_MAX, w, err, errlen);
    st_synth_params p;
    st_spec_synth(s, ST_PLAN_BOUND_MAX, s->workload.seed, &p);
    return st_workload_synthetic_lazy(&p, w, err, errlen);
}

/* The workload's extremes over every request any search may send (synthetic: the length ranges
 * the generator draws from; a trace: a prompt may be cached whole but its last token, and any
 * length), and the grid. */
static void workload_extremes(st_plan_model *m, const st_spec *s)
{
    if (s->workload.kind == ST_WL_SYNTHETIC) {
        double r = s->workload.range_ratio;
        double in_lo = floor(s->workload.input_tokens * (1 - r));
        double out_lo = floor(s->workload.output_tokens * (1 - r));
        double out_hi = ceil(s->workload.output_tokens * (1 + r));
        double prefix = s->workload.shared_prefix;
        if (in_lo < 1)
            in_lo = 1;
        m->in_min = s->workload.vllm_semantics ? in_lo + prefix : in_lo;
        m->u_min = s->workload.vllm_semantics ? in_lo : in_lo - prefix;
        if (m->u_min < 1)
            m->u_min = 1;
        m->out_min = out_lo > 1 ? out_lo : 1;
        m->rho = (m->u_min - 1) / (out_hi > 1 ? out_hi : 1);
        m->longest = ceil(s->workload.input_tokens * (1 + r)) + (s->workload.vllm_semantics ? prefix : 0) + out_hi;
    } else {
        m->in_min = 1;
        m->u_min = 1;
        m->out_min = 1;
        m->rho = 0;
    }
    /* the grid reaches the plan's largest limits (its lists', or the defaults') */
    double seqs_cap = 512, tokens_cap = 8192;
    for (int i = 0; i < s->plan.n_seqs; i++)
        if (s->plan.max_num_seqs[i] > seqs_cap)
            seqs_cap = (double)s->plan.max_num_seqs[i];
    for (int i = 0; i < s->plan.n_batched; i++)
        if (s->plan.max_batched[i] > tokens_cap)
            tokens_cap = (double)s->plan.max_batched[i];
    if (seqs_cap > PLAN_GRID_SEQS_MAX)
        seqs_cap = PLAN_GRID_SEQS_MAX;
    if (tokens_cap > PLAN_GRID_TOKENS_MAX)
        tokens_cap = PLAN_GRID_TOKENS_MAX;
    m->ns = m->np = 0;
    for (double v = 1; m->ns < PLAN_GRID_MAX; v = ceil(v * PLAN_GRID_RATIO)) {
        m->gs[m->ns++] = v;
        if (v >= seqs_cap)
            break;
    }
    m->gp[m->np++] = 0;
    for (double v = 1; m->np < PLAN_GRID_MAX; v = ceil(v * PLAN_GRID_RATIO)) {
        m->gp[m->np++] = v;
        if (v >= tokens_cap)
            break;
    }
}

int st_plan_model_new(const char *base_name, const char *base_text, size_t base_len, const st_spec *base,
                      double tolerance, st_plan_model **out, char *err, size_t errlen)
{
    st_plan_model *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    m->base_name = base_name;
    m->base_text = base_text;
    m->base_len = base_len;
    m->base = base;
    m->tolerance = tolerance;
    pthread_mutex_init(&m->mu, NULL);
    m->workloads = st_wlcache_new(0);
    if (!m->workloads) {
        snprintf(err, errlen, "out of memory");
        st_plan_model_free(m);
        return -1;
    }
    if (bound_workload(base, &m->w, err, errlen)) {
        st_plan_model_free(m);
        return -1;
    }
    m->items = calloc(m->w.n ? m->w.n : 1, sizeof *m->items);
    if (!m->items) {
        snprintf(err, errlen, "out of memory");
        st_plan_model_free(m);
        return -1;
    }
    st_emu_sim_items_from_workload(&m->w, NULL, m->items);
    workload_extremes(m, base);
    *out = m;
    return 0;
}

void st_plan_model_free(st_plan_model *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_groups; i++) {
        free(m->groups[i]->cell);
        free(m->groups[i]);
    }
    free(m->groups);
    free(m->lp);
    free(m->items);
    st_wlcache_free(m->workloads);
    st_workload_free(&m->w);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

/* The batch a candidate runs at its capacity, about (Little's law on tokens): output tokens a
 * second x seconds an output token (its p95 TPOT: an upper side), within 1..max_seqs. 0 when not
 * evaluated. */
static double batch_at(const st_plan_candidate *at, uint32_t max_seqs)
{
    if (at->state != ST_PLAN_OK || !(at->output_tps > 0) || !(at->tpot_p95_ms > 0))
        return 0;
    double b = at->output_tps * at->tpot_p95_ms / 1000.0;
    return b < 1 ? 1 : b > max_seqs ? max_seqs : b;
}

/* Output tokens per request: what candidate at's runs delivered, else the spec's nominal length. */
static double out_tokens(const st_plan_model *m, const st_plan_candidate *at)
{
    if (at->state == ST_PLAN_OK && at->capacity_rps > 0 && at->output_tps > 0)
        return at->output_tps / at->capacity_rps;
    return m->base->workload.output_tokens > 0 ? m->base->workload.output_tokens : 1;
}

int st_plan_model_spec_pay(st_plan_model *m, const st_plan_candidate *c, const st_plan_candidate *at,
                           st_plan_spec_pay *out, char *why, size_t n)
{
    memset(out, 0, sizeof *out);
    st_emu_config cfg;
    st_emu_memory mem;
    uint32_t fit;
    if (engine_of(m, c, &cfg, &mem, &fit, why, n))
        return -1;
    if (!cfg.spec.k) {
        snprintf(why, n, "the candidate does not speculate");
        return -1;
    }
    double out_tok = out_tokens(m, at);
    uint32_t ctx = (uint32_t)(st_spec_mean_input(m->base) + out_tok / 2);
    st_emu_spec_point p;
    if (st_emu_spec_point_cfg(&cfg, 1, ctx, &p)) {
        snprintf(why, n, "the engine model's verification step could not be computed");
        return -1;
    }
    out->ratio_1 = p.ratio;
    for (uint32_t b = 1; b && b <= mem.max_num_seqs; b *= 2)
        if (st_emu_spec_point_cfg(&cfg, b, ctx, &p) == 0 && p.ratio >= 1) {
            out->breakeven = b;
            out->breakeven_rps = b / (out_tok * p.tpot_plain_s);
            break;
        }
    out->batch_at_cap = batch_at(at, mem.max_num_seqs);
    if (out->batch_at_cap > 0 && st_emu_spec_point_cfg(&cfg, (uint32_t)lround(out->batch_at_cap), ctx, &p) == 0)
        out->ratio_at_cap = p.ratio;
    out->ok = 1;
    return 0;
}

void st_plan_model_counts(const st_plan_model *m, int *runs, int *memo_hits)
{
    *runs = m->runs;
    *memo_hits = m->hits;
}

void st_plan_model_ops(st_plan_model *m, st_plan_ops *ops)
{
    ops->screen = screen;
    ops->refine = refine;
    ops->evaluate = evaluate;
    ops->arg = m;
}
