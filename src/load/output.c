#include "load/output.h"

#include <math.h>
#include <string.h>
#include <time.h>

#include "core/buf.h"
#include "core/version.h"

static void jnum(FILE *f, double v, int prec)
{
    if (isnan(v) || isinf(v))
        fputs("null", f);
    else
        fprintf(f, "%.*f", prec, v);
}

static void jstr(FILE *f, const char *s)
{
    if (!s) {
        fputs("null", f);
        return;
    }
    st_buf b;
    st_buf_init(&b, strlen(s) * 6 + 16);
    if (st_buf_json_str(&b, s) == 0)
        fwrite(b.data, 1, b.len, f);
    else
        fputs("null", f);
    st_buf_free(&b);
}

/* A distribution in milliseconds. */
static void jdist(FILE *f, const st_dist *d)
{
    fprintf(f, "{\"n\": %u, \"mean\": ", d->n);
    jnum(f, d->mean * 1e3, 4);
    fputs(", \"min\": ", f);
    jnum(f, d->min * 1e3, 4);
    fputs(", \"p50\": ", f);
    jnum(f, d->p50 * 1e3, 4);
    fputs(", \"p90\": ", f);
    jnum(f, d->p90 * 1e3, 4);
    fputs(", \"p95\": ", f);
    jnum(f, d->p95 * 1e3, 4);
    fputs(", \"p99\": ", f);
    jnum(f, d->p99 * 1e3, 4);
    fputs(", \"max\": ", f);
    jnum(f, d->max * 1e3, 4);
    fputs("}", f);
}

static void jlatencies(FILE *f, const char *ind, const st_dist *ttft, const st_dist *tpot, const st_dist *itl,
                       const st_dist *e2e, const st_dist *lag)
{
    fprintf(f, "%s\"ttft_ms\": ", ind);
    jdist(f, ttft);
    fprintf(f, ",\n%s\"tpot_ms\": ", ind);
    jdist(f, tpot);
    fprintf(f, ",\n%s\"itl_ms\": ", ind);
    jdist(f, itl);
    fprintf(f, ",\n%s\"e2e_ms\": ", ind);
    jdist(f, e2e);
    fprintf(f, ",\n%s\"lag_ms\": ", ind);
    jdist(f, lag);
}

