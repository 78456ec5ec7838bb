/* The report's "Who pays" section (report/whopays.h). */
#include "report/whopays.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/format.h"

json_t *st_rep_who_pays_load(const char *json_text)
{
    if (!json_text)
        return NULL;
    json_error_t e;
    json_t *j = json_loads(json_text, 0, &e);
    if (!json_is_object(j) || !json_is_array(json_object_get(j, "tenants"))) {
        json_decref(j);
        return NULL;
    }
    return j;
}

static double num(const json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : 0;
}

static int cmp_gpu(const void *x, const void *y)
{
    double a = num(*(json_t *const *)x, "gpu_s"), b = num(*(json_t *const *)y, "gpu_s");
    return a > b ? -1 : a < b;
}

const char *const st_rep_who_pays_head[ST_REP_WHOPAYS_COLS] = { "tenant",    "requests",   "GPU s",    "model",
                                                                "per token", "per second", "$ (model)" };

static void intro_text(const json_t *j, char *out, size_t cap)
{
    const char *by = json_string_value(json_object_get(j, "by"));
    snprintf(out, cap,
             "The trace's requests replayed on the engine model of the baseline at their recorded times; each "
             "engine step's time split over the requests in it by their work (prefill tokens, decodes with the KV "
             "cache they read), by %s; idle apart. Beside it, the flat splits by tokens and by request duration "
             "(servetune trace cost prints the same; docs/cost-attribution.md).%s",
             by ? by : "tenant",
             json_is_true(json_object_get(j, "first_rows_only")) ? " Only the trace's first 100,000 requests." : "");
}

uint32_t st_rep_who_pays_table(const json_t *j, char (*cells)[ST_REP_WHOPAYS_COLS][ST_REP_WHOPAYS_CELL], char *intro,
                               size_t intro_cap)
{
    if (!j)
        return 0;
    intro_text(j, intro, intro_cap);
    json_t *ts = json_object_get(j, "tenants");
    size_t n = json_array_size(ts);
    json_t **v = calloc(n ? n : 1, sizeof *v);
    if (!v)
        return 0;
    for (size_t i = 0; i < n; i++)
        v[i] = json_array_get(ts, i);
    qsort(v, n, sizeof *v, cmp_gpu);
    uint32_t rows = 0;
    double rest_g = 0, rest_usd = 0, rest_req = 0;
    for (size_t i = 0; i < n; i++) {
        if (i >= ST_REP_WHOPAYS_ROWS) {
            rest_g += num(v[i], "gpu_s");
            rest_usd += num(v[i], "usd_model");
            rest_req += num(v[i], "requests");
            continue;
        }
        char(*c)[ST_REP_WHOPAYS_CELL] = cells[rows++];
        const char *name = json_string_value(json_object_get(v[i], "tenant"));
        snprintf(c[0], ST_REP_WHOPAYS_CELL, "%s", name ? name : "?");
        snprintf(c[1], ST_REP_WHOPAYS_CELL, "%.0f", num(v[i], "requests"));
        snprintf(c[2], ST_REP_WHOPAYS_CELL, "%.1f", num(v[i], "gpu_s"));
        snprintf(c[3], ST_REP_WHOPAYS_CELL, "%.1f %%", 100 * num(v[i], "share_model"));
        snprintf(c[4], ST_REP_WHOPAYS_CELL, "%.1f %%", 100 * num(v[i], "share_tokens"));
        snprintf(c[5], ST_REP_WHOPAYS_CELL, "%.1f %%", 100 * num(v[i], "share_duration"));
        snprintf(c[6], ST_REP_WHOPAYS_CELL, "%.4f", num(v[i], "usd_model"));
    }
    if (n > ST_REP_WHOPAYS_ROWS) {
        char(*c)[ST_REP_WHOPAYS_CELL] = cells[rows++];
        snprintf(c[0], ST_REP_WHOPAYS_CELL, "%zu others", n - ST_REP_WHOPAYS_ROWS);
        snprintf(c[1], ST_REP_WHOPAYS_CELL, "%.0f", rest_req);
        snprintf(c[2], ST_REP_WHOPAYS_CELL, "%.1f", rest_g);
        c[3][0] = c[4][0] = c[5][0] = '\0';
        snprintf(c[6], ST_REP_WHOPAYS_CELL, "%.4f", rest_usd);
    }
    char(*c)[ST_REP_WHOPAYS_CELL] = cells[rows++];
    snprintf(c[0], ST_REP_WHOPAYS_CELL, "idle (unattributed)");
    c[1][0] = c[3][0] = c[4][0] = c[5][0] = '\0';
    snprintf(c[2], ST_REP_WHOPAYS_CELL, "%.1f", num(j, "idle_s"));
    snprintf(c[6], ST_REP_WHOPAYS_CELL, "%.4f", num(j, "usd_idle"));
    free(v);
    return rows;
}

