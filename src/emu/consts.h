/* Every constant of the engine model, in one place, with its source. docs/engine-model.md
 * repeats this table; change both together. GPU and model figures live in catalog.c (per-GPU
 * efficiencies there too). Constants marked FITTED were fitted on the fit split of the
 * fidelity data set (bench/fidelity/measurements.json, `build/bench/fidelity --fit --split fit`, docs/fidelity.md)
 * and never on its test split; a calibration file (emu/calib.h) can override the ones held in
 * st_emu_tuning for one GPU/model. */
#ifndef ST_EMU_CONSTS_H
#define ST_EMU_CONSTS_H

#define EMU_GIB 1073741824.0

/* ---- vLLM versions whose behaviour the model distinguishes --------------------------- */
/* Packed as major * 10000 + minor * 100 + patch. The default is the version the emulator
 * reports on /version (0.10.1). */
#define EMU_VLLM_DEFAULT_VERSION 1001
/* Async scheduling (the scheduler prepares step N+1 while step N runs on the GPU) is on by
 * default from vLLM 0.14.0 (vllm-project/vllm#27614; deepjavalibrary/djl#3833 "Async
 * scheduling is now enabled by default in v0.14"; the H200 point of the fidelity data, vLLM
 * 0.14.1, logs it as the runtime default). */
#define EMU_VLLM_ASYNC_SCHED_VERSION 1400
/* The profiling run's sampler: vLLM's V1 GPU model runner samples the dummy batch with top-k
 * and top-p set (vllm/v1/worker/gpu_model_runner.py, _dummy_sampler_run: top_k = vocab - 1,
 * top_p = 0.9), which sorts the fp32 logits; the newer runner skips top-k/top-p while
 * profiling (vllm/v1/worker/gpu/model_runner.py: "the sampler may skip top_k, top_p, and
 * logprobs"). Measured: the heavy form in 0.14.1 (H200 point) and every llm-d H100 log, the
 * light one in 0.19.0 (A100 PCIe points). The switch is placed at 0.15.0: not pinned down
 * between those two releases. */
#define EMU_VLLM_LIGHT_SAMPLER_VERSION 1500
/* Admission checks the whole sequence: a waiting (or preempted) request is admitted only when the
 * KV cache's free blocks hold all of its tokens, not only its first chunk
 * (vllm/v1/core/kv_cache_manager.py, allocate_slots(full_sequence_must_fit=...), passed
 * SchedulerConfig.scheduler_reserve_full_isl, default True, from Scheduler.schedule's waiting
 * loop; vllm-project/vllm#37307, opened 2026-03-17, made the default in review). The switch is
 * placed at 0.19.0: not pinned down; 0.19.0 users report the head-of-line stall the check causes
 * when a prompt exceeds the free cache (vllm-project/vllm#39037, #39734, April 2026). */
#define EMU_VLLM_FULL_ISL_VERSION 1900
/* CUDA graphs over the whole forward pass for pure-decode batches (cudagraph_mode
 * FULL_AND_PIECEWISE: a full graph for uniform-decode batches, piecewise graphs for batches that
 * carry prefill; vllm-project/vllm#20059, docs.vllm.ai design/cuda_graphs). Before it V1 ran
 * piecewise graphs only (vllm-project/vllm#14437, docs/design/v1/torch_compile.md: the graph
 * is split at every attention call, which runs eagerly between the pieces). The v0.10.2 API
 * docs list the mode and the v0.11 line runs it by default; the switch is placed at 0.11.0,
 * not pinned down between those two releases. */
#define EMU_VLLM_FULL_GRAPH_VERSION 1100
/* The chat endpoint's content-format detection cached: before vllm-project/vllm#20065 ("[Perf]
 * [Frontend] Cached resolution for resolving chat templates", opened 2025-06-25, after 0.9.1)
 * every /v1/chat/completions request re-ran resolve_chat_template_content_format, which loads the
 * Jinja chat template and walks its AST (_detect_content_format); the PR caches it per template.
 * The first release with it is 0.9.2 (released 2025-07-08) or 0.10.0; no published source here
 * pins it. Placed at 0.9.2: at 0.10.0 the fidelity data's one chat setup in that window
 * (GPUStack's vLLM 0.9.2 bursts) comes out at 1.8-2.6x its published TTFT p50 (0.58-0.68x
 * without it; docs/fidelity.md "The API server's cost by vLLM version"). The cost it removed:
 * EMU_FE_CHAT_FORMAT_DETECT_S. */
