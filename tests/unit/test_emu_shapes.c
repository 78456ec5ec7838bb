/* Model shapes, degenerate ones included, through the shape check, the memory plan, the KV block
 * pool and the engine model (the property of tests/emu_shapes.h, also fuzzed by
 * tests/fuzz/fuzz_shapes.c): a few thousand random cases, bounded in count and time, run under
 * UBSan by the test build; then the cases that overflowed or spun before: a tiny config.json on
 * an H100 (2^30 blocks: the cache map's 32-bit size wrapped to 0 and its sizing loop never
 * ended), on an H200 with an fp8 KV cache (over 2^32 blocks: the count wrapped), and on a GPU
 * file of a petabyte (refused, naming the shape). */
#include "harness.h"

#include "core/clock.h"
#include "core/rng.h"
#include "emu_shapes.h"

#define SHAPE_CASES 3000
#define SHAPE_SECONDS 60.0 /* the most the random cases may take (a bound, not an assertion) */

static void test_random_shapes(void **state)
{
    (void)state;
    st_rng r;
    st_rng_seed(&r, 27);
    uint8_t bytes[160];
    char why[1200];
    st_ns end = st_now() + st_s_to_ns(SHAPE_SECONDS);
    int n = 0, outcome[3] = { 0 };
    for (; n < SHAPE_CASES && st_now() < end; n++) {
        for (size_t i = 0; i < sizeof bytes; i += 8) {
            uint64_t v = st_rng_next(&r);
            memcpy(bytes + i, &v, 8);
        }
        int rc = shape_case(bytes, sizeof bytes, why, sizeof why);
        if (rc < 0)
            fail_msg("case %d: %s", n, why);
        outcome[rc]++;
    }
    fprintf(stderr, "# %d shapes: %d ran through the pool and the engine, %d refused by the check, %d by the plan\n", n,
            outcome[0], outcome[1], outcome[2]);
    /* the property ran on a fair number of shapes, and on each path */
    assert_true(n >= 100);
    assert_true(outcome[0] >= n / 20 && outcome[1] >= n / 20 && outcome[2] >= 1);
}

static int plan_of(const char *config_json, const char *gpu_name_or_text, st_emu_dtype kv, st_emu_memory *mem,
                   char *err, size_t errlen)
{
    st_emu_model m;
    if (st_emu_model_parse_config(config_json, strlen(config_json), "tiny", &m, err, errlen))
        return -2;
    st_emu_gpu g;
    if (strchr(gpu_name_or_text, '='))
        assert_int_equal(st_emu_gpu_parse(gpu_name_or_text, strlen(gpu_name_or_text), &g, err, errlen), 0);
    else
        assert_int_equal(st_emu_gpu_find(gpu_name_or_text, &g, err, errlen), 0);
    st_emu_config c;
    st_emu_config_init(&c, &g, &m);
    c.kv_dtype = kv;
    return st_emu_memory_plan(&c, mem, err, errlen);
}

static const char TINY[] =
    "{\"num_hidden_layers\": 1, \"hidden_size\": 1, \"num_attention_heads\": 1, \"vocab_size\": 1}";

static void test_tiny_model_on_h100(void **state)
{
    (void)state;
    st_emu_memory mem;
    char err[1024];
    assert_int_equal(plan_of(TINY, "H100", ST_EMU_BF16, &mem, err, sizeof err), 0);
    assert_true(mem.num_blocks > (1u << 30)); /* 4 bytes of KV per token */
    /* the pool of that size is made at once (allocated as it is used), and works */
    st_emu_blocks p;
    assert_int_equal(st_emu_blocks_init(&p, mem.num_blocks, 16), 0);
    uint32_t b[4];
    assert_int_equal(st_emu_blocks_take(&p, 4, b), 0);
    assert_int_equal(b[0], 0);
    assert_int_equal(b[3], 3);
    st_emu_blocks_set_hash(&p, b[1], 42);
    assert_int_equal(st_emu_blocks_lookup(&p, 42), b[1]);
    st_emu_blocks_release(&p, b, 4);
    assert_int_equal(p.nfree, mem.num_blocks);
    assert_int_equal(st_emu_blocks_check(&p, err, sizeof err), 0);
    assert_true(p.room < 4096); /* memory follows the blocks used */
    st_emu_blocks_free(&p);
}

