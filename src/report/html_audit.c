#include "report/html_audit.h"

#include "core/file.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/util.h"
#include "core/version.h"
#include "engine/metrics.h"
#include "load/steady.h"
#include "report/day.h"
#include "report/distrust.h"
#include "report/format.h"
#include "report/html.h"
#include "report/whopays_day.h"

/* One text of the page built before it is handed to the renderer (a setup row, a note). */
#define PIECE_MAX ((size_t)1 << 16)


/* Every allocation of one rendering, freed together. */
typedef struct arena {
    void **p;
    size_t n, cap;
    int oom;
} arena;

static void *a_calloc(arena *a, size_t n, size_t sz)
{
    if (st_grow((void **)&a->p, &a->cap, a->n + 1, sizeof *a->p, 64)) {
        a->oom = 1;
        return NULL;
    }
    void *m = calloc(n ? n : 1, sz ? sz : 1);
    if (!m) {
        a->oom = 1;
        return NULL;
    }
    a->p[a->n++] = m;
    return m;
}

/* A copy of the buffer's text (or "" when empty). */
static const char *a_take(arena *a, const st_buf *b)
{
    char *s = a_calloc(a, b->len + 1, 1);
    if (s && b->len)
        memcpy(s, b->data, b->len);
    return s ? s : "";
}

static void a_free(arena *a)
{
    for (size_t i = 0; i < a->n; i++)
        free(a->p[i]);
    free(a->p);
    memset(a, 0, sizeof *a);
}

static void join_strv(st_buf *b, const st_strv *v)
{
    for (int i = 0; i < v->n; i++)
        st_buf_printf(b, "%s%s", i ? " " : "", v->v[i]);
}

static void slo_text(st_buf *b, const st_audit_slo *slo)
{
    for (int i = 0; i < slo->n; i++) {
        const st_slo_term *t = &slo->terms[i];
        const char *m = st_slo_metric_name(t->metric);
        st_buf_printf(b, "%sp%g ", i ? " and " : "", t->pct);
        for (const char *c = m; *c; c++)
            st_buf_printf(b, "%c", (*c >= 'a' && *c <= 'z') ? *c - 32 : *c);
        st_buf_printf(b, " <= %g ms", t->max_ms);
    }
}

/* "engine_version" from the first configuration's facts that has it (caller frees). */
static char *engine_version(const st_report *r)
{
    for (int i = 0; i < r->n_rows; i++) {
        if (!r->rows[i].facts)
            continue;
        json_t *j = json_loads(r->rows[i].facts, 0, NULL);
        const char *v = j ? json_string_value(json_object_get(j, "engine_version")) : NULL;
        char *out = v ? strdup(v) : NULL;
        json_decref(j);
        if (out)
            return out;
    }
    return NULL;
}

/* Sessions (an agent trace's tasks): what the rates count, and each configuration's task or
 * session rate, makespans and TTFT by turn (depth) at its capacity. */
static void sessions_text(const st_report *r, st_buf *b)
{
    const st_spec *s = &r->spec;
    st_buf_puts(b, s->workload.agent ? "agent tasks, each request sent when the last of its parents answered "
                                       "plus its gap; the rates are tasks starting per second"
                                     : "multi-turn conversations, each later turn sent after the answer to the "
                                       "one before it (with that answer in its prompt); the rates are sessions "
                                       "starting per second");
    for (int i = 0; i < r->n_cfg; i++) {
        const st_rep_cfg *c = &r->cfg[r->order[i]];
        if (c->status != ST_REP_OK)
            continue;
        char sr[32], rq[32];
        st_fmt_num(sr, sizeof sr, c->cap->pass_rate);
        st_fmt_num(rq, sizeof rq, c->cap->capacity_rps);
        st_buf_printf(b, ". %s at its capacity, %s %s (%s req/s delivered)", c->name, sr, st_spec_rate_unit(s), rq);
        if (c->tasks_done) { /* a session is a task: first arrival to last end */
            char m50[32], m95[32];
            st_fmt_num(m50, sizeof m50, c->makespan_p50_ms / 1e3);
            st_fmt_num(m95, sizeof m95, c->makespan_p95_ms / 1e3);
            st_buf_printf(b, ", makespan p50 %s s, p95 %s s", m50, m95);
        }
        st_buf_printf(b, ": TTFT p50 by %s", s->workload.agent ? "depth" : "turn");
        for (int u = 0; u < c->n_turns; u++) {
            const st_turn_row *w = &c->turns[u];
            if (!w->completed)
                continue;
            char ms[32];
            st_fmt_num(ms, sizeof ms, w->ttft.p50 * 1e3);
            st_buf_printf(b, "%s %u%s: %s ms", u ? "," : "", w->turn, u == ST_TURN_ROWS - 1 ? "+" : "", ms);
            if (isfinite(st_turn_cached_share(w)))
                st_buf_printf(b, " (%.0f %% cached)", 100.0 * st_turn_cached_share(w));
        }
    }
    if (s->workload.agent && r->agent_trace) {
        st_buf_puts(b, ". ");
        st_report_agent_shape_text(r, b);
    }
}

