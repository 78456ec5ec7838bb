/* plan: speculative decoding as a lever. Variants of every candidate with each (method, k) of
 * plan.speculation that has an acceptance; none without one (the plan does not invent it); on
 * the engine model, a high acceptance at a low, latency-bound rate makes a speculative variant the
 * pick, and a low acceptance at high load does not, the pick saying where speculation stops
 * paying. */
#include "harness.h"

#include <stdio.h>

#include "plan/plan.h"
#include "plan/plan_model.h"
#include "plan/plan_spec.h"
#include "plan/prices.h"
#include "audit/spec.h"

#define BASE                                                                                                           \
    "engine: {kind: vllm, model: Qwen/Qwen3-8B}\n"                                                                     \
    "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.49}\n"                                           \
    "workload: {input_tokens: 500, output_tokens: 300, requests_per_rate: 100}\n"                                      \
    "search: {mode: sustained}\n"

#define SPACE                                                                                                          \
    "plan:\n  gpus: [H100]\n  gpus_per_replica: [1]\n  kv_cache_dtype: [auto]\n  max_num_seqs: [256]\n"                \
    "  max_num_batched_tokens: [8192]\n"

static void parse(const char *text, st_spec *s)
{
    char err[1024];
    if (st_spec_parse("p.yaml", text, strlen(text), s, err, sizeof err))
        fail_msg("%s", err);
}

/* Each method with an acceptance adds one variant per k; a method without one adds none and is
 * named; the spec's speculation block gives one to the methods that have none. */
