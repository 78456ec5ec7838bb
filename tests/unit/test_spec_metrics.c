/* vLLM's speculative decoding counters scraped under servetune's generic names (engine/metrics.h):
 * summed over engines, by position, and absent (not zero) when the engine does not speculate. */
#include "harness.h"

#include "engine/metrics.h"

static double sample(const st_metrics_sample *s, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(s[i].name, name))
            return s[i].value;
    return NAN;
}

static void vllm_spec_decode(void **state)
{
    (void)state;
    const char *body =
        "# TYPE vllm:spec_decode_num_drafts counter\n"
        "vllm:spec_decode_num_drafts_total{engine=\"0\",model_name=\"m\"} 100.0\n"
        "vllm:spec_decode_num_drafts_total{engine=\"1\",model_name=\"m\"} 50.0\n"
        "vllm:spec_decode_num_draft_tokens_total{engine=\"0\",model_name=\"m\"} 400.0\n"
        "vllm:spec_decode_num_draft_tokens_total{engine=\"1\",model_name=\"m\"} 200.0\n"
        "vllm:spec_decode_num_accepted_tokens_total{engine=\"0\",model_name=\"m\"} 150.0\n"
        "vllm:spec_decode_num_accepted_tokens_total{engine=\"1\",model_name=\"m\"} 60.0\n"
        "vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",model_name=\"m\",position=\"0\"} 80.0\n"
        "vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"1\",model_name=\"m\",position=\"0\"} 40.0\n"
        "vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",model_name=\"m\",position=\"1\"} 50.0\n"
        "vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",model_name=\"m\",position=\"99\"} 1.0\n"
        "vllm:num_requests_running{engine=\"0\"} 3\n";
    st_metrics_sample s[ST_METRICS_SCRAPE_MAX];
    int n = st_metrics_scrape("vllm", body, strlen(body), s, ST_METRICS_SCRAPE_MAX);
    assert_near(sample(s, n, "spec_drafts"), 150, 0);
    assert_near(sample(s, n, "spec_draft_tokens"), 600, 0);
    assert_near(sample(s, n, "spec_accepted_tokens"), 210, 0);
    assert_near(sample(s, n, "spec_accepted_pos_00"), 120, 0);
    assert_near(sample(s, n, "spec_accepted_pos_01"), 50, 0);
    assert_true(isnan(sample(s, n, "spec_accepted_pos_02"))); /* position 99: past the kept ones */
    assert_near(sample(s, n, "running"), 3, 0);
    st_metric m;
    assert_int_equal(st_metrics_from_name("spec_accepted_tokens", &m), 0);
    assert_int_equal(m, ST_MET_SPEC_ACCEPTED);

    /* no speculation: the counters are absent, not zero */
    const char *plain = "vllm:num_requests_running 1\n";
    n = st_metrics_scrape("vllm", plain, strlen(plain), s, ST_METRICS_SCRAPE_MAX);
    assert_true(isnan(sample(s, n, "spec_drafts")));
    /* the emulator speaks vLLM's names; llama.cpp has none of them */
    n = st_metrics_scrape("emulator", body, strlen(body), s, ST_METRICS_SCRAPE_MAX);
    assert_near(sample(s, n, "spec_drafts"), 150, 0);
    n = st_metrics_scrape("llamacpp", body, strlen(body), s, ST_METRICS_SCRAPE_MAX);
    assert_true(isnan(sample(s, n, "spec_drafts")));
    assert_true(isnan(sample(s, n, "spec_accepted_pos_00")));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(vllm_spec_decode),
    };
    return cmocka_run_group_tests(tests, 0, 0);
}
