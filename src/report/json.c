#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/version.h"
#include "load/agent.h"
#include "report/whopays_day.h"
#include "report/format.h"
#include "report/day.h"
#include "report/distrust.h"
#include "report/report.h"

static json_t *rate(double v) { return isinf(v) ? json_string("inf") : st_jnum_or_null(v); }
static json_t *str(const char *s) { return s ? json_string(s) : json_null(); }

static json_t *iso(long long wall_ns)
{
    if (wall_ns <= 0)
        return json_null();
    time_t t = (time_t)(wall_ns / 1000000000LL);
    struct tm tm;
    char b[32];
    if (!gmtime_r(&t, &tm))
        return json_null();
    strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return json_string(b);
}

static json_t *strv(const st_strv *v)
{
    json_t *a = json_array();
    for (int i = 0; i < v->n; i++)
        json_array_append_new(a, json_string(v->v[i]));
    return a;
}

static json_t *envv(const st_envv *e)
{
    json_t *o = json_object();
    for (int i = 0; i < e->n; i++)
        json_object_set_new(o, e->key[i], json_string(e->val[i]));
    return o;
}

static json_t *spec_json(const st_report *r)
{
    const st_spec *s = &r->spec;
    json_t *o = json_object();
    json_object_set_new(o, "path", str(r->audit.spec_path));
    json_object_set_new(o, "sha256", json_string(r->audit.spec_hash));
    json_t *e = json_object();
    json_object_set_new(e, "kind", json_string(st_engine_kind_name(s->engine.kind)));
    json_object_set_new(e, "model", json_string(s->engine.model));
    json_object_set_new(e, "flags", strv(&s->engine.flags));
    json_object_set_new(e, "url", str(s->engine.url));
    json_object_set_new(o, "engine", e);
    json_t *h = json_object();
    json_object_set_new(h, "gpu", json_string(s->hardware.gpu));
    json_object_set_new(h, "gpus_per_replica", json_integer(s->hardware.gpus_per_replica));
    json_object_set_new(h, "price_per_gpu_hour", json_real(s->hardware.price_per_gpu_hour));
    json_object_set_new(o, "hardware", h);
    json_object_set_new(o, "peak_rate", isfinite(s->peak_rate) ? json_real(s->peak_rate) : json_null());
    json_object_set_new(o, "peak_source",
                        json_string(s->peak_source == ST_PEAK_BUSIEST_MINUTE ? "trace_busiest_minute"
                                    : s->peak_source == ST_PEAK_TRACE_MEAN   ? "trace_mean"
                                    : s->peak_source == ST_PEAK_FROM_TRACE   ? "trace_unresolved"
                                                                             : "stated"));
    json_t *w = json_object();
    if (s->workload.kind == ST_WL_SYNTHETIC) {
        json_object_set_new(w, "kind", json_string("synthetic"));
        json_object_set_new(w, "input_tokens", json_integer(s->workload.input_tokens));
        json_object_set_new(w, "output_tokens", json_integer(s->workload.output_tokens));
        json_object_set_new(w, "range_ratio", json_real(s->workload.range_ratio));
        json_object_set_new(w, "shared_prefix", json_integer(s->workload.shared_prefix));
        json_object_set_new(w, "semantics", json_string(s->workload.vllm_semantics ? "vllm" : "servetune"));
    } else if (s->workload.agent) { /* an agent-trace audit: its task graphs replayed, rates in tasks/s */
        json_object_set_new(w, "kind", json_string("agent_trace"));
        json_object_set_new(w, "trace", json_string(s->workload.trace));
        json_object_set_new(w, "agent_format",
                            json_string(s->workload.agent == ST_AGENT_FMT_WEKA ? "weka" : "task-graph"));
        json_object_set_new(w, "requests_per_task", json_real(s->workload.agent_requests_per_task));
    } else {
        json_object_set_new(w, "kind", json_string("trace"));
        json_object_set_new(w, "trace", json_string(s->workload.trace));
    }
    json_object_set_new(w, "requests_per_rate", json_integer(s->workload.requests_per_rate));
    json_object_set_new(w, "seed", json_integer((json_int_t)s->workload.seed));
    json_object_set_new(w, "arrival", json_string(s->workload.arrival ? s->workload.arrival : "poisson"));
    if (s->workload.sessions.on) {
        json_t *ss = json_object();
        json_object_set_new(ss, "mode", json_string(s->workload.agent ? "agent_tasks" : "replay"));
        json_object_set_new(ss, "rate_unit", json_string(st_spec_rate_unit(s)));
        if (s->workload.kind == ST_WL_TRACE && s->workload.sessions.think_set)
            json_object_set_new(ss, "think_time_s", json_real(s->workload.sessions.think_s));
        if (s->workload.kind == ST_WL_SYNTHETIC) {
            json_object_set_new(ss, "turns_min", json_integer(s->workload.sessions.turns_min));
            json_object_set_new(ss, "turns_max", json_integer(s->workload.sessions.turns_max));
            json_object_set_new(ss, "user_tokens", json_integer(s->workload.sessions.user_tokens));
            json_object_set_new(ss, "think_time_s", json_real(s->workload.sessions.think_s));
            json_object_set_new(ss, "think", json_string(s->workload.sessions.think_exp ? "exponential" : "constant"));
        }
        json_object_set_new(w, "sessions", ss);
    }
    json_object_set_new(o, "workload", w);
    json_t *ra = json_array();
    for (int i = 0; i < s->n_rates; i++)
        json_array_append_new(ra, rate(s->rates[i]));
    json_object_set_new(o, "rates", ra);
    json_object_set_new(o, "warmup_requests", json_integer(s->warmup_requests));
    json_t *slo = json_array();
    for (int i = 0; i < s->slo.n; i++) {
        json_t *t = json_object();
        json_object_set_new(t, "metric", json_string(st_slo_metric_name(s->slo.terms[i].metric)));
        json_object_set_new(t, "percentile", json_real(s->slo.terms[i].pct));
        json_object_set_new(t, "max_ms", json_real(s->slo.terms[i].max_ms));
        json_array_append_new(slo, t);
    }
    json_object_set_new(o, "slo", slo);
    json_t *se = json_object();
    json_object_set_new(se, "mode", json_string(st_search_mode_name(s->search.mode)));
    json_object_set_new(se, "tolerance", json_real(s->search.tolerance));
    json_object_set_new(se, "request_budget", json_integer(s->search.request_budget));
    json_object_set_new(se, "early_stop", json_boolean(s->search.early_stop));
    json_object_set_new(se, "skip_margin", json_real(s->search.skip_margin));
    json_object_set_new(se, "confidence", json_real(s->search.confidence));
    json_object_set_new(se, "max_duration_s", json_real(s->search.max_duration_s));
    json_object_set_new(se, "min_window_s", json_real(s->search.min_window_s));
    json_object_set_new(se, "min_window_requests", json_integer(s->search.min_window_requests));
    json_object_set_new(se, "warmup_e2e", json_real(s->search.warmup_e2e));
    json_object_set_new(se, "max_runs", json_integer(s->search.max_runs));
    json_object_set_new(se, "max_replicates", json_integer(s->search.max_replicates));
    json_object_set_new(o, "concurrency", json_boolean(s->closed_loop));
    json_object_set_new(o, "search", se);
    return o;
}

