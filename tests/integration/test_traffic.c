/* The client's traffic end to end on the emulator (servetune bench as a child process):
 *   - sessions: a multi-turn trace replayed with the server's real answers; the prefix-cache hit
 *     rate the engine reports (its own /metrics and per-request usage) rises with the turns and
 *     matches what the trace implies (servetune trace stats);
 *   - reasoning: with a known reasoning share, the first answer token comes exactly that many
 *     tokens after the first token, and the reasoning tokens are counted apart;
 *   - exact prompt lengths: chat prompts fitted with /tokenize are the length asked for, as the
 *     server counts them (chat template included), in bench and in an audit;
 *   - vllm bench serve's names: --random-* with vLLM's meaning, --goodput, --num-prompts;
 *   - a Mooncake trace replayed: its shared hash blocks hit the engine's prefix cache. */
#include "harness.h"

#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <sqlite3.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "emu_util.h"
#include "load/trace_stats.h"

static char dir[] = "/tmp/st-traffic-XXXXXX";


static void show_log(const char *log)
{
    FILE *f = fopen(log, "r");
    char b[4096];
    size_t n = f ? fread(b, 1, sizeof b - 1, f) : 0;
    b[n] = 0;
    if (f)
        fclose(f);
    print_message("%s\n", b);
}

/* A counter of the emulator's /metrics (summed over its label sets). */
static double metric(int port, const char *name)
{
    http_res r;
    assert_int_equal(http_do(port, "GET", "/metrics", NULL, NULL, 5000, &r), 0);
    double sum = 0;
    size_t nl = strlen(name);
    for (const char *p = r.body.data; p && *p;) {
        const char *e = strchr(p, '\n');
        if (!strncmp(p, name, nl) && (p[nl] == '{' || p[nl] == ' ')) {
            const char *end = e ? e : p + strlen(p), *sp = end;
            while (sp > p && sp[-1] != ' ')
                sp--;
            if (sp > p)
                sum += strtod(sp, NULL);
        }
        p = e ? e + 1 : NULL;
    }
    http_res_free(&r);
    return sum;
}

static json_t *load_json(const char *path)
{
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    if (!j)
        fail_msg("%s: %s", path, e.text);
    return j;
}

