#include "load/output.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/buf.h"
#include "core/csv.h"
#include "core/version.h"

/* One CSV row (the error text is at most ST_RECORD_ERROR_MAX bytes). */
#define CSV_ROW_MAX 4096

/* ---- JSON ------------------------------------------------------------------------ */

static json_t *num(double x)
{
    if (isnan(x))
        return json_null();
    if (isinf(x))
        return json_string(x > 0 ? "inf" : "-inf");
    return json_real(x);
}

json_t *st_jnum_or_null(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static json_t *ns_or_null(st_ns t) { return t < 0 ? json_null() : json_integer((json_int_t)t); }

static json_t *str_or_null(const char *s) { return s ? json_string(s) : json_null(); }

static void set(json_t *o, const char *k, json_t *v) { json_object_set_new(o, k, v); }

json_t *st_output_dist_json(const st_dist *d, double scale)
{
    json_t *o = json_object();
    if (!o || !d)
        return o;
    set(o, "n", json_integer(d->n));
    set(o, "mean", num(d->mean * scale));
    set(o, "min", num(d->min * scale));
    set(o, "p50", num(d->p50 * scale));
    set(o, "p90", num(d->p90 * scale));
    set(o, "p95", num(d->p95 * scale));
    set(o, "p99", num(d->p99 * scale));
    set(o, "max", num(d->max * scale));
    return o;
}

static json_t *latency_json(const st_dist *ttft, const st_dist *tpot, const st_dist *itl, const st_dist *e2e,
                            const st_dist *lag)
{
    json_t *o = json_object();
    set(o, "ttft", st_output_dist_json(ttft, 1e3));
    set(o, "tpot", st_output_dist_json(tpot, 1e3));
    set(o, "itl", st_output_dist_json(itl, 1e3));
    set(o, "e2e", st_output_dist_json(e2e, 1e3));
    set(o, "client_lag", st_output_dist_json(lag, 1e3));
    return o;
}

json_t *st_output_summary_json(const st_summary *s)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_t *req = json_object(), *by = json_object();
    set(req, "total", json_integer(s->total));
    set(req, "warmup", json_integer(s->warmup));
    set(req, "measured", json_integer(s->measured));
    set(req, "sent", json_integer(s->sent));
    set(req, "completed", json_integer(s->completed));
    set(req, "failed", json_integer(s->failed));
    for (int i = 1; i < ST_REQ__COUNT; i++)
        if (s->by_status[i])
            set(by, st_req_status_name((st_req_status)i), json_integer(s->by_status[i]));
    set(req, "failed_by_reason", by);
    set(o, "requests", req);
    set(o, "first_send_s", num(s->first_send_s));
    set(o, "last_end_s", num(s->last_end_s));
    set(o, "duration_s", num(s->duration_s));
    set(o, "offered_rate_rps", num(s->offered_rate));
    set(o, "achieved_rate_rps", num(s->achieved_rate));
    json_t *tok = json_object();
    set(tok, "input", json_integer((json_int_t)s->input_tokens));
    set(tok, "output", json_integer((json_int_t)s->output_tokens));
    set(tok, "cached", json_integer((json_int_t)s->cached_tokens));
    set(tok, "short_outputs", json_integer(s->output_requested_short));
    set(tok, "reasoning", json_integer((json_int_t)s->reasoning_tokens));
    json_t *pr = json_object();
    set(pr, "requests", json_integer(s->prompt_reported_n));
    set(pr, "requested", json_integer((json_int_t)s->prompt_requested));
    set(pr, "server_counted", json_integer((json_int_t)s->prompt_reported));
    set(tok, "prompt_measured", pr);
    set(o, "tokens", tok);
    json_t *thr = json_object();
    set(thr, "requests_per_s", num(s->request_throughput));
    set(thr, "input_tokens_per_s", num(s->input_throughput));
    set(thr, "output_tokens_per_s", num(s->output_throughput));
    set(thr, "total_tokens_per_s", num(s->total_token_throughput));
    set(o, "throughput", thr);
    set(o, "latency_ms", latency_json(&s->ttft, &s->tpot, &s->itl, &s->e2e, &s->lag));
    set(json_object_get(o, "latency_ms"), "ttfat", st_output_dist_json(&s->ttfat, 1e3));
    set(o, "good", json_integer(s->good));
    set(o, "goodput_rps", num(s->goodput));
    set(o, "slo_set", json_boolean(s->slo_set));
    set(o, "client_limited_by_lag", json_boolean(s->client_limited));
    const st_window *w = &s->steady;
    json_t *st = json_object();
    set(st, "valid", json_boolean(w->valid));
    set(st, "start_s", num(w->start_s));
    set(st, "end_s", num(w->end_s));
    set(st, "duration_s", num(w->duration_s));
    set(st, "completed", json_integer(w->completed));
    set(st, "failed", json_integer(w->failed));
    set(st, "good", json_integer(w->good));
    set(st, "input_tokens", json_integer((json_int_t)w->input_tokens));
    set(st, "output_tokens", num(w->output_tokens));
    json_t *wt = json_object();
    set(wt, "requests_per_s", num(w->request_throughput));
    set(wt, "input_tokens_per_s", num(w->input_throughput));
    set(wt, "output_tokens_per_s", num(w->output_throughput));
    set(st, "throughput", wt);
    set(st, "goodput_rps", num(w->goodput));
    set(st, "latency_ms", latency_json(&w->ttft, &w->tpot, &w->itl, &w->e2e, &w->lag));
    set(o, "steady_state", st);
    if (s->srv_prompt.n || s->srv_tpot.n) {
        json_t *sv = json_object();
        set(sv, "requests", json_integer(s->srv_prompt.n));
        set(sv, "prompt", st_output_dist_json(&s->srv_prompt, 1e3));
        set(sv, "tpot", st_output_dist_json(&s->srv_tpot, 1e3));
        set(sv, "ttft_minus_prompt", st_output_dist_json(&s->srv_ttft_gap, 1e3));
        set(sv, "tpot_minus_server_tpot", st_output_dist_json(&s->srv_tpot_gap, 1e3));
        set(o, "server_timings_ms", sv);
    } else {
        set(o, "server_timings_ms", json_null());
    }
    if (s->srv_draft_requests) {
        json_t *sp = json_object();
        set(sp, "requests", json_integer(s->srv_draft_requests));
        set(sp, "draft_tokens", json_integer((json_int_t)s->srv_draft_tokens));
        set(sp, "accepted_tokens", json_integer((json_int_t)s->srv_draft_accepted));
        set(sp, "acceptance_rate",
            num(s->srv_draft_tokens ? (double)s->srv_draft_accepted / (double)s->srv_draft_tokens : NAN));
        set(o, "speculation", sp);
    } else {
        set(o, "speculation", json_null());
    }
    return o;
}

