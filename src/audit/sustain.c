#include "audit/sustain.h"

#include "core/util.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "load/agent_run.h"
#include "load/stats.h"

const char *st_sus_phase_name(st_sus_phase p)
{
    switch (p) {
    case ST_SUS_RAMP: return "ramp";
    case ST_SUS_WARM: return "warm";
    case ST_SUS_WINDOW: return "window";
    case ST_SUS_COOL: return "cool-down";
    case ST_SUS_DONE: return "done";
    }
    return "?";
}

void st_sustain_init(st_sustain *s, const st_sustain_params *p)
{
    memset(s, 0, sizeof *s);
    s->p = *p;
    s->phase = ST_SUS_RAMP;
    s->ramp_s = s->warm_end_s = s->window_end_s = s->stop_s = NAN;
    s->last_test_s = -INFINITY;
    s->e2e_recent = NAN;
}

/* ---- reading records on their clock, in engine seconds ---- */

typedef struct view {
    const st_record *r;
    uint32_t n;
    double k; /* engine seconds per record nanosecond */
    int closed;
    double now; /* engine seconds */
} view;

static double T(const view *v, st_ns t) { return t < 0 ? NAN : (double)t * v->k; }

/* A request's arrival (engine s), NAN when it has not arrived by now (or is warm-up). */
static double arrival(const view *v, const st_record *r)
{
    if (r->warmup)
        return NAN;
    double a = v->closed ? T(v, r->sent) : T(v, r->scheduled);
    return a <= v->now ? a : NAN;
}

static double ended_at(const view *v, const st_record *r)
{
    double e = T(v, r->end);
    return e <= v->now ? e : NAN;
}

typedef struct pair {
    double x, y;
} pair;

static int cmp_pair(const void *a, const void *b)
{
    const pair *p = a, *q = b;
    return (p->x > q->x) - (p->x < q->x);
}

static double median(double *v, uint32_t n)
{
    if (!n)
        return NAN;
    qsort(v, n, sizeof *v, st_cmp_double);
    return st_percentile_sorted(v, n, 50);
}

/* What one evaluation needs about the requests. */
typedef struct census {
    uint32_t arrived, completed, failed, in_flight;
    double first_arrival, last_arrival;
    double e2e_med;          /* median E2E of the requests completed so far */
    double e2e_recent;       /* median E2E of the last ST_SUSTAIN_RECENT completions */
    double ramp_e2e;         /* median E2E of the first ST_SUSTAIN_RAMP_N completions (NAN: fewer) */
    double done_recent_rate; /* completions per second over the last half of the run so far */
} census;

/* heavy = 0: the counts only (no sorting); the E2E figures stay NAN. */
static int take_census(const view *v, census *c, int heavy)
{
    memset(c, 0, sizeof *c);
    c->first_arrival = c->last_arrival = c->e2e_med = c->ramp_e2e = c->e2e_recent = c->done_recent_rate = NAN;
    pair *done = malloc(sizeof *done * (v->n ? v->n : 1));
    double *e2e = malloc(sizeof *e2e * (v->n ? v->n : 1));
    int rc = -1;
    if (done && e2e) {
        uint32_t nd = 0;
        for (uint32_t i = 0; i < v->n; i++) {
            const st_record *r = &v->r[i];
            double a = arrival(v, r);
            if (isnan(a))
                continue;
            c->arrived++;
            if (isnan(c->first_arrival) || a < c->first_arrival)
                c->first_arrival = a;
            if (isnan(c->last_arrival) || a > c->last_arrival)
                c->last_arrival = a;
            double e = ended_at(v, r);
            if (isnan(e)) {
                c->in_flight++;
            } else if (r->status == ST_REQ_OK) {
                c->completed++;
                done[nd++] = (pair){ e, e - a };
            } else {
                c->failed++;
            }
        }
        if (!heavy)
            nd = 0;
        for (uint32_t i = 0; i < nd; i++)
            e2e[i] = done[i].y;
        c->e2e_med = median(e2e, nd);
        qsort(done, nd, sizeof *done, cmp_pair);
        uint32_t k = nd < ST_SUSTAIN_RECENT ? nd : ST_SUSTAIN_RECENT;
        for (uint32_t i = 0; i < k; i++)
            e2e[i] = done[nd - k + i].y;
        c->e2e_recent = median(e2e, k);
        if (nd >= ST_SUSTAIN_RAMP_N) {
            for (uint32_t i = 0; i < ST_SUSTAIN_RAMP_N; i++)
                e2e[i] = done[i].y;
            c->ramp_e2e = median(e2e, ST_SUSTAIN_RAMP_N);
        }
        double t0 = isnan(c->first_arrival) ? 0 : c->first_arrival, half = (v->now + t0) / 2;
        uint32_t late = 0;
        for (uint32_t i = 0; i < nd; i++)
            late += done[i].x >= half;
        c->done_recent_rate = v->now > half && heavy ? late / (v->now - half) : NAN;
        rc = 0;
    }
    free(done);
    free(e2e);
    return rc;
}

static uint32_t batches_for(double span, double e2e)
{
    double b = e2e > 0 ? span / e2e : ST_SUSTAIN_MAX_BATCHES;
    if (!(b >= ST_SUSTAIN_MIN_BATCHES))
        b = ST_SUSTAIN_MIN_BATCHES;
    if (b > ST_SUSTAIN_MAX_BATCHES)
        b = ST_SUSTAIN_MAX_BATCHES;
    return (uint32_t)b;
}

static double ttft_limit_s(const st_audit_slo *slo)
{
    for (int i = 0; i < slo->n; i++)
        if (slo->terms[i].metric == ST_SLO_TTFT)
            return slo->terms[i].max_ms / 1e3;
    return 0;
}

/* ---- growth tests ---- */

static uint32_t arrivals_between(const view *v, double w0, double w1);

typedef struct growth {
    st_trend inflight, ttft, waiting;
    int g_inflight, g_ttft, g_waiting;
} growth;

static void trend_none(st_trend *t)
{
    memset(t, 0, sizeof *t);
    t->slope = t->se = t->t = t->x0 = t->x1 = t->mean = NAN;
    t->p_growth = 1;
}

static int grows(const st_trend *t, double alpha, double threshold)
{
    return isfinite(t->slope) && t->p_growth < alpha && t->slope >= threshold;
}

/* The requests in flight at points spread over [t0, t1]. */
static int inflight_trend(const view *v, double t0, double t1, uint32_t B, st_trend *out)
{
    trend_none(out);
    if (!(t1 > t0))
        return 0;
    uint32_t m = ST_SUSTAIN_GRID;
    double *t = malloc(sizeof *t * m), *y = malloc(sizeof *y * m);
    int rc = -1;
    if (t && y) {
        for (uint32_t j = 0; j < m; j++)
            t[j] = t0 + (t1 - t0) * (j + 0.5) / m;
        /* st_inflight_at reads record seconds: ask in the records' clock */
        double *tr = malloc(sizeof *tr * m);
        if (tr) {
            double to_rec = 1e-9 / v->k; /* record seconds per engine second */
            for (uint32_t j = 0; j < m; j++)
                tr[j] = t[j] * to_rec;
            if (st_inflight_at(v->r, v->n, v->closed, tr, m, y) == 0) {
                /* a request that ends after now is still in flight now: st_inflight_at counts
                 * every recorded end, and records only hold ends that happened */
                st_trend_fit(t, y, m, B, out);
                st_trend_level_floor(out);
                rc = 0;
            }
            free(tr);
        }
    }
    free(t);
    free(y);
    return rc;
}

