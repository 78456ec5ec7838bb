/* The engine model's newer mechanisms: the API-server front end (fixed latency, one-core work
 * queue, the ceiling it puts on a tiny model), the closed-loop driver, async scheduling, the
 * version-dependent memory plan, per-GPU efficiencies and the out-of-memory message. */
#include "harness.h"

#include <stdio.h>

#include "emu/catalog.h"
#include "emu/config.h"
#include "emu/consts.h"
#include "emu/sim.h"
#include "emu/steptime.h"

#include "emu_config.h"


/* n requests of in/out tokens every gap_ms (0: all at once); mean TTFT and request rate out. */
static void run_open(const st_emu_config *c, uint32_t n, uint32_t in, uint32_t out, double gap_ms, double *ttft,
                     double *rps)
{
    st_emu_sim_item *it = calloc(n, sizeof *it);
    st_record *rec = calloc(n, sizeof *rec);
    for (uint32_t i = 0; i < n; i++)
        it[i] = (st_emu_sim_item){ .arrival = (st_ns)(i * gap_ms * 1e6), .input_len = in, .output_len = out };
    char err[512];
    st_emu_sim_stats s;
    assert_int_equal(st_emu_sim_run(c, it, n, rec, &s, err, sizeof err), 0);
    assert_int_equal(s.completed, n);
    double t = 0;
    st_ns last = 0;
    for (uint32_t i = 0; i < n; i++) {
        t += st_record_ttft(&rec[i]);
        if (rec[i].end > last)
            last = rec[i].end;
        st_record_free(&rec[i]);
    }
    *ttft = t / n;
    *rps = n / (last / 1e9);
    free(rec);
    free(it);
}

static void frontend_latency_adds_to_ttft(void **state)
{
    (void)state;
    st_emu_config a, b;
    emu_config_of(&a, "H100", "Qwen/Qwen3-8B");
    b = a;
    b.no_frontend = 1;
    double ta, tb, ra, rb;
    run_open(&a, 20, 128, 16, 500, &ta, &ra); /* idle between requests */
    run_open(&b, 20, 128, 16, 500, &tb, &rb);
    /* the fixed latency plus the request's own CPU time, nothing else */
    assert_near(ta - tb, a.tune.fe_latency_s + a.tune.fe_req_cpu_s, 0.002);
}

static void frontend_caps_a_tiny_model(void **state)
{
    (void)state;
    /* Qwen3-0.6B, 500 requests at once, an API server slower per request than the engine: the
     * server's one core sets the pace */
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-0.6B");
    c.tune.fe_req_cpu_s = 0.010;
    double ttft, rps;
    run_open(&c, 500, 512, 128, 0, &ttft, &rps);
    double per_req = c.tune.fe_req_cpu_s + 128 * c.tune.fe_token_cpu_s;
    assert_true(rps <= 1.0 / per_req * 1.02);
    assert_true(rps >= 1.0 / per_req * 0.7);
    /* without the front end the same engine serves several times more */
    st_emu_config d = c;
    d.no_frontend = 1;
    double t2, r2;
    run_open(&d, 500, 512, 128, 0, &t2, &r2);
    if (!(r2 > 1.3 * rps))
        fail_msg("without the front end %.1f req/s, with it %.1f", r2, rps);
}

