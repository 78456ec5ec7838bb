/* Bench results as files and text: the versioned JSON document (docs/bench-json.md), the
 * per-request CSV, and the readable table. Writes only to the FILE given; never sees the
 * API key (nothing here takes one). */
#ifndef ST_OUTPUT_H
#define ST_OUTPUT_H
#include <stdint.h>
#include <stdio.h>

#include "load/runner.h"
#include "load/stats.h"

#define ST_BENCH_SCHEMA "servetune.bench/1"

/* What was run, as shown in the outputs. Strings may be NULL. */
typedef struct st_bench_meta {
    const char *url;
    const char *api;        /* "completions", ..., or "raw" */
    const char *model;
    int stream;
    const char *workload;   /* "synthetic" or "trace" */
    const char *trace_path;
    uint32_t input_tokens, output_tokens, prefix_tokens, num_requests;
    double range_ratio;
    uint64_t seed;
    const char *arrival;    /* "poisson", "constant", "gamma", "inf", "trace" */
    double rate;            /* requests/s, INFINITY for inf, NAN when the trace times are used */
    double burstiness;
    uint32_t max_concurrency, warmup;
    double timeout_s;
    st_slo slo;
} st_bench_meta;

/* The whole JSON document (summary, self-check, every record with its token event times). */
int st_bench_write_json(FILE *f, const st_bench_meta *m, const st_run_result *res, const st_summary *s);
/* One CSV row per request (header first). Fields with commas/quotes/newlines are quoted. */
int st_bench_write_csv(FILE *f, const st_run_result *res);
/* The readable summary table. */
void st_bench_print_table(FILE *f, const st_bench_meta *m, const st_run_result *res, const st_summary *s);

#endif
