/* Each flag moves capacity the right way (virtual-time runs of the engine model), the step
 * time respects the decode floor, fault-injection slowdown shows in TPOT. */
#include "harness.h"

#include <stdio.h>

#include "emu/catalog.h"
#include "emu/config.h"
#include "emu/engine.h"
#include "emu/sim.h"
#include "emu/steptime.h"
#include "load/arrival.h"
#include "load/record.h"
#include "load/workload.h"

#include "emu_config.h"


typedef struct run_out {
    double ttft, tpot, tput, prefill_tokens;
    double max_itl; /* the longest gap between two tokens of one request */
    st_emu_sim_stats s;
} run_out;

/* n requests of `in` tokens (the first `shared` common to all), `out` outputs, arriving
 * every `gap_ms` (0: all at once). */
static void run(const st_emu_config *c, uint32_t n, uint32_t in, uint32_t shared, uint32_t out, double gap_ms,
                run_out *o)
{
    uint32_t *ids = malloc((size_t)n * in * sizeof *ids);
    st_emu_sim_item *it = calloc(n, sizeof *it);
    st_record *rec = calloc(n, sizeof *rec);
    assert_non_null(ids);
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t k = 0; k < in; k++)
            ids[(size_t)i * in + k] =
                k < shared ? st_emu_output_token(3, k, 100000) : st_emu_output_token(100 + i, k, 100000);
        it[i] = (st_emu_sim_item){
            .arrival = (st_ns)(i * gap_ms * 1e6), .input_ids = ids + (size_t)i * in, .input_len = in, .output_len = out
        };
    }
    char err[512];
    memset(o, 0, sizeof *o);
    assert_int_equal(st_emu_sim_run(c, it, n, rec, &o->s, err, sizeof err), 0);
    assert_int_equal(o->s.completed, n);
    double tt = 0, tp = 0, gen = 0;
    for (uint32_t i = 0; i < n; i++) {
        assert_int_equal(rec[i].status, ST_REQ_OK);
        assert_int_equal(rec[i].output_tokens, out);
        assert_int_equal(rec[i].n_events, out);
        assert_true(rec[i].first_token >= rec[i].scheduled && rec[i].end >= rec[i].first_token);
        tt += st_record_ttft(&rec[i]);
        tp += out > 1 ? st_record_tpot(&rec[i]) : 0;
        st_event_it ei;
        st_ns prev, t;
        st_events_begin(&ei, &rec[i]);
        for (int have = st_events_next(&ei, &prev); have && st_events_next(&ei, &t); prev = t) {
            double gap = (t - prev) / 1e9;
            if (gap > o->max_itl)
                o->max_itl = gap;
        }
        gen += rec[i].output_tokens;
        st_record_free(&rec[i]);
    }
    o->ttft = tt / n;
    o->tpot = tp / n;
    o->tput = gen / (o->s.duration / 1e9);
    o->prefill_tokens = (double)o->s.prefix_queries - o->s.prefix_hits;
    free(rec);
    free(it);
    free(ids);
}

static void fp8_kv_more_concurrency_when_memory_binds(void **state)
{
    (void)state;
    st_emu_config a, b;
    emu_config_of(&a, "L40S", "Qwen/Qwen3-8B");
    a.max_model_len = 8192;
    b = a;
    b.kv_dtype = ST_EMU_FP8;
    run_out ra, rb;
    run(&a, 300, 3000, 0, 300, 0, &ra);
    run(&b, 300, 3000, 0, 300, 0, &rb);
    assert_true(ra.s.max_kv_usage > 0.9); /* memory binds with bf16 KV */
    assert_true(rb.s.max_running > ra.s.max_running * 1.5);
    assert_true(rb.s.preemptions <= ra.s.preemptions);
    assert_true(rb.tput > ra.tput);
}

