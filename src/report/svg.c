#include "report/svg.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

/* Okabe-Ito based, colour-blind safe, readable on white and in grey-scale print. */
static const char *const palette[ST_SVG_PALETTE] = {
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#882255", "#56B4E9", "#332288", "#117733", "#6B7280",
};
#define GREY "#6B7280"
#define SLO_RED "#B91C1C"
#define GRID "#E5E7EB"
#define AXIS "#9CA3AF"
#define INK "#111827"
#define MUTED "#4B5563"
#define FONT "system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', Arial, sans-serif"

const char *st_svg_color(int i)
{
    if (i < 0)
        return GREY;
    return palette[i % ST_SVG_PALETTE];
}

/* Charts are written into the caller's st_buf, whose error is sticky (core/buf.h): the drawing
 * helpers append without checking each call; each st_svg_* entry point checks once. */

static void wtext(st_buf *w, const char *s) { (void)st_svg_text(w, s, 0); }

/* Length in bytes of the valid UTF-8 sequence at s (1..4), or 0 when it is not valid. */
static size_t utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    size_t n;
    unsigned min;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
        min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        min = 0x10000;
    } else {
        return 0;
    }
    unsigned cp = c & (0x3F >> (n - 1));
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

int st_svg_text(st_buf *b, const char *s, size_t max_bytes)
{
    if (!s)
        return 0;
    const unsigned char *p = (const unsigned char *)s;
    size_t used = 0;
    char tmp[8];
    while (*p) {
        size_t n = utf8_len(p);
        size_t step = n ? n : 1;
        if (max_bytes && used + step > max_bytes)
            return st_buf_puts(b, "...");
        int rc = 0;
        if (!n) {
            rc = st_buf_puts(b, "\xEF\xBF\xBD"); /* U+FFFD for an invalid byte */
        } else if (n == 1) {
            unsigned c = *p;
            if (c == '\t' || c == '\n' || c == '\r') {
                rc = st_buf_puts(b, " ");
            } else if (c < 0x20 || c == 0x7F) {
                rc = 0; /* dropped */
            } else {
                tmp[0] = (char)c;
                tmp[1] = '\0';
                rc = st_buf_html(b, tmp);
            }
        } else {
            rc = st_buf_append(b, p, n);
        }
        if (rc < 0)
            return -1;
        p += step;
        used += step;
    }
    return 0;
}

/* Display width estimate of s in pixels at the given font size (UTF-8 code points). */
static double text_w(const char *s, double font)
{
    double n = 0;
    for (const unsigned char *p = (const unsigned char *)s; s && *p; p++) {
        if ((*p & 0xC0) == 0x80)
            continue;
        if (*p == 'm' || *p == 'w' || *p == 'M' || *p == 'W')
            n += 0.85;
        else if (*p == 'i' || *p == 'l' || *p == '.' || *p == ',' || *p == ' ' || *p == '1')
            n += 0.35;
        else if (*p >= 'A' && *p <= 'Z')
            n += 0.68;
        else
            n += 0.56;
    }
    return n * font;
}

/* ---- numbers --------------------------------------------------------------------------- */

static void strip_zeros(char *s)
{
    char *dot = strchr(s, '.');
    if (!dot)
        return;
    char *end = s + strlen(s) - 1;
    while (end > dot && *end == '0')
        *end-- = '\0';
    if (end == dot)
        *end = '\0';
}

void st_svg_fmt(char *out, size_t outlen, double v, double step)
{
    if (!outlen)
        return;
    if (!isfinite(v)) {
        snprintf(out, outlen, "%s", isnan(v) ? "n/a" : (v > 0 ? "inf" : "-inf"));
        return;
    }
    double a = fabs(v);
    if (a == 0 || (step > 0 && a < step * 1e-6)) {
        snprintf(out, outlen, "0");
        return;
    }
    const char *suffix = "";
    double div = 1;
    if (a >= 1e9) {
        suffix = "G";
        div = 1e9;
    } else if (a >= 1e6) {
        suffix = "M";
        div = 1e6;
    } else if (a >= 1e4) {
        suffix = "k";
        div = 1e3;
    }
    double sv = v / div, sa = a / div, sstep = step / div;
    int d;
    if (sstep > 0)
        d = (int)ceil(-log10(sstep) - 1e-9);
    else
        d = 2 - (int)floor(log10(sa));
    if (d < 0)
        d = 0;
    if (d > 6)
        d = 6;
    char num[64];
    snprintf(num, sizeof num, "%.*f", d, sv);
    strip_zeros(num);
    if (strcmp(num, "-0") == 0)
        snprintf(num, sizeof num, "0");
    snprintf(out, outlen, "%s%s", num, suffix);
}

/* ---- scales ---------------------------------------------------------------------------- */

#define MAX_TICKS 40

typedef struct scale {
    int log, percent;
    double lo, hi; /* data range of the axis */
    double p0, p1; /* pixel positions of lo and hi */
    double ticks[MAX_TICKS];
    int nt;
    double step;          /* linear tick spacing (0 on a log axis) */
    int has_inf;          /* x axis only: +inf values sit in a slot right of p1 (rate "inf") */
    double inf_px, p_end; /* the slot's centre and the plot's right edge */
} scale;

