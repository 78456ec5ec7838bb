/* Exact prompt lengths on text-only APIs (chat, TGI): the engine's own tokenizer counts a text
 * (vLLM, SGLang and the emulator: POST /tokenize with the chat messages, so the count is what
 * usage.prompt_tokens will say, chat template included; llama.cpp: POST /tokenize with
 * "content"; TGI: POST /tokenize with "inputs"), and st_prompt_fit grows or trims the
 * deterministic text of a work item until the count is the length asked for.
 *
 * The counting client is blocking (one keep-alive connection, http or https, every exchange
 * bounded by the timeout); it runs before the load, never on the load path. st_prompt_fit is
 * pure: it takes the count as a callback. */
#ifndef ST_TOKENIZE_H
#define ST_TOKENIZE_H
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "load/api.h"
#include "load/workload.h"

/* Rounds of count-and-adjust before st_prompt_fit settles for the closest text. */
#define ST_FIT_ROUNDS 16
#define ST_TOKENIZE_BODY_MAX ((size_t)64 << 20)

typedef int (*st_count_fn)(void *arg, const char *text, size_t len, uint32_t *count, char *err, size_t errlen);

/* Makes it->input_text a text of words whose count is target: the words of the item's ids
 * (st_workload_text), the first keep_words of them never changed (a shared prefix stays
 * shared), more words from a stream seeded by the item's id when the text is short, fewer
 * at the end when it is long; when one word more or less jumps over the target (a word of
 * two tokens at the end), other words are tried in the last place. it->input_len becomes the measured count (target when exact;
 * items with input_ids keep them for reports but are sent as this text). 0 exact, 1 the
 * closest count found in ST_FIT_ROUNDS rounds, -1 with err (counting failed). */
int st_prompt_fit(st_work_item *it, uint32_t target, uint32_t keep_words, st_count_fn count, void *arg,
                  uint32_t *measured, char *err, size_t errlen);

typedef struct st_tokenizer st_tokenizer;

/* base_url: the server (as servetune bench --url); api: chat (messages) or tgi (inputs);
 * others send {"prompt": text}. model may be NULL. NULL with err when the URL is bad. */
st_tokenizer *st_tokenizer_new(const char *base_url, st_api_kind api, const char *model, const char *api_key,
                               int insecure, const char *ca_file, double timeout_s, char *err, size_t errlen);
void st_tokenizer_free(st_tokenizer *t);
/* An st_count_fn (arg: the st_tokenizer). A 404 or 405 answer says the engine has no
 * /tokenize: -1 with err "no /tokenize ..." and st_tokenizer_missing() true. A count of 0 for a
 * text that is not empty, or one above ST_WORKLOAD_MAX_TOKENS, is no count: -1 with err naming
 * the server ("the server at http://HOST:PORT/tokenize answered ..."). */
int st_tokenizer_count(void *arg, const char *text, size_t len, uint32_t *count, char *err, size_t errlen);
int st_tokenizer_missing(const st_tokenizer *t);
/* The token ids of the text itself (no chat template, no special tokens: "add_special_tokens":
 * false, llama.cpp "add_special": false): *ids grown with realloc; the count, or -1 with err.
 * Fits load/spec_trace.h's st_spec_tokenize_fn (arg: the st_tokenizer). Not for TGI. */
int64_t st_tokenizer_ids(void *arg, const char *text, size_t len, uint32_t **ids, size_t *cap, char *err,
                         size_t errlen);
/* The ids of a /tokenize answer ({"tokens": [ids]}, or [{"id", ...}] items). The count, or -1. */
int64_t st_tokenize_parse_ids(const char *body, size_t len, uint32_t **ids, size_t *cap);
/* POSTs a JSON body to path on the same server (the base URL's root + path, e.g.
 * "/completion") on the tokenizer's connection, bounded by its timeout: 0 with the answer's status
 * and body (answer reset first), or -1 with err (no answer). */
int st_tokenizer_post(st_tokenizer *t, const char *path, const char *body, size_t len, st_buf *answer, int *status,
                      char *err, size_t errlen);
/* Requests made so far. */
uint32_t st_tokenizer_calls(const st_tokenizer *t);

/* Fits every request of w that carries token ids and is no session turn (a turn carries the
 * conversation's real text, a trace's own text is sent as it is) with st_prompt_fit, its shared
 * prefix kept. Stops early when *stop becomes nonzero (stop may be NULL). fitted and exact count
 * the requests fitted and those that came out exact. 0 done; 1 stopped; -1 with err when
 * counting failed (st_tokenizer_missing(t) says whether the server has no /tokenize). */
int st_prompt_fit_work(st_workload *w, st_tokenizer *t, const volatile sig_atomic_t *stop, uint32_t *fitted,
                       uint32_t *exact, char *err, size_t errlen);

/* Parses a /tokenize answer: {"count": N} (vLLM, SGLang), {"tokens": [...]} (llama.cpp),
 * or a JSON array of tokens (TGI). 0 or -1. */
int st_tokenize_parse(const char *body, size_t len, uint32_t *count);

#endif
