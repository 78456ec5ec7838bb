/* One decode-heavy step of the engine model, term by term, next to a roofline by hand
 * (docs/engine-model.md, "A step term by term").
 *
 *   build/bench/stepterms [--gpu NAME] [--model NAME] [--kv auto|fp8] [--tp N] [--context TOKENS]
 *                         [--prefill TOKENS] [--seqs N[,N...]]
 *
 * For each count of running sequences N: N decodes of --context cached tokens each plus one
 * chunked-prefill slice of --prefill tokens halfway through its prompt. Prints the model's step
 * time split into its terms (linear layers; attention as its kernel calls' fixed cost and the KV
 * streaming; element-wise kernels; the tensor-parallel all-reduce; fixed overheads and CPU), the
 * TPOT it implies (one token per running sequence per step) and a hand roofline per GPU: the
 * weights at the peak bandwidth, the KV at 80 % of it, the prefill's FLOPs at 55 % of the 16-bit
 * peak, the all-reduce's ring bytes at the link's rate. Defaults: the agent-style case of issue 21 (Qwen3-8B bf16 on one H100, ~5,150 cached
 * tokens, ~700 prefill tokens per step, 40/70/100 sequences). Exit status 0; 2 on bad input. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu/catalog.h"
#include "emu/config.h"
#include "emu/steptime.h"

#define MAX_SEQ_COUNTS 16
#define ROOF_KV_BW 0.80
#define ROOF_PREFILL_MFU 0.55

int main(int argc, char **argv)
{
    const char *gpu_name = "H100", *model_name = "Qwen/Qwen3-8B", *kv = "auto";
    double context = 5150, prefill = 700;
    double seqs[MAX_SEQ_COUNTS] = { 40, 70, 100 };
    int nseqs = 3, tp = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--gpu") && i + 1 < argc)
            gpu_name = argv[++i];
        else if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model_name = argv[++i];
        else if (!strcmp(argv[i], "--kv") && i + 1 < argc)
            kv = argv[++i];
        else if (!strcmp(argv[i], "--tp") && i + 1 < argc)
            tp = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--context") && i + 1 < argc)
            context = atof(argv[++i]);
        else if (!strcmp(argv[i], "--prefill") && i + 1 < argc)
            prefill = atof(argv[++i]);
        else if (!strcmp(argv[i], "--seqs") && i + 1 < argc) {
            nseqs = 0;
            for (char *s = argv[++i], *save = NULL, *t = strtok_r(s, ",", &save); t && nseqs < MAX_SEQ_COUNTS;
                 t = strtok_r(NULL, ",", &save))
                seqs[nseqs++] = atof(t);
        } else {
            fprintf(
                stderr,
                "usage: %s [--gpu NAME] [--model NAME] [--kv auto|fp8] [--tp N] [--context TOKENS] [--prefill TOKENS] "
                "[--seqs N[,N...]]\n",
                argv[0]);
            return 2;
        }
    }
    char err[512];
    st_emu_gpu g;
    st_emu_model m;
    if (st_emu_gpu_find(gpu_name, &g, err, sizeof err) < 0 || st_emu_model_find(model_name, &m, err, sizeof err) < 0) {
        fprintf(stderr, "stepterms: %s\n", err);
        return 2;
    }
    if (!(context > 0) || !(prefill >= 0) || nseqs == 0 || tp < 1 || tp > 64) {
        fprintf(stderr, "stepterms: --context > 0, --prefill >= 0, --tp in 1-64 and at least one --seqs value\n");
        return 2;
    }
    st_emu_config c;
    st_emu_config_init(&c, &g, &m);
    c.kv_dtype = !strcmp(kv, "fp8") ? ST_EMU_FP8 : ST_EMU_BF16;
    c.tp = (uint32_t)tp;
    st_emu_memory mem;
    if (st_emu_memory_plan(&c, &mem, err, sizeof err) < 0) {
        fprintf(stderr, "stepterms: %s\n", err);
        return 2;
    }
    /* per GPU: the weights and (KV heads split below TP) the KV are divided among the GPUs */
    double kv_share = m.kv_heads >= (uint32_t)tp ? 1.0 / tp : 1.0 / (m.kv_heads ? m.kv_heads : 1);
    double wbytes = st_emu_model_weight_bytes(&m, c.weight_dtype) / tp;
    double kvtok = st_emu_model_kv_bytes_per_token(&m, c.kv_dtype) * kv_share;
    double calls = m.layers * st_emu_attn_call_s(&g);
    printf("%s x%d, %s, KV %s: %.0f cached tokens per sequence, %.0f prefill tokens per step (prompt %.0f "
           "cached)\n",
           g.name, tp, m.name, c.kv_dtype == ST_EMU_FP8 ? "fp8" : "bf16", context, prefill, context / 2);
    printf("%5s | %7s %7s %7s %7s %7s %7s %7s | %7s | %7s %7s %7s %7s %7s\n", "seqs", "gemm", "a:call", "a:kv", "elem",
           "allred", "fixed", "step", "TPOT", "roof:w", "roof:kv", "roof:pf", "roof:ar", "roof");
    for (int i = 0; i < nseqs; i++) {
        double n = seqs[i];
        st_emu_batch b = { 0 };
        b.decode_tokens = (uint32_t)n;
        b.tokens = (uint32_t)(n + prefill);
        b.seqs = (uint32_t)n + (prefill > 0);
        b.sampled = (uint32_t)n;
        double prior = context / 2; /* the prefill slice sits halfway through its prompt */
        b.attn_pairs = n * context + prefill * prior + prefill * (prefill + 1) / 2;
        b.kv_read_tokens = n * context + (prefill > 0 ? prior : 0);
        st_emu_step_breakdown bd;
        double s = st_emu_step_seconds(&c, &b, &bd);
        double fixed = s - bd.gemm_s - bd.attn_s - bd.elem_s - bd.allreduce_s;
        double rw = wbytes / g.mem_bw;
        double rkv = kvtok * b.kv_read_tokens / (ROOF_KV_BW * g.mem_bw);
        double rpf = 2.0 * m.active_params * prefill / tp / (ROOF_PREFILL_MFU * g.bf16_flops);
        double rar = tp > 1 ? 2.0 * m.layers * 2.0 * (tp - 1) / tp * b.tokens * m.hidden * 2.0 / g.link_bw : 0;
        printf("%5.0f | %7.2f %7.2f %7.2f %7.2f %7.2f %7.2f %7.2f | %7.2f | %7.2f %7.2f %7.2f %7.2f %7.2f\n", n,
               1e3 * bd.gemm_s, 1e3 * calls, 1e3 * (bd.attn_s - calls), 1e3 * bd.elem_s, 1e3 * bd.allreduce_s,
               1e3 * fixed, 1e3 * s, 1e3 * s, 1e3 * rw, 1e3 * rkv, 1e3 * rpf, 1e3 * rar, 1e3 * (rw + rkv + rpf + rar));
    }
    printf("(ms per step; a:call: the attention kernels' fixed cost, a:kv: their KV streaming (or QK/PV compute); "
           "KV cache %llu tokens; roof: weights at the peak bandwidth, KV at %.0f %% of it, prefill at %.0f %% of the "
           "16-bit peak, all-reduce ring bytes at the link's %.0f GB/s)\n",
           (unsigned long long)mem.kv_tokens, 100 * ROOF_KV_BW, 100 * ROOF_PREFILL_MFU, g.link_bw / 1e9);
    return 0;
}
