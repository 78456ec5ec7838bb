#include "harness.h"

#include <inttypes.h>
#include <stdio.h>

#include "core/buf.h"
#include "engine/gguf.h"
#include "engine/modelgen.h"

/* ---- helpers ----------------------------------------------------------------------------- */

static int sink_buf(void *ctx, const void *p, size_t n) { return st_buf_append(ctx, p, n); }

/* Tensor bytes: byte k of tensor ti is (ti * 31 + k) & 0xff. */
static int fill_pattern(void *ctx, size_t ti, uint64_t off, void *dst, size_t n)
{
    (void)ctx;
    for (size_t k = 0; k < n; k++)
        ((unsigned char *)dst)[k] = (unsigned char)((ti * 31 + off + k) & 0xff);
    return 0;
}

/* A description with one key of every type and three tensors (f32, f16, q8_0). */
static void sample(st_gguf *g)
{
    st_gguf_init(g);
    assert_int_equal(st_gguf_set_str(g, "general.architecture", "llama"), 0);
    assert_int_equal(st_gguf_set_u32(g, "llama.block_count", 2), 0);
    assert_int_equal(st_gguf_set_i32(g, "test.i32", -7), 0);
    assert_int_equal(st_gguf_set_u64(g, "test.u64", 1ull << 40), 0);
    assert_int_equal(st_gguf_set_f32(g, "test.f32", 1e-5f), 0);
    assert_int_equal(st_gguf_set_bool(g, "test.bool", 1), 0);
    const char *toks[] = { "<unk>", "<s>", "", "hello \xe2\x96\x81world" };
    assert_int_equal(st_gguf_set_arr_str(g, "tokenizer.ggml.tokens", 4, toks), 0);
    const float scores[] = { 0.f, -1.5f, 2.f, 3.25f };
    assert_int_equal(st_gguf_set_arr_num(g, "tokenizer.ggml.scores", ST_GGUF_F32, 4, scores), 0);
    const int32_t types[] = { 2, 3, 1, 1 };
    assert_int_equal(st_gguf_set_arr_num(g, "tokenizer.ggml.token_type", ST_GGUF_I32, 4, types), 0);
    char err[256];
    uint64_t ne1[] = { 5 }, ne2[] = { 7, 3 }, ne3[] = { 64, 2 };
    assert_int_equal(st_gguf_add_tensor(g, "output_norm.weight", ST_GGML_F32, 1, ne1, err, sizeof err), 0);
    assert_int_equal(st_gguf_add_tensor(g, "token_embd.weight", ST_GGML_F16, 2, ne2, err, sizeof err), 0);
    assert_int_equal(st_gguf_add_tensor(g, "output.weight", ST_GGML_Q8_0, 2, ne3, err, sizeof err), 0);
}

static void write_mem(const st_gguf *g, st_buf *out)
{
    char err[256];
    st_buf_init(out, (size_t)1 << 28);
    assert_int_equal(st_gguf_write(g, fill_pattern, NULL, sink_buf, out, err, sizeof err), 0);
}

/* Parses bytes that must fail; returns the error message (static). */
static const char *parse_fails(const void *p, size_t n)
{
    static char err[512];
    st_gguf g;
    err[0] = '\0';
    assert_int_equal(st_gguf_parse(p, n, n, &g, err, sizeof err), -1);
    assert_true(err[0] != '\0');
    assert_int_equal(g.n_kv, 0);
    assert_int_equal(g.n_t, 0);
    return err;
}

static void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }

/* ---- the format ---------------------------------------------------------------------------- */

