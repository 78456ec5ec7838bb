#include "harness.h"

#include <stdio.h>

#include "core/buf.h"
#include "report/svg.h"

/* Well-formedness checks that do not need an XML parser: one root, text elements balanced,
 * no id attributes (several charts share one HTML document), no external references. */
static void assert_svg_shape(const char *s)
{
    assert_non_null(s);
    assert_true(strncmp(s, "<svg xmlns=\"http://www.w3.org/2000/svg\"", 39) == 0);
    size_t n = strlen(s);
    assert_true(n > 6 && strcmp(s + n - 6, "</svg>") == 0);
    assert_int_equal(st_test_count(s, "<svg"), 1);
    assert_int_equal(st_test_count(s, "<text"), st_test_count(s, "</text>"));
    assert_int_equal(st_test_count(s, "<title>"), st_test_count(s, "</title>"));
    assert_int_equal(st_test_count(s, " id="), 0);
    assert_int_equal(st_test_count(s, "href"), 0);
    assert_int_equal(st_test_count(s, "http"), 1); /* the namespace only */
    assert_int_equal(st_test_count(s, "<script"), 0);
    assert_int_equal(st_test_count(s, "nan"), 0);
    assert_int_equal(st_test_count(s, "inf"), 0);
}

static void fmt_numbers(void **state)
{
    (void)state;
    char t[64];
    struct {
        double v, step;
        const char *want;
    } c[] = {
        { 0, 0, "0" },        { 0.5, 0.5, "0.5" }, { 1, 0.5, "1" },    { 1500, 500, "1500" },  { 20000, 5000, "20k" },
        { 1.5e6, 0, "1.5M" }, { 0.05, 0, "0.05" }, { -0.0, 0.1, "0" }, { 1e-12, 0.1, "0" },    { 123.456, 0, "123" },
        { 2.5, 0, "2.5" },    { -20, 10, "-20" },  { 3e9, 0, "3G" },   { 0.25, 0.05, "0.25" }, { 12.0, 2, "12" },
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        st_svg_fmt(t, sizeof t, c[i].v, c[i].step);
        if (strcmp(t, c[i].want) != 0)
            fail_msg("fmt(%g, %g) = \"%s\", expected \"%s\"", c[i].v, c[i].step, t, c[i].want);
    }
    st_svg_fmt(t, sizeof t, NAN, 0);
    assert_string_equal(t, "n/a");
    st_svg_fmt(t, sizeof t, INFINITY, 0);
    assert_string_equal(t, "inf");
}

static void text_escaping(void **state)
{
    (void)state;
    st_buf b;
    st_buf_init(&b, 4096);
    assert_int_equal(st_svg_text(&b, "<script>alert(\"x\")</script>&'", 0), 0);
    assert_string_equal(b.data, "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;");
    st_buf_reset(&b);
    /* control bytes dropped, tab/newline become spaces, UTF-8 kept, invalid bytes replaced */
    assert_int_equal(st_svg_text(&b, "a\x01\x1b[31mb\tc\nd \xC2\xB5s \xE2\x89\xA4 \xFF\xC0\x80z", 0), 0);
    assert_string_equal(b.data, "a[31mb c d \xC2\xB5s \xE2\x89\xA4 \xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBDz");
    st_buf_reset(&b);
    /* a cut never splits a code point */
    assert_int_equal(st_svg_text(&b, "ab\xE2\x89\xA4\xE2\x89\xA4", 4), 0);
    assert_string_equal(b.data, "ab...");
    st_buf_reset(&b);
    assert_int_equal(st_svg_text(&b, NULL, 0), 0);
    assert_int_equal(b.len, 0);
    st_buf_free(&b);
}

static const double rx[] = { 0.5, 1, 2, 4, 8 };
static const double ry1[] = { 210, 250, 400, 1900, 48000 };
static const double ry2[] = { 300, NAN, 380, 700, 2600 };
static const signed char rp1[] = { 1, 1, 1, 0, 0 };
static const signed char rp2[] = { 1, -1, 1, 1, 0 };

