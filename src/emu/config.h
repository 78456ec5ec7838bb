/* Engine configuration (the vLLM flags that change timing or memory) and the memory plan
 * vLLM V1 computes at startup: how many KV blocks fit, or why the engine refuses to start.
 * Pure functions. Constants: docs/engine-model.md ("Memory"). */
#ifndef ST_EMU_CONFIG_H
#define ST_EMU_CONFIG_H
#include <stddef.h>
#include <stdint.h>

#include "emu/catalog.h"

/* The model's free constants for one deployment: defaults from consts.h and the GPU catalog
 * (st_emu_config_init), overridden by a calibration file (emu/calib.h). Seconds, fractions. */
typedef struct st_emu_tuning {
    double gemm_eff;       /* fraction of the dense 16-bit peak large GEMMs reach (catalog) */
    double bw_eff;         /* fraction of peak bandwidth weight and KV reads reach (catalog) */
    double attn_eff;       /* attention kernels' fraction of the 16-bit peak */
    double kv_bw_rel;      /* paged KV-cache read efficiency relative to bw_eff */
    double fp8_gemm_rel;   /* fp8 W8A8 GEMM efficiency relative to gemm_eff */
    double fp8_bw_rel;     /* fp8 weight-read efficiency relative to bw_eff */
    double moe_gemm_rel;   /* fused-MoE expert GEMM efficiency relative to gemm_eff */
    double marlin_bw_rel;  /* weight-only (Marlin: 4-bit, fp8 without fp8 cores) read efficiency, rel. bw_eff */
    double int4_gemm_rel;  /* Marlin GEMM efficiency (4-bit, fp8 weight-only) at prefill sizes, rel. 16-bit */
    double step_gpu_s;     /* GPU-side fixed cost of a step */
    double step_cpu_s;     /* engine-core CPU per step */
    double seq_cpu_s;      /* engine-core CPU per scheduled sequence per step */
    double layer_graph_s;  /* per layer under CUDA graphs */
    double layer_eager_s;  /* per layer, eager (CPU launches) */
    double fe_latency_s;   /* API server: fixed latency of a request (in and first token out) */
    double fe_req_cpu_s;   /* API server CPU per request */
    double fe_token_cpu_s; /* API server CPU per streamed token */
    double fe_chat_factor; /* the three front-end costs of a chat-completions request, relative */
} st_emu_tuning;

/* Speculative decoding (vLLM's --speculative-config; docs/speculative.md "In the engine model"): each
 * decoding sequence that has a draft verifies its draft tokens and the one after them in one step
 * (1 + draft tokens scheduled, KV slots for all of them), then keeps the accepted ones and the
 * target's own next token: 1 + accepted tokens a step, streamed together. Acceptance is an input
 * (measured, given, or the offline n-gram replay of the client's text): a draft's position i is
 * accepted with probability accept_pos[i] (vLLM's num_accepted_tokens_per_pos[i] / num_drafts,
 * nonincreasing), or a^(i+1) for a per-token acceptance a. */
#define ST_EMU_SPEC_MAX_K 32
typedef struct st_emu_spec {
    uint32_t k;         /* num_speculative_tokens: draft tokens per draft; 0 = no speculation */
    double draft_share; /* share of decode steps in which a sequence has a draft (n-gram: it may find none) */
    double draft_len;   /* draft tokens per draft (<= k; n-gram drafts may be shorter); 0: k */
    uint32_t n_pos;     /* accept_pos entries given (0: a^(i+1) from acceptance) */
    double accept_pos[ST_EMU_SPEC_MAX_K];
    double acceptance;      /* per-token acceptance a, 0..1 (with n_pos 0) */
    int draft_model;        /* the proposer is a model: k of its decode steps per verification */
    st_emu_model draft;     /* its shape (draft_model) */
    double proposer_seq_s;  /* n-gram lookup: CPU per speculating sequence per step */
    int draft_shares_embed; /* an EAGLE / MTP head: it shares the target's embedding and output layer */
} st_emu_spec;

