#include "emu/steptime.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "emu/consts.h"

/* Kernels per transformer layer (norms, qkv, rope, attention, o, norm, gate_up, act, down, and
 * the residual adds): the per-layer overheads are spread over them, fp8 adds its quant kernels. */
#define EMU_KERNELS_PER_LAYER 12.0

static int is_int4(st_emu_dtype d) { return d == ST_EMU_INT4_AWQ || d == ST_EMU_INT4_GPTQ; }

int st_emu_marlin_weights(const st_emu_config *c)
{
    return is_int4(c->weight_dtype) || (c->weight_dtype == ST_EMU_FP8 && c->gpu.fp8_flops <= 0);
}

int st_emu_piecewise_graph(const st_emu_config *c, const st_emu_batch *b)
{
    uint32_t v = c->vllm_version ? c->vllm_version : EMU_VLLM_DEFAULT_VERSION;
    return v < EMU_VLLM_FULL_GRAPH_VERSION || b->decode_tokens < b->tokens;
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

/* The two roofs of one kernel combined by a soft maximum (consts.h EMU_ROOF_P): near either
 * roof the kernel runs at it, where both are close it runs slower than either (a GEMM at the
 * ridge point neither streams at full bandwidth nor computes at full rate). */
static double roof(double a, double b)
{
    if (a <= 0)
        return b > 0 ? b : 0;
    if (b <= 0)
        return a;
    double hi = a > b ? a : b, lo = a > b ? b : a, r = lo / hi;
#if EMU_ROOF_P == 6
    double r3 = r * r * r; /* (1 + r^6)^(1/6) without pow(): the step model runs per step */
    return hi * cbrt(sqrt(1.0 + r3 * r3));
#else
    return hi * pow(1.0 + pow(r, EMU_ROOF_P), 1.0 / EMU_ROOF_P);
#endif
}

/* What the per-GEMM costs add up to. */
typedef struct gemm_acc {
    double time, compute, memory, flops, bytes;
} gemm_acc;

/* One GEMM of M rows (tokens) by an N x K weight (per GPU): compute at the tensor peak times an
 * efficiency that rises with the GEMM's size (consts.h EMU_GEMM_HALF_SIZE: tile and wave
 * quantisation leave most of the SMs idle on a small GEMM), memory for the weight and the
 * activations, combined by the soft roof. wb: weight bytes per element; rel: the kernel's
 * efficiency relative to a dense 16-bit cuBLAS GEMM (fused MoE). */
static double gemm(const st_emu_config *c, const lin_kind *k, double M, double N, double K, double wb, double rel,
                   gemm_acc *acc)
{
    if (M <= 0 || N <= 0 || K <= 0)
        return 0;
    const st_emu_tuning *t = &c->tune;
    double q = N / EMU_GEMM_N_REF;
#if EMU_GEMM_N_EXP_X4 == 3
    double wq = sqrt(q) * sqrt(sqrt(q)); /* q^0.75 */
#else
    double wq = pow(q, EMU_GEMM_N_EXP);
#endif
    double x = (M > EMU_GEMM_MIN_ROWS ? M : EMU_GEMM_MIN_ROWS) * wq;
    double eff = t->gemm_eff * x / (x + EMU_GEMM_HALF_SIZE) * k->qeff * rel;
    double flops = 2.0 * M * N * K;
    double bw = c->gpu.mem_bw * t->bw_eff;
    double wbytes = N * K * wb, abytes = (M * K + M * N) * 2.0;
    double tc = flops / (k->peak * eff);
    double tm = wbytes / (bw * k->wrel) + abytes / bw;
    double time = roof(tc, tm);
    if (acc) {
        acc->time += time;
        acc->compute += tc;
        acc->memory += tm;
        acc->flops += flops;
        acc->bytes += wbytes + abytes;
    }
    return time;
}

double st_emu_gemm_seconds(const st_emu_config *c, double M, double N, double K)
{
    lin_kind k = linear_kind(c, M);
    return gemm(c, &k, M, N, K, st_emu_dtype_bytes(c->weight_dtype), 1.0, NULL);
}

double st_emu_allreduce_seconds(const st_emu_config *c, double bytes)
{
    if (c->tp <= 1)
        return 0;
    double n = c->tp;
    double lat = c->gpu.link_latency > 0 ? c->gpu.link_latency : EMU_ALLREDUCE_LATENCY_S;
    return lat + 2.0 * (n - 1) / n * bytes / c->gpu.link_bw;
}

double st_emu_attn_call_s(const st_emu_gpu *g) { return g->attn_call_s > 0 ? g->attn_call_s : EMU_ATTN_CALL_S; }

double st_emu_decode_attention_seconds(const st_emu_config *c, double seqs, double context)
{
    const st_emu_model *m = &c->model;
    double tp = c->tp ? c->tp : 1;
    double kv_share = m->kv_heads >= c->tp ? 1.0 / tp : 1.0 / m->kv_heads;
    double per_layer_tok = 2.0 * m->kv_heads * m->head_dim * st_emu_dtype_bytes(c->kv_dtype) * kv_share;
    double bytes = seqs * context * per_layer_tok;
    double flops = 4.0 * (double)m->heads * m->head_dim * seqs * context / tp;
    double tc = flops / (c->gpu.bf16_flops * c->tune.attn_eff);
    double tm = bytes / (c->gpu.mem_bw * c->tune.bw_eff * c->tune.kv_bw_rel);
    return st_emu_attn_call_s(&c->gpu) + (tc > tm ? tc : tm);
}

/* A step's shape on one GPU: the model's sizes, the weight format and the layer split. */
typedef struct step_shape {
    double tp, T, L, h, hd;
    double kvh, qh; /* KV and query heads per GPU */
    double wb;      /* weight bytes per element */
    uint32_t dense; /* dense MLP layers */
    double moe_layers;
    lin_kind k, k16; /* the linear layers' kind, and 16-bit (lm_head and router) */
} step_shape;

/* The shape of batch b on config c. */
static void step_shape_of(const st_emu_config *c, const st_emu_batch *b, step_shape *s)
{
    const st_emu_model *m = &c->model;
    s->tp = c->tp ? c->tp : 1;
    s->T = b->tokens;
    s->L = m->layers;
    s->h = m->hidden;
    s->hd = m->head_dim;
    s->kvh = m->kv_heads >= c->tp ? m->kv_heads / s->tp : 1.0; /* KV heads per GPU (replicated below TP) */
    s->qh = m->heads / s->tp;
    s->wb = st_emu_dtype_bytes(c->weight_dtype);
    if (c->weight_dtype == ST_EMU_INT4_AWQ || c->weight_dtype == ST_EMU_INT4_GPTQ)
        s->wb += (2.0 + 0.5) / 128.0; /* fp16 scale + 4-bit zero per group of 128 (catalog.c) */
    s->k = linear_kind(c, s->T);
    s->k16 = (lin_kind){ c->gpu.bf16_flops, 1.0, 1.0, 0, 0 };
    s->dense = m->experts > 0 ? (m->dense_layers < m->layers ? m->dense_layers : m->layers) : m->layers;
    s->moe_layers = s->L - s->dense;
}

/* MoE layers: the fused-MoE kernel is a grouped GEMM: each touched expert multiplies the
 * rows routed to it, padded to the kernel's row block (EMU_MOE_ROW_PAD), at the grouped
 * kernel's efficiency (moe_gemm_rel); plus the shared expert and the router. One layer's
 * seconds, its terms into ge. */
static double moe_layer(const st_emu_config *c, const step_shape *s, gemm_acc *ge)
{
    const st_emu_model *m = &c->model;
    const st_emu_tuning *tu = &c->tune;
    double T = s->T, h = s->h, tp = s->tp, wb = s->wb;
    double touched = m->experts * experts_touched(m, T);
    double rows = touched > 0 ? T * m->experts_per_tok / touched : 0;
    double padded = ceil(rows / EMU_MOE_ROW_PAD) * EMU_MOE_ROW_PAD;
    gemm_acc one = { 0 };
    double te = gemm(c, &s->k, padded, 2.0 * m->moe_intermediate / tp, h, wb, tu->moe_gemm_rel, &one) +
                gemm(c, &s->k, padded, h, m->moe_intermediate / tp, wb, tu->moe_gemm_rel, &one);
    double t_moe = touched * te;
    ge->time = touched * one.time;
    ge->compute = touched * one.compute;
    ge->memory = touched * one.memory;
    ge->flops = touched * one.flops;
    ge->bytes = touched * one.bytes;
    if (m->shared_intermediate > 0) {
        t_moe += gemm(c, &s->k, T, 2.0 * m->shared_intermediate / tp, h, wb, 1.0, ge) +
                 gemm(c, &s->k, T, h, m->shared_intermediate / tp, wb, 1.0, ge);
    }
    t_moe += gemm(c, &s->k16, T, m->experts, h, 2.0, 1.0, ge);
    return t_moe;
}

/* The linear layers (GEMMs) of the step, every layer's: attention projections, dense MLP or
 * MoE, and the lm_head over the sampled rows. */
static gemm_acc linear_layers(const st_emu_config *c, const st_emu_batch *b, const step_shape *s)
{
    const st_emu_model *m = &c->model;
    double T = s->T, L = s->L, h = s->h, hd = s->hd, tp = s->tp, wb = s->wb;
    gemm_acc g = { 0 };
    if (T <= 0)
        return g;
    /* attention projections (every layer): qkv, o */
    double per_layer = 0;
    per_layer += gemm(c, &s->k, T, (s->qh + 2 * s->kvh) * hd, h, wb, 1.0, &g);
    per_layer += gemm(c, &s->k, T, h, s->qh * hd, wb, 1.0, &g);
    double t_attn_proj = per_layer;
    gemm_acc g1 = g;
    /* dense MLP layers: gate_up, down */
    gemm_acc gm = { 0 };
    double t_mlp = gemm(c, &s->k, T, 2.0 * m->intermediate / tp, h, wb, 1.0, &gm) +
                   gemm(c, &s->k, T, h, m->intermediate / tp, wb, 1.0, &gm);
    double t_moe = 0;
    gemm_acc ge = { 0 };
    if (s->moe_layers > 0)
        t_moe = moe_layer(c, s, &ge);
    double dense = s->dense, moe_layers = s->moe_layers;
    g.time = L * t_attn_proj + dense * t_mlp + moe_layers * t_moe;
    g.compute = L * g1.compute + dense * gm.compute + moe_layers * ge.compute;
    g.memory = L * g1.memory + dense * gm.memory + moe_layers * ge.memory;
    g.flops = L * g1.flops + dense * gm.flops + moe_layers * ge.flops;
    g.bytes = L * g1.bytes + dense * gm.bytes + moe_layers * ge.bytes;
    /* lm_head over the sampled rows (16-bit, also for quantised checkpoints) */
    g.time += gemm(c, &s->k16, b->sampled, (double)m->vocab / tp, h, 2.0, 1.0, &g);
    return g;
}

/* Per-layer costs. CUDA graphs cover batches up to min(2 x max_num_seqs, 512) tokens:
 * there the kernels follow each other with small gaps (serial GPU time). Beyond (or with
 * --enforce-eager) the CPU launches every kernel as the step runs: it launches ahead of the
 * GPU (launches are asynchronous), so the step takes the longer of the GPU's work and the
 * launches, not their sum: a large prefill hides its launches, a small eager decode is
 * launch-bound. A torch.compile'd step (no graph) launches fewer, fused kernels than
 * PyTorch eager (--enforce-eager). Also the all-reduce and the engine core's CPU work. */
static void step_overheads(const st_emu_config *c, const st_emu_batch *b, const step_shape *s, st_emu_step_fixed *f)
{
    const st_emu_model *m = &c->model;
    const st_emu_tuning *tu = &c->tune;
    f->eager = c->enforce_eager || b->tokens > st_emu_cuda_graph_max(c);
    double kfac = (EMU_KERNELS_PER_LAYER + s->k.quant_kernels) / EMU_KERNELS_PER_LAYER;
    f->graph_s = m->layers * tu->layer_graph_s * kfac;
    f->host_launch_s = 0;
    if (!f->eager && st_emu_piecewise_graph(c, b)) {
        f->graph_s += m->layers * EMU_LAYER_PIECEWISE_S;
        /* the host replays each piece and dispatches the attention call between them from
         * Python, ahead of the GPU: a floor under the forward (consts.h EMU_PIECEWISE_HOST_OPS) */
        if (!c->draft_pass)
            f->host_launch_s = m->layers * EMU_PIECEWISE_HOST_OPS * tu->layer_eager_s / EMU_KERNELS_PER_LAYER;
    }
    f->launch_s =
        f->eager ? m->layers * kfac * (c->enforce_eager ? tu->layer_eager_s : EMU_LAYER_LAUNCH_COMPILED_S) : 0;
    /* two all-reduces per layer (after attention's o_proj and the MLP's down_proj), of the
     * step's bf16 activations */
    f->allreduce = c->tp > 1 ? 2.0 * m->layers * st_emu_allreduce_seconds(c, s->T * m->hidden * 2.0) : 0;
    f->step_gpu_s = tu->step_gpu_s;
    /* The engine core's CPU work for the step (scheduling, inputs, outputs): serial with the
     * GPU, or hidden behind the previous step's GPU work with async scheduling. */
    f->cpu = tu->step_cpu_s + b->seqs * tu->seq_cpu_s;
    f->async = st_emu_async_scheduling(c);
}

void st_emu_step_prepare(const st_emu_config *c, const st_emu_batch *b, st_emu_step_fixed *f)
{
    const st_emu_model *m = &c->model;
    const st_emu_tuning *tu = &c->tune;
    step_shape s;
    step_shape_of(c, b, &s);
    double T = s.T, L = s.L, h = s.h, hd = s.hd, tp = s.tp, kvh = s.kvh, qh = s.qh;
    gemm_acc g = linear_layers(c, b, &s);

    /* Attention, per layer: one kernel call (its fixed cost, st_emu_gpu.attn_call_s) that
     * streams the cached context's KV at the paged-KV rate (bw_eff x kv_bw_rel) or computes
     * QK^T and PV at the attention kernels' rate, whichever binds (FlashAttention-3 / FlashInfer
     * decode: the fixed cost dominates short contexts, streaming long ones): per step, in
     * st_emu_step_seconds_ctx. */
    double kvtok = st_emu_model_kv_bytes_per_token(m, c->kv_dtype) * (kvh / (m->kv_heads ? m->kv_heads : 1));
    double bw = c->gpu.mem_bw * tu->bw_eff;
    f->any = T > 0;
    f->attn_flops_per_pair = 4.0 * L * qh * hd;
    f->kvtok = kvtok;
    f->attn_rate = c->gpu.bf16_flops * tu->attn_eff;
    f->kv_rate = bw * tu->kv_bw_rel;
    f->attn_calls_s = L * st_emu_attn_call_s(&c->gpu);
    /* Element-wise kernels (norms with the residual add, rotary, the activation, the KV-cache
     * write, fp8's activation quantisation): memory-bound, their bytes per token per layer. */
    double inter = m->experts > 0 && s.moe_layers > 0
                       ? ((double)m->moe_intermediate * m->experts_per_tok + m->shared_intermediate)
                       : (double)m->intermediate;
    double elem_tok = EMU_ELEM_BYTES_HIDDEN * h + EMU_ELEM_BYTES_INTER * inter / tp +
                      EMU_ELEM_BYTES_QK * (qh + kvh) * hd + kvtok / L * 2.0 + s.k.quant_bytes / tp;
    f->elem_bytes = T * L * elem_tok;
    f->elem = f->elem_bytes / bw;
    f->g_time = g.time;
    f->g_compute = g.compute;
    f->g_memory = g.memory;
    f->g_flops = g.flops;
    f->g_bytes = g.bytes;
    /* Fault injection: a slow decode kernel path stretches the decode share of the work. */
    f->slow = c->decode_slowdown > 0 && c->decode_slowdown != 1.0 && T > 0;
    f->slow_factor = f->slow ? 1.0 + (c->decode_slowdown - 1.0) * (double)b->decode_tokens / T : 1.0;
    step_overheads(c, b, &s, f);
}

double st_emu_step_seconds_ctx(const st_emu_step_fixed *f, double attn_pairs, double kv_read_tokens,
                               st_emu_step_breakdown *bd)
{
    double attn_flops = f->attn_flops_per_pair * attn_pairs;
    double kv_read = f->kvtok * kv_read_tokens;
    double attn = 0, attn_c = 0, attn_m = 0;
    if (f->any) {
        attn_c = attn_flops / f->attn_rate;
        attn_m = kv_read / f->kv_rate;
        attn = f->attn_calls_s + (attn_c > attn_m ? attn_c : attn_m);
    }
    double work = f->g_time + attn + f->elem;
    if (f->slow)
        work *= f->slow_factor;
    double body = work + f->graph_s;
    if (f->eager && f->launch_s > body)
        body = f->launch_s;
    if (f->host_launch_s > body)
        body = f->host_launch_s;
    double gpu = body + f->step_gpu_s + f->allreduce;
    double total = f->async ? (gpu > f->cpu ? gpu : f->cpu) + EMU_ASYNC_SYNC_S : gpu + f->cpu;
    if (bd) {
        bd->compute_s = f->g_compute + attn_c;
        bd->memory_s = f->g_memory + attn_m + f->elem;
        bd->overhead_s = total - work - f->allreduce;
        bd->allreduce_s = f->allreduce;
        bd->cpu_s = f->cpu;
        bd->total_s = total;
        bd->flops = f->g_flops + attn_flops;
        bd->gemm_s = f->g_time;
        bd->attn_s = attn;
        bd->elem_s = f->elem;
        bd->bytes = f->g_bytes + kv_read + f->elem_bytes;
        bd->eager = f->eager;
    }
    return total;
}

double st_emu_step_seconds(const st_emu_config *c, const st_emu_batch *b, st_emu_step_breakdown *bd)
{
    st_emu_step_fixed f;
    st_emu_step_prepare(c, b, &f);
    return st_emu_step_seconds_ctx(&f, b->attn_pairs, b->kv_read_tokens, bd);
}

/* A slot of st_emu_step_cache: a shape (tokens << 32 | seqs, decode_tokens << 32 | sampled) and its index in
 * fixed plus 1 (0: the slot is empty). */
struct st_emu_step_cache_slot {
    uint64_t shape[2];
    uint32_t idx;
};

#define STEP_CACHE_SLOTS (2 * ST_EMU_STEP_CACHE_MAX)
_Static_assert((ST_EMU_STEP_CACHE_MAX & (ST_EMU_STEP_CACHE_MAX - 1)) == 0, "ST_EMU_STEP_CACHE_MAX: a power of two");

/* The shape's first slot: the top bits of a multiplicative hash. */
static inline uint32_t step_cache_home(uint64_t s0, uint64_t s1)
{
    return (uint32_t)(((s0 * 0x9e3779b97f4a7c15ULL) ^ s1) * 0xbf58476d1ce4e5b9ULL >>
                      (64 - __builtin_ctz(STEP_CACHE_SLOTS)));
}

/* b's shape not in k, at slot i (empty): prepared into k, which is emptied first when full. */
static const st_emu_step_fixed *step_cache_add(st_emu_step_cache *k, const st_emu_config *c, const st_emu_batch *b,
                                               uint64_t s0, uint64_t s1, uint32_t i)
{
    if (!k->slots) {
        k->slots = calloc(STEP_CACHE_SLOTS, sizeof *k->slots);
        k->fixed = malloc(ST_EMU_STEP_CACHE_MAX * sizeof *k->fixed);
        if (!k->slots || !k->fixed) {
            st_emu_step_cache_free(k);
            return NULL;
        }
        k->n = 0;
    } else if (k->n == ST_EMU_STEP_CACHE_MAX) { /* full: emptied, the new shape the first of the next ones */
        memset(k->slots, 0, STEP_CACHE_SLOTS * sizeof *k->slots);
        k->n = 0;
        i = step_cache_home(s0, s1);
    }
    st_emu_step_fixed *f = &k->fixed[k->n];
    st_emu_step_prepare(c, b, f);
    k->slots[i] = (st_emu_step_cache_slot){ { s0, s1 }, ++k->n };
    return f;
}

static inline const st_emu_step_fixed *step_cache_get(st_emu_step_cache *k, const st_emu_config *c,
                                                      const st_emu_batch *b)
{
    uint64_t s0 = (uint64_t)b->tokens << 32 | b->seqs, s1 = (uint64_t)b->decode_tokens << 32 | b->sampled;
    uint32_t i = step_cache_home(s0, s1);
    if (k->slots)
        for (;; i = (i + 1) & (STEP_CACHE_SLOTS - 1)) {
            const st_emu_step_cache_slot *sl = &k->slots[i];
            if (!sl->idx)
                break;
            if (sl->shape[0] == s0 && sl->shape[1] == s1)
                return &k->fixed[sl->idx - 1];
        }
    return step_cache_add(k, c, b, s0, s1, i);
}

const st_emu_step_fixed *st_emu_step_cache_get(st_emu_step_cache *k, const st_emu_config *c, const st_emu_batch *b)
{
    return step_cache_get(k, c, b);
}

double st_emu_step_cache_seconds(st_emu_step_cache *k, const st_emu_config *c, const st_emu_batch *b,
                                 st_emu_step_breakdown *bd)
{
    const st_emu_step_fixed *f = step_cache_get(k, c, b);
    if (!f)
        return st_emu_step_seconds(c, b, bd);
    return st_emu_step_seconds_ctx(f, b->attn_pairs, b->kv_read_tokens, bd);
}

void st_emu_step_cache_free(st_emu_step_cache *k)
{
    free(k->slots);
    free(k->fixed);
    *k = (st_emu_step_cache){ 0 };
}
