/* servetune audit --slurm against a real Slurm (Debian's slurmctld, slurmd and munge 22.05): a
 * one-node cluster on 127.0.0.1 (scripts/slurm-local: its own munge key, a slurm.conf with 4 CPUs
 * and 2 fake GPUs as GRES, free ports, state and logs in a temporary folder) runs a small audit
 * on the emulator. Checked: --dry-run writes the scripts and submits nothing; the array's tasks
 * run at the same time and the merged report has the configurations, rates, verdicts and
 * capacities of a single-machine run of the same spec; a task killed with scancel is the only
 * one --resume submits again; SIGINT on --wait cancels the jobs. The output folder's name is
 * hostile (quotes, $, %, spaces). If the cluster cannot start, the test fails with the daemons'
 * logs. Only one such cluster runs at a time on a machine (a lock); every daemon is stopped at
 * the end, by a watchdog process too if this one dies. */
#include "harness.h"

#define ST_IT_TMP_PREFIX "/tmp/st_slurm_it."
#include "audit_util.h"

#include <errno.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#include "cluster/slurm.h"

#define LOCK_PATH "/tmp/servetune-slurm-test.lock"
#define LOCK_WAIT_S 300

static char cluster[256]; /* the cluster's folder */
static int lock_fd = -1;
static int watchdog_pipe = -1;
static pid_t watchdog;

/* Runs scripts/slurm-local with args; its output into out. Exit status. */
static int slurm_local(const char *verb, st_buf *out)
{
    char *argv[] = { "scripts/slurm-local", (char *)verb, cluster, "--cpus", "4", "--gpus", "2", NULL };
    if (!strcmp(verb, "stop"))
        argv[3] = NULL;
    char err[256];
    st_buf_init(out, 1 << 20);
    int rc = st_slurm_run(argv, 120, out, err, sizeof err);
    if (rc < 0)
        fprintf(stderr, "# slurm-local %s: %s\n", verb, err);
    return rc;
}

static int group_setup(void **state)
{
    (void)state;
    lock_fd = open(LOCK_PATH, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock_fd < 0) {
        fprintf(stderr, "# %s: %s\n", LOCK_PATH, strerror(errno));
        return -1;
    }
    st_ns deadline = st_now() + st_s_to_ns(LOCK_WAIT_S);
    while (flock(lock_fd, LOCK_EX | LOCK_NB)) {
        if (st_now() > deadline) {
            fprintf(stderr, "# another Slurm test cluster held %s for %d s\n", LOCK_PATH, LOCK_WAIT_S);
            return -1;
        }
        sleep(1);
    }
    snprintf(cluster, sizeof cluster, "/tmp/st_slurm_cluster.XXXXXX");
    if (!mkdtemp(cluster))
        return -1;
    /* The watchdog stops the cluster when this process ends, however it ends (the pipe closes). */
    int pfd[2];
    if (pipe(pfd))
        return -1;
    watchdog = fork();
    if (watchdog == 0) {
        close(pfd[1]);
        setsid();
        char c;
        while (read(pfd[0], &c, 1) < 0 && errno == EINTR)
            ;
        execl("scripts/slurm-local", "scripts/slurm-local", "stop", cluster, (char *)NULL);
        _exit(127);
    }
    close(pfd[0]);
    watchdog_pipe = pfd[1];
    st_buf out;
    int rc = slurm_local("start", &out);
    if (rc != 0) {
        /* the daemons' logs, for the test log: the suite must not pass without a cluster */
        fprintf(stderr, "# the Slurm test cluster did not start (exit %d):\n%s\n", rc, out.data ? out.data : "");
        st_buf_free(&out);
        return -1;
    }
    fprintf(stderr, "# %s", out.data ? out.data : "");
    st_buf_free(&out);
    char conf[400];
    snprintf(conf, sizeof conf, "%s/slurm.conf", cluster);
    setenv("SLURM_CONF", conf, 1);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    st_buf out;
    slurm_local("stop", &out);
    st_buf_free(&out);
    if (watchdog_pipe >= 0) {
        close(watchdog_pipe);
        int st;
        waitpid(watchdog, &st, 0);
    }
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf -- '%s'", cluster);
    if (!strncmp(cluster, "/tmp/st_slurm_cluster.", 22))
        (void)!system(cmd);
    if (lock_fd >= 0)
        close(lock_fd);
    return 0;
}

