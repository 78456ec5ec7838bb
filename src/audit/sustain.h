/* A sustained run: how long one offered rate (or one concurrency) is run, and what it showed.
 * Pure: no I/O, no clock; the sweep calls it from the executor's tick with the records so far,
 * and once more on the finished run's records (docs/audit-method.md, "A sustained run").
 *
 * Phases, all in the engine's time from the run's first arrival:
 *   ramp      until ST_SUSTAIN_RAMP_N requests completed; their median E2E is the ramp-up time
 *             (the system fills up during it; growth tests start after it);
 *   warm      until k x the median E2E of the latest completions (k = warmup_e2e), at least the
 *             ramp-up time, and until the requests in flight stop climbing (their mean over the
 *             last median E2E within ST_SUSTAIN_LEVEL of the one before);
 *   window    the measurement window, from the end of the warm phase until it has lasted
 *             max(min_window, 2 x median E2E) and received min_window_requests arrivals;
 *   cool-down arrivals go on (the load stays as it was) until every request that arrived in
 *             the window has ended; then the run stops, later arrivals are aborted and never
 *             counted.
 * Over-saturation, tested at every evaluation from the end of the ramp-up on the series in
 * arrival order: the trend of requests in flight (client side), of TTFT (requests that arrived
 * at least one TTFT limit ago; one still waiting counts with its wait so far) and of the
 * engine's waiting queue (its /metrics, when scraped), each by st_trend_fit with batches about
 * one median E2E long (5 to 10). A series grows when its slope is significant (one-sided
 * p < 1 - confidence) and at least ST_SUSTAIN_GROWTH_MARGIN of the offered rate (requests/s;
 * TTFT: seconds per second). Growth found at ST_SUSTAIN_PERSIST evaluations in a row stops the
 * run as over-saturated (early, it costs money), as does growth at the final evaluation.
 * Requests in flight that grow while the engine's waiting queue is scraped and flat and TTFT is
 * flat are the batch still filling (its step time grows with it, so the fixed point of an engine
 * that admits everything is reached slowly), not an overload, which fills the waiting queue: such
 * growth is no hit, and a window that shows it starts again at its end (at most
 * ST_SUSTAIN_MAX_RESTARTS times, within max_duration).
 * An SLO term whose fraction of breaches among the window's arrivals is above what its
 * percentile allows with confidence (lower bound) stops the run as SLO missed, as do failed
 * requests: one that arrived in the window (a failed request fails the run), or, before the
 * window, at least ST_SUSTAIN_RAMP_N failures that outnumber the completions (an engine that
 * answers errors never fills, and would otherwise run to max_duration).
 * A run that reaches max_duration, or its last scheduled arrival, before its window is measured
 * is undecided (never a pass). Closed loop (a concurrency): no growth tests (the client bounds
 * what is in flight); arrivals are send times; the window lasts at least min_window_requests x the
 * median E2E / the concurrency (the time those sends take), and its delivered rate is measured by
 * Little's law (st_sustain_closed_rate), never by counting sends. */
#ifndef ST_AUDIT_SUSTAIN_H
#define ST_AUDIT_SUSTAIN_H
#include <stddef.h>
#include <stdint.h>

#include "audit/capacity.h"
#include "audit/spec.h"
#include "audit/store.h"
#include "engine/metrics.h"
#include "load/record.h"
#include "load/steady.h"

/* Completed requests whose median E2E gives the ramp-up time. */
#define ST_SUSTAIN_RAMP_N 10
/* A growth smaller than this fraction of the offered rate (req/s; TTFT: s/s) is not counted. */
#define ST_SUSTAIN_GROWTH_MARGIN 0.05
/* A call made while the run goes on (an early stop) is held to an error rate this many times
 * smaller than the spec's 1 - confidence: the run is looked at many times. */
