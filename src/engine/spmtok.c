/* llama.cpp's SentencePiece tokenizer from a GGUF vocabulary (engine/spmtok.h). */
#include "engine/spmtok.h"

#include <stdlib.h>
#include <string.h>

#include "core/util.h"

typedef struct tok_ent {
    uint32_t off, len; /* in the arena */
} tok_ent;

struct st_spmtok {
    char *arena;
    tok_ent *tok;
    float *score;
    uint32_t n;
    int32_t *map; /* open addressing: token id + 1, 0 empty */
    size_t map_cap;
    int32_t byte_tok[256]; /* -1: none */
    int space_prefix;
    /* scratch of one encode */
    struct sym {
        const char *text;
        uint32_t n;
        int32_t prev, next;
    } * sym;
    size_t sym_cap;
    struct bigram {
        int32_t left, right;
        float score;
        uint32_t size;
    } * heap;
    size_t heap_n, heap_cap;
    char *buf;
    size_t buf_cap;
};

static uint64_t hash_bytes(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 1099511628211ULL;
    }
    return h ^ (h >> 29);
}

/* The token whose text is p[0..n), or -1. */
static int32_t lookup(const st_spmtok *t, const char *p, size_t n)
{
    size_t mask = t->map_cap - 1, at = (size_t)hash_bytes(p, n) & mask;
    for (;;) {
        int32_t v = t->map[at];
        if (!v)
            return -1;
        const tok_ent *e = &t->tok[v - 1];
        if (e->len == n && !memcmp(t->arena + e->off, p, n))
            return v - 1;
        at = (at + 1) & mask;
    }
}

static uint64_t rd_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

void st_spmtok_free(st_spmtok *t)
{
    if (!t)
        return;
    free(t->arena);
    free(t->tok);
    free(t->score);
    free(t->map);
    free(t->sym);
    free(t->heap);
    free(t->buf);
    free(t);
}

uint32_t st_spmtok_vocab_size(const st_spmtok *t) { return t->n; }

st_spmtok *st_spmtok_from_gguf(const st_gguf *g, char *err, size_t errlen)
{
    const char *model = st_gguf_get_str(g, "tokenizer.ggml.model");
    if (!model) {
        st_errf(err, errlen, "no tokenizer.ggml.model: not a vocabulary file");
        return NULL;
    }
    if (strcmp(model, "llama")) {
        st_errf(err, errlen,
                "tokenizer model '%s' is not supported (only SentencePiece, 'llama': e.g. llama.cpp's "
                "models/ggml-vocab-llama-spm.gguf); give the trace's token ids instead",
                model);
        return NULL;
    }
    const st_gguf_kv *tk = st_gguf_find(g, "tokenizer.ggml.tokens");
    const st_gguf_kv *sk = st_gguf_find(g, "tokenizer.ggml.scores");
    if (!tk || tk->v.type != ST_GGUF_ARR || tk->v.elem != ST_GGUF_STR || tk->v.n == 0 || tk->v.n > (1u << 24)) {
        st_errf(err, errlen, "no tokenizer.ggml.tokens (an array of strings)");
        return NULL;
    }
    if (!sk || sk->v.type != ST_GGUF_ARR || sk->v.elem != ST_GGUF_F32 || sk->v.n != tk->v.n) {
        st_errf(err, errlen, "no tokenizer.ggml.scores (one f32 per token): SentencePiece merges by score");
        return NULL;
    }
    st_spmtok *t = calloc(1, sizeof *t);
    if (!t)
        goto oom;
    t->n = (uint32_t)tk->v.n;
    t->arena = malloc(tk->v.raw_len ? tk->v.raw_len : 1);
    t->tok = calloc(t->n, sizeof *t->tok);
    t->score = calloc(t->n, sizeof *t->score);
    t->map_cap = 16;
    while (t->map_cap < 2 * (size_t)t->n)
        t->map_cap <<= 1;
    t->map = calloc(t->map_cap, sizeof *t->map);
    if (!t->arena || !t->tok || !t->score || !t->map)
        goto oom;
    const unsigned char *p = tk->v.raw, *end = tk->v.raw + tk->v.raw_len;
    size_t off = 0;
    for (uint32_t i = 0; i < t->n; i++) {
        if (end - p < 8 || rd_u64(p) > (uint64_t)(end - p - 8)) {
            st_errf(err, errlen, "tokenizer.ggml.tokens: token %u runs past the array", i);
            st_spmtok_free(t);
            return NULL;
        }
        size_t len = (size_t)rd_u64(p);
        memcpy(t->arena + off, p + 8, len);
        t->tok[i].off = (uint32_t)off;
        t->tok[i].len = (uint32_t)len;
        off += len;
        p += 8 + len;
    }
    for (uint32_t i = 0; i < t->n; i++) {
        float f;
        memcpy(&f, sk->v.raw + 4 * (size_t)i, 4); /* little-endian hosts only, as llama.cpp */
        t->score[i] = f;
    }
    /* llama.cpp's token_to_id: a text given twice maps to its later id */
    for (uint32_t i = 0; i < t->n; i++) {
        const char *s = t->arena + t->tok[i].off;
        size_t len = t->tok[i].len, mask = t->map_cap - 1, at = (size_t)hash_bytes(s, len) & mask;
        for (;;) {
            int32_t v = t->map[at];
            if (!v) {
                t->map[at] = (int32_t)i + 1;
                break;
            }
            const tok_ent *e = &t->tok[v - 1];
            if (e->len == len && !memcmp(t->arena + e->off, s, len)) {
                t->map[at] = (int32_t)i + 1;
                break;
            }
            at = (at + 1) & mask;
        }
    }
    static const char hex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; b++) {
        char name[7] = { '<', '0', 'x', hex[b >> 4], hex[b & 15], '>', 0 };
        int32_t id = lookup(t, name, 6);
        if (id < 0) {
            char one = (char)b;
            id = lookup(t, &one, 1);
        }
        t->byte_tok[b] = id;
    }
    const st_gguf_kv *sp = st_gguf_find(g, "tokenizer.ggml.add_space_prefix");
    t->space_prefix = sp && sp->v.type == ST_GGUF_BOOL ? (int)sp->v.u : 1;
    return t;
