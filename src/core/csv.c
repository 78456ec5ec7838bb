#include "core/csv.h"

#include <stdio.h>
#include <string.h>

#include "core/util.h"

void st_csv_init(st_csv *c, const char *text, size_t len)
{
    memset(c, 0, sizeof *c);
    c->p = text;
    c->end = text + len;
    c->line = 1;
    st_buf_init(&c->scratch, ST_CSV_MAX_RECORD);
}

void st_csv_free(st_csv *c) { st_buf_free(&c->scratch); }

/* Ends the current field: a NUL in scratch; its start offset was recorded. */
static int end_field(st_csv *c, size_t *off, char *err, size_t errlen)
{
    if (c->n >= ST_CSV_MAX_FIELDS) {
        st_errf(err, errlen, "line %u: more than %d fields", c->rec_line, ST_CSV_MAX_FIELDS);
        return -1;
    }
    off[c->n] = c->scratch.len;
    st_buf_append(&c->scratch, "", 1); /* the terminator, counted in len */
    c->n++;
    return 0;
}

int st_csv_next(st_csv *c, char *err, size_t errlen)
{
    size_t off[ST_CSV_MAX_FIELDS + 1], start[ST_CSV_MAX_FIELDS + 1];
    /* skip blank lines */
    while (c->p < c->end && (*c->p == '\n' || *c->p == '\r')) {
        if (*c->p == '\n')
            c->line++;
        c->p++;
    }
    st_buf_reset(&c->scratch);
    c->n = 0;
    if (c->p >= c->end)
        return 0;
    c->rec_line = c->line;
    start[0] = 0;
    for (;;) {
        /* one field */
        if (c->p < c->end && *c->p == '"') {
            c->p++;
            for (;;) {
                if (c->p >= c->end) {
                    st_errf(err, errlen, "line %u: a quoted field is not closed", c->rec_line);
                    return -1;
                }
                const char *q = memchr(c->p, '"', (size_t)(c->end - c->p));
                const char *stop = q ? q : c->end;
                for (const char *x = c->p; x < stop; x++)
                    c->line += *x == '\n';
                st_buf_append(&c->scratch, c->p, (size_t)(stop - c->p));
                c->p = stop;
                if (!q)
                    continue; /* reports the unclosed quote above */
                if (q + 1 < c->end && q[1] == '"') {
                    st_buf_append(&c->scratch, "\"", 1);
                    c->p = q + 2;
                    continue;
                }
                c->p = q + 1;
                break;
            }
            if (c->p < c->end && *c->p != ',' && *c->p != '\n' && *c->p != '\r') {
                st_errf(err, errlen, "line %u: text after a closing quote", c->line);
                return -1;
            }
        } else {
            const char *s = c->p;
            while (c->p < c->end && *c->p != ',' && *c->p != '\n' && *c->p != '\r') {
                if (*c->p == '"') {
                    st_errf(err, errlen,
                            "line %u: a quote inside an unquoted field (quote the field and "
                            "write \"\" for a quote)",
                            c->line);
                    return -1;
                }
                c->p++;
            }
            st_buf_append(&c->scratch, s, (size_t)(c->p - s));
        }
        if (end_field(c, off, err, errlen))
            return -1;
        start[c->n] = c->scratch.len;
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            continue;
        }
        /* end of record: CRLF, LF, CR or the end of the text */
        if (c->p < c->end && *c->p == '\r')
            c->p++;
        if (c->p < c->end && *c->p == '\n')
            c->p++;
        c->line++;
        break;
    }
    if (st_buf_error(&c->scratch)) {
        st_errf(err, errlen, "line %u: a record longer than %zu bytes", c->rec_line, (size_t)ST_CSV_MAX_RECORD);
        return -1;
    }
    for (int i = 0; i < c->n; i++) {
        c->field[i] = c->scratch.data + start[i];
        c->len[i] = off[i] - start[i];
    }
    return 1;
}

int st_csv_find(const st_csv *c, const char *name)
{
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->field[i], name))
            return i;
    return -1;
}

int st_csv_put_text(st_buf *b, const char *s)
{
    if (!s)
        return 0;
    int q = strpbrk(s, ",\"\r\n") != NULL;
    int rc = q ? st_buf_puts(b, "\"") : 0;
    if (*s && strchr("=+-@\t\r", *s))
        rc |= st_buf_puts(b, "'");
    for (const char *p = s; *p; p++)
        rc |= *p == '"' ? st_buf_puts(b, "\"\"") : st_buf_append(b, p, 1);
    if (q)
        rc |= st_buf_puts(b, "\"");
    return rc ? -1 : 0;
}
