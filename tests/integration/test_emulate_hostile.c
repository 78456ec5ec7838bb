/* The emulator against hostile or careless clients: it listens on 127.0.0.1 unless told
 * otherwise; a request trickled in byte by byte (slowloris) is cut at the header timeout and an
 * idle connection at the keep-alive timeout, so descriptors cannot be held forever; /tokenize
 * answers an input whose answer is tens of megabytes instead of closing without a word. One
 * emulator child per test, killed at the end; 127.0.0.1 only. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>

#include "emu_util.h"

static emu_child emu;

static void stop(void)
{
    if (emu.pid) {
        kill(emu.pid, SIGKILL);
        waitpid(emu.pid, NULL, 0);
        emu.pid = 0;
    }
    unlink(emu.log);
}

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

/* Seconds until the server closes fd, sending one byte of `trickle` every 100 ms meanwhile (NULL:
 * nothing); -1 when it was still open after limit_s. */
static double seconds_until_closed(int fd, const char *trickle, double limit_s)
{
    st_ns t0 = st_now(), dl = t0 + st_s_to_ns(limit_s);
    size_t k = 0;
    while (st_now() < dl) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (poll(&p, 1, 100) > 0) {
            char b[256];
            ssize_t n = recv(fd, b, sizeof b, MSG_DONTWAIT);
            if (n == 0 || (n < 0 && errno != EAGAIN))
                return st_ns_to_s(st_now() - t0);
        }
        if (trickle && trickle[k] && send(fd, trickle + k, 1, MSG_NOSIGNAL) < 0)
            return st_ns_to_s(st_now() - t0);
        if (trickle && trickle[k])
            k++;
    }
    return -1;
}

/* No --host: the emulator listens on 127.0.0.1 (vLLM's own default is every interface). */
static void listens_on_loopback_by_default(void **state)
{
    (void)state;
    memset(&emu, 0, sizeof emu);
    emu.port = free_port();
    snprintf(emu.log, sizeof emu.log, "/tmp/st-emu-hostile-%d.log", (int)getpid());
    char port[16];
    snprintf(port, sizeof port, "%d", emu.port);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setpgid(0, 0);
        int fd = open(emu.log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        execl(st_test_bin(), st_test_bin(), "emulate", "serve", "Qwen/Qwen3-8B", "--gpu", "H100", "--port", port,
              (char *)NULL);
        _exit(127);
    }
    emu.pid = pid;
    st_ns dl = st_now() + st_s_to_ns(10);
    int up = 0;
    while (!up && st_now() < dl) {
        http_res r;
        up = http_do(emu.port, "GET", "/health", NULL, NULL, 500, &r) == 0 && r.status == 200;
        http_res_free(&r);
        if (!up)
            usleep(20000);
    }
    assert_true(up);
    char log[4096], want[64];
    emu_log(&emu, log, sizeof log);
    snprintf(want, sizeof want, "on http://127.0.0.1:%d", emu.port);
    assert_non_null(strstr(log, want));
    stop();
}

/* A request trickled in one byte every 100 ms is closed at the header timeout (0.5 s), not kept
 * open by each byte; a connection that sends nothing is closed at the keep-alive timeout (1 s);
 * meanwhile a normal client is served. */
static void slowloris_is_cut(void **state)
{
    (void)state;
    const char *extra[] = { "--header-timeout", "0.5", "--timeout-keep-alive", "1", NULL };
    assert_int_equal(emu_start(&emu, "Qwen/Qwen3-8B", "H100", extra, 1), 0);
    int slow = connect_to(emu.port);
    const char *req =
        "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    double t = seconds_until_closed(slow, req, 5);
    close(slow);
    assert_true(t > 0.3 && t < 2.5);
    int idle = connect_to(emu.port);
    t = seconds_until_closed(idle, NULL, 5);
    close(idle);
    assert_true(t > 0.7 && t < 3);
    http_res r;
    assert_int_equal(http_do(emu.port, "GET", "/health", NULL, NULL, 2000, &r), 0);
    assert_int_equal(r.status, 200);
    http_res_free(&r);
    stop();
}

/* /tokenize of 3 million words: an answer of about 20 MB, more than the server's default
 * per-connection output buffer, comes whole. */
