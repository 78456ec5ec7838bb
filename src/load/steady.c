#include "load/steady.h"

#include "core/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "load/stats.h"

/* Continued fraction of the incomplete beta function (modified Lentz), as in Numerical Recipes
 * (betacf); converges for x < (a + 1) / (a + b + 2). */
#define BETACF_ITER 300
#define BETACF_EPS 1e-15
#define BETACF_TINY 1e-300

/* One step of the modified Lentz method with coefficient aa: updates c and d, returns the factor
 * on the fraction's value. */
static double lentz_step(double aa, double *c, double *d)
{
    *d = 1 + aa * *d;
    if (fabs(*d) < BETACF_TINY)
        *d = BETACF_TINY;
    *c = 1 + aa / *c;
    if (fabs(*c) < BETACF_TINY)
        *c = BETACF_TINY;
    *d = 1 / *d;
    return *d * *c;
}

static double betacf(double a, double b, double x)
{
    double qab = a + b, qap = a + 1, qam = a - 1;
    double c = 1, d = 1 - qab * x / qap;
    if (fabs(d) < BETACF_TINY)
        d = BETACF_TINY;
    d = 1 / d;
    double h = d;
    for (int m = 1; m <= BETACF_ITER; m++) {
        int m2 = 2 * m;
        h *= lentz_step(m * (b - m) * x / ((qam + m2) * (a + m2)), &c, &d);
        double del = lentz_step(-(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)), &c, &d);
        h *= del;
        if (fabs(del - 1) < BETACF_EPS)
            break;
    }
    return h;
}

/* The regularized incomplete beta function I_x(a, b). */
static double ibeta(double a, double b, double x)
{
    if (x <= 0)
        return 0;
    if (x >= 1)
        return 1;
    double lbt = lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x);
    double bt = exp(lbt);
    if (x < (a + 1) / (a + b + 2))
        return bt * betacf(a, b, x) / a;
    return 1 - bt * betacf(b, a, 1 - x) / b;
}

double st_t_cdf(double x, double dof)
{
    if (isnan(x) || !(dof > 0))
        return NAN;
    if (isinf(x))
        return x > 0 ? 1 : 0;
    double tail = 0.5 * ibeta(dof / 2, 0.5, dof / (dof + x * x)); /* P(T > |x|) */
    return x >= 0 ? 1 - tail : tail;
}

double st_t_quantile(double p, double dof)
{
    if (!(p > 0 && p < 1) || !(dof > 0))
        return NAN;
    if (p == 0.5)
        return 0;
    double q = p > 0.5 ? p : 1 - p;
    /* bracket then bisect: the CDF is monotone; 1e7 covers dof >= 1 down to p = 1e-7 */
    double lo = 0, hi = 1;
    while (st_t_cdf(hi, dof) < q && hi < 1e12)
        hi *= 2;
    for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; i++) {
        double m = (lo + hi) / 2;
        if (st_t_cdf(m, dof) < q)
            lo = m;
        else
            hi = m;
    }
    double x = (lo + hi) / 2;
    return p > 0.5 ? x : -x;
}

