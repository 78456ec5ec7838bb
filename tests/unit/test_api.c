#include "harness.h"

#include <math.h>

#include <jansson.h>

#include "load/api.h"

static st_api_event ev;

static int parse(st_api_kind k, const char *s) { return st_api_parse_event(k, s, strlen(s), &ev); }

static json_t *body_json(st_api_kind k, const st_work_item *it, int stream)
{
    st_buf b;
    st_buf_init(&b, 1 << 20);
    assert_int_equal(st_api_build_body(k, "m\"odel", it, stream, &b), 0);
    json_error_t e;
    json_t *j = json_loads(b.data, 0, &e);
    if (!j)
        fail_msg("body is not JSON: %s (%s)", b.data, e.text);
    st_buf_free(&b);
    return j;
}

static void api_names_and_paths(void **state)
{
    (void)state;
    st_api_kind k;
    assert_int_equal(st_api_from_name("chat", &k), 0);
    assert_int_equal(k, ST_API_CHAT);
    assert_int_equal(st_api_from_name("llama.cpp", &k), 0);
    assert_int_equal(k, ST_API_LLAMACPP);
    assert_int_equal(st_api_from_name("openai", &k), -1);
    assert_string_equal(st_api_path(ST_API_COMPLETIONS, 1), "/v1/completions");
    assert_string_equal(st_api_path(ST_API_CHAT, 1), "/v1/chat/completions");
    assert_string_equal(st_api_path(ST_API_TGI, 1), "/generate_stream");
    assert_string_equal(st_api_path(ST_API_TGI, 0), "/generate");
    assert_string_equal(st_api_path(ST_API_LLAMACPP, 1), "/completion");
    assert_string_equal(st_api_path(ST_API_SGLANG, 1), "/generate");
    assert_true(st_api_sends_done(ST_API_SGLANG));
    assert_false(st_api_sends_done(ST_API_TGI));
}

static void api_bodies(void **state)
{
    (void)state;
    uint32_t ids[3] = { 1001, 4294967295u, 0 };
    st_work_item it = { .id = 1, .input_len = 3, .input_ids = ids, .output_len = 17 };
    json_t *j = body_json(ST_API_COMPLETIONS, &it, 1);
    assert_string_equal(json_string_value(json_object_get(j, "model")), "m\"odel");
    json_t *p = json_object_get(j, "prompt");
    assert_int_equal(json_array_size(p), 3);
    assert_true(json_integer_value(json_array_get(p, 1)) == 4294967295LL);
    assert_int_equal(json_integer_value(json_object_get(j, "max_tokens")), 17);
    assert_int_equal(json_integer_value(json_object_get(j, "min_tokens")), 17);
    assert_true(json_is_true(json_object_get(j, "ignore_eos")));
    assert_true(json_is_true(json_object_get(j, "stream")));
    assert_true(json_is_true(json_object_get(json_object_get(j, "stream_options"), "include_usage")));
    json_decref(j);
    /* Non-streaming: no stream_options (vLLM rejects it without stream). */
    j = body_json(ST_API_COMPLETIONS, &it, 0);
    assert_true(json_is_false(json_object_get(j, "stream")));
    assert_null(json_object_get(j, "stream_options"));
    json_decref(j);

    j = body_json(ST_API_CHAT, &it, 1);
    json_t *m = json_array_get(json_object_get(j, "messages"), 0);
    assert_string_equal(json_string_value(json_object_get(m, "role")), "user");
    char *content = strdup(json_string_value(json_object_get(m, "content")));
    assert_non_null(content);
    assert_true(strlen(content) > 5);
    assert_int_equal(json_integer_value(json_object_get(j, "max_completion_tokens")), 17);
    assert_int_equal(json_integer_value(json_object_get(j, "max_tokens")), 17);
    assert_int_equal(json_integer_value(json_object_get(j, "min_tokens")), 17);
    assert_true(json_is_true(json_object_get(j, "ignore_eos")));
    assert_non_null(json_object_get(j, "stream_options"));
    json_decref(j);

    j = body_json(ST_API_TGI, &it, 1);
    /* The same deterministic text as chat's message. */
    assert_string_equal(json_string_value(json_object_get(j, "inputs")), content);
    free(content);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "parameters"), "max_new_tokens")), 17);
    assert_true(json_is_true(json_object_get(json_object_get(j, "parameters"), "details")));
    json_decref(j);

    j = body_json(ST_API_LLAMACPP, &it, 1);
    assert_int_equal(json_array_size(json_object_get(j, "prompt")), 3);
    assert_int_equal(json_integer_value(json_object_get(j, "n_predict")), 17);
    assert_true(json_is_true(json_object_get(j, "ignore_eos")));
    assert_true(json_is_true(json_object_get(j, "cache_prompt")));
    assert_true(json_is_true(json_object_get(j, "stream")));
    json_decref(j);

    j = body_json(ST_API_SGLANG, &it, 1);
    assert_int_equal(json_array_size(json_object_get(j, "input_ids")), 3);
    json_t *sp = json_object_get(j, "sampling_params");
    assert_int_equal(json_integer_value(json_object_get(sp, "max_new_tokens")), 17);
    assert_int_equal(json_integer_value(json_object_get(sp, "min_new_tokens")), 17);
    assert_true(json_is_true(json_object_get(sp, "ignore_eos")));
    json_decref(j);

    /* Text items: escaped, sent as text everywhere. */
    st_work_item t = { .input_len = 2, .input_text = "say \"hi\"\n", .output_len = 1 };
    j = body_json(ST_API_COMPLETIONS, &t, 1);
    assert_string_equal(json_string_value(json_object_get(j, "prompt")), "say \"hi\"\n");
    json_decref(j);
    j = body_json(ST_API_SGLANG, &t, 0);
    assert_string_equal(json_string_value(json_object_get(j, "text")), "say \"hi\"\n");
    json_decref(j);

    /* Bounded output, no input. */
    st_buf b;
    st_buf_init(&b, 20);
    assert_int_equal(st_api_build_body(ST_API_COMPLETIONS, "m", &it, 1, &b), -1);
    st_buf_free(&b);
    st_buf_init(&b, 1000);
    st_work_item none = { .output_len = 1 };
    assert_int_equal(st_api_build_body(ST_API_COMPLETIONS, "m", &none, 1, &b), -1);
    st_buf_free(&b);
}

