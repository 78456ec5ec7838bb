/* Scheduler, KV blocks and prefix cache of the engine model, in virtual time. */
#include "harness.h"

#include <stdio.h>

#include "core/clock.h"
#include "emu/blocks.h"
#include "emu/catalog.h"
#include "emu/config.h"
#include "emu/consts.h"
#include "emu/engine.h"
#include "emu_config.h"

/* Llama-3-8B on an RTX 4090 with the utilisation chosen so the pool holds about `blocks`
 * blocks: memory binds quickly and preemption happens. */
static uint64_t rng_state = 0x12345678abcdefULL;
static uint32_t rnd(uint32_t lo, uint32_t hi)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return lo + (uint32_t)(rng_state % (hi - lo + 1));
}

#define NREQ 400
/* mode 0: every prompt by its ids; 1: every other one seeded past its shared prefix (its blocks there held
 * anonymously, emu/blocks.h); 2: prefix caching off (every block anonymous) */
static void invariants_run(int mode)
{
    st_emu_config c;
    emu_small_config(&c, 300, 24, 512);
    c.enable_prefix_caching = mode != 2;
    st_vclock vc = { 0 };
    st_emu_engine *e;
    st_emu_memory mem;
    char err[1024];
    assert_int_equal(st_emu_engine_new(&c, st_clock_virtual(&vc), &e, &mem, err, sizeof err), 0);
    assert_true(mem.num_blocks >= 299 && mem.num_blocks <= 301);

    static uint32_t ids[NREQ][1600];
    static uint32_t want_out[NREQ], got_out[NREQ];
    static st_ns arrival[NREQ];
    static int done[NREQ], aborted[NREQ], rejected[NREQ];
    static uint32_t keyed[NREQ];
    memset(got_out, 0, sizeof got_out);
    memset(done, 0, sizeof done);
    memset(aborted, 0, sizeof aborted);
    memset(rejected, 0, sizeof rejected);
    uint32_t plen[NREQ];
    st_ns t = 0;
    for (int i = 0; i < NREQ; i++) {
        t += rnd(0, 40) * ST_NS_PER_MS;
        arrival[i] = t;
        plen[i] = rnd(1, 1500);
        uint32_t group = rnd(0, 3), shared = rnd(0, 800);
        keyed[i] = mode == 1 && i % 2 ? (shared < plen[i] ? shared : 0) : UINT32_MAX;
        for (uint32_t k = 0; k < plen[i]; k++)
            ids[i][k] = k < shared ? 1000 + group * 7919 + k : rnd(1000, 100000);
        want_out[i] = rnd(1, 300);
        if (i % 37 == 0)
            want_out[i] = 2048; /* too long: rejected at admission */
    }
    /* the test's own view of the running list, in admission order */
    uint64_t running[NREQ];
    uint32_t nrun = 0;
    int next = 0;
    uint64_t preemptions = 0;
    for (int guard = 0; guard < 200000; guard++) {
        while (next < NREQ && arrival[next] <= vc.t) {
            st_emu_req_params p = { .id = (uint64_t)next,
                                    .ids = ids[next],
                                    .n_ids = plen[next],
                                    .max_tokens = want_out[next],
                                    .arrival = arrival[next] };
            if (keyed[next] != UINT32_MAX) {
                p.seeded = 1;
                p.seed = 0x5eed + (uint64_t)next;
                p.keyed_from = keyed[next];
            }
            int rc = st_emu_add_request(e, &p, err, sizeof err);
            if ((uint64_t)plen[next] + want_out[next] > 2048) {
                assert_int_equal(rc, ST_EMU_ADD_TOO_LONG);
                assert_non_null(strstr(err, "However, the model's context length is only 2048 tokens"));
                rejected[next] = 1;
            } else {
                assert_int_equal(rc, ST_EMU_ADD_OK);
            }
            next++;
        }
        if (!st_emu_has_work(e)) {
            if (next >= NREQ)
                break;
            vc.t = arrival[next];
            continue;
        }
        st_emu_step_result r;
        assert_int_equal(st_emu_step(e, &r), 0);
        assert_true(r.tokens <= c.max_num_batched_tokens);
        assert_true(r.tokens > 0);
        for (uint32_t k = 0; k < r.n_preempted; k++) {
            assert_true(nrun > 0);
            assert_true(running[nrun - 1] == r.preempted[k]); /* the most recently admitted */
            nrun--;
        }
        preemptions += r.n_preempted;
        for (uint32_t k = 0; k < r.n_admitted; k++)
            running[nrun++] = r.admitted[k];
        assert_true(nrun <= c.max_num_seqs);
        for (uint32_t k = 0; k < r.n_events; k++) {
            const st_emu_event *ev = &r.events[k];
            assert_int_equal(ev->n_out, got_out[ev->id] + 1);
            assert_int_equal(ev->first, ev->n_out == 1);
            got_out[ev->id] = ev->n_out;
            if (ev->finish) {
                assert_int_equal(ev->n_out, want_out[ev->id]);
                done[ev->id] = 1;
                uint32_t j = 0;
                while (j < nrun && running[j] != ev->id)
                    j++;
                assert_true(j < nrun);
                memmove(&running[j], &running[j + 1], (nrun - j - 1) * sizeof running[0]);
                nrun--;
            }
        }
        st_emu_stats st;
        st_emu_get_stats(e, &st);
        assert_int_equal(st.running, nrun);
        assert_true(st.running <= c.max_num_seqs);
        if (st_emu_engine_check(e, err, sizeof err) != 0)
            fail_msg("step %d: %s", guard, err);
        /* an occasional client disconnect */
        if (guard % 97 == 50 && nrun > 2) {
            uint64_t victim = running[1];
            assert_int_equal(st_emu_abort(e, victim), 0);
            aborted[victim] = 1;
            memmove(&running[1], &running[2], (nrun - 2) * sizeof running[0]);
            nrun--;
            assert_int_equal(st_emu_engine_check(e, err, sizeof err), 0);
        }
        vc.t = r.start + r.duration;
    }
    assert_false(st_emu_has_work(e));
    for (int i = 0; i < NREQ; i++)
        assert_true(done[i] || aborted[i] || rejected[i]);
    st_emu_stats st;
    st_emu_get_stats(e, &st);
    assert_int_equal(st.free_blocks, st.num_blocks); /* nothing leaked */
    assert_true(preemptions > 0);                    /* the pool was small enough to bind */
    assert_int_equal(st.preemptions, preemptions);
    if (mode == 2)
        assert_int_equal(st.prefix_hits, 0);
    else
        assert_true(st.prefix_hits > 0 && st.prefix_hits < st.prefix_queries);
    print_message("%s: %llu preemptions, %llu evictions, %llu prefix hits\n",
                  mode == 0   ? "prompts by their ids"
                  : mode == 1 ? "every other one seeded"
                              : "prefix caching off",
                  (unsigned long long)preemptions, (unsigned long long)st.evictions,
                  (unsigned long long)st.prefix_hits);
    assert_int_equal(st_emu_abort(e, 999999), -1);
    st_emu_engine_free(e);
}

