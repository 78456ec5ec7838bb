/* The audit spec: what to run (engine, model, baseline flags), on what hardware at what
 * price, with which workload and rates, against which SLO, and the candidate
 * configurations. Loaded from YAML (libyaml); every error names the file and line
 * ("spec.yaml:14: rates: expected a list of numbers or inf"). No I/O other than reading
 * the spec file itself; nothing is started here. docs/audit-spec.md documents every key.
 *
 * Ownership: st_spec_load fills a st_spec whose strings and arrays are owned by it and
 * freed by st_spec_free. */
#ifndef ST_AUDIT_SPEC_H
#define ST_AUDIT_SPEC_H
#include <stddef.h>
#include <stdint.h>

#include "core/secret.h"
#include "core/strv.h"
#include "engine/adapter.h"
#include "load/trace.h"
#include "load/workload.h"

/* Environment additions: NAME=value; values may reference ${VAR} (expanded at launch). */
typedef struct st_envv {
    char **key;
    char **val;
    int n;
} st_envv;

/* SLO metrics. */
/* TTFAT: time to the first ANSWER token (reasoning models: reasoning tokens excluded). */
typedef enum st_slo_metric {
    ST_SLO_TTFT = 0,
    ST_SLO_TPOT,
    ST_SLO_ITL,
    ST_SLO_E2E,
    ST_SLO_TTFAT,
    ST_SLO_MAKESPAN, /* a task's (session's) first request's arrival to its last request's end */
    ST_SLO__COUNT
} st_slo_metric;
const char *st_slo_metric_name(st_slo_metric m); /* "ttft", "tpot", "itl", "e2e", "ttfat", "makespan" */

/* One SLO term: percentile `pct` (50, 90, 95, 99) of `metric` must be <= max_ms. */
typedef struct st_slo_term {
    st_slo_metric metric;
    double pct;
    double max_ms;
} st_slo_term;

#define ST_SLO_MAX_TERMS 16
/* terms[0] is always p95 TTFT and terms[1] p95 TPOT (both required). */
typedef struct st_audit_slo {
    st_slo_term terms[ST_SLO_MAX_TERMS];
    int n;
} st_audit_slo;

typedef struct st_spec_config {
    char *name;
    st_strv add_flags;    /* argv tokens appended (a flag given here replaces the baseline's) */
    st_strv remove_flags; /* flag names removed from the baseline (with their value) */
    char *model;          /* model/checkpoint override, or NULL */
    st_envv env;          /* environment additions/overrides */
    char *reason;         /* one line: why it is worth trying */
    int line;             /* line of the entry in the spec file */
} st_spec_config;

/* At most this many rates in the grid (refine adds at most ST_REFINE_MAX_RUNS more). */
#define ST_SPEC_MAX_RATES 48
/* The highest concurrency level, and the most runs a sustained search may make per configuration. */
#define ST_SPEC_MAX_CONCURRENCY 100000
#define ST_SEARCH_MAX_RUNS 64

/* How a cluster job asks for its GPUs: --gres=gpu:N (Slurm) / a resource limit (Kubernetes),
 * --gpus=N, or not at all (an emulator audit on CPU nodes). */
typedef enum st_gpu_request { ST_GPU_GRES = 0, ST_GPU_GPUS, ST_GPU_NONE } st_gpu_request;
/* "gres", "gpus", "none"; st_gpu_request_from_name: 0, or -1 for another name. */
const char *st_gpu_request_name(st_gpu_request g);
int st_gpu_request_from_name(const char *name, st_gpu_request *out);

/* The values of cluster.kubernetes that name things for kubectl, and their checks, for the same
 * values given on the command line (--k8s-image, --k8s-namespace, --k8s-pvc): an image is a word
 * (printable ASCII, no spaces, quotes, '\\', '`' or '$'); a namespace an RFC 1123 label (lower-case
 * letters, digits and '-', at most 63); a volume claim an RFC 1123 name ('.' too, at most 253). */
typedef enum st_k8s_value { ST_K8S_IMAGE, ST_K8S_NAMESPACE, ST_K8S_VOLUME_CLAIM } st_k8s_value;
/* 0, or -1 with "WHAT: what is wrong" in err (what names the value: a key or an option). */
int st_spec_k8s_value_check(st_k8s_value which, const char *what, const char *v, char *err, size_t errlen);

