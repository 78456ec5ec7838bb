/* Every constant of the engine model, in one place, with its source. docs/engine-model.md
 * repeats this table; change both together. GPU and model figures live in catalog.c. */
#ifndef ST_EMU_CONSTS_H
#define ST_EMU_CONSTS_H

#define EMU_GIB 1073741824.0

/* ---- Memory (vLLM V1 memory profiling; reference doc §2) ---------------------------- */
/* Default --gpu-memory-utilization (vLLM 0.8-0.11; the newest source says 0.92). */
#define EMU_DEFAULT_GPU_UTIL 0.90
/* "non_torch_memory" in vLLM's profiling log on H100 / Llama-3.1-8B: 0.13 GiB. */
#define EMU_NON_TORCH_BYTES (0.13 * EMU_GIB)
/* Extra non-torch memory per GPU with tensor parallelism (NCCL buffers, custom all-reduce):
 * an estimate, not measured here. */
#define EMU_NON_TORCH_TP_BYTES (0.40 * EMU_GIB)
/* Peak activation of the profiling forward pass = max_num_batched_tokens x hidden x A
 * + min(max_num_seqs, max_num_batched_tokens) x vocab x B. A and B are fitted to the two
 * measured H100 points of the reference doc (Llama-3.1-8B: 4.76 GiB; Qwen3-32B at
 * max-model-len 16000: 71.27 - 61.03 - 0.13 - 4.45 = 5.66 GiB), both at 8192 tokens /
 * 1024 seqs. A = 10 bytes (about five bf16 copies of the hidden state per token), B = 36
 * bytes (about nine fp32 copies of the logits per sampled sequence in the sampler's
 * dummy run). Reproduces 4.72 and 5.61 GiB. */
#define EMU_ACT_BYTES_PER_TOKEN_HIDDEN 10.0
#define EMU_ACT_BYTES_PER_SEQ_VOCAB 36.0

/* ---- Step time (roofline; reference doc §6) ------------------------------------------ */
/* Fraction of peak FLOP/s that large dense GEMMs reach is per GPU (st_emu_gpu.gemm_eff in
 * catalog.c: H100/H200/L40S 0.70, A100 0.75 - typical achieved cuBLAS fractions; RTX 4090
 * 0.90, calibrated on the published RTX 4090 point, since GeForce boards run well above the
 * spec sheet's boost clock). Custom GPU files default to this: */
#define EMU_GEMM_EFF_DEFAULT 0.70
/* GEMM efficiency falls at small token counts: eff = gemm_eff x T / (T + EMU_GEMM_HALF_TOKENS). */
#define EMU_GEMM_HALF_TOKENS 32.0
/* Attention kernels (FlashAttention) reach this fraction of the 16-bit peak. */
#define EMU_MFU_ATTN 0.50
/* 4-bit weight-only GEMMs (AWQ/GPTQ Marlin) and fp8 weight-only (GPUs without fp8 tensor
 * cores) dequantise in the kernel: their compute efficiency relative to a 16-bit GEMM. */
#define EMU_WEIGHT_ONLY_QUANT_EFF 0.90
/* 4-bit Marlin-style kernels keep that efficiency only at small token counts (decode), where
 * dequantisation hides behind the weight reads; at prefill sizes the dequantisation work is
 * paid per tile and the kernel falls behind a 16-bit GEMM. Efficiency relative to 16-bit:
 *   q(T) = LARGE + (EMU_WEIGHT_ONLY_QUANT_EFF - LARGE) / (1 + (T / TOKENS)^2)
 * (0.90 at decode batch sizes, 0.77 at 256 tokens, 0.49 at 2048). LARGE and TOKENS are
 * calibrated on the published RTX 4090 / Llama-3-8B AWQ point (docs/reference/calibration-rtx4090-llama3-8b-awq.md): with them
 * the emulated run lands at -21 % throughput and -18 % TTFT; without (q = 0.90 flat) the TTFT
 * was -47 %, outside the +-25 % band. */
#ifndef EMU_INT4_EFF_LARGE
#define EMU_INT4_EFF_LARGE 0.45
#endif
#ifndef EMU_INT4_EFF_TOKENS
#define EMU_INT4_EFF_TOKENS 384.0
#endif
/* Fraction of peak memory bandwidth reached by weight and KV reads (reference: ~0.7-0.85). */
#define EMU_BW_EFF 0.80
/* Fixed cost of one engine step: scheduling, input preparation, sampling launch (~0.5 ms). */
#define EMU_STEP_OVERHEAD_S 0.0005
/* Per-layer launch overhead: captured CUDA graph vs eager execution. */
#define EMU_LAYER_OVERHEAD_GRAPH_S 0.000004
#define EMU_LAYER_OVERHEAD_EAGER_S 0.000030
/* CPU cost per scheduled sequence per step (output processing, detokenisation). */
#define EMU_PER_SEQ_OVERHEAD_S 0.000004
/* Tensor parallel: two all-reduces per layer, each a fixed latency plus a ring transfer. */
#define EMU_ALLREDUCE_LATENCY_S 0.000008
/* Largest batch (tokens) run under CUDA graphs: min(2 x max_num_seqs, 512). */
#define EMU_CUDA_GRAPH_MAX 512

#endif
