/* scripts/demo-time-scale, the demo's choice of the emulator's time scale: it measures each
 * candidate on this host and keeps one only when the emulator sent its tokens on time and the
 * client kept its schedule. A host that cannot keep up (the emulator stalled 30 ms of wall time
 * before each step, --fault-host-stall) is measured as lagged and no scale is called sustained:
 * the script says so for each, exits 1 and names the lowest, which the demo then uses and says. */
#include "harness.h"

#include <stdio.h>

static void a_lagging_host_is_measured_not_assumed(void **state)
{
    (void)state;
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "SERVETUNE_DEMO_PROBE_S=2 SERVETUNE_DEMO_PROBE_RATE=2 SERVETUNE_DEMO_EMU_FLAGS='--fault-host-stall 30ms' "
             "scripts/demo-time-scale %s 3",
             st_test_bin());
    char *const argv[] = { "/bin/sh", "-c", cmd, NULL };
    static char out[1 << 16];
    int rc = st_test_capture(argv, out, sizeof out);
    if (rc != 1)
        fail_msg("exit %d (expected 1: no scale sustained):\n%s", rc, out);
    const char *want[] = { "time scale 3: 20 requests at 6 req/s wall:", "over 100 ms; client kept its schedule",
                           "-> lagged" };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        if (!strstr(out, want[i]))
            fail_msg("the script's output lacks '%s':\n%s", want[i], out);
    /* the chosen (lowest) scale alone on its last line */
    size_t n = strlen(out);
    while (n && out[n - 1] == '\n')
        out[--n] = '\0';
    const char *last = strrchr(out, '\n');
    last = last ? last + 1 : out;
    if (strcmp(last, "3") && !strstr(out, "\n3\n") && strncmp(out, "3\n", 2))
        fail_msg("the chosen scale 3 is not printed on a line of its own:\n%s", out);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(a_lagging_host_is_measured_not_assumed),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}
