#include "audit/capacity.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *st_verdict_name(st_verdict v)
{
    switch (v) {
    case ST_VERDICT_PASS: return "pass";
    case ST_VERDICT_FAIL: return "fail";
    case ST_VERDICT_SKIPPED: return "skipped";
    case ST_VERDICT_ERROR: return "error";
    case ST_VERDICT_OVERSAT: return "oversaturated";
    case ST_VERDICT_UNDECIDED: return "undecided";
    }
    return "unknown";
}

const char *st_verdict_words(st_verdict v, int sustained)
{
    switch (v) {
    case ST_VERDICT_PASS: return sustained ? "sustained" : "pass (burst)";
    case ST_VERDICT_FAIL: return sustained ? "SLO missed" : "fail (burst)";
    case ST_VERDICT_SKIPPED: return "skipped";
    case ST_VERDICT_ERROR: return "error";
    case ST_VERDICT_OVERSAT: return "over-saturated";
    case ST_VERDICT_UNDECIDED: return "undecided";
    }
    return "unknown";
}

st_verdict st_verdict_from_name(const char *name)
{
    for (int v = ST_VERDICT_PASS; v <= ST_VERDICT_UNDECIDED; v++)
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

void st_capacity_fmt_rate(char *b, size_t n, double r)
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
    /* concurrency levels (a fixed-count closed loop each) are named as such, not as req/s */
    const char *pre = p->integer ? "concurrency " : "", *u = p->integer ? "" : " req/s";
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
                st_capacity_fmt_rate(a, sizeof a, out->rate);
                st_capacity_fmt_rate(b, sizeof b, r[j].rate);
                out->action = ST_NEXT_SKIP;
                if (isinf(r[j].worst_ratio))
                    snprintf(out->why, sizeof out->why, "skipped: requests failed at %s%s%s", pre, b, u);
                else
                    snprintf(out->why, sizeof out->why, "skipped: %s%s%s already failed by x%.2f (margin x%.2g)", pre,
                             b, u, r[j].worst_ratio, p->skip_margin);
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
            st_capacity_fmt_rate(a, sizeof a, lo);
            snprintf(out->why, sizeof out->why, "refine: the unlimited-rate run delivered %.4g req/s, not above %s", d,
                     a);
            return;
        }
        hi = d;
    } else {
        hi = cap.fail_rate;
    }
    if (cap.has_fail_above && ((hi - lo) / lo <= p->tolerance || (p->integer && hi - lo <= 1))) {
        st_capacity_fmt_rate(a, sizeof a, lo);
        st_capacity_fmt_rate(b, sizeof b, hi);
        snprintf(out->why, sizeof out->why, "refine: bracket [%s, %s]%s within tolerance %.0f %%%s", a, b, u,
                 p->tolerance * 100, p->integer && hi - lo <= 1 ? " (adjacent levels)" : "");
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
    if (p->integer)
        next = floor(next);
    if (tested(r, n, next)) {
        snprintf(out->why, sizeof out->why, "refine: next rate already tested");
        return;
    }
    out->action = ST_NEXT_RUN;
    out->rate = next;
    out->grid = 0;
    st_capacity_fmt_rate(a, sizeof a, lo);
    st_capacity_fmt_rate(b, sizeof b, hi);
    if (cap.has_fail_above)
        snprintf(out->why, sizeof out->why, "refine: bisect [%s, %s]%s", a, b, u);
    else
        snprintf(out->why, sizeof out->why, "refine: highest %s%s passed, extend upward",
                 p->integer ? "level " : "rate ", a);
}

const char *st_capacity_fail_word(const st_capacity *c) { return c->fail_undecided ? "undecided" : "failed"; }

void st_capacity_compute(const st_rate_result *r, int n, int grid_only, st_capacity *out)
{
    memset(out, 0, sizeof *out);
    out->pass_index = -1;
    out->capacity_rps = out->output_tps = out->sustained_rps = out->out_tokens_mean = NAN;
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
                out->fail_undecided = r[i].verdict == ST_VERDICT_UNDECIDED;
            }
        } else if (r[i].verdict == ST_VERDICT_FAIL) {
            out->non_monotonic = 1;
        }
    }
    out->highest_tested_passed = !out->has_fail_above;
    if (first >= 0 && r[first].verdict == ST_VERDICT_FAIL && out->pass_rate > r[first].rate)
        out->warmup_effect = 1;
}

