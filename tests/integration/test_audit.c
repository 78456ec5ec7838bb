/* servetune audit end to end on the emulator (small sizes, a high time scale): a normal
 * audit with a configuration that cannot start; the vllm adapter through a forwarding `vllm`
 * program on PATH; a port already taken; an engine that crashes mid-run and one that hangs
 * (the emulator's fault injection); an interrupted audit resumed. Every child is bounded in
 * time and killed at the end; servers only on 127.0.0.1. */
#include "harness.h"

#define ST_IT_TMP_PREFIX "/tmp/st_audit_it."
#include "audit_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sqlite3.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"

/* A small, fast spec: Qwen3-8B on the emulated H100 at a high time scale, tiny requests.
 * `extra_engine` goes into the engine mapping, `configs` is the configurations list. */
static void write_spec(const char *path, const char *kind, const char *extra_engine, const char *flags,
                       const char *rates, const char *configs, const char *extra)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f,
            "engine:\n  kind: %s\n  model: Qwen/Qwen3-8B\n%s"
            "  flags: [--gpu, H100, --time-scale, '20', --max-model-len, '4096', --seed, '%d'%s]\n"
            "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.0}\n"
            "peak_rate: 10\n"
            "workload: {input_tokens: 256, output_tokens: 16, requests_per_rate: 24, seed: 3}\n"
            "rates: [%s]\nwarmup_requests: 2\n"
            "slo: {ttft_p95_ms: 20000, tpot_p95_ms: 2000}\n"
            "timeouts: {startup: 8s, request: 60s, stop_grace: 2s}\n"
            "%s%s%s",
            kind, extra_engine, (int)getpid(), flags, rates, strstr(extra, "search:") ? "" : "search: {mode: burst}\n",
            configs, extra);
    fclose(f);
}

static const char *status_of(json_t *root, const char *name)
{
    return json_string_value(json_object_get(config_named(root, name), "status"));
}

static const char *failure_class(json_t *root, const char *name)
{
    json_t *f = json_object_get(config_named(root, name), "failure");
    return json_is_object(f) ? json_string_value(json_object_get(f, "class")) : NULL;
}

/* No servetune emulator may be left running from a test's audit. */
static void nothing_left(const char *marker)
{
    char cmd[512];
    (void)marker;
    /* Only this test process's engines: their flags carry --seed <our pid> (other test runs may
     * be going on on the same machine). */
    snprintf(cmd, sizeof cmd, "pgrep -f -- '[-]-max-model-len 4096 --seed %d( |$)' >/dev/null 2>&1", (int)getpid());
    for (int i = 0; i < 50; i++) {
        if (system(cmd) != 0)
            return;
        struct timespec ts = { 0, 100000000 };
        nanosleep(&ts, NULL);
    }
    fail_msg("a process matching '%s' is still running", marker);
}

