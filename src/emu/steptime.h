/* Step time: a roofline over one scheduler step plus fixed overheads. Pure. */
#ifndef ST_EMU_STEPTIME_H
#define ST_EMU_STEPTIME_H
#include <stdint.h>

#include "emu/config.h"

/* What one step computes. Context figures are in tokens. */
typedef struct st_emu_batch {
    uint32_t tokens;        /* scheduled tokens (decodes + prefill chunks) */
    uint32_t decode_tokens; /* of which decodes */
    uint32_t seqs;          /* sequences in the step */
    uint32_t sampled;       /* sequences that produce a token this step (lm_head rows) */
    double attn_pairs;      /* sum over scheduled tokens of the keys each attends to */
    double kv_read_tokens;  /* sum over sequences of the cached context read */
} st_emu_batch;

typedef struct st_emu_step_breakdown {
    double compute_s, memory_s, overhead_s, allreduce_s, cpu_s, total_s;
    double gemm_s, attn_s, elem_s; /* the work's terms: linear layers, attention, element-wise kernels */
    double flops, bytes;
    int eager;
} st_emu_step_breakdown;

/* Seconds for one step of config c (resolved by st_emu_memory_plan). bd may be NULL. */
double st_emu_step_seconds(const st_emu_config *c, const st_emu_batch *b, st_emu_step_breakdown *bd);

/* The same in two parts: everything of a step's time that does not depend on its attention
 * context (the linear layers, element-wise kernels, launches, all-reduce, CPU work: a function of
 * tokens, decode tokens, sequences and sampled rows), worked out once, and the attention term with
 * the rest of the sum per context. st_emu_step_seconds(c, b, bd) is exactly (the same operations
 * in the same order) st_emu_step_seconds_ctx(prepared b, b->attn_pairs, b->kv_read_tokens, bd):
 * a run of decode steps whose batch differs only in its context prepares once. */
typedef struct st_emu_step_fixed {
    double g_time, g_compute, g_memory, g_flops, g_bytes; /* the linear layers (GEMMs) */
    double attn_flops_per_pair, kvtok, attn_rate, kv_rate, attn_calls_s;
    double elem, elem_bytes;
    double slow_factor, graph_s, launch_s, host_launch_s, allreduce, step_gpu_s, cpu;
    int any, slow, eager, async;
} st_emu_step_fixed;
void st_emu_step_prepare(const st_emu_config *c, const st_emu_batch *b, st_emu_step_fixed *f);
double st_emu_step_seconds_ctx(const st_emu_step_fixed *f, double attn_pairs, double kv_read_tokens,
                               st_emu_step_breakdown *bd);

/* The prepared parts of the batch shapes (tokens, decode tokens, sequences, sampled rows) one
 * config has stepped, each worked out once: an open-addressing table (linear probing) of at most
 * ST_EMU_STEP_CACHE_MAX shapes, emptied when a new shape finds it full. Zeroed is empty; its owner
 * passes the same config at every call and frees it with st_emu_step_cache_free. No state outside
 * the struct. */
#define ST_EMU_STEP_CACHE_MAX 1024u /* shapes kept (a power of two); the table has twice as many slots */
typedef struct st_emu_step_cache_slot st_emu_step_cache_slot;
typedef struct st_emu_step_cache {
    st_emu_step_cache_slot *slots; /* 2 x ST_EMU_STEP_CACHE_MAX, made at the first call */
    st_emu_step_fixed *fixed;      /* ST_EMU_STEP_CACHE_MAX: the shapes' parts, in the order they came */
    uint32_t n;                    /* shapes kept */
} st_emu_step_cache;
/* b's prepared part (st_emu_step_prepare of c and b's shape) from k, worked out and kept there if
 * it is not; NULL out of memory. Valid until the next call. */
const st_emu_step_fixed *st_emu_step_cache_get(st_emu_step_cache *k, const st_emu_config *c, const st_emu_batch *b);
/* st_emu_step_seconds(c, b, bd), the same figures bit for bit (breakdown included), with the
 * prepared part taken from k (worked out without it out of memory). */
double st_emu_step_cache_seconds(st_emu_step_cache *k, const st_emu_config *c, const st_emu_batch *b,
                                 st_emu_step_breakdown *bd);
void st_emu_step_cache_free(st_emu_step_cache *k);

/* Whether c's weights run through Marlin (weight-only: 4-bit AWQ/GPTQ, or fp8 on a GPU without
 * fp8 tensor cores): the constants marlin_bw_rel and int4_gemm_rel apply. */
int st_emu_marlin_weights(const st_emu_config *c);

/* Seconds for one M x N x K GEMM (M tokens, an N x K weight per GPU) of c's weight format: the
 * step model's linear-layer term (soft roof of the size-dependent compute rate and the weight
 * and activation bytes). For kernel anchors (tests/unit/test_emu_kernels.c). */
double st_emu_gemm_seconds(const st_emu_config *c, double M, double N, double K);
/* Seconds of one layer's decode attention for `seqs` sequences of `context` cached tokens each
 * (per GPU): the call's fixed cost plus the KV streaming or the QK^T / PV compute. */
double st_emu_decode_attention_seconds(const st_emu_config *c, double seqs, double context);
/* Seconds of one tensor-parallel all-reduce of `bytes` (per GPU) across c's tp GPUs (0 at tp 1): the
 * link's fixed latency plus a ring's 2 (tp - 1) / tp x bytes at the link's NCCL bus bandwidth
 * (st_emu_gpu.link_latency, link_bw; consts.h EMU_LINK_BUSBW_*). A step pays two per layer. */
double st_emu_allreduce_seconds(const st_emu_config *c, double bytes);
/* The fixed cost of one attention kernel call on g (its own, else EMU_ATTN_CALL_S). */
double st_emu_attn_call_s(const st_emu_gpu *g);

/* Whether batch b runs under piecewise CUDA graphs (attention outside the graph, consts.h
 * EMU_LAYER_PIECEWISE_S) on c's vLLM version: every graphed batch before full graphs
 * (EMU_VLLM_FULL_GRAPH_VERSION), and after it the batches that carry prefill. */
int st_emu_piecewise_graph(const st_emu_config *c, const st_emu_batch *b);

/* The decode floor: weight bytes per GPU / peak bandwidth (reference doc §6). */
double st_emu_weight_read_floor_s(const st_emu_config *c);

#endif
