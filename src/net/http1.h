/* Incremental HTTP/1.1 message parsing (requests and responses) and serialisation.
 * Pure functions over bytes: no I/O. The client (load/runner) parses responses with it and
 * the HTTP server (net/server, used by the emulator) parses requests with it: one HTTP
 * parser in the project.
 *
 * Usage:
 *   st_http_parser p;
 *   st_http_parser_init(&p, ST_HTTP_RESPONSE, &limits, &cbs, arg);
 *   for each read:  n = st_http_feed(&p, buf, len);   (-1: error in p.err / p.errmsg)
 *                   n bytes were consumed; when p.state == ST_HTTP_DONE the message is
 *                   complete and buf[n..len) belongs to the next message: call
 *                   st_http_parser_reset(&p) and feed the rest again.
 *   on close:       st_http_eof(&p)  completes a read-until-close body.
 *
 * Framing: Content-Length, chunked (chunk extensions skipped, trailers read and dropped),
 * read-until-close (responses without either), no body for 1xx/204/304 and HEAD.
 * Interim 1xx responses (except 101) are skipped. Obsolete line folding is rejected.
 * Every part has a bound (st_http_limits); exceeding one is ST_HTTP_E_TOO_LARGE.
 *
 * After the head is parsed, method/target/reason and header names/values are
 * NUL-terminated strings that point into the parser's head buffer; they stay valid until
 * st_http_parser_reset or st_http_parser_free. */
#ifndef ST_HTTP1_H
#define ST_HTTP1_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/buf.h"

typedef enum { ST_HTTP_REQUEST = 0, ST_HTTP_RESPONSE = 1 } st_http_kind;

typedef enum {
    ST_HTTP_E_NONE = 0,
    ST_HTTP_E_MALFORMED, /* not HTTP/1.x, bad framing, connection closed mid-message */
    ST_HTTP_E_TOO_LARGE, /* head, header count, chunk line, trailers or body over its limit */
    ST_HTTP_E_ABORTED,   /* a callback returned nonzero */
} st_http_error;

typedef enum {
    ST_HTTP_HEAD = 0, /* reading the start line and headers */
    ST_HTTP_BODY,     /* head parsed, reading the body */
    ST_HTTP_DONE,     /* message complete */
    ST_HTTP_ERROR,
} st_http_state;

typedef struct st_http_limits {
    size_t max_head;      /* start line + headers, bytes (0: 64 KiB) */
    uint32_t max_headers; /* header fields (0: 100) */
    uint64_t max_body;    /* body bytes (0: unlimited when a body callback is set, 1 MiB when
                             the parser collects the body itself) */
} st_http_limits;

typedef struct st_http_parser st_http_parser;

typedef struct st_http_cbs {
    /* The head is parsed (status/headers available). Nonzero aborts the parse. May be NULL. */
    int (*on_head)(void *arg, st_http_parser *p);
    /* Body bytes (de-chunked), in order, as they arrive. Nonzero aborts. NULL: the parser
     * collects the body in p->body (bounded by max_body). */
    int (*on_body)(void *arg, const char *data, size_t len);
} st_http_cbs;

typedef struct st_http_hdr {
    const char *name;  /* as sent (compare case-insensitively) */
    const char *value; /* leading/trailing whitespace removed */
} st_http_hdr;

struct st_http_parser {
    st_http_kind kind;
    st_http_state state;
    st_http_error err;
    char errmsg[96];

    /* results of the head */
    int http_minor;     /* HTTP/1.<minor> */
    int status;         /* response status code */
    const char *reason; /* response reason phrase ("" if none) */
    const char *method; /* request method */
    const char *target; /* request target */
    st_http_hdr *hdrs;
    uint32_t nhdrs;
    int64_t content_length; /* -1 when absent */
    uint8_t chunked;        /* Transfer-Encoding ends in chunked */
    uint8_t until_close;    /* response body delimited by connection close */
    uint8_t keep_alive;     /* the connection may carry another message after this one */
    uint8_t head_request;   /* set by the caller before feeding: response to HEAD has no body */
    uint64_t body_len;      /* body bytes delivered so far */
    st_buf body;            /* collected body when cbs->on_body is NULL */

    /* internal */
    st_http_limits lim;
    const st_http_cbs *cbs;
    void *arg;
    st_buf head;
    size_t line_start;
    uint32_t hdr_cap;
    int bstate;
    uint64_t left;
    uint32_t line_len;
    uint32_t nhex;
    size_t trailer_bytes;
};

/* cbs may be NULL (no callbacks; the body is collected). */
void st_http_parser_init(st_http_parser *p, st_http_kind kind, const st_http_limits *lim, const st_http_cbs *cbs,
                         void *arg);
/* Ready for the next message on the same connection (keeps allocations). */
void st_http_parser_reset(st_http_parser *p);
void st_http_parser_free(st_http_parser *p);
/* Consumes bytes; returns how many (stops at the end of a message), or -1 on error. */
ssize_t st_http_feed(st_http_parser *p, const char *data, size_t len);
/* The peer closed the connection. Returns 0 when that completed the message (read-until-close
 * body; state becomes DONE), 1 when no byte of a new message had arrived (a clean close
 * between messages), -1 when the message was cut short (err/errmsg set). */
int st_http_eof(st_http_parser *p);
/* Value of the first header with that name (case-insensitive), or NULL. */
const char *st_http_header(const st_http_parser *p, const char *name);
/* 1 when bytes of a message have been received (the parser is not idle between messages). */
int st_http_started(const st_http_parser *p);
const char *st_http_error_name(st_http_error e);

/* ---- serialisation ---- */

/* "Name: value" with a token name and no CR, LF or NUL anywhere: 1, else 0. */
int st_http_header_line_valid(const char *line);
/* Appends a request: "METHOD target HTTP/1.1", Host, the extra header lines (each
 * "Name: value", checked with st_http_header_line_valid), Content-Type and Content-Length
 * when body is not NULL, the blank line and the body. 0, or -1 (invalid header, buffer full). */
int st_http_write_request(st_buf *out, const char *method, const char *host, const char *target,
                          const char *const *headers, int nheaders, const char *content_type, const void *body,
                          size_t body_len);
/* Appends "HTTP/1.1 status reason" and the header lines (extra: zero or more complete
 * "Name: value\r\n" lines or NULL), without the blank line. */
int st_http_write_status(st_buf *out, int status, const char *extra);
/* Standard reason phrase ("OK", "Not Found", ...; "Unknown" otherwise). */
const char *st_http_reason(int status);
/* Appends one chunk in chunked encoding (len 0 writes nothing; use st_http_write_last_chunk). */
int st_http_write_chunk(st_buf *out, const void *data, size_t len);
int st_http_write_last_chunk(st_buf *out);

#endif
