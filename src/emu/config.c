#include "emu/config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "emu/blocks.h"
#include "emu/consts.h"

void st_emu_tuning_defaults(st_emu_tuning *t, const st_emu_gpu *gpu)
{
    memset(t, 0, sizeof *t);
    t->gemm_eff = gpu->gemm_eff > 0 ? gpu->gemm_eff : EMU_GEMM_EFF_DEFAULT;
    t->bw_eff = gpu->bw_eff > 0 ? gpu->bw_eff : EMU_BW_EFF_DEFAULT;
    t->attn_eff = EMU_MFU_ATTN;
    t->kv_bw_rel = EMU_KV_BW_REL;
    t->fp8_gemm_rel = EMU_FP8_GEMM_REL;
    t->fp8_bw_rel = EMU_FP8_BW_REL;
    t->marlin_bw_rel = EMU_MARLIN_BW_REL;
    t->int4_gemm_rel = EMU_INT4_EFF_LARGE;
    t->moe_gemm_rel = EMU_MOE_GEMM_REL;
    t->step_gpu_s = EMU_STEP_GPU_S;
    t->step_cpu_s = EMU_STEP_CPU_S;
    t->seq_cpu_s = EMU_PER_SEQ_OVERHEAD_S;
    t->layer_graph_s = EMU_LAYER_OVERHEAD_GRAPH_S;
    t->layer_eager_s = EMU_LAYER_OVERHEAD_EAGER_S;
    t->fe_latency_s = EMU_FE_LATENCY_S;
    t->fe_req_cpu_s = EMU_FE_REQ_CPU_S;
    t->fe_token_cpu_s = EMU_FE_TOKEN_CPU_S;
    t->fe_chat_factor = EMU_FE_CHAT_FACTOR;
}

uint32_t st_emu_parse_vllm_version(const char *s)
{
    if (!s)
        return 0;
    if (*s == 'v' || *s == 'V')
        s++;
    unsigned a = 0, b = 0, c = 0;
    int n = 0;
    if (sscanf(s, "%u.%u%n", &a, &b, &n) < 2)
        return 0;
    if (s[n] == '.' && sscanf(s + n + 1, "%u", &c) != 1)
        return 0;
    if (a > 99 || b > 99 || c > 99)
        return 0;
    uint32_t v = a * 10000 + b * 100 + c;
    return v ? v : 0;
}

int st_emu_async_scheduling(const st_emu_config *c)
{
    if (c->async_scheduling >= 0)
        return c->async_scheduling != 0;
    uint32_t v = c->vllm_version ? c->vllm_version : EMU_VLLM_DEFAULT_VERSION;
    return v >= EMU_VLLM_ASYNC_SCHED_VERSION;
}

double st_emu_fe_factor(const st_emu_tuning *t, int chat)
{
    return chat && t->fe_chat_factor > 0 ? t->fe_chat_factor : 1.0;
}

double st_emu_fe_request_cpu_s(const st_emu_config *c, int chat)
{
    double s = c->tune.fe_req_cpu_s * st_emu_fe_factor(&c->tune, chat);
    uint32_t v = c->vllm_version ? c->vllm_version : EMU_VLLM_DEFAULT_VERSION;
    if (chat && v < EMU_VLLM_CHAT_FORMAT_CACHE_VERSION)
        s += EMU_FE_CHAT_FORMAT_DETECT_S;
    return s;
}

void st_emu_config_init(st_emu_config *c, const st_emu_gpu *gpu, const st_emu_model *model)
{
    memset(c, 0, sizeof *c);
    c->gpu = *gpu;
    c->model = *model;
    c->tp = 1;
    c->gpu_memory_utilization = EMU_DEFAULT_GPU_UTIL;
    c->block_size = 16;
    c->kv_dtype = ST_EMU_BF16;
    c->weight_dtype = model->weight_dtype;
    c->enable_prefix_caching = 1;
    c->decode_slowdown = 1.0;
    c->vllm_version = EMU_VLLM_DEFAULT_VERSION;
    c->async_scheduling = -1;
    st_emu_tuning_defaults(&c->tune, gpu);
}

