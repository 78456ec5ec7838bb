/* The step-time cache (st_emu_step_cache, emu/steptime.h): a step's time and breakdown taken with the
 * cached prepared part are bit for bit st_emu_step_seconds's, for a spread of batches on several
 * configurations, for shapes seen again with other contexts, and after the cache has filled and been
 * emptied. */
#include "harness.h"

#include <stdio.h>

#include "emu/catalog.h"
#include "emu/config.h"
#include "emu/steptime.h"

#include "emu_config.h"


static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A batch of random shape: up to 8,192 tokens, some of them decodes, with contexts. Every fourth one is
 * decode-only (a run's step), one in 64 is empty. */
static st_emu_batch random_batch(uint64_t *s)
{
    st_emu_batch b = { 0 };
    uint64_t r = next(s);
    if (r % 64 == 0)
        return b;
    uint32_t dec = (uint32_t)(next(s) % 257);
    uint32_t pre = r % 4 == 0 ? 0 : 1 + (uint32_t)(next(s) % 8192);
    uint32_t pseqs = pre ? 1 + (uint32_t)(next(s) % 4) : 0;
    if (pseqs > pre)
        pseqs = pre;
    b.decode_tokens = dec;
    b.tokens = dec + pre;
    b.seqs = dec + pseqs;
    b.sampled = dec + (pseqs ? (uint32_t)(next(s) % (pseqs + 1)) : 0);
    if (b.tokens == 0)
        return b;
    b.kv_read_tokens = (double)(next(s) % 4000000);
    b.attn_pairs = b.kv_read_tokens + b.decode_tokens + (double)pre * (pre + 1) / 2.0;
    return b;
}

#define SAME_BITS(x, y, what)                                                                                          \
    do {                                                                                                               \
        double x_ = (x), y_ = (y);                                                                                     \
        if (memcmp(&x_, &y_, sizeof x_) != 0)                                                                          \
            fail_msg("%s: cached %.17g, uncached %.17g (tokens %u decodes %u seqs %u sampled %u)", what, x_, y_,       \
                     b->tokens, b->decode_tokens, b->seqs, b->sampled);                                                \
    } while (0)

/* b's time through k and without it: the same bits, the breakdown's too. */
static void same_step(st_emu_step_cache *k, const st_emu_config *c, const st_emu_batch *b)
{
    st_emu_step_breakdown x, y;
    memset(&x, 0, sizeof x);
    memset(&y, 0, sizeof y);
    SAME_BITS(st_emu_step_cache_seconds(k, c, b, NULL), st_emu_step_seconds(c, b, NULL), "total");
    SAME_BITS(st_emu_step_cache_seconds(k, c, b, &x), st_emu_step_seconds(c, b, &y), "total with breakdown");
    SAME_BITS(x.compute_s, y.compute_s, "compute_s");
    SAME_BITS(x.memory_s, y.memory_s, "memory_s");
    SAME_BITS(x.overhead_s, y.overhead_s, "overhead_s");
    SAME_BITS(x.allreduce_s, y.allreduce_s, "allreduce_s");
    SAME_BITS(x.cpu_s, y.cpu_s, "cpu_s");
    SAME_BITS(x.total_s, y.total_s, "total_s");
    SAME_BITS(x.gemm_s, y.gemm_s, "gemm_s");
    SAME_BITS(x.attn_s, y.attn_s, "attn_s");
    SAME_BITS(x.elem_s, y.elem_s, "elem_s");
    SAME_BITS(x.flops, y.flops, "flops");
    SAME_BITS(x.bytes, y.bytes, "bytes");
    assert_int_equal(x.eager, y.eager);
}

/* Configuration i of a spread: GPUs, models, tensor parallelism, eager mode, fp8 KV, a slowed decode,
 * an older vLLM, async scheduling; resolved as an engine resolves it. */
static void config_of(st_emu_config *c, int i)
{
    static const char *const gpu[] = { "H100", "A100", "L40S", "H100", "H100", "A100", "H100", "L40S" };
    static const char *const model[] = { "Qwen/Qwen3-8B", "Qwen/Qwen3-8B",
                                         "Qwen/Qwen3-8B", "meta-llama/Meta-Llama-3-8B",
                                         "Qwen/Qwen3-8B", "Qwen/Qwen3-8B",
                                         "Qwen/Qwen3-8B", "meta-llama/Meta-Llama-3-8B" };
    emu_config_of(c, gpu[i], model[i]);
    if (i == 3)
        c->tp = 2;
    if (i == 4)
        c->enforce_eager = 1;
    if (i == 5)
        c->kv_dtype = ST_EMU_FP8;
    if (i == 6) {
        c->decode_slowdown = 1.7;
        c->vllm_version = 80000;
    }
    if (i == 7)
        c->async_scheduling = 1;
    st_emu_memory mem;
    char err[512];
    if (st_emu_memory_plan(c, &mem, err, sizeof err))
        fail_msg("configuration %d: %s", i, err);
}
#define N_CONFIGS 8

/* A spread of batches on each configuration, three passes over the same shapes with new contexts:
 * the first pass prepares and keeps each shape, the others find it. */
static void cached_equals_uncached(void **state)
{
    (void)state;
    for (int ci = 0; ci < N_CONFIGS; ci++) {
        st_emu_config c;
        config_of(&c, ci);
        st_emu_step_cache k = { 0 };
        for (int pass = 0; pass < 3; pass++) {
            uint64_t shapes = 42 + (uint64_t)ci, ctx = 7 + (uint64_t)pass;
            for (int i = 0; i < 400; i++) {
                st_emu_batch b = random_batch(&shapes);
                st_emu_batch other = random_batch(&ctx); /* another context for the same shape */
                if (pass > 0 && b.tokens > 0) {
                    b.kv_read_tokens = other.kv_read_tokens;
                    b.attn_pairs = other.kv_read_tokens + b.tokens;
                }
                same_step(&k, &c, &b);
            }
            assert_true(k.n > 0 && k.n <= 400);
        }
        /* a shape seen before is found, not prepared again */
        uint64_t shapes = 42 + (uint64_t)ci;
        st_emu_batch b = random_batch(&shapes);
        uint32_t n = k.n;
        const st_emu_step_fixed *f = st_emu_step_cache_get(&k, &c, &b);
        assert_non_null(f);
        assert_ptr_equal(st_emu_step_cache_get(&k, &c, &b), f);
        assert_int_equal(k.n, n);
        st_emu_step_cache_free(&k);
        assert_null(k.slots);
        assert_int_equal(k.n, 0);
    }
}

/* Shapes one field apart (tokens, decodes, sequences or sampled rows), each queried twice in turn: a
 * cache that told them apart by fewer fields would hand one the other's part. */
static void neighbouring_shapes_apart(void **state)
{
    (void)state;
    st_emu_config c;
    config_of(&c, 6); /* a slowed decode: the decode share of the tokens matters */
    st_emu_step_cache k = { 0 };
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t n = 1; n <= 64; n++)
            for (uint32_t v = 0; v < 5; v++) {
                /* n decodes and a prefill of 256 tokens in one sequence, then one field moved */
                st_emu_batch b = { .tokens = n + 256, .decode_tokens = n, .seqs = n + 1, .sampled = n + 1 };
                if (v == 1)
                    b.tokens++;
                if (v == 2) /* one of the prefill's tokens a decode's instead */
                    b.decode_tokens++;
                if (v == 3)
                    b.seqs++;
                if (v == 4) /* a chunk: no row sampled for it */
                    b.sampled--;
                b.kv_read_tokens = 500.0 * n + pass;
                b.attn_pairs = b.kv_read_tokens + b.tokens;
                same_step(&k, &c, &b);
            }
    assert_int_equal(k.n, 64 * 5);
    st_emu_step_cache_free(&k);
}