static void setup_rows(arena *a, const st_report *r, const char *ev, st_html_kv *kv, uint32_t *n)
{
    const st_spec *s = &r->spec;
    st_buf b;
    st_buf_init(&b, PIECE_MAX);
    char t[64];
    uint32_t k = 0;
#define ROW(label)                                                                                                     \
    do {                                                                                                               \
        kv[k].key = label;                                                                                             \
        kv[k++].value = a_take(a, &b);                                                                                 \
        st_buf_reset(&b);                                                                                              \
    } while (0)
    st_buf_puts(&b, st_engine_kind_name(s->engine.kind));
    if (ev)
        st_buf_printf(&b, " (version %s)", ev);
    if (s->engine.kind == ST_ENGINE_ENDPOINT && s->engine.url)
        st_buf_printf(&b, " at %s", s->engine.url);
    ROW("Engine");
    st_buf_puts(&b, s->engine.model ? s->engine.model : "-");
    ROW("Model");
    if (s->engine.flags.n)
        join_strv(&b, &s->engine.flags);
    else
        st_buf_puts(&b, "(none)");
    ROW("Baseline flags");
    st_fmt_usd(t, sizeof t, s->hardware.price_per_gpu_hour);
    st_buf_printf(&b, "%s, %d GPU%s per replica at %s per GPU-hour", s->hardware.gpu ? s->hardware.gpu : "GPU",
                  s->hardware.gpus_per_replica, s->hardware.gpus_per_replica == 1 ? "" : "s", t);
    ROW("Hardware");
    char per[96];
    st_report_run_length(r, "", per, sizeof per);
    if (s->workload.kind == ST_WL_SYNTHETIC)
        st_report_synthetic_text(r, &b);
    else if (s->workload.agent)
        st_report_agent_text(r, &b);
    else
        st_buf_printf(&b, "replayed trace %s, %s after %u warm-up requests",
                      s->workload.trace ? s->workload.trace : "-", per, s->warmup_requests);
    ROW(s->workload.agent ? "Workload (agent-trace audit)" : "Workload");
    char grid[2048], start[2300];
    st_report_rate_grid(s, grid, sizeof grid);
    if (r->sustained) {
        st_report_search_start(r, grid, start, sizeof start);
        st_buf_printf(&b,
                      "sustained (%s); tolerance %.0f %%, confidence %.0f %%, at most %u runs "
                      "per configuration; each run warms up for %g median E2Es, then measures a window of at least "
                      "%g s and %u requests, within %g s",
                      start, s->search.tolerance * 100, s->search.confidence * 100, s->search.max_runs,
                      s->search.warmup_e2e, s->search.min_window_s, s->search.min_window_requests,
                      s->search.max_duration_s);
        ROW("Search");
    } else if (s->closed_loop) {
        st_buf_printf(&b, "%s (a fixed-count closed loop of %u requests each: %s)", grid, s->workload.requests_per_rate,
                      r->refine ? "grid, then refine" : "grid");
        ROW("Concurrency levels tried");
    } else {
        st_buf_printf(&b, "%s %s (a burst test: %s)", grid, st_spec_rate_unit(s),
                      r->refine ? "grid, then refine" : "grid");
        ROW("Rates tried");
    }
    if (s->workload.sessions.on) {
        sessions_text(r, &b);
        ROW(s->workload.agent ? "Agent tasks" : "Sessions");
    }
    slo_text(&b, &s->slo);
    ROW("SLO");
    st_fmt_num(t, sizeof t, s->peak_rate);
    st_buf_printf(&b, "%s requests/s%s", t,
                  s->peak_source == ST_PEAK_BUSIEST_MINUTE ? " (the trace's busiest minute, peak_rate: trace)"
                  : s->peak_source == ST_PEAK_TRACE_MEAN   ? " (the trace's mean rate: it spans less than a minute)"
                                                           : "");
    ROW(s->peak_source == ST_PEAK_STATED ? "Stated peak" : "Traffic peak");
    st_fmt_date(t, sizeof t, r->audit.started);
    st_buf_printf(&b, "%s, servetune %s", t, r->audit.version ? r->audit.version : ST_VERSION);
    ROW("Date");
#undef ROW
    st_buf_free(&b);
    *n = k;
}

static int is_verdict(const st_run_row *w, const char *v) { return w->verdict && !strcmp(w->verdict, v); }

/* Per-request TTFT and TPOT (ms) of one run, warm-up excluded. */
static void load_latencies(arena *a, st_store *s, const st_run_row *w, st_html_config *hc)
{
    st_record *recs = NULL;
    uint32_t n = 0;
    if (!s || st_store_records_get(s, w->id, &recs, &n) != 0 || !n) {
        free(recs);
        return;
    }
    double *tt = a_calloc(a, n, sizeof *tt), *tp = a_calloc(a, n, sizeof *tp);
    uint32_t nt = 0, np = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (tt && tp && !recs[i].warmup && recs[i].status == ST_REQ_OK) {
            double x = st_record_ttft(&recs[i]), y = st_record_tpot(&recs[i]);
            if (isfinite(x))
                tt[nt++] = x * 1000;
            if (isfinite(y))
                tp[np++] = y * 1000;
        }
        st_record_free(&recs[i]);
    }
    free(recs);
    hc->dist_rate = w->rate;
    hc->ttft_ms = tt;
    hc->n_ttft = nt;
    hc->tpot_ms = tp;
    hc->n_tpot = np;
}

enum { M_KV, M_RUN, M_WAIT, M_PRE, M_NONE };

static int metric_kind(const char *name)
{
    if (!name)
        return M_NONE;
    st_metric m; /* the generic names the audit stores (engine/metrics.h) */
    if (st_metrics_from_name(name, &m) == 0) {
        switch (m) {
        case ST_MET_KV_USAGE: return M_KV;
        case ST_MET_RUNNING: return M_RUN;
        case ST_MET_WAITING: return M_WAIT;
        case ST_MET_PREEMPTIONS: return M_PRE;
        default: return M_NONE;
        }
    }
    /* other spellings (engine-native names, older stores) */
    const char *c = strchr(name, ':');
    if (c)
        name = c + 1;
    static const char *const kv[] = { "kv_cache_usage", "kv_cache_usage_perc", "gpu_cache_usage_perc", "token_usage",
                                      "kv_cache_usage_ratio" };
    static const char *const run[] = { "num_running", "running", "num_requests_running", "num_running_reqs" };
    static const char *const wait[] = { "num_waiting", "waiting", "num_requests_waiting", "num_queue_reqs" };
    static const char *const pre[] = { "num_preemptions", "preemptions", "num_preemptions_total", "preemptions_total" };
    for (size_t i = 0; i < sizeof kv / sizeof *kv; i++)
        if (!strcmp(name, kv[i]))
            return M_KV;
    for (size_t i = 0; i < sizeof run / sizeof *run; i++)
        if (!strcmp(name, run[i]))
            return M_RUN;
    for (size_t i = 0; i < sizeof wait / sizeof *wait; i++)
        if (!strcmp(name, wait[i]))
            return M_WAIT;
    for (size_t i = 0; i < sizeof pre / sizeof *pre; i++)
        if (!strcmp(name, pre[i]))
            return M_PRE;
    return M_NONE;
}

/* The run's metric samples as timeline points. */
static void load_samples(arena *a, st_store *s, const st_run_row *w, st_html_run *run)
{
    st_metrics_sample *m = NULL;
    uint32_t n = 0;
    if (!s || st_store_samples_get(s, w->id, &m, &n) != 0 || !n) {
        if (m)
            st_store_samples_free(m, n);
        return;
    }
    st_html_sample *out = a_calloc(a, n, sizeof *out);
    uint32_t k = 0;
    double pre0 = NAN;
    for (uint32_t i = 0; out && i < n; i++) {
        int kind = metric_kind(m[i].name);
        if (kind == M_NONE || !isfinite(m[i].t))
            continue;
        if (!k || fabs(out[k - 1].t_s - m[i].t) > 1e-9) {
            out[k] = (st_html_sample){ m[i].t, NAN, NAN, NAN, NAN };
            k++;
        }
        st_html_sample *p = &out[k - 1];
        switch (kind) {
        case M_KV: p->kv_usage = m[i].value; break;
        case M_RUN: p->running = m[i].value; break;
        case M_WAIT: p->waiting = m[i].value; break;
        default:
            if (isnan(pre0) && isfinite(m[i].value))
                pre0 = m[i].value;
            p->preemptions = m[i].value - pre0;
        }
    }
    st_store_samples_free(m, n);
    run->samples = out;
    run->n_samples = k;
}