static double nice_step(double x)
{
    if (!(x > 0) || !isfinite(x))
        return 1;
    double k = floor(log10(x));
    double base = pow(10, k);
    double f = x / base;
    double nf = f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10;
    return nf * base;
}

/* 1-2-5 candidates for log ticks. */
static double cand_floor(double v)
{
    double base = pow(10, floor(log10(v)));
    static const double m[] = { 5, 2, 1 };
    for (int i = 0; i < 3; i++)
        if (m[i] * base <= v * (1 + 1e-9))
            return m[i] * base;
    return base;
}

static double cand_ceil(double v)
{
    double base = pow(10, floor(log10(v)));
    static const double m[] = { 1, 2, 5, 10 };
    for (int i = 0; i < 4; i++)
        if (m[i] * base >= v * (1 - 1e-9))
            return m[i] * base;
    return 10 * base;
}

static double cand_next(double c)
{
    double k = floor(log10(c) + 1e-9);
    double base = pow(10, k);
    double m = round(c / base);
    return m < 1.5 ? 2 * base : m < 3 ? 5 * base : 10 * base;
}

static double cand_prev(double c)
{
    double k = floor(log10(c) + 1e-9);
    double base = pow(10, k);
    double m = round(c / base);
    return m > 3 ? 2 * base : m > 1.5 ? base : 0.5 * base;
}

/* Fits the axis to [dmin, dmax] (finite, or NAN when there is no data). */
static void scale_fit(scale *s, const st_svg_axis *ax, double dmin, double dmax, int target)
{
    memset(s, 0, sizeof *s);
    s->log = ax->log;
    s->percent = ax->percent;
    if (target < 2)
        target = 2;
    int have_min = isfinite(ax->min) && (!ax->log || ax->min > 0);
    int have_max = isfinite(ax->max) && (!ax->log || ax->max > 0);
    if (have_min)
        dmin = ax->min;
    if (have_max)
        dmax = ax->max;
    if (s->log) {
        if (!(dmin > 0) || !isfinite(dmin))
            dmin = have_max ? dmax / 10 : 1;
        if (!(dmax > 0) || !isfinite(dmax))
            dmax = dmin * 10;
        if (dmax < dmin) {
            double t = dmin;
            dmin = dmax;
            dmax = t;
        }
        double lo = have_min ? dmin : cand_floor(dmin);
        double hi = have_max ? dmax : cand_ceil(dmax);
        if (!(hi > lo)) {
            lo = cand_prev(cand_floor(lo));
            hi = cand_next(cand_ceil(hi));
        }
        s->lo = lo;
        s->hi = hi;
        /* 1-2-5 ticks when they are few enough, else powers of ten, else every few decades */
        int every[] = { 0, 1, 2, 3, 5, 10 };
        for (int pass = 0; pass < 6; pass++) {
            s->nt = 0;
            double c = cand_ceil(lo);
            for (int guard = 0; guard < 400 && c <= hi * (1 + 1e-9) && s->nt < MAX_TICKS; guard++) {
                double k = floor(log10(c) + 1e-9);
                double m = round(c / pow(10, k));
                int keep = pass == 0 ? 1 : (m < 1.5 && ((long)fabs(k) % every[pass]) == 0);
                if (keep)
                    s->ticks[s->nt++] = c;
                c = cand_next(c);
            }
            if (s->nt <= target + 3 && (s->nt >= 2 || pass > 0))
                break;
            if (pass > 0 && s->nt <= target + 3)
                break;
        }
        if (s->nt < 2) { /* a narrow range with at most one 1-2-5 value: label the ends */
            s->nt = 0;
            s->ticks[s->nt++] = lo;
            s->ticks[s->nt++] = hi;
        }
        return;
    }
    if (!isfinite(dmin) || !isfinite(dmax)) {
        dmin = have_min ? dmin : 0;
        dmax = have_max ? dmax : dmin + 1;
    }
    if (dmax < dmin) {
        double t = dmin;
        dmin = dmax;
        dmax = t;
    }
    if (ax->zero) {
        if (!have_min && dmin > 0)
            dmin = 0;
        if (!have_max && dmax < 0)
            dmax = 0;
    }
    if (dmax == dmin) {
        double pad = dmin == 0 ? 1 : fabs(dmin) * 0.1;
        if (!have_min)
            dmin -= dmin == 0 ? 0 : pad;
        dmax += pad;
        if (dmax == dmin)
            dmax = dmin + 1;
    }
    double step = nice_step((dmax - dmin) / target);
    double lo = have_min ? dmin : floor(dmin / step + 1e-9) * step;
    double hi = have_max ? dmax : ceil(dmax / step - 1e-9) * step;
    if (!(hi > lo))
        hi = lo + step;
    s->lo = lo;
    s->hi = hi;
    s->step = step;
    double k0 = ceil(lo / step - 1e-9), k1 = floor(hi / step + 1e-9);
    for (double k = k0; k <= k1 && s->nt < MAX_TICKS; k++)
        s->ticks[s->nt++] = k * step;
}

static int usable(const scale *s, double v)
{
    if (s->has_inf && isinf(v) && v > 0)
        return 1;
    return isfinite(v) && (!s->log || v > 0);
}

