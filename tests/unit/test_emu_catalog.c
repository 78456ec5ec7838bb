/* Engine model catalogs and memory plan against the reference doc's figures. */
#include "harness.h"

#include <stdio.h>

#include "emu/catalog.h"
#include "emu/config.h"
#include "emu/consts.h"
#include "emu/steptime.h"

#include "emu_config.h"


static void model_shapes_match_table(void **state)
{
    (void)state;
    char err[256];
    struct {
        const char *name;
        double params, kv_kib, wgib;
    } t[] = {
        { "Qwen/Qwen3-8B", 8.19e9, 144, 15.26 },
        { "Qwen/Qwen3-32B", 32.76e9, 256, 61.0 },
        { "meta-llama/Meta-Llama-3-8B-Instruct", 8.03e9, 128, 14.96 },
        { "meta-llama/Meta-Llama-3-70B", 70.55e9, 320, 131.4 },
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        st_emu_model m;
        assert_int_equal(st_emu_model_find(t[i].name, &m, err, sizeof err), 0);
        assert_near(m.params / t[i].params, 1.0, 0.005);
        assert_near(st_emu_model_kv_bytes_per_token(&m, ST_EMU_BF16) / 1024, t[i].kv_kib, 0.01);
        assert_near(st_emu_model_weight_bytes(&m, ST_EMU_BF16) / EMU_GIB, t[i].wgib, 0.1);
        assert_int_equal(m.weight_dtype, ST_EMU_BF16);
    }
}

static void names_pick_dtype(void **state)
{
    (void)state;
    char err[256];
    st_emu_model m;
    assert_int_equal(st_emu_model_find("Qwen/Qwen3-8B-FP8", &m, err, sizeof err), 0);
    assert_int_equal(m.weight_dtype, ST_EMU_FP8);
    assert_int_equal(m.layers, 36);
    assert_int_equal(st_emu_model_find("Qwen/Qwen3-32B-AWQ", &m, err, sizeof err), 0);
    assert_int_equal(m.weight_dtype, ST_EMU_INT4_AWQ);
    assert_int_equal(st_emu_model_find("TechxGenus/Meta-Llama-3-8B-GPTQ", &m, err, sizeof err), 0);
    assert_int_equal(m.weight_dtype, ST_EMU_INT4_GPTQ);
    assert_int_equal(st_emu_model_find("meta-llama/Llama-3.1-8B-Instruct", &m, err, sizeof err), 0);
    assert_int_equal(m.max_position, 131072);
    assert_int_equal(st_emu_model_find("meta-llama/Llama-3.3-70B-Instruct", &m, err, sizeof err), 0);
    assert_int_equal(m.layers, 80);
    assert_int_equal(st_emu_model_find("Qwen/Qwen3-80B", &m, err, sizeof err), -1);
    assert_int_equal(st_emu_model_find("gpt2", &m, err, sizeof err), -1);
    assert_non_null(strstr(err, "unknown model"));
    /* fp8 weights are about half, 4-bit about a third (16-bit embeddings stay) */
    st_emu_model q;
    assert_int_equal(st_emu_model_find("Qwen/Qwen3-8B", &q, err, sizeof err), 0);
    double b16 = st_emu_model_weight_bytes(&q, ST_EMU_BF16);
    assert_true(st_emu_model_weight_bytes(&q, ST_EMU_FP8) < 0.6 * b16);
    assert_true(st_emu_model_weight_bytes(&q, ST_EMU_INT4_AWQ) < 0.4 * b16);
}