/* GRID and REFINE are burst tests (a fixed number of requests per rate, the first method);
 * SUSTAINED (the default) runs each rate until a steady state is measured (audit/sustain.h) and
 * searches for the capacity (audit/capacity.h). */
typedef enum st_search_mode { ST_SEARCH_GRID = 0, ST_SEARCH_REFINE, ST_SEARCH_SUSTAINED } st_search_mode;
/* "burst" (grid), "burst-refine" (refine), "sustained" */
const char *st_search_mode_name(st_search_mode m);
/* Where the sustained search starts: the grid's middle, the engine model's forecast (servetune
 * predict's own search, for engines it models), or a given rate. */
typedef enum st_search_start { ST_START_AUTO = 0, ST_START_GRID, ST_START_PREDICT, ST_START_RATE } st_search_start;
typedef enum st_workload_kind { ST_WL_SYNTHETIC = 0, ST_WL_TRACE } st_workload_kind;

/* At most this many values in each list of the plan block. */
#define ST_PLAN_LIST_MAX 16
/* At most this many speculation methods in plan.speculation. */
#define ST_PLAN_SPEC_MAX 8

#define ST_SPEC_MAX_TEMPERATURE 2.0 /* workload.temperature: the OpenAI API's range */
#define ST_SPEC_ACCEPT_POS_MAX 32   /* speculation.acceptance by position: the engine model's most draft tokens */

/* A speculative proposer's acceptance (speculation:, plan.speculation[i]): given, or not. */
typedef struct st_spec_accept {
    int given;
    double acceptance; /* per token, 0..1 (n_pos 0) */
    uint32_t n_pos;    /* by draft position, nonincreasing */
    double pos[ST_SPEC_ACCEPT_POS_MAX];
    double draft_share; /* steps with a draft, 0..1 (-1: not given) */
} st_spec_accept;

/* One speculation method the plan tries (plan.speculation, docs/plan.md "Speculative decoding"):
 * vLLM's --speculative-config method, the draft checkpoint (draft_model), the draft lengths (k), and
 * its acceptance (acc.given 0: the spec's speculation block's, else none and the method is not
 * considered). */
typedef struct st_plan_specm {
    char *method;
    char *model;
    int k[ST_PLAN_LIST_MAX], n_k;
    st_spec_accept acc;
    /* acceptance: trace (n-gram lookup): the offline replay of the workload's trace gives one
     * acceptance per k (acc_k[i], given or not: trace_why says why), filled by `servetune plan` */
    int acc_trace;
    st_spec_accept acc_k[ST_PLAN_LIST_MAX];
    char trace_why[300];
} st_plan_specm;

