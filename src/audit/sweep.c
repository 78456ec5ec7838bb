#include "audit/sweep.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "audit/capacity.h"
#include "audit/executor.h"
#include "audit/figures.h"
#include "audit/quality_pass.h"
#include "audit/sustain.h"
#include "audit/traffic.h"
#include "emu/config.h"
#include "core/buf.h"
#include "core/version.h"
#include "engine/process.h"
#include "load/agent_file.h"
#include "load/arrival.h"
#include "load/runner.h"
#include "load/trace.h"
#include "load/wlcache.h"
#include "load/workload.h"

/* What a run key is hashed from (spec facts, flags, rate). */
#define RUN_KEY_INPUT_MAX ((size_t)1 << 20)

#define MAX_RUNS_PER_CONFIG 64
/* The most requests one sustained run schedules (its workload is built before it starts). */
#define SUSTAIN_RUN_MAX_REQUESTS 60000u
/* A sustained run is scheduled for this many times the length its phases are expected to take
 * (from the largest median E2E seen so far in the configuration), within max_duration. */
#define SUSTAIN_SIZING 2.0
/* The most requests a sustained run keeps in flight (each holds a connection). */
#define SUSTAIN_MAX_IN_FLIGHT 8192u
/* The bounds --check suggests for a concurrency level that cannot fill its window leave this much
 * room over the least it needs (that least comes from an unloaded E2E, which only grows with load). */
#define BOUNDS_ADVICE_ROOM 1.2

typedef struct sweep {
    const st_spec *spec;
    const st_sweep_opts *o;
    st_store *store;
    st_sweep_result *res;
    char logdir[4096];
    st_ns t_start;
    int ci;                /* configuration index being run */
    uint32_t *base_prefix; /* the shared prefix every synthetic request starts with */
    uint32_t prefix_len;
    /* progress of the current rate */
    double rate;
    int rate_no, rates_planned;
    int line_open;       /* a TTY line is drawn and not yet ended */
    st_ns last_draw;     /* when the TTY progress line was last drawn */
    st_executor *x;      /* runs the engine (HTTP or the engine model) */
    int in_memory;       /* a forecast or a bisection: no store, no progress */
    double turns;        /* requests per arrival on the schedule: the mean turns of a session (1 without sessions) */
    st_quality_ref qref; /* the baseline's answers for the quality pass (audit/quality_pass.h) */
    const st_workload *borrowed; /* the run's workload when it came from x->workloads (build_run) */
} sweep;

/* One configuration's search: its start row, the runs so far (in the order they were run) and
 * what sizes the next sustained run. */
typedef struct cfgrun {
    int ci;
    const st_spec_config *c;
    st_config_row row;
    st_rate_result rr[MAX_RUNS_PER_CONFIG];
    int n, seq;
    int engine_up, engine_failed, done;
    double forecast; /* the engine model's capacity (0: none) */
    double e2e_est;  /* the largest median E2E of its sustained runs so far (s; 0: none yet) */
    uint64_t spent;  /* requests sent by its runs */
} cfgrun;

/* ---- output ---- */

