/* TLS through OpenSSL against `openssl s_server` on 127.0.0.1 with a fresh self-signed
 * certificate: verification is on by default (fails), passes with the certificate as CA,
 * and --insecure skips it. Skipped when the openssl command is not installed. */
#include "harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "load/runner.h"

static char dir[] = "/tmp/st-tls-XXXXXX";
static char cert[128], key[128];
static pid_t server = -1;
static uint16_t port;

static uint16_t free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET };
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    bind(fd, (struct sockaddr *)&a, sizeof a);
    socklen_t l = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &l);
    close(fd);
    return ntohs(a.sin_port);
}

static int can_connect(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    int ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

static int setup(void **state)
{
    (void)state;
    if (system("command -v openssl >/dev/null 2>&1") != 0)
        return 0; /* tests skip */
    if (!mkdtemp(dir))
        return -1;
    snprintf(cert, sizeof cert, "%s/c.pem", dir);
    snprintf(key, sizeof key, "%s/k.pem", dir);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout %s -out %s -days 1 "
             "-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1",
             key, cert);
    if (system(cmd) != 0)
        return -1;
    port = free_port();
    server = fork();
    if (server == 0) {
        char acc[32];
        snprintf(acc, sizeof acc, "127.0.0.1:%u", port);
        freopen("/dev/null", "w", stdout);
        freopen("/dev/null", "w", stderr);
        execlp("openssl", "openssl", "s_server", "-accept", acc, "-cert", cert, "-key", key, "-www", "-quiet",
               (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 500 && !can_connect(); i++)
        usleep(10000);
    return can_connect() ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    if (server > 0) {
        kill(server, SIGKILL);
        waitpid(server, NULL, 0);
    }
    unlink(cert);
    unlink(key);
    rmdir(dir);
    return 0;
}

static int fetch(int insecure, const char *ca, char *err, size_t errlen)
{
    char url[64];
    snprintf(url, sizeof url, "https://127.0.0.1:%u/", port);
    st_workload w = { .items = NULL, .n = 1 };
    st_ns sched[1] = { 0 };
    st_runner_config cfg = { 0 };
    cfg.url = url;
    cfg.api = ST_RUNNER_API_RAW;
    cfg.work = &w;
    cfg.schedule = sched;
    cfg.timeout_s = 10;
    cfg.insecure = insecure;
    cfg.ca_file = ca;
    st_run_result res;
    if (st_runner_run(&cfg, &res, err, errlen) < 0)
        return -2;
    const st_record *r = &res.records[0];
    int st = (int)r->status;
    snprintf(err, errlen, "%s", r->error ? r->error : "");
    st_run_result_free(&res);
    return st;
}

static void verification_on_by_default(void **state)
{
    (void)state;
    if (server <= 0)
        skip();
    char err[600];
    int st = fetch(0, NULL, err, sizeof err);
    if (st != ST_REQ_TLS)
        fail_msg("status %d (%s), expected tls", st, err);
    assert_non_null(strstr(err, "certificate"));
}

static void trusted_ca_passes(void **state)
{
    (void)state;
    if (server <= 0)
        skip();
    char err[600];
    int st = fetch(0, cert, err, sizeof err);
    if (st != ST_REQ_OK)
        fail_msg("status %d (%s), expected ok", st, err);
}

static void insecure_skips_verification(void **state)
{
    (void)state;
    if (server <= 0)
        skip();
    char err[600];
    int st = fetch(1, NULL, err, sizeof err);
    if (st != ST_REQ_OK)
        fail_msg("status %d (%s), expected ok", st, err);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(verification_on_by_default),
        cmocka_unit_test(trusted_ca_passes),
        cmocka_unit_test(insecure_skips_verification),
    };
    return cmocka_run_group_tests(t, setup, teardown);
}
