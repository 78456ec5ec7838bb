#include "audit/capacity.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const char *st_verdict_name(st_verdict v)
{
    switch (v) {
    case ST_VERDICT_PASS: return "pass";
    case ST_VERDICT_FAIL: return "fail";
    case ST_VERDICT_SKIPPED: return "skipped";
    case ST_VERDICT_ERROR: return "error";
    }
    return "unknown";
}

st_verdict st_verdict_from_name(const char *name)
{
    for (int v = ST_VERDICT_PASS; v <= ST_VERDICT_ERROR; v++)
        if (name && !strcmp(name, st_verdict_name((st_verdict)v)))
            return (st_verdict)v;
    return ST_VERDICT_ERROR;
}

static void upper(char *dst, size_t n, const char *s)
{
    size_t i;
    for (i = 0; s[i] && i + 1 < n; i++)
        dst[i] = (char)(s[i] >= 'a' && s[i] <= 'z' ? s[i] - 32 : s[i]);
    dst[i] = '\0';
}

void st_capacity_verdict(const st_audit_slo *slo, const st_rate_figures *f, st_verdict_info *out)
{
    memset(out, 0, sizeof *out);
    out->term = -1;
    out->worst_ratio = 0;
    for (int i = 0; i < slo->n; i++) {
        double v = f->value_ms[i];
        if (!isfinite(v) || !(slo->terms[i].max_ms > 0))
            continue;
        double ratio = v / slo->terms[i].max_ms;
        if (out->term < 0 || ratio > out->worst_ratio) {
            out->worst_ratio = ratio;
            out->term = i;
        }
    }
    int incomplete = f->completed < f->planned || f->failed > 0;
    int over = out->term >= 0 && out->worst_ratio > 1.0;
    /* A required term with no data (no request produced a first token) cannot pass. */
    int nodata = slo->n > 0 && !isfinite(f->value_ms[0]);
    if (!incomplete && !over && !nodata && f->completed > 0 && !f->stopped_early && !f->errors) {
        out->verdict = ST_VERDICT_PASS;
        if (out->term >= 0) {
            char m[8];
            upper(m, sizeof m, st_slo_metric_name(slo->terms[out->term].metric));
            snprintf(out->why, sizeof out->why, "all %u requests completed; tightest term p%g %s %.0f ms of %.0f ms",
                     f->completed, slo->terms[out->term].pct, m, f->value_ms[out->term], slo->terms[out->term].max_ms);
        } else {
            snprintf(out->why, sizeof out->why, "all %u requests completed", f->completed);
        }
        return;
    }
    out->verdict = ST_VERDICT_FAIL;
    const char *early = f->stopped_early ? "stopped early: " : "";
    if (f->errors) {
        snprintf(out->why, sizeof out->why, "%s%u of %u requests failed", early, f->errors, f->planned);
        out->worst_ratio = INFINITY; /* requests that fail fail the rate by any margin */
    } else if (over) {
        char m[8];
        upper(m, sizeof m, st_slo_metric_name(slo->terms[out->term].metric));
        if (f->stopped_early)
            snprintf(out->why, sizeof out->why,
                     "stopped early: p%g %s >= %.4g ms > %.4g ms (x%.2f) among the %u requests due",
                     slo->terms[out->term].pct, m, f->value_ms[out->term], slo->terms[out->term].max_ms,
                     out->worst_ratio, f->due);
        else
            snprintf(out->why, sizeof out->why, "p%g %s %.4g ms > %.4g ms (x%.2f)", slo->terms[out->term].pct, m,
                     f->value_ms[out->term], slo->terms[out->term].max_ms, out->worst_ratio);
    } else if (f->stopped_early) {
        snprintf(out->why, sizeof out->why, "stopped early: the SLO could no longer be met (%u of %u completed)",
                 f->completed, f->planned);
    } else if (incomplete) {
        uint32_t bad = f->planned > f->completed ? f->planned - f->completed : f->failed;
        snprintf(out->why, sizeof out->why, "%u of %u requests did not complete", bad, f->planned);
        out->worst_ratio = INFINITY;
    } else {
        snprintf(out->why, sizeof out->why, "no request produced a first token");
    }
}

