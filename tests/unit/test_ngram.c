/* vLLM's n-gram proposer (load/ngram.h): vLLM's own examples, a brute-force oracle on 10^5
 * random sequences, and the replay's counters worked out by hand. */
#include "harness.h"

#include <stdio.h>

#include "core/rng.h"
#include "load/ngram.h"

static st_ngram_params P(uint32_t k, uint32_t min_n, uint32_t max_n)
{
    st_ngram_params p = { .k = k, .min_n = min_n, .max_n = max_n, .max_model_len = 1024 };
    return p;
}

/* Both proposers (the port and the incremental one, fresh) on tokens; they must agree. */
static uint32_t propose_both(const uint32_t *t, size_t n, st_ngram_params p, uint32_t *out)
{
    uint32_t a = st_ngram_propose(t, n, &p, out);
    uint32_t other[ST_NGRAM_K_MAX];
    st_ngram_replay *r = st_ngram_replay_new(&p);
    assert_non_null(r);
    assert_int_equal(st_ngram_replay_reset(r, n), 0);
    uint32_t b = st_ngram_replay_propose(r, t, n, other);
    st_ngram_replay_free(r);
    assert_int_equal(a, b);
    assert_memory_equal(out, other, a * sizeof *out);
    return a;
}

#define EXPECT(t, p, ...)                                                                                              \
    do {                                                                                                               \
        const uint32_t want_[] = { __VA_ARGS__ };                                                                      \
        uint32_t got_[ST_NGRAM_K_MAX];                                                                                 \
        uint32_t n_ = propose_both(t, sizeof t / sizeof *t, p, got_);                                                  \
        assert_int_equal(n_, sizeof want_ / sizeof *want_);                                                            \
        assert_memory_equal(got_, want_, sizeof want_);                                                                \
    } while (0)
#define EXPECT_NONE(t, p)                                                                                              \
    do {                                                                                                               \
        uint32_t got_[ST_NGRAM_K_MAX];                                                                                 \
        assert_int_equal(propose_both(t, sizeof t / sizeof *t, p, got_), 0);                                           \
    } while (0)

/* The docstring of NgramProposer.propose and tests/v1/spec_decode/test_ngram.py. */
static void vllm_examples(void **state)
{
    (void)state;
    const uint32_t doc[] = { 1, 2, 3, 4, 2, 3 };
    EXPECT(doc, P(4, 2, 3), 4, 2, 3);

    const uint32_t a[] = { 1, 2, 3, 4, 1, 2, 3, 5, 6 };
    EXPECT_NONE(a, P(2, 2, 2));
    const uint32_t b[] = { 1, 2, 3, 4, 1, 2, 3 };
    EXPECT(b, P(3, 2, 2), 4, 1, 2);
    EXPECT(b, P(2, 2, 2), 4, 1);
    EXPECT(b, P(3, 1, 1), 4, 1, 2);
    EXPECT(b, P(2, 1, 1), 4, 1);
    const uint32_t c[] = { 1, 3, 6, 2, 3, 4, 1, 2, 3 };
    EXPECT(c, P(3, 2, 2), 4, 1, 2);
    EXPECT(c, P(2, 1, 1), 6, 2); /* the first match */

    const uint32_t d[] = { 1, 2, 3, 4, 5 };
    EXPECT_NONE(d, P(2, 2, 2));
    EXPECT_NONE(b, P(2, 4, 4));
    EXPECT(b, P(2, 3, 4), 4, 1);
    const uint32_t e[] = { 2, 3, 4, 5, 1, 2, 3, 4, 1, 2, 3, 4 };
    EXPECT(e, P(2, 3, 4), 1, 2); /* the 4-gram, not [5, 1] */
    const uint32_t f[] = { 3, 4, 5, 2, 3, 4, 1, 2, 3, 4 };
    EXPECT(f, P(2, 2, 4), 1, 2); /* the 3-gram, not [5, 2] */
    const uint32_t g[] = { 1, 2, 3, 100, 1, 2, 3, 200, 1, 2, 3, 300, 1, 2, 3 };
    EXPECT(g, P(2, 3, 3), 100, 1); /* always the first */

    /* max_model_len: no draft past it */
    st_ngram_params lim = P(3, 2, 2);
    lim.max_model_len = 8;
    EXPECT(b, lim, 4);
    lim.max_model_len = 7;
    EXPECT_NONE(b, lim);
    /* fewer tokens than min_n */
    const uint32_t one[] = { 7 };
    EXPECT_NONE(one, P(2, 1, 1));
}