static void sessions_prefix_cache_rises(void **state)
{
    (void)state;
    /* 6 sessions of 5 turns: a first prompt of 150 tokens, then 41 new ones a turn, 31 output
     * tokens (prompt + answer never a multiple of the 16-token block: the engine recomputes the
     * last token, so a whole last block would be one block short of the ideal) */
    char trace[300], out[300], log[300], js[300];
    snprintf(trace, sizeof trace, "%s/sessions.jsonl", dir);
    snprintf(log, sizeof log, "%s/bench.log", dir);
    snprintf(js, sizeof js, "%s/sessions.json", dir);
    FILE *f = fopen(trace, "w");
    assert_non_null(f);
    for (int t = 0; t < 5; t++)
        for (int s = 0; s < 6; s++)
            fprintf(f, "{\"timestamp\": %.3f, \"session\": \"s%d\", \"input_tokens\": %d, \"output_tokens\": 31}\n",
                    t * 1.0 + s * 0.05, s, t ? 41 : 150);
    fclose(f);
    /* what the trace implies */
    st_trace_stats *ts = st_trace_stats_new();
    char err[300];
    assert_int_equal(st_trace_read_file(trace, NULL, st_trace_stats_row_cb, ts, NULL, NULL, err, sizeof err), 0);
    st_traffic tr;
    st_trace_stats_result(ts, &tr);
    st_trace_stats_free(ts);
    assert_int_equal(tr.sessions, 6);
    assert_true(tr.ideal_hit_rate > 0.5);

    emu_child emu;
    const char *extra[] = { "--time-scale", "20", "--enable-prompt-tokens-details", "--quiet", NULL };
    assert_int_equal(emu_start(&emu, "Qwen/Qwen3-8B", "H100", extra, 1), 0);
    double q0 = metric(emu.port, "vllm:prefix_cache_queries_total");
    double h0 = metric(emu.port, "vllm:prefix_cache_hits_total");
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", emu.port);
    snprintf(out, sizeof out, "%s", js);
    const char *argv[] = { "servetune",    "bench", "--url",  url, "--trace", trace,
                           "--think-time", "0.01",  "--json", out, "--quiet", NULL };
    int rc = run_cli(argv, log);
    if (rc != 0)
        show_log(log);
    assert_int_equal(rc, 0);
    double dq = metric(emu.port, "vllm:prefix_cache_queries_total") - q0;
    double dh = metric(emu.port, "vllm:prefix_cache_hits_total") - h0;
    emu_stop(&emu);
    assert_true(dq > 0);
    double engine = dh / dq;
    print_message("# prefix-cache hit rate: engine %.4f (%g of %g tokens), trace implies %.4f\n", engine, dh, dq,
                  tr.ideal_hit_rate);
    assert_near(engine, tr.ideal_hit_rate, 0.02);
    assert_true(dq == (double)tr.prompt_tokens);
    /* per turn, from the engine's usage reports: the cached share rises with every turn */
    json_t *j = load_json(js);
    json_t *turns = json_object_get(j, "turns");
    assert_int_equal(json_array_size(turns), 5);
    double prev = -1;
    for (size_t t = 0; t < 5; t++) {
        json_t *row = json_array_get(turns, t);
        assert_int_equal(json_integer_value(json_object_get(row, "completed")), 6);
        double share = json_real_value(json_object_get(row, "cached_share"));
        print_message("# turn %zu: cached share %.3f, TTFT p50 %.2f ms\n", t + 1, share,
                      json_real_value(json_object_get(json_object_get(row, "ttft_ms"), "p50")));
        assert_true(share > prev);
        prev = share;
    }
    assert_true(prev > 0.8);
    /* a later turn's prompt is the conversation so far: the server counted it */
    json_t *recs = json_object_get(j, "records");
    json_t *r;
    size_t i;
    json_array_foreach(recs, i, r)
    {
        json_int_t turn = json_integer_value(json_object_get(r, "turn"));
        json_int_t pr = json_integer_value(json_object_get(r, "prompt_reported"));
        json_int_t want = 150 + (turn - 1) * (31 + 41);
        assert_int_equal(pr, want);
    }
    json_decref(j);
}

static void reasoning_time_to_first_answer(void **state)
{
    (void)state;
    emu_child emu;
    const char *extra[] = { "--time-scale", "20", "--reasoning-share", "0.5", "--quiet", NULL };
    assert_int_equal(emu_start(&emu, "Qwen/Qwen3-8B", "H100", extra, 1), 0);
    char url[64], log[300], js[300];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", emu.port);
    snprintf(log, sizeof log, "%s/reason.log", dir);
    const char *apis[] = { "chat", "completions" };
    for (int a = 0; a < 2; a++) {
        snprintf(js, sizeof js, "%s/reason-%s.json", dir, apis[a]);
        const char *argv[] = {
            "servetune",      "bench", "--url",           url,  "--api",       apis[a],  "-n",     "8", "--rate",  "40",
            "--input-tokens", "64",    "--output-tokens", "40", "--slo-ttfat", "100000", "--json", js,  "--quiet", NULL
        };
        int rc = run_cli(argv, log);
        if (rc != 0)
            show_log(log);
        assert_int_equal(rc, 0);
        json_t *j = load_json(js);
        json_t *recs = json_object_get(j, "records");
        json_t *r;
        size_t i;
        assert_int_equal(json_array_size(recs), 8);
        json_array_foreach(recs, i, r)
        {
            /* 20 of 40 tokens are reasoning: the answer starts at the 21st token event */
            assert_int_equal(json_integer_value(json_object_get(r, "output_tokens")), 40);
            assert_int_equal(json_integer_value(json_object_get(r, "reasoning_tokens")), 20);
            json_t *ev = json_object_get(r, "event_times_ns");
            assert_int_equal(json_array_size(ev), 40);
            assert_int_equal(json_integer_value(json_object_get(r, "first_answer_ns")),
                             json_integer_value(json_array_get(ev, 20)));
            assert_int_equal(json_integer_value(json_object_get(r, "first_token_ns")),
                             json_integer_value(json_array_get(ev, 0)));
            assert_true(json_real_value(json_object_get(r, "ttfat_ms")) >
                        json_real_value(json_object_get(r, "ttft_ms")));
        }
        json_t *sum = json_object_get(j, "summary");
        assert_int_equal(json_integer_value(json_object_get(json_object_get(sum, "tokens"), "reasoning")), 160);
        json_t *lat = json_object_get(sum, "latency_ms");
        double ttft = json_real_value(json_object_get(json_object_get(lat, "ttft"), "p50"));
        double ttfat = json_real_value(json_object_get(json_object_get(lat, "ttfat"), "p50"));
        double tpot = json_real_value(json_object_get(json_object_get(lat, "tpot"), "p50"));
        print_message("# %s: TTFT p50 %.2f ms, TTFAT p50 %.2f ms, TPOT p50 %.3f ms (20 reasoning tokens)\n", apis[a],
                      ttft, ttfat, tpot);
        assert_true(ttfat > ttft + 10 * tpot);
        assert_int_equal(json_integer_value(json_object_get(sum, "good")), 8);
        json_decref(j);
    }
    emu_stop(&emu);
}

