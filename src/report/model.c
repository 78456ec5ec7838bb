#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/executor.h"
#include "plan/prices.h"
#include "audit/sustain.h"
#include "load/agent.h"
#include "load/agent_run.h"
#include "load/stats.h"
#include "report/format.h"
#include "audit/traffic.h"
#include "report/report.h"

const char *st_rep_status_name(st_rep_status s)
{
    switch (s) {
    case ST_REP_OK: return "ok";
    case ST_REP_NONE_PASSED: return "none_passed";
    case ST_REP_FAILED: return "failed";
    case ST_REP_NOT_RUN: return "not_run";
    }
    return "unknown";
}

/* The engine's counters a run's figures are differences of (first and last sample). */
enum { CTR_PREEMPT, CTR_HITS, CTR_QUERIES, CTR_TOKENS, CTR_LATE, CTR_VERY_LATE, CTR_DROPPED, CTR_N };
static const char *const COUNTER_NAMES[CTR_N] = { "preemptions",  "prefix_hits",     "prefix_queries",
                                                  "emu_tokens",   "emu_late_tokens", "emu_very_late_tokens",
                                                  "emu_dropped_s" };

static void server_figures(const st_metrics_sample *m, uint32_t n, st_rep_server *out)
{
    out->samples = 0;
    out->kv_usage_max = out->running_max = out->waiting_max = out->preemptions = out->prefix_hit_rate = NAN;
    out->emu_late_share = out->emu_very_late_share = out->emu_dropped_share = NAN;
    const struct {
        const char *name;
        double *max;
    } gauges[] = { { "kv_usage", &out->kv_usage_max },
                   { "running", &out->running_max },
                   { "waiting", &out->waiting_max } };
    double first[CTR_N], last[CTR_N], t_first[CTR_N], t_last[CTR_N], last_t = -1;
    for (int c = 0; c < CTR_N; c++)
        first[c] = last[c] = t_first[c] = t_last[c] = NAN;
    for (uint32_t i = 0; i < n; i++) {
        const char *k = m[i].name;
        double v = m[i].value;
        if (m[i].t != last_t) {
            out->samples++;
            last_t = m[i].t;
        }
        for (size_t g = 0; g < sizeof gauges / sizeof gauges[0]; g++)
            if (!strcmp(k, gauges[g].name) && (isnan(*gauges[g].max) || v > *gauges[g].max))
                *gauges[g].max = v;
        for (int c = 0; c < CTR_N; c++)
            if (!strcmp(k, COUNTER_NAMES[c])) {
                if (isnan(first[c])) {
                    first[c] = v;
                    t_first[c] = m[i].t;
                }
                last[c] = v;
                t_last[c] = m[i].t;
            }
    }
    double tokens = last[CTR_TOKENS] - first[CTR_TOKENS]; /* NAN when never sampled */
    if (!isnan(first[CTR_LATE]) && tokens > 0)
        out->emu_late_share = (last[CTR_LATE] - first[CTR_LATE]) / tokens;
    if (!isnan(first[CTR_VERY_LATE]) && tokens > 0)
        out->emu_very_late_share = (last[CTR_VERY_LATE] - first[CTR_VERY_LATE]) / tokens;
    if (!isnan(first[CTR_DROPPED]) && t_last[CTR_DROPPED] > t_first[CTR_DROPPED])
        out->emu_dropped_share =
            (last[CTR_DROPPED] - first[CTR_DROPPED]) / (t_last[CTR_DROPPED] - t_first[CTR_DROPPED]);
    if (!isnan(first[CTR_PREEMPT]))
        out->preemptions = last[CTR_PREEMPT] - first[CTR_PREEMPT];
    if (last[CTR_QUERIES] - first[CTR_QUERIES] > 0)
        out->prefix_hit_rate = (last[CTR_HITS] - first[CTR_HITS]) / (last[CTR_QUERIES] - first[CTR_QUERIES]);
}

