/* The notes and the metrics diagnosis (report/notes.h) on hand-built report models: each kind
 * fires when it should and not otherwise; numbers hand-computed; the digest of records and
 * samples; the scraper's histogram samples read back; every renderer shows the same list. */
#include "harness.h"

#include <jansson.h>
#include <stdio.h>

#include "report/notes.h"
#include "engine/metrics.h"
#include "report/html_audit.h"
#include "report/report.h"

/* ---- a hand-built report ----------------------------------------------------------------- */

#define NC 8
#define NR 8

typedef struct fx {
    st_report r;
    st_spec_config sc[NC];
    st_rep_cfg c[NC];
    st_run_row runs[NC][NR];
    st_rate_result rr[NC][NR];
    st_rep_server sv[NC][NR];
    st_notes_run dg[NC][NR];
    st_config_row rows[NC];
    char *flagv[NC][8];
} fx;

static void fx_init(fx *f)
{
    memset(f, 0, sizeof *f);
    st_spec *s = &f->r.spec;
    s->engine.kind = ST_ENGINE_EMULATOR;
    s->engine.model = "Qwen/Qwen3-8B";
    s->hardware.gpu = "H100";
    s->hardware.gpus_per_replica = 1;
    s->hardware.price_per_gpu_hour = 2.0;
    s->peak_rate = 10;
    s->workload.kind = ST_WL_SYNTHETIC;
    s->workload.input_tokens = 3000;
    s->workload.output_tokens = 300;
    s->workload.shared_prefix = 2000;
    s->workload.requests_per_rate = 200;
    s->slo.n = 2;
    s->slo.terms[0] = (st_slo_term){ ST_SLO_TTFT, 95, 1500 };
    s->slo.terms[1] = (st_slo_term){ ST_SLO_TPOT, 95, 50 };
    s->configs = f->sc;
    f->r.cfg = f->c;
    f->r.pick = -1;
    f->r.audit.started = 1795000000LL * 1000000000LL;
    f->r.audit.version = "0.1.0";
}

/* Adds a configuration; its changes are set by the caller on f->sc[i]. */
static int fx_cfg(fx *f, const char *name)
{
    int i = f->r.n_cfg++;
    f->r.spec.n_configs = f->r.n_cfg;
    f->sc[i].name = (char *)name;
    f->c[i].name = name;
    f->c[i].spec = &f->sc[i];
    f->c[i].runs = f->runs[i];
    f->c[i].rr = f->rr[i];
    f->c[i].server = f->sv[i];
    return i;
}

static void fx_flags(fx *f, int i, const char *a, const char *b, const char *c, const char *d)
{
    const char *v[4] = { a, b, c, d };
    int n = 0;
    for (int k = 0; k < 4 && v[k]; k++)
        f->flagv[i][n++] = (char *)v[k];
    f->sc[i].add_flags.v = f->flagv[i];
    f->sc[i].add_flags.n = n;
}

/* A run: verdict "pass"/"fail"/"skipped"/"error"; p95 TTFT and TPOT (ms); delivered req/s. */
static st_run_row *fx_run(fx *f, int i, double rate, const char *verdict, double ttft, double tpot, double delivered)
{
    st_rep_cfg *c = &f->c[i];
    int j = c->n_runs++;
    st_run_row *w = &f->runs[i][j];
    *w = (st_run_row){ .config = (char *)c->name,
                       .seq = j,
                       .rate = rate,
                       .grid = 1,
                       .verdict = (char *)verdict,
                       .why = (char *)"",
                       .planned = 200,
                       .sent = 200,
                       .completed = 200,
                       .delivered_rps = delivered,
                       .output_tps = delivered * 300,
                       .ttft_p95_ms = ttft,
                       .tpot_p95_ms = tpot,
                       .n_terms = 2,
                       .lag_p99_ms = 1 };
    w->term_ms[0] = ttft;
    w->term_ms[1] = tpot;
    w->worst_ratio = fmax(ttft / 1500, tpot / 50);
    return w;
}

static st_verdict vd(const char *v)
{
    return !strcmp(v, "pass")      ? ST_VERDICT_PASS
           : !strcmp(v, "fail")    ? ST_VERDICT_FAIL
           : !strcmp(v, "skipped") ? ST_VERDICT_SKIPPED
                                   : ST_VERDICT_ERROR;
}

/* Capacities, statuses and the comparison with the baseline, as st_report_load does. */
static void fx_finish(fx *f)
{
    for (int i = 0; i < f->r.n_cfg; i++) {
        st_rep_cfg *c = &f->c[i];
        for (int j = 0; j < c->n_runs; j++) {
            const st_run_row *w = &c->runs[j];
            c->rr[j] = (st_rate_result){ .rate = w->rate,
                                         .verdict = vd(w->verdict),
                                         .worst_ratio = w->worst_ratio,
                                         .delivered_rps = w->delivered_rps,
                                         .output_tps = w->output_tps,
                                         .sustained_rps = NAN,
                                         .requests = w->sent,
                                         .grid = 1 };
            f->sv[i][j].kv_usage_max = NAN;
        }
        st_capacity_compute(c->rr, c->n_runs, 1, &c->grid);
        st_capacity_compute(c->rr, c->n_runs, 0, &c->refined);
        c->cap = &c->grid;
        c->cost.valid = c->cap->has_pass;
        c->cost.usd_per_1m = 1;
        c->ttft_p95_ms = c->tpot_p95_ms = NAN;
        if (c->row && c->row->status && !strcmp(c->row->status, "failed") && !c->cap->has_pass)
            c->status = ST_REP_FAILED;
        else if (c->cap->has_pass)
            c->status = ST_REP_OK;
        else if (c->cap->n_measured)
            c->status = ST_REP_NONE_PASSED;
        else
            c->status = ST_REP_NOT_RUN;
    }
    for (int i = 0; i < f->r.n_cfg; i++)
        f->c[i].cap_vs_base = f->c[i].cost_vs_base = f->c[i].status == ST_REP_OK && f->c[0].status == ST_REP_OK
                                                         ? f->c[i].cap->capacity_rps / f->c[0].cap->capacity_rps - 1
                                                         : NAN;
}

static int count_kind(const st_notes *ns, const char *kind, const char *cfg)
{
    int n = 0;
    for (int i = 0; i < ns->n; i++)
        if (!strcmp(ns->v[i].kind, kind) && (!cfg || (ns->v[i].config && !strcmp(ns->v[i].config, cfg))))
            n++;
    return n;
}

static const st_note *find(const st_notes *ns, const char *kind, const char *cfg)
{
    for (int i = 0; i < ns->n; i++)
        if (!strcmp(ns->v[i].kind, kind) && (!cfg || (ns->v[i].config && !strcmp(ns->v[i].config, cfg))))
            return &ns->v[i];
    fail_msg("no %s note for %s", kind, cfg ? cfg : "(audit)");
    return NULL;
}

static double ev(const st_note *n, const char *key)
{
    for (int i = 0; i < n->n_ev; i++)
        if (!strcmp(n->ev[i].key, key))
            return n->ev[i].value;
    fail_msg("note %s has no evidence %s", n->kind, key);
    return NAN;
}

static void has_text(const st_note *n, const char *s)
{
    if (!strstr(n->text, s))
        fail_msg("note %s: \"%s\" not in \"%s\"", n->kind, s, n->text);
}

