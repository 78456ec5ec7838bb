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
#include "audit/figures.h"
#include "core/buf.h"
#include "core/version.h"
#include "engine/adapter.h"
#include "engine/api.h"
#include "engine/metrics.h"
#include "engine/metrics_scrape.h"
#include "engine/probe.h"
#include "engine/process.h"
#include "load/arrival.h"
#include "load/runner.h"
#include "load/workload.h"

#define MAX_RUNS_PER_CONFIG 64
#define LOG_TAIL_BYTES 16384
#define LOG_TAIL_LINES 40

typedef struct sweep {
    const st_spec *spec;
    const st_sweep_opts *o;
    st_store *store;
    st_sweep_result *res;
    char logdir[4096];
    st_ns t_start;
    int ci;               /* configuration index being run */
    uint32_t *base_prefix; /* the shared prefix every synthetic request starts with */
    uint32_t prefix_len;
    /* progress of the current rate */
    double rate;
    int rate_no, rates_planned;
    int line_open;        /* a TTY line is drawn and not yet ended */
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
    st_buf_init(&b, 1 << 20);
    st_strv flags = { 0 };
    st_spec_config_flags(s, c, &flags);
    st_buf_printf(&b, "servetune-run/1|%s|%s|", ST_VERSION, st_engine_kind_name(s->engine.kind));
    for (int i = 0; i < s->engine.command.n; i++)
        st_buf_printf(&b, "cmd=%s\x1f", s->engine.command.v[i]);
    st_buf_printf(&b, "|model=%s|served=%s|", st_spec_config_model(s, c), s->engine.served_name ? s->engine.served_name : "");
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
    st_buf_printf(&b, "|n=%u|seed=%llu|arr=%s,%.17g|warm=%u|timeout=%.17g|rate=%.17g|early=%d|", s->workload.requests_per_rate,
                  (unsigned long long)s->workload.seed, s->workload.arrival ? s->workload.arrival : "poisson",
                  s->workload.burstiness, s->warmup_requests, s->timeouts.request_s, rate, s->search.early_stop);
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
        st_workload all;
        if (st_workload_trace_load(s->workload.trace, &all, err, errlen))
            return -1;
        if (all.n >= n) {
            for (uint32_t i = n; i < all.n; i++) {
                free(all.items[i].input_ids);
                free(all.items[i].input_text);
            }
            all.n = n;
        }
        *w = all;
        return 0;
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

/* ---- engine ---- */

typedef struct engine {
    st_launch l;
    st_proc proc;
    int started; /* a process of ours runs */
    char log_path[4200];
    char cmdline[8192];
    const char *api_key;
    char *secrets[8];  /* values expanded from ${VAR} in the flags: redacted from log tails */
    int nsecrets;
    int stopped;       /* the process was started and has been stopped */
} engine;

static void fill_failure(st_config_row *row, st_fail_class c, const char *detail, const char *log_path,
                         const char *secret);
/* Removes the flag secrets of E from what a failed configuration keeps. */
static void redact_row(st_config_row *row, const engine *E)
{
    for (int i = 0; i < E->nsecrets; i++) {
        st_redact(row->failure_detail, E->secrets[i]);
        st_redact(row->log_tail, E->secrets[i]);
    }
}

static void fill_failure(st_config_row *row, st_fail_class c, const char *detail, const char *log_path,
                         const char *secret)
{
    free(row->failure_class);
    free(row->failure_detail);
    free(row->log_tail);
    row->failure_class = strdup(st_fail_class_name(c));
    char d[600];
    snprintf(d, sizeof d, "%s%s%s", st_fail_class_text(c), detail && *detail ? ": " : "", detail ? detail : "");
    st_redact(d, secret);
    row->failure_detail = strdup(d);
    row->log_tail = NULL;
    if (log_path && st_log_tail(log_path, LOG_TAIL_BYTES, LOG_TAIL_LINES, &row->log_tail) == 0)
        st_redact(row->log_tail, secret);
    free(row->status);
    row->status = strdup("failed");
}

/* Facts the engine states about itself: its version (GET /version) and vLLM's KV cache line. */
static char *engine_facts(engine *E)
{
    st_buf b;
    st_buf_init(&b, 4096);
    st_buf_puts(&b, "{");
    int any = 0;
    st_buf body;
    st_buf_init(&body, 65536);
    int status;
    char err[256];
    if (st_http_get(E->l.host, E->l.port, "/version", E->api_key, 2, &status, &body, err, sizeof err) == 0 &&
        status == 200 && body.data) {
        json_t *root = json_loadb(body.data, body.len, 0, NULL);
        const char *ver = json_string_value(json_object_get(root, "version"));
        if (ver && strlen(ver) < 80) {
            st_buf_puts(&b, "\"engine_version\":");
            st_buf_json_str(&b, ver);
            any = 1;
        }
        json_decref(root);
    }
    st_buf_free(&body);
    char *tail = NULL;
    if (E->started && st_log_tail(E->log_path, 1 << 20, 100000, &tail) == 0) {
        static const char *keys[] = { "GPU KV cache size", "Maximum concurrency" };
        static const char *names[] = { "kv_cache_line", "max_concurrency_line" };
        for (int k = 0; k < 2; k++) {
            const char *h = strstr(tail, keys[k]);
            if (!h)
                continue;
            size_t l = strcspn(h, "\n");
            char line[300];
            snprintf(line, sizeof line, "%.*s", (int)(l < 299 ? l : 299), h);
            st_buf_printf(&b, "%s\"%s\":", any ? "," : "", names[k]);
            st_buf_json_str(&b, line);
            any = 1;
        }
        free(tail);
    }
    st_buf_puts(&b, "}");
    char *r = strdup(b.data ? b.data : "{}");
    st_buf_free(&b);
    return r;
}

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* Starts (or, for an endpoint, connects to) the engine and waits until it is ready and ours.
 * 0 ready; -1 failed (row filled); 1 interrupted. */
static int engine_start(sweep *S, const st_spec_config *c, engine *E, st_config_row *row)
{
    const st_spec *s = S->spec;
    char err[512] = "";
    memset(E, 0, sizeof *E);
    E->api_key = s->engine.api_key_env ? getenv(s->engine.api_key_env) : NULL;
    int port = 0;
    if (s->engine.kind != ST_ENGINE_ENDPOINT) {
        port = s->engine.port ? s->engine.port : st_port_pick();
        if (port <= 0 || !st_port_free(port)) {
            snprintf(err, sizeof err, "port %d on 127.0.0.1 is already in use; servetune never shares a port", port);
            fill_failure(row, ST_FAIL_PORT_TAKEN, err, NULL, NULL);
            return -1;
        }
    }
    if (st_adapter_launch(s, c, port, S->o->self_exe, &E->l, err, sizeof err)) {
        fill_failure(row, ST_FAIL_BAD_FLAG, err, NULL, NULL);
        return -1;
    }
    E->l.api_key = E->api_key;
    snprintf(E->log_path, sizeof E->log_path, "%s/%s.log", S->logdir, c->name);
    st_launch_cmdline(&E->l, E->cmdline, sizeof E->cmdline);
    free(row->argv);
    row->argv = strdup(s->engine.kind == ST_ENGINE_ENDPOINT ? s->engine.url : E->cmdline);
    st_ns t0 = st_now();
    if (s->engine.kind != ST_ENGINE_ENDPOINT) {
        /* Environment: the spec's, then the configuration's (which wins). */
        const char *keys[512], *vals[512];
        int ne = 0;
        for (int i = 0; i < s->engine.env.n && ne < 512; i++) {
            int over = 0;
            for (int j = 0; j < c->env.n; j++)
                over |= !strcmp(c->env.key[j], s->engine.env.key[i]);
            if (!over) {
                keys[ne] = s->engine.env.key[i];
                vals[ne++] = s->engine.env.val[i];
            }
        }
        for (int j = 0; j < c->env.n && ne < 512; j++) {
            keys[ne] = c->env.key[j];
            vals[ne++] = c->env.val[j];
        }
        FILE *lf = fopen(E->log_path, "a");
        if (lf) {
            fprintf(lf, "--- servetune: starting %s\n", E->cmdline);
            fclose(lf);
        }
        st_proc_opts po = { .argv = E->l.argv.v, .env_key = keys, .env_val = vals, .n_env = ne,
                            .log_path = E->log_path };
        /* argv (NULL-terminated), with ${VAR} in the flags expanded now: the stored command line
         * keeps the reference, never the value. */
        char **argv = calloc((size_t)E->l.argv.n + 1, sizeof(char *));
        if (!argv) {
            fill_failure(row, ST_FAIL_EXEC, "out of memory", NULL, NULL);
            return -1;
        }
        int rc = 0;
        for (int i = 0; i < E->l.argv.n && !rc; i++) {
            const char *t = E->l.argv.v[i];
            if (!strstr(t, "${")) {
                argv[i] = strdup(t);
                continue;
            }
            char val[8192];
            if (st_env_expand(t, val, sizeof val, err, sizeof err)) {
                rc = -1;
                break;
            }
            argv[i] = strdup(val);
            if (E->nsecrets < 8 && val[0])
                E->secrets[E->nsecrets++] = strdup(val);
        }
        if (!rc) {
            po.argv = argv;
            rc = st_proc_start(&E->proc, &po, err, sizeof err);
        } else {
            char d[400];
            snprintf(d, sizeof d, "the flags: %.380s", err);
            snprintf(err, sizeof err, "%s", d);
        }
        for (int i = 0; i < E->l.argv.n; i++)
            free(argv[i]);
        free(argv);
        if (rc) {
            fill_failure(row, ST_FAIL_EXEC, err, E->log_path, E->api_key);
            redact_row(row, E);
            return -1;
        }
        E->started = 1;
    }
    char detail[600] = "";
    int waited_ms = 0;
    for (;;) {
        if (*S->o->stop)
            return 1;
        if (E->started && !st_proc_alive(&E->proc)) {
            char *tail = NULL;
            st_log_tail(E->log_path, LOG_TAIL_BYTES, LOG_TAIL_LINES, &tail);
            st_fail_class fc = st_proc_classify(tail, 1, E->proc.wstatus, 0, detail, sizeof detail);
            free(tail);
            fill_failure(row, fc, detail, E->log_path, E->api_key);
            redact_row(row, E);
            return -1;
        }
        st_probe_result pr = st_adapter_probe(&E->l, 2.0, detail, sizeof detail);
        if (pr == ST_PROBE_READY)
            break;
        if (pr == ST_PROBE_WRONG_SERVER) {
            fill_failure(row, ST_FAIL_WRONG_SERVER, detail, E->started ? E->log_path : NULL, E->api_key);
            redact_row(row, E);
            return -1;
        }
        if (st_ns_to_s(st_now() - t0) > s->timeouts.startup_s) {
            char d2[700];
            snprintf(d2, sizeof d2, "not ready after %.0f s (last probe: %s)", s->timeouts.startup_s, detail);
            fill_failure(row, ST_FAIL_TIMEOUT, d2, E->started ? E->log_path : NULL, E->api_key);
            redact_row(row, E);
            return -1;
        }
        /* Probe often at first (the emulator starts in milliseconds), then every 250 ms. */
        int ms = waited_ms < 1000 ? 20 : 250;
        sleep_ms(ms);
        waited_ms += ms;
    }
    row->startup_s = st_ns_to_s(st_now() - t0);
    free(row->facts);
    row->facts = engine_facts(E);
    return 0;
}

/* The engine may print its own arguments (vLLM logs its non-default args, the API key
 * included): once it has stopped, its log is rewritten with every secret replaced by ***. */
static void redact_log(const engine *E)
{
    if (!E->nsecrets && !(E->api_key && *E->api_key))
        return;
    FILE *f = fopen(E->log_path, "rb");
    if (!f)
        return;
    size_t cap = 64u << 20;
    char *buf = malloc(cap + 1);
    size_t n = buf ? fread(buf, 1, cap, f) : 0;
    fclose(f);
    if (!buf)
        return;
    buf[n] = '\0';
    /* bytes after a NUL (binary junk) are dropped with it */
    for (int i = 0; i < E->nsecrets; i++)
        st_redact(buf, E->secrets[i]);
    st_redact(buf, E->api_key);
    f = fopen(E->log_path, "wb");
    if (f) {
        fwrite(buf, 1, strlen(buf), f);
        fclose(f);
    }
    free(buf);
}

static void engine_stop(sweep *S, engine *E)
{
    if (E->started) {
        st_proc_stop(&E->proc, S->spec->timeouts.stop_grace_s);
        FILE *lf = fopen(E->log_path, "a");
        if (lf) {
            char d[128];
            st_proc_describe(&E->proc, d, sizeof d);
            fprintf(lf, "--- servetune: stopped (%s)\n", d);
            fclose(lf);
        }
        E->started = 0;
        E->stopped = 1;
    }
    if (E->stopped)
        redact_log(E);
    for (int i = 0; i < E->nsecrets; i++)
        free(E->secrets[i]);
    E->nsecrets = 0;
    st_launch_free(&E->l);
}

/* ---- metrics scraping thread ---- */

typedef struct scraper {
    pthread_t th;
    atomic_int stop;
    const engine *E;
    double time_scale;
    st_ns t0;
    pthread_mutex_t mu;
    st_metric_sample *s;
    uint32_t n, cap;
    int failures, ok;
} scraper;

static void *scrape_main(void *arg)
{
    scraper *sc = arg;
    st_buf body;
    st_buf_init(&body, 8 << 20);
    while (!atomic_load(&sc->stop)) {
        st_ns t = st_now();
        int status;
        char err[256];
        if (st_http_get(sc->E->l.host, sc->E->l.port, "/metrics", NULL, 2, &status, &body, err, sizeof err) == 0 &&
            status == 200) {
            st_metric_sample got[ST_SCRAPE_MAX];
            int ng = st_scrape_parse(sc->E->l.metrics_dialect, body.data ? body.data : "", body.len, got, ST_SCRAPE_MAX);
            double ts = st_ns_to_s(t - sc->t0) * sc->time_scale;
            pthread_mutex_lock(&sc->mu);
            sc->ok++;
            for (int i = 0; i < ng; i++) {
                if (sc->n == sc->cap) {
                    uint32_t nc = sc->cap ? sc->cap * 2 : 256;
                    st_metric_sample *ns = realloc(sc->s, sizeof *ns * nc);
                    if (!ns)
                        break;
                    sc->s = ns;
                    sc->cap = nc;
                }
                got[i].t = ts;
                sc->s[sc->n++] = got[i];
            }
            pthread_mutex_unlock(&sc->mu);
        } else {
            sc->failures++;
        }
        /* about once a second, in small sleeps so stopping is quick */
        for (int i = 0; i < 20 && !atomic_load(&sc->stop); i++) {
            st_ns next = t + (i + 1) * 50 * ST_NS_PER_MS;
            st_ns now = st_now();
            if (next > now)
                sleep_ms((int)((next - now) / ST_NS_PER_MS) + 1);
        }
    }
    st_buf_free(&body);
    return NULL;
}

/* Waits until the engine has no request running or waiting (from /metrics), so that what an
 * early-stopped or overloaded run left behind does not weigh on the next rate. Bounded by
 * max_s; without /metrics it waits a short fixed time. Returns the seconds waited. */
static double wait_idle(sweep *S, const engine *E, double max_s)
{
    st_ns t0 = st_now();
    st_buf body;
    st_buf_init(&body, 8 << 20);
    int misses = 0;
    while (st_ns_to_s(st_now() - t0) < max_s && !*S->o->stop) {
        int status;
        char err[256];
        st_engine_metrics m;
        if (st_http_get(E->l.host, E->l.port, "/metrics", NULL, 2, &status, &body, err, sizeof err) == 0 &&
            status == 200 && st_metrics_read(E->l.metrics_dialect, body.data ? body.data : "", body.len, &m) == 0 &&
            (m.found & (1u << ST_MET_RUNNING))) {
            double busy = m.v[ST_MET_RUNNING] + ((m.found & (1u << ST_MET_WAITING)) ? m.v[ST_MET_WAITING] : 0);
            if (busy <= 0)
                break;
        } else if (++misses >= 3) {
            sleep_ms(500); /* no usable /metrics: a short pause instead */
            break;
        }
        sleep_ms(50);
    }
    st_buf_free(&body);
    return st_ns_to_s(st_now() - t0);
}

/* ---- one rate ---- */

typedef struct rate_ctx {
    sweep *S;
    const st_audit_slo *slo;
    uint32_t planned;
    double time_scale;
    volatile sig_atomic_t run_stop; /* the runner's stop flag */
    int early_stopped;
    int interrupted;
    const char *cfg_name;
    st_ns t_rate;
} rate_ctx;

static void on_tick(void *arg, const st_runner_progress *p)
{
    rate_ctx *R = arg;
    sweep *S = R->S;
    if (*S->o->stop) {
        R->interrupted = 1;
        R->run_stop = 1;
        return;
    }
    if (S->spec->search.early_stop && p->records && !R->early_stopped) {
        uint32_t br[ST_SLO_MAX_TERMS], failed;
        st_audit_breaches(R->slo, p->records, p->total, p->elapsed, R->time_scale, br, &failed);
        if (st_capacity_sure_fail(R->slo, R->planned, br, failed)) {
            R->early_stopped = 1;
            R->run_stop = 1;
        }
    }
    if (S->o->quiet || !S->o->out)
        return;
    char el[32], eta[32], rt[32];
    double elapsed = st_ns_to_s(st_now() - S->t_start);
    fmt_dur(el, sizeof el, elapsed);
    /* ETA: this rate's remaining schedule plus the remaining rates of this and later configs at
     * the pace so far (a rough guide). */
    double done_frac = (S->ci + (double)(S->rate_no - 1 + (p->total ? (double)(p->completed + p->failed) / p->total : 0)) /
                                    (S->rates_planned ? S->rates_planned : 1)) /
                       S->spec->n_configs;
    fmt_dur(eta, sizeof eta, done_frac > 0.01 ? elapsed / done_frac - elapsed : NAN);
    fmt_rate(rt, sizeof rt, S->rate);
    if (S->o->tty) {
        fprintf(S->o->out, "\r\033[K[%d/%d %s] rate %s req/s: %u/%u done, %u in flight | elapsed %s, about %s left",
                S->ci + 1, S->spec->n_configs, R->cfg_name, rt, p->completed + p->failed, p->total, p->in_flight, el,
                eta);
        fflush(S->o->out);
        S->line_open = 1;
    }
}

/* Runs one rate. Fills row (owned strings) and rr; returns 0, 1 when interrupted (nothing to
 * store), -1 on an error that leaves no run (row->why says why). */
static int run_rate(sweep *S, const st_spec_config *c, engine *E, double rate, st_run_row *row,
                    st_metric_sample **samples, uint32_t *nsamples, st_record **recs_out, uint32_t *nrecs_out,
                    uint32_t *errors_out)
{
    const st_spec *s = S->spec;
    char err[512];
    uint32_t n = s->workload.requests_per_rate;
    uint64_t seed = rate_seed(s->workload.seed, rate);
    st_workload w;
    if (make_workload(S, seed, n, &w, err, sizeof err)) {
        row->why = strdup(err);
        return -1;
    }
    n = w.n;
    double K = E->l.time_scale;
    st_ns *sched = NULL;
    /* A trace with timestamps keeps its shape (burstiness), retimed to the rate; otherwise the
     * spec's arrival process. */
    int timed = s->workload.kind == ST_WL_TRACE && n > 1;
    for (uint32_t i = 0; timed && i < n; i++)
        timed = w.items[i].arrival >= 0;
    if (timed) {
        sched = calloc(n, sizeof *sched);
        for (uint32_t i = 0; sched && i < n; i++)
            sched[i] = w.items[i].arrival;
        if (sched && st_arrival_retime(sched, n, rate * K)) {
            free(sched);
            sched = NULL;
            timed = 0;
        }
    }
    if (!sched && make_schedule(s, rate * K, seed ^ 0xa5a5, n, &sched)) {
        st_workload_free(&w);
        row->why = strdup("cannot build the arrival schedule");
        return -1;
    }
    rate_ctx R = { .S = S, .slo = &s->slo, .planned = n, .time_scale = K, .cfg_name = c->name };
    st_api_kind api = ST_API_COMPLETIONS;
    st_api_from_name(E->l.api, &api);
    st_runner_config rc = { .url = E->l.base_url,
                            .api = (int)api,
                            .stream = 1,
                            .model = E->l.expected_model,
                            .api_key = E->api_key,
                            .work = &w,
                            .schedule = sched,
                            .warmup = 0,
                            .timeout_s = s->timeouts.request_s / K,
                            .tick = on_tick,
                            .tick_arg = &R,
                            .stop = &R.run_stop };
    scraper sc = { .E = E, .time_scale = K };
    pthread_mutex_init(&sc.mu, NULL);
    sc.t0 = st_now();
    int have_scraper = pthread_create(&sc.th, NULL, scrape_main, &sc) == 0;
    st_run_result out;
    memset(&out, 0, sizeof out);
    row->started = st_wall_ns();
    int rr = st_runner_run(&rc, &out, err, sizeof err);
    row->ended = st_wall_ns();
    if (have_scraper) {
        atomic_store(&sc.stop, 1);
        pthread_join(sc.th, NULL);
    }
    pthread_mutex_destroy(&sc.mu);
    /* scraped times are from the scraper's start; the runner's t0 is a moment later: close enough
     * for a once-a-second timeline */
    *samples = sc.s;
    *nsamples = sc.n;
    free(sched);
    st_workload_free(&w);
    if (rr) {
        row->why = strdup(err);
        return -1;
    }
    if (R.interrupted || (out.interrupted && !R.early_stopped)) {
        st_run_result_free(&out);
        return 1;
    }
    st_audit_scale_records(out.records, out.n, K);
    st_rate_figures f;
    st_audit_figures(&s->slo, out.records, out.n, n, row, &f);
    *errors_out = f.errors;
    f.stopped_early = R.early_stopped;
    row->stopped_early = R.early_stopped;
    if (R.early_stopped) {
        /* The completed requests alone understate the failure: judge the margin on lower bounds
         * over every request that was due (and keep those in the run's SLO-term figures). */
        st_audit_lower_bounds(&s->slo, out.records, out.n, f.value_ms, &f.due);
        for (int i = 0; i < row->n_terms; i++)
            row->term_ms[i] = f.value_ms[i];
    }
    row->client_limited = out.client_limited;
    st_verdict_info v;
    st_capacity_verdict(&s->slo, &f, &v);
    row->verdict = strdup(st_verdict_name(v.verdict));
    row->why = strdup(v.why);
    row->worst_ratio = v.worst_ratio;
    /* The records move to the caller (stored with the run). */
    *recs_out = out.records;
    *nrecs_out = out.n;
    out.records = NULL;
    out.n = 0;
    st_run_result_free(&out);
    return 0;
}

static void free_records(st_record *r, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        st_record_free(&r[i]);
    free(r);
}

/* Warm-up: requests_w requests at a gentle pace, not measured, not stored. 0, or 1 interrupted. */
static int warm_up(sweep *S, engine *E)
{
    const st_spec *s = S->spec;
    uint32_t n = s->warmup_requests;
    if (!n)
        return 0;
    char err[512];
    st_workload w;
    if (make_workload(S, rate_seed(s->workload.seed, -1.0), n, &w, err, sizeof err))
        return 0;
    double K = E->l.time_scale;
    double r = s->rates[0];
    if (!isfinite(r) || r > 4)
        r = 4;
    st_ns *sched = NULL;
    if (make_schedule(s, r * K, 7, w.n, &sched)) {
        st_workload_free(&w);
        return 0;
    }
    rate_ctx R = { .S = S, .slo = &s->slo, .planned = w.n, .time_scale = K, .cfg_name = "warm-up" };
    st_api_kind api = ST_API_COMPLETIONS;
    st_api_from_name(E->l.api, &api);
    st_runner_config rc = { .url = E->l.base_url, .api = (int)api, .stream = 1, .model = E->l.expected_model,
                            .api_key = E->api_key, .work = &w, .schedule = sched, .warmup = w.n,
                            .timeout_s = s->timeouts.request_s / K, .tick = on_tick, .tick_arg = &R,
                            .stop = &R.run_stop };
    st_run_result out;
    memset(&out, 0, sizeof out);
    /* warm-up requests are never early-stopped: on_tick ignores warm-up records */
    st_runner_run(&rc, &out, err, sizeof err);
    int interrupted = R.interrupted;
    st_run_result_free(&out);
    free(sched);
    st_workload_free(&w);
    return interrupted ? 1 : 0;
}

/* ---- one configuration ---- */

static st_verdict verdict_of(const char *v)
{
    if (v && !strcmp(v, "pass"))
        return ST_VERDICT_PASS;
    if (v && !strcmp(v, "fail"))
        return ST_VERDICT_FAIL;
    if (v && !strcmp(v, "skipped"))
        return ST_VERDICT_SKIPPED;
    return ST_VERDICT_ERROR;
}

static st_rate_result result_of(const st_run_row *w)
{
    return (st_rate_result){ .rate = w->rate,
                             .verdict = verdict_of(w->verdict),
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
    /* --resume: a configuration that finished (or failed to start) is kept as it is. */
    if (S->o->resume) {
        st_config_row *rows;
        int nr;
        if (st_store_configs_get(S->store, &rows, &nr) == 0) {
            for (int i = 0; i < nr; i++)
                if (!strcmp(rows[i].name, c->name) && rows[i].status &&
                    (!strcmp(rows[i].status, "done") || !strcmp(rows[i].status, "failed"))) {
                    say(S, "[%d/%d %s] already %s (kept from the previous run)", ci + 1, s->n_configs, c->name,
                        rows[i].status);
                    if (!strcmp(rows[i].status, "failed"))
                        S->res->configs_failed++;
                    st_config_rows_free(rows, nr);
                    return 0;
                }
            st_config_rows_free(rows, nr);
        }
    }
    row.name = strdup(c->name);
    row.idx = ci;
    row.status = strdup("running");
    row.started = st_wall_ns();
    row.startup_s = NAN;
    if (st_store_config_put(S->store, &row)) {
        st_config_row_free(&row);
        return -1;
    }
    st_rate_result rr[MAX_RUNS_PER_CONFIG];
    int n = 0, seq = 0, status = 0;
    engine E;
    memset(&E, 0, sizeof E);
    int engine_up = 0, engine_failed = 0;
    st_search_params sp = { s->rates, s->n_rates, s->search.mode, s->search.tolerance, s->search.request_budget,
                            s->workload.requests_per_rate, s->search.skip_margin };
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
            say(S, "[%d/%d %s] starting the engine", ci + 1, s->n_configs, c->name);
            int es = engine_start(S, c, &E, &row);
            if (es == 1) {
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
            say(S, "[%d/%d %s] ready after %.1f s on port %d", ci + 1, s->n_configs, c->name, row.startup_s, E.l.port);
            if (warm_up(S, &E)) {
                status = 1;
                break;
            }
        }
        if (nx.why[0] && !nx.grid)
            say(S, "[%d/%d %s] %s: rate %s req/s", ci + 1, s->n_configs, c->name, nx.why, rt);
        double idle = wait_idle(S, &E, 60);
        if (idle > 2)
            say(S, "[%d/%d %s] waited %.1f s for the engine to drain the previous run", ci + 1, s->n_configs, c->name,
                idle);
        st_metric_sample *samples = NULL;
        uint32_t ns = 0;
        st_record *recs = NULL;
        uint32_t nrecs = 0;
        st_ns t0 = st_now();
        uint32_t errors = 0;
        int r = run_rate(S, c, &E, nx.rate, &run, &samples, &ns, &recs, &nrecs, &errors);
        double took = st_ns_to_s(st_now() - t0);
        if (r == 1) {
            free(samples);
            status = 1;
            break;
        }
        if (r < 0) {
            /* the run could not start (bad workload...): an error row, and stop this config */
            fill_failure(&row, ST_FAIL_CRASH, run.why, NULL, NULL);
            engine_failed = 1;
            free(run.why);
            free(samples);
            break;
        }
        /* Did the engine die or hang during the run? */
        int died = E.started && !st_proc_alive(&E.proc);
        int hung = 0;
        char detail[600] = "";
        if (!died && (errors > 0 || run.stopped_early) && s->engine.kind != ST_ENGINE_ENDPOINT) {
            /* Requests failed, or the run stopped early: is the engine still answering? */
            st_buf body;
            st_buf_init(&body, 65536);
            int hs;
            char e2[256];
            hung = 1;
            for (int tries = 0; tries < 2 && hung; tries++)
                hung = st_http_get(E.l.host, E.l.port, E.l.health_path, NULL, 5, &hs, &body, e2, sizeof e2) != 0;
            if (hung)
                snprintf(detail, sizeof detail, "/health did not answer after the run (%s)", e2);
            st_buf_free(&body);
        }
        if (died || hung) {
            if (died) {
                char *tail = NULL;
                st_log_tail(E.log_path, LOG_TAIL_BYTES, LOG_TAIL_LINES, &tail);
                st_fail_class fc = st_proc_classify(tail, 1, E.proc.wstatus, 0, detail, sizeof detail);
                free(tail);
                fill_failure(&row, fc == ST_FAIL_NONE ? ST_FAIL_CRASH : fc, detail, E.log_path, E.api_key);
            } else {
                fill_failure(&row, ST_FAIL_HANG, detail, E.log_path, E.api_key);
            }
            redact_row(&row, &E);
            free(run.verdict);
            run.verdict = strdup("error");
            char w2[800];
            snprintf(w2, sizeof w2, "%s (%s)", row.failure_detail, run.why ? run.why : "");
            free(run.why);
            run.why = strdup(w2);
            engine_failed = 1;
        }
        int put = st_store_run_put(S->store, &run, recs, nrecs, samples, ns);
        free_records(recs, nrecs);
        free(samples);
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
        say(S, "[%d/%d %s] rate %s req/s: %s, %u/%u completed, p95 TTFT %s ms, p95 TPOT %s ms, delivered %s "
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
    if (engine_up || E.started || E.l.base_url)
        engine_stop(S, &E);
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
    /* The shared prefix: from the spec's seed, the same for every rate and configuration. */
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
        S.prefix_len = spec->workload.shared_prefix;
        S.base_prefix = malloc(sizeof(uint32_t) * S.prefix_len);
        if (S.base_prefix && pw.n && pw.items[0].input_ids)
            memcpy(S.base_prefix, pw.items[0].input_ids, sizeof(uint32_t) * S.prefix_len);
        st_workload_free(&pw);
    }
    int rc = 0;
    for (int i = 0; i < spec->n_configs; i++) {
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
    free(S.base_prefix);
    if (S.line_open && o->out) {
        fputs("\r\033[K", o->out);
        fflush(o->out);
    }
    return rc;
}
