#include "load/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

double st_percentile_sorted(const double *sorted, uint32_t n, double p)
{
    if (!sorted || n == 0 || isnan(p))
        return NAN;
    if (p < 0)
        p = 0;
    if (p > 100)
        p = 100;
    double h = (double)(n - 1) * p / 100.0;
    double lo = floor(h);
    uint32_t i = (uint32_t)lo;
    if (i >= n - 1)
        return sorted[n - 1];
    return sorted[i] + (h - lo) * (sorted[i + 1] - sorted[i]);
}

/* Quickselect: reorders v[lo..hi) so that v[k] holds the value of rank k, smaller or equal
 * values before it and greater or equal after it. */
static void select_rank(double *v, uint32_t lo, uint32_t hi, uint32_t k)
{
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        /* the median of three values of the range as the pivot */
        double a = v[lo], b = v[mid], c = v[hi - 1];
        double piv = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        /* three ways: [lo, lt) < piv, [lt, gt) == piv, [gt, hi) > piv; the middle part holds the
         * pivot itself, so each pass shrinks the range */
        uint32_t lt = lo, i = lo, gt = hi;
        while (i < gt) {
            double x = v[i];
            if (x < piv) {
                v[i++] = v[lt];
                v[lt++] = x;
            } else if (x > piv) {
                v[i] = v[--gt];
                v[gt] = x;
            } else {
                i++;
            }
        }
        if (k < lt)
            hi = lt;
        else if (k >= gt)
            lo = gt;
        else
            return;
    }
}

/* Above this many values, percentiles come from selection (linear) instead of a full sort. */
#define DIST_SELECT_MIN 256u

/* The pct-th percentile (type 7) of v[0..m) by selection; *from is the lowest rank still
 * unordered (percentiles must be asked in increasing order). */
static double pct_select(double *v, uint32_t m, double pct, uint32_t *from)
{
    double h = (double)(m - 1) * pct / 100.0;
    uint32_t i = (uint32_t)floor(h);
    if (i >= m - 1) {
        select_rank(v, *from, m, m - 1);
        *from = m - 1;
        return v[m - 1];
    }
    select_rank(v, *from, m, i);
    double next = v[i + 1];
    for (uint32_t j = i + 2; j < m; j++)
        if (v[j] < next)
            next = v[j];
    *from = i + 1;
    return v[i] + (h - floor(h)) * (next - v[i]);
}

void st_dist_compute(double *vals, uint32_t n, st_dist *out)
{
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++)
        if (!isnan(vals[i]))
            vals[m++] = vals[i];
    /* Keep the caller's array whole: the NaNs go after the values. */
    for (uint32_t i = m; i < n; i++)
        vals[i] = NAN;
    out->n = m;
    if (m == 0) {
        out->mean = out->min = out->p50 = out->p90 = out->p95 = out->p99 = out->max = NAN;
        return;
    }
    double sum = 0, mn = vals[0], mx = vals[0];
    for (uint32_t i = 0; i < m; i++) {
        sum += vals[i];
        mn = vals[i] < mn ? vals[i] : mn;
        mx = vals[i] > mx ? vals[i] : mx;
    }
    out->mean = sum / m;
    out->min = mn;
    out->max = mx;
    if (m < DIST_SELECT_MIN) {
        qsort(vals, m, sizeof *vals, st_cmp_double);
        out->p50 = st_percentile_sorted(vals, m, 50);
        out->p90 = st_percentile_sorted(vals, m, 90);
        out->p95 = st_percentile_sorted(vals, m, 95);
        out->p99 = st_percentile_sorted(vals, m, 99);
    } else {
        uint32_t from = 0;
        out->p50 = pct_select(vals, m, 50, &from);
        out->p90 = pct_select(vals, m, 90, &from);
        out->p95 = pct_select(vals, m, 95, &from);
        out->p99 = pct_select(vals, m, 99, &from);
    }
}

static int term_set(double v) { return v > 0 && !isnan(v); }

