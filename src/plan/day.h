/* A traffic day priced three ways: dedicated replicas sized for the peak, dedicated replicas
 * autoscaled slot by slot, and serverless workers billed per second that scale to zero. Pure
 * functions of the numbers given (no I/O, no clock); docs/plan.md derives every formula.
 *
 * The day is n equal slots (24 hours by default) with a mean request rate in each. One replica
 * (or serverless worker: the same engine on the same GPUs) sustains capacity_rps within the SLO.
 *
 * Dedicated, peak-sized:  R_peak = ceil(max rate / capacity); billed every slot.
 * Dedicated, autoscaled:  R_i = max(min_replicas, ceil(rate_i / capacity)); a replica added at
 *   slot i is started scale_up_delay_s before the slot (it must be ready when the traffic
 *   comes) and billed from its start; replicas are stopped at the end of a slot that no longer
 *   needs them.
 * Serverless: per slot, w = rate / capacity. floor(w) workers are busy the whole slot; the
 *   overflow rate x = rate - floor(w) x capacity reaches one more worker, which is up while a
 *   request arrived within the last (idle_timeout + service) seconds: a fraction
 *   1 - exp(-x (idle_timeout + service)) of the slot for Poisson arrivals. A request that finds
 *   that worker down pays a cold start (rate x exp(-x idle_timeout) per second), billed too.
 *   Cold requests as a share of all requests are the ones whose TTFT grows by cold_start_s.
 * Break-even utilization: serverless costs less than a dedicated replica when the replica
 *   would be busy less than price_dedicated_hour / price_serverless_hour of the time. */
#ifndef ST_PLAN_DAY_H
#define ST_PLAN_DAY_H
#include <stddef.h>

#define ST_DAY_MAX_SLOTS 1440 /* a day in minutes at the finest */

typedef struct st_day_opts {
    double capacity_rps;       /* one replica's sustained capacity within the SLO, req/s */
    int gpus_per_replica;      /* >= 1 */
    double price_per_gpu_hour; /* dedicated, US$ */
    double scale_up_delay_s;   /* autoscaled: a new replica starts this long before its slot */
    int min_replicas;          /* autoscaled floor, >= 0 */
    /* serverless (price <= 0: not priced) */
    double serverless_price_per_gpu_s; /* US$ per GPU-second while a worker is up */
    double idle_timeout_s;             /* a worker stays up this long after its last request */
    double cold_start_s;               /* time to bring a worker up from zero (billed) */
    double service_s;                  /* a request's mean end-to-end time (keeps a worker up) */
} st_day_opts;

typedef struct st_day_slot {
    double rps;                /* the slot's mean request rate */
    long replicas;             /* autoscaled replicas in the slot */
    double serverless_workers; /* mean serverless workers up (billed), cold starts included */
    double cold_share;         /* share of the slot's requests that met a cold worker */
} st_day_slot;

typedef struct st_day_cost {
    int n;           /* slots */
    double slot_s;   /* seconds per slot */
    double requests; /* requests in the day */
    long peak_replicas;
    double peak_usd;       /* dedicated, sized for the peak, for the whole day */
    double autoscaled_usd; /* dedicated, autoscaled */
    double autoscaled_replica_hours;
    double serverless_usd; /* NAN when serverless is not priced */
    double serverless_gpu_hours;
    double cold_share;             /* share of the day's requests that met a cold worker */
    double utilization;            /* requests / (peak replicas x capacity x day): how busy a peak-sized fleet is */
    double break_even_utilization; /* below it serverless is cheaper (NAN when not priced) */
    const char *cheapest;          /* "peak-sized", "autoscaled" or "serverless" */
} st_day_cost;

/* Prices the day. rps[0..n) are the slot rates (finite, >= 0), slot_s the slot length. slots
 * (n entries, may be NULL) receives the per-slot figures. 0, or -1 with the reason in err (a
 * negative or missing rate names its slot). */
int st_day_price(const double *rps, int n, double slot_s, const st_day_opts *o, st_day_slot *slots, st_day_cost *out,
                 char *err, size_t errlen);

/* Fills rps[0..24) from an hour -> rate list that must name each hour 0..23 exactly once
 * (hours[i], rates[i], n entries). 0, or -1 naming the first hour missing or repeated, or a
 * negative rate. */
int st_day_from_hours(const int *hours, const double *rates, int n, double rps[24], char *err, size_t errlen);

/* ---- The spec's traffic day (spec `traffic:`), for the plan and the audit report ---- */
struct st_spec;
struct st_prices;

/* One replica setup to price over the spec's day. */
typedef struct st_day_setup {
    double capacity_rps;       /* sustained within the SLO */
    int gpus_per_replica;      /* >= 1 */
    double price_per_gpu_hour; /* dedicated */
    const char *gpu_key;       /* to look up a serverless price in the list (may be NULL) */
    double ttft_ms, tpot_ms;   /* p95 at capacity (a request's service time; NAN: unknown, 0) */
} st_day_setup;

/* Where the serverless price came from: the spec's traffic.serverless_price_per_gpu_s, else the
 * list's serverless price for gpu_key (traffic.serverless_provider's, else the lowest); 0 and
 * from NULL when neither (serverless then is not priced). */
typedef struct st_day_serverless {
    double price_per_gpu_s;
    const char *from; /* "the spec" or the provider (points into the list) */
} st_day_serverless;

/* The hours of s->traffic's day that are priced, in order, into rps: all 24 of a stated day; of
 * a day taken from a trace, the hours it covers (none until resolved). Returns their number. */
int st_day_spec_hours(const struct st_spec *s, double rps[24]);

/* Prices s->traffic's hours (st_day_spec_hours) for setup u (a request's service time: TTFT + TPOT x (output
 * tokens - 1), from the spec's workload). prices may be NULL (no list: only the spec's own
 * serverless price). 0, or -1 with the reason in err (no traffic day, no capacity). */
int st_day_of_spec(const struct st_spec *s, const struct st_prices *prices, const st_day_setup *u, st_day_cost *out,
                   st_day_serverless *sl, char *err, size_t errlen);

#endif