/* TTFT by arrival for arrivals in [t0, t1]; a request still waiting counts with its wait so far. */
static int ttft_trend(const view *v, double t0, double t1, uint32_t B, st_trend *out)
{
    trend_none(out);
    pair *p = malloc(sizeof *p * (v->n ? v->n : 1));
    if (!p)
        return -1;
    uint32_t k = 0;
    for (uint32_t i = 0; i < v->n; i++) {
        const st_record *r = &v->r[i];
        double a = arrival(v, r);
        if (isnan(a) || a < t0 || a > t1)
            continue;
        double ft = T(v, r->first_token);
        if (!(ft <= v->now))
            ft = NAN;
        double y;
        if (!isnan(ft))
            y = ft - a;
        else if (isnan(ended_at(v, r)))
            y = v->now - a;
        else
            continue; /* ended without a token: no TTFT */
        p[k++] = (pair){ a, y };
    }
    qsort(p, k, sizeof *p, cmp_pair);
    double *x = malloc(sizeof *x * (k ? k : 1)), *y = malloc(sizeof *y * (k ? k : 1));
    int rc = -1;
    if (x && y) {
        for (uint32_t i = 0; i < k; i++) {
            x[i] = p[i].x;
            y[i] = p[i].y;
        }
        if (k >= ST_SUSTAIN_MIN_POINTS)
            st_trend_fit(x, y, k, B, out);
        rc = 0;
    }
    free(p);
    free(x);
    free(y);
    return rc;
}

static void waiting_trend(const st_metrics_sample *s, uint32_t n, double t0, double t1, uint32_t B, st_trend *out)
{
    trend_none(out);
    const char *name = st_metrics_name(ST_MET_WAITING);
    uint32_t k = 0;
    for (uint32_t i = 0; s && i < n; i++)
        k += s[i].name && !strcmp(s[i].name, name) && s[i].t >= t0 && s[i].t <= t1 && isfinite(s[i].value);
    if (k < ST_SUSTAIN_MIN_POINTS / 2)
        return;
    double *x = malloc(sizeof *x * k), *y = malloc(sizeof *y * k);
    if (x && y) {
        uint32_t j = 0;
        for (uint32_t i = 0; i < n; i++)
            if (s[i].name && !strcmp(s[i].name, name) && s[i].t >= t0 && s[i].t <= t1 && isfinite(s[i].value)) {
                x[j] = s[i].t;
                y[j++] = s[i].value;
            }
        /* samples are in time order per name; sort anyway (pairs) */
        pair *p = malloc(sizeof *p * k);
        if (p) {
            for (uint32_t i = 0; i < k; i++)
                p[i] = (pair){ x[i], y[i] };
            qsort(p, k, sizeof *p, cmp_pair);
            for (uint32_t i = 0; i < k; i++) {
                x[i] = p[i].x;
                y[i] = p[i].y;
            }
            free(p);
            st_trend_fit(x, y, k, B, out);
            st_trend_level_floor(out);
        }
    }
    free(x);
    free(y);
}

/* The confidence of a call made while the run goes on: it is looked at again and again, so each
 * look is held to a ten times smaller error rate. */
static double interim_confidence(const st_sustain *s) { return 1 - (1 - s->p.confidence) / ST_SUSTAIN_INTERIM; }

/* Growth over [t0, now]: each series and whether it grows (online: at the interim confidence).
 * -1 when out of memory. */
static int growth_tests(const st_sustain *s, const view *v, double t0, double e2e, const st_metrics_sample *sm,
                        uint32_t nsm, int online, growth *g)
{
    memset(g, 0, sizeof *g);
    trend_none(&g->inflight);
    trend_none(&g->ttft);
    trend_none(&g->waiting);
    /* enough data to tell a trend from the queue's own wandering: as long as the window and half
     * its requests at least (a queue near saturation wanders for a long time) */
    if (s->p.concurrency || !(v->now > t0) || !(v->now - t0 >= ST_SUSTAIN_TREND_E2E * e2e) ||
        v->now - t0 < s->p.min_window_s || arrivals_between(v, t0, v->now) < s->p.min_window_requests / 2)
        return 0;
    uint32_t B = batches_for(v->now - t0, e2e);
    double lam = s->p.offered_rps;
    double lim = ttft_limit_s(s->p.slo);
    if (inflight_trend(v, t0, v->now, B, &g->inflight) || ttft_trend(v, t0, v->now - lim, B, &g->ttft))
        return -1;
    waiting_trend(sm, nsm, t0, v->now, B, &g->waiting);
    /* the error rate is shared by the series tested (Bonferroni) */
    int tested = isfinite(g->inflight.slope) + isfinite(g->ttft.slope) + isfinite(g->waiting.slope);
    double alpha = (1 - (online ? interim_confidence(s) : s->p.confidence)) / (tested > 0 ? tested : 1);
    g->g_inflight = grows(&g->inflight, alpha, ST_SUSTAIN_GROWTH_MARGIN * lam);
    g->g_ttft = grows(&g->ttft, alpha, ST_SUSTAIN_GROWTH_MARGIN);
    g->g_waiting = grows(&g->waiting, alpha, ST_SUSTAIN_GROWTH_MARGIN * lam);
    return 0;
}

/* Neither the engine's waiting queue (which was scraped) nor TTFT grows. */
static int queue_flat(const growth *g) { return !g->g_waiting && !g->g_ttft && isfinite(g->waiting.slope); }

/* Requests in flight grow, but the engine's waiting queue (scraped) and TTFT do not: the batch is
 * still filling, no overload (audit/sustain.h). */
static int batch_filling(const growth *g) { return g->g_inflight && queue_flat(g); }

/* Something grows, and not just a batch still filling: the engine is over-saturated. */
static int overloaded(const growth *g) { return (g->g_inflight || g->g_ttft || g->g_waiting) && !batch_filling(g); }

/* The window's flow balance would fail (as st_sustain_finish judges it): the in-flight slope's
 * interval lies above the growth margin. */
static int inflight_short(const st_sustain *s, const growth *g)
{
    const st_trend *t = &g->inflight;
    if (!isfinite(t->slope) || !isfinite(t->se) || t->batches < 3)
        return 0;
    double tq = st_t_quantile(0.5 + s->p.confidence / 2, t->batches - 2) * t->se;
    return t->slope - tq > ST_SUSTAIN_GROWTH_MARGIN * s->p.offered_rps;
}

static void describe_growth(const growth *g, double lam, double delivered, char *b, size_t n)
{
    size_t off = 0;
    off += (size_t)snprintf(b + off, n - off, "over-saturated:");
    const char *sep = " ";
    if (g->g_inflight) {
        off += (size_t)snprintf(b + off, n - off, "%srequests in flight grow by %.3g/s (t = %.1f)", sep,
                                g->inflight.slope, g->inflight.t);
        sep = "; ";
    }
    if (g->g_waiting && off < n) {
        off += (size_t)snprintf(b + off, n - off, "%sthe engine's waiting queue grows by %.3g/s (t = %.1f)", sep,
                                g->waiting.slope, g->waiting.t);
        sep = "; ";
    }
    if (g->g_ttft && off < n) {
        off += (size_t)snprintf(b + off, n - off, "%sTTFT grows by %.3g s per second (t = %.1f)", sep, g->ttft.slope,
                                g->ttft.t);
        sep = "; ";
    }
    if (off < n && isfinite(delivered))
        snprintf(b + off, n - off, "; the engine delivers %.3g of the %.4g req/s offered", delivered, lam);
}

/* ---- SLO terms over a set of requests ---- */

/* The values of term t over the window's arrivals [w0, w1] (arrival order), in ms. When
 * known_by is finite, only what is known by then: TTFT/E2E of requests that arrived at least
 * one limit before (a request still waiting counts as a breach), TPOT/ITL of completed requests
 * (and TPOT lower bounds that already breach). n_out gets the count; the caller frees. */
