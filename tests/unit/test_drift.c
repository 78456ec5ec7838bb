/* audit/drift.h: KL divergence over the top-k cells plus a rest cell, same top-1, delta-p, the
 * free-running comparison and the summary's percentiles, against figures computed by hand. */
#include "harness.h"

#include "audit/drift.h"

/* A position listing k tokens with the given probabilities. */
typedef struct pos_buf {
    int32_t ids[8];
    double lp[8];
    st_lp_pos p;
} pos_buf;

static const st_lp_pos *mk(pos_buf *b, int32_t token, uint32_t k, const int32_t *ids, const double *probs)
{
    for (uint32_t i = 0; i < k; i++) {
        b->ids[i] = ids[i];
        b->lp[i] = log(probs[i]);
    }
    b->p = (st_lp_pos){ .token = token, .token_logp = NAN, .k = k, .ids = b->ids, .logp = b->lp };
    return &b->p;
}

/* p = {0.5, 0.3, rest 0.2}, q = {0.4, 0.4, rest 0.2}:
 * KL = 0.5 ln(0.5/0.4) + 0.3 ln(0.3/0.4) + 0.2 ln(1) = 0.111571776 - 0.086304622 = 0.025267154 */
static void kl_over_listed_tokens_and_rest(void **state)
{
    (void)state;
    pos_buf b, c;
    st_drift_tok t;
    assert_int_equal(st_drift_token(mk(&b, 1, 2, (int32_t[]){ 1, 2 }, (double[]){ 0.5, 0.3 }),
                                    mk(&c, 1, 2, (int32_t[]){ 2, 1 }, (double[]){ 0.4, 0.4 }), &t),
                     0);
    assert_near(t.kld, 0.025267154, 1e-8);
    assert_near(t.rest_base, 0.2, 1e-12);
    assert_near(t.dp, -0.1, 1e-12); /* token 1: 0.4 - 0.5 */
    /* cand's top-1 is a tie between 2 and 1: the first listed (2) wins, base's is 1 */
    assert_int_equal(t.same_top1, 0);
}

/* A baseline token the candidate does not list goes to the rest cell on both sides:
 * p = {1: 0.6, 2: 0.3}, q = {1: 0.5, 3: 0.4}: cells {1}, rest:
 * KL = 0.6 ln(0.6/0.5) + 0.4 ln(0.4/0.5) = 0.109392937 - 0.089257421 = 0.020135516 */
static void unlisted_tokens_in_the_rest_cell(void **state)
{
    (void)state;
    pos_buf b, c;
    st_drift_tok t;
    assert_int_equal(st_drift_token(mk(&b, 2, 2, (int32_t[]){ 1, 2 }, (double[]){ 0.6, 0.3 }),
                                    mk(&c, 3, 2, (int32_t[]){ 1, 3 }, (double[]){ 0.5, 0.4 }), &t),
                     0);
    assert_near(t.kld, 0.020135516, 1e-8);
    assert_near(t.rest_base, 0.4, 1e-12);
    assert_int_equal(t.same_top1, 1);
    assert_true(isnan(t.dp)); /* token 2 unknown to the candidate: no delta-p, never a zero */
}

static void identical_is_zero_and_no_logprobs_is_refused(void **state)
{
    (void)state;
    pos_buf b, c;
    st_drift_tok t;
    const int32_t ids[] = { 4, 9, 7 };
    const double pr[] = { 0.7, 0.2, 0.05 };
    assert_int_equal(st_drift_token(mk(&b, 9, 3, ids, pr), mk(&c, 9, 3, ids, pr), &t), 0);
    assert_near(t.kld, 0, 1e-15);
    assert_near(t.dp, 0, 1e-15);
    assert_int_equal(t.same_top1, 1);
    /* an engine that reported nothing: refused, and counted as missing by the accumulator */
    assert_int_equal(st_drift_token(mk(&b, 9, 3, ids, pr), mk(&c, 9, 0, ids, pr), &t), -1);
    st_drift_acc a = { 0 };
    assert_int_equal(st_drift_add_forced(&a, &b.p, &c.p, 1), 0);
    st_drift_summary s;
    st_drift_summarize(&a, &s);
    assert_int_equal(s.positions, 0);
    assert_int_equal(s.missing, 1);
    assert_true(isnan(s.kld_mean)); /* no figure, never a zero drift */
    assert_true(isnan(s.same_top1));
    st_drift_free(&a);
}

/* Five positions, four identical and one with KL x = 0.6 ln(0.6/0.3) + 0.4 ln(0.4/0.7)
 * = 0.415888308 - 0.223846315 = 0.192041993 (top-1 is of the listed tokens: token 1 on both
 * sides, although the candidate's rest holds more). Sorted [0,0,0,0,x]: mean x/5,
 * p50 0, p90 = 0.6 x (h = 3.6), p99 = 0.96 x (h = 3.96). */
