#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/version.h"
#include "plan/cost.h"
#include "report/day.h"
#include "report/distrust.h"
#include "report/format.h"
#include "report/report.h"
#include "report/whopays_day.h"

static void slo_text(const st_spec *s, char *out, size_t n)
{
    size_t off = 0;
    out[0] = '\0';
    for (int i = 0; i < s->slo.n && off < n; i++) {
        const st_slo_term *t = &s->slo.terms[i];
        const char *m = st_slo_metric_name(t->metric);
        char up[16]; /* the longest metric name, "makespan", upper-cased */
        size_t k;
        for (k = 0; m[k] && k + 1 < sizeof up; k++)
            up[k] = (char)(m[k] - 32);
        up[k] = '\0';
        off += (size_t)snprintf(out + off, n - off, "%sp%g %s <= %g ms", i ? ", " : "", t->pct, up, t->max_ms);
    }
}

/* What a reader must know before acting on the pick: the notes that warn about it, and a
 * checkpoint that differs from the current one (quality is out of scope of the audit). */
static void pick_caveats(const st_report *r, const st_rep_cfg *p, st_buf *b)
{
    int warn = 0;
    for (int i = 0; i < r->notes.n; i++) {
        const st_note *n = &r->notes.v[i];
        warn += n->sev != ST_NOTE_INFO && n->config && !strcmp(n->config, p->name);
    }
    const char *m0 = st_spec_config_model(&r->spec, r->cfg[0].spec);
    const char *m1 = st_spec_config_model(&r->spec, p->spec);
    int other_model = p->spec && r->cfg[0].spec && m0 && m1 && strcmp(m0, m1);
    /* the quality pass measured its answers: said instead of asking the reader to check them */
    if (st_rep_quality_headline(r, (int)(p - r->cfg), b))
        other_model = 0;
    if (!warn && !other_model)
        return;
    st_buf_printf(b, " Before acting on it:");
    if (warn)
        st_buf_printf(b, " read the %d warning%s about %s in the notes", warn, warn == 1 ? "" : "s", p->name);
    if (other_model)
        st_buf_printf(b, "%s check the output quality of %s, which this audit does not measure", warn ? ", and" : "",
                      m1);
    st_buf_puts(b, ".");
}

/* A configuration counts as tested when it has a verdict, failed, or ran a rate that decided nothing. */
static int was_tested(const st_rep_cfg *c) { return c->status != ST_REP_NOT_RUN || c->ran; }

/* Sessions (an agent trace's tasks): the rate the search found in its own unit, after how (of
 * size n), ending with a comma. */
static void session_tail(const st_report *r, const st_rep_cfg *p, char *how, size_t n)
{
    char sr[32], tail[160];
    st_fmt_num(sr, sizeof sr, p->cap->pass_rate);
    snprintf(tail, sizeof tail, " as %s starting at %s %s",
             r->spec.workload.agent ? "agent tasks of the trace" : "multi-turn sessions", sr,
             st_spec_rate_unit(&r->spec));
    if (isfinite(p->requests_per_session))
        snprintf(tail + strlen(tail), sizeof tail - strlen(tail), " (%.3g requests each on average)",
                 p->requests_per_session);
    size_t hl = strlen(how);
    snprintf(how + hl, n - hl, "%s%s", hl && how[hl - 1] == ',' ? "" : ",", tail);
    if (how[strlen(how) - 1] != ',')
        snprintf(how + strlen(how), n - strlen(how), ",");
}

/* The figures and phrases the headline's sentences share. */
typedef struct headline_ctx {
    char slo[256], untested[96], pk[32]; /* the SLO, "(N more not run yet)", the peak */
    char a[32], y[32], m1[32];           /* the pick's capacity, $ per 1M tokens, $ a month */
    char how[400];                       /* what "serves" means for the pick */
    const char *maybe, *pk_what;         /* capacity may be higher; where the peak came from */
    int tested, others;                  /* configurations tested, and those besides the baseline */
} headline_ctx;

/* The current setup without a capacity: why, before the rest of the headline. */
static void headline_base(const st_rep_cfg *base, const char *slo, st_buf *b)
{
    if (base->status == ST_REP_FAILED)
        st_buf_printf(b, "The current setup (%s) %s (%s). ", base->name,
                      base->ran ? "failed while it ran" : "did not start", base->note);
    else if (base->status == ST_REP_NOT_RUN && strncmp(base->note, "not run", 7))
        st_buf_printf(b, "The current setup (%s) has no capacity yet: %s. ", base->name, base->note);
    else if (base->status == ST_REP_NOT_RUN)
        st_buf_printf(b, "The current setup (%s) was not measured. ", base->name);
    else
        st_buf_printf(b, "The current setup (%s) met the SLO (%s) at no tested rate. ", base->name, slo);
}

/* No pick: no configuration met the SLO, or none that did stayed within the quality limits. */
static void headline_no_pick(const st_report *r, const char *slo, st_buf *b)
{
    int q_out = 0; /* met the SLO but failed a quality limit */
    for (int i = 0; i < r->n_cfg; i++)
        q_out += r->cfg[i].status == ST_REP_OK && st_rep_quality_fails(r, i);
    if (q_out)
        st_buf_printf(b, "No configuration both met the SLO (%s) and stayed within the quality limits.", slo);
    else
        st_buf_printf(b, "No configuration met the SLO (%s) at any tested rate; the notes below say why.", slo);
    if (q_out)
        st_rep_quality_headline(r, -1, b);
}

/* What "serves" means for the pick p: a sustained rate (with its interval), or a burst test's
 * figure; in the search's own unit too when it offered session (or task) starts. */
static void headline_how(const st_report *r, const st_rep_cfg *p, char *how, size_t n)
{
    how[0] = '\0';
    if (r->sustained && r->spec.closed_loop) {
        snprintf(how, n, ", sustained at %g concurrent requests,", p->cap->pass_rate);
    } else if (r->sustained && isfinite(p->cap->ci_lo) && !isnan(p->cap->ci_hi)) {
        char l[32], h[32];
        char u[32] = "";
        if (r->spec.workload.sessions.on)
            snprintf(u, sizeof u, " %s", st_spec_rate_unit(&r->spec));
        st_fmt_num(l, sizeof l, p->cap->ci_lo);
        st_fmt_num(h, sizeof h, p->cap->ci_hi);
        if (isinf(p->cap->ci_hi))
            /* no failing rate above: the limit is bounded below only (below the rate it passed) */
            snprintf(how, n,
                     ", a sustained rate (no rate above it failed, so its limit was not bracketed: at least %s%s at "
                     "%.0f %% confidence),",
                     l, u, r->spec.search.confidence * 100);
        else
            snprintf(how, n, ", a sustained rate (its limit lies in %s-%s%s, %.0f %% confidence),", l, h, u,
                     r->spec.search.confidence * 100);
    } else if (!r->sustained && r->spec.closed_loop) {
        snprintf(how, n,
                 " at %g concurrent requests in a fixed-count closed loop of %u requests (as vllm bench serve "
                 "--max-concurrency %g --num-prompts %u; not a sustained rate),",
                 p->cap->pass_rate, r->spec.workload.requests_per_rate, p->cap->pass_rate,
                 r->spec.workload.requests_per_rate);
    } else if (!r->sustained) {
        snprintf(how, n, " in a burst test of %u requests per rate (not a sustained rate),",
                 r->spec.workload.requests_per_rate);
    }
    if (r->spec.workload.sessions.on)
        session_tail(r, p, how, n);
}

