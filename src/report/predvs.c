/* Predicted vs measured (predvs.h). */
#include "report/predvs.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/format.h"
#include "report/report.h"

int st_predvs_summarise(st_store *pred, const char *calibration, st_buf *out, char *err, size_t errlen)
{
    st_report r;
    if (st_report_load(pred, &r, err, errlen) < 0)
        return -1;
    json_t *root = json_object();
    json_object_set_new(root, "calibration", calibration ? json_string(calibration) : json_null());
    json_t *cs = json_array();
    for (int i = 0; i < r.n_cfg; i++) {
        const st_rep_cfg *c = &r.cfg[i];
        json_t *o = json_object();
        json_object_set_new(o, "name", json_string(c->name));
        json_object_set_new(o, "status", json_string(st_rep_status_name(c->status)));
        int ok = c->cap && c->cap->has_pass;
        json_object_set_new(o, "pass_rate", ok ? st_jnum_or_null(c->cap->pass_rate) : json_null());
        json_object_set_new(o, "capacity_rps", ok ? st_jnum_or_null(c->cap->capacity_rps) : json_null());
        json_t *rs = json_array();
        for (int k = 0; k < c->n_runs && k < ST_PREDVS_RATES_MAX; k++) {
            const st_run_row *w = &c->runs[k];
            json_t *ro = json_object();
            json_object_set_new(ro, "rate", isinf(w->rate) ? json_string("inf") : json_real(w->rate));
            json_object_set_new(ro, "verdict", json_string(w->verdict ? w->verdict : ""));
            /* terms 0 and 1 are always p95 TTFT and p95 TPOT (a sustained run's: over its window) */
            json_object_set_new(ro, "ttft_p95_ms", st_jnum_or_null(st_run_row_term_ms(w, 0)));
            json_object_set_new(ro, "tpot_p95_ms", st_jnum_or_null(st_run_row_term_ms(w, 1)));
            json_object_set_new(ro, "output_tps", st_jnum_or_null(w->output_tps));
            json_array_append_new(rs, ro);
        }
        json_object_set_new(o, "rates", rs);
        json_array_append_new(cs, o);
    }
    json_object_set_new(root, "configs", cs);
    char *txt = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(10));
    json_decref(root);
    st_report_free(&r);
    if (!txt) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    st_buf_puts(out, txt);
    free(txt);
    return st_buf_error(out) ? -1 : 0;
}

static double jd(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    if (json_is_number(v))
        return json_number_value(v);
    if (json_is_string(v) && !strcmp(json_string_value(v), "inf"))
        return INFINITY;
    return NAN;
}

int st_predvs_parse(const char *text, st_predvs *p)
{
    memset(p, 0, sizeof *p);
    json_error_t je;
    json_t *root = json_loads(text ? text : "", 0, &je);
    json_t *cs = json_object_get(root, "configs");
    if (!json_is_array(cs)) {
        json_decref(root);
        return -1;
    }
    const char *cal = json_string_value(json_object_get(root, "calibration"));
    snprintf(p->calibration, sizeof p->calibration, "%s", cal ? cal : "");
    size_t n = json_array_size(cs);
    p->cfg = calloc(n ? n : 1, sizeof *p->cfg);
    if (!p->cfg) {
        json_decref(root);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_array_get(cs, i);
        st_predvs_cfg *c = &p->cfg[p->n_cfg];
        const char *name = json_string_value(json_object_get(o, "name"));
        const char *st = json_string_value(json_object_get(o, "status"));
        if (!name)
            continue;
        snprintf(c->name, sizeof c->name, "%s", name);
        snprintf(c->status, sizeof c->status, "%s", st ? st : "");
        c->pass_rate = jd(o, "pass_rate");
        c->capacity_rps = jd(o, "capacity_rps");
        json_t *rs = json_object_get(o, "rates");
        for (size_t k = 0; k < json_array_size(rs) && c->n_rates < ST_PREDVS_RATES_MAX; k++) {
            json_t *ro = json_array_get(rs, k);
            st_predvs_rate *pr = &c->rates[c->n_rates++];
            pr->rate = jd(ro, "rate");
            pr->ttft_p95_ms = jd(ro, "ttft_p95_ms");
            pr->tpot_p95_ms = jd(ro, "tpot_p95_ms");
            pr->output_tps = jd(ro, "output_tps");
            const char *v = json_string_value(json_object_get(ro, "verdict"));
            snprintf(pr->verdict, sizeof pr->verdict, "%s", v ? v : "");
        }
        p->n_cfg++;
    }
    json_decref(root);
    p->present = 1;
    return 0;
}

void st_predvs_free(st_predvs *p)
{
    free(p->cfg);
    memset(p, 0, sizeof *p);
}

const st_predvs_cfg *st_predvs_find(const st_predvs *p, const char *name)
{
    for (int i = 0; p && i < p->n_cfg; i++)
        if (!strcmp(p->cfg[i].name, name))
            return &p->cfg[i];
    return NULL;
}

const st_predvs_rate *st_predvs_at(const st_predvs_cfg *c, double rate)
{
    for (int i = 0; c && i < c->n_rates; i++) {
        double a = c->rates[i].rate;
        if ((isinf(a) && isinf(rate)) || (isfinite(a) && fabs(a - rate) <= 1e-9 * fmax(1, fabs(rate))))
            return &c->rates[i];
    }
    return NULL;
}

