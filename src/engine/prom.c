#include "engine/prom.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

static int is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':'; }

static int is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }

static const char *blanks(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    return p;
}

void st_prom_iter_init(st_prom_iter *it, const char *text, size_t len)
{
    it->p = text;
    it->end = text ? text + len : NULL;
    it->line = 0;
}

/* Scans a label set starting after '{'; returns the '}' or NULL. */
static const char *scan_labels(const char *p, const char *end)
{
    for (;;) {
        p = blanks(p, end);
        if (p >= end)
            return NULL;
        if (*p == '}')
            return p;
        if (!(is_name_start(*p) && *p != ':'))
            return NULL;
        while (p < end && is_name_char(*p) && *p != ':')
            p++;
        p = blanks(p, end);
        if (p >= end || *p != '=')
            return NULL;
        p = blanks(p + 1, end);
        if (p >= end || *p != '"')
            return NULL;
        p++;
        while (p < end && *p != '"') {
            if (*p == '\\') {
                if (p + 1 >= end)
                    return NULL;
                p++;
            }
            p++;
        }
        if (p >= end)
            return NULL;
        p = blanks(p + 1, end);
        if (p >= end)
            return NULL;
        if (*p == ',') {
            p++;
            continue;
        }
        if (*p != '}')
            return NULL;
        return p;
    }
}

static int parse_value(const char *p, size_t n, double *out)
{
    char tmp[72];
    if (n == 0 || n >= sizeof tmp)
        return -1;
    memcpy(tmp, p, n);
    tmp[n] = '\0';
    char *e = NULL;
    double d = strtod(tmp, &e);
    if (e != tmp + n)
        return -1;
    *out = d;
    return 0;
}

int st_prom_next(st_prom_iter *it, st_prom_sample *s, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    while (it->p && it->p < it->end) {
        const char *line = it->p;
        const char *nl = memchr(line, '\n', (size_t)(it->end - line));
        const char *eol = nl ? nl : it->end;
        it->p = nl ? nl + 1 : it->end;
        it->line++;
        if (eol > line && eol[-1] == '\r')
            eol--;
        if ((size_t)(eol - line) > ST_PROM_LINE_MAX) {
            st_errf(err, errlen, "line %u: longer than %d bytes", it->line, ST_PROM_LINE_MAX);
            return -1;
        }
        const char *p = blanks(line, eol);
        if (p == eol || *p == '#')
            continue;
        s->line = it->line;
        if (!is_name_start(*p)) {
            st_errf(err, errlen, "line %u: expected a metric name", it->line);
            return -1;
        }
        s->name = p;
        while (p < eol && is_name_char(*p))
            p++;
        s->name_len = (size_t)(p - s->name);
        p = blanks(p, eol);
        if (p < eol && *p == '{') {
            const char *close = scan_labels(p + 1, eol);
            if (!close) {
                st_errf(err, errlen, "line %u: malformed label set", it->line);
                return -1;
            }
            s->labels = p + 1;
            s->labels_len = (size_t)(close - (p + 1));
            p = blanks(close + 1, eol);
        } else {
            s->labels = p;
            s->labels_len = 0;
        }
        const char *v = p;
        while (p < eol && *p != ' ' && *p != '\t')
            p++;
        if (parse_value(v, (size_t)(p - v), &s->value) < 0) {
            st_errf(err, errlen, "line %u: malformed value", it->line);
            return -1;
        }
        p = blanks(p, eol);
        if (p < eol) {
            const char *t = p;
            while (p < eol && *p != ' ' && *p != '\t')
                p++;
            char tmp[24];
            size_t n = (size_t)(p - t);
            char *e = NULL;
            if (n >= sizeof tmp) {
                st_errf(err, errlen, "line %u: malformed timestamp", it->line);
                return -1;
            }
            memcpy(tmp, t, n);
            tmp[n] = '\0';
            long long ts = strtoll(tmp, &e, 10);
            if (e != tmp + n || blanks(p, eol) != eol) {
                st_errf(err, errlen, "line %u: malformed timestamp", it->line);
                return -1;
            }
            s->has_timestamp = 1;
            s->timestamp_ms = ts;
        }
        return 1;
    }
    return 0;
}