static void changes_text(st_buf *b, const st_spec_config *c)
{
    const char *sep = "";
    if (c->add_flags.n) {
        join_strv(b, &c->add_flags);
        sep = "; ";
    }
    for (int i = 0; i < c->remove_flags.n; i++) {
        st_buf_printf(b, "%swithout %s", sep, c->remove_flags.v[i]);
        sep = "; ";
    }
    if (c->model) {
        st_buf_printf(b, "%smodel %s", sep, c->model);
        sep = "; ";
    }
    for (int e = 0; e < c->env.n; e++) {
        st_buf_printf(b, "%s%s=%s", sep, c->env.key[e], c->env.val[e]);
        sep = "; ";
    }
}

/* The notes: the one list the report model carries (report/notes.h), as every report shows it. */
static void map_notes(const st_report *r, st_html_note *v, uint32_t *n)
{
    uint32_t k = 0;
    for (int i = 0; i < r->notes.n; i++) {
        const st_note *nt = &r->notes.v[i];
        v[k++] = (st_html_note){ nt->sev == ST_NOTE_PROBLEM ? ST_HTML_ERROR
                                 : nt->sev == ST_NOTE_WARN  ? ST_HTML_WARN
                                                            : ST_HTML_INFO,
                                 nt->config, nt->text, nt->detail };
    }
    *n = k;
}

/* Paragraphs of "method and limits": the search's (at most 3), the common ones (2), prompts, scope,
 * the emulator's and the prediction's. */
#define METHOD_MAX 12

static const char *const burst_method[] = {
    ("A burst test: each rate is a fixed run of requests. Capacity at SLO is the delivered request "
     "throughput (completed requests / time from the first send to the last completion, drain included) "
     "at the highest tested rate that passed; a rate passes when every request completed and every SLO term "
     "held. A short run at a rate above what the engine sustains can still pass while its queue drains, so "
     "this is not a sustained capacity (search mode sustained, the default, measures one)."),
    ("The sustained figure comes from the steady-state window of the run at capacity (without the "
     "ramp-up and the drain); a short finite run understates what a server sustains."),
};

static const char *const closed_count_method[] = {
    ("A fixed-count closed loop: each concurrency level C is a run of a fixed number of requests with at "
     "most C in flight, a request sent as soon as one ends (as vllm bench serve --max-concurrency C "
     "--num-prompts N). TTFT and E2E run from each request's send. Capacity at SLO is the delivered request "
     "throughput (completed requests / time from the first send to the last completion, as vLLM reports it) at "
     "the highest level that passed; a level passes when every request completed and every SLO term held. It is "
     "not a sustained capacity (search mode sustained, the default, measures one)."),
};

static const char *const sustained_method[] = {
    ("Capacity at SLO is the highest rate the engine sustained within the SLO: a run passes only when it "
     "reached a steady state (no significant growth of the requests in flight, of TTFT or of the engine's "
     "waiting queue; the delivered rate equal to the offered one within its interval) and every SLO term held "
     "over its measurement window, every request of which completed. Each run warms up for a few median E2Es, "
     "then measures a window of a minimum length and number of requests; a growing queue ends it early as "
     "over-saturated, a term missed with confidence as SLO missed, and a run that reaches its bound first is "
     "undecided (never a pass). Replicas and cost are sized from that rate."),
    ("The search brackets the capacity, fits each SLO term's margin against the rate (isotonic regression, "
     "interpolated) or bisects at a cliff, and repeats runs at the bracket's ends until the calls are "
     "confident, to the spec's tolerance; the runs at one rate are judged together (their margins pooled: one "
     "call per rate, which a single run at that rate can disagree with). Percentiles are taken over each window, with "
     "intervals from batch "
     "means."),
};

static const char *const common_method[] = {
    ("TTFT runs from a request's scheduled send time (open loop: requests are sent on schedule "
     "whatever the server does) to its first token; TPOT = (end - first token) / (output tokens - "
     "1)."),
    ("$ per 1M output tokens = price per GPU-hour x GPUs per replica / (output tok/s at capacity x "
     "3600) x 1,000,000; replicas at peak = ceil(peak / capacity); monthly = replicas x GPUs x "
     "price x 730 h. \"vs current\" is the relative change against the first configuration."),
};

/* Requests in flight over a run (engine seconds), at ST_HTML_TRACE_POINTS points. */
#define TRACE_POINTS 160

static void load_trace(arena *a, st_store *s, const st_report *r, const st_rep_cfg *c, int j, int passed,
                       st_html_trace *out)
{
    const st_run_row *w = &c->runs[j];
    st_record *recs = NULL;
    uint32_t n = 0;
    memset(out, 0, sizeof *out);
    if (!s || st_store_records_get(s, w->id, &recs, &n) != 0 || !n) {
        free(recs);
        return;
    }
    double *t = a_calloc(a, TRACE_POINTS, sizeof *t), *y = a_calloc(a, TRACE_POINTS, sizeof *y);
    double end = isfinite(w->duration_s) && w->duration_s > 0 ? w->duration_s : 1;
    if (t && y) {
        for (uint32_t i = 0; i < TRACE_POINTS; i++)
            t[i] = end * (i + 0.5) / TRACE_POINTS;
        if (st_inflight_at(recs, n, r->spec.closed_loop, t, TRACE_POINTS, y) == 0) {
            out->t = t;
            out->inflight = y;
            out->n = TRACE_POINTS;
        }
    }
    st_records_free(recs, n);
    st_buf b;
    st_buf_init(&b, PIECE_MAX);
    char rt[32];
    st_fmt_num(rt, sizeof rt, w->rate);
    st_buf_printf(&b, "%s%s: %s", rt, r->spec.closed_loop ? " concurrent" : " req/s", st_report_verdict_words(r, w));
    out->label = a_take(a, &b);
    st_buf_free(&b);
    out->rate = w->rate;
    out->passed = passed;
    out->window_start_s = c->has_sus[j] ? c->sus[j].window_start_s : NAN;
    out->window_end_s = c->has_sus[j] ? c->sus[j].window_end_s : NAN;
}

/* A string of a JSON object, or "". */
static const char *j_str(const json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v ? v : "";
}