static st_svg_line_chart rate_chart(st_svg_series *s, st_svg_ref *ref)
{
    s[0] = (st_svg_series){ .name = "baseline", .x = rx, .y = ry1, .n = 5, .pass = rp1, .color = 0, .dashed = 1 };
    s[1] = (st_svg_series){ .name = "fp8 <kv>", .x = rx, .y = ry2, .n = 5, .pass = rp2, .color = 1 };
    *ref = (st_svg_ref){ 1500, 0, "SLO 1500 ms", -1 };
    return (st_svg_line_chart){ .title = "p95 TTFT vs rate",
                                .width = 560,
                                .height = 340,
                                .x = { "offered rate (req/s)", 1, NAN, NAN, 0, 0 },
                                .y = { "p95 TTFT (ms)", 1, NAN, NAN, 0, 0 },
                                .series = s,
                                .n_series = 2,
                                .refs = ref,
                                .n_refs = 1,
                                .pass_legend = 1 };
}

static void line_chart_structure(void **state)
{
    (void)state;
    st_svg_series s[2];
    st_svg_ref ref;
    st_svg_line_chart c = rate_chart(s, &ref);
    st_buf b;
    st_buf_init(&b, 1 << 20);
    assert_int_equal(st_svg_line(&b, &c), 0);
    assert_svg_shape(b.data);
    /* markers: 6 passed dots (white outline), 3 failed crosses; the NAN/unknown point none */
    assert_int_equal(st_test_count(b.data, "r=\"4\" fill=\"#0072B2\" stroke=\"#fff\""), 3);
    assert_int_equal(st_test_count(b.data, "r=\"4\" fill=\"#D55E00\" stroke=\"#fff\""), 3);
    assert_int_equal(st_test_count(b.data, "stroke-width=\"2.2\""), 3);
    /* the NAN in series 2 breaks its line: two "M" moves in that path */
    const char *p2 = strstr(b.data, "stroke=\"#D55E00\" stroke-width=\"2.0\"");
    assert_non_null(p2);
    const char *d2 = p2;
    while (d2 > b.data && strncmp(d2, "<path d=\"", 9) != 0)
        d2--;
    int moves = 0;
    for (const char *q = d2 + 9; q < p2; q++)
        moves += *q == 'M';
    assert_int_equal(moves, 2);
    /* legend, escaped series name, SLO label, dashed baseline */
    assert_non_null(strstr(b.data, ">fp8 &lt;kv&gt;</text>"));
    assert_non_null(strstr(b.data, ">passed SLO</text>"));
    assert_non_null(strstr(b.data, ">failed SLO</text>"));
    assert_non_null(strstr(b.data, ">SLO 1500 ms</text>"));
    assert_non_null(strstr(b.data, "stroke-dasharray=\"6 4\""));
    /* log axes: 1-2-5 ticks, nothing in between */
    assert_non_null(strstr(b.data, ">1000</text>"));
    assert_non_null(strstr(b.data, ">10k</text>"));
    assert_non_null(strstr(b.data, ">0.5</text>"));
    assert_null(strstr(b.data, ">8</text>"));
    assert_null(strstr(b.data, ">3000</text>"));
    assert_null(strstr(b.data, ">3</text>"));
    st_buf_free(&b);
}

static void linear_axis_ticks(void **state)
{
    (void)state;
    const double x[] = { 0, 10, 20, 30 }, y[] = { 3, 17, 29, 47 };
    st_svg_series s = { .name = "a", .x = x, .y = y, .n = 4, .color = 2, .markers = 1 };
    st_svg_line_chart c = { .width = 500,
                            .height = 300,
                            .x = { "t", 0, NAN, NAN, 1, 0 },
                            .y = { "v", 0, NAN, NAN, 1, 0 },
                            .series = &s,
                            .n_series = 1 };
    st_buf b;
    st_buf_init(&b, 1 << 20);
    assert_int_equal(st_svg_line(&b, &c), 0);
    assert_svg_shape(b.data);
    /* y from 0 (zero), rounded out to 50 with a 10 step */
    for (int v = 0; v <= 50; v += 10) {
        char t[32];
        snprintf(t, sizeof t, ">%d</text>", v);
        if (!strstr(b.data, t))
            fail_msg("missing y tick %d", v);
    }
    assert_null(strstr(b.data, ">60</text>"));
    assert_non_null(strstr(b.data, ">30</text>"));           /* x: 0..30 */
    assert_int_equal(st_test_count(b.data, "r=\"2.5\""), 4); /* plain markers */
    st_buf_free(&b);
}

