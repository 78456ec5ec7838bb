#include "engine/probe.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "engine/adapter.h"
#include "net/http1.h"

/* A probe request (headers included) and the body of a probe answer. */
#define PROBE_REQ_MAX 16384
#define PROBE_BODY_MAX ((size_t)1 << 20)

static int remaining_ms(st_ns deadline)
{
    st_ns left = deadline - st_now();
    return left <= 0 ? 0 : (int)(left / ST_NS_PER_MS) + 1;
}

static int connect_to(const char *host, int port, st_ns deadline, char *err, size_t errlen)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int gai = getaddrinfo(host, ps, &hints, &ai);
    if (gai) {
        snprintf(err, errlen, "%s: %s", host, gai_strerror(gai));
        return -1;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        freeaddrinfo(ai);
        return -1;
    }
    int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    if (rc < 0 && errno != EINPROGRESS) {
        snprintf(err, errlen, "connect: %s", strerror(errno));
        close(fd);
        return -1;
    }
    if (rc < 0) {
        struct pollfd pf = { fd, POLLOUT, 0 };
        int pr = poll(&pf, 1, remaining_ms(deadline));
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (pr <= 0) {
            snprintf(err, errlen, "connect: timed out");
            close(fd);
            return -1;
        }
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
        if (soerr) {
            snprintf(err, errlen, "connect: %s", strerror(soerr));
            close(fd);
            return -1;
        }
    }
    return fd;
}

int st_probe_get(const char *host, int port, const char *path, const char *auth, double timeout_s, int *status,
                 st_buf *body, char *err, size_t errlen)
{
    *status = 0;
    st_ns deadline = st_now() + st_s_to_ns(timeout_s);
    int fd = connect_to(host, port, deadline, err, errlen);
    if (fd < 0)
        return -1;
    st_buf req;
    st_buf_init(&req, PROBE_REQ_MAX);
    char hostport[300], authh[1100];
    snprintf(hostport, sizeof hostport, "%s:%d", host, port);
    const char *hdrs[2];
    int nh = 0;
    hdrs[nh++] = "Connection: close";
    if (auth && *auth) {
        snprintf(authh, sizeof authh, "Authorization: Bearer %s", auth);
        hdrs[nh++] = authh;
    }
    int rc = -1;
    st_http_parser p;
    st_http_limits lim = { .max_head = 64 * 1024, .max_headers = 100, .max_body = body->max };
    st_http_parser_init(&p, ST_HTTP_RESPONSE, &lim, NULL, NULL);
    if (st_http_write_request(&req, "GET", hostport, path, hdrs, nh, NULL, NULL, 0)) {
        snprintf(err, errlen, "cannot build the request");
        goto out;
    }
    size_t off = 0;
    while (off < req.len) {
        ssize_t w = send(fd, req.data + off, req.len - off, MSG_NOSIGNAL);
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
            struct pollfd pf = { fd, POLLOUT, 0 };
            if (poll(&pf, 1, remaining_ms(deadline)) <= 0) {
                snprintf(err, errlen, "send: timed out");
                goto out;
            }
            continue;
        }
        snprintf(err, errlen, "send: %s", strerror(errno));
        goto out;
    }
    char buf[16384];
    for (;;) {
        struct pollfd pf = { fd, POLLIN, 0 };
        int pr = poll(&pf, 1, remaining_ms(deadline));
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0) {
            snprintf(err, errlen, "timed out after %.1f s", timeout_s);
            goto out;
        }
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (n < 0) {
            snprintf(err, errlen, "recv: %s", strerror(errno));
            goto out;
        }
        if (n == 0) {
            if (st_http_eof(&p) != 0 || p.state != ST_HTTP_DONE) {
                snprintf(err, errlen, "connection closed before the response completed");
                goto out;
            }
            break;
        }
        if (st_http_feed(&p, buf, (size_t)n) < 0) {
            snprintf(err, errlen, "malformed response: %s", p.errmsg);
            goto out;
        }
        if (p.state == ST_HTTP_DONE)
            break;
    }
    *status = p.status;
    st_buf_reset(body);
    if (p.body.len && st_buf_append(body, p.body.data, p.body.len)) {
        snprintf(err, errlen, "response body over %zu bytes", body->max);
        goto out;
    }
    rc = 0;
out:
    st_http_parser_free(&p);
    st_buf_free(&req);
    close(fd);
    return rc;
}

st_probe_result st_adapter_probe(const st_launch *l, double timeout_s, char *detail, size_t detail_len)
{
    st_buf body;
    st_buf_init(&body, PROBE_BODY_MAX);
    int status;
    char err[256];
    st_probe_result res = ST_PROBE_NOT_YET;
    if (st_probe_get(l->host, l->port, l->health_path, NULL, timeout_s, &status, &body, err, sizeof err)) {
        snprintf(detail, detail_len, "GET %s: %s", l->health_path, err);
        goto out;
    }
    if (status != 200) {
        snprintf(detail, detail_len, "GET %s: HTTP %d", l->health_path, status);
        /* 404 on /health: something that is not an engine we know */
        res = status == 404 ? ST_PROBE_WRONG_SERVER : ST_PROBE_NOT_YET;
        goto out;
    }
    if (st_probe_get(l->host, l->port, l->models_path, l->api_key, timeout_s, &status, &body, err, sizeof err)) {
        snprintf(detail, detail_len, "GET %s: %s", l->models_path, err);
        goto out;
    }
    if (status != 200) {
        snprintf(detail, detail_len, "GET %s: HTTP %d", l->models_path, status);
        res = (status == 404 || status == 401 || status == 403) ? ST_PROBE_WRONG_SERVER : ST_PROBE_NOT_YET;
        goto out;
    }
    char names[512];
    int lists = st_adapter_models_lists(body.data ? body.data : "", body.len, l->expected_model, names, sizeof names);
    if (lists == 1) {
        snprintf(detail, detail_len, "ready: %s lists %s", l->models_path, l->expected_model);
        res = ST_PROBE_READY;
    } else if (lists == 0) {
        snprintf(detail, detail_len, "%s lists %s, not %s: another server answers on port %d", l->models_path, names,
                 l->expected_model, l->port);
        res = ST_PROBE_WRONG_SERVER;
    } else {
        snprintf(detail, detail_len, "%s did not answer with a model list: another server on port %d?", l->models_path,
                 l->port);
        res = ST_PROBE_WRONG_SERVER;
    }
out:
    st_buf_free(&body);
    return res;
}
