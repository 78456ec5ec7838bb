/* servetune against the real llama-server (built by scripts/install-llamacpp) with a model
 * written by `servetune gguf`: readiness while the model loads, streamed completions and chat
 * through `servetune bench` with the server's own timings kept, its /metrics read under the
 * generic names, a model name it does not serve, a port already taken, a corrupt model, SIGTERM,
 * and a short audit of two configurations (plus one that cannot start) with its reports.
 * Without a build the tests skip (they fail under SERVETUNE_REQUIRE_LLAMACPP=1). */
#include "harness.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <sys/socket.h>

#define ST_IT_TMP_PREFIX "/tmp/st_llama_srv_it."
#include "audit_util.h"
#include "llamacpp_util.h"
#include "engine/adapter.h"
#include "engine/metrics.h"
#include "engine/process.h"

#define ALIAS "llama-30m"
#define BENCH_LIMIT_S 120.0
#define AUDIT_LIMIT_S 300.0

/* The 30M Llama model in tmp (written once per test). */
static const char *model(const char *dir)
{
    static char path[600];
    snprintf(path, sizeof path, "%s/llama.gguf", tmp);
    if (access(path, R_OK))
        llama_make_model(dir, "llama", "30M", NULL, path, NULL);
    return path;
}

static void start_ready(llama_srv *s, const char *dir, const char *const *extra)
{
    if (llama_start(s, dir, model(dir), tmp, extra, LLAMA_READY_S)) {
        llama_stop(s);
        fail_msg("llama-server did not become ready:\n%s", llama_log_tail(s));
    }
}

/* /health answers 503 ("Loading model") while the model loads, then 200; the adapter's probe
 * then finds the alias the spec expects in /v1/models. */
static void readiness_while_loading(void **state)
{
    (void)state;
    const char *dir;
    LLAMACPP_OR_SKIP(dir);
    const char *m = model(dir);
    llama_srv s;
    const char *args[] = { "-c", "512", "-np", "1", "-t", "1", "--alias", ALIAS, NULL };
    assert_int_equal(llama_start(&s, dir, m, tmp, args, 0), 0);
    int loading = 0, ready = 0;
    char body503[256] = "";
    st_ns deadline = st_now() + st_s_to_ns(LLAMA_READY_S);
    while (!ready && st_now() < deadline && st_proc_alive(&s.p)) {
        http_res r;
        if (http_do(s.port, "GET", "/health", NULL, NULL, 1000, &r) == 0) {
            if (r.status == 503) {
                if (!loading)
                    snprintf(body503, sizeof body503, "%s", r.body.data);
                loading++;
            } else if (r.status == 200) {
                ready = 1;
            }
        }
        http_res_free(&r);
        usleep(1000);
    }
    if (!ready) {
        llama_stop(&s);
        fail_msg("not ready:\n%s", llama_log_tail(&s));
    }
    if (!loading)
        fail_msg("/health never answered 503 while the model loaded");
    assert_non_null(strstr(body503, "Loading model"));
    st_launch l = { .host = "127.0.0.1",
                    .port = s.port,
                    .expected_model = ALIAS,
                    .health_path = "/health",
                    .models_path = "/v1/models" };
    char d[600];
    assert_int_equal(st_adapter_probe(&l, 5, d, sizeof d), ST_PROBE_READY);
    /* a name it does not serve: another server for the audit (llama-server lists its alias) */
    l.expected_model = "Qwen/Qwen3-8B";
    assert_int_equal(st_adapter_probe(&l, 5, d, sizeof d), ST_PROBE_WRONG_SERVER);
    assert_non_null(strstr(d, ALIAS));
    /* ... while a request naming that model is answered anyway: llama-server serves one model and
     * ignores the request's name (vLLM answers 404), so only the readiness check can catch it */
    http_res r;
    assert_int_equal(http_do(s.port, "POST", "/v1/completions",
                             "{\"model\":\"Qwen/Qwen3-8B\",\"prompt\":[1,2,3],\"max_tokens\":2,\"ignore_eos\":true}",
                             NULL, 30000, &r),
                     0);
    assert_int_equal(r.status, 200);
    http_res_free(&r);
    llama_stop(&s);
}

