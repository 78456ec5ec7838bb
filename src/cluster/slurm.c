#include "cluster/slurm.h"

#include <ctype.h>
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

#include "cluster/jobs.h"
#include "core/clock.h"
#include "core/util.h"

extern char **environ;

/* ---- Slurm ---- */

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int st_slurm_array_spec(const st_slurm_plan *p, char *out, size_t n)
{
    if (p->n_indices <= 0 || n == 0)
        return -1;
    int *v = malloc(sizeof *v * (size_t)p->n_indices);
    if (!v)
        return -1;
    memcpy(v, p->indices, sizeof *v * (size_t)p->n_indices);
    qsort(v, (size_t)p->n_indices, sizeof *v, cmp_int);
    size_t off = 0;
    int rc = 0;
    out[0] = '\0';
    for (int i = 0; i < p->n_indices && rc == 0;) {
        int j = i;
        while (j + 1 < p->n_indices && v[j + 1] <= v[j] + 1)
            j++;
        int w = v[j] > v[i] ? snprintf(out + off, n - off, "%s%d-%d", off ? "," : "", v[i], v[j])
                            : snprintf(out + off, n - off, "%s%d", off ? "," : "", v[i]);
        if (w < 0 || (size_t)w >= n - off)
            rc = -1;
        else
            off += (size_t)w;
        i = j + 1;
    }
    if (rc == 0 && p->max_concurrent > 0) {
        int w = snprintf(out + off, n - off, "%%%d", p->max_concurrent);
        if (w < 0 || (size_t)w >= n - off)
            rc = -1;
    }
    free(v);
    return rc;
}

/* The comment lines that say what made the script. */
static void header(st_buf *b, const st_slurm_plan *p, const char *what)
{
    st_buf_printf(b,
                  "#!/bin/bash\n"
                  "# %s\n"
                  "# Written by servetune %s (servetune audit --slurm); kept for inspection. The sbatch options\n"
                  "# are in %s/%s; every word below is single-quoted (no expansion).\n",
                  what, p->version ? p->version : "?", ST_CLUSTER_DIR, ST_CLUSTER_SUBMIT);
}

int st_slurm_task_script(const st_slurm_plan *p, st_buf *b)
{
    header(b, p,
           "servetune audit: one Slurm array task per configuration; the array index is its position in the "
           "spec.");
    st_buf_puts(b, "set -u\n# array index -> configuration\ncase \"${SLURM_ARRAY_TASK_ID:-}\" in\n");
    for (int i = 0; i < p->n_configs; i++) {
        st_buf_printf(b, "  %d) config=", i);
        st_buf_shell_quote(b, p->configs[i]);
        st_buf_puts(b, " ;;\n");
    }
    st_buf_puts(b, "  *) echo \"servetune: no configuration at array index ${SLURM_ARRAY_TASK_ID:-(unset)}\" >&2; "
                   "exit 2 ;;\nesac\n");
    st_buf_puts(b, "# the configuration's shard: DIR/shards/NAME.sqlite (continued, not repeated, when the task\n"
                   "# runs again after a requeue)\nexec ");
    st_buf_shell_quote(b, p->servetune);
    st_buf_puts(b, " audit --only=\"$config\" --resume --expect-spec-hash=");
    st_buf_shell_quote(b, p->spec_hash);
    st_buf_puts(b, " --output=");
    st_buf_shell_quote(b, p->out_dir);
    st_buf_puts(b, " -- ");
    st_buf_shell_quote(b, p->spec_path);
    st_buf_puts(b, "\n");
    return st_buf_error(b) ? -1 : 0;
}

int st_slurm_merge_script(const st_slurm_plan *p, st_buf *b)
{
    header(b, p, "servetune audit: merges the configurations' shards into results.sqlite and writes the reports.");
    st_buf_puts(b, "set -u\nexec ");
    st_buf_shell_quote(b, p->servetune);
    st_buf_puts(b, " audit --expect-spec-hash=");
    st_buf_shell_quote(b, p->spec_hash);
    st_buf_puts(b, " --merge=");
    st_buf_shell_quote(b, p->out_dir);
    st_buf_puts(b, "\n");
    return st_buf_error(b) ? -1 : 0;
}

/* Pushes prefix followed by val as one word. */
static int pushf(st_strv *v, const char *prefix, const char *val)
{
    size_t n = strlen(prefix) + strlen(val) + 1;
    char *s = malloc(n);
    if (!s)
        return -1;
    snprintf(s, n, "%s%s", prefix, val);
    int rc = st_strv_push(v, s);
    free(s);
    return rc;
}

