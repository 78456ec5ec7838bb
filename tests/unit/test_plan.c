/* audit/plan: the branch-and-bound search against engines whose answers are known. */
#include "harness.h"

#include <stdio.h>

#include "plan/plan.h"
#include "plan/plan_model.h"
#include "plan/prices.h"
#include "plan/plan_spec.h"
#include "audit/spec.h"
#include "core/file.h"

/* A fake engine: capacity per GPU, a max throughput bound twice the capacity, and GPUs that do
 * not fit (memory) named. Counts the exact evaluations. */
typedef struct fake {
    int evaluations;
} fake;

static double cap_of(const st_plan_candidate *c)
{
    double base = !strcmp(c->gpu, "H100") ? 10 : !strcmp(c->gpu, "A100") ? 5 : !strcmp(c->gpu, "L40S") ? 3 : 1;
    base *= c->tp;
    if (!strcmp(c->weights, "fp8"))
        base *= 1.5;
    if (c->max_num_seqs == 64)
        base *= 0.5;
    return base;
}

static int fake_screen(void *arg, st_plan_candidate *c, char *why, size_t n)
{
    (void)arg;
    if (!strcmp(c->gpu, "RTX4090") && c->tp == 1) {
        snprintf(why, n, "the weights (16.4 GiB) and the activations leave no room for the KV cache");
        return -1;
    }
    c->bound_rps = 2 * cap_of(c);
    return 0;
}

static int fake_eval(void *arg, st_plan_candidate *c, char *why, size_t n)
{
    fake *f = arg;
    f->evaluations++;
    if (!strcmp(c->gpu, "L4")) { /* fits but never meets the SLO */
        c->capacity_rps = 0;
        c->output_tps = 0;
        snprintf(why, n, "p95 TTFT above the SLO at the lowest rate");
        return 0;
    }
    c->capacity_rps = cap_of(c);
    c->output_tps = c->capacity_rps * 300;
    c->ttft_p95_ms = 1000.0 / c->capacity_rps;
    c->tpot_p95_ms = 20;
    return 0;
}

typedef struct price {
    const char *gpu;
    double usd;
} price;

/* Every GPU x TP x weights x max_num_seqs, priced from p. */
static int grid(st_plan_candidate *c, const price *p, int np)
{
    static const char *w[] = { "bf16", "fp8" };
    static const int tps[] = { 1, 2 };
    static const long seqs[] = { 64, 256 };
    int n = 0;
    for (int g = 0; g < np; g++)
        for (int t = 0; t < 2; t++)
            for (int k = 0; k < 2; k++)
                for (int s = 0; s < 2; s++) {
                    memset(&c[n], 0, sizeof c[n]);
                    c[n].gpu = p[g].gpu;
                    c[n].tp = tps[t];
                    c[n].weights = w[k];
                    c[n].model = "m";
                    c[n].kv_dtype = "auto";
                    c[n].max_num_seqs = seqs[s];
                    c[n].price_per_gpu_hour = p[g].usd;
                    n++;
                }
    return n;
}

static void cheapest_found_with_few_evaluations(void **state)
{
    (void)state;
    price p[] = { { "H100", 2.5 }, { "A100", 1.4 }, { "L40S", 0.8 }, { "RTX4090", 0.34 }, { "L4", 0.44 } };
    st_plan_candidate c[64];
    int n = grid(c, p, 5);
    fake f = { 0 };
    st_plan_ops ops = { fake_screen, NULL, fake_eval, &f };
    st_plan_stats st;
    int best = st_plan_search(c, n, 3, 300, &ops, 2, &st);
    assert_true(best >= 0);
    /* $/1M = price x tp / (cap x 300 x 3600) x 1e6; cap scales with tp, so per GPU:
     * H100 fp8: 2.5 / 15 = 0.167, A100 fp8: 1.4 / 7.5 = 0.187, L40S fp8: 0.8 / 4.5 = 0.178,
     * RTX4090 (tp 2 only) fp8: 0.34 / 1.5 = 0.227: the H100 with fp8 and 256 sequences wins (either TP; ties go to
     * the higher capacity: tp 2). */
    assert_string_equal(c[best].gpu, "H100");
    assert_string_equal(c[best].weights, "fp8");
    assert_int_equal(c[best].max_num_seqs, 256);
    assert_int_equal(c[best].tp, 2);
    assert_near(c[best].usd_per_1m, 2.5 * 2 / (30.0 * 300 * 3600) * 1e6, 1e-9);
    assert_int_equal(c[best].rank, 1);
    assert_int_equal(st.candidates, n);
    assert_int_equal(st.refused, 4); /* RTX4090 at tp 1: 2 weights x 2 limits */
    /* the bounds prune: fewer exact evaluations than candidates that fit */
    assert_true(st.evaluated < st.screened);
    assert_int_equal(st.evaluated, f.evaluations);
    assert_int_equal(st.pruned + st.evaluated, st.screened);
    for (int i = 0; i < n; i++) {
        if (c[i].state == ST_PLAN_REFUSED)
            assert_non_null(strstr(c[i].why, "no room for the KV cache"));
        /* nothing pruned could have beaten the third best */
        if (c[i].state == ST_PLAN_PRUNED) {
            int order[64];
            int m = st_plan_order(c, n, order, 64);
            assert_true(m >= 3);
            assert_true(c[i].lb_usd_per_1m >= c[order[2]].usd_per_1m);
        }
    }
}

