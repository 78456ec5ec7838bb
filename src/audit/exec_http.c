/* The HTTP executor (audit/executor.h): the engine as a process started through its adapter,
 * driven over HTTP by the open-loop runner while a thread scrapes /metrics. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "audit/executor.h"
#include "audit/figures.h"
#include "core/buf.h"
#include "engine/adapter.h"
#include "load/api.h"
#include "load/agent_run.h"
#include "load/session.h"
#include "load/tokenize.h"
#include "core/secret.h"
#include "core/util.h"
#include "engine/metrics.h"
#include "engine/probe.h"
#include "engine/process.h"

/* The engine facts JSON, a small answer (/version, /health), and a /metrics page. */
#define FACTS_MAX 4096
#define SMALL_BODY_MAX 65536
#define METRICS_BODY_MAX ((size_t)8 << 20)

#define LOG_TAIL_BYTES 16384
#define LOG_TAIL_LINES 40

/* ---- engine ---- */

typedef struct engine {
    st_launch l;
    st_proc proc;
    int started; /* a process of ours runs */
    char log_path[4200];
    char cmdline[8192];
    const char *api_key;
} engine;

/* The executor's state: the spec, its secrets, where logs go, and the engine of the current
 * configuration. */
typedef struct http_exec {
    const st_spec *spec;
    st_secrets secrets; /* the API key and every ${VAR} value (st_spec_secrets) */
    char logdir[4096];
    char tag[64]; /* marks the engines of this audit (st_proc_dir_tag) */
    const char *self_exe;
    volatile sig_atomic_t *stop;
    engine E;
    int active; /* E holds a launch (started or not) */
    /* exact prompt lengths for the current configuration (text APIs): its tokenizer, and -1 once
     * it failed (the lengths then stay estimated) */
    st_tokenizer *tok;
    int tok_state;
} http_exec;
typedef http_exec sweep;

void st_exec_fill_failure(st_config_row *row, st_fail_class c, const char *detail, const char *log_path,
                          const st_secrets *secrets)
{
    free(row->failure_class);
    free(row->failure_detail);
    free(row->log_tail);
    row->failure_class = strdup(st_fail_class_name(c));
    char d[600];
    snprintf(d, sizeof d, "%s%s%s", st_fail_class_text(c), detail && *detail ? ": " : "", detail ? detail : "");
    st_text_sanitize(d, 0); /* a probe's detail quotes the server */
    st_secrets_redact(secrets, d);
    row->failure_detail = strdup(d);
    row->log_tail = NULL;
    if (log_path && st_proc_log_tail(log_path, LOG_TAIL_BYTES, LOG_TAIL_LINES, &row->log_tail) == 0)
        st_secrets_redact(secrets, row->log_tail);
    free(row->status);
    row->status = strdup("failed");
}

/* Facts the engine states about itself: its version (GET /version; llama-server has none and
 * gives its build in GET /props, build_info) and its KV cache and concurrency lines (vLLM's,
 * llama-server's "n_slots = 4, n_ctx_slot = 512"). */