static void say(sweep *S, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(sweep *S, const char *fmt, ...)
{
    if (S->o->quiet || !S->o->out)
        return;
    if (S->line_open) {
        fputs("\r\033[K", S->o->out);
        S->line_open = 0;
    }
    va_list ap;
    va_start(ap, fmt);
    vfprintf(S->o->out, fmt, ap);
    va_end(ap);
    fputc('\n', S->o->out);
    fflush(S->o->out);
}

static void fmt_dur(char *b, size_t n, double s)
{
    if (!isfinite(s) || s < 0)
        snprintf(b, n, "?");
    else if (s < 3600)
        snprintf(b, n, "%d:%02d", (int)s / 60, (int)s % 60);
    else
        snprintf(b, n, "%d:%02d:%02d", (int)s / 3600, ((int)s / 60) % 60, (int)s % 60);
}

/* ---- run key ---- */

/* The facts every run key starts with: engine, command, model, flags, environment, API, workload. */
static void key_common(st_buf *b, const st_spec *s, const st_spec_config *c, const char *tag)
{
    st_strv flags = { 0 };
    st_spec_config_flags(s, c, &flags);
    st_buf_printf(b, "%s|%s|%s|", tag, ST_VERSION, st_engine_kind_name(s->engine.kind));
    for (int i = 0; i < s->engine.command.n; i++)
        st_buf_printf(b, "cmd=%s\x1f", s->engine.command.v[i]);
    st_buf_printf(b, "|model=%s|served=%s|", st_spec_config_model(s, c),
                  s->engine.served_name ? s->engine.served_name : "");
    for (int i = 0; i < flags.n; i++)
        st_buf_printf(b, "flag=%s\x1f", flags.v[i]);
    for (int i = 0; i < s->engine.env.n; i++)
        st_buf_printf(b, "env=%s=%s\x1f", s->engine.env.key[i], s->engine.env.val[i]);
    for (int i = 0; i < c->env.n; i++)
        st_buf_printf(b, "cenv=%s=%s\x1f", c->env.key[i], c->env.val[i]);
    st_buf_printf(b, "|url=%s|api=%s|%s", s->engine.url ? s->engine.url : "",
                  s->engine.api_set ? st_api_name(s->engine.api) : "", st_spec_fits_prompts(s) ? "exact|" : "");
    if (s->workload.kind == ST_WL_SYNTHETIC)
        st_buf_printf(b, "syn=%u,%u,%.17g,%u%s", s->workload.input_tokens, s->workload.output_tokens,
                      s->workload.range_ratio, s->workload.shared_prefix, s->workload.vllm_semantics ? ",vllm" : "");
    else
        st_buf_printf(b, "trace=%s", s->workload.trace);
    /* sessions change what a run sends: only specs that use them have this in their key */
    if (s->workload.sessions.on && s->workload.kind == ST_WL_TRACE && s->workload.sessions.think_set)
        st_buf_printf(b, "|sessions=replay,think=%.17g", s->workload.sessions.think_s);
    else if (s->workload.agent) /* an agent trace's task graphs */
        st_buf_printf(b, "|agent=%d", s->workload.agent);
    else if (s->workload.sessions.on && s->workload.kind == ST_WL_TRACE)
        st_buf_printf(b, "|sessions=replay");
    else if (s->workload.sessions.on)
        st_buf_printf(b, "|sessions=%u-%u,%u,%.17g,%s", s->workload.sessions.turns_min, s->workload.sessions.turns_max,
                      s->workload.sessions.user_tokens, s->workload.sessions.think_s,
                      s->workload.sessions.think_exp ? "exp" : "const");
    if (s->workload.sessions.on && s->workload.sessions.fan_out_max) /* agent tasks */
        st_buf_printf(b, ",fan_out=%u-%u", s->workload.sessions.fan_out_min, s->workload.sessions.fan_out_max);
    st_strv_free(&flags);
}

static void key_slo(st_buf *b, const st_spec *s)
{
    for (int i = 0; i < s->slo.n; i++)
        st_buf_printf(b, "slo=%d,%g,%.17g\x1f", (int)s->slo.terms[i].metric, s->slo.terms[i].pct,
                      s->slo.terms[i].max_ms);
}

void st_sweep_run_key(const st_spec *s, const st_spec_config *c, double rate, char out[65])
{
    st_buf b;
    st_buf_init(&b, RUN_KEY_INPUT_MAX);
    key_common(&b, s, c, "servetune-run/1");
    st_buf_printf(&b, "|n=%u|seed=%llu|arr=%s,%.17g|warm=%u|timeout=%.17g|rate=%.17g|early=%d|",
                  s->workload.requests_per_rate, (unsigned long long)s->workload.seed,
                  s->workload.arrival ? s->workload.arrival : "poisson", s->workload.burstiness, s->warmup_requests,
                  s->timeouts.request_s, rate, s->search.early_stop);
    if (s->closed_loop) /* a fixed-count closed loop: `rate` is its concurrency */
        st_buf_printf(&b, "closed-loop|");
    key_slo(&b, s);
    st_store_hash(b.data ? b.data : "", b.len, out);
    st_buf_free(&b);
}

void st_sweep_run_key_sustained(const st_spec *s, const st_spec_config *c, double rate, int replicate, uint32_t planned,
                                char out[65])
{
    st_buf b;
    st_buf_init(&b, RUN_KEY_INPUT_MAX);
    key_common(&b, s, c, "servetune-run/2|sustained");
    st_buf_printf(&b,
                  "|planned=%u|seed=%llu|arr=%s,%.17g|warm=%u|timeout=%.17g|%s=%.17g|rep=%d|early=%d|"
                  "maxdur=%.17g|win=%.17g,%u|warme2e=%.17g|conf=%.17g|",
                  planned, (unsigned long long)s->workload.seed, s->workload.arrival ? s->workload.arrival : "poisson",
                  s->workload.burstiness, s->warmup_requests, s->timeouts.request_s,
                  s->closed_loop ? "concurrency" : "rate", rate, replicate, s->search.early_stop,
                  s->search.max_duration_s, s->search.min_window_s, s->search.min_window_requests, s->search.warmup_e2e,
                  s->search.confidence);
    key_slo(&b, s);
    st_store_hash(b.data ? b.data : "", b.len, out);
    st_buf_free(&b);
}

/* ---- workloads ---- */

/* The same rate always gets the same prompts (its seed derives from the rate), different rates
 * get different ones (so a rate does not hit the prefix cache with the previous rate's prompts),
 * and every synthetic prompt starts with the one shared prefix. */
static uint64_t rate_seed(uint64_t seed, double rate)
{
    uint64_t bits;
    memcpy(&bits, &rate, sizeof bits);
    uint64_t z = seed ^ (bits * 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    return z ^ (z >> 31);
}

/* A replicate of a rate gets prompts and arrivals of its own (the first one: the rate's). */
static uint64_t replicate_seed(uint64_t seed, double rate, int replicate)
{
    uint64_t z = rate_seed(seed, rate);
    return replicate ? rate_seed(z ^ 0x5eedULL, (double)replicate) : z;
}

/* The length of one pass over the first m items when their arrivals are all timed (*timed): their
 * span plus one mean gap (a second when there is no span). */
static st_ns pass_length(const st_work_item *it, uint32_t m, int *timed)
{
    *timed = 1;
    st_ns lo = INT64_MAX, hi = INT64_MIN;
    for (uint32_t i = 0; i < m; i++) {
        *timed &= it[i].arrival >= 0;
        lo = it[i].arrival < lo ? it[i].arrival : lo;
        hi = it[i].arrival > hi ? it[i].arrival : hi;
    }
    return m > 1 && hi > lo ? (hi - lo) + (hi - lo) / (m - 1) : ST_NS_PER_S;
}

/* *d = a copy of *src numbered id, with its own prompt (no history: a copy's turns are linked
 * anew). 0, or -1 out of memory. */
static int copy_item(st_work_item *d, const st_work_item *src, uint32_t id)
{
    *d = *src;
    d->id = id;
    d->input_ids = NULL;
    d->input_text = NULL;
    d->history = NULL;
    d->n_history = 0;
    if (src->input_ids && (d->input_ids = malloc(sizeof(uint32_t) * src->input_len)))
        memcpy(d->input_ids, src->input_ids, sizeof(uint32_t) * src->input_len);
    if (src->input_text)
        d->input_text = strdup(src->input_text);
    return (src->input_ids && !d->input_ids) || (src->input_text && !d->input_text) ? -1 : 0;
}

/* cycle_trace of a workload with sessions replayed: whole passes (each a copy of the trace's
 * sessions, numbered apart), the scheduled items of every pass first, then the dependent turns
 * (the workload's layout), their links moved along. 0, or -1 out of memory. */
static int cycle_sessions(st_workload *w, uint32_t n)
{
    uint32_t m = w->n, md = w->n_dependent, ms = m - md;
    uint32_t passes = (n + m - 1) / m;
    if (ms == 0 || (uint64_t)passes * m > ST_WORKLOAD_MAX_REQUESTS)
        return passes > 1 ? -1 : 0;
    uint32_t N = passes * m;
    st_work_item *it = calloc(N, sizeof *it);
    if (!it)
        return -1;
    int timed;
    st_ns pass = pass_length(w->items, ms, &timed);
    int rc = 0;
    for (uint32_t p = 0; p < passes; p++)
        for (uint32_t k = 0; k < m; k++) {
            const st_work_item *src = &w->items[k];
            uint32_t to = k < ms ? p * ms + k : passes * ms + p * md + (k - ms);
            st_work_item *d = &it[to];
            if (copy_item(d, src, to))
                rc = -1;
            if (src->session)
                d->session = src->session + p * w->n_sessions;
            if (src->next)
                d->next = src->next < ms ? p * ms + src->next : passes * ms + p * md + (src->next - ms);
            if (timed && k < ms)
                d->arrival = src->arrival + (st_ns)p * pass;
        }
    st_workload c = { .items = it, .n = N, .n_dependent = passes * md, .n_sessions = passes * w->n_sessions };
    st_workload_free(w);
    *w = c;
    return rc;
}

/* A sustained run lasts as long as it needs: a trace shorter than the run is replayed again and
 * again (its timestamps continue one mean gap after the previous pass). 0, or -1 out of memory. */
static int cycle_trace(st_workload *w, uint32_t n)
{
    if (w->n_dependent)
        return cycle_sessions(w, n);
    uint32_t m = w->n;
    st_work_item *it = realloc(w->items, sizeof *it * n);
    if (!it)
        return -1;
    w->items = it;
    int timed;
    st_ns pass = pass_length(it, m, &timed);
    int rc = 0;
    for (uint32_t i = m; i < n; i++) {
        const st_work_item *src = &it[i % m];
        st_work_item *d = &it[i];
        int bad = copy_item(d, src, i);
        if (timed)
            d->arrival = src->arrival + (st_ns)(i / m) * pass;
        w->n = i + 1;
        if (bad) {
            rc = -1;
            break;
        }
    }
    return rc;
}

uint32_t st_sweep_config_context(const st_spec *spec, const st_spec_config *c)
{
    char why[256], err[512];
    if (spec->workload.kind != ST_WL_TRACE || !c || !st_exec_model_supported(spec, why, sizeof why))
        return 0;
    st_emu_config cfg;
    if (st_exec_model_config(spec, c, &cfg, NULL, 0, NULL, err, sizeof err))
        return 0;
    return cfg.max_model_len ? cfg.max_model_len : cfg.model.max_position;
}

int st_sweep_trace_over_context(const st_spec *spec, uint32_t ctx, uint64_t *over, uint64_t *total, char *err,
                                size_t errlen)
{
    *over = *total = 0;
    if (spec->workload.kind != ST_WL_TRACE || spec->workload.agent || !ctx)
        return 0;
    /* the rows the spec's filters keep, then those of them within ctx */
    st_trace_opts o;
    st_spec_trace_opts(spec, &o);
    st_trace_counts c;
    if (st_trace_read_file(spec->workload.trace, &o, NULL, NULL, &c, NULL, err, errlen))
        return -1;
    *total = c.kept;
    if (o.max_context && o.max_context <= ctx)
        return 0;
    o.max_context = ctx;
    if (st_trace_read_file(spec->workload.trace, &o, NULL, NULL, &c, NULL, err, errlen))
        return -1;
    *over = *total > c.kept ? *total - c.kept : 0;
    return 0;
}

int st_sweep_agent_over_context(const st_spec *spec, uint32_t ctx, st_sweep_agent_fit *f, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    f->fit.first = UINT32_MAX;
    if (spec->workload.kind != ST_WL_TRACE || !spec->workload.agent || !ctx)
        return 0;
    st_agent_graph g;
    if (st_agent_load_file(spec->workload.trace, 0, &g, NULL, err, errlen))
        return -1;
    int rc = st_agent_fit_context(&g, ctx, NULL, &f->fit);
    if (rc)
        snprintf(err, errlen, "out of memory");
    else if (f->fit.first < g.n) {
        const st_agent_node *x = &g.nodes[f->fit.first];
        snprintf(f->task, sizeof f->task, "%s", g.tasks[x->task].name);
        snprintf(f->node, sizeof f->node, "%s", x->id);
    }
    st_agent_graph_free(&g);
    return rc;
}

/* An agent trace's whole tasks, at least n requests (load/agent.h st_agent_workload_n): each run its
 * own prompt ids (seed), the sharing within a pass of the trace kept; with max_context, the tasks
 * that hold a node longer than it left out (st_agent_keep_within). */
static int agent_workload(const st_spec *s, uint64_t seed, uint32_t n, uint32_t max_context, st_workload *w, char *err,
                          size_t errlen)
{
    st_agent_graph g;
    char e[768];
    if (st_agent_load_file(s->workload.trace, 0, &g, NULL, e, sizeof e)) {
        snprintf(err, errlen, "%s", e);
        return -1;
    }
    st_agent_fit f;
    if (max_context && st_agent_keep_within(&g, max_context, &f)) {
        st_agent_graph_free(&g);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (max_context && !g.n_tasks) {
        st_agent_graph_free(&g);
        snprintf(err, errlen,
                 "%s: every one of its %u tasks holds a request longer (prompt as grown by its parents' answers + "
                 "output) than the context of %u tokens: nothing to run",
                 s->workload.trace, f.tasks, max_context);
        return -1;
    }
    int rc = st_agent_workload_n(&g, seed, n, w, e, sizeof e);
    if (rc)
        snprintf(err, errlen, "%s: %s", s->workload.trace, e);
    st_agent_graph_free(&g);
    return rc;
}

int st_sweep_workload(const st_spec *s, uint64_t seed, uint32_t n, st_workload *w, char *err, size_t errlen)
{
    return st_sweep_workload_ctx(s, seed, n, 0, w, err, errlen);
}

int st_sweep_workload_ctx(const st_spec *s, uint64_t seed, uint32_t n, uint32_t max_context, st_workload *w, char *err,
                          size_t errlen)
{
    memset(w, 0, sizeof *w);
    if (s->workload.agent)
        return agent_workload(s, seed, n, max_context, w, err, errlen);
    if (s->workload.kind == ST_WL_TRACE) {
        st_trace_load_opts o;
        st_trace_load_opts_default(&o);
        st_spec_trace_opts(s, &o.read);
        o.sessions = s->workload.sessions.on ? ST_TRACE_SESSIONS_REPLAY : ST_TRACE_SESSIONS_FLAT;
        if (s->workload.sessions.think_set)
            o.think_s = s->workload.sessions.think_s;
        /* each run its own prompts (the sharing within the trace kept): a replay at one rate must
         * not find the prompts of the run before it in the prefix cache */
        o.read.salt = seed;
        o.read.max_rows = n;
        /* a request longer than the configuration's context would be refused (HTTP 400) and fail
         * the run: left out and counted, as bench leaves it out (st_sweep_config_context) */
        if (max_context && (!o.read.max_context || max_context < o.read.max_context))
            o.read.max_context = max_context;
        if (s->workload.trace_spread && st_audit_trace_spread(s, &o.read, n, err, errlen))
            return -1;
        if (st_trace_load(s->workload.trace, &o, w, NULL, NULL, err, errlen))
            return -1;
        if (s->search.mode == ST_SEARCH_SUSTAINED && w->n > 0 && w->n < n && cycle_trace(w, n)) {
            st_workload_free(w);
            snprintf(err, errlen, "out of memory repeating the trace");
            return -1;
        }
        return 0;
    }
    if (s->workload.sessions.on) {
        st_session_params sp;
        st_spec_sessions(s, n, seed, &sp);
        return st_workload_sessions(&sp, w, err, errlen);
    }
    st_synth_params p;
    st_spec_synth(s, n, seed, &p);
    return st_workload_synthetic(&p, w, err, errlen);
}

/* Whether the run's synthetic prompts can be lazy (load/workload.h st_work_item.lazy): the engine
 * model reads only their shared prefix and own_key (emu/sim.h), nothing rewrites them. */
static int workload_lazy(const sweep *S)
{
    const st_spec *s = S->spec;
    return S->x && S->x->prediction && !S->x->ops->prepare && s->workload.kind == ST_WL_SYNTHETIC &&
           !s->workload.sessions.on && !s->workload.agent;
}

/* The spec's workload with the audit's shared prefix (the same token ids in every run). */
static int make_workload(sweep *S, uint64_t seed, uint32_t n, st_workload *w, char *err, size_t errlen)
{
    if (workload_lazy(S)) { /* the same prompts as below, their own ids not drawn */
        st_synth_params p;
        st_spec_synth(S->spec, n, seed, &p);
        if (!S->base_prefix || S->prefix_len <= p.prefix_len) {
            if (st_workload_synthetic_lazy(&p, w, err, errlen))
                return -1;
            if (S->base_prefix && S->prefix_len) /* every item's leading ids: the shared prefix */
                memcpy(w->shared_ids, S->base_prefix, sizeof(uint32_t) * S->prefix_len);
            return 0;
        }
    }
    uint32_t ctx =
        S->ci >= 0 && S->ci < S->spec->n_configs ? st_sweep_config_context(S->spec, &S->spec->configs[S->ci]) : 0;
    if (st_sweep_workload_ctx(S->spec, seed, n, ctx, w, err, errlen))
        return -1;
    for (uint32_t i = 0; i < w->n && S->base_prefix; i++) /* (a session's later turns hold only new text) */
        if (w->items[i].input_ids && w->items[i].input_len >= S->prefix_len && w->items[i].turn == 0) {
            memcpy(w->items[i].input_ids, S->base_prefix, sizeof(uint32_t) * S->prefix_len);
            if (S->prefix_len > w->items[i].own_from) /* its own ids changed (load/workload.h) */
                w->items[i].own_key = 0;
        }
    return 0;
}

/* Whether the run's workload can come from the executor's cache: synthetic prompts without
 * sessions (nothing in them changes during a run) on an executor that does not rewrite them. */
static int workload_cacheable(const sweep *S)
{
    const st_spec *s = S->spec;
    return S->x && S->x->workloads && !S->x->ops->prepare && s->workload.kind == ST_WL_SYNTHETIC &&
           !s->workload.sessions.on && !s->workload.agent;
}

/* Everything make_workload's synthetic prompts depend on: the generator's parameters and the
 * shared prefix (drawn from the spec's own seed). */
typedef struct wl_key {
    st_synth_params p;
    uint64_t prefix_seed;
    uint32_t prefix_len, ctx;
} wl_key;
_Static_assert(sizeof(wl_key) == sizeof(st_synth_params) + 16, "wl_key is compared as bytes: no padding in it");

typedef struct wl_make {
    sweep *S;
    uint64_t seed;
    uint32_t n;
} wl_make;

static int make_workload(sweep *S, uint64_t seed, uint32_t n, st_workload *w, char *err, size_t errlen);

static int wl_make_fn(void *arg, st_workload *w, char *err, size_t errlen)
{
    wl_make *m = arg;
    return make_workload(m->S, m->seed, m->n, w, err, errlen);
}

/* The run's workload: from the executor's cache when it can be (borrowed: drop_workload gives it
 * back), else made. */
static int run_workload(sweep *S, uint64_t seed, uint32_t n, st_workload *w, char *err, size_t errlen)
{
    if (!workload_cacheable(S))
        return make_workload(S, seed, n, w, err, errlen);
    wl_key k;
    memset(&k, 0, sizeof k); /* the padding too: the key is compared as bytes */
    st_spec_synth(S->spec, n, seed, &k.p);
    k.prefix_seed = S->base_prefix ? S->spec->workload.seed : 0;
    k.prefix_len = S->base_prefix ? S->prefix_len : 0;
    k.ctx = S->ci >= 0 && S->ci < S->spec->n_configs ? st_sweep_config_context(S->spec, &S->spec->configs[S->ci]) : 0;
    wl_make m = { S, seed, n };
    const st_workload *got = st_wlcache_get(S->x->workloads, &k, sizeof k, wl_make_fn, &m, err, errlen);
    if (!got)
        return -1;
    *w = *got; /* read-only: the cache keeps it */
    S->borrowed = got;
    return 0;
}

/* Frees a run's workload, or gives it back to the cache it came from. */
static void drop_workload(sweep *S, st_workload *w)
{
    if (S->borrowed && w->items == S->borrowed->items) {
        st_wlcache_put(S->x->workloads, S->borrowed);
        S->borrowed = NULL;
        memset(w, 0, sizeof *w);
        return;
    }
    st_workload_free(w);
}

/* n arrival times for the first n_sched items (the rest, a session's later turns, are released
 * when the turn before them ends). */
static int make_schedule(const st_spec *s, double rate_wall, uint64_t seed, uint32_t n, uint32_t n_sched, st_ns **out)
{
    *out = calloc(n ? n : 1, sizeof(st_ns));
    if (!*out)
        return -1;
    st_arrival a = { .kind = ST_ARR_POISSON, .rate = rate_wall, .burstiness = s->workload.burstiness, .seed = seed };
    if (isinf(rate_wall))
        a.kind = ST_ARR_INF;
    else if (s->workload.arrival && st_arrival_kind_from_name(s->workload.arrival, &a.kind))
        a.kind = ST_ARR_POISSON;
    if (st_arrival_schedule(&a, n_sched, *out)) {
        free(*out);
        *out = NULL;
        return -1;
    }
    return 0;
}


/* The arrival schedule of a rate in the engine's time: a trace with timestamps keeps its shape
 * (burstiness), retimed to the rate; otherwise the spec's arrival process. */
static int rate_schedule(const st_spec *s, const st_workload *w, double rate, uint64_t seed, st_ns **out)
{
    uint32_t n = w->n, ns = w->n - w->n_dependent; /* sessions: their starts are on the schedule */
    *out = NULL;
    int timed = s->workload.kind == ST_WL_TRACE && ns > 1 && isfinite(rate);
    for (uint32_t i = 0; timed && i < ns; i++)
        timed = w->items[i].arrival >= 0;
    if (timed) {
        st_ns *sched = calloc(n, sizeof *sched);
        for (uint32_t i = 0; sched && i < ns; i++)
            sched[i] = w->items[i].arrival;
        if (sched && st_arrival_retime(sched, ns, rate) == 0) {
            *out = sched;
            return 0;
        }
        free(sched);
    }
    return make_schedule(s, rate, seed, n, ns, out);
}

/* ---- one run ---- */

typedef struct rate_ctx {
    sweep *S;
    const st_audit_slo *slo;
    uint32_t planned;
    double time_scale;
    int early_stopped;
    int interrupted;
    const char *cfg_name;
    st_sustain *ctl; /* a sustained run's controller (NULL: a burst run) */
} rate_ctx;

/* The TTY progress line (the engine model ticks every emulated second, far faster than a
 * terminal needs: at most ten lines a second). */
static void draw_progress(rate_ctx *R, const st_runner_progress *p)
{
    sweep *S = R->S;
    if (S->o->quiet || !S->o->out || !S->o->tty)
        return;
    st_ns now = st_now();
    if (S->line_open && now - S->last_draw < 100 * ST_NS_PER_MS)
        return;
    S->last_draw = now;
    char el[32], eta[32], rt[32];
    double elapsed = st_ns_to_s(now - S->t_start);
    fmt_dur(el, sizeof el, elapsed);
    st_capacity_fmt_rate(rt, sizeof rt, S->rate);
    if (R->ctl) {
        fprintf(S->o->out, "\r\033[K[%d/%d %s] %s %s: %s phase, %.0f s, %u done, %u in flight | elapsed %s", S->ci + 1,
                S->spec->n_configs, R->cfg_name, S->spec->closed_loop ? "concurrency" : "rate", rt,
                st_sus_phase_name(R->ctl->phase), st_ns_to_s(p->elapsed) * R->time_scale, p->completed + p->failed,
                p->in_flight, el);
    } else {
        /* ETA: this rate's remaining schedule plus the remaining rates of this and later configs at
         * the pace so far (a rough guide). */
        double done_frac =
            (S->ci + (double)(S->rate_no - 1 + (p->total ? (double)(p->completed + p->failed) / p->total : 0)) /
                         (S->rates_planned ? S->rates_planned : 1)) /
            S->spec->n_configs;
        fmt_dur(eta, sizeof eta, done_frac > 0.01 ? elapsed / done_frac - elapsed : NAN);
        fprintf(S->o->out, "\r\033[K[%d/%d %s] %s %s%s%s: %u/%u done, %u in flight | elapsed %s, about %s left",
                S->ci + 1, S->spec->n_configs, R->cfg_name, S->spec->closed_loop ? "concurrency" : "rate", rt,
                S->spec->closed_loop ? "" : " ", S->spec->closed_loop ? "" : st_spec_rate_unit(S->spec),
                p->completed + p->failed, p->total, p->in_flight, el, eta);
    }
    fflush(S->o->out);
    S->line_open = 1;
}

/* The executor's tick: interruption, the end of a sustained run or a burst run's SLO early stop,
 * the progress line. Nonzero: stop. */
static int on_tick(void *arg, const st_runner_progress *p, const st_metrics_sample *samples, uint32_t n_samples)
{
    rate_ctx *R = arg;
    sweep *S = R->S;
    int stop = 0;
    if (*S->o->stop) {
        R->interrupted = 1;
        stop = 1;
    } else if (R->ctl && p->records) {
        stop = st_sustain_step(R->ctl, p->records, p->total, p->elapsed, R->time_scale, samples, n_samples);
    } else if (S->spec->search.early_stop && p->records && !R->early_stopped && !R->ctl) {
        uint32_t br[ST_SLO_MAX_TERMS], failed;
        st_audit_breaches(R->slo, p->records, p->total, p->elapsed, R->time_scale, S->spec->closed_loop, br, &failed);
        if (st_capacity_sure_fail(R->slo, R->planned, br, failed)) {
            R->early_stopped = 1;
            stop = 1;
        }
    }
    if (!stop)
        draw_progress(R, p);
    return stop;
}

/* Builds a run's requests (prepared by the executor) and arrival schedule (engine time): a closed
 * loop has every request due at once (the concurrency limit sends them as slots free). 0, 1 when
 * interrupted, or -1 with row->why. */
static int build_run(sweep *S, double rate, uint64_t seed, uint32_t n, st_workload *w, st_ns **sched, st_run_row *row)
{
    char err[512];
    *sched = NULL;
    if (run_workload(S, seed, n, w, err, sizeof err)) {
        row->why = strdup(err);
        return -1;
    }
    if (S->x->ops->prepare && S->x->ops->prepare(S->x, w)) {
        drop_workload(S, w);
        return 1;
    }
    double r = S->spec->closed_loop ? INFINITY : rate;
    if (rate_schedule(S->spec, w, r, seed ^ 0xa5a5, sched)) {
        drop_workload(S, w);
        row->why = strdup("cannot build the arrival schedule");
        return -1;
    }
    return 0;
}

/* Runs workload w on schedule sched through the executor, row timed and R ticking; with concurrency
 * levels a closed loop of w's requests, at most `rate` in flight (every request due at once, each
 * sent when a slot frees). 0 with out to judge, 1 when interrupted (out freed), -1 on an error
 * (row->why says why). */
static int exec_run(sweep *S, const st_spec_config *c, st_config_row *crow, st_workload *w, const st_ns *sched,
                    double rate, rate_ctx *R, st_run_row *row, st_exec_out *out)
{
    const st_spec *s = S->spec;
    char err[512];
    st_exec_rate in = { .c = c,
                        .w = w,
                        .sched = sched,
                        .warmup = 0,
                        .timeout_s = s->timeouts.request_s,
                        .max_concurrency = s->closed_loop ? (uint32_t)rate : 0,
                        .closed_loop = s->closed_loop,
                        .tick = on_tick,
                        .tick_arg = R };
    row->started = st_wall_ns();
    int rr = S->x->ops->run_rate(S->x, &in, crow, out, err, sizeof err);
    row->ended = st_wall_ns();
    if (rr < 0) {
        row->why = strdup(err);
        return -1;
    }
    if (rr == 1 || R->interrupted) {
        st_exec_out_free(out);
        return 1;
    }
    return 0;
}

/* Runs one burst rate. Fills run (owned strings) and the records/samples to store; returns 0, 1
 * when interrupted (nothing to store), -1 on an error that leaves no run (run->why says why). */
static int run_burst(sweep *S, const st_spec_config *c, st_config_row *crow, double rate, st_run_row *row,
                     st_exec_out *out)
{
    const st_spec *s = S->spec;
    st_workload w;
    st_ns *sched;
    memset(out, 0, sizeof *out);
    int rc = build_run(S, rate, rate_seed(s->workload.seed, rate), s->workload.requests_per_rate, &w, &sched, row);
    if (rc == 0) {
        uint32_t n = w.n;
        rate_ctx R = { .S = S, .slo = &s->slo, .planned = n, .time_scale = S->x->time_scale, .cfg_name = c->name };
        rc = exec_run(S, c, crow, &w, sched, rate, &R, row, out);
        free(sched);
        drop_workload(S, &w);
        if (rc == 0) {
            st_rate_figures f;
            st_audit_figures(&s->slo, out->records, out->n, n, row, &f);
            f.stopped_early = out->stopped && R.early_stopped;
            if (f.stopped_early)
                st_audit_lower_bounds(&s->slo, out->records, out->n, f.value_ms, &f.due);
            st_verdict_info v;
            st_capacity_verdict(&s->slo, &f, &v);
            row->verdict = strdup(st_verdict_name(v.verdict));
            row->why = strdup(v.why);
            row->worst_ratio = v.worst_ratio;
            row->stopped_early = f.stopped_early;
            row->client_limited = out->client_limited;
            for (int i = 0; i < row->n_terms; i++)
                row->term_ms[i] = f.value_ms[i];
        }
    }
    return rc;
}

/* How many requests a sustained run schedules: enough for max_duration, or (once a median E2E is
 * known) SUSTAIN_SIZING x the warm phase, the window and the drain; within the budget left. */
static uint32_t sustained_planned(const sweep *S, const cfgrun *cr, double rate)
{
    const st_spec *s = S->spec;
    double dur = s->search.max_duration_s;
    double e = cr->e2e_est;
    /* sessions: rate is sessions/s, and each brings its turns; their warm phase lasts as long as a
     * whole session (its turns and think times), which one E2E does not tell: the run is sized for
     * max_duration (it stops once its window is measured) */
    double turns = S->turns >= 1 ? S->turns : 1;
    if (e > 0 && !s->workload.sessions.on) {
        double win = s->search.min_window_s;
        if (2 * e > win)
            win = 2 * e;
        if (!s->closed_loop && s->search.min_window_requests / (rate * turns) > win)
            win = s->search.min_window_requests / (rate * turns);
        double need = SUSTAIN_SIZING * ((s->search.warmup_e2e + 2) * e + win);
        if (need < dur)
            dur = need;
    }
    double n;
    if (s->closed_loop) {
        /* N clients deliver about N / E2E requests a second; the warm phase and the drain take
         * about (k + 2) N requests, the window its minimum */
        double need = SUSTAIN_SIZING * ((s->search.warmup_e2e + 2) * rate + s->search.min_window_requests);
        n = e > 0 ? rate * (dur / e + 2) : rate * 64 + 4.0 * s->search.min_window_requests;
        if (n < need)
            n = need;
    } else {
        n = ceil(rate * turns * dur) + turns;
    }
    if (n > SUSTAIN_RUN_MAX_REQUESTS)
        n = SUSTAIN_RUN_MAX_REQUESTS;
    if (s->search.request_budget && cr->spent + n > s->search.request_budget)
        n = cr->spent < s->search.request_budget ? (double)(s->search.request_budget - cr->spent) : 0;
    if (n < 2)
        n = 2;
    return (uint32_t)n;
}

/* The window's records (shallow copies; the caller frees the array only). */
static st_record *window_records(const st_record *recs, uint32_t n, const st_sustain_result *res, int closed,
                                 uint32_t *nw)
{
    *nw = 0;
    st_record *w = malloc(sizeof *w * (n ? n : 1));
    if (!w)
        return NULL;
    for (uint32_t i = 0; i < n; i++) {
        st_ns at = closed ? recs[i].sent : recs[i].scheduled;
        double a = at >= 0 ? st_ns_to_s(at) : NAN;
        if (!recs[i].warmup && a >= res->window_start_s && a <= res->window_end_s)
            w[(*nw)++] = recs[i];
    }
    return w;
}

/* A sustained run's row from its verdict: the window's figures when it has a complete window,
 * else the whole run's; the verdict, its sentence, and the analysis as summary_json. */
static void sustained_row(const st_spec *s, const st_sustain *ctl, const st_sustain_result *res, const st_exec_out *out,
                          st_run_row *row)
{
    st_rate_figures f;
    uint32_t nw = 0;
    st_record *w = NULL;
    int windowed = isfinite(res->window_start_s) && isfinite(res->window_end_s) && res->window_requests > 0 &&
                   res->verdict != ST_VERDICT_OVERSAT;
    if (windowed)
        w = window_records(out->records, out->n, res, s->closed_loop, &nw);
    if (w && nw)
        st_audit_figures(&s->slo, w, nw, nw, row, &f);
    else
        st_audit_figures(&s->slo, out->records, out->n, out->n, row, &f);
    free(w);
    row->verdict = strdup(st_verdict_name(res->verdict));
    row->why = strdup(res->why);
    row->worst_ratio = res->worst_ratio;
    row->stopped_early = ctl->oversaturated || ctl->slo_missed;
    row->client_limited = out->client_limited;
    row->duration_s = res->engine_s;
    row->delivered_rps = res->delivered_rps;
    row->output_tps = res->output_tps;
    row->sustained_rps = res->delivered_rps;
    if (res->verdict == ST_VERDICT_OVERSAT)
        row->delivered_rps = res->run_delivered_rps;
    for (int i = 0; i < row->n_terms && i < res->n_terms; i++)
        if (windowed)
            row->term_ms[i] = res->term[i].value_ms;
    row->summary_json = st_sustain_to_json(ctl, res);
}

/* The most requests a run keeps in flight: one connection each, within the open-file limit (less a
 * margin for the rest of the process), at most SUSTAIN_MAX_IN_FLIGHT. */
static uint32_t max_in_flight(void)
{
    struct rlimit rl;
    uint64_t lim = SUSTAIN_MAX_IN_FLIGHT;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < lim + 256)
        lim = rl.rlim_cur > 512 ? rl.rlim_cur - 256 : rl.rlim_cur / 2;
    return (uint32_t)lim;
}

/* The requests each arrival on the schedule brings: a session's turns (1 without sessions). The
 * sustained controller judges requests, so a session rate becomes the request rate it offers. */
static double requests_per_start(const st_workload *w)
{
    uint32_t ns = w->n - w->n_dependent;
    return ns ? (double)w->n / ns : 1;
}

/* A session's mean turns and mean total think time (s): 0 and 0 without sessions. */
static void session_span(const st_workload *w, double *turns, double *think_s)
{
    *turns = *think_s = 0;
    uint32_t ns = w->n - w->n_dependent, sessions = 0;
    if (!w->n_dependent)
        return;
    double t = 0, n = 0;
    for (uint32_t i = 0; i < ns; i++) {
        if (!w->items[i].session)
            continue;
        sessions++;
        n++;
        /* the chain of later turns (next 0: none; bounded by the workload's size) */
        for (uint32_t j = w->items[i].next, k = 0; j && j < w->n && k < w->n; j = w->items[j].next, k++) {
            t += st_ns_to_s(w->items[j].think);
            n++;
        }
    }
    if (sessions) {
        *turns = n / sessions;
        *think_s = t / sessions;
    }
}

/* Drives the run of workload w on schedule sched under the controller and judges it. */
static int sustained_exec(sweep *S, cfgrun *cr, const st_next *nx, st_workload *w, const st_ns *sched, st_run_row *row,
                          st_exec_out *out, st_sustain_result *res)
{
    const st_spec *s = S->spec;
    st_sustain_params sp = { .slo = &s->slo,
                             .offered_rps = s->closed_loop ? 0 : nx->rate * requests_per_start(w),
                             .concurrency = s->closed_loop ? (uint32_t)nx->rate : 0,
                             .max_duration_s = s->search.max_duration_s,
                             .min_window_s = s->search.min_window_s,
                             .min_window_requests = s->search.min_window_requests,
                             .warmup_e2e = s->search.warmup_e2e,
                             .confidence = s->search.confidence,
                             .planned = w->n,
                             .early_stop = s->search.early_stop,
                             .max_in_flight = max_in_flight() };
    session_span(w, &sp.session_turns, &sp.session_think_s);
    st_sustain ctl;
    st_sustain_init(&ctl, &sp);
    rate_ctx R = {
        .S = S, .slo = &s->slo, .planned = w->n, .time_scale = S->x->time_scale, .cfg_name = cr->c->name, .ctl = &ctl
    };
    int rc = exec_run(S, cr->c, &cr->row, w, sched, nx->rate, &R, row, out);
    if (rc)
        return rc;
    if (st_sustain_finish(&ctl, out->records, out->n, out->samples, out->n_samples, res)) {
        st_exec_out_free(out);
        row->why = strdup("out of memory judging the run");
        return -1;
    }
    sustained_row(s, &ctl, res, out, row);
    return 0;
}

/* Runs one sustained rate (or concurrency) as the controller (audit/sustain.h) decides. Returns as
 * run_burst; res gets the verdict. */
static int run_sustained(sweep *S, cfgrun *cr, const st_next *nx, uint32_t planned, st_run_row *row, st_exec_out *out,
                         st_sustain_result *res)
{
    st_workload w;
    st_ns *sched;
    memset(out, 0, sizeof *out);
    uint64_t seed = replicate_seed(S->spec->workload.seed, nx->rate, nx->replicate);
    int rc = build_run(S, nx->rate, seed, planned, &w, &sched, row);
    if (rc == 0) {
        rc = sustained_exec(S, cr, nx, &w, sched, row, out, res);
        free(sched);
        drop_workload(S, &w);
    }
    return rc;
}

/* Warm-up requests are never turns that wait for another: a session workload keeps its first turns. */
static void drop_later_turns(st_workload *w)
{
    uint32_t ns = w->n - w->n_dependent;
    for (uint32_t i = ns; i < w->n; i++)
        st_work_item_free(&w->items[i]);
    for (uint32_t i = 0; i < ns; i++)
        w->items[i].next = 0;
    w->n = ns;
    w->n_dependent = 0;
}

/* The warm-up requests after a start: a gentle pace, never stored, never early-stopped (the breach
 * counts ignore warm-up records). 1 when interrupted. */
static int warm_up(sweep *S, const st_spec_config *c, st_config_row *crow)
{
    const st_spec *s = S->spec;
    uint32_t n = s->warmup_requests;
    if (!n)
        return 0;
    char err[512];
    st_workload w;
    /* synthetic sessions: about n sessions, whose first turns are the warm-up */
    uint32_t nw = (uint32_t)ceil(n * st_spec_turns_mean(s)); /* 1 a request without synthetic sessions */
    if (make_workload(S, rate_seed(s->workload.seed, -1.0), nw, &w, err, sizeof err))
        return 0;
    drop_later_turns(&w);
    if (S->x->ops->prepare && S->x->ops->prepare(S->x, &w)) {
        st_workload_free(&w);
        return 1;
    }
    double r = s->closed_loop ? 4 : s->rates[0];
    if (!isfinite(r) || r > 4)
        r = 4;
    st_ns *sched = NULL;
    if (make_schedule(s, r, 7, w.n, w.n, &sched)) {
        st_workload_free(&w);
        return 0;
    }
    rate_ctx R = { .S = S, .slo = &s->slo, .planned = w.n, .time_scale = S->x->time_scale, .cfg_name = "warm-up" };
    st_exec_rate in = { .c = c,
                        .w = &w,
                        .sched = sched,
                        .warmup = w.n,
                        .timeout_s = s->timeouts.request_s,
                        .tick = on_tick,
                        .tick_arg = &R };
    st_exec_out out;
    int rr = S->x->ops->run_rate(S->x, &in, crow, &out, err, sizeof err);
    if (rr == 0)
        st_exec_out_free(&out);
    free(sched);
    st_workload_free(&w);
    return R.interrupted || rr == 1 ? 1 : 0;
}

/* ---- one configuration ---- */

static st_rate_result result_of(const st_run_row *w)
{
    st_rate_result r;
    st_sustain_row_result(w, &r);
    return r;
}

/* The median E2E a stored sustained run saw (0: none). */
static double e2e_of(const st_run_row *w)
{
    st_sustain_result sr;
    return w->summary_json && st_sustain_from_json(w->summary_json, &sr) == 0 && sr.e2e_med_s > 0 ? sr.e2e_med_s : 0;
}

static void push_result(cfgrun *cr, const st_rate_result *r, int replicate, double e2e)
{
    cr->rr[cr->n] = *r;
    cr->rr[cr->n].replicate = replicate;
    cr->n++;
    cr->seq++;
    cr->spent += r->requests;
    if (e2e > cr->e2e_est)
        cr->e2e_est = e2e;
}

/* The sustained search's parameters for a configuration. */
static void sustained_params(const sweep *S, const cfgrun *cr, st_sustained_params *p)
{
    st_sustained_params_of(S->spec, cr->forecast, p);
}

/* What the search does next for this configuration. */
static void next_step(sweep *S, cfgrun *cr, st_next *nx)
{
    const st_spec *s = S->spec;
    if (s->search.mode == ST_SEARCH_SUSTAINED) {
        st_sustained_params p;
        sustained_params(S, cr, &p);
        st_sustained_next(&p, cr->rr, cr->n, nx);
    } else {
        st_search_params sp = { s->rates,
                                s->n_rates,
                                s->search.mode,
                                s->search.tolerance,
                                s->search.request_budget,
                                s->workload.requests_per_rate,
                                s->search.skip_margin,
                                s->closed_loop };
        st_capacity_next(&sp, cr->rr, cr->n, nx);
    }
}

static void say_cfg(sweep *S, const cfgrun *cr, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say_cfg(sweep *S, const cfgrun *cr, const char *fmt, ...)
{
    if (S->in_memory || S->o->quiet || !S->o->out)
        return;
    char line[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    say(S, "[%d/%d %s] %s", cr->ci + 1, S->spec->n_configs, cr->c->name, line);
}

/* o set as the row's fact key (taken; the row's facts kept otherwise). */
static void row_fact(cfgrun *cr, const char *key, json_t *o)
{
    json_t *f = cr->row.facts ? json_loads(cr->row.facts, 0, NULL) : NULL;
    if (!json_is_object(f)) {
        json_decref(f);
        f = json_object();
    }
    char *d = NULL;
    if (f && o && json_object_set_new(f, key, o) == 0) {
        o = NULL;
        d = json_dumps(f, JSON_COMPACT);
    }
    json_decref(o);
    json_decref(f);
    if (d) {
        free(cr->row.facts);
        cr->row.facts = d;
    }
}

/* An agent trace's tasks that hold a request longer than the configuration's context are left out
 * of its runs, whole (st_sweep_workload_ctx): said in the log and kept in the row's facts
 * ("agent_over_context": context, tasks, tasks_of, requests, requests_of, and the first such
 * request: task, node, tokens), which the report's notes read. */
static void agent_over_context(sweep *S, cfgrun *cr, uint32_t ctx)
{
    st_sweep_agent_fit a;
    char err[768];
    if (st_sweep_agent_over_context(S->spec, ctx, &a, err, sizeof err) || !a.fit.tasks_over)
        return;
    const st_agent_fit *f = &a.fit;
    say_cfg(S, cr,
            "%u of the agent trace's %u tasks (%.1f %%; %u of its %u requests) hold a request longer than its context "
            "of %u tokens (prompt as grown by its parents' answers + output; the first: node %s of task %s, %llu "
            "tokens): the server would refuse it, so its runs leave those tasks out whole",
            f->tasks_over, f->tasks, 100.0 * f->tasks_over / f->tasks, f->requests_over, f->requests, ctx, a.node,
            a.task, (unsigned long long)f->first_need);
    row_fact(cr, "agent_over_context",
             json_pack("{s:I, s:I, s:I, s:I, s:I, s:s, s:s, s:I}", "context", (json_int_t)ctx, "tasks",
                       (json_int_t)f->tasks_over, "tasks_of", (json_int_t)f->tasks, "requests",
                       (json_int_t)f->requests_over, "requests_of", (json_int_t)f->requests, "task", a.task, "node",
                       a.node, "tokens", (json_int_t)f->first_need));
}

/* A trace's requests longer than the configuration's context are left out of its runs: said in
 * the log and kept in the row's facts ("trace_over_context": context, requests, of), which the
 * report's notes read. */
static void trace_over_context(sweep *S, cfgrun *cr)
{
    uint32_t ctx = st_sweep_config_context(S->spec, cr->c);
    uint64_t over = 0, total = 0;
    char err[512];
    if (ctx && S->spec->workload.agent) {
        agent_over_context(S, cr, ctx);
        return;
    }
    if (!ctx || st_sweep_trace_over_context(S->spec, ctx, &over, &total, err, sizeof err) || !over)
        return;
    say_cfg(S, cr,
            "%llu of the trace's %llu requests (%.1f %%) are longer than its context of %u tokens (prompt + output): "
            "the server would refuse them, so its runs leave them out (as servetune bench does)",
            (unsigned long long)over, (unsigned long long)total, 100.0 * (double)over / (double)total, ctx);
    row_fact(cr, "trace_over_context",
             json_pack("{s:I, s:I, s:I}", "context", (json_int_t)ctx, "requests", (json_int_t)over, "of",
                       (json_int_t)total));
}

/* Starts the engine and warms it up unless it runs. 0 up; 1 interrupted; -1 it did not start. */

static int ensure_engine(sweep *S, cfgrun *cr)
{
    if (cr->engine_up)
        return 0;
    if (S->x->prediction)
        say_cfg(S, cr, "building the engine model");
    else if (S->spec->engine.kind == ST_ENGINE_ENDPOINT) /* nothing is started: it answers, or the wait ends */
        say_cfg(S, cr, "connecting to the endpoint (it must answer within %.0f s, timeouts.startup)",
                S->spec->timeouts.startup_s);
    else
        say_cfg(S, cr, "starting the engine");
    int es = S->x->ops->start_config(S->x, cr->c, &cr->row);
    if (es < 0 && *S->o->stop)
        es = 1; /* stopped together with the audit (a job's end): an interruption, not a failure */
    if (es == 0) {
        cr->engine_up = 1;
        trace_over_context(S, cr);
        if (S->store)
            st_store_config_put(S->store, &cr->row);
        if (!S->x->prediction)
            say_cfg(S, cr, "ready after %.1f s", cr->row.startup_s);
        es = warm_up(S, cr->c, &cr->row);
    } else if (es < 0) {
        cr->engine_failed = 1;
        say_cfg(S, cr, "did not start: %s", cr->row.failure_detail);
    }
    return es;
}

/* A rate the search recorded as skipped (burst), stored without a run. 0, or -1 store error. */
static int record_skip(sweep *S, cfgrun *cr, const st_next *nx, const char *key)
{
    st_run_row run = { 0 };
    run.config = (char *)cr->c->name;
    run.seq = cr->seq;
    run.rate = nx->rate;
    run.grid = nx->grid;
    memcpy(run.run_key, key, 65);
    run.verdict = "skipped";
    run.why = (char *)nx->why;
    run.started = run.ended = st_wall_ns();
    /* NAN figures for a run that did not happen */
    run.sustained_rps = run.delivered_rps = run.output_tps = NAN;
    run.duration_s = run.offered_rps_achieved = run.worst_ratio = NAN;
    run.ttft_p50_ms = run.ttft_p95_ms = run.ttft_p99_ms = run.tpot_p50_ms = run.tpot_p95_ms = run.tpot_p99_ms =
        run.itl_p95_ms = run.e2e_p95_ms = run.lag_p99_ms = NAN;
    if (S->store && st_store_run_put(S->store, &run, NULL, 0, NULL, 0))
        return -1;
    st_rate_result r = result_of(&run);
    push_result(cr, &r, 0, 0);
    char rt[32];
    st_capacity_fmt_rate(rt, sizeof rt, nx->rate);
    say_cfg(S, cr, "%s %s%s%s: %s", S->spec->closed_loop ? "concurrency" : "rate", rt, S->spec->closed_loop ? "" : " ",
            S->spec->closed_loop ? "" : st_spec_rate_unit(S->spec), nx->why);
    return 0;
}

/* The progress line of a finished run. */
static void say_run(sweep *S, const cfgrun *cr, const st_next *nx, const st_run_row *run, double took)
{
    const st_spec *s = S->spec;
    char rt[32], t1[48], t2[48], t3[32], rep[32] = "";
    st_capacity_fmt_rate(rt, sizeof rt, nx->rate);
    if (nx->replicate)
        snprintf(rep, sizeof rep, " (replicate %d)", nx->replicate + 1);
    const char *ge = run->stopped_early && s->search.mode != ST_SEARCH_SUSTAINED ? ">= " : "";
    if (isnan(run->delivered_rps))
        snprintf(t3, sizeof t3, "none");
    else
        snprintf(t3, sizeof t3, "%.3g req/s", run->delivered_rps);
    snprintf(t1, sizeof t1, "%s%.0f", ge, st_run_row_term_ms(run, 0));
    snprintf(t2, sizeof t2, "%s%.1f", ge, st_run_row_term_ms(run, 1));
    if (s->search.mode == ST_SEARCH_SUSTAINED) {
        st_verdict v = st_verdict_from_name(run->verdict);
        say_cfg(S, cr, "%s %s%s%s%s: %s (%.0f s of engine time, %.1f s): %s", s->closed_loop ? "concurrency" : "rate",
                rt, s->closed_loop ? "" : " ", s->closed_loop ? "" : st_spec_rate_unit(s), rep, st_verdict_words(v, 1),
                run->duration_s, took, run->why ? run->why : "");
    } else {
        int pass = !strcmp(run->verdict, "pass");
        say_cfg(S, cr, "%s %s%s%s: %s, %u/%u completed, p95 TTFT %s ms, p95 TPOT %s ms, delivered %s (%.1f s)%s%s",
                s->closed_loop ? "concurrency" : "rate", rt, s->closed_loop ? "" : " ",
                s->closed_loop ? "" : st_spec_rate_unit(s), run->verdict, run->completed, run->planned, t1, t2, t3,
                took, pass ? "" : ": ", pass ? "" : run->why);
    }
}

/* How many leading records a sustained run keeps: up to the last one that was sent (records are in
 * arrival order; the rest were never due before the run stopped). The others are freed with out. */
static uint32_t due_records(st_exec_out *out)
{
    /* sessions: the first turns lead (in arrival order), the later turns follow; a later turn
     * never released (its session had not reached it) is no part of the run either: the ones
     * sent are moved up behind the first turns kept */
    uint32_t ns = 0;
    while (ns < out->n && !(out->records[ns].session && out->records[ns].turn > 0))
        ns++;
    uint32_t keep = ns;
    while (keep > 0 && out->records[keep - 1].sent < 0)
        keep--;
    for (uint32_t i = ns; i < out->n; i++)
        if (out->records[i].sent >= 0) {
            st_record t = out->records[keep];
            out->records[keep++] = out->records[i];
            out->records[i] = t;
        }
    return keep;
}

/* Runs the rate nx asks for, stores it and adds it to the search. 0 done (the configuration goes
 * on unless cr->done), 1 interrupted, -1 store error. */
static int measure(sweep *S, cfgrun *cr, const st_next *nx, const char *key, uint32_t planned)
{
    const st_spec *s = S->spec;
    st_run_row run = { 0 };
    run.config = (char *)cr->c->name;
    run.seq = cr->seq;
    run.rate = nx->rate;
    run.grid = nx->grid;
    memcpy(run.run_key, key, 65);
    run.sustained_rps = run.delivered_rps = run.output_tps = NAN;
    if (nx->why[0] && !nx->grid && s->search.mode != ST_SEARCH_SUSTAINED) {
        char rt[32];
        st_capacity_fmt_rate(rt, sizeof rt, nx->rate);
        say_cfg(S, cr, "%s: %s %s%s%s", nx->why, s->closed_loop ? "concurrency" : "rate", rt, s->closed_loop ? "" : " ",
                s->closed_loop ? "" : st_spec_rate_unit(s));
    } else if (nx->why[0] && s->search.mode == ST_SEARCH_SUSTAINED) {
        say_cfg(S, cr, "%s", nx->why);
    }
    st_exec_out out;
    st_sustain_result res;
    memset(&res, 0, sizeof res);
    st_ns t0 = st_now();
    int sustained = s->search.mode == ST_SEARCH_SUSTAINED;
    int r = sustained ? run_sustained(S, cr, nx, planned, &run, &out, &res)
                      : run_burst(S, cr->c, &cr->row, nx->rate, &run, &out);
    double took = st_ns_to_s(st_now() - t0);
    int status = 0;
    if (r == 0 && out.engine_failed && *S->o->stop) {
        /* stopped together with its engine (the end of a Slurm job signals all its processes):
         * an interruption, not a failure of the configuration */
        st_exec_out_free(&out);
        r = 1;
    }
    if (r == 1) {
        status = 1;
    } else if (r < 0) {
        /* the run could not start (bad workload...): an error row, and stop this config */
        st_exec_fill_failure(&cr->row, ST_FAIL_CRASH, run.why, NULL, NULL);
        cr->engine_failed = cr->done = 1;
    } else {
        if (out.idle_wait_s > 2)
            say_cfg(S, cr, "waited %.1f s for the engine to drain the previous run", out.idle_wait_s);
        if (out.engine_failed) {
            free(run.verdict);
            run.verdict = strdup("error");
            char w2[800];
            snprintf(w2, sizeof w2, "%s (%s)", cr->row.failure_detail, run.why ? run.why : "");
            free(run.why);
            run.why = strdup(w2);
            cr->engine_failed = cr->done = 1;
        }
        /* a sustained run's requests that were never due by its stop are no part of it */
        uint32_t keep = sustained ? due_records(&out) : out.n;
        int put = S->store ? st_store_run_put(S->store, &run, out.records, keep, out.samples, out.n_samples) : 0;
        st_exec_out_free(&out);
        if (put) {
            status = -1;
        } else {
            if (!S->in_memory)
                S->res->runs_measured++;
            st_rate_result rr = result_of(&run);
            push_result(cr, &rr, nx->replicate, res.e2e_med_s);
            say_run(S, cr, nx, &run, took);
            if (cr->engine_failed)
                say_cfg(S, cr, "the engine failed during the run: %s", cr->row.failure_detail);
            if (*S->o->stop)
                status = 1;
        }
    }
    free(run.verdict);
    free(run.why);
    free(run.summary_json);
    return status;
}

/* One step of the search: reuse a stored run, record a skip, or run. 0 go on, 1 interrupted,
 * -1 store error. */
static int step(sweep *S, cfgrun *cr, const st_next *nx)
{
    const st_spec *s = S->spec;
    char key[65], rt[32];
    int status = 0;
    uint32_t planned = 0;
    st_capacity_fmt_rate(rt, sizeof rt, nx->rate);
    S->rate_no++;
    if (S->rate_no > S->rates_planned)
        S->rates_planned = S->rate_no;
    S->rate = nx->rate;
    if (s->search.mode == ST_SEARCH_SUSTAINED) {
        planned = sustained_planned(S, cr, nx->rate);
        st_sweep_run_key_sustained(s, cr->c, nx->rate, nx->replicate, planned, key);
    } else {
        st_sweep_run_key(s, cr->c, nx->rate, key);
    }
    st_run_row found;
    int have = S->store ? st_store_run_find(S->store, key, &found) : 0;
    if (have < 0) {
        status = -1;
    } else if (have == 1) {
        st_rate_result r = result_of(&found);
        push_result(cr, &r, nx->replicate, e2e_of(&found));
        S->res->runs_reused++;
        say_cfg(S, cr, "rate %s: %s (kept from the previous run)", rt, found.verdict);
        st_run_row_free(&found);
    } else if (nx->action == ST_NEXT_SKIP) {
        status = record_skip(S, cr, nx, key);
    } else {
        int es = ensure_engine(S, cr);
        if (es == 1)
            status = 1;
        else if (es < 0)
            cr->done = 1;
        else
            status = measure(S, cr, nx, key, planned);
    }
    return status;
}

/* --resume: a configuration that finished (or failed to start) is kept as it is (1), except one
 * that found its port taken (a passing condition: it is tried again). One that was still running
 * keeps what its row knew (command line, startup time, engine facts) in *prior until its engine
 * starts again: its runs may all be in the store already. */
static int config_kept(sweep *S, int ci, st_config_row *prior)
{
    const st_spec_config *c = &S->spec->configs[ci];
    st_config_row *rows;
    int nr, kept = 0;
    memset(prior, 0, sizeof *prior);
    if (!S->o->resume || !S->store || st_store_configs_get(S->store, &rows, &nr))
        return 0;
    for (int i = 0; i < nr && !kept; i++) {
        if (strcmp(rows[i].name, c->name) || !rows[i].status)
            continue;
        int retry = rows[i].failure_class && !strcmp(rows[i].failure_class, "port_taken");
        if (!retry && (!strcmp(rows[i].status, "done") || !strcmp(rows[i].status, "failed"))) {
            say(S, "[%d/%d %s] already %s (kept from the previous run)", ci + 1, S->spec->n_configs, c->name,
                rows[i].status);
            if (!strcmp(rows[i].status, "failed"))
                S->res->configs_failed++;
            kept = 1;
        } else if (!retry) {
            st_config_row_free(prior);
            *prior = rows[i];
            memset(&rows[i], 0, sizeof rows[i]);
        }
    }
    st_config_rows_free(rows, nr);
    if (kept)
        st_config_row_free(prior);
    return kept;
}

/* The configuration's row, marked running; it takes over *prior's facts (zeroed, or what a
 * resumed row knew). 0, or -1 store error. */
static int config_begin(sweep *S, cfgrun *cr, int ci, st_config_row *prior)
{
    memset(cr, 0, sizeof *cr);
    cr->ci = ci;
    cr->c = &S->spec->configs[ci];
    cr->row = *prior;
    memset(prior, 0, sizeof *prior);
    if (!cr->row.name)
        cr->row.startup_s = NAN;
    free(cr->row.name);
    free(cr->row.status);
    cr->row.name = strdup(cr->c->name);
    cr->row.idx = ci;
    cr->row.status = strdup("running");
    if (!cr->row.started)
        cr->row.started = st_wall_ns();
    S->ci = ci;
    S->rates_planned = S->spec->n_rates;
    S->rate_no = 0;
    return S->store ? st_store_config_put(S->store, &cr->row) : 0;
}

/* Stops the engine and marks the row. Returns status, or -1 when the row cannot be stored. */
static int config_end(sweep *S, cfgrun *cr, int status)
{
    S->x->ops->stop_config(S->x);
    if (status == 1) {
        free(cr->row.status);
        cr->row.status = strdup("interrupted");
    } else if (cr->engine_failed) {
        if (!S->in_memory)
            S->res->configs_failed++;
    } else if (status == 0) {
        free(cr->row.status);
        cr->row.status = strdup("done");
    }
    if (S->store && st_store_config_put(S->store, &cr->row) && status == 0)
        status = -1;
    st_config_row_free(&cr->row);
    return status;
}

/* The search over one configuration until it stops. 0, 1 interrupted, -1 store error. */
static int search(sweep *S, cfgrun *cr)
{
    int status = 0;
    while (status == 0 && !cr->done && cr->n < MAX_RUNS_PER_CONFIG) {
        st_next nx;
        next_step(S, cr, &nx);
        if (nx.action == ST_NEXT_STOP) {
            if (cr->n && S->spec->search.mode != ST_SEARCH_GRID)
                say_cfg(S, cr, "%s", nx.why);
            break;
        }
        status = step(S, cr, &nx);
    }
    return status;
}

static int forecast_capacity(const st_spec *spec, int ci, volatile sig_atomic_t *stop, double *out);

/* Where the sustained search of a configuration starts (audit/capacity.h): 0 from the grid, else
 * a forecast (the engine model's, or the spec's rate). */
static double start_of(sweep *S, int ci)
{
    const st_spec *s = S->spec;
    double f = 0;
    char why[300];
    int modelable = st_exec_model_supported(s, why, sizeof why);
    if (s->search.mode != ST_SEARCH_SUSTAINED || S->in_memory)
        f = 0;
    else if (s->search.start == ST_START_RATE)
        f = s->search.start_rate;
    else if (!S->x->prediction && modelable &&
             (s->search.start == ST_START_PREDICT || s->search.start == ST_START_AUTO) &&
             forecast_capacity(s, ci, S->o->stop, &f) == 0 && f > 0)
        say(S, "[%d/%d %s] the engine model puts the limit near %.4g %s: the search starts there", ci + 1, s->n_configs,
            s->configs[ci].name, f, s->closed_loop ? "concurrent requests" : st_spec_rate_unit(s));
    return f;
}

/* The quality pass on the configuration's running engine, after its search (the spec's quality
 * block): the result kept in the store's meta table. 0, 1 interrupted, -1 store error. */
static int quality(sweep *S, cfgrun *cr)
{
    if (!S->spec->quality.enabled || S->in_memory || S->x->prediction || !cr->engine_up || cr->engine_failed)
        return 0;
    say_cfg(S, cr, "quality pass: %u prompts, greedy, top %u log-probabilities", S->spec->quality.prompts,
            S->spec->quality.top_k);
    st_quality_result q;
    int rc = st_quality_pass(S->x, S->spec, cr->ci, &S->qref, S->o->stop, &q);
    if (rc == 1)
        return 1;
    if (q.status == ST_Q_MEASURED)
        say_cfg(S, cr,
                "quality vs baseline (%s, %u prompts, %.1f engine-s): mean KLD %.4g, same top-1 %.1f %%, %u/%u "
                "answers identical%s%s",
                q.mode, q.prompts, q.engine_s, q.d.kld_mean, 100 * q.d.same_top1, q.d.exact, q.d.answers,
                q.pass ? "" : "; FAILS: ", q.pass ? "" : q.note);
    else if (isfinite(q.engine_s))
        say_cfg(S, cr, "quality: %s%s%s (%.1f engine-s)", st_qstatus_name(q.status), q.note[0] ? ": " : "", q.note,
                q.engine_s);
    else
        say_cfg(S, cr, "quality: %s%s%s", st_qstatus_name(q.status), q.note[0] ? ": " : "", q.note);
    if (!S->store)
        return 0;
    st_buf b;
    st_buf_init(&b, (size_t)1 << 20);
    char key[ST_QUALITY_KEY_MAX];
    st_quality_key(cr->c->name, key, sizeof key);
    rc = st_quality_to_json(&q, &b) || st_store_meta_put(S->store, key, b.data) ? -1 : 0;
    st_buf_free(&b);
    return rc;
}

/* 0 done (possibly failed: the row says), 1 interrupted, -1 store error. */
static int run_config(sweep *S, int ci)
{
    cfgrun *cr = NULL;
    st_config_row prior;
    int status = 0;
    if (!config_kept(S, ci, &prior)) {
        cr = malloc(sizeof *cr);
        if (!cr || config_begin(S, cr, ci, &prior)) {
            status = -1;
            if (cr)
                st_config_row_free(&cr->row);
            st_config_row_free(&prior);
        } else {
            cr->forecast = start_of(S, ci);
            status = search(S, cr);
            if (status == 0)
                status = quality(S, cr);
            status = config_end(S, cr, status);
        }
    }
    free(cr);
    return status;
}

/* How many requests a session start brings, on average (sessions replayed from a trace: counted
 * over its first SWEEP_TURNS_SAMPLE rows). */
#define SWEEP_TURNS_SAMPLE 10000u
static int session_turns(sweep *S, char *err, size_t errlen)
{
    const st_spec *spec = S->spec;
    S->turns = 1;
    if (!spec->workload.sessions.on || spec->search.mode != ST_SEARCH_SUSTAINED) /* sustained_planned's */
        return 0;
    if (spec->workload.kind == ST_WL_SYNTHETIC) {
        S->turns = st_spec_turns_mean(spec);
        return 0;
    }
    st_workload w;
    if (st_sweep_workload(spec, spec->workload.seed, SWEEP_TURNS_SAMPLE, &w, err, errlen))
        return -1;
    S->turns = requests_per_start(&w);
    st_workload_free(&w);
    return 0;
}

/* The shared prefix: from the spec's seed, the same for every rate and configuration. */
static int shared_prefix(sweep *S, char *err, size_t errlen)
{
    const st_spec *spec = S->spec;
    if (session_turns(S, err, errlen))
        return -1;
    if (spec->workload.kind == ST_WL_SYNTHETIC && spec->workload.shared_prefix) {
        st_workload pw;
        st_synth_params p;
        st_spec_synth(spec, 1, spec->workload.seed, &p);
        if (st_workload_synthetic(&p, &pw, err, errlen))
            return -1;
        S->prefix_len = spec->workload.shared_prefix;
        S->base_prefix = malloc(sizeof(uint32_t) * S->prefix_len);
        if (S->base_prefix && pw.n && pw.items[0].input_ids)
            memcpy(S->base_prefix, pw.items[0].input_ids, sizeof(uint32_t) * S->prefix_len);
        st_workload_free(&pw);
    }
    return 0;
}

/* A sweep that stores nothing (the engine model's searches and probes): quiet, on executor x. */
static void in_memory(sweep *S, st_sweep_opts *o, st_sweep_result *res, const st_spec *spec, st_executor *x,
                      volatile sig_atomic_t *stop)
{
    *o = (st_sweep_opts){ .quiet = 1, .stop = stop };
    memset(res, 0, sizeof *res);
    *S = (sweep){ .spec = spec, .o = o, .x = x, .res = res, .in_memory = 1 };
    S->t_start = st_now();
}

/* One configuration run in memory (the engine model's searches and probes): the sweep, its
 * options and result, and the configuration's runs. mem_begin: 0, or -1 with err (nothing to
 * end); mem_free after either. */
typedef struct mem_run {
    st_sweep_opts o;
    st_sweep_result res;
    sweep S;
    cfgrun *cr;
} mem_run;

static int mem_begin(mem_run *m, const st_spec *spec, st_executor *x, volatile sig_atomic_t *stop, int ci, char *err,
                     size_t errlen)
{
    in_memory(&m->S, &m->o, &m->res, spec, x, stop);
    m->cr = NULL;
    if (shared_prefix(&m->S, err, errlen))
        return -1;
    m->cr = malloc(sizeof *m->cr);
    if (!m->cr) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    st_config_row none = { 0 };
    config_begin(&m->S, m->cr, ci, &none);
    return 0;
}

static void mem_free(mem_run *m)
{
    free(m->cr);
    free(m->S.base_prefix);
}

/* The sustained search of configuration ci on executor x in memory (nothing stored, nothing
 * printed): its capacity. 0, or -1 with err. */
static int search_in_memory(const st_spec *spec, st_executor *x, int ci, volatile sig_atomic_t *stop, st_capacity *cap,
                            double pass_ms[2], int *failed_start, char *why, size_t whylen, char *err, size_t errlen)
{
    pass_ms[0] = pass_ms[1] = NAN;
    *failed_start = 0;
    mem_run m;
    int rc = -1;
    if (mem_begin(&m, spec, x, stop, ci, err, errlen) == 0) {
        cfgrun *cr = m.cr;
        int status = search(&m.S, cr);
        *failed_start = cr->engine_failed && !cr->engine_up;
        if (cr->engine_failed)
            snprintf(why, whylen, "%s", cr->row.failure_detail ? cr->row.failure_detail : "did not start");
        st_sustained_params p;
        sustained_params(&m.S, cr, &p);
        st_capacity_sustained(&p, cr->rr, cr->n, cap);
        if (cap->has_pass && cap->pass_index >= 0 && cap->pass_index < cr->n)
            for (int i = 0; i < 2 && i < cr->rr[cap->pass_index].n_terms; i++)
                pass_ms[i] = cr->rr[cap->pass_index].value_ms[i];
        config_end(&m.S, cr, status);
        if (status == 1)
            snprintf(err, errlen, "interrupted");
        rc = status == 1 ? -1 : 0;
    }
    mem_free(&m);
    return rc;
}

static int forecast_capacity(const st_spec *spec, int ci, volatile sig_atomic_t *stop, double *out)
{
    *out = 0;
    st_executor *x;
    char err[600], why[600];
    if (st_exec_model_new(spec, NULL, &x, err, sizeof err))
        return -1;
    x->stop = stop;
    st_capacity cap;
    int failed = 0;
    double ms[2];
    int rc = search_in_memory(spec, x, ci, stop, &cap, ms, &failed, why, sizeof why, err, sizeof err);
    st_executor_free(x);
    if (rc == 0 && cap.has_pass)
        *out = isfinite(cap.estimate) ? cap.estimate : cap.pass_rate;
    return rc;
}

/* One probe of the bisection: 1 pass, 0 fail, -1 error. */
static int probe(sweep *S, const st_spec_config *c, st_config_row *crow, double rate, double *delivered, double *otps,
                 double term_ms[2], char *err, size_t errlen)
{
    st_run_row run = { 0 };
    run.rate = rate;
    st_exec_out out;
    int r = run_burst(S, c, crow, rate, &run, &out);
    if (r) {
        snprintf(err, errlen, "%s", run.why ? run.why : "interrupted");
        free(run.why);
        return -1;
    }
    st_exec_out_free(&out);
    int pass = run.verdict && !strcmp(run.verdict, "pass");
    *delivered = run.delivered_rps;
    *otps = run.output_tps;
    term_ms[0] = st_run_row_term_ms(&run, 0);
    term_ms[1] = st_run_row_term_ms(&run, 1);
    free(run.verdict);
    free(run.why);
    return pass;
}

/* Burst mode: doubling or halving to a bracket, then geometric bisection. */
static int bisect_burst(const st_spec *spec, st_executor *x, int ci, double tol, st_sweep_bisect_result *out, char *err,
                        size_t errlen)
{
    volatile sig_atomic_t never = 0; /* without the executor's interruption flag: never interrupted */
    st_sweep_opts o = { .quiet = 1, .stop = x->stop ? x->stop : &never };
    sweep S = { .spec = spec, .o = &o, .x = x, .ci = ci, .in_memory = 1 };
    S.t_start = st_now();
    if (shared_prefix(&S, err, errlen))
        return -1;
    const st_spec_config *c = &spec->configs[ci];
    st_config_row row = { 0 };
    row.startup_s = NAN;
    int rc = 0;
    if (x->ops->start_config(x, c, &row)) {
        out->failed_start = 1;
        snprintf(out->why, sizeof out->why, "%s", row.failure_detail ? row.failure_detail : "did not start");
        goto done;
    }
    warm_up(&S, c, &row);
    double r = 1;
    for (int i = 0; i < spec->n_rates; i++)
        if (isfinite(spec->rates[i])) {
            r = spec->rates[i];
            break;
        }
    double d = NAN, lo = 0, hi = INFINITY, lo_d = NAN, lo_o = NAN, ot = NAN, t[2] = { NAN, NAN },
           lo_t[2] = { NAN, NAN };
    int p = probe(&S, c, &row, r, &d, &ot, t, err, errlen);
    out->runs++;
    if (p < 0) {
        rc = -1;
        goto done;
    }
    /* find a bracket: double while passing, halve while failing (bounded) */
    for (int k = 0; k < 24; k++) {
        if (p) {
            lo = r;
            lo_d = d;
            lo_o = ot;
            memcpy(lo_t, t, sizeof lo_t);
            if (isfinite(hi))
                break;
            r *= 2;
        } else {
            hi = r;
            if (lo > 0)
                break;
            r /= 2;
        }
        if (r > 1e5 || r < 1e-4)
            break;
        p = probe(&S, c, &row, r, &d, &ot, t, err, errlen);
        out->runs++;
        if (p < 0) {
            rc = -1;
            goto done;
        }
    }
    if (lo > 0 && isfinite(hi)) {
        for (int k = 0; k < 30 && hi / lo - 1 > tol; k++) {
            double m = sqrt(lo * hi);
            p = probe(&S, c, &row, m, &d, &ot, t, err, errlen);
            out->runs++;
            if (p < 0) {
                rc = -1;
                goto done;
            }
            if (p) {
                lo = m;
                lo_d = d;
                lo_o = ot;
                memcpy(lo_t, t, sizeof lo_t);
            } else {
                hi = m;
            }
        }
    }
    out->pass_rate = lo;
    out->fail_rate = hi;
    out->capacity_rps = lo > 0 ? lo_d : NAN;
    out->output_tps = lo > 0 ? lo_o : NAN;
    out->ttft_ms = lo > 0 ? lo_t[0] : NAN;
    out->tpot_ms = lo > 0 ? lo_t[1] : NAN;
    if (lo <= 0)
        snprintf(out->why, sizeof out->why, "met the SLO at no rate down to %.3g req/s", hi);
done:
    x->ops->stop_config(x);
    st_config_row_free(&row);
    free(S.base_prefix);
    return rc;
}

int st_sweep_bisect(const st_spec *spec, st_executor *x, int ci, double tol, st_sweep_bisect_result *out, char *err,
                    size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->fail_rate = INFINITY;
    out->capacity_rps = out->output_tps = out->ttft_ms = out->tpot_ms = NAN;
    if (spec->search.mode != ST_SEARCH_SUSTAINED)
        return bisect_burst(spec, x, ci, tol, out, err, errlen);
    volatile sig_atomic_t never = 0;
    st_capacity cap;
    double ms[2];
    int rc = search_in_memory(spec, x, ci, x->stop ? x->stop : &never, &cap, ms, &out->failed_start, out->why,
                              sizeof out->why, err, errlen);
    if (rc == 0) {
        out->ttft_ms = cap.has_pass ? ms[0] : NAN;
        out->tpot_ms = cap.has_pass ? ms[1] : NAN;
        out->runs = cap.runs;
        out->pass_rate = cap.has_pass ? cap.pass_rate : 0;
        out->fail_rate = cap.has_fail_above || (!cap.has_pass && isfinite(cap.fail_rate)) ? cap.fail_rate : INFINITY;
        out->capacity_rps = cap.has_pass ? cap.capacity_rps : NAN;
        out->output_tps = cap.has_pass ? cap.output_tps : NAN;
        if (!cap.has_pass && !out->failed_start)
            snprintf(out->why, sizeof out->why, "sustained the SLO at no rate down to %.3g", cap.fail_rate);
    }
    return rc;
}

int st_sweep_probe(const st_spec *spec, st_executor *x, int ci, double rate, volatile sig_atomic_t *stop,
                   st_rate_result *out, char *why, size_t whylen, char *err, size_t errlen)
{
    volatile sig_atomic_t never = 0;
    memset(out, 0, sizeof *out);
    mem_run m;
    int rc = -1;
    if (mem_begin(&m, spec, x, stop ? stop : x->stop ? x->stop : &never, ci, err, errlen) == 0) {
        cfgrun *cr = m.cr;
        if (ensure_engine(&m.S, cr) != 0) {
            snprintf(why, whylen, "%s", cr->row.failure_detail ? cr->row.failure_detail : "did not start");
            rc = 1;
        } else {
            st_next nx = { .action = ST_NEXT_RUN, .rate = rate };
            int status = step(&m.S, cr, &nx);
            if (status == 0 && cr->n > 0 && !*m.o.stop) {
                *out = cr->rr[cr->n - 1];
                rc = 0;
            } else {
                snprintf(err, errlen, "%s", *m.o.stop ? "interrupted" : "the run did not complete");
            }
        }
        config_end(&m.S, cr, 0);
    }
    mem_free(&m);
    return rc;
}

int st_sweep_run(const st_spec *spec, st_store *store, const st_sweep_opts *o, st_sweep_result *res, char *err,
                 size_t errlen)
{
    memset(res, 0, sizeof *res);
    sweep S = { .spec = spec, .o = o, .store = store, .res = res };
    S.t_start = st_now();
    snprintf(S.logdir, sizeof S.logdir, "%s/logs", o->out_dir);
    if (mkdir(S.logdir, 0755) && errno != EEXIST) {
        snprintf(err, errlen, "%s: %s", S.logdir, strerror(errno));
        return -1;
    }
    if (shared_prefix(&S, err, errlen))
        return -1;
    st_executor *own = NULL;
    S.x = o->executor;
    if (!S.x) {
        if (st_exec_http_new(spec, S.logdir, o->self_exe, o->stop, &own, err, errlen)) {
            free(S.base_prefix);
            return -1;
        }
        S.x = own;
    }
    int rc = 0;
    for (int i = 0; i < spec->n_configs; i++) {
        if (o->only && strcmp(spec->configs[i].name, o->only))
            continue;
        int r = run_config(&S, i);
        if (r < 0) {
            snprintf(err, errlen, "results database: %s", st_store_errmsg(store));
            rc = -1;
            break;
        }
        if (r == 1 || *o->stop) {
            res->interrupted = 1;
            break;
        }
    }
    st_executor_free(own);
    free(S.base_prefix);
    st_quality_ref_free(&S.qref);
    if (S.line_open && o->out) {
        fputs("\r\033[K", o->out);
        fflush(o->out);
    }
    return rc;
}

/* One request of the workload on the engine model, alone: its E2E (s), or NAN when the
 * configuration does not start there. */
static double lone_e2e(const st_spec *spec, st_executor *x, int ci)
{
    volatile sig_atomic_t never = 0;
    st_sweep_opts o = { .quiet = 1, .stop = x->stop ? x->stop : &never };
    sweep S = { .spec = spec, .o = &o, .x = x, .ci = ci, .in_memory = 1 };
    char err[512];
    double e2e = NAN;
    st_config_row row = { 0 };
    row.startup_s = NAN;
    if (shared_prefix(&S, err, sizeof err) == 0 && x->ops->start_config(x, &spec->configs[ci], &row) == 0) {
        st_workload w;
        st_ns *sched;
        st_run_row run = { 0 };
        if (build_run(&S, 1, rate_seed(spec->workload.seed, -2.0), 1, &w, &sched, &run) == 0) {
            st_exec_rate in = {
                .c = &spec->configs[ci], .w = &w, .sched = sched, .timeout_s = spec->timeouts.request_s
            };
            st_exec_out out;
            if (x->ops->run_rate(x, &in, &row, &out, err, sizeof err) == 0) {
                if (out.n && out.records[0].status == ST_REQ_OK)
                    e2e = st_record_e2e(&out.records[0]);
                st_exec_out_free(&out);
            }
            free(sched);
            drop_workload(&S, &w);
        }
        free(run.why);
    }
    x->ops->stop_config(x);
    st_config_row_free(&row);
    free(S.base_prefix);
    return e2e;
}

int st_sweep_check_bounds(const st_spec *spec, char *err, size_t errlen)
{
    char why[400];
    if (st_spec_check_bounds(spec, err, errlen))
        return -1;
    if (spec->search.mode != ST_SEARCH_SUSTAINED || !st_exec_model_supported(spec, why, sizeof why))
        return 0;
    int rc = 0;
    for (int i = 0; i < spec->n_configs && rc == 0; i++) {
        st_executor *x;
        if (st_exec_model_new(spec, NULL, &x, why, sizeof why))
            break;
        double e = lone_e2e(spec, x, i);
        st_executor_free(x);
        double k = spec->search.warmup_e2e, win = spec->search.min_window_s > e ? spec->search.min_window_s : e;
        double need = k * e + win + e;
        if (spec->closed_loop && isfinite(e) && e > 0 && spec->n_rates > 0) {
            /* the lowest level sends its window's requests no faster than C / (an unloaded E2E)
             * a second, and fills its ramp-up (ST_SUSTAIN_RAMP_N completions) no faster either */
            double c = spec->rates[0];
            uint32_t mwr = spec->search.min_window_requests;
            double warm = (k > ST_SUSTAIN_RAMP_N / c ? k : ST_SUSTAIN_RAMP_N / c) * e;
            double cw = st_sustain_closed_window_s((uint32_t)c, mwr, e);
            double cneed = warm + (cw > win ? cw : win) + e;
            if (spec->search.max_duration_s < cneed) {
                double room = spec->search.max_duration_s - warm - e;
                double fit = room > 0 ? floor(room * c / e / BOUNDS_ADVICE_ROOM) : 0;
                char alt[160] = "";
                if (fit >= 20 && (room >= spec->search.min_window_s))
                    snprintf(alt, sizeof alt, ", lower search.min_window_requests to %.0f or less", fit);
                snprintf(
                    err, errlen,
                    "%s: concurrency %g (the lowest level) cannot measure its window within search.max_duration "
                    "(%g s) for configuration %s: a request alone takes %.3g s (E2E on the engine model), so %g "
                    "client%s send%s the %u window requests (search.min_window_requests) over at least %.0f s, and "
                    "with the warm phase (%.3g s) and the drain a run needs %.0f s or more. Raise "
                    "search.max_duration to %.0f s or more%s, or drop the level",
                    spec->path ? spec->path : "spec", c, spec->search.max_duration_s, spec->configs[i].name, e, c,
                    c == 1 ? "" : "s", c == 1 ? "s" : "", mwr, cw, warm, cneed, ceil(cneed * BOUNDS_ADVICE_ROOM), alt);
                rc = -1;
                continue;
            }
        }
        if (isfinite(e) && spec->search.max_duration_s < need) {
            snprintf(err, errlen,
                     "%s: search.max_duration (%g s) is shorter than a sustained run of configuration %s needs on the "
                     "engine model even unloaded: a request alone takes %.3g s (E2E), so the warm phase (%g x E2E), "
                     "the window (%.3g s) and its drain need %.3g s",
                     spec->path ? spec->path : "spec", spec->search.max_duration_s, spec->configs[i].name, e, k, win,
                     need);
            rc = -1;
        }
    }
    return rc;
}
