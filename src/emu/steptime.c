#include "emu/steptime.h"

#include <math.h>
#include <stddef.h>

#include "emu/consts.h"

/* Kernels per transformer layer (norms, qkv, rope, attention, o, norm, gate_up, act, down, and
 * the residual adds): the per-layer overheads are spread over them, fp8 adds its quant kernels. */
#define EMU_KERNELS_PER_LAYER 12.0

static int is_int4(st_emu_dtype d) { return d == ST_EMU_INT4_AWQ || d == ST_EMU_INT4_GPTQ; }

int st_emu_marlin_weights(const st_emu_config *c)
{
    return is_int4(c->weight_dtype) || (c->weight_dtype == ST_EMU_FP8 && c->gpu.fp8_flops <= 0);
}

double st_emu_weight_read_floor_s(const st_emu_config *c)
{
    return st_emu_model_weight_bytes(&c->model, c->weight_dtype) / c->tp / c->gpu.mem_bw;
}

/* How the weights are multiplied: the tensor peak used, the efficiency relative to a 16-bit
 * GEMM at T tokens, the weight-read efficiency relative to bw_eff, and the activation-quant
 * bytes per token per layer and extra kernels per layer (fp8 W8A8). */
typedef struct lin_kind {
    double peak, qeff, wrel, quant_bytes, quant_kernels;
} lin_kind;

/* A Marlin weight-only GEMM's efficiency relative to a 16-bit GEMM at T tokens (consts.h):
 * near-ideal at decode sizes, int4_gemm_rel at prefill sizes. */
static double marlin_qeff(const st_emu_tuning *t, double T)
{
    double x = T / EMU_INT4_EFF_TOKENS;
    double large = t->int4_gemm_rel > 0 ? t->int4_gemm_rel : EMU_INT4_EFF_LARGE;
    return large + (EMU_WEIGHT_ONLY_QUANT_EFF - large) / (1.0 + x * x);
}

static lin_kind linear_kind(const st_emu_config *c, double T)
{
    const st_emu_tuning *t = &c->tune;
    const st_emu_model *m = &c->model;
    lin_kind k = { c->gpu.bf16_flops, 1.0, 1.0, 0, 0 };
    if (c->weight_dtype == ST_EMU_FP8) {
        if (c->gpu.fp8_flops > 0) {
            /* W8A8 on fp8 tensor cores, activations quantised per token before each linear */
            k.peak = c->gpu.fp8_flops;
            k.qeff = t->fp8_gemm_rel;
            k.wrel = t->fp8_bw_rel;
            k.quant_bytes = (3.0 * m->hidden + (double)m->intermediate) * EMU_FP8_QUANT_BYTES;
            k.quant_kernels = EMU_FP8_QUANT_KERNELS_PER_LAYER;
        } else {
            /* weight-only fp8 (W8A16) on GPUs without fp8 tensor cores: FP8 Marlin, the 8-bit
             * path of the same GPTQ Marlin GEMM the 4-bit weights use (vLLM PR #5975;
             * apply_fp8_marlin_linear calls gptq_marlin_gemm), so the same efficiency curve */
            k.qeff = marlin_qeff(t, T);
            k.wrel = t->marlin_bw_rel;
        }
    } else if (is_int4(c->weight_dtype)) {
        k.qeff = marlin_qeff(t, T);
        k.wrel = t->marlin_bw_rel;
    }
    return k;
}

/* Fraction of an MoE model's expert weights a batch of T tokens touches: each token picks k
 * of E experts, so an expert is untouched with probability (1 - k/E)^T. */
static double experts_touched(const st_emu_model *m, double T)
{
    if (m->experts == 0 || T <= 0)
        return T > 0 ? 1.0 : 0.0;
    double p = (double)m->experts_per_tok / m->experts;
    if (p >= 1)
        return 1.0;
    return 1.0 - pow(1.0 - p, T);
}

