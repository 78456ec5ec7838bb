/* The audit sweep: the policy is here, the engine is an executor's (audit/executor.h: HTTP, or
 * the engine model in virtual time for servetune predict). For each configuration of a spec, start the engine (adapter + process),
 * wait until it is ready and ours, send the warm-up requests, run each rate as a fresh
 * open-loop run (load/runner.h) chosen by the capacity search (audit/capacity.h), scrape
 * /metrics about once a second from a separate thread while it runs, commit each finished
 * rate run to the store, stop early / skip / refine, stop the engine, and go on with the next
 * configuration. A configuration that fails (does not start, crashes, hangs) is classified and
 * kept as a row; the audit goes on.
 *
 * With an emulator time scale K (--time-scale), rates are sent K x faster in wall time and the
 * records are scaled back by K, so everything stored is in the engine's (emulated) time.
 *
 * Interruption: when *stop becomes nonzero (a SIGINT/SIGTERM handler sets it) the run in
 * progress is abandoned (not stored), the engine's process group is stopped, and st_sweep_run
 * returns with res->interrupted = 1. */
#ifndef ST_AUDIT_SWEEP_H
#define ST_AUDIT_SWEEP_H
#include <signal.h>
#include <stdio.h>

#include "audit/capacity.h"
#include "audit/spec.h"
#include "audit/store.h"
#include "load/agent.h"
#include "load/workload.h"

typedef struct st_sweep_opts {
    const char *out_dir;
    int resume;                   /* reuse runs found in the store by run key */
    int quiet;                    /* only the final lines */
    int tty;                      /* progress redrawn in place (else one line per event) */
    FILE *out;                    /* progress stream (stderr) */
    const char *self_exe;         /* the servetune binary (for the emulator adapter) */
    volatile sig_atomic_t *stop;  /* set asynchronously to interrupt */
    struct st_executor *executor; /* what runs the engine (audit/executor.h); NULL: the HTTP executor
                                     (engine processes through their adapters) */
    const char *only;             /* run only the configuration of this name (a shard, cluster/shard.h);
                                     NULL: every configuration */
} st_sweep_opts;

typedef struct st_sweep_result {
    int interrupted;
    int configs_failed; /* did not start / crashed / hung */
    int runs_measured;  /* rate runs done now */
    int runs_reused;    /* found in the store (--resume) */
} st_sweep_result;

/* Runs the audit of spec into the store. 0 when it ran (configurations may have failed: see
 * res), -1 with err when it could not (store error). */
int st_sweep_run(const st_spec *spec, st_store *store, const st_sweep_opts *o, st_sweep_result *res, char *err,
                 size_t errlen);

/* The capacity of configuration ci on executor x, nothing stored (meant for the engine model,
 * where a run costs milliseconds). Sustained spec: the sustained search itself (its tolerance,
 * not tol). Burst spec: the configuration is started and warmed up as in a sweep, then rates are
 * probed with the sweep's workloads, schedules and early stop: doubling or halving from the
 * spec's first finite rate until a pass/fail bracket is found, then geometric bisection until
 * fail_rate / pass_rate - 1 <= tol. */
typedef struct st_sweep_bisect_result {
    double pass_rate;    /* highest passing offered rate (0: none found) */
    double fail_rate;    /* lowest failing offered rate above it (INFINITY: none up to 1e5 req/s) */
    double capacity_rps; /* delivered req/s at pass_rate (NAN: none) */
    double output_tps;   /* output tok/s at capacity, as st_capacity's (NAN: none) */
    double ttft_ms;      /* the SLO's p95 TTFT (terms[0]) measured at pass_rate (NAN: none) */
    double tpot_ms;      /* the SLO's p95 TPOT (terms[1]) measured at pass_rate (NAN: none) */
    int runs;            /* probes run */
    int failed_start;    /* the configuration did not start (why says why) */
    char why[600];
} st_sweep_bisect_result;
int st_sweep_bisect(const st_spec *spec, struct st_executor *x, int ci, double tol, st_sweep_bisect_result *out,
                    char *err, size_t errlen);

