/* Speculative decoding's verification step in the engine model (emu/specstep.h). */
#include "emu/specstep.h"

#include <math.h>
#include <string.h>

#include "emu/steptime.h"

static double decode_step(const st_emu_config *c, uint32_t seqs, double tokens, uint32_t ctx)
{
    st_emu_batch b;
    memset(&b, 0, sizeof b);
    uint32_t t = (uint32_t)ceil(tokens);
    b.tokens = t;
    b.decode_tokens = t;
    b.seqs = seqs;
    b.sampled = t; /* verification scores every position */
    b.attn_pairs = (double)t * ctx;
    b.kv_read_tokens = (double)seqs * ctx;
    return st_emu_step_seconds(c, &b, NULL);
}

int st_emu_spec_point_at(const st_emu_config *c, uint32_t seqs, uint32_t ctx, const st_emu_spec_accept *a,
                         double proposer_s, st_emu_spec_point *out)
{
    memset(out, 0, sizeof *out);
    if (!seqs || !(a->draft_share >= 0 && a->draft_share <= 1) || !(a->draft_len >= 0) ||
        !(a->accepted >= 0 && a->accepted <= a->draft_len) || !(proposer_s >= 0))
        return -1;
    out->seqs = seqs;
    out->plain_step_s = decode_step(c, seqs, seqs, ctx);
    out->spec_step_s = decode_step(c, seqs, seqs * (1 + a->draft_share * a->draft_len), ctx) + proposer_s;
    out->tokens_per_step = 1 + a->draft_share * a->accepted;
    out->tpot_plain_s = out->plain_step_s;
    out->tpot_spec_s = out->spec_step_s / out->tokens_per_step;
    out->ratio = out->tpot_spec_s / out->tpot_plain_s;
    return 0;
}

uint32_t st_emu_spec_breakeven(const st_emu_config *c, uint32_t max_seqs, uint32_t ctx, const st_emu_spec_accept *a,
                               double proposer_s)
{
    for (uint32_t s = 1; s <= max_seqs && s; s *= 2) {
        st_emu_spec_point p;
        if (st_emu_spec_point_at(c, s, ctx, a, proposer_s, &p))
            return 0;
        if (p.ratio >= 1)
            return s;
    }
    return 0;
}