static void exact_prompts_and_vllm_names(void **state)
{
    (void)state;
    emu_child emu;
    const char *extra[] = { "--time-scale", "20", "--quiet", NULL };
    assert_int_equal(emu_start(&emu, "Qwen/Qwen3-8B", "H100", extra, 1), 0);
    char url[64], log[300], js[300];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", emu.port);
    snprintf(log, sizeof log, "%s/exact.log", dir);
    /* chat: each prompt fitted with /tokenize to what the server counts, template included */
    snprintf(js, sizeof js, "%s/exact.json", dir);
    const char *argv[] = { "servetune",      "bench", "--url",         url,   "--api",           "chat", "-n",     "6",
                           "--input-tokens", "300",   "--range-ratio", "0.3", "--prefix-tokens", "100",  "--json", js,
                           "--quiet",        NULL };
    int rc = run_cli(argv, log);
    if (rc != 0)
        show_log(log);
    assert_int_equal(rc, 0);
    json_t *j = load_json(js);
    json_t *w = json_object_get(json_object_get(j, "config"), "workload");
    assert_int_equal(json_integer_value(json_object_get(w, "prompts_fitted")), 6);
    assert_int_equal(json_integer_value(json_object_get(w, "prompts_exact")), 6);
    json_t *r;
    size_t i;
    json_array_foreach(json_object_get(j, "records"), i, r)
    {
        json_int_t asked = json_integer_value(json_object_get(r, "input_tokens"));
        assert_true(asked >= 210 && asked <= 390);
        assert_int_equal(json_integer_value(json_object_get(r, "prompt_reported")), asked);
    }
    json_decref(j);
    /* vllm bench serve's names and meaning: 50 prefix tokens on top of 80..120 */
    snprintf(js, sizeof js, "%s/vllm.json", dir);
    const char *v[] = { "servetune",
                        "bench",
                        "--base-url",
                        url,
                        "--endpoint",
                        "/v1/completions",
                        "--dataset-name",
                        "random",
                        "--random-input-len",
                        "100",
                        "--random-prefix-len",
                        "50",
                        "--random-range-ratio",
                        "0.2",
                        "--random-output-len",
                        "8",
                        "--num-prompts",
                        "12",
                        "--request-rate",
                        "50",
                        "--ignore-eos",
                        "--goodput",
                        "ttft:100000",
                        "tpot:100000",
                        "--save-result",
                        "--result-filename",
                        js,
                        "--disable-tqdm",
                        "--quiet",
                        NULL };
    rc = run_cli(v, log);
    if (rc != 0)
        show_log(log);
    assert_int_equal(rc, 0);
    j = load_json(js);
    json_t *cfg = json_object_get(j, "config");
    w = json_object_get(cfg, "workload");
    assert_string_equal(json_string_value(json_object_get(w, "semantics")), "vllm");
    assert_int_equal(json_integer_value(json_object_get(w, "num_requests")), 12);
    assert_int_equal(json_integer_value(json_object_get(w, "prefix_len")), 50);
    assert_near(json_real_value(json_object_get(json_object_get(cfg, "slo"), "tpot_ms")), 100000, 1e-6);
    assert_near(json_real_value(json_object_get(json_object_get(cfg, "arrival"), "rate_rps")), 50, 1e-9);
    json_array_foreach(json_object_get(j, "records"), i, r)
    {
        json_int_t in = json_integer_value(json_object_get(r, "input_tokens"));
        assert_true(in >= 50 + 80 && in <= 50 + 120);
        assert_int_equal(json_integer_value(json_object_get(r, "prompt_reported")), in);
    }
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "summary"), "good")), 12);
    json_decref(j);
    /* mixing the two meanings is refused */
    const char *mix[] = {
        "servetune", "bench", "--url", url, "--random-input-len", "100", "--prefix-tokens", "5", NULL
    };
    assert_int_equal(run_cli(mix, log), 2);
    emu_stop(&emu);
}

