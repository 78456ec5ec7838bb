/* servetune bench as a child process against the in-process mock server: the API key is
 * sent to the server but never appears in stdout, stderr, JSON or CSV; exit codes; the JSON
 * document has the schema and every record; bad arguments exit 2. */
#include "harness.h"

#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mock_server.h"

#define SECRET "sk-TEST-7f3a9c1e5b-SECRET"

/* Runs the binary with args; stdout+stderr to outpath. With sigint_ms > 0, sends SIGINT
 * that long after the start. Returns the exit status (bounded in time). */
static int run_cli_sig(char *const argv[], const char *outpath, int sigint_ms)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(outpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 1);
        dup2(fd, 2);
        setenv("ST_TEST_KEY", SECRET, 1);
        execv(st_test_bin(), argv);
        _exit(127);
    }
    int status = 0;
    for (int i = 0; i < 6000; i++) { /* 60 s at most */
        if (sigint_ms > 0 && i == sigint_ms / 10)
            kill(pid, SIGINT);
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    fail_msg("servetune bench did not finish");
    return -1;
}

static int run_cli(char *const argv[], const char *outpath) { return run_cli_sig(argv, outpath, 0); }

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    size_t got = fread(b, 1, (size_t)n, f);
    b[got] = '\0';
    fclose(f);
    return b;
}

static void no_key_leak_and_json_schema(void **state)
{
    (void)state;
    mock *m = mock_start();
    mock_run(m);
    char url[128], dir[] = "/tmp/st-bench-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char out[256], js[256], csv[256];
    snprintf(out, sizeof out, "%s/out.txt", dir);
    snprintf(js, sizeof js, "%s/r.json", dir);
    snprintf(csv, sizeof csv, "%s/r.csv", dir);
    snprintf(url, sizeof url, "http://127.0.0.1:%u/ok", mock_port(m));
    /* no --model: it comes from GET /v1/models (with the key) */
    char *argv[] = { "servetune",
                     "bench",
                     "--url",
                     url,
                     "--api-key-env",
                     "ST_TEST_KEY",
                     "--num-requests",
                     "12",
                     "--warmup",
                     "2",
                     "--rate",
                     "200",
                     "--input-tokens",
                     "64",
                     "--output-tokens",
                     "4",
                     "--json",
                     js,
                     "--csv",
                     csv,
                     "--slo-ttft",
                     "1000",
                     NULL };
    int rc = run_cli(argv, out);
    char *o = slurp(out), *j = slurp(js), *c = slurp(csv);
    assert_non_null(o);
    assert_non_null(j);
    assert_non_null(c);
    if (rc != 0)
        fail_msg("exit %d, output:\n%s", rc, o);
    /* the key reached the server... */
    assert_string_equal(m->last_auth, "Bearer " SECRET);
    /* ...and nowhere else */
    assert_null(strstr(o, SECRET));
    assert_null(strstr(j, SECRET));
    assert_null(strstr(c, SECRET));
    assert_null(strstr(o, "7f3a9c1e5b"));
    assert_non_null(strstr(o, "TTFT"));
    assert_non_null(strstr(o, "self-check"));
    json_error_t je;
    json_t *root = json_loads(j, 0, &je);
    if (!root)
        fail_msg("JSON: %s (line %d)", je.text, je.line);
    assert_string_equal(json_string_value(json_object_get(root, "schema")), "servetune.bench/1");
    assert_string_equal(json_string_value(json_object_get(json_object_get(root, "config"), "model")), "mock-model");
    json_t *reqs = json_object_get(root, "records");
    assert_int_equal(json_array_size(reqs), 14);
    json_t *sum = json_object_get(root, "summary");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(sum, "requests"), "measured")), 12);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(sum, "requests"), "completed")), 12);
    assert_int_equal(json_integer_value(json_object_get(sum, "good")), 12);
    assert_true(json_is_true(json_object_get(json_array_get(reqs, 0), "warmup")));
    assert_int_equal(json_array_size(json_object_get(json_array_get(reqs, 5), "event_times_ns")), 4);
    assert_true(json_integer_value(json_object_get(root, "t0_mono_ns")) > 0);
    assert_true(json_is_false(json_object_get(json_object_get(root, "self_check"), "client_limited")));
    json_decref(root);
    /* CSV: header + 14 rows */
    int lines = 0;
    for (char *p = c; *p; p++)
        lines += *p == '\n';
    assert_int_equal(lines, 15);
    free(o);
    free(j);
    free(c);
    unlink(out);
    unlink(js);
    unlink(csv);
    rmdir(dir);
    mock_stop(m);
}

