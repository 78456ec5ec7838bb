/* Every long-running command ends on SIGTERM while it works, with exit 4 (docs/exit-codes.md)
 * and what it wrote consistent: predict (its partial report and database), plan and calibrate
 * (nothing written, an earlier output left as it was), trace stats reading a pipe that never
 * ends, audit --merge of large shards (rolled back: no results.sqlite) and emulate serve with a
 * request streaming (its normal stop, exit 0). Also the case that spun: a model whose
 * config.json is tiny (1 layer, hidden size 1, vocabulary 1) on an H100 predicts and serves, and
 * a shape that makes no sense is refused by --check and by the emulator at start, naming the
 * field, the value and the range.
 *
 * The wait for each exit is bounded (the test fails past it); how fast the commands stop is
 * measured, not asserted (docs/exit-codes.md gives the figures). */
#include "harness.h"

#define ST_IT_TMP_PREFIX "/tmp/st_stop_it."
#include "audit_util.h"
#include "emu_util.h"

#include <errno.h>
#include <glob.h>
#include <sys/stat.h>

#define STOP_WAIT_S 20.0  /* the most a command may take to exit after SIGTERM here */
#define READY_WAIT_S 90.0 /* the most a command may take to be mid-work */

static long file_size(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 ? (long)st.st_size : -1;
}

/* Whether tmp/servetune.out holds text after offset `from`. */
static int out_has(long from, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/servetune.out", tmp);
    FILE *f = fopen(p, "rb");
    if (!f)
        return 0;
    static char buf[1 << 16];
    fseek(f, from, SEEK_SET);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return strstr(buf, text) != NULL;
}

/* Whether a path matching the pattern exists. */
static int exists(const char *pattern)
{
    glob_t g;
    int found = glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc > 0;
    globfree(&g);
    return found;
}

/* Starts servetune with args; once it is mid-work (ready_file, a glob pattern, exists, or its output shows
 * ready_text), and still so 300 ms later, sends SIGTERM and returns its exit status. The test
 * fails when it ends before (the work is sized to last far longer) or does not end within
 * STOP_WAIT_S. */
static int sigterm_mid_work(const char *const *args, const char *ready_file, const char *ready_text)
{
    char logp[512];
    snprintf(logp, sizeof logp, "%s/servetune.out", tmp);
    long from = file_size(logp);
    if (from < 0)
        from = 0;
    pid_t pid = st_it_spawn(args, NULL);
    st_ns deadline = st_now() + st_s_to_ns(READY_WAIT_S);
    int st = 0;
    for (;;) {
        if (waitpid(pid, &st, WNOHANG) == pid)
            fail_msg("%s ended (status %d) before it was mid-work (see %s)", args[0], st, logp);
        if ((ready_file && exists(ready_file)) || (ready_text && out_has(from, ready_text)))
            break;
        if (st_now() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            fail_msg("%s was not mid-work within %.0f s", args[0], READY_WAIT_S);
        }
        usleep(20000);
    }
    usleep(300000);
    if (waitpid(pid, &st, WNOHANG) == pid)
        fail_msg("%s finished before SIGTERM: its work is sized too small for this test", args[0]);
    st_ns t0 = st_now();
    kill(pid, SIGTERM);
    deadline = t0 + st_s_to_ns(STOP_WAIT_S);
    for (;;) {
        if (waitpid(pid, &st, WNOHANG) == pid)
            break;
        if (st_now() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            fail_msg("%s did not exit within %.0f s of SIGTERM", args[0], STOP_WAIT_S);
        }
        usleep(5000);
    }
    fprintf(stderr, "# %s %s: exit %d %.3f s after SIGTERM\n", args[0], args[1] ? args[1] : "",
            WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), st_ns_to_s(st_now() - t0));
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* A spec on the engine model: `configs` configurations, a sustained search with large windows
 * (long to predict) or a quick burst test. */
static void write_spec(const char *path, int sustained, int requests)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f,
            "engine:\n  kind: emulator\n  model: Qwen/Qwen3-8B\n  flags: [--gpu, H100, --max-model-len, '4096']\n"
            "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.0}\n"
            "peak_rate: 10\n"
            "workload: {input_tokens: 512, output_tokens: 64, requests_per_rate: %d, seed: 3}\n"
            "rates: [8, 16, 32]\nwarmup_requests: 2\n"
            "slo: {ttft_p95_ms: 2500, tpot_p95_ms: 40}\n"
            "configurations:\n"
            "  - name: baseline\n"
            "  - name: seqs-8\n    add_flags: [--max-num-seqs, '8']\n"
            "  - name: fp8-kv\n    add_flags: [--kv-cache-dtype, fp8]\n"
            "  - name: batched-8k\n    add_flags: [--max-num-batched-tokens, '8192']\n"
            "timeouts: {startup: 8s, request: 60s, stop_grace: 2s}\n",
            requests);
    if (sustained)
        fprintf(f, "search: {mode: sustained, min_window: 60s, min_window_requests: 5000, max_duration: 900s, "
                   "max_runs: 12}\n");
    else
        fprintf(f, "search: {mode: burst}\n");
    fclose(f);
}

