/* vLLM's n-gram speculative proposer (vllm/v1/spec_decode/ngram_proposer.py,
 * _find_longest_matched_ngram_and_propose_tokens), and its offline replay over a logged request's
 * token ids (docs/speculative.md). Pure: no I/O.
 *
 * The rule: over all tokens so far, the longest suffix n-gram with n in [min_n, max_n] that
 * occurred earlier (an occurrence ending before the last token; it may overlap the suffix), its
 * EARLIEST occurrence, and the next min(k, tokens after it, max_model_len - tokens) tokens after
 * that occurrence; nothing when fewer than min_n tokens or no such n-gram. vLLM's docstring:
 * [1,2,3,4,2,3], min 2, max 3, k 4 proposes [4,2,3].
 *
 * The replay at temperature 0 is exact: the target's token at every position is the logged one,
 * so a draft is accepted up to its first token that differs from the logged completion, and each
 * verification step emits the accepted tokens plus one. It starts where vLLM's first proposal
 * is made (after the prefill, the context is the prompt and the first sampled token) and ends
 * at the logged completion's end: draft tokens past that end, whose fate the log cannot tell,
 * are cut off and counted apart (truncated). Above temperature 0 the same replay is an unbiased
 * estimate only when the logged completion was sampled at that temperature. */
#ifndef ST_NGRAM_H
#define ST_NGRAM_H
#include <stddef.h>
#include <stdint.h>

#define ST_NGRAM_K_MAX 64u             /* largest number of draft tokens per step */
#define ST_NGRAM_N_MAX 64u             /* largest n-gram length (prompt_lookup_max) */
#define ST_NGRAM_TOKENS_MAX (1u << 24) /* longest prompt + completion replayed (tokens) */

/* vLLM's defaults: prompt_lookup_min = prompt_lookup_max = 5. */
#define ST_NGRAM_DEFAULT_MIN 5u
#define ST_NGRAM_DEFAULT_MAX 5u

typedef struct st_ngram_params {
    uint32_t k;             /* num_speculative_tokens, 1..ST_NGRAM_K_MAX */
    uint32_t min_n, max_n;  /* prompt_lookup_min / _max, 1 <= min_n <= max_n <= ST_NGRAM_N_MAX */
    uint32_t max_model_len; /* no draft past it (0: no limit) */
} st_ngram_params;

/* Parses "ngram:K", "ngram:K,MIN,MAX" or "ngram:K,MIN,MAX,MAX_MODEL_LEN" (also without the
 * "ngram:" prefix). 0, or -1 with the reason. */
int st_ngram_params_parse(const char *s, st_ngram_params *p, char *err, size_t errlen);
/* The same with a list of K: "ngram:2/4/8[,MIN,MAX...]" or a range "ngram:1..8[,...]" gives one
 * set per K (at most max). The number of sets, or -1 with the reason. */
int st_ngram_params_parse_list(const char *s, st_ngram_params *out, int max, char *err, size_t errlen);
/* 0 when p is in range, else -1 with the reason. */
int st_ngram_params_check(const st_ngram_params *p, char *err, size_t errlen);

/* The proposal for tokens[0..n): a line-for-line port of vLLM's function (a KMP prefix
 * function over the reversed tokens, O(n)). Writes at most p->k ids to out; returns how many
 * (0: no proposal). */
uint32_t st_ngram_propose(const uint32_t *tokens, size_t n, const st_ngram_params *p, uint32_t *out);

/* Counters of a replay, summed over requests (st_ngram_acc_add adds two). vLLM's names:
 * drafts = num_drafts (steps with a proposal), draft_tokens = num_draft_tokens, accepted =
 * num_accepted_tokens, accepted_pos[i] = num_accepted_tokens_per_pos[i]. */
typedef struct st_ngram_acc {
    uint64_t requests;      /* replayed */
    uint64_t decode_tokens; /* completion tokens after the first (the ones decode steps emit) */
    uint64_t steps;         /* verification (decode) steps */
    uint64_t no_proposal;   /* steps without a draft */
    uint64_t drafts;
    uint64_t draft_tokens;
    uint64_t accepted;
    uint64_t truncated; /* draft tokens past the logged completion's end (not counted) */
    uint64_t accepted_pos[ST_NGRAM_K_MAX];
    uint64_t drafted_pos[ST_NGRAM_K_MAX]; /* drafts that had a token at position i */
} st_ngram_acc;

void st_ngram_acc_add(st_ngram_acc *into, const st_ngram_acc *a);

/* The figures of a replay (NAN where the denominator is zero). */
typedef struct st_ngram_figures {
    double acceptance_rate;          /* accepted / draft_tokens */
    double mean_accept_len;          /* 1 + accepted / drafts (vLLM's mean acceptance length) */
    double no_proposal_share;        /* no_proposal / steps */
    double tokens_per_step;          /* decode_tokens / steps: the decode steps speculation saves */
    double pos_rate[ST_NGRAM_K_MAX]; /* accepted_pos[i] / drafts */
    uint32_t n_pos;                  /* positions with a draft token */
} st_ngram_figures;

void st_ngram_figures_of(const st_ngram_acc *a, st_ngram_figures *f);

/* The incremental proposer: the same proposals as st_ngram_propose, in O(max_n - min_n + max_n)
 * per token (a hash table of the earliest end of every n-gram seen). Reused across requests. */
typedef struct st_ngram_replay st_ngram_replay;

st_ngram_replay *st_ngram_replay_new(const st_ngram_params *p);
void st_ngram_replay_free(st_ngram_replay *r);

/* Replays one request: ids[0..n_prompt) the prompt, ids[n_prompt..n_prompt + n_completion)
 * the logged completion; adds its counters to acc. 0, or -1 (out of memory, or longer than
 * ST_NGRAM_TOKENS_MAX: nothing added). */
int st_ngram_replay_request(st_ngram_replay *r, const uint32_t *ids, size_t n_prompt, size_t n_completion,
                            st_ngram_acc *acc);

/* The proposal of the incremental proposer for the context ids[0..n) (after the request's
 * earlier contexts or none; contexts must grow): for tests. Returns the count written to out. */
uint32_t st_ngram_replay_propose(st_ngram_replay *r, const uint32_t *ids, size_t n, uint32_t *out);
/* Starts over on a new sequence (st_ngram_replay_propose). 0 or -1 (out of memory). */
int st_ngram_replay_reset(st_ngram_replay *r, size_t n_max);

#endif