static void failures_exit_1_and_usage_exit_2(void **state)
{
    (void)state;
    mock *m = mock_start();
    mock_run(m);
    char url[128], out[] = "/tmp/st-bench-out-XXXXXX";
    int fd = mkstemp(out);
    close(fd);
    snprintf(url, sizeof url, "http://127.0.0.1:%u/status500", mock_port(m));
    char *argv[] = { "servetune",      "bench", "--url",         url,           "--model", "x",
                     "--num-requests", "3",     "--api-key-env", "ST_TEST_KEY", NULL };
    int rc = run_cli(argv, out);
    char *o = slurp(out);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(o, "http_status"));
    assert_null(strstr(o, SECRET));
    free(o);
    /* with -q too, the failure is said on stderr in the server's words, not only in the JSON */
    char *quiet[] = { "servetune", "bench", "--url", url, "--model", "x", "--num-requests", "3", "-q", NULL };
    assert_int_equal(run_cli(quiet, out), 1);
    o = slurp(out);
    assert_non_null(strstr(o, "servetune bench: 3 of 3 requests failed (http_status 3); the first (request 0): "
                              "HTTP 500: boom: the engine fell over"));
    free(o);
    char *bad[] = { "servetune", "bench", "--url", url, "--rate", "-3", NULL };
    assert_int_equal(run_cli(bad, out), 2);
    char *bad2[] = { "servetune", "bench", NULL };
    assert_int_equal(run_cli(bad2, out), 2);
    char *bad3[] = { "servetune", "bench", "--url", "ftp://x", NULL };
    assert_int_equal(run_cli(bad3, out), 2);
    char *bad4[] = { "servetune", "bench", "--url", url, "--api-key-env", "ST_DEFINITELY_UNSET_VAR", NULL };
    assert_int_equal(run_cli(bad4, out), 2);
    /* options that cannot mean anything together: refused, not silently ignored */
    char *bad5[] = { "servetune", "bench", "--url", url, "--no-stream", "--slo-tpot", "50", NULL };
    assert_int_equal(run_cli(bad5, out), 2);
    o = slurp(out);
    assert_non_null(strstr(o, "no TPOT"));
    free(o);
    char *bad6[] = { "servetune", "bench", "--url", url, "--sessions", "2", "-n", "3", NULL };
    assert_int_equal(run_cli(bad6, out), 2);
    char *bad7[] = { "servetune", "bench", "--url", url, "--timeout", "0", NULL };
    assert_int_equal(run_cli(bad7, out), 2);
    char *help[] = { "servetune", "bench", "--help", NULL };
    assert_int_equal(run_cli(help, out), 0);
    o = slurp(out);
    assert_non_null(strstr(o, "--max-concurrency"));
    free(o);
    unlink(out);
    mock_stop(m);
}