static void no_prefix_cache_more_prefill_higher_ttft(void **state)
{
    (void)state;
    st_emu_config a, b;
    emu_config_of(&a, "H100", "Qwen/Qwen3-8B");
    b = a;
    b.enable_prefix_caching = 0;
    run_out ra, rb;
    run(&a, 100, 3000, 2000, 100, 250, &ra);
    run(&b, 100, 3000, 2000, 100, 250, &rb);
    assert_true(ra.s.prefix_hits > 100 * 1900 * 0.9); /* nearly all of the shared prefix hit */
    assert_int_equal(rb.s.prefix_hits, 0);
    assert_true(rb.ttft > ra.ttft * 1.3);
}

static void larger_batched_tokens_lower_ttft_longer_gaps(void **state)
{
    (void)state;
    st_emu_config a, b;
    emu_config_of(&a, "H100", "Qwen/Qwen3-8B");
    a.max_num_batched_tokens = 2048;
    b = a;
    b.max_num_batched_tokens = 16384;
    run_out ra, rb;
    /* under load, below capacity: a 3000-token prompt every 250 ms (4 req/s). A prompt prefills in
     * one step instead of two (one step's fixed costs less: the difference is small, the prefill's
     * compute is the same), and the decodes that share a step with it wait for the whole prompt:
     * the longest inter-token gap grows (vLLM's tuning guide: a smaller budget gives better
     * inter-token latency). The mean TPOT moves little: the prefill's compute is the same, spread
     * over fewer, longer steps (each GEMM compute-bound either way). */
    run(&a, 200, 3000, 0, 300, 250, &ra);
    run(&b, 200, 3000, 0, 300, 250, &rb);
    printf(
        "# 2048 tokens: ttft %.1f ms tpot %.2f ms max itl %.1f ms; 16384: ttft %.1f ms tpot %.2f ms max itl %.1f ms\n",
        ra.ttft * 1e3, ra.tpot * 1e3, ra.max_itl * 1e3, rb.ttft * 1e3, rb.tpot * 1e3, rb.max_itl * 1e3);
    assert_true(rb.ttft < ra.ttft);
    assert_true(rb.tpot > ra.tpot);
    assert_true(rb.max_itl > ra.max_itl * 1.2);
}

static void decode_step_never_below_weight_floor(void **state)
{
    (void)state;
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    st_emu_memory mem;
    char err[512];
    assert_int_equal(st_emu_memory_plan(&c, &mem, err, sizeof err), 0);
    double floor_s = st_emu_weight_read_floor_s(&c);
    assert_near(floor_s * 1e3, 4.9, 0.1);
    for (uint32_t bs = 1; bs <= 1024; bs *= 2) {
        for (double ctx = 1; ctx <= 32768; ctx *= 8) {
            st_emu_batch b = { .tokens = bs,
                               .decode_tokens = bs,
                               .seqs = bs,
                               .sampled = bs,
                               .attn_pairs = bs * ctx,
                               .kv_read_tokens = bs * ctx };
            double t = st_emu_step_seconds(&c, &b, NULL);
            if (t < floor_s)
                fail_msg("batch %u ctx %.0f: step %.3f ms below the floor %.3f ms", bs, ctx, t * 1e3, floor_s * 1e3);
        }
    }
    /* in a run, too: the shortest TPOT is above the floor */
    run_out r;
    run(&c, 1, 100, 0, 50, 0, &r);
    assert_true(r.tpot > floor_s);
}

