/* audit/sustain: the sustained run's controller and verdict on synthetic runs whose answer is
 * known: an M/M/1 queue (tests/oracle_queue.h) below its service rate is sustained with its
 * window measured; above it, over-saturated with the reason in words; a bound too short for a
 * window is undecided, never a pass; a missed SLO is called; the stored summary reads back. */
#include "harness.h"

#include <stdio.h>

#include "audit/sustain.h"
#include "load/arrival.h"
#include "oracle_queue.h"

#define MAXN 20000

typedef struct synth {
    st_record rec[MAXN];
    st_record view[MAXN];
    uint32_t n;
} synth;

/* n Poisson arrivals at lam through an M/M/1 queue of rate mu (one token at the departure). */
static void make_run(synth *s, double lam, double mu, uint32_t n, uint64_t seed)
{
    st_ns *sched = malloc(sizeof *sched * n);
    st_arrival a = { .kind = ST_ARR_POISSON, .rate = lam, .burstiness = 1, .seed = seed };
    assert_int_equal(st_arrival_schedule(&a, n, sched), 0);
    oracle_queue q;
    oracle_queue_init(&q, mu, seed * 7 + 1);
    for (uint32_t i = 0; i < n; i++) {
        st_record *r = &s->rec[i];
        st_record_init(r, i);
        r->scheduled = r->sent = sched[i];
        st_ns d = (st_ns)llround(oracle_queue_depart(&q, st_ns_to_s(sched[i])) * 1e9);
        r->first_byte = r->first_token = d;
        r->end = d + 1000;
        st_record_add_event(r, d);
        st_record_add_event(r, d + 1000);
        r->output_requested = r->output_tokens = 2;
    }
    s->n = n;
    free(sched);
}

static void free_run(synth *s)
{
    for (uint32_t i = 0; i < s->n; i++)
        st_record_free(&s->rec[i]);
}

/* Ticks the controller every second of the run until it stops, with the metric samples taken up
 * to each tick (sm: t ascending, may be NULL); then marks what it cut off and judges the run.
 * Returns the stop time (s). */
static double drive_with(synth *s, st_sustain *c, st_sustain_result *res, const st_metrics_sample *sm, uint32_t nsm)
{
    st_ns t = 0, horizon = s->rec[s->n - 1].end;
    int stopped = 0;
    for (t = ST_NS_PER_S; t <= horizon + ST_NS_PER_S && !stopped; t += ST_NS_PER_S) {
        for (uint32_t i = 0; i < s->n; i++) {
            st_record *v = &s->view[i];
            *v = s->rec[i];
            if (v->scheduled > t)
                v->sent = v->first_token = v->first_byte = v->end = -1;
            if (v->first_token > t)
                v->first_token = v->first_byte = -1;
            if (v->end > t)
                v->end = -1;
        }
        uint32_t k = 0;
        while (k < nsm && sm[k].t <= st_ns_to_s(t))
            k++;
        stopped = st_sustain_step(c, s->view, s->n, t, 1.0, sm, k);
    }
    double stop = st_ns_to_s(t - ST_NS_PER_S);
    /* what the stop cut off: aborted (in flight) or never sent */
    for (uint32_t i = 0; i < s->n; i++) {
        st_record *r = &s->rec[i];
        st_ns ts = t - ST_NS_PER_S;
        if (r->scheduled > ts) {
            r->sent = r->first_token = r->first_byte = r->end = -1;
            r->status = ST_REQ_ABORTED;
        } else if (r->end > ts) {
            if (r->first_token > ts)
                r->first_token = r->first_byte = -1;
            r->end = ts;
            r->status = ST_REQ_ABORTED;
        }
    }
    assert_int_equal(st_sustain_finish(c, s->rec, s->n, sm, nsm, res), 0);
    return stop;
}

static double drive(synth *s, st_sustain *c, st_sustain_result *res) { return drive_with(s, c, res, NULL, 0); }

static st_audit_slo slo_of(double ttft_ms)
{
    st_audit_slo s = { .n = 2 };
    s.terms[0] = (st_slo_term){ ST_SLO_TTFT, 95, ttft_ms };
    s.terms[1] = (st_slo_term){ ST_SLO_TPOT, 95, 1e6 };
    return s;
}

static st_sustain_params params(const st_audit_slo *slo, double lam, uint32_t n)
{
    return (st_sustain_params){ .slo = slo,
                                .offered_rps = lam,
                                .max_duration_s = 600,
                                .min_window_s = 30,
                                .min_window_requests = 300,
                                .warmup_e2e = 2,
                                .confidence = 0.95,
                                .planned = n,
                                .early_stop = 1 };
}

