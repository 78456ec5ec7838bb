/* The emulator's startup refusals, flag validation, fault injection and time scale. */
#include "harness.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "emu_util.h"

static int run_to_exit(const char *model, const char *gpu, const char *const *extra, char *log, size_t cap)
{
    emu_child c;
    assert_int_equal(emu_start(&c, model, gpu, extra, 0), 0);
    int rc = emu_wait(&c, 10000);
    emu_log(&c, log, cap);
    emu_stop(&c);
    return rc;
}

static void refusals_exit_nonzero_with_vllm_message(void **state)
{
    (void)state;
    char log[16384];
    const char *a[] = { "--max-model-len", "32000", NULL };
    assert_int_equal(run_to_exit("Qwen/Qwen3-32B", "H100", a, log, sizeof log), 1);
    assert_non_null(strstr(log, "To serve at least one request with the models's max seq len (32000)"));
    assert_non_null(strstr(log, "Engine core initialization failed"));
    assert_int_equal(run_to_exit("meta-llama/Meta-Llama-3-70B", "RTX4090", NULL, log, sizeof log), 1);
    assert_non_null(strstr(log, "CUDA out of memory"));
    /* fits at 16000 and says how much */
    emu_child c;
    const char *b[] = { "--max-model-len", "16000", NULL };
    assert_int_equal(emu_start(&c, "Qwen/Qwen3-32B", "H100", b, 1), 0);
    emu_log(&c, log, sizeof log);
    assert_non_null(strstr(log, "GPU KV cache size: "));
    assert_non_null(strstr(log, "Maximum concurrency for 16,000 tokens per request: "));
    emu_stop(&c);
}

static void malformed_flags_rejected_unknown_accepted(void **state)
{
    (void)state;
    char log[8192];
    const char *bad[][4] = {
        { "--max-num-seqs", "abc", NULL },    { "--gpu-memory-utilization", "1.5", NULL },
        { "--kv-cache-dtype", "int3", NULL }, { "--block-size", "17", NULL },
        { "--time-scale", "0", NULL },        { "--port", "99999", NULL },
        { "--time-scale", "1e9", NULL },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = run_to_exit("Qwen/Qwen3-8B", "H100", bad[i], log, sizeof log);
        if (rc != 2)
            fail_msg("%s %s: exit %d, log: %s", bad[i][0], bad[i][1], rc, log);
    }
    assert_int_equal(run_to_exit("Qwen/Qwen3-8B", "TPU-v9", NULL, log, sizeof log), 2);
    assert_int_equal(run_to_exit("some/unknown-model", "H100", NULL, log, sizeof log), 1);
    /* unknown vLLM flags: a warning, then it serves */
    emu_child c;
    const char *ok[] = { "--trust-remote-code", "--disable-log-requests", "--swap-space", "4", "-tp", "1", NULL };
    assert_int_equal(emu_start(&c, "Qwen/Qwen3-8B", "H100", ok, 1), 0);
    emu_log(&c, log, sizeof log);
    assert_non_null(strstr(log, "ignoring vLLM flag --trust-remote-code"));
    assert_non_null(strstr(log, "ignoring vLLM flag --swap-space"));
    emu_stop(&c);
}

static void startup_delay_and_failure(void **state)
{
    (void)state;
    emu_child c;
    const char *d[] = { "--fault-startup-delay", "700ms", NULL };
    st_ns t0 = st_now();
    assert_int_equal(emu_start(&c, "Qwen/Qwen3-8B", "H100", d, 0), 0);
    usleep(300000);
    http_res r;
    assert_int_equal(http_do(c.port, "GET", "/health", NULL, NULL, 200, &r), -1); /* not listening yet */
    http_res_free(&r);
    st_ns deadline = st_now() + 5 * ST_NS_PER_S;
    int up = 0;
    while (!up && st_now() < deadline) {
        up = http_do(c.port, "GET", "/health", NULL, NULL, 200, &r) == 0 && r.status == 200;
        http_res_free(&r);
        if (!up)
            usleep(20000);
    }
    assert_true(up);
    assert_true(st_now() - t0 >= 700 * ST_NS_PER_MS);
    emu_stop(&c);
    char log[8192];
    const char *f[] = { "--fault-startup-fail", NULL };
    assert_int_equal(run_to_exit("Qwen/Qwen3-8B", "H100", f, log, sizeof log), 1);
    assert_non_null(strstr(log, "Engine core initialization failed"));
}

static void crash_after_n(void **state)
{
    (void)state;
    emu_child c;
    const char *a[] = { "--fault-crash-after", "2", "--time-scale", "100", NULL };
    assert_int_equal(emu_start(&c, "Qwen/Qwen3-8B", "H100", a, 1), 0);
    http_res r;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(
            http_do(c.port, "POST", "/v1/completions", "{\"prompt\":\"a b c\",\"max_tokens\":3}", NULL, 5000, &r), 0);
        assert_int_equal(r.status, 200);
        http_res_free(&r);
    }
    assert_int_equal(
        http_do(c.port, "POST", "/v1/completions", "{\"prompt\":\"a b c\",\"max_tokens\":3}", NULL, 5000, &r), -1);
    http_res_free(&r);
    int rc = emu_wait(&c, 5000);
    assert_true(rc != 0 && rc != -1);
    emu_stop(&c);
}

