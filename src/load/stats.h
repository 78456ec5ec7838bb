/* Statistics over a run's records: percentiles, distributions and the run summary.
 * Pure: no I/O; st_summary_compute allocates scratch arrays and frees them before
 * returning.
 *
 * Percentiles use linear interpolation between closest ranks (numpy's default, "linear",
 * Hyndman & Fan type 7): for sorted x[0..n) and p in [0, 100], h = (n - 1) p / 100 and
 * P = x[floor h] + (h - floor h) (x[floor h + 1] - x[floor h]). [1..10]: p50 = 5.5,
 * p90 = 9.1, p99 = 9.91.
 *
 * All latencies are in seconds (doubles), rates per second. */
#ifndef ST_STATS_H
#define ST_STATS_H
#include <stdint.h>

#include "load/record.h"

typedef struct st_dist {
    uint32_t n;
    double mean, min, p50, p90, p95, p99, max;
} st_dist;

/* sorted ascending, no NaNs; NAN when n == 0; p clamped to [0, 100]. */
double st_percentile_sorted(const double *sorted, uint32_t n, double p);
/* Reorders vals in place (NaNs moved to the end and skipped; sorted when there are few values,
 * else partitioned by selection, which gives the same percentiles in linear time) and fills out;
 * with no values, n = 0 and every figure is NAN. */
void st_dist_compute(double *vals, uint32_t n, st_dist *out);

/* Optional per-request SLO terms for goodput, in seconds; 0 (or NAN) = term not set. */
typedef struct st_slo {
    double ttft_s, tpot_s, e2e_s;
    double ttfat_s; /* time to first answer token (reasoning models): a request with no answer
                       token does not meet it */
} st_slo;

/* 1 when r completed (ST_REQ_OK) and meets every set term. A request with fewer than two
 * output tokens has no TPOT and meets the TPOT term. */
int st_slo_met(const st_record *r, const st_slo *slo);

typedef struct st_summary_opts {
    st_slo slo;
    /* Client self-check: the run is flagged client_limited when the p99 client lag
     * (send - scheduled, measured requests) exceeds this, in seconds. 0 = no check. */
    double max_lag_p99_s;
} st_summary_opts;

/* Figures over one time window. Throughputs are per second of the window. */
typedef struct st_window {
    int valid; /* 0 when the window has no length (one request, or rate inf) */
    double start_s, end_s, duration_s;
    uint32_t completed, failed; /* requests that ended inside the window, by outcome */
    uint32_t good;              /* completed inside the window and meeting the SLO terms */
    uint64_t input_tokens;      /* prompt tokens of requests completed inside the window */
    double output_tokens;       /* output tokens whose events fall inside the window */
    double request_throughput, input_throughput, output_throughput, goodput;
    st_dist ttft, tpot, itl, e2e, lag;
} st_window;

typedef struct st_summary {
    uint32_t total;                    /* records given */
    uint32_t warmup;                   /* excluded from everything below */
    uint32_t measured;                 /* total - warmup */
    uint32_t sent;                     /* measured records that were sent */
    uint32_t completed;                /* ST_REQ_OK */
    uint32_t failed;                   /* measured - completed (never sent counts as failed too) */
    uint32_t by_status[ST_REQ__COUNT]; /* measured records per status (index: st_req_status) */

    double first_send_s, last_end_s; /* NAN when none */
    double duration_s;               /* first send to the last end of a measured request */
    double offered_rate;             /* (n - 1) / span of scheduled times; INFINITY when span 0 */
    double achieved_rate;            /* (sent - 1) / span of actual send times */

    uint64_t input_tokens, output_tokens, cached_tokens; /* completed requests */
    uint32_t output_requested_short;                     /* completed requests that got fewer tokens than asked */
    double request_throughput, input_throughput, output_throughput, total_token_throughput;

    /* Completed requests only (lag: every measured request that was sent). ITL: every gap
     * between consecutive token events of a completed request. */
    st_dist ttft, tpot, itl, e2e, lag;

    /* Reasoning models and the server's own counts (whole run, completed requests): time to
     * first ANSWER token, reasoning tokens, the prompt tokens the server counted (of the
     * prompt_reported_n requests that reported them) against the input_tokens requested. */
    st_dist ttfat;
    uint64_t reasoning_tokens, prompt_reported, prompt_requested;
    uint32_t prompt_reported_n;

    uint32_t good;  /* completed and meeting the SLO terms */
    double goodput; /* good / duration_s */
    int slo_set;    /* at least one SLO term given */

    int client_limited; /* opts.max_lag_p99_s set and exceeded */

    /* The server's own timings (llama.cpp's `timings`, st_record srv_*), over the completed
     * requests that carry them (n = 0 when none did): its prompt time and generation time per
     * step, and the client's TTFT and TPOT minus them (what the server's queue, the HTTP path
     * and the client add). Whole run. */
    st_dist srv_prompt, srv_tpot, srv_ttft_gap, srv_tpot_gap;
    /* Speculative decoding as the server reported it per request (llama.cpp's draft_n,
     * draft_n_accepted), summed over the completed measured requests that carry it. */
    uint32_t srv_draft_requests;
    uint64_t srv_draft_tokens, srv_draft_accepted;

    /* Steady state: from the first measured request's scheduled time to the last measured
     * request's scheduled time (the last arrival), so the drain after the last arrival is
     * excluded. Throughputs count completions and token events inside it; latencies are
     * those of requests that completed inside it (ITL: gaps with both events inside). */
    st_window steady;
} st_summary;

/* Fills out from records[0..n). opts may be NULL (no SLO, no lag check). 0, or -1 when
 * scratch memory could not be allocated. */
int st_summary_compute(const st_record *records, uint32_t n, const st_summary_opts *opts, st_summary *out);

#endif