/* workload.temperature: every API's body carries it (TGI: greedy by default, none at 0); without
 * it, no temperature (the engine's default). */
static void api_bodies_temperature(void **state)
{
    (void)state;
    uint32_t ids[3] = { 1001, 1002, 1003 };
    st_work_item it = { .id = 1, .input_len = 3, .input_ids = ids, .output_len = 5 };
    const st_api_kind kinds[] = { ST_API_COMPLETIONS, ST_API_CHAT, ST_API_LLAMACPP, ST_API_SGLANG, ST_API_TGI };
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        for (int t = 0; t < 3; t++) {
            double temp = t == 0 ? -1 : t == 1 ? 0 : 0.7;
            st_buf b;
            st_buf_init(&b, 1 << 16);
            assert_int_equal(st_api_build_body_t(kinds[i], "m", &it, 1, temp, &b), 0);
            json_t *j = json_loadb(b.data, b.len, 0, NULL);
            assert_non_null(j);
            json_t *where = kinds[i] == ST_API_SGLANG ? json_object_get(j, "sampling_params")
                            : kinds[i] == ST_API_TGI  ? json_object_get(j, "parameters")
                                                      : j;
            json_t *v = json_object_get(where, "temperature");
            if (temp < 0 || (kinds[i] == ST_API_TGI && temp == 0))
                assert_null(v);
            else if (!v || fabs(json_number_value(v) - temp) > 1e-12)
                fail_msg("API %zu, temperature %g: body %s", i, temp, b.data);
            json_decref(j);
            st_buf_free(&b);
        }
    }
}

