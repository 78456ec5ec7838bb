/* Workloads: the list of requests a run sends, either synthetic (the shape of vLLM's
 * random dataset, or multi-turn sessions) or loaded from a trace (load/trace.h,
 * docs/trace-format.md). Pure apart from st_workload_trace_load, which reads the file.
 *
 * Sessions (multi-turn conversations): the first turn of every session (and every request
 * outside a session) is on the arrival schedule; the later turns are DEPENDENT: they are the
 * last n_dependent items, and each is sent when the turn before it ended plus its think time,
 * with the conversation so far (the earlier prompts and the answers the server actually
 * returned) in front of its new text (load/session.h does this at run time).
 *
 * Ownership: st_workload owns items, and each item owns its input_ids, input_text and
 * history (malloc'd); st_workload_free releases all of it. */
#ifndef ST_WORKLOAD_H
#define ST_WORKLOAD_H
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/clock.h"
#include "core/rng.h"

typedef struct st_work_item {
    uint32_t id;
    st_ns arrival;       /* from a trace (ns from start), or -1: the arrival process decides */
    uint32_t input_len;  /* tokens */
    uint32_t *input_ids; /* input_len token ids, or NULL when the trace gave text only */
    char *input_text;    /* text prompt or NULL; st_workload_text() derives text from ids */
    uint32_t output_len;
    uint32_t prefix_group, prefix_len; /* requests of one group share prefix_len leading tokens */
    /* own_key != 0: the ids from own_from on are the item's own, drawn from a stream that own_key
     * names: items with the same own_key and own_from have the same ids from own_from on, items with
     * different keys different ones there (as independent random draws differ). The engine model
     * keys those blocks instead of hashing them (emu/sim.h). Set by the synthetic generator (own_from
     * = prefix_len, own_key from its generator's state and vocabulary); whoever changes the ids from
     * own_from on must clear own_key (a copy of the item keeps both). 0: none declared. */
    uint32_t own_from;
    uint64_t own_key;
    /* lazy (st_workload_synthetic_lazy): input_ids holds only the first own_from ids (the workload's
     * shared prefix, st_workload.shared_ids: not the item's own, NULL when own_from is 0); the rest
     * are drawn when asked (st_work_item_ids) from tail, the generator's state where they begin, in
     * [ST_WORKLOAD_VOCAB_LO, tail_hi). */
    int lazy;
    uint32_t tail_hi;
    st_rng tail;
    /* Sessions: session is 1 + the session's index (0: not in a session); turn counts from 0;
     * next is the index of the session's next turn (0: none; turn 0 is never dependent, so
     * index 0 is never a next turn); think is the pause between the end of the previous
     * turn and this one. For turns after the first, input_ids / input_text hold only the
     * user's new text, and history (n_history texts alternating user and assistant, oldest
     * first) is filled when the previous turn ends. Session turns are sent as text. */
    uint32_t session, turn, next;
    st_ns think;
    char **history;
    uint32_t n_history;
    /* Agent task graphs (load/agent.h): a node of a task is sent when every one of its
     * n_parents parents has answered, plus its think time (the gap); children: the item
     * indices of the nodes that wait for it (owned, n_children of them). grow: its prompt is its
     * own text followed by its parents' answers (in the order they came back); 0: its own
     * prompt only (its ids already hold the recorded context). waiting counts the parents not
     * yet answered at run time (load/agent_run.h). task is session; turn, its depth. */
    uint32_t *children;
    uint32_t n_children, n_parents, waiting;
    int grow;
} st_work_item;

typedef struct st_workload {
    st_work_item *items;
    uint32_t n;
    uint32_t n_dependent; /* the last n_dependent items are later turns of sessions (not scheduled) */
    uint32_t n_sessions;
    uint32_t n_tasks;     /* agent task graphs: the number of tasks (each item's session is its task) */
    uint32_t *shared_ids; /* lazy items' shared prefix (owned; st_work_item.lazy), or NULL */
} st_workload;

