/* `servetune predict` with speculative configurations: the spec's `speculation:` acceptance reaches
 * the engine model of a configuration whose flags give none (its flags' own wins), the run's TPOT
 * falls with an accepted draft and rises with none, and the table of TPOT by batch says where it
 * stops paying. The `speculation:` block's refusals name their reason. */
#include "harness.h"

#include <stdio.h>
#include <string.h>

#define ST_IT_TMP_PREFIX "/tmp/st_predict_spec_it."
#include "audit/executor.h"
#include "emu/config.h"
#include "audit/spec.h"
#include "audit_util.h"

static const char *SPEC =
    "engine:\n"
    "  kind: vllm\n"
    "  model: Qwen/Qwen3-8B\n"
    "  flags: [--max-model-len, '8192']\n"
    "hardware: {gpu: H100, price_per_gpu_hour: 2.49}\n"
    "peak_rate: 10\n"
    "workload: {input_tokens: 1000, output_tokens: 300, seed: 1, requests_per_rate: 60, "
    "allow_synthetic_speculation: true}\n"
    "rates: [2]\n"
    "slo: {ttft_p95_ms: 1500, tpot_p95_ms: 50}\n"
    "search: {mode: burst}\n"
    "speculation: {acceptance: 0.7}\n"
    "configurations:\n"
    "  - name: baseline\n"
    "  - name: ngram4\n"
    "    add_flags: [--speculative-config, '{\"method\":\"ngram\",\"num_speculative_tokens\":4}']\n"
    "  - name: never\n"
    "    add_flags: [--speculative-config, '{\"method\":\"ngram\",\"num_speculative_tokens\":4}', "
    "--spec-acceptance, '0']\n"
    "  - name: draft\n"
    "    add_flags: [--speculative-config, "
    "'{\"model\":\"Qwen/Qwen3-0.6B\",\"num_speculative_tokens\":4}']\n";