static void api_completions_stream(void **state)
{
    (void)state;
    st_api_event_reset(&ev);
    assert_int_equal(parse(ST_API_COMPLETIONS,
                           "{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\","
                           "\"choices\":[{\"index\":0,\"text\":\" "
                           "Hello\",\"logprobs\":null,\"finish_reason\":null,\"stop_reason\":null}]}"),
                     0);
    assert_int_equal(ev.tokens, 1);
    assert_false(ev.finished);
    assert_false(ev.has_usage);
    /* Empty text: no token. */
    assert_int_equal(parse(ST_API_COMPLETIONS, "{\"choices\":[{\"index\":0,\"text\":\"\",\"finish_reason\":null}]}"),
                     0);
    assert_int_equal(ev.tokens, 0);
    /* token_ids (newer builds) count exactly. */
    assert_int_equal(parse(ST_API_COMPLETIONS,
                           "{\"choices\":[{\"index\":0,\"text\":\"ab\",\"token_ids\":[5,6],\"finish_reason\":null}]}"),
                     0);
    assert_int_equal(ev.tokens, 2);
    /* Text that looks like keys. */
    assert_int_equal(
        parse(ST_API_COMPLETIONS,
              "{\"choices\":[{\"index\":0,\"text\":\"\\\"finish_reason\\\":\\\"stop\\\"\",\"finish_reason\":null}]}"),
        0);
    assert_int_equal(ev.tokens, 1);
    assert_false(ev.finished);
    assert_int_equal(
        parse(ST_API_COMPLETIONS,
              "{\"choices\":[{\"index\":0,\"text\":\"!\",\"finish_reason\":\"length\",\"stop_reason\":null}]}"),
        0);
    assert_int_equal(ev.tokens, 1);
    assert_true(ev.finished);
    assert_int_equal(
        parse(ST_API_COMPLETIONS,
              "{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\",\"choices\":[],"
              "\"usage\":{\"prompt_tokens\":12,\"total_tokens\":17,\"completion_tokens\":5,"
              "\"prompt_tokens_details\":{\"cached_tokens\":8}}}"),
        0);
    assert_int_equal(ev.tokens, 0);
    assert_true(ev.has_usage);
    assert_int_equal(ev.usage_prompt, 12);
    assert_int_equal(ev.usage_completion, 5);
    assert_int_equal(ev.usage_cached, 8);
    assert_int_equal(ev.cum_tokens, 5);
    assert_int_equal(parse(ST_API_COMPLETIONS, " [DONE] "), 0);
    assert_true(ev.done);
    assert_false(ev.has_usage);
    /* Usage with null details. */
    assert_int_equal(
        parse(
            ST_API_COMPLETIONS,
            "{\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4,\"prompt_tokens_details\":null}}"),
        0);
    assert_int_equal(ev.usage_cached, 0);
    assert_int_equal(ev.usage_completion, 4);
}

static void api_chat_stream(void **state)
{
    (void)state;
    st_api_event_reset(&ev);
    assert_int_equal(parse(ST_API_CHAT,
                           "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,"
                           "\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}"),
                     0);
    assert_int_equal(ev.tokens, 0);
    assert_int_equal(parse(ST_API_CHAT, "{\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{"
                                        "\"content\":\"Hi\"},\"finish_reason\":null}]}"),
                     0);
    assert_int_equal(ev.tokens, 1);
    assert_int_equal(
        parse(ST_API_CHAT,
              "{\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"hmm\"},\"finish_reason\":null}]}"),
        0);
    assert_int_equal(ev.tokens, 1);
    assert_int_equal(
        parse(ST_API_CHAT, "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"!\"},\"finish_reason\":\"stop\"}]}"),
        0);
    assert_true(ev.finished);
    assert_int_equal(
        parse(ST_API_CHAT,
              "{\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"total_tokens\":12,\"completion_tokens\":3}}"),
        0);
    assert_true(ev.has_usage);
    assert_int_equal(ev.usage_completion, 3);
    assert_int_equal(ev.cum_tokens, 3);
}

