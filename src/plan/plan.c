#include "plan/plan.h"

#include "emu/catalog.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

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

int st_plan_quality_apply(st_plan_candidate *c, int n, const st_plan_qmeasure *m, int nm)
{
    int given = 0;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < nm; k++)
            if (c[i].model && m[k].model && !strcmp(c[i].model, m[k].model) &&
                !strcmp(c[i].kv_dtype ? c[i].kv_dtype : "auto", m[k].kv_dtype ? m[k].kv_dtype : "auto")) {
                c[i].has_kld = 1;
                c[i].kld = m[k].kld;
                given++;
                break;
            }
    return given;
}

int st_plan_quality_measured(const st_plan_candidate *c, int n)
{
    int ok = 0;
    for (int i = 0; i < n; i++) {
        if (c[i].state != ST_PLAN_OK)
            continue;
        if (!c[i].has_kld)
            return 0;
        ok++;
    }
    return ok > 0;
}

/* Marks the frontiers: an OK candidate is on one when no other OK candidate is at least as good
 * on both axes and strictly better on one. The quality axis: the measured mean KL divergence when
 * every OK candidate has one, else the weight format's quality risk. */
static void frontiers(st_plan_candidate *c, int n)
{
    int measured = st_plan_quality_measured(c, n);
    for (int i = 0; i < n; i++) {
        if (c[i].state != ST_PLAN_OK)
            continue;
        int lat = 1, qual = 1;
        double qi = measured ? c[i].kld : st_plan_quality_risk(c[i].weights);
        for (int j = 0; j < n && (lat || qual); j++) {
            if (j == i || c[j].state != ST_PLAN_OK)
                continue;
            double qj = measured ? c[j].kld : st_plan_quality_risk(c[j].weights);
            int cheaper_eq = c[j].usd_per_1m <= c[i].usd_per_1m, cheaper = c[j].usd_per_1m < c[i].usd_per_1m;
            if (cheaper_eq && c[j].ttft_p95_ms <= c[i].ttft_p95_ms && (cheaper || c[j].ttft_p95_ms < c[i].ttft_p95_ms))
                lat = 0;
            if (cheaper_eq && qj <= qi && (cheaper || qj < qi))
                qual = 0;
        }
        c[i].on_frontier = lat | (qual << 1);
    }
}

/* Work shared by the worker threads: each takes the next index and runs fn on it. */
typedef struct pool {
    void (*fn)(void *arg, int i);
    void *arg;
    int n;
    pthread_mutex_t mu;
    int next;
} pool;

static void *pool_worker(void *arg)
{
    pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        int i = p->next < p->n ? p->next++ : -1;
        pthread_mutex_unlock(&p->mu);
        if (i < 0)
            return NULL;
        p->fn(p->arg, i);
    }
}

#define PLAN_THREADS_MAX 64

static void run_parallel(int n, int threads, void (*fn)(void *, int), void *arg)
{
    pool p = { .fn = fn, .arg = arg, .n = n, .next = 0 };
    pthread_t th[PLAN_THREADS_MAX];
    int started = 0;
    if (threads > PLAN_THREADS_MAX)
        threads = PLAN_THREADS_MAX;
    if (threads > n)
        threads = n;
    pthread_mutex_init(&p.mu, NULL);
    for (int t = 1; t < threads; t++)
        if (pthread_create(&th[started], NULL, pool_worker, &p) == 0)
            started++;
    pool_worker(&p); /* this thread works too; alone when no thread started */
    for (int t = 0; t < started; t++)
        pthread_join(th[t], NULL);
    pthread_mutex_destroy(&p.mu);
}

typedef struct screen_job {
    st_plan_candidate *c;
    const st_plan_ops *ops;
} screen_job;

