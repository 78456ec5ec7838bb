/* Speculative decoding served by the engine model: --speculative-config read and refused as vLLM
 * would, the acceptance draws follow the given probabilities, the engine verifies 1 + k tokens per
 * decoding sequence and emits 1 + accepted of them in one event (vLLM's bursts), with vLLM's
 * counters, its blocks consistent under preemption, and its TPOT what the verification-step
 * formula (emu/specstep.h) predicts. */
#include "harness.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "emu/engine.h"
#include "emu/flags.h"
#include "emu/specstep.h"

/* `serve MODEL --gpu GPU` plus extra flags through the emulator's own parser. rc of st_emu_args_config. */
static int config_of(st_emu_config *c, const char *model, const char *spec, const char *acc, double share, char *err,
                     size_t errlen)
{
    st_emu_args A;
    st_emu_args_defaults(&A);
    A.model = model;
    A.gpu = "H100";
    A.spec_config = spec;
    A.spec_acceptance = acc;
    if (share >= 0)
        A.spec_draft_share = share;
    return st_emu_args_config(&A, c, err, errlen);
}

static void flags_read_and_refused(void **state)
{
    (void)state;
    st_emu_config c;
    char err[600];
    assert_int_equal(config_of(&c, "Qwen/Qwen3-8B", NULL, NULL, -1, err, sizeof err), 0);
    assert_int_equal(c.spec.k, 0);
    /* ngram with a per-token acceptance: every step drafts */
    assert_int_equal(config_of(&c, "Qwen/Qwen3-8B", "{\"method\":\"ngram\",\"num_speculative_tokens\":4}", "0.6", -1,
                               err, sizeof err),
                     0);
    assert_int_equal(c.spec.k, 4);
    assert_near(c.spec.acceptance, 0.6, 1e-12);
    assert_near(c.spec.draft_share, 1.0, 1e-12);
    assert_int_equal(c.spec.draft_model, 0);
    assert_near(st_emu_spec_tokens_per_step(&c.spec), (1 - pow(0.6, 5)) / (1 - 0.6), 1e-12);
    /* ngram without an acceptance: random ids find no n-gram, nothing is drafted */
    assert_int_equal(config_of(&c, "Qwen/Qwen3-8B", "{\"method\":\"ngram\",\"num_speculative_tokens\":4}", NULL, -1,
                               err, sizeof err),
                     0);
    assert_near(c.spec.draft_share, 0.0, 1e-12);
    /* per position, with a share */
    assert_int_equal(config_of(&c, "Qwen/Qwen3-8B", "{\"method\":\"ngram\",\"num_speculative_tokens\":3}",
                               "0.8/0.5/0.25", 0.4, err, sizeof err),
                     0);
    assert_int_equal(c.spec.n_pos, 3);
    assert_near(st_emu_spec_tokens_per_step(&c.spec), 1 + 0.4 * (0.8 + 0.5 + 0.25), 1e-12);
    /* a draft model of the same vocabulary: its shape is the catalog's */
    assert_int_equal(config_of(&c, "Qwen/Qwen3-8B", "{\"model\":\"Qwen/Qwen3-0.6B\",\"num_speculative_tokens\":5}",
                               "0.7", -1, err, sizeof err),
                     0);
    assert_int_equal(c.spec.draft_model, 1);
    assert_true(c.spec.draft.params < 0.2 * c.model.params);
    /* EAGLE: one decoder layer of the target's shape */
    assert_int_equal(config_of(&c, "Qwen/Qwen3-8B",
                               "{\"method\":\"eagle3\",\"model\":\"x/eagle\","
                               "\"num_speculative_tokens\":3}",
                               "0.7", -1, err, sizeof err),
                     0);
    assert_int_equal(c.spec.draft.layers, 1);
    assert_int_equal(c.spec.draft.hidden, c.model.hidden);
    /* refusals, each with its reason */
    struct {
        const char *spec, *acc, *why;
        int rc;
    } bad[] = {
        { "{method:ngram}", NULL, "not a JSON object", ST_EMU_ARGS_USAGE },
        { "[1]", NULL, "not a JSON object", ST_EMU_ARGS_USAGE },
        { "{\"method\":\"guess\",\"num_speculative_tokens\":2}", NULL, "method 'guess'", ST_EMU_ARGS_USAGE },
        { "{\"method\":\"ngram\"}", NULL, "num_speculative_tokens is required", ST_EMU_ARGS_USAGE },
        { "{\"method\":\"ngram\",\"num_speculative_tokens\":0}", NULL, "whole number >= 1", ST_EMU_ARGS_USAGE },
        { "{\"method\":\"ngram\",\"num_speculative_tokens\":4}", "1.5", "within 0..1", ST_EMU_ARGS_USAGE },
        { "{\"method\":\"ngram\",\"num_speculative_tokens\":4}", "0.5/0.7", "at most the one before",
          ST_EMU_ARGS_USAGE },
        { "{\"method\":\"ngram\",\"num_speculative_tokens\":2}", "0.5/0.4/0.3", "3 positions for 2",
          ST_EMU_ARGS_USAGE },
        { "{\"method\":\"draft_model\",\"num_speculative_tokens\":2}", NULL, "needs \"model\"", ST_EMU_ARGS_USAGE },
        { "{\"model\":\"meta-llama/Meta-Llama-3-8B\",\"num_speculative_tokens\":2}", NULL, "vocabulary",
          ST_EMU_ARGS_STARTUP },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        int rc = config_of(&c, "Qwen/Qwen3-8B", bad[i].spec, bad[i].acc, -1, err, sizeof err);
        if (rc != bad[i].rc || !strstr(err, bad[i].why))
            fail_msg("%s / %s: rc %d, '%s' (wanted %d and '%s')", bad[i].spec, bad[i].acc ? bad[i].acc : "-", rc, err,
                     bad[i].rc, bad[i].why);
    }
    assert_int_equal(config_of(&c, "Qwen/Qwen3-8B", NULL, "0.5", -1, err, sizeof err), ST_EMU_ARGS_USAGE);
    assert_non_null(strstr(err, "need --speculative-config"));
    /* the acceptance flags are the emulator's own: dropped for a real vLLM */
    assert_true(st_emu_flag_emulator_only("--spec-acceptance"));
    assert_true(st_emu_flag_emulator_only("--spec-draft-share=0.3"));
    assert_false(st_emu_flag_emulator_only("--speculative-config"));
}

