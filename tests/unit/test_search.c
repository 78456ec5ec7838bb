/* audit/capacity: the sustained search (st_sustained_next) and its answer (st_capacity_sustained)
 * on synthetic servers whose capacity is known, without running anything: each "run" at a rate is
 * made from a closed-form truth.
 *   smooth: p95 TTFT = limit x exp(3 (rate - c) / c), so the margin ln(limit / p95) falls
 *           smoothly through 0 at c; the search must interpolate (boundary smooth, TTFT binds),
 *           put c inside its interval and stop within the tolerance;
 *   cliff:  within the SLO with room below c, over-saturated above; the search bisects (boundary
 *           cliff, over-saturation binds) to a bracket around c within the tolerance;
 *   from a forecast: starts near it and needs fewer runs than from the grid;
 *   the bounds: max_runs and the request budget end the search; a not-confident call is
 *   replicated up to max_replicates; an undecided run is never a pass; the binding term of a
 *   bracket whose fail end is undecided comes from the failure above it. */
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

static const double grid[] = { 1, 2, 4, 8, 16, 32, 64 };

static st_sustained_params params(const st_audit_slo *slo, double forecast)
{
    return (st_sustained_params){ .grid = grid,
                                  .n_grid = 7,
                                  .forecast = forecast,
                                  .tolerance = 0.1,
                                  .confidence = 0.95,
                                  .max_runs = 20,
                                  .max_replicates = 3,
                                  .min_run_requests = 100,
                                  .slo = slo };
}

/* The window's fraction of values above limit for a term whose p95 is value: 5 % at the limit,
 * falling as (value / limit)^3 (a light tail). */
static st_exceed exceed_of(double value, double limit, uint32_t n)
{
    double f = 0.05 * pow(value / limit, 3);
    uint32_t k = (uint32_t)llround((f > 1 ? 1 : f) * n);
    if (value > limit && k <= n / 20) /* counts agree with the side of the limit */
        k = n / 20 + 1;
    if (value <= limit && k > n / 20)
        k = n / 20;
    f = (double)k / n;
    st_exceed e = { .n = n, .k = k, .frac = f, .se = sqrt(f * (1 - f) / n) + 1e-4, .dof = 7 };
    return e;
}

typedef enum shape { SMOOTH, CLIFF, UNSURE } shape;

/* Rates below this are undecided: their window does not fit within max_duration. */
static double undecided_below = 0;

/* One run at rate of a server of capacity c. */
static st_rate_result run_at(const st_audit_slo *slo, shape sh, double c, double rate)
{
    st_rate_result r;
    memset(&r, 0, sizeof r);
    r.rate = rate;
    r.sustained = 1;
    r.requests = 400;
    r.engine_s = 120;
    r.n_terms = 2;
    r.delivered_rps = r.sustained_rps = rate;
    r.output_tps = rate * 100;
    r.run_delivered_rps = NAN;
    if (rate < undecided_below) {
        r.verdict = ST_VERDICT_UNDECIDED;
        r.n_terms = 0;
        return r;
    }
    double ttft = sh == SMOOTH ? slo->terms[0].max_ms * exp(3 * (rate - c) / c) : slo->terms[0].max_ms * 0.3;
    if (sh == UNSURE) /* right at the limit: never a confident call */
        ttft = slo->terms[0].max_ms * (rate <= c ? 0.995 : 1.005);
    double tpot = slo->terms[1].max_ms * 0.2;
    if (sh == CLIFF && rate > c) {
        r.verdict = ST_VERDICT_OVERSAT;
        r.confident = 1;
        r.stopped_early = 1;
        r.engine_s = 40;
        r.delivered_rps = NAN;
        r.run_delivered_rps = c;
        r.n_terms = 0;
        return r;
    }
    double v[2] = { ttft, tpot };
    for (int t = 0; t < 2; t++) {
        r.value_ms[t] = v[t];
        r.lo_ms[t] = v[t] * 0.97;
        r.hi_ms[t] = v[t] * 1.03;
        r.ex[t] = exceed_of(v[t], slo->terms[t].max_ms, 400);
    }
    int holds = ttft <= slo->terms[0].max_ms;
    r.verdict = holds ? ST_VERDICT_PASS : ST_VERDICT_FAIL;
    r.confident = sh != UNSURE && fabs(log(ttft / slo->terms[0].max_ms)) > 0.02;
    return r;
}

