/* An agent trace as an audit's workload, end to end on the emulator (servetune as a child process,
 * the engine on 127.0.0.1):
 *   - `audit --check` accepts a spec whose workload.trace is task-graph JSONL;
 *   - `audit` runs its sustained search in tasks/s: each run replays the task graphs open loop
 *     across tasks at the run's task rate, closed within a task; the SLO's makespan term holds at
 *     the capacity, which the reports give in tasks/s and in requests/s delivered, and name the
 *     audit an agent-trace audit (report.md, report.html, report.json) with the trace's shape;
 *   - the prediction the audit makes first (the engine model replaying the same graphs in virtual
 *     time, as `servetune predict --agents` does) is near the measured capacity (tolerance at
 *     PREDICT_TOLERANCE);
 *   - options that mean nothing to an agent trace (concurrency levels, the session and trace-filter
 *     keys, peak_rate: trace) and a cycle in the graph are refused with the spec's line. */
#include "harness.h"

#define ST_IT_TMP_PREFIX "/tmp/st_audit_agents_it."
#include "audit_util.h"

#include <math.h>

/* TASKS tasks, one every 0.5 s: a planner (800 prompt tokens, 3 shared blocks of 256) fans out to
 * 2-4 workers (400 tokens, the first block shared; answers of 60-120 tokens) joined by one node
 * (900 tokens): 4-6 requests a task, 5 on average. */
#define TASKS 12
#define REQUESTS_PER_TASK 5.0

/* The measured capacity (tasks/s) against the engine model's: the emulator serves the same model at
 * time scale 10 over HTTP, on a host shared with other tests, where the client's and the emulator's
 * lag behind their schedules count against the measured rate; the search's own tolerance is 10 %
 * on each side. */
#define PREDICT_TOLERANCE 0.35

static void write_tasks(const char *path)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("# generated: planner, 2-4 workers, a join\n", f);
    for (int t = 0; t < TASKS; t++) {
        int w = 2 + t % 3;
        fprintf(f,
                "{\"task\": \"t%d\", \"id\": \"plan\", \"parents\": [], \"input_tokens\": 800, \"output_tokens\": 80, "
                "\"blocks\": [1, 2, 3], \"block_tokens\": 256, \"start\": %g}\n",
                t, t * 0.5);
        for (int k = 0; k < w; k++)
            fprintf(f,
                    "{\"task\": \"t%d\", \"id\": \"w%d\", \"parents\": [\"plan\"], \"input_tokens\": 400, "
                    "\"output_tokens\": %d, \"gap\": 0.1, \"blocks\": [1]}\n",
                    t, k, 60 + 20 * k);
        fprintf(f, "{\"task\": \"t%d\", \"id\": \"join\", \"parents\": [", t);
        for (int k = 0; k < w; k++)
            fprintf(f, "%s\"w%d\"", k ? ", " : "", k);
        fputs("], \"input_tokens\": 900, \"output_tokens\": 100, \"gap\": 0.05, \"blocks\": [1, 2, 3]}\n", f);
    }
    fclose(f);
}

static void write_spec(const char *path, const char *trace)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f,
            "engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100, --time-scale, '10', "
            "--enable-prompt-tokens-details, --max-num-seqs, '8']}\n"
            "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.0}\n"
            "peak_rate: 4\n"
            "workload: {trace: %s}\n"
            "rates: [1, 4]\nwarmup_requests: 4\n"
            "slo: {ttft_p95_ms: 1000, tpot_p95_ms: 60, makespan_p95_ms: 4000}\n"
            "search: {mode: sustained, max_runs: 6, min_window: 20s, min_window_requests: 100, max_duration: 120s}\n"
            "timeouts: {startup: 8s, request: 60s, stop_grace: 2s}\n",
            trace);
    fclose(f);
}