/* servetune bench against the server on one API: every request completes with exactly the tokens
 * asked for, usage reported, and the server's timings kept per record and summarised. */
static json_t *bench(int port, const char *api, int n, const char *rate)
{
    char url[64], json[600];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    snprintf(json, sizeof json, "%s/bench-%s.json", tmp, api);
    char nbuf[16];
    snprintf(nbuf, sizeof nbuf, "%d", n);
    const char *args[] = { "bench", "--url",           url,  "--api",  api,  "--model", ALIAS, "--input-tokens",
                           "48",    "--output-tokens", "12", "-n",     nbuf, "--rate",  rate,  "--warmup",
                           "1",     "--seed",          "3",  "--json", json, "-q",      NULL };
    int rc = run_servetune(args, BENCH_LIMIT_S);
    /* 3: the client could not keep its schedule (an ASan build beside llama-server on a loaded
     * machine); the checks below are about what the server sent, which stays valid */
    if (rc != 0 && rc != 3)
        fail_msg("servetune bench --api %s exited %d", api, rc);
    json_error_t je;
    json_t *j = json_load_file(json, 0, &je);
    if (!j)
        fail_msg("%s: %s", json, je.text);
    json_t *sum = json_object_get(j, "summary");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(sum, "requests"), "completed")), n);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(sum, "tokens"), "short_outputs")), 0);
    json_t *sv = json_object_get(sum, "server_timings_ms");
    if (!json_is_object(sv))
        fail_msg("--api %s: no server timings in the summary", api);
    assert_int_equal(json_integer_value(json_object_get(sv, "requests")), n);
    /* the client's TTFT includes the server's prompt time, and more */
    assert_true(json_real_value(json_object_get(json_object_get(sv, "ttft_minus_prompt"), "min")) > 0);
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(j, "records"), i, r)
    {
        if (json_is_true(json_object_get(r, "warmup")))
            continue;
        assert_string_equal(json_string_value(json_object_get(r, "status")), "ok");
        assert_int_equal(json_integer_value(json_object_get(r, "output_tokens")), 12);
        assert_true(json_is_true(json_object_get(r, "usage_reported")));
        assert_true(json_real_value(json_object_get(r, "server_prompt_ms")) > 0);
        assert_int_equal(json_integer_value(json_object_get(r, "server_gen_tokens")), 12);
        /* a stream: its tokens came as separate events */
        assert_true(json_array_size(json_object_get(r, "event_times_ns")) >= 6);
    }
    return j;
}

static void stream_completion_chat_and_metrics(void **state)
{
    (void)state;
    const char *dir;
    LLAMACPP_OR_SKIP(dir);
    llama_srv s;
    const char *args[] = { "-c", "1024", "-np", "2", "-t", "1", "--alias", ALIAS, "--metrics", NULL };
    start_ready(&s, dir, args);
    /* token-id prompts on /v1/completions first, on a fresh server: the counters are all theirs */
    json_t *j = bench(s.port, "completions", 6, "inf");
    uint64_t in = 0, out = 0, cached = 0;
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(j, "records"), i, r)
    {
        in += (uint64_t)json_integer_value(json_object_get(r, "input_tokens"));
        out += (uint64_t)json_integer_value(json_object_get(r, "output_tokens"));
        cached += (uint64_t)json_integer_value(json_object_get(r, "cached_tokens"));
    }
    json_decref(j);
    /* the generic metrics count exactly what the requests (warm-up included) asked for and got */
    st_engine_metrics m;
    int same = 0;
    for (int k = 0; k < 50 && !same; k++) {
        http_res h;
        assert_int_equal(http_do(s.port, "GET", "/metrics", NULL, NULL, 5000, &h), 0);
        assert_int_equal(h.status, 200);
        assert_int_equal(st_metrics_read(ST_DIALECT_LLAMACPP, h.body.data, h.body.len, &m), 0);
        http_res_free(&h);
        same = m.v[ST_MET_GENERATION_TOKENS] == (double)out && m.v[ST_MET_PROMPT_TOKENS] == (double)in;
        if (!same)
            usleep(20000);
    }
    if (!same)
        fail_msg("metrics: generation %g prompt %g, the requests: %llu and %llu", m.v[ST_MET_GENERATION_TOKENS],
                 m.v[ST_MET_PROMPT_TOKENS], (unsigned long long)out, (unsigned long long)in);
    assert_near(m.v[ST_MET_PREFIX_HITS], (double)cached, 0);
    assert_near(m.v[ST_MET_PREFIX_QUERIES], (double)in, 0);
    assert_near(m.v[ST_MET_RUNNING], 0, 0);
    assert_near(m.v[ST_MET_WAITING], 0, 0);
    /* the scraper's samples carry them under the generic names */
    http_res h;
    assert_int_equal(http_do(s.port, "GET", "/metrics", NULL, NULL, 5000, &h), 0);
    st_metrics_sample smp[ST_METRICS_SCRAPE_MAX];
    int ns = st_metrics_scrape(ST_DIALECT_LLAMACPP, h.body.data, h.body.len, smp, ST_METRICS_SCRAPE_MAX);
    http_res_free(&h);
    int names = 0;
    for (int k = 0; k < ns; k++)
        names += !strcmp(smp[k].name, "waiting") || !strcmp(smp[k].name, "generation_tokens");
    assert_int_equal(names, 2);
    /* chat (text through the chat template) and llama.cpp's own /completion, streamed */
    json_decref(bench(s.port, "chat", 4, "20"));
    json_decref(bench(s.port, "llamacpp", 4, "20"));
    llama_stop(&s);
}

