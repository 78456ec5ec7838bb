/* The notes and the metrics diagnosis (report/notes.h); triggers and wording in docs/notes.md. */
#include "report/notes.h"

#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/executor.h"
#include "core/util.h"
#include "core/version.h"
#include "emu/config.h"
#include "emu/steptime.h"
#include "engine/specdec.h"
#include "load/stats.h"
#include "report/format.h"
#include "report/report.h"

const char *st_note_sev_name(st_note_sev s)
{
    switch (s) {
    case ST_NOTE_INFO: return "info";
    case ST_NOTE_WARN: return "warn";
    case ST_NOTE_PROBLEM: return "problem";
    }
    return "info";
}

void st_notes_free(st_notes *ns)
{
    if (!ns)
        return;
    for (int i = 0; i < ns->n; i++) {
        free(ns->v[i].config);
        free(ns->v[i].text);
        free(ns->v[i].detail);
    }
    free(ns->v);
    memset(ns, 0, sizeof *ns);
}

/* ---- digest ------------------------------------------------------------------------------ */

static double pct_of(double *v, uint32_t n, double p)
{
    if (!n)
        return NAN;
    qsort(v, n, sizeof *v, st_cmp_double);
    return st_percentile_sorted(v, n, p);
}

/* One scrape: the samples that share a time. */
typedef struct scrape {
    double t;
    double kv, running, waiting, pre, ph, pq;
    double le[ST_PROM_BUCKETS_MAX], cum[ST_PROM_BUCKETS_MAX];
    double h_count, h_sum;
} scrape;

static void scrape_reset(scrape *s, double t)
{
    s->t = t;
    s->kv = s->running = s->waiting = s->pre = s->ph = s->pq = NAN;
    s->h_count = s->h_sum = NAN;
    for (int i = 0; i < ST_PROM_BUCKETS_MAX; i++)
        s->le[i] = s->cum[i] = NAN;
}

/* "ttft_le_07" -> 7; -1 when not of that form. */
static int bucket_index(const char *name, const char *prefix)
{
    size_t l = strlen(prefix);
    if (strncmp(name, prefix, l) != 0)
        return -1;
    const char *p = name + l;
    if (p[0] < '0' || p[0] > '9' || p[1] < '0' || p[1] > '9' || p[2])
        return -1;
    int i = (p[0] - '0') * 10 + (p[1] - '0');
    return i < ST_PROM_BUCKETS_MAX - 1 ? i : -1; /* one slot kept for +Inf */
}

static void scrape_add(scrape *s, const char *name, double v)
{
    int k;
    if (!name)
        return;
    if (!strcmp(name, "kv_usage"))
        s->kv = v;
    else if (!strcmp(name, "running"))
        s->running = v;
    else if (!strcmp(name, "waiting"))
        s->waiting = v;
    else if (!strcmp(name, "preemptions"))
        s->pre = v;
    else if (!strcmp(name, "prefix_hits"))
        s->ph = v;
    else if (!strcmp(name, "prefix_queries"))
        s->pq = v;
    else if (!strcmp(name, "ttft_count"))
        s->h_count = v;
    else if (!strcmp(name, "ttft_sum"))
        s->h_sum = v;
    else if ((k = bucket_index(name, "ttft_le_")) >= 0)
        s->le[k] = v;
    else if ((k = bucket_index(name, "ttft_cum_")) >= 0)
        s->cum[k] = v;
}

/* The scrape's histogram: finite buckets 0..k-1 (each with bound and count), then +Inf. */
static int scrape_hist(const scrape *s, st_prom_hist *h)
{
    if (!isfinite(s->h_count))
        return 0;
    memset(h, 0, sizeof *h);
    uint32_t k = 0;
    while (k < ST_PROM_BUCKETS_MAX - 1 && isfinite(s->le[k]) && isfinite(s->cum[k])) {
        if (k && s->le[k] <= s->le[k - 1])
            return 0;
        h->le[k] = s->le[k];
        h->count[k] = s->cum[k];
        k++;
    }
    if (!k)
        return 0;
    h->le[k] = INFINITY;
    h->count[k] = s->h_count;
    h->n = k + 1;
    h->total = s->h_count;
    h->sum = isfinite(s->h_sum) ? s->h_sum : 0;
    return 1;
}

typedef struct digest_acc {
    st_notes_run *o;
    double pre0, pre_last, ph0, ph1, pq0, pq1;
    int have_h0;
    st_prom_hist h0, h1;
} digest_acc;

static double maxn(double a, double b) { return isnan(a) || b > a ? b : a; }

static void scrape_finish(digest_acc *a, const scrape *s)
{
    st_notes_run *o = a->o;
    o->scrapes++;
    if (isfinite(s->kv)) {
        o->kv_scrapes++;
        o->kv_high += s->kv >= ST_NOTES_KV_HIGH;
        o->kv_max = maxn(o->kv_max, s->kv);
    }
    if (isfinite(s->pre)) {
        if (isnan(a->pre0))
            a->pre0 = s->pre;
        else if (s->pre > a->pre_last)
            o->preempt_steps++;
        a->pre_last = s->pre;
    }
    if (isfinite(s->running) && isfinite(s->waiting)) {
        o->rw_scrapes++;
        o->waiting_max = maxn(o->waiting_max, s->waiting);
        if (s->waiting >= ST_NOTES_QUEUE) {
            o->wait_scrapes++;
            o->running_max_waiting = maxn(o->running_max_waiting, s->running);
            if (isfinite(s->kv))
                o->kv_max_waiting = maxn(o->kv_max_waiting, s->kv);
        }
    }
    if (isfinite(s->ph) && isfinite(s->pq)) {
        if (isnan(a->pq0)) {
            a->ph0 = s->ph;
            a->pq0 = s->pq;
        }
        a->ph1 = s->ph;
        a->pq1 = s->pq;
    }
    st_prom_hist h;
    if (scrape_hist(s, &h)) {
        if (!a->have_h0) {
            a->h0 = h;
            a->have_h0 = 1;
            o->hist_t0 = s->t;
        }
        a->h1 = h;
        o->hist_t1 = s->t;
    }
}

static void one_line(char *dst, size_t cap, const char *src)
{
    size_t k = 0;
    for (; src && *src && k + 1 < cap; src++)
        dst[k++] = (unsigned char)*src < 0x20 ? ' ' : *src;
    dst[k] = '\0';
    if (src && *src && cap > 4)
        memcpy(dst + cap - 4, "...", 4);
}

/* The increase of counter name over the samples (first to last value), NAN when absent. */
static double counter_delta(const st_metrics_sample *samples, uint32_t n, const char *name)
{
    double first = NAN, last = NAN;
    for (uint32_t i = 0; i < n; i++)
        if (!strcmp(samples[i].name, name)) {
            if (isnan(first))
                first = samples[i].value;
            last = samples[i].value;
        }
    return last - first;
}

static void spec_digest(const st_record *recs, uint32_t n_recs, const st_metrics_sample *samples, uint32_t n_samples,
                        st_notes_run *out)
{
    out->spec_drafts = counter_delta(samples, n_samples, "spec_drafts");
    out->spec_draft_tokens = counter_delta(samples, n_samples, "spec_draft_tokens");
    out->spec_accepted = counter_delta(samples, n_samples, "spec_accepted_tokens");
    for (uint32_t p = 0; p < ST_METRICS_SPEC_POS_MAX; p++) {
        char name[32];
        snprintf(name, sizeof name, "spec_accepted_pos_%02u", p);
        out->spec_pos[p] = counter_delta(samples, n_samples, name);
        if (!isnan(out->spec_pos[p]))
            out->spec_n_pos = p + 1;
    }
    for (uint32_t i = 0; recs && i < n_recs; i++)
        if (!recs[i].warmup && recs[i].status == ST_REQ_OK && recs[i].has_draft) {
            out->rec_draft_requests++;
            out->rec_draft_tokens += recs[i].srv_draft_n;
            out->rec_draft_accepted += recs[i].srv_draft_accepted;
        }
}

void st_notes_run_digest(const st_record *recs, uint32_t n_recs, const st_metrics_sample *samples, uint32_t n_samples,
                         st_notes_run *out)
{
    memset(out, 0, sizeof *out);
    out->lag_p99_ms = out->kv_max = out->preempt_delta = out->running_max_waiting = NAN;
    out->kv_max_waiting = out->waiting_max = out->prefix_hits = out->prefix_queries = NAN;
    out->hist_t0 = out->hist_t1 = out->engine_ttft_p50_ms = out->engine_ttft_p95_ms = NAN;
    out->engine_p95_lo_ms = out->engine_p95_hi_ms = NAN;
    out->client_ttft_p50_ms = out->client_ttft_p95_ms = out->client_sched_ttft_p95_ms = out->cdf_gap = NAN;

    spec_digest(recs, n_recs, samples, n_samples, out);

    /* samples */
    if (samples && n_samples) {
        out->has_samples = 1;
        digest_acc a = { .o = out, .pre0 = NAN, .pre_last = NAN, .ph0 = NAN, .ph1 = NAN, .pq0 = NAN, .pq1 = NAN };
        scrape *s = malloc(sizeof *s);
        if (s) {
            for (uint32_t i = 0; i < n_samples; i++) {
                if (i == 0 || samples[i].t != s->t) {
                    if (i)
                        scrape_finish(&a, s);
                    scrape_reset(s, samples[i].t);
                }
                scrape_add(s, samples[i].name, samples[i].value);
            }
            scrape_finish(&a, s);
            free(s);
        }
        if (!isnan(a.pre0))
            out->preempt_delta = a.pre_last - a.pre0;
        if (!isnan(a.pq0)) {
            out->prefix_hits = a.ph1 - a.ph0;
            out->prefix_queries = a.pq1 - a.pq0;
        }
        if (a.have_h0 && out->hist_t1 > out->hist_t0 && st_prom_hist_delta(&a.h0, &a.h1, &out->ttft_delta) == 0 &&
            out->ttft_delta.total > 0) {
            out->has_ttft_hist = 1;
            out->engine_ttft_p50_ms = st_prom_hist_quantile(&out->ttft_delta, 0.50) * 1000;
            out->engine_ttft_p95_ms = st_prom_hist_quantile(&out->ttft_delta, 0.95) * 1000;
            const st_prom_hist *h = &out->ttft_delta;
            double rank = 0.95 * h->total;
            for (uint32_t b = 0; b < h->n; b++)
                if (h->count[b] >= rank) {
                    out->engine_p95_lo_ms = b ? h->le[b - 1] * 1000 : 0;
                    out->engine_p95_hi_ms = h->le[b] * 1000;
                    break;
                }
        }
    }

    /* records */
    if (!recs || !n_recs)
        return;
    out->has_records = 1;
    double *lag = malloc(sizeof *lag * n_recs), *cs = malloc(sizeof *cs * n_recs), *cq = malloc(sizeof *cq * n_recs);
    uint32_t nl = 0, nc = 0;
    for (uint32_t i = 0; i < n_recs; i++) {
        const st_record *r = &recs[i];
        if (r->warmup)
            continue;
        out->n_records++;
        int st = (int)r->status >= 0 && r->status < ST_REQ__COUNT ? (int)r->status : (int)ST_REQ_MALFORMED;
        if (!out->by_status[st]++) {
            out->first_http[st] = r->http_status;
            one_line(out->first_error[st], sizeof out->first_error[st], r->error);
        }
        if (r->status == ST_REQ_OK && r->output_requested > 0) {
            out->tokens_checked++;
            out->tokens_usage += r->usage_reported != 0;
            if (r->output_tokens != r->output_requested) {
                if (r->output_tokens < r->output_requested)
                    out->tokens_short++;
                else
                    out->tokens_long++;
                out->tokens_asked_mismatched += r->output_requested;
                out->tokens_got_mismatched += r->output_tokens;
            }
        }
        if (lag && r->sent >= 0 && r->scheduled >= 0)
            lag[nl++] = (double)(r->sent - r->scheduled) / 1e6;
        if (cs && cq && r->first_token >= 0 && r->sent >= 0 && r->scheduled >= 0) {
            double tf = (double)r->first_token / 1e9;
            if (out->has_ttft_hist && !(tf > out->hist_t0 && tf <= out->hist_t1))
                continue;
            cs[nc] = (double)(r->first_token - r->sent) / 1e6;
            cq[nc++] = (double)(r->first_token - r->scheduled) / 1e6;
        }
    }
    out->lag_p99_ms = lag ? pct_of(lag, nl, 99) : NAN;
    if (cs && cq) {
        out->client_n = nc;
        out->client_sched_ttft_p95_ms = pct_of(cq, nc, 95);
        out->client_ttft_p50_ms = pct_of(cs, nc, 50); /* sorts cs */
        out->client_ttft_p95_ms = st_percentile_sorted(cs, nc, 95);
        if (out->has_ttft_hist && nc) {
            const st_prom_hist *h = &out->ttft_delta;
            double gap = 0;
            uint32_t j = 0;
            for (uint32_t b = 0; b < h->n && isfinite(h->le[b]); b++) {
                while (j < nc && cs[j] <= h->le[b] * 1000)
                    j++;
                double d = fabs((double)j / nc - h->count[b] / h->total);
                gap = d > gap ? d : gap;
            }
            out->cdf_gap = gap;
        }
    }
    free(lag);
    free(cs);
    free(cq);
}