/* The search until it stops; returns the runs made. */
static int search(const st_sustained_params *p, shape sh, double c, st_rate_result *r, int max)
{
    int n = 0;
    for (;;) {
        st_next nx;
        st_sustained_next(p, r, n, &nx);
        if (nx.action == ST_NEXT_STOP || n >= max)
            break;
        assert_int_equal(nx.action, ST_NEXT_RUN);
        assert_true(nx.rate > 0 && isfinite(nx.rate));
        r[n] = run_at(p->slo, sh, c, nx.rate);
        r[n].replicate = nx.replicate;
        n++;
    }
    return n;
}

static void smooth_boundary_is_interpolated(void **state)
{
    (void)state;
    st_audit_slo slo = slo2(1000, 50);
    const double caps[] = { 1.7, 5.3, 11, 23 };
    for (size_t i = 0; i < sizeof caps / sizeof *caps; i++) {
        st_sustained_params p = params(&slo, 0);
        st_rate_result r[64];
        int n = search(&p, SMOOTH, caps[i], r, 64);
        st_capacity k;
        st_capacity_sustained(&p, r, n, &k);
        print_message("# smooth c %g: capacity %.4g, interval %.4g-%.4g, bracket %.4g-%.4g, %d runs\n", caps[i],
                      k.capacity_rps, k.ci_lo, k.ci_hi, k.pass_rate, k.fail_rate, n);
        assert_true(k.has_pass && k.has_fail_above);
        assert_true(k.pass_rate <= caps[i] && caps[i] <= k.fail_rate);
        assert_true(k.within_tolerance);
        assert_false(k.cliff);
        assert_int_equal(k.binding, 0);
        assert_true(k.ci_lo <= caps[i] * 1.02 && caps[i] <= k.ci_hi * 1.02);
        assert_true(n <= p.max_runs);
        assert_int_equal(k.runs, n);
    }
}

static void cliff_is_bisected(void **state)
{
    (void)state;
    st_audit_slo slo = slo2(1000, 50);
    const double caps[] = { 3.3, 9.1, 40 };
    for (size_t i = 0; i < sizeof caps / sizeof *caps; i++) {
        st_sustained_params p = params(&slo, 0);
        st_rate_result r[64];
        int n = search(&p, CLIFF, caps[i], r, 64);
        st_capacity k;
        st_capacity_sustained(&p, r, n, &k);
        print_message("# cliff c %g: capacity %.4g, bracket %.4g-%.4g, %d runs, max throughput %.4g\n", caps[i],
                      k.capacity_rps, k.pass_rate, k.fail_rate, n, k.max_throughput_rps);
        assert_true(k.pass_rate <= caps[i] && caps[i] < k.fail_rate);
        assert_true(k.within_tolerance);
        assert_true(k.cliff);
        assert_int_equal(k.binding, -1);
        assert_true(k.binding_oversat);
        /* the interval of a cliff is the bracket; max throughput from the over-saturated runs */
        assert_true(k.ci_lo == k.pass_rate && k.ci_hi == k.fail_rate);
        assert_true(fabs(k.max_throughput_rps - caps[i]) < 1e-9);
    }
}

static void forecast_saves_runs(void **state)
{
    (void)state;
    st_audit_slo slo = slo2(1000, 50);
    st_sustained_params p = params(&slo, 0);
    st_rate_result r[64];
    int from_grid = search(&p, CLIFF, 13, r, 64);
    p.forecast = 12.5; /* a forecast within 5 % */
    int from_forecast = search(&p, CLIFF, 13, r, 64);
    st_capacity k;
    st_capacity_sustained(&p, r, from_forecast, &k);
    print_message("# from the grid %d runs, from a forecast %d\n", from_grid, from_forecast);
    assert_true(k.pass_rate <= 13 && 13 < k.fail_rate && k.within_tolerance);
    assert_true(from_forecast < from_grid);
    /* the first run is near the forecast, not at the grid's middle */
    assert_true(fabs(r[0].rate / 12.5 - 1) < 0.1);
}

static void bounds_end_the_search(void **state)
{
    (void)state;
    st_audit_slo slo = slo2(1000, 50);
    st_sustained_params p = params(&slo, 0);
    st_rate_result r[64];
    p.max_runs = 3;
    assert_int_equal(search(&p, SMOOTH, 7, r, 64), 3);
    p = params(&slo, 0);
    p.request_budget = 1000; /* runs of 400: a third starts with 200 left (over a run's minimum of 100) */
    int n = search(&p, SMOOTH, 7, r, 64);
    assert_true(n <= 3);
    /* a call that is never confident is replicated, at most max_replicates runs per rate */
    p = params(&slo, 0);
    n = search(&p, UNSURE, 7, r, 64);
    st_capacity k;
    st_capacity_sustained(&p, r, n, &k);
    int at_pass = 0, at_fail = 0;
    for (int i = 0; i < n; i++) {
        at_pass += r[i].rate == k.pass_rate;
        at_fail += r[i].rate == k.fail_rate;
    }
    print_message("# not confident: %d runs at the pass, %d at the failure\n", at_pass, at_fail);
    assert_true(at_pass == p.max_replicates || at_fail == p.max_replicates);
    assert_true(at_pass <= p.max_replicates && at_fail <= p.max_replicates);
    assert_false(k.pass_sure && k.fail_sure);
}