/* A prompt longer than a slot's context: llama-server answers 400 with its reason (vLLM's
 * equivalent is a 400 too); bench records it as an HTTP failure with the message. */
static void prompt_over_the_slot_context(void **state)
{
    (void)state;
    const char *dir;
    LLAMACPP_OR_SKIP(dir);
    llama_srv s;
    const char *args[] = { "-c", "256", "-np", "2", "-t", "1", "--alias", ALIAS, NULL }; /* 128 tokens per slot */
    start_ready(&s, dir, args);
    char url[64], json[600];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", s.port);
    snprintf(json, sizeof json, "%s/over.json", tmp);
    const char *a[] = { "bench", "--url", url, "--input-tokens", "300", "--output-tokens", "4", "-n", "2", "--json",
                        json,    "-q",    NULL };
    int rc = run_servetune(a, BENCH_LIMIT_S);
    assert_true(rc == 1 || rc == 3); /* requests failed (3: and the client lagged on a loaded machine) */
    json_t *j = json_load_file(json, 0, NULL);
    assert_non_null(j);
    json_t *r0 = json_array_get(json_object_get(j, "records"), 0);
    assert_string_equal(json_string_value(json_object_get(r0, "status")), "http_status");
    assert_int_equal(json_integer_value(json_object_get(r0, "http_status")), 400);
    assert_non_null(strstr(json_string_value(json_object_get(r0, "error")), "context"));
    json_decref(j);
    llama_stop(&s);
}