/* A pick other than the current setup, against it when it has a capacity. */
static void headline_best(const st_report *r, const headline_ctx *h, const st_rep_cfg *p, st_buf *b)
{
    const st_rep_cfg *base = &r->cfg[0];
    if (base->status != ST_REP_OK) {
        st_buf_printf(b,
                      "Of the %d configurations tested%s, the best, %s, serves %s requests/s within the SLO (%s)%s%s "
                      "at %s per million output tokens; at the %s peak of %s requests/s that is %ld replica%s, "
                      "about %s a month.",
                      h->tested, h->untested, p->name, h->a, h->slo, h->how, h->maybe, h->y, h->pk_what, h->pk,
                      p->cost.replicas, p->cost.replicas == 1 ? "" : "s", h->m1);
        return;
    }
    char bb[32], x[32], pc[32], m0[32];
    st_fmt_num(bb, sizeof bb, base->cap->capacity_rps);
    st_fmt_usd(x, sizeof x, base->cost.usd_per_1m);
    st_fmt_pct(pc, sizeof pc, p->cost_vs_base);
    st_fmt_usd(m0, sizeof m0, base->cost.monthly_usd);
    st_buf_printf(b,
                  "Of the %d configurations tested%s, the best, %s, serves %s requests/s within the SLO (%s)%s%s "
                  "against %s for the current setup (%s), which moves cost per million output tokens from %s to "
                  "%s (%s); at the %s peak of %s requests/s ",
                  h->tested, h->untested, p->name, h->a, h->slo, h->how, h->maybe, bb, base->name, x, h->y, pc,
                  h->pk_what, h->pk);
    if (p->cost.replicas == base->cost.replicas)
        /* the same fleet: the saving per token shows only where traffic is below the peak */
        st_buf_printf(b,
                      "both need %ld replica%s (about %s a month): the lower cost per token pays off below the "
                      "peak, or where a replica is shared.",
                      p->cost.replicas, p->cost.replicas == 1 ? "" : "s", h->m1);
    else
        st_buf_printf(b, "that is %ld replica%s instead of %ld, about %s a month instead of %s.", p->cost.replicas,
                      p->cost.replicas == 1 ? "" : "s", base->cost.replicas, h->m1, m0);
}

/* The pick's sentence: the current setup alone, the current setup beating the others, or the
 * best of the others. */
static void headline_pick(const st_report *r, headline_ctx *h, st_buf *b)
{
    const st_rep_cfg *p = &r->cfg[r->pick];
    st_fmt_num(h->a, sizeof h->a, p->cap->capacity_rps);
    headline_how(r, p, h->how, sizeof h->how);
    st_fmt_usd(h->y, sizeof h->y, p->cost.usd_per_1m);
    st_fmt_usd(h->m1, sizeof h->m1, p->cost.monthly_usd);
    h->maybe = p->cap->highest_tested_passed ? " (its highest tested rate passed, so capacity may be higher)" : "";
    /* where the peak came from: the spec's number, or the trace (peak_rate: trace) */
    h->pk_what = r->spec.peak_source == ST_PEAK_BUSIEST_MINUTE ? "trace's busiest-minute"
                 : r->spec.peak_source == ST_PEAK_TRACE_MEAN   ? "trace's mean"
                                                               : "stated";
    if (r->pick == 0 && r->n_cfg == 1) {
        st_buf_printf(b,
                      "The current setup (%s) serves %s requests/s within the SLO (%s)%s%s at %s per million output "
                      "tokens; at the %s peak of %s requests/s that is %ld replica%s, about %s a month.",
                      p->name, h->a, h->slo, h->how, h->maybe, h->y, h->pk_what, h->pk, p->cost.replicas,
                      p->cost.replicas == 1 ? "" : "s", h->m1);
        return;
    }
    if (r->pick == 0) {
        st_buf_printf(b,
                      "None of the %d other configuration%s tested%s beats the current setup: %s serves %s requests/s "
                      "within the SLO (%s)%s%s at %s per million output tokens; at the %s peak of %s requests/s "
                      "that is %ld replica%s, about %s a month.",
                      h->others, h->others == 1 ? "" : "s", h->untested, p->name, h->a, h->slo, h->how, h->maybe, h->y,
                      h->pk_what, h->pk, p->cost.replicas, p->cost.replicas == 1 ? "" : "s", h->m1);
        st_rep_quality_headline(r, 0, b); /* the configurations a quality limit left out */
        return;
    }
    headline_best(r, h, p, b);
    pick_caveats(r, p, b);
}

int st_report_headline(const st_report *r, st_buf *b)
{
    headline_ctx h;
    memset(&h, 0, sizeof h);
    slo_text(&r->spec, h.slo, sizeof h.slo);
    const st_rep_cfg *base = &r->cfg[0];
    /* configurations measured (or that failed to start): an interrupted audit has not run them all */
    for (int i = 0; i < r->n_cfg; i++)
        h.tested += was_tested(&r->cfg[i]);
    h.others = h.tested - was_tested(base);
    int not_run = r->n_cfg - h.tested;
    if (not_run)
        snprintf(h.untested, sizeof h.untested, " (%d more not run yet)", not_run);
    st_fmt_num(h.pk, sizeof h.pk, r->spec.peak_rate);
    if (r->audit.prediction)
        st_buf_puts(b, "Prediction (engine model, virtual time; to be confirmed on hardware): ");
    if (r->audit.partial)
        st_buf_printf(b, "Partial results (the audit did not finish%s%s): ", r->audit.note ? ": " : "",
                      r->audit.note ? r->audit.note : "");
    /* reasons to distrust the comparison come first, and then no winner is named */
    st_distrust dt;
    st_report_distrust_find(r, &dt);
    if (dt.host || dt.tie || dt.failed) {
        st_report_distrust_lead(r, &dt, b);
        st_rep_quality_headline(r, -1, b); /* a quality limit's exclusions hold with or without a winner */
        return 0;
    }
    if (base->status != ST_REP_OK)
        headline_base(base, h.slo, b);
    if (r->pick < 0)
        headline_no_pick(r, h.slo, b);
    else
        headline_pick(r, &h, b);
    return 0;
}

static void flags_joined(const st_strv *v, char *out, size_t n)
{
    size_t off = 0;
    out[0] = '\0';
    for (int i = 0; i < v->n && off < n; i++)
        off += (size_t)snprintf(out + off, n - off, "%s%s", i ? " " : "", v->v[i]);
}

/* The first run's "engine_version" (facts is a JSON object) into out, unescaped; 0 when none. */
static int facts_engine_version(const st_report *r, char *out, size_t n)
{
    for (int i = 0; i < r->n_rows; i++) {
        const char *f = r->rows[i].facts;
        if (!f || !strstr(f, "\"engine_version\""))
            continue;
        json_t *o = json_loads(f, 0, NULL);
        const char *v = json_string_value(json_object_get(o, "engine_version"));
        if (v)
            snprintf(out, n, "%s", v);
        json_decref(o);
        if (v)
            return 1;
    }
    return 0;
}

