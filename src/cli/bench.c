/* servetune bench: drive a running endpoint with an open-loop load and measure it. */
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/opts.h"
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

/* The only global: what the signal handler sets. */
static volatile sig_atomic_t bench_stop;

static void on_signal(int sig)
{
    (void)sig;
    bench_stop = 1;
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

/* GET <base>/v1/models and take the first id. */
static int default_model(const char *url, const char *key, const char *const *hdrs, int nh, int insecure,
                         double timeout, char **out, char *err, size_t errlen)
{
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
    int rc = st_runner_fetch(murl, key, hdrs, nh, insecure, timeout, &body, &status, err, errlen);
    if (rc == 0) {
        json_error_t je;
        json_t *root = json_loadb(body.data ? body.data : "", body.len, 0, &je);
        json_t *id = root ? json_object_get(json_array_get(json_object_get(root, "data"), 0), "id") : NULL;
        if (json_is_string(id)) {
            *out = strdup(json_string_value(id));
        } else {
            snprintf(err, errlen, "GET %.200s: no data[0].id in the answer", murl);
            rc = -1;
        }
        json_decref(root);
    }
    st_buf_free(&body);
    return rc;
}

int cmd_bench(int argc, char **argv)
{
    const char *url = NULL, *api_name = "completions", *model = NULL, *key_env = NULL, *trace = NULL;
    const char *arrival_name = "poisson", *json_path = NULL, *csv_path = NULL, *ca_file = NULL;
    st_strlist headers = { 0 };
    long input_tokens = 1024, output_tokens = 128, prefix_tokens = 0, num_requests = 100, warmup = 0, max_conc = 0;
    double range_ratio = 0, rate = NAN, trace_rate = 0, burstiness = 1, timeout = 300, max_lag_ms = 10;
    double slo_ttft = 0, slo_tpot = 0, slo_e2e = 0;
    long seed = 0;
    int insecure = 0, quiet = 0, no_stream = 0;
    double spin_us = 0;
    const st_opt opts[] = {
        { "url", 0, ST_OPT_STR, &url, "URL", "server base URL, http:// or https:// (required)", 0, 0, 0 },
        { "api", 0, ST_OPT_STR, &api_name, "API",
          "completions|chat|tgi|llamacpp|sglang|raw (default completions); raw = plain GET of the URL", 0, 0, 0 },
        { "model", 0, ST_OPT_STR, &model, "NAME", "model name (default: the first id of GET /v1/models)", 0, 0, 0 },
        { "api-key-env", 0, ST_OPT_STR, &key_env, "VAR",
          "read the API key from this environment variable (never printed or written)", 0, 0, 0 },
        { "header", 'H', ST_OPT_LIST, &headers, "'N: V'", "extra request header (repeatable)", 0, 0, 0 },
        { "input-tokens", 0, ST_OPT_LONG, &input_tokens, "N",
          "synthetic prompt length, shared prefix included (default 1024)", 1, 2097152, 0 },
        { "output-tokens", 0, ST_OPT_LONG, &output_tokens, "N", "synthetic output length (default 128)", 1, 2097152,
          0 },
        { "range-ratio", 0, ST_OPT_DOUBLE, &range_ratio, "R", "lengths uniform in [L(1-R), L(1+R)] (default 0)", 0,
          0.999999, 0 },
        { "prefix-tokens", 0, ST_OPT_LONG, &prefix_tokens, "N",
          "shared prefix length common to every request (default 0)", 0, 2097152, 0 },
        { "num-requests", 'n', ST_OPT_LONG, &num_requests, "N", "measured requests (default 100; warm-ups come on top)",
          1, 10000000, 0 },
        { "seed", 0, ST_OPT_LONG, &seed, "N", "seed for the workload and the arrivals (default 0)", 0, 9.2e18, 0 },
        { "trace", 0, ST_OPT_STR, &trace, "FILE",
          "JSONL trace instead of the synthetic workload (docs/trace-format.md)", 0, 0, 0 },
        { "trace-rate", 0, ST_OPT_RATE, &trace_rate, "R", "re-time the trace to R req/s keeping its burstiness", 0, 0,
          0 },
        { "rate", 'r', ST_OPT_RATE, &rate, "R",
          "arrival rate in req/s or inf (default inf; with --trace: replaces its times)", 0, 0, 0 },
        { "arrival", 0, ST_OPT_STR, &arrival_name, "KIND", "poisson|constant|gamma (default poisson)", 0, 0, 0 },
        { "burstiness", 0, ST_OPT_DOUBLE, &burstiness, "B", "gamma shape: <1 burstier, >1 smoother (default 1)", 1e-6,
          1e6, 0 },
        { "max-concurrency", 0, ST_OPT_LONG, &max_conc, "N",
          "at most N requests in flight; waiting counts in TTFT (default unbounded)", 0, 10000000, 0 },
        { "warmup", 0, ST_OPT_LONG, &warmup, "N",
          "warm-up requests sent first and excluded from the figures (default 0)", 0, 10000000, 0 },
        { "timeout", 0, ST_OPT_DURATION, &timeout, "T", "per-request timeout, e.g. 30, 500ms, 2m (default 300)", 0, 0,
          0 },
        { "slo-ttft", 0, ST_OPT_DOUBLE, &slo_ttft, "MS", "goodput term: TTFT at most MS", 0, 1e9, 0 },
        { "slo-tpot", 0, ST_OPT_DOUBLE, &slo_tpot, "MS", "goodput term: TPOT at most MS", 0, 1e9, 0 },
        { "slo-e2e", 0, ST_OPT_DOUBLE, &slo_e2e, "MS", "goodput term: end-to-end latency at most MS", 0, 1e9, 0 },
        { "max-lag", 0, ST_OPT_DOUBLE, &max_lag_ms, "MS",
          "self-check threshold for dispatch lag / loop delay p99 (default 10)", 1e-3, 1e6, 0 },
        { "spin-us", 0, ST_OPT_DOUBLE, &spin_us, "US",
          "busy-poll this long before each timer (send times, the 5 ms self-check probe): sub-10us send precision; "
          "5000 or more never sleeps, so read timestamps exclude an idle CPU's wake-up (default 0: sleep in "
          "epoll_pwait2)",
          0, 1e6, 0 },
        { "no-stream", 0, ST_OPT_FLAG, &no_stream, NULL, "non-streaming requests (TTFT = E2E)", 0, 0, 0 },
        { "json", 0, ST_OPT_STR, &json_path, "FILE", "write the results as JSON (docs/bench-json.md)", 0, 0, 0 },
        { "csv", 0, ST_OPT_STR, &csv_path, "FILE", "write one CSV row per request", 0, 0, 0 },
        { "insecure", 0, ST_OPT_FLAG, &insecure, NULL, "do not verify the TLS certificate", 0, 0, 0 },
        { "ca-file", 0, ST_OPT_STR, &ca_file, "FILE", "extra CA certificates (PEM) for https", 0, 0, 0 },
        { "quiet", 'q', ST_OPT_FLAG, &quiet, NULL, "no progress line and no table", 0, 0, 0 },
        { 0 },
    };
    st_opts_result pr;
    char err[512];
    if (st_opts_parse(opts, argc - 1, argv + 1, 0, &pr, err, sizeof err) < 0) {
        st_opts_result_free(&pr);
        return st_cli_usage_error("bench", err);
    }
    if (pr.help) {
        printf("usage: servetune bench --url URL [OPTIONS]\n\n"
               "Drive a running LLM endpoint with an open-loop streaming load and measure TTFT, TPOT,\n"
               "ITL and throughput (docs/bench.md). Exit status: 0 ok, 1 some requests failed,\n"
               "2 usage, 3 client-limited (the tool could not keep the schedule), 4 interrupted.\n\nOptions:\n");
        st_opts_usage(stdout, opts);
        st_opts_result_free(&pr);
        return ST_EXIT_OK;
    }
    int npos = pr.npos;
    st_opts_result_free(&pr);
    if (npos > 0)
        return st_cli_usage_error("bench", "unexpected positional argument");
    if (!url)
        return st_cli_usage_error("bench", "--url is required");
    int api;
    st_api_kind k;
    if (!strcmp(api_name, "raw"))
        api = ST_RUNNER_API_RAW;
    else if (st_api_from_name(api_name, &k) == 0)
        api = (int)k;
    else
        return st_cli_usage_error("bench", "--api: expected completions, chat, tgi, llamacpp, sglang or raw");
    int rate_given = !isnan(rate);
    if (!rate_given)
        rate = INFINITY;
    st_arrival arr = { ST_ARR_POISSON, rate, burstiness, (uint64_t)seed };
    if (st_arrival_kind_from_name(arrival_name, &arr.kind) < 0 || arr.kind == ST_ARR_INF)
        return st_cli_usage_error("bench",
                                  "--arrival: expected poisson, constant or gamma (use --rate inf for all at once)");
    if (isinf(rate))
        arr.kind = ST_ARR_INF;
    if (prefix_tokens > input_tokens)
        return st_cli_usage_error("bench", "--prefix-tokens must not exceed --input-tokens");
    if (trace_rate > 0 && !trace)
        return st_cli_usage_error("bench", "--trace-rate needs --trace");
    for (int i = 0; i < headers.n; i++)
        if (!st_http_header_line_valid(headers.v[i]))
            return st_cli_usage_error("bench", "--header: expected 'Name: value' (a token name, no line breaks)");
    const char *key = NULL;
    if (key_env) {
        key = getenv(key_env);
        if (!key || !*key) {
            char m[200];
            snprintf(m, sizeof m, "--api-key-env: the environment variable %.100s is not set", key_env);
            return st_cli_usage_error("bench", m);
        }
    }
    st_url chk;
    if (st_url_parse(url, &chk, err, sizeof err) < 0)
        return st_cli_usage_error("bench", err);

    char *model_owned = NULL;
    if (!model && (api == ST_API_COMPLETIONS || api == ST_API_CHAT)) {
        if (default_model(url, key, headers.v, headers.n, insecure, timeout < 30 ? timeout : 30, &model_owned, err,
                          sizeof err) < 0) {
            fprintf(stderr, "servetune bench: cannot find the model (give --model): %s\n", err);
            return ST_EXIT_FAIL;
        }
        model = model_owned;
    }

    /* workload and schedule */
    st_workload work = { NULL, 0 };
    uint32_t nwarm = (uint32_t)warmup;
    int use_trace_times = 0;
    if (api == ST_RUNNER_API_RAW) {
        work.n = (uint32_t)(num_requests + warmup);
    } else if (trace) {
        if (st_workload_trace_load(trace, &work, err, sizeof err) < 0) {
            fprintf(stderr, "servetune bench: %s\n", err);
            free(model_owned);
            return ST_EXIT_USAGE;
        }
        if (nwarm >= work.n) {
            st_workload_free(&work);
            free(model_owned);
            return st_cli_usage_error("bench", "--warmup must be smaller than the number of trace requests");
        }
        /* the trace's own times (re-timed with --trace-rate) unless --rate was given */
        int has_times = work.items[0].arrival >= 0;
        if (trace_rate > 0 && !has_times) {
            st_workload_free(&work);
            free(model_owned);
            return st_cli_usage_error("bench", "--trace-rate: the trace has no timestamps to re-time (use --rate)");
        }
        if (trace_rate > 0 && rate_given) {
            st_workload_free(&work);
            free(model_owned);
            return st_cli_usage_error("bench", "--trace-rate and --rate exclude each other");
        }
        use_trace_times = has_times && !rate_given;
    } else {
        st_synth_params sp = { (uint32_t)input_tokens,
                               (uint32_t)output_tokens,
                               range_ratio,
                               (uint32_t)prefix_tokens,
                               (uint32_t)(num_requests + warmup),
                               (uint64_t)seed,
                               0 };
        if (st_workload_synthetic(&sp, &work, err, sizeof err) < 0) {
            free(model_owned);
            return st_cli_usage_error("bench", err);
        }
    }
    st_ns *sched = calloc(work.n, sizeof *sched);
    if (!sched) {
        if (!work.items)
            work.n = 0;
        st_workload_free(&work);
        free(model_owned);
        fprintf(stderr, "servetune bench: out of memory\n");
        return ST_EXIT_FAIL;
    }
    if (use_trace_times) {
        for (uint32_t i = 0; i < work.n; i++)
            sched[i] = work.items[i].arrival;
        if (trace_rate > 0 && st_arrival_retime(sched, work.n, trace_rate) < 0) {
            free(sched);
            st_workload_free(&work);
            free(model_owned);
            return st_cli_usage_error("bench", "--trace-rate: the trace cannot be re-timed (no time span)");
        }
    } else if (st_arrival_schedule(&arr, work.n, sched) < 0) {
        free(sched);
        st_workload_free(&work);
        free(model_owned);
        return st_cli_usage_error("bench", "bad arrival parameters");
    }

    st_runner_config rc = { 0 };
    rc.url = url;
    rc.api = api;
    rc.stream = !no_stream;
    rc.model = model;
    rc.api_key = key;
    rc.headers = headers.v;
    rc.nheaders = headers.n;
    rc.work = &work;
    rc.schedule = sched;
    rc.warmup = nwarm;
    rc.max_concurrency = (uint32_t)max_conc;
    rc.timeout_s = timeout;
    rc.insecure = insecure;
    rc.ca_file = ca_file;
    rc.max_lag_ms = max_lag_ms;
    rc.spin_ns = spin_us > 0 ? (st_ns)(spin_us * 1e3) : 0;
    progress_ctx pc = { !quiet && isatty(STDERR_FILENO), 0 };
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
    st_run_result res;
    int run_rc = st_runner_run(&rc, &res, err, sizeof err);
    if (pc.shown)
        fputc('\n', stderr);
    if (run_rc < 0) {
        fprintf(stderr, "servetune bench: %s\n", err);
        free(sched);
        if (!work.items)
            work.n = 0;
        st_workload_free(&work);
        free(model_owned);
        return ST_EXIT_FAIL;
    }
    st_summary_opts so = { { slo_ttft / 1e3, slo_tpot / 1e3, slo_e2e / 1e3 }, 0 };
    st_summary sum;
    st_summary_compute(res.records, res.n, &so, &sum);

    st_bench_info info;
    memset(&info, 0, sizeof info);
    info.url = url;
    info.api = api_name;
    info.model = model;
    info.stream = !no_stream && api != ST_RUNNER_API_RAW;
    info.workload = api == ST_RUNNER_API_RAW ? "raw" : trace ? "trace" : "synthetic";
    info.trace_path = trace;
    if (!trace) {
        info.input_len = (uint32_t)input_tokens;
        info.output_len = (uint32_t)output_tokens;
        info.prefix_len = (uint32_t)prefix_tokens;
        info.range_ratio = range_ratio;
    }
    info.seed = (uint64_t)seed;
    info.num_requests = work.n - nwarm;
    info.warmup = nwarm;
    info.arrival = use_trace_times ? "trace" : isinf(rate) ? "inf" : arrival_name;
    info.rate = use_trace_times ? (trace_rate > 0 ? trace_rate : NAN) : rate;
    info.burstiness = burstiness;
    info.max_concurrency = (uint32_t)max_conc;
    info.timeout_s = timeout;
    info.opts = so;
    info.max_lag_ms = res.max_lag_ms;
    info.dispatch_lag = &res.dispatch_lag;
    info.loop_delay = &res.loop_delay;
    info.client_limited = res.client_limited; /* the runner's self-check (docs/bench.md) */
    info.limited_reason = res.client_limited ? res.limited_reason : NULL;
    info.interrupted = res.interrupted;
    info.connections_opened = res.connections_opened;
    info.retries = res.retries;
    info.max_in_flight = res.max_in_flight;
    info.started_wall_ns = res.t0_wall;
    info.t0_mono_ns = res.t0_mono;

    int status = ST_EXIT_OK;
    if (json_path) {
        FILE *f = fopen(json_path, "w");
        if (!f || st_output_json_write(f, &info, &sum, res.records, res.n) < 0) {
            fprintf(stderr, "servetune bench: cannot write %s\n", json_path);
            status = ST_EXIT_FAIL;
        }
        if (f)
            fclose(f);
    }
    if (csv_path) {
        FILE *f = fopen(csv_path, "w");
        if (!f || st_output_csv(f, res.records, res.n) < 0) {
            fprintf(stderr, "servetune bench: cannot write %s\n", csv_path);
            status = ST_EXIT_FAIL;
        }
        if (f)
            fclose(f);
    }
    if (!quiet) {
        st_output_table(stdout, &info, &sum);
        if (!res.client_limited && strncmp(res.limited_reason, "ok", 2) != 0)
            printf("%-30s%s\n", "Self-check note:", res.limited_reason);
    }
    if (sum.failed > 0)
        status = ST_EXIT_FAIL;
    if (st_output_client_limited(&info, &sum))
        status = ST_EXIT_CLIENT_LIMITED;
    if (res.interrupted)
        status = ST_EXIT_INTERRUPTED;
    st_run_result_free(&res);
    free(sched);
    if (!work.items)
        work.n = 0; /* raw mode: a count without items */
    st_workload_free(&work);
    free(model_owned);
    return status;
}