static double ms(double s) { return s * 1e3; }

static json_t *record_json(const st_record *r, int with_events)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    set(o, "id", json_integer(r->id));
    set(o, "warmup", json_boolean(r->warmup));
    set(o, "status", json_string(st_req_status_name(r->status)));
    set(o, "http_status", json_integer(r->http_status));
    set(o, "error", r->error ? json_stringn(r->error, strlen(r->error)) : json_null());
    set(o, "scheduled_ns", json_integer((json_int_t)r->scheduled));
    set(o, "sent_ns", ns_or_null(r->sent));
    set(o, "first_byte_ns", ns_or_null(r->first_byte));
    set(o, "first_token_ns", ns_or_null(r->first_token));
    set(o, "end_ns", ns_or_null(r->end));
    set(o, "ttft_ms", num(ms(st_record_ttft(r))));
    set(o, "tpot_ms", num(ms(st_record_tpot(r))));
    set(o, "e2e_ms", num(ms(st_record_e2e(r))));
    set(o, "lag_ms", num(ms(st_record_lag(r))));
    set(o, "input_tokens", json_integer(r->input_tokens));
    set(o, "output_requested", json_integer(r->output_requested));
    set(o, "output_tokens", json_integer(r->output_tokens));
    set(o, "cached_tokens", json_integer(r->cached_tokens));
    set(o, "usage_reported", json_boolean(r->usage_reported));
    set(o, "server_prompt_ms", r->srv_prompt >= 0 ? json_real(st_ns_to_ms(r->srv_prompt)) : json_null());
    set(o, "server_gen_ms", r->srv_gen >= 0 ? json_real(st_ns_to_ms(r->srv_gen)) : json_null());
    set(o, "server_gen_tokens", r->srv_gen >= 0 ? json_integer(r->srv_gen_n) : json_null());
    set(o, "server_draft_tokens", r->has_draft ? json_integer(r->srv_draft_n) : json_null());
    set(o, "server_draft_accepted", r->has_draft ? json_integer(r->srv_draft_accepted) : json_null());
    set(o, "first_answer_ns", ns_or_null(r->first_answer));
    set(o, "ttfat_ms", num(ms(st_record_ttfat(r))));
    set(o, "reasoning_tokens", json_integer(r->reasoning_tokens));
    set(o, "prompt_reported", r->prompt_reported ? json_integer(r->prompt_reported) : json_null());
    if (r->session) {
        set(o, "session", json_integer(r->session));
        set(o, "turn", json_integer(r->turn + 1));
    }
    if (!with_events)
        return o;
    json_t *ev = json_array();
    st_event_it it;
    st_ns t;
    st_events_begin(&it, r);
    while (ev && st_events_next(&it, &t))
        json_array_append_new(ev, json_integer((json_int_t)t));
    set(o, "event_times_ns", ev);
    return o;
}