/* The server-reported timings of a run's completed requests against the client's. */
static void server_timings(const st_record *recs, uint32_t n, st_rep_server *out)
{
    out->srv_n = 0;
    out->srv_prompt_p50_ms = out->srv_prompt_p99_ms = out->ttft_gap_p50_ms = out->ttft_gap_p99_ms = NAN;
    out->tpot_gap_p50_ms = out->tpot_gap_p99_ms = NAN;
    double *v = malloc((n ? n : 1) * sizeof *v);
    if (!v)
        return;
    st_dist d[3];
    for (int f = 0; f < 3; f++) {
        uint32_t k = 0;
        for (uint32_t i = 0; i < n; i++) {
            const st_record *r = &recs[i];
            if (r->warmup || r->status != ST_REQ_OK || r->srv_prompt < 0)
                continue;
            v[k++] = f == 0   ? st_ns_to_s(r->srv_prompt)
                     : f == 1 ? st_record_srv_ttft_gap(r)
                              : st_record_srv_tpot_gap(r);
        }
        st_dist_compute(v, k, &d[f]);
    }
    free(v);
    out->srv_n = d[0].n;
    out->srv_prompt_p50_ms = d[0].p50 * 1e3;
    out->srv_prompt_p99_ms = d[0].p99 * 1e3;
    out->ttft_gap_p50_ms = d[1].p50 * 1e3;
    out->ttft_gap_p99_ms = d[1].p99 * 1e3;
    out->tpot_gap_p50_ms = d[2].p50 * 1e3;
    out->tpot_gap_p99_ms = d[2].p99 * 1e3;
}

/* One run's server figures and notes digest, from its stored samples and records. */
static void run_figures(st_store *s, int64_t run_id, st_rep_server *sv, st_notes_run *dg)
{
    st_metrics_sample *m = NULL;
    uint32_t nm = 0;
    if (st_store_samples_get(s, run_id, &m, &nm)) {
        m = NULL;
        nm = 0;
    }
    st_record *recs = NULL;
    uint32_t nr = 0;
    if (st_store_records_get(s, run_id, &recs, &nr)) {
        recs = NULL;
        nr = 0;
    }
    server_figures(m, nm, sv);
    server_timings(recs, nr, sv);
    st_notes_run_digest(recs, nr, m, nm, dg);
    if (m)
        st_store_samples_free(m, nm);
    st_records_free(recs, nr);
}

/* A session run's figures per turn, from its stored records. */
static void session_turns(st_store *s, int64_t run_id, st_rep_cfg *c)
{
    st_record *recs = NULL;
    uint32_t nr = 0;
    if (st_store_records_get(s, run_id, &recs, &nr))
        return;
    int n = st_turn_rows(recs, nr, c->turns);
    c->n_turns = n > 0 ? n : 0;
    /* each task's makespan (a task is a session: agent tasks, conversations) */
    double *mv = malloc(sizeof *mv * (nr ? nr : 1));
    int m = mv ? st_agent_makespans(recs, nr, 0, 1e-9, INFINITY, -INFINITY, INFINITY, 0, 0, mv) : -1;
    st_dist d;
    st_dist_compute(mv, m > 0 ? (uint32_t)m : 0, &d);
    c->tasks_done = m > 0 ? (uint32_t)m : 0;
    c->makespan_p50_ms = d.p50 * 1e3;
    c->makespan_p95_ms = d.p95 * 1e3;
    free(mv);
    st_records_free(recs, nr);
}

/* Sessions: the capacity in requests/s is what the engine delivered at the highest passing
 * session rate (a sustained search's capacity is otherwise its offered rate, which here counts
 * session starts, not requests). */
static void session_capacity(const st_rep_cfg *c, st_capacity *k)
{
    if (k->has_pass && k->pass_index >= 0 && k->pass_index < c->n_runs &&
        isfinite(c->runs[k->pass_index].delivered_rps)) {
        k->capacity_rps = c->runs[k->pass_index].delivered_rps;
        /* priced on the same request rate: its tokens per request at that rate */
        if (k->out_tokens_mean > 0)
            k->output_tps = k->capacity_rps * k->out_tokens_mean;
    }
}

/* The workload's mean turns per session: the spec's for synthetic sessions, the trace's (its
 * traffic summary) for a trace; NAN when unknown. */
