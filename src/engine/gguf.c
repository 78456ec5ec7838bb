#include "engine/gguf.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/util.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gguf.c reads and writes GGUF's little-endian numbers with memcpy: little-endian hosts only"
#endif

#define GGUF_MAGIC "GGUF"
#define KEY_ALIGNMENT "general.alignment"
#define WRITE_CHUNK ((size_t)1 << 20) /* tensor bytes asked of the fill callback at a time */

/* ggml's type traits (ggml/src/ggml.c; gguf-py GGML_QUANT_SIZES): elements and bytes per block.
 * A size of 0 marks an id that was removed from ggml (4, 5, 31-33, 36-38). */
static const struct {
    const char *name;
    uint32_t blck, size;
} ggml_types[] = {
    [0] = { "f32", 1, 4 },         [1] = { "f16", 1, 2 },         [2] = { "q4_0", 32, 18 },
    [3] = { "q4_1", 32, 20 },      [6] = { "q5_0", 32, 22 },      [7] = { "q5_1", 32, 24 },
    [8] = { "q8_0", 32, 34 },      [9] = { "q8_1", 32, 36 },      [10] = { "q2_K", 256, 84 },
    [11] = { "q3_K", 256, 110 },   [12] = { "q4_K", 256, 144 },   [13] = { "q5_K", 256, 176 },
    [14] = { "q6_K", 256, 210 },   [15] = { "q8_K", 256, 292 },   [16] = { "iq2_xxs", 256, 66 },
    [17] = { "iq2_xs", 256, 74 },  [18] = { "iq3_xxs", 256, 98 }, [19] = { "iq1_s", 256, 50 },
    [20] = { "iq4_nl", 32, 18 },   [21] = { "iq3_s", 256, 110 },  [22] = { "iq2_s", 256, 82 },
    [23] = { "iq4_xs", 256, 136 }, [24] = { "i8", 1, 1 },         [25] = { "i16", 1, 2 },
    [26] = { "i32", 1, 4 },        [27] = { "i64", 1, 8 },        [28] = { "f64", 1, 8 },
    [29] = { "iq1_m", 256, 56 },   [30] = { "bf16", 1, 2 },       [34] = { "tq1_0", 256, 54 },
    [35] = { "tq2_0", 256, 66 },   [39] = { "mxfp4", 32, 17 },    [40] = { "nvfp4", 64, 36 },
    [41] = { "q1_0", 128, 18 },    [42] = { "q2_0", 64, 18 },
};
#define N_GGML_TYPES (sizeof ggml_types / sizeof ggml_types[0])

/* Bytes of one value of a fixed-size GGUF type; 0 for STR and ARR. */
static size_t fixed_size(st_gguf_type t)
{
    switch (t) {
    case ST_GGUF_U8:
    case ST_GGUF_I8:
    case ST_GGUF_BOOL: return 1;
    case ST_GGUF_U16:
    case ST_GGUF_I16: return 2;
    case ST_GGUF_U32:
    case ST_GGUF_I32:
    case ST_GGUF_F32: return 4;
    case ST_GGUF_U64:
    case ST_GGUF_I64:
    case ST_GGUF_F64: return 8;
    default: return 0;
    }
}