static void build(fx *f, st_notes *ns)
{
    fx_finish(f);
    assert_int_equal(st_notes_build(&f->r, ns), 0);
}

/* ---- status and capacity notes ----------------------------------------------------------- */

/* A per-token limit below what one request alone gets: the note says no rate meets it (the
 * engine model's lone decode step and the weights' read time), instead of "test lower rates";
 * an engine the model cannot stand for keeps the advice. */
static void none_passed_below_the_decode_floor(void **state)
{
    (void)state;
    static fx f;
    for (int engine = 0; engine < 2; engine++) {
        fx_init(&f);
        f.r.spec.slo.terms[1].max_ms = 2;
        if (engine)
            f.r.spec.engine.kind = ST_ENGINE_LLAMACPP;
        int b = fx_cfg(&f, "baseline");
        fx_run(&f, b, 1, "fail", 300, 13, 1);
        st_notes ns;
        build(&f, &ns);
        const st_note *x = find(&ns, "none_passed", "baseline");
        if (engine) {
            has_text(x, "Test lower rates");
        } else {
            /* Qwen3-8B bf16 on an H100: 16.4 GB of weights at 3.35 TB/s, 4.9 ms */
            has_text(x, "One request alone decodes at about ");
            has_text(x, "reading its weights alone takes 4.89 ms at the GPU's peak bandwidth), above the 2.00 ms "
                        "limit: no rate meets it");
            assert_null(strstr(x->text, "Test lower rates"));
        }
        st_notes_free(&ns);
    }
}

static void none_passed_names_the_term(void **state)
{
    (void)state;
    static fx f;
    fx_init(&f);
    int b = fx_cfg(&f, "baseline");
    fx_run(&f, b, 12, "pass", 300, 20, 11);
    fx_run(&f, b, 16, "fail", 1800, 30, 12);
    int n = fx_cfg(&f, "no-prefix-cache");
    f.sc[n].add_flags = (st_strv){ (char *[]){ "--no-enable-prefix-caching" }, 1 };
    st_run_row *w = fx_run(&f, n, 12, "fail", 3043, 61, 2);
    w->stopped_early = 1;
    fx_run(&f, n, 16, "fail", 4000, 30, 2);
    st_notes ns;
    build(&f, &ns);
    assert_int_equal(count_kind(&ns, "none_passed", NULL), 1);
    const st_note *x = find(&ns, "none_passed", "no-prefix-cache");
    assert_int_equal(x->sev, ST_NOTE_WARN);
    has_text(x, "at its lowest rate, 12 req/s, p95 TTFT was at least 3,043 ms vs 1,500 ms (\xC3\x97"
                "2.0) and p95 TPOT was at least 61.0 ms vs 50.0 ms (\xC3\x97"
                "1.2)");
    assert_int_equal(x->n_rates, 1);
    assert_near(x->rates[0], 12, 0);
    assert_near(ev(x, "ttft_p95_ms"), 3043, 0);
    assert_near(ev(x, "ttft_p95_ratio"), 3043.0 / 1500, 1e-9);
    /* the passing baseline gets none, and neither a capacity-may-be-higher note (16 failed) */
    assert_int_equal(count_kind(&ns, "capacity_may_be_higher", NULL), 0);
    /* and the environment closes the list, with no configuration */
    const st_note *e = &ns.v[ns.n - 1];
    assert_string_equal(e->kind, "environment");
    assert_null(e->config);
    assert_non_null(strstr(e->text, "GPU H100 (as stated in the spec; the engine did not report one)"));
    st_notes_free(&ns);
}

static void warmup_non_monotonic_and_highest(void **state)
{
    (void)state;
    static fx f;
    fx_init(&f);
    int a = fx_cfg(&f, "warm"); /* first fails, then 16 and 24 pass, 32 fails */
    fx_run(&f, a, 12, "fail", 2500, 20, 9);
    fx_run(&f, a, 16, "pass", 400, 25, 14);
    fx_run(&f, a, 24, "pass", 600, 30, 20);
    fx_run(&f, a, 32, "fail", 2000, 45, 21);
    int b = fx_cfg(&f, "bumpy"); /* 16 fails between passes */
    fx_run(&f, b, 12, "pass", 300, 20, 11);
    fx_run(&f, b, 16, "fail", 1600, 25, 14);
    fx_run(&f, b, 24, "pass", 700, 30, 19);
    fx_run(&f, b, 32, "fail", 2000, 45, 20);
    int c = fx_cfg(&f, "fast"); /* every rate passes */
    fx_run(&f, c, 12, "pass", 100, 10, 12);
    fx_run(&f, c, 16, "pass", 120, 12, 16);
    st_notes ns;
    build(&f, &ns);
    const st_note *w = find(&ns, "warmup_effect", "warm");
    has_text(w, "its first measured rate, 12 req/s, failed");
    has_text(w, "while higher rates passed (16, 24 req/s)");
    has_text(w, "Capacity is taken from the rates after it");
    assert_int_equal(w->n_rates, 3);
    assert_near(ev(w, "pass_rate"), 24, 0);
    assert_int_equal(count_kind(&ns, "warmup_effect", NULL), 1);
    assert_int_equal(count_kind(&ns, "non_monotonic", "warm"), 0); /* the warm-up is not also non-monotonic */
    const st_note *m = find(&ns, "non_monotonic", "bumpy");
    has_text(m, "16 req/s failed while it is below 24 req/s, which passed");
    assert_int_equal(m->n_rates, 2);
    assert_int_equal(count_kind(&ns, "non_monotonic", NULL), 1);
    const st_note *h = find(&ns, "capacity_may_be_higher", "fast");
    has_text(h, "its highest tested rate, 16 req/s, passed");
    assert_int_equal(count_kind(&ns, "capacity_may_be_higher", NULL), 1);
    st_notes_free(&ns);
}

static void burst_not_sustained(void **state)
{
    (void)state;
    static fx f;
    fx_init(&f);
    int a = fx_cfg(&f, "bursty"); /* passes at 64 req/s: 200 arrivals in ~3 s, done after 10 s */
    fx_run(&f, a, 32, "pass", 300, 30, 15);
    st_run_row *w = fx_run(&f, a, 64, "pass", 800, 40, 20);
    w->sustained_rps = NAN;
    w->duration_s = 10;
    fx_run(&f, a, 96, "fail", 2500, 45, 20);
    int b = fx_cfg(&f, "steady"); /* its capacity run had a steady-state window */
    w = fx_run(&f, b, 16, "pass", 200, 20, 15);
    w->sustained_rps = 15.5;
    w->duration_s = 20;
    fx_run(&f, b, 32, "fail", 2000, 45, 16);
    st_notes ns;
    build(&f, &ns);
    const st_note *n = find(&ns, "burst_not_sustained", "bursty");
    has_text(n, "its capacity comes from 64 req/s, where the 200 arrivals lasted about 3.11 s");
    has_text(n, "but the requests took 10.0 s to finish");
    has_text(n, "The delivered 20.0 req/s is the better guide");
    assert_near(ev(n, "arrivals_s"), 199.0 / 64, 1e-9);
    assert_int_equal(count_kind(&ns, "burst_not_sustained", NULL), 1);
    st_notes_free(&ns);
}