static double sc_map(const scale *s, double v)
{
    double a = s->lo, b = s->hi, t = v;
    if (s->has_inf && isinf(v) && v > 0)
        return s->inf_px;
    if (s->log) {
        a = log10(s->lo);
        b = log10(s->hi);
        t = log10(v);
    }
    double f = b > a ? (t - a) / (b - a) : 0.5;
    if (f < 0)
        f = 0;
    if (f > 1)
        f = 1;
    return s->p0 + f * (s->p1 - s->p0);
}

static void tick_label(const scale *s, double v, char *out, size_t n)
{
    if (s->percent) {
        char t[48];
        st_svg_fmt(t, sizeof t, v * 100, s->log ? 0 : s->step * 100);
        snprintf(out, n, "%s%%", t);
    } else {
        st_svg_fmt(out, n, v, s->log ? 0 : s->step);
    }
}

static double ticks_max_w(const scale *s, double font)
{
    double m = 0;
    char t[64];
    for (int i = 0; i < s->nt; i++) {
        tick_label(s, s->ticks[i], t, sizeof t);
        double w = text_w(t, font);
        if (w > m)
            m = w;
    }
    return m;
}

/* ---- legend ---------------------------------------------------------------------------- */

enum { LEG_LINE, LEG_PASS, LEG_FAIL, LEG_REF, LEG_BOX };

typedef struct leg {
    const char *name;
    const char *color;
    int kind, dashed;
    double x, y; /* position after layout (relative to the legend origin) */
} leg;

#define LEG_FONT 11.5
#define LEG_ROW 18

/* Lays out entries in rows within width; returns the number of rows. */
static int legend_layout(leg *e, int n, double width)
{
    double x = 0;
    int row = 0;
    for (int i = 0; i < n; i++) {
        double w = 26 + text_w(e[i].name, LEG_FONT) + 16;
        if (x > 0 && x + w > width) {
            row++;
            x = 0;
        }
        e[i].x = x;
        e[i].y = row * LEG_ROW;
        x += w;
    }
    return n ? row + 1 : 0;
}

static void legend_draw(st_buf *w, const leg *e, int n, double ox, double oy)
{
    for (int i = 0; i < n; i++) {
        double x = ox + e[i].x, y = oy + e[i].y + 9;
        switch (e[i].kind) {
        case LEG_PASS:
            st_buf_printf(w, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"/>", x + 10, y, GREY);
            break;
        case LEG_FAIL:
            st_buf_printf(w,
                          "<path d=\"M%.1f %.1fL%.1f %.1fM%.1f %.1fL%.1f %.1f\" stroke=\"%s\" "
                          "stroke-width=\"2\"/>",
                          x + 6, y - 4, x + 14, y + 4, x + 6, y + 4, x + 14, y - 4, GREY);
            break;
        case LEG_BOX:
            st_buf_printf(w, "<rect x=\"%.1f\" y=\"%.1f\" width=\"16\" height=\"10\" fill=\"%s\"/>", x + 2, y - 5,
                          e[i].color);
            break;
        default:
            st_buf_printf(w,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                          "stroke-width=\"%s\"%s/>",
                          x, y, x + 20, y, e[i].color, e[i].kind == LEG_REF ? "1.5" : "2.5",
                          e[i].dashed ? " stroke-dasharray=\"6 4\"" : "");
        }
        st_buf_printf(w, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%.1f\" fill=\"%s\">", x + 26, y + 4, LEG_FONT, INK);
        wtext(w, e[i].name);
        st_buf_printf(w, "</text>");
    }
}

/* ---- frame: svg root, title, grid, ticks, axis titles ---------------------------------- */

static void svg_open(st_buf *w, int width, int height, const char *title)
{
    st_buf_printf(w,
                  "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"%d\" height=\"%d\" "
                  "viewBox=\"0 0 %d %d\" role=\"img\" font-family=\"%s\" font-size=\"11\">",
                  width, height, width, height, FONT);
    if (title && *title) {
        st_buf_printf(w, "<title>");
        wtext(w, title);
        st_buf_printf(w, "</title>");
    }
    st_buf_printf(w, "<rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>", width, height);
    if (title && *title) {
        st_buf_printf(w, "<text x=\"8\" y=\"18\" font-size=\"13.5\" font-weight=\"600\" fill=\"%s\">", INK);
        wtext(w, title);
        st_buf_printf(w, "</text>");
    }
}

static void halo_text_attrs(st_buf *w)
{
    st_buf_printf(w, " paint-order=\"stroke\" stroke=\"#fff\" stroke-width=\"3\" stroke-linejoin=\"round\"");
}