/* The rule in words, by brute force: the longest n in [min, max] whose suffix n-gram occurs ending
 * at some e <= n_tokens - 2, its smallest e, and the tokens after it. */
static uint32_t oracle(const uint32_t *t, size_t n, const st_ngram_params *p, uint32_t *out)
{
    if (n < p->min_n)
        return 0;
    int64_t k = p->k;
    if (p->max_model_len && (int64_t)p->max_model_len - (int64_t)n < k)
        k = (int64_t)p->max_model_len - (int64_t)n;
    if (k <= 0)
        return 0;
    for (size_t m = p->max_n; m >= p->min_n; m--) {
        if (m + 1 > n)
            continue;
        for (size_t e = m - 1; e + 2 <= n; e++) {
            size_t i = 0;
            while (i < m && t[e - i] == t[n - 1 - i])
                i++;
            if (i < m)
                continue;
            size_t avail = n - 1 - e;
            uint32_t c = (uint32_t)((int64_t)avail < k ? (int64_t)avail : k);
            for (uint32_t j = 0; j < c; j++)
                out[j] = t[e + 1 + j];
            return c;
        }
    }
    return 0;
}

static void random_params(st_rng *rng, st_ngram_params *p)
{
    p->min_n = 1 + (uint32_t)st_rng_range(rng, 0, (4) - 1);
    p->max_n = p->min_n + (uint32_t)st_rng_range(rng, 0, (5) - 1);
    p->k = 1 + (uint32_t)st_rng_range(rng, 0, (8) - 1);
    p->max_model_len = st_rng_range(rng, 0, (4) - 1) ? 0 : 1 + (uint32_t)st_rng_range(rng, 0, (60) - 1);
}

/* 10^5 random sequences over small alphabets (many repeats): the port and the incremental
 * proposer agree with the oracle; on every 10th, at every prefix as the sequence grows. */
static void oracle_random(void **state)
{
    (void)state;
    st_rng rng;
    st_rng_seed(&rng, 22);
    uint32_t t[64], want[ST_NGRAM_K_MAX], got[ST_NGRAM_K_MAX];
    uint64_t proposals = 0;
    for (int s = 0; s < 100000; s++) {
        size_t n = 1 + st_rng_range(&rng, 0, (48) - 1);
        uint32_t alpha = 2 + (uint32_t)st_rng_range(&rng, 0, (5) - 1);
        for (size_t i = 0; i < n; i++)
            t[i] = 1 + (uint32_t)st_rng_range(&rng, 0, (alpha)-1);
        st_ngram_params p;
        random_params(&rng, &p);
        uint32_t w = oracle(t, n, &p, want);
        uint32_t g = st_ngram_propose(t, n, &p, got);
        if (g != w || memcmp(got, want, w * sizeof *got))
            fail_msg("sequence %d (n %zu, k %u, %u..%u): the port proposes %u tokens, the oracle %u", s, n, p.k,
                     p.min_n, p.max_n, g, w);
        proposals += w > 0;
        st_ngram_replay *r = st_ngram_replay_new(&p);
        assert_non_null(r);
        assert_int_equal(st_ngram_replay_reset(r, n), 0);
        if (s % 10 == 0) {
            for (size_t m = 1; m <= n; m++) {
                uint32_t wm = oracle(t, m, &p, want);
                uint32_t gm = st_ngram_replay_propose(r, t, m, got);
                if (gm != wm || memcmp(got, want, wm * sizeof *got))
                    fail_msg("sequence %d prefix %zu: incremental %u tokens, oracle %u", s, m, gm, wm);
            }
        } else {
            g = st_ngram_replay_propose(r, t, n, got);
            if (g != w || memcmp(got, want, w * sizeof *got))
                fail_msg("sequence %d: incremental %u tokens, oracle %u", s, g, w);
        }
        st_ngram_replay_free(r);
    }
    /* the sequences exercise both outcomes */
    assert_true(proposals > 20000 && proposals < 90000);
}

