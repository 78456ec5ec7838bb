#include "core/buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void st_buf_init(st_buf *b, size_t max)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max;
    b->err = ST_BUF_OK;
}

void st_buf_free(st_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->err = ST_BUF_OK;
}

void st_buf_reset(st_buf *b)
{
    b->len = 0;
    b->err = ST_BUF_OK;
    if (b->data)
        b->data[0] = '\0';
}

const char *st_buf_strerror(const st_buf *b, char *out, size_t n)
{
    switch (b->err) {
    case ST_BUF_OK: snprintf(out, n, "%s", ""); break;
    case ST_BUF_TOO_BIG: snprintf(out, n, "output exceeds its limit of %zu bytes", b->max); break;
    case ST_BUF_NO_MEM: snprintf(out, n, "out of memory"); break;
    }
    return out;
}

int st_buf_reserve(st_buf *b, size_t n)
{
    if (b->err)
        return -1;
    if (n > b->max || b->len > b->max - n) {
        b->err = ST_BUF_TOO_BIG;
        return -1;
    }
    size_t need = b->len + n + 1; /* room for the terminating NUL */
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    if (cap > b->max + 1)
        cap = b->max + 1;
    char *p = realloc(b->data, cap);
    if (!p) {
        b->err = ST_BUF_NO_MEM;
        return -1;
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

int st_buf_append(st_buf *b, const void *p, size_t n)
{
    if (st_buf_reserve(b, n) < 0)
        return -1;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int st_buf_puts(st_buf *b, const char *s) { return st_buf_append(b, s, strlen(s)); }

int st_buf_vprintf(st_buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0 && !b->err)
        b->err = ST_BUF_TOO_BIG; /* vsnprintf cannot represent the length (> INT_MAX) */
    if (n < 0 || st_buf_reserve(b, (size_t)n) < 0)
        return -1;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return 0;
}

int st_buf_printf(st_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = st_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

void st_buf_consume(st_buf *b, size_t n)
{
    if (n >= b->len) {
        st_buf_reset(b);
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    b->data[b->len] = '\0';
}

static int roll_back(st_buf *b, size_t len)
{
    if (b->data && len <= b->len) {
        b->len = len;
        b->data[len] = '\0';
    }
    return -1;
}

int st_buf_json_strn(st_buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t start = b->len;
    if (st_buf_append(b, "\"", 1) < 0)
        return -1;
    size_t run = 0; /* bytes copied verbatim in one go */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[7];
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        default:
            if (c < 0x20) {
                u[0] = '\\';
                u[1] = 'u';
                u[2] = '0';
                u[3] = '0';
                u[4] = hex[c >> 4];
                u[5] = hex[c & 15];
                u[6] = 0;
                esc = u;
            }
        }
        if (!esc)
            continue;
        if (st_buf_append(b, s + run, i - run) < 0 || st_buf_puts(b, esc) < 0)
            return roll_back(b, start);
        run = i + 1;
    }
    if (st_buf_append(b, s + run, n - run) < 0 || st_buf_append(b, "\"", 1) < 0)
        return roll_back(b, start);
    return 0;
}

int st_buf_json_str(st_buf *b, const char *s) { return st_buf_json_strn(b, s ? s : "", s ? strlen(s) : 0); }

int st_shell_plain(const char *s)
{
    static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-";
    return s && *s && strspn(s, safe) == strlen(s);
}

int st_buf_shell_quote(st_buf *b, const char *s)
{
    if (!s)
        s = "";
    if (st_shell_plain(s))
        return st_buf_puts(b, s);
    size_t start = b->len;
    if (st_buf_append(b, "'", 1) < 0)
        return -1;
    for (const char *p = s; *p; p++) {
        const char *q = strchr(p, '\'');
        size_t n = q ? (size_t)(q - p) : strlen(p);
        if (st_buf_append(b, p, n) < 0 || (q && st_buf_puts(b, "'\\''") < 0))
            return roll_back(b, start);
        if (!q)
            break;
        p = q;
    }
    if (st_buf_append(b, "'", 1) < 0)
        return roll_back(b, start);
    return 0;
}

int st_buf_html(st_buf *b, const char *s)
{
    size_t start = b->len;
    for (; s && *s; s++) {
        int rc;
        switch (*s) {
        case '&': rc = st_buf_puts(b, "&amp;"); break;
        case '<': rc = st_buf_puts(b, "&lt;"); break;
        case '>': rc = st_buf_puts(b, "&gt;"); break;
        case '"': rc = st_buf_puts(b, "&quot;"); break;
        case '\'': rc = st_buf_puts(b, "&#39;"); break;
        default: rc = st_buf_append(b, s, 1);
        }
        if (rc < 0)
            return roll_back(b, start);
    }
    return 0;
}

int st_buf_sh_argv(st_buf *b, const st_strv *argv)
{
    for (int i = 0; i < argv->n; i++) {
        if (i)
            st_buf_puts(b, " ");
        st_buf_shell_quote(b, argv->v[i]);
    }
    return st_buf_error(b) ? -1 : 0;
}
