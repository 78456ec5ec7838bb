/* The quality pass (docs/quality.md): what a configuration does to the answers, against the
 * baseline's. Pure: request bodies, the parsing of answers with their top-k log-probabilities,
 * the comparison (audit/drift.h), the limits of the spec's quality block and the result as JSON
 * (kept in the result store, read by the reports). The requests themselves are sent by the HTTP
 * executor (audit/exec_http.c).
 *
 * Engines and what they give:
 *   llama.cpp  POST /completion, n_probs = top_k, temperature 0: completion_probabilities, each
 *              generated token with its top_logprobs (ids); free-running.
 *   OpenAI     POST /v1/completions (vLLM, SGLang, the emulator), logprobs = top_k, temperature 0,
 *              return_tokens_as_token_ids: choices[0].logprobs {tokens, token_logprobs,
 *              top_logprobs}; free-running. With prompt_logprobs (vLLM) the candidate also
 *              scores prompt + the baseline's answer (teacher-forced).
 *   TGI        not asked: its API returns no top-k of the generated tokens (said so). */
#ifndef ST_AUDIT_QUALITY_H
#define ST_AUDIT_QUALITY_H
#include <stddef.h>
#include <stdint.h>

#include "audit/drift.h"
#include "audit/spec.h"
#include "core/buf.h"

/* Which API the pass uses for a spec's engine. */
typedef enum st_qapi { ST_QAPI_NONE = 0, ST_QAPI_LLAMACPP, ST_QAPI_OPENAI } st_qapi;
/* The API of the spec's engine; ST_QAPI_NONE with the reason in why. */
st_qapi st_quality_api(const st_spec *s, char *why, size_t whylen);
/* "/completion" or "/v1/completions". */
const char *st_quality_path(st_qapi a);

/* One generated (or scored) position. */
typedef struct st_qtok {
    int32_t token;
    double logp; /* NAN when not reported */
    uint32_t k;
    int32_t ids[ST_QUALITY_MAX_TOP_K];
    double lp[ST_QUALITY_MAX_TOP_K];
} st_qtok;

/* One prompt's answer. */
typedef struct st_qanswer {
    st_qtok *tok;
    uint32_t n, cap;
    /* the prompt positions scored (teacher-forced, prompt_logprobs): scored[i] is the distribution
     * of prompt token i (NULL when none asked) */
    st_qtok *scored;
    uint32_t n_scored, cap_scored;
    int no_logprobs; /* the engine answered without log-probabilities */
} st_qanswer;
void st_qanswer_free(st_qanswer *a);

/* The request body: prompt as token ids (ids, n_ids) or text (when ids is NULL); greedy,
 * max_tokens, top_k log-probabilities; score > 0: one token, and the prompt's log-probabilities
 * (OpenAI: prompt_logprobs) or, llama.cpp (no prompt log-probabilities), the next position's with
 * the prompt's prefix kept in the server's cache (cache_prompt: scoring a text one position at a
 * time reads each prefix once). model may be NULL. 0, or -1 when out is full. */
int st_quality_body(st_qapi a, const char *model, const uint32_t *ids, uint32_t n_ids, const char *text,
                    uint32_t max_tokens, uint32_t top_k, int score, st_buf *out);
/* Parses a 2xx answer into out (zeroed first). 0, or -1 with err (malformed). An answer with
 * tokens but no log-probabilities is not an error: out->no_logprobs. */
int st_quality_parse(st_qapi a, const char *body, size_t len, st_qanswer *out, char *err, size_t errlen);

/* st_lp_pos views of n positions of tok (into out[n]). */
void st_quality_views(const st_qtok *tok, uint32_t n, st_lp_pos *out);

/* What the pass found for one configuration. */
typedef enum st_qstatus {
    ST_Q_MEASURED = 0, /* compared with the baseline (summary) */
    ST_Q_REFERENCE,    /* the baseline itself: its answers are the reference */
    ST_Q_NO_LOGPROBS,  /* the engine returned no log-probabilities */
    ST_Q_REFUSED,      /* not comparable: another tokenizer, no baseline answers... (note) */
    ST_Q_FAILED,       /* the requests failed (note) */
} st_qstatus;
const char *st_qstatus_name(st_qstatus s); /* "measured", "reference", "no_logprobs", "refused", "failed" */
int st_qstatus_from_name(const char *n, st_qstatus *out);

#define ST_QUALITY_NOTE_MAX 512
typedef struct st_quality_result {
    st_qstatus status;
    char mode[16];    /* "teacher-forced" or "free-running" */
    uint32_t prompts; /* prompts asked */
    int synthetic;    /* the prompts were random token ids (a synthetic workload) */
    int emulated;     /* the engine is servetune's emulator: figures of a pseudo-model, not evidence */
    double engine_s;  /* engine seconds the pass took (its cost) */
    uint32_t top_k;
    st_drift_summary d;
    int pass;                       /* 1 within every limit (or none set), 0 beyond one */
    char note[ST_QUALITY_NOTE_MAX]; /* why not measured, or which limit failed, in words */
} st_quality_result;

/* Checks r against the spec's limits: sets r->pass, and r->note to the failed limits in words
 * ("mean KL divergence 0.052 nats above the limit 0.02; same top-1 91.0 % below 95 %"). A limit
 * whose figure was not measured (exact match without free-running answers) is said, not failed. */
void st_quality_judge(const st_spec *s, st_quality_result *r);

/* The result as one JSON object (the store's meta "quality/NAME"), and back. */
int st_quality_to_json(const st_quality_result *r, st_buf *out);
int st_quality_from_json(const char *text, size_t len, st_quality_result *out);
/* The store meta key of a configuration's result (out: at least ST_QUALITY_KEY_MAX). */
#define ST_QUALITY_KEY_MAX 320
void st_quality_key(const char *config, char *out, size_t n);

#endif