static double session_mean_turns(const st_report *r)
{
    if (r->spec.workload.kind == ST_WL_SYNTHETIC || r->spec.workload.agent)
        return st_spec_turns_mean(&r->spec);
    json_t *ss = r->traffic.json ? json_object_get(r->traffic.json, "sessions") : NULL;
    json_t *tm = ss ? json_object_get(ss, "turns_mean") : NULL;
    return json_is_number(tm) && json_number_value(tm) > 0 ? json_number_value(tm) : NAN;
}

/* An agent trace's requests per task in configuration c's runs: the whole trace's, or, when they
 * left out the tasks holding a request over its context (the row's "agent_over_context" fact), the
 * other tasks'. */
static double agent_requests_per_task(const st_report *r, const st_rep_cfg *c)
{
    double whole = st_spec_turns_mean(&r->spec);
    json_t *j = c->row && c->row->facts ? json_loads(c->row->facts, 0, NULL) : NULL;
    json_t *o = json_object_get(j, "agent_over_context");
    json_int_t t = json_integer_value(json_object_get(o, "tasks")),
               tof = json_integer_value(json_object_get(o, "tasks_of")),
               q = json_integer_value(json_object_get(o, "requests")),
               qof = json_integer_value(json_object_get(o, "requests_of"));
    json_decref(j);
    return t > 0 && tof > t && qof > q ? (double)(qof - q) / (double)(tof - t) : whole;
}

void st_report_free(st_report *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->n_cfg; i++) {
        free(r->cfg[i].rr);
        free(r->cfg[i].server);
        free(r->cfg[i].digest);
        free(r->cfg[i].sus);
        free(r->cfg[i].has_sus);
    }
    st_notes_free(&r->notes);
    st_rep_traffic_free(&r->traffic);
    json_decref(r->who_pays);
    r->who_pays = NULL;
    json_decref(r->agent_trace);
    r->agent_trace = NULL;
    st_predvs_free(&r->predvs);
    st_rep_quality_free(&r->quality);
    free(r->cfg);
    free(r->order);
    st_run_rows_free(r->runs, r->n_runs);
    st_config_rows_free(r->rows, r->n_rows);
    st_spec_free(&r->spec);
    st_audit_row_free(&r->audit);
    memset(r, 0, sizeof *r);
}

/* Cheapest first: passing configurations by $ per 1M output tokens, then those that passed
 * nowhere, failed, not run; ties keep the spec's order. */
static int before(const st_report *r, int a, int b)
{
    const st_rep_cfg *x = &r->cfg[a], *y = &r->cfg[b];
    if (x->status != y->status)
        return x->status < y->status;
    if (x->status == ST_REP_OK && x->cost.usd_per_1m != y->cost.usd_per_1m)
        return x->cost.usd_per_1m < y->cost.usd_per_1m;
    return a < b;
}

/* A traffic day from the trace (traffic.hourly_rps: trace): its hours read back from the traffic
 * the audit stored (the trace file need not be here), else from the trace itself when it is. */
static void day_from_traffic(st_report *out)
{
    st_spec *s = &out->spec;
    if (!s->traffic.set || s->traffic.day_source != ST_DAY_FROM_TRACE)
        return;
    json_t *h = json_object_get(json_object_get(out->traffic.json, "rate"), "hourly");
    if (!json_is_object(h)) {
        char err[512];
        (void)st_audit_resolve_day(s, err, sizeof err); /* unreadable: the day stays unpriced, and says so */
        return;
    }
    st_hourly_profile p;
    memset(&p, 0, sizeof p);
    const char *clock = json_string_value(json_object_get(h, "clock"));
    p.clock = clock && !strcmp(clock, "utc")                  ? ST_HOURLY_UTC
              : clock && !strcmp(clock, "from_first_request") ? ST_HOURLY_FROM_FIRST
                                                              : ST_HOURLY_NONE;
    json_t *rps = json_object_get(h, "rps"), *cov = json_object_get(h, "covered_s");
    for (int i = 0; i < 24; i++) {
        json_t *v = json_array_get(rps, (size_t)i);
        p.rps[i] = json_is_number(v) && json_number_value(v) >= 0 ? json_number_value(v) : NAN;
        p.covered_s[i] = json_number_value(json_array_get(cov, (size_t)i));
    }
    st_audit_day_from_hourly(s, &p);
}

