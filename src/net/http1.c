#include "net/http1.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { B_LENGTH = 1, B_CHUNK_SIZE, B_CHUNK_EXT, B_CHUNK_DATA, B_CHUNK_CRLF, B_TRAILER, B_CLOSE };

#define MAX_CHUNK_LINE 4096

static size_t lim_head(const st_http_parser *p) { return p->lim.max_head ? p->lim.max_head : 64 * 1024; }
static uint32_t lim_hdrs(const st_http_parser *p) { return p->lim.max_headers ? p->lim.max_headers : 100; }
static uint64_t lim_body(const st_http_parser *p)
{
    if (p->lim.max_body)
        return p->lim.max_body;
    return (p->cbs && p->cbs->on_body) ? UINT64_MAX : 1024 * 1024;
}

static ssize_t fail(st_http_parser *p, st_http_error e, const char *msg)
{
    p->state = ST_HTTP_ERROR;
    p->err = e;
    snprintf(p->errmsg, sizeof p->errmsg, "%s", msg);
    return -1;
}

const char *st_http_error_name(st_http_error e)
{
    switch (e) {
    case ST_HTTP_E_NONE: return "none";
    case ST_HTTP_E_MALFORMED: return "malformed";
    case ST_HTTP_E_TOO_LARGE: return "too_large";
    case ST_HTTP_E_ABORTED: return "aborted";
    }
    return "unknown";
}

void st_http_parser_init(st_http_parser *p, st_http_kind kind, const st_http_limits *lim, const st_http_cbs *cbs,
                         void *arg)
{
    memset(p, 0, sizeof *p);
    p->kind = kind;
    if (lim)
        p->lim = *lim;
    p->cbs = cbs;
    p->arg = arg;
    st_buf_init(&p->head, lim_head(p));
    st_buf_init(&p->body, (size_t)(lim_body(p) > (uint64_t)SIZE_MAX ? SIZE_MAX : lim_body(p)));
    p->content_length = -1;
}

void st_http_parser_reset(st_http_parser *p)
{
    st_http_kind kind = p->kind;
    st_http_limits lim = p->lim;
    const st_http_cbs *cbs = p->cbs;
    void *arg = p->arg;
    st_buf head = p->head, body = p->body;
    st_http_hdr *hdrs = p->hdrs;
    uint32_t cap = p->hdr_cap;
    memset(p, 0, sizeof *p);
    p->kind = kind;
    p->lim = lim;
    p->cbs = cbs;
    p->arg = arg;
    p->head = head;
    p->body = body;
    p->hdrs = hdrs;
    p->hdr_cap = cap;
    st_buf_reset(&p->head);
    st_buf_reset(&p->body);
    p->content_length = -1;
}

void st_http_parser_free(st_http_parser *p)
{
    st_buf_free(&p->head);
    st_buf_free(&p->body);
    free(p->hdrs);
    p->hdrs = NULL;
    p->hdr_cap = 0;
}

int st_http_started(const st_http_parser *p) { return p->state != ST_HTTP_HEAD || p->head.len > 0; }

const char *st_http_header(const st_http_parser *p, const char *name)
{
    for (uint32_t i = 0; i < p->nhdrs; i++)
        if (!strcasecmp(p->hdrs[i].name, name))
            return p->hdrs[i].value;
    return NULL;
}

