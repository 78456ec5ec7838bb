/* net/server: a server on its own loop thread, driven by blocking clients on 127.0.0.1. */
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/server.h"
#include "net/sse.h"

typedef struct stream {
    st_timer t;
    st_server_resp *resp;
    int left;
    struct srv *s;
} stream;

typedef struct srv {
    st_loop *l;
    st_server *server;
    pthread_t th;
    atomic_int stop;
    atomic_int cancels;
    atomic_int requests;
    atomic_int max_out_refused;
    stream streams[16];
} srv;

static void stream_tick(st_loop *l, void *arg)
{
    stream *st = arg;
    char ev[64];
    int n = snprintf(ev, sizeof ev, "{\"tok\":%d}", st->left);
    st_server_sse_send(st->resp, ev, (size_t)n);
    if (--st->left == 0) {
        st_server_sse_send(st->resp, "[DONE]", 6);
        st_server_stream_end(st->resp);
        st->resp = NULL;
        return;
    }
    st_timer_arm(l, &st->t, st_now() + ST_NS_PER_MS);
}

static void stream_cancel(void *arg, st_server_resp *r)
{
    stream *st = arg;
    atomic_fetch_add(&st->s->cancels, 1);
    st_timer_disarm(st->s->l, &st->t);
    st->resp = NULL;
}

static void handler(void *arg, const st_http_parser *req, st_server_resp *resp)
{
    srv *s = arg;
    atomic_fetch_add(&s->requests, 1);
    if (!strcmp(req->target, "/hello")) {
        st_server_respond(resp, 200, "text/plain", "X-Test: 1\r\n", "hello", 5);
    } else if (!strcmp(req->target, "/echo")) {
        st_server_respond(resp, 200, "application/octet-stream", NULL, req->body.data, req->body.len);
    } else if (!strncmp(req->target, "/stream/", 8)) {
        int n = atoi(req->target + 8);
        for (int i = 0; i < 16; i++)
            if (!s->streams[i].resp) {
                stream *st = &s->streams[i];
                st->resp = resp;
                st->left = n;
                st->s = s;
                st_timer_init(&st->t, stream_tick, st);
                st_server_stream_start(resp, 200, "text/event-stream", NULL);
                st_server_resp_on_cancel(resp, stream_cancel, st);
                st_timer_arm(s->l, &st->t, st_now() + ST_NS_PER_MS);
                return;
            }
        st_server_respond(resp, 503, NULL, NULL, "busy", 4);
    } else if (!strcmp(req->target, "/multi")) {
        st_server_stream_start(resp, 200, "text/event-stream", NULL);
        st_server_sse_send(resp, "l1\nl2", 5);
        st_server_sse_send(resp, "", 0);
        st_server_sse_send(resp, "x\n", 2);
        st_server_stream_end(resp);
    } else if (!strcmp(req->target, "/big")) {
        st_server_stream_start(resp, 200, "application/octet-stream", NULL);
        static char blob[4096];
        int refused = 0;
        for (int i = 0; i < 1000 && !refused; i++)
            refused = st_server_stream_write(resp, blob, sizeof blob) < 0;
        atomic_store(&s->max_out_refused, refused);
        st_server_resp_abort(resp, 0);
    } else {
        st_server_respond(resp, 404, "text/plain", NULL, "no", 2);
    }
}

static void *loop_thread(void *arg)
{
    srv *s = arg;
    st_ns limit = st_now() + 60 * ST_NS_PER_S;
    while (!atomic_load(&s->stop) && st_now() < limit)
        st_loop_run_once(s->l, 5 * ST_NS_PER_MS);
    return NULL;
}

static srv *srv_start_timeouts(size_t max_out, double idle_s, double header_s)
{
    srv *s = calloc(1, sizeof *s);
    s->l = st_loop_new();
    st_server_config cfg = { .host = "127.0.0.1",
                             .port = 0,
                             .handler = handler,
                             .arg = s,
                             .max_out = max_out,
                             .idle_timeout_s = idle_s,
                             .header_timeout_s = header_s };
    char err[256];
    s->server = st_server_new(s->l, &cfg, err, sizeof err);
    if (!s->server)
        fail_msg("server: %s", err);
    pthread_create(&s->th, NULL, loop_thread, s);
    return s;
}

