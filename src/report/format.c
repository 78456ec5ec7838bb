#include "report/format.h"
#include "plan/disagg_sim.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static void thousands(char *out, size_t n, double v, int decimals)
{
    char raw[64];
    snprintf(raw, sizeof raw, "%.*f", decimals, fabs(v));
    char *dot = strchr(raw, '.');
    size_t il = dot ? (size_t)(dot - raw) : strlen(raw);
    char tmp[96];
    size_t o = 0;
    if (v < 0 && o + 1 < sizeof tmp)
        tmp[o++] = '-';
    for (size_t i = 0; i < il && o + 2 < sizeof tmp; i++) {
        tmp[o++] = raw[i];
        size_t left = il - i - 1;
        if (left > 0 && left % 3 == 0)
            tmp[o++] = ',';
    }
    tmp[o] = '\0';
    snprintf(out, n, "%s%s", tmp, dot ? dot : "");
}

void st_fmt_num(char *out, size_t n, double v)
{
    if (isnan(v)) {
        snprintf(out, n, "-");
        return;
    }
    if (isinf(v)) {
        snprintf(out, n, v > 0 ? "inf" : "-inf");
        return;
    }
    double a = fabs(v);
    if (a >= 1000)
        thousands(out, n, v, 0);
    else if (a >= 100)
        snprintf(out, n, "%.0f", v);
    else if (a >= 10)
        snprintf(out, n, "%.1f", v);
    else
        snprintf(out, n, "%.2f", v);
}

void st_fmt_usd(char *out, size_t n, double v)
{
    if (!isfinite(v)) {
        snprintf(out, n, "-");
        return;
    }
    char b[64];
    if (fabs(v) >= 1000)
        thousands(b, sizeof b, v, 0);
    else if (fabs(v) >= 1)
        snprintf(b, sizeof b, "%.2f", v);
    else
        snprintf(b, sizeof b, "%.3f", v);
    snprintf(out, n, "$%s", b);
}

void st_fmt_pct(char *out, size_t n, double rel)
{
    if (!isfinite(rel)) {
        snprintf(out, n, "-");
        return;
    }
    double p = rel * 100;
    if (fabs(p) < 0.5)
        snprintf(out, n, "0 %%");
    else
        snprintf(out, n, "%+.0f %%", p);
}

void st_fmt_rate(char *out, size_t n, double r)
{
    if (isinf(r))
        snprintf(out, n, "inf");
    else
        snprintf(out, n, "%g", r < 100 ? round(r * 1000) / 1000 : round(r));
}

int st_md_text(st_buf *b, const char *s)
{
    int rc = 0;
    for (; s && *s && !rc; s++) {
        char c = *s;
        if (c == '\n' || c == '\r' || c == '\t')
            rc = st_buf_puts(b, " ");
        else if (c == '|')
            rc = st_buf_puts(b, "\\|");
        else if (c == '<' && (isalpha((unsigned char)s[1]) || strchr("/!?", s[1])))
            rc = st_buf_puts(b, "&lt;"); /* would open an HTML tag */
        else if (c == '&' && (isalnum((unsigned char)s[1]) || s[1] == '#'))
            rc = st_buf_puts(b, "&amp;"); /* would start an entity */
        else if (strchr("`*_[]\\", c))
            rc = st_buf_printf(b, "\\%c", c);
        else
            rc = st_buf_append(b, &c, 1);
    }
    return rc;
}

int st_md_code(st_buf *b, const char *s)
{
    int rc = st_buf_puts(b, "`");
    for (; s && *s && !rc; s++) {
        char c = (*s == '`') ? '\'' : (*s == '\n' || *s == '|') ? ' ' : *s;
        rc = st_buf_append(b, &c, 1);
    }
    return rc ? rc : st_buf_puts(b, "`");
}

void st_fmt_date(char *out, size_t n, long long wall_ns)
{
    time_t t = (time_t)(wall_ns / 1000000000LL);
    struct tm tm;
    if (wall_ns <= 0 || !gmtime_r(&t, &tm)) {
        snprintf(out, n, "-");
        return;
    }
    strftime(out, n, "%Y-%m-%d %H:%M UTC", &tm);
}

void st_fmt_money(char *out, size_t n, double v)
{
    if (!isfinite(v))
        snprintf(out, n, "-");
    else if (v >= 1000) {
        char b[64];
        thousands(b, sizeof b, v, 0);
        snprintf(out, n, "$%s", b);
    } else
        snprintf(out, n, "$%.3g", v);
}

const char *const st_rep_output_tps_note =
    "Output tok/s at capacity = the capacity x the output tokens per request completed in the window of the "
    "run at that rate (the mean of its replicates): the window's own token rate moves with the arrivals it "
    "happened to get (a few % either way), and a replica's cost and its tokens must rest on the same rate.";

/* One two-pool run's figures (plan/disagg_sim.h) as a JSON object: plan's and predict's --disagg. */
json_t *st_disagg_sim_json(const st_disagg_sim *q)
{
    json_t *j = json_object();
    json_object_set_new(j, "rate", json_real(q->rate));
    json_object_set_new(j, "requests", json_integer(q->n));
    json_object_set_new(j, "answered", json_integer(q->answered));
    json_object_set_new(j, "ttft_p50_ms", st_jnum_or_null(q->ttft_p50_s * 1e3));
    json_object_set_new(j, "ttft_p95_ms", st_jnum_or_null(q->ttft_p95_s * 1e3));
    json_object_set_new(j, "tpot_p50_ms", st_jnum_or_null(q->tpot_p50_s * 1e3));
    json_object_set_new(j, "tpot_p95_ms", st_jnum_or_null(q->tpot_p95_s * 1e3));
    json_object_set_new(j, "prefill_p95_ms", st_jnum_or_null(q->prefill_p95_s * 1e3));
    json_object_set_new(j, "transfer_p95_ms", st_jnum_or_null(q->transfer_p95_s * 1e3));
    json_object_set_new(j, "growing", json_boolean(q->growing));
    json_object_set_new(j, "meets_slo", json_boolean(q->meets));
    return j;
}
