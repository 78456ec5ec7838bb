#include "engine/modelgen.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/util.h"

/* Weights: uniform on [-a, a] with a = 0.02 * sqrt(3), i.e. standard deviation 0.02 (GPT-2's
 * initialisation, Radford et al. 2019); RMS-norm weights are 1 (an identity scale). */
#define WEIGHT_STD 0.02
#define NORM_VALUE 1.0f
#define ROW_BLOCK 32u /* q4_0 and q8_0 quantise rows in blocks of 32 (ggml QK4_0, QK8_0) */

/* Presets. Real models first, with their published shapes (config.json on the model's page);
 * then small models of the same family's proportions (head size, grouped-query ratio, rope and
 * norm constants, tied embeddings for Qwen2), named by their size with the architecture's own
 * vocabulary (llama: ggml-vocab-llama-spm.gguf, 32000 tokens; qwen2: ggml-vocab-qwen2.gguf,
 * 151936 tokens). */
static const struct {
    const char *arch, *size, *what;
    st_mg_shape s;
} presets[] = {
    /* Llama 2 constants: rope base 10000, RMS eps 1e-5, context 4096, untied output. */
    { "llama", "10M", "head size 32, 2 KV heads", { ST_MG_LLAMA, 128, 4, 4, 2, 384, 4096, 10000, 1e-5, 0, 0 } },
    { "llama", "30M", "head size 64, 2 KV heads", { ST_MG_LLAMA, 384, 4, 6, 2, 1024, 4096, 10000, 1e-5, 0, 0 } },
    { "llama", "100M", "head size 64, 4 KV heads", { ST_MG_LLAMA, 768, 8, 12, 4, 2048, 4096, 10000, 1e-5, 0, 0 } },
    { "llama", "1.1B", "TinyLlama-1.1B's shape", { ST_MG_LLAMA, 2048, 22, 32, 4, 5632, 2048, 10000, 1e-5, 0, 0 } },
    /* Qwen2 constants: rope base 1e6, RMS eps 1e-6, context 32768, tied output, q/k/v biases. */
    { "qwen2", "30M", "head size 64, 1 KV head", { ST_MG_QWEN2, 192, 4, 3, 1, 1024, 32768, 1e6, 1e-6, 1, 1 } },
    { "qwen2", "100M", "head size 64, 2 KV heads", { ST_MG_QWEN2, 512, 8, 8, 2, 1536, 32768, 1e6, 1e-6, 1, 1 } },
    { "qwen2", "0.5B", "Qwen2-0.5B's shape", { ST_MG_QWEN2, 896, 24, 14, 2, 4864, 32768, 1e6, 1e-6, 1, 1 } },
};
#define N_PRESETS (sizeof presets / sizeof presets[0])

const char *st_mg_arch_name(st_mg_arch a) { return a == ST_MG_QWEN2 ? "qwen2" : "llama"; }

int st_mg_arch_parse(const char *s, st_mg_arch *out)
{
    if (!strcmp(s, "llama"))
        *out = ST_MG_LLAMA;
    else if (!strcmp(s, "qwen2"))
        *out = ST_MG_QWEN2;
    else
        return -1;
    return 0;
}

int st_mg_preset(const char *arch, const char *size, st_mg_shape *out, char *err, size_t errlen)
{
    char known[256] = "";
    size_t k = 0;
    for (size_t i = 0; i < N_PRESETS; i++) {
        if (!strcmp(presets[i].arch, arch) && !strcmp(presets[i].size, size)) {
            *out = presets[i].s;
            return 0;
        }
        if (!strcmp(presets[i].arch, arch) && k < sizeof known)
            k += (size_t)snprintf(known + k, sizeof known - k, "%s%s", k ? ", " : "", presets[i].size);
    }
    st_mg_arch a;
    if (st_mg_arch_parse(arch, &a))
        st_errf(err, errlen, "unknown architecture '%s' (llama, qwen2)", arch);
    else
        st_errf(err, errlen, "no %s preset named '%s' (%s)", arch, size, known);
    return -1;
}

void st_mg_presets(char *out, size_t n)
{
    size_t k = 0;
    out[0] = '\0';
    for (size_t i = 0; i < N_PRESETS && k < n; i++) {
        const st_mg_shape *s = &presets[i].s;
        k += (size_t)snprintf(out + k, n - k,
                              "  %-5s %-5s n_embd %-4" PRIu32 " n_layer %-2" PRIu32 " n_head %-2" PRIu32
                              " n_head_kv %" PRIu32 " n_ff %-4" PRIu32 " ctx %-5" PRIu32 " %s%s (%s)\n",
                              presets[i].arch, presets[i].size, s->n_embd, s->n_layer, s->n_head, s->n_head_kv, s->n_ff,
                              s->n_ctx, s->tied ? "tied" : "untied", s->qkv_bias ? ", qkv bias" : "", presets[i].what);
    }
}