static void api_errors(void **state)
{
    (void)state;
    st_api_kind all[] = { ST_API_COMPLETIONS, ST_API_CHAT, ST_API_TGI, ST_API_LLAMACPP, ST_API_SGLANG };
    for (int i = 0; i < 5; i++) {
        st_api_event_reset(&ev);
        assert_int_equal(parse(all[i], "{\"error\":{\"message\":\"boom "
                                       "\\\"x\\\"\",\"type\":\"InternalServerError\",\"param\":null,\"code\":500}}"),
                         0);
        assert_true(ev.is_error);
        assert_string_equal(ev.error, "boom \"x\"");
        assert_int_equal(ev.tokens, 0);
        assert_int_equal(parse(all[i], "{\"object\":\"error\",\"message\":\"old "
                                       "style\",\"type\":\"BadRequestError\",\"param\":null,\"code\":400}"),
                         0);
        assert_true(ev.is_error);
        assert_string_equal(ev.error, "old style");
        /* Malformed. */
        assert_int_equal(parse(all[i], "{\"choices\":[{\"text\":\"x\""), -1);
        assert_false(ev.is_error);
        assert_int_equal(parse(all[i], "not json"), -1);
        assert_int_equal(parse(all[i], "42"), -1);
    }
    assert_int_equal(
        parse(ST_API_TGI, "{\"error\":\"Input validation error: too long\",\"error_type\":\"validation\"}"), 0);
    assert_true(ev.is_error);
    assert_string_equal(ev.error, "validation: Input validation error: too long");
    /* error: null is not an error. */
    assert_int_equal(
        parse(ST_API_COMPLETIONS, "{\"error\":null,\"choices\":[{\"text\":\"a\",\"finish_reason\":null}]}"), 0);
    assert_false(ev.is_error);
    assert_int_equal(ev.tokens, 1);
    /* Long messages are truncated, not overflowed. */
    char big[2000];
    int n = snprintf(big, sizeof big, "{\"error\":{\"message\":\"");
    memset(big + n, 'x', 1500);
    strcpy(big + n + 1500, "\"}}");
    assert_int_equal(parse(ST_API_CHAT, big), 0);
    assert_true(ev.is_error);
    assert_int_equal(strlen(ev.error), sizeof ev.error - 1);
    char msg[64];
    const char *vbody = "{\"error\":{\"message\":\"You passed 5000 input "
                        "tokens\",\"type\":\"BadRequestError\",\"param\":\"input_tokens\",\"code\":400}}";
    st_api_error_message(vbody, strlen(vbody), msg, sizeof msg);
    assert_string_equal(msg, "You passed 5000 input tokens");
    st_api_error_message("{\"detail\":\"Not Found\"}", 22, msg, sizeof msg);
    assert_string_equal(msg, "Not Found");
    st_api_error_message("<html>\nbad gateway</html>", 25, msg, sizeof msg);
    assert_string_equal(msg, "<html> bad gateway</html>");
}

static void api_tgi_stream(void **state)
{
    (void)state;
    st_api_event_reset(&ev);
    assert_int_equal(
        parse(ST_API_TGI, "{\"index\":1,\"token\":{\"id\":1234,\"text\":\" Hello\",\"logprob\":-0.5,\"special\":false},"
                          "\"generated_text\":null,\"details\":null}"),
        0);
    assert_int_equal(ev.tokens, 1);
    assert_false(ev.finished);
    assert_int_equal(parse(ST_API_TGI,
                           "{\"index\":2,\"token\":{\"id\":2,\"text\":\"</s>\",\"logprob\":0,\"special\":true},"
                           "\"generated_text\":null,\"details\":null}"),
                     0);
    assert_int_equal(ev.tokens, 0);
    assert_int_equal(parse(ST_API_TGI,
                           "{\"index\":3,\"token\":{\"id\":7,\"text\":\"!\",\"logprob\":-1,\"special\":false},"
                           "\"generated_text\":\" "
                           "Hello!\",\"details\":{\"finish_reason\":\"length\",\"generated_tokens\":3,\"seed\":null}}"),
                     0);
    assert_int_equal(ev.tokens, 1);
    assert_true(ev.finished);
    assert_false(ev.done);
    assert_true(ev.has_usage);
    assert_int_equal(ev.usage_completion, 3);
    assert_int_equal(ev.cum_tokens, 2);
}

static void api_llamacpp_stream(void **state)
{
    (void)state;
    st_api_event_reset(&ev);
    assert_int_equal(
        parse(ST_API_LLAMACPP, "{\"content\":\" the\",\"stop\":false,\"id_slot\":0,\"multimodal\":false,\"index\":0}"),
        0);
    assert_int_equal(ev.tokens, 1);
    assert_false(ev.finished);
    assert_int_equal(
        parse(
            ST_API_LLAMACPP,
            "{\"content\":\"\",\"stop\":true,\"model\":\"m\",\"tokens_predicted\":64,\"tokens_evaluated\":100,"
            "\"generation_settings\":{\"n_predict\":64},\"prompt\":\"x\",\"stop_type\":\"limit\",\"tokens_cached\":163,"
            "\"timings\":{\"prompt_n\":30,\"prompt_ms\":12.5,\"predicted_n\":64,\"predicted_ms\":900.1}}"),
        0);
    assert_int_equal(ev.tokens, 0);
    assert_true(ev.finished);
    assert_true(ev.has_usage);
    assert_int_equal(ev.usage_completion, 64);
    assert_int_equal(ev.usage_prompt, 100);
    assert_int_equal(ev.usage_cached, 70);
    /* Newer builds: timings.cache_n. */
    assert_int_equal(
        parse(ST_API_LLAMACPP,
              "{\"content\":\"x\",\"stop\":true,\"timings\":{\"cache_n\":40,\"prompt_n\":60,\"predicted_n\":8}}"),
        0);
    assert_int_equal(ev.tokens, 1);
    assert_int_equal(ev.usage_cached, 40);
    assert_int_equal(ev.usage_prompt, 100);
    assert_int_equal(ev.usage_completion, 8);
    assert_int_equal(parse(ST_API_LLAMACPP, "{\"error\":{\"code\":400,\"message\":\"the request exceeds the available "
                                            "context size\",\"type\":\"exceed_context_size_error\"}}"),
                     0);
    assert_true(ev.is_error);
    assert_false(ev.has_timings);
}

