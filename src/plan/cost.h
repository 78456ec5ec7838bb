/* The cost model of an audit, exactly the formulas of docs/audit-report.md (shared reference):
 *   $ per 1M output tokens = price per GPU-hour x GPUs per replica / (output tok/s x 3600) x 1e6
 *   replicas at peak        = ceil(peak req/s / capacity req/s)
 *   monthly cost            = replicas x GPUs per replica x price per GPU-hour x 730
 *   vs current              = (value - baseline) / baseline
 * Capacity and output tok/s come from the highest passing rate (capacity.h). Pure functions. */
#ifndef ST_PLAN_COST_H
#define ST_PLAN_COST_H

#define ST_COST_HOURS_PER_MONTH 730.0
/* The most replicas a peak is priced at: a larger need (a peak absurdly beyond the capacity) is
 * reported as this many, never as an overflowed count. */
#define ST_COST_MAX_REPLICAS 1e12

typedef struct st_cost_in {
    double capacity_rps;       /* delivered req/s at the highest passing rate; <= 0 or NAN: none passed */
    double output_tps;         /* output tok/s delivered at that rate */
    double price_per_gpu_hour; /* US$ */
    int gpus_per_replica;
    double peak_rps; /* the stated peak */
} st_cost_in;

typedef struct st_cost {
    int valid;               /* 0 when nothing passed (the figures below are NAN / 0) */
    double usd_per_1m;       /* $ per 1M output tokens */
    long replicas;           /* replicas at the stated peak */
    double monthly_usd;      /* replicas x GPUs x price x 730 */
    double replica_hour_usd; /* price x GPUs per replica */
} st_cost;

/* Replicas that carry rps at capacity each: ceil(rps / capacity), where a ratio that is an
 * integer up to rounding (40 / 8.000000000001) adds no replica; 0 when rps <= 0. */
long st_cost_replicas(double rps, double capacity);

/* 0, or -1 (out->valid = 0) when capacity or output tok/s is not positive. */
int st_cost_compute(const st_cost_in *in, st_cost *out);

/* (value - base) / base; NAN when either is not finite or base is 0. */
double st_cost_rel_change(double value, double base);

/* One configuration's outcome for the headline pick. */
typedef struct st_cost_pick_in {
    int passed; /* passed at some rate (has a capacity) */
    double usd_per_1m;
    double capacity_rps;
} st_cost_pick_in;

/* The headline pick: the cheapest $ per 1M output tokens among configurations that passed;
 * ties go to the higher capacity, then to the earlier configuration. -1 when none passed. */
int st_cost_pick(const st_cost_pick_in *c, int n);

#endif