static void setup_section(const st_report *r, st_buf *b)
{
    const st_spec *s = &r->spec;
    char tmp[4096], n1[32];
    st_buf_puts(b, "## Setup\n\n");
    st_buf_printf(b, "- **Engine**: %s", st_engine_kind_name(s->engine.kind));
    char ver[256];
    if (facts_engine_version(r, ver, sizeof ver)) { /* the engine's own text (its /version answer): escaped */
        st_buf_puts(b, " (version ");
        st_md_text(b, ver);
        st_buf_puts(b, ")");
    }
    if (s->engine.kind == ST_ENGINE_ENDPOINT) {
        st_buf_puts(b, " at ");
        st_md_code(b, s->engine.url);
    }
    st_buf_puts(b, "\n- **Model**: ");
    st_md_code(b, s->engine.model);
    flags_joined(&s->engine.flags, tmp, sizeof tmp);
    st_buf_puts(b, "\n- **Baseline flags**: ");
    if (s->engine.flags.n)
        st_md_code(b, tmp);
    else
        st_buf_puts(b, "(none)");
    st_fmt_usd(n1, sizeof n1, s->hardware.price_per_gpu_hour);
    st_buf_puts(b, "\n- **Hardware**: ");
    st_md_text(b, s->hardware.gpu);
    st_buf_printf(b, ", %d GPU%s per replica at %s per GPU-hour\n", s->hardware.gpus_per_replica,
                  s->hardware.gpus_per_replica == 1 ? "" : "s", n1);
    char per[96];
    st_report_run_length(r, " (below)", per, sizeof per);
    if (s->workload.kind == ST_WL_SYNTHETIC) {
        st_buf_puts(b, "- **Workload**: ");
        st_report_synthetic_text(r, b);
        st_buf_puts(b, "\n");
    } else if (s->workload.agent) {
        st_buf_puts(b, "- **Workload** (an agent-trace audit): ");
        st_report_agent_text(r, b);
        st_buf_puts(b, "\n");
    } else {
        st_buf_puts(b, "- **Workload**: replayed trace ");
        st_md_code(b, s->workload.trace);
        st_buf_printf(b, ", %s after %u warm-up requests\n", per, s->warmup_requests);
    }
    if (s->workload.agent) {
        /* (said with the workload) */
    } else if (s->workload.sessions.on && s->workload.kind == ST_WL_TRACE) {
        char th[64] = "the recorded think time";
        if (s->workload.sessions.think_set)
            snprintf(th, sizeof th, "%g s (workload.think_time)", s->workload.sessions.think_s);
        st_buf_printf(b,
                      "- **Sessions**: the trace's conversations replayed: a session's first turn on the arrival "
                      "schedule, each later turn sent when the turn before it ended plus %s, its prompt the "
                      "conversation so far with the answers the server returned; rates are sessions starting per "
                      "second\n",
                      th);
    } else if (s->workload.sessions.on)
        st_buf_printf(b,
                      "- **Sessions**: multi-turn conversations of %u-%u turns: the first prompt is the input tokens "
                      "above (the shared prefix its system prompt), each later turn adds %u new user tokens to the "
                      "conversation so far (with the answers the server returned) and is sent %g s (%s) after the "
                      "turn before it ended; rates are sessions starting per second\n",
                      s->workload.sessions.turns_min, s->workload.sessions.turns_max, s->workload.sessions.user_tokens,
                      s->workload.sessions.think_s, s->workload.sessions.think_exp ? "exponential mean" : "constant");
    char grid[2048];
    st_report_rate_grid(s, grid, sizeof grid);
    if (r->sustained) {
        char start[2300];
        st_report_search_start(r, grid, start, sizeof start);
        st_buf_printf(b,
                      "- **Search**: sustained (%s); tolerance %.0f %%, confidence "
                      "%.0f %%, at most %u runs per configuration; each run warms up for %g median E2Es, then "
                      "measures a window of at least %g s and %u requests, within %g s\n",
                      start, s->search.tolerance * 100, s->search.confidence * 100, s->search.max_runs,
                      s->search.warmup_e2e, s->search.min_window_s, s->search.min_window_requests,
                      s->search.max_duration_s);
    } else if (s->closed_loop) {
        st_buf_printf(b, "- **Concurrency levels tried**: %s (a fixed-count closed loop of %u requests each: %s)\n",
                      grid, s->workload.requests_per_rate, r->refine ? "grid, then refine" : "grid");
    } else {
        st_buf_printf(b, "- **Rates tried**: %s %s (a burst test: %s)\n", grid, st_spec_rate_unit(s),
                      r->refine ? "grid, then refine" : "grid");
    }
    slo_text(s, tmp, sizeof tmp);
    st_fmt_num(n1, sizeof n1, s->peak_rate);
    st_buf_printf(b, "- **SLO**: %s\n- **%s peak**: %s requests/s%s\n", tmp,
                  s->peak_source == ST_PEAK_STATED ? "Stated" : "Traffic", n1,
                  s->peak_source == ST_PEAK_BUSIEST_MINUTE ? " (the trace's busiest minute, `peak_rate: trace`)"
                  : s->peak_source == ST_PEAK_TRACE_MEAN   ? " (the trace's mean rate: it spans less than a minute)"
                  : s->peak_source == ST_PEAK_FROM_TRACE   ? " (`peak_rate: trace`, but the audit stored no traffic)"
                                                           : "");
    st_fmt_date(tmp, sizeof tmp, r->audit.started);
    st_buf_printf(b, "- **Date**: %s, servetune %s\n\n", tmp, r->audit.version ? r->audit.version : ST_VERSION);
}

/* One configuration's row of the sessions or agent-tasks table: the rate in sessions (tasks) per
 * second, requests per session, delivered req/s and the makespans (a session is a task: first
 * arrival to last end, load/agent_run.h). */
static void session_row(const st_rep_cfg *c, double rate, st_buf *b)
{
    char a[32], rq[32], d[32], m50[32] = "-", m95[32] = "-";
    st_fmt_num(a, sizeof a, rate);
    st_fmt_num(rq, sizeof rq, c->requests_per_session);
    st_fmt_num(d, sizeof d, c->cap->capacity_rps);
    if (c->tasks_done) {
        st_fmt_num(m50, sizeof m50, c->makespan_p50_ms / 1e3);
        st_fmt_num(m95, sizeof m95, c->makespan_p95_ms / 1e3);
    }
    st_buf_puts(b, "| ");
    st_md_text(b, c->name);
    st_buf_printf(b, " | %s | %s | %s | %s | %s |\n", a, rq, d, m50, m95);
}

/* An agent-trace audit: what the rates mean, each configuration's task rate, requests/s and
 * makespans at its capacity, and its TTFT by depth (a node's turn is its depth). */
