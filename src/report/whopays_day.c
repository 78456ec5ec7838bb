/* "Who pays" over the spec's traffic day (report/whopays_day.h). */
#include "report/whopays_day.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plan/cost.h"
#include "report/distrust.h"

int st_rep_who_pays_day(const st_report *r, st_rep_wp_day *d)
{
    memset(d, 0, sizeof *d);
    int pick = st_report_named_pick(r); /* a headline that names no winner prices no day */
    if (!r->who_pays || !r->day_present || pick < 0)
        return 0;
    const st_rep_cfg *c = &r->cfg[pick];
    double cap = c->cap ? c->cap->capacity_rps : NAN;
    json_t *ts = json_object_get(r->who_pays, "tenants");
    size_t nt = json_array_size(ts);
    if (!c->day_ok || !(cap > 0) || nt == 0 || nt > ST_REP_WPDAY_TENANTS)
        return 0;
    int gpus = r->spec.hardware.gpus_per_replica > 0 ? r->spec.hardware.gpus_per_replica : 1;
    double usd_h = r->spec.hardware.price_per_gpu_hour * gpus;
    if (!(usd_h > 0))
        return 0;
    d->config = c->name;
    d->capacity_rps = cap;
    d->usd_per_replica_hour = usd_h;
    d->n_tenants = nt;
    double share[ST_REP_WPDAY_TENANTS];
    for (size_t i = 0; i < nt; i++) {
        json_t *t = json_array_get(ts, i), *sm = json_object_get(t, "share_model");
        const char *name = json_string_value(json_object_get(t, "tenant"));
        d->tenant[i] = name ? name : "?";
        share[i] = json_is_number(sm) ? json_number_value(sm) : 0;
    }
    for (int h = 0; h < 24; h++) {
        if (!r->spec.traffic.hour_known[h])
            continue; /* an hour the trace does not cover: not priced (zero) */
        double rps = r->spec.traffic.hourly_rps[h];
        long reps = st_cost_replicas(rps, cap);
        if (reps < r->spec.traffic.min_replicas)
            reps = r->spec.traffic.min_replicas;
        double usd = (double)reps * usd_h, busy = reps > 0 ? fmin(1.0, rps / (reps * cap)) : 0, given = 0;
        d->rps[h] = rps;
        d->replicas[h] = reps;
        d->usd[h] = usd;
        for (size_t i = 0; i < nt; i++) {
            d->tenant_usd[h][i] = usd * busy * share[i];
            given += d->tenant_usd[h][i];
        }
        d->idle_usd[h] = usd - given;
    }
    return 1;
}

json_t *st_rep_who_pays_day_json(const st_rep_wp_day *d)
{
    json_t *o = json_object(), *names = json_array(), *hours = json_array();
    if (!o || !names || !hours) {
        json_decref(o);
        json_decref(names);
        json_decref(hours);
        return NULL;
    }
    json_object_set_new(o, "config", json_string(d->config ? d->config : ""));
    json_object_set_new(o, "capacity_rps", json_real(d->capacity_rps));
    json_object_set_new(o, "usd_per_replica_hour", json_real(d->usd_per_replica_hour));
    for (size_t i = 0; i < d->n_tenants; i++)
        json_array_append_new(names, json_string(d->tenant[i]));
    json_object_set_new(o, "tenants", names);
    for (int h = 0; h < 24; h++) {
        json_t *x = json_object(), *bt = json_object();
        if (!x || !bt) {
            json_decref(x);
            json_decref(bt);
            break;
        }
        json_object_set_new(x, "hour", json_integer(h));
        json_object_set_new(x, "rps", json_real(d->rps[h]));
        json_object_set_new(x, "replicas", json_integer(d->replicas[h]));
        json_object_set_new(x, "usd", json_real(d->usd[h]));
        for (size_t i = 0; i < d->n_tenants; i++)
            json_object_set_new(bt, d->tenant[i], json_real(d->tenant_usd[h][i]));
        json_object_set_new(x, "by_tenant", bt);
        json_object_set_new(x, "idle_usd", json_real(d->idle_usd[h]));
        json_array_append_new(hours, x);
    }
    json_object_set_new(o, "hours", hours);
    return o;
}

void st_rep_who_pays_day_cells(const st_rep_wp_day *d, const char **head,
                               char (*cells)[ST_REP_WPDAY_COLS_MAX][ST_REP_WPDAY_CELL])
{
    size_t nt = d->n_tenants, k = 0;
    head[k++] = "hour";
    head[k++] = "req/s";
    head[k++] = "replicas";
    head[k++] = "$";
    for (size_t i = 0; i < nt; i++)
        head[k++] = d->tenant[i];
    head[k++] = "idle";
    for (int h = 0; h < 24; h++) {
        char(*row)[ST_REP_WPDAY_CELL] = cells[h];
        snprintf(row[0], ST_REP_WPDAY_CELL, "%02d", h);
        snprintf(row[1], ST_REP_WPDAY_CELL, "%.3g", d->rps[h]);
        snprintf(row[2], ST_REP_WPDAY_CELL, "%ld", d->replicas[h]);
        snprintf(row[3], ST_REP_WPDAY_CELL, "%.2f", d->usd[h]);
        for (size_t i = 0; i < nt; i++)
            snprintf(row[4 + i], ST_REP_WPDAY_CELL, "%.2f", d->tenant_usd[h][i]);
        snprintf(row[4 + nt], ST_REP_WPDAY_CELL, "%.2f", d->idle_usd[h]);
    }
}