/* Pass at 6, undecided at 6.5 (its bound), TPOT missed early at 7.1: the bracket is [6, 6.5] (an
 * undecided run is no pass), the interval reaches 7.1 (the undecided end is no confident failure),
 * and TPOT binds (from the failure above the undecided end). */
static void undecided_end_is_no_pass(void **state)
{
    (void)state;
    st_audit_slo slo = slo2(1500, 50);
    st_sustained_params p = params(&slo, 0);
    st_rate_result r[3];
    r[0] = run_at(&slo, CLIFF, 100, 6);
    r[1] = run_at(&slo, CLIFF, 100, 6.5);
    r[1].verdict = ST_VERDICT_UNDECIDED;
    r[1].confident = 0;
    r[2] = run_at(&slo, CLIFF, 100, 7.1);
    r[2].verdict = ST_VERDICT_FAIL;
    r[2].stopped_early = 1;
    r[2].value_ms[1] = 74;
    st_capacity k;
    st_capacity_sustained(&p, r, 3, &k);
    assert_true(k.pass_rate == 6 && k.fail_rate == 6.5);
    assert_false(k.fail_sure);
    /* the reports word the bracket's end as the search's log does: undecided, not failed */
    assert_true(k.fail_undecided);
    assert_string_equal(st_capacity_fail_word(&k), "undecided");
    assert_true(k.ci_hi == 7.1);
    assert_int_equal(k.binding, 1);
    assert_true(k.cliff);
}

/* Replicates pool their verdict: a first run just over the limit (not confident) and a replicate
 * under it pass together, and the figures shown at capacity are the passing run's, never the
 * run that was over the SLO. */
static void pooled_pass_shows_a_passing_run(void **state)
{
    (void)state;
    st_audit_slo slo = slo2(1500, 50);
    st_sustained_params p = params(&slo, 0);
    st_rate_result r[3];
    r[0] = run_at(&slo, SMOOTH, 8, 7.9);
    r[0].value_ms[0] = 1501; /* just over: a not-confident failure, few requests over */
    r[0].ex[0] = (st_exceed){ .n = 400, .k = 21, .frac = 21.0 / 400, .se = 0.011, .dof = 7 };
    r[0].verdict = ST_VERDICT_FAIL;
    r[0].confident = 0;
    r[1] = run_at(&slo, SMOOTH, 8, 7.9);
    r[1].value_ms[0] = 1400;
    r[1].ex[0] = (st_exceed){ .n = 400, .k = 12, .frac = 12.0 / 400, .se = 0.009, .dof = 7 };
    r[1].verdict = ST_VERDICT_PASS;
    r[2] = run_at(&slo, CLIFF, 8, 9);
    st_capacity k;
    st_capacity_sustained(&p, r, 3, &k);
    assert_true(k.has_pass);
    assert_true(k.pass_rate == 7.9);
    assert_int_equal(k.pass_index, 1);
    assert_true(r[k.pass_index].value_ms[0] <= 1500);
}

/* Output tok/s at capacity rests on the capacity, not on the arrivals a window happened to get
 * (with sessions, on the requests the windows delivered):
 * two replicates at 7.9 req/s whose windows delivered 7.2 and 8.4 req/s of 300-token answers
 * (2,160 and 2,520 tok/s) give 7.9 x 300 tok/s; without the per-request figure (a database
 * written before it) the windows' mean rate stands. */
