/* load/wlcache: a workload is made once per key, handed out read-only and equal to a fresh one;
 * the least recently used ones nobody holds leave when the budget is spent, held ones never. */
#include "harness.h"

#include <stdio.h>

#include "load/wlcache.h"
#include "load/workload.h"

typedef struct maker {
    st_synth_params p;
    uint64_t key[2]; /* seed and count: what sets these workloads apart */
    int calls;
} maker;

static int make(void *arg, st_workload *w, char *err, size_t errlen)
{
    maker *m = arg;
    m->calls++;
    return st_workload_synthetic(&m->p, w, err, errlen);
}

static maker maker_of(uint64_t seed, uint32_t n)
{
    maker m = { .p = { .input_len = 300,
                       .output_len = 50,
                       .range_ratio = 0.2,
                       .prefix_len = 100,
                       .num_requests = n,
                       .seed = seed,
                       .vocab_size = 5000 },
                .key = { seed, n } };
    return m;
}

static void same_as_fresh(const st_workload *got, const st_synth_params *p)
{
    st_workload fresh;
    char err[256];
    assert_int_equal(st_workload_synthetic(p, &fresh, err, sizeof err), 0);
    assert_int_equal(got->n, fresh.n);
    for (uint32_t i = 0; i < fresh.n; i++) {
        assert_int_equal(got->items[i].input_len, fresh.items[i].input_len);
        assert_int_equal(got->items[i].output_len, fresh.items[i].output_len);
        assert_memory_equal(got->items[i].input_ids, fresh.items[i].input_ids,
                            sizeof(uint32_t) * fresh.items[i].input_len);
    }
    st_workload_free(&fresh);
}

/* One key: made once, the same workload twice, equal to a fresh one; another key: its own. */
static void made_once_per_key(void **state)
{
    (void)state;
    st_wlcache *c = st_wlcache_new(0);
    assert_non_null(c);
    char err[256];
    maker a = maker_of(7, 40), b = maker_of(8, 40);
    const st_workload *w1 = st_wlcache_get(c, a.key, sizeof a.key, make, &a, err, sizeof err);
    const st_workload *w2 = st_wlcache_get(c, a.key, sizeof a.key, make, &a, err, sizeof err);
    assert_non_null(w1);
    assert_ptr_equal(w1, w2);
    assert_int_equal(a.calls, 1);
    same_as_fresh(w1, &a.p);
    const st_workload *w3 = st_wlcache_get(c, b.key, sizeof b.key, make, &b, err, sizeof err);
    assert_non_null(w3);
    assert_true(w3 != w1);
    assert_int_equal(b.calls, 1);
    same_as_fresh(w3, &b.p);
    uint64_t hits, made;
    st_wlcache_counts(c, &hits, &made);
    assert_int_equal(hits, 1);
    assert_int_equal(made, 2);
    st_wlcache_put(c, w1);
    st_wlcache_put(c, w2);
    st_wlcache_put(c, w3);
    /* a key longer than the cache takes is refused, not truncated */
    char big[ST_WLCACHE_KEY_MAX + 1] = { 0 };
    assert_null(st_wlcache_get(c, big, sizeof big, make, &a, err, sizeof err));
    assert_non_null(strstr(err, "key"));
    st_wlcache_free(c);
}

/* A budget smaller than one workload: a held one stays (readable), a given-back one is dropped
 * and made again on the next ask. */
static void budget_drops_only_unheld(void **state)
{
    (void)state;
    st_wlcache *c = st_wlcache_new(1);
    char err[256];
    maker a = maker_of(1, 30), b = maker_of(2, 30);
    const st_workload *wa = st_wlcache_get(c, a.key, sizeof a.key, make, &a, err, sizeof err);
    const st_workload *wb = st_wlcache_get(c, b.key, sizeof b.key, make, &b, err, sizeof err);
    assert_non_null(wa);
    assert_non_null(wb);
    same_as_fresh(wa, &a.p); /* still there while held, over budget or not */
    st_wlcache_put(c, wa);
    const st_workload *again = st_wlcache_get(c, a.key, sizeof a.key, make, &a, err, sizeof err);
    assert_non_null(again);
    assert_int_equal(a.calls, 2); /* dropped when given back: made again */
    same_as_fresh(again, &a.p);
    same_as_fresh(wb, &b.p);
    st_wlcache_put(c, again);
    st_wlcache_put(c, wb);
    /* a budget that holds both: the second ask of each is a hit */
    st_wlcache_free(c);
    c = st_wlcache_new((size_t)64 << 20);
    a.calls = b.calls = 0;
    for (int round = 0; round < 2; round++) {
        st_wlcache_put(c, st_wlcache_get(c, a.key, sizeof a.key, make, &a, err, sizeof err));
        st_wlcache_put(c, st_wlcache_get(c, b.key, sizeof b.key, make, &b, err, sizeof err));
    }
    assert_int_equal(a.calls, 1);
    assert_int_equal(b.calls, 1);
    st_wlcache_free(c);
}

static int fail_make(void *arg, st_workload *w, char *err, size_t errlen)
{
    (void)arg;
    (void)w;
    snprintf(err, errlen, "cannot make it");
    return -1;
}

/* A workload that cannot be made: NULL with the maker's reason, nothing cached. */
static void failure_is_not_cached(void **state)
{
    (void)state;
    st_wlcache *c = st_wlcache_new(0);
    char err[256] = "";
    int key = 3;
    assert_null(st_wlcache_get(c, &key, sizeof key, fail_make, NULL, err, sizeof err));
    assert_string_equal(err, "cannot make it");
    uint64_t hits, made;
    st_wlcache_counts(c, &hits, &made);
    assert_int_equal(hits + made, 0);
    st_wlcache_free(c);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(made_once_per_key),
        cmocka_unit_test(budget_drops_only_unheld),
        cmocka_unit_test(failure_is_not_cached),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
