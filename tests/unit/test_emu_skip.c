/* Step skipping (st_emu_skip_steps): the virtual-time driver takes runs of decode steps at once
 * unless st_emu_config.step_by_step is set. Both paths run the same workloads here (short and long
 * outputs, chunked prefill, preemption under memory pressure, a shared prefix, several models and
 * GPUs, open loop with and without a cap, closed loop, ticks and timeouts, multi-turn sessions with
 * reasoning, no API-server model, vLLM before async scheduling) and every per-request record must
 * be the same: status, send, first token, first answer, end and token counts, and every token time
 * to within ST_EMU_TOKEN_TOL_NS (a run's token times are kept as segments, load/record.h; the
 * step-by-step path's records hold every time exactly, as one time per token did). Every figure the
 * run summary gives (st_summary_compute: the reports' TTFT, TPOT, ITL, E2E percentiles, throughputs,
 * steady window) must agree within 0.1 %. The largest relative difference of the exact times (0:
 * the runs are the same arithmetic), the largest token-time difference and the largest relative
 * difference of a summary figure are printed.
 * The step-by-step path is the reference: it also lists every full block in the prefix cache as it
 * fills, where the default path leaves generated blocks unlisted in runs without dependent items
 * (st_emu_set_output_prompts): the preemption workloads recompute from their own listed blocks, and
 * the engines' eviction counters and free blocks are compared. Both paths run one-run sessions
 * (st_emu_session_one_run), so the default path sends items without ids as seeded prompts, keyed in
 * the prefix cache by seed, where the reference path generates and hashes their ids: the comparison
 * covers the two keyings too (and seeded_prompts_match_their_ids compares them on one path). */
#include "harness.h"

#include <stdio.h>

#include "emu/catalog.h"
#include "emu/config.h"
#include "emu/consts.h"
#include "core/rng.h"
#include "emu/sim.h"
#include "load/stats.h"
#include "load/workload.h"

#include "emu_config.h"

/* The largest relative difference over all compared times and figures so far. */
typedef struct cmp_acc {
    double worst;
    double tok_ns; /* largest token-time difference (ns) */
    double figure; /* largest relative difference of a summary figure */
} cmp_acc;

/* A token time: within ST_EMU_TOKEN_TOL_NS of the step-by-step path's. */
static void note_tok(cmp_acc *acc, uint32_t i, uint32_t k, st_ns a, st_ns b)
{
    double d = fabs((double)(a - b));
    if (d > acc->tok_ns)
        acc->tok_ns = d;
    if (d > ST_EMU_TOKEN_TOL_NS)
        fail_msg("request %u: token %u at %lld ns with step skipping, %lld step by step", i, k, (long long)a,
                 (long long)b);
}

/* A summary figure: within 0.1 % (both NAN, or both tiny, agree). */
static void note_fig(cmp_acc *acc, const char *name, const char *what, double a, double b)
{
    if (isnan(a) && isnan(b))
        return;
    double m = fabs(a) > fabs(b) ? fabs(a) : fabs(b);
    double d = m > 1e-12 ? fabs(a - b) / m : 0;
    if (isnan(d))
        d = 1;
    if (d > acc->figure)
        acc->figure = d;
    if (d > 1e-3)
        fail_msg("%s: %s is %.9g with step skipping, %.9g step by step", name, what, a, b);
}

static void note_dist(cmp_acc *acc, const char *name, const char *what, const st_dist *a, const st_dist *b)
{
    char w[64];
    const double *x[] = { &a->mean, &a->min, &a->p50, &a->p90, &a->p95, &a->p99, &a->max };
    const double *y[] = { &b->mean, &b->min, &b->p50, &b->p90, &b->p95, &b->p99, &b->max };
    static const char *nm[] = { "mean", "min", "p50", "p90", "p95", "p99", "max" };
    if (a->n != b->n)
        fail_msg("%s: %s over %u values with step skipping, %u step by step", name, what, a->n, b->n);
    for (int k = 0; k < 7; k++) {
        snprintf(w, sizeof w, "%s %s", what, nm[k]);
        note_fig(acc, name, w, *x[k], *y[k]);
    }
}

/* Every figure of the run summary (whole run and steady window) from both paths' records. */
static void compare_summary(cmp_acc *acc, const char *name, const st_record *a, const st_record *b, uint32_t n)
{
    st_summary_opts so = { .slo = { .ttft_s = 0.5, .tpot_s = 0.03 } };
    st_summary x, y;
    assert_int_equal(st_summary_compute(a, n, &so, &x), 0);
    assert_int_equal(st_summary_compute(b, n, &so, &y), 0);
    note_dist(acc, name, "TTFT", &x.ttft, &y.ttft);
    note_dist(acc, name, "TPOT", &x.tpot, &y.tpot);
    note_dist(acc, name, "ITL", &x.itl, &y.itl);
    note_dist(acc, name, "E2E", &x.e2e, &y.e2e);
    note_dist(acc, name, "TTFAT", &x.ttfat, &y.ttfat);
    note_fig(acc, name, "request throughput", x.request_throughput, y.request_throughput);
    note_fig(acc, name, "output throughput", x.output_throughput, y.output_throughput);
    note_fig(acc, name, "goodput", x.goodput, y.goodput);
    const st_window *u = &x.steady, *v = &y.steady;
    note_dist(acc, name, "steady TTFT", &u->ttft, &v->ttft);
    note_dist(acc, name, "steady TPOT", &u->tpot, &v->tpot);
    note_dist(acc, name, "steady ITL", &u->itl, &v->itl);
    note_dist(acc, name, "steady E2E", &u->e2e, &v->e2e);
    note_fig(acc, name, "steady output tokens", u->output_tokens, v->output_tokens);
    note_fig(acc, name, "steady output throughput", u->output_throughput, v->output_throughput);
    note_fig(acc, name, "steady request throughput", u->request_throughput, v->request_throughput);
    note_fig(acc, name, "steady goodput", u->goodput, v->goodput);
}

static void note(cmp_acc *acc, const char *what, uint32_t i, double a, double b)
{
    double m = fabs(a) > fabs(b) ? fabs(a) : fabs(b);
    double d = m > 0 ? fabs(a - b) / m : 0;
    if (d > acc->worst)
        acc->worst = d;
    if (d > 1e-12)
        fail_msg("request %u: %s is %.0f with step skipping, %.0f step by step", i, what, a, b);
}

typedef struct outcome {
    st_record *rec;
    st_emu_sim_stats st;
    st_emu_stats es;
} outcome;

static void run_path(const st_emu_config *base, int step_by_step, const st_emu_sim_item *it, uint32_t n,
                     const st_emu_run_opts *o, outcome *out)
{
    st_emu_config c = *base;
    c.step_by_step = step_by_step;
    char err[512];
    st_emu_session *S;
    if (st_emu_session_new(&c, &S, NULL, err, sizeof err) < 0)
        fail_msg("engine refused: %s", err);
    st_emu_session_one_run(S);
    out->rec = calloc(n, sizeof *out->rec);
    assert_non_null(out->rec);
    for (uint32_t i = 0; i < n; i++)
        st_record_init(&out->rec[i], i);
    if (st_emu_session_run(S, it, n, o, out->rec, &out->st, NULL, err, sizeof err) < 0)
        fail_msg("run failed (step_by_step %d): %s", step_by_step, err);
    st_emu_session_stats(S, &out->es);
    st_emu_session_free(S);
}

static void free_outcome(outcome *o, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        st_record_free(&o->rec[i]);
    free(o->rec);
}

/* Runs both paths and compares; returns the skipped path's engine counters. min_skip_share: the
 * least share of steps the runs must have taken (a workload chosen to have runs must have them). */
static st_emu_stats compare(const char *name, const st_emu_config *c, const st_emu_sim_item *it, uint32_t n,
                            const st_emu_run_opts *o, double min_skip_share, cmp_acc *acc)
{
    outcome a, b;
    run_path(c, 0, it, n, o, &a);
    run_path(c, 1, it, n, o, &b);
    for (uint32_t i = 0; i < n; i++) {
        const st_record *x = &a.rec[i], *y = &b.rec[i];
        if (x->status != y->status)
            fail_msg("%s: request %u: status %d with step skipping, %d step by step", name, i, x->status, y->status);
        note(acc, "scheduled", i, x->scheduled, y->scheduled);
        note(acc, "sent", i, x->sent, y->sent);
        note(acc, "first_token", i, x->first_token, y->first_token);
        note(acc, "first_answer", i, x->first_answer, y->first_answer);
        note(acc, "end", i, x->end, y->end);
        note(acc, "output_tokens", i, x->output_tokens, y->output_tokens);
        note(acc, "reasoning_tokens", i, x->reasoning_tokens, y->reasoning_tokens);
        note(acc, "cached_tokens", i, x->cached_tokens, y->cached_tokens);
        note(acc, "input_tokens", i, x->input_tokens, y->input_tokens);
        if (x->n_events != y->n_events)
            fail_msg("%s: request %u: %u token events with step skipping, %u step by step", name, i, x->n_events,
                     y->n_events);
        st_event_it ix, iy;
        st_ns tx, ty;
        st_events_begin(&ix, x);
        st_events_begin(&iy, y);
        for (uint32_t k = 0; st_events_next(&ix, &tx) && st_events_next(&iy, &ty); k++)
            note_tok(acc, i, k, tx, ty);
    }
    compare_summary(acc, name, a.rec, b.rec, n);
    note(acc, "duration", n, a.st.duration, b.st.duration);
    note(acc, "busy time (ns)", n, a.st.busy_s * 1e9, b.st.busy_s * 1e9);
    note(acc, "max KV usage (ppm)", n, a.st.max_kv_usage * 1e6, b.st.max_kv_usage * 1e6);
    assert_int_equal(a.st.steps, b.st.steps);
    assert_int_equal(a.st.preemptions, b.st.preemptions);
    assert_int_equal(a.st.prefix_queries, b.st.prefix_queries);
    assert_int_equal(a.st.prefix_hits, b.st.prefix_hits);
    assert_int_equal(a.st.generated_tokens, b.st.generated_tokens);
    assert_int_equal(a.st.completed, b.st.completed);
    assert_int_equal(a.st.max_running, b.st.max_running);
    assert_int_equal(a.st.max_waiting, b.st.max_waiting);
    assert_int_equal(a.es.evictions, b.es.evictions);
    assert_int_equal(a.es.free_blocks, b.es.free_blocks);
    assert_int_equal(b.es.steps_skipped, 0); /* the step-by-step path takes no runs */
    double share = a.es.steps ? (double)a.es.steps_skipped / a.es.steps : 0;
    print_message("%-40s %5u requests, %7llu steps, %5.1f %% in runs, %llu preemptions, %llu prefix hits\n", name, n,
                  (unsigned long long)a.es.steps, 100 * share, (unsigned long long)a.st.preemptions,
                  (unsigned long long)a.st.prefix_hits);
    if (share < min_skip_share)
        fail_msg("%s: %.1f %% of the steps in runs, expected at least %.1f %%", name, 100 * share,
                 100 * min_skip_share);
    st_emu_stats es = a.es;
    free_outcome(&a, n);
    free_outcome(&b, n);
    return es;
}

