/* Agent task graphs end to end: `servetune bench` replays the sample traces (examples/: a WEKA-style
 * agentic trace with two sub-agents joined and one in the background; task-graph JSONL with a
 * fan-out of three and of two, each joined) against `servetune emulate serve` over HTTP, and
 * `servetune predict --agents` replays them on the engine model in virtual time: each task's
 * makespan within 10 % of the emulator's; `servetune trace stats` gives the sample's request
 * count, per-request input lengths and ideal prefix-cache hit rate (leading blocks already seen,
 * in time order); a cycle or a missing parent is refused with file:line. */
#include "harness.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>

#include "core/file.h"
#include "emu_util.h"

static json_t *load_json(const char *path)
{
    json_error_t e;
    json_t *o = json_load_file(path, 0, &e);
    if (!o)
        fail_msg("%s: %s", path, e.text);
    return o;
}

static double tasks_num(json_t *doc, const char *dist, const char *k)
{
    json_t *t = json_object_get(doc, "tasks");
    assert_non_null(t);
    json_t *d = dist ? json_object_get(t, dist) : t;
    assert_non_null(d);
    return json_number_value(json_object_get(d, k));
}

/* bench against the emulator and predict on the model, for one trace; their makespans */
static void compare(int port, const char *trace, int tasks)
{
    char url[64], bj[128], pj[128], blog[128], plog[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    snprintf(bj, sizeof bj, "/tmp/st-agents-bench-%d.json", (int)getpid());
    snprintf(pj, sizeof pj, "/tmp/st-agents-pred-%d.json", (int)getpid());
    snprintf(blog, sizeof blog, "/tmp/st-agents-bench-%d.log", (int)getpid());
    snprintf(plog, sizeof plog, "/tmp/st-agents-pred-%d.log", (int)getpid());
    /* (the self-check threshold is raised: the client shares the machine's cores with the
     * emulator and other tests; the makespans, not the client's lag, are compared here) */
    const char *b[] = { "servetune", "bench", "--url",   url,      "--api", "completions", "--trace", trace,
                        "--max-lag", "1000",  "--quiet", "--json", bj,      NULL };
    int rc = run_cli(b, blog);
    if (rc != 0)
        fail_msg("bench exited %d (log %s)", rc, blog);
    const char *p[] = { "servetune", "predict", "--agents", trace,    "--model", "Qwen/Qwen3-8B",
                        "--gpu",     "H100",    "--quiet",  "--json", pj,        NULL };
    rc = run_cli(p, plog);
    if (rc != 0)
        fail_msg("predict exited %d (log %s)", rc, plog);
    json_t *B = load_json(bj), *P = load_json(pj);
    assert_int_equal((int)tasks_num(B, NULL, "completed"), tasks);
    assert_int_equal((int)tasks_num(P, NULL, "completed"), tasks);
    json_t *cfg = json_object_get(B, "config");
    assert_string_equal(json_string_value(json_object_get(json_object_get(cfg, "workload"), "kind")), "agents");
    const char *ks[] = { "min", "max" };
    for (int k = 0; k < 2; k++) {
        double mb = tasks_num(B, "makespan_ms", ks[k]), mp = tasks_num(P, "makespan_ms", ks[k]);
        printf("%s: makespan %s: emulator %.1f ms, predicted %.1f ms (%+.1f %%)\n", trace, ks[k], mb, mp,
               100 * (mp - mb) / mb);
        assert_true(mb > 0 && mp > 0);
        assert_true(fabs(mp - mb) <= 0.10 * mb);
    }
    /* the critical path holds at least the task's depth + 1 requests */
    assert_true(tasks_num(B, NULL, "critical_path_nodes_max") >= 3);
    json_decref(B);
    json_decref(P);
    remove(bj);
    remove(pj);
    remove(blog);
    remove(plog);
}

static void bench_and_predict_agree(void **state)
{
    (void)state;
    emu_child c;
    assert_int_equal(emu_start(&c, "Qwen/Qwen3-8B", "H100", NULL, 1), 0);
    compare(c.port, "examples/agent-tasks.jsonl", 2);
    compare(c.port, "examples/agent-weka-sample.json", 1);
    emu_stop(&c);
}

static void trace_stats_of_the_sample(void **state)
{
    (void)state;
    char js[128], log[128];
    snprintf(js, sizeof js, "/tmp/st-agents-stats-%d.json", (int)getpid());
    snprintf(log, sizeof log, "/tmp/st-agents-stats-%d.log", (int)getpid());
    const char *a[] = { "servetune", "trace", "stats", "examples/agent-weka-sample.json", "--json", js, NULL };
    assert_int_equal(run_cli(a, log), 0);
    json_t *o = load_json(js);
    assert_string_equal(json_string_value(json_object_get(o, "format")), "weka");
    assert_int_equal(json_integer_value(json_object_get(o, "requests")), 7);
    const int in[7] = { 300, 200, 260, 150, 420, 100, 500 };
    json_t *il = json_object_get(o, "input_lengths");
    assert_int_equal(json_array_size(il), 7);
    for (size_t i = 0; i < 7; i++)
        assert_int_equal(json_integer_value(json_array_get(il, i)), in[i]);
    assert_true(fabs(json_number_value(json_object_get(o, "ideal_prefix_hit_rate")) - 1280.0 / 1930.0) < 1e-9);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(o, "fan_out"), "width_max")), 3);
    assert_int_equal(json_integer_value(json_object_get(o, "depth_max")), 4);
    json_decref(o);
    remove(js);
    /* a cycle: file:line: reason, exit 2 */
    char bad[128];
    snprintf(bad, sizeof bad, "/tmp/st-agents-bad-%d.jsonl", (int)getpid());
    FILE *f = fopen(bad, "w");
    assert_non_null(f);
    fputs("{\"task\": \"t\", \"id\": \"a\", \"parents\": [], \"input_tokens\": 10, \"output_tokens\": 5}\n"
          "{\"task\": \"t\", \"id\": \"b\", \"parents\": [\"a\", \"c\"], \"input_tokens\": 10, \"output_tokens\": 5}\n"
          "{\"task\": \"t\", \"id\": \"c\", \"parents\": [\"b\"], \"input_tokens\": 10, \"output_tokens\": 5}\n",
          f);
    fclose(f);
    const char *b[] = { "servetune", "trace", "stats", bad, NULL };
    assert_int_equal(run_cli(b, log), 2);
    size_t len;
    char err[256];
    char *text = st_read_file(log, 1 << 16, &len, err, sizeof err);
    assert_non_null(text);
    char want[200];
    snprintf(want, sizeof want, "%s:2: node b of task t is on a cycle", bad);
    if (!strstr(text, want))
        fail_msg("expected \"%s\" in: %s", want, text);
    free(text);
    remove(bad);
    remove(log);
}

