/* The per-request record's token events (load/record.h): held as segments, read through one
 * iterator. Events appended one at a time (the HTTP runner, the store's reader) come back exactly;
 * times fitted into segments (the engine model's runs of steps) come back within the tolerance
 * asked; truncation, scaling, random access and the join of short segments; references into a
 * shared step timeline (st_tok_chunk): joins, copies, views and the order of freeing. */
#include "harness.h"

#include <stdatomic.h>

#include "core/rng.h"
#include "load/record.h"

/* Every event of r against want[0..n) within tol ns. */
static void expect_events(const st_record *r, const st_ns *want, uint32_t n, st_ns tol)
{
    assert_int_equal(r->n_events, n);
    st_event_it it;
    st_ns t;
    uint32_t k = 0;
    st_events_begin(&it, r);
    while (st_events_next(&it, &t)) {
        assert_true(k < n);
        if (llabs(t - want[k]) > tol)
            fail_msg("event %u at %lld, expected %lld (tolerance %lld)", k, (long long)t, (long long)want[k],
                     (long long)tol);
        assert_int_equal(st_record_event(r, k), t);
        k++;
    }
    assert_int_equal(k, n);
    assert_int_equal(st_record_event(r, n), -1);
    assert_int_equal(st_record_last_event(r), n ? st_record_event(r, n - 1) : -1);
}

/* Jittered real-stream times appended one by one are kept exactly, three to a segment at most
 * when they do not lie on one curve. */
static void added_events_exact(void **state)
{
    (void)state;
    st_rng g;
    st_rng_seed(&g, 7);
    enum { N = 5000 };
    static st_ns t[N];
    st_record r;
    st_record_init(&r, 0);
    st_ns now = 1000;
    for (uint32_t i = 0; i < N; i++) {
        now += 1 + (st_ns)(st_rng_next(&g) % 40000000u); /* up to 40 ms apart */
        if (i % 100 == 50)
            now += 3000000000LL; /* a stall */
        t[i] = now;
        assert_int_equal(st_record_add_event(&r, t[i]), 0);
    }
    expect_events(&r, t, N, 0);
    assert_true(r.n_segs <= N / 2 + 1); /* two or three events a segment */
    st_record_free(&r);
    /* equal intervals: one segment */
    st_record_init(&r, 1);
    for (uint32_t i = 0; i < 1000; i++) {
        t[i] = 5000 + 12345 * (st_ns)i;
        assert_int_equal(st_record_add_event(&r, t[i]), 0);
    }
    expect_events(&r, t, 1000, 0);
    assert_int_equal(r.n_segs, 1);
    st_record_free(&r);
}

/* A run of steps whose interval grows evenly (whole ns, truncated as the step times are) fits in
 * few segments within the tolerance, exactly with tolerance 0; segments appended with an offset. */
static void fitted_runs(void **state)
{
    (void)state;
    enum { N = 3000 };
    static st_ns t[N];
    static st_tok_seg seg[N];
    double x = 0;
    for (uint32_t i = 0; i < N; i++) {
        t[i] = 2000000 + (st_ns)x;
        x += 9.87654e6 + 3.3 * i; /* the interval grows by 3.3 ns a step */
    }
    uint32_t n100 = st_tok_segs_fit(t, N, 100, seg);
    assert_true(n100 >= 1 && n100 <= 8);
    st_record r;
    st_record_init(&r, 0);
    assert_int_equal(st_record_add_segs(&r, seg, n100, 0), 0);
    expect_events(&r, t, N, 100);
    st_record_free(&r);
    uint32_t n0 = st_tok_segs_fit(t, N, 0, seg);
    assert_true(n0 >= n100);
    st_record_init(&r, 0);
    assert_int_equal(st_record_add_segs(&r, seg, n0, 0), 0);
    expect_events(&r, t, N, 0);
    /* the same run shifted by 7 us after it: the last segment and the new ones */
    static st_ns t2[2 * N];
    for (uint32_t i = 0; i < N; i++) {
        t2[i] = t[i];
        t2[N + i] = t[i] + t[N - 1] + 7000;
    }
    assert_int_equal(st_record_add_segs(&r, seg, n0, t[N - 1] + 7000), 0);
    expect_events(&r, t2, 2 * N, 0);
    st_record_free(&r);
}

