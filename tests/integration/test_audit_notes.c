/* The notes of a real audit on the emulator: a configuration whose decode path is slowed down
 * by the emulator's fault injection (--fault-decode-slowdown 3) gets the decode-anomaly note
 * in report.md and report.json, and the healthy configurations do not. Small and bounded:
 * three configurations, two rates, 40 requests each, at time scale 10; servetune is killed
 * after 150 s; servers only on 127.0.0.1 (the emulator's default). And an emulator whose host
 * is too busy for its time scale is reported as such. */
#include "harness.h"

#define ST_IT_TMP_PREFIX "/tmp/st_audit_notes."
#include "audit_util.h"

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
            "search: {mode: burst}\n"
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

/* An emulator on a host too busy for its time scale (--fault-host-stall: the process sleeps
 * before sending each step's tokens): its /metrics counters say so, and the report warns that
 * the host, not the modelled engine, set those latencies (note emulator_lagged). */
static void emulator_lag_is_reported(void **state)
{
    (void)state;
    char spec[512], out[512], p[600];
    snprintf(spec, sizeof spec, "%s/stall.yaml", tmp);
    snprintf(out, sizeof out, "%s/stall", tmp);
    FILE *f = fopen(spec, "w");
    assert_non_null(f);
    fprintf(f, "engine:\n  kind: emulator\n  model: Qwen/Qwen3-8B\n"
               "  flags: [--gpu, H100, --time-scale, '10', --max-model-len, '4096', --fault-host-stall, 5ms]\n"
               "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.0}\npeak_rate: 10\n"
               "workload: {input_tokens: 256, output_tokens: 32, requests_per_rate: 40, seed: 3}\n"
               "rates: [4]\nwarmup_requests: 2\nslo: {ttft_p95_ms: 20000, tpot_p95_ms: 2000}\n"
               "timeouts: {startup: 20s, request: 60s, stop_grace: 2s}\nsearch: {mode: burst}\n");
    fclose(f);
    const char *args[] = { "audit", spec, "-o", out, "--no-prediction", NULL };
    int rc = run_servetune(args, 120);
    if (rc != 0) {
        snprintf(p, sizeof p, "%s/servetune.out", tmp);
        const char *log = slurp(p);
        fail_msg("servetune audit exited %d: %s", rc, log ? log : "");
    }
    snprintf(p, sizeof p, "%s/report.json", out);
    json_error_t je;
    json_t *j = json_load_file(p, 0, &je);
    if (!j)
        fail_msg("%s: %s", p, je.text);
    json_t *o;
    size_t i;
    int found = 0;
    json_array_foreach(json_object_get(j, "notes"), i, o)
    {
        if (strcmp(json_string_value(json_object_get(o, "kind")), "emulator_lagged"))
            continue;
        found++;
        assert_string_equal(json_string_value(json_object_get(o, "severity")), "warn");
        /* 5 ms of wall time per step at time scale 10: every token 50 ms of engine time late */
        double late = json_number_value(json_object_get(json_object_get(o, "evidence"), "late_token_share_max"));
        assert_true(late > 0.5);
    }
    assert_int_equal(found, 1);
    json_decref(j);
    snprintf(p, sizeof p, "%s/report.md", out);
    const char *md = slurp(p);
    assert_non_null(md);
    assert_non_null(strstr(md, "the emulator could not keep its engine model's schedule"));
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test_setup_teardown(decode_anomaly_in_reports, setup, teardown),
        cmocka_unit_test_setup_teardown(emulator_lag_is_reported, setup, teardown),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
