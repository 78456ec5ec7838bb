#include "load/runner.h"

#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/util.h"
#include "net/http1.h"
#include "net/loop.h"
#include "net/sse.h"
#include "net/tls.h"
#include "net/url.h"

/* The largest request written on one connection, and the scratch space one is built in. */
#define RUN_OUT_MAX ((size_t)256 << 20)
/* A response body kept when the runner config does not set max_body. */
#define RUN_BODY_DEFAULT_MAX ((size_t)4 << 20)

enum { C_CONNECTING, C_TLS, C_ACTIVE, C_DRAINING, C_IDLE };
enum { M_SSE = 0, M_BODY = 1 };

#define ERR_BODY_MAX 4096
/* Plain-TCP reads of one epoll batch land in an arena first (one recv per ready connection,
 * timestamped at once) and are parsed after the batch: the timestamp of the k-th ready
 * connection then waits for k-1 recv calls, not for k-1 recv + parse + record steps. */
#define ARENA_BYTES (2u << 20)
#define READ_MAX 65536u
#define PEND_MAX 4096u
#define PROBE_NS (5 * ST_NS_PER_MS)
#define TICK_NS ST_NS_PER_S
/* After a request completed on its final event ([DONE]), how long its connection may take to
 * finish the HTTP message (the chunked terminator, normally microseconds later) before it is
 * closed instead of reused. Under --max-concurrency a waiting request may wait this long
 * for the connection at most. */
#define DRAIN_NS (50 * ST_NS_PER_MS)

typedef struct rconn rconn;
typedef struct st_runner_ctl runner;

struct rconn {
    runner *r;
    int fd;
    st_tls *tls;
    int state;
    uint32_t mask;
    st_buf out;
    size_t out_off;
    st_http_parser hp;
    st_sse sse;
    int64_t idx;       /* request in progress, -1: none */
    uint32_t nreq;     /* responses completed on this connection */
    uint8_t got_bytes; /* response bytes received for the current request */
    uint8_t ok2xx, mode, done_seen, finished_seen, must_close, usage_seen;
    uint32_t usage_prompt, usage_completion, usage_cached;
    uint32_t counted;
    st_api_event ev;
    st_buf body;
    st_timer timeout;
    rconn *prev_idle, *next_idle;
    rconn *prev_all, *next_all;
    uint8_t in_idle;
    uint32_t pend_slot; /* 1 + index of this connection's read waiting in the arena, 0: none */
    uint8_t capture;    /* keep the answer text (the item has a next turn) */
    int answer_think;   /* inside a <think> span of the answer */
    st_buf answer;
};

typedef struct pend_read {
    rconn *c; /* NULL when the connection was closed meanwhile */
    uint32_t off, len;
    st_ns t; /* when recv returned */
    int err; /* 0 data, -1 EOF, else errno */
} pend_read;

/* The answer text kept for a session's next turn. */
#define RUN_ANSWER_MAX ((size_t)4 << 20)

struct st_runner_ctl {
    const st_runner_config *cfg;
    st_run_result *res;
    st_loop *l;
    st_url url;
    char path[2200];
    struct sockaddr_storage addr;
    socklen_t addrlen;
    int resolved;
    char resolve_err[256];
    st_tls_ctx *tls;
    st_record *rec;
    uint32_t n, w;
    st_ns t0;
    uint32_t arrived, next_start;
    uint32_t in_flight, finished, finished_warm, sent, completed, failed, warm_done;
    uint64_t tokens;
    uint32_t *retryq;
    uint32_t nretry;
    uint8_t *retried;
    st_timer arrival, probe, tick, pumpt;
    rconn *idle, *all;
    uint32_t nconns;
    double *dlag;
    double *ldelay;
    uint32_t nld;
    size_t capld;
    st_buf scratch;
    char *auth;
    const char **hdrs;
    int nhdrs;
    char idhdr[48];
    st_ns timeout_ns;
    st_ns now_read;
    char *arena;
    size_t arena_used;
    pend_read *pend;
    uint32_t npend;
    int stopping;
    int same_times; /* every scheduled time equal (rate inf): no schedule to keep */
    /* sessions: items [n_static, n) are started by the end hook, through a heap of release
     * times and a queue of released items due now */
    uint32_t n_static;
    uint32_t *rel_idx, nrel;
    st_ns *rel_at;
    uint32_t *readyq, ready_head, ready_n;
    st_timer releaset;
};

static void pump(runner *r);
static void close_conn(rconn *c);

static st_ns rel_now(const runner *r) { return st_now() - r->t0; }

/* ---- bookkeeping ---- */

static void idle_push(rconn *c)
{
    runner *r = c->r;
    st_timer_disarm(r->l, &c->timeout);
    c->state = C_IDLE;
    c->in_idle = 1;
    c->prev_idle = NULL;
    c->next_idle = r->idle;
    if (r->idle)
        r->idle->prev_idle = c;
    r->idle = c;
}

static void idle_remove(rconn *c)
{
    if (!c->in_idle)
        return;
    runner *r = c->r;
    if (c->prev_idle)
        c->prev_idle->next_idle = c->next_idle;
    else
        r->idle = c->next_idle;
    if (c->next_idle)
        c->next_idle->prev_idle = c->prev_idle;
    c->in_idle = 0;
    c->prev_idle = c->next_idle = NULL;
}

static void set_mask(rconn *c, uint32_t m)
{
    if (c->mask == m)
        return;
    c->mask = m;
    st_loop_mod_fd(c->r->l, c->fd, m);
}

static void arm_pump(runner *r)
{
    if (!st_timer_armed(&r->pumpt))
        st_timer_arm(r->l, &r->pumpt, 0);
}

static void arm_arrival(runner *r)
{
    if (r->stopping || r->arrived >= r->n_static || (r->arrived >= r->w && !r->warm_done))
        return;
    st_timer_arm(r->l, &r->arrival, r->t0 + r->rec[r->arrived].scheduled);
}

static void warmups_finished(runner *r)
{
    r->warm_done = 1;
    st_ns base = rel_now(r);
    const st_ns *s = r->cfg->schedule;
    for (uint32_t i = r->w; i < r->n_static; i++)
        r->rec[i].scheduled = base + (s[i] - s[r->w]);
    arm_arrival(r);
}

/* The server's timings of the request (llama.cpp), kept beside the client's times. */
static void keep_timings(st_record *rec, const st_api_event *ev)
{
    rec->srv_prompt = (st_ns)(ev->srv_prompt_ms * 1e6);
    rec->srv_gen = (st_ns)(ev->srv_gen_ms * 1e6);
    rec->srv_gen_n = ev->srv_gen_n;
    rec->has_draft = ev->has_draft;
    rec->srv_draft_n = ev->srv_draft_n;
    rec->srv_draft_accepted = ev->srv_draft_accepted;
}