static void closed_loop_keeps_n_in_flight(void **state)
{
    (void)state;
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    const uint32_t N = 60, K = 4;
    st_emu_sim_item *it = calloc(N, sizeof *it);
    st_record *rec = calloc(N, sizeof *rec);
    for (uint32_t i = 0; i < N; i++) /* arrivals are ignored in a closed loop */
        it[i] = (st_emu_sim_item){ .arrival = (st_ns)(1000 - i) * ST_NS_PER_S, .input_len = 256, .output_len = 32 };
    char err[512];
    st_emu_sim_stats s;
    assert_int_equal(st_emu_sim_run_closed(&c, it, N, K, rec, &s, err, sizeof err), 0);
    assert_int_equal(s.completed, N);
    assert_true(s.max_running <= K && s.max_waiting <= K);
    /* item order, scheduled == sent, the first K at 0, each later one when an earlier one ended */
    for (uint32_t i = 0; i < N; i++) {
        assert_int_equal(rec[i].scheduled, rec[i].sent);
        if (i < K)
            assert_int_equal(rec[i].sent, 0);
        else {
            int found = 0;
            for (uint32_t j = 0; j < i && !found; j++)
                found = rec[j].end == rec[i].sent;
            assert_true(found);
        }
        if (i > 0)
            assert_true(rec[i].sent >= rec[i - 1].sent);
    }
    /* at every instant at most K requests were in flight */
    for (uint32_t i = 0; i < N; i++) {
        uint32_t inflight = 0;
        for (uint32_t j = 0; j < N; j++)
            inflight += rec[j].sent <= rec[i].sent && rec[j].end > rec[i].sent;
        assert_true(inflight <= K);
    }
    for (uint32_t i = 0; i < N; i++)
        st_record_free(&rec[i]);
    assert_int_equal(st_emu_sim_run_closed(&c, it, N, 0, rec, &s, err, sizeof err), -1);
    for (uint32_t i = 0; i < N; i++)
        st_record_free(&rec[i]);
    free(rec);
    free(it);
}

/* Tensor parallel: each layer's two all-reduces pay the link's fixed latency, 3x longer over
 * PCIe than over NVLink (consts.h). */
static void pcie_all_reduce_pays_its_latency(void **state)
{
    (void)state;
    st_emu_config c;
    emu_config_of(&c, "A100-PCIe", "Qwen/Qwen3-8B");
    c.tp = 2;
    st_emu_batch b = {
        .tokens = 8, .decode_tokens = 8, .seqs = 8, .sampled = 8, .attn_pairs = 8e3, .kv_read_tokens = 8e3
    };
    st_emu_step_breakdown pcie, nvlink;
    st_emu_step_seconds(&c, &b, &pcie);
    c.gpu.link_latency = EMU_ALLREDUCE_LATENCY_S;
    st_emu_step_seconds(&c, &b, &nvlink);
    assert_near(pcie.allreduce_s - nvlink.allreduce_s,
                2.0 * c.model.layers * (EMU_ALLREDUCE_LATENCY_PCIE_S - EMU_ALLREDUCE_LATENCY_S), 1e-12);
    c.tp = 1;
    st_emu_step_seconds(&c, &b, &pcie);
    assert_true(pcie.allreduce_s == 0);
}

static void async_scheduling_hides_cpu(void **state)
{
    (void)state;
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    st_emu_batch b = {
        .tokens = 64, .decode_tokens = 64, .seqs = 64, .sampled = 64, .attn_pairs = 64e3, .kv_read_tokens = 64e3
    };
    st_emu_step_breakdown bd;
    c.async_scheduling = 0;
    double sync = st_emu_step_seconds(&c, &b, &bd);
    double cpu = bd.cpu_s;
    c.async_scheduling = 1;
    double as = st_emu_step_seconds(&c, &b, NULL);
    assert_true(as < sync);
    assert_near(sync - as, cpu - EMU_ASYNC_SYNC_S, 1e-9);
    /* the default follows the version */
    c.async_scheduling = -1;
    c.vllm_version = st_emu_parse_vllm_version("0.11.0");
    assert_int_equal(st_emu_async_scheduling(&c), 0);
    c.vllm_version = st_emu_parse_vllm_version("v0.14.1");
    assert_int_equal(st_emu_async_scheduling(&c), 1);
    assert_int_equal(st_emu_parse_vllm_version("0.8.5.post1"), 805);
    assert_int_equal(st_emu_parse_vllm_version("banana"), 0);
}