oom:
    st_spmtok_free(t);
    st_errf(err, errlen, "out of memory");
    return NULL;
}

/* The max-heap of llama.cpp's comparator: the higher score first, then the smaller left. */
static int before(const struct bigram *a, const struct bigram *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static int heap_push(st_spmtok *t, struct bigram b)
{
    if (st_grow((void **)&t->heap, &t->heap_cap, t->heap_n + 1, sizeof *t->heap, 256))
        return -1;
    size_t i = t->heap_n++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!before(&b, &t->heap[up]))
            break;
        t->heap[i] = t->heap[up];
        i = up;
    }
    t->heap[i] = b;
    return 0;
}

static struct bigram heap_pop(st_spmtok *t)
{
    struct bigram top = t->heap[0], last = t->heap[--t->heap_n];
    size_t i = 0, n = t->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && before(&t->heap[c + 1], &t->heap[c]))
            c++;
        if (!before(&t->heap[c], &last))
            break;
        t->heap[i] = t->heap[c];
        i = c;
    }
    if (n)
        t->heap[i] = last;
    return top;
}

static int try_bigram(st_spmtok *t, int32_t left, int32_t right)
{
    if (left < 0 || right < 0)
        return 0;
    size_t n = (size_t)t->sym[left].n + t->sym[right].n;
    int32_t id = lookup(t, t->sym[left].text, n);
    if (id < 0)
        return 0;
    struct bigram b = { left, right, t->score[id], (uint32_t)n };
    return heap_push(t, b);
}

static int emit(uint32_t **ids, size_t *cap, size_t *n, uint32_t id)
{
    if (st_grow((void **)ids, cap, *n + 1, sizeof **ids, 256))
        return -1;
    (*ids)[(*n)++] = id;
    return 0;
}

int64_t st_spmtok_encode(st_spmtok *t, const char *text, size_t len, uint32_t **ids, size_t *cap, char *err,
                         size_t errlen)
{
    if (len > ST_SPM_TEXT_MAX) {
        st_errf(err, errlen, "a text of %zu bytes (at most %zu)", len, ST_SPM_TEXT_MAX);
        return -1;
    }
    size_t out = 0;
    if (len == 0)
        return 0;
    /* the space prefix, and ' ' as U+2581 (3 bytes) */
    size_t spaces = t->space_prefix ? 1 : 0;
    for (size_t i = 0; i < len; i++)
        spaces += text[i] == ' ';
    size_t blen = len + (t->space_prefix ? 1 : 0) + 2 * spaces;
    if (blen > t->buf_cap) {
        char *b = realloc(t->buf, blen);
        if (!b)
            goto oom;
        t->buf = b;
        t->buf_cap = blen;
    }
    size_t w = 0;
    if (t->space_prefix) {
        memcpy(t->buf, "\xE2\x96\x81", 3);
        w = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(t->buf + w, "\xE2\x96\x81", 3);
            w += 3;
        } else {
            t->buf[w++] = text[i];
        }
    }
    /* UTF-8 characters as symbols (llama.cpp's unicode_len_utf8 on the lead byte) */
    if (w > t->sym_cap) {
        struct sym *s = realloc(t->sym, w * sizeof *s);
        if (!s)
            goto oom;
        t->sym = s;
        t->sym_cap = w;
    }
    static const uint8_t lens[16] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4 };
    int32_t ns = 0;
    for (size_t off = 0; off < w;) {
        size_t l = lens[(unsigned char)t->buf[off] >> 4];
        if (l > w - off)
            l = w - off;
        t->sym[ns].text = t->buf + off;
        t->sym[ns].n = (uint32_t)l;
        t->sym[ns].prev = ns - 1;
        off += l;
        t->sym[ns].next = off == w ? -1 : ns + 1;
        ns++;
    }
    t->heap_n = 0;
    for (int32_t i = 1; i < ns; i++)
        if (try_bigram(t, i - 1, i))
            goto oom;
    while (t->heap_n) {
        struct bigram b = heap_pop(t);
        struct sym *l = &t->sym[b.left], *r = &t->sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size)
            continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0)
            t->sym[r->next].prev = b.left;
        if (try_bigram(t, l->prev, b.left) || try_bigram(t, b.left, l->next))
            goto oom;
    }
    for (int32_t i = 0; i != -1; i = t->sym[i].next) {
        const struct sym *s = &t->sym[i];
        int32_t id = lookup(t, s->text, s->n);
        if (id >= 0) {
            if (emit(ids, cap, &out, (uint32_t)id))
                goto oom;
            continue;
        }
        for (uint32_t j = 0; j < s->n; j++) {
            int32_t bid = t->byte_tok[(unsigned char)s->text[j]];
            if (bid < 0) {
                st_errf(err, errlen, "byte 0x%02X has no token in the vocabulary", (unsigned char)s->text[j]);
                return -1;
            }
            if (emit(ids, cap, &out, (uint32_t)bid))
                goto oom;
        }
    }
    return (int64_t)out;
oom:
    st_errf(err, errlen, "out of memory");
    return -1;
}