/* A price list where one GPU is (nearly) free: the plan picks it, whatever its speed. */
static void free_gpu_is_picked(void **state)
{
    (void)state;
    price p[] = { { "H100", 2.5 }, { "A100", 1.4 }, { "L40S", 1e-6 } };
    st_plan_candidate c[64];
    int n = grid(c, p, 3);
    fake f = { 0 };
    st_plan_ops ops = { fake_screen, NULL, fake_eval, &f };
    st_plan_stats st;
    int best = st_plan_search(c, n, 1, 300, &ops, 1, &st);
    assert_true(best >= 0);
    assert_string_equal(c[best].gpu, "L40S");
    /* with k = 1 the search stops once the free GPU is measured: every other bound is higher */
    assert_true(f.evaluations <= 4);
}

static void frontiers_and_none_passed(void **state)
{
    (void)state;
    price p[] = { { "L4", 0.44 }, { "A100", 1.4 } };
    st_plan_candidate c[64];
    int n = grid(c, p, 2);
    fake f = { 0 };
    st_plan_ops ops = { fake_screen, NULL, fake_eval, &f };
    st_plan_stats st;
    int best = st_plan_search(c, n, 100, 300, &ops, 2, &st); /* k past n: everything evaluated */
    assert_int_equal(st.evaluated, st.screened);
    assert_int_equal(st.pruned, 0);
    assert_string_equal(c[best].gpu, "A100");
    int none = 0, on_cost_quality = 0;
    for (int i = 0; i < n; i++) {
        if (!strcmp(c[i].gpu, "L4")) {
            assert_int_equal(c[i].state, ST_PLAN_NONE_PASSED);
            assert_non_null(strstr(c[i].why, "TTFT"));
            assert_int_equal(c[i].rank, 0);
            none++;
        }
        if (c[i].on_frontier & 2)
            on_cost_quality++;
    }
    assert_int_equal(none, 8);
    /* cost vs quality: the cheapest fp8 and the cheapest bf16 are on the frontier, each at tp 1
     * and tp 2 (same cost per token: capacity scales with the GPUs; a tie dominates nothing) */
    assert_int_equal(on_cost_quality, 4);
    assert_true(c[best].on_frontier & 1);
    assert_int_equal(st_plan_quality_risk("bf16"), 0);
    assert_int_equal(st_plan_quality_risk("fp8"), 1);
    assert_int_equal(st_plan_quality_risk("awq"), 3);
}

/* A candidate's spec is the user's with engine, hardware and configurations replaced: it parses,
 * runs vLLM with the candidate's flags, and keeps the workload, SLO and search as written. */