/* Multi-turn sessions at the capacity: the session rate (pass_rate is in sessions/s, rps in
 * requests/s delivered; an agent trace's tasks: tasks_per_s too), the requests per session and
 * the figures of each turn. */
static json_t *sessions_json(const st_rep_cfg *c, int agent)
{
    json_t *o = json_object();
    json_object_set_new(o, "sessions_per_s", c->cap->has_pass ? st_jnum_or_null(c->cap->pass_rate) : json_null());
    if (agent) /* an agent-trace audit: a session is a task of the trace */
        json_object_set_new(o, "tasks_per_s", c->cap->has_pass ? st_jnum_or_null(c->cap->pass_rate) : json_null());
    json_object_set_new(o, "requests_per_session", st_jnum_or_null(c->requests_per_session));
    json_object_set_new(o, "tasks_completed", json_integer(c->tasks_done)); /* a session is a task */
    json_object_set_new(o, "makespan_p50_ms", c->tasks_done ? st_jnum_or_null(c->makespan_p50_ms) : json_null());
    json_object_set_new(o, "makespan_p95_ms", c->tasks_done ? st_jnum_or_null(c->makespan_p95_ms) : json_null());
    json_t *a = json_array();
    for (int t = 0; t < c->n_turns; t++) {
        const st_turn_row *w = &c->turns[t];
        if (!w->requests)
            continue;
        json_t *x = json_object();
        json_object_set_new(x, "turn", json_integer(w->turn));
        json_object_set_new(x, "and_later", json_boolean(t == ST_TURN_ROWS - 1));
        json_object_set_new(x, "requests", json_integer(w->requests));
        json_object_set_new(x, "completed", json_integer(w->completed));
        json_t *tt = json_object();
        json_object_set_new(tt, "p50", st_jnum_or_null(w->completed ? w->ttft.p50 * 1e3 : NAN));
        json_object_set_new(tt, "p95", st_jnum_or_null(w->completed ? w->ttft.p95 * 1e3 : NAN));
        json_object_set_new(tt, "p99", st_jnum_or_null(w->completed ? w->ttft.p99 * 1e3 : NAN));
        json_object_set_new(x, "ttft_ms", tt);
        json_object_set_new(x, "prompt_tokens", json_integer((json_int_t)w->prompt_tokens));
        json_object_set_new(x, "cached_tokens", json_integer((json_int_t)w->cached_tokens));
        json_object_set_new(x, "cached_share", st_jnum_or_null(st_turn_cached_share(w)));
        json_array_append_new(a, x);
    }
    json_object_set_new(o, "turns", a);
    return o;
}

