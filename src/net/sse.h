/* Server-sent events framing, per the WHATWG HTML "event stream" interpretation:
 * lines end in CRLF, LF or CR (a CR at the end of one read followed by an LF at the start
 * of the next is one line end); a leading UTF-8 BOM is skipped; lines starting with ':' are
 * comments; "field:value" with one optional space after the colon; a line without a colon
 * is a field with an empty value; `data` lines are joined with "\n"; `event` sets the type;
 * `id` sets the last event id (ignored if it contains NUL); `retry` and unknown fields are
 * ignored; a blank line dispatches the event, unless no data line was seen.
 *
 * Pure and incremental: feed bytes as they arrive, split anywhere. Memory is bounded by
 * max_event (the longest line and the data of one event); exceeding it is an error.
 * The parser does no I/O. */
#ifndef ST_SSE_H
#define ST_SSE_H
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

typedef struct st_sse_event {
    const char *data; /* the data payload (NUL-terminated, "\n" between data lines) */
    size_t data_len;
    const char *event; /* the event type ("" when none was given) */
    const char *id;    /* the last event id ("" when none) */
} st_sse_event;

/* Return nonzero to stop: st_sse_feed then returns that value. */
typedef int (*st_sse_cb)(void *arg, const st_sse_event *ev);

typedef struct st_sse {
    st_buf line;    /* a partial line carried across reads */
    st_buf data;    /* data of the event being built */
    char event[64]; /* event type (longer types are an error) */
    char id[128];   /* last event id (longer ids are an error) */
    size_t max_event;
    uint8_t cr_pending; /* the last byte seen was CR: skip an LF that follows */
    uint8_t bom_checked;
    uint8_t has_data;
    uint8_t failed;
    uint32_t events; /* events dispatched so far */
    char errmsg[96];
} st_sse;

/* max_event: the largest line / event data, in bytes (0: 1 MiB). */
void st_sse_init(st_sse *s, size_t max_event);
/* Ready for a new stream (keeps allocations; clears the last event id). */
void st_sse_reset(st_sse *s);
void st_sse_free(st_sse *s);
/* Feeds bytes; calls cb for each complete event. 0, -1 when an event or line exceeds
 * max_event (errmsg set; the stream must be abandoned), or the callback's nonzero value. */
int st_sse_feed(st_sse *s, const char *p, size_t n, st_sse_cb cb, void *arg);
/* End of stream: 1 when a partial event (data not yet dispatched, or a partial line) was
 * pending and is discarded (as the spec says), 0 otherwise. */
int st_sse_finish(st_sse *s);

#endif
