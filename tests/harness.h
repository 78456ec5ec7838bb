/* Common includes for the cmocka tests. Each test file ends with
 *   int main(void) { const struct CMUnitTest t[] = {...}; return cmocka_run_group_tests(t, 0, 0); }
 * tests/run.sh runs every binary with TAP output and prints "N passed, N failed". */
#ifndef ST_TEST_HARNESS_H
#define ST_TEST_HARNESS_H
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Asserts |a - b| <= tol. */
#define assert_near(a, b, tol)                                                                                         \
    do {                                                                                                               \
        double a_ = (a), b_ = (b), t_ = (tol);                                                                         \
        if (!(fabs(a_ - b_) <= t_))                                                                                    \
            fail_msg("%s = %.9g, expected %.9g within %.3g", #a, a_, b_, t_);                                          \
    } while (0)

/* Path of the servetune binary under test (the same build as the test). */
static inline const char *st_test_bin(void)
{
    const char *b = getenv("SERVETUNE_BIN");
    return b ? b : "build-asan/servetune";
}
#endif