/* llama-server's timings on each API (payloads captured from the server scripts/install-llamacpp
 * builds): kept as the server's own account of the request. */
static void api_server_timings(void **state)
{
    (void)state;
    st_api_event_reset(&ev);
    /* the last chunk of a streamed chat: usage and timings, no choices */
    assert_int_equal(
        parse(ST_API_CHAT,
              "{\"choices\":[],\"created\":1796025202,\"id\":\"chatcmpl-l2z9\",\"model\":\"llama30\","
              "\"system_fingerprint\":\"b1-de3ff81\",\"object\":\"chat.completion.chunk\",\"usage\":{"
              "\"completion_tokens\":4,\"prompt_tokens\":29,\"total_tokens\":33,\"prompt_tokens_details\":{"
              "\"cached_tokens\":0}},\"timings\":{\"cache_n\":0,\"prompt_n\":29,\"prompt_ms\":3.707,"
              "\"prompt_per_token_ms\":0.12782758620689655,\"prompt_per_second\":7823.0374966280015,\"predicted_n\":4,"
              "\"predicted_ms\":2.796,\"predicted_per_token_ms\":0.9319999999999999,"
              "\"predicted_per_second\":1072.961373390558}}"),
        0);
    assert_true(ev.has_usage);
    assert_int_equal(ev.usage_completion, 4);
    assert_true(ev.has_timings);
    assert_near(ev.srv_prompt_ms, 3.707, 1e-9);
    assert_near(ev.srv_gen_ms, 2.796, 1e-9);
    assert_int_equal(ev.srv_gen_n, 4);
    /* a token chunk carries none, and the flag does not linger from the previous event */
    assert_int_equal(parse(ST_API_CHAT, "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},"
                                        "\"finish_reason\":null}]}"),
                     0);
    assert_false(ev.has_timings);
    /* a non-streamed completion */
    const char *body = "{\"choices\":[{\"text\":\" June\",\"index\":0,\"logprobs\":null,\"finish_reason\":\"length\"}],"
                       "\"created\":1796025201,\"model\":\"llama30\",\"object\":\"text_completion\",\"usage\":{"
                       "\"completion_tokens\":16,\"prompt_tokens\":6,\"total_tokens\":22,\"prompt_tokens_details\":{"
                       "\"cached_tokens\":0}},\"id\":\"chatcmpl-HBRp\",\"timings\":{\"cache_n\":0,\"prompt_n\":6,"
                       "\"prompt_ms\":1.913,\"prompt_per_token_ms\":0.31883333333333336,\"prompt_per_second\":3136.43,"
                       "\"predicted_n\":16,\"predicted_ms\":13.868,\"predicted_per_token_ms\":0.9245333333333333,"
                       "\"predicted_per_second\":1081.626766657052}}";
    assert_int_equal(st_api_parse_response(ST_API_COMPLETIONS, body, strlen(body), &ev), 0);
    assert_int_equal(ev.tokens, 16);
    assert_true(ev.has_timings);
    assert_near(ev.srv_prompt_ms, 1.913, 1e-9);
    assert_near(ev.srv_gen_ms, 13.868, 1e-9);
    assert_int_equal(ev.srv_gen_n, 16);
    /* /completion's stop event */
    assert_int_equal(parse(ST_API_LLAMACPP, "{\"content\":\"\",\"stop\":true,\"tokens_predicted\":8,\"timings\":{"
                                            "\"cache_n\":2,\"prompt_n\":30,\"prompt_ms\":12.5,\"predicted_n\":8,"
                                            "\"predicted_ms\":9.1}}"),
                     0);
    assert_true(ev.has_timings);
    assert_near(ev.srv_prompt_ms, 12.5, 1e-12);
    assert_int_equal(ev.srv_gen_n, 8);
    /* incomplete or negative timings are not kept */
    assert_int_equal(parse(ST_API_LLAMACPP, "{\"content\":\"\",\"stop\":true,\"timings\":{\"prompt_n\":30,"
                                            "\"predicted_n\":8}}"),
                     0);
    assert_false(ev.has_timings);
    assert_int_equal(parse(ST_API_COMPLETIONS, "{\"choices\":[],\"timings\":{\"prompt_ms\":-1,\"predicted_ms\":2,"
                                               "\"predicted_n\":3}}"),
                     0);
    assert_false(ev.has_timings);
    /* vLLM sends none */
    assert_int_equal(
        parse(ST_API_COMPLETIONS, "{\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4}}"), 0);
    assert_false(ev.has_timings);
}