/* Synthetic workload (vLLM random-dataset shape).
 * - input_len is the TOTAL prompt length including the shared prefix (unlike vLLM's
 *   --random-input-len, which excludes its --random-prefix-len): "3,000-token prompts with a
 *   2,000-token shared prefix" is input_len 3000, prefix_len 2000. Each request's length is
 *   uniform in [floor(L(1-r)), floor(L(1+r))] (inclusive, at least 1), the same bounds vLLM
 *   computes; prefix_len must not exceed the lower bound.
 * - output_len likewise with the same range_ratio (at least 1).
 * - the first prefix_len ids of every request are identical (prefix_group 0); the rest are
 *   drawn independently per request.
 * - ids are uniform in [ST_WORKLOAD_VOCAB_LO, vocab_size); vocab_size 0 means
 *   ST_WORKLOAD_VOCAB_DEFAULT. Keep vocab_size at or below the model's first special-token
 *   id (Llama-3: 128000, Qwen2/3: 151643) so no control token is ever sent; the default is
 *   safe for every model servetune knows.
 * - the same seed gives the same workload, byte for byte. */
#define ST_WORKLOAD_VOCAB_LO 1000u
#define ST_WORKLOAD_VOCAB_DEFAULT 32000u
#define ST_WORKLOAD_MAX_TOKENS (1u << 21) /* per request, input or output */
#define ST_WORKLOAD_MAX_REQUESTS 10000000u

typedef struct st_synth_params {
    uint32_t input_len, output_len;
    double range_ratio; /* r in [0, 1) */
    uint32_t prefix_len;
    uint32_t num_requests;
    uint64_t seed;
    uint32_t vocab_size; /* ids drawn in [ST_WORKLOAD_VOCAB_LO, vocab_size) */
    /* vLLM's random dataset (`vllm bench serve --dataset-name random`): the shared prefix
     * comes ON TOP of input_len (a prompt is prefix_len + a length drawn from
     * [floor(L(1-r)), ceil(L(1+r))]), outputs from [max(1, floor(O(1-r))), max(1, ceil(O(1+r)))]. */
    int vllm_semantics;
} st_synth_params;

int st_workload_synthetic(const st_synth_params *p, st_workload *out, char *err, size_t errlen);
/* The same workload with its items lazy (st_work_item.lazy): the shared prefix held once, each
 * item's own ids not drawn (only stepped over, so every item's tail is the one
 * st_workload_synthetic draws). For consumers that read the ids before own_from and own_key only
 * (the engine model: emu/sim.h keys the tails), or that call st_work_item_ids; not for the load
 * generator, the tokenizer or exports, which read input_ids whole. */
int st_workload_synthetic_lazy(const st_synth_params *p, st_workload *out, char *err, size_t errlen);
/* The item's whole prompt, input_len ids, into out (a lazy item's tail drawn now). 0, or -1 when it
 * has no ids (text only). */
int st_work_item_ids(const st_work_item *it, uint32_t *out);

/* Synthetic multi-turn sessions: sessions conversations, each of turns turns (uniform in
 * [turns_min, turns_max]). Turn 0's prompt is first_input tokens (prefix_len of them shared
 * by every session, as a system prompt); each later turn adds user_input new tokens to the
 * conversation so far (the history grows by the previous prompt's answer and this text);
 * every turn asks for output_len tokens; think_s seconds pass between a turn's end and the
 * next turn (exponential with that mean when think_exp, else constant). Lengths spread with
 * range_ratio as the synthetic workload's. The first turns go on the arrival schedule; the
 * later turns are dependent items (st_workload.n_dependent). */