/* ---- building notes ---------------------------------------------------------------------- */

typedef struct ctx {
    const st_report *r;
    st_notes *out;
    int oom;
    st_buf b; /* the text being written */
} ctx;

static st_note *add(ctx *x, st_note_sev sev, const char *kind, const char *config)
{
    st_note *n = NULL;
    if (st_buf_error(&x->b))
        x->oom = 1; /* a note's text past ST_NOTE_TEXT_MAX: the notes fail, never a cut note */
    size_t cap = (size_t)x->out->cap;
    if (!x->oom && (st_grow((void **)&x->out->v, &cap, (size_t)x->out->n + 1, sizeof *x->out->v, 16) || cap > INT_MAX))
        x->oom = 1;
    if (!x->oom)
        x->out->cap = (int)cap;
    if (!x->oom) {
        n = &x->out->v[x->out->n];
        memset(n, 0, sizeof *n);
        n->sev = sev;
        n->kind = kind;
        n->config = config ? strdup(config) : NULL;
        n->text = strdup(x->b.data ? x->b.data : "");
        if ((config && !n->config) || !n->text) {
            free(n->config);
            free(n->text);
            x->oom = 1;
            n = NULL;
        } else {
            x->out->n++;
        }
    }
    st_buf_reset(&x->b);
    return n;
}

static void add_rate(st_note *n, double rate)
{
    if (!n || n->n_rates >= ST_NOTE_RATES_MAX)
        return;
    int i = n->n_rates;
    while (i > 0 && n->rates[i - 1] > rate) {
        n->rates[i] = n->rates[i - 1];
        i--;
    }
    if (i > 0 && n->rates[i - 1] == rate) {
        memmove(&n->rates[i], &n->rates[i + 1], sizeof *n->rates * (size_t)(n->n_rates - i));
        return;
    }
    n->rates[i] = rate;
    n->n_rates++;
}

static void add_ev(st_note *n, const char *key, double v)
{
    if (!n || n->n_ev >= ST_NOTE_EVIDENCE_MAX)
        return;
    snprintf(n->ev[n->n_ev].key, sizeof n->ev[n->n_ev].key, "%s", key);
    n->ev[n->n_ev].value = v;
    n->n_ev++;
}

/* "12, 16, 24" into b */
static void rates_text(st_buf *b, const double *rates, int n)
{
    char t[32];
    for (int i = 0; i < n; i++) {
        st_fmt_rate(t, sizeof t, rates[i]);
        st_buf_printf(b, "%s%s", i ? ", " : "", t);
    }
}

static void num(st_buf *b, double v)
{
    char t[32];
    st_fmt_num(t, sizeof t, v);
    st_buf_puts(b, t);
}

static void pct(st_buf *b, double frac)
{
    char t[32];
    st_fmt_pct(t, sizeof t, frac);
    st_buf_puts(b, t);
}

static void rate_s(st_buf *b, double rate)
{
    char t[32];
    st_fmt_rate(t, sizeof t, rate);
    st_buf_puts(b, t);
}

static int verdict_is(const st_run_row *w, const char *v) { return w->verdict && !strcmp(w->verdict, v); }

static int measured(const st_run_row *w) { return verdict_is(w, "pass") || verdict_is(w, "fail"); }

static const st_notes_run *digest_of(const st_rep_cfg *c, int j) { return c->digest ? &c->digest[j] : NULL; }

static void slo_term_name(st_buf *b, const st_slo_term *t)
{
    const char *m = st_slo_metric_name(t->metric);
    st_buf_printf(b, "p%g ", t->pct);
    for (; *m; m++)
        st_buf_printf(b, "%c", *m >= 'a' && *m <= 'z' ? *m - 32 : *m);
}

/* ---- the value of a flag in a flag list ("--x v" or "--x=v"); NULL when absent ---------- */

static const char *flag_value(const st_strv *f, const char *name, int *present)
{
    const char *val = NULL;
    size_t l = strlen(name);
    if (present)
        *present = 0;
    for (int i = 0; i < f->n; i++) {
        const char *t = f->v[i];
        if (!strncmp(t, name, l) && t[l] == '=') {
            val = t + l + 1;
            if (present)
                *present = 1;
        } else if (!strcmp(t, name)) {
            if (present)
                *present = 1;
            val = i + 1 < f->n && f->v[i + 1][0] != '-' ? f->v[i + 1] : NULL;
        }
    }
    return val;
}

/* llama-server's slots when -np is not given (-1 = auto = 4, tools/server/server.cpp). */
#define LLAMACPP_DEFAULT_SLOTS 4

static int is_vllm_like(const st_report *r)
{
    return r->spec.engine.kind == ST_ENGINE_VLLM || r->spec.engine.kind == ST_ENGINE_EMULATOR;
}

/* ---- status notes ------------------------------------------------------------------------ */

/* One request alone on configuration c: its decode step in seconds by the engine model (a step of
 * one sequence at the workload's mean prompt length), and the weights' read time at the GPU's
 * peak bandwidth (a bound no step goes below). 0 with both, -1 when the engine cannot be
 * modelled or the configuration does not start. */
static int lone_decode_step(const st_report *r, const st_rep_cfg *c, double *step_s, double *floor_s)
{
    char why[256];
    if (!c->spec || !st_exec_model_supported(&r->spec, why, sizeof why))
        return -1;
    st_emu_config cfg;
    st_emu_memory mem;
    if (st_exec_model_config(&r->spec, c->spec, &cfg, NULL, 0, NULL, why, sizeof why) != 0 ||
        st_emu_memory_plan(&cfg, &mem, why, sizeof why) < 0)
        return -1;
    double prompt = st_spec_mean_input(&r->spec);
    if (!(prompt >= 1))
        prompt = 1;
    st_emu_batch b = {
        .tokens = 1, .decode_tokens = 1, .seqs = 1, .sampled = 1, .attn_pairs = prompt, .kv_read_tokens = prompt
    };
    *step_s = st_emu_step_seconds(&cfg, &b, NULL);
    *floor_s = st_emu_weight_read_floor_s(&cfg);
    return 0;
}

static void status_notes(ctx *x, const st_rep_cfg *c)
{
    const st_report *r = x->r;
    st_buf *b = &x->b;
    if (c->status == ST_REP_FAILED) {
        const char *cls = c->row && c->row->failure_class ? c->row->failure_class : "failed";
        int ran = c->ran > 0; /* it started and broke later, before any rate passed */
        st_buf_printf(b, ran ? "the engine failed before any rate passed (%s" : "did not start (%s", cls);
        if (c->row && c->row->failure_detail && *c->row->failure_detail)
            st_buf_printf(b, ": %s", c->row->failure_detail);
        st_buf_puts(b, ").");
        st_note *n = add(x, ST_NOTE_PROBLEM, ran ? "engine_failed" : "not_started", c->name);
        if (n && c->row && c->row->log_tail && *c->row->log_tail) {
            n->detail = strdup(c->row->log_tail);
            if (!n->detail)
                x->oom = 1;
        }
        if (n && c->row && isfinite(c->row->startup_s))
            add_ev(n, "startup_s", c->row->startup_s);
        return;
    }
    if (c->status == ST_REP_OK && c->row && c->row->status && !strcmp(c->row->status, "failed")) {
        st_buf_printf(b, "the engine failed during the run (%s", c->row->failure_class ? c->row->failure_class : "?");
        if (c->row->failure_detail && *c->row->failure_detail)
            st_buf_printf(b, ": %s", c->row->failure_detail);
        st_buf_puts(b, "); its capacity comes from the rates measured before.");
        add(x, ST_NOTE_WARN, "engine_failed", c->name);
    }
    if (c->status == ST_REP_NOT_RUN) {
        if (c->ran)
            st_buf_printf(b, "no capacity: %s (the evidence table shows the runs).", c->note);
        else
            st_buf_puts(b, r->audit.partial ? "not run (the audit was interrupted before it)." : "not run.");
        add(x, ST_NOTE_INFO, "not_run", c->name);
        return;
    }
    if (c->status != ST_REP_NONE_PASSED)
        return;
    /* which SLO term failed at its lowest measured rate, and by how much */
    const st_run_row *low = NULL;
    for (int j = 0; j < c->n_runs; j++)
        if (measured(&c->runs[j]) && (!low || c->runs[j].rate < low->rate))
            low = &c->runs[j];
    st_buf_puts(b, "met the SLO at no tested rate");
    if (!low) {
        st_buf_puts(b, " (no rate gave a verdict).");
        add(x, ST_NOTE_WARN, "none_passed", c->name);
        return;
    }
    st_buf_puts(b, "; at its lowest rate, ");
    rate_s(b, low->rate);
    st_buf_puts(b, " req/s,");
    int order[ST_STORE_TERMS], nf = 0;
    int nt = low->n_terms < r->spec.slo.n ? low->n_terms : r->spec.slo.n;
    if (nt > ST_STORE_TERMS)
        nt = ST_STORE_TERMS;
    for (int t = 0; t < nt; t++) {
        double ratio = low->term_ms[t] / r->spec.slo.terms[t].max_ms;
        if (!(ratio > 1))
            continue;
        int k = nf++;
        while (k > 0 && low->term_ms[order[k - 1]] / r->spec.slo.terms[order[k - 1]].max_ms < ratio) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = t;
    }
    for (int k = 0; k < nf; k++) {
        const st_slo_term *t = &r->spec.slo.terms[order[k]];
        st_buf_puts(b, k == 0 ? " " : k == nf - 1 ? " and " : ", ");
        slo_term_name(b, t);
        st_buf_puts(b, low->stopped_early ? " was at least " : " was ");
        num(b, low->term_ms[order[k]]);
        st_buf_puts(b, " ms vs ");
        num(b, t->max_ms);
        st_buf_printf(b, " ms (\xC3\x97%.1f)", low->term_ms[order[k]] / t->max_ms);
    }
    uint32_t failed = low->failed;
    const st_notes_run *d = digest_of(c, (int)(low - c->runs));
    if (d && d->has_records)
        failed = d->n_records - d->by_status[ST_REQ_OK] - d->by_status[ST_REQ_ABORTED];
    if (failed && !low->stopped_early)
        st_buf_printf(b, "%s %u of %u requests failed", nf ? " and" : "", failed, low->planned);
    else if (!nf)
        st_buf_printf(b, " %s", low->why && *low->why ? low->why : "it failed");
    /* a per-token limit that one request alone cannot meet: no rate helps */
    double lim = INFINITY, step_s, floor_s;
    for (int k = 0; k < nf; k++) {
        const st_slo_term *t = &r->spec.slo.terms[order[k]];
        if ((t->metric == ST_SLO_TPOT || t->metric == ST_SLO_ITL) && t->max_ms < lim)
            lim = t->max_ms;
    }
    if (isfinite(lim) && lone_decode_step(r, c, &step_s, &floor_s) == 0 && step_s * 1e3 > lim) {
        st_buf_puts(b, ". One request alone decodes at about ");
        num(b, step_s * 1e3);
        st_buf_puts(b, " ms per token on this configuration (the engine model; reading its weights alone takes ");
        num(b, floor_s * 1e3);
        st_buf_puts(b, " ms at the GPU's peak bandwidth), above the ");
        num(b, lim);
        st_buf_puts(b, " ms limit: no rate meets it. Relax the limit, or use faster hardware, more tensor "
                       "parallelism or smaller weights.");
    } else {
        st_buf_puts(b, ". Test lower rates, or see what it changes.");
    }
    st_note *n = add(x, ST_NOTE_WARN, "none_passed", c->name);
    add_rate(n, low->rate);
    for (int k = 0; k < nf && n; k++) {
        const st_slo_term *t = &r->spec.slo.terms[order[k]];
        char key[64];
        snprintf(key, sizeof key, "%s_p%g_ms", st_slo_metric_name(t->metric), t->pct);
        add_ev(n, key, low->term_ms[order[k]]);
        snprintf(key, sizeof key, "%s_p%g_ratio", st_slo_metric_name(t->metric), t->pct);
        add_ev(n, key, low->term_ms[order[k]] / t->max_ms);
    }
    if (n && failed)
        add_ev(n, "failed_requests", failed);
}