/* Walks the label text; for each label calls back with name and the raw (escaped) value.
 * Returns 1 when found (value view set), 0 when not, -1 malformed. */
static int find_label(const char *p, const char *end, const char *name, size_t nlen, const char **val, size_t *vlen)
{
    for (;;) {
        p = blanks(p, end);
        if (p >= end)
            return 0;
        const char *k = p;
        while (p < end && is_name_char(*p))
            p++;
        size_t klen = (size_t)(p - k);
        if (klen == 0)
            return -1;
        p = blanks(p, end);
        if (p >= end || *p != '=')
            return -1;
        p = blanks(p + 1, end);
        if (p >= end || *p != '"')
            return -1;
        const char *v = ++p;
        while (p < end && *p != '"') {
            if (*p == '\\')
                p++;
            p++;
        }
        if (p >= end)
            return -1;
        if (klen == nlen && memcmp(k, name, nlen) == 0) {
            *val = v;
            *vlen = (size_t)(p - v);
            return 1;
        }
        p = blanks(p + 1, end);
        if (p < end && *p == ',')
            p++;
    }
}

static size_t unescape(const char *v, size_t n, char *buf, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < cap; i++) {
        char c = v[i];
        if (c == '\\' && i + 1 < n) {
            c = v[++i];
            if (c == 'n')
                c = '\n';
        }
        buf[o++] = c;
    }
    if (cap)
        buf[o] = '\0';
    return o;
}

int st_prom_label(const st_prom_sample *s, const char *name, char *buf, size_t cap)
{
    if (buf && cap)
        buf[0] = '\0';
    const char *v;
    size_t vlen;
    int rc = find_label(s->labels, s->labels + s->labels_len, name, strlen(name), &v, &vlen);
    if (rc < 0)
        return -1;
    if (rc == 0)
        return 1;
    if (buf && cap)
        unescape(v, vlen, buf, cap);
    return 0;
}

/* Compares a raw (escaped) label value with plain text. */
static int value_eq(const char *v, size_t vlen, const char *want, size_t wlen)
{
    size_t j = 0;
    for (size_t i = 0; i < vlen; i++) {
        char c = v[i];
        if (c == '\\' && i + 1 < vlen) {
            c = v[++i];
            if (c == 'n')
                c = '\n';
        }
        if (j >= wlen || want[j] != c)
            return 0;
        j++;
    }
    return j == wlen;
}

int st_prom_match(const st_prom_sample *s, const char *match)
{
    if (!match)
        return 1;
    const char *p = match;
    while (*p) {
        const char *eq = strchr(p, '=');
        if (!eq)
            return 0;
        const char *comma = strchr(eq, ',');
        size_t vlen = comma ? (size_t)(comma - eq - 1) : strlen(eq + 1);
        const char *v;
        size_t rv;
        if (find_label(s->labels, s->labels + s->labels_len, p, (size_t)(eq - p), &v, &rv) != 1)
            return 0;
        if (!value_eq(v, rv, eq + 1, vlen))
            return 0;
        if (!comma)
            break;
        p = comma + 1;
    }
    return 1;
}

static int name_is(const st_prom_sample *s, const char *name, size_t n)
{
    return s->name_len == n && memcmp(s->name, name, n) == 0;
}

int st_prom_get(const char *text, size_t len, const char *name, const char *match, double *out)
{
    st_prom_iter it;
    st_prom_sample s;
    size_t n = strlen(name);
    int rc;
    st_prom_iter_init(&it, text, len);
    while ((rc = st_prom_next(&it, &s, NULL, 0)) != 0) {
        if (rc == 1 && name_is(&s, name, n) && st_prom_match(&s, match)) {
            *out = s.value;
            return 0;
        }
    }
    return 1;
}

