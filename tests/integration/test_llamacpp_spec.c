/* Speculative decoding measured on the real llama-server (built by scripts/install-llamacpp):
 * a 30M Llama target written by `servetune gguf` (f16) with two drafts of the same vocabulary,
 * the same weights quantized to q8_0 (high acceptance) and another random model (near none);
 * `servetune bench` reads each response's timings.draft_n / draft_n_accepted into its records
 * and its summary. Greedy decoding (--temp 0 on the server): an acceptance that depends on the
 * weights alone. Without a build the tests skip (they fail under SERVETUNE_REQUIRE_LLAMACPP=1). */
#include "harness.h"

#include <jansson.h>

#define ST_IT_TMP_PREFIX "/tmp/st_llama_spec_it."
#include "audit_util.h"
#include "llamacpp_util.h"

#define ALIAS "llama-30m"
#define BENCH_LIMIT_S 180.0

/* The acceptance bench measured with draft model `draft`: its summary's speculation block and
 * every record's draft counts. */
static double measured(const char *dir, const char *target, const char *draft, const char *name)
{
    llama_srv s;
    const char *args[] = { "-md",
                           draft,
                           "--spec-type",
                           "draft-simple",
                           "--spec-draft-n-max",
                           "8",
                           "--temp",
                           "0",
                           "-c",
                           "1024",
                           "-np",
                           "1",
                           "-t",
                           "1",
                           "--alias",
                           ALIAS,
                           NULL };
    if (llama_start(&s, dir, target, tmp, args, LLAMA_READY_S)) {
        llama_stop(&s);
        fail_msg("llama-server with draft %s did not become ready:\n%s", name, llama_log_tail(&s));
    }
    char url[64], json[600];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", s.port);
    snprintf(json, sizeof json, "%s/bench-%s.json", tmp, name);
    const char *b[] = { "bench", "--url",           url,  "--api", "completions", "--model", ALIAS, "--input-tokens",
                        "32",    "--output-tokens", "48", "-n",    "4",           "--rate",  "inf", "--seed",
                        "5",     "--json",          json, "-q",    NULL };
    int rc = run_servetune(b, BENCH_LIMIT_S);
    llama_stop(&s);
    if (rc != 0 && rc != 3)
        fail_msg("servetune bench (draft %s) exited %d", name, rc);
    json_error_t je;
    json_t *j = json_load_file(json, 0, &je);
    if (!j)
        fail_msg("%s: %s", json, je.text);
    json_t *sp = json_object_get(json_object_get(j, "summary"), "speculation");
    if (!json_is_object(sp))
        fail_msg("draft %s: no speculation block in the summary", name);
    assert_int_equal(json_integer_value(json_object_get(sp, "requests")), 4);
    json_int_t drafted = json_integer_value(json_object_get(sp, "draft_tokens"));
    json_int_t accepted = json_integer_value(json_object_get(sp, "accepted_tokens"));
    assert_true(drafted > 0);
    json_int_t sum_d = 0, sum_a = 0;
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(j, "records"), i, r)
    {
        if (json_is_true(json_object_get(r, "warmup")))
            continue;
        sum_d += json_integer_value(json_object_get(r, "server_draft_tokens"));
        sum_a += json_integer_value(json_object_get(r, "server_draft_accepted"));
    }
    assert_int_equal(sum_d, drafted);
    assert_int_equal(sum_a, accepted);
    double rate = json_real_value(json_object_get(sp, "acceptance_rate"));
    print_message("# draft %s: %lld of %lld draft tokens accepted (%.1f%%)\n", name, (long long)accepted,
                  (long long)drafted, 100 * rate);
    json_decref(j);
    return rate;
}

static void quantized_and_foreign_drafts(void **state)
{
    (void)state;
    const char *dir;
    LLAMACPP_OR_SKIP(dir);
    char target[600], q8[600], other[600];
    snprintf(target, sizeof target, "%s/target.gguf", tmp);
    snprintf(q8, sizeof q8, "%s/draft-q8.gguf", tmp);
    snprintf(other, sizeof other, "%s/draft-other.gguf", tmp);
    const char *seed1[] = { "--seed", "1", NULL }, *seed2[] = { "--seed", "2", NULL };
    llama_make_model(dir, "llama", "30M", NULL, target, seed1);
    llama_make_model(dir, "llama", "30M", "q8_0", q8, seed1);
    llama_make_model(dir, "llama", "30M", NULL, other, seed2);
    double same = measured(dir, target, q8, "q8");
    double foreign = measured(dir, target, other, "other");
    /* the same weights draft what the target decodes; another random model almost never does */
    assert_true(same > 0.5);
    assert_true(foreign < same / 2);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test_setup_teardown(quantized_and_foreign_drafts, setup, teardown),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