static void piecewise_graphs_by_version(void **state)
{
    (void)state;
    /* vllm-project/vllm#20059: Qwen2.5-1.5B-Instruct's median TPOT 5.42 ms under piecewise CUDA
     * graphs, 5.02-5.09 ms under full graphs (28 layers: 0.33-0.40 ms a step) */
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-0.6B");
    c.max_num_seqs = 256; /* graphs up to 512 tokens */
    st_emu_batch dec = {
        .tokens = 4, .decode_tokens = 4, .seqs = 4, .sampled = 4, .attn_pairs = 4e3, .kv_read_tokens = 4e3
    };
    st_emu_batch mixed = dec;
    mixed.tokens = 260; /* a 256-token prefill chunk rides along */
    mixed.seqs = mixed.sampled = 5;
    c.vllm_version = st_emu_parse_vllm_version("0.8.5");
    assert_true(st_emu_piecewise_graph(&c, &dec));
    double pw = st_emu_step_seconds(&c, &dec, NULL);
    double pw_mixed = st_emu_step_seconds(&c, &mixed, NULL);
    c.vllm_version = st_emu_parse_vllm_version("0.11.0");
    assert_false(st_emu_piecewise_graph(&c, &dec));
    assert_true(st_emu_piecewise_graph(&c, &mixed)); /* FULL_AND_PIECEWISE: mixed batches piecewise */
    double full = st_emu_step_seconds(&c, &dec, NULL);
    double gap = pw - full;
    assert_near(gap, c.model.layers * EMU_LAYER_PIECEWISE_S, 1e-12);
    /* per step for a 28-layer model: within the published 0.28-0.42 ms */
    double per28 = 28.0 * gap / c.model.layers;
    assert_true(per28 > 0.00028 && per28 < 0.00042);
    assert_near(st_emu_step_seconds(&c, &mixed, NULL), pw_mixed, 1e-12);
    /* --enforce-eager launches every kernel: no graph, no piecewise gap */
    c.enforce_eager = 1;
    c.vllm_version = st_emu_parse_vllm_version("0.8.5");
    double e1 = st_emu_step_seconds(&c, &dec, NULL);
    c.vllm_version = st_emu_parse_vllm_version("0.11.0");
    assert_near(st_emu_step_seconds(&c, &dec, NULL), e1, 1e-12);
}

/* The makespan of n chat (or completions) requests of in/out tokens sent at once. */
static double burst_seconds(const st_emu_config *c, uint32_t n, uint32_t in, uint32_t out, int chat)
{
    st_emu_sim_item *it = calloc(n, sizeof *it);
    st_record *rec = calloc(n, sizeof *rec);
    for (uint32_t i = 0; i < n; i++)
        it[i] = (st_emu_sim_item){ .input_len = in, .output_len = out, .chat = chat };
    char err[512];
    st_emu_sim_stats s;
    assert_int_equal(st_emu_sim_run(c, it, n, rec, &s, err, sizeof err), 0);
    assert_int_equal(s.completed, n);
    st_ns last = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (rec[i].end > last)
            last = rec[i].end;
        st_record_free(&rec[i]);
    }
    free(rec);
    free(it);
    return last / 1e9;
}