json_t *st_output_record_json(const st_record *r) { return record_json(r, 1); }

json_t *st_output_config_json(const st_bench_info *in)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    set(o, "url", str_or_null(in->url));
    set(o, "api", str_or_null(in->api));
    set(o, "model", str_or_null(in->model));
    set(o, "stream", json_boolean(in->stream));
    json_t *w = json_object();
    set(w, "kind", str_or_null(in->workload));
    if (in->trace_path)
        set(w, "trace_path", json_string(in->trace_path));
    if (in->trace_format)
        set(w, "trace_format", json_string(in->trace_format));
    if (in->trace_sessions)
        set(w, "trace_sessions", json_string(in->trace_sessions));
    if (in->trace_counts) {
        const st_trace_counts *c = in->trace_counts;
        json_t *k = json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:b}", "rows", (json_int_t)c->rows, "kept",
                              (json_int_t)c->kept, "failed", (json_int_t)c->failed, "window", (json_int_t)c->window,
                              "model", (json_int_t)c->model, "sampled_out", (json_int_t)c->sampled_out, "empty",
                              (json_int_t)c->empty, "too_long", (json_int_t)c->too_long, "bad", (json_int_t)c->bad,
                              "unsorted", (json_int_t)c->unsorted, "stopped", c->stopped);
        if (k)
            set(k, "orphaned", json_integer((json_int_t)c->orphaned));
        set(w, "trace_counts", k ? k : json_null());
    }
    if (!in->workload || strcmp(in->workload, "trace") != 0) {
        set(w, "input_len", json_integer(in->input_len));
        set(w, "output_len", json_integer(in->output_len));
        set(w, "range_ratio", num(in->range_ratio));
        set(w, "prefix_len", json_integer(in->prefix_len));
        set(w, "semantics", json_string(in->vllm_semantics ? "vllm" : "servetune"));
    }
    if (in->sessions) {
        set(w, "sessions", json_integer(in->sessions));
        if (in->turns_max) {
            set(w, "turns_min", json_integer(in->turns_min));
            set(w, "turns_max", json_integer(in->turns_max));
            set(w, "turn_input", json_integer(in->turn_input));
            set(w, "think_s", num(in->think_s));
        }
    }
    set(w, "exact_prompts", str_or_null(in->exact_prompts));
    if (in->fitted) {
        set(w, "prompts_fitted", json_integer(in->fitted));
        set(w, "prompts_exact", json_integer(in->fitted_exact));
    }
    set(w, "seed", json_integer((json_int_t)in->seed));
    set(w, "num_requests", json_integer(in->num_requests));
    set(w, "warmup", json_integer(in->warmup));
    set(o, "workload", w);
    json_t *a = json_object();
    set(a, "kind", str_or_null(in->arrival));
    set(a, "rate_rps", num(in->rate));
    set(a, "burstiness", num(in->burstiness));
    set(a, "max_concurrency", json_integer(in->max_concurrency));
    set(a, "closed_loop", json_boolean(in->closed_loop));
    set(o, "arrival", a);
    set(o, "timeout_s", num(in->timeout_s));
    json_t *slo = json_object();
    const st_slo *sl = &in->opts.slo;
    set(slo, "ttft_ms", sl->ttft_s > 0 ? num(ms(sl->ttft_s)) : json_null());
    set(slo, "tpot_ms", sl->tpot_s > 0 ? num(ms(sl->tpot_s)) : json_null());
    set(slo, "e2e_ms", sl->e2e_s > 0 ? num(ms(sl->e2e_s)) : json_null());
    set(slo, "ttfat_ms", sl->ttfat_s > 0 ? num(ms(sl->ttfat_s)) : json_null());
    set(o, "slo", slo);
    return o;
}

int st_output_client_limited(const st_bench_info *info, const st_summary *s)
{
    return (info && info->client_limited) || (s && s->client_limited);
}