typedef struct st_spec {
    char *path;

    struct {
        st_engine_kind kind;
        st_strv command;   /* the program and fixed arguments; empty: the adapter's default */
        char *model;       /* model to serve (and the name /v1/models must list) */
        char *served_name; /* name the server lists, when not the model (else NULL) */
        st_strv flags;     /* baseline flags */
        st_envv env;
        char *url;         /* endpoint: base URL; others: NULL */
        int api_set;       /* engine.api given (else the kind's default: st_spec_api) */
        st_api_kind api;   /* completions, chat, tgi, llamacpp, sglang (load/api.h) */
        char *api_key_env; /* NAME of the environment variable holding the API key, or NULL */
        int port;          /* 0: pick a free port on 127.0.0.1 */
    } engine;

    struct {
        char *gpu;
        int gpus_per_replica;
        double price_per_gpu_hour;
    } hardware;

    double peak_rate; /* req/s at the stated peak (NAN until resolved with `peak_rate: trace`) */
    /* `peak_rate: trace`: the peak is the trace's (st_audit_resolve_peak): its busiest complete
     * minute (ST_PEAK_BUSIEST_MINUTE), or its mean rate when it spans less than a minute
     * (ST_PEAK_TRACE_MEAN); ST_PEAK_STATED: the number the spec gives */
    enum { ST_PEAK_STATED = 0, ST_PEAK_FROM_TRACE, ST_PEAK_BUSIEST_MINUTE, ST_PEAK_TRACE_MEAN } peak_source;

    struct {
        st_workload_kind kind;
        uint32_t input_tokens, output_tokens;
        double range_ratio;
        uint32_t shared_prefix;
        int exact_prompts_off;           /* exact_prompts: off (default auto: st_spec_fits_prompts) */
        int temperature_set;             /* workload.temperature given: sent in every request */
        double temperature;              /* 0: greedy (a text trace replayed as logged at temperature 0) */
        int allow_synthetic_speculation; /* a speculative configuration on prompts of random ids
                                            (docs/speculative.md): run it anyway, the report saying
                                            why it is not evidence */
        int vllm_semantics;              /* semantics: vllm: the prefix on top of input_tokens, the spread on
                               the rest (vllm bench serve's random dataset); st_spec_synth */
        uint32_t requests_per_rate;
        uint64_t seed;
        char *trace; /* trace file (resolved against the spec's folder) */
        /* workload.trace is an agent trace (its st_agent_format, load/agent.h; 0: a request trace):
         * its task graphs replayed, the rates in tasks/s (task starts), sessions.on set (a task is
         * a session of the workload) */
        int agent;
        double agent_requests_per_task; /* the agent trace's requests over its tasks */
        /* The trace's rows replayed (st_spec_trace_opts): prompt + output at most trace_max_tokens
         * (0: any), arrival in [trace_from_s, trace_to_s) after the first row (to 0: the end),
         * a deterministic fraction trace_sample of whole sessions seeded by seed (0: all). */
        uint32_t trace_max_tokens;
        double trace_from_s, trace_to_s;
        double trace_sample;
        int trace_spread;  /* trace_replay: spread: a run's requests sampled over the whole trace (else its first) */
        char *arrival;     /* "poisson" (default), "constant", "gamma" */
        double burstiness; /* gamma only */
        /* Multi-turn sessions (docs/audit-spec.md): a trace's sessions replayed as conversations
         * (`sessions: replay`; the default, `flat`, sends every row on its recorded time), or
         * synthetic sessions (the `sessions:` block; input_tokens is the first prompt, the shared
         * prefix its system prompt, output_tokens every turn's answer). When on, the arrival
         * schedule and the offered rate are those of session STARTS (first turns, sessions/s); a
         * later turn is sent when the turn before it ended plus the think time, with the
         * conversation so far (the answers the server returned) in front of its new text. */
        struct {
            int on;                            /* replayed (trace) or generated (synthetic) */
            uint32_t turns_min, turns_max;     /* synthetic: turns per session (default 4) */
            uint32_t user_tokens;              /* synthetic: new user tokens in each later turn (default 64) */
            double think_s;                    /* pause between a turn's end and the next (synthetic: default 0; a
                                              trace: workload.think_time, when think_set) */
            int think_set;                     /* a trace: think_time replaces the think times it records */
            int think_exp;                     /* synthetic: exponential think times with mean think_s */
            uint32_t fan_out_min, fan_out_max; /* synthetic agent tasks (`fan_out:`; 0: conversations):
                                                  each later planner turn fans out to this many workers
                                                  and joins them (load/agent.h st_agent_sessions) */
        } sessions;
    } workload;

    double *rates; /* in the order given; INFINITY for inf. With `concurrency:` the levels (integers) */
    int n_rates;
    int closed_loop; /* the spec gave `concurrency:`: each level is a closed-loop run (max concurrency) */
    uint32_t warmup_requests;

    st_audit_slo slo;

    st_spec_config *configs; /* configs[0] is the baseline ("current setup") */
    int n_configs;

    struct {
        st_search_mode mode;
        double tolerance;        /* refine / the search stop when (fail - pass) / pass <= tolerance */
        uint32_t request_budget; /* burst: requests refine may spend beyond the grid; sustained: requests
                                    per configuration, every run (0: no limit) */
        int early_stop;          /* stop a run once its verdict is known (default on) */
        double skip_margin;      /* burst: skip higher rates after a failure by this factor (0: never) */
        /* sustained */
        double confidence;            /* of every call and interval (default 0.95) */
        double max_duration_s;        /* per run, engine time (default 300 s) */
        double min_window_s;          /* the measurement window lasts at least this (default 20 s) */
        uint32_t min_window_requests; /* and receives at least this many arrivals (default 200) */
        double warmup_e2e;            /* warm phase: this many median E2Es (default 2) */
        uint32_t max_runs;            /* runs per configuration (default 12) */
        uint32_t max_replicates;      /* runs at one rate (default 3) */
        st_search_start start;
        double start_rate; /* ST_START_RATE */
    } search;

    struct {
        double startup_s;
        double request_s;
        double stop_grace_s;
    } timeouts;

    /* Where the configurations run when the audit is spread over a cluster (docs/cluster.md);
     * the command line overrides each key. Nothing here changes a run or its run key. */
    struct {
        struct {
            char *partition, *account, *time; /* sbatch --partition/--account/--time, or NULL */
            int gpus_per_task;                /* 0: hardware.gpus_per_replica */
            st_gpu_request gpu_request;       /* how the GPUs are asked for */
            int max_concurrent;               /* array tasks running at once (0: as Slurm allows) */
            st_strv sbatch_args;              /* more sbatch arguments, one word each */
        } slurm;
        struct {
            char *image;        /* container image holding servetune (and the engine) */
            char *ns;           /* namespace, or NULL */
            char *volume_claim; /* the PersistentVolumeClaim that holds the output folder */
            char *gpu_resource; /* extended resource name, default nvidia.com/gpu */
            int parallelism;    /* pods at once (0: one per configuration) */
        } kubernetes;
    } cluster;

    /* servetune plan's search space (the audit ignores it; docs/plan.md). Lists left empty take
     * the defaults named there. */
    struct {
        int set;      /* the spec has a plan block */
        st_strv gpus; /* GPU keys; empty: every GPU the engine model knows that has a price */
        int tp[ST_PLAN_LIST_MAX], n_tp;
        char *weights[ST_PLAN_LIST_MAX];     /* weight formats: bf16, fp8, int8, awq, gptq */
        char *checkpoints[ST_PLAN_LIST_MAX]; /* the checkpoint of each format */
        int n_weights;                       /* 0: bf16 = engine.model */
        st_strv kv_dtypes;                   /* empty: auto, fp8 */
        long max_num_seqs[ST_PLAN_LIST_MAX], max_batched[ST_PLAN_LIST_MAX];
        int n_seqs, n_batched;
        long max_model_len; /* 0: from the workload (its longest input + output, or a trace's p99) */
        char *prices;       /* a price list file (resolved against the spec's folder); NULL: built in */
        char *provider;     /* whose price; NULL: the lowest on-demand */
        int top;            /* candidates written as an audit spec (default 3) */
        /* max_model_len as a list (max_model_len is its first); n_len 0: max_model_len alone */
        long max_model_lens[ST_PLAN_LIST_MAX];
        int n_len;
        /* speculation methods tried beside plain decoding (n_spec 0: none asked) */
        st_plan_specm spec[ST_PLAN_SPEC_MAX];
        int n_spec;
    } plan;

    /* A traffic day (plan, and the audit report when given): the rate hour by hour, how a fleet
     * scales and what serverless costs (plan/day.h). */
    struct {
        int set;
        double hourly_rps[24];
        /* Where the day comes from: the spec's 24 rates (ST_DAY_STATED), or the trace's own times
         * (`hourly_rps: trace`, or no hourly_rps with a trace workload: ST_DAY_FROM_TRACE until
         * st_audit_resolve_day fills hourly_rps and hour_known, then ST_DAY_TRACE_UTC when the
         * trace's times are calendar times, ST_DAY_TRACE_FIRST when hours count from its first
         * request; load/hourly.h). hour_known: the hours priced (every one for a stated day; for
         * a trace, the hours it covers: a trace shorter than a day prices only those). */
        enum { ST_DAY_STATED = 0, ST_DAY_FROM_TRACE, ST_DAY_TRACE_UTC, ST_DAY_TRACE_FIRST } day_source;
        unsigned char hour_known[24];
        int hours_known;
        double scale_up_delay_s;           /* default 600 */
        int min_replicas;                  /* default 0 */
        double idle_timeout_s;             /* serverless: default 5 (RunPod's default) */
        double cold_start_s;               /* serverless: default 60 */
        char *serverless_provider;         /* whose serverless price; NULL: the lowest listed */
        double serverless_price_per_gpu_s; /* > 0: this price instead of the list's */
    } traffic;
    /* speculation: the acceptance the engine model gives a configuration that speculates
     * (--speculative-config) when its flags carry none (docs/speculative.md "In the engine model") */
    st_spec_accept speculation;

    /* The quality pass (docs/quality.md): each configuration answers the same prompts greedily
     * with top-k log-probabilities, compared with the baseline's answers (audit/quality.h). */
    struct {
        int enabled;            /* the spec has a quality block not switched off */
        uint32_t prompts;       /* default ST_QUALITY_PROMPTS */
        uint32_t top_k;         /* log-probabilities per position, default ST_QUALITY_TOP_K */
        uint32_t max_tokens;    /* answer length, default ST_QUALITY_MAX_TOKENS */
        double max_mean_kld;    /* limits; NAN: not set */
        double min_same_top1;   /* share 0..1 */
        double min_exact_match; /* share 0..1 */
    } quality;
} st_spec;

