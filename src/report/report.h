/* Audit reports, rendered from the result store alone (servetune report DIR re-renders them):
 * report.md (markdown), report.json (schema in docs/report-json.md) and results.csv (the
 * results table). Sections and definitions follow docs/audit-report.md (shared reference):
 * headline, setup, results cheapest first, what each configuration changes, per-rate evidence,
 * method and limits.
 *
 * st_report_load builds the report model (st_report): the spec as stored, every configuration's
 * start row and rate runs, and from those the capacity (grid and refined), the cost figures and
 * the headline pick. The renderers are pure functions of the model. */
#ifndef ST_REPORT_H
#define ST_REPORT_H
#include <stddef.h>
#include <stdint.h>

#include "audit/capacity.h"
#include "plan/cost.h"
#include "plan/day.h"
#include "audit/spec.h"
#include "audit/store.h"
#include "audit/sustain.h"
#include "core/buf.h"
#include "load/session.h"
#include "report/notes.h"
#include "report/predvs.h"
#include "report/quality.h"
#include "report/traffic.h"
#include "report/whopays.h"

/* A configuration's one-line note: a failure class and the engine's whole detail line
 * (ST_PROC_DETAIL_MAX, engine/process.h) */
#define ST_REP_NOTE_MAX 768

/* The largest markdown, JSON or CSV report written (a bigger one is an error, never a cut file). */
#define ST_REPORT_MAX_BYTES ((size_t)64 << 20)
/* The longest headline paragraph. */
#define ST_REPORT_HEADLINE_MAX ((size_t)1 << 16)

typedef enum st_rep_status {
    ST_REP_OK = 0,      /* passed at some rate */
    ST_REP_NONE_PASSED, /* measured, met the SLO at no rate */
    ST_REP_FAILED,      /* the engine did not start (or broke before any verdict) */
    ST_REP_NOT_RUN,     /* not reached (interrupted audit) */
} st_rep_status;
const char *st_rep_status_name(st_rep_status s); /* "ok", "none_passed", "failed", "not_run" */

/* What the engine's /metrics said during a run (NAN when it was not scraped). */
typedef struct st_rep_server {
    uint32_t samples;    /* scrapes that gave figures */
    double kv_usage_max; /* fraction 0..1 */
    double running_max, waiting_max;
    double preemptions;     /* counter increase over the run */
    double prefix_hit_rate; /* prefix_hits / prefix_queries increase over the run */
    /* servetune's emulator against its model's schedule over the run: the shares of tokens sent
     * more than 10 ms and more than 100 ms of engine time late, and the share of engine time lost
     * when the process fell behind (NAN: not an emulator): the host's part of the latencies */
    double emu_late_share, emu_very_late_share, emu_dropped_share;
    /* The server's own timings of each request (llama.cpp's `timings`, from the stored records)
     * against the client's: srv_n completed requests carried them (0: none; the rest NAN). */
    uint32_t srv_n;
    double srv_prompt_p50_ms, srv_prompt_p99_ms;
    double ttft_gap_p50_ms, ttft_gap_p99_ms; /* client TTFT - server prompt time */
    double tpot_gap_p50_ms, tpot_gap_p99_ms; /* client TPOT - server generation time per step */
} st_rep_server;

typedef struct st_rep_cfg {
    const char *name;
    const st_spec_config *spec; /* the configuration in the stored spec */
    const st_config_row *row;   /* its start row, or NULL when never started */
    st_run_row *runs;           /* points into st_report.runs */
    int n_runs;
    st_rate_result *rr;     /* runs as the capacity module sees them */
    st_rep_server *server;  /* per run, from the stored /metrics samples */
    st_notes_run *digest;   /* per run, what the notes need from its records and samples
                                   (NULL when not loaded) */
    st_sustain_result *sus; /* per run, a sustained run's analysis (its summary_json) */
    unsigned char *has_sus; /* per run, 1 when sus[j] holds one */
    st_capacity grid;       /* from the spec's rates only */
    st_capacity refined;    /* with the rates refine added */
    const st_capacity *cap; /* the one priced: refined when refine ran, else grid */
    st_cost cost;
    double ttft_p95_ms, tpot_p95_ms;  /* at the capacity rate */
    double cap_vs_base, cost_vs_base; /* relative change vs the baseline; NAN when n/a */
    int day_ok;                       /* the spec's traffic day priced at its capacity (day) */
    st_day_cost day;
    st_rep_status status;
    int ran;                    /* it ran at least one rate (ST_REP_FAILED: the engine failed after it started) */
    char note[ST_REP_NOTE_MAX]; /* why it failed / passed nowhere, in one line */
    /* Multi-turn sessions (workload.sessions): the rates are session starts per second; at the
     * capacity rate (cap->pass_rate sessions/s, cap->capacity_rps requests/s delivered), the
     * figures of each turn from the run's records (load/session.h); n_turns 0: none. */
    st_turn_row turns[ST_TURN_ROWS];
    int n_turns;
    double requests_per_session; /* the capacity run's requests over its sessions (NAN: none) */
    /* the capacity run's tasks (sessions) whose every request completed, and their makespan, first
     * arrival to last end (load/agent_run.h st_agent_makespans); tasks_done 0: none */
    uint32_t tasks_done;
    double makespan_p50_ms, makespan_p95_ms;
} st_rep_cfg;

