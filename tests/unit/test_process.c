/* Engine process lifecycle. The test binary doubles as its own child process ("helper mode",
 * argv[1] == "--helper"), so nothing here goes through a shell. */
#include "harness.h"

#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine/process.h"

static char self[4096];
static char logpath[256];

static int helper(int argc, char **argv)
{
    const char *mode = argc > 2 ? argv[2] : "";
    if (!strcmp(mode, "print")) {
        printf("hello from stdout\n");
        fflush(stdout);
        fprintf(stderr, "var=%s\n", getenv("ST_TEST_VAR") ? getenv("ST_TEST_VAR") : "(unset)");
        fprintf(stderr, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n");
        return 3;
    }
    if (!strcmp(mode, "ignore-term")) {
        signal(SIGTERM, SIG_IGN);
        for (int i = 0; i < 600; i++)
            sleep(1);
        return 0;
    }
    if (!strcmp(mode, "orphan")) {
        /* leaves a grandchild in the group and exits */
        pid_t c = fork();
        if (c == 0) {
            for (int i = 0; i < 600; i++)
                sleep(1);
            _exit(0);
        }
        printf("grandchild %d\n", (int)c);
        fflush(stdout);
        return 0;
    }
    if (!strcmp(mode, "print-secret")) {
        /* a secret cut in two writes, then the engine keeps running */
        printf("starting with key sk-se");
        fflush(stdout);
        usleep(300000);
        printf("cret-xyz and more\n");
        fflush(stdout);
        for (int i = 0; i < 600; i++)
            sleep(1);
        return 0;
    }
    if (!strcmp(mode, "escape")) {
        /* a worker that leaves the engine's process group (setsid, as Ray's raylet does) and
         * ignores SIGTERM; the engine itself keeps running */
        pid_t c = fork();
        if (c == 0) {
            setsid();
            signal(SIGTERM, SIG_IGN);
            for (int i = 0; i < 600; i++)
                sleep(1);
            _exit(0);
        }
        printf("worker %d started\n", (int)c);
        fflush(stdout);
        for (int i = 0; i < 600; i++)
            sleep(1);
        return 0;
    }
    if (!strcmp(mode, "sleep")) {
        for (int i = 0; i < 600; i++)
            sleep(1);
        return 0;
    }
    return 99;
}

static int wait_exit(st_proc *p, double secs)
{
    st_ns dl = st_now() + st_s_to_ns(secs);
    while (st_now() < dl) {
        if (!st_proc_alive(p))
            return 1;
        struct timespec ts = { 0, 10000000 };
        nanosleep(&ts, NULL);
    }
    return 0;
}

static void start_capture_and_classify(void **state)
{
    (void)state;
    snprintf(logpath, sizeof logpath, "/tmp/st_proc_test_%d.log", (int)getpid());
    unlink(logpath);
    char *argv[] = { self, "--helper", "print", NULL };
    const char *k[] = { "ST_TEST_VAR" }, *v[] = { "${HOME}-x" };
    st_proc_opts o = { .argv = argv, .env_key = k, .env_val = v, .n_env = 1, .log_path = logpath };
    st_proc p;
    char err[256];
    assert_int_equal(st_proc_start(&p, &o, err, sizeof err), 0);
    assert_true(wait_exit(&p, 10));
    assert_true(WIFEXITED(p.wstatus));
    assert_int_equal(WEXITSTATUS(p.wstatus), 3);
    char *tail;
    assert_int_equal(st_proc_log_tail(logpath, 4096, 10, &tail), 0);
    assert_non_null(strstr(tail, "hello from stdout"));
    char want[512];
    snprintf(want, sizeof want, "var=%s-x", getenv("HOME"));
    assert_non_null(strstr(tail, want));
    char detail[512];
    assert_int_equal(st_proc_classify(tail, 1, p.wstatus, 0, detail, sizeof detail), ST_FAIL_OOM);
    assert_non_null(strstr(detail, "CUDA out of memory"));
    free(tail);
    /* last 1 line only */
    assert_int_equal(st_proc_log_tail(logpath, 4096, 1, &tail), 0);
    assert_null(strstr(tail, "hello"));
    assert_non_null(strstr(tail, "OutOfMemoryError"));
    free(tail);
    assert_int_equal(st_proc_stop(&p, 1), 0);
    unlink(logpath);
}

static void stop_escalates_to_sigkill_and_reaps_grandchildren(void **state)
{
    (void)state;
    char *argv[] = { self, "--helper", "ignore-term", NULL };
    st_proc_opts o = { .argv = argv };
    st_proc p;
    char err[256];
    assert_int_equal(st_proc_start(&p, &o, err, sizeof err), 0);
    struct timespec ts = { 0, 200000000 };
    nanosleep(&ts, NULL);
    assert_int_equal(st_proc_alive(&p), 1);
    st_ns t0 = st_now();
    assert_int_equal(st_proc_stop(&p, 0.5), 0);
    double took = st_ns_to_s(st_now() - t0);
    assert_true(took >= 0.45 && took < 5);
    assert_int_equal(p.exited, 1);
    assert_true(WIFSIGNALED(p.wstatus) && WTERMSIG(p.wstatus) == SIGKILL);
    assert_int_equal(kill(-p.pid, 0), -1);
    assert_int_equal(errno, ESRCH);
    char d[128];
    st_proc_describe(&p, d, sizeof d);
    assert_non_null(strstr(d, "signal 9"));

    /* the leader exits leaving a grandchild in its group: stop kills and reaps it */
    snprintf(logpath, sizeof logpath, "/tmp/st_proc_test_o%d.log", (int)getpid());
    unlink(logpath);
    char *argv2[] = { self, "--helper", "orphan", NULL };
    st_proc_opts o2 = { .argv = argv2, .log_path = logpath };
    assert_int_equal(st_proc_start(&p, &o2, err, sizeof err), 0);
    assert_true(wait_exit(&p, 10));
    assert_int_equal(kill(-p.pid, 0), 0); /* the grandchild is still there */
    assert_int_equal(st_proc_stop(&p, 2), 0);
    assert_int_equal(kill(-p.pid, 0), -1);
    assert_int_equal(errno, ESRCH);
    char *tail;
    assert_int_equal(st_proc_log_tail(logpath, 4096, 5, &tail), 0);
    int gc = 0;
    assert_int_equal(sscanf(tail, "grandchild %d", &gc), 1);
    assert_int_equal(kill(gc, 0), -1); /* gone, and reaped (no zombie) */
    free(tail);
    unlink(logpath);

    /* a plain sleeper stops on SIGTERM quickly; stop twice is harmless */
    char *argv3[] = { self, "--helper", "sleep", NULL };
    st_proc_opts o3 = { .argv = argv3 };
    assert_int_equal(st_proc_start(&p, &o3, err, sizeof err), 0);
    t0 = st_now();
    assert_int_equal(st_proc_stop(&p, 5), 0);
    assert_true(st_ns_to_s(st_now() - t0) < 2);
    assert_true(WIFSIGNALED(p.wstatus) && WTERMSIG(p.wstatus) == SIGTERM);
    assert_int_equal(st_proc_stop(&p, 5), 0);
}

static void exec_failure_and_unset_variable(void **state)
{
    (void)state;
    char *argv[] = { "/nonexistent/engine-binary", NULL };
    st_proc_opts o = { .argv = argv };
    st_proc p;
    char err[256] = "";
    assert_int_equal(st_proc_start(&p, &o, err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot start '/nonexistent/engine-binary'"));
    char *argv2[] = { self, "--helper", "sleep", NULL };
    const char *k[] = { "X" }, *v[] = { "${ST_SURELY_UNSET_VARIABLE_42}" };
    st_proc_opts o2 = { .argv = argv2, .env_key = k, .env_val = v, .n_env = 1 };
    assert_int_equal(st_proc_start(&p, &o2, err, sizeof err), -1);
    assert_non_null(strstr(err, "ST_SURELY_UNSET_VARIABLE_42 is not set"));
}

static void classify_table(void **state)
{
    (void)state;
    char d[ST_PROC_DETAIL_MAX];
    int exit1 = 1 << 8, exit2 = 2 << 8, sig11 = 11;
    struct {
        const char *log;
        int exited, ws, to;
        st_fail_class want;
        const char *detail;
    } c[] = {
        { "INFO start\nValueError: To serve at least one request with the model's max seq len (32000), (4.9 GiB KV "
          "cache "
          "is needed, which is larger than the available KV cache memory (4.45 GiB).\n",
          1, exit1, 0, ST_FAIL_OOM, "ValueError: To serve" },
        /* vLLM's longest refusal is kept whole: its end says what would fit */
        { "ValueError: To serve at least one request with the models's max seq len (131072), (20.00 GiB KV cache is "
          "needed, which is larger than the available KV cache memory (0.30 GiB). Based on the available memory, the "
          "estimated maximum model length is 1952. Try increasing `gpu_memory_utilization` or decreasing "
          "`max_model_len` when initializing the engine.\n",
          1, exit1, 0, ST_FAIL_OOM, "decreasing `max_model_len` when initializing the engine." },
        { "usage: vllm serve\nvllm serve: error: unrecognized arguments: --bogus\n", 1, exit2, 0, ST_FAIL_BAD_FLAG,
          "unrecognized arguments: --bogus" },
        { "api_server.py: error: argument --max-num-seqs: invalid int value: 'x'\n", 1, exit2, 0, ST_FAIL_BAD_FLAG,
          "invalid int" },
        { "vllm serve: error: --max-num-seqs: expected an integer, got 'lots'\n", 1, exit2, 0, ST_FAIL_BAD_FLAG,
          "expected an integer" },
        { "OSError: [Errno 98] Address already in use\n", 1, exit1, 0, ST_FAIL_PORT_TAKEN, "Errno 98" },
        /* vLLM's configuration refusals (the emulator prints the same lines) */
        { "ERROR EngineCore failed to start.\nValueError: Total number of attention heads (32) must be divisible by "
          "tensor parallel size (3).\nRuntimeError: Engine core initialization failed. See root cause above.\n",
          1, exit1, 0, ST_FAIL_BAD_FLAG, "tensor parallel size (3)" },
        { "ValueError: max_num_batched_tokens (16) must be greater than or equal to max_num_seqs (64).\n", 1, exit1, 0,
          ST_FAIL_BAD_FLAG, "max_num_seqs (64)" },
        { "ERROR ValueError: Quantization method specified in the model config (awq) does not match the "
          "quantization method specified in the `quantization` argument (gptq).\n",
          1, exit1, 0, ST_FAIL_BAD_FLAG, "(gptq)" },
        /* any other exception: its message, not only the status */
        { "ValueError: something else went wrong\nRuntimeError: Engine core initialization failed. See root cause "
          "above.\n",
          1, exit1, 0, ST_FAIL_CRASH, "exit status 1: ValueError: something else went wrong" },
        { "loading\n", 1, sig11, 0, ST_FAIL_CRASH, "signal 11" },
        { "loading\n", 1, exit1, 0, ST_FAIL_CRASH, "exit status 1" },
        { "loading\n", 0, 0, 1, ST_FAIL_TIMEOUT, "startup timeout" },
        { "", 1, 127 << 8, 0, ST_FAIL_EXEC, "127" },
        { "loading\n", 0, 0, 0, ST_FAIL_NONE, "" },
        { "OSError: Qwen/Qwen3-8X is not a local folder and is not a valid model identifier listed on "
          "'https://huggingface.co/models'\n",
          1, exit1, 0, ST_FAIL_BAD_MODEL, "Qwen3-8X" },
        /* llama-server's own lines (llama.cpp of node-llama-cpp 3.22.1) */
        { "0.00.011.456 E llama_model_load: error loading model: tensor 'token_embd.weight' data is not within the "
          "file bounds, model is corrupted or incomplete\n0.00.011.472 E llama_model_load_from_file_impl: failed to "
          "load model\n0.00.011.829 E srv  llama_server: exiting due to model loading error\n",
          1, exit1, 0, ST_FAIL_BAD_MODEL, "not within the file bounds" },
        { "0.00.003.854 E srv         start: couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 18081\n"
          "0.00.003.893 E srv  llama_server: exiting due to HTTP server error\n",
          1, exit1, 0, ST_FAIL_PORT_TAKEN, "port: 18081" },
        { "error: invalid argument: --bogus-flag\n", 1, exit1, 0, ST_FAIL_BAD_FLAG, "--bogus-flag" },
        { "Error while handling argument \"-ctk\": Unsupported cache type: q9_9\n\nusage:\n", 1, exit1, 0,
          ST_FAIL_BAD_FLAG, "q9_9" },
        { "E llama_init_from_model: failed to initialize the context: failed to allocate buffer for kv cache\n"
          "E srv    load_model: failed to create_context with model 'm.gguf'\n"
          "E srv  llama_server: exiting due to model loading error\n",
          1, exit1, 0, ST_FAIL_OOM, "kv cache" },
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        st_fail_class got = st_proc_classify(c[i].log, c[i].exited, c[i].ws, c[i].to, d, sizeof d);
        if (got != c[i].want)
            fail_msg("case %zu: %s, want %s", i, st_fail_class_name(got), st_fail_class_name(c[i].want));
        if (!strstr(d, c[i].detail))
            fail_msg("case %zu: detail '%s' lacks '%s'", i, d, c[i].detail);
    }
    assert_string_equal(st_fail_class_name(ST_FAIL_OOM), "oom");
    assert_string_equal(st_fail_class_name(ST_FAIL_BAD_MODEL), "bad_model");
}

static void ports(void **state)
{
    (void)state;
    int port = st_proc_port_pick();
    assert_true(port > 0);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 4), 0);
    assert_int_equal(st_proc_port_free(port), 0);
    close(fd);
    assert_int_equal(st_proc_port_free(port), 1);

    /* an earlier engine's connection left in TIME_WAIT on the port (the server closed first, as an
     * engine that stops does) does not make it taken: engines bind with SO_REUSEADDR too */
    port = st_proc_port_pick();
    fd = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    a.sin_port = htons((uint16_t)port);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 4), 0);
    int c = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(connect(c, (struct sockaddr *)&a, sizeof a), 0);
    int sv = accept(fd, NULL, NULL);
    assert_true(sv >= 0);
    close(sv); /* the server's side closes first: it is the one left in TIME_WAIT */
    char b[4];
    assert_int_equal(recv(c, b, sizeof b, 0), 0);
    close(c);
    close(fd);
    assert_int_equal(st_proc_port_free(port), 1);
}