/* Grid and ticks of x (bottom) and y (left), optional y2 (right). */
static void draw_axes(st_buf *w, const scale *x, const scale *y, const scale *y2, const char *xl, const char *yl,
                      const char *y2l, int width)
{
    char t[64];
    double top = y->p1, bottom = y->p0, left = x->p0, right = x->p1;
    double rend = x->has_inf ? x->p_end : right; /* right edge of the plot, inf slot included */
    for (int i = 0; i < y->nt; i++) {
        double py = sc_map(y, y->ticks[i]);
        st_buf_printf(w, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>", left, py, rend, py,
                      GRID);
        tick_label(y, y->ticks[i], t, sizeof t);
        st_buf_printf(w, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"%s\">%s</text>", left - 6, py + 4,
                      MUTED, t);
    }
    for (int i = 0; i < x->nt; i++) {
        double px = sc_map(x, x->ticks[i]);
        st_buf_printf(w, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>", px, top, px, bottom,
                      GRID);
        tick_label(x, x->ticks[i], t, sizeof t);
        st_buf_printf(w, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"%s\">%s</text>", px, bottom + 15,
                      MUTED, t);
    }
    if (y2) {
        for (int i = 0; i < y2->nt; i++) {
            double py = sc_map(y2, y2->ticks[i]);
            tick_label(y2, y2->ticks[i], t, sizeof t);
            st_buf_printf(w, "<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\">%s</text>", rend + 6, py + 4, MUTED, t);
        }
    }
    if (x->has_inf) { /* the "inf" slot, set off from the axis by a break mark */
        st_buf_printf(w, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>", x->inf_px, top,
                      x->inf_px, bottom, GRID);
        st_buf_printf(w, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"%s\">inf</text>", x->inf_px,
                      bottom + 15, MUTED);
        double mid = (right + x->inf_px) / 2;
        st_buf_printf(w,
                      "<path d=\"M%.1f %.1fH%.1fM%.1f %.1fH%.1fM%.1f %.1fl4 -8M%.1f %.1fl4 -8\" "
                      "fill=\"none\" stroke=\"%s\"/>",
                      right, bottom, mid - 4, mid + 4, bottom, x->p_end, mid - 6, bottom + 4, mid - 1, bottom + 4,
                      AXIS);
    }
    st_buf_printf(w, "<path d=\"M%.1f %.1fV%.1fH%.1f\" fill=\"none\" stroke=\"%s\"/>", left, top, bottom, right, AXIS);
    if (y2)
        st_buf_printf(w, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>", rend, top, rend,
                      bottom, AXIS);
    if (xl && *xl) {
        st_buf_printf(w, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"12\" fill=\"%s\">",
                      (left + rend) / 2, bottom + 32, INK);
        wtext(w, xl);
        st_buf_printf(w, "</text>");
    }
    if (yl && *yl) {
        double cy = (top + bottom) / 2;
        st_buf_printf(w,
                      "<text transform=\"translate(14 %.1f) rotate(-90)\" text-anchor=\"middle\" "
                      "font-size=\"12\" fill=\"%s\">",
                      cy, INK);
        wtext(w, yl);
        st_buf_printf(w, "</text>");
    }
    if (y2 && y2l && *y2l) {
        double cy = (top + bottom) / 2;
        st_buf_printf(w,
                      "<text transform=\"translate(%d %.1f) rotate(90)\" text-anchor=\"middle\" "
                      "font-size=\"12\" fill=\"%s\">",
                      width - 12, cy, INK);
        wtext(w, y2l);
        st_buf_printf(w, "</text>");
    }
}

/* ---- line chart ------------------------------------------------------------------------ */

static void data_range(const st_svg_line_chart *c, int axis, int log, double *mn, double *mx)
{
    double lo = NAN, hi = NAN;
    for (uint32_t s = 0; s < c->n_series; s++) {
        const st_svg_series *se = &c->series[s];
        if (!se->x || !se->y)
            continue;
        if (axis != 0 && (axis == 2) != (se->secondary != 0))
            continue;
        for (uint32_t i = 0; i < se->n; i++) {
            double v = axis == 0 ? se->x[i] : se->y[i];
            double other = axis == 0 ? se->y[i] : se->x[i];
            if (!isfinite(v) || (log && v <= 0) || !isfinite(other))
                continue;
            if (isnan(lo) || v < lo)
                lo = v;
            if (isnan(hi) || v > hi)
                hi = v;
        }
    }
    for (uint32_t r = 0; r < c->n_refs && axis != 2; r++) {
        const st_svg_ref *rf = &c->refs[r];
        if ((axis == 0) != (rf->vertical != 0))
            continue;
        double v = rf->value;
        if (!isfinite(v) || (log && v <= 0))
            continue;
        if (isnan(lo) || v < lo)
            lo = v;
        /* headroom above a reference line, so that its label does not sit on the frame */
        double top = v > 0 ? v * 1.08 : v;
        if (isnan(hi) || top > hi)
            hi = top;
    }
    *mn = lo;
    *mx = hi;
}