static const char *type_name(uint32_t t)
{
    static const char *n[] = { "u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                               "bool", "string", "array", "u64", "i64", "f64" };
    return t < ST_GGUF_NTYPES ? n[t] : "unknown";
}

int st_ggml_type_info(uint32_t type, const char **name, uint32_t *blck, uint32_t *size)
{
    if (type >= N_GGML_TYPES || !ggml_types[type].size)
        return -1;
    if (name)
        *name = ggml_types[type].name;
    if (blck)
        *blck = ggml_types[type].blck;
    if (size)
        *size = ggml_types[type].size;
    return 0;
}

/* ---- the description ------------------------------------------------------------------- */

void st_gguf_init(st_gguf *g)
{
    memset(g, 0, sizeof *g);
    g->version = ST_GGUF_VERSION;
    g->alignment = ST_GGUF_DEFAULT_ALIGNMENT;
}

static void value_free(st_gguf_value *v)
{
    free(v->str);
    free(v->raw);
    memset(v, 0, sizeof *v);
}

void st_gguf_free(st_gguf *g)
{
    for (size_t i = 0; i < g->n_kv; i++) {
        free(g->kv[i].key);
        value_free(&g->kv[i].v);
    }
    free(g->kv);
    free(g->t);
    st_gguf_init(g);
}

const st_gguf_kv *st_gguf_find(const st_gguf *g, const char *key)
{
    for (size_t i = 0; i < g->n_kv; i++)
        if (!strcmp(g->kv[i].key, key))
            return &g->kv[i];
    return NULL;
}

const st_gguf_tensor *st_gguf_tensor_find(const st_gguf *g, const char *name)
{
    for (size_t i = 0; i < g->n_t; i++)
        if (!strcmp(g->t[i].name, name))
            return &g->t[i];
    return NULL;
}

int st_gguf_get_u64(const st_gguf *g, const char *key, uint64_t *out)
{
    const st_gguf_kv *kv = st_gguf_find(g, key);
    if (!kv)
        return -1;
    switch (kv->v.type) {
    case ST_GGUF_U8:
    case ST_GGUF_U16:
    case ST_GGUF_U32:
    case ST_GGUF_U64:
    case ST_GGUF_BOOL: *out = kv->v.u; return 0;
    case ST_GGUF_I8:
    case ST_GGUF_I16:
    case ST_GGUF_I32:
    case ST_GGUF_I64:
        if (kv->v.i < 0)
            return -1;
        *out = (uint64_t)kv->v.i;
        return 0;
    default: return -1;
    }
}

int st_gguf_get_f64(const st_gguf *g, const char *key, double *out)
{
    const st_gguf_kv *kv = st_gguf_find(g, key);
    if (!kv)
        return -1;
    switch (kv->v.type) {
    case ST_GGUF_F32:
    case ST_GGUF_F64: *out = kv->v.f; return 0;
    case ST_GGUF_U8:
    case ST_GGUF_U16:
    case ST_GGUF_U32:
    case ST_GGUF_U64: *out = (double)kv->v.u; return 0;
    case ST_GGUF_I8:
    case ST_GGUF_I16:
    case ST_GGUF_I32:
    case ST_GGUF_I64: *out = (double)kv->v.i; return 0;
    default: return -1;
    }
}

const char *st_gguf_get_str(const st_gguf *g, const char *key)
{
    const st_gguf_kv *kv = st_gguf_find(g, key);
    return kv && kv->v.type == ST_GGUF_STR ? kv->v.str : NULL;
}

int st_gguf_arr_str(const st_gguf_value *v, uint64_t i, const char **s, uint64_t *n)
{
    if (v->type != ST_GGUF_ARR || v->elem != ST_GGUF_STR || i >= v->n)
        return -1;
    size_t pos = 0;
    for (uint64_t k = 0;; k++) {
        uint64_t len; /* the parser and the setters checked every length against raw_len */
        memcpy(&len, v->raw + pos, 8);
        if (k == i) {
            *s = (const char *)v->raw + pos + 8;
            *n = len;
            return 0;
        }
        pos += 8 + (size_t)len;
    }
}

uint64_t st_gguf_tensor_elems(const st_gguf_tensor *t)
{
    uint64_t n = 1;
    for (uint32_t d = 0; d < t->n_dims; d++)
        n *= t->ne[d];
    return n;
}

/* The slot for key: the existing entry (its value freed) or a new one. NULL on failure. */
static st_gguf_value *kv_slot(st_gguf *g, const char *key)
{
    size_t klen = strlen(key);
    if (!klen || klen > ST_GGUF_MAX_KEY)
        return NULL;
    for (size_t i = 0; i < g->n_kv; i++)
        if (!strcmp(g->kv[i].key, key)) {
            value_free(&g->kv[i].v);
            return &g->kv[i].v;
        }
    if (g->n_kv >= ST_GGUF_MAX_KV)
        return NULL;
    if (st_grow((void **)&g->kv, &g->cap_kv, g->n_kv + 1, sizeof *g->kv, 32))
        return NULL;
    char *k = strdup(key);
    if (!k)
        return NULL;
    st_gguf_kv *kv = &g->kv[g->n_kv++];
    kv->key = k;
    memset(&kv->v, 0, sizeof kv->v);
    return &kv->v;
}

static int set_num(st_gguf *g, const char *key, st_gguf_type t, uint64_t u, int64_t i, double f)
{
    st_gguf_value *v = kv_slot(g, key);
    if (!v)
        return -1;
    v->type = t;
    v->u = u;
    v->i = i;
    v->f = f;
    if (!strcmp(key, KEY_ALIGNMENT) && t == ST_GGUF_U32)
        g->alignment = (uint32_t)u;
    return 0;
}

int st_gguf_set_u32(st_gguf *g, const char *key, uint32_t v) { return set_num(g, key, ST_GGUF_U32, v, 0, 0); }
int st_gguf_set_i32(st_gguf *g, const char *key, int32_t v) { return set_num(g, key, ST_GGUF_I32, 0, v, 0); }
int st_gguf_set_u64(st_gguf *g, const char *key, uint64_t v) { return set_num(g, key, ST_GGUF_U64, v, 0, 0); }
int st_gguf_set_f32(st_gguf *g, const char *key, float v) { return set_num(g, key, ST_GGUF_F32, 0, 0, v); }
int st_gguf_set_bool(st_gguf *g, const char *key, int v) { return set_num(g, key, ST_GGUF_BOOL, v != 0, 0, 0); }

/* A string value of n bytes (NULs allowed) under key, copied and NUL-terminated. */
static int set_str_n(st_gguf *g, const char *key, const char *s, size_t n)
{
    char *c = malloc(n + 1);
    if (!c)
        return -1;
    memcpy(c, s, n);
    c[n] = '\0';
    st_gguf_value *v = kv_slot(g, key);
    if (!v) {
        free(c);
        return -1;
    }
    v->type = ST_GGUF_STR;
    v->str = c;
    v->str_len = n;
    return 0;
}

int st_gguf_set_str(st_gguf *g, const char *key, const char *s) { return set_str_n(g, key, s, strlen(s)); }

static int set_arr_raw(st_gguf *g, const char *key, st_gguf_type elem, uint64_t n, unsigned char *raw, size_t raw_len)
{
    st_gguf_value *v = kv_slot(g, key);
    if (!v) {
        free(raw);
        return -1;
    }
    v->type = ST_GGUF_ARR;
    v->elem = elem;
    v->n = n;
    v->raw = raw;
    v->raw_len = raw_len;
    return 0;
}

/* An array value under key from a copy of its serialised elements raw[0..raw_len). */
static int set_arr_copy(st_gguf *g, const char *key, st_gguf_type elem, uint64_t n, const void *raw, size_t raw_len)
{
    unsigned char *c = malloc(raw_len ? raw_len : 1);
    if (!c)
        return -1;
    if (raw_len)
        memcpy(c, raw, raw_len);
    return set_arr_raw(g, key, elem, n, c, raw_len);
}

int st_gguf_set_arr_num(st_gguf *g, const char *key, st_gguf_type elem, uint64_t n, const void *values)
{
    size_t es = fixed_size(elem);
    if (!es || n > SIZE_MAX / es)
        return -1;
    /* little-endian host: the C array is the serialised form */
    return set_arr_copy(g, key, elem, n, values, n * es);
}

int st_gguf_set_arr_str(st_gguf *g, const char *key, uint64_t n, const char *const *s)
{
    size_t total = 0;
    for (uint64_t i = 0; i < n; i++)
        total += 8 + strlen(s[i]);
    unsigned char *raw = malloc(total ? total : 1);
    if (!raw)
        return -1;
    size_t pos = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t len = strlen(s[i]);
        memcpy(raw + pos, &len, 8);
        memcpy(raw + pos + 8, s[i], len);
        pos += 8 + len;
    }
    return set_arr_raw(g, key, ST_GGUF_STR, n, raw, total);
}