static void failed_start_not_run_and_run_events(void **state)
{
    (void)state;
    static fx f;
    fx_init(&f);
    int b = fx_cfg(&f, "baseline");
    st_run_row *w = fx_run(&f, b, 12, "pass", 300, 20, 11);
    w->client_limited = 1;
    w->lag_p99_ms = 240;
    w = fx_run(&f, b, 16, "fail", 1800, 30, 12);
    w->client_limited = 1;
    w->lag_p99_ms = 310;
    w->stopped_early = 1;
    w = fx_run(&f, b, 24, "skipped", NAN, NAN, NAN);
    w->why = (char *)"skipped: 16 req/s already failed by x2.30 (margin x2)";
    w = fx_run(&f, b, 32, "error", NAN, NAN, NAN);
    w->why = (char *)"the engine died";
    int o = fx_cfg(&f, "oom");
    f.rows[o] = (st_config_row){ .name = (char *)"oom",
                                 .status = (char *)"failed",
                                 .failure_class = (char *)"oom",
                                 .failure_detail = (char *)"CUDA out of memory",
                                 .log_tail = (char *)"line 1\nline 2",
                                 .startup_s = NAN };
    f.c[o].row = &f.rows[o];
    fx_cfg(&f, "later");
    f.r.audit.partial = 1;
    st_notes ns;
    build(&f, &ns);
    const st_note *x = find(&ns, "not_started", "oom");
    assert_int_equal(x->sev, ST_NOTE_PROBLEM);
    assert_string_equal(x->text, "did not start (oom: CUDA out of memory).");
    assert_string_equal(x->detail, "line 1\nline 2");
    has_text(find(&ns, "not_run", "later"), "interrupted");
    x = find(&ns, "client_limited", "baseline");
    has_text(x, "lagged its schedule at 12, 16 req/s (p99 send lag up to 310 ms); those runs are");
    assert_near(ev(x, "lag_p99_ms_max"), 310, 0);
    has_text(find(&ns, "stopped_early", "baseline"), "stopped early at 16 req/s");
    x = find(&ns, "skipped", "baseline");
    assert_string_equal(x->text, "skipped 24 req/s: 16 req/s already failed by x2.30 (margin x2).");
    x = find(&ns, "run_error", "baseline");
    assert_string_equal(x->text, "at 32 req/s the run broke: the engine died.");
    assert_int_equal(count_kind(&ns, "requests_failed", NULL), 0); /* no record failed */
    assert_int_equal(count_kind(&ns, "none_passed", NULL), 0);
    st_notes_free(&ns);
}

/* ---- decode anomaly ---------------------------------------------------------------------- */

static void decode_anomaly_only_when_flat_and_far(void **state)
{
    (void)state;
    static fx f;
    const double rates[3] = { 2, 4, 8 };
    const double tb[3] = { 20, 25, 30 }, to[3] = { 18, 22, 28 }, ts[3] = { 60, 62, 64 };
    const double tl[3] = { 22, 30, 45 };   /* merely slower under load: not far above at its lowest rate */
    const double tg[3] = { 60, 120, 200 }; /* far above but climbing with load: not flat */
    fx_init(&f);
    int b = fx_cfg(&f, "baseline"), o = fx_cfg(&f, "other"), s = fx_cfg(&f, "slow"), l = fx_cfg(&f, "loaded");
    for (int k = 0; k < 3; k++) {
        fx_run(&f, b, rates[k], "pass", 100, tb[k], rates[k]);
        fx_run(&f, o, rates[k], "pass", 100, to[k], rates[k]);
        fx_run(&f, s, rates[k], "fail", 100, ts[k], rates[k])->stopped_early = k > 0; /* lower bounds */
        fx_run(&f, l, rates[k], "pass", 100, tl[k], rates[k]);
    }
    st_notes ns;
    build(&f, &ns);
    assert_int_equal(count_kind(&ns, "decode_anomaly", NULL), 1);
    const st_note *x = find(&ns, "decode_anomaly", "slow");
    /* others at 2 req/s: 20, 18, 22 -> median 20, highest 22 */
    assert_near(ev(x, "others_median_tpot_p95_ms"), 20, 1e-9);
    assert_near(ev(x, "others_max_tpot_p95_ms"), 22, 1e-9);
    assert_near(ev(x, "ratio"), 3, 1e-9);
    has_text(x, "60.0 ms at 2 req/s against a median of 20.0 ms for the others (\xC3\x97"
                "3.0; the highest of them "
                "22.0 ms), and at most 64.0 ms at any rate");
    has_text(x, "kernel or engine path problem rather than load: rerun before concluding");
    assert_int_equal(x->n_rates, 3);
    st_notes_free(&ns);

    /* far above but climbing with load: not flat, no note */
    fx_init(&f);
    b = fx_cfg(&f, "baseline"), o = fx_cfg(&f, "other");
    int g = fx_cfg(&f, "growing");
    for (int k = 0; k < 3; k++) {
        fx_run(&f, b, rates[k], "pass", 100, tb[k], rates[k]);
        fx_run(&f, o, rates[k], "pass", 100, to[k], rates[k]);
        fx_run(&f, g, rates[k], "fail", 100, tg[k], rates[k]);
    }
    build(&f, &ns);
    assert_int_equal(count_kind(&ns, "decode_anomaly", NULL), 0);
    st_notes_free(&ns);

    /* twice the median only because other configurations are much faster (fp8): it is not far
     * above the baseline, so no note (the demo's batched-8k on a busy machine) */
    fx_init(&f);
    const double t0[2] = { 30.9, 38.3 }, t1[2] = { 17.1, 23.5 }, t2[2] = { 14.6, 21.8 }, t3[2] = { 7.5, 13.4 },
                 tx[2] = { 36.4, 44.5 };
    int c0 = fx_cfg(&f, "baseline"), c1 = fx_cfg(&f, "fp8-kv"), c2 = fx_cfg(&f, "fp8-ckpt"), c3 = fx_cfg(&f, "fp8-all"),
        cx = fx_cfg(&f, "batched-8k");
    for (int k = 0; k < 2; k++) {
        double rt = k ? 16 : 12;
        fx_run(&f, c0, rt, "pass", 100, t0[k], rt);
        fx_run(&f, c1, rt, "pass", 100, t1[k], rt);
        fx_run(&f, c2, rt, "pass", 100, t2[k], rt);
        fx_run(&f, c3, rt, "pass", 100, t3[k], rt);
        fx_run(&f, cx, rt, "pass", 100, tx[k], rt);
    }
    build(&f, &ns);
    assert_int_equal(count_kind(&ns, "decode_anomaly", NULL), 0);
    st_notes_free(&ns);
}

/* ---- combined gain ----------------------------------------------------------------------- */