static void draw_refs(st_buf *w, const st_svg_ref *refs, uint32_t n, const scale *x, const scale *y)
{
    for (uint32_t r = 0; r < n; r++) {
        const st_svg_ref *rf = &refs[r];
        const scale *s = rf->vertical ? x : y;
        if (!usable(s, rf->value))
            continue;
        const char *col = rf->color < 0 ? SLO_RED : st_svg_color(rf->color);
        double p = sc_map(s, rf->value);
        if (rf->vertical)
            st_buf_printf(w,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                          "stroke-width=\"1.5\" stroke-dasharray=\"5 4\"/>",
                          p, y->p1, p, y->p0, col);
        else
            st_buf_printf(w,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                          "stroke-width=\"1.5\" stroke-dasharray=\"5 4\"/>",
                          x->p0, p, x->has_inf ? x->p_end : x->p1, p, col);
        if (rf->label && *rf->label) {
            if (rf->vertical) /* near the bottom, on the side with room */
                st_buf_printf(w,
                              "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" font-size=\"11\" fill=\"%s\" "
                              "font-weight=\"600\"",
                              p + (p + 8 + text_w(rf->label, 11) > x->p1 ? -4 : 4), y->p0 - 6,
                              p + 8 + text_w(rf->label, 11) > x->p1 ? "end" : "start", col);
            else
                st_buf_printf(w, /* at the left end: low load, where lines usually are below */
                              "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" fill=\"%s\" "
                              "font-weight=\"600\"",
                              x->p0 + 6, p - 4, col);
            halo_text_attrs(w);
            st_buf_printf(w, ">");
            wtext(w, rf->label);
            st_buf_printf(w, "</text>");
        }
    }
}

/* The line chart's legend entries into lg (room for n_series + 2): named series, then the marker
 * key; their count. */
static uint32_t line_legend(const st_svg_line_chart *c, leg *lg)
{
    int any_pass = 0, any_fail = 0;
    for (uint32_t s = 0; s < c->n_series; s++)
        for (uint32_t i = 0; c->series[s].pass && i < c->series[s].n; i++) {
            any_pass |= c->series[s].pass[i] == 1;
            any_fail |= c->series[s].pass[i] == 0;
        }
    uint32_t nl = 0;
    for (uint32_t s = 0; s < c->n_series; s++) {
        const st_svg_series *se = &c->series[s];
        if (!se->name || !*se->name)
            continue;
        lg[nl++] = (leg){ se->name, st_svg_color(se->color), LEG_LINE, se->dashed, 0, 0 };
    }
    if (c->pass_legend && any_pass)
        lg[nl++] = (leg){ "passed SLO", GREY, LEG_PASS, 0, 0, 0 };
    if (c->pass_legend && any_fail)
        lg[nl++] = (leg){ "failed SLO", GREY, LEG_FAIL, 0, 0, 0 };
    return nl;
}

/* The line chart's scales fitted to its data and placed in the plot area (legend rows below; a
 * slot for "inf" at the right when an x is infinite); y2 only when has_y2. */
static void line_scales(const st_svg_line_chart *c, int width, int height, int rows, int has_y2, scale *xs, scale *ys,
                        scale *y2s)
{
    double top = c->title && *c->title ? 32 : 12;
    double bottom_pad = 22 + (c->x.label && *c->x.label ? 18 : 0) + (rows ? rows * LEG_ROW + 8 : 0);
    double plot_bottom = height - bottom_pad;
    if (plot_bottom < top + 40)
        plot_bottom = top + 40;
    double mn, mx;
    int yt = (int)((plot_bottom - top) / 48);
    data_range(c, 1, c->y.log, &mn, &mx);
    scale_fit(ys, &c->y, mn, mx, yt);
    if (has_y2) {
        data_range(c, 2, c->y2.log, &mn, &mx);
        scale_fit(y2s, &c->y2, mn, mx, yt);
    }
    double left = 8 + (c->y.label && *c->y.label ? 18 : 0) + ticks_max_w(ys, 11) + 8;
    double right = width - 14;
    if (has_y2)
        right = width - (8 + (c->y2.label && *c->y2.label ? 18 : 0) + ticks_max_w(y2s, 11) + 8);
    int x_inf = 0;
    for (uint32_t s = 0; s < c->n_series; s++)
        for (uint32_t i = 0; c->series[s].x && c->series[s].y && i < c->series[s].n; i++)
            if (isinf(c->series[s].x[i]) && c->series[s].x[i] > 0 && isfinite(c->series[s].y[i]))
                x_inf = 1;
    data_range(c, 0, c->x.log, &mn, &mx);
    scale_fit(xs, &c->x, mn, mx, (int)((right - left) / 80));
    xs->p0 = left;
    xs->p1 = right;
    xs->p_end = right;
    if (x_inf) {
        double slot = (right - left) * 0.09 < 40 ? 40 : (right - left) * 0.09;
        xs->has_inf = 1;
        xs->p1 = right - slot;
        xs->inf_px = right - slot * 0.35;
    }
    ys->p0 = plot_bottom;
    ys->p1 = top;
    y2s->p0 = plot_bottom;
    y2s->p1 = top;
}

/* Each series' line (broken where a point cannot be drawn). */
static void line_paths(st_buf *w, const st_svg_line_chart *c, const scale *xs, const scale *ys, const scale *y2s)
{
    for (uint32_t s = 0; s < c->n_series; s++) {
        const st_svg_series *se = &c->series[s];
        const scale *sy = se->secondary ? y2s : ys;
        if (!se->x || !se->y || !se->n)
            continue;
        const char *col = st_svg_color(se->color);
        int pen = 0, npts = 0;
        for (uint32_t i = 0; i < se->n; i++) {
            if (!usable(xs, se->x[i]) || !usable(sy, se->y[i])) {
                pen = 0;
                continue;
            }
            if (!npts)
                st_buf_printf(w, "<path d=\"");
            st_buf_printf(w, "%s%.1f %.1f", pen ? "L" : "M", sc_map(xs, se->x[i]), sc_map(sy, se->y[i]));
            pen = 1;
            npts++;
        }
        if (npts)
            st_buf_printf(w,
                          "\" fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\" stroke-linejoin=\"round\" "
                          "stroke-linecap=\"round\"%s/>",
                          col, se->width > 0 ? se->width : 2.0, se->dashed ? " stroke-dasharray=\"6 4\"" : "");
    }
}