/* mu 10, lam 5: p95 sojourn ln(20)/5 = 0.6 s; with a 1 s limit, sustained. */
static void steady_queue_is_sustained(void **state)
{
    (void)state;
    synth *s = calloc(1, sizeof *s);
    st_audit_slo slo = slo_of(1000);
    make_run(s, 5, 10, 8000, 11);
    st_sustain_params p = params(&slo, 5, s->n);
    p.min_window_requests = 2500; /* M/M/1 latencies are strongly correlated: a long window */
    st_sustain c;
    st_sustain_init(&c, &p);
    st_sustain_result r;
    double stop = drive(s, &c, &r);
    assert_int_equal(r.verdict, ST_VERDICT_PASS);
    assert_true(isfinite(r.window_start_s) && isfinite(r.window_end_s));
    assert_true(r.window_end_s - r.window_start_s >= 30);
    assert_true(r.window_requests >= 2500);
    assert_int_equal(r.window_completed, r.window_requests);
    assert_true(stop < 600);
    assert_false(r.grows_inflight || r.grows_ttft);
    /* delivered = offered within its interval */
    assert_true(r.delivered_lo <= r.offered_rps && r.offered_rps <= r.delivered_hi * 1.05);
    /* the window's p95 TTFT is near ln(20)/5 = 599 ms, its interval around it */
    assert_near(r.term[0].value_ms, 599, 120);
    assert_true(r.term[0].lo_ms <= r.term[0].value_ms && r.term[0].value_ms <= r.term[0].hi_ms);
    assert_non_null(strstr(r.why, "sustained: delivered"));
    /* the stored summary reads back */
    char *js = st_sustain_to_json(&c, &r);
    st_sustain_result b;
    assert_int_equal(st_sustain_from_json(js, &b), 0);
    assert_int_equal(b.verdict, r.verdict);
    assert_near(b.window_start_s, r.window_start_s, 1e-9);
    assert_near(b.term[0].value_ms, r.term[0].value_ms, 1e-6);
    assert_int_equal(b.term[0].ex.k, r.term[0].ex.k);
    assert_near(b.inflight.slope, r.inflight.slope, 1e-9);
    st_rate_result rr;
    st_sustain_rate_result(&b, 5, &rr);
    assert_int_equal(rr.verdict, ST_VERDICT_PASS);
    assert_true(rr.sustained && !rr.stopped_early);
    free(js);
    assert_int_equal(st_sustain_from_json("{\"method\":\"burst\"}", &b), -1);
    free_run(s);
    free(s);
}

/* lam 14 > mu 10 with a generous TTFT limit: the queue grows at about 4/s and the run stops early,
 * saying so. */
static void growing_queue_is_oversaturated(void **state)
{
    (void)state;
    synth *s = calloc(1, sizeof *s);
    st_audit_slo slo = slo_of(1e6);
    make_run(s, 14, 10, 8000, 12);
    st_sustain_params p = params(&slo, 14, s->n);
    st_sustain c;
    st_sustain_init(&c, &p);
    st_sustain_result r;
    double stop = drive(s, &c, &r);
    assert_int_equal(r.verdict, ST_VERDICT_OVERSAT);
    assert_true(r.confident);
    assert_true(stop < 300); /* early: it costs money */
    assert_non_null(strstr(r.why, "over-saturated"));
    assert_non_null(strstr(r.why, "grow"));
    /* by a growth test, or by the flow balance of the window (delivered well below offered) */
    assert_true(r.grows_inflight || r.grows_ttft || strstr(r.why, "in the window the engine delivers"));
    /* what the overloaded server delivers is about its service rate */
    assert_near(r.run_delivered_rps, 10, 2.5);
    st_rate_result rr;
    st_sustain_rate_result(&r, 14, &rr);
    assert_true(rr.stopped_early);
    free_run(s);
    free(s);
}

/* lam 8, mu 10: p95 sojourn ln(20)/2 = 1.5 s against a 0.5 s limit: SLO missed. */
static void missed_slo_is_called(void **state)
{
    (void)state;
    synth *s = calloc(1, sizeof *s);
    st_audit_slo slo = slo_of(500);
    make_run(s, 8, 10, 5000, 13);
    st_sustain_params p = params(&slo, 8, s->n);
    st_sustain c;
    st_sustain_init(&c, &p);
    st_sustain_result r;
    drive(s, &c, &r);
    assert_int_equal(r.verdict, ST_VERDICT_FAIL);
    assert_non_null(strstr(r.why, "SLO missed"));
    /* called early, or over the window with its percentile above the limit */
    assert_true(strstr(r.why, "stopped early") || r.term[0].value_ms > 500);
    free_run(s);
    free(s);
}

