/* Concurrency levels run like-for-like with `vllm bench serve --max-concurrency C --num-prompts N`,
 * on the engine model (servetune predict) and on the HTTP emulator (servetune audit):
 * - `search: {mode: burst}` with `concurrency:` is a fixed-count closed loop: each level runs
 *   requests_per_rate requests with at most C in flight, every request timed from its send, and
 *   the reports name the method (closed-loop-count);
 * - a sustained closed loop's window is measured by Little's law: min_window_requests 50 (a window
 *   of one lockstep wave) and 200 (several) give the same delivered rate;
 * - `audit --check` refuses a lowest concurrency level that cannot fill its window within
 *   max_duration, saying which bounds would, and accepts the bounds it suggests;
 * - `-o` makes the output folder's missing parents.
 * Every run is bounded (predict: seconds; the audit: 72 requests of about 2 s at time scale 10). */
#include "harness.h"

#define ST_IT_TMP_PREFIX "/tmp/st_closed_it."
#include "audit_util.h"

#include <math.h>
#include <sys/stat.h>

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static json_t *run_of(json_t *root, const char *cfg, double level)
{
    json_t *runs = json_object_get(config_named(root, cfg), "runs");
    size_t i;
    json_t *r;
    json_array_foreach(runs, i, r) if (json_number_value(json_object_get(r, "rate")) == level) return r;
    fail_msg("no run at %g", level);
    return NULL;
}

static double num(json_t *o, const char *k) { return json_number_value(json_object_get(o, k)); }

#define COUNT_SPEC                                                                                                     \
    "engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100, --time-scale, '10']}\n"                       \
    "hardware: {gpu: H100, price_per_gpu_hour: 2.0}\npeak_rate: 10\n"                                                  \
    "workload: {input_tokens: 256, output_tokens: 256, requests_per_rate: 24, seed: 5}\n"                              \
    "concurrency: [2, 4, 8]\nwarmup_requests: 2\n"                                                                     \
    "slo: {ttft_p95_ms: 5000, tpot_p95_ms: 200}\n"                                                                     \
    "timeouts: {startup: 8s, request: 60s, stop_grace: 2s}\n"                                                          \
    "search: {mode: burst}\n"

/* The fixed-count closed loop on the engine model and over HTTP: every level runs its 24 requests,
 * named as such; TTFT runs from each request's send (from the level's start, the last requests of
 * level 2 would wait 11 E2Es for a slot: TTFT far above one E2E); both executors agree. The
 * prediction goes into a folder whose parents do not exist. */
