/* "Quality vs baseline" in every report (report/quality.h). */
#include "report/quality.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/csv.h"
#include "report/format.h"
#include "report/report.h"

int st_rep_quality_load(st_store *s, st_report *r)
{
    st_rep_quality *q = &r->quality;
    memset(q, 0, sizeof *q);
    q->q = calloc((size_t)(r->n_cfg ? r->n_cfg : 1), sizeof *q->q);
    q->has = calloc((size_t)(r->n_cfg ? r->n_cfg : 1), 1);
    if (!q->q || !q->has)
        return -1;
    for (int i = 0; i < r->n_cfg; i++) {
        char key[ST_QUALITY_KEY_MAX];
        st_quality_key(r->spec.configs[i].name, key, sizeof key);
        char *v = NULL;
        if (st_store_meta_get(s, key, &v) == 1 && v && st_quality_from_json(v, strlen(v), &q->q[i]) == 0) {
            q->has[i] = 1;
            q->present = 1;
        }
        free(v);
    }
    return 0;
}

void st_rep_quality_free(st_rep_quality *q)
{
    free(q->q);
    free(q->has);
    memset(q, 0, sizeof *q);
}

static const st_quality_result *res(const st_report *r, int i)
{
    return r->quality.has && i >= 0 && i < r->n_cfg && r->quality.has[i] ? &r->quality.q[i] : NULL;
}

int st_rep_quality_fails(const st_report *r, int i)
{
    const st_quality_result *q = res(r, i);
    return q && q->status == ST_Q_MEASURED && !q->pass;
}

static const char *prompts_words(const st_quality_result *q)
{
    return q->synthetic ? "synthetic prompts of random token ids" : "prompts of the workload's trace";
}

/* What was measured of the pick's answers, in one sentence. */
static void pick_measured(const st_quality_result *q, st_buf *b)
{
    const st_drift_summary *d = &q->d;
    st_buf_printf(b, " Its answers, measured against the baseline's on %u %s (greedy, %s%s): ", q->prompts,
                  prompts_words(q), q->mode, q->emulated ? ", on the emulator's pseudo-model: not evidence" : "");
    if (d->answers)
        st_buf_printf(b, "%u of %u identical", d->exact, d->answers);
    if (!isnan(d->kld_mean))
        st_buf_printf(b, "%smean KL divergence %.3g nats (p99 %.3g), same top-1 token %.1f %% of %llu positions",
                      d->answers ? ", " : "", d->kld_mean, d->kld_p99, 100 * d->same_top1,
                      (unsigned long long)d->positions);
    st_buf_puts(b, ".");
}

int st_rep_quality_headline(const st_report *r, int i, st_buf *b)
{
    const st_quality_result *q = res(r, i);
    int said = 0;
    if (q && i > 0 && q->status != ST_Q_MEASURED)
        st_buf_printf(b, " Its answers were not compared with the baseline's (%s).", q->note);
    if (q && i > 0 && q->status == ST_Q_MEASURED) {
        said = 1;
        pick_measured(q, b);
    }
    /* the configurations a quality limit kept from being the pick */
    int n_failed = 0;
    for (int k = 0; k < r->n_cfg; k++)
        n_failed += st_rep_quality_fails(r, k);
    if (n_failed) {
        st_buf_puts(b, " Left out for failing a quality limit:");
        int first = 1;
        for (int k = 0; k < r->n_cfg; k++)
            if (st_rep_quality_fails(r, k)) {
                st_buf_printf(b, "%s %s (%s)", first ? "" : ";", r->cfg[k].name, r->quality.q[k].note);
                first = 0;
            }
        st_buf_puts(b, ".");
    }
    return said;
}

static void fmt_pct(char *o, size_t n, double v)
{
    if (isnan(v))
        snprintf(o, n, "-");
    else
        snprintf(o, n, "%.1f %%", 100 * v);
}

static void fmt_g(char *o, size_t n, double v)
{
    if (isnan(v))
        snprintf(o, n, "-");
    else
        snprintf(o, n, "%.3g", v);
}

const char *const st_rep_quality_head[ST_REP_QUALITY_COLS] = {
    "configuration",          "measured",   "mean KLD (nats)", "p99 KLD", "same top-1", "exact match",
    "first divergence (p50)", "engine-min", "verdict"
};

