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

/* A spec whose plan.speculation names n-gram lookup without an acceptance (or, with no_methods, no
 * speculation at all), planned with `extra` flags: the exit status, plan.json in *j (NULL unless
 * 0) and stderr in err. */
static int plan_flagged(int no_methods, const char *const *extra, json_t **j, char *err, size_t errlen)
{
    char spec[600], out[600], p[700], log[600];
    snprintf(spec, sizeof spec, "%s/flag.yaml", tmp);
    snprintf(out, sizeof out, "%s/flag-out", tmp);
    snprintf(log, sizeof log, "%s/servetune.out", tmp);
    FILE *f = fopen(spec, "w");
    assert_non_null(f);
    fprintf(f,
            "engine: {kind: vllm, model: Qwen/Qwen3-8B}\n"
            "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.49}\n"
            "workload: {input_tokens: 500, output_tokens: 300}\npeak_rate: 2\nrates: [1, 2, 4]\n"
            "slo: {ttft_p95_ms: 2000, tpot_p95_ms: 9}\n"
            "plan: {gpus: [H100], gpus_per_replica: [1], kv_cache_dtype: [auto], max_num_seqs: [256], "
            "max_num_batched_tokens: [8192]%s}\n",
            no_methods ? "" : ", speculation: [{method: ngram, k: [2, 4]}]");
    fclose(f);
    const char *args[16] = { "plan", spec, "-o", out, "-q", "--threads", "1" };
    int n = 7;
    for (int i = 0; extra[i] && n < 15; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    int rc = run_servetune(args, 300); /* its output in tmp/servetune.out */
    err[0] = 0;
    FILE *e = fopen(log, "r");
    if (e) {
        size_t got = fread(err, 1, errlen - 1, e);
        err[got] = 0;
        fclose(e);
    }
    *j = NULL;
    if (rc == 0) {
        snprintf(p, sizeof p, "%s/plan.json", out);
        json_error_t je;
        if (!(*j = json_load_file(p, 0, &je)))
            fail_msg("%s: %s", p, je.text);
    }
    return rc;
}

/* plan --spec-acceptance: the methods of plan.speculation that give no acceptance are tried at the
 * rate the command line gives (without it they are not considered), the picks carry it; a rate out
 * of range, or no method to try it with, is refused with the reason. */
static void acceptance_on_the_command_line(void **state)
{
    (void)state;
    char err[4096];
    json_t *j;
    const char *none[] = { NULL };
    assert_int_equal(plan_flagged(0, none, &j, err, sizeof err), 0);
    assert_int_equal(json_integer_value(json_object_get(j, "speculation_variants")), 0);
    assert_non_null(strstr(json_string_value(json_object_get(j, "speculation_note")), "no acceptance given"));
    json_decref(j);
    const char *given[] = { "--spec-acceptance", "0.8", NULL };
    assert_int_equal(plan_flagged(0, given, &j, err, sizeof err), 0);
    assert_int_equal(json_integer_value(json_object_get(j, "speculation_variants")), 2);
    assert_true(json_is_null(json_object_get(j, "speculation_note")));
    /* a TPOT SLO of 9 ms that plain decoding misses on this GPU: a speculating pick, at 0.8 */
    json_t *sp = json_object_get(json_object_get(j, "best"), "speculation");
    assert_true(json_is_object(sp));
    assert_string_equal(json_string_value(json_object_get(sp, "method")), "ngram");
    assert_near(json_real_value(json_object_get(sp, "acceptance")), 0.8, 1e-9);
    json_decref(j);
    const char *by_pos[] = { "--spec-acceptance", "0.9/0.7", NULL };
    assert_int_equal(plan_flagged(0, by_pos, &j, err, sizeof err), 0);
    assert_int_equal(json_integer_value(json_object_get(j, "speculation_variants")), 2);
    json_decref(j);
    const char *bad[] = { "--spec-acceptance", "1.5", NULL };
    assert_int_equal(plan_flagged(0, bad, &j, err, sizeof err), 2);
    assert_non_null(strstr(err, "--spec-acceptance: expected A or A1/A2/..."));
    const char *rising[] = { "--spec-acceptance", "0.5/0.7", NULL };
    assert_int_equal(plan_flagged(0, rising, &j, err, sizeof err), 2);
    assert_non_null(strstr(err, "at most the one before it"));
    const char *too_many[] = { "--spec-acceptance", "0.9/0.8/0.7", NULL };
    assert_int_equal(plan_flagged(0, too_many, &j, err, sizeof err), 2);
    assert_non_null(strstr(err, "3 positions for ngram's 2 draft tokens"));
    assert_int_equal(plan_flagged(1, given, &j, err, sizeof err), 2);
    assert_non_null(strstr(err, "plan.speculation names no method"));
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test_setup_teardown(repeated_text_speculates, setup, teardown),
        cmocka_unit_test_setup_teardown(random_ids_are_not_assumed, setup, teardown),
        cmocka_unit_test_setup_teardown(acceptance_on_the_command_line, setup, teardown),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
