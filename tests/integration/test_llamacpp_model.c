/* The models `servetune gguf` writes are loaded and run by the real llama-server (built by
 * scripts/install-llamacpp): Llama and Qwen2 shapes, f16 and quantized with llama-quantize. */
#include "harness.h"

#include <jansson.h>

#define ST_IT_TMP_PREFIX "/tmp/st_llama_model_it."
#include "audit_util.h"
#include "llamacpp_util.h"
#include "engine/modelgen.h"

/* One completion of exactly n tokens (ignore_eos), checked; returns the parsed response. */
static json_t *complete(const llama_srv *s, int n)
{
    char body[256];
    snprintf(body, sizeof body,
             "{\"model\":\"m\",\"prompt\":\"The quick brown fox jumps over\",\"max_tokens\":%d,\"ignore_eos\":true,"
             "\"temperature\":0}",
             n);
    http_res r;
    if (http_do(s->port, "POST", "/v1/completions", body, NULL, 30000, &r) || r.status != 200)
        fail_msg("completion: status %d: %s\nserver log:\n%s", r.status, r.body.data, llama_log_tail(s));
    json_error_t je;
    json_t *j = json_loads(r.body.data, 0, &je);
    http_res_free(&r);
    assert_non_null(j);
    json_t *u = json_object_get(j, "usage");
    assert_int_equal(json_integer_value(json_object_get(u, "completion_tokens")), n);
    assert_true(json_integer_value(json_object_get(u, "prompt_tokens")) > 0);
    json_t *c = json_array_get(json_object_get(j, "choices"), 0);
    assert_string_equal(json_string_value(json_object_get(c, "finish_reason")), "length");
    assert_non_null(json_string_value(json_object_get(c, "text")));
    return j;
}

/* /v1/models: the server's own count of the parameters and its file type. */
static void model_meta(const llama_srv *s, uint64_t *n_params, char *ftype, size_t n)
{
    http_res r;
    assert_int_equal(http_do(s->port, "GET", "/v1/models", NULL, NULL, 5000, &r), 0);
    assert_int_equal(r.status, 200);
    json_t *j = json_loads(r.body.data, 0, NULL);
    http_res_free(&r);
    assert_non_null(j);
    json_t *meta = json_object_get(json_array_get(json_object_get(j, "data"), 0), "meta");
    assert_non_null(meta);
    *n_params = (uint64_t)json_integer_value(json_object_get(meta, "n_params"));
    snprintf(ftype, n, "%s",
             json_string_value(json_object_get(meta, "ftype")) ? json_string_value(json_object_get(meta, "ftype"))
                                                               : "");
    json_decref(j);
}

static void llama_f16_loads_and_completes(void **state)
{
    (void)state;
    const char *dir;
    LLAMACPP_OR_SKIP(dir);
    char model[600];
    snprintf(model, sizeof model, "%s/llama.gguf", tmp);
    llama_make_model(dir, "llama", "30M", NULL, model, NULL);
    llama_srv s;
    const char *args[] = { "-c", "512", "-np", "1", "-t", "1", NULL };
    if (llama_start(&s, dir, model, tmp, args, LLAMA_READY_S)) {
        llama_stop(&s);
        fail_msg("llama-server did not become ready:\n%s", llama_log_tail(&s));
    }
    json_t *j = complete(&s, 8);
    /* the server reports its own timings beside the usage */
    json_t *t = json_object_get(j, "timings");
    assert_int_equal(json_integer_value(json_object_get(t, "predicted_n")), 8);
    assert_true(json_number_value(json_object_get(t, "predicted_ms")) > 0);
    json_decref(j);
    uint64_t np;
    char ft[32];
    model_meta(&s, &np, ft, sizeof ft);
    st_mg_shape sh;
    assert_int_equal(st_mg_preset("llama", "30M", &sh, NULL, 0), 0);
    assert_int_equal(np, st_mg_params(&sh, 32000)); /* llama.cpp counts what the generator wrote */
    assert_string_equal(ft, "F16");
    llama_stop(&s);
}

static void qwen2_quantized_loads_and_completes(void **state)
{
    (void)state;
    const char *dir;
    LLAMACPP_OR_SKIP(dir);
    static const char *q[] = { "q8_0", "q4_0" };
    static const char *ftype[] = { "Q8_0", "Q4_0" };
    for (int i = 0; i < 2; i++) {
        char model[600];
        snprintf(model, sizeof model, "%s/qwen2-%s.gguf", tmp, q[i]);
        const char *extra[] = { "--n-layer", "2", "--seed", "5", NULL };
        llama_make_model(dir, "qwen2", "30M", q[i], model, extra);
        llama_srv s;
        const char *args[] = { "-c", "512", "-np", "2", "-t", "1", NULL };
        if (llama_start(&s, dir, model, tmp, args, LLAMA_READY_S)) {
            llama_stop(&s);
            fail_msg("llama-server did not become ready with %s:\n%s", q[i], llama_log_tail(&s));
        }
        json_decref(complete(&s, 4));
        uint64_t np;
        char ft[32];
        model_meta(&s, &np, ft, sizeof ft);
        st_mg_shape sh;
        assert_int_equal(st_mg_preset("qwen2", "30M", &sh, NULL, 0), 0);
        sh.n_layer = 2;
        assert_int_equal(np, st_mg_params(&sh, 151936));
        assert_string_equal(ft, ftype[i]);
        llama_stop(&s);
    }
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test_setup_teardown(llama_f16_loads_and_completes, setup, teardown),
        cmocka_unit_test_setup_teardown(qwen2_quantized_loads_and_completes, setup, teardown),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
