/* Subcommands. Each lives in src/cli/<name>.c and is listed in main.c's table.
 * A subcommand gets its own arguments (argv[0] is the subcommand name) and returns the
 * process exit status; see docs/exit-codes.md. */
#ifndef ST_CLI_H
#define ST_CLI_H
#include <signal.h>

/* The most text of a spec's warnings printed before a run. */
#define ST_CLI_WARNINGS_MAX ((size_t)1 << 16)
#include <stdio.h>

#include "audit/spec.h"
#include "audit/store.h"
#include "audit/sweep.h"
#include "core/opts.h"

/* Exit codes shared by every subcommand. */
enum {
    ST_EXIT_OK = 0,
    ST_EXIT_FAIL = 1,           /* the run happened but something failed (see the output) */
    ST_EXIT_USAGE = 2,          /* bad arguments or spec */
    ST_EXIT_CLIENT_LIMITED = 3, /* bench: the load generator could not keep the schedule */
    ST_EXIT_INTERRUPTED = 4,    /* SIGINT/SIGTERM: partial results kept */
};

typedef struct st_cmd {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} st_cmd;

/* Prints "servetune NAME: reason" and the usage hint to stderr; returns ST_EXIT_USAGE. */
int st_cli_usage_error(const char *cmd, const char *reason);
/* A subcommand's options parsed (st_opts_parse over argv[1..]) and --help answered with help(opts):
 * -1 to go on, else the exit status (ST_EXIT_USAGE once the reason is said, ST_EXIT_OK after the
 * help). */
int st_cli_parse(const char *cmd, const st_opt *opts, int argc, char **argv, int allow_unknown, st_opts_result *res,
                 void (*help)(const st_opt *opts), char *err, size_t errlen);
/* ST_EXIT_OK, or (printed) the usage error when the output file out (the option opt) is the input
 * in (what it is: "the trace it reads"): it would be replaced by what is computed from it. */
int st_cli_refuse_input_as_output(const char *cmd, const char *opt, const char *out, const char *in, const char *what);

/* SIGINT and SIGTERM set the returned flag (the only global state, cli/common.c); *which (when
 * not NULL) gets the flag holding the signal's number; st_cli_signal_name() says "SIGINT" or
 * "SIGTERM". */
volatile sig_atomic_t *st_cli_catch_signals(volatile sig_atomic_t **which);
const char *st_cli_signal_name(void);

/* The start and the end audit and predict share. Use:
 *   st_cli_run r; st_cli_run_init(&r, "audit");
 *   rc = st_cli_run_spec(&r, path);          // load + st_spec_check (the one validation path) + secrets
 *   rc = st_cli_run_open(&r, dir, resume, 0); // lock DIR, check what it holds, begin in the store
 *   ... st_sweep_run(&r.spec, r.store, ...) with progress on r.out ...
 *   rc = st_cli_run_finish(&r, &sr, failed, "Report");
 *   st_cli_run_close(&r);                     // always, whatever came before
 * Each step returns an exit status (ST_EXIT_OK to go on) after printing its reason. */
typedef struct st_cli_run {
    const char *cmd; /* "audit", "predict" */
    const char *spec_path, *out_dir;
    st_spec spec;
    int have_spec;
    st_secrets secrets; /* the spec's (st_spec_secrets): kept out of the store, reports and stderr */
    int lock_fd;        /* the lock on out_dir (st_dir_lock), -1 when not held */
    st_store *store;
    FILE *out; /* progress: stderr with the secrets removed */
} st_cli_run;
void st_cli_run_init(st_cli_run *r, const char *cmd);
int st_cli_run_spec(st_cli_run *r, const char *spec_path);
/* Creates and locks out_dir, then refuses before changing anything when it holds the other kind
 * (a prediction for an audit, a measured audit for a prediction) or, without resume, an audit, or
 * with resume another spec's; a prediction there is replaced by a new one. Begins the audit. */
int st_cli_run_open(st_cli_run *r, const char *out_dir, int resume, int prediction);
/* Marks the audit finished (partial when interrupted or failed), writes the reports, prints the
 * headline and "WHAT: DIR/report.html ...". The exit status: 4 interrupted; 1 when the sweep or
 * the reports failed, a configuration failed, or every request of a configuration failed; else 0. */
int st_cli_run_finish(st_cli_run *r, const st_sweep_result *sr, int sweep_failed, const char *what);
void st_cli_run_close(st_cli_run *r);
/* Removes an earlier prediction's database from dir (it is recomputed in seconds); a measured
 * audit there is never replaced. 0 (also when there is none), or -1 with err. */
int st_cli_clear_prediction(const char *dir, char *err, size_t errlen);
/* The report's headline (the answer in one paragraph), for the terminal; nothing when the store
 * cannot be read into a report. */
void st_cli_print_headline(st_store *s);
/* A trace workload's statistics and advice into the results database (meta "traffic") for the
 * report's "Your traffic" section; a failure is a warning on stderr, never fatal. */