/* n open-loop items at `rate` req/s, input/output lengths alternating between two values. */
static st_emu_sim_item *items(uint32_t n, double rate, uint32_t in_a, uint32_t in_b, uint32_t out_a, uint32_t out_b)
{
    st_emu_sim_item *it = calloc(n, sizeof *it);
    assert_non_null(it);
    for (uint32_t i = 0; i < n; i++)
        it[i] = (st_emu_sim_item){ .arrival = (st_ns)(i / rate * 1e9),
                                   .input_len = i % 2 ? in_b : in_a,
                                   .output_len = i % 3 ? out_a : out_b };
    return it;
}

static cmp_acc acc_all;
static void compare_bare(const char *name, const st_emu_config *c, const st_emu_sim_item *it, uint32_t n,
                         const st_emu_run_opts *o);

static void short_and_long_outputs(void **state)
{
    (void)state;
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    st_emu_sim_item *it = items(300, 20, 512, 200, 300, 40);
    compare("qwen3-8b/h100 300/40 out, 20 req/s", &c, it, 300, NULL, 0.3, &acc_all);
    free(it);
    it = items(60, 2, 512, 1000, 2000, 1500);
    compare("qwen3-8b/h100 2000/1500 out, 2 req/s", &c, it, 60, NULL, 0.7, &acc_all);
    free(it);
}

static void chunked_prefill_and_preemption(void **state)
{
    (void)state;
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    c.max_num_batched_tokens = 2048; /* 6,000-token prompts take three chunks */
    c.gpu_memory_utilization = 0.40; /* a small KV cache: requests wait for blocks, preempt */
    st_emu_sim_item *it = items(120, 8, 6000, 3000, 1200, 400);
    st_emu_stats es = compare("qwen3-8b/h100 chunked, small KV cache", &c, it, 120, NULL, 0.2, &acc_all);
    assert_true(es.preemptions > 0);
    /* admission checks the whole prompt's blocks, not the first chunk's (a run ends before the
     * step that admits the waiting head: the same check) */
    c.vllm_version = EMU_VLLM_FULL_ISL_VERSION;
    compare("qwen3-8b/h100 chunked, small KV cache, full-prompt admission", &c, it, 120, NULL, 0.2, &acc_all);
    free(it);
}

static void shared_prefix(void **state)
{
    (void)state;
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    enum { N = 150, PRE = 2000, LEN = 2600 };
    uint32_t *ids = malloc((size_t)N * LEN * sizeof *ids);
    assert_non_null(ids);
    st_emu_sim_item *it = items(N, 6, LEN, LEN, 300, 120);
    for (uint32_t i = 0; i < N; i++) {
        for (uint32_t k = 0; k < LEN; k++)
            ids[(size_t)i * LEN + k] = 2000 + (k < PRE ? k : (i * 7919 + k * 31) % 100000);
        it[i].input_ids = ids + (size_t)i * LEN;
    }
    compare("qwen3-8b/h100 shared 2,000-token prefix", &c, it, N, NULL, 0.3, &acc_all);
    free(it);
    free(ids);
}

static void models_and_gpus(void **state)
{
    (void)state;
    static const struct {
        const char *gpu, *model;
        uint32_t tp;
        const char *version; /* NULL: the default */
    } cases[] = {
        { "L40S", "Qwen/Qwen3-0.6B", 1, NULL },
        { "A100", "meta-llama/Llama-3.1-8B-Instruct", 1, "0.10.1" }, /* before async scheduling */
        { "H100", "meta-llama/Llama-3.1-70B-Instruct-FP8", 2, NULL },
        { "H200", "zai-org/GLM-4.5-Air", 2, NULL }, /* MoE */
        { "RTX4090", "meta-llama/Meta-Llama-3-8B-Instruct-AWQ", 1, NULL },
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        st_emu_config c;
        emu_config_of(&c, cases[k].gpu, cases[k].model);
        c.tp = cases[k].tp;
        if (cases[k].version)
            c.vllm_version = st_emu_parse_vllm_version(cases[k].version);
        if (c.model.max_position > 8192)
            c.max_model_len = 8192;
        st_emu_sim_item *it = items(100, 4, 700, 1500, 400, 90);
        char name[128];
        snprintf(name, sizeof name, "%s/%s tp %u", cases[k].model, cases[k].gpu, cases[k].tp);
        compare(name, &c, it, 100, NULL, 0.3, &acc_all);
        free(it);
    }
}

static void capped_and_closed_loops(void **state)
{
    (void)state;
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    st_emu_sim_item *it = items(200, 50, 800, 300, 300, 64);
    st_emu_run_opts capped = { .max_concurrency = 24 };
    compare("open loop, at most 24 in flight", &c, it, 200, &capped, 0.3, &acc_all);
    st_emu_run_opts closed = { .clients = 40 };
    compare("closed loop, 40 clients", &c, it, 200, &closed, 0.3, &acc_all);
    for (uint32_t i = 0; i < 200; i++)
        it[i].chat = i % 2; /* chat requests: the API server's costs x fe_chat_factor */
    compare("closed loop, chat and completions", &c, it, 200, &closed, 0.3, &acc_all);
    c.no_frontend = 1;
    compare("closed loop, no API-server model", &c, it, 200, &closed, 0.3, &acc_all);
    free(it);
}

static int count_ticks(void *arg, st_ns now, const st_emu_stats *es, const st_emu_run_progress *p,
                       const st_record *recs, uint32_t n)
{
    (void)now, (void)es, (void)p, (void)recs, (void)n;
    (*(uint32_t *)arg)++;
    return 0;
}

static void ticks_and_timeouts(void **state)
{
    (void)state;
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    st_emu_sim_item *it = items(150, 12, 600, 2500, 900, 150);
    uint32_t ticks = 0;
    st_emu_run_opts o = { .tick = 250000000, .on_tick = count_ticks, .arg = &ticks, .timeout = 20000000000LL };
    compare("ticks every 250 ms, 20 s timeout", &c, it, 150, &o, 0.3, &acc_all);
    assert_true(ticks > 0);
    free(it);
}

/* What a tick sees (metric samples, early stop): the same at every tick on both paths. */
#define TICK_LOG_MAX 4096
typedef struct tick_log {
    uint32_t n;
    st_ns at[TICK_LOG_MAX];
    uint64_t tokens[TICK_LOG_MAX], gen[TICK_LOG_MAX], steps[TICK_LOG_MAX];
    uint32_t completed[TICK_LOG_MAX], sent[TICK_LOG_MAX], running[TICK_LOG_MAX], waiting[TICK_LOG_MAX];
    uint32_t free_blocks[TICK_LOG_MAX];
} tick_log;

static int log_tick(void *arg, st_ns now, const st_emu_stats *es, const st_emu_run_progress *p, const st_record *recs,
                    uint32_t n)
{
    (void)recs, (void)n;
    tick_log *L = arg;
    if (L->n == TICK_LOG_MAX)
        return 0;
    uint32_t k = L->n++;
    L->at[k] = now;
    L->tokens[k] = p->output_tokens;
    L->gen[k] = es->generation_tokens;
    L->steps[k] = es->steps;
    L->completed[k] = p->completed;
    L->sent[k] = p->sent;
    L->running[k] = es->running;
    L->waiting[k] = es->waiting;
    L->free_blocks[k] = es->free_blocks;
    return 0;
}

static void ticks_see_the_same_engine(void **state)
{
    (void)state;
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    st_emu_sim_item *it = items(120, 10, 900, 300, 700, 200);
    tick_log *A = calloc(1, sizeof *A), *B = calloc(1, sizeof *B);
    assert_non_null(A);
    assert_non_null(B);
    st_emu_run_opts oa = { .tick = 100000000, .on_tick = log_tick, .arg = A };
    st_emu_run_opts ob = oa;
    ob.arg = B;
    outcome a, b;
    run_path(&c, 0, it, 120, &oa, &a);
    run_path(&c, 1, it, 120, &ob, &b);
    assert_true(A->n > 50);
    assert_int_equal(A->n, B->n);
    for (uint32_t k = 0; k < A->n; k++) {
        if (A->at[k] != B->at[k] || A->tokens[k] != B->tokens[k] || A->gen[k] != B->gen[k] ||
            A->steps[k] != B->steps[k] || A->completed[k] != B->completed[k] || A->sent[k] != B->sent[k] ||
            A->running[k] != B->running[k] || A->waiting[k] != B->waiting[k] || A->free_blocks[k] != B->free_blocks[k])
            fail_msg("tick %u at %lld ns: step skipping saw %llu tokens, %llu steps, %u running, %u free blocks; "
                     "step by step %llu, %llu, %u, %u",
                     k, (long long)A->at[k], (unsigned long long)A->tokens[k], (unsigned long long)A->steps[k],
                     A->running[k], A->free_blocks[k], (unsigned long long)B->tokens[k],
                     (unsigned long long)B->steps[k], B->running[k], B->free_blocks[k]);
    }
    assert_true(a.es.steps_skipped > a.es.steps / 2);
    free_outcome(&a, 120);
    free_outcome(&b, 120);
    free(A);
    free(B);
    free(it);
}

