/* SSE framer: data-driven cases fed whole, split at every offset, and byte by byte. */
#include "harness.h"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include <stdio.h>

#include "net/sse.h"

typedef struct scase {
    const char *name;
    const char *in;
    size_t in_len; /* 0: strlen */
    size_t max_event;
    int rc;             /* expected st_sse_feed result over the whole input (0 or -1) */
    const char *expect; /* dispatched events as "type|id|data" joined with "#" */
    int pending;        /* st_sse_finish result */
} scase;

static const scase cases[] = {
    { "single", "data: hello\n\n", 0, 0, 0,
      "|"
      "|hello",
      0 },
    { "no space", "data:hello\n\n", 0, 0, 0, "||hello", 0 },
    { "two spaces keep one", "data:  hello\n\n", 0, 0, 0, "|| hello", 0 },
    { "multi-line data", "data: a\ndata: b\ndata:\n\n", 0, 0, 0, "||a\nb\n", 0 },
    { "crlf", "data: x\r\n\r\ndata: y\r\n\r\n", 0, 0, 0, "||x#||y", 0 },
    { "cr only", "data: x\r\rdata: y\r\r", 0, 0, 0, "||x#||y", 0 },
    { "mixed ends", "data: a\r\ndata: b\rdata: c\n\r\n", 0, 0, 0, "||a\nb\nc", 0 },
    { "comments", ": ping\n\n:keepalive\ndata: z\n\n", 0, 0, 0, "||z", 0 },
    { "event and id", "event: error\nid: 7\ndata: {\"e\":1}\n\ndata: next\n\n", 0, 0, 0, "error|7|{\"e\":1}#|7|next",
      0 },
    { "no data no dispatch", "event: x\n\ndata: y\n\n", 0, 0, 0,
      "|"
      "|y",
      0 },
    { "field without colon", "data\n\n", 0, 0, 0, "||", 0 },
    { "unknown and retry ignored", "retry: 100\nfoo: bar\ndata: q\n\n", 0, 0, 0, "||q", 0 },
    { "colon in value", "data: a: b\n\n", 0, 0, 0, "||a: b", 0 },
    { "bom",
      "\xEF\xBB\xBF"
      "data: b\n\n",
      0, 0, 0, "||b", 0 },
    { "done marker", "data: {\"x\":1}\n\ndata: [DONE]\n\n", 0, 0, 0, "||{\"x\":1}#||[DONE]", 0 },
    { "partial event at end", "data: a\n\ndata: partial\n", 0, 0, 0, "||a", 1 },
    { "partial line at end", "data: a\n\ndata: part", 0, 0, 0, "||a", 1 },
    { "id with nul ignored", "id: 1\ndata: a\n\nid: x\0y\ndata: b\n\n", 32, 0, 0, "|1|a#|1|b", 0 },
    { "event over limit", "data: 0123456789\ndata: 0123456789\n\n", 0, 16, -1, "", 0 },
    { "line over limit", "data: 01234567890123456789\n\n", 0, 16, -1, "", 0 },
    { "unterminated long line", "data: 01234567890123456789", 0, 16, -1, "", 0 },
    { "event type too long",
      "event: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\ndata: x\n\n", 0, 0, -1, "",
      0 },
};

typedef struct sink {
    char out[4096];
    size_t len;
} sink;

static int on_event(void *arg, const st_sse_event *ev)
{
    sink *s = arg;
    int n = snprintf(s->out + s->len, sizeof s->out - s->len, "%s%s|%s|%.*s", s->len ? "#" : "", ev->event, ev->id,
                     (int)ev->data_len, ev->data);
    if (n > 0)
        s->len += (size_t)n;
    return 0;
}

static void run(const scase *c, const size_t *cuts, int ncuts, const char *how)
{
    size_t len = c->in_len ? c->in_len : strlen(c->in);
    st_sse p;
    st_sse_init(&p, c->max_event);
    sink s = { { 0 }, 0 };
    size_t pos = 0;
    int rc = 0;
    for (int k = 0; k <= ncuts && rc == 0; k++) {
        size_t end = k < ncuts ? cuts[k] : len;
        rc = st_sse_feed(&p, c->in + pos, end - pos, on_event, &s);
        pos = end;
    }
    if (rc != c->rc)
        fail_msg("%s (%s): rc %d, expected %d", c->name, how, rc, c->rc);
    if (c->rc == 0) {
        if (strcmp(s.out, c->expect))
            fail_msg("%s (%s): events '%s', expected '%s'", c->name, how, s.out, c->expect);
        int pend = st_sse_finish(&p);
        if (pend != c->pending)
            fail_msg("%s (%s): pending %d, expected %d", c->name, how, pend, c->pending);
    } else {
        assert_true(p.errmsg[0] != '\0');
        assert_int_equal(st_sse_feed(&p, "data: x\n\n", 9, on_event, &s), -1);
    }
    st_sse_free(&p);
}

static void all_cases_every_split(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const scase *c = &cases[i];
        size_t len = c->in_len ? c->in_len : strlen(c->in);
        run(c, NULL, 0, "whole");
        for (size_t k = 0; k <= len; k++) {
            size_t cut[1] = { k };
            char how[32];
            snprintf(how, sizeof how, "split at %zu", k);
            run(c, cut, 1, how);
        }
        for (size_t a = 0; a <= len; a += 3)
            for (size_t b = a; b <= len; b += 5) {
                size_t cut[2] = { a, b };
                run(c, cut, 2, "two splits");
            }
        size_t *cuts = malloc((len + 1) * sizeof *cuts);
        for (size_t k = 0; k < len; k++)
            cuts[k] = k + 1;
        run(c, cuts, (int)len, "byte by byte");
        free(cuts);
    }
}

static int stop_at_second(void *arg, const st_sse_event *ev)
{
    int *n = arg;
    return ++*n == 2 ? 42 : 0;
}

static void callback_stops_feed(void **state)
{
    (void)state;
    st_sse p;
    st_sse_init(&p, 0);
    int n = 0;
    const char *in = "data: 1\n\ndata: 2\n\ndata: 3\n\n";
    assert_int_equal(st_sse_feed(&p, in, strlen(in), stop_at_second, &n), 42);
    assert_int_equal(n, 2);
    st_sse_free(&p);
}

static void many_events_bounded_memory(void **state)
{
    (void)state;
    st_sse p;
    st_sse_init(&p, 256);
    int count = 0;
    for (int i = 0; i < 10000; i++) {
        char ev[64];
        int n = snprintf(ev, sizeof ev, "data: {\"i\":%d}\n\n", i);
        assert_int_equal(st_sse_feed(&p, ev, (size_t)n, NULL, NULL), 0);
        count++;
    }
    assert_int_equal(count, 10000);
    assert_int_equal(p.events, 10000);
    assert_true(p.data.cap <= 257 + 1 && p.line.cap <= 257);
    st_sse_free(&p);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(all_cases_every_split),
        cmocka_unit_test(callback_stops_feed),
        cmocka_unit_test(many_events_bounded_memory),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
