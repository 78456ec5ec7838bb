#include "core/json.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *skip_ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

static int is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* Bytes that end the fast run inside a string: the quote, the backslash and the control
 * characters JSON forbids. */
static const unsigned char str_stop[256] = {
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,         1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, ['"'] = 1, ['\\'] = 1,
};

/* p at the opening quote; returns the byte after the closing quote, or NULL. *esc (may be
 * NULL) is set when the string contains an escape. */
static const char *scan_str(const char *p, const char *end, int *esc)
{
    p++;
    while (p < end) {
        /* Eight bytes at a time while none is a quote, a backslash or below 0x20 (the
         * "has a zero byte" / "has a byte below n" tests of Hacker's Delight: the lowest
         * flagged byte is always a true match, so its index is exact). */
        while (end - p >= 8) {
            uint64_t x;
            memcpy(&x, p, 8);
            const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
            uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
            uint64_t hit = (((q - ones) & ~q) | ((b - ones) & ~b) | ((x - ones * 0x20) & ~x)) & high;
            if (hit) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
                p += __builtin_ctzll(hit) >> 3;
#endif
                break;
            }
            p += 8;
        }
        while (p < end && !str_stop[(unsigned char)*p])
            p++;
        if (p >= end)
            return NULL;
        unsigned char c = (unsigned char)*p;
        if (c == '"')
            return p + 1;
        if (c < 0x20)
            return NULL;
        /* c == '\\' */
        if (p + 1 >= end)
            return NULL;
        if (esc)
            *esc = 1;
        switch (p[1]) {
        case '"':
        case '\\':
        case '/':
        case 'b':
        case 'f':
        case 'n':
        case 'r':
        case 't': p += 2; break;
        case 'u':
            if (end - p < 6 || !is_hex(p[2]) || !is_hex(p[3]) || !is_hex(p[4]) || !is_hex(p[5]))
                return NULL;
            p += 6;
            break;
        default: return NULL;
        }
    }
    return NULL;
}

static const char *scan_string(const char *p, const char *end) { return scan_str(p, end, NULL); }

static const char *scan_number(const char *p, const char *end)
{
    if (p < end && *p == '-')
        p++;
    if (p >= end)
        return NULL;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && is_digit(*p))
            p++;
    } else {
        return NULL;
    }
    if (p < end && *p == '.') {
        p++;
        if (p >= end || !is_digit(*p))
            return NULL;
        while (p < end && is_digit(*p))
            p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        if (p >= end || !is_digit(*p))
            return NULL;
        while (p < end && is_digit(*p))
            p++;
    }
    return p;
}

static const char *scan_lit(const char *p, const char *end, const char *lit, size_t n)
{
    if ((size_t)(end - p) < n || memcmp(p, lit, n) != 0)
        return NULL;
    return p + n;
}

/* p at the first byte of a value (no leading whitespace); returns the byte after it. */
static const char *scan_value(const char *p, const char *end, int depth)
{
    if (p >= end)
        return NULL;
    switch (*p) {
    case '"': return scan_string(p, end);
    case 't': return scan_lit(p, end, "true", 4);
    case 'f': return scan_lit(p, end, "false", 5);
    case 'n': return scan_lit(p, end, "null", 4);
    case '{':
    case '[': {
        if (depth >= ST_JSON_MAX_DEPTH)
            return NULL;
        int obj = *p == '{';
        char close = obj ? '}' : ']';
        p = skip_ws(p + 1, end);
        if (p < end && *p == close)
            return p + 1;
        for (;;) {
            if (obj) {
                if (p >= end || *p != '"')
                    return NULL;
                p = scan_string(p, end);
                if (!p)
                    return NULL;
                p = skip_ws(p, end);
                if (p >= end || *p != ':')
                    return NULL;
                p = skip_ws(p + 1, end);
            }
            p = scan_value(p, end, depth + 1);
            if (!p)
                return NULL;
            p = skip_ws(p, end);
            if (p >= end)
                return NULL;
            if (*p == close)
                return p + 1;
            if (*p != ',')
                return NULL;
            p = skip_ws(p + 1, end);
        }
    }
    default:
        if (*p == '-' || is_digit(*p))
            return scan_number(p, end);
        return NULL;
    }
}