static json_t *capacity_json(const st_report *r, const st_rep_cfg *c)
{
    const st_capacity *k = c->cap;
    json_t *o = json_object();
    json_object_set_new(o, "rps", st_jnum_or_null(k->capacity_rps));
    json_object_set_new(o, "pass_rate", k->has_pass ? rate(k->pass_rate) : json_null());
    json_object_set_new(o, "fail_rate", k->has_fail_above ? rate(k->fail_rate) : json_null());
    json_object_set_new(o, "fail_undecided", json_boolean(k->has_fail_above && k->fail_undecided));
    json_object_set_new(o, "highest_tested_passed", json_boolean(k->has_pass && k->highest_tested_passed));
    json_object_set_new(o, "output_tps", st_jnum_or_null(k->output_tps));
    json_object_set_new(o, "sustained_rps", st_jnum_or_null(k->sustained_rps));
    json_object_set_new(o, "ttft_p95_ms", st_jnum_or_null(c->ttft_p95_ms));
    json_object_set_new(o, "tpot_p95_ms", st_jnum_or_null(c->tpot_p95_ms));
    json_object_set_new(o, "grid_rps", st_jnum_or_null(c->grid.capacity_rps));
    json_object_set_new(o, "refined_rps", st_jnum_or_null(r->refine ? c->refined.capacity_rps : NAN));
    json_object_set_new(o, "warmup_effect", json_boolean(k->warmup_effect));
    json_object_set_new(o, "non_monotonic", json_boolean(k->non_monotonic));
    json_object_set_new(o, "method", json_string(st_spec_method_name(&r->spec)));
    if (r->sustained) {
        char bind[48];
        st_report_binding(r, c, bind, sizeof bind);
        json_object_set_new(o, "ci_low", k->has_pass ? st_jnum_or_null(k->ci_lo) : json_null());
        json_object_set_new(o, "ci_high", k->has_pass ? rate(k->ci_hi) : json_null());
        json_object_set_new(o, "confidence", json_real(r->spec.search.confidence));
        json_object_set_new(o, "estimate", st_jnum_or_null(k->estimate));
        json_object_set_new(o, "pass_confident", json_boolean(k->has_pass && k->pass_sure));
        json_object_set_new(o, "fail_confident", json_boolean(isfinite(k->fail_rate) && k->fail_sure));
        json_object_set_new(o, "within_tolerance", json_boolean(k->within_tolerance));
        json_object_set_new(o, "binding", strcmp(bind, "-") ? json_string(bind) : json_null());
        json_object_set_new(o, "binding_term", k->binding >= 0 ? json_integer(k->binding) : json_null());
        json_object_set_new(
            o, "boundary", k->has_pass && k->has_fail_above ? json_string(k->cliff ? "cliff" : "smooth") : json_null());
        json_object_set_new(o, "max_throughput_rps", st_jnum_or_null(k->max_throughput_rps));
        json_object_set_new(o, "runs", json_integer(k->runs));
        json_object_set_new(o, "requests", json_integer((json_int_t)k->requests));
        json_object_set_new(o, "engine_seconds", st_jnum_or_null(k->engine_s));
    }
    if (r->spec.workload.sessions.on)
        json_object_set_new(o, "sessions", sessions_json(c, r->spec.workload.agent != 0));
    return o;
}