static void screen_one(void *arg, int i)
{
    screen_job *j = arg;
    const st_plan_ops *ops = j->ops;
    st_plan_candidate *x = &j->c[i];
    x->rank = 0;
    x->on_frontier = 0;
    x->same = 0;
    x->capacity_rps = x->output_tps = x->ttft_p95_ms = x->tpot_p95_ms = NAN;
    x->usd_per_1m = x->lb_usd_per_1m = NAN;
    x->bound_rps = x->bound_tps = x->est_tps = 0;
    x->bound_estimate = 0;
    x->why[0] = '\0';
    x->state =
        ops->screen(ops->arg, x, x->why, sizeof x->why) || !(x->bound_rps > 0) ? ST_PLAN_REFUSED : ST_PLAN_PRUNED;
    if (x->state == ST_PLAN_REFUSED && !x->why[0])
        snprintf(x->why, sizeof x->why, "no request completes on it");
}

/* An evaluated candidate with the same nonzero `same` as x (its results stand for x's). */
static const st_plan_candidate *evaluated_twin(const st_plan_candidate *c, const int *done, int ndone,
                                               const st_plan_candidate *x)
{
    if (!x->same)
        return NULL;
    for (int d = 0; d < ndone; d++)
        if (c[done[d]].same == x->same && c[done[d]].state != ST_PLAN_PRUNED && c[done[d]].state != ST_PLAN_REFUSED)
            return &c[done[d]];
    return NULL;
}

/* A binary min-heap of candidate indexes by their current cost bound (ties: candidate order). */
typedef struct heap {
    key *v;
    int n;
} heap;