static void iso8601(int64_t wall_ns, char *buf, size_t cap)
{
    time_t t = (time_t)(wall_ns / 1000000000LL);
    struct tm tm;
    if (!gmtime_r(&t, &tm) || strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        buf[0] = '\0';
}

json_t *st_output_json(const st_bench_info *in, const st_summary *s, const st_record *recs, uint32_t n)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    set(o, "schema", json_string(ST_BENCH_SCHEMA));
    set(o, "servetune_version", json_string(in->version ? in->version : ST_VERSION));
    char when[40] = "";
    if (in->started_wall_ns > 0)
        iso8601(in->started_wall_ns, when, sizeof when);
    set(o, "started_at", when[0] ? json_string(when) : json_null());
    set(o, "t0_mono_ns", in->t0_mono_ns > 0 ? json_integer(in->t0_mono_ns) : json_null());
    set(o, "config", st_output_config_json(in));
    json_t *sc = json_object();
    set(sc, "client_limited", json_boolean(st_output_client_limited(in, s)));
    set(sc, "reason", str_or_null(in->limited_reason));
    set(sc, "max_lag_ms", num(in->max_lag_ms));
    set(sc, "dispatch_lag_ms", in->dispatch_lag ? st_output_dist_json(in->dispatch_lag, 1e3) : json_null());
    set(sc, "loop_delay_ms", in->loop_delay ? st_output_dist_json(in->loop_delay, 1e3) : json_null());
    set(sc, "interrupted", json_boolean(in->interrupted));
    set(sc, "connections_opened", json_integer(in->connections_opened));
    set(sc, "retries", json_integer(in->retries));
    set(sc, "max_in_flight", json_integer(in->max_in_flight));
    set(o, "self_check", sc);
    set(o, "summary", st_output_summary_json(s));
    if (in->tasks)
        json_object_set(o, "tasks", in->tasks);
    if (in->turns && in->n_turns > 0) {
        json_t *ta = json_array();
        for (int t = 0; ta && t < in->n_turns; t++) {
            const st_turn_row *row = &in->turns[t];
            json_t *x = json_object();
            set(x, "turn", json_integer(row->turn));
            set(x, "and_later", json_boolean(t == ST_TURN_ROWS - 1));
            set(x, "requests", json_integer(row->requests));
            set(x, "completed", json_integer(row->completed));
            set(x, "ttft_ms", st_output_dist_json(&row->ttft, 1e3));
            if (row->ttfat.n)
                set(x, "ttfat_ms", st_output_dist_json(&row->ttfat, 1e3));
            set(x, "prompt_tokens", json_integer((json_int_t)row->prompt_tokens));
            set(x, "cached_tokens", json_integer((json_int_t)row->cached_tokens));
            set(x, "cached_share",
                row->prompt_tokens && row->cached_reported
                    ? num((double)row->cached_tokens / (double)row->prompt_tokens)
                    : json_null());
            json_array_append_new(ta, x);
        }
        set(o, "turns", ta);
    }
    json_t *ra = json_array();
    for (uint32_t i = 0; ra && recs && i < n; i++)
        json_array_append_new(ra, st_output_record_json(&recs[i]));
    set(o, "records", ra);
    return o;
}

/* Streams the document: the head (everything but the records) through jansson, then one
 * compact line per record with its event times written directly, so memory stays at one
 * record's worth however long the run (a jansson tree of every event time would take tens
 * of bytes per event). */
int st_output_json_write(FILE *f, const st_bench_info *info, const st_summary *s, const st_record *recs, uint32_t n)
{
    const size_t flags = JSON_REAL_PRECISION(15);
    json_t *o = st_output_json(info, s, NULL, 0);
    if (!o)
        return -1;
    json_object_del(o, "records");
    char *head = json_dumps(o, JSON_INDENT(1) | flags);
    json_decref(o);
    if (!head)
        return -1;
    char *close = strrchr(head, '}');
    if (!close) {
        free(head);
        return -1;
    }
    while (close > head && (close[-1] == '\n' || close[-1] == ' '))
        close--;
    fwrite(head, 1, (size_t)(close - head), f);
    free(head);
    fputs(",\n \"records\": [", f);
    for (uint32_t i = 0; recs && i < n; i++) {
        json_t *r = record_json(&recs[i], 0);
        char *line = r ? json_dumps(r, JSON_COMPACT | flags) : NULL;
        json_decref(r);
        if (!line)
            return -1;
        size_t len = strlen(line);
        if (len < 2 || line[len - 1] != '}') {
            free(line);
            return -1;
        }
        fputs(i ? ",\n  " : "\n  ", f);
        fwrite(line, 1, len - 1, f);
        free(line);
        fputs(",\"event_times_ns\":[", f);
        st_event_it it;
        st_ns t;
        st_events_begin(&it, &recs[i]);
        for (uint32_t k = 0; st_events_next(&it, &t); k++)
            fprintf(f, k ? ",%lld" : "%lld", (long long)t);
        fputs("]}", f);
    }
    fputs(n ? "\n ]\n}\n" : "]\n}\n", f);
    return ferror(f) ? -1 : 0;
}

/* ---- CSV ---------------------------------------------------------------------------- */

static void csv_num(st_buf *b, double x)
{
    if (!isnan(x) && !isinf(x))
        st_buf_printf(b, "%.6f", x);
}

static void csv_ns_ms(st_buf *b, st_ns t)
{
    if (t >= 0)
        st_buf_printf(b, "%.6f", st_ns_to_ms(t));
}

