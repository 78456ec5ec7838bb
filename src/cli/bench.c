/* servetune bench: drive a running endpoint with an open-loop load and measure it.
 *
 * cmd_bench reads the options (bench_args), checks them into a plan (plan_from_args), asks the
 * server for its model when none was given (default_model), builds the workload and its arrival
 * schedule (build_workload), runs it (load/runner.h), and writes what it measured
 * (write_results): the table, --json, --csv. Everything the run owns lives in one bench struct
 * freed at one exit. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/opts.h"
#include "core/secret.h"
#include "core/util.h"
#include "load/api.h"
#include "load/arrival.h"
#include "load/output.h"
#include "load/runner.h"
#include "load/stats.h"
#include "load/workload.h"
#include "net/http1.h"
#include "net/url.h"

/* The model list a server answers (GET /v1/models). */
#define MODELS_BODY_MAX ((size_t)4 << 20)
#define BENCH_OPTS_MAX 40

/* The only global: what the signal handler sets. */
static volatile sig_atomic_t bench_stop;

static void on_signal(int sig)
{
    (void)sig;
    bench_stop = 1;
}

/* The options as given. */
typedef struct bench_args {
    const char *url, *api_name, *model, *key_env, *trace, *arrival_name, *json_path, *csv_path, *ca_file;
    st_strlist headers;
    long input_tokens, output_tokens, prefix_tokens, num_requests, warmup, max_conc, seed;
    double range_ratio, rate, trace_rate, burstiness, timeout, max_lag_ms, slo_ttft, slo_tpot, slo_e2e, spin_us;
    int insecure, quiet, no_stream;
} bench_args;

/* Everything one bench owns, freed by bench_free. */
typedef struct bench {
    bench_args a;
    int api;            /* st_api_kind or ST_RUNNER_API_RAW */
    int rate_given;     /* --rate was given (else inf, or the trace's times) */
    st_arrival arr;     /* the arrival process when the trace's own times are not used */
    const char *key;    /* the API key (from --api-key-env), or NULL */
    st_secrets secrets; /* the key and secret-looking header values: never printed or written */
    char *model_owned;  /* the model GET /v1/models named */
    st_workload work;
    st_ns *sched;
    int use_trace_times;
    st_run_result res;
    int have_res;
} bench;