/* SIGINT mid-run: exit 4, partial results still written, unfinished requests "aborted". */
static void sigint_keeps_partial_results(void **state)
{
    (void)state;
    mock *m = mock_start();
    mock_run(m);
    char url[128], out[] = "/tmp/st-bench-int-XXXXXX", js[64];
    int fd = mkstemp(out);
    close(fd);
    snprintf(js, sizeof js, "%s.json", out);
    snprintf(url, sizeof url, "http://127.0.0.1:%u/stall", mock_port(m));
    char *argv[] = { "servetune", "bench",     "--url", url,      "--model", "x", "--num-requests",
                     "4",         "--timeout", "60",    "--json", js,        NULL };
    int rc = run_cli_sig(argv, out, 400);
    assert_int_equal(rc, 4);
    char *j = slurp(js);
    assert_non_null(j);
    json_error_t je;
    json_t *root = json_loads(j, 0, &je);
    assert_non_null(root);
    json_t *reqs = json_object_get(root, "records");
    assert_int_equal(json_array_size(reqs), 4);
    for (size_t i = 0; i < 4; i++)
        assert_string_equal(json_string_value(json_object_get(json_array_get(reqs, i), "status")), "aborted");
    assert_true(json_is_true(json_object_get(json_object_get(root, "self_check"), "interrupted")));
    json_decref(root);
    free(j);
    unlink(js);
    unlink(out);
    mock_stop(m);
}

#define SECRET2 "xk-HEADER-91c44e0a2f"

/* bench against the mock in mode `mode`, --json and --csv into a temporary folder; returns the
 * exit status and fills the three outputs (malloc'd). */
static int bench_mode(mock *m, const char *mode, const char *const *extra, char **o, char **j, char **c)
{
    char url[128], dir[] = "/tmp/st-bench-h-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char out[256], js[256], csv[256];
    snprintf(out, sizeof out, "%s/out.txt", dir);
    snprintf(js, sizeof js, "%s/r.json", dir);
    snprintf(csv, sizeof csv, "%s/r.csv", dir);
    snprintf(url, sizeof url, "http://127.0.0.1:%u/%s", mock_port(m), mode);
    char *argv[40] = { "servetune", "bench", "--url", url, "--model", "x", "--json", js, "--csv", csv, NULL };
    int n = 10;
    for (int i = 0; extra && extra[i] && n < 38; i++)
        argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    int rc = run_cli(argv, out);
    *o = slurp(out);
    *j = slurp(js);
    *c = slurp(csv);
    unlink(out);
    unlink(js);
    unlink(csv);
    rmdir(dir);
    return rc;
}

/* A server that echoes the credentials in an error, with a spreadsheet formula and terminal
 * escapes: the key and a credential header never reach stdout, stderr, JSON or CSV; no escape
 * byte reaches any of them; the CSV field cannot be evaluated. */
static void hostile_error_text_is_contained(void **state)
{
    (void)state;
    mock *m = mock_start();
    mock_run(m);
    char *o, *j, *c;
    const char *extra[] = { "--api-key-env", "ST_TEST_KEY", "-H", "X-Api-Key: " SECRET2, "--num-requests", "3", NULL };
    assert_int_equal(bench_mode(m, "echokey", extra, &o, &j, &c), 1);
    assert_non_null(o);
    assert_non_null(j);
    assert_non_null(c);
    assert_non_null(strstr(m->echo, SECRET)); /* the server did echo them... */
    assert_non_null(strstr(m->echo, SECRET2));
    const char *outs[] = { o, j, c };
    for (int i = 0; i < 3; i++) {
        assert_null(strstr(outs[i], SECRET)); /* ...and no output holds them */
        assert_null(strstr(outs[i], SECRET2));
        assert_null(strchr(outs[i], '\x1b'));
        assert_null(strchr(outs[i], '\x07'));
    }
    assert_non_null(strstr(j, "rejected [Bearer ***] [***]"));
    assert_non_null(strstr(c, ",'=cmd|")); /* shown as text in a spreadsheet */
    assert_null(strstr(c, ",=cmd"));
    free(o);
    free(j);
    free(c);
    mock_stop(m);
}