static double *term_values(const view *v, const st_slo_term *t, double w0, double w1, int online, double e2e,
                           uint32_t *n_out)
{
    *n_out = 0;
    size_t cap = v->n ? v->n : 1;
    if (t->metric == ST_SLO_ITL) {
        cap = 0;
        for (uint32_t i = 0; i < v->n; i++)
            cap += v->r[i].n_events;
        cap = cap ? cap : 1;
    }
    double *out = malloc(sizeof *out * cap);
    if (!out)
        return NULL;
    double lim = t->max_ms / 1e3;
    if (t->metric == ST_SLO_MAKESPAN) { /* per task (session), not per request (load/agent_run.h) */
        int m = st_agent_makespans(v->r, v->n, v->closed, v->k, v->now, w0, w1, online, lim, out);
        if (m < 0) {
            free(out);
            return NULL;
        }
        for (int i = 0; i < m; i++)
            out[i] *= 1e3;
        *n_out = (uint32_t)m;
        return out;
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < v->n; i++) {
        const st_record *r = &v->r[i];
        double a = arrival(v, r);
        if (isnan(a) || a < w0 || a > w1)
            continue;
        double e = ended_at(v, r), ft = T(v, r->first_token);
        if (!(ft <= v->now))
            ft = NAN;
        int ok = !isnan(e) && r->status == ST_REQ_OK;
        double x = NAN;
        switch (t->metric) {
        case ST_SLO_TTFT:
            if (online && a > v->now - lim)
                break;
            x = !isnan(ft) ? ft - a : (online && isnan(e)) ? v->now - a : NAN;
            break;
        case ST_SLO_E2E:
            if (online && a > v->now - lim)
                break;
            x = ok ? e - a : (online && isnan(e)) ? v->now - a : NAN;
            break;
        case ST_SLO_TPOT:
            /* online: the requests that arrived at least one median E2E ago (most have ended) */
            if (online && e2e > 0 && a > v->now - e2e)
                break;
            if (ok && r->output_tokens > 1 && !isnan(ft)) {
                x = (e - ft) / (r->output_tokens - 1);
            } else if (online && isnan(e)) {
                /* still running: a breach when its lower bound already is one, else counted as within
                 * the limit (so the fraction of breaches is a lower bound) */
                double lb = !isnan(ft) && r->output_requested > 1 ? (v->now - ft) / (r->output_requested - 1) : 0;
                x = lb > lim ? lb : 0;
            }
            break;
        case ST_SLO_ITL:
            if (ok) {
                st_event_it it;
                st_ns p, q;
                st_events_begin(&it, r);
                if (st_events_next(&it, &p))
                    for (; st_events_next(&it, &q); p = q)
                        out[k++] = (T(v, q) - T(v, p)) * 1e3;
            }
            break;
        default: break;
        }
        if (t->metric != ST_SLO_ITL && isfinite(x))
            out[k++] = x * 1e3;
    }
    *n_out = k;
    return out;
}

/* Online: a term missed with confidence among the window's arrivals so far. -1 none. */
static int slo_missed_now(const st_sustain *s, const view *v, uint32_t B, double e2e, char *why, size_t whylen)
{
    const st_audit_slo *slo = s->p.slo;
    uint32_t need =
        s->p.min_window_requests / 2 > ST_SUSTAIN_MIN_POINTS ? s->p.min_window_requests / 2 : ST_SUSTAIN_MIN_POINTS;
    double w1 = isnan(s->window_end_s) ? v->now : s->window_end_s;
    double w0 = isnan(s->warm_end_s) ? s->ramp_s : s->warm_end_s;
    for (int i = 0; i < slo->n; i++) {
        const st_slo_term *t = &slo->terms[i];
        if (t->metric == ST_SLO_ITL)
            continue;
        uint32_t nv;
        double *vals = term_values(v, t, w0, w1, 1, e2e, &nv);
        if (!vals)
            return -1;
        int missed = 0;
        st_exceed ex;
        if (nv >= need) {
            st_exceed_compute(vals, nv, t->max_ms, B, &ex);
            missed = st_exceed_lower(&ex, interim_confidence(s)) > 1 - t->pct / 100;
        }
        free(vals);
        if (missed) {
            const char *m = st_slo_metric_name(t->metric);
            snprintf(why, whylen,
                     "SLO missed: %.0f %% of the %s so far (%u of %u) exceed the %s limit of %g ms, "
                     "more than the %g %% the p%g allows (with %.1f %% confidence)",
                     ex.frac * 100, t->metric == ST_SLO_MAKESPAN ? "tasks" : "requests", ex.k, ex.n, m, t->max_ms,
                     100 - t->pct, t->pct, interim_confidence(s) * 100);
            return i;
        }
    }
    return -1;
}

static void stop_with(st_sustain *s, double now, const char *why)
{
    s->phase = ST_SUS_DONE;
    s->stop_s = now;
    if (why && why != s->why)
        snprintf(s->why, sizeof s->why, "%s", why);
}

/* Every arrival of the window has ended (by now). */
static int window_drained(const view *v, double w0, double w1)
{
    for (uint32_t i = 0; i < v->n; i++) {
        double a = arrival(v, &v->r[i]);
        if (!isnan(a) && a >= w0 && a <= w1 && isnan(ended_at(v, &v->r[i])))
            return 0;
    }
    return 1;
}

static uint32_t arrivals_between(const view *v, double w0, double w1)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < v->n; i++) {
        double a = arrival(v, &v->r[i]);
        k += !isnan(a) && a >= w0 && a <= w1;
    }
    return k;
}

static double window_needed(const st_sustain *s, double e2e)
{
    double w = s->p.min_window_s;
    if (ST_SUSTAIN_WINDOW_E2E * e2e > w)
        w = ST_SUSTAIN_WINDOW_E2E * e2e;
    if (s->p.offered_rps > 0 && s->p.min_window_requests / s->p.offered_rps > w)
        w = s->p.min_window_requests / s->p.offered_rps;
    /* a closed loop of C clients sends about C / E2E requests a second (Little's law): its
     * window receives min_window_requests over at least that many E2Es / C */
    double cl = st_sustain_closed_window_s(s->p.concurrency, s->p.min_window_requests, e2e);
    if (cl > w)
        w = cl;
    return w;
}

double st_sustain_closed_window_s(uint32_t concurrency, uint32_t min_window_requests, double e2e_s)
{
    if (!concurrency || !(e2e_s > 0) || !isfinite(e2e_s))
        return 0;
    return (double)min_window_requests * e2e_s / concurrency;
}

int st_sustain_closed_rate(const st_record *recs, uint32_t n, double w0, double w1, double confidence, uint32_t batches,
                           st_closed_rate *out)
{
    memset(out, 0, sizeof *out);
    out->in_flight = out->e2e_mean_s = out->rate = out->lo = out->hi = NAN;
    if (!(w1 > w0))
        return -1;
    /* L: the requests in flight over the window, exactly: each request's time inside it */
    double area = 0, stop = -INFINITY;
    for (uint32_t i = 0; i < n; i++)
        if (!recs[i].warmup && recs[i].end >= 0 && st_ns_to_s(recs[i].end) > stop)
            stop = st_ns_to_s(recs[i].end);
    double *e2e = malloc(sizeof *e2e * (n ? n : 1));
    if (!e2e)
        return -1;
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        const st_record *r = &recs[i];
        if (r->warmup || r->sent < 0)
            continue;
        double a = st_ns_to_s(r->sent), e = r->end >= 0 ? st_ns_to_s(r->end) : (stop > a ? stop : a);
        double lo = a > w0 ? a : w0, hi = e < w1 ? e : w1;
        if (hi > lo)
            area += hi - lo;
        /* R: the E2E of the window's sends (in send order: records are) */
        if (a >= w0 && a <= w1 && r->end >= 0 && r->status == ST_REQ_OK)
            e2e[k++] = e - a;
    }
    int rc = -1;
    if (k > 0) {
        double sum = 0;
        for (uint32_t i = 0; i < k; i++)
            sum += e2e[i];
        out->n = k;
        out->in_flight = area / (w1 - w0);
        out->e2e_mean_s = sum / k;
        out->rate = out->e2e_mean_s > 0 ? out->in_flight / out->e2e_mean_s : NAN;
        out->lo = out->hi = out->rate;
        /* the interval of the mean E2E by batch means (consecutive sends: a wave's requests
         * share a batch), carried to the rate */
        uint32_t B = batches < 2 ? 2 : batches;
        if (k >= 2 * B && isfinite(out->rate)) {
            double m[64], mean = 0, var = 0;
            if (B > 64)
                B = 64;
            for (uint32_t b = 0; b < B; b++) {
                uint32_t i0 = (uint32_t)((uint64_t)k * b / B), i1 = (uint32_t)((uint64_t)k * (b + 1) / B);
                double t = 0;
                for (uint32_t i = i0; i < i1; i++)
                    t += e2e[i];
                m[b] = t / (i1 - i0);
                mean += m[b] / B;
            }
            for (uint32_t b = 0; b < B; b++)
                var += (m[b] - mean) * (m[b] - mean) / (B - 1);
            double half = st_t_quantile(0.5 + confidence / 2, B - 1) * sqrt(var / B);
            out->lo = out->in_flight / (out->e2e_mean_s + half);
            out->hi = out->e2e_mean_s > half ? out->in_flight / (out->e2e_mean_s - half) : INFINITY;
        }
        rc = 0;
    }
    free(e2e);
    return rc;
}