static void bench_opts(bench_args *a, st_opt *o)
{
    const st_opt t[] = {
        { "url", 0, ST_OPT_STR, &a->url, "URL", "server base URL, http:// or https:// (required)", 0, 0, 0 },
        { "api", 0, ST_OPT_STR, &a->api_name, "API",
          "completions|chat|tgi|llamacpp|sglang|raw (default completions); raw = plain GET of the URL", 0, 0, 0 },
        { "model", 0, ST_OPT_STR, &a->model, "NAME", "model name (default: the first id of GET /v1/models)", 0, 0, 0 },
        { "api-key-env", 0, ST_OPT_STR, &a->key_env, "VAR",
          "read the API key from this environment variable (never printed or written)", 0, 0, 0 },
        { "header", 'H', ST_OPT_LIST, &a->headers, "'N: V'",
          "extra request header (repeatable; a credential-like one's value is never printed or written)", 0, 0, 0 },
        { "input-tokens", 0, ST_OPT_LONG, &a->input_tokens, "N",
          "synthetic prompt length, shared prefix included (default 1024)", 1, ST_WORKLOAD_MAX_TOKENS, 0 },
        { "output-tokens", 0, ST_OPT_LONG, &a->output_tokens, "N", "synthetic output length (default 128)", 1,
          ST_WORKLOAD_MAX_TOKENS, 0 },
        { "range-ratio", 0, ST_OPT_DOUBLE, &a->range_ratio, "R", "lengths uniform in [L(1-R), L(1+R)] (default 0)", 0,
          0.999999, 0 },
        { "prefix-tokens", 0, ST_OPT_LONG, &a->prefix_tokens, "N",
          "shared prefix length common to every request (default 0)", 0, ST_WORKLOAD_MAX_TOKENS, 0 },
        { "num-requests", 'n', ST_OPT_LONG, &a->num_requests, "N",
          "measured requests (default 100; warm-ups come on top)", 1, ST_WORKLOAD_MAX_REQUESTS, 0 },
        { "seed", 0, ST_OPT_LONG, &a->seed, "N", "seed for the workload and the arrivals (default 0)", 0, 9.2e18, 0 },
        { "trace", 0, ST_OPT_STR, &a->trace, "FILE",
          "JSONL trace instead of the synthetic workload (docs/trace-format.md)", 0, 0, 0 },
        { "trace-rate", 0, ST_OPT_RATE, &a->trace_rate, "R", "re-time the trace to R req/s keeping its burstiness", 0,
          0, 0 },
        { "rate", 'r', ST_OPT_RATE, &a->rate, "R",
          "arrival rate in req/s or inf (default inf; with --trace: replaces its times)", 0, 0, 0 },
        { "arrival", 0, ST_OPT_STR, &a->arrival_name, "KIND", "poisson|constant|gamma (default poisson)", 0, 0, 0 },
        { "burstiness", 0, ST_OPT_DOUBLE, &a->burstiness, "B", "gamma shape: <1 burstier, >1 smoother (default 1)",
          1e-6, 1e6, 0 },
        { "max-concurrency", 0, ST_OPT_LONG, &a->max_conc, "N",
          "at most N requests in flight; waiting counts in TTFT (default unbounded)", 0, 10000000, 0 },
        { "warmup", 0, ST_OPT_LONG, &a->warmup, "N",
          "warm-up requests sent first and excluded from the figures (default 0)", 0, ST_WORKLOAD_MAX_REQUESTS, 0 },
        { "timeout", 0, ST_OPT_DURATION, &a->timeout, "T", "per-request timeout, e.g. 30, 500ms, 2m (default 300)", 0,
          0, 0 },
        { "slo-ttft", 0, ST_OPT_DOUBLE, &a->slo_ttft, "MS", "goodput term: TTFT at most MS", 0, 1e9, 0 },
        { "slo-tpot", 0, ST_OPT_DOUBLE, &a->slo_tpot, "MS", "goodput term: TPOT at most MS", 0, 1e9, 0 },
        { "slo-e2e", 0, ST_OPT_DOUBLE, &a->slo_e2e, "MS", "goodput term: end-to-end latency at most MS", 0, 1e9, 0 },
        { "max-lag", 0, ST_OPT_DOUBLE, &a->max_lag_ms, "MS",
          "self-check threshold for dispatch lag / loop delay p99 (default 10)", 1e-3, 1e6, 0 },
        { "spin-us", 0, ST_OPT_DOUBLE, &a->spin_us, "US",
          "busy-poll this long before each timer (send times, the 5 ms self-check probe): sub-10us send precision; "
          "5000 or more never sleeps, so read timestamps exclude an idle CPU's wake-up (default 0: sleep in "
          "epoll_pwait2)",
          0, 1e6, 0 },
        { "no-stream", 0, ST_OPT_FLAG, &a->no_stream, NULL, "non-streaming requests (TTFT = E2E)", 0, 0, 0 },
        { "json", 0, ST_OPT_STR, &a->json_path, "FILE", "write the results as JSON (docs/bench-json.md)", 0, 0, 0 },
        { "csv", 0, ST_OPT_STR, &a->csv_path, "FILE", "write one CSV row per request", 0, 0, 0 },
        { "insecure", 0, ST_OPT_FLAG, &a->insecure, NULL, "do not verify the TLS certificate", 0, 0, 0 },
        { "ca-file", 0, ST_OPT_STR, &a->ca_file, "FILE", "extra CA certificates (PEM) for https", 0, 0, 0 },
        { "quiet", 'q', ST_OPT_FLAG, &a->quiet, NULL, "no progress line and no table", 0, 0, 0 },
        { 0 },
    };
    _Static_assert(sizeof t / sizeof *t <= BENCH_OPTS_MAX, "BENCH_OPTS_MAX too small");
    memcpy(o, t, sizeof t);
}

