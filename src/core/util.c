#include "core/util.h"

#include <ctype.h>

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

int st_grow(void **arr, size_t *cap, size_t need, size_t elem, size_t first)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : (first ? first : 16);
    while (c < need) {
        if (c > SIZE_MAX / 2)
            return -1;
        c *= 2;
    }
    if (elem && c > SIZE_MAX / elem)
        return -1;
    void *p = realloc(*arr, c * elem);
    if (!p)
        return -1;
    *arr = p;
    *cap = c;
    return 0;
}

int st_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    int nx = isnan(x), ny = isnan(y);
    if (nx || ny)
        return nx - ny;
    return (x > y) - (x < y);
}

void st_errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

void st_text_sanitize(char *s, int keep_newlines)
{
    for (unsigned char *p = (unsigned char *)s; p && *p; p++) {
        if (*p == '\n' && keep_newlines)
            continue;
        if (*p < 0x20 || *p == 0x7f)
            *p = ' ';
        else if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) /* U+0080..U+009F: C1 (CSI is U+009B) */
            p[0] = p[1] = ' ';
    }
}

void st_trim(const char **p, size_t *n)
{
    while (*n && st_is_ws(**p))
        (*p)++, (*n)--;
    while (*n && st_is_ws((*p)[*n - 1]))
        (*n)--;
}

int st_line_is_blank(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && st_is_ws(s[i]))
        i++;
    return i == n || s[i] == '#';
}

void st_slug(const char *s, char *out, size_t n, size_t max)
{
    if (!n)
        return;
    size_t j = 0, cap = n - 1 < max ? n - 1 : max;
    for (const char *p = s ? s : ""; *p && j < cap; p++) {
        unsigned char ch = (unsigned char)*p;
        char d = isalnum(ch) ? (char)tolower(ch) : '-';
        if (d == '-' && (j == 0 || out[j - 1] == '-'))
            continue;
        out[j++] = d;
    }
    while (j > 0 && out[j - 1] == '-')
        j--;
    out[j] = '\0';
}

void st_heap_for_runs(void)
{
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, (int)ST_HEAP_MMAP_BYTES); /* (either setting alone ends glibc's own */
    mallopt(M_TRIM_THRESHOLD, (int)ST_HEAP_KEEP_BYTES); /* sliding thresholds: both are set) */
#endif
}
