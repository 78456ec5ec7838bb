/* A plan candidate that passed the highest rate its search tried has a capacity that is a lower
 * bound, not a measurement: the evaluation flags it (capacity_capped), plan.md writes ">= " and
 * says why, plan.json says capacity_is_lower_bound. A grid wide enough to find a failing rate
 * flags nothing. */
#include "harness.h"

#include <stdio.h>

#include "audit/spec.h"
#include "core/buf.h"
#include "plan/plan.h"
#include "plan/plan_model.h"
#include "plan/prices.h"
#include "report/plan_report.h"

static void evaluate_with_rates(const char *rates, const char *search, st_plan_candidate *c, st_spec *s, char *text,
                                size_t cap)
{
    snprintf(text, cap,
             "engine: {kind: vllm, model: Qwen/Qwen3-8B, flags: [--max-model-len, \"8192\"]}\n"
             "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.49}\npeak_rate: 20\n"
             "workload: {input_tokens: 1000, output_tokens: 200, requests_per_rate: 100}\n"
             "rates: [%s]\nslo: {ttft_p95_ms: 1000, tpot_p95_ms: 40}\n%s"
             "plan: {gpus: [H100], gpus_per_replica: [1], kv_cache_dtype: [auto], max_num_seqs: [256], "
             "max_num_batched_tokens: [2048]}\n",
             rates, search);
    char err[1024];
    if (st_spec_parse("p.yaml", text, strlen(text), s, err, sizeof err))
        fail_msg("%s", err);
    st_prices p;
    assert_int_equal(st_prices_builtin(&p, err, sizeof err), 0);
    st_plan_candidate *all;
    int n;
    assert_int_equal(st_plan_enumerate(s, &p, NULL, 2048, &all, &n, err, sizeof err), 0);
    assert_int_equal(n, 1);
    *c = all[0];
    c->provider = "the test's price list"; /* (it pointed into the price list, freed below) */
    free(all);
    st_prices_free(&p);
    st_plan_model *m;
    if (st_plan_model_new("p.yaml", text, strlen(text), s, 0.05, &m, err, sizeof err))
        fail_msg("%s", err);
    st_plan_ops ops;
    st_plan_model_ops(m, &ops);
    char why[512] = "";
    if (ops.screen(ops.arg, c, why, sizeof why) || ops.evaluate(ops.arg, c, c->why, sizeof c->why))
        fail_msg("rates [%s]: %s", rates, why);
    st_plan_model_free(m);
}

static void capped_capacity_is_said(void **state)
{
    (void)state;
    static char text[4096];
    st_plan_candidate c;
    st_spec s;
    /* an H100 serves far more than 4 req/s of 1,000 + 200 tokens: a search of one run passes it and
     * stops there, its limit not bracketed */
    evaluate_with_rates("4, 8", "search: {max_runs: 1}\n", &c, &s, text, sizeof text);
    if (!(c.capacity_rps > 0) || !c.capacity_capped)
        fail_msg("rates [4, 8], one run: capacity %g req/s, capped %d (%s): expected a lower bound", c.capacity_rps,
                 c.capacity_capped, c.why);
    c.state = ST_PLAN_OK;
    c.rank = 1;
    c.usd_per_1m = 0.1;
    st_plan_result r = {
        .spec = &s, .spec_path = "p.yaml", .c = &c, .n = 1, .best = 0, .baseline = c, .baseline_ok = 1, .len_auto = 2048
    };
    st_buf b;
    st_buf_init(&b, 1 << 20);
    assert_int_equal(st_plan_report_markdown(&r, &b), 0);
    if (!strstr(b.data, "It sustains at least 4 requests/s") || !strstr(b.data, "| >= 4 |") ||
        !strstr(b.data, "1 of these passed the highest rate the search tried"))
        fail_msg("plan.md does not say the capacity is a lower bound:\n%s", b.data);
    st_buf_reset(&b);
    assert_int_equal(st_plan_report_json(&r, &b), 0);
    if (!strstr(b.data, "\"capacity_is_lower_bound\": true"))
        fail_msg("plan.json lacks capacity_is_lower_bound: true:\n%.2000s", b.data);
    st_buf_free(&b);
    st_spec_free(&s);

    /* the whole search: a failing rate found above the capacity (it goes past the grid), not capped */
    evaluate_with_rates("4, 8", "", &c, &s, text, sizeof text);
    if (!(c.capacity_rps > 1) || c.capacity_capped)
        fail_msg("wide grid: capacity %g req/s, capped %d: expected a measured capacity", c.capacity_rps,
                 c.capacity_capped);
    st_spec_free(&s);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(capped_capacity_is_said),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}