/* ---- the sustained search ---- */

/* What the runs at one rate say together. */
typedef struct pool {
    double rate;
    int runs, first;
    int decided; /* runs that were neither undecided nor broken */
    int oversat, undecided, errors, early_fail;
    st_verdict verdict;
    int sure;
    int has_margin; /* runs not stopped early gave every term a margin */
    double m[ST_SLO_MAX_TERMS], m_lo[ST_SLO_MAX_TERMS], m_hi[ST_SLO_MAX_TERMS];
    double delivered, output_tps, run_delivered;
    double out_tokens; /* mean output tokens per request over the runs that measured it (NAN: none) */
} pool;

#define MARGIN_CAP 10.0 /* a term at 0 ms: a margin this large (ln units) */

static double margin_of(double limit, double v)
{
    if (v == 0)
        return MARGIN_CAP;
    if (!(v > 0) || !isfinite(v))
        return NAN;
    double m = log(limit / v);
    return m > MARGIN_CAP ? MARGIN_CAP : m;
}

static int same_rate(double a, double b) { return a == b || (isfinite(a) && fabs(a - b) <= 1e-9 * fabs(a)); }

static void pool_verdict(const st_sustained_params *p, const st_rate_result *r, int n, pool *q)
{
    const st_audit_slo *slo = p->slo;
    int T = slo ? slo->n : 0;
    double conf = p->confidence > 0 && p->confidence < 1 ? p->confidence : 0.95;
    double z = st_z_quantile(conf), z2 = st_z_quantile(0.5 + conf / 2);
    st_exceed ex[ST_SLO_MAX_TERMS][64];
    int nex = 0, last = -1, nm = 0;
    double se2[ST_SLO_MAX_TERMS] = { 0 }, nd = 0, tok = 0, ntok = 0;
    for (int t = 0; t < T; t++)
        q->m[t] = 0;
    for (int i = 0; i < n; i++) {
        if (!same_rate(r[i].rate, q->rate) || r[i].verdict == ST_VERDICT_SKIPPED)
            continue;
        const st_rate_result *x = &r[i];
        if (x->verdict == ST_VERDICT_ERROR) {
            q->errors++;
            continue;
        }
        if (x->verdict == ST_VERDICT_UNDECIDED) {
            q->undecided++;
            continue;
        }
        q->decided++;
        last = i;
        if (x->verdict == ST_VERDICT_OVERSAT)
            q->oversat++;
        else if (x->stopped_early)
            q->early_fail++;
        q->delivered += isfinite(x->delivered_rps) ? x->delivered_rps : 0;
        q->output_tps += isfinite(x->output_tps) ? x->output_tps : 0;
        if (x->out_tokens_mean > 0 && isfinite(x->out_tokens_mean)) {
            tok += x->out_tokens_mean;
            ntok++;
        }
        q->run_delivered = isfinite(x->run_delivered_rps) && !(x->run_delivered_rps < q->run_delivered)
                               ? x->run_delivered_rps
                               : q->run_delivered;
        nd++;
        if (x->verdict == ST_VERDICT_OVERSAT || x->stopped_early)
            continue;
        int ok = x->n_terms >= T && nex < 64;
        for (int t = 0; ok && t < T; t++)
            ok = !isnan(margin_of(slo->terms[t].max_ms, x->value_ms[t]));
        if (!ok)
            continue;
        for (int t = 0; t < T; t++) {
            ex[t][nex] = x->ex[t];
            double m = margin_of(slo->terms[t].max_ms, x->value_ms[t]);
            double a = margin_of(slo->terms[t].max_ms, x->hi_ms[t]), b = margin_of(slo->terms[t].max_ms, x->lo_ms[t]);
            double se = isfinite(a) && isfinite(b) && z2 > 0 ? fabs(b - a) / (2 * z2) : 0;
            q->m[t] += m;
            se2[t] += se * se;
        }
        nex++;
        nm++;
    }
    if (nd > 0) {
        q->delivered /= nd;
        q->output_tps /= nd;
    } else {
        q->delivered = q->output_tps = NAN;
    }
    q->out_tokens = ntok > 0 ? tok / ntok : NAN;
    q->has_margin = nm > 0 && T > 0;
    for (int t = 0; t < T; t++) {
        if (!q->has_margin) {
            q->m[t] = q->m_lo[t] = q->m_hi[t] = NAN;
            continue;
        }
        q->m[t] /= nm;
        double se = sqrt(se2[t]) / nm;
        q->m_lo[t] = q->m[t] - z * se;
        q->m_hi[t] = q->m[t] + z * se;
    }
    q->sure = 0;
    if (q->oversat) {
        q->verdict = ST_VERDICT_OVERSAT;
        q->sure = 1;
    } else if (q->early_fail) {
        q->verdict = ST_VERDICT_FAIL;
        q->sure = 1;
    } else if (!q->decided) {
        q->verdict = q->undecided ? ST_VERDICT_UNDECIDED : ST_VERDICT_ERROR;
    } else if (q->decided == 1 || nex < 2) {
        q->verdict = r[last].verdict;
        q->sure = r[last].confident;
    } else {
        int pass = 1, sure_pass = 1, sure_fail = 0;
        for (int t = 0; t < T; t++) {
            st_exceed pe;
            st_exceed_pool(ex[t], (uint32_t)nex, &pe);
            double lim = 1 - slo->terms[t].pct / 100;
            int holds = !(pe.frac > lim + 1e-12);
            pass &= holds;
            sure_pass &= holds && st_exceed_upper(&pe, conf) <= lim;
            sure_fail |= !holds && st_exceed_lower(&pe, conf) > lim;
        }
        q->verdict = pass ? ST_VERDICT_PASS : ST_VERDICT_FAIL;
        q->sure = pass ? sure_pass : sure_fail;
    }
}