static json_t *run_json(const st_report *r, const st_rep_cfg *c, int j)
{
    const st_run_row *w = &c->runs[j];
    const st_rep_server *sv = &c->server[j];
    json_t *o = json_object();
    json_object_set_new(o, "run_id", json_integer(w->id));
    json_object_set_new(o, "run_key", json_string(w->run_key));
    json_object_set_new(o, "rate", rate(w->rate));
    json_object_set_new(o, "grid", json_boolean(w->grid));
    json_object_set_new(o, "replicate", json_integer(c->rr[j].replicate));
    json_object_set_new(o, "verdict", str(w->verdict));
    json_object_set_new(o, "verdict_text", json_string(st_report_verdict_words(r, w)));
    json_object_set_new(o, "confident", json_boolean(c->rr[j].confident));
    json_object_set_new(o, "why", str(w->why));
    json_object_set_new(o, "stopped_early", json_boolean(w->stopped_early));
    json_object_set_new(o, "planned", json_integer(w->planned));
    json_object_set_new(o, "sent", json_integer(w->sent));
    json_object_set_new(o, "completed", json_integer(w->completed));
    json_object_set_new(o, "failed", json_integer(w->failed));
    struct {
        const char *k;
        double v;
    } f[] = {
        { "duration_s", w->duration_s },
        { "delivered_rps", w->delivered_rps },
        { "output_tps", w->output_tps },
        { "sustained_rps", w->sustained_rps },
        { "achieved_offered_rps", w->offered_rps_achieved },
        { "worst_ratio", w->worst_ratio },
        { "ttft_p50_ms", w->ttft_p50_ms },
        { "ttft_p95_ms", w->ttft_p95_ms },
        { "ttft_p99_ms", w->ttft_p99_ms },
        { "tpot_p50_ms", w->tpot_p50_ms },
        { "tpot_p95_ms", w->tpot_p95_ms },
        { "tpot_p99_ms", w->tpot_p99_ms },
        { "itl_p95_ms", w->itl_p95_ms },
        { "e2e_p95_ms", w->e2e_p95_ms },
        { "lag_p99_ms", w->lag_p99_ms },
    };
    for (size_t i = 0; i < sizeof f / sizeof *f; i++)
        json_object_set_new(o, f[i].k, st_jnum_or_null(f[i].v));
    json_t *t = json_array();
    for (int i = 0; i < w->n_terms; i++)
        json_array_append_new(t, st_jnum_or_null(w->term_ms[i]));
    json_object_set_new(o, "slo_terms_ms", t);
    json_object_set_new(o, "client_limited", json_boolean(w->client_limited));
    json_t *srv = json_object();
    json_object_set_new(srv, "samples", json_integer(sv->samples));
    json_object_set_new(srv, "kv_usage_max", st_jnum_or_null(sv->kv_usage_max));
    json_object_set_new(srv, "running_max", st_jnum_or_null(sv->running_max));
    json_object_set_new(srv, "waiting_max", st_jnum_or_null(sv->waiting_max));
    json_object_set_new(srv, "preemptions", st_jnum_or_null(sv->preemptions));
    json_object_set_new(srv, "prefix_hit_rate", st_jnum_or_null(sv->prefix_hit_rate));
    json_object_set_new(o, "server", srv);
    if (sv->srv_n) {
        json_t *tm = json_object();
        json_object_set_new(tm, "requests", json_integer(sv->srv_n));
        json_object_set_new(tm, "server_prompt_p50_ms", st_jnum_or_null(sv->srv_prompt_p50_ms));
        json_object_set_new(tm, "server_prompt_p99_ms", st_jnum_or_null(sv->srv_prompt_p99_ms));
        json_object_set_new(tm, "ttft_minus_prompt_p50_ms", st_jnum_or_null(sv->ttft_gap_p50_ms));
        json_object_set_new(tm, "ttft_minus_prompt_p99_ms", st_jnum_or_null(sv->ttft_gap_p99_ms));
        json_object_set_new(tm, "tpot_minus_server_tpot_p50_ms", st_jnum_or_null(sv->tpot_gap_p50_ms));
        json_object_set_new(tm, "tpot_minus_server_tpot_p99_ms", st_jnum_or_null(sv->tpot_gap_p99_ms));
        json_object_set_new(o, "server_timings", tm);
    } else {
        json_object_set_new(o, "server_timings", json_null());
    }
    json_t *summary = w->summary_json ? json_loads(w->summary_json, 0, NULL) : NULL;
    json_object_set_new(o, "summary", summary ? summary : json_null());
    return o;
}