/* A compressed answer is named as such, not reported as an incomplete stream. */
static void gzip_stream_is_refused_clearly(void **state)
{
    (void)state;
    mock *m = mock_start();
    mock_run(m);
    char *o, *j, *c;
    const char *extra[] = { "--num-requests", "2", NULL };
    assert_int_equal(bench_mode(m, "gzip", extra, &o, &j, &c), 1);
    assert_non_null(strstr(j, "Content-Encoding: gzip"));
    assert_null(strstr(j, "\"incomplete\""));
    free(o);
    free(j);
    free(c);
    mock_stop(m);
}

/* A server that streams token events without end for a 16-token request: the request fails after
 * 2 x 16 + 16 events instead of recording hundreds of thousands. */
static void token_flood_is_bounded(void **state)
{
    (void)state;
    mock *m = mock_start();
    mock_run(m);
    char *o, *j, *c;
    const char *extra[] = { "--num-requests", "1", "--output-tokens", "16", NULL };
    assert_int_equal(bench_mode(m, "flood", extra, &o, &j, &c), 1);
    assert_non_null(strstr(j, "more than 48 token events for a request of 16 output tokens"));
    json_t *root = json_loads(j, 0, NULL);
    assert_non_null(root);
    json_t *ev = json_object_get(json_array_get(json_object_get(root, "records"), 0), "event_times_ns");
    assert_true(json_array_size(ev) <= 48);
    json_decref(root);
    free(o);
    free(j);
    free(c);
    mock_stop(m);
}

/* A file that cannot be written says why, in the system's words. */
static void disk_full_is_named(void **state)
{
    (void)state;
    mock *m = mock_start();
    mock_run(m);
    char url[128], out[] = "/tmp/st-bench-full-XXXXXX";
    int fd = mkstemp(out);
    close(fd);
    snprintf(url, sizeof url, "http://127.0.0.1:%u/ok", mock_port(m));
    char *argv[] = { "servetune", "bench", "--url",  url,         "--model", "x",         "--num-requests",
                     "2",         "-q",    "--json", "/dev/full", "--csv",   "/dev/full", NULL };
    assert_int_equal(run_cli(argv, out), 1);
    char *o = slurp(out);
    assert_non_null(strstr(o, "cannot write /dev/full: No space left on device"));
    assert_null(strstr(o, "Success"));
    free(o);
    unlink(out);
    mock_stop(m);
}

/* --rate inf with --max-concurrency is a fixed-count closed loop (vllm bench serve
 * --max-concurrency C --num-prompts N): each request is timed from its send. Against a server that
 * takes 50 ms to the first token, one client and six requests give a TTFT of about 50 ms each, while
 * an open loop capped at one (a finite rate) counts the wait for the slot (the sixth: ~300 ms).
 * --json into a folder that does not exist yet makes it. */
static void closed_loop_times_from_send(void **state)
{
    (void)state;
    mock *m = mock_start();
    m->slow_ms = 50;
    m->tokens = 1;
    mock_run(m);
    char url[128], dir[] = "/tmp/st-bench-cl-XXXXXX", js[256], out[256], cmd[300];
    assert_non_null(mkdtemp(dir));
    snprintf(url, sizeof url, "http://127.0.0.1:%u/slow", mock_port(m));
    snprintf(out, sizeof out, "%s/out.txt", dir);
    double p95[2];
    for (int k = 0; k < 2; k++) {
        snprintf(js, sizeof js, "%s/new/sub%d/r.json", dir, k);
        char *argv[] = { "servetune",
                         "bench",
                         "--url",
                         url,
                         "--model",
                         "x",
                         "--num-prompts",
                         "6",
                         "--max-concurrency",
                         "1",
                         "--json",
                         js,
                         k ? "--rate" : NULL,
                         "1000",
                         NULL };
        assert_int_equal(run_cli(argv, out), 0);
        char *o = slurp(out);
        assert_non_null(o);
        assert_true((strstr(o, "closed loop: 6 requests, at most 1 in flight") != NULL) == (k == 0));
        free(o);
        json_error_t je;
        json_t *root = json_load_file(js, 0, &je);
        assert_non_null(root);
        json_t *arr = json_object_get(json_object_get(root, "config"), "arrival");
        assert_true(json_is_true(json_object_get(arr, "closed_loop")) == (k == 0));
        json_t *ttft = json_object_get(json_object_get(json_object_get(root, "summary"), "latency_ms"), "ttft");
        p95[k] = json_number_value(json_object_get(ttft, "p95"));
        json_decref(root);
    }
    print_message("# p95 TTFT: closed loop %.0f ms, open loop capped at 1 %.0f ms\n", p95[0], p95[1]);
    assert_true(p95[0] >= 45 && p95[0] < 150);
    assert_true(p95[1] >= 200);
    snprintf(cmd, sizeof cmd, "rm -rf -- '%s'", dir);
    assert_int_equal(system(cmd), 0);
    mock_stop(m);
}