#define EMU_VLLM_CHAT_FORMAT_CACHE_VERSION 902

/* ---- Memory (vLLM V1 memory profiling; reference doc §2) ---------------------------- */
/* Default --gpu-memory-utilization (vLLM 0.8-0.11; the newest source says 0.92). */
#define EMU_DEFAULT_GPU_UTIL 0.90
/* "non_torch_memory" in vLLM's profiling log on one H100: 0.13 GiB (llm-d/llm-d-benchmark
 * config_explorer/empirical-vllm-memory-results.md: Llama-3.1-8B, Qwen3-0.6B, gpt-oss-20b;
 * 0.14 for Qwen3-32B). */
#define EMU_NON_TORCH_BYTES (0.13 * EMU_GIB)
/* With tensor parallelism each GPU adds NCCL and custom all-reduce buffers: the same source
 * logs 0.55 GiB per GPU for Llama-3.3-70B-FP8 at TP=2 against 0.13-0.14 at TP=1: +0.42. */
#define EMU_NON_TORCH_TP_BYTES (0.42 * EMU_GIB)
/* Peak activation of the profiling run, per GPU and NOT divided by TP (the same source logs
 * 4.84 GiB for Llama-3.3-70B at TP=1 and at TP=2):
 *   max_num_batched_tokens x hidden x A  +  min(max_num_seqs, max_num_batched_tokens) x vocab x B
 * The second term is the dummy sampler run over max_num_seqs rows of fp32 logits. A and B are
 * a least-squares fit to the five H100 logs of the llm-d source (all at 8192 tokens / 1024
 * seqs: Llama-3.1-8B 4.76 GiB, Llama-3.3-70B 4.84, Qwen3-0.6B 5.56, Qwen3-32B 5.64,
 * gpt-oss-20b 7.38; residuals under 0.01 GiB): A = 2.69 bytes, B = 38.2 bytes (fp32 logits,
 * their sort values and int64 indices, and the sampler's temporaries: about 9.5 fp32 copies).
 * It also reproduces the H200 point (Llama-3.1-70B FP8, vLLM 0.14.1: 125.82 - 67.7 - 53.15 =
 * 4.97 GiB = 4.84 + 0.13). */
#define EMU_ACT_BYTES_PER_TOKEN_HIDDEN 2.69
#define EMU_ACT_BYTES_PER_SEQ_VOCAB 38.2
/* The light profiling sampler (EMU_VLLM_LIGHT_SAMPLER_VERSION and later): the A100 PCIe points
 * (vLLM 0.19.0, Qwen3-32B bf16, 2048 tokens / 256 seqs, utilisation 0.90) log 61.03 GiB of
 * weights and 9.57 GiB of KV: 71.24 - 61.03 - 9.57 - 0.13 non-torch - 0.03 (A term) = 0.48 GiB
 * over 256 x 151936 logits = 13.2 bytes (about three fp32 copies). */
#define EMU_ACT_BYTES_PER_SEQ_VOCAB_LIGHT 13.2

/* ---- Step time (roofline; reference doc §6) ------------------------------------------ */
/* Per-GPU efficiencies live in the GPU catalog (st_emu_gpu.gemm_eff, .bw_eff). Custom GPU
 * files without them get these: */
