/* servetune audit across machines (docs/cluster.md): --only (one configuration into its shard),
 * --merge and --status, --slurm (a job array and a dependent merge job, --wait, --resume) and
 * --k8s-manifest (an Indexed Job). The shards, scripts and jobs are cluster/shard.h, cluster/cluster.h
 * and cluster/slurm.h; this file is the command line around them. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cluster/jobs.h"
#include "cluster/k8s.h"
#include "cluster/shard.h"
#include "cluster/slurm.h"
#include "audit/spec.h"
#include "audit/store.h"
#include "audit/sweep.h"
#include "cli/cli.h"
#include "core/clock.h"
#include "core/file.h"
#include "core/version.h"
#include "report/report.h"

#define WAIT_POLL_S 2.0    /* --wait: how often squeue is asked */
#define WAIT_MAX_ERRORS 30 /* --wait gives up after this many squeue failures in a row */
#define PATH_BUF 4200

/* ---- small helpers ---- */

static int mkdir_p1(const char *path)
{
    char err[512];
    if (st_mkdir_p(path, err, sizeof err)) { /* and the folders above it */
        fprintf(stderr, "servetune audit: %s\n", err);
        return -1;
    }
    return 0;
}

static void headline(const char *dir)
{
    st_store *s;
    char err[512];
    if (st_store_open_read(dir, &s, err, sizeof err))
        return;
    st_cli_print_headline(s);
    st_store_close(s);
}

/* Configurations of the merged audit that failed (did not start, crashed), from the database. */
static int failed_configs(const char *dir)
{
    st_store *s;
    char err[512];
    if (st_store_open_read(dir, &s, err, sizeof err))
        return 0;
    st_config_row *rows;
    int n, failed = 0;
    if (st_store_configs_get(s, &rows, &n) == 0) {
        for (int i = 0; i < n; i++)
            failed += rows[i].status && !strcmp(rows[i].status, "failed");
        st_config_rows_free(rows, n);
    }
    st_store_close(s);
    return failed;
}

static int merge_report_locked(const char *dir, const char *expect_hash, int quiet, int strict, st_merge_result *m,
                               st_ns t0);

int st_cli_merge_report(const char *dir, const char *expect_hash, int quiet, int strict)
{
    char err[1024] = "";
    st_merge_result mr;
    st_ns t0 = st_now();
    /* one merge or report at a time in DIR (two would replace each other's database and files) */
    int lock_fd = -1;
    if (st_dir_lock_file(dir, &lock_fd, err, sizeof err)) {
        fprintf(stderr, "servetune: merge: %s\n", err);
        return ST_EXIT_FAIL;
    }
    int rc = merge_report_locked(dir, expect_hash, quiet, strict, &mr, t0);
    if (lock_fd >= 0)
        close(lock_fd);
    return rc;
}

static int merge_report_locked(const char *dir, const char *expect_hash, int quiet, int strict, st_merge_result *m,
                               st_ns t0)
{
    char err[1024] = "";
    st_merge_result mr;
    if (st_shard_merge(dir, expect_hash, st_cli_catch_signals(NULL), &mr, err, sizeof err)) {
        fprintf(stderr, "servetune: merge: %s\n", err);
        return mr.interrupted ? ST_EXIT_INTERRUPTED : ST_EXIT_FAIL;
    }
    *m = mr;
    double took = st_ns_to_s(st_now() - t0);
    st_store *s;
    if (st_store_open_read(dir, &s, err, sizeof err) || st_report_write_all(s, dir, err, sizeof err)) {
        fprintf(stderr, "servetune: report: %s\n", err);
        st_store_close(s);
        return ST_EXIT_FAIL;
    }
    st_store_close(s);
    if (!quiet) {
        printf("Merged %d shard%s of %d configuration%s into %s/%s in %.2f s%s\n", mr.shards, mr.shards == 1 ? "" : "s",
               mr.n_configs, mr.n_configs == 1 ? "" : "s", dir, ST_STORE_FILE, took,
               mr.partial ? " (partial: see the report)" : "");
        headline(dir);
        printf("Report: %s/report.html (also report.md, report.json, results.csv)\n", dir);
    }
    return strict && (mr.partial || failed_configs(dir)) ? ST_EXIT_FAIL : ST_EXIT_OK;
}

/* ---- --only: configurations into their shards ---- */

static int spec_hash_of(const char *path, char hash[65], char **text_out, size_t *len_out)
{
    char err[512];
    size_t len = 0;
    char *text = st_read_file(path, ST_SPEC_MAX_BYTES, &len, err, sizeof err);
    if (!text) {
        fprintf(stderr, "servetune audit: %s\n", err);
        return -1;
    }
    st_store_hash(text, len, hash);
    if (text_out) {
        *text_out = text;
        *len_out = len;
    } else {
        free(text);
    }
    return 0;
}

/* The configurations --only and --only-index ask for (want[i] 1), each once. 0, or the usage
 * error's exit status. */
