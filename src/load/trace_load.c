/* Traces into workloads (load/trace.h): the rows a reader keeps become work items with
 * generated prompts, in time order, with sessions replayed, flattened or ignored. */
#include "load/trace.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/util.h"
#include "core/rng.h"

/* Seeds of the id streams (fixed, so one trace always expands to the same prompts). The
 * unique stream is the one the servetune format has always used for a request's own tokens. */
#define TRACE_UNIQUE_SEED 0x7472616365756e71ULL /* "traceunq" */
#define TRACE_BLOCK_SEED 0x7472616365626c6bULL  /* "traceblk": one stream per Mooncake hash id */
#define TRACE_ANSWER_SEED 0x7472616365616e73ULL /* "traceans": stand-in answers of flattened sessions */
#define TRACE_NEW_SEED 0x747261636565776eULL    /* "traceewn": the new text of a later turn */

int st_trace_sessions_from_name(const char *name, st_trace_sessions *out)
{
    static const char *const names[] = { "replay", "flat", "off" };
    for (int i = 0; name && i < 3; i++)
        if (!strcmp(name, names[i])) {
            *out = (st_trace_sessions)i;
            return 0;
        }
    return -1;
}

void st_trace_load_opts_default(st_trace_load_opts *o)
{
    memset(o, 0, sizeof *o);
    o->sessions = ST_TRACE_SESSIONS_REPLAY;
    o->think_s = NAN;
}

typedef struct smap_ent {
    uint64_t key;
    uint32_t last;  /* item index of the session's latest turn */
    uint32_t index; /* 1 + session number */
} smap_ent;

typedef struct loader {
    const st_trace_load_opts *o;
    st_work_item *items;
    double *t; /* each item's time since the first row (NAN: none) */
    uint32_t n, cap;
    uint64_t tokens;
    smap_ent *map;
    uint32_t map_cap, map_n;
    uint32_t n_sessions;
} loader;

static smap_ent *smap_get(loader *L, uint64_t key, int *created)
{
    *created = 0;
    if (L->map_n * 2 >= L->map_cap) {
        uint32_t nc = L->map_cap ? L->map_cap * 2 : 256;
        smap_ent *nm = calloc(nc, sizeof *nm);
        if (!nm)
            return NULL;
        for (uint32_t i = 0; i < L->map_cap; i++)
            if (L->map[i].key) {
                uint32_t h = (uint32_t)st_mix64(L->map[i].key) & (nc - 1);
                while (nm[h].key)
                    h = (h + 1) & (nc - 1);
                nm[h] = L->map[i];
            }
        free(L->map);
        L->map = nm;
        L->map_cap = nc;
    }
    uint32_t h = (uint32_t)st_mix64(key) & (L->map_cap - 1);
    while (L->map[h].key) {
        if (L->map[h].key == key)
            return &L->map[h];
        h = (h + 1) & (L->map_cap - 1);
    }
    L->map[h].key = key;
    L->map_n++;
    *created = 1;
    return &L->map[h];
}

static void unique_ids(uint32_t *ids, uint32_t n, uint64_t index, uint64_t salt)
{
    st_workload_fill_ids(TRACE_UNIQUE_SEED ^ salt ^ ((index + 1) * 0xbf58476d1ce4e5b9ULL), ids, n);
}

/* A row's own prompt as ids (everything but the history of a session). */
static int own_ids(const st_trace_row *row, uint32_t n, uint64_t index, int later_turn, uint64_t salt, uint32_t *ids)
{
    if (later_turn) {
        st_workload_fill_ids(TRACE_NEW_SEED ^ salt ^ st_mix64(index + 1), ids, n);
        return 0;
    }
    if (row->n_hash) {
        uint32_t bs = row->block_size, k = 0;
        for (uint32_t b = 0; b < row->n_hash && k < n; b++) {
            uint32_t m = n - k < bs ? n - k : bs;
            st_workload_fill_ids(TRACE_BLOCK_SEED ^ salt ^ st_mix64(row->hash_ids[b] + 1), ids + k, m);
            k += m;
        }
        if (k < n)
            unique_ids(ids + k, n - k, index, salt);
        return 0;
    }
    unique_ids(ids, n, index, salt);
    return 0;
}