static void step_time_shape(void **state)
{
    (void)state;
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    st_emu_memory mem;
    char err[512];
    assert_int_equal(st_emu_memory_plan(&c, &mem, err, sizeof err), 0);
    st_emu_batch d1 = { 1, 1, 1, 1, 1000, 1000 }, d64 = { 64, 64, 64, 64, 64000, 64000 };
    st_emu_batch p8k = { 8192, 0, 4, 4, 8192.0 * 1024, 0 };
    st_emu_step_breakdown bd;
    double t1 = st_emu_step_seconds(&c, &d1, &bd);
    assert_true(bd.memory_s > bd.compute_s); /* decode: memory bound */
    double t64 = st_emu_step_seconds(&c, &d64, NULL);
    /* batching is cheap while memory bound: 64 sequences cost a few steps, not 64 (the KV reads
     * and the per-sequence CPU grow with the batch, the weight reads do not) */
    assert_true(t64 > t1 && t64 < 4 * t1);
    double tp = st_emu_step_seconds(&c, &p8k, &bd);
    assert_true(bd.compute_s > bd.memory_s); /* prefill: compute bound */
    assert_true(bd.eager);                   /* 8192 tokens > CUDA graph sizes */
    assert_true(tp > 0.1 && tp < 0.4);
    /* fp8 weights: faster prefill and decode; TP=2: faster; eager: slower */
    st_emu_config f = c;
    f.weight_dtype = ST_EMU_FP8;
    assert_true(st_emu_step_seconds(&f, &d1, NULL) < t1);
    assert_true(st_emu_step_seconds(&f, &p8k, NULL) < tp);
    st_emu_config t2 = c;
    t2.tp = 2;
    assert_true(st_emu_step_seconds(&t2, &d1, NULL) < t1);
    st_emu_config eg = c;
    eg.enforce_eager = 1;
    assert_true(st_emu_step_seconds(&eg, &d1, NULL) > t1);
    st_emu_config kv8 = c;
    kv8.kv_dtype = ST_EMU_FP8;
    st_emu_batch longctx = { 64, 64, 64, 64, 64 * 16000.0, 64 * 16000.0 };
    assert_true(st_emu_step_seconds(&kv8, &longctx, NULL) < st_emu_step_seconds(&c, &longctx, NULL));
}

/* fp8 weights on a GPU without fp8 tensor cores run FP8 Marlin, the 8-bit path of the GEMM the
 * 4-bit weights use: the same compute at every size (near-ideal at decode sizes, below a
 * 16-bit GEMM at prefill sizes), only the weight bytes differ. */
static void fp8_weight_only_shares_the_marlin_curve(void **state)
{
    (void)state;
    st_emu_config c, f, q;
    emu_config_of(&c, "A100", "Qwen/Qwen3-8B");
    char err[512];
    st_emu_memory mem;
    assert_int_equal(st_emu_memory_plan(&c, &mem, err, sizeof err), 0);
    f = q = c;
    f.weight_dtype = ST_EMU_FP8;
    q.weight_dtype = ST_EMU_INT4_AWQ;
    st_emu_batch p8k = { 8192, 0, 4, 4, 8192.0 * 1024, 0 }, d8 = { 8, 8, 8, 8, 8000, 8000 };
    st_emu_step_breakdown b16, b8, b4;
    st_emu_step_seconds(&c, &p8k, &b16);
    st_emu_step_seconds(&f, &p8k, &b8);
    st_emu_step_seconds(&q, &p8k, &b4);
    assert_near(b8.compute_s / b4.compute_s, 1.0, 1e-9);
    assert_true(b8.compute_s > 1.1 * b16.compute_s);
    /* decode: memory bound, fp8 weights read half the bytes of bf16, twice the 4-bit's */
    double t16 = st_emu_step_seconds(&c, &d8, &b16), t8 = st_emu_step_seconds(&f, &d8, &b8);
    assert_true(t8 < t16);
    st_emu_step_seconds(&q, &d8, &b4);
    assert_true(b4.memory_s < b8.memory_s && b8.memory_s < b16.memory_s);
}

static void decode_slowdown_raises_tpot(void **state)
{
    (void)state;
    st_emu_config a, b;
    emu_config_of(&a, "H100", "Qwen/Qwen3-8B");
    b = a;
    b.decode_slowdown = 3.0;
    run_out ra, rb;
    run(&a, 20, 500, 0, 100, 100, &ra);
    run(&b, 20, 500, 0, 100, 100, &rb);
    assert_true(rb.tpot > 2.0 * ra.tpot);
}