/* The draws: P(accepted >= i + 1) is the position's probability, the mean the formula's. */
static void draws_follow_the_probabilities(void **state)
{
    (void)state;
    st_emu_spec s;
    memset(&s, 0, sizeof s);
    s.k = 4;
    s.acceptance = 0.6;
    s.draft_share = 0.5;
    enum { N = 200000 };
    uint64_t drafts = 0, acc_ge[5] = { 0 }, acc_sum = 0, len_sum = 0;
    for (uint32_t n = 0; n < N; n++) {
        uint32_t a, d = st_emu_spec_draw(&s, 7 + n / 100, n % 100, 4, &a);
        if (!d) {
            assert_int_equal(a, 0);
            continue;
        }
        assert_true(d == 4 && a <= d);
        drafts++;
        acc_sum += a;
        len_sum += d;
        for (uint32_t i = 0; i < a; i++)
            acc_ge[i]++;
    }
    double se = sqrt(0.25 / N);
    assert_true(fabs((double)drafts / N - 0.5) < 5 * se);
    for (uint32_t i = 0; i < 4; i++) {
        double p = (double)acc_ge[i] / drafts, want = pow(0.6, i + 1);
        if (fabs(p - want) > 5 * sqrt(want * (1 - want) / drafts))
            fail_msg("position %u accepted %.4f of drafts, wanted %.4f", i, p, want);
    }
    double tps = 1 + (double)acc_sum / N;
    assert_true(fabs(tps - st_emu_spec_tokens_per_step(&s)) < 0.01);
    /* a cap on the draft (max_tokens near): never more than it */
    uint32_t a;
    for (uint32_t n = 0; n < 1000; n++) {
        uint32_t d = st_emu_spec_draw(&s, 3, n, 2, &a);
        assert_true(d <= 2 && a <= d);
    }
    /* no speculation, no draft */
    s.k = 0;
    assert_int_equal(st_emu_spec_draw(&s, 3, 5, 4, &a), 0);
}

