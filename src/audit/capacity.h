/* Capacity at an SLO, and the decisions of the rate search. Pure functions of measured
 * figures; no I/O, no clock.
 *
 * Definitions (shared docs/audit-report.md):
 *  - a rate PASSES when every planned request completed and p95 TTFT <= SLO and p95 TPOT <= SLO
 *    (and every other SLO term of the spec holds);
 *  - capacity = delivered req/s (completed / first send .. last completion) at the highest
 *    passing rate, with the bracket [highest passing rate, lowest failing rate above it].
 *
 * The search: the spec's rates in increasing order ("grid"), a rate stops early once its verdict
 * cannot change, higher rates are skipped after a failure by a wide margin (never after the first
 * rate measured, so a warm-up effect stays visible), then with `search: refine` the bracket is
 * extended upward (when the highest rate passed) or bisected until it is within the tolerance
 * or the request budget is spent. st_capacity_next is the whole policy: given the results so
 * far, which rate to run next, which to record as skipped, or stop. */
#ifndef ST_AUDIT_CAPACITY_H
#define ST_AUDIT_CAPACITY_H
#include <stddef.h>
#include <stdint.h>

#include "audit/spec.h"
#include "load/steady.h"

typedef enum st_verdict {
    ST_VERDICT_PASS = 0,
    ST_VERDICT_FAIL,      /* measured, SLO not met (or a request did not complete) */
    ST_VERDICT_SKIPPED,   /* not run: a lower rate failed by a wide margin */
    ST_VERDICT_ERROR,     /* the run itself broke (engine died, client error): no evidence */
    ST_VERDICT_OVERSAT,   /* sustained run: the queue grew (the engine did not keep up with the rate) */
    ST_VERDICT_UNDECIDED, /* sustained run: it reached a bound before its window was measured */
} st_verdict;
/* "pass", "fail", "skipped", "error", "oversaturated", "undecided" (the stored names) */
const char *st_verdict_name(st_verdict v);
/* The words a report uses: sustained runs "sustained", "SLO missed", "over-saturated",
 * "undecided"; burst runs "pass (burst)", "fail (burst)"; "skipped", "error". */
const char *st_verdict_words(st_verdict v, int sustained);
/* The inverse of st_verdict_name (stored verdicts); anything unknown is ST_VERDICT_ERROR. */
st_verdict st_verdict_from_name(const char *name);

/* What a rate run measured, as the verdict needs it. */
typedef struct st_rate_figures {
    uint32_t planned;   /* requests the run was meant to send (without warm-up) */
    uint32_t completed; /* status ok */
    uint32_t failed;    /* sent or due, not ok (includes aborted by an early stop) */
    uint32_t errors;    /* ended with an error (not aborted by an early stop): timeouts, HTTP errors... */
    double value_ms[ST_SLO_MAX_TERMS]; /* the SLO terms' percentiles, in the spec's order; NAN: no data.
                                          After an early stop: lower bounds over the requests due by then */
    int stopped_early;
    uint32_t due; /* early stop: requests whose scheduled time had come when it stopped */
} st_rate_figures;

typedef struct st_verdict_info {
    st_verdict verdict;
    int term;           /* the SLO term that failed by the most (-1: none / request failures) */
    double worst_ratio; /* max over terms of measured / limit; INFINITY when requests failed */
    char why[192];      /* e.g. "p95 TTFT 2350 ms > 1500 ms (x1.57)" or "3 of 200 requests failed" */
} st_verdict_info;

/* The verdict of one rate. An early-stopped run fails (that is why it stopped). */
void st_capacity_verdict(const st_audit_slo *slo, const st_rate_figures *f, st_verdict_info *out);

/* The least number of values above a limit, among n, that makes the pct-th percentile
 * (linear interpolation between closest ranks) exceed the limit whatever the other values are:
 * n - floor((n - 1) * pct / 100). */
uint32_t st_capacity_breach_threshold(uint32_t n, double pct);

/* Early stop: 1 when the verdict can no longer be a pass. breaches[i] counts requests already
 * known to exceed term i (a request still waiting for its first token after the TTFT limit
 * counts); failed counts requests that already failed. planned is the run's size. */
int st_capacity_sure_fail(const st_audit_slo *slo, uint32_t planned, const uint32_t *breaches, uint32_t failed);

