#include "audit/plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const state_names[] = { "refused", "pruned", "none passed", "ok" };

const char *st_plan_state_name(st_plan_state s)
{
    return s >= ST_PLAN_REFUSED && s <= ST_PLAN_OK ? state_names[s] : "unknown";
}

int st_plan_quality_risk(const char *w)
{
    if (!w || !strcasecmp(w, "bf16") || !strcasecmp(w, "fp16") || !strcasecmp(w, "auto"))
        return 0;
    if (!strcasecmp(w, "fp8"))
        return 1;
    if (!strcasecmp(w, "int8") || !strcasecmp(w, "w8a8"))
        return 2;
    return 3; /* awq, gptq and other 4-bit formats */
}

static double cost_per_1m(const st_plan_candidate *c, double output_tps)
{
    if (!(output_tps > 0))
        return INFINITY;
    return c->price_per_gpu_hour * c->tp / (output_tps * 3600.0) * 1e6;
}

/* Sort keys copied out of the candidates (qsort has no context argument). */
typedef struct key {
    double a, b, c; /* compared in this order: a ascending, b descending, c ascending */
    int idx;
} key;

static int by_key(const void *pa, const void *pb)
{
    const key *x = pa, *y = pb;
    if (x->a != y->a)
        return x->a < y->a ? -1 : 1;
    if (x->b != y->b)
        return x->b > y->b ? -1 : 1;
    if (x->c != y->c)
        return x->c < y->c ? -1 : 1;
    return x->idx - y->idx;
}

int st_plan_order(const st_plan_candidate *c, int n, int *idx, int max)
{
    key *k = malloc(sizeof *k * (size_t)(n > 0 ? n : 1));
    if (!k)
        return 0;
    int m = 0;
    for (int i = 0; i < n; i++)
        if (c[i].state == ST_PLAN_OK)
            k[m++] = (key){ c[i].usd_per_1m, c[i].capacity_rps, c[i].ttft_p95_ms, i };
    qsort(k, (size_t)m, sizeof *k, by_key);
    if (m > max)
        m = max;
    for (int i = 0; i < m; i++)
        idx[i] = k[i].idx;
    free(k);
    return m;
}

/* The k-th lowest cost among the evaluated candidates, INFINITY while fewer than k passed. */
static double kth_cost(const st_plan_candidate *c, const int *done, int ndone, int k)
{
    double best[64];
    int m = 0;
    if (k > 64)
        k = 64;
    for (int d = 0; d < ndone; d++) {
        const st_plan_candidate *x = &c[done[d]];
        if (x->state != ST_PLAN_OK)
            continue;
        double v = x->usd_per_1m;
        int j = m < k ? m++ : k;
        if (j == k && !(v < best[k - 1]))
            continue;
        if (j == k)
            j = k - 1;
        while (j > 0 && v < best[j - 1]) {
            best[j] = best[j - 1];
            j--;
        }
        best[j] = v;
    }
    return m < k ? INFINITY : best[k - 1];
}

/* Marks the frontiers: an OK candidate is on one when no other OK candidate is at least as good
 * on both axes and strictly better on one. */
static void frontiers(st_plan_candidate *c, int n)
{
    for (int i = 0; i < n; i++) {
        if (c[i].state != ST_PLAN_OK)
            continue;
        int lat = 1, qual = 1;
        double qi = st_plan_quality_risk(c[i].weights);
        for (int j = 0; j < n && (lat || qual); j++) {
            if (j == i || c[j].state != ST_PLAN_OK)
                continue;
            double qj = st_plan_quality_risk(c[j].weights);
            int cheaper_eq = c[j].usd_per_1m <= c[i].usd_per_1m, cheaper = c[j].usd_per_1m < c[i].usd_per_1m;
            if (cheaper_eq && c[j].ttft_p95_ms <= c[i].ttft_p95_ms && (cheaper || c[j].ttft_p95_ms < c[i].ttft_p95_ms))
                lat = 0;
            if (cheaper_eq && qj <= qi && (cheaper || qj < qi))
                qual = 0;
        }
        c[i].on_frontier = lat | (qual << 1);
    }
}

int st_plan_search(st_plan_candidate *c, int n, int top_k, double out_tokens, const st_plan_ops *ops,
                   st_plan_stats *stats)
{
    memset(stats, 0, sizeof *stats);
    stats->candidates = n;
    if (top_k < 1)
        top_k = 1;
    int *order = malloc(sizeof *order * (size_t)(n > 0 ? n : 1));
    int *done = malloc(sizeof *done * (size_t)(n > 0 ? n : 1));
    key *bounds = malloc(sizeof *bounds * (size_t)(n > 0 ? n : 1));
    int best = -1;
    if (!order || !done || !bounds)
        goto out;
    int nf = 0, ndone = 0;
    for (int i = 0; i < n; i++) {
        st_plan_candidate *x = &c[i];
        x->rank = 0;
        x->on_frontier = 0;
        x->capacity_rps = x->output_tps = x->ttft_p95_ms = x->tpot_p95_ms = NAN;
        x->usd_per_1m = x->lb_usd_per_1m = NAN;
        x->bound_rps = 0;
        x->why[0] = '\0';
        if (ops->screen(ops->arg, x, x->why, sizeof x->why) || !(x->bound_rps > 0)) {
            x->state = ST_PLAN_REFUSED;
            if (!x->why[0])
                snprintf(x->why, sizeof x->why, "no request completes on it");
            stats->refused++;
            continue;
        }
        stats->screened++;
        x->lb_usd_per_1m = cost_per_1m(x, x->bound_rps * out_tokens);
        x->state = ST_PLAN_PRUNED;
        bounds[nf++] = (key){ x->lb_usd_per_1m, 0, 0, i };
    }
    qsort(bounds, (size_t)nf, sizeof *bounds, by_key); /* lowest cost bound first */
    for (int k = 0; k < nf; k++) {
        st_plan_candidate *x = &c[bounds[k].idx];
        /* the k-th best found already costs no more than this one can: stop */
        if (kth_cost(c, done, ndone, top_k) <= x->lb_usd_per_1m)
            break;
        stats->evaluated++;
        done[ndone++] = bounds[k].idx;
        if (ops->evaluate(ops->arg, x, x->why, sizeof x->why)) {
            x->state = ST_PLAN_REFUSED;
            stats->refused++;
            continue;
        }
        if (!(x->capacity_rps > 0) || !(x->output_tps > 0)) {
            x->state = ST_PLAN_NONE_PASSED;
            if (!x->why[0])
                snprintf(x->why, sizeof x->why, "met the SLO at no rate");
            continue;
        }
        x->state = ST_PLAN_OK;
        x->usd_per_1m = cost_per_1m(x, x->output_tps);
        stats->passed++;
    }
    for (int i = 0; i < n; i++)
        stats->pruned += c[i].state == ST_PLAN_PRUNED;
    frontiers(c, n);
    int m = st_plan_order(c, n, order, n);
    for (int r = 0; r < m; r++)
        c[order[r]].rank = r + 1;
    best = m > 0 ? order[0] : -1;
out:
    free(order);
    free(done);
    free(bounds);
    return best;
}