static void randomized_invariants(void **state)
{
    (void)state;
    for (int mode = 0; mode < 3; mode++)
        invariants_run(mode);
}

static void run_to_end(st_emu_engine *e, st_vclock *vc, st_emu_event *last_first)
{
    st_emu_step_result r;
    for (int g = 0; g < 100000 && st_emu_has_work(e); g++) {
        assert_int_equal(st_emu_step(e, &r), 0);
        for (uint32_t k = 0; k < r.n_events; k++)
            if (r.events[k].first && last_first)
                *last_first = r.events[k];
        vc->t = r.start + r.duration;
    }
}

static void prefix_cache_accounting(void **state)
{
    (void)state;
    st_emu_config c;
    emu_small_config(&c, 200, 8, 512);
    st_vclock vc = { 0 };
    st_emu_engine *e;
    char err[512];
    assert_int_equal(st_emu_engine_new(&c, st_clock_virtual(&vc), &e, NULL, err, sizeof err), 0);
    uint32_t a[64], b[64];
    for (int i = 0; i < 64; i++)
        a[i] = b[i] = 5000 + i;
    for (int i = 40; i < 64; i++)
        b[i] = 9000 + i;
    st_emu_event ev;
    st_emu_req_params p = { .id = 1, .ids = a, .n_ids = 64, .max_tokens = 4 };
    assert_int_equal(st_emu_add_request(e, &p, err, sizeof err), 0);
    run_to_end(e, &vc, &ev);
    st_emu_stats s;
    st_emu_get_stats(e, &s);
    assert_int_equal(s.prefix_queries, 64);
    assert_int_equal(s.prefix_hits, 0);
    assert_int_equal(ev.cached_tokens, 0);
    /* same prompt: 3 full blocks hit (the last token is always recomputed) */
    p.id = 2;
    assert_int_equal(st_emu_add_request(e, &p, err, sizeof err), 0);
    run_to_end(e, &vc, &ev);
    st_emu_get_stats(e, &s);
    assert_int_equal(s.prefix_queries, 128);
    assert_int_equal(s.prefix_hits, 48);
    assert_int_equal(ev.cached_tokens, 48);
    /* 40 shared tokens: 2 full blocks */
    p.id = 3;
    p.ids = b;
    assert_int_equal(st_emu_add_request(e, &p, err, sizeof err), 0);
    run_to_end(e, &vc, &ev);
    st_emu_get_stats(e, &s);
    assert_int_equal(s.prefix_hits, 80);
    assert_int_equal(s.prompt_tokens, 192);
    assert_int_equal(s.generation_tokens, 12);
    /* reset: no more hits */
    assert_int_equal(st_emu_reset_prefix_cache(e), 0);
    p.id = 4;
    assert_int_equal(st_emu_add_request(e, &p, err, sizeof err), 0);
    run_to_end(e, &vc, &ev);
    assert_int_equal(ev.cached_tokens, 0);
    /* caching off: queries and hits stay */
    st_emu_engine_free(e);
    c.enable_prefix_caching = 0;
    assert_int_equal(st_emu_engine_new(&c, st_clock_virtual(&vc), &e, NULL, err, sizeof err), 0);
    for (uint64_t id = 10; id < 12; id++) {
        p.id = id;
        assert_int_equal(st_emu_add_request(e, &p, err, sizeof err), 0);
        run_to_end(e, &vc, &ev);
    }
    st_emu_get_stats(e, &s);
    assert_int_equal(s.prefix_hits, 0);
    assert_int_equal(ev.cached_tokens, 0);
    st_emu_engine_free(e);
}