static void spec_block_reaches_the_engine_model(void **state)
{
    (void)state;
    st_spec s;
    char err[1024];
    assert_int_equal(st_spec_parse("t.yaml", SPEC, strlen(SPEC), &s, err, sizeof err), 0);
    assert_true(s.speculation.given);
    assert_false(s.workload.temperature_set); /* none: the engine's default */
    assert_near(s.speculation.acceptance, 0.7, 1e-12);
    st_emu_config c;
    assert_int_equal(st_exec_model_config(&s, &s.configs[0], &c, NULL, 0, NULL, err, sizeof err), 0);
    assert_int_equal(c.spec.k, 0);
    assert_int_equal(st_exec_model_config(&s, &s.configs[1], &c, NULL, 0, NULL, err, sizeof err), 0);
    assert_int_equal(c.spec.k, 4);
    assert_near(c.spec.acceptance, 0.7, 1e-12);
    assert_near(c.spec.draft_share, 1, 1e-12);
    assert_int_equal(st_exec_model_config(&s, &s.configs[2], &c, NULL, 0, NULL, err, sizeof err), 0);
    assert_near(c.spec.acceptance, 0, 1e-12); /* its own flag wins */
    assert_int_equal(st_exec_model_config(&s, &s.configs[3], &c, NULL, 0, NULL, err, sizeof err), 0);
    assert_int_equal(c.spec.draft_model, 1);
    st_spec_free(&s);

    /* by position, with a share */
    char text[4096];
    snprintf(text, sizeof text, "%s", SPEC);
    char *at = strstr(text, "speculation: {acceptance: 0.7}");
    assert_non_null(at);
    const char *rest = strstr(SPEC, "configurations:");
    snprintf(at, sizeof text - (size_t)(at - text), "speculation: {acceptance: [0.8, 0.6, 0.3], draft_share: 0.5}\n%s",
             rest);
    assert_int_equal(st_spec_parse("t.yaml", text, strlen(text), &s, err, sizeof err), 0);
    assert_int_equal(s.speculation.n_pos, 3);
    assert_int_equal(st_exec_model_config(&s, &s.configs[1], &c, NULL, 0, NULL, err, sizeof err), 0);
    assert_int_equal(c.spec.n_pos, 3);
    assert_near(c.spec.accept_pos[1], 0.6, 1e-12);
    assert_near(c.spec.draft_share, 0.5, 1e-12);
    st_spec_free(&s);

    /* workload.temperature: 0 is greedy, sent in every request; above 2 refused */
    snprintf(text, sizeof text, "%s", SPEC);
    char *t2 = strstr(text, "allow_synthetic_speculation: true}");
    assert_non_null(t2);
    const char *after =
        strstr(SPEC, "allow_synthetic_speculation: true}") + strlen("allow_synthetic_speculation: true}");
    snprintf(t2, sizeof text - (size_t)(t2 - text), "allow_synthetic_speculation: true, temperature: 0}%s", after);
    assert_int_equal(st_spec_parse("t.yaml", text, strlen(text), &s, err, sizeof err), 0);
    assert_true(s.workload.temperature_set);
    assert_near(s.workload.temperature, 0, 0);
    st_spec_free(&s);
    snprintf(t2, sizeof text - (size_t)(t2 - text), "allow_synthetic_speculation: true, temperature: 3}%s", after);
    assert_int_equal(st_spec_parse("t.yaml", text, strlen(text), &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "workload.temperature: at most 2"));
    snprintf(text, sizeof text, "%s", SPEC);
    at = strstr(text, "speculation: {acceptance: 0.7}");

    const struct {
        const char *block, *why;
    } bad[] = {
        { "speculation: {acceptance: 1.5}\n", "within 0..1" },
        { "speculation: {acceptance: [0.5, 0.7]}\n", "at most the one before it" },
        { "speculation: {draft_share: 0.5}\n", "'acceptance' is required" },
        { "speculation: {acceptance: 0.5, draft_share: 2}\n", "draft_share" },
        { "speculation: {acceptance: 0.5, guess: 1}\n", "guess" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(at, sizeof text - (size_t)(at - text), "%s%s", bad[i].block, rest);
        err[0] = '\0';
        if (st_spec_parse("t.yaml", text, strlen(text), &s, err, sizeof err) == 0) {
            st_spec_free(&s);
            fail_msg("accepted: %s", bad[i].block);
        }
        if (!strstr(err, bad[i].why))
            fail_msg("%s: '%s' does not say '%s'", bad[i].block, err, bad[i].why);
    }
}

/* A row of the TPOT table: "    BATCH   PLAIN ms   SPEC ms   CHANGE%" after the configuration's line. */
static int table_change(const char *out, const char *config, unsigned batch, double *change)
{
    char head[128];
    snprintf(head, sizeof head, "  %s: ", config);
    const char *p = strstr(out, head);
    if (!p)
        return -1;
    char row[64];
    snprintf(row, sizeof row, "\n    %-8u ", batch);
    const char *r = strstr(p, row);
    const char *next = strstr(p + strlen(head), "\n  ");
    while (next && next[3] == ' ')
        next = strstr(next + 1, "\n  ");
    if (!r || (next && r > next))
        return -1;
    double a, b;
    return sscanf(r + strlen(row), "%lf ms %lf ms %lf%%", &a, &b, change) == 3 ? 0 : -1;
}

static void predict_prices_speculation(void **state)
{
    (void)state;
    char spec[600], out[600], log[600];
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    snprintf(log, sizeof log, "%s/servetune.out", tmp);
    FILE *f = fopen(spec, "w");
    assert_non_null(f);
    fputs(SPEC, f);
    fclose(f);
    const char *args[] = { "predict", spec, "-o", out, NULL };
    assert_int_equal(run_servetune(args, 60), 0);
    static char text[1 << 16];
    f = fopen(log, "rb");
    assert_non_null(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    assert_non_null(strstr(text, "Speculative decoding on the engine model"));
    double ng1, ng128, never1, dr1, dr128;
    assert_int_equal(table_change(text, "ngram4", 1, &ng1), 0);
    assert_int_equal(table_change(text, "ngram4", 128, &ng128), 0);
    assert_int_equal(table_change(text, "never", 8, &never1), 0);
    assert_int_equal(table_change(text, "draft", 1, &dr1), 0);
    assert_int_equal(table_change(text, "draft", 128, &dr128), 0);
    assert_true(ng1 < -40);   /* 2.77 tokens a step for little more than one step's time */
    assert_true(ng128 > ng1); /* the verified tokens cost more as the batch grows */
    assert_true(never1 > 0);  /* nothing accepted: only the cost */
    assert_true(dr1 > ng1);   /* the draft model's own steps */
    assert_true(dr128 > 0);   /* ... and at 128 sequences it no longer pays */
    assert_non_null(strstr(
        text, "never: 4 draft tokens by n-gram lookup, 1.00 tokens per step (100% of steps drafting, 0.00 accepted a "
              "draft) -- none accepted"));
    assert_non_null(strstr(text, "it does not pay at any batch"));
    assert_non_null(strstr(text, "it stops paying from a batch of"));
    /* the runs themselves: TPOT below the baseline's with an acceptance, above it without */
    json_t *root = load_json(out);
    assert_non_null(root);
    double tpot[3];
    const char *names[] = { "baseline", "ngram4", "never" };
    for (int i = 0; i < 3; i++) {
        json_t *c = config_named(root, names[i]);
        assert_non_null(c);
        json_t *r0 = json_array_get(json_object_get(c, "runs"), 0);
        tpot[i] = json_real_value(json_object_get(r0, "tpot_p50_ms"));
        assert_true(tpot[i] > 0);
    }
    print_message("# TPOT p50: baseline %.2f ms, ngram4 %.2f ms, never %.2f ms\n", tpot[0], tpot[1], tpot[2]);
    assert_true(tpot[1] < 0.6 * tpot[0]);
    assert_true(tpot[2] > tpot[0]);
    json_decref(root);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(spec_block_reaches_the_engine_model),
        cmocka_unit_test_setup_teardown(predict_prices_speculation, setup, teardown),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
