/* The emulator over HTTP: wire formats, errors, auth, metrics (promtool), tokenizer, ground
 * truth, prefix-cache reset. One emulator child per group, killed at the end. */
#include "harness.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "emu_util.h"

static emu_child emu; /* the child of this test group (teardown kills it) */
static char gt_path[256];

static int setup(void **state)
{
    (void)state;
    snprintf(gt_path, sizeof gt_path, "/tmp/st-emu-gt-%d.jsonl", (int)getpid());
    const char *extra[] = { "--time-scale",
                            "50",
                            "--api-key",
                            "sekret",
                            "--max-model-len",
                            "4096",
                            "--served-model-name",
                            "qwen8",
                            "--ground-truth",
                            gt_path,
                            "--seed",
                            "1",
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
    unlink(gt_path);
    return 0;
}

static json_t *parse(const http_res *r)
{
    json_error_t je;
    json_t *j = json_loads(r->body.data, 0, &je);
    if (!j)
        fail_msg("not JSON (%s): %.300s", je.text, r->body.data);
    return j;
}

static void completions_non_streaming(void **state)
{
    (void)state;
    http_res r;
    assert_int_equal(
        http_do(emu.port, "POST", "/v1/completions",
                "{\"model\":\"qwen8\",\"prompt\":[11,22,33,44,55,66,77],\"max_tokens\":9,\"ignore_eos\":true}",
                "sekret", 5000, &r),
        0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.ctype, "application/json"));
    json_t *j = parse(&r);
    assert_string_equal(json_string_value(json_object_get(j, "object")), "text_completion");
    assert_string_equal(json_string_value(json_object_get(j, "model")), "qwen8");
    assert_int_equal(strncmp(json_string_value(json_object_get(j, "id")), "cmpl-", 5), 0);
    json_t *ch = json_array_get(json_object_get(j, "choices"), 0);
    assert_string_equal(json_string_value(json_object_get(ch, "finish_reason")), "length");
    const char *text = json_string_value(json_object_get(ch, "text"));
    assert_int_equal(count_sub(text, " "), 9); /* one word per token, each with a leading space */
    json_t *u = json_object_get(j, "usage");
    assert_int_equal(json_integer_value(json_object_get(u, "prompt_tokens")), 7);
    assert_int_equal(json_integer_value(json_object_get(u, "completion_tokens")), 9);
    assert_int_equal(json_integer_value(json_object_get(u, "total_tokens")), 16);
    json_decref(j);
    http_res_free(&r);
    /* default max_tokens of completions is 16; text prompts count words */
    assert_int_equal(http_do(emu.port, "POST", "/v1/completions", "{\"prompt\":\"one two three\"}", "sekret", 5000, &r),
                     0);
    j = parse(&r);
    u = json_object_get(j, "usage");
    assert_int_equal(json_integer_value(json_object_get(u, "prompt_tokens")), 3);
    assert_int_equal(json_integer_value(json_object_get(u, "completion_tokens")), 16);
    json_decref(j);
    http_res_free(&r);
}

static void completions_stream_bytes(void **state)
{
    (void)state;
    http_res r;
    assert_int_equal(http_do(emu.port, "POST", "/v1/completions",
                             "{\"model\":\"qwen8\",\"prompt\":[5,6,7],\"max_tokens\":4,\"stream\":true,"
                             "\"stream_options\":{\"include_usage\":true}}",
                             "sekret", 5000, &r),
                     0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.ctype, "text/event-stream"));
    const char *b = r.body.data;
    /* 4 token chunks + the usage chunk + [DONE], each "data: ...\n\n" */
    assert_int_equal(count_sub(b, "data: "), 6);
    assert_int_equal(count_sub(b, "\n\n"), 6);
    assert_int_equal(strncmp(b, "data: {\"id\":\"cmpl-", 18), 0);
    assert_int_equal(count_sub(b, "\"object\":\"text_completion\""), 5);
    assert_int_equal(count_sub(b, "\"finish_reason\":null"), 3);
    assert_int_equal(count_sub(b, "\"finish_reason\":\"length\""), 1);
    assert_non_null(
        strstr(b, "\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"total_tokens\":7,\"completion_tokens\":4}}\n\n"));
    size_t L = strlen(b);
    assert_true(L > 14 && !strcmp(b + L - 14, "data: [DONE]\n\n"));
    /* every chunk's choices text field parses as JSON */
    const char *p = b;
    int parsed = 0;
    while ((p = strstr(p, "data: {"))) {
        const char *e = strstr(p, "\n\n");
        assert_non_null(e);
        json_error_t je;
        json_t *j = json_loadb(p + 6, (size_t)(e - p - 6), 0, &je);
        assert_non_null(j);
        json_decref(j);
        parsed++;
        p = e;
    }
    assert_int_equal(parsed, 5);
    http_res_free(&r);
    /* continuous usage: every chunk has a running usage */
    assert_int_equal(http_do(emu.port, "POST", "/v1/completions",
                             "{\"prompt\":[5,6,7],\"max_tokens\":3,\"stream\":true,"
                             "\"stream_options\":{\"include_usage\":true,\"continuous_usage_stats\":true}}",
                             "sekret", 5000, &r),
                     0);
    assert_int_equal(count_sub(r.body.data, "\"usage\":"), 4);
    assert_non_null(strstr(r.body.data, "\"completion_tokens\":2}"));
    http_res_free(&r);
}