double st_emu_step_seconds(const st_emu_config *c, const st_emu_batch *b, st_emu_step_breakdown *bd)
{
    const st_emu_model *m = &c->model;
    const st_emu_tuning *tu = &c->tune;
    double tp = c->tp ? c->tp : 1;
    double T = b->tokens;
    double embed = (double)m->vocab * m->hidden;
    double head = embed; /* lm_head (tied or not, the matrix is read and multiplied) */
    double untied_head = m->tied_embeddings ? 0 : embed;
    double norms = m->layers * (2.0 * m->hidden + 2.0 * m->head_dim) + m->hidden;

    /* FLOPs. Linear layers: 2 x active params (without embeddings) per token; lm_head only
     * for the rows that are sampled; attention: QK^T and PV, 4 x heads x head_dim per
     * (query, key) pair per layer. */
    double lin_active = m->active_params - embed - untied_head - norms;
    double moe_active = 0; /* the routed experts' share (fused MoE kernel) */
    if (m->experts > 0) {
        uint32_t dense = m->dense_layers < m->layers ? m->dense_layers : m->layers;
        moe_active = (double)(m->layers - dense) * 3.0 * m->hidden * m->moe_intermediate * m->experts_per_tok;
    }
    double lin_flops = 2.0 * lin_active * T + 2.0 * head * b->sampled;
    double attn_flops = 4.0 * m->layers * (double)m->heads * m->head_dim * b->attn_pairs;

    lin_kind k = linear_kind(c, T);
    double peak16 = c->gpu.bf16_flops;
    double gemm_eff = tu->gemm_eff * T / (T + EMU_GEMM_HALF_TOKENS) * k.qeff;
    double compute = 0;
    if (T > 0) {
        double moe_flops = 2.0 * moe_active * T;
        compute = (lin_flops - moe_flops) / tp / (k.peak * gemm_eff) +
                  moe_flops / tp / (k.peak * gemm_eff * tu->moe_gemm_rel) + attn_flops / tp / (peak16 * tu->attn_eff);
    }

    /* Bytes: weights read once per step (all but the input embedding table; MoE: only the
     * experts the batch touches), KV read for the cached context, KV written for every new
     * token, and fp8's activation-quantisation passes. */
    double wbytes = st_emu_model_weight_bytes(m, c->weight_dtype);
    wbytes -= untied_head * 2.0; /* the input embedding is only gathered (a few rows), not streamed */
    if (m->experts > 0) {
        uint32_t dense = m->dense_layers < m->layers ? m->dense_layers : m->layers;
        double expert_params = (double)(m->layers - dense) * 3.0 * m->hidden * m->moe_intermediate * m->experts;
        double per_param = wbytes / m->params;
        wbytes -= expert_params * per_param * (1 - experts_touched(m, T));
    }
    double kv_share = m->kv_heads >= c->tp ? 1.0 / tp : 1.0 / m->kv_heads;
    double kvtok = st_emu_model_kv_bytes_per_token(m, c->kv_dtype) * kv_share;
    double kv_bytes = kvtok * (b->kv_read_tokens + T);
    double quant_bytes = T * m->layers * k.quant_bytes / tp;
    double bw = c->gpu.mem_bw * tu->bw_eff;
    double bytes = wbytes / tp + kv_bytes + quant_bytes;
    double memory =
        wbytes / tp / (bw * k.wrel) + kvtok * b->kv_read_tokens / (bw * tu->kv_bw_rel) + (kvtok * T + quant_bytes) / bw;

    double work = compute > memory ? compute : memory;
    /* Fault injection: a slow decode kernel path stretches the decode share of the work. */
    if (c->decode_slowdown > 0 && c->decode_slowdown != 1.0 && T > 0)
        work *= 1.0 + (c->decode_slowdown - 1.0) * (double)b->decode_tokens / T;

    /* Per-layer costs. CUDA graphs cover batches up to min(2 x max_num_seqs, 512) tokens:
     * there the kernels follow each other with small gaps (serial GPU time). Beyond (or with
     * --enforce-eager) the CPU launches every kernel as the step runs: it launches ahead of the
     * GPU (launches are asynchronous), so the step takes the longer of the GPU's work and the
     * launches, not their sum: a large prefill hides its launches, a small eager decode is
     * launch-bound. A torch.compile'd step (no graph) launches fewer, fused kernels than
     * PyTorch eager (--enforce-eager). */
    uint32_t graph_max = 2 * c->max_num_seqs < EMU_CUDA_GRAPH_MAX ? 2 * c->max_num_seqs : EMU_CUDA_GRAPH_MAX;
    int eager = c->enforce_eager || b->tokens > graph_max;
    double kfac = (EMU_KERNELS_PER_LAYER + k.quant_kernels) / EMU_KERNELS_PER_LAYER;
    double body = work + m->layers * tu->layer_graph_s * kfac;
    if (eager) {
        double launch = m->layers * kfac * (c->enforce_eager ? tu->layer_eager_s : EMU_LAYER_LAUNCH_COMPILED_S);
        if (launch > body)
            body = launch;
    }
    double allreduce = 0;
    if (c->tp > 1) {
        double msg = T * m->hidden * 2.0; /* bf16 activations */
        double lat = c->gpu.link_latency > 0 ? c->gpu.link_latency : EMU_ALLREDUCE_LATENCY_S;
        double per = lat + 2.0 * (tp - 1) / tp * msg / c->gpu.link_bw;
        allreduce = 2.0 * m->layers * per;
    }
    double gpu = body + tu->step_gpu_s + allreduce;
    /* The engine core's CPU work for the step (scheduling, inputs, outputs): serial with the
     * GPU, or hidden behind the previous step's GPU work with async scheduling. */
    double cpu = tu->step_cpu_s + b->seqs * tu->seq_cpu_s;
    double total = st_emu_async_scheduling(c) ? (gpu > cpu ? gpu : cpu) + EMU_ASYNC_SYNC_S : gpu + cpu;
    if (bd) {
        bd->compute_s = compute;
        bd->memory_s = memory;
        bd->overhead_s = total - work - allreduce;
        bd->allreduce_s = allreduce;
        bd->cpu_s = cpu;
        bd->total_s = total;
        bd->flops = lin_flops + attn_flops;
        bd->bytes = bytes;
        bd->eager = eager;
    }
    return total;
}
