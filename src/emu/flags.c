#include "emu/flags.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/json.h"
#include "emu/calib.h"
#include "emu/catalog.h"
#include "emu/specstep.h"

void st_emu_args_defaults(st_emu_args *a)
{
    memset(a, 0, sizeof *a);
    a->host = "127.0.0.1"; /* vLLM listens on every interface; a benchmark tool only on loopback */
    a->kv_dtype = "auto";
    a->dtype = "auto";
    a->port = 8000;
    a->tp = 1;
    a->block_size = 16;
    a->util = 0.90;
    a->time_scale = 1.0;
    a->slowdown = 1.0;
    a->keep_alive_s = 5;      /* vLLM's --timeout-keep-alive (uvicorn's default) */
    a->header_timeout_s = 10; /* a request must arrive within this long of its first byte */
    a->spec_draft_share = -1;
}

void st_emu_args_table(st_emu_args *a, st_opt *o)
{
    const st_opt t[] = {
        { "host", 0, ST_OPT_STR, &a->host, "HOST", "address to listen on (127.0.0.1; 0.0.0.0: every interface)", 0, 0,
          0 },
        { "port", 0, ST_OPT_LONG, &a->port, "PORT", "port (8000; 0 = any free port)", 0, 65535, 0 },
        { "model", 0, ST_OPT_STR, &a->model, "MODEL", "the model (instead of the positional MODEL)", 0, 0, 0 },
        { "served-model-name", 0, ST_OPT_STR, &a->served, "NAME", "model id in the API (MODEL)", 0, 0, 0 },
        { "timeout-keep-alive", 0, ST_OPT_DURATION, &a->keep_alive_s, "T",
          "close a keep-alive connection idle this long (5)", 0, 0, 0 },
        { "header-timeout", 0, ST_OPT_DURATION, &a->header_timeout_s, "T",
          "close a connection whose request has not arrived whole this long after its first byte (10)", 0, 0, 0 },
        { "api-key", 0, ST_OPT_STR, &a->api_key, "KEY",
          "require 'Authorization: Bearer KEY' on /v1 endpoints (else VLLM_API_KEY)", 0, 0, 0 },
        { "max-model-len", 0, ST_OPT_LONG, &a->max_model_len, "N", "context length (the model's)", 1, 10000000, 0 },
        { "gpu-memory-utilization", 0, ST_OPT_DOUBLE, &a->util, "F", "fraction of GPU memory for vLLM (0.90)", 0, 0,
          0 },
        { "max-num-seqs", 0, ST_OPT_LONG, &a->max_num_seqs, "N", "running requests (1024 on H100/H200, else 256)", 1,
          1000000, 0 },
        { "max-num-batched-tokens", 0, ST_OPT_LONG, &a->max_batched, "N", "token budget per step (8192 / 2048)", 1,
          10000000, 0 },
        { "kv-cache-dtype", 0, ST_OPT_STR, &a->kv_dtype, "T", "auto, bfloat16, fp8, fp8_e4m3, fp8_e5m2 (auto)", 0, 0,
          0 },
        { "enable-prefix-caching", 0, ST_OPT_FLAG, &a->prefix_on, NULL, "prefix caching on (default)", 0, 0, 0 },
        { "no-enable-prefix-caching", 0, ST_OPT_FLAG, &a->prefix_off, NULL, "prefix caching off", 0, 0, 0 },
        { "quantization", 'q', ST_OPT_STR, &a->quant, "Q",
          "fp8, awq, gptq, awq_marlin, gptq_marlin (from the checkpoint)", 0, 0, 0 },
        { "dtype", 0, ST_OPT_STR, &a->dtype, "T", "auto, bfloat16, float16, half (auto)", 0, 0, 0 },
        { "tensor-parallel-size", 0, ST_OPT_LONG, &a->tp, "N", "GPUs per replica (1)", 1, 64, 0 },
        { "block-size", 0, ST_OPT_LONG, &a->block_size, "N", "KV block size in tokens: 8, 16, 32, 64, 128 (16)", 0, 0,
          0 },
        { "seed", 0, ST_OPT_LONG, &a->seed, "N", "random seed (faults, ids)", 0, 0, 0 },
        { "enforce-eager", 0, ST_OPT_FLAG, &a->eager, NULL, "no CUDA graphs (slower small steps)", 0, 0, 0 },
        { "async-scheduling", 0, ST_OPT_FLAG, &a->async_on, NULL,
          "overlap scheduling with the GPU step (default from vLLM 0.14)", 0, 0, 0 },
        { "no-async-scheduling", 0, ST_OPT_FLAG, &a->async_off, NULL, "no async scheduling", 0, 0, 0 },
        { "calibration", 0, ST_OPT_STR, &a->calibration, "FILE",
          "engine-model constants from `servetune calibrate` (must match GPU, model, weights)", 0, 0, 0 },
        { "vllm-version", 0, ST_OPT_STR, &a->vllm_version, "X.Y.Z",
          "the vLLM version whose behaviour to model: memory profiling, async scheduling (0.14+), full CUDA graphs for "
          "decode (0.11+; piecewise before), the chat template's format detection on every chat request (before "
          "0.9.2), admission only when a request's whole sequence fits the free KV blocks (0.19+) (0.10.1)",
          0, 0, 0 },
        { "speculative-config", 0, ST_OPT_STR, &a->spec_config, "JSON",
          "speculative decoding: {\"method\":\"ngram\"|\"draft_model\"|\"eagle\"|..., "
          "\"num_speculative_tokens\":K, \"model\":DRAFT}",
          0, 0, 0 },
        { "spec-acceptance", 0, ST_OPT_STR, &a->spec_acceptance, "A|A1/A2/..",
          "speculation's acceptance: per token, or by draft position (0: none kept)", 0, 0, 0 },
        { "spec-draft-share", 0, ST_OPT_DOUBLE, &a->spec_draft_share, "F",
          "share of decode steps with a draft (1; ngram without --spec-acceptance: 0)", 0, 1, 0 },
        { "gpu", 0, ST_OPT_STR, &a->gpu, "NAME|FILE", "H100, H200, A100, L40S, RTX4090, or a GPU file (required)", 0, 0,
          0 },
        { "time-scale", 0, ST_OPT_DOUBLE, &a->time_scale, "K", "emulated seconds per wall second (1; at most 1000)", 0,
          0, 0 },
        { "no-model", 0, ST_OPT_FLAG, &a->no_model, NULL, "zero step time (benchmarks the server itself)", 0, 0, 0 },
        { "ground-truth", 0, ST_OPT_STR, &a->ground_truth, "FILE", "write per-request engine times as JSONL", 0, 0, 0 },
        { "print-jitter", 0, ST_OPT_FLAG, &a->jitter, NULL, "print token emission jitter at exit (spins the loop)", 0,
          0, 0 },
        { "quiet", 0, ST_OPT_FLAG, &a->quiet, NULL, "warnings and errors only", 0, 0, 0 },
        { "enable-prompt-tokens-details", 0, ST_OPT_FLAG, &a->prompt_details, NULL,
          "usage reports prompt_tokens_details.cached_tokens", 0, 0, 0 },
        { "reasoning-share", 0, ST_OPT_DOUBLE, &a->reasoning_share, "F",
          "a reasoning model: the first F of each output are reasoning tokens (0)", 0, 1, 0 },
        { "fault-startup-delay", 0, ST_OPT_DURATION, &a->startup_delay, "D", "TEST ONLY: wait D before listening", 0, 0,
          0 },
        { "fault-startup-fail", 0, ST_OPT_FLAG, &a->fail_start, NULL, "TEST ONLY: fail to start (exit 1)", 0, 0, 0 },
        { "fault-crash-after", 0, ST_OPT_LONG, &a->crash_after, "N",
          "TEST ONLY: exit abruptly at generation request N+1", 0, 1000000000, 0 },
        { "fault-hang-after", 0, ST_OPT_LONG, &a->hang_after, "N",
          "TEST ONLY: stop responding at generation request N+1", 0, 1000000000, 0 },
        { "fault-500-rate", 0, ST_OPT_DOUBLE, &a->f500, "F", "TEST ONLY: answer this fraction of requests with 500", 0,
          1, 0 },
        { "fault-midstream-rate", 0, ST_OPT_DOUBLE, &a->fmid, "F", "TEST ONLY: this fraction of streams fail half-way",
          0, 1, 0 },
        { "fault-decode-slowdown", 0, ST_OPT_DOUBLE, &a->slowdown, "F",
          "TEST ONLY: decode work x F (a slow kernel path)", 0, 0, 0 },
        { "fault-host-stall", 0, ST_OPT_DURATION, &a->host_stall, "D",
          "TEST ONLY: the process stalls D of wall time before sending each step's tokens (a busy host)", 0, 0, 0 },
        { 0 },
    };
    memcpy(o, t, sizeof t);
}

