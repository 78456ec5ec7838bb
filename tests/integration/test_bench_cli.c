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
    char *bad[] = { "servetune", "bench", "--url", url, "--rate", "-3", NULL };
    assert_int_equal(run_cli(bad, out), 2);
    char *bad2[] = { "servetune", "bench", NULL };
    assert_int_equal(run_cli(bad2, out), 2);
    char *bad3[] = { "servetune", "bench", "--url", "ftp://x", NULL };
    assert_int_equal(run_cli(bad3, out), 2);
    char *bad4[] = { "servetune", "bench", "--url", url, "--api-key-env", "ST_DEFINITELY_UNSET_VAR", NULL };
    assert_int_equal(run_cli(bad4, out), 2);
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

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(no_key_leak_and_json_schema),
        cmocka_unit_test(failures_exit_1_and_usage_exit_2),
        cmocka_unit_test(sigint_keeps_partial_results),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