static void hang_after_n(void **state)
{
    (void)state;
    emu_child c;
    const char *a[] = { "--fault-hang-after", "1", "--time-scale", "100", NULL };
    assert_int_equal(emu_start(&c, "Qwen/Qwen3-8B", "H100", a, 1), 0);
    http_res r;
    assert_int_equal(
        http_do(c.port, "POST", "/v1/completions", "{\"prompt\":\"a b c\",\"max_tokens\":3}", NULL, 5000, &r), 0);
    assert_int_equal(r.status, 200);
    http_res_free(&r);
    assert_int_equal(
        http_do(c.port, "POST", "/v1/completions", "{\"prompt\":\"a b c\",\"max_tokens\":3}", NULL, 1000, &r), -1);
    http_res_free(&r);
    assert_int_equal(http_do(c.port, "GET", "/health", NULL, NULL, 500, &r), -1); /* nothing answers */
    http_res_free(&r);
    assert_true(emu_alive(&c));
    kill(c.pid, SIGTERM);
    assert_true(emu_wait(&c, 3000) >= 0); /* still dies on SIGTERM */
    emu_stop(&c);
}

static void http_500_and_midstream_errors(void **state)
{
    (void)state;
    emu_child c;
    const char *a[] = { "--fault-500-rate", "1", "--time-scale", "100", NULL };
    assert_int_equal(emu_start(&c, "Qwen/Qwen3-8B", "H100", a, 1), 0);
    http_res r;
    assert_int_equal(http_do(c.port, "POST", "/v1/completions", "{\"prompt\":\"a\",\"max_tokens\":3}", NULL, 5000, &r),
                     0);
    assert_int_equal(r.status, 500);
    assert_non_null(strstr(r.body.data, "\"type\":\"InternalServerError\""));
    assert_non_null(strstr(r.body.data, "\"code\":500"));
    http_res_free(&r);
    emu_stop(&c);
    const char *m[] = { "--fault-midstream-rate", "1", "--time-scale", "100", NULL };
    assert_int_equal(emu_start(&c, "Qwen/Qwen3-8B", "H100", m, 1), 0);
    assert_int_equal(http_do(c.port, "POST", "/v1/completions", "{\"prompt\":\"a\",\"max_tokens\":10,\"stream\":true}",
                             NULL, 5000, &r),
                     0);
    assert_int_equal(r.status, 200);
    assert_int_equal(count_sub(r.body.data, "\"text\":"), 4); /* tokens 1..4, the 5th fails */
    assert_non_null(strstr(r.body.data, "data: {\"error\":{\"message\":"));
    assert_non_null(strstr(r.body.data, "\"code\":500}}\n\ndata: [DONE]\n\n"));
    http_res_free(&r);
    /* the engine is still fine: metrics count the abort */
    assert_int_equal(http_do(c.port, "GET", "/metrics", NULL, NULL, 5000, &r), 0);
    assert_non_null(strstr(r.body.data, "finished_reason=\"abort\"} 1"));
    http_res_free(&r);
    emu_stop(&c);
}

/* Engine TPOT of one request from the ground truth (emulated seconds). */
static double gt_tpot(const char *path, int out)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[1024];
    double tpot = NAN;
    if (fgets(line, sizeof line, f)) {
        json_error_t je;
        json_t *j = json_loads(line, 0, &je);
        assert_non_null(j);
        tpot =
            (json_real_value(json_object_get(j, "finish_s")) - json_real_value(json_object_get(j, "first_token_s"))) /
            (out - 1);
        json_decref(j);
    }
    fclose(f);
    return tpot;
}

static void decode_slowdown_and_time_scale(void **state)
{
    (void)state;
    char gt[2][128];
    double tpot[2], wall[2];
    for (int k = 0; k < 2; k++) {
        snprintf(gt[k], sizeof gt[k], "/tmp/st-emu-gt-fault-%d-%d.jsonl", (int)getpid(), k);
        emu_child c;
        const char *a[] = {
            "--time-scale", k ? "40" : "10", "--ground-truth", gt[k], "--fault-decode-slowdown", k ? "4" : "1", NULL
        };
        assert_int_equal(emu_start(&c, "Qwen/Qwen3-8B", "H100", a, 1), 0);
        http_res r;
        st_ns t0 = st_now();
        assert_int_equal(
            http_do(c.port, "POST", "/v1/completions", "{\"prompt\":\"a b c d\",\"max_tokens\":200}", NULL, 20000, &r),
            0);
        wall[k] = (st_now() - t0) / 1e9;
        assert_int_equal(r.status, 200);
        http_res_free(&r);
        emu_stop(&c);
        tpot[k] = gt_tpot(gt[k], 200);
        unlink(gt[k]);
    }
    /* the model's batch-1 decode step on H100 is ~8.7 ms (emulated): 5.8 ms of GPU work (x 4 with
     * the fault) and ~2.9 ms of engine-core CPU (not slowed) */
    assert_true(tpot[0] > 0.0049 && tpot[0] < 0.011);
    assert_true(tpot[1] > 2.5 * tpot[0]);
    /* time scale: 200 x ~8.7 ms = ~1.7 emulated s in ~0.17 wall s at K = 10 */
    double emulated0 = tpot[0] * 199;
    assert_true(wall[0] < emulated0 / 10 * 2 + 0.1);
    assert_true(wall[0] > emulated0 / 10 * 0.8);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(refusals_exit_nonzero_with_vllm_message),
        cmocka_unit_test(malformed_flags_rejected_unknown_accepted),
        cmocka_unit_test(startup_delay_and_failure),
        cmocka_unit_test(crash_after_n),
        cmocka_unit_test(hang_after_n),
        cmocka_unit_test(http_500_and_midstream_errors),
        cmocka_unit_test(decode_slowdown_and_time_scale),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