/* A results file that cannot be written is found before the load runs (exit 2, no request sent),
 * not after it, when the run's records would be lost: --csv or --json naming a folder, and --json
 * and --csv naming the same file. */
static void unwritable_results_refused_before_the_run(void **state)
{
    (void)state;
    mock *m = mock_start();
    mock_run(m);
    char url[128], dir[] = "/tmp/st-bench-unw-XXXXXX", out[256], same[256];
    assert_non_null(mkdtemp(dir));
    snprintf(url, sizeof url, "http://127.0.0.1:%u/ok", mock_port(m));
    snprintf(out, sizeof out, "%s/out.txt", dir);
    snprintf(same, sizeof same, "%s/r.out", dir);
    const char *cases[][4] = { { "--csv", dir, NULL, NULL },
                               { "--json", dir, NULL, NULL },
                               { "--json", same, "--csv", same } };
    const char *why[] = { "it is a folder", "it is a folder", "name the same file" };
    for (int i = 0; i < 3; i++) {
        char *argv[16] = { "servetune", "bench", "--url", url, "--model", "x", "--num-requests", "2", "-q" };
        int n = 9;
        for (int k = 0; k < 4 && cases[i][k]; k++)
            argv[n++] = (char *)cases[i][k];
        argv[n] = NULL;
        assert_int_equal(run_cli(argv, out), 2);
        char *o = slurp(out);
        assert_non_null(strstr(o, why[i]));
        free(o);
        assert_int_equal(access(same, F_OK), -1);
    }
    /* --json or --csv naming the trace it replays: refused, the trace left as it was */
    char trace[300];
    snprintf(trace, sizeof trace, "%s/t.jsonl", dir);
    FILE *f = fopen(trace, "w");
    assert_non_null(f);
    fputs("{\"input_tokens\": 8, \"output_tokens\": 2}\n", f);
    fclose(f);
    for (int k = 0; k < 2; k++) {
        char *argv[] = { "servetune", "bench",   "--url", url,  "--model",
                         "x",         "--trace", trace,   "-q", k ? "--csv" : "--json",
                         trace,       NULL };
        assert_int_equal(run_cli(argv, out), 2);
        char *o = slurp(out);
        assert_non_null(strstr(o, "is the trace it replays"));
        free(o);
        o = slurp(trace);
        assert_string_equal(o, "{\"input_tokens\": 8, \"output_tokens\": 2}\n");
        free(o);
    }
    assert_int_equal(atomic_load(&m->requests), 0);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf -- '%s'", dir);
    assert_int_equal(system(cmd), 0);
    mock_stop(m);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(no_key_leak_and_json_schema),
        cmocka_unit_test(failures_exit_1_and_usage_exit_2),
        cmocka_unit_test(sigint_keeps_partial_results),
        cmocka_unit_test(hostile_error_text_is_contained),
        cmocka_unit_test(gzip_stream_is_refused_clearly),
        cmocka_unit_test(token_flood_is_bounded),
        cmocka_unit_test(disk_full_is_named),
        cmocka_unit_test(unwritable_results_refused_before_the_run),
        cmocka_unit_test(closed_loop_times_from_send),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