int st_gguf_set_value(st_gguf *g, const char *key, const st_gguf_value *src)
{
    if (src->type == ST_GGUF_STR)
        return set_str_n(g, key, src->str, src->str_len);
    if (src->type == ST_GGUF_ARR)
        return set_arr_copy(g, key, src->elem, src->n, src->raw, src->raw_len);
    if (src->type >= ST_GGUF_NTYPES)
        return -1;
    return set_num(g, key, src->type, src->u, src->i, src->f);
}

static uint64_t pad_to(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* Shape and type checks shared by the parser and st_gguf_add_tensor; sets t->nbytes. */
static int tensor_check(st_gguf_tensor *t, char *err, size_t errlen)
{
    const char *tn;
    uint32_t blck, size;
    if (st_ggml_type_info(t->type, &tn, &blck, &size)) {
        st_errf(err, errlen, "tensor '%s': unknown ggml type %" PRIu32, t->name, t->type);
        return -1;
    }
    if (t->n_dims > ST_GGUF_MAX_DIMS) {
        st_errf(err, errlen, "tensor '%s': %" PRIu32 " dimensions (at most %d)", t->name, t->n_dims, ST_GGUF_MAX_DIMS);
        return -1;
    }
    uint64_t elems = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        if (t->ne[d] > (uint64_t)INT64_MAX) {
            st_errf(err, errlen, "tensor '%s': dimension %" PRIu32 " is negative", t->name, d);
            return -1;
        }
        if (t->ne[d] && elems > (uint64_t)INT64_MAX / t->ne[d]) {
            st_errf(err, errlen, "tensor '%s': element count overflows", t->name);
            return -1;
        }
        elems *= t->ne[d];
    }
    for (uint32_t d = t->n_dims; d < ST_GGUF_MAX_DIMS; d++)
        t->ne[d] = 1;
    if (t->ne[0] % blck) {
        st_errf(err, errlen,
                "tensor '%s': row of %" PRIu64 " elements is not a whole number of %s blocks (%" PRIu32 ")", t->name,
                t->ne[0], tn, blck);
        return -1;
    }
    uint64_t blocks = elems / blck;
    if (blocks > (uint64_t)INT64_MAX / size) {
        st_errf(err, errlen, "tensor '%s': byte size overflows", t->name);
        return -1;
    }
    t->nbytes = blocks * size;
    return 0;
}

static st_gguf_tensor *tensor_push(st_gguf *g)
{
    if (g->n_t >= ST_GGUF_MAX_TENSORS)
        return NULL;
    if (st_grow((void **)&g->t, &g->cap_t, g->n_t + 1, sizeof *g->t, 64))
        return NULL;
    st_gguf_tensor *t = &g->t[g->n_t];
    memset(t, 0, sizeof *t);
    return t;
}