int st_output_csv(FILE *f, const st_record *recs, uint32_t n)
{
    fputs("id,warmup,status,http_status,scheduled_ms,sent_ms,first_byte_ms,first_token_ms,end_ms,"
          "ttft_ms,tpot_ms,e2e_ms,lag_ms,input_tokens,output_requested,output_tokens,cached_tokens,"
          "usage_reported,n_events,error,server_prompt_ms,server_gen_ms,server_gen_tokens,ttfat_ms,reasoning_tokens,"
          "prompt_reported,session,turn\n",
          f);
    st_buf b;
    st_buf_init(&b, CSV_ROW_MAX);
    int rc = 0;
    for (uint32_t i = 0; i < n && !rc; i++) {
        const st_record *r = &recs[i];
        st_buf_reset(&b);
        st_buf_printf(&b, "%u,%d,%s,%d,", r->id, r->warmup ? 1 : 0, st_req_status_name(r->status), r->http_status);
        const st_ns t[] = { r->scheduled, r->sent, r->first_byte, r->first_token, r->end };
        for (size_t k = 0; k < sizeof t / sizeof *t; k++) {
            csv_ns_ms(&b, t[k]);
            st_buf_puts(&b, ",");
        }
        const double d[] = { st_record_ttft(r), st_record_tpot(r), st_record_e2e(r), st_record_lag(r) };
        for (size_t k = 0; k < sizeof d / sizeof *d; k++) {
            csv_num(&b, ms(d[k]));
            st_buf_puts(&b, ",");
        }
        st_buf_printf(&b, "%u,%u,%u,%u,%d,%u,", r->input_tokens, r->output_requested, r->output_tokens,
                      r->cached_tokens, r->usage_reported ? 1 : 0, r->n_events);
        st_csv_put_text(&b, r->error); /* server text: quoted, and never a formula */
        st_buf_puts(&b, ",");
        csv_ns_ms(&b, r->srv_prompt);
        st_buf_puts(&b, ",");
        csv_ns_ms(&b, r->srv_gen);
        st_buf_puts(&b, ",");
        if (r->srv_gen >= 0)
            st_buf_printf(&b, "%u", r->srv_gen_n);
        st_buf_puts(&b, ",");
        csv_num(&b, ms(st_record_ttfat(r)));
        st_buf_printf(&b, ",%u,", r->reasoning_tokens);
        if (r->prompt_reported)
            st_buf_printf(&b, "%u", r->prompt_reported);
        if (r->session)
            st_buf_printf(&b, ",%u,%u\n", r->session, r->turn + 1);
        else
            st_buf_puts(&b, ",,\n");
        if (st_buf_error(&b) || fwrite(b.data, 1, b.len, f) != b.len)
            rc = -1;
    }
    st_buf_free(&b);
    return rc || ferror(f) ? -1 : 0;
}

/* ---- table ---------------------------------------------------------------------------- */

/* A figure, "-" for NaN; padded to a table column (width 10) or inline (width 0). */
static void figw(FILE *f, double x, int prec, int width)
{
    char b[64];
    if (isnan(x))
        snprintf(b, sizeof b, "-");
    else if (isinf(x))
        snprintf(b, sizeof b, "inf");
    else
        snprintf(b, sizeof b, "%.*f", prec, x);
    fprintf(f, "%*s", width, b);
}

static void fig(FILE *f, double x, int prec) { figw(f, x, prec, 10); }

static void dist_row(FILE *f, const char *name, const st_dist *d)
{
    fprintf(f, "  %-12s", name);
    fig(f, d->mean * 1e3, 2);
    fig(f, d->p50 * 1e3, 2);
    fig(f, d->p90 * 1e3, 2);
    fig(f, d->p95 * 1e3, 2);
    fig(f, d->p99 * 1e3, 2);
    fig(f, d->max * 1e3, 2);
    fprintf(f, "%9u\n", d->n);
}

static void dist_block(FILE *f, const st_dist *ttft, const st_dist *tpot, const st_dist *itl, const st_dist *e2e,
                       const st_dist *lag)
{
    fprintf(f, "  %-12s%10s%10s%10s%10s%10s%10s%9s\n", "(ms)", "mean", "p50", "p90", "p95", "p99", "max", "n");
    dist_row(f, "TTFT", ttft);
    dist_row(f, "TPOT", tpot);
    dist_row(f, "ITL", itl);
    dist_row(f, "E2E", e2e);
    if (lag)
        dist_row(f, "client lag", lag);
}

static void line_d(FILE *f, const char *label, double x, int prec, const char *unit)
{
    fprintf(f, "%-30s", label);
    if (isnan(x))
        fputs("-", f);
    else if (isinf(x))
        fputs("inf", f);
    else
        fprintf(f, "%.*f", prec, x);
    fprintf(f, "%s\n", unit);
}

