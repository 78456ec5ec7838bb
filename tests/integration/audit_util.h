/* What the integration tests that run `servetune audit/predict/report` as a child share:
 * a per-test temporary folder (`tmp`), a bounded run of the servetune binary with its output
 * in tmp/servetune.out, and readers of the reports. Include once per test file, after
 * harness.h; set ST_IT_TMP_PREFIX (e.g. "/tmp/st_audit_it.") before including. */
#ifndef ST_AUDIT_UTIL_H
#define ST_AUDIT_UTIL_H
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <spawn.h>
#include <sqlite3.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"

#ifndef ST_IT_TMP_PREFIX
#error "define ST_IT_TMP_PREFIX before including audit_util.h"
#endif

extern char **environ;

/* The current test's temporary folder (made by setup, removed by teardown). */
static char tmp[256];

static int setup(void **state)
{
    (void)state;
    snprintf(tmp, sizeof tmp, "%sXXXXXX", ST_IT_TMP_PREFIX);
    return mkdtemp(tmp) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[600];
    /* the test's own temp folder only */
    snprintf(cmd, sizeof cmd, "rm -rf -- '%s'", tmp);
    if (!getenv("ST_IT_KEEP") && strncmp(tmp, ST_IT_TMP_PREFIX, strlen(ST_IT_TMP_PREFIX)) == 0)
        (void)!system(cmd);
    return 0;
}

/* Starts servetune with args (NULL-terminated) in the background, its output appended to
 * tmp/servetune.out; path_prefix, when set, goes in front of PATH. Returns its pid. */
static inline pid_t st_it_spawn(const char *const *args, const char *path_prefix)
{
    char *argv[32];
    int n = 0;
    argv[n++] = (char *)st_test_bin();
    for (; *args && n < 31; args++)
        argv[n++] = (char *)*args;
    argv[n] = NULL;
    char **env = environ;
    char *newenv[512];
    char pathvar[4096];
    if (path_prefix) {
        int k = 0;
        snprintf(pathvar, sizeof pathvar, "PATH=%s:%s", path_prefix, getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
        newenv[k++] = pathvar;
        for (char **e = environ; *e && k < 510; e++)
            if (strncmp(*e, "PATH=", 5))
                newenv[k++] = *e;
        newenv[k] = NULL;
        env = newenv;
    }
    char logp[512];
    snprintf(logp, sizeof logp, "%s/servetune.out", tmp);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, logp, O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    int e = posix_spawn(&pid, argv[0], &fa, NULL, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    assert_int_equal(e, 0);
    return pid;
}

/* Runs servetune with args (NULL-terminated), at most limit_s (then SIGKILL and the test
 * fails). path_prefix, when set, goes in front of PATH. With sigint_after_runs > 0 and db,
 * SIGINT is sent once the database holds that many rate runs. Returns the exit status; on a
 * non-zero one the end of servetune's output is printed for the test log. */
static inline int st_it_run(const char *const *args, const char *path_prefix, double limit_s, int sigint_after_runs,
                            const char *db)
{
    char logp[512];
    snprintf(logp, sizeof logp, "%s/servetune.out", tmp);
    pid_t pid = st_it_spawn(args, path_prefix);
    st_ns deadline = st_now() + st_s_to_ns(limit_s);
    int st = 0, sent = 0;
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            break;
        if (st_now() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            fail_msg("servetune did not finish within %.0f s (see %s)", limit_s, logp);
        }
        if (sigint_after_runs > 0 && !sent && db) {
            sqlite3 *d;
            if (sqlite3_open_v2(db, &d, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
                sqlite3_stmt *q;
                if (sqlite3_prepare_v2(d, "SELECT count(*) FROM runs", -1, &q, NULL) == SQLITE_OK) {
                    if (sqlite3_step(q) == SQLITE_ROW && sqlite3_column_int(q, 0) >= sigint_after_runs) {
                        kill(pid, SIGINT);
                        sent = 1;
                    }
                    sqlite3_finalize(q);
                }
            }
            sqlite3_close(d);
        }
        struct timespec ts = { 0, 20000000 };
        nanosleep(&ts, NULL);
    }
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (rc != 0) {
        FILE *lf = fopen(logp, "rb");
        if (lf) {
            static char tail[4096];
            fseek(lf, 0, SEEK_END);
            long sz = ftell(lf);
            fseek(lf, sz > 4000 ? sz - 4000 : 0, SEEK_SET);
            size_t got = fread(tail, 1, sizeof tail - 1, lf);
            tail[got] = '\0';
            fclose(lf);
            fprintf(stderr, "# servetune exited %d; its output ends:\n%s\n", rc, tail);
        }
    }
    return rc;
}

/* The common case: no PATH change, no interrupt. */
static inline int run_servetune(const char *const *args, double limit_s)
{
    return st_it_run(args, NULL, limit_s, 0, NULL);
}

/* DIR/report.json, parsed (the test fails when it cannot be read). */
static inline json_t *load_json(const char *dir)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/report.json", dir);
    json_error_t je;
    json_t *j = json_load_file(p, 0, &je);
    if (!j)
        fail_msg("%s: %s", p, je.text);
    return j;
}

static inline json_t *config_named(json_t *root, const char *name)
{
    json_t *cs = json_object_get(root, "configurations");
    size_t i;
    json_t *c;
    json_array_foreach(cs, i, c) if (!strcmp(json_string_value(json_object_get(c, "name")), name)) return c;
    fail_msg("no configuration %s in report.json", name);
    return NULL;
}

#endif
