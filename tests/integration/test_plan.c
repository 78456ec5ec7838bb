/* servetune plan end to end: the example plan, its written audit spec accepted by
 * `audit --check`, a price list where one GPU is nearly free, and bad input refused whole. */
#include "harness.h"

#include <sys/stat.h>

#define ST_IT_TMP_PREFIX "/tmp/st_plan_it."
#include "audit_util.h"

static void put(const char *name, const char *text, char *path, size_t n)
{
    snprintf(path, n, "%s/%s", tmp, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static json_t *plan_json(const char *dir)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/plan.json", dir);
    json_error_t je;
    json_t *j = json_load_file(p, 0, &je);
    if (!j)
        fail_msg("%s: %s", p, je.text);
    return j;
}

static void example_plan_and_its_spec(void **state)
{
    (void)state;
    char out[600], spec[600], md[700];
    snprintf(out, sizeof out, "%s/out", tmp);
    snprintf(spec, sizeof spec, "%s/measure.yaml", tmp);
    const char *args[] = { "plan", "examples/plan-qwen3-8b.yaml", "-o", out, "--write-spec", spec, "-q", NULL };
    assert_int_equal(run_servetune(args, 300), 0);
    snprintf(md, sizeof md, "%s/plan.md", out);
    const char *sections[] = {
        "# Plan for Qwen/Qwen3-8B", "## Answer",    "The cheapest way found", "## Candidates",
        "candidates explored in",   "## Frontiers", "## A traffic day",       "| the plan's pick |",
        "| the current setup |",    "## Next step", "## Method and limits"
    };
    for (size_t i = 0; i < sizeof sections / sizeof *sections; i++)
        if (!file_has(md, sections[i]))
            fail_msg("plan.md lacks '%s'", sections[i]);
    json_t *j = plan_json(out);
    json_t *best = json_object_get(j, "best");
    assert_true(json_is_object(best));
    assert_string_equal(json_string_value(json_object_get(best, "state")), "ok");
    assert_true(json_real_value(json_object_get(best, "capacity_rps")) > 0);
    json_t *search = json_object_get(j, "search");
    int n = (int)json_integer_value(json_object_get(search, "candidates"));
    assert_int_equal(n, 6 * 3 * 2 * 2 * 2 * 2);
    assert_int_equal(json_array_size(json_object_get(j, "candidates")), (size_t)n);
    assert_true(json_integer_value(json_object_get(search, "evaluated")) < n); /* the bounds prune */
    /* the baseline is the spec's own setup */
    json_t *base = json_object_get(j, "baseline");
    assert_string_equal(json_string_value(json_object_get(base, "gpu")), "H100");
    /* the cheapest is no more expensive than the current setup */
    if (!strcmp(json_string_value(json_object_get(base, "state")), "ok"))
        assert_true(json_real_value(json_object_get(best, "usd_per_1m_output_tokens")) <=
                    json_real_value(json_object_get(base, "usd_per_1m_output_tokens")) + 1e-12);
    assert_true(json_is_object(json_object_get(json_object_get(j, "traffic_day"), "best")));
    /* every candidate that met the SLO has its latency at capacity (the cost-vs-TTFT frontier's
     * axis), within the example's SLO */
    size_t i;
    json_t *c;
    int ok = 0;
    json_array_foreach(json_object_get(j, "candidates"), i, c)
    {
        if (strcmp(json_string_value(json_object_get(c, "state")), "ok"))
            continue;
        ok++;
        double ttft = json_number_value(json_object_get(c, "ttft_p95_ms"));
        double tpot = json_number_value(json_object_get(c, "tpot_p95_ms"));
        if (!(ttft > 0 && ttft <= 1500 && tpot > 0 && tpot <= 50))
            fail_msg("%s: p95 TTFT %g ms, p95 TPOT %g ms at capacity", json_string_value(json_object_get(c, "name")),
                     ttft, tpot);
    }
    assert_true(ok > 0);
    json_decref(j);
    /* the pick as something to run */
    char dep[700];
    snprintf(dep, sizeof dep, "%s/deploy.md", out);
    assert_true(file_has(dep, "# Deploying the plan's pick"));
    assert_true(file_has(dep, "vllm serve"));
    snprintf(dep, sizeof dep, "%s/deploy-k8s.yaml", out);
    assert_true(file_has(dep, "kind: Deployment"));
    /* the written spec is one an audit accepts */
    const char *check[] = { "audit", "--check", spec, NULL };
    assert_int_equal(run_servetune(check, 60), 0);
    assert_true(file_has(spec, "kind: vllm"));
    assert_true(file_has(spec, "planned #1"));
}

/* A price list where one GPU is nearly free: the plan picks it. The provider's name is text from
 * the user's file: plan.md escapes it for Markdown. */
static void free_gpu_wins(void **state)
{
    (void)state;
    char prices[600], specp[600], out[600];
    put("prices.csv",
        "gpu_key,usd_per_gpu_hour,provider\nH100,2.5,x\nH200,3.5,x\nA100,1.5,x\nL40S,0.0001,free_cloud<img src=x>\n",
        prices, sizeof prices);
    put("plan.yaml",
        "engine: {kind: vllm, model: Qwen/Qwen3-8B}\nhardware: {gpu: H100, price_per_gpu_hour: 2.5}\npeak_rate: 10\n"
        "workload: {input_tokens: 1000, output_tokens: 200, requests_per_rate: 100}\nrates: [1, 2, 4, 8]\n"
        "slo: {ttft_p95_ms: 3000, tpot_p95_ms: 100}\n"
        "plan: {gpus_per_replica: [1], kv_cache_dtype: [auto], max_num_seqs: [128], max_num_batched_tokens: [2048], "
        "prices: prices.csv}\n",
        specp, sizeof specp);
    snprintf(out, sizeof out, "%s/out", tmp);
    const char *args[] = { "plan", specp, "-o", out, "-q", NULL };
    assert_int_equal(run_servetune(args, 120), 0);
    json_t *j = plan_json(out);
    json_t *best = json_object_get(j, "best");
    assert_string_equal(json_string_value(json_object_get(best, "gpu")), "L40S");
    assert_string_equal(json_string_value(json_object_get(best, "price_from")), "free_cloud<img src=x>");
    char md[700];
    snprintf(md, sizeof md, "%s/plan.md", out);
    assert_true(file_has(md, "(free\\_cloud&lt;img src=x>)"));
    assert_false(file_has(md, "<img"));
    /* only the GPUs with a price were tried (the catalog's others have none in this list) */
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "search"), "candidates")), 4);
    json_decref(j);
}

