/* servetune predict --disagg end to end: each configuration of the spec also priced as the best
 * xPyD at equal GPUs in report.md and report.json, marked as a prediction with nothing measured;
 * its rate equal to AIConfigurator's rate matching computed from the per-worker rates it reports;
 * a connector too slow for long prompts reported with the bandwidth it needed; the section kept
 * when the report is re-rendered; a bad connector refused before anything runs. */
#include "harness.h"

#include <jansson.h>
#include <math.h>
#include <sys/stat.h>

#define ST_IT_TMP_PREFIX "/tmp/st_predict_disagg_it."
#include "audit_util.h"

static void put(const char *name, const char *text, char *path, size_t n)
{
    snprintf(path, n, "%s/%s", tmp, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* report.json's disaggregated configuration i (a new reference; the caller frees root). */
static json_t *disagg_config(const char *out, int i, json_t **root)
{
    char path[700];
    snprintf(path, sizeof path, "%s/report.json", out);
    json_error_t je;
    *root = json_load_file(path, 0, &je);
    if (!*root)
        fail_msg("%s: %s", path, je.text);
    json_t *d = json_object_get(*root, "disaggregated");
    if (!json_is_object(d))
        fail_msg("%s: no \"disaggregated\" object", path);
    if (!json_is_false(json_object_get(d, "measured")))
        fail_msg("%s: the disaggregated section does not say it was not measured", path);
    json_t *c = json_array_get(json_object_get(d, "configurations"), (size_t)i);
    if (!json_is_object(c))
        fail_msg("%s: no disaggregated configuration %d", path, i);
    return c;
}

static double num(json_t *c, const char *key)
{
    json_t *v = json_object_get(c, key);
    if (!json_is_number(v))
        fail_msg("report.json disaggregated: no number %s", key);
    return json_number_value(v);
}

static const char *spec_text =
    "engine: {kind: vllm, model: Qwen/Qwen3-8B}\nhardware: {gpu: H100, price_per_gpu_hour: 2.5}\npeak_rate: 10\n"
    "workload: {input_tokens: 2000, output_tokens: 200, seed: 1, requests_per_rate: 60}\nrates: [1, 4]\n"
    "slo: {ttft_p95_ms: 3000, tpot_p95_ms: 100}\nsearch: {mode: burst}\n"
    "configurations:\n  - name: tp1\n  - name: tp2\n    add_flags: [--tensor-parallel-size, '2']\n";

static void each_configuration_priced_disaggregated(void **state)
{
    (void)state;
    char specp[600], out[600], md[700];
    put("p.yaml", spec_text, specp, sizeof specp);
    snprintf(out, sizeof out, "%s/out", tmp);
    snprintf(md, sizeof md, "%s/report.md", out);
    /* without --disagg: no section */
    const char *plain[] = { "predict", specp, "-o", out, "-q", NULL };
    assert_int_equal(run_servetune(plain, 300), 0);
    assert_false(file_has(md, "Disaggregated prefill/decode"));
    const char *a[] = { "predict", specp, "-o", out, "-q", "--disagg", "--disagg-gpus", "8", NULL };
    assert_int_equal(run_servetune(a, 300), 0);
    if (!file_has(md, "## Disaggregated prefill/decode (a prediction)"))
        fail_msg("%s: no disaggregated section", md);
    assert_true(file_has(md, "no disaggregated setup was measured"));
    assert_true(file_has(md, "rate matched: min("));
    assert_true(file_has(md, "--kv-transfer-config"));
    assert_false(file_has(md, "cannot keep up"));
    const char *names[] = { "tp1", "tp2" };
    for (int i = 0; i < 2; i++) {
        json_t *root;
        json_t *c = disagg_config(out, i, &root);
        assert_string_equal(json_string_value(json_object_get(c, "configuration")), names[i]);
        assert_string_equal(json_string_value(json_object_get(c, "connector")), "nvlink");
        double x = num(c, "x"), y = num(c, "y"), p = num(c, "prefill_worker_rps"), d = num(c, "decode_worker_rps");
        /* equal GPUs: x + y workers of the configuration's tensor parallelism make the 8 GPUs */
        if ((x + y) * (i + 1) != 8)
            fail_msg("%s: %gP%gD workers of %d GPUs are not 8 GPUs", names[i], x, y, i + 1);
        /* parity: the rate is AIConfigurator's min(x P 0.9, y D 0.92), the link not binding */
        double want = fmin(x * p * 0.9, y * d * 0.92), got = num(c, "rps");
        assert_false(json_is_true(json_object_get(c, "link_limited")));
        if (!(want > 0) || fabs(got - want) > 1e-9 * want)
            fail_msg("%s: %.12g requests/s, the rate matching gives %.12g", names[i], got, want);
        assert_true(fabs(num(c, "rate_matched_rps") - want) <= 1e-9 * want);
        /* beside the same GPUs aggregated at the predicted capacity */
        if (!(num(c, "aggregated_rps") > 0))
            fail_msg("%s: no aggregated capacity beside the disaggregated one", names[i]);
        /* with queueing: a run at each rate (the 4 fractions of the static figure, the aggregated
         * capacity, the capacity at the SLO), the queue growing with the rate */
        json_t *q = json_object_get(c, "queueing"), *rates = json_object_get(q, "rates");
        if (json_array_size(rates) != 6)
            fail_msg("%s: %zu queueing rows, not 6", names[i], json_array_size(rates));
        double t_lo = num(json_array_get(rates, 0), "ttft_p95_ms"), t_hi = num(json_array_get(rates, 3), "ttft_p95_ms");
        if (!(t_hi > t_lo && t_lo >= num(c, "ttft_static_ms")))
            fail_msg("%s: p95 TTFT %.1f ms at 0.25 x static, %.1f ms at 1 x, static %.1f ms", names[i], t_lo, t_hi,
                     num(c, "ttft_static_ms"));
        assert_true(num(q, "capacity_rps") > 0);
        assert_true(json_is_true(json_object_get(json_array_get(rates, 5), "meets_slo")));
        json_decref(root);
    }
    assert_true(file_has(md, "### With queueing (the engine model, both pools)"));
    char html[700];
    snprintf(html, sizeof html, "%s/report.html", out);
    assert_true(file_has(html, "id=\"disagg\""));
    assert_true(file_has(html, "Disaggregated prefill/decode (a prediction)"));
    assert_true(file_has(html, "x static)"));
    /* the report re-rendered from the store keeps the section */
    unlink(md);
    const char *r[] = { "report", out, NULL };
    assert_int_equal(run_servetune(r, 120), 0);
    assert_true(file_has(md, "no disaggregated setup was measured"));
    /* --disagg-static: the rate matching alone, the same figure */
    const char *st[] = { "predict", specp, "-o", out, "-q", "--disagg", "--disagg-gpus", "8", "--disagg-static", NULL };
    assert_int_equal(run_servetune(st, 300), 0);
    assert_false(file_has(md, "With queueing"));
    json_t *root;
    json_t *c = disagg_config(out, 0, &root);
    assert_null(json_object_get(c, "queueing"));
    double want =
        fmin(num(c, "x") * num(c, "prefill_worker_rps") * 0.9, num(c, "y") * num(c, "decode_worker_rps") * 0.92);
    assert_true(fabs(num(c, "rps") - want) <= 1e-9 * want);
    json_decref(root);
}

static void slow_connector_and_bad_input(void **state)
{
    (void)state;
    char specp[600], out[600], md[700];
    /* a small model prefills fast and its KV is large for its size (114 KB a token): 4,000-token
     * prompts are more than Ethernet carries once the prefill workers set the rate. The outputs
     * are short (32 tokens) so that the decode workers are not the bound: with 100-token outputs
     * the rate-matched rate is the decode side's, whose step is the host's (a 0.6B model's decode
     * step is bound by the engine's CPU: a fitted 0.82 ms per step when this was written, the
     * host's piecewise launches since, docs/fidelity.md): it needed 12.3 GB/s of KV, just under
     * the 12.5 GB/s link; with 32 it needed 21.6 GB/s. */
    put("long.yaml",
        "engine: {kind: vllm, model: Qwen/Qwen3-0.6B}\nhardware: {gpu: H100, price_per_gpu_hour: 2.5}\npeak_rate: 10\n"
        "workload: {input_tokens: 4000, output_tokens: 32, seed: 1, requests_per_rate: 60}\nrates: [2, 8]\n"
        "slo: {ttft_p95_ms: 3000, tpot_p95_ms: 100}\nsearch: {mode: burst}\n",
        specp, sizeof specp);
    snprintf(out, sizeof out, "%s/out", tmp);
    snprintf(md, sizeof md, "%s/report.md", out);
    const char *a[] = { "predict", specp, "-o", out, "-q", "--disagg", "--connector", "ethernet", NULL };
    assert_int_equal(run_servetune(a, 300), 0);
    if (!file_has(md, "cannot keep up"))
        fail_msg("%s: no word of the KV transfer that Ethernet cannot carry", md);
    assert_true(file_has(md, "GB/s over ethernet"));
    json_t *root;
    json_t *c = disagg_config(out, 0, &root);
    assert_true(json_is_true(json_object_get(c, "link_limited")));
    if (!(num(c, "link_need_gbps") > num(c, "link_gbps")))
        fail_msg("the needed %g GB/s is not over the link's %g GB/s", num(c, "link_need_gbps"), num(c, "link_gbps"));
    /* the link, not the rate matching, sets the rate */
    assert_true(num(c, "rps") < num(c, "rate_matched_rps"));
    json_decref(root);
    /* an unknown connector: refused before anything runs */
    char out2[600], log[700];
    snprintf(out2, sizeof out2, "%s/out2", tmp);
    const char *b[] = { "predict", specp, "-o", out2, "--disagg", "--connector", "smoke-signals", NULL };
    assert_int_equal(run_servetune(b, 60), 2);
    snprintf(log, sizeof log, "%s/servetune.out", tmp);
    assert_true(file_has(log, "nvlink, infiniband, pcie, ethernet"));
    struct stat st;
    assert_int_equal(stat(out2, &st), -1);
    /* --disagg-static alone: refused too */
    const char *c2[] = { "predict", specp, "-o", out2, "--disagg-static", NULL };
    assert_int_equal(run_servetune(c2, 60), 2);
    assert_true(file_has(log, "--disagg-static goes with --disagg"));
    assert_int_equal(stat(out2, &st), -1);
}

/* A configuration that speculates is priced disaggregated with its speculation in the decode
 * workers: at an acceptance the target keeps, a higher decode worker rate and a lower static TPOT
 * than the same setup without it, and said in report.json and report.md. The TPOT SLO (50 ms)
 * leaves the decode batch to the KV cache: under a binding SLO (12 ms) each configuration takes
 * the largest batch within it and both static TPOTs sit just under 12 ms (11.93 plain, 11.95
 * speculating after the refit; 11.97 / 11.95 before), which says nothing about speculation. */
static void speculation_in_the_decode_pool(void **state)
{
    (void)state;
    char specp[600], out[600], md[700];
    put("s.yaml",
        "engine: {kind: vllm, model: Qwen/Qwen3-8B}\nhardware: {gpu: H100, price_per_gpu_hour: 2.5}\npeak_rate: 10\n"
        "workload: {input_tokens: 1000, output_tokens: 300, seed: 1, requests_per_rate: 60, "
        "allow_synthetic_speculation: true}\nrates: [1, 4]\nspeculation: {acceptance: 0.8}\n"
        "slo: {ttft_p95_ms: 3000, tpot_p95_ms: 50}\nsearch: {mode: burst}\n"
        "configurations:\n  - name: plain\n  - name: ngram\n"
        "    add_flags: [--speculative-config, '{\"method\": \"ngram\", \"num_speculative_tokens\": 4}']\n",
        specp, sizeof specp);
    snprintf(out, sizeof out, "%s/out", tmp);
    snprintf(md, sizeof md, "%s/report.md", out);
    const char *a[] = { "predict", specp, "-o", out, "-q", "--disagg", "--disagg-static", NULL };
    assert_int_equal(run_servetune(a, 300), 0);
    json_t *r0, *r1;
    json_t *plain = disagg_config(out, 0, &r0), *spec = disagg_config(out, 1, &r1);
    assert_string_equal(json_string_value(json_object_get(spec, "configuration")), "ngram");
    assert_null(json_object_get(plain, "decode_speculation"));
    json_t *ds = json_object_get(spec, "decode_speculation");
    assert_true(json_is_object(ds));
    assert_int_equal(json_integer_value(json_object_get(ds, "k")), 4);
    /* 0.8 per token, k 4: (1 - 0.8^5) / (1 - 0.8) tokens a step */
    assert_true(fabs(json_real_value(json_object_get(ds, "tokens_per_step")) - (1 - pow(0.8, 5)) / 0.2) < 1e-9);
    if (!(num(spec, "decode_worker_rps") > num(plain, "decode_worker_rps")))
        fail_msg("speculating decode workers serve %g req/s, plain ones %g", num(spec, "decode_worker_rps"),
                 num(plain, "decode_worker_rps"));
    assert_true(num(spec, "tpot_static_ms") < num(plain, "tpot_static_ms"));
    assert_true(num(spec, "prefill_worker_rps") == num(plain, "prefill_worker_rps"));
    assert_true(file_has(md, "does so in its decode workers"));
    json_decref(r0);
    json_decref(r1);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test_setup_teardown(speculation_in_the_decode_pool, setup, teardown),
        cmocka_unit_test_setup_teardown(each_configuration_priced_disaggregated, setup, teardown),
        cmocka_unit_test_setup_teardown(slow_connector_and_bad_input, setup, teardown),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