/* ---- capacity shape: warm-up, non-monotonic, highest rate passed ------------------------- */

static int in_cap(const st_report *r, const st_run_row *w) { return r->refine || w->grid; }

static void capacity_notes(ctx *x, const st_rep_cfg *c)
{
    const st_report *r = x->r;
    st_buf *b = &x->b;
    if (!c->cap->has_pass)
        return;
    int first = -1;
    for (int j = 0; j < c->n_runs; j++)
        if (in_cap(r, &c->runs[j]) && !verdict_is(&c->runs[j], "skipped")) {
            first = j;
            break;
        }
    if (c->cap->warmup_effect && first >= 0) {
        const st_run_row *f = &c->runs[first];
        double passed[ST_NOTE_RATES_MAX];
        int np = 0;
        for (int j = 0; j < c->n_runs && np < ST_NOTE_RATES_MAX; j++)
            if (in_cap(r, &c->runs[j]) && verdict_is(&c->runs[j], "pass") && c->runs[j].rate > f->rate)
                passed[np++] = c->runs[j].rate;
        qsort(passed, (size_t)np, sizeof *passed, st_cmp_double);
        st_buf_puts(b, "its first measured rate, ");
        rate_s(b, f->rate);
        st_buf_puts(b, " req/s, failed");
        if (f->why && *f->why)
            st_buf_printf(b, " (%s)", f->why);
        st_buf_puts(b, " while higher rates passed (");
        rates_text(b, passed, np);
        st_buf_puts(b, " req/s): a warm-up effect (e.g. compilation or cache warm-up at startup). Capacity is taken "
                       "from the rates after it; rerun that rate to confirm.");
        st_note *n = add(x, ST_NOTE_WARN, "warmup_effect", c->name);
        add_rate(n, f->rate);
        for (int k = 0; k < np; k++)
            add_rate(n, passed[k]);
        add_ev(n, "first_rate", f->rate);
        add_ev(n, "first_worst_ratio", f->worst_ratio);
        add_ev(n, "pass_rate", c->cap->pass_rate);
    }
    /* failures below the passing rate other than the warm-up one */
    double low[ST_NOTE_RATES_MAX];
    int nl = 0;
    for (int j = 0; j < c->n_runs && nl < ST_NOTE_RATES_MAX; j++) {
        const st_run_row *w = &c->runs[j];
        if (!in_cap(r, w) || !verdict_is(w, "fail") || !(w->rate < c->cap->pass_rate))
            continue;
        if (c->cap->warmup_effect && j == first)
            continue;
        low[nl++] = w->rate;
    }
    if (nl) {
        qsort(low, (size_t)nl, sizeof *low, st_cmp_double);
        st_buf_puts(b, "verdicts are not monotonic across rates: ");
        rates_text(b, low, nl);
        st_buf_printf(b, " req/s failed while %s ", nl > 1 ? "they are below" : "it is below");
        rate_s(b, c->cap->pass_rate);
        st_buf_puts(b, " req/s, which passed. Rerun before concluding.");
        st_note *n = add(x, ST_NOTE_WARN, "non_monotonic", c->name);
        for (int k = 0; k < nl; k++)
            add_rate(n, low[k]);
        add_rate(n, c->cap->pass_rate);
        add_ev(n, "pass_rate", c->cap->pass_rate);
    }
    /* The capacity run may have been a burst rather than a rate: when its arrivals ended long
     * before its requests did (no steady-state window, so no sustained figure), passing says
     * the server absorbed N requests, not that it sustains the offered rate. */
    const st_run_row *cw = NULL;
    for (int j = 0; j < c->n_runs; j++)
        if (in_cap(r, &c->runs[j]) && verdict_is(&c->runs[j], "pass") && c->runs[j].rate == c->cap->pass_rate)
            cw = &c->runs[j];
    if (c->status == ST_REP_OK && cw && !r->spec.closed_loop && isfinite(cw->rate) && !isfinite(cw->sustained_rps) &&
        cw->planned > 1 && isfinite(cw->duration_s)) {
        double arrivals_s = (double)(cw->planned - 1) / cw->rate;
        st_buf_puts(b, "its capacity comes from ");
        rate_s(b, cw->rate);
        st_buf_printf(b, " req/s, where the %u arrivals lasted about ", cw->planned);
        num(b, arrivals_s);
        st_buf_puts(b, " s but the requests took ");
        num(b, cw->duration_s);
        st_buf_puts(b, " s to finish: that run measured how a burst is absorbed, not a rate the server sustains. "
                       "The delivered ");
        num(b, cw->delivered_rps);
        st_buf_puts(b,
                    " req/s is the better guide; for a sustained verdict use more requests per rate or lower rates.");
        st_note *n = add(x, ST_NOTE_WARN, "burst_not_sustained", c->name);
        add_rate(n, cw->rate);
        add_ev(n, "arrivals_s", arrivals_s);
        add_ev(n, "duration_s", cw->duration_s);
        add_ev(n, "delivered_rps", cw->delivered_rps);
    }
    if (c->status == ST_REP_OK && c->cap->highest_tested_passed) {
        st_buf_puts(b, "its highest tested rate, ");
        rate_s(b, c->cap->pass_rate);
        st_buf_puts(b, " req/s, passed, so its capacity may be higher than measured.");
        st_note *n = add(x, ST_NOTE_INFO, "capacity_may_be_higher", c->name);
        add_rate(n, c->cap->pass_rate);
        add_ev(n, "capacity_rps", c->cap->capacity_rps);
    }
}

/* ---- decode anomaly ---------------------------------------------------------------------- */

#define DECODE_RATIO 2.0 /* far above: > 2x the others' median at its lowest rate ... */
#define DECODE_ALL 1.5   /* ... and > 1.5x every other configuration's there */
#define DECODE_FLAT 1.5  /* flat: its highest p95 TPOT <= 1.5x the one at its lowest rate */
#define COMPARABLE 1.5   /* rates within a factor 1.5 are comparable */

/* A run's p95 TPOT: over its completed requests, or when none completed (an early stop) the SLO
 * term's lower bound (terms[1] is always p95 TPOT). */
static double run_tpot(const st_run_row *w)
{
    if (isfinite(w->tpot_p95_ms))
        return w->tpot_p95_ms;
    return w->n_terms > 1 ? w->term_ms[1] : NAN;
}

/* The other configurations' p95 TPOT at the rate nearest to `rate` (within COMPARABLE), from runs
 * that ran to the end (an early stop leaves lower bounds): their median and maximum (NAN when
 * none); *n_out how many. */
static double others_tpot(const st_report *r, int self, double rate, int *n_out, double *max_out)
{
    double v[256];
    int n = 0;
    for (int i = 0; i < r->n_cfg && n < 256; i++) {
        const st_rep_cfg *o = &r->cfg[i];
        if (i == self)
            continue;
        const st_run_row *best = NULL;
        double bd = 0;
        for (int j = 0; j < o->n_runs; j++) {
            const st_run_row *w = &o->runs[j];
            if (!measured(w) || w->stopped_early || !isfinite(w->rate) || !(w->rate > 0) || !isfinite(w->tpot_p95_ms))
                continue;
            double d = fabs(log(w->rate / rate));
            if (!best || d < bd) {
                best = w;
                bd = d;
            }
        }
        if (best && bd <= log(COMPARABLE))
            v[n++] = best->tpot_p95_ms;
    }
    *n_out = n;
    *max_out = NAN;
    if (!n)
        return NAN;
    qsort(v, (size_t)n, sizeof *v, st_cmp_double);
    *max_out = v[n - 1];
    return st_percentile_sorted(v, (uint32_t)n, 50);
}

