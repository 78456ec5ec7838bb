/* Writers of a bench run's results: a readable table, JSON with a versioned schema
 * (docs/bench-json.md) holding the configuration, the summary (whole run and steady
 * state) and every per-request record, and CSV with one row per request.
 *
 * The run description (st_bench_info) is plain data filled by the caller (servetune
 * bench, the audit); the writers never see an API key. NaN figures become JSON null (CSV:
 * an empty field, table: "-"); infinite rates become the JSON string "inf". */
#ifndef ST_OUTPUT_H
#define ST_OUTPUT_H
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "load/record.h"
#include "load/session.h"
#include "load/stats.h"
#include "load/trace.h"

#define ST_BENCH_SCHEMA "servetune.bench/1"

typedef struct st_bench_info {
    /* Target (never an API key; a URL with credentials must be stripped by the caller). */
    const char *url, *api, *model;
    int stream;
    /* Workload: "synthetic", "sessions" or "trace". */
    const char *workload;
    const char *trace_path;              /* trace only */
    const char *trace_format;            /* trace only: the format read */
    const st_trace_counts *trace_counts; /* trace only: what was read and skipped (may be NULL) */
    const char *trace_sessions;          /* trace only: "replay", "flat" or "off" */
    int vllm_semantics;                  /* synthetic: vLLM's random dataset (prefix on top of input_len) */
    uint32_t sessions;                   /* conversations (synthetic sessions, or a trace's) */
    uint32_t turns_min, turns_max;       /* synthetic sessions */
    uint32_t turn_input;                 /* synthetic sessions: new tokens in each later turn */
    double think_s;                      /* synthetic sessions: mean think time */
    const st_turn_row *turns;            /* per-turn figures (may be NULL) */
    int n_turns;
    const char *exact_prompts;      /* "off", or how prompts were fitted with /tokenize */
    uint32_t fitted, fitted_exact;  /* prompts fitted with /tokenize, and how many to the exact length */
    uint32_t input_len, output_len; /* synthetic only */
    double range_ratio;
    uint32_t prefix_len;
    uint64_t seed;
    uint32_t num_requests, warmup;
    /* Arrivals. */
    const char *arrival; /* "poisson", "constant", "gamma", "inf", "trace" */
    double rate;         /* INFINITY for inf; NAN for a trace replayed as recorded */
    double burstiness;
    uint32_t max_concurrency; /* 0: unbounded */
    int closed_loop;          /* rate inf with max_concurrency: a fixed-count closed loop (each request
                                 sent when one ends, timed from its send, as vllm bench serve
                                 --max-concurrency C --num-prompts N) */
    double timeout_s;
    /* SLO terms and the client self-check threshold (as given to st_summary_compute). */
    st_summary_opts opts;
    /* Self-check as measured by the runner (its dispatch lag and event-loop delay); the
     * verdict written is client_limited (the runner's) OR the summary's. */
    double max_lag_ms;
    const st_dist *dispatch_lag; /* seconds; may be NULL */
    const st_dist *loop_delay;   /* seconds; may be NULL */
    int client_limited;
    const char *limited_reason; /* may be NULL */
    int interrupted;
    uint32_t connections_opened, retries, max_in_flight;
    int64_t started_wall_ns; /* wall clock at t0 (ns since the epoch), 0 unknown */
    int64_t t0_mono_ns;      /* CLOCK_MONOTONIC at t0 (to line records up with another
                                        process's monotonic times on the same machine), 0 unknown */
    const char *version;     /* servetune version; NULL: ST_VERSION */
    json_t *tasks;           /* agent task graphs: the task figures (st_agent_run_stats_json; borrowed), or NULL */
} st_bench_info;

/* The run's summary as a readable table. */
void st_output_table(FILE *f, const st_bench_info *info, const st_summary *s);

/* A JSON number, or null for NAN and infinities. */
json_t *st_jnum_or_null(double v);
/* One line for stderr when measured requests failed ("PROG: 3 of 10 requests failed (connect 3);
 * the first (request 0): connect to ...: Connection refused"), so the reason is seen without the
 * JSON, with --quiet too. Nothing when none failed. The records' errors are already sanitized. */
void st_output_failures(FILE *f, const char *prog, const st_record *recs, uint32_t n, const st_summary *s);

/* JSON pieces (new references; NULL only when out of memory). */
json_t *st_output_dist_json(const st_dist *d, double scale); /* scale 1e3: seconds to ms */
json_t *st_output_summary_json(const st_summary *s);
json_t *st_output_record_json(const st_record *r);
json_t *st_output_config_json(const st_bench_info *info);
/* The whole document: {"schema": ST_BENCH_SCHEMA, "servetune_version", "started_at",
 * "config", "self_check", "summary", "records": [...]}. records may be NULL (n = 0). */
json_t *st_output_json(const st_bench_info *info, const st_summary *s, const st_record *recs, uint32_t n);
/* Writes st_output_json to f (indented, trailing newline). 0 or -1. */
int st_output_json_write(FILE *f, const st_bench_info *info, const st_summary *s, const st_record *recs, uint32_t n);

/* CSV (RFC 4180): a header line, then one row per record (warm-up included, flagged). */
int st_output_csv(FILE *f, const st_record *recs, uint32_t n);

/* 1 when the verdict written is client-limited (info's or the summary's flag). */
int st_output_client_limited(const st_bench_info *info, const st_summary *s);

#endif
