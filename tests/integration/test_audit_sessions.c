/* Multi-turn sessions in `servetune audit`, end to end on the emulator (servetune as a child
 * process, the engine on 127.0.0.1):
 *   - a chat trace replayed as conversations (workload.sessions: replay) hits the engine's
 *     prefix cache as the trace implies (the engine's own prefix-cache counters, stored in
 *     results.sqlite), well above the same trace flattened on its recorded times (flat: each
 *     later turn rebuilt with a stand-in answer, so only the earlier prompts are reused); a later
 *     turn's prompt is the conversation so far with the real answers (the server's count); the
 *     report gives the rate in sessions/s and TTFT and the cached share by turn;
 *   - synthetic sessions on the sustained search: the capacity is reported in sessions/s and as
 *     the requests/s delivered (about the mean turns per session times the session rate);
 *   - the prediction the audit makes first (servetune predict: the engine model replays the
 *     sessions in virtual time) agrees with the measurement (tolerance at predict_agrees);
 *   - spec errors name the line. */
#include "harness.h"

#define ST_IT_TMP_PREFIX "/tmp/st_sessions_it."
#include "audit_util.h"

#include <math.h>

#include "load/trace_stats.h"

/* 8 sessions of 5 turns: a first prompt of 150 tokens, then 10 new ones a turn, answers of 200
 * tokens (long answers against short user turns: what a flattened replay cannot reuse). */
#define SESSIONS 8
#define TURNS 5
#define FIRST 150
#define NEW 10
#define ANSWER 200

static void write_trace(const char *path)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int t = 0; t < TURNS; t++)
        for (int s = 0; s < SESSIONS; s++)
            fprintf(f, "{\"timestamp\": %.3f, \"session\": \"s%d\", \"input_tokens\": %d, \"output_tokens\": %d}\n",
                    t * 8.0 + s * 0.5, s, t ? NEW : FIRST, ANSWER);
    fclose(f);
}

static void write_trace_spec(const char *path, const char *mode)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f,
            "engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100, --time-scale, '20', "
            "--enable-prompt-tokens-details]}\n"
            "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.0}\n"
            "peak_rate: 2\n"
            "workload: {trace: chat.jsonl, sessions: %s, requests_per_rate: %d}\n"
            "rates: [1]\nwarmup_requests: 0\n"
            "slo: {ttft_p95_ms: 5000, tpot_p95_ms: 100}\n"
            "search: {mode: burst}\n"
            "timeouts: {startup: 8s, request: 60s, stop_grace: 2s}\n",
            mode, SESSIONS * TURNS);
    fclose(f);
}

/* The engine's prefix-cache hit rate over a run: the increase of its hit and query counters
 * (docs/metrics.md: prefix_hits, prefix_queries) between the first and the last sample. */
static double stored_hit_rate(const char *db_path, double *queries)
{
    sqlite3 *db;
    assert_int_equal(sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT max(value) - min(value) FROM metrics WHERE name = ?1 AND run_id = "
                                        "(SELECT max(id) FROM runs)",
                                        -1, &st, NULL),
                     SQLITE_OK);
    double v[2];
    const char *names[2] = { "prefix_hits", "prefix_queries" };
    for (int i = 0; i < 2; i++) {
        sqlite3_reset(st);
        sqlite3_bind_text(st, 1, names[i], -1, SQLITE_STATIC);
        assert_int_equal(sqlite3_step(st), SQLITE_ROW);
        v[i] = sqlite3_column_double(st, 0);
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    *queries = v[1];
    assert_true(v[1] > 0);
    return v[0] / v[1];
}

/* Per turn of a run's requests: their count, prompt and cached tokens, and the median TTFT (ms). */
typedef struct turn_fig {
    int n;
    double prompt, cached, ttft_p50_ms;
} turn_fig;

static void turn_figures(const char *db_path, turn_fig f[TURNS])
{
    sqlite3 *db;
    assert_int_equal(sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT turn, count(*), sum(input_tokens), sum(cached_tokens) FROM requests "
                                        "WHERE status = 'ok' AND warmup = 0 GROUP BY turn ORDER BY turn",
                                        -1, &st, NULL),
                     SQLITE_OK);
    memset(f, 0, TURNS * sizeof *f);
    while (sqlite3_step(st) == SQLITE_ROW) {
        int t = sqlite3_column_int(st, 0);
        assert_true(t >= 0 && t < TURNS);
        f[t].n = sqlite3_column_int(st, 1);
        f[t].prompt = sqlite3_column_double(st, 2);
        f[t].cached = sqlite3_column_double(st, 3);
    }
    sqlite3_finalize(st);
    /* the median TTFT of each turn */
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT (first_token - scheduled) / 1e6 FROM requests WHERE status = 'ok' AND "
                                        "warmup = 0 AND turn = ?1 ORDER BY 1",
                                        -1, &st, NULL),
                     SQLITE_OK);
    for (int t = 0; t < TURNS; t++) {
        sqlite3_reset(st);
        sqlite3_bind_int(st, 1, t);
        double v[64];
        int k = 0;
        while (sqlite3_step(st) == SQLITE_ROW && k < 64)
            v[k++] = sqlite3_column_double(st, 0);
        assert_true(k > 0);
        f[t].ttft_p50_ms = k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
}