/* The quality block's defaults and bounds. */
#define ST_QUALITY_PROMPTS 64
#define ST_QUALITY_MAX_PROMPTS 4096
#define ST_QUALITY_TOP_K 10
#define ST_QUALITY_MAX_TOP_K 64
#define ST_QUALITY_MAX_TOKENS 32
#define ST_QUALITY_MAX_MAX_TOKENS 1024
/* The highest mean KL divergence limit (nats): far beyond any model that still answers. */
#define ST_QUALITY_MAX_KLD 100.0

/* The most items of a list (engine.flags, a configuration's add_flags...) and of an environment
 * mapping (engine.env, a configuration's env). */
#define ST_SPEC_MAX_ITEMS 256
/* The largest spec file accepted, and its deepest nesting of lists and mappings. */
#define ST_SPEC_MAX_BYTES (1u << 20)
#define ST_SPEC_MAX_DEPTH 64
/* The most requests in a rate run or a warm-up, and the highest peak (req/s) a spec may state. */
#define ST_SPEC_MAX_REQUESTS 1000000u
#define ST_SPEC_MAX_PEAK_RATE 1e9
/* The longest duration a spec may give (timeouts, search windows, traffic delays): 100 days, far
 * below what nanoseconds in 64 bits hold (292 years), so that every product stays exact. */