static void combined_gain_attribution(void **state)
{
    (void)state;
    static fx f;
    fx_init(&f);
    int b = fx_cfg(&f, "baseline");
    int c1 = fx_cfg(&f, "fp8-ckpt");
    f.sc[c1].model = "Qwen/Qwen3-8B-FP8";
    int c2 = fx_cfg(&f, "fp8-kv");
    fx_flags(&f, c2, "--kv-cache-dtype", "fp8", NULL, NULL);
    int c3 = fx_cfg(&f, "batched-8k");
    fx_flags(&f, c3, "--max-num-batched-tokens", "8192", NULL, NULL);
    int all = fx_cfg(&f, "fp8-all");
    f.sc[all].model = "Qwen/Qwen3-8B-FP8";
    fx_flags(&f, all, "--max-num-batched-tokens", "8192", "--kv-cache-dtype", "fp8"); /* any order */
    int part = fx_cfg(&f, "fp8-kv-prio"); /* fp8-kv plus a change not tested alone: no attribution */
    fx_flags(&f, part, "--kv-cache-dtype", "fp8", "--scheduling-policy", "priority");
    /* capacities: baseline 10, singles 12.7 / 11 / 10.5, combined 14.5 */
    fx_run(&f, b, 12, "pass", 100, 20, 10);
    fx_run(&f, c1, 12, "pass", 100, 20, 12.7);
    fx_run(&f, c2, 12, "pass", 100, 20, 11);
    fx_run(&f, c3, 12, "pass", 100, 20, 10.5);
    fx_run(&f, all, 12, "pass", 100, 20, 14.5);
    fx_run(&f, part, 12, "pass", 100, 20, 13);
    for (int i = 0; i < f.r.n_cfg; i++)
        fx_run(&f, i, 16, "fail", 2000, 60, 1);
    st_notes ns;
    build(&f, &ns);
    assert_int_equal(count_kind(&ns, "combined_gain", NULL), 1);
    const st_note *x = find(&ns, "combined_gain", "fp8-all");
    /* +45 % together; fp8-ckpt alone +27 %; the other two add 45 - 27 = 18 points */
    assert_string_equal(x->text, "most of its capacity gain over the baseline (+45 %) comes from fp8-ckpt alone "
                                 "(+27 %); the other two (fp8-kv, batched-8k) add about 18 % of the baseline's "
                                 "capacity.");
    assert_near(ev(x, "gain"), 0.45, 1e-9);
    assert_near(ev(x, "gain:fp8-ckpt"), 0.27, 1e-9);
    assert_near(ev(x, "gain:fp8-kv"), 0.10, 1e-9);
    assert_near(ev(x, "gain:batched-8k"), 0.05, 1e-9);
    st_notes_free(&ns);

    /* no single change carries most of it: singles +10, +10, +5, together +45 */
    f.runs[c1][0].delivered_rps = 11;
    build(&f, &ns);
    x = find(&ns, "combined_gain", "fp8-all");
    has_text(x, "no single change carries most of its capacity gain over the baseline (+45 %); alone: ");
    has_text(x, "fp8-ckpt +10 %");
    has_text(x, "batched-8k +5 %");
    st_notes_free(&ns);

    /* one single change alone beats the combination */
    f.runs[c1][0].delivered_rps = 16;
    build(&f, &ns);
    x = find(&ns, "combined_gain", "fp8-all");
    assert_string_equal(x->text, "fp8-ckpt alone gains more capacity (+60 %) than the combination (+45 %): the other "
                                 "two (fp8-kv, batched-8k) cost about 15 % of the baseline's capacity.");
    st_notes_free(&ns);

    /* a run the host limited: the gain is not credited silently */
    f.runs[c1][0].client_limited = 1;
    build(&f, &ns);
    x = find(&ns, "combined_gain", "fp8-all");
    has_text(x, "The host limited runs of fp8-ckpt (the client_limited / emulator_lagged notes): these gains may be "
                "the lag's, not the configurations'.");
    st_notes_free(&ns);
    f.runs[c1][0].client_limited = 0;
}

/* ---- digest and diagnosis ---------------------------------------------------------------- */

/* Samples of n scrapes, one second apart. */
typedef struct samples {
    st_metrics_sample v[4096];
    uint32_t n;
} samples;

static void put(samples *s, double t, const char *name, double v)
{
    assert_true(s->n < 4096);
    s->v[s->n++] = (st_metrics_sample){ t, name, v };
}

static void gauge_scrapes(samples *s, int n, const double *kv, const double *run, const double *wait, const double *pre)
{
    for (int i = 0; i < n; i++) {
        if (kv)
            put(s, i, "kv_usage", kv[i]);
        if (run)
            put(s, i, "running", run[i]);
        if (wait)
            put(s, i, "waiting", wait[i]);
        if (pre)
            put(s, i, "preemptions", pre[i]);
    }
}

static void digest_of_gauges(void **state)
{
    (void)state;
    static samples s;
    s.n = 0;
    const double kv[5] = { 0.5, 0.95, 0.97, 0.99, 0.96 }, run[5] = { 10, 200, 180, 150, 150 },
                 wait[5] = { 0, 1, 30, 60, 90 }, pre[5] = { 100, 100, 103, 108, 120 };
    gauge_scrapes(&s, 5, kv, run, wait, pre);
    st_notes_run d;
    st_notes_run_digest(NULL, 0, s.v, s.n, &d);
    assert_int_equal(d.scrapes, 5);
    assert_int_equal(d.kv_scrapes, 5);
    assert_int_equal(d.kv_high, 4);
    assert_near(d.kv_max, 0.99, 0);
    assert_near(d.preempt_delta, 20, 0);
    assert_int_equal(d.preempt_steps, 3);
    assert_int_equal(d.rw_scrapes, 5);
    assert_int_equal(d.wait_scrapes, 3); /* waiting >= 2 */
    assert_near(d.running_max_waiting, 180, 0);
    assert_near(d.waiting_max, 90, 0);
    assert_false(d.has_records);
    assert_false(d.has_ttft_hist);
    /* nothing at all */
    st_notes_run_digest(NULL, 0, NULL, 0, &d);
    assert_false(d.has_samples);
    assert_true(isnan(d.kv_max));
}

/* A report of one configuration with one digest per run. */
static void one_cfg(fx *f, const char *flag, const char *val)
{
    fx_init(f);
    int b = fx_cfg(f, "baseline");
    if (flag)
        fx_flags(f, b, flag, val, NULL, NULL);
    fx_run(f, b, 12, "pass", 300, 20, 11);
    fx_run(f, b, 16, "fail", 1800, 30, 12);
    f->c[b].digest = f->dg[b];
}

static void kv_cache_limit(void **state)
{
    (void)state;
    static samples s;
    static fx f;
    const double kv[5] = { 0.5, 0.95, 0.97, 0.99, 0.96 }, pre[5] = { 0, 0, 3, 8, 20 };
    const double run[5] = { 10, 200, 180, 150, 150 }, wait[5] = { 0, 10, 30, 60, 90 };
    s.n = 0;
    gauge_scrapes(&s, 5, kv, run, wait, pre);
    one_cfg(&f, NULL, NULL);
    st_notes_run_digest(NULL, 0, NULL, 0, &f.dg[0][0]);
    st_notes_run_digest(NULL, 0, s.v, s.n, &f.dg[0][1]);
    st_notes ns;
    build(&f, &ns);
    const st_note *x = find(&ns, "kv_cache_limit", "baseline");
    assert_string_equal(x->text, "at 16 req/s the KV cache usage stayed at or above 0.9 (in 4 of 5 scrapes at 16 "
                                 "req/s, max 0.99) while preemptions climbed (+20): the KV cache is the limit: reduce "
                                 "--max-model-len or --max-num-seqs, or use an fp8 KV cache (--kv-cache-dtype fp8).");
    assert_near(ev(x, "kv_high_fraction"), 0.8, 1e-12);
    assert_int_equal(count_kind(&ns, "limit_elsewhere", NULL), 0); /* the cache was full: not elsewhere */
    st_notes_free(&ns);

    /* already fp8: the advice drops the fp8 part */
    one_cfg(&f, "--kv-cache-dtype", "fp8_e4m3");
    st_notes_run_digest(NULL, 0, s.v, s.n, &f.dg[0][1]);
    build(&f, &ns);
    has_text(find(&ns, "kv_cache_limit", "baseline"), "reduce --max-model-len or --max-num-seqs (the KV cache is "
                                                      "already fp8).");
    st_notes_free(&ns);

    /* a full cache without preemptions is not the limit */
    const double flat[5] = { 7, 7, 7, 7, 7 };
    s.n = 0;
    gauge_scrapes(&s, 5, kv, NULL, NULL, flat);
    one_cfg(&f, NULL, NULL);
    st_notes_run_digest(NULL, 0, s.v, s.n, &f.dg[0][1]);
    build(&f, &ns);
    assert_int_equal(count_kind(&ns, "kv_cache_limit", NULL), 0);
    st_notes_free(&ns);
}