static void timeline_secondary_axis(void **state)
{
    (void)state;
    const double t[] = { 0, 1, 2, 3, 4, 5 };
    const double kv[] = { 0.1, 0.5, 0.93, 0.97, NAN, 0.4 };
    const double run[] = { 2, 10, 30, 48, 48, 12 }, wait[] = { 0, 0, 5, 40, 80, 0 };
    st_svg_series s[3] = {
        { .name = "KV cache usage", .x = t, .y = kv, .n = 6, .color = 0 },
        { .name = "running", .x = t, .y = run, .n = 6, .color = 2, .secondary = 1 },
        { .name = "waiting", .x = t, .y = wait, .n = 6, .color = 1, .secondary = 1 },
    };
    st_svg_ref ref = { 0.9, 0, "90 %", 9 };
    st_svg_line_chart c = { .title = "4 req/s",
                            .width = 400,
                            .height = 250,
                            .x = { "seconds", 0, 0, NAN, 1, 0 },
                            .y = { "KV", 0, 0, 1, 1, 1 },
                            .y2 = { "requests", 0, 0, NAN, 1, 0 },
                            .series = s,
                            .n_series = 3,
                            .refs = &ref,
                            .n_refs = 1 };
    st_buf b;
    st_buf_init(&b, 1 << 20);
    assert_int_equal(st_svg_line(&b, &c), 0);
    assert_svg_shape(b.data);
    assert_non_null(strstr(b.data, ">100%</text>"));
    assert_non_null(strstr(b.data, ">0%</text>"));
    assert_null(strstr(b.data, ">110%</text>"));   /* the fixed 0..1 range holds */
    assert_non_null(strstr(b.data, ">80</text>")); /* right axis reaches the waiting peak */
    assert_non_null(strstr(b.data, "rotate(90)"));
    assert_non_null(strstr(b.data, ">requests</text>"));
    st_buf_free(&b);
}

static void hostile_strings(void **state)
{
    (void)state;
    const char *evil = "\"><img src=x onerror=alert(1)><script>alert(2)</script>";
    const double x[] = { 1, 2 }, y[] = { 1, 2 };
    st_svg_series s = { .name = evil, .x = x, .y = y, .n = 2 };
    st_svg_ref ref = { 1.5, 0, evil, -1 };
    st_svg_line_chart c = { .title = evil,
                            .x = { evil, 0, NAN, NAN, 0, 0 },
                            .y = { evil, 0, NAN, NAN, 0, 0 },
                            .series = &s,
                            .n_series = 1,
                            .refs = &ref,
                            .n_refs = 1 };
    st_svg_bar bars[2] = { { evil, 3, evil, NULL, 0, 1 }, { "b", NAN, NULL, evil, 1, 0 } };
    st_svg_bar_chart bc = { evil, 0, evil, bars, 2, 2, evil };
    st_svg_sample_set set = { evil, y, 2, 0 };
    st_svg_dist_chart dc = { evil, 0, 0, { evil, 0, NAN, NAN, 0, 0 }, &set, 1, &ref, 1, 1 };
    st_buf b;
    st_buf_init(&b, 1 << 20);
    assert_int_equal(st_svg_line(&b, &c), 0);
    assert_int_equal(st_svg_bars(&b, &bc), 0);
    assert_int_equal(st_svg_cdf(&b, &dc), 0);
    assert_int_equal(st_svg_histogram(&b, &dc, 10), 0);
    assert_null(strstr(b.data, "<img"));
    assert_null(strstr(b.data, "<script"));
    assert_null(strstr(b.data, "onerror=alert(1)>"));
    assert_non_null(strstr(b.data, "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;"));
    st_buf_free(&b);
}

