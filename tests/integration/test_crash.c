/* Crash safety of servetune audit on the emulator: kill -9 in the middle of a run leaves no engine
 * running and no secret in clear; --resume stops engines an earlier audit left behind, retries a
 * configuration whose port was taken, and keeps the facts of a configuration whose "done" mark was
 * lost; a fixed engine.port serves every configuration; one servetune per output folder; a refused
 * --resume changes nothing; an audit in which every request failed exits 1. Every child is bounded
 * in time and killed at the end; servers only on 127.0.0.1. */
#include "harness.h"

#define ST_IT_TMP_PREFIX "/tmp/st_crash_it."
#include "audit_util.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "engine/process.h"

#define KEY "sk-crash-test-5b2e91d4c7"
#define HF "hf_crashtest_93ac1e"

/* An emulator audit, small and fast; `engine_extra` goes into the engine mapping, `flags_extra`
 * after the flags, `configs` is the configurations list. */
static void write_spec(const char *path, const char *kind, const char *engine_extra, const char *flags_extra,
                       const char *rates, const char *configs)
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
            "%s%s",
            kind, engine_extra, (int)getpid(), flags_extra, rates, configs,
            strstr(configs, "search:") ? "" : "search: {mode: burst}\n");
    fclose(f);
}

/* This test binary, which doubles as an engine's escaping worker (main, "--escaped-worker"). */
static char self_exe[4096];

/* A `vllm` on PATH (tmp/bin) that prints its arguments and its VLLM_API_KEY, as vLLM logs its
 * non-default arguments, runs `pre` (a shell line, or ""), then becomes the emulator. Returns the
 * folder to put first on PATH. */
static const char *fake_vllm_with(const char *pre)
{
    static char bin[512];
    char vllm[600];
    snprintf(bin, sizeof bin, "%s/bin", tmp);
    mkdir(bin, 0755);
    snprintf(vllm, sizeof vllm, "%s/vllm", bin);
    FILE *f = fopen(vllm, "w");
    assert_non_null(f);
    fprintf(f,
            "#!/bin/sh\necho \"args: $*\"\necho \"env: VLLM_API_KEY=$VLLM_API_KEY\"\necho \"hf: $HF_TOKEN\"\n"
            "%s\nexec '%s' emulate \"$@\"\n",
            pre, st_test_bin());
    fclose(f);
    chmod(vllm, 0755);
    return bin;
}

static const char *fake_vllm(void) { return fake_vllm_with(""); }

static int count_runs(const char *out)
{
    char db[600];
    snprintf(db, sizeof db, "%s/results.sqlite", out);
    sqlite3 *d;
    int n = -1;
    if (sqlite3_open_v2(db, &d, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_stmt *q;
        if (sqlite3_prepare_v2(d, "SELECT count(*) FROM runs", -1, &q, NULL) == SQLITE_OK) {
            if (sqlite3_step(q) == SQLITE_ROW)
                n = sqlite3_column_int(q, 0);
            sqlite3_finalize(q);
        }
    }
    sqlite3_close(d);
    return n;
}

/* Waits (bounded) until DIR's database holds at least n rate runs. */
static void wait_runs(const char *out, int n, double limit_s, pid_t pid)
{
    st_ns dl = st_now() + st_s_to_ns(limit_s);
    while (count_runs(out) < n) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid)
            fail_msg("servetune ended before %d runs were stored", n);
        if (st_now() > dl) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            fail_msg("fewer than %d runs after %.0f s", n, limit_s);
        }
        struct timespec ts = { 0, 20000000 };
        nanosleep(&ts, NULL);
    }
}

/* This test's emulators: their flags carry --seed <our pid>. */
static int engines_running(void)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "pgrep -f -- '[-]-max-model-len 4096 --seed %d( |$)' >/dev/null 2>&1", (int)getpid());
    return system(cmd) == 0;
}

static int wait_no_engine(double limit_s)
{
    st_ns dl = st_now() + st_s_to_ns(limit_s);
    while (engines_running()) {
        if (st_now() > dl)
            return 0;
        struct timespec ts = { 0, 50000000 };
        nanosleep(&ts, NULL);
    }
    return 1;
}

static int out_has(const char *out, const char *needle)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "grep -rqa -- '%s' '%s'", needle, out);
    return system(cmd) == 0;
}

/* An engine whose worker leaves its process group (setsid, as Ray's raylet does) and ignores
 * SIGTERM: when the audit ends, nothing carrying the folder's tag is left running. */