static void fixed_count_closed_loop(void **state)
{
    (void)state;
    char spec[512], pdir[512], adir[512], p[600];
    snprintf(spec, sizeof spec, "%s/count.yaml", tmp);
    snprintf(pdir, sizeof pdir, "%s/no/such/parent/pred", tmp);
    snprintf(adir, sizeof adir, "%s/audit", tmp);
    write_text(spec, COUNT_SPEC);
    assert_int_equal(run_servetune((const char *[]){ "audit", "--check", spec, NULL }, 30), 0);
    snprintf(p, sizeof p, "%s/servetune.out", tmp);
    assert_true(file_has(p, "fixed-count closed-loop runs of 24 requests"));
    assert_int_equal(run_servetune((const char *[]){ "predict", spec, "-o", pdir, "-q", NULL }, 60), 0);
    assert_int_equal(run_servetune((const char *[]){ "audit", spec, "-o", adir, "-q", "--no-prediction", NULL }, 240),
                     0);
    json_t *P = load_json(pdir), *A = load_json(adir);
    const double levels[] = { 2, 4, 8 };
    for (int k = 0; k < 3; k++) {
        json_t *pr = run_of(P, "baseline", levels[k]), *ar = run_of(A, "baseline", levels[k]);
        fprintf(stderr,
                "# concurrency %g: delivered %.3g (model) %.3g (http) req/s; p95 TTFT %.0f / %.0f ms, p95 E2E "
                "%.0f / %.0f ms\n",
                levels[k], num(pr, "delivered_rps"), num(ar, "delivered_rps"), num(pr, "ttft_p95_ms"),
                num(ar, "ttft_p95_ms"), num(pr, "e2e_p95_ms"), num(ar, "e2e_p95_ms"));
        for (int e = 0; e < 2; e++) {
            json_t *r = e ? ar : pr;
            assert_int_equal(json_integer_value(json_object_get(r, "completed")), 24);
            assert_true(num(r, "ttft_p95_ms") < num(r, "e2e_p95_ms"));
            assert_true(num(r, "delivered_rps") > 0);
        }
        /* the same requests on the same model: the HTTP run within 25 % of the prediction, its E2E
         * too (timed from the level's start, a request of level 2 would wait up to 11 E2Es) */
        assert_true(fabs(num(ar, "delivered_rps") / num(pr, "delivered_rps") - 1) < 0.25);
        assert_true(fabs(num(ar, "e2e_p95_ms") / num(pr, "e2e_p95_ms") - 1) < 0.25);
        assert_true(num(ar, "ttft_p95_ms") < num(pr, "e2e_p95_ms"));
    }
    /* more clients deliver more */
    assert_true(num(run_of(P, "baseline", 8), "delivered_rps") > num(run_of(P, "baseline", 2), "delivered_rps"));
    for (int e = 0; e < 2; e++) {
        json_t *c = json_object_get(config_named(e ? A : P, "baseline"), "capacity");
        assert_string_equal(json_string_value(json_object_get(c, "method")), "closed-loop-count");
    }
    json_decref(P);
    json_decref(A);
    snprintf(p, sizeof p, "%s/report.md", adir);
    assert_true(file_has(p, "A fixed-count closed loop"));
    assert_true(file_has(p, "Concurrency levels tried"));
    snprintf(p, sizeof p, "%s/results.csv", pdir);
    assert_true(file_has(p, "closed-loop-count"));
}

/* Burst-refine on concurrency levels bisects whole levels. */
static void refine_on_levels(void **state)
{
    (void)state;
    char spec[512], dir[512];
    snprintf(spec, sizeof spec, "%s/refine.yaml", tmp);
    snprintf(dir, sizeof dir, "%s/refine", tmp);
    write_text(spec, "engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100]}\n"
                     "hardware: {gpu: H100, price_per_gpu_hour: 2.0}\npeak_rate: 10\n"
                     "workload: {input_tokens: 128, output_tokens: 256, requests_per_rate: 64}\n"
                     "concurrency: [1, 16, 64]\nslo: {ttft_p95_ms: 5000, tpot_p95_ms: 12}\n"
                     "search: {mode: burst-refine}\n");
    assert_int_equal(run_servetune((const char *[]){ "predict", spec, "-o", dir, "-q", NULL }, 60), 0);
    json_t *P = load_json(dir);
    json_t *runs = json_object_get(config_named(P, "baseline"), "runs");
    size_t i;
    json_t *r;
    int refined = 0;
    json_array_foreach(runs, i, r)
    {
        double c = num(r, "rate");
        assert_true(c == floor(c) && c >= 1);
        refined += i >= 3;
    }
    assert_true(refined >= 1);
    json_decref(P);
}

/* A sustained closed loop whose window holds one lockstep wave (concurrency 64, every request
 * 128 + 1024 tokens: the 64 start and end together) measures the same delivered rate as one that
 * holds four: counting the window's sends gave 64 per 20 s window = 3.2 req/s against ~4 (the
 * loop's rate, 64 / E2E) with four. */