static void decode_anomaly(ctx *x, int self)
{
    const st_report *r = x->r;
    const st_rep_cfg *c = &r->cfg[self];
    if (c->status == ST_REP_FAILED || c->status == ST_REP_NOT_RUN)
        return;
    /* its runs: an early-stopped run's TPOT is a lower bound, which only makes "far above" harder */
    const st_run_row *low = NULL;
    double hi = NAN, min_ratio = INFINITY, mx;
    int n_meas = 0;
    double rates[ST_NOTE_RATES_MAX];
    for (int j = 0; j < c->n_runs; j++) {
        const st_run_row *w = &c->runs[j];
        double tp = run_tpot(w);
        if (!measured(w) || !isfinite(w->rate) || !(w->rate > 0) || !isfinite(tp))
            continue;
        if (n_meas < ST_NOTE_RATES_MAX)
            rates[n_meas] = w->rate;
        n_meas++;
        if (!low || w->rate < low->rate)
            low = w;
        hi = maxn(hi, tp);
        int no;
        double m = others_tpot(r, self, w->rate, &no, &mx);
        if (no) {
            double ratio = tp / m;
            min_ratio = ratio < min_ratio ? ratio : min_ratio;
        }
    }
    if (!low)
        return;
    double lt = run_tpot(low);
    int no_low;
    double mx_low;
    double m_low = others_tpot(r, self, low->rate, &no_low, &mx_low);
    /* far above the others at its lowest rate (their median and each of them), still above their
     * median at every comparable rate, and flat */
    if (!no_low || !(lt > DECODE_RATIO * m_low) || !(lt > DECODE_ALL * mx_low) || !(min_ratio > 1))
        return;
    if (!(hi <= DECODE_FLAT * lt))
        return;
    st_buf *b = &x->b;
    st_buf_puts(b, "its p95 TPOT is flat and far above the other configurations' at every rate: ");
    num(b, lt);
    st_buf_puts(b, " ms at ");
    rate_s(b, low->rate);
    st_buf_puts(b, " req/s against a median of ");
    num(b, m_low);
    st_buf_printf(b, " ms for the others (\xC3\x97%.1f; the highest of them ", lt / m_low);
    num(b, mx_low);
    st_buf_puts(b, " ms), and at most ");
    num(b, hi);
    st_buf_puts(b, " ms at any rate. That points to a kernel or engine path problem rather than load: rerun before "
                   "concluding.");
    st_note *n = add(x, ST_NOTE_WARN, "decode_anomaly", c->name);
    for (int k = 0; k < n_meas && k < ST_NOTE_RATES_MAX; k++)
        add_rate(n, rates[k]);
    add_ev(n, "tpot_p95_ms_lowest_rate", lt);
    add_ev(n, "others_median_tpot_p95_ms", m_low);
    add_ev(n, "others_max_tpot_p95_ms", mx_low);
    add_ev(n, "ratio", lt / m_low);
    add_ev(n, "min_ratio_any_rate", min_ratio);
    add_ev(n, "tpot_p95_ms_max", hi);
}

/* ---- which single change carries a combined configuration's gain ------------------------- */

#define ATOMS_MAX 64

typedef struct atoms {
    char *v[ATOMS_MAX];
    int n, over;
} atoms;

static void atoms_free(atoms *a)
{
    for (int i = 0; i < a->n; i++)
        free(a->v[i]);
    a->n = 0;
}

static int atoms_has(const atoms *a, const char *s)
{
    for (int i = 0; i < a->n; i++)
        if (!strcmp(a->v[i], s))
            return 1;
    return 0;
}

static void atoms_push(atoms *a, const char *kind, const char *s1, const char *s2)
{
    char t[1024];
    snprintf(t, sizeof t, "%s:%s%s%s", kind, s1, s2 ? " " : "", s2 ? s2 : "");
    if (atoms_has(a, t))
        return;
    if (a->n >= ATOMS_MAX) {
        a->over = 1;
        return;
    }
    a->v[a->n] = strdup(t);
    if (a->v[a->n])
        a->n++;
    else
        a->over = 1;
}

/* A configuration's changes as a set: each added flag with its value, each removed flag, the
 * model, each environment variable. */
static void atoms_of(const st_spec_config *c, atoms *a)
{
    memset(a, 0, sizeof *a);
    const st_strv *f = &c->add_flags;
    for (int i = 0; i < f->n; i++) {
        const char *t = f->v[i];
        if (t[0] == '-' && !strchr(t, '=') && i + 1 < f->n && f->v[i + 1][0] != '-') {
            atoms_push(a, "add", t, f->v[i + 1]);
            i++;
        } else {
            atoms_push(a, "add", t, NULL);
        }
    }
    for (int i = 0; i < c->remove_flags.n; i++)
        atoms_push(a, "remove", c->remove_flags.v[i], NULL);
    if (c->model)
        atoms_push(a, "model", c->model, NULL);
    for (int i = 0; i < c->env.n; i++)
        atoms_push(a, "env", c->env.key[i], c->env.val[i]);
}

static int atoms_subset(const atoms *a, const atoms *b) /* a within b */
{
    for (int i = 0; i < a->n; i++)
        if (!atoms_has(b, a->v[i]))
            return 0;
    return 1;
}

/* A run of c whose figures the host limited: the load generator lagged its schedule, or the
 * emulator fell behind its model (the triggers of the client_limited and emulator_lagged notes). */
static int host_limited_cfg(const st_report *r, const st_rep_cfg *c)
{
    (void)r;
    for (int j = 0; j < c->n_runs; j++) {
        if (c->runs[j].client_limited)
            return 1;
        const st_rep_server *sv = c->server ? &c->server[j] : NULL;
        if (sv &&
            (sv->emu_very_late_share > ST_NOTE_EMU_LATE_SHARE || sv->emu_dropped_share > ST_NOTE_EMU_DROPPED_SHARE))
            return 1;
    }
    return 0;
}

static void combined_gain(ctx *x, int ci, atoms *all)
{
    const st_report *r = x->r;
    const st_rep_cfg *c = &r->cfg[ci], *base = &r->cfg[0];
    const atoms *A = &all[ci];
    if (ci == 0 || A->n < 2 || A->over)
        return;
    int cand[256], nc = 0;
    for (int k = 1; k < r->n_cfg && nc < 256; k++)
        if (k != ci && all[k].n > 0 && !all[k].over && all[k].n < A->n && atoms_subset(&all[k], A))
            cand[nc++] = k;
    /* the single changes: candidates that contain no other candidate */
    int comp[256], np = 0;
    for (int a = 0; a < nc; a++) {
        int minimal = 1;
        for (int b2 = 0; b2 < nc && minimal; b2++)
            if (b2 != a && all[cand[b2]].n < all[cand[a]].n && atoms_subset(&all[cand[b2]], &all[cand[a]]))
                minimal = 0;
        if (minimal)
            comp[np++] = cand[a];
    }
    if (np < 2)
        return;
    for (int i = 0; i < A->n; i++) { /* their union must be the combined configuration */
        int found = 0;
        for (int k = 0; k < np && !found; k++)
            found = atoms_has(&all[comp[k]], A->v[i]);
        if (!found)
            return;
    }
    if (c->status != ST_REP_OK || base->status != ST_REP_OK || !(base->cap->capacity_rps > 0))
        return;
    for (int k = 0; k < np; k++)
        if (r->cfg[comp[k]].status != ST_REP_OK)
            return;
    /* gains as fractions of the baseline's capacity, largest single first */
    double g[256];
    for (int k = 0; k < np; k++)
        g[k] = r->cfg[comp[k]].cap->capacity_rps / base->cap->capacity_rps - 1;
    for (int a = 1; a < np; a++)
        for (int k = a; k > 0 && g[k] > g[k - 1]; k--) {
            double t = g[k];
            g[k] = g[k - 1];
            g[k - 1] = t;
            int ti = comp[k];
            comp[k] = comp[k - 1];
            comp[k - 1] = ti;
        }
    double gc = c->cap->capacity_rps / base->cap->capacity_rps - 1, gt = g[0];
    st_buf *b = &x->b;
    const char *top = r->cfg[comp[0]].name;
    const char *n_other = np == 2 ? "the other change" : np == 3 ? "the other two" : "the others";
    if (gc > 0 && gt > gc) {
        st_buf_printf(b, "%s alone gains more capacity (", top);
        pct(b, gt);
        st_buf_puts(b, ") than the combination (");
        pct(b, gc);
        st_buf_printf(b, "): %s (", n_other);
        for (int k = 1; k < np; k++)
            st_buf_printf(b, "%s%s", k > 1 ? ", " : "", r->cfg[comp[k]].name);
        st_buf_printf(b, ") cost about %.0f %% of the baseline's capacity.", (gt - gc) * 100);
    } else if (gc > 0 && gt >= 0.5 * gc) {
        st_buf_puts(b, "most of its capacity gain over the baseline (");
        pct(b, gc);
        st_buf_printf(b, ") comes from %s alone (", top);
        pct(b, gt);
        st_buf_printf(b, "); %s (", n_other);
        for (int k = 1; k < np; k++)
            st_buf_printf(b, "%s%s", k > 1 ? ", " : "", r->cfg[comp[k]].name);
        st_buf_printf(b, ") add about %.0f %% of the baseline's capacity.", (gc - gt) * 100);
    } else {
        st_buf_puts(b, gc > 0 ? "no single change carries most of its capacity gain over the baseline ("
                              : "it gains no capacity over the baseline (");
        pct(b, gc);
        st_buf_puts(b, "); alone: ");
        for (int k = 0; k < np; k++) {
            st_buf_printf(b, "%s%s ", k ? ", " : "", r->cfg[comp[k]].name);
            pct(b, g[k]);
        }
        st_buf_puts(b, ".");
    }
    /* gains measured by runs the host limited may be the lag's: said, not credited silently */
    const char *lagged = host_limited_cfg(r, c) ? c->name : host_limited_cfg(r, base) ? base->name : NULL;
    for (int k = 0; k < np && !lagged; k++)
        if (host_limited_cfg(r, &r->cfg[comp[k]]))
            lagged = r->cfg[comp[k]].name;
    if (lagged)
        st_buf_printf(b,
                      " The host limited runs of %s (the client_limited / emulator_lagged notes): these gains may be "
                      "the lag's, not the configurations'.",
                      lagged);
    st_note *n = add(x, ST_NOTE_INFO, "combined_gain", c->name);
    add_rate(n, c->cap->pass_rate);
    add_ev(n, "gain", gc);
    for (int k = 0; k < np && n; k++) {
        char key[64];
        snprintf(key, sizeof key, "gain:%s", r->cfg[comp[k]].name);
        add_ev(n, key, g[k]);
    }
}

/* ---- the rates a note concerns ----------------------------------------------------------- */

typedef struct diag_rates {
    double rates[ST_NOTE_RATES_MAX];
    int n;
    int first; /* run index of the lowest rate concerned (its figures go into the text) */
} diag_rates;

static void dr_add(diag_rates *d, const st_rep_cfg *c, int j)
{
    if (d->n >= ST_NOTE_RATES_MAX)
        return;
    if (!d->n || c->runs[j].rate < c->runs[d->first].rate)
        d->first = j;
    d->rates[d->n++] = c->runs[j].rate;
}

/* Attaches the rates d concerns to note n. */
static void dr_attach(st_note *n, const diag_rates *d)
{
    for (int k = 0; k < d->n; k++)
        add_rate(n, d->rates[k]);
}

/* The note of a diagnosis over rates d: its rates, and the lowest one's as evidence "rate". */
static st_note *dr_note(ctx *x, st_note_sev sev, const char *kind, const st_rep_cfg *c, const diag_rates *d)
{
    st_note *n = add(x, sev, kind, c->name);
    dr_attach(n, d);
    add_ev(n, "rate", c->runs[d->first].rate);
    return n;
}

static void dr_text(st_buf *b, diag_rates *d)
{
    qsort(d->rates, (size_t)d->n, sizeof *d->rates, st_cmp_double);
    rates_text(b, d->rates, d->n);
}