static st_json_type type_of(char c)
{
    switch (c) {
    case '"': return ST_JSON_STRING;
    case 't': return ST_JSON_TRUE;
    case 'f': return ST_JSON_FALSE;
    case 'n': return ST_JSON_NULL;
    case '{': return ST_JSON_OBJECT;
    case '[': return ST_JSON_ARRAY;
    default: return ST_JSON_NUMBER;
    }
}

static void set_absent(st_json_val *out)
{
    out->type = ST_JSON_ABSENT;
    out->p = NULL;
    out->len = 0;
}

int st_json_parse(const char *doc, size_t len, st_json_val *root)
{
    set_absent(root);
    if (!doc)
        return -1;
    const char *end = doc + len;
    const char *p = skip_ws(doc, end);
    const char *q = scan_value(p, end, 0);
    if (!q || skip_ws(q, end) != end)
        return -1;
    root->type = type_of(*p);
    root->p = p;
    root->len = (size_t)(q - p);
    return 0;
}

/* Decodes one character of a string body at *pp. Returns 1 with the UTF-8 bytes in out,
 * 0 at the closing quote (consumed), -1 on malformed text. */
static int hex4(const char *p)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= c - '0';
        else if (c >= 'a' && c <= 'f')
            v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            v |= c - 'A' + 10;
        else
            return -1;
    }
    return v;
}

static int put_utf8(unsigned cp, unsigned char *out)
{
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xC0 | (cp >> 6));
        out[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xE0 | (cp >> 12));
        out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | (cp >> 18));
    out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

static int next_char(const char **pp, const char *end, unsigned char out[4], int *nout)
{
    const char *p = *pp;
    if (p >= end)
        return -1;
    unsigned char c = (unsigned char)*p;
    if (c == '"') {
        *pp = p + 1;
        return 0;
    }
    if (c < 0x20)
        return -1;
    if (c != '\\') {
        out[0] = c;
        *nout = 1;
        *pp = p + 1;
        return 1;
    }
    if (p + 1 >= end)
        return -1;
    char e = p[1];
    p += 2;
    switch (e) {
    case '"': out[0] = '"'; break;
    case '\\': out[0] = '\\'; break;
    case '/': out[0] = '/'; break;
    case 'b': out[0] = '\b'; break;
    case 'f': out[0] = '\f'; break;
    case 'n': out[0] = '\n'; break;
    case 'r': out[0] = '\r'; break;
    case 't': out[0] = '\t'; break;
    case 'u': {
        if (end - p < 4)
            return -1;
        int cp = hex4(p);
        if (cp < 0)
            return -1;
        p += 4;
        unsigned u = (unsigned)cp;
        if (u >= 0xD800 && u <= 0xDBFF) {
            int lo = -1;
            if (end - p >= 6 && p[0] == '\\' && p[1] == 'u')
                lo = hex4(p + 2);
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
                u = 0x10000 + ((u - 0xD800) << 10) + ((unsigned)lo - 0xDC00);
                p += 6;
            } else {
                u = 0xFFFD;
            }
        } else if (u >= 0xDC00 && u <= 0xDFFF) {
            u = 0xFFFD;
        }
        *nout = put_utf8(u, out);
        *pp = p;
        return 1;
    }
    default: return -1;
    }
    *nout = 1;
    *pp = p;
    return 1;
}

/* Compares a string view (p at the opening quote, within [p, end)) with s[0..n). */
static int str_eq_at(const char *p, const char *end, const char *s, size_t n)
{
    p++;
    /* Fast path: no escapes, compare the raw bytes. */
    if ((size_t)(end - p) > n && p[n] == '"' && memchr(p, '\\', n) == NULL)
        return memcmp(p, s, n) == 0;
    size_t i = 0;
    for (;;) {
        unsigned char ch[4];
        int k = 0;
        int rc = next_char(&p, end, ch, &k);
        if (rc < 0)
            return 0;
        if (rc == 0)
            return i == n;
        if (n - i < (size_t)k || memcmp(s + i, ch, (size_t)k) != 0)
            return 0;
        i += (size_t)k;
    }
}

int st_json_iter_init(st_json_iter *it, const st_json_val *v)
{
    it->p = it->end = NULL;
    it->first = 1;
    it->is_obj = 0;
    if (!v || (v->type != ST_JSON_OBJECT && v->type != ST_JSON_ARRAY) || !v->p || v->len < 2)
        return -1;
    it->is_obj = v->type == ST_JSON_OBJECT;
    it->p = v->p + 1;
    it->end = v->p + v->len;
    return 0;
}