/* The markers, on top of every line: passed (circle), failed (cross), or a plain point. */
static void line_markers(st_buf *w, const st_svg_line_chart *c, const scale *xs, const scale *ys, const scale *y2s)
{
    for (uint32_t s = 0; s < c->n_series; s++) {
        const st_svg_series *se = &c->series[s];
        const scale *sy = se->secondary ? y2s : ys;
        if (!se->x || !se->y)
            continue;
        const char *col = st_svg_color(se->color);
        for (uint32_t i = 0; i < se->n; i++) {
            if (!usable(xs, se->x[i]) || !usable(sy, se->y[i]))
                continue;
            double px = sc_map(xs, se->x[i]), py = sc_map(sy, se->y[i]);
            int m = se->pass ? se->pass[i] : (se->markers ? 2 : -1);
            if (m == 1)
                st_buf_printf(w, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\" stroke=\"#fff\"/>", px, py, col);
            else if (m == 0)
                st_buf_printf(w,
                              "<path d=\"M%.1f %.1fL%.1f %.1fM%.1f %.1fL%.1f %.1f\" stroke=\"%s\" "
                              "stroke-width=\"2.2\" stroke-linecap=\"round\"/>",
                              px - 4, py - 4, px + 4, py + 4, px - 4, py + 4, px + 4, py - 4, col);
            else if (m == 2)
                st_buf_printf(w, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>", px, py, col);
        }
    }
}

int st_svg_line(st_buf *b, const st_svg_line_chart *c)
{
    st_buf *w = b;
    int width = c->width > 0 ? c->width : 560, height = c->height > 0 ? c->height : 320;
    int has_y2 = 0;
    for (uint32_t s = 0; s < c->n_series; s++)
        if (c->series[s].secondary)
            has_y2 = 1;
    uint32_t maxl = c->n_series + 2;
    leg *lg = calloc(maxl ? maxl : 1, sizeof *lg);
    if (!lg)
        return -1;
    uint32_t nl = line_legend(c, lg);
    int rows = legend_layout(lg, (int)nl, width - 24);
    scale xs, ys, y2s;
    line_scales(c, width, height, rows, has_y2, &xs, &ys, &y2s);
    svg_open(w, width, height, c->title);
    draw_axes(w, &xs, &ys, has_y2 ? &y2s : NULL, c->x.label, c->y.label, c->y2.label, width);
    draw_refs(w, c->refs, c->n_refs, &xs, &ys);
    line_paths(w, c, &xs, &ys, &y2s);
    line_markers(w, c, &xs, &ys, &y2s);
    legend_draw(w, lg, (int)nl, 12, height - rows * LEG_ROW - 6);
    st_buf_printf(w, "</svg>");
    free(lg);
    return st_buf_error(w) ? -1 : 0;
}

/* ---- bar chart ------------------------------------------------------------------------- */

int st_svg_bars(st_buf *b, const st_svg_bar_chart *c)
{
    st_buf *w = b;
    int width = c->width > 0 ? c->width : 560;
    const double row = 26, barh = 16;
    double top = c->title && *c->title ? 34 : 12;
    if (isfinite(c->ref) && c->ref_label && *c->ref_label)
        top += 12;
    double labw = 0;
    for (uint32_t i = 0; i < c->n; i++) {
        double lw = text_w(c->bars[i].label, 12) + (c->bars[i].highlight ? 6 : 0);
        if (lw > labw)
            labw = lw;
    }
    if (labw > width * 0.38)
        labw = width * 0.38;
    double x0 = 10 + labw + 10, x1 = width - 96;
    if (x1 < x0 + 60)
        x1 = x0 + 60;
    double bottom = top + row * c->n + 4;
    int height = (int)(bottom + 22 + (c->axis_label && *c->axis_label ? 18 : 0) + 6);

    double mx = NAN;
    for (uint32_t i = 0; i < c->n; i++)
        if (isfinite(c->bars[i].value) && (isnan(mx) || c->bars[i].value > mx))
            mx = c->bars[i].value;
    if (isfinite(c->ref) && (isnan(mx) || c->ref > mx))
        mx = c->ref;
    st_svg_axis ax = { c->axis_label, 0, 0, NAN, 1, 0 };
    scale xs, ys;
    scale_fit(&xs, &ax, 0, isnan(mx) ? 1 : mx, (int)((x1 - x0) / 80));
    xs.p0 = x0;
    xs.p1 = x1;
    memset(&ys, 0, sizeof ys);
    ys.p0 = bottom;
    ys.p1 = top;
    ys.lo = 0;
    ys.hi = 1;

    svg_open(w, width, height, c->title);
    draw_axes(w, &xs, &ys, NULL, c->axis_label, NULL, NULL, width);
    char t[64];
    for (uint32_t i = 0; i < c->n; i++) {
        const st_svg_bar *br = &c->bars[i];
        double cy = top + row * i + row / 2;
        st_buf_printf(w, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" font-size=\"12\" fill=\"%s\"%s>", x0 - 8,
                      cy + 4, INK, br->highlight ? " font-weight=\"700\"" : "");
        (void)st_svg_text(w, br->label, 60);
        st_buf_printf(w, "</text>");
        if (isfinite(br->value) && br->value >= 0) {
            double px = sc_map(&xs, br->value);
            st_buf_printf(w,
                          "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" rx=\"2\" "
                          "fill=\"%s\"/>",
                          x0, cy - barh / 2, px - x0 < 1 ? 1 : px - x0, barh, st_svg_color(br->color));
            st_buf_printf(w, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" fill=\"%s\"%s>", px + 6, cy + 4, INK,
                          br->highlight ? " font-weight=\"700\"" : "");
            if (br->value_text) {
                wtext(w, br->value_text);
            } else {
                st_svg_fmt(t, sizeof t, br->value, 0);
                wtext(w, t);
            }
            st_buf_printf(w, "</text>");
        } else {
            st_buf_printf(w,
                          "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" font-style=\"italic\" "
                          "fill=\"%s\">",
                          x0 + 6, cy + 4, MUTED);
            wtext(w, br->note ? br->note : "no value");
            st_buf_printf(w, "</text>");
        }
    }
    if (isfinite(c->ref) && c->ref >= 0) {
        double px = sc_map(&xs, c->ref);
        st_buf_printf(w,
                      "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                      "stroke-width=\"1.5\" stroke-dasharray=\"4 3\"/>",
                      px, top - 4, px, bottom, INK);
        if (c->ref_label && *c->ref_label) {
            st_buf_printf(w, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"11\" fill=\"%s\">", px,
                          top - 7, INK);
            wtext(w, c->ref_label);
            st_buf_printf(w, "</text>");
        }
    }
    st_buf_printf(w, "</svg>");
    return st_buf_error(w) ? -1 : 0;
}

/* ---- distributions --------------------------------------------------------------------- */

/* Sorted copy of the finite samples; *n_out their count. NULL with *n_out 0 when none. */
static double *sorted_finite(const double *v, uint32_t n, uint32_t *n_out)
{
    *n_out = 0;
    if (!v || !n)
        return NULL;
    double *s = malloc(sizeof *s * n);
    if (!s)
        return NULL;
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++)
        if (isfinite(v[i]))
            s[k++] = v[i];
    qsort(s, k, sizeof *s, st_cmp_double);
    *n_out = k;
    return s;
}