static void blocks_lru_and_refcounts(void **state)
{
    (void)state;
    st_emu_blocks p;
    char err[256];
    assert_int_equal(st_emu_blocks_init(&p, 8, 16), 0);
    uint32_t x[4], y[4];
    assert_int_equal(st_emu_blocks_take(&p, 4, x), 0);
    for (int i = 0; i < 4; i++)
        st_emu_blocks_set_hash(&p, x[i], 100 + i);
    assert_int_equal(st_emu_blocks_lookup(&p, 102), x[2]);
    /* a second user shares block 0 and 1 */
    st_emu_blocks_touch(&p, x[0]);
    st_emu_blocks_touch(&p, x[1]);
    assert_int_equal(st_emu_blocks_ref(&p, x[0]), 2);
    st_emu_blocks_release(&p, x, 4); /* tail first: x3, x2 queued; x0, x1 still referenced */
    assert_int_equal(p.nfree, 6);
    assert_int_equal(st_emu_blocks_check(&p, err, sizeof err), 0);
    st_emu_blocks_release(&p, x, 2);
    assert_int_equal(p.nfree, 8);
    assert_int_equal(st_emu_blocks_reset_cache(&p), 0);
    for (int i = 0; i < 4; i++)
        st_emu_blocks_set_hash(&p, x[i], 100 + i); /* re-register for the eviction check */
    /* 4 never-used blocks come first, then the freed ones in queue order: x3, x2, x1, x0 */
    assert_int_equal(st_emu_blocks_take(&p, 4, y), 0);
    assert_int_equal(st_emu_blocks_lookup(&p, 103), x[3]); /* not evicted yet */
    assert_int_equal(st_emu_blocks_take(&p, 1, y), 0);
    assert_int_equal(y[0], x[3]);
    assert_int_equal(st_emu_blocks_lookup(&p, 103), ST_EMU_NIL); /* evicted */
    assert_int_equal(st_emu_blocks_lookup(&p, 100), x[0]);
    assert_int_equal(st_emu_blocks_take(&p, 4, y), -1);  /* only 3 left */
    assert_int_equal(st_emu_blocks_reset_cache(&p), -1); /* blocks in use */
    assert_int_equal(st_emu_blocks_check(&p, err, sizeof err), 0);
    st_emu_blocks_free(&p);
}