static void bars_chart(void **state)
{
    (void)state;
    st_svg_bar bars[4] = {
        { "fp8-all", 5.77, "5.77 req/s", NULL, 5, 1 },
        { "baseline", 2.89, NULL, NULL, 0, 0 },
        { "fp8-ckpt", NAN, NULL, "none passed", 4, 0 },
        { "tp2", NAN, NULL, NULL, 6, 0 },
    };
    st_svg_bar_chart c = { "Capacity", 540, "req/s", bars, 4, 2.89, "current" };
    st_buf b;
    st_buf_init(&b, 1 << 20);
    assert_int_equal(st_svg_bars(&b, &c), 0);
    assert_svg_shape(b.data);
    assert_int_equal(st_test_count(b.data, "<rect"), 1 + 2); /* background + two bars */
    assert_non_null(strstr(b.data, ">5.77 req/s</text>"));
    assert_non_null(strstr(b.data, ">2.89</text>"));
    assert_non_null(strstr(b.data, ">none passed</text>"));
    assert_non_null(strstr(b.data, ">no value</text>"));
    assert_non_null(strstr(b.data, ">current</text>"));
    assert_non_null(strstr(b.data, "font-weight=\"700\">fp8-all</text>"));
    /* the longer bar is longer */
    char f5[32], f0[32];
    snprintf(f5, sizeof f5, "fill=\"%s\"", st_svg_color(5));
    snprintf(f0, sizeof f0, "fill=\"%s\"", st_svg_color(0));
    const char *r1 = strstr(b.data, f5), *r0 = strstr(b.data, f0);
    assert_non_null(r1);
    assert_non_null(r0);
    double w1 = 0, w0 = 0;
    const char *q1 = r1, *q0 = r0;
    while (strncmp(q1, "width=\"", 7) != 0)
        q1--;
    while (strncmp(q0, "width=\"", 7) != 0)
        q0--;
    w1 = atof(q1 + 7);
    w0 = atof(q0 + 7);
    assert_near(w1 / w0, 5.77 / 2.89, 0.02);
    st_buf_free(&b);
}

static void cdf_and_histogram(void **state)
{
    (void)state;
    enum { N = 5000 };
    double *v = malloc(sizeof(double) * N);
    assert_non_null(v);
    for (int i = 0; i < N; i++)
        v[i] = 100 + (i * 7919 % N) * 0.3; /* 100..1599.7, shuffled */
    v[17] = NAN;
    double copy17 = v[18];
    st_svg_sample_set sets[2] = { { "TTFT a", v, N, 0 }, { "empty", NULL, 0, 1 } };
    st_svg_ref slo = { 1500, 0 /* vertical implied */, "SLO", -1 };
    st_svg_dist_chart c = { "TTFT", 560, 320, { "ms", 1, NAN, NAN, 0, 0 }, sets, 2, &slo, 1, 1 };
    st_buf b;
    st_buf_init(&b, 1 << 20);
    assert_int_equal(st_svg_cdf(&b, &c), 0);
    assert_svg_shape(b.data);
    assert_near(v[18], copy17, 0); /* input not modified */
    /* downsampled to 400 points: one M and 399 L */
    const char *end = strstr(b.data, "\" fill=\"none\" stroke=\"#0072B2\"");
    assert_non_null(end);
    const char *d = end;
    while (d > b.data && strncmp(d, "<path d=\"", 9) != 0)
        d--;
    int ls = 0;
    for (const char *q = d; q < end; q++)
        ls += *q == 'L';
    assert_int_equal(ls, 399);
    assert_non_null(strstr(b.data, ">p95</text>"));
    assert_non_null(strstr(b.data, ">SLO</text>"));
    assert_non_null(strstr(b.data, ">100%</text>"));
    size_t cdf_len = b.len;
    assert_true(cdf_len < 40000);

    st_buf_reset(&b);
    c.x.log = 0;
    assert_int_equal(st_svg_histogram(&b, &c, 20), 0);
    assert_svg_shape(b.data);
    int bars = st_test_count(b.data, "fill-opacity=\"0.85\"");
    assert_true(bars >= 15 && bars <= 20);
    assert_non_null(strstr(b.data, ">requests</text>"));
    st_buf_free(&b);
    free(v);
}

static void empty_and_degenerate(void **state)
{
    (void)state;
    st_buf b;
    st_buf_init(&b, 1 << 20);
    st_svg_line_chart c = { .x = { NULL, 1, NAN, NAN, 0, 0 }, .y = { NULL, 0, NAN, NAN, 0, 0 } };
    assert_int_equal(st_svg_line(&b, &c), 0);
    assert_svg_shape(b.data);
    /* one point, all equal values, negative values on a log axis */
    const double x[] = { 3 }, y[] = { -5 };
    st_svg_series s = { .name = "one", .x = x, .y = y, .n = 1, .markers = 1 };
    st_svg_line_chart c2 = {
        .x = { NULL, 0, NAN, NAN, 0, 0 }, .y = { NULL, 1, NAN, NAN, 0, 0 }, .series = &s, .n_series = 1
    };
    st_buf_reset(&b);
    assert_int_equal(st_svg_line(&b, &c2), 0);
    assert_svg_shape(b.data);
    assert_int_equal(st_test_count(b.data, "r=\"2.5\""), 0); /* -5 cannot sit on a log axis */
    c2.y.log = 0;
    st_buf_reset(&b);
    assert_int_equal(st_svg_line(&b, &c2), 0);
    assert_svg_shape(b.data);
    assert_int_equal(st_test_count(b.data, "r=\"2.5\""), 1);
    st_svg_bar_chart bc = { NULL, 0, NULL, NULL, 0, NAN, NULL };
    st_buf_reset(&b);
    assert_int_equal(st_svg_bars(&b, &bc), 0);
    assert_svg_shape(b.data);
    st_svg_dist_chart dc = { NULL, 0, 0, { NULL, 0, NAN, NAN, 0, 0 }, NULL, 0, NULL, 0, 0 };
    st_buf_reset(&b);
    assert_int_equal(st_svg_cdf(&b, &dc), 0);
    assert_svg_shape(b.data);
    st_buf_reset(&b);
    assert_int_equal(st_svg_histogram(&b, &dc, 0), 0);
    assert_svg_shape(b.data);
    st_buf_free(&b);
}