static int cmp_pool(const void *a, const void *b)
{
    const pool *x = a, *y = b;
    return (x->rate > y->rate) - (x->rate < y->rate);
}

/* The rates tried (sorted), each with its pooled verdict. Returns the count. */
static int build_pools(const st_sustained_params *p, const st_rate_result *r, int n, pool *q, int max)
{
    int np = 0;
    for (int i = 0; i < n && np < max; i++) {
        if (r[i].verdict == ST_VERDICT_SKIPPED || !isfinite(r[i].rate))
            continue;
        int k;
        for (k = 0; k < np && !same_rate(q[k].rate, r[i].rate); k++)
            ;
        if (k < np) {
            q[k].runs++;
            continue;
        }
        memset(&q[np], 0, sizeof q[np]);
        q[np].rate = r[i].rate;
        q[np].runs = 1;
        q[np].first = i;
        np++;
    }
    for (int k = 0; k < np; k++)
        pool_verdict(p, r, n, &q[k]);
    qsort(q, (size_t)np, sizeof *q, cmp_pool);
    return np;
}

/* Indices into q of the bracket's ends (-1: none). */
static void bracket(const pool *q, int np, int *lo, int *hi, int *nonmono)
{
    int firm = np; /* the lowest confident failure */
    for (int k = 0; k < np && firm == np; k++)
        if ((q[k].verdict == ST_VERDICT_FAIL || q[k].verdict == ST_VERDICT_OVERSAT) && q[k].sure)
            firm = k;
    *lo = -1;
    for (int k = 0; k < firm; k++)
        if (q[k].verdict == ST_VERDICT_PASS)
            *lo = k;
    *hi = -1;
    for (int k = *lo + 1; k < np && *hi < 0; k++)
        if (q[k].verdict != ST_VERDICT_PASS)
            *hi = k;
    *nonmono = 0;
    for (int k = 0; k < *lo; k++)
        *nonmono |= q[k].verdict == ST_VERDICT_FAIL || q[k].verdict == ST_VERDICT_OVERSAT;
}

typedef struct fit {
    int binding;  /* term (-1: none crosses) */
    int cliff;    /* bisect */
    double root;  /* rate where the binding margin crosses 0 (NAN: cliff) */
    double ci_lo; /* roots of the pessimistic and optimistic margins (may lie outside the bracket) */
    double ci_hi;
} fit;

/* Where the line through (x0, y0), (x1, y1) crosses 0 (x in log rate). */
static double cross(double x0, double y0, double x1, double y1)
{
    if (!(y0 != y1))
        return y0 >= 0 ? INFINITY : -INFINITY;
    return x0 + (x1 - x0) * y0 / (y0 - y1);
}