/* The emulator's own flags (in the table above, not in vLLM's `serve`), and which are switches. */
static const char *const emu_only[] = {
    "gpu", "time-scale", "no-model", "ground-truth", "print-jitter", "quiet", "spec-acceptance", "spec-draft-share",
    NULL
};
static const char *const emu_switches[] = { "no-model", "print-jitter", "quiet", "fault-startup-fail", NULL };

static int flag_is(const char *flag, const char *name)
{
    if (strncmp(flag, "--", 2))
        return 0;
    size_t n = strlen(name);
    return !strncmp(flag + 2, name, n) && (flag[2 + n] == '\0' || flag[2 + n] == '=');
}

int st_emu_flag_emulator_only(const char *flag)
{
    if (!strncmp(flag, "--fault-", 8))
        return 1;
    for (int i = 0; emu_only[i]; i++)
        if (flag_is(flag, emu_only[i]))
            return 1;
    return 0;
}

int st_emu_flag_takes_value(const char *flag)
{
    if (strchr(flag, '='))
        return 0; /* the value is in the word */
    for (int i = 0; emu_switches[i]; i++)
        if (flag_is(flag, emu_switches[i]))
            return 0;
    return 1;
}

int st_emu_args_parse(st_emu_args *a, const st_opt *opts, int argc, char **argv, st_opts_result *r, char *err,
                      size_t errlen)
{
    memset(r, 0, sizeof *r);
    /* vLLM spells a few flags with one dash */
    char **args = calloc((size_t)argc + 1, sizeof *args);
    if (!args) {
        snprintf(err, errlen, "out of memory");
        return ST_EMU_ARGS_USAGE;
    }
    int na = 0;
    for (int i = 0; i < argc; i++)
        args[na++] = !strcmp(argv[i], "-tp") ? "--tensor-parallel-size" : argv[i];
    int rc = st_opts_parse(opts, na, args, 1, r, err, errlen) < 0 ? ST_EMU_ARGS_USAGE : 0;
    free(args);
    if (rc || r->help)
        return rc;
    int pi = 0;
    if (r->npos > 0 && !strcmp(r->pos[0], "serve"))
        pi = 1;
    else if (r->npos > 0) {
        snprintf(err, errlen, "the first argument must be 'serve' (servetune emulate serve MODEL ...)");
        return ST_EMU_ARGS_USAGE;
    }
    if (!a->model && r->npos > pi)
        a->model = r->pos[pi++];
    if (r->npos > pi) {
        snprintf(err, errlen, "unrecognized arguments: %s", r->pos[pi]);
        return ST_EMU_ARGS_USAGE;
    }
    if (!a->model) {
        snprintf(err, errlen, "the following arguments are required: model_tag");
        return ST_EMU_ARGS_USAGE;
    }
    return 0;
}