static void redact_and_expand(void **state)
{
    (void)state;
    st_secrets sec = { 0 };
    assert_int_equal(st_secrets_add(&sec, "sk-secret"), 0);
    assert_int_equal(st_secrets_add(&sec, "*"), -1); /* too short to tell from text */
    char t[] = "args: {'api_key': 'sk-secret'} and sk-secret again";
    st_secrets_redact(&sec, t);
    assert_string_equal(t, "args: {'api_key': '***'} and *** again");
    st_secrets_free(&sec);
    char out[64], err[128];
    setenv("ST_T_A", "xyz", 1);
    assert_int_equal(st_proc_env_expand("pre-${ST_T_A}-post", out, sizeof out, err, sizeof err), 0);
    assert_string_equal(out, "pre-xyz-post");
    assert_int_equal(st_proc_env_expand("${ST_T_A", out, sizeof out, err, sizeof err), -1);
}

/* With redact, the engine's output reaches the log with the secret already removed, while the
 * engine runs (a secret cut across two writes included): nothing waits for the engine to stop. */
static void log_is_redacted_as_written(void **state)
{
    (void)state;
    snprintf(logpath, sizeof logpath, "/tmp/st_proc_test_r%d.log", (int)getpid());
    unlink(logpath);
    st_secrets sec = { 0 };
    assert_int_equal(st_secrets_add(&sec, "sk-secret-xyz"), 0);
    char *argv[] = { self, "--helper", "print-secret", NULL };
    st_proc_opts o = { .argv = argv, .log_path = logpath, .redact = &sec };
    st_proc p;
    char err[256];
    assert_int_equal(st_proc_start(&p, &o, err, sizeof err), 0);
    st_secrets_free(&sec); /* copied */
    st_ns dl = st_now() + st_s_to_ns(10);
    char *tail = NULL;
    int seen = 0;
    while (!seen && st_now() < dl) {
        free(tail);
        tail = NULL;
        if (st_proc_log_tail(logpath, 4096, 10, &tail) == 0) {
            assert_null(strstr(tail, "sk-se")); /* not even the first half */
            seen = strstr(tail, "starting with key *** and more") != NULL;
        }
        struct timespec ts = { 0, 20000000 };
        nanosleep(&ts, NULL);
    }
    free(tail);
    assert_true(seen);
    assert_int_equal(st_proc_alive(&p), 1);
    assert_int_equal(st_proc_stop(&p, 1), 0);
    unlink(logpath);
}

