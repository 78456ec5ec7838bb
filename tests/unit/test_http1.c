/* HTTP/1.1 parser: data-driven cases, each fed whole, split at every byte offset, and one
 * byte at a time; every split must give the same result. */
#include "harness.h"

#include <stdio.h>

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include "net/http1.h"

typedef struct hcase {
    const char *name;
    st_http_kind kind;
    const char *in;
    int eof;           /* call st_http_eof after the input */
    int ok;            /* 1: message complete; 0: error expected */
    st_http_error err; /* expected error */
    int status;
    const char *body;
    int keep_alive;
    size_t max_head;
    uint32_t max_headers;
    uint64_t max_body;
    int collect; /* no body callback: the parser collects */
} hcase;

static const hcase cases[] = {
    { "content-length", ST_HTTP_RESPONSE, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 0, 1, 0, 200, "hello",
      1 },
    { "chunked+ext+trailer", ST_HTTP_RESPONSE,
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1;q=\"a b\"\r\nhello\r\n6\r\n "
      "world\r\n0\r\nX-Trailer: x\r\nY: z\r\n\r\n",
      0, 1, 0, 200, "hello world", 1 },
    { "chunked hex upper/lower", ST_HTTP_RESPONSE,
      "HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, Chunked\r\n\r\nA\r\n0123456789\r\na \r\nabcdefghij\r\n0\r\n\r\n", 0,
      1, 0, 200, "0123456789abcdefghij", 1 },
    { "chunked lf only", ST_HTTP_RESPONSE, "HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n3\nabc\n0\n\n", 0, 1, 0, 200,
      "abc", 1 },
    { "lf line ends", ST_HTTP_RESPONSE, "HTTP/1.1 201 Created\nContent-Length: 2\n\nhi", 0, 1, 0, 201, "hi", 1 },
    { "until close", ST_HTTP_RESPONSE, "HTTP/1.0 200 OK\r\n\r\nabc", 1, 1, 0, 200, "abc", 0 },
    { "until close 1.1", ST_HTTP_RESPONSE, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: x\n\n", 1,
      1, 0, 200, "data: x\n\n", 0 },
    { "te not chunked = close", ST_HTTP_RESPONSE,
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 1\r\n\r\nxyz", 1, 1, 0, 200, "xyz", 0 },
    { "204 no body", ST_HTTP_RESPONSE, "HTTP/1.1 204 No Content\r\n\r\n", 0, 1, 0, 204, "", 1 },
    { "304 no body", ST_HTTP_RESPONSE, "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n", 0, 1, 0, 304, "", 1 },
    { "100 continue skipped", ST_HTTP_RESPONSE,
      "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx", 0, 1, 0, 200, "x", 1 },
    { "connection close", ST_HTTP_RESPONSE,
      "HTTP/1.1 500 Oops\r\nConnection: keep-alive, close\r\nContent-Length: 3\r\n\r\nerr", 0, 1, 0, 500, "err", 0 },
    { "1.0 keep-alive", ST_HTTP_RESPONSE, "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n", 0,
      1, 0, 200, "", 1 },
    { "no reason phrase", ST_HTTP_RESPONSE, "HTTP/1.1 200\r\nContent-Length: 1\r\n\r\nz", 0, 1, 0, 200, "z", 1 },
    { "same cl twice", ST_HTTP_RESPONSE, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nz", 0, 1, 0,
      200, "z", 1 },
    { "leading blank lines", ST_HTTP_RESPONSE, "\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nz", 0, 1, 0, 200,
      "z", 1 },
    { "empty header value", ST_HTTP_RESPONSE, "HTTP/1.1 200 OK\r\nX-Empty:\r\nX-Sp:   \r\nContent-Length: 0\r\n\r\n", 0,
      1, 0, 200, "", 1 },
    /* errors */
    { "http/2 status line", ST_HTTP_RESPONSE, "HTTP/2 200 OK\r\n\r\n", 0, 0, ST_HTTP_E_MALFORMED },
    { "short status", ST_HTTP_RESPONSE, "HTTP/1.1 20 OK\r\n\r\n", 0, 0, ST_HTTP_E_MALFORMED },
    { "status 600", ST_HTTP_RESPONSE, "HTTP/1.1 600 X\r\n\r\n", 0, 0, ST_HTTP_E_MALFORMED },
    { "garbage", ST_HTTP_RESPONSE, "hello world\r\n\r\n", 0, 0, ST_HTTP_E_MALFORMED },
    { "bad content-length", ST_HTTP_RESPONSE, "HTTP/1.1 200 OK\r\nContent-Length: 12a\r\n\r\n", 0, 0,
      ST_HTTP_E_MALFORMED },
    { "negative content-length", ST_HTTP_RESPONSE, "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", 0, 0,
      ST_HTTP_E_MALFORMED },
    { "huge content-length", ST_HTTP_RESPONSE, "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n", 0, 0,
      ST_HTTP_E_MALFORMED },
    { "conflicting cl", ST_HTTP_RESPONSE, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nzz", 0, 0,
      ST_HTTP_E_MALFORMED },
    { "obs-fold", ST_HTTP_RESPONSE, "HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n", 0, 0, ST_HTTP_E_MALFORMED },
    { "space before colon", ST_HTTP_RESPONSE, "HTTP/1.1 200 OK\r\nX : a\r\n\r\n", 0, 0, ST_HTTP_E_MALFORMED },
    { "no colon", ST_HTTP_RESPONSE, "HTTP/1.1 200 OK\r\nXa\r\n\r\n", 0, 0, ST_HTTP_E_MALFORMED },
    { "ctl in value", ST_HTTP_RESPONSE, "HTTP/1.1 200 OK\r\nX: a\x01\r\n\r\n", 0, 0, ST_HTTP_E_MALFORMED },
    { "bad chunk size", ST_HTTP_RESPONSE, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 0, 0,
      ST_HTTP_E_MALFORMED },
    { "empty chunk size", ST_HTTP_RESPONSE, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n", 0, 0,
      ST_HTTP_E_MALFORMED },
    { "chunk without crlf", ST_HTTP_RESPONSE, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloX\r\n", 0,
      0, ST_HTTP_E_MALFORMED },
    { "chunk size overflow", ST_HTTP_RESPONSE,
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1234567890abcdef0\r\n", 0, 0, ST_HTTP_E_TOO_LARGE },
    { "head too large", ST_HTTP_RESPONSE,
      "HTTP/1.1 200 OK\r\nX-Long: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n", 0, 0,
      ST_HTTP_E_TOO_LARGE, 0, NULL, 0, 48 },
    { "too many headers", ST_HTTP_RESPONSE, "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", 0, 0,
      ST_HTTP_E_TOO_LARGE, 0, NULL, 0, 0, 2 },
    { "cl body too large", ST_HTTP_RESPONSE, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 0, 0,
      ST_HTTP_E_TOO_LARGE, 0, NULL, 0, 0, 0, 3 },
    { "chunked body too large", ST_HTTP_RESPONSE,
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n2\r\ncd\r\n0\r\n\r\n", 0, 0, ST_HTTP_E_TOO_LARGE,
      0, NULL, 0, 0, 0, 3 },
    { "close body too large", ST_HTTP_RESPONSE, "HTTP/1.0 200 OK\r\n\r\nabcdef", 1, 0, ST_HTTP_E_TOO_LARGE, 0, NULL, 0,
      0, 0, 3 },
    { "trailers too large", ST_HTTP_RESPONSE,
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: "
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n",
      0, 0, ST_HTTP_E_TOO_LARGE, 0, NULL, 0, 64 },
    { "eof mid body", ST_HTTP_RESPONSE, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel", 1, 0, ST_HTTP_E_MALFORMED },
    { "eof mid chunk", ST_HTTP_RESPONSE, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", 1, 0,
      ST_HTTP_E_MALFORMED },
    { "eof in head", ST_HTTP_RESPONSE, "HTTP/1.1 200 OK\r\nContent-Len", 1, 0, ST_HTTP_E_MALFORMED },
    /* requests */
    { "post body", ST_HTTP_REQUEST, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nabcd", 0, 1,
      0, 0, "abcd", 1, 0, 0, 0, 1 },
    { "get no body", ST_HTTP_REQUEST, "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n", 0, 1, 0, 0, "", 1, 0, 0, 0, 1 },
    { "chunked request", ST_HTTP_REQUEST, "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
      0, 1, 0, 0, "abc", 1, 0, 0, 0, 1 },
    { "1.0 request", ST_HTTP_REQUEST, "GET / HTTP/1.0\r\n\r\n", 0, 1, 0, 0, "", 0, 0, 0, 0, 1 },
    { "request te+cl", ST_HTTP_REQUEST, "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 0,
      0, ST_HTTP_E_MALFORMED },
    { "request te gzip", ST_HTTP_REQUEST, "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 0, 0,
      ST_HTTP_E_MALFORMED },
    { "request http/2", ST_HTTP_REQUEST, "GET / HTTP/2.0\r\n\r\n", 0, 0, ST_HTTP_E_MALFORMED },
    { "request bad method", ST_HTTP_REQUEST, "G(T / HTTP/1.1\r\n\r\n", 0, 0, ST_HTTP_E_MALFORMED },
    { "request no target", ST_HTTP_REQUEST, "GET  HTTP/1.1\r\n\r\n", 0, 0, ST_HTTP_E_MALFORMED },
    { "request body too large", ST_HTTP_REQUEST, "POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123456789", 0, 0,
      ST_HTTP_E_TOO_LARGE, 0, NULL, 0, 0, 0, 5, 1 },
    { "request chunked too large", ST_HTTP_REQUEST,
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n", 0, 0,
      ST_HTTP_E_TOO_LARGE, 0, NULL, 0, 0, 0, 5, 1 },
};

typedef struct result {
    int ok;
    st_http_error err;
    int status;
    int keep_alive;
    char body[256];
    size_t body_len;
} result;

static int on_body(void *arg, const char *d, size_t n)
{
    st_buf *b = arg;
    return st_buf_append(b, d, n) < 0;
}

static const st_http_cbs body_cbs = { NULL, on_body };

/* Feeds the input in pieces of the given boundaries; returns the result. */
static void run(const hcase *c, const size_t *cuts, int ncuts, result *r)
{
    st_http_limits lim = { c->max_head, c->max_headers, c->max_body };
    st_http_parser p;
    st_buf body;
    st_buf_init(&body, 4096);
    st_http_parser_init(&p, c->kind, &lim, c->collect ? NULL : &body_cbs, &body);
    size_t len = strlen(c->in), pos = 0;
    memset(r, 0, sizeof *r);
    int failed = 0;
    for (int k = 0; k <= ncuts && !failed; k++) {
        size_t end = k < ncuts ? cuts[k] : len;
        int guard = 0;
        while (pos < end && p.state != ST_HTTP_DONE) {
            ssize_t n = st_http_feed(&p, c->in + pos, end - pos);
            if (n < 0) {
                failed = 1;
                break;
            }
            pos += (size_t)n;
            assert_true(++guard < 10000);
        }
        if (p.state == ST_HTTP_DONE)
            break;
    }
    if (!failed && p.state != ST_HTTP_DONE && c->eof)
        failed = st_http_eof(&p) < 0;
    r->ok = !failed && p.state == ST_HTTP_DONE;
    r->err = p.err;
    r->status = p.status;
    r->keep_alive = p.keep_alive;
    const st_buf *src = c->collect ? &p.body : &body;
    if (r->ok && src->len < sizeof r->body) {
        memcpy(r->body, src->data ? src->data : "", src->len);
        r->body_len = src->len;
    }
    st_http_parser_free(&p);
    st_buf_free(&body);
}

static void check(const hcase *c, const result *r, const char *how)
{
    if (c->ok) {
        if (!r->ok)
            fail_msg("%s (%s): expected success, got error %s", c->name, how, st_http_error_name(r->err));
        if (c->kind == ST_HTTP_RESPONSE && r->status != c->status)
            fail_msg("%s (%s): status %d, expected %d", c->name, how, r->status, c->status);
        if (r->body_len != strlen(c->body) || memcmp(r->body, c->body, r->body_len))
            fail_msg("%s (%s): body '%.*s', expected '%s'", c->name, how, (int)r->body_len, r->body, c->body);
        if (r->keep_alive != c->keep_alive)
            fail_msg("%s (%s): keep_alive %d, expected %d", c->name, how, r->keep_alive, c->keep_alive);
    } else {
        if (r->ok)
            fail_msg("%s (%s): expected error %s, parse succeeded", c->name, how, st_http_error_name(c->err));
        if (r->err != c->err)
            fail_msg("%s (%s): error %s, expected %s", c->name, how, st_http_error_name(r->err),
                     st_http_error_name(c->err));
    }
}

static void all_cases_every_split(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const hcase *c = &cases[i];
        size_t len = strlen(c->in);
        result r;
        run(c, NULL, 0, &r);
        check(c, &r, "whole");
        for (size_t k = 0; k <= len; k++) {
            size_t cut[1] = { k };
            run(c, cut, 1, &r);
            char how[32];
            snprintf(how, sizeof how, "split at %zu", k);
            check(c, &r, how);
        }
        size_t *cuts = malloc(len * sizeof *cuts);
        for (size_t k = 0; k < len; k++)
            cuts[k] = k + 1;
        run(c, cuts, (int)len, &r);
        check(c, &r, "byte by byte");
        free(cuts);
    }
}

static void request_fields_and_pipelining(void **state)
{
    (void)state;
    const char *in = "POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: localhost:8000\r\nAuthorization: Bearer k\r\n"
                     "content-length: 2\r\n\r\n{}GET /health HTTP/1.1\r\nConnection: close\r\n\r\n";
    st_http_parser p;
    st_http_parser_init(&p, ST_HTTP_REQUEST, NULL, NULL, NULL);
    size_t len = strlen(in);
    ssize_t n = st_http_feed(&p, in, len);
    assert_true(n > 0 && (size_t)n < len);
    assert_int_equal(p.state, ST_HTTP_DONE);
    assert_string_equal(p.method, "POST");
    assert_string_equal(p.target, "/v1/chat/completions?x=1");
    assert_string_equal(st_http_header(&p, "HOST"), "localhost:8000");
    assert_string_equal(st_http_header(&p, "authorization"), "Bearer k");
    assert_null(st_http_header(&p, "x-missing"));
    assert_int_equal(p.body.len, 2);
    assert_string_equal(p.body.data, "{}");
    assert_int_equal(p.keep_alive, 1);
    st_http_parser_reset(&p);
    ssize_t n2 = st_http_feed(&p, in + n, len - (size_t)n);
    assert_int_equal(n2, (ssize_t)(len - (size_t)n));
    assert_int_equal(p.state, ST_HTTP_DONE);
    assert_string_equal(p.method, "GET");
    assert_string_equal(p.target, "/health");
    assert_int_equal(p.keep_alive, 0);
    st_http_parser_reset(&p);
    assert_int_equal(st_http_eof(&p), 1); /* clean close between messages */
    st_http_parser_free(&p);
}

static void response_keepalive_sequence(void **state)
{
    (void)state;
    /* two responses back to back on one connection: the first stops at its end */
    const char *in = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcHTTP/1.1 404 Not Found\r\nTransfer-Encoding: "
                     "chunked\r\n\r\n1\r\nz\r\n0\r\n\r\n";
    st_http_parser p;
    st_http_parser_init(&p, ST_HTTP_RESPONSE, NULL, NULL, NULL);
    size_t len = strlen(in);
    ssize_t n = st_http_feed(&p, in, len);
    assert_int_equal(n, 41);
    assert_int_equal(p.status, 200);
    assert_string_equal(p.reason, "OK");
    assert_string_equal(p.body.data, "abc");
    st_http_parser_reset(&p);
    assert_int_equal(st_http_started(&p), 0);
    n = st_http_feed(&p, in + 41, len - 41);
    assert_int_equal(n, (ssize_t)(len - 41));
    assert_int_equal(p.status, 404);
    assert_string_equal(p.reason, "Not Found");
    assert_string_equal(p.body.data, "z");
    st_http_parser_free(&p);
}

static int abort_head(void *arg, st_http_parser *p) { return p->status != 200; }

static void callbacks_can_abort(void **state)
{
    (void)state;
    st_http_cbs cbs = { abort_head, NULL };
    st_http_parser p;
    st_http_parser_init(&p, ST_HTTP_RESPONSE, NULL, &cbs, NULL);
    const char *in = "HTTP/1.1 500 X\r\nContent-Length: 1\r\n\r\nx";
    assert_int_equal(st_http_feed(&p, in, strlen(in)), -1);
    assert_int_equal(p.err, ST_HTTP_E_ABORTED);
    assert_int_equal(st_http_feed(&p, "x", 1), -1); /* stays failed */
    st_http_parser_free(&p);
}

static void head_response_has_no_body(void **state)
{
    (void)state;
    st_http_parser p;
    st_http_parser_init(&p, ST_HTTP_RESPONSE, NULL, NULL, NULL);
    p.head_request = 1;
    const char *in = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n";
    assert_int_equal(st_http_feed(&p, in, strlen(in)), (ssize_t)strlen(in));
    assert_int_equal(p.state, ST_HTTP_DONE);
    st_http_parser_free(&p);
}

static void serialisation(void **state)
{
    (void)state;
    st_buf b;
    st_buf_init(&b, 4096);
    const char *hdrs[] = { "Authorization: Bearer x", "X-A: 1" };
    assert_int_equal(st_http_write_request(&b, "POST", "h:1", "/v1/x", hdrs, 2, "application/json", "{}", 2), 0);
    assert_string_equal(b.data, "POST /v1/x HTTP/1.1\r\nHost: h:1\r\nAuthorization: Bearer x\r\nX-A: 1\r\n"
                                "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}");
    /* round trip through the request parser */
    st_http_parser p;
    st_http_parser_init(&p, ST_HTTP_REQUEST, NULL, NULL, NULL);
    assert_int_equal(st_http_feed(&p, b.data, b.len), (ssize_t)b.len);
    assert_int_equal(p.state, ST_HTTP_DONE);
    assert_string_equal(st_http_header(&p, "x-a"), "1");
    st_http_parser_free(&p);
    /* header injection refused, buffer unchanged */
    size_t before = b.len;
    const char *bad[] = { "X: a\r\nEvil: 1" };
    assert_int_equal(st_http_write_request(&b, "GET", "h", "/", bad, 1, NULL, NULL, 0), -1);
    assert_int_equal(b.len, before);
    const char *bad2[] = { "NoColon" };
    assert_int_equal(st_http_write_request(&b, "GET", "h", "/", bad2, 1, NULL, NULL, 0), -1);
    assert_int_equal(st_http_header_line_valid("X-Ok: fine value"), 1);
    assert_int_equal(st_http_header_line_valid(": v"), 0);
    st_buf_reset(&b);
    assert_int_equal(st_http_write_chunk(&b, "hello", 5), 0);
    assert_int_equal(st_http_write_chunk(&b, "0123456789abcdef0", 17), 0);
    assert_int_equal(st_http_write_last_chunk(&b), 0);
    assert_string_equal(b.data, "5\r\nhello\r\n11\r\n0123456789abcdef0\r\n0\r\n\r\n");
    st_buf_reset(&b);
    assert_int_equal(st_http_write_status(&b, 429, "Retry-After: 1\r\n"), 0);
    assert_string_equal(b.data, "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\n");
    st_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(all_cases_every_split),       cmocka_unit_test(request_fields_and_pipelining),
        cmocka_unit_test(response_keepalive_sequence), cmocka_unit_test(callbacks_can_abort),
        cmocka_unit_test(head_response_has_no_body),   cmocka_unit_test(serialisation),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