int st_json_iter_next(st_json_iter *it, st_json_val *key, st_json_val *val)
{
    st_json_val dummy;
    if (!key)
        key = &dummy;
    set_absent(key);
    set_absent(val);
    if (!it->p)
        return -1;
    const char *p = skip_ws(it->p, it->end);
    char close = it->is_obj ? '}' : ']';
    it->key_escaped = 0;
    if (p >= it->end)
        goto bad;
    if (*p == close) {
        it->p = p; /* stay at the end */
        return 0;
    }
    if (!it->first) {
        if (*p != ',')
            goto bad;
        p = skip_ws(p + 1, it->end);
    }
    if (it->is_obj) {
        if (p >= it->end || *p != '"')
            goto bad;
        /* Most keys have no escapes: tell the caller so it can compare raw bytes. */
        const char *q = scan_str(p, it->end, &it->key_escaped);
        if (!q)
            goto bad;
        key->type = ST_JSON_STRING;
        key->p = p;
        key->len = (size_t)(q - p);
        p = skip_ws(q, it->end);
        if (p >= it->end || *p != ':')
            goto bad;
        p = skip_ws(p + 1, it->end);
    }
    const char *q = scan_value(p, it->end, 1);
    if (!q)
        goto bad;
    val->type = type_of(*p);
    val->p = p;
    val->len = (size_t)(q - p);
    it->p = q;
    it->first = 0;
    return 1;
bad:
    it->p = NULL;
    set_absent(key);
    return -1;
}

int st_json_obj_get(const st_json_val *obj, const char *key, size_t keylen, st_json_val *out)
{
    set_absent(out);
    if (!obj || obj->type != ST_JSON_OBJECT)
        return 1;
    st_json_iter it;
    if (st_json_iter_init(&it, obj) < 0)
        return -1;
    st_json_val k, v;
    int rc;
    while ((rc = st_json_iter_next(&it, &k, &v)) == 1) {
        if (str_eq_at(k.p, k.p + k.len, key, keylen)) {
            *out = v;
            return 0;
        }
    }
    set_absent(out);
    return rc < 0 ? -1 : 1;
}

/* Raw key bytes (no escapes, never NUL) against a NUL-terminated key: stops at the first
 * difference, so keys of other lengths cost a byte or two. */
static int raw_key_eq(const char *k, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (k[i] != key[i])
            return 0;
    return key[n] == '\0';
}

/* Reads the members of the object at p (its '{'), bounded by end, capturing keys[i] into
 * out[i] as it goes. Returns the byte after the closing brace, or NULL when malformed. */
static const char *scan_obj_fields(const char *p, const char *end, const char *const *keys, int nkeys, st_json_val *out,
                                   int *found)
{
    st_json_iter it = { p + 1, end, 1, 1, 0 };
    st_json_val k, v;
    int rc;
    *found = 0;
    while ((rc = st_json_iter_next(&it, &k, &v)) == 1) {
        size_t raw = k.len - 2;
        const char *kp = k.p + 1;
        for (int i = 0; i < nkeys; i++) {
            if (out[i].type != ST_JSON_ABSENT)
                continue; /* the first occurrence wins, as in st_json_obj_get */
            if (it.key_escaped ? str_eq_at(k.p, k.p + k.len, keys[i], strlen(keys[i])) : raw_key_eq(kp, raw, keys[i])) {
                out[i] = v;
                (*found)++;
                break;
            }
        }
    }
    return rc == 0 ? it.p + 1 : NULL;
}

static int check_keys(const char *const *keys, int nkeys, st_json_val *out)
{
    if (nkeys < 0 || nkeys > 32)
        return -1;
    for (int i = 0; i < nkeys; i++) {
        set_absent(&out[i]);
        if (!keys[i] || !keys[i][0])
            return -1;
    }
    return 0;
}

int st_json_obj_fields(const st_json_val *obj, const char *const *keys, int nkeys, st_json_val *out)
{
    if (check_keys(keys, nkeys, out) < 0)
        return -1;
    if (!obj || obj->type != ST_JSON_OBJECT)
        return 1;
    if (!obj->p || obj->len < 2 || obj->p[0] != '{')
        return -1;
    const char *end = obj->p + obj->len;
    int found = 0;
    const char *q = scan_obj_fields(obj->p, end, keys, nkeys, out, &found);
    /* The object must fill the whole view (nothing after its closing brace but
     * whitespace), so this also serves as the validation of an unparsed document. */
    if (!q || skip_ws(q, end) != end) {
        for (int i = 0; i < nkeys; i++)
            set_absent(&out[i]);
        return -1;
    }
    return found ? 0 : 1;
}

