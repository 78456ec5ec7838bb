/* servetune bench: drive a running endpoint with an open-loop load and measure it.
 *
 * The steps have names: the options (servetune's own, and `vllm bench serve`'s for the random
 * dataset, docs/bench.md), the target, the workload (synthetic, multi-turn sessions, or a
 * trace of any format), exact prompt lengths through the server's /tokenize, the schedule,
 * the run (with the session hook when turns depend on each other), and the outputs. cmd_bench
 * calls them in turn on one bench struct that owns everything, freed at its one exit. What the
 * server says is never trusted: the API key and credential-like headers are redacted from every
 * error, file and line printed, and control characters never reach the terminal. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/file.h"
#include "core/opts.h"
#include "core/parse.h"
#include "core/secret.h"
#include "core/util.h"
#include "load/api.h"
#include "load/arrival.h"
#include "load/output.h"
#include "load/runner.h"
#include "cli/agents.h"
#include "load/agent_file.h"
#include "load/agent_run.h"
#include "load/session.h"
#include "load/stats.h"
#include "load/tokenize.h"
#include "load/trace.h"
#include "load/workload.h"
#include "net/http1.h"
#include "net/url.h"

/* The model list a server answers (GET /v1/models). */
#define MODELS_BODY_MAX ((size_t)4 << 20)
/* vLLM bench serve's default number of prompts (when its names are used). */
#define VLLM_NUM_PROMPTS 1000
#define URL_MAX 4096

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

/* GET <base>/v1/models: the first id, and its max_model_len when the server says (vLLM does). */
static int default_model(const char *url, const char *key, const char *const *hdrs, int nh, int insecure,
                         double timeout, char **out, uint32_t *max_model_len, char *err, size_t errlen)
{
    char murl[URL_MAX];
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
        json_t *m0 = root ? json_array_get(json_object_get(root, "data"), 0) : NULL;
        json_t *id = json_object_get(m0, "id");
        json_t *mml = json_object_get(m0, "max_model_len");
        if (json_is_string(id)) {
            if (out && (*out = strdup(json_string_value(id))))
                st_text_sanitize(*out, 0); /* it is printed: no escape sequence from the server */
            if (max_model_len && json_is_integer(mml) && json_integer_value(mml) > 0 &&
                json_integer_value(mml) <= UINT32_MAX)
                *max_model_len = (uint32_t)json_integer_value(mml);
        } else {
            snprintf(err, errlen, "GET %.200s: no data[0].id in the answer", murl);
            rc = -1;
        }
        json_decref(root);
    }
    st_buf_free(&body);
    return rc;
}

/* ---- options ---------------------------------------------------------------------------- */

typedef struct bench_args {
    const char *url, *api_name, *model, *key_env, *trace, *arrival_name, *json_path, *csv_path, *ca_file;
    st_strlist headers;
    long input_tokens, output_tokens, prefix_tokens, num_requests, warmup, max_conc, seed;
    double range_ratio, rate, trace_rate, burstiness, timeout, max_lag_ms, spin_us;
    double slo_ttft, slo_tpot, slo_e2e, slo_ttfat;
    double slo_makespan; /* agent tasks: ms */
    int insecure, quiet, no_stream;
    int n_by_user; /* -n or --num-prompts given (not a dataset's default) */
    /* traces */
    st_cli_trace tr;
    const char *trace_sessions;
    const char *fan_out; /* synthetic agent tasks (load/agent.h) */
    double think_time;
    /* synthetic sessions */
    long sessions, turn_input;
    const char *turns;
    int think_exp;
    /* exact prompt lengths */
    const char *exact;
    /* vllm bench serve's names */
    const char *base_url, *host, *endpoint, *backend, *dataset_name, *result_filename, *result_dir, *tokenizer;
    long port, random_input, random_output, random_prefix, num_prompts, num_warmups;
    double random_range, request_rate;
    int ignore_eos, save_result, disable_tqdm;
    st_strlist goodput;
} bench_args;

static void args_defaults(bench_args *a)
{
    memset(a, 0, sizeof *a);
    a->api_name = "completions";
    a->arrival_name = NULL; /* poisson, or gamma when --burstiness is given */
    a->input_tokens = a->output_tokens = a->prefix_tokens = a->num_requests = -1;
    a->warmup = 0;
    a->rate = NAN;
    a->burstiness = 1;
    a->timeout = 300;
    a->max_lag_ms = 10;
    a->range_ratio = -1;
    a->think_time = NAN;
    a->turn_input = 64;
    a->exact = "auto";
    a->port = -1;
    a->random_input = a->random_output = a->random_prefix = a->num_prompts = a->num_warmups = -1;
    a->random_range = -1;
    a->request_rate = NAN;
}

#define BENCH_OPTS_MAX 96

/* The server and the workload: synthetic, a trace, or sessions. */
static void workload_options(bench_args *a, st_opt *opts, int *n)
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
          "synthetic prompt length, shared prefix included (default 1024)", 1, 2097152, 0 },
        { "output-tokens", 0, ST_OPT_LONG, &a->output_tokens, "N", "synthetic output length (default 128)", 1, 2097152,
          0 },
        { "range-ratio", 0, ST_OPT_DOUBLE, &a->range_ratio, "R", "lengths uniform in [L(1-R), L(1+R)] (default 0)", 0,
          0.999999, 0 },
        { "prefix-tokens", 0, ST_OPT_LONG, &a->prefix_tokens, "N",
          "shared prefix common to every request, counted in --input-tokens (default 0)", 0, 2097152, 0 },
        { "num-requests", 'n', ST_OPT_LONG, &a->num_requests, "N",
          "measured requests (default 100; warm-ups come on top; with --trace: read at most N)", 1, 10000000, 0 },
        { "seed", 0, ST_OPT_LONG, &a->seed, "N", "seed for the workload and the arrivals (default 0)", 0, 9.2e18, 0 },
        { "trace", 0, ST_OPT_STR, &a->trace, "FILE",
          "a trace or production log instead of the synthetic workload: servetune JSONL, Mooncake, Azure, BurstGPT, "
          "LiteLLM, CSV, or agent task graphs (WEKA-style agentic trace, task-graph JSONL) (docs/trace-format.md)",
          0, 0, 0 },
        { "trace-rate", 0, ST_OPT_RATE, &a->trace_rate, "R", "re-time the trace to R req/s keeping its burstiness", 0,
          0, 0 },
        { "trace-max-context", 0, ST_OPT_LONG, &a->tr.max_context, "N",
          "skip and count trace requests whose prompt + output exceed N (default: the server's max_model_len; an "
          "agent trace: the tasks holding one, whole, a prompt grown by its parents' answers)",
          1, 1e9, 0 },
        { "trace-sessions", 0, ST_OPT_STR, &a->trace_sessions, "MODE",
          "replay|flat|off: a trace's sessions as conversations with the real answers (default), flattened on their "
          "recorded times, or ignored",
          0, 0, 0 },
        { "sessions", 0, ST_OPT_LONG, &a->sessions, "N",
          "synthetic multi-turn sessions: N conversations (first prompt --input-tokens, --output-tokens a turn)", 1,
          1000000, 0 },
        { "turns", 0, ST_OPT_STR, &a->turns, "N|MIN-MAX", "turns per session (default 4)", 0, 0, 0 },
        { "fan-out", 0, ST_OPT_STR, &a->fan_out, "N|MIN-MAX",
          "with --sessions: agent tasks, each later planner turn fanning out to N workers and joining them", 0, 0, 0 },
        { "turn-input-tokens", 0, ST_OPT_LONG, &a->turn_input, "N", "new user tokens in each later turn (default 64)",
          1, 2097152, 0 },
        { "think-time", 0, ST_OPT_DURATION, &a->think_time, "T",
          "pause between a turn's end and the next turn (sessions: default 0; traces: replaces the recorded one)", 0, 0,
          0 },
        { "think-exp", 0, ST_OPT_FLAG, &a->think_exp, NULL, "exponential think times with mean --think-time", 0, 0, 0 },
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        opts[(*n)++] = t[i];
}

