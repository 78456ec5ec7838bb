/* Executors: what runs a configuration for the audit sweep (audit/sweep.h). The sweep owns the
 * policy (capacity search, workloads, schedules, warm-up, early stop, figures, verdicts, store);
 * an executor owns the engine:
 *
 *   http  (exec_http.c)  starts the engine process through its adapter, waits until it is ready
 *                        and ours, drives each rate with the open-loop HTTP runner while a
 *                        thread scrapes /metrics, checks the engine survived, stops it;
 *   model (exec_model.c) builds an st_emu_config from the configuration's vLLM flags (emu/flags.h,
 *                        the emulator's own parser), refuses it as vLLM would (memory plan), and
 *                        runs each rate on one engine-model session in virtual time, sampling
 *                        the engine's state every emulated second. No server, no sockets, no
 *                        child process: `servetune predict`.
 *
 * Times: the executor's clock may run time_scale x faster than the engine's (the emulator's
 * --time-scale). Schedules and the timeout handed to run_rate are in the ENGINE's time; ticks
 * see records on the executor's clock (tick converts with time_scale); run_rate returns records
 * and samples in the engine's time. */
#ifndef ST_AUDIT_EXECUTOR_H
#define ST_AUDIT_EXECUTOR_H
#include <signal.h>
#include <stdint.h>

#include "audit/spec.h"
#include "audit/store.h"
#include "core/buf.h"
#include "engine/process.h"
#include "load/record.h"
#include "load/runner.h"
#include "load/workload.h"

typedef struct st_executor st_executor;

/* One rate run (or the warm-up). */
typedef struct st_exec_rate {
    const st_spec_config *c;
    st_workload *w;           /* the requests; with sessions (w->n_dependent > 0) the executor fills
                                 each later turn's history as the turn before it ends (load/session.h) */
    const st_ns *sched;       /* w->n arrival offsets (ns, engine time; a session's later turns: unused) */
    uint32_t warmup;          /* the first `warmup` items are warm-up (not measured) */
    double timeout_s;         /* per request, engine time */
    uint32_t max_concurrency; /* > 0: at most this many requests in flight; 0: open loop */
    int closed_loop;          /* 1: a closed loop of max_concurrency clients (every item due at once;
                                 each sent when a previous one ended) */
    /* Called about once a second of the executor's clock with the run's progress and the metric
     * samples taken so far (engine seconds since the run's start; may be none); returns nonzero
     * to stop the run (early stop, a sustained run's end, or interruption). May be NULL. */
    int (*tick)(void *arg, const st_runner_progress *p, const st_metrics_sample *samples, uint32_t n_samples);
    void *tick_arg;
} st_exec_rate;

typedef struct st_exec_out {
    st_record *records; /* w->n, engine time (owned: st_record_free each, then free) */
    uint32_t n;
    st_metrics_sample *samples; /* engine seconds from the run's start; names are static strings */
    uint32_t n_samples;
    int stopped;        /* tick asked to stop */
    int client_limited; /* the load generator lagged its schedule */
    int engine_failed;  /* the engine died or hung during the run (row filled) */
    double idle_wait_s; /* seconds waited before the run for the engine to drain the previous one */
} st_exec_out;

typedef struct st_executor_ops {
    const char *name; /* "http", "model" */
    /* Starts configuration c. 0 ready (row: argv, startup_s, facts); -1 failed (row: status
     * "failed", failure class/detail/log tail, as st_exec_fill_failure writes them); 1 interrupted. */
    int (*start_config)(st_executor *x, const st_spec_config *c, st_config_row *row);
    /* Runs one rate or the warm-up. 0 ran (out filled); 1 interrupted (nothing to keep); -1 could
     * not run (err). After the run, when requests failed or it stopped early (errors > 0 or
     * out->stopped), the executor checks the engine is still alive and answering and sets
     * out->engine_failed with row's failure filled when not. */
    int (*run_rate)(st_executor *x, const st_exec_rate *in, st_config_row *row, st_exec_out *out, char *err,
                    size_t errlen);
    /* Stops the engine of the current configuration (idempotent). */
    void (*stop_config)(st_executor *x);
    void (*free)(st_executor *x);
    /* May be NULL (nothing to do). Makes a run's requests what the engine will count before the
     * run: the HTTP executor fits text prompts (chat and TGI APIs) to their exact token counts
     * with the engine's /tokenize (load/tokenize.h); when the server has none, the lengths stay
     * estimated, said once in the configuration's log. 0, or 1 when interrupted. */
    int (*prepare)(st_executor *x, st_workload *w);
    /* May be NULL (no engine to ask: the engine model). POSTs a JSON body to path on the current
     * configuration's engine (one blocking request, the spec's request timeout): 0 with the
     * answer's status and body, or -1 with err. The quality pass's requests (audit/quality.h). */
    int (*post)(st_executor *x, const char *path, const char *body, size_t len, st_buf *answer, int *status, char *err,
                size_t errlen);
} st_executor_ops;

