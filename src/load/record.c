#include "load/record.h"

#include "core/util.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static const char *status_names[ST_REQ__COUNT] = {
    [ST_REQ_OK] = "ok",
    [ST_REQ_CONNECT] = "connect",
    [ST_REQ_TLS] = "tls",
    [ST_REQ_HTTP_STATUS] = "http_status",
    [ST_REQ_STREAM_ERROR] = "stream_error",
    [ST_REQ_MALFORMED] = "malformed",
    [ST_REQ_TOO_LARGE] = "too_large",
    [ST_REQ_TIMEOUT] = "timeout",
    [ST_REQ_RESET] = "reset",
    [ST_REQ_INCOMPLETE] = "incomplete",
    [ST_REQ_ABORTED] = "aborted",
    [ST_REQ_SKIPPED] = "skipped",
};

const char *st_req_status_name(st_req_status s) { return (s >= 0 && s < ST_REQ__COUNT) ? status_names[s] : "unknown"; }

void st_record_init(st_record *r, uint32_t id)
{
    memset(r, 0, sizeof *r);
    r->id = id;
    r->sent = r->first_byte = r->first_token = r->first_answer = r->end = -1;
    r->srv_prompt = r->srv_gen = -1;
}

double st_record_ttft(const st_record *r)
{
    if (r->first_token < 0)
        return NAN;
    return st_ns_to_s(r->first_token - r->scheduled);
}

double st_record_ttfat(const st_record *r)
{
    if (r->first_answer < 0)
        return NAN;
    return st_ns_to_s(r->first_answer - r->scheduled);
}

double st_record_tpot(const st_record *r)
{
    /* all the tokens at once (a non-streaming answer): no time per token was measured */
    if (r->first_token < 0 || r->end < 0 || r->output_tokens < 2 || r->end == r->first_token)
        return NAN;
    return st_ns_to_s(r->end - r->first_token) / (double)(r->output_tokens - 1);
}

double st_record_e2e(const st_record *r)
{
    if (r->end < 0)
        return NAN;
    return st_ns_to_s(r->end - r->scheduled);
}

double st_record_lag(const st_record *r)
{
    if (r->sent < 0)
        return NAN;
    return st_ns_to_s(r->sent - r->scheduled);
}

double st_record_srv_ttft_gap(const st_record *r)
{
    if (r->srv_prompt < 0)
        return NAN;
    return st_record_ttft(r) - st_ns_to_s(r->srv_prompt);
}

double st_record_srv_tpot(const st_record *r)
{
    if (r->srv_gen < 0 || r->srv_gen_n < 2)
        return NAN;
    return st_ns_to_s(r->srv_gen) / (double)(r->srv_gen_n - 1);
}

double st_record_srv_tpot_gap(const st_record *r) { return st_record_tpot(r) - st_record_srv_tpot(r); }

st_tok_chunk *st_tok_chunk_new(uint32_t cap)
{
    st_tok_chunk *c = malloc(sizeof *c + (size_t)cap * (sizeof c->s[0] + sizeof c->e0[0]));
    if (!c)
        return NULL;
    atomic_init(&c->refs, 1);
    c->n = c->n_ev = 0;
    c->cap = cap;
    c->e0 = (uint32_t *)(c->s + cap);
    return c;
}

uint32_t st_tok_chunk_add(st_tok_chunk *c, const st_tok_seg *g)
{
    uint32_t first = c->n_ev;
    c->e0[c->n] = first;
    c->s[c->n++] = *g;
    c->n_ev += g->n;
    return first;
}

void st_tok_chunk_ref(st_tok_chunk *c) { atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed); }

void st_tok_chunk_unref(st_tok_chunk *c)
{
    if (c && atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) == 1)
        free(c);
}

/* Room for `more` segments: grown by a quarter, not doubled (a record's size is mostly known when it
 * is reserved; what it outgrows is little, and memory it never uses still costs its pages). 0, or -1. */
static int seg_room(st_record *r, uint32_t more)
{
    if (r->n_segs + (uint64_t)more <= r->cap_segs)
        return 0;
    uint64_t need = (uint64_t)r->n_segs + more;
    need += need / 4 + 4;
    return need > UINT32_MAX ? -1 : st_record_reserve_segs(r, (uint32_t)need);
}

