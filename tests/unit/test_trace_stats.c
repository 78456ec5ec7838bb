/* Traffic statistics and advice (load/trace_stats.h) on traces whose figures are known. */
#include "harness.h"

#include <math.h>
#include <stdio.h>

#include "core/buf.h"
#include "core/rng.h"
#include "load/trace_stats.h"

static st_trace_stats *stats_of(const char *text, st_trace_counts *c)
{
    st_trace_stats *s = st_trace_stats_new();
    assert_non_null(s);
    char err[300];
    if (st_trace_read_buffer(text, strlen(text), "t", NULL, st_trace_stats_row_cb, s, c, NULL, err, sizeof err))
        fail_msg("%s", err);
    return s;
}

/* Seven Mooncake rows (from the public conversation trace, shortened): shares worked out by hand. */
static const char *mooncake =
    "{\"timestamp\": 0, \"input_length\": 6758, \"output_length\": 500, \"hash_ids\": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, "
    "10, 11, 12, 13]}\n"
    "{\"timestamp\": 0, \"input_length\": 7322, \"output_length\": 490, \"hash_ids\": [0, 14, 15, 16, 17, 18, 19, 20, "
    "21, 22, 23, 24, 25, 26, 27]}\n"
    "{\"timestamp\": 0, \"input_length\": 7236, \"output_length\": 794, \"hash_ids\": [0, 28, 29, 30, 31, 32, 33, 34, "
    "35, 36, 37, 38, 39, 40, 41]}\n"
    "{\"timestamp\": 3000, \"input_length\": 2290, \"output_length\": 316, \"hash_ids\": [0, 42, 43, 44, 45]}\n"
    "{\"timestamp\": 3052, \"input_length\": 6955, \"output_length\": 52, \"hash_ids\": [46, 47, 48, 49, 50, 51, 52, "
    "53, 54, 55, 56, 57, 2353, 2354]}\n"
    "{\"timestamp\": 6000, \"input_length\": 6472, \"output_length\": 26, \"hash_ids\": [46, 47, 48, 49, 50, 51, 52, "
    "53, 54, 55, 56, 57, 2366]}\n"
    "{\"timestamp\": 9000, \"input_length\": 915, \"output_length\": 355, \"hash_ids\": [0, 462]}\n";

static void prefix_shares_by_hand(void **state)
{
    (void)state;
    st_trace_counts c;
    st_trace_stats *s = stats_of(mooncake, &c);
    st_traffic t;
    st_trace_stats_result(s, &t);
    assert_int_equal(t.requests, 7);
    assert_int_equal(t.prompt_tokens, 37948);
    /* hits: block 0 in rows 2, 3, 4 and 7 (4 x 512), blocks 46..57 in row 6 (12 x 512) */
    assert_int_equal(t.hit_tokens, 8192);
    /* shared: block 0 in 5 rows, blocks 46..57 in 2 rows */
    assert_int_equal(t.shared_tokens, 5 * 512 + 2 * 12 * 512);
    assert_true(t.prefix_known);
    assert_near(t.ideal_hit_rate, 8192.0 / 37948, 1e-12);
    assert_int_equal(t.in.p50, 6758);
    assert_int_equal(t.in.max, 7322);
    assert_int_equal(t.total.p99, 8030);
    assert_near(t.span_s, 9, 1e-9);
    assert_near(t.mean_rps, 6.0 / 9, 1e-12);
    assert_true(isnan(t.p95_minute_rps)); /* shorter than a minute */
    st_traffic_advice a;
    st_traffic_engine e = { .kv_tokens = 100000, .max_model_len = 7000 };
    st_traffic_advise(s, &t, &e, &a);
    assert_int_equal(a.mml_p99, 8192);
    assert_near(a.reject_p99, 0, 0);
    /* input + output above 7000: rows 1, 2, 3 and 5 (7258, 7812, 8030, 7007) */
    assert_near(a.reject_current, 4.0 / 7, 1e-12);
    assert_int_equal(a.prefix, ST_PREFIX_SOME);
    assert_near(a.kv_fit_mean, 100000.0 / (t.total.mean), 1e-9);
    json_t *j = st_traffic_json(&t, &a, &c, ST_TRACE_MOONCAKE, "t");
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "format")), "mooncake");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "advice"), "max_model_len_p99")), 8192);
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "advice"), "prefix_caching")), "some");
    json_decref(j);
    st_trace_stats_free(s);
}