static void chat_stream_and_plain(void **state)
{
    (void)state;
    http_res r;
    assert_int_equal(http_do(emu.port, "POST", "/v1/chat/completions",
                             "{\"model\":\"qwen8\",\"messages\":[{\"role\":\"user\",\"content\":\"hello there\"}],"
                             "\"max_completion_tokens\":3,\"stream\":true}",
                             "sekret", 5000, &r),
                     0);
    assert_int_equal(r.status, 200);
    const char *b = r.body.data;
    assert_int_equal(strncmp(b, "data: {\"id\":\"chatcmpl-", 22), 0);
    const char *first_end = strstr(b, "\n\n");
    assert_non_null(first_end);
    assert_non_null(strstr(b, "\"delta\":{\"role\":\"assistant\",\"content\":\"\"}"));
    assert_true(strstr(b, "\"delta\":{\"role\":\"assistant\"") < first_end);
    assert_int_equal(count_sub(b, "\"object\":\"chat.completion.chunk\""), 4);
    assert_int_equal(count_sub(b, "\"delta\":{\"content\":\" "), 3);
    assert_int_equal(count_sub(b, "\"finish_reason\":\"length\""), 1);
    assert_int_equal(count_sub(b, "\"usage\""), 0); /* no stream_options: no usage chunk */
    assert_non_null(strstr(b, "data: [DONE]\n\n"));
    http_res_free(&r);
    assert_int_equal(http_do(emu.port, "POST", "/v1/chat/completions",
                             "{\"messages\":[{\"role\":\"system\",\"content\":\"be "
                             "brief\"},{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":5}",
                             "sekret", 5000, &r),
                     0);
    json_t *j = parse(&r);
    assert_string_equal(json_string_value(json_object_get(j, "object")), "chat.completion");
    json_t *m = json_object_get(json_array_get(json_object_get(j, "choices"), 0), "message");
    assert_string_equal(json_string_value(json_object_get(m, "role")), "assistant");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "usage"), "completion_tokens")), 5);
    json_decref(j);
    http_res_free(&r);
}