static void agent_section(const st_report *r, st_buf *b)
{
    st_buf_puts(b, "## Agent tasks\n\nThe offered rates are agent tasks STARTING per second (tasks/s): a task's "
                   "first request is on the arrival schedule, every other request is sent when the last of its "
                   "parents answered plus its recorded gap. The capacity in the tables above is the requests/s the "
                   "engine delivered at the highest task rate that held the SLO; that task rate is below. ");
    st_report_agent_shape_text(r, b);
    st_buf_puts(b, "\n\n");
    st_buf_puts(b, "| Config | Capacity (tasks/s) | Requests per task | Delivered (req/s) | Makespan p50 (s) | "
                   "Makespan p95 (s) |\n|---|---:|---:|---:|---:|---:|\n");
    for (int k = 0; k < r->n_cfg; k++) {
        const st_rep_cfg *c = &r->cfg[r->order[k]];
        if (c->status != ST_REP_OK)
            continue;
        session_row(c, c->cap->has_pass ? c->cap->pass_rate : NAN, b);
    }
    st_buf_puts(b, "\n");
    for (int k = 0; k < r->n_cfg; k++) {
        const st_rep_cfg *c = &r->cfg[r->order[k]];
        if (c->status != ST_REP_OK || !c->n_turns)
            continue;
        st_buf_puts(b, "TTFT by depth for ");
        st_md_text(b, c->name);
        st_buf_puts(b, " at its capacity (depth 0: a task's first request):\n\n| Depth | Requests | Completed | "
                       "TTFT p50 (ms) | TTFT p95 (ms) | Cached share |\n|---:|---:|---:|---:|---:|---:|\n");
        for (int t = 0; t < c->n_turns; t++) {
            const st_turn_row *w = &c->turns[t];
            if (!w->requests)
                continue;
            char p50[32] = "-", p95[32] = "-", cs[32] = "-";
            if (w->completed) {
                st_fmt_num(p50, sizeof p50, w->ttft.p50 * 1e3);
                st_fmt_num(p95, sizeof p95, w->ttft.p95 * 1e3);
            }
            if (isfinite(st_turn_cached_share(w)))
                snprintf(cs, sizeof cs, "%.0f %%", 100.0 * st_turn_cached_share(w));
            st_buf_printf(b, "| %u%s | %u | %u | %s | %s | %s |\n", w->turn, t == ST_TURN_ROWS - 1 ? "+" : "",
                          w->requests, w->completed, p50, p95, cs);
        }
        st_buf_puts(b, "\n");
    }
}

/* Multi-turn sessions: what the rates mean, and each configuration's TTFT by turn at its capacity. */
static void sessions_section(const st_report *r, st_buf *b)
{
    if (!r->spec.workload.sessions.on)
        return;
    if (r->spec.workload.agent) {
        agent_section(r, b);
        return;
    }
    st_buf_puts(b, "## Multi-turn sessions\n\nThe offered rates are sessions STARTING per second: a session's "
                   "first turn is on the arrival schedule, its later turns follow its answers. The capacity in the "
                   "tables above is the requests/s the engine delivered at the highest session rate that held the "
                   "SLO (the cost per output token does not depend on the unit); that session rate is below.\n\n");
    st_buf_puts(b, "| Config | Capacity (sessions/s) | Requests per session | Delivered (req/s) | Makespan p50 (s) | "
                   "Makespan p95 (s) |\n"
                   "|---|---:|---:|---:|---:|---:|\n");
    for (int k = 0; k < r->n_cfg; k++) {
        const st_rep_cfg *c = &r->cfg[r->order[k]];
        if (c->status != ST_REP_OK)
            continue;
        session_row(c, c->cap->pass_rate, b);
    }
    st_buf_puts(b, "\n");
    for (int k = 0; k < r->n_cfg; k++) {
        const st_rep_cfg *c = &r->cfg[r->order[k]];
        if (c->status != ST_REP_OK || !c->n_turns)
            continue;
        char a[32];
        st_fmt_num(a, sizeof a, c->cap->pass_rate);
        st_buf_puts(b, "TTFT by turn for ");
        st_md_text(b, c->name);
        st_buf_printf(b,
                      " at its capacity (%s sessions/s): a later turn's prompt holds the conversation so far, so "
                      "its TTFT depends on how much of it the prefix cache still holds.\n\n"
                      "| Turn | Requests | Completed | TTFT p50 (ms) | TTFT p95 (ms) | Prompt tokens (mean) | Cached "
                      "share |\n|---:|---:|---:|---:|---:|---:|---:|\n",
                      a);
        for (int t = 0; t < c->n_turns; t++) {
            const st_turn_row *w = &c->turns[t];
            if (!w->requests)
                continue;
            char p50[32], p95[32], pm[32], cs[32];
            st_fmt_num(p50, sizeof p50, w->completed ? w->ttft.p50 * 1e3 : NAN);
            st_fmt_num(p95, sizeof p95, w->completed ? w->ttft.p95 * 1e3 : NAN);
            st_fmt_num(pm, sizeof pm, w->completed ? (double)w->prompt_tokens / w->completed : NAN);
            double share = st_turn_cached_share(w);
            if (isfinite(share))
                snprintf(cs, sizeof cs, "%.1f %%", 100.0 * share);
            else
                snprintf(cs, sizeof cs, "-");
            st_buf_printf(b, "| %u%s | %u | %u | %s | %s | %s | %s |\n", w->turn, t == ST_TURN_ROWS - 1 ? "+" : "",
                          w->requests, w->completed, p50, p95, pm, cs);
        }
        st_buf_puts(b, "\n(cached share: the prompt tokens the server reported as cached; \"-\" when it reports "
                       "none, e.g. vLLM without --enable-prompt-tokens-details)\n\n");
    }
}

/* The sustained search behind each capacity: bracket, interval, what binds, the boundary's kind,
 * what it cost, and the overloaded engine's throughput. */
static void search_table(const st_report *r, st_buf *b)
{
    const char *u = r->spec.closed_loop ? "concurrency" : st_spec_rate_unit(&r->spec);
    st_buf_printf(b,
                  "| Config | Bracket (sustained .. failed, %s) | Limit interval (%.0f %%) | Binding term | Boundary | "
                  "Runs | Engine-minutes | Max throughput (req/s) | Replicas at peak | Monthly cost |\n"
                  "|---|---|---|---|---|---:|---:|---:|---:|---:|\n",
                  u, r->spec.search.confidence * 100);
    for (int k = 0; k < r->n_cfg; k++) {
        const st_rep_cfg *c = &r->cfg[r->order[k]];
        if (!c->n_runs)
            continue;
        const st_capacity *cap = c->cap;
        char p1[32], f1[32], l[32], h[32], bind[48], em[32], mt[32], m[32], rep[32];
        st_fmt_num(p1, sizeof p1, cap->pass_rate);
        st_fmt_num(f1, sizeof f1, cap->fail_rate);
        if (cap->fail_undecided)
            snprintf(f1 + strlen(f1), sizeof f1 - strlen(f1), " (undecided)");
        st_fmt_num(l, sizeof l, cap->ci_lo);
        st_fmt_num(h, sizeof h, cap->ci_hi);
        st_report_binding(r, c, bind, sizeof bind);
        st_fmt_num(em, sizeof em, cap->engine_s / 60);
        st_fmt_num(mt, sizeof mt, cap->max_throughput_rps);
        st_fmt_usd(m, sizeof m, c->status == ST_REP_OK ? c->cost.monthly_usd : NAN);
        if (c->status == ST_REP_OK)
            snprintf(rep, sizeof rep, "%ld", c->cost.replicas);
        else
            snprintf(rep, sizeof rep, "-");
        if (isinf(cap->ci_hi))
            snprintf(h, sizeof h, "open");
        st_buf_puts(b, "| ");
        st_md_text(b, c->name);
        st_buf_printf(
            b, " | %s%s .. %s%s | %s-%s | %s | %s | %d | %s | %s | %s | %s |\n", cap->has_pass ? p1 : "none",
            cap->has_pass && !cap->pass_sure ? " (not confident)" : "", isfinite(cap->fail_rate) ? f1 : "not found",
            isfinite(cap->fail_rate) && !cap->fail_sure && !cap->fail_undecided ? " (not confident)" : "",
            cap->has_pass && isfinite(cap->ci_lo) ? l : "-", cap->has_pass && !isnan(cap->ci_hi) ? h : "-", bind,
            !cap->has_pass || !cap->has_fail_above ? "-"
            : cap->cliff                           ? "cliff"
                                                   : "smooth",
            cap->runs, em, mt, rep, m);
    }
    st_buf_puts(b, "\nCapacity is the highest rate the search demonstrated (the bracket's lower end); the limit "
                   "interval is where the highest sustainable rate lies: where the binding term's percentile "
                   "interval crosses its limit, interpolated between the bracket's ends (at a cliff, the bracket "
                   "itself; a call that is not confident leaves its side open to the next rate tried). Max "
                   "throughput: what the engine delivered while over-saturated (a separate figure; never used for "
                   "sizing).\n\n");
}