static void mooncake_trace_hits_the_cache(void **state)
{
    (void)state;
    char trace[300], log[300], js[300];
    snprintf(trace, sizeof trace, "%s/mooncake.jsonl", dir);
    snprintf(log, sizeof log, "%s/mooncake.log", dir);
    snprintf(js, sizeof js, "%s/mooncake.json", dir);
    FILE *f = fopen(trace, "w");
    /* blocks of 64 tokens: 0 and 1 shared by the first three rows, 7 by the last two */
    fputs("{\"timestamp\": 0, \"input_length\": 200, \"output_length\": 5, \"hash_ids\": [0, 1, 2, 3]}\n"
          "{\"timestamp\": 50, \"input_length\": 150, \"output_length\": 5, \"hash_ids\": [0, 1, 4]}\n"
          "{\"timestamp\": 100, \"input_length\": 130, \"output_length\": 5, \"hash_ids\": [0, 1, 5]}\n"
          "{\"timestamp\": 150, \"input_length\": 100, \"output_length\": 5, \"hash_ids\": [7, 8]}\n"
          "{\"timestamp\": 200, \"input_length\": 120, \"output_length\": 5, \"hash_ids\": [7, 9]}\n",
          f);
    /* and 120 more short requests of their own: a trace is replayed whole (no -n) */
    for (int i = 0; i < 120; i++)
        fprintf(f, "{\"timestamp\": %d, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [%d]}\n", 250 + i * 5,
                1000 + i);
    fclose(f);
    st_trace_opts o = { .block_size = 64 };
    st_trace_stats *ts = st_trace_stats_new();
    char err[300];
    assert_int_equal(st_trace_read_file(trace, &o, st_trace_stats_row_cb, ts, NULL, NULL, err, sizeof err), 0);
    st_traffic tr;
    st_trace_stats_result(ts, &tr);
    st_trace_stats_free(ts);
    assert_int_equal(tr.hit_tokens, 128 + 128 + 64);
    assert_int_equal(tr.requests, 125);
    emu_child emu;
    const char *extra[] = { "--time-scale", "20", "--quiet", NULL };
    assert_int_equal(emu_start(&emu, "Qwen/Qwen3-8B", "H100", extra, 1), 0);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", emu.port);
    double q0 = metric(emu.port, "vllm:prefix_cache_queries_total");
    double h0 = metric(emu.port, "vllm:prefix_cache_hits_total");
    const char *argv[] = { "servetune",          "bench", "--url",  url, "--trace", trace,
                           "--trace-block-size", "64",    "--json", js,  "--quiet", NULL };
    int rc = run_cli(argv, log);
    if (rc != 0)
        show_log(log);
    assert_int_equal(rc, 0);
    double dq = metric(emu.port, "vllm:prefix_cache_queries_total") - q0;
    double dh = metric(emu.port, "vllm:prefix_cache_hits_total") - h0;
    emu_stop(&emu);
    print_message("# Mooncake replay: engine hits %g of %g prompt tokens, the trace implies %llu of %llu\n", dh, dq,
                  (unsigned long long)tr.hit_tokens, (unsigned long long)tr.prompt_tokens);
    assert_true(dq == (double)tr.prompt_tokens);
    assert_true(dh == (double)tr.hit_tokens);
    json_t *j = load_json(js);
    json_t *w = json_object_get(json_object_get(j, "config"), "workload");
    assert_string_equal(json_string_value(json_object_get(w, "trace_format")), "mooncake");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(w, "trace_counts"), "kept")), 125);
    assert_int_equal(json_array_size(json_object_get(j, "records")), 125);
    json_decref(j);
}