static double capacity_tasks(json_t *root, double *rps, double *makespan_p95_ms)
{
    json_t *cap = json_object_get(config_named(root, "baseline"), "capacity");
    json_t *ss = json_object_get(cap, "sessions");
    assert_non_null(ss);
    *rps = json_number_value(json_object_get(cap, "rps"));
    *makespan_p95_ms = json_number_value(json_object_get(ss, "makespan_p95_ms"));
    return json_number_value(json_object_get(ss, "tasks_per_s"));
}

static void audit_of_an_agent_trace(void **state)
{
    (void)state;
    char trace[400], spec[400], out[400], pred[500], p[500];
    snprintf(trace, sizeof trace, "%s/tasks.jsonl", tmp);
    snprintf(spec, sizeof spec, "%s/agents.yaml", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    write_tasks(trace);
    write_spec(spec, trace);
    const char *check[] = { "audit", "--check", spec, NULL };
    assert_int_equal(run_servetune(check, 60), 0);
    const char *args[] = { "audit", spec, "-o", out, "-q", NULL };
    assert_int_equal(run_servetune(args, 300), 0);

    json_t *j = load_json(out);
    json_t *w = json_object_get(json_object_get(j, "spec"), "workload");
    assert_string_equal(json_string_value(json_object_get(w, "kind")), "agent_trace");
    assert_string_equal(json_string_value(json_object_get(w, "agent_format")), "task-graph");
    assert_near(json_number_value(json_object_get(w, "requests_per_task")), REQUESTS_PER_TASK, 1e-9);
    assert_string_equal(json_string_value(json_object_get(json_object_get(w, "sessions"), "rate_unit")), "tasks/s");
    /* the trace's shape, stored by the audit for its reports */
    json_t *at = json_object_get(j, "agent_trace");
    assert_int_equal(json_integer_value(json_object_get(at, "tasks")), TASKS);
    assert_int_equal(json_integer_value(json_object_get(at, "requests")), (int)(TASKS * REQUESTS_PER_TASK));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(at, "fan_out"), "width_max")), 4);
    double rps, m95, tps = capacity_tasks(j, &rps, &m95);
    print_message("# measured: %.3g tasks/s, %.3g requests/s delivered, makespan p95 %.0f ms\n", tps, rps, m95);
    assert_true(tps > 0);
    /* the delivered requests/s: about the requests per task times the task rate (the window sees
     * tasks at every stage) */
    assert_true(rps > 0.7 * REQUESTS_PER_TASK * tps && rps < 1.3 * REQUESTS_PER_TASK * tps);
    /* at the capacity the makespan term holds; a task is at least three requests in a row */
    assert_true(m95 > 0 && m95 <= 4000);

    snprintf(pred, sizeof pred, "%s/prediction", out);
    json_t *jp = load_json(pred);
    double prps, pm95, ptps = capacity_tasks(jp, &prps, &pm95);
    print_message("# predicted: %.3g tasks/s, %.3g requests/s (measured / predicted %.3f)\n", ptps, prps, tps / ptps);
    assert_true(ptps > 0);
    assert_true(fabs(tps / ptps - 1) <= PREDICT_TOLERANCE);
    json_decref(jp);
    json_decref(j);

    snprintf(p, sizeof p, "%s/report.md", out);
    assert_true(file_has(p, "- **Workload** (an agent-trace audit): replayed agent trace"));
    assert_true(file_has(p, "## Agent tasks"));
    assert_true(file_has(p, "The trace: 12 tasks, 60 requests (0 in background sub-agents), 12 fan-out points"));
    assert_true(file_has(p, "| Config | Capacity (tasks/s) | Requests per task |"));
    assert_true(file_has(p, "| Offered (tasks/s) |"));
    snprintf(p, sizeof p, "%s/report.html", out);
    assert_true(file_has(p, "Workload (agent-trace audit)"));
    assert_true(file_has(p, "tasks starting per second"));
}

