/* The SentencePiece tokenizer from a GGUF vocabulary (engine/spmtok.h): merges worked out by hand
 * on a small vocabulary, and llama.cpp's own test vectors (models/ggml-vocab-llama-spm.gguf.inp
 * and .out, tokenized by llama.cpp's test-tokenizer-0) when scripts/install-llamacpp has run. */
#include "harness.h"

#include <stdio.h>

#include "core/file.h"
#include "engine/gguf.h"
#include "engine/spmtok.h"

/* 256 byte tokens, then the pieces below. */
static const char *pieces[] = { "\xE2\x96\x81",
                                "a",
                                "aa",
                                "b",
                                "ab",
                                "\xE2\x96\x81"
                                "a",
                                "\xE2\x96\x81"
                                "ab",
                                "c" };
static const float scores[] = { -3, -4, 0, -4, -2, -1, -0.5f, -4 };
#define NP (sizeof pieces / sizeof *pieces)
#define ID(i) (256u + (i))

static st_spmtok *small_vocab(const char *model)
{
    st_gguf g;
    st_gguf_init(&g);
    const char *names[256 + NP];
    float sc[256 + NP];
    char bytes[256][7];
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        names[b] = bytes[b];
        sc[b] = -100;
    }
    for (size_t i = 0; i < NP; i++) {
        names[256 + i] = pieces[i];
        sc[256 + i] = scores[i];
    }
    assert_int_equal(st_gguf_set_str(&g, "tokenizer.ggml.model", model), 0);
    assert_int_equal(st_gguf_set_arr_str(&g, "tokenizer.ggml.tokens", 256 + NP, names), 0);
    assert_int_equal(st_gguf_set_arr_num(&g, "tokenizer.ggml.scores", ST_GGUF_F32, 256 + NP, sc), 0);
    char err[300];
    st_spmtok *t = st_spmtok_from_gguf(&g, err, sizeof err);
    st_gguf_free(&g);
    if (!t && !strcmp(model, "llama"))
        fail_msg("%s", err);
    return t;
}

static void by_hand(void **state)
{
    (void)state;
    st_spmtok *t = small_vocab("llama");
    uint32_t *ids = NULL;
    size_t cap = 0;
    char err[200];
    /* "▁ab▁c": ▁a (-1) merges first, then ▁ab (-0.5); "▁c" is no token */
    int64_t n = st_spmtok_encode(t, "ab c", 4, &ids, &cap, err, sizeof err);
    assert_int_equal(n, 3);
    assert_int_equal(ids[0], ID(6));
    assert_int_equal(ids[1], ID(0));
    assert_int_equal(ids[2], ID(7));
    /* "▁aaa": the two "aa" pairs tie at score 0: the left one merges, the right one is stale */
    n = st_spmtok_encode(t, "aaa", 3, &ids, &cap, err, sizeof err);
    assert_int_equal(n, 3);
    assert_int_equal(ids[0], ID(0));
    assert_int_equal(ids[1], ID(2));
    assert_int_equal(ids[2], ID(1));
    /* a character with no token: its bytes */
    n = st_spmtok_encode(t, "\xC3\xA9", 2, &ids, &cap, err, sizeof err);
    assert_int_equal(n, 3);
    assert_int_equal(ids[0], ID(0));
    assert_int_equal(ids[1], 0xC3);
    assert_int_equal(ids[2], 0xA9);
    assert_int_equal(st_spmtok_encode(t, "", 0, &ids, &cap, err, sizeof err), 0);
    free(ids);
    st_spmtok_free(t);
    /* BPE vocabularies are refused with the reason */
    assert_null(small_vocab("gpt2"));
}

/* Valid UTF-8 comes back from its ids (pieces, U+2581 as a space, byte tokens): the merges and the
 * byte fallback lose nothing (3,000 random strings); any bytes at all are tokenized without error.
 * (After an invalid lead byte a space's U+2581 may be split into byte tokens and read back as
 * U+2581, as llama.cpp does.) */