/* The load (rate, arrivals, concurrency), goodput terms, checks and outputs. */
static void load_options(bench_args *a, st_opt *opts, int *n)
{
    const st_opt t[] = {
        { "rate", 'r', ST_OPT_RATE, &a->rate, "R",
          "arrival rate in req/s (sessions: sessions/s) or inf (default inf; with --trace: replaces its times)", 0, 0,
          0 },
        { "arrival", 0, ST_OPT_STR, &a->arrival_name, "KIND",
          "poisson|constant|gamma (default poisson; gamma when --burstiness is given)", 0, 0, 0 },
        { "burstiness", 0, ST_OPT_DOUBLE, &a->burstiness, "B",
          "gamma shape: <1 burstier, >1 smoother, 1 Poisson (as vLLM's --burstiness)", 1e-6, 1e6, 0 },
        { "max-concurrency", 0, ST_OPT_LONG, &a->max_conc, "N",
          "at most N requests in flight (default unbounded); at a finite --rate the wait for a slot counts in "
          "TTFT; with --rate inf (the default) a fixed-count closed loop of -n requests, each timed from its send, "
          "as vllm bench serve --max-concurrency N --num-prompts M",
          0, 10000000, 0 },
        { "warmup", 0, ST_OPT_LONG, &a->warmup, "N",
          "warm-up requests sent first and excluded from the figures (default 0)", 0, 10000000, 0 },
        { "timeout", 0, ST_OPT_DURATION, &a->timeout, "T", "per-request timeout, e.g. 30, 500ms, 2m (default 300)", 0,
          0, 0 },
        { "slo-ttft", 0, ST_OPT_DOUBLE, &a->slo_ttft, "MS", "goodput term: TTFT at most MS", 0, 1e9, 0 },
        { "slo-tpot", 0, ST_OPT_DOUBLE, &a->slo_tpot, "MS", "goodput term: TPOT at most MS", 0, 1e9, 0 },
        { "slo-e2e", 0, ST_OPT_DOUBLE, &a->slo_e2e, "MS", "goodput term: end-to-end latency at most MS", 0, 1e9, 0 },
        { "slo-ttfat", 0, ST_OPT_DOUBLE, &a->slo_ttfat, "MS",
          "goodput term: time to first ANSWER token at most MS (reasoning models)", 0, 1e9, 0 },
        { "exact-prompts", 0, ST_OPT_STR, &a->exact, "auto|on|off",
          "text APIs (chat, tgi): fit each prompt to its exact token count with the server's /tokenize (auto: when "
          "the server has one)",
          0, 0, 0 },
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
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        opts[(*n)++] = t[i];
}

/* vllm bench serve's names (docs/bench.md, "vllm bench serve's flags"). */
static void vllm_options(bench_args *a, st_opt *opts, int *n)
{
    const st_opt t[] = {
        { "base-url", 0, ST_OPT_STR, &a->base_url, "URL", "vLLM name: the server's base URL (= --url)", 0, 0, 0 },
        { "host", 0, ST_OPT_STR, &a->host, "HOST", "vLLM name: server host (with --port; default 127.0.0.1)", 0, 0, 0 },
        { "port", 0, ST_OPT_LONG, &a->port, "PORT", "vLLM name: server port (default 8000)", 1, 65535, 0 },
        { "endpoint", 0, ST_OPT_STR, &a->endpoint, "PATH",
          "vLLM name: /v1/completions or /v1/chat/completions (sets --api)", 0, 0, 0 },
        { "backend", 0, ST_OPT_STR, &a->backend, "B", "vLLM name: vllm|openai (completions), openai-chat (chat)", 0, 0,
          0 },
        { "dataset-name", 0, ST_OPT_STR, &a->dataset_name, "NAME", "vLLM name: random only (traces: --trace)", 0, 0,
          0 },
        { "random-input-len", 0, ST_OPT_LONG, &a->random_input, "N",
          "vLLM name and meaning: input length WITHOUT the prefix (default 1024)", 0, 2097152, 0 },
        { "random-output-len", 0, ST_OPT_LONG, &a->random_output, "N", "vLLM name: output length (default 128)", 1,
          2097152, 0 },
        { "random-prefix-len", 0, ST_OPT_LONG, &a->random_prefix, "N",
          "vLLM name and meaning: a shared prefix ON TOP of the input length (default 0)", 0, 2097152, 0 },
        { "random-range-ratio", 0, ST_OPT_DOUBLE, &a->random_range, "R",
          "vLLM name and meaning: lengths in [floor(L(1-R)), ceil(L(1+R))] (default 0)", 0, 0.999999, 0 },
        { "num-prompts", 0, ST_OPT_LONG, &a->num_prompts, "N", "vLLM name: number of requests (default 1000)", 1,
          10000000, 0 },
        { "request-rate", 0, ST_OPT_RATE, &a->request_rate, "R", "vLLM name: = --rate", 0, 0, 0 },
        { "num-warmups", 0, ST_OPT_LONG, &a->num_warmups, "N", "vLLM name: = --warmup", 0, 10000000, 0 },
        { "goodput", 0, ST_OPT_LIST, &a->goodput, "K:MS",
          "vLLM name: ttft:MS, tpot:MS, e2el:MS (repeatable, or several after one --goodput); agent tasks: makespan:MS",
          0, 0, 0 },
        { "ignore-eos", 0, ST_OPT_FLAG, &a->ignore_eos, NULL, "vLLM name: accepted (servetune always forces lengths)",
          0, 0, 0 },
        { "save-result", 0, ST_OPT_FLAG, &a->save_result, NULL,
          "vLLM name: write the JSON (servetune's schema) to --result-filename", 0, 0, 0 },
        { "result-filename", 0, ST_OPT_STR, &a->result_filename, "FILE", "vLLM name: the --save-result file", 0, 0, 0 },
        { "result-dir", 0, ST_OPT_STR, &a->result_dir, "DIR", "vLLM name: folder of --result-filename", 0, 0, 0 },
        { "disable-tqdm", 0, ST_OPT_FLAG, &a->disable_tqdm, NULL, "vLLM name: no progress line", 0, 0, 0 },
        { "tokenizer", 0, ST_OPT_STR, &a->tokenizer, "NAME",
          "vLLM name: accepted; servetune counts with the server's /tokenize (--exact-prompts)", 0, 0, 0 },
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        opts[(*n)++] = t[i];
}

/* Every option of bench into opts (room for BENCH_OPTS_MAX), ended by a zero entry; their count. */
static int build_table(bench_args *a, st_opt *opts)
{
    int n = 0;
    workload_options(a, opts, &n);
    load_options(a, opts, &n);
    vllm_options(a, opts, &n);
    st_cli_trace_opts(&a->tr, opts, &n);
    opts[n] = (st_opt){ 0 };
    return n;
}

/* The vLLM names become servetune's settings. 0, or -1 with the reason in err. */
static int map_vllm_names(bench_args *a, int npos, char **pos, char *url_buf, size_t url_cap, int *vllm_dataset,
                          char *err, size_t errlen)
{
    *vllm_dataset = a->random_input >= 0 || a->random_output >= 0 || a->random_prefix >= 0 || a->random_range >= 0;
    if (*vllm_dataset &&
        (a->input_tokens >= 0 || a->output_tokens >= 0 || a->prefix_tokens >= 0 || a->range_ratio >= 0)) {
        snprintf(err, errlen,
                 "--random-* (vLLM's meaning: the prefix on top of the input) and --input-tokens / --output-tokens / "
                 "--prefix-tokens / --range-ratio (servetune's: the prefix inside it) do not mix");
        return -1;
    }
    if (a->dataset_name && strcmp(a->dataset_name, "random")) {
        snprintf(err, errlen, "--dataset-name %.40s: only random is mapped (give a trace with --trace)",
                 a->dataset_name);
        return -1;
    }
    if (*vllm_dataset) {
        a->input_tokens = a->random_input >= 0 ? a->random_input : 1024;
        a->output_tokens = a->random_output >= 0 ? a->random_output : 128;
        a->prefix_tokens = a->random_prefix >= 0 ? a->random_prefix : 0;
        a->range_ratio = a->random_range >= 0 ? a->random_range : 0;
    }
    a->n_by_user = a->num_requests >= 0 || a->num_prompts >= 0;
    if (a->num_prompts >= 0) {
        if (a->num_requests >= 0) {
            snprintf(err, errlen, "give --num-requests or --num-prompts, not both");
            return -1;
        }
        a->num_requests = a->num_prompts;
    } else if (a->num_requests < 0 && *vllm_dataset) {
        a->num_requests = VLLM_NUM_PROMPTS;
    }
    if (!isnan(a->request_rate)) {
        if (!isnan(a->rate)) {
            snprintf(err, errlen, "give --rate or --request-rate, not both");
            return -1;
        }
        a->rate = a->request_rate;
    }
    if (a->num_warmups >= 0)
        a->warmup = a->num_warmups;
    /* target */
    if (a->base_url || a->host || a->port >= 0) {
        if (a->url) {
            snprintf(err, errlen, "give --url, or vLLM's --base-url / --host / --port, not both");
            return -1;
        }
        if (a->base_url)
            snprintf(url_buf, url_cap, "%s", a->base_url);
        else
            snprintf(url_buf, url_cap, "http://%s:%ld", a->host ? a->host : "127.0.0.1", a->port >= 0 ? a->port : 8000);
        a->url = url_buf;
    }
    if (a->backend) {
        if (!strcmp(a->backend, "openai-chat"))
            a->api_name = "chat";
        else if (!strcmp(a->backend, "vllm") || !strcmp(a->backend, "openai"))
            a->api_name = "completions";
        else if (!strcmp(a->backend, "tgi") || !strcmp(a->backend, "sglang"))
            a->api_name = a->backend;
        else {
            snprintf(err, errlen, "--backend %.40s: expected vllm, openai, openai-chat, tgi or sglang", a->backend);
            return -1;
        }
    }
    if (a->endpoint) {
        if (!strcmp(a->endpoint, "/v1/chat/completions"))
            a->api_name = "chat";
        else if (!strcmp(a->endpoint, "/v1/completions"))
            a->api_name = a->backend && !strcmp(a->backend, "openai-chat") ? "chat" : "completions";
        else {
            snprintf(err, errlen, "--endpoint %.60s: expected /v1/completions or /v1/chat/completions", a->endpoint);
            return -1;
        }
    }
    /* --goodput ttft:500 tpot:50 e2el:3000 (vLLM takes several values after one flag) */
    st_strlist gp = a->goodput;
    for (int i = 0; i < npos && gp.n < ST_STRLIST_MAX; i++)
        if (a->goodput.n && strchr(pos[i], ':'))
            gp.v[gp.n++] = pos[i];
    for (int i = 0; i < gp.n; i++) {
        const char *c = strchr(gp.v[i], ':');
        double v;
        char k[16];
        if (!c || (size_t)(c - gp.v[i]) >= sizeof k || st_parse_double(c + 1, &v) < 0 || v <= 0) {
            snprintf(err, errlen, "--goodput: expected KEY:MS (ttft, tpot, e2el, makespan), got '%.40s'", gp.v[i]);
            return -1;
        }
        memcpy(k, gp.v[i], (size_t)(c - gp.v[i]));
        k[c - gp.v[i]] = '\0';
        if (!strcmp(k, "ttft"))
            a->slo_ttft = v;
        else if (!strcmp(k, "tpot"))
            a->slo_tpot = v;
        else if (!strcmp(k, "e2el"))
            a->slo_e2e = v;
        else if (!strcmp(k, "makespan"))
            a->slo_makespan = v; /* agent tasks (load/agent_run.h) */
        else {
            snprintf(err, errlen, "--goodput: unknown key '%.16s' (ttft, tpot, e2el)", k);
            return -1;
        }
    }
    return 0;
}

/* ---- the workload ------------------------------------------------------------------------ */

typedef struct bench_work {
    st_workload work;
    st_trace_counts counts;
    st_trace_format fmt;
    int is_trace, has_counts;
    uint32_t turns_min, turns_max;
    st_trace_sessions smode;
    st_agent_format agent; /* an agent trace (load/agent.h): task graphs */
} bench_work;

/* An agent trace's task graphs as the workload; with a context (ctx: --trace-max-context, else the
 * server's; 0: unknown), the tasks that hold a request longer than it (its prompt as grown by its
 * parents' answers + output, load/agent.h st_agent_fit_context) left out whole and said. 0, or -1
 * with err. */
static int agent_bench_workload(const char *path, uint64_t seed, uint32_t ctx, st_workload *w, char *err, size_t errlen)
{
    st_agent_graph g;
    if (st_agent_load_file(path, 0, &g, NULL, err, errlen) < 0)
        return -1;
    st_agent_fit f;
    uint8_t *over = malloc(g.n_tasks ? g.n_tasks : 1);
    int rc = !over || st_agent_fit_context(&g, ctx, over, &f) ? -1 : 0;
    if (rc == 0 && f.tasks_over) {
        const st_agent_node *x = &g.nodes[f.first];
        fprintf(stderr,
                "servetune bench: %u of the agent trace's %u tasks (%u of its %u requests) hold a request longer "
                "(prompt as grown by its parents' answers + output) than the context of %u tokens (the first: "
                "node %s of task %s, %llu tokens): left out whole (a request over the context cannot run, nor the "
                "requests that wait for it)\n",
                f.tasks_over, f.tasks, f.requests_over, f.requests, ctx, x->id, g.tasks[x->task].name,
                (unsigned long long)f.first_need);
        rc = st_agent_graph_drop_tasks(&g, over);
    }
    free(over);
    if (rc)
        snprintf(err, errlen, "out of memory");
    else if (!g.n_tasks) {
        snprintf(err, errlen, "%s: every task holds a request longer than the context of %u tokens", path, ctx);
        rc = -1;
    } else
        rc = st_agent_workload(&g, seed, w, err, errlen);
    st_agent_graph_free(&g);
    return rc;
}

static int build_workload(bench_args *a, int api, int vllm_dataset, int n_given, uint32_t server_mml, bench_work *bw,
                          char *err, size_t errlen)
{
    memset(bw, 0, sizeof *bw);
    uint32_t nwarm = (uint32_t)a->warmup;
    if (api == ST_RUNNER_API_RAW) {
        bw->work.n = (uint32_t)(a->num_requests + a->warmup);
        return 0;
    }
    if (a->trace && (bw->agent = st_agent_detect_file(a->trace)) != ST_AGENT_FMT_NONE) {
        if (n_given || a->trace_sessions) {
            snprintf(err, errlen, "%s with an agent trace: its tasks run whole, as recorded",
                     n_given ? "-n" : "--trace-sessions");
            return -1;
        }
        uint32_t ctx = a->tr.max_context ? (uint32_t)a->tr.max_context : server_mml;
        return agent_bench_workload(a->trace, (uint64_t)a->seed, ctx, &bw->work, err, errlen) < 0 ? -2 : 0;
    }
    if (a->trace) {
        st_trace_load_opts lo;
        st_trace_load_opts_default(&lo);
        if (st_cli_trace_resolve(&a->tr, (uint64_t)a->seed, &lo.read, err, errlen) < 0)
            return -1;
        if (!a->tr.max_context && server_mml)
            lo.read.max_context = server_mml; /* longer than the model's context: counted, not sent */
        if (n_given)
            lo.read.max_rows = (uint64_t)a->num_requests + nwarm; /* -n: the first N kept requests */
        if (a->trace_sessions && st_trace_sessions_from_name(a->trace_sessions, &lo.sessions) < 0) {
            snprintf(err, errlen, "--trace-sessions: expected replay, flat or off");
            return -1;
        }
        lo.think_s = a->think_time;
        if (st_trace_load(a->trace, &lo, &bw->work, &bw->counts, &bw->fmt, err, errlen) < 0)
            return -2;
        bw->is_trace = bw->has_counts = 1;
        bw->smode = lo.sessions;
        return 0;
    }
    if (a->sessions > 0) {
        uint32_t lo = 4, hi = 4;
        if (a->turns && st_parse_range_u32(a->turns, 1, ST_SESSION_TURNS_MAX, &lo, &hi)) {
            snprintf(err, errlen, "--turns: expected N or MIN-MAX within 1..%u", ST_SESSION_TURNS_MAX);
            return -1;
        }
        st_session_params sp = { .sessions = (uint32_t)a->sessions,
                                 .turns_min = lo,
                                 .turns_max = hi,
                                 .first_input = (uint32_t)a->input_tokens,
                                 .user_input = (uint32_t)a->turn_input,
                                 .output_len = (uint32_t)a->output_tokens,
                                 .prefix_len = (uint32_t)a->prefix_tokens,
                                 .range_ratio = a->range_ratio,
                                 .think_s = isnan(a->think_time) ? 0 : a->think_time,
                                 .think_exp = a->think_exp,
                                 .seed = (uint64_t)a->seed };
        if (a->fan_out && st_parse_range_u32(a->fan_out, 1, ST_AGENT_FAN_OUT_MAX, &sp.fan_out_min, &sp.fan_out_max)) {
            snprintf(err, errlen, "--fan-out: expected N or MIN-MAX within 1..%u", ST_AGENT_FAN_OUT_MAX);
            return -1;
        }
        if (st_workload_sessions(&sp, &bw->work, err, errlen) < 0)
            return -1;
        bw->turns_min = lo;
        bw->turns_max = hi;
        return 0;
    }
    st_synth_params sp = { .input_len = (uint32_t)a->input_tokens,
                           .output_len = (uint32_t)a->output_tokens,
                           .range_ratio = a->range_ratio,
                           .prefix_len = (uint32_t)a->prefix_tokens,
                           .num_requests = (uint32_t)(a->num_requests + a->warmup),
                           .seed = (uint64_t)a->seed,
                           .vllm_semantics = vllm_dataset };
    return st_workload_synthetic(&sp, &bw->work, err, errlen);
}

/* Exact prompt lengths for text-only APIs (load/tokenize.h). Returns the line for the
 * report (static text or a note), and the numbers fitted. */
static const char *fit_prompts(bench_args *a, int api, const char *model, const char *key, bench_work *bw,
                               uint32_t *fitted, uint32_t *exact, char *note, size_t notelen)
{
    *fitted = *exact = 0;
    int text_api = api == ST_API_CHAT || api == ST_API_TGI;
    if (!strcmp(a->exact, "off"))
        return "off";
    if (!text_api) {
        if (!strcmp(a->exact, "on")) {
            snprintf(note, notelen, "not needed: the %s API takes token ids", st_api_name((st_api_kind)api));
            return note;
        }
        return NULL;
    }
    if (bw->work.n_tasks) {
        snprintf(note, notelen, "not applied: agent tasks carry their blocks' text and the answers");
        return note;
    }
    if (bw->work.n_sessions) {
        snprintf(note, notelen, "not applied: session turns carry the conversation's real text");
        return note;
    }
    char err[512];
    st_tokenizer *t =
        st_tokenizer_new(a->url, (st_api_kind)api, model, key, a->insecure, a->ca_file, 30, err, sizeof err);
    if (!t) {
        snprintf(note, notelen, "off (%s)", err);
        return note;
    }
    int rc = st_prompt_fit_work(&bw->work, t, &bench_stop, fitted, exact, err, sizeof err);
    if (rc < 0) {
        if (st_tokenizer_missing(t))
            snprintf(note, notelen, "off: the server has no /tokenize (prompt lengths estimated as one token a word)");
        else
            snprintf(note, notelen, "stopped after %u prompts: %.300s", *fitted, err);
        st_tokenizer_free(t);
        return note;
    }
    snprintf(note, notelen, "on (%u /tokenize calls)", st_tokenizer_calls(t));
    st_tokenizer_free(t);
    return note;
}

/* ---- the command ----------------------------------------------------------------------- */

/* Everything one bench owns (bench_free frees it). */
typedef struct bench {
    bench_args A;
    char url_buf[URL_MAX], result_path[URL_MAX];
    const char *json_path;
    int vllm_dataset, n_given;
    int api;            /* st_api_kind or ST_RUNNER_API_RAW */
    int rate_given;     /* --rate was given (else inf, or the trace's times) */
    int closed_loop;    /* --rate inf with --max-concurrency (no sessions, no trace times): a fixed-count
                           closed loop, each request timed from its send */
    st_arrival arr;     /* when the trace's own times are not used */
    const char *key;    /* the API key (from --api-key-env), or NULL */
    st_secrets secrets; /* the key and credential-like header values: never printed or written */
    const char *model;
    char *model_owned;   /* the model GET /v1/models named */
    uint32_t server_mml; /* the server's max_model_len (0: unknown) */
    bench_work bw;
    int have_work;
    uint32_t nwarm, n_static;
    int use_trace_times;
    const char *exact_line;
    char fit_note[600];
    uint32_t fitted, fitted_exact;
    st_ns *sched;
    st_run_result res;
    int have_res;
} bench;

/* "servetune bench: MSG" with every secret removed (a server may have echoed one). */
static void bench_error(const bench *B, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bench_error(const bench *B, const char *fmt, ...)
{
    char m[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    st_secrets_redact(&B->secrets, m);
    fprintf(stderr, "servetune bench: %s\n", m);
}

static void bench_help(const st_opt *opts)
{
    printf(
        "usage: servetune bench --url URL [OPTIONS]\n\n"
        "Drive a running LLM endpoint with an open-loop streaming load and measure TTFT, TPOT,\n"
        "ITL and throughput (docs/bench.md). Workloads: synthetic (vLLM's random-dataset shape),\n"
        "multi-turn sessions, or a trace / production log (docs/trace-format.md). `vllm bench\n"
        "serve`'s flag names for the random dataset work as well, with their meaning. The API key\n"
        "and credential-like headers never appear in the output, the JSON or the CSV, even when the\n"
        "server echoes them.\n"
        "Exit status: 0 ok, 1 some requests failed or a file could not be written, 2 usage,\n"
        "3 client-limited (the tool could not keep the schedule), 4 interrupted.\n\n"
        "Examples:\n"
        "  servetune bench --url http://127.0.0.1:8000 --rate 4 -n 200 --input-tokens 3000 --prefix-tokens 2000\n"
        "  servetune bench --base-url http://127.0.0.1:8000 --random-input-len 1000 --random-prefix-len 2000 \\\n"
        "      --random-range-ratio 0.5 --num-prompts 200 --request-rate 4 --goodput ttft:1500 tpot:50\n"
        "  servetune bench --url http://127.0.0.1:8000 --api chat --sessions 50 --turns 3-8 --think-time 5 --rate 1\n"
        "  servetune bench --url http://127.0.0.1:8000 --trace mooncake_trace.jsonl --trace-window 0:10m\n\n"
        "Options:\n");
    st_opts_usage(stdout, opts);
}

/* The key and the values of credential-like headers ("Authorization: Bearer KEY": the whole value
 * and its last word), kept out of every output. */
static void collect_secrets(bench *B)
{
    const bench_args *a = &B->A;
    for (int i = 0; i < a->headers.n; i++) {
        const char *h = a->headers.v[i];
        char name[128];
        size_t nl = strcspn(h, ":");
        snprintf(name, sizeof name, "%.*s", (int)(nl < sizeof name ? nl : sizeof name - 1), h);
        const char *v = h[nl] ? h + nl + 1 : "";
        while (*v == ' ' || *v == '\t')
            v++;
        if (!st_secret_name(name) || !*v)
            continue;
        st_secrets_add(&B->secrets, v);
        const char *last = strrchr(v, ' ');
        if (last)
            st_secrets_add(&B->secrets, last + 1);
    }
}

/* vLLM's flag names mapped, no stray positional argument, the defaults, a URL. ST_EXIT_OK, or
 * the usage error (printed). */
static int plan_defaults(bench *B, const st_opts_result *pr)
{
    bench_args *a = &B->A;
    char err[1024];
    int rcm = map_vllm_names(a, pr->npos, pr->pos, B->url_buf, sizeof B->url_buf, &B->vllm_dataset, err, sizeof err);
    if (rcm < 0)
        return st_cli_usage_error("bench", err);
    for (int i = 0; i < pr->npos; i++)
        if (!(a->goodput.n && strchr(pr->pos[i], ':')))
            return st_cli_usage_error("bench", "unexpected positional argument");
    if (a->input_tokens < 0)
        a->input_tokens = 1024;
    if (a->output_tokens < 0)
        a->output_tokens = 128;
    if (a->prefix_tokens < 0)
        a->prefix_tokens = 0;
    if (a->range_ratio < 0)
        a->range_ratio = 0;
    B->n_given = a->num_requests >= 0;
    if (a->num_requests < 0)
        a->num_requests = 100;
    if (!a->url)
        return st_cli_usage_error("bench", "--url is required");
    return ST_EXIT_OK;
}

/* A results file's path that cannot take the file: a folder, or (an existing file) not writable,
 * or (a new one) a folder that does not let it be made. 0, or 1 with the reason in m. */
static int result_path_unwritable(const char *path, char *m, size_t mlen)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(m, mlen, "cannot write %.400s: it is a folder (give a file name in it)", path);
        return 1;
    }
    char dir[ST_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    /* an existing file (e.g. /dev/stdout) needs only itself writable */
    if (access(path, F_OK) == 0) {
        if (access(path, W_OK) == 0)
            return 0;
        snprintf(m, mlen, "cannot write %.400s: %s", path, strerror(errno));
        return 1;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        snprintf(m, mlen, "cannot write %.400s: %.400s: %s", path, dir, strerror(errno));
        return 1;
    }
    return 0;
}

/* The results file (--json, or vLLM's --save-result / --result-filename): its folders made and
 * found writable now, not after the whole load ran. ST_EXIT_OK, or the usage error (printed). */
static int plan_result_files(bench *B)
{
    bench_args *a = &B->A;
    B->json_path = a->json_path;
    if (a->save_result || a->result_filename) {
        const char *fname = a->result_filename ? a->result_filename : "servetune-bench.json";
        if (a->result_dir)
            snprintf(B->result_path, sizeof B->result_path, "%s/%s", a->result_dir, fname);
        else
            snprintf(B->result_path, sizeof B->result_path, "%s", fname);
        if (B->json_path)
            return st_cli_usage_error("bench", "give --json or --save-result / --result-filename, not both");
        B->json_path = B->result_path;
    }
    struct stat st;
    if (B->json_path && a->csv_path && !strcmp(B->json_path, a->csv_path) &&
        (stat(a->csv_path, &st) != 0 || S_ISREG(st.st_mode))) /* (a device such as /dev/null takes both) */
        return st_cli_usage_error("bench", "--json and --csv name the same file (the CSV would replace the JSON)");
    for (int k = 0; k < 2; k++) {
        int rc = st_cli_refuse_input_as_output("bench", k ? "--csv" : "--json", k ? a->csv_path : B->json_path,
                                               a->trace, "the trace it replays");
        if (rc != ST_EXIT_OK)
            return rc;
    }
    /* the results files' folders are made now (--json runs/a.json makes runs/), and each file found
     * writable: not after the whole load ran, when its records would be lost */
    for (int k = 0; k < 2; k++) {
        const char *p = k ? a->csv_path : B->json_path;
        char merr[1200];
        if (p && (st_mkdir_parents(p, merr, sizeof merr) || result_path_unwritable(p, merr, sizeof merr)))
            return st_cli_usage_error("bench", merr);
    }
    return ST_EXIT_OK;
}

/* The API and the arrival process. ST_EXIT_OK, or the usage error (printed). */
static int plan_api_arrival(bench *B)
{
    bench_args *a = &B->A;
    st_api_kind k;
    if (!strcmp(a->api_name, "raw"))
        B->api = ST_RUNNER_API_RAW;
    else if (st_api_from_name(a->api_name, &k) == 0)
        B->api = (int)k;
    else
        return st_cli_usage_error("bench", "--api: expected completions, chat, tgi, llamacpp, sglang or raw");
    if (!a->arrival_name)
        a->arrival_name = a->burstiness != 1 ? "gamma" : "poisson";
    B->rate_given = !isnan(a->rate);
    if (!B->rate_given)
        a->rate = INFINITY;
    B->arr = (st_arrival){ ST_ARR_POISSON, a->rate, a->burstiness, (uint64_t)a->seed };
    if (st_arrival_kind_from_name(a->arrival_name, &B->arr.kind) < 0 || B->arr.kind == ST_ARR_INF)
        return st_cli_usage_error("bench",
                                  "--arrival: expected poisson, constant or gamma (use --rate inf for all at once)");
    if (isinf(a->rate))
        B->arr.kind = ST_ARR_INF;
    return ST_EXIT_OK;
}

/* Options that do not go together, or out of their range. ST_EXIT_OK, or the usage error (printed). */
static int plan_checks(const bench *B)
{
    const bench_args *a = &B->A;
    if (!B->vllm_dataset && a->prefix_tokens > a->input_tokens)
        return st_cli_usage_error("bench", "--prefix-tokens must not exceed --input-tokens (it is counted in it)");
    if (a->trace_rate > 0 && !a->trace)
        return st_cli_usage_error("bench", "--trace-rate needs --trace");
    if (a->no_stream && a->slo_tpot > 0)
        return st_cli_usage_error("bench", "--no-stream: a non-streaming answer arrives whole, so it has no TPOT to "
                                           "hold to a limit (drop the TPOT term, or stream)");
    if (a->sessions && a->trace)
        return st_cli_usage_error("bench", "--sessions makes synthetic sessions; a trace brings its own (--trace)");
    if (a->sessions && a->n_by_user)
        return st_cli_usage_error("bench", "-n / --num-prompts count requests; with --sessions the run is --sessions "
                                           "N sessions of --turns turns each (drop it)");
    if (!(a->timeout > 0))
        return st_cli_usage_error("bench", "--timeout must be > 0 (a request's time limit)");
    if (a->fan_out && !a->sessions)
        return st_cli_usage_error("bench", "--fan-out needs --sessions (N agent tasks)");
    if ((a->turns || a->think_exp) && !a->sessions)
        return st_cli_usage_error("bench", "--turns and --think-exp need --sessions");
    if (strcmp(a->exact, "auto") && strcmp(a->exact, "on") && strcmp(a->exact, "off"))
        return st_cli_usage_error("bench", "--exact-prompts: expected auto, on or off");
    for (int i = 0; i < a->headers.n; i++)
        if (!st_http_header_line_valid(a->headers.v[i]))
            return st_cli_usage_error("bench", "--header: expected 'Name: value' (a token name, no line breaks)");
    return ST_EXIT_OK;
}

/* The API key from --api-key-env and the secrets kept out of every output. ST_EXIT_OK, or the
 * usage error (printed). */
static int plan_key(bench *B)
{
    const bench_args *a = &B->A;
    collect_secrets(B);
    if (a->key_env) {
        B->key = getenv(a->key_env);
        if (!B->key || !*B->key) {
            char m[200];
            snprintf(m, sizeof m, "--api-key-env: the environment variable %.100s is not set", a->key_env);
            return st_cli_usage_error("bench", m);
        }
        if (st_secrets_add(&B->secrets, B->key)) {
            char m[200];
            snprintf(m, sizeof m, "--api-key-env: the key in %.100s is shorter than %d characters", a->key_env,
                     ST_SECRET_MIN_LEN);
            return st_cli_usage_error("bench", m);
        }
    }
    return ST_EXIT_OK;
}

/* The options into a plan: vLLM's names mapped, defaults, API, arrivals, the key and the
 * secrets, the result file. ST_EXIT_OK, or the usage error (printed). */
static int plan(bench *B, const st_opts_result *pr)
{
    int rc;
    if ((rc = plan_defaults(B, pr)) != ST_EXIT_OK || (rc = plan_result_files(B)) != ST_EXIT_OK ||
        (rc = plan_api_arrival(B)) != ST_EXIT_OK || (rc = plan_checks(B)) != ST_EXIT_OK ||
        (rc = plan_key(B)) != ST_EXIT_OK)
        return rc;
    char err[1024];
    st_url chk;
    if (st_url_parse(B->A.url, &chk, err, sizeof err) < 0)
        return st_cli_usage_error("bench", err);
    return ST_EXIT_OK;
}

/* The model, and its context from /v1/models (also when a trace needs the context). */
static int find_model(bench *B)
{
    bench_args *a = &B->A;
    B->model = a->model;
    if (!(B->api == ST_API_COMPLETIONS || B->api == ST_API_CHAT) || (B->model && !a->trace))
        return ST_EXIT_OK;
    char err[1024];
    if (default_model(a->url, B->key, a->headers.v, a->headers.n, a->insecure, a->timeout < 30 ? a->timeout : 30,
                      B->model ? NULL : &B->model_owned, &B->server_mml, err, sizeof err) < 0 &&
        !B->model) {
        bench_error(B, "cannot find the model (give --model): %s", err);
        return ST_EXIT_FAIL;
    }
    if (!B->model)
        B->model = B->model_owned;
    return ST_EXIT_OK;
}

/* The requests (synthetic, sessions or a trace), checked against the warm-up and the trace's
 * times, then fitted to exact prompt lengths. */
static int prepare_workload(bench *B)
{
    bench_args *a = &B->A;
    char err[1024];
    int wrc = build_workload(a, B->api, B->vllm_dataset, B->n_given, B->server_mml, &B->bw, err, sizeof err);
    if (wrc < 0) {
        if (wrc == -1)
            return st_cli_usage_error("bench", err);
        fprintf(stderr, "servetune bench: %s\n", err);
        return ST_EXIT_USAGE;
    }
    B->have_work = 1;
    st_workload *work = &B->bw.work;
    B->nwarm = (uint32_t)a->warmup;
    B->n_static = work->n - work->n_dependent;
    const char *fail = NULL;
    if (work->n_dependent && B->nwarm)
        fail = "--warmup does not combine with sessions (their later turns depend on the earlier ones)";
    else if (B->bw.is_trace) {
        if (B->nwarm >= B->n_static)
            fail = "--warmup must be smaller than the number of trace requests";
        int has_times = work->items[0].arrival >= 0;
        if (!fail && a->trace_rate > 0 && !has_times)
            fail = "--trace-rate: the trace has no timestamps to re-time (use --rate)";
        if (!fail && a->trace_rate > 0 && B->rate_given)
            fail = "--trace-rate and --rate exclude each other";
        B->use_trace_times = has_times && !B->rate_given;
    } else if (B->bw.agent) { /* the tasks' own starts (task-graph `start`) unless --rate */
        if (B->nwarm)
            fail = "--warmup does not combine with agent tasks (their nodes depend on each other)";
        B->use_trace_times = work->n && work->items[0].arrival >= 0 && !B->rate_given;
    }
    if (fail)
        return st_cli_usage_error("bench", fail);
    B->closed_loop = isinf(a->rate) && a->max_conc > 0 && !work->n_dependent && !B->use_trace_times;
    if (B->bw.has_counts && !a->quiet) {
        char d[600];
        st_trace_counts_describe(&B->bw.counts, d, sizeof d);
        fprintf(stderr, "servetune bench: %s (%s): %s\n", a->trace, st_trace_format_name(B->bw.fmt), d);
        for (uint32_t i = 0; i < B->bw.counts.n_bad_first; i++)
            fprintf(stderr, "  skipped %s\n", B->bw.counts.bad_first[i]);
    }
    B->exact_line = B->api == ST_RUNNER_API_RAW ? NULL
                                                : fit_prompts(a, B->api, B->model, B->key, &B->bw, &B->fitted,
                                                              &B->fitted_exact, B->fit_note, sizeof B->fit_note);
    return ST_EXIT_OK;
}

/* The send times of the scheduled items (a session's later turns are released by the hook). */
static int make_schedule(bench *B)
{
    st_workload *work = &B->bw.work;
    B->sched = calloc(work->n ? work->n : 1, sizeof *B->sched);
    if (!B->sched) {
        fprintf(stderr, "servetune bench: out of memory\n");
        return ST_EXIT_FAIL;
    }
    if (B->use_trace_times) {
        for (uint32_t i = 0; i < B->n_static; i++)
            B->sched[i] = work->items[i].arrival;
        if (B->A.trace_rate > 0 && st_arrival_retime(B->sched, B->n_static, B->A.trace_rate) < 0)
            return st_cli_usage_error("bench", "--trace-rate: the trace cannot be re-timed (no time span)");
    } else if (st_arrival_schedule(&B->arr, B->n_static, B->sched) < 0) {
        return st_cli_usage_error("bench", "bad arrival parameters");
    }
    return ST_EXIT_OK;
}

/* Runs the schedule (signals stop it; descriptors raised to the hard limit). */
static int run(bench *B)
{
    bench_args *a = &B->A;
    st_workload *work = &B->bw.work;
    st_runner_config rc = { 0 };
    rc.url = a->url;
    rc.api = B->api;
    rc.stream = !a->no_stream;
    rc.model = B->model;
    rc.api_key = B->key;
    rc.secrets = &B->secrets;
    rc.headers = a->headers.v;
    rc.nheaders = a->headers.n;
    rc.work = work;
    rc.schedule = B->sched;
    rc.warmup = B->nwarm;
    rc.max_concurrency = (uint32_t)a->max_conc;
    rc.timeout_s = a->timeout;
    rc.insecure = a->insecure;
    rc.ca_file = a->ca_file;
    rc.max_lag_ms = a->max_lag_ms;
    rc.spin_ns = a->spin_us > 0 ? (st_ns)(a->spin_us * 1e3) : 0;
    if (work->n_dependent) {
        rc.on_end = work->n_tasks ? st_agent_on_end : st_session_on_end;
        rc.on_end_arg = work;
    }
    progress_ctx pc = { !a->quiet && !a->disable_tqdm && isatty(STDERR_FILENO), 0 };
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
    char err[1024];
    int r = st_runner_run(&rc, &B->res, err, sizeof err);
    if (pc.shown)
        fputc('\n', stderr);
    if (r < 0) {
        bench_error(B, "%s", err);
        return ST_EXIT_FAIL;
    }
    B->have_res = 1;
    /* a closed loop has no schedule: each request's clock starts at its send (a request still
     * waiting for a slot is not late), as vllm bench serve times it under --max-concurrency */
    for (uint32_t i = 0; B->closed_loop && i < B->res.n; i++)
        if (!B->res.records[i].warmup && B->res.records[i].sent >= 0)
            B->res.records[i].scheduled = B->res.records[i].sent;
    return ST_EXIT_OK;
}

static void fill_info(const bench *B, const st_summary_opts *so, st_turn_row *turns, int n_turns, st_bench_info *info)
{
    const bench_args *a = &B->A;
    const st_workload *work = &B->bw.work;
    const st_run_result *res = &B->res;
    memset(info, 0, sizeof *info);
    info->url = a->url;
    info->api = a->api_name;
    info->model = B->model;
    info->stream = !a->no_stream && B->api != ST_RUNNER_API_RAW;
    info->workload = B->api == ST_RUNNER_API_RAW ? "raw"
                     : B->bw.work.n_tasks        ? "agents"
                     : a->trace                  ? "trace"
                     : a->sessions               ? "sessions"
                                                 : "synthetic";
    info->trace_path = a->trace;
    if (B->bw.agent)
        info->trace_format = B->bw.agent == ST_AGENT_FMT_WEKA ? "weka" : "task-graph";
    if (B->bw.is_trace) {
        info->trace_format = st_trace_format_name(B->bw.fmt);
        info->trace_counts = &B->bw.counts;
        static const char *const sm[] = { "replay", "flat", "off" };
        info->trace_sessions = work->n_sessions ? sm[B->bw.smode] : NULL;
    }
    if (!a->trace) {
        info->input_len = (uint32_t)a->input_tokens;
        info->output_len = (uint32_t)a->output_tokens;
        info->prefix_len = (uint32_t)a->prefix_tokens;
        info->range_ratio = a->range_ratio;
        info->vllm_semantics = B->vllm_dataset;
    }
    info->sessions = work->n_sessions;
    if (a->sessions) {
        info->turns_min = B->bw.turns_min;
        info->turns_max = B->bw.turns_max;
        info->turn_input = (uint32_t)a->turn_input;
        info->think_s = isnan(a->think_time) ? 0 : a->think_time;
    }
    info->turns = n_turns > 0 ? turns : NULL;
    info->n_turns = n_turns > 0 ? n_turns : 0;
    info->exact_prompts = B->exact_line;
    info->fitted = B->fitted;
    info->fitted_exact = B->fitted_exact;
    info->seed = (uint64_t)a->seed;
    info->num_requests = work->n - B->nwarm;
    info->warmup = B->nwarm;
    info->arrival = B->use_trace_times ? "trace" : isinf(a->rate) ? "inf" : a->arrival_name;
    info->rate = B->use_trace_times ? (a->trace_rate > 0 ? a->trace_rate : NAN) : a->rate;
    info->burstiness = a->burstiness;
    info->max_concurrency = (uint32_t)a->max_conc;
    info->closed_loop = B->closed_loop;
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

/* Writes one result file (JSON when csv is 0); says why it could not, in the system's words ("No
 * space left on device", never a bare "cannot write"). 0 or -1. */
static int write_file(const char *path, int csv, const bench *B, const st_bench_info *info, const st_summary *sum)
{
    errno = 0;
    FILE *f = fopen(path, "w");
    int e = f ? 0 : errno;
    if (f) {
        int rc = csv ? st_output_csv(f, B->res.records, B->res.n)
                     : st_output_json_write(f, info, sum, B->res.records, B->res.n);
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

/* The table, the JSON and the CSV; the exit status the run earned. */
static int write_results(bench *B)
{
    bench_args *a = &B->A;
    st_summary_opts so = { { a->slo_ttft / 1e3, a->slo_tpot / 1e3, a->slo_e2e / 1e3, a->slo_ttfat / 1e3 }, 0 };
    st_summary sum;
    st_summary_compute(B->res.records, B->res.n, &so, &sum);
    st_turn_row turns[ST_TURN_ROWS];
    /* (agent tasks: by depth in their own table, not by turn) */
    int n_turns = B->bw.work.n_tasks ? 0 : st_turn_rows(B->res.records, B->res.n, turns);
    st_bench_info info;
    fill_info(B, &so, turns, n_turns, &info);
    int status = ST_EXIT_OK;
    st_agent_run_stats as;
    int agents = B->bw.work.n_tasks &&
                 st_agent_run_stats_compute(&B->bw.work, B->res.records, B->res.n, a->slo_makespan / 1e3, &as) == 0;
    if (agents)
        info.tasks = st_agent_run_stats_json(&as);
    if (B->json_path && write_file(B->json_path, 0, B, &info, &sum))
        status = ST_EXIT_FAIL;
    if (a->csv_path && write_file(a->csv_path, 1, B, &info, &sum))
        status = ST_EXIT_FAIL;
    if (!a->quiet) {
        st_output_table(stdout, &info, &sum);
        if (agents)
            st_cli_agent_print(stdout, &as);
        if (!B->res.client_limited && strncmp(B->res.limited_reason, "ok", 2) != 0)
            printf("%-30s%s\n", "Self-check note:", B->res.limited_reason);
    }
    if (sum.failed > 0) {
        status = ST_EXIT_FAIL;
        if (!B->res.interrupted) /* why, in the server's words: not only in the JSON */
            st_output_failures(stderr, "servetune bench", B->res.records, B->res.n, &sum);
    }
    if (st_output_client_limited(&info, &sum))
        status = ST_EXIT_CLIENT_LIMITED;
    if (B->res.interrupted)
        status = ST_EXIT_INTERRUPTED;
    json_decref(info.tasks);
    return status;
}

static void bench_free(bench *B)
{
    if (B->have_res)
        st_run_result_free(&B->res);
    free(B->sched);
    if (B->have_work) {
        if (!B->bw.work.items)
            B->bw.work.n = 0; /* raw mode: a count without items */
        st_workload_free(&B->bw.work);
    }
    free(B->model_owned);
    st_secrets_free(&B->secrets);
}

int cmd_bench(int argc, char **argv)
{
    bench *B = calloc(1, sizeof *B);
    if (!B) {
        fprintf(stderr, "servetune bench: out of memory\n");
        return ST_EXIT_FAIL;
    }
    args_defaults(&B->A);
    st_opt opts[BENCH_OPTS_MAX];
    build_table(&B->A, opts);
    st_opts_result pr;
    char err[1024];
    int rc = st_cli_parse("bench", opts, argc, argv, 0, &pr, bench_help, err, sizeof err);
    if (rc >= 0)
        goto out;
    if ((rc = plan(B, &pr)) != ST_EXIT_OK || (rc = find_model(B)) != ST_EXIT_OK ||
        (rc = prepare_workload(B)) != ST_EXIT_OK || (rc = make_schedule(B)) != ST_EXIT_OK ||
        (rc = run(B)) != ST_EXIT_OK)
        goto out;
    rc = write_results(B);
out:
    bench_free(B);
    free(B);
    st_opts_result_free(&pr);
    return rc;
}
