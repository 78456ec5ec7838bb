/* Speculative decoding's verification step in the engine model (emu/specstep.h). */
#include "emu/specstep.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/rng.h"
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

/* ---- Speculation served by the engine ---- */

double st_emu_spec_pos_accept(const st_emu_spec *s, uint32_t i)
{
    if (i >= s->k)
        return 0;
    if (s->n_pos)
        return i < s->n_pos ? s->accept_pos[i] : 0;
    return pow(s->acceptance, (double)i + 1);
}

double st_emu_spec_draft_len(const st_emu_spec *s) { return s->draft_len > 0 ? s->draft_len : (double)s->k; }

double st_emu_spec_tokens_per_step(const st_emu_spec *s)
{
    double acc = 0;
    for (uint32_t i = 0; i < s->k; i++)
        acc += st_emu_spec_pos_accept(s, i);
    return 1 + s->draft_share * acc;
}

void st_emu_spec_accept_of(const st_emu_spec *s, st_emu_spec_accept *a)
{
    a->draft_share = s->draft_share;
    a->draft_len = st_emu_spec_draft_len(s);
    a->accepted = (st_emu_spec_tokens_per_step(s) - 1) / (s->draft_share > 0 ? s->draft_share : 1);
    if (a->accepted > a->draft_len) /* per-position figures and a shorter mean draft: the draws cap it */
        a->draft_len = a->accepted;
}

int st_emu_spec_check(const st_emu_spec *s, char *err, size_t errlen)
{
    if (s->k == 0)
        return 0;
    if (s->k > ST_EMU_SPEC_MAX_K) {
        snprintf(err, errlen, "num_speculative_tokens %u: the engine model takes at most %d", s->k, ST_EMU_SPEC_MAX_K);
        return -1;
    }
    if (!(s->draft_share >= 0 && s->draft_share <= 1)) {
        snprintf(err, errlen, "the share of steps with a draft (%g) is not within 0..1", s->draft_share);
        return -1;
    }
    if (!(s->draft_len >= 0 && s->draft_len <= s->k)) {
        snprintf(err, errlen, "draft tokens per draft (%g) not within 0..num_speculative_tokens (%u)", s->draft_len,
                 s->k);
        return -1;
    }
    if (s->n_pos > s->k) {
        snprintf(err, errlen, "%u acceptances by position for %u draft tokens", s->n_pos, s->k);
        return -1;
    }
    for (uint32_t i = 0; i < s->n_pos; i++)
        if (!(s->accept_pos[i] >= 0 && s->accept_pos[i] <= 1) || (i && s->accept_pos[i] > s->accept_pos[i - 1])) {
            snprintf(err, errlen,
                     "acceptance at position %u (%g) is not a probability at most the one before it (a draft token "
                     "is only accepted when every one before it is)",
                     i + 1, s->accept_pos[i]);
            return -1;
        }
    if (!s->n_pos && !(s->acceptance >= 0 && s->acceptance <= 1)) {
        snprintf(err, errlen, "acceptance %g is not within 0..1", s->acceptance);
        return -1;
    }
    if (!(s->proposer_seq_s >= 0)) {
        snprintf(err, errlen, "negative proposer time");
        return -1;
    }
    if (s->draft_model && (!s->draft.layers || !s->draft.hidden || !s->draft.vocab)) {
        snprintf(err, errlen, "the draft model has no shape");
        return -1;
    }
    return 0;
}

/* A uniform number in [0, 1) from (id, n, salt): splitmix64. */
static double spec_uniform(uint64_t id, uint32_t n, uint32_t salt)
{
    uint64_t x = id * 0x9e3779b97f4a7c15ULL ^ ((uint64_t)n << 20) ^ ((uint64_t)salt * 0xd1b54a32d192ed03ULL);
    x = st_splitmix64_of(x);
    return (double)(x >> 11) / 9007199254740992.0;
}

uint32_t st_emu_spec_draw(const st_emu_spec *s, uint64_t id, uint32_t n, uint32_t max_draft, uint32_t *accepted)
{
    *accepted = 0;
    if (!s->k || !max_draft || spec_uniform(id, n, 1) >= s->draft_share)
        return 0;
    double dl = st_emu_spec_draft_len(s);
    uint32_t len = (uint32_t)dl;
    if (spec_uniform(id, n, 2) < dl - len)
        len++;
    double u = spec_uniform(id, n, 3);
    uint32_t acc = 0;
    while (acc < s->k && u < st_emu_spec_pos_accept(s, acc))
        acc++;
    if (len < acc)
        len = acc; /* a draft is at least as long as what was accepted of it */
    if (len == 0)
        len = 1;
    if (len > max_draft)
        len = max_draft;
    *accepted = acc < len ? acc : len;
    return len;
}