/* The model a draft's name stands for: a config.json path, or the catalog. */
static int find_model(const char *name, st_emu_model *m, char *err, size_t errlen)
{
    if (access(name, R_OK) == 0)
        return st_emu_model_load_file(name, m, err, errlen);
    return st_emu_model_find(name, m, err, errlen);
}

/* The speculative method a --speculative-config names: its kind (ngram, head, mtp) and draft model. */
typedef struct spec_method {
    char method[48], model[256];
    int ngram, mtp, head;
} spec_method;

/* The config's method (inferred from a draft model's name when absent), checked against those served. */
static int spec_method_of(const st_json_val *root, spec_method *s, char *err, size_t errlen)
{
    st_json_val v;
    if (st_json_get(root, "method", &v) == 0 && v.type != ST_JSON_ABSENT &&
        (v.type != ST_JSON_STRING || st_json_str(&v, s->method, sizeof s->method, NULL))) {
        snprintf(err, errlen, "--speculative-config: \"method\" must be a string");
        return ST_EMU_ARGS_USAGE;
    }
    if (st_json_get(root, "model", &v) == 0 && v.type == ST_JSON_STRING)
        st_json_str(&v, s->model, sizeof s->model, NULL);
    const char *method = s->method;
    if (!method[0] && s->model[0])
        snprintf(s->method, sizeof s->method, "draft_model"); /* vLLM infers it from the draft's name */
    size_t ml = strlen(method);
    s->ngram = !strcmp(method, "ngram") || !strcmp(method, "ngram_gpu") || !strcmp(method, "suffix");
    s->mtp = !strcmp(method, "mtp") || (ml > 4 && !strcmp(method + ml - 4, "_mtp"));
    s->head = !strcmp(method, "eagle") || !strcmp(method, "eagle3") || !strcmp(method, "medusa") ||
              !strcmp(method, "mlp_speculator") || s->mtp;
    if (!s->ngram && !s->head && strcmp(method, "draft_model")) {
        snprintf(err, errlen,
                 "--speculative-config: method '%s' is not one the engine model serves (ngram, ngram_gpu, suffix, "
                 "draft_model, eagle, eagle3, medusa, mlp_speculator, mtp, *_mtp)",
                 method[0] ? method : "(none, and no draft model)");
        return ST_EMU_ARGS_USAGE;
    }
    return 0;
}