int st_bench_write_json(FILE *f, const st_bench_meta *m, const st_run_result *res, const st_summary *s)
{
    char date[64] = "";
    time_t wall = (time_t)(res->t0_wall / ST_NS_PER_S);
    struct tm tm;
    if (gmtime_r(&wall, &tm))
        strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    fprintf(f, "{\n  \"schema\": \"%s\",\n  \"servetune_version\": \"%s\",\n  \"started_at\": \"%s\",\n", ST_BENCH_SCHEMA,
            ST_VERSION, date);
    fputs("  \"config\": {\n    \"url\": ", f);
    jstr(f, m->url);
    fputs(", \"api\": ", f);
    jstr(f, m->api);
    fputs(", \"model\": ", f);
    jstr(f, m->model);
    fprintf(f, ", \"stream\": %s,\n    \"workload\": ", m->stream ? "true" : "false");
    jstr(f, m->workload);
    fputs(", \"trace\": ", f);
    jstr(f, m->trace_path);
    fprintf(f, ", \"input_tokens\": %u, \"output_tokens\": %u, \"range_ratio\": ", m->input_tokens, m->output_tokens);
    jnum(f, m->range_ratio, 4);
    fprintf(f, ", \"prefix_tokens\": %u, \"num_requests\": %u, \"seed\": %llu,\n    \"arrival\": ", m->prefix_tokens,
            m->num_requests, (unsigned long long)m->seed);
    jstr(f, m->arrival);
    fputs(", \"rate\": ", f);
    if (isinf(m->rate))
        fputs("\"inf\"", f);
    else
        jnum(f, m->rate, 6);
    fputs(", \"burstiness\": ", f);
    jnum(f, m->burstiness, 4);
    fprintf(f, ", \"max_concurrency\": %u, \"warmup\": %u, \"timeout_s\": ", m->max_concurrency, m->warmup);
    jnum(f, m->timeout_s, 3);
    fputs(",\n    \"slo\": {\"ttft_ms\": ", f);
    jnum(f, m->slo.ttft_s > 0 ? m->slo.ttft_s * 1e3 : NAN, 3);
    fputs(", \"tpot_ms\": ", f);
    jnum(f, m->slo.tpot_s > 0 ? m->slo.tpot_s * 1e3 : NAN, 3);
    fputs(", \"e2e_ms\": ", f);
    jnum(f, m->slo.e2e_s > 0 ? m->slo.e2e_s * 1e3 : NAN, 3);
    fputs("}\n  },\n", f);

    fprintf(f, "  \"self_check\": {\"client_limited\": %s, \"threshold_ms\": ", res->client_limited ? "true" : "false");
    jnum(f, res->max_lag_ms, 3);
    fputs(", \"reason\": ", f);
    jstr(f, res->limited_reason);
    fputs(",\n    \"dispatch_lag_ms\": ", f);
    jdist(f, &res->dispatch_lag);
    fputs(",\n    \"loop_delay_ms\": ", f);
    jdist(f, &res->loop_delay);
    fprintf(f, ",\n    \"interrupted\": %s, \"connections_opened\": %u, \"retries\": %u, \"max_in_flight\": %u},\n",
            res->interrupted ? "true" : "false", res->connections_opened, res->retries, res->max_in_flight);

    fprintf(f, "  \"summary\": {\n    \"total\": %u, \"warmup\": %u, \"measured\": %u, \"sent\": %u, \"completed\": %u, \"failed\": %u,\n",
            s->total, s->warmup, s->measured, s->sent, s->completed, s->failed);
    fputs("    \"failed_by_reason\": {", f);
    int first = 1;
    for (int i = 1; i < ST_REQ__COUNT; i++)
        if (s->by_status[i]) {
            fprintf(f, "%s\"%s\": %u", first ? "" : ", ", st_req_status_name((st_req_status)i), s->by_status[i]);
            first = 0;
        }
    fputs("},\n    \"duration_s\": ", f);
    jnum(f, s->duration_s, 6);
    fputs(", \"offered_rate\": ", f);
    if (isinf(s->offered_rate))
        fputs("\"inf\"", f);
    else
        jnum(f, s->offered_rate, 4);
    fputs(", \"achieved_rate\": ", f);
    if (isinf(s->achieved_rate))
        fputs("\"inf\"", f);
    else
        jnum(f, s->achieved_rate, 4);
    fprintf(f, ",\n    \"input_tokens\": %llu, \"output_tokens\": %llu, \"cached_tokens\": %llu, \"output_short\": %u,\n",
            (unsigned long long)s->input_tokens, (unsigned long long)s->output_tokens, (unsigned long long)s->cached_tokens,
            s->output_requested_short);
    fputs("    \"request_throughput\": ", f);
    jnum(f, s->request_throughput, 4);
    fputs(", \"input_throughput\": ", f);
    jnum(f, s->input_throughput, 2);
    fputs(", \"output_throughput\": ", f);
    jnum(f, s->output_throughput, 2);
    fputs(", \"total_token_throughput\": ", f);
    jnum(f, s->total_token_throughput, 2);
    fprintf(f, ",\n    \"slo_set\": %s, \"good\": %u, \"goodput\": ", s->slo_set ? "true" : "false", s->good);
    jnum(f, s->slo_set ? s->goodput : NAN, 4);
    fputs(",\n", f);
    jlatencies(f, "    ", &s->ttft, &s->tpot, &s->itl, &s->e2e, &s->lag);
    const st_window *w = &s->steady;
    fprintf(f, ",\n    \"steady\": {\"valid\": %s, \"start_s\": ", w->valid ? "true" : "false");
    jnum(f, w->start_s, 6);
    fputs(", \"end_s\": ", f);
    jnum(f, w->end_s, 6);
    fputs(", \"duration_s\": ", f);
    jnum(f, w->duration_s, 6);
    fprintf(f, ", \"completed\": %u, \"failed\": %u, \"good\": %u,\n      \"request_throughput\": ", w->completed, w->failed,
            w->good);
    jnum(f, w->request_throughput, 4);
    fputs(", \"input_throughput\": ", f);
    jnum(f, w->input_throughput, 2);
    fputs(", \"output_throughput\": ", f);
    jnum(f, w->output_throughput, 2);
    fputs(", \"goodput\": ", f);
    jnum(f, s->slo_set ? w->goodput : NAN, 4);
    fputs(",\n", f);
    jlatencies(f, "      ", &w->ttft, &w->tpot, &w->itl, &w->e2e, &w->lag);
    fputs("}\n  },\n  \"requests\": [\n", f);
    for (uint32_t i = 0; i < res->n; i++) {
        const st_record *r = &res->records[i];
        fprintf(f,
                "    {\"id\": %u, \"warmup\": %s, \"status\": \"%s\", \"http_status\": %d, \"scheduled_ns\": %lld, "
                "\"sent_ns\": %lld, \"first_byte_ns\": %lld, \"first_token_ns\": %lld, \"end_ns\": %lld, ",
                r->id, r->warmup ? "true" : "false", st_req_status_name(r->status), r->http_status, (long long)r->scheduled,
                (long long)r->sent, (long long)r->first_byte, (long long)r->first_token, (long long)r->end);
        fprintf(f,
                "\"input_tokens\": %u, \"output_requested\": %u, \"output_tokens\": %u, \"cached_tokens\": %u, "
                "\"usage_reported\": %s, \"ttft_ms\": ",
                r->input_tokens, r->output_requested, r->output_tokens, r->cached_tokens, r->usage_reported ? "true" : "false");
        jnum(f, st_record_ttft(r) * 1e3, 4);
        fputs(", \"tpot_ms\": ", f);
        jnum(f, st_record_tpot(r) * 1e3, 4);
        fputs(", \"e2e_ms\": ", f);
        jnum(f, st_record_e2e(r) * 1e3, 4);
        fputs(", \"lag_ms\": ", f);
        jnum(f, st_record_lag(r) * 1e3, 4);
        fputs(", \"error\": ", f);
        jstr(f, r->error);
        fputs(", \"events_ns\": [", f);
        for (uint32_t k = 0; k < r->n_events; k++)
            fprintf(f, "%s%lld", k ? "," : "", (long long)r->events[k]);
        fprintf(f, "]}%s\n", i + 1 < res->n ? "," : "");
    }
    fputs("  ]\n}\n", f);
    return ferror(f) ? -1 : 0;
}