uint32_t st_capacity_breach_threshold(uint32_t n, double pct)
{
    if (n == 0)
        return 1;
    double h = (double)(n - 1) * pct / 100.0;
    uint32_t lo = (uint32_t)floor(h + 1e-12);
    if (lo > n - 1)
        lo = n - 1;
    return n - lo;
}

int st_capacity_sure_fail(const st_audit_slo *slo, uint32_t planned, const uint32_t *breaches, uint32_t failed)
{
    if (failed > 0)
        return 1;
    for (int i = 0; i < slo->n; i++)
        if (breaches[i] >= st_capacity_breach_threshold(planned, slo->terms[i].pct))
            return 1;
    return 0;
}

/* ---- the search ---- */

static int tested(const st_rate_result *r, int n, double rate)
{
    for (int i = 0; i < n; i++) {
        if (r[i].rate == rate)
            return 1;
        if (isfinite(rate) && isfinite(r[i].rate) && fabs(r[i].rate - rate) <= 1e-9 * rate)
            return 1;
    }
    return 0;
}

static void fmt_rate(char *b, size_t n, double r)
{
    if (isinf(r))
        snprintf(b, n, "inf");
    else
        snprintf(b, n, "%.4g", r);
}

void st_capacity_next(const st_search_params *p, const st_rate_result *r, int n, st_next *out)
{
    memset(out, 0, sizeof *out);
    char a[32], b[32];
    /* Grid phase: the spec's rates in order. */
    for (int i = 0; i < p->n_rates; i++) {
        if (tested(r, n, p->rates[i]))
            continue;
        out->rate = p->rates[i];
        out->grid = 1;
        /* A measured failure by a wide margin, other than the first rate measured, skips it. */
        int first = -1;
        for (int j = 0; j < n; j++) {
            if (r[j].verdict != ST_VERDICT_PASS && r[j].verdict != ST_VERDICT_FAIL)
                continue;
            if (first < 0) {
                first = j;
                continue;
            }
            if (p->skip_margin > 0 && r[j].verdict == ST_VERDICT_FAIL && r[j].worst_ratio >= p->skip_margin &&
                r[j].rate < out->rate) {
                fmt_rate(a, sizeof a, out->rate);
                fmt_rate(b, sizeof b, r[j].rate);
                out->action = ST_NEXT_SKIP;
                if (isinf(r[j].worst_ratio))
                    snprintf(out->why, sizeof out->why, "skipped: requests failed at %s req/s", b);
                else
                    snprintf(out->why, sizeof out->why, "skipped: %s req/s already failed by x%.2f (margin x%.2g)", b,
                             r[j].worst_ratio, p->skip_margin);
                return;
            }
        }
        out->action = ST_NEXT_RUN;
        return;
    }
    if (p->mode != ST_SEARCH_REFINE) {
        out->action = ST_NEXT_STOP;
        snprintf(out->why, sizeof out->why, "all rates of the grid done");
        return;
    }
    /* Refine phase. */
    int refine_runs = 0;
    uint64_t refine_requests = 0;
    for (int i = 0; i < n; i++)
        if (!r[i].grid) {
            refine_runs++;
            refine_requests += r[i].requests;
        }
    out->action = ST_NEXT_STOP;
    st_capacity cap;
    st_capacity_compute(r, n, 0, &cap);
    if (!cap.has_pass) {
        snprintf(out->why, sizeof out->why, "refine: no rate passed, nothing to refine");
        return;
    }
    if (isinf(cap.pass_rate)) {
        snprintf(out->why, sizeof out->why, "refine: the unlimited rate passed");
        return;
    }
    double lo = cap.pass_rate, hi;
    if (!cap.has_fail_above) {
        hi = lo * 2;
    } else if (isinf(cap.fail_rate)) {
        /* The unlimited-rate run failed: what it delivered bounds what any rate can sustain. */
        double d = NAN;
        for (int i = 0; i < n; i++)
            if (isinf(r[i].rate))
                d = r[i].delivered_rps;
        if (!(d > lo)) {
            fmt_rate(a, sizeof a, lo);
            snprintf(out->why, sizeof out->why, "refine: the unlimited-rate run delivered %.4g req/s, not above %s", d,
                     a);
            return;
        }
        hi = d;
    } else {
        hi = cap.fail_rate;
    }
    if (cap.has_fail_above && (hi - lo) / lo <= p->tolerance) {
        fmt_rate(a, sizeof a, lo);
        fmt_rate(b, sizeof b, hi);
        snprintf(out->why, sizeof out->why, "refine: bracket [%s, %s] req/s within tolerance %.0f %%", a, b,
                 p->tolerance * 100);
        return;
    }
    if (refine_runs >= ST_REFINE_MAX_RUNS) {
        snprintf(out->why, sizeof out->why, "refine: stopped after %d added rates", refine_runs);
        return;
    }
    if (p->request_budget && refine_requests + p->requests_per_rate > p->request_budget) {
        snprintf(out->why, sizeof out->why, "refine: request budget spent (%llu of %u)",
                 (unsigned long long)refine_requests, p->request_budget);
        return;
    }
    double next = cap.has_fail_above ? (lo + hi) / 2 : hi;
    if (tested(r, n, next)) {
        snprintf(out->why, sizeof out->why, "refine: next rate already tested");
        return;
    }
    out->action = ST_NEXT_RUN;
    out->rate = next;
    out->grid = 0;
    fmt_rate(a, sizeof a, lo);
    fmt_rate(b, sizeof b, hi);
    if (cap.has_fail_above)
        snprintf(out->why, sizeof out->why, "refine: bisect [%s, %s] req/s", a, b);
    else
        snprintf(out->why, sizeof out->why, "refine: highest rate %s passed, extend upward", a);
}

