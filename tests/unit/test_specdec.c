/* Speculative decoding in an engine's flags (engine/specdec.h): found, described, and what the
 * engine would refuse at startup refused with the reason. */
#include "harness.h"

#include "engine/specdec.h"

static int find(st_specdec *d, char *err, size_t errlen, const char *a, const char *b, const char *c, const char *e)
{
    const char *argv[4];
    int n = 0;
    const char *in[] = { a, b, c, e };
    for (int i = 0; i < 4 && in[i]; i++)
        argv[n++] = in[i];
    return st_specdec_from_argv(argv, n, d, err, errlen);
}

static void vllm_config(void **state)
{
    (void)state;
    st_specdec d;
    char err[400];
    assert_int_equal(find(&d, err, sizeof err, "--max-num-seqs", "64", NULL, NULL), 0);
    assert_int_equal(find(&d, err, sizeof err, "--speculative-config",
                          "{\"method\": \"ngram\", \"num_speculative_tokens\": 4}", NULL, NULL),
                     1);
    assert_int_equal(d.engine, ST_SPECDEC_VLLM);
    assert_string_equal(d.method, "ngram");
    assert_int_equal(d.k, 4);
    assert_int_equal(d.lookup_min, 5); /* vLLM's defaults */
    assert_int_equal(d.lookup_max, 5);
    assert_true(d.draft_free);
    assert_string_equal(d.summary, "vLLM ngram, 4 draft tokens, lookup 5..5");
    assert_int_equal(find(&d, err, sizeof err,
                          "--speculative-config={\"method\": \"ngram\", \"num_speculative_tokens\": 3, "
                          "\"prompt_lookup_max\": 4}",
                          NULL, NULL, NULL),
                     1);
    assert_int_equal(d.lookup_min, 4); /* one given: the other takes its value */
    assert_int_equal(find(&d, err, sizeof err, "--speculative-config",
                          "{\"model\": \"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B\", \"method\": \"eagle3\", "
                          "\"num_speculative_tokens\": 3}",
                          NULL, NULL),
                     1);
    assert_false(d.draft_free);
    assert_string_equal(d.draft_model, "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B");
    assert_int_equal(find(&d, err, sizeof err, "--speculative-config", "{\"method\": \"deepseek_mtp\"}", NULL, NULL),
                     1);
    assert_int_equal(find(&d, err, sizeof err, "--speculative-config",
                          "{\"model\": \"Qwen/Qwen3-0.6B\", "
                          "\"num_speculative_tokens\": 5}",
                          NULL, NULL),
                     1);
    assert_string_equal(d.method, "draft_model");

    /* refused, with the reason */
    assert_int_equal(find(&d, err, sizeof err, "--speculative-config", "{method: ngram}", NULL, NULL), -1);
    assert_non_null(strstr(err, "is not JSON"));
    assert_int_equal(find(&d, err, sizeof err, "--speculative-config", "[1]", NULL, NULL), -1);
    assert_non_null(strstr(err, "must be a JSON object"));
    assert_int_equal(find(&d, err, sizeof err, "--speculative-config",
                          "{\"method\": \"lookahead\", "
                          "\"num_speculative_tokens\": 4}",
                          NULL, NULL),
                     -1);
    assert_non_null(strstr(err, "unknown method \"lookahead\""));
    assert_int_equal(find(&d, err, sizeof err, "--speculative-config", "{\"method\": \"ngram\"}", NULL, NULL), -1);
    assert_non_null(strstr(err, "ngram needs num_speculative_tokens"));
    assert_int_equal(find(&d, err, sizeof err, "--speculative-config",
                          "{\"method\": \"ngram\", \"num_speculative_tokens\": 0}", NULL, NULL),
                     -1);
    assert_int_equal(find(&d, err, sizeof err, "--speculative-config",
                          "{\"method\": \"ngram\", \"num_speculative_tokens\": 2, \"prompt_lookup_min\": 6, "
                          "\"prompt_lookup_max\": 3}",
                          NULL, NULL),
                     -1);
    assert_non_null(strstr(err, "above prompt_lookup_max"));
    assert_int_equal(find(&d, err, sizeof err, "--speculative-config", "{\"num_speculative_tokens\": 2}", NULL, NULL),
                     -1);
    assert_int_equal(find(&d, err, sizeof err, "--speculative-config", NULL, NULL, NULL), -1);
}

static void sglang_flags(void **state)
{
    (void)state;
    st_specdec d;
    char err[400];
    assert_int_equal(
        find(&d, err, sizeof err, "--speculative-algorithm", "EAGLE3", "--speculative-num-draft-tokens", "6"), 1);
    assert_int_equal(d.engine, ST_SPECDEC_SGLANG);
    assert_int_equal(d.k, 6);
    assert_int_equal(find(&d, err, sizeof err, "--speculative-algorithm", "MEDUSA", NULL, NULL), -1);
    assert_non_null(strstr(err, "unknown algorithm \"MEDUSA\""));
    assert_int_equal(find(&d, err, sizeof err, "--speculative-algorithm", "NGRAM", "--speculative-num-steps", "x"), -1);
}

static void llamacpp_flags(void **state)
{
    (void)state;
    st_specdec d;
    char err[400];
    assert_int_equal(find(&d, err, sizeof err, "-md", "draft.gguf", "--spec-draft-n-max", "8"), 1);
    assert_int_equal(d.engine, ST_SPECDEC_LLAMACPP);
    assert_string_equal(d.method, "draft-simple");
    assert_string_equal(d.draft_model, "draft.gguf");
    assert_int_equal(d.k, 8);
    assert_non_null(strstr(d.summary, "add --spec-type draft-simple"));
    assert_int_equal(find(&d, err, sizeof err, "-md", "draft.gguf", "--spec-type", "draft-simple"), 1);
    assert_null(strstr(d.summary, "no --spec-type"));
    assert_int_equal(find(&d, err, sizeof err, "--spec-type", "ngram-mod", NULL, NULL), 1);
    assert_true(d.draft_free);
    assert_int_equal(find(&d, err, sizeof err, "--spec-type", "none", NULL, NULL), 0);
    assert_int_equal(find(&d, err, sizeof err, "--spec-draft-p-min", "0.5", NULL, NULL), 0); /* no draft: none */
    assert_int_equal(find(&d, err, sizeof err, "-md", "d.gguf", "--draft-max", "8"), -1);
    assert_non_null(strstr(err, "--draft-max was removed"));
    assert_int_equal(find(&d, err, sizeof err, "--spec-type", "lookahead", NULL, NULL), -1);
    assert_non_null(strstr(err, "unknown type \"lookahead\""));
    assert_int_equal(find(&d, err, sizeof err, "-md", "d.gguf", "--spec-draft-p-min", "1.5"), -1);
    assert_int_equal(find(&d, err, sizeof err, "-md", "d.gguf", "--spec-draft-n-min", "9"), 1);
    const char *argv[] = { "-md", "d.gguf", "--spec-draft-n-min", "9", "--spec-draft-n-max", "4" };
    assert_int_equal(st_specdec_from_argv(argv, 6, &d, err, sizeof err), -1);
    assert_non_null(strstr(err, "above --spec-draft-n-max"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(vllm_config),
        cmocka_unit_test(sglang_flags),
        cmocka_unit_test(llamacpp_flags),
    };
    return cmocka_run_group_tests(tests, 0, 0);
}
