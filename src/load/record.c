#include "load/record.h"

#include "core/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *status_names[ST_REQ__COUNT] = {
    [ST_REQ_OK] = "ok",
    [ST_REQ_CONNECT] = "connect",
    [ST_REQ_TLS] = "tls",
    [ST_REQ_HTTP_STATUS] = "http_status",
    [ST_REQ_STREAM_ERROR] = "stream_error",
    [ST_REQ_MALFORMED] = "malformed",
    [ST_REQ_TOO_LARGE] = "too_large",
    [ST_REQ_TIMEOUT] = "timeout",
    [ST_REQ_RESET] = "reset",
    [ST_REQ_INCOMPLETE] = "incomplete",
    [ST_REQ_ABORTED] = "aborted",
    [ST_REQ_SKIPPED] = "skipped",
};

const char *st_req_status_name(st_req_status s) { return (s >= 0 && s < ST_REQ__COUNT) ? status_names[s] : "unknown"; }

void st_record_init(st_record *r, uint32_t id)
{
    memset(r, 0, sizeof *r);
    r->id = id;
    r->sent = r->first_byte = r->first_token = r->first_answer = r->end = -1;
    r->srv_prompt = r->srv_gen = -1;
}

double st_record_ttft(const st_record *r)
{
    if (r->first_token < 0)
        return NAN;
    return st_ns_to_s(r->first_token - r->scheduled);
}

double st_record_ttfat(const st_record *r)
{
    if (r->first_answer < 0)
        return NAN;
    return st_ns_to_s(r->first_answer - r->scheduled);
}

double st_record_tpot(const st_record *r)
{
    /* all the tokens at once (a non-streaming answer): no time per token was measured */
    if (r->first_token < 0 || r->end < 0 || r->output_tokens < 2 || r->end == r->first_token)
        return NAN;
    return st_ns_to_s(r->end - r->first_token) / (double)(r->output_tokens - 1);
}

double st_record_e2e(const st_record *r)
{
    if (r->end < 0)
        return NAN;
    return st_ns_to_s(r->end - r->scheduled);
}

double st_record_lag(const st_record *r)
{
    if (r->sent < 0)
        return NAN;
    return st_ns_to_s(r->sent - r->scheduled);
}

double st_record_srv_ttft_gap(const st_record *r)
{
    if (r->srv_prompt < 0)
        return NAN;
    return st_record_ttft(r) - st_ns_to_s(r->srv_prompt);
}

double st_record_srv_tpot(const st_record *r)
{
    if (r->srv_gen < 0 || r->srv_gen_n < 2)
        return NAN;
    return st_ns_to_s(r->srv_gen) / (double)(r->srv_gen_n - 1);
}

double st_record_srv_tpot_gap(const st_record *r) { return st_record_tpot(r) - st_record_srv_tpot(r); }

int st_record_add_event(st_record *r, st_ns t)
{
    if (r->n_events == r->cap_events) {
        uint32_t cap = r->cap_events ? r->cap_events * 2 : 16;
        st_ns *p = realloc(r->events, cap * sizeof *p);
        if (!p)
            return -1;
        r->events = p;
        r->cap_events = cap;
    }
    r->events[r->n_events++] = t;
    return 0;
}

int st_record_reserve_events(st_record *r, uint32_t n)
{
    size_t cap = r->cap_events;
    if (st_grow((void **)&r->events, &cap, n, sizeof *r->events, n) || cap > UINT32_MAX)
        return -1;
    r->cap_events = (uint32_t)cap;
    return 0;
}

void st_record_set_error(st_record *r, st_req_status st, const char *msg, size_t len)
{
    r->status = st;
    free(r->error);
    r->error = NULL;
    if (!msg)
        return;
    int cut = len > ST_RECORD_ERROR_MAX;
    size_t n = cut ? ST_RECORD_ERROR_MAX : len;
    r->error = malloc(n + 4);
    if (!r->error)
        return;
    memcpy(r->error, msg, n);
    if (cut)
        memcpy(r->error + n, "...", 3), n += 3;
    r->error[n] = '\0';
    /* server text: no escape sequences reach a terminal, no control characters a report */
    st_text_sanitize(r->error, 0);
}

void st_record_free(st_record *r)
{
    free(r->events);
    free(r->error);
    r->events = NULL;
    r->error = NULL;
    r->n_events = r->cap_events = 0;
}