/* Start failures, classified from llama-server's own log: a port already taken, a corrupt model. */
static void failed_starts_classified(void **state)
{
    (void)state;
    const char *dir;
    LLAMACPP_OR_SKIP(dir);
    /* a port taken by a listener of ours */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 4), 0);
    socklen_t al = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &al);
    char port[16], bin[1200];
    snprintf(port, sizeof port, "%d", ntohs(a.sin_port));
    snprintf(bin, sizeof bin, "%s/bin/llama-server", dir);
    char logp[600];
    snprintf(logp, sizeof logp, "%s/taken.log", tmp);
    char *argv[] = { bin, "-m", (char *)model(dir), "--host", "127.0.0.1", "--port", port, NULL };
    st_proc p;
    st_proc_opts o = { .argv = argv, .log_path = logp };
    char err[256], detail[512];
    assert_int_equal(st_proc_start(&p, &o, err, sizeof err), 0);
    st_ns deadline = st_now() + st_s_to_ns(LLAMA_READY_S);
    while (st_proc_alive(&p) && st_now() < deadline)
        usleep(10000);
    assert_false(st_proc_alive(&p));
    char *tail = NULL;
    assert_int_equal(st_proc_log_tail(logp, 1 << 16, 30, &tail), 0);
    assert_int_equal(st_proc_classify(tail, 1, p.wstatus, 0, detail, sizeof detail), ST_FAIL_PORT_TAKEN);
    assert_non_null(strstr(detail, port));
    free(tail);
    st_proc_stop(&p, 1);
    close(fd);

    /* a model file cut short: the loader refuses it before anything listens */
    char bad[600];
    snprintf(bad, sizeof bad, "%s/cut.gguf", tmp);
    FILE *src = fopen(model(dir), "rb"), *dst = fopen(bad, "wb");
    assert_non_null(src);
    assert_non_null(dst);
    static char chunk[1 << 20];
    size_t got = fread(chunk, 1, sizeof chunk, src);
    assert_int_equal(fwrite(chunk, 1, got, dst), got);
    fclose(src);
    fclose(dst);
    llama_srv s;
    assert_int_equal(llama_start(&s, dir, bad, tmp, NULL, 0), 0);
    deadline = st_now() + st_s_to_ns(LLAMA_READY_S);
    while (st_proc_alive(&s.p) && st_now() < deadline)
        usleep(10000);
    assert_false(st_proc_alive(&s.p));
    assert_int_equal(st_proc_log_tail(s.log, 1 << 16, 30, &tail), 0);
    assert_int_equal(st_proc_classify(tail, 1, s.p.wstatus, 0, detail, sizeof detail), ST_FAIL_BAD_MODEL);
    assert_non_null(strstr(detail, "not within the file bounds"));
    free(tail);
    llama_stop(&s);
}

/* SIGTERM: an idle server exits at once with status 0. With a stream still open it stops
 * generating but holds the connection (about 30 s in this version) before it exits: the stop's
 * grace period bounds that, then SIGKILL, and nothing of the group is left. */
