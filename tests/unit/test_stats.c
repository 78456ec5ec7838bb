#include "harness.h"

#include "load/stats.h"

#define MS(x) ((st_ns)(x)*ST_NS_PER_MS)

static void percentiles_hand_computed(void **state)
{
    (void)state;
    double v[10];
    for (int i = 0; i < 10; i++)
        v[i] = i + 1;
    assert_near(st_percentile_sorted(v, 10, 50), 5.5, 1e-12);
    assert_near(st_percentile_sorted(v, 10, 90), 9.1, 1e-12);
    assert_near(st_percentile_sorted(v, 10, 99), 9.91, 1e-12);
    assert_near(st_percentile_sorted(v, 10, 0), 1, 0);
    assert_near(st_percentile_sorted(v, 10, 100), 10, 0);
    assert_near(st_percentile_sorted(v, 10, 25), 3.25, 1e-12);
    assert_near(st_percentile_sorted(v, 1, 99), 1, 0);
    assert_true(isnan(st_percentile_sorted(v, 0, 50)));
    double two[2] = { 0, 10 };
    assert_near(st_percentile_sorted(two, 2, 95), 9.5, 1e-12);
}

static void dist_unsorted_with_nans(void **state)
{
    (void)state;
    double v[] = { 7, NAN, 3, 10, 1, NAN, 5, 2, 9, 4, 8, 6 };
    st_dist d;
    st_dist_compute(v, 12, &d);
    assert_int_equal(d.n, 10);
    assert_near(d.mean, 5.5, 1e-12);
    assert_near(d.min, 1, 0);
    assert_near(d.max, 10, 0);
    assert_near(d.p50, 5.5, 1e-12);
    assert_near(d.p90, 9.1, 1e-12);
    assert_near(d.p95, 9.55, 1e-12);
    assert_near(d.p99, 9.91, 1e-12);
    st_dist e;
    st_dist_compute(v, 0, &e);
    assert_int_equal(e.n, 0);
    assert_true(isnan(e.p50) && isnan(e.mean));
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Many values: percentiles by selection equal the sorted ones, duplicates and ties included. */
static void dist_by_selection_equals_sorting(void **state)
{
    (void)state;
    enum { MAXN = 5000 };
    double *v = malloc(sizeof *v * MAXN), *s = malloc(sizeof *s * MAXN);
    uint64_t x = 12345;
    for (int round = 0; round < 60; round++) {
        uint32_t n = 256 + (uint32_t)(round * 79) % (MAXN - 256);
        for (uint32_t i = 0; i < n; i++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            /* few distinct values in some rounds (ties), a wide spread in others */
            v[i] = round % 3 == 0 ? (double)((x >> 33) % 7) : (double)(x >> 11) / 1e6;
            s[i] = v[i];
        }
        qsort(s, n, sizeof *s, cmp_d);
        st_dist d;
        st_dist_compute(v, n, &d);
        assert_int_equal(d.n, n);
        assert_near(d.p50, st_percentile_sorted(s, n, 50), 0);
        assert_near(d.p90, st_percentile_sorted(s, n, 90), 0);
        assert_near(d.p95, st_percentile_sorted(s, n, 95), 0);
        assert_near(d.p99, st_percentile_sorted(s, n, 99), 0);
        assert_near(d.min, s[0], 0);
        assert_near(d.max, s[n - 1], 0);
    }
    free(v);
    free(s);
}

/* The hand-built run described in the comments: one warm-up, three completed, one failed. */
static st_record recs[5];

static void add_events(st_record *r, const int *ms, int n)
{
    for (int i = 0; i < n; i++)
        assert_int_equal(st_record_add_event(r, MS(ms[i])), 0);
}

static int setup_records(void **state)
{
    (void)state;
    for (uint32_t i = 0; i < 5; i++)
        st_record_init(&recs[i], i);
    /* r0: warm-up, excluded everywhere. */
    recs[0].warmup = 1;
    recs[0].scheduled = 0, recs[0].sent = 0, recs[0].first_token = MS(10), recs[0].end = MS(50);
    recs[0].output_tokens = 100, recs[0].input_tokens = 1000;
    int e0[] = { 10, 50 };
    add_events(&recs[0], e0, 2);
    /* r1: sched 0, ttft 0.1, 5 tokens at 100..500 ms. */
    recs[1].scheduled = 0, recs[1].sent = MS(1), recs[1].first_token = MS(100), recs[1].end = MS(500);
    recs[1].input_tokens = 10, recs[1].output_tokens = 5, recs[1].output_requested = 5;
    int e1[] = { 100, 200, 300, 400, 500 };
    add_events(&recs[1], e1, 5);
    /* r2: sched 1 s, ttft 0.3, 3 tokens. */
    recs[2].scheduled = MS(1000), recs[2].sent = MS(1002), recs[2].first_token = MS(1300), recs[2].end = MS(1700);
    recs[2].input_tokens = 20, recs[2].output_tokens = 3, recs[2].output_requested = 3, recs[2].cached_tokens = 16;
    int e2[] = { 1300, 1500, 1700 };
    add_events(&recs[2], e2, 3);
    /* r3: sched 2 s, failed with HTTP 500 at 2.1 s. */
    recs[3].scheduled = MS(2000), recs[3].sent = MS(2001), recs[3].end = MS(2100);
    recs[3].input_tokens = 40, recs[3].output_requested = 4;
    st_record_set_error(&recs[3], ST_REQ_HTTP_STATUS, "boom", 4);
    recs[3].http_status = 500;
    /* r4: sched 3 s (the last arrival), ttft 0.2, 2 tokens, ends in the drain at 4 s. */
    recs[4].scheduled = MS(3000), recs[4].sent = MS(3005), recs[4].first_token = MS(3200), recs[4].end = MS(4000);
    recs[4].input_tokens = 30, recs[4].output_tokens = 2, recs[4].output_requested = 3;
    int e4[] = { 3200, 4000 };
    add_events(&recs[4], e4, 2);
    return 0;
}

static int teardown_records(void **state)
{
    (void)state;
    for (int i = 0; i < 5; i++)
        st_record_free(&recs[i]);
    return 0;
}

/* TPOT of a record: per token after the first; undefined when every token came at once (a
 * non-streaming answer), not zero. */
static void tpot_undefined_without_streaming(void **state)
{
    (void)state;
    st_record r;
    st_record_init(&r, 0);
    r.scheduled = r.sent = 0;
    r.first_token = r.first_byte = 100 * ST_NS_PER_MS;
    r.end = 100 * ST_NS_PER_MS + 49 * 10 * ST_NS_PER_MS;
    r.output_tokens = 50;
    assert_near(st_record_tpot(&r), 0.010, 1e-12);
    r.end = r.first_token; /* the whole answer at once */
    assert_true(isnan(st_record_tpot(&r)));
    st_record_free(&r);
}

static void summary_whole_run(void **state)
{
    (void)state;
    st_summary_opts o = { .slo = { .ttft_s = 0.25, .tpot_s = 0.5 } };
    st_summary s;
    assert_int_equal(st_summary_compute(recs, 5, &o, &s), 0);
    assert_int_equal(s.total, 5);
    assert_int_equal(s.warmup, 1);
    assert_int_equal(s.measured, 4);
    assert_int_equal(s.sent, 4);
    assert_int_equal(s.completed, 3);
    assert_int_equal(s.failed, 1);
    assert_int_equal(s.by_status[ST_REQ_HTTP_STATUS], 1);
    assert_int_equal(s.by_status[ST_REQ_OK], 3);
    assert_near(s.first_send_s, 0.001, 1e-12);
    assert_near(s.last_end_s, 4.0, 1e-12);
    assert_near(s.duration_s, 3.999, 1e-12);
    assert_near(s.offered_rate, 3.0 / 3.0, 1e-12);
    assert_near(s.achieved_rate, 3.0 / 3.004, 1e-12);
    assert_true(s.input_tokens == 60 && s.output_tokens == 10 && s.cached_tokens == 16);
    assert_int_equal(s.output_requested_short, 1);
    assert_near(s.request_throughput, 3 / 3.999, 1e-12);
    assert_near(s.output_throughput, 10 / 3.999, 1e-12);
    assert_near(s.input_throughput, 60 / 3.999, 1e-12);
    assert_near(s.total_token_throughput, 70 / 3.999, 1e-12);
    /* TTFT 0.1, 0.3, 0.2 */
    assert_int_equal(s.ttft.n, 3);
    assert_near(s.ttft.mean, 0.2, 1e-12);
    assert_near(s.ttft.p50, 0.2, 1e-12);
    assert_near(s.ttft.p90, 0.28, 1e-12);
    assert_near(s.ttft.max, 0.3, 1e-12);
    /* TPOT 0.1, 0.2, 0.8 */
    assert_near(s.tpot.mean, 1.1 / 3, 1e-12);
    assert_near(s.tpot.p50, 0.2, 1e-12);
    assert_near(s.tpot.max, 0.8, 1e-12);
    /* ITL: 0.1 x4, 0.2 x2, 0.8 */
    assert_int_equal(s.itl.n, 7);
    assert_near(s.itl.mean, 1.6 / 7, 1e-12);
    assert_near(s.itl.p50, 0.1, 1e-12);
    assert_near(s.itl.p90, 0.2 + 0.4 * 0.6, 1e-12); /* h = 5.4 */
    assert_near(s.itl.max, 0.8, 1e-12);
    /* E2E 0.5, 0.7, 1.0 */
    assert_near(s.e2e.mean, 2.2 / 3, 1e-12);
    assert_near(s.e2e.p50, 0.7, 1e-12);
    /* Lag over every sent measured request: 1, 2, 1, 5 ms. */
    assert_int_equal(s.lag.n, 4);
    assert_near(s.lag.max, 0.005, 1e-12);
    assert_near(s.lag.p50, 0.0015, 1e-12);
    /* Goodput: only r1 meets TTFT <= 0.25 and TPOT <= 0.5. */
    assert_true(s.slo_set);
    assert_int_equal(s.good, 1);
    assert_near(s.goodput, 1 / 3.999, 1e-12);
    assert_false(s.client_limited);
    assert_int_equal(s.srv_prompt.n, 0); /* no server timings reported */
    assert_true(isnan(s.srv_ttft_gap.p50));
}

/* Server-reported timings (llama.cpp) against the client's figures. */
static void summary_server_timings(void **state)
{
    (void)state;
    /* r1: TTFT 100 ms, TPOT 100 ms (5 tokens over 400 ms); the server: prompt 60 ms, 4 steps in 380 ms */
    recs[1].srv_prompt = MS(60), recs[1].srv_gen = MS(380), recs[1].srv_gen_n = 5;
    /* r2: TTFT 300 ms, TPOT 200 ms; the server: prompt 100 ms, 2 steps in 390 ms */
    recs[2].srv_prompt = MS(100), recs[2].srv_gen = MS(390), recs[2].srv_gen_n = 3;
    /* r3 failed: its timings do not count; r0 is a warm-up */
    recs[3].srv_prompt = MS(5), recs[3].srv_gen = MS(5), recs[3].srv_gen_n = 2;
    recs[0].srv_prompt = MS(1), recs[0].srv_gen = MS(1), recs[0].srv_gen_n = 2;
    assert_near(st_record_srv_ttft_gap(&recs[1]), 0.04, 1e-12);
    assert_near(st_record_srv_tpot(&recs[1]), 0.095, 1e-12);
    assert_near(st_record_srv_tpot_gap(&recs[1]), 0.005, 1e-12);
    assert_true(isnan(st_record_srv_ttft_gap(&recs[4])));
    st_summary s;
    assert_int_equal(st_summary_compute(recs, 5, NULL, &s), 0);
    assert_int_equal(s.srv_prompt.n, 2);
    assert_near(s.srv_prompt.p50, 0.08, 1e-12);
    assert_int_equal(s.srv_ttft_gap.n, 2);
    assert_near(s.srv_ttft_gap.min, 0.04, 1e-12);
    assert_near(s.srv_ttft_gap.max, 0.2, 1e-12);
    assert_near(s.srv_tpot.max, 0.195, 1e-12);
    assert_near(s.srv_tpot_gap.p50, 0.005, 1e-12);
    /* a server that counts one token: no per-step time */
    recs[2].srv_gen_n = 1;
    assert_true(isnan(st_record_srv_tpot(&recs[2])));
    assert_true(isnan(st_record_srv_tpot_gap(&recs[2])));
}

static void summary_steady_window(void **state)
{
    (void)state;
    st_summary_opts o = { .slo = { .ttft_s = 0.25, .tpot_s = 0.5 } };
    st_summary s;
    assert_int_equal(st_summary_compute(recs, 5, &o, &s), 0);
    const st_window *w = &s.steady;
    assert_true(w->valid);
    assert_near(w->start_s, 0, 0);
    assert_near(w->end_s, 3.0, 1e-12);
    assert_near(w->duration_s, 3.0, 1e-12);
    assert_int_equal(w->completed, 2); /* r1, r2; r4 ends in the drain */
    assert_int_equal(w->failed, 1);
    assert_int_equal(w->good, 1);
    assert_true(w->input_tokens == 30);
    assert_near(w->output_tokens, 8, 1e-12);
    assert_near(w->request_throughput, 2 / 3.0, 1e-12);
    assert_near(w->output_throughput, 8 / 3.0, 1e-12);
    assert_near(w->goodput, 1 / 3.0, 1e-12);
    assert_int_equal(w->ttft.n, 2);
    assert_near(w->ttft.mean, 0.2, 1e-12);
    assert_int_equal(w->itl.n, 6);
    assert_near(w->itl.max, 0.2, 1e-12);
    assert_int_equal(w->lag.n, 3);
    assert_near(w->lag.max, 0.002, 1e-12);
}

static void summary_options_and_edges(void **state)
{
    (void)state;
    st_summary s;
    /* No opts: no SLO, every completed request is "good"; no lag check. */
    assert_int_equal(st_summary_compute(recs, 5, NULL, &s), 0);
    assert_false(s.slo_set);
    assert_int_equal(s.good, 3);
    assert_false(s.client_limited);
    /* Lag check: p99 of 1,1,2,5 ms is 4.91 ms. */
    st_summary_opts o = { .max_lag_p99_s = 0.004 };
    st_summary_compute(recs, 5, &o, &s);
    assert_true(s.client_limited);
    o.max_lag_p99_s = 0.005;
    st_summary_compute(recs, 5, &o, &s);
    assert_false(s.client_limited);
    /* E2E term. */
    st_summary_opts e = { .slo = { .e2e_s = 0.6 } };
    st_summary_compute(recs, 5, &e, &s);
    assert_int_equal(s.good, 1);
    assert_true(st_slo_met(&recs[1], &e.slo));
    assert_false(st_slo_met(&recs[3], &e.slo));
    /* Only the warm-up: nothing measured, figures NAN, no crash. */
    assert_int_equal(st_summary_compute(recs, 1, NULL, &s), 0);
    assert_int_equal(s.measured, 0);
    assert_true(isnan(s.duration_s) && isnan(s.offered_rate) && isnan(s.request_throughput));
    assert_int_equal(s.ttft.n, 0);
    assert_false(s.steady.valid);
    /* All at once (rate inf): offered rate is infinite and there is no steady window. */
    st_record two[2];
    st_record_init(&two[0], 0);
    st_record_init(&two[1], 1);
    for (int i = 0; i < 2; i++) {
        two[i].scheduled = 0, two[i].sent = MS(i), two[i].first_token = MS(10), two[i].end = MS(20);
        two[i].output_tokens = 1;
    }
    assert_int_equal(st_summary_compute(two, 2, NULL, &s), 0);
    assert_true(isinf(s.offered_rate));
    assert_near(s.achieved_rate, 1000, 1e-9);
    assert_false(s.steady.valid);
    assert_true(isnan(s.tpot.p50)); /* one token: no TPOT */
    assert_int_equal(s.completed, 2);
    /* A request never sent counts as failed and has no lag. */
    two[1].sent = two[1].first_token = two[1].end = -1;
    two[1].status = ST_REQ_ABORTED;
    st_summary_compute(two, 2, NULL, &s);
    assert_int_equal(s.sent, 1);
    assert_int_equal(s.failed, 1);
    assert_int_equal(s.lag.n, 1);
    assert_true(isnan(s.achieved_rate));
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(percentiles_hand_computed),
        cmocka_unit_test(tpot_undefined_without_streaming),
        cmocka_unit_test(dist_unsorted_with_nans),
        cmocka_unit_test(dist_by_selection_equals_sorting),
        cmocka_unit_test_setup_teardown(summary_whole_run, setup_records, teardown_records),
        cmocka_unit_test_setup_teardown(summary_server_timings, setup_records, teardown_records),
        cmocka_unit_test_setup_teardown(summary_steady_window, setup_records, teardown_records),
        cmocka_unit_test_setup_teardown(summary_options_and_edges, setup_records, teardown_records),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
