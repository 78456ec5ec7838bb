/* The audit's workload with multi-turn sessions (audit/sweep.h st_sweep_workload): a trace's
 * conversations replayed (later turns dependent, linked in order), repeated whole for a sustained
 * run longer than the trace, and synthetic sessions from the spec's block. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "audit/spec.h"
#include "audit/sweep.h"

static char dir[] = "/tmp/st-sweep-sessions-XXXXXX";

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(dir))
        return -1;
    char p[256];
    snprintf(p, sizeof p, "%s/chat.jsonl", dir);
    FILE *f = fopen(p, "w");
    if (!f)
        return -1;
    /* 3 sessions of 4 turns */
    for (int t = 0; t < 4; t++)
        for (int s = 0; s < 3; s++)
            fprintf(f, "{\"timestamp\": %.2f, \"session\": \"s%d\", \"input_tokens\": %d, \"output_tokens\": 8}\n",
                    t * 5.0 + s, s, t ? 10 : 50);
    fclose(f);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char p[256];
    snprintf(p, sizeof p, "%s/chat.jsonl", dir);
    unlink(p);
    rmdir(dir);
    return 0;
}

static void parse(const char *workload, const char *search, st_spec *s)
{
    char t[1024], name[300], err[512];
    snprintf(t, sizeof t,
             "engine: {kind: vllm, model: m}\nhardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 1\n"
             "workload: %s\nrates: [1]\nslo: {ttft_p95_ms: 1000, tpot_p95_ms: 100}\nsearch: %s\n",
             workload, search);
    snprintf(name, sizeof name, "%s/spec.yaml", dir);
    if (st_spec_parse(name, t, strlen(t), s, err, sizeof err))
        fail_msg("%s", err);
}

/* Every session's turns are linked in order, the first on the schedule, the rest dependent. */
static void check_links(const st_workload *w, uint32_t sessions, uint32_t turns)
{
    uint32_t ns = w->n - w->n_dependent;
    assert_int_equal(w->n_sessions, sessions);
    assert_int_equal(ns, sessions);
    assert_int_equal(w->n, sessions * turns);
    uint32_t *seen = calloc(w->n, sizeof *seen);
    for (uint32_t i = 0; i < ns; i++) {
        assert_int_equal(w->items[i].turn, 0);
        uint32_t k = 1, j = w->items[i].next, prev = i;
        while (j) {
            assert_true(j >= ns && j < w->n);
            assert_int_equal(w->items[j].session, w->items[i].session);
            assert_int_equal(w->items[j].turn, w->items[prev].turn + 1);
            assert_int_equal(w->items[j].input_len, 10);
            seen[j]++;
            prev = j;
            j = w->items[j].next;
            k++;
        }
        assert_int_equal(k, turns);
    }
    for (uint32_t j = ns; j < w->n; j++)
        assert_int_equal(seen[j], 1); /* every later turn belongs to exactly one session */
    free(seen);
}

static void trace_replayed_and_repeated(void **state)
{
    (void)state;
    st_spec s;
    char err[512];
    st_workload w;
    /* flat (the default): every row on the schedule */
    parse("{trace: chat.jsonl}", "{mode: burst}", &s);
    assert_int_equal(st_sweep_workload(&s, 1, 100, &w, err, sizeof err), 0);
    assert_int_equal(w.n, 12);
    assert_int_equal(w.n_dependent, 0);
    st_workload_free(&w);
    st_spec_free(&s);
    /* replayed */
    parse("{trace: chat.jsonl, sessions: replay}", "{mode: burst}", &s);
    assert_int_equal(st_sweep_workload(&s, 1, 100, &w, err, sizeof err), 0);
    check_links(&w, 3, 4);
    st_workload_free(&w);
    st_spec_free(&s);
    /* think_time replaces the think times the trace records (the gap between starts here) */
    parse("{trace: chat.jsonl, sessions: replay}", "{mode: burst}", &s);
    assert_int_equal(st_sweep_workload(&s, 1, 100, &w, err, sizeof err), 0);
    for (uint32_t i = w.n - w.n_dependent; i < w.n; i++)
        assert_true(w.items[i].think > 0);
    st_workload_free(&w);
    st_spec_free(&s);
    parse("{trace: chat.jsonl, sessions: replay, think_time: 250ms}", "{mode: burst}", &s);
    assert_int_equal(st_sweep_workload(&s, 1, 100, &w, err, sizeof err), 0);
    check_links(&w, 3, 4);
    for (uint32_t i = w.n - w.n_dependent; i < w.n; i++)
        assert_int_equal(w.items[i].think, 250000000);
    st_workload_free(&w);
    st_spec_free(&s);
    /* a sustained run longer than the trace: whole passes, each its own sessions, arrivals on */
    parse("{trace: chat.jsonl, sessions: replay}", "{mode: sustained}", &s);
    assert_int_equal(st_sweep_workload(&s, 1, 30, &w, err, sizeof err), 0);
    check_links(&w, 9, 4); /* ceil(30 / 12) = 3 passes */
    for (uint32_t i = 1; i < w.n - w.n_dependent; i++)
        assert_true(w.items[i].arrival > w.items[i - 1].arrival);
    for (uint32_t i = 0; i < w.n; i++)
        assert_true(w.items[i].session >= 1 && w.items[i].session <= 9);
    st_workload_free(&w);
    st_spec_free(&s);
}

static void synthetic_sessions_from_the_spec(void **state)
{
    (void)state;
    st_spec s;
    char err[512];
    st_workload w;
    parse("{input_tokens: 50, output_tokens: 8, shared_prefix: 20, sessions: {turns: 4, user_tokens: 10}}",
          "{mode: burst}", &s);
    assert_int_equal(st_sweep_workload(&s, 3, 40, &w, err, sizeof err), 0);
    check_links(&w, 10, 4);                     /* 40 requests: 10 sessions of 4 turns */
    for (uint32_t i = 1; i < w.n_sessions; i++) /* the system prompt is shared */
        assert_memory_equal(w.items[i].input_ids, w.items[0].input_ids, 20 * sizeof(uint32_t));
    st_workload_free(&w);
    st_spec_free(&s);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(trace_replayed_and_repeated),
        cmocka_unit_test(synthetic_sessions_from_the_spec),
    };
    return cmocka_run_group_tests(t, setup, teardown);
}