/* Ends request c->idx with a status (the connection is left as it is). */
static void finish_request(rconn *c, st_req_status st, const char *msg)
{
    runner *r = c->r;
    if (c->idx < 0)
        return;
    uint32_t i = (uint32_t)c->idx;
    st_record *rec = &r->rec[i];
    rec->end = r->now_read >= 0 ? r->now_read : rel_now(r);
    if (st == ST_REQ_OK) {
        rec->status = ST_REQ_OK;
        if (c->usage_seen && c->usage_completion > 0) {
            rec->output_tokens = c->usage_completion;
            rec->usage_reported = 1;
        } else {
            rec->output_tokens = c->counted;
        }
        rec->cached_tokens = c->usage_cached;
        if (c->usage_seen)
            rec->prompt_reported = c->usage_prompt;
        if (c->usage_seen && c->ev.usage_reasoning && c->ev.usage_reasoning <= rec->output_tokens)
            rec->reasoning_tokens = c->ev.usage_reasoning;
    } else {
        st_record_set_error(rec, st, msg, msg ? strlen(msg) : 0);
        st_secrets_redact(r->cfg->secrets, rec->error);
        rec->output_tokens = c->counted;
    }
    st_timer_disarm(r->l, &c->timeout);
    c->idx = -1;
    r->in_flight--;
    r->finished++;
    if (st == ST_REQ_OK)
        r->completed++;
    else
        r->failed++;
    if (i < r->w && ++r->finished_warm == r->w)
        warmups_finished(r);
    if (r->cfg->on_end)
        r->cfg->on_end(r->cfg->on_end_arg, r, i, rec, c->capture == 1 ? (c->answer.data ? c->answer.data : "") : NULL,
                       c->capture == 1 ? c->answer.len : 0);
    arm_pump(r);
}

/* A failure that also ends the connection; retries once on a fresh connection when a
 * reused keep-alive connection failed before any response byte. Closes c. */
static void fail_conn(rconn *c, st_req_status st, const char *msg)
{
    runner *r = c->r;
    if (c->idx >= 0) {
        uint32_t i = (uint32_t)c->idx;
        if (st == ST_REQ_RESET && c->nreq > 0 && !c->got_bytes && !r->retried[i] && !r->stopping) {
            r->retried[i] = 1;
            r->res->retries++;
            r->rec[i].sent = -1;
            st_timer_disarm(r->l, &c->timeout);
            c->idx = -1;
            r->in_flight--;
            r->retryq[r->nretry++] = i;
            arm_pump(r);
        } else {
            finish_request(c, st, msg);
        }
    }
    close_conn(c);
}

static void close_conn(rconn *c)
{
    runner *r = c->r;
    if (c->pend_slot)
        r->pend[c->pend_slot - 1].c = NULL;
    idle_remove(c);
    if (c->fd >= 0) {
        st_loop_del_fd(r->l, c->fd);
        close(c->fd);
    }
    st_tls_free(c->tls);
    st_timer_disarm(r->l, &c->timeout);
    if (c->prev_all)
        c->prev_all->next_all = c->next_all;
    else
        r->all = c->next_all;
    if (c->next_all)
        c->next_all->prev_all = c->prev_all;
    r->nconns--;
    arm_pump(r); /* a slot in a bounded pool may have opened */
    st_buf_free(&c->out);
    st_buf_free(&c->body);
    st_buf_free(&c->answer);
    st_http_parser_free(&c->hp);
    st_sse_free(&c->sse);
    free(c);
}

/* ---- response handling (parser callbacks: never close the connection here) ---- */

static void req_fail_cb(rconn *c, st_req_status st, const char *msg)
{
    finish_request(c, st, msg);
    c->must_close = 1;
}

/* The most token events a request may bring: what it asked for, twice over and a few more (a
 * server may split a token's text across events), never the millions a hostile server could
 * stream. Without a requested count, the workload's limit. */
static uint32_t max_events(const st_record *rec)
{
    if (!rec->output_requested)
        return ST_WORKLOAD_MAX_TOKENS;
    uint64_t m = (uint64_t)rec->output_requested * ST_RUNNER_EVENTS_PER_TOKEN + ST_RUNNER_EVENTS_SLACK;
    return m < ST_WORKLOAD_MAX_TOKENS ? (uint32_t)m : ST_WORKLOAD_MAX_TOKENS;
}

static int on_event(void *arg, const st_sse_event *e)
{
    rconn *c = arg;
    runner *r = c->r;
    if (c->idx < 0)
        return 0;
    if (st_api_parse_event((st_api_kind)r->cfg->api, e->data, e->data_len, &c->ev) < 0) {
        char msg[320];
        snprintf(msg, sizeof msg, "malformed event: %s", c->ev.error);
        req_fail_cb(c, ST_REQ_MALFORMED, msg);
        return 2;
    }
    if (c->ev.is_error) {
        req_fail_cb(c, ST_REQ_STREAM_ERROR, c->ev.error[0] ? c->ev.error : "error event in the stream");
        return 2;
    }
    st_record *rec = &r->rec[c->idx];
    if (c->ev.tokens > 0) {
        if (rec->n_events >= max_events(rec)) {
            char msg[160];
            snprintf(msg, sizeof msg, "more than %u token events for a request of %u output tokens", max_events(rec),
                     rec->output_requested);
            req_fail_cb(c, ST_REQ_TOO_LARGE, msg);
            return 2;
        }
        if (st_record_add_event(rec, r->now_read) < 0) {
            req_fail_cb(c, ST_REQ_TOO_LARGE, "out of memory for token events");
            return 2;
        }
        if (rec->first_token < 0)
            rec->first_token = r->now_read;
        if (c->ev.answer_visible && rec->first_answer < 0)
            rec->first_answer = r->now_read;
        rec->reasoning_tokens += c->ev.reasoning;
        c->counted += c->ev.tokens;
        r->tokens += c->ev.tokens;
        if (c->capture && c->ev.content_cumulative) {
            st_buf_reset(&c->answer);
            c->answer_think = 0;
        }
        if (c->capture && st_api_append_text(&c->ev.content, 1, &c->answer_think, &c->answer) < 0)
            c->capture = 2; /* over RUN_ANSWER_MAX: the session cannot go on with this answer */
    }
    if (c->ev.has_usage) {
        c->usage_seen = 1;
        c->usage_prompt = c->ev.usage_prompt;
        c->usage_completion = c->ev.usage_completion;
        c->usage_cached = c->ev.usage_cached;
    }
    if (c->ev.has_timings)
        keep_timings(rec, &c->ev);
    if (c->ev.finished)
        c->finished_seen = 1;
    if (c->ev.done) {
        c->done_seen = 1;
        finish_request(c, ST_REQ_OK, NULL);
        c->state = C_DRAINING;
        st_timer_arm(r->l, &c->timeout, st_now() + DRAIN_NS);
    }
    return 0;
}