/* num_speculative_tokens: required (one for MTP), at most ST_EMU_SPEC_MAX_K. */
static int spec_k_of(const st_json_val *root, const spec_method *s, uint32_t *k, char *err, size_t errlen)
{
    st_json_val v;
    *k = 0;
    int kr = st_json_get(root, "num_speculative_tokens", &v);
    if (kr == 0 && v.type != ST_JSON_ABSENT) {
        if (st_json_u32(&v, k) || *k < 1) {
            snprintf(err, errlen, "--speculative-config: num_speculative_tokens must be a whole number >= 1");
            return ST_EMU_ARGS_USAGE;
        }
    } else if (s->mtp) {
        *k = 1; /* the checkpoint's num_nextn_predict_layers: one in the models that ship it */
    } else {
        snprintf(err, errlen, "--speculative-config: num_speculative_tokens is required for method '%s'", s->method);
        return ST_EMU_ARGS_USAGE;
    }
    if (*k > ST_EMU_SPEC_MAX_K) {
        snprintf(err, errlen, "--speculative-config: num_speculative_tokens %u: the engine model takes at most %d", *k,
                 ST_EMU_SPEC_MAX_K);
        return ST_EMU_ARGS_USAGE;
    }
    return 0;
}

/* The drafter: a draft model of the target's vocabulary, or a head of one target layer. */
static int spec_draft_of(const spec_method *s, st_emu_config *c, char *err, size_t errlen)
{
    st_emu_spec *sp = &c->spec;
    if (!strcmp(s->method, "draft_model")) {
        if (!s->model[0]) {
            snprintf(err, errlen, "--speculative-config: method draft_model needs \"model\"");
            return ST_EMU_ARGS_USAGE;
        }
        if (find_model(s->model, &sp->draft, err, errlen) < 0)
            return ST_EMU_ARGS_STARTUP;
        if (sp->draft.vocab != c->model.vocab) {
            snprintf(err, errlen,
                     "--speculative-config: the draft model's vocabulary (%u) is not the target's (%u): vLLM needs the "
                     "same tokenizer",
                     sp->draft.vocab, c->model.vocab);
            return ST_EMU_ARGS_STARTUP;
        }
        sp->draft_model = 1;
    } else if (s->head) {
        /* EAGLE / MTP / Medusa heads: about one decoder layer of the target's shape, run k times */
        sp->draft = c->model;
        sp->draft.layers = 1;
        sp->draft.dense_layers = sp->draft.experts ? 1 : 0;
        st_emu_model_count_params(&sp->draft);
        sp->draft_model = sp->draft_shares_embed = 1; /* a head shares the embedding and output layer */
    }
    return 0;
}

