/* Statistics for telling a steady state from a growing queue, and for confidence intervals of
 * latency percentiles measured on autocorrelated series (a request's latency depends on the
 * queue the previous ones left). Pure: no I/O, no clock, no global state; the only memory a
 * function allocates is scratch space it frees before returning.
 *
 * Method (docs/audit-method.md states it for the audit):
 *  - Batch means. A series in time order (requests by arrival, or a sampled count) is cut into
 *    B contiguous batches of equal size; the batch means are close to independent when a batch
 *    is long against the series' correlation time, so their spread gives standard errors that
 *    a per-value formula would understate.
 *  - Trend. st_trend_fit regresses the batch means of y on the batch means of x (ordinary least
 *    squares); the slope's standard error comes from the residuals of that regression, with
 *    B - 2 degrees of freedom, and the one-sided p-value of "slope > 0" from Student's t.
 *  - Exceedance. The fraction of a series above a limit, with the larger of the batch-means and
 *    the binomial standard error (the binomial one uses at least half a value above, so that a
 *    series with none above still has an honest error), and B - 1 degrees of freedom: p-th
 *    percentile <= limit exactly when the fraction above the limit is at most 1 - p/100.
 *  - Percentile interval (sectioning). For the p-th percentile v of n values: the standard error
 *    s of the fraction of values <= v is computed as above; the interval runs from the
 *    percentile at p - 100 t s to the one at p + 100 t s (t the two-sided Student quantile of the
 *    confidence with B - 1 degrees of freedom), clamped to [0, 100].
 *  - Isotonic regression. Pool adjacent violators: the non-increasing sequence closest to the
 *    data in weighted least squares (a margin that shrinks as the load grows).
 *
 * Reference values the unit tests check: t(0.975, 10) = 2.2281, t(0.95, 3) = 2.3534,
 * t(0.99, 2) = 6.9646, z(0.975) = 1.9600. */
#ifndef ST_STEADY_H
#define ST_STEADY_H
#include <stdint.h>

#include "load/record.h"

/* The most batches a series is cut into. */
#define ST_STEADY_MAX_BATCHES 32
/* st_autocorr_time: Sokal's self-consistent window (c = 10 for a series with long correlations,
 * A. Sokal, "Monte Carlo methods in statistical mechanics", 1996) and the most lags it sums. */
#define ST_STEADY_IAT_WINDOW 10.0
#define ST_STEADY_IAT_MAX_LAG 2048

/* Student's t distribution: P(T <= x) for dof > 0 degrees of freedom. */
double st_t_cdf(double x, double dof);
/* Its inverse: x with P(T <= x) = p, for p in (0, 1). NAN for bad arguments. */
double st_t_quantile(double p, double dof);
/* The standard normal quantile (inverse CDF), p in (0, 1). */
double st_z_quantile(double p);

typedef struct st_trend {
    uint32_t n;       /* points used */
    uint32_t batches; /* B */
    double slope;     /* y per unit of x */
    double se;        /* batch-means standard error of the slope (NAN: fewer than 3 batches) */
    double t;         /* slope / se */
    double p_growth;  /* one-sided p-value of slope > 0 (1 when slope <= 0 or no test) */
    double x0, x1;    /* span of x */
    double mean;      /* mean of y */
    double resid_sd;  /* standard deviation of the points around the fitted line */
} st_trend;

/* Fits y against x (n points, x nondecreasing) with `batches` batches of equal count (clamped to
 * [3, ST_STEADY_MAX_BATCHES] and to n / 2). 0, or -1 when there are fewer than 6 points or x
 * has no spread (out is then filled with NANs and p_growth 1). */
int st_trend_fit(const double *x, const double *y, uint32_t n, uint32_t batches, st_trend *out);

/* For a series of levels (a queue length sampled over time) whose correlation time may exceed a
 * batch: the slope's error is at least that of the difference of two independent levels over the
 * span, sqrt(2) x resid_sd / (x1 - x0); t and p_growth are recomputed. A queue that wanders for
 * longer than the batches then no longer looks like a trend, while a real growth (small residuals
 * around a rising line) still does. */
void st_trend_level_floor(st_trend *t);

/* The upper end of the one-sided interval of a trend at confidence conf: slope + t * se. */
double st_trend_upper(const st_trend *t, double conf);

typedef struct st_exceed {
    uint32_t n, k; /* values, of them strictly above the limit */
    double frac;   /* k / n (NAN when n = 0) */
    double se;     /* standard error of frac */
    double dof;    /* degrees of freedom of se (batches - 1; pooled: their sum) */
} st_exceed;

/* The one-sided bounds of an exceedance fraction at confidence conf (Student's t with its dof). */
double st_exceed_upper(const st_exceed *e, double conf);
double st_exceed_lower(const st_exceed *e, double conf);

/* The fraction of v[0..n) (in time order) above limit, with its standard error from `batches`
 * batches (as st_trend_fit clamps them) and the binomial floor. */
void st_exceed_compute(const double *v, uint32_t n, double limit, uint32_t batches, st_exceed *out);

/* The integrated autocorrelation time of v[0..n) in samples (0.5 for independent values): 1/2 +
 * the sum of the autocorrelations up to Sokal's window (the first lag M >= ST_STEADY_IAT_WINDOW x
 * the running sum; at most n / 4 and ST_STEADY_IAT_MAX_LAG lags). */
double st_autocorr_time(const double *v, uint32_t n);

/* Pools exceedances of independent runs: fractions weighted by their counts, errors combined. */
void st_exceed_pool(const st_exceed *e, uint32_t m, st_exceed *out);

typedef struct st_pct_ci {
    uint32_t n;
    double value;  /* the percentile (type 7, load/stats.h) */
    double lo, hi; /* its interval at the confidence asked for */
    double se;     /* standard error of the fraction of values <= value */
} st_pct_ci;

/* The pct-th percentile of v[0..n) (in time order) with its interval at confidence conf, by
 * sectioning (above). The level's error is at least sqrt(q (1 - q) x 2 tau / n), tau the
 * integrated autocorrelation time of the indicator "at most the percentile" (st_autocorr_time):
 * values near a percentile that come in clusters (a queue near saturation) make its estimate
 * less certain than a few batches show. -1 when out of memory or n = 0 (out: NANs). */
int st_percentile_ci(const double *v, uint32_t n, double pct, uint32_t batches, double conf, st_pct_ci *out);

/* Pool adjacent violators: fit[0..n) is the non-increasing sequence that minimises
 * sum w[i] (fit[i] - y[i])^2 (w NULL: all 1). y and fit may be the same array. */
void st_isotonic_decreasing(const double *y, const double *w, uint32_t n, double *fit);

/* The number of requests in flight at each of the times t[0..m) (seconds on the records'
 * clock, increasing): sent (or, with arrival_is_sent = 0, scheduled) at or before t and not
 * ended by t. A request with no end yet counts until the end of time. Warm-up records are left
 * out. y gets m values. -1 when out of memory. */
int st_inflight_at(const st_record *r, uint32_t n, int arrival_is_sent, const double *t, uint32_t m, double *y);

#endif