/* Room for one more item (and its time). */
static int loader_room(loader *L, char *err, size_t errlen)
{
    if (L->n >= ST_WORKLOAD_MAX_REQUESTS) {
        st_errf(err, errlen, "more than %u requests", ST_WORKLOAD_MAX_REQUESTS);
        return -1;
    }
    if (L->n < L->cap)
        return 0;
    uint32_t nc = L->cap ? L->cap * 2 : 64;
    if (nc > ST_WORKLOAD_MAX_REQUESTS)
        nc = ST_WORKLOAD_MAX_REQUESTS;
    st_work_item *p = realloc(L->items, (size_t)nc * sizeof *p);
    if (!p) {
        st_errf(err, errlen, "out of memory");
        return -1;
    }
    L->items = p;
    double *t = realloc(L->t, (size_t)nc * sizeof *t);
    if (!t) {
        st_errf(err, errlen, "out of memory");
        return -1;
    }
    L->t = t;
    L->cap = nc;
    return 0;
}

/* A flattened turn's prompt as text: the previous prompt, a stand-in answer, the new text. */
static int flat_text(const st_work_item *prev, const st_work_item *nat, uint32_t last, st_work_item *it, char *err,
                     size_t errlen)
{
    st_buf b;
    st_buf_init(&b, (size_t)64 << 20);
    st_work_item ans = { 0 };
    ans.input_len = prev->output_len;
    ans.input_ids = malloc((size_t)ans.input_len * sizeof *ans.input_ids);
    if (ans.input_ids)
        st_workload_fill_ids(TRACE_ANSWER_SEED ^ st_mix64(last + 1), ans.input_ids, ans.input_len);
    st_workload_text(prev, &b);
    st_buf_append(&b, " ", 1);
    st_workload_text(&ans, &b);
    st_buf_append(&b, " ", 1);
    if (nat)
        st_workload_text(nat, &b);
    free(ans.input_ids);
    if (st_buf_error(&b) || !ans.input_ids || !nat) {
        st_buf_free(&b);
        st_errf(err, errlen, "cannot build the session's prompt (out of memory or too long)");
        return -1;
    }
    it->input_text = b.data; /* owned now */
    return 0;
}

/* A later turn flattened: the previous prompt, a stand-in answer of the recorded length, the new text. */
static int row_flat(loader *L, const st_trace_row *row, uint32_t idx, smap_ent *se, char *err, size_t errlen)
{
    const st_trace_load_opts *o = L->o;
    st_work_item *it = &L->items[idx], *nat = row->item;
    st_work_item *prev = &L->items[se->last];
    uint32_t newl = nat ? nat->input_len : row->new_len;
    uint64_t full = (uint64_t)prev->input_len + prev->output_len + newl;
    if (full > ST_WORKLOAD_MAX_TOKENS) {
        st_errf(err, errlen, "the session's prompt grows past %u tokens", ST_WORKLOAD_MAX_TOKENS);
        return -1;
    }
    if (prev->input_text || (nat && nat->input_text)) {
        if (flat_text(prev, nat, se->last, it, err, errlen) < 0)
            return -1;
    } else {
        it->input_ids = malloc(full * sizeof *it->input_ids);
        if (!it->input_ids) {
            st_errf(err, errlen, "out of memory");
            return -1;
        }
        memcpy(it->input_ids, prev->input_ids, (size_t)prev->input_len * sizeof *it->input_ids);
        st_workload_fill_ids(TRACE_ANSWER_SEED ^ o->read.salt ^ st_mix64(se->last + 1), it->input_ids + prev->input_len,
                             prev->output_len);
        uint32_t *nw = it->input_ids + prev->input_len + prev->output_len;
        if (nat && nat->input_ids)
            memcpy(nw, nat->input_ids, (size_t)newl * sizeof *nw);
        else
            own_ids(row, newl, idx, 1, o->read.salt, nw);
    }
    it->input_len = (uint32_t)full;
    it->prefix_group = prev->prefix_group;
    it->prefix_len = prev->prefix_len;
    se->last = idx;
    return 0;
}