/* The engine and its children carry the tag; st_proc_kill_tagged finds and stops them. */
static void tagged_processes_are_found_and_stopped(void **state)
{
    (void)state;
    char tag[64];
    snprintf(tag, sizeof tag, "st-unit-%d", (int)getpid());
    char *argv[] = { self, "--helper", "sleep", NULL };
    st_proc_opts o = { .argv = argv, .tag = tag };
    st_proc p;
    char err[256];
    assert_int_equal(st_proc_start(&p, &o, err, sizeof err), 0);
    st_ns dl = st_now() + st_s_to_ns(5);
    while (st_proc_count_tagged(tag) < 1 && st_now() < dl) {
        struct timespec ts = { 0, 10000000 };
        nanosleep(&ts, NULL);
    }
    assert_int_equal(st_proc_count_tagged(tag), 1);
    assert_int_equal(st_proc_count_tagged("st-nobody"), 0);
    assert_int_equal(st_proc_kill_tagged(tag, 2), 1);
    assert_true(wait_exit(&p, 5));
    assert_true(WIFSIGNALED(p.wstatus) && WTERMSIG(p.wstatus) == SIGTERM);
    assert_int_equal(st_proc_count_tagged(tag), 0);
    char d[64];
    assert_int_equal(st_proc_dir_tag("/tmp", d, sizeof d), 0);
    char d2[64];
    assert_int_equal(st_proc_dir_tag("/tmp/../tmp/", d2, sizeof d2), 0);
    assert_string_equal(d, d2); /* the folder's real path */
    assert_int_equal(st_proc_dir_tag("/nonexistent/x", d2, sizeof d2), -1);
}