void st_capacity_compute(const st_rate_result *r, int n, int grid_only, st_capacity *out)
{
    memset(out, 0, sizeof *out);
    out->pass_index = -1;
    out->capacity_rps = out->output_tps = out->sustained_rps = NAN;
    out->pass_rate = out->fail_rate = NAN;
    int first = -1;
    for (int i = 0; i < n; i++) {
        if (grid_only && !r[i].grid)
            continue;
        if (r[i].verdict == ST_VERDICT_SKIPPED)
            continue;
        out->n_measured++;
        if (first < 0)
            first = i;
        if (r[i].verdict == ST_VERDICT_PASS && (!out->has_pass || r[i].rate > out->pass_rate)) {
            out->has_pass = 1;
            out->pass_rate = r[i].rate;
            out->pass_index = i;
        }
    }
    if (!out->has_pass)
        return;
    const st_rate_result *pr = &r[out->pass_index];
    out->capacity_rps = pr->delivered_rps;
    out->output_tps = pr->output_tps;
    out->sustained_rps = pr->sustained_rps;
    for (int i = 0; i < n; i++) {
        if ((grid_only && !r[i].grid) || r[i].verdict == ST_VERDICT_SKIPPED || r[i].verdict == ST_VERDICT_PASS)
            continue;
        if (r[i].rate > out->pass_rate) {
            if (!out->has_fail_above || r[i].rate < out->fail_rate) {
                out->has_fail_above = 1;
                out->fail_rate = r[i].rate;
            }
        } else if (r[i].verdict == ST_VERDICT_FAIL) {
            out->non_monotonic = 1;
        }
    }
    out->highest_tested_passed = !out->has_fail_above;
    if (first >= 0 && r[first].verdict == ST_VERDICT_FAIL && out->pass_rate > r[first].rate)
        out->warmup_effect = 1;
}