/* An unlisted block (st_emu_blocks_set_unlisted) counts as cached, so its reuse is an eviction, but no
 * lookup finds it until st_emu_blocks_set_hash lists it; a listed block stays as it was. */
static void blocks_unlisted(void **state)
{
    (void)state;
    st_emu_blocks p;
    char err[256];
    assert_int_equal(st_emu_blocks_init(&p, 4, 16), 0);
    uint32_t x[4], y[4];
    assert_int_equal(st_emu_blocks_take(&p, 4, x), 0);
    st_emu_blocks_set_hash(&p, x[0], 100);
    st_emu_blocks_set_unlisted(&p, x[0]); /* listed already: unchanged */
    st_emu_blocks_set_unlisted(&p, x[1]);
    st_emu_blocks_set_unlisted(&p, x[2]);
    st_emu_blocks_set_hash(&p, x[2], 102); /* listed now */
    assert_int_equal(st_emu_blocks_lookup(&p, 100), x[0]);
    assert_int_equal(st_emu_blocks_lookup(&p, 102), x[2]);
    assert_true(st_emu_blocks_has_hash(&p, x[1]));
    assert_false(st_emu_blocks_has_hash(&p, x[3]));
    assert_int_equal(st_emu_blocks_check(&p, err, sizeof err), 0);
    st_emu_blocks_release(&p, x, 4); /* queued x3, x2, x1, x0 */
    assert_int_equal(st_emu_blocks_take(&p, 3, y), 0);
    assert_int_equal(p.evictions, 2); /* x2 (listed) and x1 (unlisted); x3 held no hash */
    assert_int_equal(st_emu_blocks_lookup(&p, 102), ST_EMU_NIL);
    assert_int_equal(st_emu_blocks_lookup(&p, 100), x[0]);
    assert_int_equal(st_emu_blocks_check(&p, err, sizeof err), 0);
    st_emu_blocks_release(&p, y, 3);
    assert_int_equal(st_emu_blocks_reset_cache(&p), 0);
    assert_false(st_emu_blocks_has_hash(&p, x[0]));
    st_emu_blocks_free(&p);
}

static void hash_map_survives_churn(void **state)
{
    (void)state;
    st_emu_blocks p;
    char err[256];
    assert_int_equal(st_emu_blocks_init(&p, 64, 16), 0);
    uint32_t b[64];
    for (int round = 0; round < 200; round++) {
        uint32_t n = 1 + (uint32_t)(round * 7919) % 64;
        assert_int_equal(st_emu_blocks_take(&p, n, b), 0);
        for (uint32_t i = 0; i < n; i++)
            st_emu_blocks_set_hash(&p, b[i], (uint64_t)round * 1000 + i % 5);
        st_emu_blocks_release(&p, b, n);
        if (st_emu_blocks_check(&p, err, sizeof err))
            fail_msg("round %d: %s", round, err);
    }
    st_emu_blocks_free(&p);
}

static void rejects_bad_requests(void **state)
{
    (void)state;
    st_emu_config c;
    emu_small_config(&c, 200, 8, 512);
    st_vclock vc = { 0 };
    st_emu_engine *e;
    char err[512];
    assert_int_equal(st_emu_engine_new(&c, st_clock_virtual(&vc), &e, NULL, err, sizeof err), 0);
    uint32_t ids[2100];
    for (int i = 0; i < 2100; i++)
        ids[i] = 2000 + i;
    st_emu_req_params p = { .id = 1, .ids = ids, .n_ids = 2000, .max_tokens = 100 };
    assert_int_equal(st_emu_add_request(e, &p, err, sizeof err), ST_EMU_ADD_TOO_LONG);
    assert_string_equal(err, "You passed 2000 input tokens and requested 100 output tokens. However, the "
                             "model's context length is only 2048 tokens, resulting in a maximum input "
                             "length of 1948 tokens. Please reduce the length of the input prompt.");
    p.n_ids = 2048;
    p.max_tokens = 0;
    assert_int_equal(st_emu_add_request(e, &p, err, sizeof err), ST_EMU_ADD_TOO_LONG);
    p.n_ids = 0;
    assert_int_equal(st_emu_add_request(e, &p, err, sizeof err), ST_EMU_ADD_INVALID);
    ids[0] = 200000; /* out of the 128256 vocabulary */
    p.n_ids = 10;
    assert_int_equal(st_emu_add_request(e, &p, err, sizeof err), ST_EMU_ADD_INVALID);
    ids[0] = 5;
    p.max_tokens = 0; /* default: up to max_model_len */
    assert_int_equal(st_emu_add_request(e, &p, err, sizeof err), ST_EMU_ADD_OK);

    st_emu_event ev;
    run_to_end(e, &vc, &ev);
    st_emu_stats s;
    st_emu_get_stats(e, &s);
    assert_int_equal(s.generation_tokens, 2038);
    assert_int_equal(s.finished_length, 1);
    st_emu_engine_free(e);
}