/* The run's setup: target, workload (trace, sessions or synthetic) and arrivals. */
static void table_setup(FILE *f, const st_bench_info *in)
{
    if (in->url)
        fprintf(f, "%-30s%s (%s%s%s)\n", "Target:", in->url, in->api ? in->api : "?", in->model ? ", model " : "",
                in->model ? in->model : "");
    if (in->workload && strcmp(in->workload, "trace") == 0) {
        fprintf(f, "%-30strace %s (%s), %u requests", "Workload:", in->trace_path ? in->trace_path : "?",
                in->trace_format ? in->trace_format : "?", in->num_requests);
        if (in->sessions)
            fprintf(f, " in %u sessions (%s)", in->sessions, in->trace_sessions ? in->trace_sessions : "replay");
        fputc('\n', f);
        if (in->trace_counts) {
            char d[600];
            st_trace_counts_describe(in->trace_counts, d, sizeof d);
            fprintf(f, "%-30s%s\n", "Trace read:", d);
        }
    } else if (in->workload && strcmp(in->workload, "sessions") == 0)
        fprintf(f,
                "%-30s%u sessions of %u-%u turns, %u requests; first prompt %u, then %u new tokens a turn, output "
                "%u tokens, think %.3g s, seed %llu\n",
                "Workload:", in->sessions, in->turns_min, in->turns_max, in->num_requests, in->input_len,
                in->turn_input, in->output_len, in->think_s, (unsigned long long)in->seed);
    else if (in->workload && in->vllm_semantics)
        fprintf(f,
                "%-30ssynthetic (vLLM random), %u requests, input %u + prefix %u, output %u tokens (range "
                "±%.0f%%), seed %llu\n",
                "Workload:", in->num_requests, in->input_len, in->prefix_len, in->output_len, in->range_ratio * 100,
                (unsigned long long)in->seed);
    else if (in->workload)
        fprintf(
            f, "%-30ssynthetic, %u requests, input %u, output %u tokens (range ±%.0f%%), shared prefix %u, seed %llu\n",
            "Workload:", in->num_requests, in->input_len, in->output_len, in->range_ratio * 100, in->prefix_len,
            (unsigned long long)in->seed);
    if (in->arrival) {
        fprintf(f, "%-30s%s", "Arrivals:", in->closed_loop ? "closed loop" : in->arrival);
        if (in->closed_loop)
            fprintf(f,
                    ": %u requests, at most %u in flight, each sent when one ends (as vllm bench serve "
                    "--max-concurrency %u --num-prompts %u); TTFT and E2E from each request's send",
                    in->num_requests, in->max_concurrency, in->max_concurrency, in->num_requests);
        else if (isinf(in->rate))
            fputs(", all at once", f);
        else if (!isnan(in->rate))
            fprintf(f, " at %.3g %s", in->rate,
                    in->sessions && (!in->trace_sessions || !strcmp(in->trace_sessions, "replay")) ? "sessions/s"
                                                                                                   : "req/s");
        if (strcmp(in->arrival, "gamma") == 0)
            fprintf(f, " (burstiness %.3g)", in->burstiness);
        if (in->max_concurrency && !in->closed_loop)
            fprintf(f, ", max concurrency %u", in->max_concurrency);
        if (in->sessions && (!in->trace_sessions || !strcmp(in->trace_sessions, "replay")))
            fputs(" (first turns; a later turn follows the previous one's end + think time)", f);
        fputc('\n', f);
    }
}

/* " (connect 2, reset 1)": the failed measured requests by reason; nothing when none failed. */
static void failed_by_reason(FILE *f, const st_summary *s)
{
    if (!s->failed)
        return;
    fputs(" (", f);
    int first = 1;
    for (int i = 1; i < ST_REQ__COUNT; i++)
        if (s->by_status[i]) {
            fprintf(f, "%s%s %u", first ? "" : ", ", st_req_status_name((st_req_status)i), s->by_status[i]);
            first = 0;
        }
    fputc(')', f);
}

void st_output_failures(FILE *f, const char *prog, const st_record *recs, uint32_t n, const st_summary *s)
{
    if (!s->failed)
        return;
    fprintf(f, "%s: %u of %u requests failed", prog, s->failed, s->measured);
    failed_by_reason(f, s);
    /* the first failure of its own (a skipped turn only follows one) */
    const st_record *first = NULL;
    for (uint32_t i = 0; i < n && (!first || first->status == ST_REQ_SKIPPED); i++)
        if (!recs[i].warmup && recs[i].status != ST_REQ_OK && recs[i].error &&
            (!first || recs[i].status != ST_REQ_SKIPPED))
            first = &recs[i];
    if (first)
        fprintf(f, "; the first (request %u): %s", first->id, first->error);
    fputc('\n', f);
}

