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

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(trace_stats_of_the_sample),
        cmocka_unit_test(bench_and_predict_agree),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
