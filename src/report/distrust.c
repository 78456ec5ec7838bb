/* Reasons to distrust the headline's comparison, said first (report/distrust.h). */
#include "report/distrust.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report/format.h"
#include "report/notes.h"
#include "report/report.h"

/* The notes of kind about configuration name: how many, and the rates they concern (first few). */
static int notes_of(const st_report *r, const char *kind, const char *name)
{
    int n = 0;
    for (int i = 0; i < r->notes.n; i++) {
        const st_note *x = &r->notes.v[i];
        n += x->kind && !strcmp(x->kind, kind) && x->config && !strcmp(x->config, name);
    }
    return n;
}

static int host_limited(const st_report *r, const st_rep_cfg *c)
{
    return c && (notes_of(r, "client_limited", c->name) || notes_of(r, "emulator_lagged", c->name));
}

/* The run at c's lowest measured rate, or NULL. */
static const st_run_row *lowest_run(const st_rep_cfg *c)
{
    const st_run_row *lo = NULL;
    for (int j = 0; j < c->n_runs; j++) {
        const st_run_row *w = &c->runs[j];
        if (!w->verdict || !strcmp(w->verdict, "skipped") || !strcmp(w->verdict, "error"))
            continue;
        if (!lo || w->rate < lo->rate)
            lo = w;
    }
    return lo;
}

/* Requests that failed at c's lowest rate for reasons load does not cause: refused (an HTTP
 * error status), a malformed answer or an error in the stream, no connection. Timeouts, resets
 * and aborts may come from load and are not counted. Without the run's records: its failed count
 * when it was not stopped early. */
static uint32_t failed_unloaded(const st_rep_cfg *c, const st_run_row **at)
{
    *at = lowest_run(c);
    if (!*at)
        return 0;
    int j = (int)(*at - c->runs);
    const st_notes_run *d = c->digest ? &c->digest[j] : NULL;
    if (d && d->has_records)
        return d->by_status[ST_REQ_HTTP_STATUS] + d->by_status[ST_REQ_MALFORMED] + d->by_status[ST_REQ_STREAM_ERROR] +
               d->by_status[ST_REQ_CONNECT] + d->by_status[ST_REQ_TLS];
    return (*at)->stopped_early ? 0 : (*at)->failed;
}

/* Both sustained intervals known and overlapping, or the same burst capacity. */
static int ties(const st_report *r, const st_rep_cfg *a, const st_rep_cfg *b)
{
    if (a->status != ST_REP_OK || b->status != ST_REP_OK || !a->cap || !b->cap)
        return 0;
    if (r->sustained && !r->spec.closed_loop) {
        double alo = a->cap->ci_lo, ahi = a->cap->ci_hi, blo = b->cap->ci_lo, bhi = b->cap->ci_hi;
        if (!isfinite(alo) || !isfinite(blo) || isnan(ahi) || isnan(bhi))
            return 0;
        /* a rate that failed bounds the limit from above, whatever the interval says */
        if (isfinite(a->cap->fail_rate) && a->cap->fail_rate < ahi)
            ahi = a->cap->fail_rate;
        if (isfinite(b->cap->fail_rate) && b->cap->fail_rate < bhi)
            bhi = b->cap->fail_rate;
        return alo < bhi && blo < ahi;
    }
    /* a burst test: both limits in the same interval of the grid (the same highest passing and
     * lowest failing rates); their delivered figures then differ by noise */
    return a->cap->pass_rate == b->cap->pass_rate &&
           (a->cap->fail_rate == b->cap->fail_rate || (isnan(a->cap->fail_rate) && isnan(b->cap->fail_rate)));
}

int st_report_named_pick(const st_report *r)
{
    if (r->pick < 0)
        return -1;
    st_distrust d;
    st_report_distrust_find(r, &d);
    return d.host || d.tie || d.failed ? -1 : r->pick;
}

void st_report_distrust_find(const st_report *r, st_distrust *d)
{
    memset(d, 0, sizeof *d);
    if (r->n_cfg < 1)
        return;
    const st_rep_cfg *base = &r->cfg[0], *p = r->pick >= 0 ? &r->cfg[r->pick] : NULL;
    d->host = host_limited(r, base) || host_limited(r, p);
    d->tie = p && p != base && ties(r, p, base);
    const st_run_row *at;
    d->failed = failed_unloaded(base, &at) > 0 || (p && failed_unloaded(p, &at) > 0);
}