#define CDF_POINTS 400

int st_svg_cdf(st_buf *b, const st_svg_dist_chart *c)
{
    uint32_t ns = c->n_sets;
    st_svg_series *se = calloc(ns ? ns : 1, sizeof *se);
    double **xs = calloc(ns ? ns : 1, sizeof *xs), **ys = calloc(ns ? ns : 1, sizeof *ys);
    st_svg_ref *refs = calloc(c->n_refs + 1, sizeof *refs);
    int rc = -1;
    if (!se || !xs || !ys || !refs)
        goto out;
    for (uint32_t s = 0; s < ns; s++) {
        uint32_t k;
        double *sorted = sorted_finite(c->sets[s].v, c->sets[s].n, &k);
        if (!sorted && k)
            goto out;
        uint32_t m = k > CDF_POINTS ? CDF_POINTS : k;
        xs[s] = malloc(sizeof(double) * (m ? m : 1));
        ys[s] = malloc(sizeof(double) * (m ? m : 1));
        if (!xs[s] || !ys[s]) {
            free(sorted);
            goto out;
        }
        for (uint32_t j = 0; j < m; j++) {
            if (k > CDF_POINTS) {
                double q = (double)(j + 1) / m;
                uint32_t idx = (uint32_t)ceil(q * k - 1e-9);
                if (idx < 1)
                    idx = 1;
                xs[s][j] = sorted[idx - 1];
                ys[s][j] = q;
            } else {
                xs[s][j] = sorted[j];
                ys[s][j] = (double)(j + 1) / k;
            }
        }
        free(sorted);
        se[s] = (st_svg_series){ .name = c->sets[s].name, .x = xs[s], .y = ys[s], .n = m, .color = c->sets[s].color };
    }
    uint32_t nr = 0;
    for (uint32_t r = 0; r < c->n_refs; r++) {
        refs[nr] = c->refs[r];
        refs[nr++].vertical = 1;
    }
    if (c->p95_line)
        refs[nr++] = (st_svg_ref){ 0.95, 0, "p95", 9 };
    st_svg_line_chart lc = {
        .title = c->title,
        .width = c->width,
        .height = c->height,
        .x = c->x,
        .y = { "fraction of requests", 0, 0, 1, 1, 1 },
        .y2 = { NULL, 0, NAN, NAN, 0, 0 },
        .series = se,
        .n_series = ns,
        .refs = refs,
        .n_refs = nr,
    };
    rc = st_svg_line(b, &lc);
out:
    for (uint32_t s = 0; s < ns && xs && ys; s++) {
        free(xs[s]);
        free(ys[s]);
    }
    free(xs);
    free(ys);
    free(se);
    free(refs);
    return rc;
}