/* The job output file: DIR/cluster/logs/NAME with DIR's '%' doubled (Slurm expands %-patterns over
 * the whole path, the working directory of a relative one included). */
static int push_output(st_strv *v, const char *dir, const char *name)
{
    size_t n = strlen("--output=") + 2 * strlen(dir) + strlen(ST_CLUSTER_LOGS) + strlen(name) + 3;
    char *s = malloc(n);
    if (!s)
        return -1;
    size_t k = (size_t)snprintf(s, n, "--output=");
    for (const char *c = dir; *c; c++) {
        if (*c == '%')
            s[k++] = '%';
        s[k++] = *c;
    }
    snprintf(s + k, n - k, "/%s/%s", ST_CLUSTER_LOGS, name);
    int rc = st_strv_push(v, s);
    free(s);
    return rc;
}

int st_slurm_dir_ok(const char *dir, char *why, size_t n)
{
    for (const char *c = dir; *c; c++) {
        if (*c == '\\') {
            snprintf(why, n,
                     "Slurm reads a backslash in an output path as 'no %%-patterns', so the tasks' output "
                     "files would collide: choose an output folder without '\\'");
            return -1;
        }
        if ((unsigned char)*c < ' ' || *c == 127) {
            snprintf(why, n,
                     "the output folder's path holds a control character (a newline?): Slurm's job "
                     "options cannot carry it");
            return -1;
        }
    }
    return 0;
}

/* The options both jobs share: working directory, partition, account, time, the user's. */
static int common_args(const st_slurm_plan *p, st_strv *v)
{
    int rc = pushf(v, "--chdir=", p->out_dir);
    if (p->partition)
        rc |= pushf(v, "--partition=", p->partition);
    if (p->account)
        rc |= pushf(v, "--account=", p->account);
    if (p->time)
        rc |= pushf(v, "--time=", p->time);
    return rc;
}

static int user_args(const st_slurm_plan *p, st_strv *v)
{
    int rc = 0;
    for (int i = 0; i < p->n_sbatch_args; i++)
        rc |= st_strv_push(v, p->sbatch_args[i]);
    return rc;
}

int st_slurm_array_argv(const st_slurm_plan *p, const char *script, st_strv *v)
{
    char arr[4096], gpus[32];
    if (st_slurm_array_spec(p, arr, sizeof arr))
        return -1;
    snprintf(gpus, sizeof gpus, "%d", p->gpus);
    int rc = st_strv_push(v, "sbatch");
    rc |= st_strv_push(v, "--parsable");
    rc |= st_strv_push(v, "--job-name=servetune-audit");
    rc |= pushf(v, "--array=", arr);
    rc |= st_strv_push(v, "--ntasks=1");
    /* a preempted or requeued task runs again and continues its shard (--resume) */
    rc |= st_strv_push(v, "--requeue");
    rc |= st_strv_push(v, "--open-mode=append");
    rc |= push_output(v, p->out_dir, "task-%A_%a.out");
    rc |= common_args(p, v);
    if (p->gpu_request == ST_GPU_GRES)
        rc |= pushf(v, "--gres=gpu:", gpus);
    else if (p->gpu_request == ST_GPU_GPUS)
        rc |= pushf(v, "--gpus=", gpus);
    rc |= user_args(p, v);
    rc |= st_strv_push(v, script);
    return rc ? -1 : 0;
}

int st_slurm_merge_argv(const st_slurm_plan *p, const char *script, const char *array_job, st_strv *v)
{
    int rc = st_strv_push(v, "sbatch");
    rc |= st_strv_push(v, "--parsable");
    rc |= st_strv_push(v, "--job-name=servetune-merge");
    if (array_job)
        rc |= pushf(v, "--dependency=afterany:", array_job);
    rc |= st_strv_push(v, "--ntasks=1");
    rc |= st_strv_push(v, "--open-mode=append");
    rc |= push_output(v, p->out_dir, "merge-%j.out");
    rc |= common_args(p, v);
    rc |= user_args(p, v);
    rc |= st_strv_push(v, script);
    return rc ? -1 : 0;
}