static void end_to_end_with_a_config_that_cannot_start(void **state)
{
    (void)state;
    char spec[512], out[512];
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    write_spec(spec, "emulator", "", "", "1, 2",
               "configurations:\n"
               "  - name: baseline\n    reason: as deployed\n"
               "  - name: fp8-kv\n    add_flags: [--kv-cache-dtype, fp8]\n    reason: more KV blocks\n"
               "  - name: broken\n    add_flags: [--max-model-len, '999999']\n    reason: longer than the model\n"
               "  - name: too-long\n    add_flags: [--gpu-memory-utilization, '0.3', --max-model-len, '40960']\n    "
               "reason: does not fit\n",
               "");
    const char *args[] = { "audit", spec, "-o", out, "--quiet", NULL };
    int rc = st_it_run(args, NULL, 240, 0, NULL);
    assert_int_equal(rc, 1); /* ran, but configurations failed */
    json_t *j = load_json(out);
    assert_true(json_is_false(json_object_get(j, "partial")));
    assert_string_equal(status_of(j, "baseline"), "ok");
    assert_string_equal(status_of(j, "fp8-kv"), "ok");
    assert_string_equal(status_of(j, "broken"), "failed");
    assert_string_equal(failure_class(j, "broken"), "bad_flag");
    assert_string_equal(status_of(j, "too-long"), "failed");
    assert_string_equal(failure_class(j, "too-long"), "oom");
    /* the baseline passed at both rates with every request recorded */
    json_t *runs = json_object_get(config_named(j, "baseline"), "runs");
    assert_int_equal(json_array_size(runs), 2);
    for (size_t i = 0; i < 2; i++) {
        json_t *r = json_array_get(runs, i);
        assert_string_equal(json_string_value(json_object_get(r, "verdict")), "pass");
        assert_int_equal(json_integer_value(json_object_get(r, "completed")), 24);
    }
    json_t *cap = json_object_get(config_named(j, "baseline"), "capacity");
    assert_true(json_real_value(json_object_get(cap, "rps")) > 1.0);
    assert_true(json_is_true(json_object_get(cap, "highest_tested_passed")));
    /* $ per 1M output tokens recomputed from the reported figures with the documented formula */
    json_t *cost = json_object_get(config_named(j, "baseline"), "cost");
    double tps = json_real_value(json_object_get(cap, "output_tps"));
    assert_near(json_real_value(json_object_get(cost, "usd_per_1m_output_tokens")), 2.0 / (tps * 3600) * 1e6, 1e-6);
    json_decref(j);

    /* every request is in the database; the stored figures are recomputable from them */
    char db[600];
    snprintf(db, sizeof db, "%s/results.sqlite", out);
    sqlite3 *d;
    assert_int_equal(sqlite3_open_v2(db, &d, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *q;
    assert_int_equal(
        sqlite3_prepare_v2(d,
                           "SELECT r.completed, (SELECT count(*) FROM requests q WHERE q.run_id = r.id AND "
                           "q.status = 'ok'), r.delivered_rps, (SELECT count(*) * 1e9 / (max(q.end_t) - "
                           "min(q.sent)) FROM requests q WHERE q.run_id = r.id AND q.status = 'ok') "
                           "FROM runs r WHERE r.config = 'baseline'",
                           -1, &q, NULL),
        SQLITE_OK);
    int rows = 0;
    while (sqlite3_step(q) == SQLITE_ROW) {
        rows++;
        assert_int_equal(sqlite3_column_int(q, 0), sqlite3_column_int(q, 1));
        assert_near(sqlite3_column_double(q, 2), sqlite3_column_double(q, 3), 1e-6 * sqlite3_column_double(q, 2));
    }
    assert_int_equal(rows, 2);
    sqlite3_finalize(q);
    sqlite3_close(d);

    char md[600];
    snprintf(md, sizeof md, "%s/report.md", out);
    assert_true(file_has(md, "## Results, cheapest first"));
    assert_true(file_has(md, "did not start: bad\\_flag"));
    snprintf(md, sizeof md, "%s/logs/broken.log", out);
    assert_true(file_has(md, "max_model_len (999999)"));

    /* servetune report re-renders the same report from the database */
    char json1[600], before[1 << 16];
    snprintf(json1, sizeof json1, "%s/results.csv", out);
    FILE *f = fopen(json1, "rb");
    size_t nb = fread(before, 1, sizeof before - 1, f);
    before[nb] = '\0';
    fclose(f);
    unlink(json1);
    const char *rargs[] = { "report", out, NULL };
    assert_int_equal(st_it_run(rargs, NULL, 30, 0, NULL), 0);
    assert_true(file_has(json1, before));
    nothing_left(out);
}

static void vllm_adapter_through_a_forwarding_program(void **state)
{
    (void)state;
    char bin[512], spec[512], out[512];
    snprintf(bin, sizeof bin, "%s/bin", tmp);
    mkdir(bin, 0755);
    char vllm[600];
    snprintf(vllm, sizeof vllm, "%s/vllm", bin);
    FILE *f = fopen(vllm, "w");
    assert_non_null(f);
    /* The test's fake engine: `vllm serve MODEL ...` becomes `servetune emulate serve MODEL ...`. */
    fprintf(f, "#!/bin/sh\nexec '%s' emulate \"$@\"\n", st_test_bin());
    fclose(f);
    chmod(vllm, 0755);
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    write_spec(spec, "vllm", "", "", "2", "", "");
    /* not --quiet, not a TTY: line-oriented progress */
    const char *args[] = { "audit", spec, "-o", out, NULL };
    assert_int_equal(st_it_run(args, bin, 120, 0, NULL), 0);
    char so[600];
    snprintf(so, sizeof so, "%s/servetune.out", tmp);
    assert_true(file_has(so, "[1/1 baseline] starting the engine\n"));
    assert_true(file_has(so, "[1/1 baseline] rate 2 req/s: pass, 24/24 completed"));
    assert_false(file_has(so, "\r"));
    json_t *j = load_json(out);
    assert_string_equal(status_of(j, "baseline"), "ok");
    const char *cmd = json_string_value(json_object_get(config_named(j, "baseline"), "command"));
    assert_non_null(cmd);
    assert_true(!strncmp(cmd, "vllm serve Qwen/Qwen3-8B", 24));
    json_decref(j);
    nothing_left(out);
}

static void port_already_taken(void **state)
{
    (void)state;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 8), 0);
    socklen_t al = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &al);
    int port = ntohs(a.sin_port);
    char spec[512], out[512], eng[64];
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    snprintf(eng, sizeof eng, "  port: %d\n", port);
    write_spec(spec, "emulator", eng, "", "2", "", "");
    const char *args[] = { "audit", spec, "-o", out, "--quiet", NULL };
    assert_int_equal(st_it_run(args, NULL, 60, 0, NULL), 1);
    json_t *j = load_json(out);
    assert_string_equal(status_of(j, "baseline"), "failed");
    assert_string_equal(failure_class(j, "baseline"), "port_taken");
    json_decref(j);
    /* our listener is untouched */
    int c = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(connect(c, (struct sockaddr *)&a, sizeof a), 0);
    close(c);
    close(fd);
}