static void limit_elsewhere(void **state)
{
    (void)state;
    static samples s;
    static fx f;
    const double kv[4] = { 0.3, 0.4, 0.45, 0.4 }, run[4] = { 40, 41, 38, 40 }, wait[4] = { 10, 25, 30, 12 };
    s.n = 0;
    gauge_scrapes(&s, 4, kv, run, wait, NULL);
    one_cfg(&f, "--max-num-batched-tokens", "2048");
    st_notes_run_digest(NULL, 0, s.v, s.n, &f.dg[0][1]);
    st_notes ns;
    build(&f, &ns);
    const st_note *x = find(&ns, "limit_elsewhere", "baseline");
    assert_string_equal(x->text, "at 16 req/s requests waited (in 4 of 4 scrapes at 16 req/s, up to 30 waiting) "
                                 "while at most 41 ran, well below --max-num-seqs 1024 (the default), with the KV "
                                 "cache at most 0.45 full: the limit is elsewhere (the token budget per step, "
                                 "--max-num-batched-tokens 2048, or compute).");
    st_notes_free(&ns);
    /* running near max-num-seqs: the limit is max-num-seqs itself, not elsewhere */
    one_cfg(&f, "--max-num-seqs", "48");
    st_notes_run_digest(NULL, 0, s.v, s.n, &f.dg[0][1]);
    build(&f, &ns);
    assert_int_equal(count_kind(&ns, "limit_elsewhere", NULL), 0);
    st_notes_free(&ns);
    /* nothing waits */
    const double none[4] = { 0, 1, 0, 0 };
    s.n = 0;
    gauge_scrapes(&s, 4, kv, run, none, NULL);
    one_cfg(&f, NULL, NULL);
    st_notes_run_digest(NULL, 0, s.v, s.n, &f.dg[0][1]);
    build(&f, &ns);
    assert_int_equal(count_kind(&ns, "limit_elsewhere", NULL), 0);
    st_notes_free(&ns);
}

/* llama-server: deferred requests with every slot busy (llamacpp:requests_processing and
 * requests_deferred are the generic running and waiting). */
static void llamacpp_slots_full(void **state)
{
    (void)state;
    static samples s;
    static fx f;
    const double run[4] = { 4, 4, 4, 3 }, wait[4] = { 2, 5, 7, 3 };
    s.n = 0;
    gauge_scrapes(&s, 4, NULL, run, wait, NULL);
    one_cfg(&f, "-np", "4");
    f.r.spec.engine.kind = ST_ENGINE_LLAMACPP;
    st_notes_run_digest(NULL, 0, s.v, s.n, &f.dg[0][1]);
    st_notes ns;
    build(&f, &ns);
    const st_note *x = find(&ns, "slots_full", "baseline");
    assert_string_equal(x->text, "at 16 req/s every slot was busy while requests were deferred (in 4 of 4 scrapes at "
                                 "16 req/s, 4 processing, up to 7 deferred): requests waited for one of the 4 slots "
                                 "(-np 4), and that wait is part of their TTFT. More slots run more requests at once, "
                                 "each with its share of the context (-c / -np), at the cost of a longer step on the "
                                 "same CPU.");
    assert_near(ev(x, "slots"), 4, 0);
    assert_int_equal(count_kind(&ns, "limit_elsewhere", NULL), 0); /* vLLM's reading does not apply */
    st_notes_free(&ns);
    /* the default is 4 slots (auto) */
    one_cfg(&f, NULL, NULL);
    f.r.spec.engine.kind = ST_ENGINE_LLAMACPP;
    st_notes_run_digest(NULL, 0, s.v, s.n, &f.dg[0][1]);
    build(&f, &ns);
    has_text(find(&ns, "slots_full", "baseline"), "one of the 4 slots (llama-server's default)");
    st_notes_free(&ns);
    /* 8 slots and at most 4 busy: not full */
    one_cfg(&f, "--parallel", "8");
    f.r.spec.engine.kind = ST_ENGINE_LLAMACPP;
    st_notes_run_digest(NULL, 0, s.v, s.n, &f.dg[0][1]);
    build(&f, &ns);
    assert_int_equal(count_kind(&ns, "slots_full", NULL), 0);
    st_notes_free(&ns);
    /* vLLM never gets it */
    one_cfg(&f, "-np", "4");
    st_notes_run_digest(NULL, 0, s.v, s.n, &f.dg[0][1]);
    build(&f, &ns);
    assert_int_equal(count_kind(&ns, "slots_full", NULL), 0);
    st_notes_free(&ns);
}

/* A speculative configuration run on random-id prompts because the spec insisted: the note says
 * why its figures are not evidence; without the key (or without speculation) no such note. */
static void speculation_not_evidence(void **state)
{
    (void)state;
    static fx f;
    st_notes ns;
    one_cfg(&f, "--speculative-config", "{\"method\": \"ngram\", \"num_speculative_tokens\": 3}");
    f.r.spec.engine.kind = ST_ENGINE_VLLM;
    f.r.spec.workload.allow_synthetic_speculation = 1;
    build(&f, &ns);
    const st_note *x = find(&ns, "speculation_not_evidence", "baseline");
    has_text(x, "baseline speculates (vLLM ngram, 3 draft tokens, lookup 5..5) and ran on the synthetic workload's "
                "prompts of random token ids");
    has_text(x, "no evidence for or against it");
    has_text(x, "trace stats LOG --spec ngram:3");
    assert_int_equal(x->sev, ST_NOTE_WARN);
    st_notes_free(&ns);
    one_cfg(&f, "--speculative-config", "{\"method\": \"ngram\", \"num_speculative_tokens\": 3}");
    build(&f, &ns);
    assert_int_equal(count_kind(&ns, "speculation_not_evidence", NULL), 0);
    st_notes_free(&ns);
    one_cfg(&f, "--max-num-seqs", "64");
    f.r.spec.workload.allow_synthetic_speculation = 1;
    build(&f, &ns);
    assert_int_equal(count_kind(&ns, "speculation_not_evidence", NULL), 0);
    st_notes_free(&ns);
}

/* Measured acceptance per run: vLLM's counters over the run's scrapes, llama.cpp's per-response
 * counts from its records. */