/* The prediction the audit made first (the engine model, virtual time, the same spec) against the
 * measurement (the same model served over HTTP at time scale 20). Tolerance, and why: the sessions
 * are the same (same trace, same schedule) and each later turn's prompt is built from the answer
 * on both sides (generated token ids in the model, the streamed text over HTTP, one token a word),
 * so every turn's prompt and cached tokens are EQUAL; the capacity (a burst run's delivered
 * requests/s, its drain included) within 10 %; each turn's median TTFT within 50 % + 20 ms: HTTP
 * adds its path, and each wall millisecond of scheduling jitter is 20 ms of the engine's time. */
static void predict_agrees(const char *out)
{
    char a[500], p[500];
    snprintf(a, sizeof a, "%s/results.sqlite", out);
    snprintf(p, sizeof p, "%s/prediction/results.sqlite", out);
    turn_fig fa[TURNS], fp[TURNS];
    turn_figures(a, fa);
    turn_figures(p, fp);
    for (int t = 0; t < TURNS; t++) {
        print_message("# turn %d: prompt %.0f / %.0f tokens, cached %.0f / %.0f, TTFT p50 %.1f / %.1f ms "
                      "(measured / predicted)\n",
                      t + 1, fa[t].prompt, fp[t].prompt, fa[t].cached, fp[t].cached, fa[t].ttft_p50_ms,
                      fp[t].ttft_p50_ms);
        assert_int_equal(fa[t].n, SESSIONS);
        assert_int_equal(fp[t].n, SESSIONS);
        assert_true(fa[t].prompt == fp[t].prompt);
        assert_true(fa[t].cached == fp[t].cached);
        assert_true(fabs(fa[t].ttft_p50_ms - fp[t].ttft_p50_ms) <= 0.5 * fp[t].ttft_p50_ms + 20);
    }
    json_t *ja = load_json(out);
    char pd[500];
    snprintf(pd, sizeof pd, "%s/prediction", out);
    json_t *jp = load_json(pd);
    double ra = json_number_value(json_object_get(json_object_get(config_named(ja, "baseline"), "capacity"), "rps"));
    double rp = json_number_value(json_object_get(json_object_get(config_named(jp, "baseline"), "capacity"), "rps"));
    print_message("# capacity: measured %.3f req/s, predicted %.3f req/s\n", ra, rp);
    assert_true(fabs(rp / ra - 1) <= 0.10);
    assert_true(json_is_true(json_object_get(jp, "prediction")));
    json_decref(ja);
    json_decref(jp);
}