/* A number of a JSON object as text ("—" when absent or null). */
static const char *j_num(arena *a, st_buf *tb, const json_t *o, const char *key, int decimals)
{
    const json_t *v = json_object_get(o, key);
    st_buf_reset(tb);
    if (json_is_number(v))
        st_buf_printf(tb, "%.*f", decimals, json_number_value(v));
    else
        st_buf_puts(tb, "—");
    return a_take(a, tb);
}

static const char *const disagg_head[8] = { "configuration",
                                            "xPyD",
                                            "static req/s (rate matched)",
                                            "aggregated req/s",
                                            "offered req/s",
                                            "TTFT p50 / p95 (ms)",
                                            "TPOT p50 / p95 (ms)",
                                            "SLO" };

/* One row of the disaggregated table: configuration c's static figures, and its queueing run q
 * (NULL: the static row alone). */
static void disagg_row(arena *a, st_buf *tb, const json_t *c, const json_t *q, const char **row)
{
    st_buf_reset(tb);
    st_buf_puts(tb, j_str(c, "configuration")); /* copied: the JSON is freed before the page is made */
    row[0] = a_take(a, tb);
    st_buf_reset(tb);
    if (json_is_integer(json_object_get(c, "x")))
        st_buf_printf(tb, "%lldP%lldD", (long long)json_integer_value(json_object_get(c, "x")),
                      (long long)json_integer_value(json_object_get(c, "y")));
    else
        st_buf_printf(tb, "none: %s", j_str(c, "error"));
    row[1] = a_take(a, tb);
    row[2] = j_num(a, tb, c, "rps", 2);
    row[3] = j_num(a, tb, c, "aggregated_rps", 2);
    if (!q) {
        row[4] = "static only";
        const char *ttft = j_num(a, tb, c, "ttft_static_ms", 0), *tpot = j_num(a, tb, c, "tpot_static_ms", 1);
        st_buf_reset(tb);
        st_buf_printf(tb, "%s (one request)", ttft);
        row[5] = a_take(a, tb);
        st_buf_reset(tb);
        st_buf_printf(tb, "%s (one step)", tpot);
        row[6] = a_take(a, tb);
        row[7] = "";
        return;
    }
    st_buf_reset(tb);
    st_buf_printf(tb, "%.2f (%s)", json_number_value(json_object_get(q, "rate")), j_str(q, "what"));
    row[4] = a_take(a, tb);
    const char *p50 = j_num(a, tb, q, "ttft_p50_ms", 0), *p95 = j_num(a, tb, q, "ttft_p95_ms", 0);
    st_buf_reset(tb);
    st_buf_printf(tb, "%s / %s", p50, p95);
    row[5] = a_take(a, tb);
    p50 = j_num(a, tb, q, "tpot_p50_ms", 1);
    p95 = j_num(a, tb, q, "tpot_p95_ms", 1);
    st_buf_reset(tb);
    st_buf_printf(tb, "%s / %s", p50, p95);
    row[6] = a_take(a, tb);
    row[7] = json_is_true(json_object_get(q, "meets_slo")) ? "met" : "not met";
}

/* predict --disagg (report.json's "disaggregated"): each configuration's best xPyD, static and
 * with queueing in both pools, a row per rate simulated. 1 when *t was made. */
static int disagg_table(arena *a, st_buf *tb, const st_report *r, st_html_table *t)
{
    json_t *d = r->audit.prediction && r->audit.disagg ? json_loads(r->audit.disagg, 0, NULL) : NULL;
    const json_t *cs = json_object_get(d, "configurations");
    size_t rows = 0;
    for (size_t i = 0; i < json_array_size(cs); i++) {
        size_t k = json_array_size(json_object_get(json_object_get(json_array_get(cs, i), "queueing"), "rates"));
        rows += k ? k : 1;
    }
    const char **cells = rows ? a_calloc(a, rows * 8, sizeof *cells) : NULL;
    if (!cells) {
        json_decref(d);
        return 0;
    }
    uint32_t n = 0;
    for (size_t i = 0; i < json_array_size(cs); i++) {
        const json_t *c = json_array_get(cs, i);
        const json_t *qr = json_object_get(json_object_get(c, "queueing"), "rates");
        if (!json_array_size(qr))
            disagg_row(a, tb, c, NULL, &cells[(size_t)n++ * 8]);
        for (size_t k = 0; k < json_array_size(qr); k++)
            disagg_row(a, tb, c, json_array_get(qr, k), &cells[(size_t)n++ * 8]);
    }
    st_buf_reset(tb);
    st_buf_printf(tb,
                  "A prediction: no disaggregated setup was measured. Each configuration as the xPyD of its own "
                  "workers with the most requests/s per GPU at equal GPUs by AIConfigurator's rate matching "
                  "(min(x x prefill rate x %.2f, y x decode rate x %.2f), static: no queue), beside the same GPUs "
                  "aggregated, then that xPyD run with queueing in both pools on the engine model (least-loaded "
                  "routers, the KV transfer between the pools): p50 and p95 at each offered rate, and the capacity "
                  "at the SLO. report.md has the KV links and the deploy flags.",
                  json_number_value(json_object_get(d, "prefill_scale")),
                  json_number_value(json_object_get(d, "decode_scale")));
    *t = (st_html_table){ .id = "disagg",
                          .title = "Disaggregated prefill/decode (a prediction)",
                          .intro = a_take(a, tb),
                          .head = disagg_head,
                          .cells = cells,
                          .cols = 8,
                          .rows = n,
                          .text_cols = 1u << 1 | 1u << 4 | 1u << 5 | 1u << 6 | 1u << 7 };
    json_decref(d);
    return 1;
}

/* One rendering: its allocations, a scratch buffer for the texts it builds, the model and the
 * store (may be NULL). */
typedef struct html_ctx {
    arena a;
    st_buf tb;
    const st_report *r;
    st_store *s;
} html_ctx;