static void lossless_on_utf8(void **state)
{
    (void)state;
    st_spmtok *t = small_vocab("llama");
    uint32_t *ids = NULL;
    size_t cap = 0;
    char err[200], in[96], out[1024];
    uint64_t x = 88172645463325252ULL;
    static const char *const chars[] = {
        "a", "b", "c", " ", " ", "z", "\n", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\xA6\x99", "aa", "ab"
    };
    for (int k = 0; k < 3000; k++) {
        size_t n = 0;
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t want_chars = x % 20;
        for (size_t i = 0; i < want_chars; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            const char *c = chars[(x >> 20) % (sizeof chars / sizeof *chars)];
            memcpy(in + n, c, strlen(c));
            n += strlen(c);
        }
        int64_t m = st_spmtok_encode(t, in, n, &ids, &cap, err, sizeof err);
        assert_true(m >= 0);
        size_t w = 0;
        for (int64_t i = 0; i < m; i++) {
            if (ids[i] < 256) {
                out[w++] = (char)ids[i];
                continue;
            }
            for (const char *p = pieces[ids[i] - 256]; *p;) {
                if (!strncmp(p, "\xE2\x96\x81", 3)) {
                    out[w++] = ' ';
                    p += 3;
                } else {
                    out[w++] = *p++;
                }
            }
        }
        /* the space prefix when the text is not empty */
        if (n ? (w != n + 1 || out[0] != ' ' || memcmp(out + 1, in, n)) : w != 0)
            fail_msg("string %d (%zu bytes): %zu bytes back", k, n, w);
        /* the same bytes scrambled: tokenized, whatever they are */
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            if (x % 3 == 0)
                in[i] = (char)(x >> 32);
        }
        assert_true(st_spmtok_encode(t, in, n, &ids, &cap, err, sizeof err) >= (int64_t)(n > 0));
    }
    free(ids);
    st_spmtok_free(t);
}

/* llama.cpp's vectors: the .inp texts split by "\n__ggml_vocab_test__\n", one line of ids each. */
static void llamacpp_vectors(void **state)
{
    (void)state;
    const char *dir = getenv("SERVETUNE_LLAMACPP_SRC");
    char base[1024], path[1100];
    const char *home = getenv("HOME");
    if (dir && *dir)
        snprintf(base, sizeof base, "%s/models/ggml-vocab-llama-spm.gguf", dir);
    else
        snprintf(base, sizeof base, "%s/.cache/servetune/llama.cpp-v0.5.0/src/models/ggml-vocab-llama-spm.gguf",
                 home ? home : "");
    size_t vlen = 0, ilen = 0, olen = 0;
    char err[300];
    char *v = st_read_file(base, (size_t)64 << 20, &vlen, err, sizeof err);
    if (!v) {
        print_message("skipped: %s (run scripts/install-llamacpp, or set SERVETUNE_LLAMACPP_SRC)\n", err);
        skip();
    }
    st_gguf g;
    if (st_gguf_parse(v, vlen, vlen, &g, err, sizeof err))
        fail_msg("%s", err);
    st_spmtok *t = st_spmtok_from_gguf(&g, err, sizeof err);
    if (!t)
        fail_msg("%s", err);
    snprintf(path, sizeof path, "%s.inp", base);
    char *inp = st_read_file(path, (size_t)1 << 20, &ilen, err, sizeof err);
    snprintf(path, sizeof path, "%s.out", base);
    char *out = st_read_file(path, (size_t)1 << 20, &olen, err, sizeof err);
    assert_non_null(inp);
    assert_non_null(out);
    const char *sep = "\n__ggml_vocab_test__\n";
    char *ip = inp, *op = out;
    uint32_t *ids = NULL;
    size_t cap = 0;
    int cases = 0;
    while (*ip && cases < 1000) {
        char *next = strstr(ip, sep);
        size_t len = next ? (size_t)(next - ip) : strlen(ip);
        char *eol = strchr(op, '\n');
        assert_non_null(eol);
        *eol = '\0';
        int64_t n = st_spmtok_encode(t, ip, len, &ids, &cap, err, sizeof err);
        assert_true(n >= 0);
        char got[4096];
        size_t w = 0;
        got[0] = '\0';
        for (int64_t i = 0; i < n && w + 16 < sizeof got; i++)
            w += (size_t)snprintf(got + w, sizeof got - w, " %u", ids[i]);
        /* the .out lines are " id id ..." (a leading space), empty for no ids */
        const char *want = op;
        while (*want == ' ')
            want++;
        const char *g2 = got;
        while (*g2 == ' ')
            g2++;
        if (strcmp(g2, want))
            fail_msg("case %d (%.*s): got '%s', llama.cpp '%s'", cases, (int)(len < 60 ? len : 60), ip, g2, want);
        cases++;
        op = eol + 1;
        if (!next)
            break;
        ip = next + strlen(sep);
    }
    assert_true(cases >= 40);
    print_message("%d texts tokenized as llama.cpp does\n", cases);
    free(ids);
    free(inp);
    free(out);
    free(v);
    st_spmtok_free(t);
    st_gguf_free(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(by_hand),
        cmocka_unit_test(lossless_on_utf8),
        cmocka_unit_test(llamacpp_vectors),
    };
    return cmocka_run_group_tests(tests, 0, 0);
}