static void results_section(const st_report *r, st_buf *b)
{
    int named = st_report_named_pick(r);
    st_buf_puts(b, "## Results, cheapest first\n\n"
                   "| Config | Capacity at SLO (req/s) | vs current | Output tok/s at capacity | $ per 1M output tok | "
                   "vs current | p95 TTFT / TPOT at capacity (ms) |\n"
                   "|---|---:|---:|---:|---:|---:|---:|\n");
    for (int k = 0; k < r->n_cfg; k++) {
        const st_rep_cfg *c = &r->cfg[r->order[k]];
        char a[32], v1[32], o[32], u[32], v2[32], t1[32], t2[32];
        st_buf_puts(b, "| ");
        st_md_text(b, c->name);
        if (r->order[k] == 0)
            st_buf_puts(b, " (current)");
        if (r->order[k] == named)
            st_buf_puts(b, " **pick**");
        if (c->status == ST_REP_OK) {
            st_fmt_num(a, sizeof a, c->cap->capacity_rps);
            st_fmt_pct(v1, sizeof v1, c->cap_vs_base);
            st_fmt_num(o, sizeof o, c->cap->output_tps);
            st_fmt_usd(u, sizeof u, c->cost.usd_per_1m);
            st_fmt_pct(v2, sizeof v2, c->cost_vs_base);
            st_fmt_num(t1, sizeof t1, c->ttft_p95_ms);
            st_fmt_num(t2, sizeof t2, c->tpot_p95_ms);
            st_buf_printf(b, " | %s%s | %s | %s | %s | %s | %s / %s |\n", a,
                          c->cap->highest_tested_passed ? " (>=)" : "", r->order[k] == 0 ? "-" : v1, o, u,
                          r->order[k] == 0 ? "-" : v2, t1, t2);
        } else {
            const char *what = c->status == ST_REP_NONE_PASSED ? "none passed (see notes)"
                               : c->status == ST_REP_FAILED    ? (c->ran ? "engine failed: " : "did not start: ")
                               : c->ran                        ? "no verdict: "
                                                               : "not run";
            st_buf_printf(b, " | %s", what);
            if (c->status == ST_REP_FAILED || (c->status == ST_REP_NOT_RUN && c->ran))
                st_md_text(b, c->note);
            st_buf_puts(b, " | - | - | - | - | - |\n");
        }
    }
    int any_ge = 0;
    for (int k = 0; k < r->n_cfg; k++)
        any_ge |= r->cfg[k].status == ST_REP_OK && r->cfg[k].cap->highest_tested_passed;
    st_buf_puts(b, any_ge ? "\n(>=) the highest tested rate passed: capacity may be higher than measured.\n\n" : "\n");
    if (r->sustained) {
        search_table(r, b);
        return;
    }

    /* The bracket and the other figures behind the table. */
    st_buf_printf(b,
                  "| Config | Bracket (pass .. fail, %s) | Grid capacity | Refined capacity | Sustained "
                  "(steady state) | Replicas at peak | Monthly cost |\n|---|---|---:|---:|---:|---:|---:|\n",
                  r->spec.closed_loop ? "concurrency" : st_spec_rate_unit(&r->spec));
    for (int k = 0; k < r->n_cfg; k++) {
        const st_rep_cfg *c = &r->cfg[r->order[k]];
        if (c->status != ST_REP_OK)
            continue;
        char p1[32], f1[32], g[32], rf[32], su[32], m[32];
        st_fmt_rate(p1, sizeof p1, c->cap->pass_rate);
        if (c->cap->has_fail_above)
            st_fmt_rate(f1, sizeof f1, c->cap->fail_rate);
        if (c->cap->has_fail_above && c->cap->fail_undecided)
            snprintf(f1 + strlen(f1), sizeof f1 - strlen(f1), " (undecided)");
        else if (!c->cap->has_fail_above)
            snprintf(f1, sizeof f1, "not found");
        st_fmt_num(g, sizeof g, c->grid.capacity_rps);
        st_fmt_num(rf, sizeof rf, r->refine ? c->refined.capacity_rps : NAN);
        st_fmt_num(su, sizeof su, c->cap->sustained_rps);
        st_fmt_usd(m, sizeof m, c->cost.monthly_usd);
        st_buf_puts(b, "| ");
        st_md_text(b, c->name);
        st_buf_printf(b, " | %s .. %s | %s | %s | %s | %ld | %s |\n", p1, f1, g, rf, su, c->cost.replicas, m);
    }
    st_buf_puts(b, "\n");
}

static void changes_section(const st_report *r, st_buf *b)
{
    char tmp[4096];
    st_buf_puts(b, "## What each configuration changes\n\n");
    for (int i = 0; i < r->n_cfg; i++) {
        const st_spec_config *c = r->cfg[i].spec;
        st_buf_puts(b, "- **");
        st_md_text(b, c->name);
        st_buf_puts(b, "**");
        int any = 0;
        if (i == 0) {
            st_buf_puts(b, " (the current setup)");
        }
        if (c->add_flags.n) {
            flags_joined(&c->add_flags, tmp, sizeof tmp);
            st_buf_puts(b, any++ ? "; adds " : ": adds ");
            st_md_code(b, tmp);
        }
        if (c->remove_flags.n) {
            flags_joined(&c->remove_flags, tmp, sizeof tmp);
            st_buf_puts(b, any++ ? "; removes " : ": removes ");
            st_md_code(b, tmp);
        }
        if (c->model) {
            st_buf_puts(b, any++ ? "; model " : ": model ");
            st_md_code(b, c->model);
        }
        for (int e = 0; e < c->env.n; e++) {
            snprintf(tmp, sizeof tmp, "%s=%s", c->env.key[e], c->env.val[e]);
            st_buf_puts(b, any++ ? "; sets " : ": sets ");
            st_md_code(b, tmp);
        }
        if (!any && i != 0)
            st_buf_puts(b, ": no change against the baseline");
        if (c->reason) {
            st_buf_puts(b, " - ");
            st_md_text(b, c->reason);
        }
        const st_config_row *row = r->cfg[i].row;
        if (row && row->argv) {
            st_buf_puts(b, "\n  Command: ");
            st_md_code(b, row->argv);
        }
        st_buf_puts(b, "\n");
    }
    st_buf_puts(b, "\n");
}

/* A sustained run's server figures cell. */
static void server_cell(const st_rep_server *sv, st_buf *b)
{
    if (sv->samples) {
        char k1[32], k2[32], k3[32], k4[32];
        st_fmt_num(k1, sizeof k1, sv->kv_usage_max * 100);
        st_fmt_num(k2, sizeof k2, sv->running_max);
        st_fmt_num(k3, sizeof k3, sv->waiting_max);
        st_fmt_num(k4, sizeof k4, sv->preemptions);
        st_buf_printf(b, "%s %% / %s / %s / %s | ", k1, k2, k3, k4);
    } else {
        st_buf_puts(b, "- | ");
    }
}

