/* vLLM's speculative decoding counters scraped under servetune's generic names (engine/metrics.h):
 * summed over engines, by position, and absent (not zero) when the engine does not speculate. */
#include "harness.h"

#include "engine/metrics.h"
#include "load/api.h"
#include "load/stats.h"

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
    int n = st_metrics_scrape(ST_DIALECT_VLLM, body, strlen(body), s, ST_METRICS_SCRAPE_MAX);
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
    n = st_metrics_scrape(ST_DIALECT_VLLM, plain, strlen(plain), s, ST_METRICS_SCRAPE_MAX);
    assert_true(isnan(sample(s, n, "spec_drafts")));
    /* the emulator speaks vLLM's names; llama.cpp has none of them */
    n = st_metrics_scrape(ST_DIALECT_VLLM, body, strlen(body), s, ST_METRICS_SCRAPE_MAX);
    assert_near(sample(s, n, "spec_drafts"), 150, 0);
    n = st_metrics_scrape(ST_DIALECT_LLAMACPP, body, strlen(body), s, ST_METRICS_SCRAPE_MAX);
    assert_true(isnan(sample(s, n, "spec_drafts")));
    assert_true(isnan(sample(s, n, "spec_accepted_pos_00")));
}

/* llama-server's per-response draft counts (timings.draft_n, draft_n_accepted): read, and summed
 * over a run's completed measured requests. */
static void llamacpp_draft_timings(void **state)
{
    (void)state;
    static st_api_event ev;
    st_api_event_reset(&ev);
    const char *last = "{\"choices\":[],\"object\":\"chat.completion.chunk\",\"usage\":{\"completion_tokens\":64,"
                       "\"prompt_tokens\":29,\"total_tokens\":93},\"timings\":{\"cache_n\":0,\"prompt_n\":29,"
                       "\"prompt_ms\":3.7,\"predicted_n\":64,\"predicted_ms\":80.5,\"draft_n\":48,"
                       "\"draft_n_accepted\":36}}";
    assert_int_equal(st_api_parse_event(ST_API_CHAT, last, strlen(last), &ev), 0);
    assert_true(ev.has_timings);
    assert_true(ev.has_draft);
    assert_int_equal(ev.srv_draft_n, 48);
    assert_int_equal(ev.srv_draft_accepted, 36);
    const char *plain = "{\"choices\":[],\"object\":\"chat.completion.chunk\",\"timings\":{\"prompt_ms\":3.7,"
                        "\"predicted_n\":64,\"predicted_ms\":80.5}}";
    assert_int_equal(st_api_parse_event(ST_API_CHAT, plain, strlen(plain), &ev), 0);
    assert_true(ev.has_timings);
    assert_false(ev.has_draft);
    /* more accepted than drafted: not a count to trust */
    const char *bad = "{\"choices\":[],\"timings\":{\"prompt_ms\":1,\"predicted_n\":4,\"predicted_ms\":2,"
                      "\"draft_n\":3,\"draft_n_accepted\":5}}";
    assert_int_equal(st_api_parse_event(ST_API_CHAT, bad, strlen(bad), &ev), 0);
    assert_false(ev.has_draft);

    st_record r[3];
    memset(r, 0, sizeof r);
    for (int i = 0; i < 3; i++) {
        r[i].status = ST_REQ_OK;
        r[i].scheduled = r[i].sent = (st_ns)i * 1000000;
        r[i].first_token = r[i].sent + 5000000;
        r[i].end = r[i].sent + 9000000;
        r[i].output_tokens = 10;
        r[i].srv_prompt = r[i].srv_gen = -1;
    }
    r[0].has_draft = 1, r[0].srv_draft_n = 40, r[0].srv_draft_accepted = 30;
    r[1].has_draft = 1, r[1].srv_draft_n = 20, r[1].srv_draft_accepted = 5;
    r[2].has_draft = 1, r[2].srv_draft_n = 99, r[2].srv_draft_accepted = 99;
    r[2].warmup = 1; /* not measured */
    st_summary_opts o;
    memset(&o, 0, sizeof o);
    st_summary s;
    assert_int_equal(st_summary_compute(r, 3, &o, &s), 0);
    assert_int_equal(s.srv_draft_requests, 2);
    assert_int_equal(s.srv_draft_tokens, 60);
    assert_int_equal(s.srv_draft_accepted, 35);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(vllm_spec_decode),
        cmocka_unit_test(llamacpp_draft_timings),
    };
    return cmocka_run_group_tests(tests, 0, 0);
}