static void sim_rejects_and_is_deterministic(void **state)
{
    (void)state;
    st_emu_config c;
    emu_config_of(&c, "H100", "meta-llama/Meta-Llama-3-8B");
    st_emu_sim_item it[3] = {
        { .arrival = 0, .input_len = 100, .output_len = 10 },
        { .arrival = 1000, .input_len = 8000, .output_len = 500 },
        { .arrival = 2000, .input_len = 100, .output_len = 10 },
    };
    st_record rec[3];
    st_emu_sim_stats s;
    char err[512];
    assert_int_equal(st_emu_sim_run(&c, it, 3, rec, &s, err, sizeof err), 0);
    assert_int_equal(rec[1].status, ST_REQ_HTTP_STATUS);
    assert_int_equal(rec[1].http_status, 400);
    assert_non_null(strstr(rec[1].error, "context length is only 8192"));
    assert_int_equal(s.rejected, 1);
    assert_int_equal(s.completed, 2);
    st_ns e0 = rec[0].end;
    for (int i = 0; i < 3; i++)
        st_record_free(&rec[i]);
    assert_int_equal(st_emu_sim_run(&c, it, 3, rec, &s, err, sizeof err), 0);
    assert_int_equal(rec[0].end, e0);
    for (int i = 0; i < 3; i++)
        st_record_free(&rec[i]);
    /* an empty prompt is refused as vLLM refuses it (400), not taken for a lack of memory */
    st_emu_sim_item empty[2] = { { .arrival = 0, .input_len = 0, .output_len = 10 },
                                 { .arrival = 1000, .input_len = 100, .output_len = 10 } };
    assert_int_equal(st_emu_sim_run(&c, empty, 2, rec, &s, err, sizeof err), 0);
    assert_int_equal(rec[0].http_status, 400);
    assert_non_null(strstr(rec[0].error, "The prompt cannot be empty"));
    assert_int_equal(s.completed, 1);
    for (int i = 0; i < 2; i++)
        st_record_free(&rec[i]);
    /* refusal surfaces as an error */
    emu_config_of(&c, "RTX4090", "meta-llama/Meta-Llama-3-70B");
    assert_int_equal(st_emu_sim_run(&c, it, 3, rec, &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "out of memory"));
}

/* The predict path: a LOAD synthetic workload and Poisson arrivals through the sim. */
static void sim_runs_a_load_workload(void **state)
{
    (void)state;
    st_synth_params sp = { .input_len = 3000,
                           .output_len = 300,
                           .range_ratio = 0,
                           .prefix_len = 2000,
                           .num_requests = 200,
                           .seed = 42,
                           .vocab_size = 151936 };
    st_workload w;
    char err[512];
    assert_int_equal(st_workload_synthetic(&sp, &w, err, sizeof err), 0);
    st_arrival a = { .kind = ST_ARR_POISSON, .rate = 4, .seed = 7 };
    st_ns *sched = calloc(w.n, sizeof *sched);
    assert_int_equal(st_arrival_schedule(&a, w.n, sched), 0);
    st_emu_sim_item *items = calloc(w.n, sizeof *items);
    st_emu_sim_items_from_workload(&w, sched, items);
    st_record *rec = calloc(w.n, sizeof *rec);
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    st_emu_sim_stats s;
    assert_int_equal(st_emu_sim_run(&c, items, w.n, rec, &s, err, sizeof err), 0);
    assert_int_equal(s.completed, 200);
    /* every request after the first reuses the 2000-token prefix (125 full blocks) */
    assert_true(s.prefix_hits >= 199ULL * 1984);
    for (uint32_t i = 0; i < w.n; i++) {
        assert_int_equal(rec[i].scheduled, sched[i]);
        assert_int_equal(rec[i].output_tokens, 300);
        assert_true(rec[i].cached_tokens == 0 || rec[i].cached_tokens >= 1984);
        st_record_free(&rec[i]);
    }
    free(rec);
    free(items);
    free(sched);
    st_workload_free(&w);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(fp8_kv_more_concurrency_when_memory_binds),
        cmocka_unit_test(no_prefix_cache_more_prefill_higher_ttft),
        cmocka_unit_test(larger_batched_tokens_lower_ttft_longer_gaps),
        cmocka_unit_test(decode_step_never_below_weight_floor),
        cmocka_unit_test(step_time_shape),
        cmocka_unit_test(fp8_weight_only_shares_the_marlin_curve),
        cmocka_unit_test(decode_slowdown_raises_tpot),
        cmocka_unit_test(sim_rejects_and_is_deterministic),
        cmocka_unit_test(sim_runs_a_load_workload),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