static srv *srv_start_idle(size_t max_out, double idle_s) { return srv_start_timeouts(max_out, idle_s, 0); }

static srv *srv_start(size_t max_out) { return srv_start_timeouts(max_out, 0, 0); }

static void srv_stop(srv *s)
{
    atomic_store(&s->stop, 1);
    pthread_join(s->th, NULL);
    st_server_free(s->server);
    st_loop_free(s->l);
    free(s);
}

static int client(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    struct timeval tv = { 5, 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

static void send_all(int fd, const char *s)
{
    size_t n = strlen(s);
    assert_int_equal(send(fd, s, n, MSG_NOSIGNAL), (ssize_t)n);
}

/* Reads one response; leftover bytes stay in *carry. Returns the parser (caller frees). */
static void read_response(int fd, st_http_parser *p, st_buf *carry)
{
    st_http_parser_init(p, ST_HTTP_RESPONSE, NULL, NULL, NULL);
    char buf[8192];
    for (int i = 0; i < 10000; i++) {
        if (carry->len) {
            ssize_t n = st_http_feed(p, carry->data, carry->len);
            assert_true(n >= 0);
            st_buf_consume(carry, (size_t)n);
            if (p->state == ST_HTTP_DONE)
                return;
        }
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r <= 0) {
            assert_true(st_http_eof(p) >= 0);
            return;
        }
        st_buf_append(carry, buf, (size_t)r);
    }
    fail_msg("response never completed");
}

static void respond_keepalive_and_pipelining(void **state)
{
    (void)state;
    srv *s = srv_start(0);
    int fd = client(st_server_port(s->server));
    st_buf carry;
    st_buf_init(&carry, 1 << 20);
    st_http_parser p;
    send_all(fd, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
    read_response(fd, &p, &carry);
    assert_int_equal(p.status, 200);
    assert_string_equal(p.body.data, "hello");
    assert_string_equal(st_http_header(&p, "x-test"), "1");
    assert_int_equal(p.keep_alive, 1);
    st_http_parser_free(&p);
    /* three pipelined requests in one write, answered in order on the same connection */
    send_all(
        fd, "POST /echo HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET /nope HTTP/1.1\r\n\r\nGET /hello HTTP/1.1\r\n\r\n");
    read_response(fd, &p, &carry);
    assert_string_equal(p.body.data, "abc");
    st_http_parser_free(&p);
    read_response(fd, &p, &carry);
    assert_int_equal(p.status, 404);
    st_http_parser_free(&p);
    read_response(fd, &p, &carry);
    assert_string_equal(p.body.data, "hello");
    st_http_parser_free(&p);
    /* Connection: close is honoured */
    send_all(fd, "GET /hello HTTP/1.1\r\nConnection: close\r\n\r\n");
    read_response(fd, &p, &carry);
    assert_int_equal(p.keep_alive, 0);
    st_http_parser_free(&p);
    char b[16];
    assert_int_equal(recv(fd, b, sizeof b, 0), 0); /* closed by the server */
    close(fd);
    assert_int_equal(atomic_load(&s->requests), 5);
    st_buf_free(&carry);
    srv_stop(s);
}

static int count_ev(void *arg, const st_sse_event *ev)
{
    (*(int *)arg)++;
    return 0;
}

static int sse_body(void *arg, const char *d, size_t n)
{
    void **a = arg;
    return st_sse_feed(a[0], d, n, count_ev, a[1]) != 0;
}

static void streaming_sse_two_in_a_row(void **state)
{
    (void)state;
    srv *s = srv_start(0);
    int fd = client(st_server_port(s->server));
    for (int round = 0; round < 2; round++) {
        send_all(fd, "GET /stream/5 HTTP/1.1\r\n\r\n");
        st_sse sse;
        st_sse_init(&sse, 0);
        int events = 0;
        void *a[2] = { &sse, &events };
        st_http_cbs cbs = { NULL, sse_body };
        st_http_parser p;
        st_http_parser_init(&p, ST_HTTP_RESPONSE, NULL, &cbs, a);
        char buf[4096];
        for (int i = 0; i < 1000 && p.state != ST_HTTP_DONE; i++) {
            ssize_t r = recv(fd, buf, sizeof buf, 0);
            assert_true(r > 0);
            assert_int_equal(st_http_feed(&p, buf, (size_t)r), r);
        }
        assert_int_equal(p.state, ST_HTTP_DONE);
        assert_int_equal(p.chunked, 1);
        assert_string_equal(st_http_header(&p, "content-type"), "text/event-stream");
        assert_int_equal(events, 6); /* 5 tokens + [DONE] */
        st_http_parser_free(&p);
        st_sse_free(&sse);
    }
    close(fd);
    assert_int_equal(atomic_load(&s->cancels), 0);
    srv_stop(s);
}

static int collect_ev(void *arg, const st_sse_event *ev)
{
    st_buf *b = arg;
    st_buf_append(b, "[", 1);
    st_buf_append(b, ev->data, ev->data_len);
    st_buf_append(b, "]", 1);
    return 0;
}

static void sse_send_multiline_framing(void **state)
{
    (void)state;
    srv *s = srv_start(0);
    int fd = client(st_server_port(s->server));
    send_all(fd, "GET /multi HTTP/1.1\r\nConnection: close\r\n\r\n");
    st_buf carry;
    st_buf_init(&carry, 1 << 20);
    st_http_parser p;
    read_response(fd, &p, &carry);
    assert_int_equal(p.state, ST_HTTP_DONE);
    assert_string_equal(p.body.data, "data: l1\ndata: l2\n\ndata: \n\ndata: x\ndata: \n\n");
    st_sse sse;
    st_sse_init(&sse, 0);
    st_buf evs;
    st_buf_init(&evs, 1024);
    assert_int_equal(st_sse_feed(&sse, p.body.data, p.body.len, collect_ev, &evs), 0);
    assert_string_equal(evs.data, "[l1\nl2][][x\n]");
    st_buf_free(&evs);
    st_sse_free(&sse);
    st_http_parser_free(&p);
    st_buf_free(&carry);
    close(fd);
    srv_stop(s);
}

static void disconnect_mid_stream_cancels(void **state)
{
    (void)state;
    srv *s = srv_start(0);
    int fd = client(st_server_port(s->server));
    send_all(fd, "GET /stream/100000 HTTP/1.1\r\n\r\n");
    char buf[256];
    assert_true(recv(fd, buf, sizeof buf, 0) > 0);
    close(fd);
    for (int i = 0; i < 400 && atomic_load(&s->cancels) == 0; i++)
        usleep(5000);
    assert_int_equal(atomic_load(&s->cancels), 1);
    /* the slot was released: another stream can run to the end */
    int fd2 = client(st_server_port(s->server));
    send_all(fd2, "GET /stream/2 HTTP/1.1\r\nConnection: close\r\n\r\n");
    st_buf carry;
    st_buf_init(&carry, 1 << 20);
    st_http_parser p;
    read_response(fd2, &p, &carry);
    assert_int_equal(p.state, ST_HTTP_DONE);
    assert_non_null(strstr(p.body.data, "[DONE]"));
    st_http_parser_free(&p);
    st_buf_free(&carry);
    close(fd2);
    srv_stop(s);
}

static void bad_request_and_limits(void **state)
{
    (void)state;
    srv *s = srv_start(64 * 1024);
    int fd = client(st_server_port(s->server));
    send_all(fd, "BAD REQUEST LINE\r\n\r\n");
    st_buf carry;
    st_buf_init(&carry, 1 << 20);
    st_http_parser p;
    read_response(fd, &p, &carry);
    assert_int_equal(p.status, 400);
    assert_int_equal(p.keep_alive, 0);
    st_http_parser_free(&p);
    close(fd);
    /* max_out: a stream write that would exceed the per-connection limit is refused */
    fd = client(st_server_port(s->server));
    send_all(fd, "GET /big HTTP/1.1\r\n\r\n");
    for (int i = 0; i < 400 && atomic_load(&s->requests) < 2; i++)
        usleep(5000);
    usleep(20000);
    assert_int_equal(atomic_load(&s->max_out_refused), 1);
    close(fd);
    st_buf_free(&carry);
    /* the port is taken: a second server refuses cleanly */
    st_loop *l2 = st_loop_new();
    st_server_config cfg = { .host = "127.0.0.1", .port = st_server_port(s->server), .handler = handler };
    char err[256] = "";
    assert_null(st_server_new(l2, &cfg, err, sizeof err));
    assert_non_null(strstr(err, "in use"));
    st_loop_free(l2);
    srv_stop(s);
}

static void idle_timeout_closes_connections(void **state)
{
    (void)state;
    srv *s = srv_start_idle(0, 0.15);
    /* after a complete exchange, the idle keep-alive connection is closed */
    int fd = client(st_server_port(s->server));
    send_all(fd, "GET /hello HTTP/1.1\r\n\r\n");
    st_buf carry;
    st_buf_init(&carry, 1 << 20);
    st_http_parser p;
    read_response(fd, &p, &carry);
    assert_int_equal(p.status, 200);
    assert_int_equal(p.keep_alive, 1);
    st_http_parser_free(&p);
    st_ns t0 = st_now();
    char b[16];
    assert_int_equal(recv(fd, b, sizeof b, 0), 0);
    st_ns waited = st_now() - t0;
    assert_true(waited >= 100 * ST_NS_PER_MS);
    close(fd);
    /* a stream longer than the timeout is not cut: the timer only runs between requests */
    fd = client(st_server_port(s->server));
    send_all(fd, "GET /stream/250 HTTP/1.1\r\nConnection: close\r\n\r\n");
    read_response(fd, &p, &carry);
    assert_int_equal(p.state, ST_HTTP_DONE);
    assert_non_null(strstr(p.body.data, "[DONE]"));
    st_http_parser_free(&p);
    close(fd);
    /* a client that connects and sends half a request is closed too */
    fd = client(st_server_port(s->server));
    send_all(fd, "GET /hel");
    assert_int_equal(recv(fd, b, sizeof b, 0), 0);
    close(fd);
    st_buf_free(&carry);
    srv_stop(s);
}

/* Slowloris: a request trickled in a byte every 50 ms keeps restarting an idle timeout, but not
 * the header timeout, which counts from the request's first byte. A request that arrives in time
 * is answered. */
static void header_timeout_cuts_a_trickled_request(void **state)
{
    (void)state;
    srv *s = srv_start_timeouts(0, 0.2, 0.4);
    int fd = client(st_server_port(s->server));
    const char *req =
        "GET /hello HTTP/1.1\r\nX-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    st_ns t0 = st_now();
    int closed = 0;
    for (size_t k = 0; req[k] && !closed; k++) {
        if (send(fd, req + k, 1, MSG_NOSIGNAL) < 0)
            closed = 1;
        struct timespec ts = { 0, 50 * 1000 * 1000 };
        nanosleep(&ts, NULL);
        char b[16];
        ssize_t n = recv(fd, b, sizeof b, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
            closed = 1;
        assert_true(n <= 0); /* never answered */
    }
    double took = st_ns_to_s(st_now() - t0);
    assert_true(closed);
    assert_true(took >= 0.35 && took < 2);
    close(fd);
    /* a whole request within the timeout is served */
    fd = client(st_server_port(s->server));
    send_all(fd, "GET /hello HTTP/1.1\r\n\r\n");
    st_buf carry;
    st_buf_init(&carry, 1 << 20);
    st_http_parser p;
    read_response(fd, &p, &carry);
    assert_int_equal(p.status, 200);
    st_http_parser_free(&p);
    st_buf_free(&carry);
    close(fd);
    srv_stop(s);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(respond_keepalive_and_pipelining),
        cmocka_unit_test(streaming_sse_two_in_a_row),
        cmocka_unit_test(sse_send_multiline_framing),
        cmocka_unit_test(disconnect_mid_stream_cancels),
        cmocka_unit_test(bad_request_and_limits),
        cmocka_unit_test(idle_timeout_closes_connections),
        cmocka_unit_test(header_timeout_cuts_a_trickled_request),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
