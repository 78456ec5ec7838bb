/* The per-request record: what one request did, with every timestamp the load generator
 * took. It is the unit every figure in servetune is computed from (stats, capacity, cost,
 * reports), and what the result store keeps. The same struct is filled by the open-loop
 * runner over HTTP and by the engine model in virtual time (servetune predict).
 *
 * Times are nanoseconds on the monotonic clock relative to the run's start (t0), so that
 * records of a run can be stored and compared without the absolute clock. A time that did
 * not happen is -1. */
#ifndef ST_RECORD_H
#define ST_RECORD_H
#include <stddef.h>
#include <stdint.h>

#include "core/clock.h"

typedef enum st_req_status {
    ST_REQ_OK = 0,
    ST_REQ_CONNECT,      /* connection refused / unreachable / DNS */
    ST_REQ_TLS,          /* TLS handshake or certificate failure */
    ST_REQ_HTTP_STATUS,  /* non-2xx status; error holds the (truncated) body */
    ST_REQ_STREAM_ERROR, /* an error event inside the stream */
    ST_REQ_MALFORMED,    /* unparseable HTTP, SSE or JSON from the server */
    ST_REQ_TOO_LARGE,    /* a header block, event or body over its limit */
    ST_REQ_TIMEOUT,      /* no completion within the per-request timeout */
    ST_REQ_RESET,        /* connection closed or reset before the response completed */
    ST_REQ_INCOMPLETE,   /* the stream ended without a finish (e.g. no [DONE]) */
    ST_REQ_ABORTED,      /* not completed because the run was stopped (signal, early stop) */
    ST_REQ_SKIPPED,      /* a session's later turn not sent because an earlier turn failed */
    ST_REQ__COUNT
} st_req_status;

/* Stable short names ("ok", "connect", "tls", "http_status", ...), used in JSON/CSV/SQL. */
const char *st_req_status_name(st_req_status s);

struct st_tok_chunk;

/* A segment of token events, of one of two kinds.
 * A formula (tl NULL): event k (0 <= k < n) at
 *   t0 + llround(k * d + dd * k * (k - 1) / 2) ns,
 * so steps whose interval grows by dd ns a step (the engine model's runs of decode steps, where
 * each step reads one more token of KV cache per sequence), equal intervals (dd 0) or one event
 * (n 1): a real stream's events, a few to a segment, or a run of engine steps.
 * A timeline reference (tl set, in a record only): the chunk's events first .. first + n - 1
 * (st_tok_chunk below), each plus t0 (the record's own offset from the shared times, e.g. its place
 * on the API server's queue), times llround(x * d) when d != 0 (a time scale applied to the
 * record: the shared times stay as they are). It holds one reference to tl (st_record_free drops
 * it). A sequence the engine model runs without a break (no preemption, no change of its offset)
 * is one such segment, whatever its length and however often the batch changes. */
typedef struct st_tok_seg {
    st_ns t0;
    double d;
    union {
        float dd;       /* formula */
        uint32_t first; /* timeline reference */
    };
    uint32_t n;
    const struct st_tok_chunk *tl;
} st_tok_seg;

/* A shared step timeline's chunk: formula segments (s[0..n), holding n_ev events: event e of the
 * chunk is event e - e0[i] of the segment i with e0[i] <= e < e0[i] + s[i].n) written once by their
 * producer (the engine model's session: each step's or run of steps' delivery times) and read by
 * every record that references them. Ownership: reference-counted (atomically, so records may be
 * freed on any thread). The producer holds one reference while it appends (segments are only added;
 * one once written never changes) and every record segment that points into the chunk holds one
 * more; the last st_tok_chunk_unref frees it. So a record stays valid after the session that wrote
 * its times is freed, and records and sessions may be freed in any order. */
typedef struct st_tok_chunk {
    _Atomic uint32_t refs;
    uint32_t n, cap, n_ev;
    uint32_t *e0;   /* cap of them, after s[] in the same allocation */
    st_tok_seg s[]; /* cap of them */
} st_tok_chunk;

/* A new chunk with room for cap segments and one reference (its creator's), or NULL. */
st_tok_chunk *st_tok_chunk_new(uint32_t cap);
/* Appends a formula segment (room checked by the caller: n < cap); returns its first event's
 * index in the chunk. */
uint32_t st_tok_chunk_add(st_tok_chunk *c, const st_tok_seg *g);
void st_tok_chunk_ref(st_tok_chunk *c);
/* Drops a reference; frees the chunk with the last one. NULL: nothing. */
void st_tok_chunk_unref(st_tok_chunk *c);