static json_t *notes_json(const st_notes *ns)
{
    json_t *a = json_array();
    for (int i = 0; i < ns->n; i++) {
        const st_note *n = &ns->v[i];
        json_t *o = json_object();
        json_object_set_new(o, "severity", json_string(st_note_sev_name(n->sev)));
        json_object_set_new(o, "kind", json_string(n->kind));
        json_object_set_new(o, "config", str(n->config));
        json_t *ra = json_array();
        for (int k = 0; k < n->n_rates; k++)
            json_array_append_new(ra, rate(n->rates[k]));
        json_object_set_new(o, "rates", ra);
        json_object_set_new(o, "text", json_string(n->text));
        json_t *ev = json_object();
        for (int k = 0; k < n->n_ev; k++)
            json_object_set_new(ev, n->ev[k].key, rate(n->ev[k].value));
        json_object_set_new(o, "evidence", ev);
        json_object_set_new(o, "detail", str(n->detail));
        json_array_append_new(a, o);
    }
    return a;
}

/* Where the day's hours come from: "spec", "trace_utc", "trace_from_first_request". */
static const char *day_source_name(const st_spec *s)
{
    return s->traffic.day_source == ST_DAY_STATED      ? "spec"
           : s->traffic.day_source == ST_DAY_TRACE_UTC ? "trace_utc"
                                                       : "trace_from_first_request";
}

/* The spec's traffic day priced for each configuration that met the SLO (null: no traffic:). */
static json_t *day_json(const st_report *r)
{
    if (!r->day_present)
        return json_null();
    json_t *o = json_object();
    json_t *h = json_array();
    for (int i = 0; i < 24; i++)
        json_array_append_new(h,
                              r->spec.traffic.hour_known[i] ? json_real(r->spec.traffic.hourly_rps[i]) : json_null());
    json_object_set_new(o, "hourly_rps", h);
    json_object_set_new(o, "source", json_string(day_source_name(&r->spec)));
    json_object_set_new(o, "serverless_price_per_gpu_s",
                        r->day_serverless_price_per_gpu_s > 0 ? json_real(r->day_serverless_price_per_gpu_s)
                                                              : json_null());
    json_object_set_new(o, "serverless_from",
                        r->day_serverless_from[0] ? json_string(r->day_serverless_from) : json_null());
    json_t *cs = json_array();
    for (int k = 0; k < r->n_cfg; k++) {
        const st_rep_cfg *c = &r->cfg[r->order[k]];
        if (!c->day_ok)
            continue;
        json_t *d = st_rep_day_json(&c->day);
        json_object_set_new(d, "configuration", json_string(c->name));
        json_array_append_new(cs, d);
    }
    json_object_set_new(o, "configurations", cs);
    return o;
}

