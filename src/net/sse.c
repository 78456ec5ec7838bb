#include "net/sse.h"

#include <stdio.h>
#include <string.h>

void st_sse_init(st_sse *s, size_t max_event)
{
    memset(s, 0, sizeof *s);
    s->max_event = max_event ? max_event : 1024 * 1024;
    st_buf_init(&s->line, s->max_event);
    st_buf_init(&s->data, s->max_event + 1); /* + the trailing LF before it is removed */
}

void st_sse_reset(st_sse *s)
{
    st_buf_reset(&s->line);
    st_buf_reset(&s->data);
    s->event[0] = s->id[0] = '\0';
    s->cr_pending = s->bom_checked = s->has_data = s->failed = 0;
    s->events = 0;
    s->errmsg[0] = '\0';
}

void st_sse_free(st_sse *s)
{
    st_buf_free(&s->line);
    st_buf_free(&s->data);
}

static int sse_fail(st_sse *s, const char *msg)
{
    s->failed = 1;
    snprintf(s->errmsg, sizeof s->errmsg, "%s", msg);
    return -1;
}

static int dispatch(st_sse *s, st_sse_cb cb, void *arg)
{
    if (!s->has_data) {
        s->event[0] = '\0';
        return 0;
    }
    /* remove the LF appended after the last data line */
    if (s->data.len > 0 && s->data.data[s->data.len - 1] == '\n')
        s->data.data[--s->data.len] = '\0';
    st_sse_event ev = { s->data.data ? s->data.data : "", s->data.len, s->event, s->id };
    s->events++;
    int rc = cb ? cb(arg, &ev) : 0;
    st_buf_reset(&s->data);
    s->has_data = 0;
    s->event[0] = '\0';
    return rc;
}

/* Processes one complete line (without its end). */
static int line(st_sse *s, const char *l, size_t n, st_sse_cb cb, void *arg)
{
    if (n == 0)
        return dispatch(s, cb, arg);
    if (l[0] == ':')
        return 0;
    const char *colon = memchr(l, ':', n);
    size_t fl = colon ? (size_t)(colon - l) : n;
    const char *v = colon ? colon + 1 : l + n;
    size_t vl = (size_t)(l + n - v);
    if (vl && *v == ' ')
        v++, vl--;
    if (fl == 4 && !memcmp(l, "data", 4)) {
        if (st_buf_append(&s->data, v, vl) < 0 || st_buf_append(&s->data, "\n", 1) < 0)
            return sse_fail(s, "event data over its limit");
        s->has_data = 1;
    } else if (fl == 5 && !memcmp(l, "event", 5)) {
        if (vl >= sizeof s->event)
            return sse_fail(s, "event type too long");
        memcpy(s->event, v, vl);
        s->event[vl] = '\0';
    } else if (fl == 2 && !memcmp(l, "id", 2)) {
        if (memchr(v, '\0', vl))
            return 0;
        if (vl >= sizeof s->id)
            return sse_fail(s, "event id too long");
        memcpy(s->id, v, vl);
        s->id[vl] = '\0';
    }
    /* retry and unknown fields are ignored */
    return 0;
}

int st_sse_feed(st_sse *s, const char *p, size_t n, st_sse_cb cb, void *arg)
{
    if (s->failed)
        return -1;
    size_t i = 0;
    if (!s->bom_checked) {
        /* the BOM may itself be split across reads: hold bytes until we know */
        static const char bom[3] = { '\xEF', '\xBB', '\xBF' };
        while (i < n && s->line.len < 3) {
            if (p[i] != bom[s->line.len])
                break;
            if (st_buf_append(&s->line, p + i, 1) < 0)
                return sse_fail(s, "line over its limit");
            i++;
        }
        if (s->line.len == 3) {
            st_buf_reset(&s->line);
            s->bom_checked = 1;
        } else if (i < n) {
            s->bom_checked = 1; /* not a BOM: the held bytes are ordinary line content */
        } else {
            return 0;
        }
    }
    if (s->cr_pending && i < n) {
        s->cr_pending = 0;
        if (p[i] == '\n')
            i++;
    }
    while (i < n) {
        /* find the next CR or LF */
        const char *start = p + i;
        size_t rest = n - i, k = 0;
        while (k < rest && start[k] != '\n' && start[k] != '\r')
            k++;
        if (k == rest) {
            if (st_buf_append(&s->line, start, k) < 0)
                return sse_fail(s, "line over its limit");
            return 0;
        }
        int rc;
        if (s->line.len) {
            if (st_buf_append(&s->line, start, k) < 0)
                return sse_fail(s, "line over its limit");
            rc = line(s, s->line.data, s->line.len, cb, arg);
            st_buf_reset(&s->line);
        } else {
            if (k > s->max_event)
                return sse_fail(s, "line over its limit");
            rc = line(s, start, k, cb, arg);
        }
        i += k + 1;
        if (start[k] == '\r') {
            if (i < n) {
                if (p[i] == '\n')
                    i++;
            } else {
                s->cr_pending = 1;
            }
        }
        if (rc)
            return rc;
    }
    return 0;
}

int st_sse_finish(st_sse *s)
{
    int pending = s->has_data || s->line.len > 0;
    st_buf_reset(&s->line);
    st_buf_reset(&s->data);
    s->has_data = 0;
    return pending;
}