static int wanted_configs(const st_spec *spec, const char *spec_path, const st_cluster_cli *c, int *want)
{
    int nwant = 0;
    if (spec->n_configs > ST_SPEC_MAX_CONFIGS_CLI) {
        fprintf(stderr, "servetune audit: more than %d configurations\n", ST_SPEC_MAX_CONFIGS_CLI);
        return ST_EXIT_USAGE;
    }
    if (c->only_index >= 0) {
        if (c->only_index >= spec->n_configs) {
            char m[160];
            snprintf(m, sizeof m, "--only-index %ld: the spec has %d configurations (0..%d)", c->only_index,
                     spec->n_configs, spec->n_configs - 1);
            return st_cli_usage_error("audit", m);
        }
        want[c->only_index] = 1;
    }
    if (c->only) {
        const char *p = c->only;
        while (*p) {
            size_t len = strcspn(p, ",");
            int found = 0;
            for (int i = 0; i < spec->n_configs; i++)
                if (strlen(spec->configs[i].name) == len && !strncmp(spec->configs[i].name, p, len)) {
                    want[i] = 1;
                    found = 1;
                }
            if (!found) {
                char m[256];
                snprintf(m, sizeof m, "--only: no configuration '%.*s' in %s", (int)(len < 80 ? len : 80), p,
                         spec_path);
                return st_cli_usage_error("audit", m);
            }
            p += len;
            if (*p == ',')
                p++;
        }
    }
    for (int i = 0; i < spec->n_configs; i++)
        nwant += want[i];
    if (!nwant)
        return st_cli_usage_error("audit", "--only: no configuration named");
    return 0;
}

int st_cli_audit_shards(const st_spec *spec, const char *spec_path, const char *out_dir, const st_cluster_cli *c,
                        int resume, int quiet, volatile sig_atomic_t *stop, volatile sig_atomic_t *sig)
{
    /* the configurations asked for, in the spec's order, each once */
    int want[ST_SPEC_MAX_CONFIGS_CLI] = { 0 };
    int bad = wanted_configs(spec, spec_path, c, want);
    if (bad)
        return bad;
    char hash[65], *text = NULL;
    size_t tlen = 0;
    if (spec_hash_of(spec_path, hash, &text, &tlen))
        return ST_EXIT_USAGE;
    if (c->expect_hash && strcmp(c->expect_hash, hash)) {
        fprintf(stderr,
                "servetune audit: %s changed since the audit was submitted (spec hash %.12s, expected %.12s): "
                "refused, its shards would not merge\n",
                spec_path, hash, c->expect_hash);
        free(text);
        return ST_EXIT_USAGE;
    }
    char err[1024] = "";
    int kind = st_shard_results_kind(out_dir, err, sizeof err);
    if (kind == 1) {
        fprintf(stderr, "servetune audit: %s holds a single-machine audit; a distributed one needs another -o\n",
                out_dir);
        free(text);
        return ST_EXIT_USAGE;
    }
    char sd[PATH_BUF];
    snprintf(sd, sizeof sd, "%s/%s", out_dir, ST_SHARD_DIR);
    if (mkdir_p1(out_dir) || mkdir_p1(sd)) {
        free(text);
        return ST_EXIT_FAIL;
    }
    /* shard runs share DIR with each other, never with a single-machine audit (cli/common.c) */
    int lock_fd = -1;
    st_secrets secrets;
    if (st_dir_lock(out_dir, 1, &lock_fd, err, sizeof err) || st_spec_secrets(spec, &secrets, err, sizeof err)) {
        fprintf(stderr, "servetune audit: %s\n", err);
        if (lock_fd >= 0)
            close(lock_fd);
        free(text);
        return ST_EXIT_USAGE;
    }
    FILE *out = st_secrets_stream(stderr, &secrets);
    char self[PATH_MAX];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    self[sl > 0 ? sl : 0] = '\0';
    int rc = ST_EXIT_OK, interrupted = 0;
    for (int i = 0; i < spec->n_configs && !interrupted; i++) {
        if (!want[i])
            continue;
        const char *name = spec->configs[i].name;
        char path[PATH_BUF];
        st_store *store = NULL;
        if (st_shard_path(out_dir, name, path, sizeof path) ||
            st_store_open_file(path, ST_STORE_ROLLBACK, &store, err, sizeof err) ||
            st_store_audit_begin(store, spec_path, text, tlen, ST_VERSION, resume, err, sizeof err)) {
            fprintf(stderr, "servetune audit: %s: %s\n", name, err[0] ? err : "path too long");
            st_store_close(store);
            rc = ST_EXIT_USAGE;
            break;
        }
        st_store_set_secrets(store, &secrets);
        st_cli_store_traffic(store, spec);
        st_sweep_opts so = { .out_dir = out_dir,
                             .resume = resume,
                             .quiet = quiet,
                             .tty = isatty(STDERR_FILENO),
                             .out = out ? out : stderr,
                             .self_exe = sl > 0 ? self : NULL,
                             .stop = stop,
                             .only = name };
        st_sweep_result sr;
        if (!quiet)
            fprintf(stderr, "servetune audit: configuration %s of %s into %s\n", name, spec_path, path);
        int srun = st_sweep_run(spec, store, &so, &sr, err, sizeof err);
        if (srun) {
            fprintf(stderr, "servetune audit: %s\n", err);
            rc = ST_EXIT_FAIL;
        }
        char note[128] = "";
        if (sr.interrupted)
            snprintf(note, sizeof note, "interrupted by %s", *sig == SIGTERM ? "SIGTERM" : "SIGINT");
        else if (srun)
            snprintf(note, sizeof note, "stopped by an error");
        st_store_audit_finish(store, sr.interrupted || srun != 0, note[0] ? note : NULL);
        st_store_close(store);
        if (sr.configs_failed && rc == ST_EXIT_OK)
            rc = ST_EXIT_FAIL;
        interrupted = sr.interrupted;
        printf("%s: %s (%d rate run%s measured, %d kept) -> %s\n", name,
               sr.interrupted ? "interrupted" : (srun ? "error" : (sr.configs_failed ? "failed" : "done")),
               sr.runs_measured, sr.runs_measured == 1 ? "" : "s", sr.runs_reused, path);
    }
    free(text);
    if (out)
        fclose(out);
    st_secrets_free(&secrets);
    if (lock_fd >= 0)
        close(lock_fd);
    if (interrupted)
        return ST_EXIT_INTERRUPTED;
    if (rc != ST_EXIT_USAGE)
        printf("Merge the shards and write the reports with: servetune report %s\n", out_dir);
    return rc;
}