int st_record_add_event(st_record *r, st_ns t)
{
    if (r->n_segs && !r->segs[r->n_segs - 1].tl) { /* on the last formula: it grows (two events always
                                                      make one, three when exact) */
        st_tok_seg *s = &r->segs[r->n_segs - 1];
        if (s->n == 1) {
            s->d = (double)(t - s->t0);
            s->dd = 0;
            s->n = 2;
            r->n_events++;
            return 0;
        }
        if (st_tok_seg_at(s, s->n) == t) {
            s->n++;
            r->n_events++;
            return 0;
        }
        st_ns dd = t - st_tok_seg_at(s, 2);
        if (s->n == 2 && s->dd == 0 && dd > -(1 << 24) && dd < (1 << 24)) {
            s->dd = (float)dd; /* event 1 stays where it was: at(1) does not read dd */
            if (st_tok_seg_at(s, 2) == t) {
                s->n = 3;
                r->n_events++;
                return 0;
            }
            s->dd = 0;
        }
    }
    if (seg_room(r, 1) < 0)
        return -1;
    r->segs[r->n_segs++] = (st_tok_seg){ .t0 = t, .n = 1 };
    r->n_events++;
    return 0;
}

/* The record's last segment and the first new one (shifted by off) as one, when they hold three
 * events or fewer (any three make a segment exactly). 1 when joined. */
static int join_short(st_record *r, const st_tok_seg *g, st_ns off)
{
    st_tok_seg *s = &r->segs[r->n_segs - 1];
    if (s->n + g->n > 3 || s->tl || g->tl)
        return 0;
    st_ns p[3] = { 0, 0, 0 };
    uint32_t m = 0;
    for (uint32_t k = 0; k < s->n; k++)
        p[m++] = st_tok_seg_at(s, k);
    for (uint32_t k = 0; k < g->n; k++)
        p[m++] = st_tok_seg_at(g, k) + off;
    st_ns dd = m == 3 ? p[2] - 2 * p[1] + p[0] : 0;
    if (dd <= -(1 << 24) || dd >= (1 << 24))
        return 0;
    st_tok_seg j = { .t0 = p[0], .d = (double)(p[1] - p[0]), .dd = (float)dd, .n = m };
    if (m == 3 && st_tok_seg_at(&j, 2) != p[2])
        return 0;
    *s = j;
    r->n_events += g->n;
    return 1;
}

int st_record_add_segs(st_record *r, const st_tok_seg *segs, uint32_t n_segs, st_ns off)
{
    if (n_segs && r->n_segs && join_short(r, segs, off)) {
        segs++;
        n_segs--;
    }
    if (seg_room(r, n_segs) < 0)
        return -1;
    st_tok_seg *o = r->segs + r->n_segs;
    for (uint32_t i = 0; i < n_segs; i++) {
        o[i] = segs[i];
        o[i].t0 += off;
        if (o[i].tl)
            st_tok_chunk_ref((st_tok_chunk *)o[i].tl);
        r->n_events += segs[i].n;
    }
    r->n_segs += n_segs;
    return 0;
}

int st_record_add_timeline(st_record *r, st_tok_chunk *tl, uint32_t first, uint32_t k, st_ns off)
{
    if (!k)
        return 0;
    if (r->n_segs) {
        st_tok_seg *s = &r->segs[r->n_segs - 1];
        if (s->tl == tl && s->first + s->n == first && s->t0 == off && s->d == 0) {
            s->n += k;
            r->n_events += k;
            return 0;
        }
    }
    if (seg_room(r, 1) < 0)
        return -1;
    st_tok_chunk_ref(tl);
    r->segs[r->n_segs++] = (st_tok_seg){ .t0 = off, .first = first, .n = k, .tl = tl };
    r->n_events += k;
    return 0;
}

int st_record_reserve_segs(st_record *r, uint32_t n)
{
    if (n <= r->cap_segs)
        return 0;
    st_tok_seg *p = realloc(r->segs, (size_t)n * sizeof *p);
    if (!p)
        return -1;
    r->segs = p;
    r->cap_segs = n;
    return 0;
}

st_ns st_record_event(const st_record *r, uint32_t i)
{
    if (i >= r->n_events)
        return -1;
    for (uint32_t s = 0; s < r->n_segs; s++) {
        const st_tok_seg *g = &r->segs[s];
        if (i < g->n && !g->tl)
            return st_tok_seg_at(g, i);
        if (i < g->n) {
            uint32_t e = g->first + i, c = st_tok_chunk_find(g->tl, e);
            return st_tok_ref_time(g, st_tok_seg_at(&g->tl->s[c], e - g->tl->e0[c]));
        }
        i -= r->segs[s].n;
    }
    return -1;
}