int st_rep_quality_cells(const st_report *r, int i, char cells[ST_REP_QUALITY_COLS - 1][ST_REP_QUALITY_CELL])
{
    const st_quality_result *q = res(r, i);
    if (!q)
        return -1;
    const st_drift_summary *d = &q->d;
    if (q->status == ST_Q_MEASURED)
        snprintf(cells[0], ST_REP_QUALITY_CELL, "%s, %u prompts%s", q->mode, q->prompts,
                 q->emulated ? " (emulator: not evidence)" : "");
    else
        snprintf(cells[0], ST_REP_QUALITY_CELL, "%s", q->status == ST_Q_REFERENCE ? "reference" : "not measured");
    fmt_g(cells[1], ST_REP_QUALITY_CELL, d->kld_mean);
    fmt_g(cells[2], ST_REP_QUALITY_CELL, d->kld_p99);
    fmt_pct(cells[3], ST_REP_QUALITY_CELL, d->same_top1);
    if (d->answers)
        snprintf(cells[4], ST_REP_QUALITY_CELL, "%u / %u", d->exact, d->answers);
    else
        snprintf(cells[4], ST_REP_QUALITY_CELL, "-");
    if (d->diverged)
        snprintf(cells[5], ST_REP_QUALITY_CELL, "token %.0f", d->div_p50);
    else
        snprintf(cells[5], ST_REP_QUALITY_CELL, "-");
    fmt_g(cells[6], ST_REP_QUALITY_CELL, isnan(q->engine_s) ? NAN : q->engine_s / 60);
    const char *v = q->status == ST_Q_REFERENCE  ? "the reference"
                    : q->status != ST_Q_MEASURED ? q->note
                    : q->pass                    ? "within the limits"
                                                 : q->note;
    snprintf(cells[7], ST_REP_QUALITY_CELL, "%s%.150s", q->status == ST_Q_MEASURED && !q->pass ? "FAILS: " : "", v);
    return 0;
}

void st_rep_quality_note(const st_report *r, st_buf *b)
{
    const st_quality_result *any = NULL;
    for (int i = 0; i < r->n_cfg && !any; i++)
        any = res(r, i);
    if (!any)
        return;
    st_buf_printf(b,
                  "Each configuration answered the same %u %s greedily (temperature 0), with the top %u "
                  "log-probabilities of every token; the baseline's answers are the reference. Teacher-forced "
                  "(where the engine scores a given text: vLLM's prompt_logprobs), the candidate scored the "
                  "baseline's answers, so every position is compared; free-running (llama.cpp, other engines), "
                  "positions are compared up to the first token where the answers differ, and exact match counts "
                  "whole answers. KL divergence is computed over the listed tokens plus one bucket for the rest: a "
                  "lower bound of the full-vocabulary figure. What the figures can say: how far each configuration "
                  "moved the model's next-token distributions and its answers on these prompts. What they cannot "
                  "say: whether any answer is right (nothing is graded), what happens on other prompts, longer "
                  "answers or sampling above temperature 0; near the baseline a small KL divergence can still "
                  "change answers, which the exact-match column counts.",
                  any->prompts, prompts_words(any), any->top_k);
    if (any->emulated)
        st_buf_puts(b, " On the emulator the log-probabilities come from a pseudo-model whose weight format is a "
                       "seeded perturbation: they test the plumbing and are not evidence of any model's quality.");
}

void st_rep_quality_markdown(const st_report *r, st_buf *b)
{
    if (!r->quality.present)
        return;
    st_buf_puts(b, "## Quality vs baseline\n\n");
    st_buf note;
    st_buf_init(&note, 1 << 14);
    st_rep_quality_note(r, &note);
    st_md_text(b, note.data ? note.data : "");
    st_buf_free(&note);
    st_buf_puts(b, "\n\n| Config |");
    for (int k = 1; k < ST_REP_QUALITY_COLS; k++)
        st_buf_printf(b, " %s |", st_rep_quality_head[k]);
    st_buf_puts(b, "\n|---|---|---:|---:|---:|---:|---:|---:|---|\n");
    for (int i = 0; i < r->n_cfg; i++) {
        char cells[ST_REP_QUALITY_COLS - 1][ST_REP_QUALITY_CELL];
        if (st_rep_quality_cells(r, i, cells) < 0)
            continue;
        st_buf_puts(b, "| ");
        st_md_text(b, r->cfg[i].name);
        for (int k = 0; k < ST_REP_QUALITY_COLS - 1; k++) {
            st_buf_puts(b, " | ");
            st_md_text(b, cells[k]);
        }
        st_buf_puts(b, " |\n");
    }
    st_buf_puts(b, "\n");
}