/* ---- --status ---- */

/* The squeue state of array task idx of job (or of the job when idx < 0), "" when unknown. */
static const char *task_state(const st_slurm_task *t, int n, const char *job, int idx)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(t[i].job, job) && (idx < 0 || t[i].task == idx))
            return t[i].state;
    return "";
}

int st_cli_audit_status(const char *dir)
{
    char err[1024] = "";
    json_t *jobs = st_jobs_load(dir, err, sizeof err);
    if (err[0])
        fprintf(stderr, "servetune audit: %s\n", err);
    const char **names = NULL;
    int n = 0;
    st_spec spec;
    int have_spec = 0;
    json_t *cfgs = json_object_get(jobs, "configurations");
    if (json_array_size(cfgs)) {
        n = (int)json_array_size(cfgs);
        names = calloc((size_t)n, sizeof *names);
        for (int i = 0; names && i < n; i++)
            names[i] = json_string_value(json_array_get(cfgs, (size_t)i));
    } else if (st_shard_spec(dir, &spec, err, sizeof err) == 0) {
        have_spec = 1;
        n = spec.n_configs;
        names = calloc((size_t)n, sizeof *names);
        for (int i = 0; names && i < n; i++)
            names[i] = spec.configs[i].name;
    } else {
        fprintf(stderr, "servetune audit: %s: no distributed audit here (%s)\n", dir, err);
        json_decref(jobs);
        return ST_EXIT_FAIL;
    }
    st_shard_info *info = NULL;
    for (int i = 0; names && i < n; i++)
        if (!names[i])
            names[i] = "?";
    if (!names || st_shard_scan(dir, names, n, &info)) {
        fprintf(stderr, "servetune audit: out of memory\n");
        free(names);
        if (have_spec)
            st_spec_free(&spec);
        json_decref(jobs);
        return ST_EXIT_FAIL;
    }
    json_t *sub = st_jobs_last(jobs);
    const char *array = sub ? st_jobs_str(sub, "array_job") : NULL, *merge = sub ? st_jobs_str(sub, "merge_job") : NULL;
    st_slurm_task *tasks = NULL;
    int nt = 0;
    const char *qerr = NULL;
    if (array || merge) {
        const char *ids[2] = { array, merge };
        for (int k = 0; k < 2; k++) {
            if (!ids[k])
                continue;
            st_slurm_task *t;
            int m;
            if (st_slurm_query(ids[k], &t, &m, err, sizeof err)) {
                qerr = err;
                continue;
            }
            st_slurm_task *nv = realloc(tasks, sizeof *nv * (size_t)(nt + m + 1));
            if (nv) {
                tasks = nv;
                memcpy(tasks + nt, t, sizeof *t * (size_t)m);
                nt += m;
            }
            free(t);
        }
    }
    int done = 0, present = 0;
    for (int i = 0; i < n; i++) {
        done += st_shard_finished(&info[i]);
        present += info[i].present;
    }
    printf("%s: %d configuration%s, %d with a shard, %d finished", dir, n, n == 1 ? "" : "s", present, done);
    if (array || merge)
        printf("; Slurm job array %s, merge job %s", array ? array : "-", merge ? merge : "-");
    printf("\n");
    if (qerr)
        printf("(squeue: %s)\n", qerr);
    printf("  %-3s %-24s %-12s %5s  %s\n", "#", "configuration", "shard", "runs", (array ? "task" : ""));
    for (int i = 0; i < n; i++) {
        const st_shard_info *s = &info[i];
        const char *st = !s->present ? "-" : (!s->readable ? "unreadable" : (s->status[0] ? s->status : "started"));
        char runs[16] = "-";
        if (s->readable)
            snprintf(runs, sizeof runs, "%d", s->runs);
        char task[96] = "";
        if (array) {
            const char *ts = task_state(tasks, nt, array, i);
            if (st_jobs_covers(sub, i))
                snprintf(task, sizeof task, "%s_%d %s", array, i, ts[0] ? ts : "(no longer in squeue)");
            else
                snprintf(task, sizeof task, "(not in this submission)");
        }
        printf("  %-3d %-24s %-12s %5s  %s\n", i, names[i], st, runs, task);
        if (s->present && !s->readable && s->why[0])
            printf("      %s\n", s->why);
    }
    int kind = st_shard_results_kind(dir, err, sizeof err);
    if (merge) {
        const char *ms = task_state(tasks, nt, merge, -1);
        printf("merge: job %s %s; ", merge, ms[0] ? ms : "(no longer in squeue)");
    }
    printf("%s/%s: %s\n", dir, ST_STORE_FILE,
           kind == 2 ? "merged (servetune report DIR merges again)"
                     : (kind == 1 ? "a single-machine audit" : "not merged yet"));
    free(tasks);
    free(info);
    free(names);
    if (have_spec)
        st_spec_free(&spec);
    json_decref(jobs);
    return ST_EXIT_OK;
}

