/* A small allocation-free JSON scanner for the hot path (one call per SSE event at
 * hundreds of thousands of events per second). It never copies or allocates: a value is
 * a view (pointer + length) into the caller's bytes, and lookups walk the text.
 * Jansson is used everywhere else (traces, result files); this is only for reading a few
 * fields out of many small documents.
 *
 * Grammar: strict RFC 8259 (no trailing commas, no comments, no leading zeros, control
 * characters rejected inside strings, valid escapes only), nesting limited to
 * ST_JSON_MAX_DEPTH. st_json_parse validates the whole document once; the lookups after it
 * stay in bounds even on views that were not validated (they fail instead).
 *
 * Paths: keys separated by '.', array indices in brackets: "choices[0].delta.content",
 * "usage.prompt_tokens_details.cached_tokens", "[0].generated_text". A key containing
 * '.' or '[' cannot be addressed by a path; use st_json_obj_get for it.
 *
 * Absent vs null: a lookup returns 1 (and type ST_JSON_ABSENT) when the key or index does
 * not exist, 0 with type ST_JSON_NULL when it exists and is null. */
#ifndef ST_JSON_H
#define ST_JSON_H
#include <stddef.h>
#include <stdint.h>

#define ST_JSON_MAX_DEPTH 64

typedef enum st_json_type {
    ST_JSON_ABSENT = 0,
    ST_JSON_NULL,
    ST_JSON_FALSE,
    ST_JSON_TRUE,
    ST_JSON_NUMBER,
    ST_JSON_STRING,
    ST_JSON_OBJECT,
    ST_JSON_ARRAY,
} st_json_type;

/* A view of one value: p points at its first byte (the quote of a string, the brace of
 * an object) and len covers the whole value text. */
typedef struct st_json_val {
    st_json_type type;
    const char *p;
    size_t len;
} st_json_val;

/* Validates doc[0..len) as one JSON value (surrounding whitespace allowed) and returns a
 * view of it. 0 on success, -1 when malformed or nested deeper than ST_JSON_MAX_DEPTH. */
int st_json_parse(const char *doc, size_t len, st_json_val *root);

/* Looks up a path under v (an object or array). 0 found, 1 absent (out->type is
 * ST_JSON_ABSENT; also when an intermediate value has the wrong type), -1 malformed
 * text or path. An empty path returns v itself. */
int st_json_get(const st_json_val *v, const char *path, st_json_val *out);
/* One key of an object (keys are compared after unescaping; the first match wins). */
int st_json_obj_get(const st_json_val *obj, const char *key, size_t keylen, st_json_val *out);
/* Several keys of an object in one pass (the hot path's way to read an event): out[i]
 * gets the value of keys[i] (NUL-terminated, non-empty), ST_JSON_ABSENT when missing.
 * nkeys <= 32. The pass validates every member, and the object must fill the view up to
 * trailing whitespace, so on an unparsed view {ST_JSON_OBJECT, text, len} whose text starts
 * with '{' it validates the whole document: no separate st_json_parse is needed.
 * Returns 0 when at least one key was found, 1 when none (or obj is not an object), -1 on
 * malformed text (every out[i] absent). */
int st_json_obj_fields(const st_json_val *obj, const char *const *keys, int nkeys, st_json_val *out);
/* Element idx of an array. */
int st_json_arr_get(const st_json_val *arr, uint32_t idx, st_json_val *out);
/* Number of elements of an array or members of an object; -1 if neither or malformed. */
long st_json_count(const st_json_val *v);

/* Iteration over an array's elements or an object's members:
 *   st_json_iter it; st_json_iter_init(&it, &v); while (st_json_iter_next(&it, &key, &val) == 1) ...
 * key is the member name (a string view; type ST_JSON_ABSENT for array elements). Returns 1
 * with a value, 0 at the end, -1 on malformed text. */
typedef struct st_json_iter {
    const char *p, *end;
    int is_obj, first;
    int key_escaped; /* the last key returned contains escapes (compare it unescaped) */
} st_json_iter;
int st_json_iter_init(st_json_iter *it, const st_json_val *v);
int st_json_iter_next(st_json_iter *it, st_json_val *key, st_json_val *val);
/* Array iteration that reads an object element's keys in the same pass (instead of
 * st_json_iter_next followed by st_json_obj_fields, which scans the element twice): 1 with
 * the element in *val and, when it is an object, out[i] = its keys[i] (else all absent);
 * 0 at the end; -1 malformed (or it iterates an object). */
int st_json_iter_next_fields(st_json_iter *it, const char *const *keys, int nkeys, st_json_val *val, st_json_val *out);

/* Readers. Each returns 0 on success, -1 when the value has another type or does not fit. */
int st_json_num(const st_json_val *v, double *out);
/* A non-negative integer (also written as 12.0 or 1.2e1); rejects fractions and negatives. */
int st_json_u64(const st_json_val *v, uint64_t *out);
int st_json_u32(const st_json_val *v, uint32_t *out);
int st_json_bool(const st_json_val *v, int *out);
/* Unescapes a string into buf (always NUL-terminated when cap > 0; \u escapes become
 * UTF-8, a lone surrogate becomes U+FFFD). Returns 0, 1 when the result was truncated to
 * fit cap - 1 bytes, -1 when v is not a (well-formed) string. *outlen (may be NULL) gets
 * the bytes written. */
int st_json_str(const st_json_val *v, char *buf, size_t cap, size_t *outlen);
/* 1 when v is a string that unescapes to exactly s[0..n), else 0. */
int st_json_str_eq(const st_json_val *v, const char *s, size_t n);
/* 1 when v is a string with at least one character, else 0. */
int st_json_str_nonempty(const st_json_val *v);
/* 1 for null or absent. */
static inline int st_json_is_nothing(const st_json_val *v)
{
    return v->type == ST_JSON_ABSENT || v->type == ST_JSON_NULL;
}

/* Convenience: path lookup + reader, for the common "get a number/string at a path"
 * pattern. Return 0 found and converted (st_json_get_str: truncated to fit cap - 1 bytes
 * if longer), 1 absent or null, -1 wrong type/malformed. */
int st_json_get_u32(const st_json_val *v, const char *path, uint32_t *out);
int st_json_get_num(const st_json_val *v, const char *path, double *out);
int st_json_get_str(const st_json_val *v, const char *path, char *buf, size_t cap);

#endif