static void rates_and_burstiness(void **state)
{
    (void)state;
    /* 10 minutes at 2 req/s exactly, then one minute at 10 req/s: constant gaps inside each */
    st_buf b;
    st_buf_init(&b, 1 << 22);
    st_buf_puts(&b, "timestamp,input_tokens,output_tokens\n");
    double t0 = 1000;
    for (int i = 0; i < 1200; i++)
        st_buf_printf(&b, "%.3f,10,5\n", t0 + i * 0.5);
    for (int i = 0; i < 600; i++)
        st_buf_printf(&b, "%.3f,10,5\n", t0 + 600 + i * 0.1);
    st_buf_printf(&b, "%.3f,10,5\n", t0 + 661);
    st_trace_stats *s = stats_of(b.data, NULL);
    st_traffic t;
    st_trace_stats_result(s, &t);
    assert_int_equal(t.minutes, 11);
    assert_near(t.peak_minute_rps, 10, 1e-9);
    assert_near(t.p50_minute_rps, 2, 1e-9);
    assert_near(t.p95_minute_rps, 10, 1e-9);
    assert_near(t.mean_rps, 1800.0 / 661, 1e-9);
    assert_true(t.gap_cv > 0.5);
    st_trace_stats_free(s);
    /* Poisson arrivals: the CV of the gaps is about 1 */
    st_buf_reset(&b);
    st_buf_puts(&b, "timestamp,input_tokens,output_tokens\n");
    st_rng r;
    st_rng_seed(&r, 42);
    double ts = 0;
    for (int i = 0; i < 20000; i++) {
        ts += st_rng_exp(&r, 5);
        st_buf_printf(&b, "%.6f,%d,5\n", ts, 1 + i % 100);
    }
    s = stats_of(b.data, NULL);
    st_trace_stats_result(s, &t);
    assert_near(t.gap_cv, 1, 0.05);
    assert_near(t.gamma_shape, 1, 0.1);
    assert_near(t.mean_rps, 5, 0.25);
    assert_int_equal(t.in.p50, 50);
    assert_int_equal(t.in.p99, 99);
    assert_false(t.prefix_known);
    st_traffic_advice a;
    st_traffic_advise(s, &t, NULL, &a);
    assert_int_equal(a.prefix, ST_PREFIX_UNKNOWN);
    st_trace_stats_free(s);
    /* listed newest first (as a gateway lists its logs): the gaps are still measured */
    st_buf_reset(&b);
    st_buf_puts(&b, "timestamp,input_tokens,output_tokens\n");
    for (int i = 100; i > 0; i--)
        st_buf_printf(&b, "%d,5,5\n", i * 2);
    s = stats_of(b.data, NULL);
    st_trace_stats_result(s, &t);
    assert_near(t.gap_cv, 0, 1e-12); /* evenly spaced */
    assert_int_equal(t.out_of_order, 99);
    assert_near(t.mean_rps, 99.0 / 198, 1e-12);
    st_trace_stats_free(s);
    /* neither order: no burstiness figure */
    st_buf_reset(&b);
    st_buf_puts(&b, "timestamp,input_tokens,output_tokens\n");
    for (int i = 100; i > 0; i--)
        st_buf_printf(&b, "%d,5,5\n", i * (i % 3 + 1));
    s = stats_of(b.data, NULL);
    st_trace_stats_result(s, &t);
    assert_true(isnan(t.gap_cv)); /* neither ascending nor descending */
    assert_true(t.out_of_order > 0);
    st_trace_stats_free(s);
    st_buf_free(&b);
}

/* Evenly spaced arrivals (CV 0): the advice replays them with a constant schedule, not a gamma
 * shape of 1/0. */
