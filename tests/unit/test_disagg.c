/* plan/disagg: the KV transfer, the per-worker rates and AIConfigurator's rate matching. */
#include "harness.h"

#include <math.h>
#include <stdio.h>

#include "emu_config.h"
#include "emu/specstep.h"
#include "emu/sim.h"
#include "plan/disagg.h"

/* AIConfigurator's match_workers, written out again: for every x, y with x + y workers, the
 * rate min(x P s_p, y D s_d) per GPU, the best kept (strictly better replaces: ties keep the
 * first, the fewest prefill workers). */
static void reference_match(double P, double D, int tp, int gpus, double sp, double sd, int *bx, int *by, double *rps)
{
    double best = 0;
    *bx = *by = -1;
    *rps = 0;
    int workers = gpus / tp;
    for (int x = 1; x < workers; x++) {
        int y = workers - x;
        double r = fmin(P * sp * x, D * sd * y);
        double per = r / (tp * x + tp * y);
        if (per > best) {
            best = per;
            *bx = x;
            *by = y;
            *rps = r;
        }
    }
}

static void rate_matching_is_aiconfigurators(void **state)
{
    (void)state;
    /* the formula, exactly (== on doubles: the same operations in the same order as
     * AIConfigurator's: the corrected throughput, times the workers) */
    assert_true(st_disagg_rate_match(9.08, 3, 0.9, 6.32, 5, 0.92) == fmin(9.08 * 0.9 * 3, 6.32 * 0.92 * 5));
    assert_true(st_disagg_rate_match(2, 1, 1.0, 10, 1, 1.0) == 2.0);
    assert_true(st_disagg_rate_match(10, 4, 0.9, 1, 4, 0.92) == 4 * 0.92);
    /* the xPyD pick and its rate, against the reference, over a spread of worker rates (a link
     * fast enough never to bind) */
    st_disagg_link fast = { "test", 1e18, 0, "test" };
    int cases = 0;
    for (double P = 0.5; P < 40; P *= 1.7)
        for (double D = 0.3; D < 40; D *= 1.9)
            for (int tp = 1; tp <= 2; tp++) {
                st_disagg_worker w = {
                    .prefill_rps = P, .decode_rps = D, .prefill_s = 1 / P, .decode_step_s = 0.02, .kv_bytes = 1e6
                };
                st_disagg_pick pk;
                int rx, ry;
                double rr;
                reference_match(P, D, tp, 16, ST_DISAGG_PREFILL_SCALE, ST_DISAGG_DECODE_SCALE, &rx, &ry, &rr);
                assert_int_equal(
                    st_disagg_best(&w, tp, 16, ST_DISAGG_PREFILL_SCALE, ST_DISAGG_DECODE_SCALE, &fast, &pk), 0);
                if (pk.x != rx || pk.y != ry || pk.rps != rr)
                    fail_msg("P %g D %g tp %d: %dP%dD at %.17g, the reference %dP%dD at %.17g", P, D, tp, pk.x, pk.y,
                             pk.rps, rx, ry, rr);
                assert_false(pk.link_limited);
                cases++;
            }
    assert_true(cases > 50);
    /* the scales are options: 1.0 each gives the plain min */
    st_disagg_worker w = { .prefill_rps = 5, .decode_rps = 2, .kv_bytes = 1 };
    st_disagg_pick pk;
    assert_int_equal(st_disagg_best(&w, 1, 7, 1.0, 1.0, &fast, &pk), 0);
    /* 2P5D: min(10, 10) = 10 */
    assert_int_equal(pk.x, 2);
    assert_int_equal(pk.y, 5);
    assert_true(pk.rps == 10.0);
    /* one worker cannot be both */
    assert_int_equal(st_disagg_best(&w, 1, 1, 1.0, 1.0, &fast, &pk), -1);
}

static void transfer_time_from_the_models_shape(void **state)
{
    (void)state;
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    /* 36 layers x (K and V) x 8 KV heads x 128 x 2 bytes */
    assert_near(st_disagg_kv_bytes_per_token(&c.model, ST_EMU_BF16), 36.0 * 2 * 8 * 128 * 2, 1e-9);
    assert_near(st_disagg_kv_bytes_per_token(&c.model, ST_EMU_FP8), 36.0 * 2 * 8 * 128, 1e-9);
    st_disagg_link ib, nv, eth;
    assert_int_equal(st_disagg_link_find("InfiniBand", &ib), 0);
    assert_int_equal(st_disagg_link_find("nvlink", &nv), 0);
    assert_int_equal(st_disagg_link_find("ethernet", &eth), 0);
    assert_int_equal(st_disagg_link_find("carrier-pigeon", &eth), -1);
    assert_non_null(ib.source);
    /* 1000 tokens of bf16 KV over InfiniBand from a worker of 2 GPUs (one link each) */
    double bpt = 147456;
    assert_near(st_disagg_transfer_s(&ib, 2, 1000, bpt), ib.latency_s + 1000 * bpt / (2 * 50e9), 1e-15);
    /* NVLink is faster than InfiniBand, which is faster than Ethernet */
    assert_true(st_disagg_transfer_s(&nv, 1, 1000, bpt) < st_disagg_transfer_s(&ib, 1, 1000, bpt));
    assert_true(st_disagg_transfer_s(&ib, 1, 1000, bpt) < st_disagg_transfer_s(&eth, 1, 1000, bpt));
}

