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

    /* Time of every token event (relative to t0), n_events of them; owned by the record
     * (malloc'd). One event may carry more than one token. ITL = consecutive differences. */
    st_ns *events;
    uint32_t n_events;
    uint32_t cap_events;

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

/* Appends an event time; -1 when out of memory. */
int st_record_add_event(st_record *r, st_ns t);
/* Makes room for n events in all (n_events stays); 0, or -1 when out of memory. */
int st_record_reserve_events(st_record *r, uint32_t n);
/* Sets error to a copy of msg truncated to ST_RECORD_ERROR_MAX (with "..." when cut), control
 * characters replaced by spaces (st_text_sanitize: the text often comes from the server). */
void st_record_set_error(st_record *r, st_req_status st, const char *msg, size_t len);
/* Frees events and error; the record can be reused after st_record_init. */
void st_record_free(st_record *r);
void st_record_init(st_record *r, uint32_t id);

#endif
