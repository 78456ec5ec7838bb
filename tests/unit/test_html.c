#include "harness.h"

#include <stdio.h>
#include <unistd.h>

#include "core/buf.h"
#include "html_sample.h"
#include "report/html.h"

static char *render(const st_html_report *r)
{
    st_buf b;
    st_buf_init(&b, (size_t)64 << 20);
    char err[256] = "";
    if (st_html_render(r, &b, err, sizeof err) < 0)
        fail_msg("render: %s", err);
    return b.data;
}

static sample_store *new_sample(int hostile, int partial, int prediction)
{
    sample_store *st = calloc(1, sizeof *st);
    assert_non_null(st);
    sample_report(st, hostile, partial, prediction);
    return st;
}

/* Position of needle in hay (fails when absent). */
static long pos(const char *hay, const char *needle)
{
    const char *p = strstr(hay, needle);
    if (!p)
        fail_msg("missing \"%s\"", needle);
    return p - hay;
}

static void document_structure(void **state)
{
    (void)state;
    sample_store *st = new_sample(0, 0, 0);
    char *h = render(&st->rep);
    assert_true(strncmp(h, "<!DOCTYPE html>\n<html lang=\"en\">", 31) == 0);
    assert_int_equal(st_test_count(h, "<head>"), 1);
    assert_int_equal(st_test_count(h, "</head>"), 1);
    assert_int_equal(st_test_count(h, "<body>"), 1);
    assert_int_equal(st_test_count(h, "</body>"), 1);
    size_t n = strlen(h);
    assert_string_equal(h + n - 8, "</html>\n");
    assert_non_null(strstr(h, "<meta charset=\"utf-8\">"));
    assert_non_null(strstr(h, "Content-Security-Policy\" content=\"default-src 'none'"));
    assert_non_null(strstr(h, "@media print"));
    /* the sections of the reference doc, in order, then the timelines */
    long a = pos(h, "<section id=\"headline\">"), b = pos(h, "<section id=\"setup\">"),
         c = pos(h, "<section id=\"results\">"), d = pos(h, "<section id=\"changes\">"),
         e = pos(h, "<section id=\"method\">"), f = pos(h, "<section id=\"timelines\">");
    assert_true(a < b && b < c && c < d && d < e && e < f);
    assert_int_equal(st_test_count(h, "<section"), st_test_count(h, "</section>"));
    assert_int_equal(st_test_count(h, "<table"), st_test_count(h, "</table>"));
    assert_int_equal(st_test_count(h, "<tr"), st_test_count(h, "</tr>"));
    assert_int_equal(st_test_count(h, "<figure"), st_test_count(h, "</figure>"));
    assert_int_equal(st_test_count(h, "<svg"), st_test_count(h, "</svg>"));
    /* charts: 2 cost + 2 rate + 2 distributions + one per run of the 6 that ran */
    assert_int_equal(st_test_count(h, "<svg"), 6 + 6 * SAMPLE_RATES);
    /* the results table: header + 7 rows; the changes table: header + 7 rows */
    long rt = pos(h, "id=\"results-table\""), ct = pos(h, "id=\"changes-table\"");
    char *rend = strstr(h + rt, "</table>"), *cend = strstr(h + ct, "</table>");
    assert_non_null(rend);
    assert_non_null(cend);
    int rows = 0;
    for (const char *p = h + rt; (p = strstr(p, "<tr")) && p < rend; p++)
        rows++;
    assert_int_equal(rows, 1 + SAMPLE_CFGS);
    rows = 0;
    for (const char *p = h + ct; (p = strstr(p, "<tr")) && p < cend; p++)
        rows++;
    assert_int_equal(rows, 1 + SAMPLE_CFGS);
    /* column headers as the reference doc names them */
    assert_non_null(strstr(h, "<th class=\"num\">Capacity at SLO (req/s)</th>"));
    assert_non_null(strstr(h, "<th class=\"num\">$ per 1M output tok</th>"));
    assert_non_null(strstr(h, "<th class=\"num\">p95 TTFT / TPOT at capacity (ms)</th>"));
    assert_non_null(strstr(h, "<th class=\"num\">Replicas at peak</th>"));
    /* notes with their severity */
    assert_int_equal(st_test_count(h, "<li class=\"warn\">"), 1);
    assert_int_equal(st_test_count(h, "<li class=\"error\">"), 1);
    assert_int_equal(st_test_count(h, "<li class=\"info\">"), 3);
    /* no banners when not flagged */
    assert_null(strstr(h, "banner-partial"));
    assert_null(strstr(h, "banner-prediction"));
    free(h);
    free(st);
}