static void agent_spec_errors_name_the_line(void **state)
{
    (void)state;
    char trace[400], cyc[400], spec[400], log[500], line[1200];
    snprintf(trace, sizeof trace, "%s/tasks.jsonl", tmp);
    snprintf(cyc, sizeof cyc, "%s/cycle.jsonl", tmp);
    snprintf(spec, sizeof spec, "%s/p.yaml", tmp);
    snprintf(log, sizeof log, "%s/servetune.out", tmp);
    write_tasks(trace);
    FILE *f = fopen(cyc, "w");
    assert_non_null(f);
    fputs("{\"task\": \"t\", \"id\": \"a\", \"parents\": [], \"input_tokens\": 10, \"output_tokens\": 5}\n"
          "{\"task\": \"t\", \"id\": \"b\", \"parents\": [\"a\", \"c\"], \"input_tokens\": 10, \"output_tokens\": 5}\n"
          "{\"task\": \"t\", \"id\": \"c\", \"parents\": [\"b\"], \"input_tokens\": 10, \"output_tokens\": 5}\n",
          f);
    fclose(f);
    char cyc_err[600];
    snprintf(cyc_err, sizeof cyc_err, "p.yaml:4: workload.trace: %s:2: node b of task t is on a cycle", cyc);
    struct {
        const char *peak, *workload_extra, *load, *trace, *want;
    } bad[] = {
        { "2", "", "concurrency: [1, 2]", trace, "p.yaml:5: concurrency: not with an agent trace" },
        { "2", ", sessions: replay", "rates: [1, 2]", trace, "p.yaml:4: workload.sessions: not with an agent trace" },
        { "2", ", trace_window: '0:10m'", "rates: [1, 2]", trace,
          "p.yaml:4: workload.trace_window: not with an agent trace" },
        { "2", ", think_time: 1s", "rates: [1, 2]", trace, "p.yaml:4: workload.think_time: not with an agent trace" },
        { "trace", "", "rates: [1, 2]", trace, "p.yaml:3: peak_rate: 'trace' reads a request trace's busiest minute" },
        { "2", "", "rates: [1, 2]", cyc, cyc_err },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        f = fopen(spec, "w");
        assert_non_null(f);
        fprintf(f,
                "engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100]}\n"
                "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.0}\npeak_rate: %s\n"
                "workload: {trace: %s%s}\n%s\n"
                "slo: {ttft_p95_ms: 1000, tpot_p95_ms: 60, makespan_p95_ms: 4000}\n",
                bad[i].peak, bad[i].trace, bad[i].workload_extra, bad[i].load);
        fclose(f);
        const char *check[] = { "audit", "--check", spec, NULL };
        assert_int_equal(run_servetune(check, 60), 2);
        snprintf(line, sizeof line, "%s", bad[i].want);
        if (!file_has(log, line))
            fail_msg("case %zu: no '%s' in %s", i, line, log);
        const char *pr[] = { "predict", spec, "-o", tmp, NULL };
        assert_int_equal(run_servetune(pr, 60), 2);
    }
}

/* 8 tasks as write_tasks makes them, but the joins of t3 and t7 carry 1900 prompt tokens of their
 * own: with their workers' answers (60 + 80, and 60 + 80 + 100) and 100 output tokens they need 2140
 * and 2240 tokens, over a --max-model-len of 2048; every other node needs at most 1340. */
static void write_tasks_over(const char *path)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int t = 0; t < 8; t++) {
        int w = 2 + t % 3;
        fprintf(f,
                "{\"task\": \"t%d\", \"id\": \"plan\", \"parents\": [], \"input_tokens\": 800, \"output_tokens\": 80, "
                "\"blocks\": [1, 2, 3], \"block_tokens\": 256, \"start\": %g}\n",
                t, t * 0.5);
        for (int k = 0; k < w; k++)
            fprintf(f,
                    "{\"task\": \"t%d\", \"id\": \"w%d\", \"parents\": [\"plan\"], \"input_tokens\": 400, "
                    "\"output_tokens\": %d, \"gap\": 0.1, \"blocks\": [1]}\n",
                    t, k, 60 + 20 * k);
        fprintf(f, "{\"task\": \"t%d\", \"id\": \"join\", \"parents\": [", t);
        for (int k = 0; k < w; k++)
            fprintf(f, "%s\"w%d\"", k ? ", " : "", k);
        fprintf(f, "], \"input_tokens\": %d, \"output_tokens\": 100, \"gap\": 0.05}\n", t % 4 == 3 ? 1900 : 900);
    }
    fclose(f);
}

