/* The notes of a real audit on the emulator: a configuration whose decode path is slowed down
 * by the emulator's fault injection (--fault-decode-slowdown 3) gets the decode-anomaly note
 * in report.md and report.json, and the healthy configurations do not. Small and bounded:
 * three configurations, two rates, 40 requests each, at time scale 10; servetune is killed
 * after 150 s; servers only on 127.0.0.1 (the emulator's default). */
#include "harness.h"

#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"

extern char **environ;

static char tmp[256];

static int setup(void **state)
{
    (void)state;
    snprintf(tmp, sizeof tmp, "/tmp/st_audit_notes.XXXXXX");
    return mkdtemp(tmp) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf -- '%s'", tmp);
    if (strncmp(tmp, "/tmp/st_audit_notes.", 20) == 0)
        (void)!system(cmd);
    return 0;
}

/* Runs servetune with args; at most limit_s seconds (then SIGKILL). Returns its exit status. */
static int run_servetune(const char *const *args, double limit_s)
{
    char *argv[16];
    int n = 0;
    argv[n++] = (char *)st_test_bin();
    for (; *args && n < 15; args++)
        argv[n++] = (char *)*args;
    argv[n] = NULL;
    char logp[512];
    snprintf(logp, sizeof logp, "%s/servetune.out", tmp);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, logp, O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    int e = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    assert_int_equal(e, 0);
    st_ns deadline = st_now() + st_s_to_ns(limit_s);
    int st = 0;
    for (;;) {
        if (waitpid(pid, &st, WNOHANG) == pid)
            break;
        if (st_now() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            fail_msg("servetune did not finish within %.0f s (see %s)", limit_s, logp);
        }
        struct timespec ts = { 0, 20000000 };
        nanosleep(&ts, NULL);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    static char buf[1 << 21];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void decode_anomaly_in_reports(void **state)
{
    (void)state;
    char spec[512], out[512], p[600];
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    FILE *f = fopen(spec, "w");
    assert_non_null(f);
    fprintf(f,
            "engine:\n  kind: emulator\n  model: Qwen/Qwen3-8B\n"
            "  flags: [--gpu, H100, --time-scale, '10', --max-model-len, '4096', --seed, '%d']\n"
            "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.0}\n"
            "peak_rate: 10\n"
            "workload: {input_tokens: 256, output_tokens: 32, requests_per_rate: 40, seed: 3}\n"
            "rates: [4, 16]\nwarmup_requests: 2\n"
            "slo: {ttft_p95_ms: 20000, tpot_p95_ms: 2000}\n"
            "timeouts: {startup: 20s, request: 60s, stop_grace: 2s}\n"
            "configurations:\n"
            "  - name: baseline\n"
            "  - name: fp8-ckpt\n    model: Qwen/Qwen3-8B-FP8\n"
            "  - name: slow-decode\n    add_flags: [--fault-decode-slowdown, '3']\n",
            (int)getpid());
    fclose(f);
    const char *args[] = { "audit", spec, "-o", out, NULL };
    int rc = run_servetune(args, 150);
    if (rc != 0) {
        snprintf(p, sizeof p, "%s/servetune.out", tmp);
        const char *log = slurp(p);
        fail_msg("servetune audit exited %d: %s", rc, log ? log : "");
    }

    /* report.md: the note under the slow configuration, with the advice */
    snprintf(p, sizeof p, "%s/report.md", out);
    const char *md = slurp(p);
    assert_non_null(md);
    const char *x = strstr(md, "- **slow-decode** (caution): its p95 TPOT is flat and far above the other "
                               "configurations' at every rate");
    if (!x)
        fail_msg("no decode-anomaly note in report.md:\n%s", strstr(md, "### Notes") ? strstr(md, "### Notes") : md);
    assert_non_null(strstr(x, "kernel or engine path problem rather than load: rerun before concluding"));
    assert_null(strstr(md, "- **baseline** (caution): its p95 TPOT is flat"));
    assert_null(strstr(md, "- **fp8-ckpt** (caution): its p95 TPOT is flat"));

    /* report.json: one decode_anomaly note, for slow-decode, at both rates, with its evidence */
    snprintf(p, sizeof p, "%s/report.json", out);
    json_error_t je;
    json_t *j = json_load_file(p, 0, &je);
    if (!j)
        fail_msg("%s: %s", p, je.text);
    json_t *notes = json_object_get(j, "notes"), *o;
    assert_true(json_is_array(notes));
    size_t i;
    int found = 0;
    json_array_foreach(notes, i, o)
    {
        if (strcmp(json_string_value(json_object_get(o, "kind")), "decode_anomaly"))
            continue;
        found++;
        assert_string_equal(json_string_value(json_object_get(o, "config")), "slow-decode");
        assert_string_equal(json_string_value(json_object_get(o, "severity")), "warn");
        json_t *rates = json_object_get(o, "rates");
        assert_int_equal(json_array_size(rates), 2);
        assert_near(json_number_value(json_array_get(rates, 0)), 4, 0);
        double ratio = json_number_value(json_object_get(json_object_get(o, "evidence"), "ratio"));
        assert_true(ratio > 2);
    }
    assert_int_equal(found, 1);
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test_setup_teardown(decode_anomaly_in_reports, setup, teardown),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
