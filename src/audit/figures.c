#include "audit/figures.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "load/agent_run.h"
#include "load/stats.h"

static double pick(const st_dist *d, double pct)
{
    if (d->n == 0)
        return NAN;
    if (pct == 50)
        return d->p50;
    if (pct == 90)
        return d->p90;
    if (pct == 95)
        return d->p95;
    if (pct == 99)
        return d->p99;
    return NAN;
}

int st_audit_figures(const st_audit_slo *slo, const st_record *recs, uint32_t n, uint32_t planned, st_run_row *row,
                     st_rate_figures *f)
{
    st_summary s;
    if (st_summary_compute(recs, n, NULL, &s))
        return -1;
    memset(f, 0, sizeof *f);
    f->planned = planned;
    f->completed = s.completed;
    f->failed = s.measured > s.completed ? s.measured - s.completed : 0;
    if (planned > s.measured)
        f->failed += planned - s.measured;
    for (uint32_t i = 0; i < n; i++)
        if (!recs[i].warmup && recs[i].status != ST_REQ_OK && recs[i].status != ST_REQ_ABORTED)
            f->errors++;
    row->planned = planned;
    row->sent = s.sent;
    row->completed = s.completed;
    row->failed = f->failed;
    row->duration_s = s.duration_s;
    row->delivered_rps = s.completed ? s.request_throughput : NAN;
    row->output_tps = s.completed ? s.output_throughput : NAN;
    /* Sustained: output tokens delivered per second inside the steady-state window (first to last
     * arrival: no drain), in requests (divided by the mean output of a completed request).
     * Counting completions in that window would count the ramp-up, when none can complete yet.
     * A window shorter than a typical request's lifetime (median E2E) never reaches a steady
     * state: no figure then. */
    row->sustained_rps =
        (s.steady.valid && s.completed && s.output_tokens && s.e2e.n && s.steady.duration_s >= s.e2e.p50)
            ? s.steady.output_throughput / ((double)s.output_tokens / s.completed)
            : NAN;
    row->offered_rps_achieved = s.achieved_rate;
    row->ttft_p50_ms = s.ttft.p50 * 1e3;
    row->ttft_p95_ms = s.ttft.p95 * 1e3;
    row->ttft_p99_ms = s.ttft.p99 * 1e3;
    row->tpot_p50_ms = s.tpot.p50 * 1e3;
    row->tpot_p95_ms = s.tpot.p95 * 1e3;
    row->tpot_p99_ms = s.tpot.p99 * 1e3;
    row->itl_p95_ms = s.itl.p95 * 1e3;
    row->e2e_p95_ms = s.e2e.p95 * 1e3;
    row->lag_p99_ms = s.lag.p99 * 1e3;
    row->n_terms = slo->n < ST_STORE_TERMS ? slo->n : ST_STORE_TERMS;
    st_dist makespan = { 0 }; /* tasks (sessions): first arrival to last end (load/agent_run.h) */
    for (int i = 0; i < slo->n && i < ST_SLO_MAX_TERMS; i++)
        if (slo->terms[i].metric == ST_SLO_MAKESPAN) {
            double *mv = malloc(sizeof(double) * (n ? n : 1));
            int m = mv ? st_agent_makespans(recs, n, 0, 1e-9, INFINITY, -INFINITY, INFINITY, 0, 0, mv) : -1;
            st_dist_compute(mv, m > 0 ? (uint32_t)m : 0, &makespan);
            free(mv);
            break;
        }
    for (int i = 0; i < slo->n && i < ST_SLO_MAX_TERMS; i++) {
        const st_dist *d = slo->terms[i].metric == ST_SLO_TTFT       ? &s.ttft
                           : slo->terms[i].metric == ST_SLO_TPOT     ? &s.tpot
                           : slo->terms[i].metric == ST_SLO_ITL      ? &s.itl
                           : slo->terms[i].metric == ST_SLO_TTFAT    ? &s.ttfat
                           : slo->terms[i].metric == ST_SLO_MAKESPAN ? &makespan
                                                                     : &s.e2e;
        f->value_ms[i] = pick(d, slo->terms[i].pct) * 1e3;
        if (i < ST_STORE_TERMS)
            row->term_ms[i] = f->value_ms[i];
    }
    /* TPOT is undefined when every request had one output token: the term holds vacuously. */
    if (slo->n > 1 && s.tpot.n == 0 && s.completed > 0)
        f->value_ms[1] = 0;
    return 0;
}

static void scale(st_ns *t, double k)
{
    if (*t >= 0)
        *t = (st_ns)llround((double)*t * k);
}