int st_json_iter_next_fields(st_json_iter *it, const char *const *keys, int nkeys, st_json_val *val, st_json_val *out)
{
    set_absent(val);
    if (check_keys(keys, nkeys, out) < 0 || !it->p || it->is_obj)
        return -1;
    const char *p = skip_ws(it->p, it->end), *q;
    if (p >= it->end)
        goto bad;
    if (*p == ']') {
        it->p = p; /* stay at the end */
        return 0;
    }
    if (!it->first) {
        if (*p != ',')
            goto bad;
        p = skip_ws(p + 1, it->end);
    }
    if (p >= it->end)
        goto bad;
    if (*p == '{') {
        int found = 0;
        q = scan_obj_fields(p, it->end, keys, nkeys, out, &found);
    } else {
        q = scan_value(p, it->end, 1);
    }
    if (!q)
        goto bad;
    val->type = type_of(*p);
    val->p = p;
    val->len = (size_t)(q - p);
    it->p = q;
    it->first = 0;
    return 1;
bad:
    it->p = NULL;
    for (int i = 0; i < nkeys; i++)
        set_absent(&out[i]);
    return -1;
}

int st_json_arr_get(const st_json_val *arr, uint32_t idx, st_json_val *out)
{
    set_absent(out);
    if (!arr || arr->type != ST_JSON_ARRAY)
        return 1;
    st_json_iter it;
    if (st_json_iter_init(&it, arr) < 0)
        return -1;
    st_json_val v;
    int rc;
    uint32_t i = 0;
    while ((rc = st_json_iter_next(&it, NULL, &v)) == 1) {
        if (i++ == idx) {
            *out = v;
            return 0;
        }
    }
    set_absent(out);
    return rc < 0 ? -1 : 1;
}

long st_json_count(const st_json_val *v)
{
    st_json_iter it;
    if (st_json_iter_init(&it, v) < 0)
        return -1;
    st_json_val k, x;
    long n = 0;
    int rc;
    while ((rc = st_json_iter_next(&it, &k, &x)) == 1)
        n++;
    return rc < 0 ? -1 : n;
}

/* Checks the whole path's syntax before any lookup, so that a bad path is reported as
 * such even when its first key is absent. */
static int path_ok(const char *s)
{
    int first = 1;
    while (*s) {
        if (*s == '[') {
            s++;
            if (!is_digit(*s))
                return 0;
            while (is_digit(*s))
                s++;
            if (*s++ != ']')
                return 0;
        } else {
            if (*s == '.') {
                if (first)
                    return 0;
                s++;
            }
            const char *k = s;
            while (*s && *s != '.' && *s != '[')
                s++;
            if (s == k)
                return 0;
        }
        first = 0;
    }
    return 1;
}

int st_json_get(const st_json_val *v, const char *path, st_json_val *out)
{
    if (!v || !path || !path_ok(path)) {
        if (out)
            set_absent(out);
        return -1;
    }
    st_json_val cur = *v;
    const char *s = path;
    int first = 1;
    while (*s) {
        if (*s == '[') {
            s++;
            if (!is_digit(*s))
                goto badpath;
            uint64_t idx = 0;
            while (is_digit(*s)) {
                idx = idx * 10 + (uint64_t)(*s - '0');
                if (idx > UINT32_MAX)
                    goto badpath;
                s++;
            }
            if (*s != ']')
                goto badpath;
            s++;
            st_json_val nx;
            int rc = st_json_arr_get(&cur, (uint32_t)idx, &nx);
            if (rc != 0) {
                set_absent(out);
                return rc;
            }
            cur = nx;
        } else {
            if (*s == '.') {
                if (first)
                    goto badpath;
                s++;
            }
            const char *k = s;
            while (*s && *s != '.' && *s != '[')
                s++;
            if (s == k)
                goto badpath;
            st_json_val nx;
            int rc = st_json_obj_get(&cur, k, (size_t)(s - k), &nx);
            if (rc != 0) {
                set_absent(out);
                return rc;
            }
            cur = nx;
        }
        first = 0;
    }
    *out = cur;
    return 0;
badpath:
    set_absent(out);
    return -1;
}