/* A worker that left the engine's process group (setsid) and ignores SIGTERM is stopped with the
 * engine: st_proc_stop leaves no process carrying the tag, whatever its group. */
static void stop_ends_workers_outside_the_group(void **state)
{
    (void)state;
    char tag[64];
    snprintf(tag, sizeof tag, "st-unit-esc-%d", (int)getpid());
    snprintf(logpath, sizeof logpath, "/tmp/st_proc_test_e%d.log", (int)getpid());
    unlink(logpath);
    char *argv[] = { self, "--helper", "escape", NULL };
    st_proc_opts o = { .argv = argv, .tag = tag, .log_path = logpath };
    st_proc p;
    char err[256];
    assert_int_equal(st_proc_start(&p, &o, err, sizeof err), 0);
    st_ns dl = st_now() + st_s_to_ns(10);
    int worker = 0;
    while (!worker && st_now() < dl) { /* the engine prints its worker's pid once it forked it */
        char *tail = NULL;
        const char *w = st_proc_log_tail(logpath, 4096, 10, &tail) == 0 ? strstr(tail, "worker ") : NULL;
        if (w && strstr(w, " started"))
            worker = atoi(w + 7);
        free(tail);
        struct timespec ts = { 0, 10000000 };
        nanosleep(&ts, NULL);
    }
    assert_true(worker > 0);
    dl = st_now() + st_s_to_ns(10);
    while (st_proc_count_tagged(tag) < 2 && st_now() < dl) { /* the engine and its worker */
        struct timespec ts = { 0, 10000000 };
        nanosleep(&ts, NULL);
    }
    assert_int_equal(st_proc_count_tagged(tag), 2);
    assert_int_not_equal(getpgid(worker), p.pid); /* it did leave the group */
    assert_int_equal(st_proc_stop(&p, 0.5), 0);
    assert_int_equal(st_proc_count_tagged(tag), 0);
    /* gone, and reaped (it became our child when the engine died: no zombie is left either) */
    assert_true(kill(worker, 0) < 0 && errno == ESRCH);
    unlink(logpath);
}

