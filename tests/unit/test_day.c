/* The traffic day priced three ways (plan/day.h), against cases computed by hand. */
#include "harness.h"

#include "plan/cost.h"
#include "plan/day.h"

static st_day_opts opts(void)
{
    st_day_opts o = {
        .capacity_rps = 4,
        .gpus_per_replica = 1,
        .price_per_gpu_hour = 2,
        .scale_up_delay_s = 600,
        .min_replicas = 0,
        .serverless_price_per_gpu_s = 0.0008,
        .idle_timeout_s = 60,
        .cold_start_s = 30,
        .service_s = 5,
    };
    return o;
}

/* 10 req/s all day at 4 req/s per replica: 3 replicas every hour.
 *   peak-sized  3 x 24 h x $2 = $144
 *   autoscaled  72 replica-hours + 3 started 600 s early at midnight (0.5 h) = 72.5 h = $145
 *   serverless  2 workers full + the third sees 2 req/s: up 1 - e^-130 = 1, no cold starts:
 *               3 x 86400 s x $0.0008 = $207.36
 *   utilization 10 / 12 = 0.8333; break-even 2 / (0.0008 x 3600) = 0.6944: dedicated wins */
static void flat_day(void **state)
{
    (void)state;
    double rps[24];
    for (int i = 0; i < 24; i++)
        rps[i] = 10;
    st_day_opts o = opts();
    st_day_slot sl[24];
    st_day_cost c;
    char err[200];
    assert_int_equal(st_day_price(rps, 24, 3600, &o, sl, &c, err, sizeof err), 0);
    assert_int_equal(c.peak_replicas, 3);
    assert_near(c.peak_usd, 144, 1e-9);
    assert_near(c.autoscaled_replica_hours, 72.5, 1e-9);
    assert_near(c.autoscaled_usd, 145, 1e-9);
    assert_near(c.serverless_usd, 207.36, 1e-6);
    assert_near(c.serverless_gpu_hours, 72, 1e-6);
    assert_near(c.cold_share, 0, 1e-12);
    assert_near(c.utilization, 10.0 / 12, 1e-12);
    assert_near(c.break_even_utilization, 2 / 2.88, 1e-12);
    assert_near(c.requests, 864000, 1e-6);
    assert_string_equal(c.cheapest, "peak-sized");
    for (int i = 0; i < 24; i++)
        assert_int_equal(sl[i].replicas, 3);
}

/* 1 req/s for 23 hours and 40 req/s in hour 12:
 *   peak-sized  10 replicas x 24 h x $2 = $480
 *   autoscaled  1 x 23 h + 10 x 1 h = 33 h, plus 1 started early at midnight and 9 more before
 *               hour 12 (10 x 600 s = 1.6667 h): 34.6667 h = $69.333
 *   serverless  1 req/s keeps one worker up (1 - e^-65), 40 req/s is 10 full workers:
 *               (23 + 10) x 3600 s x $0.0008 = $95.04 */
static void spiky_day(void **state)
{
    (void)state;
    double rps[24];
    for (int i = 0; i < 24; i++)
        rps[i] = i == 12 ? 40 : 1;
    st_day_opts o = opts();
    st_day_slot sl[24];
    st_day_cost c;
    char err[200];
    assert_int_equal(st_day_price(rps, 24, 3600, &o, sl, &c, err, sizeof err), 0);
    assert_int_equal(c.peak_replicas, 10);
    assert_near(c.peak_usd, 480, 1e-9);
    assert_near(c.autoscaled_replica_hours, 33 + 10.0 / 6, 1e-9);
    assert_near(c.autoscaled_usd, 2 * (33 + 10.0 / 6), 1e-9);
    assert_near(c.serverless_usd, 95.04, 1e-6);
    assert_int_equal(sl[11].replicas, 1);
    assert_int_equal(sl[12].replicas, 10);
    assert_int_equal(sl[13].replicas, 1);
    assert_near(sl[12].serverless_workers, 10, 1e-12);
    assert_string_equal(c.cheapest, "autoscaled");
}

