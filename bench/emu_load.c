/* A minimal closed-loop streaming client for the emulator's own figures:
 * C connections each keep one streaming /v1/completions request in flight until N requests
 * are done; counts SSE events with net/sse.h over responses parsed by net/http1.h (the
 * project's parsers). Prints open streams, events/s, and requests/s.
 * Usage: emu_load PORT CONCURRENCY REQUESTS MAX_TOKENS [PROMPT_TOKENS] */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/clock.h"
#include "net/http1.h"
#include "net/loop.h"
#include "net/sse.h"

typedef struct conn {
    int fd;
    st_http_parser p;
    st_http_cbs cbs;
    st_sse sse;
    struct ctx *x;
    int busy;
    size_t woff;
} conn;

typedef struct ctx {
    st_loop *loop;
    int port;
    uint32_t n_req, sent, done, open_streams, max_open;
    uint64_t events, errors;
    st_buf req;
    st_ns first_event, last_event;
} ctx;

static int on_event(void *arg, const st_sse_event *ev)
{
    conn *c = arg;
    if (!strcmp(ev->data, "[DONE]"))
        return 0;
    st_ns t = st_now();
    if (!c->x->first_event)
        c->x->first_event = t;
    c->x->last_event = t;
    c->x->events++;
    if (strstr(ev->data, "\"error\""))
        c->x->errors++;
    return 0;
}

static int on_body(void *arg, const char *d, size_t n)
{
    conn *c = arg;
    return st_sse_feed(&c->sse, d, n, on_event, c) < 0;
}

static void send_next(conn *c)
{
    ctx *x = c->x;
    if (x->sent >= x->n_req) {
        c->busy = 0;
        return;
    }
    x->sent++;
    c->busy = 1;
    x->open_streams++;
    if (x->open_streams > x->max_open)
        x->max_open = x->open_streams;
    st_http_parser_reset(&c->p);
    st_sse_reset(&c->sse);
    size_t off = 0;
    while (off < x->req.len) {
        ssize_t w = write(c->fd, x->req.data + off, x->req.len - off);
        if (w < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (w <= 0) {
            x->errors++;
            return;
        }
        off += (size_t)w;
    }
}

static void on_read(st_loop *l, int fd, uint32_t ev, void *arg)
{
    conn *c = arg;
    ctx *x = c->x;
    char buf[65536];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            x->errors++;
            st_loop_del_fd(l, fd);
            close(fd);
            if (c->busy) {
                x->open_streams--;
                x->done++;
            }
            c->busy = 0;
            if (x->done >= x->n_req)
                st_loop_stop(l);
            return;
        }
        size_t off = 0;
        while (off < (size_t)n) {
            ssize_t k = st_http_feed(&c->p, buf + off, (size_t)n - off);
            if (k < 0) {
                x->errors++;
                st_loop_del_fd(l, fd);
                close(fd);
                return;
            }
            off += (size_t)k;
            if (c->p.state == ST_HTTP_DONE) {
                x->open_streams--;
                x->done++;
                if (x->done >= x->n_req) {
                    st_loop_stop(l);
                    return;
                }
                send_next(c);
            }
        }
    }
    (void)ev;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: emu_load PORT CONCURRENCY REQUESTS MAX_TOKENS [PROMPT_TOKENS]\n");
        return 2;
    }
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    ctx x = { 0 };
    x.port = atoi(argv[1]);
    uint32_t conc = (uint32_t)atoi(argv[2]);
    x.n_req = (uint32_t)atoi(argv[3]);
    int max_tokens = atoi(argv[4]);
    int plen = argc > 5 ? atoi(argv[5]) : 8;
    x.loop = st_loop_new();
    st_buf body;
    st_buf_init(&body, 1 << 20);
    st_buf_puts(&body, "{\"prompt\":[");
    for (int i = 0; i < plen; i++)
        st_buf_printf(&body, i ? ",%d" : "%d", 1000 + i);
    st_buf_printf(&body, "],\"max_tokens\":%d,\"ignore_eos\":true,\"stream\":true}", max_tokens);
    st_buf_init(&x.req, 1 << 20);
    st_http_write_request(&x.req, "POST", "127.0.0.1", "/v1/completions", NULL, 0, "application/json", body.data,
                          body.len);
    conn *cs = calloc(conc, sizeof *cs);
    st_ns t0 = st_now();
    for (uint32_t i = 0; i < conc; i++) {
        conn *c = &cs[i];
        c->x = &x;
        c->fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = { .sin_family = AF_INET,
                                 .sin_port = htons((uint16_t)x.port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        if (connect(c->fd, (struct sockaddr *)&a, sizeof a) < 0) {
            perror("connect");
            return 1;
        }
        int one = 1;
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
        c->cbs.on_body = on_body;
        st_http_limits lim = { 0 };
        st_http_parser_init(&c->p, ST_HTTP_RESPONSE, &lim, &c->cbs, c);
        st_sse_init(&c->sse, 1 << 16);
        st_loop_add_fd(x.loop, c->fd, ST_EV_READ, on_read, c);
        send_next(c);
    }
    st_loop_run(x.loop);
    st_ns t1 = st_now();
    double secs = (t1 - t0) / 1e9, esecs = (x.last_event - x.first_event) / 1e9;
    printf("concurrency %u, requests %u done, max open streams %u, events %llu, errors %llu\n", conc, x.done,
           x.max_open, (unsigned long long)x.events, (unsigned long long)x.errors);
    printf("wall %.3f s: %.0f token events/s (%.0f over first..last event), %.1f req/s\n", secs, x.events / secs,
           esecs > 0 ? x.events / esecs : 0, x.done / secs);
    for (uint32_t i = 0; i < conc; i++) {
        st_http_parser_free(&cs[i].p);
        st_sse_free(&cs[i].sse);
    }
    free(cs);
    st_buf_free(&body);
    st_buf_free(&x.req);
    st_loop_free(x.loop);
    return x.errors ? 1 : 0;
}