static void speculation_measured(void **state)
{
    (void)state;
    static fx f;
    st_notes ns;
    static const st_metrics_sample sm[] = {
        { 0, "spec_drafts", 100 },           { 0, "spec_draft_tokens", 400 },     { 0, "spec_accepted_tokens", 100 },
        { 0, "spec_accepted_pos_00", 60 },   { 0, "spec_accepted_pos_01", 40 },   { 10, "spec_drafts", 300 },
        { 10, "spec_draft_tokens", 1200 },   { 10, "spec_accepted_tokens", 500 }, { 10, "spec_accepted_pos_00", 240 },
        { 10, "spec_accepted_pos_01", 140 },
    };
    one_cfg(&f, "--speculative-config", "{\"method\": \"ngram\", \"num_speculative_tokens\": 4}");
    f.r.spec.engine.kind = ST_ENGINE_VLLM;
    st_notes_run_digest(NULL, 0, sm, sizeof sm / sizeof *sm, &f.dg[0][1]);
    build(&f, &ns);
    const st_note *x = find(&ns, "speculation_measured", "baseline");
    has_text(x, "measured speculative decoding: at 16 req/s 50.0% of 800 draft tokens accepted, mean acceptance "
                "length 3.00 (by position: 90% 50%)");
    assert_int_equal(x->sev, ST_NOTE_INFO);
    st_notes_free(&ns);
    /* llama.cpp: the records' draft_n */
    static st_record rec[2];
    memset(rec, 0, sizeof rec);
    rec[0].status = rec[1].status = ST_REQ_OK;
    rec[0].has_draft = rec[1].has_draft = 1;
    rec[0].srv_draft_n = 30, rec[0].srv_draft_accepted = 3;
    rec[1].srv_draft_n = 10, rec[1].srv_draft_accepted = 1;
    one_cfg(&f, "-md", "draft.gguf");
    f.r.spec.engine.kind = ST_ENGINE_LLAMACPP;
    st_notes_run_digest(rec, 2, NULL, 0, &f.dg[0][0]);
    build(&f, &ns);
    has_text(find(&ns, "speculation_measured", "baseline"),
             "at 12 req/s 10.0% of 40 draft tokens accepted (2 responses' draft_n)");
    st_notes_free(&ns);
    /* nothing drafted: no note */
    one_cfg(&f, NULL, NULL);
    st_notes_run_digest(NULL, 0, NULL, 0, &f.dg[0][1]);
    build(&f, &ns);
    assert_int_equal(count_kind(&ns, "speculation_measured", NULL), 0);
    st_notes_free(&ns);
}

/* Beside the measured acceptance: the spec's expected one (speculation:) and the effect against the
 * same configuration without speculation (its flags but the speculation's). */
static void speculation_expected_and_effect(void **state)
{
    (void)state;
    static fx f;
    static const st_metrics_sample sm[] = {
        { 0, "spec_drafts", 0 },    { 0, "spec_draft_tokens", 0 },    { 0, "spec_accepted_tokens", 0 },
        { 10, "spec_drafts", 100 }, { 10, "spec_draft_tokens", 400 }, { 10, "spec_accepted_tokens", 120 },
    };
    fx_init(&f);
    f.r.spec.engine.kind = ST_ENGINE_VLLM;
    int b = fx_cfg(&f, "baseline");
    fx_flags(&f, b, "--max-num-seqs", "64", NULL, NULL);
    fx_run(&f, b, 12, "pass", 300, 20, 11);
    fx_run(&f, b, 16, "fail", 1800, 60, 12);
    int o = fx_cfg(&f, "other");
    fx_flags(&f, o, "--max-num-seqs", "128", NULL, NULL);
    fx_run(&f, o, 12, "pass", 300, 19, 11);
    int s = fx_cfg(&f, "ngram4");
    fx_flags(&f, s, "--max-num-seqs", "64", "--speculative-config",
             "{\"method\": \"ngram\", \"num_speculative_tokens\": 4}");
    fx_run(&f, s, 12, "pass", 300, 10, 11.5);
    fx_run(&f, s, 16, "pass", 300, 12, 15.5);
    f.c[s].digest = f.dg[s];
    st_notes_run_digest(NULL, 0, sm, sizeof sm / sizeof *sm, &f.dg[s][0]);
    f.r.spec.speculation.given = 1;
    f.r.spec.speculation.acceptance = 0.6;
    st_notes ns;
    build(&f, &ns);
    const st_note *x = find(&ns, "speculation_measured", "ngram4");
    has_text(x, "at 12 req/s 30.0% of 400 draft tokens accepted, mean acceptance length 2.20.");
    /* 0.6 + 0.36 + 0.216 + 0.1296 = 1.3056 accepted a draft of 4 */
    has_text(x, "Expected from the spec's speculation.acceptance (the offline estimate, e.g. `servetune trace stats "
                "LOG --spec ngram:4`): 32.6% of draft tokens accepted, mean acceptance length 2.31.");
    assert_near(ev(x, "expected_accepted_per_draft"), 1.3056, 1e-9);
    has_text(x, "Against baseline (the same configuration without speculation): p95 TPOT at 12 req/s 20.00 ms "
                "without, 10.00 ms with (-50%); capacity 11 req/s without, 15.5 with (+41%).");
    assert_near(ev(x, "tpot_p95_ms_with"), 10, 1e-12);
    assert_near(ev(x, "capacity_rps_without"), 11, 1e-12);
    st_notes_free(&ns);
    /* no expected acceptance given, and no configuration without speculation to compare with */
    f.r.spec.speculation.given = 0;
    fx_flags(&f, b, "--max-num-seqs", "32", NULL, NULL);
    build(&f, &ns);
    x = find(&ns, "speculation_measured", "ngram4");
    has_text(x, "give it as speculation.acceptance in the spec");
    assert_null(strstr(x->text, "Expected from"));
    assert_null(strstr(x->text, "Against"));
    st_notes_free(&ns);
}

/* The server's own timings against the client's, at the lowest and highest rates. */
static void server_timings_against_client(void **state)
{
    (void)state;
    static fx f;
    one_cfg(&f, NULL, NULL);
    st_notes ns;
    build(&f, &ns);
    assert_int_equal(count_kind(&ns, "server_timings", NULL), 0); /* none reported */
    st_notes_free(&ns);
    one_cfg(&f, NULL, NULL);
    fx_run(&f, 0, 20, "fail", 2500, 40, 12);
    for (int j = 0; j < 3; j++)
        f.sv[0][j] = (st_rep_server){
            .srv_n = 200, .ttft_gap_p50_ms = 1.5 + 100 * j, .ttft_gap_p99_ms = 4 + 300 * j, .tpot_gap_p50_ms = 0.02
        };
    fx_finish(&f);
    assert_int_equal(st_notes_build(&f.r, &ns), 0);
    const st_note *x = find(&ns, "server_timings", "baseline");
    assert_string_equal(x->text, "the engine reported its own prompt and generation time for each request: the "
                                 "client's TTFT exceeded the server's prompt time by 1.50 ms at p50 (p99 4.00 ms) at "
                                 "12 req/s and by 202 ms (p99 604 ms) at 20 req/s; TPOT exceeded the server's time "
                                 "per step by 0.02 ms at p50. With no queue the TTFT difference is the HTTP path "
                                 "and the client; under load it also holds the wait for a free slot (per run: the "
                                 "evidence table).");
    assert_int_equal(x->n_rates, 2);
    assert_near(ev(x, "high_rate_ttft_minus_prompt_p99_ms"), 604, 0);
    st_notes_free(&ns);
}

