/* Speculative decoding in the engine model (docs/speculative.md): a decode step in which each
 * sequence that has a draft verifies it (its k draft tokens and the one after them are scored:
 * k + 1 query tokens, k + 1 logits rows), against a plain decode step, and the tokens each
 * step then emits on average (1 + the accepted draft tokens). The acceptance comes from the
 * offline replay of the client's text (load/ngram.h) or from a measured run. Pure.
 *
 *   TPOT plain = step(seqs tokens)
 *   TPOT spec  = (step(seqs x (1 + draft_share x draft_len) tokens) + proposer_s)
 *                / (1 + draft_share x accepted)
 * where draft_share is the share of steps with a draft, draft_len the draft tokens per draft and
 * accepted the accepted tokens per draft. At small batches a step is bound by reading the
 * weights, so scoring k + 1 tokens costs little more than 1 and speculation pays; as the batch
 * grows the step becomes compute-bound, the verified tokens cost in full, and it stops paying.
 * proposer_s is the proposer's time per step: st_emu_spec_proposer_seconds (n-gram lookup's CPU, or
 * a draft model's own k decode steps). */
#ifndef ST_EMU_SPECSTEP_H
#define ST_EMU_SPECSTEP_H
#include <stddef.h>
#include <stdint.h>

#include "emu/config.h"

typedef struct st_emu_spec_accept {
    double draft_share; /* steps with a draft / steps, 0..1 */
    double draft_len;   /* draft tokens per draft, >= 0 */
    double accepted;    /* accepted tokens per draft, 0..draft_len */
} st_emu_spec_accept;

typedef struct st_emu_spec_point {
    uint32_t seqs;
    double plain_step_s, spec_step_s;
    double tokens_per_step; /* per sequence, with speculation */
    double tpot_plain_s, tpot_spec_s;
    double ratio; /* tpot_spec / tpot_plain: below 1 speculation pays */
} st_emu_spec_point;

/* seqs sequences decoding at context ctx tokens on configuration c (resolved by
 * st_emu_memory_plan). 0, or -1 when the acceptance is out of range or seqs is 0. */
int st_emu_spec_point_at(const st_emu_config *c, uint32_t seqs, uint32_t ctx, const st_emu_spec_accept *a,
                         double proposer_s, st_emu_spec_point *out);

/* The smallest batch among 1, 2, 4, ... up to max_seqs at which speculation no longer pays
 * (ratio >= 1); 0 when it pays at every one. */
uint32_t st_emu_spec_breakeven(const st_emu_config *c, uint32_t max_seqs, uint32_t ctx, const st_emu_spec_accept *a,
                               double proposer_s);

/* ---- Speculation served by the engine (st_emu_config.spec, emu/engine.c) ---- */

/* vLLM's n-gram proposer's CPU per context token scanned, per speculating sequence and step: the
 * numba-compiled suffix search (vllm/v1/spec_decode/ngram_proposer.py) walks the sequence's tokens
 * once, a few cycles each. An order of magnitude, not measured against vLLM: at 2 ns a 4,096-token
 * context costs 8 us, small beside a step, as vLLM's docs say of it. */
#define ST_EMU_SPEC_NGRAM_TOKEN_CPU_S 2e-9

/* The probability that draft position i (0-based) is accepted given a draft: accept_pos[i], else
 * a^(i+1); 0 from k on. */
double st_emu_spec_pos_accept(const st_emu_spec *s, uint32_t i);
/* Expected tokens a sequence emits per decode step with speculation: 1 + draft_share x (expected
 * accepted per draft); with a per-token acceptance a and every step drafting, (1 - a^(k+1)) / (1 - a). */
double st_emu_spec_tokens_per_step(const st_emu_spec *s);
/* Draft tokens per draft (draft_len, else k). */
double st_emu_spec_draft_len(const st_emu_spec *s);
/* The spec's acceptance as the replay's three figures (for st_emu_spec_point_at). */
void st_emu_spec_accept_of(const st_emu_spec *s, st_emu_spec_accept *a);
/* Validates s (k <= ST_EMU_SPEC_MAX_K, shares and probabilities in 0..1, accept_pos nonincreasing,
 * a draft model's shape). 0 or -1 with the reason. */
int st_emu_spec_check(const st_emu_spec *s, char *err, size_t errlen);

/* One sequence's draw for the step in which its n-th output token is produced (deterministic in
 * id and n): the draft tokens it verifies (0: no draft this step), at most max_draft, and in
 * *accepted how many of them the target keeps. A position is accepted when one uniform draw u
 * falls below its probability, so P(accepted >= i + 1) = st_emu_spec_pos_accept(i) exactly. */
uint32_t st_emu_spec_draw(const st_emu_spec *s, uint64_t id, uint32_t n, uint32_t max_draft, uint32_t *accepted);

/* Seconds the proposer adds to a step in which `seqs` sequences draft, reading kv_read_tokens
 * context tokens in all: n-gram lookup's CPU (ST_EMU_SPEC_NGRAM_TOKEN_CPU_S per context token), or
 * a draft model's k decode steps over those sequences at its own size on c's GPU (its forward
 * passes only: the engine core's per-step CPU is the target step's). 0 without speculation. */