/* Title, subtitle, headline, setup rows and the SLO's p95 limits of the page. */
static void page_head(html_ctx *x, const st_html_audit_opts *opts, const char *ev, st_html_kv *kv, st_html_report *h)
{
    const st_report *r = x->r;
    st_buf_printf(&x->tb, "Serving audit: %s on %s", r->spec.engine.model ? r->spec.engine.model : "?",
                  r->spec.hardware.gpu ? r->spec.hardware.gpu : "?");
    h->title = a_take(&x->a, &x->tb);
    st_buf_reset(&x->tb);
    char date[64];
    st_fmt_date(date, sizeof date, r->audit.started);
    st_buf_printf(&x->tb, "%s · spec %s · %d configuration%s", date, r->audit.spec_path ? r->audit.spec_path : "-",
                  r->n_cfg, r->n_cfg == 1 ? "" : "s");
    h->subtitle = a_take(&x->a, &x->tb);
    st_buf_reset(&x->tb);
    h->partial = r->audit.partial;
    h->partial_reason = r->audit.note;
    h->prediction = opts ? opts->prediction : 0;
    st_report_headline(r, &x->tb);
    h->headline = a_take(&x->a, &x->tb);
    st_buf_reset(&x->tb);
    setup_rows(&x->a, r, ev, kv, &h->n_setup);
    h->setup = kv;
    h->slo_ttft_ms = h->slo_tpot_ms = NAN;
    h->sustained = r->sustained;
    h->concurrency = r->spec.closed_loop;
    h->confidence = r->spec.search.confidence;
    for (int i = 0; i < r->spec.slo.n; i++) {
        const st_slo_term *t = &r->spec.slo.terms[i];
        if (t->pct == 95 && t->metric == ST_SLO_TTFT)
            h->slo_ttft_ms = t->max_ms;
        if (t->pct == 95 && t->metric == ST_SLO_TPOT)
            h->slo_tpot_ms = t->max_ms;
    }
}

/* A configuration's name, status and its words, with every figure not known yet (NAN). */
static void config_status(const st_report *r, int i, int named, st_html_config *hc)
{
    const st_rep_cfg *c = &r->cfg[i];
    hc->name = c->name;
    hc->is_baseline = i == 0;
    hc->recommended = named && i == r->pick;
    hc->status = c->status == ST_REP_OK            ? ST_HTML_CFG_OK
                 : c->status == ST_REP_NONE_PASSED ? ST_HTML_CFG_NONE_PASSED
                 : c->status == ST_REP_FAILED      ? ST_HTML_CFG_NOT_STARTED
                                                   : ST_HTML_CFG_NOT_RUN;
    hc->ran = c->ran;
    hc->status_text = c->note[0] ? c->note : NULL;
    if (hc->status == ST_HTML_CFG_NOT_RUN && hc->status_text &&
        !strncmp(hc->status_text, "not run", 7)) { /* the table says "not run" already */
        const char *p = hc->status_text + 7;
        while (*p == ':' || *p == ' ')
            p++;
        hc->status_text = *p ? p : NULL;
    }
    hc->capacity_rps = hc->capacity_vs_base = hc->pass_rate = hc->fail_rate = NAN;
    hc->grid_rps = hc->refined_rps = hc->sustained_rps = hc->out_tok_s = NAN;
    hc->usd_per_mtok = hc->usd_vs_base = hc->p95_ttft_ms = hc->p95_tpot_ms = NAN;
    hc->replicas = hc->monthly_usd = hc->dist_rate = NAN;
    hc->ci_lo = hc->ci_hi = hc->max_throughput_rps = hc->engine_minutes = NAN;
    hc->sustained = r->sustained;
}

/* A sustained search's figures: the binding term, the boundary, and the timelines of its last
 * passing and first failing runs. 0, or -1 out of memory. */
static int config_search(html_ctx *x, const st_rep_cfg *c, st_html_config *hc)
{
    const st_capacity *k = c->cap;
    char bind[48];
    st_report_binding(x->r, c, bind, sizeof bind);
    st_buf_puts(&x->tb, bind);
    hc->binding = a_take(&x->a, &x->tb);
    st_buf_reset(&x->tb);
    hc->boundary = k->has_pass && k->has_fail_above ? (k->cliff ? "cliff" : "smooth") : NULL;
    hc->engine_minutes = k->engine_s / 60;
    hc->max_throughput_rps = k->max_throughput_rps;
    hc->search_runs = k->runs;
    hc->pass_rate = k->has_pass ? k->pass_rate : NAN;
    hc->fail_rate = isfinite(k->fail_rate) ? k->fail_rate : NAN;
    hc->fail_undecided = k->fail_undecided;
    st_html_trace *tr = a_calloc(&x->a, 2, sizeof *tr);
    if (!tr)
        return -1;
    if (k->pass_index >= 0 && k->pass_index < c->n_runs)
        load_trace(&x->a, x->s, x->r, c, k->pass_index, 1, &tr[hc->n_traces++]);
    if (k->fail_index >= 0 && k->fail_index < c->n_runs)
        load_trace(&x->a, x->s, x->r, c, k->fail_index, 0, &tr[hc->n_traces++]);
    hc->traces = tr;
    return 0;
}

/* The results row of a configuration that met the SLO: capacity, interval, cost, p95s. */
static void config_capacity(const st_report *r, const st_rep_cfg *c, st_html_config *hc)
{
    hc->capacity_rps = c->cap->capacity_rps;
    hc->capacity_vs_base = c->cap_vs_base;
    hc->pass_rate = c->cap->pass_rate;
    hc->fail_rate = c->cap->has_fail_above ? c->cap->fail_rate : NAN;
    hc->fail_undecided = c->cap->fail_undecided;
    hc->capacity_may_be_higher = c->cap->highest_tested_passed;
    if (r->sustained) {
        hc->ci_lo = c->cap->ci_lo;
        hc->ci_hi = c->cap->ci_hi;
    }
    if (r->refine && c->grid.has_pass && c->grid.capacity_rps != c->cap->capacity_rps)
        hc->grid_rps = c->grid.capacity_rps;
    /* a sustained capacity is itself the sustained rate */
    hc->sustained_rps = r->sustained ? NAN : c->cap->sustained_rps;
    hc->out_tok_s = c->cap->output_tps;
    hc->usd_per_mtok = c->cost.usd_per_1m;
    hc->usd_vs_base = c->cost_vs_base;
    hc->p95_ttft_ms = c->ttft_p95_ms;
    hc->p95_tpot_ms = c->tpot_p95_ms;
    if (r->spec.peak_rate > 0) {
        hc->replicas = (double)c->cost.replicas;
        hc->monthly_usd = c->cost.monthly_usd;
    }
}

/* Rate points and runs: everything measured (skipped rates have no evidence), with the latency
 * distribution of the capacity run (the lowest measured rate when nothing passed). 0, or -1 out
 * of memory. */