struct st_executor {
    const st_executor_ops *ops;
    const st_spec *spec;
    double time_scale; /* executor seconds -> engine seconds (set by start_config) */
    int prediction;    /* 1: results come from the engine model, not a measurement */
    /* The interruption flag (a SIGINT/SIGTERM handler sets it; NULL: never): a run stops within a
     * step of the engine model or a tick of the load generator once it is set. */
    volatile sig_atomic_t *stop;
    /* Generated workloads shared with other executors' runs (load/wlcache.h; NULL: each run makes
     * its own): the sweep takes a run's synthetic prompts from it when nothing changes them. */
    struct st_wlcache *workloads;
    void *impl;
};

/* The HTTP executor. logdir: where engine logs go (its real path tags the engines:
 * st_proc_dir_tag); self_exe: the servetune binary (emulator); stop: the audit's interruption
 * flag. The spec's secrets (st_spec_secrets) are read from the environment here: -1 with err when
 * one is missing. */
int st_exec_http_new(const st_spec *spec, const char *logdir, const char *self_exe, volatile sig_atomic_t *stop,
                     st_executor **out, char *err, size_t errlen);
/* The engine-model executor (servetune predict). logdir (may be NULL): a per-configuration log
 * with the startup lines the emulator would print. 0, or -1 with err when the spec's engine
 * cannot be modelled (st_exec_model_supported). */
int st_exec_model_new(const st_spec *spec, const char *logdir, st_executor **out, char *err, size_t errlen);
/* 1 when the engine model can stand for the spec's engine (vllm, emulator); 0 with the reason. */
int st_exec_model_supported(const st_spec *spec, char *why, size_t whylen);
/* Runs the model executor with a calibration (emu/calib.h; NULL: none; kept by reference):
 * applied to each configuration it matches, the others run on the model's defaults with a
 * warning in their log; a rate beyond the calibrated range by more than ST_CALIB_SLACK is
 * noted on stderr and in the log. */
struct st_emu_calib;
void st_exec_model_set_calibration(st_executor *x, const struct st_emu_calib *calib);
#define ST_CALIB_SLACK 1.5
/* The engine model's configuration of one spec configuration: its vLLM flags through the
 * emulator's own parser (emu/flags.h); the GPU from --gpu, SERVETUNE_EMULATE_GPU in the
 * configuration's or the spec's env, else hardware.gpu. cmd (may be NULL) gets the command
 * line shown for it; unknown (may be NULL) the flags the model ignores. 0, or
 * ST_EMU_ARGS_USAGE / ST_EMU_ARGS_STARTUP (emu/flags.h) with err. */
struct st_emu_config;
struct st_strv;
int st_exec_model_config(const st_spec *s, const st_spec_config *c, struct st_emu_config *cfg, char *cmd, size_t cmdlen,
                         struct st_strv *unknown, char *err, size_t errlen);
void st_executor_free(st_executor *x);

/* The HTTP executor's wall-clock request timeout at time scale K: timeout_s / K, but the scale
 * never brings it under ST_EXEC_WALL_TIMEOUT_MIN_S, nor under timeout_s itself when that is
 * shorter (a connection and the first byte take wall time whatever K is). K <= 0: timeout_s. */
#define ST_EXEC_WALL_TIMEOUT_MIN_S 1.0
double st_exec_wall_timeout(double timeout_s, double K);

/* Marks row failed with class c: status "failed", failure_class, failure_detail = the class's
 * text + ": " + detail (control characters and secrets removed), log_tail from log_path (when
 * given, secrets removed). secrets may be NULL. */
void st_exec_fill_failure(st_config_row *row, st_fail_class c, const char *detail, const char *log_path,
                          const st_secrets *secrets);
/* Frees out's records and samples. */
void st_exec_out_free(st_exec_out *out);

#endif
