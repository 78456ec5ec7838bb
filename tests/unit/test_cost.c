#include "harness.h"

#include "plan/cost.h"

/* Hand-computed: 2.49 $/GPU-h x 1 GPU / (1200 tok/s x 3600 s/h) x 1e6 = 0.576388... $/1M;
 * peak 60 / capacity 7.6 = 7.89 -> 8 replicas; 8 x 1 x 2.49 x 730 = 14541.6 $/month. */
static void one_gpu_hand_computed(void **state)
{
    (void)state;
    st_cost_in in = {
        .capacity_rps = 7.6, .output_tps = 1200, .price_per_gpu_hour = 2.49, .gpus_per_replica = 1, .peak_rps = 60
    };
    st_cost c;
    assert_int_equal(st_cost_compute(&in, &c), 0);
    assert_int_equal(c.valid, 1);
    assert_near(c.usd_per_1m, 0.5763888888889, 1e-12);
    assert_int_equal(c.replicas, 8);
    assert_near(c.monthly_usd, 14541.6, 1e-9);
    assert_near(c.replica_hour_usd, 2.49, 1e-12);
}

/* 3.00 x 2 / (2000 x 3600) x 1e6 = 0.8333... $/1M; 40 / 10 = exactly 4 replicas (no extra one);
 * 4 x 2 x 3 x 730 = 17520. */
static void two_gpus_exact_ratio(void **state)
{
    (void)state;
    st_cost_in in = {
        .capacity_rps = 10, .output_tps = 2000, .price_per_gpu_hour = 3.0, .gpus_per_replica = 2, .peak_rps = 40
    };
    st_cost c;
    assert_int_equal(st_cost_compute(&in, &c), 0);
    assert_near(c.usd_per_1m, 0.83333333333333, 1e-12);
    assert_int_equal(c.replicas, 4);
    assert_near(c.monthly_usd, 17520, 1e-9);
    /* 40 / 9.99 = 4.004 -> 5 */
    in.capacity_rps = 9.99;
    assert_int_equal(st_cost_compute(&in, &c), 0);
    assert_int_equal(c.replicas, 5);
    assert_near(c.monthly_usd, 21900, 1e-9);
    /* a peak below capacity still needs one replica */
    in.peak_rps = 0.5;
    assert_int_equal(st_cost_compute(&in, &c), 0);
    assert_int_equal(c.replicas, 1);
}

static void nothing_passed_is_invalid(void **state)
{
    (void)state;
    st_cost_in in = {
        .capacity_rps = 0, .output_tps = 0, .price_per_gpu_hour = 2, .gpus_per_replica = 1, .peak_rps = 5
    };
    st_cost c;
    assert_int_equal(st_cost_compute(&in, &c), -1);
    assert_int_equal(c.valid, 0);
    assert_true(isnan(c.usd_per_1m));
    in.capacity_rps = NAN;
    in.output_tps = 100;
    assert_int_equal(st_cost_compute(&in, &c), -1);
}

static void relative_change(void **state)
{
    (void)state;
    assert_near(st_cost_rel_change(0.5, 0.8), -0.375, 1e-15);
    assert_near(st_cost_rel_change(12, 8), 0.5, 1e-15);
    assert_true(isnan(st_cost_rel_change(1, 0)));
    assert_true(isnan(st_cost_rel_change(NAN, 1)));
}

static void pick_is_cheapest_that_passed(void **state)
{
    (void)state;
    st_cost_pick_in c[] = {
        { 1, 0.80, 8 },                   /* baseline */
        { 0, NAN, 0 },                    /* none passed */
        { 1, 0.55, 11 }, { 1, 0.55, 12 }, /* same price, more capacity: wins */
        { 1, 0.61, 20 },
    };
    assert_int_equal(st_cost_pick(c, 5), 3);
    c[3].passed = 0;
    assert_int_equal(st_cost_pick(c, 5), 2);
    st_cost_pick_in none[] = { { 0, NAN, 0 }, { 0, 1.0, 3 } };
    assert_int_equal(st_cost_pick(none, 2), -1);
}

/* A peak far beyond the capacity saturates the replica count (a long cannot hold 1e300 / 0.01):
 * positive, the documented maximum, and a finite monthly cost. */
static void huge_peak_saturates(void **state)
{
    (void)state;
    st_cost_in in = {
        .capacity_rps = 0.01, .output_tps = 1, .price_per_gpu_hour = 2, .gpus_per_replica = 1, .peak_rps = 1e300
    };
    st_cost c;
    assert_int_equal(st_cost_compute(&in, &c), 0);
    assert_true(c.replicas > 0);
    assert_true(c.replicas == (long)ST_COST_MAX_REPLICAS);
    assert_true(isfinite(c.monthly_usd) && c.monthly_usd > 0);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(one_gpu_hand_computed),        cmocka_unit_test(two_gpus_exact_ratio),
        cmocka_unit_test(nothing_passed_is_invalid),    cmocka_unit_test(relative_change),
        cmocka_unit_test(pick_is_cheapest_that_passed), cmocka_unit_test(huge_peak_saturates),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