static int config_runs(html_ctx *x, const st_rep_cfg *c, st_html_config *hc)
{
    st_html_point *pts = a_calloc(&x->a, (size_t)c->n_runs, sizeof *pts);
    st_html_run *runs = a_calloc(&x->a, (size_t)c->n_runs, sizeof *runs);
    if (!pts || !runs)
        return -1;
    const st_run_row *dist = NULL;
    for (int j = 0; j < c->n_runs; j++) {
        const st_run_row *w = &c->runs[j];
        if (is_verdict(w, "skipped"))
            continue;
        int passed = is_verdict(w, "pass") ? 1 : is_verdict(w, "fail") || is_verdict(w, "oversaturated") ? 0 : -1;
        /* an early-stopped run is drawn at the lower bounds its verdict used */
        int lb = w->stopped_early && w->n_terms >= 2;
        pts[hc->n_points++] = (st_html_point){ w->rate, lb ? w->term_ms[0] : w->ttft_p95_ms,
                                               lb ? w->term_ms[1] : w->tpot_p95_ms, passed };
        st_html_run *hr = &runs[hc->n_runs++];
        hr->rate = w->rate;
        hr->passed = passed;
        hr->verdict = st_report_verdict_words(x->r, w);
        load_samples(&x->a, x->s, w, hr);
        if (passed >= 0 && (!dist || w->rate < dist->rate))
            dist = w; /* the lowest measured rate, when nothing passed */
    }
    hc->points = pts;
    hc->runs = runs;
    if (c->status == ST_REP_OK && c->cap->pass_index >= 0 && c->cap->pass_index < c->n_runs)
        dist = &c->runs[c->cap->pass_index];
    if (dist)
        load_latencies(&x->a, x->s, dist, hc);
    return x->a.oom ? -1 : 0;
}

/* One configuration's card: status, search, results row, changes, rate points and runs. 0, or
 * -1 out of memory. */
static int config_card(html_ctx *x, int i, int named, st_html_config *hc)
{
    const st_report *r = x->r;
    const st_rep_cfg *c = &r->cfg[i];
    config_status(r, i, named, hc);
    if (r->sustained && c->n_runs && config_search(x, c, hc))
        return -1;
    if (c->status == ST_REP_OK)
        config_capacity(r, c, hc);
    changes_text(&x->tb, c->spec);
    hc->changes = a_take(&x->a, &x->tb);
    st_buf_reset(&x->tb);
    hc->reason = c->spec->reason;
    hc->command = c->row ? c->row->argv : NULL;
    return config_runs(x, c, hc);
}

/* The method section's lines, in method (METHOD_MAX of room); their count. */
static uint32_t method_lines(html_ctx *x, const char **method)
{
    const st_report *r = x->r;
    uint32_t nm = 0;
    if (r->sustained) {
        for (size_t i = 0; i < sizeof sustained_method / sizeof *sustained_method; i++)
            method[nm++] = sustained_method[i];
        method[nm++] = st_rep_output_tps_note;
    } else if (r->spec.closed_loop) {
        for (size_t i = 0; i < sizeof closed_count_method / sizeof *closed_count_method; i++)
            method[nm++] = closed_count_method[i];
    } else
        for (size_t i = 0; i < sizeof burst_method / sizeof *burst_method; i++)
            method[nm++] = burst_method[i];
    for (size_t i = 0; i < sizeof common_method / sizeof *common_method; i++)
        method[nm++] = common_method[i];
    method[nm++] = r->spec.workload.kind == ST_WL_SYNTHETIC
                       ? "Prompts are synthetic (token ids of the stated sizes, a shared prefix as "
                         "stated), not the client's traffic."
                       : "Prompts are the replayed trace, retimed to each rate.";
    method[nm++] = "Out of scope: output quality (an fp8 or quantized checkpoint must be checked "
                   "for quality separately), cold starts, autoscaling, and traffic shapes other "
                   "than the one tested.";
    if (r->spec.engine.kind == ST_ENGINE_EMULATOR)
        method[nm++] = "Measured on servetune's emulator, a model of vLLM's scheduler and of the "
                       "GPU, not on the GPU itself: these figures are predictions to be confirmed "
                       "on hardware.";
    if (r->audit.prediction) {
        st_buf_reset(&x->tb);
        st_buf_puts(&x->tb, "Prediction: every run was computed by servetune's engine model in virtual time "
                            "(servetune predict), with the same workloads, schedules, warm-up, early stop and "
                            "capacity search as a measured audit; nothing was measured.");
        if (r->audit.model_note)
            st_buf_printf(&x->tb, " %s", r->audit.model_note);
        if (r->audit.suggested_rates)
            st_buf_printf(&x->tb, " Suggested rates for the measured audit: %s", r->audit.suggested_rates);
        method[nm++] = a_take(&x->a, &x->tb);
    }
    return nm;
}

/* "Who pays" (report/whopays.h): the trace's tenants, when it names them. */
static void who_pays_table(html_ctx *x, st_html_table *tables, uint32_t *nt)
{
    if (!x->r->who_pays)
        return;
    char(*wc)[ST_REP_WHOPAYS_COLS][ST_REP_WHOPAYS_CELL] = a_calloc(&x->a, ST_REP_WHOPAYS_ROWS + 2, sizeof *wc);
    const char **wcells = a_calloc(&x->a, (ST_REP_WHOPAYS_ROWS + 2) * ST_REP_WHOPAYS_COLS, sizeof *wcells);
    char *wintro = a_calloc(&x->a, 700, 1);
    uint32_t wrows = wc && wcells && wintro ? st_rep_who_pays_table(x->r->who_pays, wc, wintro, 700) : 0;
    for (uint32_t i = 0; i < wrows; i++)
        for (int k = 0; k < ST_REP_WHOPAYS_COLS; k++)
            wcells[i * ST_REP_WHOPAYS_COLS + k] = wc[i][k];
    if (wrows)
        tables[(*nt)++] = (st_html_table){ .id = "who-pays",
                                           .title = "Who pays",
                                           .intro = wintro,
                                           .head = st_rep_who_pays_head,
                                           .cells = wcells,
                                           .cols = ST_REP_WHOPAYS_COLS,
                                           .rows = wrows,
                                           .text_cols = 1u << 0 };
}

