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
#include "emu/sim.h"
#include "emu/steptime.h"
#include "load/record.h"
#include "load/workload.h"

#define PLAN_SPEC_MAX ((size_t)1 << 20)
/* Saturation runs remembered (by engine configuration and clients). */
#define PLAN_MEMO_MAX 4096

typedef struct memo {
    uint64_t key;
    double rps;
    uint32_t running;
} memo;

struct st_plan_model {
    const char *base_name, *base_text;
    size_t base_len;
    const st_spec *base;
    double tolerance;
    volatile sig_atomic_t *stop; /* the interruption flag (NULL: never) */
    st_workload w;               /* the spec's workload, ST_PLAN_BOUND_MAX requests, built once (read-only) */
    st_emu_sim_item *items;      /* w as engine-model items */
    pthread_mutex_t mu;          /* guards what follows */
    memo memo[PLAN_MEMO_MAX];
    int n_memo, runs, hits;
};

/* The candidate's audit spec, parsed. 0, or -1 with why. */
static int candidate_spec(const st_plan_model *m, const st_plan_candidate *c, st_spec *out, char *why, size_t n)
{
    st_buf b;
    st_buf_init(&b, PLAN_SPEC_MAX);
    const st_plan_candidate *one[] = { c };
    int rc = st_plan_spec_write(m->base_name, m->base_text, m->base_len, one, 1, NULL, &b, why, n);
    if (rc == 0 && st_spec_parse(m->base_name, b.data, b.len, out, why, n))
        rc = -1;
    st_buf_free(&b);
    return rc;
}

static int cmp_ns(const void *a, const void *b)
{
    st_ns x = *(const st_ns *)a, y = *(const st_ns *)b;
    return x < y ? -1 : x > y;
}

/* Completions per second in the middle half of a closed-loop run that keeps `clients` requests
 * in flight (the engine's maximum throughput on this workload). */
static double saturated_rps(const st_plan_model *m, const st_emu_config *cfg, uint32_t clients, uint32_t *max_running,
                            char *why, size_t n)
{
    uint32_t reqs = clients * ST_PLAN_BOUND_PER_CLIENT;
    reqs = reqs < ST_PLAN_BOUND_MIN ? ST_PLAN_BOUND_MIN : reqs > ST_PLAN_BOUND_MAX ? ST_PLAN_BOUND_MAX : reqs;
    if (reqs > m->w.n)
        reqs = m->w.n;
    double rps = -1;
    st_record *recs = calloc(reqs ? reqs : 1, sizeof *recs);
    st_ns *ends = calloc(reqs ? reqs : 1, sizeof *ends);
    st_emu_sim_stats st;
    if (!recs || !ends) {
        snprintf(why, n, "out of memory");
        goto out;
    }
    st_emu_run_opts o = { .clients = clients, .stop = m->stop };
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
            ends[k++] = recs[i].end;
    if (k < 8) {
        snprintf(why, n, "only %u of %u requests completed when saturated", k, reqs);
        goto out;
    }
    qsort(ends, k, sizeof *ends, cmp_ns);
    uint32_t a = k / 4, b = 3 * k / 4;
    double span = (double)(ends[b] - ends[a]) / 1e9;
    rps = span > 0 ? (double)(b - a) / span : (double)k / ((double)ends[k - 1] / 1e9);
out:
    for (uint32_t i = 0; recs && i < reqs; i++)
        st_record_free(&recs[i]);
    free(recs);
    free(ends);
    return rps;
}

static uint64_t fnv(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h ? h : 1;
}

/* The saturation run of an engine configuration with `clients`, from the memo when an equal one
 * ran already (key: everything that shapes the run). */