#define ST_SPEC_MAX_DURATION_S 8640000.0
/* The highest finite rate of the grid, req/s (as peak_rate). */
#define ST_SPEC_MAX_RATE ST_SPEC_MAX_PEAK_RATE
/* The highest price a spec may state (US$ per GPU-hour): far above any rental, low enough that
 * every cost figure prints in full. */
#define ST_SPEC_MAX_PRICE_PER_GPU_HOUR 1000.0
/* The longest timeout (timeouts.startup, .request, .stop_grace) a spec may set: a day. */
#define ST_SPEC_MAX_TIMEOUT_S 86400.0
/* The longest think time a synthetic session may pause (seconds). */
#define ST_SPEC_MAX_THINK_S ST_SESSION_THINK_MAX_S

/* Loads and validates a spec file's syntax and values (an agent trace named by workload.trace is
 * read whole here: load/agent_file.h) (st_spec_check, audit/check.h, checks the
 * rest before anything runs). 0, or -1 with "file:line: what is wrong" in err. */
int st_spec_load(const char *path, st_spec *out, char *err, size_t errlen);
/* Same from a string (name is used in messages and for resolving relative paths). */
int st_spec_parse(const char *name, const char *text, size_t len, st_spec *out, char *err, size_t errlen);
/* The reader's options for the spec's trace: its filters (workload.trace_max_tokens,
 * trace_window, trace_sample with workload.seed), everything else zero. Every reading of the
 * trace for an audit, --check, predict and plan starts from these. */