#define EMU_GEMM_EFF_DEFAULT 0.70
#define EMU_BW_EFF_DEFAULT 0.80
/* What a streaming copy reaches of the peak bandwidth depends on the memory behind it (refresh,
 * row switches, ECC on HBM; GDDR runs its bus closer to the rated rate). Published device-copy
 * measurements by memory technology (st_emu_gpu.copy_eff, the catalog's GPUs that have one):
 *   GDDR6X (RTX 4090, 1008 GB/s): clpeak's global-memory read 921 GB/s (krrishnarraj/clpeak#106),
 *     CUDA's p2pBandwidthLatencyTest local copy 918-924 GB/s (tinygrad/open-gpu-kernel-modules#6): 0.91.
 *   HBM2e / HBM2 (A100 SXM and PCIe, H100 PCIe): an A100 40GB memcopy 1355 of 1555 GB/s (0.871,
 *     PTsolvers/gpu-workshop-JuliaCon23#7: "the memcopy measured BW"), an A800 80GB PCIe copy
 *     1727 of 1935 GB/s (0.893, mli/transformers-benchmarks#4): 0.87.
 *   HBM3 (H100 SXM, NVL): the local copy 2573 GB/s (0.77, NVIDIA/nccl#1264) and vLLM's cuBLAS
 *     GEMVs at 2.51-2.87 TB/s (0.75-0.86, kernel-anchors.md) bracket the default: none set.
 *   HBM3e (H200), GDDR6 (L40S): none found: the default.
 * The fidelity harness's sourced model uses it as the GPU's bw_eff (docs/fidelity.md); the
 * catalog's bw_eff stays the fitted or kernel-anchored value. */
#define EMU_COPY_EFF_GDDR6X 0.91
#define EMU_COPY_EFF_HBM2E 0.87
/* GEMM efficiency by size (emu/steptime.c gemm()): every linear layer is its own GEMM of M
 * tokens by an N x K weight, at gemm_eff x x / (x + EMU_GEMM_HALF_SIZE) of the peak with
 *   x = max(M, EMU_GEMM_MIN_ROWS) x (N / EMU_GEMM_N_REF)^EMU_GEMM_N_EXP,
 * its compute and memory roofs combined by a soft maximum of exponent EMU_ROOF_P. A GEMM with
 * few rows or a narrow output fills few 128x128 tiles of the SMs (tile and wave quantisation);
 * rows below one 64-row tile cost a whole tile. Calibrated on vLLM's published torch-bf16
 * (cuBLAS) GEMM sweeps on an H100 (vllm-project/vllm#17126, Llama-3.1-8B N=6144 K=4096: 2.5,
 * 39, 161, 308, 544 TFLOP/s at 1, 16, 64, 128, 256 tokens; vllm-project/vllm#49363, N=12288
 * K=5376: 2.9, 47, 183, 353 at 1-128): tests/unit/test_emu_kernels.c holds the model to them
 * within 15 % (bench/fidelity/kernel-anchors.md). */
#define EMU_GEMM_MIN_ROWS 64.0
#define EMU_GEMM_N_REF 1024.0
#define EMU_GEMM_N_EXP 0.75
#define EMU_GEMM_N_EXP_X4 3 /* 4 x EMU_GEMM_N_EXP, for the preprocessor */
#define EMU_GEMM_HALF_SIZE 310.0
#define EMU_ROOF_P 6
/* The fused-MoE kernel (Triton, grouped by expert) pads each expert's rows to its row block:
 * BLOCK_SIZE_M is 16 in vLLM's default configs for small batches (fused_moe.py
 * get_default_config, moe_align_block_size). */
#define EMU_MOE_ROW_PAD 16.0
/* Fixed cost of one attention kernel call (per layer per step) on a GPU without its own
 * (st_emu_gpu.attn_call_s): Hopper FlashAttention-3 decode 14 us (vllm-project/flash-attention#63:
 * 14.8 us at 1024 cached tokens, 26.3 us at 16384, one sequence of Qwen3-32B at TP 2, i.e.
 * 14 us plus 2.74 TB/s of KV streaming); A100 FlashAttention-2 ~25 us (vllm-project/vllm#2744:
 * 27.7 us for one 1024-token sequence on an A100-40GB PCIe, 4 MB of KV); other GPUs (Ada:
 * RTX 4090 split-KV decode 19-20 us at 128-512 tokens, Wenyueh/MinivLLM#93) this: */