/* The replay against a step-by-step replay that calls the port at every step. */
static void replay_matches_port(void **state)
{
    (void)state;
    st_rng rng;
    st_rng_seed(&rng, 5);
    uint32_t t[200], draft[ST_NGRAM_K_MAX];
    for (int s = 0; s < 2000; s++) {
        size_t np = st_rng_range(&rng, 0, (80) - 1), nc = st_rng_range(&rng, 0, (120) - 1);
        uint32_t alpha = 2 + (uint32_t)st_rng_range(&rng, 0, (6) - 1);
        for (size_t i = 0; i < np + nc; i++)
            t[i] = (uint32_t)st_rng_range(&rng, 0, (alpha)-1);
        st_ngram_params p;
        random_params(&rng, &p);
        st_ngram_acc got, want;
        memset(&got, 0, sizeof got);
        memset(&want, 0, sizeof want);
        st_ngram_replay *r = st_ngram_replay_new(&p);
        assert_non_null(r);
        assert_int_equal(st_ngram_replay_request(r, t, np, nc, &got), 0);
        st_ngram_replay_free(r);
        want.requests = 1;
        if (nc > 1) {
            want.decode_tokens = nc - 1;
            size_t total = np + nc;
            for (size_t c = np + 1; c < total;) {
                uint32_t j = st_ngram_propose(t, c, &p, draft);
                want.steps++;
                if (!j) {
                    want.no_proposal++;
                    c++;
                    continue;
                }
                if (j > total - c) {
                    want.truncated += j - (total - c);
                    j = (uint32_t)(total - c);
                }
                want.drafts++;
                want.draft_tokens += j;
                uint32_t a = 0;
                while (a < j && draft[a] == t[c + a])
                    a++;
                for (uint32_t i = 0; i < j; i++)
                    want.drafted_pos[i]++;
                for (uint32_t i = 0; i < a; i++)
                    want.accepted_pos[i]++;
                want.accepted += a;
                c += a + 1;
            }
        }
        if (memcmp(&got, &want, sizeof got))
            fail_msg("request %d: the replay's counters differ from the step-by-step port's", s);
    }
}

static void replay_by_hand(void **state)
{
    (void)state;
    /* prompt 1..10, the completion repeats it; n = 2, k = 3: the context [.. 10, 1] has no
     * match (one token emitted), [1, 2] proposes 3 4 5 (all accepted), [5, 6] proposes 7 8 9 */
    uint32_t t[20];
    for (int i = 0; i < 10; i++)
        t[i] = t[10 + i] = (uint32_t)i + 1;
    st_ngram_params p = P(3, 2, 2);
    st_ngram_acc a;
    memset(&a, 0, sizeof a);
    st_ngram_replay *r = st_ngram_replay_new(&p);
    assert_non_null(r);
    assert_int_equal(st_ngram_replay_request(r, t, 10, 10, &a), 0);
    assert_int_equal(a.requests, 1);
    assert_int_equal(a.decode_tokens, 9);
    assert_int_equal(a.steps, 3);
    assert_int_equal(a.no_proposal, 1);
    assert_int_equal(a.drafts, 2);
    assert_int_equal(a.draft_tokens, 6);
    assert_int_equal(a.accepted, 6);
    assert_int_equal(a.truncated, 0);
    st_ngram_figures f;
    st_ngram_figures_of(&a, &f);
    assert_near(f.acceptance_rate, 1.0, 1e-12);
    assert_near(f.mean_accept_len, 4.0, 1e-12);
    assert_near(f.no_proposal_share, 1.0 / 3, 1e-12);
    assert_near(f.tokens_per_step, 3.0, 1e-12);
    assert_int_equal(f.n_pos, 3);
    assert_near(f.pos_rate[2], 1.0, 1e-12);

    /* the end of the completion cuts a draft: prompt 1..6, completion 1 2 3 */
    const uint32_t u[] = { 1, 2, 3, 4, 5, 6, 1, 2, 3 };
    memset(&a, 0, sizeof a);
    st_ngram_params q = P(5, 2, 2);
    st_ngram_replay *r2 = st_ngram_replay_new(&q);
    assert_non_null(r2);
    assert_int_equal(st_ngram_replay_request(r2, u, 6, 3, &a), 0);
    assert_int_equal(a.steps, 2);
    assert_int_equal(a.drafts, 1);
    assert_int_equal(a.draft_tokens, 1);
    assert_int_equal(a.accepted, 1);
    assert_int_equal(a.truncated, 4);
    /* a miss: the draft's first token differs */
    const uint32_t v[] = { 1, 2, 3, 9, 1, 2, 4 };
    memset(&a, 0, sizeof a);
    assert_int_equal(st_ngram_replay_request(r, v, 4, 3, &a), 0);
    assert_int_equal(a.drafts, 1);
    assert_int_equal(a.draft_tokens, 1); /* [3] cut to the one logged token left */
    assert_int_equal(a.accepted, 0);
    assert_int_equal(a.accepted_pos[0], 0);
    assert_int_equal(a.drafted_pos[0], 1);
    st_ngram_replay_free(r);
    st_ngram_replay_free(r2);

    /* no completion tokens to decode: counted, no steps */
    memset(&a, 0, sizeof a);
    st_ngram_replay *r3 = st_ngram_replay_new(&p);
    assert_int_equal(st_ngram_replay_request(r3, t, 10, 1, &a), 0);
    st_ngram_replay_free(r3);
    assert_int_equal(a.requests, 1);
    assert_int_equal(a.steps, 0);
    st_ngram_figures_of(&a, &f);
    assert_true(isnan(f.acceptance_rate));
}

