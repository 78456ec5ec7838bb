/* GGUF, llama.cpp's model file format (version 3), as an in-memory description: metadata
 * key-values and tensor infos, parsed from bytes or built up and serialised to a caller's sink.
 * No I/O here: the parser takes a buffer, the writer hands bytes to a callback.
 *
 * Layout (llama.cpp: ggml/src/gguf.cpp, gguf-py/gguf/constants.py; all little-endian):
 *   "GGUF", u32 version, u64 n_tensors, u64 n_kv
 *   n_kv      x { string key, u32 value type, value }      string = u64 length + bytes (no NUL)
 *                array value = u32 element type, u64 count, elements
 *   n_tensors x { string name, u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset }
 *   zero padding to the alignment (general.alignment, a u32 power of two; default 32)
 *   tensor data: each tensor at data start + offset, offsets consecutive, each padded to the
 *   alignment (ggml refuses any other order).
 * The parser checks what llama.cpp's loader checks (magic, version 2 or 3, unique non-empty keys
 * and tensor names, names under 64 bytes, at most 4 dimensions, known ggml types, rows a whole
 * number of blocks, consecutive aligned offsets, data inside the file) and says where it failed. */
#ifndef ST_ENGINE_GGUF_H
#define ST_ENGINE_GGUF_H
#include <stddef.h>
#include <stdint.h>

#define ST_GGUF_VERSION 3
#define ST_GGUF_DEFAULT_ALIGNMENT 32u
#define ST_GGUF_MAX_DIMS 4        /* GGML_MAX_DIMS */
#define ST_GGUF_MAX_NAME 63       /* GGML_MAX_NAME (64) less its NUL */
#define ST_GGUF_MAX_KEY 65535     /* longest metadata key accepted */
#define ST_GGUF_MAX_KV (1u << 20) /* most metadata entries accepted */
#define ST_GGUF_MAX_TENSORS (1u << 20)
#define ST_GGUF_MAX_HEADER ((size_t)256 << 20) /* largest serialised header (vocab arrays included) */

typedef enum st_gguf_type {
    ST_GGUF_U8 = 0,
    ST_GGUF_I8 = 1,
    ST_GGUF_U16 = 2,
    ST_GGUF_I16 = 3,
    ST_GGUF_U32 = 4,
    ST_GGUF_I32 = 5,
    ST_GGUF_F32 = 6,
    ST_GGUF_BOOL = 7,
    ST_GGUF_STR = 8,
    ST_GGUF_ARR = 9,
    ST_GGUF_U64 = 10,
    ST_GGUF_I64 = 11,
    ST_GGUF_F64 = 12,
    ST_GGUF_NTYPES
} st_gguf_type;

/* ggml tensor types used here (ggml/include/ggml.h); the parser knows the size of all of them. */
enum {
    ST_GGML_F32 = 0,
    ST_GGML_F16 = 1,
    ST_GGML_Q4_0 = 2,
    ST_GGML_Q8_0 = 8,
    ST_GGML_Q6_K = 14,
    ST_GGML_BF16 = 30,
};

typedef struct st_gguf_value {
    st_gguf_type type;
    uint64_t u; /* U8, U16, U32, U64, BOOL */
    int64_t i;  /* I8, I16, I32, I64 */
    double f;   /* F32, F64 */
    char *str;  /* STR: NUL-terminated copy (may hold NULs; str_len is the length) */
    uint64_t str_len;
    st_gguf_type elem;  /* ARR: element type (never ARR) */
    uint64_t n;         /* ARR: element count */
    unsigned char *raw; /* ARR: the elements as serialised (strings: u64 length + bytes each) */
    size_t raw_len;
} st_gguf_value;

typedef struct st_gguf_kv {
    char *key;
    st_gguf_value v;
} st_gguf_kv;

typedef struct st_gguf_tensor {
    char name[ST_GGUF_MAX_NAME + 1];
    uint32_t n_dims;
    uint64_t ne[ST_GGUF_MAX_DIMS]; /* ne[0] is the row length; unused dimensions are 1 */
    uint32_t type;                 /* ggml type */
    uint64_t offset;               /* from the start of the data section */
    uint64_t nbytes;               /* without padding */
} st_gguf_tensor;