/* Each configuration that met the SLO, priced over the spec's traffic day at its capacity, on
 * the spec's GPU and price; serverless at the built-in list's price for that GPU unless the spec
 * gives one. */
static void traffic_day(st_report *out)
{
    day_from_traffic(out); /* a day from the trace: its hours first */
    const st_spec *s = &out->spec;
    if (!s->traffic.set)
        return;
    st_prices list;
    char err[256];
    int have_list = st_prices_builtin(&list, err, sizeof err) == 0;
    for (int i = 0; i < out->n_cfg; i++) {
        st_rep_cfg *c = &out->cfg[i];
        if (c->status != ST_REP_OK)
            continue;
        st_day_setup u = { .capacity_rps = c->cap->capacity_rps,
                           .gpus_per_replica = s->hardware.gpus_per_replica,
                           .price_per_gpu_hour = s->hardware.price_per_gpu_hour,
                           .gpu_key = s->hardware.gpu,
                           .ttft_ms = c->ttft_p95_ms,
                           .tpot_ms = c->tpot_p95_ms };
        st_day_serverless sl;
        if (st_day_of_spec(s, have_list ? &list : NULL, &u, &c->day, &sl, err, sizeof err))
            continue;
        c->day_ok = 1;
        out->day_present = 1;
        out->day_serverless_price_per_gpu_s = sl.price_per_gpu_s;
        snprintf(out->day_serverless_from, sizeof out->day_serverless_from, "%s", sl.from ? sl.from : "");
    }
    if (have_list)
        st_prices_free(&list);
}

/* `peak_rate: trace`: the peak the audit took from its trace, read back from the traffic it stored
 * (the trace file need not be here): the busiest complete minute, else the mean rate. */
static void peak_from_traffic(st_report *out)
{
    if (out->spec.peak_source == ST_PEAK_STATED)
        return;
    if (!out->traffic.json) { /* none stored: the trace itself, when it is still there (else no peak: 0 replicas) */
        char err[512];
        (void)st_audit_resolve_peak(&out->spec, err, sizeof err);
        return;
    }
    json_t *rate = json_object_get(out->traffic.json, "rate");
    json_t *pk = json_object_get(rate, "peak_minute_rps"), *mean = json_object_get(rate, "mean_rps");
    if (json_integer_value(json_object_get(rate, "minutes")) > 0 && json_is_number(pk) && json_number_value(pk) > 0) {
        out->spec.peak_rate = json_number_value(pk);
        out->spec.peak_source = ST_PEAK_BUSIEST_MINUTE;
    } else if (json_is_number(mean) && json_number_value(mean) > 0) {
        out->spec.peak_rate = json_number_value(mean);
        out->spec.peak_source = ST_PEAK_TRACE_MEAN;
    }
}

/* The JSON the run stored beside its rows: "Who pays" and an agent trace's shape (unreadable: the
 * section is left out). */
static void load_meta_json(st_store *s, st_report *out)
{
    char *wp = NULL, *at = NULL;
    if (st_store_meta_get(s, "who_pays", &wp) == 1)
        out->who_pays = st_rep_who_pays_load(wp);
    if (out->spec.workload.agent && st_store_meta_get(s, "agent_trace", &at) == 1)
        out->agent_trace = json_loads(at, 0, NULL);
    free(wp);
    free(at);
}

/* The report freed and the error said: -1. */
static int load_fail(st_report *out, char *err, size_t errlen, const char *what)
{
    snprintf(err, errlen, "%s", what);
    st_report_free(out);
    return -1;
}

/* What the store holds of the audit: its row, its spec parsed, the configurations' and runs' rows,
 * the traffic (and the peak it gives), the stored JSON (who pays, an agent trace) and the
 * prediction's summary. 0, or -1 with err (out freed). */
