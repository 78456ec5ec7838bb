/* A minimal fast server for the benchmarks, on net/server (one thread, one epoll loop):
 *   GET  /tiny                 200 "ok" (for raw request rate, servetune vs wrk)
 *   GET  /v1/models            one model, "bench"
 *   POST anything else         an OpenAI completions SSE stream: max_tokens events (from the
 *                              body; default 16), one per --itl-us (0: as fast as the loop
 *                              goes), the first after --ttft-us, then usage and [DONE].
 *                              With --burst N, each tick writes N events in one write (as an
 *                              engine does when several tokens are ready at once): that
 *                              measures the client's per-event work apart from the kernel's
 *                              per-segment cost.
 * With --record FILE it keeps, per request, the monotonic time (st_now(), the same clock as
 * the client on this machine) right after the first token event was handed to the kernel,
 * keyed by the client's X-Servetune-Id header, and writes "id ns" lines at SIGINT/SIGTERM.
 * Prints "port N" on stdout once listening. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/parse.h"
#include "net/server.h"

static volatile sig_atomic_t stop_flag;
static void on_sig(int s)
{
    (void)s;
    stop_flag = 1;
}

typedef struct srv {
    st_loop *l;
    st_ns itl, ttft;
    uint32_t burst;
    int64_t *first; /* by request id: first token write time, 0 = none */
    uint32_t nfirst;
    uint64_t events;
} srv;

typedef struct stream {
    st_timer t;
    st_server_resp *resp;
    srv *s;
    int64_t id;
    uint32_t left, sent;
} stream;

static void stream_done(stream *st)
{
    st_timer_disarm(st->s->l, &st->t);
    free(st);
}

static void on_cancel(void *arg, st_server_resp *r) { stream_done(arg); }

static void tick(st_loop *l, void *arg)
{
    stream *st = arg;
    srv *s = st->s;
    if (st->left > 0) {
        static const char ev[] = "data: "
                                 "{\"id\":\"cmpl-b\",\"object\":\"text_completion\",\"model\":\"bench\",\"choices\":[{"
                                 "\"index\":0,\"text\":\" tok\",\"logprobs\":null,\"finish_reason\":null}]}\n\n";
        static const char last[] =
            "data: "
            "{\"id\":\"cmpl-b\",\"object\":\"text_completion\",\"model\":\"bench\",\"choices\":[{\"index\":0,\"text\":"
            "\" tok\",\"logprobs\":null,\"finish_reason\":\"length\"}]}\n\n";
        char buf[64 * sizeof ev];
        size_t len = 0;
        uint32_t k = 0;
        for (; k < s->burst && st->left > 0; k++, st->left--) {
            const char *e = st->left == 1 ? last : ev;
            size_t n = st->left == 1 ? sizeof last - 1 : sizeof ev - 1;
            memcpy(buf + len, e, n);
            len += n;
        }
        if (st_server_stream_write(st->resp, buf, len) < 0) {
            st_server_resp_abort(st->resp, 0);
            stream_done(st);
            return;
        }
        if (st->sent == 0 && st->id >= 0 && (uint64_t)st->id < s->nfirst)
            s->first[st->id] = st_now();
        st->sent += k;
        s->events += k;
        st_timer_arm(l, &st->t, st_now() + s->itl);
        return;
    }
    char u[160];
    int n = snprintf(u, sizeof u,
                     "{\"id\":\"cmpl-b\",\"object\":\"text_completion\",\"model\":\"bench\",\"choices\":[],\"usage\":{"
                     "\"prompt_tokens\":1,\"completion_tokens\":%u,\"total_tokens\":%u}}",
                     st->sent, st->sent + 1);
    st_server_sse_send(st->resp, u, (size_t)n);
    st_server_sse_send(st->resp, "[DONE]", 6);
    st_server_stream_end(st->resp);
    stream_done(st);
}

static void handler(void *arg, const st_http_parser *req, st_server_resp *resp)
{
    srv *s = arg;
    if (!strcmp(req->target, "/tiny")) {
        st_server_respond(resp, 200, "text/plain", NULL, "ok", 2);
        return;
    }
    if (!strcmp(req->target, "/v1/models")) {
        const char *b = "{\"object\":\"list\",\"data\":[{\"id\":\"bench\",\"object\":\"model\"}]}";
        st_server_respond(resp, 200, "application/json", NULL, b, strlen(b));
        return;
    }
    uint32_t tokens = 16;
    const char *mt = req->body.data ? strstr(req->body.data, "\"max_tokens\":") : NULL;
    if (mt)
        tokens = (uint32_t)strtoul(mt + 13, NULL, 10);
    stream *st = calloc(1, sizeof *st);
    if (!st) {
        st_server_respond(resp, 503, NULL, NULL, NULL, 0);
        return;
    }
    st->s = s;
    st->resp = resp;
    st->left = tokens;
    const char *id = st_http_header(req, "x-servetune-id");
    st->id = id ? strtol(id, NULL, 10) : -1;
    st_timer_init(&st->t, tick, st);
    st_server_stream_start(resp, 200, "text/event-stream", NULL);
    st_server_resp_on_cancel(resp, on_cancel, st);
    st_timer_arm(s->l, &st->t, st_now() + s->ttft);
}

int main(int argc, char **argv)
{
    long port = 0;
    double itl_us = 0, ttft_us = 0;
    long burst = 1;
    const char *record = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--port"))
            st_parse_long(argv[i + 1], &port);
        else if (!strcmp(argv[i], "--itl-us"))
            st_parse_double(argv[i + 1], &itl_us);
        else if (!strcmp(argv[i], "--burst"))
            st_parse_long(argv[i + 1], &burst);
        else if (!strcmp(argv[i], "--ttft-us"))
            st_parse_double(argv[i + 1], &ttft_us);
        else if (!strcmp(argv[i], "--record"))
            record = argv[i + 1];
    }
    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, on_sig);
    signal(SIGTERM, on_sig);
    srv s = { 0 };
    s.l = st_loop_new();
    s.itl = (st_ns)(itl_us * 1e3);
    s.burst = burst >= 1 && burst <= 64 ? (uint32_t)burst : 1;
    s.ttft = (st_ns)(ttft_us * 1e3);
    if (record) {
        s.nfirst = 4u << 20;
        s.first = calloc(s.nfirst, sizeof *s.first);
    }
    st_server_config cfg = {
        .host = "127.0.0.1", .port = (uint16_t)port, .handler = handler, .arg = &s, .max_conns = 60000
    };
    char err[256];
    st_server *server = st_server_new(s.l, &cfg, err, sizeof err);
    if (!server) {
        fprintf(stderr, "stream_server: %s\n", err);
        return 1;
    }
    printf("port %u\n", st_server_port(server));
    fflush(stdout);
    while (!stop_flag)
        st_loop_run_once(s.l, 100 * ST_NS_PER_MS);
    if (record) {
        FILE *f = fopen(record, "w");
        if (f) {
            for (uint32_t i = 0; i < s.nfirst; i++)
                if (s.first[i])
                    fprintf(f, "%u %lld\n", i, (long long)s.first[i]);
            fclose(f);
        }
    }
    fprintf(stderr, "stream_server: %llu token events sent\n", (unsigned long long)s.events);
    st_server_free(server);
    st_loop_free(s.l);
    free(s.first);
    return 0;
}