int st_gguf_add_tensor(st_gguf *g, const char *name, uint32_t type, uint32_t n_dims, const uint64_t *ne, char *err,
                       size_t errlen)
{
    size_t nl = strlen(name);
    if (!nl || nl > ST_GGUF_MAX_NAME) {
        st_errf(err, errlen, "tensor name '%s': 1 to %d bytes expected", name, ST_GGUF_MAX_NAME);
        return -1;
    }
    if (st_gguf_tensor_find(g, name)) {
        st_errf(err, errlen, "tensor '%s' is already there", name);
        return -1;
    }
    if (n_dims < 1 || n_dims > ST_GGUF_MAX_DIMS) {
        st_errf(err, errlen, "tensor '%s': %" PRIu32 " dimensions (1 to %d)", name, n_dims, ST_GGUF_MAX_DIMS);
        return -1;
    }
    for (uint32_t d = 0; d < n_dims; d++)
        if (!ne[d]) {
            st_errf(err, errlen, "tensor '%s': dimension %" PRIu32 " is 0", name, d);
            return -1;
        }
    st_gguf_tensor *t = tensor_push(g);
    if (!t) {
        st_errf(err, errlen, "tensor '%s': out of memory or too many tensors", name);
        return -1;
    }
    memcpy(t->name, name, nl + 1);
    t->n_dims = n_dims;
    memcpy(t->ne, ne, n_dims * sizeof *ne);
    t->type = type;
    if (tensor_check(t, err, errlen))
        return -1;
    uint64_t padded = pad_to(t->nbytes, g->alignment);
    if (padded < t->nbytes || g->data_size > UINT64_MAX - padded) {
        st_errf(err, errlen, "tensor '%s': data section size overflows", name);
        return -1;
    }
    t->offset = g->data_size;
    g->data_size += padded;
    g->n_t++;
    return 0;
}

/* ---- the parser ------------------------------------------------------------------------ */

typedef struct rd {
    const unsigned char *p;
    size_t len, pos;
    uint64_t file_size;
    char *err;
    size_t errlen;
} rd;

static int need(rd *r, uint64_t n, const char *what)
{
    if (n <= r->len - r->pos)
        return 0;
    if (r->len < r->file_size)
        st_errf(r->err, r->errlen, "byte %zu: reading %s: the header goes past the first %zu bytes read", r->pos, what,
                r->len);
    else
        st_errf(r->err, r->errlen, "byte %zu: reading %s: the file ends (%zu bytes)", r->pos, what, r->len);
    return -1;
}

static int rd_u32(rd *r, uint32_t *v, const char *what)
{
    if (need(r, 4, what))
        return -1;
    memcpy(v, r->p + r->pos, 4);
    r->pos += 4;
    return 0;
}

static int rd_u64(rd *r, uint64_t *v, const char *what)
{
    if (need(r, 8, what))
        return -1;
    memcpy(v, r->p + r->pos, 8);
    r->pos += 8;
    return 0;
}

/* A string's bytes (not copied): *s points into the buffer, *n its length. */
static int rd_str(rd *r, const unsigned char **s, uint64_t *n, const char *what)
{
    if (rd_u64(r, n, what) || need(r, *n, what))
        return -1;
    *s = r->p + r->pos;
    r->pos += (size_t)*n;
    return 0;
}

/* A string value (copied, NUL-terminated) of key `key`, starting at byte at. */
static int rd_value_str(rd *r, st_gguf_value *v, const char *key, size_t at)
{
    const unsigned char *s;
    uint64_t n;
    if (rd_str(r, &s, &n, "a string value"))
        return -1;
    v->str = malloc((size_t)n + 1);
    if (!v->str) {
        st_errf(r->err, r->errlen, "byte %zu: key '%s': out of memory", at, key);
        return -1;
    }
    memcpy(v->str, s, (size_t)n);
    v->str[n] = '\0';
    v->str_len = n;
    return 0;
}

/* An array value of key `key`, starting at byte at: its element type and count, its elements'
 * bytes copied raw (bools checked). */