/* ---- per-run events ---------------------------------------------------------------------- */

/* A run that broke, or whose requests failed (how many, of which status, the first error of each):
 * its own note. */
static void run_failures(ctx *x, const st_rep_cfg *c, int j)
{
    st_buf *b = &x->b;
    const st_run_row *w = &c->runs[j];
    if (verdict_is(w, "error")) {
        st_buf_puts(b, "at ");
        rate_s(b, w->rate);
        st_buf_printf(b, " req/s the run broke: %s.", w->why && *w->why ? w->why : "no reason given");
        add_rate(add(x, ST_NOTE_PROBLEM, "run_error", c->name), w->rate);
        return;
    }
    if (verdict_is(w, "skipped"))
        return;
    const st_notes_run *d = digest_of(c, j);
    uint32_t bad = 0;
    if (d && d->has_records) {
        for (int s = 0; s < ST_REQ__COUNT; s++)
            if (s != ST_REQ_OK && s != ST_REQ_ABORTED)
                bad += d->by_status[s];
    } else if (!w->stopped_early) {
        bad = w->failed;
    }
    if (!bad)
        return;
    st_buf_puts(b, "at ");
    rate_s(b, w->rate);
    st_buf_printf(b, " req/s %u of %u requests failed", bad, w->planned);
    if (d && d->has_records) {
        st_buf_puts(b, ": ");
        int k = 0;
        for (int s = 0; s < ST_REQ__COUNT; s++) {
            if (s == ST_REQ_OK || s == ST_REQ_ABORTED || !d->by_status[s])
                continue;
            st_buf_printf(b, "%s%u %s", k++ ? "; " : "", d->by_status[s], st_req_status_name((st_req_status)s));
            if (d->first_http[s] || d->first_error[s][0]) {
                st_buf_puts(b, " (");
                if (d->first_http[s])
                    st_buf_printf(b, "HTTP %d%s", d->first_http[s], d->first_error[s][0] ? ": " : "");
                st_buf_printf(b, "%s)", d->first_error[s]);
            }
        }
    }
    st_buf_puts(b, ".");
    st_note *n = add(x, ST_NOTE_WARN, "requests_failed", c->name);
    add_rate(n, w->rate);
    add_ev(n, "failed", bad);
    add_ev(n, "planned", w->planned);
    if (d && d->has_records)
        for (int s = 0; s < ST_REQ__COUNT; s++)
            if (s != ST_REQ_OK && s != ST_REQ_ABORTED && d->by_status[s])
                add_ev(n, st_req_status_name((st_req_status)s), d->by_status[s]);
}

/* One note per kind of event (the client lagged, stopped early, skipped), listing the rates
 * concerned. */
static void run_event_notes(ctx *x, const st_rep_cfg *c)
{
    st_buf *b = &x->b;
    for (int kind = 0; kind < 3; kind++) {
        diag_rates d = { .n = 0 };
        double lag = NAN;
        const char *why = NULL;
        for (int j = 0; j < c->n_runs && d.n < ST_NOTE_RATES_MAX; j++) {
            const st_run_row *w = &c->runs[j];
            /* kind 1: stopped once the SLO could no longer be met (an over-saturated run's stop is its
             * verdict, said in its own words) */
            int hit = kind == 0   ? w->client_limited
                      : kind == 1 ? w->stopped_early && !verdict_is(w, "oversaturated")
                                  : verdict_is(w, "skipped");
            if (!hit)
                continue;
            dr_add(&d, c, j);
            if (!why)
                why = w->why;
            if (kind == 0)
                lag = maxn(lag, w->lag_p99_ms);
        }
        if (!d.n)
            continue;
        st_note *n;
        if (kind == 0) {
            st_buf_puts(b, "the load generator lagged its schedule at ");
            dr_text(b, &d);
            st_buf_printf(b, " req/s (p99 send lag up to %.0f ms); %s weak evidence about the server.", lag,
                          d.n > 1 ? "those runs are" : "that run is");
            n = add(x, ST_NOTE_WARN, "client_limited", c->name);
            add_ev(n, "lag_p99_ms_max", lag);
        } else if (kind == 1) {
            st_buf_puts(b, "stopped early at ");
            dr_text(b, &d);
            st_buf_puts(b, " req/s once the SLO could no longer be met (its remaining requests count as failed).");
            n = add(x, ST_NOTE_INFO, "stopped_early", c->name);
        } else {
            if (why && !strncmp(why, "skipped: ", 9))
                why += 9;
            st_buf_puts(b, "skipped ");
            dr_text(b, &d);
            st_buf_printf(b, " req/s: %s.", why && *why ? why : "a lower rate failed by a wide margin");
            n = add(x, ST_NOTE_INFO, "skipped", c->name);
        }
        dr_attach(n, &d);
    }
}

/* The emulator's lateness over a configuration's runs: a warning, or a note. */
static void run_emulator_notes(ctx *x, const st_rep_cfg *c)
{
    st_buf *b = &x->b;
    /* servetune's emulator could not keep its model's schedule (the host's CPU was short): a warning
     * when tokens went out 100 ms late or engine time was lost (figures the model does not have),
     * a note when many went out 10 ms late (TTFT and ITL carry that much of the host) */
    for (int sev = 1; sev >= 0; sev--) {
        diag_rates d = { .n = 0 };
        double late = NAN, very = NAN, dropped = NAN;
        for (int j = 0; j < c->n_runs && d.n < ST_NOTE_RATES_MAX; j++) {
            const st_rep_server *sv = &c->server[j];
            int warn =
                sv->emu_very_late_share > ST_NOTE_EMU_LATE_SHARE || sv->emu_dropped_share > ST_NOTE_EMU_DROPPED_SHARE;
            int info = !warn && sv->emu_late_share > ST_NOTE_EMU_JITTER_SHARE;
            if (!(sev ? warn : info))
                continue;
            dr_add(&d, c, j);
            late = maxn(late, sv->emu_late_share);
            very = maxn(very, sv->emu_very_late_share);
            dropped = maxn(dropped, sv->emu_dropped_share);
        }
        if (!d.n)
            continue;
        st_note *n;
        if (sev) {
            st_buf_puts(b, "the emulator could not keep its engine model's schedule at ");
            dr_text(b, &d);
            st_buf_printf(b,
                          " req/s: up to %.0f %% of its tokens went out more than 100 ms (engine time) late and it "
                          "lost up to %.1f %% of the engine's time; the host's CPU, not the modelled engine, set part "
                          "of those latencies (lower --time-scale, or run servetune predict, which has no host in "
                          "the loop).",
                          100 * (isnan(very) ? 0 : very), 100 * (isnan(dropped) ? 0 : dropped));
            n = add(x, ST_NOTE_WARN, "emulator_lagged", c->name);
        } else {
            st_buf_puts(b, "at ");
            dr_text(b, &d);
            st_buf_printf(b,
                          " req/s up to %.0f %% of the emulator's tokens reached the client more than 10 ms (engine "
                          "time) after its model's schedule: its TTFT and inter-token times carry that much of the "
                          "host's delay (servetune predict has none).",
                          100 * (isnan(late) ? 0 : late));
            n = add(x, ST_NOTE_INFO, "emulator_jitter", c->name);
        }
        add_ev(n, "late_token_share_max", late);
        add_ev(n, "very_late_token_share_max", very);
        add_ev(n, "dropped_time_share_max", dropped);
        dr_attach(n, &d);
    }
}

/* A configuration's notes from its runs: failures, events, the emulator's lateness. */
static void run_notes(ctx *x, const st_rep_cfg *c)
{
    for (int j = 0; j < c->n_runs; j++)
        run_failures(x, c, j);
    run_event_notes(x, c);
    run_emulator_notes(x, c);
}

/* ---- diagnosis from the engine's metrics ------------------------------------------------- */

static uint32_t default_max_num_seqs(const st_report *r, const st_strv *flags)
{
    const char *gpu = flag_value(flags, "--gpu", NULL);
    if (!gpu)
        gpu = r->spec.hardware.gpu;
    /* vLLM's default class: >= 70 GiB and not an A100 */
    static const char *const large[] = { "H100",  "H200",  "H20",   "B200",  "B100",
                                         "GB200", "GH200", "MI300", "MI325", "MI355" };
    for (size_t i = 0; gpu && i < sizeof large / sizeof *large; i++)
        if (strstr(gpu, large[i]))
            return 1024;
    return 256;
}

/* The server's own timings against the client's, at the lowest and the highest measured rate
 * where the engine reported them (llama.cpp's `timings`). */
static void server_timings_note(ctx *x, const st_rep_cfg *c)
{
    int lo = -1, hi = -1;
    for (int j = 0; j < c->n_runs; j++) {
        if (!measured(&c->runs[j]) || !c->server || c->server[j].srv_n < 1 || isnan(c->server[j].ttft_gap_p50_ms))
            continue;
        if (lo < 0 || c->runs[j].rate < c->runs[lo].rate)
            lo = j;
        if (hi < 0 || c->runs[j].rate > c->runs[hi].rate)
            hi = j;
    }
    if (lo < 0)
        return;
    st_buf *b = &x->b;
    const st_rep_server *a = &c->server[lo], *z = &c->server[hi];
    st_buf_puts(b, "the engine reported its own prompt and generation time for each request: the client's TTFT "
                   "exceeded the server's prompt time by ");
    num(b, a->ttft_gap_p50_ms);
    st_buf_puts(b, " ms at p50 (p99 ");
    num(b, a->ttft_gap_p99_ms);
    st_buf_puts(b, " ms) at ");
    rate_s(b, c->runs[lo].rate);
    st_buf_puts(b, " req/s");
    if (hi != lo) {
        st_buf_puts(b, " and by ");
        num(b, z->ttft_gap_p50_ms);
        st_buf_puts(b, " ms (p99 ");
        num(b, z->ttft_gap_p99_ms);
        st_buf_puts(b, " ms) at ");
        rate_s(b, c->runs[hi].rate);
        st_buf_puts(b, " req/s");
    }
    st_buf_puts(b, "; TPOT exceeded the server's time per step by ");
    num(b, a->tpot_gap_p50_ms);
    st_buf_puts(b, " ms at p50. With no queue the TTFT difference is the HTTP path and the client; under load it "
                   "also holds the wait for a free slot (per run: the evidence table).");
    st_note *n = add(x, ST_NOTE_INFO, "server_timings", c->name);
    add_rate(n, c->runs[lo].rate);
    if (hi != lo)
        add_rate(n, c->runs[hi].rate);
    add_ev(n, "requests", a->srv_n);
    add_ev(n, "ttft_minus_prompt_p50_ms", a->ttft_gap_p50_ms);
    add_ev(n, "ttft_minus_prompt_p99_ms", a->ttft_gap_p99_ms);
    add_ev(n, "tpot_minus_server_tpot_p50_ms", a->tpot_gap_p50_ms);
    if (hi != lo) {
        add_ev(n, "high_rate_ttft_minus_prompt_p50_ms", z->ttft_gap_p50_ms);
        add_ev(n, "high_rate_ttft_minus_prompt_p99_ms", z->ttft_gap_p99_ms);
    }
}

/* What the diagnosis of one configuration knows before looking at its runs, and the rates each
 * finding concerns. */