static int is_tchar(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return 1;
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')
        return 1;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* Does the comma-separated list contain token tok (case-insensitive)? last: only the last one. */
static int list_has(const char *v, const char *tok, int last)
{
    size_t tl = strlen(tok);
    int found = 0;
    const char *s = v;
    while (*s) {
        while (*s == ' ' || *s == '\t' || *s == ',')
            s++;
        if (!*s)
            break;
        const char *e = s;
        while (*e && *e != ',')
            e++;
        const char *te = e;
        while (te > s && (te[-1] == ' ' || te[-1] == '\t'))
            te--;
        int m = (size_t)(te - s) == tl && !strncasecmp(s, tok, tl);
        if (last)
            found = m;
        else if (m)
            return 1;
        s = e;
    }
    return found;
}

/* The start line (s, NUL-terminated): a response's status line or a request's request line. */
static int parse_start_line(st_http_parser *p, char *s)
{
    if (p->kind == ST_HTTP_RESPONSE) {
        if (strncmp(s, "HTTP/1.", 7) || s[7] < '0' || s[7] > '9' || s[8] != ' ')
            return (int)fail(p, ST_HTTP_E_MALFORMED, "bad status line");
        p->http_minor = s[7] - '0';
        char *c = s + 9;
        if (c[0] < '1' || c[0] > '5' || c[1] < '0' || c[1] > '9' || c[2] < '0' || c[2] > '9' ||
            (c[3] != ' ' && c[3] != '\0'))
            return (int)fail(p, ST_HTTP_E_MALFORMED, "bad status code");
        p->status = (c[0] - '0') * 100 + (c[1] - '0') * 10 + (c[2] - '0');
        p->reason = c[3] ? c + 4 : c + 3;
    } else {
        char *sp1 = strchr(s, ' ');
        if (!sp1 || sp1 == s)
            return (int)fail(p, ST_HTTP_E_MALFORMED, "bad request line");
        *sp1 = '\0';
        for (char *m = s; *m; m++)
            if (!is_tchar((unsigned char)*m))
                return (int)fail(p, ST_HTTP_E_MALFORMED, "bad method");
        char *t = sp1 + 1;
        char *sp2 = strchr(t, ' ');
        if (!sp2 || sp2 == t)
            return (int)fail(p, ST_HTTP_E_MALFORMED, "bad request line");
        *sp2 = '\0';
        for (char *m = t; *m; m++)
            if ((unsigned char)*m <= 0x20 || *m == 0x7f)
                return (int)fail(p, ST_HTTP_E_MALFORMED, "bad request target");
        char *v = sp2 + 1;
        if (strncmp(v, "HTTP/1.", 7) || v[7] < '0' || v[7] > '9' || v[8] != '\0')
            return (int)fail(p, ST_HTTP_E_MALFORMED, "bad HTTP version");
        p->http_minor = v[7] - '0';
        p->method = s;
        p->target = t;
    }
    return 0;
}

/* The header lines from s to end, up to the blank line: name and value NUL-terminated in place. */
static int parse_header_lines(st_http_parser *p, char *s, char *end)
{
    uint32_t cap = lim_hdrs(p);
    if (!p->hdrs) {
        p->hdr_cap = 8;
        p->hdrs = malloc(p->hdr_cap * sizeof *p->hdrs);
        if (!p->hdrs)
            return (int)fail(p, ST_HTTP_E_TOO_LARGE, "out of memory");
    }
    while (s < end) {
        char *nl = memchr(s, '\n', (size_t)(end - s));
        if (!nl)
            break;
        char *le = nl;
        if (le > s && le[-1] == '\r')
            le--;
        if (le == s)
            break; /* the blank line */
        *le = '\0';
        if (*s == ' ' || *s == '\t')
            return (int)fail(p, ST_HTTP_E_MALFORMED, "obsolete header line folding");
        char *colon = s;
        while (*colon && is_tchar((unsigned char)*colon))
            colon++;
        if (*colon != ':' || colon == s)
            return (int)fail(p, ST_HTTP_E_MALFORMED, "bad header line");
        *colon = '\0';
        char *v = colon + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        char *ve = le;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
            ve--;
        *ve = '\0';
        for (char *c = v; *c; c++)
            if ((unsigned char)*c < 0x20 && *c != '\t')
                return (int)fail(p, ST_HTTP_E_MALFORMED, "control character in header value");
        if (p->nhdrs >= cap)
            return (int)fail(p, ST_HTTP_E_TOO_LARGE, "too many header fields");
        if (p->nhdrs == p->hdr_cap) {
            uint32_t nc = p->hdr_cap * 2 > cap ? cap : p->hdr_cap * 2;
            st_http_hdr *h = realloc(p->hdrs, nc * sizeof *h);
            if (!h)
                return (int)fail(p, ST_HTTP_E_TOO_LARGE, "out of memory");
            p->hdrs = h;
            p->hdr_cap = nc;
        }
        p->hdrs[p->nhdrs].name = s;
        p->hdrs[p->nhdrs].value = v;
        p->nhdrs++;
        s = nl + 1;
    }
    return 0;
}

/* The message's framing from its headers: Content-Length, chunked, until close, keep-alive. */
static int parse_framing(st_http_parser *p)
{
    int te = 0, close = 0, ka = 0;
    for (uint32_t i = 0; i < p->nhdrs; i++) {
        const char *n = p->hdrs[i].name, *v = p->hdrs[i].value;
        if (!strcasecmp(n, "content-length")) {
            if (!*v || strlen(v) > 18)
                return (int)fail(p, ST_HTTP_E_MALFORMED, "bad Content-Length");
            int64_t cl = 0;
            for (const char *c = v; *c; c++) {
                if (*c < '0' || *c > '9')
                    return (int)fail(p, ST_HTTP_E_MALFORMED, "bad Content-Length");
                cl = cl * 10 + (*c - '0');
            }
            if (p->content_length >= 0 && p->content_length != cl)
                return (int)fail(p, ST_HTTP_E_MALFORMED, "conflicting Content-Length");
            p->content_length = cl;
        } else if (!strcasecmp(n, "transfer-encoding")) {
            te = 1;
            p->chunked = (uint8_t)list_has(v, "chunked", 1);
        } else if (!strcasecmp(n, "connection")) {
            close |= list_has(v, "close", 0);
            ka |= list_has(v, "keep-alive", 0);
        }
    }
    p->keep_alive = (uint8_t)(p->http_minor >= 1 ? !close : (ka && !close));
    if (p->kind == ST_HTTP_REQUEST) {
        if (te && !p->chunked)
            return (int)fail(p, ST_HTTP_E_MALFORMED, "unsupported Transfer-Encoding");
        if (te && p->content_length >= 0)
            return (int)fail(p, ST_HTTP_E_MALFORMED, "both Transfer-Encoding and Content-Length");
    } else if (te && !p->chunked) {
        p->until_close = 1;
    }
    return 0;
}

/* Splits head into lines (terminated by LF, optional CR before it), NUL-terminating parts. */
static int parse_head(st_http_parser *p)
{
    char *s = p->head.data;
    char *end = s + p->head.len;
    /* first line */
    char *nl = memchr(s, '\n', (size_t)(end - s));
    if (!nl)
        return (int)fail(p, ST_HTTP_E_MALFORMED, "no start line");
    char *le = nl;
    if (le > s && le[-1] == '\r')
        le--;
    *le = '\0';
    if (parse_start_line(p, s))
        return -1;
    if (parse_header_lines(p, nl + 1, end))
        return -1;
    return parse_framing(p);
}

static int no_body(const st_http_parser *p)
{
    if (p->kind == ST_HTTP_REQUEST)
        return !p->chunked && p->content_length <= 0;
    return p->head_request || p->status == 204 || p->status == 304 || (p->status >= 100 && p->status < 200);
}

/* Called when the blank line ending the head has been buffered. 0 or -1. */
static int head_complete(st_http_parser *p)
{
    if (parse_head(p) < 0)
        return -1;
    if (p->kind == ST_HTTP_RESPONSE && p->status >= 100 && p->status < 200 && p->status != 101) {
        /* interim response: drop it and read the real one */
        uint8_t hr = p->head_request;
        st_http_parser_reset(p);
        p->head_request = hr;
        return 0;
    }
    if (p->cbs && p->cbs->on_head && p->cbs->on_head(p->arg, p)) {
        fail(p, ST_HTTP_E_ABORTED, "aborted by the head callback");
        return -1;
    }
    if (p->state == ST_HTTP_ERROR)
        return -1;
    if (no_body(p)) {
        p->state = ST_HTTP_DONE;
        return 0;
    }
    p->state = ST_HTTP_BODY;
    if (p->chunked) {
        p->bstate = B_CHUNK_SIZE;
        p->left = 0;
        p->nhex = 0;
        p->line_len = 0;
    } else if (p->content_length >= 0 && !p->until_close) {
        if ((uint64_t)p->content_length > lim_body(p)) {
            fail(p, ST_HTTP_E_TOO_LARGE, "body over its limit");
            return -1;
        }
        p->bstate = B_LENGTH;
        p->left = (uint64_t)p->content_length;
        if (p->left == 0)
            p->state = ST_HTTP_DONE;
    } else {
        p->until_close = 1;
        p->keep_alive = 0;
        p->bstate = B_CLOSE;
    }
    return 0;
}

static int deliver(st_http_parser *p, const char *d, size_t n)
{
    if (n == 0)
        return 0;
    if (p->body_len + n > lim_body(p) || p->body_len + n < p->body_len) {
        fail(p, ST_HTTP_E_TOO_LARGE, "body over its limit");
        return -1;
    }
    p->body_len += n;
    if (p->cbs && p->cbs->on_body) {
        if (p->cbs->on_body(p->arg, d, n)) {
            fail(p, ST_HTTP_E_ABORTED, "aborted by the body callback");
            return -1;
        }
        if (p->state == ST_HTTP_ERROR)
            return -1;
        return 0;
    }
    if (st_buf_append(&p->body, d, n) < 0) {
        fail(p, ST_HTTP_E_TOO_LARGE, "body over its limit");
        return -1;
    }
    return 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)(c | 0x20);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* One byte of a chunk's size line (hex digits, then an optional extension, up to LF). 0, or -1. */
static int chunk_size_byte(st_http_parser *p, char c)
{
    if (++p->line_len > MAX_CHUNK_LINE)
        return (int)fail(p, ST_HTTP_E_TOO_LARGE, "chunk size line over its limit");
    if (c == '\n') {
        if (p->nhex == 0)
            return (int)fail(p, ST_HTTP_E_MALFORMED, "bad chunk size");
        p->line_len = 0;
        if (p->left == 0) {
            p->bstate = B_TRAILER;
        } else {
            if (p->body_len + p->left > lim_body(p) || p->body_len + p->left < p->body_len)
                return (int)fail(p, ST_HTTP_E_TOO_LARGE, "body over its limit");
            p->bstate = B_CHUNK_DATA;
        }
        return 0;
    }
    if (p->bstate == B_CHUNK_SIZE) {
        int h = hexval(c);
        if (h >= 0) {
            if (++p->nhex > 15)
                return (int)fail(p, ST_HTTP_E_TOO_LARGE, "chunk size too large");
            p->left = p->left * 16 + (uint64_t)h;
            return 0;
        }
        if (p->nhex == 0)
            return (int)fail(p, ST_HTTP_E_MALFORMED, "bad chunk size");
        if (c == ';' || c == ' ' || c == '\t' || c == '\r') {
            p->bstate = B_CHUNK_EXT;
            return 0;
        }
        return (int)fail(p, ST_HTTP_E_MALFORMED, "bad chunk size");
    }
    /* extension: any visible text until the line end */
    if ((unsigned char)c < 0x20 && c != '\t' && c != '\r')
        return (int)fail(p, ST_HTTP_E_MALFORMED, "bad chunk extension");
    return 0;
}

ssize_t st_http_feed(st_http_parser *p, const char *data, size_t len)
{
    size_t i = 0;
    if (p->state == ST_HTTP_ERROR)
        return -1;
    while (i < len && p->state != ST_HTTP_DONE) {
        if (p->state == ST_HTTP_HEAD) {
            if (p->head.len == 0 && data[i] != '\r' && data[i] != '\n' &&
                (p->kind == ST_HTTP_RESPONSE ? data[i] != 'H' : !is_tchar((unsigned char)data[i])))
                return fail(p, ST_HTTP_E_MALFORMED,
                            p->kind == ST_HTTP_RESPONSE ? "not an HTTP response" : "not an HTTP request");
            const char *nl = memchr(data + i, '\n', len - i);
            size_t n = nl ? (size_t)(nl - (data + i)) + 1 : len - i;
            if (st_buf_append(&p->head, data + i, n) < 0)
                return fail(p, ST_HTTP_E_TOO_LARGE, "header block over its limit");
            i += n;
            if (!nl)
                break;
            size_t ll = p->head.len - p->line_start; /* includes the LF */
            int blank = ll == 1 || (ll == 2 && p->head.data[p->line_start] == '\r');
            if (blank && p->line_start == 0) {
                st_buf_reset(&p->head); /* empty lines before a message are ignored */
                continue;
            }
            if (blank) {
                if (head_complete(p) < 0)
                    return -1;
                continue;
            }
            p->line_start = p->head.len;
            continue;
        }
        /* body */
        size_t avail = len - i;
        switch (p->bstate) {
        case B_LENGTH: {
            size_t n = avail < p->left ? avail : (size_t)p->left;
            if (deliver(p, data + i, n) < 0)
                return -1;
            i += n;
            p->left -= n;
            if (p->left == 0)
                p->state = ST_HTTP_DONE;
            break;
        }
        case B_CLOSE:
            if (deliver(p, data + i, avail) < 0)
                return -1;
            i += avail;
            break;
        case B_CHUNK_SIZE:
        case B_CHUNK_EXT:
            if (chunk_size_byte(p, data[i++]) < 0)
                return -1;
            break;
        case B_CHUNK_DATA: {
            size_t n = avail < p->left ? avail : (size_t)p->left;
            if (deliver(p, data + i, n) < 0)
                return -1;
            i += n;
            p->left -= n;
            if (p->left == 0) {
                p->bstate = B_CHUNK_CRLF;
                p->line_len = 0;
            }
            break;
        }
        case B_CHUNK_CRLF: {
            char c = data[i++];
            if (c == '\r' && p->line_len == 0) {
                p->line_len = 1;
            } else if (c == '\n') {
                p->bstate = B_CHUNK_SIZE;
                p->line_len = 0;
                p->nhex = 0;
                p->left = 0;
            } else {
                return fail(p, ST_HTTP_E_MALFORMED, "missing CRLF after chunk data");
            }
            break;
        }
        case B_TRAILER: {
            const char *nl = memchr(data + i, '\n', avail);
            size_t n = nl ? (size_t)(nl - (data + i)) + 1 : avail;
            p->trailer_bytes += n;
            if (p->trailer_bytes > lim_head(p))
                return fail(p, ST_HTTP_E_TOO_LARGE, "trailers over their limit");
            /* line_len counts non-CR bytes of the current trailer line */
            for (size_t k = 0; k < n; k++)
                if (data[i + k] != '\r' && data[i + k] != '\n')
                    p->line_len++;
            i += n;
            if (nl) {
                if (p->line_len == 0)
                    p->state = ST_HTTP_DONE;
                p->line_len = 0;
            }
            break;
        }
        default: return fail(p, ST_HTTP_E_MALFORMED, "internal state");
        }
    }
    return (ssize_t)i;
}

int st_http_eof(st_http_parser *p)
{
    if (p->state == ST_HTTP_DONE)
        return 0;
    if (p->state == ST_HTTP_HEAD && p->head.len == 0)
        return 1;
    if (p->state == ST_HTTP_BODY && p->bstate == B_CLOSE) {
        p->state = ST_HTTP_DONE;
        return 0;
    }
    if (p->state != ST_HTTP_ERROR)
        fail(p, ST_HTTP_E_MALFORMED,
             p->state == ST_HTTP_HEAD ? "connection closed inside the header block"
                                      : "connection closed before the end of the body");
    return -1;
}

/* ---- serialisation ---- */

int st_http_header_line_valid(const char *line)
{
    const char *c = line;
    while (*c && is_tchar((unsigned char)*c))
        c++;
    if (c == line || *c != ':')
        return 0;
    for (; *c; c++)
        if (*c == '\r' || *c == '\n')
            return 0;
    return 1;
}

static int put_dec(st_buf *b, size_t v)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[sizeof tmp - 1 - n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return st_buf_append(b, tmp + sizeof tmp - n, (size_t)n);
}

int st_http_write_request(st_buf *out, const char *method, const char *host, const char *target,
                          const char *const *headers, int nheaders, const char *content_type, const void *body,
                          size_t body_len)
{
    size_t mark = out->len;
    for (int i = 0; i < nheaders; i++)
        if (!st_http_header_line_valid(headers[i]))
            return -1;
    if (strpbrk(target, " \r\n") || strpbrk(host, " \r\n"))
        return -1;
    /* plain appends: this runs once per request on the load generator's hot path */
    int rc = st_buf_puts(out, method) | st_buf_append(out, " ", 1) | st_buf_puts(out, target) |
             st_buf_append(out, " HTTP/1.1\r\nHost: ", 17) | st_buf_puts(out, host) | st_buf_append(out, "\r\n", 2);
    for (int i = 0; rc == 0 && i < nheaders; i++)
        rc = st_buf_puts(out, headers[i]) | st_buf_append(out, "\r\n", 2);
    if (rc == 0 && body) {
        if (content_type)
            rc = st_buf_append(out, "Content-Type: ", 14) | st_buf_puts(out, content_type) |
                 st_buf_append(out, "\r\n", 2);
        if (rc == 0)
            rc = st_buf_append(out, "Content-Length: ", 16) | put_dec(out, body_len) | st_buf_append(out, "\r\n", 2);
    }
    if (rc == 0)
        rc = st_buf_append(out, "\r\n", 2);
    if (rc == 0 && body && body_len)
        rc = st_buf_append(out, body, body_len);
    if (rc < 0 || rc != 0) {
        out->len = mark;
        if (out->data)
            out->data[mark] = '\0';
        return -1;
    }
    return 0;
}

const char *st_http_reason(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    }
    return "Unknown";
}

int st_http_write_status(st_buf *out, int status, const char *extra)
{
    if (st_buf_printf(out, "HTTP/1.1 %d %s\r\n", status, st_http_reason(status)) < 0)
        return -1;
    return extra ? st_buf_puts(out, extra) : 0;
}

int st_http_write_chunk(st_buf *out, const void *data, size_t len)
{
    if (len == 0)
        return 0;
    size_t mark = out->len;
    if (st_buf_printf(out, "%zx\r\n", len) < 0 || st_buf_append(out, data, len) < 0 ||
        st_buf_append(out, "\r\n", 2) < 0) {
        out->len = mark;
        if (out->data)
            out->data[mark] = '\0';
        return -1;
    }
    return 0;
}

int st_http_write_last_chunk(st_buf *out) { return st_buf_append(out, "0\r\n\r\n", 5); }