/* Requests, rates, throughputs, token counts and goodput. */
static void table_totals(FILE *f, const st_bench_info *in, const st_summary *s)
{
    fprintf(f, "%-30s%u completed, %u failed", "Requests:", s->completed, s->failed);
    failed_by_reason(f, s);
    if (s->warmup)
        fprintf(f, "; %u warm-up excluded", s->warmup);
    fputc('\n', f);
    if (s->output_requested_short)
        fprintf(f, "%-30s%u completed requests got fewer output tokens than requested\n",
                "Short outputs:", s->output_requested_short);
    line_d(f, "Duration:", s->duration_s, 2, " s");
    fprintf(f, "%-30s", "Offered / achieved rate:");
    if (isinf(s->offered_rate)) {
        /* all at once: the sends' span is the client's own speed, not a rate anyone offered */
        fputs("inf (every request sent at once)\n", f);
    } else {
        figw(f, s->offered_rate, 3, 0);
        fputs(" / ", f);
        figw(f, s->achieved_rate, 3, 0);
        fputs(" req/s\n", f);
    }
    line_d(f, "Request throughput:", s->request_throughput, 3, " req/s");
    line_d(f, "Output token throughput:", s->output_throughput, 1, " tok/s");
    line_d(f, "Input token throughput:", s->input_throughput, 1, " tok/s");
    if (s->cached_tokens)
        fprintf(f, "%-30s%llu of %llu prompt tokens\n",
                "Cached (server-reported):", (unsigned long long)s->cached_tokens, (unsigned long long)s->input_tokens);
    if (s->prompt_reported_n)
        fprintf(f, "%-30s%llu tokens counted by the server for %llu requested (%u requests; mean %.1f per request)\n",
                "Input tokens (measured):", (unsigned long long)s->prompt_reported,
                (unsigned long long)s->prompt_requested, s->prompt_reported_n,
                (double)s->prompt_reported / s->prompt_reported_n);
    if (in->exact_prompts && in->fitted)
        fprintf(f, "%-30s%u prompts fitted with the server's /tokenize, %u to the exact length\n",
                "Exact prompt lengths:", in->fitted, in->fitted_exact);
    else if (in->exact_prompts && strcmp(in->exact_prompts, "off"))
        fprintf(f, "%-30s%s\n", "Exact prompt lengths:", in->exact_prompts);
    if (s->reasoning_tokens)
        fprintf(f, "%-30s%llu of %llu output tokens (%.1f%%)\n",
                "Reasoning tokens:", (unsigned long long)s->reasoning_tokens, (unsigned long long)s->output_tokens,
                s->output_tokens ? 100.0 * (double)s->reasoning_tokens / (double)s->output_tokens : 0.0);
    if (s->slo_set) {
        char slo[128];
        int k = 0;
        const st_slo *sl = &in->opts.slo;
        slo[0] = '\0';
        if (sl->ttft_s > 0)
            k += snprintf(slo + k, sizeof slo - (size_t)k, " TTFT<=%.0fms", sl->ttft_s * 1e3);
        if (sl->tpot_s > 0 && k < (int)sizeof slo)
            k += snprintf(slo + k, sizeof slo - (size_t)k, " TPOT<=%.0fms", sl->tpot_s * 1e3);
        if (sl->e2e_s > 0 && k < (int)sizeof slo)
            k += snprintf(slo + k, sizeof slo - (size_t)k, " E2E<=%.0fms", sl->e2e_s * 1e3);
        if (sl->ttfat_s > 0 && k < (int)sizeof slo)
            snprintf(slo + k, sizeof slo - (size_t)k, " TTFAT<=%.0fms", sl->ttfat_s * 1e3);
        fprintf(f, "%-30s", "Goodput:");
        figw(f, s->goodput, 3, 0);
        fprintf(f, " req/s (%u of %u requests meet%s)\n", s->good, s->measured, slo);
    }
}

/* Sessions: TTFT and cached share by turn. */
static void table_turns(FILE *f, const st_bench_info *in)
{
    if (!in->turns || in->n_turns <= 0)
        return;
    fputs("Per turn (sessions):\n", f);
    fprintf(f, "  %-12s%10s%10s%10s%10s%12s%9s\n", "turn", "TTFT p50", "p95", "p99", "TTFAT p50", "cached", "n");
    int any_cached = 0;
    for (int t = 0; t < in->n_turns; t++)
        any_cached |= in->turns[t].cached_reported;
    for (int t = 0; t < in->n_turns; t++) {
        const st_turn_row *row = &in->turns[t];
        char tn[16];
        snprintf(tn, sizeof tn, "%u%s", row->turn, t == ST_TURN_ROWS - 1 ? "+" : "");
        fprintf(f, "  %-12s", tn);
        fig(f, row->ttft.p50 * 1e3, 2);
        fig(f, row->ttft.p95 * 1e3, 2);
        fig(f, row->ttft.p99 * 1e3, 2);
        fig(f, row->ttfat.n ? row->ttfat.p50 * 1e3 : NAN, 2);
        if (row->prompt_tokens && any_cached)
            fprintf(f, "%11.1f%%", 100.0 * (double)row->cached_tokens / (double)row->prompt_tokens);
        else
            fprintf(f, "%12s", "-");
        fprintf(f, "%9u\n", row->requests);
    }
}