static int on_head(void *arg, st_http_parser *p)
{
    rconn *c = arg;
    if (c->idx < 0)
        return 0;
    c->ok2xx = p->status >= 200 && p->status < 300;
    c->r->rec[c->idx].http_status = p->status;
    c->mode = M_BODY;
    /* compressed bytes would be read as a broken stream: say what came instead */
    const char *ce = st_http_header(p, "content-encoding");
    if (c->ok2xx && ce && *ce && strcasecmp(ce, "identity")) {
        char msg[200];
        snprintf(msg, sizeof msg,
                 "the server answered with Content-Encoding: %.60s; servetune reads uncompressed responses only "
                 "(it asks for them: Accept-Encoding: identity)",
                 ce);
        req_fail_cb(c, ST_REQ_MALFORMED, msg);
        return 1;
    }
    if (c->ok2xx && c->r->cfg->stream && c->r->cfg->api != ST_RUNNER_API_RAW) {
        const char *ct = st_http_header(p, "content-type");
        /* a server may answer a stream request with one JSON body: read it as such */
        c->mode = (ct && !strncasecmp(ct, "application/json", 16)) ? M_BODY : M_SSE;
    }
    return 0;
}

static int on_body(void *arg, const char *d, size_t n)
{
    rconn *c = arg;
    if (c->idx < 0)
        return 0;
    if (!c->ok2xx) {
        size_t room = ERR_BODY_MAX - c->body.len;
        st_buf_append(&c->body, d, n < room ? n : room);
        return 0;
    }
    if (c->mode == M_SSE) {
        int rc = st_sse_feed(&c->sse, d, n, on_event, c);
        if (rc == -1) {
            char msg[160];
            snprintf(msg, sizeof msg, "SSE: %s", c->sse.errmsg);
            req_fail_cb(c, ST_REQ_TOO_LARGE, msg);
            return 1;
        }
        return rc ? 1 : 0;
    }
    if (st_buf_append(&c->body, d, n) < 0) {
        char msg[96];
        snprintf(msg, sizeof msg, "response body over %zu bytes", c->body.max);
        req_fail_cb(c, ST_REQ_TOO_LARGE, msg);
        return 1;
    }
    return 0;
}

static const st_http_cbs resp_cbs = { on_head, on_body };

/* The HTTP response is complete. */
static void message_end(rconn *c)
{
    runner *r = c->r;
    if (c->idx >= 0) {
        st_record *rec = &r->rec[c->idx];
        if (!c->ok2xx) {
            char m[300], msg[340];
            st_api_error_message(c->body.data ? c->body.data : "", c->body.len, m, sizeof m);
            snprintf(msg, sizeof msg, "HTTP %d: %s", c->hp.status, m);
            rec->http_status = c->hp.status;
            finish_request(c, ST_REQ_HTTP_STATUS, msg);
        } else if (c->mode == M_SSE) {
            st_sse_finish(&c->sse);
            if (c->done_seen || c->finished_seen)
                finish_request(c, ST_REQ_OK, NULL);
            else
                finish_request(c, ST_REQ_INCOMPLETE, "the stream ended without a final event");
        } else if (r->cfg->api == ST_RUNNER_API_RAW) {
            if (r->cfg->raw_body) {
                st_buf_reset(r->cfg->raw_body);
                st_buf_append(r->cfg->raw_body, c->body.data ? c->body.data : "", c->body.len);
            }
            finish_request(c, ST_REQ_OK, NULL);
        } else {
            st_api_event_reset(&c->ev);
            if (st_api_parse_response((st_api_kind)r->cfg->api, c->body.data ? c->body.data : "", c->body.len, &c->ev) <
                0) {
                char msg[320];
                snprintf(msg, sizeof msg, "malformed response body: %s", c->ev.error);
                finish_request(c, ST_REQ_MALFORMED, msg);
            } else if (c->ev.is_error) {
                finish_request(c, ST_REQ_STREAM_ERROR, c->ev.error);
            } else {
                /* non-streaming: the whole answer is one event at the end */
                st_record_add_event(rec, r->now_read);
                rec->first_token = r->now_read;
                if (c->ev.answer_visible)
                    rec->first_answer = r->now_read;
                rec->reasoning_tokens = c->ev.reasoning;
                if (c->capture && st_api_append_text(&c->ev.content, 1, &c->answer_think, &c->answer) < 0)
                    c->capture = 2;
                c->counted = c->ev.tokens;
                r->tokens += c->ev.tokens;
                if (c->ev.has_usage) {
                    c->usage_seen = 1;
                    c->usage_completion = c->ev.usage_completion;
                    c->usage_cached = c->ev.usage_cached;
                }
                if (c->ev.has_timings)
                    keep_timings(rec, &c->ev);
                finish_request(c, ST_REQ_OK, NULL);
            }
        }
    }
    c->nreq++;
    if (!c->hp.keep_alive || c->must_close) {
        c->must_close = 1;
        return;
    }
    st_http_parser_reset(&c->hp);
    idle_push(c);
    arm_pump(r);
}

/* Feeds response bytes. 0, or -1 when the connection was closed. */
static int handle_bytes(rconn *c, const char *d, size_t n)
{
    runner *r = c->r;
    if (c->state == C_IDLE) {
        close_conn(c); /* bytes nobody asked for: the connection is not usable */
        return -1;
    }
    if (c->idx >= 0) {
        st_record *rec = &r->rec[c->idx];
        if (rec->first_byte < 0)
            rec->first_byte = r->now_read;
        c->got_bytes = 1;
    }
    size_t pos = 0;
    while (pos < n) {
        ssize_t m = st_http_feed(&c->hp, d + pos, n - pos);
        if (m < 0) {
            if (c->hp.err != ST_HTTP_E_ABORTED && c->idx >= 0) {
                char msg[160];
                snprintf(msg, sizeof msg, "HTTP: %s", c->hp.errmsg);
                finish_request(c, c->hp.err == ST_HTTP_E_TOO_LARGE ? ST_REQ_TOO_LARGE : ST_REQ_MALFORMED, msg);
            }
            close_conn(c);
            return -1;
        }
        pos += (size_t)m;
        if (c->must_close) {
            close_conn(c);
            return -1;
        }
        if (c->hp.state == ST_HTTP_DONE) {
            message_end(c);
            if (c->must_close) {
                close_conn(c);
                return -1;
            }
            if (pos < n) {
                close_conn(c);
                return -1;
            }
        }
    }
    return 0;
}

static void handle_eof(rconn *c, const char *why)
{
    if (c->idx < 0) {
        close_conn(c);
        return;
    }
    if (!why && st_http_eof(&c->hp) == 0) {
        message_end(c);
        close_conn(c);
        return;
    }
    char msg[300];
    snprintf(msg, sizeof msg, "%.200s %s", why ? why : "connection closed by the server",
             c->got_bytes ? "before the response was complete" : "before any response");
    fail_conn(c, ST_REQ_RESET, msg);
}