/* "812 (700-950)" for term t of a sustained run, "-" without a figure. */
static void term_cell(const st_sustain_result *x, int t, st_buf *b)
{
    char v[32], l[32], h[32];
    if (t >= x->n_terms || !isfinite(x->term[t].value_ms)) {
        st_buf_puts(b, "- | ");
        return;
    }
    st_fmt_num(v, sizeof v, x->term[t].value_ms);
    st_fmt_num(l, sizeof l, x->term[t].lo_ms);
    st_fmt_num(h, sizeof h, x->term[t].hi_ms);
    st_buf_printf(b, "%s (%s-%s) | ", v, l, h);
}

/* The runs of a sustained search, in the order they ran. */
static void sustained_runs(const st_report *r, const st_rep_cfg *c, st_buf *b)
{
    st_buf_printf(
        b,
        "| %s | Verdict | Window (s, requests) | Delivered req/s (CI) | p95 TTFT ms (CI) | p95 TPOT ms (CI) | "
        "Engine s | Server: KV max / running max / waiting max / preemptions | Why |\n"
        "|---:|---|---|---|---|---|---:|---|---|\n",
        r->spec.closed_loop            ? "Concurrency"
        : r->spec.workload.agent       ? "Offered (tasks/s)"
        : r->spec.workload.sessions.on ? "Offered (sessions/s)"
                                       : "Offered (req/s)");
    for (int j = 0; j < c->n_runs; j++) {
        const st_run_row *w = &c->runs[j];
        const st_sustain_result *x = &c->sus[j];
        char ra[32], d[32], dl[32], dh[32], ws[32], es[32];
        st_fmt_num(ra, sizeof ra, w->rate);
        st_buf_printf(
            b, "| %s%s | %s%s | ", ra, c->rr[j].replicate ? " (replicate)" : "", st_report_verdict_words(r, w),
            c->has_sus[j] && !x->confident && w->verdict && (!strcmp(w->verdict, "pass") || !strcmp(w->verdict, "fail"))
                ? " (not confident)"
                : "");
        if (!c->has_sus[j]) {
            st_buf_puts(b, "- | - | - | - | - | ");
            server_cell(&c->server[j], b);
            st_md_text(b, w->why ? w->why : "");
            st_buf_puts(b, " |\n");
            continue;
        }
        if (isfinite(x->window_start_s) && isfinite(x->window_end_s)) {
            st_fmt_num(ws, sizeof ws, x->window_end_s - x->window_start_s);
            st_buf_printf(b, "%s s, %u | ", ws, x->window_requests);
        } else {
            st_buf_puts(b, "- | ");
        }
        st_fmt_num(d, sizeof d, x->verdict == ST_VERDICT_OVERSAT ? x->run_delivered_rps : x->delivered_rps);
        st_fmt_num(dl, sizeof dl, x->delivered_lo);
        st_fmt_num(dh, sizeof dh, x->delivered_hi);
        if (x->verdict == ST_VERDICT_OVERSAT || !isfinite(x->delivered_lo))
            st_buf_printf(b, "%s | ", d);
        else
            st_buf_printf(b, "%s (%s-%s) | ", d, dl, dh);
        term_cell(x, 0, b);
        term_cell(x, 1, b);
        st_fmt_num(es, sizeof es, x->engine_s);
        st_buf_printf(b, "%s | ", es);
        server_cell(&c->server[j], b);
        st_md_text(b, w->why ? w->why : "");
        if (w->client_limited)
            st_buf_puts(b, "; the load generator lagged its schedule");
        st_buf_puts(b, " |\n");
    }
    st_buf_puts(b, "\n");
}

/* The server's own timings against the client's, per run, when the engine reported them. */
static void timings_table(const st_rep_cfg *c, st_buf *b)
{
    int any = 0;
    for (int j = 0; j < c->n_runs; j++)
        any |= c->server[j].srv_n > 0;
    if (!any)
        return;
    st_buf_puts(b, "Server-reported timings (each response's `timings`: the server's prompt time, from a slot "
                   "taking the request to its first token, and its generation time per step) against the client's "
                   "figures. TTFT minus the prompt time is the wait for a slot, the HTTP path and the client; TPOT "
                   "minus the server's is what the stream adds between tokens.\n\n"
                   "| Offered (req/s) | Requests | Server prompt p50 / p99 (ms) | TTFT - prompt p50 / p99 (ms) | "
                   "TPOT - server TPOT p50 / p99 (ms) |\n|---:|---:|---:|---:|---:|\n");
    for (int j = 0; j < c->n_runs; j++) {
        const st_rep_server *sv = &c->server[j];
        if (!sv->srv_n)
            continue;
        char ra[32], a[32], bb[32], g1[32], g2[32], t1[32], t2[32];
        st_fmt_rate(ra, sizeof ra, c->runs[j].rate);
        st_fmt_num(a, sizeof a, sv->srv_prompt_p50_ms);
        st_fmt_num(bb, sizeof bb, sv->srv_prompt_p99_ms);
        st_fmt_num(g1, sizeof g1, sv->ttft_gap_p50_ms);
        st_fmt_num(g2, sizeof g2, sv->ttft_gap_p99_ms);
        st_fmt_num(t1, sizeof t1, sv->tpot_gap_p50_ms);
        st_fmt_num(t2, sizeof t2, sv->tpot_gap_p99_ms);
        st_buf_printf(b, "| %s | %u | %s / %s | %s / %s | %s / %s |\n", ra, sv->srv_n, a, bb, g1, g2, t1, t2);
    }
    st_buf_puts(b, "\n");
}

static void evidence_section(const st_report *r, st_buf *b)
{
    st_buf_printf(b,
                  "## Evidence per rate\n\nEvery figure below is computed from the per-request records in "
                  "`results.sqlite` (table `requests`); times are from each request's %s.\n\n",
                  r->spec.closed_loop ? "send (a closed loop)" : "scheduled send time");
    for (int i = 0; i < r->n_cfg; i++) {
        const st_rep_cfg *c = &r->cfg[i];
        st_buf_puts(b, "### ");
        st_md_text(b, c->name);
        st_buf_puts(b, "\n\n");
        if (c->row && !isnan(c->row->startup_s))
            st_buf_printf(b, "Engine ready after %.1f s.\n\n", c->row->startup_s);
        if (!c->n_runs) {
            st_buf_puts(b, "No rate was run");
            if (c->note[0]) {
                st_buf_puts(b, ": ");
                st_md_text(b, c->note);
            }
            st_buf_puts(b, ".\n\n");
        } else if (r->sustained) {
            sustained_runs(r, c, b);
        } else {
            st_buf_puts(b, "| Offered (req/s) | Verdict | Delivered req/s | Output tok/s | p95 TTFT (ms) | p95 TPOT "
                           "(ms) | Completed | Server: KV max / running max / waiting max / preemptions | Why |\n"
                           "|---:|---|---:|---:|---:|---:|---:|---|---|\n");
            for (int j = 0; j < c->n_runs; j++) {
                const st_run_row *w = &c->runs[j];
                char ra[32], d[32], o[32], t1[40], t2[40];
                st_fmt_rate(ra, sizeof ra, w->rate);
                st_fmt_num(d, sizeof d, w->delivered_rps);
                st_fmt_num(o, sizeof o, w->output_tps);
                /* After an early stop, the p95s over the few completed requests would look
                 * passing: show the lower bounds the verdict used (terms 0 and 1 are always
                 * p95 TTFT and p95 TPOT) instead. */
                int lb = w->stopped_early && w->n_terms >= 2;
                char v1[32], v2[32];
                st_fmt_num(v1, sizeof v1, lb ? w->term_ms[0] : w->ttft_p95_ms);
                st_fmt_num(v2, sizeof v2, lb ? w->term_ms[1] : w->tpot_p95_ms);
                snprintf(t1, sizeof t1, "%s%s", lb ? ">= " : "", v1);
                snprintf(t2, sizeof t2, "%s%s", lb ? ">= " : "", v2);
                st_buf_printf(b, "| %s%s | %s%s | %s | %s | %s | %s | %u / %u | ", ra, w->grid ? "" : " (refine)",
                              st_report_verdict_words(r, w), w->stopped_early ? " (stopped early)" : "", d, o, t1, t2,
                              w->completed, w->planned);
                server_cell(&c->server[j], b);
                st_md_text(b, w->why ? w->why : "");
                if (w->client_limited)
                    st_buf_puts(b, "; the load generator lagged its schedule");
                st_buf_puts(b, " |\n");
            }
            st_buf_puts(b, "\n");
            int any_samples = 0, measured = 0;
            for (int j = 0; j < c->n_runs; j++) {
                any_samples |= c->server[j].samples > 0;
                measured |= strcmp(c->runs[j].verdict, "skipped") != 0;
            }
            if (measured && !any_samples)
                st_buf_puts(b, "No /metrics samples: the engine's /metrics endpoint did not answer or exposed none of "
                               "the metrics servetune knows for it (noted, not fatal).\n\n");
            timings_table(c, b);
        }
        if (c->row && c->row->failure_class) {
            st_buf_printf(b, "The engine failed: **%s**", c->row->failure_class);
            if (c->row->failure_detail) {
                st_buf_puts(b, " - ");
                st_md_text(b, c->row->failure_detail);
            }
            st_buf_puts(b, ".\n\n");
            if (c->row->log_tail && *c->row->log_tail) {
                st_buf_puts(b, "Last lines of its log:\n\n```\n");
                /* fenced: only a line of backticks could break out */
                for (const char *p = c->row->log_tail; *p; p++)
                    st_buf_append(b, *p == '`' ? "'" : p, 1);
                st_buf_puts(b, "\n```\n\n");
            }
        }
    }
}