/* --spec-acceptance: A (every position) or A1/A2/... (one per position, at most k), each within 0..1. */
static int spec_acceptance_of(const char *given, uint32_t k, st_emu_spec *sp, char *err, size_t errlen)
{
    const char *p = given;
    uint32_t n = 0;
    double vals[ST_EMU_SPEC_MAX_K];
    while (*p) {
        char *end;
        double x = strtod(p, &end);
        if (end == p || n >= ST_EMU_SPEC_MAX_K || !(x >= 0 && x <= 1)) {
            snprintf(err, errlen, "--spec-acceptance: expected A or A1/A2/... with each within 0..1, got '%s'", given);
            return ST_EMU_ARGS_USAGE;
        }
        vals[n++] = x;
        p = end;
        if (*p == '/')
            p++;
        else if (*p) {
            snprintf(err, errlen, "--spec-acceptance: expected A or A1/A2/..., got '%s'", given);
            return ST_EMU_ARGS_USAGE;
        }
    }
    if (n == 1) {
        sp->acceptance = vals[0];
        return 0;
    }
    if (n > k) {
        snprintf(err, errlen, "--spec-acceptance: %u positions for %u draft tokens", n, k);
        return ST_EMU_ARGS_USAGE;
    }
    memcpy(sp->accept_pos, vals, n * sizeof vals[0]);
    sp->n_pos = n;
    return 0;
}

int st_emu_spec_of_args(const st_emu_args *a, st_emu_config *c, char *err, size_t errlen)
{
    st_emu_spec *sp = &c->spec;
    memset(sp, 0, sizeof *sp);
    if (!a->spec_config) {
        if (a->spec_acceptance || a->spec_draft_share >= 0) {
            snprintf(err, errlen, "--spec-acceptance / --spec-draft-share need --speculative-config");
            return ST_EMU_ARGS_USAGE;
        }
        return 0;
    }
    const char *js = a->spec_config;
    st_json_val root;
    if (st_json_parse(js, strlen(js), &root) || root.type != ST_JSON_OBJECT) {
        snprintf(err, errlen, "argument --speculative-config: not a JSON object: %.200s", js);
        return ST_EMU_ARGS_USAGE;
    }
    spec_method s = { .ngram = 0 };
    uint32_t k;
    int rc;
    if ((rc = spec_method_of(&root, &s, err, errlen)) || (rc = spec_k_of(&root, &s, &k, err, errlen)))
        return rc;
    sp->k = k;
    if ((rc = spec_draft_of(&s, c, err, errlen)))
        return rc;
    int given = a->spec_acceptance != NULL;
    sp->draft_share = a->spec_draft_share >= 0 ? a->spec_draft_share : s.ngram && !given ? 0 : 1;
    if (given && (rc = spec_acceptance_of(a->spec_acceptance, k, sp, err, errlen)))
        return rc;
    if (st_emu_spec_check(sp, err, errlen)) {
        char e2[300];
        snprintf(e2, sizeof e2, "%s", err);
        snprintf(err, errlen, "--spec-acceptance: %s", e2);
        return ST_EMU_ARGS_USAGE;
    }
    return 0;
}

