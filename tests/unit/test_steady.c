/* load/steady: distributions against reference values, and the trend, exceedance and percentile
 * tests on synthetic series whose answers are known: a line with noise (its slope), an AR(1)
 * series with no trend (false alarms at the stated rate), an M/M/1 queue below and above its
 * service rate (steady, then growing at lambda - mu), exponential samples (the p95 interval
 * covers ln 20 / rate at about the confidence asked). Loops are bounded in count. */
#include "harness.h"

#include "core/rng.h"
#include "load/steady.h"

static void t_and_z_reference_values(void **state)
{
    (void)state;
    assert_near(st_t_quantile(0.975, 10), 2.2281389, 1e-6);
    assert_near(st_t_quantile(0.95, 3), 2.3533634, 1e-6);
    assert_near(st_t_quantile(0.99, 2), 6.9645567, 1e-5);
    assert_near(st_t_quantile(0.975, 1), 12.7062047, 1e-5);
    assert_near(st_t_quantile(0.025, 10), -2.2281389, 1e-6);
    assert_near(st_t_quantile(0.5, 7), 0, 1e-12);
    assert_near(st_t_cdf(2.2281389, 10), 0.975, 1e-7);
    assert_near(st_t_cdf(0, 4), 0.5, 1e-12);
    assert_near(st_t_quantile(0.975, 1e6), 1.959966, 1e-4);
    assert_near(st_z_quantile(0.975), 1.959963985, 1e-8);
    assert_near(st_z_quantile(0.95), 1.644853627, 1e-8);
    assert_near(st_z_quantile(0.001), -3.090232306, 1e-8);
    assert_true(isnan(st_t_quantile(1, 3)));
    assert_true(isnan(st_z_quantile(0)));
}

static void trend_of_a_noisy_line(void **state)
{
    (void)state;
    enum { N = 500, SEEDS = 200 };
    double x[N], y[N];
    int covered = 0;
    for (int s = 0; s < SEEDS; s++) {
        st_rng r;
        st_rng_seed(&r, 100 + s);
        for (int i = 0; i < N; i++) {
            x[i] = i * 0.1;
            y[i] = 3 + 2 * x[i] + st_rng_normal(&r);
        }
        st_trend t;
        assert_int_equal(st_trend_fit(x, y, N, 10, &t), 0);
        assert_int_equal(t.batches, 10);
        assert_near(t.slope, 2, 0.2);
        assert_true(t.p_growth < 1e-6);
        double h = st_t_quantile(0.975, 8) * t.se;
        covered += fabs(t.slope - 2) <= h;
    }
    /* a 95 % interval covers the true slope in about 95 % of the seeds */
    if (covered < SEEDS * 0.88 || covered > SEEDS * 0.995)
        fail_msg("the 95 %% interval covered the slope in %d of %d series", covered, SEEDS);
    /* too few points or no spread: no fit */
    st_trend t;
    assert_int_equal(st_trend_fit(x, y, 5, 10, &t), -1);
    assert_true(t.p_growth == 1);
    double flat[8] = { 1, 1, 1, 1, 1, 1, 1, 1 };
    assert_int_equal(st_trend_fit(flat, y, 8, 4, &t), -1);
}

/* An AR(1) series (phi 0.9: strongly autocorrelated) with no trend: batch means keep false
 * alarms near the level asked for, where a per-point standard error would not. */
static void no_trend_few_false_alarms(void **state)
{
    (void)state;
    enum { N = 4000, SEEDS = 300 };
    double *x = malloc(sizeof *x * N), *y = malloc(sizeof *y * N);
    int alarms = 0, naive_alarms = 0;
    for (int s = 0; s < SEEDS; s++) {
        st_rng r;
        st_rng_seed(&r, 7000 + s);
        double e = 0;
        for (int i = 0; i < N; i++) {
            e = 0.9 * e + st_rng_normal(&r);
            x[i] = i;
            y[i] = e;
        }
        st_trend t;
        st_trend_fit(x, y, N, 10, &t);
        alarms += t.p_growth < 0.05;
        /* the same test with one point per batch: the per-point error, far too small */
        st_trend u;
        st_trend_fit(x, y, N, ST_STEADY_MAX_BATCHES, &u);
        naive_alarms += u.p_growth < 0.05;
    }
    free(x);
    free(y);
    if (alarms > SEEDS * 0.10)
        fail_msg("%d false alarms in %d flat series at 5 %%", alarms, SEEDS);
    assert_true(alarms >= 3); /* the test does fire at about its level, it is not blind */
    (void)naive_alarms;
}