typedef struct st_report {
    st_audit_row audit;
    st_spec spec;
    st_config_row *rows;
    int n_rows;
    st_run_row *runs;
    int n_runs;
    st_rep_cfg *cfg; /* in spec order; cfg[0] is the baseline */
    int n_cfg;
    int *order;             /* cheapest first */
    int pick;               /* headline pick (index in cfg), -1 when nothing passed */
    int refine;             /* the spec asked for refine (a burst test) */
    int sustained;          /* the sustained search (else a burst test) */
    st_notes notes;         /* the notes and diagnosis every renderer shows (report/notes.h) */
    st_rep_traffic traffic; /* "Your traffic" when the workload is a trace (report/traffic.h) */
    json_t *who_pays;       /* "Who pays" when the trace names tenants (report/whopays.h), or NULL */
    json_t *agent_trace;    /* an agent-trace audit: the trace's shape (meta "agent_trace"), or NULL */
    st_predvs predvs;       /* the prediction run before a measured audit (report/predvs.h) */
    /* "A traffic day" (the spec's traffic: block; report/day.h): each configuration's day in
     * cfg[i].day; the serverless price used (0: none) and where it came from */
    int day_present;
    double day_serverless_price_per_gpu_s;
    char day_serverless_from[64];
    st_rep_quality quality; /* "Quality vs baseline" (report/quality.h) */
} st_report;

int st_report_load(st_store *s, st_report *out, char *err, size_t errlen);
void st_report_free(st_report *r);

int st_report_markdown(const st_report *r, st_buf *out);
int st_report_json(const st_report *r, st_buf *out);
int st_report_csv(const st_report *r, st_buf *out);
/* The headline paragraph (plain text). */
int st_report_headline(const st_report *r, st_buf *out);

/* "p95 TTFT" for term i of the spec's SLO (out: at least 24 bytes). */
void st_report_term_name(const st_spec *s, int term, char *out, size_t n);
/* What binds a sustained capacity, in words: an SLO term, "over-saturation" (the failing end
 * over-saturated), or "-". */
void st_report_binding(const st_report *r, const st_rep_cfg *c, char *out, size_t n);
/* How long each rate runs, in words ("runs as long as a steady state needs" then `after`, or "N
 * requests per rate|level") into out. */
void st_report_run_length(const st_report *r, const char *after, char *out, size_t n);
/* The synthetic workload in words (plain text: sizes, spread, prefix, run length, warm-up,
 * arrivals, seed), as the markdown and HTML setups show it. */
void st_report_synthetic_text(const st_report *r, st_buf *b);
/* An agent trace's workload (audit/spec.h workload.agent) as a sentence: what is replayed and how,
 * what the rates count. */
void st_report_agent_text(const st_report *r, st_buf *b);
/* The agent trace's shape in words (tasks, requests, fan-out, joins, depth, ideal prefix-cache hit
 * rate), from its stored shape; nothing when none is stored. */
void st_report_agent_shape_text(const st_report *r, st_buf *b);
/* The agent trace's format in words ("WEKA-style agentic trace", "task-graph JSONL"). */
const char *st_report_agent_format(const st_spec *s);
/* Where the sustained search started, in words ("it starts near the engine model's forecast...;
 * the rates 4, 8 req/s are its grid"); grid: the spec's rates as text. */
void st_report_search_start(const st_report *r, const char *grid, char *out, size_t n);
/* The spec's rates (or concurrency levels), "4, 8, 16", into out (cut at n). */
void st_report_rate_grid(const st_spec *s, char *out, size_t n);
/* The verdict of run j in the report's words (audit/capacity.h st_verdict_words). */
const char *st_report_verdict_words(const st_report *r, const st_run_row *w);

/* Loads the model and writes DIR/report.md, DIR/report.json, DIR/results.csv and
 * DIR/report.html (report/html_audit.h). */
int st_report_write_all(st_store *s, const char *dir, char *err, size_t errlen);

#endif
