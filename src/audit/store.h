/* The result store: one SQLite database (DIR/results.sqlite) per audit. Everything a report
 * shows is recomputable from it: the spec text, each configuration's start (argv, startup time,
 * failure class and log tail, engine facts), each rate run's summary figures, every
 * per-request record with its token event times, and the /metrics samples taken during the run.
 *
 * Each completed rate run is written in one transaction (st_store_run_put) the moment it ends,
 * so an interrupted audit loses at most the run in progress. --resume looks runs up by their
 * run key (a hash of everything that defines the run, st_store_hash).
 *
 * Times in the requests table are ns relative to the run's start, -1 when they did not happen
 * (load/record.h). Wall-clock times (started/ended) are ns since the epoch. */
#ifndef ST_AUDIT_STORE_H
#define ST_AUDIT_STORE_H
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "core/clock.h"
#include "core/secret.h"
#include "engine/metrics.h"
#include "load/record.h"

typedef struct st_store st_store;

#define ST_STORE_FILE "results.sqlite"

/* Opens (creating when needed) DIR/results.sqlite; DIR is created if missing. */
int st_store_open(const char *dir, st_store **out, char *err, size_t errlen);

/* Opens DIR/results.sqlite to read it (reports, calibrate, --status): it must exist and be
 * servetune's (ST_STORE_READONLY); nothing is created, neither the folder nor the file. */
int st_store_open_read(const char *dir, st_store **out, char *err, size_t errlen);

/* st_store_open_file flags. */
#define ST_STORE_ROLLBACK 1 /* a rollback journal instead of WAL (a shard on a shared filesystem) */
/* Open an existing database to read it: SQLITE_OPEN_READONLY, nothing created or written. The file
 * must be a non-empty regular file (a dangling symlink, a 0-byte file are refused by name) holding
 * servetune's tables (another program's SQLite file is refused). Two cases write, both to a
 * database already checked as servetune's: a database of an older servetune gets its later
 * columns, and a hot journal (a write interrupted) is rolled back, which SQLite cannot do
 * read-only; where the file or folder is not writable that is an error saying so. */
#define ST_STORE_READONLY 2
/* Open an existing database for writing (a shard being merged): the same checks as
 * ST_STORE_READONLY, and the file is never created. */
#define ST_STORE_EXISTING 4
/* Opens the database file at path (its folder must exist); created with the schema unless
 * ST_STORE_READONLY or ST_STORE_EXISTING. An existing non-empty file that is not servetune's
 * database is refused, never given servetune's tables. */
int st_store_open_file(const char *path, int flags, st_store **out, char *err, size_t errlen);
void st_store_close(st_store *s);
/* Every text the store writes from now on (errors, failure details, log tails, command lines,
 * engine facts, notes) has these secrets removed first. secrets must outlive the store (NULL:
 * none). */
void st_store_set_secrets(st_store *s, const st_secrets *secrets);
/* The last SQLite error message of this store. */
const char *st_store_errmsg(const st_store *s);

/* Hex SHA-256 of len bytes (65 bytes with the NUL). */
void st_store_hash(const void *data, size_t len, char out[65]);

typedef struct st_audit_row {
    char spec_hash[65];
    char *spec_path;
    char *spec_text;
    char *version;
    int64_t started;       /* wall ns */
    int64_t finished;      /* wall ns, 0 while running */
    int partial;           /* 1 until the audit ends normally */
    char *note;            /* e.g. "interrupted by SIGINT" */
    int prediction;        /* made by the engine model (servetune predict), not measured (meta "prediction") */
    char *suggested_rates; /* predict --suggest-rates: the rates: line suggested (meta "suggested_rates"), or NULL */
    char *model_note;      /* predict: how the engine was modelled (meta "model_note"), or NULL */
    char *disagg_md;       /* predict --disagg: the disaggregated section, markdown (meta "disagg_md"), or NULL */
    char *disagg;          /* predict --disagg: the same as JSON (meta "disagg"), or NULL */
    char *traffic;         /* a trace workload's statistics and advice, JSON servetune.traffic/1 (meta
                              "traffic", audit/traffic.h), or NULL */
} st_audit_row;
void st_audit_row_free(st_audit_row *a);

/* Starts or resumes the audit of a spec. Without resume an existing audit in the store is an
 * error; with resume the stored spec hash must match. Sets partial = 1. */
int st_store_audit_begin(st_store *s, const char *spec_path, const char *spec_text, size_t spec_len,
                         const char *version, int resume, char *err, size_t errlen);
/* Writes the audit row as given (a merge of shards: cluster/shard.h). */
int st_store_audit_put(st_store *s, const st_audit_row *a);
/* Marks the audit finished (partial 0 or 1, with an optional note). */
int st_store_audit_finish(st_store *s, int partial, const char *note);
/* 1 with *out filled, 0 when the store holds no audit, -1 on error. */
int st_store_audit_get(st_store *s, st_audit_row *out);

/* Facts about the audit as a whole, by key (table meta): "prediction" ("1" for servetune
 * predict), "suggested_rates", "model_note", "traffic", "disagg_md", "disagg". Put replaces. */