static void sessions_with_reasoning(void **state)
{
    (void)state;
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    enum { SESS = 30, TURNS = 3, N = SESS * TURNS };
    st_emu_sim_item it[N];
    memset(it, 0, sizeof it);
    for (uint32_t s = 0; s < SESS; s++)
        for (uint32_t t = 0; t < TURNS; t++) {
            uint32_t i = t == 0 ? s : SESS + (t - 1) * SESS + s;
            it[i] = (st_emu_sim_item){ .arrival = t == 0 ? (st_ns)s * 150000000 : 0,
                                       .input_len = t == 0 ? 400 : 60,
                                       .output_len = 200 + 10 * (s % 5),
                                       .n_reason = 80,
                                       .dependent = t > 0,
                                       .next = t + 1 < TURNS ? SESS + t * SESS + s : 0,
                                       .think = t > 0 ? 300000000 : 0,
                                       .session = s + 1,
                                       .turn = t };
        }
    compare("30 sessions of 3 turns, 80 reasoning tokens", &c, it, N, NULL, 0.3, &acc_all);
    for (uint32_t i = 0; i < N; i++)
        it[i].n_reason = 0;
    compare_bare("30 sessions of 3 turns (runs past completions)", &c, it, N, NULL);
}

/* Without token times (st_emu_run_opts.no_token_times) a record has no events and every other field,
 * and the run's figures, are the reference path's. */
static void compare_bare(const char *name, const st_emu_config *c, const st_emu_sim_item *it, uint32_t n,
                         const st_emu_run_opts *o)
{
    st_emu_run_opts ob = o ? *o : (st_emu_run_opts){ 0 };
    ob.no_token_times = 1;
    outcome a, b;
    run_path(c, 0, it, n, &ob, &a);
    run_path(c, 1, it, n, o, &b);
    uint32_t answers = 0;
    for (uint32_t i = 0; i < n; i++) {
        const st_record *x = &a.rec[i], *y = &b.rec[i];
        if (x->status != y->status)
            fail_msg("%s: request %u: status %d without token times, %d with", name, i, x->status, y->status);
        if (x->n_events || x->segs)
            fail_msg("%s: request %u: %u token times kept", name, i, x->n_events);
        note(&acc_all, "sent", i, x->sent, y->sent);
        note(&acc_all, "first_token", i, x->first_token, y->first_token);
        note(&acc_all, "first_answer", i, x->first_answer, y->first_answer);
        note(&acc_all, "end", i, x->end, y->end);
        note(&acc_all, "output_tokens", i, x->output_tokens, y->output_tokens);
        note(&acc_all, "reasoning_tokens", i, x->reasoning_tokens, y->reasoning_tokens);
        note(&acc_all, "cached_tokens", i, x->cached_tokens, y->cached_tokens);
        answers += y->first_answer > y->first_token;
    }
    note(&acc_all, "duration", n, a.st.duration, b.st.duration);
    note(&acc_all, "max KV usage (ppm)", n, a.st.max_kv_usage * 1e6, b.st.max_kv_usage * 1e6);
    assert_int_equal(a.st.steps, b.st.steps);
    assert_int_equal(a.st.preemptions, b.st.preemptions);
    assert_int_equal(a.st.completed, b.st.completed);
    assert_int_equal(a.st.max_running, b.st.max_running);
    assert_int_equal(a.st.max_waiting, b.st.max_waiting);
    assert_int_equal(a.st.prefix_hits, b.st.prefix_hits);
    assert_int_equal(a.st.generated_tokens, b.st.generated_tokens);
    note(&acc_all, "busy time (ns)", n, a.st.busy_s * 1e9, b.st.busy_s * 1e9);
    assert_int_equal(a.es.evictions, b.es.evictions);
    assert_int_equal(a.es.free_blocks, b.es.free_blocks);
    assert_int_equal(a.es.finished_length, b.es.finished_length);
    assert_true(a.st.completed > 0);
    print_message("%-40s %5u requests without token times, %u first answers after reasoning\n", name, n, answers);
    free_outcome(&a, n);
    free_outcome(&b, n);
}

static void without_token_times(void **state)
{
    (void)state;
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    st_emu_sim_item *it = items(300, 20, 512, 200, 300, 40);
    for (uint32_t i = 0; i < 300; i += 2)
        it[i].n_reason = 25 + i % 50; /* the first answer token inside a run of steps */
    compare_bare("300/40 out with reasoning, 20 req/s", &c, it, 300, NULL);
    st_emu_run_opts closed = { .clients = 8 };
    compare_bare("300/40 out, 8 clients", &c, it, 300, &closed);
    /* without reasoning a run goes on past completions and sends (st_emu_skip_steps_hooked) */
    for (uint32_t i = 0; i < 300; i++)
        it[i].n_reason = 0;
    compare_bare("300/40 out, 20 req/s (runs past completions)", &c, it, 300, NULL);
    compare_bare("300/40 out, 8 clients (runs past completions)", &c, it, 300, &closed);
    st_emu_run_opts capped = { .max_concurrency = 24 };
    compare_bare("300/40 out, at most 24 in flight (runs past completions)", &c, it, 300, &capped);
    for (uint32_t i = 0; i < 300; i++)
        it[i].chat = i % 2;
    st_emu_run_opts ticks = { .tick = 250000000 };
    compare_bare("chat and completions, ticks (runs past completions)", &c, it, 300, &ticks);
    st_emu_config cn = c;
    cn.no_frontend = 1;
    compare_bare("no API-server model (runs past completions)", &cn, it, 300, &closed);
    free(it);
    c.max_num_batched_tokens = 2048;
    c.gpu_memory_utilization = 0.40;
    it = items(120, 8, 6000, 3000, 1200, 400);
    compare_bare("chunked, small KV cache (preemptions)", &c, it, 120, NULL);
    free(it);
}

/* Records of two runs that must be alike to the ns: status, times, hits and every token time. */
static void same_records(const st_record *a, const st_record *b, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        const st_record *x = &a[i], *y = &b[i];
        assert_int_equal(x->status, y->status);
        assert_int_equal(x->first_token, y->first_token);
        assert_int_equal(x->end, y->end);
        assert_int_equal(x->cached_tokens, y->cached_tokens);
        assert_int_equal(x->n_events, y->n_events);
        st_event_it ix = { 0 }, iy = { 0 };
        st_ns tx = 0, ty = 0;
        st_events_begin(&ix, x);
        st_events_begin(&iy, y);
        while (st_events_next(&ix, &tx) && st_events_next(&iy, &ty))
            assert_int_equal(tx, ty);
    }
}

/* Two runs' scheduler counters that must be equal: steps, preemptions, prefix queries and hits. */
static void same_counters(const st_emu_sim_stats *a, const st_emu_sim_stats *b)
{
    assert_int_equal(a->steps, b->steps);
    assert_int_equal(a->preemptions, b->preemptions);
    assert_int_equal(a->prefix_queries, b->prefix_queries);
    assert_int_equal(a->prefix_hits, b->prefix_hits);
}

/* Items without ids go to the engine as seeded prompts (keyed by seed, neither generated nor
 * hashed); the same items with those ids given go as ids and are hashed. On the same path, under
 * preemption (a recomputation finds its own blocks by their keys), every record, token time and
 * counter must be exactly the same. Then every third item gets a shared 2,000-token prefix: a run
 * with explicit ids sends none seeded, and the shared prefix hits as before (more hits). */
static void seeded_prompts_match_their_ids(void **state)
{
    (void)state;
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    c.max_num_batched_tokens = 2048;
    c.gpu_memory_utilization = 0.40;
    enum { N = 120 };
    st_emu_sim_item *seeded = items(N, 8, 6000, 3000, 1200, 400), *given = items(N, 8, 6000, 3000, 1200, 400);
    uint32_t *ids = malloc((size_t)N * 6000 * sizeof *ids);
    assert_non_null(ids);
    for (uint32_t i = 0; i < N; i++) {
        uint32_t *p = ids + (size_t)i * 6000;
        st_emu_output_tokens(0x5eed0000ULL + i, 0, given[i].input_len, c.model.vocab, p);
        given[i].input_ids = p;
    }
    outcome a, b;
    uint64_t hits0 = 0;
    for (int round = 0; round < 2; round++) {
        run_path(&c, 0, seeded, N, NULL, &a);
        run_path(&c, 0, given, N, NULL, &b);
        same_records(a.rec, b.rec, N);
        same_counters(&a.st, &b.st);
        assert_int_equal(a.es.evictions, b.es.evictions);
        assert_int_equal(a.es.free_blocks, b.es.free_blocks);
        assert_true(a.st.preemptions > 0);
        assert_true(a.st.prefix_hits > 0); /* the preempted requests' own blocks */
        print_message("%s: %llu preemptions, %llu prefix hits, the same with their ids\n",
                      round ? "a third with a shared prefix" : "seeded prompts", (unsigned long long)a.st.preemptions,
                      (unsigned long long)a.st.prefix_hits);
        assert_true(round == 0 || a.st.prefix_hits > hits0);
        hits0 = a.st.prefix_hits;
        free_outcome(&a, N);
        free_outcome(&b, N);
        /* every third item with a shared 2,000-token prefix: the run has explicit ids, none goes seeded */
        for (uint32_t i = 0; i < N; i += 3) {
            for (uint32_t k = 0; k < 2000; k++)
                ids[(size_t)i * 6000 + k] = 2000 + k;
            seeded[i].input_ids = given[i].input_ids;
        }
    }
    free(ids);
    free(seeded);
    free(given);
}

