/* The self-contained HTML audit report.
 *
 * One HTML file: inline CSS, inline SVG charts (report/svg.h), no scripts, no external
 * assets (a Content-Security-Policy meta tag forbids them too), readable on screen and in
 * print. Sections as in the audit-report reference: headline, setup, results cheapest
 * first, what each configuration changes, method and limits with notes; then the evidence:
 * latency against offered rate with the SLO lines, capacity and cost per configuration,
 * latency distributions at the capacity rate, and server-side timelines per run.
 *
 * The renderer takes its own small input model (below), filled by the caller from the
 * audit's results; it does no I/O except st_html_write_file, reads no clock (the caller
 * gives the date string) and produces byte-identical output for identical input. Every
 * string is escaped: names, flags, reasons, notes and status texts may come from a spec,
 * an engine log or a server's error message.
 *
 * Numbers: NAN means "not available" and is shown as an em dash (or left out of a chart).
 * Fractions (vs_base, kv_usage) are fractions: -0.25 is shown as "-25 %". */
#ifndef ST_HTML_H
#define ST_HTML_H
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

/* The largest HTML report written (a bigger one is an error, never a cut page). */
#define ST_HTML_MAX_BYTES ((size_t)64 << 20)

typedef enum st_html_sev { ST_HTML_INFO = 0, ST_HTML_WARN, ST_HTML_ERROR } st_html_sev;

typedef enum st_html_cfg_status {
    ST_HTML_CFG_OK = 0,      /* passed at one rate at least: capacity etc. are set */
    ST_HTML_CFG_NONE_PASSED, /* ran, but met the SLO at no rate */
    ST_HTML_CFG_NOT_STARTED, /* the engine did not start (status_text says why) */
    ST_HTML_CFG_NOT_RUN,     /* not reached (interrupted audit, skipped) */
} st_html_cfg_status;

typedef struct st_html_kv {
    const char *key, *value;
} st_html_kv;

typedef struct st_html_note {
    st_html_sev sev;
    const char *config; /* the configuration it concerns, or NULL */
    const char *text;
    const char *detail; /* e.g. an engine log tail: shown below, line breaks kept; or NULL */
} st_html_note;

/* One tested rate of one configuration. */
typedef struct st_html_point {
    double rate; /* offered req/s; +inf for "all at once" (not drawn on rate axes) */
    double p95_ttft_ms, p95_tpot_ms;
    int passed; /* 1 passed the SLO, 0 failed, -1 unknown (e.g. stopped early) */
} st_html_point;

/* One scrape of the engine's /metrics during a run. NAN = the metric was not exposed. */
typedef struct st_html_sample {
    double t_s;      /* seconds since the run started */
    double kv_usage; /* KV cache usage, a fraction 0..1 */
    double running, waiting;
    double preemptions; /* cumulative count since the run started */
} st_html_sample;

typedef struct st_html_run {
    double rate;         /* offered req/s of this run (or its concurrency) */
    int passed;          /* as in st_html_point */
    const char *verdict; /* the verdict in words ("sustained", "over-saturated"...); NULL: passed/failed */
    const st_html_sample *samples;
    uint32_t n_samples;
} st_html_run;

/* A run at one end of a sustained search's bracket: requests in flight against time. */
typedef struct st_html_trace {
    double rate;
    const char *label; /* e.g. "16.1 req/s: sustained" */
    int passed;        /* 1: the pass end, 0: the fail end */
    const double *t;   /* engine seconds since the run started */
    const double *inflight;
    uint32_t n;
    double window_start_s, window_end_s; /* its measurement window (NAN: none) */
} st_html_trace;