static void replay_hits_the_cache_as_the_trace_implies(void **state)
{
    (void)state;
    char trace[400], spec[400], out[400], db[500];
    snprintf(trace, sizeof trace, "%s/chat.jsonl", tmp);
    write_trace(trace);
    /* what the trace implies: an ideal prefix cache's hit rate */
    st_trace_stats *ts = st_trace_stats_new();
    char err[300];
    assert_int_equal(st_trace_read_file(trace, NULL, st_trace_stats_row_cb, ts, NULL, NULL, err, sizeof err), 0);
    st_traffic tr;
    st_trace_stats_result(ts, &tr);
    st_trace_stats_free(ts);
    assert_int_equal(tr.sessions, SESSIONS);

    double rate[2], queries[2];
    const char *modes[2] = { "replay", "flat" };
    for (int m = 0; m < 2; m++) {
        snprintf(spec, sizeof spec, "%s/%s.yaml", tmp, modes[m]);
        snprintf(out, sizeof out, "%s/out-%s", tmp, modes[m]);
        write_trace_spec(spec, modes[m]);
        const char *args[] = { "audit", spec, "-o", out, "-q", NULL };
        assert_int_equal(run_servetune(args, 120), 0);
        snprintf(db, sizeof db, "%s/results.sqlite", out);
        rate[m] = stored_hit_rate(db, &queries[m]);
    }
    print_message("# prefix-cache hit rate (engine counters): replay %.4f (%.0f prompt tokens), flat %.4f (%.0f), "
                  "the trace implies %.4f\n",
                  rate[0], queries[0], rate[1], queries[1], tr.ideal_hit_rate);
    /* replayed: every prompt token of the conversation the server has seen is reused, as the
     * trace implies (the blocks of 16 tokens round a little off) */
    assert_near(rate[0], tr.ideal_hit_rate, 0.03);
    /* every prompt token counted once (the first scrape may come after the first prompt's prefill) */
    assert_true(queries[0] <= (double)tr.prompt_tokens && queries[0] >= (double)tr.prompt_tokens - FIRST);
    /* flattened: the stand-in answers are not what the engine generated */
    assert_true(rate[0] > rate[1] + 0.2);

    /* the stored requests: a later turn's prompt is the conversation so far (the server's count) */
    snprintf(db, sizeof db, "%s/out-replay/results.sqlite", tmp);
    sqlite3 *d;
    assert_int_equal(sqlite3_open_v2(db, &d, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(
        sqlite3_prepare_v2(d,
                           "SELECT count(*), count(DISTINCT session), sum(prompt_reported = ?1 + turn * ?2) "
                           "FROM requests WHERE status = 'ok'",
                           -1, &st, NULL),
        SQLITE_OK);
    sqlite3_bind_int(st, 1, FIRST);
    sqlite3_bind_int(st, 2, ANSWER + NEW);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), SESSIONS * TURNS);
    assert_int_equal(sqlite3_column_int(st, 1), SESSIONS);
    assert_int_equal(sqlite3_column_int(st, 2), SESSIONS * TURNS);
    sqlite3_finalize(st);
    sqlite3_close(d);

    /* the report: sessions/s, TTFT and cached share by turn (rising with the conversation) */
    snprintf(out, sizeof out, "%s/out-replay", tmp);
    json_t *j = load_json(out);
    json_t *ws = json_object_get(json_object_get(json_object_get(j, "spec"), "workload"), "sessions");
    if (!ws)
        ws = json_object_get(json_object_get(j, "workload"), "sessions");
    assert_non_null(ws);
    assert_string_equal(json_string_value(json_object_get(ws, "rate_unit")), "sessions/s");
    json_t *cs = json_object_get(json_object_get(config_named(j, "baseline"), "capacity"), "sessions");
    assert_non_null(cs);
    assert_near(json_number_value(json_object_get(cs, "sessions_per_s")), 1, 1e-9);
    assert_near(json_number_value(json_object_get(cs, "requests_per_session")), TURNS, 1e-9);
    json_t *turns = json_object_get(cs, "turns");
    assert_int_equal(json_array_size(turns), TURNS);
    double prev = -1;
    for (size_t t = 1; t < TURNS; t++) {
        json_t *row = json_array_get(turns, t);
        assert_int_equal(json_integer_value(json_object_get(row, "completed")), SESSIONS);
        double share = json_number_value(json_object_get(row, "cached_share"));
        print_message("# turn %zu: cached share %.3f, TTFT p50 %.2f ms\n", t + 1, share,
                      json_number_value(json_object_get(json_object_get(row, "ttft_ms"), "p50")));
        assert_true(share > prev);
        prev = share;
    }
    assert_true(prev > 0.9);
    json_decref(j);
    char md[500];
    snprintf(md, sizeof md, "%s/report.md", out);
    assert_true(file_has(md, "## Multi-turn sessions"));
    assert_true(file_has(md, "| Turn | Requests | Completed | TTFT p50 (ms)"));
    assert_true(file_has(md, "- **Rates tried**: 1 sessions/s (a burst test"));
    assert_true(file_has(md, "## Predicted vs measured"));
    snprintf(md, sizeof md, "%s/report.html", out);
    assert_true(file_has(md, "TTFT p50 by turn 1: "));
    predict_agrees(out);
}