/* The segment holding the chunk's event e (< n_ev). */
static inline uint32_t st_tok_chunk_find(const st_tok_chunk *c, uint32_t e)
{
    uint32_t lo = 0, hi = c->n; /* e0[lo] <= e < e0[hi] */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (c->e0[mid] <= e)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* A formula segment's event k. */
static inline st_ns st_tok_seg_at(const st_tok_seg *s, uint32_t k)
{
    if (k == 0)
        return s->t0;
    double x = (double)k * s->d + 0.5 * (double)s->dd * (double)k * (double)(k - 1);
    return s->t0 + (st_ns)(x >= 0 ? x + 0.5 : x - 0.5);
}

/* A timeline reference's event at shared time x (its offset and scale applied). */
static inline st_ns st_tok_ref_time(const st_tok_seg *s, st_ns x)
{
    x += s->t0;
    if (s->d == 0)
        return x;
    double y = (double)x * s->d;
    return (st_ns)(y >= 0 ? y + 0.5 : y - 0.5);
}

typedef struct st_record {
    uint32_t id;    /* index in the workload */
    uint8_t warmup; /* sent but excluded from statistics */
    st_req_status status;
    int http_status; /* 0 when no response was received */

    st_ns scheduled;    /* intended send time (open loop: from the arrival process) */
    st_ns sent;         /* when the request's first byte was written (-1: never sent) */
    st_ns first_byte;   /* first response byte (-1 if none) */
    st_ns first_token;  /* first event that carried output tokens (-1 if none) */
    st_ns first_answer; /* first event with visible answer text, reasoning excluded (-1 if none) */
    st_ns end;          /* response complete or failure detected */

    uint32_t input_tokens;     /* prompt length sent (requested) */
    uint32_t output_requested; /* max_tokens asked for */
    uint32_t output_tokens;    /* delivered: server usage when reported, else counted */
    uint32_t cached_tokens;    /* prompt tokens the server reported as cached (0 if unknown) */
    uint8_t usage_reported;    /* output_tokens came from the server's usage report */
    uint32_t reasoning_tokens; /* of output_tokens, reasoning (reasoning_content, <think> spans) */
    uint32_t prompt_reported;  /* prompt tokens the server counted (usage), 0 when not reported */
    uint32_t session, turn;    /* the work item's session (1-based, 0: none) and turn */

    /* The server's own account of the request, when its response carries one (llama.cpp's
     * `timings`): prompt time, from the slot taking the request to its first token, and
     * generation time, from the first token to the last, covering srv_gen_n tokens. -1 (and
     * srv_gen_n 0) when not reported. Kept beside the client's TTFT and TPOT: the difference is
     * what the server's queue, the HTTP path and the client add. */
    st_ns srv_prompt, srv_gen;
    uint32_t srv_gen_n;
    /* Speculative decoding as the server reports it for this request (llama.cpp's timings
     * draft_n, draft_n_accepted): has_draft 0 when not reported. */
    int has_draft;
    uint32_t srv_draft_n, srv_draft_accepted;

    /* Time of every token event (relative to t0), n_events of them, held as segments (st_tok_seg
     * above: formulas, a real stream's events a few to a segment, or references into a shared
     * timeline, the engine model's steps); the array is owned by the record (malloc'd), each
     * reference holds its chunk (st_record_free drops them). One event may carry more than one token. ITL = consecutive
     * differences. Read them only through st_events_begin / st_events_next (or st_record_event),
     * never the segments themselves. */
    st_tok_seg *segs;
    uint32_t n_segs, cap_segs;
    uint32_t n_events;
    char *error; /* failure reason (malloc'd, at most ST_RECORD_ERROR_MAX bytes), or NULL */
} st_record;

#define ST_RECORD_ERROR_MAX 512

/* Derived per-request figures (in seconds); NAN when undefined for that record. */
double st_record_ttft(const st_record *r);  /* first_token - scheduled */
double st_record_ttfat(const st_record *r); /* first_answer - scheduled (time to first answer token) */
double st_record_tpot(const st_record *r);  /* (end - first_token) / (output_tokens - 1); NAN when
                                             * every token came at once (not streamed) */
double st_record_e2e(const st_record *r);   /* end - scheduled */
double st_record_lag(const st_record *r);   /* sent - scheduled (client lag) */
/* The server-reported figures against the client's (seconds; NAN when either is missing):
 * TTFT minus the server's prompt time, and TPOT minus the server's generation time per step
 * (srv_gen / (srv_gen_n - 1), the same definition as the client's TPOT). */
double st_record_srv_ttft_gap(const st_record *r);
double st_record_srv_tpot(const st_record *r);
double st_record_srv_tpot_gap(const st_record *r);

/* ---- token events: the one way to read and write them ----
 * Iteration in order: st_event_it it; st_events_begin(&it, r); while (st_events_next(&it, &t)) ... */
typedef struct st_event_it {
    const st_tok_seg *s; /* the record's segment */
    uint32_t k, left;    /* events of it read; events left in all */
    const st_tok_seg *c; /* a timeline reference: the chunk's segment and its event */
    uint32_t ck;
} st_event_it;

/* Positions the iterator at the start of its record segment. */
static inline void st_events_enter(st_event_it *it)
{
    it->k = 0;
    if (it->s->tl) {
        uint32_t i = st_tok_chunk_find(it->s->tl, it->s->first);
        it->c = &it->s->tl->s[i];
        it->ck = it->s->first - it->s->tl->e0[i];
    }
}

static inline void st_events_begin(st_event_it *it, const st_record *r)
{
    it->s = r->segs;
    it->left = r->segs ? r->n_events : 0;
    it->c = NULL;
    it->ck = 0;
    if (it->left)
        st_events_enter(it);
}

/* 1 with the next event's time in *t, 0 after the last. */
static inline int st_events_next(st_event_it *it, st_ns *t)
{
    if (!it->left)
        return 0;
    while (it->k >= it->s->n) {
        it->s++;
        st_events_enter(it);
    }
    it->left--;
    it->k++;
    if (!it->s->tl) {
        *t = st_tok_seg_at(it->s, it->k - 1);
        return 1;
    }
    while (it->ck >= it->c->n) {
        it->c++;
        it->ck = 0;
    }
    *t = st_tok_ref_time(it->s, st_tok_seg_at(it->c, it->ck++));
    return 1;
}

/* Event i's time (0-based), -1 when there is none (O(segments)). */
st_ns st_record_event(const st_record *r, uint32_t i);
/* The last event's time, -1 when there is none. */
st_ns st_record_last_event(const st_record *r);
/* Appends an event time (joined to the last segment when it lies on it exactly); -1 when out of
 * memory. */
int st_record_add_event(st_record *r, st_ns t);
/* Appends segments (n_segs of them, each shifted by `off` ns) after the record's events. 0, or -1
 * when out of memory. */
int st_record_add_segs(st_record *r, const st_tok_seg *segs, uint32_t n_segs, st_ns off);
/* Makes room for n segments in all (n_segs stays); 0, or -1 when out of memory. */
int st_record_reserve_segs(st_record *r, uint32_t n);
/* Appends the chunk's events first .. first + k - 1, each plus off (a reference into a shared
 * timeline: joined to the last segment when it references the same chunk up to `first` with the same
 * offset, so a record that follows the timeline run after run holds one segment). 0, or -1 when out
 * of memory. */
int st_record_add_timeline(st_record *r, st_tok_chunk *tl, uint32_t first, uint32_t k, st_ns off);
/* Keeps the first n events (n >= n_events: nothing changes). Only the record's event count changes,
 * not its segments (n_segs stays: st_record_free still drops every reference), so a shallow copy of a
 * record (a view of it at an earlier time) may be cut without touching the original's events; a cut
 * record is read, not appended to, and a shallow copy is never freed (the original owns the segments
 * and the timeline references). */
void st_record_truncate_events(st_record *r, uint32_t n);
/* Multiplies every event time by k (a time scale), as llround(t * k) would to within 1 ns (a timeline
 * reference keeps the scale beside it: the shared times are not touched). */
void st_record_scale_events(st_record *r, double k);
/* Segments of the times t[0..n) (each within tol ns of its time; tol 0: exact), into out (room
 * for n); returns their count. A run of steps whose interval grows evenly is one segment. */
uint32_t st_tok_segs_fit(const st_ns *t, uint32_t n, st_ns tol, st_tok_seg *out);
/* Sets error to a copy of msg truncated to ST_RECORD_ERROR_MAX (with "..." when cut), control
 * characters replaced by spaces (st_text_sanitize: the text often comes from the server). */
void st_record_set_error(st_record *r, st_req_status st, const char *msg, size_t len);
/* Frees the events (dropping its timeline references) and error; the record can be reused after
 * st_record_init. */
void st_record_free(st_record *r);
/* Frees the first n records of recs (st_record_free) and the array itself; NULL: nothing. */
void st_records_free(st_record *recs, size_t n);
void st_record_init(st_record *r, uint32_t id);

#endif