void st_spec_trace_opts(const st_spec *s, st_trace_opts *o);
void st_spec_free(st_spec *s);
/* An acceptance as a command line gives it (plan --spec-acceptance): A, or A1/A2/... by position,
 * under the same rules as the spec's speculation.acceptance (each within 0..1 and at most the one
 * before it, at most ST_SPEC_ACCEPT_POS_MAX); draft_share -1 (not given). 0, or -1 with err. */
int st_spec_accept_parse(const char *text, st_spec_accept *a, char *err, size_t errlen);

/* The flags a configuration runs with: the baseline's, minus remove_flags and minus any flag
 * add_flags sets, plus add_flags. A flag's value is the next token when that does not start
 * with "-", or the part after "=". Fills out (owned strings; free with st_strv_free). */
int st_spec_config_flags(const st_spec *s, const st_spec_config *c, st_strv *out);
/* The model a configuration serves (override or the spec's). */
const char *st_spec_config_model(const st_spec *s, const st_spec_config *c);
/* The adapter's launch of configuration c on port (engine/adapter.h): its model, flags and the
 * spec's engine block. 0, or -1 with err. */
int st_spec_launch(const st_spec *s, const st_spec_config *c, int port, const char *self_exe, st_launch *out, char *err,
                   size_t errlen);
/* The bounds of a sustained spec that make a steady state impossible whatever the engine does
 * (the window longer than max_duration, a budget below the window, a rate too low to fill the
 * window in time). 0, or -1 with the reason in err. */
int st_spec_check_bounds(const st_spec *s, char *err, size_t errlen);
/* The secrets of a spec, from this process's environment: the API key (engine.api_key_env) and
 * the value of every ${VAR} the spec references (engine command, flags and env; each
 * configuration's add_flags and env). 0, or -1 with err when a variable is unset or its value
 * too short to be redacted (out is left empty). Free with st_secrets_free. */
int st_spec_secrets(const st_spec *s, st_secrets *out, char *err, size_t errlen);
/* Finds a configuration by name; NULL when none. */
const st_spec_config *st_spec_find_config(const st_spec *s, const char *name);

/* The synthetic workload's parameters for n requests from seed (workload.kind synthetic). */
void st_spec_synth(const st_spec *s, uint32_t n, uint64_t seed, st_synth_params *p);
/* Synthetic sessions (workload.sessions on a synthetic workload): the generator's parameters for
 * about n requests (ceil(n / the mean turns per session) sessions, at least 1) from seed. */
void st_spec_sessions(const st_spec *s, uint32_t n, uint64_t seed, st_session_params *p);
/* The mean requests a session start brings: a synthetic session's mean turns ((turns_min +
 * turns_max) / 2; agent tasks with fan_out, their planner turns, workers and joins), an agent
 * trace's requests per task; 1 otherwise (a trace's sessions: not known without reading it). */
double st_spec_turns_mean(const st_spec *s);
/* What an offered rate counts: "req/s", or with multi-turn sessions "sessions/s" (session
 * starts). */
const char *st_spec_rate_unit(const st_spec *s);
/* How the spec's runs are measured, as the reports name it: "sustained", "sustained-concurrency"
 * (a sustained closed loop), "burst" (fixed-count open-loop runs), "closed-loop-count" (a burst
 * mode with `concurrency:`: each level a fixed-count closed loop of requests_per_rate requests at
 * most that many in flight, as `vllm bench serve --max-concurrency C --num-prompts N`). */
const char *st_spec_method_name(const st_spec *s);
/* The most turns a synthetic session may have. */
#define ST_SPEC_MAX_TURNS ST_SESSION_TURNS_MAX

/* A synthetic prompt's mean length in tokens, shared prefix included (input_tokens, plus the
 * prefix under vLLM's semantics). */
double st_spec_mean_input(const st_spec *s);

/* 1 when the audit fits each prompt to its exact token count with the engine's /tokenize
 * before a run: a text API (chat, or TGI's, the tgi engine's default), exact_prompts not off, and
 * no multi-turn sessions (their later turns carry the conversation's real text). */
int st_spec_fits_prompts(const st_spec *s);
/* The load API the engine is spoken to in: engine.api, else the engine kind's default. */
st_api_kind st_spec_api(const st_spec *s);

#endif
