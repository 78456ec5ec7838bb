#include "report/html.h"

#include "core/file.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report/svg.h"

/* Longest text taken from any one string (server error messages can be long). */
#define TEXT_MAX 4000
#define NAME_MAX_BYTES 200

/* The page is written into one st_buf; its error is sticky (core/buf.h), so the writers below
 * append without checking each call and st_html_render asks once at the end. */

/* Escaped text, at most max bytes of the input. */
static void ht(st_buf *h, const char *s, size_t max) { (void)st_svg_text(h, s, max); }

static void hs(st_buf *h, const char *s) { ht(h, s, TEXT_MAX); }
/* One escaped paragraph. */
static void hp(st_buf *h, const char *s)
{
    st_buf_printf(h, "<p>");
    hs(h, s);
    st_buf_printf(h, "</p>\n");
}

/* Escaped text with its line breaks kept (for <pre>), at most max bytes in all. */
static void ht_lines(st_buf *h, const char *s, size_t max)
{
    size_t used = 0;
    while (s && *s && !st_buf_error(h)) {
        const char *e = strchr(s, '\n');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (used + len > max) {
            st_buf_printf(h, "...");
            return;
        }
        char *line = strndup(s, len);
        if (!line) {
            st_buf_fail(h, ST_BUF_NO_MEM);
            return;
        }
        ht(h, line, 0);
        free(line);
        used += len + 1;
        if (!e)
            break;
        st_buf_printf(h, "\n");
        s = e + 1;
    }
}

/* ---- number formatting ------------------------------------------------------------------ */

#define DASH "\xE2\x80\x94"  /* em dash */
#define NDASH "\xE2\x80\x93" /* en dash */
#define MINUS "\xE2\x88\x92"

void st_html_fmt_change(char *out, size_t outlen, double frac)
{
    if (!isfinite(frac)) {
        snprintf(out, outlen, DASH);
        return;
    }
    double pc = frac * 100;
    if (fabs(pc) < 0.5)
        snprintf(out, outlen,
                 "\xC2\xB1"
                 "0 %%");
    else if (fabs(pc) < 10)
        snprintf(out, outlen, "%s%.1f %%", pc > 0 ? "+" : MINUS, fabs(pc));
    else
        snprintf(out, outlen, "%s%.0f %%", pc > 0 ? "+" : MINUS, fabs(pc));
}

/* Integer with thousands separators. */
static void fmt_int(char *out, size_t n, double v)
{
    if (!isfinite(v)) {
        snprintf(out, n, DASH);
        return;
    }
    char t[64];
    snprintf(t, sizeof t, "%.0f", fabs(v));
    size_t len = strlen(t), o = 0;
    char r[96];
    if (v < 0 && strcmp(t, "0") != 0)
        r[o++] = '-';
    for (size_t i = 0; i < len && o < sizeof r - 2; i++) {
        if (i && (len - i) % 3 == 0)
            r[o++] = ',';
        r[o++] = t[i];
    }
    r[o] = '\0';
    snprintf(out, n, "%s", r);
}

static void fmt_num(char *out, size_t n, double v, int decimals)
{
    if (!isfinite(v))
        snprintf(out, n, DASH);
    else
        snprintf(out, n, "%.*f", decimals, v);
}

static void fmt_ms(char *out, size_t n, double v)
{
    if (!isfinite(v))
        snprintf(out, n, DASH);
    else if (fabs(v) >= 100)
        fmt_int(out, n, v);
    else
        snprintf(out, n, "%.1f", v);
}

static void fmt_usd(char *out, size_t n, double v)
{
    if (!isfinite(v))
        snprintf(out, n, DASH);
    else if (fabs(v) >= 1000) {
        char t[48];
        fmt_int(t, sizeof t, v);
        snprintf(out, n, "$%s", t);
    } else if (fabs(v) >= 10)
        snprintf(out, n, "$%.2f", v);
    else
        snprintf(out, n, "$%.3f", v);
}

static void fmt_rate(char *out, size_t n, double v)
{
    if (isinf(v) && v > 0)
        snprintf(out, n, "inf");
    else
        st_svg_fmt(out, n, v, 0);
}

/* ---- ordering --------------------------------------------------------------------------- */

typedef struct ord {
    const st_html_config *c;
    uint32_t idx;
} ord;

static int status_rank(const st_html_config *c)
{
    switch (c->status) {
    case ST_HTML_CFG_OK: return 0;
    case ST_HTML_CFG_NONE_PASSED: return 1;
    case ST_HTML_CFG_NOT_STARTED: return 2;
    default: return 3;
    }
}

