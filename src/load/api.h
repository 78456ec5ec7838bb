/* Engine APIs: the request body for each API servetune can drive, and the parsing of what
 * comes back (one SSE data payload at a time, or a whole non-streaming body). Pure
 * functions over bytes; JSON is read with core/json (no allocation per event).
 *
 * Wire facts are from docs in docs/reference/engine-reference.md; per API:
 *   completions  POST /v1/completions        prompt = token ids, max_tokens = min_tokens,
 *                                            ignore_eos, stream_options.include_usage
 *   chat         POST /v1/chat/completions   one user message (text), max_completion_tokens
 *                                            and max_tokens, min_tokens, ignore_eos
 *   tgi          POST /generate_stream (/generate)  inputs (text), parameters.max_new_tokens,
 *                                            details: true
 *   llamacpp     POST /completion            prompt = token ids, n_predict, ignore_eos,
 *                                            cache_prompt
 *   sglang       POST /generate              input_ids, sampling_params {max_new_tokens,
 *                                            min_new_tokens, ignore_eos}
 *
 * What counts as a token event (ev.tokens > 0):
 *   completions  a choice with non-empty text (1) or non-empty token_ids (their number)
 *   chat         a choice whose delta has non-empty content, reasoning_content or reasoning
 *                (1); the first role-only chunk and the usage-only chunk carry 0
 *   tgi          a `token` object whose `special` is not true (1)
 *   llamacpp     non-empty `content` (1); `stop: true` marks the end (finished) and carries
 *                a token only if its content is non-empty
 *   sglang       text is cumulative, so tokens = meta_info.completion_tokens minus the
 *                count seen so far in this stream (ev.cum_tokens, see below); 1 per event
 *                with new text when completion_tokens is missing
 * Usage (has_usage): OpenAI `usage` {prompt_tokens, completion_tokens,
 * prompt_tokens_details.cached_tokens}; SGLang meta_info {prompt_tokens, completion_tokens,
 * cached_tokens}; llama.cpp tokens_evaluated / tokens_predicted (or timings.prompt_n +
 * cache_n / predicted_n), cached = timings.cache_n, else tokens_evaluated - timings.prompt_n
 * (tokens_cached is the slot's whole context, generated tokens included, so it is not
 * used); TGI details.generated_tokens (no prompt count in TGI's stream).
 * Errors (is_error, message in error): `{"error":{"message":...}}`, flat
 * `{"object":"error","message":...}`, TGI `{"error":"...","error_type":...}`, and SGLang's
 * finish_reason {type:"abort"}.
 * Server timings (has_timings): llama.cpp's `timings` object {prompt_ms, predicted_ms,
 * predicted_n, ...} on the final chunk of /v1/completions and /v1/chat/completions and on the
 * stop event of /completion; the other engines send none.
 * End of stream: OpenAI and SGLang end with `data: [DONE]` (done = 1); TGI and llama.cpp
 * just end the body after the final event (finished = 1): see st_api_sends_done().
 *
 * Reasoning models: of an event's tokens, ev.reasoning are reasoning tokens: a chat delta's
 * reasoning_content or reasoning (vLLM and SGLang with a reasoning parser, older and newer
 * name), or text inside a <think> ... </think> span (a model served without a reasoning
 * parser; completions, chat content, TGI and llama.cpp text; the span may cross events:
 * ev.in_think carries it). ev.answer_visible marks an event whose answer text (outside any
 * span) has a visible character: the first one is the first ANSWER token (TTFAT). SGLang's
 * native stream (cumulative text) is not scanned for spans. usage_reasoning is OpenAI's
 * usage.completion_tokens_details.reasoning_tokens when the server reports it.
 *
 * ev.content is the answer text the event carries (a view of the JSON string, escaped, quotes
 * included; ST_JSON_ABSENT when none): chat delta.content, completions text, TGI token.text,
 * llama.cpp content, SGLang's cumulative text (content_cumulative). Multi-turn sessions keep
 * it as the conversation's history. */
#ifndef ST_API_H
#define ST_API_H
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/json.h"
#include "load/workload.h"

typedef enum { ST_API_COMPLETIONS, ST_API_CHAT, ST_API_TGI, ST_API_LLAMACPP, ST_API_SGLANG } st_api_kind;

