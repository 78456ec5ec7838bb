/* Helpers for the emulator's integration tests: start `servetune emulate serve` as a child
 * on a free 127.0.0.1 port, wait for /health, make HTTP requests (parsed with net/http1.h,
 * the project's one HTTP parser), and kill the child at the end. Every wait is bounded. */
#ifndef ST_TEST_EMU_UTIL_H
#define ST_TEST_EMU_UTIL_H
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/clock.h"
#include "net/http1.h"

typedef struct emu_child {
    pid_t pid;
    int port;
    char log[256]; /* stderr+stdout of the child */
} emu_child;

static inline int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0)
        return -1;
    socklen_t l = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &l);
    close(fd);
    return ntohs(a.sin_port);
}

/* Response of one request. */
typedef struct http_res {
    int status; /* -1: no response (connection failed, reset or timed out) */
    st_buf body;
    char ctype[128];
} http_res;

/* One request on a fresh connection, bounded by timeout_ms. */
static inline int http_do(int port, const char *method, const char *path, const char *body, const char *auth,
                          int timeout_ms, http_res *out)
{
    memset(out, 0, sizeof *out);
    out->status = -1;
    st_buf_init(&out->body, 64 << 20);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    st_buf req;
    st_buf_init(&req, 1 << 24);
    char hb[600];
    const char *hdrs[2];
    int nh = 0;
    if (auth) {
        snprintf(hb, sizeof hb, "Authorization: Bearer %s", auth);
        hdrs[nh++] = hb;
    }
    hdrs[nh++] = "Connection: close";
    st_http_write_request(&req, method, "127.0.0.1", path, hdrs, nh, body ? "application/json" : NULL, body,
                          body ? strlen(body) : 0);
    size_t off = 0;
    while (off < req.len) {
        ssize_t w = write(fd, req.data + off, req.len - off);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    st_buf_free(&req);
    st_http_limits lim = { .max_body = 64 << 20 };
    st_http_parser p;
    st_http_parser_init(&p, ST_HTTP_RESPONSE, &lim, NULL, NULL);
    st_ns deadline = st_now() + (st_ns)timeout_ms * ST_NS_PER_MS;
    char buf[65536];
    int rc = -1;
    for (;;) {
        st_ns left = deadline - st_now();
        if (left <= 0)
            break;
        struct pollfd pf = { .fd = fd, .events = POLLIN };
        if (poll(&pf, 1, (int)(left / ST_NS_PER_MS) + 1) <= 0)
            continue;
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            break;
        }
        if (n == 0) {
            if (st_http_eof(&p) == 0)
                rc = 0;
            break;
        }
        if (st_http_feed(&p, buf, (size_t)n) < 0)
            break;
        if (p.state == ST_HTTP_DONE) {
            rc = 0;
            break;
        }
    }
    if (rc == 0) {
        out->status = p.status;
        if (p.body.len)
            st_buf_append(&out->body, p.body.data, p.body.len);
        const char *ct = st_http_header(&p, "content-type");
        snprintf(out->ctype, sizeof out->ctype, "%s", ct ? ct : "");
    }
    if (!out->body.data)
        st_buf_puts(&out->body, "");
    st_http_parser_free(&p);
    close(fd);
    return rc;
}

static inline void http_res_free(http_res *r) { st_buf_free(&r->body); }

/* Starts the emulator with extra args (NULL-terminated) after "emulate serve MODEL --gpu GPU
 * --host 127.0.0.1 --port P". wait_ready: wait for /health (bounded by 10 s). */
static inline int emu_start(emu_child *c, const char *model, const char *gpu, const char *const *extra, int wait_ready)
{
    memset(c, 0, sizeof *c);
    c->port = free_port();
    snprintf(c->log, sizeof c->log, "/tmp/st-emu-test-%d-%d.log", (int)getpid(), c->port);
    char port[16];
    snprintf(port, sizeof port, "%d", c->port);
    const char *argv[64] = { st_test_bin(), "emulate", "serve",     model,    "--gpu",
                             gpu,           "--host",  "127.0.0.1", "--port", port };
    int n = 10;
    for (int i = 0; extra && extra[i] && n < 62; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        setpgid(0, 0);
        /* a failed check leaves the test by longjmp, past emu_stop: the emulator ends with the test */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) /* the test ended before the line above */
            _exit(127);
        int fd = open(c->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    c->pid = pid;
    if (!wait_ready)
        return 0;
    st_ns deadline = st_now() + 10 * ST_NS_PER_S;
    while (st_now() < deadline) {
        http_res r;
        if (http_do(c->port, "GET", "/health", NULL, NULL, 500, &r) == 0 && r.status == 200) {
            http_res_free(&r);
            return 0;
        }
        http_res_free(&r);
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            c->pid = 0;
            return -1;
        }
        usleep(20000);
    }
    return -1;
}

/* Waits up to ms for the child to exit; returns its exit status (0-255), 128+signal, or -1. */
static inline int emu_wait(emu_child *c, int ms)
{
    if (!c->pid)
        return -1;
    st_ns deadline = st_now() + (st_ns)ms * ST_NS_PER_MS;
    do {
        int st;
        pid_t r = waitpid(c->pid, &st, WNOHANG);
        if (r == c->pid) {
            c->pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        usleep(10000);
    } while (st_now() < deadline);
    return -1;
}

static inline int emu_alive(emu_child *c)
{
    if (!c->pid)
        return 0;
    int st;
    return waitpid(c->pid, &st, WNOHANG) == 0;
}

/* SIGTERM, then SIGKILL after 2 s; removes the log. */
static inline void emu_stop(emu_child *c)
{
    if (c->pid) {
        kill(c->pid, SIGTERM);
        if (emu_wait(c, 2000) < 0 && c->pid) {
            kill(c->pid, SIGKILL);
            emu_wait(c, 2000);
        }
    }
    unlink(c->log);
}

/* Reads the child's log (at most cap-1 bytes). */
static inline void emu_log(const emu_child *c, char *out, size_t cap)
{
    out[0] = 0;
    FILE *f = fopen(c->log, "r");
    if (!f)
        return;
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = 0;
    fclose(f);
}

/* Counts "data: " events in an SSE body and the occurrences of a needle. */
static inline int count_sub(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* Runs servetune (st_test_bin()) with argv (argv[0] ignored), its output to log; its exit status
 * (128 + the signal when killed). Fails the test after 120 s. */
static inline int run_cli(const char *const *argv, const char *log)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 1);
        dup2(fd, 2);
        execv(st_test_bin(), (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    for (int i = 0; i < 12000; i++) { /* 120 s at most */
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    fail_msg("servetune did not finish (log %s)", log);
    return -1;
}
#endif