typedef struct run_out {
    double tpot_s; /* mean over requests of (last - first token) / (tokens - 1) */
    uint64_t events, tokens, steps;
    st_emu_stats st;
} run_out;

/* n requests of `in` prompt tokens and `out` output tokens, all at time 0, on c; every request's
 * tokens counted, the blocks checked after each step. */
static void run_batch(const st_emu_config *c, uint32_t n, uint32_t in, uint32_t out, run_out *o)
{
    memset(o, 0, sizeof *o);
    st_vclock vc = { 0 };
    st_emu_engine *e;
    char err[1024];
    if (st_emu_engine_new(c, st_clock_virtual(&vc), &e, NULL, err, sizeof err))
        fail_msg("%s", err);
    static uint32_t ids[4096];
    static uint32_t got[512];
    static st_ns first[512];
    assert_true(in <= 4096 && n <= 512);
    for (uint32_t r = 0; r < n; r++) {
        for (uint32_t i = 0; i < in; i++)
            ids[i] = 1000 + (r * 7919 + i * 104729) % 100000;
        st_emu_req_params p = { .id = r, .ids = ids, .n_ids = in, .max_tokens = out, .ignore_eos = 1, .arrival = 0 };
        assert_int_equal(st_emu_add_request(e, &p, err, sizeof err), ST_EMU_ADD_OK);
        got[r] = 0;
    }
    double tpot = 0;
    while (st_emu_has_work(e)) {
        if (c->spec.k) { /* step skipping never takes a speculating engine's steps: each draws its drafts */
            st_emu_skip_result sk;
            assert_int_equal(st_emu_skip_steps(e, INT64_MAX, &sk), 1);
        }
        st_emu_step_result res;
        int rc = st_emu_step(e, &res);
        assert_true(rc == 0 || rc == 1);
        if (rc == 1) {
            vc.t = st_emu_next_ready(e);
            continue;
        }
        for (uint32_t k = 0; k < res.n_events; k++) {
            const st_emu_event *ev = &res.events[k];
            assert_true(ev->n_tokens >= 1 && ev->n_tokens <= 1 + c->spec.k);
            got[ev->id] += ev->n_tokens;
            assert_int_equal(ev->n_out, got[ev->id]);
            if (ev->first) {
                assert_int_equal(ev->n_tokens, 1); /* the prefill's token: no draft yet */
                first[ev->id] = ev->due;
            }
            if (ev->finish) {
                assert_int_equal(ev->n_out, out);
                tpot += (double)(ev->due - first[ev->id]) / 1e9 / (out - 1);
            }
            o->events++;
            o->tokens += ev->n_tokens;
        }
        if (st_emu_engine_check(e, err, sizeof err))
            fail_msg("%s", err);
        o->steps++;
        vc.t = res.start + res.duration;
    }
    for (uint32_t r = 0; r < n; r++)
        assert_int_equal(got[r], out);
    o->tpot_s = tpot / n;
    st_emu_get_stats(e, &o->st);
    st_emu_engine_free(e);
}

