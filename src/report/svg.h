/* Chart rendering to inline SVG, for the HTML report.
 *
 * Pure functions: they take numbers and strings and append one <svg> element to an st_buf.
 * No I/O, no clock, no globals, no JavaScript: the same input gives byte-identical output.
 * Every string (titles, labels, series names) is HTML-escaped; control bytes are dropped.
 * The SVG carries no id attributes, so any number of charts can sit in one HTML document.
 *
 * Colours: series and bars pick colour `color` from a fixed colour-blind-safe palette
 * (st_svg_color); the report gives each configuration the same index in every chart.
 *
 * Non-finite values (NAN, inf) and, on a log axis, values <= 0 are not drawn; a line
 * breaks at such a point. All functions return 0, or -1 when the buffer's maximum is
 * reached or memory runs out (the buffer then holds a truncated chart: discard it). */
#ifndef ST_SVG_H
#define ST_SVG_H
#include <stdint.h>

#include "core/buf.h"

#define ST_SVG_PALETTE 10
/* "#rrggbb" of palette entry i (taken modulo the palette size; negative -> grey). */
const char *st_svg_color(int i);

typedef struct st_svg_axis {
    const char *label; /* axis title, e.g. "offered rate (req/s)"; may be NULL */
    int log;           /* logarithmic (base 10) scale */
    double min, max;   /* NAN: from the data (rounded out to nice ticks) */
    int zero;          /* linear, automatic range: include 0 */
    int percent;       /* tick labels show a fraction as a percent (0.9 -> "90%") */
} st_svg_axis;

typedef struct st_svg_series {
    const char *name; /* legend text; NULL or "" = not in the legend */
    const double *x, *y;
    uint32_t n;
    /* Optional per-point marker: 1 passed (filled dot), 0 failed (cross), other values no
     * marker. NULL: a small dot at every point when `markers` is set, else none. */
    const signed char *pass;
    int markers;
    int color; /* palette index; negative = grey */
    int dashed;
    int secondary; /* plotted against the secondary (right-hand) y axis */
    double width;  /* stroke width; 0 = 2 */
} st_svg_series;

/* A reference line with a label, e.g. the SLO. Horizontal at y=value (on the primary
 * y axis), or vertical at x=value. */
typedef struct st_svg_ref {
    double value;
    int vertical;
    const char *label;
    int color; /* palette index; negative = dark red (the SLO colour) */
} st_svg_ref;

typedef struct st_svg_line_chart {
    const char *title; /* drawn at the top; may be NULL */
    int width, height; /* pixels; 0 = 560 x 320 */
    st_svg_axis x, y;
    st_svg_axis y2; /* used when a series is `secondary` */
    const st_svg_series *series;
    uint32_t n_series;
    const st_svg_ref *refs;
    uint32_t n_refs;
    int pass_legend; /* add "passed" / "failed" marker entries to the legend */
} st_svg_line_chart;

/* A line chart: several series, linear or log axes with 1-2-5 ticks, reference lines,
 * pass/fail markers, legend below the plot. With a secondary series it is the timeline
 * chart (e.g. KV cache usage on the left in percent, request counts on the right). */
int st_svg_line(st_buf *b, const st_svg_line_chart *c);

typedef struct st_svg_bar {
    const char *label;      /* category (configuration name) */
    double value;           /* NAN: no bar; `note` is shown instead */
    const char *value_text; /* text after the bar; NULL = the value formatted */
    const char *note;       /* shown when value is not finite, e.g. "none passed" */
    int color;              /* palette index; negative = grey */
    int highlight;          /* draw the label bold (e.g. the recommended configuration) */
} st_svg_bar;

typedef struct st_svg_bar_chart {
    const char *title;
    int width;              /* 0 = 560; the height follows from the number of bars */
    const char *axis_label; /* e.g. "req/s at SLO" */
    const st_svg_bar *bars;
    uint32_t n;
    double ref;            /* a vertical reference line at this value (NAN: none) */
    const char *ref_label; /* e.g. "current" */
} st_svg_bar_chart;

/* Horizontal bars, one per category, from 0, with a value axis at the bottom. */
int st_svg_bars(st_buf *b, const st_svg_bar_chart *c);

typedef struct st_svg_sample_set {
    const char *name;
    const double *v; /* samples (need not be sorted; not modified) */
    uint32_t n;
    int color;
} st_svg_sample_set;

typedef struct st_svg_dist_chart {
    const char *title;
    int width, height; /* 0 = 560 x 320 */
    st_svg_axis x;     /* the value axis, e.g. "TTFT (ms)", log or linear */
    const st_svg_sample_set *sets;
    uint32_t n_sets;
    const st_svg_ref *refs; /* vertical lines, e.g. the SLO (vertical is implied) */
    uint32_t n_refs;
    int p95_line; /* draw a horizontal line at the 95th percentile of the CDF */
} st_svg_dist_chart;

/* Empirical CDF of each sample set (fraction of requests at or below x), one line each.
 * Sets with more than 400 samples are drawn through 400 evenly spaced quantiles. */
int st_svg_cdf(st_buf *b, const st_svg_dist_chart *c);

/* Histogram of the first sample set (bins equal-width on the axis scale, so log-spaced
 * on a log axis); the others are ignored. bins 0 = 30. */
int st_svg_histogram(st_buf *b, const st_svg_dist_chart *c, uint32_t bins);

/* Appends s escaped for HTML/SVG text or attribute values, without control bytes
 * (except tab and newline, which become spaces), at most max_bytes input bytes (0 = all);
 * a cut string ends in "...". */
int st_svg_text(st_buf *b, const char *s, size_t max_bytes);

/* Formats v compactly for a tick or label ("0.5", "12", "1.5k", "2M"); decimals chosen
 * from `step` (the tick spacing; 0 = from v itself). Deterministic, locale-free. */
void st_svg_fmt(char *out, size_t outlen, double v, double step);

#endif