json_t *st_rep_quality_json(const st_report *r)
{
    if (!r->quality.present)
        return json_null();
    json_t *o = json_object(), *a = json_array();
    st_buf note;
    st_buf_init(&note, 1 << 14);
    st_rep_quality_note(r, &note);
    json_object_set_new(o, "note", json_string(note.data ? note.data : ""));
    st_buf_free(&note);
    for (int i = 0; i < r->n_cfg; i++) {
        const st_quality_result *q = res(r, i);
        if (!q)
            continue;
        const st_drift_summary *d = &q->d;
        json_t *c = json_object();
        json_object_set_new(c, "name", json_string(r->cfg[i].name));
        json_object_set_new(c, "status", json_string(st_qstatus_name(q->status)));
        json_object_set_new(c, "mode", json_string(q->mode));
        json_object_set_new(c, "prompts", json_integer(q->prompts));
        json_object_set_new(c, "synthetic_prompts", json_boolean(q->synthetic));
        json_object_set_new(c, "emulated", json_boolean(q->emulated));
        json_object_set_new(c, "top_k", json_integer(q->top_k));
        json_object_set_new(c, "engine_minutes", st_jnum_or_null(q->engine_s / 60));
        json_object_set_new(c, "positions", json_integer((json_int_t)d->positions));
        json_object_set_new(c, "mean_kld", st_jnum_or_null(d->kld_mean));
        json_object_set_new(c, "p50_kld", st_jnum_or_null(d->kld_p50));
        json_object_set_new(c, "p90_kld", st_jnum_or_null(d->kld_p90));
        json_object_set_new(c, "p99_kld", st_jnum_or_null(d->kld_p99));
        json_object_set_new(c, "max_kld", st_jnum_or_null(d->kld_max));
        json_object_set_new(c, "same_top1", st_jnum_or_null(d->same_top1));
        json_object_set_new(c, "delta_p_mean", st_jnum_or_null(d->dp_mean));
        json_object_set_new(c, "delta_p_p01", st_jnum_or_null(d->dp_p01));
        json_object_set_new(c, "delta_p_p99", st_jnum_or_null(d->dp_p99));
        json_object_set_new(c, "rest_mass_mean", st_jnum_or_null(d->rest_base_mean));
        json_object_set_new(c, "answers", json_integer(d->answers));
        json_object_set_new(c, "exact", json_integer(d->exact));
        json_object_set_new(c, "exact_match", st_jnum_or_null(d->exact_match));
        json_object_set_new(c, "first_divergence_mean", st_jnum_or_null(d->div_mean));
        json_object_set_new(c, "first_divergence_p50", st_jnum_or_null(d->div_p50));
        json_object_set_new(c, "pass", q->status == ST_Q_MEASURED ? json_boolean(q->pass) : json_null());
        json_object_set_new(c, "note", q->note[0] ? json_string(q->note) : json_null());
        json_array_append_new(a, c);
    }
    json_object_set_new(o, "configs", a);
    return o;
}

static void cnum(st_buf *b, double v)
{
    if (isfinite(v))
        st_buf_printf(b, ",%.10g", v);
    else
        st_buf_puts(b, ",");
}

void st_rep_quality_csv(const st_report *r, int i, st_buf *b)
{
    const st_quality_result *q = res(r, i);
    if (!q) {
        st_buf_puts(b, ",,,,,,,,,,,,");
        return;
    }
    const st_drift_summary *d = &q->d;
    st_buf_puts(b, ",");
    st_csv_put_text(b, st_qstatus_name(q->status));
    st_buf_puts(b, ",");
    st_csv_put_text(b, q->mode);
    st_buf_printf(b, ",%u,%d", q->prompts, q->synthetic);
    cnum(b, d->kld_mean);
    cnum(b, d->kld_p99);
    cnum(b, d->same_top1);
    cnum(b, d->exact_match);
    cnum(b, d->div_p50);
    cnum(b, q->engine_s / 60);
    if (q->status == ST_Q_MEASURED)
        st_buf_printf(b, ",%d", q->pass);
    else
        st_buf_puts(b, ",");
    st_buf_puts(b, ",");
    st_csv_put_text(b, q->note[0] ? q->note : NULL);
}