st_ns st_record_last_event(const st_record *r) { return r->n_events ? st_record_event(r, r->n_events - 1) : -1; }

void st_record_truncate_events(st_record *r, uint32_t n)
{
    if (n < r->n_events)
        r->n_events = n; /* the segments stay: st_events_next and st_record_event stop at n_events */
}

void st_record_scale_events(st_record *r, double k)
{
    for (uint32_t s = 0; s < r->n_segs; s++) {
        st_tok_seg *g = &r->segs[s];
        if (g->tl) { /* the shared times stay: the scale goes with the reference */
            g->d = g->d != 0 ? g->d * k : k;
            continue;
        }
        g->t0 = (st_ns)llround((double)g->t0 * k);
        g->d *= k;
        g->dd = (float)(g->dd * k);
    }
}

/* The segment of L >= 3 events through t[0], t[(L - 1) / 2] and t[L - 1]. */
static st_tok_seg seg_through(const st_ns *t, uint32_t L)
{
    uint32_t m = (L - 1) / 2, e = L - 1;
    double ym = (double)(t[m] - t[0]), ye = (double)(t[e] - t[0]);
    st_tok_seg s = { .t0 = t[0], .n = L };
    s.dd = (float)(2.0 * (ym / m - ye / e) / ((double)m - (double)e));
    s.d = ym / m - (double)s.dd * (double)(m - 1) / 2.0;
    return s;
}

/* Whether the segment through the first L times holds every one of them within tol. */
static int seg_fits(const st_ns *t, uint32_t L, st_ns tol, st_tok_seg *out)
{
    st_tok_seg s = seg_through(t, L);
    for (uint32_t k = 1; k < L; k++) {
        st_ns x = st_tok_seg_at(&s, k) - t[k];
        if (x > tol || x < -tol)
            return 0;
    }
    *out = s;
    return 1;
}

/* The longest segment found from t[0] (of n >= 3 times): doubling, then halving the bracket. */
static st_tok_seg seg_longest(const st_ns *t, uint32_t n, st_ns tol)
{
    st_tok_seg best = { .t0 = t[0], .d = (double)(t[1] - t[0]), .n = 2 };
    uint32_t L = 3, hi = 0;
    if (!seg_fits(t, 3, tol, &best))
        return best;
    while (L < n) {
        uint32_t L2 = L * 2 < n ? L * 2 : n;
        if (!seg_fits(t, L2, tol, &best)) {
            hi = L2;
            break;
        }
        L = L2;
    }
    while (hi && hi - L > 1) {
        uint32_t mid = L + (hi - L) / 2;
        if (seg_fits(t, mid, tol, &best))
            L = mid;
        else
            hi = mid;
    }
    return best; /* the last that fitted: L events */
}

uint32_t st_tok_segs_fit(const st_ns *t, uint32_t n, st_ns tol, st_tok_seg *out)
{
    uint32_t a = 0, ns = 0;
    while (a < n) {
        uint32_t left = n - a;
        if (left <= 2)
            out[ns] = (st_tok_seg){ .t0 = t[a], .d = left == 2 ? (double)(t[a + 1] - t[a]) : 0, .n = left };
        else
            out[ns] = seg_longest(t + a, left, tol);
        a += out[ns++].n;
    }
    return ns;
}

void st_record_set_error(st_record *r, st_req_status st, const char *msg, size_t len)
{
    r->status = st;
    free(r->error);
    r->error = NULL;
    if (!msg)
        return;
    int cut = len > ST_RECORD_ERROR_MAX;
    size_t n = cut ? ST_RECORD_ERROR_MAX : len;
    r->error = malloc(n + 4);
    if (!r->error)
        return;
    memcpy(r->error, msg, n);
    if (cut)
        memcpy(r->error + n, "...", 3), n += 3;
    r->error[n] = '\0';
    /* server text: no escape sequences reach a terminal, no control characters a report */
    st_text_sanitize(r->error, 0);
}

void st_record_free(st_record *r)
{
    for (uint32_t s = 0; s < r->n_segs; s++)
        st_tok_chunk_unref((st_tok_chunk *)r->segs[s].tl);
    free(r->segs);
    free(r->error);
    r->segs = NULL;
    r->error = NULL;
    r->n_segs = r->cap_segs = r->n_events = 0;
}

void st_records_free(st_record *recs, size_t n)
{
    for (size_t i = 0; recs && i < n; i++)
        st_record_free(&recs[i]);
    free(recs);
}
