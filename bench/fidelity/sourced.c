/* The engine model's sourced defaults and leave-one-lab-out without a fit (harness.h). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu/consts.h"
#include "fidelity/harness.h"

#define TUNE(f) offsetof(st_emu_tuning, f)

/* Sourced defaults (docs/engine-model.md, "The free constants"): what a constant is when the
 * data cannot identify it, with its source. Bounds: emu/calib.c's table (the ones `servetune
 * calibrate` uses). */
static const st_fid_sourced SOURCED[] = {
    { "fe_latency_s", TUNE(fe_latency_s), ST_FID_SCOPE_ALL, 0.008,
      "the first token of a short prompt at concurrency 1 on an H100 ~14 ms, ~6 of them the forward pass (issue 10)" },
    { "fe_req_cpu_s", TUNE(fe_req_cpu_s), ST_FID_SCOPE_ALL, 0.002,
      "one request's parsing, tokenisation and hand-off in one Python process (pre-fit estimate)" },
    { "fe_token_cpu_s", TUNE(fe_token_cpu_s), ST_FID_SCOPE_ALL, 4e-5,
      "half of the bound vLLM's API server sets (11.2k streamed tok/s in one process, vllm-project/vllm#11636)" },
    /* the null for the endpoints' common costs; what is known of a chat request's own cost by vLLM
     * version is no knob: the engine adds it (emu/config.c st_emu_fe_request_cpu_s, consts.h
     * EMU_FE_CHAT_FORMAT_DETECT_S before EMU_VLLM_CHAT_FORMAT_CACHE_VERSION), under these
     * defaults as under the tree's */
    { "fe_chat_factor", TUNE(fe_chat_factor), ST_FID_SCOPE_ALL, 1.0, "no difference between the endpoints (the null)" },
    { "step_cpu_s", TUNE(step_cpu_s), ST_FID_SCOPE_ALL, 0.0002,
      "Qwen3-8B c1 on H100 (vLLM 0.11, no async scheduling) 7.22 ms per token (mean 7.28) vs 7.09 ms of the step "
      "model's GPU work: 0.13-0.19 ms, at the 0.2 ms bound" },
    { "seq_cpu_s", TUNE(seq_cpu_s), ST_FID_SCOPE_ALL, 1.2e-5,
      "scheduler and input/output bookkeeping per sequence (pre-fit estimate)" },
    { "layer_eager_s", TUNE(layer_eager_s), ST_FID_SCOPE_EAGER, EMU_LAYER_OVERHEAD_EAGER_SOURCED_S,
      "vLLM 0.29 eager on an A800: Qwen2.5-7B (28 layers) at ~22-23 ms per token eager, ~13 ms with CUDA graphs: "
      "launch-bound at 0.73-0.80 ms per layer (vllm-project/vllm-omni#7960)" },
    { "attn_eff", TUNE(attn_eff), ST_FID_SCOPE_ALL, 0.60,
      "FlashAttention-2 paper 50-73 % of the A100 peak forward; FlashAttention-3 ~75 % on H100" },
    { "kv_bw_rel", TUNE(kv_bw_rel), ST_FID_SCOPE_ALL, 1.09,
      "H100 FlashAttention-3 decode streams KV at 2.74 TB/s beyond its fixed cost (vllm-project/flash-attention#63) vs "
      "2.5 TB/s for a bf16 GEMV (vllm-project/vllm#17126)" },
    { "fp8_gemm_rel", TUNE(fp8_gemm_rel), ST_FID_SCOPE_FP8, 0.72,
      "measured fp8/bf16 GEMM speed-ups on H100 1.3-1.6x of the 2x peak ratio" },
    { "fp8_bw_rel", TUNE(fp8_bw_rel), ST_FID_SCOPE_FP8, 0.985,
      "vLLM's fp8 GEMMs on an H100 at 1 token without the quant stream 2.70 and 2.58 TB/s where the bf16 GEMVs do "
      "2.51 and 2.87 (1.07, 0.90: vllm-project/vllm#17126, #49363)" },
    { "marlin_bw_rel", TUNE(marlin_bw_rel), ST_FID_SCOPE_MARLIN, 0.85,
      "Marlin README: 3.9x of the 4x ideal on an A10, less on GPUs with more bandwidth per SM" },
    { "moe_gemm_rel", TUNE(moe_gemm_rel), ST_FID_SCOPE_MOE, 0.80,
      "the fused-MoE Triton kernel against cuBLAS at the same per-expert GEMM size (60-90 % in vLLM's tuning)" },
    { "int4_gemm_rel", TUNE(int4_gemm_rel), ST_FID_SCOPE_MARLIN, EMU_INT4_EFF_LARGE_SOURCED,
      "Marlin past 128 tokens against a 16-bit GEMM: 0.60-0.66 on an A100 (vllm-project/vllm#2497), 0.82 on an RTX "
      "6000 Ada (IST-DASLab/marlin#21), 0.79 of ExLlamaV2's cuBLAS prefill (IBM/text-generation-inference#66)" },
    { "gemm_eff", TUNE(gemm_eff), ST_FID_SCOPE_ALL, EMU_GEMM_EFF_DEFAULT,
      "published cuBLAS/CUTLASS large-GEMM efficiencies 0.5-0.9 of the dense peak (the catalog's default)" },
    { "bw_eff", TUNE(bw_eff), ST_FID_SCOPE_ALL, EMU_BW_EFF_DEFAULT,
      "STREAM-like copies 0.84-0.9 of the peak bandwidth, weight streaming a little less (the catalog's default)" },
};