/* Two engines of one audit folder (the array tasks of a cluster audit on one node) carry the
 * same tag: stopping one leaves the other running. */
static void stop_spares_another_launch_of_the_tag(void **state)
{
    (void)state;
    char tag[64];
    snprintf(tag, sizeof tag, "st-unit-two-%d", (int)getpid());
    char *argv[] = { self, "--helper", "sleep", NULL };
    st_proc_opts o = { .argv = argv, .tag = tag };
    st_proc a, b;
    char err[256];
    assert_int_equal(st_proc_start(&a, &o, err, sizeof err), 0);
    assert_int_equal(st_proc_start(&b, &o, err, sizeof err), 0);
    assert_string_not_equal(a.launch, b.launch);
    st_ns dl = st_now() + st_s_to_ns(5);
    while (st_proc_count_tagged(tag) < 2 && st_now() < dl) {
        struct timespec ts = { 0, 10000000 };
        nanosleep(&ts, NULL);
    }
    assert_int_equal(st_proc_count_tagged(tag), 2);
    assert_int_equal(st_proc_stop(&a, 1), 0);
    assert_int_equal(st_proc_alive(&b), 1);
    assert_int_equal(st_proc_count_tagged(tag), 1);
    assert_int_equal(st_proc_stop(&b, 1), 0);
    assert_int_equal(st_proc_count_tagged(tag), 0);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--helper"))
        return helper(argc, argv);
    ssize_t l = readlink("/proc/self/exe", self, sizeof self - 1);
    if (l <= 0)
        return 1;
    self[l] = '\0';
    const struct CMUnitTest t[] = {
        cmocka_unit_test(start_capture_and_classify),
        cmocka_unit_test(stop_escalates_to_sigkill_and_reaps_grandchildren),
        cmocka_unit_test(exec_failure_and_unset_variable),
        cmocka_unit_test(classify_table),
        cmocka_unit_test(ports),
        cmocka_unit_test(redact_and_expand),
        cmocka_unit_test(log_is_redacted_as_written),
        cmocka_unit_test(tagged_processes_are_found_and_stopped),
        cmocka_unit_test(stop_ends_workers_outside_the_group),
        cmocka_unit_test(stop_spares_another_launch_of_the_tag),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