/* A synthetic workload (load/workload.h: a 1,000-token shared prefix, then each prompt's own tail,
 * which st_work_item.own_key names) on its items: keyed (own_key kept) or hashed (own_key 0). */
static st_emu_sim_item *synth_items(st_workload *w, uint64_t seed, int keyed, int lazy)
{
    st_synth_params p = {
        .input_len = 3000, .output_len = 600, .range_ratio = 0.3, .prefix_len = 1000, .num_requests = 120, .seed = seed
    };
    char err[256];
    assert_int_equal((lazy ? st_workload_synthetic_lazy : st_workload_synthetic)(&p, w, err, sizeof err), 0);
    st_ns *sched = calloc(w->n, sizeof *sched);
    st_emu_sim_item *it = calloc(w->n, sizeof *it);
    assert_true(sched && it);
    for (uint32_t i = 0; i < w->n; i++)
        sched[i] = (st_ns)i * 90000000; /* 11 req/s */
    st_emu_sim_items_from_workload(w, sched, it);
    for (uint32_t i = 0; i < w->n; i++) {
        assert_true(it[i].own_key != 0 && it[i].own_from == 1000);
        if (!keyed)
            it[i].own_key = 0;
    }
    free(sched);
    return it;
}

/* One session per keying (keyed lazy items, hashed whole ones) running four runs: the workload, the
 * same again (its tails hit the first run's blocks when they are still cached, by key as by ids),
 * another, and the first one's prefix with other tails, hashed in both (its prefix hits the lazy
 * items' blocks, whose hashes the run gave the engine). Every record and counter alike;
 * *preempted and *replay_hits (the second run's hits beyond the first's) out. */
static void keyed_session(const st_emu_config *c, uint64_t *preempted, uint64_t *replay_hits)
{
    st_workload w1[2], w2[2];
    st_emu_sim_item *i1[2], *i2[2];
    for (int k = 0; k < 2; k++) {
        i1[k] = synth_items(&w1[k], 11, k == 0, k == 0); /* keyed and lazy, or hashed and whole */
        i2[k] = synth_items(&w2[k], 12, k == 0, k == 0);
    }
    st_emu_session *S[2];
    st_record *rec[2];
    char err[512];
    uint64_t hits[2][4] = { { 0 } };
    for (int k = 0; k < 2; k++)
        assert_int_equal(st_emu_session_new(c, &S[k], NULL, err, sizeof err), 0);
    for (int run = 0; run < 4; run++) {
        const st_emu_sim_item *it[2] = { run == 2 ? i2[0] : i1[0], run == 2 ? i2[1] : i1[1] };
        if (run == 3) { /* the first workload's prefix with other tails, hashed in both sessions: its
                           prefix hits the keyed session's only if the chain given for it is its hash */
            for (uint32_t i = 0; i < w1[1].n; i++)
                for (uint32_t k = 1000; k < w1[1].items[i].input_len; k++)
                    w1[1].items[i].input_ids[k] += 1;
            it[0] = it[1] = i1[1];
        }
        st_emu_sim_stats st[2];
        for (int k = 0; k < 2; k++) {
            rec[k] = calloc(120, sizeof *rec[k]);
            assert_non_null(rec[k]);
            for (uint32_t i = 0; i < 120; i++)
                st_record_init(&rec[k][i], i);
            assert_int_equal(st_emu_session_run(S[k], it[k], 120, NULL, rec[k], &st[k], NULL, err, sizeof err), 0);
            st_emu_stats es;
            st_emu_session_stats(S[k], &es);
            hits[k][run] = st[k].prefix_hits;
        }
        same_records(rec[0], rec[1], 120);
        same_counters(&st[0], &st[1]);
        if (run == 0)
            *preempted = st[0].preemptions;
        for (int k = 0; k < 2; k++) {
            for (uint32_t i = 0; i < 120; i++)
                st_record_free(&rec[k][i]);
            free(rec[k]);
        }
    }
    *replay_hits = hits[0][1] - hits[0][0];
    assert_true(hits[0][3] >= 120 * 992); /* the last run's prefixes: 62 blocks each */
    print_message(
        "keyed tails in a session (%.2f of the memory): prefix hits %llu, %llu (the replay), %llu; the same hashed\n",
        c->gpu_memory_utilization, (unsigned long long)hits[0][0], (unsigned long long)hits[0][1],
        (unsigned long long)hits[0][2]);
    st_emu_stats ea, eb;
    st_emu_session_stats(S[0], &ea);
    st_emu_session_stats(S[1], &eb);
    assert_int_equal(ea.evictions, eb.evictions);
    assert_int_equal(ea.free_blocks, eb.free_blocks);
    for (int k = 0; k < 2; k++) {
        st_emu_session_free(S[k]);
        free(i1[k]);
        free(i2[k]);
        st_workload_free(&w1[k]);
        st_workload_free(&w2[k]);
    }
}

/* The product's synthetic prompts: their own tails keyed (emu/sim.h own_key) run exactly as hashed:
 * in multi-run sessions (as predict's), with preemptions on a small KV cache and with a replay that
 * finds the first run's tails on a large one; and one-run sessions against the step-by-step path
 * (which hashes every prompt). */
static void keyed_tails_match_their_ids(void **state)
{
    (void)state;
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    c.max_num_batched_tokens = 2048;
    uint64_t pre, replay;
    c.gpu_memory_utilization = 0.40;
    keyed_session(&c, &pre, &replay);
    assert_true(pre > 0);
    c.gpu_memory_utilization = 0.90;
    keyed_session(&c, &pre, &replay);
    assert_true(replay > 60 * 2000); /* tails beyond the shared prefix */
    c.gpu_memory_utilization = 0.40;
    st_workload w;
    st_emu_sim_item *it = synth_items(&w, 13, 1, 1); /* step by step, a lazy item's ids are drawn */
    compare("qwen3-8b/h100 synthetic keyed tails, one run", &c, it, w.n, NULL, 0.3, &acc_all);
    free(it);
    st_workload_free(&w);
}

/* An engine of c on vc's virtual clock, and a 100-token prompt's ids (5000, 5001, ...) in ids. */
static st_emu_engine *engine_and_ids(const st_emu_config *c, st_vclock *vc, uint32_t ids[100])
{
    st_emu_engine *e;
    char err[256];
    if (st_emu_engine_new(c, st_clock_virtual(vc), &e, NULL, err, sizeof err))
        fail_msg("%s", err);
    for (uint32_t k = 0; k < 100; k++)
        ids[k] = 5000 + k;
    return e;
}

/* A run of steps never passes the caller's horizon, and what it reports adds up. */
static void runs_stop_at_the_horizon(void **state)
{
    (void)state;
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    c.no_frontend = 1; /* requests reach the engine core at once */
    st_vclock vc = { 0 };
    char err[256];
    uint32_t ids[100];
    st_emu_engine *e = engine_and_ids(&c, &vc, ids);
    for (uint64_t id = 1; id <= 4; id++) {
        st_emu_req_params p = { .id = id, .ids = ids, .n_ids = 100, .max_tokens = 50 + 10 * id, .arrival = 0 };
        assert_int_equal(st_emu_add_request(e, &p, err, sizeof err), ST_EMU_ADD_OK);
    }
    st_emu_step_result res;
    st_emu_skip_result sk;
    /* waiting requests to admit: the prefill step is st_emu_step's */
    assert_int_equal(st_emu_skip_steps(e, INT64_MAX, &sk), 1);
    assert_int_equal(st_emu_step(e, &res), 0);
    vc.t = res.start + res.duration;
    /* a horizon 5.5 steps away: about five steps, each starting before it */
    st_ns horizon = vc.t + 55 * (res.duration / 10) + 1;
    assert_int_equal(st_emu_skip_steps(e, horizon, &sk), 0);
    assert_true(sk.steps >= 1);
    assert_int_equal(sk.seqs, 4);
    assert_true(sk.start[sk.steps - 1] < horizon);
    assert_true(sk.start[sk.steps] >= horizon); /* ended by the horizon */
    for (uint32_t j = 0; j < sk.steps; j++) {
        assert_true(sk.start[j + 1] > sk.start[j]);
        assert_true(sk.due[j] >= sk.start[j + 1]); /* tokens reach clients at the step's end or later */
    }
    for (uint32_t q = 0; q < sk.seqs; q++) {
        assert_int_equal(sk.seq[q].n_out, 1);
        assert_int_equal(sk.seq[q].finish, ST_EMU_NOT_FINISHED);
    }
    vc.t = sk.start[sk.steps];
    /* runs go on to the step in which the shortest request (60 tokens: the prefill's and 59
     * decodes) finishes, and end with it */
    uint32_t done = 1 + sk.steps;
    while (st_emu_skip_steps(e, INT64_MAX, &sk) == 0) {
        done += sk.steps;
        vc.t = sk.start[sk.steps];
        if (sk.seq[0].finish)
            break;
    }
    assert_int_equal(done, 60);
    assert_int_equal(sk.seqs, 4);
    assert_int_equal(sk.seq[0].finish, ST_EMU_FINISH_LENGTH);
    assert_int_equal(sk.seq[1].finish, ST_EMU_NOT_FINISHED);
    st_emu_stats es;
    st_emu_get_stats(e, &es);
    assert_int_equal(es.running, 3);
    assert_int_equal(es.finished_length, 1);
    assert_int_equal(es.generation_tokens, 4 * 60);
    assert_int_equal(st_emu_engine_check(e, err, sizeof err), 0);
    st_emu_engine_free(e);
}