static void gguf_round_trip(void **state)
{
    (void)state;
    st_gguf g;
    sample(&g);
    /* offsets: f32 5 x 4 = 20 bytes padded to 32; f16 21 x 2 = 42 -> 64; q8_0 2 rows x 2 blocks x 34 */
    assert_int_equal(g.t[0].offset, 0);
    assert_int_equal(g.t[1].offset, 32);
    assert_int_equal(g.t[2].offset, 96);
    assert_int_equal(g.t[2].nbytes, 136);
    st_buf out;
    write_mem(&g, &out);

    st_gguf r;
    char err[256] = "";
    assert_int_equal(st_gguf_parse(out.data, out.len, out.len, &r, err, sizeof err), 0);
    assert_int_equal(r.version, 3);
    assert_int_equal(r.n_kv, g.n_kv);
    assert_int_equal(r.n_t, 3);
    assert_int_equal(r.alignment, 32);
    assert_int_equal(r.data_offset % 32, 0);
    assert_int_equal(r.data_offset + r.data_size, out.len);
    assert_string_equal(st_gguf_get_str(&r, "general.architecture"), "llama");
    uint64_t u;
    assert_int_equal(st_gguf_get_u64(&r, "llama.block_count", &u), 0);
    assert_int_equal(u, 2);
    assert_int_equal(st_gguf_get_u64(&r, "test.u64", &u), 0);
    assert_true(u == 1ull << 40);
    assert_int_equal(st_gguf_get_u64(&r, "test.i32", &u), -1); /* negative */
    assert_int_equal(st_gguf_find(&r, "test.i32")->v.i, -7);
    double f;
    assert_int_equal(st_gguf_get_f64(&r, "test.f32", &f), 0);
    assert_true((float)f == 1e-5f);
    assert_int_equal(st_gguf_find(&r, "test.bool")->v.u, 1);
    const st_gguf_kv *tk = st_gguf_find(&r, "tokenizer.ggml.tokens");
    assert_non_null(tk);
    assert_int_equal(tk->v.n, 4);
    const char *s;
    uint64_t n;
    assert_int_equal(st_gguf_arr_str(&tk->v, 3, &s, &n), 0);
    assert_int_equal(n, strlen("hello \xe2\x96\x81world"));
    assert_memory_equal(s, "hello \xe2\x96\x81world", n);
    assert_int_equal(st_gguf_arr_str(&tk->v, 2, &s, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(st_gguf_arr_str(&tk->v, 4, &s, &n), -1);
    const st_gguf_kv *sc = st_gguf_find(&r, "tokenizer.ggml.scores");
    float f3;
    memcpy(&f3, sc->v.raw + 12, 4);
    assert_true(f3 == 3.25f);
    const st_gguf_tensor *t = st_gguf_tensor_find(&r, "token_embd.weight");
    assert_non_null(t);
    assert_int_equal(t->n_dims, 2);
    assert_int_equal(t->ne[0], 7);
    assert_int_equal(t->ne[1], 3);
    assert_int_equal(t->type, ST_GGML_F16);
    assert_int_equal(t->nbytes, 42);
    /* the data: every tensor's bytes where its offset says, padding zero */
    for (size_t i = 0; i < r.n_t; i++) {
        const unsigned char *d = (const unsigned char *)out.data + r.data_offset + r.t[i].offset;
        for (uint64_t k = 0; k < r.t[i].nbytes; k++)
            assert_int_equal(d[k], (unsigned char)((i * 31 + k) & 0xff));
        for (uint64_t k = r.t[i].nbytes; k < r.data_size - r.t[i].offset && k % 32; k++)
            assert_int_equal(d[k], 0);
    }
    /* serialising the parsed description gives the same bytes */
    st_buf again;
    write_mem(&r, &again);
    assert_int_equal(again.len, out.len);
    assert_memory_equal(again.data, out.data, out.len);
    st_buf_free(&again);
    st_buf_free(&out);
    st_gguf_free(&r);
    st_gguf_free(&g);
}

static void gguf_setters_replace_and_copy(void **state)
{
    (void)state;
    st_gguf g, h;
    sample(&g);
    size_t n = g.n_kv;
    assert_int_equal(st_gguf_set_str(&g, "general.architecture", "qwen2"), 0);
    assert_int_equal(g.n_kv, n);
    assert_string_equal(st_gguf_get_str(&g, "general.architecture"), "qwen2");
    assert_int_equal(st_gguf_set_u32(&g, "general.architecture", 5), 0); /* replaced, type and all */
    assert_null(st_gguf_get_str(&g, "general.architecture"));
    assert_int_equal(st_gguf_set_str(&g, "", "x"), -1);
    st_gguf_init(&h);
    for (size_t i = 0; i < g.n_kv; i++)
        assert_int_equal(st_gguf_set_value(&h, g.kv[i].key, &g.kv[i].v), 0);
    const st_gguf_kv *a = st_gguf_find(&g, "tokenizer.ggml.tokens"), *b = st_gguf_find(&h, "tokenizer.ggml.tokens");
    assert_true(a->v.raw != b->v.raw);
    assert_int_equal(a->v.raw_len, b->v.raw_len);
    assert_memory_equal(a->v.raw, b->v.raw, a->v.raw_len);
    st_gguf_free(&h);
    /* tensors: bad names, shapes and types are refused */
    char err[256];
    uint64_t ne[] = { 32, 2 }, odd[] = { 33, 2 }, zero[] = { 0 };
    assert_int_equal(st_gguf_add_tensor(&g, "output.weight", ST_GGML_F32, 2, ne, err, sizeof err), -1);
    assert_non_null(strstr(err, "already"));
    assert_int_equal(st_gguf_add_tensor(&g, "x", ST_GGML_Q4_0, 2, odd, err, sizeof err), -1);
    assert_non_null(strstr(err, "whole number of q4_0 blocks"));
    assert_int_equal(st_gguf_add_tensor(&g, "y", 4, 2, ne, err, sizeof err), -1); /* removed type */
    assert_non_null(strstr(err, "unknown ggml type 4"));
    assert_int_equal(st_gguf_add_tensor(&g, "z", ST_GGML_F32, 1, zero, err, sizeof err), -1);
    assert_int_equal(st_gguf_add_tensor(&g, "w", ST_GGML_F32, 5, ne, err, sizeof err), -1);
    char longname[80];
    memset(longname, 'a', 64);
    longname[64] = '\0';
    assert_int_equal(st_gguf_add_tensor(&g, longname, ST_GGML_F32, 1, ne, err, sizeof err), -1);
    assert_int_equal(g.n_t, 3);
    st_gguf_free(&g);
}

static void gguf_alignment(void **state)
{
    (void)state;
    st_gguf g;
    st_gguf_init(&g);
    assert_int_equal(st_gguf_set_u32(&g, "general.alignment", 64), 0);
    char err[256];
    uint64_t ne[] = { 3 };
    assert_int_equal(st_gguf_add_tensor(&g, "a", ST_GGML_F32, 1, ne, err, sizeof err), 0);
    assert_int_equal(st_gguf_add_tensor(&g, "b", ST_GGML_F32, 1, ne, err, sizeof err), 0);
    assert_int_equal(g.t[1].offset, 64);
    st_buf out;
    write_mem(&g, &out);
    st_gguf r;
    assert_int_equal(st_gguf_parse(out.data, out.len, out.len, &r, err, sizeof err), 0);
    assert_int_equal(r.alignment, 64);
    assert_int_equal(r.data_offset % 64, 0);
    st_gguf_free(&r);
    /* changing the alignment after the tensors were placed is caught when serialising */
    assert_int_equal(st_gguf_set_u32(&g, "general.alignment", 128), 0);
    unsigned char *h;
    size_t hl;
    assert_int_equal(st_gguf_header(&g, &h, &hl, err, sizeof err), -1);
    assert_non_null(strstr(err, "offset"));
    st_buf_free(&out);
    st_gguf_free(&g);
}

/* Every proper prefix of a valid file is refused with a message, and nothing leaks. */
static void gguf_truncated_everywhere(void **state)
{
    (void)state;
    st_gguf g;
    sample(&g);
    st_buf out;
    write_mem(&g, &out);
    st_gguf r;
    char err[256];
    assert_int_equal(st_gguf_parse(out.data, out.len, out.len, &r, err, sizeof err), 0);
    /* the file needs its last tensor's bytes, not the padding after them */
    size_t end = (size_t)(r.data_offset + r.t[2].offset + r.t[2].nbytes), hdr = (size_t)r.data_offset;
    st_gguf_free(&r);
    for (size_t n = 0; n < end; n++) {
        const char *e = parse_fails(out.data, n);
        assert_true(strstr(e, "file ends") || strstr(e, "past the end"));
    }
    for (size_t n = end; n <= out.len; n++) {
        assert_int_equal(st_gguf_parse(out.data, n, n, &r, err, sizeof err), 0);
        st_gguf_free(&r);
    }
    /* a header read from a prefix of a longer file: the message says so */
    assert_int_equal(st_gguf_parse(out.data, 40, out.len, &r, err, sizeof err), -1);
    assert_non_null(strstr(err, "first 40 bytes"));
    /* the header alone, with the file size given, is enough */
    assert_int_equal(st_gguf_parse(out.data, hdr, out.len, &r, err, sizeof err), 0);
    assert_int_equal(r.n_t, 3);
    st_gguf_free(&r);
    st_buf_free(&out);
    st_gguf_free(&g);
}

static void gguf_malformed(void **state)
{
    (void)state;
    unsigned char b[256];
    memset(b, 0, sizeof b);
    memcpy(b, "GGUL", 4);
    assert_non_null(strstr(parse_fails(b, 24), "not a GGUF file"));
    memcpy(b, "GGUF", 4);
    put32(b + 4, 4);
    assert_non_null(strstr(parse_fails(b, 24), "version 4"));
    put32(b + 4, 1);
    assert_non_null(strstr(parse_fails(b, 24), "version 1"));
    put32(b + 4, 3);
    put64(b + 8, (uint64_t)1 << 40); /* tensors */
    assert_non_null(strstr(parse_fails(b, 24), "tensors"));
    put64(b + 8, 0);
    put64(b + 16, UINT64_MAX); /* metadata entries */
    assert_non_null(strstr(parse_fails(b, 24), "metadata entries"));

    /* one key: "k" of the given type, value bytes after */
    unsigned char kv[64];
    size_t p;
#define KV_HEADER(type)                                                                                                \
    (memcpy(kv, "GGUF", 4), put32(kv + 4, 3), put64(kv + 8, 0), put64(kv + 16, 1), put64(kv + 24, 1), kv[32] = 'k',    \
     put32(kv + 33, (type)), p = 37)
    KV_HEADER(13);
    assert_non_null(strstr(parse_fails(kv, p), "unknown value type 13"));
    KV_HEADER(ST_GGUF_BOOL);
    kv[p++] = 2;
    assert_non_null(strstr(parse_fails(kv, p), "bool value 2"));
    KV_HEADER(ST_GGUF_ARR);
    put32(kv + p, ST_GGUF_ARR);
    put64(kv + p + 4, 0);
    p += 12;
    assert_non_null(strstr(parse_fails(kv, p), "array of array"));
    KV_HEADER(ST_GGUF_ARR);
    put32(kv + p, ST_GGUF_U64);
    put64(kv + p + 4, (uint64_t)1 << 61); /* count x 8 overflows size_t arithmetic if unchecked */
    p += 12;
    assert_non_null(strstr(parse_fails(kv, p), "file ends"));
    KV_HEADER(ST_GGUF_STR);
    put64(kv + p, UINT64_MAX);
    p += 8;
    assert_non_null(strstr(parse_fails(kv, p), "file ends"));
    /* an empty key */
    KV_HEADER(ST_GGUF_U8);
    put64(kv + 24, 0);
    memmove(kv + 32, kv + 33, 4);
    kv[36] = 1;
    assert_non_null(strstr(parse_fails(kv, 37), "key is empty"));
#undef KV_HEADER

    /* duplicate keys, a non-u32 or non-power-of-two alignment */
    st_gguf g;
    st_gguf_init(&g);
    st_gguf_set_u32(&g, "a.b", 1);
    st_gguf_set_u32(&g, "a.c", 2);
    unsigned char *h;
    size_t hl;
    char err[256];
    assert_int_equal(st_gguf_header(&g, &h, &hl, err, sizeof err), 0);
    unsigned char *c = memmem(h, hl, "a.c", 3);
    assert_non_null(c);
    c[2] = 'b';
    assert_non_null(strstr(parse_fails(h, hl), "duplicate key 'a.b'"));
    free(h);
    st_gguf_free(&g);

    /* general.alignment: a u32 power of two (it is the last bytes of this header) */
    st_gguf_init(&g);
    assert_int_equal(st_gguf_set_u32(&g, "general.alignment", 32), 0);
    assert_int_equal(st_gguf_header(&g, &h, &hl, err, sizeof err), 0);
    put32(h + hl - 4, 48);
    assert_non_null(strstr(parse_fails(h, hl), "power of two"));
    put32(h + hl - 4, 0);
    assert_non_null(strstr(parse_fails(h, hl), "power of two"));
    free(h);
    st_gguf_free(&g);
    st_gguf_init(&g);
    st_gguf_set_u64(&g, "general.alignment", 32);
    assert_int_equal(st_gguf_header(&g, &h, &hl, err, sizeof err), 0);
    assert_non_null(strstr(parse_fails(h, hl), "must be a u32"));
    free(h);
    st_gguf_free(&g);

    /* duplicate tensor names */
    st_gguf_init(&g);
    uint64_t ne[] = { 4 };
    assert_int_equal(st_gguf_add_tensor(&g, "aa", ST_GGML_F32, 1, ne, err, sizeof err), 0);
    assert_int_equal(st_gguf_add_tensor(&g, "ab", ST_GGML_F32, 1, ne, err, sizeof err), 0);
    st_buf out;
    write_mem(&g, &out);
    c = memmem(out.data, out.len, "ab", 2);
    assert_non_null(c);
    c[1] = 'a';
    assert_non_null(strstr(parse_fails(out.data, out.len), "duplicate tensor name 'aa'"));
    st_buf_free(&out);
    st_gguf_free(&g);
}

/* Tensor infos that llama.cpp would refuse are refused, with the tensor's name. */
static void gguf_malformed_tensors(void **state)
{
    (void)state;
    st_gguf g;
    sample(&g);
    st_buf out;
    write_mem(&g, &out);
    st_gguf r;
    char err[256];
    assert_int_equal(st_gguf_parse(out.data, out.len, out.len, &r, err, sizeof err), 0);
    /* where each field of tensor 1 (token_embd.weight) sits: find its name in the header */
    const char *nm = "token_embd.weight";
    unsigned char *at = NULL;
    for (size_t i = 0; i + strlen(nm) < r.data_offset; i++)
        if (!memcmp(out.data + i, nm, strlen(nm)))
            at = (unsigned char *)out.data + i;
    assert_non_null(at);
    unsigned char *ndims = at + strlen(nm), *ne0 = ndims + 4, *type = ne0 + 16, *off = type + 4;
    st_gguf_free(&r);
    unsigned char save[32];

    memcpy(save, ndims, 4);
    put32(ndims, 5);
    assert_non_null(strstr(parse_fails(out.data, out.len), "5 dimensions"));
    memcpy(ndims, save, 4);

    put32(type, 99);
    assert_non_null(strstr(parse_fails(out.data, out.len), "unknown ggml type 99"));
    put32(type, ST_GGML_Q4_0); /* 7 elements per row: not whole blocks */
    assert_non_null(strstr(parse_fails(out.data, out.len), "token_embd.weight"));
    put32(type, ST_GGML_F16);

    put64(off, 16);
    assert_non_null(strstr(parse_fails(out.data, out.len), "offset 16, 32 expected"));
    put64(off, 32);

    memcpy(save, ne0, 8);
    put64(ne0, UINT64_MAX);
    assert_non_null(strstr(parse_fails(out.data, out.len), "negative"));
    put64(ne0, (uint64_t)1 << 40); /* huge: the data is past the end of the file */
    const char *e = parse_fails(out.data, out.len);
    assert_true(strstr(e, "past the end") || strstr(e, "offset"));
    memcpy(ne0, save, 8);

    memcpy(at, "output.weight\0\0\0\0", strlen(nm)); /* same length, NUL inside */
    assert_non_null(strstr(parse_fails(out.data, out.len), "NUL"));
    memcpy(at, "output.weightXXXX", strlen(nm)); /* another valid name of the same length */
    assert_int_equal(st_gguf_parse(out.data, out.len, out.len, &r, err, sizeof err), 0);
    st_gguf_free(&r);
    st_buf_free(&out);
    st_gguf_free(&g);
}

static void gguf_half_precision(void **state)
{
    (void)state;
    assert_int_equal(st_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(st_f32_to_f16(-2.0f), 0xc000);
    assert_int_equal(st_f32_to_f16(0.0f), 0x0000);
    assert_int_equal(st_f32_to_f16(-0.0f), 0x8000);
    assert_int_equal(st_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(st_f32_to_f16(65520.0f), 0x7c00); /* rounds up to infinity */
    assert_int_equal(st_f32_to_f16(65519.0f), 0x7bff);
    assert_int_equal(st_f32_to_f16(ldexpf(1, -24)), 0x0001);        /* smallest subnormal */
    assert_int_equal(st_f32_to_f16(ldexpf(1, -25)), 0x0000);        /* a tie: to even (zero) */
    assert_int_equal(st_f32_to_f16(ldexpf(3, -25)), 0x0002);        /* 1.5 ulp: to even (2) */
    assert_int_equal(st_f32_to_f16(ldexpf(1, -14)), 0x0400);        /* smallest normal */
    assert_int_equal(st_f32_to_f16(1.0f + ldexpf(1, -11)), 0x3c00); /* tie between 1 and 1+2^-10: even */
    assert_int_equal(st_f32_to_f16(1.0f + ldexpf(3, -11)), 0x3c02);
    assert_int_equal(st_f32_to_f16(INFINITY), 0x7c00);
    assert_true((st_f32_to_f16(NAN) & 0x7c00) == 0x7c00 && (st_f32_to_f16(NAN) & 0x3ff));
    /* every finite half converts to float and back unchanged */
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00)
            continue;
        assert_int_equal(st_f32_to_f16(st_f16_to_f32((uint16_t)h)), h);
    }
    assert_true(st_f16_to_f32(0x0001) == ldexpf(1, -24));
    assert_true(isinf(st_f16_to_f32(0xfc00)) && st_f16_to_f32(0xfc00) < 0);
}

static void gguf_type_info(void **state)
{
    (void)state;
    const char *n;
    uint32_t blck, size;
    assert_int_equal(st_ggml_type_info(ST_GGML_Q8_0, &n, &blck, &size), 0);
    assert_string_equal(n, "q8_0");
    assert_int_equal(blck, 32);
    assert_int_equal(size, 34);
    assert_int_equal(st_ggml_type_info(ST_GGML_Q4_0, &n, &blck, &size), 0);
    assert_int_equal(size, 18);
    assert_int_equal(st_ggml_type_info(ST_GGML_Q6_K, &n, &blck, &size), 0);
    assert_int_equal(blck, 256);
    assert_int_equal(size, 210);
    assert_int_equal(st_ggml_type_info(4, &n, &blck, &size), -1);
    assert_int_equal(st_ggml_type_info(43, &n, &blck, &size), -1);
}

/* ---- the model generator ------------------------------------------------------------------- */

/* A stand-in vocabulary: n tokens and a tokenizer model name. */
static void fake_vocab(st_gguf *v, uint64_t n)
{
    st_gguf_init(v);
    const char **toks = malloc(n * sizeof *toks);
    char *store = malloc(n * 24);
    for (uint64_t i = 0; i < n; i++) {
        snprintf(store + i * 24, 24, "t%" PRIu64, i);
        toks[i] = store + i * 24;
    }
    assert_int_equal(st_gguf_set_arr_str(v, "tokenizer.ggml.tokens", n, toks), 0);
    assert_int_equal(st_gguf_set_str(v, "tokenizer.ggml.model", "llama"), 0);
    assert_int_equal(st_gguf_set_u32(v, "tokenizer.ggml.bos_token_id", 1), 0);
    assert_int_equal(st_gguf_set_u32(v, "llama.block_count", 32), 0); /* not copied */
    free(toks);
    free(store);
}

static void modelgen_presets_and_checks(void **state)
{
    (void)state;
    st_mg_shape s;
    char err[256];
    assert_int_equal(st_mg_preset("llama", "30M", &s, err, sizeof err), 0);
    assert_int_equal(s.n_embd, 384);
    assert_int_equal(st_mg_check(&s, err, sizeof err), 0);
    /* the names say the size: within 10 % with the architecture's own vocabulary */
    assert_near((double)st_mg_params(&s, 32000), 30e6, 3e6);
    assert_int_equal(st_mg_preset("qwen2", "30M", &s, err, sizeof err), 0);
    assert_near((double)st_mg_params(&s, 151936), 30e6, 3e6);
    assert_int_equal(st_mg_preset("qwen2", "100M", &s, err, sizeof err), 0);
    assert_near((double)st_mg_params(&s, 151936), 100e6, 10e6);
    assert_int_equal(st_mg_preset("llama", "100M", &s, err, sizeof err), 0);
    assert_near((double)st_mg_params(&s, 32000), 100e6, 10e6);
    /* Qwen2-0.5B's published parameter count is 494M (tied embeddings, 151936 tokens) */
    assert_int_equal(st_mg_preset("qwen2", "0.5B", &s, err, sizeof err), 0);
    assert_near((double)st_mg_params(&s, 151936), 494.03e6, 0.01e6);
    /* TinyLlama-1.1B: 1100048384 parameters */
    assert_int_equal(st_mg_preset("llama", "1.1B", &s, err, sizeof err), 0);
    assert_int_equal(st_mg_params(&s, 32000), 1100048384ull);

    assert_int_equal(st_mg_preset("llama", "7B", &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "10M, 30M, 100M"));
    assert_int_equal(st_mg_preset("gpt2", "30M", &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "unknown architecture"));

    st_mg_preset("llama", "30M", &s, err, sizeof err);
    s.n_head = 5; /* 384 / 5 */
    assert_int_equal(st_mg_check(&s, err, sizeof err), -1);
    s.n_head = 6;
    s.n_head_kv = 4; /* 6 % 4 */
    assert_int_equal(st_mg_check(&s, err, sizeof err), -1);
    assert_non_null(strstr(err, "n_head_kv"));
    s.n_head_kv = 2;
    s.n_ff = 1000; /* not whole blocks of 32 */
    assert_int_equal(st_mg_check(&s, err, sizeof err), -1);
    s.n_ff = 1024;
    s.n_layer = 0;
    assert_int_equal(st_mg_check(&s, err, sizeof err), -1);
    assert_non_null(strstr(err, "n_layer 0"));
}

/* The tensors and keys llama.cpp's Llama and Qwen2 loaders ask for, with their shapes. */
static void modelgen_layout(void **state)
{
    (void)state;
    st_gguf v, g;
    fake_vocab(&v, 1000);
    st_mg_shape s;
    char err[256];
    uint64_t nv;
    assert_int_equal(st_mg_preset("qwen2", "30M", &s, err, sizeof err), 0);
    assert_int_equal(st_mg_build(&s, &v, ST_GGML_F16, "t", &g, &nv, err, sizeof err), 0);
    assert_int_equal(nv, 1000);
    assert_string_equal(st_gguf_get_str(&g, "general.architecture"), "qwen2");
    uint64_t u;
    double f;
    assert_int_equal(st_gguf_get_u64(&g, "qwen2.embedding_length", &u), 0);
    assert_int_equal(u, 192);
    assert_int_equal(st_gguf_get_u64(&g, "qwen2.attention.head_count_kv", &u), 0);
    assert_int_equal(u, 1);
    assert_int_equal(st_gguf_get_u64(&g, "qwen2.rope.dimension_count", &u), 0);
    assert_int_equal(u, 64);
    assert_int_equal(st_gguf_get_u64(&g, "qwen2.context_length", &u), 0);
    assert_int_equal(st_gguf_get_f64(&g, "qwen2.attention.layer_norm_rms_epsilon", &f), 0);
    assert_near(f, 1e-6, 1e-12);
    assert_int_equal(st_gguf_get_f64(&g, "qwen2.rope.freq_base", &f), 0);
    assert_near(f, 1e6, 0);
    assert_int_equal(st_gguf_get_u64(&g, "tokenizer.ggml.bos_token_id", &u), 0);
    assert_null(st_gguf_find(&g, "llama.block_count"));
    assert_null(st_gguf_tensor_find(&g, "output.weight")); /* tied */
    const st_gguf_tensor *t = st_gguf_tensor_find(&g, "blk.3.attn_k.weight");
    assert_non_null(t);
    assert_int_equal(t->ne[0], 192);
    assert_int_equal(t->ne[1], 64);
    assert_int_equal(t->type, ST_GGML_F16);
    t = st_gguf_tensor_find(&g, "blk.3.attn_v.bias");
    assert_non_null(t);
    assert_int_equal(t->ne[0], 64);
    assert_int_equal(t->type, ST_GGML_F32);
    t = st_gguf_tensor_find(&g, "blk.0.ffn_down.weight");
    assert_int_equal(t->ne[0], 1024);
    assert_int_equal(t->ne[1], 192);
    assert_null(st_gguf_tensor_find(&g, "blk.4.attn_norm.weight"));
    uint64_t elems = 0;
    for (size_t i = 0; i < g.n_t; i++)
        elems += st_gguf_tensor_elems(&g.t[i]);
    assert_int_equal(elems, st_mg_params(&s, 1000));
    st_gguf_free(&g);

    assert_int_equal(st_mg_preset("llama", "10M", &s, err, sizeof err), 0);
    assert_int_equal(st_mg_build(&s, &v, ST_GGML_F32, "t", &g, &nv, err, sizeof err), 0);
    t = st_gguf_tensor_find(&g, "output.weight");
    assert_non_null(t);
    assert_int_equal(t->ne[0], 128);
    assert_int_equal(t->ne[1], 1000);
    assert_int_equal(t->type, ST_GGML_F32);
    assert_null(st_gguf_tensor_find(&g, "blk.0.attn_q.bias"));
    assert_int_equal(g.n_t, 3 + 9 * 4);
    assert_int_equal(st_gguf_get_u64(&g, "general.file_type", &u), 0);
    assert_int_equal(u, 0);
    st_gguf_free(&g);

    /* a vocabulary without tokens is refused */
    st_gguf empty;
    st_gguf_init(&empty);
    assert_int_equal(st_mg_build(&s, &empty, ST_GGML_F16, "t", &g, &nv, err, sizeof err), -1);
    assert_non_null(strstr(err, "tokenizer.ggml.tokens"));
    assert_int_equal(st_mg_build(&s, &v, ST_GGML_Q8_0, "t", &g, &nv, err, sizeof err), -1);
    st_gguf_free(&v);
}

static void write_model(const st_mg_shape *s, uint32_t wtype, uint64_t seed, st_buf *out)
{
    st_gguf v, g;
    fake_vocab(&v, 512);
    char err[256];
    uint64_t nv;
    assert_int_equal(st_mg_build(s, &v, wtype, "t", &g, &nv, err, sizeof err), 0);
    st_mg_filler f;
    st_mg_filler_init(&f, &g, seed);
    st_buf_init(out, (size_t)1 << 28);
    assert_int_equal(st_gguf_write(&g, st_mg_fill, &f, sink_buf, out, err, sizeof err), 0);
    st_gguf_free(&g);
    st_gguf_free(&v);
}

static void modelgen_deterministic_and_bounded(void **state)
{
    (void)state;
    st_mg_shape s;
    char err[256];
    assert_int_equal(st_mg_preset("llama", "10M", &s, err, sizeof err), 0);
    s.n_layer = 2;
    st_buf a, b, c;
    write_model(&s, ST_GGML_F16, 7, &a);
    write_model(&s, ST_GGML_F16, 7, &b);
    write_model(&s, ST_GGML_F16, 8, &c);
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.data, b.data, a.len);
    assert_int_equal(a.len, c.len);
    assert_true(memcmp(a.data, c.data, a.len) != 0);
    st_gguf g;
    assert_int_equal(st_gguf_parse(a.data, a.len, a.len, &g, err, sizeof err), 0);
    const double bound = 0.02 * sqrt(3.0) * 1.001;
    for (size_t i = 0; i < g.n_t; i++) {
        const st_gguf_tensor *t = &g.t[i];
        const unsigned char *d = (const unsigned char *)a.data + g.data_offset + t->offset;
        uint64_t n = st_gguf_tensor_elems(t);
        double sum2 = 0;
        int norm = strstr(t->name, "norm") != NULL;
        for (uint64_t k = 0; k < n; k++) {
            float x;
            if (t->type == ST_GGML_F16) {
                uint16_t h;
                memcpy(&h, d + 2 * k, 2);
                x = st_f16_to_f32(h);
            } else {
                memcpy(&x, d + 4 * k, 4);
            }
            assert_true(isfinite(x));
            if (norm)
                assert_true(x == 1.0f);
            else
                assert_true(fabs(x) <= bound);
            sum2 += (double)x * x;
        }
        if (!norm && n >= 10000)
            assert_near(sqrt(sum2 / (double)n), 0.02, 0.001);
    }
    /* a tensor's values do not depend on the other tensors: the f32 model holds the same numbers */
    st_buf_free(&c);
    write_model(&s, ST_GGML_F32, 7, &c);
    st_gguf g32;
    assert_int_equal(st_gguf_parse(c.data, c.len, c.len, &g32, err, sizeof err), 0);
    const st_gguf_tensor *t16 = st_gguf_tensor_find(&g, "blk.1.ffn_up.weight"),
                         *t32 = st_gguf_tensor_find(&g32, "blk.1.ffn_up.weight");
    for (uint64_t k = 0; k < st_gguf_tensor_elems(t16); k += 97) {
        uint16_t h;
        float x;
        memcpy(&h, a.data + g.data_offset + t16->offset + 2 * k, 2);
        memcpy(&x, c.data + g32.data_offset + t32->offset + 4 * k, 4);
        assert_int_equal(h, st_f32_to_f16(x));
    }
    /* ranges out of order are refused (the values are a stream) */
    st_mg_filler f;
    st_mg_filler_init(&f, &g, 1);
    unsigned char buf[64];
    assert_int_equal(st_mg_fill(&f, 1, 64, buf, 64), -1);
    assert_int_equal(st_mg_fill(&f, 1, 0, buf, 64), 0);
    assert_int_equal(st_mg_fill(&f, 1, 128, buf, 64), -1);
    assert_int_equal(st_mg_fill(&f, 1, 64, buf, 3), -1); /* not whole values */
    st_gguf_free(&g32);
    st_gguf_free(&g);
    st_buf_free(&a);
    st_buf_free(&b);
    st_buf_free(&c);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(gguf_round_trip),
        cmocka_unit_test(gguf_setters_replace_and_copy),
        cmocka_unit_test(gguf_alignment),
        cmocka_unit_test(gguf_truncated_everywhere),
        cmocka_unit_test(gguf_malformed),
        cmocka_unit_test(gguf_malformed_tensors),
        cmocka_unit_test(gguf_half_precision),
        cmocka_unit_test(gguf_type_info),
        cmocka_unit_test(modelgen_presets_and_checks),
        cmocka_unit_test(modelgen_layout),
        cmocka_unit_test(modelgen_deterministic_and_bounded),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
