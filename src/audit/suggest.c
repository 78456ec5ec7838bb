#include "audit/suggest.h"

#include <math.h>
#include <stdio.h>

static const double MANT[] = { 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10 };
#define NMANT (sizeof MANT / sizeof *MANT)

double st_suggest_nice(double x, int up)
{
    if (!(x > 0) || !isfinite(x))
        return x;
    double e = floor(log10(x));
    double p = pow(10, e);
    double m = x / p;
    /* guard against log10 rounding: m in [1, 10) */
    if (m < 1) {
        p /= 10;
        m = x / p;
    } else if (m >= 10) {
        p *= 10;
        m = x / p;
    }
    double best = up ? MANT[NMANT - 1] : MANT[0];
    for (size_t i = 0; i < NMANT; i++) {
        double v = MANT[i];
        if (!up && v <= m * (1 + 1e-12))
            best = v;
        if (up && v >= m * (1 - 1e-12)) {
            best = v;
            break;
        }
    }
    double r = best * p;
    /* round off the binary noise of best x 10^k */
    return round(r * 1e6) / 1e6 > 0 ? round(r * 1e6) / 1e6 : r;
}

int st_suggest_rates(const double *caps, int n, int points, double *out, int max)
{
    double lo = INFINITY, hi = 0;
    for (int i = 0; i < n; i++) {
        if (!(caps[i] > 0) || !isfinite(caps[i]))
            continue;
        if (caps[i] < lo)
            lo = caps[i];
        if (caps[i] > hi)
            hi = caps[i];
    }
    if (!(hi > 0) || max < 1)
        return 0;
    if (points < 2)
        points = 2;
    if (points > 24)
        points = 24;
    double a = st_suggest_nice(0.5 * lo, 0), b = st_suggest_nice(1.5 * hi, 1);
    int k = 0;
    out[k++] = a;
    double step = pow(b / a, 1.0 / (points - 1));
    for (int i = 1; i < points - 1 && k < max; i++) {
        double v = st_suggest_nice(a * pow(step, i), 0);
        double v2 = st_suggest_nice(a * pow(step, i), 1);
        double t = a * pow(step, i);
        if (t / v > v2 / t)
            v = v2; /* the nearer of the two, geometrically */
        if (v > out[k - 1] * (1 + 1e-9) && v < b * (1 - 1e-9))
            out[k++] = v;
    }
    if (k < max && b > out[k - 1])
        out[k++] = b;
    return k;
}

void st_suggest_format(const double *rates, int n, int with_inf, char *out, size_t outlen)
{
    size_t off = (size_t)snprintf(out, outlen, "rates: [");
    for (int i = 0; i < n && off < outlen; i++)
        off += (size_t)snprintf(out + off, outlen - off, "%s%.6g", i ? ", " : "", rates[i]);
    if (with_inf && off < outlen)
        off += (size_t)snprintf(out + off, outlen - off, "%sinf", n ? ", " : "");
    if (off < outlen)
        snprintf(out + off, outlen - off, "]");
}