static st_ns no_event(void *arg, st_ns t)
{
    (void)arg;
    (void)t;
    return INT64_MAX;
}

static st_ns count_finished(void *arg, const st_emu_skip_seq *sq, uint32_t tokens, st_ns due)
{
    (void)sq;
    (void)tokens;
    (void)due;
    (*(uint32_t *)arg)++;
    return INT64_MAX;
}

/* A followed run that goes on past completions and ends at the horizon gives each running request's
 * entry its place on the API server's queue after the completions: the sum of the running ones' shares
 * up to it, in running order, as frontend_due sums them (with equal shares, and with a chat request's
 * larger one among them). */
static void followed_run_queue_offsets(void **state)
{
    (void)state;
    for (int mixed = 0; mixed <= 1; mixed++) {
        st_emu_config c;
        emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
        st_vclock vc = { 0 };
        char err[256];
        uint32_t ids[100];
        st_emu_engine *e = engine_and_ids(&c, &vc, ids);
        for (uint64_t id = 1; id <= 8; id++) {
            st_emu_req_params p = {
                .id = id, .ids = ids, .n_ids = 100, .max_tokens = 10 + 10 * id, .chat = mixed && id == 7, .arrival = 0
            };
            assert_int_equal(st_emu_add_request(e, &p, err, sizeof err), ST_EMU_ADD_OK);
        }
        st_emu_step_result res;
        st_emu_stats es;
        do { /* every one admitted (they leave the API server one after another) */
            int rc = st_emu_step(e, &res);
            vc.t = rc == 1 ? st_emu_next_ready(e) : res.start + res.duration;
            st_emu_get_stats(e, &es);
        } while (es.waiting > 0);
        assert_int_equal(st_emu_step(e, &res), 0); /* a decode step: its time */
        vc.t = res.start + res.duration;
        uint32_t finished = 0;
        st_emu_skip_hooks hk = { .due = no_event, .finished = count_finished, .arg = &finished, .next = INT64_MAX };
        st_emu_skip_result sk;
        assert_int_equal(st_emu_skip_steps_hooked(e, vc.t + 45 * res.duration, &hk, &sk), 0);
        assert_true(finished >= 2 && finished < 8); /* some finished in the run, some run on */
        double per = c.tune.fe_token_cpu_s * 1e9, done = 0;
        uint32_t live = 0;
        for (uint32_t q = 0; q < sk.seqs; q++) {
            if (sk.seq[q].finish)
                continue;
            done += per * st_emu_fe_factor(&c.tune, mixed && sk.seq[q].id == 7);
            assert_int_equal(sk.seq[q].due_off, (st_ns)done);
            live++;
        }
        assert_int_equal(live + finished, 8);
        st_emu_engine_free(e);
    }
}

/* A waiting request that a step admits joins the run: its prefill is in that step's batch, its first
 * token comes at the step's end (from, first, cached_tokens) and it decodes from the next step on. A
 * prompt over the step's token budget (a chunked prefill) ends the run with the step that admits it,
 * and the next step is st_emu_step's. */
static void runs_take_admissions(void **state)
{
    (void)state;
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    c.no_frontend = 1;
    c.max_num_batched_tokens = 2048;
    st_vclock vc = { 0 };
    st_emu_engine *e;
    char err[256];
    assert_int_equal(st_emu_engine_new(&c, st_clock_virtual(&vc), &e, NULL, err, sizeof err), 0);
    static uint32_t ids[3000];
    for (uint32_t k = 0; k < 3000; k++)
        ids[k] = 7000 + k;
    for (uint64_t id = 1; id <= 4; id++) {
        st_emu_req_params p = { .id = id, .ids = ids, .n_ids = 100, .max_tokens = 200, .arrival = 0 };
        assert_int_equal(st_emu_add_request(e, &p, err, sizeof err), ST_EMU_ADD_OK);
    }
    st_emu_step_result res;
    st_emu_skip_result sk;
    assert_int_equal(st_emu_step(e, &res), 0);
    assert_int_equal(res.n_admitted, 4);
    vc.t = res.start + res.duration;
    /* the same 100-token prompt: its 6 full blocks are cached */
    st_emu_req_params p5 = { .id = 5, .ids = ids, .n_ids = 100, .max_tokens = 400, .arrival = vc.t };
    assert_int_equal(st_emu_add_request(e, &p5, err, sizeof err), ST_EMU_ADD_OK);
    assert_int_equal(st_emu_skip_steps(e, INT64_MAX, &sk), 0);
    /* the run goes on to the step in which the first four finish (their 199 decodes) */
    assert_int_equal(sk.steps, 199);
    assert_int_equal(sk.seqs, 5);
    for (uint32_t q = 0; q < 4; q++) {
        assert_int_equal(sk.seq[q].from, 0);
        assert_int_equal(sk.seq[q].first, 0);
        assert_int_equal(sk.seq[q].finish, ST_EMU_FINISH_LENGTH);
    }
    const st_emu_skip_seq *j5 = &sk.seq[4];
    assert_int_equal(j5->id, 5);
    assert_true(j5->from <= 1); /* with async scheduling it reaches the step after next */
    assert_int_equal(j5->first, 1);
    assert_int_equal(j5->n_out, 0);
    assert_int_equal(j5->cached_tokens, 96);
    assert_int_equal(j5->finish, ST_EMU_NOT_FINISHED);
    assert_int_equal(sk.waiting_peak, j5->from == 0 ? 0 : 1);
    st_emu_stats es;
    st_emu_get_stats(e, &es);
    assert_int_equal(es.running, 1);
    assert_int_equal(es.waiting, 0);
    assert_int_equal(es.generation_tokens, 4 * 200 + (199 - j5->from));
    assert_int_equal(es.prompt_tokens, 5 * 100);
    vc.t = sk.start[sk.steps];
    /* a 3,000-token prompt over the 2,048-token budget: admitted with a chunk, the run ends with that step */
    st_emu_req_params p6 = { .id = 6, .ids = ids, .n_ids = 3000, .max_tokens = 10, .arrival = vc.t };
    assert_int_equal(st_emu_add_request(e, &p6, err, sizeof err), ST_EMU_ADD_OK);
    assert_int_equal(st_emu_skip_steps(e, INT64_MAX, &sk), 0);
    assert_int_equal(sk.seqs, 2);
    assert_int_equal(sk.seq[1].id, 6);
    assert_int_equal(sk.seq[1].from, sk.steps); /* no token in the run */
    assert_int_equal(sk.seq[1].first, 0);
    assert_true(sk.steps <= 2);
    vc.t = sk.start[sk.steps];
    st_emu_get_stats(e, &es);
    assert_int_equal(es.running, 2);
    /* the rest of its prompt is st_emu_step's, with its first token */
    assert_int_equal(st_emu_skip_steps(e, INT64_MAX, &sk), 1);
    assert_int_equal(st_emu_step(e, &res), 0);
    assert_int_equal(res.n_events, 2);
    assert_int_equal(res.events[1].id, 6);
    assert_int_equal(res.events[1].first, 1);
    assert_int_equal(st_emu_engine_check(e, err, sizeof err), 0);
    st_emu_engine_free(e);
}

/* Random workloads on random engine settings: block sizes (1 takes and registers a block in
 * the same step), prefix caching off, a small max_num_seqs (requests queue for a slot), async
 * scheduling (every other round),
 * --enforce-eager, a decode slowdown, a small KV cache, Poisson arrivals, outputs of 1 token up,
 * shared prompts. */
static void random_workloads(void **state)
{
    (void)state;
    static const char *gpus[] = { "H100", "A100", "L40S", "H200" };
    static const char *models[] = { "Qwen/Qwen3-8B", "Qwen/Qwen3-0.6B", "meta-llama/Llama-3.1-8B-Instruct" };
    static const uint32_t blocks[] = { 1, 8, 16, 32 };
    st_rng rng;
    st_rng_seed(&rng, 20261202);
    static uint32_t shared[4000]; /* every third round's prompts: prefixes of one text (prefix hits) */
    for (uint32_t k = 0; k < 4000; k++)
        shared[k] = 1000 + st_rng_range(&rng, 0, 100000);
    for (uint32_t round = 0; round < 16; round++) {
        st_emu_config c;
        emu_config_of(&c, gpus[st_rng_range(&rng, 0, 3)], models[st_rng_range(&rng, 0, 2)]);
        c.block_size = blocks[st_rng_range(&rng, 0, 3)];
        c.enable_prefix_caching = st_rng_range(&rng, 0, 3) != 0;
        c.max_num_seqs = st_rng_range(&rng, 0, 1) ? st_rng_range(&rng, 2, 24) : 0;
        c.max_num_batched_tokens = st_rng_range(&rng, 0, 1) ? 1024 * st_rng_range(&rng, 1, 4) : 0;
        c.enforce_eager = st_rng_range(&rng, 0, 4) == 0;
        c.decode_slowdown = st_rng_range(&rng, 0, 4) == 0 ? 1.5 : 1.0;
        c.gpu_memory_utilization = st_rng_range(&rng, 0, 2) == 0 ? 0.35 : 0.90;
        c.async_scheduling = round % 2 ? 1 : -1; /* (none at the tests' default version) */
        if (c.model.max_position > 16384)
            c.max_model_len = 16384;
        st_emu_config probe = c;
        st_emu_memory mem;
        char why[512];
        if (st_emu_memory_plan(&probe, &mem, why, sizeof why) < 0)
            c.gpu_memory_utilization = 0.90; /* the small KV cache does not hold one sequence here */
        uint32_t n = st_rng_range(&rng, 20, 120);
        double rate = 0.5 + 20 * st_rng_uniform(&rng);
        st_emu_sim_item *it = calloc(n, sizeof *it);
        assert_non_null(it);
        st_ns at = 0;
        for (uint32_t i = 0; i < n; i++) {
            at += (st_ns)(st_rng_exp(&rng, rate) * 1e9);
            it[i] = (st_emu_sim_item){ .arrival = at,
                                       .input_len = st_rng_range(&rng, 1, 4000),
                                       .output_len = st_rng_range(&rng, 0, 3) ? st_rng_range(&rng, 1, 1500) : 1,
                                       .chat = (int)st_rng_range(&rng, 0, 1),
                                       .n_reason = st_rng_range(&rng, 0, 2) == 0 ? st_rng_range(&rng, 0, 200) : 0 };
            if (round % 3 == 0)
                it[i].input_ids = shared;
        }
        st_emu_run_opts o = { 0 };
        uint32_t mode = st_rng_range(&rng, 0, 2);
        if (mode == 1)
            o.max_concurrency = st_rng_range(&rng, 1, 40);
        else if (mode == 2)
            o.clients = st_rng_range(&rng, 1, 40);
        char name[96];
        snprintf(name, sizeof name, "random %u: bs %u%s seqs %u%s%s%s", round, c.block_size,
                 c.enable_prefix_caching ? "" : " no-cache", c.max_num_seqs, c.enforce_eager ? " eager" : "",
                 c.async_scheduling == 1 ? " async" : "",
                 mode == 2   ? " closed"
                 : mode == 1 ? " capped"
                             : "");
        compare(name, &c, it, n, &o, 0.0, &acc_all);
        for (uint32_t i = 0; i < n; i++)
            it[i].n_reason = 0;
        snprintf(name + strlen(name), sizeof name - strlen(name), " bare");
        compare_bare(name, &c, it, n, &o); /* runs past completions and sends */
        free(it);
    }
}

