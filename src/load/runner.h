/* The open-loop runner: sends a workload to an HTTP endpoint on a schedule and records
 * what happened to every request (load/record.h). One thread, one epoll loop (net/loop),
 * HTTP/1.1 keep-alive connections in a pool that grows to the concurrency the schedule
 * needs, SSE framing per request (net/sse), API events parsed with load/api.
 *
 * Timing (all st_now(), relative to t0 = the start of the run):
 *   scheduled   the arrival time from the schedule. Warm-up requests (the first `warmup`
 *               items) use their own schedule times; the measured requests are scheduled
 *               after every warm-up request has finished, keeping their relative offsets.
 *   sent        when the first byte of the request was handed to the kernel (so it
 *               includes waiting for a free slot under max_concurrency, and the connect /
 *               TLS handshake of a new connection)
 *   first_byte, each token event, end: read at the time the bytes were read.
 * A request whose scheduled time has passed is started at once; the lateness is kept.
 *
 * Self-check (documented in docs/bench.md): the client is "client-limited" when, over the
 * measured requests, the p99 DISPATCH LAG (time the runner started a request that did
 * not wait for a concurrency slot, minus its scheduled time) or the p99 EVENT-LOOP DELAY
 * (lateness of a 5 ms probe timer) exceeds max_lag_ms (default 10 ms). Waiting for a
 * max_concurrency slot is the user's choice and is NOT client lag (it still counts in
 * TTFT and in the record's sent - scheduled). When every measured request has the same
 * scheduled time (rate inf) there is no schedule to keep: the check reports "not applicable".
 *
 * Failures never stop the run: each becomes a record status with a reason (st_record.error):
 * connect (refused/unreachable/DNS), tls, http_status (non-2xx, body kept truncated),
 * stream_error (error event), malformed (bad HTTP/SSE/JSON), too_large (header block,
 * event or body over its limit), timeout (no completion within timeout_s of the start),
 * reset (connection closed/reset before the end), incomplete (the body ended without a
 * final event), aborted (stop flag). A request is complete at its final event ([DONE], or
 * the end of the body for APIs without one); its connection is reused when the HTTP message
 * has ended, or closed after 50 ms. Under max_concurrency the number of connections never
 * exceeds the limit. A request that fails on a reused keep-alive connection
 * before any response byte is retried once on a new connection (the server may close idle
 * connections at any time).
 *
 * Reasoning models: the record's first_answer is the first event with visible answer text
 * (load/api.h), reasoning_tokens the tokens of reasoning events; prompt_reported the server's
 * own count of the prompt.
 *
 * Every request carries "X-Servetune-Id: <work item index>" so that a server can log its own
 * times per request (bench/stream_server does, for the timing-truth benchmark).
 *
 * The API key is only ever copied into the Authorization header bytes on the wire; it is
 * never logged, printed, or stored in results. */
#ifndef ST_RUNNER_H
#define ST_RUNNER_H
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/clock.h"
#include "core/secret.h"
#include "load/api.h"
#include "load/record.h"
#include "load/stats.h"
#include "load/workload.h"

/* Not an engine API: a plain GET of the URL; any 2xx with a complete body is success.
 * For raw request-rate benchmarks (compare with wrk) and for fetching /v1/models. */
#define ST_RUNNER_API_RAW (-1)

typedef struct st_runner_progress {
    st_ns elapsed; /* since t0 */
    uint32_t total, arrived, sent, completed, failed, in_flight, waiting;
    uint64_t output_tokens;   /* token events' tokens so far */
    uint32_t connections;     /* open connections */
    const st_record *records; /* the run's records so far (total of them; read-only, valid during the
                                 callback): the audit's early stop reads them */
} st_runner_progress;

typedef void (*st_runner_cb)(void *arg, const st_runner_progress *p);

/* A request may bring at most output_requested x ST_RUNNER_EVENTS_PER_TOKEN +
 * ST_RUNNER_EVENTS_SLACK token events; more fail it (too_large). */
#define ST_RUNNER_EVENTS_PER_TOKEN 2u
#define ST_RUNNER_EVENTS_SLACK 16u

/* Multi-turn sessions (load/session.h): the work's last work->n_dependent items are not on the
 * schedule; the end hook, called when any request ends (any status), starts them with
 * st_runner_release (or ends them unsent with st_runner_skip). For an item with a next turn
 * (st_work_item.next) the hook gets the answer text the server streamed (reasoning and
 * <think> spans left out), else answer is NULL. */