static double saturated_memo(st_plan_model *m, const st_emu_config *cfg, const st_plan_candidate *c,
                             const st_emu_memory *mem, uint32_t clients, uint32_t *running, char *why, size_t n)
{
    char k[512];
    snprintf(k, sizeof k, "%s|%d|%s|%s|%u|%u|%u|%u", c->gpu, c->tp, c->model, c->kv_dtype, clients, mem->max_num_seqs,
             mem->max_num_batched_tokens, mem->max_model_len);
    uint64_t key = fnv(k);
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < m->n_memo; i++)
        if (m->memo[i].key == key) {
            double r = m->memo[i].rps;
            *running = m->memo[i].running;
            m->hits++;
            pthread_mutex_unlock(&m->mu);
            return r;
        }
    pthread_mutex_unlock(&m->mu);
    double r = saturated_rps(m, cfg, clients, running, why, n);
    pthread_mutex_lock(&m->mu);
    m->runs++;
    if (r > 0 && m->n_memo < PLAN_MEMO_MAX)
        m->memo[m->n_memo++] = (memo){ key, r, *running };
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

/* The coarse bound: the engine model's own step time in the steady state of a saturated
 * engine, without a simulation. fit requests hold the KV cache; each step decodes B of them and
 * prefills, within the step's token budget, what keeps the batch full (B / output tokens new
 * requests a step, each its uncached prompt); the rate is those new requests over the step's
 * time, times ST_PLAN_BOUND_MARGIN. refine checks it with a simulation for the candidates it
 * leaves in the race. */
static int screen(void *arg, st_plan_candidate *c, char *why, size_t n)
{
    st_plan_model *m = arg;
    st_emu_config cfg;
    st_emu_memory mem;
    uint32_t fit;
    if (interrupted(m, why, n) || engine_of(m, c, &cfg, &mem, &fit, why, n))
        return -1;
    const st_spec *s = m->base;
    double out = s->workload.output_tokens > 1 ? s->workload.output_tokens : 1;
    double in_u = st_spec_mean_input(s) - s->workload.shared_prefix;
    double prefix = s->workload.shared_prefix;
    double ctx = st_spec_mean_input(s) + out / 2; /* a decode's context on average */
    double per = 1 + in_u / out;                  /* tokens a step per decode */
    double b = fit, budget = mem.max_num_batched_tokens;
    if (b * per > budget)
        b = budget / per; /* the token budget, not the KV cache, limits the batch */
    if (b < 1)
        b = 1;
    double r = b / out; /* new requests a step */
    st_emu_batch batch = {
        .tokens = (uint32_t)ceil(b + r * in_u),
        .decode_tokens = (uint32_t)ceil(b),
        .seqs = (uint32_t)ceil(b + r),
        .sampled = (uint32_t)ceil(b + r),
        .attn_pairs = b * ctx + r * in_u * (prefix + in_u / 2),
        .kv_read_tokens = b * ctx + r * prefix,
    };
    double t = st_emu_step_seconds(&cfg, &batch, NULL);
    if (!(t > 0)) {
        snprintf(why, n, "the engine model gives no step time for this configuration");
        return -1;
    }
    c->bound_rps = r / t * ST_PLAN_BOUND_MARGIN;
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
    double rps = saturated_memo(m, &cfg, c, &mem, clients, &running, why, n);
    if (!(rps > 0))
        return -1;
    double b = rps * ST_PLAN_BOUND_MARGIN;
    c->bound_rps = b < c->bound_rps ? b : c->bound_rps;
    /* a --max-num-seqs the batch never reached (the KV cache binds first) changes nothing */
    char key[512];
    snprintf(key, sizeof key, "%s|%d|%s|%s|%ld|%ld|%ld", c->gpu, c->tp, c->model, c->kv_dtype,
             running >= mem.max_num_seqs ? (long)mem.max_num_seqs : -1L, (long)mem.max_num_batched_tokens,
             (long)mem.max_model_len);
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
    if (st_sweep_workload(base, base->workload.seed, ST_PLAN_BOUND_MAX, &m->w, err, errlen)) {
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
    *out = m;
    return 0;
}

void st_plan_model_free(st_plan_model *m)
{
    if (!m)
        return;
    free(m->items);
    st_workload_free(&m->w);
    pthread_mutex_destroy(&m->mu);
    free(m);
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