static void inf_rate_slot(void **state)
{
    (void)state;
    const double x[] = { 1, 2, 4, INFINITY }, y[] = { 100, 200, 900, 5000 };
    const signed char pass[] = { 1, 1, 0, 0 };
    st_svg_series s = { .name = "a", .x = x, .y = y, .n = 4, .pass = pass, .color = 0 };
    st_svg_ref ref = { 1500, 0, "SLO", -1 };
    st_svg_line_chart c = { .width = 500,
                            .height = 300,
                            .x = { "rate", 1, NAN, NAN, 0, 0 },
                            .y = { "ms", 1, NAN, NAN, 0, 0 },
                            .series = &s,
                            .n_series = 1,
                            .refs = &ref,
                            .n_refs = 1 };
    st_buf b;
    st_buf_init(&b, 1 << 20);
    assert_int_equal(st_svg_line(&b, &c), 0);
    assert_int_equal(st_test_count(b.data, ">inf</text>"), 1);
    assert_int_equal(st_test_count(b.data, "stroke-width=\"2.2\""), 2); /* both failures drawn */
    /* the inf point is right of every finite point: its cross is the last marker */
    const char *last = NULL, *p = b.data;
    while ((p = strstr(p, "stroke-width=\"2.2\"")) != NULL)
        last = p++;
    const char *m = last;
    while (strncmp(m, "<path d=\"M", 10) != 0)
        m--;
    double inf_x = atof(m + 10) + 4;
    assert_true(inf_x > 400 && inf_x < 500);
    assert_null(strstr(b.data, "nan"));
    /* without an inf point there is no slot */
    s.n = 3;
    st_buf_reset(&b);
    assert_int_equal(st_svg_line(&b, &c), 0);
    assert_null(strstr(b.data, ">inf</text>"));
    st_buf_free(&b);
}

static void deterministic_and_bounded(void **state)
{
    (void)state;
    st_svg_series s[2];
    st_svg_ref ref;
    st_svg_line_chart c = rate_chart(s, &ref);
    st_buf a, b;
    st_buf_init(&a, 1 << 20);
    st_buf_init(&b, 1 << 20);
    assert_int_equal(st_svg_line(&a, &c), 0);
    st_buf_puts(&b, "prefix");
    assert_int_equal(st_svg_line(&b, &c), 0);
    assert_int_equal(a.len + 6, b.len);
    assert_memory_equal(a.data, b.data + 6, a.len);
    /* a buffer too small for the chart is an error, not a crash or an overrun */
    st_buf small;
    st_buf_init(&small, 500);
    assert_int_equal(st_svg_line(&small, &c), -1);
    assert_true(small.len <= 500);
    st_buf_free(&small);
    st_buf_free(&a);
    st_buf_free(&b);
    /* palette wraps and grey for negative */
    assert_string_equal(st_svg_color(0), st_svg_color(ST_SVG_PALETTE));
    assert_string_equal(st_svg_color(-1), "#6B7280");
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(fmt_numbers),
        cmocka_unit_test(text_escaping),
        cmocka_unit_test(line_chart_structure),
        cmocka_unit_test(linear_axis_ticks),
        cmocka_unit_test(timeline_secondary_axis),
        cmocka_unit_test(hostile_strings),
        cmocka_unit_test(bars_chart),
        cmocka_unit_test(cdf_and_histogram),
        cmocka_unit_test(empty_and_degenerate),
        cmocka_unit_test(inf_rate_slot),
        cmocka_unit_test(deterministic_and_bounded),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
