/* An audit spread over several machines (docs/cluster.md): each configuration runs on its own
 * (`servetune audit SPEC -o DIR --only NAME`, by hand, as a Slurm array task or a Kubernetes
 * index) into its own shard, DIR/shards/NAME.sqlite: a result store (audit/store.h) that holds
 * the audit row (the spec text and its hash) and that one configuration's rows. No two
 * configurations write the same file. The merge copies every shard into DIR/results.sqlite, the
 * same database a single-machine audit writes, so the reports come out as a single-machine
 * audit's would from the same runs.
 *
 * Shards keep a rollback journal rather than WAL (a shared filesystem cannot share WAL's
 * memory index between hosts); a task killed mid-write leaves a journal that the next opener
 * rolls back, so a shard always holds whole runs. */
#ifndef ST_CLUSTER_SHARD_H
#define ST_CLUSTER_SHARD_H
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "audit/spec.h"

#define ST_SHARD_DIR "shards"
#define ST_SHARD_EXT ".sqlite"
/* meta key of a merged results.sqlite: how many shards it was merged from. */
#define ST_SHARD_META_KEY "merged_shards"

/* DIR/shards/NAME.sqlite into out. 0, or -1 when it does not fit. */
int st_shard_path(const char *dir, const char *config, char *out, size_t n);

/* What DIR/results.sqlite is: 0 absent (or holds no audit), 1 a single-machine audit's, 2 a
 * merge of shards, -1 unreadable (err says why). */
int st_shard_results_kind(const char *dir, char *err, size_t errlen);
/* Whether DIR/shards holds at least one shard. */
int st_shard_any(const char *dir);

/* One configuration's shard, as --status and --resume see it. */
typedef struct st_shard_info {
    char name[80];
    int present;     /* the file exists */
    int readable;    /* it could be read (else why says why) */
    char status[16]; /* the configuration row's status ("done", "failed", "running", "interrupted"),
                          "" when none */
    int runs;        /* rate runs stored */
    int partial;     /* the shard's audit did not end normally (or is still running) */
    char spec_hash[65];
    int64_t started, finished; /* the shard's audit row (wall ns; finished 0 while running) */
    char why[320];
} st_shard_info;

/* Reads the shard of each named configuration (out[i] for names[i]; the caller frees *out). 0, or
 * -1 out of memory. A shard that cannot be read is not an error here: its why says. */
int st_shard_scan(const char *dir, const char *const *names, int n, st_shard_info **out);
/* The spec stored in the first shard of DIR that holds one (for --status without a job record):
 * 0 with *spec filled, or -1 with err. */
int st_shard_spec(const char *dir, st_spec *spec, char *err, size_t errlen);
/* Whether a shard needs no more work: its configuration finished ("done") or did not start
 * ("failed"), as a single-machine --resume keeps them. */
int st_shard_finished(const st_shard_info *s);

typedef struct st_merge_result {
    int shards;     /* merged */
    int n_configs;  /* in the spec */
    int missing;    /* configurations without a shard */
    int unfinished; /* shards whose configuration did not finish (interrupted, killed) */
    int partial;    /* the merged audit is partial (missing or unfinished configurations) */
    /* the stop flag ended the merge (nothing changed) */
    int interrupted;
    char spec_hash[65];
} st_merge_result;

/* Merges every DIR/shards/NAME.sqlite into a new DIR/results.sqlite, written beside it and
 * renamed over it when whole. Every shard must hold an audit of the same spec text (and of
 * expect_hash, the SHA-256 of the spec text, when not NULL), written by the same servetune
 * version, with rows of its own configuration only. Runs are numbered in the spec's
 * configuration order, then run order; the audit row takes the earliest start and the latest
 * end; it is partial when a configuration is missing or did not finish. A DIR/results.sqlite
 * that a single-machine audit wrote is never replaced. stop (NULL: none): when set (a SIGINT/SIGTERM
 * handler), the merge ends within a shard's statement, res->interrupted. 0, or -1 with err
 * (nothing changed). */
int st_shard_merge(const char *dir, const char *expect_hash, const volatile sig_atomic_t *stop, st_merge_result *res,
                   char *err, size_t errlen);

#endif