void st_rep_who_pays_markdown(const json_t *j, st_buf *b)
{
    if (!j)
        return;
    json_t *ts = json_object_get(j, "tenants");
    size_t n = json_array_size(ts);
    json_t **v = calloc(n ? n : 1, sizeof *v);
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        v[i] = json_array_get(ts, i);
    qsort(v, n, sizeof *v, cmp_gpu);
    char line[600];
    st_buf_puts(b, "## Who pays\n\n");
    intro_text(j, line, sizeof line);
    st_md_text(b, line);
    st_buf_puts(b, "\n\n| tenant | requests | GPU s | model | per token | per second | $ (model) |\n"
                   "|---|---:|---:|---:|---:|---:|---:|\n");
    double rest_g = 0, rest_usd = 0;
    long long rest_req = 0;
    for (size_t i = 0; i < n; i++) {
        if (i >= ST_REP_WHOPAYS_ROWS) {
            rest_g += num(v[i], "gpu_s");
            rest_usd += num(v[i], "usd_model");
            rest_req += (long long)num(v[i], "requests");
            continue;
        }
        st_buf_puts(b, "| ");
        const char *name = json_string_value(json_object_get(v[i], "tenant"));
        st_md_text(b, name ? name : "?");
        st_buf_printf(b, " | %.0f | %.1f | %.1f%% | %.1f%% | %.1f%% | %.4f |\n", num(v[i], "requests"),
                      num(v[i], "gpu_s"), 100 * num(v[i], "share_model"), 100 * num(v[i], "share_tokens"),
                      100 * num(v[i], "share_duration"), num(v[i], "usd_model"));
    }
    if (n > ST_REP_WHOPAYS_ROWS)
        st_buf_printf(b, "| %zu others | %lld | %.1f | | | | %.4f |\n", n - ST_REP_WHOPAYS_ROWS, rest_req, rest_g,
                      rest_usd);
    st_buf_printf(b, "| idle (unattributed) | | %.1f | | | | %.4f |\n\n", num(j, "idle_s"), num(j, "usd_idle"));
    json_t *hours = json_object_get(j, "hours");
    size_t nh = json_array_size(hours);
    if (nh > 1 && nh <= ST_REP_WHOPAYS_HOURS && n <= 8) {
        st_buf_puts(b, "Cost per tenant per hour ($, model-based):\n\n| hour (UTC) |");
        for (size_t i = 0; i < n; i++) {
            st_buf_puts(b, " ");
            const char *name = json_string_value(json_object_get(v[i], "tenant"));
            st_md_text(b, name ? name : "?");
            st_buf_puts(b, " |");
        }
        st_buf_puts(b, "\n|---|");
        for (size_t i = 0; i < n; i++)
            st_buf_puts(b, "---:|");
        st_buf_puts(b, "\n");
        for (size_t h = 0; h < nh; h++) {
            json_t *o = json_array_get(hours, h), *u = json_object_get(o, "usd");
            const char *st = json_string_value(json_object_get(o, "start"));
            st_buf_printf(b, "| %s |", st ? st : "?");
            for (size_t i = 0; i < n; i++) {
                const char *name = json_string_value(json_object_get(v[i], "tenant"));
                json_t *x = name ? json_object_get(u, name) : NULL;
                st_buf_printf(b, " %.4f |", json_is_number(x) ? json_number_value(x) : 0.0);
            }
            st_buf_puts(b, "\n");
        }
        st_buf_puts(b, "\n");
    }
    free(v);
}