/* A bound that leaves no room for the window: undecided with the reason, never a pass. */
static void bound_hit_is_undecided(void **state)
{
    (void)state;
    synth *s = calloc(1, sizeof *s);
    st_audit_slo slo = slo_of(1000);
    make_run(s, 5, 10, 3000, 14);
    st_sustain_params p = params(&slo, 5, s->n);
    p.max_duration_s = 40; /* a 30 s window after the warm phase and its drain does not fit */
    p.min_window_requests = 400;
    st_sustain c;
    st_sustain_init(&c, &p);
    st_sustain_result r;
    drive(s, &c, &r);
    assert_int_equal(r.verdict, ST_VERDICT_UNDECIDED);
    assert_false(r.confident);
    assert_non_null(strstr(r.why, "undecided"));
    /* and a run whose schedule ends first (the budget) likewise */
    free_run(s);
    make_run(s, 5, 10, 120, 15);
    p = params(&slo, 5, s->n);
    st_sustain_init(&c, &p);
    drive(s, &c, &r);
    assert_int_equal(r.verdict, ST_VERDICT_UNDECIDED);
    free_run(s);
    free(s);
}

/* Multi-turn sessions: the warm phase lasts at least a session's span (its think time and an E2E
 * per later turn), so the window opens once later turns are in their steady mix. */
static void sessions_warm_for_a_session_span(void **state)
{
    (void)state;
    synth *s = calloc(1, sizeof *s);
    st_audit_slo slo = slo_of(1000);
    make_run(s, 5, 10, 3000, 21);
    st_sustain_params p = params(&slo, 5, s->n);
    p.session_turns = 3;
    p.session_think_s = 40;
    st_sustain c;
    st_sustain_init(&c, &p);
    st_sustain_result r;
    drive(s, &c, &r);
    print_message("# sessions: window from %.1f s (%s)\n", r.window_start_s, r.why);
    assert_int_equal(r.verdict, ST_VERDICT_PASS);
    assert_true(r.window_start_s >= 40);
    free_run(s);
    free(s);
}

/* The run's schedule ends in the window phase (250 requests at 5 req/s: 50 s, the window needing
 * 300): the window ends there and drains. Meeting the SLO, it is undecided (too short to show a
 * pass) and says why; missing it with confidence (lam 8, mu 10, p95 1.5 s against 0.2 s, with no
 * early stop to call it before), it is a confident failure, not "undecided". */
static void schedule_ending_in_the_window(void **state)
{
    (void)state;
    synth *s = calloc(1, sizeof *s);
    st_audit_slo slo = slo_of(1000);
    make_run(s, 5, 10, 250, 16);
    st_sustain_params p = params(&slo, 5, s->n);
    st_sustain c;
    st_sustain_init(&c, &p);
    st_sustain_result r;
    drive(s, &c, &r);
    assert_int_equal(r.verdict, ST_VERDICT_UNDECIDED);
    assert_non_null(strstr(r.why, "into its window, before it had the length and the requests it needs"));
    assert_int_equal(r.window_completed, r.window_requests); /* drained, not cut off */
    free_run(s);
    slo = slo_of(200); /* two thirds of the requests over it */
    make_run(s, 8, 10, 250, 17);
    p = params(&slo, 8, s->n);
    p.early_stop = 0;
    st_sustain_init(&c, &p);
    drive(s, &c, &r);
    print_message("# schedule ends in the window, SLO missed: %s\n", r.why);
    assert_int_equal(r.verdict, ST_VERDICT_FAIL);
    assert_true(r.confident);
    free_run(s);
    free(s);
}

/* Failed requests: an engine that answers errors to every request is called at once (a fail, with
 * the error), not run to max_duration; one failure in the window fails a run that would pass. */