static void api_sglang_stream(void **state)
{
    (void)state;
    st_api_event_reset(&ev);
    assert_int_equal(parse(ST_API_SGLANG,
                           "{\"text\":\"A\",\"meta_info\":{\"id\":\"x\",\"finish_reason\":null,\"prompt_tokens\":10,"
                           "\"completion_tokens\":1,\"cached_tokens\":4},\"index\":0}"),
                     0);
    assert_int_equal(ev.tokens, 1);
    assert_true(ev.has_usage);
    assert_int_equal(ev.usage_cached, 4);
    /* Cumulative: two more tokens in one event. */
    assert_int_equal(parse(ST_API_SGLANG, "{\"text\":\"A b "
                                          "c\",\"meta_info\":{\"finish_reason\":null,\"prompt_tokens\":10,\"completion_"
                                          "tokens\":3,\"cached_tokens\":4}}"),
                     0);
    assert_int_equal(ev.tokens, 2);
    assert_int_equal(ev.cum_tokens, 3);
    assert_int_equal(parse(ST_API_SGLANG,
                           "{\"text\":\"A b c d\",\"meta_info\":{\"finish_reason\":{\"type\":\"length\",\"length\":4},"
                           "\"prompt_tokens\":10,\"completion_tokens\":4,\"cached_tokens\":4}}"),
                     0);
    assert_int_equal(ev.tokens, 1);
    assert_true(ev.finished);
    assert_int_equal(ev.usage_completion, 4);
    assert_int_equal(parse(ST_API_SGLANG, "[DONE]"), 0);
    assert_true(ev.done);
    assert_int_equal(ev.cum_tokens, 4);
    assert_int_equal(parse(ST_API_SGLANG, "{\"text\":\"\",\"meta_info\":{\"finish_reason\":{\"type\":\"abort\","
                                          "\"message\":\"out of memory\"},\"completion_tokens\":0}}"),
                     0);
    assert_true(ev.is_error);
    assert_string_equal(ev.error, "out of memory");
}