/* One run of configuration ci at one offered rate on executor x, nothing stored (meant for the
 * engine model: the prediction at the rate a measurement found): the configuration is started,
 * warmed up and run as the spec's search would run that rate (a sustained run, or a burst of
 * requests_per_rate). out: the run's result (verdict, SLO terms' values, output tokens/s).
 * stop (may be NULL): the audit's interruption flag. 0 ran; 1 the configuration did not start (why
 * says why); -1 with err (also when interrupted). */
int st_sweep_probe(const st_spec *spec, struct st_executor *x, int ci, double rate, volatile sig_atomic_t *stop,
                   st_rate_result *out, char *why, size_t whylen, char *err, size_t errlen);

/* The spec's workload for n requests: synthetic from seed, or the trace's first n requests (read
 * as a stream, not loaded whole; for the sustained search a trace shorter than n is repeated).
 * With workload.sessions: a trace's sessions replayed (its later turns dependent items, its last
 * sessions cut at n requests), or ceil(n / mean turns) synthetic sessions (st_spec_sessions);
 * else a trace's sessions are flattened on their recorded times. 0, or -1 with the reason in err. */
int st_sweep_workload(const st_spec *spec, uint64_t seed, uint32_t n, st_workload *w, char *err, size_t errlen);
/* The same, a trace's requests whose prompt + output exceed max_context (0: none) left out
 * (counted by the reader, not sent): what a configuration of that context can serve. An agent
 * trace: its tasks that hold such a request left out whole (st_sweep_agent_over_context). */
int st_sweep_workload_ctx(const st_spec *spec, uint64_t seed, uint32_t n, uint32_t max_context, st_workload *w,
                          char *err, size_t errlen);

/* The context in tokens of configuration c as the engine model reads its flags (--max-model-len,
 * else the model's max_position_embeddings), for a trace workload: the server refuses (HTTP 400) a
 * request whose prompt + output exceeds it, so the sweep leaves such requests out of c's runs,
 * counted, as servetune bench does (an agent trace: the tasks holding such a request, whole,
 * st_sweep_agent_over_context). 0: unknown (an engine the model cannot stand for, flags it cannot
 * read) or a synthetic workload (its lengths are checked by --check). */
uint32_t st_sweep_config_context(const st_spec *spec, const st_spec_config *c);
/* How many of the trace's requests (*total, every kept row) are longer than ctx (*over, the later
 * turns of their sessions included). 0, or -1 with err when the trace cannot be read. */
int st_sweep_trace_over_context(const st_spec *spec, uint32_t ctx, uint64_t *over, uint64_t *total, char *err,
                                size_t errlen);

/* An agent trace against ctx (load/agent.h st_agent_fit_context): its tasks that hold a request
 * longer (prompt as the graph grows it + output) than ctx, left out whole of the runs, and their
 * requests; task and node name the first such request. All zero for another workload or ctx 0.
 * 0, or -1 with err when the trace cannot be read. */
typedef struct st_sweep_agent_fit {
    st_agent_fit fit;
    char task[ST_AGENT_ID_MAX], node[ST_AGENT_ID_MAX];
} st_sweep_agent_fit;
int st_sweep_agent_over_context(const st_spec *spec, uint32_t ctx, st_sweep_agent_fit *f, char *err, size_t errlen);

/* A sustained spec's bounds (st_spec_check_bounds), and for engines the engine model knows, a
 * max_duration too short for one unloaded request's warm phase, window and drain on the model.
 * 0, or -1 with the reason in err. */
int st_sweep_check_bounds(const st_spec *spec, char *err, size_t errlen);

/* The run key: SHA-256 (hex) of everything that defines a burst run of configuration c at rate. */
void st_sweep_run_key(const st_spec *spec, const st_spec_config *c, double rate, char out[65]);
/* The same for a sustained run: its rate (or concurrency), replicate, the requests scheduled,
 * and the search keys that shape the run (max_duration, window, warm phase, confidence). */
void st_sweep_run_key_sustained(const st_spec *spec, const st_spec_config *c, double rate, int replicate,
                                uint32_t planned, char out[65]);

#endif