/* M/M/1 (FIFO, one server): the number in system sampled every 0.5 s. Below the service rate
 * the trend is not significant; above it, it grows at lambda - mu. */
static void mm1_series(double lam, double mu, uint64_t seed, double horizon, double *t, double *y, int m)
{
    st_rng r;
    st_rng_seed(&r, seed);
    double next_a = st_rng_exp(&r, lam), next_d = INFINITY, now = 0;
    int q = 0, j = 0;
    while (j < m) {
        double te = next_a < next_d ? next_a : next_d;
        double ts = horizon * (j + 1) / m;
        if (ts <= te) {
            t[j] = ts;
            y[j++] = q;
            continue;
        }
        now = te;
        if (next_a <= next_d) {
            q++;
            next_a = now + st_rng_exp(&r, lam);
            if (q == 1)
                next_d = now + st_rng_exp(&r, mu);
        } else {
            q--;
            next_d = q ? now + st_rng_exp(&r, mu) : INFINITY;
        }
    }
}

static void mm1_steady_and_growing(void **state)
{
    (void)state;
    enum { M = 400 };
    double t[M], y[M];
    int grew_below = 0;
    for (int s = 0; s < 40; s++) {
        mm1_series(5, 10, 300 + s, 200, t, y, M);
        st_trend tr;
        st_trend_fit(t, y, M, 10, &tr);
        grew_below += tr.p_growth < 0.05 && tr.slope >= 0.05 * 5;
        mm1_series(12, 10, 900 + s, 200, t, y, M);
        st_trend_fit(t, y, M, 10, &tr);
        if (!(tr.p_growth < 0.01))
            fail_msg("lambda 12 > mu 10, seed %d: growth not significant (slope %g, p %g)", s, tr.slope, tr.p_growth);
        assert_near(tr.slope, 2, 1.25); /* sd of the growth over 200 s: about 0.33 per s */
    }
    if (grew_below > 4)
        fail_msg("lambda 5 < mu 10: growth found in %d of 40 runs", grew_below);
    assert_true(st_trend_upper(&(st_trend){ .slope = 1, .se = 0.5, .batches = 10 }, 0.95) > 1.9);
}

static void exceedance_and_pooling(void **state)
{
    (void)state;
    double v[100];
    for (int i = 0; i < 100; i++)
        v[i] = i + 1; /* 1..100 */
    st_exceed e;
    st_exceed_compute(v, 100, 95, 10, &e);
    assert_int_equal(e.n, 100);
    assert_int_equal(e.k, 5);
    assert_near(e.frac, 0.05, 1e-12);
    /* all five above the limit sit in the last batch: the batch error is larger than binomial */
    assert_true(e.se > sqrt(0.05 * 0.95 / 100));
    /* none above: the error still says something (half a value) */
    st_exceed_compute(v, 100, 1000, 10, &e);
    assert_int_equal(e.k, 0);
    assert_true(e.se > 0.005 && e.se < 0.02);
    /* a percentile of a correlated series: its level's error is at least the one its indicator's
     * autocorrelation time gives */
    double w[400];
    uint64_t seed = 7;
    double x = 0;
    for (int i = 0; i < 400; i++) { /* AR(1), phi 0.95: correlated over ~40 values */
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        double u = ((seed >> 11) * (1.0 / 9007199254740992.0)) - 0.5;
        x = 0.95 * x + u;
        w[i] = 100 + x;
    }
    double tau = st_autocorr_time(w, 400);
    assert_true(tau > 8 && tau < 60); /* (1 + phi) / (2 (1 - phi)) = 19.5 */
    st_pct_ci ci;
    assert_int_equal(st_percentile_ci(w, 400, 95, 10, 0.95, &ci), 0);
    double ind[400];
    for (int i = 0; i < 400; i++)
        ind[i] = w[i] <= ci.value;
    assert_true(ci.se >= sqrt(0.05 * 0.95 * 2 * st_autocorr_time(ind, 400) / 400) - 1e-12);
    assert_true(ci.se > 2 * sqrt(0.05 * 0.95 / 400));
    /* independent values: tau about 1/2 */
    double iid[400];
    for (int i = 0; i < 400; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        iid[i] = (double)(seed >> 11) * (1.0 / 9007199254740992.0);
    }
    double t0 = st_autocorr_time(iid, 400);
    assert_true(t0 >= 0.5 && t0 < 1.0);
    st_exceed a = { .n = 100, .k = 10, .frac = 0.1, .se = 0.03 }, b = { .n = 300, .k = 15, .frac = 0.05, .se = 0.01 };
    st_exceed both[2] = { a, b }, p;
    st_exceed_pool(both, 2, &p);
    assert_int_equal(p.n, 400);
    assert_int_equal(p.k, 25);
    assert_near(p.frac, 25.0 / 400, 1e-12);
    assert_near(p.se, sqrt(100.0 * 100 * 0.03 * 0.03 + 300.0 * 300 * 0.01 * 0.01) / 400, 1e-12);
}