/* Two engines of configuration c, each on its own virtual clock (fresh at 0). */
static void engine_pair(const st_emu_config *c, st_vclock *va, st_emu_engine **a, st_vclock *vb, st_emu_engine **b)
{
    char err[512];
    assert_int_equal(st_emu_engine_new(c, st_clock_virtual(va), a, NULL, err, sizeof err), 0);
    assert_int_equal(st_emu_engine_new(c, st_clock_virtual(vb), b, NULL, err, sizeof err), 0);
}

/* Steps engines a and b side by side until both are idle: the same events, due times and counters. */
static void step_alike(st_emu_engine *a, st_vclock *va, st_emu_engine *b, st_vclock *vb)
{
    while (st_emu_has_work(a) || st_emu_has_work(b)) {
        st_emu_step_result ra, rb;
        assert_int_equal(st_emu_step(a, &ra), 0);
        assert_int_equal(st_emu_step(b, &rb), 0);
        assert_int_equal(ra.duration, rb.duration);
        assert_int_equal(ra.n_events, rb.n_events);
        for (uint32_t k = 0; k < ra.n_events; k++) {
            assert_int_equal(ra.events[k].id, rb.events[k].id);
            assert_int_equal(ra.events[k].due, rb.events[k].due);
        }
        va->t = ra.start + ra.duration;
        vb->t = rb.start + rb.duration;
    }
    st_emu_stats sa, sb;
    st_emu_get_stats(a, &sa);
    st_emu_get_stats(b, &sb);
    assert_int_equal(sa.steps, sb.steps);
    assert_int_equal(sa.generation_tokens, sb.generation_tokens);
    assert_int_equal(sa.prefix_queries, sb.prefix_queries);
    assert_int_equal(sa.prefix_hits, sb.prefix_hits);
    assert_int_equal(sa.evictions, sb.evictions);
    assert_int_equal(sa.preemptions, sb.preemptions);
}

/* A seeded prompt needs no ids (one without ids and not seeded is refused as empty), is refused
 * when too long as one with ids is, and runs like its ids, preemptions included: same events,
 * same counters. */
static void seeded_prompts(void **state)
{
    (void)state;
    st_emu_config c;
    emu_small_config(&c, 200, 8, 512);
    st_vclock va = { 0 }, vb = { 0 };
    st_emu_engine *a, *b;
    char err[512];
    engine_pair(&c, &va, &a, &vb, &b);
    st_emu_req_params p = { .id = 1, .n_ids = 300, .max_tokens = 40 };
    assert_int_equal(st_emu_add_request(a, &p, err, sizeof err), ST_EMU_ADD_INVALID);
    p.seeded = 1;
    p.n_ids = 2040;
    assert_int_equal(st_emu_add_request(a, &p, err, sizeof err), ST_EMU_ADD_TOO_LONG);
    static uint32_t ids[8][300]; /* 8 x ~530 tokens in 200 blocks of 16: preemptions */
    for (uint32_t k = 0; k < 8; k++) {
        st_emu_req_params q = { .id = k + 1, .n_ids = 300 - 20 * k, .max_tokens = 300, .arrival = 0 };
        q.seeded = 1;
        q.seed = 77 + k;
        assert_int_equal(st_emu_add_request(a, &q, err, sizeof err), ST_EMU_ADD_OK);
        st_emu_output_tokens(77 + k, 0, q.n_ids, c.model.vocab, ids[k]);
        q.seeded = 0;
        q.ids = ids[k];
        assert_int_equal(st_emu_add_request(b, &q, err, sizeof err), ST_EMU_ADD_OK);
    }
    step_alike(a, &va, b, &vb);
    st_emu_stats sa;
    st_emu_get_stats(a, &sa);
    assert_true(sa.preemptions > 0 && sa.prefix_hits > 0); /* recomputations find their own blocks */
    st_emu_engine_free(a);
    st_emu_engine_free(b);
}