/* A KV transfer the link cannot carry sets the rate, and says what bandwidth it needed. */
static void slow_link_is_reported(void **state)
{
    (void)state;
    st_disagg_link eth;
    assert_int_equal(st_disagg_link_find("ethernet", &eth), 0);
    /* 1 GB of KV a request, prefill 50 requests/s: each prefill worker would send up to 45 GB/s */
    st_disagg_worker w = {
        .prefill_rps = 50, .decode_rps = 50, .prefill_s = 0.02, .decode_step_s = 0.02, .kv_bytes = 1e9
    };
    st_disagg_pick pk;
    assert_int_equal(st_disagg_best(&w, 1, 8, ST_DISAGG_PREFILL_SCALE, ST_DISAGG_DECODE_SCALE, &eth, &pk), 0);
    assert_true(pk.link_limited);
    assert_true(pk.link_need_bps > eth.bytes_per_s);
    /* the rate is what the links carry: x workers x 12.5 GB/s / 1 GB */
    assert_near(pk.rps, pk.x * eth.bytes_per_s / 1e9, 1e-9);
    assert_near(pk.transfer_s, eth.latency_s + 1e9 / eth.bytes_per_s, 1e-12);
}

/* The per-worker rates come from the engine model's step time and respect the SLO. */
static void worker_rates_on_the_engine_model(void **state)
{
    (void)state;
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    st_emu_memory mem;
    char why[300];
    if (st_emu_memory_plan(&c, &mem, why, sizeof why))
        fail_msg("%s", why);
    st_disagg_work w = {
        .input_tokens = 3000, .cached_tokens = 2000, .output_tokens = 300, .ttft_slo_s = 1.5, .tpot_slo_s = 0.05
    };
    st_disagg_worker r;
    assert_int_equal(st_disagg_worker_rates(&c, &mem, &w, &r, why, sizeof why), 0);
    assert_near(r.prefill_rps, 1 / r.prefill_s, 1e-9);
    assert_true(r.prefill_s > 0 && r.prefill_s < 1.5);
    assert_true(r.decode_step_s > 0 && r.decode_step_s <= 0.05);
    assert_near(r.decode_rps, r.decode_batch / (300 * r.decode_step_s), 1e-9);
    assert_near(r.kv_bytes, 3000 * 147456.0, 1e-3);
    /* without prefix caching the shared prefix is prefilled too: a longer prefill */
    st_emu_config nc = c;
    nc.enable_prefix_caching = 0;
    st_disagg_worker rn;
    assert_int_equal(st_disagg_worker_rates(&nc, &mem, &w, &rn, why, sizeof why), 0);
    assert_true(rn.prefill_s > 2 * r.prefill_s);
    /* a tighter TPOT SLO: a smaller batch, a lower decode rate */
    st_disagg_work tight = w;
    tight.tpot_slo_s = r.decode_step_s * 0.8;
    st_disagg_worker r2;
    if (st_disagg_worker_rates(&c, &mem, &tight, &r2, why, sizeof why) == 0)
        assert_true(r2.decode_rps < r.decode_rps);
    /* a TTFT SLO below one prefill: refused, and said */
    st_disagg_work slow = w;
    slow.ttft_slo_s = r.prefill_s / 2;
    assert_int_equal(st_disagg_worker_rates(&c, &mem, &slow, &r2, why, sizeof why), -1);
    assert_non_null(strstr(why, "TTFT"));
}

/* A configuration that speculates decodes with its verification step: the decode worker's time
 * per token is the step over the tokens a step emits (emu/specstep.h) at the batch it picks, so an
 * acceptance the target keeps raises the decode rate, and one it never does lowers it. */
static void speculation_in_the_decode_worker(void **state)
{
    (void)state;
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    st_emu_memory mem;
    char why[300];
    if (st_emu_memory_plan(&c, &mem, why, sizeof why))
        fail_msg("%s", why);
    st_disagg_work w = { .input_tokens = 1000, .output_tokens = 300, .ttft_slo_s = 1.5, .tpot_slo_s = 0.012 };
    st_disagg_worker plain, kept, lost;
    assert_int_equal(st_disagg_worker_rates(&c, &mem, &w, &plain, why, sizeof why), 0);
    st_emu_config sc = c;
    sc.spec.k = 4;
    sc.spec.draft_share = 1;
    sc.spec.acceptance = 0.8;
    assert_int_equal(st_disagg_worker_rates(&sc, &mem, &w, &kept, why, sizeof why), 0);
    st_emu_spec_point p;
    assert_int_equal(st_emu_spec_point_cfg(&sc, (uint32_t)kept.decode_batch, 1150, &p), 0);
    assert_near(kept.decode_step_s, p.tpot_spec_s, 1e-12);
    assert_true(kept.decode_step_s <= 0.012);
    assert_near(kept.decode_rps, kept.decode_batch / (300 * kept.decode_step_s), 1e-9);
    assert_true(kept.decode_rps > plain.decode_rps);
    sc.spec.acceptance = 0;
    assert_int_equal(st_disagg_worker_rates(&sc, &mem, &w, &lost, why, sizeof why), 0);
    assert_true(lost.decode_rps < plain.decode_rps);
    /* prefill is the same: nothing is drafted before the first token */
    assert_near(kept.prefill_s, plain.prefill_s, 1e-12);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(rate_matching_is_aiconfigurators),    cmocka_unit_test(speculation_in_the_decode_worker),
        cmocka_unit_test(transfer_time_from_the_models_shape), cmocka_unit_test(slow_link_is_reported),
        cmocka_unit_test(worker_rates_on_the_engine_model),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