static void failing_requests_stop_the_run(void **state)
{
    (void)state;
    synth *s = calloc(1, sizeof *s);
    st_audit_slo slo = slo_of(1000);
    make_run(s, 5, 10, 3000, 16);
    for (uint32_t i = 0; i < s->n; i++)
        st_record_set_error(&s->rec[i], ST_REQ_HTTP_STATUS, "internal error", 14);
    st_sustain_params p = params(&slo, 5, s->n);
    st_sustain c;
    st_sustain_init(&c, &p);
    st_sustain_result r;
    double stop = drive(s, &c, &r);
    assert_int_equal(r.verdict, ST_VERDICT_FAIL);
    assert_true(r.confident);
    assert_non_null(strstr(r.why, "requests fail"));
    assert_non_null(strstr(r.why, "internal error"));
    assert_true(stop < 10);
    free_run(s);
    /* one failure late in the run: the window holds it, the run fails */
    make_run(s, 5, 10, 3000, 17);
    for (uint32_t i = 150; i < 300; i += 100)
        st_record_set_error(&s->rec[i], ST_REQ_TIMEOUT, "timed out", 9);
    p = params(&slo, 5, s->n);
    st_sustain_init(&c, &p);
    drive(s, &c, &r);
    assert_int_equal(r.verdict, ST_VERDICT_FAIL);
    assert_non_null(strstr(r.why, "window"));
    free_run(s);
    free(s);
}

/* An engine that admits every request (no waiting queue) whose step time grows with its batch:
 * E2E climbs slowly from 2 s to 9 s over 100 s, TTFT stays 50 ms, so the requests in flight climb
 * for minutes towards their fixed point (lam x E2E) while nothing waits. With the engine's waiting
 * queue scraped (flat at 0) that is the batch filling: the window starts again until it levels
 * and the run is sustained. */
static void filling_batch_is_not_an_overload(void **state)
{
    (void)state;
    synth *s = calloc(1, sizeof *s);
    uint32_t n = 3000;
    st_ns *sched = malloc(sizeof *sched * n);
    st_arrival a = { .kind = ST_ARR_CONSTANT, .rate = 10, .burstiness = 1, .seed = 21 };
    assert_int_equal(st_arrival_schedule(&a, n, sched), 0);
    for (uint32_t i = 0; i < n; i++) {
        st_record *r = &s->rec[i];
        st_record_init(r, i);
        double at = st_ns_to_s(sched[i]), e2e = 2 + 0.07 * (at < 100 ? at : 100);
        r->scheduled = r->sent = sched[i];
        r->first_byte = r->first_token = sched[i] + 50 * ST_NS_PER_MS;
        r->end = sched[i] + (st_ns)(e2e * 1e9);
        st_record_add_event(r, r->first_token);
        st_record_add_event(r, r->end);
        r->output_requested = r->output_tokens = 2;
    }
    s->n = n;
    free(sched);
    st_metrics_sample *sm = calloc(700, sizeof *sm);
    for (uint32_t k = 0; k < 700; k++)
        sm[k] = (st_metrics_sample){ .t = k + 0.5, .name = "waiting", .value = 0 };
    st_audit_slo slo = slo_of(1e6);
    st_sustain_params p = params(&slo, 10, n);
    p.min_window_requests = 300;
    /* the waiting queue in view: sustained, after starting its window again */
    st_sustain c;
    st_sustain_init(&c, &p);
    st_sustain_result r;
    drive_with(s, &c, &r, sm, 700);
    if (r.verdict != ST_VERDICT_PASS)
        fail_msg("with the waiting queue: %s (restarts %d, window %.0f-%.0f)", r.why, c.restarts, r.window_start_s,
                 r.window_end_s);
    assert_true(c.restarts >= 1);
    assert_true(r.window_start_s > 60);
    free_run(s);
    /* the same run without the waiting queue in view: the growth counts (an overload) */
    for (uint32_t i = 0; i < n; i++) {
        st_record *x = &s->rec[i];
        double at = st_ns_to_s((st_ns)(i * 1e8)), e2e = 2 + 0.07 * (at < 100 ? at : 100);
        st_record_init(x, i);
        x->scheduled = x->sent = (st_ns)(i * 1e8);
        x->first_byte = x->first_token = x->scheduled + 50 * ST_NS_PER_MS;
        x->end = x->scheduled + (st_ns)(e2e * 1e9);
        st_record_add_event(x, x->first_token);
        st_record_add_event(x, x->end);
        x->output_requested = x->output_tokens = 2;
    }
    st_sustain_init(&c, &p);
    drive(s, &c, &r);
    assert_int_equal(r.verdict, ST_VERDICT_OVERSAT);
    free_run(s);
    free(sm);
    free(s);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(steady_queue_is_sustained),     cmocka_unit_test(growing_queue_is_oversaturated),
        cmocka_unit_test(missed_slo_is_called),          cmocka_unit_test(bound_hit_is_undecided),
        cmocka_unit_test(schedule_ending_in_the_window), cmocka_unit_test(sessions_warm_for_a_session_span),
        cmocka_unit_test(failing_requests_stop_the_run), cmocka_unit_test(filling_batch_is_not_an_overload),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