/* Short pieces (single steps between runs) join into three-event segments, still exact. */
static void short_pieces_join(void **state)
{
    (void)state;
    st_ns t[] = { 100, 250, 420, 1000, 1900, 2000, 2150, 2151, 9000 };
    st_tok_seg one;
    st_record r;
    st_record_init(&r, 0);
    assert_int_equal(st_record_add_event(&r, t[0]), 0);
    for (uint32_t i = 1; i < 9; i++) {
        if (i % 2) {
            assert_int_equal(st_tok_segs_fit(&t[i], 1, 0, &one), 1);
            assert_int_equal(st_record_add_segs(&r, &one, 1, 0), 0);
        } else {
            assert_int_equal(st_record_add_event(&r, t[i]), 0);
        }
    }
    expect_events(&r, t, 9, 0);
    assert_int_equal(r.n_segs, 3);
    st_record_free(&r);
}

/* Truncation keeps the first n events and leaves the segments themselves alone (a view's copy);
 * scaling multiplies every time. */
static void truncate_and_scale(void **state)
{
    (void)state;
    enum { N = 200 };
    st_ns t[N];
    st_tok_seg seg[N];
    for (uint32_t i = 0; i < N; i++)
        t[i] = 1000000 + 20000000 * (st_ns)i + 40 * (st_ns)i * i;
    uint32_t ns = st_tok_segs_fit(t, N, 0, seg);
    st_record r;
    st_record_init(&r, 0);
    assert_int_equal(st_record_add_segs(&r, seg, ns, 0), 0);
    st_record view = r;
    st_record_truncate_events(&view, 1);
    expect_events(&view, t, 1, 0);
    view = r;
    st_record_truncate_events(&view, 0);
    expect_events(&view, t, 0, 0);
    expect_events(&r, t, N, 0); /* the original untouched */
    st_record_scale_events(&r, 2.5);
    st_ns s[N];
    for (uint32_t i = 0; i < N; i++)
        s[i] = llround(t[i] * 2.5);
    expect_events(&r, s, N, 2);
    st_record_free(&r);
    st_record_init(&r, 0); /* no events */
    expect_events(&r, t, 0, 0);
    st_record_free(&r);
}

static uint32_t refs(const st_tok_chunk *c) { return atomic_load(&((st_tok_chunk *)c)->refs); }

/* References into a shared timeline: a record that follows it with one offset holds one segment,
 * a new offset or a gap starts another, each segment holds its chunk; copies (st_record_add_segs)
 * take their own references, a shallow copy is cut without touching the original, a scale goes with
 * the reference and not into the shared times, and the chunk outlives its creator's reference until
 * the last record is freed, in either order. */