double st_z_quantile(double p)
{
    if (!(p > 0 && p < 1))
        return NAN;
    /* Acklam's rational approximation (relative error 1.15e-9), then one Halley step. */
    static const double a[] = { -3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                                1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00 };
    static const double b[] = { -5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                                6.680131188771972e+01, -1.328068155288572e+01 };
    static const double c[] = { -7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                                -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00 };
    static const double d[] = { 7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                                3.754408661907416e+00 };
    double x, q, r;
    if (p < 0.02425) {
        q = sqrt(-2 * log(p));
        x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
    } else if (p <= 1 - 0.02425) {
        q = p - 0.5;
        r = q * q;
        x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
            (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
    } else {
        q = sqrt(-2 * log1p(-p));
        x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
    }
    double e = 0.5 * erfc(-x / sqrt(2)) - p;
    double u = e * sqrt(2 * M_PI) * exp(x * x / 2);
    return x - u / (1 + x * u / 2);
}

static uint32_t clamp_batches(uint32_t b, uint32_t n)
{
    if (b > ST_STEADY_MAX_BATCHES)
        b = ST_STEADY_MAX_BATCHES;
    if (b > n / 2)
        b = n / 2;
    if (b < 3)
        b = 3;
    return b;
}

/* The index range of batch j of B over n values: [lo, hi). */
static void batch_range(uint32_t n, uint32_t B, uint32_t j, uint32_t *lo, uint32_t *hi)
{
    *lo = (uint32_t)((uint64_t)n * j / B);
    *hi = (uint32_t)((uint64_t)n * (j + 1) / B);
}

int st_trend_fit(const double *x, const double *y, uint32_t n, uint32_t batches, st_trend *out)
{
    memset(out, 0, sizeof *out);
    out->n = n;
    out->slope = out->se = out->t = out->x0 = out->x1 = out->mean = out->resid_sd = NAN;
    out->p_growth = 1;
    int rc = -1;
    if (n >= 6 && x[n - 1] > x[0]) {
        uint32_t B = clamp_batches(batches, n);
        double bx[ST_STEADY_MAX_BATCHES], by[ST_STEADY_MAX_BATCHES], mx = 0, my = 0, sy = 0;
        for (uint32_t j = 0; j < B; j++) {
            uint32_t lo, hi;
            batch_range(n, B, j, &lo, &hi);
            double sx = 0, s = 0;
            for (uint32_t i = lo; i < hi; i++) {
                sx += x[i];
                s += y[i];
            }
            bx[j] = sx / (hi - lo);
            by[j] = s / (hi - lo);
            mx += bx[j];
            my += by[j];
            sy += s;
        }
        mx /= B;
        my /= B;
        double sxx = 0, sxy = 0;
        for (uint32_t j = 0; j < B; j++) {
            sxx += (bx[j] - mx) * (bx[j] - mx);
            sxy += (bx[j] - mx) * (by[j] - my);
        }
        out->batches = B;
        out->x0 = x[0];
        out->x1 = x[n - 1];
        out->mean = sy / n;
        if (sxx > 0) {
            out->slope = sxy / sxx;
            double rss = 0;
            for (uint32_t j = 0; j < B; j++) {
                double e = by[j] - (my + out->slope * (bx[j] - mx));
                rss += e * e;
            }
            out->se = sqrt(rss / (B - 2) / sxx);
            double r2 = 0;
            for (uint32_t i = 0; i < n; i++) {
                double e = y[i] - (my + out->slope * (x[i] - mx));
                r2 += e * e;
            }
            out->resid_sd = sqrt(r2 / (n - 2));
            if (out->se > 0) {
                out->t = out->slope / out->se;
                out->p_growth = out->slope > 0 ? 1 - st_t_cdf(out->t, B - 2) : 1;
            } else {
                /* a perfect line: growth is certain when it rises */
                out->t = out->slope > 0 ? INFINITY : out->slope < 0 ? -INFINITY : 0;
                out->p_growth = out->slope > 0 ? 0 : 1;
            }
            rc = 0;
        }
    }
    return rc;
}

void st_trend_level_floor(st_trend *t)
{
    if (!isfinite(t->slope) || !(t->x1 > t->x0) || t->batches < 3)
        return;
    double floor_se = sqrt(2.0) * t->resid_sd / (t->x1 - t->x0);
    if (!(floor_se > t->se))
        return;
    t->se = floor_se;
    t->t = t->slope / t->se;
    t->p_growth = t->slope > 0 ? 1 - st_t_cdf(t->t, t->batches - 2) : 1;
}

double st_trend_upper(const st_trend *t, double conf)
{
    if (!isfinite(t->slope) || !isfinite(t->se) || t->batches < 3)
        return INFINITY;
    return t->slope + st_t_quantile(conf, t->batches - 2) * t->se;
}

/* Standard error of the mean of indicators ind[0..n) from B batches, floored by the binomial
 * error with at least half a hit; *dof gets its degrees of freedom. */
static double indicator_se(const uint8_t *ind, uint32_t n, uint32_t B, uint32_t k, double *dof)
{
    *dof = n > 1 ? n - 1 : 1;
    double frac = (double)k / n;
    double pf = frac > 0 ? frac : 0.5 / n;
    if (pf > 1 - 0.5 / n)
        pf = 1 - 0.5 / n;
    double se = sqrt(pf * (1 - pf) / n);
    if (n >= 6) {
        B = clamp_batches(B, n);
        *dof = B - 1;
        double s2 = 0;
        for (uint32_t j = 0; j < B; j++) {
            uint32_t lo, hi, c = 0;
            batch_range(n, B, j, &lo, &hi);
            for (uint32_t i = lo; i < hi; i++)
                c += ind[i];
            double d = (double)c / (hi - lo) - frac;
            s2 += d * d;
        }
        double sb = sqrt(s2 / (B - 1) / B);
        if (sb > se)
            se = sb;
    }
    return se;
}

double st_autocorr_time(const double *v, uint32_t n)
{
    if (n < 8)
        return 0.5;
    double m = 0, c0 = 0;
    for (uint32_t i = 0; i < n; i++)
        m += v[i];
    m /= n;
    for (uint32_t i = 0; i < n; i++)
        c0 += (v[i] - m) * (v[i] - m);
    if (!(c0 > 0))
        return 0.5;
    double tau = 0.5;
    uint32_t max_lag = n / 4 < ST_STEADY_IAT_MAX_LAG ? n / 4 : ST_STEADY_IAT_MAX_LAG;
    for (uint32_t k = 1; k <= max_lag; k++) {
        double ck = 0;
        for (uint32_t i = 0; i + k < n; i++)
            ck += (v[i] - m) * (v[i + k] - m);
        tau += ck / c0;
        if (k >= ST_STEADY_IAT_WINDOW * tau)
            break;
    }
    return tau > 0.5 ? tau : 0.5;
}

void st_exceed_compute(const double *v, uint32_t n, double limit, uint32_t batches, st_exceed *out)
{
    memset(out, 0, sizeof *out);
    out->n = n;
    out->frac = out->se = NAN;
    uint8_t *ind = n ? malloc(n) : NULL;
    if (ind) {
        for (uint32_t i = 0; i < n; i++) {
            ind[i] = v[i] > limit;
            out->k += ind[i];
        }
        out->frac = (double)out->k / n;
        out->se = indicator_se(ind, n, batches, out->k, &out->dof);
        free(ind);
    }
}

void st_exceed_pool(const st_exceed *e, uint32_t m, st_exceed *out)
{
    memset(out, 0, sizeof *out);
    double var = 0;
    for (uint32_t i = 0; i < m; i++) {
        if (!e[i].n)
            continue;
        out->n += e[i].n;
        out->k += e[i].k;
        out->dof += e[i].dof > 0 ? e[i].dof : 1;
        var += (double)e[i].n * e[i].n * e[i].se * e[i].se;
    }
    out->frac = out->n ? (double)out->k / out->n : NAN;
    out->se = out->n ? sqrt(var) / out->n : NAN;
}

double st_exceed_upper(const st_exceed *e, double conf)
{
    return e->frac + st_t_quantile(conf, e->dof > 0 ? e->dof : 1) * e->se;
}

double st_exceed_lower(const st_exceed *e, double conf)
{
    return e->frac - st_t_quantile(conf, e->dof > 0 ? e->dof : 1) * e->se;
}

int st_percentile_ci(const double *v, uint32_t n, double pct, uint32_t batches, double conf, st_pct_ci *out)
{
    memset(out, 0, sizeof *out);
    out->n = n;
    out->value = out->lo = out->hi = out->se = NAN;
    if (!n)
        return -1;
    double *s = malloc(sizeof *s * n);
    uint8_t *ind = malloc(n);
    int rc = -1;
    if (s && ind) {
        memcpy(s, v, sizeof *s * n);
        qsort(s, n, sizeof *s, st_cmp_double);
        out->value = st_percentile_sorted(s, n, pct);
        uint32_t k = 0;
        for (uint32_t i = 0; i < n; i++) {
            ind[i] = v[i] <= out->value;
            k += ind[i];
        }
        double dof;
        out->se = indicator_se(ind, n, batches, k, &dof);
        /* the level's error is at least what clustered values at this percentile give: the
         * indicator's own autocorrelation time, at the level's binomial variance */
        double q = pct / 100, *x = malloc(sizeof *x * n);
        if (x && q > 0 && q < 1) {
            for (uint32_t i = 0; i < n; i++)
                x[i] = ind[i];
            double se_tau = sqrt(q * (1 - q) * 2 * st_autocorr_time(x, n) / n);
            if (se_tau > out->se)
                out->se = se_tau;
        }
        free(x);
        double h = st_t_quantile(0.5 + conf / 2, dof) * out->se * 100;
        double plo = pct - h < 0 ? 0 : pct - h, phi = pct + h > 100 ? 100 : pct + h;
        out->lo = st_percentile_sorted(s, n, plo);
        out->hi = st_percentile_sorted(s, n, phi);
        rc = 0;
    }
    free(s);
    free(ind);
    return rc;
}

void st_isotonic_decreasing(const double *y, const double *w, uint32_t n, double *fit)
{
    /* blocks on a stack: value, weight, length */
    double *bv = malloc(sizeof *bv * (n ? n : 1)), *bw = malloc(sizeof *bw * (n ? n : 1));
    uint32_t *bl = malloc(sizeof *bl * (n ? n : 1));
    if (!bv || !bw || !bl) {
        /* no memory: the data as they are (a fit, if not the best one) */
        if (fit != y)
            memcpy(fit, y, sizeof *fit * n);
    } else {
        uint32_t nb = 0;
        for (uint32_t i = 0; i < n; i++) {
            bv[nb] = y[i];
            bw[nb] = w ? w[i] : 1;
            bl[nb] = 1;
            nb++;
            /* non-increasing: a block above the one before it violates; pool them */
            while (nb > 1 && bv[nb - 1] > bv[nb - 2]) {
                double tw = bw[nb - 1] + bw[nb - 2];
                bv[nb - 2] =
                    tw > 0 ? (bv[nb - 1] * bw[nb - 1] + bv[nb - 2] * bw[nb - 2]) / tw : (bv[nb - 1] + bv[nb - 2]) / 2;
                bw[nb - 2] = tw;
                bl[nb - 2] += bl[nb - 1];
                nb--;
            }
        }
        uint32_t k = 0;
        for (uint32_t b = 0; b < nb; b++)
            for (uint32_t j = 0; j < bl[b]; j++)
                fit[k++] = bv[b];
    }
    free(bv);
    free(bw);
    free(bl);
}

int st_inflight_at(const st_record *r, uint32_t n, int arrival_is_sent, const double *t, uint32_t m, double *y)
{
    double *a = malloc(sizeof *a * (n ? n : 1)), *e = malloc(sizeof *e * (n ? n : 1));
    int rc = -1;
    if (a && e) {
        uint32_t na = 0, ne = 0;
        for (uint32_t i = 0; i < n; i++) {
            const st_record *q = &r[i];
            st_ns at = arrival_is_sent ? q->sent : q->scheduled;
            if (q->warmup || at < 0)
                continue;
            a[na++] = st_ns_to_s(at);
            if (q->end >= 0)
                e[ne++] = st_ns_to_s(q->end);
        }
        /* arrivals usually come in order already: sort only when they do not */
        int sa = 1, se = 1;
        for (uint32_t i = 1; i < na && sa; i++)
            sa = a[i - 1] <= a[i];
        for (uint32_t i = 1; i < ne && se; i++)
            se = e[i - 1] <= e[i];
        if (!sa)
            qsort(a, na, sizeof *a, st_cmp_double);
        if (!se)
            qsort(e, ne, sizeof *e, st_cmp_double);
        uint32_t ia = 0, ie = 0;
        for (uint32_t j = 0; j < m; j++) {
            while (ia < na && a[ia] <= t[j])
                ia++;
            while (ie < ne && e[ie] <= t[j])
                ie++;
            y[j] = (double)ia - (double)ie;
        }
        rc = 0;
    }
    free(a);
    free(e);
    return rc;
}
