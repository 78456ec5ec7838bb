/* An in-process OpenAI-like streaming server for the integration tests, on net/server in
 * its own loop thread. The request path's first segment picks the behaviour (the runner
 * appends the API path to the URL's path): http://127.0.0.1:PORT/<mode>/v1/completions.
 * Mode "seq" takes the behaviour from mock.seq[request number % mock.nseq]. */
#ifndef ST_MOCK_SERVER_H
#define ST_MOCK_SERVER_H
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/server.h"

typedef struct mock mock;

typedef struct mstream {
    st_timer t;
    st_server_resp *resp;
    mock *m;
    int mode;
    int left, sent;
} mstream;

enum {
    M_OK,
    M_500,
    M_ERREVENT,
    M_MALFORMED,
    M_OVERSIZED,
    M_STALL,
    M_RESET,
    M_CLOSE,
    M_INCOMPLETE,
    M_BADHTTP,
    M_SLOW,
    M_CLOSELATER,
    M_NOTERM,
    M_TGI,
    M_ECHOKEY, /* a stream error event quoting the Authorization header, a formula and escapes */
    M_GZIP,    /* Content-Encoding: gzip */
    M_FLOOD,   /* token events without end */
    M_COUNT
};
static const char *mock_modes[M_COUNT] = { "ok",     "status500", "errorevent", "malformed", "oversized", "stall",
                                           "reset",  "close",     "incomplete", "badhttp",   "slow",      "closelater",
                                           "noterm", "tgi",       "echokey",    "gzip",      "flood" };

struct mock {
    st_loop *l;
    st_server *srv;
    pthread_t th;
    atomic_int stop;
    atomic_int requests;
    atomic_int cancels;
    int seq[64];
    int nseq;
    int tokens;          /* tokens per ok stream */
    int slow_ms;         /* delay before the first token in mode slow */
    char last_auth[256]; /* Authorization header of the last request */
    char echo[512];      /* mode echokey: the request's Authorization and X-Api-Key, echoed */
    pthread_mutex_t mu;
};

static void mock_stream_free(mstream *s)
{
    st_timer_disarm(s->m->l, &s->t);
    free(s);
}

static void mock_cancel(void *arg, st_server_resp *r)
{
    mstream *s = arg;
    atomic_fetch_add(&s->m->cancels, 1);
    mock_stream_free(s);
}

static void mock_send(st_server_resp *r, const char *s) { st_server_sse_send(r, s, strlen(s)); }
static int mock_send_ok(st_server_resp *r, const char *s) { return st_server_sse_send(r, s, strlen(s)); }

