#include "harness.h"

#include <stdio.h>

#include "audit/spec.h"
#include "engine/adapter.h"
#include "engine/metrics.h"

#define SPEC                                                                                                           \
    "engine:\n  kind: %s\n  model: Qwen/Qwen3-8B\n%s"                                                                  \
    "  flags: [--max-num-seqs, '64', --port, '9999', --time-scale, '20', --host=0.0.0.0]\n"                            \
    "hardware: {gpu: H100, price_per_gpu_hour: 2.5}\npeak_rate: 10\n"                                                  \
    "workload: {input_tokens: 100, output_tokens: 10}\nrates: [1]\n"                                                   \
    "slo: {ttft_p95_ms: 1500, tpot_p95_ms: 50}\n"                                                                      \
    "configurations:\n  - name: base\n  - name: fp8\n    model: Qwen/Qwen3-8B-FP8\n"                                   \
    "    add_flags: [--served-model-name, q8]\n"

static void load(st_spec *s, const char *kind, const char *extra)
{
    char t[2048], err[256];
    snprintf(t, sizeof t, SPEC, kind, extra);
    if (st_spec_parse("t.yaml", t, strlen(t), s, err, sizeof err))
        fail_msg("%s", err);
}

static void argv_equals(const st_launch *l, const char *const *want)
{
    int n = 0;
    while (want[n])
        n++;
    char got[1024];
    st_launch_cmdline(l, got, sizeof got);
    if (l->argv.n != n)
        fail_msg("argv '%s' has %d words, want %d", got, l->argv.n, n);
    for (int i = 0; i < n; i++)
        if (strcmp(l->argv.v[i], want[i]))
            fail_msg("argv '%s': word %d is '%s', want '%s'", got, i, l->argv.v[i], want[i]);
}

static void vllm_and_emulator_argv(void **state)
{
    (void)state;
    st_spec s;
    st_launch l;
    char err[256];
    load(&s, "vllm", "");
    assert_int_equal(st_spec_launch(&s, &s.configs[0], 8123, "/x/servetune", &l, err, sizeof err), 0);
    argv_equals(&l, (const char *[]){ "vllm", "serve", "Qwen/Qwen3-8B", "--max-num-seqs", "64", "--time-scale", "20",
                                      "--host", "127.0.0.1", "--port", "8123", NULL });
    assert_string_equal(l.expected_model, "Qwen/Qwen3-8B");
    assert_string_equal(l.base_url, "http://127.0.0.1:8123");
    assert_near(l.time_scale, 20, 0);
    assert_int_equal(l.api, ST_API_COMPLETIONS);
    st_launch_free(&l);
    /* the fp8 configuration serves another checkpoint under another name */
    assert_int_equal(st_spec_launch(&s, &s.configs[1], 8123, NULL, &l, err, sizeof err), 0);
    assert_string_equal(l.argv.v[2], "Qwen/Qwen3-8B-FP8");
    assert_string_equal(l.expected_model, "q8");
    st_launch_free(&l);
    st_spec_free(&s);

    load(&s, "emulator", "");
    assert_int_equal(st_spec_launch(&s, &s.configs[0], 8124, "/x/servetune", &l, err, sizeof err), 0);
    argv_equals(&l, (const char *[]){ "/x/servetune", "emulate", "serve", "Qwen/Qwen3-8B", "--max-num-seqs", "64",
                                      "--time-scale", "20", "--host", "127.0.0.1", "--port", "8124", NULL });
    st_launch_free(&l);
    st_spec_free(&s);

    /* a custom command replaces the program part only */
    load(&s, "vllm", "  command: [python3, -m, vllm.entrypoints.cli.main, serve]\n");
    assert_int_equal(st_spec_launch(&s, &s.configs[0], 1, NULL, &l, err, sizeof err), 0);
    assert_string_equal(l.argv.v[0], "python3");
    assert_string_equal(l.argv.v[4], "Qwen/Qwen3-8B");
    st_launch_free(&l);
    st_spec_free(&s);
}

