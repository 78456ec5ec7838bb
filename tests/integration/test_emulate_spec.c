/* The emulator serving speculative decoding (--speculative-config, with the acceptance given by
 * --spec-acceptance): a stream carries every token, in fewer chunks than tokens (bursts of
 * 1 + accepted, as vLLM streams a verification step); /metrics has vLLM's spec_decode counters,
 * which servetune's own scraper reads, consistent with the tokens generated and the acceptance
 * given; a reasoning span split inside a burst still counts right; no counters without it. */
#include "harness.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "emu_util.h"
#include "engine/metrics.h"

static emu_child emu;

static int setup(void **state)
{
    (void)state;
    const char *extra[] = { "--time-scale",
                            "50",
                            "--max-model-len",
                            "4096",
                            "--speculative-config",
                            "{\"method\":\"ngram\",\"num_speculative_tokens\":4}",
                            "--spec-acceptance",
                            "0.7",
                            "--reasoning-share",
                            "0.3",
                            NULL };
    if (emu_start(&emu, "Qwen/Qwen3-8B", "H100", extra, 1) < 0) {
        char log[4096];
        emu_log(&emu, log, sizeof log);
        fprintf(stderr, "emulator did not start:\n%s\n", log);
        emu_stop(&emu);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    emu_stop(&emu);
    return 0;
}

static double sample(const st_metrics_sample *s, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(s[i].name, name))
            return s[i].value;
    return NAN;
}

/* Words in the data of a stream's chunks: the text (completions) or the delta's content and
 * reasoning_content (chat); *chunks counts the chunks that carry any. */
static int stream_words(const char *body, int *chunks, int *reasoning_words)
{
    int words = 0;
    *chunks = 0;
    *reasoning_words = 0;
    for (const char *p = strstr(body, "data: "); p; p = strstr(p + 1, "data: ")) {
        const char *e = strstr(p, "\n\n");
        if (!e)
            break;
        json_t *j = json_loadb(p + 6, (size_t)(e - p - 6), 0, NULL);
        if (!j)
            continue; /* [DONE] */
        json_t *c = json_array_get(json_object_get(j, "choices"), 0);
        const char *parts[3] = { json_string_value(json_object_get(c, "text")),
                                 json_string_value(json_object_get(json_object_get(c, "delta"), "content")),
                                 json_string_value(json_object_get(json_object_get(c, "delta"), "reasoning_content")) };
        int any = 0;
        for (int k = 0; k < 3; k++) {
            if (!parts[k])
                continue;
            int w = 0;
            for (const char *q = parts[k]; *q; q++)
                if (*q != ' ' && (q == parts[k] || q[-1] == ' '))
                    w++;
            if (strstr(parts[k], "<think>") || strstr(parts[k], "</think>"))
                w -= (strstr(parts[k], "<think>") != NULL) + (strstr(parts[k], "</think>") != NULL);
            words += w;
            if (k == 2)
                *reasoning_words += w;
            any |= w > 0;
        }
        *chunks += any;
        json_decref(j);
    }
    return words;
}

static void streams_in_bursts(void **state)
{
    (void)state;
    http_res r;
    assert_int_equal(http_do(emu.port, "POST", "/v1/completions",
                             "{\"model\":\"Qwen/Qwen3-8B\",\"prompt\":[11,22,33,44,55,66,77],\"max_tokens\":200,"
                             "\"ignore_eos\":true,\"stream\":true,\"stream_options\":{\"include_usage\":true}}",
                             NULL, 20000, &r),
                     0);
    assert_int_equal(r.status, 200);
    int chunks, rw;
    int words = stream_words(r.body.data, &chunks, &rw);
    assert_int_equal(words, 200);
    /* 1 + 0.7 + 0.49 + 0.34 + 0.24 = 2.77 tokens a step after the first: about 73 chunks */
    print_message("# 200 tokens in %d chunks\n", chunks);
    assert_true(chunks < 120 && chunks > 40);
    assert_non_null(strstr(r.body.data, "\"completion_tokens\":200"));
    http_res_free(&r);

    /* chat: the reasoning span (30 %) and the answer, each word once, however the bursts fall */
    assert_int_equal(http_do(emu.port, "POST", "/v1/chat/completions",
                             "{\"model\":\"Qwen/Qwen3-8B\",\"messages\":[{\"role\":\"user\",\"content\":\"hi there\"}],"
                             "\"max_tokens\":101,\"ignore_eos\":true,\"stream\":true}",
                             NULL, 20000, &r),
                     0);
    assert_int_equal(r.status, 200);
    words = stream_words(r.body.data, &chunks, &rw);
    assert_int_equal(words, 101);
    assert_int_equal(rw, 30); /* floor(0.3 x 101) reasoning tokens */
    assert_true(chunks < 101);
    http_res_free(&r);

    /* non-streaming: every word */
    assert_int_equal(http_do(emu.port, "POST", "/v1/completions",
                             "{\"model\":\"Qwen/Qwen3-8B\",\"prompt\":[5,6,7,8],\"max_tokens\":57,\"ignore_eos\":true}",
                             NULL, 20000, &r),
                     0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body.data, "\"completion_tokens\":57"));
    http_res_free(&r);
}