/* "completions", "chat", "tgi", "llamacpp" (also "llama.cpp"), "sglang". 0 or -1. */
int st_api_from_name(const char *name, st_api_kind *out);
const char *st_api_name(st_api_kind k);
/* "/v1/completions", "/v1/chat/completions", "/generate_stream" or "/generate" (TGI),
 * "/completion", "/generate". */
const char *st_api_path(st_api_kind k, int stream);
/* 1 when the API's stream ends with "data: [DONE]" (completions, chat, sglang). */
int st_api_sends_done(st_api_kind k);
/* 1 when the API takes token ids as the prompt (completions, llamacpp, sglang); the others
 * get st_workload_text(). */
int st_api_takes_ids(st_api_kind k);

/* Appends the JSON request body to out (0, or -1 when out's maximum is reached or the item
 * has no input). model may be NULL (omitted; only the OpenAI APIs need it). Items with
 * ids go out as ids where the API accepts them, else as text. */
int st_api_build_body(st_api_kind k, const char *model, const st_work_item *it, int stream, st_buf *out);
/* The same with a sampling temperature (temperature < 0: none sent, the engine's default; TGI, which
 * refuses 0, is greedy by default and gets none at 0). */
int st_api_build_body_t(st_api_kind k, const char *model, const st_work_item *it, int stream, double temperature,
                        st_buf *out);

typedef struct st_api_event {
    uint32_t tokens; /* output tokens this event carries (0 for role-only / usage-only chunks) */
    int finished;    /* a finish_reason / final event was seen */
    int done;        /* the terminal marker ("[DONE]") */
    int has_usage;
    uint32_t usage_prompt, usage_completion, usage_cached, usage_reasoning;
    uint32_t reasoning;     /* of tokens, the reasoning ones */
    int answer_visible;     /* the event carries visible answer text */
    st_json_val content;    /* the answer text (escaped JSON string view), or ST_JSON_ABSENT */
    int content_cumulative; /* SGLang: content is the whole answer so far, not this event's part */
    int is_error;
    char error[256];
    /* The server's timings of the request (llama.cpp adds `timings` to its last event or
     * response on every API: prompt_ms, predicted_ms, predicted_n), when present. */
    int has_timings;
    double srv_prompt_ms, srv_gen_ms;
    uint32_t srv_gen_n;
    /* Speculative decoding (llama.cpp's timings.draft_n / draft_n_accepted, present when the
     * server drafts): draft tokens proposed for the request, and accepted. */
    int has_draft;
    uint32_t srv_draft_n, srv_draft_accepted;
    /* Carried across the events of one stream: the running total of tokens counted so far
     * (the sum of tokens). st_api_parse_event resets every other field and keeps this one,
     * so keep one st_api_event per request and zero it (st_api_event_reset) before the
     * first event. SGLang needs it to turn cumulative counts into per-event ones. in_think is
     * carried the same way (inside a <think> span). */
    uint32_t cum_tokens;
    int in_think;
} st_api_event;

/* Zeroes everything, cum_tokens included: call once per request. */
void st_api_event_reset(st_api_event *ev);
/* One SSE data payload (without the "data:" prefix; surrounding whitespace ignored).
 * 0 parsed (which may be an error event: is_error), -1 malformed (ev->error says why). */
int st_api_parse_event(st_api_kind k, const char *data, size_t len, st_api_event *ev);
/* A complete non-streaming response body (2xx or error body). tokens is the completion
 * count from usage when reported, else 1 when any text came back; finished and done are set
 * for a well-formed success body. 0 or -1 malformed. */
int st_api_parse_response(st_api_kind k, const char *body, size_t len, st_api_event *ev);
/* Appends the unescaped text of a JSON string view (ev->content) to out, without the parts
 * inside <think> spans when strip_think (in_think: the state at its start, updated). 0 or -1. */
int st_api_append_text(const st_json_val *v, int strip_think, int *in_think, st_buf *out);
/* Extracts a readable message from an error body (non-2xx): the error.message / message /
 * error string when the body is JSON of a known shape, else the body's first bytes
 * (control characters replaced). Always NUL-terminates msg. */
void st_api_error_message(const char *body, size_t len, char *msg, size_t cap);

#endif
