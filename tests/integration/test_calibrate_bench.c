/* servetune calibrate from `servetune bench --json` runs (the path for users who measure with
 * bench, not with an audit): three runs of the emulator at time-scale 20, two of them with the
 * same seed and workload, so the second sent the first's prompts again and found them in the
 * server's prefix cache. calibrate fits and writes the file, and warns about that pair (naming
 * both files), not about the run with its own seed. */
#include "harness.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/file.h"
#include "emu_util.h"

static char dir[] = "/tmp/st-calbench-XXXXXX";


static int log_has(const char *log, const char *needle)
{
    size_t len;
    char err[256];
    char *text = st_read_file(log, 1 << 20, &len, err, sizeof err);
    int found = text && strstr(text, needle) != NULL;
    free(text);
    return found;
}

static void bench_runs_calibrate_and_same_prompts_warn(void **state)
{
    (void)state;
    assert_non_null(mkdtemp(dir));
    emu_child emu;
    const char *extra[] = { "--time-scale", "20", NULL };
    assert_int_equal(emu_start(&emu, "Qwen/Qwen3-8B", "H100", extra, 1), 0);
    char url[64], json[3][300], log[300];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", emu.port);
    snprintf(log, sizeof log, "%s/out.log", dir);
    const char *seeds[3] = { "1", "1", "2" };
    for (int i = 0; i < 3; i++) {
        snprintf(json[i], sizeof json[i], "%s/run%d.json", dir, i + 1);
        const char *argv[] = { "servetune",
                               "bench",
                               "--url",
                               url,
                               "-n",
                               "24",
                               "--rate",
                               "40",
                               "--seed",
                               seeds[i],
                               "--random-input-len",
                               "300",
                               "--random-output-len",
                               "16",
                               "--json",
                               json[i],
                               NULL };
        int rc = run_cli(argv, log);
        if (rc != 0)
            fail_msg("bench run %d exited %d (log %s)", i + 1, rc, log);
    }
    emu_stop(&emu);
    char cal[300];
    snprintf(cal, sizeof cal, "%s/cal.json", dir);
    const char *argv[] = { "servetune",    "calibrate",    "--bench-json", json[0],    "--bench-json",
                           json[1],        "--bench-json", json[2],        "--engine", "Qwen/Qwen3-8B --gpu H100",
                           "--time-scale", "20",           "-o",           cal,        NULL };
    int rc = run_cli(argv, log);
    if (rc != 0)
        fail_msg("calibrate exited %d (log %s)", rc, log);
    assert_true(log_has(cal, "\"schema\": \"servetune-calibration/1\""));
    char want[700];
    snprintf(want, sizeof want, "warning: %s sent the same prompts as %s", json[1], json[0]);
    if (!log_has(log, want))
        fail_msg("no warning '%s' (log %s)", want, log);
    snprintf(want, sizeof want, "warning: %s sent the same prompts", json[2]);
    assert_false(log_has(log, want));
    /* -o naming one of the measured runs: refused before the fit, the run left as it was */
    const char *same[] = { "servetune",    "calibrate", "--bench-json", json[0], "--engine", "Qwen/Qwen3-8B --gpu H100",
                           "--time-scale", "20",        "-o",           json[0], NULL };
    assert_int_equal(run_cli(same, log), 2);
    assert_true(log_has(log, "is a --bench-json run it reads"));
    assert_true(log_has(json[0], "\"schema\": \"servetune.bench/1\""));
    for (int i = 0; i < 3; i++)
        unlink(json[i]);
    unlink(cal);
    unlink(log);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(bench_runs_calibrate_and_same_prompts_warn),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