static void errors_are_vllm_shaped(void **state)
{
    (void)state;
    http_res r;
    /* prompt + max_tokens over max_model_len (4096) */
    assert_int_equal(
        http_do(emu.port, "POST", "/v1/completions", "{\"prompt\":[1,2,3,4],\"max_tokens\":4095}", "sekret", 5000, &r),
        0);
    assert_int_equal(r.status, 400);
    assert_string_equal(
        r.body.data, "{\"error\":{\"message\":\"You passed 4 input tokens and requested 4095 output tokens. However, "
                     "the model's context length is only 4096 tokens, resulting in a maximum input length of 1 "
                     "tokens. Please reduce the length of the input prompt.\",\"type\":\"BadRequestError\","
                     "\"param\":\"input_tokens\",\"code\":400}}");
    http_res_free(&r);
    assert_int_equal(
        http_do(emu.port, "POST", "/v1/completions", "{\"model\":\"gpt-4\",\"prompt\":\"x\"}", "sekret", 5000, &r), 0);
    assert_int_equal(r.status, 404);
    assert_string_equal(r.body.data, "{\"error\":{\"message\":\"The model `gpt-4` does not "
                                     "exist.\",\"type\":\"NotFoundError\",\"param\":\"model\",\"code\":404}}");
    http_res_free(&r);
    assert_int_equal(http_do(emu.port, "POST", "/v1/completions",
                             "{\"prompt\":\"x\",\"stream_options\":{\"include_usage\":true}}", "sekret", 5000, &r),
                     0);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body.data, "\"type\":\"BadRequestError\""));
    http_res_free(&r);
    assert_int_equal(http_do(emu.port, "POST", "/v1/completions", "{\"prompt\":[1,2,999999]}", "sekret", 5000, &r), 0);
    assert_int_equal(r.status, 400);
    http_res_free(&r);
    assert_int_equal(http_do(emu.port, "POST", "/v1/completions", "not json", "sekret", 5000, &r), 0);
    assert_int_equal(r.status, 400);
    http_res_free(&r);
    /* several choices per request are refused, not answered with one; a max_tokens of the wrong type is named */
    assert_int_equal(http_do(emu.port, "POST", "/v1/completions", "{\"prompt\":\"x\",\"n\":3}", "sekret", 5000, &r), 0);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body.data, "\"param\":\"n\""));
    http_res_free(&r);
    assert_int_equal(
        http_do(emu.port, "POST", "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":\"x\"}", "sekret", 5000, &r), 0);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body.data, "max_tokens must be an integer"));
    http_res_free(&r);
    assert_int_equal(
        http_do(emu.port, "POST", "/v1/completions", "{\"prompt\":\"x\",\"n\":1,\"max_tokens\":2}", "sekret", 5000, &r),
        0);
    assert_int_equal(r.status, 200);
    http_res_free(&r);
    /* auth */
    assert_int_equal(http_do(emu.port, "POST", "/v1/completions", "{\"prompt\":\"x\"}", NULL, 5000, &r), 0);
    assert_int_equal(r.status, 401);
    assert_string_equal(r.body.data, "{\"error\":\"Unauthorized\"}");
    http_res_free(&r);
    assert_int_equal(http_do(emu.port, "GET", "/v1/models", NULL, "wrong", 5000, &r), 0);
    assert_int_equal(r.status, 401);
    http_res_free(&r);
    assert_int_equal(http_do(emu.port, "GET", "/metrics", NULL, NULL, 5000, &r), 0);
    assert_int_equal(r.status, 200); /* no auth on /metrics */
    http_res_free(&r);
    assert_int_equal(http_do(emu.port, "GET", "/health", NULL, NULL, 5000, &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body.len, 0);
    http_res_free(&r);
    assert_int_equal(http_do(emu.port, "GET", "/nope", NULL, "sekret", 5000, &r), 0);
    assert_int_equal(r.status, 404);
    http_res_free(&r);
}

static void models_tokenize_detokenize(void **state)
{
    (void)state;
    http_res r;
    assert_int_equal(http_do(emu.port, "GET", "/v1/models", NULL, "sekret", 5000, &r), 0);
    json_t *j = parse(&r);
    json_t *d = json_array_get(json_object_get(j, "data"), 0);
    assert_string_equal(json_string_value(json_object_get(d, "id")), "qwen8");
    assert_string_equal(json_string_value(json_object_get(d, "owned_by")), "vllm");
    assert_int_equal(json_integer_value(json_object_get(d, "max_model_len")), 4096);
    json_decref(j);
    http_res_free(&r);
    assert_int_equal(http_do(emu.port, "POST", "/tokenize", "{\"model\":\"qwen8\",\"prompt\":\"the quick brown fox\"}",
                             "sekret", 5000, &r),
                     0);
    j = parse(&r);
    assert_int_equal(json_integer_value(json_object_get(j, "count")), 4);
    assert_int_equal(json_integer_value(json_object_get(j, "max_model_len")), 4096);
    json_t *toks = json_object_get(j, "tokens");
    assert_int_equal(json_array_size(toks), 4);
    char *tj = json_dumps(toks, JSON_COMPACT);
    json_decref(j);
    http_res_free(&r);
    char body[512];
    snprintf(body, sizeof body, "{\"tokens\":%s}", tj);
    free(tj);
    assert_int_equal(http_do(emu.port, "POST", "/detokenize", body, "sekret", 5000, &r), 0);
    j = parse(&r);
    const char *text = json_string_value(json_object_get(j, "prompt"));
    assert_non_null(text);
    /* ids -> text -> ids round-trips */
    char body2[512];
    snprintf(body2, sizeof body2, "{\"prompt\":\"%s\"}", text);
    json_decref(j);
    http_res_free(&r);
    assert_int_equal(http_do(emu.port, "POST", "/tokenize", body2, "sekret", 5000, &r), 0);
    http_res r1;
    assert_int_equal(
        http_do(emu.port, "POST", "/tokenize", "{\"prompt\":\"the quick brown fox\"}", "sekret", 5000, &r1), 0);
    json_t *a = parse(&r), *b = parse(&r1);
    assert_true(json_equal(json_object_get(a, "tokens"), json_object_get(b, "tokens")));
    json_decref(a);
    json_decref(b);
    http_res_free(&r);
    http_res_free(&r1);
}

