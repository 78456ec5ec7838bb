/* Offline speculative-decoding acceptance over a log that carries text (docs/speculative.md):
 * each line's prompt and logged completion, as token ids (given in the log, or from a tokenizer
 * the caller passes), replayed through vLLM's n-gram proposer (load/ngram.h) for each set of
 * parameters asked, in total and by request category. Pure: the caller reads the lines.
 *
 * One JSON object per line; the keys read:
 *   prompt      "text" or "prompt" (a string), "messages" (chat: the contents, joined by a
 *               newline; the chat template's own tokens are not added), "input_ids" (ids);
 *               inside "request" (or "body") for an OpenAI request/response log;
 *   completion  "completion", "output_text" or "response" (a string), "output_ids" (ids), or an
 *               OpenAI response (in "response": choices[0].message.content or choices[0].text);
 *   category    "category" (a string; the first ST_SPEC_CATEGORIES_MAX names, the rest "other").
 * A conversation that holds its answers (ShareGPT's "conversations" [{"from", "value"}], or chat
 * "messages" with assistant turns and no completion key) gives one request per answer, its
 * prompt every turn before it.
 * Ids given in the log are used as they are (both sides, or the tokenizer makes both). A line
 * without a prompt or without a completion, malformed, or whose text the tokenizer cannot map,
 * is counted under its reason and named (the first ST_SPEC_BAD_KEPT): never a silent zero. */
#ifndef ST_SPEC_TRACE_H
#define ST_SPEC_TRACE_H
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "load/ngram.h"

#define ST_SPEC_PARAMS_MAX 16     /* --spec sets per run */
#define ST_SPEC_CATEGORIES_MAX 32 /* categories kept apart */
#define ST_SPEC_CATEGORY_LEN 64
#define ST_SPEC_BAD_KEPT 5
#define ST_SPEC_LINE_MAX ((size_t)64 << 20)

/* Text to ids (e.g. engine/spmtok.h through a wrapper): appends nothing, fills *ids (grown with
 * realloc) and returns the count, or -1 with err. */
typedef int64_t (*st_spec_tokenize_fn)(void *arg, const char *text, size_t len, uint32_t **ids, size_t *cap, char *err,
                                       size_t errlen);

typedef struct st_spec_counts {
    uint64_t lines;         /* non-blank lines read */
    uint64_t replayed;      /* requests replayed */
    uint64_t from_ids;      /* ... whose ids the log gave */
    uint64_t from_text;     /* ... tokenized from their text */
    uint64_t malformed;     /* not a JSON object */
    uint64_t no_prompt;     /* no prompt text or ids */
    uint64_t no_completion; /* no completion text or ids (e.g. token counts only) */
    uint64_t no_tokenizer;  /* text only, and no tokenizer given */
    uint64_t untokenized;   /* text the tokenizer could not map */
    uint64_t too_long;      /* above ST_NGRAM_TOKENS_MAX */
    uint64_t prompt_tokens, completion_tokens;
    char bad_first[ST_SPEC_BAD_KEPT][320];
    uint32_t n_bad_first;
} st_spec_counts;

typedef struct st_spec_stats st_spec_stats;

/* n sets of parameters (1..ST_SPEC_PARAMS_MAX, each checked); tok may be NULL (then only lines
 * with ids are replayed). NULL with err. */
st_spec_stats *st_spec_stats_new(const st_ngram_params *p, int n, st_spec_tokenize_fn tok, void *tok_arg, char *err,
                                 size_t errlen);
void st_spec_stats_free(st_spec_stats *s);

/* One line of the log (line: its number, for messages). 0, or -1 when out of memory. */
int st_spec_stats_add_line(st_spec_stats *s, const char *text, size_t len, uint64_t line);

const st_spec_counts *st_spec_stats_counts(const st_spec_stats *s);
int st_spec_stats_n_params(const st_spec_stats *s);
const st_ngram_params *st_spec_stats_params(const st_spec_stats *s, int i);
/* The totals of parameter set i. */
const st_ngram_acc *st_spec_stats_total(const st_spec_stats *s, int i);
/* Categories seen (0 when the log has none); name and counters of category c under set i. */
int st_spec_stats_n_categories(const st_spec_stats *s);
const char *st_spec_stats_category(const st_spec_stats *s, int c);
const st_ngram_acc *st_spec_stats_by_category(const st_spec_stats *s, int i, int c);

/* The figures as JSON (docs/speculative.md): counts, and per set of parameters vLLM's counter
 * names, the rates and, when the log has categories, the same by category. tokens_from says
 * where the ids came from (NULL: the log). New reference. */
json_t *st_spec_stats_json(const st_spec_stats *s, const char *tokens_from);

/* "ngram:K,MIN,MAX" (and ",MAX_MODEL_LEN" when set) into out. */
void st_ngram_params_name(const st_ngram_params *p, char *out, size_t cap);

#endif