/* Round `round` of keyed_tails: 9 requests with a 100-token shared prefix (a block of 16 holds its
 * last 4 ids and the tail's first 12) and tails of seeds 500 + k (k < 8), sent to a keyed from 100
 * and to b with their ids. The ninth reuses the first's seed after a prefix that differs in id 98
 * only (the block holding it must miss). */
static void keyed_round(st_emu_engine *a, st_emu_engine *b, const st_emu_config *c, int replayed, uint32_t round)
{
    static uint32_t ids[9][400];
    char err[512];
    for (uint32_t k = 0; k < 9; k++) {
        uint32_t n = 400 - 25 * (k % 8);
        st_emu_output_tokens(4242, 0, 100, c->model.vocab, ids[k]); /* the shared prefix */
        if (k == 8)
            ids[k][98] ^= 1;
        st_emu_output_tokens(500 + k % 8, 0, n - 100, c->model.vocab, ids[k] + 100);
        st_emu_req_params q = { .id = round * 100 + k + 1, .n_ids = n, .max_tokens = 250, .arrival = 0 };
        q.ids = ids[k];
        assert_int_equal(st_emu_add_request(b, &q, err, sizeof err), ST_EMU_ADD_OK);
        q.seeded = 1;
        q.seed = 500 + k % 8;
        q.keyed_from = 100;
        q.replayed = replayed;
        assert_int_equal(st_emu_add_request(a, &q, err, sizeof err), ST_EMU_ADD_OK);
    }
}

/* A prompt keyed from a position (st_emu_req_params.keyed_from: a shared prefix's ids, then a tail
 * named by its seed) runs step for step as with all its ids: alone (not replayed: its tail unlisted
 * until a preemption), and replayed in a second round that finds the first round's blocks by their
 * keys as it would by their ids. */
static void keyed_tails(void **state)
{
    (void)state;
    for (int replayed = 0; replayed < 2; replayed++) {
        st_emu_config c;
        emu_small_config(&c, 200, 8, 512);
        st_vclock va = { 0 }, vb = { 0 };
        st_emu_engine *a, *b;
        char err[512];
        engine_pair(&c, &va, &a, &vb, &b);
        st_emu_req_params bad = { .id = 99, .n_ids = 100, .max_tokens = 4, .seeded = 1, .keyed_from = 100 };
        assert_int_equal(st_emu_add_request(a, &bad, err, sizeof err), ST_EMU_ADD_INVALID); /* no ids, no tail */
        keyed_round(a, b, &c, replayed, 0);
        step_alike(a, &va, b, &vb);
        st_emu_stats s1;
        st_emu_get_stats(a, &s1);
        assert_true(s1.preemptions > 0 && s1.prefix_hits >= 8 * 96); /* the prefix's 6 blocks shared */
        if (replayed) {
            keyed_round(a, b, &c, replayed, 1);
            step_alike(a, &va, b, &vb);
            st_emu_stats s2;
            st_emu_get_stats(a, &s2);
            assert_true(s2.prefix_hits - s1.prefix_hits > 9 * 96); /* beyond the prefix: the tails' blocks */
        }
        st_emu_engine_free(a);
        st_emu_engine_free(b);
    }
}