#define ST_SUSTAIN_INTERIM 10
/* Evaluations in a row that must find growth before an early stop (over half a median E2E). */
#define ST_SUSTAIN_PERSIST 2
#define ST_SUSTAIN_MAX_RESTARTS 6
/* Points a trend needs (and in-flight points sampled per evaluation at most). */
#define ST_SUSTAIN_MIN_POINTS 20
#define ST_SUSTAIN_GRID 240
/* Batches of a trend or an interval: about one median E2E each, within these (few long
 * batches: their means are closer to independent). */
#define ST_SUSTAIN_MIN_BATCHES 5
#define ST_SUSTAIN_MAX_BATCHES 8
/* The warm phase ends once the mean number in flight over the last median E2E is within this
 * fraction of the mean over the median E2E before it. */
#define ST_SUSTAIN_LEVEL 0.05
/* The window lasts at least this many median E2Es. */
#define ST_SUSTAIN_WINDOW_E2E 1
/* The completions whose median E2E is the current one (a run's early completions are the fast
 * ones of an emptier engine). */
#define ST_SUSTAIN_RECENT 20
/* A growth test needs data over at least this many current median E2Es, starting warmup_e2e
 * current median E2Es after the first arrival (the filling of the engine is no growth). */
#define ST_SUSTAIN_TREND_E2E 2

typedef enum st_sus_phase { ST_SUS_RAMP = 0, ST_SUS_WARM, ST_SUS_WINDOW, ST_SUS_COOL, ST_SUS_DONE } st_sus_phase;
const char *st_sus_phase_name(st_sus_phase p); /* "ramp", "warm", "window", "cool-down", "done" */

typedef struct st_sustain_params {
    const st_audit_slo *slo;
    double offered_rps;   /* open loop: the offered rate (req/s); closed loop: 0 */
    uint32_t concurrency; /* closed loop: concurrent requests; 0: open loop */
    double max_duration_s;
    double min_window_s;
    uint32_t min_window_requests;
    double warmup_e2e;      /* k */
    double confidence;      /* e.g. 0.95 */
    uint32_t planned;       /* requests scheduled */
    double last_arrival_s;  /* open loop: the last scheduled arrival (engine s) */
    int early_stop;         /* stop at once when over-saturated or the SLO is missed with confidence */
    uint32_t max_in_flight; /* the most requests the client keeps in flight (open connections); more:
                               over-saturated. 0: no limit */
    /* Multi-turn sessions: a session's mean turns and mean total think time (s). The warm phase
     * lasts at least a session's span (its think time plus an E2E per later turn), so that the
     * window sees every turn in its steady mix, not only the first turns of sessions just begun.
     * 0: no sessions. */
    double session_turns, session_think_s;
} st_sustain_params;

/* The controller's state, carried from one evaluation to the next. */
typedef struct st_sustain {
    st_sustain_params p;
    st_sus_phase phase;
    double ramp_s;       /* NAN until known */
    double warm_end_s;   /* start of the window (NAN until fixed) */
    double window_end_s; /* NAN until fixed */
    double stop_s;       /* when it decided to stop (NAN: not yet) */
    int hits;            /* evaluations in a row that found growth */
    double first_hit_s;  /* the first of them */
    double last_test_s;  /* the last evaluation that ran the tests */
    double e2e_recent;   /* the median E2E of the latest completions at that evaluation */
    int oversaturated;   /* decided online */
    int slo_missed;      /* decided online (confident) */
    int failing;         /* requests fail: one in the window, or most of those that ended before it */
    int undecided;       /* stopped at a bound */
    int cut_short;       /* the run's schedule ended in the window phase: its window is shorter than
                          * needed, good for a confident failure only */
    int restarts;        /* windows started again: the batch was still filling */
    char why[320];       /* the reason of an online stop */
} st_sustain;

void st_sustain_init(st_sustain *s, const st_sustain_params *p);

/* One evaluation at time now (ns on the records' clock), with the records so far (times on the
 * same clock, time_scale engine seconds per record second) and the run's metric samples so far
 * (engine seconds since the run's start; may be NULL). 1 when the run should stop now. */
int st_sustain_step(st_sustain *s, const st_record *recs, uint32_t n, st_ns now, double time_scale,
                    const st_metrics_sample *samples, uint32_t n_samples);