/* A row as it was (the native item's prompt, or generated ids); a later turn linked to the one before. */
static int row_replay(loader *L, const st_trace_row *row, uint32_t idx, smap_ent *se, int later, char *err,
                      size_t errlen)
{
    const st_trace_load_opts *o = L->o;
    st_work_item *it = &L->items[idx], *nat = row->item;
    if (nat) {
        it->input_ids = nat->input_ids;
        it->input_text = nat->input_text;
        nat->input_ids = NULL;
        nat->input_text = NULL;
        it->input_len = nat->input_len;
        it->prefix_group = nat->prefix_group;
        it->prefix_len = nat->prefix_len;
    } else {
        /* replay: a later turn holds only its new text; otherwise the whole prompt */
        it->input_len = later ? row->new_len : row->input_len;
        it->input_ids = malloc((size_t)(it->input_len ? it->input_len : 1) * sizeof *it->input_ids);
        if (!it->input_ids) {
            st_errf(err, errlen, "out of memory");
            return -1;
        }
        own_ids(row, it->input_len, idx, later, o->read.salt, it->input_ids);
    }
    if (later) {
        /* REPLAY: linked to the turn before; sent when it ends */
        double th = !isnan(o->think_s) ? o->think_s : row->think_s;
        if (isnan(o->think_s) && th > ST_TRACE_THINK_CAP_S) /* counted by the reader, said in its counts */
            th = ST_TRACE_THINK_CAP_S;
        it->think = isnan(th) || th < 0 ? 0 : (st_ns)llround(th * 1e9);
        L->items[se->last].next = idx;
        se->last = idx;
    }
    return 0;
}

/* The reader's callback: one kept row into a work item (flattened or replayed when in a session). */
static int on_row(void *arg, const st_trace_row *row, char *err, size_t errlen)
{
    loader *L = arg;
    const st_trace_load_opts *o = L->o;
    if (loader_room(L, err, errlen) < 0)
        return -1;
    uint32_t idx = L->n;
    st_work_item *it = &L->items[idx];
    memset(it, 0, sizeof *it);
    it->id = idx;
    it->arrival = -1;
    it->output_len = row->output_len;
    L->t[idx] = row->has_ts ? row->rel_s : NAN;
    int in_session = row->session && o->sessions != ST_TRACE_SESSIONS_OFF;
    int later = in_session && row->turn > 0;
    smap_ent *se = NULL;
    if (in_session) {
        int created;
        se = smap_get(L, row->session, &created);
        if (!se) {
            st_errf(err, errlen, "out of memory");
            return -1;
        }
        if (created) {
            se->index = ++L->n_sessions;
            se->last = idx;
        }
        it->session = se->index;
        it->turn = row->turn;
    }
    int rc = later && o->sessions == ST_TRACE_SESSIONS_FLAT ? row_flat(L, row, idx, se, err, errlen)
                                                            : row_replay(L, row, idx, se, later, err, errlen);
    if (rc < 0)
        return -1;
    L->tokens += it->input_len;
    L->n++;
    if (L->tokens > ST_TRACE_LOAD_TOKENS_MAX) {
        st_errf(err, errlen,
                "the kept requests hold more than %llu prompt tokens; replay a part of the trace (--trace-window, "
                "--trace-sample, --num-requests)",
                (unsigned long long)ST_TRACE_LOAD_TOKENS_MAX);
        return -1;
    }
    return 0;
}

static int cmp_idx(const void *a, const void *b, void *arg)
{
    const double *t = arg;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    double tx = t[x], ty = t[y];
    if (tx < ty)
        return -1;
    if (tx > ty)
        return 1;
    return x < y ? -1 : x > y;
}