static void test_tiny_model_over_2_32_blocks(void **state)
{
    (void)state;
    st_emu_memory mem;
    char err[1024];
    /* an H200 with an fp8 KV cache: 2 bytes per token, 3.97e9 blocks: within the pool */
    assert_int_equal(plan_of(TINY, "H200", ST_EMU_FP8, &mem, err, sizeof err), 0);
    assert_true(mem.num_blocks > 3500000000u);
    assert_int_equal(mem.kv_tokens, (uint64_t)mem.num_blocks * 16);
    /* a petabyte GPU: more blocks than a pool holds, refused with the shape named */
    const char *huge = "name=huge\nmemory_gib=1000000\nbf16_tflops=1000\nbandwidth_tbs=3\n";
    assert_int_equal(plan_of(TINY, huge, ST_EMU_BF16, &mem, err, sizeof err), -1);
    assert_int_equal(mem.refusal, ST_EMU_START_BAD_CONFIG);
    assert_non_null(strstr(err, "num_hidden_layers 1, num_key_value_heads 1, head_dim 1"));
    assert_non_null(strstr(err, "4294967294 blocks"));
    /* a GPU file past its fields' limit is refused, quoting the value */
    st_emu_gpu g;
    const char *beyond = "name=x\nmemory_gib=1e300\nbf16_tflops=1000\nbandwidth_tbs=3\n";
    assert_int_equal(st_emu_gpu_parse(beyond, strlen(beyond), &g, err, sizeof err), -1);
    assert_non_null(strstr(err, "memory_gib: expected at most 1e+06, got '1e300'"));
}

static void test_config_fields_refused_by_name(void **state)
{
    (void)state;
    st_emu_memory mem;
    char err[1024];
    const struct {
        const char *json, *says;
    } c[] = {
        { "{\"num_hidden_layers\": 0, \"hidden_size\": 8, \"num_attention_heads\": 1, \"vocab_size\": 8}",
          "config.json: num_hidden_layers is 0, expected an integer in [1, 4096]" },
        { "{\"num_hidden_layers\": 2, \"hidden_size\": -4, \"num_attention_heads\": 1, \"vocab_size\": 8}",
          "config.json: hidden_size is -4, expected an integer in [1, 1048576]" },
        { "{\"num_hidden_layers\": 2, \"hidden_size\": 8, \"num_attention_heads\": 1, \"vocab_size\": 1e12}",
          "config.json: vocab_size is 1000000000000, expected an integer in [1, 16777216]" },
        { "{\"num_hidden_layers\": 2, \"hidden_size\": 8, \"num_attention_heads\": 2, \"vocab_size\": 8, "
          "\"num_key_value_heads\": 3}",
          "config.json: num_key_value_heads is 3, expected an integer in [1, 2]" },
        { "{\"num_hidden_layers\": 2, \"hidden_size\": 8, \"num_attention_heads\": 16, \"vocab_size\": 8}",
          "config.json: head_dim is 0 (hidden_size 8 / num_attention_heads 16)" },
        { "{\"num_hidden_layers\": 2, \"hidden_size\": 8, \"num_attention_heads\": 1, \"vocab_size\": 8, "
          "\"max_position_embeddings\": \"long\"}",
          "config.json: max_position_embeddings is \"long\", expected an integer in [1, 134217728]" },
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        assert_int_equal(plan_of(c[i].json, "H100", ST_EMU_BF16, &mem, err, sizeof err), -2);
        if (strncmp(err, c[i].says, strlen(c[i].says)))
            fail_msg("case %zu: '%s', expected '%s'", i, err, c[i].says);
    }
}

/* A max_model_len that fits in bytes but not in whole blocks (one token more than the blocks
 * hold, the rest of the memory less than a block) is refused at start, as vLLM V1 counts it
 * (max_memory_usage_bytes: whole blocks): accepted, such a request would wait forever. */
static void test_max_len_in_whole_blocks(void **state)
{
    (void)state;
    st_emu_model m;
    st_emu_gpu g;
    char err[1024];
    assert_int_equal(st_emu_model_find("Qwen/Qwen3-0.6B", &m, err, sizeof err), 0);
    assert_int_equal(st_emu_gpu_find("L40S", &g, err, sizeof err), 0);
    int found = 0;
    for (int k = 50; k <= 1000 && !found; k++) {
        st_emu_config c;
        st_emu_memory mem;
        st_emu_config_init(&c, &g, &m);
        c.gpu_memory_utilization = k / 1000.0;
        c.max_model_len = 16;
        if (st_emu_memory_plan(&c, &mem, err, sizeof err))
            continue;
        double block_bytes = mem.kv_bytes_per_token * 16;
        uint32_t len = mem.num_blocks * 16 + 1;
        if (len > m.max_position || mem.kv_bytes - mem.num_blocks * block_bytes < mem.kv_bytes_per_token)
            continue;
        found = 1;
        st_emu_config_init(&c, &g, &m);
        c.gpu_memory_utilization = k / 1000.0;
        c.max_model_len = len;
        assert_int_equal(st_emu_memory_plan(&c, &mem, err, sizeof err), -1);
        assert_int_equal(mem.refusal, ST_EMU_START_MAX_LEN);
        c.max_model_len = len - 1; /* exactly the blocks: accepted */
        assert_int_equal(st_emu_memory_plan(&c, &mem, err, sizeof err), 0);
    }
    assert_true(found);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_model_on_h100),
        cmocka_unit_test(test_tiny_model_over_2_32_blocks),
        cmocka_unit_test(test_config_fields_refused_by_name),
        cmocka_unit_test(test_max_len_in_whole_blocks),
        cmocka_unit_test(test_random_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