/* Isotonic fits of each term's margins over the pools that have them, read at lo and hi. */
static void fit_boundary(const st_sustained_params *p, const pool *q, int np, int lo, int hi, fit *f)
{
    f->binding = -1;
    f->cliff = 1;
    f->root = f->ci_lo = f->ci_hi = NAN;
    if (lo < 0 || hi < 0 || !q[lo].has_margin || !q[hi].has_margin || !p->slo)
        return;
    double y[64], w[64], fm[64], flo[64], fhi[64];
    int idx[64], m = 0;
    for (int k = 0; k < np && m < 64; k++)
        if (q[k].has_margin)
            idx[m++] = k;
    int ilo = -1, ihi = -1;
    for (int j = 0; j < m; j++) {
        if (idx[j] == lo)
            ilo = j;
        if (idx[j] == hi)
            ihi = j;
    }
    double xl = log(q[lo].rate), xh = log(q[hi].rate), best = INFINITY;
    for (int t = 0; t < p->slo->n; t++) {
        for (int j = 0; j < m; j++) {
            y[j] = q[idx[j]].m[t];
            w[j] = q[idx[j]].runs;
        }
        st_isotonic_decreasing(y, w, (uint32_t)m, fm);
        for (int j = 0; j < m; j++)
            y[j] = q[idx[j]].m_lo[t];
        st_isotonic_decreasing(y, w, (uint32_t)m, flo);
        for (int j = 0; j < m; j++)
            y[j] = q[idx[j]].m_hi[t];
        st_isotonic_decreasing(y, w, (uint32_t)m, fhi);
        double a = fm[ilo], b = fm[ihi];
        if (!(b < 0)) /* this term holds at the fail end: it is not what failed there */
            continue;
        double x = a >= 0 ? cross(xl, a, xh, b) : xl;
        if (x < best) {
            best = x;
            f->binding = t;
            f->cliff = (a - b) / (xh - xl) > ST_SEARCH_CLIFF_SLOPE;
            f->root = exp(x);
            f->ci_lo = exp(cross(xl, flo[ilo], xh, flo[ihi]));
            f->ci_hi = exp(cross(xl, fhi[ilo], xh, fhi[ihi]));
        }
    }
    if (f->binding < 0)
        f->cliff = 1;
    if (f->cliff)
        f->root = NAN;
}

static double round_rate(const st_sustained_params *p, double r)
{
    if (!p->integer)
        return r;
    r = floor(r + 0.5);
    return r < 1 ? 1 : r;
}

static int pool_at(const pool *q, int np, double rate)
{
    for (int k = 0; k < np; k++)
        if (same_rate(q[k].rate, rate))
            return k;
    return -1;
}

/* The middle finite grid rate strictly inside (a, b) not tried yet; NAN when none. */
static double grid_middle(const st_sustained_params *p, const pool *q, int np, double a, double b)
{
    double c[ST_SPEC_MAX_RATES];
    int nc = 0;
    for (int i = 0; i < p->n_grid && nc < ST_SPEC_MAX_RATES; i++)
        if (isfinite(p->grid[i]) && p->grid[i] > a && p->grid[i] < b && pool_at(q, np, p->grid[i]) < 0)
            c[nc++] = p->grid[i];
    return nc ? c[(nc - 1) / 2] : NAN;
}

static void next_run(st_next *out, double rate, int grid, int replicate, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void next_run(st_next *out, double rate, int grid, int replicate, const char *fmt, ...)
{
    out->action = ST_NEXT_RUN;
    out->rate = rate;
    out->grid = grid;
    out->replicate = replicate;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->why, sizeof out->why, fmt, ap);
    va_end(ap);
}

static int is_grid(const st_sustained_params *p, double r)
{
    for (int i = 0; i < p->n_grid; i++)
        if (same_rate(p->grid[i], r))
            return 1;
    return 0;
}

#define MAX_POOLS 128

