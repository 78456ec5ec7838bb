/* An audit split across machines without a scheduler (cluster/shard.h, docs/cluster.md): the
 * shards of a single-machine audit's runs merge into the very same reports, byte for byte;
 * configurations run by two `--only` processes at once merge into an audit with the same
 * configurations, rates and verdicts; the merge refuses shards of another spec text and never
 * replaces a single-machine audit; a shard whose process was killed is consistent and its
 * configuration continues with --resume. Emulator engines on 127.0.0.1, every run bounded. */
#include "harness.h"

#define ST_IT_TMP_PREFIX "/tmp/st_shards_it."
#include "audit_util.h"

#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>

#include "core/file.h"

static void write_spec(const char *path, const char *rates, double peak)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f,
            "engine:\n  kind: emulator\n  model: Qwen/Qwen3-8B\n"
            "  flags: [--gpu, H100, --time-scale, '20', --max-model-len, '4096', --seed, '%d']\n"
            "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.0}\n"
            "peak_rate: %g\n"
            "workload: {input_tokens: 256, output_tokens: 16, requests_per_rate: 24, seed: 3}\n"
            "rates: [%s]\nwarmup_requests: 2\n"
            "slo: {ttft_p95_ms: 20000, tpot_p95_ms: 2000}\n"
            "timeouts: {startup: 8s, request: 60s, stop_grace: 2s}\n"
            "search: {mode: burst}\n"
            "configurations:\n"
            "  - name: baseline\n"
            "  - name: fp8-kv\n    add_flags: [--kv-cache-dtype, fp8]\n"
            "  - name: broken\n    add_flags: [--max-model-len, '999999']\n",
            (int)getpid(), peak, rates);
    fclose(f);
}

/* Copies the database src to dst keeping only configuration name's rows (a shard). */
static void split_shard(const char *src, const char *dst, const char *name)
{
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "cp -- '%s' '%s'", src, dst);
    assert_int_equal(system(cmd), 0);
    sqlite3 *d;
    assert_int_equal(sqlite3_open(dst, &d), SQLITE_OK);
    sqlite3_stmt *q;
    const char *sql[] = { "DELETE FROM runs WHERE config != ?1", "DELETE FROM configs WHERE name != ?1" };
    assert_int_equal(sqlite3_exec(d, "PRAGMA foreign_keys=ON", NULL, NULL, NULL), SQLITE_OK);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(sqlite3_prepare_v2(d, sql[i], -1, &q, NULL), SQLITE_OK);
        sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
        assert_int_equal(sqlite3_step(q), SQLITE_DONE);
        sqlite3_finalize(q);
    }
    assert_int_equal(sqlite3_exec(d, "PRAGMA journal_mode=DELETE", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(d);
}

static char *slurp(const char *path)
{
    size_t len;
    char err[256];
    char *t = st_read_file(path, 64 << 20, &len, err, sizeof err);
    if (!t)
        fail_msg("%s", err);
    return t;
}

static void same_file(const char *a, const char *b)
{
    char *x = slurp(a), *y = slurp(b);
    if (strcmp(x, y))
        fail_msg("%s and %s differ", a, b);
    free(x);
    free(y);
}

/* Starts servetune with args in the background, output appended to tmp/NAME.out. */
static pid_t start_servetune(const char *const *args, const char *name)
{
    char *argv[32];
    int n = 0;
    argv[n++] = (char *)st_test_bin();
    for (; *args && n < 31; args++)
        argv[n++] = (char *)*args;
    argv[n] = NULL;
    char logp[512];
    snprintf(logp, sizeof logp, "%s/%s.out", tmp, name);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, logp, O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, argv[0], &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    return pid;
}

/* Waits for pid at most limit_s (then SIGKILL and the test fails); its exit status. */
static int wait_bounded(pid_t pid, double limit_s)
{
    st_ns deadline = st_now() + st_s_to_ns(limit_s);
    int st;
    for (;;) {
        if (waitpid(pid, &st, WNOHANG) == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (st_now() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            fail_msg("servetune (pid %d) did not finish within %.0f s", (int)pid, limit_s);
        }
        struct timespec ts = { 0, 20000000 };
        nanosleep(&ts, NULL);
    }
}

/* SIGKILL to the emulators this test's audits started (their flags carry --seed <our pid>), found
 * by their command lines in /proc, killed by pid. */
static void kill_our_engines(void)
{
    char want[64];
    int wl = snprintf(want, sizeof want, "--seed%c%d", 0, (int)getpid()) + 1;
    DIR *d = opendir("/proc");
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 1)
            continue;
        char p[64], buf[4096];
        snprintf(p, sizeof p, "/proc/%ld/cmdline", pid);
        FILE *f = fopen(p, "rb");
        if (!f)
            continue;
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        for (size_t i = 0; i + (size_t)wl <= n; i++)
            if (!memcmp(buf + i, want, (size_t)wl)) {
                kill((pid_t)pid, SIGKILL);
                break;
            }
    }
    closedir(d);
}

