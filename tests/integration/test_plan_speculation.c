/* servetune plan with `acceptance: trace`: n-gram lookup's acceptance replayed from the
 * workload trace's logged token ids, one per k. A log whose completions repeat its prompts gives
 * drafts that are kept and a speculating pick; a log of random ids gives no draft, and the plan
 * says speculation was not considered and why instead of assuming an acceptance. */
#include "harness.h"

#include <stdint.h>

#define ST_IT_TMP_PREFIX "/tmp/st_plan_spec_it."
#include "audit_util.h"

/* A trace of n requests, 0.5 s apart, 120 prompt + 60 completion ids each: a phrase of 12-19 ids
 * repeated (repeat), or ids drawn at random (else), from a fixed generator. */
static void write_trace(const char *path, int n, int repeat)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (int i = 0; i < n; i++) {
        uint32_t ph[19], seq[180];
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        int len = 12 + (int)((x >> 33) % 8);
        for (int j = 0; j < 180; j++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            uint32_t r = 100 + (uint32_t)((x >> 33) % 30000);
            if (j < len)
                ph[j] = r;
            seq[j] = repeat ? ph[j % len] : r;
        }
        fprintf(f, "{\"timestamp\": %.1f, \"input_ids\": [", i * 0.5);
        for (int j = 0; j < 120; j++)
            fprintf(f, "%s%u", j ? "," : "", seq[j]);
        fprintf(f, "], \"output_ids\": [");
        for (int j = 120; j < 180; j++)
            fprintf(f, "%s%u", j > 120 ? "," : "", seq[j]);
        fprintf(f, "]}\n");
    }
    fclose(f);
}

static json_t *plan_of(const char *trace)
{
    char spec[600], out[600], p[700];
    snprintf(spec, sizeof spec, "%s/plan.yaml", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    FILE *f = fopen(spec, "w");
    assert_non_null(f);
    fprintf(f,
            "engine: {kind: vllm, model: Qwen/Qwen3-8B}\n"
            "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.49}\n"
            "workload: {trace: %s}\npeak_rate: 2\nrates: [1, 2, 4]\n"
            "slo: {ttft_p95_ms: 2000, tpot_p95_ms: 9}\n"
            "plan: {gpus: [H100], gpus_per_replica: [1], kv_cache_dtype: [auto], max_num_seqs: [256], "
            "max_num_batched_tokens: [8192], speculation: [{method: ngram, k: [2, 4], acceptance: trace}]}\n",
            trace);
    fclose(f);
    const char *args[] = { "plan", spec, "-o", out, "-q", "--threads", "1", NULL };
    assert_int_equal(run_servetune(args, 300), 0);
    snprintf(p, sizeof p, "%s/plan.json", out);
    json_error_t je;
    json_t *j = json_load_file(p, 0, &je);
    if (!j)
        fail_msg("%s: %s", p, je.text);
    return j;
}

static void repeated_text_speculates(void **state)
{
    (void)state;
    char trace[600];
    snprintf(trace, sizeof trace, "%s/rep.jsonl", tmp);
    write_trace(trace, 120, 1);
    json_t *j = plan_of(trace);
    assert_int_equal(json_integer_value(json_object_get(j, "speculation_variants")), 2);
    assert_true(json_is_null(json_object_get(j, "speculation_note")));
    json_t *best = json_object_get(j, "best");
    json_t *sp = json_object_get(best, "speculation");
    assert_true(json_is_object(sp));
    assert_string_equal(json_string_value(json_object_get(sp, "method")), "ngram");
    /* the replay: every completion continues its prompt's phrase, so the drafts are kept */
    json_t *pos = json_object_get(sp, "acceptance_by_position");
    assert_true(json_array_size(pos) >= 2);
    for (size_t i = 0; i < json_array_size(pos); i++)
        assert_true(json_real_value(json_array_get(pos, i)) > 0.9);
    json_t *pay = json_object_get(best, "speculation_pays");
    assert_true(json_is_object(pay));
    assert_true(json_real_value(json_object_get(pay, "tpot_ratio_at_1")) < 0.5);
    char md[700];
    snprintf(md, sizeof md, "%s/out/plan.md", tmp);
    assert_true(file_has(md, "| ngram k4 |") || file_has(md, "| ngram k2 |"));
    assert_true(file_has(md, "speculates (ngram, k "));
    json_decref(j);
}

static void random_ids_are_not_assumed(void **state)
{
    (void)state;
    char trace[600];
    snprintf(trace, sizeof trace, "%s/rnd.jsonl", tmp);
    write_trace(trace, 120, 0);
    json_t *j = plan_of(trace);
    assert_int_equal(json_integer_value(json_object_get(j, "speculation_variants")), 0);
    const char *note = json_string_value(json_object_get(j, "speculation_note"));
    assert_non_null(note);
    assert_non_null(strstr(note, "not considered"));
    assert_non_null(strstr(note, "made no draft"));
    assert_int_equal(json_array_size(json_object_get(j, "candidates")), 1); /* the plain candidate alone */
    assert_true(json_is_null(json_object_get(json_object_get(j, "best"), "speculation")));
    char md[700];
    snprintf(md, sizeof md, "%s/out/plan.md", tmp);
    assert_true(file_has(md, "## Speculative decoding"));
    assert_true(file_has(md, "Speculation by ngram was not considered for 2 of its 2 draft lengths"));
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test_setup_teardown(repeated_text_speculates, setup, teardown),
        cmocka_unit_test_setup_teardown(random_ids_are_not_assumed, setup, teardown),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