static void crash_and_hang_mid_run(void **state)
{
    (void)state;
    char spec[512], out[512];
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    /* warm-up uses 2 generation requests: the crash and the hang come during the first rate */
    write_spec(spec, "emulator", "", "", "1, 2",
               "configurations:\n"
               "  - name: baseline\n"
               "  - name: crashes\n    add_flags: [--fault-crash-after, '8']\n"
               "  - name: hangs\n    add_flags: [--fault-hang-after, '8']\n"
               "  - name: start-fails\n    add_flags: [--fault-startup-fail]\n"
               "  - name: start-slow\n    add_flags: [--fault-startup-delay, 60s]\n",
               "");
    const char *args[] = { "audit", spec, "-o", out, "--quiet", NULL };
    assert_int_equal(st_it_run(args, NULL, 180, 0, NULL), 1);
    json_t *j = load_json(out);
    assert_string_equal(status_of(j, "baseline"), "ok");
    assert_string_equal(status_of(j, "crashes"), "failed");
    assert_string_equal(failure_class(j, "crashes"), "crash");
    assert_string_equal(status_of(j, "hangs"), "failed");
    assert_string_equal(failure_class(j, "hangs"), "hang");
    assert_string_equal(status_of(j, "start-fails"), "failed");
    assert_string_equal(failure_class(j, "start-fails"), "crash");
    assert_string_equal(status_of(j, "start-slow"), "failed");
    assert_string_equal(failure_class(j, "start-slow"), "timeout");
    /* the broken runs are kept with their records */
    json_t *runs = json_object_get(config_named(j, "crashes"), "runs");
    assert_int_equal(json_array_size(runs), 1);
    json_t *r = json_array_get(runs, 0);
    assert_string_equal(json_string_value(json_object_get(r, "verdict")), "error");
    assert_true(json_integer_value(json_object_get(r, "completed")) >= 1);
    json_decref(j);
    nothing_left(out);
}

/* The interrupted-then-resumed audit gives the same final outcome as an uninterrupted one: the
 * same configurations, rates and verdicts, and the runs finished before the interruption are
 * kept as they were (same figures). */