static void api_server_chat_cost_by_version(void **state)
{
    (void)state;
    /* vllm-project/vllm#20065: before it, every /v1/chat/completions request re-detected the chat
     * template's content format; 1000 requests of vLLM's throughput benchmark paid "6-8 seconds
     * delay before prompts actually are started to process" for it */
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    st_emu_config old = c, cached = c;
    old.vllm_version = st_emu_parse_vllm_version("0.9.1");
    cached.vllm_version = st_emu_parse_vllm_version("0.9.2");
    double per = st_emu_fe_request_cpu_s(&old, 1) - st_emu_fe_request_cpu_s(&cached, 1);
    assert_true(per >= 0.006 && per <= 0.008);
    /* completions requests never paid it; nor do later releases */
    assert_near(st_emu_fe_request_cpu_s(&old, 0), st_emu_fe_request_cpu_s(&cached, 0), 1e-15);
    assert_near(st_emu_fe_request_cpu_s(&old, 0), c.tune.fe_req_cpu_s, 1e-15);
    c.vllm_version = st_emu_parse_vllm_version("0.11.0");
    assert_near(st_emu_fe_request_cpu_s(&c, 1), st_emu_fe_request_cpu_s(&cached, 1), 1e-15);
    assert_near(st_emu_fe_request_cpu_s(&c, 1), c.tune.fe_req_cpu_s * c.tune.fe_chat_factor, 1e-15);
    /* in the engine: 1000 short chat requests at once (the API server sets the pace) take 6-8 s
     * longer on 0.9.1 than on 0.9.2; completions the same on both */
    double d = burst_seconds(&old, 1000, 128, 4, 1) - burst_seconds(&cached, 1000, 128, 4, 1);
    if (!(d >= 6.0 && d <= 8.0))
        fail_msg("1000 chat requests: 0.9.1 takes %.2f s longer than 0.9.2 (published 6-8 s)", d);
    assert_near(burst_seconds(&old, 200, 128, 4, 0), burst_seconds(&cached, 200, 128, 4, 0), 1e-9);
}

/* A probe request reaching a busy engine mid-step: its TTFT (no front end) and the step time. */
static void probe_ttft(const st_emu_config *c, double *ttft_s, double *step_s)
{
    enum { BG = 8 };
    st_emu_sim_item it[BG + 1];
    st_record rec[BG + 1];
    for (uint32_t i = 0; i < BG; i++)
        it[i] = (st_emu_sim_item){ .arrival = 0, .input_len = 16, .output_len = 2000 };
    it[BG] = (st_emu_sim_item){ .arrival = (st_ns)1e9, .input_len = 16, .output_len = 4 };
    char err[512];
    st_emu_sim_stats s;
    assert_int_equal(st_emu_sim_run(c, it, BG + 1, rec, &s, err, sizeof err), 0);
    *ttft_s = st_record_ttft(&rec[BG]);
    /* the background's steady inter-token time is the step time */
    const st_record *r = &rec[0];
    *step_s = (st_record_event(r, 1000) - st_record_event(r, 999)) / 1e9;
    for (uint32_t i = 0; i <= BG; i++)
        st_record_free(&rec[i]);
}

static void async_scheduling_admits_a_step_later(void **state)
{
    (void)state;
    /* vllm/v1/engine/core.py step_with_batch_queue: with async scheduling step N+1 is scheduled
     * when step N starts, so a request reaching a busy engine core during step N joins step
     * N+2: its first token comes 2-3 steps after it arrives, against 1-2 without */
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    c.no_frontend = 1;
    double ttft, step;
    c.async_scheduling = 0;
    probe_ttft(&c, &ttft, &step);
    assert_true(ttft > step * 0.98 && ttft <= 2 * step * 1.02);
    c.async_scheduling = 1;
    probe_ttft(&c, &ttft, &step);
    assert_true(ttft > 2 * step * 0.98 && ttft <= 3 * step * 1.02);
    /* an idle engine schedules at once either way */
    double ta, ra;
    run_open(&c, 5, 128, 4, 1000, &ta, &ra);
    assert_true(ta < step * 1.6);
}