static void params(void **state)
{
    (void)state;
    st_ngram_params p;
    char err[200];
    assert_int_equal(st_ngram_params_parse("ngram:4", &p, err, sizeof err), 0);
    assert_int_equal(p.k, 4);
    assert_int_equal(p.min_n, 5);
    assert_int_equal(p.max_n, 5);
    assert_int_equal(st_ngram_params_parse("ngram:3,2,4", &p, err, sizeof err), 0);
    assert_int_equal(p.min_n, 2);
    assert_int_equal(p.max_n, 4);
    assert_int_equal(st_ngram_params_parse("2,1,3,4096", &p, err, sizeof err), 0);
    assert_int_equal(p.max_model_len, 4096);
    assert_int_equal(st_ngram_params_parse("ngram:4,2", &p, err, sizeof err), -1);
    assert_non_null(strstr(err, "MIN and MAX"));
    assert_int_equal(st_ngram_params_parse("ngram:0", &p, err, sizeof err), -1);
    assert_non_null(strstr(err, "1..64"));
    assert_int_equal(st_ngram_params_parse("ngram:4,6,5", &p, err, sizeof err), -1);
    assert_int_equal(st_ngram_params_parse("eagle:4", &p, err, sizeof err), -1);
    assert_int_equal(st_ngram_params_parse("ngram:4,", &p, err, sizeof err), -1);
    assert_int_equal(st_ngram_params_parse("ngram:4,1,2,3,4", &p, err, sizeof err), -1);
    /* lists and ranges of K */
    st_ngram_params v[16];
    assert_int_equal(st_ngram_params_parse_list("ngram:2/4/8,2,5", v, 16, err, sizeof err), 3);
    assert_int_equal(v[0].k, 2);
    assert_int_equal(v[2].k, 8);
    assert_int_equal(v[2].min_n, 2);
    assert_int_equal(v[2].max_n, 5);
    assert_int_equal(st_ngram_params_parse_list("ngram:1..5", v, 16, err, sizeof err), 5);
    assert_int_equal(v[4].k, 5);
    assert_int_equal(v[4].min_n, 5);
    assert_int_equal(st_ngram_params_parse_list("ngram:3", v, 16, err, sizeof err), 1);
    assert_int_equal(st_ngram_params_parse_list("ngram:1..20", v, 16, err, sizeof err), -1);
    assert_non_null(strstr(err, "at most 16"));
    assert_int_equal(st_ngram_params_parse_list("ngram:5..2", v, 16, err, sizeof err), -1);
    assert_int_equal(st_ngram_params_parse_list("ngram:2/x", v, 16, err, sizeof err), -1);
    assert_int_equal(st_ngram_params_parse_list("ngram:2/4,6,5", v, 16, err, sizeof err), -1);
    assert_int_equal(st_ngram_params_parse_list("ngram:3", v, 0, err, sizeof err), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(vllm_examples),  cmocka_unit_test(oracle_random), cmocka_unit_test(replay_matches_port),
        cmocka_unit_test(replay_by_hand), cmocka_unit_test(params),
    };
    return cmocka_run_group_tests(tests, 0, 0);
}
