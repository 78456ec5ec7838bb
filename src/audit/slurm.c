#include "audit/slurm.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "audit/cluster.h"
#include "core/clock.h"

extern char **environ;

int st_cmd_run(char *const *argv, double timeout_s, st_buf *out, char *err, size_t errlen)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC)) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
    posix_spawn_file_actions_adddup2(&fa, pfd[1], 2);
    pid_t pid;
    int e = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(pfd[1]);
    if (e) {
        close(pfd[0]);
        snprintf(err, errlen, "%s: %s", argv[0], strerror(e));
        return -1;
    }
    st_ns deadline = st_now() + st_s_to_ns(timeout_s);
    int killed = 0, open_ = 1;
    char buf[4096];
    while (open_) {
        st_ns left = deadline - st_now();
        if (left <= 0) {
            kill(pid, SIGKILL);
            killed = 1;
            break;
        }
        struct pollfd p = { .fd = pfd[0], .events = POLLIN };
        int r = poll(&p, 1, (int)(left / ST_NS_PER_MS) + 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            continue;
        ssize_t n = read(pfd[0], buf, sizeof buf);
        if (n > 0)
            st_buf_append(out, buf, (size_t)n); /* past the maximum: the sticky error, checked below */
        else if (n == 0 || errno != EINTR)
            open_ = 0;
    }
    close(pfd[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (killed) {
        snprintf(err, errlen, "%s: no answer within %.0f s (killed)", argv[0], timeout_s);
        return -1;
    }
    if (st_buf_error(out)) {
        snprintf(err, errlen, "%s: printed more than %zu bytes", argv[0], out->max);
        return -1;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The command's output as one line for a message (at most n bytes, newlines as "; "). */
static void one_line(const st_buf *b, char *out, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; b->data && i < b->len && k + 3 < n; i++) {
        char c = b->data[i];
        if (c == '\n') {
            if (i + 1 < b->len) {
                out[k++] = ';';
                out[k++] = ' ';
            }
        } else if ((unsigned char)c >= ' ') {
            out[k++] = c;
        }
    }
    out[k] = '\0';
}

int st_slurm_submit(char *const *argv, char *id, size_t idlen, char *err, size_t errlen)
{
    st_buf out;
    st_buf_init(&out, ST_SLURM_OUT_MAX);
    int rc = st_cmd_run(argv, ST_SLURM_CMD_TIMEOUT_S, &out, err, errlen);
    if (rc < 0) {
        st_buf_free(&out);
        return -1;
    }
    char line[512];
    one_line(&out, line, sizeof line);
    if (rc != 0) {
        snprintf(err, errlen, "sbatch exited %d: %s", rc, line[0] ? line : "(no message)");
        st_buf_free(&out);
        return -1;
    }
    /* --parsable prints the id last (warnings may come before it) */
    const char *last = out.data ? out.data : "";
    for (const char *p = last; *p; p++)
        if (*p == '\n' && p[1] && p[1] != '\n')
            last = p + 1;
    if (st_slurm_parse_jobid(last, id, idlen)) {
        snprintf(err, errlen, "sbatch printed no job id: %s", line);
        st_buf_free(&out);
        return -1;
    }
    st_buf_free(&out);
    return 0;
}

int st_slurm_state_active(const char *state)
{
    static const char *active[] = { "PENDING",   "RUNNING",     "CONFIGURING",  "COMPLETING", "SUSPENDED",
                                    "REQUEUED",  "REQUEUE_FED", "REQUEUE_HOLD", "RESIZING",   "SIGNALING",
                                    "STAGE_OUT", "STOPPED",     "RESV_DEL_HOLD" };
    for (size_t i = 0; i < sizeof active / sizeof *active; i++)
        if (!strcmp(state, active[i]))
            return 1;
    return 0;
}

int st_slurm_parse_queue(const char *text, st_slurm_task **out, int *n)
{
    *out = NULL;
    *n = 0;
    int cap = 0;
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char l[256];
        if (len < sizeof l) {
            memcpy(l, line, len);
            l[len] = '\0';
            char *a = l, *b = strchr(a, '|'), *c = b ? strchr(b + 1, '|') : NULL;
            if (b && c) {
                *b++ = '\0';
                *c++ = '\0';
                char id[ST_SLURM_JOBID_MAX];
                if (st_slurm_parse_jobid(a, id, sizeof id) == 0 && *c) {
                    if (*n == cap) {
                        int nc = cap ? cap * 2 : 16;
                        st_slurm_task *nv = realloc(*out, sizeof *nv * (size_t)nc);
                        if (!nv) {
                            free(*out);
                            *out = NULL;
                            *n = 0;
                            return -1;
                        }
                        *out = nv;
                        cap = nc;
                    }
                    st_slurm_task *t = &(*out)[(*n)++];
                    memset(t, 0, sizeof *t);
                    snprintf(t->job, sizeof t->job, "%s", id);
                    char *e2;
                    long k = strtol(b, &e2, 10);
                    t->task = (e2 != b && *e2 == '\0' && k >= 0 && k < 1000000) ? (int)k : -1;
                    snprintf(t->state, sizeof t->state, "%s", c);
                    /* "CANCELLED by 0" -> CANCELLED */
                    t->state[strcspn(t->state, " ")] = '\0';
                }
            }
        }
        line = end ? end + 1 : NULL;
    }
    return 0;
}

int st_slurm_query(const char *id, st_slurm_task **out, int *n, char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    char jarg[ST_SLURM_JOBID_MAX + 8];
    snprintf(jarg, sizeof jarg, "--jobs=%s", id);
    char *argv[] = { "squeue", "--noheader", "--array", "--states=all", jarg, "--format=%F|%K|%T", NULL };
    st_buf o;
    st_buf_init(&o, ST_SLURM_OUT_MAX);
    int rc = st_cmd_run(argv, ST_SLURM_CMD_TIMEOUT_S, &o, err, errlen);
    if (rc < 0) {
        st_buf_free(&o);
        return -1;
    }
    const char *text = o.data ? o.data : "";
    if (rc != 0) {
        /* a job Slurm no longer remembers (MinJobAge passed) */
        int forgotten = strstr(text, "Invalid job id") != NULL;
        if (!forgotten) {
            char line[512];
            one_line(&o, line, sizeof line);
            snprintf(err, errlen, "squeue exited %d: %s", rc, line[0] ? line : "(no message)");
        }
        st_buf_free(&o);
        return forgotten ? 0 : -1;
    }
    rc = st_slurm_parse_queue(text, out, n);
    if (rc)
        snprintf(err, errlen, "out of memory");
    st_buf_free(&o);
    return rc;
}

int st_slurm_cancel(const char *const *ids, int n, char *err, size_t errlen)
{
    if (n <= 0)
        return 0;
    char **argv = calloc((size_t)n + 2, sizeof *argv);
    if (!argv) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    argv[0] = "scancel";
    for (int i = 0; i < n; i++)
        argv[i + 1] = (char *)ids[i];
    st_buf o;
    st_buf_init(&o, ST_SLURM_OUT_MAX);
    int rc = st_cmd_run(argv, ST_SLURM_CMD_TIMEOUT_S, &o, err, errlen);
    if (rc > 0) {
        char line[512];
        one_line(&o, line, sizeof line);
        snprintf(err, errlen, "scancel exited %d: %s", rc, line[0] ? line : "(no message)");
    }
    st_buf_free(&o);
    free(argv);
    return rc == 0 ? 0 : -1;
}
