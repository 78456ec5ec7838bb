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

typedef enum st_verdict {
    ST_VERDICT_PASS = 0,
    ST_VERDICT_FAIL,    /* measured, SLO not met (or a request did not complete) */
    ST_VERDICT_SKIPPED, /* not run: a lower rate failed by a wide margin */
    ST_VERDICT_ERROR,   /* the run itself broke (engine died, client error): no evidence */
} st_verdict;
const char *st_verdict_name(st_verdict v); /* "pass", "fail", "skipped", "error" */
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
    double rate; /* offered req/s; INFINITY for inf */
    st_verdict verdict;
    double worst_ratio;   /* from the verdict */
    double delivered_rps; /* completed / (first send .. last completion) */
    double output_tps;    /* output tokens / the same duration */
    double sustained_rps; /* steady-state window figure, NAN if none */
    uint32_t requests;    /* requests sent (refine's budget counts these) */
    int grid;             /* 1: one of the spec's rates; 0: added by refine */
} st_rate_result;

typedef struct st_search_params {
    const double *rates; /* the spec's rates, increasing */
    int n_rates;
    st_search_mode mode;
    double tolerance;
    uint32_t request_budget; /* refine only; 0: no limit (refine runs are capped at ST_REFINE_MAX_RUNS) */
    uint32_t requests_per_rate;
    double skip_margin; /* 0: never skip */
} st_search_params;

#define ST_REFINE_MAX_RUNS 12

typedef enum st_next_action { ST_NEXT_RUN = 0, ST_NEXT_SKIP, ST_NEXT_STOP } st_next_action;
typedef struct st_next {
    st_next_action action;
    double rate;   /* RUN / SKIP: the rate */
    int grid;      /* the rate is one of the spec's */
    char why[192]; /* SKIP / STOP and refine runs: a sentence for the report */
} st_next;

/* The next step given the results so far (in the order they were obtained). */
void st_capacity_next(const st_search_params *p, const st_rate_result *r, int n, st_next *out);

typedef struct st_capacity {
    int has_pass;
    double pass_rate;    /* highest passing offered rate */
    int pass_index;      /* its index in the results */
    double capacity_rps; /* delivered req/s at pass_rate */
    double output_tps;
    double sustained_rps;
    int has_fail_above;
    double fail_rate;          /* lowest failing (or errored) rate above pass_rate */
    int highest_tested_passed; /* no failing rate above: capacity may be higher than measured */
    int non_monotonic;         /* some rate below pass_rate failed */
    int warmup_effect;         /* the first measured rate failed and a higher one passed */
    int n_measured;
} st_capacity;

/* Capacity from the results; grid_only = 1 uses only the spec's rates (the standard answer). */
void st_capacity_compute(const st_rate_result *r, int n, int grid_only, st_capacity *out);

#endif