double st_emu_spec_proposer_seconds(const st_emu_config *c, uint32_t seqs, double kv_read_tokens)
{
    const st_emu_spec *s = &c->spec;
    if (!s->k || !seqs)
        return 0;
    if (!s->draft_model)
        return seqs * s->proposer_seq_s + kv_read_tokens * ST_EMU_SPEC_NGRAM_TOKEN_CPU_S;
    st_emu_config d = *c;
    d.model = s->draft;
    d.weight_dtype = s->draft.weight_dtype;
    d.spec.k = 0;
    d.tune.step_cpu_s = d.tune.seq_cpu_s = 0; /* one engine step: its CPU is counted once, in the target's */
    d.async_scheduling = 0;
    d.decode_slowdown = 1.0;
    d.draft_pass = 1;
    st_emu_batch b;
    memset(&b, 0, sizeof b);
    b.tokens = b.decode_tokens = b.seqs = b.sampled = seqs;
    b.attn_pairs = kv_read_tokens + seqs;
    b.kv_read_tokens = kv_read_tokens;
    return s->k * st_emu_step_seconds(&d, &b, NULL);
}

int st_emu_spec_point_cfg(const st_emu_config *c, uint32_t seqs, uint32_t ctx, st_emu_spec_point *out)
{
    if (!c->spec.k)
        return -1;
    st_emu_spec_accept a;
    st_emu_spec_accept_of(&c->spec, &a);
    double prop = st_emu_spec_proposer_seconds(c, seqs, (double)seqs * ctx); /* it runs for every sequence */
    return st_emu_spec_point_at(c, seqs, ctx, &a, prop, out);
}

int st_emu_spec_llamacpp(const st_emu_llama_costs *c, double tokens, double drafted, double accepted,
                         st_emu_llama_spec *out)
{
    memset(out, 0, sizeof *out);
    double steps = tokens - accepted;
    if (!(accepted >= 0 && accepted <= drafted && steps >= 1) || !(c->tgt_a >= 0 && c->tgt_b >= 0) ||
        !(c->tgt_row_s >= 0 && c->tgt_graph_s >= 0 && c->tok_s >= 0) ||
        !(c->dft_a >= 0 && c->dft_b >= 0 && c->dft_graph_s >= 0 && c->dft_sample_s >= 0) ||
        !(c->n_max >= 1 && c->p_min >= 0 && c->p_min <= 1))
        return -1;
    double d = drafted / steps;
    /* steps whose draft stops short of n_max: a p-min stop (one more pass and sampling), a change of
     * the target pass's shape */
    double short_share = d > 0 ? 1 - (d < c->n_max ? d : c->n_max) / c->n_max : 0;
    double passes = d + (c->p_min > 0 ? short_share : 0);
    double drafting = passes < 1 ? passes : 1; /* steps that ran draft(), per step */
    out->steps = steps;
    out->draft_per_step = d;
    out->draft_passes = passes;
    out->target_s = c->tgt_a + c->tgt_b * (1 + d) + c->tgt_row_s * d + c->tok_s * tokens / steps +
                    (d > 0 ? short_share * c->tgt_graph_s : 0);
    /* process()'s pass and draft()'s first alternate in shape: two graph builds per drafting step */
    out->draft_s = c->dft_a + c->dft_b * (1 + d) + passes * (c->dft_a + c->dft_b + c->dft_sample_s) +
                   2 * drafting * c->dft_graph_s;
    out->tpot_plain_s = c->tgt_a + c->tgt_b + c->tok_s;
    out->tpot_spec_s = steps * (out->target_s + out->draft_s) / tokens;
    out->ratio = out->tpot_spec_s / out->tpot_plain_s;
    return 0;
}

double st_emu_spec_llamacpp_prefill_s(const st_emu_llama_costs *c, double prompt_tokens)
{
    return prompt_tokens > 0 ? c->dft_a + c->dft_graph_s + c->dft_b * prompt_tokens : 0;
}