static void memory_matches_published_logs(void **state)
{
    (void)state;
    char err[1024];
    st_emu_memory mem;
    st_emu_config c;
    /* llm-d's H100 logs: Llama-3.3-70B FP8 at TP=2 logs 33.88 GiB weights, 4.84 activation,
     * 0.55 non-torch, 32.0 GiB KV per GPU */
    emu_config_of(&c, "H100", "meta-llama/Llama-3.3-70B-Instruct-FP8");
    c.tp = 2;
    c.max_model_len = 16000;
    assert_int_equal(st_emu_memory_plan(&c, &mem, err, sizeof err), 0);
    assert_near(mem.activation_bytes / EMU_GIB, 4.84, 0.05);
    assert_near(mem.non_torch_bytes / EMU_GIB, 0.55, 0.01);
    assert_near(mem.kv_bytes / EMU_GIB, 32.0, 0.6);
    /* Qwen3-0.6B (tied embeddings): 1.12 GiB weights, 5.56 activation, 64.45 GiB KV */
    emu_config_of(&c, "H100", "Qwen/Qwen3-0.6B");
    c.max_model_len = 16000;
    assert_int_equal(st_emu_memory_plan(&c, &mem, err, sizeof err), 0);
    assert_near(mem.weight_bytes / EMU_GIB, 1.12, 0.03);
    assert_near(mem.activation_bytes / EMU_GIB, 5.56, 0.05);
    assert_near(mem.kv_bytes / EMU_GIB, 64.45, 0.3);
    /* A100 PCIe, vLLM 0.19 (light profiling sampler): Qwen3-32B at 0.90 and 8192 tokens of
     * context logs 9.57 GiB / 39,200 tokens of KV; with fp8 KV 78,400 */
    emu_config_of(&c, "A100 80GB PCIe", "Qwen/Qwen3-32B");
    c.max_model_len = 8192;
    c.vllm_version = st_emu_parse_vllm_version("0.19.0");
    assert_int_equal(st_emu_memory_plan(&c, &mem, err, sizeof err), 0);
    assert_near((double)mem.kv_tokens / 39200, 1.0, 0.01);
    c.kv_dtype = ST_EMU_FP8;
    assert_int_equal(st_emu_memory_plan(&c, &mem, err, sizeof err), 0);
    assert_near((double)mem.kv_tokens / 78400, 1.0, 0.01);
}

static void gpus_by_form_factor(void **state)
{
    (void)state;
    char err[256];
    st_emu_gpu g;
    assert_int_equal(st_emu_gpu_find("A100 80GB PCIe", &g, err, sizeof err), 0);
    assert_near(g.mem_bw / 1e12, 1.935, 1e-9);
    assert_int_equal(g.large_class, 0);
    assert_int_equal(st_emu_gpu_find("A100 80GB SXM", &g, err, sizeof err), 0);
    assert_near(g.mem_bw / 1e12, 2.039, 1e-9);
    assert_int_equal(st_emu_gpu_find("NVIDIA H100 NVL", &g, err, sizeof err), 0);
    assert_near(g.mem_bw / 1e12, 3.9, 1e-9);
    assert_int_equal(g.large_class, 1);
    assert_int_equal(st_emu_gpu_find("H100 SXM 80GB", &g, err, sizeof err), 0);
    assert_near(g.mem_bw / 1e12, 3.35, 1e-9);
    assert_true(g.bw_eff > 0 && g.bw_eff <= 1);
    /* custom files: bw_eff is read and bounded; an 80 GB A100 file stays in the small class */
    const char *f = "name=A100 custom\nmemory_gib=79\nbf16_tflops=312\nbandwidth_tbs=2\nbw_eff=0.85\n";
    assert_int_equal(st_emu_gpu_parse(f, strlen(f), &g, err, sizeof err), 0);
    assert_near(g.bw_eff, 0.85, 1e-12);
    assert_int_equal(g.large_class, 0);
    const char *bad = "name=x\nmemory_gib=79\nbf16_tflops=312\nbandwidth_tbs=2\nbw_eff=1.5\n";
    assert_int_equal(st_emu_gpu_parse(bad, strlen(bad), &g, err, sizeof err), -1);
}

static void moe_model_with_a_dense_first_layer(void **state)
{
    (void)state;
    char err[256];
    st_emu_model m;
    assert_int_equal(st_emu_model_find("zai-org/GLM-4.5-Air", &m, err, sizeof err), 0);
    assert_int_equal(m.dense_layers, 1);
    /* published: 106 B total, 12 B active without embeddings (catalog-facts.md: 106.9 / 13.4) */
    assert_near(m.params / 1e9, 106.9, 0.5);
    assert_near(m.active_params / 1e9, 13.4, 0.3);
    const char *cfg = "{\"num_hidden_layers\":46,\"hidden_size\":4096,\"num_attention_heads\":96,"
                      "\"num_key_value_heads\":8,\"head_dim\":128,\"vocab_size\":151552,\"intermediate_size\":10944,"
                      "\"moe_intermediate_size\":1408,\"n_routed_experts\":128,\"num_experts_per_tok\":8,"
                      "\"n_shared_experts\":1,\"first_k_dense_replace\":1,\"max_position_embeddings\":131072}";
    st_emu_model p;
    assert_int_equal(st_emu_model_parse_config(cfg, strlen(cfg), "glm", &p, err, sizeof err), 0);
    assert_near(p.params / m.params, 1.0, 0.001);
}