const st_fid_sourced *st_fid_sourced_knobs(int *n)
{
    *n = (int)(sizeof SOURCED / sizeof SOURCED[0]);
    return SOURCED;
}

void st_fid_sourced_tuning(const st_emu_gpu *gpu, st_emu_tuning *t)
{
    for (size_t i = 0; i < sizeof SOURCED / sizeof SOURCED[0]; i++) {
        double v = SOURCED[i].def;
        if (SOURCED[i].offset == TUNE(bw_eff) && gpu->copy_eff > 0)
            v = gpu->copy_eff; /* its memory's published copy rate (consts.h EMU_COPY_EFF_*) */
        *(double *)((char *)t + SOURCED[i].offset) = v;
    }
}

double st_fid_median(double *v, uint32_t k)
{
    if (!k)
        return NAN;
    for (uint32_t i = 1; i < k; i++)
        for (uint32_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
}

/* The distinct labs of pts, in file order, into labs[] (at most max). Their number. */
static int distinct_labs(const st_fid_point *pts, uint32_t n, const char **labs, int max)
{
    int k = 0;
    for (uint32_t i = 0; i < n; i++) {
        int seen = 0;
        for (int j = 0; j < k && !seen; j++)
            seen = !strcmp(labs[j], pts[i].lab);
        if (!seen && k < max)
            labs[k++] = pts[i].lab;
    }
    return k;
}

static int lab_index(const char **labs, int k, const char *lab)
{
    for (int j = 0; j < k; j++)
        if (!strcmp(labs[j], lab))
            return j;
    return -1;
}

/* Each lab's latency from its calibration point under the sourced constants (NAN: none), and
 * the median of those for a lab without one. */
static int lab_latencies(const st_fid_point *pts, uint32_t n, const char **labs, int k, double *lat, int *cal,
                         char *err, size_t errlen)
{
    double v[ST_FID_LOLO_MAX_LABS];
    uint32_t nv = 0;
    for (int g = 0; g < k; g++) {
        lat[g] = NAN;
        cal[g] = st_fid_lab_cal_point(pts, n, labs[g]);
        if (cal[g] < 0)
            continue;
        st_emu_config c;
        if (st_fid_config(&pts[cal[g]], &c, err, errlen) < 0)
            return -1;
        st_fid_sourced_tuning(&c.gpu, &c.tune);
        lat[g] = st_fid_solve_lab_latency(pts, n, (uint32_t)cal[g], &c, err, errlen);
        if (isfinite(lat[g]))
            v[nv++] = lat[g];
    }
    double med = st_fid_median(v, nv);
    for (int g = 0; g < k; g++)
        if (!isfinite(lat[g]))
            lat[g] = med;
    return 0;
}

int st_fid_lolo_sourced(const st_fid_point *pts, uint32_t n, st_fid_ratios *out, char *err, size_t errlen)
{
    const char *labs[ST_FID_LOLO_MAX_LABS];
    double lat[ST_FID_LOLO_MAX_LABS];
    int cal[ST_FID_LOLO_MAX_LABS];
    int k = distinct_labs(pts, n, labs, ST_FID_LOLO_MAX_LABS);
    st_fid_figures *buf = calloc(n ? n : 1, sizeof *buf);
    unsigned char *done = calloc(n ? n : 1, 1);
    int rc = buf && done ? lab_latencies(pts, n, labs, k, lat, cal, err, errlen) : -1;
    for (uint32_t i = 0; rc == 0 && i < n; i++) {
        if (done[i])
            continue;
        st_emu_config c;
        if (st_fid_config(&pts[i], &c, err, errlen) < 0) {
            rc = -1;
            break;
        }
        st_fid_sourced_tuning(&c.gpu, &c.tune);
        c.tune.fe_latency_s = lat[lab_index(labs, k, pts[i].lab)];
        /* a sweep runs once, on its first point's configuration (bench/fidelity.c does the same) */
        int s = pts[i].sweep;
        if (s >= 0 && st_fid_predict_sweep(pts, n, s, &c, buf, err, errlen) < 0) {
            rc = -1;
            break;
        }
        if (s < 0 && st_fid_predict_in(pts, n, i, &c, &buf[i], err, errlen) < 0) {
            rc = -1;
            break;
        }
        for (uint32_t j = i; j < n; j++)
            if (j == i || (s >= 0 && pts[j].sweep == s)) {
                done[j] = 1;
                st_fid_compare(&pts[j], &buf[j], &out[j]);
            }
    }
    /* the calibration points are inputs, not scored */
    for (int g = 0; rc == 0 && g < k; g++)
        if (cal[g] >= 0)
            for (int m = 0; m < ST_FID_M_COUNT; m++)
                out[cal[g]].r[m] = NAN;
    free(buf);
    free(done);
    return rc;
}