static void engine_serves_speculation(void **state)
{
    (void)state;
    char err[600];
    st_emu_config plain, spec;
    assert_int_equal(config_of(&plain, "Qwen/Qwen3-8B", NULL, NULL, -1, err, sizeof err), 0);
    assert_int_equal(config_of(&spec, "Qwen/Qwen3-8B", "{\"method\":\"ngram\",\"num_speculative_tokens\":4}", "0.7", -1,
                               err, sizeof err),
                     0);
    plain.no_frontend = spec.no_frontend = 1; /* the engine alone: TPOT is its steps */
    run_out p, s;
    const uint32_t n = 4, in = 1000, out = 400;
    run_batch(&plain, n, in, out, &p);
    run_batch(&spec, n, in, out, &s);
    assert_int_equal(p.tokens, (uint64_t)n * out);
    assert_int_equal(s.tokens, (uint64_t)n * out);
    assert_int_equal(p.events, p.tokens); /* one token an event without speculation */
    assert_true(s.events < s.tokens);     /* bursts with it */
    assert_int_equal(p.st.spec_drafts, 0);
    /* vLLM's counters: every decode after the first token drafts (share 1) */
    assert_int_equal(s.st.generation_tokens, (uint64_t)n * out);
    assert_int_equal(s.st.generation_tokens, (uint64_t)n /* first tokens */ + s.st.spec_drafts + s.st.spec_accepted +
                                                 (s.events - n - s.st.spec_drafts) /* steps without a draft */);
    double rate = (double)s.st.spec_accepted / s.st.spec_draft_tokens;
    double want_acc = 0;
    for (int i = 1; i <= 4; i++)
        want_acc += pow(0.7, i);
    /* draft tokens: 4 a draft, fewer only near max_tokens */
    assert_true(s.st.spec_draft_tokens <= 4 * s.st.spec_drafts && s.st.spec_draft_tokens > 3.9 * s.st.spec_drafts);
    assert_true(fabs((double)s.st.spec_accepted / s.st.spec_drafts - want_acc) < 0.15);
    assert_true(rate > 0.35 && rate < 0.75);
    uint64_t pos_sum = 0;
    for (int i = 0; i < 4; i++) {
        pos_sum += s.st.spec_accepted_pos[i];
        if (i)
            assert_true(s.st.spec_accepted_pos[i] <= s.st.spec_accepted_pos[i - 1]);
    }
    assert_int_equal(pos_sum, s.st.spec_accepted);
    /* TPOT: what the verification-step formula says at this batch and context, within 5 % */
    st_emu_config resolved = spec;
    st_emu_memory mem;
    assert_int_equal(st_emu_memory_plan(&resolved, &mem, err, sizeof err), 0);
    st_emu_spec_point pt;
    assert_int_equal(st_emu_spec_point_cfg(&resolved, n, in + out / 2, &pt), 0);
    double measured = s.tpot_s / p.tpot_s;
    if (fabs(measured / pt.ratio - 1) > 0.05)
        fail_msg("TPOT ratio %.3f in the engine, %.3f by the formula", measured, pt.ratio);
    assert_true(measured < 0.6); /* 0.7 per token, 4 drafts, batch of 4: it pays */

    /* nothing accepted: the verification costs, TPOT is worse */
    st_emu_config none;
    assert_int_equal(config_of(&none, "Qwen/Qwen3-8B", "{\"method\":\"ngram\",\"num_speculative_tokens\":4}", "0", -1,
                               err, sizeof err),
                     0);
    none.no_frontend = 1;
    run_out z;
    run_batch(&none, n, in, out, &z);
    assert_int_equal(z.st.spec_accepted, 0);
    assert_int_equal(z.events, z.tokens);
    assert_true(z.tpot_s > p.tpot_s);

    /* a draft model: its k decode steps add to each step */
    st_emu_config dm;
    assert_int_equal(config_of(&dm, "Qwen/Qwen3-8B", "{\"model\":\"Qwen/Qwen3-0.6B\",\"num_speculative_tokens\":4}",
                               "0.7", -1, err, sizeof err),
                     0);
    dm.no_frontend = 1;
    run_out d;
    run_batch(&dm, n, in, out, &d);
    assert_true(d.tpot_s > s.tpot_s * 1.1);
    assert_true(d.tpot_s < p.tpot_s);
    st_emu_config rd = dm;
    assert_int_equal(st_emu_memory_plan(&rd, &mem, err, sizeof err), 0);
    assert_true(st_emu_spec_proposer_seconds(&rd, n, (double)n * in) > 4 * 1e-3 * 0.5);
}

/* Preemption and a tight token budget with speculation: the blocks stay consistent (checked
 * after every step by run_batch) and every request gets its tokens. */
static void speculation_under_pressure(void **state)
{
    (void)state;
    char err[600];
    st_emu_config c;
    assert_int_equal(config_of(&c, "Qwen/Qwen3-8B", "{\"method\":\"ngram\",\"num_speculative_tokens\":6}",
                               "0.9/0.8/0.6/0.5/0.3/0.1", 0.7, err, sizeof err),
                     0);
    c.no_frontend = 1;
    c.max_num_batched_tokens = 256;
    c.max_num_seqs = 64;
    c.max_model_len = 1024;
    st_emu_config probe = c;
    st_emu_memory mem;
    assert_int_equal(st_emu_memory_plan(&probe, &mem, err, sizeof err), 0);
    /* a pool of about 120 blocks: 64 requests of 300 + 300 tokens do not fit together */
    double want = 120.5 * 16 * mem.kv_bytes_per_token;
    c.gpu_memory_utilization = (mem.weight_bytes + mem.activation_bytes + mem.non_torch_bytes + want) / mem.total_bytes;
    run_out o;
    run_batch(&c, 64, 300, 300, &o);
    assert_true(o.st.preemptions > 0);
    assert_true(o.st.spec_accepted > 0);
    assert_true(o.events < o.tokens);
}