static void write_over_spec(const char *spec, const char *trace, const char *max_model_len)
{
    FILE *f = fopen(spec, "w");
    assert_non_null(f);
    fprintf(f,
            "engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100, --time-scale, '10', "
            "--max-model-len, '%s']}\n"
            "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.0}\npeak_rate: 4\n"
            "workload: {trace: %s, requests_per_rate: 40}\nrates: [2]\nwarmup_requests: 0\n"
            "slo: {ttft_p95_ms: 1000, tpot_p95_ms: 60, makespan_p95_ms: 4000}\nsearch: {mode: burst}\n"
            "timeouts: {startup: 8s, request: 60s, stop_grace: 2s}\n",
            max_model_len, trace);
    fclose(f);
}

/* An agent trace some of whose tasks need more than the configuration's context: --check says the
 * tasks and requests left out and names the first node over it; the audit on the emulator (which
 * refuses a request over its --max-model-len, HTTP 400) leaves those tasks out whole, so no
 * request fails, and its report says so; a context no task fits is refused by --check. */
static void agent_tasks_over_context(void **state)
{
    (void)state;
    char trace[400], spec[400], out[400], log[500], p[500];
    snprintf(trace, sizeof trace, "%s/over.jsonl", tmp);
    snprintf(spec, sizeof spec, "%s/over.yaml", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    snprintf(log, sizeof log, "%s/servetune.out", tmp);
    write_tasks_over(trace);
    write_over_spec(spec, trace, "2048");
    const char *check[] = { "audit", "--check", spec, NULL };
    assert_int_equal(run_servetune(check, 60), 0);
    if (!file_has(log, "2 of the agent trace's 8 tasks (25.0 %; 9 of its 39 requests) hold a request longer") ||
        !file_has(log, "the first: node join of task t3, 2140 tokens"))
        fail_msg("--check did not say the tasks over the context (%s)", log);
    const char *args[] = { "audit", spec, "-o", out, "-q", NULL };
    assert_int_equal(run_servetune(args, 120), 0);
    json_t *j = load_json(out);
    json_t *runs = json_object_get(config_named(j, "baseline"), "runs");
    assert_true(json_array_size(runs) == 1);
    json_t *r = json_array_get(runs, 0);
    print_message("# %lld sent, %lld failed\n", (long long)json_integer_value(json_object_get(r, "sent")),
                  (long long)json_integer_value(json_object_get(r, "failed")));
    assert_int_equal(json_integer_value(json_object_get(r, "failed")), 0);
    assert_true(json_integer_value(json_object_get(r, "sent")) >= 40);
    json_decref(j);
    snprintf(p, sizeof p, "%s/report.md", out);
    assert_true(file_has(p, "2 of the agent trace's 8 tasks (25.0 %; 9 of its 39 requests) hold a request longer "
                            "(prompt as grown by its parents' answers + output) than baseline's context of 2048"));
    /* the requests per task of the tasks run: 30 in the 6 left */
    assert_true(file_has(p, "tasks/s (5 requests each on average)"));
    /* every join needs at least 900 + 60 + 80 + 100 = 1140 tokens: no task fits 1024 */
    write_over_spec(spec, trace, "1024");
    assert_int_equal(run_servetune(check, 60), 2);
    assert_true(file_has(log, "every one of the agent trace's 8 tasks holds a request longer"));
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test_setup_teardown(audit_of_an_agent_trace, setup, teardown),
        cmocka_unit_test_setup_teardown(agent_spec_errors_name_the_line, setup, teardown),
        cmocka_unit_test_setup_teardown(agent_tasks_over_context, setup, teardown),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
