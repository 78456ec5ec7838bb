#include "harness.h"

#include "engine/metrics.h"

static const char *VLLM =
    "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
    "# TYPE vllm:num_requests_running gauge\n"
    "vllm:num_requests_running{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} 12.0\n"
    "vllm:num_requests_running{model_name=\"Qwen/Qwen3-8B\",engine=\"1\"} 3.0\n"
    "# TYPE vllm:num_requests_waiting gauge\n"
    "vllm:num_requests_waiting{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} 7.0\n"
    "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} 0.5\n"
    "vllm:kv_cache_usage_perc{engine=\"1\",model_name=\"Qwen/Qwen3-8B\"} 0.75\n"
    "# TYPE vllm:num_preemptions counter\n"
    "vllm:num_preemptions_total{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} 4.0\n"
    "vllm:num_preemptions_created{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} 1.7e9\n"
    "vllm:prefix_cache_queries_total{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} 30000.0\n"
    "vllm:prefix_cache_hits_total{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} 20000.0\n"
    "vllm:prompt_tokens_total{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} 30000.0\n"
    "vllm:generation_tokens_total{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} 3000.0\n"
    "vllm:request_success_total{engine=\"0\",finished_reason=\"length\",model_name=\"Qwen/Qwen3-8B\"} 10.0\n"
    "vllm:request_success_total{engine=\"0\",finished_reason=\"stop\",model_name=\"Qwen/Qwen3-8B\"} 2.0\n"
    "vllm:cache_config_info{block_size=\"16\",cache_dtype=\"auto\",enable_prefix_caching=\"True\",engine=\"0\",gpu_"
    "memory_utilization=\"0.9\",num_gpu_blocks=\"27235\"} 1.0\n"
    "# TYPE vllm:time_to_first_token_seconds histogram\n"
    "vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"0.1\",model_name=\"Qwen/Qwen3-8B\"} 2.0\n"
    "vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"0.5\",model_name=\"Qwen/Qwen3-8B\"} 6.0\n"
    "vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"1.0\",model_name=\"Qwen/Qwen3-8B\"} 8.0\n"
    "vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"+Inf\",model_name=\"Qwen/Qwen3-8B\"} 10.0\n"
    "vllm:time_to_first_token_seconds_count{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} 10.0\n"
    "vllm:time_to_first_token_seconds_sum{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} 4.2\n";

static void prom_iterate(void **state)
{
    (void)state;
    const char *t = "# comment\n\n  a_metric 1\r\nb{x=\"1\" , y = \"q\\\"\\\\\\n\",} -2.5e3 1700000000000\n"
                    "c{} NaN\nd +Inf\nbad line here\ne{unterminated=\"x} 1\nf{x=\"1\"} notanumber\ng 5";
    st_prom_iter it;
    st_prom_sample s;
    char err[128];
    st_prom_iter_init(&it, t, strlen(t));
    assert_int_equal(st_prom_next(&it, &s, err, sizeof err), 1);
    assert_int_equal(s.name_len, 8);
    assert_memory_equal(s.name, "a_metric", 8);
    assert_near(s.value, 1, 0);
    assert_int_equal(s.line, 3);
    assert_int_equal(st_prom_next(&it, &s, err, sizeof err), 1);
    assert_near(s.value, -2500, 0);
    assert_true(s.has_timestamp && s.timestamp_ms == 1700000000000LL);
    char buf[16];
    assert_int_equal(st_prom_label(&s, "y", buf, sizeof buf), 0);
    assert_string_equal(buf, "q\"\\\n");
    assert_int_equal(st_prom_label(&s, "x", buf, sizeof buf), 0);
    assert_string_equal(buf, "1");
    assert_int_equal(st_prom_label(&s, "z", buf, sizeof buf), 1);
    assert_true(st_prom_match(&s, "x=1"));
    assert_true(st_prom_match(&s, "x=1,y=q\"\\\n"));
    assert_false(st_prom_match(&s, "x=2"));
    assert_false(st_prom_match(&s, "z=1"));
    assert_int_equal(st_prom_next(&it, &s, err, sizeof err), 1);
    assert_true(isnan(s.value));
    assert_int_equal(st_prom_next(&it, &s, err, sizeof err), 1);
    assert_true(isinf(s.value));
    /* Malformed lines are reported with their number and skipped. */
    assert_int_equal(st_prom_next(&it, &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "line 7"));
    assert_int_equal(st_prom_next(&it, &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "line 8: malformed label set"));
    assert_int_equal(st_prom_next(&it, &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "malformed value"));
    assert_int_equal(st_prom_next(&it, &s, err, sizeof err), 1);
    assert_near(s.value, 5, 0);
    assert_int_equal(st_prom_next(&it, &s, err, sizeof err), 0);
    /* Over-long lines. */
    size_t big = ST_PROM_LINE_MAX + 100;
    char *b = malloc(big + 8);
    memset(b, 'a', big);
    memcpy(b + big, " 1\nz 2", 7);
    st_prom_iter_init(&it, b, strlen(b));
    assert_int_equal(st_prom_next(&it, &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "longer than"));
    assert_int_equal(st_prom_next(&it, &s, err, sizeof err), 1);
    assert_near(s.value, 2, 0);
    free(b);
}

