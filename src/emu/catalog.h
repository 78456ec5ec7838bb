/* Hardware and model catalogs of the engine model. Pure: no I/O except the two small
 * st_emu_*_load_file() wrappers, which read a file and hand its bytes to the pure parsers.
 * Every figure is documented in docs/engine-model.md with its source. */
#ifndef ST_EMU_CATALOG_H
#define ST_EMU_CATALOG_H
#include <stddef.h>
#include <stdint.h>

/* Storage types of weights and of the KV cache. */
typedef enum st_emu_dtype {
    ST_EMU_BF16 = 0,
    ST_EMU_FP16,
    ST_EMU_FP8,
    ST_EMU_INT4_AWQ,
    ST_EMU_INT4_GPTQ,
} st_emu_dtype;

/* Bytes per element as stored (4-bit formats: 0.5, group scales counted separately). */
double st_emu_dtype_bytes(st_emu_dtype d);
const char *st_emu_dtype_name(st_emu_dtype d); /* "bfloat16", "float16", "fp8", "awq", "gptq" */

typedef struct st_emu_gpu {
    char name[64];       /* display name, e.g. "H100 SXM 80GB" */
    double mem_bytes;    /* total memory as CUDA reports it (torch total_memory) */
    double bf16_flops;   /* dense BF16 tensor FLOP/s */
    double fp8_flops;    /* dense FP8 tensor FLOP/s; 0 = no FP8 tensor cores */
    double mem_bw;       /* bytes/s */
    double link_bw;      /* bytes/s per GPU for tensor-parallel all-reduce (NVLink or PCIe) */
    int large_class;     /* vLLM's default class: >= 70 GiB and not an A100 */
    double gemm_eff;     /* fraction of the dense peak that large GEMMs reach on this GPU */
    double bw_eff;       /* fraction of the peak bandwidth that weight and KV reads reach */
    double link_latency; /* s: a small tensor-parallel all-reduce's fixed latency over that link */
    double attn_call_s;  /* s: fixed cost of one attention kernel call (0: EMU_ATTN_CALL_S) */
    double copy_eff;     /* fraction of the peak bandwidth a published device-memory copy reaches on this
                            GPU's memory (consts.h EMU_COPY_EFF_*); 0: none published. The sourced
                            bw_eff where the data have not fitted one (bench/fidelity) */
} st_emu_gpu;

typedef struct st_emu_model {
    char name[128]; /* as given (HF id or path) */
    uint32_t layers, hidden, intermediate, heads, kv_heads, head_dim, vocab;
    uint32_t max_position; /* max_position_embeddings: vLLM's default max_model_len */
    int tied_embeddings;
    /* Mixture of experts (0 experts = dense). */
    uint32_t experts, experts_per_tok, moe_intermediate, shared_intermediate;
    uint32_t dense_layers;     /* MoE models: leading layers with a dense MLP (first_k_dense_replace) */
    double params;             /* total parameters (computed from the shape) */
    double active_params;      /* parameters used per token (dense: = params) */
    st_emu_dtype weight_dtype; /* from the name (-FP8, -AWQ, -GPTQ) or quantization_config */
} st_emu_model;

/* Looks a GPU up by a loose name ("H100", "h100-sxm", "H100 NVL", "H200", "A100", "a100-80gb",
 * "A100 80GB PCIe", "L40S", "RTX4090", "4090"); a name holding a key only inside a longer number
 * ("H1000", "RTX A1000") is not that GPU. 0, or -1 with the known names in err. */
int st_emu_gpu_find(const char *name, st_emu_gpu *out, char *err, size_t errlen);
/* The catalog's GPUs by canonical name ("H100", "H100-NVL", "H200", "A100", "A100-PCIe", "L40S",
 * "RTX4090"), each found by st_emu_gpu_find; at most max. A form the catalog lacks (an H100 PCIe,
 * an A100 40GB) is not taken for another: st_emu_gpu_find refuses it. Returns how many. */
int st_emu_gpu_keys(const char **out, int max);
/* The largest value of any GPU file field (memory_gib, *_tflops, bandwidth_tbs, link_gbs, ...). */
#define ST_EMU_GPU_FIELD_MAX 1e6
/* Parses a custom GPU from text: either JSON {"name":..,"memory_gib":..,"bf16_tflops":..,
 * "fp8_tflops":..,"bandwidth_tbs":..,"link_gbs":..,"link_latency_us":..,"attn_call_us":..,"gemm_eff":..,"bw_eff":..}
 * or key=value lines with the same keys ('#' comments). name, memory_gib, bf16_tflops and
 * bandwidth_tbs are required; without link_latency_us a link under 100 GB/s gets PCIe's
 * all-reduce latency, a faster one NVLink's (consts.h). */
int st_emu_gpu_parse(const char *text, size_t len, st_emu_gpu *out, char *err, size_t errlen);
/* Reads FILE and calls st_emu_gpu_parse (the only I/O of the GPU catalog). */
int st_emu_gpu_load_file(const char *path, st_emu_gpu *out, char *err, size_t errlen);

/* Matches a model name like a Hugging Face id: "Qwen/Qwen3-8B", "Qwen/Qwen3-8B-FP8" (fp8
 * weights), "...-AWQ" / "...-GPTQ" (4-bit), "meta-llama/Meta-Llama-3-8B-Instruct",
 * "meta-llama/Llama-3.1-8B-Instruct" (131072 context), Llama-3-70B / 3.1 / 3.3. */
int st_emu_model_find(const char *name, st_emu_model *out, char *err, size_t errlen);
/* The ranges a model's shape must be in (config.json's field names; a count outside makes no
 * sense for a transformer the engine model can plan: a typo, a stub, a value in the wrong field).
 * Sizes derived from them (parameters, bytes) are computed in doubles or 64 bits. */
#define ST_EMU_MAX_LAYERS 4096u
#define ST_EMU_MAX_HIDDEN (1u << 20)
#define ST_EMU_MAX_INTERMEDIATE (1u << 22)
#define ST_EMU_MAX_HEADS (1u << 16)
#define ST_EMU_MAX_HEAD_DIM (1u << 16)
#define ST_EMU_MAX_VOCAB (1u << 24)
#define ST_EMU_MAX_POSITION (1u << 27)
#define ST_EMU_MAX_EXPERTS (1u << 16)
/* 0, or -1 with the first field out of its range, its value and the range in err
 * ("model shape: num_hidden_layers is 0, expected an integer in [1, 4096]"). */
int st_emu_model_check(const st_emu_model *m, char *err, size_t errlen);
/* Parses a Hugging Face config.json (text). name is stored as the model's name. A count out of
 * its range (st_emu_model_check) is refused, naming the field, the value given and the range. */
int st_emu_model_parse_config(const char *json, size_t len, const char *name, st_emu_model *out, char *err,
                              size_t errlen);
/* Reads DIR/config.json (or the file itself when PATH is a file) and parses it. */
int st_emu_model_load_file(const char *path, st_emu_model *out, char *err, size_t errlen);
/* Derives params/active_params from the shape (called by the finders and the parser). */
void st_emu_model_count_params(st_emu_model *m);

/* Weight bytes of the whole model in its weight dtype (embedding/lm_head stay 16-bit;
 * 4-bit formats add group-128 scales and zeros). */
double st_emu_model_weight_bytes(const st_emu_model *m, st_emu_dtype wd);
/* KV bytes per token for the whole model (all layers, K and V) in kv dtype. */
double st_emu_model_kv_bytes_per_token(const st_emu_model *m, st_emu_dtype kvd);

#endif