static void tokenize_answers_a_large_input(void **state)
{
    (void)state;
    const char *extra[] = { "--max-model-len", "4096", NULL };
    assert_int_equal(emu_start(&emu, "Qwen/Qwen3-8B", "H100", extra, 1), 0);
    size_t words = 3000000, len = 32 + 2 * words;
    char *body = malloc(len);
    assert_non_null(body);
    size_t o = (size_t)snprintf(body, len, "{\"prompt\":\"");
    for (size_t i = 0; i < words; i++) {
        body[o++] = 'z';
        body[o++] = ' ';
    }
    snprintf(body + o, len - o, "\"}");
    http_res r;
    assert_int_equal(http_do(emu.port, "POST", "/tokenize", body, NULL, 30000, &r), 0);
    free(body);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body.data, "\"count\":3000000"));
    http_res_free(&r);
    stop();
}

static int teardown(void **state)
{
    (void)state;
    stop();
    return 0;
}

/* A figure of the emulator's /metrics (the first line of that name), or -1. */
static double metric(int port, const char *name)
{
    http_res r;
    double v = -1;
    if (http_do(port, "GET", "/metrics", NULL, NULL, 5000, &r) == 0 && r.status == 200) {
        char key[128];
        snprintf(key, sizeof key, "\n%s{", name);
        const char *p = strstr(r.body.data, key);
        const char *sp = p ? strchr(p + 1, ' ') : NULL;
        if (sp)
            v = strtod(sp + 1, NULL);
    }
    http_res_free(&r);
    return v;
}

/* A client that sends a long streamed request and does not read: once its answer fills the
 * socket, the emulator holds the stream's token production (as a server stops generating into
 * a full socket) instead of buffering every token; when the client reads, the stream resumes
 * and the answer comes whole. */
static void unread_stream_is_held(void **state)
{
    (void)state;
    const char *extra[] = { "--time-scale", "50", NULL };
    assert_int_equal(emu_start(&emu, "Qwen/Qwen3-8B", "H100", extra, 1), 0);
    enum { WANT = 36000 };
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons((uint16_t)emu.port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    char body[256], req[1024];
    snprintf(body, sizeof body,
             "{\"model\": \"Qwen/Qwen3-8B\", \"prompt\": \"hello\", \"max_tokens\": %d, \"stream\": true, "
             "\"ignore_eos\": true}",
             WANT);
    int n = snprintf(req, sizeof req,
                     "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                     strlen(body), body);
    assert_int_equal(write(fd, req, (size_t)n), n);
    /* not read: the generated count stops short of the answer (bounded polls) */
    double gen = 0, prev = -1, holds = 0;
    int still = 0;
    for (int i = 0; i < 240 && still < 4 && gen < WANT; i++) {
        usleep(250000);
        gen = metric(emu.port, "vllm:generation_tokens_total");
        holds = metric(emu.port, "servetune:emulator_stream_holds_total");
        still = gen == prev && holds >= 1 ? still + 1 : 0;
        prev = gen;
    }
    if (!(holds >= 1 && gen < WANT))
        fail_msg("a client that does not read: %.0f of %d tokens generated, %.0f holds", gen, WANT, holds);
    assert_true(metric(emu.port, "vllm:num_requests_running") == 1);
    /* read: the stream resumes and ends with the whole answer */
    size_t events = 0, got = 0;
    char buf[65536];
    st_ns dl = st_now() + st_s_to_ns(180);
    while (st_now() < dl) {
        struct pollfd pf = { .fd = fd, .events = POLLIN };
        if (poll(&pf, 1, 1000) <= 0)
            continue;
        ssize_t k = read(fd, buf, sizeof buf);
        if (k <= 0)
            break;
        got += (size_t)k;
        for (ssize_t j = 0; j + 5 < k; j++)
            events += !memcmp(buf + j, "\"text\"", 6);
    }
    close(fd);
    /* the events split across reads are not counted; the count of tokens made is exact */
    assert_true(events > WANT * 9 / 10);
    assert_true(metric(emu.port, "vllm:generation_tokens_total") == WANT);
    assert_true(got > (size_t)WANT * 100);
    stop();
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test_teardown(listens_on_loopback_by_default, teardown),
        cmocka_unit_test_teardown(slowloris_is_cut, teardown),
        cmocka_unit_test_teardown(tokenize_answers_a_large_input, teardown),
        cmocka_unit_test_teardown(unread_stream_is_held, teardown),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}