static void prom_get_sum(void **state)
{
    (void)state;
    size_t n = strlen(VLLM);
    double v;
    uint32_t c;
    assert_int_equal(st_prom_get(VLLM, n, "vllm:num_requests_running", "engine=1", &v), 0);
    assert_near(v, 3, 0);
    assert_int_equal(st_prom_sum(VLLM, n, "vllm:num_requests_running", NULL, &v, &c), 0);
    assert_near(v, 15, 0);
    assert_int_equal(c, 2);
    assert_int_equal(st_prom_sum(VLLM, n, "vllm:request_success_total", "finished_reason=length", &v, &c), 0);
    assert_near(v, 10, 0);
    assert_int_equal(st_prom_get(VLLM, n, "vllm:num_requests", NULL, &v), 1); /* exact names only */
    assert_int_equal(st_prom_sum(VLLM, n, "nope", NULL, &v, &c), 1);
    assert_int_equal(c, 0);
    /* Config in labels. */
    st_prom_iter it;
    st_prom_sample s;
    st_prom_iter_init(&it, VLLM, n);
    char blocks[32] = "";
    while (st_prom_next(&it, &s, NULL, 0) != 0)
        if (s.name_len == 22 && memcmp(s.name, "vllm:cache_config_info", 22) == 0)
            st_prom_label(&s, "num_gpu_blocks", blocks, sizeof blocks);
    assert_string_equal(blocks, "27235");
}

static void prom_histogram(void **state)
{
    (void)state;
    st_prom_hist h;
    assert_int_equal(st_prom_histogram(VLLM, strlen(VLLM), "vllm:time_to_first_token_seconds", NULL, &h), 0);
    assert_int_equal(h.n, 4);
    assert_true(isinf(h.le[3]));
    assert_near(h.count[1], 6, 0);
    assert_near(h.sum, 4.2, 1e-12);
    assert_near(h.total, 10, 0);
    assert_near(st_prom_hist_quantile(&h, 0.5), 0.4, 1e-12);
    assert_near(st_prom_hist_quantile(&h, 0.1), 0.05, 1e-12);
    assert_near(st_prom_hist_quantile(&h, 0.7), 0.5 + 0.5 * 0.5, 1e-12);
    assert_near(st_prom_hist_quantile(&h, 0.95), 1.0, 1e-12); /* in +Inf: highest finite bound */
    st_prom_hist later = h, d;
    later.count[0] += 1, later.count[1] += 3, later.count[2] += 3, later.count[3] += 3;
    later.total += 3, later.sum += 1.0;
    assert_int_equal(st_prom_hist_delta(&h, &later, &d), 0);
    assert_near(d.count[0], 1, 0);
    assert_near(d.count[3], 3, 0);
    assert_near(d.total, 3, 0);
    assert_near(st_prom_hist_quantile(&d, 0.5), 0.1 + 0.4 * (0.5 / 2), 1e-12);
    st_prom_hist other = h;
    other.n = 3;
    assert_int_equal(st_prom_hist_delta(&h, &other, &d), -1);
    assert_int_equal(st_prom_histogram(VLLM, strlen(VLLM), "vllm:nope", NULL, &h), 1);
    st_prom_hist empty = { 0 };
    assert_true(isnan(st_prom_hist_quantile(&empty, 0.5)));
}

/* The dialect of a name (the emulator speaks vLLM's; llama.cpp's other spelling). */
static st_metrics_dialect dialect(const char *name)
{
    st_metrics_dialect d = ST_DIALECT__COUNT;
    assert_int_equal(st_metrics_dialect_from_name(name, &d), 0);
    return d;
}

