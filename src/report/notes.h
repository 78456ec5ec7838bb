/* The notes an audit's data calls for, and the diagnosis from the engine's own metrics: one
 * list, built once from the loaded report model and rendered the same way by every report
 * (markdown, JSON, HTML). Every trigger and wording is documented in docs/notes.md.
 *
 * Pure: no I/O, no clock. Two steps:
 *  1. st_notes_run_digest reduces one run's per-request records and /metrics samples (as
 *     loaded from the result store) to the few figures the notes need (st_notes_run), so a
 *     report never holds every run's records at once;
 *  2. st_notes_build turns the report model (configurations, runs, capacities, costs, and
 *     each run's digest when present) into the list of notes.
 *
 * A note names its configuration (or none, for the whole audit) and the rates it concerns,
 * says what it found in one or two plain sentences, and carries the numbers behind it as
 * evidence (key/value pairs). */
#ifndef ST_REPORT_NOTES_H
#define ST_REPORT_NOTES_H
#include <stddef.h>
#include <stdint.h>

#include "audit/store.h"
#include "engine/metrics.h"
#include "load/record.h"

struct st_report;

typedef enum st_note_sev { ST_NOTE_INFO = 0, ST_NOTE_WARN, ST_NOTE_PROBLEM } st_note_sev;
/* "info", "warn", "problem" */
const char *st_note_sev_name(st_note_sev s);

#define ST_NOTE_RATES_MAX 32
/* The emulator lagged its model's schedule (note emulator_lagged, a warning): more than this
 * share of its tokens went out over 100 ms of engine time late, or it lost more than this share
 * of the engine's time (every step after slowed). Note emulator_jitter (info): more than
 * ST_NOTE_EMU_JITTER_SHARE of its tokens over 10 ms late (TTFT and ITL carry that delay). */
#define ST_NOTE_EMU_LATE_SHARE 0.05
#define ST_NOTE_EMU_DROPPED_SHARE 0.01
#define ST_NOTE_EMU_JITTER_SHARE 0.05
#define ST_NOTE_EVIDENCE_MAX 16
/* The longest text of one note (bytes). */
#define ST_NOTE_TEXT_MAX (1u << 14)

typedef struct st_note_evidence {
    char key[64]; /* e.g. "tpot_p95_ms", "gain:fp8-ckpt" */
    double value; /* NAN when not available; rates may be INFINITY ("inf") */
} st_note_evidence;

typedef struct st_note {
    st_note_sev sev;
    const char *kind;                /* stable short name (static), e.g. "decode_anomaly" */
    char *config;                    /* the configuration concerned (owned), or NULL: the whole audit */
    double rates[ST_NOTE_RATES_MAX]; /* offered req/s concerned, increasing; INFINITY for inf */
    int n_rates;
    char *text; /* one or two plain sentences (owned); does not repeat the config name */
    st_note_evidence ev[ST_NOTE_EVIDENCE_MAX];
    int n_ev;
    char *detail; /* e.g. the engine's log tail (owned), or NULL */
} st_note;

typedef struct st_notes {
    st_note *v;
    int n, cap;
} st_notes;
void st_notes_free(st_notes *ns);

/* ---- per-run digest ---------------------------------------------------------------------- */

#define ST_NOTES_ERR_MAX 160

typedef struct st_notes_run {
    int has_records, has_samples;

    /* records (warm-up excluded) */
    uint32_t n_records;
    uint32_t by_status[ST_REQ__COUNT];
    int first_http[ST_REQ__COUNT];                         /* HTTP status of the first of each status */
    char first_error[ST_REQ__COUNT][ST_NOTES_ERR_MAX];     /* its error message, one line */
    uint32_t tokens_checked;                               /* ok requests that asked for a number of output tokens */
    uint32_t tokens_short, tokens_long;                    /* of them: fewer / more than asked */
    uint32_t tokens_usage;                                 /* of them: the count came from the server's usage report */
    double tokens_asked_mismatched, tokens_got_mismatched; /* sums over the mismatched ones */
    double lag_p99_ms;                                     /* client send lag (sent - scheduled), NAN: none */

    /* /metrics samples, one "scrape" = the samples sharing a time */
    uint32_t scrapes;
    uint32_t kv_scrapes, kv_high;      /* scrapes with KV usage; of them >= ST_NOTES_KV_HIGH */
    double kv_max;                     /* NAN: not exposed */
    double preempt_delta;              /* counter increase over the run, NAN: not exposed */
    uint32_t preempt_steps;            /* scrape intervals in which the counter rose */
    uint32_t rw_scrapes, wait_scrapes; /* scrapes with running and waiting; of them waiting >=
                                          ST_NOTES_QUEUE */
    double running_max_waiting;        /* max running among the waiting scrapes (NAN: none) */
    double kv_max_waiting;             /* max KV usage among them (NAN: none / not exposed) */
    double waiting_max;
    double prefix_hits, prefix_queries; /* counter increases (tokens), NAN: not exposed */

    /* the engine's TTFT histogram (first to last scrape that had it) against the client's */
    int has_ttft_hist;
    double hist_t0, hist_t1; /* seconds from the run's start */
    st_prom_hist ttft_delta; /* per-run histogram (seconds) */
    double engine_ttft_p50_ms, engine_ttft_p95_ms;
    double engine_p95_lo_ms, engine_p95_hi_ms;     /* the bucket holding the engine's p95 */
    uint32_t client_n;                             /* requests whose first token fell in (hist_t0, hist_t1] */
    double client_ttft_p50_ms, client_ttft_p95_ms; /* from the request's send (client lag excluded) */
    double client_sched_ttft_p95_ms;               /* from its scheduled time (as the SLO measures) */
    double cdf_gap;                                /* max over the finite bounds of |F_client - F_engine| */

    /* speculative decoding over the run (docs/speculative.md): vLLM's counters, first to last
     * scrape (NAN: not exposed), accepted tokens by position (spec_n_pos kept); and the
     * per-response counts llama.cpp reports (records; rec_draft_requests 0: none) */
    double spec_drafts, spec_draft_tokens, spec_accepted;
    double spec_pos[ST_METRICS_SPEC_POS_MAX];
    uint32_t spec_n_pos;
    uint32_t rec_draft_requests;
    uint64_t rec_draft_tokens, rec_draft_accepted;
} st_notes_run;

/* KV cache usage at or above this fraction counts as high. */
#define ST_NOTES_KV_HIGH 0.9
/* A scrape with at least this many requests waiting counts as a queue. */
#define ST_NOTES_QUEUE 2

/* Digests a run: recs / samples may be NULL with a count of 0. Sample names are the generic
 * ones (engine/metrics.h) plus the TTFT histogram that engine/metrics.h stores
 * ("ttft_le_NN", "ttft_cum_NN", "ttft_count", "ttft_sum"). Sample times and record times are
 * from the same run start (record times in ns, sample times in s). */
void st_notes_run_digest(const st_record *recs, uint32_t n_recs, const st_metrics_sample *samples, uint32_t n_samples,
                         st_notes_run *out);

/* Builds the notes of a loaded report (struct st_report, report/report.h; each configuration's
 * `digest` array may be NULL). 0, or -1 when out of memory (out holds what was built). */
int st_notes_build(const struct st_report *r, st_notes *out);

#endif