static void variants_need_an_acceptance(void **state)
{
    (void)state;
    st_spec s;
    st_prices p;
    char err[1024], why[800];
    assert_int_equal(st_prices_builtin(&p, err, sizeof err), 0);
    parse(BASE "peak_rate: 2\nrates: [1, 2]\nslo: {ttft_p95_ms: 2000, tpot_p95_ms: 50}\n" SPACE
               "  speculation:\n    - {method: ngram, k: [2, 4], acceptance: 0.7, draft_share: 0.5}\n"
               "    - {method: eagle, k: 3}\n",
          &s);
    assert_int_equal(st_plan_spec_variants(&s, why, sizeof why), 2);
    assert_non_null(strstr(why, "eagle was not considered: no acceptance given"));
    st_plan_candidate *c;
    int n;
    assert_int_equal(st_plan_enumerate(&s, &p, NULL, 1024, &c, &n, err, sizeof err), 0);
    assert_int_equal(n, 3); /* plain, ngram k 2, ngram k 4 */
    assert_null(c[0].spec);
    assert_int_equal(c[0].spec_twin, -1);
    assert_string_equal(c[1].spec->method, "ngram");
    assert_int_equal(c[1].spec_k, 2);
    assert_int_equal(c[2].spec_k, 4);
    assert_true(c[2].spec_acc && c[2].spec_acc->acceptance == 0.7 && c[2].spec_acc->draft_share == 0.5);
    char name[160];
    st_plan_config_name(&c[2], name, sizeof name);
    assert_string_equal(name, "h100-tp1-bf16-kvauto-seqs256-bt8192-len1024-ngram-k4");
    /* the model's spec carries the acceptance as the emulator's flags; the written one, for a real
     * vLLM, only --speculative-config, and the acceptance in its speculation block */
    st_buf b;
    st_buf_init(&b, 1 << 20);
    const char *text = BASE "peak_rate: 2\nrates: [1, 2]\nslo: {ttft_p95_ms: 2000, tpot_p95_ms: 50}\n";
    assert_int_equal(st_plan_spec_write_model("p.yaml", text, strlen(text), &c[2], &b, err, sizeof err), 0);
    assert_non_null(strstr(b.data, "--spec-acceptance\", \"0.7\""));
    assert_non_null(strstr(b.data, "--spec-draft-share\", \"0.5\""));
    assert_non_null(strstr(b.data, "{\\\"method\\\":\\\"ngram\\\",\\\"num_speculative_tokens\\\":4}"));
    st_buf_reset(&b);
    const st_plan_candidate *one[] = { &c[2] };
    assert_int_equal(st_plan_spec_write("p.yaml", text, strlen(text), one, 1, NULL, &b, err, sizeof err), 0);
    assert_null(strstr(b.data, "--spec-acceptance"));
    assert_non_null(strstr(b.data, "--speculative-config"));
    st_spec w;
    parse(b.data, &w);
    assert_true(w.speculation.given && w.speculation.acceptance == 0.7 && w.speculation.draft_share == 0.5);
    st_spec_free(&w);
    st_buf_free(&b);
    free(c);
    st_spec_free(&s);
    /* the spec's own acceptance serves a method without one */
    parse(BASE "peak_rate: 2\nrates: [1, 2]\nslo: {ttft_p95_ms: 2000, tpot_p95_ms: 50}\n"
               "speculation: {acceptance: 0.6}\n" SPACE "  speculation:\n    - {method: eagle, k: [1, 3]}\n",
          &s);
    assert_int_equal(st_plan_spec_variants(&s, why, sizeof why), 2);
    assert_string_equal(why, "");
    st_spec_free(&s);
    /* no method at all: not considered, and why */
    parse(BASE "peak_rate: 2\nrates: [1, 2]\nslo: {ttft_p95_ms: 2000, tpot_p95_ms: 50}\n" SPACE, &s);
    assert_int_equal(st_plan_spec_variants(&s, why, sizeof why), 0);
    assert_non_null(strstr(why, "not considered"));
    assert_int_equal(st_plan_enumerate(&s, &p, NULL, 1024, &c, &n, err, sizeof err), 0);
    assert_int_equal(n, 1);
    free(c);
    st_spec_free(&s);
    /* refused with the reason */
    const char *bad[][2] = {
        { "    - {method: guess, k: 2, acceptance: 0.5}\n", "'guess' is not one the engine model serves" },
        { "    - {method: draft_model, k: 2, acceptance: 0.5}\n", "needs 'model'" },
        { "    - {method: ngram, acceptance: 0.5}\n", "needs 'method' and 'k'" },
        { "    - {method: ngram, k: 2, acceptance: 1.5}\n", "within 0..1" },
        { "    - {method: ngram, k: 40, acceptance: 0.5}\n", "plan.speculation.k" },
        { "    - {method: eagle, k: 2, acceptance: trace}\n", "cannot be computed offline" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char t[2048];
        snprintf(t, sizeof t, "%s%s%s  speculation:\n%s",
                 BASE "peak_rate: 2\nrates: [1, 2]\nslo: {ttft_p95_ms: 2000, tpot_p95_ms: 50}\n", SPACE, "", bad[i][0]);
        assert_int_equal(st_spec_parse("p.yaml", t, strlen(t), &s, err, sizeof err), -1);
        if (!strstr(err, bad[i][1]))
            fail_msg("case %zu: '%s' not in '%s'", i, bad[i][1], err);
    }
    st_prices_free(&p);
}

typedef struct planned {
    st_plan_candidate *c;
    int n, best;
    st_plan_model *m;
    st_spec s;
    st_prices p;
} planned;

/* The whole space searched exhaustively (top k = every candidate) on the engine model. */
static void plan_all(const char *text, planned *o)
{
    char err[1024];
    parse(text, &o->s);
    assert_int_equal(st_prices_builtin(&o->p, err, sizeof err), 0);
    assert_int_equal(st_plan_enumerate(&o->s, &o->p, NULL, 1024, &o->c, &o->n, err, sizeof err), 0);
    if (st_plan_model_new("p.yaml", text, strlen(text), &o->s, 0.05, &o->m, err, sizeof err))
        fail_msg("%s", err);
    st_plan_ops ops;
    st_plan_model_ops(o->m, &ops);
    st_plan_stats st;
    o->best = st_plan_search(o->c, o->n, o->n, 300, &ops, 1, &st);
    assert_true(o->best >= 0);
    /* the speculative variants' bound (1 + k times the plain one) is still a bound */
    for (int i = 0; i < o->n; i++)
        if (o->c[i].state == ST_PLAN_OK && !(o->c[i].output_tps <= o->c[i].bound_tps))
            fail_msg("candidate %d: %.1f output tok/s above its proven bound %.1f", i, o->c[i].output_tps,
                     o->c[i].bound_tps);
}

static void planned_free(planned *o)
{
    st_plan_model_free(o->m);
    free(o->c);
    st_prices_free(&o->p);
    st_spec_free(&o->s);
}

/* A low rate and a tight TPOT: at a high acceptance speculation makes each token cheaper in time,
 * so more requests a second meet the SLO, and a speculative variant is the pick. */
static void high_acceptance_low_rate_picks_speculation(void **state)
{
    (void)state;
    planned o;
    plan_all(BASE "peak_rate: 2\nrates: [1, 2, 4]\nslo: {ttft_p95_ms: 2000, tpot_p95_ms: 9}\n" SPACE
                  "  speculation:\n    - {method: ngram, k: [4], acceptance: 0.8}\n",
             &o);
    assert_int_equal(o.n, 2);
    const st_plan_candidate *w = &o.c[o.best], *plain = &o.c[0];
    assert_non_null(w->spec);
    assert_int_equal(w->spec_k, 4);
    assert_true(plain->state == ST_PLAN_OK && w->capacity_rps > 1.5 * plain->capacity_rps);
    st_plan_spec_pay pay;
    char why[300];
    assert_int_equal(st_plan_model_spec_pay(o.m, w, w, &pay, why, sizeof why), 0);
    assert_true(pay.ok && pay.ratio_1 < 0.5);
    assert_true(pay.batch_at_cap >= 1 && pay.ratio_at_cap < 1); /* it pays where the pick runs */
    /* a plain candidate has nothing to say on its own */
    assert_int_equal(st_plan_model_spec_pay(o.m, plain, plain, &pay, why, sizeof why), -1);
    planned_free(&o);
}

/* High load and a loose SLO at a low acceptance: the batch is large, verifying k + 1 tokens per
 * sequence binds on compute, and plain decoding is the pick; its speculative twin says from
 * which batch (and rate) speculation stops paying, below the pick's own batch. */
static void low_acceptance_high_load_keeps_plain(void **state)
{
    (void)state;
    planned o;
    plan_all(BASE "peak_rate: 40\nrates: [10, 20, 40]\nslo: {ttft_p95_ms: 5000, tpot_p95_ms: 200}\n" SPACE
                  "  speculation:\n    - {method: ngram, k: [4], acceptance: 0.2}\n",
             &o);
    assert_int_equal(o.n, 2);
    const st_plan_candidate *w = &o.c[o.best], *twin = &o.c[1];
    assert_null(w->spec);
    assert_non_null(twin->spec);
    assert_true(twin->state == ST_PLAN_OK && twin->usd_per_1m > w->usd_per_1m);
    st_plan_spec_pay pay;
    char why[300];
    assert_int_equal(st_plan_model_spec_pay(o.m, twin, w, &pay, why, sizeof why), 0);
    assert_true(pay.ratio_1 < 1);                            /* alone, a sequence still gains */
    assert_true(pay.breakeven >= 2 && pay.breakeven <= 256); /* but it stops paying within the batch */
    assert_true(pay.breakeven_rps > 0);
    assert_true(pay.batch_at_cap > pay.breakeven && pay.ratio_at_cap > 1);
    planned_free(&o);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(variants_need_an_acceptance),
        cmocka_unit_test(high_acceptance_low_rate_picks_speculation),
        cmocka_unit_test(low_acceptance_high_load_keeps_plain),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}