static void engine_mapping(void **state)
{
    (void)state;
    st_engine_metrics m;
    assert_int_equal(st_metrics_read(ST_DIALECT_VLLM, VLLM, strlen(VLLM), &m), 0);
    assert_near(m.v[ST_MET_RUNNING], 15, 0);
    assert_near(m.v[ST_MET_WAITING], 7, 0);
    assert_near(m.v[ST_MET_KV_USAGE], 0.625, 1e-12); /* mean of the engines' fractions */
    assert_near(m.v[ST_MET_PREEMPTIONS], 4, 0);
    assert_near(m.v[ST_MET_PREFIX_HITS], 20000, 0);
    assert_near(m.v[ST_MET_PREFIX_QUERIES], 30000, 0);
    assert_near(m.v[ST_MET_PROMPT_TOKENS], 30000, 0);
    assert_near(m.v[ST_MET_GENERATION_TOKENS], 3000, 0);
    assert_true(isnan(m.v[ST_MET_PREFIX_HIT_RATE]));
    assert_false(m.found & (1u << ST_MET_PREFIX_HIT_RATE));
    assert_true(m.found & (1u << ST_MET_KV_USAGE));
    /* Older vLLM name for KV usage. */
    const char *old = "vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.25\n";
    assert_int_equal(st_metrics_read(dialect("emulator"), old, strlen(old), &m), 0);
    assert_near(m.v[ST_MET_KV_USAGE], 0.25, 0);
    assert_true(isnan(m.v[ST_MET_RUNNING]));
    const char *sg = "sglang:num_running_reqs{model_name=\"m\"} 8\nsglang:token_usage{model_name=\"m\"} 0.91\n"
                     "sglang:cache_hit_rate{model_name=\"m\"} 0.6\nsglang:prompt_tokens_total{model_name=\"m\"} 100\n";
    assert_int_equal(st_metrics_read(ST_DIALECT_SGLANG, sg, strlen(sg), &m), 0);
    assert_near(m.v[ST_MET_RUNNING], 8, 0);
    assert_near(m.v[ST_MET_KV_USAGE], 0.91, 1e-12);
    assert_near(m.v[ST_MET_PREFIX_HIT_RATE], 0.6, 1e-12);
    assert_near(m.v[ST_MET_PROMPT_TOKENS], 100, 0);
    const char *ll = "llamacpp:kv_cache_usage_ratio 0.3\nllamacpp:requests_processing 2\nllamacpp:requests_deferred 5\n"
                     "llamacpp:tokens_predicted_total 77\n";
    assert_int_equal(st_metrics_read(dialect("llama.cpp"), ll, strlen(ll), &m), 0);
    assert_near(m.v[ST_MET_WAITING], 5, 0);
    assert_near(m.v[ST_MET_GENERATION_TOKENS], 77, 0);
    assert_near(m.v[ST_MET_KV_USAGE], 0.3, 1e-12);
    /* a scrape of the llama-server that scripts/install-llamacpp builds (HELP/TYPE lines kept
     * for two of them), after 35 prompt tokens evaluated, 6 reused from a slot and 20 predicted */
    const char *real =
        "# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed, excluding cached tokens\n"
        "# TYPE llamacpp:prompt_tokens_total counter\n"
        "llamacpp:prompt_tokens_total 35\n"
        "# HELP llamacpp:prompt_tokens_cached_total Number of prompt tokens reused from the cache\n"
        "# TYPE llamacpp:prompt_tokens_cached_total counter\n"
        "llamacpp:prompt_tokens_cached_total 6\n"
        "llamacpp:prompt_seconds_total 0.005115\nllamacpp:tokens_predicted_total 20\n"
        "llamacpp:tokens_predicted_seconds_total 0.016664\nllamacpp:n_decode_total 20\n"
        "llamacpp:n_tokens_max 32\nllamacpp:prompt_tokens_seconds 6842.62\n"
        "llamacpp:predicted_tokens_seconds 1080.17\nllamacpp:requests_processing 4\n"
        "llamacpp:requests_deferred 3\nllamacpp:n_busy_slots_per_decode 4\n";
    assert_int_equal(st_metrics_read(ST_DIALECT_LLAMACPP, real, strlen(real), &m), 0);
    assert_near(m.v[ST_MET_RUNNING], 4, 0);
    assert_near(m.v[ST_MET_WAITING], 3, 0);
    assert_near(m.v[ST_MET_GENERATION_TOKENS], 20, 0);
    assert_near(m.v[ST_MET_PROMPT_TOKENS], 41, 0); /* every prompt token, as vLLM counts them */
    assert_near(m.v[ST_MET_PREFIX_HITS], 6, 0);
    assert_near(m.v[ST_MET_PREFIX_QUERIES], 41, 0);
    assert_false(m.found & (1u << ST_MET_KV_USAGE)); /* this server has no KV usage gauge */
    assert_true(isnan(m.v[ST_MET_KV_USAGE]));
    assert_false(m.found & (1u << ST_MET_PREEMPTIONS));
    assert_null(st_metrics_engine_names(ST_DIALECT_TGI, ST_MET_KV_USAGE));
    assert_non_null(st_metrics_engine_names(ST_DIALECT_TGI, ST_MET_WAITING));
    assert_string_equal(st_metrics_engine_names(ST_DIALECT_VLLM, ST_MET_KV_USAGE)[1], "vllm:gpu_cache_usage_perc");
    assert_int_equal(st_metrics_read(ST_DIALECT__COUNT, ll, strlen(ll), &m), -1);
    st_metrics_dialect d;
    assert_int_equal(st_metrics_dialect_from_name("triton", &d), -1);
    assert_string_equal(st_metrics_dialect_name(ST_DIALECT_LLAMACPP), "llamacpp");
    st_metric k;
    assert_int_equal(st_metrics_from_name("prefix_hits", &k), 0);
    assert_int_equal(k, ST_MET_PREFIX_HITS);
    assert_string_equal(st_metrics_name(ST_MET_KV_USAGE), "kv_usage");
    assert_string_equal(st_metrics_hist_names(ST_DIALECT_VLLM, "ttft")[0], "vllm:time_to_first_token_seconds");
    assert_null(st_metrics_hist_names(ST_DIALECT_TGI, "ttft"));
    assert_null(st_metrics_hist_names(ST_DIALECT_VLLM, "nope"));
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(prom_iterate),
        cmocka_unit_test(prom_get_sum),
        cmocka_unit_test(prom_histogram),
        cmocka_unit_test(engine_mapping),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