/* Nothing from midnight to 8, then 0.01 req/s (one request every 100 s):
 *   peak-sized  1 x 24 h x $2 = $48
 *   autoscaled  1 x 16 h + 1 started 600 s before 8:00 = 16.1667 h = $32.333
 *   serverless  the worker is up a fraction 1 - e^(-0.01 x 65) = 0.477954 of the time; cold
 *               starts 0.01 e^(-0.6) = 0.0054881/s, each 30 s billed: 0.642598 workers,
 *               x 16 h x 3600 s x $0.0008 = $29.6109; cold share e^-0.6 = 54.9 % of requests */
static void night_idle_day(void **state)
{
    (void)state;
    double rps[24];
    for (int i = 0; i < 24; i++)
        rps[i] = i < 8 ? 0 : 0.01;
    st_day_opts o = opts();
    st_day_slot sl[24];
    st_day_cost c;
    char err[200];
    assert_int_equal(st_day_price(rps, 24, 3600, &o, sl, &c, err, sizeof err), 0);
    assert_int_equal(c.peak_replicas, 1);
    assert_near(c.peak_usd, 48, 1e-9);
    assert_near(c.autoscaled_usd, 2 * (16 + 1.0 / 6), 1e-9);
    assert_near(sl[10].serverless_workers, 0.6425977140671919, 1e-12);
    assert_near(c.serverless_usd, 29.6109026642162, 1e-9);
    assert_near(c.cold_share, exp(-0.6), 1e-12);
    assert_near(sl[3].serverless_workers, 0, 0);
    assert_int_equal(sl[3].replicas, 0);
    assert_string_equal(c.cheapest, "serverless");
    assert_true(c.utilization < c.break_even_utilization);

    /* a floor of one replica keeps the night hours billed */
    o.min_replicas = 1;
    assert_int_equal(st_day_price(rps, 24, 3600, &o, sl, &c, err, sizeof err), 0);
    assert_near(c.autoscaled_usd, 2 * (24 + 1.0 / 6), 1e-9);
}

static void bad_days(void **state)
{
    (void)state;
    double rps[24] = { 0 };
    st_day_opts o = opts();
    st_day_cost c;
    char err[200];
    rps[5] = -1;
    assert_int_equal(st_day_price(rps, 24, 3600, &o, NULL, &c, err, sizeof err), -1);
    assert_string_equal(err, "traffic day: slot 5: the rate must be a number >= 0 (got -1)");
    rps[5] = NAN;
    assert_int_equal(st_day_price(rps, 24, 3600, &o, NULL, &c, err, sizeof err), -1);
    rps[5] = 0;
    o.capacity_rps = 0;
    assert_int_equal(st_day_price(rps, 24, 3600, &o, NULL, &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "capacity"));
    o = opts();
    assert_int_equal(st_day_price(rps, 0, 3600, &o, NULL, &c, err, sizeof err), -1);

    /* an hourly shape must name every hour once */
    int hours[24];
    double rates[24], out[24];
    for (int i = 0; i < 24; i++) {
        hours[i] = i;
        rates[i] = 1;
    }
    assert_int_equal(st_day_from_hours(hours, rates, 24, out, err, sizeof err), 0);
    assert_int_equal(st_day_from_hours(hours, rates, 23, out, err, sizeof err), -1);
    assert_string_equal(err, "traffic: hour 23 is missing (a day names every hour 0..23; write 0 for none)");
    hours[4] = 3;
    assert_int_equal(st_day_from_hours(hours, rates, 24, out, err, sizeof err), -1);
    assert_string_equal(err, "traffic: hour 3 is given twice");
    hours[4] = 4;
    rates[7] = -2;
    assert_int_equal(st_day_from_hours(hours, rates, 24, out, err, sizeof err), -1);
    assert_string_equal(err, "traffic: hour 7: the rate must be a number >= 0 (got -2)");
}

static void replicas_ceil(void **state)
{
    (void)state;
    assert_int_equal(st_cost_replicas(40, 8.000000000001), 5);
    assert_int_equal(st_cost_replicas(40.1, 8), 6);
    assert_int_equal(st_cost_replicas(0, 8), 0);
    assert_int_equal(st_cost_replicas(0.001, 8), 1);
    assert_true(st_cost_replicas(1e300, 1e-300) > 0); /* no overflow */
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(flat_day), cmocka_unit_test(spiky_day),     cmocka_unit_test(night_idle_day),
        cmocka_unit_test(bad_days), cmocka_unit_test(replicas_ceil),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