/* llama.cpp's draft model on measured pass costs: the step's passes as docs/speculative.md counts them. */
static void llamacpp_draft_model(void **state)
{
    (void)state;
    st_emu_llama_costs c = { .tgt_a = 5e-3,
                             .tgt_b = 1e-3,
                             .tgt_row_s = 2e-3,
                             .tgt_graph_s = 0.3e-3,
                             .tok_s = 0.5e-3,
                             .dft_a = 4e-3,
                             .dft_b = 1e-3,
                             .dft_graph_s = 0.2e-3,
                             .dft_sample_s = 0.25e-3,
                             .n_max = 8 };
    st_emu_llama_spec p;
    /* 47 tokens after the first, 80 drafted, 27 accepted: 20 steps of 4 draft tokens. The target's
     * pass 5 + 5 x 1 + 4 x 2 = 18 ms, its 47 samplings 0.5 x 47 / 20 = 1.175 ms a step, a graph
     * built on the half of the steps whose draft is short of n_max 0.15 ms; the draft's process()
     * 4 + 5 x 1 = 9 ms, 4 single-token passes of 4 + 1 + 0.25 ms (p-min 0: every draft stops at its
     * cap, its last token not run), two graph builds 0.4 ms */
    assert_int_equal(st_emu_spec_llamacpp(&c, 47, 80, 27, &p), 0);
    assert_near(p.steps, 20, 1e-12);
    assert_near(p.draft_per_step, 4, 1e-12);
    assert_near(p.draft_passes, 4, 1e-12);
    assert_near(p.target_s, 19.325e-3, 1e-12);
    assert_near(p.draft_s, 30.4e-3, 1e-12);
    assert_near(p.tpot_plain_s, 6.5e-3, 1e-12);
    assert_near(p.tpot_spec_s, 20 * 49.725e-3 / 47, 1e-12);
    assert_near(p.ratio, p.tpot_spec_s / p.tpot_plain_s, 1e-12);
    /* the samplings are per emitted token: the same steps emitting more tokens cost more */
    st_emu_llama_spec q;
    assert_int_equal(st_emu_spec_llamacpp(&c, 57, 80, 37, &q), 0);
    assert_near(q.target_s - p.target_s, 0.5e-3 * (57 - 47) / 20.0, 1e-12);
    /* a p-min above 0: the drafts short of n_max stopped on a low-probability token, one more pass */
    c.p_min = 0.5;
    assert_int_equal(st_emu_spec_llamacpp(&c, 47, 80, 27, &p), 0);
    assert_near(p.draft_passes, 4.5, 1e-12);
    assert_near(p.draft_s, 33.025e-3, 1e-12);
    c.p_min = 0;
    /* drafts at n_max: no target graph build */
    assert_int_equal(st_emu_spec_llamacpp(&c, 47, 8 * 20, 27, &p), 0);
    assert_near(p.target_s, 31.175e-3, 1e-12);
    assert_near(p.draft_s, 4e-3 + 9e-3 + 8 * 5.25e-3 + 0.4e-3, 1e-12);
    /* nothing drafted: the plain step and process()'s pass over the sampled token */
    assert_int_equal(st_emu_spec_llamacpp(&c, 47, 0, 0, &p), 0);
    assert_near(p.target_s, 6.5e-3, 1e-12);
    assert_near(p.draft_s, 5e-3, 1e-12);
    /* the draft's prefill: the prompt through process(), its graph built */
    assert_near(st_emu_spec_llamacpp_prefill_s(&c, 32), 4e-3 + 0.2e-3 + 32e-3, 1e-12);
    /* inconsistent figures */
    assert_int_equal(st_emu_spec_llamacpp(&c, 47, 10, 11, &p), -1);
    assert_int_equal(st_emu_spec_llamacpp(&c, 10, 20, 10, &p), -1);
    c.p_min = 2;
    assert_int_equal(st_emu_spec_llamacpp(&c, 47, 80, 27, &p), -1);
    c.p_min = 0;
    c.n_max = 0;
    assert_int_equal(st_emu_spec_llamacpp(&c, 47, 80, 27, &p), -1);
}