static void oom_message_in_gib(void **state)
{
    (void)state;
    st_emu_config c;
    st_emu_memory mem;
    char err[1024];
    emu_config_of(&c, "RTX 4090", "meta-llama/Meta-Llama-3-70B");
    assert_int_equal(st_emu_memory_plan(&c, &mem, err, sizeof err), -1);
    double tried = 0, total = 0;
    const char *p = strstr(err, "Tried to allocate ");
    assert_non_null(p);
    assert_int_equal(sscanf(p, "Tried to allocate %lf GiB. GPU 0 has a total capacity of %lf GiB", &tried, &total), 2);
    /* one tensor (the largest: the 128256 x 8192 bf16 vocabulary matrix, 1.96 GiB), not a byte count */
    assert_near(tried, 1.96, 0.01);
    assert_near(total, 23.64, 0.01);
}

/* A reasoning model in virtual time (predict, --reasoning-share): the first answer token is the
 * (n_reason + 1)-th token, reasoning tokens are counted apart, and an output that is all
 * reasoning has no first answer; as the emulator's HTTP server does. */
static void reasoning_in_virtual_time(void **state)
{
    (void)state;
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    st_emu_sim_item it[3] = {
        { .arrival = 0, .input_len = 128, .output_len = 40, .n_reason = 20 },
        { .arrival = 0, .input_len = 128, .output_len = 40, .n_reason = 0 },
        { .arrival = 0, .input_len = 128, .output_len = 8, .n_reason = 8 },
    };
    st_record rec[3];
    st_emu_sim_stats s;
    char err[512];
    assert_int_equal(st_emu_sim_run(&c, it, 3, rec, &s, err, sizeof err), 0);
    assert_int_equal(s.completed, 3);
    assert_int_equal(rec[0].n_events, 40);
    /* token times of a run of steps are kept within ST_EMU_TOKEN_TOL_NS (emu/sim.h); first_answer is exact */
    assert_true(llabs(rec[0].first_answer - st_record_event(&rec[0], 20)) <= ST_EMU_TOKEN_TOL_NS);
    assert_true(rec[0].first_answer > rec[0].first_token);
    assert_int_equal(rec[0].reasoning_tokens, 20);
    assert_int_equal(rec[1].first_answer, rec[1].first_token);
    assert_int_equal(rec[1].reasoning_tokens, 0);
    assert_int_equal(rec[2].first_answer, -1);
    assert_int_equal(rec[2].reasoning_tokens, 8);
    for (int i = 0; i < 3; i++)
        st_record_free(&rec[i]);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(frontend_latency_adds_to_ttft),      cmocka_unit_test(frontend_caps_a_tiny_model),
        cmocka_unit_test(closed_loop_keeps_n_in_flight),      cmocka_unit_test(async_scheduling_hides_cpu),
        cmocka_unit_test(pcie_all_reduce_pays_its_latency),   cmocka_unit_test(async_scheduling_admits_a_step_later),
        cmocka_unit_test(memory_matches_published_logs),      cmocka_unit_test(gpus_by_form_factor),
        cmocka_unit_test(moe_model_with_a_dense_first_layer), cmocka_unit_test(oom_message_in_gib),
        cmocka_unit_test(reasoning_in_virtual_time),          cmocka_unit_test(piecewise_graphs_by_version),
        cmocka_unit_test(api_server_chat_cost_by_version),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
