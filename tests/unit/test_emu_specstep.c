/* The engine model's verification step (emu/specstep.h): speculation pays at small batches,
 * where the step reads the weights, and stops paying as the batch grows; no acceptance never
 * pays; the figures follow the formula. */
#include "harness.h"

#include "emu/flags.h"
#include "emu/specstep.h"
#include "emu/steptime.h"

static void config(st_emu_config *c)
{
    st_emu_args A;
    st_emu_args_defaults(&A);
    A.model = "Qwen/Qwen3-8B";
    A.gpu = "H100";
    char err[300];
    if (st_emu_args_config(&A, c, err, sizeof err))
        fail_msg("%s", err);
    st_emu_memory mem;
    if (st_emu_memory_plan(c, &mem, err, sizeof err))
        fail_msg("%s", err);
}

static void verification_step(void **state)
{
    (void)state;
    st_emu_config c;
    config(&c);
    /* 4 draft tokens in every step, 3 accepted on average */
    st_emu_spec_accept good = { 1.0, 4.0, 3.0 }, none = { 1.0, 4.0, 0.0 };
    st_emu_spec_point p1, pbig, p0;
    assert_int_equal(st_emu_spec_point_at(&c, 1, 2000, &good, 0, &p1), 0);
    assert_near(p1.tokens_per_step, 4.0, 1e-12);
    assert_near(p1.tpot_spec_s, p1.spec_step_s / 4.0, 1e-15);
    assert_near(p1.ratio, p1.tpot_spec_s / p1.tpot_plain_s, 1e-12);
    assert_true(p1.spec_step_s > p1.plain_step_s);     /* 5 tokens cost more than 1 ... */
    assert_true(p1.spec_step_s < 2 * p1.plain_step_s); /* ... but far less than 5 (weights read once) */
    assert_true(p1.ratio < 0.5);
    /* short contexts: a large batch is compute-bound, the verified tokens cost in full */
    assert_int_equal(st_emu_spec_point_at(&c, 1, 100, &good, 0, &p1), 0);
    assert_int_equal(st_emu_spec_point_at(&c, 1024, 100, &good, 0, &pbig), 0);
    assert_true(pbig.ratio > p1.ratio + 0.2);
    assert_true(pbig.spec_step_s > 2 * pbig.plain_step_s);
    /* one token of four accepted: pays alone, not in a large batch */
    st_emu_spec_accept some = { 1.0, 4.0, 1.0 };
    uint32_t be = st_emu_spec_breakeven(&c, 4096, 100, &some, 0);
    assert_true(be > 8 && be < 4096);
    st_emu_spec_point at;
    assert_int_equal(st_emu_spec_point_at(&c, be, 100, &some, 0, &at), 0);
    assert_true(at.ratio >= 1);
    assert_int_equal(st_emu_spec_point_at(&c, be / 2, 100, &some, 0, &at), 0);
    assert_true(at.ratio < 1);
    /* long contexts: reading the KV cache binds, verification stays cheap */
    assert_int_equal(st_emu_spec_breakeven(&c, 256, 4000, &some, 0), 0);
    /* nothing accepted: every batch pays the verification for nothing */
    assert_int_equal(st_emu_spec_point_at(&c, 1, 2000, &none, 0, &p0), 0);
    assert_true(p0.ratio > 1);
    assert_int_equal(st_emu_spec_breakeven(&c, 4096, 2000, &none, 0), 1);
    /* a proposer's own time per step adds to the verification step */
    st_emu_spec_point pp;
    assert_int_equal(st_emu_spec_point_at(&c, 1, 100, &good, 0.001, &pp), 0);
    assert_near(pp.spec_step_s, p1.spec_step_s + 0.001, 1e-12);
    /* no draft at all: the plain step */
    st_emu_spec_accept never = { 0.0, 4.0, 0.0 };
    assert_int_equal(st_emu_spec_point_at(&c, 8, 2000, &never, 0, &pp), 0);
    assert_near(pp.ratio, 1.0, 1e-12);
    /* out of range */
    st_emu_spec_accept bad = { 1.0, 2.0, 3.0 };
    assert_int_equal(st_emu_spec_point_at(&c, 1, 2000, &bad, 0, &pp), -1);
    assert_int_equal(st_emu_spec_point_at(&c, 0, 2000, &good, 0, &pp), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(verification_step),
    };
    return cmocka_run_group_tests(tests, 0, 0);
}