int st_mg_check(const st_mg_shape *s, char *err, size_t errlen)
{
#define RANGE(f, lo, hi)                                                                                               \
    if (s->f < (lo) || s->f > (hi)) {                                                                                  \
        st_errf(err, errlen, #f " %" PRIu32 " out of range [%u, %u]", s->f, (unsigned)(lo), (unsigned)(hi));           \
        return -1;                                                                                                     \
    }
    RANGE(n_embd, ROW_BLOCK, ST_MG_MAX_EMBD);
    RANGE(n_layer, 1, ST_MG_MAX_LAYER);
    RANGE(n_head, 1, ST_MG_MAX_HEAD);
    RANGE(n_head_kv, 1, ST_MG_MAX_HEAD);
    RANGE(n_ff, ROW_BLOCK, ST_MG_MAX_FF);
    RANGE(n_ctx, 16, ST_MG_MAX_CTX);
#undef RANGE
    if (s->n_embd % s->n_head || (s->n_embd / s->n_head) % 2) {
        st_errf(err, errlen, "n_embd %" PRIu32 " must be n_head (%" PRIu32 ") times an even head size", s->n_embd,
                s->n_head);
        return -1;
    }
    if (s->n_head % s->n_head_kv) {
        st_errf(err, errlen, "n_head %" PRIu32 " must be a multiple of n_head_kv %" PRIu32, s->n_head, s->n_head_kv);
        return -1;
    }
    if (s->n_embd % ROW_BLOCK || s->n_ff % ROW_BLOCK) {
        st_errf(err, errlen,
                "n_embd %" PRIu32 " and n_ff %" PRIu32 " must be multiples of %u (whole q4_0/q8_0 blocks per row)",
                s->n_embd, s->n_ff, ROW_BLOCK);
        return -1;
    }
    if (!(s->rope_base > 0) || !isfinite(s->rope_base) || !(s->norm_eps > 0) || !(s->norm_eps < 1)) {
        st_errf(err, errlen, "rope base must be > 0 and norm eps in (0, 1)");
        return -1;
    }
    return 0;
}

/* The tensors of one layer and of the model, in the order llama.cpp's converter writes them. */
typedef struct tdesc {
    char name[ST_GGUF_MAX_NAME + 1];
    uint32_t n_dims;
    uint64_t ne[2];
} tdesc;

/* Calls fn for every tensor; returns the number of tensors or -1 when fn fails. */
static int each_tensor(const st_mg_shape *s, uint64_t n_vocab, int (*fn)(void *, const tdesc *), void *ctx)
{
    const uint64_t E = s->n_embd, F = s->n_ff, hd = s->n_embd / s->n_head, KV = hd * s->n_head_kv;
    int n = 0;
    tdesc t;
#define T1(nm, a)                                                                                                      \
    (snprintf(t.name, sizeof t.name, "%s", nm), t.n_dims = 1, t.ne[0] = (a), t.ne[1] = 1, n++, fn(ctx, &t))
#define T2(nm, a, b)                                                                                                   \
    (snprintf(t.name, sizeof t.name, "%s", nm), t.n_dims = 2, t.ne[0] = (a), t.ne[1] = (b), n++, fn(ctx, &t))
    if (T2("token_embd.weight", E, n_vocab))
        return -1;
    for (uint32_t l = 0; l < s->n_layer; l++) {
        char nm[ST_GGUF_MAX_NAME + 1];
#define L1(suffix, a) (snprintf(nm, sizeof nm, "blk.%" PRIu32 ".%s", l, suffix), T1(nm, a))
#define L2(suffix, a, b) (snprintf(nm, sizeof nm, "blk.%" PRIu32 ".%s", l, suffix), T2(nm, a, b))
        if (L1("attn_norm.weight", E) || L2("attn_q.weight", E, E) || L2("attn_k.weight", E, KV) ||
            L2("attn_v.weight", E, KV))
            return -1;
        if (s->qkv_bias && (L1("attn_q.bias", E) || L1("attn_k.bias", KV) || L1("attn_v.bias", KV)))
            return -1;
        if (L2("attn_output.weight", E, E) || L1("ffn_norm.weight", E) || L2("ffn_gate.weight", E, F) ||
            L2("ffn_down.weight", F, E) || L2("ffn_up.weight", E, F))
            return -1;
#undef L1
#undef L2
    }
    if (T1("output_norm.weight", E))
        return -1;
    if (!s->tied && T2("output.weight", E, n_vocab))
        return -1;
#undef T1
#undef T2
    return n;
}

static int count_params(void *ctx, const tdesc *t)
{
    *(uint64_t *)ctx += t->ne[0] * t->ne[1];
    return 0;
}

uint64_t st_mg_params(const st_mg_shape *s, uint64_t n_vocab)
{
    uint64_t n = 0;
    each_tensor(s, n_vocab, count_params, &n);
    return n;
}

typedef struct build_ctx {
    st_gguf *g;
    uint32_t wtype;
    char *err;
    size_t errlen;
} build_ctx;

static int add_one(void *ctx, const tdesc *t)
{
    build_ctx *b = ctx;
    return st_gguf_add_tensor(b->g, t->name, t->n_dims == 1 ? ST_GGML_F32 : b->wtype, t->n_dims, t->ne, b->err,
                              b->errlen);
}

int st_mg_build(const st_mg_shape *s, const st_gguf *vocab, uint32_t wtype, const char *name, st_gguf *out,
                uint64_t *n_vocab, char *err, size_t errlen)
{
    st_gguf_init(out);
    if (st_mg_check(s, err, errlen))
        return -1;
    if (wtype != ST_GGML_F16 && wtype != ST_GGML_F32) {
        st_errf(err, errlen, "weight type must be f16 or f32");
        return -1;
    }
    const st_gguf_kv *tok = st_gguf_find(vocab, "tokenizer.ggml.tokens");
    if (!tok || tok->v.type != ST_GGUF_ARR || tok->v.elem != ST_GGUF_STR || !tok->v.n) {
        st_errf(err, errlen, "the vocabulary file has no tokenizer.ggml.tokens (an array of strings)");
        return -1;
    }
    if (!st_gguf_get_str(vocab, "tokenizer.ggml.model")) {
        st_errf(err, errlen, "the vocabulary file has no tokenizer.ggml.model");
        return -1;
    }
    if (tok->v.n > UINT32_MAX) {
        st_errf(err, errlen, "vocabulary of %" PRIu64 " tokens is too large", tok->v.n);
        return -1;
    }
    *n_vocab = tok->v.n;
    const char *a = st_mg_arch_name(s->arch);
    char key[128];
    int rc = 0;
    rc |= st_gguf_set_str(out, "general.architecture", a);
    rc |= st_gguf_set_str(out, "general.name", name);
    /* llama_ftype: 0 all f32, 1 mostly f16 (llama.h) */
    rc |= st_gguf_set_u32(out, "general.file_type", wtype == ST_GGML_F16 ? 1 : 0);
#define U32KEY(k, v) (snprintf(key, sizeof key, "%s." k, a), rc |= st_gguf_set_u32(out, key, (v)))
#define F32KEY(k, v) (snprintf(key, sizeof key, "%s." k, a), rc |= st_gguf_set_f32(out, key, (float)(v)))
    U32KEY("vocab_size", (uint32_t)*n_vocab);
    U32KEY("context_length", s->n_ctx);
    U32KEY("embedding_length", s->n_embd);
    U32KEY("block_count", s->n_layer);
    U32KEY("feed_forward_length", s->n_ff);
    U32KEY("attention.head_count", s->n_head);
    U32KEY("attention.head_count_kv", s->n_head_kv);
    U32KEY("rope.dimension_count", s->n_embd / s->n_head);
    F32KEY("rope.freq_base", s->rope_base);
    F32KEY("attention.layer_norm_rms_epsilon", s->norm_eps);
#undef U32KEY
#undef F32KEY
    for (size_t i = 0; i < vocab->n_kv && !rc; i++)
        if (!strncmp(vocab->kv[i].key, "tokenizer.", 10))
            rc |= st_gguf_set_value(out, vocab->kv[i].key, &vocab->kv[i].v);
    if (rc) {
        st_errf(err, errlen, "out of memory building the metadata");
        st_gguf_free(out);
        return -1;
    }
    build_ctx b = { out, wtype, err, errlen };
    if (each_tensor(s, *n_vocab, add_one, &b) < 0) {
        st_gguf_free(out);
        return -1;
    }
    return 0;
}

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a 64 */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

void st_mg_filler_init(st_mg_filler *f, const st_gguf *g, uint64_t seed)
{
    memset(f, 0, sizeof *f);
    f->g = g;
    f->seed = seed;
    f->logit_scale = NORM_VALUE;
    f->ti = (size_t)-1;
}

static int is_norm(const char *name)
{
    size_t n = strlen(name);
    return n >= 11 && !strcmp(name + n - 11, "norm.weight");
}

int st_mg_fill(void *ctx, size_t ti, uint64_t off, void *dst, size_t n)
{
    st_mg_filler *f = ctx;
    if (ti >= f->g->n_t)
        return -1;
    const st_gguf_tensor *t = &f->g->t[ti];
    size_t es = t->type == ST_GGML_F16 ? 2 : t->type == ST_GGML_F32 ? 4 : 0;
    if (!es || off % es || n % es)
        return -1;
    if (off == 0) {
        f->ti = ti;
        f->next = 0;
        st_rng_seed(&f->rng, f->seed ^ name_hash(t->name));
    } else if (ti != f->ti || off != f->next) {
        return -1; /* the values are a stream: ranges must come in order */
    }
    const float scale = (float)(WEIGHT_STD * sqrt(3.0) / 2147483648.0);
    const int norm = is_norm(t->name);
    const float norm_value = strcmp(t->name, "output_norm.weight") ? NORM_VALUE : f->logit_scale;
    size_t count = n / es;
    for (size_t i = 0; i < count; i++) {
        float v = norm ? norm_value : (float)(int32_t)(uint32_t)(st_rng_next(&f->rng) >> 32) * scale;
        if (es == 2) {
            uint16_t h = st_f32_to_f16(v);
            memcpy((unsigned char *)dst + 2 * i, &h, 2);
        } else {
            memcpy((unsigned char *)dst + 4 * i, &v, 4);
        }
    }
    f->next = off + n;
    return 0;
}