static void prefix_digest(samples *s, double hits, double queries)
{
    s->n = 0;
    put(s, 0, "prefix_hits", 1000);
    put(s, 0, "prefix_queries", 5000);
    put(s, 3, "prefix_hits", 1000 + hits);
    put(s, 3, "prefix_queries", 5000 + queries);
}

static void prefix_cache_hit_rate(void **state)
{
    (void)state;
    static samples s;
    static fx f;
    st_notes ns;
    /* expected: floor(2000 / 16) * 16 / 3000 = 0.667 (with a 24-token block: 1992 / 3000) */
    prefix_digest(&s, 30000, 100000); /* 0.30: far below */
    one_cfg(&f, NULL, NULL);
    st_notes_run_digest(NULL, 0, s.v, s.n, &f.dg[0][0]);
    build(&f, &ns);
    const st_note *x = find(&ns, "prefix_cache_hit_rate", "baseline");
    has_text(x, "at 12 req/s the prefix-cache hit rate was 0.30 (at 12 req/s) against about 0.67 expected from the "
                "shared prefix (2,000 of 3,000 input tokens): cached prefix blocks were evicted");
    assert_near(ev(x, "expected"), 2000.0 / 3000, 1e-12);
    st_notes_free(&ns);
    /* close to the expectation: nothing */
    prefix_digest(&s, 65000, 100000);
    one_cfg(&f, NULL, NULL);
    st_notes_run_digest(NULL, 0, s.v, s.n, &f.dg[0][0]);
    build(&f, &ns);
    assert_int_equal(count_kind(&ns, "prefix_cache_hit_rate", NULL), 0);
    st_notes_free(&ns);
    /* caching off and no hits: nothing; caching off with hits: the flag did not take effect */
    prefix_digest(&s, 0, 100000);
    one_cfg(&f, "--no-enable-prefix-caching", NULL);
    st_notes_run_digest(NULL, 0, s.v, s.n, &f.dg[0][0]);
    build(&f, &ns);
    assert_int_equal(count_kind(&ns, "prefix_cache_hit_rate", NULL), 0);
    st_notes_free(&ns);
    prefix_digest(&s, 50000, 100000);
    one_cfg(&f, "--no-enable-prefix-caching", NULL);
    st_notes_run_digest(NULL, 0, s.v, s.n, &f.dg[0][0]);
    build(&f, &ns);
    has_text(find(&ns, "prefix_cache_hit_rate", "baseline"), "with prefix caching off");
    st_notes_free(&ns);
}

/* Records of a run: n requests, one per 100 ms, TTFT ttft_ms from send (send lag 1 ms), out
 * tokens delivered of `asked`. */
static st_record *records(uint32_t n, double ttft_ms, uint32_t asked, uint32_t got, uint32_t n_short)
{
    st_record *r = calloc(n, sizeof *r);
    for (uint32_t i = 0; i < n; i++) {
        st_record_init(&r[i], i);
        r[i].scheduled = (st_ns)(i + 1) * 100 * ST_NS_PER_MS;
        r[i].sent = r[i].scheduled + ST_NS_PER_MS;
        r[i].first_token = r[i].sent + (st_ns)(ttft_ms * (0.8 + 0.4 * i / n) * ST_NS_PER_MS);
        r[i].end = r[i].first_token + 500 * ST_NS_PER_MS;
        r[i].status = ST_REQ_OK;
        r[i].output_requested = asked;
        r[i].output_tokens = i < n_short ? got : asked;
        r[i].usage_reported = 1;
    }
    return r;
}

/* A /metrics body with the vLLM TTFT histogram: `n` observations all at `at_s`. */
static void ttft_body(char *out, size_t cap, double n, double at_s)
{
    static const double le[] = { 0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5 };
    size_t off = (size_t)snprintf(out, cap, "vllm:num_requests_running{engine=\"0\"} 3\n");
    for (size_t i = 0; i < sizeof le / sizeof *le; i++)
        off += (size_t)snprintf(out + off, cap - off, "vllm:time_to_first_token_seconds_bucket{le=\"%g\"} %g\n", le[i],
                                le[i] >= at_s ? n : 0);
    snprintf(out + off, cap - off,
             "vllm:time_to_first_token_seconds_bucket{le=\"+Inf\"} %g\nvllm:time_to_first_token_seconds_count %g\n"
             "vllm:time_to_first_token_seconds_sum %g\n",
             n, n, n * at_s);
}

/* Two scrapes through the scraper (engine/metrics_scrape): before the run and after it. */
static void scrape_pair(samples *s, double n_before, double n_after, double at_s, double t1)
{
    char body[8192];
    st_metrics_sample got[ST_METRICS_SCRAPE_MAX];
    s->n = 0;
    ttft_body(body, sizeof body, n_before, at_s);
    int k = st_metrics_scrape(ST_DIALECT_VLLM, body, strlen(body), got, ST_METRICS_SCRAPE_MAX);
    assert_true(k > 30); /* running + 14 finite buckets x 2 + count + sum */
    for (int i = 0; i < k; i++)
        put(s, 0, got[i].name, got[i].value);
    ttft_body(body, sizeof body, n_after, at_s);
    k = st_metrics_scrape(ST_DIALECT_VLLM, body, strlen(body), got, ST_METRICS_SCRAPE_MAX);
    for (int i = 0; i < k; i++)
        put(s, t1, got[i].name, got[i].value);
}

static void scrape_interval(void **state)
{
    (void)state;
    assert_int_equal(st_metrics_scrape_interval_ms(1), 1000);
    assert_int_equal(st_metrics_scrape_interval_ms(0), 1000);
    assert_int_equal(st_metrics_scrape_interval_ms(5), 200);
    assert_int_equal(st_metrics_scrape_interval_ms(20), 100); /* at least 100 ms of wall time */
    assert_int_equal(st_metrics_scrape_interval_ms(NAN), 1000);
}

static void engine_ttft_against_client(void **state)
{
    (void)state;
    static samples s;
    static fx f;
    st_notes ns;
    /* the engine saw 50 first tokens between 0.04 and 0.06 s; the client measured 40..60 ms */
    scrape_pair(&s, 10, 60, 0.06, 100);
    st_record *r = records(50, 50, 100, 100, 0);
    one_cfg(&f, NULL, NULL);
    st_notes_run_digest(r, 50, s.v, s.n, &f.dg[0][0]);
    const st_notes_run *d = &f.dg[0][0];
    assert_true(d->has_ttft_hist);
    assert_near(d->ttft_delta.total, 50, 0);
    assert_int_equal(d->client_n, 50);
    assert_true(d->engine_ttft_p95_ms > 40 && d->engine_ttft_p95_ms <= 60);
    assert_true(d->cdf_gap < 0.25);
    build(&f, &ns);
    assert_int_equal(count_kind(&ns, "engine_ttft_disagrees", NULL), 0);
    assert_int_equal(count_kind(&ns, "token_count_mismatch", NULL), 0);
    st_notes_free(&ns);
    st_records_free(r, 50);

    /* the client measured about 400 ms: far above what the engine saw */
    r = records(50, 400, 100, 100, 0);
    one_cfg(&f, NULL, NULL);
    st_notes_run_digest(r, 50, s.v, s.n, &f.dg[0][0]);
    build(&f, &ns);
    const st_note *x = find(&ns, "engine_ttft_disagrees", "baseline");
    has_text(x, "at 12 req/s the engine's own TTFT histogram disagrees with the client's measurement");
    has_text(x, "The client's is higher");
    assert_true(ev(x, "client_ttft_p95_ms") > 400);
    assert_true(ev(x, "engine_ttft_p95_ms") <= 60);
    st_notes_free(&ns);
    st_records_free(r, 50);

    /* the engine's is higher (its histogram at 2 s, the client at 50 ms) */
    scrape_pair(&s, 0, 50, 2.0, 100);
    r = records(50, 50, 100, 100, 0);
    one_cfg(&f, NULL, NULL);
    st_notes_run_digest(r, 50, s.v, s.n, &f.dg[0][0]);
    build(&f, &ns);
    has_text(find(&ns, "engine_ttft_disagrees", "baseline"), "The engine's is higher");
    st_notes_free(&ns);
    st_records_free(r, 50);
}