void st_sustained_params_of(const st_spec *s, double forecast, st_sustained_params *p)
{
    memset(p, 0, sizeof *p);
    p->grid = s->rates;
    p->n_grid = s->n_rates;
    p->forecast = forecast;
    p->tolerance = s->search.tolerance;
    p->confidence = s->search.confidence;
    p->max_runs = (int)s->search.max_runs;
    p->max_replicates = (int)s->search.max_replicates;
    p->request_budget = s->search.request_budget;
    p->min_run_requests = s->search.min_window_requests;
    p->integer = s->closed_loop;
    p->sessions = s->workload.sessions.on;
    p->tasks = s->workload.agent != 0;
    p->slo = &s->slo;
    /* the window's requests must arrive within max_duration, after a warm phase */
    p->min_rate = s->closed_loop ? 1 : s->search.min_window_requests / s->search.max_duration_s / st_spec_turns_mean(s);
}

/* What choosing the next run works with: the pooled runs and the words for a rate. */
typedef struct next_ctx {
    const st_sustained_params *p;
    const pool *q; /* the runs pooled by rate, in rate order */
    int np;
    const char *unit, *what;
    double up;    /* the step up or down without a forecast */
    double first; /* the first steps' from a forecast (tolerance-sized) */
} next_ctx;

/* No run yet: start below the forecast, or in the middle of the grid. */
static void next_start(const next_ctx *c, st_next *out)
{
    const st_sustained_params *p = c->p;
    double start =
        p->forecast > 0 ? round_rate(p, p->forecast * (1 - 0.4 * p->tolerance)) : grid_middle(p, c->q, 0, 0, INFINITY);
    if (isnan(start)) {
        snprintf(out->why, sizeof out->why, "no finite rate to start from");
        return;
    }
    if (p->forecast > 0)
        next_run(out, start, is_grid(p, start), 0, "start below the forecast capacity %.4g", p->forecast);
    else
        next_run(out, start, is_grid(p, start), 0, "start in the middle of the grid");
}

/* Only failures and undecided runs. Undecided runs below the lowest decided failure are too slow
 * to fill their window within max_duration (a lower rate needs a longer one): the rates between
 * the highest of them and that failure are bisected instead. 1 when that decided the next step. */
static int next_below_undecided(const next_ctx *c, st_next *out)
{
    const st_sustained_params *p = c->p;
    const pool *q = c->q;
    int d = -1, u = -1;
    for (int k = 0; k < c->np && d < 0; k++)
        if (q[k].verdict == ST_VERDICT_FAIL || q[k].verdict == ST_VERDICT_OVERSAT)
            d = k;
    for (int k = 0; k < d; k++)
        if (q[k].verdict == ST_VERDICT_UNDECIDED)
            u = k;
    if (u < 0)
        return 0;
    double a = q[u].rate, b = q[d].rate, next = round_rate(p, sqrt(a * b));
    if (b / a - 1 <= p->tolerance + 1e-9 || pool_at(q, c->np, next) >= 0 || next <= a || next >= b) {
        snprintf(out->why, sizeof out->why,
                 "sustained the SLO at no %srate: %.4g%s did not pass and %.4g%s below it was undecided (its "
                 "window does not fit within max_duration)",
                 c->what, b, c->unit, a, c->unit);
        return 1;
    }
    next_run(out, next, is_grid(p, next), 0,
             "bisect [%.4g, %.4g]%s: %.4g did not pass, %.4g was undecided (a lower rate needs a longer window)", a, b,
             c->unit, b, a);
    return 1;
}

/* Nothing passed yet: go down from the lowest failure (hi), or stop at the lowest rate worth a run. */
static void next_down(const next_ctx *c, int hi, st_next *out)
{
    const st_sustained_params *p = c->p;
    const pool *q = c->q;
    int np = c->np;
    if (next_below_undecided(c, out))
        return;
    double top = q[hi].rate;
    double next = p->forecast > 0 ? NAN : grid_middle(p, q, np, 0, top);
    if (isnan(next))
        next = round_rate(p, top / (p->forecast > 0 && np <= 3 ? c->first : c->up));
    for (int k = 0; k < np; k++)
        if (q[k].verdict == ST_VERDICT_OVERSAT && q[k].run_delivered > 0 && next >= q[k].run_delivered &&
            q[k].run_delivered < top)
            next = round_rate(p, q[k].run_delivered * (1 - p->tolerance / 2));
    if (next < p->min_rate && q[0].rate > p->min_rate * 1.01)
        next = round_rate(p, p->min_rate * 1.01);
    if (next < ST_SEARCH_MIN_RATE || next < p->min_rate || pool_at(q, np, next) >= 0 || next >= top) {
        snprintf(out->why, sizeof out->why, "sustained the SLO at no %srate down to %.4g%s%s", c->what, q[0].rate,
                 c->unit, next < p->min_rate ? " (a lower rate cannot fill its window within max_duration)" : "");
        return;
    }
    next_run(out, next, is_grid(p, next), 0, "%s%.4g%s did not pass: go down", c->what, top, c->unit);
}