static void resume_after_interrupt(void **state)
{
    (void)state;
    char spec[512], out[512], ref[512], db[600];
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    snprintf(ref, sizeof ref, "%s/ref", tmp);
    snprintf(db, sizeof db, "%s/results.sqlite", out);
    write_spec(spec, "emulator", "", "", "1, 2, 3",
               "configurations:\n  - name: baseline\n  - name: fp8-kv\n    add_flags: [--kv-cache-dtype, fp8]\n", "");
    const char *args[] = { "audit", spec, "-o", out, "--quiet", NULL };
    int rc = st_it_run(args, NULL, 180, 2, db);
    assert_int_equal(rc, 4);
    json_t *j = load_json(out);
    assert_true(json_is_true(json_object_get(j, "partial")));
    char md[600];
    snprintf(md, sizeof md, "%s/report.md", out);
    assert_true(file_has(md, "Partial report"));
    json_t *kept = json_deep_copy(json_object_get(config_named(j, "baseline"), "runs"));
    size_t nkept = json_array_size(kept);
    assert_true(nkept >= 2);
    json_decref(j);
    nothing_left(out);

    const char *rargs[] = { "audit", spec, "-o", out, "--quiet", "--resume", NULL };
    assert_int_equal(st_it_run(rargs, NULL, 180, 0, NULL), 0);
    const char *fargs[] = { "audit", spec, "-o", ref, "--quiet", NULL };
    assert_int_equal(st_it_run(fargs, NULL, 180, 0, NULL), 0);
    json_t *a = load_json(out), *b = load_json(ref);
    assert_true(json_is_false(json_object_get(a, "partial")));
    const char *names[] = { "baseline", "fp8-kv" };
    for (int k = 0; k < 2; k++) {
        json_t *ra = json_object_get(config_named(a, names[k]), "runs");
        json_t *rb = json_object_get(config_named(b, names[k]), "runs");
        assert_int_equal(json_array_size(ra), json_array_size(rb));
        for (size_t i = 0; i < json_array_size(ra); i++) {
            json_t *x = json_array_get(ra, i), *y = json_array_get(rb, i);
            assert_true(json_equal(json_object_get(x, "rate"), json_object_get(y, "rate")));
            assert_string_equal(json_string_value(json_object_get(x, "verdict")),
                                json_string_value(json_object_get(y, "verdict")));
        }
    }
    /* the runs finished before the interruption were not repeated */
    json_t *after = json_object_get(config_named(a, "baseline"), "runs");
    for (size_t i = 0; i < nkept; i++) {
        json_t *x = json_array_get(kept, i), *y = json_array_get(after, i);
        assert_true(json_equal(json_object_get(x, "run_key"), json_object_get(y, "run_key")));
        assert_true(json_equal(json_object_get(x, "delivered_rps"), json_object_get(y, "delivered_rps")));
        assert_true(json_equal(json_object_get(x, "ttft_p95_ms"), json_object_get(y, "ttft_p95_ms")));
    }
    json_decref(kept);
    json_decref(a);
    json_decref(b);
    nothing_left(out);
}

/* The sustained search end to end on the emulator: runs judged on their windows, an interrupted
 * audit resumed without repeating a finished run (the run keys cover sustained runs and their
 * replicates), and a capacity with its interval in every report. */
static void sustained_audit_resumes(void **state)
{
    (void)state;
    char spec[512], out[512], db[600];
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    snprintf(db, sizeof db, "%s/results.sqlite", out);
    write_spec(spec, "emulator", "", "", "20, 80, 320", "",
               "search: {mode: sustained, start: grid, min_window: 4s, min_window_requests: 60, max_duration: 40s, "
               "max_runs: 5, max_replicates: 1, tolerance: 0.5}\n");
    const char *args[] = { "audit", spec, "-o", out, "--quiet", NULL };
    int rc = st_it_run(args, NULL, 180, 2, db);
    assert_int_equal(rc, 4);
    json_t *j = load_json(out);
    json_t *kept = json_deep_copy(json_object_get(config_named(j, "baseline"), "runs"));
    size_t nkept = json_array_size(kept);
    assert_true(nkept >= 2);
    json_decref(j);
    nothing_left(out);
    const char *rargs[] = { "audit", spec, "-o", out, "--quiet", "--resume", NULL };
    assert_int_equal(st_it_run(rargs, NULL, 180, 0, NULL), 0);
    json_t *a = load_json(out);
    assert_true(json_is_false(json_object_get(a, "partial")));
    json_t *c = config_named(a, "baseline");
    json_t *cap = json_object_get(c, "capacity");
    assert_string_equal(json_string_value(json_object_get(cap, "method")), "sustained");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(json_object_get(a, "spec"), "search"), "mode")), "sustained");
    json_t *after = json_object_get(c, "runs");
    assert_true(json_array_size(after) >= nkept);
    for (size_t i = 0; i < nkept; i++) {
        json_t *x = json_array_get(kept, i), *y = json_array_get(after, i);
        assert_true(json_equal(json_object_get(x, "run_key"), json_object_get(y, "run_key")));
        assert_true(json_equal(json_object_get(x, "verdict"), json_object_get(y, "verdict")));
        /* every run keeps its analysis: window, trends, terms with intervals */
        json_t *sm = json_object_get(y, "summary");
        assert_true(json_is_object(sm));
        assert_non_null(json_object_get(sm, "growth"));
        assert_non_null(json_string_value(json_object_get(y, "verdict_text")));
    }
    if (json_is_true(json_object_get(json_object_get(c, "status"), "ok")) ||
        json_number_value(json_object_get(cap, "rps")) > 0)
        assert_true(json_number_value(json_object_get(cap, "ci_low")) <=
                    json_number_value(json_object_get(cap, "ci_high")));
    json_decref(kept);
    json_decref(a);
    char md[600];
    snprintf(md, sizeof md, "%s/report.md", out);
    assert_true(file_has(md, "Limit interval"));
    nothing_left(out);
}