static void sustained_window_of_one_wave(void **state)
{
    (void)state;
    double got[2];
    const int want[2] = { 50, 200 };
    for (int k = 0; k < 2; k++) {
        char spec[512], dir[512], text[1024];
        snprintf(spec, sizeof spec, "%s/w%d.yaml", tmp, want[k]);
        snprintf(dir, sizeof dir, "%s/w%d", tmp, want[k]);
        snprintf(text, sizeof text,
                 "engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100]}\n"
                 "hardware: {gpu: H100, price_per_gpu_hour: 2.0}\npeak_rate: 10\n"
                 "workload: {input_tokens: 128, output_tokens: 1024}\nconcurrency: [64]\n"
                 "slo: {ttft_p95_ms: 100000, tpot_p95_ms: 1000}\n"
                 "search: {min_window_requests: %d, start: 64, max_runs: 1}\n",
                 want[k]);
        write_text(spec, text);
        assert_int_equal(run_servetune((const char *[]){ "predict", spec, "-o", dir, "-q", NULL }, 60), 0);
        json_t *P = load_json(dir);
        json_t *r = json_array_get(json_object_get(config_named(P, "baseline"), "runs"), 0);
        assert_non_null(r);
        got[k] = num(r, "delivered_rps");
        /* the loop's rate: its clients over a request's E2E (every request about as long) */
        double loop = num(r, "rate") / (num(r, "e2e_p95_ms") / 1e3);
        fprintf(stderr, "# min_window_requests %d: delivered %.4g req/s, clients / E2E %.4g\n", want[k], got[k], loop);
        assert_true(fabs(got[k] / loop - 1) < 0.03);
        json_decref(P);
    }
    assert_true(fabs(got[0] / got[1] - 1) < 0.02);
}

/* concurrency: [1] with an 896-token output cannot send 200 window requests in 300 s: --check
 * refuses it with the bounds that would fit, and accepts them. (The output is short enough that
 * the room left in 300 s holds the 20 window requests the advice needs at the engine model's
 * ~8.5 ms per token.) */
static void check_refuses_a_level_that_cannot_fill_its_window(void **state)
{
    (void)state;
    char spec[512], p[600], text[1024];
    snprintf(spec, sizeof spec, "%s/c1.yaml", tmp);
    const char *base = "engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100]}\n"
                       "hardware: {gpu: H100, price_per_gpu_hour: 2.0}\npeak_rate: 10\n"
                       "workload: {input_tokens: 128, output_tokens: 896}\nconcurrency: [1, 64]\n"
                       "slo: {ttft_p95_ms: 100000, tpot_p95_ms: 1000}\n";
    write_text(spec, base);
    assert_int_equal(run_servetune((const char *[]){ "audit", "--check", spec, NULL }, 30), 2);
    snprintf(p, sizeof p, "%s/servetune.out", tmp);
    assert_true(file_has(p, "concurrency 1 (the lowest level) cannot measure its window"));
    /* the suggested min_window_requests, read from the message */
    FILE *f = fopen(p, "r");
    assert_non_null(f);
    static char out[1 << 16];
    size_t n = fread(out, 1, sizeof out - 1, f);
    fclose(f);
    out[n] = '\0';
    const char *s = strstr(out, "lower search.min_window_requests to ");
    assert_non_null(s);
    int fit = atoi(s + strlen("lower search.min_window_requests to "));
    assert_true(fit >= 20 && fit < 200);
    /* predict refuses it the same way (one check) */
    char dir[512];
    snprintf(dir, sizeof dir, "%s/c1", tmp);
    assert_int_equal(run_servetune((const char *[]){ "predict", spec, "-o", dir, "-q", NULL }, 30), 2);
    snprintf(text, sizeof text, "%ssearch: {min_window_requests: %d}\n", base, fit);
    write_text(spec, text);
    assert_int_equal(run_servetune((const char *[]){ "audit", "--check", spec, NULL }, 30), 0);
    /* and the level then measures its window (sustained, not undecided at max_duration) */
    snprintf(text, sizeof text, "%ssearch: {min_window_requests: %d, start: 1, max_runs: 1}\n", base, fit);
    write_text(spec, text);
    assert_int_equal(run_servetune((const char *[]){ "predict", spec, "-o", dir, "-q", NULL }, 60), 0);
    json_t *P = load_json(dir);
    json_t *r = json_array_get(json_object_get(config_named(P, "baseline"), "runs"), 0);
    assert_non_null(r);
    assert_true(num(r, "rate") == 1);
    assert_string_equal(json_string_value(json_object_get(r, "verdict")), "pass");
    json_decref(P);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(fixed_count_closed_loop, setup, teardown),
        cmocka_unit_test_setup_teardown(refine_on_levels, setup, teardown),
        cmocka_unit_test_setup_teardown(sustained_window_of_one_wave, setup, teardown),
        cmocka_unit_test_setup_teardown(check_refuses_a_level_that_cannot_fill_its_window, setup, teardown),
    };
    return cmocka_run_group_tests(tests, 0, 0);
}
