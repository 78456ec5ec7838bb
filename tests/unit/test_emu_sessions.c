/* Multi-turn sessions on the engine model in virtual time (emu/sim.h dependent items): a later
 * turn is sent its think time after the turn before it ended, its prompt that turn's prompt,
 * the tokens the engine generated and its own new tokens, so the prefix cache reuses the answer
 * too; a turn that fails ends its session; sessions run open loop only. */
#include "harness.h"

#include <signal.h>

#include <stdio.h>

#include "emu/catalog.h"
#include "emu/config.h"
#include "emu/sim.h"
#include "load/workload.h"

#include "emu_config.h"

static void setup_cfg(st_emu_config *c) { emu_config_of(c, "H100", "Qwen/Qwen3-8B"); }

#define FIRST 160
#define NEW 20
#define OUT 30
#define THINK_NS ((st_ns)500000000)

/* Two sessions of three turns: items 0 and 1 are the first turns, 2-5 the later ones. */
static void two_sessions(st_emu_sim_item it[6], uint32_t new_len)
{
    memset(it, 0, 6 * sizeof *it);
    for (uint32_t s = 0; s < 2; s++)
        for (uint32_t t = 0; t < 3; t++) {
            uint32_t i = t == 0 ? s : 2 + 2 * (t - 1) + s;
            it[i] = (st_emu_sim_item){ .arrival = t == 0 ? (st_ns)s * 100000000 : 0,
                                       .input_len = t == 0 ? FIRST : new_len,
                                       .output_len = OUT,
                                       .dependent = t > 0,
                                       .next = t < 2 ? 2 + 2 * t + s : 0,
                                       .think = t > 0 ? THINK_NS : 0,
                                       .session = s + 1,
                                       .turn = t };
        }
}

static void later_turns_follow_the_answers(void **state)
{
    (void)state;
    st_emu_config c;
    setup_cfg(&c);
    st_emu_sim_item it[6];
    two_sessions(it, NEW);
    st_record rec[6], again[6];
    st_emu_sim_stats s;
    char err[512];
    assert_int_equal(st_emu_sim_run(&c, it, 6, rec, &s, err, sizeof err), 0);
    assert_int_equal(s.completed, 6);
    for (uint32_t i = 0; i < 6; i++) {
        assert_int_equal(rec[i].status, ST_REQ_OK);
        assert_int_equal(rec[i].output_tokens, OUT);
        assert_int_equal(rec[i].session, it[i].session);
        assert_int_equal(rec[i].turn, it[i].turn);
        uint32_t prev = i < 2 ? 0 : i - 2;
        if (i >= 2) {
            /* sent its think time after the turn before it ended; TTFT counts from then */
            assert_int_equal(rec[i].scheduled, rec[prev].end + THINK_NS);
            assert_int_equal(rec[i].sent, rec[i].scheduled);
            /* the conversation so far: the previous prompt, its answer, the new text */
            assert_int_equal(rec[i].input_tokens, rec[prev].input_tokens + OUT + NEW);
            /* the prefix cache holds the previous prompt AND the answer the engine generated
             * (whole blocks of the tokens computed: the last answer token never was) */
            assert_true(rec[i].cached_tokens > rec[prev].input_tokens);
            assert_true(rec[i].cached_tokens <= rec[prev].input_tokens + OUT - 1);
            assert_int_equal(rec[i].cached_tokens % 16, 0);
        }
    }
    assert_int_equal(rec[4].input_tokens, FIRST + 2 * (OUT + NEW));
    assert_true(s.prefix_hits > 0);
    /* the same run again: the same records */
    assert_int_equal(st_emu_sim_run(&c, it, 6, again, &s, err, sizeof err), 0);
    for (uint32_t i = 0; i < 6; i++) {
        assert_int_equal(again[i].end, rec[i].end);
        assert_int_equal(again[i].cached_tokens, rec[i].cached_tokens);
        st_record_free(&rec[i]);
        st_record_free(&again[i]);
    }
}

static void a_failed_turn_ends_its_session(void **state)
{
    (void)state;
    st_emu_config c;
    setup_cfg(&c);
    st_emu_sim_item it[6];
    two_sessions(it, NEW);
    it[3].input_len = 100000; /* session 2's second turn: longer than the model's context */
    st_record rec[6];
    st_emu_sim_stats s;
    char err[512];
    assert_int_equal(st_emu_sim_run(&c, it, 6, rec, &s, err, sizeof err), 0);
    assert_int_equal(rec[3].status, ST_REQ_HTTP_STATUS);
    assert_int_equal(rec[3].http_status, 400);
    assert_int_equal(rec[5].status, ST_REQ_SKIPPED); /* its third turn: never sent */
    assert_true(rec[5].sent < 0);
    for (uint32_t i = 0; i < 6; i++) { /* session 1 went on */
        if (it[i].session == 1)
            assert_int_equal(rec[i].status, ST_REQ_OK);
        st_record_free(&rec[i]);
    }
    /* a concurrency limit or a closed loop would hold later turns back: refused */
    assert_int_equal(st_emu_sim_run_limited(&c, it, 6, 4, rec, &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "open loop"));
    for (uint32_t i = 0; i < 6; i++)
        st_record_free(&rec[i]);
}