typedef struct st_emu_config {
    st_emu_gpu gpu;
    st_emu_model model;
    uint32_t tp;                     /* --tensor-parallel-size (1) */
    double gpu_memory_utilization;   /* 0.90 */
    uint32_t max_model_len;          /* 0: the model's max_position_embeddings */
    uint32_t max_num_seqs;           /* 0: per-GPU default (1024 large class, else 256) */
    uint32_t max_num_batched_tokens; /* 0: per-GPU default (8192 large class, else 2048) */
    uint32_t block_size;             /* 16 */
    st_emu_dtype kv_dtype;           /* BF16 ("auto") or FP8 */
    st_emu_dtype weight_dtype;       /* set from the model by st_emu_config_init */
    int enable_prefix_caching;       /* 1 */
    int enforce_eager;               /* 0: CUDA graphs up to min(2 x max_num_seqs, 512) tokens */
    double decode_slowdown;          /* fault injection: decode work x this factor (1.0) */
    uint32_t vllm_version;           /* major*10000 + minor*100 + patch (EMU_VLLM_DEFAULT_VERSION) */
    int async_scheduling;            /* -1: the version's default; 0 / 1: --[no-]async-scheduling */
    int no_frontend;                 /* 1: no API-server model (the emulator's --no-model) */
    double reasoning_share;          /* a reasoning model: the first share of each output is reasoning (0) */
    int step_by_step;                /* 1: the virtual-time driver (emu/sim.h) takes the reference path: one
                                        scheduler step at a time, every full block listed in the prefix cache as it
                                        fills; 0 (default): it takes runs of decode steps between events at once
                                        (st_emu_skip_steps) and lists generated blocks only where a prompt can
                                        carry them (st_emu_set_output_prompts), with the same results
                                        (docs/engine-model.md) */
    st_emu_tuning tune;              /* free constants (defaults, or a calibration file) */
    st_emu_spec spec;                /* speculative decoding (spec.k 0: none) */
} st_emu_config;

/* Parses "0.11.0" / "v0.8.5.post1" into the packed form; 0 when malformed. */
uint32_t st_emu_parse_vllm_version(const char *s);
/* Whether this configuration runs with async scheduling (flag, else the version's default). */
int st_emu_async_scheduling(const st_emu_config *c);
/* A request's API-server costs relative to a completions request's: fe_chat_factor for a chat
 * request, else 1. */
double st_emu_fe_factor(const st_emu_tuning *t, int chat);
/* The API server's CPU for one request (its one core's serial work before the request reaches the
 * engine core): fe_req_cpu_s, x fe_chat_factor for a chat request, plus the version's chat cost
 * (consts.h EMU_FE_CHAT_FORMAT_DETECT_S before EMU_VLLM_CHAT_FORMAT_CACHE_VERSION). Seconds. */
double st_emu_fe_request_cpu_s(const st_emu_config *c, int chat);
/* The tuning defaults for a GPU (consts.h and the GPU's catalog efficiencies). */
void st_emu_tuning_defaults(st_emu_tuning *t, const st_emu_gpu *gpu);

/* Fills the defaults for a GPU and a model (weight dtype from the model). */
void st_emu_config_init(st_emu_config *c, const st_emu_gpu *gpu, const st_emu_model *model);

typedef enum st_emu_refusal {
    ST_EMU_START_OK = 0,
    ST_EMU_START_BAD_CONFIG,   /* invalid combination of flags (ValueError at config time) */
    ST_EMU_START_WEIGHTS_OOM,  /* weights larger than the GPU: torch.OutOfMemoryError */
    ST_EMU_START_NO_KV_MEMORY, /* nothing left for the KV cache */
    ST_EMU_START_MAX_LEN,      /* one max_model_len sequence does not fit */
} st_emu_refusal;

typedef struct st_emu_memory {
    /* All per GPU (each of the tp GPUs holds 1/tp of weights and KV heads). */
    double total_bytes, requested_bytes; /* total x gpu_memory_utilization */
    double weight_bytes, activation_bytes, non_torch_bytes, kv_bytes;
    double kv_bytes_per_token; /* per GPU: the target's layers and a draft model's (draft_kv_bytes_per_token) */
    /* a speculative draft model's share (0 for n-gram lookup): its weights, in weight_bytes, and
     * the KV cache of its layers, in kv_bytes_per_token (vLLM allocates both from the same budget) */
    double draft_weight_bytes, draft_kv_bytes_per_token;
    uint32_t num_blocks;    /* vLLM's num_gpu_blocks */
    uint64_t kv_tokens;     /* "GPU KV cache size: N tokens" */
    double max_concurrency; /* kv_tokens / max_model_len */
    /* Resolved limits (defaults applied). */
    uint32_t max_model_len, max_num_seqs, max_num_batched_tokens;
    st_emu_refusal refusal;
} st_emu_memory;

/* Resolves the defaults in c (max_model_len, max_num_seqs, max_num_batched_tokens) and
 * computes the plan. Returns 0 when the engine can start; otherwise -1 with mem->refusal
 * set and vLLM's message in err (e.g. "ValueError: To serve at least one request with the
 * models's max seq len (32000), (7.81 GiB KV cache is needed, ..."). */
int st_emu_memory_plan(st_emu_config *c, st_emu_memory *mem, char *err, size_t errlen);

/* vLLM's two startup lines, e.g. "GPU KV cache size: 420,736 tokens" and
 * "Maximum concurrency for 8,192 tokens per request: 51.36x" (no trailing newline). */
void st_emu_memory_log_lines(const st_emu_memory *mem, char *kv_line, size_t kv_len, char *conc_line, size_t conc_len);

#endif