/* The flags checked that need no model: GPU given, ranges, block size, exclusive pairs, the dtypes. */
static int args_check(const st_emu_args *a, st_emu_dtype *kvd, char *err, size_t errlen)
{
    if (!a->gpu || !*a->gpu) {
        snprintf(err, errlen,
                 "--gpu NAME|FILE is required (H100, H200, A100, L40S, RTX4090, or a GPU file; or "
                 "SERVETUNE_EMULATE_GPU)");
        return ST_EMU_ARGS_USAGE;
    }
    if (!(a->util > 0 && a->util <= 1)) {
        snprintf(err, errlen, "--gpu-memory-utilization: must be in (0, 1], got %g", a->util);
        return ST_EMU_ARGS_USAGE;
    }
    if (!(a->time_scale > 0) || !(a->time_scale <= ST_EMU_TIME_SCALE_MAX)) {
        snprintf(err, errlen, "--time-scale: must be a number in (0, %g], got %g", ST_EMU_TIME_SCALE_MAX,
                 a->time_scale);
        return ST_EMU_ARGS_USAGE;
    }
    if (!(a->slowdown >= 1) || !isfinite(a->slowdown)) {
        snprintf(err, errlen, "--fault-decode-slowdown: must be >= 1, got %g", a->slowdown);
        return ST_EMU_ARGS_USAGE;
    }
    long bs = a->block_size;
    if (bs != 8 && bs != 16 && bs != 32 && bs != 64 && bs != 128) {
        snprintf(err, errlen, "argument --block-size: invalid choice: %ld (choose from 8, 16, 32, 64, 128)", bs);
        return ST_EMU_ARGS_USAGE;
    }
    if (a->prefix_on && a->prefix_off) {
        snprintf(err, errlen, "--enable-prefix-caching and --no-enable-prefix-caching are exclusive");
        return ST_EMU_ARGS_USAGE;
    }
    const char *kv = a->kv_dtype;
    if (!strcmp(kv, "auto") || !strcmp(kv, "bfloat16"))
        *kvd = ST_EMU_BF16;
    else if (!strcmp(kv, "fp8") || !strcmp(kv, "fp8_e4m3") || !strcmp(kv, "fp8_e5m2"))
        *kvd = ST_EMU_FP8;
    else {
        snprintf(err, errlen,
                 "argument --kv-cache-dtype: invalid choice: '%s' (choose from 'auto', 'bfloat16', 'fp8', "
                 "'fp8_e4m3', 'fp8_e5m2')",
                 kv);
        return ST_EMU_ARGS_USAGE;
    }
    const char *dt = a->dtype;
    if (strcmp(dt, "auto") && strcmp(dt, "bfloat16") && strcmp(dt, "float16") && strcmp(dt, "half") &&
        strcmp(dt, "float") && strcmp(dt, "float32")) {
        snprintf(err, errlen,
                 "argument --dtype: invalid choice: '%s' (choose from 'auto', 'half', 'float16', 'bfloat16', "
                 "'float', 'float32')",
                 dt);
        return ST_EMU_ARGS_USAGE;
    }
    return 0;
}

/* The GPU and the model (a file, else the catalog); the configuration initialised from them. */
static int args_load(const st_emu_args *a, st_emu_config *c, char *err, size_t errlen)
{
    st_emu_gpu g;
    if (access(a->gpu, R_OK) == 0) {
        if (st_emu_gpu_load_file(a->gpu, &g, err, errlen) < 0)
            return ST_EMU_ARGS_USAGE;
    } else if (st_emu_gpu_find(a->gpu, &g, err, errlen) < 0) {
        return ST_EMU_ARGS_USAGE;
    }
    st_emu_model m;
    if (access(a->model, R_OK) == 0) {
        if (st_emu_model_load_file(a->model, &m, err, errlen) < 0)
            return ST_EMU_ARGS_STARTUP;
    } else if (st_emu_model_find(a->model, &m, err, errlen) < 0) {
        /* vLLM fails at startup (not argparse) when it cannot find the model */
        return ST_EMU_ARGS_STARTUP;
    }
    st_emu_config_init(c, &g, &m);
    return 0;
}