/* More shapes than the cache keeps: it is emptied when full and goes on giving the same times, for the
 * shapes it has dropped and for those it kept since. */
static void full_cache_emptied_and_exact(void **state)
{
    (void)state;
    st_emu_config c;
    config_of(&c, 0);
    st_emu_step_cache k = { 0 };
    const uint32_t extra = 300, total = ST_EMU_STEP_CACHE_MAX + extra;
    /* distinct shapes: decode-only steps of 1..total sequences, with a prefill chunk on every other one */
    for (uint32_t i = 0; i < total; i++) {
        st_emu_batch b = { .tokens = i + 1 + (i % 2 ? 512 : 0),
                           .decode_tokens = i + 1,
                           .seqs = i + 1 + i % 2,
                           .sampled = i + 1 + i % 2,
                           .kv_read_tokens = 1000.0 * (i + 1) };
        b.attn_pairs = b.kv_read_tokens + b.decode_tokens + (i % 2 ? 512.0 * 513 / 2 : 0);
        same_step(&k, &c, &b);
        assert_int_equal(k.n, i < ST_EMU_STEP_CACHE_MAX ? i + 1 : i + 1 - ST_EMU_STEP_CACHE_MAX);
    }
    /* the dropped ones come back (prepared again), the kept ones are found */
    for (uint32_t pass = 0; pass < 2; pass++)
        for (uint32_t i = 0; i < total; i += 7) {
            st_emu_batch b = { .tokens = i + 1 + (i % 2 ? 512 : 0),
                               .decode_tokens = i + 1,
                               .seqs = i + 1 + i % 2,
                               .sampled = i + 1 + i % 2,
                               .kv_read_tokens = 333.0 * (i + 1 + pass) };
            b.attn_pairs = b.kv_read_tokens + b.decode_tokens;
            same_step(&k, &c, &b);
            assert_true(k.n >= 1 && k.n <= ST_EMU_STEP_CACHE_MAX);
        }
    /* shapes alike in tokens and sequences, apart in decodes and sampled rows, more than the cache keeps:
     * the table near full, their probes cross each other's slots */
    for (uint32_t d = 0; d < 64; d++)
        for (uint32_t sm = 1; sm <= 40; sm++)
            for (int again = 0; again < 2; again++) {
                st_emu_batch b = { .tokens = 1000, .decode_tokens = d, .seqs = 100, .sampled = sm };
                b.kv_read_tokens = 100.0 * (d + sm) + again;
                b.attn_pairs = b.kv_read_tokens + 1000.0 * 1001 / 2;
                same_step(&k, &c, &b);
            }
    /* random shapes, several times the cache's size */
    uint64_t s = 99;
    for (uint32_t i = 0; i < 4 * ST_EMU_STEP_CACHE_MAX; i++) {
        st_emu_batch b = random_batch(&s);
        same_step(&k, &c, &b);
    }
    st_emu_step_cache_free(&k);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(cached_equals_uncached),
        cmocka_unit_test(neighbouring_shapes_apart),
        cmocka_unit_test(full_cache_emptied_and_exact),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
