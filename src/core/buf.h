/* A byte buffer with a hard maximum size and a sticky error (as SQLite's StrAccum and curl's
 * dynbuf). An append that does not fit (past the maximum, or out of memory) returns -1,
 * leaves the content as it was and sets b->err; from then on every append is refused too,
 * so a writer may append a whole document without checking each call and ask once at the
 * end (st_buf_error) whether the output is whole. Nothing is ever silently cut: a document
 * with a piece missing is an error, never a shorter document. st_buf_reset (start again)
 * clears the error; st_buf_consume keeps it.
 *
 * Maxima are named where they are chosen (e.g. ST_REPORT_MAX_BYTES); callers turn an error
 * into a per-request or per-report failure, never a crash or an unbounded allocation. */
#ifndef ST_BUF_H
#define ST_BUF_H
#include <stdarg.h>
#include <stddef.h>

#include "core/strv.h"

typedef enum st_buf_err {
    ST_BUF_OK = 0,
    ST_BUF_TOO_BIG, /* an append would have passed the maximum */
    ST_BUF_NO_MEM,  /* allocation failed */
} st_buf_err;

typedef struct st_buf {
    char *data; /* always NUL-terminated when len > 0 or after any append */
    size_t len;
    size_t cap;
    size_t max;     /* hard limit on len */
    st_buf_err err; /* the first refused append's reason; sticky until st_buf_reset */
} st_buf;

void st_buf_init(st_buf *b, size_t max);
void st_buf_free(st_buf *b);
/* Empties the buffer and clears its error (its memory is kept). */
void st_buf_reset(st_buf *b);
/* ST_BUF_OK when every append since init/reset went in whole, else the first error. */
static inline st_buf_err st_buf_error(const st_buf *b) { return b->err; }
/* Marks the output as not whole (e.g. memory for a piece of it ran out) unless an error is set. */
static inline void st_buf_fail(st_buf *b, st_buf_err e)
{
    if (!b->err)
        b->err = e;
}
/* "output exceeds its limit of N bytes" / "out of memory", or "" when whole. */
const char *st_buf_strerror(const st_buf *b, char *out, size_t n);
/* Makes room for n more bytes. 0 on success; -1 (and the sticky error) past the maximum, on
 * allocation failure, or when an error is already set. */
int st_buf_reserve(st_buf *b, size_t n);
/* Whether n more bytes would fit under the maximum (no error is set, nothing allocated). */
static inline int st_buf_fits(const st_buf *b, size_t n) { return !b->err && n <= b->max && b->len <= b->max - n; }
int st_buf_append(st_buf *b, const void *p, size_t n);
int st_buf_puts(st_buf *b, const char *s);
int st_buf_printf(st_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int st_buf_vprintf(st_buf *b, const char *fmt, va_list ap);
/* Removes the first n bytes. */
void st_buf_consume(st_buf *b, size_t n);
/* Appends s as a JSON string literal (with quotes), escaping as RFC 8259 requires. */
int st_buf_json_str(st_buf *b, const char *s);
int st_buf_json_strn(st_buf *b, const char *s, size_t n);
/* Appends s as one POSIX shell word: as it is when it is non-empty and only has characters no
 * shell treats specially ([A-Za-z0-9_@%+=:,./-]), else in single quotes with each ' written
 * as '\''. Whatever s holds (spaces, $, `, ;, newlines), sh reads back exactly s. */
int st_buf_shell_quote(st_buf *b, const char *s);
/* Appends argv as one shell command line, every word quoted as needed (st_buf_shell_quote).
 * 0, or -1 when b is in error. */
int st_buf_sh_argv(st_buf *b, const st_strv *argv);
/* Whether s is such a word already: not empty, and only [A-Za-z0-9_@%+=:,./-]. */
int st_shell_plain(const char *s);
/* Appends s with &, <, >, ", ' escaped for HTML text and attribute values. */
int st_buf_html(st_buf *b, const char *s);

#endif
