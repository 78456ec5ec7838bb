/* audit --check on speculative configurations (audit/check.h, engine/specdec.h): flags the engine
 * would refuse are refused with the configuration named, and speculation on prompts of random
 * token ids is refused unless workload.allow_synthetic_speculation says to run it anyway. */
#include "harness.h"

#include <stdio.h>
#include <unistd.h>

#include "audit/check.h"
#include "audit/spec.h"

static int check(const char *kind, const char *workload, const char *flags, char *err, size_t errlen)
{
    char text[4096];
    snprintf(text, sizeof text,
             "engine: {kind: %s, model: Qwen/Qwen3-8B}\n"
             "hardware: {gpu: H100, price_per_gpu_hour: 2.5}\n"
             "peak_rate: 10\n"
             "workload: {%s}\n"
             "rates: [1, 2]\n"
             "slo: {ttft_p95_ms: 1500, tpot_p95_ms: 50}\n"
             "configurations:\n"
             "  - name: spec\n"
             "    add_flags: [%s]\n",
             kind, workload, flags);
    st_spec s;
    if (st_spec_parse("t.yaml", text, strlen(text), &s, err, errlen))
        return -2;
    int rc = st_spec_check(&s, err, errlen);
    st_spec_free(&s);
    return rc;
}

#define NGRAM "'--speculative-config', '{\"method\": \"ngram\", \"num_speculative_tokens\": 4}'"
#define SYNTH "input_tokens: 100, output_tokens: 10"

static void refused_or_not(void **state)
{
    (void)state;
    char err[2048];
    assert_int_equal(check("vllm", SYNTH, NGRAM, err, sizeof err), -1);
    assert_non_null(strstr(err, "configurations[spec]: speculates (vLLM ngram, 4 draft tokens, lookup 5..5)"));
    assert_non_null(strstr(err, "random token ids (the synthetic workload)"));
    assert_non_null(strstr(err, "allow_synthetic_speculation"));
    if (check("vllm", SYNTH ", allow_synthetic_speculation: true", NGRAM, err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(check("vllm", SYNTH ", allow_synthetic_speculation: yes please", NGRAM, err, sizeof err), -2);
    /* no speculation: nothing to refuse */
    if (check("vllm", SYNTH, "'--max-num-seqs', '64'", err, sizeof err))
        fail_msg("%s", err);

    assert_int_equal(check("vllm", SYNTH ", allow_synthetic_speculation: true",
                           "'--speculative-config', '{\"method\": \"lookahead\", \"num_speculative_tokens\": 2}'", err,
                           sizeof err),
                     -1);
    assert_non_null(strstr(err, "configurations[spec]: --speculative-config: unknown method \"lookahead\""));
    assert_int_equal(check("vllm", SYNTH ", allow_synthetic_speculation: true", "'--speculative-config', '{ngram}'",
                           err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "is not JSON"));
    assert_int_equal(check("sglang", SYNTH ", allow_synthetic_speculation: true",
                           "'--speculative-algorithm', 'LOOKAHEAD'", err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "unknown algorithm"));
    assert_int_equal(check("llamacpp", SYNTH ", allow_synthetic_speculation: true",
                           "'-md', 'd.gguf', '--draft-max', '8'", err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "--draft-max was removed"));
    assert_int_equal(check("llamacpp", SYNTH, "'-md', 'd.gguf', '--spec-draft-n-max', '8'", err, sizeof err), -1);
    assert_non_null(strstr(err, "llama.cpp draft-simple with d.gguf"));
}

/* A trace whose requests carry their text is the client's own: no refusal; token counts are not. */
static void traces(void **state)
{
    (void)state;
    char dir[] = "/tmp/st-specchk-XXXXXX", text[300], counts[300], wl[400], err[2048];
    assert_non_null(mkdtemp(dir));
    snprintf(text, sizeof text, "%s/text.jsonl", dir);
    snprintf(counts, sizeof counts, "%s/counts.jsonl", dir);
    FILE *f = fopen(text, "w");
    assert_non_null(f);
    for (int i = 0; i < 12; i++)
        fprintf(f, "{\"text\": \"summarise the report number %d\", \"completion\": \"the report says\"}\n", i);
    fclose(f);
    f = fopen(counts, "w");
    assert_non_null(f);
    for (int i = 0; i < 12; i++)
        fprintf(f, "{\"input_tokens\": 100, \"output_tokens\": 10}\n");
    fclose(f);
    snprintf(wl, sizeof wl, "trace: %s, requests_per_rate: 12", text);
    int rc = check("vllm", wl, NGRAM, err, sizeof err);
    if (rc)
        fail_msg("%s", err);
    snprintf(wl, sizeof wl, "trace: %s, requests_per_rate: 12", counts);
    assert_int_equal(check("vllm", wl, NGRAM, err, sizeof err), -1);
    assert_non_null(strstr(err, "the trace's requests are token counts"));
    unlink(text);
    unlink(counts);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(refused_or_not),
        cmocka_unit_test(traces),
    };
    return cmocka_run_group_tests(tests, 0, 0);
}
