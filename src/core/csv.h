/* CSV records (RFC 4180) read one at a time from a text in memory: fields separated by commas,
 * records by LF or CRLF; a field in double quotes may hold commas, line breaks and "" (one
 * quote). Bytes outside quotes are taken as they are (a lone quote inside an unquoted field is
 * an error, as is text after a closing quote). Blank lines are skipped.
 *
 * Fields are NUL-terminated copies in the reader's scratch buffer, valid until the next call;
 * st_csv_next fills at most ST_CSV_MAX_FIELDS of them and refuses a longer record. Every error
 * names the record's first line: "line 12: a quoted field is not closed". No I/O. */
#ifndef ST_CORE_CSV_H
#define ST_CORE_CSV_H
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

#define ST_CSV_MAX_FIELDS 256
#define ST_CSV_MAX_RECORD ((size_t)1 << 20) /* bytes of one record's fields */

typedef struct st_csv {
    const char *p, *end;
    uint32_t line;     /* the line the next record starts on (1-based) */
    uint32_t rec_line; /* the line the last record read started on */
    st_buf scratch;    /* the last record's fields, NUL-separated */
    const char *field[ST_CSV_MAX_FIELDS];
    size_t len[ST_CSV_MAX_FIELDS];
    int n; /* fields in the last record */
} st_csv;

void st_csv_init(st_csv *c, const char *text, size_t len);
void st_csv_free(st_csv *c);
/* 1: a record (c->field[0..n), c->len), 0: end of text, -1: malformed (err "line N: ..."; the
 * reader stops there). */
int st_csv_next(st_csv *c, char *err, size_t errlen);
/* The index of the field equal to name in the last record (e.g. the header), or -1. */
int st_csv_find(const st_csv *c, const char *name);

/* Appends s as one CSV text field: in double quotes (quotes doubled) when it holds a comma, a
 * quote or a line break (RFC 4180); one a spreadsheet would take for a formula (starting with =,
 * +, -, @, a tab or a carriage return) gets a leading ' so it is shown, never evaluated. NULL
 * appends nothing (an empty field). Returns st_buf_append's result. */
int st_csv_put_text(st_buf *b, const char *s);

#endif
