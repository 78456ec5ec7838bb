/* servetune calibrate: the engine model's free constants fitted to one deployment's own
 * measurements (docs/calibrate.md). Measured runs come from audit directories (results.sqlite:
 * the spec, each configuration's flags, every run's per-request records) or from `servetune
 * bench --json` runs with the engine's flags; each run is replayed on the engine model with
 * its exact requests and arrival times, and the constants the runs can identify are fitted
 * (emu/fit.h) to the measured throughput, TTFT p50/p95 and TPOT p50/p95. The result is an
 * emu/calib.h calibration file plus the fit's quality per run.
 *
 * Use: st_calibrate_set_init(&set); st_calibrate_add_audit(&set, DIR, ...) and/or
 * st_calibrate_add_bench_json(&set, text, cfg, ...); st_calibrate_fit(&set, &calib, &rep);
 * st_calibrate_report_json(&rep) for the file's "quality"; st_calibrate_set_free(&set). */
#ifndef ST_AUDIT_CALIBRATE_H
#define ST_AUDIT_CALIBRATE_H
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/strv.h"
#include "emu/calib.h"
#include "emu/config.h"
#include "emu/sim.h"

/* The figures compared, measured or predicted (NAN: none). */
enum { ST_CAL_TPUT = 0, ST_CAL_TTFT50, ST_CAL_TTFT95, ST_CAL_TPOT50, ST_CAL_TPOT95, ST_CAL_NFIG };
const char *st_cal_fig_name(int f);

typedef struct st_calibrate_run {
    char label[160];   /* "CONFIG @ RATE req/s" or the bench file */
    double rate;       /* offered req/s (INFINITY: all at once; 0: unknown) */
    st_emu_config cfg; /* the engine model's configuration of the run (default tuning) */
    st_emu_sim_item *items;
    uint32_t *ids; /* the items' prompt ids (owned) */
    uint32_t n;
    double measured[ST_CAL_NFIG];
    double predicted[ST_CAL_NFIG];
    double mean_in, mean_out;
    uint32_t max_concurrency; /* the client's cap on requests in flight (0: none; always < n) */
    char *prompts_sig;        /* bench runs: the workload that made its prompts, as JSON (owned; NULL: none) */
    int same_prompts_as;      /* bench runs: an earlier run of the set that sent the same prompts, or -1 */
} st_calibrate_run;

typedef struct st_calibrate_set {
    st_calibrate_run *runs;
    uint32_t n, cap;
    st_strv configs; /* the configuration names of every audit added (st_calibrate_check_configs) */
    /* The interruption flag (a SIGINT/SIGTERM handler sets it; NULL: never): the replays stop
     * within a step of the engine model and the fit and st_calibrate_predict fail with
     * "interrupted". */
    const volatile sig_atomic_t *stop;
    /* Progress of a long fit (NULL: none): called after each replay of every run, with the
     * phase ("probe": which constants the runs identify, done of total; "fit": the fit's
     * evaluations so far, total 0 as the minimiser decides when to stop) and the loss so far
     * (NAN while probing). The caller decides what to print and how often. */
    void (*progress)(void *arg, const char *phase, int done, int total, double loss);
    void *progress_arg;
} st_calibrate_set;

void st_calibrate_set_init(st_calibrate_set *s);
void st_calibrate_set_free(st_calibrate_set *s);

/* Adds the runs of an audit directory: every finished rate run (not skipped, not errored) of
 * every configuration that started (only those named in `configs` when not NULL;
 * st_calibrate_check_configs then refuses a name no audit had), with offered rate <=
 * max_rate (0: no limit). A prediction's directory is refused unless allow_prediction (tests).
 * Returns the number of runs added, or -1 with err. */
int st_calibrate_add_audit(st_calibrate_set *s, const char *dir, const st_strv *configs, double max_rate,
                           int allow_prediction, char *err, size_t errlen);
/* Every name of names is a configuration of some audit added; else -1 with err naming the first
 * that is not and the names there are. */
int st_calibrate_check_configs(const st_calibrate_set *s, const st_strv *names, char *err, size_t errlen);
/* Adds one `servetune bench --json` run (its text) measured on an engine whose configuration
 * is cfg (the engine's flags through emu/flags.h). time_scale: the emulator's --time-scale when
 * the run measured servetune's emulator (its record times are wall times: x time_scale gives
 * the engine's), else 1. 0, or -1 with err. */
int st_calibrate_add_bench_json(st_calibrate_set *s, const char *label, const char *text, size_t len,
                                const st_emu_config *cfg, double time_scale, char *err, size_t errlen);

/* A constant the fit left at its default, and why. */
typedef struct st_calibrate_skip {
    const char *name;
    char why[200];
} st_calibrate_skip;

typedef struct st_calibrate_report {
    double loss0, loss;
    int evaluations;
    uint32_t n_fitted;
    const char *fitted[32];
    uint32_t n_skipped;
    st_calibrate_skip skipped[32];
    double median_abs_err, worst_abs_err; /* over every run and figure, after the fit */
} st_calibrate_report;

/* Checks that every run is the same deployment (GPU, model, weights: else -1 with the reason),
 * decides which constants the runs identify (each moves some predicted figure by >= 2 % when
 * changed by 25 %, and not in the same way as a constant already chosen), fits those, and
 * leaves the others at their defaults with the reason in rep->skipped. Fills out (identity,
 * constants, range) and each run's predicted figures. 0, or -1 with err. */
int st_calibrate_fit(st_calibrate_set *s, st_emu_calib *out, st_calibrate_report *rep, char *err, size_t errlen);

/* The file's extra members: "defaulted", "notes" and "quality" (per-run residuals), as JSON
 * members without braces (for st_calib_write). */
void st_calibrate_report_json(const st_calibrate_set *s, const st_calibrate_report *rep, st_buf *b);
/* A plain-text table of the per-run residuals (what calibrate prints). */
void st_calibrate_report_text(const st_calibrate_set *s, const st_calibrate_report *rep, st_buf *b);

/* Predicted figures of every run with the set's current configurations (each run's cfg with
 * tuning t applied). 0, or -1 with err. Used by the fit and the tests. */
int st_calibrate_predict(st_calibrate_set *s, const st_emu_tuning *t, char *err, size_t errlen);

#endif
