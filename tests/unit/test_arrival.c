#include "harness.h"

#include "load/arrival.h"

#define N 20000

/* Mean and coefficient of variation of the gaps, in seconds. */
static void gap_stats(const st_ns *t, uint32_t n, double *mean, double *cv)
{
    double sum = 0, sq = 0;
    for (uint32_t i = 1; i < n; i++) {
        double g = st_ns_to_s(t[i] - t[i - 1]);
        sum += g;
        sq += g * g;
    }
    double m = sum / (n - 1), var = sq / (n - 1) - m * m;
    *mean = m;
    *cv = sqrt(var > 0 ? var : 0) / m;
}

static void check_nondecreasing(const st_ns *t, uint32_t n)
{
    assert_true(t[0] == 0);
    for (uint32_t i = 1; i < n; i++)
        assert_true(t[i] >= t[i - 1]);
}

static void arrival_poisson(void **state)
{
    (void)state;
    static st_ns t[N];
    st_arrival a = { ST_ARR_POISSON, 50.0, 0, 1 };
    assert_int_equal(st_arrival_schedule(&a, N, t), 0);
    check_nondecreasing(t, N);
    double mean, cv;
    gap_stats(t, N, &mean, &cv);
    assert_near(mean, 1.0 / 50, 0.03 / 50);
    assert_near(cv, 1.0, 0.03);
}

static void arrival_gamma(void **state)
{
    (void)state;
    static st_ns t[N];
    double bs[] = { 0.25, 1.0, 4.0 };
    for (int i = 0; i < 3; i++) {
        st_arrival a = { ST_ARR_GAMMA, 10.0, bs[i], 5 };
        assert_int_equal(st_arrival_schedule(&a, N, t), 0);
        check_nondecreasing(t, N);
        double mean, cv;
        gap_stats(t, N, &mean, &cv);
        assert_near(mean, 0.1, 0.05 * 0.1);
        assert_near(cv, 1.0 / sqrt(bs[i]), 0.05 / sqrt(bs[i]));
    }
}

static void arrival_constant_and_inf(void **state)
{
    (void)state;
    static st_ns t[N];
    st_arrival a = { ST_ARR_CONSTANT, 3.0, 0, 0 };
    assert_int_equal(st_arrival_schedule(&a, N, t), 0);
    check_nondecreasing(t, N);
    double mean, cv;
    gap_stats(t, N, &mean, &cv);
    assert_near(mean, 1.0 / 3, 1e-9);
    assert_near(cv, 0, 1e-6);
    /* No drift: the last time is exactly (N - 1) / rate. */
    assert_true(llabs(t[N - 1] - (st_ns)llround((N - 1) / 3.0 * 1e9)) <= 1);
    st_arrival inf = { ST_ARR_INF, 1, 0, 0 };
    assert_int_equal(st_arrival_schedule(&inf, 100, t), 0);
    for (int i = 0; i < 100; i++)
        assert_true(t[i] == 0);
    st_arrival pinf = { ST_ARR_POISSON, INFINITY, 0, 0 };
    assert_int_equal(st_arrival_schedule(&pinf, 10, t), 0);
    assert_true(t[9] == 0);
}

static void arrival_reproducible_and_invalid(void **state)
{
    (void)state;
    static st_ns a1[1000], a2[1000], a3[1000];
    st_arrival a = { ST_ARR_POISSON, 7.0, 0, 11 };
    st_arrival_schedule(&a, 1000, a1);
    st_arrival_schedule(&a, 1000, a2);
    a.seed = 12;
    st_arrival_schedule(&a, 1000, a3);
    assert_memory_equal(a1, a2, sizeof a1);
    assert_memory_not_equal(a1, a3, sizeof a1);
    st_arrival bad = { ST_ARR_POISSON, 0, 0, 0 };
    assert_int_equal(st_arrival_schedule(&bad, 10, a1), -1);
    bad.rate = NAN;
    assert_int_equal(st_arrival_schedule(&bad, 10, a1), -1);
    st_arrival g = { ST_ARR_GAMMA, 1, 0, 0 };
    assert_int_equal(st_arrival_schedule(&g, 10, a1), -1);
    st_arrival_kind k;
    assert_int_equal(st_arrival_kind_from_name("gamma", &k), 0);
    assert_int_equal(k, ST_ARR_GAMMA);
    assert_int_equal(st_arrival_kind_from_name("uniform", &k), -1);
    assert_string_equal(st_arrival_kind_name(ST_ARR_INF), "inf");
}

static void arrival_retime_keeps_burstiness(void **state)
{
    (void)state;
    static st_ns t[N];
    st_arrival a = { ST_ARR_GAMMA, 2.0, 0.5, 3 };
    assert_int_equal(st_arrival_schedule(&a, N, t), 0);
    for (uint32_t i = 0; i < N; i++)
        t[i] += 5 * ST_NS_PER_S; /* a trace that does not start at 0 */
    double m0, cv0, m1, cv1;
    gap_stats(t, N, &m0, &cv0);
    assert_int_equal(st_arrival_retime(t, N, 40.0), 0);
    check_nondecreasing(t, N);
    gap_stats(t, N, &m1, &cv1);
    assert_near(m1, 1.0 / 40, 1e-6);
    assert_near(cv1, cv0, 1e-3);
    assert_near((N - 1) / st_ns_to_s(t[N - 1]), 40.0, 1e-3);
    st_ns same[3] = { 5, 5, 5 };
    assert_int_equal(st_arrival_retime(same, 3, 1.0), -1);
    st_ns dec[3] = { 5, 4, 6 };
    assert_int_equal(st_arrival_retime(dec, 3, 1.0), -1);
    st_ns one[1] = { 77 };
    assert_int_equal(st_arrival_retime(one, 1, 1.0), 0);
    assert_true(one[0] == 0);
    st_ns two[2] = { 10, 20 };
    assert_int_equal(st_arrival_retime(two, 2, 0), -1);
    assert_int_equal(st_arrival_retime(two, 2, INFINITY), 0);
    assert_true(two[1] == 0);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(arrival_poisson),
        cmocka_unit_test(arrival_gamma),
        cmocka_unit_test(arrival_constant_and_inf),
        cmocka_unit_test(arrival_reproducible_and_invalid),
        cmocka_unit_test(arrival_retime_keeps_burstiness),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