/* ---- adversarial cases: each one a behaviour where a run of steps could part from st_emu_step ---- */

/* Engine level: drives e to engine time `until` by runs of steps then st_emu_step (skip), or by
 * st_emu_step alone; both stop at the same step boundary (the first step starting at `until` or later). */
static void drive(st_emu_engine *e, st_vclock *vc, int skip, st_ns until)
{
    while (vc->t < until) {
        if (skip) {
            st_emu_skip_result sk;
            int kr = st_emu_skip_steps(e, until, &sk);
            assert_true(kr >= 0);
            if (kr == 0) {
                vc->t = sk.start[sk.steps];
                continue;
            }
        }
        st_emu_step_result res;
        int sr = st_emu_step(e, &res);
        assert_true(sr >= 0);
        if (sr == 0) {
            vc->t = res.start + res.duration;
            continue;
        }
        st_ns nr = st_emu_next_ready(e);
        if (nr < 0)
            break;
        vc->t = nr > vc->t ? nr : vc->t + 1;
    }
}

/* Two engines' counters and clocks that must be equal. */
static void same_engines(const char *what, st_emu_engine *a, const st_vclock *va, st_emu_engine *b, const st_vclock *vb)
{
    st_emu_stats x, y;
    st_emu_get_stats(a, &x);
    st_emu_get_stats(b, &y);
    if (va->t != vb->t || x.steps != y.steps || x.generation_tokens != y.generation_tokens ||
        x.prompt_tokens != y.prompt_tokens || x.finished_length != y.finished_length ||
        x.finished_abort != y.finished_abort || x.running != y.running || x.waiting != y.waiting ||
        x.free_blocks != y.free_blocks || x.prefix_hits != y.prefix_hits || x.preemptions != y.preemptions)
        fail_msg("%s: with runs of steps %lld ns, %llu steps, %llu tokens, %u running, %u free blocks; step by "
                 "step %lld ns, %llu, %llu, %u, %u",
                 what, (long long)va->t, (unsigned long long)x.steps, (unsigned long long)x.generation_tokens,
                 x.running, x.free_blocks, (long long)vb->t, (unsigned long long)y.steps,
                 (unsigned long long)y.generation_tokens, y.running, y.free_blocks);
    char err[256];
    assert_int_equal(st_emu_engine_check(a, err, sizeof err), 0);
    assert_int_equal(st_emu_engine_check(b, err, sizeof err), 0);
}

/* Four 100-token prompts prefilled, then request 5 waits while held (st_emu_hold on a waiting request):
 * st_emu_step admits it, prefills it and gives its first token, then leaves it out of the steps; a run
 * that admits it must not decode it. Then request 2 is aborted between runs (st_emu_abort) and request
 * 5 released: the runs after it go on as the steps do. */
static void held_joiner_and_abort_between_runs(void **state)
{
    (void)state;
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    c.no_frontend = 1;
    static uint32_t ids[400];
    for (uint32_t k = 0; k < 400; k++)
        ids[k] = 9000 + k;
    st_vclock vc[2] = { { 0 }, { 0 } };
    st_emu_engine *e[2];
    char err[256];
    for (int p = 0; p < 2; p++) {
        assert_int_equal(st_emu_engine_new(&c, st_clock_virtual(&vc[p]), &e[p], NULL, err, sizeof err), 0);
        for (uint64_t id = 1; id <= 4; id++) {
            st_emu_req_params q = { .id = id, .ids = ids, .n_ids = 100, .max_tokens = 150 + 40 * id, .arrival = 0 };
            assert_int_equal(st_emu_add_request(e[p], &q, err, sizeof err), ST_EMU_ADD_OK);
        }
        st_emu_step_result res;
        assert_int_equal(st_emu_step(e[p], &res), 0);
        vc[p].t = res.start + res.duration;
        st_emu_req_params q5 = { .id = 5, .ids = ids + 50, .n_ids = 300, .max_tokens = 300, .arrival = vc[p].t };
        assert_int_equal(st_emu_add_request(e[p], &q5, err, sizeof err), ST_EMU_ADD_OK);
        assert_int_equal(st_emu_hold(e[p], 5, 1), 0);
    }
    st_ns t1 = vc[0].t + 400000000; /* 0.4 s: well into the decodes */
    for (int p = 0; p < 2; p++)
        drive(e[p], &vc[p], p == 0, t1);
    same_engines("a held request admitted in a run", e[0], &vc[0], e[1], &vc[1]);
    for (int p = 0; p < 2; p++) {
        assert_int_equal(st_emu_abort(e[p], 2), 0);
        assert_int_equal(st_emu_hold(e[p], 5, 0), 0);
        st_emu_req_params q6 = { .id = 6, .ids = ids, .n_ids = 120, .max_tokens = 1, .arrival = vc[p].t };
        assert_int_equal(st_emu_add_request(e[p], &q6, err, sizeof err), ST_EMU_ADD_OK);
    }
    for (int p = 0; p < 2; p++)
        drive(e[p], &vc[p], p == 0, INT64_MAX);
    same_engines("after an abort between runs", e[0], &vc[0], e[1], &vc[1]);
    st_emu_stats es;
    st_emu_get_stats(e[0], &es);
    assert_int_equal(es.finished_abort, 1);
    assert_int_equal(es.finished_length, 5);
    assert_true(es.steps_skipped > es.steps / 2);
    for (int p = 0; p < 2; p++)
        st_emu_engine_free(e[p]);
}

/* Block sizes that are not powers of two (the groups' step mod bs by division) and 1, with prefix
 * hits on a shared text (joiners hit blocks the running ones registered in the run), open and closed. */
static void block_sizes_not_powers_of_two(void **state)
{
    (void)state;
    static const uint32_t sizes[] = { 3, 24, 48, 1 };
    static uint32_t shared[3000];
    for (uint32_t k = 0; k < 3000; k++)
        shared[k] = 2000 + (k * 7919) % 90000;
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        st_emu_config c;
        emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
        c.block_size = sizes[s];
        st_emu_sim_item *it = items(90, 15, 700, 1300, 250, 70);
        for (uint32_t i = 0; i < 90; i += 2)
            it[i].input_ids = shared; /* prefixes of one text */
        char name[96];
        snprintf(name, sizeof name, "block size %u, shared prefixes", sizes[s]);
        compare(name, &c, it, 90, NULL, 0.2, &acc_all);
        st_emu_run_opts closed = { .clients = 12 };
        snprintf(name, sizeof name, "block size %u, 12 clients (bare)", sizes[s]);
        compare_bare(name, &c, it, 90, &closed);
        free(it);
    }
}

/* Bursts of short prompts: several admissions in one step against max_num_seqs (9) and the token budget
 * (the last one chunked), with and without async scheduling, and with requests that reach the engine
 * core inside runs (async scheduling's cutoff), on both drivers. */
static void several_admissions_per_step(void **state)
{
    (void)state;
    static const char *what[] = { ", async", ", no async", ", async, 25 ms to the engine core" };
    for (int v = 0; v < 3; v++) {
        st_emu_config c;
        emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
        c.max_num_seqs = 9;
        c.max_num_batched_tokens = 1024;
        c.async_scheduling = v != 1; /* (the tests' default version, 0.10.1, has none) */
        if (v == 2) /* requests reach the engine core steps after they are sent: inside runs, where async
                       scheduling's cutoff (the previous step's start) decides their step */
            c.tune.fe_latency_s = 0.025, c.max_num_seqs = 0;
        st_emu_sim_item *it = items(160, 300, 180, 450, 120, 35);
        for (uint32_t i = 0; i < 160; i++)
            it[i].arrival = (st_ns)(i / 8) * 150000000; /* bursts of 8 every 150 ms */
        for (uint32_t i = 0; v == 2 && i < 160; i++)
            it[i].output_len *= 4; /* the bursts overlap: they arrive while the engine is busy */
        char name[96];
        snprintf(name, sizeof name, "bursts, 1,024-token budget%s", what[v]);
        compare(name, &c, it, 160, NULL, 0.2, &acc_all);
        snprintf(name, sizeof name, "bursts, 1,024 budget%s (bare)", what[v]);
        compare_bare(name, &c, it, 160, NULL);
        st_emu_run_opts capped = { .max_concurrency = 13 };
        compare_bare(name, &c, it, 160, &capped);
        free(it);
    }
}