typedef struct st_sustain_term {
    double value_ms, lo_ms, hi_ms; /* the window's percentile and its interval */
    st_exceed ex;                  /* the fraction of values above the limit */
    double margin;                 /* ln(limit / value); +inf when value is 0 */
    int holds;                     /* value <= limit */
    int sure;                      /* holds, or fails, with confidence */
} st_sustain_term;

typedef struct st_sustain_result {
    st_verdict verdict; /* PASS, FAIL (SLO missed), OVERSAT, UNDECIDED */
    int confident;
    char why[400];
    double ramp_s, window_start_s, window_end_s, stop_s, engine_s; /* engine seconds */
    uint32_t window_requests, window_completed, window_errors;
    double offered_rps;   /* arrivals in the window / its length */
    double delivered_rps; /* offered - the in-flight growth over the window */
    double delivered_lo, delivered_hi;
    double run_delivered_rps; /* completions per second over the second half of the run (the first
                                 holds the ramp-up): what an overload delivers */
    double output_tps;        /* output tokens of events inside the window / its length */
    double out_tokens_mean;   /* output tokens of the window's completed requests, per request */
    double e2e_med_s;
    double inflight_mean, inflight_max;
    st_trend inflight, ttft, waiting; /* from the ramp-up to the stop */
    int grows_inflight, grows_ttft, grows_waiting;
    int n_terms;
    st_sustain_term term[ST_SLO_MAX_TERMS];
    int binding;        /* the term with the smallest margin (-1: none) */
    double worst_ratio; /* max value / limit; INFINITY with failed requests or over-saturation */
} st_sustain_result;

/* The verdict of a finished run from its records (engine time, as stored) and samples, given
 * the controller's state at the stop. 0, or -1 when out of memory. */
int st_sustain_finish(const st_sustain *s, const st_record *recs, uint32_t n, const st_metrics_sample *samples,
                      uint32_t n_samples, st_sustain_result *out);

/* A closed loop's delivered rate over the window [w0, w1] (seconds on the records' clock, from
 * their sends) by Little's law: in_flight = the mean number of requests in flight over the window
 * (each request's time inside it, exactly), e2e_mean_s = the mean E2E of the requests sent in it
 * that completed, rate = in_flight / e2e_mean_s, and its interval (lo, hi) from the batch means of
 * those E2Es in send order (batches, at the confidence; lo = hi = rate with fewer than two
 * requests a batch). A closed loop's sends come in waves, so counting them over a window a few
 * E2Es long is off by up to a wave (C / window length); this is not. 0, or -1 when no request sent
 * in the window completed (or out of memory). */
typedef struct st_closed_rate {
    double in_flight, e2e_mean_s, rate, lo, hi;
    uint32_t n; /* requests whose E2E was used */
} st_closed_rate;
int st_sustain_closed_rate(const st_record *recs, uint32_t n, double w0, double w1, double confidence, uint32_t batches,
                           st_closed_rate *out);

/* How long a closed loop of `concurrency` clients takes to send min_window_requests at a median
 * E2E of e2e_s (Little's law: about concurrency / e2e_s a second): the least window it needs
 * (0 for an open loop). */
double st_sustain_closed_window_s(uint32_t concurrency, uint32_t min_window_requests, double e2e_s);

/* The stored form (the run's summary_json) and back. Fills the search's view of a run too. */
char *st_sustain_to_json(const st_sustain *s, const st_sustain_result *r);
/* Parses what st_sustain_to_json wrote into r (and the window into s when not NULL). -1 when the
 * text is not such a summary. */
int st_sustain_from_json(const char *text, st_sustain_result *r);

/* The search's view of a sustained run (audit/capacity.h). */
void st_sustain_rate_result(const st_sustain_result *r, double rate, st_rate_result *out);
/* The search's view of a stored run: a sustained one from its summary_json, a burst one from its
 * row (verdict, worst ratio, throughputs); requests = sent, grid as stored. */
void st_sustain_row_result(const st_run_row *w, st_rate_result *out);

#endif