#define EMU_ATTN_CALL_S 0.000020
#define EMU_ATTN_CALL_HOPPER_S 0.000014
#define EMU_ATTN_CALL_A100_S 0.000025
/* Element-wise kernels, bytes per token per layer (16-bit activations, each read and written):
 * the two fused add+RMSNorm (x and residual in and out: 8 bytes per hidden element each),
 * SiLU-and-mul (2 x intermediate in, 1 out: 6 bytes per intermediate element), rotary (q and k
 * in and out: 4 bytes per element); plus the KV-cache write (in and out) and fp8's activation
 * quantisation (EMU_FP8_QUANT_BYTES). */
#define EMU_ELEM_BYTES_HIDDEN 16.0
#define EMU_ELEM_BYTES_INTER 6.0
#define EMU_ELEM_BYTES_QK 4.0
/* Attention kernels (FlashAttention 2/3) reach this fraction of the 16-bit peak at prefill
 * (FlashAttention-2 paper: 50-73 % of A100 peak in the forward pass; FA3 on H100 ~ 0.6-0.75
 * of bf16 peak). Sourced, not fitted (the former fit put it on its 0.8 bound). */
#define EMU_MFU_ATTN 0.60
/* 4-bit weight-only GEMMs (AWQ/GPTQ Marlin) and fp8 weight-only (GPUs without fp8 tensor
 * cores) dequantise in the kernel: their compute efficiency relative to a 16-bit GEMM at
 * decode batch sizes (Marlin's README: near-ideal up to batch 16-32). */
#define EMU_WEIGHT_ONLY_QUANT_EFF 0.90
/* Marlin kernels keep that efficiency only at small token counts (decode); at prefill sizes the
 * dequantisation is paid per tile and the kernel falls behind a 16-bit GEMM. fp8 weight-only
 * runs the same kernel (FP8 Marlin is GPTQ Marlin's 8-bit path, vllm-project/vllm#5975), so
 * 4-bit and fp8 weight-only share the curve:
 *   q(T) = LARGE + (EMU_WEIGHT_ONLY_QUANT_EFF - LARGE) / (1 + (T / TOKENS)^2)
 * TOKENS was calibrated on the published RTX 4090 / Llama-3-8B AWQ point
 * (docs/reference/calibration-rtx4090-llama3-8b-awq.md). LARGE (st_emu_tuning.int4_gemm_rel)
 * is FITTED on the fit split's 4-bit points within [0.45, 1]: a Marlin GEMM does its math in
 * 16-bit on the tensor cores, so at compute-bound sizes it cannot beat a 16-bit GEMM (the
 * Marlin paper, IST-DASLab/marlin: the speed-up over FP16 shrinks towards 1x as the batch
 * grows past ~128 tokens); 0.45 is the single-point calibration it replaced. */
#ifndef EMU_INT4_EFF_LARGE
#define EMU_INT4_EFF_LARGE 0.721382
#endif
/* The published figures for LARGE, the fidelity harness's sourced value (a setup the fit has not
 * seen starts here). Past 128 tokens Marlin repeats its 64-row kernel at a flat rate: on an A100
 * 141 TFLOP/s from 128 to 4000 tokens, 1.01x a 16-bit GEMM at 128 tokens and 0.66 / 0.60 / 0.61x
 * at 1024 / 2048 / 4000 (IST-DASLab Marlin's bench.py, vllm-project/vllm#2497); 0.82x at 16k
 * tokens on an RTX 6000 Ada (IST-DASLab/marlin#21); a Llama-70B 4-bit prefill on an A100 0.79x
 * ExLlamaV2's dequantise-then-cuBLAS path (IBM/text-generation-inference#66). Their mean, 0.74
 * (the former sourced 0.90 read the 1x crossover at 128 tokens as the prefill ratio).
 * tests/unit/test_emu_kernels.c `a100_marlin_vs_16bit_by_tokens` holds the model's curve to the
 * A100's figures at 1-128 tokens within 15 % and its prefill ratio to the published 0.60-0.82. */