/* The warm phase also waits until the requests in flight stop climbing: their mean over the last
 * median E2E is within ST_SUSTAIN_LEVEL of the mean over the one before (a closed loop is level by
 * construction). */
static int levelled(const st_sustain *s, const view *v, double e2e)
{
    if (s->p.concurrency)
        return 1;
    enum { P = 24 };
    double t[2 * P], y[2 * P], to_rec = 1e-9 / v->k;
    if (!(e2e > 0) || v->now < 2 * e2e)
        return 0;
    for (int j = 0; j < 2 * P; j++)
        t[j] = (v->now - 2 * e2e + 2 * e2e * (j + 0.5) / (2 * P)) * to_rec;
    if (st_inflight_at(v->r, v->n, 0, t, 2 * P, y))
        return 1;
    double a = 0, b = 0;
    for (int j = 0; j < P; j++) {
        a += y[j];
        b += y[P + j];
    }
    return b <= a * (1 + ST_SUSTAIN_LEVEL) + P; /* (one request of slack) */
}

/* How long the warm phase lasts at least, at a median E2E of e: warmup_e2e E2Es, and with sessions
 * a session's whole span (its think time and an E2E per later turn). */
static double warm_needed(const st_sustain *s, double e)
{
    double w = s->p.warmup_e2e * e;
    if (s->p.session_turns > 1) {
        double span = s->p.session_think_s + (s->p.session_turns - 1) * e;
        w = span > w ? span : w;
    }
    return w;
}

/* Where growth tests start: after the ramp-up, and one current median E2E after the first
 * arrival (the engine filling up is no growth). */
static double growth_start(const st_sustain *s, const census *c)
{
    /* (with sessions, after a session's span: the later turns joining is no growth either) */
    double t =
        (isnan(c->first_arrival) ? 0 : c->first_arrival) + warm_needed(s, isnan(c->e2e_recent) ? 0 : c->e2e_recent);
    return isnan(s->ramp_s) || t > s->ramp_s ? t : s->ramp_s;
}

/* Whether the rest of the run can still fit in max_duration (warm phase, window, drain). */
static int fits(const st_sustain *s, const view *v, const census *c, double *end)
{
    double e = c->e2e_recent;
    double t0 = isnan(c->first_arrival) ? 0 : c->first_arrival;
    double w0 = !isnan(s->warm_end_s) ? s->warm_end_s : t0 + warm_needed(s, e);
    if (isnan(s->warm_end_s) && w0 < v->now)
        w0 = v->now;
    *end = w0 + window_needed(s, e) + e;
    return !(*end > s->p.max_duration_s);
}

/* Failed requests that decide the run: one that arrived in the window (it fails the run), or
 * before the window at least ST_SUSTAIN_RAMP_N failures outnumbering the completions. 1 with why. */
static int failing_now(const st_sustain *s, const view *v, const census *c, char *why, size_t n)
{
    if (!c->failed)
        return 0;
    uint32_t in_window = 0;
    const st_record *first = NULL;
    for (uint32_t i = 0; i < v->n; i++) {
        const st_record *r = &v->r[i];
        double a = arrival(v, r);
        if (isnan(a) || isnan(ended_at(v, r)) || r->status == ST_REQ_OK || r->status == ST_REQ_ABORTED)
            continue;
        if (!first)
            first = r;
        in_window += !isnan(s->warm_end_s) && a >= s->warm_end_s;
    }
    const char *what = first ? st_req_status_name(first->status) : "failed";
    const char *detail = first && first->error ? first->error : "";
    if (in_window) {
        snprintf(why, n, "requests fail: %u of the window's arrivals failed (the first: %s%s%.160s)", in_window, what,
                 *detail ? ", " : "", detail);
        return 1;
    }
    if (c->failed >= ST_SUSTAIN_RAMP_N && c->failed > c->completed) {
        snprintf(why, n, "requests fail: %u of the %u requests that ended failed (the first: %s%s%.160s)", c->failed,
                 c->failed + c->completed, what, *detail ? ", " : "", detail);
        return 1;
    }
    return 0;
}

/* More requests in flight than the client keeps open: over-saturated, the run stops (1). */
static int step_saturated(st_sustain *s, const view *v, const census *c)
{
    if (!(s->p.max_in_flight && c->in_flight >= s->p.max_in_flight))
        return 0;
    char why[320];
    snprintf(why, sizeof why,
             "over-saturated: %u requests in flight, the most this client keeps open at once; the engine "
             "delivers %.3g of the %.4g req/s offered",
             c->in_flight, c->arrived > c->in_flight ? (c->completed / (v->now - c->first_arrival)) : 0.0,
             s->p.offered_rps);
    s->oversaturated = 1;
    stop_with(s, v->now, why);
    return 1;
}

/* The growth tests past the ramp-up: growth that persists stops the run, over-saturated (1). */
static int step_growth(st_sustain *s, const view *v, const census *c, const st_metrics_sample *samples,
                       uint32_t n_samples)
{
    if (!(s->phase >= ST_SUS_WARM && s->phase < ST_SUS_DONE))
        return 0;
    growth g;
    if (growth_tests(s, v, growth_start(s, c), c->e2e_recent, samples, n_samples, 1, &g) != 0)
        return 0;
    int any = overloaded(&g);
    s->hits = any ? s->hits + 1 : 0;
    if (s->hits == 1)
        s->first_hit_s = v->now;
    if (any && s->hits >= ST_SUSTAIN_PERSIST && v->now - s->first_hit_s >= c->e2e_recent / 2 && s->p.early_stop) {
        char why[320];
        describe_growth(&g, s->p.offered_rps, c->done_recent_rate, why, sizeof why);
        s->oversaturated = 1;
        stop_with(s, v->now, why);
        return 1;
    }
    return 0;
}

/* The phases moved on: warm to window once warm and level, window to cool-down once long enough
 * (or restarted while the requests in flight still grow). */
static void step_phases(st_sustain *s, const view *v, const census *c, const st_metrics_sample *samples,
                        uint32_t n_samples)
{
    if (s->phase == ST_SUS_WARM) {
        double since = v->now - (isnan(c->first_arrival) ? 0 : c->first_arrival);
        if (v->now >= s->ramp_s && since >= warm_needed(s, c->e2e_recent) && levelled(s, v, c->e2e_recent)) {
            s->warm_end_s = v->now;
            s->phase = ST_SUS_WINDOW;
        }
    }
    if (s->phase != ST_SUS_WINDOW)
        return;
    if (v->now - s->warm_end_s >= window_needed(s, c->e2e_recent) &&
        arrivals_between(v, s->warm_end_s, v->now) >= s->p.min_window_requests) {
        growth g;
        if (s->restarts < ST_SUSTAIN_MAX_RESTARTS &&
            growth_tests(s, v, s->warm_end_s, c->e2e_recent, samples, n_samples, 0, &g) == 0 &&
            (g.g_inflight || inflight_short(s, &g)) && queue_flat(&g)) {
            s->warm_end_s = v->now; /* no steady state yet: this window was warm-up too */
            s->restarts++;
        } else {
            s->window_end_s = v->now;
            s->phase = ST_SUS_COOL;
        }
    }
}

/* The run's bounds: known to be out of reach (early: it saves engine time), or reached; the run
 * stops undecided (1). */
