#include "plan/prices.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/csv.h"
#include "core/parse.h"

/* data/gpu-prices.csv, built in by scripts/embed (Makefile). */
extern const unsigned char st_prices_default_csv[];
extern const unsigned long st_prices_default_csv_len;

static const char *const kind_names[ST_PRICE__COUNT] = {
    "on-demand", "spot", "marketplace", "serverless", "serverless-active", "endpoint", "suspect",
};

const char *st_price_kind_name(st_price_kind k) { return k >= 0 && k < ST_PRICE__COUNT ? kind_names[k] : "unknown"; }

void st_prices_free(st_prices *p)
{
    for (int i = 0; i < p->n; i++) {
        st_price *x = &p->v[i];
        free(x->gpu_key);
        free(x->provider);
        free(x->offering);
        free(x->source);
        free(x->source_date);
    }
    free(p->v);
    free(p->origin);
    memset(p, 0, sizeof *p);
}

/* The columns read, by name. */
enum { C_GPU, C_USD, C_KIND, C_PROVIDER, C_OFFERING, C_SOURCE, C_DATE, C__COUNT };
static const char *const col_names[C__COUNT] = { "gpu_key",  "usd_per_gpu_hour", "kind",       "provider",
                                                 "offering", "source",           "source_date" };

static char *field(const st_csv *c, const int *col, int k)
{
    return strdup(col[k] >= 0 && col[k] < c->n ? c->field[col[k]] : "");
}

/* One data row into out. 0, or -1 with the reason (without the file:line prefix). */
static int parse_row(const st_csv *c, const int *col, st_price *out, char *why, size_t whylen)
{
    memset(out, 0, sizeof *out);
    const char *gpu = col[C_GPU] < c->n ? c->field[col[C_GPU]] : "";
    const char *usd = col[C_USD] < c->n ? c->field[col[C_USD]] : "";
    if (!*gpu) {
        snprintf(why, whylen, "gpu_key: empty");
        return -1;
    }
    if (st_parse_double(usd, &out->usd_per_gpu_hour) || !(out->usd_per_gpu_hour > 0) ||
        !(out->usd_per_gpu_hour <= ST_PRICES_MAX_USD_PER_GPU_HOUR)) {
        snprintf(why, whylen, "usd_per_gpu_hour: expected a number > 0 and at most %g, got '%.40s'",
                 ST_PRICES_MAX_USD_PER_GPU_HOUR, usd);
        return -1;
    }
    out->kind = ST_PRICE_ON_DEMAND;
    if (col[C_KIND] >= 0 && col[C_KIND] < c->n && *c->field[col[C_KIND]]) {
        const char *k = c->field[col[C_KIND]];
        int found = 0;
        for (int i = 0; i < ST_PRICE__COUNT && !found; i++)
            if (!strcmp(k, kind_names[i])) {
                out->kind = (st_price_kind)i;
                found = 1;
            }
        if (!found) {
            snprintf(why, whylen,
                     "kind: '%.40s' is not one of on-demand, spot, marketplace, serverless, serverless-active, "
                     "endpoint, suspect",
                     k);
            return -1;
        }
    }
    out->gpu_key = field(c, col, C_GPU);
    out->provider = field(c, col, C_PROVIDER);
    out->offering = field(c, col, C_OFFERING);
    out->source = field(c, col, C_SOURCE);
    out->source_date = field(c, col, C_DATE);
    if (!out->gpu_key || !out->provider || !out->offering || !out->source || !out->source_date) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    return 0;
}

int st_prices_parse(const char *name, const char *text, size_t len, st_prices *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    st_csv c;
    char why[200];
    int col[C__COUNT], cap = 0, rc = -1;
    st_csv_init(&c, text, len);
    int r = st_csv_next(&c, why, sizeof why);
    if (r <= 0) {
        snprintf(err, errlen, "%s: %s", name, r < 0 ? why : "empty (a header row and one price at least)");
        goto done;
    }
    for (int k = 0; k < C__COUNT; k++)
        col[k] = st_csv_find(&c, col_names[k]);
    if (col[C_GPU] < 0 || col[C_USD] < 0) {
        snprintf(err, errlen, "%s:%u: the header must name the columns gpu_key and usd_per_gpu_hour", name, c.rec_line);
        goto done;
    }
    out->origin = strdup(name);
    while ((r = st_csv_next(&c, why, sizeof why)) == 1) {
        if (out->n == ST_PRICES_MAX_ROWS) {
            snprintf(err, errlen, "%s:%u: more than %d prices", name, c.rec_line, ST_PRICES_MAX_ROWS);
            goto done;
        }
        if (out->n == cap) {
            int nc = cap ? cap * 2 : 64;
            st_price *nv = realloc(out->v, sizeof *nv * (size_t)nc);
            if (!nv) {
                snprintf(err, errlen, "%s: out of memory", name);
                goto done;
            }
            out->v = nv;
            cap = nc;
        }
        st_price *p = &out->v[out->n];
        int bad = parse_row(&c, col, p, why, sizeof why);
        p->line = c.rec_line;
        out->n++; /* counted even when bad, so st_prices_free frees what it holds */
        if (bad) {
            snprintf(err, errlen, "%s:%u: %s", name, c.rec_line, why);
            goto done;
        }
    }
    if (r < 0) {
        snprintf(err, errlen, "%s: %s", name, why);
        goto done;
    }
    if (!out->n) {
        snprintf(err, errlen, "%s: no prices after the header", name);
        goto done;
    }
    rc = 0;
done:
    st_csv_free(&c);
    if (rc)
        st_prices_free(out);
    return rc;
}

int st_prices_builtin(st_prices *out, char *err, size_t errlen)
{
    return st_prices_parse("the built-in price list (data/gpu-prices.csv)", (const char *)st_prices_default_csv,
                           (size_t)st_prices_default_csv_len, out, err, errlen);
}

static const st_price *pick_exact(const st_prices *p, const char *gpu_key, st_price_kind kind, const char *provider)
{
    const st_price *best = NULL;
    for (int i = 0; i < p->n; i++) {
        const st_price *x = &p->v[i];
        if (x->kind != kind || strcasecmp(x->gpu_key, gpu_key))
            continue;
        if (provider && *provider && strcasecmp(x->provider, provider))
            continue;
        if (!best || x->usd_per_gpu_hour < best->usd_per_gpu_hour)
            best = x;
    }
    return best;
}

const st_price *st_prices_pick(const st_prices *p, const char *gpu_key, st_price_kind kind, const char *provider)
{
    const st_price *x = pick_exact(p, gpu_key, kind, provider);
    if (x)
        return x;
    /* a price whose source does not say the form factor ("H100-unspecified") stands for every
     * form of that GPU (H100, H100-NVL, H100-PCIe) */
    char any[64];
    snprintf(any, sizeof any, "%.*s-unspecified", (int)strcspn(gpu_key, "-"), gpu_key);
    return strcmp(any, gpu_key) ? pick_exact(p, any, kind, provider) : NULL;
}

int st_prices_gpus(const st_prices *p, st_price_kind kind, const char **keys, int max)
{
    int n = 0;
    for (int i = 0; i < p->n; i++) {
        if (p->v[i].kind != kind)
            continue;
        int seen = 0;
        for (int j = 0; j < n && !seen; j++)
            seen = !strcasecmp(keys[j], p->v[i].gpu_key);
        if (!seen && n < max)
            keys[n++] = p->v[i].gpu_key;
    }
    return n;
}