static void cnum(FILE *f, double v)
{
    if (!isnan(v))
        fprintf(f, "%.4f", v);
}

int st_bench_write_csv(FILE *f, const st_run_result *res)
{
    fputs("id,warmup,status,http_status,scheduled_ns,sent_ns,first_byte_ns,first_token_ns,end_ns,input_tokens,"
          "output_requested,output_tokens,cached_tokens,usage_reported,token_events,ttft_ms,tpot_ms,itl_mean_ms,e2e_ms,"
          "lag_ms,error\n",
          f);
    for (uint32_t i = 0; i < res->n; i++) {
        const st_record *r = &res->records[i];
        fprintf(f, "%u,%d,%s,%d,%lld,%lld,%lld,%lld,%lld,%u,%u,%u,%u,%d,%u,", r->id, r->warmup, st_req_status_name(r->status),
                r->http_status, (long long)r->scheduled, (long long)r->sent, (long long)r->first_byte,
                (long long)r->first_token, (long long)r->end, r->input_tokens, r->output_requested, r->output_tokens,
                r->cached_tokens, r->usage_reported, r->n_events);
        cnum(f, st_record_ttft(r) * 1e3);
        fputc(',', f);
        cnum(f, st_record_tpot(r) * 1e3);
        fputc(',', f);
        if (r->n_events >= 2)
            cnum(f, (double)(r->events[r->n_events - 1] - r->events[0]) / (r->n_events - 1) / 1e6);
        fputc(',', f);
        cnum(f, st_record_e2e(r) * 1e3);
        fputc(',', f);
        cnum(f, st_record_lag(r) * 1e3);
        fputc(',', f);
        if (r->error) {
            fputc('"', f);
            for (const char *c = r->error; *c; c++) {
                if (*c == '"')
                    fputc('"', f);
                fputc(*c == '\n' || *c == '\r' ? ' ' : *c, f);
            }
            fputc('"', f);
        }
        fputc('\n', f);
    }
    return ferror(f) ? -1 : 0;
}

