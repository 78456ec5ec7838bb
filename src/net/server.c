#include "net/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/util.h"

typedef struct srv_conn srv_conn;

struct st_server_resp {
    srv_conn *c;
    st_server_cancel_cb cancel;
    void *cancel_arg;
    uint8_t active;    /* handed to the handler and not finished */
    uint8_t streaming; /* 1: chunked, 2: delimited by close (HTTP/1.0 client) */
    uint8_t keep_alive;
    uint8_t head_req;
};

struct srv_conn {
    st_server *s;
    int fd;
    st_http_parser req;
    st_buf in;
    size_t in_off;
    st_buf out;
    size_t out_off;
    st_server_resp resp;
    uint8_t dead, close_after, queued, paused;
    uint8_t arriving; /* a request's first byte came and the request is not complete yet */
    uint32_t mask;
    st_timer idle; /* the idle timeout, or the deadline of the request arriving */
    srv_conn *prev, *next;
    srv_conn *qnext;
};

struct st_server {
    st_loop *l;
    int lfd;
    uint16_t port;
    st_server_config cfg;
    srv_conn *conns;
    uint32_t nconns;
    st_timer defer;
    srv_conn *dq;
    st_buf scratch;
    int freeing;
};

#define READ_CHUNK 16384

static size_t max_in(const st_server *s)
{
    size_t head = s->cfg.limits.max_head ? s->cfg.limits.max_head : 64 * 1024;
    uint64_t body = s->cfg.limits.max_body ? s->cfg.limits.max_body : 8 * 1024 * 1024;
    return head + (size_t)body + 64 * 1024;
}

static void queue_conn(srv_conn *c)
{
    st_server *s = c->s;
    if (c->queued)
        return;
    c->queued = 1;
    c->qnext = s->dq;
    s->dq = c;
    if (!st_timer_armed(&s->defer))
        st_timer_arm(s->l, &s->defer, 0);
}

static void set_mask(srv_conn *c, uint32_t mask)
{
    if (c->dead || mask == c->mask)
        return;
    c->mask = mask;
    st_loop_mod_fd(c->s->l, c->fd, mask);
}

static void conn_kill(srv_conn *c, int rst)
{
    if (c->dead)
        return;
    c->dead = 1;
    st_timer_disarm(c->s->l, &c->idle);
    st_loop_del_fd(c->s->l, c->fd);
    if (rst) {
        struct linger lg = { 1, 0 };
        setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    }
    close(c->fd);
    c->fd = -1;
    queue_conn(c);
}

static void conn_free(srv_conn *c)
{
    st_server *s = c->s;
    st_timer_disarm(s->l, &c->idle);
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->nconns--;
    st_http_parser_free(&c->req);
    st_buf_free(&c->in);
    st_buf_free(&c->out);
    free(c);
}

/* Writes what is buffered. 0, or -1 when the connection failed (it is then dead). */
static int flush(srv_conn *c)
{
    while (!c->dead && c->out_off < c->out.len) {
        ssize_t n = send(c->fd, c->out.data + c->out_off, c->out.len - c->out_off, MSG_NOSIGNAL);
        if (n > 0) {
            c->out_off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            set_mask(c, c->mask | ST_EV_WRITE);
            return 0;
        }
        conn_kill(c, 0);
        return -1;
    }
    if (c->dead)
        return -1;
    st_buf_reset(&c->out);
    c->out_off = 0;
    set_mask(c, c->mask & ~(uint32_t)ST_EV_WRITE);
    if (c->close_after) {
        shutdown(c->fd, SHUT_WR);
        conn_kill(c, 0);
        return 0;
    }
    return 0;
}

static size_t max_out(const st_server *s) { return s->cfg.max_out ? s->cfg.max_out : 8 * 1024 * 1024; }

/* Appends and flushes. -1: dead, or over max_out (nothing appended). */
static int out_write(srv_conn *c, const void *d, size_t n)
{
    if (c->dead)
        return -1;
    if (c->out.len - c->out_off + n > max_out(c->s))
        return -1;
    if (c->out_off > 0 && c->out_off * 2 >= c->out.len) {
        st_buf_consume(&c->out, c->out_off);
        c->out_off = 0;
    }
    if (st_buf_append(&c->out, d, n) < 0)
        return -1;
    return flush(c);
}

