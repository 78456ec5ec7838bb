#include "audit/sweep.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "audit/capacity.h"
#include "audit/executor.h"
#include "audit/figures.h"
#include "core/buf.h"
#include "core/version.h"
#include "engine/process.h"
#include "load/arrival.h"
#include "load/runner.h"
#include "load/trace.h"
#include "load/workload.h"

/* What a run key is hashed from (spec facts, flags, rate). */
#define RUN_KEY_INPUT_MAX ((size_t)1 << 20)

#define MAX_RUNS_PER_CONFIG 64

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
    int line_open;   /* a TTY line is drawn and not yet ended */
    st_ns last_draw; /* when the TTY progress line was last drawn */
    st_executor *x;  /* runs the engine (HTTP or the engine model) */
} sweep;

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

static void fmt_rate(char *b, size_t n, double r)
{
    if (isinf(r))
        snprintf(b, n, "inf");
    else
        snprintf(b, n, "%.4g", r);
}

/* ---- run key ---- */

void st_sweep_run_key(const st_spec *s, const st_spec_config *c, double rate, char out[65])
{
    st_buf b;
    st_buf_init(&b, RUN_KEY_INPUT_MAX);
    st_strv flags = { 0 };
    st_spec_config_flags(s, c, &flags);
    st_buf_printf(&b, "servetune-run/1|%s|%s|", ST_VERSION, st_engine_kind_name(s->engine.kind));
    for (int i = 0; i < s->engine.command.n; i++)
        st_buf_printf(&b, "cmd=%s\x1f", s->engine.command.v[i]);
    st_buf_printf(&b, "|model=%s|served=%s|", st_spec_config_model(s, c),
                  s->engine.served_name ? s->engine.served_name : "");
    for (int i = 0; i < flags.n; i++)
        st_buf_printf(&b, "flag=%s\x1f", flags.v[i]);
    for (int i = 0; i < s->engine.env.n; i++)
        st_buf_printf(&b, "env=%s=%s\x1f", s->engine.env.key[i], s->engine.env.val[i]);
    for (int i = 0; i < c->env.n; i++)
        st_buf_printf(&b, "cenv=%s=%s\x1f", c->env.key[i], c->env.val[i]);
    st_buf_printf(&b, "|url=%s|api=%s|", s->engine.url ? s->engine.url : "", s->engine.api ? s->engine.api : "");
    if (s->workload.kind == ST_WL_SYNTHETIC)
        st_buf_printf(&b, "syn=%u,%u,%.17g,%u", s->workload.input_tokens, s->workload.output_tokens,
                      s->workload.range_ratio, s->workload.shared_prefix);
    else
        st_buf_printf(&b, "trace=%s", s->workload.trace);
    st_buf_printf(&b, "|n=%u|seed=%llu|arr=%s,%.17g|warm=%u|timeout=%.17g|rate=%.17g|early=%d|",
                  s->workload.requests_per_rate, (unsigned long long)s->workload.seed,
                  s->workload.arrival ? s->workload.arrival : "poisson", s->workload.burstiness, s->warmup_requests,
                  s->timeouts.request_s, rate, s->search.early_stop);
    for (int i = 0; i < s->slo.n; i++)
        st_buf_printf(&b, "slo=%d,%g,%.17g\x1f", (int)s->slo.terms[i].metric, s->slo.terms[i].pct,
                      s->slo.terms[i].max_ms);
    st_store_hash(b.data ? b.data : "", b.len, out);
    st_strv_free(&flags);
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

static int make_workload(sweep *S, uint64_t seed, uint32_t n, st_workload *w, char *err, size_t errlen)
{
    const st_spec *s = S->spec;
    memset(w, 0, sizeof *w);
    if (s->workload.kind == ST_WL_TRACE) {
        /* the trace's first n requests (read as a stream: a large log is not loaded whole),
         * sessions flattened on their recorded times */
        st_trace_load_opts o;
        st_trace_load_opts_default(&o);
        o.sessions = ST_TRACE_SESSIONS_FLAT;
        o.read.max_rows = n;
        return st_trace_load(s->workload.trace, &o, w, NULL, NULL, err, errlen);
    }
    st_synth_params p = { .input_len = s->workload.input_tokens,
                          .output_len = s->workload.output_tokens,
                          .range_ratio = s->workload.range_ratio,
                          .prefix_len = s->workload.shared_prefix,
                          .num_requests = n,
                          .seed = seed };
    if (st_workload_synthetic(&p, w, err, errlen))
        return -1;
    for (uint32_t i = 0; i < w->n && S->base_prefix; i++)
        if (w->items[i].input_ids && w->items[i].input_len >= S->prefix_len)
            memcpy(w->items[i].input_ids, S->base_prefix, sizeof(uint32_t) * S->prefix_len);
    return 0;
}

static int make_schedule(const st_spec *s, double rate_wall, uint64_t seed, uint32_t n, st_ns **out)
{
    *out = calloc(n ? n : 1, sizeof(st_ns));
    if (!*out)
        return -1;
    st_arrival a = { .kind = ST_ARR_POISSON, .rate = rate_wall, .burstiness = s->workload.burstiness, .seed = seed };
    if (isinf(rate_wall))
        a.kind = ST_ARR_INF;
    else if (s->workload.arrival && st_arrival_kind_from_name(s->workload.arrival, &a.kind))
        a.kind = ST_ARR_POISSON;
    if (st_arrival_schedule(&a, n, *out)) {
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
    uint32_t n = w->n;
    *out = NULL;
    int timed = s->workload.kind == ST_WL_TRACE && n > 1 && isfinite(rate);
    for (uint32_t i = 0; timed && i < n; i++)
        timed = w->items[i].arrival >= 0;
    if (timed) {
        st_ns *sched = calloc(n, sizeof *sched);
        for (uint32_t i = 0; sched && i < n; i++)
            sched[i] = w->items[i].arrival;
        if (sched && st_arrival_retime(sched, n, rate) == 0) {
            *out = sched;
            return 0;
        }
        free(sched);
    }
    return make_schedule(s, rate, seed, n, out);
}

/* ---- one rate ---- */

typedef struct rate_ctx {
    sweep *S;
    const st_audit_slo *slo;
    uint32_t planned;
    double time_scale;
    int early_stopped;
    int interrupted;
    const char *cfg_name;
} rate_ctx;

/* The executor's tick: interruption, the SLO early stop, the progress line. Nonzero: stop. */
static int on_tick(void *arg, const st_runner_progress *p)
{
    rate_ctx *R = arg;
    sweep *S = R->S;
    if (*S->o->stop) {
        R->interrupted = 1;
        return 1;
    }
    if (S->spec->search.early_stop && p->records && !R->early_stopped) {
        uint32_t br[ST_SLO_MAX_TERMS], failed;
        st_audit_breaches(R->slo, p->records, p->total, p->elapsed, R->time_scale, br, &failed);
        if (st_capacity_sure_fail(R->slo, R->planned, br, failed)) {
            R->early_stopped = 1;
            return 1;
        }
    }
    if (S->o->quiet || !S->o->out || !S->o->tty)
        return 0;
    /* the engine model ticks every emulated second, far faster than a terminal needs */
    st_ns now = st_now();
    if (S->line_open && now - S->last_draw < 100 * ST_NS_PER_MS)
        return 0;
    S->last_draw = now;
    char el[32], eta[32], rt[32];
    double elapsed = st_ns_to_s(now - S->t_start);
    fmt_dur(el, sizeof el, elapsed);
    /* ETA: this rate's remaining schedule plus the remaining rates of this and later configs at
     * the pace so far (a rough guide). */
    double done_frac =
        (S->ci + (double)(S->rate_no - 1 + (p->total ? (double)(p->completed + p->failed) / p->total : 0)) /
                     (S->rates_planned ? S->rates_planned : 1)) /
        S->spec->n_configs;
    fmt_dur(eta, sizeof eta, done_frac > 0.01 ? elapsed / done_frac - elapsed : NAN);
    fmt_rate(rt, sizeof rt, S->rate);
    fprintf(S->o->out, "\r\033[K[%d/%d %s] rate %s req/s: %u/%u done, %u in flight | elapsed %s, about %s left",
            S->ci + 1, S->spec->n_configs, R->cfg_name, rt, p->completed + p->failed, p->total, p->in_flight, el, eta);
    fflush(S->o->out);
    S->line_open = 1;
    return 0;
}

/* Runs one rate. Fills run (owned strings) and the records/samples to store; returns 0, 1 when
 * interrupted (nothing to store), -1 on an error that leaves no run (run->why says why). */
static int run_rate(sweep *S, const st_spec_config *c, st_config_row *crow, double rate, st_run_row *row,
                    st_exec_out *out, uint32_t *errors_out)
{
    const st_spec *s = S->spec;
    char err[512];
    uint32_t n = s->workload.requests_per_rate;
    uint64_t seed = rate_seed(s->workload.seed, rate);
    st_workload w;
    memset(out, 0, sizeof *out);
    if (make_workload(S, seed, n, &w, err, sizeof err)) {
        row->why = strdup(err);
        return -1;
    }
    n = w.n;
    st_ns *sched = NULL;
    if (rate_schedule(s, &w, rate, seed ^ 0xa5a5, &sched)) {
        st_workload_free(&w);
        row->why = strdup("cannot build the arrival schedule");
        return -1;
    }
    rate_ctx R = { .S = S, .slo = &s->slo, .planned = n, .time_scale = S->x->time_scale, .cfg_name = c->name };
    st_exec_rate in = { .c = c,
                        .w = &w,
                        .sched = sched,
                        .warmup = 0,
                        .timeout_s = s->timeouts.request_s,
                        .tick = on_tick,
                        .tick_arg = &R };
    row->started = st_wall_ns();
    int rr = S->x->ops->run_rate(S->x, &in, crow, out, err, sizeof err);
    row->ended = st_wall_ns();
    free(sched);
    st_workload_free(&w);
    if (rr < 0) {
        row->why = strdup(err);
        return -1;
    }
    if (rr == 1 || R.interrupted) {
        st_exec_out_free(out);
        return 1;
    }
    st_rate_figures f;
    st_audit_figures(&s->slo, out->records, out->n, n, row, &f);
    *errors_out = f.errors;
    f.stopped_early = R.early_stopped;
    row->stopped_early = R.early_stopped;
    if (R.early_stopped) {
        /* The completed requests alone understate the failure: judge the margin on lower bounds
         * over every request that was due (and keep those in the run's SLO-term figures). */
        st_audit_lower_bounds(&s->slo, out->records, out->n, f.value_ms, &f.due);
        for (int i = 0; i < row->n_terms; i++)
            row->term_ms[i] = f.value_ms[i];
    }
    row->client_limited = out->client_limited;
    st_verdict_info v;
    st_capacity_verdict(&s->slo, &f, &v);
    row->verdict = strdup(st_verdict_name(v.verdict));
    row->why = strdup(v.why);
    row->worst_ratio = v.worst_ratio;
    return 0;
}

/* Warm-up: warmup_requests requests at a gentle pace, not measured, not stored. 0, or 1
 * interrupted. */
static int warm_up(sweep *S, const st_spec_config *c, st_config_row *crow)
{
    const st_spec *s = S->spec;
    uint32_t n = s->warmup_requests;
    if (!n)
        return 0;
    char err[512];
    st_workload w;
    if (make_workload(S, rate_seed(s->workload.seed, -1.0), n, &w, err, sizeof err))
        return 0;
    double r = s->rates[0];
    if (!isfinite(r) || r > 4)
        r = 4;
    st_ns *sched = NULL;
    if (make_schedule(s, r, 7, w.n, &sched)) {
        st_workload_free(&w);
        return 0;
    }
    rate_ctx R = { .S = S, .slo = &s->slo, .planned = w.n, .time_scale = S->x->time_scale, .cfg_name = "warm-up" };
    /* warm-up requests are never early-stopped: the breach counts ignore warm-up records */
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
    return (st_rate_result){ .rate = w->rate,
                             .verdict = st_verdict_from_name(w->verdict),
                             .worst_ratio = w->worst_ratio,
                             .delivered_rps = w->delivered_rps,
                             .output_tps = w->output_tps,
                             .sustained_rps = w->sustained_rps,
                             .requests = w->sent,
                             .grid = w->grid };
}

/* 0 done (possibly failed: row says), 1 interrupted, -1 store error. */
static int run_config(sweep *S, int ci)
{
    const st_spec *s = S->spec;
    const st_spec_config *c = &s->configs[ci];
    S->ci = ci;
    st_config_row row = { 0 };
    row.startup_s = NAN;
    /* --resume: a configuration that finished (or failed to start) is kept as it is, except one
     * that found its port taken (a passing condition: it is tried again). One that was still
     * running keeps what its row knew (command line, startup time, engine facts) until its engine
     * starts again: its runs may all be in the store already. */
    if (S->o->resume) {
        st_config_row *rows;
        int nr;
        if (st_store_configs_get(S->store, &rows, &nr) == 0) {
            for (int i = 0; i < nr; i++) {
                if (strcmp(rows[i].name, c->name) || !rows[i].status)
                    continue;
                int retry = rows[i].failure_class && !strcmp(rows[i].failure_class, "port_taken");
                if (!retry && (!strcmp(rows[i].status, "done") || !strcmp(rows[i].status, "failed"))) {
                    say(S, "[%d/%d %s] already %s (kept from the previous run)", ci + 1, s->n_configs, c->name,
                        rows[i].status);
                    if (!strcmp(rows[i].status, "failed"))
                        S->res->configs_failed++;
                    st_config_rows_free(rows, nr);
                    return 0;
                }
                if (!retry) {
                    row = rows[i];
                    memset(&rows[i], 0, sizeof rows[i]);
                    free(row.status);
                    row.status = NULL;
                }
            }
            st_config_rows_free(rows, nr);
        }
    }
    free(row.name);
    row.name = strdup(c->name);
    row.idx = ci;
    row.status = strdup("running");
    if (!row.started)
        row.started = st_wall_ns();
    if (st_store_config_put(S->store, &row)) {
        st_config_row_free(&row);
        return -1;
    }
    st_rate_result rr[MAX_RUNS_PER_CONFIG];
    int n = 0, seq = 0, status = 0;
    int engine_up = 0, engine_failed = 0;
    st_search_params sp = { s->rates,
                            s->n_rates,
                            s->search.mode,
                            s->search.tolerance,
                            s->search.request_budget,
                            s->workload.requests_per_rate,
                            s->search.skip_margin };
    S->rates_planned = s->n_rates;
    S->rate_no = 0;
    while (n < MAX_RUNS_PER_CONFIG) {
        st_next nx;
        st_capacity_next(&sp, rr, n, &nx);
        if (nx.action == ST_NEXT_STOP) {
            if (n && s->search.mode == ST_SEARCH_REFINE)
                say(S, "[%d/%d %s] %s", ci + 1, s->n_configs, c->name, nx.why);
            break;
        }
        S->rate_no++;
        if (S->rate_no > S->rates_planned)
            S->rates_planned = S->rate_no;
        S->rate = nx.rate;
        char key[65], rt[32];
        fmt_rate(rt, sizeof rt, nx.rate);
        st_sweep_run_key(s, c, nx.rate, key);
        st_run_row found;
        int have = st_store_run_find(S->store, key, &found);
        if (have < 0) {
            status = -1;
            break;
        }
        if (have == 1) {
            rr[n++] = result_of(&found);
            S->res->runs_reused++;
            say(S, "[%d/%d %s] rate %s req/s: %s (kept from the previous run)", ci + 1, s->n_configs, c->name, rt,
                found.verdict);
            st_run_row_free(&found);
            seq++;
            continue;
        }
        st_run_row run = { 0 };
        run.config = (char *)c->name;
        run.seq = seq;
        run.rate = nx.rate;
        run.grid = nx.grid;
        memcpy(run.run_key, key, sizeof key);
        run.sustained_rps = run.delivered_rps = run.output_tps = NAN;
        if (nx.action == ST_NEXT_SKIP) {
            run.verdict = "skipped";
            run.why = nx.why;
            run.started = run.ended = st_wall_ns();
            /* NAN figures for a run that did not happen */
            run.duration_s = run.offered_rps_achieved = run.worst_ratio = NAN;
            run.ttft_p50_ms = run.ttft_p95_ms = run.ttft_p99_ms = run.tpot_p50_ms = run.tpot_p95_ms = run.tpot_p99_ms =
                run.itl_p95_ms = run.e2e_p95_ms = run.lag_p99_ms = NAN;
            if (st_store_run_put(S->store, &run, NULL, 0, NULL, 0)) {
                status = -1;
                break;
            }
            rr[n++] = result_of(&run);
            say(S, "[%d/%d %s] rate %s req/s: %s", ci + 1, s->n_configs, c->name, rt, nx.why);
            seq++;
            continue;
        }
        if (!engine_up) {
            say(S, "[%d/%d %s] %s", ci + 1, s->n_configs, c->name,
                S->x->prediction ? "building the engine model" : "starting the engine");
            int es = S->x->ops->start_config(S->x, c, &row);
            if (es == 1 || (es < 0 && *S->o->stop)) {
                status = 1;
                break;
            }
            if (es < 0) {
                engine_failed = 1;
                say(S, "[%d/%d %s] did not start: %s", ci + 1, s->n_configs, c->name, row.failure_detail);
                break;
            }
            engine_up = 1;
            st_store_config_put(S->store, &row);
            if (!S->x->prediction)
                say(S, "[%d/%d %s] ready after %.1f s", ci + 1, s->n_configs, c->name, row.startup_s);
            if (warm_up(S, c, &row)) {
                status = 1;
                break;
            }
        }
        if (nx.why[0] && !nx.grid)
            say(S, "[%d/%d %s] %s: rate %s req/s", ci + 1, s->n_configs, c->name, nx.why, rt);
        st_exec_out out;
        st_ns t0 = st_now();
        uint32_t errors = 0;
        int r = run_rate(S, c, &row, nx.rate, &run, &out, &errors);
        double took = st_ns_to_s(st_now() - t0);
        if (r == 0 && out.engine_failed && *S->o->stop) {
            /* stopped together with its engine (the end of a Slurm job signals all its processes):
             * an interruption, not a failure of the configuration */
            st_exec_out_free(&out);
            free(run.verdict);
            free(run.why);
            r = 1;
        }
        if (r == 1) {
            status = 1;
            break;
        }
        if (r < 0) {
            /* the run could not start (bad workload...): an error row, and stop this config */
            st_exec_fill_failure(&row, ST_FAIL_CRASH, run.why, NULL, NULL);
            engine_failed = 1;
            free(run.why);
            break;
        }
        if (out.idle_wait_s > 2)
            say(S, "[%d/%d %s] waited %.1f s for the engine to drain the previous run", ci + 1, s->n_configs, c->name,
                out.idle_wait_s);
        if (out.engine_failed) {
            free(run.verdict);
            run.verdict = strdup("error");
            char w2[800];
            snprintf(w2, sizeof w2, "%s (%s)", row.failure_detail, run.why ? run.why : "");
            free(run.why);
            run.why = strdup(w2);
            engine_failed = 1;
        }
        int put = st_store_run_put(S->store, &run, out.records, out.n, out.samples, out.n_samples);
        st_exec_out_free(&out);
        if (put) {
            free(run.verdict);
            free(run.why);
            status = -1;
            break;
        }
        S->res->runs_measured++;
        rr[n++] = result_of(&run);
        seq++;
        char t1[32], t2[32], t3[32];
        const char *ge = run.stopped_early ? ">= " : "";
        if (isnan(run.delivered_rps))
            snprintf(t3, sizeof t3, "none");
        else
            snprintf(t3, sizeof t3, "%.3g req/s", run.delivered_rps);
        snprintf(t1, sizeof t1, "%s%.0f", ge, run.n_terms > 0 ? run.term_ms[0] : run.ttft_p95_ms);
        snprintf(t2, sizeof t2, "%s%.1f", ge, run.n_terms > 1 ? run.term_ms[1] : run.tpot_p95_ms);
        say(S,
            "[%d/%d %s] rate %s req/s: %s, %u/%u completed, p95 TTFT %s ms, p95 TPOT %s ms, delivered %s "
            "(%.1f s)%s%s",
            ci + 1, s->n_configs, c->name, rt, run.verdict, run.completed, run.planned, t1, t2, t3, took,
            strcmp(run.verdict, "pass") ? ": " : "", strcmp(run.verdict, "pass") ? run.why : "");
        free(run.verdict);
        free(run.why);
        if (engine_failed) {
            say(S, "[%d/%d %s] the engine failed during the run: %s", ci + 1, s->n_configs, c->name,
                row.failure_detail);
            break;
        }
        if (*S->o->stop) {
            status = 1;
            break;
        }
    }
    S->x->ops->stop_config(S->x);
    if (status == 1) {
        free(row.status);
        row.status = strdup("interrupted");
    } else if (engine_failed) {
        S->res->configs_failed++;
    } else if (status == 0) {
        free(row.status);
        row.status = strdup("done");
    }
    if (st_store_config_put(S->store, &row) && status == 0)
        status = -1;
    st_config_row_free(&row);
    return status;
}

/* The shared prefix: from the spec's seed, the same for every rate and configuration. */
static int shared_prefix(sweep *S, char *err, size_t errlen)
{
    const st_spec *spec = S->spec;
    if (spec->workload.kind == ST_WL_SYNTHETIC && spec->workload.shared_prefix) {
        st_workload pw;
        st_synth_params p = { .input_len = spec->workload.input_tokens,
                              .output_len = spec->workload.output_tokens,
                              .range_ratio = spec->workload.range_ratio,
                              .prefix_len = spec->workload.shared_prefix,
                              .num_requests = 1,
                              .seed = spec->workload.seed };
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

/* One probe of the bisection: 1 pass, 0 fail, -1 error. */
static int probe(sweep *S, const st_spec_config *c, st_config_row *crow, double rate, double *delivered, char *err,
                 size_t errlen)
{
    st_run_row run = { 0 };
    run.rate = rate;
    st_exec_out out;
    uint32_t errors = 0;
    int r = run_rate(S, c, crow, rate, &run, &out, &errors);
    if (r) {
        snprintf(err, errlen, "%s", run.why ? run.why : "interrupted");
        free(run.why);
        return -1;
    }
    st_exec_out_free(&out);
    int pass = run.verdict && !strcmp(run.verdict, "pass");
    *delivered = run.delivered_rps;
    free(run.verdict);
    free(run.why);
    return pass;
}

int st_sweep_bisect(const st_spec *spec, st_executor *x, int ci, double tol, st_sweep_bisect_result *out, char *err,
                    size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->fail_rate = INFINITY;
    out->capacity_rps = NAN;
    volatile sig_atomic_t never = 0; /* the bisection is never interrupted */
    st_sweep_opts o = { .quiet = 1, .stop = &never };
    sweep S = { .spec = spec, .o = &o, .x = x, .ci = ci };
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
    double d = NAN, lo = 0, hi = INFINITY, lo_d = NAN;
    int p = probe(&S, c, &row, r, &d, err, errlen);
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
        p = probe(&S, c, &row, r, &d, err, errlen);
        out->runs++;
        if (p < 0) {
            rc = -1;
            goto done;
        }
    }
    if (lo > 0 && isfinite(hi)) {
        for (int k = 0; k < 30 && hi / lo - 1 > tol; k++) {
            double m = sqrt(lo * hi);
            p = probe(&S, c, &row, m, &d, err, errlen);
            out->runs++;
            if (p < 0) {
                rc = -1;
                goto done;
            }
            if (p) {
                lo = m;
                lo_d = d;
            } else {
                hi = m;
            }
        }
    }
    out->pass_rate = lo;
    out->fail_rate = hi;
    out->capacity_rps = lo > 0 ? lo_d : NAN;
    if (lo <= 0)
        snprintf(out->why, sizeof out->why, "met the SLO at no rate down to %.3g req/s", hi);
done:
    x->ops->stop_config(x);
    st_config_row_free(&row);
    free(S.base_prefix);
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
    if (S.line_open && o->out) {
        fputs("\r\033[K", o->out);
        fflush(o->out);
    }
    return rc;
}
