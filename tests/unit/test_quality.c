/* audit/quality.h: the spec's quality block (defaults, ranges refused with the key and line), the
 * request bodies, llama.cpp's and the OpenAI APIs' answers with their top-k log-probabilities
 * (captured shapes), an answer without them, the limits judged in words, the stored JSON. */
#include "harness.h"

#include <stdio.h>

#include "audit/quality.h"
#include "audit/spec.h"
#include "engine/pseudolm.h"

static const char *MIN = "engine:\n"
                         "  kind: vllm\n"
                         "  model: m\n"
                         "hardware: {gpu: H100, price_per_gpu_hour: 2.5}\n"
                         "peak_rate: 10\n"
                         "workload: {input_tokens: 100, output_tokens: 10}\n"
                         "rates: [1, 2]\n"
                         "slo: {ttft_p95_ms: 1500, tpot_p95_ms: 50}\n";

static int parse_with(const char *extra, st_spec *s, char *err, size_t errlen)
{
    char text[4096];
    snprintf(text, sizeof text, "%s%s", MIN, extra);
    return st_spec_parse("t.yaml", text, strlen(text), s, err, errlen);
}

static void spec_block_defaults_and_limits(void **state)
{
    (void)state;
    st_spec s;
    char err[512];
    assert_int_equal(parse_with("", &s, err, sizeof err), 0);
    assert_int_equal(s.quality.enabled, 0); /* no block: no pass */
    st_spec_free(&s);
    assert_int_equal(parse_with("quality: {}\n", &s, err, sizeof err), 0);
    assert_int_equal(s.quality.enabled, 1);
    assert_int_equal(s.quality.prompts, ST_QUALITY_PROMPTS);
    assert_int_equal(s.quality.top_k, ST_QUALITY_TOP_K);
    assert_true(isnan(s.quality.max_mean_kld));
    st_spec_free(&s);
    assert_int_equal(parse_with("quality:\n  prompts: 8\n  top_k: 5\n  max_tokens: 16\n"
                                "  limits: {max_mean_kld: 0.05, min_same_top1: 0.9, min_exact_match: 0.5}\n",
                                &s, err, sizeof err),
                     0);
    assert_int_equal(s.quality.prompts, 8);
    assert_int_equal(s.quality.top_k, 5);
    assert_int_equal(s.quality.max_tokens, 16);
    assert_near(s.quality.max_mean_kld, 0.05, 1e-12);
    assert_near(s.quality.min_same_top1, 0.9, 1e-12);
    assert_near(s.quality.min_exact_match, 0.5, 1e-12);
    st_spec_free(&s);
    assert_int_equal(parse_with("quality: {enabled: false}\n", &s, err, sizeof err), 0);
    assert_int_equal(s.quality.enabled, 0);
    st_spec_free(&s);
    const struct {
        const char *yaml, *want;
    } bad[] = {
        { "quality: {prompts: 0}\n", "quality.prompts: must be at least 1" },
        { "quality: {top_k: 65}\n", "quality.top_k: at most 64" },
        { "quality: {max_tokens: 5000}\n", "quality.max_tokens: at most" },
        { "quality: {limits: {max_mean_kld: -1}}\n", "quality.limits.max_mean_kld: must be >= 0" },
        { "quality: {limits: {max_mean_kld: 1000}}\n", "quality.limits.max_mean_kld: at most 100" },
        { "quality: {limits: {min_same_top1: 90}}\n", "quality.limits.min_same_top1: a share between 0 and 1" },
        { "quality: {limits: {min_exact_match: 1.5}}\n", "quality.limits.min_exact_match: a share" },
        { "quality: {limits: {max_kld: 0.1}}\n", "max_kld" },
        { "quality: {enabled: maybe}\n", "quality.enabled: expected true or false" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = '\0';
        int rc = parse_with(bad[i].yaml, &s, err, sizeof err);
        if (rc == 0 || !strstr(err, bad[i].want) || !strstr(err, "t.yaml:"))
            fail_msg("case %zu (%s): rc %d, err '%s', expected '%s'", i, bad[i].yaml, rc, err, bad[i].want);
        st_spec_free(&s);
    }
}

static void request_bodies(void **state)
{
    (void)state;
    st_buf b;
    st_buf_init(&b, 4096);
    const uint32_t ids[] = { 5, 6 };
    assert_int_equal(st_quality_body(ST_QAPI_LLAMACPP, "m", ids, 2, NULL, 8, 4, 0, &b), 0);
    assert_string_equal(b.data, "{\"prompt\":[5,6],\"n_predict\":8,\"temperature\":0,\"n_probs\":4,"
                                "\"cache_prompt\":false,\"stream\":false}");
    st_buf_reset(&b);
    assert_int_equal(st_quality_body(ST_QAPI_OPENAI, "m", NULL, 0, "hi \"x\"", 8, 4, 1, &b), 0);
    assert_string_equal(b.data, "{\"model\":\"m\",\"prompt\":\"hi \\\"x\\\"\",\"max_tokens\":1,\"temperature\":0,"
                                "\"logprobs\":4,\"return_tokens_as_token_ids\":true,\"stream\":false,"
                                "\"prompt_logprobs\":4}");
    st_buf_free(&b);
}

/* llama-server's /completion with n_probs (the shape of the pinned release). */
static void parse_llamacpp(void **state)
{
    (void)state;
    const char *body = "{\"content\":\" a b\",\"completion_probabilities\":["
                       "{\"id\":10,\"token\":\" a\",\"bytes\":[32,97],\"logprob\":-0.5,\"top_logprobs\":["
                       "{\"id\":10,\"token\":\" a\",\"bytes\":[32,97],\"logprob\":-0.5},{\"id\":11,\"token\":\" "
                       "c\",\"logprob\":-1.5}]},"
                       "{\"id\":12,\"token\":\" b\",\"logprob\":-0.1,\"top_logprobs\":[{\"id\":12,\"logprob\":-0.1}]}],"
                       "\"stop\":true}";
    st_qanswer a;
    char err[256];
    assert_int_equal(st_quality_parse(ST_QAPI_LLAMACPP, body, strlen(body), &a, err, sizeof err), 0);
    assert_int_equal(a.no_logprobs, 0);
    assert_int_equal(a.n, 2);
    assert_int_equal(a.tok[0].token, 10);
    assert_near(a.tok[0].logp, -0.5, 1e-12);
    assert_int_equal(a.tok[0].k, 2);
    assert_int_equal(a.tok[0].ids[1], 11);
    assert_near(a.tok[0].lp[1], -1.5, 1e-12);
    assert_int_equal(a.tok[1].token, 12);
    st_qanswer_free(&a);
    /* no n_probs honoured: said, not an error, never a zero */
    const char *none = "{\"content\":\" a b\",\"stop\":true}";
    assert_int_equal(st_quality_parse(ST_QAPI_LLAMACPP, none, strlen(none), &a, err, sizeof err), 0);
    assert_int_equal(a.no_logprobs, 1);
    st_qanswer_free(&a);
    assert_int_equal(st_quality_parse(ST_QAPI_LLAMACPP, "[1]", 3, &a, err, sizeof err), -1);
}

/* vLLM's /v1/completions with logprobs, return_tokens_as_token_ids and prompt_logprobs. */
static void parse_openai(void **state)
{
    (void)state;
    const char *body = "{\"choices\":[{\"text\":\"ab\",\"logprobs\":{\"tokens\":[\"token_id:7\",\"token_id:8\"],"
                       "\"token_logprobs\":[-0.2,-0.3],\"top_logprobs\":[{\"token_id:7\":-0.2,\"token_id:9\":-2.0},"
                       "{\"token_id:8\":-0.3}]},\"prompt_logprobs\":[null,{\"4\":{\"logprob\":-3.0,\"rank\":5},"
                       "\"2\":{\"logprob\":-0.4,\"rank\":1}}]}]}";
    st_qanswer a;
    char err[256];
    assert_int_equal(st_quality_parse(ST_QAPI_OPENAI, body, strlen(body), &a, err, sizeof err), 0);
    assert_int_equal(a.n, 2);
    assert_int_equal(a.tok[0].token, 7);
    assert_int_equal(a.tok[0].k, 2);
    assert_int_equal(a.tok[0].ids[1], 9);
    assert_near(a.tok[0].lp[1], -2.0, 1e-12);
    assert_near(a.tok[1].logp, -0.3, 1e-12);
    assert_int_equal(a.n_scored, 2);
    assert_int_equal(a.scored[0].k, 0); /* the first prompt token has no distribution */
    assert_int_equal(a.scored[1].k, 2);
    st_qanswer_free(&a);
    const char *none = "{\"choices\":[{\"text\":\"ab\",\"logprobs\":null}]}";
    assert_int_equal(st_quality_parse(ST_QAPI_OPENAI, none, strlen(none), &a, err, sizeof err), 0);
    assert_int_equal(a.no_logprobs, 1);
    st_qanswer_free(&a);
}

static void limits_in_words_and_json(void **state)
{
    (void)state;
    st_spec s;
    char err[512];
    assert_int_equal(parse_with("quality: {limits: {max_mean_kld: 0.02, min_same_top1: 0.95, min_exact_match: 0.5}}\n",
                                &s, err, sizeof err),
                     0);
    st_quality_result r = { .status = ST_Q_MEASURED, .prompts = 64, .top_k = 10, .engine_s = 12.5 };
    snprintf(r.mode, sizeof r.mode, "free-running");
    st_drift_summarize(&(st_drift_acc){ 0 }, &r.d);
    r.d.positions = 100;
    r.d.kld_mean = 0.052;
    r.d.same_top1 = 0.91;
    r.d.answers = 64;
    r.d.exact = 40;
    r.d.exact_match = 40.0 / 64;
    st_quality_judge(&s, &r);
    assert_int_equal(r.pass, 0);
    assert_non_null(strstr(r.note, "mean KL divergence 0.052 nats above the limit 0.02"));
    assert_non_null(strstr(r.note, "same top-1 91.0 % below the limit 95.0 %"));
    assert_null(strstr(r.note, "identical")); /* 62.5 % meets 50 % */
    /* within every limit */
    r.d.kld_mean = 0.01;
    r.d.same_top1 = 0.99;
    st_quality_judge(&s, &r);
    assert_int_equal(r.pass, 1);
    assert_string_equal(r.note, "");
    /* JSON round trip, NAN as null */
    st_buf b;
    st_buf_init(&b, 1 << 16);
    assert_int_equal(st_quality_to_json(&r, &b), 0);
    assert_non_null(strstr(b.data, "\"kld_p99\":null"));
    st_quality_result back;
    assert_int_equal(st_quality_from_json(b.data, b.len, &back), 0);
    assert_int_equal(back.status, ST_Q_MEASURED);
    assert_string_equal(back.mode, "free-running");
    assert_near(back.d.kld_mean, 0.01, 1e-12);
    assert_int_equal(back.d.exact, 40);
    assert_true(isnan(back.d.kld_p99));
    assert_near(back.engine_s, 12.5, 1e-12);
    assert_int_equal(back.pass, 1);
    st_buf_free(&b);
    /* not measured: never judged a pass on figures it does not have, never failed either */
    st_quality_result nl = { .status = ST_Q_NO_LOGPROBS };
    st_quality_judge(&s, &nl);
    assert_int_equal(nl.pass, 1);
    st_spec_free(&s);
}

/* The emulator's pseudo language model: the reference's first candidate has probability
 * (1 - e^-0.5) / (1 - e^-32) = 0.393469340; a perturbed model is deterministic, sorted, and differs. */
static void pseudo_model(void **state)
{
    (void)state;
    st_plm ref, q4, q4b;
    st_plm_init(&ref, 151936, 16, 16);
    st_plm_init(&q4, 151936, 4, 16);
    st_plm_init(&q4b, 151936, 4, 16);
    assert_near(ref.noise, 0, 0);
    assert_near(q4.noise, ST_PLM_NOISE_4BIT, 1e-12);
    uint32_t ids[8], ids2[8], idq[8];
    double lp[8], lp2[8], lpq[8];
    uint64_t h = st_plm_hash_ids((const uint32_t[]){ 5, 6, 7 }, 3);
    st_plm_next(&ref, h, 8, ids, lp);
    assert_near(lp[0], log(0.393469340), 1e-8);
    assert_near(lp[1] - lp[0], -0.5, 1e-12);
    st_plm_next(&q4, h, 8, idq, lpq);
    st_plm_next(&q4b, h, 8, ids2, lp2);
    int differ = 0;
    for (int i = 0; i < 8; i++) {
        assert_int_equal(idq[i], ids2[i]); /* deterministic */
        assert_near(lpq[i], lp2[i], 0);
        if (i)
            assert_true(lpq[i] <= lpq[i - 1]); /* most probable first */
        differ |= fabs(lpq[i] - lp[i]) > 1e-6 || idq[i] != ids[i];
        assert_true(ids[i] >= 1 && ids[i] < 151936);
    }
    assert_true(differ);
    assert_int_not_equal(st_plm_extend(h, 1), st_plm_extend(h, 2));
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(spec_block_defaults_and_limits),
        cmocka_unit_test(request_bodies),
        cmocka_unit_test(parse_llamacpp),
        cmocka_unit_test(parse_openai),
        cmocka_unit_test(limits_in_words_and_json),
        cmocka_unit_test(pseudo_model),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