int st_report_json(const st_report *r, st_buf *out)
{
    json_t *root = json_object();
    json_object_set_new(root, "schema", json_string("servetune-audit-report/2"));
    json_object_set_new(root, "servetune_version", str(r->audit.version ? r->audit.version : ST_VERSION));
    json_object_set_new(root, "partial", json_boolean(r->audit.partial));
    json_object_set_new(root, "prediction", json_boolean(r->audit.prediction));
    json_object_set_new(root, "suggested_rates", str(r->audit.suggested_rates));
    json_object_set_new(root, "model_note", str(r->audit.model_note));
    if (r->audit.prediction && r->audit.disagg) {
        json_t *d = json_loads(r->audit.disagg, 0, NULL);
        if (d)
            json_object_set_new(root, "disaggregated", d);
    }
    json_object_set_new(root, "note", str(r->audit.note));
    json_object_set_new(root, "started", iso(r->audit.started));
    json_object_set_new(root, "finished", iso(r->audit.finished));
    json_object_set_new(root, "spec", spec_json(r));
    json_object_set_new(root, "predicted_vs_measured", st_predvs_json(r));
    st_buf hl;
    st_buf_init(&hl, ST_REPORT_HEADLINE_MAX);
    st_report_headline(r, &hl);
    json_t *h = json_object();
    json_object_set_new(h, "text", json_string(hl.data ? hl.data : ""));
    st_buf_free(&hl);
    /* the reasons the headline names no winner (report/distrust.h): pick is then null */
    st_distrust dt;
    st_report_distrust_find(r, &dt);
    int named = st_report_named_pick(r);
    json_object_set_new(h, "pick", named >= 0 ? json_string(r->cfg[named].name) : json_null());
    json_object_set_new(h, "baseline", json_string(r->cfg[0].name));
    json_t *why = json_array();
    if (dt.host)
        json_array_append_new(why, json_string("host_limited"));
    if (dt.tie)
        json_array_append_new(why, json_string("tie"));
    if (dt.failed)
        json_array_append_new(why, json_string("failed_unloaded"));
    json_object_set_new(h, "no_winner_because", why);
    json_object_set_new(root, "headline", h);
    json_t *cs = json_array();
    for (int i = 0; i < r->n_cfg; i++) {
        const st_rep_cfg *c = &r->cfg[i];
        json_t *o = json_object();
        json_object_set_new(o, "name", json_string(c->name));
        json_object_set_new(o, "is_baseline", json_boolean(i == 0));
        json_object_set_new(o, "status", json_string(st_rep_status_name(c->status)));
        json_object_set_new(o, "note", c->note[0] ? json_string(c->note) : json_null());
        json_object_set_new(o, "reason", str(c->spec->reason));
        json_t *ch = json_object();
        json_object_set_new(ch, "add_flags", strv(&c->spec->add_flags));
        json_object_set_new(ch, "remove_flags", strv(&c->spec->remove_flags));
        json_object_set_new(ch, "model", str(c->spec->model));
        json_object_set_new(ch, "env", envv(&c->spec->env));
        json_object_set_new(o, "changes", ch);
        json_object_set_new(o, "command", c->row ? str(c->row->argv) : json_null());
        json_object_set_new(o, "startup_s", c->row ? st_jnum_or_null(c->row->startup_s) : json_null());
        if (c->row && c->row->failure_class) {
            json_t *f = json_object();
            json_object_set_new(f, "class", json_string(c->row->failure_class));
            json_object_set_new(f, "detail", str(c->row->failure_detail));
            json_object_set_new(f, "log_tail", str(c->row->log_tail));
            json_object_set_new(o, "failure", f);
        } else {
            json_object_set_new(o, "failure", json_null());
        }
        json_t *facts = c->row && c->row->facts ? json_loads(c->row->facts, 0, NULL) : NULL;
        json_object_set_new(o, "engine_facts", facts ? facts : json_null());
        json_object_set_new(o, "capacity", capacity_json(r, c));
        if (c->cost.valid) {
            json_t *k = json_object();
            json_object_set_new(k, "usd_per_1m_output_tokens", st_jnum_or_null(c->cost.usd_per_1m));
            json_object_set_new(k, "replicas_at_peak", json_integer(c->cost.replicas));
            json_object_set_new(k, "monthly_usd", st_jnum_or_null(c->cost.monthly_usd));
            json_object_set_new(k, "capacity_vs_baseline", st_jnum_or_null(c->cap_vs_base));
            json_object_set_new(k, "cost_vs_baseline", st_jnum_or_null(c->cost_vs_base));
            json_object_set_new(o, "cost", k);
        } else {
            json_object_set_new(o, "cost", json_null());
        }
        json_t *runs = json_array();
        for (int j = 0; j < c->n_runs; j++)
            json_array_append_new(runs, run_json(r, c, j));
        json_object_set_new(o, "runs", runs);
        json_array_append_new(cs, o);
    }
    json_object_set_new(root, "configurations", cs);
    json_t *ord = json_array();
    for (int i = 0; i < r->n_cfg; i++)
        json_array_append_new(ord, json_string(r->cfg[r->order[i]].name));
    json_object_set_new(root, "order", ord);
    json_object_set_new(root, "notes", notes_json(&r->notes));
    json_object_set_new(root, "traffic", r->traffic.json ? json_incref(r->traffic.json) : json_null());
    json_object_set_new(root, "who_pays", r->who_pays ? json_incref(r->who_pays) : json_null());
    if (r->spec.workload.agent) /* an agent-trace audit: the trace's shape (trace stats --json, less input_lengths) */
        json_object_set_new(root, "agent_trace", r->agent_trace ? json_incref(r->agent_trace) : json_null());
    st_rep_wp_day wpd; /* the traffic day's cost per tenant per hour (report/whopays_day.h) */
    json_object_set_new(root, "who_pays_day",
                        st_rep_who_pays_day(r, &wpd) ? st_rep_who_pays_day_json(&wpd) : json_null());
    json_object_set_new(root, "traffic_day", day_json(r));
    json_object_set_new(root, "quality", st_rep_quality_json(r));
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    json_decref(root);
    if (!text)
        return -1;
    int rc = st_buf_puts(out, text);
    if (!rc)
        rc = st_buf_puts(out, "\n");
    free(text);
    return rc;
}
