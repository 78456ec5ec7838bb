#include "harness.h"

#include <stdio.h>

#include "audit/capacity.h"

static st_audit_slo slo2(double ttft, double tpot)
{
    st_audit_slo s = { .n = 2 };
    s.terms[0] = (st_slo_term){ ST_SLO_TTFT, 95, ttft };
    s.terms[1] = (st_slo_term){ ST_SLO_TPOT, 95, tpot };
    return s;
}

/* The percentile as load/stats computes it: linear interpolation between closest ranks. */
static double pct_of(double *v, uint32_t n, double p)
{
    for (uint32_t i = 1; i < n; i++)
        for (uint32_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    double h = (n - 1) * p / 100.0;
    uint32_t lo = (uint32_t)floor(h), hi = lo + 1 < n ? lo + 1 : lo;
    return v[lo] + (h - lo) * (v[hi] - v[lo]);
}

static void breach_threshold_hand_values(void **state)
{
    (void)state;
    /* n=200: (199 x 0.95) = 189.05 -> 200 - 189 = 11 (5.5 %) */
    assert_int_equal(st_capacity_breach_threshold(200, 95), 11);
    assert_int_equal(st_capacity_breach_threshold(100, 95), 6);
    assert_int_equal(st_capacity_breach_threshold(20, 95), 2);
    assert_int_equal(st_capacity_breach_threshold(1, 95), 1);
    assert_int_equal(st_capacity_breach_threshold(101, 50), 51);
}

/* The threshold is exact: with k >= threshold breaches p95 exceeds the limit whatever the other
 * values; with one fewer some assignment keeps it within. */
static void breach_threshold_is_tight(void **state)
{
    (void)state;
    const double S = 100;
    for (uint32_t n = 1; n <= 300; n++) {
        uint32_t k = st_capacity_breach_threshold(n, 95);
        double v[300];
        /* worst case for "sure fail": breaches barely over, others zero */
        for (uint32_t i = 0; i < n; i++)
            v[i] = i < k ? S + 1e-6 : 0;
        if (!(pct_of(v, n, 95) > S))
            fail_msg("n=%u k=%u: p95 not above the limit", n, k);
        if (k == 0)
            continue;
        /* k-1 breaches just over the limit, the others zero: p95 stays within */
        for (uint32_t i = 0; i < n; i++)
            v[i] = i < k - 1 ? S * (1 + 1e-9) : 0;
        double p = pct_of(v, n, 95);
        if (p > S)
            fail_msg("n=%u: %u breaches already force p95 %.6f above %g: threshold too high", n, k - 1, p, S);
    }
}

static void sure_fail(void **state)
{
    (void)state;
    st_audit_slo s = slo2(1500, 50);
    uint32_t br[ST_SLO_MAX_TERMS] = { 10, 0 };
    assert_int_equal(st_capacity_sure_fail(&s, 200, br, 0), 0);
    br[0] = 11;
    assert_int_equal(st_capacity_sure_fail(&s, 200, br, 0), 1);
    br[0] = 0;
    br[1] = 11;
    assert_int_equal(st_capacity_sure_fail(&s, 200, br, 0), 1);
    br[1] = 0;
    assert_int_equal(st_capacity_sure_fail(&s, 200, br, 1), 1); /* a failed request fails the rate */
}

static void verdicts(void **state)
{
    (void)state;
    st_audit_slo s = slo2(1500, 50);
    st_verdict_info v;
    st_rate_figures f = { .planned = 200, .completed = 200, .value_ms = { 900, 45 } };
    st_capacity_verdict(&s, &f, &v);
    assert_int_equal(v.verdict, ST_VERDICT_PASS);
    assert_int_equal(v.term, 1);
    assert_near(v.worst_ratio, 0.9, 1e-12);

    f.value_ms[0] = 2250;
    st_capacity_verdict(&s, &f, &v);
    assert_int_equal(v.verdict, ST_VERDICT_FAIL);
    assert_int_equal(v.term, 0);
    assert_near(v.worst_ratio, 1.5, 1e-12);
    assert_non_null(strstr(v.why, "p95 TTFT 2250 ms > 1500 ms (x1.50)"));

    /* exactly at the limit passes (<=) */
    f.value_ms[0] = 1500;
    f.value_ms[1] = 50;
    st_capacity_verdict(&s, &f, &v);
    assert_int_equal(v.verdict, ST_VERDICT_PASS);

    /* one request not completed fails it, whatever the latency */
    f.completed = 199;
    f.failed = 1;
    st_capacity_verdict(&s, &f, &v);
    assert_int_equal(v.verdict, ST_VERDICT_FAIL);
    assert_true(isinf(v.worst_ratio));
    assert_non_null(strstr(v.why, "1 of 200 requests did not complete"));

    /* an extra term (p99 E2E) */
    st_audit_slo s3 = s;
    s3.terms[2] = (st_slo_term){ ST_SLO_E2E, 99, 20000 };
    s3.n = 3;
    st_rate_figures g = { .planned = 10, .completed = 10, .value_ms = { 100, 10, 25000 } };
    st_capacity_verdict(&s3, &g, &v);
    assert_int_equal(v.verdict, ST_VERDICT_FAIL);
    assert_int_equal(v.term, 2);
    assert_non_null(strstr(v.why, "p99 E2E"));

    /* stopped early: fails */
    st_rate_figures e = {
        .planned = 200, .completed = 50, .failed = 150, .value_ms = { 3000, 30 }, .stopped_early = 1
    };
    st_capacity_verdict(&s, &e, &v);
    assert_int_equal(v.verdict, ST_VERDICT_FAIL);
    assert_near(v.worst_ratio, 2.0, 1e-12);
}

/* Drives st_capacity_next against a made-up engine whose verdict at rate x is pass iff x <= cap,
 * with worst ratio x / cap. Returns the number of runs; fills the results. */
static int drive(const st_search_params *p, double cap, st_rate_result *r, int max, int *skips)
{
    int n = 0;
    *skips = 0;
    for (int guard = 0; guard < 100 && n < max; guard++) {
        st_next nx;
        st_capacity_next(p, r, n, &nx);
        if (nx.action == ST_NEXT_STOP)
            break;
        st_rate_result *x = &r[n++];
        memset(x, 0, sizeof *x);
        x->rate = nx.rate;
        x->grid = nx.grid;
        if (nx.action == ST_NEXT_SKIP) {
            x->verdict = ST_VERDICT_SKIPPED;
            (*skips)++;
            continue;
        }
        double delivered = isinf(nx.rate) ? cap * 1.2 : nx.rate;
        x->verdict = nx.rate <= cap ? ST_VERDICT_PASS : ST_VERDICT_FAIL;
        x->worst_ratio = isinf(nx.rate) ? 10 : nx.rate / cap;
        x->delivered_rps = delivered * 0.98;
        x->output_tps = x->delivered_rps * 300;
        x->requests = p->requests_per_rate;
    }
    return n;
}

static void grid_order_and_skip_after_wide_failure(void **state)
{
    (void)state;
    double rates[] = { 1, 2, 4, 8, 16, INFINITY };
    st_search_params p = { rates, 6, ST_SEARCH_GRID, 0.1, 0, 100, 2.0, 0 };
    st_rate_result r[64];
    int skips;
    /* capacity 3: 1, 2 pass; 4 fails by x1.33 (narrow: go on); 8 fails by x2.67 -> 16 and inf skipped */
    int n = drive(&p, 3, r, 64, &skips);
    assert_int_equal(n, 6);
    assert_int_equal(skips, 2);
    assert_int_equal(r[4].verdict, ST_VERDICT_SKIPPED);
    assert_true(r[4].rate == 16);
    st_capacity c;
    st_capacity_compute(r, n, 1, &c);
    assert_int_equal(c.has_pass, 1);
    assert_near(c.pass_rate, 2, 0);
    assert_near(c.capacity_rps, 1.96, 1e-12);
    assert_int_equal(c.has_fail_above, 1);
    assert_near(c.fail_rate, 4, 0);
    assert_int_equal(c.highest_tested_passed, 0);

    /* never skip: everything runs */
    p.skip_margin = 0;
    n = drive(&p, 3, r, 64, &skips);
    assert_int_equal(n, 6);
    assert_int_equal(skips, 0);
}

static void first_rate_failure_never_skips(void **state)
{
    (void)state;
    double rates[] = { 1, 2, 4 };
    st_search_params p = { rates, 3, ST_SEARCH_GRID, 0.1, 0, 100, 2.0, 0 };
    /* the first measured rate failed by x5 (a warm-up effect): the next rates still run */
    st_rate_result r[8] = { { .rate = 1, .verdict = ST_VERDICT_FAIL, .worst_ratio = 5, .grid = 1 } };
    st_next nx;
    st_capacity_next(&p, r, 1, &nx);
    assert_int_equal(nx.action, ST_NEXT_RUN);
    assert_near(nx.rate, 2, 0);
    r[1] = (st_rate_result){ .rate = 2, .verdict = ST_VERDICT_PASS, .delivered_rps = 1.9, .grid = 1 };
    r[2] = (st_rate_result){ .rate = 4, .verdict = ST_VERDICT_FAIL, .worst_ratio = 1.2, .grid = 1 };
    st_capacity_next(&p, r, 3, &nx);
    assert_int_equal(nx.action, ST_NEXT_STOP);
    st_capacity c;
    st_capacity_compute(r, 3, 1, &c);
    assert_int_equal(c.warmup_effect, 1);
    assert_int_equal(c.non_monotonic, 1);
    assert_near(c.pass_rate, 2, 0);
}

static void refine_bisects_to_tolerance(void **state)
{
    (void)state;
    double rates[] = { 2, 4, 8 };
    st_search_params p = { rates, 3, ST_SEARCH_REFINE, 0.1, 0, 100, 0, 0 };
    st_rate_result r[64];
    int skips;
    int n = drive(&p, 5.3, r, 64, &skips);
    /* grid: 2 pass, 4 pass, 8 fail; bisect [4,8] -> 6 fail, 5 pass, 5.5 fail: (5.5 - 5) / 5 <= 0.1 */
    assert_int_equal(n, 6);
    double want[] = { 2, 4, 8, 6, 5, 5.5 };
    for (int i = 0; i < 6; i++)
        assert_near(r[i].rate, want[i], 1e-12);
    st_capacity grid, ref;
    st_capacity_compute(r, n, 1, &grid);
    st_capacity_compute(r, n, 0, &ref);
    assert_near(grid.pass_rate, 4, 0);
    assert_near(grid.fail_rate, 8, 0);
    assert_near(ref.pass_rate, 5, 1e-12);
    assert_near(ref.fail_rate, 5.5, 1e-12);
    st_next nx;
    st_capacity_next(&p, r, n, &nx);
    assert_int_equal(nx.action, ST_NEXT_STOP);
    assert_non_null(strstr(nx.why, "within tolerance"));
}

/* Concurrency levels (fixed-count closed loops): refine bisects on whole levels, stops at
 * adjacent ones, and names them as levels, not req/s. */
static void refine_on_whole_levels(void **state)
{
    (void)state;
    double levels[] = { 1, 4, 16 };
    st_search_params p = { levels, 3, ST_SEARCH_REFINE, 0.01, 0, 100, 0, 1 };
    st_rate_result r[64];
    int skips;
    int n = drive(&p, 6.5, r, 64, &skips);
    /* grid: 1, 4 pass, 16 fails; bisect [4, 16] -> 10 fails, 7 fails, 5 passes, 6 passes: [6, 7] */
    double want[] = { 1, 4, 16, 10, 7, 5, 6 };
    assert_int_equal(n, 7);
    for (int i = 0; i < n; i++) {
        assert_near(r[i].rate, want[i], 0);
        assert_near(r[i].rate, floor(r[i].rate), 0);
    }
    st_next nx;
    st_capacity_next(&p, r, n, &nx);
    assert_int_equal(nx.action, ST_NEXT_STOP);
    assert_non_null(strstr(nx.why, "adjacent levels"));
    assert_null(strstr(nx.why, "req/s"));
    st_capacity_next(&p, r, 5, &nx); /* after 7 failed, 4 passed: bisect [4, 7] on levels */
    assert_int_equal(nx.action, ST_NEXT_RUN);
    assert_near(nx.rate, 5, 0);
    assert_null(strstr(nx.why, "req/s"));
}

static void refine_extends_upward_and_respects_budget(void **state)
{
    (void)state;
    double rates[] = { 1, 2 };
    /* budget 250 with 100 per rate: two added runs at most */
    st_search_params p = { rates, 2, ST_SEARCH_REFINE, 0.1, 250, 100, 0, 0 };
    st_rate_result r[64];
    int skips;
    int n = drive(&p, 100, r, 64, &skips);
    assert_int_equal(n, 4);
    assert_near(r[2].rate, 4, 0);
    assert_near(r[3].rate, 8, 0);
    assert_int_equal(r[3].grid, 0);
    st_next nx;
    st_capacity_next(&p, r, n, &nx);
    assert_int_equal(nx.action, ST_NEXT_STOP);
    assert_non_null(strstr(nx.why, "budget"));
    st_capacity c;
    st_capacity_compute(r, n, 0, &c);
    assert_int_equal(c.highest_tested_passed, 1);
    /* without a budget the added runs are capped */
    p.request_budget = 0;
    n = drive(&p, 1e12, r, 64, &skips);
    assert_int_equal(n, 2 + ST_REFINE_MAX_RUNS);
}

static void refine_below_failed_unlimited_rate(void **state)
{
    (void)state;
    double rates[] = { 2, INFINITY };
    st_search_params p = { rates, 2, ST_SEARCH_REFINE, 0.1, 0, 100, 0, 0 };
    st_rate_result r[64];
    int skips;
    /* cap 5: inf delivers 6 x 0.98 = 5.88; bisect [2, 5.88] */
    int n = drive(&p, 5, r, 64, &skips);
    assert_true(n > 2);
    assert_near(r[2].rate, (2 + 5.88) / 2, 1e-9);
    st_capacity c;
    st_capacity_compute(r, n, 0, &c);
    assert_true(c.pass_rate <= 5);
    assert_true(c.pass_rate > 4.4);
}

static void nothing_passed(void **state)
{
    (void)state;
    double rates[] = { 1, 2 };
    st_search_params p = { rates, 2, ST_SEARCH_REFINE, 0.1, 0, 100, 2, 0 };
    st_rate_result r[8];
    int skips;
    int n = drive(&p, 0.5, r, 8, &skips);
    assert_int_equal(n, 2);
    st_capacity c;
    st_capacity_compute(r, n, 0, &c);
    assert_int_equal(c.has_pass, 0);
    assert_true(isnan(c.capacity_rps));
    st_next nx;
    st_capacity_next(&p, r, n, &nx);
    assert_int_equal(nx.action, ST_NEXT_STOP);
    assert_non_null(strstr(nx.why, "no rate passed"));
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(breach_threshold_hand_values),
        cmocka_unit_test(breach_threshold_is_tight),
        cmocka_unit_test(sure_fail),
        cmocka_unit_test(verdicts),
        cmocka_unit_test(grid_order_and_skip_after_wide_failure),
        cmocka_unit_test(first_rate_failure_never_skips),
        cmocka_unit_test(refine_bisects_to_tolerance),
        cmocka_unit_test(refine_on_whole_levels),
        cmocka_unit_test(refine_extends_upward_and_respects_budget),
        cmocka_unit_test(refine_below_failed_unlimited_rate),
        cmocka_unit_test(nothing_passed),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