static void summary_percentiles(void **state)
{
    (void)state;
    pos_buf b[5], c[5];
    st_lp_pos bp[5], cp[5];
    for (int i = 0; i < 4; i++) {
        bp[i] = *mk(&b[i], 1, 1, (int32_t[]){ 1 }, (double[]){ 0.5 });
        cp[i] = *mk(&c[i], 1, 1, (int32_t[]){ 1 }, (double[]){ 0.5 });
    }
    bp[4] = *mk(&b[4], 1, 1, (int32_t[]){ 1 }, (double[]){ 0.6 });
    cp[4] = *mk(&c[4], 1, 1, (int32_t[]){ 1 }, (double[]){ 0.3 });
    st_drift_acc a = { 0 };
    assert_int_equal(st_drift_add_forced(&a, bp, cp, 5), 0);
    st_drift_summary s;
    st_drift_summarize(&a, &s);
    const double x = 0.192041993;
    assert_int_equal(s.positions, 5);
    assert_near(s.kld_mean, x / 5, 1e-8);
    assert_near(s.kld_p50, 0, 1e-12);
    assert_near(s.kld_p90, 0.6 * x, 1e-8);
    assert_near(s.kld_p99, 0.96 * x, 1e-8);
    assert_near(s.kld_max, x, 1e-8);
    assert_near(s.same_top1, 1.0, 1e-12);
    /* delta-p: [0,0,0,0,-0.3]: mean -0.06, p01 = -0.3 + 0.04*0.3 = -0.288 */
    assert_int_equal(s.dp_n, 5);
    assert_near(s.dp_mean, -0.06, 1e-12);
    assert_near(s.dp_p01, -0.288, 1e-12);
    assert_near(s.rest_base_mean, (4 * 0.5 + 0.4) / 5, 1e-12);
    assert_true(isnan(s.exact_match)); /* teacher-forced: no answers compared */
    st_drift_free(&a);
}

/* Free-running: three answers. Equal [5,6,7]; diverging at 2 ([5,6,7,8] vs [5,6,9,8]); a prefix
 * ([5,6] vs [5,6,7]: diverges at 2, the shorter length). Exact 1/3, divergences [2,2]. Compared
 * positions: 3 + 3 (0..2) + 2 (0..1) = 8; the diverging one's position 2 has another top-1. */
static void free_running(void **state)
{
    (void)state;
    pos_buf B[32], C[1];
    st_lp_pos b1[3], c1[3], b2[4], c2[4], b3[2], c3[3];
    int n = 0;
#define P(arr, i, tok, top) (arr)[i] = *mk(&B[n++], tok, 2, (int32_t[]){ top, 99 }, (double[]){ 0.8, 0.1 })
    for (int i = 0; i < 3; i++) {
        P(b1, i, 5 + i, 5 + i);
        P(c1, i, 5 + i, 5 + i);
    }
    P(b2, 0, 5, 5);
    P(b2, 1, 6, 6);
    P(b2, 2, 7, 7);
    P(b2, 3, 8, 8);
    P(c2, 0, 5, 5);
    P(c2, 1, 6, 6);
    c2[2] = *mk(&C[0], 9, 2, (int32_t[]){ 9, 7 }, (double[]){ 0.5, 0.4 });
    P(c2, 3, 8, 8);
    P(b3, 0, 5, 5);
    P(b3, 1, 6, 6);
    P(c3, 0, 5, 5);
    P(c3, 1, 6, 6);
    P(c3, 2, 7, 7);
#undef P
    st_drift_acc a = { 0 };
    assert_int_equal(st_drift_add_free(&a, b1, 3, c1, 3), 0);
    assert_int_equal(st_drift_add_free(&a, b2, 4, c2, 4), 0);
    assert_int_equal(st_drift_add_free(&a, b3, 2, c3, 3), 0);
    st_drift_summary s;
    st_drift_summarize(&a, &s);
    assert_int_equal(s.answers, 3);
    assert_int_equal(s.exact, 1);
    assert_near(s.exact_match, 1.0 / 3, 1e-12);
    assert_int_equal(s.diverged, 2);
    assert_near(s.div_mean, 2, 1e-12);
    assert_int_equal(s.positions, 8);
    assert_near(s.same_top1, 7.0 / 8, 1e-12);
    /* the diverging position: base {7: 0.8, 99: 0.1}, cand {9: 0.5, 7: 0.4}: cells {7}, rest:
     * 0.8 ln(0.8/0.4) + 0.2 ln(0.2/0.6) = 0.554517744 - 0.219722458 = 0.334795286 */
    assert_near(s.kld_max, 0.334795286, 1e-8);
    assert_near(s.kld_mean, 0.334795286 / 8, 1e-8);
    st_drift_free(&a);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(kl_over_listed_tokens_and_rest),
        cmocka_unit_test(unlisted_tokens_in_the_rest_cell),
        cmocka_unit_test(identical_is_zero_and_no_logprobs_is_refused),
        cmocka_unit_test(summary_percentiles),
        cmocka_unit_test(free_running),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
