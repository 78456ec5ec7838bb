/* The KV block pool's anonymous blocks (emu/blocks.h): a pool whose holders keep some blocks
 * anonymously gives the same free counts, evictions and lookups as one in which every block is named
 * (each anonymous block there a named one registered unlisted), over random takes, registrations,
 * listings (a preemption), releases and prefix hits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/rng.h"
#include "emu/blocks.h"

enum { HOLDERS = 12, MAXB = 64, POOL = 300 };

/* One holder of blocks in both pools: in A its first `named` blocks are labels (la), the rest of its n
 * anonymous; in B all n are labels (lb). Its first `full` blocks are registered: hashed (listed) below
 * `listed`, unlisted from there on. */
typedef struct holder {
    int live, anon_kind;
    uint32_t n, named, full, listed;
    uint32_t la[MAXB], lb[MAXB];
    uint64_t key[MAXB];
} holder;

typedef struct pools {
    st_emu_blocks a, b;
    holder h[HOLDERS];
    uint64_t keys[4096]; /* every hash registered so far */
    uint32_t n_keys;
    uint64_t gen;
} pools;

static void alike(pools *P, const char *after)
{
    char err[256];
    if (st_emu_blocks_check(&P->a, err, sizeof err) < 0 || st_emu_blocks_check(&P->b, err, sizeof err) < 0)
        fail_msg("after %s: %s", after, err);
    if (P->a.nfree != P->b.nfree || P->a.evictions != P->b.evictions || P->a.mcount != P->b.mcount)
        fail_msg("after %s: free %u / %u, evictions %llu / %llu, cached %llu / %llu", after, P->a.nfree, P->b.nfree,
                 (unsigned long long)P->a.evictions, (unsigned long long)P->b.evictions,
                 (unsigned long long)P->a.mcount, (unsigned long long)P->b.mcount);
    for (uint32_t i = 0; i < P->n_keys; i++)
        if ((st_emu_blocks_lookup(&P->a, P->keys[i]) == ST_EMU_NIL) !=
            (st_emu_blocks_lookup(&P->b, P->keys[i]) == ST_EMU_NIL))
            fail_msg("after %s: hash %u cached in one pool only", after, i);
}

/* Holder x takes k more blocks (named below its anonymous part, as the engine does). */
static int take(pools *P, holder *x, uint32_t k)
{
    if (k > P->b.nfree || x->n + k > MAXB)
        return 0;
    uint32_t named = x->anon_kind ? 0 : k;
    if (x->anon_kind && x->n == x->named && x->n < 2) /* a named head (a shared prefix), then anonymous */
        named = 2 - x->n < k ? 2 - x->n : k;
    assert_int_equal(st_emu_blocks_take(&P->b, k, x->lb + x->n), 0);
    if (named)
        assert_int_equal(st_emu_blocks_take(&P->a, named, x->la + x->named), 0);
    if (k > named)
        assert_int_equal(st_emu_blocks_take_anon(&P->a, k - named), 0);
    x->named += named;
    x->n += k;
    return 1;
}

/* Holder x registers its blocks up to `upto`: listed while named in A (a fresh hash each), unlisted after. */
static void reg(pools *P, holder *x, uint32_t upto)
{
    for (uint32_t j = x->full; j < upto && j < x->n; j++) {
        if (j < x->named && P->n_keys < 4096) {
            x->key[j] = st_mix64(++P->gen) | 1;
            P->keys[P->n_keys++] = x->key[j];
            st_emu_blocks_set_hash(&P->a, x->la[j], x->key[j]);
            st_emu_blocks_set_hash(&P->b, x->lb[j], x->key[j]);
            x->listed = j + 1;
        } else {
            if (j < x->named)
                st_emu_blocks_set_unlisted(&P->a, x->la[j]);
            st_emu_blocks_set_unlisted(&P->b, x->lb[j]);
        }
        x->full = j + 1;
    }
}

/* A preemption: holder x's registered anonymous blocks named in A, and all its unlisted ones listed. */
static void list_all(pools *P, holder *x)
{
    if (x->full > x->named) {
        assert_int_equal(st_emu_blocks_name(&P->a, x->full - x->named, x->la + x->named), 0);
        x->named = x->full;
    }
    for (uint32_t j = x->listed; j < x->full && P->n_keys < 4096; j++) {
        x->key[j] = st_mix64(++P->gen) | 1;
        P->keys[P->n_keys++] = x->key[j];
        st_emu_blocks_set_hash(&P->a, x->la[j], x->key[j]);
        st_emu_blocks_set_hash(&P->b, x->lb[j], x->key[j]);
        x->listed = j + 1;
    }
}

static void release(pools *P, holder *x)
{
    uint32_t anon = x->n - x->named, full = x->full > x->named ? x->full - x->named : 0;
    st_emu_blocks_release_anon(&P->a, anon - full, full);
    st_emu_blocks_release(&P->a, x->la, x->named);
    st_emu_blocks_release(&P->b, x->lb, x->n);
    memset(x, 0, sizeof *x);
}