int st_slurm_submit_script(const st_strv *array_argv, const st_strv *merge_argv, st_buf *b)
{
    st_buf_puts(b, "#!/bin/sh\n"
                   "# The submission of this audit as servetune made it (it runs sbatch with an argument vector,\n"
                   "# never through a shell), written out to read or to run by hand: sh submit.sh\n"
                   "set -eu\n");
    if (array_argv) {
        st_buf_puts(b, "array=$(");
        st_buf_sh_argv(b, array_argv);
        st_buf_puts(b, ")\narray=${array%%;*}\necho \"job array: $array\"\n");
        /* the merge's dependency goes in after its leading words: sbatch --parsable ... */
        st_buf_puts(b, "sbatch --dependency=afterany:\"$array\"");
        for (int i = 1; i < merge_argv->n; i++) {
            st_buf_puts(b, " ");
            st_buf_shell_quote(b, merge_argv->v[i]);
        }
        st_buf_puts(b, "\n");
    } else {
        st_buf_sh_argv(b, merge_argv);
        st_buf_puts(b, "\n");
    }
    return st_buf_error(b) ? -1 : 0;
}

int st_slurm_parse_jobid(const char *text, char *id, size_t n)
{
    const char *s = text;
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
        s++;
    size_t len = strspn(s, "0123456789");
    if (len == 0 || len >= n || len > 20)
        return -1;
    const char *rest = s + len;
    if (*rest && *rest != ';' && *rest != '\n' && *rest != '\r' && *rest != ' ')
        return -1;
    memcpy(id, s, len);
    id[len] = '\0';
    return 0;
}

/* ---- running Slurm's commands ---- */

int st_slurm_run(char *const *argv, double timeout_s, st_buf *out, char *err, size_t errlen)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC)) {
        st_errf(err, errlen, "pipe: %s", strerror(errno));
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
        st_errf(err, errlen, "%s: %s", argv[0], strerror(e));
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
        st_errf(err, errlen, "%s: no answer within %.0f s (killed)", argv[0], timeout_s);
        return -1;
    }
    if (st_buf_error(out)) {
        st_errf(err, errlen, "%s: printed more than %zu bytes", argv[0], out->max);
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
    int rc = st_slurm_run(argv, ST_SLURM_CMD_TIMEOUT_S, &out, err, errlen);
    if (rc < 0) {
        st_buf_free(&out);
        return -1;
    }
    char line[512];
    one_line(&out, line, sizeof line);
    if (rc != 0) {
        st_errf(err, errlen, "sbatch exited %d: %s", rc, line[0] ? line : "(no message)");
        st_buf_free(&out);
        return -1;
    }
    /* --parsable prints the id last (warnings may come before it) */
    const char *last = out.data ? out.data : "";
    for (const char *p = last; *p; p++)
        if (*p == '\n' && p[1] && p[1] != '\n')
            last = p + 1;
    if (st_slurm_parse_jobid(last, id, idlen)) {
        st_errf(err, errlen, "sbatch printed no job id: %s", line);
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
    size_t cap = 0;
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
                    if (st_grow((void **)out, &cap, (size_t)*n + 1, sizeof **out, 16)) {
                        free(*out);
                        *out = NULL;
                        *n = 0;
                        return -1;
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
    int rc = st_slurm_run(argv, ST_SLURM_CMD_TIMEOUT_S, &o, err, errlen);
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
            st_errf(err, errlen, "squeue exited %d: %s", rc, line[0] ? line : "(no message)");
        }
        st_buf_free(&o);
        return forgotten ? 0 : -1;
    }
    rc = st_slurm_parse_queue(text, out, n);
    if (rc)
        st_errf(err, errlen, "out of memory");
    st_buf_free(&o);
    return rc;
}

int st_slurm_cancel(const char *const *ids, int n, char *err, size_t errlen)
{
    if (n <= 0)
        return 0;
    char **argv = calloc((size_t)n + 2, sizeof *argv);
    if (!argv) {
        st_errf(err, errlen, "out of memory");
        return -1;
    }
    argv[0] = "scancel";
    for (int i = 0; i < n; i++)
        argv[i + 1] = (char *)ids[i];
    st_buf o;
    st_buf_init(&o, ST_SLURM_OUT_MAX);
    int rc = st_slurm_run(argv, ST_SLURM_CMD_TIMEOUT_S, &o, err, errlen);
    if (rc > 0) {
        char line[512];
        one_line(&o, line, sizeof line);
        st_errf(err, errlen, "scancel exited %d: %s", rc, line[0] ? line : "(no message)");
    }
    st_buf_free(&o);
    free(argv);
    return rc == 0 ? 0 : -1;
}