static void bad_input_is_refused(void **state)
{
    (void)state;
    char specp[600], out[600], prices[600];
    snprintf(out, sizeof out, "%s/out", tmp);
    put("prices.csv", "gpu_key,usd_per_gpu_hour\nH100,2.5\n", prices, sizeof prices);
    /* a GPU named without a price */
    put("a.yaml",
        "engine: {kind: vllm, model: Qwen/Qwen3-8B}\nhardware: {gpu: H100, price_per_gpu_hour: 2.5}\npeak_rate: 10\n"
        "workload: {input_tokens: 100, output_tokens: 20}\nrates: [1]\nslo: {ttft_p95_ms: 3000, tpot_p95_ms: 100}\n"
        "plan: {gpus: [H100, H200], prices: prices.csv}\n",
        specp, sizeof specp);
    const char *a[] = { "plan", specp, "-o", out, NULL };
    assert_int_equal(run_servetune(a, 60), 2);
    char log[700];
    snprintf(log, sizeof log, "%s/servetune.out", tmp);
    assert_true(file_has(log, "no on-demand price for H200"));
    struct stat st;
    assert_int_equal(stat(out, &st), -1); /* nothing written */
    /* a traffic day with a gap */
    put("b.yaml",
        "engine: {kind: vllm, model: Qwen/Qwen3-8B}\nhardware: {gpu: H100, price_per_gpu_hour: 2.5}\npeak_rate: 10\n"
        "workload: {input_tokens: 100, output_tokens: 20}\nrates: [1]\nslo: {ttft_p95_ms: 3000, tpot_p95_ms: 100}\n"
        "traffic: {hourly_rps: [1, 2, 3]}\n",
        specp, sizeof specp);
    assert_int_equal(run_servetune(a, 60), 2);
    assert_true(file_has(log, "traffic.hourly_rps: a list of exactly 24 request rates"));
    put("c.yaml",
        "engine: {kind: vllm, model: Qwen/Qwen3-8B}\nhardware: {gpu: H100, price_per_gpu_hour: 2.5}\npeak_rate: 10\n"
        "workload: {input_tokens: 100, output_tokens: 20}\nrates: [1]\nslo: {ttft_p95_ms: 3000, tpot_p95_ms: 100}\n"
        "traffic: {hourly_rps: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, -12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, "
        "24]}\n",
        specp, sizeof specp);
    assert_int_equal(run_servetune(a, 60), 2);
    assert_true(file_has(log, "traffic.hourly_rps[11]: must be >= 0"));
    /* a model that fits no candidate: a plan that says which constraint */
    put("d.yaml",
        "engine: {kind: vllm, model: meta-llama/Llama-3.1-70B-Instruct}\n"
        "hardware: {gpu: H100, price_per_gpu_hour: 2.5}\npeak_rate: 10\n"
        "workload: {input_tokens: 100, output_tokens: 20}\nrates: [1]\nslo: {ttft_p95_ms: 3000, tpot_p95_ms: 100}\n"
        "plan: {gpus: [RTX4090, L40S], gpus_per_replica: [1], kv_cache_dtype: [auto], max_num_seqs: [64], "
        "max_num_batched_tokens: [2048]}\n",
        specp, sizeof specp);
    const char *d[] = { "plan", specp, "-o", out, "-q", NULL };
    assert_int_equal(run_servetune(d, 120), 0);
    char md[700];
    snprintf(md, sizeof md, "%s/plan.md", out);
    assert_true(file_has(md, "No candidate met the SLO"));
    assert_true(file_has(md, "## Why not the others"));
    assert_true(file_has(md, "2 refused") || file_has(md, "1 refused"));
    assert_true(file_has(md, "memory") || file_has(md, "OutOfMemory") || file_has(md, "KV cache"));
    /* --write-spec naming the spec itself: refused, the spec left as it was */
    const char *w[] = { "plan", specp, "-o", out, "--write-spec", specp, NULL };
    assert_int_equal(run_servetune(w, 60), 2);
    assert_true(file_has(log, "is the spec it reads"));
    assert_true(file_has(specp, "meta-llama/Llama-3.1-70B-Instruct"));
    /* an output folder that cannot be made is said before the search (exit 2), not after it */
    char under_file[800];
    snprintf(under_file, sizeof under_file, "%s/sub", md);
    const char *e[] = { "plan", specp, "-o", under_file, NULL };
    assert_int_equal(run_servetune(e, 60), 2);
    assert_true(file_has(log, "servetune plan: cannot write the outputs:"));
    assert_false(file_has(log, "candidates on the engine model"));
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test_setup_teardown(example_plan_and_its_spec, setup, teardown),
        cmocka_unit_test_setup_teardown(free_gpu_wins, setup, teardown),
        cmocka_unit_test_setup_teardown(bad_input_is_refused, setup, teardown),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