/* The method's prediction lines: how a prediction was made, the rates it suggests. */
static void method_prediction(const st_report *r, st_buf *b)
{
    if (!r->audit.prediction)
        return;
    st_buf_puts(b, "- **Prediction**: every run below was computed by the engine model in virtual time "
                   "(`servetune predict`), with the same workloads, arrival schedules, warm-up, early stop and "
                   "capacity search as a measured audit; the engine's state was sampled every emulated second. ");
    if (r->audit.model_note)
        st_md_text(b, r->audit.model_note);
    st_buf_puts(b, "\n");
    if (r->audit.suggested_rates) {
        st_buf_puts(b, "- **Suggested rates for the measured audit** (bracketing every configuration's capacity "
                       "found on the model by the spec's search): ");
        st_md_text(b, r->audit.suggested_rates);
        st_buf_puts(b, "\n");
    }
}

/* What "capacity at SLO" means for the search mode: sustained, a fixed-count closed loop or a burst. */
static void method_capacity(const st_report *r, st_buf *b)
{
    const st_spec *s = &r->spec;
    if (r->sustained) {
        st_buf_printf(
            b,
            "- **Capacity at SLO** is the highest %s the engine **sustained** within the SLO: a run passes "
            "only when it reached a steady state (no significant growth of the requests in flight, of TTFT or of "
            "the engine's waiting queue; the delivered rate equal to the offered one within its interval) and "
            "every SLO term held over its measurement window, every request of which completed. Each run warms up "
            "for %g median E2Es, then measures a window of at least %g s and %u requests (and two median E2Es), "
            "and ends when the window's requests have; a growing queue ends it early as **over-saturated**, a "
            "term missed with confidence as **SLO missed**, and a run that reaches max_duration (%g s) or its "
            "budget first is **undecided** (never a pass). The search brackets the capacity, fits each term's "
            "margin against the rate (isotonic, interpolated) or bisects at a cliff, and repeats runs at the "
            "bracket's ends until the calls are confident (%.0f %%), to a tolerance of %.0f %%; the runs at one rate "
            "are judged together (their margins pooled: one call per rate, which a single run at that rate can "
            "disagree with). Replicas and cost are sized from that rate.%s\n",
            s->closed_loop ? "concurrency" : "offered rate", s->search.warmup_e2e, s->search.min_window_s,
            s->search.min_window_requests, s->search.max_duration_s, s->search.confidence * 100,
            s->search.tolerance * 100,
            s->closed_loop ? " With a concurrency (a closed loop: a request is sent when one ends), the capacity in "
                             "req/s is what the engine delivered at the highest concurrency that held the SLO."
                           : "");
        st_buf_printf(b, "- %s\n", st_rep_output_tps_note);
        st_buf_puts(b, "- **Percentiles** are taken over the window's requests, with intervals from batch means "
                       "(the runs' latencies are correlated); the window's figures exclude the warm-up and the "
                       "requests that arrived after it.\n");
    } else if (s->closed_loop) {
        st_buf_printf(
            b,
            "- **A fixed-count closed loop** (search mode %s with concurrency levels): each level C is a run of "
            "%u requests with at most C in flight, a request sent as soon as one ends (as `vllm bench serve "
            "--max-concurrency C --num-prompts %u`, whose published concurrency points are measured so). TTFT and "
            "E2E run from each request's send. **Capacity at SLO** is the delivered request throughput (completed "
            "requests / time from the first send to the last completion, the last partial wave and the drain "
            "included, as vLLM reports it) at the highest level that passed; a level passes when every request "
            "completed and every SLO term held. It is not a sustained capacity: `search: {mode: sustained}` (the "
            "default) measures each level in a steady-state window.\n",
            st_search_mode_name(s->search.mode), s->workload.requests_per_rate, s->workload.requests_per_rate);
    } else {
        st_buf_printf(
            b,
            "- **A burst test** (search mode %s): each rate is a fixed run of %u requests. **Capacity at SLO** is "
            "the delivered request throughput (completed requests / time from the first send to the last "
            "completion, drain included) at the highest tested rate that passed; a rate passes when every request "
            "completed and every SLO term held. A short run at a rate above what the engine sustains can still "
            "pass while its queue drains (the notes say where that happened), so this is not a sustained "
            "capacity: `search: {mode: sustained}` (the default) measures one.\n",
            st_search_mode_name(s->search.mode), s->workload.requests_per_rate);
    }
}