static void no_external_resources(void **state)
{
    (void)state;
    sample_store *st = new_sample(1, 1, 1);
    char *h = render(&st->rep);
    assert_null(strstr(h, "src=\"http"));
    assert_null(strstr(h, "href=\"http"));
    assert_null(strstr(h, "@import"));
    assert_null(strstr(h, "url("));
    assert_null(strstr(h, "<script"));
    assert_null(strstr(h, "<link"));
    assert_null(strstr(h, "<iframe"));
    assert_null(strstr(h, "<object"));
    assert_null(strstr(h, "<embed"));
    /* every URL is an SVG namespace declaration (plus the CSP's http-equiv) */
    assert_int_equal(st_test_count(h, "https:"), 0);
    assert_int_equal(st_test_count(h, "//"), st_test_count(h, "xmlns=\"http://www.w3.org/2000/svg\""));
    assert_int_equal(st_test_count(h, "http"), st_test_count(h, "xmlns=\"http://www.w3.org/2000/svg\"") + 1);
    /* links are in-page anchors only */
    assert_int_equal(st_test_count(h, "href="), st_test_count(h, "href=\"#"));
    free(h);
    free(st);
}

static void hostile_strings_escaped(void **state)
{
    (void)state;
    sample_store *st = new_sample(1, 1, 0);
    char *h = render(&st->rep);
    assert_null(strstr(h, "<img"));
    assert_null(strstr(h, "<script"));
    assert_null(strstr(h, "<svg onload"));
    assert_null(strstr(h, "onerror=alert(1)>"));
    assert_null(strstr(h, "</td><script"));
    assert_null(strstr(h, "<b>examples"));
    assert_non_null(strstr(h, "fp8-kv&quot;&gt;&lt;img src=x onerror=alert(1)&gt;"));
    assert_non_null(strstr(h, "&lt;script&gt;alert(&#39;oom&#39;)&lt;/script&gt;"));
    assert_non_null(strstr(h, "&quot;&gt;&lt;svg onload=alert(3)&gt;"));
    assert_non_null(strstr(h, "&lt;b&gt;examples/qwen3-8b-h100.yaml&lt;/b&gt; &amp; friends"));
    assert_non_null(strstr(h, "<pre class=\"log\">INFO loading weights\n&lt;/pre&gt;&lt;script&gt;"));
    assert_int_equal(st_test_count(h, "<pre"), st_test_count(h, "</pre>"));
    free(h);

    /* a marker string in every text field of the model never comes out as markup */
    const char *evil = "<x-evil a='1'>\x01\x1b\xff";
    static const char *meth[2];
    meth[0] = evil;
    meth[1] = "ok";
    st->rep.title = st->rep.subtitle = st->rep.headline = st->rep.partial_reason = evil;
    st->rep.generator = evil;
    st->rep.method = meth;
    st->rep.n_method = 2;
    st->setup[0].key = st->setup[0].value = evil;
    st->notes[0].config = st->notes[0].text = st->notes[1].detail = evil;
    for (int i = 0; i < SAMPLE_CFGS; i++) {
        st->cfg[i].name = st->cfg[i].changes = st->cfg[i].reason = evil;
        st->cfg[i].status_text = evil;
    }
    h = render(&st->rep);
    assert_null(strstr(h, "<x-evil"));
    assert_null(strstr(h, "\x01"));
    assert_null(strstr(h, "\x1b"));
    assert_null(strstr(h, "\xff"));
    assert_true(st_test_count(h, "&lt;x-evil a=&#39;1&#39;&gt;") > 20);
    free(h);
    free(st);
}

static void banners_when_flagged(void **state)
{
    (void)state;
    sample_store *st = new_sample(0, 1, 1);
    char *h = render(&st->rep);
    assert_non_null(strstr(h, "<title>[PARTIAL] [PREDICTION] Serving audit"));
    long p = pos(h, "id=\"banner-partial\""), q = pos(h, "id=\"banner-prediction\"");
    long hl = pos(h, "<section id=\"headline\">");
    assert_true(p < hl && q < hl); /* above everything else */
    assert_non_null(strstr(h, "<b>PARTIAL</b>"));
    assert_non_null(strstr(h, "interrupted by SIGINT after 5 of 7 configurations"));
    assert_non_null(strstr(h, "<b>PREDICTION (engine model, not measured)</b>"));
    free(h);
    st->rep.partial = 0;
    h = render(&st->rep);
    assert_null(strstr(h, "banner-partial"));
    assert_non_null(strstr(h, "banner-prediction"));
    assert_non_null(strstr(h, "<title>[PREDICTION] Serving audit"));
    free(h);
    free(st);
}