static void heap_push(heap *h, key k)
{
    int i = h->n++;
    h->v[i] = k;
    while (i > 0 && by_key(&h->v[i], &h->v[(i - 1) / 2]) < 0) {
        key t = h->v[i];
        h->v[i] = h->v[(i - 1) / 2];
        h->v[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

static key heap_pop(heap *h)
{
    key top = h->v[0];
    h->v[0] = h->v[--h->n];
    for (int i = 0;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && by_key(&h->v[l], &h->v[m]) < 0)
            m = l;
        if (r < h->n && by_key(&h->v[r], &h->v[m]) < 0)
            m = r;
        if (m == i)
            break;
        key t = h->v[i];
        h->v[i] = h->v[m];
        h->v[m] = t;
        i = m;
    }
    return top;
}

/* The output tokens/s no sustained rate of x exceeds: its proven bound, its rate bound times the
 * most output tokens per request, or refine's estimate in tokens, whichever is lowest. */
static double bound_tps(const st_plan_candidate *x, double out_tokens)
{
    double t = x->bound_rps * out_tokens;
    if (x->bound_tps > 0 && x->bound_tps < t)
        t = x->bound_tps;
    return x->est_tps > 0 && x->est_tps < t ? x->est_tps : t;
}

/* An evaluation's outcome into x's state. */
static void settle(st_plan_candidate *x, st_plan_stats *stats)
{
    if (!(x->capacity_rps > 0) || !(x->output_tps > 0)) {
        x->state = ST_PLAN_NONE_PASSED;
        if (!x->why[0])
            snprintf(x->why, sizeof x->why, "met the SLO at no rate");
        return;
    }
    x->state = ST_PLAN_OK;
    x->usd_per_1m = cost_per_1m(x, x->output_tps);
    stats->passed++;
}

static void copy_results(st_plan_candidate *x, const st_plan_candidate *twin)
{
    x->capacity_rps = twin->capacity_rps;
    x->output_tps = twin->output_tps;
    x->ttft_p95_ms = twin->ttft_p95_ms;
    x->tpot_p95_ms = twin->tpot_p95_ms;
    memcpy(x->why, twin->why, sizeof x->why);
}

/* One batch: what each of its candidates gets. */
enum { JOB_REFINE, JOB_EVAL, JOB_TWIN };

typedef struct batch {
    st_plan_candidate *c;
    const st_plan_ops *ops;
    int idx[ST_PLAN_BATCH_MAX], kind[ST_PLAN_BATCH_MAX], rc[ST_PLAN_BATCH_MAX];
} batch;

static void batch_one(void *arg, int i)
{
    batch *b = arg;
    st_plan_candidate *x = &b->c[b->idx[i]];
    if (b->kind[i] == JOB_REFINE)
        b->rc[i] = b->ops->refine(b->ops->arg, x, x->why, sizeof x->why);
    else if (b->kind[i] == JOB_EVAL)
        b->rc[i] = b->ops->evaluate(b->ops->arg, x, x->why, sizeof x->why);
}

int st_plan_search(st_plan_candidate *c, int n, int top_k, double out_tokens, const st_plan_ops *ops, int threads,
                   st_plan_stats *stats)
{
    st_plan_search_opts o = { .threads = threads, .batch = 1 };
    return st_plan_search_opt(c, n, top_k, out_tokens, ops, &o, stats);
}

/* The search's state: the candidates, the evaluated ones in order, the refined flags and the
 * heap of lower bounds. */
typedef struct search {
    st_plan_candidate *c;
    int n, top_k, threads, bsize;
    double out_tokens;
    const st_plan_ops *ops;
    const st_plan_search_opts *o;
    st_plan_stats *stats;
    int *done, ndone;
    char *refined;
    heap h;
    struct timespec t0;
} search;

/* Screens every candidate (in parallel) and pushes the ones not refused with their lower bounds. */
static void search_screen(search *s)
{
    screen_job sj = { s->c, s->ops };
    run_parallel(s->n, s->threads, screen_one, &sj);
    for (int i = 0; i < s->n; i++) {
        st_plan_candidate *x = &s->c[i];
        if (x->state == ST_PLAN_REFUSED) {
            s->stats->refused++;
            continue;
        }
        s->stats->screened++;
        x->lb_usd_per_1m = cost_per_1m(x, bound_tps(x, s->out_tokens));
        s->refined[i] = !s->ops->refine;
        heap_push(&s->h, (key){ x->lb_usd_per_1m, 0, 0, i });
    }
}

/* The progress callback's figures, with kth the k-th best cost found so far. */
static void search_progress(const search *s, double kth)
{
    struct timespec t1;
    st_plan_progress pg = { .done = s->ndone + s->stats->refused, .refined = s->stats->refined };
    for (int i = 0; i < s->h.n; i++)
        pg.pruned += kth <= s->h.v[i].a;
    pg.left = s->h.n - pg.pruned;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    pg.seconds = (double)(t1.tv_sec - s->t0.tv_sec) + (double)(t1.tv_nsec - s->t0.tv_nsec) / 1e9;
    s->o->progress(s->o->progress_arg, &pg);
}

/* The next batch: up to bsize candidates of the lowest bounds below kth, each refined, evaluated,
 * or given its evaluated twin's results. Its size. */
static int search_fill_batch(search *s, double kth, batch *b)
{
    int nb = 0;
    const st_plan_candidate *c = s->c;
    while (s->h.n > 0 && nb < s->bsize && kth > s->h.v[0].a) {
        key k = heap_pop(&s->h);
        const st_plan_candidate *x = &c[k.idx];
        b->idx[nb] = k.idx;
        b->kind[nb] = !s->refined[k.idx] ? JOB_REFINE : JOB_EVAL;
        if (b->kind[nb] == JOB_EVAL) {
            if (evaluated_twin(c, s->done, s->ndone, x))
                b->kind[nb] = JOB_TWIN;
            for (int j = 0; j < nb && b->kind[nb] == JOB_EVAL; j++)
                if (x->same && b->kind[j] == JOB_EVAL && c[b->idx[j]].same == x->same)
                    b->kind[nb] = JOB_TWIN; /* an earlier one of this batch stands for it */
        }
        nb++;
    }
    return nb;
}

/* A refined candidate's new bound back into the heap (refused when no request completes). */
static void search_merge_refined(search *s, st_plan_candidate *x, int idx, int rc)
{
    s->refined[idx] = 1;
    s->stats->refined++;
    if (rc || !(x->bound_rps > 0)) {
        x->state = ST_PLAN_REFUSED;
        if (!x->why[0])
            snprintf(x->why, sizeof x->why, "no request completes on it");
        s->stats->refused++;
        return;
    }
    x->bound_estimate = 1;
    x->lb_usd_per_1m = cost_per_1m(x, bound_tps(x, s->out_tokens));
    heap_push(&s->h, (key){ x->lb_usd_per_1m, 0, 0, idx });
}

/* The batch's outcomes, merged in the batch's order: the same outcome on any number of threads. */
static void search_merge(search *s, batch *b, int nb)
{
    st_plan_stats *stats = s->stats;
    for (int i = 0; i < nb; i++) {
        st_plan_candidate *x = &s->c[b->idx[i]];
        if (b->kind[i] == JOB_REFINE) {
            search_merge_refined(s, x, b->idx[i], b->rc[i]);
            continue;
        }
        if (b->kind[i] == JOB_TWIN) {
            const st_plan_candidate *twin = evaluated_twin(s->c, s->done, s->ndone, x);
            if (twin) {
                copy_results(x, twin);
                stats->shared++;
                s->done[s->ndone++] = b->idx[i];
                settle(x, stats);
                continue;
            }
            /* its twin could not run: evaluated on its own */
            b->rc[i] = s->ops->evaluate(s->ops->arg, x, x->why, sizeof x->why);
        }
        stats->evaluated++;
        s->done[s->ndone++] = b->idx[i];
        if (b->rc[i]) {
            x->state = ST_PLAN_REFUSED;
            stats->refused++;
            continue;
        }
        settle(x, stats);
    }
}

/* The pruned counts, the frontiers and the ranks; the best candidate's index, or -1. */
static int search_finish(search *s, int *order)
{
    st_plan_candidate *c = s->c;
    int n = s->n;
    for (int i = 0; i < n; i++)
        if (c[i].state == ST_PLAN_PRUNED) {
            s->stats->pruned++;
            s->stats->pruned_proven += !c[i].bound_estimate;
        }
    frontiers(c, n);
    int m = st_plan_order(c, n, order, n);
    for (int r = 0; r < m; r++)
        c[order[r]].rank = r + 1;
    return m > 0 ? order[0] : -1;
}

int st_plan_search_opt(st_plan_candidate *c, int n, int top_k, double out_tokens, const st_plan_ops *ops,
                       const st_plan_search_opts *o, st_plan_stats *stats)
{
    memset(stats, 0, sizeof *stats);
    stats->candidates = n;
    search s = {
        .c = c, .n = n, .top_k = top_k < 1 ? 1 : top_k, .out_tokens = out_tokens, .ops = ops, .o = o, .stats = stats
    };
    s.threads = o && o->threads > 1 ? o->threads : 1;
    s.bsize = o && o->batch > 1 ? o->batch : 1;
    if (s.bsize > ST_PLAN_BATCH_MAX)
        s.bsize = ST_PLAN_BATCH_MAX;
    int *order = malloc(sizeof *order * (size_t)(n > 0 ? n : 1));
    s.done = malloc(sizeof *s.done * (size_t)(n > 0 ? n : 1));
    s.refined = calloc((size_t)(n > 0 ? n : 1), 1);
    s.h = (heap){ malloc(sizeof *s.h.v * (size_t)(n > 0 ? n : 1)), 0 };
    int best = -1;
    clock_gettime(CLOCK_MONOTONIC, &s.t0);
    if (!order || !s.done || !s.refined || !s.h.v)
        goto out;
    search_screen(&s);
    /* lowest bound first, o->batch at a time: a coarse bound is refined and the candidate
     * goes back in its place; a refined one is evaluated; stop when the k-th best found costs no
     * more than the lowest bound left */
    for (;;) {
        double kth = kth_cost(c, s.done, s.ndone, s.top_k);
        if (o && o->progress)
            search_progress(&s, kth);
        batch b = { .c = c, .ops = ops };
        int nb = search_fill_batch(&s, kth, &b);
        if (nb == 0)
            break;
        run_parallel(nb, s.threads, batch_one, &b);
        search_merge(&s, &b, nb);
    }
    best = search_finish(&s, order);
out:
    free(order);
    free(s.done);
    free(s.refined);
    free(s.h.v);
    return best;
}

/* ---- the search space ------------------------------------------------------------------------ */

#define PLAN_GPUS_MAX 64

static const int default_tp[] = { 1, 2, 4, 8 };
static const long default_seqs[] = { 64, 128, 256, 512 };
static const long default_batched[] = { 2048, 8192 };
static const char *const default_kv[] = { "auto", "fp8" };

int st_plan_enumerate(const st_spec *s, const st_prices *p, const char *provider, long len_auto,
                      st_plan_candidate **out, int *n, char *err, size_t errlen)
{
    return st_plan_enumerate_max(s, p, provider, len_auto, 0, out, n, err, errlen);
}

const st_spec_accept *st_plan_spec_accept(const st_spec *s, const st_plan_specm *m, int q)
{
    if (m->acc_trace)
        return q >= 0 && q < m->n_k && m->acc_k[q].given ? &m->acc_k[q] : NULL;
    if (m->acc.given)
        return &m->acc;
    return s->speculation.given ? &s->speculation : NULL;
}

int st_plan_spec_variants(const st_spec *s, char *why, size_t whylen)
{
    int n = 0;
    size_t off = 0;
    if (why && whylen)
        why[0] = 0;
    if (!s->plan.n_spec && why)
        snprintf(why, whylen,
                 "Speculative decoding was not considered: plan.speculation names no method (each with an acceptance: "
                 "a measured one, or n-gram lookup's offline estimate from `servetune trace stats FILE --spec "
                 "ngram:K`)");
    for (int i = 0; i < s->plan.n_spec; i++) {
        const st_plan_specm *m = &s->plan.spec[i];
        int usable = 0;
        for (int q = 0; q < m->n_k; q++)
            usable += st_plan_spec_accept(s, m, q) != NULL;
        n += usable;
        if (usable == m->n_k || !why || off >= whylen)
            continue;
        if (m->acc_trace)
            off += (size_t)snprintf(why + off, whylen - off,
                                    "%sSpeculation by %s was not considered for %d of its %d draft lengths: %s",
                                    off ? "; " : "", m->method, m->n_k - usable, m->n_k,
                                    m->trace_why[0] ? m->trace_why : "the trace was not replayed");
        else
            off += (size_t)snprintf(why + off, whylen - off,
                                    "%sSpeculation by %s was not considered: no acceptance given (plan.speculation's "
                                    "acceptance, or the spec's speculation.acceptance); the plan does not assume one",
                                    off ? "; " : "", m->method);
    }
    return n;
}

/* Appends to c[0..n) (room for every variant) each plain candidate with each usable (method, k)
 * of plan.speculation. The new count. */
static int add_spec_variants(const st_spec *s, st_plan_candidate *c, int n)
{
    int k = n;
    for (int i = 0; i < n; i++)
        c[i].spec_twin = -1;
    for (int j = 0; j < s->plan.n_spec; j++) {
        const st_plan_specm *m = &s->plan.spec[j];
        for (int q = 0; q < m->n_k; q++)
            for (int i = 0; i < n && st_plan_spec_accept(s, m, q); i++) {
                c[k] = c[i];
                c[k].spec = m;
                c[k].spec_k = m->k[q];
                c[k].spec_acc = st_plan_spec_accept(s, m, q);
                k++;
            }
    }
    return k;
}

/* The GPUs of the search: plan.gpus (each with a price), else every catalog GPU with one. Their
 * count, or -1 with err. */
static int plan_gpus(const st_spec *s, const st_prices *p, const char *want, const char **gpus, char *err,
                     size_t errlen)
{
    int ng = 0;
    st_emu_gpu g;
    char why[300];
    if (s->plan.gpus.n) {
        char missing[400] = "";
        size_t mo = 0;
        int nm = 0;
        for (int i = 0; i < s->plan.gpus.n && ng < PLAN_GPUS_MAX; i++) {
            const char *k = s->plan.gpus.v[i];
            if (st_emu_gpu_find(k, &g, why, sizeof why)) {
                snprintf(err, errlen, "%s: plan.gpus: %s", s->path, why);
                return -1;
            }
            if (!st_prices_pick(p, k, ST_PRICE_ON_DEMAND, want)) {
                if (mo < sizeof missing)
                    mo += (size_t)snprintf(missing + mo, sizeof missing - mo, "%s%s", nm ? ", " : "", k);
                nm++;
                continue;
            }
            gpus[ng++] = k;
        }
        if (nm && want && nm == s->plan.gpus.n) /* the provider, not the GPUs, is what to fix */
            snprintf(err, errlen,
                     "%s: provider '%s' (--provider or plan.provider): no on-demand price from it for any GPU of "
                     "plan.gpus (%s) in %s: check its name against the list's providers, or add its prices",
                     s->path, want, missing, p->origin);
        else if (nm) /* every GPU without a price at once, so one edit fixes them all */
            snprintf(err, errlen,
                     "%s: plan.gpus: no on-demand price%s%s for %s in %s: add %s to it, or leave %s out of plan.gpus",
                     s->path, want ? " from " : "", want ? want : "", missing, p->origin, nm == 1 ? "one" : "them",
                     nm == 1 ? "it" : "them");
        if (nm)
            return -1;
    } else {
        const char *keys[PLAN_GPUS_MAX];
        int nk = st_emu_gpu_keys(keys, PLAN_GPUS_MAX);
        for (int i = 0; i < nk; i++)
            if (st_prices_pick(p, keys[i], ST_PRICE_ON_DEMAND, want))
                gpus[ng++] = keys[i];
        if (!ng) {
            snprintf(err, errlen, "no GPU of the engine model has an on-demand price%s%s in %s", want ? " from " : "",
                     want ? want : "", p->origin);
            return -1;
        }
    }
    return ng;
}

int st_plan_enumerate_max(const st_spec *s, const st_prices *p, const char *provider, long len_auto, long max,
                          st_plan_candidate **out, int *n, char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    const char *gpus[PLAN_GPUS_MAX];
    const char *want = provider && *provider ? provider : NULL;
    int ng = plan_gpus(s, p, want, gpus, err, errlen);
    if (ng < 0)
        return -1;
    const int *tp = s->plan.n_tp ? s->plan.tp : default_tp;
    int ntp = s->plan.n_tp ? s->plan.n_tp : (int)(sizeof default_tp / sizeof *default_tp);
    const long *seqs = s->plan.n_seqs ? s->plan.max_num_seqs : default_seqs;
    int nseqs = s->plan.n_seqs ? s->plan.n_seqs : (int)(sizeof default_seqs / sizeof *default_seqs);
    const long *bt = s->plan.n_batched ? s->plan.max_batched : default_batched;
    int nbt = s->plan.n_batched ? s->plan.n_batched : (int)(sizeof default_batched / sizeof *default_batched);
    const char *const *kv = s->plan.kv_dtypes.n ? (const char *const *)s->plan.kv_dtypes.v : default_kv;
    int nkv = s->plan.kv_dtypes.n ? s->plan.kv_dtypes.n : (int)(sizeof default_kv / sizeof *default_kv);
    const char *bf16[] = { "bf16" };
    const char *base_model[] = { st_spec_config_model(s, &s->configs[0]) };
    const char *const *wf = s->plan.n_weights ? (const char *const *)s->plan.weights : bf16;
    const char *const *ck = s->plan.n_weights ? (const char *const *)s->plan.checkpoints : base_model;
    int nw = s->plan.n_weights ? s->plan.n_weights : 1;
    long len_one = s->plan.max_model_len > 0 ? s->plan.max_model_len : len_auto;
    const long *lens = s->plan.n_len ? s->plan.max_model_lens : &len_one;
    int nlen = s->plan.n_len ? s->plan.n_len : 1;
    int nsv = st_plan_spec_variants(s, NULL, 0);
    double total = (double)ng * ntp * nw * nkv * nseqs * nbt * nlen * (1 + nsv);
    long limit = max > 0 ? max : ST_PLAN_MAX_CANDIDATES;
    if (total > (double)limit || total > (double)INT_MAX / 2) {
        snprintf(err, errlen,
                 "plan: %.0f candidates (%d GPUs x %d GPUs per replica x %d weight formats x %d KV cache dtypes x %d "
                 "max_num_seqs x %d max_num_batched_tokens x %d max_model_len x %d decoding modes) is more than the "
                 "limit of %ld: pass --max-candidates %.0f to search them all, or narrow a list",
                 total, ng, ntp, nw, nkv, nseqs, nbt, nlen, 1 + nsv, limit, total);
        return -1;
    }
    st_plan_candidate *c = calloc((size_t)total > 0 ? (size_t)total : 1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int k = 0;
    for (int a = 0; a < ng; a++) {
        const st_price *pr = st_prices_pick(p, gpus[a], ST_PRICE_ON_DEMAND, want);
        for (int b = 0; b < ntp; b++)
            for (int w = 0; w < nw; w++)
                for (int v = 0; v < nkv; v++)
                    for (int q = 0; q < nseqs; q++)
                        for (int t = 0; t < nbt; t++)
                            for (int l = 0; l < nlen; l++) {
                                st_plan_candidate *x = &c[k++];
                                x->gpu = gpus[a];
                                x->tp = tp[b];
                                x->weights = wf[w];
                                x->model = ck[w];
                                x->kv_dtype = kv[v];
                                x->max_num_seqs = seqs[q];
                                x->max_batched = bt[t];
                                x->max_model_len = lens[l];
                                x->price_per_gpu_hour = pr->usd_per_gpu_hour;
                                x->provider = pr->provider;
                            }
    }
    *out = c;
    *n = add_spec_variants(s, c, k);
    return 0;
}

/* The value of --name V or --name=V in flags, as a number (0 when absent or not a number). */
static long flag_long(const st_strv *f, const char *name)
{
    const char *v = NULL;
    size_t nl = strlen(name);
    for (int i = 0; i < f->n && !v; i++) {
        if (strncmp(f->v[i], name, nl))
            continue;
        if (f->v[i][nl] == '=')
            v = f->v[i] + nl + 1;
        else if (!f->v[i][nl] && i + 1 < f->n)
            v = f->v[i + 1];
    }
    return v ? strtol(v, NULL, 10) : 0;
}

void st_plan_baseline(const st_spec *s, st_plan_candidate *out)
{
    memset(out, 0, sizeof *out);
    out->spec_twin = -1;
    out->base_spec = 1; /* the current setup speculates as its flags say */
    st_strv f = { 0 };
    (void)st_spec_config_flags(s, &s->configs[0], &f);
    out->gpu = s->hardware.gpu;
    out->tp = s->hardware.gpus_per_replica;
    out->model = st_spec_config_model(s, &s->configs[0]);
    out->weights = strcasestr(out->model, "fp8")    ? "fp8"
                   : strcasestr(out->model, "awq")  ? "awq"
                   : strcasestr(out->model, "gptq") ? "gptq"
                                                    : "bf16";
    out->kv_dtype = "auto";
    for (int i = 0; i + 1 < f.n; i++)
        if (!strcmp(f.v[i], "--kv-cache-dtype") && !strcmp(f.v[i + 1], "fp8"))
            out->kv_dtype = "fp8";
    out->max_num_seqs = flag_long(&f, "--max-num-seqs");
    out->max_batched = flag_long(&f, "--max-num-batched-tokens");
    out->max_model_len = flag_long(&f, "--max-model-len");
    out->price_per_gpu_hour = s->hardware.price_per_gpu_hour;
    out->provider = "the spec";
    st_strv_free(&f);
}