typedef struct diag {
    st_strv flags;      /* the configuration's flags */
    int vl;             /* vLLM or its emulator: vLLM's flags and defaults apply */
    int pc_off;         /* prefix caching turned off */
    double expect;      /* expected prefix-cache hit rate of the synthetic workload (NAN: unknown) */
    double ttft_margin; /* ms: a client/engine TTFT gap that matters against the SLO */
    const char *mns;    /* --max-num-seqs as given, or NULL */
    double max_seqs;    /* --max-num-seqs or vLLM's default for the GPU */
    int kv_fp8;         /* the KV cache is fp8 already */
    int llama;          /* llama-server: its slots (-np) bound what runs at once */
    const char *np;     /* -np / --parallel as given, or NULL */
    double slots;       /* -np, or llama-server's default */
    diag_rates kv, el, pc, tt, tk, sl;
} diag;

/* The flags and expectations of configuration c. 0, or -1 when out of memory. */
static int diag_setup(const st_report *r, const st_rep_cfg *c, diag *D)
{
    memset(D, 0, sizeof *D);
    if (st_spec_config_flags(&r->spec, c->spec, &D->flags))
        return -1;
    D->vl = is_vllm_like(r);
    D->llama = r->spec.engine.kind == ST_ENGINE_LLAMACPP;
    /* llama-server's slots: -np / --parallel, else its default (auto: 4; tools/server/server.cpp) */
    D->np = flag_value(&D->flags, "-np", NULL);
    if (!D->np)
        D->np = flag_value(&D->flags, "--parallel", NULL);
    D->slots = D->np && atof(D->np) > 0 ? atof(D->np) : LLAMACPP_DEFAULT_SLOTS;
    /* prefix caching: expected hit rate of the synthetic workload */
    D->pc_off = 0;
    for (int i = 0; i < D->flags.n; i++) { /* the last of the two wins */
        if (!strcmp(D->flags.v[i], "--no-enable-prefix-caching"))
            D->pc_off = 1;
        else if (!strcmp(D->flags.v[i], "--enable-prefix-caching"))
            D->pc_off = 0;
    }
    const char *bs = flag_value(&D->flags, "--block-size", NULL);
    double block = bs ? atof(bs) : 16;
    if (!(block >= 1))
        block = 16;
    const st_spec *s = &r->spec;
    D->expect = NAN;
    int synth = s->workload.kind == ST_WL_SYNTHETIC && s->workload.input_tokens > 0;
    /* (multi-turn sessions reuse their history too: no expectation from the prefix alone) */
    if (synth && D->vl && (D->pc_off || !s->workload.sessions.on))
        D->expect = D->pc_off ? 0 : floor(s->workload.shared_prefix / block) * block / st_spec_mean_input(s);
    D->ttft_margin = 0.1 * s->slo.terms[0].max_ms; /* terms[0] is p95 TTFT */
    if (!(D->ttft_margin > 5))
        D->ttft_margin = 5;
    D->mns = flag_value(&D->flags, "--max-num-seqs", NULL);
    D->max_seqs = D->mns ? atof(D->mns) : default_max_num_seqs(r, &D->flags);
    const char *kvd = flag_value(&D->flags, "--kv-cache-dtype", NULL);
    D->kv_fp8 = kvd && !strncmp(kvd, "fp8", 3);
    return 0;
}

/* Which runs show which finding (into D's rate lists). */
static void diag_classify(const st_rep_cfg *c, diag *D)
{
    for (int j = 0; j < c->n_runs; j++) {
        const st_run_row *w = &c->runs[j];
        const st_notes_run *d = &c->digest[j];
        if (!measured(w))
            continue;
        /* KV cache the limit: high usage in at least half the scrapes (two at least), and
         * preemptions rising */
        if (d->kv_scrapes >= 2 && 2 * d->kv_high >= d->kv_scrapes && d->kv_high >= 2 && d->preempt_delta > 0)
            dr_add(&D->kv, c, j);
        /* requests wait while running stays well below max-num-seqs and the cache is not full */
        else if (D->vl && d->rw_scrapes >= 2 && 2 * d->wait_scrapes >= d->rw_scrapes && d->wait_scrapes >= 2 &&
                 d->running_max_waiting < 0.5 * D->max_seqs && !(d->kv_max_waiting >= ST_NOTES_KV_HIGH))
            dr_add(&D->el, c, j);
        if (isfinite(D->expect) && d->prefix_queries > 0 && isfinite(d->prefix_hits)) {
            double got = d->prefix_hits / d->prefix_queries;
            double tol = 0.25 * D->expect > 0.1 ? 0.25 * D->expect : 0.1;
            if (fabs(got - D->expect) > tol && !(got > D->expect && d->preempt_delta > 0 && !D->pc_off))
                dr_add(&D->pc, c, j);
        }
        /* the client's p95 outside the engine's p95 bucket, by a margin that matters against the
         * TTFT SLO (a tenth of it, 5 ms at least); not after an early stop, whose aborted
         * requests the two sides count differently */
        if (!w->stopped_early && d->has_ttft_hist && d->client_n >= 20 && d->ttft_delta.total >= 20 &&
            (d->client_ttft_p95_ms > d->engine_p95_hi_ms || d->client_ttft_p95_ms < d->engine_p95_lo_ms) &&
            fabs(d->client_ttft_p95_ms - d->engine_ttft_p95_ms) > D->ttft_margin)
            dr_add(&D->tt, c, j);
        if (d->tokens_checked && d->tokens_short + d->tokens_long)
            dr_add(&D->tk, c, j);
        /* llama-server: requests deferred (waiting for a slot) in most scrapes, with every slot busy */
        if (D->llama && d->rw_scrapes >= 2 && 2 * d->wait_scrapes >= d->rw_scrapes && d->wait_scrapes >= 2 &&
            d->running_max_waiting >= D->slots)
            dr_add(&D->sl, c, j);
    }
}

/* The KV cache is the limit: high usage and preemptions (kind kv_cache_limit). */
static void note_kv_limit(ctx *x, const st_rep_cfg *c, diag *D)
{
    st_buf *b = &x->b;
    const st_notes_run *d = &c->digest[D->kv.first];
    st_buf_puts(b, "at ");
    dr_text(b, &D->kv);
    st_buf_printf(b, " req/s the KV cache usage stayed at or above %.1f (in %u of %u scrapes at ", ST_NOTES_KV_HIGH,
                  d->kv_high, d->kv_scrapes);
    rate_s(b, c->runs[D->kv.first].rate);
    st_buf_puts(b, " req/s, max ");
    st_buf_printf(b, "%.2f", d->kv_max);
    st_buf_printf(b, ") while preemptions climbed (+%.0f): the KV cache is the limit: ", d->preempt_delta);
    if (!D->vl)
        st_buf_puts(b, "reduce the context length or the number of concurrent sequences, or quantize the KV cache.");
    else if (D->kv_fp8)
        st_buf_puts(b, "reduce --max-model-len or --max-num-seqs (the KV cache is already fp8).");
    else
        st_buf_puts(b, "reduce --max-model-len or --max-num-seqs, or use an fp8 KV cache (--kv-cache-dtype fp8).");
    st_note *n = dr_note(x, ST_NOTE_WARN, "kv_cache_limit", c, &D->kv);
    add_ev(n, "kv_usage_max", d->kv_max);
    add_ev(n, "kv_high_fraction", (double)d->kv_high / d->kv_scrapes);
    add_ev(n, "preemptions", d->preempt_delta);
}

/* Requests waited with room in the batch and the cache: the limit is elsewhere (limit_elsewhere). */
static void note_limit_elsewhere(ctx *x, const st_rep_cfg *c, diag *D)
{
    st_buf *b = &x->b;
    const st_notes_run *d = &c->digest[D->el.first];
    const char *mbt = flag_value(&D->flags, "--max-num-batched-tokens", NULL);
    st_buf_puts(b, "at ");
    dr_text(b, &D->el);
    st_buf_printf(b, " req/s requests waited (in %u of %u scrapes at ", d->wait_scrapes, d->rw_scrapes);
    rate_s(b, c->runs[D->el.first].rate);
    st_buf_printf(b, " req/s, up to %.0f waiting) while at most %.0f ran, well below --max-num-seqs %.0f%s",
                  d->waiting_max, d->running_max_waiting, D->max_seqs, D->mns ? "" : " (the default)");
    if (isfinite(d->kv_max_waiting))
        st_buf_printf(b, ", with the KV cache at most %.2f full", d->kv_max_waiting);
    st_buf_puts(b, ": the limit is elsewhere (the token budget per step");
    if (mbt)
        st_buf_printf(b, ", --max-num-batched-tokens %s", mbt);
    st_buf_puts(b, ", or compute).");
    st_note *n = dr_note(x, ST_NOTE_INFO, "limit_elsewhere", c, &D->el);
    add_ev(n, "running_max_while_waiting", d->running_max_waiting);
    add_ev(n, "waiting_max", d->waiting_max);
    add_ev(n, "max_num_seqs", D->max_seqs);
    add_ev(n, "kv_usage_max_while_waiting", d->kv_max_waiting);
}

/* The prefix-cache hit rate is off what the workload's shared prefix implies
 * (prefix_cache_hit_rate). */
static void note_prefix_hits(ctx *x, const st_rep_cfg *c, diag *D)
{
    st_buf *b = &x->b;
    const st_notes_run *d = &c->digest[D->pc.first];
    double got = d->prefix_hits / d->prefix_queries;
    st_buf_puts(b, "at ");
    dr_text(b, &D->pc);
    st_buf_printf(b, " req/s the prefix-cache hit rate was %.2f (at ", got);
    rate_s(b, c->runs[D->pc.first].rate);
    st_buf_puts(b, " req/s)");
    if (D->pc_off)
        st_buf_puts(b, " with prefix caching off (--no-enable-prefix-caching), where it should be 0: the flag did "
                       "not take effect.");
    else {
        st_buf_printf(b, " against about %.2f expected from the shared prefix (", D->expect);
        num(b, x->r->spec.workload.shared_prefix);
        st_buf_puts(b, " of ");
        num(b, st_spec_mean_input(&x->r->spec));
        st_buf_puts(b, " input tokens): ");
        st_buf_puts(b, got < D->expect ? "cached prefix blocks were evicted before reuse (KV cache pressure) or the "
                                         "prompts do not share their first tokens."
                                       : "the prompts share more than the stated prefix (check the workload).");
    }
    st_note *n = dr_note(x, ST_NOTE_WARN, "prefix_cache_hit_rate", c, &D->pc);
    add_ev(n, "hit_rate", got);
    add_ev(n, "expected", D->expect);
    add_ev(n, "prefix_queries", d->prefix_queries);
}

