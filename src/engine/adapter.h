/* Engine adapters: for each engine kind, how to build the argument vector that starts it on
 * 127.0.0.1:PORT (execve-style, never a shell), how to tell it is ready and that it is ours
 * (/health, then the model list must name the expected model), which metrics dialect its
 * /metrics speaks, and which API the load uses by default.
 *
 *   vllm      [vllm serve] MODEL FLAGS --host 127.0.0.1 --port P
 *   emulator  [/proc/self/exe emulate serve] MODEL FLAGS --host 127.0.0.1 --port P
 *   sglang    [python3 -m sglang.launch_server] --model-path MODEL FLAGS --host .. --port P --enable-metrics
 *   tgi       [text-generation-launcher] --model-id MODEL FLAGS --hostname .. --port P
 *   llamacpp  [llama-server] -m MODEL FLAGS [--alias NAME] --host .. --port P --metrics
 *             (--alias when the flags have no --alias/-a: NAME is served_name or MODEL, so that
 *             /v1/models lists what the spec expects instead of the file's path)
 *   endpoint  nothing started; the spec's url
 * The bracketed part is the default command; the spec's engine.command replaces it. --host and
 * --port in the flags are dropped (servetune chooses them).
 *
 * Secrets never reach the command line (which any user can read in /proc): a flag whose value is a
 * ${VAR} reference is given to the engine through the environment variable it reads that flag
 * from (st_adapter_secret_env: vLLM's --api-key through VLLM_API_KEY, ...); a ${VAR} anywhere
 * else in the argument vector is refused. */
#ifndef ST_ENGINE_ADAPTER_H
#define ST_ENGINE_ADAPTER_H
#include <stddef.h>

#include "core/strv.h"
#include "engine/metrics.h"
#include "load/api.h"

typedef enum st_engine_kind {
    ST_ENGINE_VLLM = 0,
    ST_ENGINE_SGLANG,
    ST_ENGINE_TGI,
    ST_ENGINE_LLAMACPP,
    ST_ENGINE_EMULATOR,
    ST_ENGINE_ENDPOINT,
    ST_ENGINE__COUNT
} st_engine_kind;

/* What is fixed per engine kind, in one table (adapter.c's kinds[]): its name in specs, the load
 * API a spec that names none gets, the metrics dialect (engine/metrics.h) and where it lists its
 * models, how its command line is spelled, and its deploy snippets' image, port and GPU flag.
 * st_adapter_launch and report/deploy.c read it. */
#define ST_ENGINE_PROGRAM_WORDS 4
typedef struct st_engine_kind_info {
    const char *name;
    st_api_kind api;                    /* the default load API */
    st_metrics_dialect metrics_dialect; /* whose metric names its /metrics uses */
    const char *models_path;            /* "/v1/models" or "/info" (TGI) */
    /* where it says its version (the report's "Engine" line): the path and the JSON key there */
    const char *version_path, *version_key;
    /* the command line: the program's words (NULL-ended; the emulator's is servetune's own),
     * the flag before the model (NULL: the model is positional), the host flag, the flag that
     * turns the metrics endpoint on (NULL: on by default) */
    const char *program[ST_ENGINE_PROGRAM_WORDS];
    const char *model_flag;
    const char *host_flag;
    const char *metrics_flag;
    /* deploy snippets (report/deploy.c): the port in the container, the images (GPU, CPU)
     * and the flag that sets GPUs per replica (NULL: none) */
    int deploy_port;
    const char *image, *image_cpu;
    const char *tp_flag;
} st_engine_kind_info;

/* The descriptor of kind k, or NULL for a value outside st_engine_kind. */
const st_engine_kind_info *st_engine_kind_info_of(st_engine_kind k);
const char *st_engine_kind_name(st_engine_kind k);
int st_engine_kind_from_name(const char *s, st_engine_kind *out);

/* What an adapter needs to know of one configuration (the audit fills it from its spec;
 * nothing here is owned). */
typedef struct st_engine_desc {
    st_engine_kind kind;
    const st_strv *command;  /* the program and fixed arguments; NULL or empty: the default */
    const char *model;       /* model to serve */
    const st_strv *flags;    /* the configuration's engine flags */
    const char *served_name; /* name the server lists when not the model and no
                              * --served-model-name flag says it (else NULL) */
    const char *url;         /* endpoint only: base URL */
    int api_set;             /* 0: the kind's default load API */
    st_api_kind api;         /* the load API when api_set */
} st_engine_desc;

typedef struct st_launch {
    st_strv argv;         /* empty for an endpoint */
    char *expected_model; /* the name /v1/models (or /info) must list */
    char *base_url;       /* "http://127.0.0.1:PORT" or the endpoint's url, no trailing slash */
    char *host;           /* "127.0.0.1" or the endpoint's host */
    int port;
    st_api_kind api; /* load API: spec's engine.api or the kind's default */
    const char *health_path;
    const char *models_path;            /* "/v1/models" or "/info" (TGI) */
    st_metrics_dialect metrics_dialect; /* whose metric names its /metrics uses */
    const char *version_path;           /* where it says its version ("/version"; llama.cpp: "/props") */
    const char *version_key;            /* the key there ("version"; llama.cpp: "build_info") */
    double time_scale;                  /* the emulator's --time-scale (emulated s per wall s), else 1 */
    const char *api_key;                /* from the spec's api_key_env at launch time (not owned; never logged) */
    st_strv env_key, env_val;           /* environment for the secret flags (values: the ${VAR} references, expanded
                                    when the engine starts) */
} st_launch;

/* Builds the launch of an engine on port (ignored for an endpoint). self_exe: path of the
 * servetune binary (for the emulator). 0, or -1 with err. */
int st_adapter_launch(const st_engine_desc *d, int port, const char *self_exe, st_launch *out, char *err,
                      size_t errlen);
void st_launch_free(st_launch *l);
/* The environment variable engine kind k reads flag (e.g. "--api-key") from, or NULL when it has
 * none (then a ${VAR} value for that flag cannot be kept off the command line and is refused). */
const char *st_adapter_secret_env(st_engine_kind k, const char *flag);
/* The environment for the secret flags (NAME='${VAR}' ...) then the argv, as one POSIX shell
 * command line (each word quoted where needed, st_buf_shell_quote), for logs and reports:
 * references, never values; one longer than n bytes ends in " ..." (never cut silently). */
#define ST_LAUNCH_CMDLINE_MAX ((size_t)1 << 16)
void st_launch_cmdline(const st_launch *l, char *out, size_t n);

/* The value of option `name` in a flag list (--name V or --name=V), or NULL. */
const char *st_flag_value(const st_strv *flags, const char *name);

/* Whether a /v1/models (OpenAI list) or /info (TGI) body names model. 1 yes, 0 no (names[] gets
 * what it lists, comma-separated), -1 when the body is not such a document. */
int st_adapter_models_lists(const char *body, size_t len, const char *model, char *names, size_t names_len);

typedef enum st_probe_result {
    ST_PROBE_READY = 0,
    ST_PROBE_NOT_YET,      /* refused / 503 / loading: try again */
    ST_PROBE_WRONG_SERVER, /* answers, but not with our model */
} st_probe_result;

/* One readiness check: GET health_path must answer 200, then models_path must list the expected
 * model. detail says what was seen. Each GET is bounded by timeout_s. */
st_probe_result st_adapter_probe(const st_launch *l, double timeout_s, char *detail, size_t detail_len);

#endif