static void results_cheapest_first(void **state)
{
    (void)state;
    sample_store *st = new_sample(0, 0, 0);
    char *h = render(&st->rep);
    const char *t = h + pos(h, "id=\"results-table\"");
    /* fp8-all $0.484 < fp8-kv < baseline = batched-16k (spec order) < no-prefix-cache, then
     * none passed, then did not start */
    long a = pos(t, "fp8-all<"), b = pos(t, "fp8-kv<"), c = pos(t, "baseline<"), d = pos(t, "batched-16k<"),
         e = pos(t, "no-prefix-cache<"), f = pos(t, "fp8-ckpt<"), g = pos(t, "tp2-spec<");
    assert_true(a < b && b < c && c < d && d < e && e < f && f < g);
    assert_non_null(strstr(t, "none passed: p95 TPOT"));
    assert_non_null(strstr(t, "did not start: out of memory"));
    assert_non_null(strstr(t, "<tr class=\"rec\">"));
    /* figures and changes against the baseline */
    assert_non_null(strstr(t, "<b>5.77</b>"));
    assert_non_null(strstr(t, "<b>$0.484</b>"));
    assert_non_null(strstr(t, "+100 %"));
    assert_non_null(strstr(t, "\xE2\x88\x92"
                              "50 %"));
    assert_non_null(strstr(t, "passed at 6, failed at 8"));
    assert_non_null(strstr(t, "$15,279"));
    free(h);
    /* an undecided end is no failure: the row says what the search's log says */
    for (int i = 0; i < SAMPLE_CFGS; i++)
        st->cfg[i].fail_undecided = st->cfg[i].fail_rate == 8;
    h = render(&st->rep);
    assert_non_null(strstr(h, "passed at 6, undecided at 8"));
    assert_null(strstr(h, "failed at 8"));
    free(h);
    for (int i = 0; i < SAMPLE_CFGS; i++)
        st->cfg[i].fail_undecided = 0;
    /* a capacity found at rate inf still shows its bracket */
    st->cfg[5].pass_rate = INFINITY;
    st->cfg[5].fail_rate = NAN;
    h = render(&st->rep);
    assert_non_null(strstr(h, "passed at inf, highest tested"));
    free(h);
    /* keep_order keeps the spec order */
    st->rep.keep_order = 1;
    h = render(&st->rep);
    t = h + pos(h, "id=\"results-table\"");
    assert_true(pos(t, "baseline<") < pos(t, "no-prefix-cache<"));
    assert_true(pos(t, "no-prefix-cache<") < pos(t, "fp8-all<"));
    free(h);
    free(st);
}

static void default_headline_and_method(void **state)
{
    (void)state;
    sample_store *st = new_sample(0, 0, 0);
    st->rep.headline = NULL;
    char *h = render(&st->rep);
    const char *lead = h + pos(h, "<p class=\"lead\">");
    assert_true(strstr(lead, "<b>fp8-all</b> serves <b>5.77 requests/s</b>") != NULL);
    assert_true(strstr(lead, "against 2.89 for the current setup") != NULL);
    assert_true(strstr(lead, "from $0.968 to $0.484 (\xE2\x88\x92"
                             "50 %)") != NULL);
    assert_non_null(strstr(h, "Capacity at SLO is the delivered request throughput"));
    free(h);
    /* the baseline fails everywhere: said first */
    st->cfg[0].status = ST_HTML_CFG_NONE_PASSED;
    h = render(&st->rep);
    lead = h + pos(h, "<p class=\"lead\">");
    assert_true(strncmp(lead, "<p class=\"lead\">The current setup (baseline) did not meet the SLO", 62) == 0);
    free(h);
    /* nothing passed at all */
    for (int i = 0; i < SAMPLE_CFGS; i++)
        if (st->cfg[i].status == ST_HTML_CFG_OK)
            st->cfg[i].status = ST_HTML_CFG_NONE_PASSED;
    h = render(&st->rep);
    assert_non_null(strstr(h, "No configuration met the SLO at any tested rate"));
    free(h);
    free(st);
}

