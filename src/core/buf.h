/* A byte buffer with a hard maximum size. Appending past the maximum fails (returns -1)
 * and leaves the buffer unchanged: callers turn that into a per-request error, never a
 * crash or an unbounded allocation. */
#ifndef ST_BUF_H
#define ST_BUF_H
#include <stdarg.h>
#include <stddef.h>

typedef struct st_buf {
    char *data;   /* always NUL-terminated when len > 0 or after any append */
    size_t len;
    size_t cap;
    size_t max;   /* hard limit on len */
} st_buf;

void st_buf_init(st_buf *b, size_t max);
void st_buf_free(st_buf *b);
void st_buf_reset(st_buf *b);
/* Makes room for n more bytes. 0 on success, -1 past the maximum or on allocation failure. */
int st_buf_reserve(st_buf *b, size_t n);
int st_buf_append(st_buf *b, const void *p, size_t n);
int st_buf_puts(st_buf *b, const char *s);
int st_buf_printf(st_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int st_buf_vprintf(st_buf *b, const char *fmt, va_list ap);
/* Removes the first n bytes. */
void st_buf_consume(st_buf *b, size_t n);
/* Appends s as a JSON string literal (with quotes), escaping as RFC 8259 requires. */
int st_buf_json_str(st_buf *b, const char *s);
int st_buf_json_strn(st_buf *b, const char *s, size_t n);
/* Appends s with &, <, >, ", ' escaped for HTML text and attribute values. */
int st_buf_html(st_buf *b, const char *s);

#endif