static int load_stored(st_store *s, st_report *out, char *err, size_t errlen)
{
    int have = st_store_audit_get(s, &out->audit);
    if (have <= 0) {
        snprintf(err, errlen, have < 0 ? "results database: %s" : "the results database holds no audit%s",
                 have < 0 ? st_store_errmsg(s) : "");
        return -1;
    }
    char perr[512];
    if (st_spec_parse(out->audit.spec_path ? out->audit.spec_path : "spec", out->audit.spec_text,
                      strlen(out->audit.spec_text), &out->spec, perr, sizeof perr)) {
        snprintf(err, errlen, "stored spec: %s", perr);
        st_report_free(out);
        return -1;
    }
    if (st_store_configs_get(s, &out->rows, &out->n_rows) || st_store_runs_get(s, NULL, &out->runs, &out->n_runs)) {
        snprintf(err, errlen, "results database: %s", st_store_errmsg(s));
        st_report_free(out);
        return -1;
    }
    (void)st_rep_traffic_load(out->audit.traffic, &out->traffic); /* unreadable: the section is left out */
    peak_from_traffic(out);
    load_meta_json(s, out);
    char *pv = NULL;
    if (st_store_meta_get(s, ST_PREDVS_META, &pv) == 1)
        st_predvs_parse(pv, &out->predvs); /* a malformed summary is simply not shown */
    free(pv);
    out->refine = out->spec.search.mode == ST_SEARCH_REFINE;
    out->sustained = out->spec.search.mode == ST_SEARCH_SUSTAINED;
    return 0;
}

/* A configuration's row and runs, and each run's result, sustained figures, replicate and server
 * figures. 0, or -1 out of memory. */
static int cfg_runs(st_store *s, st_report *out, st_rep_cfg *c)
{
    for (int j = 0; j < out->n_rows; j++)
        if (!strcmp(out->rows[j].name, c->name))
            c->row = &out->rows[j];
    for (int j = 0; j < out->n_runs; j++)
        if (!strcmp(out->runs[j].config, c->name)) {
            if (!c->runs)
                c->runs = &out->runs[j];
            c->n_runs++;
        }
    c->rr = calloc((size_t)(c->n_runs ? c->n_runs : 1), sizeof *c->rr);
    c->server = calloc((size_t)(c->n_runs ? c->n_runs : 1), sizeof *c->server);
    c->digest = calloc((size_t)(c->n_runs ? c->n_runs : 1), sizeof *c->digest);
    c->sus = calloc((size_t)(c->n_runs ? c->n_runs : 1), sizeof *c->sus);
    c->has_sus = calloc((size_t)(c->n_runs ? c->n_runs : 1), 1);
    if (!c->rr || !c->server || !c->digest || !c->sus || !c->has_sus)
        return -1;
    for (int j = 0; j < c->n_runs; j++) {
        const st_run_row *rw = &c->runs[j];
        st_sustain_row_result(rw, &c->rr[j]);
        c->has_sus[j] = rw->summary_json && st_sustain_from_json(rw->summary_json, &c->sus[j]) == 0;
        for (int k = 0; k < j; k++) /* the k-th run at the same rate is its k-th replicate */
            c->rr[j].replicate += c->runs[k].rate == rw->rate && strcmp(c->runs[k].verdict, "skipped");
        run_figures(s, rw->id, &c->server[j], &c->digest[j]);
    }
    return 0;
}

/* A configuration's capacity (sustained, grid, refined; per session), its cost, and the p95s of
 * its capacity run. */