static void candidate_spec_round_trips(void **state)
{
    (void)state;
    size_t len;
    char err[512];
    char *text = st_read_file("examples/qwen3-8b-h100.yaml", 1 << 20, &len, err, sizeof err);
    assert_non_null(text);
    st_spec base;
    assert_int_equal(st_spec_parse("examples/qwen3-8b-h100.yaml", text, len, &base, err, sizeof err), 0);
    st_plan_candidate a = { .gpu = "H200",
                            .tp = 2,
                            .weights = "fp8",
                            .model = "Qwen/Qwen3-8B-FP8",
                            .kv_dtype = "fp8",
                            .max_num_seqs = 256,
                            .max_batched = 8192,
                            .max_model_len = 4096,
                            .price_per_gpu_hour = 3.59,
                            .state = ST_PLAN_OK,
                            .rank = 1,
                            .usd_per_1m = 0.05,
                            .capacity_rps = 40 };
    st_plan_candidate b = a;
    b.weights = "bf16";
    b.model = "Qwen/Qwen3-8B";
    b.kv_dtype = "auto";
    b.max_num_seqs = 128;
    b.rank = 2;
    const st_plan_candidate *cs[] = { &a, &b };
    st_buf out;
    st_buf_init(&out, 1 << 20);
    if (st_plan_spec_write("examples/qwen3-8b-h100.yaml", text, len, cs, 2, "# planned\n", &out, err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(strncmp(out.data, "# planned\n", 10), 0);
    st_spec s;
    if (st_spec_parse("planned.yaml", out.data, out.len, &s, err, sizeof err))
        fail_msg("%s\n%s", err, out.data);
    assert_int_equal(s.engine.kind, ST_ENGINE_VLLM);
    assert_string_equal(s.engine.model, "Qwen/Qwen3-8B-FP8");
    /* the baseline keeps the user's other flags, less the emulator's and the plan's own */
    for (int i = 0; i < s.engine.flags.n; i++) {
        assert_true(strcmp(s.engine.flags.v[i], "--gpu") && strcmp(s.engine.flags.v[i], "--time-scale"));
        assert_true(strcmp(s.engine.flags.v[i], "--max-model-len") &&
                    strcmp(s.engine.flags.v[i], "--max-num-batched-tokens"));
    }
    assert_string_equal(s.hardware.gpu, "H200");
    assert_int_equal(s.hardware.gpus_per_replica, 2);
    assert_near(s.hardware.price_per_gpu_hour, 3.59, 0);
    assert_int_equal(s.n_configs, 2);
    char name[128];
    st_plan_config_name(&a, name, sizeof name);
    assert_string_equal(name, "h200-tp2-fp8-kvfp8-seqs256-bt8192-len4096");
    assert_string_equal(s.configs[0].name, name);
    assert_string_equal(s.configs[1].model, "Qwen/Qwen3-8B");
    st_strv f = { 0 };
    assert_int_equal(st_spec_config_flags(&s, &s.configs[0], &f), 0);
    const char *want[] = { "--tensor-parallel-size",   "2",    "--kv-cache-dtype", "fp8", "--max-num-seqs", "256",
                           "--max-num-batched-tokens", "8192", "--max-model-len",  "4096" };
    assert_int_equal(f.n, 10);
    for (int i = 0; i < 10; i++)
        assert_string_equal(f.v[i], want[i]);
    st_strv_free(&f);
    assert_non_null(strstr(s.configs[0].reason, "planned #1"));
    /* the rest as the user wrote it */
    assert_int_equal(s.workload.input_tokens, base.workload.input_tokens);
    assert_int_equal(s.workload.shared_prefix, base.workload.shared_prefix);
    assert_int_equal(s.slo.n, base.slo.n);
    assert_near(s.slo.terms[0].max_ms, base.slo.terms[0].max_ms, 0);
    assert_near(s.peak_rate, base.peak_rate, 0);
    assert_int_equal(s.n_rates, base.n_rates);
    st_spec_free(&s);
    /* candidates of two machines are two specs */
    b.gpu = "H100";
    st_buf_reset(&out);
    assert_int_equal(st_plan_spec_write("x", text, len, cs, 2, NULL, &out, err, sizeof err), -1);
    st_buf_free(&out);
    st_spec_free(&base);
    free(text);
}

/* On the engine model, the pruned search keeps the top candidates an exhaustive one finds. */
static void pruned_search_matches_exhaustive(void **state)
{
    (void)state;
    const char *text =
        "engine: {kind: vllm, model: Qwen/Qwen3-8B, flags: [--max-model-len, \"8192\"]}\n"
        "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.49}\npeak_rate: 20\n"
        "workload: {input_tokens: 1000, output_tokens: 200, shared_prefix: 500, requests_per_rate: 100}\n"
        "rates: [2, 4, 8]\nslo: {ttft_p95_ms: 1000, tpot_p95_ms: 40}\nsearch: {mode: grid}\n"
        "plan: {gpus: [H100, A100, L40S], gpus_per_replica: [1, 2], kv_cache_dtype: [auto, fp8], "
        "max_num_seqs: [64, 256], max_num_batched_tokens: [2048]}\n";
    st_spec s;
    char err[1024];
    if (st_spec_parse("p.yaml", text, strlen(text), &s, err, sizeof err))
        fail_msg("%s", err);
    st_prices p;
    assert_int_equal(st_prices_builtin(&p, err, sizeof err), 0);
    st_plan_candidate *a, *b;
    int na, nb;
    assert_int_equal(st_plan_enumerate(&s, &p, NULL, 1536, &a, &na, err, sizeof err), 0);
    assert_int_equal(st_plan_enumerate(&s, &p, NULL, 1536, &b, &nb, err, sizeof err), 0);
    assert_int_equal(na, 24);
    st_plan_model *m;
    if (st_plan_model_new("p.yaml", text, strlen(text), &s, 0.05, &m, err, sizeof err))
        fail_msg("%s", err);
    st_plan_ops ops;
    st_plan_model_ops(m, &ops);
    st_plan_stats sa, sb;
    int ba = st_plan_search(a, na, 3, 200, &ops, 2, &sa);
    int bb = st_plan_search(b, nb, nb, 200, &ops, 2, &sb); /* k = every candidate: nothing pruned */
    assert_int_equal(sb.pruned, 0);
    assert_true(sa.evaluated + sa.shared < sb.evaluated + sb.shared);
    assert_true(ba >= 0 && bb >= 0);
    int oa[3], ob[3];
    assert_int_equal(st_plan_order(a, na, oa, 3), 3);
    assert_int_equal(st_plan_order(b, nb, ob, 3), 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(oa[i], ob[i]);
        assert_near(a[oa[i]].usd_per_1m, b[ob[i]].usd_per_1m, 1e-12);
    }
    /* no pruned candidate was cheaper than the third best */
    for (int i = 0; i < na; i++)
        if (a[i].state == ST_PLAN_PRUNED && b[i].state == ST_PLAN_OK)
            assert_true(b[i].usd_per_1m >= a[oa[2]].usd_per_1m);
    /* the screen's bound is proven: no candidate delivers more output tokens a second than it
     * (checked on every candidate, all evaluated in the exhaustive search) */
    int proven = 0;
    for (int i = 0; i < nb; i++) {
        if (b[i].state != ST_PLAN_OK)
            continue;
        assert_true(b[i].bound_tps > 0);
        if (!(b[i].output_tps <= b[i].bound_tps))
            fail_msg("candidate %d (%s tp%d %s seqs %ld): %.1f output tok/s above its proven bound %.1f", i, b[i].gpu,
                     b[i].tp, b[i].kv_dtype, b[i].max_num_seqs, b[i].output_tps, b[i].bound_tps);
        /* and it is a bound, not a blank: within a few times the capacity */
        assert_true(b[i].bound_tps < 5 * b[i].output_tps);
        proven++;
    }
    assert_true(proven >= 12);
    /* capacities are searched past the spec's rates ([2, 4, 8]): not capped at the grid's top */
    double top = 0;
    for (int i = 0; i < nb; i++)
        if (b[i].state == ST_PLAN_OK && b[i].capacity_rps > top)
            top = b[i].capacity_rps;
    if (!(top > 8 * 1.05))
        fail_msg("the highest capacity found is %.2f req/s: capped at the spec's highest rate (8)?", top);
    /* in batches on several threads (the CLI's way): the same top 3 */
    st_plan_candidate *d;
    int nd;
    assert_int_equal(st_plan_enumerate(&s, &p, NULL, 1536, &d, &nd, err, sizeof err), 0);
    st_plan_search_opts so = { .threads = 3, .batch = ST_PLAN_BATCH };
    st_plan_stats sd;
    assert_int_equal(st_plan_search_opt(d, nd, 3, 200, &ops, &so, &sd), ba);
    int od[3];
    assert_int_equal(st_plan_order(d, nd, od, 3), 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(od[i], oa[i]);
    free(d);
    st_plan_model_free(m);
    free(a);
    free(b);
    st_prices_free(&p);
    st_spec_free(&s);
}

/* The plan's own search mode (sustained, the default) on the engine model: the pruned search,
 * one worker or two, picks the top 3 an exhaustive search finds, and one and two workers agree on
 * every candidate (their evaluations share generated workloads: the same prompts either way). */
static void sustained_pick_matches_exhaustive_on_any_workers(void **state)
{
    (void)state;
    const char *text = "engine: {kind: vllm, model: Qwen/Qwen3-8B, flags: [--max-model-len, \"4096\"]}\n"
                       "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.49}\npeak_rate: 20\n"
                       "workload: {input_tokens: 1200, output_tokens: 120, range_ratio: 0.1, shared_prefix: 800, "
                       "requests_per_rate: 100, seed: 3}\n"
                       "rates: [2, 4, 8]\nslo: {ttft_p95_ms: 1000, tpot_p95_ms: 40}\n"
                       "plan: {gpus: [H100, L40S, RTX4090], gpus_per_replica: [1, 2], kv_cache_dtype: [auto, fp8], "
                       "max_num_seqs: [32, 128], max_num_batched_tokens: [2048]}\n";
    st_spec s;
    char err[1024];
    if (st_spec_parse("p.yaml", text, strlen(text), &s, err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(s.search.mode, ST_SEARCH_SUSTAINED);
    st_prices p;
    assert_int_equal(st_prices_builtin(&p, err, sizeof err), 0);
    st_plan_candidate *c[3];
    int n[3];
    for (int k = 0; k < 3; k++)
        assert_int_equal(st_plan_enumerate(&s, &p, NULL, 2048, &c[k], &n[k], err, sizeof err), 0);
    assert_int_equal(n[0], 24);
    st_plan_model *m;
    if (st_plan_model_new("p.yaml", text, strlen(text), &s, 0.05, &m, err, sizeof err))
        fail_msg("%s", err);
    st_plan_ops ops;
    st_plan_model_ops(m, &ops);
    st_plan_search_opts one = { .threads = 1, .batch = ST_PLAN_BATCH }, two = { .threads = 2, .batch = ST_PLAN_BATCH };
    st_plan_stats st[3];
    int b1 = st_plan_search_opt(c[0], n[0], 3, 132, &ops, &one, &st[0]);
    int b2 = st_plan_search_opt(c[1], n[1], 3, 132, &ops, &two, &st[1]);
    int be = st_plan_search_opt(c[2], n[2], n[2], 132, &ops, &two, &st[2]); /* k = every candidate */
    assert_int_equal(st[2].pruned, 0);
    assert_true(st[0].pruned > 0); /* the pruned search did skip some */
    assert_true(b1 >= 0 && b1 == b2 && b1 == be);
    int o[3][3];
    for (int k = 0; k < 3; k++)
        assert_int_equal(st_plan_order(c[k], n[k], o[k], 3), 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(o[0][i], o[2][i]);
        assert_near(c[0][o[0][i]].usd_per_1m, c[2][o[2][i]].usd_per_1m, 0);
    }
    /* one worker and two: the same search, candidate by candidate */
    assert_int_equal(st[0].evaluated, st[1].evaluated);
    assert_int_equal(st[0].shared, st[1].shared);
    assert_int_equal(st[0].refined, st[1].refined);
    for (int i = 0; i < n[0]; i++) {
        assert_int_equal(c[0][i].state, c[1][i].state);
        assert_int_equal(c[0][i].rank, c[1][i].rank);
        if (c[0][i].state == ST_PLAN_OK) {
            assert_near(c[0][i].capacity_rps, c[1][i].capacity_rps, 0);
            assert_near(c[0][i].ttft_p95_ms, c[1][i].ttft_p95_ms, 0);
            /* and the exhaustive search measured it the same */
            assert_near(c[0][i].usd_per_1m, c[2][i].usd_per_1m, 0);
        }
    }
    /* no candidate the pruned search left out was cheaper than its third pick */
    for (int i = 0; i < n[0]; i++)
        if (c[0][i].state == ST_PLAN_PRUNED && c[2][i].state == ST_PLAN_OK)
            assert_true(c[2][i].usd_per_1m >= c[0][o[0][2]].usd_per_1m);
    st_plan_model_free(m);
    for (int k = 0; k < 3; k++)
        free(c[k]);
    st_prices_free(&p);
    st_spec_free(&s);
}

/* A fake refine: a tighter bound (1.2x the capacity, from 2x). */
static int fake_refine(void *arg, st_plan_candidate *c, char *why, size_t n)
{
    (void)arg;
    (void)why;
    (void)n;
    c->bound_rps = 1.2 * cap_of(c);
    return 0;
}

typedef struct seen {
    int calls, last_left, monotone;
    int last_done;
} seen;

static void on_progress(void *arg, const st_plan_progress *p)
{
    seen *s = arg;
    if (s->calls && p->done < s->last_done)
        s->monotone = 0;
    s->calls++;
    s->last_done = p->done;
    s->last_left = p->left;
}

/* Batches on 1 or 4 threads: the same states, costs and counts (the batch, not the core count,
 * decides what is evaluated); the progress callback sees the search settle. */
static void same_result_on_any_thread_count(void **state)
{
    (void)state;
    price p[] = { { "H100", 2.5 }, { "A100", 1.4 }, { "L40S", 0.8 }, { "RTX4090", 0.34 }, { "L4", 0.44 } };
    st_plan_candidate a[64], b[64];
    int n = grid(a, p, 5);
    grid(b, p, 5);
    fake fa = { 0 }, fb = { 0 };
    st_plan_ops oa = { fake_screen, fake_refine, fake_eval, &fa }, ob = { fake_screen, fake_refine, fake_eval, &fb };
    seen sa = { .monotone = 1 }, sb = { .monotone = 1 };
    st_plan_search_opts xa = { .threads = 1, .batch = 4, .progress = on_progress, .progress_arg = &sa };
    st_plan_search_opts xb = { .threads = 4, .batch = 4, .progress = on_progress, .progress_arg = &sb };
    st_plan_stats ta, tb;
    int ba = st_plan_search_opt(a, n, 3, 300, &oa, &xa, &ta);
    int bb = st_plan_search_opt(b, n, 3, 300, &ob, &xb, &tb);
    assert_int_equal(ba, bb);
    assert_int_equal(ta.evaluated, tb.evaluated);
    assert_int_equal(ta.refined, tb.refined);
    assert_int_equal(ta.shared, tb.shared);
    assert_int_equal(ta.pruned, tb.pruned);
    for (int i = 0; i < n; i++) {
        assert_int_equal(a[i].state, b[i].state);
        assert_int_equal(a[i].rank, b[i].rank);
    }
    assert_true(ta.refined > 0 && ta.pruned > 0);
    assert_true(sa.calls >= 2 && sb.calls == sa.calls);
    assert_true(sa.monotone && sb.monotone);
    assert_int_equal(sa.last_left, 0); /* the last call: nothing left in the race */
}

/* A space over the limit is refused with its count and the option that lifts it. */
static void oversized_space_asks_for_max_candidates(void **state)
{
    (void)state;
    const char *text = "engine: {kind: vllm, model: Qwen/Qwen3-8B}\nhardware: {gpu: H100, gpus_per_replica: 1, "
                       "price_per_gpu_hour: 2.49}\npeak_rate: 10\nworkload: {input_tokens: 1000, output_tokens: 200}\n"
                       "rates: [2]\n"
                       "slo: {ttft_p95_ms: 1000, tpot_p95_ms: 50}\nplan: {gpus: [H100, A100], gpus_per_replica: [1, 2, "
                       "4], max_num_seqs: [64, 128, "
                       "256, 512], max_num_batched_tokens: [2048, 4096, 8192], max_model_len: [2048, 4096, 8192]}\n";
    st_spec s;
    char err[1024];
    if (st_spec_parse("p.yaml", text, strlen(text), &s, err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(s.plan.n_len, 3);
    st_prices pr;
    assert_int_equal(st_prices_builtin(&pr, err, sizeof err), 0);
    st_plan_candidate *c = NULL;
    int n = 0;
    /* 2 x 3 x 1 x 2 x 4 x 3 x 3 = 432 */
    assert_int_equal(st_plan_enumerate_max(&s, &pr, NULL, 1536, 400, &c, &n, err, sizeof err), -1);
    assert_non_null(strstr(err, "432 candidates"));
    assert_non_null(strstr(err, "--max-candidates 432"));
    assert_int_equal(st_plan_enumerate_max(&s, &pr, NULL, 1536, 432, &c, &n, err, sizeof err), 0);
    assert_int_equal(n, 432);
    int lens[3] = { 0 };
    for (int i = 0; i < n; i++)
        lens[c[i].max_model_len == 2048 ? 0 : c[i].max_model_len == 4096 ? 1 : 2]++;
    assert_int_equal(lens[0], 144);
    assert_int_equal(lens[1], 144);
    assert_int_equal(lens[2], 144);
    free(c);
    st_prices_free(&pr);
    st_spec_free(&s);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(cheapest_found_with_few_evaluations),
        cmocka_unit_test(free_gpu_is_picked),
        cmocka_unit_test(frontiers_and_none_passed),
        cmocka_unit_test(candidate_spec_round_trips),
        cmocka_unit_test(pruned_search_matches_exhaustive),
        cmocka_unit_test(sustained_pick_matches_exhaustive_on_any_workers),
        cmocka_unit_test(same_result_on_any_thread_count),
        cmocka_unit_test(oversized_space_asks_for_max_candidates),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