/* ---- --slurm ---- */

/* Absolute path of an existing file or folder. */
static int absolute(const char *path, char *out)
{
    if (!realpath(path, out)) {
        fprintf(stderr, "servetune audit: %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

static int write_text(const char *path, const st_buf *b)
{
    char err[512];
    if (st_buf_error(b)) {
        fprintf(stderr, "servetune audit: %s: the generated text is too long\n", path);
        return -1;
    }
    if (st_mkdir_parents(path, err, sizeof err) ||
        st_write_file_atomic(path, b->data ? b->data : "", b->len, err, sizeof err)) {
        fprintf(stderr, "servetune audit: %s\n", err);
        return -1;
    }
    return 0;
}

/* Jobs of earlier submissions that still run or wait: 1 (listed on stderr), 0 none, -1 squeue
 * failed. */
static int still_active(json_t *jobs)
{
    const char **ids;
    int n, active = 0;
    if (!jobs || st_jobs_ids(jobs, &ids, &n))
        return 0;
    for (int i = 0; i < n; i++) {
        st_slurm_task *t;
        int m;
        char err[512];
        if (st_slurm_query(ids[i], &t, &m, err, sizeof err)) {
            fprintf(stderr, "servetune audit: %s\n", err);
            free(ids);
            return -1;
        }
        for (int k = 0; k < m; k++)
            if (st_slurm_state_active(t[k].state)) {
                if (t[k].task >= 0)
                    fprintf(stderr, "servetune audit: job %s_%d is still %s\n", t[k].job, t[k].task, t[k].state);
                else
                    fprintf(stderr, "servetune audit: job %s is still %s\n", t[k].job, t[k].state);
                active = 1;
            }
        free(t);
    }
    free(ids);
    return active;
}

/* --wait: polls the jobs until the merge job ended; SIGINT/SIGTERM scancels them. */
static int wait_jobs(const char *dir, const char *array, const char *merge, volatile sig_atomic_t *stop)
{
    char last[256] = "";
    int errors = 0;
    for (;;) {
        if (*stop) {
            const char *ids[2];
            int n = 0;
            if (array)
                ids[n++] = array;
            ids[n++] = merge;
            char err[512];
            fprintf(stderr, "servetune audit: interrupted: cancelling job%s %s%s%s\n", n > 1 ? "s" : "",
                    array ? array : "", array ? " " : "", merge);
            if (st_slurm_cancel(ids, n, err, sizeof err))
                fprintf(stderr, "servetune audit: %s\n", err);
            fprintf(stderr, "servetune audit: the finished runs are kept in %s/%s/; continue with --resume --slurm\n",
                    dir, ST_SHARD_DIR);
            return ST_EXIT_INTERRUPTED;
        }
        st_slurm_task *t = NULL, *mt = NULL;
        int n = 0, mn = 0;
        char err[512];
        if ((array && st_slurm_query(array, &t, &n, err, sizeof err)) ||
            st_slurm_query(merge, &mt, &mn, err, sizeof err)) {
            free(t);
            if (++errors >= WAIT_MAX_ERRORS) {
                fprintf(stderr, "servetune audit: %s; giving up waiting (the jobs go on)\n", err);
                return ST_EXIT_FAIL;
            }
        } else {
            errors = 0;
            int pending = 0, running = 0, ended = 0;
            for (int i = 0; i < n; i++) {
                if (!strcmp(t[i].state, "PENDING"))
                    pending++;
                else if (st_slurm_state_active(t[i].state))
                    running++;
                else
                    ended++;
            }
            const char *ms = mn ? mt[0].state : "";
            int merge_done = mn == 0 || !st_slurm_state_active(ms);
            char line[256];
            snprintf(line, sizeof line, "tasks: %d running, %d pending, %d ended; merge job %s %s", running, pending,
                     ended, merge, ms[0] ? ms : "ended");
            if (strcmp(line, last)) {
                fprintf(stderr, "servetune audit: %s\n", line);
                snprintf(last, sizeof last, "%s", line);
            }
            free(t);
            free(mt);
            if (merge_done)
                break;
        }
        for (int k = 0; k < (int)(WAIT_POLL_S * 10) && !*stop; k++) {
            struct timespec ts = { 0, 100000000 };
            nanosleep(&ts, NULL);
        }
    }
    char err[512];
    if (st_shard_results_kind(dir, err, sizeof err) != 2) {
        fprintf(stderr, "servetune audit: the merge job ended without writing %s/%s: see %s/%s/merge-%s.out\n", dir,
                ST_STORE_FILE, dir, ST_CLUSTER_LOGS, merge);
        return ST_EXIT_FAIL;
    }
    headline(dir);
    printf("Report: %s/report.html (also report.md, report.json, results.csv; database results.sqlite)\n", dir);
    st_store *s;
    int partial = 1;
    if (st_store_open_read(dir, &s, err, sizeof err) == 0) {
        st_audit_row a;
        if (st_store_audit_get(s, &a) == 1) {
            partial = a.partial;
            st_audit_row_free(&a);
        }
        st_store_close(s);
    }
    return partial || failed_configs(dir) ? ST_EXIT_FAIL : ST_EXIT_OK;
}

/* sbatch with the words of v (NULL-terminated for posix_spawnp): 0 with the job id, or -1 said. */
static int submit(const st_strv *v, char *id, size_t idlen)
{
    char **argv = calloc((size_t)v->n + 1, sizeof *argv);
    char err[1024];
    if (!argv) {
        fprintf(stderr, "servetune audit: out of memory\n");
        return -1;
    }
    memcpy(argv, v->v, sizeof *argv * (size_t)v->n);
    int rc = st_slurm_submit(argv, id, idlen, err, sizeof err);
    if (rc)
        fprintf(stderr, "servetune audit: %s\n", err);
    free(argv);
    return rc;
}

/* Before a submission: the absolute paths of the spec, the folder and this binary, the spec's
 * hash, and the folder's job record (*jobs, NULL when none). -1 to go on, else the exit status
 * (said on stderr). */
static int slurm_preflight(const char *spec_path, const char *out_dir, int resume, char *spec_abs, char *dir_abs,
                           char *self, char hash[65], json_t **jobs)
{
    *jobs = NULL;
    if (absolute(spec_path, spec_abs) || spec_hash_of(spec_abs, hash, NULL, NULL))
        return ST_EXIT_USAGE;
    if (mkdir_p1(out_dir) || absolute(out_dir, dir_abs))
        return ST_EXIT_FAIL;
    ssize_t sl = readlink("/proc/self/exe", self, PATH_MAX - 1);
    if (sl <= 0) {
        fprintf(stderr, "servetune audit: cannot find the servetune binary (/proc/self/exe)\n");
        return ST_EXIT_FAIL;
    }
    self[sl] = '\0';
    char err[1024] = "";
    if (st_slurm_dir_ok(dir_abs, err, sizeof err)) {
        fprintf(stderr, "servetune audit: %s: %s\n", out_dir, err);
        return ST_EXIT_USAGE;
    }
    int kind = st_shard_results_kind(dir_abs, err, sizeof err);
    if (kind == 1) {
        fprintf(stderr, "servetune audit: %s holds a single-machine audit; a distributed one needs another -o\n",
                out_dir);
        return ST_EXIT_USAGE;
    }
    *jobs = st_jobs_load(dir_abs, err, sizeof err);
    if (err[0]) {
        fprintf(stderr, "servetune audit: %s\n", err);
        return ST_EXIT_FAIL;
    }
    if (!resume && (*jobs || st_shard_any(dir_abs) || kind == 2)) {
        fprintf(stderr,
                "servetune audit: %s already holds a distributed audit: --resume continues it (--status shows "
                "where it is), or use another -o\n",
                out_dir);
        json_decref(*jobs);
        *jobs = NULL;
        return ST_EXIT_USAGE;
    }
    return -1;
}

/* The submission's settings: the command line's, else the spec's cluster.slurm section's. sargs
 * (room for ST_STRLIST_MAX * 2) receives the spec's sbatch arguments, then the command line's.
 * 0, or the usage error's exit status. */
static int slurm_plan_of(const st_spec *spec, const st_cluster_cli *c, st_slurm_plan *plan, const char **sargs)
{
    int gpus = c->gpus_per_task > 0 ? (int)c->gpus_per_task
                                    : (spec->cluster.slurm.gpus_per_task > 0 ? spec->cluster.slurm.gpus_per_task
                                                                             : spec->hardware.gpus_per_replica);
    st_gpu_request greq = spec->cluster.slurm.gpu_request;
    if (c->gpu_request && st_gpu_request_from_name(c->gpu_request, &greq))
        return st_cli_usage_error("audit", "--gpu-request: expected gres, gpus or none");
    int nsargs = 0;
    for (int i = 0; i < spec->cluster.slurm.sbatch_args.n && nsargs < ST_STRLIST_MAX; i++)
        sargs[nsargs++] = spec->cluster.slurm.sbatch_args.v[i];
    for (int i = 0; i < c->sbatch_args.n; i++)
        sargs[nsargs++] = c->sbatch_args.v[i];
    plan->partition = c->partition ? c->partition : spec->cluster.slurm.partition;
    plan->account = c->account ? c->account : spec->cluster.slurm.account;
    plan->time = c->time ? c->time : spec->cluster.slurm.time;
    plan->gpus = gpus;
    plan->gpu_request = greq;
    plan->max_concurrent = c->max_concurrent > 0 ? (int)c->max_concurrent : spec->cluster.slurm.max_concurrent;
    plan->sbatch_args = sargs;
    plan->n_sbatch_args = nsargs;
    plan->version = ST_VERSION;
    return 0;
}

/* Adds a submission (its job ids and array indices) to the folder's job record, created when
 * the folder has none, and saves it. 0, or -1 said on stderr. */
static int record_submission(json_t **jobs, const st_slurm_plan *plan, const char *array_id, const char *merge_id)
{
    if (!*jobs) {
        *jobs = json_object();
        json_object_set_new(*jobs, "spec", json_string(plan->spec_path));
        json_object_set_new(*jobs, "spec_sha256", json_string(plan->spec_hash));
        json_t *cs = json_array();
        for (int i = 0; i < plan->n_configs; i++)
            json_array_append_new(cs, json_string(plan->configs[i]));
        json_object_set_new(*jobs, "configurations", cs);
        json_object_set_new(*jobs, "submissions", json_array());
    }
    json_t *sub = json_object();
    json_object_set_new(sub, "submitted", json_integer((json_int_t)time(NULL)));
    if (plan->n_indices)
        json_object_set_new(sub, "array_job", json_string(array_id));
    json_object_set_new(sub, "merge_job", json_string(merge_id));
    json_t *ix = json_array();
    for (int i = 0; i < plan->n_indices; i++)
        json_array_append_new(ix, json_integer(plan->indices[i]));
    json_object_set_new(sub, "indices", ix);
    json_array_append_new(json_object_get(*jobs, "submissions"), sub);
    char err[1024];
    if (st_jobs_save(plan->out_dir, *jobs, err, sizeof err)) {
        fprintf(stderr, "servetune audit: %s\n", err);
        return -1;
    }
    return 0;
}

/* What was submitted, and how to follow, cancel and continue it. */
static void print_submitted(const st_slurm_plan *plan, const char *spec_path, const char *out_dir, const char *array_id,
                            const char *arr, const char *merge_id)
{
    int n_idx = plan->n_indices;
    if (n_idx)
        printf("Submitted %d configuration%s of %s as Slurm job array %s (indices %s) and merge job %s (after the "
               "array)\n",
               n_idx, n_idx == 1 ? "" : "s", spec_path, array_id, arr, merge_id);
    else
        printf("Every configuration has finished; submitted merge job %s\n", merge_id);
    printf("  follow:  servetune audit --status %s   (or squeue -j %s%s%s)\n", out_dir, n_idx ? array_id : "",
           n_idx ? "," : "", merge_id);
    printf("  output:  %s/%s/   shards: %s/%s/   reports: %s/report.html when job %s ends\n", out_dir, ST_CLUSTER_LOGS,
           out_dir, ST_SHARD_DIR, out_dir, merge_id);
    printf("  cancel:  scancel %s%s%s;  continue: servetune audit %s -o %s --slurm --resume\n", n_idx ? array_id : "",
           n_idx ? " " : "", merge_id, spec_path, out_dir);
    fflush(stdout);
}

/* The indices of the configurations whose shard has not finished (into indices), or -1 when a
 * shard holds an audit of another spec text (said on stderr). */
static int unfinished_configs(const st_shard_info *info, const char **names, int n, const char *hash,
                              const char *out_dir, int *indices)
{
    int n_idx = 0;
    for (int i = 0; i < n; i++) {
        if (info[i].readable && strcmp(info[i].spec_hash, hash)) {
            fprintf(stderr,
                    "servetune audit: %s/%s/%s%s holds an audit of another spec text (hash %.12s, this spec %.12s): "
                    "a changed spec needs another -o\n",
                    out_dir, ST_SHARD_DIR, names[i], ST_SHARD_EXT, info[i].spec_hash, hash);
            return -1;
        }
        if (!st_shard_finished(&info[i]))
            indices[n_idx++] = i;
    }
    return n_idx;
}

/* Submits the job array (aargv, when configurations remain) and the merge job after it; a merge
 * that cannot be submitted cancels the array. 0 with the job ids (ST_SLURM_JOBID_MAX bytes each),
 * or -1 said on stderr. */
static int submit_jobs(const st_slurm_plan *plan, const st_strv *aargv, const char *mpath, char *array_id,
                       char *merge_id)
{
    int n_idx = plan->n_indices;
    if (n_idx && submit(aargv, array_id, ST_SLURM_JOBID_MAX))
        return -1;
    st_strv margv = { 0 };
    if (st_slurm_merge_argv(plan, mpath, n_idx ? array_id : NULL, &margv)) {
        st_strv_free(&margv);
        fprintf(stderr, "servetune audit: out of memory\n");
        return -1;
    }
    int rc = submit(&margv, merge_id, ST_SLURM_JOBID_MAX);
    st_strv_free(&margv);
    if (rc && n_idx) {
        const char *ids[1] = { array_id };
        char e2[512];
        fprintf(stderr, "servetune audit: cancelling job array %s (it would have no merge)\n", array_id);
        st_slurm_cancel(ids, 1, e2, sizeof e2);
    }
    return rc;
}

int st_cli_audit_slurm(const st_spec *spec, const char *spec_path, const char *out_dir, const st_cluster_cli *c,
                       int resume, volatile sig_atomic_t *stop)
{
    char spec_abs[PATH_MAX], dir_abs[PATH_MAX], self[PATH_MAX];
    char hash[65];
    json_t *jobs;
    int pre = slurm_preflight(spec_path, out_dir, resume, spec_abs, dir_abs, self, hash, &jobs);
    if (pre >= 0)
        return pre;
    const char **names = calloc((size_t)spec->n_configs, sizeof *names);
    int *indices = calloc((size_t)spec->n_configs, sizeof *indices);
    st_shard_info *info = NULL;
    int rc = ST_EXIT_FAIL, n_idx = 0;
    st_strv aargv = { 0 };
    st_buf tb, mb, sb;
    st_buf_init(&tb, ST_SLURM_SCRIPT_MAX);
    st_buf_init(&mb, ST_SLURM_SCRIPT_MAX);
    st_buf_init(&sb, ST_SLURM_SCRIPT_MAX);
    if (!names || !indices)
        goto out;
    for (int i = 0; i < spec->n_configs; i++)
        names[i] = spec->configs[i].name;
    if (st_shard_scan(dir_abs, names, spec->n_configs, &info))
        goto out;
    n_idx = unfinished_configs(info, names, spec->n_configs, hash, out_dir, indices);
    if (n_idx < 0) {
        rc = ST_EXIT_USAGE;
        goto out;
    }
    if (resume && !c->dry_run) {
        int act = still_active(jobs);
        if (act) {
            if (act > 0)
                fprintf(stderr,
                        "servetune audit: wait for them (servetune audit --status %s) or scancel them, "
                        "then --resume again\n",
                        out_dir);
            goto out;
        }
    }
    char cdir[PATH_BUF], ldir[PATH_BUF], sdir[PATH_BUF];
    snprintf(cdir, sizeof cdir, "%s/%s", dir_abs, ST_CLUSTER_DIR);
    snprintf(ldir, sizeof ldir, "%s/%s", dir_abs, ST_CLUSTER_LOGS);
    snprintf(sdir, sizeof sdir, "%s/%s", dir_abs, ST_SHARD_DIR);
    if (mkdir_p1(cdir) || mkdir_p1(ldir) || mkdir_p1(sdir))
        goto out;
    const char *sargs[ST_STRLIST_MAX * 2];
    st_slurm_plan plan = { .servetune = self,
                           .spec_path = spec_abs,
                           .out_dir = dir_abs,
                           .spec_hash = hash,
                           .configs = names,
                           .n_configs = spec->n_configs,
                           .indices = indices,
                           .n_indices = n_idx };
    if ((rc = slurm_plan_of(spec, c, &plan, sargs)) != 0)
        goto out;
    rc = ST_EXIT_FAIL;
    char tpath[PATH_BUF], mpath[PATH_BUF], spath[PATH_BUF];
    st_jobs_path(dir_abs, ST_CLUSTER_TASKS, tpath, sizeof tpath);
    st_jobs_path(dir_abs, ST_CLUSTER_MERGE, mpath, sizeof mpath);
    st_jobs_path(dir_abs, ST_CLUSTER_SUBMIT, spath, sizeof spath);
    if ((n_idx && (st_slurm_task_script(&plan, &tb) || st_slurm_array_argv(&plan, tpath, &aargv))) ||
        st_slurm_merge_script(&plan, &mb)) {
        fprintf(stderr, "servetune audit: cannot write the batch scripts (too long, or out of memory)\n");
        goto out;
    }
    /* submit.sh carries its own dependency word; the argv above is only for the script */
    st_strv m2 = { 0 };
    if (st_slurm_merge_argv(&plan, mpath, NULL, &m2) || st_slurm_submit_script(n_idx ? &aargv : NULL, &m2, &sb)) {
        st_strv_free(&m2);
        fprintf(stderr, "servetune audit: cannot write the submit script\n");
        goto out;
    }
    st_strv_free(&m2);
    if ((n_idx && write_text(tpath, &tb)) || write_text(mpath, &mb) || write_text(spath, &sb))
        goto out;
    char arr[4096] = "";
    if (n_idx)
        st_slurm_array_spec(&plan, arr, sizeof arr);
    if (c->dry_run) {
        printf("Dry run: nothing submitted. %d of %d configuration%s to run (array indices %s); the submission is\n"
               "%s (sh %s submits it by hand); batch scripts %s and %s\n",
               n_idx, spec->n_configs, spec->n_configs == 1 ? "" : "s", n_idx ? arr : "none", spath, spath,
               n_idx ? tpath : "(none)", mpath);
        fwrite(sb.data, 1, sb.len, stdout);
        rc = ST_EXIT_OK;
        goto out;
    }
    char array_id[ST_SLURM_JOBID_MAX] = "", merge_id[ST_SLURM_JOBID_MAX] = "";
    if (submit_jobs(&plan, &aargv, mpath, array_id, merge_id))
        goto out;
    if (record_submission(&jobs, &plan, array_id, merge_id))
        goto out;
    print_submitted(&plan, spec_path, out_dir, array_id, arr, merge_id);
    rc = ST_EXIT_OK;
    if (c->wait)
        rc = wait_jobs(dir_abs, n_idx ? array_id : NULL, merge_id, stop);
out:
    st_strv_free(&aargv);
    st_buf_free(&tb);
    st_buf_free(&mb);
    st_buf_free(&sb);
    free(info);
    free(names);
    free(indices);
    json_decref(jobs);
    return rc;
}

/* ---- --k8s-manifest ---- */

int st_cli_audit_k8s(const st_spec *spec, const char *spec_path, const st_cluster_cli *c)
{
    /* the options are checked as the spec's values are: a manifest kubectl would refuse, or one
     * that is not YAML, is never written */
    const struct {
        const char *v, *what;
        st_k8s_value which;
    } given[] = { { c->k8s_image, "--k8s-image", ST_K8S_IMAGE },
                  { c->k8s_namespace, "--k8s-namespace", ST_K8S_NAMESPACE },
                  { c->k8s_pvc, "--k8s-pvc", ST_K8S_VOLUME_CLAIM } };
    for (int i = 0; i < 3; i++) {
        char why[600];
        if (given[i].v && st_spec_k8s_value_check(given[i].which, given[i].what, given[i].v, why, sizeof why))
            return st_cli_usage_error("audit", why);
    }
    const char *image = c->k8s_image ? c->k8s_image : spec->cluster.kubernetes.image;
    const char *claim = c->k8s_pvc ? c->k8s_pvc : spec->cluster.kubernetes.volume_claim;
    if (!image)
        return st_cli_usage_error("audit", "--k8s-manifest needs an image: --k8s-image or cluster.kubernetes.image");
    if (!claim)
        return st_cli_usage_error("audit", "--k8s-manifest needs the output volume: --k8s-pvc or "
                                           "cluster.kubernetes.volume_claim");
    char hash[65], *text = NULL;
    size_t len = 0;
    if (spec_hash_of(spec_path, hash, &text, &len))
        return ST_EXIT_USAGE;
    const char **names = calloc((size_t)spec->n_configs, sizeof *names);
    if (!names) {
        free(text);
        return ST_EXIT_FAIL;
    }
    for (int i = 0; i < spec->n_configs; i++)
        names[i] = spec->configs[i].name;
    char name[64];
    snprintf(name, sizeof name, "servetune-audit-%.10s", hash);
    st_gpu_request greq = spec->cluster.slurm.gpu_request;
    int rc = ST_EXIT_OK;
    if (c->gpu_request && st_gpu_request_from_name(c->gpu_request, &greq))
        rc = st_cli_usage_error("audit", "--gpu-request: expected gres, gpus or none");
    int gpus = c->gpus_per_task > 0 ? (int)c->gpus_per_task
                                    : (spec->cluster.slurm.gpus_per_task > 0 ? spec->cluster.slurm.gpus_per_task
                                                                             : spec->hardware.gpus_per_replica);
    st_k8s_plan p = { .name = name,
                      .ns = c->k8s_namespace ? c->k8s_namespace : spec->cluster.kubernetes.ns,
                      .image = image,
                      .volume_claim = claim,
                      .gpu_resource = spec->cluster.kubernetes.gpu_resource,
                      .gpus = gpus,
                      .gpu_request = greq,
                      .parallelism = spec->cluster.kubernetes.parallelism,
                      .spec_text = text,
                      .spec_len = len,
                      .spec_hash = hash,
                      .configs = names,
                      .n_configs = spec->n_configs,
                      .version = ST_VERSION };
    st_buf b;
    st_buf_init(&b, ST_K8S_MANIFEST_MAX);
    if (rc == ST_EXIT_OK) {
        if (st_k8s_manifest(&p, &b) || write_text(c->k8s_manifest, &b))
            rc = ST_EXIT_FAIL;
        else
            printf("Wrote %s: ConfigMap %s-spec and Indexed Job %s (%d indices, one per configuration).\n"
                   "Apply it with: kubectl apply -f %s; then merge with servetune report DIR on the volume.\n",
                   c->k8s_manifest, name, name, spec->n_configs, c->k8s_manifest);
    }
    st_buf_free(&b);
    free(names);
    free(text);
    return rc;
}