static int step_bounds(st_sustain *s, const view *v, const census *c)
{
    char why[320];
    double end;
    if ((s->phase == ST_SUS_WARM || s->phase == ST_SUS_WINDOW) && s->hits == 0 && !fits(s, v, c, &end)) {
        char cl[96] = "";
        if (s->p.concurrency)
            snprintf(cl, sizeof cl, ": %u clients send its %u requests over %u x E2E / %u", s->p.concurrency,
                     s->p.min_window_requests, s->p.min_window_requests, s->p.concurrency);
        snprintf(why, sizeof why,
                 "undecided: at a median E2E of %.3g s, the warm phase (%.3g s%s), the window (%.3g s%s) and its "
                 "drain would end at %.0f s, after max_duration (%g s)",
                 c->e2e_recent, warm_needed(s, c->e2e_recent), s->p.session_turns > 1 ? ", a session's span" : "",
                 window_needed(s, c->e2e_recent), cl, end, s->p.max_duration_s);
        s->undecided = 1;
        stop_with(s, v->now, why);
        return 1;
    }
    if (v->now >= s->p.max_duration_s) {
        snprintf(why, sizeof why, "undecided: reached max_duration (%g s) in the %s phase", s->p.max_duration_s,
                 st_sus_phase_name(s->phase));
        s->undecided = s->phase != ST_SUS_COOL || !window_drained(v, s->warm_end_s, s->window_end_s);
        stop_with(s, v->now, why);
        return 1;
    }
    if (!s->p.concurrency && s->phase < ST_SUS_COOL && c->arrived >= s->p.planned && s->p.planned > 0) {
        /* nothing more will arrive: in the window phase, the window ends here and drains (its
         * requests end rather than being cut off): it cannot show a pass, too short, but it can
         * show a confident failure */
        if (s->phase == ST_SUS_WINDOW) {
            s->window_end_s = v->now;
            s->phase = ST_SUS_COOL;
            s->cut_short = 1;
            return 0;
        }
        snprintf(why, sizeof why,
                 "undecided: all %u requests scheduled for the run arrived in its %s phase, before the window had "
                 "the length and the requests it needs",
                 s->p.planned, st_sus_phase_name(s->phase));
        s->undecided = 1;
        stop_with(s, v->now, why);
        return 1;
    }
    return 0;
}

int st_sustain_step(st_sustain *s, const st_record *recs, uint32_t n, st_ns now, double time_scale,
                    const st_metrics_sample *samples, uint32_t n_samples)
{
    if (s->phase == ST_SUS_DONE)
        return 1;
    view v = { recs, n, (time_scale > 0 ? time_scale : 1) * 1e-9, s->p.concurrency > 0, 0 };
    v.now = (double)now * v.k;
    /* the tests (growth, SLO) and the E2E figures at most every quarter of a median E2E (at least
     * each second); the phases at every call */
    double every = s->e2e_recent / 4 > 1 ? s->e2e_recent / 4 : 1;
    int test_now = !(v.now - s->last_test_s < every) || isnan(s->e2e_recent);
    census c;
    if (take_census(&v, &c, test_now || s->phase == ST_SUS_RAMP))
        return 0; /* no memory now: try at the next tick */
    if (isnan(c.e2e_recent))
        c.e2e_recent = s->e2e_recent;
    else
        s->e2e_recent = c.e2e_recent;
    if (test_now)
        s->last_test_s = v.now;
    char why[320];
    /* ramp-up: the first completions give the time the system takes to fill */
    if (s->phase == ST_SUS_RAMP && !isnan(c.ramp_e2e)) {
        s->ramp_s = (isnan(c.first_arrival) ? 0 : c.first_arrival) + c.ramp_e2e;
        s->phase = ST_SUS_WARM;
    }
    if (step_saturated(s, &v, &c) || (test_now && step_growth(s, &v, &c, samples, n_samples)))
        return 1;
    step_phases(s, &v, &c, samples, n_samples);
    uint32_t B = batches_for(v.now - (isnan(s->warm_end_s) ? s->ramp_s : s->warm_end_s), c.e2e_recent);
    if (s->p.early_stop && failing_now(s, &v, &c, why, sizeof why)) {
        s->failing = 1;
        stop_with(s, v.now, why);
        return 1;
    }
    if (test_now && s->phase >= ST_SUS_WARM && s->phase < ST_SUS_DONE && s->p.early_stop &&
        slo_missed_now(s, &v, B, c.e2e_recent, why, sizeof why) >= 0) {
        s->slo_missed = 1;
        stop_with(s, v.now, why);
        return 1;
    }
    if (s->phase == ST_SUS_COOL && window_drained(&v, s->warm_end_s, s->window_end_s)) {
        stop_with(s, v.now, "");
        return 1;
    }
    return step_bounds(s, &v, &c);
}

/* ---- the finished run ---- */

/* Output tokens of events inside [w0, w1], spread evenly over each request's events. */
static double tokens_inside(const view *v, double w0, double w1)
{
    double tok = 0;
    for (uint32_t i = 0; i < v->n; i++) {
        const st_record *r = &v->r[i];
        if (r->warmup || r->status != ST_REQ_OK || !r->n_events)
            continue;
        uint32_t in = 0;
        st_event_it it;
        st_ns e;
        st_events_begin(&it, r);
        while (st_events_next(&it, &e)) {
            double t = T(v, e);
            in += t >= w0 && t <= w1;
        }
        tok += (double)r->output_tokens * in / r->n_events;
    }
    return tok;
}

static void terms_over(const st_sustain *s, const view *v, double w0, double w1, int online, uint32_t B,
                       st_sustain_result *out)
{
    const st_audit_slo *slo = s->p.slo;
    out->n_terms = slo->n;
    out->binding = -1;
    out->worst_ratio = 0;
    double least = INFINITY;
    for (int i = 0; i < slo->n && i < ST_SLO_MAX_TERMS; i++) {
        const st_slo_term *t = &slo->terms[i];
        st_sustain_term *o = &out->term[i];
        uint32_t nv;
        double *vals = term_values(v, t, w0, w1, online, NAN, &nv);
        st_pct_ci ci;
        if (vals && nv && st_percentile_ci(vals, nv, t->pct, B, s->p.confidence, &ci) == 0) {
            o->value_ms = ci.value;
            o->lo_ms = ci.lo;
            o->hi_ms = ci.hi;
            st_exceed_compute(vals, nv, t->max_ms, B, &o->ex);
        } else {
            /* no values: TPOT of one-token outputs holds vacuously; otherwise no data */
            int vacuous = t->metric == ST_SLO_TPOT && out->window_completed > 0;
            o->value_ms = o->lo_ms = o->hi_ms = vacuous ? 0 : NAN;
            memset(&o->ex, 0, sizeof o->ex);
            o->ex.frac = vacuous ? 0 : NAN;
            o->ex.se = vacuous ? 0 : NAN;
        }
        free(vals);
        o->holds = isfinite(o->value_ms) && o->value_ms <= t->max_ms;
        o->margin = o->value_ms > 0 ? log(t->max_ms / o->value_ms) : o->value_ms == 0 ? INFINITY : NAN;
        double q = 1 - t->pct / 100;
        /* a sure pass: few enough exceedances, and the percentile's upper bound within the limit
         * (a window that saw few exceedances of a clustered series is not sure from their count) */
        o->sure =
            isfinite(o->ex.frac) && (o->holds ? st_exceed_upper(&o->ex, s->p.confidence) <= q && !(o->hi_ms > t->max_ms)
                                              : st_exceed_lower(&o->ex, s->p.confidence) > q);
        double ratio = o->value_ms / t->max_ms;
        if (isfinite(ratio) && ratio > out->worst_ratio)
            out->worst_ratio = ratio;
        if (!isnan(o->margin) && o->margin < least) {
            least = o->margin;
            out->binding = i;
        }
    }
}

static void slo_sentence(const st_sustain *s, const st_sustain_result *r, char *b, size_t n)
{
    const st_audit_slo *slo = s->p.slo;
    int worst = r->binding;
    for (int i = 0; i < r->n_terms; i++)
        if (!r->term[i].holds && isfinite(r->term[i].value_ms) &&
            (worst < 0 ||
             r->term[i].value_ms / slo->terms[i].max_ms > r->term[worst].value_ms / slo->terms[worst].max_ms))
            worst = i;
    if (worst < 0) {
        snprintf(b, n, "no SLO figure");
        return;
    }
    char m[16]; /* the longest metric name, "makespan", upper-cased */
    const char *nm = st_slo_metric_name(slo->terms[worst].metric);
    size_t k;
    for (k = 0; nm[k] && k + 1 < sizeof m; k++)
        m[k] = (char)(nm[k] - 32);
    m[k] = '\0';
    const st_sustain_term *t = &r->term[worst];
    snprintf(b, n, "p%g %s %.4g ms (CI %.4g-%.4g) %s %g ms", slo->terms[worst].pct, m, t->value_ms, t->lo_ms, t->hi_ms,
             t->holds ? "<=" : ">", slo->terms[worst].max_ms);
}