static int cmp_cheapest(const void *pa, const void *pb)
{
    const ord *a = pa, *b = pb;
    int ra = status_rank(a->c), rb = status_rank(b->c);
    if (ra != rb)
        return ra - rb;
    if (ra == 0) {
        double ua = a->c->usd_per_mtok, ub = b->c->usd_per_mtok;
        int fa = isfinite(ua), fb = isfinite(ub);
        if (fa != fb)
            return fb - fa;
        if (fa && ua != ub)
            return ua < ub ? -1 : 1;
        double ca = a->c->capacity_rps, cb = b->c->capacity_rps;
        if (isfinite(ca) && isfinite(cb) && ca != cb)
            return ca > cb ? -1 : 1;
    }
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* ---- style ------------------------------------------------------------------------------ */

static const char CSS[] =
    ":root{--ink:#111827;--muted:#4b5563;--line:#e5e7eb;--soft:#f9fafb;--good:#047857;"
    "--bad:#b91c1c;--accent:#0072b2}\n"
    "*{box-sizing:border-box}\n"
    "html{-webkit-text-size-adjust:100%}\n"
    "body{margin:0;color:var(--ink);background:#fff;font:15px/1.5 system-ui,-apple-system,"
    "'Segoe UI',Roboto,'DejaVu Sans',Arial,sans-serif}\n"
    "main{max-width:1160px;margin:0 auto;padding:28px 32px 48px}\n"
    "header.top{border-bottom:3px solid var(--ink);padding-bottom:10px;margin-bottom:18px}\n"
    "h1{font-size:26px;line-height:1.2;margin:0 0 4px}\n"
    ".sub{color:var(--muted);font-size:14px;margin:0}\n"
    "h2{font-size:20px;margin:34px 0 10px;padding-bottom:4px;border-bottom:1px solid var(--line)}\n"
    "h3{font-size:16px;margin:22px 0 8px}\n"
    ".banner{border-radius:6px;padding:10px 14px;margin:0 0 12px;font-size:15px;"
    "-webkit-print-color-adjust:exact;print-color-adjust:exact}\n"
    ".banner b{letter-spacing:.04em}\n"
    ".banner.partial{background:#fff7ed;border:2px solid #c2410c;color:#7c2d12}\n"
    ".banner.prediction{background:#eef2ff;border:2px solid #4338ca;color:#312e81}\n"
    ".lead{font-size:18px;line-height:1.55;margin:4px 0 18px;max-width:62em}\n"
    ".grid2{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));gap:18px 24px}\n"
    ".grid-runs{display:grid;grid-template-columns:repeat(auto-fill,minmax(340px,1fr));"
    "gap:14px 18px}\n"
    "figure{margin:0;break-inside:avoid;page-break-inside:avoid}\n"
    "figcaption{color:var(--muted);font-size:13px;margin-top:2px}\n"
    "svg.chart{width:100%;height:auto;display:block;border:1px solid var(--line);"
    "border-radius:4px}\n"
    "table{border-collapse:collapse;width:100%;font-size:14px;margin:6px 0 8px}\n"
    ".scroll{overflow-x:auto}\n"
    "table.results td.cfg,table.changes td.cfg{white-space:nowrap}\n"
    "table.results td.cfg .small{white-space:normal;min-width:12em}\n"
    "table.results thead th{white-space:normal;vertical-align:bottom}\n"
    "th,td{padding:7px 8px;border-bottom:1px solid var(--line);vertical-align:top;"
    "text-align:left}\n"
    "thead th{background:var(--soft);font-size:12.5px;color:#374151;font-weight:600;"
    "border-bottom:2px solid #d1d5db;-webkit-print-color-adjust:exact;print-color-adjust:exact}\n"
    "td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\n"
    "tr.rec td{background:#ecfdf5;-webkit-print-color-adjust:exact;print-color-adjust:exact}\n"
    "tr.rec td:first-child{box-shadow:inset 4px 0 0 var(--good)}\n"
    ".sw{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:7px;"
    "vertical-align:baseline;-webkit-print-color-adjust:exact;print-color-adjust:exact}\n"
    ".cfg{font-weight:600;word-break:break-word}\n"
    ".tag{display:inline-block;font-size:11px;font-weight:600;border-radius:3px;padding:0 5px;"
    "margin:2px 4px 0 17px;border:1px solid currentColor}\n"
    ".tags{display:block;line-height:1.2;white-space:nowrap}\n"
    ".tag.cur{color:var(--muted)}\n"
    ".tag.rec{color:var(--good)}\n"
    ".small{display:block;color:var(--muted);font-size:12px;font-weight:400}\n"
    ".good{color:var(--good)}\n"
    ".bad{color:var(--bad)}\n"
    "td.none{color:var(--bad);font-style:italic}\n"
    "table.kv{width:auto;min-width:60%}\n"
    "table.kv th{width:15em;color:var(--muted);font-weight:600;background:none}\n"
    "code{font-family:ui-monospace,'DejaVu Sans Mono',Menlo,Consolas,monospace;font-size:13px;"
    "background:var(--soft);border:1px solid var(--line);border-radius:3px;padding:1px 4px;"
    "white-space:pre-wrap;word-break:break-word}\n"
    "ul.notes{list-style:none;padding:0;margin:8px 0}\n"
    "pre.log{font-family:ui-monospace,'DejaVu Sans Mono',Menlo,Consolas,monospace;font-size:12px;"
    "background:#fff;border:1px solid var(--line);border-radius:3px;padding:6px 8px;margin:6px 0 0;"
    "white-space:pre-wrap;word-break:break-word;max-height:16em;overflow:auto}\n"
    "ul.notes li{padding:7px 10px 7px 12px;margin:0 0 6px;border-left:4px solid #9ca3af;"
    "background:var(--soft);-webkit-print-color-adjust:exact;print-color-adjust:exact}\n"
    "ul.notes li.warn{border-left-color:#d97706}\n"
    "ul.notes li.error{border-left-color:var(--bad)}\n"
    ".sev{font-size:11px;font-weight:700;text-transform:uppercase;letter-spacing:.05em;"
    "margin-right:8px;color:var(--muted)}\n"
    "li.warn .sev{color:#b45309}\n"
    "li.error .sev{color:var(--bad)}\n"
    "footer{margin-top:36px;color:var(--muted);font-size:12px;border-top:1px solid var(--line);"
    "padding-top:8px}\n"
    "@media (max-width:860px){.grid2{grid-template-columns:1fr}main{padding:16px}}\n"
    "@media print{@page{size:A4;margin:12mm}"
    "body{font-size:10.5pt}main{max-width:none;padding:0}"
    ".lead{font-size:12pt}h2{break-after:avoid;page-break-after:avoid}"
    "h3{break-after:avoid;page-break-after:avoid}"
    "tr,li{break-inside:avoid;page-break-inside:avoid}"
    ".grid-runs{grid-template-columns:repeat(2,minmax(0,1fr))}"
    "svg.chart{border-color:#d1d5db}.scroll{overflow:visible}"
    "table{font-size:8.5pt}th,td{padding:4px 5px}thead th{font-size:8pt}"
    ".tag{font-size:7pt;margin-left:14px}"
    ".small{font-size:7.5pt}code{font-size:8pt}"
    "section#timelines{break-before:page;page-break-before:always}}\n";

/* ---- pieces ----------------------------------------------------------------------------- */

static void swatch(st_buf *h, uint32_t idx)
{
    st_buf_printf(h, "<span class=\"sw\" style=\"background:%s\"></span>", st_svg_color((int)idx));
}

static const char *name_of(const st_html_config *c) { return c->name && *c->name ? c->name : "(unnamed)"; }

/* What a configuration without a capacity shows: it passed nowhere, its engine failed (before
 * or after it ran a rate), or it decided nothing. */
static const char *status_word(const st_html_config *c)
{
    switch (c->status) {
    case ST_HTML_CFG_NONE_PASSED: return "none passed";
    case ST_HTML_CFG_NOT_STARTED: return c->ran ? "engine failed" : "did not start";
    default: return c->ran ? "no verdict" : "not run";
    }
}

static const st_html_config *baseline(const st_html_report *r)
{
    for (uint32_t i = 0; i < r->n_configs; i++)
        if (r->configs[i].is_baseline)
            return &r->configs[i];
    return NULL;
}

static void change_cell(st_buf *h, double frac, int higher_is_better)
{
    char t[48];
    st_html_fmt_change(t, sizeof t, frac);
    const char *cls = "";
    if (isfinite(frac) && fabs(frac) >= 0.005)
        cls = ((frac > 0) == (higher_is_better != 0)) ? " good" : " bad";
    st_buf_printf(h, "<td class=\"num%s\">%s</td>", cls, t);
}

static void default_headline(st_buf *h, const st_html_report *r)
{
    const st_html_config *base = baseline(r), *best = NULL;
    for (uint32_t i = 0; i < r->n_configs; i++) {
        const st_html_config *c = &r->configs[i];
        if (c->status != ST_HTML_CFG_OK || !isfinite(c->capacity_rps))
            continue;
        if (c->recommended) {
            best = c;
            break;
        }
        if (!best || c->capacity_rps > best->capacity_rps)
            best = c;
    }
    char a[64], bb[64];
    if (base && base->status != ST_HTML_CFG_OK) {
        st_buf_printf(h, "The current setup (");
        hs(h, name_of(base));
        st_buf_printf(h, ") did not meet the SLO at any tested rate. ");
    }
    if (!best) {
        st_buf_printf(h, "No configuration met the SLO at any tested rate; see the notes under "
                         "<a href=\"#method\">Method and limits</a>.");
        return;
    }
    fmt_num(a, sizeof a, best->capacity_rps, 2);
    st_buf_printf(h, "Of the %u configurations tested, <b>", r->n_configs);
    hs(h, name_of(best));
    st_buf_printf(h, "</b> serves <b>%s requests/s</b> within the SLO", a);
    if (base && base != best && base->status == ST_HTML_CFG_OK) {
        fmt_num(bb, sizeof bb, base->capacity_rps, 2);
        st_buf_printf(h, " against %s for the current setup", bb);
        if (isfinite(best->usd_per_mtok) && isfinite(base->usd_per_mtok)) {
            char u1[48], u2[48], ch[48];
            fmt_usd(u1, sizeof u1, base->usd_per_mtok);
            fmt_usd(u2, sizeof u2, best->usd_per_mtok);
            st_html_fmt_change(ch, sizeof ch, best->usd_vs_base);
            st_buf_printf(h, ", which moves cost per million output tokens from %s to %s (%s)", u1, u2, ch);
        }
    } else if (base == best) {
        st_buf_printf(h, "; no other configuration beats the current setup");
    }
    st_buf_printf(h, ".");
}

static void banners(st_buf *h, const st_html_report *r)
{
    if (r->partial) {
        st_buf_printf(h, "<div class=\"banner partial\" id=\"banner-partial\" role=\"alert\"><b>PARTIAL</b> " DASH
                         " this audit did not finish");
        if (r->partial_reason && *r->partial_reason) {
            st_buf_printf(h, ": ");
            hs(h, r->partial_reason);
        }
        st_buf_printf(h, ". The figures cover only the runs that completed.</div>\n");
    }
    if (r->prediction)
        st_buf_printf(h, "<div class=\"banner prediction\" id=\"banner-prediction\" role=\"note\"><b>PREDICTION "
                         "(engine model, not measured)</b> " DASH " every figure below comes from servetune's "
                         "engine model in virtual time, not from a running server. Confirm on real hardware "
                         "before deciding.</div>\n");
}

/* Capacity and $ per 1M bars, side by side. */
static void cost_charts(st_buf *h, const st_html_report *r, const ord *o)
{
    uint32_t n = r->n_configs;
    st_svg_bar *cap = calloc(n ? n : 1, sizeof *cap), *usd = calloc(n ? n : 1, sizeof *usd);
    char(*tc)[64] = calloc(n ? n : 1, sizeof *tc), (*tu)[64] = calloc(n ? n : 1, sizeof *tu);
    if (!cap || !usd || !tc || !tu) {
        st_buf_fail(h, ST_BUF_NO_MEM);
        goto out;
    }
    const st_html_config *base = baseline(r);
    for (uint32_t k = 0; k < n; k++) {
        const st_html_config *c = o[k].c;
        const char *note = c->status == ST_HTML_CFG_OK ? "no value" : status_word(c);
        int ok = c->status == ST_HTML_CFG_OK;
        char v[32];
        fmt_num(v, sizeof v, c->capacity_rps, 2);
        snprintf(tc[k], sizeof tc[k], "%s%s req/s", c->capacity_may_be_higher ? "\xE2\x89\xA5 " : "", v);
        fmt_usd(tu[k], sizeof tu[k], c->usd_per_mtok);
        cap[k] = (st_svg_bar){ name_of(c), ok ? c->capacity_rps : NAN, tc[k], note, (int)o[k].idx, c->recommended };
        usd[k] = (st_svg_bar){ name_of(c), ok ? c->usd_per_mtok : NAN, tu[k], note, (int)o[k].idx, c->recommended };
    }
    int base_ok = base && base->status == ST_HTML_CFG_OK;
    st_svg_bar_chart bc = { "Capacity at SLO (req/s, higher is better)", 540,      "requests/s", cap, n,
                            base_ok ? base->capacity_rps : NAN,          "current" };
    st_svg_bar_chart bu = { "$ per 1M output tokens (lower is better)", 540,      "US dollars", usd, n,
                            base_ok ? base->usd_per_mtok : NAN,         "current" };
    st_buf_printf(h, "<div class=\"grid2\" id=\"chart-cost\"><figure>");
    (void)st_svg_bars(h, &bc);
    st_buf_printf(h, "<figcaption>Capacity at the SLO as the results table gives it: the highest rate the "
                     "engine sustained within the SLO (in a burst test, the rate delivered at its highest passing "
                     "rate). The dashed line is the current setup.</figcaption></figure><figure>");
    (void)st_svg_bars(h, &bu);
    st_buf_printf(h, "<figcaption>GPU price per hour &times; GPUs per replica &divide; output tokens per hour "
                     "at capacity.</figcaption></figure></div>\n");
out:
    free(cap);
    free(usd);
    free(tc);
    free(tu);
}

static void results_table(st_buf *h, const st_html_report *r, const ord *o)
{
    int money = 0;
    for (uint32_t i = 0; i < r->n_configs; i++)
        if (isfinite(r->configs[i].replicas) || isfinite(r->configs[i].monthly_usd))
            money = 1;
    int ncols = money ? 9 : 7;
    st_buf_printf(h, "<div class=\"scroll\"><table class=\"results\" id=\"results-table\"><thead><tr><th>Config</th>"
                     "<th class=\"num\">Capacity at SLO (req/s)</th><th class=\"num\">vs current</th>"
                     "<th class=\"num\">Output tok/s at capacity</th><th class=\"num\">$ per 1M output tok</th>"
                     "<th class=\"num\">vs current</th><th class=\"num\">p95 TTFT / TPOT at capacity (ms)</th>");
    if (money)
        st_buf_printf(h, "<th class=\"num\">Replicas at peak</th><th class=\"num\">Monthly cost</th>");
    st_buf_printf(h, "</tr></thead><tbody>\n");
    for (uint32_t k = 0; k < r->n_configs; k++) {
        const st_html_config *c = o[k].c;
        char t1[64], t2[64];
        st_buf_printf(h, "<tr%s><td class=\"cfg\">", c->recommended ? " class=\"rec\"" : "");
        swatch(h, o[k].idx);
        ht(h, name_of(c), NAME_MAX_BYTES);
        if (c->is_baseline || c->recommended)
            st_buf_printf(h, "<span class=\"tags\">%s%s</span>",
                          c->is_baseline ? "<span class=\"tag cur\">current</span>" : "",
                          c->recommended ? "<span class=\"tag rec\">recommended</span>" : "");
        if (c->status == ST_HTML_CFG_OK && c->status_text && *c->status_text) {
            st_buf_printf(h, "<span class=\"small\">");
            hs(h, c->status_text);
            st_buf_printf(h, "</span>");
        }
        st_buf_printf(h, "</td>");
        if (c->status != ST_HTML_CFG_OK) {
            st_buf_printf(h, "<td class=\"none\" colspan=\"%d\">%s", ncols - 1, status_word(c));
            if (c->status_text && *c->status_text) {
                st_buf_printf(h, ": ");
                hs(h, c->status_text);
            }
            st_buf_printf(h, " " DASH " see <a href=\"#notes\">the notes</a></td></tr>\n");
            continue;
        }
        fmt_num(t1, sizeof t1, c->capacity_rps, 2);
        st_buf_printf(h, "<td class=\"num\"><b>%s%s</b>", c->capacity_may_be_higher ? "\xE2\x89\xA5 " : "", t1);
        if (c->sustained && isfinite(c->ci_lo) && !isnan(c->ci_hi)) {
            fmt_num(t1, sizeof t1, c->ci_lo, 2);
            fmt_num(t2, sizeof t2, c->ci_hi, 2);
            if (isinf(c->ci_hi))
                st_buf_printf(h, "<span class=\"small\">limit above %s (%.0f %%)</span>", t1, r->confidence * 100);
            else
                st_buf_printf(h, "<span class=\"small\">limit %s" NDASH "%s (%.0f %%)</span>", t1, t2,
                              r->confidence * 100);
        }
        if (!isnan(c->pass_rate) || !isnan(c->fail_rate)) { /* inf is a tested rate */
            fmt_rate(t1, sizeof t1, c->pass_rate);
            st_buf_printf(h, "<span class=\"small\">%s %s", c->sustained ? "sustained at" : "passed at",
                          !isnan(c->pass_rate) ? t1 : DASH);
            if (!isnan(c->fail_rate)) {
                fmt_rate(t2, sizeof t2, c->fail_rate);
                st_buf_printf(h, ", %s at %s", c->fail_undecided ? "undecided" : "failed", t2);
            } else {
                st_buf_printf(h, ", highest tested");
            }
            st_buf_printf(h, "</span>");
        }
        if (isfinite(c->grid_rps)) {
            fmt_num(t1, sizeof t1, c->grid_rps, 2);
            st_buf_printf(h, "<span class=\"small\">grid answer: %s</span>", t1);
        }
        if (isfinite(c->refined_rps)) {
            fmt_num(t1, sizeof t1, c->refined_rps, 2);
            st_buf_printf(h, "<span class=\"small\">refined: %s</span>", t1);
        }
        if (isfinite(c->sustained_rps)) {
            fmt_num(t1, sizeof t1, c->sustained_rps, 2);
            st_buf_printf(h, "<span class=\"small\">sustained: %s</span>", t1);
        }
        st_buf_printf(h, "</td>");
        if (c->is_baseline)
            st_buf_printf(h, "<td class=\"num\">current</td>");
        else
            change_cell(h, c->capacity_vs_base, 1);
        fmt_int(t1, sizeof t1, c->out_tok_s);
        st_buf_printf(h, "<td class=\"num\">%s</td>", t1);
        fmt_usd(t1, sizeof t1, c->usd_per_mtok);
        st_buf_printf(h, "<td class=\"num\"><b>%s</b></td>", t1);
        if (c->is_baseline)
            st_buf_printf(h, "<td class=\"num\">current</td>");
        else
            change_cell(h, c->usd_vs_base, 0);
        fmt_ms(t1, sizeof t1, c->p95_ttft_ms);
        fmt_ms(t2, sizeof t2, c->p95_tpot_ms);
        st_buf_printf(h, "<td class=\"num\">%s / %s</td>", t1, t2);
        if (money) {
            fmt_int(t1, sizeof t1, c->replicas);
            fmt_usd(t2, sizeof t2, c->monthly_usd);
            st_buf_printf(h, "<td class=\"num\">%s</td><td class=\"num\">%s</td>", t1, t2);
        }
        st_buf_printf(h, "</tr>\n");
    }
    st_buf_printf(h, "</tbody></table></div>\n");
}

/* The sustained search behind each capacity (one row per configuration that ran). */
static void search_table(st_buf *h, const st_html_report *r, const ord *o)
{
    const char *u = r->concurrency ? "concurrency" : "req/s";
    st_buf_printf(h,
                  "<div class=\"scroll\"><table class=\"results\" id=\"search-table\"><thead><tr><th>Config</th>"
                  "<th class=\"num\">Bracket (sustained " NDASH " failed, %s)</th><th class=\"num\">Limit interval "
                  "(%.0f %%)</th><th>Binding term</th><th>Boundary</th><th class=\"num\">Runs</th>"
                  "<th class=\"num\">Engine-minutes</th><th class=\"num\">Max throughput (req/s)</th></tr></thead>"
                  "<tbody>\n",
                  u, r->confidence * 100);
    for (uint32_t k = 0; k < r->n_configs; k++) {
        const st_html_config *c = o[k].c;
        if (!c->search_runs)
            continue;
        char a[64], b[64], l[64], hi[64], em[64], mt[64];
        fmt_num(a, sizeof a, c->pass_rate, 2);
        fmt_num(b, sizeof b, c->fail_rate, 2);
        if (c->fail_undecided && !isnan(c->fail_rate))
            snprintf(b + strlen(b), sizeof b - strlen(b), " (undecided)");
        fmt_num(l, sizeof l, c->ci_lo, 2);
        fmt_num(hi, sizeof hi, c->ci_hi, 2);
        if (isinf(c->ci_hi))
            snprintf(hi, sizeof hi, "open");
        fmt_num(em, sizeof em, c->engine_minutes, 1);
        fmt_num(mt, sizeof mt, c->max_throughput_rps, 2);
        st_buf_printf(h, "<tr><td class=\"cfg\">");
        swatch(h, o[k].idx);
        ht(h, name_of(c), NAME_MAX_BYTES);
        st_buf_printf(h, "</td><td class=\"num\">%s " NDASH " %s</td><td class=\"num\">%s " NDASH " %s</td><td>", a, b,
                      l, hi);
        hs(h, c->binding ? c->binding : DASH);
        st_buf_printf(h,
                      "</td><td>%s</td><td class=\"num\">%d</td><td class=\"num\">%s</td><td class=\"num\">%s"
                      "</td></tr>\n",
                      c->boundary ? c->boundary : DASH, c->search_runs, em, mt);
    }
    st_buf_printf(h, "</tbody></table></div>\n<p class=\"small\">Capacity is the highest rate the search "
                     "demonstrated; the limit interval is where the highest sustainable rate lies: where the binding "
                     "term's percentile interval crosses its limit between the bracket's ends (at a cliff, the "
                     "bracket itself; a call that is not confident leaves its side open). Max throughput: what the "
                     "engine delivered while over-saturated, a separate figure never used for sizing.</p>\n");
}

/* Requests in flight against time for the runs at each bracket's ends: a sustained run levels
 * off, an over-saturated one keeps climbing. */
static void trace_charts(st_buf *h, const st_html_report *r)
{
    int any = 0;
    for (uint32_t i = 0; i < r->n_configs; i++)
        any |= r->configs[i].n_traces > 0;
    if (!any) {
        st_buf_printf(h, "<p>No runs to show.</p>\n");
        return;
    }
    st_buf_printf(h, "<div class=\"grid-runs\">\n");
    for (uint32_t i = 0; i < r->n_configs; i++) {
        const st_html_config *c = &r->configs[i];
        if (!c->n_traces || !c->traces)
            continue;
        st_svg_series se[4];
        st_svg_ref refs[4];
        uint32_t ns = 0, nr = 0;
        for (uint32_t k = 0; k < c->n_traces && ns < 4; k++) {
            const st_html_trace *t = &c->traces[k];
            se[ns++] = (st_svg_series){ .name = t->label,
                                        .x = t->t,
                                        .y = t->inflight,
                                        .n = t->n,
                                        .color = t->passed ? 2 : 1,
                                        .dashed = !t->passed,
                                        .width = 1.8 };
            if (t->passed && isfinite(t->window_start_s) && nr + 2 <= 4) {
                refs[nr++] = (st_svg_ref){ t->window_start_s, 1, "window", 2 };
                if (isfinite(t->window_end_s))
                    refs[nr++] = (st_svg_ref){ t->window_end_s, 1, "", 2 };
            }
        }
        char title[160];
        snprintf(title, sizeof title, "%.120s", name_of(c));
        st_svg_line_chart lc = { .title = title,
                                 .width = 400,
                                 .height = 250,
                                 .x = { "seconds since the run started (engine time)", 0, 0, NAN, 1, 0 },
                                 .y = { "requests in flight", 0, 0, NAN, 1, 0 },
                                 .series = se,
                                 .n_series = ns,
                                 .refs = refs,
                                 .n_refs = nr };
        st_buf_printf(h, "<figure class=\"run\">");
        (void)st_svg_line(h, &lc);
        st_buf_printf(h, "</figure>\n");
    }
    st_buf_printf(h, "</div>\n");
}

static int cmp_point_rate(const void *a, const void *b)
{
    double x = ((const st_html_point *)a)->rate, y = ((const st_html_point *)b)->rate;
    return x < y ? -1 : x > y;
}

/* p95 TTFT and TPOT against offered rate, one line per configuration. */
static void rate_charts(st_buf *h, const st_html_report *r)
{
    uint32_t n = r->n_configs, total = 0;
    for (uint32_t i = 0; i < n; i++)
        total += r->configs[i].n_points;
    if (!total) {
        st_buf_printf(h, "<p id=\"chart-rates\">No rate results to plot.</p>\n");
        return;
    }
    st_svg_series *st = calloc(n, sizeof *st), *sp = calloc(n, sizeof *sp);
    st_html_point *pts = calloc(total, sizeof *pts);
    double *xs = calloc(total, sizeof *xs), *yt = calloc(total, sizeof *yt), *yp = calloc(total, sizeof *yp);
    signed char *pass = calloc(total, 1);
    if (!st || !sp || !pts || !xs || !yt || !yp || !pass) {
        st_buf_fail(h, ST_BUF_NO_MEM);
        goto out;
    }
    uint32_t off = 0, ns = 0, inf_points = 0;
    double rmin = NAN, rmax = NAN, tmin = NAN, tmax = NAN, pmin = NAN, pmax = NAN;
    for (uint32_t i = 0; i < n; i++) {
        const st_html_config *c = &r->configs[i];
        if (!c->n_points || !c->points)
            continue;
        memcpy(pts + off, c->points, sizeof *pts * c->n_points);
        qsort(pts + off, c->n_points, sizeof *pts, cmp_point_rate);
        for (uint32_t j = 0; j < c->n_points; j++) {
            const st_html_point *p = &pts[off + j];
            xs[off + j] = p->rate;
            yt[off + j] = p->p95_ttft_ms;
            yp[off + j] = p->p95_tpot_ms;
            pass[off + j] = (signed char)(p->passed == 1 ? 1 : p->passed == 0 ? 0 : -1);
            if (isinf(p->rate))
                inf_points++;
            if (isfinite(p->rate) && p->rate > 0) {
                rmin = isnan(rmin) || p->rate < rmin ? p->rate : rmin;
                rmax = isnan(rmax) || p->rate > rmax ? p->rate : rmax;
            }
            if (isfinite(p->p95_ttft_ms) && p->p95_ttft_ms > 0) {
                tmin = isnan(tmin) || p->p95_ttft_ms < tmin ? p->p95_ttft_ms : tmin;
                tmax = isnan(tmax) || p->p95_ttft_ms > tmax ? p->p95_ttft_ms : tmax;
            }
            if (isfinite(p->p95_tpot_ms) && p->p95_tpot_ms > 0) {
                pmin = isnan(pmin) || p->p95_tpot_ms < pmin ? p->p95_tpot_ms : pmin;
                pmax = isnan(pmax) || p->p95_tpot_ms > pmax ? p->p95_tpot_ms : pmax;
            }
        }
        st[ns] = (st_svg_series){ .name = name_of(c),
                                  .x = xs + off,
                                  .y = yt + off,
                                  .n = c->n_points,
                                  .pass = pass + off,
                                  .color = (int)i,
                                  .dashed = c->is_baseline };
        sp[ns] = st[ns];
        sp[ns].y = yp + off;
        ns++;
        off += c->n_points;
    }
    if (isfinite(r->slo_ttft_ms) && r->slo_ttft_ms > 0) {
        tmin = isnan(tmin) || r->slo_ttft_ms < tmin ? r->slo_ttft_ms : tmin;
        tmax = isnan(tmax) || r->slo_ttft_ms > tmax ? r->slo_ttft_ms : tmax;
    }
    if (isfinite(r->slo_tpot_ms) && r->slo_tpot_ms > 0) {
        pmin = isnan(pmin) || r->slo_tpot_ms < pmin ? r->slo_tpot_ms : pmin;
        pmax = isnan(pmax) || r->slo_tpot_ms > pmax ? r->slo_tpot_ms : pmax;
    }
    int xlog = isfinite(rmin) && rmax / rmin >= 7.9;
    st_svg_axis xa = { "offered rate (req/s)", xlog, NAN, NAN, !xlog, 0 };
    char slo_t[80], slo_p[80], v[40];
    st_svg_fmt(v, sizeof v, r->slo_ttft_ms, 0);
    snprintf(slo_t, sizeof slo_t, "SLO %s ms", v);
    st_svg_fmt(v, sizeof v, r->slo_tpot_ms, 0);
    snprintf(slo_p, sizeof slo_p, "SLO %s ms", v);
    st_svg_ref rt = { r->slo_ttft_ms, 0, slo_t, -1 }, rp = { r->slo_tpot_ms, 0, slo_p, -1 };
    st_svg_line_chart ct = { .title = "p95 time to first token vs offered rate",
                             .width = 540,
                             .height = 360,
                             .x = xa,
                             .y = { "p95 TTFT (ms)", isfinite(tmin) && tmax / tmin > 20, NAN, NAN, 1, 0 },
                             .series = st,
                             .n_series = ns,
                             .refs = &rt,
                             .n_refs = isfinite(r->slo_ttft_ms) ? 1 : 0,
                             .pass_legend = 1 };
    st_svg_line_chart cp = ct;
    cp.title = "p95 time per output token vs offered rate";
    cp.y = (st_svg_axis){ "p95 TPOT (ms)", isfinite(pmin) && pmax / pmin > 20, NAN, NAN, 1, 0 };
    cp.series = sp;
    cp.refs = &rp;
    cp.n_refs = isfinite(r->slo_tpot_ms) ? 1 : 0;
    st_buf_printf(h, "<div class=\"grid2\" id=\"chart-rates\"><figure>");
    (void)st_svg_line(h, &ct);
    st_buf_printf(h,
                  "<figcaption>Each point is one run at a fixed offered rate; a dot met the whole SLO, "
                  "a cross did not. The dashed red line is the TTFT SLO%s.</figcaption></figure><figure>",
                  ct.y.log ? " (log scale)" : "");
    (void)st_svg_line(h, &cp);
    st_buf_printf(h,
                  "<figcaption>TPOT = (end &minus; first token) &divide; (output tokens &minus; 1). The "
                  "dashed red line is the TPOT SLO%s.",
                  cp.y.log ? " (log scale)" : "");
    if (inf_points)
        st_buf_printf(h, " The rate inf (all requests sent at once) sits apart at the right end of the rate "
                         "axis.");
    st_buf_printf(h, "</figcaption></figure></div>\n");
out:
    free(st);
    free(sp);
    free(pts);
    free(xs);
    free(yt);
    free(yp);
    free(pass);
}

static void dist_charts(st_buf *h, const st_html_report *r)
{
    uint32_t n = r->n_configs, nt = 0, np = 0;
    st_svg_sample_set *tt = calloc(n ? n : 1, sizeof *tt), *tp = calloc(n ? n : 1, sizeof *tp);
    char(*names)[NAME_MAX_BYTES + 48] = calloc(n ? n : 1, sizeof *names);
    if (!tt || !tp || !names) {
        st_buf_fail(h, ST_BUF_NO_MEM);
        goto out;
    }
    for (uint32_t i = 0; i < n; i++) {
        const st_html_config *c = &r->configs[i];
        char rt[40];
        fmt_rate(rt, sizeof rt, c->dist_rate);
        snprintf(names[i], sizeof names[i], "%.*s @ %s/s", NAME_MAX_BYTES, name_of(c), rt);
        if (c->ttft_ms && c->n_ttft)
            tt[nt++] = (st_svg_sample_set){ names[i], c->ttft_ms, c->n_ttft, (int)i };
        if (c->tpot_ms && c->n_tpot)
            tp[np++] = (st_svg_sample_set){ names[i], c->tpot_ms, c->n_tpot, (int)i };
    }
    if (!nt && !np) {
        st_buf_printf(h, "<p>No per-request latencies at a capacity rate to show.</p>\n");
        goto out;
    }
    char slo_t[80], slo_p[80], v[40];
    st_svg_fmt(v, sizeof v, r->slo_ttft_ms, 0);
    snprintf(slo_t, sizeof slo_t, "SLO %s ms", v);
    st_svg_fmt(v, sizeof v, r->slo_tpot_ms, 0);
    snprintf(slo_p, sizeof slo_p, "SLO %s ms", v);
    st_svg_ref rt = { r->slo_ttft_ms, 1, slo_t, -1 }, rp = { r->slo_tpot_ms, 1, slo_p, -1 };
    st_svg_dist_chart dt = { "TTFT distribution at each configuration's capacity rate",
                             540,
                             360,
                             { "TTFT (ms, log scale)", 1, NAN, NAN, 0, 0 },
                             tt,
                             nt,
                             &rt,
                             isfinite(r->slo_ttft_ms) ? 1 : 0,
                             1 };
    st_svg_dist_chart dp = { "TPOT distribution at each configuration's capacity rate",
                             540,
                             360,
                             { "TPOT (ms)", 0, NAN, NAN, 1, 0 },
                             tp,
                             np,
                             &rp,
                             isfinite(r->slo_tpot_ms) ? 1 : 0,
                             1 };
    st_buf_printf(h, "<div class=\"grid2\" id=\"chart-dist\"><figure>");
    (void)st_svg_cdf(h, &dt);
    st_buf_printf(h, "<figcaption>Fraction of requests with a TTFT at or below x. Where a line crosses the "
                     "p95 line is the p95 TTFT.</figcaption></figure><figure>");
    (void)st_svg_cdf(h, &dp);
    st_buf_printf(h, "<figcaption>Fraction of requests with a TPOT at or below x, at the same "
                     "rates.</figcaption></figure></div>\n");
out:
    free(tt);
    free(tp);
    free(names);
}

static int all_nan(const st_html_sample *s, uint32_t n, size_t off)
{
    for (uint32_t i = 0; i < n; i++) {
        double v;
        memcpy(&v, (const char *)&s[i] + off, sizeof v);
        if (isfinite(v))
            return 0;
    }
    return 1;
}

static void run_chart(st_buf *h, const st_html_config *c, const st_html_run *run)
{
    uint32_t n = run->n_samples;
    char title[96], rt[40];
    fmt_rate(rt, sizeof rt, run->rate);
    snprintf(title, sizeof title, "%s %s %s %.40s", rt, c->sustained && !run->verdict ? "" : "req/s", DASH,
             run->verdict       ? run->verdict
             : run->passed == 1 ? "passed"
             : run->passed == 0 ? "failed"
                                : "no verdict");
    st_buf_printf(h, "<figure class=\"run\">");
    if (!n || !run->samples) {
        st_buf_printf(h,
                      "<p><b>%s</b><br>No metric samples for this run (the engine exposed no "
                      "/metrics, or none were scraped).</p></figure>\n",
                      title);
        return;
    }
    double *t = malloc(sizeof(double) * n * 5);
    if (!t) {
        st_buf_fail(h, ST_BUF_NO_MEM);
        return;
    }
    double *kv = t + n, *ru = t + 2 * n, *wa = t + 3 * n, *pr = t + 4 * n;
    for (uint32_t i = 0; i < n; i++) {
        t[i] = run->samples[i].t_s;
        kv[i] = run->samples[i].kv_usage;
        ru[i] = run->samples[i].running;
        wa[i] = run->samples[i].waiting;
        pr[i] = run->samples[i].preemptions;
    }
    st_svg_series se[4];
    uint32_t ns = 0;
    const char *missing[4];
    int nm = 0;
    if (!all_nan(run->samples, n, offsetof(st_html_sample, kv_usage)))
        se[ns++] = (st_svg_series){ .name = "KV cache (left)", .x = t, .y = kv, .n = n, .color = 0, .width = 2.2 };
    else
        missing[nm++] = "KV cache usage";
    if (!all_nan(run->samples, n, offsetof(st_html_sample, running)))
        se[ns++] =
            (st_svg_series){ .name = "running", .x = t, .y = ru, .n = n, .color = 2, .secondary = 1, .width = 1.6 };
    else
        missing[nm++] = "running";
    if (!all_nan(run->samples, n, offsetof(st_html_sample, waiting)))
        se[ns++] =
            (st_svg_series){ .name = "waiting", .x = t, .y = wa, .n = n, .color = 1, .secondary = 1, .width = 1.6 };
    else
        missing[nm++] = "waiting";
    if (!all_nan(run->samples, n, offsetof(st_html_sample, preemptions)))
        se[ns++] = (st_svg_series){
            .name = "preemptions", .x = t, .y = pr, .n = n, .color = 5, .secondary = 1, .dashed = 1, .width = 1.6
        };
    else
        missing[nm++] = "preemptions";
    for (uint32_t i = 0; i < ns && n < 4; i++)
        se[i].markers = 1; /* a few scrapes only: show the points themselves */
    st_svg_ref ref = { 0.9, 0, "90 %", 9 };
    st_svg_line_chart lc = { .title = title,
                             .width = 400,
                             .height = 250,
                             .x = { "seconds since the run started", 0, 0, NAN, 1, 0 },
                             .y = { "KV cache usage", 0, 0, 1, 1, 1 },
                             .y2 = { "requests", 0, 0, NAN, 1, 0 },
                             .series = se,
                             .n_series = ns,
                             .refs = &ref,
                             .n_refs = 1 };
    (void)st_svg_line(h, &lc);
    free(t);
    if (nm) {
        st_buf_printf(h, "<figcaption>Not exposed by the engine: ");
        for (int i = 0; i < nm; i++)
            st_buf_printf(h, "%s%s", i ? ", " : "", missing[i]);
        st_buf_printf(h, ".</figcaption>");
    }
    (void)c;
    st_buf_printf(h, "</figure>\n");
}

static int cmp_run_rate(const void *a, const void *b)
{
    double x = ((const st_html_run *)a)->rate, y = ((const st_html_run *)b)->rate;
    return x < y ? -1 : x > y;
}

static int has_samples(const st_html_config *c)
{
    for (uint32_t k = 0; c->runs && k < c->n_runs; k++)
        if (c->runs[k].samples && c->runs[k].n_samples)
            return 1;
    return 0;
}

static void timelines(st_buf *h, const st_html_report *r)
{
    int any = 0;
    for (uint32_t i = 0; i < r->n_configs; i++)
        any |= has_samples(&r->configs[i]);
    if (!any) {
        st_buf_printf(h, "<p id=\"no-metrics\">No server-side metrics were scraped in this audit (the engine "
                         "exposed no <code>/metrics</code>, or none could be read).</p>\n");
        return;
    }
    for (uint32_t i = 0; i < r->n_configs; i++) {
        const st_html_config *c = &r->configs[i];
        if (!c->n_runs || !c->runs)
            continue;
        st_buf_printf(h, "<h3>");
        swatch(h, i);
        ht(h, name_of(c), NAME_MAX_BYTES);
        st_buf_printf(h, "</h3>\n");
        if (!has_samples(c)) {
            st_buf_printf(h, "<p>No metric samples for any run of this configuration.</p>\n");
            continue;
        }
        st_html_run *runs = malloc(sizeof *runs * c->n_runs);
        if (!runs) {
            st_buf_fail(h, ST_BUF_NO_MEM);
            return;
        }
        memcpy(runs, c->runs, sizeof *runs * c->n_runs);
        qsort(runs, c->n_runs, sizeof *runs, cmp_run_rate);
        st_buf_printf(h, "<div class=\"grid-runs\">\n");
        for (uint32_t k = 0; k < c->n_runs; k++)
            run_chart(h, c, &runs[k]);
        st_buf_printf(h, "</div>\n");
        free(runs);
    }
}

static void changes_table(st_buf *h, const st_html_report *r)
{
    st_buf_printf(h, "<table class=\"changes\" id=\"changes-table\"><thead><tr><th>Config</th>"
                     "<th>Changes against the baseline</th><th>Why try it</th></tr></thead><tbody>\n");
    for (uint32_t i = 0; i < r->n_configs; i++) {
        const st_html_config *c = &r->configs[i];
        st_buf_printf(h, "<tr><td class=\"cfg\">");
        swatch(h, i);
        ht(h, name_of(c), NAME_MAX_BYTES);
        st_buf_printf(h, "</td><td>");
        if (c->changes && *c->changes) {
            st_buf_printf(h, "<code>");
            hs(h, c->changes);
            st_buf_printf(h, "</code>");
        } else {
            st_buf_printf(h, c->is_baseline ? "(the baseline itself)" : "(nothing)");
        }
        if (c->command && *c->command) {
            st_buf_printf(h, "<span class=\"small\">started as <code>");
            hs(h, c->command);
            st_buf_printf(h, "</code></span>");
        }
        st_buf_printf(h, "</td><td>");
        hs(h, c->reason ? c->reason : "");
        st_buf_printf(h, "</td></tr>\n");
    }
    st_buf_printf(h, "</tbody></table>\n");
}

static const char *const default_method[] = {
    "A rate passes when every request completed and the p95 TTFT and p95 TPOT are within the "
    "SLO (and any other SLO term the spec sets). Capacity at SLO is the delivered request "
    "throughput at the highest passing rate: completed requests divided by the time from the "
    "first send to the last completion, drain included. The true capacity lies between that "
    "rate and the next tested one, as long as each run reaches a steady state (a run whose "
    "arrivals end before its requests do tests a burst, not a sustained rate); when the highest "
    "tested rate passed, capacity may be higher than measured.",
    "TTFT is measured from a request's scheduled send time to its first token, so client-side "
    "queueing counts against the server. TPOT is (end - first token) / (output tokens - 1).",
    "$ per 1M output tokens = price per GPU-hour x GPUs per replica / (output tok/s x 3600) x "
    "1,000,000. Replicas at peak = ceil(peak req/s / capacity). Monthly cost = replicas x GPUs "
    "per replica x price per GPU-hour x 730 h.",
    "Out of scope: output quality (e.g. under quantization) is not measured.",
};

static void method(st_buf *h, const st_html_report *r)
{
    const char *const *m = r->method;
    uint32_t n = r->n_method;
    if (!m || !n) {
        m = default_method;
        n = sizeof default_method / sizeof default_method[0];
    }
    for (uint32_t i = 0; i < n; i++)
        hp(h, m[i]);
    st_buf_printf(h, "<h3 id=\"notes\">Notes</h3>\n");
    if (!r->n_notes || !r->notes) {
        st_buf_printf(h, "<p>The data called for no notes.</p>\n");
        return;
    }
    st_buf_printf(h, "<ul class=\"notes\">\n");
    for (uint32_t i = 0; i < r->n_notes; i++) {
        const st_html_note *nt = &r->notes[i];
        const char *cls = nt->sev == ST_HTML_ERROR ? "error" : nt->sev == ST_HTML_WARN ? "warn" : "info";
        const char *lab = nt->sev == ST_HTML_ERROR ? "problem" : nt->sev == ST_HTML_WARN ? "caution" : "note";
        st_buf_printf(h, "<li class=\"%s\"><span class=\"sev\">%s</span>", cls, lab);
        if (nt->config && *nt->config) {
            st_buf_printf(h, "<b>");
            ht(h, nt->config, NAME_MAX_BYTES);
            st_buf_printf(h, ":</b> ");
        }
        hs(h, nt->text ? nt->text : "");
        if (nt->detail && *nt->detail) {
            st_buf_printf(h, "<pre class=\"log\">");
            ht_lines(h, nt->detail, TEXT_MAX);
            st_buf_printf(h, "</pre>");
        }
        st_buf_printf(h, "</li>\n");
    }
    st_buf_printf(h, "</ul>\n");
}

/* ---- document --------------------------------------------------------------------------- */

/* A two-column table of keys and values. */
static void kv_table(st_buf *h, const st_html_kv *kv, uint32_t n)
{
    st_buf_printf(h, "<table class=\"kv\"><tbody>\n");
    for (uint32_t i = 0; i < n; i++) {
        st_buf_printf(h, "<tr><th scope=\"row\">");
        hs(h, kv[i].key);
        st_buf_printf(h, "</th><td>");
        hs(h, kv[i].value);
        st_buf_printf(h, "</td></tr>\n");
    }
    st_buf_printf(h, "</tbody></table>\n");
}

static void table_section(st_buf *h, const st_html_table *t)
{
    if (!t->rows || !t->cols || !t->head || !t->cells)
        return;
    st_buf_printf(h, "<section id=\"");
    hs(h, t->id ? t->id : "extra");
    st_buf_printf(h, "\">\n<h2>");
    hs(h, t->title ? t->title : "");
    st_buf_printf(h, "</h2>\n");
    if (t->intro)
        hp(h, t->intro);
    st_buf_printf(h, "<table><thead><tr>");
    for (uint32_t c = 0; c < t->cols; c++) {
        st_buf_printf(h, "<th>");
        hs(h, t->head[c]);
        st_buf_printf(h, "</th>");
    }
    st_buf_printf(h, "</tr></thead><tbody>\n");
    for (uint32_t i = 0; i < t->rows; i++) {
        st_buf_printf(h, "<tr>");
        for (uint32_t c = 0; c < t->cols; c++) {
            st_buf_printf(h, c && !(t->text_cols >> c & 1) ? "<td class=\"num\">" : "<td>");
            hs(h, t->cells[(size_t)i * t->cols + c]);
            st_buf_printf(h, "</td>");
        }
        st_buf_printf(h, "</tr>\n");
    }
    st_buf_printf(h, "</tbody></table>\n");
    if (t->after)
        hp(h, t->after);
    st_buf_printf(h, "</section>\n");
}

/* The configurations in the order shown: the caller's order when it is a permutation, else the
 * cheapest first (or as given with keep_order). */
static void order_configs(const st_html_report *r, ord *o)
{
    uint32_t n = r->n_configs;
    for (uint32_t i = 0; i < n; i++)
        o[i] = (ord){ &r->configs[i], i };
    if (r->order) {
        /* the caller's order, if it is a permutation; else ours */
        unsigned char *seen = calloc(n ? n : 1, 1);
        int ok = seen != NULL;
        for (uint32_t i = 0; ok && i < n; i++) {
            if (r->order[i] >= n || seen[r->order[i]])
                ok = 0;
            else
                seen[r->order[i]] = 1;
        }
        free(seen);
        if (ok)
            for (uint32_t i = 0; i < n; i++)
                o[i] = (ord){ &r->configs[r->order[i]], r->order[i] };
        else
            qsort(o, n, sizeof *o, cmp_cheapest);
    } else if (!r->keep_order) {
        qsort(o, n, sizeof *o, cmp_cheapest);
    }
}

/* The document's head (policy, generator, title, style) and the page's header and banners. */
static void page_top(st_buf *h, const st_html_report *r)
{
    const char *title = r->title && *r->title ? r->title : "Serving audit";
    st_buf_printf(h, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                     "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
                     "style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'\">\n"
                     "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    if (r->generator && *r->generator) {
        st_buf_printf(h, "<meta name=\"generator\" content=\"");
        ht(h, r->generator, 200);
        st_buf_printf(h, "\">\n");
    }
    st_buf_printf(h, "<title>%s%s", r->partial ? "[PARTIAL] " : "", r->prediction ? "[PREDICTION] " : "");
    ht(h, title, 300);
    st_buf_printf(h, "</title>\n<style>\n%s</style>\n</head>\n<body>\n<main>\n", CSS);

    st_buf_printf(h, "<header class=\"top\"><h1>");
    ht(h, title, 300);
    st_buf_printf(h, "</h1>");
    if (r->subtitle && *r->subtitle) {
        st_buf_printf(h, "<p class=\"sub\">");
        ht(h, r->subtitle, 600);
        st_buf_printf(h, "</p>");
    }
    st_buf_printf(h, "</header>\n");
    banners(h, r);
}

/* The headline (with the cost charts), the setup, and "Your traffic" when there is one. */
static void overview_sections(st_buf *h, const st_html_report *r, const ord *o)
{
    st_buf_printf(h, "<section id=\"headline\">\n<h2>Headline</h2>\n<p class=\"lead\">");
    if (r->headline && *r->headline)
        hs(h, r->headline);
    else
        default_headline(h, r);
    st_buf_printf(h, "</p>\n");
    if (r->n_configs)
        cost_charts(h, r, o);
    st_buf_printf(h, "</section>\n");

    st_buf_printf(h, "<section id=\"setup\">\n<h2>Setup</h2>\n");
    kv_table(h, r->setup, r->n_setup);
    st_buf_printf(h, "</section>\n");

    if (r->n_traffic) {
        st_buf_printf(h, "<section id=\"traffic\">\n<h2>Your traffic</h2>\n");
        kv_table(h, r->traffic, r->n_traffic);
        if (r->n_traffic_advice) {
            st_buf_printf(h, "<ul>\n");
            for (uint32_t i = 0; i < r->n_traffic_advice; i++) {
                st_buf_printf(h, "<li>");
                hs(h, r->traffic_advice[i]);
                st_buf_printf(h, "</li>\n");
            }
            st_buf_printf(h, "</ul>\n");
        }
        st_buf_printf(h, "</section>\n");
    }
}

/* The results: the table, the search and its bracket's runs (sustained), the latency charts. */
static void results_section(st_buf *h, const st_html_report *r, const ord *o)
{
    uint32_t n = r->n_configs;
    st_buf_printf(h, "<section id=\"results\">\n<h2>Results, cheapest first</h2>\n");
    if (n)
        results_table(h, r, o);
    else
        st_buf_printf(h, "<p>No configuration has results yet.</p>\n");
    if (r->sustained && n) {
        st_buf_printf(h, "<h3>The search</h3>\n");
        search_table(h, r, o);
        st_buf_printf(h, "<h3>Requests in flight at the bracket's ends</h3>\n<p>The run that sustained the capacity "
                         "(solid, with its measurement window) and the one above it that did not (dashed): a "
                         "steady state levels off, a growing queue keeps climbing.</p>\n");
        trace_charts(h, r);
    }
    st_buf_printf(h, "<h3>Latency against %s</h3>\n", r->concurrency ? "concurrency" : "offered rate");
    rate_charts(h, r);
    st_buf_printf(h, "<h3>Latency distribution at the capacity rate</h3>\n");
    dist_charts(h, r);
    st_buf_printf(h, "</section>\n");
}

/* What each configuration changes, the method, the timelines, and the footer. */
static void page_end(st_buf *h, const st_html_report *r)
{
    st_buf_printf(h, "<section id=\"changes\">\n<h2>What each configuration changes</h2>\n");
    changes_table(h, r);
    st_buf_printf(h, "</section>\n");

    st_buf_printf(h, "<section id=\"method\">\n<h2>Method and limits</h2>\n");
    method(h, r);
    st_buf_printf(h, "</section>\n");

    st_buf_printf(h, "<section id=\"timelines\">\n<h2>Server-side timelines per run</h2>\n"
                     "<p>Scraped from the engine's <code>/metrics</code> about once a second while each "
                     "rate ran: KV cache usage (a fraction of the cache, left axis), running and waiting "
                     "requests and preemptions since the run started (right axis).</p>\n");
    timelines(h, r);
    st_buf_printf(h, "</section>\n");

    st_buf_printf(h, "<footer>");
    if (r->prediction)
        st_buf_printf(h, "PREDICTION (engine model, not measured). ");
    if (r->partial)
        st_buf_printf(h, "PARTIAL report. ");
    st_buf_printf(h, "Generated by ");
    ht(h, r->generator && *r->generator ? r->generator : "servetune", 200);
    st_buf_printf(h, ". Every figure is reproducible from the stored per-request records.</footer>\n"
                     "</main>\n</body>\n</html>\n");
}

int st_html_render(const st_html_report *r, st_buf *out, char *err, size_t errlen)
{
    st_buf *h = out;
    uint32_t n = r->n_configs;
    ord *o = calloc(n ? n : 1, sizeof *o);
    if (!o) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    order_configs(r, o);
    page_top(h, r);
    overview_sections(h, r, o);
    results_section(h, r, o);
    for (uint32_t t = 0; t < r->n_extra; t++)
        table_section(h, &r->extra[t]);
    page_end(h, r);
    free(o);
    if (st_buf_error(out)) {
        char why[96];
        snprintf(err, errlen, "HTML report: %s", st_buf_strerror(out, why, sizeof why));
        return -1;
    }
    return 0;
}

int st_html_write_file(const st_html_report *r, const char *path, size_t max_bytes, char *err, size_t errlen)
{
    st_buf b;
    st_buf_init(&b, max_bytes ? max_bytes : ST_HTML_MAX_BYTES);
    int rc = st_html_render(r, &b, err, errlen);
    if (rc == 0)
        rc = st_write_file_atomic(path, b.data ? b.data : "", b.len, err, errlen);
    st_buf_free(&b);
    return rc;
}