static void token_counts_and_failures(void **state)
{
    (void)state;
    static fx f;
    st_notes ns;
    st_record *r = records(40, 50, 100, 80, 5); /* 5 of 40 delivered 80 of 100 */
    st_record_set_error(&r[10], ST_REQ_TIMEOUT, "no completion within 60 s", 25);
    st_record_set_error(&r[11], ST_REQ_TIMEOUT, "no completion within 60 s", 25);
    st_record_set_error(&r[12], ST_REQ_HTTP_STATUS, "overloaded\nplease retry", 24);
    r[12].http_status = 503;
    st_record_set_error(&r[13], ST_REQ_ABORTED, "early stop", 10); /* not a failure of its own */
    r[14].warmup = 1;
    st_record_set_error(&r[14], ST_REQ_TIMEOUT, "warm-up", 7); /* warm-up: not counted */
    one_cfg(&f, NULL, NULL);
    st_notes_run_digest(r, 40, NULL, 0, &f.dg[0][1]);
    build(&f, &ns);
    const st_note *x = find(&ns, "requests_failed", "baseline");
    assert_string_equal(x->text, "at 16 req/s 3 of 200 requests failed: 1 http_status (HTTP 503: overloaded please "
                                 "retry); 2 timeout (no completion within 60 s).");
    assert_near(ev(x, "timeout"), 2, 0);
    x = find(&ns, "token_count_mismatch", "baseline");
    has_text(x, "at 16 req/s 5 of 35 completed requests (5 fewer, 0 more), 80 tokens on average against 100 asked "
                "(counts from the server's usage)");
    st_notes_free(&ns);
    st_records_free(r, 40);
}

static void environment_from_facts(void **state)
{
    (void)state;
    static fx f;
    fx_init(&f);
    int b = fx_cfg(&f, "baseline");
    fx_run(&f, b, 12, "pass", 300, 20, 11);
    f.rows[0] = (st_config_row){ .name = (char *)"baseline",
                                 .facts = (char *)"{\"engine_version\":\"0.11.0\",\"gpu\":\"NVIDIA H100 80GB HBM3\","
                                                  "\"driver_version\":\"550.54.15\"}" };
    f.r.rows = f.rows;
    f.r.n_rows = 1;
    st_notes ns;
    build(&f, &ns);
    const st_note *x = find(&ns, "environment", NULL);
    has_text(x, "GPU NVIDIA H100 80GB HBM3 (reported by the engine); driver 550.54.15; emulator engine version "
                "0.11.0; servetune 0.1.0.");
    st_notes_free(&ns);
}

/* Every renderer shows the one list: a note's text appears in markdown, JSON and HTML. */
static void renderers_share_the_list(void **state)
{
    (void)state;
    static fx f;
    fx_init(&f);
    int b = fx_cfg(&f, "baseline");
    fx_run(&f, b, 12, "pass", 300, 20, 11);
    fx_run(&f, b, 16, "fail", 1800, 30, 12);
    int n = fx_cfg(&f, "slow<b>");
    fx_run(&f, n, 12, "fail", 3043, 61, 2);
    f.r.order = (int[]){ 0, 1 };
    fx_finish(&f);
    assert_int_equal(st_notes_build(&f.r, &f.r.notes), 0);
    const st_note *x = find(&f.r.notes, "none_passed", "slow<b>");
    st_buf md, js, ht;
    st_buf_init(&md, 1 << 20);
    st_buf_init(&js, 1 << 22);
    st_buf_init(&ht, 1 << 24);
    assert_int_equal(st_report_markdown(&f.r, &md), 0);
    assert_int_equal(st_report_json(&f.r, &js), 0);
    char err[256];
    assert_int_equal(st_report_html(&f.r, NULL, NULL, &ht, err, sizeof err), 0);
    assert_non_null(strstr(md.data, x->text));
    assert_non_null(strstr(md.data, "- **slow&lt;b>** (caution): met the SLO at no tested rate"));
    assert_non_null(strstr(ht.data, x->text));
    assert_non_null(strstr(ht.data, "<b>slow&lt;b&gt;:</b> met the SLO at no tested rate"));
    json_t *j = json_loads(js.data, 0, NULL);
    assert_non_null(j);
    json_t *a = json_object_get(j, "notes");
    assert_int_equal(json_array_size(a), (size_t)f.r.notes.n);
    int found = 0;
    for (size_t i = 0; i < json_array_size(a); i++) {
        json_t *o = json_array_get(a, i);
        if (strcmp(json_string_value(json_object_get(o, "kind")), "none_passed"))
            continue;
        found = 1;
        assert_string_equal(json_string_value(json_object_get(o, "severity")), "warn");
        assert_string_equal(json_string_value(json_object_get(o, "config")), "slow<b>");
        assert_string_equal(json_string_value(json_object_get(o, "text")), x->text);
        assert_near(json_number_value(json_array_get(json_object_get(o, "rates"), 0)), 12, 0);
        assert_near(json_number_value(json_object_get(json_object_get(o, "evidence"), "ttft_p95_ms")), 3043, 0);
    }
    assert_true(found);
    json_decref(j);
    st_buf_free(&md);
    st_buf_free(&js);
    st_buf_free(&ht);
    st_notes_free(&f.r.notes);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(none_passed_names_the_term),
        cmocka_unit_test(none_passed_below_the_decode_floor),
        cmocka_unit_test(warmup_non_monotonic_and_highest),
        cmocka_unit_test(burst_not_sustained),
        cmocka_unit_test(failed_start_not_run_and_run_events),
        cmocka_unit_test(decode_anomaly_only_when_flat_and_far),
        cmocka_unit_test(combined_gain_attribution),
        cmocka_unit_test(digest_of_gauges),
        cmocka_unit_test(kv_cache_limit),
        cmocka_unit_test(limit_elsewhere),
        cmocka_unit_test(llamacpp_slots_full),
        cmocka_unit_test(server_timings_against_client),
        cmocka_unit_test(prefix_cache_hit_rate),
        cmocka_unit_test(scrape_interval),
        cmocka_unit_test(engine_ttft_against_client),
        cmocka_unit_test(token_counts_and_failures),
        cmocka_unit_test(environment_from_facts),
        cmocka_unit_test(renderers_share_the_list),
        cmocka_unit_test(speculation_not_evidence),
        cmocka_unit_test(speculation_measured),
        cmocka_unit_test(speculation_expected_and_effect),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
