/* What the integration tests against a real llama.cpp server share: where the build of
 * scripts/install-llamacpp is, writing a model with `servetune gguf` (and llama-quantize), and
 * starting / stopping llama-server on a free 127.0.0.1 port. Every wait is bounded; every child
 * is stopped (its whole process group) by llama_stop.
 *
 * Without a build the tests skip with the reason, except under SERVETUNE_REQUIRE_LLAMACPP=1
 * (CI builds llama.cpp first), where a missing build fails them. */
#ifndef ST_TEST_LLAMACPP_UTIL_H
#define ST_TEST_LLAMACPP_UTIL_H
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "emu_util.h"
#include "engine/process.h"

extern char **environ;

#define LLAMA_READY_S 60.0      /* a 30M model loads in well under a second; ASan and loaded CPUs */
#define LLAMA_RUN_LIMIT_S 120.0 /* servetune gguf and llama-quantize, each */

/* Runs argv (no shell) with stdout+stderr to log, at most limit_s (then SIGKILL). Exit status,
 * 128+signal, or -1 when it could not start or ran too long. */
static inline int llama_run(char *const argv[], const char *log, double limit_s)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log ? log : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    int e = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (e)
        return -1;
    st_ns deadline = st_now() + st_s_to_ns(limit_s);
    int st;
    while (waitpid(pid, &st, WNOHANG) != pid) {
        if (st_now() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        usleep(10000);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The build folder (holding bin/ and models/), or NULL. $SERVETUNE_LLAMACPP_DIR first, else what
 * `scripts/install-llamacpp --print-dir` says (the tests run from the repository root). */
static inline const char *llamacpp_dir(void)
{
    static char dir[1024];
    const char *e = getenv("SERVETUNE_LLAMACPP_DIR");
    if (e && *e) {
        snprintf(dir, sizeof dir, "%s", e);
    } else {
        char out[] = "/tmp/st_llamacpp_dir.XXXXXX";
        int fd = mkstemp(out);
        if (fd < 0)
            return NULL;
        close(fd);
        char *argv[] = { "scripts/install-llamacpp", "--print-dir", NULL };
        int rc = llama_run(argv, out, 10);
        FILE *f = fopen(out, "r");
        dir[0] = '\0';
        if (f) {
            if (!fgets(dir, sizeof dir, f))
                dir[0] = '\0';
            fclose(f);
        }
        unlink(out);
        dir[strcspn(dir, "\n")] = '\0';
        if (rc != 0)
            return NULL;
    }
    char p[1200];
    snprintf(p, sizeof p, "%s/bin/llama-server", dir);
    if (!dir[0] || access(p, X_OK))
        return NULL;
    return dir;
}

/* Sets dir to the build, or skips the test (fails it under SERVETUNE_REQUIRE_LLAMACPP=1). */
#define LLAMACPP_OR_SKIP(dir)                                                                                          \
    do {                                                                                                               \
        (dir) = llamacpp_dir();                                                                                        \
        if (!(dir)) {                                                                                                  \
            const char *req_ = getenv("SERVETUNE_REQUIRE_LLAMACPP");                                                   \
            if (req_ && !strcmp(req_, "1"))                                                                            \
                fail_msg("no llama.cpp build (scripts/install-llamacpp) and SERVETUNE_REQUIRE_LLAMACPP=1");            \
            print_message("# no llama.cpp build (run scripts/install-llamacpp): skipped\n");                           \
            skip();                                                                                                    \
        }                                                                                                              \
    } while (0)

/* The vocabulary file of an architecture in the build. */
static inline void llama_vocab(const char *dir, const char *arch, char *out, size_t n)
{
    snprintf(out, n, "%s/models/ggml-vocab-%s.gguf", dir, !strcmp(arch, "qwen2") ? "qwen2" : "llama-spm");
}

/* Writes OUT with `servetune gguf --arch ARCH --size SIZE` (extra options after; NULL-terminated),
 * then, with qtype, quantizes it in place with llama-quantize. The test fails on any error. */
static inline void llama_make_model(const char *dir, const char *arch, const char *size, const char *qtype,
                                    const char *out, const char *const *extra)
{
    char vocab[1200], log[1200], f16[1200];
    llama_vocab(dir, arch, vocab, sizeof vocab);
    snprintf(log, sizeof log, "%s.log", out);
    snprintf(f16, sizeof f16, "%s%s", out, qtype ? ".f16" : "");
    char *argv[40] = {
        (char *)st_test_bin(), "gguf", "--arch", (char *)arch, "--size", (char *)size, "--vocab", vocab, "-o", f16, "-q"
    };
    int n = 11;
    for (int i = 0; extra && extra[i] && n < 38; i++)
        argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    int rc = llama_run(argv, log, LLAMA_RUN_LIMIT_S);
    if (rc)
        fail_msg("servetune gguf exited %d (see %s)", rc, log);
    if (qtype) {
        char q[1200];
        snprintf(q, sizeof q, "%s/bin/llama-quantize", dir);
        char *qa[] = { q, f16, (char *)out, (char *)qtype, NULL };
        rc = llama_run(qa, log, LLAMA_RUN_LIMIT_S);
        if (rc)
            fail_msg("llama-quantize %s exited %d (see %s)", qtype, rc, log);
        unlink(f16);
    }
    unlink(log);
}

typedef struct llama_srv {
    st_proc p;
    int port;
    char log[1200];
} llama_srv;

/* Starts DIR/bin/llama-server -m MODEL --host 127.0.0.1 --port P plus extra (NULL-terminated),
 * log in log_dir/llama-server.log. With ready_s > 0 waits that long for /health to answer 200.
 * 0 when started (and ready), -1 otherwise (the log says why; llama_stop cleans up either way). */
static inline int llama_start(llama_srv *s, const char *dir, const char *model, const char *log_dir,
                              const char *const *extra, double ready_s)
{
    memset(s, 0, sizeof *s);
    s->port = free_port();
    snprintf(s->log, sizeof s->log, "%s/llama-server.log", log_dir);
    char bin[1200], port[16];
    snprintf(bin, sizeof bin, "%s/bin/llama-server", dir);
    snprintf(port, sizeof port, "%d", s->port);
    char *argv[64] = { bin, "-m", (char *)model, "--host", "127.0.0.1", "--port", port };
    int n = 7;
    for (int i = 0; extra && extra[i] && n < 62; i++)
        argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    st_proc_opts o = { .argv = argv, .log_path = s->log };
    char err[256];
    if (st_proc_start(&s->p, &o, err, sizeof err)) {
        print_message("# llama-server: %s\n", err);
        return -1;
    }
    if (ready_s <= 0)
        return 0;
    st_ns deadline = st_now() + st_s_to_ns(ready_s);
    while (st_now() < deadline) {
        http_res r;
        int ok = http_do(s->port, "GET", "/health", NULL, NULL, 1000, &r) == 0 && r.status == 200;
        http_res_free(&r);
        if (ok)
            return 0;
        if (!st_proc_alive(&s->p))
            return -1;
        usleep(20000);
    }
    return -1;
}

static inline void llama_stop(llama_srv *s)
{
    if (s->p.pid)
        st_proc_stop(&s->p, 5.0);
}

/* The end of the server's log, for a failure message. */
static inline const char *llama_log_tail(const llama_srv *s)
{
    static char buf[4096];
    char *t = NULL;
    buf[0] = '\0';
    if (st_proc_log_tail(s->log, sizeof buf - 1, 30, &t) == 0) {
        snprintf(buf, sizeof buf, "%s", t);
        free(t);
    }
    return buf;
}

#endif