static void cfg_capacity(st_store *s, const st_report *out, st_rep_cfg *c)
{
    if (out->sustained) {
        st_sustained_params sp;
        st_sustained_params_of(&out->spec, 0, &sp);
        st_capacity_sustained(&sp, c->rr, c->n_runs, &c->refined);
        c->grid = c->refined;
        c->cap = &c->refined;
    } else {
        st_capacity_compute(c->rr, c->n_runs, 1, &c->grid);
        st_capacity_compute(c->rr, c->n_runs, 0, &c->refined);
        c->cap = out->refine ? &c->refined : &c->grid;
    }
    if (out->spec.workload.sessions.on) {
        session_capacity(c, &c->grid);
        session_capacity(c, &c->refined);
    }
    st_cost_in ci = { .capacity_rps = c->cap->capacity_rps,
                      .output_tps = c->cap->output_tps,
                      .price_per_gpu_hour = out->spec.hardware.price_per_gpu_hour,
                      .gpus_per_replica = out->spec.hardware.gpus_per_replica,
                      .peak_rps = out->spec.peak_rate };
    st_cost_compute(&ci, &c->cost);
    c->ttft_p95_ms = c->tpot_p95_ms = NAN;
    c->requests_per_session = !out->spec.workload.sessions.on ? NAN
                              : out->spec.workload.agent      ? agent_requests_per_task(out, c)
                                                              : session_mean_turns(out);
    if (c->cap->has_pass) {
        const st_run_row *pr = &c->runs[c->cap->pass_index];
        /* terms 0 and 1 are always p95 TTFT and p95 TPOT (sustained: over the window) */
        c->ttft_p95_ms = st_run_row_term_ms(pr, 0);
        c->tpot_p95_ms = st_run_row_term_ms(pr, 1);
        if (out->spec.workload.sessions.on)
            session_turns(s, pr->id, c);
    }
}

/* A configuration's status (met the SLO, failed, none passed, not run) and its note in words. */
static void cfg_status(const st_report *out, st_rep_cfg *c)
{
    c->ran = 0;
    const char *first = NULL; /* the first verdict of a run that ran */
    for (int j = 0; j < c->n_runs; j++)
        if (strcmp(c->runs[j].verdict, "skipped")) {
            first = first ? first : c->runs[j].verdict;
            c->ran++;
        }
    int failed = c->row && c->row->status && !strcmp(c->row->status, "failed");
    if (c->cap->has_pass && c->cost.valid) {
        c->status = ST_REP_OK;
        if (failed)
            snprintf(c->note, sizeof c->note, "the engine failed during the run (%s): %s",
                     c->row->failure_class ? c->row->failure_class : "?",
                     c->row->failure_detail ? c->row->failure_detail : "");
    } else if (failed) {
        c->status = ST_REP_FAILED;
        snprintf(c->note, sizeof c->note, "%s: %s", c->row->failure_class ? c->row->failure_class : "failed",
                 c->row->failure_detail ? c->row->failure_detail : "");
    } else if (c->cap->n_measured > 0) {
        c->status = ST_REP_NONE_PASSED;
        /* the lowest rate's reason */
        const st_run_row *low = NULL;
        for (int j = 0; j < c->n_runs; j++)
            if (strcmp(c->runs[j].verdict, "skipped") && (!low || c->runs[j].rate < low->rate))
                low = &c->runs[j];
        snprintf(c->note, sizeof c->note, "at %g req/s: %s", low ? low->rate : 0, low && low->why ? low->why : "");
    } else {
        /* nothing decided: not reached, or reached and its runs gave no verdict (undecided,
         * errors) before the audit ended */
        c->status = ST_REP_NOT_RUN;
        if (c->ran)
            snprintf(c->note, sizeof c->note, "its %d run%s decided nothing (%s%s)%s", c->ran, c->ran == 1 ? "" : "s",
                     first, c->ran > 1 ? ", ..." : "", out->audit.partial ? " before the audit was interrupted" : "");
        else
            snprintf(c->note, sizeof c->note, "%s",
                     out->audit.partial ? "not run: the audit was interrupted" : "not run");
    }
}

/* Each configuration against the baseline (capacity, cost), and the configurations in the
 * report's order. */
static void rank_configs(st_report *out)
{
    const st_rep_cfg *b = &out->cfg[0];
    for (int i = 0; i < out->n_cfg; i++) {
        st_rep_cfg *c = &out->cfg[i];
        c->cap_vs_base = (c->status == ST_REP_OK && b->status == ST_REP_OK)
                             ? st_cost_rel_change(c->cap->capacity_rps, b->cap->capacity_rps)
                             : NAN;
        c->cost_vs_base = (c->status == ST_REP_OK && b->status == ST_REP_OK)
                              ? st_cost_rel_change(c->cost.usd_per_1m, b->cost.usd_per_1m)
                              : NAN;
    }
    for (int i = 1; i < out->n_cfg; i++)
        for (int j = i; j > 0 && before(out, out->order[j], out->order[j - 1]); j--) {
            int t = out->order[j];
            out->order[j] = out->order[j - 1];
            out->order[j - 1] = t;
        }
}

