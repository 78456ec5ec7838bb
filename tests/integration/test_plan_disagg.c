/* servetune plan --disagg end to end: the pick priced as disaggregated prefill/decode workers
 * beside the same GPUs aggregated, the rate matching written out, the queueing capacity in
 * disagg.json the two-pool engine-model run's (st_disagg_sim_capacity) for the picked xPyD, a slow connector reported with
 * the bandwidth it needed, the deploy snippet saying nothing was measured, and a bad connector
 * refused before the search. */
#include "harness.h"

#include <jansson.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#include "audit/executor.h"
#include "audit/spec.h"
#include "audit/sweep.h"
#include "core/file.h"
#include "emu/sim.h"
#include "load/workload.h"
#include "plan/disagg_sim.h"

#define ST_IT_TMP_PREFIX "/tmp/st_plan_disagg_it."
#include "audit_util.h"

static void put(const char *name, const char *text, char *path, size_t n)
{
    snprintf(path, n, "%s/%s", tmp, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static const char *spec_text =
    "engine: {kind: vllm, model: Qwen/Qwen3-8B}\nhardware: {gpu: H100, price_per_gpu_hour: 2.5}\npeak_rate: 10\n"
    "workload: {input_tokens: 4000, output_tokens: 200, requests_per_rate: 100}\nrates: [1, 2, 4, 8]\n"
    "slo: {ttft_p95_ms: 3000, tpot_p95_ms: 100}\n"
    "plan: {gpus: [H100], gpus_per_replica: [1], kv_cache_dtype: [auto], max_num_seqs: [128], "
    "max_num_batched_tokens: [2048]}\n";

static double num(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_number(v))
        fail_msg("disagg.json: no number %s", key);
    return json_number_value(v);
}

/* st_disagg_sim_capacity for configuration ci of spec_path as x prefill and y decode workers
 * of tp GPUs over connector, searched from start with `requests` requests to tolerance tol. */
static st_disagg_sim two_pool_capacity(const char *spec_path, int ci, int x, int y, int tp, const char *connector,
                                       double start, uint32_t requests, double tol)
{
    char err[512];
    size_t len;
    char *text = st_read_file(spec_path, 1 << 20, &len, err, sizeof err);
    if (!text)
        fail_msg("%s", err);
    st_spec s;
    if (st_spec_parse(spec_path, text, len, &s, err, sizeof err))
        fail_msg("%s", err);
    free(text);
    assert_true(ci < s.n_configs);
    st_emu_config cfg;
    if (st_exec_model_config(&s, &s.configs[ci], &cfg, NULL, 0, NULL, err, sizeof err))
        fail_msg("%s", err);
    st_disagg_work wk;
    st_disagg_work_of_spec(&s, &wk);
    st_workload w;
    if (st_sweep_workload(&s, s.workload.seed, requests, &w, err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(w.n, requests);
    st_emu_sim_item *items = calloc(w.n, sizeof *items);
    assert_non_null(items);
    st_emu_sim_items_from_workload(&w, NULL, items);
    st_disagg_link l;
    assert_int_equal(st_disagg_link_find(connector, &l), 0);
    st_disagg_sim c;
    if (st_disagg_sim_capacity(&cfg, items, w.n, x, y, tp, &l, &wk, start, s.workload.seed, tol, &c, err, sizeof err))
        fail_msg("%s", err);
    free(items);
    st_workload_free(&w);
    st_spec_free(&s);
    return c;
}

static json_t *load_disagg_json(const char *out)
{
    char path[700];
    snprintf(path, sizeof path, "%s/disagg.json", out);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root)
        fail_msg("%s: %s", path, je.text);
    assert_true(json_is_false(json_object_get(root, "measured")));
    return root;
}

/* disagg.json's queueing capacity is st_disagg_sim_capacity's for the picked xPyD of the pick
 * (the spec --write-spec wrote for it), searched from the static figure, which stays the rate
 * matching (min(x P s_p, y D s_d), the link limit applied). */
static void queueing_capacity_is_the_two_pool_runs(const char *out, const char *pick_spec)
{
    json_t *root = load_disagg_json(out);
    int x = (int)num(root, "x"), y = (int)num(root, "y"), tp = (int)num(root, "gpus_per_replica");
    json_t *st = json_object_get(root, "static"), *q = json_object_get(root, "queueing");
    double matched = st_disagg_rate_match(num(st, "prefill_worker_rps"), x, num(st, "prefill_scale"),
                                          num(st, "decode_worker_rps"), y, num(st, "decode_scale"));
    assert_false(json_is_true(json_object_get(st, "link_limited")));
    assert_true(num(st, "rps") == matched);
    assert_true(num(q, "start_rps") == num(st, "rps"));
    st_disagg_sim c = two_pool_capacity(pick_spec, 0, x, y, tp, json_string_value(json_object_get(root, "connector")),
                                        num(st, "rps"), (uint32_t)num(q, "requests"), num(q, "tolerance"));
    if (!(c.rate > 0) || num(q, "capacity_rps") != c.rate)
        fail_msg("disagg.json queueing capacity %.17g, the two-pool run's %.17g", num(q, "capacity_rps"), c.rate);
    json_t *cap = json_object_get(q, "capacity");
    assert_true(num(cap, "ttft_p95_ms") == c.ttft_p95_s * 1e3);
    assert_true(num(cap, "tpot_p95_ms") == c.tpot_p95_s * 1e3);
    assert_true(json_is_true(json_object_get(cap, "meets_slo")));
    /* plan.md and plan.json name both figures of the pick */
    char path[700];
    snprintf(path, sizeof path, "%s/plan.md", out);
    assert_true(file_has(path, "**static**"));
    assert_true(file_has(path, "**with queueing**"));
    snprintf(path, sizeof path, "%s/plan.json", out);
    json_error_t je;
    json_t *plan = json_load_file(path, 0, &je);
    if (!plan)
        fail_msg("%s: %s", path, je.text);
    json_t *d = json_object_get(plan, "disaggregated");
    assert_int_equal((int)num(d, "x"), x);
    assert_int_equal((int)num(d, "y"), y);
    assert_true(fabs(num(d, "static_rps") - num(st, "rps")) <= 1e-8 * num(st, "rps"));
    assert_true(fabs(num(d, "queueing_capacity_rps") - c.rate) <= 1e-8 * c.rate);
    json_decref(plan);
    json_decref(root);
}

/* The next top candidate (--top 2): its own xPyD with both figures, its queueing capacity the
 * two-pool run's for it (the second configuration --write-spec wrote, the same machine). */
static void next_top_candidate_priced_too(void **state)
{
    (void)state;
    char specp[600], out[600], md[700], pick[600];
    put("two.yaml",
        "engine: {kind: vllm, model: Qwen/Qwen3-8B}\nhardware: {gpu: H100, price_per_gpu_hour: 2.5}\npeak_rate: 10\n"
        "workload: {input_tokens: 4000, output_tokens: 200, requests_per_rate: 100}\nrates: [1, 2, 4, 8]\n"
        "slo: {ttft_p95_ms: 3000, tpot_p95_ms: 100}\n"
        "plan: {gpus: [H100], gpus_per_replica: [1], kv_cache_dtype: [auto], max_num_seqs: [32, 128], "
        "max_num_batched_tokens: [2048]}\n",
        specp, sizeof specp);
    snprintf(out, sizeof out, "%s/out", tmp);
    snprintf(pick, sizeof pick, "%s/pick.yaml", tmp);
    const char *a[] = { "plan", specp, "-o", out, "-q", "--disagg", "--top", "2", "--write-spec", pick, NULL };
    assert_int_equal(run_servetune(a, 300), 0);
    snprintf(md, sizeof md, "%s/disagg.md", out);
    assert_true(file_has(md, "The next top candidates, disaggregated"));
    json_t *root = load_disagg_json(out);
    json_t *others = json_object_get(root, "others");
    if (json_array_size(others) != 1)
        fail_msg("disagg.json: %zu other candidates, not 1", json_array_size(others));
    json_t *e = json_array_get(others, 0);
    assert_null(json_object_get(e, "error"));
    assert_true(num(e, "static_rps") > 0);
    st_disagg_sim c = two_pool_capacity(pick, 1, (int)num(e, "x"), (int)num(e, "y"), 1,
                                        json_string_value(json_object_get(e, "connector")), num(e, "static_rps"),
                                        (uint32_t)num(json_object_get(root, "queueing"), "requests"),
                                        num(json_object_get(root, "queueing"), "tolerance"));
    if (!(c.rate > 0) || num(e, "queueing_capacity_rps") != c.rate)
        fail_msg("disagg.json next candidate's queueing capacity %.17g, the two-pool run's %.17g",
                 num(e, "queueing_capacity_rps"), c.rate);
    json_decref(root);
}

static void disaggregated_beside_aggregated(void **state)
{
    (void)state;
    char specp[600], out[600], md[700];
    put("plan.yaml", spec_text, specp, sizeof specp);
    snprintf(out, sizeof out, "%s/out", tmp);
    char pick[600];
    snprintf(pick, sizeof pick, "%s/pick.yaml", tmp);
    const char *args[] = { "plan",  specp, "-o",           out,  "-q", "--disagg", "--disagg-gpus", "8",
                           "--top", "1",   "--write-spec", pick, NULL };
    assert_int_equal(run_servetune(args, 300), 0);
    snprintf(md, sizeof md, "%s/disagg.md", out);
    assert_true(file_has(md, "no disaggregated setup was measured"));
    assert_true(file_has(md, "over nvlink")); /* the H100 has NVLink: the default connector */
    assert_true(file_has(md, "rate matched: min("));
    assert_true(file_has(md, "x 0.90,"));
    assert_true(file_has(md, "x 0.92)"));
    assert_true(file_has(md, "aggregated, 8 replicas"));
    /* with queueing: the p95 TTFT and TPOT at a stated load, and the capacity within the SLO */
    assert_true(file_has(md, "With queueing"));
    assert_true(file_has(md, "p95 TTFT"));
    assert_true(file_has(md, "the highest rate within the SLO") || file_has(md, "no rate meets the SLO"));
    assert_true(file_has(md, "--kv-transfer-config"));
    assert_true(file_has(md, "\"kv_role\":\"kv_producer\""));
    assert_false(file_has(md, "cannot keep up"));
    /* which figure is which: the static rate matching, the queueing capacity of both pools run */
    assert_true(file_has(md, "Which figure is which"));
    assert_true(file_has(md, "With queueing (both pools on the engine model)"));
    queueing_capacity_is_the_two_pool_runs(out, pick);
    /* the scales are options */
    const char *b[] = {
        "plan", specp, "-o", out, "-q", "--disagg", "--prefill-scale", "1", "--decode-scale", "1", NULL
    };
    assert_int_equal(run_servetune(b, 300), 0);
    assert_true(file_has(md, "x 1.00,"));
    assert_true(file_has(md, "x 1.00)"));
}

static void slow_connector_and_bad_input(void **state)
{
    (void)state;
    char specp[600], out[600], md[700];
    /* a small model prefills fast and its KV is large for its size (28 layers x 8 KV heads x 128 x
     * 2 bytes, 114 KB a token): more than Ethernet carries (2,000-token prompts: ~15.5 GB/s a
     * prefill worker against 12.5; 4,000-token ones came to ~11.3 with the step's piecewise-graph
     * gaps and the refitted CPU per step) */
    put("long.yaml",
        "engine: {kind: vllm, model: Qwen/Qwen3-0.6B}\nhardware: {gpu: H100, price_per_gpu_hour: 2.5}\npeak_rate: 10\n"
        "workload: {input_tokens: 2000, output_tokens: 100, requests_per_rate: 100}\nrates: [2, 4, 8]\n"
        "slo: {ttft_p95_ms: 3000, tpot_p95_ms: 100}\n"
        "plan: {gpus: [H100], gpus_per_replica: [1], kv_cache_dtype: [auto], max_num_seqs: [64], "
        "max_num_batched_tokens: [8192]}\n",
        specp, sizeof specp);
    snprintf(out, sizeof out, "%s/out", tmp);
    const char *a[] = { "plan", specp, "-o", out, "-q", "--disagg", "--connector", "ethernet", NULL };
    assert_int_equal(run_servetune(a, 300), 0);
    snprintf(md, sizeof md, "%s/disagg.md", out);
    if (!file_has(md, "cannot keep up"))
        fail_msg("%s: no word of the KV transfer that Ethernet cannot carry", md);
    assert_true(file_has(md, "GB/s over ethernet"));
    /* progress: silent off a terminal, a line each step with --progress (even with -q) */
    char log[700];
    snprintf(log, sizeof log, "%s/servetune.out", tmp);
    assert_false(file_has(log, "settled"));
    const char *p[] = { "plan", specp, "-o", out, "-q", "--progress", NULL };
    assert_int_equal(run_servetune(p, 300), 0);
    assert_true(file_has(log, "1 candidates: 1 settled, 0 pruned, 0 left"));
    /* an unknown connector: refused before anything runs */
    char out2[600];
    snprintf(out2, sizeof out2, "%s/out2", tmp);
    const char *c[] = { "plan", specp, "-o", out2, "--disagg", "--connector", "smoke-signals", NULL };
    assert_int_equal(run_servetune(c, 60), 2);
    assert_true(file_has(log, "nvlink, infiniband, pcie, ethernet"));
    struct stat st;
    assert_int_equal(stat(out2, &st), -1);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test_setup_teardown(disaggregated_beside_aggregated, setup, teardown),
        cmocka_unit_test_setup_teardown(slow_connector_and_bad_input, setup, teardown),
        cmocka_unit_test_setup_teardown(next_top_candidate_priced_too, setup, teardown),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