static void api_responses(void **state)
{
    (void)state;
    const char *c = "{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\"abc "
                    "def\",\"finish_reason\":\"length\"}],"
                    "\"usage\":{\"prompt_tokens\":5,\"total_tokens\":12,\"completion_tokens\":7}}";
    assert_int_equal(st_api_parse_response(ST_API_COMPLETIONS, c, strlen(c), &ev), 0);
    assert_int_equal(ev.tokens, 7);
    assert_true(ev.finished && ev.done && ev.has_usage);
    const char *ch = "{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"hi\"},\"finish_"
                     "reason\":\"stop\"}]}";
    assert_int_equal(st_api_parse_response(ST_API_CHAT, ch, strlen(ch), &ev), 0);
    assert_int_equal(ev.tokens, 1);
    assert_false(ev.has_usage);
    const char *tg = "[{\"generated_text\":\"x y\",\"details\":{\"finish_reason\":\"length\",\"generated_tokens\":2}}]";
    assert_int_equal(st_api_parse_response(ST_API_TGI, tg, strlen(tg), &ev), 0);
    assert_int_equal(ev.tokens, 2);
    const char *tg1 = "{\"generated_text\":\"x y z\"}";
    assert_int_equal(st_api_parse_response(ST_API_TGI, tg1, strlen(tg1), &ev), 0);
    assert_int_equal(ev.tokens, 1);
    const char *ll = "{\"content\":\"abc\",\"stop\":true,\"tokens_predicted\":3,\"tokens_evaluated\":9,\"timings\":{"
                     "\"prompt_n\":9,\"predicted_n\":3}}";
    assert_int_equal(st_api_parse_response(ST_API_LLAMACPP, ll, strlen(ll), &ev), 0);
    assert_int_equal(ev.tokens, 3);
    assert_int_equal(ev.usage_cached, 0);
    const char *sg = "{\"text\":\"abc\",\"meta_info\":{\"prompt_tokens\":9,\"completion_tokens\":6,\"cached_tokens\":0,"
                     "\"finish_reason\":{\"type\":\"length\"}}}";
    assert_int_equal(st_api_parse_response(ST_API_SGLANG, sg, strlen(sg), &ev), 0);
    assert_int_equal(ev.tokens, 6);
    const char *er = "{\"error\":{\"message\":\"The model `x` does not "
                     "exist.\",\"type\":\"NotFoundError\",\"param\":null,\"code\":404}}";
    assert_int_equal(st_api_parse_response(ST_API_CHAT, er, strlen(er), &ev), 0);
    assert_true(ev.is_error);
    assert_false(ev.done);
    assert_int_equal(st_api_parse_response(ST_API_CHAT, "<html>", 6, &ev), -1);
}


/* Reasoning models: reasoning_content / reasoning deltas and <think> spans are reasoning
 * tokens; the first event with visible answer text is the first answer token. */
static void api_reasoning(void **state)
{
    (void)state;
    st_api_event_reset(&ev);
    assert_int_equal(
        parse(ST_API_CHAT, "{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}"), 0);
    assert_int_equal(ev.tokens, 0);
    assert_int_equal(parse(ST_API_CHAT, "{\"choices\":[{\"delta\":{\"reasoning_content\":\" hmm\"}}]}"), 0);
    assert_int_equal(ev.tokens, 1);
    assert_int_equal(ev.reasoning, 1);
    assert_false(ev.answer_visible);
    /* vLLM's newer name */
    assert_int_equal(parse(ST_API_CHAT, "{\"choices\":[{\"delta\":{\"reasoning\":\" so\",\"content\":null}}]}"), 0);
    assert_int_equal(ev.reasoning, 1);
    assert_int_equal(parse(ST_API_CHAT, "{\"choices\":[{\"delta\":{\"content\":\"\\n\\n\"}}]}"), 0);
    assert_int_equal(ev.tokens, 1);
    assert_int_equal(ev.reasoning, 0);
    assert_false(ev.answer_visible); /* blank: not yet the answer */
    assert_int_equal(parse(ST_API_CHAT, "{\"choices\":[{\"delta\":{\"content\":\" Paris\"}}]}"), 0);
    assert_true(ev.answer_visible);
    assert_int_equal(ev.content.type, ST_JSON_STRING);
    /* a model without a reasoning parser: the span is in the content, across events */
    st_api_event_reset(&ev);
    assert_int_equal(parse(ST_API_CHAT, "{\"choices\":[{\"delta\":{\"content\":\"<think>\"}}]}"), 0);
    assert_int_equal(ev.reasoning, 1);
    assert_true(ev.in_think);
    assert_int_equal(parse(ST_API_CHAT, "{\"choices\":[{\"delta\":{\"content\":\" let me see\"}}]}"), 0);
    assert_int_equal(ev.reasoning, 1);
    assert_false(ev.answer_visible);
    assert_int_equal(parse(ST_API_CHAT, "{\"choices\":[{\"delta\":{\"content\":\"\\u003c/think\\u003e\\n\"}}]}"), 0);
    assert_false(ev.in_think);
    assert_int_equal(ev.reasoning, 1);
    assert_int_equal(parse(ST_API_CHAT, "{\"choices\":[{\"delta\":{\"content\":\"42\"}}]}"), 0);
    assert_true(ev.answer_visible);
    assert_int_equal(ev.reasoning, 0);
    /* completions: one event closing the span and starting the answer is an answer token */
    st_api_event_reset(&ev);
    assert_int_equal(parse(ST_API_COMPLETIONS, "{\"choices\":[{\"text\":\"<think> a\"}]}"), 0);
    assert_int_equal(ev.reasoning, 1);
    assert_int_equal(parse(ST_API_COMPLETIONS, "{\"choices\":[{\"text\":\"</think> b\"}]}"), 0);
    assert_int_equal(ev.reasoning, 0);
    assert_true(ev.answer_visible);
    /* llama.cpp and TGI texts */
    st_api_event_reset(&ev);
    assert_int_equal(parse(ST_API_LLAMACPP, "{\"content\":\"<think>x\",\"stop\":false}"), 0);
    assert_int_equal(ev.reasoning, 1);
    st_api_event_reset(&ev);
    assert_int_equal(parse(ST_API_TGI, "{\"token\":{\"id\":1,\"text\":\" y\",\"special\":false}}"), 0);
    assert_true(ev.answer_visible);
    /* SGLang's text is cumulative: the whole answer so far */
    st_api_event_reset(&ev);
    assert_int_equal(parse(ST_API_SGLANG, "{\"text\":\"a b\",\"meta_info\":{\"completion_tokens\":2}}"), 0);
    assert_true(ev.content_cumulative);
    assert_int_equal(ev.content.type, ST_JSON_STRING);
    /* usage with reasoning tokens (OpenAI's completion_tokens_details) */
    st_api_event_reset(&ev);
    assert_int_equal(parse(ST_API_CHAT, "{\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":9,"
                                        "\"completion_tokens_details\":{\"reasoning_tokens\":4}}}"),
                     0);
    assert_int_equal(ev.usage_reasoning, 4);
    /* the answer text kept for a session: spans left out */
    st_buf b;
    st_buf_init(&b, 1 << 10);
    int think = 0;
    st_json_val v = { ST_JSON_STRING, "\"a <think>b</think> c\"", 22 };
    assert_int_equal(st_api_append_text(&v, 1, &think, &b), 0);
    assert_string_equal(b.data, "a  c");
    st_buf_reset(&b);
    st_json_val w = { ST_JSON_STRING, "\"x\\ny\"", 6 };
    assert_int_equal(st_api_append_text(&w, 0, &think, &b), 0);
    assert_string_equal(b.data, "x\ny");
    st_buf_free(&b);
}