typedef struct st_gguf {
    uint32_t version;
    st_gguf_kv *kv;
    size_t n_kv, cap_kv;
    st_gguf_tensor *t;
    size_t n_t, cap_t;
    uint32_t alignment;
    uint64_t data_offset; /* parse: where the data section starts in the file */
    uint64_t data_size;   /* the data section's size, every tensor padded to the alignment */
} st_gguf;

/* An empty description: version 3, alignment 32, no metadata, no tensors. */
void st_gguf_init(st_gguf *g);
void st_gguf_free(st_gguf *g);

/* Parses the header in p[0..len), which holds the first len bytes of a file of file_size bytes
 * (len == file_size for a whole file; the header must lie within len). Every tensor's data must
 * lie within file_size. 0, or -1 with the reason and its byte offset in err ("byte 24: ..."); g
 * is left empty (initialised) on failure. */
int st_gguf_parse(const void *p, size_t len, uint64_t file_size, st_gguf *g, char *err, size_t errlen);

const st_gguf_kv *st_gguf_find(const st_gguf *g, const char *key);
const st_gguf_tensor *st_gguf_tensor_find(const st_gguf *g, const char *name);
/* Typed reads: 0, or -1 when the key is missing or of another type (integers of any width are
 * accepted when the value fits). */
int st_gguf_get_u64(const st_gguf *g, const char *key, uint64_t *out);
int st_gguf_get_f64(const st_gguf *g, const char *key, double *out);
const char *st_gguf_get_str(const st_gguf *g, const char *key);
/* Element i of an array of strings (walks the array: O(i)). 0, or -1 out of range / not strings. */
int st_gguf_arr_str(const st_gguf_value *v, uint64_t i, const char **s, uint64_t *n);

/* Setters add the key or replace its value. 0, or -1 (allocation failure, bad key). */
int st_gguf_set_u32(st_gguf *g, const char *key, uint32_t v);
int st_gguf_set_i32(st_gguf *g, const char *key, int32_t v);
int st_gguf_set_u64(st_gguf *g, const char *key, uint64_t v);
int st_gguf_set_f32(st_gguf *g, const char *key, float v);
int st_gguf_set_bool(st_gguf *g, const char *key, int v);
int st_gguf_set_str(st_gguf *g, const char *key, const char *s);
/* An array of n numbers of type elem (not STR or ARR), from a C array of that type. */
int st_gguf_set_arr_num(st_gguf *g, const char *key, st_gguf_type elem, uint64_t n, const void *values);
/* An array of n strings. */
int st_gguf_set_arr_str(st_gguf *g, const char *key, uint64_t n, const char *const *s);
/* A deep copy of v (e.g. from another file's metadata). */
int st_gguf_set_value(st_gguf *g, const char *key, const st_gguf_value *v);

/* Appends a tensor at the end of the data section. Checks the name (1..63 bytes, unique), the
 * dimensions (1..4, each >= 1), the type (known), the row length (a whole number of blocks).
 * 0, or -1 with the reason in err. */
int st_gguf_add_tensor(st_gguf *g, const char *name, uint32_t type, uint32_t n_dims, const uint64_t *ne, char *err,
                       size_t errlen);
uint64_t st_gguf_tensor_elems(const st_gguf_tensor *t);

/* ggml type facts: name ("f16", "q8_0"...), elements per block and bytes per block. 0, or -1 for an
 * unknown or removed type. */
int st_ggml_type_info(uint32_t type, const char **name, uint32_t *blck, uint32_t *size);

/* Serialisation. The sink takes the file's bytes in order (0 or -1 to stop). The fill callback
 * writes bytes [off, off + n) of tensor ti into dst; it is called for each tensor in order with
 * consecutive ranges, n a multiple of the type's block size in bytes. */
typedef int (*st_gguf_sink)(void *ctx, const void *p, size_t n);
typedef int (*st_gguf_fill)(void *ctx, size_t ti, uint64_t off, void *dst, size_t n);
/* The header and its padding: exactly the bytes before the data section (malloc'd into *out). */
int st_gguf_header(const st_gguf *g, unsigned char **out, size_t *len, char *err, size_t errlen);
/* The whole file: header, then each tensor's bytes from fill and its padding. */
int st_gguf_write(const st_gguf *g, st_gguf_fill fill, void *fill_ctx, st_gguf_sink sink, void *sink_ctx, char *err,
                  size_t errlen);

/* IEEE half precision from single, rounded to nearest even (what ggml's conversion does). */
uint16_t st_f32_to_f16(float f);
float st_f16_to_f32(uint16_t h);

#endif