void st_audit_scale_records(st_record *recs, uint32_t n, double k)
{
    if (k == 1)
        return;
    for (uint32_t i = 0; i < n; i++) {
        st_record *r = &recs[i];
        scale(&r->scheduled, k);
        scale(&r->sent, k);
        scale(&r->first_byte, k);
        scale(&r->first_token, k);
        scale(&r->first_answer, k);
        scale(&r->end, k);
        st_record_scale_events(r, k);
    }
}

void st_audit_breaches(const st_audit_slo *slo, const st_record *recs, uint32_t n, st_ns now, double time_scale,
                       int closed, uint32_t *breaches, uint32_t *failed)
{
    memset(breaches, 0, sizeof(uint32_t) * (size_t)slo->n);
    *failed = 0;
    double k = time_scale > 0 ? time_scale : 1;
    for (uint32_t i = 0; i < n; i++) {
        const st_record *r = &recs[i];
        /* a closed loop's request is due when its client sends it (no slot yet: nothing to judge) */
        st_ns t0 = closed ? r->sent : r->scheduled;
        if (r->warmup || t0 < 0 || t0 > now)
            continue;
        int ended = r->end >= 0;
        if (ended && r->status != ST_REQ_OK) {
            (*failed)++;
            continue;
        }
        for (int t = 0; t < slo->n; t++) {
            double lim_s = slo->terms[t].max_ms / 1e3;
            double v = NAN;
            switch (slo->terms[t].metric) {
            case ST_SLO_TTFT:
                v = r->first_token >= 0 ? (double)(r->first_token - t0) : (double)(now - t0);
                if (r->first_token < 0 && ended)
                    v = NAN;
                break;
            case ST_SLO_TTFAT:
                v = r->first_answer >= 0 ? (double)(r->first_answer - t0) : (double)(now - t0);
                if (r->first_answer < 0 && ended)
                    v = NAN;
                break;
            case ST_SLO_E2E: v = ended ? (double)(r->end - t0) : (double)(now - t0); break;
            case ST_SLO_TPOT:
                if (r->first_token >= 0 && r->output_requested > 1) {
                    /* the remaining tokens cannot come faster than now: a lower bound */
                    st_ns last = ended ? r->end : now;
                    uint32_t toks = ended ? r->output_tokens : r->output_requested;
                    if (toks > 1)
                        v = (double)(last - r->first_token) / (double)(toks - 1);
                    if (!ended && v / 1e9 * k <= lim_s)
                        v = NAN; /* not yet known to breach */
                }
                break;
            case ST_SLO_ITL:
            default: break; /* ITL percentiles run over gaps, not requests: no early verdict */
            }
            if (isfinite(v) && v / 1e9 * k > lim_s)
                breaches[t]++;
        }
    }
}

int st_audit_lower_bounds(const st_audit_slo *slo, const st_record *recs, uint32_t n, double *value_ms, uint32_t *due)
{
    st_ns t_stop = 0;
    for (uint32_t i = 0; i < n; i++)
        if (recs[i].end > t_stop)
            t_stop = recs[i].end;
    double *v = malloc(sizeof(double) * (n ? n : 1));
    if (!v)
        return -1;
    *due = 0;
    for (uint32_t i = 0; i < n; i++)
        if (!recs[i].warmup && recs[i].scheduled >= 0 && recs[i].scheduled <= t_stop)
            (*due)++;
    for (int t = 0; t < slo->n && t < ST_SLO_MAX_TERMS; t++) {
        uint32_t k = 0;
        for (uint32_t i = 0; i < n; i++) {
            const st_record *r = &recs[i];
            if (r->warmup || r->scheduled < 0 || r->scheduled > t_stop)
                continue;
            st_ns end = r->end >= 0 ? r->end : t_stop;
            double x = NAN;
            switch (slo->terms[t].metric) {
            case ST_SLO_TTFT: x = (double)((r->first_token >= 0 ? r->first_token : end) - r->scheduled); break;
            case ST_SLO_TTFAT: x = (double)((r->first_answer >= 0 ? r->first_answer : end) - r->scheduled); break;
            case ST_SLO_E2E: x = (double)(end - r->scheduled); break;
            case ST_SLO_TPOT:
                if (r->first_token >= 0 && r->status == ST_REQ_OK && r->output_tokens > 1)
                    x = (double)(r->end - r->first_token) / (double)(r->output_tokens - 1);
                else if (r->first_token >= 0 && r->output_requested > 1)
                    x = (double)(end - r->first_token) / (double)(r->output_requested - 1);
                break;
            case ST_SLO_ITL:
            default: break; /* ITL: no per-request lower bound */
            }
            if (isfinite(x))
                v[k++] = x / 1e6;
        }
        st_dist d;
        st_dist_compute(v, k, &d);
        value_ms[t] = pick(&d, slo->terms[t].pct);
    }
    free(v);
    return 0;
}