static void sigterm(void **state)
{
    (void)state;
    const char *dir;
    LLAMACPP_OR_SKIP(dir);
    llama_srv s;
    const char *args[] = { "-c", "4096", "-np", "1", "-t", "1", NULL };
    start_ready(&s, dir, args);
    st_ns t0 = st_now();
    assert_int_equal(st_proc_stop(&s.p, 10), 0);
    assert_true(st_ns_to_s(st_now() - t0) < 5);
    assert_true(WIFEXITED(s.p.wstatus));
    assert_int_equal(WEXITSTATUS(s.p.wstatus), 0);

    start_ready(&s, dir, args);
    /* a long stream, left open */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons((uint16_t)s.port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    const char *body = "{\"prompt\":[1,2,3],\"max_tokens\":3500,\"ignore_eos\":true,\"stream\":true}";
    char req[512];
    int n = snprintf(req, sizeof req,
                     "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     strlen(body), body);
    assert_int_equal(write(fd, req, (size_t)n), n);
    /* tokens are streaming */
    static char buf[1 << 16];
    size_t have = 0;
    st_ns until = st_now() + st_s_to_ns(30);
    while (count_sub(buf, "data: ") < 3 && have + 1 < sizeof buf && st_now() < until) {
        ssize_t k = read(fd, buf + have, sizeof buf - 1 - have);
        if (k <= 0)
            break;
        have += (size_t)k;
        buf[have] = '\0';
    }
    assert_true(count_sub(buf, "data: ") >= 3);
    t0 = st_now();
    assert_int_equal(st_proc_stop(&s.p, 1.0), 0);
    double took = st_ns_to_s(st_now() - t0);
    /* llama-server either finishes its shutdown within the grace (a clean exit) or, holding the
     * open stream, is killed once the grace is over: never a hang, never a kill before the grace */
    int clean = WIFEXITED(s.p.wstatus) && WEXITSTATUS(s.p.wstatus) == 0;
    int killed = WIFSIGNALED(s.p.wstatus) && took >= 0.9;
    if (!(took < 8 && (clean || killed)))
        fail_msg("stopped after %.3f s, status 0x%x:\n%s", took, s.p.wstatus, llama_log_tail(&s));
    close(fd);
}

/* A short audit of two configurations, and one whose model is corrupt, end to end. */
static void short_audit_with_reports(void **state)
{
    (void)state;
    const char *dir;
    LLAMACPP_OR_SKIP(dir);
    const char *m = model(dir);
    char bad[600], spec[700], out[600], bin[1200];
    snprintf(bad, sizeof bad, "%s/bad.gguf", tmp);
    FILE *f = fopen(bad, "wb");
    assert_non_null(f);
    fputs("GGUF this is not a model", f);
    fclose(f);
    snprintf(bin, sizeof bin, "%s/bin/llama-server", dir);
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    f = fopen(spec, "w");
    assert_non_null(f);
    fprintf(f,
            "engine:\n  kind: llamacpp\n  command: ['%s']\n  model: '%s'\n  served_model_name: %s\n"
            "  flags: [-c, '1024', -np, '1', -t, '1']\n"
            "hardware: {gpu: 2 vCPU, price_per_gpu_hour: 0.09}\npeak_rate: 4\n"
            "workload: {input_tokens: 48, output_tokens: 12, requests_per_rate: 8, seed: 2}\n"
            "rates: [2, 4]\nwarmup_requests: 2\n"
            "slo: {ttft_p95_ms: 20000, tpot_p95_ms: 2000}\n"
            "configurations:\n  - name: baseline\n  - name: slots-2\n    add_flags: [-np, '2']\n"
            "  - name: corrupt\n    model: '%s'\n"
            "timeouts: {startup: 60s, request: 60s, stop_grace: 5s}\n"
            "search: {mode: burst}\n",
            bin, m, ALIAS, bad);
    fclose(f);
    const char *args[] = { "audit", spec, "-o", out, "-q", NULL };
    int rc = run_servetune(args, AUDIT_LIMIT_S);
    assert_int_equal(rc, 1); /* done, but a configuration failed to start */
    json_t *root = load_json(out);
    const char *names[] = { "baseline", "slots-2" };
    for (int i = 0; i < 2; i++) {
        json_t *c = config_named(root, names[i]);
        assert_string_equal(json_string_value(json_object_get(c, "status")), "ok");
        assert_non_null(strstr(json_string_value(json_object_get(c, "command")), "--alias " ALIAS));
        json_t *facts = json_object_get(c, "engine_facts");
        assert_non_null(json_string_value(json_object_get(facts, "engine_version")));
        assert_non_null(strstr(json_string_value(json_object_get(facts, "max_concurrency_line")), "n_slots"));
        json_t *runs = json_object_get(c, "runs");
        assert_int_equal(json_array_size(runs), 2);
        size_t k;
        json_t *w;
        json_array_foreach(runs, k, w)
        {
            assert_string_equal(json_string_value(json_object_get(w, "verdict")), "pass");
            json_t *tm = json_object_get(w, "server_timings");
            assert_true(json_is_object(tm));
            assert_int_equal(json_integer_value(json_object_get(tm, "requests")), 8);
        }
    }
    json_t *bc = config_named(root, "corrupt");
    assert_string_equal(json_string_value(json_object_get(bc, "status")), "failed");
    json_t *fl = json_object_get(bc, "failure");
    assert_string_equal(json_string_value(json_object_get(fl, "class")), "bad_model");
    assert_non_null(strstr(json_string_value(json_object_get(fl, "log_tail")), "failed to load model"));
    int timings_note = 0;
    size_t k;
    json_t *n;
    json_array_foreach(json_object_get(root, "notes"), k, n) timings_note +=
        !strcmp(json_string_value(json_object_get(n, "kind")), "server_timings");
    assert_int_equal(timings_note, 2);
    json_decref(root);
    char p[700];
    snprintf(p, sizeof p, "%s/report.md", out);
    assert_true(file_has(p, "Server-reported timings"));
    assert_true(file_has(p, "bad_model"));
    snprintf(p, sizeof p, "%s/report.html", out);
    assert_true(file_has(p, "slots-2"));
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test_setup_teardown(readiness_while_loading, setup, teardown),
        cmocka_unit_test_setup_teardown(stream_completion_chat_and_metrics, setup, teardown),
        cmocka_unit_test_setup_teardown(prompt_over_the_slot_context, setup, teardown),
        cmocka_unit_test_setup_teardown(failed_starts_classified, setup, teardown),
        cmocka_unit_test_setup_teardown(sigterm, setup, teardown),
        cmocka_unit_test_setup_teardown(short_audit_with_reports, setup, teardown),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