/* Async scheduling (vLLM 0.14 on; the default version here is before it): a step admits only the
 * requests that reached the engine core by the previous step's start, inside runs as between them. Open
 * loop, capped, closed, chat and completions, sessions, with token times and without (runs past
 * completions), and with the API server's latency spread over several steps. */
static void async_scheduling_on_both_drivers(void **state)
{
    (void)state;
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    c.async_scheduling = 1;
    st_emu_sim_item *it = items(240, 25, 600, 200, 300, 60);
    for (uint32_t i = 0; i < 240; i++)
        it[i].chat = i % 3 == 0;
    st_emu_run_opts capped = { .max_concurrency = 20 }, closed = { .clients = 16 };
    for (int lat = 0; lat < 2; lat++) {
        if (lat)
            c.tune.fe_latency_s = 0.03; /* several steps between a send and the engine core */
        compare(lat ? "async, 30 ms to the engine core" : "async, open loop", &c, it, 240, NULL, 0.3, &acc_all);
        compare(lat ? "async, 30 ms, 16 clients" : "async, 16 clients", &c, it, 240, &closed, 0.3, &acc_all);
        compare_bare(lat ? "async, 30 ms (bare)" : "async, open loop (bare)", &c, it, 240, NULL);
        compare_bare(lat ? "async, 30 ms, at most 20 (bare)" : "async, at most 20 (bare)", &c, it, 240, &capped);
        compare_bare(lat ? "async, 30 ms, 16 clients (bare)" : "async, 16 clients (bare)", &c, it, 240, &closed);
    }
    free(it);
}

/* Requests that finish where they are admitted (max_tokens 1), that run to max_model_len (no max_tokens),
 * and prompts refused from inside a run (empty, too long): closed loop and capped, where each refusal
 * frees a slot that sends the next item from the hook. */
static void one_token_max_model_len_and_refusals(void **state)
{
    (void)state;
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    c.max_model_len = 2048;
    st_emu_sim_item *it = items(150, 30, 300, 900, 200, 60);
    for (uint32_t i = 0; i < 150; i++) {
        if (i % 5 == 1)
            it[i].output_len = 1;
        else if (i % 5 == 2)
            it[i].output_len = 0, it[i].input_len = 1800 + i; /* to max_model_len: 248 - i tokens */
        else if (i % 11 == 3)
            it[i].input_len = 0; /* "The prompt cannot be empty." */
        else if (i % 13 == 4)
            it[i].input_len = 2100; /* over max_model_len */
    }
    compare("max_tokens 1, to max_model_len, refusals", &c, it, 150, NULL, 0.1, &acc_all);
    st_emu_run_opts closed = { .clients = 10 }, capped = { .max_concurrency = 7 };
    compare("max_tokens 1, to max_model_len, refusals, 10 clients", &c, it, 150, &closed, 0.1, &acc_all);
    compare_bare("max_tokens 1, max_model_len, refusals (bare)", &c, it, 150, NULL);
    compare_bare("the same, 10 clients (bare)", &c, it, 150, &closed);
    compare_bare("the same, at most 7 in flight (bare)", &c, it, 150, &capped);
    free(it);
}

/* A token budget barely over the decodes (48 tokens, up to 40 sequences): a joiner gets what the
 * step's decodes leave, its prefill chunked to it, and the next joiner waits for a step with room; prompts
 * one token short of max_model_len finish where they are admitted. */
static void tight_budget_and_context(void **state)
{
    (void)state;
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-0.6B");
    c.max_num_batched_tokens = 48;
    c.max_num_seqs = 40;
    c.max_model_len = 512;
    st_emu_sim_item *it = items(200, 60, 9, 30, 120, 25);
    for (uint32_t i = 0; i < 200; i++)
        it[i].input_len = 1 + (i * 7) % 23,             /* prompts of 1 to 23 tokens: some steps have one token left */
            it[i].arrival = (st_ns)(i / 6) * 100000000; /* in bursts of 6: several joiners a step */
    for (uint32_t i = 0; i < 200; i += 9)
        it[i].input_len = 511, it[i].output_len = 0; /* max_tokens 1: max_model_len at admission */
    for (int a = 0; a < 2; a++) {
        c.async_scheduling = a;
        st_emu_run_opts closed = { .clients = 30 };
        compare(a ? "48-token budget, async" : "48-token budget", &c, it, 200, NULL, 0.1, &acc_all);
        compare_bare(a ? "48-token budget, async (bare)" : "48-token budget (bare)", &c, it, 200, NULL);
        compare_bare(a ? "48-token budget, async, 30 clients (bare)" : "48-token budget, 30 clients (bare)", &c, it,
                     200, &closed);
    }
    free(it);
}

/* Requests that bring their prompt's KV (kv_external, a disaggregated decode worker's) join runs with
 * one token to compute; preempted ones recompute it all. */
static void kv_external_joiners(void **state)
{
    (void)state;
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    st_emu_sim_item *it = items(120, 25, 1500, 3000, 300, 120);
    for (uint32_t i = 0; i < 120; i++)
        it[i].kv_external = i % 3 ? it[i].input_len : it[i].input_len / 2;
    compare("kv_external joiners", &c, it, 120, NULL, 0.3, &acc_all);
    compare_bare("kv_external joiners (bare)", &c, it, 120, NULL);
    c.gpu_memory_utilization = 0.40;
    c.max_num_batched_tokens = 2048;
    compare_bare("kv_external joiners, small KV cache (bare)", &c, it, 120, NULL);
    free(it);
}

/* A run pops its anonymous sequences' blocks together, yet before a named block's registration: a
 * 16-block cache where A's full decode block (hash H, free) heads the free queue when, in one step, the
 * anonymous C (admitted first) takes a block and B (A's id and prompt again) fills its decode block with
 * H. Step by step C's take evicts H first and B's block then holds it; popped after B's registration it
 * would find H cached by A's block (kept) and then evict it. E, whose prompt is A's prompt and output,
 * finds its third block only in the first case. */
static void anonymous_takes_before_a_registration(void **state)
{
    (void)state;
    uint32_t P[49];
    for (uint32_t k = 0; k < 32; k++)
        P[k] = 3000 + k;
    st_emu_config c;
    emu_small_config(&c, 16, 8, 512);
    c.max_model_len = 256;                                   /* (what 16 blocks hold) */
    st_emu_output_tokens(100, 0, 17, c.model.vocab, P + 32); /* A's and B's output (id 100) */
    st_emu_engine *e[2];
    st_vclock vc[2] = { { 0 }, { 0 } };
    char err[256];
    for (int skip = 0; skip < 2; skip++) {
        if (st_emu_engine_new(&c, st_clock_virtual(&vc[skip]), &e[skip], NULL, err, sizeof err))
            fail_msg("%s", err);
        st_emu_stats st;
        st_emu_get_stats(e[skip], &st);
        assert_int_equal(st.num_blocks, 16);
        st_emu_req_params a = { .id = 100, .ids = P, .n_ids = 32, .max_tokens = 17 };
        assert_int_equal(st_emu_add_request(e[skip], &a, err, sizeof err), ST_EMU_ADD_OK);
        drive(e[skip], &vc[skip], skip, INT64_MAX);
        /* C: 161 seeded tokens in 11 blocks, its 12th taken at its 16th decode step; B hits A's first
         * block, takes one block at admission and one at its first decode step (the last never-taken
         * one), and fills its third (H) at its 16th, when both finish */
        st_emu_req_params cc = { .id = 200, .n_ids = 161, .max_tokens = 17, .seeded = 1, .seed = 77 };
        cc.arrival = a.arrival = vc[skip].t;
        assert_int_equal(st_emu_add_request(e[skip], &cc, err, sizeof err), ST_EMU_ADD_OK);
        assert_int_equal(st_emu_add_request(e[skip], &a, err, sizeof err), ST_EMU_ADD_OK);
        drive(e[skip], &vc[skip], skip, INT64_MAX);
        st_emu_req_params x = { .id = 300, .ids = P, .n_ids = 49, .max_tokens = 2, .arrival = vc[skip].t };
        assert_int_equal(st_emu_add_request(e[skip], &x, err, sizeof err), ST_EMU_ADD_OK);
        drive(e[skip], &vc[skip], skip, INT64_MAX);
        st_emu_get_stats(e[skip], &st);
        print_message("%s: %llu prefix hits, %llu steps in runs\n", skip ? "runs of steps" : "step by step",
                      (unsigned long long)st.prefix_hits, (unsigned long long)st.steps_skipped);
        assert_int_equal(st.prefix_hits, 16 + 48); /* B's first block, E's three */
        assert_true(!skip || st.steps_skipped > 0);
    }
    same_engines("anonymous takes before a registration", e[1], &vc[1], e[0], &vc[0]);
    for (int k = 0; k < 2; k++)
        st_emu_engine_free(e[k]);
}

/* A small KV cache with a large token budget: requests preempted between runs are admitted again inside
 * runs that go on past completions (their blocks freed in the run), to recompute prompt and output. */
static void preempted_readmitted_in_runs(void **state)
{
    (void)state;
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    c.gpu_memory_utilization = 0.36;
    st_emu_sim_item *it = items(160, 40, 2500, 1200, 1500, 300);
    st_emu_stats es = compare("small KV cache, long outputs", &c, it, 160, NULL, 0.2, &acc_all);
    assert_true(es.preemptions > 0);
    compare_bare("small KV cache, long outputs (bare)", &c, it, 160, NULL);
    st_emu_run_opts closed = { .clients = 60 };
    compare_bare("small KV cache, 60 clients (bare)", &c, it, 160, &closed);
    free(it);
}