static double metric(const char *text, const char *prefix)
{
    const char *p = strstr(text, prefix);
    if (!p)
        return NAN;
    p = strchr(p, '}');
    return p ? strtod(p + 1, NULL) : NAN;
}

static void metrics_follow_state_and_pass_promtool(void **state)
{
    (void)state;
    http_res r;
    assert_int_equal(http_do(emu.port, "GET", "/metrics", NULL, NULL, 5000, &r), 0);
    double gen0 = metric(r.body.data, "vllm:generation_tokens_total{");
    double ok0 =
        metric(r.body.data, "vllm:request_success_total{engine=\"0\",model_name=\"qwen8\",finished_reason=\"length\"");
    double ttft0 = metric(r.body.data, "vllm:time_to_first_token_seconds_count{");
    double ttft_s0 = metric(r.body.data, "vllm:time_to_first_token_seconds_sum{"),
           queue_s0 = metric(r.body.data, "vllm:request_queue_time_seconds_sum{"),
           prefill_s0 = metric(r.body.data, "vllm:request_prefill_time_seconds_sum{");
    http_res_free(&r);
    assert_false(isnan(gen0));
    assert_int_equal(
        http_do(emu.port, "POST", "/v1/completions", "{\"prompt\":[9,8,7,6],\"max_tokens\":25}", "sekret", 5000, &r),
        0);
    assert_int_equal(r.status, 200);
    http_res_free(&r);
    assert_int_equal(http_do(emu.port, "GET", "/metrics", NULL, NULL, 5000, &r), 0);
    assert_non_null(strstr(r.ctype, "text/plain; version=0.0.4"));
    const char *m = r.body.data;
    assert_near(metric(m, "vllm:generation_tokens_total{") - gen0, 25, 0);
    assert_near(metric(m, "vllm:request_success_total{engine=\"0\",model_name=\"qwen8\",finished_reason=\"length\"") -
                    ok0,
                1, 0);
    assert_near(metric(m, "vllm:time_to_first_token_seconds_count{") - ttft0, 1, 0);
    /* vLLM's queue time starts in the engine core: TTFT = the API server's part (its fixed latency,
     * 34.9 ms by default, and its CPU) + queue + prefill, so queue + prefill stay below TTFT by that */
    double ttft_s = metric(m, "vllm:time_to_first_token_seconds_sum{") - ttft_s0,
           queue_s = metric(m, "vllm:request_queue_time_seconds_sum{") - queue_s0,
           prefill_s = metric(m, "vllm:request_prefill_time_seconds_sum{") - prefill_s0;
    if (!(queue_s >= 0 && queue_s + prefill_s <= ttft_s - 0.030))
        fail_msg("queue %.6f s + prefill %.6f s vs TTFT %.6f s: the API server's latency is in the queue time", queue_s,
                 prefill_s, ttft_s);
    assert_near(metric(m, "vllm:num_requests_running{"), 0, 0);
    assert_near(metric(m, "vllm:kv_cache_usage_perc{"), 0, 0);
    assert_non_null(
        strstr(m, "vllm:time_to_first_token_seconds_bucket{engine=\"0\",model_name=\"qwen8\",le=\"0.001\"}"));
    assert_non_null(strstr(m, "le=\"2560.0\"}"));
    assert_non_null(
        strstr(m, "vllm:inter_token_latency_seconds_bucket{engine=\"0\",model_name=\"qwen8\",le=\"0.01\"}"));
    assert_non_null(
        strstr(m, "vllm:e2e_request_latency_seconds_bucket{engine=\"0\",model_name=\"qwen8\",le=\"7680.0\"}"));
    assert_non_null(strstr(m, "# TYPE vllm:iteration_tokens_total histogram"));
    assert_non_null(
        strstr(m, "vllm:cache_config_info{block_size=\"16\",cache_dtype=\"auto\",enable_prefix_caching=\"True\""));
    assert_non_null(strstr(m, "vllm:request_prompt_tokens_bucket{engine=\"0\",model_name=\"qwen8\",le=\"2000.0\"}"));
    assert_null(strstr(m, "le=\"5000.0\"")); /* 1-2-5 series stops at max_model_len */
    /* the emulator's own keeping of its schedule (an idle host: nothing lost) */
    double sent = metric(m, "servetune:emulator_tokens_total{"),
           late = metric(m, "servetune:emulator_tokens_late_total{");
    assert_true(sent >= 0 && late >= 0 && late <= sent);
    assert_true(metric(m, "servetune:emulator_dropped_seconds_total{") >= 0);
    /* promtool: must parse; the only lint findings allowed are those vLLM's own names cause */
    if (system("command -v promtool >/dev/null 2>&1") != 0) {
        http_res_free(&r);
        skip();
    }
    char path[128], out[128], cmd[512];
    snprintf(path, sizeof path, "/tmp/st-emu-metrics-%d.txt", (int)getpid());
    snprintf(out, sizeof out, "/tmp/st-emu-promtool-%d.txt", (int)getpid());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fwrite(r.body.data, 1, r.body.len, f);
    fclose(f);
    http_res_free(&r);
    snprintf(cmd, sizeof cmd, "timeout 20 promtool check metrics < %s > %s 2>&1", path, out);
    int st = system(cmd);
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    f = fopen(out, "r");
    assert_non_null(f);
    char line[512];
    int bad = 0, lines = 0;
    while (fgets(line, sizeof line, f)) {
        lines++;
        if (strstr(line, "metric names should not contain ':'") ||
            strstr(line, "vllm:iteration_tokens_total non-counter metrics should not have \"_total\" suffix"))
            continue;
        fprintf(stderr, "promtool: %s", line);
        bad++;
    }
    fclose(f);
    unlink(path);
    unlink(out);
    assert_true(code == 0 || code == 3); /* 1 would be a parse error */
    assert_int_equal(bad, 0);
    assert_true(lines > 0 || code == 0);
}