/* ---- rendering --------------------------------------------------------------------------- */

/* The measured run at the measured capacity's rate. */
static const st_run_row *measured_at_capacity(const st_rep_cfg *c)
{
    if (!c->cap || !c->cap->has_pass)
        return NULL;
    for (int k = 0; k < c->n_runs; k++)
        if (c->runs[k].rate == c->cap->pass_rate)
            return &c->runs[k];
    return NULL;
}

static void cell_num(char *out, double v, const char *unit)
{
    if (isfinite(v))
        snprintf(out, 32, "%.3g%s", v, unit);
    else
        snprintf(out, 32, "-");
}

static void cell_err(char *out, double pred, double meas)
{
    if (isfinite(pred) && isfinite(meas) && meas > 0)
        snprintf(out, 32, "%+.0f %%", 100 * (pred / meas - 1));
    else
        snprintf(out, 32, "-");
}

int st_predvs_cells(const st_report *r, int i, char cells[9][32])
{
    const st_rep_cfg *c = &r->cfg[i];
    const st_predvs_cfg *p = st_predvs_find(&r->predvs, c->name);
    if (!r->predvs.present || !p)
        return -1;
    double mcap = c->cap && c->cap->has_pass ? c->cap->capacity_rps : NAN;
    double pcap = p->capacity_rps;
    cell_num(cells[0], pcap, " req/s");
    cell_num(cells[1], mcap, " req/s");
    cell_err(cells[2], pcap, mcap);
    const st_run_row *w = measured_at_capacity(c);
    const st_predvs_rate *pr = w ? st_predvs_at(p, w->rate) : NULL;
    double pt = pr ? pr->ttft_p95_ms : NAN, mt = w ? st_run_row_term_ms(w, 0) : NAN;
    double pp = pr ? pr->tpot_p95_ms : NAN, mp = w ? st_run_row_term_ms(w, 1) : NAN;
    cell_num(cells[3], pt, " ms");
    cell_num(cells[4], mt, " ms");
    cell_err(cells[5], pt, mt);
    cell_num(cells[6], pp, " ms");
    cell_num(cells[7], mp, " ms");
    cell_err(cells[8], pp, mp);
    return 0;
}

void st_predvs_markdown(const st_report *r, st_buf *b)
{
    if (r->audit.prediction || !r->predvs.present)
        return;
    st_buf_puts(b, "## Predicted vs measured\n\n"
                   "Before measuring, the audit ran `servetune predict` on the same spec (the engine model, in "
                   "virtual time; details in `prediction/`");
    if (r->predvs.calibration[0]) {
        st_buf_puts(b, ", calibrated with ");
        st_md_text(b, r->predvs.calibration);
    }
    st_buf_puts(b, "). Capacity is compared as each side found it; TTFT and TPOT (p95) at the measured capacity's "
                   "rate, on both sides. Error = predicted / measured - 1.\n\n"
                   "| configuration | capacity predicted | measured | error | TTFT p95 predicted | measured | error | "
                   "TPOT p95 predicted | measured | error |\n|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < r->n_cfg; i++) {
        char cells[9][32];
        if (st_predvs_cells(r, i, cells) < 0)
            continue;
        st_buf_puts(b, "| ");
        st_md_text(b, r->cfg[i].name);
        for (int k = 0; k < 9; k++)
            st_buf_printf(b, " | %s", cells[k]);
        st_buf_puts(b, " |\n");
    }
    st_buf_puts(b, "\n");
}

json_t *st_predvs_json(const st_report *r)
{
    if (r->audit.prediction || !r->predvs.present)
        return json_null();
    json_t *o = json_object();
    json_object_set_new(o, "calibration", r->predvs.calibration[0] ? json_string(r->predvs.calibration) : json_null());
    json_t *cs = json_array();
    for (int i = 0; i < r->n_cfg; i++) {
        const st_rep_cfg *c = &r->cfg[i];
        const st_predvs_cfg *p = st_predvs_find(&r->predvs, c->name);
        if (!p)
            continue;
        const st_run_row *w = measured_at_capacity(c);
        const st_predvs_rate *pr = w ? st_predvs_at(p, w->rate) : NULL;
        json_t *e = json_object();
        json_object_set_new(e, "name", json_string(c->name));
        double mcap = c->cap && c->cap->has_pass ? c->cap->capacity_rps : NAN;
        json_object_set_new(e, "capacity_rps_predicted", st_jnum_or_null(p->capacity_rps));
        json_object_set_new(e, "capacity_rps_measured", st_jnum_or_null(mcap));
        json_object_set_new(e, "at_rate", w ? (isinf(w->rate) ? json_string("inf") : json_real(w->rate)) : json_null());
        json_object_set_new(e, "ttft_p95_ms_predicted", st_jnum_or_null(pr ? pr->ttft_p95_ms : NAN));
        json_object_set_new(e, "ttft_p95_ms_measured", st_jnum_or_null(w ? st_run_row_term_ms(w, 0) : NAN));
        json_object_set_new(e, "tpot_p95_ms_predicted", st_jnum_or_null(pr ? pr->tpot_p95_ms : NAN));
        json_object_set_new(e, "tpot_p95_ms_measured", st_jnum_or_null(w ? st_run_row_term_ms(w, 1) : NAN));
        json_array_append_new(cs, e);
    }
    json_object_set_new(o, "configurations", cs);
    return o;
}