static void change_format(void **state)
{
    (void)state;
    char t[48];
    st_html_fmt_change(t, sizeof t, 0.42);
    assert_string_equal(t, "+42 %");
    st_html_fmt_change(t, sizeof t, -0.25);
    assert_string_equal(t, "\xE2\x88\x92"
                           "25 %");
    st_html_fmt_change(t, sizeof t, 0.05);
    assert_string_equal(t, "+5.0 %");
    st_html_fmt_change(t, sizeof t, 0.001);
    assert_string_equal(t, "\xC2\xB1"
                           "0 %");
    st_html_fmt_change(t, sizeof t, NAN);
    assert_string_equal(t, "\xE2\x80\x94");
}

static void deterministic(void **state)
{
    (void)state;
    sample_store *s1 = new_sample(1, 1, 1), *s2 = new_sample(1, 1, 1);
    char *a = render(&s1->rep), *b = render(&s2->rep), *c = render(&s1->rep);
    assert_string_equal(a, b);
    assert_string_equal(a, c);
    free(a);
    free(b);
    free(c);
    free(s1);
    free(s2);
}

static void bounded_and_edge_cases(void **state)
{
    (void)state;
    sample_store *st = new_sample(0, 0, 0);
    st_buf b;
    st_buf_init(&b, 10000);
    char err[256] = "";
    assert_int_equal(st_html_render(&st->rep, &b, err, sizeof err), -1);
    assert_non_null(strstr(err, "exceeds its limit of 10000 bytes"));
    assert_true(b.len <= 10000);
    st_buf_free(&b);

    /* an empty report still renders every section */
    st_html_report empty;
    memset(&empty, 0, sizeof empty);
    empty.slo_ttft_ms = empty.slo_tpot_ms = NAN;
    char *h = render(&empty);
    assert_non_null(strstr(h, "<section id=\"results\">"));
    assert_non_null(strstr(h, "No configuration has results yet."));
    assert_non_null(strstr(h, "The data called for no notes."));
    free(h);

    /* a huge latency sample set is drawn through a bounded number of points */
    enum { N = 200000 };
    double *v = malloc(sizeof(double) * N);
    assert_non_null(v);
    for (int i = 0; i < N; i++)
        v[i] = 50 + (i % 997);
    for (int i = 0; i < SAMPLE_CFGS; i++) {
        st->cfg[i].ttft_ms = st->cfg[i].tpot_ms = v;
        st->cfg[i].n_ttft = st->cfg[i].n_tpot = N;
    }
    h = render(&st->rep);
    assert_true(strlen(h) < 2000000);
    free(h);

    /* metrics the engine did not expose, a run without samples, inf rates */
    for (uint32_t j = 0; j < SAMPLE_SAMPLES; j++)
        st->samp[1][0][j].kv_usage = NAN;
    st->runs[1][1].n_samples = 0;
    st->pts[0][SAMPLE_RATES - 1].rate = INFINITY;
    h = render(&st->rep);
    assert_non_null(strstr(h, "Not exposed by the engine: KV cache usage."));
    assert_non_null(strstr(h, "Not exposed by the engine: preemptions."));
    assert_non_null(strstr(h, "No metric samples for this run"));
    assert_non_null(strstr(h, "The rate inf (all requests sent at once)"));
    assert_non_null(strstr(h, ">inf</text>"));
    assert_null(strstr(h, "nan"));
    free(h);
    free(v);
    free(st);
}

static void write_file_atomically(void **state)
{
    (void)state;
    sample_store *st = new_sample(0, 0, 0);
    char dir[] = "/tmp/st-html-XXXXXX", path[128], err[256] = "";
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/report.html", dir);
    assert_int_equal(st_html_write_file(&st->rep, path, 0, err, sizeof err), 0);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fclose(f);
    char *h = render(&st->rep);
    assert_int_equal(len, (long)strlen(h));
    free(h);
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    assert_int_equal(access(tmp, F_OK), -1);
    /* too small a limit: nothing written, old file kept */
    assert_int_equal(st_html_write_file(&st->rep, path, 1000, err, sizeof err), -1);
    f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    assert_int_equal(ftell(f), len);
    fclose(f);
    /* a directory that does not exist */
    assert_int_equal(st_html_write_file(&st->rep, "/nonexistent-dir/x.html", 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "/nonexistent-dir/x.html"));
    unlink(path);
    rmdir(dir);
    free(st);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(document_structure),      cmocka_unit_test(no_external_resources),
        cmocka_unit_test(hostile_strings_escaped), cmocka_unit_test(banners_when_flagged),
        cmocka_unit_test(results_cheapest_first),  cmocka_unit_test(default_headline_and_method),
        cmocka_unit_test(change_format),           cmocka_unit_test(deterministic),
        cmocka_unit_test(bounded_and_edge_cases),  cmocka_unit_test(write_file_atomically),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