/* A session's later turn: its history in the body, as chat messages or one text. */
static void api_session_bodies(void **state)
{
    (void)state;
    uint32_t ids[3] = { 1000, 1001, 1002 };
    char *hist[2] = { "the of and", " x\"y" };
    st_work_item it = { 0 };
    it.input_ids = ids;
    it.input_len = 3;
    it.output_len = 5;
    it.session = 1;
    it.turn = 1;
    it.history = hist;
    it.n_history = 2;
    json_t *j = body_json(ST_API_CHAT, &it, 1);
    json_t *m = json_object_get(j, "messages");
    assert_int_equal(json_array_size(m), 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(m, 0), "role")), "user");
    assert_string_equal(json_string_value(json_object_get(json_array_get(m, 1), "role")), "assistant");
    assert_string_equal(json_string_value(json_object_get(json_array_get(m, 1), "content")), " x\"y");
    assert_string_equal(json_string_value(json_object_get(json_array_get(m, 2), "role")), "user");
    json_decref(j);
    /* completions: session turns go as text, the history first (the previous prompt is a prefix) */
    j = body_json(ST_API_COMPLETIONS, &it, 1);
    const char *p = json_string_value(json_object_get(j, "prompt"));
    assert_non_null(p);
    assert_int_equal(strncmp(p, "the of and  x\"y ", 16), 0);
    json_decref(j);
    j = body_json(ST_API_SGLANG, &it, 1);
    assert_null(json_object_get(j, "input_ids"));
    assert_non_null(json_object_get(j, "text"));
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(api_names_and_paths),    cmocka_unit_test(api_bodies),
        cmocka_unit_test(api_bodies_temperature), cmocka_unit_test(api_completions_stream),
        cmocka_unit_test(api_chat_stream),        cmocka_unit_test(api_errors),
        cmocka_unit_test(api_tgi_stream),         cmocka_unit_test(api_llamacpp_stream),
        cmocka_unit_test(api_server_timings),     cmocka_unit_test(api_sglang_stream),
        cmocka_unit_test(api_responses),          cmocka_unit_test(api_reasoning),
        cmocka_unit_test(api_session_bodies),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