/* --quantization (matching the model's own) and --dtype half: the weights' type. */
static int args_weights(const st_emu_args *a, st_emu_config *c, char *err, size_t errlen)
{
    const char *q = a->quant;
    if (q && strcmp(q, "None")) {
        if (!strcmp(q, "fp8"))
            c->weight_dtype = ST_EMU_FP8;
        else if (!strcmp(q, "awq") || !strcmp(q, "awq_marlin") || !strcmp(q, "gptq") || !strcmp(q, "gptq_marlin")) {
            int want_awq = !strncmp(q, "awq", 3);
            st_emu_dtype own = c->model.weight_dtype;
            if (own != (want_awq ? ST_EMU_INT4_AWQ : ST_EMU_INT4_GPTQ)) {
                snprintf(err, errlen,
                         "ValueError: Quantization method specified in the model config (%s) does not match the "
                         "quantization method specified in the `quantization` argument (%s).",
                         own == ST_EMU_BF16 ? "None" : st_emu_dtype_name(own), q);
                return ST_EMU_ARGS_STARTUP;
            }
        } else {
            snprintf(err, errlen, "argument --quantization/-q: invalid choice: '%s'", q);
            return ST_EMU_ARGS_USAGE;
        }
    }
    if (!strcmp(a->dtype, "float16") || !strcmp(a->dtype, "half")) {
        if (c->weight_dtype == ST_EMU_BF16)
            c->weight_dtype = ST_EMU_FP16;
    }
    return 0;
}

/* The engine settings from the flags: sizes, caches, async scheduling, the vLLM version. */
static int args_settings(const st_emu_args *a, st_emu_config *c, st_emu_dtype kvd, char *err, size_t errlen)
{
    c->tp = (uint32_t)a->tp;
    c->gpu_memory_utilization = a->util;
    c->max_model_len = (uint32_t)a->max_model_len;
    c->max_num_seqs = (uint32_t)a->max_num_seqs;
    c->max_num_batched_tokens = (uint32_t)a->max_batched;
    c->block_size = (uint32_t)a->block_size;
    c->kv_dtype = kvd;
    c->enable_prefix_caching = !a->prefix_off;
    c->enforce_eager = a->eager;
    c->reasoning_share = a->reasoning_share;
    c->decode_slowdown = a->slowdown;
    if (a->async_on && a->async_off) {
        snprintf(err, errlen, "--async-scheduling and --no-async-scheduling are exclusive");
        return ST_EMU_ARGS_USAGE;
    }
    if (a->async_on || a->async_off)
        c->async_scheduling = a->async_on ? 1 : 0;
    if (a->vllm_version) {
        uint32_t v = st_emu_parse_vllm_version(a->vllm_version);
        if (!v) {
            snprintf(err, errlen, "--vllm-version: expected X.Y or X.Y.Z, got '%s'", a->vllm_version);
            return ST_EMU_ARGS_USAGE;
        }
        c->vllm_version = v;
    }
    return 0;
}

int st_emu_args_config(const st_emu_args *a, st_emu_config *c, char *err, size_t errlen)
{
    st_emu_dtype kvd;
    int rc;
    if ((rc = args_check(a, &kvd, err, errlen)) || (rc = args_load(a, c, err, errlen)) ||
        (rc = args_weights(a, c, err, errlen)) || (rc = args_settings(a, c, kvd, err, errlen)) ||
        (rc = st_emu_spec_of_args(a, c, err, errlen)))
        return rc;
    if (a->calibration) {
        st_emu_calib cal;
        char why[512];
        if (st_calib_load_file(a->calibration, &cal, err, errlen) < 0)
            return ST_EMU_ARGS_USAGE;
        if (st_calib_check(&cal, c, why, sizeof why, NULL, 0) < 0) {
            snprintf(err, errlen, "--calibration %s is refused: %s", a->calibration, why);
            return ST_EMU_ARGS_USAGE;
        }
        st_calib_apply(&cal, c);
    }
    return 0;
}

int st_emu_config_of_argv(int argc, char **argv, const char *gpu, st_emu_config *out, const char **model, char *err,
                          size_t errlen)
{
    st_emu_args A;
    st_emu_args_defaults(&A);
    st_opt opts[ST_EMU_ARGS_TABLE_MAX];
    st_emu_args_table(&A, opts);
    st_opts_result r;
    int rc = st_emu_args_parse(&A, opts, argc, argv, &r, err, errlen);
    st_opts_result_free(&r);
    if (rc)
        return -1;
    if (!A.gpu || !*A.gpu)
        A.gpu = gpu;
    if (!A.gpu || !*A.gpu) {
        snprintf(err, errlen, "no GPU given (--gpu)");
        return -1;
    }
    if (model)
        *model = A.model;
    return st_emu_args_config(&A, out, err, errlen) ? -1 : 0;
}