/* What judging a finished run works with. */
typedef struct finish_ctx {
    const st_sustain *s;
    view v;        /* the records as of the stop */
    census c;      /* the census as of the stop */
    growth g;      /* growth from the ramp-up to the stop */
    double w0, w1; /* the window */
    int have_window;
    uint32_t B; /* batches for the window's intervals */
} finish_ctx;

/* Growth from the ramp-up to the stop (or the window's end) into f->g and out. */
static int finish_growth(finish_ctx *f, const st_metrics_sample *samples, uint32_t n_samples, st_sustain_result *out)
{
    const st_sustain *s = f->s;
    growth *g = &f->g;
    memset(g, 0, sizeof *g);
    trend_none(&g->inflight);
    trend_none(&g->ttft);
    trend_none(&g->waiting);
    /* the load stays as it was through the cool-down: its data count too */
    double gend = f->v.now;
    if (!isnan(s->ramp_s)) {
        view gv = f->v;
        gv.now = gend;
        if (growth_tests(s, &gv, growth_start(s, &f->c), f->c.e2e_recent, samples, n_samples, 0, g))
            return -1;
    }
    out->inflight = g->inflight;
    out->ttft = g->ttft;
    out->waiting = g->waiting;
    out->grows_inflight = g->g_inflight;
    out->grows_ttft = g->g_ttft;
    out->grows_waiting = g->g_waiting;
    return 0;
}

/* The mean and the most requests in flight over the whole run (span: from the first arrival). */
static void finish_inflight(const finish_ctx *f, double span, st_sustain_result *out)
{
    if (!(span > 0))
        return;
    double t[ST_SUSTAIN_GRID], y[ST_SUSTAIN_GRID], sum = 0, mx = 0;
    double t0 = isnan(f->c.first_arrival) ? 0 : f->c.first_arrival;
    for (uint32_t j = 0; j < ST_SUSTAIN_GRID; j++)
        t[j] = t0 + span * (j + 0.5) / ST_SUSTAIN_GRID;
    if (st_inflight_at(f->v.r, f->v.n, f->v.closed, t, ST_SUSTAIN_GRID, y) == 0)
        for (uint32_t j = 0; j < ST_SUSTAIN_GRID; j++) {
            sum += y[j];
            mx = y[j] > mx ? y[j] : mx;
        }
    out->inflight_mean = sum / ST_SUSTAIN_GRID;
    out->inflight_max = mx;
}

/* The window's requests counted: arrived, completed, failed; its offered rate and output tokens. */
static void window_counts(const finish_ctx *f, st_sustain_result *out)
{
    const view *v = &f->v;
    double W = f->w1 - f->w0, out_tokens = 0;
    for (uint32_t i = 0; i < v->n; i++) {
        const st_record *r = &v->r[i];
        double a = arrival(v, r);
        if (isnan(a) || a < f->w0 || a > f->w1)
            continue;
        out->window_requests++;
        if (r->end >= 0 && r->status == ST_REQ_OK) {
            out->window_completed++;
            out_tokens += r->output_tokens;
        } else if (r->end >= 0 && r->status != ST_REQ_ABORTED)
            out->window_errors++;
    }
    out->offered_rps = out->window_requests / W;
    out->output_tps = tokens_inside(v, f->w0, f->w1) / W;
    if (out->window_completed)
        out->out_tokens_mean = out_tokens / out->window_completed;
}

/* The rate the engine delivered over the window, with its interval. */
static void window_delivered(const finish_ctx *f, st_sustain_result *out)
{
    const st_sustain *s = f->s;
    const view *v = &f->v;
    double w0 = f->w0, w1 = f->w1, W = w1 - w0;
    st_trend wt;
    view wv = *v;
    wv.now = w1;
    st_closed_rate cr;
    if (v->closed && st_sustain_closed_rate(v->r, v->n, w0, w1, s->p.confidence, f->B, &cr) == 0 && isfinite(cr.rate)) {
        /* a closed loop sends in waves (C requests of one length start and end together): the
         * sends that fall in a window of a few E2Es count one wave more or less, so the window
         * is measured by Little's law instead, from the requests in flight over it and the
         * E2E of its requests (delivered = L / R) */
        out->delivered_rps = cr.rate;
        out->delivered_lo = cr.lo;
        out->delivered_hi = cr.hi;
        /* and the output tokens likewise (the tokens of a window that holds part of a wave
         * are those of its fast, short-context steps): the rate times the mean output */
        if (isfinite(out->out_tokens_mean))
            out->output_tps = cr.rate * out->out_tokens_mean;
    } else if (inflight_trend(&wv, w0, w1, f->B, &wt) == 0 && isfinite(wt.slope)) {
        double tq = isfinite(wt.se) ? st_t_quantile(0.5 + s->p.confidence / 2, wt.batches - 2) * wt.se : 0;
        out->delivered_rps = out->offered_rps - wt.slope;
        out->delivered_lo = out->delivered_rps - tq;
        out->delivered_hi = out->delivered_rps + tq;
    } else {
        uint32_t done = 0;
        for (uint32_t i = 0; i < v->n; i++) {
            const st_record *r = &v->r[i];
            done += r->end >= 0 && r->status == ST_REQ_OK && !r->warmup && T(v, r->end) >= w0 && T(v, r->end) <= w1;
        }
        out->delivered_rps = out->delivered_lo = out->delivered_hi = done / W;
    }
}

/* A window measured in full, judged on the SLO terms: sustained, missed, or undecided when cut short. */
static void verdict_window(const finish_ctx *f, st_sustain_result *out)
{
    const st_sustain *s = f->s;
    double w0 = f->w0, w1 = f->w1;
    char sent[200];
    int holds = 1, sure_pass = 1, sure_fail = 0;
    for (int i = 0; i < out->n_terms; i++) {
        holds &= out->term[i].holds;
        sure_pass &= out->term[i].holds && out->term[i].sure;
        sure_fail |= !out->term[i].holds && out->term[i].sure;
    }
    slo_sentence(s, out, sent, sizeof sent);
    out->verdict = holds ? ST_VERDICT_PASS : ST_VERDICT_FAIL;
    out->confident = holds ? sure_pass : sure_fail;
    if (s->cut_short && !(out->verdict == ST_VERDICT_FAIL && out->confident)) {
        out->verdict = ST_VERDICT_UNDECIDED;
        out->confident = 0;
        snprintf(out->why, sizeof out->why,
                 "undecided: all %u requests scheduled for the run arrived %.3g s into its window, before it had "
                 "the length and the requests it needs (%.3g s, %u); over that window %s",
                 s->p.planned, w1 - w0, window_needed(s, f->c.e2e_med), s->p.min_window_requests, sent);
    } else if (f->v.closed)
        snprintf(out->why, sizeof out->why, "%s: %u requests in the %.3g s window at concurrency %u; %s%s",
                 holds ? "sustained" : "SLO missed", out->window_requests, w1 - w0, s->p.concurrency, sent,
                 out->confident ? "" : " (not confident)");
    else {
        /* delivered above what arrived: the requests in flight fell over the window (a queue
         * left from the warm phase drained), which the reader should not take for an error */
        char drain[96] = "";
        if (out->delivered_lo > out->offered_rps)
            snprintf(drain, sizeof drain, ", the requests in flight falling by %.2g/s (a queue draining)",
                     out->delivered_rps - out->offered_rps);
        char full[1024]; /* then cut to the stored reason's size, if it must be */
        snprintf(full, sizeof full,
                 "%s: delivered %.3g req/s (CI %.3g-%.3g) of %.3g arriving over the %.3g s window (%u requests%s); "
                 "%s%s",
                 holds ? "sustained" : "SLO missed", out->delivered_rps, out->delivered_lo, out->delivered_hi,
                 out->offered_rps, w1 - w0, out->window_requests, drain, sent,
                 out->confident ? "" : " (not confident)");
        snprintf(out->why, sizeof out->why, "%.*s", (int)sizeof out->why - 1, full);
    }
}