static void process_input(srv_conn *c);

/* Between requests: the idle timeout, from now. */
static void idle_arm(srv_conn *c)
{
    double t = c->s->cfg.idle_timeout_s;
    c->arriving = 0;
    if (t > 0 && !c->dead)
        st_timer_arm(c->s->l, &c->idle, st_now() + (st_ns)(t * 1e9));
}

/* Bytes of a request came. With a header timeout the whole request must arrive within it of its
 * first byte, however slowly it trickles (slowloris); without one, each byte restarts the idle
 * timeout. */
static void request_bytes(srv_conn *c)
{
    double h = c->s->cfg.header_timeout_s;
    if (h <= 0) {
        idle_arm(c);
        return;
    }
    if (c->arriving || c->dead)
        return;
    c->arriving = 1;
    st_timer_arm(c->s->l, &c->idle, st_now() + (st_ns)(h * 1e9));
}

static void on_idle(st_loop *l, void *arg)
{
    srv_conn *c = arg;
    if (!c->dead && !c->resp.active)
        conn_kill(c, 0);
}

static void finish(srv_conn *c)
{
    c->resp.active = 0;
    c->resp.cancel = NULL;
    st_http_parser_reset(&c->req);
    if (c->dead)
        return;
    if (!c->resp.keep_alive) {
        c->close_after = 1;
        if (c->out_off >= c->out.len)
            flush(c);
        return;
    }
    idle_arm(c);
    if (c->in_off < c->in.len)
        queue_conn(c); /* a pipelined request waits: parse it from the loop, not from here */
}

static void error_response(srv_conn *c, int status, const char *msg)
{
    st_buf *b = &c->s->scratch;
    st_buf_reset(b);
    size_t ml = strlen(msg);
    st_buf_printf(b, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
                  status, st_http_reason(status), ml, msg);
    c->close_after = 1;
    out_write(c, b->data, b->len);
}

static void process_input(srv_conn *c)
{
    st_server *s = c->s;
    int rounds = 0;
    while (!c->dead && !c->resp.active && !c->close_after && c->in_off < c->in.len && rounds++ < 1024) {
        ssize_t n = st_http_feed(&c->req, c->in.data + c->in_off, c->in.len - c->in_off);
        if (n < 0) {
            int st = 400;
            if (c->req.err == ST_HTTP_E_TOO_LARGE)
                st = c->req.state == ST_HTTP_ERROR && c->req.method == NULL ? 431 : 413;
            error_response(c, st, c->req.errmsg);
            return;
        }
        c->in_off += (size_t)n;
        if (c->req.state != ST_HTTP_DONE)
            break;
        st_server_resp *r = &c->resp;
        memset(r, 0, sizeof *r);
        r->c = c;
        r->active = 1;
        r->keep_alive = c->req.keep_alive;
        r->head_req = !strcmp(c->req.method, "HEAD");
        st_timer_disarm(s->l, &c->idle);
        c->arriving = 0;
        s->cfg.handler(s->cfg.arg, &c->req, r);
    }
    if (c->in_off == c->in.len) {
        st_buf_reset(&c->in);
        c->in_off = 0;
    }
}