/* An audit spec with synthetic agent tasks (sessions: fan_out) on the engine model: report.json and
 * report.md give the tasks' makespan at the capacity; a makespan SLO no task can meet fails every
 * rate, one every task meets passes. An agent trace as the spec's workload.trace replays whole
 * tasks (a burst run of 14 requests: the WEKA sample's task of 7, twice). */
static void predict_fan_out_spec(void **state)
{
    (void)state;
    char spec[128], out[128], log[128], p[200];
    snprintf(spec, sizeof spec, "/tmp/st-agents-spec-%d.yaml", (int)getpid());
    snprintf(out, sizeof out, "/tmp/st-agents-pred-%d", (int)getpid());
    snprintf(log, sizeof log, "/tmp/st-agents-predspec-%d.log", (int)getpid());
    const double limits[2] = { 60000, 300 };
    for (int k = 0; k < 2; k++) {
        FILE *f = fopen(spec, "w");
        assert_non_null(f);
        fprintf(f,
                "engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100]}\n"
                "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.49}\npeak_rate: 2\n"
                "workload: {input_tokens: 1500, output_tokens: 150, shared_prefix: 500, requests_per_rate: 90,\n"
                "  sessions: {turns: 3, fan_out: 2-4, user_tokens: 80, think_time: 200ms}}\n"
                "rates: [0.5, 1]\nsearch: {mode: burst}\n"
                "slo: {ttft_p95_ms: 1500, tpot_p95_ms: 50, makespan_p95_ms: %g}\n",
                limits[k]);
        fclose(f);
        const char *a[] = { "servetune", "predict", spec, "-o", out, "-q", NULL };
        assert_int_equal(run_cli(a, log), 0);
        snprintf(p, sizeof p, "%s/report.json", out);
        json_t *j = load_json(p);
        json_t *c = json_array_get(json_object_get(j, "configurations"), 0);
        json_t *cap = json_object_get(c, "capacity");
        if (k == 0) {
            json_t *ss = json_object_get(cap, "sessions");
            assert_true(json_integer_value(json_object_get(ss, "tasks_completed")) >= 5);
            double m50 = json_number_value(json_object_get(ss, "makespan_p50_ms"));
            double m95 = json_number_value(json_object_get(ss, "makespan_p95_ms"));
            assert_true(m50 > 4 * 200 && m95 >= m50 && m95 < limits[0]); /* four gaps of 200 ms at least */
            snprintf(p, sizeof p, "%s/report.md", out);
            size_t len;
            char err[256];
            char *md = st_read_file(p, 1 << 22, &len, err, sizeof err);
            assert_non_null(md);
            assert_non_null(strstr(md, "| Makespan p50 (s) | Makespan p95 (s) |"));
            assert_non_null(strstr(md, "p95 MAKESPAN <= 60000 ms"));
            free(md);
        } else {
            /* no task ends within 300 ms: every rate fails on the makespan */
            assert_true(json_is_null(json_object_get(cap, "rps")) ||
                        !json_is_true(json_object_get(cap, "pass_confident")));
            json_t *runs = json_object_get(c, "runs");
            assert_true(json_array_size(runs) >= 1);
            size_t i;
            json_t *rr;
            json_array_foreach(runs, i, rr)
                assert_string_not_equal(json_string_value(json_object_get(rr, "verdict")), "pass");
        }
        json_decref(j);
    }
    /* an agent trace as a spec's workload.trace: its task graphs replayed, the rates in tasks/s */
    FILE *f = fopen(spec, "w");
    assert_non_null(f);
    char cwd[512];
    assert_non_null(getcwd(cwd, sizeof cwd));
    fprintf(f,
            "engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100]}\n"
            "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2}\npeak_rate: 1\nrates: [1]\n"
            "slo: {ttft_p95_ms: 1000, tpot_p95_ms: 100}\nsearch: {mode: burst}\n"
            "workload: {trace: %s/examples/agent-weka-sample.json, requests_per_rate: 14}\n",
            cwd);
    fclose(f);
    const char *a[] = { "servetune", "predict", spec, "-o", out, "-q", NULL };
    assert_int_equal(run_cli(a, log), 0);
    snprintf(p, sizeof p, "%s/report.json", out);
    json_t *j = load_json(p);
    json_t *w = json_object_get(json_object_get(j, "spec"), "workload");
    assert_string_equal(json_string_value(json_object_get(w, "kind")), "agent_trace");
    assert_string_equal(json_string_value(json_object_get(w, "agent_format")), "weka");
    json_t *ss = json_object_get(json_object_get(json_array_get(json_object_get(j, "configurations"), 0), "capacity"),
                                 "sessions");
    /* 14 requests: the sample's one task (7 requests) twice, each pass whole */
    assert_int_equal(json_integer_value(json_object_get(ss, "tasks_completed")), 2);
    json_decref(j);
    remove(spec);
    remove(log);
}