static int rd_value_arr(rd *r, st_gguf_value *v, const char *key, size_t at)
{
    uint32_t et;
    uint64_t n;
    if (rd_u32(r, &et, "an array's element type") || rd_u64(r, &n, "an array's length"))
        return -1;
    if (et >= ST_GGUF_NTYPES || et == ST_GGUF_ARR) {
        st_errf(r->err, r->errlen, "byte %zu: key '%s': array of %s (type %" PRIu32 ") is not allowed", at, key,
                type_name(et), et);
        return -1;
    }
    size_t start = r->pos;
    size_t es = fixed_size((st_gguf_type)et);
    if (es) {
        if (n > (r->len - r->pos) / es)
            return need(r, UINT64_MAX, "an array's elements");
        r->pos += (size_t)n * es;
    } else {
        for (uint64_t k = 0; k < n; k++) {
            const unsigned char *s;
            uint64_t sl;
            if (rd_str(r, &s, &sl, "a string in an array"))
                return -1;
        }
    }
    v->elem = (st_gguf_type)et;
    v->n = n;
    v->raw_len = r->pos - start;
    v->raw = malloc(v->raw_len ? v->raw_len : 1);
    if (!v->raw) {
        st_errf(r->err, r->errlen, "byte %zu: key '%s': out of memory", at, key);
        return -1;
    }
    memcpy(v->raw, r->p + start, v->raw_len);
    if (et == ST_GGUF_BOOL)
        for (size_t k = 0; k < v->raw_len; k++)
            if (v->raw[k] > 1) {
                st_errf(r->err, r->errlen, "byte %zu: key '%s': bool element %u (0 or 1 expected)", start + k, key,
                        v->raw[k]);
                return -1;
            }
    return 0;
}

/* A fixed-size scalar of `type` from its little-endian bytes q into v (a bool already checked). */
static void decode_scalar(st_gguf_type type, const unsigned char *q, st_gguf_value *v)
{
    uint64_t x = 0;
    float f32;
    memcpy(&x, q, fixed_size(type)); /* little-endian host: the value's bytes are x's lowest */
    switch (type) {
    case ST_GGUF_I8: v->i = (int8_t)x; break;
    case ST_GGUF_I16: v->i = (int16_t)x; break;
    case ST_GGUF_I32: v->i = (int32_t)x; break;
    case ST_GGUF_I64: v->i = (int64_t)x; break;
    case ST_GGUF_F32:
        memcpy(&f32, q, 4);
        v->f = f32;
        break;
    case ST_GGUF_F64: memcpy(&v->f, q, 8); break;
    default: v->u = x; break; /* U8, U16, U32, U64, BOOL */
    }
}

static int rd_value(rd *r, st_gguf_type type, st_gguf_value *v, const char *key)
{
    size_t at = r->pos;
    v->type = type;
    if (type == ST_GGUF_STR)
        return rd_value_str(r, v, key, at);
    if (type == ST_GGUF_ARR)
        return rd_value_arr(r, v, key, at);
    size_t es = fixed_size(type);
    if (!es) {
        st_errf(r->err, r->errlen, "byte %zu: key '%s': unknown value type %u", at - 4, key, (unsigned)type);
        return -1;
    }
    if (need(r, es, "a value"))
        return -1;
    const unsigned char *q = r->p + r->pos;
    r->pos += es;
    if (type == ST_GGUF_BOOL && q[0] > 1) {
        st_errf(r->err, r->errlen, "byte %zu: key '%s': bool value %u (0 or 1 expected)", at, key, q[0]);
        return -1;
    }
    decode_scalar(type, q, v);
    return 0;
}

/* The header: magic, version, and the tensor and metadata counts (bounded). */
static int parse_header(rd *r, st_gguf *g, uint64_t *n_t, uint64_t *n_kv)
{
    if (need(r, 4, "the magic"))
        return -1;
    if (memcmp(r->p, GGUF_MAGIC, 4)) {
        st_errf(r->err, r->errlen, "byte 0: not a GGUF file (magic %02x %02x %02x %02x, \"GGUF\" expected)", r->p[0],
                r->p[1], r->p[2], r->p[3]);
        return -1;
    }
    r->pos = 4;
    if (rd_u32(r, &g->version, "the version"))
        return -1;
    if (g->version != 2 && g->version != 3) {
        st_errf(r->err, r->errlen, "byte 4: GGUF version %" PRIu32 " (2 or 3 supported)", g->version);
        return -1;
    }
    if (rd_u64(r, n_t, "the tensor count") || rd_u64(r, n_kv, "the metadata count"))
        return -1;
    if (*n_t > ST_GGUF_MAX_TENSORS) {
        st_errf(r->err, r->errlen, "byte 8: %" PRIu64 " tensors (at most %u)", *n_t, ST_GGUF_MAX_TENSORS);
        return -1;
    }
    if (*n_kv > ST_GGUF_MAX_KV) {
        st_errf(r->err, r->errlen, "byte 16: %" PRIu64 " metadata entries (at most %u)", *n_kv, ST_GGUF_MAX_KV);
        return -1;
    }
    return 0;
}

