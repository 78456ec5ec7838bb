/* Traffic statistics and advice (load/trace_stats.h). */
#include "load/trace_stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/util.h"
#include "load/output.h"

/* ---- an HDR histogram of lengths: exact below H_EXACT, H_SUB buckets per power of two above */
#define H_EXACT 65536u
#define H_SUB 1024u
#define H_LOG_EXACT 16u
#define H_LEVELS 7u /* 2^16 .. 2^23 */
#define H_N (H_EXACT + H_LEVELS * H_SUB)

typedef struct lhist {
    uint64_t c[H_N];
    uint64_t n;
    double sum;
    uint32_t max;
} lhist;

static uint32_t h_index(uint64_t v)
{
    if (v >= ST_TRAFFIC_LEN_MAX)
        v = ST_TRAFFIC_LEN_MAX - 1;
    if (v < H_EXACT)
        return (uint32_t)v;
    unsigned e = 63u - (unsigned)__builtin_clzll(v);
    uint32_t sub = (uint32_t)(v >> (e - 10)) - H_SUB;
    return H_EXACT + (e - H_LOG_EXACT) * H_SUB + sub;
}

static uint64_t h_lower(uint32_t i)
{
    if (i < H_EXACT)
        return i;
    uint32_t k = i - H_EXACT, e = H_LOG_EXACT + k / H_SUB, sub = k % H_SUB;
    return (uint64_t)(H_SUB + sub) << (e - 10);
}

static uint64_t h_upper(uint32_t i) { return i + 1 < H_N ? h_lower(i + 1) - 1 : ST_TRAFFIC_LEN_MAX - 1; }

