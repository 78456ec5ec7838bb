#include "plan/disagg_sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/sustain.h"
#include "core/util.h"
#include "emu/pool.h"
#include "load/arrival.h"
#include "load/steady.h"

/* The capacity search: doublings above the start at most (4 x start), bisections at most (a
 * start 2^10 times too high still ends). */
#define DISAGG_SIM_DOUBLINGS 2
#define DISAGG_SIM_BISECTIONS 10

/* The nearest-rank percentile q of v[0..k) (sorted here); NAN when k is 0. */
static double pct(double *v, uint32_t k, double q)
{
    if (!k)
        return NAN;
    qsort(v, k, sizeof *v, st_cmp_double);
    size_t r = (size_t)ceil(q * k);
    return v[r ? r - 1 : 0];
}

/* The ids two items share at their start. */
static uint32_t shared_prefix(const st_emu_sim_item *a, const st_emu_sim_item *b)
{
    uint32_t k = 0;
    if (a->input_ids && b->input_ids && a != b)
        while (k < a->input_len && k < b->input_len && a->input_ids[k] == b->input_ids[k])
            k++;
    return k;
}

/* Each request's KV over its prefill engine's link, one transfer after another per link, in the
 * order the answers came: dec[i].arrival = when its KV is at the decode pool. */
typedef struct xfer {
    st_ns done;
    uint32_t i;
} xfer;

static int cmp_xfer(const void *a, const void *b)
{
    const xfer *p = a, *q = b;
    if (p->done != q->done)
        return p->done < q->done ? -1 : 1;
    return p->i < q->i ? -1 : p->i > q->i;
}

static int transfers(const st_emu_config *cfg, const st_emu_pool_out *pre, uint32_t n, int x, int tp,
                     const st_disagg_link *l, st_emu_sim_item *dec, double *xfer_s)
{
    xfer *q = malloc(((size_t)n + 1) * sizeof *q);
    st_ns *free_at = calloc((size_t)x, sizeof *free_at);
    if (!q || !free_at) {
        free(q);
        free(free_at);
        return -1;
    }
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++)
        if (!pre[i].rejected && pre[i].first_token >= 0)
            q[m++] = (xfer){ pre[i].first_token, i };
        else /* refused by the prefill engine (too long): the decode engine, the same, refuses it too */
            dec[i].arrival = pre[i].end >= 0 ? pre[i].end : 0;
    qsort(q, m, sizeof *q, cmp_xfer);
    double bpt = st_disagg_kv_bytes_per_token(&cfg->model, cfg->kv_dtype);
    for (uint32_t j = 0; j < m; j++) {
        uint32_t i = q[j].i, k = pre[i].engine;
        st_ns start = free_at[k] > q[j].done ? free_at[k] : q[j].done;
        st_ns end = start + (st_ns)ceil(st_disagg_transfer_s(l, tp, dec[i].input_len, bpt) * 1e9);
        free_at[k] = end;
        dec[i].arrival = end;
        xfer_s[j] = (double)(end - q[j].done) / 1e9;
    }
    free(q);
    free(free_at);
    return (int)m;
}

/* The sustained search's growth test (audit/sustain.h) on TTFT against the arrival time, the
 * requests in arrival order (the schedule's): a queue that grows through the run. */
static void growth(const st_emu_sim_item *arr, const st_emu_pool_out *dec, uint32_t n, double *x, double *y,
                   const st_disagg_work *w, st_disagg_sim *out)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++)
        if (!dec[i].rejected && dec[i].first_token >= 0) {
            x[k] = (double)arr[i].arrival / 1e9;
            y[k++] = (double)(dec[i].first_token - arr[i].arrival) / 1e9;
        }
    st_trend t;
    if (st_trend_fit(x, y, k, ST_SUSTAIN_MAX_BATCHES, &t))
        return;
    out->ttft_slope = t.slope;
    out->growing = w->growth_p > 0 && t.slope > ST_SUSTAIN_GROWTH_MARGIN && t.p_growth < w->growth_p;
}

/* The figures of a run from both pools' outcomes. */
static void figures(const st_emu_sim_item *arr, const st_emu_pool_out *pre, const st_emu_pool_out *dec, uint32_t n,
                    double *a, double *b, const st_disagg_work *w, st_disagg_sim *out)
{
    uint32_t kt = 0, kp = 0, kd = 0;
    st_ns last = 0;
    for (uint32_t i = 0; i < n; i++)
        if (pre[i].first_token >= 0)
            b[kp++] = (double)(pre[i].first_token - arr[i].arrival) / 1e9;
    out->prefill_p95_s = pct(b, kp, 0.95);
    for (uint32_t i = 0; i < n; i++) {
        if (dec[i].rejected || dec[i].first_token < 0 || dec[i].end < 0 || pre[i].first_token < 0)
            continue;
        out->answered++;
        a[kt++] = (double)(dec[i].first_token - arr[i].arrival) / 1e9;
        if (dec[i].end > last)
            last = dec[i].end;
    }
    out->ttft_p50_s = pct(a, kt, 0.50);
    out->ttft_p95_s = pct(a, kt, 0.95);
    for (uint32_t i = 0; i < n; i++)
        if (!dec[i].rejected && dec[i].end >= 0 && dec[i].tokens > 1)
            b[kd++] = (double)(dec[i].end - dec[i].first_token) / 1e9 / (dec[i].tokens - 1);
    out->tpot_p50_s = kd ? pct(b, kd, 0.50) : 0;
    out->tpot_p95_s = kd ? pct(b, kd, 0.95) : 0;
    out->duration_s = n ? (double)(last - arr[0].arrival) / 1e9 : 0;
    growth(arr, dec, n, a, b, w, out);
    out->meets = out->answered == n && n > 0 && !out->growing &&
                 (!(w->ttft_slo_s > 0) || out->ttft_p95_s <= w->ttft_slo_s) &&
                 (!(w->tpot_slo_s > 0) || out->tpot_p95_s <= w->tpot_slo_s);
}