/* An audit (here servetune predict, the same sweep on the engine model) of a trace workload:
 * the report has a "Your traffic" section with the trace's figures and advice. */
static void report_has_your_traffic(void **state)
{
    (void)state;
    char trace[300], spec[300], out[300], log[300], p[400];
    snprintf(trace, sizeof trace, "%s/spend.json", dir);
    snprintf(spec, sizeof spec, "%s/spec.yaml", dir);
    snprintf(out, sizeof out, "%s/predict", dir);
    snprintf(log, sizeof log, "%s/predict.log", dir);
    FILE *f = fopen(trace, "w");
    assert_non_null(f);
    /* a LiteLLM spend log, newest first as the proxy lists it: 40 requests in 10 sessions */
    fputs("[\n", f);
    for (int i = 39; i >= 0; i--)
        fprintf(f,
                "  {\"request_id\": \"r%d\", \"call_type\": \"acompletion\", \"startTime\": "
                "\"2025-02-01T10:%02d:%02d.000Z\", \"endTime\": \"2025-02-01T10:%02d:%02d.500Z\", \"prompt_tokens\": "
                "%d, \"completion_tokens\": 40, \"model\": \"qwen3\", \"session_id\": \"s%d\", \"status\": "
                "\"success\"}%s\n",
                i, i / 10, (i % 10) * 5, i / 10, (i % 10) * 5, 200 + (i / 10) * 60, i % 10, i ? "," : "");
    fputs("]\n", f);
    fclose(f);
    f = fopen(spec, "w");
    assert_non_null(f);
    fprintf(f, "engine:\n  kind: emulator\n  model: Qwen/Qwen3-8B\n"
               "  flags: [--gpu, H100, --max-model-len, '4096']\n"
               "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.0}\n"
               "peak_rate: 10\n"
               "workload: {trace: spend.json, requests_per_rate: 40}\n"
               "rates: [2, 4]\nwarmup_requests: 0\n"
               "slo: {ttft_p95_ms: 2500, tpot_p95_ms: 50}\n"
               "configurations:\n  - name: baseline\n");
    fclose(f);
    const char *argv[] = { "servetune", "predict", spec, "-o", out, "-q", NULL };
    int rc = run_cli(argv, log);
    if (rc != 0)
        show_log(log);
    assert_int_equal(rc, 0);
    snprintf(p, sizeof p, "%s/report.json", out);
    json_t *j = load_json(p);
    json_t *t = json_object_get(j, "traffic");
    assert_true(json_is_object(t));
    assert_string_equal(json_string_value(json_object_get(t, "format")), "litellm");
    assert_int_equal(json_integer_value(json_object_get(t, "requests")), 40);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(t, "sessions"), "sessions")), 10);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(t, "rate"), "out_of_order")), 39);
    json_t *ad = json_object_get(t, "advice");
    assert_true(json_integer_value(json_object_get(ad, "kv_tokens")) > 100000);
    assert_near(json_real_value(json_object_get(ad, "reject_current")), 0, 0);
    assert_string_equal(json_string_value(json_object_get(ad, "prefix_caching")), "pays");
    json_decref(j);
    snprintf(p, sizeof p, "%s/report.md", out);
    assert_true(file_has(p, "## Your traffic"));
    assert_true(file_has(p, "Prefix caching pays"));
    snprintf(p, sizeof p, "%s/report.html", out);
    assert_true(file_has(p, "<h2>Your traffic</h2>"));
}