/* Puts the scheduled items first, in time order, and the dependent turns after them. */
static int finish(loader *L, double quantum_s, st_workload *out, char *err, size_t errlen)
{
    uint32_t n = L->n;
    uint32_t *perm = malloc((size_t)n * sizeof *perm), *inv = malloc((size_t)n * sizeof *inv);
    st_work_item *items = malloc((size_t)n * sizeof *items);
    double *ts = malloc((size_t)(n ? n : 1) * sizeof *ts);
    if (!perm || !inv || !items || !ts) {
        free(perm);
        free(inv);
        free(items);
        free(ts);
        st_errf(err, errlen, "out of memory");
        return -1;
    }
    int replay = L->o->sessions == ST_TRACE_SESSIONS_REPLAY;
    uint32_t ns = 0, nd = 0;
    for (uint32_t i = 0; i < n; i++)
        if (!(replay && L->items[i].turn > 0))
            perm[ns++] = i;
    int timed = n > 0 && !isnan(L->t[perm[0]]);
    if (timed) {
        /* the trace's own order is kept for equal times; a trace out of order is sorted */
        qsort_r(perm, ns, sizeof *perm, cmp_idx, L->t);
    }
    for (uint32_t i = 0; i < n; i++)
        if (replay && L->items[i].turn > 0)
            perm[ns + nd++] = i;
    for (uint32_t k = 0; k < n; k++)
        inv[perm[k]] = k;
    double t0 = timed ? L->t[perm[0]] : 0;
    for (uint32_t k = 0; timed && k < ns; k++)
        ts[k] = L->t[perm[k]] - t0;
    /* a coarse clock's ticks: their requests spread over the tick, not sent at once */
    if (timed)
        st_trace_spread_ties(ts, ns, quantum_s);
    for (uint32_t k = 0; k < n; k++) {
        items[k] = L->items[perm[k]];
        items[k].id = k;
        if (items[k].next)
            items[k].next = inv[items[k].next];
        items[k].arrival = (timed && k < ns) ? (st_ns)llround(ts[k] * 1e9) : -1;
    }
    free(ts);
    free(perm);
    free(inv);
    free(L->items);
    L->items = NULL;
    out->items = items;
    out->n = n;
    out->n_dependent = nd;
    out->n_sessions = L->n_sessions;
    return 0;
}

static void loader_free(loader *L)
{
    for (uint32_t i = 0; L->items && i < L->n; i++)
        st_work_item_free(&L->items[i]);
    free(L->items);
    free(L->t);
    free(L->map);
}

static int load_common(const char *path, const char *data, size_t len, const st_trace_load_opts *o, st_workload *out,
                       st_trace_counts *counts, st_trace_format *fmt, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    st_trace_load_opts def;
    if (!o) {
        st_trace_load_opts_default(&def);
        o = &def;
    }
    loader L;
    memset(&L, 0, sizeof L);
    L.o = o;
    st_trace_counts c;
    int rc = data ? st_trace_read_buffer(data, len, path, &o->read, on_row, &L, &c, fmt, err, errlen)
                  : st_trace_read_file(path, &o->read, on_row, &L, &c, fmt, err, errlen);
    if (counts)
        *counts = c;
    if (rc == 0 && L.n == 0) {
        char d[400];
        st_trace_counts_describe(&c, d, sizeof d);
        st_errf(err, errlen, "%s: the trace holds no requests (%s)", path, d);
        rc = -1;
    }
    if (rc == 0)
        rc = finish(&L, c.quantum_s, out, err, errlen);
    loader_free(&L);
    return rc;
}

int st_trace_load(const char *path, const st_trace_load_opts *o, st_workload *out, st_trace_counts *counts,
                  st_trace_format *fmt, char *err, size_t errlen)
{
    return load_common(path, NULL, 0, o, out, counts, fmt, err, errlen);
}

int st_trace_load_buffer(const char *data, size_t len, const char *name, const st_trace_load_opts *o, st_workload *out,
                         st_trace_counts *counts, st_trace_format *fmt, char *err, size_t errlen)
{
    return load_common(name, data ? data : "", len, o, out, counts, fmt, err, errlen);
}

/* The workload API of before: any format; sessions flattened, so every item is on the
 * schedule (callers that know nothing of dependent turns get none). */
int st_workload_trace_load(const char *path, st_workload *out, char *err, size_t errlen)
{
    st_trace_load_opts o;
    st_trace_load_opts_default(&o);
    o.sessions = ST_TRACE_SESSIONS_FLAT;
    return st_trace_load(path, &o, out, NULL, NULL, err, errlen);
}

int st_workload_trace_parse(const char *data, size_t len, const char *name, st_workload *out, char *err, size_t errlen)
{
    st_trace_load_opts o;
    st_trace_load_opts_default(&o);
    o.sessions = ST_TRACE_SESSIONS_FLAT;
    return st_trace_load_buffer(data, len, name, &o, out, NULL, NULL, err, errlen);
}