int st_slo_met(const st_record *r, const st_slo *slo)
{
    if (r->status != ST_REQ_OK)
        return 0;
    if (!slo)
        return 1;
    if (term_set(slo->ttft_s)) {
        double v = st_record_ttft(r);
        if (isnan(v) || v > slo->ttft_s)
            return 0;
    }
    if (term_set(slo->tpot_s)) {
        double v = st_record_tpot(r);
        if (!isnan(v) && v > slo->tpot_s)
            return 0;
    }
    if (term_set(slo->ttfat_s)) {
        double v = st_record_ttfat(r);
        if (isnan(v) || v > slo->ttfat_s)
            return 0;
    }
    if (term_set(slo->e2e_s)) {
        double v = st_record_e2e(r);
        if (isnan(v) || v > slo->e2e_s)
            return 0;
    }
    return 1;
}

static int in_win(st_ns t, st_ns a, st_ns b) { return t >= a && t <= b; }

static double rate_over(uint32_t n, st_ns lo, st_ns hi)
{
    if (n < 2)
        return NAN;
    if (hi <= lo)
        return INFINITY;
    return (double)(n - 1) / st_ns_to_s(hi - lo);
}

static double per_s(double x, double dur) { return dur > 0 ? x / dur : NAN; }

static double srv_prompt_s(const st_record *r) { return r->srv_prompt >= 0 ? st_ns_to_s(r->srv_prompt) : NAN; }

/* What computing a summary works with: the records, their bounds and the scratch arrays. */
typedef struct summary_ctx {
    const st_record *recs;
    uint32_t n;
    const st_slo *slo;
    st_ns sched_lo, sched_hi, sent_lo, sent_hi, end_hi;
    uint64_t itl_n; /* inter-token gaps of the completed requests */
    double *vals;   /* one figure per measured request */
    double *itl;    /* one per inter-token gap */
} summary_ctx;

/* The counts, the time bounds, the token totals and the rates over the run. */
static void summary_counts(summary_ctx *c, st_summary *s)
{
    c->sched_lo = c->sent_lo = INT64_MAX;
    c->sched_hi = c->sent_hi = c->end_hi = INT64_MIN;
    for (uint32_t i = 0; i < c->n; i++) {
        const st_record *r = &c->recs[i];
        if (r->warmup) {
            s->warmup++;
            continue;
        }
        s->measured++;
        if ((unsigned)r->status < ST_REQ__COUNT)
            s->by_status[r->status]++;
        if (r->scheduled < c->sched_lo)
            c->sched_lo = r->scheduled;
        if (r->scheduled > c->sched_hi)
            c->sched_hi = r->scheduled;
        if (r->sent >= 0) {
            s->sent++;
            if (r->sent < c->sent_lo)
                c->sent_lo = r->sent;
            if (r->sent > c->sent_hi)
                c->sent_hi = r->sent;
        }
        if (r->end >= 0 && r->end > c->end_hi)
            c->end_hi = r->end;
        if (r->status == ST_REQ_OK) {
            s->completed++;
            s->input_tokens += r->input_tokens;
            s->output_tokens += r->output_tokens;
            s->cached_tokens += r->cached_tokens;
            if (r->output_tokens < r->output_requested)
                s->output_requested_short++;
            if (r->n_events > 1)
                c->itl_n += r->n_events - 1;
            s->reasoning_tokens += r->reasoning_tokens;
            if (r->prompt_reported) {
                s->prompt_reported += r->prompt_reported;
                s->prompt_requested += r->input_tokens;
                s->prompt_reported_n++;
            }
            if (st_slo_met(r, c->slo))
                s->good++;
        }
    }
    s->failed = s->measured - s->completed;
    s->first_send_s = s->sent ? st_ns_to_s(c->sent_lo) : NAN;
    s->last_end_s = c->end_hi >= 0 ? st_ns_to_s(c->end_hi) : NAN;
    s->duration_s = (s->sent && c->end_hi >= 0 && c->end_hi > c->sent_lo) ? st_ns_to_s(c->end_hi - c->sent_lo) : NAN;
    s->offered_rate = rate_over(s->measured, c->sched_lo, c->sched_hi);
    s->achieved_rate = rate_over(s->sent, c->sent_lo, c->sent_hi);
    double dur = s->duration_s;
    s->request_throughput = per_s(s->completed, dur);
    s->input_throughput = per_s((double)s->input_tokens, dur);
    s->output_throughput = per_s((double)s->output_tokens, dur);
    s->total_token_throughput = per_s((double)(s->input_tokens + s->output_tokens), dur);
    s->goodput = per_s(s->good, dur);
}

