/* `peak_rate: trace` end to end: servetune predict on a trace whose busiest minute runs at
 * 2 req/s (minutes 0 and 2 at 0.5) sizes the fleet for it and says where the peak came from in
 * report.md (setup and headline) and report.json (spec.peak_source), and `servetune report`
 * re-renders the same from the stored traffic; a configuration's context shorter than some of the
 * trace's requests leaves them out and the report's note says the share. */
#include "harness.h"

#define ST_IT_TMP_PREFIX "/tmp/st_trace_peak_it."
#include "audit_util.h"

static void peak_and_context_from_the_trace(void **state)
{
    (void)state;
    char trace[512], spec[512], out[512], p[600];
    snprintf(trace, sizeof trace, "%s/t.jsonl", tmp);
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    FILE *f = fopen(trace, "w");
    assert_non_null(f);
    int n = 0;
    for (int i = 0; i < 30; i++, n++)
        fprintf(f, "{\"timestamp\": %.3f, \"input_tokens\": 500, \"output_tokens\": 50}\n", i * 2.0);
    for (int i = 0; i < 120; i++, n++) /* every tenth request longer than the 4096-token context */
        fprintf(f, "{\"timestamp\": %.3f, \"input_tokens\": %d, \"output_tokens\": 50}\n", 60 + i * 0.5,
                i % 10 == 9 ? 5000 : 500);
    for (int i = 0; i < 31; i++, n++)
        fprintf(f, "{\"timestamp\": %.3f, \"input_tokens\": 500, \"output_tokens\": 50}\n", 120 + i * 2.0);
    fclose(f);
    f = fopen(spec, "w");
    assert_non_null(f);
    fprintf(f, "engine: {kind: vllm, model: Qwen/Qwen3-8B, flags: [--max-model-len, \"4096\"]}\n"
               "hardware: {gpu: H100, price_per_gpu_hour: 2.5}\npeak_rate: trace\n"
               "workload: {trace: t.jsonl, requests_per_rate: 100}\nsearch: {mode: burst}\nrates: [1, 2]\n"
               "warmup_requests: 0\nslo: {ttft_p95_ms: 1500, tpot_p95_ms: 50}\n");
    fclose(f);
    assert_int_equal(run_servetune((const char *[]){ "predict", spec, "-o", out, "-q", NULL }, 120), 0);
    for (int pass = 0; pass < 2; pass++) {
        snprintf(p, sizeof p, "%s/report.md", out);
        const char *want[] = { "**Traffic peak**: 2.00 requests/s (the trace's busiest minute",
                               "at the trace's busiest-minute peak of 2.00 requests/s",
                               "12 of the trace's 181 requests (6.6 %) are longer (prompt + output) than baseline's "
                               "context of 4096 tokens" };
        for (size_t i = 0; i < sizeof want / sizeof *want; i++)
            if (!file_has(p, want[i]))
                fail_msg("%s report.md lacks '%s'", pass ? "re-rendered" : "the first", want[i]);
        json_t *j = load_json(out);
        const char *src = json_string_value(json_object_get(json_object_get(j, "spec"), "peak_source"));
        if (!src || strcmp(src, "trace_busiest_minute"))
            fail_msg("report.json spec.peak_source is %s", src ? src : "(none)");
        json_decref(j);
        /* again from the database alone, the trace moved away */
        char moved[600];
        snprintf(moved, sizeof moved, "%s/t.moved", tmp);
        if (!pass) {
            assert_int_equal(rename(trace, moved), 0);
            assert_int_equal(run_servetune((const char *[]){ "report", out, "-q", NULL }, 60), 0);
        }
    }
    (void)n;
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test_setup_teardown(peak_and_context_from_the_trace, setup, teardown),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}