static void on_conn(st_loop *l, int fd, uint32_t ev, void *arg)
{
    srv_conn *c = arg;
    if (ev & ST_EV_WRITE)
        flush(c);
    if (c->dead)
        return;
    if (ev & (ST_EV_READ | ST_EV_ERROR)) {
        for (int i = 0; i < 8 && !c->dead; i++) {
            if (c->in_off > 0 && c->in_off == c->in.len) {
                st_buf_reset(&c->in);
                c->in_off = 0;
            }
            if (c->in.len - c->in_off >= max_in(c->s)) {
                /* the peer sends faster than we answer: stop reading until we catch up */
                c->paused = 1;
                set_mask(c, c->mask & ~(uint32_t)ST_EV_READ);
                break;
            }
            if (st_buf_reserve(&c->in, READ_CHUNK) < 0) {
                conn_kill(c, 0);
                return;
            }
            ssize_t n = recv(fd, c->in.data + c->in.len, READ_CHUNK, 0);
            if (n > 0) {
                if (!c->resp.active)
                    request_bytes(c); /* a request is arriving: its rest must come within the timeout too */
                c->in.len += (size_t)n;
                c->in.data[c->in.len] = '\0';
                if ((size_t)n < READ_CHUNK)
                    break;
                continue;
            }
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                break;
            conn_kill(c, 0); /* EOF or error: the client is gone */
            return;
        }
    }
    process_input(c);
}

static void on_defer(st_loop *l, void *arg)
{
    st_server *s = arg;
    /* conns queued while we run are handled in the next round */
    srv_conn *q = s->dq;
    s->dq = NULL;
    while (q) {
        srv_conn *c = q;
        q = q->qnext;
        c->queued = 0;
        if (c->dead) {
            if (c->resp.active && c->resp.cancel) {
                st_server_cancel_cb cb = c->resp.cancel;
                c->resp.cancel = NULL;
                c->resp.active = 0;
                cb(c->resp.cancel_arg, &c->resp);
            }
            conn_free(c);
        } else {
            if (c->paused && !c->resp.active) {
                c->paused = 0;
                set_mask(c, c->mask | ST_EV_READ);
            }
            process_input(c);
        }
    }
}

static void on_accept(st_loop *l, int fd, uint32_t ev, void *arg)
{
    st_server *s = arg;
    uint32_t maxc = s->cfg.max_conns ? s->cfg.max_conns : 20000;
    for (int i = 0; i < 512; i++) {
        int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            break; /* EAGAIN, or EMFILE and friends: try again at the next event */
        }
        if (s->nconns >= maxc) {
            close(cfd);
            continue;
        }
        srv_conn *c = calloc(1, sizeof *c);
        if (!c) {
            close(cfd);
            continue;
        }
        int one = 1;
        setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c->s = s;
        c->fd = cfd;
        st_http_parser_init(&c->req, ST_HTTP_REQUEST, &s->cfg.limits, NULL, NULL);
        if (!s->cfg.limits.max_body)
            c->req.lim.max_body = 8 * 1024 * 1024, c->req.body.max = 8 * 1024 * 1024;
        st_buf_init(&c->in, max_in(s) + READ_CHUNK);
        st_buf_init(&c->out, max_out(s) + 64);
        c->mask = ST_EV_READ;
        st_timer_init(&c->idle, on_idle, c);
        if (st_loop_add_fd(s->l, cfd, ST_EV_READ, on_conn, c) < 0) {
            close(cfd);
            st_http_parser_free(&c->req);
            free(c);
            continue;
        }
        c->next = s->conns;
        if (s->conns)
            s->conns->prev = c;
        s->conns = c;
        s->nconns++;
        idle_arm(c);
    }
}