int st_json_num(const st_json_val *v, double *out)
{
    if (!v || v->type != ST_JSON_NUMBER || !v->p || v->len == 0 || v->len >= 64)
        return -1;
    char tmp[64];
    memcpy(tmp, v->p, v->len);
    tmp[v->len] = '\0';
    if (scan_number(tmp, tmp + v->len) != tmp + v->len)
        return -1;
    errno = 0;
    char *e = NULL;
    double d = strtod(tmp, &e);
    if (e != tmp + v->len || !isfinite(d))
        return -1;
    *out = d;
    return 0;
}

int st_json_u64(const st_json_val *v, uint64_t *out)
{
    if (!v || v->type != ST_JSON_NUMBER || !v->p || v->len == 0)
        return -1;
    /* Plain digits: exact, with an overflow check. */
    uint64_t x = 0;
    size_t i = 0;
    for (; i < v->len && is_digit(v->p[i]); i++) {
        unsigned d = (unsigned)(v->p[i] - '0');
        if (x > (UINT64_MAX - d) / 10)
            return -1;
        x = x * 10 + d;
    }
    if (i == v->len) {
        *out = x;
        return 0;
    }
    /* 12.0, 1e3: accept when integral and exactly representable. */
    double d;
    if (st_json_num(v, &d) < 0 || d < 0 || d != floor(d) || d > 9007199254740992.0)
        return -1;
    *out = (uint64_t)d;
    return 0;
}

int st_json_u32(const st_json_val *v, uint32_t *out)
{
    uint64_t x;
    if (st_json_u64(v, &x) < 0 || x > UINT32_MAX)
        return -1;
    *out = (uint32_t)x;
    return 0;
}

int st_json_bool(const st_json_val *v, int *out)
{
    if (!v || (v->type != ST_JSON_TRUE && v->type != ST_JSON_FALSE))
        return -1;
    *out = v->type == ST_JSON_TRUE;
    return 0;
}

int st_json_str(const st_json_val *v, char *buf, size_t cap, size_t *outlen)
{
    size_t n = 0;
    if (outlen)
        *outlen = 0;
    if (buf && cap)
        buf[0] = '\0';
    if (!v || v->type != ST_JSON_STRING || !v->p || v->len < 2)
        return -1;
    const char *p = v->p + 1, *end = v->p + v->len;
    int trunc = 0;
    for (;;) {
        unsigned char ch[4];
        int k = 0;
        int rc = next_char(&p, end, ch, &k);
        if (rc < 0) {
            if (buf && cap)
                buf[0] = '\0';
            return -1;
        }
        if (rc == 0)
            break;
        if (!buf || cap == 0 || n + (size_t)k > cap - 1) {
            trunc = 1;
            break;
        }
        memcpy(buf + n, ch, (size_t)k);
        n += (size_t)k;
    }
    if (buf && cap)
        buf[n] = '\0';
    if (outlen)
        *outlen = n;
    return trunc;
}

int st_json_str_eq(const st_json_val *v, const char *s, size_t n)
{
    if (!v || v->type != ST_JSON_STRING || !v->p || v->len < 2)
        return 0;
    return str_eq_at(v->p, v->p + v->len, s, n);
}

int st_json_str_nonempty(const st_json_val *v) { return v && v->type == ST_JSON_STRING && v->len > 2; }

int st_json_get_u32(const st_json_val *v, const char *path, uint32_t *out)
{
    st_json_val x;
    int rc = st_json_get(v, path, &x);
    if (rc < 0)
        return -1;
    if (rc == 1 || x.type == ST_JSON_NULL)
        return 1;
    return st_json_u32(&x, out) < 0 ? -1 : 0;
}

int st_json_get_num(const st_json_val *v, const char *path, double *out)
{
    st_json_val x;
    int rc = st_json_get(v, path, &x);
    if (rc < 0)
        return -1;
    if (rc == 1 || x.type == ST_JSON_NULL)
        return 1;
    return st_json_num(&x, out) < 0 ? -1 : 0;
}

int st_json_get_str(const st_json_val *v, const char *path, char *buf, size_t cap)
{
    st_json_val x;
    if (buf && cap)
        buf[0] = '\0';
    int rc = st_json_get(v, path, &x);
    if (rc < 0)
        return -1;
    if (rc == 1 || x.type == ST_JSON_NULL)
        return 1;
    return st_json_str(&x, buf, cap, NULL) < 0 ? -1 : 0;
}