/* bench against a server of --max-model-len 2048: of 4 tasks (a planner, two workers of 60 and 80
 * tokens, a join), the join of t1 carries 1900 tokens of its own, 2140 with its workers' answers and
 * its output; that task is left out whole and said, and no request is refused (the emulator
 * answers HTTP 400 to one over its context). */
static void bench_leaves_out_tasks_over_context(void **state)
{
    (void)state;
    char trace[128], bj[128], blog[128], url[64], *log;
    snprintf(trace, sizeof trace, "/tmp/st-agents-over-%d.jsonl", (int)getpid());
    snprintf(bj, sizeof bj, "/tmp/st-agents-over-%d.json", (int)getpid());
    snprintf(blog, sizeof blog, "/tmp/st-agents-over-%d.log", (int)getpid());
    FILE *f = fopen(trace, "w");
    assert_non_null(f);
    for (int t = 0; t < 4; t++)
        fprintf(f,
                "{\"task\": \"t%d\", \"id\": \"plan\", \"parents\": [], \"input_tokens\": 800, \"output_tokens\": 80}\n"
                "{\"task\": \"t%d\", \"id\": \"w0\", \"parents\": [\"plan\"], \"input_tokens\": 400, "
                "\"output_tokens\": 60}\n"
                "{\"task\": \"t%d\", \"id\": \"w1\", \"parents\": [\"plan\"], \"input_tokens\": 400, "
                "\"output_tokens\": 80}\n"
                "{\"task\": \"t%d\", \"id\": \"join\", \"parents\": [\"w0\", \"w1\"], \"input_tokens\": %d, "
                "\"output_tokens\": 100}\n",
                t, t, t, t, t == 1 ? 1900 : 900);
    fclose(f);
    emu_child c;
    const char *extra[] = { "--max-model-len", "2048", NULL };
    assert_int_equal(emu_start(&c, "Qwen/Qwen3-8B", "H100", extra, 1), 0);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", c.port);
    const char *b[] = { "servetune", "bench", "--url",   url,      "--api", "completions", "--trace", trace,
                        "--max-lag", "1000",  "--quiet", "--json", bj,      NULL };
    int rc = run_cli(b, blog);
    emu_stop(&c);
    if (rc != 0)
        fail_msg("bench exited %d (log %s)", rc, blog);
    size_t len;
    char err[256];
    log = st_read_file(blog, 1 << 20, &len, err, sizeof err);
    assert_non_null(log);
    if (!strstr(log, "1 of the agent trace's 4 tasks (4 of its 16 requests) hold a request longer") ||
        !strstr(log, "the first: node join of task t1, 2140 tokens"))
        fail_msg("bench did not say the task left out: %s", log);
    free(log);
    json_t *B = load_json(bj);
    assert_int_equal((int)tasks_num(B, NULL, "completed"), 3);
    json_t *req = json_object_get(json_object_get(B, "summary"), "requests");
    assert_int_equal(json_integer_value(json_object_get(req, "sent")), 12);
    assert_int_equal(json_integer_value(json_object_get(req, "failed")), 0);
    json_decref(B);
    remove(trace);
    remove(bj);
    remove(blog);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(trace_stats_of_the_sample),
        cmocka_unit_test(bench_and_predict_agree),
        cmocka_unit_test(predict_fan_out_spec),
        cmocka_unit_test(bench_leaves_out_tasks_over_context),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