st_server *st_server_new(st_loop *l, const st_server_config *cfg, char *err, size_t errlen)
{
    const char *host = cfg->host ? cfg->host : "127.0.0.1";
    struct sockaddr_storage ss;
    socklen_t sl;
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons(cfg->port);
        sl = sizeof *a4;
    } else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons(cfg->port);
        sl = sizeof *a6;
    } else {
        st_errf(err, errlen, "listen address '%s' is not a numeric IPv4/IPv6 address", host);
        return NULL;
    }
    if (!cfg->handler) {
        st_errf(err, errlen, "no request handler");
        return NULL;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        st_errf(err, errlen, "socket: %s", strerror(errno));
        return NULL;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, sl) < 0) {
        st_errf(err, errlen, "cannot listen on %s port %u: %s", host, cfg->port, strerror(errno));
        close(fd);
        return NULL;
    }
    if (listen(fd, cfg->backlog > 0 ? cfg->backlog : 4096) < 0) {
        st_errf(err, errlen, "listen: %s", strerror(errno));
        close(fd);
        return NULL;
    }
    st_server *s = calloc(1, sizeof *s);
    if (!s) {
        close(fd);
        st_errf(err, errlen, "out of memory");
        return NULL;
    }
    s->l = l;
    s->lfd = fd;
    s->cfg = *cfg;
    st_buf_init(&s->scratch, max_out(s) + 4096);
    st_timer_init(&s->defer, on_defer, s);
    struct sockaddr_storage bound;
    socklen_t bl = sizeof bound;
    getsockname(fd, (struct sockaddr *)&bound, &bl);
    s->port = ntohs(bound.ss_family == AF_INET ? ((struct sockaddr_in *)&bound)->sin_port
                                               : ((struct sockaddr_in6 *)&bound)->sin6_port);
    if (st_loop_add_fd(l, fd, ST_EV_READ, on_accept, s) < 0) {
        st_errf(err, errlen, "event loop: %s", strerror(errno));
        close(fd);
        st_buf_free(&s->scratch);
        free(s);
        return NULL;
    }
    return s;
}

void st_server_free(st_server *s)
{
    if (!s)
        return;
    st_loop_del_fd(s->l, s->lfd);
    close(s->lfd);
    st_timer_disarm(s->l, &s->defer);
    srv_conn *c = s->conns;
    while (c) {
        srv_conn *next = c->next;
        st_timer_disarm(s->l, &c->idle);
        if (!c->dead) {
            st_loop_del_fd(s->l, c->fd);
            close(c->fd);
            c->dead = 1;
        }
        if (c->resp.active && c->resp.cancel) {
            st_server_cancel_cb cb = c->resp.cancel;
            c->resp.cancel = NULL;
            c->resp.active = 0;
            cb(c->resp.cancel_arg, &c->resp);
        }
        st_http_parser_free(&c->req);
        st_buf_free(&c->in);
        st_buf_free(&c->out);
        free(c);
        c = next;
    }
    st_buf_free(&s->scratch);
    free(s);
}

uint16_t st_server_port(const st_server *s) { return s->port; }
uint32_t st_server_conn_count(const st_server *s) { return s->nconns; }

static int build_head(st_server_resp *r, int status, const char *ctype, const char *extra, const char *framing)
{
    srv_conn *c = r->c;
    st_buf *b = &c->s->scratch;
    st_buf_reset(b);
    int rc = st_http_write_status(b, status, NULL);
    if (rc == 0 && ctype)
        rc = st_buf_printf(b, "Content-Type: %s\r\n", ctype);
    if (rc == 0 && framing)
        rc = st_buf_puts(b, framing);
    if (rc == 0 && extra)
        rc = st_buf_puts(b, extra);
    if (rc == 0 && !r->keep_alive)
        rc = st_buf_puts(b, "Connection: close\r\n");
    else if (rc == 0 && c->req.http_minor == 0)
        rc = st_buf_puts(b, "Connection: keep-alive\r\n");
    if (rc == 0)
        rc = st_buf_puts(b, "\r\n");
    return rc;
}

int st_server_respond(st_server_resp *r, int status, const char *content_type, const char *extra_headers,
                      const void *body, size_t len)
{
    srv_conn *c = r->c;
    if (!r->active || r->streaming)
        return -1;
    int rc = -1;
    if (!c->dead) {
        char framing[64];
        snprintf(framing, sizeof framing, "Content-Length: %zu\r\n", len);
        st_buf *b = &c->s->scratch;
        rc = build_head(r, status, content_type, extra_headers, framing);
        if (rc == 0 && len && !r->head_req)
            rc = st_buf_append(b, body, len);
        if (rc == 0)
            rc = out_write(c, b->data, b->len);
    }
    finish(c);
    return rc;
}