/* Everything passed: go up from the highest pass (lo). */
static void next_up(const next_ctx *c, int lo, st_next *out)
{
    const st_sustained_params *p = c->p;
    double bottom = c->q[lo].rate;
    double next = p->forecast > 0 ? NAN : grid_middle(p, c->q, c->np, bottom, INFINITY);
    if (isnan(next))
        next = round_rate(p, bottom * (p->forecast > 0 && c->np <= 3 ? c->first : c->up));
    if (next > ST_SEARCH_MAX_RATE || pool_at(c->q, c->np, next) >= 0) {
        snprintf(out->why, sizeof out->why, "sustained every %srate up to %.4g%s", c->what, bottom, c->unit);
        return;
    }
    next_run(out, next, is_grid(p, next), 0, "%s%.4g%s sustained: go up", c->what, bottom, c->unit);
}

/* A bracket wider than the tolerance: a rate inside it, interpolated on the binding term's margin
 * (bisected at a cliff). 1 when a run was chosen. */
static int next_inside(const next_ctx *c, int lo, int hi, st_next *out)
{
    const st_sustained_params *p = c->p;
    const pool *q = c->q;
    double a = q[lo].rate, b = q[hi].rate;
    fit f;
    fit_boundary(p, q, c->np, lo, hi, &f);
    double L = log(b / a), next;
    if (!f.cliff) {
        double t =
            f.root / a - 1 > p->tolerance / 2 ? f.root * (1 - 0.35 * p->tolerance) : f.root * (1 + 0.35 * p->tolerance);
        double mn = a * exp(0.15 * L), mx = a * exp(0.85 * L);
        next = t < mn ? mn : t > mx ? mx : t;
    } else {
        next = sqrt(a * b);
    }
    next = round_rate(p, next);
    if (pool_at(q, c->np, next) >= 0 || next <= a || next >= b)
        next = round_rate(p, sqrt(a * b));
    if (pool_at(q, c->np, next) >= 0 || next <= a || next >= b)
        return 0;
    if (f.cliff)
        next_run(out, next, is_grid(p, next), 0, "bisect [%.4g, %.4g]%s (a cliff)", a, b, c->unit);
    else
        next_run(out, next, is_grid(p, next), 0,
                 "interpolate in [%.4g, %.4g]%s: the binding term's margin "
                 "crosses zero near %.4g",
                 a, b, c->unit, f.root);
    return 1;
}

/* The bracket is as narrow as asked (or cannot shrink): make its calls confident, then stop. */
static void next_confirm(const next_ctx *c, int lo, int hi, int narrow, st_next *out)
{
    const st_sustained_params *p = c->p;
    const pool *q = c->q;
    int rep_max = p->max_replicates > 0 ? p->max_replicates : 1;
    if (!q[lo].sure && q[lo].runs < rep_max) {
        next_run(out, q[lo].rate, is_grid(p, q[lo].rate), q[lo].runs, "replicate %s%.4g%s: its pass is not confident",
                 c->what, q[lo].rate, c->unit);
        return;
    }
    if (!q[hi].sure && q[hi].verdict == ST_VERDICT_FAIL && q[hi].runs < rep_max) {
        next_run(out, q[hi].rate, is_grid(p, q[hi].rate), q[hi].runs,
                 "replicate %s%.4g%s: its failure is not confident", c->what, q[hi].rate, c->unit);
        return;
    }
    snprintf(out->why, sizeof out->why, "bracket [%.4g, %.4g]%s %s (tolerance %.0f %%)%s%s", q[lo].rate, q[hi].rate,
             c->unit, narrow ? "within the tolerance" : "cannot narrow further", p->tolerance * 100,
             q[lo].sure ? "" : "; the pass is not confident", q[hi].sure ? "" : "; the failure is not confident");
}