int st_report_load(st_store *s, st_report *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->pick = -1;
    if (load_stored(s, out, err, errlen))
        return -1;
    out->n_cfg = out->spec.n_configs;
    out->cfg = calloc((size_t)out->n_cfg, sizeof *out->cfg);
    out->order = calloc((size_t)out->n_cfg, sizeof *out->order);
    if (!out->cfg || !out->order || st_rep_quality_load(s, out))
        return load_fail(out, err, errlen, "out of memory");
    st_cost_pick_in *pk = calloc((size_t)out->n_cfg, sizeof *pk);
    if (!pk)
        return load_fail(out, err, errlen, "out of memory");
    for (int i = 0; i < out->n_cfg; i++) {
        st_rep_cfg *c = &out->cfg[i];
        c->spec = &out->spec.configs[i];
        c->name = c->spec->name;
        if (cfg_runs(s, out, c)) {
            free(pk);
            return load_fail(out, err, errlen, "out of memory");
        }
        cfg_capacity(s, out, c);
        cfg_status(out, c);
        /* beyond a quality limit: never the pick (report/quality.h) */
        pk[i] = (st_cost_pick_in){ c->status == ST_REP_OK && !st_rep_quality_fails(out, i), c->cost.usd_per_1m,
                                   c->cap->capacity_rps };
        out->order[i] = i;
    }
    out->pick = st_cost_pick(pk, out->n_cfg);
    free(pk);
    rank_configs(out);
    traffic_day(out);
    if (st_notes_build(out, &out->notes))
        return load_fail(out, err, errlen, "out of memory building the notes");
    return 0;
}

void st_report_term_name(const st_spec *s, int term, char *out, size_t n)
{
    if (term < 0 || term >= s->slo.n) {
        snprintf(out, n, "-");
        return;
    }
    const char *m = st_slo_metric_name(s->slo.terms[term].metric);
    char up[16]; /* the longest metric name, "makespan", upper-cased */
    size_t k;
    for (k = 0; m[k] && k + 1 < sizeof up; k++)
        up[k] = (char)(m[k] >= 'a' && m[k] <= 'z' ? m[k] - 32 : m[k]);
    up[k] = '\0';
    snprintf(out, n, "p%g %s", s->slo.terms[term].pct, up);
}

void st_report_binding(const st_report *r, const st_rep_cfg *c, char *out, size_t n)
{
    const st_capacity *k = c->cap;
    if (k->binding >= 0)
        st_report_term_name(&r->spec, k->binding, out, n);
    else if (k->binding_oversat)
        snprintf(out, n, "over-saturation");
    else if (k->fail_index >= 0 && k->fail_index < c->n_runs && c->rr[k->fail_index].verdict == ST_VERDICT_OVERSAT)
        snprintf(out, n, "over-saturation");
    else if (k->fail_index >= 0 && k->fail_index < c->n_runs && c->has_sus[k->fail_index] &&
             c->sus[k->fail_index].binding >= 0)
        st_report_term_name(&r->spec, c->sus[k->fail_index].binding, out, n);
    else
        snprintf(out, n, "-");
}

const char *st_report_verdict_words(const st_report *r, const st_run_row *w)
{
    return st_verdict_words(st_verdict_from_name(w->verdict), r->sustained);
}

void st_report_rate_grid(const st_spec *s, char *out, size_t n)
{
    char t[32];
    size_t off = 0;
    if (n)
        out[0] = '\0';
    for (int i = 0; i < s->n_rates && off < n; i++) {
        st_fmt_rate(t, sizeof t, s->rates[i]);
        off += (size_t)snprintf(out + off, n - off, "%s%s", i ? ", " : "", t);
    }
}