#define EMU_INT4_EFF_LARGE_SOURCED 0.74
#ifndef EMU_INT4_EFF_TOKENS
#define EMU_INT4_EFF_TOKENS 384.0
#endif
/* Weight-only kernels (Marlin: AWQ/GPTQ 4-bit, and fp8 weights on GPUs without fp8 tensor cores):
 * their weight reads do not reach a 16-bit GEMV's bandwidth: the packed 4-bit tiles and the
 * per-group scales are read in a layout tuned for the dequantisation (Marlin README: "close to
 * ideal" 3.9x speedup over fp16 at batch 1-16 on an A10, i.e. ~0.97 of the bandwidth ideal,
 * lower on GPUs with more bandwidth per SM). Sourced at 0.85: the fit (issue 21) left it on its
 * 1.0 bound, where it started. */
#define EMU_MARLIN_BW_REL 0.85
/* FP8 W8A8 on fp8 tensor cores (CUTLASS scaled_mm): the fp8 dense peak is twice bf16's but
 * the kernels reach a lower fraction of it (vllm-project/vllm#4118: "even removing activation
 * quantization, the speedup isn't obvious"; measured fp8/bf16 GEMM speed-ups on H100 are
 * 1.3-1.6x, not 2x). The fp8 GEMM efficiency relative to the GPU's bf16 gemm_eff: FITTED. */
#define EMU_FP8_GEMM_REL 0.620546
/* fp8 weight reads, relative to bw_eff (a bf16 GEMV's). vLLM's fp8 GEMM sweeps on an H100 at one
 * token, the activation quantisation left out (it is its own kernel here, EMU_FP8_QUANT_*):
 * 5.396 TFLOP/s at N=6144 K=4096 (vllm-project/vllm#17126) and 5.163 at N=12288 K=5376
 * (vllm-project/vllm#49363), i.e. the fp8 weights at 2.70 and 2.58 TB/s where the bf16 GEMVs
 * stream 2.51 and 2.87: 1.07 and 0.90, ~0.985 (the fidelity harness's sourced value; it was
 * 0.80 from an end-to-end fp8 decode speed-up of ~1.6x, vllm-project/vllm#4118, which includes
 * the step's fixed costs). tests/unit/test_emu_kernels.c holds the model to those sweeps. FITTED: */
#define EMU_FP8_BW_REL 1.03112
/* Dynamic activation quantisation (vllm-project/vllm#4118: TTFT 28.8 -> 38.8 ms and ITL 8.5 ->
 * 10.2 ms on Llama-7B from it; vllm-project/vllm-omni#5257: the dynamic quant pass costs
 * 20-90 % of the GEMM it feeds at 4-8k tokens): before each of the 4 linear inputs of a layer
 * (qkv, o, gate_up, down) the bf16 activations are read, reduced for a per-token scale and
 * written in fp8: 2 + 1 bytes per element read and written, plus one kernel per input.
 * Bytes per token per layer = (3 x hidden + intermediate) x EMU_FP8_QUANT_BYTES. */
#define EMU_FP8_QUANT_BYTES 3.0
#define EMU_FP8_QUANT_KERNELS_PER_LAYER 4.0
/* Paged KV-cache reads (the attention kernel streaming the cached context, emu/steptime.c):
 * their bandwidth relative to bw_eff (a cuBLAS GEMV's). FlashAttention-3 decode on an H100
 * streams KV at 2.74 TB/s beyond its fixed cost (vllm-project/flash-attention#63, EMU_ATTN_CALL_S),
 * against 2.5 TB/s for a bf16 GEMV (vllm-project/vllm#17126: 2.51 TFLOP/s at one token, N=6144
 * K=4096): ~1.09 (the sourced value). The former 0.36 was the fit absorbing the missing fixed
 * cost and GEMM-size terms. FITTED within [0.6, 1.2]: 0.99 in the refit with the piecewise-graph
 * gap (docs/fidelity.md). */
