/* The report's "Your traffic" section (report/traffic.h). */
#include "report/traffic.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "load/trace.h"
#include "load/trace_stats.h"

#include "report/format.h"

static double dnum(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static const char *sv(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "?";
}

static long long inum(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

static void row(st_rep_traffic *t, const char *k, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void row(st_rep_traffic *t, const char *k, const char *fmt, ...)
{
    if (t->n_rows >= ST_REP_TRAFFIC_ROWS)
        return;
    snprintf(t->key[t->n_rows], sizeof t->key[0], "%s", k);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->value[t->n_rows], sizeof t->value[0], fmt, ap);
    va_end(ap);
    t->n_rows++;
}

static void lens(st_rep_traffic *t, const char *k, json_t *o)
{
    if (!json_is_object(o))
        return;
    row(t, k, "p50 %lld, p95 %lld, p99 %lld, max %lld (mean %.0f)", inum(o, "p50"), inum(o, "p95"), inum(o, "p99"),
        inum(o, "max"), dnum(o, "mean"));
}

int st_rep_traffic_load(const char *json_text, st_rep_traffic *t)
{
    memset(t, 0, sizeof *t);
    if (!json_text)
        return 0;
    json_error_t e;
    json_t *j = json_loads(json_text, 0, &e);
    if (!json_is_object(j)) {
        json_decref(j);
        return -1;
    }
    t->json = j;
    t->present = 1;
    json_t *c = json_object_get(j, "counts");
    row(t, "Trace", "%s (%s): %lld request rows, %lld kept%s", sv(j, "trace"), sv(j, "format"), inum(c, "rows"),
        inum(c, "kept"), inum(c, "failed") > 0 ? " (failed requests in the log left out)" : "");
    json_t *r = json_object_get(j, "rate");
    double span = dnum(r, "span_s");
    if (!isnan(span)) {
        if (span >= 3600)
            row(t, "Requests", "%lld over %.1f h", inum(j, "requests"), span / 3600);
        else
            row(t, "Requests", "%lld over %.1f s", inum(j, "requests"), span);
        if (isnan(dnum(r, "mean_rps")))
            row(t, "Rate", "unknown (%s)", st_traffic_no_rate_reason((uint64_t)inum(j, "requests")));
        else if (inum(r, "minutes") > 0)
            row(t, "Rate", "mean %.3g req/s; per minute p50 %.3g, p95 %.3g, peak %.3g req/s", dnum(r, "mean_rps"),
                dnum(r, "p50_minute_rps"), dnum(r, "p95_minute_rps"), dnum(r, "peak_minute_rps"));
        else
            row(t, "Rate", "mean %.3g req/s (shorter than a minute)", dnum(r, "mean_rps"));
        if (!isnan(dnum(r, "gap_cv")) && (dnum(r, "gap_cv") < ST_TRACE_CONSTANT_CV || isnan(dnum(r, "gamma_shape"))))
            row(t, "Burstiness", "CV of the gaps %.3g (1 = Poisson; evenly spaced)", dnum(r, "gap_cv"));
        else if (!isnan(dnum(r, "gap_cv")))
            row(t, "Burstiness", "CV of the gaps %.3g (1 = Poisson; gamma shape %.3g)", dnum(r, "gap_cv"),
                dnum(r, "gamma_shape"));
    } else {
        row(t, "Requests", "%lld (no timestamps)", inum(j, "requests"));
    }
    lens(t, "Input tokens", json_object_get(j, "input_tokens"));
    lens(t, "Output tokens", json_object_get(j, "output_tokens"));
    lens(t, "Input + output", json_object_get(j, "total_tokens"));
    json_t *px = json_object_get(j, "prefix");
    if (json_is_true(json_object_get(px, "known")))
        row(t, "Prefix sharing", "%.1f%% of prompt tokens in shared prefixes; an ideal prefix cache: %.1f%% hits%s",
            100 * dnum(px, "shared_share"), 100 * dnum(px, "ideal_hit_rate"),
            json_is_true(json_object_get(px, "lower_bound")) ? " (at least)" : "");
    else
        row(t, "Prefix sharing", "not recorded in this trace");
    json_t *ss = json_object_get(j, "sessions");
    if (inum(ss, "sessions") > 0)
        row(t, "Sessions", "%lld, %.2f turns each on average (max %lld)", inum(ss, "sessions"), dnum(ss, "turns_mean"),
            inum(ss, "turns_max"));
    json_t *rp = json_object_get(j, "replayed");
    const char *rtext = json_string_value(json_object_get(rp, "text"));
    if (rtext && *rtext) {
        row(t, "Replayed", "%s", rtext);
        if (json_is_true(json_object_get(rp, "differs")) && t->n_advice < ST_REP_TRAFFIC_ADVICE)
            snprintf(t->advice[t->n_advice++], sizeof t->advice[0], "What the runs replay is not the whole trace: %s.",
                     rtext);
    }
    json_t *ad = json_object_get(j, "advice");
    json_t *txt = json_object_get(ad, "text");
    for (size_t i = 0; i < json_array_size(txt) && t->n_advice < ST_REP_TRAFFIC_ADVICE; i++) {
        const char *s = json_string_value(json_array_get(txt, i));
        if (s)
            snprintf(t->advice[t->n_advice++], sizeof t->advice[0], "%s", s);
    }
    return 0;
}

void st_rep_traffic_free(st_rep_traffic *t)
{
    json_decref(t->json);
    memset(t, 0, sizeof *t);
}

void st_rep_traffic_markdown(const st_rep_traffic *t, st_buf *b)
{
    if (!t->present)
        return;
    st_buf_puts(b, "## Your traffic\n\nFrom the trace this audit replays (`servetune trace stats` prints the same).\n\n"
                   "| | |\n|---|---|\n");
    for (int i = 0; i < t->n_rows; i++) {
        st_buf_puts(b, "| ");
        st_md_text(b, t->key[i]);
        st_buf_puts(b, " | ");
        st_md_text(b, t->value[i]);
        st_buf_puts(b, " |\n");
    }
    if (t->n_advice) {
        st_buf_puts(b, "\nWhat it implies:\n\n");
        for (int i = 0; i < t->n_advice; i++) {
            st_buf_puts(b, "- ");
            st_md_text(b, t->advice[i]);
            st_buf_puts(b, "\n");
        }
    }
    st_buf_puts(b, "\n");
}
