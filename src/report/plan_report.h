/* What `servetune plan` writes: plan.md (the answer first, then the candidates, the frontiers,
 * the traffic day and the method) and plan.json (every candidate). Pure functions of the plan's
 * results. docs/plan.md describes both. */
#ifndef ST_REPORT_PLAN_REPORT_H
#define ST_REPORT_PLAN_REPORT_H
#include <stddef.h>

#include "plan/day.h"
#include "plan/plan.h"
#include "plan/prices.h"
#include "audit/spec.h"
#include "core/buf.h"

/* Rows shown in plan.md's candidate table. */
#define ST_PLAN_REPORT_ROWS 15

typedef struct st_plan_result {
    const st_spec *spec;
    const char *spec_path;
    const st_prices *prices;
    const char *provider;
    st_plan_candidate *c; /* the candidates, searched */
    int n;
    int best;                   /* index of the cheapest, -1 when none met the SLO */
    st_plan_candidate baseline; /* the spec's own setup, evaluated the same way */
    int baseline_ok;            /* it met the SLO */
    st_plan_stats stats;
    double seconds;          /* the search's wall time */
    long len_auto;           /* max_model_len from the workload */
    double len_reject_share; /* requests longer than it (0..1) */
    const char *written[16]; /* the audit specs written (paths), NULL-terminated */
    /* the traffic day (when spec->traffic.set), for the best and the baseline */
    int day_ok, day_base_ok;
    st_day_cost day, day_base;
    double serverless_price_per_gpu_s;      /* the price used (0: none found) */
    const char *serverless_from;            /* where it came from */
    double base_serverless_price_per_gpu_s; /* the current setup's (its GPU may be another) */
    const char *base_serverless_from;
    /* speculative decoding (docs/plan.md "Speculative decoding"): the variants tried, and what was
     * not considered and why (empty when every method was); the picks' st_plan_spec_pay */
    int spec_variants;
    int spec_picks; /* the top candidates assessed (their pay and twin filled) */
    char spec_why[800];
    /* --disagg (filled by the CLI; set 0: not asked, or no xPyD serves): the pick as its best
     * xPyD, both figures of disagg.md/disagg.json. queueing_rps: NAN when not estimated. */
    struct {
        int set;
        int x, y;
        long gpus;
        double static_rps;     /* AIConfigurator's rate matching, no queueing */
        double queueing_rps;   /* the highest rate within the SLO with both pools run (0: none) */
        double aggregated_rps; /* the pick aggregated on as many GPUs */
    } disagg;
} st_plan_result;

int st_plan_report_markdown(const st_plan_result *r, st_buf *out);
int st_plan_report_json(const st_plan_result *r, st_buf *out);

#endif
