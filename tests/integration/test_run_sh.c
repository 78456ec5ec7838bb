/* tests/run.sh, the suite's runner: a failing test binary's first failed check is printed before
 * the tail of its log, so a sanitizer's leak report after it (the failed test returned early and
 * left its allocations) does not push it out of what the runner shows. */
#include "harness.h"

#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static void failed_check_shown_before_a_long_report(void **state)
{
    (void)state;
    char dir[] = "/tmp/st_run_sh_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char p[256], cmd[1024];
    snprintf(p, sizeof p, "%s/tests", dir);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/tests/unit", dir);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/tests/unit/test_fake", dir);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    /* a check that failed, then 300 lines of a leak report */
    fprintf(f, "#!/bin/sh\necho 1..1\necho 'not ok 1 - predict_agrees'\n"
               "echo '# ERROR: capacity 11.9 predicted vs 9.1 measured (+31 %%), expected within 15 %%'\n"
               "echo '# tests/integration/test_predict.c:97: error: Failure!'\n"
               "i=0; while [ $i -lt 300 ]; do echo \"    #$i 0x4f2a in malloc (leak)\"; i=$((i+1)); done\nexit 1\n");
    fclose(f);
    assert_int_equal(chmod(p, 0755), 0);
    static char out[1 << 16];
    snprintf(cmd, sizeof cmd, "BUILD=%s tests/run.sh", dir);
    char *const argv[] = { "/bin/sh", "-c", cmd, NULL };
    int rc = st_test_capture(argv, out, sizeof out);
    if (rc == 0)
        fail_msg("tests/run.sh passed a failing binary:\n%s", out);
    const char *want[] = { "FAIL unit/test_fake", "capacity 11.9 predicted vs 9.1 measured",
                           "tests/integration/test_predict.c:97: error: Failure!" };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        if (!strstr(out, want[i]))
            fail_msg("tests/run.sh's output lacks '%s':\n%.3000s", want[i], out);
    unlink(p);
    snprintf(p, sizeof p, "%s/tests/unit", dir);
    rmdir(p);
    snprintf(p, sizeof p, "%s/tests", dir);
    rmdir(p);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(failed_check_shown_before_a_long_report),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}
