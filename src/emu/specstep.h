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
 * The draft model's own steps (EAGLE, a draft model) are not modelled: give their time per
 * step as proposer_s (0 for n-gram lookup, whose CPU cost is small). */
#ifndef ST_EMU_SPECSTEP_H
#define ST_EMU_SPECSTEP_H
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

#endif