/* Metadata entry i: its key (new, well-formed), its type and its value, stored in g. */
static int parse_kv(rd *r, st_gguf *g, uint64_t i)
{
    char what[96];
    size_t at = r->pos;
    const unsigned char *k;
    uint64_t kl;
    snprintf(what, sizeof what, "the key of metadata entry %" PRIu64, i);
    if (rd_str(r, &k, &kl, what))
        return -1;
    if (!kl || kl > ST_GGUF_MAX_KEY || memchr(k, 0, (size_t)kl)) {
        st_errf(r->err, r->errlen,
                "byte %zu: metadata entry %" PRIu64 ": key is empty, longer than %d bytes or holds a NUL", at, i,
                ST_GGUF_MAX_KEY);
        return -1;
    }
    char *key = malloc((size_t)kl + 1);
    if (!key) {
        st_errf(r->err, r->errlen, "byte %zu: out of memory", at);
        return -1;
    }
    memcpy(key, k, (size_t)kl);
    key[kl] = '\0';
    if (st_gguf_find(g, key)) {
        st_errf(r->err, r->errlen, "byte %zu: duplicate key '%s'", at, key);
        free(key);
        return -1;
    }
    uint32_t type;
    snprintf(what, sizeof what, "the type of key '%.60s'", key);
    if (rd_u32(r, &type, what)) {
        free(key);
        return -1;
    }
    if (type >= ST_GGUF_NTYPES) {
        st_errf(r->err, r->errlen, "byte %zu: key '%s': unknown value type %" PRIu32, r->pos - 4, key, type);
        free(key);
        return -1;
    }
    st_gguf_value v;
    memset(&v, 0, sizeof v);
    if (rd_value(r, (st_gguf_type)type, &v, key)) {
        value_free(&v);
        free(key);
        return -1;
    }
    st_gguf_value *slot = kv_slot(g, key);
    free(key);
    if (!slot) {
        value_free(&v);
        st_errf(r->err, r->errlen, "byte %zu: out of memory", at);
        return -1;
    }
    *slot = v;
    return 0;
}

/* The data's alignment from the metadata, when given: a u32 power of two. */
static int parse_alignment(rd *r, st_gguf *g)
{
    const st_gguf_kv *al = st_gguf_find(g, KEY_ALIGNMENT);
    if (!al)
        return 0;
    if (al->v.type != ST_GGUF_U32 || !al->v.u || (al->v.u & (al->v.u - 1))) {
        st_errf(r->err, r->errlen, "%s must be a u32 power of two (is %s %" PRIu64 ")", KEY_ALIGNMENT,
                type_name(al->v.type), al->v.u);
        return -1;
    }
    g->alignment = (uint32_t)al->v.u;
    return 0;
}

/* Tensor i's name, shape, type and offset, stored in g; its data must start at *expect (then advanced). */
static int parse_tensor(rd *r, st_gguf *g, uint64_t i, uint64_t *expect)
{
    char what[96];
    size_t at = r->pos;
    const unsigned char *nm;
    uint64_t nl;
    snprintf(what, sizeof what, "the name of tensor %" PRIu64, i);
    if (rd_str(r, &nm, &nl, what))
        return -1;
    if (!nl || nl > ST_GGUF_MAX_NAME || memchr(nm, 0, (size_t)nl)) {
        st_errf(r->err, r->errlen, "byte %zu: tensor %" PRIu64 ": name is empty, longer than %d bytes or holds a NUL",
                at, i, ST_GGUF_MAX_NAME);
        return -1;
    }
    st_gguf_tensor *t = tensor_push(g);
    if (!t) {
        st_errf(r->err, r->errlen, "byte %zu: out of memory", at);
        return -1;
    }
    memcpy(t->name, nm, (size_t)nl);
    t->name[nl] = '\0';
    if (st_gguf_tensor_find(g, t->name)) {
        st_errf(r->err, r->errlen, "byte %zu: duplicate tensor name '%s'", at, t->name);
        return -1;
    }
    snprintf(what, sizeof what, "the shape of tensor '%s'", t->name);
    if (rd_u32(r, &t->n_dims, what))
        return -1;
    if (t->n_dims > ST_GGUF_MAX_DIMS) {
        st_errf(r->err, r->errlen, "byte %zu: tensor '%s': %" PRIu32 " dimensions (at most %d)", r->pos - 4, t->name,
                t->n_dims, ST_GGUF_MAX_DIMS);
        return -1;
    }
    for (uint32_t d = 0; d < t->n_dims; d++)
        if (rd_u64(r, &t->ne[d], what))
            return -1;
    snprintf(what, sizeof what, "the type and offset of tensor '%s'", t->name);
    if (rd_u32(r, &t->type, what) || rd_u64(r, &t->offset, what))
        return -1;
    char why[256];
    if (tensor_check(t, why, sizeof why)) {
        st_errf(r->err, r->errlen, "byte %zu: %s", at, why);
        return -1;
    }
    if (t->offset != *expect) {
        st_errf(r->err, r->errlen,
                "byte %zu: tensor '%s' at offset %" PRIu64 ", %" PRIu64 " expected (consecutive, aligned to %" PRIu32
                ")",
                at, t->name, t->offset, *expect, g->alignment);
        return -1;
    }
    uint64_t padded = pad_to(t->nbytes, g->alignment);
    if (padded < t->nbytes || *expect > UINT64_MAX - padded) {
        st_errf(r->err, r->errlen, "byte %zu: tensor '%s': data section size overflows", at, t->name);
        return -1;
    }
    *expect += padded;
    g->n_t++;
    return 0;
}

