/* servetune report DIR: re-render an audit's reports from its results database alone. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cluster/shard.h"
#include "audit/store.h"
#include "cli/cli.h"
#include "core/file.h"
#include "core/opts.h"
#include "report/report.h"

int cmd_report(int argc, char **argv)
{
    int quiet = 0;
    const st_opt opts[] = {
        { "quiet", 'q', ST_OPT_FLAG, &quiet, NULL, "print nothing on success", 0, 0, 0 },
        { NULL, 0, 0, NULL, NULL, NULL, 0, 0, 0 },
    };
    st_opts_result res;
    char err[1024] = "";
    int rc = ST_EXIT_OK;
    st_store *s = NULL;
    int lock_fd = -1;
    if (st_opts_parse(opts, argc - 1, argv + 1, 0, &res, err, sizeof err)) {
        rc = st_cli_usage_error("report", err);
        goto out;
    }
    if (res.help) {
        printf(
            "usage: servetune report DIR\n\n"
            "Re-renders DIR/report.html, DIR/report.md, DIR/report.json and DIR/results.csv from DIR/results.sqlite\n"
            "(written by servetune audit). Nothing is measured again. When DIR/shards/ holds the shards of an audit\n"
            "run across machines (servetune audit --only, --slurm), they are first merged into DIR/results.sqlite\n"
            "(shards of different spec texts are refused; docs/cluster.md). The database is opened read-only\n"
            "(nothing created; a file that is not servetune's database is refused), and one report or merge\n"
            "at a time may work in DIR (a lock on DIR/.servetune.lock).\n\nOptions:\n");
        st_opts_usage(stdout, opts);
        printf("\nExample:\n  servetune report audit-out\n\nExit codes: 0 written; 1 the database could not be read or "
               "the files written; 2 bad arguments; 4 interrupted while merging shards (SIGINT/SIGTERM: the merge is\n"
               "rolled back, DIR unchanged).\n");
        goto out;
    }
    if (res.npos != 1) {
        rc = st_cli_usage_error("report", "expected one DIR (an audit's output folder)");
        goto out;
    }
    const char *dir = res.pos[0];
    /* a distributed audit: the shards are merged first (cluster/shard.h) */
    if (st_shard_any(dir)) {
        rc = st_cli_merge_report(dir, NULL, quiet, 0);
        goto out;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, ST_STORE_FILE);
    if (access(path, R_OK)) {
        fprintf(stderr, "servetune report: %s: no results database (is it an audit's output folder?)\n", dir);
        rc = ST_EXIT_FAIL;
        goto out;
    }
    /* one report or merge at a time in DIR */
    if (st_dir_lock_file(dir, &lock_fd, err, sizeof err) || st_store_open_read(dir, &s, err, sizeof err) ||
        st_report_write_all(s, dir, err, sizeof err)) {
        fprintf(stderr, "servetune report: %s\n", err);
        rc = ST_EXIT_FAIL;
    } else if (!quiet) {
        printf("Report: %s/report.html (also report.md, report.json, results.csv)\n", dir);
    }
out:
    st_store_close(s);
    if (lock_fd >= 0)
        close(lock_fd);
    st_opts_result_free(&res);
    return rc;
}