typedef struct st_runner_ctl st_runner_ctl;
typedef void (*st_runner_end_cb)(void *arg, st_runner_ctl *r, uint32_t i, const st_record *rec, const char *answer,
                                 size_t answer_len);
/* Schedules dependent item i delay ns from now (its scheduled time; TTFT counts from it). */
void st_runner_release(st_runner_ctl *r, uint32_t i, st_ns delay);
/* Ends dependent item i without sending it (status skipped, reason why). */
void st_runner_skip(st_runner_ctl *r, uint32_t i, const char *why);

typedef struct st_runner_config {
    const char *url;     /* base URL (http or https); the API path is appended */
    int api;             /* st_api_kind, or ST_RUNNER_API_RAW */
    int stream;          /* 1: streaming requests (the default for benches) */
    int has_temperature; /* 1: every request carries temperature (else the engine's default) */
    double temperature;
    const char *model;          /* may be NULL */
    const char *api_key;        /* NULL or the key value: "Authorization: Bearer <key>" */
    const char *const *headers; /* extra "Name: value" lines */
    int nheaders;
    const st_workload *work;  /* work->n requests (raw mode: only n is used) */
    const st_ns *schedule;    /* work->n offsets from t0 (ns), nondecreasing over the scheduled items (the
                                 dependent ones, if any, are ignored) */
    uint32_t warmup;          /* the first `warmup` items are warm-up requests */
    uint32_t max_concurrency; /* 0: unbounded */
    double timeout_s;         /* per request, from its start (0: 300 s) */
    int insecure;             /* 1: no TLS certificate verification */
    const char *ca_file;      /* extra CA bundle or NULL */
    size_t max_event;         /* largest SSE event (0: 1 MiB) */
    size_t max_body;          /* largest non-streaming body (0: 4 MiB) */
    double max_lag_ms;        /* self-check threshold (0: 10 ms) */
    st_ns spin_ns;            /* busy-poll this long before each timer deadline (<= 0: off, the
                                   default: epoll_pwait2 alone; spinning hurts on shared cores) */
    st_runner_cb progress;    /* called about once per second, may be NULL */
    void *progress_arg;
    st_runner_cb tick; /* called about once per second (for the audit), may be NULL */
    void *tick_arg;
    volatile sig_atomic_t *stop; /* nonzero: stop now (in-flight and unsent requests: aborted) */
    st_runner_end_cb on_end;     /* sessions: see st_runner_end_cb (may be NULL) */
    void *on_end_arg;
    st_buf *raw_body;          /* raw mode: receives the body of the last successful response */
    const st_secrets *secrets; /* removed from every error text recorded (a server may echo the key) */
} st_runner_config;

typedef struct st_run_result {
    st_record *records; /* work->n, index = work item */
    uint32_t n;
    st_ns t0_wall;        /* wall clock (ns since the epoch) at t0 */
    st_ns t0_mono;        /* st_now() at t0 (to compare with other processes' monotonic times) */
    st_ns duration;       /* t0 to the end of the run */
    st_dist dispatch_lag; /* seconds; measured requests that did not wait for a slot */
    st_dist loop_delay;   /* seconds; probe timer lateness while measured requests ran */
    double max_lag_ms;    /* the self-check threshold used */
    int client_limited;   /* self-check failed */
    char limited_reason[200];
    int interrupted; /* the stop flag ended the run */
    uint32_t connections_opened;
    uint32_t retries; /* requests retried after a stale keep-alive connection */
    uint32_t max_in_flight;
} st_run_result;

/* Runs the whole schedule. 0 when the run happened (requests may have failed: see the
 * records), -1 with a reason in err when it could not start (bad URL, bad config, no
 * memory). */
int st_runner_run(const st_runner_config *cfg, st_run_result *out, char *err, size_t errlen);
void st_run_result_free(st_run_result *r);

/* One GET of url (blocking, through the runner; raw mode). Fills body (bounded by its max)
 * and *status. 0 on a 2xx, -1 with the reason in err otherwise. */
int st_runner_fetch(const char *url, const char *api_key, const char *const *headers, int nheaders, int insecure,
                    double timeout_s, st_buf *body, int *status, char *err, size_t errlen);

#endif