void st_sustained_next(const st_sustained_params *p, const st_rate_result *r, int n, st_next *out)
{
    memset(out, 0, sizeof *out);
    out->action = ST_NEXT_STOP;
    pool q[MAX_POOLS];
    int np = build_pools(p, r, n, q, MAX_POOLS), runs = 0;
    uint64_t spent = 0;
    for (int i = 0; i < n; i++)
        if (r[i].verdict != ST_VERDICT_SKIPPED) {
            runs++;
            spent += r[i].requests;
        }
    next_ctx c = { .p = p,
                   .q = q,
                   .np = np,
                   .unit = p->integer    ? ""
                           : p->tasks    ? " tasks/s"
                           : p->sessions ? " sessions/s"
                                         : " req/s",
                   .what = p->integer ? "concurrency " : "",
                   .up = p->forecast > 0 ? 1.5 : 2,
                   /* from a forecast, the first three steps are tolerance-sized (the answer should be near) */
                   .first = 1 + 0.8 * p->tolerance };
    if (runs >= p->max_runs && p->max_runs > 0) {
        snprintf(out->why, sizeof out->why, "stopped after %d runs (search.max_runs)", runs);
        return;
    }
    if (p->request_budget && spent + p->min_run_requests > p->request_budget) {
        snprintf(out->why, sizeof out->why, "request budget spent (%llu of %llu; a run needs at least %llu)",
                 (unsigned long long)spent, (unsigned long long)p->request_budget,
                 (unsigned long long)p->min_run_requests);
        return;
    }
    if (np == 0) {
        next_start(&c, out);
        return;
    }
    int lo, hi, nonmono;
    bracket(q, np, &lo, &hi, &nonmono);
    if (lo < 0) {
        next_down(&c, hi, out);
        return;
    }
    if (hi < 0) {
        next_up(&c, lo, out);
        return;
    }
    double a = q[lo].rate, b = q[hi].rate, w = b / a - 1;
    int narrow = w <= p->tolerance + 1e-9 || (p->integer && b - a <= 1);
    if (!narrow && next_inside(&c, lo, hi, out))
        return;
    next_confirm(&c, lo, hi, narrow, out);
}

/* When the fit names no term (an end of the bracket without margins: stopped early, undecided),
 * what failed at the lowest failing rate above the pass: the term furthest above its limit there,
 * or over-saturation. */
static void binding_above(const st_sustained_params *p, const st_rate_result *r, int n, const pool *q, int np, int lo,
                          st_capacity *out)
{
    for (int k = lo + 1; k < np && out->binding < 0 && !out->binding_oversat; k++) {
        if (q[k].verdict == ST_VERDICT_OVERSAT) {
            out->binding_oversat = 1;
            break;
        }
        if (q[k].verdict != ST_VERDICT_FAIL || !p->slo)
            continue;
        double worst = 1;
        for (int i = 0; i < n; i++)
            if (same_rate(r[i].rate, q[k].rate) && r[i].verdict == ST_VERDICT_FAIL)
                for (int t = 0; t < p->slo->n && t < r[i].n_terms; t++)
                    if (r[i].value_ms[t] / p->slo->terms[t].max_ms > worst) {
                        worst = r[i].value_ms[t] / p->slo->terms[t].max_ms;
                        out->binding = t;
                    }
    }
}