static void timeline_references(void **state)
{
    (void)state;
    enum { N = 1000 };
    /* the chunk's times: a run on one curve (one segment), then times on none (short segments) */
    static st_ns ct[N];
    static st_tok_seg fit[N];
    for (uint32_t i = 0; i < N; i++)
        ct[i] = 5000000 + 7000000 * (st_ns)i + (i < 500 ? 40 * (st_ns)i * i : ((st_ns)i * i) % 13);
    uint32_t nf = st_tok_segs_fit(ct, 500, 0, fit);
    assert_int_equal(nf, 1);
    nf += st_tok_segs_fit(ct + 500, N - 500, 0, fit + 1);
    assert_true(nf > 100);
    st_tok_chunk *c = st_tok_chunk_new(nf);
    assert_non_null(c);
    for (uint32_t i = 0, e = 0; i < nf; e += fit[i++].n)
        assert_int_equal(st_tok_chunk_add(c, &fit[i]), e);
    assert_int_equal(c->n_ev, N);
    st_record a, b;
    st_record_init(&a, 0);
    st_record_init(&b, 1);
    st_ns want[N + 1];
    uint32_t m = 0;
    /* events 0..100 and 100..600 with offset 50 (from inside the chunk's first segment into its short
     * ones): one segment */
    assert_int_equal(st_record_add_timeline(&a, c, 0, 100, 50), 0);
    assert_int_equal(st_record_add_timeline(&a, c, 100, 500, 50), 0);
    assert_int_equal(a.n_segs, 1);
    for (uint32_t i = 0; i < 600; i++)
        want[m++] = ct[i] + 50;
    /* another offset, then a gap (a preemption): two more */
    assert_int_equal(st_record_add_timeline(&a, c, 600, 100, -70), 0);
    for (uint32_t i = 600; i < 700; i++)
        want[m++] = ct[i] - 70;
    assert_int_equal(st_record_add_timeline(&a, c, 800, 10, -70), 0);
    for (uint32_t i = 800; i < 810; i++)
        want[m++] = ct[i] - 70;
    assert_int_equal(a.n_segs, 3);
    assert_int_equal(st_record_add_timeline(&a, c, 810, 0, -70), 0); /* nothing */
    assert_int_equal(st_record_add_event(&a, ct[900] + 3), 0);       /* a formula after a reference */
    want[m++] = ct[900] + 3;
    assert_int_equal(a.n_segs, 4);
    expect_events(&a, want, m, 0);
    assert_int_equal(refs(c), 4); /* the creator's and a's three references */

    /* a copy shifted by 1 ms takes its own references */
    assert_int_equal(st_record_add_segs(&b, a.segs, a.n_segs, 1000000), 0);
    assert_int_equal(refs(c), 7);
    st_ns wb[N + 1];
    for (uint32_t i = 0; i < m; i++)
        wb[i] = want[i] + 1000000;
    expect_events(&b, wb, m, 0);

    /* a shallow copy cut inside the first reference: the original untouched, no reference taken */
    st_record view = a;
    st_record_truncate_events(&view, 550);
    expect_events(&view, want, 550, 0);
    expect_events(&a, want, m, 0);
    assert_int_equal(refs(c), 7);

    /* a scale goes with b's references: a (the same chunk) keeps its times */
    st_record_scale_events(&b, 2.5);
    for (uint32_t i = 0; i < m; i++)
        wb[i] = llround((double)wb[i] * 2.5);
    expect_events(&b, wb, m, 1);
    expect_events(&a, want, m, 0);

    /* the creator lets go first: the records still read the chunk; then a, then b frees it */
    st_tok_chunk_unref(c);
    assert_int_equal(refs(c), 6);
    st_record_free(&a);
    assert_int_equal(refs(c), 3);
    expect_events(&b, wb, m, 1);
    st_record_free(&b); /* the last reference: freed (the address sanitizer build checks no leak) */

    /* the other order: records freed first, the creator's reference last */
    st_tok_chunk *d = st_tok_chunk_new(4);
    assert_non_null(d);
    st_tok_seg two = { .t0 = 10, .d = 10, .n = 2 };
    assert_int_equal(st_tok_chunk_add(d, &two), 0);
    st_record_init(&a, 0);
    assert_int_equal(st_record_add_timeline(&a, d, 0, 2, 0), 0);
    assert_int_equal(refs(d), 2);
    st_record_free(&a);
    assert_int_equal(refs(d), 1);
    st_tok_chunk_unref(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(added_events_exact),  cmocka_unit_test(fitted_runs),
        cmocka_unit_test(short_pieces_join),   cmocka_unit_test(truncate_and_scale),
        cmocka_unit_test(timeline_references),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