static void other_engines(void **state)
{
    (void)state;
    st_spec s;
    st_launch l;
    char err[256];
    load(&s, "tgi", "");
    assert_int_equal(st_spec_launch(&s, &s.configs[0], 3000, NULL, &l, err, sizeof err), 0);
    argv_equals(&l, (const char *[]){ "text-generation-launcher", "--model-id", "Qwen/Qwen3-8B", "--max-num-seqs", "64",
                                      "--time-scale", "20", "--hostname", "127.0.0.1", "--port", "3000", NULL });
    assert_string_equal(l.models_path, "/info");
    assert_int_equal(l.api, ST_API_TGI);
    st_launch_free(&l);
    st_spec_free(&s);
    load(&s, "llamacpp", "");
    assert_int_equal(st_spec_launch(&s, &s.configs[0], 3001, NULL, &l, err, sizeof err), 0);
    argv_equals(&l, (const char *[]){ "llama-server", "-m", "Qwen/Qwen3-8B", "--max-num-seqs", "64", "--time-scale",
                                      "20", "--alias", "Qwen/Qwen3-8B", "--host", "127.0.0.1", "--port", "3001",
                                      "--metrics", NULL });
    assert_int_equal(l.metrics_dialect, ST_DIALECT_LLAMACPP);
    assert_string_equal(l.version_path, "/props"); /* llama-server says its build there */
    assert_string_equal(l.expected_model, "Qwen/Qwen3-8B");
    st_launch_free(&l);
    /* llama-server knows --alias, not --served-model-name: that flag names nothing here */
    assert_int_equal(st_spec_launch(&s, &s.configs[1], 3001, NULL, &l, err, sizeof err), 0);
    assert_string_equal(l.expected_model, "Qwen/Qwen3-8B-FP8");
    st_launch_free(&l);
    st_spec_free(&s);
    /* served_model_name becomes the alias; an --alias / -a flag wins (its first name is the id) */
    load(&s, "llamacpp", "  served_model_name: small\n");
    assert_int_equal(st_spec_launch(&s, &s.configs[0], 3001, NULL, &l, err, sizeof err), 0);
    assert_string_equal(l.expected_model, "small");
    assert_string_equal(l.argv.v[l.argv.n - 6], "small");
    st_launch_free(&l);
    st_spec_free(&s);
    static const char *const aliases[] = { "  flags: [-a, 'x1,x2']\n", "  flags: [--alias=x1]\n" };
    for (int i = 0; i < 2; i++) {
        char t[1024];
        snprintf(t, sizeof t,
                 "engine:\n  kind: llamacpp\n  model: /m/x.gguf\n%s"
                 "hardware: {gpu: cpu, price_per_gpu_hour: 0.1}\npeak_rate: 1\n"
                 "workload: {input_tokens: 10, output_tokens: 10}\nrates: [1]\nslo: {ttft_p95_ms: 1, tpot_p95_ms: 1}\n",
                 aliases[i]);
        assert_int_equal(st_spec_parse("t.yaml", t, strlen(t), &s, err, sizeof err), 0);
        assert_int_equal(st_spec_launch(&s, &s.configs[0], 3001, NULL, &l, err, sizeof err), 0);
        assert_string_equal(l.expected_model, "x1");
        int n_alias = 0;
        for (int k = 0; k < l.argv.n; k++)
            n_alias += !strncmp(l.argv.v[k], "--alias", 7);
        assert_int_equal(n_alias, i); /* none added beside the flag's own */
        st_launch_free(&l);
        st_spec_free(&s);
    }
    load(&s, "sglang", "");
    assert_int_equal(st_spec_launch(&s, &s.configs[0], 3002, NULL, &l, err, sizeof err), 0);
    assert_string_equal(l.argv.v[3], "--model-path");
    assert_string_equal(l.argv.v[l.argv.n - 1], "--enable-metrics");
    st_launch_free(&l);
    st_spec_free(&s);

    const char *ep = "engine: {kind: endpoint, model: m, url: 'http://10.1.2.3:8000/'}\n"
                     "hardware: {gpu: H100, price_per_gpu_hour: 2.5}\npeak_rate: 10\n"
                     "workload: {input_tokens: 100, output_tokens: 10}\nrates: [1]\n"
                     "slo: {ttft_p95_ms: 1500, tpot_p95_ms: 50}\n";
    assert_int_equal(st_spec_parse("t.yaml", ep, strlen(ep), &s, err, sizeof err), 0);
    assert_int_equal(st_spec_launch(&s, &s.configs[0], 0, NULL, &l, err, sizeof err), 0);
    assert_int_equal(l.argv.n, 0);
    assert_string_equal(l.base_url, "http://10.1.2.3:8000");
    assert_string_equal(l.host, "10.1.2.3");
    assert_int_equal(l.port, 8000);
    st_launch_free(&l);
    st_spec_free(&s);
}

static void model_lists(void **state)
{
    (void)state;
    char names[256];
    const char *v =
        "{\"object\":\"list\",\"data\":[{\"id\":\"Qwen/Qwen3-8B\",\"object\":\"model\",\"max_model_len\":8192}]}";
    assert_int_equal(st_adapter_models_lists(v, strlen(v), "Qwen/Qwen3-8B", names, sizeof names), 1);
    assert_int_equal(st_adapter_models_lists(v, strlen(v), "other", names, sizeof names), 0);
    assert_string_equal(names, "Qwen/Qwen3-8B");
    const char *tgi = "{\"model_id\":\"bigscience/bloom\",\"max_input_tokens\":1000}";
    assert_int_equal(st_adapter_models_lists(tgi, strlen(tgi), "bigscience/bloom", names, sizeof names), 1);
    assert_int_equal(st_adapter_models_lists("<html>", 6, "m", names, sizeof names), -1);
    assert_int_equal(st_adapter_models_lists("{\"status\":\"ok\"}", 15, "m", names, sizeof names), -1);
}