/* The engine's TTFT histogram and the client's measurement disagree (engine_ttft_disagrees). */
static void note_ttft_disagrees(ctx *x, const st_rep_cfg *c, diag *D)
{
    st_buf *b = &x->b;
    const st_notes_run *d = &c->digest[D->tt.first];
    int client_higher = d->client_ttft_p95_ms > d->engine_ttft_p95_ms;
    st_buf_puts(b, "at ");
    dr_text(b, &D->tt);
    st_buf_puts(b, " req/s the engine's own TTFT histogram disagrees with the client's measurement: at ");
    rate_s(b, c->runs[D->tt.first].rate);
    st_buf_puts(b, " req/s the engine puts p95 TTFT near ");
    num(b, d->engine_ttft_p95_ms);
    st_buf_puts(b, " ms, the client measured ");
    num(b, d->client_ttft_p95_ms);
    st_buf_puts(b, " ms from each request's send (");
    num(b, d->client_sched_ttft_p95_ms);
    st_buf_puts(b, " ms from its scheduled time). ");
    if (client_higher)
        st_buf_puts(b, "The client's is higher, beyond its own send lag: time goes between the client and the "
                       "engine's scheduler (network, HTTP server, tokenization, a proxy).");
    else
        st_buf_puts(b, "The engine's is higher, which no client delay explains: its histogram counts other "
                       "requests or its clock is off.");
    st_note *n = dr_note(x, ST_NOTE_WARN, "engine_ttft_disagrees", c, &D->tt);
    add_ev(n, "engine_ttft_p95_ms", d->engine_ttft_p95_ms);
    add_ev(n, "client_ttft_p95_ms", d->client_ttft_p95_ms);
    add_ev(n, "client_sched_ttft_p95_ms", d->client_sched_ttft_p95_ms);
    add_ev(n, "engine_p95_bucket_lo_ms", d->engine_p95_lo_ms);
    add_ev(n, "engine_p95_bucket_hi_ms", d->engine_p95_hi_ms);
    add_ev(n, "cdf_gap", d->cdf_gap);
    add_ev(n, "engine_count", d->ttft_delta.total);
    add_ev(n, "client_count", d->client_n);
}

/* Output token counts differ from what was asked (token_count_mismatch). */
static void note_token_counts(ctx *x, const st_rep_cfg *c, diag *D)
{
    st_buf *b = &x->b;
    const st_notes_run *d = &c->digest[D->tk.first];
    uint32_t mis = d->tokens_short + d->tokens_long;
    st_buf_puts(b, "at ");
    dr_text(b, &D->tk);
    st_buf_printf(b, " req/s the output token counts differ from what was requested: at ");
    rate_s(b, c->runs[D->tk.first].rate);
    st_buf_printf(b,
                  " req/s %u of %u completed requests (%u fewer, %u more), %.0f tokens on average against "
                  "%.0f asked (counts %s). TPOT and output throughput use the delivered counts.",
                  mis, d->tokens_checked, d->tokens_short, d->tokens_long, d->tokens_got_mismatched / mis,
                  d->tokens_asked_mismatched / mis,
                  d->tokens_usage == d->tokens_checked ? "from the server's usage"
                  : d->tokens_usage                    ? "partly from usage, partly counted"
                                                       : "counted from the stream: no usage reported");
    st_note *n = dr_note(x, ST_NOTE_WARN, "token_count_mismatch", c, &D->tk);
    add_ev(n, "mismatched", mis);
    add_ev(n, "checked", d->tokens_checked);
    add_ev(n, "mean_delivered", d->tokens_got_mismatched / mis);
    add_ev(n, "mean_requested", d->tokens_asked_mismatched / mis);
}

/* Every slot of llama-server busy while requests were deferred (slots_full). */
static void note_slots_full(ctx *x, const st_rep_cfg *c, diag *D)
{
    st_buf *b = &x->b;
    const st_notes_run *d = &c->digest[D->sl.first];
    st_buf_puts(b, "at ");
    dr_text(b, &D->sl);
    st_buf_printf(b, " req/s every slot was busy while requests were deferred (in %u of %u scrapes at ",
                  d->wait_scrapes, d->rw_scrapes);
    rate_s(b, c->runs[D->sl.first].rate);
    st_buf_printf(b, " req/s, %.0f processing, up to %.0f deferred): requests waited for one of the %.0f slots (",
                  d->running_max_waiting, d->waiting_max, D->slots);
    if (D->np)
        st_buf_printf(b, "-np %s", D->np);
    else
        st_buf_puts(b, "llama-server's default");
    st_buf_puts(b, "), and that wait is part of their TTFT. More slots run more requests at once, each with its "
                   "share of the context (-c / -np), at the cost of a longer step on the same CPU.");
    st_note *n = dr_note(x, ST_NOTE_INFO, "slots_full", c, &D->sl);
    add_ev(n, "slots", D->slots);
    add_ev(n, "processing_max_while_deferred", d->running_max_waiting);
    add_ev(n, "deferred_max", d->waiting_max);
}

static void diagnosis(ctx *x, const st_rep_cfg *c)
{
    if (!c->digest)
        return;
    diag D;
    if (diag_setup(x->r, c, &D)) {
        x->oom = 1;
        return;
    }
    diag_classify(c, &D);
    if (D.kv.n)
        note_kv_limit(x, c, &D);
    if (D.el.n)
        note_limit_elsewhere(x, c, &D);
    if (D.pc.n)
        note_prefix_hits(x, c, &D);
    if (D.tt.n)
        note_ttft_disagrees(x, c, &D);
    if (D.tk.n)
        note_token_counts(x, c, &D);
    if (D.sl.n)
        note_slots_full(x, c, &D);
    server_timings_note(x, c);
    st_strv_free(&D.flags);
}

/* ---- run environment --------------------------------------------------------------------- */

static char *fact(const st_report *r, const char *const *keys)
{
    for (int i = 0; i < r->n_rows; i++) {
        if (!r->rows[i].facts)
            continue;
        json_t *j = json_loads(r->rows[i].facts, 0, NULL);
        char *out = NULL;
        for (const char *const *k = keys; j && *k && !out; k++) {
            const char *v = json_string_value(json_object_get(j, *k));
            if (v && *v)
                out = strdup(v);
        }
        json_decref(j);
        if (out)
            return out;
    }
    return NULL;
}

static void environment(ctx *x)
{
    const st_report *r = x->r;
    st_buf *b = &x->b;
    static const char *const k_gpu[] = { "gpu", "gpu_name", NULL };
    static const char *const k_drv[] = { "driver", "driver_version", "nvidia_driver", NULL };
    static const char *const k_eng[] = { "engine_version", NULL };
    char *gpu = fact(r, k_gpu), *drv = fact(r, k_drv), *eng = fact(r, k_eng);
    char date[64];
    st_fmt_date(date, sizeof date, r->audit.started);
    st_buf_printf(b, "Run environment: %s; ", date);
    if (gpu)
        st_buf_printf(b, "GPU %s (reported by the engine)", gpu);
    else
        st_buf_printf(b, "GPU %s (as stated in the spec; the engine did not report one)",
                      r->spec.hardware.gpu ? r->spec.hardware.gpu : "-");
    st_buf_printf(b, "; driver %s", drv ? drv : "not reported");
    st_buf_printf(b, "; %s engine version %s", st_engine_kind_name(r->spec.engine.kind), eng ? eng : "not reported");
    st_buf_printf(b, "; servetune %s.", r->audit.version ? r->audit.version : ST_VERSION);
    add(x, ST_NOTE_INFO, "environment", NULL);
    free(gpu);
    free(drv);
    free(eng);
}

/* A configuration that speculates, run on prompts of random token ids because the spec insisted
 * (workload.allow_synthetic_speculation, docs/speculative.md): its figures are not evidence. */
#define SPEC_FLAGS_MAX 256

/* A speculation flag among a configuration's words (vLLM, SGLang, llama.cpp, the emulator's
 * acceptance): how many words it takes (2: flag and value, 1: flag=value), 0 when not one. */
static int spec_flag_words(const char *w)
{
    static const char *const flags[] = { "--speculative-config",
                                         "--speculative_config",
                                         "-md",
                                         "--model-draft",
                                         "--spec-draft-model",
                                         "--spec-type",
                                         "--spec-draft-n-max",
                                         "--spec-draft-n-min",
                                         "--spec-draft-p-min",
                                         "--draft-p-min",
                                         "--speculative-algorithm",
                                         "--speculative-num-steps",
                                         "--speculative-eagle-topk",
                                         "--speculative-num-draft-tokens",
                                         "--speculative-draft-model-path",
                                         "--spec-acceptance",
                                         "--spec-draft-share",
                                         NULL };
    for (int i = 0; flags[i]; i++) {
        size_t n = strlen(flags[i]);
        if (!strncmp(w, flags[i], n) && (w[n] == '\0' || w[n] == '='))
            return w[n] ? 1 : 2;
    }
    return 0;
}

/* Whether configuration b is configuration a without its speculation: the same model, and a's
 * added flags with the speculation flags taken out (b has none). */
static int same_without_speculation(const st_report *r, const st_spec_config *a, const st_spec_config *b)
{
    const char *ma = st_spec_config_model(&r->spec, a), *mb = st_spec_config_model(&r->spec, b);
    if (!ma || !mb || strcmp(ma, mb))
        return 0;
    for (int j = 0; j < b->add_flags.n; j++)
        if (spec_flag_words(b->add_flags.v[j]))
            return 0;
    int i = 0, j = 0, removed = 0;
    for (;;) {
        int k;
        while (i < a->add_flags.n && (k = spec_flag_words(a->add_flags.v[i]))) {
            i += k;
            removed = 1;
        }
        if (i >= a->add_flags.n || j >= b->add_flags.n)
            break;
        if (strcmp(a->add_flags.v[i], b->add_flags.v[j]))
            return 0;
        i++;
        j++;
    }
    return removed && i >= a->add_flags.n && j >= b->add_flags.n;
}

/* The effect against the same configuration without speculation, when the audit has one: p95 TPOT
 * at the lowest rate both ran, and the capacity. */
static void speculation_effect(ctx *x, const st_rep_cfg *c, st_note *n)
{
    const st_report *r = x->r;
    st_buf *b = &x->b;
    for (int i = 0; i < r->n_cfg; i++) {
        const st_rep_cfg *o = &r->cfg[i];
        if (o == c || !c->spec || !o->spec || !same_without_speculation(r, c->spec, o->spec))
            continue;
        const st_run_row *wc = NULL, *wo = NULL;
        for (int j = 0; j < c->n_runs; j++)
            for (int k = 0; k < o->n_runs; k++) {
                const st_run_row *a = &c->runs[j], *z = &o->runs[k];
                if (a->rate != z->rate || !(a->tpot_p95_ms > 0) || !(z->tpot_p95_ms > 0) || verdict_is(a, "skipped") ||
                    verdict_is(z, "skipped") || verdict_is(a, "error") || verdict_is(z, "error"))
                    continue;
                if (!wc || a->rate < wc->rate)
                    wc = a, wo = z;
            }
        if (!wc && !(c->cap && o->cap && c->cap->has_pass && o->cap->has_pass))
            return;
        st_buf_printf(b, " Against %s (the same configuration without speculation):", o->name);
        if (wc) {
            st_buf_puts(b, " p95 TPOT at ");
            rate_s(b, wc->rate);
            st_buf_printf(b, " req/s %.2f ms without, %.2f ms with (%+.0f%%)", wo->tpot_p95_ms, wc->tpot_p95_ms,
                          100 * (wc->tpot_p95_ms / wo->tpot_p95_ms - 1));
            add_ev(n, "tpot_p95_ms_without", wo->tpot_p95_ms);
            add_ev(n, "tpot_p95_ms_with", wc->tpot_p95_ms);
        }
        if (c->cap && o->cap && c->cap->has_pass && o->cap->has_pass && o->cap->capacity_rps > 0) {
            st_buf_printf(b, "%s capacity %.3g req/s without, %.3g with (%+.0f%%)", wc ? ";" : "", o->cap->capacity_rps,
                          c->cap->capacity_rps, 100 * (c->cap->capacity_rps / o->cap->capacity_rps - 1));
            add_ev(n, "capacity_rps_without", o->cap->capacity_rps);
            add_ev(n, "capacity_rps_with", c->cap->capacity_rps);
        }
        st_buf_puts(b, ".");
        return;
    }
}