#define EMU_KV_BW_REL 0.986607
/* Mixture-of-experts layers run vLLM's fused MoE kernel (Triton, grouped by expert): its
 * per-expert GEMMs are modelled one by one at their own (small) size with the rows padded
 * (EMU_MOE_ROW_PAD); this is the grouped Triton kernel's efficiency relative to a cuBLAS GEMM
 * of the same size (vLLM's fused-MoE tuning reaches 60-90 % of the dense GEMM rate). FITTED on
 * the GLM-4.5-Air points within [0.3, 1]. */
#define EMU_MOE_GEMM_REL 0.372328
/* Fraction of peak memory bandwidth reached by weight and KV reads: per GPU in the catalog. */
/* Fixed GPU-side cost of one step with CUDA graphs: a graph launch, the sampler, the
 * host-device copies of inputs and sampled ids (~0.3-0.5 ms; reference doc §6 "~0.5 ms per
 * step overhead"). */
#define EMU_STEP_GPU_S 0.0003
/* Engine-core CPU per step (scheduler, input preparation, output processing): FITTED, 0.82 ms
 * on issue 21's data with the piecewise-graph gap (EMU_LAYER_PIECEWISE_S) in the step model
 * (0.24 ms before it; 2.04 ms on issue 10's). The sourced value is 0.2 ms: Qwen3-8B at
 * concurrency 1 on an H100 (vLLM 0.11, no async scheduling) runs 7.22 ms per token (mean 7.28)
 * against 7.09 ms of the step model's GPU work, 0.13-0.19 ms. The fit's 4x that absorbs the
 * small models' CPU-bound steps (Qwen3-0.6B at 2.0-2.4 ms per step on vLLM 0.19, async; a 1.5B
 * on an RTX 4090 at 11.4 ms) that the model does not describe: open (docs/fidelity.md). */
#define EMU_STEP_CPU_S 0.000818277
/* Engine-core CPU per scheduled sequence per step (scheduler bookkeeping, block-table and
 * input rows, update_from_output, detokenisation offload): FITTED. At 256 running sequences
 * 31 us each is 7.9 ms per step, the CPU-bound regime small models reach. */
#define EMU_PER_SEQ_OVERHEAD_S 4.45604e-06
/* Per-layer cost under a captured CUDA graph: the gaps between a layer's kernels (serial GPU
 * time). Without a graph (batches over the largest captured size, or --enforce-eager) the CPU
 * launches every kernel while the step runs, ahead of the GPU, so the step takes the longer of
 * the GPU's work and the launches (emu/steptime.c). EMU_LAYER_OVERHEAD_EAGER_S is the launch
 * time per layer with --enforce-eager: PyTorch eager dispatches each of a layer's ~15 kernels
 * (and vLLM's custom ops) from Python, ~15 us each on a server CPU: ~250 us, the sourced
 * start of issue 10. FITTED on the fit split's --enforce-eager points (A100 PCIe Qwen3-32B),
 * set by the AWQ points, whose GPU work per step (4-bit weights) is short enough for the
 * launches to bind; the 16-bit ones are bandwidth-bound and do not see it: 556 us, started at
 * the sourced 750 us below (the one-sweep search covers the whole range, so the start only
 * sets the first loss). */
#define EMU_LAYER_OVERHEAD_GRAPH_S 0.000004
/* Piecewise CUDA graphs (vLLM before EMU_VLLM_FULL_GRAPH_VERSION, and batches with prefill
 * after it): each layer's attention runs outside the graph, launched from Python between two
 * graph replays, which leaves gaps on the GPU. Measured by vllm-project/vllm#20059 on
 * Qwen2.5-1.5B-Instruct (28 layers, ShareGPT, 100 prompts): median TPOT 5.42 ms piecewise
 * against 5.09 / 5.02 ms with full graphs at 1 req/s (ITL 5.39 against 5.03 / 4.97), 8.00
 * against 7.68 / 7.72 ms at 100 req/s: 0.28-0.42 ms per step, 10-15 us per layer; #16072 (the
 * first full-graph PR) reports the same ~7 % of TPOT for that model. */