static void write_spec(const char *path, const char *rates, const char *configs)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f,
            "engine:\n  kind: emulator\n  model: Qwen/Qwen3-8B\n"
            "  flags: [--gpu, H100, --time-scale, '20', --max-model-len, '4096', --seed, '%d']\n"
            "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.0}\n"
            "peak_rate: 10\n"
            "workload: {input_tokens: 256, output_tokens: 16, requests_per_rate: 24, seed: 3}\n"
            "rates: [%s]\nwarmup_requests: 2\n"
            "slo: {ttft_p95_ms: 20000, tpot_p95_ms: 2000}\n"
            "timeouts: {startup: 20s, request: 60s, stop_grace: 2s}\n"
            "search: {mode: burst}\n"
            "configurations:\n%s",
            (int)getpid(), rates, configs);
    fclose(f);
}

static const char *THREE = "  - name: baseline\n"
                           "  - name: fp8-kv\n    add_flags: [--kv-cache-dtype, fp8]\n"
                           "  - name: batched-8k\n    add_flags: [--max-num-batched-tokens, '8192']\n";

/* An output folder with a hostile name (no backslash: Slurm cannot carry one, and says so). */
static void out_dir(char *out, size_t n, const char *leaf) { snprintf(out, n, "%s/%s it's $(x) \"q\" %%j", tmp, leaf); }

/* The jobs Slurm holds for this cluster (any state), as squeue prints them. */
static int jobs_listed(void)
{
    char *argv[] = { "squeue", "--noheader", "--states=all", NULL };
    st_buf o;
    st_buf_init(&o, 1 << 20);
    char err[256];
    int rc = st_slurm_run(argv, 30, &o, err, sizeof err);
    if (rc != 0)
        fail_msg("squeue: %s %s", err, o.data ? o.data : "");
    int lines = 0;
    for (size_t i = 0; i < o.len; i++)
        lines += o.data[i] == '\n';
    st_buf_free(&o);
    return lines;
}

/* Tasks of job id still pending or running. */
static int active_tasks(const char *id)
{
    st_slurm_task *t;
    int n, active = 0;
    char err[256];
    if (st_slurm_query(id, &t, &n, err, sizeof err))
        fail_msg("%s", err);
    for (int i = 0; i < n; i++)
        active += st_slurm_state_active(t[i].state);
    free(t);
    return active;
}

static const char *task_state(const char *id, int idx, char *buf, size_t n)
{
    st_slurm_task *t;
    int m;
    char err[256];
    buf[0] = '\0';
    if (st_slurm_query(id, &t, &m, err, sizeof err))
        fail_msg("%s", err);
    for (int i = 0; i < m; i++)
        if (t[i].task == idx)
            snprintf(buf, n, "%s", t[i].state);
    free(t);
    return buf;
}

