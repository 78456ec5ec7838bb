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
#include "emu/consts.h"
#include "emu/flags.h"
#include "engine/emu_server.h"


static void usage(FILE *f, const st_opt *opts)
{
    fprintf(f, "usage: servetune emulate serve MODEL [vLLM flags] --gpu NAME|FILE [emulator options]\n\n"
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
    st_emu_args A;
    st_emu_args_defaults(&A);
    st_opt opts[ST_EMU_ARGS_TABLE_MAX];
    st_emu_args_table(&A, opts);
    st_opts_result r;
    char err[2048];
    int rc = ST_EXIT_USAGE;
    if (st_emu_args_parse(&A, opts, argc - 1, argv + 1, &r, err, sizeof err) < 0) {
        rc = bad(err);
        goto done;
    }
    if (r.help) {
        usage(stdout, opts);
        rc = ST_EXIT_OK;
        goto done;
    }
    st_log lg = { .level = A.quiet ? ST_LOG_WARN : ST_LOG_INFO, .out = stderr, .prefix = "[servetune emulate]" };
    const char *model = A.model, *host = A.host, *served = A.served, *kv_dtype = A.kv_dtype;
    if (!A.gpu)
        A.gpu = getenv("SERVETUNE_EMULATE_GPU"); /* for a forwarding `vllm` script that cannot add flags */
    if (!A.api_key || !*A.api_key)
        A.api_key = getenv("VLLM_API_KEY"); /* as vLLM: the key off the command line */
    if (A.api_key && !*A.api_key)
        A.api_key = NULL;
    if (A.gpu && *A.gpu)
        for (int i = 0; i < r.nunknown; i++)
            if (r.unknown[i][0] == '-')
                st_logf(&lg, ST_LOG_WARN, "ignoring vLLM flag %s (no effect on the emulator's timing)", r.unknown[i]);
    st_emu_config c;
    int cr = st_emu_args_config(&A, &c, err, sizeof err);
    if (cr == ST_EMU_ARGS_USAGE) {
        rc = bad(err);
        goto done;
    }
    if (cr == ST_EMU_ARGS_STARTUP) {
        st_logf(&lg, ST_LOG_ERROR, "%s", err);
        rc = ST_EXIT_FAIL;
        goto done;
    }
    const st_emu_gpu g = c.gpu;
    double util = A.util, time_scale = A.time_scale, startup_delay = A.startup_delay;
    int fail_start = A.fail_start;
    st_logf(&lg, ST_LOG_INFO, "vLLM API server version %s (servetune emulator: timing from the engine model)",
            "0.10.1");
    st_logf(&lg, ST_LOG_INFO,
            "non-default args: model='%s', gpu='%s', tensor_parallel_size=%u, kv_cache_dtype='%s', "
            "enable_prefix_caching=%s",
            model, g.name, c.tp, kv_dtype, c.enable_prefix_caching ? "True" : "False");
    if (startup_delay > 0) {
        st_logf(&lg, ST_LOG_WARN, "fault injection: startup delayed by %.3f s", startup_delay);
        usleep((useconds_t)(startup_delay * 1e6));
    }
    if (fail_start) {
        st_logf(&lg, ST_LOG_ERROR, "EngineCore failed to start (injected startup failure).");
        fprintf(stderr,
                "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n");
        rc = ST_EXIT_FAIL;
        goto done;
    }
    st_emu_memory mem;
    st_emu_config probe = c;
    if (st_emu_memory_plan(&probe, &mem, err, sizeof err) < 0) {
        if (mem.weight_bytes > 0)
            st_logf(&lg, ST_LOG_INFO, "Model loading took %.4f GiB", mem.weight_bytes / EMU_GIB);
        st_logf(&lg, ST_LOG_ERROR, "EngineCore failed to start.");
        fprintf(stderr, "%s\n", err);
        fprintf(stderr,
                "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n");
        rc = ST_EXIT_FAIL;
        goto done;
    }
    c = probe;
    st_logf(&lg, ST_LOG_INFO, "Model loading took %.4f GiB", mem.weight_bytes / EMU_GIB);
    if (mem.cudagraph_graphs)
        st_logf(&lg, ST_LOG_INFO, "Estimated CUDA graph memory: %.2f GiB total (%u graphs)",
                mem.cudagraph_bytes / EMU_GIB, mem.cudagraph_graphs);
    st_logf(&lg, ST_LOG_INFO,
            "Memory profiling: total GPU memory %.2f GiB; requested %.2f GiB (util %.2f); model weights %.2f GiB; "
            "non_torch_memory %.2f GiB; PyTorch activation peak memory %.2f GiB; the rest of the memory reserved "
            "for KV Cache is %.2f GiB.",
            mem.total_bytes / EMU_GIB, mem.requested_bytes / EMU_GIB, util, mem.weight_bytes / EMU_GIB,
            mem.non_torch_bytes / EMU_GIB, mem.activation_bytes / EMU_GIB, mem.kv_bytes / EMU_GIB);
    char l1[128], l2[128];
    st_emu_memory_log_lines(&mem, l1, sizeof l1, l2, sizeof l2);
    st_logf(&lg, ST_LOG_INFO, "%s", l1);
    st_logf(&lg, ST_LOG_INFO, "%s", l2);
    st_logf(&lg, ST_LOG_INFO, "max_num_seqs=%u, max_num_batched_tokens=%u, max_model_len=%u, num_gpu_blocks=%u",
            mem.max_num_seqs, mem.max_num_batched_tokens, mem.max_model_len, mem.num_blocks);
    st_emu_server_opts eo = { .host = host,
                              .keep_alive_s = A.keep_alive_s,
                              .header_timeout_s = A.header_timeout_s,
                              .port = (uint16_t)A.port,
                              .served_model_name = served ? served : model,
                              .api_key = A.api_key,
                              .time_scale = time_scale,
                              .no_model = A.no_model,
                              .ground_truth = A.ground_truth,
                              .seed = (uint64_t)A.seed,
                              .fault_startup_delay_s = startup_delay,
                              .fault_startup_fail = fail_start,
                              .fault_crash_after = A.crash_after,
                              .fault_hang_after = A.hang_after,
                              .fault_500_rate = A.f500,
                              .fault_midstream_rate = A.fmid,
                              .fault_host_stall_s = A.host_stall,
                              .print_jitter = A.jitter,
                              .reasoning_share = A.reasoning_share,
                              .prompt_tokens_details = A.prompt_details };
    if (st_emu_server_run(&c, &eo, &lg, err, sizeof err) < 0) {
        st_logf(&lg, ST_LOG_ERROR, "%s", err);
        rc = ST_EXIT_FAIL;
        goto done;
    }
    rc = ST_EXIT_OK;
done:
    st_opts_result_free(&r);
    return rc;
}