static void evenly_spaced_arrivals(void **state)
{
    (void)state;
    const char *t4 = "{\"timestamp\": 0, \"input_tokens\": 100, \"output_tokens\": 10}\n"
                     "{\"timestamp\": 0.5, \"input_tokens\": 100, \"output_tokens\": 10}\n"
                     "{\"timestamp\": 1.0, \"input_tokens\": 100, \"output_tokens\": 10}\n"
                     "{\"timestamp\": 1.5, \"input_tokens\": 100, \"output_tokens\": 10}\n";
    st_trace_counts c;
    st_trace_stats *s = stats_of(t4, &c);
    st_traffic t;
    st_trace_stats_result(s, &t);
    assert_near(t.gap_cv, 0, 1e-12);
    st_traffic_advice a;
    st_traffic_engine e = { 0 };
    st_trace_stats_result(s, &t);
    st_traffic_advise(s, &t, &e, &a);
    int found = 0;
    for (int i = 0; i < a.n_lines; i++) {
        assert_null(strstr(a.lines[i], "nan"));
        found |= strstr(a.lines[i], "evenly spaced") && strstr(a.lines[i], "--arrival constant");
    }
    assert_true(found);
    st_trace_stats_free(s);
}

static void sessions_and_lengths(void **state)
{
    (void)state;
    /* two sessions; b has three turns: prompts 100, 100+20+10 = 130, 130+20+10 = 160 */
    const char *t = "{\"timestamp\": 0, \"session\": \"a\", \"input_tokens\": 64, \"output_tokens\": 8}\n"
                    "{\"timestamp\": 1, \"session\": \"b\", \"input_tokens\": 100, \"output_tokens\": 20}\n"
                    "{\"timestamp\": 5, \"session\": \"b\", \"input_tokens\": 10, \"output_tokens\": 20}\n"
                    "{\"timestamp\": 9, \"session\": \"b\", \"input_tokens\": 10, \"output_tokens\": 20}\n";
    st_trace_counts c;
    st_trace_stats *s = stats_of(t, &c);
    st_traffic tr;
    st_trace_stats_result(s, &tr);
    assert_int_equal(tr.sessions, 2);
    assert_int_equal(tr.later_turns, 2);
    assert_int_equal(tr.turns_max, 3);
    assert_near(tr.turns_mean, 2, 1e-12);
    assert_int_equal(tr.prompt_tokens, 64 + 100 + 130 + 160);
    /* ids of the first turns are hashed too (no overlap between a and b); later turns: the
     * history (previous prompt + answer) in whole 16-token blocks: 112 of 120, 144 of 150 */
    assert_int_equal(tr.hit_tokens, 112 + 144);
    /* shared: b's turns 1 and 2 whole, and turn 3's first 130 tokens */
    assert_int_equal(tr.shared_tokens, 100 + 130 + 130);
    st_trace_stats_free(s);
}

/* The advised --max-model-len never exceeds the model's own context: the Mooncake rows' p99 of
 * input + output (about 8,030 tokens) against a 4,096-token model is capped, said in words, and
 * the share it rejects is the rows above 4,096 tokens (5 of 7); without a context it is the p99. */
static void advice_capped_by_the_models_context(void **state)
{
    (void)state;
    st_trace_counts c;
    st_trace_stats *s = stats_of(mooncake, &c);
    st_traffic tr;
    st_trace_stats_result(s, &tr);
    st_traffic_advice a;
    st_traffic_engine e = { .max_model_len = 4096, .model_context = 4096 };
    st_traffic_advise(s, &tr, &e, &a);
    assert_true(a.mml_capped);
    assert_int_equal(a.mml_p99, 4096);
    assert_true(a.mml_p95 <= 4096);
    assert_near(a.reject_p99, 5.0 / 7, 1e-9);
    if (!strstr(a.lines[0], "above the model's context (4096 tokens)"))
        fail_msg("advice: %s", a.lines[0]);
    st_traffic_advise(s, &tr, NULL, &a);
    assert_false(a.mml_capped);
    assert_true(a.mml_p99 > 8000 && a.mml_p99 % ST_MML_ROUND == 0);
    if (!strstr(a.lines[0], "covers the p99"))
        fail_msg("advice: %s", a.lines[0]);
    st_trace_stats_free(s);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(prefix_shares_by_hand),
        cmocka_unit_test(rates_and_burstiness),
        cmocka_unit_test(evenly_spaced_arrivals),
        cmocka_unit_test(sessions_and_lengths),
        cmocka_unit_test(advice_capped_by_the_models_context),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}