static void audit_stops_workers_outside_the_engine_group(void **state)
{
    (void)state;
    char spec[512], out[512], logs[600], tag[64], pre[4200];
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    snprintf(pre, sizeof pre, "'%s' --escaped-worker", self_exe);
    const char *bin = fake_vllm_with(pre);
    write_spec(spec, "vllm", "", "", "2", "");
    const char *args[] = { "audit", spec, "-o", out, "--quiet", NULL };
    assert_int_equal(st_it_run(args, bin, 120, 0, NULL), 0);
    snprintf(logs, sizeof logs, "%s/logs", out);
    assert_int_equal(st_proc_dir_tag(logs, tag, sizeof tag), 0);
    int left = st_proc_count_tagged(tag);
    if (left)
        st_proc_kill_tagged(tag, 0); /* not left running after a failure either */
    assert_int_equal(left, 0);
    char log[700];
    snprintf(log, sizeof log, "%s/baseline.log", logs);
    assert_true(file_has(log, "escaped worker started")); /* there was one to stop */
}

/* kill -9 of the audit while an engine serves a rate: the engine goes (it gets SIGTERM when its
 * parent dies), and its log never held the key in clear, even though servetune never got to stop
 * it. --resume then finishes the audit. */
static void kill9_leaves_no_engine_and_no_secret(void **state)
{
    (void)state;
    setenv("ST_CRASH_TEST_KEY", KEY, 1);
    setenv("ST_CRASH_TEST_HF", HF, 1);
    char spec[512], out[512], logs[600], tag[64];
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    const char *bin = fake_vllm();
    write_spec(spec, "vllm", "  api_key_env: ST_CRASH_TEST_KEY\n  env: {HF_TOKEN: '${ST_CRASH_TEST_HF}'}\n",
               ", --api-key, '${ST_CRASH_TEST_KEY}'", "1, 2, 4", "");
    const char *args[] = { "audit", spec, "-o", out, "--quiet", NULL };
    pid_t pid = st_it_spawn(args, bin);
    wait_runs(out, 1, 120, pid);
    assert_true(engines_running());
    snprintf(logs, sizeof logs, "%s/logs", out);
    assert_int_equal(st_proc_dir_tag(logs, tag, sizeof tag), 0);
    assert_true(st_proc_count_tagged(tag) > 0); /* the engine carries the folder's tag */
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    assert_true(wait_no_engine(10));
    assert_int_equal(st_proc_count_tagged(tag), 0);
    char log[700];
    snprintf(log, sizeof log, "%s/baseline.log", logs);
    assert_true(file_has(log, "env: VLLM_API_KEY=***")); /* the engine printed it; it was redacted as written */
    assert_true(file_has(log, "hf: ***"));               /* a value from env: as well */
    assert_false(out_has(out, KEY));
    assert_false(out_has(out, HF));
    /* the audit resumes and finishes */
    const char *res[] = { "audit", spec, "-o", out, "--quiet", "--resume", NULL };
    assert_int_equal(st_it_run(res, bin, 120, 0, NULL), 0);
    assert_false(out_has(out, KEY));
    assert_false(out_has(out, HF));
    assert_true(wait_no_engine(10));
    unsetenv("ST_CRASH_TEST_KEY");
    unsetenv("ST_CRASH_TEST_HF");
}

/* An engine an earlier audit of the folder left running (here a process of ours carrying the
 * folder's tag, in its own session, as one that escaped the parent-death signal would be) is
 * stopped by --resume; a process with another tag is not. */
static void resume_stops_stale_engines(void **state)
{
    (void)state;
    char spec[512], out[512], logs[600], tag[64];
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    write_spec(spec, "emulator", "", "", "2", "");
    const char *args[] = { "audit", spec, "-o", out, "--quiet", NULL };
    assert_int_equal(run_servetune(args, 120), 0);
    snprintf(logs, sizeof logs, "%s/logs", out);
    assert_int_equal(st_proc_dir_tag(logs, tag, sizeof tag), 0);
    pid_t pids[2];
    for (int i = 0; i < 2; i++) {
        char var[128];
        snprintf(var, sizeof var, "%s=%s", ST_ENGINE_TAG_VAR, i == 0 ? tag : "st-someone-else");
        char *env[] = { var, NULL };
        char *argv[] = { "sleep", "600", NULL };
        posix_spawnattr_t at;
        posix_spawnattr_init(&at);
        posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID);
        assert_int_equal(posix_spawn(&pids[i], "/bin/sleep", NULL, &at, argv, env), 0);
        posix_spawnattr_destroy(&at);
    }
    st_ns dl = st_now() + st_s_to_ns(5);
    while (st_proc_count_tagged(tag) < 1 && st_now() < dl)
        nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
    assert_int_equal(st_proc_count_tagged(tag), 1);
    const char *res[] = { "audit", spec, "-o", out, "--resume", NULL };
    assert_int_equal(run_servetune(res, 60), 0);
    int st;
    assert_int_equal(waitpid(pids[0], &st, WNOHANG), pids[0]); /* stopped... */
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    assert_int_equal(waitpid(pids[1], &st, WNOHANG), 0); /* ...the other one not */
    kill(pids[1], SIGKILL);
    waitpid(pids[1], NULL, 0);
    char p[600];
    snprintf(p, sizeof p, "%s/servetune.out", tmp);
    assert_true(file_has(p, "stopped 1 engine process left running by an earlier audit"));
}