static void mock_tick(st_loop *l, void *arg)
{
    mstream *s = arg;
    st_server_resp *r = s->resp;
    char ev[256];
    switch (s->mode) {
    case M_CLOSELATER:
        /* the keep-alive connection dies a moment after a complete answer (an idle timeout
         * racing with the client's next request) */
        st_server_resp_abort(r, 0);
        mock_stream_free(s);
        return;
    case M_ECHOKEY: {
        char msg[700];
        pthread_mutex_lock(&s->m->mu);
        snprintf(msg, sizeof msg,
                 "{\"error\":{\"message\":\"=cmd|' /C calc'!A0 rejected %s \\u001b]0;pwned\\u0007\\u001b[31mred\"}}",
                 s->m->echo);
        pthread_mutex_unlock(&s->m->mu);
        mock_send(r, msg);
        st_server_stream_end(r);
        mock_stream_free(s);
        return;
    }
    case M_FLOOD:
        for (int i = 0; i < 1000; i++)
            if (mock_send_ok(r, "{\"choices\":[{\"index\":0,\"text\":\" t\",\"finish_reason\":null}]}"))
                break;
        if (++s->sent >= 200) { /* 200000 events at most: the client must have given up long before */
            st_server_stream_end(r);
            mock_stream_free(s);
            return;
        }
        st_timer_arm(l, &s->t, st_now() + ST_NS_PER_MS);
        return;
    case M_ERREVENT:
        if (s->sent == 0) {
            mock_send(r, "{\"choices\":[{\"index\":0,\"text\":\"a\",\"finish_reason\":null}]}");
            s->sent++;
            st_timer_arm(l, &s->t, st_now() + ST_NS_PER_MS);
            return;
        }
        mock_send(r, "{\"error\":{\"message\":\"engine overloaded\",\"code\":503}}");
        st_server_stream_end(r);
        mock_stream_free(s);
        return;
    case M_MALFORMED:
        mock_send(r, "{\"choices\":[{\"text\":");
        st_server_sse_send(r, "[DONE]", 6);
        st_server_stream_end(r);
        mock_stream_free(s);
        return;
    case M_OVERSIZED: {
        size_t n = 64 * 1024;
        char *big = malloc(n);
        memset(big, 'x', n);
        st_server_sse_send(r, big, n);
        free(big);
        st_server_stream_end(r);
        mock_stream_free(s);
        return;
    }
    case M_RESET:
    case M_CLOSE:
        if (s->sent == 0) {
            mock_send(r, "{\"choices\":[{\"index\":0,\"text\":\"a\",\"finish_reason\":null}]}");
            s->sent++;
            st_timer_arm(l, &s->t, st_now() + 2 * ST_NS_PER_MS);
            return;
        }
        st_server_resp_abort(r, s->mode == M_RESET);
        mock_stream_free(s);
        return;
    default: break;
    }
    if (s->mode == M_TGI) {
        /* TGI /generate_stream: no [DONE]; the last event carries generated_text and details */
        if (s->left > 1) {
            mock_send(r, "{\"index\":1,\"token\":{\"id\":42,\"text\":\" "
                         "a\",\"logprob\":-0.1,\"special\":false},\"generated_text\":null,\"details\":null}");
            s->left--;
            s->sent++;
            st_timer_arm(l, &s->t, st_now() + 200 * ST_NS_PER_US);
            return;
        }
        int n = snprintf(ev, sizeof ev,
                         "{\"index\":%d,\"token\":{\"id\":2,\"text\":\" "
                         "b\",\"logprob\":-0.1,\"special\":false},\"generated_text\":\"x\",\"details\":{\"finish_"
                         "reason\":\"length\",\"generated_tokens\":%d}}",
                         s->sent + 1, s->sent + 1);
        st_server_sse_send(r, ev, (size_t)n);
        st_server_stream_end(r);
        mock_stream_free(s);
        return;
    }
    /* ok / incomplete / slow: one token per tick */
    if (s->left > 0) {
        int n =
            snprintf(ev, sizeof ev, "{\"id\":\"c\",\"choices\":[{\"index\":0,\"text\":\" t%d\",\"finish_reason\":%s}]}",
                     s->sent, s->left == 1 && s->mode != M_INCOMPLETE ? "\"length\"" : "null");
        st_server_sse_send(r, ev, (size_t)n);
        s->sent++;
        s->left--;
        st_timer_arm(l, &s->t, st_now() + 200 * ST_NS_PER_US);
        return;
    }
    if (s->mode != M_INCOMPLETE) {
        int n = snprintf(ev, sizeof ev,
                         "{\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":%d,"
                         "\"total_tokens\":%d}}",
                         s->sent, s->sent + 10);
        st_server_sse_send(r, ev, (size_t)n);
        st_server_sse_send(r, "[DONE]", 6);
    }
    if (s->mode == M_NOTERM)
        return; /* [DONE] but the chunked body never ends: the client must not wait forever */
    st_server_stream_end(r);
    mock_stream_free(s);
}