static void h_add(lhist *h, uint64_t v)
{
    h->c[h_index(v)]++;
    h->n++;
    h->sum += (double)v;
    if (v > h->max)
        h->max = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

/* Nearest rank: the smallest value with at least p % of the values at or below it (the
 * bucket's upper bound above H_EXACT). */
static uint32_t h_pct(const lhist *h, double p)
{
    if (!h->n)
        return 0;
    uint64_t rank = (uint64_t)ceil(p / 100.0 * (double)h->n);
    if (rank < 1)
        rank = 1;
    uint64_t cum = 0;
    for (uint32_t i = 0; i < H_N; i++) {
        cum += h->c[i];
        if (cum >= rank) {
            uint64_t u = h_upper(i);
            return u > h->max ? h->max : (uint32_t)u;
        }
    }
    return h->max;
}

static void h_fill(const lhist *h, st_len_pct *o)
{
    o->p50 = h_pct(h, 50);
    o->p90 = h_pct(h, 90);
    o->p95 = h_pct(h, 95);
    o->p99 = h_pct(h, 99);
    o->max = h->max;
    o->mean = h->n ? h->sum / (double)h->n : NAN;
}

/* ---- a bounded map from 64-bit keys to three counters -------------------------------- */
typedef struct kent {
    uint64_t key; /* 0: free */
    uint32_t a, b, c;
} kent;

typedef struct kmap {
    kent *e;
    uint32_t cap, n, max;
    int full;
} kmap;

/* The entry of key; *created tells whether it is new. NULL when the map is full (the key is
 * not tracked) or out of memory (*oom). */
static kent *kmap_get(kmap *m, uint64_t key, int *created, int *oom)
{
    *created = 0;
    if (!key)
        key = 1;
    if (m->n * 2 >= m->cap) {
        if (m->cap / 2 >= m->max) {
            m->full = 1;
        } else {
            uint32_t nc = m->cap ? m->cap * 2 : 4096;
            kent *ne = calloc(nc, sizeof *ne);
            if (!ne) {
                *oom = 1;
                return NULL;
            }
            for (uint32_t i = 0; i < m->cap; i++)
                if (m->e[i].key) {
                    uint32_t h = (uint32_t)st_mix64(m->e[i].key) & (nc - 1);
                    while (ne[h].key)
                        h = (h + 1) & (nc - 1);
                    ne[h] = m->e[i];
                }
            free(m->e);
            m->e = ne;
            m->cap = nc;
        }
    }
    if (!m->cap)
        return NULL;
    uint32_t h = (uint32_t)st_mix64(key) & (m->cap - 1);
    while (m->e[h].key) {
        if (m->e[h].key == key)
            return &m->e[h];
        h = (h + 1) & (m->cap - 1);
    }
    if (m->n * 2 >= m->cap) {
        m->full = 1;
        return NULL;
    }
    memset(&m->e[h], 0, sizeof m->e[h]);
    m->e[h].key = key;
    m->n++;
    *created = 1;
    return &m->e[h];
}

/* ---- the accumulator ------------------------------------------------------------------ */
struct st_trace_stats {
    lhist in, out, total;
    uint64_t requests;
    int has_times;
    double first_ts, last_ts, min_ts, max_ts;
    double prev_ts;
    /* gaps, in both directions (a log listed newest first is still measurable) */
    uint64_t asc_n, desc_n, asc_bad, desc_bad;
    double asc_mean, asc_m2, desc_mean, desc_m2;
    /* quantized times (load/trace.h): the clock's ticks and how many requests each holds, in
     * ascending order (at most ST_TRAFFIC_KEYS_MAX ticks kept) */
    st_trace_quantum quantum;
    struct tick {
        double t;
        uint32_t k;
    } * ticks;
    size_t n_ticks, ticks_cap;
    int ticks_lost; /* out of order, or past the cap */
    /* per-minute counts */
    int64_t min_base;
    uint32_t *minute;
    uint32_t min_len, min_cap;
    int minutes_capped;
    st_hourly hourly; /* requests per hour of the day */
    /* prefixes */
    kmap blocks, sess;
    uint64_t prompt_tokens, output_tokens, shared_tokens, hit_tokens;
    uint64_t prefix_rows;
    uint64_t sessions, later_turns;
    int oom;
};

st_trace_stats *st_trace_stats_new(void)
{
    st_trace_stats *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->blocks.max = ST_TRAFFIC_KEYS_MAX / 2;
    s->sess.max = ST_TRAFFIC_KEYS_MAX / 2;
    return s;
}

void st_trace_stats_free(st_trace_stats *s)
{
    if (!s)
        return;
    free(s->minute);
    free(s->ticks);
    free(s->blocks.e);
    free(s->sess.e);
    free(s);
}

static void minute_add(st_trace_stats *s, double ts)
{
    if (s->minutes_capped)
        return;
    int64_t m = (int64_t)floor((ts - s->first_ts) / 60.0);
    if (!s->min_len) {
        s->min_base = m;
    }
    int64_t lo = s->min_base, hi = s->min_base + (int64_t)s->min_len; /* [lo, hi) */
    if (m < lo || m >= hi || !s->min_len) {
        int64_t nlo = m < lo ? m : lo, nhi = m >= hi ? m + 1 : hi;
        if (!s->min_len) {
            nlo = m;
            nhi = m + 1;
        }
        if (nhi - nlo > (int64_t)ST_TRAFFIC_MINUTES_MAX) {
            s->minutes_capped = 1;
            return;
        }
        uint32_t nl = (uint32_t)(nhi - nlo);
        if (nl > s->min_cap || m < lo) {
            uint32_t nc = s->min_cap ? s->min_cap : 64;
            while (nc < nl)
                nc *= 2;
            uint32_t *p = calloc(nc, sizeof *p);
            if (!p) {
                s->oom = 1;
                return;
            }
            if (s->min_len)
                memcpy(p + (lo - nlo), s->minute, (size_t)s->min_len * sizeof *p);
            free(s->minute);
            s->minute = p;
            s->min_cap = nc;
        }
        s->min_base = nlo;
        s->min_len = nl;
    }
    s->minute[m - s->min_base]++;
}

static void welford(uint64_t *n, double *mean, double *m2, double x)
{
    (*n)++;
    double d = x - *mean;
    *mean += d / (double)*n;
    *m2 += d * (x - *mean);
}

static void tick_add(st_trace_stats *s, double rel)
{
    st_trace_quantum_add(&s->quantum, rel);
    if (s->ticks_lost)
        return;
    if (s->n_ticks && s->ticks[s->n_ticks - 1].t == rel) {
        s->ticks[s->n_ticks - 1].k++;
        return;
    }
    if ((s->n_ticks && rel < s->ticks[s->n_ticks - 1].t) || s->n_ticks >= ST_TRAFFIC_KEYS_MAX ||
        st_grow((void **)&s->ticks, &s->ticks_cap, s->n_ticks + 1, sizeof *s->ticks, 1024)) {
        s->ticks_lost = 1;
        return;
    }
    s->ticks[s->n_ticks].t = rel;
    s->ticks[s->n_ticks].k = 1;
    s->n_ticks++;
}

/* The CV of the gaps once each tick's requests are spread evenly over it (as a replay sends
 * them: st_trace_spread_ties). NAN when the ticks were not all kept. */
static double spread_gap_cv(const st_trace_stats *s, double q)
{
    if (s->ticks_lost || !s->n_ticks)
        return NAN;
    uint64_t n = 0;
    double mean = 0, m2 = 0, last = 0;
    for (size_t i = 0; i < s->n_ticks; i++) {
        const struct tick *k = &s->ticks[i];
        if (i)
            welford(&n, &mean, &m2, k->t - last);
        for (uint32_t j = 1; j < k->k; j++)
            welford(&n, &mean, &m2, q / k->k);
        last = k->t + (double)(k->k - 1) * q / k->k;
    }
    return n >= 2 && mean > 0 ? sqrt(m2 / (double)(n - 1)) / mean : NAN;
}

static uint64_t block_hash(const uint32_t *ids, uint32_t n, uint64_t parent)
{
    uint64_t h = parent ^ 0x9e3779b97f4a7c15ULL;
    for (uint32_t i = 0; i < n; i++)
        h = st_mix64(h ^ ids[i]);
    return h;
}

/* A request's time into the per-minute counts and the hourly profile. */
static void per_time_add(st_trace_stats *s, double ts)
{
    minute_add(s, ts);
    st_hourly_add(&s->hourly, ts);
}

int st_trace_stats_add(st_trace_stats *s, const st_trace_row *r)
{
    s->requests++;
    h_add(&s->in, r->input_len);
    h_add(&s->out, r->output_len);
    h_add(&s->total, (uint64_t)r->input_len + r->output_len);
    s->prompt_tokens += r->input_len;
    s->output_tokens += r->output_len;
    if (r->has_ts) {
        double ts = r->ts_s;
        if (!s->has_times) {
            s->has_times = 1;
            s->first_ts = s->min_ts = s->max_ts = ts;
        } else {
            double g = ts - s->prev_ts;
            if (g >= 0)
                welford(&s->asc_n, &s->asc_mean, &s->asc_m2, g);
            else
                s->asc_bad++;
            if (g <= 0)
                welford(&s->desc_n, &s->desc_mean, &s->desc_m2, -g);
            else
                s->desc_bad++;
        }
        s->prev_ts = s->last_ts = ts;
        tick_add(s, ts - s->first_ts);
        if (ts < s->min_ts)
            s->min_ts = ts;
        if (ts > s->max_ts)
            s->max_ts = ts;
        per_time_add(s, ts);
    }
    /* prefixes: what an unbounded cache of full blocks would already hold */
    int created, oom = 0;
    int known = 0;
    if (r->n_hash) {
        known = 1;
        uint32_t bs = r->block_size ? r->block_size : ST_TRACE_BLOCK_DEFAULT;
        int lead = 1;
        uint64_t hit = 0;
        for (uint32_t b = 0; b < r->n_hash; b++) {
            uint64_t start = (uint64_t)b * bs;
            if (start >= r->input_len)
                break;
            uint32_t toks = r->input_len - start < bs ? (uint32_t)(r->input_len - start) : bs;
            kent *e = kmap_get(&s->blocks, st_mix64(r->hash_ids[b] ^ 0x6d6f6f6e63616b65ULL), &created, &oom);
            if (!e) {
                lead = 0;
                continue;
            }
            if (!created) {
                if (lead)
                    hit += toks;
                e->a++;
            } else {
                lead = 0;
                e->a = 1;
                e->b = toks;
            }
        }
        s->hit_tokens += hit / ST_TRAFFIC_CACHE_BLOCK * ST_TRAFFIC_CACHE_BLOCK;
    } else if (r->item && r->item->input_ids && (!r->session || r->turn == 0)) {
        known = 1;
        const uint32_t *ids = r->item->input_ids;
        uint32_t nb = r->item->input_len / ST_TRAFFIC_CACHE_BLOCK;
        uint64_t h = 0;
        int lead = 1;
        for (uint32_t b = 0; b < nb; b++) {
            h = block_hash(ids + (size_t)b * ST_TRAFFIC_CACHE_BLOCK, ST_TRAFFIC_CACHE_BLOCK, h);
            kent *e = kmap_get(&s->blocks, h, &created, &oom);
            if (!e) {
                lead = 0;
                continue;
            }
            if (!created) {
                if (lead)
                    s->hit_tokens += ST_TRAFFIC_CACHE_BLOCK;
                e->a++;
            } else {
                lead = 0;
                e->a = 1;
                e->b = ST_TRAFFIC_CACHE_BLOCK;
            }
        }
    }
    if (r->session) {
        kent *e = kmap_get(&s->sess, r->session, &created, &oom);
        if (e && (created || r->turn == 0)) {
            s->sessions += created;
            e->a = 1;            /* turns */
            e->b = r->input_len; /* the latest prompt */
            e->c = r->input_len; /* the part of it not yet known to be shared */
        } else if (e) {
            known = 1;
            s->later_turns++;
            e->a++;
            /* this prompt starts with the previous one: both share it; the cache also holds
             * the previous answer (vLLM caches full blocks of generated tokens) */
            uint32_t prev = e->b;
            uint32_t common = prev < r->input_len ? prev : r->input_len;
            s->shared_tokens += e->c + common;
            uint32_t hist = r->input_len - (r->new_len < r->input_len ? r->new_len : r->input_len);
            s->hit_tokens += hist / ST_TRAFFIC_CACHE_BLOCK * ST_TRAFFIC_CACHE_BLOCK;
            e->b = r->input_len;
            e->c = r->input_len - common;
        } else if (r->turn > 0) {
            s->later_turns++;
        }
    }
    if (known)
        s->prefix_rows++;
    if (oom)
        s->oom = 1;
    return s->oom ? -1 : 0;
}

int st_trace_stats_row_cb(void *arg, const st_trace_row *row, char *err, size_t errlen)
{
    if (st_trace_stats_add(arg, row) < 0) {
        snprintf(err, errlen, "out of memory for the statistics");
        return -1;
    }
    return 0;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

const char *st_traffic_no_rate_reason(uint64_t requests)
{
    return requests <= 1 ? "one request" : "every request at the same time";
}

void st_trace_stats_result(const st_trace_stats *s, st_traffic *t)
{
    memset(t, 0, sizeof *t);
    t->requests = s->requests;
    t->has_times = s->has_times;
    t->gap_cv = t->gamma_shape = t->gap_cv_recorded = NAN;
    st_hourly_result(&s->hourly, &t->hourly);
    t->mean_rps = t->p50_minute_rps = t->p95_minute_rps = t->peak_minute_rps = NAN;
    if (s->has_times) {
        t->span_s = s->max_ts - s->min_ts;
        if (s->requests > 1 && t->span_s > 0)
            t->mean_rps = (double)(s->requests - 1) / t->span_s;
        t->out_of_order = s->asc_bad;
        /* the gaps of the order the rows came in: ascending, or a log listed newest first */
        uint64_t n = 0;
        double mean = 0, m2 = 0;
        if (s->asc_bad == 0) {
            n = s->asc_n;
            mean = s->asc_mean;
            m2 = s->asc_m2;
        } else if (s->desc_bad == 0) {
            n = s->desc_n;
            mean = s->desc_mean;
            m2 = s->desc_m2;
        }
        if (n >= 2 && mean > 0)
            t->gap_cv = sqrt(m2 / (double)(n - 1)) / mean;
        /* a coarse clock's ties are not bursts: the gaps of the ticks spread as a replay sends them */
        t->gap_cv_recorded = t->gap_cv;
        t->quantum_s = st_trace_quantum_s(&s->quantum);
        t->quantum_ties = s->quantum.ties;
        if (t->quantum_s > 0) {
            double cv = spread_gap_cv(s, t->quantum_s);
            t->gap_cv = cv;
        }
        if (t->gap_cv > 0)
            t->gamma_shape = 1.0 / (t->gap_cv * t->gap_cv);
        /* complete minutes only (counted from the first row): a partial minute at either end
         * would understate its rate */
        int64_t klo = (int64_t)ceil((s->min_ts - s->first_ts) / 60.0);
        int64_t khi = (int64_t)floor((s->max_ts - s->first_ts) / 60.0); /* [klo, khi) */
        if (klo < s->min_base)
            klo = s->min_base;
        if (khi > s->min_base + (int64_t)s->min_len)
            khi = s->min_base + (int64_t)s->min_len;
        t->minutes_capped = s->minutes_capped;
        if (khi > klo) {
            uint32_t nm = (uint32_t)(khi - klo);
            uint32_t *c = malloc((size_t)nm * sizeof *c);
            if (c) {
                memcpy(c, s->minute + (klo - s->min_base), (size_t)nm * sizeof *c);
                qsort(c, nm, sizeof *c, cmp_u32);
                /* nearest rank over every complete minute of the span (quiet minutes included) */
                uint32_t k50 = (uint32_t)ceil(0.50 * nm), k95 = (uint32_t)ceil(0.95 * nm);
                t->p50_minute_rps = c[(k50 ? k50 : 1) - 1] / 60.0;
                t->p95_minute_rps = c[(k95 ? k95 : 1) - 1] / 60.0;
                t->peak_minute_rps = c[nm - 1] / 60.0;
                t->minutes = nm;
                free(c);
            }
        }
    }
    h_fill(&s->in, &t->in);
    h_fill(&s->out, &t->out);
    h_fill(&s->total, &t->total);
    t->prompt_tokens = s->prompt_tokens;
    t->output_tokens = s->output_tokens;
    t->prefix_known = s->prefix_rows > 0;
    t->prefix_lower_bound = s->blocks.full || s->sess.full;
    uint64_t shared = s->shared_tokens;
    for (uint32_t i = 0; i < s->blocks.cap; i++)
        if (s->blocks.e[i].key && s->blocks.e[i].a >= 2)
            shared += (uint64_t)s->blocks.e[i].a * s->blocks.e[i].b;
    if (shared > s->prompt_tokens)
        shared = s->prompt_tokens;
    t->shared_tokens = shared;
    t->hit_tokens = s->hit_tokens;
    t->shared_share = s->prompt_tokens ? (double)shared / (double)s->prompt_tokens : NAN;
    t->ideal_hit_rate = s->prompt_tokens ? (double)s->hit_tokens / (double)s->prompt_tokens : NAN;
    if (!t->prefix_known)
        t->shared_share = t->ideal_hit_rate = NAN;
    t->sessions = s->sessions;
    t->later_turns = s->later_turns;
    uint64_t turns = 0;
    for (uint32_t i = 0; i < s->sess.cap; i++)
        if (s->sess.e[i].key) {
            turns += s->sess.e[i].a;
            if (s->sess.e[i].a > t->turns_max)
                t->turns_max = s->sess.e[i].a;
        }
    t->turns_mean = s->sessions ? (double)turns / (double)s->sessions : NAN;
}

double st_trace_stats_share_above(const st_trace_stats *s, uint64_t len)
{
    if (!s->total.n)
        return NAN;
    uint64_t above = 0;
    for (uint32_t i = 0; i < H_N; i++)
        if (h_lower(i) > len)
            above += s->total.c[i];
    return (double)above / (double)s->total.n;
}

static uint32_t round_up(uint32_t v, uint32_t q) { return v ? (v + q - 1) / q * q : q; }

/* The advised --max-model-len (the p99 and p95 of input + output, capped by the model's context)
 * and the share each rejects; the configuration's own limit's. */
static void advise_length(const st_trace_stats *s, const st_traffic *t, const st_traffic_engine *e,
                          st_traffic_advice *a)
{
    a->mml_p99 = round_up(t->total.p99, ST_MML_ROUND);
    a->mml_p95 = round_up(t->total.p95, ST_MML_ROUND);
    uint32_t ctx = e ? e->model_context : 0;
    if (ctx && a->mml_p99 > ctx) { /* no limit above the model's context is advised */
        a->mml_capped = 1;
        a->mml_p99 = ctx;
        if (a->mml_p95 > ctx)
            a->mml_p95 = ctx;
    }
    a->reject_p99 = st_trace_stats_share_above(s, a->mml_p99);
    a->reject_p95 = st_trace_stats_share_above(s, a->mml_p95);
    char *L;
    L = a->lines[a->n_lines++];
    if (a->mml_capped)
        snprintf(L, sizeof a->lines[0],
                 "The p99 of input + output (%u tokens) is above the model's context (%u tokens): --max-model-len %u, "
                 "the most the model serves, would reject %.2f%% of these requests (vLLM refuses a longer limit "
                 "unless the context is extended, e.g. by rope scaling).",
                 t->total.p99, ctx, a->mml_p99, 100 * a->reject_p99);
    else if (a->mml_p95 == a->mml_p99) /* one rounded length covers both */
        snprintf(L, sizeof a->lines[0],
                 "--max-model-len %u covers the p99 of input + output (%u tokens) and would reject %.2f%% of these "
                 "requests.",
                 a->mml_p99, t->total.p99, 100 * a->reject_p99);
    else
        snprintf(L, sizeof a->lines[0],
                 "--max-model-len %u covers the p99 of input + output (%u tokens) and would reject %.2f%% of these "
                 "requests; %u (the p95) would reject %.2f%%.",
                 a->mml_p99, t->total.p99, 100 * a->reject_p99, a->mml_p95, 100 * a->reject_p95);
    if (e && e->max_model_len) {
        a->reject_current = st_trace_stats_share_above(s, e->max_model_len);
        L = a->lines[a->n_lines++];
        snprintf(L, sizeof a->lines[0],
                 "The configuration's max_model_len %u rejects %.2f%% of them%s. vLLM sizes its KV cache from "
                 "memory, not from max_model_len: a lower limit does not add KV blocks, it caps the longest request "
                 "and lets a model start where its full context would not fit.",
                 e->max_model_len, 100 * a->reject_current,
                 e->max_model_len > a->mml_p99 * 2 ? " (it is more than twice the p99)" : "");
    }
}

/* How many requests the configuration's KV cache holds at once, and when it fills (Little's law). */
static void advise_kv(const st_trace_stats *s, const st_traffic *t, const st_traffic_engine *e, st_traffic_advice *a)
{
    if (!(e && e->kv_tokens))
        return;
    a->kv_known = 1;
    a->kv_tokens = e->kv_tokens;
    double mean_total = t->total.mean;
    a->kv_fit_mean = mean_total > 0 ? (double)e->kv_tokens / mean_total : NAN;
    a->kv_fit_p99 = t->total.p99 ? (double)e->kv_tokens / t->total.p99 : NAN;
    a->share_over_kv = st_trace_stats_share_above(s, e->kv_tokens);
    int use_p95 = !(isnan(t->p95_minute_rps) || t->p95_minute_rps <= 0);
    double r = use_p95 ? t->p95_minute_rps : t->mean_rps;
    if (r > 0 && !isnan(r))
        a->kv_fill_e2e_s = a->kv_fit_mean / r;
    char *L = a->lines[a->n_lines++];
    int n = snprintf(L, sizeof a->lines[0],
                     "The KV cache (%llu tokens%s%s) holds %.0f requests of the mean size (%.0f tokens) at "
                     "once, %.0f of the p99 size.",
                     (unsigned long long)e->kv_tokens, e->what ? ", " : "", e->what ? e->what : "",
                     floor(a->kv_fit_mean), mean_total, floor(a->kv_fit_p99)); /* whole requests that fit */
    if (!isnan(a->kv_fill_e2e_s) && n > 0 && (size_t)n < sizeof a->lines[0])
        snprintf(L + n, sizeof a->lines[0] - (size_t)n,
                 " At the %s rate (%.3g req/s) it fills when a request lasts longer than %.1f s on "
                 "average (Little's law): beyond that, requests queue or are preempted.",
                 use_p95 ? "p95 minute" : "mean", r, a->kv_fill_e2e_s);
    if (a->share_over_kv > 0) {
        L = a->lines[a->n_lines++];
        snprintf(L, sizeof a->lines[0], "%.2f%% of the requests are longer than the whole KV cache.",
                 100 * a->share_over_kv);
    }
}

/* Whether prefix caching pays, from the trace's ideal hit rate. */
static void advise_prefix(const st_traffic *t, st_traffic_advice *a)
{
    char *L = a->lines[a->n_lines++];
    if (!t->prefix_known) {
        a->prefix = ST_PREFIX_UNKNOWN;
        snprintf(L, sizeof a->lines[0],
                 "The trace does not say how prompts overlap (no hash ids, token ids or sessions): whether prefix "
                 "caching pays cannot be told from it.");
    } else if (t->ideal_hit_rate >= ST_PREFIX_PAYS_AT) {
        a->prefix = ST_PREFIX_PAYS;
        snprintf(L, sizeof a->lines[0],
                 "Prefix caching pays: an ideal cache would serve %.0f%% of the prompt tokens (%.0f%% of them sit in "
                 "shared prefixes)%s. Keep it on (vLLM's default) and leave the KV cache room for the shared "
                 "prefixes.",
                 100 * t->ideal_hit_rate, 100 * t->shared_share, t->prefix_lower_bound ? " (at least)" : "");
    } else if (t->ideal_hit_rate >= ST_PREFIX_SOME_AT) {
        a->prefix = ST_PREFIX_SOME;
        snprintf(L, sizeof a->lines[0],
                 "Prefix caching helps somewhat: an ideal cache would serve %.0f%% of the prompt tokens%s.",
                 100 * t->ideal_hit_rate, t->prefix_lower_bound ? " (at least)" : "");
    } else {
        a->prefix = ST_PREFIX_LITTLE;
        snprintf(L, sizeof a->lines[0],
                 "Prefix caching has little to gain here: an ideal cache would serve %.1f%% of the prompt tokens%s "
                 "(it costs little to keep on).",
                 100 * t->ideal_hit_rate, t->prefix_lower_bound ? " (at least)" : "");
    }
}

/* The arrivals' shape: quantized timestamps, burstiness and how to replay it. */
static void advise_arrivals(const st_traffic *t, st_traffic_advice *a)
{
    char *L;
    if (t->quantum_s > 0 && a->n_lines < ST_TRAFFIC_ADVICE_LINES) {
        L = a->lines[a->n_lines++];
        snprintf(L, sizeof a->lines[0],
                 "Arrival times are quantized to %g s (every one a multiple; %llu requests share a tick with the one "
                 "before): ties are the log's clock, not bursts (the recorded gaps' CV would read %.2f). The figures "
                 "below spread each tick's requests evenly over it, and so does a replay.",
                 t->quantum_s, (unsigned long long)t->quantum_ties, t->gap_cv_recorded);
    }
    if (!isnan(t->gap_cv) && a->n_lines < ST_TRAFFIC_ADVICE_LINES) {
        L = a->lines[a->n_lines++];
        const char *kind = t->gap_cv > 1.2   ? "bursty"
                           : t->gap_cv < 0.8 ? "smoother than random"
                                             : "about as random as Poisson";
        /* evenly spaced gaps have no gamma shape: a constant schedule replays them */
        char how[96];
        if (isfinite(t->gamma_shape) && t->gap_cv >= ST_TRACE_CONSTANT_CV)
            snprintf(how, sizeof how, "--arrival gamma --burstiness %.3g", t->gamma_shape);
        else
            snprintf(how, sizeof how, "--arrival constant");
        if (t->gap_cv < ST_TRACE_CONSTANT_CV)
            kind = "evenly spaced";
        if (t->mean_rps > 0 && !isnan(t->peak_minute_rps))
            snprintf(L, sizeof a->lines[0],
                     "Arrivals are %s (CV of the gaps %.2f; 1 is Poisson); the busiest minute runs at %.1fx the mean "
                     "rate: size replicas for the peak, and replay this shape with %s.",
                     kind, t->gap_cv, t->peak_minute_rps / t->mean_rps, how);
        else
            snprintf(L, sizeof a->lines[0],
                     "Arrivals are %s (CV of the gaps %.2f; 1 is Poisson): replay this shape with %s.", kind, t->gap_cv,
                     how);
    }
}

void st_traffic_advise(const st_trace_stats *s, const st_traffic *t, const st_traffic_engine *e, st_traffic_advice *a)
{
    memset(a, 0, sizeof *a);
    a->reject_current = NAN;
    a->kv_fit_mean = a->kv_fit_p99 = a->kv_fill_e2e_s = a->share_over_kv = NAN;
    if (!t->requests)
        return;
    advise_length(s, t, e, a);
    advise_kv(s, t, e, a);
    advise_prefix(t, a);
    advise_arrivals(t, a);
}

/* ---- JSON ---------------------------------------------------------------------------- */

static json_t *len_json(const st_len_pct *p)
{
    return json_pack("{s:I,s:I,s:I,s:I,s:I,s:o}", "p50", (json_int_t)p->p50, "p90", (json_int_t)p->p90, "p95",
                     (json_int_t)p->p95, "p99", (json_int_t)p->p99, "max", (json_int_t)p->max, "mean",
                     st_jnum_or_null(p->mean));
}

/* The rate in each hour of the day (null where the trace covers too little of it). */
static json_t *hourly_json(const st_hourly_profile *h)
{
    if (h->clock == ST_HOURLY_NONE)
        return json_null();
    json_t *o = json_object(), *rps = json_array(), *cov = json_array();
    for (int i = 0; i < 24; i++) {
        json_array_append_new(rps, st_jnum_or_null(h->rps[i]));
        json_array_append_new(cov, json_real(h->covered_s[i]));
    }
    json_object_set_new(o, "clock", json_string(st_hourly_clock_name(h->clock)));
    json_object_set_new(o, "hours", json_integer(h->hours));
    json_object_set_new(o, "rps", rps);
    json_object_set_new(o, "covered_s", cov);
    return o;
}

json_t *st_traffic_json(const st_traffic *t, const st_traffic_advice *a, const st_trace_counts *c, st_trace_format fmt,
                        const char *path)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "schema", json_string("servetune.traffic/1"));
    if (path)
        json_object_set_new(o, "trace", json_string(path));
    json_object_set_new(o, "format", json_string(st_trace_format_name(fmt)));
    json_object_set_new(o, "requests", json_integer((json_int_t)t->requests));
    json_t *rate = json_object();
    json_object_set_new(rate, "span_s", t->has_times ? st_jnum_or_null(t->span_s) : json_null());
    json_object_set_new(rate, "mean_rps", st_jnum_or_null(t->mean_rps));
    json_object_set_new(rate, "p50_minute_rps", st_jnum_or_null(t->p50_minute_rps));
    json_object_set_new(rate, "p95_minute_rps", st_jnum_or_null(t->p95_minute_rps));
    json_object_set_new(rate, "peak_minute_rps", st_jnum_or_null(t->peak_minute_rps));
    json_object_set_new(rate, "minutes", json_integer(t->minutes));
    json_object_set_new(rate, "minutes_capped", json_boolean(t->minutes_capped));
    json_object_set_new(rate, "gap_cv", st_jnum_or_null(t->gap_cv));
    json_object_set_new(rate, "gamma_shape", st_jnum_or_null(t->gamma_shape));
    json_object_set_new(rate, "quantum_s", t->quantum_s > 0 ? json_real(t->quantum_s) : json_null());
    json_object_set_new(rate, "gap_cv_recorded", st_jnum_or_null(t->gap_cv_recorded));
    json_object_set_new(rate, "out_of_order", json_integer((json_int_t)t->out_of_order));
    json_object_set_new(rate, "hourly", hourly_json(&t->hourly));
    json_object_set_new(o, "rate", rate);
    json_object_set_new(o, "input_tokens", len_json(&t->in));
    json_object_set_new(o, "output_tokens", len_json(&t->out));
    json_object_set_new(o, "total_tokens", len_json(&t->total));
    json_t *px = json_object();
    json_object_set_new(px, "known", json_boolean(t->prefix_known));
    json_object_set_new(px, "prompt_tokens", json_integer((json_int_t)t->prompt_tokens));
    json_object_set_new(px, "shared_tokens", json_integer((json_int_t)t->shared_tokens));
    json_object_set_new(px, "shared_share", st_jnum_or_null(t->shared_share));
    json_object_set_new(px, "ideal_hit_rate", st_jnum_or_null(t->ideal_hit_rate));
    json_object_set_new(px, "lower_bound", json_boolean(t->prefix_lower_bound));
    json_object_set_new(px, "cache_block", json_integer(ST_TRAFFIC_CACHE_BLOCK));
    json_object_set_new(o, "prefix", px);
    json_t *ss = json_object();
    json_object_set_new(ss, "sessions", json_integer((json_int_t)t->sessions));
    json_object_set_new(ss, "later_turns", json_integer((json_int_t)t->later_turns));
    json_object_set_new(ss, "turns_mean", st_jnum_or_null(t->turns_mean));
    json_object_set_new(ss, "turns_max", json_integer(t->turns_max));
    json_object_set_new(o, "sessions", ss);
    if (a) {
        json_t *ad = json_object();
        json_object_set_new(ad, "max_model_len_p99", json_integer(a->mml_p99));
        json_object_set_new(ad, "max_model_len_capped_by_context", json_boolean(a->mml_capped));
        json_object_set_new(ad, "reject_p99", st_jnum_or_null(a->reject_p99));
        json_object_set_new(ad, "max_model_len_p95", json_integer(a->mml_p95));
        json_object_set_new(ad, "reject_p95", st_jnum_or_null(a->reject_p95));
        json_object_set_new(ad, "reject_current", st_jnum_or_null(a->reject_current));
        json_object_set_new(ad, "kv_tokens", a->kv_known ? json_integer((json_int_t)a->kv_tokens) : json_null());
        json_object_set_new(ad, "kv_fit_mean", st_jnum_or_null(a->kv_fit_mean));
        json_object_set_new(ad, "kv_fit_p99", st_jnum_or_null(a->kv_fit_p99));
        json_object_set_new(ad, "kv_fill_e2e_s", st_jnum_or_null(a->kv_fill_e2e_s));
        json_object_set_new(ad, "share_over_kv", st_jnum_or_null(a->share_over_kv));
        static const char *const pv[] = { "unknown", "little", "some", "pays" };
        json_object_set_new(ad, "prefix_caching", json_string(pv[a->prefix]));
        json_t *lines = json_array();
        for (int i = 0; i < a->n_lines; i++)
            json_array_append_new(lines, json_string(a->lines[i]));
        json_object_set_new(ad, "text", lines);
        json_object_set_new(o, "advice", ad);
    }
    if (c) {
        json_t *k =
            json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:b}", "lines", (json_int_t)c->lines, "rows",
                      (json_int_t)c->rows, "kept", (json_int_t)c->kept, "failed", (json_int_t)c->failed, "window",
                      (json_int_t)c->window, "model", (json_int_t)c->model, "sampled_out", (json_int_t)c->sampled_out,
                      "empty", (json_int_t)c->empty, "too_long", (json_int_t)c->too_long, "bad", (json_int_t)c->bad,
                      "unsorted", (json_int_t)c->unsorted, "stopped", c->stopped);
        if (k) {
            json_t *b = json_array();
            for (uint32_t i = 0; i < c->n_bad_first; i++)
                json_array_append_new(b, json_string(c->bad_first[i]));
            json_object_set_new(k, "bad_first", b);
            json_object_set_new(k, "orphaned", json_integer((json_int_t)c->orphaned));
            json_object_set_new(o, "counts", k);
        }
    }
    return o;
}