static void synthetic_sessions_sustained(void **state)
{
    (void)state;
    char spec[400], out[400];
    snprintf(spec, sizeof spec, "%s/syn.yaml", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    FILE *f = fopen(spec, "w");
    assert_non_null(f);
    fputs("engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100, --time-scale, '20', "
          "--enable-prompt-tokens-details, --max-num-seqs, '8']}\n"
          "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.0}\n"
          "peak_rate: 2\n"
          "workload:\n  input_tokens: 400\n  output_tokens: 100\n  shared_prefix: 200\n"
          "  sessions: {turns: 3-5, user_tokens: 30, think_time: 1s}\n"
          "rates: [1, 8]\nwarmup_requests: 4\n"
          "slo: {ttft_p95_ms: 1000, tpot_p95_ms: 60}\n"
          "search: {mode: sustained, start: 1, max_runs: 3, min_window: 20s, min_window_requests: 100, "
          "max_duration: 120s}\n"
          "timeouts: {startup: 8s, request: 60s, stop_grace: 2s}\n",
          f);
    fclose(f);
    const char *check[] = { "audit", "--check", spec, NULL };
    assert_int_equal(run_servetune(check, 60), 0);
    const char *args[] = { "audit", spec, "-o", out, "-q", NULL };
    assert_int_equal(run_servetune(args, 120), 0);
    json_t *j = load_json(out);
    json_t *cap = json_object_get(config_named(j, "baseline"), "capacity");
    json_t *cs = json_object_get(cap, "sessions");
    assert_non_null(cs);
    double sps = json_number_value(json_object_get(cs, "sessions_per_s"));
    double rps = json_number_value(json_object_get(cap, "rps"));
    print_message("# capacity: %.3g sessions/s, %.3g requests/s delivered\n", sps, rps);
    assert_true(sps > 0);
    /* each session brings 3-5 turns (4 on average); the window sees sessions at every stage */
    assert_near(json_number_value(json_object_get(cs, "requests_per_session")), 4, 1e-9);
    assert_true(rps > 2.5 * sps && rps < 5.5 * sps);
    /* priced on requests: 100-token answers at the requests/s delivered, not at sessions/s */
    double tps = json_number_value(json_object_get(cap, "output_tps"));
    print_message("# output %.4g tok/s at %.3g req/s\n", tps, rps);
    assert_near(tps / rps, 100, 2);
    json_t *turns = json_object_get(cs, "turns");
    assert_true(json_array_size(turns) >= 3);
    json_decref(j);
}

static void spec_errors_name_the_line(void **state)
{
    (void)state;
    char spec[400], log[500];
    snprintf(spec, sizeof spec, "%s/p.yaml", tmp);
    snprintf(log, sizeof log, "%s/servetune.out", tmp);
    const char *bad[][2] = {
        { "workload: {input_tokens: 400, output_tokens: 100, sessions: {turns: 9-3}}\nrates: [1, 2]\n",
          "p.yaml:4: workload.sessions.turns: expected N or MIN-MAX" },
        { "workload: {input_tokens: 400, output_tokens: 100, sessions: replay}\nrates: [1, 2]\n",
          "p.yaml:4: workload.sessions: a synthetic workload takes a mapping" },
        { "workload: {input_tokens: 400, output_tokens: 100, sessions: {turns: 3}}\nconcurrency: [1, 2]\n",
          "p.yaml:5: concurrency: not with multi-turn sessions" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        FILE *f = fopen(spec, "w");
        assert_non_null(f);
        fprintf(f,
                "engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100]}\n"
                "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.0}\npeak_rate: 2\n%s"
                "slo: {ttft_p95_ms: 1000, tpot_p95_ms: 60}\n",
                bad[i][0]);
        fclose(f);
        const char *check[] = { "audit", "--check", spec, NULL };
        assert_int_equal(run_servetune(check, 60), 2);
        if (!file_has(log, bad[i][1]))
            fail_msg("case %zu: no '%s' in %s", i, bad[i][1], log);
        const char *pr[] = { "predict", spec, "-o", tmp, NULL };
        assert_int_equal(run_servetune(pr, 60), 2);
    }
    /* servetune plan does not search with sessions: refused with the reason */
    FILE *f = fopen(spec, "w");
    assert_non_null(f);
    fputs("engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100]}\n"
          "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.0}\npeak_rate: 2\n"
          "workload: {input_tokens: 400, output_tokens: 100, sessions: {turns: 3}}\nrates: [1, 2]\n"
          "slo: {ttft_p95_ms: 1000, tpot_p95_ms: 60}\n",
          f);
    fclose(f);
    char plan_out[400];
    snprintf(plan_out, sizeof plan_out, "%s/plan", tmp);
    const char *pl[] = { "plan", spec, "-o", plan_out, NULL };
    assert_int_equal(run_servetune(pl, 60), 2);
    assert_true(file_has(log, "servetune plan does not search with multi-turn sessions (workload.sessions)"));
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test_setup_teardown(replay_hits_the_cache_as_the_trace_implies, setup, teardown),
        cmocka_unit_test_setup_teardown(synthetic_sessions_sustained, setup, teardown),
        cmocka_unit_test_setup_teardown(spec_errors_name_the_line, setup, teardown),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}