/* The figures' definitions (TTFT, TPOT, cost), the prompts, sessions and what is out of scope. */
static void method_terms(const st_report *r, st_buf *b)
{
    const st_spec *s = &r->spec;
    if (s->closed_loop)
        st_buf_puts(b, "- **TTFT** runs from a request's send (a closed loop: a request is sent when one of the "
                       "clients is free, as vllm bench serve times it) to its first token; **TPOT** = (end - first "
                       "token) / (output tokens - 1).\n");
    else
        st_buf_puts(
            b, "- **TTFT** runs from a request's scheduled send time (open loop: requests are sent on schedule "
               "whatever the server does) to its first token; **TPOT** = (end - first token) / (output tokens - 1).\n");
    st_buf_puts(b, "- **$ per 1M output tokens** = price per GPU-hour x GPUs per replica / (output tok/s at capacity x "
                   "3600) x 1,000,000; **replicas at peak** = ceil(peak / capacity); **monthly** = replicas x GPUs x "
                   "price x 730 h. \"vs current\" is the relative change against the first configuration.\n");
    if (!r->sustained)
        st_buf_puts(b, "- The **sustained** figure is the output token rate inside the steady-state window of the run "
                       "at capacity (from the first to the last arrival, so without the drain), divided by the mean "
                       "output of a request. When the arrivals last less than a typical request (median E2E), the run "
                       "never reached a steady state and no sustained figure is given (\"-\").\n");
    if (s->workload.kind == ST_WL_SYNTHETIC)
        st_buf_puts(b, "- **Prompts** are synthetic (token ids of the stated sizes, a shared prefix as stated), not "
                       "the client's traffic.\n");
    else
        st_buf_puts(b, "- **Prompts** are the replayed trace, retimed to each rate.\n");
    if (s->workload.sessions.on)
        st_buf_puts(b,
                    "- **Multi-turn sessions**: every offered rate (grid, bracket, the notes' rates) counts sessions "
                    "starting per second; a later turn is sent when the turn before it ended plus its think time, "
                    "with the answers the server returned in its prompt. The capacity, replicas and cost use the "
                    "requests/s the engine delivered at the highest passing session rate (\"Multi-turn "
                    "sessions\" above).\n");
    st_buf_puts(b, "- **Out of scope**: output quality (an fp8 or quantized checkpoint must be checked for quality "
                   "separately), cold starts, autoscaling, and traffic shapes other than the one tested.\n");
    if (s->engine.kind == ST_ENGINE_EMULATOR)
        st_buf_puts(b, "- **Measured on servetune's emulator**, a model of vLLM's scheduler and of the GPU, not on "
                       "the GPU itself: these figures are predictions to be confirmed on hardware.\n");
}

/* The one list of notes (report/notes.h), as every report renders it. */
static void notes_list(const st_report *r, st_buf *b)
{
    st_buf_puts(b, "\n### Notes\n\n");
    if (!r->notes.n)
        st_buf_puts(b, "The data called for no notes.\n");
    for (int i = 0; i < r->notes.n; i++) {
        const st_note *n = &r->notes.v[i];
        st_buf_puts(b, "- ");
        if (n->config) {
            st_buf_puts(b, "**");
            st_md_text(b, n->config);
            st_buf_puts(b, "**");
            if (n->sev != ST_NOTE_INFO)
                st_buf_puts(b, n->sev == ST_NOTE_PROBLEM ? " (problem)" : " (caution)");
            st_buf_puts(b, ": ");
        } else if (n->sev != ST_NOTE_INFO) {
            st_buf_puts(b, n->sev == ST_NOTE_PROBLEM ? "(problem) " : "(caution) ");
        }
        st_md_text(b, n->text);
        st_buf_puts(b, "\n");
    }
}

static void notes_section(const st_report *r, st_buf *b)
{
    st_buf_puts(b, "## Method and limits\n\n");
    method_prediction(r, b);
    method_capacity(r, b);
    method_terms(r, b);
    notes_list(r, b);
}

/* "A traffic day": each configuration that met the SLO, cheapest first (report/day.h). */
static void day_section(const st_report *r, st_buf *b)
{
    if (!r->day_present)
        return;
    const char **who = calloc((size_t)r->n_cfg, sizeof *who);
    const st_day_cost **d = calloc((size_t)r->n_cfg, sizeof *d);
    int n = 0;
    if (!who || !d) {
        st_buf_fail(b, ST_BUF_NO_MEM);
    } else {
        for (int k = 0; k < r->n_cfg; k++) {
            const st_rep_cfg *c = &r->cfg[r->order[k]];
            if (!c->day_ok)
                continue;
            who[n] = c->name;
            d[n++] = &c->day;
        }
        st_rep_day_markdown(b, &r->spec, r->day_serverless_price_per_gpu_s, r->day_serverless_from, who, d, n);
    }
    free(who);
    free(d);
}

/* "Who pays" over the spec's traffic day: each hour's autoscaled fleet for the pick (as "A
 * traffic day" prices it) split over the tenants by their model-based shares of the trace, the
 * rest of the fleet's capacity idle. Assumes the trace's tenant mix holds all day. */
static void who_pays_day(const st_report *r, st_buf *b)
{
    st_rep_wp_day d; /* (report/whopays_day.h: the same figures as report.json and report.html) */
    if (!st_rep_who_pays_day(r, &d))
        return;
    st_buf_puts(b, "Over the spec's traffic day, on ");
    st_md_text(b, d.config);
    st_buf_puts(b, " autoscaled (its capacity per replica; the trace's tenant mix assumed all day), $ per hour:\n\n"
                   "| hour | req/s | replicas | $ |");
    for (size_t i = 0; i < d.n_tenants; i++) {
        st_buf_puts(b, " ");
        st_md_text(b, d.tenant[i]);
        st_buf_puts(b, " |");
    }
    st_buf_puts(b, " idle |\n|---:|---:|---:|---:|");
    for (size_t i = 0; i <= d.n_tenants; i++)
        st_buf_puts(b, "---:|");
    st_buf_puts(b, "\n");
    for (int h = 0; h < 24; h++) {
        st_buf_printf(b, "| %02d | %.3g | %ld | %.2f |", h, d.rps[h], d.replicas[h], d.usd[h]);
        for (size_t i = 0; i < d.n_tenants; i++)
            st_buf_printf(b, " %.2f |", d.tenant_usd[h][i]);
        st_buf_printf(b, " %.2f |\n", d.idle_usd[h]);
    }
    st_buf_puts(b, "\n");
}

int st_report_markdown(const st_report *r, st_buf *b)
{
    st_buf_puts(b, "# Serving audit: ");
    st_md_text(b, r->spec.engine.model);
    st_buf_puts(b, " on ");
    st_md_text(b, r->spec.hardware.gpu);
    st_buf_puts(b, "\n\n");
    if (r->audit.partial) {
        st_buf_puts(b, "> **Partial report.** The audit did not finish");
        if (r->audit.note) {
            st_buf_puts(b, " (");
            st_md_text(b, r->audit.note);
            st_buf_puts(b, ")");
        }
        st_buf_puts(b, ": what finished is kept; configurations not reached are marked \"not run\". "
                       "`servetune audit --resume` continues it.\n\n");
    }
    if (r->audit.prediction)
        st_buf_puts(b,
                    "> **PREDICTION.** Made by `servetune predict` on servetune's engine model (a model of vLLM V1's "
                    "scheduler, KV cache and GPU step time) in virtual time: no server was started and nothing was "
                    "measured. Use it to choose configurations and rates worth testing; confirm with `servetune "
                    "audit` on the hardware.\n\n");
    st_buf_puts(b, "## Headline\n\n");
    st_buf hl;
    st_buf_init(&hl, ST_REPORT_HEADLINE_MAX);
    st_report_headline(r, &hl);
    st_md_text(b, hl.data ? hl.data : "");
    st_buf_free(&hl);
    st_buf_puts(b, "\n\n");
    setup_section(r, b);
    st_rep_traffic_markdown(&r->traffic, b);
    st_rep_who_pays_markdown(r->who_pays, b);
    who_pays_day(r, b);
    results_section(r, b);
    sessions_section(r, b);
    day_section(r, b);
    st_predvs_markdown(r, b);
    st_rep_quality_markdown(r, b);
    changes_section(r, b);
    if (r->audit.prediction && r->audit.disagg_md)
        st_buf_puts(b, r->audit.disagg_md); /* predict --disagg: written whole by the command */
    evidence_section(r, b);
    notes_section(r, b);
    return st_buf_error(b) ? -1 : 0;
}