static int listen_on(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 4), 0);
    return fd;
}

/* A fixed engine.port: taken at first, both configurations fail port_taken; once it is free,
 * --resume tries them again and both run on it, one after the other (the first engine's
 * connections in TIME_WAIT do not make it taken for the second). */
static void fixed_port_serves_every_config_and_resume_retries(void **state)
{
    (void)state;
    int port = st_proc_port_pick();
    assert_true(port > 0);
    char spec[512], out[512], eng[64];
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    snprintf(eng, sizeof eng, "  port: %d\n", port);
    write_spec(spec, "emulator", eng, "", "2",
               "configurations:\n  - name: baseline\n  - name: seqs-8\n    add_flags: [--max-num-seqs, '8']\n");
    int fd = listen_on(port);
    const char *args[] = { "audit", spec, "-o", out, "--quiet", NULL };
    assert_int_equal(run_servetune(args, 120), 1);
    close(fd);
    json_t *j = load_json(out);
    for (int i = 0; i < 2; i++) {
        json_t *f = json_object_get(config_named(j, i ? "seqs-8" : "baseline"), "failure");
        assert_string_equal(json_string_value(json_object_get(f, "class")), "port_taken");
    }
    json_decref(j);
    const char *res[] = { "audit", spec, "-o", out, "--quiet", "--resume", NULL };
    assert_int_equal(run_servetune(res, 120), 0);
    j = load_json(out);
    for (int i = 0; i < 2; i++) {
        json_t *c = config_named(j, i ? "seqs-8" : "baseline");
        assert_string_equal(json_string_value(json_object_get(c, "status")), "ok");
        char want[32];
        snprintf(want, sizeof want, "--port %d", port);
        assert_non_null(strstr(json_string_value(json_object_get(c, "command")), want));
    }
    json_decref(j);
    assert_true(wait_no_engine(10));
}

/* One servetune per output folder: a second one (here --resume while the first still runs) is
 * refused at once and changes nothing; the first finishes normally. */
static void second_servetune_on_one_folder_is_refused(void **state)
{
    (void)state;
    char spec[512], out[512], p[600];
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    write_spec(spec, "emulator", "", "", "1, 2, 4", "");
    const char *args[] = { "audit", spec, "-o", out, "--quiet", NULL };
    pid_t pid = st_it_spawn(args, NULL);
    wait_runs(out, 1, 120, pid);
    const char *res[] = { "audit", spec, "-o", out, "--quiet", "--resume", NULL };
    assert_int_equal(run_servetune(res, 30), 2);
    snprintf(p, sizeof p, "%s/servetune.out", tmp);
    assert_true(file_has(p, "is in use by another servetune"));
    int st;
    st_ns dl = st_now() + st_s_to_ns(120);
    while (waitpid(pid, &st, WNOHANG) != pid) {
        if (st_now() > dl) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            fail_msg("the first audit did not finish");
        }
        nanosleep(&(struct timespec){ 0, 50000000 }, NULL);
    }
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(count_runs(out), 3);
}

/* A crash after a configuration's last run but before its "done" mark: --resume finds every run
 * in the store, starts no engine, and keeps what the row knew (command, startup time, facts). */