double st_emu_spec_proposer_seconds(const st_emu_config *c, uint32_t seqs, double kv_read_tokens);

/* st_emu_spec_point_at with c's own speculation (c->spec) and proposer cost. -1 without speculation. */
int st_emu_spec_point_cfg(const st_emu_config *c, uint32_t seqs, uint32_t ctx, st_emu_spec_point *out);

/* ---- llama.cpp's draft model (llama-server --spec-type draft-simple), on measured step costs ----
 * The same verification step, with the step costs of llama.cpp on its own hardware (a CPU) taken
 * from measurements instead of the GPU roofline. A forward pass (llama_decode) of n tokens costs
 * a + b n seconds when it reuses the previous pass's compute graph, plus graph_s when its shape
 * (tokens, outputs) differs from that pass's and the graph is built anew
 * (src/llama-context.cpp, llama_context::process_ubatch: gf_res_prev->can_reuse); each logits row
 * past the first costs row_s (the output layer over one more row). One decode step of one sequence
 * in the pinned llama-server (tools/server/server-context.cpp, update_slots and post_decode;
 * common/speculative.cpp, common_speculative_impl_draft_simple):
 *   draft()   the draft model decodes the last sampled token, then each drafted token but the last,
 *             one token per llama_decode, sequentially, sampling after each (top-k 10 over the whole
 *             vocabulary, common_sampler_sample) and stopping at n_max (or the tokens left), or when
 *             the best candidate's probability is below --spec-draft-p-min (that token is sampled
 *             and dropped, the pass before it spent): d passes and d samplings at n_max, d + 1 after
 *             a p-min stop. The first of them follows a pass of another shape: a graph build;
 *   seq_rm    the draft tokens are removed from the draft's KV cache (llama_memory_seq_rm: no pass);
 *   target    one pass of 1 + d tokens scoring 1 + d logits rows (update_slots, handle_last_sampled_token);
 *   process() the draft model decodes the same 1 + d tokens again to keep its KV in step with the
 *             target's (common_speculative_process, [TAG_SPEC_AVOID_DRAFT_REEVAL]): one pass, one
 *             logits row, a graph build after draft()'s single-token passes; it runs on every
 *             step, with a draft or not;
 *             the prompt's batches go through it as well (the draft's prefill, in the TTFT);
 *   verify    the target samples position by position until the first token that differs from the
 *             draft (common_sampler_sample_and_accept_n): accepted + 1 samplings, each emitted token
 *             then detokenized and streamed; the rejected tokens' KV is removed from both contexts
 *             (server_slot.mem.seq_rm: no pass).
 * With totals over the decode phase, steps = tokens after the first - accepted, drafted = sum of d:
 *   target = steps (a_t + b_t) + drafted (b_t + row_t) + tokens tok_s + rebuilds_t graph_t
 *   draft  = steps a_d + (steps + drafted) b_d                                 (process())
 *          + passes (a_d + b_d + dft_sample_s)                                  (draft())
 *          + drafting steps x 2 graph_d        (process()'s pass and draft()'s first alternate in shape)
 * passes = drafted when p_min is 0 (every draft stops at its cap), else drafted + the steps whose
 * draft is shorter than n_max (estimated: steps x (1 - d / n_max)); the target rebuilds its graph on
 * the steps whose draft length changes (estimated the same way). Plain decoding: a + b + tok_s a
 * token, graph reused. */
typedef struct st_emu_llama_costs {
    double tgt_a, tgt_b; /* target: a pass of n tokens with its graph reused, tgt_a + tgt_b n seconds */
    double tgt_row_s;    /* target: each logits row past the first */
    double tgt_graph_s;  /* target: building a pass's graph anew */
    double tok_s;        /* per emitted token: the target's sampling, detokenizing, streaming */
    double dft_a, dft_b; /* draft model: a pass of n tokens with its graph reused */
    double dft_graph_s;  /* draft model: building a pass's graph anew */
    double dft_sample_s; /* draft model: sampling one draft token (common_sampler_sample, top-k 10) */
    double n_max;        /* --spec-draft-n-max */
    double p_min;        /* --spec-draft-p-min (0, the pinned default: no early stop) */
} st_emu_llama_costs;

typedef struct st_emu_llama_spec {
    double steps;          /* decode steps */
    double draft_per_step; /* d */
    double draft_passes;   /* the draft's single-token passes, per step */
    double tpot_plain_s, tpot_spec_s, ratio;
    double target_s, draft_s; /* per step */
} st_emu_llama_spec;

/* TPOT with and without a draft model for requests that generated `tokens` tokens in all (after
 * their first: the decode phase's), drafting `drafted` tokens of which `accepted` were accepted
 * (llama-server's timings.draft_n and draft_n_accepted, summed). 0, or -1 when the figures are
 * inconsistent (accepted above drafted or tokens, no step, a negative cost). */
int st_emu_spec_llamacpp(const st_emu_llama_costs *c, double tokens, double drafted, double accepted,
                         st_emu_llama_spec *out);

/* The time the draft model adds to a request's prefill (its TTFT): process() runs the prompt's
 * tokens through the draft as well (a pass of prompt_tokens, its graph built anew). */
double st_emu_spec_llamacpp_prefill_s(const st_emu_llama_costs *c, double prompt_tokens);

#endif