static void commas(uint64_t v, char *out, size_t len)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v);
    size_t j = 0;
    for (int i = 0; i < n && j + 1 < len; i++) {
        if (i > 0 && (n - i) % 3 == 0 && j + 2 < len)
            out[j++] = ',';
        out[j++] = tmp[i];
    }
    out[j] = 0;
}

void st_emu_memory_log_lines(const st_emu_memory *mem, char *kv_line, size_t kv_len, char *conc_line, size_t conc_len)
{
    char a[32], b[32];
    commas(mem->kv_tokens, a, sizeof a);
    commas(mem->max_model_len, b, sizeof b);
    snprintf(kv_line, kv_len, "GPU KV cache size: %s tokens", a);
    snprintf(conc_line, conc_len, "Maximum concurrency for %s tokens per request: %.2fx", b, mem->max_concurrency);
}

/* The configuration checked as vLLM checks it, and its defaults filled (max_model_len, the batch limits). */
static int plan_limits(st_emu_config *c, st_emu_memory *mem, char *err, size_t errlen)
{
    const st_emu_model *m = &c->model;
    if (c->tp == 0 || c->block_size == 0 || !(c->gpu_memory_utilization > 0) || c->gpu_memory_utilization > 1) {
        mem->refusal = ST_EMU_START_BAD_CONFIG;
        snprintf(err, errlen, "ValueError: GPU memory utilization must be within (0, 1]. Got %g.",
                 c->gpu_memory_utilization);
        return -1;
    }
    if (m->heads % c->tp) {
        mem->refusal = ST_EMU_START_BAD_CONFIG;
        snprintf(err, errlen,
                 "ValueError: Total number of attention heads (%u) must be divisible by tensor "
                 "parallel size (%u).",
                 m->heads, c->tp);
        return -1;
    }
    if (c->max_model_len == 0)
        c->max_model_len = m->max_position;
    else if (c->max_model_len > m->max_position) {
        mem->refusal = ST_EMU_START_BAD_CONFIG;
        snprintf(err, errlen,
                 "ValueError: User-specified max_model_len (%u) is greater than the derived "
                 "max_model_len (max_position_embeddings=%u or model_max_length=None in model's "
                 "config.json). To allow overriding this maximum, set the env var "
                 "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.",
                 c->max_model_len, m->max_position);
        return -1;
    }
    if (c->max_num_seqs == 0)
        c->max_num_seqs = c->gpu.large_class ? 1024 : 256;
    if (c->max_num_batched_tokens == 0)
        c->max_num_batched_tokens = c->gpu.large_class ? 8192 : 2048;
    if (c->max_num_batched_tokens < c->max_num_seqs) {
        mem->refusal = ST_EMU_START_BAD_CONFIG;
        snprintf(err, errlen,
                 "ValueError: max_num_batched_tokens (%u) must be greater than or equal to "
                 "max_num_seqs (%u).",
                 c->max_num_batched_tokens, c->max_num_seqs);
        return -1;
    }
    mem->max_model_len = c->max_model_len;
    mem->max_num_seqs = c->max_num_seqs;
    mem->max_num_batched_tokens = c->max_num_batched_tokens;
    return 0;
}

/* The speculative proposer's share of one GPU's memory (zero for n-gram lookup): vLLM loads the
 * draft's weights with the target's, before the profiling run, so they leave the KV budget; and
 * the draft's attention layers get KV cache from the same block pool (one page holds a token's
 * K and V for every layer, the target's and the draft's: vllm/v1/core/kv_cache_utils.py), so the
 * draft's KV bytes a token add to the target's. The draft runs at the target's tensor-parallel
 * size (vLLM's default draft_tensor_parallel_size). An EAGLE / MTP head shares the target's
 * embedding and output layer (vllm/v1/spec_decode/eagle.py load_model): only its layers count. */