/* One figure of each completed request into c->vals (win: only those that ended in the steady window). */
static uint32_t summary_collect(summary_ctx *c, int win, double (*fig)(const st_record *))
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < c->n; i++) {
        const st_record *r = &c->recs[i];
        if (r->warmup || r->status != ST_REQ_OK || (win && !in_win(r->end, c->sched_lo, c->sched_hi)))
            continue;
        c->vals[k++] = fig(r);
    }
    return k;
}

/* The latency distributions over the whole run (win = 0) or the steady window (win = 1). */
static void summary_dists(summary_ctx *c, st_summary *s, int win)
{
    st_window *w = &s->steady;
    st_ns ws = c->sched_lo, we = c->sched_hi;
    st_dist *d_ttft = win ? &w->ttft : &s->ttft, *d_tpot = win ? &w->tpot : &s->tpot;
    st_dist *d_e2e = win ? &w->e2e : &s->e2e, *d_lag = win ? &w->lag : &s->lag;
    st_dist *d_itl = win ? &w->itl : &s->itl;
    /* Completed requests (in the window: those that ended inside it). */
    st_dist_compute(c->vals, summary_collect(c, win, st_record_ttft), d_ttft);
    st_dist_compute(c->vals, summary_collect(c, win, st_record_tpot), d_tpot);
    st_dist_compute(c->vals, summary_collect(c, win, st_record_e2e), d_e2e);
    if (!win) /* NAN (no answer token) is left out */
        st_dist_compute(c->vals, summary_collect(c, win, st_record_ttfat), &s->ttfat);
    uint32_t k = 0;
    for (uint32_t i = 0; i < c->n; i++) {
        const st_record *r = &c->recs[i];
        if (r->warmup || r->sent < 0 || (win && !in_win(r->sent, ws, we)))
            continue;
        c->vals[k++] = st_record_lag(r);
    }
    st_dist_compute(c->vals, k, d_lag);
    uint64_t q = 0;
    for (uint32_t i = 0; i < c->n; i++) {
        const st_record *r = &c->recs[i];
        st_event_it it;
        st_ns prev, t;
        st_events_begin(&it, r);
        if (r->warmup || r->status != ST_REQ_OK || !st_events_next(&it, &prev))
            continue;
        for (; q < c->itl_n && st_events_next(&it, &t); prev = t)
            if (!win || (in_win(prev, ws, we) && in_win(t, ws, we)))
                c->itl[q++] = st_ns_to_s(t - prev);
    }
    st_dist_compute(c->itl, q > UINT32_MAX ? UINT32_MAX : (uint32_t)q, d_itl);
}

/* Server-reported timings and draft counts: the figures are NAN for requests without them (skipped). */
static void summary_server(summary_ctx *c, st_summary *s)
{
    double (*const srv_fn[4])(const st_record *) = { srv_prompt_s, st_record_srv_tpot, st_record_srv_ttft_gap,
                                                     st_record_srv_tpot_gap };
    st_dist *srv_d[4] = { &s->srv_prompt, &s->srv_tpot, &s->srv_ttft_gap, &s->srv_tpot_gap };
    for (int f = 0; f < 4; f++) {
        uint32_t k = 0;
        for (uint32_t i = 0; i < c->n; i++)
            if (!c->recs[i].warmup && c->recs[i].status == ST_REQ_OK)
                c->vals[k++] = srv_fn[f](&c->recs[i]);
        st_dist_compute(c->vals, k, srv_d[f]);
    }
    for (uint32_t i = 0; i < c->n; i++) {
        const st_record *r = &c->recs[i];
        if (!r->warmup && r->status == ST_REQ_OK && r->has_draft) {
            s->srv_draft_requests++;
            s->srv_draft_tokens += r->srv_draft_n;
            s->srv_draft_accepted += r->srv_draft_accepted;
        }
    }
}