/* The steady-state window's figures. */
static void table_steady(FILE *f, const st_summary *s)
{
    const st_window *w = &s->steady;
    if (w->valid) {
        fprintf(f, "Steady state (%.2f s to %.2f s: first to last arrival, drain excluded):\n", w->start_s, w->end_s);
        fprintf(f, "  %u completed, %u failed; ", w->completed, w->failed);
        figw(f, w->request_throughput, 3, 0);
        fputs(" req/s, ", f);
        figw(f, w->output_throughput, 1, 0);
        fputs(" output tok/s", f);
        if (s->slo_set) {
            fputs(", goodput ", f);
            figw(f, w->goodput, 3, 0);
            fputs(" req/s", f);
        }
        fputc('\n', f);
        dist_block(f, &w->ttft, &w->tpot, &w->itl, &w->e2e, NULL);
    } else {
        fputs("Steady state: none (all requests arrived at once, or fewer than two)\n", f);
    }
}

/* The server's own timings and speculative decoding, when its responses report them. */
static void table_server(FILE *f, const st_summary *s)
{
    if (s->srv_prompt.n) {
        fprintf(f, "Server-reported timings (%u requests; the server's own prompt and generation times):\n",
                s->srv_prompt.n);
        fprintf(f, "  %-28s", "server prompt p50 / p99:");
        figw(f, s->srv_prompt.p50 * 1e3, 3, 0);
        fputs(" / ", f);
        figw(f, s->srv_prompt.p99 * 1e3, 3, 0);
        fprintf(f, " ms\n  %-28s", "TTFT - prompt p50 / p99:");
        figw(f, s->srv_ttft_gap.p50 * 1e3, 3, 0);
        fputs(" / ", f);
        figw(f, s->srv_ttft_gap.p99 * 1e3, 3, 0);
        fprintf(f, " ms (queue + HTTP + client)\n  %-28s", "TPOT - server's p50 / p99:");
        figw(f, s->srv_tpot_gap.p50 * 1e3, 3, 0);
        fputs(" / ", f);
        figw(f, s->srv_tpot_gap.p99 * 1e3, 3, 0);
        fputs(" ms\n", f);
    }
    if (s->srv_draft_requests) {
        fprintf(f, "Speculative decoding (server-reported, %u requests): %llu draft tokens, %llu accepted",
                s->srv_draft_requests, (unsigned long long)s->srv_draft_tokens,
                (unsigned long long)s->srv_draft_accepted);
        if (s->srv_draft_tokens)
            fprintf(f, " (%.1f%%)", 100.0 * (double)s->srv_draft_accepted / (double)s->srv_draft_tokens);
        fputc('\n', f);
    }
}

/* Whether the client kept up with its schedule. */
static void table_self_check(FILE *f, const st_bench_info *in, const st_summary *s)
{
    int limited = st_output_client_limited(in, s);
    fprintf(f, "%-30s", "Client self-check:");
    if (limited) {
        fputs("CLIENT-LIMITED: ", f);
        if (in->limited_reason && in->limited_reason[0])
            fputs(in->limited_reason, f);
        else
            fprintf(f, "client lag p99 %.3f ms above the %.3f ms threshold", s->lag.p99 * 1e3,
                    in->opts.max_lag_p99_s * 1e3);
        fputs("; these figures describe the client, not the server\n", f);
    } else {
        fputs("ok", f);
        if (in->dispatch_lag && in->dispatch_lag->n)
            fprintf(f, " (dispatch lag p99 %.3f ms", in->dispatch_lag->p99 * 1e3);
        else
            fprintf(f, " (client lag p99 %.3f ms", s->lag.n ? s->lag.p99 * 1e3 : 0.0);
        if (in->loop_delay && in->loop_delay->n)
            fprintf(f, ", loop delay p99 %.3f ms", in->loop_delay->p99 * 1e3);
        if (in->max_lag_ms > 0)
            fprintf(f, "; threshold %.3g ms", in->max_lag_ms);
        fputs(")\n", f);
    }
}

void st_output_table(FILE *f, const st_bench_info *in, const st_summary *s)
{
    fputs("============================ servetune bench ============================\n", f);
    table_setup(f, in);
    table_totals(f, in, s);
    fputs("Whole run:\n", f);
    dist_block(f, &s->ttft, &s->tpot, &s->itl, &s->e2e, &s->lag);
    if (s->reasoning_tokens && s->ttfat.n)
        dist_row(f, "TTFAT", &s->ttfat);
    table_turns(f, in);
    table_steady(f, s);
    table_server(f, s);
    table_self_check(f, in, s);
    if (in->interrupted)
        fputs("Interrupted: the run was stopped before every request finished (partial results).\n", f);
    fputs("==========================================================================\n", f);
}