/* The traffic day's cost per tenant per hour (report/whopays_day.h), when both are known. */
static void who_pays_day_table(html_ctx *x, st_html_table *tables, uint32_t *nt)
{
    st_rep_wp_day *wpd = a_calloc(&x->a, 1, sizeof *wpd);
    if (!wpd || !st_rep_who_pays_day(x->r, wpd))
        return;
    const char **head = a_calloc(&x->a, ST_REP_WPDAY_COLS_MAX, sizeof *head);
    char(*wc)[ST_REP_WPDAY_COLS_MAX][ST_REP_WPDAY_CELL] = a_calloc(&x->a, 24, sizeof *wc);
    uint32_t cols = (uint32_t)(5 + wpd->n_tenants);
    const char **cells = a_calloc(&x->a, (size_t)24 * cols, sizeof *cells);
    if (!head || !wc || !cells)
        return;
    st_rep_who_pays_day_cells(wpd, head, wc);
    for (uint32_t hr = 0; hr < 24; hr++)
        for (uint32_t k = 0; k < cols; k++)
            cells[hr * cols + k] = wc[hr][k];
    st_buf_reset(&x->tb);
    st_buf_printf(&x->tb,
                  "The spec's traffic day on %s autoscaled (ceil(rate / its capacity of %.3g req/s) "
                  "replicas at $%.2f per replica-hour), the used part of each hour split over the trace's "
                  "tenants by their model-based shares (the trace's tenant mix assumed all day), the rest "
                  "idle; $ per hour.",
                  wpd->config, wpd->capacity_rps, wpd->usd_per_replica_hour);
    tables[(*nt)++] = (st_html_table){ .id = "who-pays-day",
                                       .title = "Who pays over the traffic day",
                                       .intro = a_take(&x->a, &x->tb),
                                       .head = head,
                                       .cells = cells,
                                       .cols = cols,
                                       .rows = 24 };
}

/* "A traffic day" (report/day.h): each configuration that met the SLO, cheapest first. */
static void day_table(html_ctx *x, st_html_table *tables, uint32_t *nt)
{
    const st_report *r = x->r;
    if (!r->day_present)
        return;
    const char **dc = a_calloc(&x->a, (size_t)r->n_cfg * (1 + ST_REP_DAY_CELLS), sizeof *dc);
    uint32_t rows = 0;
    for (int k = 0; dc && k < r->n_cfg; k++) {
        const st_rep_cfg *c = &r->cfg[r->order[k]];
        if (!c->day_ok)
            continue;
        char cells[ST_REP_DAY_CELLS][ST_REP_DAY_CELL_MAX];
        st_rep_day_cells(&c->day, cells);
        dc[rows * (1 + ST_REP_DAY_CELLS)] = c->name;
        for (int j = 0; j < ST_REP_DAY_CELLS; j++) {
            st_buf_reset(&x->tb);
            st_buf_puts(&x->tb, cells[j]);
            dc[rows * (1 + ST_REP_DAY_CELLS) + 1 + j] = a_take(&x->a, &x->tb);
        }
        rows++;
    }
    st_buf_reset(&x->tb);
    st_rep_day_intro(&x->tb, &r->spec, r->day_serverless_price_per_gpu_s, r->day_serverless_from);
    tables[(*nt)++] = (st_html_table){ .id = "day",
                                       .title = "A traffic day",
                                       .intro = a_take(&x->a, &x->tb),
                                       .after = st_rep_day_note,
                                       .head = st_rep_day_head,
                                       .cells = dc,
                                       .cols = 1 + ST_REP_DAY_CELLS,
                                       .rows = rows };
}

/* "Quality vs baseline" (report/quality.h). */
static void quality_table(html_ctx *x, st_html_table *tables, uint32_t *nt)
{
    const st_report *r = x->r;
    if (!r->quality.present)
        return;
    const char **qc = a_calloc(&x->a, (size_t)r->n_cfg * ST_REP_QUALITY_COLS, sizeof *qc);
    uint32_t rows = 0;
    for (int i = 0; qc && i < r->n_cfg; i++) {
        char cells[ST_REP_QUALITY_COLS - 1][ST_REP_QUALITY_CELL];
        if (st_rep_quality_cells(r, i, cells) < 0)
            continue;
        qc[rows * ST_REP_QUALITY_COLS] = r->cfg[i].name;
        for (int k = 0; k < ST_REP_QUALITY_COLS - 1; k++) {
            st_buf_reset(&x->tb);
            st_buf_puts(&x->tb, cells[k]);
            qc[rows * ST_REP_QUALITY_COLS + 1 + k] = a_take(&x->a, &x->tb);
        }
        rows++;
    }
    st_buf_reset(&x->tb);
    st_rep_quality_note(r, &x->tb);
    tables[(*nt)++] = (st_html_table){ .id = "quality",
                                       .title = "Quality vs baseline",
                                       .intro = a_take(&x->a, &x->tb),
                                       .head = st_rep_quality_head,
                                       .cells = qc,
                                       .cols = ST_REP_QUALITY_COLS,
                                       .rows = rows,
                                       .text_cols = 1u << 1 | 1u << 8 };
}

/* Predicted vs measured (report/predvs.h): one row per configuration the prediction has. */
static void predvs_table(html_ctx *x, st_html_table *tables, uint32_t *nt)
{
    static const char *const pv_head[10] = { "configuration", "capacity predicted", "measured",
                                             "error",         "TTFT p95 predicted", "measured",
                                             "error",         "TPOT p95 predicted", "measured",
                                             "error" };
    const st_report *r = x->r;
    const char **pv =
        r->predvs.present && !r->audit.prediction ? a_calloc(&x->a, (size_t)r->n_cfg * 10, sizeof *pv) : NULL;
    uint32_t pv_rows = 0;
    for (int i = 0; pv && i < r->n_cfg; i++) {
        char cells[9][32];
        if (st_predvs_cells(r, i, cells) < 0)
            continue;
        pv[pv_rows * 10] = r->cfg[i].name;
        for (int k = 0; k < 9; k++) {
            st_buf_reset(&x->tb);
            st_buf_puts(&x->tb, cells[k]);
            pv[pv_rows * 10 + 1 + k] = a_take(&x->a, &x->tb);
        }
        pv_rows++;
    }
    if (pv_rows)
        tables[(*nt)++] = (st_html_table){
            .id = "predvs",
            .title = "Predicted vs measured",
            .intro = "Before measuring, the audit ran servetune predict on the same spec (the engine model, "
                     "virtual time; details in prediction/). Capacity as each side found it; TTFT and TPOT "
                     "(p95) at the measured capacity's rate on both sides. Error = predicted / measured - 1.",
            .head = pv_head,
            .cells = pv,
            .cols = 10,
            .rows = pv_rows
        };
}

/* One run's row of the evidence table (7 cells). */
static void evidence_row(html_ctx *x, const st_rep_cfg *c, int j, const char **row)
{
    const st_run_row *w = &c->runs[j];
    char num[48];
    row[0] = c->name;
    st_fmt_rate(num, sizeof num, w->rate);
    st_buf_reset(&x->tb);
    st_buf_printf(&x->tb, "%s%s", num, x->r->spec.closed_loop ? "" : " req/s");
    row[1] = a_take(&x->a, &x->tb);
    st_buf_reset(&x->tb);
    st_buf_printf(&x->tb, "%s%s", st_report_verdict_words(x->r, w), w->client_limited ? " (client lagged)" : "");
    row[2] = a_take(&x->a, &x->tb);
    for (int t = 0; t < 2; t++) {
        double v = st_run_row_term_ms(w, t);
        st_fmt_num(num, sizeof num, v);
        st_buf_reset(&x->tb);
        st_buf_puts(&x->tb, num);
        row[3 + t] = a_take(&x->a, &x->tb);
    }
    st_fmt_num(num, sizeof num,
               isfinite(c->rr[j].engine_s) && c->rr[j].engine_s > 0 ? c->rr[j].engine_s : w->duration_s);
    st_buf_reset(&x->tb);
    st_buf_puts(&x->tb, num);
    row[5] = a_take(&x->a, &x->tb);
    row[6] = w->why ? w->why : "";
}