/* One rate's outcome as the search and the capacity need it. */
typedef struct st_rate_result {
    double rate; /* offered req/s; INFINITY for inf (a sustained closed-loop run: the concurrency) */
    st_verdict verdict;
    double worst_ratio;     /* from the verdict */
    double delivered_rps;   /* burst: completed / (first send .. last completion); sustained: in the window */
    double output_tps;      /* output tokens / the same duration */
    double out_tokens_mean; /* sustained: output tokens per completed request of the window (0 or NAN: none) */
    double sustained_rps;   /* steady-state window figure, NAN if none */
    uint32_t requests;      /* requests sent (refine's budget counts these) */
    int grid;               /* 1: one of the spec's rates; 0: added by refine or the search */
    /* sustained runs (audit/sustain.h) */
    int sustained;            /* a time-based run with a steady-state verdict */
    int replicate;            /* 0 for the first run at a rate, 1, 2... for its replicates */
    int confident;            /* the call is made with the spec's confidence */
    int stopped_early;        /* over-saturated or SLO missed before the window ended: not a point to fit */
    double engine_s;          /* the run's length in the engine's time */
    double run_delivered_rps; /* completions / run length (over-saturated: what the engine delivers) */
    int n_terms;
    double value_ms[ST_SLO_MAX_TERMS]; /* each SLO term over the window, and its interval */
    double lo_ms[ST_SLO_MAX_TERMS], hi_ms[ST_SLO_MAX_TERMS];
    st_exceed ex[ST_SLO_MAX_TERMS]; /* the fraction of the window's values above each limit */
} st_rate_result;

typedef struct st_search_params {
    const double *rates; /* the spec's rates, increasing */
    int n_rates;
    st_search_mode mode;
    double tolerance;
    uint32_t request_budget; /* refine only; 0: no limit (refine runs are capped at ST_REFINE_MAX_RUNS) */
    uint32_t requests_per_rate;
    double skip_margin; /* 0: never skip */
    int integer;        /* concurrency levels: refine bisects on whole levels ("concurrency", not req/s) */
} st_search_params;

#define ST_REFINE_MAX_RUNS 12

typedef enum st_next_action { ST_NEXT_RUN = 0, ST_NEXT_SKIP, ST_NEXT_STOP } st_next_action;
typedef struct st_next {
    st_next_action action;
    double rate;   /* RUN / SKIP: the rate */
    int grid;      /* the rate is one of the spec's */
    int replicate; /* sustained search: 0 for a new rate, k for its k-th replicate */
    char why[256]; /* SKIP / STOP and refine runs: a sentence for the report */
} st_next;

/* A rate as the search's messages write it: "inf", else 4 significant digits. */
void st_capacity_fmt_rate(char *b, size_t n, double r);
/* The next step given the results so far (in the order they were obtained). */
void st_capacity_next(const st_search_params *p, const st_rate_result *r, int n, st_next *out);

typedef struct st_capacity {
    int has_pass;
    double pass_rate;       /* highest passing offered rate */
    int pass_index;         /* its index in the results: the last run at that rate that passed on its own
                           * (replicates pool their verdict; the figures shown at capacity are a
                           * passing run's), else the first run at that rate */
    double capacity_rps;    /* req/s at capacity: sustained, the pass rate (a closed loop: its delivered
                           * rate); a burst test, the delivered req/s at pass_rate */
    double output_tps;      /* output tok/s at capacity: sustained, capacity_rps x the window's output
                           * tokens per completed request; a burst test, the pass run's own */
    double sustained_rps;   /* the pass rate's window: delivered req/s (mean of its replicates) */
    double out_tokens_mean; /* output tokens per completed request of the pass rate's windows (NAN: not
                             * measured) */
    int has_fail_above;
    double fail_rate;          /* lowest failing (or errored) rate above pass_rate */
    int fail_undecided;        /* the runs at fail_rate were undecided (no pass, and no failure either) */
    int highest_tested_passed; /* no failing rate above: capacity may be higher than measured */
    int non_monotonic;         /* some rate below pass_rate failed */
    int warmup_effect;         /* the first measured rate failed and a higher one passed */
    int n_measured;
    /* the sustained search (st_capacity_sustained) */
    int sustained;
    int fail_index;            /* a run at fail_rate (-1: none) */
    int pass_sure, fail_sure;  /* the calls at the bracket's ends are confident */
    double ci_lo, ci_hi;       /* the capacity's interval (offered req/s, or concurrency) */
    double estimate;           /* where the binding term's margin crosses zero (NAN: at a cliff) */
    int binding;               /* the SLO term that binds (-1: over-saturation or none) */
    int binding_oversat;       /* binding < 0: the lowest failure above the pass is over-saturation */
    int cliff;                 /* the boundary is a cliff (bisection), not smooth (interpolation) */
    int within_tolerance;      /* (fail - pass) / pass <= tolerance */
    double max_throughput_rps; /* the most an over-saturated run delivered (NAN: none was) */
    double engine_s;           /* engine seconds of every run */
    uint64_t requests;         /* requests sent by every run */
    int runs;                  /* runs, replicates included (skipped ones not) */
} st_capacity;