static void ground_truth_and_prefix_reset(void **state)
{
    (void)state;
    char body[8192];
    int n = snprintf(body, sizeof body, "{\"prompt\":[");
    for (int i = 0; i < 200; i++)
        n += snprintf(body + n, sizeof body - (size_t)n, i ? ",%d" : "%d", 3000 + i);
    snprintf(body + n, sizeof body - (size_t)n, "],\"max_tokens\":2}");
    http_res r;
    double hits[4];
    for (int k = 0; k < 4; k++) {
        if (k == 2) {
            assert_int_equal(http_do(emu.port, "POST", "/reset_prefix_cache", "{}", "sekret", 5000, &r), 0);
            assert_int_equal(r.status, 200);
            http_res_free(&r);
        }
        assert_int_equal(http_do(emu.port, "POST", "/v1/completions", body, "sekret", 5000, &r), 0);
        assert_int_equal(r.status, 200);
        http_res_free(&r);
        assert_int_equal(http_do(emu.port, "GET", "/metrics", NULL, NULL, 5000, &r), 0);
        hits[k] = metric(r.body.data, "vllm:prefix_cache_hits_total{");
        http_res_free(&r);
    }
    assert_near(hits[1] - hits[0], 192, 0); /* 12 full blocks of the 200-token prompt */
    assert_near(hits[2] - hits[1], 0, 0);   /* after the reset: nothing cached */
    assert_near(hits[3] - hits[2], 192, 0);
    /* ground truth: one JSON line per finished request, times ordered */
    FILE *f = fopen(gt_path, "r");
    assert_non_null(f);
    char line[1024];
    int lines = 0;
    while (fgets(line, sizeof line, f)) {
        json_error_t je;
        json_t *j = json_loads(line, 0, &je);
        assert_non_null(j);
        double a = json_real_value(json_object_get(j, "arrival_s"));
        double ft = json_real_value(json_object_get(j, "first_token_s"));
        double fin = json_real_value(json_object_get(j, "finish_s"));
        assert_true(a <= ft && ft <= fin);
        assert_true(json_integer_value(json_object_get(j, "first_token_wall_ns")) > 0);
        json_decref(j);
        lines++;
    }
    fclose(f);
    assert_true(lines >= 4);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(completions_non_streaming),     cmocka_unit_test(completions_stream_bytes),
        cmocka_unit_test(chat_stream_and_plain),         cmocka_unit_test(errors_are_vllm_shaped),
        cmocka_unit_test(models_tokenize_detokenize),    cmocka_unit_test(metrics_follow_state_and_pass_promtool),
        cmocka_unit_test(ground_truth_and_prefix_reset),
    };
    return cmocka_run_group_tests(t, setup, teardown);
}
