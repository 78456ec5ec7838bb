/* "Who pays" over the spec's traffic day: each hour's autoscaled fleet of the headline pick (as
 * "A traffic day" prices it: ceil(rate / capacity) replicas, at least min_replicas, at the spec's
 * price) split over the trace's tenants by their model-based shares, the rest of the fleet's
 * capacity idle. Assumes the trace's tenant mix holds all day; at most ST_REP_WPDAY_TENANTS
 * tenants. One computation for report.md, report.json ("who_pays_day") and report.html
 * (docs/cost-attribution.md). */
#ifndef ST_REPORT_WHOPAYS_DAY_H
#define ST_REPORT_WHOPAYS_DAY_H
#include <jansson.h>

#include "report/report.h"

#define ST_REP_WPDAY_TENANTS 8

typedef struct st_rep_wp_day {
    const char *config; /* the pick's name */
    double capacity_rps, usd_per_replica_hour;
    size_t n_tenants;
    const char *tenant[ST_REP_WPDAY_TENANTS]; /* names, borrowed from the report's who_pays */
    double rps[24];
    long replicas[24];
    double usd[24];                              /* the hour's fleet */
    double tenant_usd[24][ST_REP_WPDAY_TENANTS]; /* its used part, by share */
    double idle_usd[24];                         /* the rest: usd minus the tenants' */
} st_rep_wp_day;

/* Fills d when the report has a trace's tenants (at most ST_REP_WPDAY_TENANTS), a traffic day and
 * a pick with a capacity and a price: 1; else 0 (the table is left out). */
int st_rep_who_pays_day(const st_report *r, st_rep_wp_day *d);
/* {"config", "capacity_rps", "usd_per_replica_hour", "tenants": [names],
 *  "hours": [{"hour", "rps", "replicas", "usd", "by_tenant": {name: usd}, "idle_usd"}]} */
json_t *st_rep_who_pays_day_json(const st_rep_wp_day *d);
/* The HTML table: the column heads (hour, req/s, replicas, $, each tenant, idle) and 24 rows of
 * cells, formatted as report.md's. cols = 5 + n_tenants. */
#define ST_REP_WPDAY_COLS_MAX (5 + ST_REP_WPDAY_TENANTS)
#define ST_REP_WPDAY_CELL 48
void st_rep_who_pays_day_cells(const st_rep_wp_day *d, const char **head,
                               char (*cells)[ST_REP_WPDAY_COLS_MAX][ST_REP_WPDAY_CELL]);

#endif