static void crash_before_done_mark_keeps_facts(void **state)
{
    (void)state;
    char spec[512], out[512], db[600];
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    snprintf(db, sizeof db, "%s/results.sqlite", out);
    write_spec(spec, "emulator", "", "", "2", "");
    const char *args[] = { "audit", spec, "-o", out, "--quiet", NULL };
    assert_int_equal(run_servetune(args, 120), 0);
    sqlite3 *d;
    assert_int_equal(sqlite3_open(db, &d), SQLITE_OK);
    char before[3][4096];
    sqlite3_stmt *q;
    const char *sel = "SELECT argv, facts, startup_s, status FROM configs WHERE name = 'baseline'";
    assert_int_equal(sqlite3_prepare_v2(d, sel, -1, &q, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    for (int i = 0; i < 3; i++)
        snprintf(before[i], sizeof before[i], "%s", (const char *)sqlite3_column_text(q, i));
    sqlite3_finalize(q);
    assert_non_null(strstr(before[1], "kv_cache_line"));
    /* what the row looks like when servetune dies between the last run and the done mark */
    assert_int_equal(
        sqlite3_exec(d, "UPDATE configs SET status = 'running'; UPDATE audit SET partial = 1", NULL, NULL, NULL),
        SQLITE_OK);
    sqlite3_close(d);
    const char *res[] = { "audit", spec, "-o", out, "--quiet", "--resume", NULL };
    assert_int_equal(run_servetune(res, 60), 0);
    assert_int_equal(sqlite3_open(db, &d), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(d, sel, -1, &q, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    for (int i = 0; i < 3; i++)
        assert_string_equal((const char *)sqlite3_column_text(q, i), before[i]);
    assert_string_equal((const char *)sqlite3_column_text(q, 3), "done");
    sqlite3_finalize(q);
    sqlite3_close(d);
}

/* Every file under dir with its size, modification time and contents, in one string. */
static char *snapshot(const char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && find . -type f -printf '%%P %%s %%T@\\n' | sort && find . -type f | sort | xargs sha256sum",
             dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 16, n = 0;
    char *s = malloc(cap);
    size_t got;
    while (s && (got = fread(s + n, 1, cap - n - 1, p)) > 0)
        n += got;
    pclose(p);
    s[n] = '\0';
    return s;
}

/* A refused --resume (another spec; a folder that holds a prediction), a second audit without
 * --resume and a prediction over a measured audit: each exits 2 and leaves every file as it was. */
static void refused_resume_changes_nothing(void **state)
{
    (void)state;
    char spec[512], spec2[512], out[512], pdir[512];
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    snprintf(spec2, sizeof spec2, "%s/other.yaml", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    snprintf(pdir, sizeof pdir, "%s/pred", tmp);
    write_spec(spec, "emulator", "", "", "2", "");
    write_spec(spec2, "emulator", "", "", "3", "");
    const char *args[] = { "audit", spec, "-o", out, "--quiet", NULL };
    assert_int_equal(run_servetune(args, 120), 0);
    char *before = snapshot(out);
    const char *other[] = { "audit", spec2, "-o", out, "--quiet", "--resume", NULL };
    assert_int_equal(run_servetune(other, 30), 2);
    assert_int_equal(run_servetune(args, 30), 2);
    const char *pred_over[] = { "predict", spec, "-o", out, "--quiet", NULL };
    assert_int_equal(run_servetune(pred_over, 30), 2);
    char *after = snapshot(out);
    assert_string_equal(before, after);
    free(before);
    free(after);

    const char *pred[] = { "predict", spec, "-o", pdir, "--quiet", NULL };
    assert_int_equal(run_servetune(pred, 60), 0);
    before = snapshot(pdir);
    const char *over[] = { "audit", spec, "-o", pdir, "--quiet", "--resume", NULL };
    assert_int_equal(run_servetune(over, 30), 2);
    after = snapshot(pdir);
    assert_string_equal(before, after);
    free(before);
    free(after);
}

/* Every request failing (the engine answers 500 to all of them) is a failed audit, not a
 * successful one with a capacity of nothing. */
static void every_request_failed_exits_1(void **state)
{
    (void)state;
    char spec[512], out[512], p[600];
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    write_spec(spec, "emulator", "", ", --fault-500-rate, '1'", "2", "");
    const char *args[] = { "audit", spec, "-o", out, "--quiet", NULL };
    assert_int_equal(run_servetune(args, 120), 1);
    snprintf(p, sizeof p, "%s/servetune.out", tmp);
    assert_true(file_has(p, "baseline: every one of its 24 requests failed"));
    assert_true(wait_no_engine(10));
    /* the sustained search: each run stops at once with the engine's error (not at max_duration) */
    char out2[600];
    snprintf(out2, sizeof out2, "%s/out2", tmp);
    write_spec(spec, "emulator", "", ", --fault-500-rate, '1'", "2", "search: {max_runs: 3}\n");
    const char *args2[] = { "audit", spec, "-o", out2, "--quiet", "--no-prediction", NULL };
    st_ns t0 = st_now();
    assert_int_equal(run_servetune(args2, 120), 1);
    assert_true(st_ns_to_s(st_now() - t0) < 60);
    assert_true(file_has(p, "every one of its"));
    json_t *j = load_json(out2);
    json_t *runs = json_object_get(config_named(j, "baseline"), "runs");
    assert_true(json_array_size(runs) > 0);
    assert_non_null(strstr(json_string_value(json_object_get(json_array_get(runs, 0), "why")), "requests fail"));
    json_decref(j);
    assert_true(wait_no_engine(10));
}

/* The database cannot grow (a file size limit stands in for a full disk): the audit stops with the
 * system's reason, not SQLite's "not an error" left by the rollback. */
static void full_disk_is_named(void **state)
{
    (void)state;
    char spec[512], out[512], logp[600];
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    snprintf(logp, sizeof logp, "%s/servetune.out", tmp);
    FILE *f = fopen(spec, "w");
    assert_non_null(f);
    fprintf(f,
            "engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100, --time-scale, '20', "
            "--max-model-len, '4096', --seed, '%d']}\n"
            "hardware: {gpu: H100, price_per_gpu_hour: 2.0}\npeak_rate: 10\n"
            "workload: {input_tokens: 256, output_tokens: 16, requests_per_rate: 200, seed: 3}\n"
            "rates: [20, 40]\nwarmup_requests: 2\nslo: {ttft_p95_ms: 20000, tpot_p95_ms: 2000}\n",
            (int)getpid());
    fclose(f);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(logp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        struct rlimit rl = { 200 * 1024, 200 * 1024 };
        setrlimit(RLIMIT_FSIZE, &rl);
        signal(SIGXFSZ, SIG_IGN); /* a write past the limit fails with EFBIG instead */
        execl(st_test_bin(), st_test_bin(), "audit", spec, "-o", out, "-q", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    st_ns dl = st_now() + st_s_to_ns(120);
    while (waitpid(pid, &st, WNOHANG) != pid) {
        if (st_now() > dl) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            fail_msg("the audit did not finish");
        }
        nanosleep(&(struct timespec){ 0, 20000000 }, NULL);
    }
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 1);
    assert_true(file_has(logp, "results database: disk I/O error (File too large)"));
    assert_false(file_has(logp, "not an error"));
    assert_true(wait_no_engine(10));
}

/* One validation path: --check, audit and predict refuse the same spec with the same reason,
 * before anything is created or started. */
static void check_audit_and_predict_agree(void **state)
{
    (void)state;
    char spec[512], out[512], logp[600];
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    snprintf(logp, sizeof logp, "%s/servetune.out", tmp);
    write_spec(spec, "emulator", "", ", --max-num-seqs, lots", "2", "");
    const char *runs[][8] = {
        { "audit", "--check", spec, NULL },
        { "audit", spec, "-o", out, NULL },
        { "predict", spec, "-o", out, NULL },
    };
    for (int i = 0; i < 3; i++) {
        unlink(logp);
        assert_int_equal(run_servetune(runs[i], 30), 2);
        assert_true(file_has(logp, "spec.yaml: engine.flags: the emulator refuses its flags: --max-num-seqs: "
                                   "expected an integer, got 'lots'"));
        struct stat sb;
        assert_int_not_equal(stat(out, &sb), 0); /* nothing created */
    }
}

/* An engine's worker that leaves the engine's process group (setsid) and ignores SIGTERM; the
 * engine goes on at once. Bounded: it ends by itself after 600 s. */
static int escaped_worker(void)
{
    pid_t c = fork();
    if (c < 0)
        return 1;
    if (c == 0) {
        setsid();
        signal(SIGTERM, SIG_IGN);
        printf("escaped worker started\n");
        fflush(stdout);
        for (int i = 0; i < 600; i++)
            sleep(1);
        _exit(0);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--escaped-worker"))
        return escaped_worker();
    ssize_t sl = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (sl <= 0)
        return 1;
    self_exe[sl] = '\0';
    const struct CMUnitTest t[] = {
        cmocka_unit_test_setup_teardown(audit_stops_workers_outside_the_engine_group, setup, teardown),
        cmocka_unit_test_setup_teardown(kill9_leaves_no_engine_and_no_secret, setup, teardown),
        cmocka_unit_test_setup_teardown(resume_stops_stale_engines, setup, teardown),
        cmocka_unit_test_setup_teardown(fixed_port_serves_every_config_and_resume_retries, setup, teardown),
        cmocka_unit_test_setup_teardown(second_servetune_on_one_folder_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(crash_before_done_mark_keeps_facts, setup, teardown),
        cmocka_unit_test_setup_teardown(refused_resume_changes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(every_request_failed_exits_1, setup, teardown),
        cmocka_unit_test_setup_teardown(full_disk_is_named, setup, teardown),
        cmocka_unit_test_setup_teardown(check_audit_and_predict_agree, setup, teardown),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}