void st_report_search_start(const st_report *r, const char *grid, char *out, size_t n)
{
    const st_spec *s = &r->spec;
    char why[256];
    /* sweep.c start_of: the engine model's forecast in a measured audit of an engine it models */
    int forecast = !r->audit.prediction && st_exec_model_supported(s, why, sizeof why) &&
                   (s->search.start == ST_START_AUTO || s->search.start == ST_START_PREDICT);
    /* multi-turn sessions: the rates count session starts */
    const char *what = s->closed_loop ? "concurrency levels" : "rates", *sp = s->closed_loop ? "" : " ",
               *unit = s->closed_loop ? "" : st_spec_rate_unit(s);
    if (s->search.start == ST_START_RATE)
        snprintf(out, n, "it starts at %g%s%s", s->search.start_rate, s->closed_loop ? " concurrent requests" : sp,
                 unit);
    else if (forecast)
        snprintf(
            out, n,
            "it starts near the engine model's forecast of each configuration's capacity; the %s %s%s%s are its grid",
            what, grid, sp, unit);
    else
        snprintf(out, n, "the %s %s%s%s are where it starts", what, grid, sp, unit);
}

static double shape_num(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

void st_report_agent_shape_text(const st_report *r, st_buf *b)
{
    const json_t *a = r->agent_trace, *fo = a ? json_object_get(a, "fan_out") : NULL;
    if (!a)
        return;
    st_buf_printf(b,
                  "The trace: %.0f tasks, %.0f requests (%.0f in background sub-agents), %.0f fan-out points "
                  "(widest %.0f), %.0f joins, %.0f levels deep at most; an ideal prefix cache would hit %.1f %% of "
                  "its prompt tokens (servetune trace stats).",
                  shape_num(a, "tasks"), shape_num(a, "requests"), shape_num(a, "background_requests"),
                  shape_num(fo, "nodes"), shape_num(fo, "width_max"), shape_num(a, "joins"),
                  shape_num(a, "depth_max") + 1, 100 * shape_num(a, "ideal_prefix_hit_rate"));
}

const char *st_report_agent_format(const st_spec *s)
{
    return s->workload.agent == ST_AGENT_FMT_WEKA ? "WEKA-style agentic trace" : "task-graph JSONL";
}

void st_report_agent_text(const st_report *r, st_buf *b)
{
    const st_spec *s = &r->spec;
    st_buf_printf(b,
                  "replayed agent trace %s (%s, %.3g requests per task on average): each task's first request on "
                  "the arrival schedule (the trace's task starts scaled to the offered rate, else %s arrivals), "
                  "every other request sent when the last of its parents answered plus its recorded gap (open loop "
                  "across tasks, closed within one), the trace repeated with fresh prompt ids as long as a run "
                  "needs; the rates are tasks starting per second (tasks/s), the capacity also in requests/s "
                  "delivered; %u warm-up requests (tasks' first requests)",
                  s->workload.trace ? s->workload.trace : "-", st_report_agent_format(s),
                  s->workload.agent_requests_per_task,
                  s->workload.arrival && strcmp(s->workload.arrival, "poisson") ? s->workload.arrival : "poisson",
                  s->warmup_requests);
}

void st_report_run_length(const st_report *r, const char *after, char *out, size_t n)
{
    if (r->sustained)
        snprintf(out, n, "runs as long as a steady state needs%s", after);
    else
        snprintf(out, n, "%u requests per %s", r->spec.workload.requests_per_rate,
                 r->spec.closed_loop ? "level" : "rate");
}

void st_report_synthetic_text(const st_report *r, st_buf *b)
{
    const st_spec *s = &r->spec;
    char per[96];
    st_report_run_length(r, "", per, sizeof per);
    st_buf_printf(b,
                  "synthetic prompts, %.0f input tokens and %u output tokens on average (spread +-%.0f %%%s), a "
                  "shared prefix of %u tokens; %s after %u warm-up requests; %s, seed %llu",
                  st_spec_mean_input(s), s->workload.output_tokens, s->workload.range_ratio * 100,
                  s->workload.vllm_semantics ? " of the part after the prefix, as vllm bench serve's random dataset"
                                             : "",
                  s->workload.shared_prefix, per, s->warmup_requests,
                  s->closed_loop ? "closed loop (each request sent when one ends)"
                  : s->workload.arrival && strcmp(s->workload.arrival, "poisson") ? s->workload.arrival
                                                                                  : "poisson arrivals",
                  (unsigned long long)s->workload.seed);
}