static void flush_reads(runner *r);

/* TLS connections: read and parse at once (OpenSSL may hold decrypted bytes that epoll
 * will not announce again, so everything is drained here). */
static void conn_read_tls(rconn *c)
{
    runner *r = c->r;
    if (r->npend)
        flush_reads(r); /* never in practice: one run is all TLS or all plain TCP */
    for (int iter = 0; iter < 64; iter++) {
        char err[256] = "";
        ssize_t n = st_tls_read(c->tls, r->arena, READ_MAX, err, sizeof err);
        r->now_read = rel_now(r);
        if (n == ST_TLS_WANT_READ)
            break;
        if (n == ST_TLS_WANT_WRITE) {
            set_mask(c, ST_EV_READ | ST_EV_WRITE);
            break;
        }
        if (n == ST_TLS_CLOSED) {
            handle_eof(c, NULL);
            return;
        }
        if (n < 0) {
            handle_eof(c, err);
            return;
        }
        if (handle_bytes(c, r->arena, (size_t)n) < 0)
            return;
        if ((size_t)n < READ_MAX && !st_tls_pending(c->tls))
            break;
    }
    r->now_read = -1;
}

/* Parses every read of the batch, in the order they were taken. */
static void flush_reads(runner *r)
{
    for (uint32_t i = 0; i < r->npend; i++) {
        pend_read *p = &r->pend[i];
        rconn *c = p->c;
        if (!c)
            continue;
        c->pend_slot = 0;
        r->now_read = p->t;
        if (p->err == 0) {
            handle_bytes(c, r->arena + p->off, p->len);
        } else if (p->err == -1) {
            handle_eof(c, NULL);
        } else {
            char msg[200];
            snprintf(msg, sizeof msg, "%s", p->err == ECONNRESET ? "connection reset by the server" : strerror(p->err));
            handle_eof(c, msg);
        }
    }
    r->npend = 0;
    r->arena_used = 0;
    r->now_read = -1;
}

static void on_batch(st_loop *l, void *arg) { flush_reads(arg); }

/* Plain TCP: one recv into the arena, timestamped; parsed by flush_reads after the batch
 * (a full read leaves the rest for the next batch: epoll reports the socket again). */
static void conn_read(rconn *c)
{
    runner *r = c->r;
    if (c->tls) {
        conn_read_tls(c);
        return;
    }
    if (c->pend_slot)
        return; /* already read in this batch */
    if (ARENA_BYTES - r->arena_used < READ_MAX || r->npend == PEND_MAX)
        flush_reads(r);
    ssize_t n;
    do
        n = recv(c->fd, r->arena + r->arena_used, READ_MAX, 0);
    while (n < 0 && errno == EINTR);
    st_ns t = rel_now(r);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    pend_read *p = &r->pend[r->npend];
    p->c = c;
    p->t = t;
    p->off = (uint32_t)r->arena_used;
    p->len = n > 0 ? (uint32_t)n : 0;
    p->err = n > 0 ? 0 : n == 0 ? -1 : errno;
    r->arena_used += p->len;
    c->pend_slot = ++r->npend;
}

/* 0, or -1 when the connection failed and was closed. */
static int conn_write(rconn *c)
{
    runner *r = c->r;
    while (c->out_off < c->out.len) {
        st_ns before = rel_now(r);
        ssize_t n;
        char err[256] = "";
        if (c->tls) {
            n = st_tls_write(c->tls, c->out.data + c->out_off, c->out.len - c->out_off, err, sizeof err);
            if (n == ST_TLS_WANT_WRITE || n == ST_TLS_WANT_READ) {
                set_mask(c, ST_EV_READ | (n == ST_TLS_WANT_WRITE ? ST_EV_WRITE : 0));
                return 0;
            }
            if (n < 0) {
                fail_conn(c, ST_REQ_RESET, err);
                return -1;
            }
        } else {
            n = send(c->fd, c->out.data + c->out_off, c->out.len - c->out_off, MSG_NOSIGNAL);
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK) {
                    set_mask(c, ST_EV_READ | ST_EV_WRITE);
                    return 0;
                }
                char msg[200];
                snprintf(msg, sizeof msg, "write: %s", strerror(errno));
                fail_conn(c, ST_REQ_RESET, msg);
                return -1;
            }
        }
        if (c->idx >= 0 && r->rec[c->idx].sent < 0) {
            r->rec[c->idx].sent = before;
            r->sent++;
        }
        c->out_off += (size_t)n;
    }
    st_buf_reset(&c->out);
    c->out_off = 0;
    set_mask(c, ST_EV_READ);
    return 0;
}

static void do_handshake(rconn *c)
{
    char err[300] = "";
    int rc = st_tls_handshake(c->tls, err, sizeof err);
    if (rc == 0) {
        c->state = C_ACTIVE;
        conn_write(c);
    } else if (rc == ST_TLS_WANT_READ) {
        set_mask(c, ST_EV_READ);
    } else if (rc == ST_TLS_WANT_WRITE) {
        set_mask(c, ST_EV_WRITE);
    } else {
        fail_conn(c, ST_REQ_TLS, err);
    }
}

static void connected(rconn *c)
{
    runner *r = c->r;
    if (r->url.https) {
        char err[300] = "";
        c->tls = st_tls_new(r->tls, c->fd, r->url.host, err, sizeof err);
        if (!c->tls) {
            fail_conn(c, ST_REQ_TLS, err);
            return;
        }
        c->state = C_TLS;
        do_handshake(c);
        return;
    }
    c->state = C_ACTIVE;
    conn_write(c);
}

static void on_conn(st_loop *l, int fd, uint32_t ev, void *arg)
{
    rconn *c = arg;
    c->r->now_read = -1;
    switch (c->state) {
    case C_CONNECTING: {
        int e = 0;
        socklen_t el = sizeof e;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el);
        if (e) {
            char msg[200];
            snprintf(msg, sizeof msg, "connect to %.100s: %s", c->r->url.hostport, strerror(e));
            fail_conn(c, ST_REQ_CONNECT, msg);
            return;
        }
        if (ev & (ST_EV_WRITE | ST_EV_ERROR))
            connected(c);
        return;
    }
    case C_TLS: do_handshake(c); return;
    default:
        if ((ev & ST_EV_WRITE) && conn_write(c) < 0)
            return;
        if (ev & ST_EV_READ)
            conn_read(c);
    }
}

static void on_timeout(st_loop *l, void *arg)
{
    rconn *c = arg;
    runner *r = c->r;
    if (c->idx < 0) { /* a draining connection that did not finish its message */
        close_conn(c);
        return;
    }
    char msg[120];
    snprintf(msg, sizeof msg, "no complete response within %.3g s", (double)r->timeout_ns / 1e9);
    r->now_read = -1;
    finish_request(c, ST_REQ_TIMEOUT, msg);
    close_conn(c);
}