#define EMU_LAYER_PIECEWISE_S 0.000013
#define EMU_LAYER_OVERHEAD_EAGER_S 0.000555998
/* The published figure for that launch time, the fidelity harness's sourced value (a setup the
 * fit has not seen starts here): vLLM 0.29 on an A800 (the A100 SXM's die) decodes one sequence
 * of Qwen2.5-Omni-7B's thinker (a Qwen2.5-7B, 28 layers) at ~22-23 ms per token with
 * --enforce-eager and ~13 ms with CUDA graphs (vllm-project/vllm-omni#7960): the eager step is
 * launch-bound at 0.73-0.80 ms per layer (the step's own CPU, ~0.2-1 ms, taken out), 0.75 ms
 * here. tests/unit/test_emu_kernels.c `a100_eager_decode_launch_bound` holds the step model to
 * both TPOTs with it. The fitted value above is 26 % lower (set by one lab's host: the A100 PCIe
 * study's AWQ points). */
#define EMU_LAYER_OVERHEAD_EAGER_SOURCED_S 0.00075
/* A torch.compile'd step that no CUDA graph covers (batches beyond the captured sizes) launches
 * inductor's fused kernels from its generated wrapper: ~6-8 launches per layer at a few us
 * each, about a third of PyTorch eager's per-layer cost. Only matters when the GPU's work per
 * layer is shorter (small models, batches just over the graph sizes). */
#define EMU_LAYER_LAUNCH_COMPILED_S 0.00006
/* Tensor parallel: two all-reduces per layer, each a fixed latency (per GPU in the catalog,
 * st_emu_gpu.link_latency) plus a ring transfer. The latency of a small all-reduce between two
 * GPUs: over NVLink ~6 us (NVIDIA/nccl#1259: 2 x H100, NVLS, 128 B-64 KB), 8 us here; over PCIe
 * 3-4x that: 25.8-27.1 us for 16-256 B between two GPUs behind one PCIe switch
 * (ROCm/rccl#362), 16-20 us as NCCL's reduce-scatter plus all-gather of one to a few rows on a
 * PCIe pair (flashinfer-ai/flashinfer#5023: 8.3-10.7 us each), 42.6 us among 8 RTX 4090s
 * (NVIDIA/nccl#1530); 25 us here (the fidelity data's A100 PCIe pair also crosses the CPU's
 * socket link). A GPU file without link_latency_us gets the PCIe figure when its link is
 * under 100 GB/s, else the NVLink one. */
#define EMU_ALLREDUCE_LATENCY_S 0.000008
#define EMU_ALLREDUCE_LATENCY_PCIE_S 0.000025
/* The ring transfer's rate by interconnect (st_emu_gpu.link_bw): NCCL all_reduce_perf's bus
 * bandwidth at large messages (busbw: a ring all-reduce of B bytes over n GPUs takes
 * 2 (n - 1) / n x B / busbw, the form emu/steptime.c charges):
 *   NVLink 4 through NVSwitch (H100/H200 SXM): 475 GB/s on 8 x H200 (NVIDIA/nccl-tests#272); the
 *     450 GB/s per direction of the spec is kept (within 6 %).
 *   NVLink 3 through NVSwitch (A100 SXM): 232.5 GB/s on 8 x A100 (NVIDIA/nccl#1048 and
 *     nccl-tests#175, single node), 208 GB/s on an NV12 pair (NVIDIA/nccl-tests#178): 232.5, not
 *     the 300 GB/s per direction of the spec.
 *   NVLink bridge between two PCIe boards (H100 NVL): 115-116 GB/s for 1-4 GB on a bridged
 *     H100 PCIe pair (NVIDIA/nccl-tests#194).
 *   PCIe Gen4 through the CPU's root complex, no NVLink (A100 PCIe pairs): 20 GB/s, the same A100
 *     node's ring once it takes a PCIe hop through the host bridges (NVIDIA/nccl-tests#178).
 *   Other PCIe boards (L40S, RTX 4090, H100 PCIe) and GPU files without link_gbs: 25 GB/s, PCIe
 *     4.0 x16's effective rate (no NCCL figure of their own found). */