/* The API key reaches the engine (--api-key from ${VAR}) and the requests, and nothing that
 * servetune writes holds it: database, reports, logs. */
static void api_key_is_never_written(void **state)
{
    (void)state;
    const char *key = "sk-audit-test-7f3a9c1e";
    setenv("ST_AUDIT_TEST_KEY", key, 1);
    char spec[512], out[512];
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    /* a `vllm` that prints its arguments first, as vLLM does with its non-default args */
    char bin[512], vllm[600];
    snprintf(bin, sizeof bin, "%s/bin", tmp);
    mkdir(bin, 0755);
    snprintf(vllm, sizeof vllm, "%s/vllm", bin);
    FILE *f = fopen(vllm, "w");
    assert_non_null(f);
    fprintf(f, "#!/bin/sh\necho \"args: $*\"\necho \"env: VLLM_API_KEY=$VLLM_API_KEY\"\nexec '%s' emulate \"$@\"\n",
            st_test_bin());
    fclose(f);
    chmod(vllm, 0755);
    write_spec(spec, "vllm", "  api_key_env: ST_AUDIT_TEST_KEY\n", ", --api-key, '${ST_AUDIT_TEST_KEY}'", "2", "", "");
    const char *args[] = { "audit", spec, "-o", out, "--quiet", NULL };
    assert_int_equal(st_it_run(args, bin, 120, 0, NULL), 0);
    unsetenv("ST_AUDIT_TEST_KEY");
    json_t *j = load_json(out);
    assert_string_equal(status_of(j, "baseline"), "ok"); /* so the key was used: the engine requires it */
    const char *cmd = json_string_value(json_object_get(config_named(j, "baseline"), "command"));
    /* the key went through the environment vLLM reads it from, never the command line (/proc) */
    assert_non_null(strstr(cmd, "VLLM_API_KEY='${ST_AUDIT_TEST_KEY}'"));
    assert_null(strstr(cmd, "--api-key"));
    json_decref(j);
    char grep[1024];
    snprintf(grep, sizeof grep, "grep -rqa -- '%s' '%s'", key, out);
    assert_int_not_equal(system(grep), 0);
    char log[600];
    snprintf(log, sizeof log, "%s/servetune.out", tmp);
    assert_false(file_has(log, key));
    snprintf(log, sizeof log, "%s/logs/baseline.log", out);
    assert_true(file_has(log, "args: serve Qwen/Qwen3-8B")); /* the engine printed its arguments... */
    assert_false(file_has(log, "--api-key"));                /* ...without the key... */
    assert_true(file_has(log, "env: VLLM_API_KEY=***"));     /* ...and its environment, redacted */
}

/* A trace workload (relative to the spec's folder), retimed to each rate. */
static void trace_workload(void **state)
{
    (void)state;
    char trace[512], spec[512], out[512];
    snprintf(trace, sizeof trace, "%s/trace.jsonl", tmp);
    FILE *f = fopen(trace, "w");
    assert_non_null(f);
    for (int i = 0; i < 30; i++)
        fprintf(f,
                "{\"timestamp\": %.2f, \"input_tokens\": %d, \"output_tokens\": 12, \"prefix_group\": 1, "
                "\"prefix_len\": 64}\n",
                i * 0.5 + (i % 3) * 0.2, 100 + 7 * i);
    fclose(f);
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    f = fopen(spec, "w");
    assert_non_null(f);
    fprintf(f,
            "engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100, --time-scale, '20', --max-model-len, "
            "'4096', --seed, '%d']}\n"
            "hardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 10\n"
            "workload: {trace: trace.jsonl, requests_per_rate: 30}\nrates: [2, 4]\nwarmup_requests: 2\n"
            "slo: {ttft_p95_ms: 20000, tpot_p95_ms: 2000}\nsearch: {mode: burst}\n",
            (int)getpid());
    fclose(f);
    const char *args[] = { "audit", spec, "-o", out, "--quiet", NULL };
    assert_int_equal(st_it_run(args, NULL, 120, 0, NULL), 0);
    json_t *j = load_json(out);
    assert_string_equal(status_of(j, "baseline"), "ok");
    json_t *runs = json_object_get(config_named(j, "baseline"), "runs");
    assert_int_equal(json_array_size(runs), 2);
    for (size_t i = 0; i < 2; i++)
        assert_int_equal(json_integer_value(json_object_get(json_array_get(runs, i), "completed")), 30);
    json_decref(j);
    nothing_left(out);
}

