/* servetune emulate serve MODEL [vLLM flags] --gpu NAME: the vLLM-compatible emulator. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/log.h"
#include "core/opts.h"
#include "core/parse.h"
#include "emu/catalog.h"
#include "emu/config.h"
#include "engine/emulator.h"

#define EMU_GIB_F 1073741824.0

static void usage(FILE *f, const st_opt *opts)
{
    fprintf(f,
            "usage: servetune emulate serve MODEL [vLLM flags] --gpu NAME|FILE [emulator options]\n\n"
            "A vLLM-compatible server whose timing comes from a model of vLLM V1's scheduler and\n"
            "of the GPU (docs/emulator.md). MODEL is a Hugging Face id (Qwen/Qwen3-8B,\n"
            "Qwen/Qwen3-8B-FP8, meta-llama/Meta-Llama-3-8B-Instruct, ...) or a directory with a\n"
            "config.json. Unknown vLLM flags are accepted with a warning.\n\n"
            "Examples:\n"
            "  servetune emulate serve Qwen/Qwen3-8B --gpu H100 --port 8000\n"
            "  servetune emulate serve Qwen/Qwen3-8B --gpu H100 --kv-cache-dtype fp8 --time-scale 20\n\n"
            "Options:\n");
    st_opts_usage(f, opts);
}

static int bad(const char *msg)
{
    fprintf(stderr, "vllm serve: error: %s\n", msg);
    fprintf(stderr, "Try 'servetune emulate --help'.\n");
    return ST_EXIT_USAGE;
}

int cmd_emulate(int argc, char **argv)
{
    const char *host = "0.0.0.0", *served = NULL, *api_key = NULL, *kv_dtype = "auto", *quant = NULL;
    const char *dtype = "auto", *gpu = NULL, *model_opt = NULL, *ground_truth = NULL;
    long port = 8000, max_model_len = 0, max_num_seqs = 0, max_batched = 0, tp = 1, block_size = 16, seed = 0;
    long crash_after = 0, hang_after = 0;
    double util = 0.90, time_scale = 1.0, startup_delay = 0, f500 = 0, fmid = 0, slowdown = 1.0;
    int prefix_on = 0, prefix_off = 0, eager = 0, no_model = 0, fail_start = 0, jitter = 0, quiet = 0;
    const st_opt opts[] = {
        { "host", 0, ST_OPT_STR, &host, "HOST", "address to listen on (0.0.0.0)", 0, 0, 0 },
        { "port", 0, ST_OPT_LONG, &port, "PORT", "port (8000; 0 = any free port)", 0, 65535, 0 },
        { "model", 0, ST_OPT_STR, &model_opt, "MODEL", "the model (instead of the positional MODEL)", 0, 0, 0 },
        { "served-model-name", 0, ST_OPT_STR, &served, "NAME", "model id in the API (MODEL)", 0, 0, 0 },
        { "api-key", 0, ST_OPT_STR, &api_key, "KEY", "require 'Authorization: Bearer KEY' on /v1 endpoints", 0, 0, 0 },
        { "max-model-len", 0, ST_OPT_LONG, &max_model_len, "N", "context length (the model's)", 1, 10000000, 0 },
        { "gpu-memory-utilization", 0, ST_OPT_DOUBLE, &util, "F", "fraction of GPU memory for vLLM (0.90)", 0, 0, 0 },
        { "max-num-seqs", 0, ST_OPT_LONG, &max_num_seqs, "N", "running requests (1024 on H100/H200, else 256)", 1, 1000000, 0 },
        { "max-num-batched-tokens", 0, ST_OPT_LONG, &max_batched, "N", "token budget per step (8192 / 2048)", 1, 10000000, 0 },
        { "kv-cache-dtype", 0, ST_OPT_STR, &kv_dtype, "T", "auto, bfloat16, fp8, fp8_e4m3, fp8_e5m2 (auto)", 0, 0, 0 },
        { "enable-prefix-caching", 0, ST_OPT_FLAG, &prefix_on, NULL, "prefix caching on (default)", 0, 0, 0 },
        { "no-enable-prefix-caching", 0, ST_OPT_FLAG, &prefix_off, NULL, "prefix caching off", 0, 0, 0 },
        { "quantization", 'q', ST_OPT_STR, &quant, "Q", "fp8, awq, gptq, awq_marlin, gptq_marlin (from the checkpoint)", 0, 0, 0 },
        { "dtype", 0, ST_OPT_STR, &dtype, "T", "auto, bfloat16, float16, half (auto)", 0, 0, 0 },
        { "tensor-parallel-size", 0, ST_OPT_LONG, &tp, "N", "GPUs per replica (1)", 1, 64, 0 },
        { "block-size", 0, ST_OPT_LONG, &block_size, "N", "KV block size in tokens: 8, 16, 32, 64, 128 (16)", 0, 0, 0 },
        { "seed", 0, ST_OPT_LONG, &seed, "N", "random seed (faults, ids)", 0, 0, 0 },
        { "enforce-eager", 0, ST_OPT_FLAG, &eager, NULL, "no CUDA graphs (slower small steps)", 0, 0, 0 },
        { "gpu", 0, ST_OPT_STR, &gpu, "NAME|FILE", "H100, H200, A100, L40S, RTX4090, or a GPU file (required)", 0, 0, 0 },
        { "time-scale", 0, ST_OPT_DOUBLE, &time_scale, "K", "emulated seconds per wall second (1)", 0, 0, 0 },
        { "no-model", 0, ST_OPT_FLAG, &no_model, NULL, "zero step time (benchmarks the server itself)", 0, 0, 0 },
        { "ground-truth", 0, ST_OPT_STR, &ground_truth, "FILE", "write per-request engine times as JSONL", 0, 0, 0 },
        { "print-jitter", 0, ST_OPT_FLAG, &jitter, NULL, "print token emission jitter at exit (spins the loop)", 0, 0, 0 },
        { "quiet", 0, ST_OPT_FLAG, &quiet, NULL, "warnings and errors only", 0, 0, 0 },
        { "fault-startup-delay", 0, ST_OPT_DURATION, &startup_delay, "D", "TEST ONLY: wait D before listening", 0, 0, 0 },
        { "fault-startup-fail", 0, ST_OPT_FLAG, &fail_start, NULL, "TEST ONLY: fail to start (exit 1)", 0, 0, 0 },
        { "fault-crash-after", 0, ST_OPT_LONG, &crash_after, "N", "TEST ONLY: exit abruptly at generation request N+1", 0, 1000000000, 0 },
        { "fault-hang-after", 0, ST_OPT_LONG, &hang_after, "N", "TEST ONLY: stop responding at generation request N+1", 0, 1000000000, 0 },
        { "fault-500-rate", 0, ST_OPT_DOUBLE, &f500, "F", "TEST ONLY: answer this fraction of requests with 500", 0, 1, 0 },
        { "fault-midstream-rate", 0, ST_OPT_DOUBLE, &fmid, "F", "TEST ONLY: this fraction of streams fail half-way", 0, 1, 0 },
        { "fault-decode-slowdown", 0, ST_OPT_DOUBLE, &slowdown, "F", "TEST ONLY: decode work x F (a slow kernel path)", 0, 0, 0 },
        { 0 },
    };
    /* vLLM spells a few flags with one dash */
    char **args = calloc((size_t)argc + 1, sizeof *args);
    if (!args)
        return ST_EXIT_FAIL;
    int na = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-tp"))
            args[na++] = "--tensor-parallel-size";
        else
            args[na++] = argv[i];
    }
    st_opts_result r;
    char err[2048];
    if (st_opts_parse(opts, na, args, 1, &r, err, sizeof err) < 0) {
        free(args);
        st_opts_result_free(&r);
        return bad(err);
    }
    if (r.help) {
        usage(stdout, opts);
        free(args);
        st_opts_result_free(&r);
        return ST_EXIT_OK;
    }
    int rc = ST_EXIT_USAGE;
    st_log lg = { .level = quiet ? ST_LOG_WARN : ST_LOG_INFO, .out = stderr, .prefix = "[servetune emulate]" };
    const char *model = model_opt;
    int pi = 0;
    if (r.npos > 0 && !strcmp(r.pos[0], "serve"))
        pi = 1;
    else if (r.npos > 0) {
        rc = bad("the first argument must be 'serve' (servetune emulate serve MODEL ...)");
        goto done;
    }
    if (!model && r.npos > pi)
        model = r.pos[pi++];
    if (r.npos > pi) {
        snprintf(err, sizeof err, "unrecognized arguments: %s", r.pos[pi]);
        rc = bad(err);
        goto done;
    }
    if (!model) {
        rc = bad("the following arguments are required: model_tag");
        goto done;
    }
    if (!gpu) {
        rc = bad("--gpu NAME|FILE is required (H100, H200, A100, L40S, RTX4090, or a GPU file)");
        goto done;
    }
    for (int i = 0; i < r.nunknown; i++)
        if (r.unknown[i][0] == '-')
            st_logf(&lg, ST_LOG_WARN, "ignoring vLLM flag %s (no effect on the emulator's timing)", r.unknown[i]);
    if (!(util > 0 && util <= 1)) {
        rc = bad("--gpu-memory-utilization: must be in (0, 1]");
        goto done;
    }
    if (!(time_scale > 0) || !isfinite(time_scale)) {
        rc = bad("--time-scale: must be a positive number");
        goto done;
    }
    if (!(slowdown >= 1) || !isfinite(slowdown)) {
        rc = bad("--fault-decode-slowdown: must be >= 1");
        goto done;
    }
    if (block_size != 8 && block_size != 16 && block_size != 32 && block_size != 64 && block_size != 128) {
        snprintf(err, sizeof err, "argument --block-size: invalid choice: %ld (choose from 8, 16, 32, 64, 128)", block_size);
        rc = bad(err);
        goto done;
    }
    if (prefix_on && prefix_off) {
        rc = bad("--enable-prefix-caching and --no-enable-prefix-caching are exclusive");
        goto done;
    }
    st_emu_dtype kvd;
    if (!strcmp(kv_dtype, "auto") || !strcmp(kv_dtype, "bfloat16"))
        kvd = ST_EMU_BF16;
    else if (!strcmp(kv_dtype, "fp8") || !strcmp(kv_dtype, "fp8_e4m3") || !strcmp(kv_dtype, "fp8_e5m2"))
        kvd = ST_EMU_FP8;
    else {
        snprintf(err, sizeof err, "argument --kv-cache-dtype: invalid choice: '%s' (choose from 'auto', 'bfloat16', 'fp8', 'fp8_e4m3', 'fp8_e5m2')", kv_dtype);
        rc = bad(err);
        goto done;
    }
    if (strcmp(dtype, "auto") && strcmp(dtype, "bfloat16") && strcmp(dtype, "float16") && strcmp(dtype, "half") &&
        strcmp(dtype, "float") && strcmp(dtype, "float32")) {
        snprintf(err, sizeof err, "argument --dtype: invalid choice: '%s' (choose from 'auto', 'half', 'float16', 'bfloat16', 'float', 'float32')", dtype);
        rc = bad(err);
        goto done;
    }
    st_emu_gpu g;
    if (access(gpu, R_OK) == 0) {
        if (st_emu_gpu_load_file(gpu, &g, err, sizeof err) < 0) {
            rc = bad(err);
            goto done;
        }
    } else if (st_emu_gpu_find(gpu, &g, err, sizeof err) < 0) {
        rc = bad(err);
        goto done;
    }
    st_emu_model m;
    if (access(model, R_OK) == 0) {
        if (st_emu_model_load_file(model, &m, err, sizeof err) < 0) {
            fprintf(stderr, "%s\n", err);
            rc = ST_EXIT_FAIL;
            goto done;
        }
    } else if (st_emu_model_find(model, &m, err, sizeof err) < 0) {
        /* vLLM fails at startup (not argparse) when it cannot find the model */
        st_logf(&lg, ST_LOG_ERROR, "%s", err);
        rc = ST_EXIT_FAIL;
        goto done;
    }
    st_emu_config c;
    st_emu_config_init(&c, &g, &m);
    if (quant && strcmp(quant, "None")) {
        if (!strcmp(quant, "fp8"))
            c.weight_dtype = ST_EMU_FP8;
        else if (!strcmp(quant, "awq") || !strcmp(quant, "awq_marlin") || !strcmp(quant, "gptq") || !strcmp(quant, "gptq_marlin")) {
            int want_awq = !strncmp(quant, "awq", 3);
            if (m.weight_dtype != (want_awq ? ST_EMU_INT4_AWQ : ST_EMU_INT4_GPTQ)) {
                st_logf(&lg, ST_LOG_ERROR,
                        "ValueError: Quantization method specified in the model config (%s) does not match the "
                        "quantization method specified in the `quantization` argument (%s).",
                        m.weight_dtype == ST_EMU_BF16 ? "None" : st_emu_dtype_name(m.weight_dtype), quant);
                rc = ST_EXIT_FAIL;
                goto done;
            }
        } else {
            snprintf(err, sizeof err, "argument --quantization/-q: invalid choice: '%s'", quant);
            rc = bad(err);
            goto done;
        }
    }
    if (!strcmp(dtype, "float16") || !strcmp(dtype, "half")) {
        if (c.weight_dtype == ST_EMU_BF16)
            c.weight_dtype = ST_EMU_FP16;
    }
    c.tp = (uint32_t)tp;
    c.gpu_memory_utilization = util;
    c.max_model_len = (uint32_t)max_model_len;
    c.max_num_seqs = (uint32_t)max_num_seqs;
    c.max_num_batched_tokens = (uint32_t)max_batched;
    c.block_size = (uint32_t)block_size;
    c.kv_dtype = kvd;
    c.enable_prefix_caching = !prefix_off;
    c.enforce_eager = eager;
    c.decode_slowdown = slowdown;

    st_logf(&lg, ST_LOG_INFO, "vLLM API server version %s (servetune emulator: timing from the engine model)", "0.10.1");
    st_logf(&lg, ST_LOG_INFO, "non-default args: model='%s', gpu='%s', tensor_parallel_size=%u, kv_cache_dtype='%s', enable_prefix_caching=%s",
            model, g.name, c.tp, kv_dtype, c.enable_prefix_caching ? "True" : "False");
    if (startup_delay > 0) {
        st_logf(&lg, ST_LOG_WARN, "fault injection: startup delayed by %.3f s", startup_delay);
        usleep((useconds_t)(startup_delay * 1e6));
    }
    if (fail_start) {
        st_logf(&lg, ST_LOG_ERROR, "EngineCore failed to start (injected startup failure).");
        fprintf(stderr, "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n");
        rc = ST_EXIT_FAIL;
        goto done;
    }
    st_emu_memory mem;
    st_emu_config probe = c;
    if (st_emu_memory_plan(&probe, &mem, err, sizeof err) < 0) {
        if (mem.weight_bytes > 0)
            st_logf(&lg, ST_LOG_INFO, "Model loading took %.4f GiB", mem.weight_bytes / EMU_GIB_F);
        st_logf(&lg, ST_LOG_ERROR, "EngineCore failed to start.");
        fprintf(stderr, "%s\n", err);
        fprintf(stderr, "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n");
        rc = ST_EXIT_FAIL;
        goto done;
    }
    c = probe;
    st_logf(&lg, ST_LOG_INFO, "Model loading took %.4f GiB", mem.weight_bytes / EMU_GIB_F);
    st_logf(&lg, ST_LOG_INFO,
            "Memory profiling: total GPU memory %.2f GiB; requested %.2f GiB (util %.2f); model weights %.2f GiB; "
            "non_torch_memory %.2f GiB; PyTorch activation peak memory %.2f GiB; the rest of the memory reserved "
            "for KV Cache is %.2f GiB.",
            mem.total_bytes / EMU_GIB_F, mem.requested_bytes / EMU_GIB_F, util, mem.weight_bytes / EMU_GIB_F,
            mem.non_torch_bytes / EMU_GIB_F, mem.activation_bytes / EMU_GIB_F, mem.kv_bytes / EMU_GIB_F);
    char l1[128], l2[128];
    st_emu_memory_log_lines(&mem, l1, sizeof l1, l2, sizeof l2);
    st_logf(&lg, ST_LOG_INFO, "%s", l1);
    st_logf(&lg, ST_LOG_INFO, "%s", l2);
    st_logf(&lg, ST_LOG_INFO, "max_num_seqs=%u, max_num_batched_tokens=%u, max_model_len=%u, num_gpu_blocks=%u",
            mem.max_num_seqs, mem.max_num_batched_tokens, mem.max_model_len, mem.num_blocks);
    st_emulator_opts eo = { .host = host, .port = (uint16_t)port, .served_model_name = served ? served : model,
                            .api_key = api_key, .time_scale = time_scale, .no_model = no_model,
                            .ground_truth = ground_truth, .seed = (uint64_t)seed,
                            .fault_startup_delay_s = startup_delay, .fault_startup_fail = fail_start,
                            .fault_crash_after = crash_after, .fault_hang_after = hang_after,
                            .fault_500_rate = f500, .fault_midstream_rate = fmid, .print_jitter = jitter };
    if (st_emulator_run(&c, &eo, &lg, err, sizeof err) < 0) {
        st_logf(&lg, ST_LOG_ERROR, "%s", err);
        rc = ST_EXIT_FAIL;
        goto done;
    }
    rc = ST_EXIT_OK;
done:
    free(args);
    st_opts_result_free(&r);
    return rc;
}