/* Every run, as report.md's evidence tables: the verdict and its reason in words. */
static void evidence_table(html_ctx *x, st_html_table *tables, uint32_t *nt)
{
    static const char *const ev_head[7] = { "configuration", "offered",  "verdict", "p95 TTFT (ms)",
                                            "p95 TPOT (ms)", "engine s", "why" };
    const st_report *r = x->r;
    int n_ev = 0;
    for (int i = 0; i < r->n_cfg; i++)
        n_ev += r->cfg[i].n_runs;
    const char **evc = n_ev ? a_calloc(&x->a, (size_t)n_ev * 7, sizeof *evc) : NULL;
    uint32_t ev_rows = 0;
    for (int k = 0; evc && k < r->n_cfg; k++) {
        const st_rep_cfg *c = &r->cfg[r->order[k]];
        for (int j = 0; j < c->n_runs; j++)
            evidence_row(x, c, j, &evc[(size_t)ev_rows++ * 7]);
    }
    if (ev_rows)
        tables[(*nt)++] =
            (st_html_table){ .id = "evidence",
                             .title = "Every run",
                             .intro = "Each run's verdict in words, cheapest configuration first, in the "
                                      "order the search ran them; the SLO terms over the run (a sustained "
                                      "run: over its measured window).",
                             .head = ev_head,
                             .cells = evc,
                             .cols = 7,
                             .rows = ev_rows,
                             .text_cols = 1u << 2 | 1u << 6 };
}

/* "Your traffic": the trace's rows and advice. 0, or -1 out of memory. */
static int traffic_section(html_ctx *x, st_html_report *h)
{
    const st_report *r = x->r;
    st_html_kv *tkv = a_calloc(&x->a, ST_REP_TRAFFIC_ROWS, sizeof *tkv);
    const char **tadv = a_calloc(&x->a, ST_REP_TRAFFIC_ADVICE, sizeof *tadv);
    if (x->a.oom)
        return -1;
    for (int i = 0; r->traffic.present && i < r->traffic.n_rows; i++)
        tkv[h->n_traffic++] = (st_html_kv){ r->traffic.key[i], r->traffic.value[i] };
    for (int i = 0; r->traffic.present && i < r->traffic.n_advice; i++)
        tadv[h->n_traffic_advice++] = r->traffic.advice[i];
    h->traffic = tkv;
    h->traffic_advice = tadv;
    return 0;
}

int st_report_html(const st_report *r, st_store *s, const st_html_audit_opts *opts, st_buf *out, char *err,
                   size_t errlen)
{
    html_ctx x = { .r = r, .s = s };
    st_buf_init(&x.tb, PIECE_MAX);
    char *ev = engine_version(r);
    st_html_report h;
    memset(&h, 0, sizeof h);
    uint32_t n = (uint32_t)(r->n_cfg > 0 ? r->n_cfg : 0);
    st_html_config *cf = a_calloc(&x.a, n, sizeof *cf);
    uint32_t *order = a_calloc(&x.a, n, sizeof *order);
    st_html_kv *kv = a_calloc(&x.a, 12, sizeof *kv);
    st_html_note *notes = a_calloc(&x.a, (size_t)(r->notes.n > 0 ? r->notes.n : 1), sizeof *notes);
    const char **method = a_calloc(&x.a, METHOD_MAX, sizeof *method);
    if (x.a.oom)
        goto oom;
    page_head(&x, opts, ev, kv, &h);

    int named = st_report_named_pick(r) >= 0; /* a headline that names no winner highlights none */
    for (uint32_t i = 0; i < n; i++) {
        order[i] = r->order ? (uint32_t)r->order[i] : i;
        if (config_card(&x, (int)i, named, &cf[i]))
            goto oom;
    }
    h.configs = cf;
    h.n_configs = n;
    h.order = r->order ? order : NULL;

    map_notes(r, notes, &h.n_notes);
    h.notes = notes;
    h.method = method;
    h.n_method = method_lines(&x, method);
    st_buf_reset(&x.tb); /* the generator alone (a prediction's method line was left in it) */
    st_buf_printf(&x.tb, "servetune %s", r->audit.version ? r->audit.version : ST_VERSION);
    h.generator = a_take(&x.a, &x.tb);
    st_html_table tables[8]; /* disaggregation, who pays, its day, the day, quality, predicted vs measured,
                              * evidence */
    uint32_t nt = 0;
    nt += (uint32_t)disagg_table(&x.a, &x.tb, r, &tables[nt]);
    who_pays_table(&x, tables, &nt);
    who_pays_day_table(&x, tables, &nt);
    day_table(&x, tables, &nt);
    quality_table(&x, tables, &nt);
    predvs_table(&x, tables, &nt);
    evidence_table(&x, tables, &nt);
    h.extra = tables;
    h.n_extra = nt;
    if (x.a.oom || traffic_section(&x, &h))
        goto oom;
    int rc = st_html_render(&h, out, err, errlen);
    free(ev);
    st_buf_free(&x.tb);
    a_free(&x.a);
    return rc;
oom:
    free(ev);
    st_buf_free(&x.tb);
    a_free(&x.a);
    snprintf(err, errlen, "out of memory building the HTML report");
    return -1;
}

int st_report_html_write(st_store *s, const char *dir, const st_html_audit_opts *opts, char *err, size_t errlen)
{
    st_report r;
    if (st_report_load(s, &r, err, errlen))
        return -1;
    st_buf b;
    st_buf_init(&b, ST_HTML_MAX_BYTES);
    int rc = st_report_html(&r, s, opts, &b, err, errlen);
    st_report_free(&r);
    char path[4096];
    if (rc == 0 && (size_t)snprintf(path, sizeof path, "%s/report.html", dir) >= sizeof path) {
        snprintf(err, errlen, "%s: path too long", dir);
        rc = -1;
    }
    if (rc == 0)
        rc = st_write_file_atomic(path, b.data ? b.data : "", b.len, err, errlen);
    st_buf_free(&b);
    return rc;
}