/* The configuration's speculation as its engine would read it (base flags and added ones). */
static int cfg_specdec(const st_report *r, const st_rep_cfg *c, st_specdec *d)
{
    const char *argv[SPEC_FLAGS_MAX];
    int n = 0;
    for (int i = 0; i < r->spec.engine.flags.n && n < SPEC_FLAGS_MAX; i++)
        argv[n++] = r->spec.engine.flags.v[i];
    for (int i = 0; c->spec && i < c->spec->add_flags.n && n < SPEC_FLAGS_MAX; i++)
        argv[n++] = c->spec->add_flags.v[i];
    char e[600];
    return st_specdec_from_argv(argv, n, d, e, sizeof e) == 1 ? 0 : -1;
}

/* The acceptance each run measured: vLLM's counters, or llama.cpp's per-response counts; beside
 * it the spec's expected acceptance (speculation:), and the effect against the same configuration
 * without speculation. */
static void speculation_measured(ctx *x, const st_rep_cfg *c)
{
    st_buf *b = &x->b;
    int any = 0;
    for (int j = 0; j < c->n_runs; j++) {
        const st_notes_run *d = digest_of(c, j);
        const st_run_row *w = &c->runs[j];
        if (!d || verdict_is(w, "skipped") || verdict_is(w, "error"))
            continue;
        int vllm = d->spec_draft_tokens > 0 && d->spec_drafts > 0 && !isnan(d->spec_accepted);
        int llama = d->rec_draft_tokens > 0;
        if (!vllm && !llama)
            continue;
        st_buf_puts(b, any ? "; at " : "measured speculative decoding: at ");
        any = 1;
        rate_s(b, w->rate);
        if (vllm) {
            st_buf_printf(b, " req/s %.1f%% of %.0f draft tokens accepted, mean acceptance length %.2f",
                          100 * d->spec_accepted / d->spec_draft_tokens, d->spec_draft_tokens,
                          1 + d->spec_accepted / d->spec_drafts);
            if (d->spec_n_pos) {
                st_buf_puts(b, " (by position:");
                for (uint32_t p = 0; p < d->spec_n_pos; p++)
                    st_buf_printf(b, " %.0f%%", isnan(d->spec_pos[p]) ? 0 : 100 * d->spec_pos[p] / d->spec_drafts);
                st_buf_puts(b, ")");
            }
        } else {
            st_buf_printf(b, " req/s %.1f%% of %llu draft tokens accepted (%u responses' draft_n)",
                          100.0 * (double)d->rec_draft_accepted / (double)d->rec_draft_tokens,
                          (unsigned long long)d->rec_draft_tokens, d->rec_draft_requests);
        }
    }
    if (!any)
        return;
    st_buf_puts(b, ".");
    const st_report *r = x->r;
    st_specdec d;
    double exp_acc = NAN;
    if (r->spec.speculation.given && cfg_specdec(r, c, &d) == 0 && d.k > 0) {
        /* expected accepted tokens per draft of k: the sum of the positions' acceptance */
        exp_acc = 0;
        for (uint32_t i = 0; i < d.k; i++)
            exp_acc += r->spec.speculation.n_pos ? (i < r->spec.speculation.n_pos ? r->spec.speculation.pos[i] : 0)
                                                 : pow(r->spec.speculation.acceptance, (double)i + 1);
        st_buf_printf(b,
                      " Expected from the spec's speculation.acceptance (the offline estimate, e.g. `servetune trace "
                      "stats LOG --spec ngram:%u`): %.1f%% of draft tokens accepted, mean acceptance length %.2f.",
                      d.k, 100 * exp_acc / d.k, 1 + exp_acc);
    } else {
        st_buf_puts(b, " On prompts of the client's text, `servetune trace stats LOG --spec` gives the n-gram estimate "
                       "to set beside it (give it as speculation.acceptance in the spec and the report shows both).");
    }
    st_note *n = add(x, ST_NOTE_INFO, "speculation_measured", c->name);
    if (n && !isnan(exp_acc))
        add_ev(n, "expected_accepted_per_draft", exp_acc);
    if (n) {
        st_buf_reset(b);
        speculation_effect(x, c, n);
        if (b->len) {
            size_t have = strlen(n->text);
            char *t = realloc(n->text, have + b->len + 1);
            if (t) {
                memcpy(t + have, b->data, b->len);
                t[have + b->len] = '\0';
                n->text = t;
            } else {
                x->oom = 1;
            }
        }
        st_buf_reset(b);
    }
}

static void speculation_note(ctx *x, const st_rep_cfg *c)
{
    const st_report *r = x->r;
    if (!c->spec || !r->spec.workload.allow_synthetic_speculation)
        return;
    const char *argv[SPEC_FLAGS_MAX];
    int n = 0;
    for (int i = 0; i < r->spec.engine.flags.n && n < SPEC_FLAGS_MAX; i++)
        argv[n++] = r->spec.engine.flags.v[i];
    for (int i = 0; i < c->spec->add_flags.n && n < SPEC_FLAGS_MAX; i++)
        argv[n++] = c->spec->add_flags.v[i];
    st_specdec d;
    char e[600];
    if (st_specdec_from_argv(argv, n, &d, e, sizeof e) != 1)
        return;
    st_buf_printf(&x->b, "%s speculates (%s) and ran on ", c->name, d.summary);
    if (r->spec.workload.kind == ST_WL_SYNTHETIC)
        st_buf_printf(&x->b, "the synthetic workload's prompts of random token ids");
    else
        st_buf_printf(&x->b, "a trace that --check found to hold token counts (prompts of random token ids)");
    st_buf_printf(
        &x->b,
        ", because the spec says workload.allow_synthetic_speculation: true. On such prompts n-gram lookup "
        "finds no earlier n-gram and a draft model's guesses are rarely the target's, so almost every draft "
        "is rejected: its TPOT and capacity measure the speculation's cost, not its gain, and are no evidence "
        "for or against it on real traffic. Audit it on the client's text, or estimate the n-gram acceptance "
        "offline with `servetune trace stats LOG --spec ngram:%u`.",
        d.k ? d.k : 4);
    add(x, ST_NOTE_WARN, "speculation_not_evidence", c->name);
}

/* A trace's requests longer than the configuration's context were left out of its runs (the
 * sweep's "trace_over_context" fact): its figures are for the rest, said with the share. */
static void trace_over_context_note(ctx *x, const st_rep_cfg *c)
{
    if (!c->row || !c->row->facts)
        return;
    json_t *j = json_loads(c->row->facts, 0, NULL);
    json_t *o = json_object_get(j, "trace_over_context");
    json_int_t ctxlen = json_integer_value(json_object_get(o, "context")),
               over = json_integer_value(json_object_get(o, "requests")),
               of = json_integer_value(json_object_get(o, "of"));
    if (ctxlen > 0 && over > 0 && of >= over) {
        st_buf_printf(&x->b,
                      "%lld of the trace's %lld requests (%.1f %%) are longer (prompt + output) than %s's context of "
                      "%lld tokens: the server would refuse them (HTTP 400), so its runs left them out, as servetune "
                      "bench does, and its figures are for the other %.1f %%. To serve them, raise --max-model-len; "
                      "to leave them out of every configuration alike, set workload.trace_max_tokens.",
                      (long long)over, (long long)of, 100.0 * (double)over / (double)of, c->name, (long long)ctxlen,
                      100.0 - 100.0 * (double)over / (double)of);
        add(x, ST_NOTE_WARN, "trace_over_context", c->name);
    }
    json_decref(j);
}

/* An agent trace's tasks holding a request longer than the configuration's context were left out
 * of its runs whole (the sweep's "agent_over_context" fact): its figures are for the rest. */
static void agent_over_context_note(ctx *x, const st_rep_cfg *c)
{
    if (!c->row || !c->row->facts)
        return;
    json_t *j = json_loads(c->row->facts, 0, NULL);
    json_t *o = json_object_get(j, "agent_over_context");
    json_int_t ctxlen = json_integer_value(json_object_get(o, "context")),
               tasks = json_integer_value(json_object_get(o, "tasks")),
               tasks_of = json_integer_value(json_object_get(o, "tasks_of")),
               reqs = json_integer_value(json_object_get(o, "requests")),
               reqs_of = json_integer_value(json_object_get(o, "requests_of")),
               tokens = json_integer_value(json_object_get(o, "tokens"));
    const char *task = json_string_value(json_object_get(o, "task")),
               *node = json_string_value(json_object_get(o, "node"));
    if (ctxlen > 0 && tasks > 0 && tasks_of >= tasks && reqs_of >= reqs && task && node) {
        st_buf_printf(&x->b,
                      "%lld of the agent trace's %lld tasks (%.1f %%; %lld of its %lld requests) hold a request "
                      "longer (prompt as grown by its parents' answers + output) than %s's context of %lld tokens "
                      "(the first: node %s of task %s, %lld tokens): the server would refuse it (HTTP 400) and the "
                      "rest of its task could not run, so its runs left those tasks out whole, and its figures "
                      "are for the other %.1f %% of the tasks. To serve them, raise --max-model-len.",
                      (long long)tasks, (long long)tasks_of, 100.0 * (double)tasks / (double)tasks_of, (long long)reqs,
                      (long long)reqs_of, c->name, (long long)ctxlen, node, task, (long long)tokens,
                      100.0 - 100.0 * (double)tasks / (double)tasks_of);
        add(x, ST_NOTE_WARN, "agent_over_context", c->name);
    }
    json_decref(j);
}

int st_notes_build(const st_report *r, st_notes *out)
{
    memset(out, 0, sizeof *out);
    ctx x = { .r = r, .out = out };
    st_buf_init(&x.b, ST_NOTE_TEXT_MAX);
    atoms *all = calloc((size_t)(r->n_cfg > 0 ? r->n_cfg : 1), sizeof *all);
    if (!all) {
        st_buf_free(&x.b);
        return -1;
    }
    for (int i = 0; i < r->n_cfg; i++)
        atoms_of(r->cfg[i].spec, &all[i]);
    for (int i = 0; i < r->n_cfg && !x.oom; i++) {
        const st_rep_cfg *c = &r->cfg[i];
        status_notes(&x, c);
        speculation_note(&x, c);
        trace_over_context_note(&x, c);
        agent_over_context_note(&x, c);
        speculation_measured(&x, c);
        decode_anomaly(&x, i);
        capacity_notes(&x, c);
        combined_gain(&x, i, all);
        run_notes(&x, c);
        diagnosis(&x, c);
    }
    if (!x.oom)
        environment(&x);
    for (int i = 0; i < r->n_cfg; i++)
        atoms_free(&all[i]);
    free(all);
    st_buf_free(&x.b);
    return x.oom ? -1 : 0;
}
