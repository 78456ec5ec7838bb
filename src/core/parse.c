#include "core/parse.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int st_parse_double(const char *s, double *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || end == s || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

int st_parse_long(const char *s, long *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s)
        return -1;
    *out = v;
    return 0;
}

#define RANGE_TEXT_MAX 32

int st_parse_range_u32(const char *s, uint32_t min, uint32_t max, uint32_t *lo, uint32_t *hi)
{
    char a[RANGE_TEXT_MAX];
    if (!s || strlen(s) >= sizeof a)
        return -1;
    memcpy(a, s, strlen(s) + 1);
    char *dash = strchr(a, '-');
    if (dash)
        *dash = '\0';
    long x, y;
    if (st_parse_long(a, &x) || (dash ? st_parse_long(dash + 1, &y) : (y = x, 0)))
        return -1;
    if (x < (long)min || y < x || y > (long)max)
        return -1;
    *lo = (uint32_t)x;
    *hi = (uint32_t)y;
    return 0;
}

int st_parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s || *s == '-')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || end == s)
        return -1;
    *out = (uint64_t)v;
    return 0;
}

int st_parse_rate(const char *s, double *out)
{
    if (s && (!strcasecmp(s, "inf") || !strcasecmp(s, "infinity"))) {
        *out = INFINITY;
        return 0;
    }
    double v;
    if (st_parse_double(s, &v) < 0 || v <= 0)
        return -1;
    *out = v;
    return 0;
}

int st_parse_duration_s(const char *s, double *out_seconds)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !isfinite(v) || v < 0)
        return -1;
    double mul;
    if (!*end || !strcmp(end, "s"))
        mul = 1;
    else if (!strcmp(end, "ms"))
        mul = 1e-3;
    else if (!strcmp(end, "us"))
        mul = 1e-6;
    else if (!strcmp(end, "ns"))
        mul = 1e-9;
    else if (!strcmp(end, "m"))
        mul = 60;
    else if (!strcmp(end, "h"))
        mul = 3600;
    else
        return -1;
    if (!(v * mul <= ST_DURATION_MAX_S))
        return -1;
    *out_seconds = v * mul;
    return 0;
}

size_t st_strlcpy(char *dst, const char *src, size_t dstlen)
{
    size_t n = strlen(src);
    if (dstlen) {
        size_t c = n < dstlen - 1 ? n : dstlen - 1;
        memcpy(dst, src, c);
        dst[c] = '\0';
    }
    return n;
}

char *st_fmt_shortest(char *dst, size_t dstlen, double v, int python_style)
{
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(dst, dstlen, "%.*g", prec, v);
        if (strtod(dst, NULL) == v)
            break;
    }
    if (prec > 17)
        prec = 17;
    double a = fabs(v);
    /* Like repr: plain decimals between 1e-4 and 1e16, exponents outside. */
    if (isfinite(v) && a != 0 && a >= 1e-4 && a < 1e16 && strchr(dst, 'e')) {
        int mag = (int)floor(log10(a));
        int decimals = prec - 1 - mag;
        snprintf(dst, dstlen, "%.*f", decimals > 0 ? decimals : 0, v);
    }
    if (python_style && isfinite(v) && !strpbrk(dst, ".eEn")) {
        size_t n = strlen(dst);
        if (n + 2 < dstlen)
            memcpy(dst + n, ".0", 3);
    }
    /* prometheus_client's floatToGoString: Go switches to exponents sooner than Python. */
    const char *dot = strchr(dst, '.');
    if (python_style && v > 0 && dot && dot - dst > 6 && !strchr(dst, 'e')) {
        char mant[40];
        int dexp = (int)(dot - dst) - 1;
        size_t m = 0;
        mant[m++] = dst[0];
        mant[m++] = '.';
        for (const char *q = dst + 1; *q && m < sizeof mant - 1; q++)
            if (*q != '.')
                mant[m++] = *q;
        while (m > 0 && (mant[m - 1] == '0' || mant[m - 1] == '.'))
            m--;
        mant[m] = '\0';
        snprintf(dst, dstlen, "%se+%02d", mant, dexp);
    }
    return dst;
}