/* A run stopped midway: later turns not sent by then are aborted unsent. */
static int stop_at_2s(void *arg, st_ns now, const st_emu_stats *es, const st_emu_run_progress *p, const st_record *recs,
                      uint32_t n)
{
    (void)arg, (void)es, (void)p, (void)recs, (void)n;
    return now >= 2 * (st_ns)1000000000;
}

static void workload_sessions_map_onto_the_model(void **state)
{
    (void)state;
    st_session_params sp = { .sessions = 5,
                             .turns_min = 3,
                             .turns_max = 3,
                             .first_input = 200,
                             .user_input = 20,
                             .output_len = 40,
                             .prefix_len = 100,
                             .think_s = 3,
                             .seed = 4 };
    st_workload w;
    char err[512];
    assert_int_equal(st_workload_sessions(&sp, &w, err, sizeof err), 0);
    st_emu_sim_item *it = calloc(w.n, sizeof *it);
    st_record *rec = calloc(w.n, sizeof *rec);
    st_ns *sched = calloc(w.n, sizeof *sched);
    for (uint32_t i = 0; i < w.n - w.n_dependent; i++)
        sched[i] = (st_ns)i * 200000000;
    st_emu_sim_items_from_workload(&w, sched, it);
    uint32_t dep = 0;
    for (uint32_t i = 0; i < w.n; i++)
        dep += it[i].dependent;
    assert_int_equal(dep, w.n_dependent);
    st_emu_config c;
    setup_cfg(&c);
    st_emu_session *S;
    assert_int_equal(st_emu_session_new(&c, &S, NULL, err, sizeof err), 0);
    st_emu_run_opts o = { .tick = 100000000, .on_tick = stop_at_2s };
    int stopped = 0;
    assert_int_equal(st_emu_session_run(S, it, w.n, &o, rec, NULL, &stopped, err, sizeof err), 0);
    assert_true(stopped);
    uint32_t unsent = 0;
    for (uint32_t i = 0; i < w.n; i++) {
        if (it[i].dependent && rec[i].sent < 0) { /* think time 3 s: no later turn by 2 s */
            assert_int_equal(rec[i].status, ST_REQ_ABORTED);
            unsent++;
        }
        st_record_free(&rec[i]);
    }
    assert_int_equal(unsent, w.n_dependent);
    st_emu_session_free(S);
    free(sched);
    free(rec);
    free(it);
    st_workload_free(&w);
}

/* The stop flag ends a run at its next step, whatever virtual time a step covers: set while the
 * run goes (here by the tick, as a signal handler would, with the tick itself never asking to
 * stop), the requests in flight and not yet sent are recorded as aborted. */
static volatile sig_atomic_t stop_flag;
static int set_flag_at_1s(void *arg, st_ns now, const st_emu_stats *es, const st_emu_run_progress *p,
                          const st_record *recs, uint32_t n)
{
    (void)arg, (void)es, (void)p, (void)recs, (void)n;
    if (now >= (st_ns)1000000000)
        stop_flag = 1;
    return 0;
}

static void the_stop_flag_ends_a_run(void **state)
{
    (void)state;
    char err[512];
    st_emu_config c;
    setup_cfg(&c);
    enum { N = 400 };
    st_emu_sim_item *it = calloc(N, sizeof *it);
    st_record *rec = calloc(N, sizeof *rec);
    for (uint32_t i = 0; i < N; i++) {
        it[i] = (st_emu_sim_item){ .arrival = (st_ns)i * 50000000, .input_len = 200, .output_len = 100 };
        st_record_init(&rec[i], i);
    }
    st_emu_session *S;
    assert_int_equal(st_emu_session_new(&c, &S, NULL, err, sizeof err), 0);
    stop_flag = 0;
    st_emu_run_opts o = { .tick = 100000000, .on_tick = set_flag_at_1s, .stop = &stop_flag };
    int stopped = 0;
    st_emu_sim_stats st;
    assert_int_equal(st_emu_session_run(S, it, N, &o, rec, &st, &stopped, err, sizeof err), 0);
    assert_true(stopped);
    uint32_t aborted = 0, done = 0;
    for (uint32_t i = 0; i < N; i++) {
        aborted += rec[i].status == ST_REQ_ABORTED;
        done += rec[i].status == ST_REQ_OK && rec[i].end >= 0;
        st_record_free(&rec[i]);
    }
    assert_int_equal(aborted + done, N);
    assert_true(aborted > N / 2); /* 20 s of arrivals, stopped after about 1 s */
    assert_true(done < 40);
    st_emu_session_free(S);
    free(rec);
    free(it);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(later_turns_follow_the_answers),
        cmocka_unit_test(a_failed_turn_ends_its_session),
        cmocka_unit_test(workload_sessions_map_onto_the_model),
        cmocka_unit_test(the_stop_flag_ends_a_run),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