/* Every tensor's data inside the file. */
static int parse_data_bounds(rd *r, const st_gguf *g)
{
    for (size_t i = 0; i < g->n_t; i++) {
        const st_gguf_tensor *t = &g->t[i];
        if (g->data_offset > r->file_size || t->offset > r->file_size - g->data_offset ||
            t->nbytes > r->file_size - g->data_offset - t->offset) {
            st_errf(r->err, r->errlen,
                    "tensor '%s': data [%" PRIu64 ", +%" PRIu64 ") past the end of the file (%" PRIu64 " bytes)",
                    t->name, g->data_offset + t->offset, t->nbytes, r->file_size);
            return -1;
        }
    }
    return 0;
}

/* A GGUF file's header, metadata and tensor table, phase by phase. */
static int parse(rd *r, st_gguf *g)
{
    uint64_t n_t, n_kv;
    if (parse_header(r, g, &n_t, &n_kv))
        return -1;
    for (uint64_t i = 0; i < n_kv; i++)
        if (parse_kv(r, g, i))
            return -1;
    if (parse_alignment(r, g))
        return -1;
    uint64_t expect = 0;
    for (uint64_t i = 0; i < n_t; i++)
        if (parse_tensor(r, g, i, &expect))
            return -1;
    g->data_offset = n_t ? pad_to(r->pos, g->alignment) : r->pos;
    g->data_size = expect;
    return parse_data_bounds(r, g);
}

int st_gguf_parse(const void *p, size_t len, uint64_t file_size, st_gguf *g, char *err, size_t errlen)
{
    st_gguf_init(g);
    if (file_size < len)
        file_size = len;
    rd r = { .p = p, .len = len, .file_size = file_size, .err = err, .errlen = errlen };
    if (parse(&r, g)) {
        st_gguf_free(g);
        return -1;
    }
    return 0;
}

/* ---- the writer ------------------------------------------------------------------------ */

typedef struct wr {
    st_buf b;
    int fail;
} wr;

static void put(wr *w, const void *p, size_t n)
{
    if (!w->fail && st_buf_append(&w->b, p, n))
        w->fail = 1;
}
static void put_u32(wr *w, uint32_t v) { put(w, &v, 4); }
static void put_u64(wr *w, uint64_t v) { put(w, &v, 8); }
static void put_str(wr *w, const char *s, uint64_t n)
{
    put_u64(w, n);
    put(w, s, (size_t)n);
}

static void put_value(wr *w, const st_gguf_value *v)
{
    uint64_t x = v->u; /* a fixed-size value: its fixed_size() lowest bytes of x (little-endian host) */
    float f32 = (float)v->f;
    switch (v->type) {
    case ST_GGUF_I8:
    case ST_GGUF_I16:
    case ST_GGUF_I32:
    case ST_GGUF_I64: x = (uint64_t)v->i; break;
    case ST_GGUF_F32: memcpy(&x, &f32, 4); break;
    case ST_GGUF_F64: memcpy(&x, &v->f, 8); break;
    case ST_GGUF_STR: put_str(w, v->str, v->str_len); return;
    case ST_GGUF_ARR:
        put_u32(w, v->elem);
        put_u64(w, v->n);
        put(w, v->raw, v->raw_len);
        return;
    default: break;
    }
    if (fixed_size(v->type))
        put(w, &x, fixed_size(v->type));
    else
        w->fail = 1;
}

int st_gguf_header(const st_gguf *g, unsigned char **out, size_t *len, char *err, size_t errlen)
{
    *out = NULL;
    *len = 0;
    const st_gguf_kv *al = st_gguf_find(g, KEY_ALIGNMENT);
    uint64_t a = al && al->v.type == ST_GGUF_U32 ? al->v.u : ST_GGUF_DEFAULT_ALIGNMENT;
    if (a != g->alignment || !a || (a & (a - 1))) {
        st_errf(err, errlen, "alignment %" PRIu32 " does not match %s or is not a power of two", g->alignment,
                KEY_ALIGNMENT);
        return -1;
    }
    uint64_t expect = 0;
    for (size_t i = 0; i < g->n_t; i++) {
        if (g->t[i].offset != expect) {
            st_errf(err, errlen,
                    "tensor '%s' at offset %" PRIu64 ", %" PRIu64 " expected (alignment changed after it was added?)",
                    g->t[i].name, g->t[i].offset, expect);
            return -1;
        }
        expect += pad_to(g->t[i].nbytes, a);
    }
    wr w = { .fail = 0 };
    st_buf_init(&w.b, ST_GGUF_MAX_HEADER);
    put(&w, GGUF_MAGIC, 4);
    put_u32(&w, ST_GGUF_VERSION);
    put_u64(&w, g->n_t);
    put_u64(&w, g->n_kv);
    for (size_t i = 0; i < g->n_kv; i++) {
        put_str(&w, g->kv[i].key, strlen(g->kv[i].key));
        put_u32(&w, g->kv[i].v.type);
        put_value(&w, &g->kv[i].v);
    }
    for (size_t i = 0; i < g->n_t; i++) {
        const st_gguf_tensor *t = &g->t[i];
        put_str(&w, t->name, strlen(t->name));
        put_u32(&w, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++)
            put_u64(&w, t->ne[d]);
        put_u32(&w, t->type);
        put_u64(&w, t->offset);
    }
    if (g->n_t) {
        static const unsigned char zeros[64];
        size_t padn = (size_t)(pad_to(w.b.len, a) - w.b.len);
        while (padn && !w.fail) {
            size_t k = padn < sizeof zeros ? padn : sizeof zeros;
            put(&w, zeros, k);
            padn -= k;
        }
    }
    if (w.fail) {
        st_buf_free(&w.b);
        st_errf(err, errlen, "the header is larger than %zu bytes or memory ran out", (size_t)ST_GGUF_MAX_HEADER);
        return -1;
    }
    *out = (unsigned char *)w.b.data;
    *len = w.b.len;
    return 0;
}