/* The most turns a session may have, and the longest think time between turns (s). */
#define ST_SESSION_TURNS_MAX 1000u
#define ST_SESSION_THINK_MAX_S 86400.0
typedef struct st_session_params {
    uint32_t sessions;
    uint32_t turns_min, turns_max;
    uint32_t first_input, user_input, output_len, prefix_len;
    double range_ratio;
    double think_s;
    int think_exp;
    uint64_t seed;
    /* > 0: agent tasks instead of conversations (load/agent.h st_agent_sessions): each of the
     * `sessions` tasks fans out turns - 1 times to fan_out_min..fan_out_max workers and joins them */
    uint32_t fan_out_min, fan_out_max;
} st_session_params;
int st_workload_sessions(const st_session_params *p, st_workload *out, char *err, size_t errlen);

/* Loads a trace of any format load/trace.h reads (docs/trace-format.md), with the default
 * options and sessions flattened (every item on the schedule: see st_trace_load for the
 * options and for replayed sessions). Errors are "path:line: reason". Lines are limited to
 * ST_TRACE_LINE_MAX bytes. Arrival times are relative to the first request's timestamp (so
 * the replay starts at once), or -1 for every item when the trace has no timestamps. */
#define ST_TRACE_LINE_MAX (4u << 20)
int st_workload_trace_load(const char *path, st_workload *out, char *err, size_t errlen);
/* The same from a buffer in memory (name is used in error messages). */
int st_workload_trace_parse(const char *data, size_t len, const char *name, st_workload *out, char *err, size_t errlen);
/* Parses one trace line into *it (it->id = index, ids generated as documented). Returns 0,
 * 1 for a blank or comment line (nothing filled), -1 with the reason in err (without the
 * "file:line:" prefix). *has_ts tells whether the line had a timestamp, *ts_s its value.
 * On success the caller owns it->input_ids / it->input_text (free with st_work_item_free). */
int st_trace_parse_line(const char *line, size_t len, uint32_t index, st_work_item *it, int *has_ts, double *ts_s,
                        char *err, size_t errlen);
/* The same with the session and filter keys (session, turn, think_time, model). */
typedef struct st_trace_native {
    int has_ts;
    double ts_s;
    char session[256]; /* "" when none (an integer session is written in decimal) */
    int has_turn;
    uint32_t turn;
    int has_think;
    double think_s;
    char model[256]; /* "" when none */
    int has_prefix_group;
} st_trace_native;
/* salt: mixed into the ids of a row given as a token count (0: the trace's own ids; another salt
 * gives other ids with the same sharing, st_trace_opts.salt). */
int st_trace_parse_native(const char *line, size_t len, uint32_t index, uint64_t salt, st_work_item *it,
                          st_trace_native *x, char *err, size_t errlen);
void st_work_item_free(st_work_item *it);
/* A JSON parser's (jansson's) reason for refusing a trace line, in the user's words: the library's
 * own flag names (JSON_ALLOW_NUL for a "\u0000" in a string) are not. */
const char *st_trace_json_reason(const char *parser_text);
/* Deterministic ids for generated prompts (traces given as token counts): n ids of the
 * stream seeded by seed, uniform in [ST_WORKLOAD_VOCAB_LO, ST_WORKLOAD_VOCAB_DEFAULT). */
void st_workload_fill_ids(uint64_t seed, uint32_t *ids, uint32_t n);

/* Deterministic text for text-only APIs (TGI, chat): the item's input_text when it has
 * one, else one word per token id (from a fixed list of 256 common English words, id modulo 256, joined
 * by single spaces), so about one token per word with a BPE tokenizer and identical leading
 * text for identical leading ids (a shared prefix stays shared). Appends to out; 0 or -1
 * (out's maximum reached or the item has neither ids nor text). */
int st_workload_text(const st_work_item *it, st_buf *out);
/* The whole prompt of a session turn as one text: its history, then its own text, joined by
 * single spaces (so the previous turn's prompt is a prefix of this one's). Outside a session,
 * st_workload_text. 0 or -1. */
int st_workload_prompt_text(const st_work_item *it, st_buf *out);
/* Whitespace-separated words in the item's history (its length in tokens, about). */
uint32_t st_workload_history_tokens(const st_work_item *it);

void st_workload_free(st_workload *w);

#endif