static void draft_memory(const st_emu_config *c, double *weight_bytes, double *kv_per_token)
{
    *weight_bytes = *kv_per_token = 0;
    const st_emu_spec *s = &c->spec;
    if (!s->k || !s->draft_model || !s->draft.layers)
        return;
    const st_emu_model *d = &s->draft;
    double w = st_emu_model_weight_bytes(d, d->weight_dtype);
    if (s->draft_shares_embed)
        w -= ((double)d->vocab * d->hidden * (d->tied_embeddings ? 1 : 2)) * 2.0;
    double share = d->kv_heads >= c->tp ? 1.0 / c->tp : 1.0 / (d->kv_heads ? d->kv_heads : 1);
    *weight_bytes = w / c->tp;
    *kv_per_token = st_emu_model_kv_bytes_per_token(d, c->kv_dtype) * share;
}

/* The memory budget per GPU: KV bytes per token, the weights, the profiling activations, the rest. */
static void plan_budget(const st_emu_config *c, st_emu_memory *mem)
{
    const st_emu_model *m = &c->model;
    double tp = c->tp;
    /* KV heads are split across TP ranks; with fewer KV heads than ranks they are replicated. */
    double kv_share = m->kv_heads >= c->tp ? 1.0 / tp : 1.0 / m->kv_heads;
    mem->kv_bytes_per_token = st_emu_model_kv_bytes_per_token(m, c->kv_dtype) * kv_share;
    mem->total_bytes = c->gpu.mem_bytes;
    mem->requested_bytes = c->gpu.mem_bytes * c->gpu_memory_utilization;
    draft_memory(c, &mem->draft_weight_bytes, &mem->draft_kv_bytes_per_token);
    mem->kv_bytes_per_token += mem->draft_kv_bytes_per_token;
    mem->weight_bytes = st_emu_model_weight_bytes(m, c->weight_dtype) / tp + mem->draft_weight_bytes;
    double seqs = c->max_num_seqs < c->max_num_batched_tokens ? c->max_num_seqs : c->max_num_batched_tokens;
    uint32_t ver = c->vllm_version ? c->vllm_version : EMU_VLLM_DEFAULT_VERSION;
    double per_logit =
        ver >= EMU_VLLM_LIGHT_SAMPLER_VERSION ? EMU_ACT_BYTES_PER_SEQ_VOCAB_LIGHT : EMU_ACT_BYTES_PER_SEQ_VOCAB;
    /* not divided by TP: every rank runs the profiling pass over the whole token budget and
     * the gathered logits */
    mem->activation_bytes =
        (double)c->max_num_batched_tokens * m->hidden * EMU_ACT_BYTES_PER_TOKEN_HIDDEN + seqs * m->vocab * per_logit;
    mem->non_torch_bytes = EMU_NON_TORCH_BYTES + (c->tp > 1 ? EMU_NON_TORCH_TP_BYTES : 0);
}

/* Weights larger than the GPU: torch's out-of-memory error at the first tensor that does not fit. */
static int plan_weights_oom(const st_emu_config *c, st_emu_memory *mem, char *err, size_t errlen)
{
    const st_emu_model *m = &c->model;
    const double GiB = EMU_GIB;
    double tp = c->tp;
    /* Loading stops at the first weight tensor that does not fit: torch names that one
     * allocation, in GiB: here the largest tensor of the model (gate_up or the vocabulary
     * matrix), with the memory filled by tensors of that size before it. */
    double wb = st_emu_dtype_bytes(c->weight_dtype);
    double gate_up =
        2.0 * m->hidden * (double)(m->experts ? m->moe_intermediate * m->experts : m->intermediate) * wb / tp;
    double vocab = (double)m->vocab * m->hidden * 2.0 / tp;
    double tensor = gate_up > vocab ? gate_up : vocab;
    double free_b = tensor > 0 ? fmod(mem->total_bytes, tensor) : 0, in_use = mem->total_bytes - free_b;
    mem->refusal = ST_EMU_START_WEIGHTS_OOM;
    snprintf(err, errlen,
             "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate %.2f GiB. GPU 0 "
             "has a total capacity of %.2f GiB of which %.2f GiB is free. Including non-PyTorch "
             "memory, this process has %.2f GiB memory in use.",
             tensor / GiB, mem->total_bytes / GiB, (mem->total_bytes - in_use) / GiB, in_use / GiB);
    return -1;
}