static void interval(const st_report *r, const st_rep_cfg *c, st_buf *b)
{
    char l[32], h[32];
    st_fmt_num(l, sizeof l, c->cap->ci_lo);
    st_fmt_num(h, sizeof h, c->cap->ci_hi);
    if (isinf(c->cap->ci_hi))
        st_buf_printf(b, "at least %s", l);
    else
        st_buf_printf(b, "%s-%s", l, h);
    (void)r;
}

/* Each configuration's figure, in the spec's order, without a ranking. */
static void figures(const st_report *r, st_buf *b)
{
    st_buf_puts(b, " The figures, not a ranking:");
    int k = 0;
    for (int i = 0; i < r->n_cfg; i++) {
        const st_rep_cfg *c = &r->cfg[i];
        st_buf_printf(b, "%s %s%s ", k++ ? ";" : "", c->name, i == 0 ? " (the current setup)" : "");
        if (c->status != ST_REP_OK || !c->cap) {
            st_buf_printf(b, "%s",
                          c->status == ST_REP_NONE_PASSED ? "met the SLO at no tested rate"
                          : c->status == ST_REP_FAILED    ? "failed"
                                                          : "was not measured");
            continue;
        }
        char a[32], y[32];
        st_fmt_num(a, sizeof a, c->cap->capacity_rps);
        st_fmt_usd(y, sizeof y, c->cost.usd_per_1m);
        st_buf_printf(b, "%s requests/s within the SLO", a);
        if (r->sustained && !r->spec.closed_loop && isfinite(c->cap->ci_lo) && !isnan(c->cap->ci_hi)) {
            st_buf_puts(b, " (its limit ");
            interval(r, c, b);
            st_buf_printf(b, " at %.0f %% confidence)", r->spec.search.confidence * 100);
        }
        st_buf_printf(b, ", %s per million output tokens", y);
    }
    st_buf_puts(b, ".");
}

void st_report_distrust_lead(const st_report *r, const st_distrust *d, st_buf *b)
{
    if (!d->host && !d->tie && !d->failed)
        return;
    const st_rep_cfg *base = &r->cfg[0], *p = r->pick >= 0 ? &r->cfg[r->pick] : NULL;
    st_buf_puts(b, "No winner is named: ");
    int k = 0;
    if (d->host) {
        st_buf_puts(b, "this host limited the measurement (");
        int m = 0;
        for (int i = 0; i < r->n_cfg; i++) {
            const st_rep_cfg *c = &r->cfg[i];
            int cl = notes_of(r, "client_limited", c->name), el = notes_of(r, "emulator_lagged", c->name);
            if (!cl && !el)
                continue;
            st_buf_printf(b, "%s%s: %s%s%s", m++ ? "; " : "", c->name,
                          cl ? "the load generator lagged its schedule" : "", cl && el ? ", " : "",
                          el ? "the emulator fell behind its model" : "");
        }
        st_buf_puts(b, "), so the figures are partly the host's, not the server's: a difference between "
                       "configurations may come from the lag (rerun on an idle host, at a lower --time-scale, or "
                       "with servetune predict, which has no host in its figures)");
        k++;
    }
    if (d->tie && p) {
        st_buf_printf(b, "%s%s and the current setup (%s) tie within their intervals (", k ? "; " : "", p->name,
                      base->name);
        if (r->sustained && !r->spec.closed_loop) {
            interval(r, p, b);
            st_buf_puts(b, " against ");
            interval(r, base, b);
            st_buf_printf(b, " requests/s at %.0f %% confidence", r->spec.search.confidence * 100);
        } else {
            char a[32], f[32];
            st_fmt_num(a, sizeof a, p->cap->pass_rate);
            st_fmt_num(f, sizeof f, p->cap->fail_rate);
            st_buf_printf(b, "both passed %s req/s", a);
            if (isfinite(p->cap->fail_rate))
                st_buf_printf(b, " and failed %s req/s", f);
            st_buf_puts(b, ": the grid cannot tell them apart");
        }
        st_buf_puts(b, "): the audit cannot tell which serves more");
        k++;
    }
    if (d->failed) {
        for (int i = 0; i < r->n_cfg; i++) {
            const st_rep_cfg *c = &r->cfg[i];
            if (c != base && c != p)
                continue;
            const st_run_row *at;
            uint32_t f = failed_unloaded(c, &at);
            if (!f)
                continue;
            char rate[32];
            st_fmt_num(rate, sizeof rate, at->rate);
            st_buf_printf(b,
                          "%s%s's requests failed even at its lowest rate (%s req/s: %u of %u, refused or broken "
                          "rather than slow): failures that load does not cause decide its verdict, not its speed",
                          k ? "; " : "", c->name, rate, f, at->planned);
            k++;
        }
    }
    st_buf_puts(b, ".");
    figures(r, b);
}