int st_server_stream_start(st_server_resp *r, int status, const char *content_type, const char *extra_headers)
{
    srv_conn *c = r->c;
    if (!r->active || r->streaming || c->dead)
        return -1;
    int chunked = c->req.http_minor >= 1;
    if (!chunked)
        r->keep_alive = 0;
    char framing[128];
    snprintf(framing, sizeof framing, "%s%s", chunked ? "Transfer-Encoding: chunked\r\n" : "",
             content_type && !strncasecmp(content_type, "text/event-stream", 17) ? "Cache-Control: no-cache\r\n" : "");
    if (build_head(r, status, content_type, extra_headers, framing) < 0)
        return -1;
    if (out_write(c, c->s->scratch.data, c->s->scratch.len) < 0)
        return -1;
    r->streaming = chunked ? 1 : 2;
    return 0;
}

int st_server_stream_write(st_server_resp *r, const void *data, size_t len)
{
    srv_conn *c = r->c;
    if (!r->active || !r->streaming || c->dead)
        return -1;
    if (len == 0)
        return 0;
    if (r->streaming == 2)
        return out_write(c, data, len);
    st_buf *b = &c->s->scratch;
    st_buf_reset(b);
    if (st_http_write_chunk(b, data, len) < 0)
        return -1;
    return out_write(c, b->data, b->len);
}

int st_server_sse_send(st_server_resp *r, const char *data, size_t len)
{
    srv_conn *c = r->c;
    if (!r->active || !r->streaming || c->dead)
        return -1;
    /* the event, framed as one chunk, built in place: "<hex>\r\n" "data: ...\n" ... "\n" "\r\n" */
    size_t lines = 1;
    for (const char *p = data, *e = data + len; (p = memchr(p, '\n', (size_t)(e - p))) != NULL; p++)
        lines++;
    size_t evlen = len - (lines - 1) + lines * 7 + 1; /* each line: "data: " + text + "\n"; then "\n" */
    st_buf *b = &c->s->scratch;
    st_buf_reset(b);
    if (r->streaming == 1 && st_buf_printf(b, "%zx\r\n", evlen) < 0)
        return -1;
    if (st_buf_reserve(b, evlen + 2) < 0)
        return -1;
    char *o = b->data + b->len;
    size_t i = 0;
    for (;;) {
        const char *nl = i < len ? memchr(data + i, '\n', len - i) : NULL;
        size_t n = nl ? (size_t)(nl - (data + i)) : len - i;
        memcpy(o, "data: ", 6);
        memcpy(o + 6, data + i, n);
        o[6 + n] = '\n';
        o += n + 7;
        if (!nl)
            break;
        i += n + 1;
    }
    *o++ = '\n';
    if (r->streaming == 1) {
        *o++ = '\r';
        *o++ = '\n';
    }
    b->len = (size_t)(o - b->data);
    b->data[b->len] = '\0';
    return out_write(c, b->data, b->len);
}

int st_server_stream_end(st_server_resp *r)
{
    srv_conn *c = r->c;
    if (!r->active)
        return -1;
    int rc = -1;
    if (!c->dead && r->streaming == 1) {
        rc = out_write(c, "0\r\n\r\n", 5);
    } else if (!c->dead && (r->streaming == 2 || r->streaming == 3)) {
        r->keep_alive = 0;
        rc = 0;
    }
    finish(c);
    return rc;
}

void st_server_resp_abort(st_server_resp *r, int rst)
{
    srv_conn *c = r->c;
    if (!r->active)
        return;
    r->active = 0;
    r->cancel = NULL;
    if (!c->dead) {
        if (!rst && c->out_off < c->out.len)
            (void)!send(c->fd, c->out.data + c->out_off, c->out.len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
        conn_kill(c, rst);
    }
}

int st_server_resp_raw(st_server_resp *r, const void *data, size_t len)
{
    if (!r->active || r->c->dead)
        return -1;
    r->streaming = r->streaming ? r->streaming : 3;
    return out_write(r->c, data, len);
}

void st_server_resp_on_cancel(st_server_resp *r, st_server_cancel_cb cb, void *arg)
{
    r->cancel = cb;
    r->cancel_arg = arg;
}

size_t st_server_resp_pending(const st_server_resp *r) { return r->c->out.len - r->c->out_off; }