void st_capacity_sustained(const st_sustained_params *p, const st_rate_result *r, int n, st_capacity *out)
{
    memset(out, 0, sizeof *out);
    out->sustained = 1;
    out->pass_index = out->fail_index = -1;
    out->binding = -1;
    out->capacity_rps = out->output_tps = out->sustained_rps = out->out_tokens_mean = NAN;
    out->pass_rate = out->fail_rate = out->ci_lo = out->ci_hi = out->estimate = out->max_throughput_rps = NAN;
    for (int i = 0; i < n; i++) {
        if (r[i].verdict == ST_VERDICT_SKIPPED)
            continue;
        out->runs++;
        out->requests += r[i].requests;
        out->engine_s += isfinite(r[i].engine_s) ? r[i].engine_s : 0;
        if (r[i].verdict == ST_VERDICT_OVERSAT && isfinite(r[i].run_delivered_rps) &&
            !(r[i].run_delivered_rps <= out->max_throughput_rps))
            out->max_throughput_rps = r[i].run_delivered_rps;
        if (r[i].verdict == ST_VERDICT_PASS || r[i].verdict == ST_VERDICT_FAIL || r[i].verdict == ST_VERDICT_OVERSAT)
            out->n_measured++;
    }
    pool q[MAX_POOLS];
    int np = build_pools(p, r, n, q, MAX_POOLS);
    int lo, hi, nonmono;
    bracket(q, np, &lo, &hi, &nonmono);
    out->non_monotonic = nonmono;
    if (hi >= 0) {
        out->has_fail_above = lo >= 0;
        out->fail_rate = q[hi].rate;
        out->fail_index = q[hi].first;
        out->fail_sure = q[hi].sure;
        out->fail_undecided = q[hi].verdict == ST_VERDICT_UNDECIDED;
    }
    if (lo < 0)
        return;
    out->has_pass = 1;
    out->pass_rate = q[lo].rate;
    out->pass_index = q[lo].first;
    for (int i = 0; i < n; i++)
        if (same_rate(r[i].rate, q[lo].rate) && r[i].verdict == ST_VERDICT_PASS)
            out->pass_index = i;
    out->pass_sure = q[lo].sure;
    out->sustained_rps = q[lo].delivered;
    out->capacity_rps = p->integer ? q[lo].delivered : q[lo].rate;
    /* Output tok/s at capacity: the capacity times the output tokens per request of the window's
     * completed requests. The window's own token rate follows the requests that happened to
     * arrive in it (a Poisson window of a few hundred requests is several % off the rate either
     * way), where replicas and cost must both rest on the capacity: this way 1M tokens cost what
     * a replica serving the capacity costs, and two configurations of equal capacity and equal
     * outputs cost the same. Runs stored without the per-request figure keep the window's rate. */
    out->out_tokens_mean = q[lo].out_tokens > 0 ? q[lo].out_tokens : NAN;
    /* with sessions the rate counts session starts: the requests they make are the window's */
    double req_rate = p->sessions ? q[lo].delivered : out->capacity_rps;
    out->output_tps = q[lo].out_tokens > 0 && req_rate > 0 ? req_rate * q[lo].out_tokens : q[lo].output_tps;
    out->highest_tested_passed = hi < 0;
    if (hi < 0) {
        out->ci_lo = q[lo].sure ? q[lo].rate : lo > 0 ? q[lo - 1].rate : q[lo].rate / 2;
        out->ci_hi = INFINITY;
        return;
    }
    out->within_tolerance = q[hi].rate / q[lo].rate - 1 <= p->tolerance + 1e-9;
    fit f;
    fit_boundary(p, q, np, lo, hi, &f);
    out->binding = f.binding;
    if (f.binding < 0)
        binding_above(p, r, n, q, np, lo, out);
    out->cliff = f.cliff;
    out->estimate = f.root;
    /* a call that is not confident leaves that side open up to the next rate tried (none: open) */
    double below = lo > 0 ? q[lo - 1].rate : q[lo].rate / 2; /* nothing tried below: half, as above */
    double above = hi + 1 < np ? q[hi + 1].rate : INFINITY;
    double a = f.cliff ? q[lo].rate : f.ci_lo, b = f.cliff ? q[hi].rate : f.ci_hi;
    if (!f.cliff) {
        /* the straight line between two points is a model too: its error is taken as a quarter of
         * the bracket's width (log scale) each side of the interpolated zero */
        double w = pow(q[hi].rate / q[lo].rate, ST_SEARCH_LINE_ERROR);
        if (f.root / w < a)
            a = f.root / w;
        if (f.root * w > b)
            b = f.root * w;
    }
    if (!(a < b)) {
        double t = a;
        a = b;
        b = t;
    }
    if (isnan(a))
        a = q[lo].rate;
    if (isnan(b))
        b = q[hi].rate;
    /* an end called with confidence bounds the interval; one that is not opens it (the
     * interpolated margins cannot claim a confidence the calls themselves do not have) */
    if (q[lo].sure && a < q[lo].rate)
        a = q[lo].rate;
    if (!q[lo].sure)
        a = below;
    if (q[hi].sure && b > q[hi].rate)
        b = q[hi].rate;
    if (!q[hi].sure)
        b = above;
    out->ci_lo = a < below ? below : a;
    out->ci_hi = b > above ? above : b;
}