/* The steady window's counts and rates (NAN when there is none). */
static void summary_window(summary_ctx *c, st_summary *s)
{
    st_window *w = &s->steady;
    st_ns ws = c->sched_lo, we = c->sched_hi;
    if (!w->valid) {
        w->start_s = w->end_s = w->duration_s = NAN;
        w->request_throughput = w->input_throughput = w->output_throughput = w->goodput = NAN;
        st_dist_compute(c->vals, 0, &w->ttft);
        w->tpot = w->itl = w->e2e = w->lag = w->ttft;
        return;
    }
    w->start_s = st_ns_to_s(ws);
    w->end_s = st_ns_to_s(we);
    w->duration_s = st_ns_to_s(we - ws);
    for (uint32_t i = 0; i < c->n; i++) {
        const st_record *r = &c->recs[i];
        if (r->warmup)
            continue;
        int ended_in = r->end >= 0 && in_win(r->end, ws, we);
        if (r->status != ST_REQ_OK) {
            w->failed += ended_in;
            continue;
        }
        if (ended_in) {
            w->completed++;
            w->input_tokens += r->input_tokens;
            if (st_slo_met(r, c->slo))
                w->good++;
        }
        /* Output tokens produced inside the window, spread evenly over the events. */
        if (r->n_events > 0) {
            uint32_t inside = 0;
            st_event_it it;
            st_ns t;
            st_events_begin(&it, r);
            while (st_events_next(&it, &t))
                inside += in_win(t, ws, we);
            w->output_tokens += (double)r->output_tokens * inside / r->n_events;
        } else if (ended_in) {
            w->output_tokens += r->output_tokens;
        }
    }
    w->request_throughput = per_s(w->completed, w->duration_s);
    w->input_throughput = per_s((double)w->input_tokens, w->duration_s);
    w->output_throughput = per_s(w->output_tokens, w->duration_s);
    w->goodput = per_s(w->good, w->duration_s);
}

int st_summary_compute(const st_record *recs, uint32_t n, const st_summary_opts *opts, st_summary *s)
{
    static const st_summary_opts none;
    if (!opts)
        opts = &none;
    memset(s, 0, sizeof *s);
    s->total = n;
    const st_slo *slo = &opts->slo;
    s->slo_set = term_set(slo->ttft_s) || term_set(slo->tpot_s) || term_set(slo->e2e_s) || term_set(slo->ttfat_s);
    summary_ctx c = { .recs = recs, .n = n, .slo = slo };
    summary_counts(&c, s);

    uint32_t m = s->measured ? s->measured : 1;
    c.vals = malloc(m * sizeof *c.vals);
    c.itl = malloc((c.itl_n ? c.itl_n : 1) * sizeof *c.itl);
    if (!c.vals || !c.itl) {
        free(c.vals);
        free(c.itl);
        return -1;
    }
    /* the steady window: from the first scheduled send to the last */
    s->steady.valid = s->measured >= 2 && c.sched_hi > c.sched_lo;
    /* Two passes per distribution: the whole run (win = 0), then the steady window. */
    for (int win = 0; win < 2; win++) {
        if (win && !s->steady.valid)
            break;
        summary_dists(&c, s, win);
    }
    summary_server(&c, s);
    summary_window(&c, s);
    s->client_limited = opts->max_lag_p99_s > 0 && s->lag.n > 0 && s->lag.p99 > opts->max_lag_p99_s;
    free(c.vals);
    free(c.itl);
    return 0;
}