static char *engine_facts(engine *E)
{
    st_buf b;
    st_buf_init(&b, FACTS_MAX);
    st_buf_puts(&b, "{");
    int any = 0;
    st_buf body;
    st_buf_init(&body, SMALL_BODY_MAX);
    int status;
    char err[256];
    if (st_probe_get(E->l.host, E->l.port, E->l.version_path, E->api_key, 2, &status, &body, err, sizeof err) == 0 &&
        status == 200 && body.data) {
        json_t *root = json_loadb(body.data, body.len, 0, NULL);
        const char *ver = json_string_value(json_object_get(root, E->l.version_key));
        if (ver && strlen(ver) < 80) {
            st_buf_puts(&b, "\"engine_version\":");
            st_buf_json_str(&b, ver);
            any = 1;
        }
        json_decref(root);
    }
    st_buf_free(&body);
    char *tail = NULL;
    if (E->started && st_proc_log_tail(E->log_path, 1 << 20, 100000, &tail) == 0) {
        static const char *keys[] = { "GPU KV cache size", "Maximum concurrency", "n_slots =" };
        static const char *names[] = { "kv_cache_line", "max_concurrency_line", "max_concurrency_line" };
        for (int k = 0; k < 3; k++) {
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

/* The engine's environment: the spec's, then the configuration's (which wins), then what the
 * launch gives its secret flags through (st_adapter_secret_env). */
#define ENGINE_ENV_MAX (4 * ST_SPEC_MAX_ITEMS) /* engine.env, the configuration's, secret flags of both */
static int engine_env(const st_spec *s, const st_spec_config *c, const st_launch *l, const char **keys,
                      const char **vals)
{
    int ne = 0;
    for (int i = 0; i < s->engine.env.n && ne < ENGINE_ENV_MAX; i++) {
        int over = 0;
        for (int j = 0; j < c->env.n; j++)
            over |= !strcmp(c->env.key[j], s->engine.env.key[i]);
        if (!over) {
            keys[ne] = s->engine.env.key[i];
            vals[ne++] = s->engine.env.val[i];
        }
    }
    for (int j = 0; j < c->env.n && ne < ENGINE_ENV_MAX; j++) {
        keys[ne] = c->env.key[j];
        vals[ne++] = c->env.val[j];
    }
    for (int j = 0; j < l->env_key.n && ne < ENGINE_ENV_MAX; j++) {
        keys[ne] = l->env_key.v[j];
        vals[ne++] = l->env_val.v[j];
    }
    return ne;
}

/* Appends "--- servetune: ..." to the engine's log (servetune's own lines among the engine's). */
static void log_line(const engine *E, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_line(const engine *E, const char *fmt, ...)
{
    FILE *lf = fopen(E->log_path, "a");
    if (!lf)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("--- servetune: ", lf);
    vfprintf(lf, fmt, ap);
    fputs("\n", lf);
    va_end(ap);
    fclose(lf);
}

/* Starts the engine process (not for an endpoint). 0, or -1 with the row filled. */
static int engine_spawn(sweep *S, const st_spec_config *c, engine *E, st_config_row *row)
{
    const char *keys[ENGINE_ENV_MAX], *vals[ENGINE_ENV_MAX];
    int ne = engine_env(S->spec, c, &E->l, keys, vals);
    log_line(E, "starting %s", E->cmdline);
    /* argv NULL-terminated; its strings stay E->l's (no secret is ever in it: adapter.h) */
    char **argv = calloc((size_t)E->l.argv.n + 1, sizeof(char *));
    if (!argv) {
        st_exec_fill_failure(row, ST_FAIL_EXEC, "out of memory", NULL, NULL);
        return -1;
    }
    for (int i = 0; i < E->l.argv.n; i++)
        argv[i] = E->l.argv.v[i];
    st_proc_opts po = { .argv = argv,
                        .env_key = keys,
                        .env_val = vals,
                        .n_env = ne,
                        .log_path = E->log_path,
                        .redact = &S->secrets,
                        .tag = S->tag[0] ? S->tag : NULL };
    char err[512] = "";
    int rc = st_proc_start(&E->proc, &po, err, sizeof err);
    free(argv);
    if (rc) {
        st_exec_fill_failure(row, ST_FAIL_EXEC, err, E->log_path, &S->secrets);
        return -1;
    }
    E->started = 1;
    return 0;
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
        port = s->engine.port ? s->engine.port : st_proc_port_pick();
        if (port <= 0 || !st_proc_port_free(port)) {
            snprintf(err, sizeof err, "port %d on 127.0.0.1 is already in use; servetune never shares a port", port);
            st_exec_fill_failure(row, ST_FAIL_PORT_TAKEN, err, NULL, NULL);
            return -1;
        }
    }
    if (st_spec_launch(s, c, port, S->self_exe, &E->l, err, sizeof err)) {
        st_exec_fill_failure(row, ST_FAIL_BAD_FLAG, err, NULL, NULL);
        return -1;
    }
    E->l.api_key = E->api_key;
    snprintf(E->log_path, sizeof E->log_path, "%s/%s.log", S->logdir, c->name);
    st_launch_cmdline(&E->l, E->cmdline, sizeof E->cmdline);
    free(row->argv);
    row->argv = strdup(s->engine.kind == ST_ENGINE_ENDPOINT ? s->engine.url : E->cmdline);
    st_ns t0 = st_now();
    if (s->engine.kind != ST_ENGINE_ENDPOINT && engine_spawn(S, c, E, row))
        return -1;
    char detail[ST_PROC_DETAIL_MAX] = "";
    int waited_ms = 0;
    const st_secrets *sec = &S->secrets;
    for (;;) {
        if (*S->stop)
            return 1;
        if (E->started && !st_proc_alive(&E->proc)) {
            char *tail = NULL;
            st_proc_log_tail(E->log_path, LOG_TAIL_BYTES, LOG_TAIL_LINES, &tail);
            st_fail_class fc = st_proc_classify(tail, 1, E->proc.wstatus, 0, detail, sizeof detail);
            free(tail);
            st_exec_fill_failure(row, fc, detail, E->log_path, sec);
            return -1;
        }
        st_probe_result pr = st_adapter_probe(&E->l, 2.0, detail, sizeof detail);
        if (pr == ST_PROBE_READY)
            break;
        if (pr == ST_PROBE_WRONG_SERVER) {
            st_exec_fill_failure(row, ST_FAIL_WRONG_SERVER, detail, E->started ? E->log_path : NULL, sec);
            return -1;
        }
        if (st_ns_to_s(st_now() - t0) > s->timeouts.startup_s) {
            char d2[700];
            snprintf(d2, sizeof d2, "not ready after %.0f s (last probe: %s)", s->timeouts.startup_s, detail);
            st_exec_fill_failure(row, ST_FAIL_TIMEOUT, d2, E->started ? E->log_path : NULL, sec);
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
    st_secrets_redact(sec, row->facts);
    return 0;
}

static void engine_stop(sweep *S, engine *E)
{
    if (E->started) {
        st_proc_stop(&E->proc, S->spec->timeouts.stop_grace_s);
        char d[128];
        st_proc_describe(&E->proc, d, sizeof d);
        log_line(E, "stopped (%s)", d);
        E->started = 0;
    }
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
    st_metrics_sample *s;
    uint32_t n;
    size_t cap;
    int failures, ok;
} scraper;

static void *scrape_main(void *arg)
{
    scraper *sc = arg;
    st_buf body;
    st_buf_init(&body, METRICS_BODY_MAX);
    while (!atomic_load(&sc->stop)) {
        st_ns t = st_now();
        int status;
        char err[256];
        if (st_probe_get(sc->E->l.host, sc->E->l.port, "/metrics", NULL, 2, &status, &body, err, sizeof err) == 0 &&
            status == 200) {
            st_metrics_sample got[ST_METRICS_SCRAPE_MAX];
            int ng = st_metrics_scrape(sc->E->l.metrics_dialect, body.data ? body.data : "", body.len, got,
                                       ST_METRICS_SCRAPE_MAX);
            double ts = st_ns_to_s(t - sc->t0) * sc->time_scale;
            pthread_mutex_lock(&sc->mu);
            sc->ok++;
            for (int i = 0; i < ng; i++) {
                if (st_grow((void **)&sc->s, &sc->cap, (size_t)sc->n + 1, sizeof *sc->s, 256))
                    break;
                got[i].t = ts;
                sc->s[sc->n++] = got[i];
            }
            pthread_mutex_unlock(&sc->mu);
        } else {
            sc->failures++;
        }
        /* once per emulated second (a wall second for a real engine, engine/metrics.h), in
         * small sleeps so stopping is quick */
        int steps = st_metrics_scrape_interval_ms(sc->time_scale) / 50;
        for (int i = 0; i < steps && !atomic_load(&sc->stop); i++) {
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
    st_buf_init(&body, METRICS_BODY_MAX);
    int misses = 0;
    while (st_ns_to_s(st_now() - t0) < max_s && !*S->stop) {
        int status;
        char err[256];
        st_engine_metrics m;
        if (st_probe_get(E->l.host, E->l.port, "/metrics", NULL, 2, &status, &body, err, sizeof err) == 0 &&
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

/* ---- the executor ---- */

static int http_start(st_executor *x, const st_spec_config *c, st_config_row *row)
{
    http_exec *H = x->impl;
    if (H->active)
        engine_stop(H, &H->E);
    H->active = 1;
    int r = engine_start(H, c, &H->E, row);
    x->time_scale = H->E.l.time_scale > 0 ? H->E.l.time_scale : 1;
    return r;
}

static void http_stop(st_executor *x)
{
    http_exec *H = x->impl;
    if (H->active)
        engine_stop(H, &H->E);
    H->active = 0;
    st_tokenizer_free(H->tok);
    H->tok = NULL;
    H->tok_state = 0;
}

/* Text APIs (chat, TGI) send words, not token ids: each prompt is fitted to its token count with
 * the engine's own /tokenize, so the lengths the SLO and the report speak of are the engine's. */
static int http_prepare(st_executor *x, st_workload *w)
{
    http_exec *H = x->impl;
    engine *E = &H->E;
    if (!st_spec_fits_prompts(H->spec) || H->tok_state < 0 || !H->active) /* a text API (chat, TGI) */
        return 0;
    st_api_kind api = E->l.api;
    char err[512], line[700];
    if (!H->tok) {
        H->tok = st_tokenizer_new(E->l.base_url, api, E->l.expected_model, E->api_key, 0, NULL, 30, err, sizeof err);
        if (!H->tok) {
            H->tok_state = -1;
            snprintf(line, sizeof line, "exact prompt lengths off (%.500s): lengths estimated", err);
            log_line(E, "%s", line);
            return 0;
        }
    }
    uint32_t fitted, exact;
    int rc = st_prompt_fit_work(w, H->tok, H->stop, &fitted, &exact, err, sizeof err);
    if (rc == 1)
        return 1;
    if (rc < 0) {
        H->tok_state = -1;
        if (st_tokenizer_missing(H->tok))
            snprintf(line, sizeof line,
                     "exact prompt lengths off: the server has no /tokenize (estimated as one "
                     "token a word)");
        else
            snprintf(line, sizeof line, "exact prompt lengths off after %u prompts: %.500s", fitted, err);
        st_secrets_redact(&H->secrets, line);
        log_line(E, "%s", line);
        return 0;
    }
    H->tok_state = 1;
    snprintf(line, sizeof line,
             "exact prompt lengths: %u of %u prompts of the next run fitted exactly with /tokenize (%u calls so far)",
             exact, fitted, st_tokenizer_calls(H->tok));
    log_line(E, "%s", line);
    return 0;
}

typedef struct http_tick {
    const st_exec_rate *in;
    volatile sig_atomic_t run_stop; /* the runner's stop flag */
    int stopped;
    scraper *sc; /* the samples so far (NULL: none) */
} http_tick;

static void http_on_tick(void *arg, const st_runner_progress *p)
{
    http_tick *t = arg;
    if (t->stopped || !t->in->tick)
        return;
    int stop;
    if (t->sc) {
        pthread_mutex_lock(&t->sc->mu);
        stop = t->in->tick(t->in->tick_arg, p, t->sc->s, t->sc->n);
        pthread_mutex_unlock(&t->sc->mu);
    } else {
        stop = t->in->tick(t->in->tick_arg, p, NULL, 0);
    }
    if (stop) {
        t->stopped = 1;
        t->run_stop = 1;
    }
}

double st_exec_wall_timeout(double timeout_s, double K)
{
    if (!(K > 0))
        return timeout_s;
    double floor = timeout_s < ST_EXEC_WALL_TIMEOUT_MIN_S ? timeout_s : ST_EXEC_WALL_TIMEOUT_MIN_S;
    double t = timeout_s / K;
    return t > floor ? t : floor;
}

/* Sessions' think times into the executor's time (div: divided by K) and back (multiplied). */
static void scale_think(st_workload *w, double K, int div)
{
    uint32_t n = w->n;
    for (uint32_t i = n - w->n_dependent; i < n && K != 1; i++)
        w->items[i].think = div ? (st_ns)((double)w->items[i].think / K) : (st_ns)((double)w->items[i].think * K);
}

/* The runner's configuration of one run at the rate `in` against engine E, on schedule sched. */
static st_runner_config http_runner_config(http_exec *H, const st_exec_rate *in, st_ns *sched, double K, http_tick *T)
{
    engine *E = &H->E;
    st_api_kind api = E->l.api;
    return (st_runner_config){ .url = E->l.base_url,
                               .api = (int)api,
                               .stream = 1,
                               .has_temperature = H->spec->workload.temperature_set,
                               .temperature = H->spec->workload.temperature,
                               .model = E->l.expected_model,
                               .api_key = E->api_key,
                               .secrets = &H->secrets,
                               .work = in->w,
                               .schedule = sched,
                               .warmup = in->warmup,
                               .max_concurrency = in->max_concurrency,
                               .timeout_s = st_exec_wall_timeout(in->timeout_s, K),
                               .tick = http_on_tick,
                               .tick_arg = T,
                               .stop = &T->run_stop,
                               .on_end = !in->w->n_dependent ? NULL
                                         : in->w->n_tasks    ? st_agent_on_end
                                                             : st_session_on_end,
                               .on_end_arg = in->w };
}

/* The run's records into out, in the audit's time; 0, or 1 when the run was interrupted. */
static int http_take_records(const st_exec_rate *in, const http_tick *T, double K, st_run_result *res, st_exec_out *out)
{
    double idle = out->idle_wait_s;
    if (res->interrupted && !T->stopped) {
        st_run_result_free(res);
        st_exec_out_free(out);
        return 1;
    }
    st_audit_scale_records(res->records, res->n, K);
    /* a closed-loop client sends when a slot frees: no schedule to lag, and TTFT runs from the
     * send (as the engine model's closed loop records it, and as vllm bench serve measures it
     * under --max-concurrency) */
    for (uint32_t i = 0; in->closed_loop && i < res->n; i++)
        res->records[i].scheduled = res->records[i].sent; /* never sent: never due (-1) */
    out->records = res->records;
    out->n = res->n;
    res->records = NULL;
    res->n = 0;
    out->stopped = T->stopped;
    out->client_limited = res->client_limited;
    out->idle_wait_s = idle;
    st_run_result_free(res);
    return 0;
}

/* Did the engine die or hang during the run? Its failure into row, out->engine_failed set. */
static void http_check_engine(http_exec *H, st_config_row *row, st_exec_out *out)
{
    engine *E = &H->E;
    uint32_t errors = 0;
    for (uint32_t i = 0; i < out->n; i++)
        if (!out->records[i].warmup && out->records[i].status != ST_REQ_OK && out->records[i].status != ST_REQ_ABORTED)
            errors++;
    int died = E->started && !st_proc_alive(&E->proc);
    int hung = 0;
    char detail[ST_PROC_DETAIL_MAX] = "";
    if (!died && (errors > 0 || out->stopped) && H->spec->engine.kind != ST_ENGINE_ENDPOINT) {
        /* Requests failed, or the run stopped early: is the engine still answering? */
        st_buf body;
        st_buf_init(&body, SMALL_BODY_MAX);
        int hs;
        char e2[256] = "";
        hung = 1;
        for (int tries = 0; tries < 2 && hung; tries++)
            hung = st_probe_get(E->l.host, E->l.port, E->l.health_path, NULL, 5, &hs, &body, e2, sizeof e2) != 0;
        if (hung)
            snprintf(detail, sizeof detail, "/health did not answer after the run (%s)", e2);
        st_buf_free(&body);
    }
    if (died) {
        char *tail = NULL;
        st_proc_log_tail(E->log_path, LOG_TAIL_BYTES, LOG_TAIL_LINES, &tail);
        st_fail_class fc = st_proc_classify(tail, 1, E->proc.wstatus, 0, detail, sizeof detail);
        free(tail);
        st_exec_fill_failure(row, fc == ST_FAIL_NONE ? ST_FAIL_CRASH : fc, detail, E->log_path, &H->secrets);
        out->engine_failed = 1;
    } else if (hung) {
        st_exec_fill_failure(row, ST_FAIL_HANG, detail, E->log_path, &H->secrets);
        out->engine_failed = 1;
    }
}

static int http_run_rate(st_executor *x, const st_exec_rate *in, st_config_row *row, st_exec_out *out, char *err,
                         size_t errlen)
{
    http_exec *H = x->impl;
    engine *E = &H->E;
    memset(out, 0, sizeof *out);
    double K = x->time_scale;
    if (!in->warmup) {
        /* what an early-stopped or overloaded run left behind must not weigh on this one */
        out->idle_wait_s = wait_idle(H, E, 60);
    }
    uint32_t n = in->w->n;
    st_ns *sched = calloc(n ? n : 1, sizeof *sched);
    if (!sched) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (uint32_t i = 0; i < n; i++)
        sched[i] = (st_ns)((double)in->sched[i] / K);
    /* sessions: think times in the executor's time too (given back after the run) */
    scale_think(in->w, K, 1);
    http_tick T = { .in = in };
    st_runner_config rc = http_runner_config(H, in, sched, K, &T);
    scraper sc = { .E = E, .time_scale = K };
    int have_scraper = 0;
    if (!in->warmup) {
        pthread_mutex_init(&sc.mu, NULL);
        sc.t0 = st_now();
        have_scraper = pthread_create(&sc.th, NULL, scrape_main, &sc) == 0;
        T.sc = have_scraper ? &sc : NULL;
    }
    st_run_result res;
    memset(&res, 0, sizeof res);
    int rr = st_runner_run(&rc, &res, err, errlen);
    scale_think(in->w, K, 0);
    if (!in->warmup) {
        if (have_scraper) {
            atomic_store(&sc.stop, 1);
            pthread_join(sc.th, NULL);
        }
        pthread_mutex_destroy(&sc.mu);
    }
    /* scraped times are from the scraper's start; the runner's t0 is a moment later: close enough
     * for a once-a-second timeline */
    out->samples = sc.s;
    out->n_samples = sc.n;
    free(sched);
    if (rr) {
        st_exec_out_free(out);
        return -1;
    }
    if (http_take_records(in, &T, K, &res, out))
        return 1;
    if (in->warmup)
        return 0;
    http_check_engine(H, row, out);
    return 0;
}

static int http_post(st_executor *x, const char *path, const char *body, size_t len, st_buf *answer, int *status,
                     char *err, size_t errlen)
{
    http_exec *H = x->impl;
    engine *E = &H->E;
    if (!H->active) {
        snprintf(err, errlen, "no engine running");
        return -1;
    }
    if (!H->tok) {
        st_api_kind api = E->l.api;
        H->tok = st_tokenizer_new(E->l.base_url, api, E->l.expected_model, E->api_key, 0, NULL,
                                  H->spec->timeouts.request_s > 0 ? H->spec->timeouts.request_s : 30, err, errlen);
        if (!H->tok)
            return -1;
    }
    int rc = st_tokenizer_post(H->tok, path, body, len, answer, status, err, errlen);
    if (rc)
        st_secrets_redact(&H->secrets, err);
    return rc;
}

static void http_free(st_executor *x)
{
    http_stop(x);
    http_exec *H = x->impl;
    st_secrets_free(&H->secrets);
    free(H);
    free(x);
}

static const st_executor_ops http_ops = { "http",    http_start,   http_run_rate, http_stop,
                                          http_free, http_prepare, http_post };

int st_exec_http_new(const st_spec *spec, const char *logdir, const char *self_exe, volatile sig_atomic_t *stop,
                     st_executor **out, char *err, size_t errlen)
{
    *out = NULL;
    st_executor *x = calloc(1, sizeof *x);
    http_exec *H = calloc(1, sizeof *H);
    if (!x || !H) {
        free(x);
        free(H);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    H->spec = spec;
    if (st_spec_secrets(spec, &H->secrets, err, errlen)) {
        free(x);
        free(H);
        return -1;
    }
    snprintf(H->logdir, sizeof H->logdir, "%s", logdir);
    if (st_proc_dir_tag(logdir, H->tag, sizeof H->tag))
        H->tag[0] = '\0';
    H->self_exe = self_exe;
    H->stop = stop;
    x->ops = &http_ops;
    x->stop = stop;
    x->spec = spec;
    x->time_scale = 1;
    x->impl = H;
    *out = x;
    return 0;
}

void st_executor_free(st_executor *x)
{
    if (x)
        x->ops->free(x);
}

void st_exec_out_free(st_exec_out *out)
{
    st_records_free(out->records, out->n);
    free(out->samples);
    out->records = NULL;
    out->samples = NULL;
    out->n = out->n_samples = 0;
}