#define EMU_LINK_BUSBW_NVLINK4 450e9
#define EMU_LINK_BUSBW_NVLINK3 232.5e9
#define EMU_LINK_BUSBW_NVLINK_BRIDGE 116e9
#define EMU_LINK_BUSBW_PCIE4_HOST 20e9
#define EMU_LINK_BUSBW_PCIE4 25e9
/* Largest batch (tokens) run under CUDA graphs: min(2 x max_num_seqs, 512). */
#define EMU_CUDA_GRAPH_MAX 512
/* With async scheduling the CPU work of a step overlaps the GPU work of the previous one; what
 * remains serial is the hand-off (ids of the sampled tokens back to the scheduler): */
#define EMU_ASYNC_SYNC_S 0.0001
/* With async scheduling a busy engine core schedules step N+1 when step N starts
 * (vllm/v1/engine/core.py, step_with_batch_queue), so a request arriving during step N joins
 * step N+2. "Busy": the next step starts within this of the previous one's end (exactly at it
 * in virtual time; the HTTP emulator's timers add a little wall-clock jitter). */
#define EMU_ASYNC_BUSY_GAP_S 0.001

/* ---- Front end (the API server process: HTTP, tokenisation, detokenisation, SSE) ------- */
/* Fixed latency a request spends outside the engine core: HTTP parsing, chat template and
 * tokenisation, the hand-off to the engine core (ZMQ), and the first token's way back
 * (detokenisation, SSE write). vllm-project/vllm issue 10: a 128-token prompt at concurrency 1
 * gets its first token in ~14 ms on an H100 where the forward pass takes ~6 ms.
 * Part of it is the measurement setup's, not the engine's (where the client runs, proxies,
 * the host's CPU): the published figures put it at ~6 ms (DigitalOcean's H200), ~25 ms
 * (GPUStack) and ~55 ms (an A100 PCIe study) for the same engine, and the fidelity harness
 * gives each such lab its own value (bench/fidelity/harness.c FID_LAB_FE, docs/fidelity.md "The lab's own
 * latency"). This is the value for a setup the model has not seen, FITTED on the fit points of
 * the labs without their own; `servetune calibrate` fits a user's own from an audit. */
#define EMU_FE_LATENCY_S 0.0410693
/* The API server is one Python process (asyncio): each request costs it CPU once (parsing,
 * tokenisation, scheduling the stream) and each streamed token again (incremental
 * detokenisation, one SSE chunk: JSON encoding and a socket write). When the offered work
 * exceeds one core, requests queue before reaching the engine: the front-end ceiling a tiny
 * model hits (~100 req/s for Qwen3-0.6B on an H100 in the fidelity data). FITTED. */
/* A /v1/chat/completions request costs the API server more than a /v1/completions one: the chat
 * template is rendered (Jinja) before tokenisation, and every streamed chunk is a
 * ChatCompletionStreamResponse with a delta message that goes through the chat serving path's
 * parser hooks. The three front-end costs above are multiplied by this for chat requests.
 * FITTED (the fit split has both endpoints: gpustack's and the Qwen3-32B A100 points are chat,
 * kvcached's, the Qwen2.5-7B and the H200 points completions). */
#define EMU_FE_CHAT_FACTOR 1.71207
#define EMU_FE_REQ_CPU_S 0.00280764
#define EMU_FE_TOKEN_CPU_S 8.95285e-05
/* The API server's cost by vLLM version and endpoint (emu/config.c st_emu_fe_request_cpu_s; the
 * switch: EMU_VLLM_CHAT_FORMAT_CACHE_VERSION). Before that version every chat request parsed the
 * chat template's Jinja source again to detect its content format, on the server's one event
 * loop: vllm-project/vllm#20065 measured 1000 requests of vLLM's throughput benchmark against the
 * OpenAI server paying "6-8 seconds delay before prompts actually are started to process" for
 * it (a meta-llama model's template), i.e. 6-8 ms per chat request; 7 ms here (the middle).
 * Serial CPU (added to the request's API-server work), not latency; completions requests never
 * paid it. A longer template (Qwen3's, with its tool-calling branches) would cost more: not
 * modelled, one figure for every template. */
#define EMU_FE_CHAT_FORMAT_DETECT_S 0.007

#endif
