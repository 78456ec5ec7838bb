#include "emu/steptime.h"

#include <math.h>
#include <stddef.h>

#include "emu/consts.h"

static int is_int4(st_emu_dtype d) { return d == ST_EMU_INT4_AWQ || d == ST_EMU_INT4_GPTQ; }

double st_emu_weight_read_floor_s(const st_emu_config *c)
{
    return st_emu_model_weight_bytes(&c->model, c->weight_dtype) / c->tp / c->gpu.mem_bw;
}

double st_emu_step_seconds(const st_emu_config *c, const st_emu_batch *b, st_emu_step_breakdown *bd)
{
    const st_emu_model *m = &c->model;
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
    double lin_flops = 2.0 * lin_active * T + 2.0 * head * b->sampled;
    double attn_flops = 4.0 * m->layers * (double)m->heads * m->head_dim * b->attn_pairs;

    double peak16 = c->gpu.bf16_flops;
    double peak_lin = peak16, qeff = 1.0;
    if (c->weight_dtype == ST_EMU_FP8) {
        if (c->gpu.fp8_flops > 0)
            peak_lin = c->gpu.fp8_flops; /* W8A8 on fp8 tensor cores */
        else
            qeff = EMU_WEIGHT_ONLY_QUANT_EFF; /* weight-only fp8 (Marlin) on A100 */
    } else if (is_int4(c->weight_dtype)) {
        {
            double x = T / EMU_INT4_EFF_TOKENS;
            qeff = EMU_INT4_EFF_LARGE + (EMU_WEIGHT_ONLY_QUANT_EFF - EMU_INT4_EFF_LARGE) / (1.0 + x * x);
        }
    }
    double gemm_eff = c->gpu.gemm_eff * T / (T + EMU_GEMM_HALF_TOKENS) * qeff;
    double compute = 0;
    if (T > 0)
        compute = lin_flops / tp / (peak_lin * gemm_eff) + attn_flops / tp / (peak16 * EMU_MFU_ATTN);

    /* Bytes: weights read once per step (all but the input embedding table) (MoE: only the experts the batch touches), KV read
     * for the cached context, KV written for every new token. */
    double wbytes = st_emu_model_weight_bytes(m, c->weight_dtype);
    wbytes -= untied_head * 2.0; /* the input embedding is only gathered (a few rows), not streamed */
    if (m->experts > 0) {
        double frac = (double)m->experts_per_tok * T / m->experts;
        if (frac > 1)
            frac = 1;
        double expert_params = m->layers * 3.0 * m->hidden * m->moe_intermediate * m->experts;
        double per_param = wbytes / m->params;
        wbytes -= expert_params * per_param * (1 - frac);
    }
    double kv_share = m->kv_heads >= c->tp ? 1.0 / tp : 1.0 / m->kv_heads;
    double kvtok = st_emu_model_kv_bytes_per_token(m, c->kv_dtype) * kv_share;
    double bytes = wbytes / tp + kvtok * (b->kv_read_tokens + T);
    double memory = bytes / (c->gpu.mem_bw * EMU_BW_EFF);

    /* Overheads. CUDA graphs cover batches up to min(2 x max_num_seqs, 512) tokens. */
    uint32_t graph_max = 2 * c->max_num_seqs < EMU_CUDA_GRAPH_MAX ? 2 * c->max_num_seqs : EMU_CUDA_GRAPH_MAX;
    int eager = c->enforce_eager || b->tokens > graph_max;
    double overhead = EMU_STEP_OVERHEAD_S + b->seqs * EMU_PER_SEQ_OVERHEAD_S +
                      m->layers * (eager ? EMU_LAYER_OVERHEAD_EAGER_S : EMU_LAYER_OVERHEAD_GRAPH_S);
    double allreduce = 0;
    if (c->tp > 1) {
        double msg = T * m->hidden * 2.0; /* bf16 activations */
        double per = EMU_ALLREDUCE_LATENCY_S + 2.0 * (tp - 1) / tp * msg / c->gpu.link_bw;
        allreduce = 2.0 * m->layers * per;
    }
    double work = compute > memory ? compute : memory;
    /* Fault injection: a slow decode kernel path stretches the decode share of the work. */
    if (c->decode_slowdown > 0 && c->decode_slowdown != 1.0 && T > 0)
        work *= 1.0 + (c->decode_slowdown - 1.0) * (double)b->decode_tokens / T;
    double total = work + overhead + allreduce;
    if (bd) {
        bd->compute_s = compute;
        bd->memory_s = memory;
        bd->overhead_s = overhead;
        bd->allreduce_s = allreduce;
        bd->total_s = total;
        bd->flops = lin_flops + attn_flops;
        bd->bytes = bytes;
        bd->eager = eager;
    }
    return total;
}