/* The job ids of the last submission in DIR/cluster/jobs.json. */
static void last_jobs(const char *dir, char *array, char *merge)
{
    char p[700];
    snprintf(p, sizeof p, "%s/cluster/jobs.json", dir);
    json_error_t je;
    json_t *j = json_load_file(p, 0, &je);
    if (!j)
        fail_msg("%s: %s", p, je.text);
    json_t *subs = json_object_get(j, "submissions");
    json_t *s = json_array_get(subs, json_array_size(subs) - 1);
    const char *a = json_string_value(json_object_get(s, "array_job"));
    snprintf(array, ST_SLURM_JOBID_MAX, "%s", a ? a : "");
    snprintf(merge, ST_SLURM_JOBID_MAX, "%s", json_string_value(json_object_get(s, "merge_job")));
    json_decref(j);
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

/* A shard's audit row: when it started and ended (wall ns). */
static void shard_times(const char *dir, const char *name, int64_t *start, int64_t *end)
{
    char p[800];
    snprintf(p, sizeof p, "%s/shards/%s.sqlite", dir, name);
    sqlite3 *d;
    assert_int_equal(sqlite3_open_v2(p, &d, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *q;
    assert_int_equal(sqlite3_prepare_v2(d, "SELECT started, finished FROM audit", -1, &q, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    *start = sqlite3_column_int64(q, 0);
    *end = sqlite3_column_int64(q, 1);
    sqlite3_finalize(q);
    sqlite3_close(d);
}

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

static void dry_run_writes_scripts_and_submits_nothing(void **state)
{
    (void)state;
    char spec[512], out[512], p[800];
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    out_dir(out, sizeof out, "dry");
    write_spec(spec, "1, 2", THREE);
    int before = jobs_listed();
    const char *args[] = {
        "audit", spec, "-o", out, "--slurm", "--dry-run", "--partition", "debug", "--sbatch-arg", "--comment=it's $(x)",
        NULL
    };
    assert_int_equal(run_servetune(args, 60), 0);
    assert_int_equal(jobs_listed(), before);
    const char *files[] = { "tasks.sbatch", "merge.sbatch", "submit.sh" };
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/cluster/%s", out, files[i]);
        assert_int_equal(access(p, R_OK), 0);
        /* each is valid shell */
        char *argv[] = { i == 2 ? "/bin/sh" : "/bin/bash", "-n", p, NULL };
        st_buf o;
        st_buf_init(&o, 1 << 16);
        char err[256];
        assert_int_equal(st_slurm_run(argv, 30, &o, err, sizeof err), 0);
        st_buf_free(&o);
    }
    snprintf(p, sizeof p, "%s/cluster/jobs.json", out);
    assert_int_equal(access(p, F_OK), -1);
    char so[600];
    snprintf(so, sizeof so, "%s/servetune.out", tmp);
    assert_true(file_has(so, "Dry run: nothing submitted. 3 of 3 configurations to run (array indices 0-2)"));
    assert_true(file_has(so, "--array=0-2"));
    assert_true(file_has(so, "--gres=gpu:1"));
    assert_true(file_has(so, "'--comment=it'\\''s $(x)'"));
    snprintf(p, sizeof p, "%s/cluster/tasks.sbatch", out);
    assert_true(file_has(p, "  2) config=batched-8k ;;"));

    /* a folder Slurm cannot carry is refused before anything is written */
    char bad[600];
    snprintf(bad, sizeof bad, "%s/back\\slash", tmp);
    const char *bargs[] = { "audit", spec, "-o", bad, "--slurm", "--dry-run", NULL };
    assert_int_equal(run_servetune(bargs, 30), 2);
    assert_true(file_has(so, "backslash"));
}

/* The reports of the cluster run against a single-machine run of the same spec. */
static void same_audit(const char *a_dir, const char *b_dir)
{
    json_t *a = load_json(a_dir), *b = load_json(b_dir);
    assert_true(json_is_false(json_object_get(a, "partial")));
    const char *names[] = { "baseline", "fp8-kv", "batched-8k" };
    for (int k = 0; k < 3; k++) {
        json_t *ca = config_named(a, names[k]), *cb = config_named(b, names[k]);
        assert_string_equal(json_string_value(json_object_get(ca, "status")),
                            json_string_value(json_object_get(cb, "status")));
        json_t *ra = json_object_get(ca, "runs"), *rb = json_object_get(cb, "runs");
        assert_int_equal(json_array_size(ra), json_array_size(rb));
        for (size_t i = 0; i < json_array_size(ra); i++) {
            json_t *x = json_array_get(ra, i), *y = json_array_get(rb, i);
            assert_true(json_equal(json_object_get(x, "rate"), json_object_get(y, "rate")));
            assert_true(json_equal(json_object_get(x, "run_key"), json_object_get(y, "run_key")));
            assert_string_equal(json_string_value(json_object_get(x, "verdict")),
                                json_string_value(json_object_get(y, "verdict")));
            assert_true(json_equal(json_object_get(x, "completed"), json_object_get(y, "completed")));
        }
        /* the same capacity: the same rate, and delivered req/s within what timing on a shared
         * machine moves (the seeds fix the prompts and the arrival schedule) */
        json_t *pa = json_object_get(ca, "capacity"), *pb = json_object_get(cb, "capacity");
        double x = json_real_value(json_object_get(pa, "rps")), y = json_real_value(json_object_get(pb, "rps"));
        assert_true(x > 0 && y > 0);
        assert_near(x, y, 0.1 * y);
    }
    json_decref(a);
    json_decref(b);
}

static void array_tasks_run_at_once_and_merge_like_one_machine(void **state)
{
    (void)state;
    char spec[512], out[512], ref[512], so[600], p[900];
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    out_dir(out, sizeof out, "cluster");
    snprintf(ref, sizeof ref, "%s/single", tmp);
    snprintf(so, sizeof so, "%s/servetune.out", tmp);
    write_spec(spec, "1, 2", THREE);
    const char *args[] = { "audit", spec, "-o", out, "--slurm", "--wait", NULL };
    assert_int_equal(run_servetune(args, 300), 0);
    assert_true(file_has(so, "as Slurm job array"));
    assert_true(file_has(so, "(indices 0-2)"));
    assert_true(file_has(so, "follow:  servetune audit --status"));
    char array[ST_SLURM_JOBID_MAX], merge[ST_SLURM_JOBID_MAX];
    last_jobs(out, array, merge);
    char st[32];
    for (int i = 0; i < 3; i++) {
        assert_string_equal(task_state(array, i, st, sizeof st), "COMPLETED");
        snprintf(p, sizeof p, "%s/cluster/logs/task-%s_%d.out", out, array, i);
        assert_true(file_has(p, "done (2 rate runs measured"));
    }
    snprintf(p, sizeof p, "%s/cluster/logs/merge-%s.out", out, merge);
    assert_true(file_has(p, "Merged 3 shards of 3 configurations"));

    /* two tasks ran at the same time (two GPUs): some pair of shards overlaps in time */
    const char *names[] = { "baseline", "fp8-kv", "batched-8k" };
    int64_t s[3], e[3];
    for (int i = 0; i < 3; i++)
        shard_times(out, names[i], &s[i], &e[i]);
    int overlap = 0;
    for (int i = 0; i < 3; i++)
        for (int k = i + 1; k < 3; k++)
            overlap |= s[i] < e[k] && s[k] < e[i];
    assert_true(overlap);

    const char *sargs[] = { "audit", "--status", out, NULL };
    assert_int_equal(run_servetune(sargs, 60), 0);
    assert_true(file_has(so, "3 configurations, 3 with a shard, 3 finished"));
    snprintf(p, sizeof p, "%s_1 COMPLETED", array);
    assert_true(file_has(so, p));

    const char *rargs[] = { "audit", spec, "-o", ref, "--quiet", NULL };
    assert_int_equal(run_servetune(rargs, 300), 0);
    same_audit(out, ref);
}

static void scancelled_task_is_resubmitted_by_resume(void **state)
{
    (void)state;
    char spec[512], out[512], so[600], db[900];
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    out_dir(out, sizeof out, "resume");
    snprintf(so, sizeof so, "%s/servetune.out", tmp);
    write_spec(spec, "1, 2, 3, 4", THREE);
    const char *args[] = { "audit", spec, "-o", out, "--slurm", NULL };
    assert_int_equal(run_servetune(args, 60), 0);
    char array[ST_SLURM_JOBID_MAX], merge[ST_SLURM_JOBID_MAX];
    last_jobs(out, array, merge);
    /* once task 1 stored a run, cancel it alone */
    snprintf(db, sizeof db, "%s/shards/fp8-kv.sqlite", out);
    st_ns deadline = st_now() + st_s_to_ns(180);
    while (runs_in(db) < 1) {
        if (st_now() > deadline)
            fail_msg("task 1 stored no run within 180 s");
        sleep_ms(50);
    }
    char task[64], err[256];
    snprintf(task, sizeof task, "%s_1", array);
    const char *ids[] = { task };
    assert_int_equal(st_slurm_cancel(ids, 1, err, sizeof err), 0);
    /* the other tasks and the merge go on to their end */
    deadline = st_now() + st_s_to_ns(240);
    while (active_tasks(array) || active_tasks(merge)) {
        if (st_now() > deadline)
            fail_msg("the jobs did not end within 240 s");
        sleep_ms(200);
    }
    char st[32];
    assert_string_equal(task_state(array, 1, st, sizeof st), "CANCELLED");
    assert_string_equal(task_state(array, 0, st, sizeof st), "COMPLETED");
    int kept = runs_in(db);
    assert_true(kept >= 1 && kept < 4);
    /* the merge ran after the array: a partial audit naming the cancelled configuration */
    json_t *j = load_json(out);
    assert_true(json_is_true(json_object_get(j, "partial")));
    json_decref(j);
    const char *sargs[] = { "audit", "--status", out, NULL };
    assert_int_equal(run_servetune(sargs, 60), 0);
    assert_true(file_has(so, "interrupted"));
    char line[80];
    snprintf(line, sizeof line, "%s_1 CANCELLED", array);
    assert_true(file_has(so, line));

    /* --resume submits the cancelled configuration alone; its stored runs are kept */
    const char *rargs[] = { "audit", spec, "-o", out, "--slurm", "--resume", "--wait", NULL };
    assert_int_equal(run_servetune(rargs, 300), 0);
    assert_true(file_has(so, "Submitted 1 configuration of"));
    assert_true(file_has(so, "(indices 1)"));
    char array2[ST_SLURM_JOBID_MAX], merge2[ST_SLURM_JOBID_MAX];
    last_jobs(out, array2, merge2);
    assert_string_not_equal(array2, array);
    char p[900];
    snprintf(p, sizeof p, "%s/cluster/logs/task-%s_1.out", out, array2);
    assert_true(file_has(p, "fp8-kv: done"));
    char want[64];
    snprintf(want, sizeof want, "%d kept", kept);
    assert_true(file_has(p, want));
    assert_int_equal(runs_in(db), 4);
    j = load_json(out);
    assert_true(json_is_false(json_object_get(j, "partial")));
    json_decref(j);
    /* nothing left to do: --resume then only merges */
    assert_int_equal(run_servetune(rargs, 120), 0);
    assert_true(file_has(so, "Every configuration has finished; submitted merge job"));
}

static void sigint_on_wait_cancels_the_jobs(void **state)
{
    (void)state;
    char spec[512], out[512], so[600];
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    out_dir(out, sizeof out, "sigint");
    snprintf(so, sizeof so, "%s/servetune.out", tmp);
    write_spec(spec, "1, 2, 3, 4", THREE);
    char *argv[] = { (char *)st_test_bin(), "audit", spec, "-o", out, "--slurm", "--wait", NULL };
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, so, O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, argv[0], &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    /* once a task runs */
    char jobs[900];
    snprintf(jobs, sizeof jobs, "%s/cluster/jobs.json", out);
    st_ns deadline = st_now() + st_s_to_ns(120);
    char array[ST_SLURM_JOBID_MAX] = "", merge[ST_SLURM_JOBID_MAX] = "", st[32];
    for (;;) {
        if (st_now() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            fail_msg("no task ran within 120 s");
        }
        if (!array[0] && access(jobs, R_OK) == 0)
            last_jobs(out, array, merge);
        if (array[0] && !strcmp(task_state(array, 0, st, sizeof st), "RUNNING"))
            break;
        sleep_ms(100);
    }
    kill(pid, SIGINT);
    int status;
    deadline = st_now() + st_s_to_ns(60);
    while (waitpid(pid, &status, WNOHANG) != pid) {
        if (st_now() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            fail_msg("servetune --wait did not end within 60 s of SIGINT");
        }
        sleep_ms(50);
    }
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 4);
    assert_true(file_has(so, "interrupted: cancelling jobs"));
    /* every task and the merge end (cancelled), none runs on */
    deadline = st_now() + st_s_to_ns(60);
    while (active_tasks(array) || active_tasks(merge)) {
        if (st_now() > deadline)
            fail_msg("jobs still active 60 s after scancel");
        sleep_ms(200);
    }
    assert_string_equal(task_state(array, 0, st, sizeof st), "CANCELLED");
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test_setup_teardown(dry_run_writes_scripts_and_submits_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(array_tasks_run_at_once_and_merge_like_one_machine, setup, teardown),
        cmocka_unit_test_setup_teardown(scancelled_task_is_resubmitted_by_resume, setup, teardown),
        cmocka_unit_test_setup_teardown(sigint_on_wait_cancels_the_jobs, setup, teardown),
    };
    return cmocka_run_group_tests(t, group_setup, group_teardown);
}