static void trow(FILE *f, const char *name, const st_dist *d)
{
    if (!d->n) {
        fprintf(f, "  %-14s %8s\n", name, "-");
        return;
    }
    fprintf(f, "  %-14s %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f\n", name, d->mean * 1e3, d->min * 1e3,
            d->p50 * 1e3, d->p90 * 1e3, d->p95 * 1e3, d->p99 * 1e3, d->max * 1e3);
}

void st_bench_print_table(FILE *f, const st_bench_meta *m, const st_run_result *res, const st_summary *s)
{
    fprintf(f, "servetune bench: %s  api=%s  model=%s  %s\n", m->url ? m->url : "", m->api ? m->api : "",
            m->model ? m->model : "-", m->stream ? "streaming" : "non-streaming");
    if (isinf(m->rate))
        fprintf(f, "arrivals: all at once (rate inf)");
    else if (isnan(m->rate))
        fprintf(f, "arrivals: trace timestamps");
    else
        fprintf(f, "arrivals: %s at %.4g req/s", m->arrival ? m->arrival : "?", m->rate);
    fprintf(f, "  max concurrency: %s", m->max_concurrency ? "" : "unbounded");
    if (m->max_concurrency)
        fprintf(f, "%u", m->max_concurrency);
    fprintf(f, "  warm-up: %u\n\n", m->warmup);
    fprintf(f, "  requests        measured %u  completed %u  failed %u\n", s->measured, s->completed, s->failed);
    for (int i = 1; i < ST_REQ__COUNT; i++)
        if (s->by_status[i])
            fprintf(f, "    failed: %-12s %u\n", st_req_status_name((st_req_status)i), s->by_status[i]);
    fprintf(f, "  duration        %.3f s (first send to last completion)\n", s->duration_s);
    fprintf(f, "  arrival rate    offered %.3f req/s, achieved %.3f req/s\n", s->offered_rate, s->achieved_rate);
    fprintf(f, "  throughput      %.3f req/s, input %.1f tok/s, output %.1f tok/s\n", s->request_throughput,
            s->input_throughput, s->output_throughput);
    fprintf(f, "  tokens          input %llu, output %llu, cached %llu\n", (unsigned long long)s->input_tokens,
            (unsigned long long)s->output_tokens, (unsigned long long)s->cached_tokens);
    if (s->slo_set)
        fprintf(f, "  goodput         %.3f req/s (%u of %u met the SLO)\n", s->goodput, s->good, s->completed);
    fprintf(f, "\n  %-14s %10s %10s %10s %10s %10s %10s %10s\n", "(ms)", "mean", "min", "p50", "p90", "p95", "p99", "max");
    trow(f, "TTFT", &s->ttft);
    trow(f, "TPOT", &s->tpot);
    trow(f, "ITL", &s->itl);
    trow(f, "E2E", &s->e2e);
    trow(f, "client lag", &s->lag);
    if (s->steady.valid) {
        const st_window *w = &s->steady;
        fprintf(f, "\n  steady state    %.3f s to %.3f s: %.3f req/s, output %.1f tok/s\n", w->start_s, w->end_s,
                w->request_throughput, w->output_throughput);
        trow(f, "TTFT", &w->ttft);
        trow(f, "TPOT", &w->tpot);
        trow(f, "ITL", &w->itl);
    }
    fprintf(f, "\n  self-check      %s\n", res->limited_reason);
    fprintf(f, "                  dispatch lag p99 %.3f ms, event-loop delay p99 %.3f ms (threshold %.3g ms)\n",
            res->dispatch_lag.n ? res->dispatch_lag.p99 * 1e3 : 0.0, res->loop_delay.n ? res->loop_delay.p99 * 1e3 : 0.0,
            res->max_lag_ms);
    if (res->interrupted)
        fprintf(f, "  INTERRUPTED: partial results\n");
}