static void metrics_are_vllms(void **state)
{
    (void)state;
    /* some load: 6 more requests of 300 tokens */
    for (int i = 0; i < 6; i++) {
        http_res r;
        char body[256];
        snprintf(body, sizeof body,
                 "{\"model\":\"Qwen/Qwen3-8B\",\"prompt\":[%d,22,33,44],\"max_tokens\":300,\"ignore_eos\":true}",
                 100 + i);
        assert_int_equal(http_do(emu.port, "POST", "/v1/completions", body, NULL, 20000, &r), 0);
        assert_int_equal(r.status, 200);
        http_res_free(&r);
    }
    http_res m;
    assert_int_equal(http_do(emu.port, "GET", "/metrics", NULL, NULL, 5000, &m), 0);
    assert_int_equal(m.status, 200);
    assert_non_null(strstr(m.body.data, "# TYPE vllm:spec_decode_num_drafts_total counter"));
    assert_non_null(strstr(m.body.data, "vllm:spec_decode_num_accepted_tokens_per_pos_total{"));
    assert_non_null(strstr(m.body.data, "position=\"3\"}"));
    st_metrics_sample s[ST_METRICS_SCRAPE_MAX];
    int n = st_metrics_scrape(ST_DIALECT_VLLM, m.body.data, m.body.len, s, ST_METRICS_SCRAPE_MAX);
    double drafts = sample(s, n, "spec_drafts"), dtok = sample(s, n, "spec_draft_tokens"),
           acc = sample(s, n, "spec_accepted_tokens"), gen = sample(s, n, "generation_tokens");
    print_message("# drafts %.0f, draft tokens %.0f, accepted %.0f, generated %.0f\n", drafts, dtok, acc, gen);
    assert_true(drafts > 100);
    /* every decode step after a request's first token drafts: generated = first tokens + steps + accepted */
    double requests = 3 + 6;
    assert_true(gen - requests - drafts - acc >= 0);
    assert_true(gen - requests - drafts - acc <= 2 * requests); /* steps too near max_tokens to draft */
    /* acceptance: sum of 0.7^i, i = 1..4, over 4 draft tokens (draws: within a few standard errors) */
    double want = (0.7 + 0.49 + 0.343 + 0.2401) / 4;
    assert_true(fabs(acc / dtok - want) < 0.06);
    double p0 = sample(s, n, "spec_accepted_pos_00"), p3 = sample(s, n, "spec_accepted_pos_03");
    assert_true(fabs(p0 / drafts - 0.7) < 0.06);
    assert_true(p3 < p0);
    assert_true(fabs(p0 + sample(s, n, "spec_accepted_pos_01") + sample(s, n, "spec_accepted_pos_02") + p3 - acc) <
                0.5);
    http_res_free(&m);
}

static void no_counters_without_speculation(void **state)
{
    (void)state;
    emu_child plain;
    const char *extra[] = { "--time-scale", "50", NULL };
    assert_int_equal(emu_start(&plain, "Qwen/Qwen3-8B", "H100", extra, 1), 0);
    http_res m;
    assert_int_equal(http_do(plain.port, "GET", "/metrics", NULL, NULL, 5000, &m), 0);
    assert_null(strstr(m.body.data, "spec_decode"));
    http_res_free(&m);
    emu_stop(&plain);
    /* a bad configuration is refused at startup, as vLLM's argparse would */
    emu_child bad;
    const char *extra2[] = { "--speculative-config", "{\"method\":\"guess\",\"num_speculative_tokens\":2}", NULL };
    assert_int_equal(emu_start(&bad, "Qwen/Qwen3-8B", "H100", extra2, 0), 0);
    int rc = emu_wait(&bad, 10000);
    char log[4096];
    emu_log(&bad, log, sizeof log);
    emu_stop(&bad);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(log, "method 'guess'"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(streams_in_bursts),
        cmocka_unit_test(metrics_are_vllms),
        cmocka_unit_test(no_counters_without_speculation),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