/* An audit on a chat API: every prompt fitted with the engine's /tokenize before each run, so
 * the lengths the engine counts (usage.prompt_tokens, chat template included) are the ones the
 * spec asks for; the configuration's log says so. */
static void audit_exact_prompts_on_chat(void **state)
{
    (void)state;
    char spec[300], out[300], log[300], p[400];
    snprintf(spec, sizeof spec, "%s/chat.yaml", dir);
    snprintf(out, sizeof out, "%s/chat", dir);
    snprintf(log, sizeof log, "%s/chat.log", dir);
    FILE *f = fopen(spec, "w");
    assert_non_null(f);
    fprintf(f, "engine: {kind: emulator, model: Qwen/Qwen3-8B, api: chat, flags: [--gpu, H100, --time-scale, '10']}\n"
               "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.0}\npeak_rate: 10\n"
               "workload: {input_tokens: 300, output_tokens: 16, requests_per_rate: 30}\n"
               "rates: [4]\nwarmup_requests: 2\nslo: {ttft_p95_ms: 2500, tpot_p95_ms: 50}\n"
               "search: {mode: burst}\ntimeouts: {startup: 8s, request: 60s, stop_grace: 2s}\n");
    fclose(f);
    const char *argv[] = { "servetune", "audit", spec, "-o", out, "-q", NULL };
    int rc = run_cli(argv, log);
    if (rc != 0)
        show_log(log);
    assert_int_equal(rc, 0);
    snprintf(p, sizeof p, "%s/results.sqlite", out);
    sqlite3 *db;
    assert_int_equal(sqlite3_open_v2(p, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(
        sqlite3_prepare_v2(db,
                           "SELECT count(*), min(input_tokens), max(input_tokens), sum(prompt_reported = 300) "
                           "FROM requests WHERE warmup = 0",
                           -1, &st, NULL),
        SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 30);
    assert_int_equal(sqlite3_column_int(st, 1), 300);
    assert_int_equal(sqlite3_column_int(st, 2), 300);
    assert_int_equal(sqlite3_column_int(st, 3), 30); /* as the server counted them (usage) */
    sqlite3_finalize(st);
    sqlite3_close(db);
    snprintf(p, sizeof p, "%s/logs/baseline.log", out);
    assert_true(file_has(p, "exact prompt lengths: 30 of 30 prompts of the next run fitted exactly"));
}

/* servetune trace stats: the figures and advice, the JSON, and the errors a user sees. */
static void trace_stats_cli(void **state)
{
    (void)state;
    char trace[300], js[300], log[300], bad[300];
    snprintf(trace, sizeof trace, "%s/burst.csv", dir);
    snprintf(js, sizeof js, "%s/stats.json", dir);
    snprintf(log, sizeof log, "%s/stats.log", dir);
    snprintf(bad, sizeof bad, "%s/bad.csv", dir);
    FILE *f = fopen(trace, "w");
    assert_non_null(f);
    fputs("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n", f);
    for (int i = 0; i < 600; i++)
        fprintf(f, "%d,%s,%d,%d,0,API log\n", i / 2, i % 3 ? "ChatGPT" : "GPT-4", 100 + (i * 37) % 4000,
                i % 50 == 49 ? 0 : 10 + i % 300);
    fclose(f);
    const char *argv[] = { "servetune", "trace", "stats",           trace,  "--json", js, "--model", "Qwen/Qwen3-8B",
                           "--gpu",     "H100",  "--max-model-len", "4096", NULL };
    int rc = run_cli(argv, log);
    if (rc != 0)
        show_log(log);
    assert_int_equal(rc, 0);
    json_t *j = load_json(js);
    assert_string_equal(json_string_value(json_object_get(j, "format")), "burstgpt");
    assert_int_equal(json_integer_value(json_object_get(j, "requests")), 588);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "counts"), "failed")), 12);
    json_t *ad = json_object_get(j, "advice");
    assert_true(json_integer_value(json_object_get(ad, "kv_tokens")) > 100000);
    assert_true(json_real_value(json_object_get(ad, "reject_current")) > 0); /* 4096 < the longest */
    assert_int_equal(json_integer_value(json_object_get(ad, "max_model_len_p99")) % 256, 0);
    assert_string_equal(json_string_value(json_object_get(ad, "prefix_caching")), "unknown");
    /* 120 rows a minute, 2 or 3 of them failed (not counted) */
    double p50 = json_real_value(json_object_get(json_object_get(j, "rate"), "p50_minute_rps"));
    assert_true(p50 >= 117 / 60.0 - 1e-9 && p50 <= 118 / 60.0 + 1e-9);
    json_decref(j);
    /* a malformed row: file:line: reason, exit 2 (bad input); skipped and counted with --trace-max-bad */
    f = fopen(bad, "w");
    fputs("timestamp,input_tokens,output_tokens\n1,10,5\n2,ten,5\n3,12,5\n", f);
    fclose(f);
    const char *b1[] = { "servetune", "trace", "stats", bad, NULL };
    assert_int_equal(run_cli(b1, log), 2);
    assert_true(file_has(log, "bad.csv:3: column input_tokens is not a token count: \"ten\""));
    const char *b2[] = { "servetune", "trace", "stats", bad, "--trace-max-bad", "1", NULL };
    assert_int_equal(run_cli(b2, log), 0);
    assert_true(file_has(log, "1 malformed"));
    const char *u1[] = { "servetune", "trace", "stats", bad, "--frobnicate", NULL };
    assert_int_equal(run_cli(u1, log), 2);
    const char *u2[] = { "servetune", "trace", "stats", NULL };
    assert_int_equal(run_cli(u2, log), 2);
    const char *u3[] = { "servetune", "trace", "stats", "/nonexistent/trace.jsonl", NULL };
    assert_int_equal(run_cli(u3, log), 2);
    /* --trace-window in hours, and a part that is no duration named as such */
    const char *w1[] = { "servetune", "trace", "stats", trace, "--trace-window", "0h:0.05h", NULL };
    assert_int_equal(run_cli(w1, log), 0);
    assert_true(file_has(log, "outside the time window"));
    const char *w2[] = { "servetune", "trace", "stats", trace, "--trace-window", "0:2x", NULL };
    assert_int_equal(run_cli(w2, log), 2);
    assert_true(file_has(log, "--trace-window: '2x' is not a duration"));
    /* --json naming the trace itself: refused before anything is read or written, the trace intact */
    const char *s1[] = { "servetune", "trace", "stats", bad, "--json", bad, NULL };
    assert_int_equal(run_cli(s1, log), 2);
    assert_true(file_has(log, "is the trace it reads"));
    assert_true(file_has(bad, "timestamp,input_tokens,output_tokens\n"));
    /* a trace whose rows all share one time has no mean rate: said so, not "nan" */
    f = fopen(bad, "w");
    fputs("timestamp,input_tokens,output_tokens\n7,10,5\n7,12,5\n7,14,5\n", f);
    fclose(f);
    const char *t1[] = { "servetune", "trace", "stats", bad, NULL };
    assert_int_equal(run_cli(t1, log), 0);
    assert_true(file_has(log, "unknown (every request at the same time)"));
    assert_false(file_has(log, "nan"));
}

static int setup(void **state)
{
    (void)state;
    return mkdtemp(dir) ? 0 : -1;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Everything the tests wrote goes with the folder (nftw, depth first, links not followed). */
static int teardown(void **state)
{
    (void)state;
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(sessions_prefix_cache_rises),  cmocka_unit_test(reasoning_time_to_first_answer),
        cmocka_unit_test(exact_prompts_and_vllm_names), cmocka_unit_test(mooncake_trace_hits_the_cache),
        cmocka_unit_test(report_has_your_traffic),      cmocka_unit_test(trace_stats_cli),
        cmocka_unit_test(audit_exact_prompts_on_chat),
    };
    return cmocka_run_group_tests(t, setup, teardown);
}