static void mock_handler(void *arg, const st_http_parser *req, st_server_resp *resp)
{
    mock *m = arg;
    int k = atomic_fetch_add(&m->requests, 1);
    const char *auth = st_http_header(req, "authorization");
    const char *xkey = st_http_header(req, "x-api-key");
    pthread_mutex_lock(&m->mu);
    snprintf(m->last_auth, sizeof m->last_auth, "%s", auth ? auth : "");
    snprintf(m->echo, sizeof m->echo, "[%s] [%s]", auth ? auth : "", xkey ? xkey : "");
    pthread_mutex_unlock(&m->mu);
    const char *t = req->target + 1;
    size_t sl = strcspn(t, "/");
    int mode = -1;
    if (sl == 3 && !strncmp(t, "seq", 3) && m->nseq > 0)
        mode = m->seq[k % m->nseq];
    for (int i = 0; i < M_COUNT && mode < 0; i++)
        if (strlen(mock_modes[i]) == sl && !strncmp(t, mock_modes[i], sl))
            mode = i;
    if (mode < 0) {
        st_server_respond(resp, 404, "text/plain", NULL, "no such mode", 12);
        return;
    }
    if (strstr(req->target, "/v1/models")) {
        const char *b = "{\"object\":\"list\",\"data\":[{\"id\":\"mock-model\",\"object\":\"model\"}]}";
        st_server_respond(resp, 200, "application/json", NULL, b, strlen(b));
        return;
    }
    if (mode == M_500) {
        const char *b =
            "{\"error\":{\"message\":\"boom: the engine fell over\",\"type\":\"InternalServerError\",\"code\":500}}";
        st_server_respond(resp, 500, "application/json", NULL, b, strlen(b));
        return;
    }
    if (req->body.data && strstr(req->body.data, "\"stream\":false") && mode == M_OK) {
        const char *b = "{\"id\":\"c\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\"a b "
                        "c\",\"finish_reason\":\"length\"}],"
                        "\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":3,\"total_tokens\":13}}";
        st_server_respond(resp, 200, "application/json", NULL, b, strlen(b));
        return;
    }
    if (mode == M_CLOSELATER) {
        static const char full[] =
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
            "45\r\ndata: {\"choices\":[{\"index\":0,\"text\":\"a\",\"finish_reason\":\"length\"}]}\n\n\r\n"
            "e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n";
        st_server_resp_raw(resp, full, sizeof full - 1);
        mstream *s = calloc(1, sizeof *s);
        s->m = m;
        s->mode = mode;
        s->resp = resp;
        st_timer_init(&s->t, mock_tick, s);
        st_server_resp_on_cancel(resp, mock_cancel, s);
        st_timer_arm(m->l, &s->t, st_now() + 50 * ST_NS_PER_MS);
        return;
    }
    if (mode == M_BADHTTP) {
        st_server_resp_raw(resp, "HELLO THERE\r\n\r\n", 15);
        st_server_resp_abort(resp, 0);
        return;
    }
    if (mode == M_GZIP) {
        /* gzip's magic bytes and some more: not an event stream to a client that reads identity */
        static const char gz[] = "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\x4b\x49\x2c\x49\xb4\x52";
        st_server_stream_start(resp, 200, "text/event-stream", "Content-Encoding: gzip\r\n");
        st_server_stream_write(resp, gz, sizeof gz - 1);
        st_server_stream_end(resp);
        return;
    }
    mstream *s = calloc(1, sizeof *s);
    s->m = m;
    s->mode = mode;
    s->resp = resp;
    s->left = m->tokens > 0 ? m->tokens : 4;
    st_timer_init(&s->t, mock_tick, s);
    st_server_stream_start(resp, 200, "text/event-stream", NULL);
    st_server_resp_on_cancel(resp, mock_cancel, s);
    if (mode == M_STALL)
        return; /* never sends anything: the client's timeout must end it */
    st_ns first = mode == M_SLOW ? (st_ns)m->slow_ms * ST_NS_PER_MS : 100 * ST_NS_PER_US;
    st_timer_arm(m->l, &s->t, st_now() + first);
}

static void *mock_thread(void *arg)
{
    mock *m = arg;
    st_ns limit = st_now() + 120 * ST_NS_PER_S;
    while (!atomic_load(&m->stop) && st_now() < limit)
        st_loop_run_once(m->l, 5 * ST_NS_PER_MS);
    return NULL;
}

static mock *mock_start(void)
{
    mock *m = calloc(1, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    m->tokens = 4;
    m->slow_ms = 50;
    m->l = st_loop_new();
    st_server_config cfg = { .host = "127.0.0.1", .port = 0, .handler = mock_handler, .arg = m };
    char err[256];
    m->srv = st_server_new(m->l, &cfg, err, sizeof err);
    if (!m->srv) {
        fprintf(stderr, "mock server: %s\n", err);
        abort();
    }
    return m;
}

static void mock_run(mock *m) { pthread_create(&m->th, NULL, mock_thread, m); }

static uint16_t mock_port(mock *m) { return st_server_port(m->srv); }

static void mock_stop(mock *m)
{
    atomic_store(&m->stop, 1);
    pthread_join(m->th, NULL);
    st_server_free(m->srv);
    st_loop_free(m->l);
    pthread_mutex_destroy(&m->mu);
    free(m);
}
#endif