/* The unique prompt ids by multiplication are st_emu_output_token's, for every vocabulary size. */
static void output_tokens_by_multiplication(void **state)
{
    (void)state;
    static const uint32_t vocabs[] = { 2, 7, 1000, 1001, 1024, 32000, 128256, 151936, 1u << 31, UINT32_MAX };
    uint32_t out[700];
    for (size_t v = 0; v < sizeof vocabs / sizeof *vocabs; v++)
        for (uint64_t id = 0; id < 40; id++) {
            uint64_t rid = id * 0x100000001b3ULL + (id << 60);
            uint32_t from = (uint32_t)(id * 37);
            st_emu_output_tokens(rid, from, 700, vocabs[v], out);
            for (uint32_t k = 0; k < 700; k++)
                if (out[k] != st_emu_output_token(rid, from + k, vocabs[v]))
                    fail_msg("vocab %u, id %llu, token %u: %u, expected %u", vocabs[v], (unsigned long long)rid,
                             from + k, out[k], st_emu_output_token(rid, from + k, vocabs[v]));
        }
}

/* The steps at which B is admitted and A finishes, A (480-token prompt, 30 blocks) added before B
 * (400 tokens, 25 blocks) on a pool of about 50 blocks and a 128-token budget. */
static void full_isl_run(uint32_t version, int *b_admitted, int *a_finished)
{
    st_emu_config c;
    emu_small_config(&c, 40, 8, 128);
    c.max_model_len = 512; /* one such sequence fits the pool: the engine starts */
    c.vllm_version = version;
    st_vclock vc = { 0 };
    st_emu_engine *e;
    char err[512];
    assert_int_equal(st_emu_engine_new(&c, st_clock_virtual(&vc), &e, NULL, err, sizeof err), 0);
    uint32_t ida[480], idb[400]; /* no prefix block in common */
    for (uint32_t i = 0; i < 480; i++) {
        ida[i] = 3000 + i;
        if (i < 400)
            idb[i] = 20000 + i;
    }
    st_emu_req_params a = { .id = 1, .ids = ida, .n_ids = 480, .max_tokens = 20 };
    st_emu_req_params b = { .id = 2, .ids = idb, .n_ids = 400, .max_tokens = 4 };
    assert_int_equal(st_emu_add_request(e, &a, err, sizeof err), 0);
    st_emu_stats st;
    st_emu_get_stats(e, &st);
    /* beside A's prompt (30 blocks) B's first chunk (8) fits, its whole prompt (25) does not */
    assert_true(st.num_blocks >= 30 + 8 && st.num_blocks < 30 + 25);
    assert_int_equal(st_emu_add_request(e, &b, err, sizeof err), 0);
    *b_admitted = *a_finished = -1;
    st_emu_step_result r;
    for (int g = 0; g < 10000 && st_emu_has_work(e); g++) {
        assert_int_equal(st_emu_step(e, &r), 0);
        for (uint32_t k = 0; k < r.n_admitted; k++)
            if (r.admitted[k] == 2 && *b_admitted < 0)
                *b_admitted = g;
        for (uint32_t k = 0; k < r.n_events; k++)
            if (r.events[k].id == 1 && r.events[k].finish)
                *a_finished = g;
        vc.t = r.start + r.duration;
    }
    assert_true(*b_admitted >= 0 && *a_finished >= 0);
    st_emu_engine_free(e);
}

/* vLLM admits a waiting request when its first chunk's blocks are free; from
 * EMU_VLLM_FULL_ISL_VERSION on only when all of its prompt's are (allocate_slots,
 * full_sequence_must_fit). B's first chunk (8 blocks) fits beside A's 30 blocks, its whole
 * prompt (25) does not: before the switch B joins while A runs, after it B waits for A. */
static void full_isl_admission(void **state)
{
    (void)state;
    int b_adm, a_fin;
    full_isl_run(EMU_VLLM_FULL_ISL_VERSION - 100, &b_adm, &a_fin);
    assert_true(b_adm < a_fin); /* the first chunk fits: admitted beside A */
    full_isl_run(EMU_VLLM_FULL_ISL_VERSION, &b_adm, &a_fin);
    assert_true(b_adm > a_fin); /* the whole prompt does not: it waits for A's blocks */
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(output_tokens_by_multiplication),
        cmocka_unit_test(randomized_invariants),
        cmocka_unit_test(prefix_cache_accounting),
        cmocka_unit_test(blocks_lru_and_refcounts),
        cmocka_unit_test(hash_map_survives_churn),
        cmocka_unit_test(rejects_bad_requests),
        cmocka_unit_test(seeded_prompts),
        cmocka_unit_test(keyed_tails),
        cmocka_unit_test(blocks_unlisted),
        cmocka_unit_test(full_isl_admission),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