int st_store_meta_put(st_store *s, const char *key, const char *value);
/* 1 with *out (malloc'd), 0 when absent, -1 on error. */
int st_store_meta_get(st_store *s, const char *key, char **out);
/* Durability of each commit: 1 (default) syncs to disk at every commit (an audit's runs survive
 * a power loss); 0 lets the OS decide (servetune predict: the runs are recomputed in seconds). */
int st_store_set_durable(st_store *s, int durable);

typedef struct st_config_row {
    char *name;
    int idx;              /* position in the spec */
    char *status;         /* "pending", "running", "done", "failed", "interrupted" */
    int64_t started;      /* wall ns */
    double startup_s;     /* start to ready, NAN if never ready */
    char *failure_class;  /* NULL, or "oom", "bad_flag", "crash", "timeout", "port_taken", ... */
    char *failure_detail; /* one line */
    char *log_tail;       /* last lines of the engine log (when it failed) */
    char *argv;           /* the command line, space-joined (for the report) */
    char *facts;          /* JSON object: engine version, GPU, driver, KV cache size... */
} st_config_row;
void st_config_row_free(st_config_row *c);
/* Inserts or replaces the row of c->name. */
int st_store_config_put(st_store *s, const st_config_row *c);
int st_store_configs_get(st_store *s, st_config_row **out, int *n);
void st_config_rows_free(st_config_row *rows, int n);

#define ST_STORE_TERMS 16
typedef struct st_run_row {
    int64_t id; /* filled by put */
    char *config;
    int seq;     /* order within the configuration */
    double rate; /* offered req/s; INFINITY for inf */
    int grid;    /* 1: a spec rate; 0: added by refine */
    char run_key[65];
    char *verdict; /* "pass", "fail", "skipped", "error" */
    char *why;     /* the verdict's sentence, or why it was skipped / broke */
    int stopped_early;
    uint32_t planned, sent, completed, failed;
    double duration_s; /* first send .. last completion */
    double delivered_rps, output_tps, sustained_rps, offered_rps_achieved;
    double worst_ratio;
    double ttft_p50_ms, ttft_p95_ms, ttft_p99_ms;
    double tpot_p50_ms, tpot_p95_ms, tpot_p99_ms;
    double itl_p95_ms, e2e_p95_ms, lag_p99_ms;
    int n_terms;
    double term_ms[ST_STORE_TERMS]; /* the SLO terms' measured values, spec order */
    int client_limited;             /* the load generator lagged its schedule */
    char *summary_json;             /* every other figure, JSON (may be NULL) */
    int64_t started, ended;         /* wall ns */
} st_run_row;
void st_run_row_free(st_run_row *r);
/* SLO term t's measured value (t 0: the TTFT term, 1: the TPOT term); a run stored without
 * terms falls back to its p95 TTFT / TPOT. */
static inline double st_run_row_term_ms(const st_run_row *r, int t)
{
    return r->n_terms > t ? r->term_ms[t] : t ? r->tpot_p95_ms : r->ttft_p95_ms;
}

/* Writes a run, its records and its metric samples in one transaction; sets run->id. A row with
 * the same run key is replaced (with its records and samples). */
int st_store_run_put(st_store *s, st_run_row *run, const st_record *recs, uint32_t n_recs,
                     const st_metrics_sample *samples, uint32_t n_samples);
/* 1 and *out filled when a run with that key exists, 0 when not, -1 on error. */
int st_store_run_find(st_store *s, const char *run_key, st_run_row *out);
/* All runs of a configuration (or of every configuration when config is NULL), by config index
 * then seq. */
int st_store_runs_get(st_store *s, const char *config, st_run_row **out, int *n);
void st_run_rows_free(st_run_row *rows, int n);
/* A run's records (caller frees each with st_record_free, then the array). */
int st_store_records_get(st_store *s, int64_t run_id, st_record **out, uint32_t *n);
/* A run's metric samples (names owned by the array; free with st_store_samples_free). */
int st_store_samples_get(st_store *s, int64_t run_id, st_metrics_sample **out, uint32_t *n);
void st_store_samples_free(st_metrics_sample *m, uint32_t n);

/* Copies the shard database at path (a store of the same schema, cluster/shard.h) into s in one
 * transaction: its configuration rows, its runs with their requests and metric samples, and
 * its meta keys that s lacks (not its audit row). Runs are renumbered to follow s's runs, in the
 * shard's seq order. A shard whose tables differ from s's, or that holds a configuration or a
 * run key s already has, is refused whole: -1 with "PATH: reason" in err, s unchanged. */
int st_store_merge_shard(st_store *s, const char *path, char *err, size_t errlen);
/* The interruption flag (a SIGINT/SIGTERM handler sets it; NULL: none): a statement running when
 * it is set fails with SQLITE_INTERRUPT within about a thousand virtual-machine steps (its
 * transaction rolled back), so that a long merge ends at once. */
void st_store_set_stop(st_store *s, const volatile sig_atomic_t *stop);

#endif