/* The run's verdict and its reason: an early stop's, the flow balance's, else the window's. */
static void finish_verdict(const finish_ctx *f, st_sustain_result *out)
{
    const st_sustain *s = f->s;
    /* flow balance (Little's law): the window's delivered rate must reach the offered one within
     * its interval and the growth margin */
    int short_flow = !f->v.closed && !s->undecided && !s->slo_missed && !s->failing && isfinite(out->delivered_hi) &&
                     out->delivered_hi < out->offered_rps * (1 - ST_SUSTAIN_GROWTH_MARGIN);
    if (short_flow && !s->oversaturated) {
        out->verdict = ST_VERDICT_OVERSAT;
        out->confident = 1;
        out->worst_ratio = INFINITY;
        snprintf(
            out->why, sizeof out->why,
            "over-saturated: in the window the engine delivers %.3g req/s (CI %.3g-%.3g) of the %.3g that arrived: "
            "requests in flight grow by %.3g/s",
            out->delivered_rps, out->delivered_lo, out->delivered_hi, out->offered_rps,
            out->offered_rps - out->delivered_rps);
    } else if (s->oversaturated || (!s->undecided && !s->slo_missed && !s->failing && overloaded(&f->g))) {
        out->verdict = ST_VERDICT_OVERSAT;
        out->confident = 1;
        out->worst_ratio = INFINITY;
        if (s->oversaturated && s->why[0])
            snprintf(out->why, sizeof out->why, "%s", s->why);
        else
            describe_growth(&f->g, s->p.offered_rps, f->c.done_recent_rate, out->why, sizeof out->why);
    } else if (s->failing) {
        out->verdict = ST_VERDICT_FAIL;
        out->confident = 1;
        out->worst_ratio = INFINITY;
        snprintf(out->why, sizeof out->why, "%s (stopped early)", s->why);
    } else if (s->slo_missed) {
        out->verdict = ST_VERDICT_FAIL;
        out->confident = 1;
        snprintf(out->why, sizeof out->why, "%s (stopped early)", s->why);
    } else if (s->undecided || !f->have_window || isnan(s->window_end_s)) {
        out->verdict = ST_VERDICT_UNDECIDED;
        snprintf(out->why, sizeof out->why, "%s",
                 s->why[0] ? s->why : "undecided: the run ended before its window was measured");
    } else if (out->window_completed + out->window_errors < out->window_requests) {
        out->verdict = ST_VERDICT_UNDECIDED;
        snprintf(out->why, sizeof out->why, "undecided: %u of the window's %u requests had not ended at the stop",
                 out->window_requests - out->window_completed - out->window_errors, out->window_requests);
    } else if (out->window_errors) {
        out->verdict = ST_VERDICT_FAIL;
        out->confident = 1;
        out->worst_ratio = INFINITY;
        snprintf(out->why, sizeof out->why, "%u of the window's %u requests failed", out->window_errors,
                 out->window_requests);
    } else {
        verdict_window(f, out);
    }
}

int st_sustain_finish(const st_sustain *s, const st_record *recs, uint32_t n, const st_metrics_sample *samples,
                      uint32_t n_samples, st_sustain_result *out)
{
    memset(out, 0, sizeof *out);
    finish_ctx f = { .s = s, .v = { recs, n, 1e-9, s->p.concurrency > 0, INFINITY } };
    view *v = &f.v;
    double stop = s->stop_s;
    if (isnan(stop))
        for (uint32_t i = 0; i < n; i++)
            if (recs[i].end >= 0 && T(v, recs[i].end) > (isnan(stop) ? -1 : stop))
                stop = T(v, recs[i].end);
    v->now = isnan(stop) ? 0 : stop;
    /* the census as of the stop: "the last half of the run" is the half before it */
    census *c = &f.c;
    if (take_census(v, c, 1))
        return -1;
    out->ramp_s = s->ramp_s;
    out->window_start_s = s->warm_end_s;
    out->window_end_s = s->window_end_s;
    out->stop_s = v->now;
    out->engine_s = v->now;
    out->e2e_med_s = c->e2e_med;
    out->binding = -1;
    double span = v->now - (isnan(c->first_arrival) ? 0 : c->first_arrival);
    /* what the engine delivered over the second half of the run (the first holds the ramp-up) */
    out->run_delivered_rps = isfinite(c->done_recent_rate) ? c->done_recent_rate : span > 0 ? c->completed / span : NAN;
    out->delivered_rps = out->delivered_lo = out->delivered_hi = out->offered_rps = out->output_tps = NAN;
    out->out_tokens_mean = NAN;
    if (finish_growth(&f, samples, n_samples, out) < 0)
        return -1;
    finish_inflight(&f, span, out);
    /* the window (an SLO missed early: the requests the online check judged) */
    f.w0 = s->warm_end_s;
    f.w1 = !isnan(s->window_end_s) ? s->window_end_s : v->now;
    if (s->slo_missed && isnan(f.w0))
        f.w0 = s->ramp_s;
    f.have_window = !isnan(f.w0) && f.w1 > f.w0;
    f.B = batches_for(f.w1 - (isnan(f.w0) ? 0 : f.w0), c->e2e_med);
    if (f.have_window) {
        window_counts(&f, out);
        window_delivered(&f, out);
        terms_over(s, v, f.w0, f.w1, s->slo_missed, f.B, out);
    } else {
        terms_over(s, v, 0, -1, 0, f.B, out);
    }
    finish_verdict(&f, out);
    return 0;
}

/* ---- stored form ---- */

static json_t *jnum(double v)
{
    return isfinite(v) ? json_real(v) : isinf(v) ? json_string(v > 0 ? "inf" : "-inf") : json_null();
}

static double jget(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    if (json_is_number(v))
        return json_number_value(v);
    const char *s = json_string_value(v);
    if (s && !strcmp(s, "inf"))
        return INFINITY;
    if (s && !strcmp(s, "-inf"))
        return -INFINITY;
    return NAN;
}

static json_t *trend_json(const st_trend *t, int g)
{
    json_t *o = json_object();
    json_object_set_new(o, "slope", jnum(t->slope));
    json_object_set_new(o, "se", jnum(t->se));
    json_object_set_new(o, "t", jnum(t->t));
    json_object_set_new(o, "p", jnum(t->p_growth));
    json_object_set_new(o, "batches", json_integer(t->batches));
    json_object_set_new(o, "n", json_integer(t->n));
    json_object_set_new(o, "grows", json_boolean(g));
    return o;
}

static void trend_from(json_t *o, st_trend *t, int *g)
{
    trend_none(t);
    if (!json_is_object(o))
        return;
    t->slope = jget(o, "slope");
    t->se = jget(o, "se");
    t->t = jget(o, "t");
    t->p_growth = jget(o, "p");
    t->batches = (uint32_t)json_integer_value(json_object_get(o, "batches"));
    t->n = (uint32_t)json_integer_value(json_object_get(o, "n"));
    *g = json_is_true(json_object_get(o, "grows"));
}