/* The KV cache in blocks from what the budget leaves; it must hold one max_model_len sequence. */
static int plan_blocks(const st_emu_config *c, st_emu_memory *mem, char *err, size_t errlen)
{
    const st_emu_model *m = &c->model;
    const double GiB = EMU_GIB;
    mem->kv_bytes = mem->requested_bytes - mem->weight_bytes - mem->activation_bytes - mem->non_torch_bytes;
    if (mem->kv_bytes <= 0) {
        mem->kv_bytes = 0;
        mem->refusal = ST_EMU_START_NO_KV_MEMORY;
        snprintf(err, errlen,
                 "ValueError: No available memory for the cache blocks. Try increasing "
                 "`gpu_memory_utilization` when initializing the engine.");
        return -1;
    }
    double block_bytes = mem->kv_bytes_per_token * c->block_size;
    double blocks = floor(mem->kv_bytes / block_bytes);
    if (!(blocks <= ST_EMU_BLOCKS_MAX)) {
        /* a shape this small (a stub config.json, a typo) on this much memory */
        mem->refusal = ST_EMU_START_BAD_CONFIG;
        snprintf(err, errlen,
                 "model shape: %.0f KV cache blocks of %u tokens (%g bytes of KV cache per token per GPU from "
                 "num_hidden_layers %u, num_key_value_heads %u, head_dim %u) on %.2f GiB is more than the %u "
                 "blocks the engine model holds: check the model's config.json",
                 blocks, c->block_size, mem->kv_bytes_per_token, m->layers, m->kv_heads, m->head_dim,
                 mem->kv_bytes / GiB, (unsigned)ST_EMU_BLOCKS_MAX);
        return -1;
    }
    mem->num_blocks = (uint32_t)blocks;
    mem->kv_tokens = (uint64_t)mem->num_blocks * c->block_size;
    mem->max_concurrency = (double)mem->kv_tokens / c->max_model_len;
    /* as vLLM V1 (max_memory_usage_bytes): one max_model_len sequence in whole blocks */
    uint64_t seq_blocks = ((uint64_t)c->max_model_len + c->block_size - 1) / c->block_size;
    double needed = block_bytes * (double)seq_blocks;
    if (mem->num_blocks == 0 || mem->num_blocks < seq_blocks || needed > mem->kv_bytes) {
        mem->refusal = ST_EMU_START_MAX_LEN;
        uint64_t est = (uint64_t)floor(mem->kv_bytes / mem->kv_bytes_per_token);
        est -= est % c->block_size;
        snprintf(err, errlen,
                 "ValueError: To serve at least one request with the models's max seq len (%u), "
                 "(%.2f GiB KV cache is needed, which is larger than the available KV cache memory "
                 "(%.2f GiB). Based on the available memory, the estimated maximum model length is "
                 "%llu. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
                 "initializing the engine.",
                 c->max_model_len, needed / GiB, mem->kv_bytes / GiB, (unsigned long long)est);
        return -1;
    }
    return 0;
}

int st_emu_memory_plan(st_emu_config *c, st_emu_memory *mem, char *err, size_t errlen)
{
    memset(mem, 0, sizeof *mem);
    if (plan_limits(c, mem, err, errlen) < 0)
        return -1;
    plan_budget(c, mem);
    if (mem->weight_bytes > mem->total_bytes)
        return plan_weights_oom(c, mem, err, errlen);
    if (plan_blocks(c, mem, err, errlen) < 0)
        return -1;
    mem->refusal = ST_EMU_START_OK;
    return 0;
}