static int db_int(const char *db, const char *sql)
{
    sqlite3 *d;
    int v = -1;
    if (sqlite3_open_v2(db, &d, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
        return -1;
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(d, sql, -1, &q, NULL) == SQLITE_OK) {
        if (sqlite3_step(q) == SQLITE_ROW)
            v = sqlite3_column_int(q, 0);
        sqlite3_finalize(q);
    }
    sqlite3_close(d);
    return v;
}

static void test_predict_stops(void **state)
{
    (void)state;
    char spec[512], dir[512], db[600];
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    snprintf(dir, sizeof dir, "%s/pred", tmp);
    snprintf(db, sizeof db, "%s/results.sqlite", dir);
    write_spec(spec, 1, 60);
    int rc = sigterm_mid_work((const char *[]){ "predict", spec, "-o", dir, "-q", NULL }, db, NULL);
    assert_int_equal(rc, 4);
    /* the database says the audit ended partial, and the reports were written from it */
    assert_int_equal(db_int(db, "SELECT partial FROM audit"), 1);
    assert_true(db_int(db, "SELECT finished IS NOT NULL FROM audit") == 1);
    assert_int_equal(db_int(db, "PRAGMA integrity_check") == -1, 0);
    json_t *j = load_json(dir);
    assert_true(json_is_true(json_object_get(j, "partial")));
    json_decref(j);
}

static void test_plan_stops(void **state)
{
    (void)state;
    char spec[512], dir[512], pj[600];
    snprintf(spec, sizeof spec, "%s/plan.yaml", tmp);
    snprintf(dir, sizeof dir, "%s/plan-out", tmp);
    snprintf(pj, sizeof pj, "%s/plan.json", dir);
    write_text(spec, "engine:\n  kind: vllm\n  model: Qwen/Qwen3-8B\n  flags: [--max-model-len, '8192']\n"
                     "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.49}\n"
                     "peak_rate: 60\n"
                     "workload: {input_tokens: 3000, output_tokens: 300, range_ratio: 0.1, shared_prefix: 2000, "
                     "requests_per_rate: 400, seed: 1}\n"
                     "rates: [2, 4, 8, 16, 32]\n"
                     "slo: {ttft_p95_ms: 1500, tpot_p95_ms: 50}\n"
                     "plan:\n  gpus: [H100, H100-NVL, H200, A100, L40S, RTX4090]\n  gpus_per_replica: [1, 2, 4]\n"
                     "  checkpoints: {bf16: Qwen/Qwen3-8B, fp8: Qwen/Qwen3-8B-FP8}\n");
    assert_int_equal(mkdir(dir, 0755), 0);
    write_text(pj, "{\"an\": \"earlier plan\"}\n");
    int rc =
        sigterm_mid_work((const char *[]){ "plan", spec, "-o", dir, NULL }, NULL, "candidates on the engine model");
    assert_int_equal(rc, 4);
    assert_string_equal(read_text(pj), "{\"an\": \"earlier plan\"}\n"); /* left as it was */
    char p[700];
    snprintf(p, sizeof p, "%s/plan.md", dir);
    assert_true(file_size(p) < 0);
}

/* A prediction to calibrate from and to split into shards: quick, burst. */
static void quick_prediction(const char *spec, const char *dir, int requests)
{
    write_spec(spec, 0, requests);
    int rc = run_servetune((const char *[]){ "predict", spec, "-o", dir, "-q", NULL }, 300);
    assert_true(rc == 0 || rc == 1);
}

static void test_calibrate_stops(void **state)
{
    (void)state;
    char spec[512], dir[512], out[600];
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    snprintf(dir, sizeof dir, "%s/pred", tmp);
    snprintf(out, sizeof out, "%s/calib.json", tmp);
    quick_prediction(spec, dir, 1500);
    write_text(out, "{\"an\": \"earlier calibration\"}\n");
    int rc = sigterm_mid_work((const char *[]){ "calibrate", dir, "--allow-prediction", "--config",
                                                "baseline,fp8-kv,batched-8k", "-o", out, NULL },
                              NULL, "measured run");
    assert_int_equal(rc, 4);
    assert_string_equal(read_text(out), "{\"an\": \"earlier calibration\"}\n");
}

static void test_trace_stats_stops(void **state)
{
    (void)state;
    char fifo[512];
    snprintf(fifo, sizeof fifo, "%s/trace.fifo", tmp);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    /* opened read-write: servetune's open does not wait for a writer, and the pipe never ends */
    int fd = open(fifo, O_RDWR | O_NONBLOCK);
    assert_true(fd >= 0);
    char line[200];
    for (int i = 0; i < 200; i++) {
        int n =
            snprintf(line, sizeof line, "{\"timestamp\": %d, \"input_length\": 700, \"output_length\": 90}\n", i * 100);
        assert_int_equal(write(fd, line, (size_t)n), n);
    }
    char js[600];
    snprintf(js, sizeof js, "%s/stats.json", tmp);
    char logp[512];
    snprintf(logp, sizeof logp, "%s/servetune.out", tmp);
    /* mid-work: the rows are read and it waits for more; ready once 300 ms passed */
    int rc = sigterm_mid_work((const char *[]){ "trace", "stats", fifo, "--json", js, NULL }, logp, NULL);
    close(fd);
    assert_int_equal(rc, 4);
    assert_true(file_size(js) < 0); /* figures of a part are not written */
}

/* Copies db to dst keeping only configuration name's rows, then doubles its metric samples
 * `doublings` times (a large shard: its merge takes a while). */
static void make_shard(const char *db, const char *dst, const char *name, int doublings)
{
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "cp -- '%s' '%s'", db, dst);
    assert_int_equal(system(cmd), 0);
    sqlite3 *d;
    assert_int_equal(sqlite3_open(dst, &d), SQLITE_OK);
    assert_int_equal(sqlite3_exec(d, "PRAGMA foreign_keys=ON", NULL, NULL, NULL), SQLITE_OK);
    const char *sql[] = { "DELETE FROM runs WHERE config != ?1", "DELETE FROM configs WHERE name != ?1" };
    for (int i = 0; i < 2; i++) {
        sqlite3_stmt *q;
        assert_int_equal(sqlite3_prepare_v2(d, sql[i], -1, &q, NULL), SQLITE_OK);
        sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
        assert_int_equal(sqlite3_step(q), SQLITE_DONE);
        sqlite3_finalize(q);
    }
    assert_int_equal(sqlite3_exec(d, "DELETE FROM meta WHERE key = 'prediction'", NULL, NULL, NULL), SQLITE_OK);
    for (int i = 0; i < doublings; i++)
        assert_int_equal(sqlite3_exec(d, "INSERT INTO metrics SELECT * FROM metrics", NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_exec(d, "PRAGMA journal_mode=DELETE", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(d);
}

static void test_merge_stops(void **state)
{
    (void)state;
    char spec[512], pdir[512], dir[512], shards[600], p[700], db[700];
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    snprintf(pdir, sizeof pdir, "%s/pred", tmp);
    snprintf(dir, sizeof dir, "%s/dist", tmp);
    snprintf(shards, sizeof shards, "%s/shards", dir);
    quick_prediction(spec, pdir, 60);
    assert_int_equal(mkdir(dir, 0755), 0);
    assert_int_equal(mkdir(shards, 0755), 0);
    snprintf(db, sizeof db, "%s/results.sqlite", pdir);
    const char *names[] = { "baseline", "seqs-8", "fp8-kv", "batched-8k" };
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s.sqlite", shards, names[i]);
        make_shard(db, p, names[i], 9);
    }
    snprintf(db, sizeof db, "%s/results.sqlite", dir);
    /* mid-work: the merged database is being written beside DIR/results.sqlite */
    snprintf(p, sizeof p, "%s/.results.sqlite.merge-*", dir);
    int rc = sigterm_mid_work((const char *[]){ "audit", "--merge", dir, NULL }, p, NULL);
    assert_int_equal(rc, 4);
    assert_true(file_size(db) < 0); /* rolled back: no merged database, no half of one */
    assert_false(exists(p));
    snprintf(p, sizeof p, "%s/report.json", dir);
    assert_true(file_size(p) < 0);
}

static void test_emulate_stops_while_streaming(void **state)
{
    (void)state;
    emu_child c;
    assert_int_equal(emu_start(&c, "Qwen/Qwen3-8B", "H100", (const char *[]){ "--time-scale", "1", NULL }, 1), 0);
    /* a request that streams for minutes */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(s >= 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)c.port) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(s, (struct sockaddr *)&a, sizeof a), 0);
    const char *body = "{\"model\": \"Qwen/Qwen3-8B\", \"prompt\": \"hello\", \"max_tokens\": 3000, \"stream\": true, "
                       "\"ignore_eos\": true}";
    char req[600];
    int n = snprintf(req, sizeof req,
                     "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     strlen(body), body);
    assert_int_equal(write(s, req, (size_t)n), n);
    char buf[4096];
    struct pollfd pf = { .fd = s, .events = POLLIN };
    assert_int_equal(poll(&pf, 1, 10000), 1); /* the stream started */
    assert_true(read(s, buf, sizeof buf) > 0);
    st_ns t0 = st_now();
    kill(c.pid, SIGTERM);
    int rc = emu_wait(&c, (int)(STOP_WAIT_S * 1000));
    fprintf(stderr, "# emulate serve: exit %d %.3f s after SIGTERM\n", rc, st_ns_to_s(st_now() - t0));
    assert_int_equal(rc, 0); /* a server's normal stop */
    /* the stream was ended by the server */
    ssize_t r;
    int rounds = 0;
    while ((r = read(s, buf, sizeof buf)) > 0 && rounds++ < 1000)
        ;
    assert_true(r == 0 || (r < 0 && errno == ECONNRESET));
    close(s);
    emu_stop(&c);
}

static void test_tiny_model(void **state)
{
    (void)state;
    char mdir[512], cfg[600], spec[600], dir[600];
    snprintf(mdir, sizeof mdir, "%s/tiny", tmp);
    assert_int_equal(mkdir(mdir, 0755), 0);
    snprintf(cfg, sizeof cfg, "%s/config.json", mdir);
    write_text(cfg, "{\"num_hidden_layers\": 1, \"hidden_size\": 1, \"num_attention_heads\": 1, \"vocab_size\": 1}\n");
    snprintf(spec, sizeof spec, "%s/tiny.yaml", tmp);
    FILE *f = fopen(spec, "w");
    assert_non_null(f);
    fprintf(f,
            "engine:\n  kind: emulator\n  model: %s\n  flags: [--gpu, H100]\n"
            "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.0}\n"
            "peak_rate: 10\nworkload: {input_tokens: 64, output_tokens: 8, requests_per_rate: 20, seed: 3}\n"
            "rates: [4, 8]\nslo: {ttft_p95_ms: 2500, tpot_p95_ms: 20}\n"
            "configurations:\n  - name: baseline\nsearch: {mode: burst}\n",
            mdir);
    fclose(f);
    snprintf(dir, sizeof dir, "%s/pred", tmp);
    /* it ends (the block pool no longer spins): its requests are refused (token ids beyond a
     * vocabulary of 1), so exit 1 with a report */
    int rc = run_servetune((const char *[]){ "predict", spec, "-o", dir, "-q", NULL }, 120);
    assert_true(rc == 0 || rc == 1);
    json_decref(load_json(dir));
    /* the emulator starts on it, and stops */
    emu_child c;
    assert_int_equal(emu_start(&c, mdir, "H100", NULL, 1), 0);
    emu_stop(&c);
    /* a shape that makes no sense: refused by --check and by the emulator at start */
    write_text(cfg, "{\"num_hidden_layers\": 0, \"hidden_size\": 1, \"num_attention_heads\": 1, \"vocab_size\": 1}\n");
    char logp[512];
    snprintf(logp, sizeof logp, "%s/servetune.out", tmp);
    long from = file_size(logp);
    rc = run_servetune((const char *[]){ "audit", "--check", spec, NULL }, 60);
    assert_int_equal(rc, 2);
    assert_true(out_has(from < 0 ? 0 : from, "num_hidden_layers is 0, expected an integer in [1, 4096]"));
    /* the same for a vLLM spec serving the local folder */
    char vspec[700];
    snprintf(vspec, sizeof vspec, "%s/vllm.yaml", tmp);
    f = fopen(vspec, "w");
    assert_non_null(f);
    fprintf(f,
            "engine:\n  kind: vllm\n  model: %s\n  command: [/bin/true]\n"
            "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.0}\n"
            "peak_rate: 10\nworkload: {input_tokens: 64, output_tokens: 8, requests_per_rate: 20, seed: 3}\n"
            "rates: [4, 8]\nslo: {ttft_p95_ms: 2500, tpot_p95_ms: 20}\n"
            "configurations:\n  - name: baseline\nsearch: {mode: burst}\n",
            mdir);
    fclose(f);
    from = file_size(logp);
    rc = run_servetune((const char *[]){ "audit", "--check", vspec, NULL }, 60);
    assert_int_equal(rc, 2);
    assert_true(out_has(from < 0 ? 0 : from, "num_hidden_layers is 0, expected an integer in [1, 4096]"));
    assert_int_equal(emu_start(&c, mdir, "H100", NULL, 0), 0);
    assert_int_equal(emu_wait(&c, 10000), 1);
    char log[8192];
    emu_log(&c, log, sizeof log);
    assert_non_null(strstr(log, "num_hidden_layers is 0, expected an integer in [1, 4096]"));
    emu_stop(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_tiny_model, setup, teardown),
        cmocka_unit_test_setup_teardown(test_predict_stops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plan_stops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_calibrate_stops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trace_stats_stops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_merge_stops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_emulate_stops_while_streaming, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