char *st_sustain_to_json(const st_sustain *s, const st_sustain_result *r)
{
    json_t *o = json_object();
    json_object_set_new(o, "method", json_string(s->p.concurrency ? "closed-loop" : "sustained"));
    json_object_set_new(o, "verdict", json_string(st_verdict_name(r->verdict)));
    json_object_set_new(o, "confident", json_boolean(r->confident));
    json_object_set_new(o, "why", json_string(r->why));
    json_object_set_new(o, "concurrency", json_integer(s->p.concurrency));
    json_object_set_new(o, "offered_target_rps", jnum(s->p.offered_rps));
    json_object_set_new(o, "stopped_early", json_boolean(s->oversaturated || s->slo_missed));
    json_object_set_new(o, "ramp_s", jnum(r->ramp_s));
    json_object_set_new(o, "window_start_s", jnum(r->window_start_s));
    json_object_set_new(o, "window_end_s", jnum(r->window_end_s));
    json_object_set_new(o, "stop_s", jnum(r->stop_s));
    json_object_set_new(o, "engine_s", jnum(r->engine_s));
    json_object_set_new(o, "window_requests", json_integer(r->window_requests));
    json_object_set_new(o, "window_completed", json_integer(r->window_completed));
    json_object_set_new(o, "window_errors", json_integer(r->window_errors));
    json_object_set_new(o, "offered_rps", jnum(r->offered_rps));
    json_object_set_new(o, "delivered_rps", jnum(r->delivered_rps));
    json_object_set_new(o, "delivered_lo", jnum(r->delivered_lo));
    json_object_set_new(o, "delivered_hi", jnum(r->delivered_hi));
    json_object_set_new(o, "run_delivered_rps", jnum(r->run_delivered_rps));
    json_object_set_new(o, "output_tps", jnum(r->output_tps));
    json_object_set_new(o, "output_tokens_mean", jnum(r->out_tokens_mean));
    json_object_set_new(o, "e2e_median_s", jnum(r->e2e_med_s));
    json_object_set_new(o, "inflight_mean", jnum(r->inflight_mean));
    json_object_set_new(o, "inflight_max", jnum(r->inflight_max));
    json_t *g = json_object();
    json_object_set_new(g, "inflight", trend_json(&r->inflight, r->grows_inflight));
    json_object_set_new(g, "ttft", trend_json(&r->ttft, r->grows_ttft));
    json_object_set_new(g, "waiting", trend_json(&r->waiting, r->grows_waiting));
    json_object_set_new(o, "growth", g);
    json_t *ts = json_array();
    for (int i = 0; i < r->n_terms; i++) {
        const st_sustain_term *t = &r->term[i];
        json_t *x = json_object();
        json_object_set_new(x, "value_ms", jnum(t->value_ms));
        json_object_set_new(x, "ci_ms", json_pack("[oo]", jnum(t->lo_ms), jnum(t->hi_ms)));
        json_object_set_new(x, "n", json_integer(t->ex.n));
        json_object_set_new(x, "above", json_integer(t->ex.k));
        json_object_set_new(x, "fraction_above", jnum(t->ex.frac));
        json_object_set_new(x, "fraction_se", jnum(t->ex.se));
        json_object_set_new(x, "fraction_dof", jnum(t->ex.dof));
        json_object_set_new(x, "margin", jnum(t->margin));
        json_object_set_new(x, "holds", json_boolean(t->holds));
        json_object_set_new(x, "confident", json_boolean(t->sure));
        json_array_append_new(ts, x);
    }
    json_object_set_new(o, "terms", ts);
    json_object_set_new(o, "binding_term", json_integer(r->binding));
    json_object_set_new(o, "worst_ratio", jnum(r->worst_ratio));
    char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    json_decref(o);
    return text;
}

int st_sustain_from_json(const char *text, st_sustain_result *r)
{
    memset(r, 0, sizeof *r);
    json_t *o = text ? json_loads(text, 0, NULL) : NULL;
    const char *m = json_string_value(json_object_get(o, "method"));
    if (!o || !m || (strcmp(m, "sustained") && strcmp(m, "closed-loop"))) {
        json_decref(o);
        return -1;
    }
    r->verdict = st_verdict_from_name(json_string_value(json_object_get(o, "verdict")));
    r->confident = json_is_true(json_object_get(o, "confident"));
    const char *why = json_string_value(json_object_get(o, "why"));
    snprintf(r->why, sizeof r->why, "%s", why ? why : "");
    r->ramp_s = jget(o, "ramp_s");
    r->window_start_s = jget(o, "window_start_s");
    r->window_end_s = jget(o, "window_end_s");
    r->stop_s = jget(o, "stop_s");
    r->engine_s = jget(o, "engine_s");
    r->window_requests = (uint32_t)json_integer_value(json_object_get(o, "window_requests"));
    r->window_completed = (uint32_t)json_integer_value(json_object_get(o, "window_completed"));
    r->window_errors = (uint32_t)json_integer_value(json_object_get(o, "window_errors"));
    r->offered_rps = jget(o, "offered_rps");
    r->delivered_rps = jget(o, "delivered_rps");
    r->delivered_lo = jget(o, "delivered_lo");
    r->delivered_hi = jget(o, "delivered_hi");
    r->run_delivered_rps = jget(o, "run_delivered_rps");
    r->output_tps = jget(o, "output_tps");
    r->out_tokens_mean = jget(o, "output_tokens_mean");
    r->e2e_med_s = jget(o, "e2e_median_s");
    r->inflight_mean = jget(o, "inflight_mean");
    r->inflight_max = jget(o, "inflight_max");
    json_t *g = json_object_get(o, "growth");
    trend_from(json_object_get(g, "inflight"), &r->inflight, &r->grows_inflight);
    trend_from(json_object_get(g, "ttft"), &r->ttft, &r->grows_ttft);
    trend_from(json_object_get(g, "waiting"), &r->waiting, &r->grows_waiting);
    json_t *ts = json_object_get(o, "terms");
    r->n_terms = 0;
    for (size_t i = 0; i < json_array_size(ts) && i < ST_SLO_MAX_TERMS; i++) {
        json_t *x = json_array_get(ts, i);
        st_sustain_term *t = &r->term[r->n_terms++];
        t->value_ms = jget(x, "value_ms");
        json_t *ci = json_object_get(x, "ci_ms");
        t->lo_ms = json_is_number(json_array_get(ci, 0)) ? json_number_value(json_array_get(ci, 0)) : NAN;
        t->hi_ms = json_is_number(json_array_get(ci, 1)) ? json_number_value(json_array_get(ci, 1)) : NAN;
        t->ex.n = (uint32_t)json_integer_value(json_object_get(x, "n"));
        t->ex.k = (uint32_t)json_integer_value(json_object_get(x, "above"));
        t->ex.frac = jget(x, "fraction_above");
        t->ex.se = jget(x, "fraction_se");
        t->ex.dof = jget(x, "fraction_dof");
        t->margin = jget(x, "margin");
        t->holds = json_is_true(json_object_get(x, "holds"));
        t->sure = json_is_true(json_object_get(x, "confident"));
    }
    r->binding = (int)json_integer_value(json_object_get(o, "binding_term"));
    if (!json_is_integer(json_object_get(o, "binding_term")))
        r->binding = -1;
    r->worst_ratio = jget(o, "worst_ratio");
    json_decref(o);
    return 0;
}

void st_sustain_rate_result(const st_sustain_result *r, double rate, st_rate_result *out)
{
    memset(out, 0, sizeof *out);
    out->rate = rate;
    out->verdict = r->verdict;
    out->worst_ratio = r->worst_ratio;
    out->delivered_rps = r->delivered_rps;
    out->output_tps = r->output_tps;
    out->out_tokens_mean = r->out_tokens_mean;
    out->sustained_rps = r->delivered_rps;
    out->sustained = 1;
    out->confident = r->confident;
    out->stopped_early = r->verdict == ST_VERDICT_OVERSAT || (r->verdict == ST_VERDICT_FAIL && isnan(r->window_end_s));
    out->engine_s = r->engine_s;
    out->run_delivered_rps = r->run_delivered_rps;
    out->n_terms = r->n_terms;
    for (int i = 0; i < r->n_terms && i < ST_SLO_MAX_TERMS; i++) {
        out->value_ms[i] = r->term[i].value_ms;
        out->lo_ms[i] = r->term[i].lo_ms;
        out->hi_ms[i] = r->term[i].hi_ms;
        out->ex[i] = r->term[i].ex;
    }
}

void st_sustain_row_result(const st_run_row *w, st_rate_result *out)
{
    st_sustain_result sr;
    if (w->summary_json && st_sustain_from_json(w->summary_json, &sr) == 0) {
        st_sustain_rate_result(&sr, w->rate, out);
    } else {
        memset(out, 0, sizeof *out);
        out->rate = w->rate;
        out->verdict = st_verdict_from_name(w->verdict);
        out->worst_ratio = w->worst_ratio;
        out->delivered_rps = w->delivered_rps;
        out->output_tps = w->output_tps;
        out->out_tokens_mean = NAN;
        out->sustained_rps = w->sustained_rps;
    }
    out->requests = w->sent;
    out->grid = w->grid;
}