int st_prom_sum(const char *text, size_t len, const char *name, const char *match, double *sum, uint32_t *count)
{
    st_prom_iter it;
    st_prom_sample s;
    size_t n = strlen(name);
    uint32_t c = 0;
    double acc = 0;
    int rc;
    st_prom_iter_init(&it, text, len);
    while ((rc = st_prom_next(&it, &s, NULL, 0)) != 0) {
        if (rc == 1 && name_is(&s, name, n) && st_prom_match(&s, match)) {
            acc += s.value;
            c++;
        }
    }
    *sum = acc;
    if (count)
        *count = c;
    return c ? 0 : 1;
}

int st_prom_histogram(const char *text, size_t len, const char *base, const char *match, st_prom_hist *h)
{
    memset(h, 0, sizeof *h);
    char bucket[256], sum[256], cnt[256];
    if (snprintf(bucket, sizeof bucket, "%s_bucket", base) >= (int)sizeof bucket)
        return 1;
    snprintf(sum, sizeof sum, "%s_sum", base);
    snprintf(cnt, sizeof cnt, "%s_count", base);
    size_t nb = strlen(bucket), ns = strlen(sum), nc = strlen(cnt);
    st_prom_iter it;
    st_prom_sample s;
    int rc, any = 0;
    st_prom_iter_init(&it, text, len);
    while ((rc = st_prom_next(&it, &s, NULL, 0)) != 0) {
        if (rc != 1 || !st_prom_match(&s, match))
            continue;
        if (name_is(&s, bucket, nb)) {
            char lev[64];
            double le;
            if (st_prom_label(&s, "le", lev, sizeof lev) != 0 || parse_value(lev, strlen(lev), &le) < 0)
                continue;
            uint32_t i = 0;
            while (i < h->n && h->le[i] < le)
                i++;
            if (i < h->n && h->le[i] == le) {
                h->count[i] += s.value;
            } else {
                if (h->n == ST_PROM_BUCKETS_MAX)
                    return -1;
                memmove(&h->le[i + 1], &h->le[i], (h->n - i) * sizeof h->le[0]);
                memmove(&h->count[i + 1], &h->count[i], (h->n - i) * sizeof h->count[0]);
                h->le[i] = le;
                h->count[i] = s.value;
                h->n++;
            }
            any = 1;
        } else if (name_is(&s, sum, ns)) {
            h->sum += s.value;
        } else if (name_is(&s, cnt, nc)) {
            h->total += s.value;
        }
    }
    return any ? 0 : 1;
}

int st_prom_hist_delta(const st_prom_hist *a, const st_prom_hist *b, st_prom_hist *out)
{
    if (a->n != b->n)
        return -1;
    for (uint32_t i = 0; i < a->n; i++)
        if (a->le[i] != b->le[i])
            return -1;
    st_prom_hist r = *b;
    for (uint32_t i = 0; i < a->n; i++)
        r.count[i] = b->count[i] - a->count[i];
    r.sum = b->sum - a->sum;
    r.total = b->total - a->total;
    *out = r;
    return 0;
}

double st_prom_hist_quantile(const st_prom_hist *h, double q)
{
    if (!h || h->n == 0 || isnan(q))
        return NAN;
    if (q < 0)
        q = 0;
    if (q > 1)
        q = 1;
    double total = h->count[h->n - 1];
    if (!(total > 0))
        return NAN;
    double rank = q * total;
    uint32_t i = 0;
    while (i < h->n - 1 && h->count[i] < rank)
        i++;
    if (isinf(h->le[i]))
        return i > 0 ? h->le[i - 1] : NAN;
    double lo = i > 0 ? h->le[i - 1] : 0;
    double below = i > 0 ? h->count[i - 1] : 0;
    double in = h->count[i] - below;
    if (i == 0 && h->le[0] <= 0)
        return h->le[0];
    if (!(in > 0))
        return h->le[i];
    return lo + (h->le[i] - lo) * (rank - below) / in;
}