int st_gguf_write(const st_gguf *g, st_gguf_fill fill, void *fill_ctx, st_gguf_sink sink, void *sink_ctx, char *err,
                  size_t errlen)
{
    unsigned char *hdr;
    size_t hlen;
    if (st_gguf_header(g, &hdr, &hlen, err, errlen))
        return -1;
    int rc = sink(sink_ctx, hdr, hlen);
    free(hdr);
    if (rc) {
        st_errf(err, errlen, "writing the header failed");
        return -1;
    }
    unsigned char *buf = malloc(WRITE_CHUNK);
    if (!buf) {
        st_errf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < g->n_t; i++) {
        const st_gguf_tensor *t = &g->t[i];
        uint32_t bsize = 1;
        st_ggml_type_info(t->type, NULL, NULL, &bsize);
        size_t chunk = WRITE_CHUNK / bsize * bsize;
        for (uint64_t off = 0; off < t->nbytes;) {
            size_t n = t->nbytes - off < chunk ? (size_t)(t->nbytes - off) : chunk;
            if (fill(fill_ctx, i, off, buf, n)) {
                st_errf(err, errlen, "tensor '%s': filling bytes %" PRIu64 "..%" PRIu64 " failed", t->name, off,
                        off + n);
                free(buf);
                return -1;
            }
            if (sink(sink_ctx, buf, n)) {
                st_errf(err, errlen, "tensor '%s': writing failed", t->name);
                free(buf);
                return -1;
            }
            off += n;
        }
        uint64_t padn = pad_to(t->nbytes, g->alignment) - t->nbytes;
        memset(buf, 0, padn < WRITE_CHUNK ? (size_t)padn : WRITE_CHUNK);
        while (padn) {
            size_t k = padn < WRITE_CHUNK ? (size_t)padn : WRITE_CHUNK;
            if (sink(sink_ctx, buf, k)) {
                st_errf(err, errlen, "tensor '%s': writing its padding failed", t->name);
                free(buf);
                return -1;
            }
            padn -= k;
        }
    }
    free(buf);
    return 0;
}

/* ---- half precision -------------------------------------------------------------------- */

/* Round to nearest even, as in F. Giesen's float_to_half_fast3_rtne (public domain). */
uint16_t st_f32_to_f16(float fl)
{
    const uint32_t f32infty = 255u << 23, f16max = (127u + 16) << 23;
    const uint32_t denorm_magic_u = ((127u - 15) + (23 - 10) + 1) << 23;
    float denorm_magic;
    memcpy(&denorm_magic, &denorm_magic_u, 4);
    uint32_t u;
    memcpy(&u, &fl, 4);
    uint32_t sign = u & 0x80000000u;
    u ^= sign;
    uint16_t o;
    if (u >= f16max) {
        o = u > f32infty ? 0x7e00 : 0x7c00;
    } else if (u < (113u << 23)) {
        float f;
        memcpy(&f, &u, 4);
        f += denorm_magic;
        memcpy(&u, &f, 4);
        o = (uint16_t)(u - denorm_magic_u);
    } else {
        uint32_t mant_odd = (u >> 13) & 1;
        u += (uint32_t)(15 - 127) * (1u << 23) + 0xfff;
        u += mant_odd;
        o = (uint16_t)(u >> 13);
    }
    return (uint16_t)(o | (sign >> 16));
}

float st_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, x;
    float f;
    if (exp == 0) {
        f = ldexpf((float)mant, -24);
        memcpy(&x, &f, 4);
        x |= sign;
    } else if (exp == 31) {
        x = sign | 0x7f800000u | (mant << 13);
    } else {
        x = sign | ((exp + 112) << 23) | (mant << 13);
    }
    memcpy(&f, &x, 4);
    return f;
}