static void scrape_to_samples(void **state)
{
    (void)state;
    const char *body = "# HELP vllm:num_requests_running x\n"
                       "vllm:num_requests_running{model_name=\"m\",engine=\"0\"} 7\n"
                       "vllm:num_requests_waiting{model_name=\"m\",engine=\"0\"} 3\n"
                       "vllm:kv_cache_usage_perc{model_name=\"m\",engine=\"0\"} 0.25\n"
                       "vllm:num_preemptions_total{model_name=\"m\",engine=\"0\"} 2\n";
    st_metrics_sample s[ST_METRICS_SCRAPE_MAX];
    int n = st_metrics_scrape(ST_DIALECT_VLLM, body, strlen(body), s, ST_METRICS_SCRAPE_MAX);
    int seen = 0;
    for (int i = 0; i < n; i++) {
        if (!strcmp(s[i].name, "running")) {
            seen |= 1;
            assert_near(s[i].value, 7, 0);
        }
        if (!strcmp(s[i].name, "waiting")) {
            seen |= 2;
            assert_near(s[i].value, 3, 0);
        }
        if (!strcmp(s[i].name, "kv_usage")) {
            seen |= 4;
            assert_near(s[i].value, 0.25, 0);
        }
        if (!strcmp(s[i].name, "preemptions")) {
            seen |= 8;
            assert_near(s[i].value, 2, 0);
        }
    }
    assert_int_equal(seen, 15);
    assert_int_equal(st_metrics_scrape(ST_DIALECT__COUNT, body, strlen(body), s, ST_METRICS_SCRAPE_MAX), 0);
}

/* every engine kind has one descriptor: its name parses back to it, its metrics dialect is
 * one metrics.c knows, and the spec's engine.api (parsed once, an enum) overrides the kind's
 * default API through st_spec_api and the launch */
static void kind_table_and_api(void **state)
{
    (void)state;
    for (int k = 0; k < ST_ENGINE__COUNT; k++) {
        const st_engine_kind_info *ki = st_engine_kind_info_of((st_engine_kind)k);
        assert_non_null(ki);
        st_engine_kind back = ST_ENGINE__COUNT;
        assert_int_equal(st_engine_kind_from_name(ki->name, &back), 0);
        assert_int_equal(back, k);
        if ((unsigned)ki->metrics_dialect >= ST_DIALECT__COUNT || !ki->version_path || !ki->version_key)
            fail_msg("kind %s: metrics dialect %d unknown, or no version path", ki->name, (int)ki->metrics_dialect);
        assert_int_equal(ki->api, k == ST_ENGINE_TGI ? ST_API_TGI : ST_API_COMPLETIONS);
    }
    assert_null(st_engine_kind_info_of(ST_ENGINE__COUNT));
    st_spec s;
    st_launch l;
    char err[256];
    load(&s, "tgi", "");
    assert_int_equal(st_spec_api(&s), ST_API_TGI);
    assert_true(st_spec_fits_prompts(&s));
    st_spec_free(&s);
    load(&s, "tgi", "  api: completions\n");
    assert_int_equal(st_spec_api(&s), ST_API_COMPLETIONS);
    assert_false(st_spec_fits_prompts(&s));
    st_spec_free(&s);
    load(&s, "vllm", "  api: chat\n");
    assert_int_equal(st_spec_api(&s), ST_API_CHAT);
    assert_int_equal(st_spec_launch(&s, &s.configs[0], 8125, NULL, &l, err, sizeof err), 0);
    assert_int_equal(l.api, ST_API_CHAT);
    assert_int_equal(l.metrics_dialect, ST_DIALECT_VLLM);
    assert_string_equal(l.models_path, "/v1/models");
    st_launch_free(&l);
    st_spec_free(&s);
    char t[2048];
    snprintf(t, sizeof t, SPEC, "vllm", "  api: Chat\n");
    assert_int_equal(st_spec_parse("t.yaml", t, strlen(t), &s, err, sizeof err), -1);
    if (!strstr(err, "engine.api: unknown API 'Chat'"))
        fail_msg("error '%s' does not name the unknown API", err);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(vllm_and_emulator_argv), cmocka_unit_test(other_engines),
        cmocka_unit_test(kind_table_and_api),     cmocka_unit_test(model_lists),
        cmocka_unit_test(scrape_to_samples),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