static void bench_defaults(bench_args *a)
{
    memset(a, 0, sizeof *a);
    a->api_name = "completions";
    a->arrival_name = "poisson";
    a->input_tokens = 1024;
    a->output_tokens = 128;
    a->num_requests = 100;
    a->rate = NAN;
    a->burstiness = 1;
    a->timeout = 300;
    a->max_lag_ms = 10;
}

static void bench_help(const st_opt *opts)
{
    printf("usage: servetune bench --url URL [OPTIONS]\n\n"
           "Drive a running LLM endpoint with an open-loop streaming load and measure TTFT, TPOT,\n"
           "ITL and throughput (docs/bench.md). The API key and credential-like headers never appear in\n"
           "the output, the JSON or the CSV, even when the server echoes them. Exit status: 0 ok, 1 some\n"
           "requests failed or a file could not be written, 2 usage, 3 client-limited (the tool could not\n"
           "keep the schedule), 4 interrupted.\n\nOptions:\n");
    st_opts_usage(stdout, opts);
}

/* "servetune bench: MSG" with every secret removed (a server may have echoed one). */
static void bench_error(const bench *B, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bench_error(const bench *B, const char *fmt, ...)
{
    char m[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    st_secrets_redact(&B->secrets, m);
    fprintf(stderr, "servetune bench: %s\n", m);
}

/* Checks the options into B (API, arrivals, key, secrets). ST_EXIT_OK, or the usage error. */
static int plan_from_args(bench *B)
{
    bench_args *a = &B->a;
    char err[512];
    if (!a->url)
        return st_cli_usage_error("bench", "--url is required");
    st_api_kind k;
    if (!strcmp(a->api_name, "raw"))
        B->api = ST_RUNNER_API_RAW;
    else if (st_api_from_name(a->api_name, &k) == 0)
        B->api = (int)k;
    else
        return st_cli_usage_error("bench", "--api: expected completions, chat, tgi, llamacpp, sglang or raw");
    B->rate_given = !isnan(a->rate);
    if (!B->rate_given)
        a->rate = INFINITY;
    B->arr = (st_arrival){ ST_ARR_POISSON, a->rate, a->burstiness, (uint64_t)a->seed };
    if (st_arrival_kind_from_name(a->arrival_name, &B->arr.kind) < 0 || B->arr.kind == ST_ARR_INF)
        return st_cli_usage_error("bench",
                                  "--arrival: expected poisson, constant or gamma (use --rate inf for all at once)");
    if (isinf(a->rate))
        B->arr.kind = ST_ARR_INF;
    if (a->prefix_tokens > a->input_tokens)
        return st_cli_usage_error("bench", "--prefix-tokens must not exceed --input-tokens");
    if (a->trace_rate > 0 && !a->trace)
        return st_cli_usage_error("bench", "--trace-rate needs --trace");
    for (int i = 0; i < a->headers.n; i++) {
        const char *h = a->headers.v[i];
        if (!st_http_header_line_valid(h))
            return st_cli_usage_error("bench", "--header: expected 'Name: value' (a token name, no line breaks)");
        char name[128];
        size_t nl = strcspn(h, ":");
        snprintf(name, sizeof name, "%.*s", (int)(nl < sizeof name ? nl : sizeof name - 1), h);
        const char *v = h + nl + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        /* "Authorization: Bearer KEY": the whole value, and its last word alone */
        if (st_secret_name(name) && *v) {
            st_secrets_add(&B->secrets, v);
            const char *last = strrchr(v, ' ');
            if (last)
                st_secrets_add(&B->secrets, last + 1);
        }
    }
    if (a->key_env) {
        B->key = getenv(a->key_env);
        if (!B->key || !*B->key) {
            char m[200];
            snprintf(m, sizeof m, "--api-key-env: the environment variable %.100s is not set", a->key_env);
            return st_cli_usage_error("bench", m);
        }
        if (st_secrets_add(&B->secrets, B->key)) {
            snprintf(err, sizeof err, "--api-key-env: the key in %.100s is shorter than %d characters", a->key_env,
                     ST_SECRET_MIN_LEN);
            return st_cli_usage_error("bench", err);
        }
    }
    st_url chk;
    if (st_url_parse(a->url, &chk, err, sizeof err) < 0)
        return st_cli_usage_error("bench", err);
    return ST_EXIT_OK;
}

/* GET <base>/v1/models and take the first id (control characters removed: it is shown). */
static int default_model(bench *B, double timeout, char *err, size_t errlen)
{
    const char *url = B->a.url;
    char murl[4096];
    size_t ul = strlen(url);
    while (ul > 0 && url[ul - 1] == '/')
        ul--;
    if (ul > 0 && ul + 12 < sizeof murl && ul >= 3 && !strncmp(url + ul - 3, "/v1", 3))
        snprintf(murl, sizeof murl, "%.*s/models", (int)ul, url);
    else
        snprintf(murl, sizeof murl, "%.*s/v1/models", (int)ul, url);
    st_buf body;
    st_buf_init(&body, MODELS_BODY_MAX);
    int status = 0;
    int rc = st_runner_fetch(murl, B->key, B->a.headers.v, B->a.headers.n, B->a.insecure, timeout, &body, &status, err,
                             errlen);
    if (rc == 0) {
        json_error_t je;
        json_t *root = json_loadb(body.data ? body.data : "", body.len, 0, &je);
        json_t *id = root ? json_object_get(json_array_get(json_object_get(root, "data"), 0), "id") : NULL;
        if (json_is_string(id)) {
            B->model_owned = strdup(json_string_value(id));
            if (B->model_owned)
                st_text_sanitize(B->model_owned, 0);
            B->a.model = B->model_owned;
        } else {
            snprintf(err, errlen, "GET %.200s: no data[0].id in the answer", murl);
            rc = -1;
        }
        json_decref(root);
    }
    st_buf_free(&body);
    return rc;
}

/* The requests and their send times: synthetic, a trace (its own times unless --rate), or raw
 * (a count of plain GETs). ST_EXIT_OK, or an exit status after saying why. */
static int build_workload(bench *B)
{
    bench_args *a = &B->a;
    char err[512];
    uint32_t nwarm = (uint32_t)a->warmup;
    if (B->api == ST_RUNNER_API_RAW) {
        B->work.n = (uint32_t)(a->num_requests + a->warmup);
    } else if (a->trace) {
        if (st_workload_trace_load(a->trace, &B->work, err, sizeof err) < 0) {
            fprintf(stderr, "servetune bench: %s\n", err);
            return ST_EXIT_USAGE;
        }
        if (nwarm >= B->work.n)
            return st_cli_usage_error("bench", "--warmup must be smaller than the number of trace requests");
        /* the trace's own times (re-timed with --trace-rate) unless --rate was given */
        int has_times = B->work.items[0].arrival >= 0;
        if (a->trace_rate > 0 && !has_times)
            return st_cli_usage_error("bench", "--trace-rate: the trace has no timestamps to re-time (use --rate)");
        if (a->trace_rate > 0 && B->rate_given)
            return st_cli_usage_error("bench", "--trace-rate and --rate exclude each other");
        B->use_trace_times = has_times && !B->rate_given;
    } else {
        st_synth_params sp = { (uint32_t)a->input_tokens,
                               (uint32_t)a->output_tokens,
                               a->range_ratio,
                               (uint32_t)a->prefix_tokens,
                               (uint32_t)(a->num_requests + a->warmup),
                               (uint64_t)a->seed,
                               0 };
        if (st_workload_synthetic(&sp, &B->work, err, sizeof err) < 0)
            return st_cli_usage_error("bench", err);
    }
    B->sched = calloc(B->work.n ? B->work.n : 1, sizeof *B->sched);
    if (!B->sched) {
        fprintf(stderr, "servetune bench: out of memory\n");
        return ST_EXIT_FAIL;
    }
    if (B->use_trace_times) {
        for (uint32_t i = 0; i < B->work.n; i++)
            B->sched[i] = B->work.items[i].arrival;
        if (a->trace_rate > 0 && st_arrival_retime(B->sched, B->work.n, a->trace_rate) < 0)
            return st_cli_usage_error("bench", "--trace-rate: the trace cannot be re-timed (no time span)");
    } else if (st_arrival_schedule(&B->arr, B->work.n, B->sched) < 0) {
        return st_cli_usage_error("bench", "bad arrival parameters");
    }
    return ST_EXIT_OK;
}

typedef struct progress_ctx {
    int tty;
    int shown;
} progress_ctx;

static void on_progress(void *arg, const st_runner_progress *p)
{
    progress_ctx *pc = arg;
    if (!pc->tty || p->elapsed < 3 * ST_NS_PER_S)
        return;
    fprintf(stderr, "\r  %6.1f s  sent %u/%u  done %u  failed %u  in flight %u  waiting %u  tokens %llu   ",
            st_ns_to_s(p->elapsed), p->sent, p->total, p->completed, p->failed, p->in_flight, p->waiting,
            (unsigned long long)p->output_tokens);
    pc->shown = 1;
}

/* Runs the schedule (signals stop it; descriptors raised to the hard limit). */
static int run(bench *B)
{
    bench_args *a = &B->a;
    st_runner_config rc = { 0 };
    rc.url = a->url;
    rc.api = B->api;
    rc.stream = !a->no_stream;
    rc.model = a->model;
    rc.api_key = B->key;
    rc.secrets = &B->secrets;
    rc.headers = a->headers.v;
    rc.nheaders = a->headers.n;
    rc.work = &B->work;
    rc.schedule = B->sched;
    rc.warmup = (uint32_t)a->warmup;
    rc.max_concurrency = (uint32_t)a->max_conc;
    rc.timeout_s = a->timeout;
    rc.insecure = a->insecure;
    rc.ca_file = a->ca_file;
    rc.max_lag_ms = a->max_lag_ms;
    rc.spin_ns = a->spin_us > 0 ? (st_ns)(a->spin_us * 1e3) : 0;
    progress_ctx pc = { !a->quiet && isatty(STDERR_FILENO), 0 };
    rc.progress = on_progress;
    rc.progress_arg = &pc;
    rc.stop = &bench_stop;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    /* one descriptor per open stream: take what the hard limit allows */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    char err[512];
    int r = st_runner_run(&rc, &B->res, err, sizeof err);
    if (pc.shown)
        fputc('\n', stderr);
    if (r < 0) {
        bench_error(B, "%s", err);
        return ST_EXIT_FAIL;
    }
    B->have_res = 1;
    return ST_EXIT_OK;
}

static void fill_info(const bench *B, const st_summary_opts *so, st_bench_info *info)
{
    const bench_args *a = &B->a;
    const st_run_result *res = &B->res;
    uint32_t nwarm = (uint32_t)a->warmup;
    memset(info, 0, sizeof *info);
    info->url = a->url;
    info->api = a->api_name;
    info->model = a->model;
    info->stream = !a->no_stream && B->api != ST_RUNNER_API_RAW;
    info->workload = B->api == ST_RUNNER_API_RAW ? "raw" : a->trace ? "trace" : "synthetic";
    info->trace_path = a->trace;
    if (!a->trace) {
        info->input_len = (uint32_t)a->input_tokens;
        info->output_len = (uint32_t)a->output_tokens;
        info->prefix_len = (uint32_t)a->prefix_tokens;
        info->range_ratio = a->range_ratio;
    }
    info->seed = (uint64_t)a->seed;
    info->num_requests = B->work.n - nwarm;
    info->warmup = nwarm;
    info->arrival = B->use_trace_times ? "trace" : isinf(a->rate) ? "inf" : a->arrival_name;
    info->rate = B->use_trace_times ? (a->trace_rate > 0 ? a->trace_rate : NAN) : a->rate;
    info->burstiness = a->burstiness;
    info->max_concurrency = (uint32_t)a->max_conc;
    info->timeout_s = a->timeout;
    info->opts = *so;
    info->max_lag_ms = res->max_lag_ms;
    info->dispatch_lag = &res->dispatch_lag;
    info->loop_delay = &res->loop_delay;
    info->client_limited = res->client_limited; /* the runner's self-check (docs/bench.md) */
    info->limited_reason = res->client_limited ? res->limited_reason : NULL;
    info->interrupted = res->interrupted;
    info->connections_opened = res->connections_opened;
    info->retries = res->retries;
    info->max_in_flight = res->max_in_flight;
    info->started_wall_ns = res->t0_wall;
    info->t0_mono_ns = res->t0_mono;
}

/* Writes one result file with writer; says why it could not (errno's text: "No space left on
 * device", not a bare "cannot write"). 0 or -1. */
static int write_file(const char *path,
                      int (*json)(FILE *, const st_bench_info *, const st_summary *, const st_record *, uint32_t),
                      int (*csv)(FILE *, const st_record *, uint32_t), const bench *B, const st_bench_info *info,
                      const st_summary *sum)
{
    FILE *f = fopen(path, "w");
    int e = f ? 0 : errno;
    if (f) {
        int rc = json ? json(f, info, sum, B->res.records, B->res.n) : csv(f, B->res.records, B->res.n);
        if (rc < 0 || fflush(f) != 0 || ferror(f))
            e = errno ? errno : EIO;
        if (fclose(f) != 0 && !e)
            e = errno ? errno : EIO;
    }
    if (!e)
        return 0;
    fprintf(stderr, "servetune bench: cannot write %s: %s\n", path, strerror(e));
    return -1;
}

/* The table, --json and --csv; the exit status the run earned. */
static int write_results(bench *B)
{
    bench_args *a = &B->a;
    st_summary_opts so = { { a->slo_ttft / 1e3, a->slo_tpot / 1e3, a->slo_e2e / 1e3 }, 0 };
    st_summary sum;
    st_summary_compute(B->res.records, B->res.n, &so, &sum);
    st_bench_info info;
    fill_info(B, &so, &info);
    int status = ST_EXIT_OK;
    errno = 0;
    if (a->json_path && write_file(a->json_path, st_output_json_write, NULL, B, &info, &sum))
        status = ST_EXIT_FAIL;
    errno = 0;
    if (a->csv_path && write_file(a->csv_path, NULL, st_output_csv, B, &info, &sum))
        status = ST_EXIT_FAIL;
    if (!a->quiet) {
        st_output_table(stdout, &info, &sum);
        if (!B->res.client_limited && strncmp(B->res.limited_reason, "ok", 2) != 0)
            printf("%-30s%s\n", "Self-check note:", B->res.limited_reason);
    }
    if (sum.failed > 0)
        status = ST_EXIT_FAIL;
    if (st_output_client_limited(&info, &sum))
        status = ST_EXIT_CLIENT_LIMITED;
    if (B->res.interrupted)
        status = ST_EXIT_INTERRUPTED;
    return status;
}

static void bench_free(bench *B)
{
    if (B->have_res)
        st_run_result_free(&B->res);
    free(B->sched);
    if (!B->work.items)
        B->work.n = 0; /* raw mode: a count without items */
    st_workload_free(&B->work);
    free(B->model_owned);
    st_secrets_free(&B->secrets);
}

int cmd_bench(int argc, char **argv)
{
    bench B;
    memset(&B, 0, sizeof B);
    bench_defaults(&B.a);
    st_opt opts[BENCH_OPTS_MAX];
    bench_opts(&B.a, opts);
    st_opts_result pr;
    char err[512];
    int rc = ST_EXIT_OK;
    if (st_opts_parse(opts, argc - 1, argv + 1, 0, &pr, err, sizeof err) < 0) {
        rc = st_cli_usage_error("bench", err);
        goto out;
    }
    if (pr.help) {
        bench_help(opts);
        goto out;
    }
    if (pr.npos > 0) {
        rc = st_cli_usage_error("bench", "unexpected positional argument");
        goto out;
    }
    if ((rc = plan_from_args(&B)) != ST_EXIT_OK)
        goto out;
    if (!B.a.model && (B.api == ST_API_COMPLETIONS || B.api == ST_API_CHAT) &&
        default_model(&B, B.a.timeout < 30 ? B.a.timeout : 30, err, sizeof err) < 0) {
        bench_error(&B, "cannot find the model (give --model): %s", err);
        rc = ST_EXIT_FAIL;
        goto out;
    }
    if ((rc = build_workload(&B)) != ST_EXIT_OK || (rc = run(&B)) != ST_EXIT_OK)
        goto out;
    rc = write_results(&B);
out:
    bench_free(&B);
    st_opts_result_free(&pr);
    return rc;
}
