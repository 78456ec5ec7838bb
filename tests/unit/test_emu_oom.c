/* The engine model out of memory where only a release allocates: a request's anonymous blocks go back
 * to the free queue as a run (emu/blocks.h), and the array of runs may have to grow. This binary's
 * realloc fails on demand (it stands in for the C library's and ASan's, as in test_alloc_fail.c). */
#include "harness.h"

#include "core/clock.h"
#include "emu/catalog.h"
#include "emu/config.h"
#include "emu/engine.h"
#include "emu_config.h"

/* ASan's realloc (when the binary is built with it), else the C library's (as test_alloc_fail.c). */
extern void *__interceptor_realloc(void *, size_t) __attribute__((weak));
extern void *__libc_realloc(void *, size_t);

static int fail_realloc; /* while set, every realloc fails */

/* Not instrumented: the dynamic linker may allocate while ASan initialises. */
__attribute__((no_sanitize("address", "undefined"), noinline)) void *realloc(void *p, size_t n)
{
    if (fail_realloc)
        return NULL;
    return __interceptor_realloc ? __interceptor_realloc(p, n) : __libc_realloc(p, n);
}

/* Seeded requests past their first block (their keyed blocks held anonymously), each admitted and then
 * aborted while realloc fails: every abort queues a run of registered blocks behind a named block, so
 * the runs outgrow their array, and that release cannot record its run. The pool has lost blocks: the
 * next step must fail (out of memory) instead of running on a pool that is short of them. */
enum { N = 40, LEN = 64 };
static uint32_t ids[N][LEN];

/* Qwen3-8B on an H100 with N seeded requests past their first block (their keyed blocks held
 * anonymously), no two sharing a block, the i-th asking for max_tokens(i) tokens, admitted by one step. */
static st_emu_engine *admitted(st_vclock *vc, uint32_t (*max_tokens)(uint32_t))
{
    char err[512];
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    c.no_frontend = 1;
    c.max_model_len = 4096;
    st_emu_engine *e;
    assert_int_equal(st_emu_engine_new(&c, st_clock_virtual(vc), &e, NULL, err, sizeof err), 0);
    for (uint32_t i = 0; i < N; i++) {
        for (uint32_t k = 0; k < LEN; k++)
            ids[i][k] = 1000 + i * LEN + k;
        st_emu_req_params p = { .id = i + 1,
                                .ids = ids[i],
                                .n_ids = LEN,
                                .max_tokens = max_tokens(i),
                                .ignore_eos = 1,
                                .arrival = 0,
                                .seeded = 1,
                                .seed = 0x77 + i,
                                .keyed_from = c.block_size };
        assert_int_equal(st_emu_add_request(e, &p, err, sizeof err), ST_EMU_ADD_OK);
    }
    st_emu_step_result res;
    assert_int_equal(st_emu_step(e, &res), 0);
    assert_int_equal(res.n_admitted, N);
    vc->t = res.start + res.duration;
    assert_int_equal(st_emu_engine_check(e, err, sizeof err), 0);
    return e;
}

static uint32_t hundred(uint32_t i) { return 100 + 0 * i; }
static uint32_t staggered(uint32_t i) { return 2 + i; }

static void release_out_of_memory_fails_the_next_step(void **state)
{
    (void)state;
    char err[512];
    st_vclock vc = { 0 };
    st_emu_engine *e = admitted(&vc, hundred);
    st_emu_step_result res;
    fail_realloc = 1;
    for (uint32_t i = 0; i < N; i++)
        assert_int_equal(st_emu_abort(e, i + 1), 0);
    fail_realloc = 0;
    assert_int_equal(st_emu_engine_check(e, err, sizeof err), -1); /* a run was lost */
    st_emu_req_params p = { .id = 1000, .ids = ids[0], .n_ids = LEN, .max_tokens = 10, .ignore_eos = 1, .arrival = 0 };
    assert_int_equal(st_emu_add_request(e, &p, err, sizeof err), ST_EMU_ADD_OK);
    st_emu_skip_result sk;
    assert_true(st_emu_skip_steps(e, INT64_MAX, &sk) != 0);
    assert_int_equal(st_emu_step(e, &res), -1);
    st_emu_engine_free(e);
}

/* The same runs out of memory when requests finish, one a step, while realloc fails: a step (or a run of
 * steps, with `runs`) that returns 0 leaves a consistent pool, and the one whose release lost blocks
 * fails. */
static void finish_one_a_step(int runs)
{
    char err[512];
    st_vclock vc = { 0 };
    st_emu_engine *e = admitted(&vc, staggered);
    st_emu_step_result res;
    st_emu_skip_result sk;
    int failed = 0;
    if (runs) { /* a first run (the first request finishes in it) sizes the runs' arrays */
        assert_int_equal(st_emu_skip_steps(e, INT64_MAX, &sk), 0);
        vc.t = sk.start[sk.steps];
    }
    fail_realloc = 1;
    for (uint32_t j = 0; j < N + 1 && !failed; j++) {
        int rc = runs ? st_emu_skip_steps(e, INT64_MAX, &sk) : 1;
        if (rc == 1) {
            rc = st_emu_step(e, &res);
            if (rc == 0)
                vc.t = res.start + res.duration;
        } else if (rc == 0) {
            vc.t = sk.start[sk.steps];
        }
        if (rc == 0 && st_emu_engine_check(e, err, sizeof err) < 0)
            fail_msg("step %u ran on a broken pool: %s", j, err);
        if (rc != 0) {
            assert_int_equal(rc, -1);
            failed = 1;
        }
    }
    fail_realloc = 0;
    assert_true(failed);
    assert_int_equal(st_emu_engine_check(e, err, sizeof err), -1); /* it was the release */
    st_emu_engine_free(e);
}

static void release_out_of_memory_fails_its_step(void **state)
{
    (void)state;
    finish_one_a_step(0);
}

static void release_out_of_memory_fails_its_run(void **state)
{
    (void)state;
    finish_one_a_step(1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(release_out_of_memory_fails_the_next_step),
        cmocka_unit_test(release_out_of_memory_fails_its_step),
        cmocka_unit_test(release_out_of_memory_fails_its_run),
    };
    return cmocka_run_group_tests(tests, 0, 0);
}