/* How a report words the bracket's upper end: "undecided" when its runs were (c->fail_undecided: it
 * is no pass, but no failure either, as the search's log says), else "failed". */
const char *st_capacity_fail_word(const st_capacity *c);

/* Capacity from the results; grid_only = 1 uses only the spec's rates (the standard answer). */
void st_capacity_compute(const st_rate_result *r, int n, int grid_only, st_capacity *out);

/* ---- The sustained search (docs/audit-method.md, "The search") ----
 * Runs at one rate are pooled: an over-saturated run makes the rate over-saturated; otherwise the
 * window's fractions of values above each limit are pooled (st_exceed_pool) and the rate passes
 * when every term's pooled fraction is within what its percentile allows (one run: its own
 * verdict). The call is confident when the pooled fraction's one-sided bound at the confidence
 * agrees. Undecided runs are no pass. The bracket: pass = the highest passing rate below the
 * lowest confident failure; fail = the lowest rate above it that did not pass.
 * Next rate:
 *   - no run yet: the forecast x (1 - 0.4 tolerance) when there is one, else the middle rate of
 *     the finite grid;
 *   - only passes: the middle of the grid rates above, else x2; from a forecast, x (1 + 0.8
 *     tolerance) for the first three rates, then x1.5; up to ST_SEARCH_MAX_RATE;
 *   - only failures: likewise down (/2; from a forecast / (1 + 0.8 tolerance), then /1.5), never
 *     above what an over-saturated run delivered, down to min_rate; an undecided rate below the
 *     lowest failure (its window did not fit within max_duration; lower rates need longer ones)
 *     is a floor: the rates between it and the failure are bisected, down to the tolerance;
 *   - a bracket wider than the tolerance: for each term, the pooled margins ln(limit / value) of
 *     the runs that were not stopped early are fitted non-increasing in rate (isotonic), and the
 *     bracket's ends interpolated linearly in log rate; the term whose zero comes first binds.
 *     Smooth (the fail end has margins and the binding margin falls by less than
 *     ST_SEARCH_CLIFF_SLOPE per unit of log rate): the next rate aims at the zero x (1 -/+ 0.35
 *     tolerance), kept inside the middle 70 % of the bracket (log scale); a cliff (the fail end
 *     over-saturated, undecided or stopped early, or a steeper fall): bisection (geometric mean);
 *   - a bracket within the tolerance: a replicate at an end whose call is not confident (the pass
 *     end first), up to max_replicates runs at a rate; then stop.
 * Stops also at max_runs, or when the budget left is under a run's minimum. */
#define ST_SEARCH_MAX_RATE 1e5
#define ST_SEARCH_MIN_RATE 1e-3
#define ST_SEARCH_CLIFF_SLOPE 5.0
/* The interpolation's own error in the capacity's interval: this fraction of the bracket's width
 * (log scale) each side of the interpolated zero. */
#define ST_SEARCH_LINE_ERROR 0.25

typedef struct st_sustained_params {
    const double *grid; /* the spec's rates (or concurrencies), increasing; inf is ignored */
    int n_grid;
    double forecast;           /* the capacity a prediction expects (0: none, start from the grid) */
    double tolerance;          /* stop when (fail - pass) / pass <= tolerance */
    double confidence;         /* of every call and interval */
    int max_runs;              /* per configuration */
    int max_replicates;        /* runs at one rate */
    uint64_t request_budget;   /* per configuration, every run (0: none) */
    uint64_t min_run_requests; /* a run needs at least this many */
    int integer;               /* concurrency levels: integers >= 1, no over-saturation */
    int sessions;              /* multi-turn sessions: rates are session starts per second */
    int tasks;                 /* an agent trace: rates are task starts per second */
    double min_rate;           /* no rate below this (its window cannot fill within max_duration) */
    const st_audit_slo *slo;
} st_sustained_params;

/* The search's parameters from a spec (forecast: 0 when none). */
void st_sustained_params_of(const st_spec *s, double forecast, st_sustained_params *p);

void st_sustained_next(const st_sustained_params *p, const st_rate_result *r, int n, st_next *out);

/* The capacity from sustained runs: bracket, interval, binding term, smooth or cliff, and the
 * delivered figures at the pass rate (the mean of its replicates). capacity_rps is the pass rate
 * (the engine keeps up with it), or with `integer` the delivered req/s at that concurrency. */
void st_capacity_sustained(const st_sustained_params *p, const st_rate_result *r, int n, st_capacity *out);

#endif