typedef struct st_html_config {
    const char *name;
    int is_baseline; /* the current setup ("vs current" is against it) */
    int recommended; /* the headline's pick (highlighted) */
    st_html_cfg_status status;
    int ran;                 /* it ran a rate: NOT_STARTED means it failed while it ran, NOT_RUN that no run decided */
    const char *status_text; /* why, when status is not OK; also shown under OK rows if set */

    /* results row (at the capacity rate) */
    double capacity_rps;         /* capacity at SLO, delivered req/s */
    double capacity_vs_base;     /* fraction, e.g. 0.42 = +42 % */
    double pass_rate, fail_rate; /* bracket: highest passing and lowest failing tested rate (NAN: none) */
    int fail_undecided;          /* the runs at fail_rate were undecided: "undecided at", not "failed at" */
    int capacity_may_be_higher;  /* the highest tested rate passed */
    double grid_rps;             /* the grid answer when capacity_rps is a refined one, else NAN */
    double refined_rps;          /* a refined capacity shown beside a grid one, else NAN */
    double sustained_rps;        /* steady-state figure, NAN if not computed */
    double out_tok_s;
    double usd_per_mtok;
    double usd_vs_base; /* fraction */
    double p95_ttft_ms, p95_tpot_ms;
    double replicas;    /* at the stated peak; NAN if no peak was given */
    double monthly_usd; /* NAN if no peak was given */

    /* what it changes */
    const char *changes; /* exact flags / model / environment against the baseline */
    const char *reason;  /* one line from the spec */
    const char *command; /* the engine's command line as started, or NULL */

    /* the sustained search (sustained = 1), else a burst test */
    int sustained;
    double ci_lo, ci_hi;       /* the capacity's interval (NAN: none) */
    const char *binding;       /* what binds: "p95 TPOT", "over-saturation", ... (NULL: -) */
    const char *boundary;      /* "smooth" or "cliff" (NULL: no bracket) */
    double engine_minutes;     /* engine time of every run */
    double max_throughput_rps; /* what an over-saturated run delivered (NAN: none was) */
    int search_runs;
    const st_html_trace *traces; /* the runs at the bracket's ends */
    uint32_t n_traces;

    /* evidence */
    const st_html_point *points;
    uint32_t n_points;
    double dist_rate;      /* the rate the latency samples below were taken at */
    const double *ttft_ms; /* per-request TTFT at the capacity rate */
    uint32_t n_ttft;
    const double *tpot_ms;
    uint32_t n_tpot;
    const st_html_run *runs;
    uint32_t n_runs;
} st_html_config;

/* A table of plain-text cells with a title and an introductory paragraph (intro and after may
 * be NULL): cols heads, rows x cols cells row-major; the first column is text, the others are
 * figures (right-aligned) unless text_cols says otherwise. rows 0: left out. */
typedef struct st_html_table {
    const char *id; /* the section's id (letters, digits, '-') */
    const char *title, *intro, *after;
    const char *const *head;
    const char *const *cells;
    uint32_t cols, rows;
    uint32_t text_cols; /* bit c set: column c is text too (left-aligned, wrapping) */
} st_html_table;

typedef struct st_html_report {
    const char *title;          /* e.g. "Serving audit: Qwen3-8B on 1x H100" */
    const char *subtitle;       /* e.g. the date and the spec file; may be NULL */
    int partial;                /* the audit did not finish */
    const char *partial_reason; /* e.g. "interrupted by SIGINT after 3 of 6 configurations" */
    int prediction;             /* made by the engine model (servetune predict), not measured */
    const char *headline;       /* one paragraph of plain words */

    const st_html_kv *setup;
    uint32_t n_setup;
    /* "Your traffic" (a trace workload): figures and advice; n_traffic 0 leaves it out */
    const st_html_kv *traffic;
    uint32_t n_traffic;
    const char *const *traffic_advice;
    uint32_t n_traffic_advice;

    const st_html_config *configs; /* spec order; their index picks the chart colour */
    uint32_t n_configs;
    int keep_order;        /* the results table keeps the given order instead of sorting */
    const uint32_t *order; /* or this order (n_configs indices into configs), e.g. the
                                   audit's own cheapest-first order; NULL: sorted here */

    double slo_ttft_ms, slo_tpot_ms; /* NAN: that term is not set */
    int sustained;                   /* capacities come from the sustained search (else a burst test) */
    int concurrency;                 /* the runs are concurrency levels (closed loop), not rates */
    double confidence;               /* of the sustained intervals */

    const char *const *method; /* paragraphs of "method and limits" */
    uint32_t n_method;
    const st_html_note *notes;
    uint32_t n_notes;

    const char *generator; /* e.g. "servetune 0.1.0"; may be NULL */

    /* Optional tables after the results (the audit's "A traffic day", "Predicted vs measured"). */
    const st_html_table *extra;
    uint32_t n_extra;
} st_html_report;

/* Appends the whole document to out. 0, or -1 with a reason in err (e.g. the buffer's
 * maximum was reached: the document is then incomplete and must not be written). */
int st_html_render(const st_html_report *r, st_buf *out, char *err, size_t errlen);

/* Renders into memory (at most max_bytes; 0 = 64 MiB) and writes path atomically
 * (path.tmp, then rename). 0, or -1 with a reason in err. */
int st_html_write_file(const st_html_report *r, const char *path, size_t max_bytes, char *err, size_t errlen);

/* Formats a fraction as a signed percent change ("+42 %", "-25 %", "±0 %"; "—" for NAN). */
void st_html_fmt_change(char *out, size_t outlen, double frac);

#endif
