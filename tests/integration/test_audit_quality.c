/* The quality pass end to end on the emulator (its pseudo language model, engine/pseudolm.h):
 * every configuration answers the same prompts, the baseline's answers are the reference, an fp8
 * KV cache and fp8 / 4-bit checkpoints are compared teacher-forced; a configuration beyond a limit
 * fails quality, is named in the headline and is never the pick; another model's tokenizer is
 * refused with the reason; every report carries "Quality vs baseline", marked not evidence. */
#include "harness.h"

#define ST_IT_TMP_PREFIX "/tmp/st_quality_it."
#include "audit_util.h"

#include <stdio.h>

static json_t *quality_of(json_t *root, const char *name)
{
    json_t *a = json_object_get(json_object_get(root, "quality"), "configs");
    size_t i;
    json_t *c;
    json_array_foreach(a, i, c)
    {
        if (!strcmp(json_string_value(json_object_get(c, "name")), name))
            return c;
    }
    fail_msg("no quality result for %s", name);
    return NULL;
}

static void pass_limits_and_pick(void **state)
{
    (void)state;
    char spec[512], out[512];
    snprintf(spec, sizeof spec, "%s/q.yaml", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    FILE *f = fopen(spec, "w");
    assert_non_null(f);
    /* the awq checkpoint reads the fewest bytes per step: the cheapest on the emulator, unless quality
     * rules it out; the exact-match limit rules out every checkpoint whose answers change */
    fprintf(f,
            "engine:\n  kind: emulator\n  model: Qwen/Qwen3-8B\n"
            "  flags: [--gpu, H100, --time-scale, '20', --max-model-len, '4096', --seed, '%d']\n"
            "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.0}\n"
            "peak_rate: 10\n"
            "workload: {input_tokens: 256, output_tokens: 16, requests_per_rate: 24, seed: 3}\n"
            "rates: [2, 40]\nwarmup_requests: 2\n"
            "slo: {ttft_p95_ms: 20000, tpot_p95_ms: 2000}\n"
            "timeouts: {startup: 8s, request: 60s, stop_grace: 2s}\n"
            "search: {mode: burst}\n"
            "configurations:\n"
            "  - name: baseline\n"
            "  - name: fp8-kv\n    add_flags: [--kv-cache-dtype, fp8]\n"
            "  - name: awq\n    model: Qwen/Qwen3-8B-AWQ\n"
            "  - name: other-model\n    model: meta-llama/Llama-3.1-8B\n"
            "quality:\n  prompts: 12\n  top_k: 8\n  max_tokens: 16\n"
            "  limits: {max_mean_kld: 0.05, min_same_top1: 0.9, min_exact_match: 0.75}\n",
            (int)getpid());
    fclose(f);
    const char *args[] = { "audit", spec, "-o", out, "--no-prediction", NULL };
    assert_int_equal(run_servetune(args, 240), 0);
    json_t *root = load_json(out);
    assert_non_null(root);
    json_t *b = quality_of(root, "baseline"), *kv = quality_of(root, "fp8-kv"), *awq = quality_of(root, "awq");
    json_t *om = quality_of(root, "other-model");
    assert_string_equal(json_string_value(json_object_get(b, "status")), "reference");
    /* fp8 KV: measured, teacher-forced on every position of every answer, within the limits */
    assert_string_equal(json_string_value(json_object_get(kv, "status")), "measured");
    assert_string_equal(json_string_value(json_object_get(kv, "mode")), "teacher-forced");
    assert_int_equal(json_integer_value(json_object_get(kv, "prompts")), 12);
    assert_int_equal(json_integer_value(json_object_get(kv, "positions")), 12 * 16);
    assert_true(json_is_true(json_object_get(kv, "synthetic_prompts")));
    assert_true(json_is_true(json_object_get(kv, "emulated")));
    double kld_kv = json_number_value(json_object_get(kv, "mean_kld"));
    double kld_awq = json_number_value(json_object_get(awq, "mean_kld"));
    assert_true(kld_kv > 0 && kld_kv < 0.05);
    /* 4-bit weights move the distributions more than an 8-bit KV cache: beyond the limits */
    assert_true(kld_awq > kld_kv);
    assert_true(json_is_true(json_object_get(kv, "pass")));
    assert_true(json_is_false(json_object_get(awq, "pass")));
    assert_non_null(strstr(json_string_value(json_object_get(awq, "note")), "above the limit 0.05"));
    /* another tokenizer: refused, said why, no figure */
    assert_string_equal(json_string_value(json_object_get(om, "status")), "refused");
    assert_non_null(strstr(json_string_value(json_object_get(om, "note")), "another tokenizer"));
    assert_true(json_is_null(json_object_get(om, "mean_kld")));
    /* never the pick; the headline says so */
    json_t *h = json_object_get(root, "headline");
    /* the configurations left in all pass the grid's highest rate: a tie, named as such (no
     * winner), or a pick; never awq either way */
    const char *pick = json_string_value(json_object_get(h, "pick"));
    if (pick)
        assert_string_not_equal(pick, "awq");
    else
        assert_non_null(strstr(json_string_value(json_object_get(h, "text")), "No winner is named"));
    assert_non_null(strstr(json_string_value(json_object_get(h, "text")), "Left out for failing a quality limit: awq"));
    json_decref(root);
    /* every renderer */
    char p[600];
    snprintf(p, sizeof p, "%s/report.md", out);
    assert_true(file_has(p, "## Quality vs baseline"));
    assert_true(file_has(p, "not evidence"));
    assert_true(file_has(p, "FAILS: mean KL divergence"));
    snprintf(p, sizeof p, "%s/report.html", out);
    assert_true(file_has(p, "Quality vs baseline"));
    snprintf(p, sizeof p, "%s/results.csv", out);
    assert_true(file_has(p, ",quality_status,quality_mode,"));
    assert_true(file_has(p, ",measured,teacher-forced,12,1,"));
    /* the log says what was measured */
    snprintf(p, sizeof p, "%s/servetune.out", tmp);
    assert_true(file_has(p, "[3/4 awq] quality vs baseline (teacher-forced, 12 prompts"));
}

/* The only configuration that meets the SLO (the others' decode slowed down 50 times by the
 * emulator's fault injection) fails a quality limit: it met the SLO, yet there is no pick, and
 * the headline says why. */
static void only_passing_config_fails_quality(void **state)
{
    (void)state;
    char spec[512], out[512];
    snprintf(spec, sizeof spec, "%s/q.yaml", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    FILE *f = fopen(spec, "w");
    assert_non_null(f);
    fprintf(f,
            "engine:\n  kind: emulator\n  model: Qwen/Qwen3-8B\n"
            "  flags: [--gpu, H100, --time-scale, '20', --max-model-len, '4096', --seed, '%d',"
            " --fault-decode-slowdown, '50']\n"
            "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.0}\n"
            "peak_rate: 10\n"
            "workload: {input_tokens: 128, output_tokens: 8, requests_per_rate: 12, seed: 3}\n"
            "rates: [2]\nwarmup_requests: 1\n"
            "slo: {ttft_p95_ms: 20000, tpot_p95_ms: 100}\n"
            "timeouts: {startup: 8s, request: 60s, stop_grace: 2s}\n"
            "search: {mode: burst}\n"
            "configurations:\n"
            "  - name: baseline\n"
            "  - name: awq\n    model: Qwen/Qwen3-8B-AWQ\n    remove_flags: [--fault-decode-slowdown]\n"
            "quality:\n  prompts: 6\n  top_k: 8\n  max_tokens: 8\n  limits: {max_mean_kld: 0.05}\n",
            (int)getpid());
    fclose(f);
    const char *args[] = { "audit", spec, "-o", out, "--no-prediction", NULL };
    run_servetune(args, 240);
    json_t *root = load_json(out);
    assert_non_null(root);
    /* awq met the SLO (without the quality rule it would be the pick), the baseline did not */
    assert_string_equal(json_string_value(json_object_get(config_named(root, "awq"), "status")), "ok");
    assert_string_equal(json_string_value(json_object_get(config_named(root, "baseline"), "status")), "none_passed");
    assert_true(json_is_false(json_object_get(quality_of(root, "awq"), "pass")));
    json_t *h = json_object_get(root, "headline");
    assert_true(json_is_null(json_object_get(h, "pick")));
    const char *text = json_string_value(json_object_get(h, "text"));
    if (!strstr(text, "No configuration both met the SLO") ||
        !strstr(text, "Left out for failing a quality limit: awq"))
        fail_msg("headline: %s", text);
    json_decref(root);
}

/* servetune plan --quality DIR: the cost-vs-quality frontier over the drift the audit measured per
 * checkpoint and KV cache instead of the format's label. */
static void plan_uses_measured_drift(void **state)
{
    (void)state;
    char spec[512], out[512], plan[512], pout[512];
    snprintf(spec, sizeof spec, "%s/a.yaml", tmp);
    snprintf(out, sizeof out, "%s/aout", tmp);
    snprintf(plan, sizeof plan, "%s/p.yaml", tmp);
    snprintf(pout, sizeof pout, "%s/pout", tmp);
    FILE *f = fopen(spec, "w");
    assert_non_null(f);
    fprintf(f,
            "engine:\n  kind: emulator\n  model: Qwen/Qwen3-8B\n"
            "  flags: [--gpu, H100, --time-scale, '20', --max-model-len, '4096', --seed, '%d']\n"
            "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.0}\n"
            "peak_rate: 10\nworkload: {input_tokens: 256, output_tokens: 16, requests_per_rate: 12, seed: 3}\n"
            "rates: [2]\nwarmup_requests: 1\nslo: {ttft_p95_ms: 20000, tpot_p95_ms: 2000}\n"
            "timeouts: {startup: 8s, request: 60s, stop_grace: 2s}\nsearch: {mode: burst}\n"
            "configurations:\n  - name: baseline\n  - name: fp8-kv\n    add_flags: [--kv-cache-dtype, fp8]\n"
            "  - name: fp8\n    model: Qwen/Qwen3-8B-FP8\n"
            "  - name: fp8-both\n    model: Qwen/Qwen3-8B-FP8\n    add_flags: [--kv-cache-dtype, fp8]\n"
            "quality: {prompts: 8, max_tokens: 8}\n",
            (int)getpid());
    fclose(f);
    f = fopen(plan, "w");
    assert_non_null(f);
    fprintf(f, "engine:\n  kind: vllm\n  model: Qwen/Qwen3-8B\n  flags: [--max-model-len, '4096']\n"
               "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.49}\npeak_rate: 10\n"
               "workload: {input_tokens: 256, output_tokens: 16}\nrates: [2, 4]\n"
               "slo: {ttft_p95_ms: 1500, tpot_p95_ms: 50}\n"
               "plan:\n  gpus: [H100]\n  gpus_per_replica: [1]\n"
               "  checkpoints: {bf16: Qwen/Qwen3-8B, fp8: Qwen/Qwen3-8B-FP8}\n  kv_cache_dtype: [auto, fp8]\n"
               "  max_num_seqs: [64]\n  max_num_batched_tokens: [2048]\n");
    fclose(f);
    const char *args[] = { "audit", spec, "-o", out, "--no-prediction", NULL };
    assert_int_equal(run_servetune(args, 240), 0);
    const char *pargs[] = { "plan", plan, "-o", pout, "--quality", out, NULL };
    assert_int_equal(run_servetune(pargs, 240), 0);
    char p[700];
    snprintf(p, sizeof p, "%s/plan.md", pout);
    assert_true(file_has(p, "| measured mean KLD |"));
    snprintf(p, sizeof p, "%s/plan.json", pout);
    assert_true(file_has(p, "\"measured_mean_kld\": 0.0"));
    snprintf(p, sizeof p, "%s/servetune.out", tmp);
    assert_true(file_has(p, "4 measured checkpoint and KV cache pairs"));
    /* an audit without a quality block: refused with the reason */
    const char *bad[] = { "plan", plan, "-o", pout, "--quality", tmp, NULL };
    assert_int_not_equal(run_servetune(bad, 60), 0);
}

/* --check refuses a limit outside its range, naming the key. */
static void check_refuses_limits(void **state)
{
    (void)state;
    char spec[512];
    snprintf(spec, sizeof spec, "%s/bad.yaml", tmp);
    FILE *f = fopen(spec, "w");
    assert_non_null(f);
    fprintf(f, "engine:\n  kind: emulator\n  model: Qwen/Qwen3-8B\n  flags: [--gpu, H100]\n"
               "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.0}\n"
               "peak_rate: 10\nworkload: {input_tokens: 256, output_tokens: 16}\nrates: [2]\n"
               "slo: {ttft_p95_ms: 2000, tpot_p95_ms: 200}\n"
               "quality: {limits: {min_same_top1: 95}}\n");
    fclose(f);
    char *argv[] = { (char *)st_test_bin(), "audit", spec, "--check", NULL };
    char buf[4096];
    int rc = st_test_capture(argv, buf, sizeof buf);
    assert_int_not_equal(rc, 0);
    if (!strstr(buf, "quality.limits.min_same_top1: a share between 0 and 1"))
        fail_msg("--check said: %s", buf);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test_setup_teardown(pass_limits_and_pick, setup, teardown),
        cmocka_unit_test_setup_teardown(only_passing_config_fails_quality, setup, teardown),
        cmocka_unit_test_setup_teardown(plan_uses_measured_drift, setup, teardown),
        cmocka_unit_test_setup_teardown(check_refuses_limits, setup, teardown),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