/* Without token times: timeouts at ticks (st_emu_abort between runs) and what each tick sees. */
static void timeouts_and_ticks_without_token_times(void **state)
{
    (void)state;
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    c.gpu_memory_utilization = 0.5;
    st_emu_sim_item *it = items(200, 15, 1200, 300, 900, 150);
    tick_log *A = calloc(1, sizeof *A), *B = calloc(1, sizeof *B);
    assert_non_null(A);
    assert_non_null(B);
    st_emu_run_opts oa = {
        .tick = 100000000, .on_tick = log_tick, .arg = A, .timeout = 5000000000LL, .no_token_times = 1
    };
    st_emu_run_opts ob = oa;
    ob.arg = B;
    ob.no_token_times = 0;
    outcome a, b;
    run_path(&c, 0, it, 200, &oa, &a);
    run_path(&c, 1, it, 200, &ob, &b);
    uint32_t timed_out = 0;
    for (uint32_t i = 0; i < 200; i++) {
        if (a.rec[i].status != b.rec[i].status || a.rec[i].end != b.rec[i].end ||
            a.rec[i].output_tokens != b.rec[i].output_tokens || a.rec[i].first_token != b.rec[i].first_token)
            fail_msg("request %u: status %d, end %lld, %u tokens without token times; %d, %lld, %u step by step", i,
                     a.rec[i].status, (long long)a.rec[i].end, a.rec[i].output_tokens, b.rec[i].status,
                     (long long)b.rec[i].end, b.rec[i].output_tokens);
        timed_out += a.rec[i].status == ST_REQ_TIMEOUT;
    }
    assert_true(timed_out > 0);
    assert_int_equal(A->n, B->n);
    for (uint32_t k = 0; k < A->n; k++)
        if (A->at[k] != B->at[k] || A->tokens[k] != B->tokens[k] || A->gen[k] != B->gen[k] ||
            A->steps[k] != B->steps[k] || A->completed[k] != B->completed[k] || A->sent[k] != B->sent[k] ||
            A->running[k] != B->running[k] || A->waiting[k] != B->waiting[k] || A->free_blocks[k] != B->free_blocks[k])
            fail_msg("tick %u: %llu tokens, %llu steps, %u running, %u waiting without token times; %llu, %llu, %u, "
                     "%u step by step",
                     k, (unsigned long long)A->tokens[k], (unsigned long long)A->steps[k], A->running[k], A->waiting[k],
                     (unsigned long long)B->tokens[k], (unsigned long long)B->steps[k], B->running[k], B->waiting[k]);
    assert_int_equal(a.st.steps, b.st.steps);
    assert_true(a.es.steps_skipped > a.es.steps / 3);
    print_message("timeouts without token times: %u timed out, %u ticks alike\n", timed_out, A->n);
    free_outcome(&a, 200);
    free_outcome(&b, 200);
    free(A);
    free(B);
    free(it);
}

/* A session of three runs (as predict's: not one-run, so prompts are hashed on both paths and a
 * replay hits the run before's blocks), on a KV cache small enough to preempt: the engine's state
 * carried from one run to the next (clocks, the API server's queue, cached blocks) and every record
 * alike with runs past completions and step by step. */
static void multi_run_sessions_without_token_times(void **state)
{
    (void)state;
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    c.gpu_memory_utilization = 0.40;
    c.async_scheduling = 1;
    enum { N = 150 };
    st_emu_sim_item *it = items(N, 30, 1800, 700, 400, 90);
    for (uint32_t i = 0; i < N; i++)
        it[i].chat = i % 2;
    st_emu_session *S[2];
    char err[512];
    st_emu_run_opts bare = { .no_token_times = 1 }, closed = { .clients = 24 };
    for (int p = 0; p < 2; p++) {
        st_emu_config cp = c;
        cp.step_by_step = p;
        assert_int_equal(st_emu_session_new(&cp, &S[p], NULL, err, sizeof err), 0);
    }
    uint64_t pre = 0, hits = 0;
    for (int run = 0; run < 3; run++) {
        st_record *rec[2];
        st_emu_sim_stats st[2];
        for (int p = 0; p < 2; p++) {
            st_emu_run_opts o = run == 1 ? closed : (st_emu_run_opts){ 0 };
            o.no_token_times = p == 0 ? bare.no_token_times : 0;
            rec[p] = calloc(N, sizeof *rec[p]);
            assert_non_null(rec[p]);
            for (uint32_t i = 0; i < N; i++)
                st_record_init(&rec[p][i], i);
            if (st_emu_session_run(S[p], it, N, &o, rec[p], &st[p], NULL, err, sizeof err) < 0)
                fail_msg("run %d failed: %s", run, err);
        }
        for (uint32_t i = 0; i < N; i++) {
            const st_record *x = &rec[0][i], *y = &rec[1][i];
            if (x->status != y->status || x->sent != y->sent || x->first_token != y->first_token || x->end != y->end ||
                x->output_tokens != y->output_tokens || x->cached_tokens != y->cached_tokens)
                fail_msg("run %d, request %u: sent %lld, first %lld, end %lld, %u cached with runs; %lld, %lld, "
                         "%lld, %u step by step",
                         run, i, (long long)x->sent, (long long)x->first_token, (long long)x->end, x->cached_tokens,
                         (long long)y->sent, (long long)y->first_token, (long long)y->end, y->cached_tokens);
        }
        same_counters(&st[0], &st[1]);
        assert_int_equal(st[0].duration, st[1].duration);
        assert_int_equal(st[0].max_running, st[1].max_running);
        assert_int_equal(st[0].max_waiting, st[1].max_waiting);
        pre += st[0].preemptions;
        hits += st[0].prefix_hits;
        for (int p = 0; p < 2; p++) {
            for (uint32_t i = 0; i < N; i++)
                st_record_free(&rec[p][i]);
            free(rec[p]);
        }
    }
    st_emu_stats ea, eb;
    st_emu_session_stats(S[0], &ea);
    st_emu_session_stats(S[1], &eb);
    assert_int_equal(ea.evictions, eb.evictions);
    assert_int_equal(ea.free_blocks, eb.free_blocks);
    assert_true(ea.steps_skipped > ea.steps / 2);
    assert_true(pre > 0 && hits > 0);
    print_message("three runs in one session without token times: %llu preemptions, %llu prefix hits, alike\n",
                  (unsigned long long)pre, (unsigned long long)hits);
    for (int p = 0; p < 2; p++)
        st_emu_session_free(S[p]);
    free(it);
}

/* Agent task graphs with runs past completions: a root, two children sent when it ends (inside a run,
 * from hook_finished), and a join node that grows with both children's answers. */
static void agent_graphs_without_token_times(void **state)
{
    (void)state;
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    enum { TASKS = 30, N = TASKS * 4 };
    st_emu_sim_item *it = calloc(N, sizeof *it);
    uint32_t *kids = calloc(3 * TASKS, sizeof *kids);
    assert_true(it && kids);
    for (uint32_t t = 0; t < TASKS; t++) {
        uint32_t r = 4 * t;
        kids[3 * t] = r + 1;
        kids[3 * t + 1] = r + 2;
        kids[3 * t + 2] = r + 3;
        it[r] = (st_emu_sim_item){ .arrival = (st_ns)t * 120000000,
                                   .input_len = 500,
                                   .output_len = 80 + t % 7,
                                   .children = kids + 3 * t,
                                   .n_children = 2 };
        for (uint32_t k = 1; k <= 2; k++)
            it[r + k] = (st_emu_sim_item){ .input_len = 200,
                                           .output_len = 40 + 13 * k + t % 5,
                                           .dependent = 1,
                                           .n_parents = 1,
                                           .think = k * 20000000,
                                           .children = kids + 3 * t + 2,
                                           .n_children = 1 };
        it[r + 3] = (st_emu_sim_item){ .input_len = 100, .output_len = 60, .dependent = 1, .n_parents = 2, .grow = 1 };
    }
    compare("agent graphs", &c, it, N, NULL, 0.1, &acc_all);
    compare_bare("agent graphs (runs past completions)", &c, it, N, NULL);
    free(it);
    free(kids);
}

static void largest_difference(void **state)
{
    (void)state;
    print_message("largest relative difference between the two paths over every test: %.3g (exact times), %.0f ns "
                  "(token times), %.3g (summary figures)\n",
                  acc_all.worst, acc_all.tok_ns, acc_all.figure);
    assert_true(acc_all.worst <= 1e-3);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(short_and_long_outputs),
        cmocka_unit_test(chunked_prefill_and_preemption),
        cmocka_unit_test(shared_prefix),
        cmocka_unit_test(models_and_gpus),
        cmocka_unit_test(capped_and_closed_loops),
        cmocka_unit_test(ticks_and_timeouts),
        cmocka_unit_test(sessions_with_reasoning),
        cmocka_unit_test(runs_stop_at_the_horizon),
        cmocka_unit_test(followed_run_queue_offsets),
        cmocka_unit_test(runs_take_admissions),
        cmocka_unit_test(random_workloads),
        cmocka_unit_test(ticks_see_the_same_engine),
        cmocka_unit_test(without_token_times),
        cmocka_unit_test(seeded_prompts_match_their_ids),
        cmocka_unit_test(keyed_tails_match_their_ids),
        cmocka_unit_test(held_joiner_and_abort_between_runs),
        cmocka_unit_test(block_sizes_not_powers_of_two),
        cmocka_unit_test(several_admissions_per_step),
        cmocka_unit_test(async_scheduling_on_both_drivers),
        cmocka_unit_test(one_token_max_model_len_and_refusals),
        cmocka_unit_test(tight_budget_and_context),
        cmocka_unit_test(kv_external_joiners),
        cmocka_unit_test(preempted_readmitted_in_runs),
        cmocka_unit_test(anonymous_takes_before_a_registration),
        cmocka_unit_test(timeouts_and_ticks_without_token_times),
        cmocka_unit_test(agent_graphs_without_token_times),
        cmocka_unit_test(multi_run_sessions_without_token_times),
        cmocka_unit_test(largest_difference),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