/* Exponential latencies with rate 2: the true p95 is ln 20 / 2. */
static void percentile_interval_covers(void **state)
{
    (void)state;
    enum { N = 400, SEEDS = 200 };
    double v[N], truth = log(20) / 2;
    int covered = 0;
    for (int s = 0; s < SEEDS; s++) {
        st_rng r;
        st_rng_seed(&r, 5000 + s);
        for (int i = 0; i < N; i++)
            v[i] = st_rng_exp(&r, 2);
        st_pct_ci ci;
        assert_int_equal(st_percentile_ci(v, N, 95, 10, 0.95, &ci), 0);
        assert_true(ci.lo <= ci.value && ci.value <= ci.hi);
        covered += ci.lo <= truth && truth <= ci.hi;
    }
    if (covered < SEEDS * 0.88 || covered > SEEDS * 0.995)
        fail_msg("the 95 %% interval of the p95 covered ln 20 / 2 in %d of %d samples", covered, SEEDS);
    st_pct_ci ci;
    assert_int_equal(st_percentile_ci(v, 0, 95, 10, 0.95, &ci), -1);
    assert_true(isnan(ci.value));
}

static void isotonic_by_hand(void **state)
{
    (void)state;
    double y[] = { 5, 3, 4, 1, 2, 2 }, f[6];
    st_isotonic_decreasing(y, NULL, 6, f);
    double want[] = { 5, 3.5, 3.5, 5.0 / 3, 5.0 / 3, 5.0 / 3 };
    for (int i = 0; i < 6; i++)
        assert_near(f[i], want[i], 1e-12);
    double w[] = { 1, 3, 1, 1, 1, 1 };
    st_isotonic_decreasing(y, w, 6, f);
    assert_near(f[1], (3 * 3 + 4) / 4.0, 1e-12);
    /* already non-increasing: unchanged, in place */
    double z[] = { 4, 4, 2, -1 };
    st_isotonic_decreasing(z, NULL, 4, z);
    assert_near(z[0], 4, 0);
    assert_near(z[3], -1, 0);
}

static void inflight_counts(void **state)
{
    (void)state;
    st_record r[3];
    for (int i = 0; i < 3; i++)
        st_record_init(&r[i], i);
    /* arrivals at 1, 2, 3 s; ends at 4 s, never, 3.5 s */
    r[0].scheduled = r[0].sent = 1 * ST_NS_PER_S;
    r[0].end = 4 * ST_NS_PER_S;
    r[1].scheduled = r[1].sent = 2 * ST_NS_PER_S;
    r[2].scheduled = 3 * ST_NS_PER_S;
    r[2].sent = 3 * ST_NS_PER_S + ST_NS_PER_S / 4;
    r[2].end = 3 * ST_NS_PER_S + ST_NS_PER_S / 2;
    double t[] = { 0.5, 1, 2.5, 3.1, 3.3, 3.6, 5 }, y[7];
    assert_int_equal(st_inflight_at(r, 3, 0, t, 7, y), 0);
    double want[] = { 0, 1, 2, 3, 3, 2, 1 };
    for (int i = 0; i < 7; i++)
        assert_near(y[i], want[i], 0);
    /* by send time, the third arrives at 3.25 s */
    assert_int_equal(st_inflight_at(r, 3, 1, t, 7, y), 0);
    assert_near(y[3], 2, 0);
    assert_near(y[4], 3, 0);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(t_and_z_reference_values),  cmocka_unit_test(trend_of_a_noisy_line),
        cmocka_unit_test(no_trend_few_false_alarms), cmocka_unit_test(mm1_steady_and_growing),
        cmocka_unit_test(exceedance_and_pooling),    cmocka_unit_test(percentile_interval_covers),
        cmocka_unit_test(isotonic_by_hand),          cmocka_unit_test(inflight_counts),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