int st_disagg_simulate(const st_emu_config *cfg, const st_emu_sim_item *items, uint32_t n, int x, int y, int tp,
                       const st_disagg_link *l, const st_disagg_work *w, double rate, uint64_t seed, st_disagg_sim *out,
                       char *why, size_t whylen)
{
    memset(out, 0, sizeof *out);
    out->rate = rate;
    if (!(rate > 0) || !n || x < 1 || y < 1) {
        snprintf(why, whylen, "no rate, no requests or an empty pool");
        return -1;
    }
    uint32_t n_items = n;
    double want = ceil(rate * w->window_s);
    if (want > n)
        n = want < ST_DISAGG_SIM_MAX_REQUESTS ? (uint32_t)want : ST_DISAGG_SIM_MAX_REQUESTS;
    out->n = n;
    int rc = -1;
    st_ns *sched = malloc((size_t)n * sizeof *sched);
    st_emu_sim_item *pi = calloc(n, sizeof *pi), *di = calloc(n, sizeof *di);
    st_emu_pool_out *po = calloc(n, sizeof *po), *dout = calloc(n, sizeof *dout);
    double *a = calloc(n, sizeof *a), *b = calloc(n, sizeof *b);
    if (!sched || !pi || !di || !po || !dout || !a || !b) {
        snprintf(why, whylen, "out of memory");
        goto done;
    }
    st_arrival arr = { .kind = ST_ARR_POISSON, .rate = rate, .seed = seed };
    if (st_arrival_schedule(&arr, n, sched)) {
        snprintf(why, whylen, "bad arrival rate %g", rate);
        goto done;
    }
    for (uint32_t i = 0; i < n; i++) {
        pi[i] = items[i % n_items];
        if (i >= n_items) /* the same prompt again would be a prefix-cache hit: its own tokens after
                             the prefix it shares with the next item (a shared system prompt) */
            pi[i].fresh_from = shared_prefix(&items[i % n_items], &items[(i + 1) % n_items]) + 1;
        pi[i].arrival = sched[i];
        pi[i].output_len = 1; /* the prefill engine's answer: its first token */
        pi[i].kv_external = 0;
        di[i] = pi[i];
        di[i].output_len = items[i % n_items].output_len;
        di[i].kv_external = di[i].input_len; /* its KV arrives with it */
        di[i].arrival = -1;
    }
    if (st_emu_pool_run(cfg, (uint32_t)x, pi, n, po, why, whylen))
        goto done;
    int m = transfers(cfg, po, n, x, tp, l, di, b);
    if (m < 0) {
        snprintf(why, whylen, "out of memory");
        goto done;
    }
    out->transfer_p95_s = pct(b, (uint32_t)m, 0.95);
    if (st_emu_pool_run(cfg, (uint32_t)y, di, n, dout, why, whylen))
        goto done;
    figures(pi, po, dout, n, a, b, w, out);
    rc = 0;
done:
    free(sched);
    free(pi);
    free(di);
    free(po);
    free(dout);
    free(a);
    free(b);
    return rc;
}

int st_disagg_sim_capacity(const st_emu_config *cfg, const st_emu_sim_item *items, uint32_t n, int x, int y, int tp,
                           const st_disagg_link *l, const st_disagg_work *w, double start, uint64_t seed,
                           double rel_tol, st_disagg_sim *out, char *why, size_t whylen)
{
    memset(out, 0, sizeof *out);
    if (!(start > 0) || !(rel_tol > 0)) {
        snprintf(why, whylen, "no rate to start the search from");
        return -1;
    }
    st_disagg_sim s;
    double lo = 0, hi = start;
    /* upwards while it meets: lo meets, hi does not (or is the last doubling's) */
    for (int d = 0; d <= DISAGG_SIM_DOUBLINGS; d++) {
        if (st_disagg_simulate(cfg, items, n, x, y, tp, l, w, hi, seed, &s, why, whylen))
            return -1;
        if (!s.meets)
            break;
        lo = hi;
        *out = s;
        if (d == DISAGG_SIM_DOUBLINGS)
            return 0; /* meets at 4 x start: said as such (the rate is a lower bound) */
        hi *= 2;
    }
    for (int k = 0; k < DISAGG_SIM_BISECTIONS && hi - lo > rel_tol * hi; k++) {
        double mid = (lo + hi) / 2;
        if (st_disagg_simulate(cfg, items, n, x, y, tp, l, w, mid, seed, &s, why, whylen))
            return -1;
        if (s.meets) {
            lo = mid;
            *out = s;
        } else
            hi = mid;
    }
    if (!(lo > 0))
        out->rate = 0;
    return 0;
}