static void gpus_and_custom_file(void **state)
{
    (void)state;
    char err[256];
    st_emu_gpu g;
    const char *names[] = { "H100", "h100-sxm", "NVIDIA H200", "A100-80GB", "L40S", "RTX4090", "rtx 4090" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        assert_int_equal(st_emu_gpu_find(names[i], &g, err, sizeof err), 0);
    assert_int_equal(st_emu_gpu_find("A100", &g, err, sizeof err), 0);
    assert_int_equal(g.large_class, 0);
    assert_near(g.bf16_flops, 312e12, 1);
    assert_int_equal(st_emu_gpu_find("H200", &g, err, sizeof err), 0);
    assert_int_equal(g.large_class, 1);
    assert_near(g.mem_bw, 4.8e12, 1);
    assert_int_equal(st_emu_gpu_find("TPU", &g, err, sizeof err), -1);

    const char *kv =
        "# my card\nname = MI300X\nmemory_gib=191.5\nbf16_tflops = 1307\nfp8_tflops=2615\nbandwidth_tbs=5.3\n";
    assert_int_equal(st_emu_gpu_parse(kv, strlen(kv), &g, err, sizeof err), 0);
    assert_string_equal(g.name, "MI300X");
    assert_near(g.mem_bytes / EMU_GIB, 191.5, 1e-9);
    assert_int_equal(g.large_class, 1);
    const char *js = "{\"name\":\"X\",\"memory_gib\":16,\"bf16_tflops\":100,\"bandwidth_tbs\":0.5,\"gemm_eff\":0.6}";
    assert_int_equal(st_emu_gpu_parse(js, strlen(js), &g, err, sizeof err), 0);
    assert_near(g.gemm_eff, 0.6, 1e-12);
    assert_int_equal(g.large_class, 0);
    /* the all-reduce latency: PCIe's without NVLink-class bandwidth, NVLink's with it, or as given */
    assert_near(g.link_latency, EMU_ALLREDUCE_LATENCY_PCIE_S, 1e-15);
    const char *nv = "name=X\nmemory_gib=80\nbf16_tflops=900\nbandwidth_tbs=3\nlink_gbs=450\n";
    assert_int_equal(st_emu_gpu_parse(nv, strlen(nv), &g, err, sizeof err), 0);
    assert_near(g.link_latency, EMU_ALLREDUCE_LATENCY_S, 1e-15);
    const char *own = "name=X\nmemory_gib=80\nbf16_tflops=900\nbandwidth_tbs=3\nlink_latency_us=12\n";
    assert_int_equal(st_emu_gpu_parse(own, strlen(own), &g, err, sizeof err), 0);
    assert_near(g.link_latency, 12e-6, 1e-15);
    /* the attention call's fixed cost: the default without attn_call_us, else as given */
    assert_true(g.attn_call_s == 0 && st_emu_attn_call_s(&g) > 0);
    const char *attn = "name=X\nmemory_gib=80\nbf16_tflops=900\nbandwidth_tbs=3\nattn_call_us=9\n";
    assert_int_equal(st_emu_gpu_parse(attn, strlen(attn), &g, err, sizeof err), 0);
    assert_near(st_emu_attn_call_s(&g), 9e-6, 1e-15);
    const char *attn0 = "name=X\nmemory_gib=80\nbf16_tflops=900\nbandwidth_tbs=3\nattn_call_us=0\n";
    assert_int_equal(st_emu_gpu_parse(attn0, strlen(attn0), &g, err, sizeof err), -1);
    const char *neg = "name=X\nmemory_gib=80\nbf16_tflops=900\nbandwidth_tbs=3\nlink_latency_us=-1\n";
    assert_int_equal(st_emu_gpu_parse(neg, strlen(neg), &g, err, sizeof err), -1);
    assert_int_equal(st_emu_gpu_find("A100-PCIe", &g, err, sizeof err), 0);
    assert_near(g.link_latency, EMU_ALLREDUCE_LATENCY_PCIE_S, 1e-15);
    assert_int_equal(st_emu_gpu_find("H100", &g, err, sizeof err), 0);
    assert_near(g.link_latency, EMU_ALLREDUCE_LATENCY_S, 1e-15);
    const char *bad1 = "name=X\nmemory_gib=abc\nbf16_tflops=1\nbandwidth_tbs=1\n";
    assert_int_equal(st_emu_gpu_parse(bad1, strlen(bad1), &g, err, sizeof err), -1);
    const char *bad2 = "name=X\nmemory_gib=10\n";
    assert_int_equal(st_emu_gpu_parse(bad2, strlen(bad2), &g, err, sizeof err), -1);
    const char *bad3 = "name=X\nfoo=1\n";
    assert_int_equal(st_emu_gpu_parse(bad3, strlen(bad3), &g, err, sizeof err), -1);
    assert_non_null(strstr(err, "foo"));
}

static void hf_config_json(void **state)
{
    (void)state;
    char err[256];
    /* Qwen3-8B's config.json (abridged) gives the catalog's shape */
    const char *cfg = "{\"architectures\":[\"Qwen3ForCausalLM\"],\"head_dim\":128,\"hidden_size\":4096,"
                      "\"intermediate_size\":12288,\"max_position_embeddings\":40960,\"num_attention_heads\":32,"
                      "\"num_hidden_layers\":36,\"num_key_value_heads\":8,\"tie_word_embeddings\":false,"
                      "\"torch_dtype\":\"bfloat16\",\"vocab_size\":151936}";
    st_emu_model m, ref;
    assert_int_equal(st_emu_model_parse_config(cfg, strlen(cfg), "/models/q", &m, err, sizeof err), 0);
    assert_int_equal(st_emu_model_find("Qwen3-8B", &ref, err, sizeof err), 0);
    assert_near(m.params, ref.params, 1);
    assert_int_equal(m.max_position, 40960);
    /* fp8 quantization_config, MoE */
    const char *moe = "{\"hidden_size\":2048,\"num_hidden_layers\":48,\"num_attention_heads\":32,"
                      "\"num_key_value_heads\":4,\"head_dim\":128,\"vocab_size\":151936,\"num_experts\":128,"
                      "\"num_experts_per_tok\":8,\"moe_intermediate_size\":768,\"intermediate_size\":6144,"
                      "\"quantization_config\":{\"quant_method\":\"fp8\"}}";
    assert_int_equal(st_emu_model_parse_config(moe, strlen(moe), "Qwen3-30B-A3B-FP8", &m, err, sizeof err), 0);
    assert_int_equal(m.weight_dtype, ST_EMU_FP8);
    assert_near(m.params / 30.5e9, 1.0, 0.03);
    assert_near(m.active_params / 3.3e9, 1.0, 0.1);
    assert_int_equal(st_emu_model_parse_config("{\"hidden_size\":1}", 17, "x", &m, err, sizeof err), -1);
    assert_int_equal(st_emu_model_parse_config("not json", 8, "x", &m, err, sizeof err), -1);
}

static void kv_size_h100_llama31_8b(void **state)
{
    (void)state;
    st_emu_config c;
    emu_config_of(&c, "H100", "meta-llama/Llama-3.1-8B-Instruct");
    st_emu_memory mem;
    char err[512];
    assert_int_equal(st_emu_memory_plan(&c, &mem, err, sizeof err), 0);
    /* measured: weights 14.99 GiB, activation 4.76, non-torch 0.13, KV 51.38 GiB */
    assert_near(mem.weight_bytes / EMU_GIB, 14.99, 0.1);
    assert_near(mem.activation_bytes / EMU_GIB, 4.76, 0.15);
    assert_near(mem.kv_bytes / EMU_GIB / 51.38, 1.0, 0.02);
    assert_int_equal(mem.max_num_batched_tokens, 8192);
    assert_int_equal(mem.max_num_seqs, 1024);
    assert_int_equal(mem.max_model_len, 131072);
    char a[128], b[128];
    st_emu_memory_log_lines(&mem, a, sizeof a, b, sizeof b);
    assert_non_null(strstr(a, "GPU KV cache size: 42"));
    assert_non_null(strstr(a, " tokens"));
    assert_non_null(strstr(b, "Maximum concurrency for 131,072 tokens per request: 3."));
}

static void kv_size_qwen3_32b_and_refusal(void **state)
{
    (void)state;
    st_emu_config c;
    emu_config_of(&c, "H100", "Qwen/Qwen3-32B");
    c.max_model_len = 16000;
    st_emu_memory mem;
    char err[1024];
    assert_int_equal(st_emu_memory_plan(&c, &mem, err, sizeof err), 0);
    assert_near(mem.weight_bytes / EMU_GIB, 61.03, 0.1);
    assert_near(mem.kv_bytes / EMU_GIB / 4.45, 1.0, 0.03);
    emu_config_of(&c, "H100", "Qwen/Qwen3-32B");
    c.max_model_len = 32000;
    assert_int_equal(st_emu_memory_plan(&c, &mem, err, sizeof err), -1);
    assert_int_equal(mem.refusal, ST_EMU_START_MAX_LEN);
    assert_non_null(strstr(
        err, "To serve at least one request with the models's max seq len (32000), (7.81 GiB KV cache is needed"));
    assert_non_null(strstr(err, "estimated maximum model length is"));
    /* default max_model_len (40960) refuses too */
    emu_config_of(&c, "H100", "Qwen/Qwen3-32B");
    assert_int_equal(st_emu_memory_plan(&c, &mem, err, sizeof err), -1);
}

static void startup_refusals(void **state)
{
    (void)state;
    st_emu_config c;
    st_emu_memory mem;
    char err[1024];
    emu_config_of(&c, "RTX 4090", "meta-llama/Meta-Llama-3-70B");
    assert_int_equal(st_emu_memory_plan(&c, &mem, err, sizeof err), -1);
    assert_int_equal(mem.refusal, ST_EMU_START_WEIGHTS_OOM);
    assert_non_null(strstr(err, "CUDA out of memory"));
    emu_config_of(&c, "H100", "Qwen/Qwen3-32B");
    c.max_model_len = 16000;
    c.gpu_memory_utilization = 0.80; /* 63.35 GiB: weights fit, nothing left for KV */
    assert_int_equal(st_emu_memory_plan(&c, &mem, err, sizeof err), -1);
    assert_int_equal(mem.refusal, ST_EMU_START_NO_KV_MEMORY);
    assert_non_null(strstr(err, "No available memory for the cache blocks"));
    emu_config_of(&c, "H100", "meta-llama/Meta-Llama-3-8B");
    c.max_model_len = 9000;
    assert_int_equal(st_emu_memory_plan(&c, &mem, err, sizeof err), -1);
    assert_int_equal(mem.refusal, ST_EMU_START_BAD_CONFIG);
    assert_non_null(strstr(err, "max_position_embeddings=8192"));
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    c.tp = 3;
    assert_int_equal(st_emu_memory_plan(&c, &mem, err, sizeof err), -1);
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    c.max_num_seqs = 512;
    c.max_num_batched_tokens = 256;
    assert_int_equal(st_emu_memory_plan(&c, &mem, err, sizeof err), -1);
}

static void flags_move_memory(void **state)
{
    (void)state;
    st_emu_config c;
    st_emu_memory a, b;
    char err[512];
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    assert_int_equal(st_emu_memory_plan(&c, &a, err, sizeof err), 0);
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    c.kv_dtype = ST_EMU_FP8;
    assert_int_equal(st_emu_memory_plan(&c, &b, err, sizeof err), 0);
    assert_near((double)b.num_blocks / a.num_blocks, 2.0, 0.01); /* fp8 KV: twice the blocks */
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B-FP8");
    assert_int_equal(st_emu_memory_plan(&c, &b, err, sizeof err), 0);
    assert_true(b.num_blocks > a.num_blocks); /* fp8 weights free memory for KV */
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    c.gpu_memory_utilization = 0.95;
    assert_int_equal(st_emu_memory_plan(&c, &b, err, sizeof err), 0);
    assert_true(b.num_blocks > a.num_blocks);
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    c.max_num_batched_tokens = 32768; /* larger activation peak: fewer blocks */
    assert_int_equal(st_emu_memory_plan(&c, &b, err, sizeof err), 0);
    assert_true(b.num_blocks < a.num_blocks);
    emu_config_of(&c, "H100", "Qwen/Qwen3-32B");
    c.tp = 2;
    assert_int_equal(st_emu_memory_plan(&c, &b, err, sizeof err), 0);
    assert_near(b.weight_bytes / EMU_GIB, 61.03 / 2, 0.1);
    assert_true(b.kv_tokens > 200000);
    /* the A100 is in the small default class despite 80 GB */
    emu_config_of(&c, "A100", "Qwen/Qwen3-8B");
    assert_int_equal(st_emu_memory_plan(&c, &b, err, sizeof err), 0);
    assert_int_equal(b.max_num_batched_tokens, 2048);
    assert_int_equal(b.max_num_seqs, 256);
}

/* From vLLM 0.21.0 the memory profiler reserves the CUDA graphs' memory out of the KV budget (consts.h
 * EMU_VLLM_CUDAGRAPH_PROFILE_VERSION). Its two dense sources come back within 7 %: Qwen3-8B with 256
 * sequences ("PIECEWISE=51 (largest=512), FULL=35 (largest=256)", 0.52 GiB; LMCache/LMCache#3430) and
 * Qwen2.5-7B on vLLM 0.22.0 with 128 ("PIECEWISE=35 (largest=256), FULL=19 (largest=128)", 0.37 GiB);
 * an H100's 1024 sequences add the full graphs of 272..512; no graphs (--enforce-eager) or an older
 * vLLM, no reserve. */
static void cudagraph_reserve_from_0_21(void **state)
{
    (void)state;
    st_emu_config c;
    st_emu_memory before, at, eager;
    char err[512];
    emu_config_of(&c, "RTX 4090", "Qwen/Qwen3-8B");
    c.max_model_len = 4096;
    c.vllm_version = st_emu_parse_vllm_version("0.20.2");
    assert_int_equal(st_emu_memory_plan(&c, &before, err, sizeof err), 0);
    assert_int_equal(before.cudagraph_graphs, 0);
    emu_config_of(&c, "RTX 4090", "Qwen/Qwen3-8B");
    c.max_model_len = 4096;
    c.vllm_version = st_emu_parse_vllm_version("0.21.0");
    assert_int_equal(st_emu_memory_plan(&c, &at, err, sizeof err), 0);
    assert_int_equal(at.cudagraph_graphs, 51 + 35);
    assert_near(at.cudagraph_bytes / EMU_GIB / 0.52, 1.0, 0.07);
    assert_near(before.kv_bytes - at.kv_bytes, at.cudagraph_bytes, 1.0);
    assert_true(at.num_blocks < before.num_blocks);
    emu_config_of(&c, "RTX 4090", "Qwen/Qwen3-8B");
    c.max_model_len = 4096;
    c.vllm_version = st_emu_parse_vllm_version("0.30.0");
    c.enforce_eager = 1;
    assert_int_equal(st_emu_memory_plan(&c, &eager, err, sizeof err), 0);
    assert_int_equal(eager.cudagraph_graphs, 0);
    assert_int_equal(eager.num_blocks, before.num_blocks);
    /* the second log: Qwen2.5-7B, 128 sequences, 2048 tokens */
    emu_config_of(&c, "L40S", "Qwen/Qwen2.5-7B-Instruct");
    c.max_model_len = 4096;
    c.max_num_seqs = 128;
    c.max_num_batched_tokens = 2048;
    c.vllm_version = st_emu_parse_vllm_version("0.22.0");
    assert_int_equal(st_emu_memory_plan(&c, &at, err, sizeof err), 0);
    assert_int_equal(at.cudagraph_graphs, 35 + 19);
    assert_near(at.cudagraph_bytes / EMU_GIB / 0.37, 1.0, 0.07);
    /* H100: 1024 sequences, full decode graphs up to 512 tokens as well */
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    c.max_model_len = 16384;
    c.vllm_version = st_emu_parse_vllm_version("0.30.0");
    assert_int_equal(st_emu_memory_plan(&c, &at, err, sizeof err), 0);
    assert_int_equal(at.cudagraph_graphs, 51 + 51);
    assert_near(at.cudagraph_bytes / EMU_CUDAGRAPH_PROFILE_BYTES_PER_GRAPH, 102.0, 1e-9);
    /* fewer sequences, fewer sizes: piecewise up to 2 x 64 = 128 tokens (1, 2, 4, 8..128: 19), full up
     * to 64 (11); a token budget under 2 x max_num_seqs caps the piecewise sizes (256: 35 + 35) */
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    c.max_model_len = 16384;
    c.vllm_version = st_emu_parse_vllm_version("0.30.0");
    c.max_num_seqs = 64;
    assert_int_equal(st_emu_memory_plan(&c, &at, err, sizeof err), 0);
    assert_int_equal(at.cudagraph_graphs, 19 + 11);
    emu_config_of(&c, "H100", "Qwen/Qwen3-8B");
    c.max_model_len = 16384;
    c.vllm_version = st_emu_parse_vllm_version("0.30.0");
    c.max_num_seqs = 256;
    c.max_num_batched_tokens = 256;
    assert_int_equal(st_emu_memory_plan(&c, &at, err, sizeof err), 0);
    assert_int_equal(at.cudagraph_graphs, 35 + 35);
}

/* Every canonical key is found; a form the catalog lacks is refused, never taken for another. */
/* Each GPU's published device-copy rate (consts.h EMU_COPY_EFF_*): the memory technology's, against
 * the published copies it cites; none where none was found (HBM3, HBM3e, GDDR6). */
static void gpu_copy_rate_by_memory(void **state)
{
    (void)state;
    char err[256];
    struct {
        const char *name;
        double copy_gbs; /* a published copy of this GPU's memory, GB/s; 0: none */
    } t[] = {
        { "RTX4090", 921 },            /* clpeak, krrishnarraj/clpeak#106 */
        { "A100 80GB PCIe", 1727 },    /* the A800 80GB PCIe, mli/transformers-benchmarks#4 */
        { "A100", 0.871 * 2039 },      /* an A100 40GB's 1355 of 1555 GB/s, at the 80 GB board's peak */
        { "H100 PCIe", 0.871 * 2000 }, /* HBM2e, as the A100s */
        { "H100", 0 },
        { "H200", 0 },
        { "L40S", 0 },
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        st_emu_gpu g;
        assert_int_equal(st_emu_gpu_find(t[i].name, &g, err, sizeof err), 0);
        if (t[i].copy_gbs <= 0) {
            assert_true(g.copy_eff == 0);
            continue;
        }
        assert_near(g.copy_eff * g.mem_bw / 1e9 / t[i].copy_gbs, 1.0, 0.03);
    }
    st_emu_gpu gddr, hbm;
    assert_int_equal(st_emu_gpu_find("RTX4090", &gddr, err, sizeof err), 0);
    assert_int_equal(st_emu_gpu_find("A100", &hbm, err, sizeof err), 0);
    assert_true(gddr.copy_eff > hbm.copy_eff);
}

static void gpu_keys_and_missing_forms(void **state)
{
    (void)state;
    const char *keys[16];
    int n = st_emu_gpu_keys(keys, 16);
    assert_true(n >= 7);
    st_emu_gpu g;
    char err[300];
    for (int i = 0; i < n; i++)
        assert_int_equal(st_emu_gpu_find(keys[i], &g, err, sizeof err), 0);
    assert_int_equal(st_emu_gpu_find("A100-PCIe", &g, err, sizeof err), 0);
    assert_non_null(strstr(g.name, "PCIe"));
    assert_int_equal(st_emu_gpu_find("H100-NVL", &g, err, sizeof err), 0);
    assert_non_null(strstr(g.name, "NVL"));
    assert_int_equal(st_emu_gpu_find("A100-40GB", &g, err, sizeof err), -1);
    assert_int_equal(st_emu_gpu_find("A100 PCIe 40GB", &g, err, sizeof err), -1);
    assert_int_equal(st_emu_gpu_find("H100 PCIe", &g, err, sizeof err), 0);
    assert_non_null(strstr(g.name, "PCIe"));
    assert_true(g.mem_bw < 2.5e12); /* HBM2e, not the SXM's HBM3 */
    assert_int_equal(st_emu_gpu_find("H100 SXM", &g, err, sizeof err), 0);
    /* a name whose number only begins with a known GPU's is another GPU (or a typo), not that one */
    const char *others[] = { "H1000", "RTX A1000", "A1000", "H2000", "14090", "RTX 40900" };
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        assert_int_equal(st_emu_gpu_find(others[i], &g, err, sizeof err), -1);
        assert_non_null(strstr(err, "unknown GPU"));
    }
    const char *same[] = { "A100 80GB", "a100-80gb", "H100-80GB-HBM3", "NVIDIA GeForce RTX 4090", "H100SXM5" };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
        assert_int_equal(st_emu_gpu_find(same[i], &g, err, sizeof err), 0);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(gpu_keys_and_missing_forms),
        cmocka_unit_test(gpu_copy_rate_by_memory),
        cmocka_unit_test(model_shapes_match_table),
        cmocka_unit_test(names_pick_dtype),
        cmocka_unit_test(gpus_and_custom_file),
        cmocka_unit_test(hf_config_json),
        cmocka_unit_test(kv_size_h100_llama31_8b),
        cmocka_unit_test(kv_size_qwen3_32b_and_refusal),
        cmocka_unit_test(startup_refusals),
        cmocka_unit_test(flags_move_memory),
        cmocka_unit_test(cudagraph_reserve_from_0_21),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