int st_svg_histogram(st_buf *b, const st_svg_dist_chart *c, uint32_t bins)
{
    st_buf *w = b;
    if (!bins)
        bins = 30;
    if (bins > 500)
        bins = 500;
    int width = c->width > 0 ? c->width : 560, height = c->height > 0 ? c->height : 320;
    const st_svg_sample_set *set = c->n_sets ? &c->sets[0] : NULL;
    uint32_t k = 0;
    double *sorted = set ? sorted_finite(set->v, set->n, &k) : NULL;
    if (set && set->n && !sorted && k)
        return -1;
    uint32_t first = 0;
    while (c->x.log && first < k && !(sorted[first] > 0))
        first++;
    double mn = first < k ? sorted[first] : NAN, mx = k ? sorted[k - 1] : NAN;
    for (uint32_t r = 0; r < c->n_refs; r++) {
        double v = c->refs[r].value;
        if (isfinite(v) && (!c->x.log || v > 0)) {
            if (isnan(mn) || v < mn)
                mn = v;
            if (isnan(mx) || v > mx)
                mx = v;
        }
    }
    uint32_t *cnt = calloc(bins, sizeof *cnt);
    if (!cnt) {
        free(sorted);
        return -1;
    }
    double top = c->title && *c->title ? 32 : 12;
    leg lg[1] = { { set && set->name ? set->name : "", set ? st_svg_color(set->color) : GREY, LEG_BOX, 0, 0, 0 } };
    int nl = set && set->name && *set->name ? 1 : 0;
    int rows = legend_layout(lg, nl, width - 24);
    double plot_bottom = height - (22 + (c->x.label && *c->x.label ? 18 : 0) + (rows ? rows * LEG_ROW + 8 : 0));
    scale xs, ys;
    st_svg_axis xa = c->x;
    scale_fit(&xs, &xa, mn, mx, (width - 80) / 80);
    /* bins over the axis range */
    double a = xs.log ? log10(xs.lo) : xs.lo, bnd = xs.log ? log10(xs.hi) : xs.hi;
    uint32_t maxc = 0;
    for (uint32_t i = first; i < k; i++) {
        double t = xs.log ? log10(sorted[i]) : sorted[i];
        double f = bnd > a ? (t - a) / (bnd - a) : 0;
        if (f < 0 || f > 1 + 1e-12)
            continue;
        uint32_t bi = (uint32_t)(f * bins);
        if (bi >= bins)
            bi = bins - 1;
        if (++cnt[bi] > maxc)
            maxc = cnt[bi];
    }
    st_svg_axis ya = { "requests", 0, 0, NAN, 1, 0 };
    memset(&ys, 0, sizeof ys);
    {
        int target = (int)((plot_bottom - top) / 48);
        double step = nice_step((maxc ? maxc : 1) / (double)(target < 2 ? 2 : target));
        if (step < 1)
            step = 1; /* counts are integers */
        ys.step = step;
        ys.lo = 0;
        ys.hi = ceil((maxc ? maxc : 1) / step) * step;
        for (double v = 0; v <= ys.hi + 1e-9 && ys.nt < MAX_TICKS; v += step)
            ys.ticks[ys.nt++] = v;
    }
    double left = 8 + 18 + ticks_max_w(&ys, 11) + 8, right = width - 14;
    xs.p0 = left;
    xs.p1 = right;
    ys.p0 = plot_bottom;
    ys.p1 = top;
    svg_open(w, width, height, c->title);
    draw_axes(w, &xs, &ys, NULL, c->x.label, ya.label, NULL, width);
    const char *col = set ? st_svg_color(set->color) : GREY;
    for (uint32_t i = 0; i < bins; i++) {
        if (!cnt[i])
            continue;
        double l = a + (bnd - a) * i / bins, r = a + (bnd - a) * (i + 1) / bins;
        if (xs.log) {
            l = pow(10, l);
            r = pow(10, r);
        }
        double pl = sc_map(&xs, l), pr = sc_map(&xs, r), py = sc_map(&ys, cnt[i]);
        st_buf_printf(w,
                      "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" "
                      "fill-opacity=\"0.85\" stroke=\"#fff\" stroke-width=\"0.5\"/>",
                      pl, py, pr - pl, plot_bottom - py, col);
    }
    st_svg_ref *refs = calloc(c->n_refs ? c->n_refs : 1, sizeof *refs);
    if (!refs)
        st_buf_fail(w, ST_BUF_NO_MEM);
    for (uint32_t r = 0; refs && r < c->n_refs; r++) {
        refs[r] = c->refs[r];
        refs[r].vertical = 1;
    }
    if (refs)
        draw_refs(w, refs, c->n_refs, &xs, &ys);
    free(refs);
    legend_draw(w, lg, nl, 12, height - rows * LEG_ROW - 6);
    st_buf_printf(w, "</svg>");
    free(cnt);
    free(sorted);
    return st_buf_error(w) ? -1 : 0;
}