static void output_tps_rests_on_the_capacity(void **state)
{
    (void)state;
    st_audit_slo slo = slo2(1500, 50);
    st_sustained_params p = params(&slo, 0);
    st_rate_result r[3];
    r[0] = run_at(&slo, SMOOTH, 8, 7.9);
    r[0].delivered_rps = r[0].sustained_rps = 7.2;
    r[0].output_tps = 7.2 * 300;
    r[0].out_tokens_mean = 301;
    r[1] = run_at(&slo, SMOOTH, 8, 7.9);
    r[1].delivered_rps = r[1].sustained_rps = 8.4;
    r[1].output_tps = 8.4 * 300;
    r[1].out_tokens_mean = 299;
    r[2] = run_at(&slo, CLIFF, 8, 9);
    st_capacity k;
    st_capacity_sustained(&p, r, 3, &k);
    assert_true(k.has_pass && k.pass_rate == 7.9 && k.capacity_rps == 7.9);
    assert_near(k.output_tps, 7.9 * 300, 1e-9);
    assert_near(k.sustained_rps, 7.8, 1e-9); /* the windows' own figure stays as evidence */
    /* multi-turn sessions: the rate counts session starts, the tokens come with the requests the
     * windows delivered (7.8 req/s of them) */
    p.sessions = 1;
    st_capacity_sustained(&p, r, 3, &k);
    assert_true(k.capacity_rps == 7.9);
    assert_near(k.output_tps, 7.8 * 300, 1e-9);
    assert_near(k.out_tokens_mean, 300, 1e-9);
    p.sessions = 0;
    r[0].out_tokens_mean = r[1].out_tokens_mean = NAN;
    st_capacity_sustained(&p, r, 3, &k);
    assert_near(k.output_tps, 7.8 * 300, 1e-9);
}

/* A failure that is not confident leaves the limit interval open above it (up to the next
 * higher rate tried, or without bound): the interpolated margins cannot claim a confidence the
 * call itself does not have; a confident one bounds it. */
static void unsure_failure_opens_the_interval(void **state)
{
    (void)state;
    st_audit_slo slo = slo2(1500, 50);
    st_sustained_params p = params(&slo, 0);
    st_rate_result r[2];
    r[0] = run_at(&slo, SMOOTH, 8, 7.5);
    r[1] = run_at(&slo, UNSURE, 8, 8.2);
    st_capacity k;
    st_capacity_sustained(&p, r, 2, &k);
    print_message("# unsure failure: pass %g fail %g (sure %d), limit %g-%g\n", k.pass_rate, k.fail_rate, k.fail_sure,
                  k.ci_lo, k.ci_hi);
    assert_true(k.has_pass && k.pass_rate == 7.5 && k.fail_rate == 8.2 && !k.fail_sure);
    assert_true(isinf(k.ci_hi));
    r[1] = run_at(&slo, SMOOTH, 8, 8.2);
    st_capacity_sustained(&p, r, 2, &k);
    print_message("# sure failure: limit %g-%g\n", k.ci_lo, k.ci_hi);
    assert_true(k.fail_sure && k.ci_hi <= 8.2);
}

/* A capacity (3) just above the rates whose window cannot fit (below 2.5): the search comes down
 * from the grid, finds 2 undecided, and bisects between it and the failure above instead of going
 * further down; with nothing decidable below a failure it stops with the reason. */
static void undecided_floor_is_bisected(void **state)
{
    (void)state;
    st_audit_slo slo = slo2(1000, 50);
    st_sustained_params p = params(&slo, 0);
    st_rate_result r[64];
    undecided_below = 2.5;
    int n = search(&p, CLIFF, 3, r, 64);
    st_capacity k;
    st_capacity_sustained(&p, r, n, &k);
    print_message("# undecided below 2.5, capacity 3: bracket %.4g-%.4g, %d runs\n", k.pass_rate, k.fail_rate, n);
    assert_true(k.has_pass && k.pass_rate <= 3 && 3 < k.fail_rate && k.within_tolerance);
    for (int i = 0; i < n; i++)
        assert_true(r[i].rate >= 2);
    /* capacity below the floor: no pass, the search stops between the undecided and the failure */
    n = search(&p, CLIFF, 2, r, 64);
    st_next nx;
    st_sustained_next(&p, r, n, &nx);
    assert_int_equal(nx.action, ST_NEXT_STOP);
    assert_non_null(strstr(nx.why, "undecided"));
    st_capacity_sustained(&p, r, n, &k);
    assert_false(k.has_pass);
    assert_true(n <= 6);
    undecided_below = 0;
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(smooth_boundary_is_interpolated),
        cmocka_unit_test(cliff_is_bisected),
        cmocka_unit_test(forecast_saves_runs),
        cmocka_unit_test(bounds_end_the_search),
        cmocka_unit_test(undecided_end_is_no_pass),
        cmocka_unit_test(pooled_pass_shows_a_passing_run),
        cmocka_unit_test(output_tps_rests_on_the_capacity),
        cmocka_unit_test(unsure_failure_opens_the_interval),
        cmocka_unit_test(undecided_floor_is_bisected),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