/* A new holder x looks up the leading listed blocks of a released (or live) holder's hashes, as a prompt
 * with the same prefix does, and takes those it finds. */
static void hit(pools *P, holder *x, const holder *src)
{
    for (uint32_t j = 0; j < src->listed && x->n < MAXB; j++) {
        uint32_t ba = st_emu_blocks_lookup(&P->a, src->key[j]), bb = st_emu_blocks_lookup(&P->b, src->key[j]);
        assert_int_equal(ba == ST_EMU_NIL, bb == ST_EMU_NIL);
        if (ba == ST_EMU_NIL)
            break;
        st_emu_blocks_touch(&P->a, ba);
        st_emu_blocks_touch(&P->b, bb);
        x->la[x->named++] = ba;
        x->lb[x->n++] = bb;
        x->key[j] = src->key[j];
        x->full = x->listed = j + 1;
    }
}

static void random_operations(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        pools *P = calloc(1, sizeof *P);
        assert_non_null(P);
        assert_int_equal(st_emu_blocks_init(&P->a, POOL, 16), 0);
        assert_int_equal(st_emu_blocks_init(&P->b, POOL, 16), 0);
        uint64_t rng = seed * 0x9e3779b97f4a7c15ULL;
        holder last = { 0 }; /* the last released holder's hashes, for hits */
        for (int op = 0; op < 600; op++) {
            uint64_t r = st_mix64(rng += 0x632be59bd9b4e019ULL);
            holder *x = &P->h[r % HOLDERS];
            uint32_t what = (uint32_t)(r >> 8) % 10, k = 1 + (uint32_t)(r >> 16) % 20;
            if (!x->live) { /* admission: hits first (a named holder), then its blocks */
                x->live = 1;
                x->anon_kind = (r >> 24) % 3 != 0;
                if (!x->anon_kind && (r >> 28) % 2)
                    hit(P, x, &last);
                if (!take(P, x, k))
                    x->live = x->n > 0;
                reg(P, x, x->n - 1);
            } else if (what < 5) {
                take(P, x, 1 + k % 3);
                reg(P, x, x->n - 1);
            } else if (what < 6) {
                list_all(P, x);
                last = *x;
                release(P, x);
            } else {
                reg(P, x, x->n);
                if (x->listed)
                    last = *x;
                release(P, x);
            }
            alike(P, "an operation");
        }
        for (int i = 0; i < HOLDERS; i++)
            if (P->h[i].live)
                release(P, &P->h[i]);
        alike(P, "the last release");
        assert_int_equal(P->a.nfree, POOL);
        assert_true(P->a.evictions > 0);
        assert_true(P->a.used < P->b.used); /* fewer labels given out */
        st_emu_blocks_free(&P->a);
        st_emu_blocks_free(&P->b);
        free(P);
    }
}

/* Runs of anonymous blocks keep their place among named blocks: a take pops whichever is older, and
 * a full run's reuse counts as evictions, an open one's not. */
static void runs_keep_their_place(void **state)
{
    (void)state;
    st_emu_blocks p;
    char err[256];
    assert_int_equal(st_emu_blocks_init(&p, 10, 16), 0);
    uint32_t x[4];
    assert_int_equal(st_emu_blocks_take_anon(&p, 4), 0); /* from the blocks never taken */
    assert_int_equal(st_emu_blocks_take(&p, 2, x), 0);
    st_emu_blocks_set_hash(&p, x[0], 7);
    assert_int_equal(p.nfree, 4);
    st_emu_blocks_release_anon(&p, 1, 3); /* queue: 4 never taken, 1 open, 3 full */
    st_emu_blocks_release(&p, x, 2);      /* then x[1], x[0] (hash 7) */
    assert_int_equal(st_emu_blocks_check(&p, err, sizeof err), 0);
    assert_int_equal(p.nfree, 10);
    assert_int_equal(st_emu_blocks_take_anon(&p, 5), 0); /* the 4 never taken and the open one */
    assert_int_equal(p.evictions, 0);
    assert_int_equal(st_emu_blocks_take_anon(&p, 3), 0); /* the full run */
    assert_int_equal(p.evictions, 3);
    assert_int_not_equal(st_emu_blocks_lookup(&p, 7), ST_EMU_NIL);
    assert_int_equal(st_emu_blocks_take(&p, 2, x), 0); /* x[1], then x[0]: its hash evicted */
    assert_int_equal(st_emu_blocks_lookup(&p, 7), ST_EMU_NIL);
    assert_int_equal(p.evictions, 4);
    assert_int_equal(st_emu_blocks_take_anon(&p, 1), -1); /* none left */
    assert_int_equal(st_emu_blocks_check(&p, err, sizeof err), 0);
    st_emu_blocks_release(&p, x, 2);
    st_emu_blocks_release_anon(&p, 8, 0);
    assert_int_equal(p.nfree, 10);
    assert_int_equal(st_emu_blocks_check(&p, err, sizeof err), 0);
    assert_int_equal(st_emu_blocks_reset_cache(&p), 0);
    st_emu_blocks_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(runs_keep_their_place),
        cmocka_unit_test(random_operations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