/* An endpoint: a server that is already running (here an emulator the test starts itself) is
 * audited without being started or stopped by servetune. */
static void endpoint_is_used_not_managed(void **state)
{
    (void)state;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t al = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &al);
    int port = ntohs(a.sin_port);
    close(fd);
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    char *argv[] = { (char *)st_test_bin(),
                     "emulate",
                     "serve",
                     "Qwen/Qwen3-8B",
                     "--gpu",
                     "H100",
                     "--time-scale",
                     "20",
                     "--host",
                     "127.0.0.1",
                     "--port",
                     ps,
                     NULL };
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, argv[0], &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    char spec[512], out[512], url[128];
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    FILE *f = fopen(spec, "w");
    assert_non_null(f);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    /* No --time-scale flag reaches the audit for an endpoint: the rates are wall-clock and the
     * SLO generous. */
    fprintf(f,
            "engine: {kind: endpoint, model: Qwen/Qwen3-8B, url: '%s'}\n"
            "hardware: {gpu: H100, price_per_gpu_hour: 2.0}\npeak_rate: 10\n"
            "workload: {input_tokens: 256, output_tokens: 16, requests_per_rate: 20, seed: 3}\n"
            "rates: [20]\nwarmup_requests: 2\nslo: {ttft_p95_ms: 20000, tpot_p95_ms: 2000}\n"
            "timeouts: {startup: 10s, request: 30s}\nsearch: {mode: burst}\n",
            url);
    fclose(f);
    const char *args[] = { "audit", spec, "-o", out, "--quiet", NULL };
    int rc = st_it_run(args, NULL, 60, 0, NULL);
    int alive = kill(pid, 0) == 0 && waitpid(pid, NULL, WNOHANG) == 0;
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    assert_int_equal(rc, 0);
    assert_true(alive); /* servetune did not stop a server it did not start */
    json_t *j = load_json(out);
    assert_string_equal(status_of(j, "baseline"), "ok");
    json_decref(j);
    /* an endpoint nobody answers at: the wait is said with its bound (nothing is "started"), then
     * the configuration fails naming the refused connection */
    f = fopen(spec, "w");
    assert_non_null(f);
    fprintf(f,
            "engine: {kind: endpoint, model: Qwen/Qwen3-8B, url: 'http://127.0.0.1:%d'}\n"
            "hardware: {gpu: H100, price_per_gpu_hour: 2.0}\npeak_rate: 10\n"
            "workload: {input_tokens: 256, output_tokens: 16, requests_per_rate: 20, seed: 3}\n"
            "rates: [20]\nwarmup_requests: 2\nslo: {ttft_p95_ms: 20000, tpot_p95_ms: 2000}\n"
            "timeouts: {startup: 1s, request: 30s}\nsearch: {mode: burst}\n",
            port);
    fclose(f);
    snprintf(out, sizeof out, "%s/out2", tmp);
    const char *args2[] = { "audit", spec, "-o", out, NULL };
    st_it_run(args2, NULL, 60, 0, NULL);
    char so[600];
    snprintf(so, sizeof so, "%s/servetune.out", tmp);
    assert_true(
        file_has(so, "[1/1 baseline] connecting to the endpoint (it must answer within 1 s, timeouts.startup)"));
    assert_false(file_has(so, "starting the engine"));
    assert_true(file_has(so, "Connection refused"));
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test_setup_teardown(end_to_end_with_a_config_that_cannot_start, setup, teardown),
        cmocka_unit_test_setup_teardown(vllm_adapter_through_a_forwarding_program, setup, teardown),
        cmocka_unit_test_setup_teardown(port_already_taken, setup, teardown),
        cmocka_unit_test_setup_teardown(crash_and_hang_mid_run, setup, teardown),
        cmocka_unit_test_setup_teardown(resume_after_interrupt, setup, teardown),
        cmocka_unit_test_setup_teardown(sustained_audit_resumes, setup, teardown),
        cmocka_unit_test_setup_teardown(endpoint_is_used_not_managed, setup, teardown),
        cmocka_unit_test_setup_teardown(api_key_is_never_written, setup, teardown),
        cmocka_unit_test_setup_teardown(trace_workload, setup, teardown),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