struct st_store;
void st_cli_store_traffic(struct st_store *store, const struct st_spec *spec);

/* The trace options servetune bench and servetune trace stats share (docs/trace-format.md). */
#include <stdint.h>

#include "core/opts.h"
#include "load/trace.h"
typedef struct st_cli_trace {
    const char *format, *window, *model, *columns;
    double sample;
    long block_size, max_bad, max_context;
    st_trace_colmap colmap;
} st_cli_trace;
#define ST_CLI_TRACE_OPTS 7
/* Appends the ST_CLI_TRACE_OPTS option entries for t to opts[*n...]. */
void st_cli_trace_opts(st_cli_trace *t, st_opt *opts, int *n);
/* Fills o from what was given (format, window, model, sample with seed, ...). 0 or -1 with err. */
int st_cli_trace_resolve(st_cli_trace *t, uint64_t seed, st_trace_opts *o, char *err, size_t errlen);
/* Reads a log with text (load/spec_trace.h) line by line into s (or, when it is one JSON array,
 * element by element): trace stats --spec, and plan's n-gram acceptance from the trace. 0, or -1
 * with err. */
struct st_spec_stats;
int st_cli_spec_read(const char *path, struct st_spec_stats *s, char *err, size_t errlen);
/* servetune trace cost (cli/trace_cost.c): argv[0] is "cost". */
int st_cli_trace_cost(int argc, char **argv);

/* Loads a calibration file (emu/calib.h) for predict/audit; with a spec, checks it against
 * every configuration: those it does not match are named on stderr (they run on the model's
 * defaults), and a file that matches none is refused. 0, or -1 after printing why. */
struct st_emu_calib;
int st_cli_load_calibration(const char *path, const struct st_spec *spec, struct st_emu_calib *out);

/* A measured audit's prediction first (report/predvs.h): servetune predict of the same spec into
 * AUDIT_DIR/prediction (calibrated when calib is not NULL), its summary stored in the audit's
 * database for the report's "Predicted vs measured". Nothing when the engine cannot be
 * modelled or the summary is already stored (--resume). 0, or -1 after printing why (the audit
 * goes on without the comparison). */
struct st_store;
int st_cli_predict_first(const struct st_spec *spec, const char *spec_path, const char *audit_dir,
                         struct st_store *audit_store, const char *calib_path, const struct st_emu_calib *calib,
                         int quiet);

/* After the measurement: the engine model run at each configuration's measured capacity rate
 * where the prediction made first did not run that rate (a sustained search tries its own
 * rates), added to the stored summary, so that the report compares TTFT and TPOT at the same
 * offered rate. Nothing without a stored prediction. 0, or -1 after printing why. */
int st_cli_predict_at_measured(const struct st_spec *spec, struct st_store *audit_store,
                               const struct st_emu_calib *calib, volatile sig_atomic_t *stop);

/* servetune audit across machines (src/cli/audit_cluster.c, docs/cluster.md). */
#include <signal.h>

#include "core/opts.h"
#define ST_SPEC_MAX_CONFIGS_CLI 1024 /* configurations --only can pick from */
typedef struct st_cluster_cli {
    const char *only;        /* --only NAME[,NAME] */
    long only_index;         /* --only-index N, -1 when absent */
    const char *expect_hash; /* --expect-spec-hash: refuse a spec whose text changed */
    int dry_run, wait;
    const char *partition, *account, *time, *gpu_request;
    long gpus_per_task, max_concurrent;
    st_strlist sbatch_args;
    const char *k8s_manifest, *k8s_image, *k8s_namespace, *k8s_pvc;
} st_cluster_cli;
struct st_spec;
/* --only/--only-index: each configuration named into DIR/shards/NAME.sqlite. */
int st_cli_audit_shards(const struct st_spec *spec, const char *spec_path, const char *out_dir, const st_cluster_cli *c,
                        int resume, int quiet, volatile sig_atomic_t *stop, volatile sig_atomic_t *sig);
/* --slurm: the job array and the merge job (--dry-run, --wait, --resume). */
int st_cli_audit_slurm(const struct st_spec *spec, const char *spec_path, const char *out_dir, const st_cluster_cli *c,
                       int resume, volatile sig_atomic_t *stop);
/* --k8s-manifest FILE. */
int st_cli_audit_k8s(const struct st_spec *spec, const char *spec_path, const st_cluster_cli *c);
/* --status DIR. */
int st_cli_audit_status(const char *dir);
/* Merges DIR/shards into DIR/results.sqlite and writes the reports (--merge, servetune report).
 * 0 written; 1 the merge was refused or failed, or (strict) the audit is partial or a
 * configuration failed. */
int st_cli_merge_report(const char *dir, const char *expect_hash, int quiet, int strict);

int cmd_version(int argc, char **argv);
int cmd_trace(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
int cmd_audit(int argc, char **argv);
int cmd_predict(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_emulate(int argc, char **argv);
int cmd_gguf(int argc, char **argv);

#endif