static int runs_in(const char *db)
{
    sqlite3 *d;
    int n = -1;
    if (sqlite3_open_v2(db, &d, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_busy_timeout(d, 2000);
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

static void merged_shards_give_the_single_machine_reports(void **state)
{
    (void)state;
    char spec[512], single[512], split[512], sd[600], db[600];
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    snprintf(single, sizeof single, "%s/single", tmp);
    snprintf(split, sizeof split, "%s/split", tmp);
    write_spec(spec, "1, 2", 10);
    const char *args[] = { "audit", spec, "-o", single, "--quiet", NULL };
    assert_int_equal(run_servetune(args, 240), 1); /* "broken" does not start */

    /* the single-machine database cut into one shard per configuration */
    snprintf(sd, sizeof sd, "%s/shards", split);
    assert_int_equal(mkdir(split, 0755), 0);
    assert_int_equal(mkdir(sd, 0755), 0);
    snprintf(db, sizeof db, "%s/results.sqlite", single);
    const char *names[] = { "baseline", "fp8-kv", "broken" };
    /* written in another order than the spec's: the merge orders by the spec */
    for (int i = 2; i >= 0; i--) {
        char dst[700];
        snprintf(dst, sizeof dst, "%s/%s.sqlite", sd, names[i]);
        split_shard(db, dst, names[i]);
    }
    const char *rargs[] = { "report", split, NULL };
    assert_int_equal(run_servetune(rargs, 60), 0);
    const char *files[] = { "report.json", "report.md", "results.csv", "report.html" };
    for (int i = 0; i < 4; i++) {
        char a[700], b[700];
        snprintf(a, sizeof a, "%s/%s", single, files[i]);
        snprintf(b, sizeof b, "%s/%s", split, files[i]);
        same_file(a, b);
    }
    /* merging again (servetune report, audit --merge) gives the same again */
    const char *margs[] = { "audit", "--merge", split, "--quiet", NULL };
    assert_int_equal(run_servetune(margs, 60), 1); /* a configuration failed, as the audit's exit says */
    char a[700], b[700];
    snprintf(a, sizeof a, "%s/report.json", single);
    snprintf(b, sizeof b, "%s/report.json", split);
    same_file(a, b);

    /* a shard of another spec text is refused, and names both */
    char spec2[512], other[512], plant[700], cmd[1600];
    snprintf(spec2, sizeof spec2, "%s/spec2.yaml", tmp);
    snprintf(other, sizeof other, "%s/other", tmp);
    write_spec(spec2, "1, 2", 11);
    const char *oargs[] = { "audit", spec2, "-o", other, "--only", "fp8-kv", "--quiet", NULL };
    assert_int_equal(run_servetune(oargs, 120), 0);
    snprintf(plant, sizeof plant, "%s/shards/fp8-kv.sqlite", other);
    snprintf(cmd, sizeof cmd, "cp -- '%s' '%s/fp8-kv.sqlite'", plant, sd);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(run_servetune(rargs, 60), 1);
    char so[600];
    snprintf(so, sizeof so, "%s/servetune.out", tmp);
    assert_true(file_has(so, "shards of different specs"));
    /* ... and one that is not of the spec named by --expect-spec-hash */
    const char *hargs[] = { "audit", "--merge", other, "--expect-spec-hash", "00ff", NULL };
    assert_int_equal(run_servetune(hargs, 60), 1);
    assert_true(file_has(so, "an audit of another spec"));
    /* the last good merge is left as it was */
    same_file(a, b);

    /* a single-machine audit is never replaced by a merge, nor mixed with shards */
    char sshards[600];
    snprintf(sshards, sizeof sshards, "%s/shards", single);
    assert_int_equal(mkdir(sshards, 0755), 0);
    snprintf(cmd, sizeof cmd, "cp -- '%s' '%s/fp8-kv.sqlite'", plant, sshards);
    assert_int_equal(system(cmd), 0);
    const char *sargs[] = { "report", single, NULL };
    assert_int_equal(run_servetune(sargs, 60), 1);
    assert_true(file_has(so, "holds a single-machine audit"));
    const char *aargs[] = { "audit", spec, "-o", single, "--only", "baseline", NULL };
    assert_int_equal(run_servetune(aargs, 60), 2);
    /* a plain audit into a folder of shards is refused too */
    const char *pargs[] = { "audit", spec2, "-o", other, "--quiet", NULL };
    assert_int_equal(run_servetune(pargs, 60), 2);
    assert_true(file_has(so, "holds shards of a distributed audit"));
}

/* Two machines' worth: `--only baseline` and `--only fp8-kv,broken` at once into one folder;
 * neither writes a report; the merge has the configurations, rates and verdicts of a single
 * run; a task whose spec changed since submission is refused. */
static void only_runs_at_once_then_merge(void **state)
{
    (void)state;
    char spec[512], out[512], ref[512];
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    snprintf(ref, sizeof ref, "%s/ref", tmp);
    write_spec(spec, "1, 2", 10);
    const char *a1[] = { "audit", spec, "-o", out, "--only", "baseline", "--quiet", NULL };
    const char *a2[] = { "audit", spec, "-o", out, "--only=fp8-kv,broken", "--quiet", NULL };
    pid_t p1 = start_servetune(a1, "one"), p2 = start_servetune(a2, "two");
    assert_int_equal(wait_bounded(p1, 240), 0);
    assert_int_equal(wait_bounded(p2, 240), 1); /* broken did not start */
    char p[700];
    snprintf(p, sizeof p, "%s/report.json", out);
    assert_int_equal(access(p, F_OK), -1); /* shards only */
    snprintf(p, sizeof p, "%s/one.out", tmp);
    assert_true(file_has(p, "baseline: done (2 rate runs measured, 0 kept)"));
    assert_true(file_has(p, "servetune report"));
    snprintf(p, sizeof p, "%s/two.out", tmp);
    assert_true(file_has(p, "broken: failed"));

    const char *st[] = { "audit", "--status", out, NULL };
    assert_int_equal(run_servetune(st, 30), 0);
    char so[600];
    snprintf(so, sizeof so, "%s/servetune.out", tmp);
    assert_true(file_has(so, "3 configurations, 3 with a shard, 3 finished"));
    assert_true(file_has(so, "not merged yet"));

    /* the spec changed after the audit was submitted: a task refuses to run */
    const char *h[] = {
        "audit", spec, "-o", out, "--only", "baseline", "--resume", "--expect-spec-hash", "abcd", NULL
    };
    assert_int_equal(run_servetune(h, 30), 2);
    assert_true(file_has(so, "changed since the audit was submitted"));
    /* an unknown configuration or index is a usage error */
    const char *u[] = { "audit", spec, "-o", out, "--only", "baseline,nope", NULL };
    assert_int_equal(run_servetune(u, 30), 2);
    const char *ui[] = { "audit", spec, "-o", out, "--only-index", "3", NULL };
    assert_int_equal(run_servetune(ui, 30), 2);
    /* a shard that exists is continued with --resume only */
    const char *again[] = { "audit", spec, "-o", out, "--only-index", "0", "--quiet", NULL };
    assert_int_equal(run_servetune(again, 30), 2);
    assert_true(file_has(so, "use --resume"));

    const char *rargs[] = { "report", out, NULL };
    assert_int_equal(run_servetune(rargs, 60), 0);
    const char *fargs[] = { "audit", spec, "-o", ref, "--quiet", NULL };
    assert_int_equal(run_servetune(fargs, 240), 1);
    json_t *x = load_json(out), *y = load_json(ref);
    assert_true(json_is_false(json_object_get(x, "partial")));
    const char *names[] = { "baseline", "fp8-kv", "broken" };
    for (int k = 0; k < 3; k++) {
        json_t *cx = config_named(x, names[k]), *cy = config_named(y, names[k]);
        assert_string_equal(json_string_value(json_object_get(cx, "status")),
                            json_string_value(json_object_get(cy, "status")));
        json_t *rx = json_object_get(cx, "runs"), *ry = json_object_get(cy, "runs");
        assert_int_equal(json_array_size(rx), json_array_size(ry));
        for (size_t i = 0; i < json_array_size(rx); i++) {
            json_t *u1 = json_array_get(rx, i), *u2 = json_array_get(ry, i);
            assert_true(json_equal(json_object_get(u1, "rate"), json_object_get(u2, "rate")));
            assert_true(json_equal(json_object_get(u1, "run_key"), json_object_get(u2, "run_key")));
            assert_string_equal(json_string_value(json_object_get(u1, "verdict")),
                                json_string_value(json_object_get(u2, "verdict")));
        }
    }
    json_decref(x);
    json_decref(y);
    assert_true(file_has(so, "Merged 3 shards of 3 configurations"));
}

/* A task killed outright (SIGKILL, as a node failure or the end of a time limit's grace) leaves a
 * shard that reads whole; --resume continues it without repeating the stored runs; a merge with a
 * configuration missing is a partial audit that names it. */
static void killed_shard_is_consistent_and_resumes(void **state)
{
    (void)state;
    char spec[512], out[512], db[700];
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    snprintf(db, sizeof db, "%s/shards/baseline.sqlite", out);
    write_spec(spec, "1, 2, 3, 4", 10);
    const char *a[] = { "audit", spec, "-o", out, "--only", "baseline", "--quiet", NULL };
    pid_t p = start_servetune(a, "killed");
    st_ns deadline = st_now() + st_s_to_ns(180);
    while (runs_in(db) < 1 && st_now() < deadline) {
        struct timespec ts = { 0, 20000000 };
        nanosleep(&ts, NULL);
    }
    kill(p, SIGKILL);
    int stt;
    waitpid(p, &stt, 0);
    /* the engine it started is in its own process group: stop it as a job's end would */
    kill_our_engines();
    int kept = runs_in(db);
    assert_true(kept >= 1);

    /* a merge now: baseline unfinished, the others missing: partial, and says so */
    const char *m[] = { "audit", "--merge", out, NULL };
    assert_int_equal(run_servetune(m, 60), 1);
    json_t *j = load_json(out);
    assert_true(json_is_true(json_object_get(j, "partial")));
    json_decref(j);
    char md[700];
    snprintf(md, sizeof md, "%s/report.md", out);
    assert_true(file_has(md, "configurations without results"));
    assert_true(file_has(md, "fp8-kv (no shard)"));

    const char *r[] = { "audit", spec, "-o", out, "--only", "baseline", "--resume", NULL };
    assert_int_equal(run_servetune(r, 240), 0);
    char so[600], want[100];
    snprintf(so, sizeof so, "%s/servetune.out", tmp);
    snprintf(want, sizeof want, "kept from the previous run");
    assert_true(file_has(so, want));
    assert_int_equal(runs_in(db), 4);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test_setup_teardown(merged_shards_give_the_single_machine_reports, setup, teardown),
        cmocka_unit_test_setup_teardown(only_runs_at_once_then_merge, setup, teardown),
        cmocka_unit_test_setup_teardown(killed_shard_is_consistent_and_resumes, setup, teardown),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