/* A draft model's weights and the KV cache of its layers come out of the target's KV budget
 * (vLLM loads both models before profiling and pages every layer's K and V from one pool). Figures
 * by hand from the config.json shapes: Qwen3-0.6B (28 layers, hidden 1024, intermediate 3072, 16
 * heads, 8 KV heads of 128, vocabulary 151936, tied) has 28 x (6,291,456 attention + 2,304 norms
 * + 9,437,184 MLP) + 155,582,464 embedding + 1,024 = 596,049,920 parameters, 1,192,099,840 bytes
 * in bf16, and 28 x 2 x 8 x 128 x 2 = 114,688 KV bytes a token; Qwen3-8B's own KV is 36 x 2 x 8 x
 * 128 x 2 = 147,456 bytes a token. An EAGLE head on Qwen3-8B is one decoder layer (41,943,040
 * attention + 8,448 norms + 150,994,944 MLP) plus the final norm's 4,096, sharing the embedding
 * and output layer: 2 x 192,950,528 = 385,901,056 bytes, and 2 x 8 x 128 x 2 = 4,096 KV bytes a
 * token. n-gram lookup takes nothing. */
static void draft_memory_leaves_kv_budget(void **state)
{
    (void)state;
    st_emu_config c;
    st_emu_memory plain, m;
    char err[600];
    assert_int_equal(config_of(&c, "Qwen/Qwen3-8B", NULL, NULL, -1, err, sizeof err), 0);
    assert_int_equal(st_emu_memory_plan(&c, &plain, err, sizeof err), 0);
    assert_true(plain.kv_bytes_per_token == 147456.0);
    assert_int_equal(config_of(&c, "Qwen/Qwen3-8B", "{\"method\":\"ngram\",\"num_speculative_tokens\":4}", "0.5", -1,
                               err, sizeof err),
                     0);
    assert_int_equal(st_emu_memory_plan(&c, &m, err, sizeof err), 0);
    assert_int_equal(m.num_blocks, plain.num_blocks);
    assert_true(m.draft_weight_bytes == 0 && m.draft_kv_bytes_per_token == 0);
    assert_int_equal(config_of(&c, "Qwen/Qwen3-8B", "{\"model\":\"Qwen/Qwen3-0.6B\",\"num_speculative_tokens\":5}",
                               "0.5", -1, err, sizeof err),
                     0);
    assert_int_equal(st_emu_memory_plan(&c, &m, err, sizeof err), 0);
    assert_true(m.draft_weight_bytes == 1192099840.0);
    assert_true(m.weight_bytes == plain.weight_bytes + 1192099840.0);
    assert_true(m.kv_bytes_per_token == 147456.0 + 114688.0);
    assert_near(m.kv_bytes, plain.kv_bytes - 1192099840.0, 1e-3);
    assert_int_equal(m.num_blocks, (uint32_t)floor((plain.kv_bytes - 1192099840.0) / (262144.0 * 16)));
    assert_true(m.num_blocks < plain.num_blocks * 0.57); /* 147,456 / 262,144 of the tokens, less the weights */
    assert_int_equal(config_of(&c, "Qwen/Qwen3-8B", "{\"method\":\"eagle\",\"num_speculative_tokens\":3}", "0.5", -1,
                               err, sizeof err),
                     0);
    assert_int_equal(st_emu_memory_plan(&c, &m, err, sizeof err), 0);
    assert_true(m.draft_weight_bytes == 385901056.0);
    assert_true(m.kv_bytes_per_token == 147456.0 + 4096.0);
    assert_int_equal(m.num_blocks, (uint32_t)floor((plain.kv_bytes - 385901056.0) / (151552.0 * 16)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(flags_read_and_refused),    cmocka_unit_test(draws_follow_the_probabilities),
        cmocka_unit_test(engine_serves_speculation), cmocka_unit_test(speculation_under_pressure),
        cmocka_unit_test(llamacpp_draft_model),      cmocka_unit_test(draft_memory_leaves_kv_budget),
    };
    return cmocka_run_group_tests(tests, 0, 0);
}