static rconn *new_conn(runner *r, char *err, size_t errlen)
{
    int fd = socket(r->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return NULL;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int rc = connect(fd, (struct sockaddr *)&r->addr, r->addrlen);
    if (rc < 0 && errno != EINPROGRESS) {
        snprintf(err, errlen, "connect to %.100s: %s", r->url.hostport, strerror(errno));
        close(fd);
        return NULL;
    }
    rconn *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->r = r;
    c->fd = fd;
    c->idx = -1;
    c->state = C_CONNECTING;
    st_buf_init(&c->out, RUN_OUT_MAX);
    st_buf_init(&c->body, r->cfg->max_body ? r->cfg->max_body : RUN_BODY_DEFAULT_MAX);
    st_buf_init(&c->answer, RUN_ANSWER_MAX);
    st_http_limits lim = { 64 * 1024, 100, 0 };
    st_http_parser_init(&c->hp, ST_HTTP_RESPONSE, &lim, &resp_cbs, c);
    st_sse_init(&c->sse, r->cfg->max_event ? r->cfg->max_event : 1u << 20);
    st_timer_init(&c->timeout, on_timeout, c);
    c->mask = ST_EV_WRITE;
    if (st_loop_add_fd(r->l, fd, ST_EV_WRITE, on_conn, c) < 0) {
        snprintf(err, errlen, "event loop: %s", strerror(errno));
        close(fd);
        st_buf_free(&c->out);
        st_http_parser_free(&c->hp);
        st_sse_free(&c->sse);
        free(c);
        return NULL;
    }
    c->next_all = r->all;
    if (r->all)
        r->all->prev_all = c;
    r->all = c;
    r->nconns++;
    r->res->connections_opened++;
    return c;
}

/* A request that could not even get a connection. */
static void fail_unstarted(runner *r, uint32_t i, st_req_status st, const char *msg)
{
    st_record *rec = &r->rec[i];
    rec->end = rel_now(r);
    st_record_set_error(rec, st, msg, strlen(msg));
    st_secrets_redact(r->cfg->secrets, rec->error);
    r->finished++;
    r->failed++;
    if (i < r->w && ++r->finished_warm == r->w)
        warmups_finished(r);
}

static void start_request(runner *r, uint32_t i)
{
    st_record *rec = &r->rec[i];
    if (!r->resolved) {
        fail_unstarted(r, i, ST_REQ_CONNECT, r->resolve_err);
        return;
    }
    /* build the request first: a body that cannot be built fails the request */
    st_buf_reset(&r->scratch);
    const st_runner_config *cfg = r->cfg;
    int raw = cfg->api == ST_RUNNER_API_RAW;
    if (!raw) {
        const st_work_item *it = &cfg->work->items[i];
        if (it->n_history)
            rec->input_tokens = it->input_len + st_workload_history_tokens(it);
        if (st_api_build_body_t((st_api_kind)cfg->api, cfg->model, it, cfg->stream,
                                cfg->has_temperature ? cfg->temperature : -1, &r->scratch) < 0) {
            fail_unstarted(r, i, ST_REQ_TOO_LARGE, "the request body could not be built (too large or no input)");
            return;
        }
    }
    rconn *c = r->idle;
    char err[256] = "";
    if (c) {
        idle_remove(c);
        c->state = C_ACTIVE;
    } else {
        c = new_conn(r, err, sizeof err);
        if (!c) {
            fail_unstarted(r, i, ST_REQ_CONNECT, err);
            return;
        }
    }
    c->idx = i;
    c->got_bytes = c->done_seen = c->finished_seen = c->must_close = c->usage_seen = 0;
    c->usage_prompt = c->usage_completion = c->usage_cached = c->counted = 0;
    c->capture = !raw && cfg->on_end && (cfg->work->items[i].next || cfg->work->items[i].n_children);
    c->answer_think = 0;
    st_buf_reset(&c->answer);
    st_api_event_reset(&c->ev);
    st_buf_reset(&c->body);
    st_sse_reset(&c->sse);
    st_http_parser_reset(&c->hp);
    {
        /* "X-Servetune-Id: <i>" without printf (hot path) */
        char *p = r->idhdr + 16, tmp[12];
        int k = 0;
        uint32_t v = i;
        do {
            tmp[k++] = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        while (k)
            *p++ = tmp[--k];
        *p = '\0';
    }
    if (st_http_write_request(&c->out, raw ? "GET" : "POST", r->url.hostport, r->path, r->hdrs, r->nhdrs,
                              raw ? NULL : "application/json", raw ? NULL : r->scratch.data,
                              raw ? 0 : r->scratch.len) < 0) {
        c->idx = -1;
        fail_unstarted(r, i, ST_REQ_TOO_LARGE, "the request could not be serialised");
        if (c->state == C_ACTIVE)
            idle_push(c);
        return;
    }
    /* room for every expected token event up front (no reallocation on the read path) */
    if (!rec->segs && rec->output_requested > 0) { /* three events a segment (load/record.h) when they are exact */
        uint32_t cap = rec->output_requested / 2 + 2 < 32768 ? rec->output_requested / 2 + 2 : 32768;
        st_record_reserve_segs(rec, cap); /* out of memory: st_record_add_event tries again */
    }
    r->in_flight++;
    if (r->in_flight > r->res->max_in_flight)
        r->res->max_in_flight = r->in_flight;
    st_timer_arm(r->l, &c->timeout, st_now() + r->timeout_ns);
    if (c->state == C_ACTIVE)
        conn_write(c);
}

/* ---- sessions: dependent items released by the end hook ---- */

static uint32_t ready_pop(runner *r)
{
    uint32_t i = r->readyq[r->ready_head];
    r->ready_head = (r->ready_head + 1) % r->n;
    r->ready_n--;
    return i;
}

static void ready_push(runner *r, uint32_t i)
{
    r->readyq[(r->ready_head + r->ready_n) % r->n] = i;
    r->ready_n++;
}

/* A min-heap of (release time, item). */
static void heap_push(runner *r, st_ns at, uint32_t i)
{
    uint32_t k = r->nrel++;
    while (k > 0) {
        uint32_t p = (k - 1) / 2;
        if (r->rel_at[p] <= at)
            break;
        r->rel_at[k] = r->rel_at[p];
        r->rel_idx[k] = r->rel_idx[p];
        k = p;
    }
    r->rel_at[k] = at;
    r->rel_idx[k] = i;
}

static void heap_pop(runner *r)
{
    st_ns at = r->rel_at[--r->nrel];
    uint32_t idx = r->rel_idx[r->nrel], k = 0;
    for (;;) {
        uint32_t c = 2 * k + 1;
        if (c >= r->nrel)
            break;
        if (c + 1 < r->nrel && r->rel_at[c + 1] < r->rel_at[c])
            c++;
        if (r->rel_at[c] >= at)
            break;
        r->rel_at[k] = r->rel_at[c];
        r->rel_idx[k] = r->rel_idx[c];
        k = c;
    }
    r->rel_at[k] = at;
    r->rel_idx[k] = idx;
}

static void on_release(st_loop *l, void *arg)
{
    runner *r = arg;
    r->now_read = -1;
    st_ns now = rel_now(r);
    uint32_t maxc = r->cfg->max_concurrency;
    while (r->nrel && r->rel_at[0] <= now) {
        uint32_t i = r->rel_idx[0];
        heap_pop(r);
        if (r->stopping)
            continue;
        /* a slot is free: start it now, and its lateness is the client's own lag */
        if (!r->nretry && !r->ready_n && (maxc == 0 || r->in_flight < maxc) &&
            !(maxc && !r->idle && r->nconns >= maxc)) {
            r->dlag[i] = st_ns_to_s(rel_now(r) - r->rec[i].scheduled);
            start_request(r, i);
        } else {
            ready_push(r, i);
        }
    }
    pump(r);
    if (r->nrel)
        st_timer_arm(l, &r->releaset, r->t0 + r->rel_at[0]);
}

void st_runner_release(st_runner_ctl *r, uint32_t i, st_ns delay)
{
    if (i < r->n_static || i >= r->n || r->rec[i].scheduled >= 0 || r->stopping)
        return;
    st_ns at = rel_now(r) + (delay > 0 ? delay : 0);
    r->rec[i].scheduled = at;
    heap_push(r, at, i);
    if (r->rel_at[0] == at || !st_timer_armed(&r->releaset)) {
        st_timer_disarm(r->l, &r->releaset);
        st_timer_arm(r->l, &r->releaset, r->t0 + r->rel_at[0]);
    }
}

void st_runner_skip(st_runner_ctl *r, uint32_t i, const char *why)
{
    if (i < r->n_static || i >= r->n || r->rec[i].scheduled >= 0 || r->rec[i].end >= 0)
        return;
    st_record *rec = &r->rec[i];
    rec->scheduled = rec->end = rel_now(r);
    st_record_set_error(rec, ST_REQ_SKIPPED, why, why ? strlen(why) : 0);
    r->finished++;
    r->failed++;
    if (r->cfg->on_end)
        r->cfg->on_end(r->cfg->on_end_arg, r, i, rec, NULL, 0);
}

/* Starts what may start now: retries first, then released session turns, then arrived
 * requests, within max_concurrency. */
static void pump(runner *r)
{
    uint32_t maxc = r->cfg->max_concurrency;
    int guard = 0;
    while (!r->stopping && (maxc == 0 || r->in_flight < maxc) && guard++ < 1000000) {
        if (!r->nretry && !r->ready_n && r->next_start >= r->arrived)
            break;
        /* bounded: do not open a connection beyond max_concurrency while one is finishing
         * its previous message (it becomes idle, or closes, and pumps again) */
        if (maxc && !r->idle && r->nconns >= maxc)
            break;
        if (r->nretry) {
            uint32_t i = r->retryq[0];
            memmove(r->retryq, r->retryq + 1, (r->nretry - 1) * sizeof *r->retryq);
            r->nretry--;
            start_request(r, i);
            continue;
        }
        if (r->ready_n) {
            start_request(r, ready_pop(r));
            continue;
        }
        start_request(r, r->next_start++);
    }
}

static void on_pump(st_loop *l, void *arg)
{
    runner *r = arg;
    r->now_read = -1;
    pump(r);
}

static void on_arrival(st_loop *l, void *arg)
{
    runner *r = arg;
    r->now_read = -1;
    st_ns now = rel_now(r);
    uint32_t first_new = r->arrived;
    while (r->arrived < r->n_static && (r->arrived < r->w || r->warm_done) && r->rec[r->arrived].scheduled <= now)
        r->arrived++;
    uint32_t maxc = r->cfg->max_concurrency;
    /* requests that arrive now and find a free slot: their dispatch lag is client lag */
    while (!r->stopping && r->nretry == 0 && r->next_start < r->arrived && (maxc == 0 || r->in_flight < maxc) &&
           !(maxc && !r->idle && r->nconns >= maxc)) {
        uint32_t i = r->next_start++;
        if (i >= first_new && i >= r->w)
            r->dlag[i] = st_ns_to_s(rel_now(r) - r->rec[i].scheduled);
        start_request(r, i);
    }
    pump(r);
    arm_arrival(r);
}

static void fill_progress(runner *r, st_runner_progress *p)
{
    p->elapsed = rel_now(r);
    p->total = r->n;
    p->records = r->rec;
    p->arrived = r->arrived;
    p->sent = r->sent;
    p->completed = r->completed;
    p->failed = r->failed;
    p->in_flight = r->in_flight;
    p->waiting = r->arrived - r->next_start + r->nretry + r->ready_n;
    p->output_tokens = r->tokens;
    p->connections = r->nconns;
}

static void on_tick(st_loop *l, void *arg)
{
    runner *r = arg;
    st_runner_progress p;
    fill_progress(r, &p);
    if (r->cfg->progress)
        r->cfg->progress(r->cfg->progress_arg, &p);
    if (r->cfg->tick)
        r->cfg->tick(r->cfg->tick_arg, &p);
    st_timer_arm(l, &r->tick, r->tick.deadline + TICK_NS);
}

static void on_probe(st_loop *l, void *arg)
{
    runner *r = arg;
    st_ns late = st_now() - r->probe.deadline;
    if ((r->w == 0 || r->warm_done) && r->finished < r->n) {
        /* (a delay that finds no room is not counted) */
        if (r->nld < r->capld || !st_grow((void **)&r->ldelay, &r->capld, r->nld + 1, sizeof *r->ldelay, 1024))
            r->ldelay[r->nld++] = st_ns_to_s(late);
    }
    st_timer_arm(l, &r->probe, st_now() + PROBE_NS);
}

static int resolve(runner *r)
{
    struct addrinfo hints = { 0 }, *ai = NULL;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    char port[8];
    snprintf(port, sizeof port, "%u", r->url.port);
    int rc = getaddrinfo(r->url.host, port, &hints, &ai);
    if (rc != 0 || !ai) {
        snprintf(r->resolve_err, sizeof r->resolve_err, "cannot resolve %.100s: %s", r->url.host, gai_strerror(rc));
        return -1;
    }
    memcpy(&r->addr, ai->ai_addr, ai->ai_addrlen);
    r->addrlen = ai->ai_addrlen;
    freeaddrinfo(ai);
    r->resolved = 1;
    return 0;
}

static void runner_cleanup(runner *r)
{
    while (r->all)
        close_conn(r->all);
    if (r->rec) /* the run did not happen: its records are not handed out */
        st_records_free(r->rec, r->n);
    if (r->l) {
        st_timer_disarm(r->l, &r->arrival);
        st_timer_disarm(r->l, &r->probe);
        st_timer_disarm(r->l, &r->tick);
        st_timer_disarm(r->l, &r->pumpt);
        st_timer_disarm(r->l, &r->releaset);
        st_loop_free(r->l);
    }
    st_tls_ctx_free(r->tls);
    if (r->auth) {
        /* the key must not linger in freed memory */
        volatile char *p = r->auth;
        while (*p)
            *p++ = 0;
        free(r->auth);
    }
    free(r->hdrs);
    free(r->retryq);
    free(r->retried);
    free(r->dlag);
    free(r->rel_idx);
    free(r->rel_at);
    free(r->readyq);
    free(r->ldelay);
    free(r->arena);
    free(r->pend);
    st_buf_free(&r->scratch);
    free(r);
}

/* Checks the configuration and builds the runner: URL, TLS, headers, buffers. NULL with err. */
static runner *runner_new(const st_runner_config *cfg, st_run_result *out, char *err, size_t errlen)
{
    uint32_t n = cfg->work ? cfg->work->n : 0;
    if (n == 0 || !cfg->schedule) {
        snprintf(err, errlen, "nothing to send");
        return NULL;
    }
    if (cfg->api != ST_RUNNER_API_RAW && (cfg->api < 0 || cfg->api > ST_API_SGLANG || !cfg->work->items)) {
        snprintf(err, errlen, "bad API kind");
        return NULL;
    }
    runner *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    r->cfg = cfg;
    r->res = out;
    r->n = n;
    r->n_static = n;
    int ok = 1;
    if (cfg->api != ST_RUNNER_API_RAW && cfg->work->n_dependent) {
        if (cfg->work->n_dependent >= n || !cfg->on_end || cfg->warmup) {
            snprintf(err, errlen, "%s",
                     cfg->work->n_dependent >= n ? "every request depends on another"
                     : !cfg->on_end              ? "the workload has session turns but no session hook"
                                                 : "warm-up requests and sessions do not combine");
            ok = 0;
        }
        r->n_static = n - cfg->work->n_dependent;
    }
    r->w = cfg->warmup < n ? cfg->warmup : n;
    r->now_read = -1;
    if (ok)
        ok = st_url_parse(cfg->url, &r->url, err, errlen) == 0;
    const char *api_path = cfg->api == ST_RUNNER_API_RAW ? "" : st_api_path((st_api_kind)cfg->api, cfg->stream);
    if (ok && cfg->api == ST_RUNNER_API_RAW) {
        snprintf(r->path, sizeof r->path, "%s", r->url.path);
    } else if (ok && st_url_join(&r->url, api_path, r->path, sizeof r->path) < 0) {
        snprintf(err, errlen, "URL path too long");
        ok = 0;
    }
    if (ok && r->url.https) {
        r->tls = st_tls_ctx_new(!cfg->insecure, cfg->ca_file, err, errlen);
        ok = r->tls != NULL;
    }
    if (ok) {
        r->hdrs = calloc((size_t)cfg->nheaders + 4, sizeof *r->hdrs);
        r->rec = calloc(n, sizeof *r->rec);
        r->retryq = calloc(n, sizeof *r->retryq);
        r->retried = calloc(n, 1);
        r->dlag = malloc(n * sizeof *r->dlag);
        r->rel_idx = malloc(n * sizeof *r->rel_idx);
        r->rel_at = malloc(n * sizeof *r->rel_at);
        r->readyq = malloc(n * sizeof *r->readyq);
        r->arena = malloc(ARENA_BYTES);
        r->pend = malloc(PEND_MAX * sizeof *r->pend);
        r->l = st_loop_new();
        ok = r->hdrs && r->rec && r->retryq && r->retried && r->dlag && r->arena && r->pend && r->l && r->rel_idx &&
             r->rel_at && r->readyq;
        if (!ok)
            snprintf(err, errlen, "out of memory");
    }
    if (ok) {
        r->hdrs[r->nhdrs++] = "User-Agent: servetune";
        int own_encoding = 0;
        for (int i = 0; i < cfg->nheaders; i++)
            own_encoding |= !strncasecmp(cfg->headers[i], "Accept-Encoding:", 16);
        if (!own_encoding)
            r->hdrs[r->nhdrs++] = "Accept-Encoding: identity";
        if (cfg->api_key && *cfg->api_key) {
            size_t kl = strlen(cfg->api_key);
            r->auth = malloc(kl + 32);
            if (!r->auth || strpbrk(cfg->api_key, "\r\n")) {
                snprintf(err, errlen, "the API key is not usable in an HTTP header");
                ok = 0;
            } else {
                snprintf(r->auth, kl + 32, "Authorization: Bearer %s", cfg->api_key);
                r->hdrs[r->nhdrs++] = r->auth;
            }
        }
    }
    for (int i = 0; ok && i < cfg->nheaders; i++) {
        if (!st_http_header_line_valid(cfg->headers[i])) {
            snprintf(err, errlen, "bad header '%.60s' (expected 'Name: value')", cfg->headers[i]);
            ok = 0;
        } else {
            r->hdrs[r->nhdrs++] = cfg->headers[i];
        }
    }
    if (ok) {
        memcpy(r->idhdr, "X-Servetune-Id: ", 16);
        r->hdrs[r->nhdrs++] = r->idhdr; /* X-Servetune-Id: <index>, set per request */
        st_buf_init(&r->scratch, RUN_OUT_MAX);
        r->timeout_ns = st_s_to_ns(cfg->timeout_s > 0 ? cfg->timeout_s : 300);
    } else {
        runner_cleanup(r);
        r = NULL;
    }
    return r;
}

/* One record per work item, from the schedule (a dependent session turn is scheduled when it is
 * released). -1 with err when the schedule decreases. */
static int runner_records(runner *r, char *err, size_t errlen)
{
    const st_runner_config *cfg = r->cfg;
    int rc = 0;
    for (uint32_t i = 0; i < r->n; i++) {
        st_record_init(&r->rec[i], i);
        r->rec[i].warmup = i < r->w;
        r->rec[i].scheduled = i < r->n_static ? cfg->schedule[i] : -1; /* dependent: set when released */
        if (cfg->api != ST_RUNNER_API_RAW) {
            r->rec[i].input_tokens = cfg->work->items[i].input_len;
            r->rec[i].output_requested = cfg->work->items[i].output_len;
            r->rec[i].session = cfg->work->items[i].session;
            r->rec[i].turn = cfg->work->items[i].turn;
        }
        r->dlag[i] = NAN;
        if (i > 0 && i < r->n_static && cfg->schedule[i] < cfg->schedule[i - 1] && !rc) {
            snprintf(err, errlen, "the schedule decreases at request %u", i);
            rc = -1;
        }
    }
    r->same_times = cfg->schedule[r->n_static - 1] == cfg->schedule[r->w < r->n_static ? r->w : 0];
    return rc;
}

/* Runs the event loop from t0 until every request has finished or the stop flag is raised. */
static void runner_loop(runner *r)
{
    const st_runner_config *cfg = r->cfg;
    st_run_result *out = r->res;
    resolve(r); /* a failure makes every request fail with the reason; the run goes on */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    st_loop_set_spin(r->l, cfg->spin_ns > 0 ? cfg->spin_ns : 0);
    st_timer_init(&r->arrival, on_arrival, r);
    st_timer_init(&r->probe, on_probe, r);
    st_timer_init(&r->tick, on_tick, r);
    st_timer_init(&r->pumpt, on_pump, r);
    st_timer_init(&r->releaset, on_release, r);
    st_loop_set_batch_hook(r->l, on_batch, r);
    r->warm_done = r->w == 0;
    out->t0_wall = st_wall_ns();
    r->t0 = st_now();
    out->t0_mono = r->t0;
    arm_arrival(r);
    st_timer_arm(r->l, &r->probe, r->t0 + PROBE_NS);
    st_timer_arm(r->l, &r->tick, r->t0 + TICK_NS);
    while (r->finished < r->n) {
        if (cfg->stop && *cfg->stop) {
            r->stopping = 1;
            out->interrupted = 1;
            break;
        }
        if (st_loop_run_once(r->l, 50 * ST_NS_PER_MS) < 0 && errno != EINTR) {
            r->stopping = 1;
            break;
        }
    }
}

/* Whatever is left when the run stops (in flight, waiting for a slot, a retry or a session turn,
 * not yet due) is aborted, and the progress callback sees the end. */
static void runner_abort_rest(runner *r)
{
    r->now_read = -1;
    for (rconn *c = r->all; c; c = c->next_all)
        if (c->idx >= 0)
            finish_request(c, ST_REQ_ABORTED, "the run was stopped before this request completed");
    for (uint32_t i = 0; i < r->n; i++)
        if (r->rec[i].end < 0 && r->rec[i].status == ST_REQ_OK && !r->rec[i].error) {
            /* never started, or waiting for a slot or a retry (or a session turn never released) */
            r->rec[i].sent = -1;
            if (r->rec[i].scheduled < 0)
                r->rec[i].scheduled = rel_now(r);
            st_record_set_error(&r->rec[i], ST_REQ_ABORTED, "the run was stopped before this request was sent", 49);
        }
    r->res->duration = rel_now(r);
    if (r->cfg->progress) {
        st_runner_progress p;
        fill_progress(r, &p);
        r->cfg->progress(r->cfg->progress_arg, &p);
    }
}

/* The client's self-check over the measured requests (docs/bench.md): dispatch lag and event-loop
 * delay against max_lag_ms. */
static void runner_self_check(runner *r)
{
    st_run_result *out = r->res;
    double *lags = malloc(r->n * sizeof *lags);
    uint32_t nl = 0;
    if (lags) {
        for (uint32_t i = r->w; i < r->n; i++)
            if (!isnan(r->dlag[i]))
                lags[nl++] = r->dlag[i];
        st_dist_compute(lags, nl, &out->dispatch_lag);
        free(lags);
    }
    st_dist_compute(r->ldelay, r->nld, &out->loop_delay);
    out->max_lag_ms = r->cfg->max_lag_ms > 0 ? r->cfg->max_lag_ms : 10;
    double lim = out->max_lag_ms / 1e3;
    if (r->same_times) {
        snprintf(out->limited_reason, sizeof out->limited_reason,
                 "not applicable: every request is scheduled at once (rate inf), there is no schedule to keep");
    } else if (out->dispatch_lag.n && out->dispatch_lag.p99 > lim) {
        out->client_limited = 1;
        snprintf(out->limited_reason, sizeof out->limited_reason, "dispatch lag p99 %.3f ms > %.3g ms",
                 out->dispatch_lag.p99 * 1e3, out->max_lag_ms);
    } else if (out->loop_delay.n && out->loop_delay.p99 > lim) {
        out->client_limited = 1;
        snprintf(out->limited_reason, sizeof out->limited_reason, "event-loop delay p99 %.3f ms > %.3g ms",
                 out->loop_delay.p99 * 1e3, out->max_lag_ms);
    } else {
        snprintf(out->limited_reason, sizeof out->limited_reason,
                 "ok: dispatch lag and event-loop delay p99 within %.3g ms", out->max_lag_ms);
    }
}

int st_runner_run(const st_runner_config *cfg, st_run_result *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    int rc = -1;
    runner *r = runner_new(cfg, out, err, errlen);
    if (r && runner_records(r, err, errlen) == 0) {
        runner_loop(r);
        runner_abort_rest(r);
        runner_self_check(r);
        out->records = r->rec;
        out->n = r->n;
        r->rec = NULL;
        rc = 0;
    }
    if (r)
        runner_cleanup(r);
    return rc;
}

void st_run_result_free(st_run_result *r)
{
    if (!r->records)
        return;
    st_records_free(r->records, r->n);
    r->records = NULL;
    r->n = 0;
}

int st_runner_fetch(const char *url, const char *api_key, const char *const *headers, int nheaders, int insecure,
                    double timeout_s, st_buf *body, int *status, char *err, size_t errlen)
{
    st_workload w = { .items = NULL, .n = 1 };
    st_ns sched[1] = { 0 };
    st_runner_config cfg = { 0 };
    cfg.url = url;
    cfg.api = ST_RUNNER_API_RAW;
    cfg.api_key = api_key;
    cfg.headers = headers;
    cfg.nheaders = nheaders;
    cfg.work = &w;
    cfg.schedule = sched;
    cfg.timeout_s = timeout_s;
    cfg.insecure = insecure;
    cfg.spin_ns = -1;
    cfg.raw_body = body;
    st_secrets key = { 0 };
    st_secrets_add(&key, api_key); /* a key too short to redact is the caller's to refuse */
    cfg.secrets = &key;
    st_run_result res;
    int run = st_runner_run(&cfg, &res, err, errlen);
    st_secrets_free(&key);
    if (run < 0)
        return -1;
    st_record *rec = &res.records[0];
    *status = rec->http_status ? rec->http_status : (rec->status == ST_REQ_OK ? 200 : 0);
    int rc = 0;
    if (rec->status != ST_REQ_OK) {
        snprintf(err, errlen, "GET %s: %s", url, rec->error ? rec->error : st_req_status_name(rec->status));
        rc = -1;
    }
    st_run_result_free(&res);
    return rc;
}
