/* The HTML report of an audit, from a hand-made result store (the example spec, made-up runs
 * with per-request records and /metrics samples): the adapter from the report model and the
 * store to the HTML renderer. */
#include "harness.h"

#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit/store.h"
#include "report/html_audit.h"
#include "report/report.h"

static char dir[256];

static int rm_dir(void **state)
{
    (void)state;
    const char *files[] = { "results.sqlite", "results.sqlite-wal", "results.sqlite-shm", "report.html" };
    char p[512];
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
    return 0;
}

/* A run with 40 records (TTFT 300 + 5 i ms, TPOT 30 ms over 100 tokens) and 10 metric
 * scrapes; `metrics` = 0: none, 1: KV usage only, 2: all four (generic names), 3: all four
 * (other spellings). */
static void put_run(st_store *s, const char *cfg, int seq, double rate, const char *verdict, double delivered,
                    int metrics)
{
    st_run_row r = { .config = (char *)cfg,
                     .seq = seq,
                     .rate = rate,
                     .grid = 1,
                     .verdict = (char *)verdict,
                     .why = (char *)(strcmp(verdict, "pass") ? "p95 TTFT 2250 ms > 1500 ms (x1.50)" : "ok"),
                     .planned = 200,
                     .sent = 200,
                     .completed = 200,
                     .duration_s = 200 / delivered,
                     .delivered_rps = delivered,
                     .output_tps = delivered * 300,
                     .sustained_rps = delivered * 1.02,
                     .ttft_p95_ms = 800 + 100 * seq,
                     .tpot_p95_ms = 40,
                     .worst_ratio = 0.8 };
    char key[64];
    snprintf(key, sizeof key, "%s-%d", cfg, seq);
    st_store_hash(key, strlen(key), r.run_key);
    st_record recs[41];
    for (uint32_t i = 0; i < 41; i++) {
        st_record_init(&recs[i], i);
        recs[i].status = ST_REQ_OK;
        recs[i].warmup = i == 40; /* excluded from the distribution */
        recs[i].scheduled = (st_ns)i * 100000000;
        recs[i].sent = recs[i].scheduled;
        recs[i].first_token = recs[i].scheduled + (st_ns)(300 + 5 * i) * 1000000;
        recs[i].output_tokens = 101;
        recs[i].output_requested = 101;
        recs[i].end = recs[i].first_token + (st_ns)100 * 30 * 1000000;
    }
    st_metrics_sample ms[60];
    uint32_t nm = 0;
    int generic = metrics == 2; /* 2: the audit's generic names; 3: other spellings */
    for (int k = 0; metrics && k < 10; k++) {
        ms[nm++] = (st_metrics_sample){ k, generic || metrics == 1 ? "kv_usage" : "kv_cache_usage", 0.1 * k };
        if (metrics >= 2) {
            ms[nm++] = (st_metrics_sample){ k, generic ? "running" : "num_running", 3 * k };
            ms[nm++] = (st_metrics_sample){ k, generic ? "waiting" : "vllm:num_requests_waiting", k > 5 ? k : 0 };
            ms[nm++] = (st_metrics_sample){ k, generic ? "preemptions" : "num_preemptions_total", 1000 + k };
            ms[nm++] = (st_metrics_sample){ k, "prefix_hits", 5000 + k }; /* not drawn */
        }
    }
    assert_int_equal(st_store_run_put(s, &r, recs, 41, ms, nm), 0);
    for (int i = 0; i < 41; i++)
        st_record_free(&recs[i]);
}

static st_store *make_store(int partial)
{
    snprintf(dir, sizeof dir, "/tmp/st_html_audit_test.XXXXXX");
    assert_non_null(mkdtemp(dir));
    st_store *s;
    char err[256];
    assert_int_equal(st_store_open(dir, &s, err, sizeof err), 0);
    size_t len = 0;
    char *spec = st_test_slurp("examples/qwen3-8b-h100.yaml", &len);
    /* the runs below are a burst test's (the example itself searches sustained rates) */
    char *mode = spec ? strstr(spec, "mode: sustained") : NULL;
    assert_non_null(mode);
    memcpy(mode, "mode: burst    ", 15);
    assert_non_null(spec);
    assert_int_equal(st_store_audit_begin(s, "examples/qwen3-8b-h100.yaml", spec, len, "0.1.0", 0, err, sizeof err), 0);
    const char *names[] = { "baseline", "no-prefix-cache", "batched-8k", "fp8-kv", "fp8-ckpt", "fp8-all" };
    for (int i = 0; i < 6; i++) {
        if (i == 4)
            continue; /* fp8-ckpt never started */
        st_config_row c = { .name = (char *)names[i],
                            .idx = i,
                            .status = "done",
                            .startup_s = 3.5,
                            .argv = "servetune emulate serve Qwen/Qwen3-8B",
                            .facts = "{\"engine_version\":\"0.11.0<b>\"}" };
        if (i == 2) {
            c.status = "failed";
            c.startup_s = NAN;
            c.failure_class = "oom";
            c.failure_detail = "ValueError: KV cache <img src=x onerror=alert(1)> is too large";
            c.log_tail = "line one\n<script>alert(1)</script> | `x`";
        }
        assert_int_equal(st_store_config_put(s, &c), 0);
    }
    put_run(s, "baseline", 0, 2, "pass", 1.98, 2);
    put_run(s, "baseline", 1, 4, "pass", 3.95, 2);
    put_run(s, "baseline", 2, 6, "pass", 5.9, 2);
    put_run(s, "baseline", 3, 8, "fail", 7.1, 2);
    put_run(s, "no-prefix-cache", 0, 2, "fail", 1.9, 1);
    put_run(s, "fp8-kv", 0, 8, "pass", 7.9, 0);
    put_run(s, "fp8-kv", 1, 12, "pass", 11.8, 0);
    put_run(s, "fp8-kv", 2, 16, "fail", 13, 0);
    put_run(s, "fp8-all", 0, 8, "pass", 7.95, 3);
    put_run(s, "fp8-all", 1, 12, "fail", 10, 3);
    if (partial)
        assert_int_equal(st_store_audit_finish(s, 1, "interrupted by SIGINT"), 0);
    else
        assert_int_equal(st_store_audit_finish(s, 0, NULL), 0);
    return s;
}

static char *render(st_store *s, int with_store, int prediction)
{
    st_report r;
    char err[256] = "";
    assert_int_equal(st_report_load(s, &r, err, sizeof err), 0);
    st_buf b;
    st_buf_init(&b, (size_t)64 << 20);
    st_html_audit_opts o = { prediction };
    if (st_report_html(&r, with_store ? s : NULL, &o, &b, err, sizeof err) != 0)
        fail_msg("st_report_html: %s", err);
    st_report_free(&r);
    return b.data;
}

/* A prediction's page names servetune as its generator (head and footer), not the method's
 * prediction line. */
static void prediction_generator(void **state)
{
    (void)state;
    st_store *s = make_store(0);
    st_report r;
    char err[256] = "";
    assert_int_equal(st_report_load(s, &r, err, sizeof err), 0);
    r.audit.prediction = 1;
    st_buf b;
    st_buf_init(&b, (size_t)64 << 20);
    st_html_audit_opts o = { 1 };
    assert_int_equal(st_report_html(&r, s, &o, &b, err, sizeof err), 0);
    st_report_free(&r);
    assert_non_null(strstr(b.data, "<meta name=\"generator\" content=\"servetune 0.1.0\">"));
    assert_non_null(strstr(b.data, "Generated by servetune 0.1.0. Every figure"));
    assert_non_null(strstr(b.data, "Prediction: every run was computed by servetune")); /* in the method */
    st_buf_free(&b);
    st_store_close(s);
}

static long pos(const char *hay, const char *needle)
{
    const char *p = strstr(hay, needle);
    if (!p)
        fail_msg("missing \"%s\"", needle);
    return p - hay;
}

static void audit_report_content(void **state)
{
    (void)state;
    st_store *s = make_store(0);
    char *h = render(s, 1, 0);
    /* sections and title from the spec */
    assert_non_null(strstr(h, "<title>Serving audit: Qwen/Qwen3-8B on "));
    long a = pos(h, "<section id=\"headline\">"), b = pos(h, "<section id=\"setup\">"),
         c = pos(h, "<section id=\"results\">"), d = pos(h, "<section id=\"changes\">"),
         e = pos(h, "<section id=\"method\">");
    assert_true(a < b && b < c && c < d && d < e);
    /* the headline is the audit's own sentence */
    assert_non_null(strstr(h, "the best, fp8-kv, serves 11.8 requests/s within the SLO"));
    /* every run with its verdict and reason, as report.md's evidence */
    const char *ev = strstr(h, "<section id=\"evidence\">\n<h2>Every run</h2>");
    assert_non_null(ev);
    assert_true(pos(ev, "<td>fp8-kv</td>") < pos(ev, "<td>baseline</td>"));
    /* table in the audit's order: fp8-kv, fp8-all, baseline, none passed, failed, not run */
    const char *t = h + pos(h, "id=\"results-table\"");
    long p1 = pos(t, "fp8-kv<"), p2 = pos(t, "fp8-all<"), p3 = pos(t, "baseline<"), p4 = pos(t, "no-prefix-cache<"),
         p5 = pos(t, "batched-8k<"), p6 = pos(t, "fp8-ckpt<");
    assert_true(p1 < p2 && p2 < p3 && p3 < p4 && p4 < p5 && p5 < p6);
    assert_non_null(strstr(t, "<tr class=\"rec\"><td class=\"cfg\"><span class=\"sw\" style=\"background:"));
    assert_non_null(strstr(t, "passed at 12, failed at 16"));
    assert_non_null(strstr(t, "<b>$0.195</b>"));
    assert_non_null(strstr(t, "\xE2\x88\x92"
                              "50 %"));
    assert_non_null(strstr(t, "$10,906"));
    assert_non_null(strstr(t, "did not start: oom: ValueError: KV cache &lt;img"));
    assert_non_null(strstr(t, "none passed: at 2 req/s: p95 TTFT 2250 ms"));
    assert_non_null(strstr(t, ">not run "
                              "\xE2\x80\x94")); /* no "not run: not run" */
    /* setup from the spec and the facts, escaped */
    assert_non_null(strstr(h, "(version 0.11.0&lt;b&gt;)</td>"));
    assert_non_null(strstr(h, "<th scope=\"row\">SLO</th><td>p95 TTFT &lt;= 1500 ms and p95 TPOT &lt;= 50 ms</td>"));
    /* changes: the spec's flags and reasons, and the command line */
    assert_non_null(strstr(h, "started as <code>servetune emulate serve Qwen/Qwen3-8B</code>"));
    /* notes: the failed start with its log tail, escaped; none passed; run environment */
    assert_non_null(strstr(h, "did not start (oom: ValueError: KV cache &lt;img"));
    assert_non_null(strstr(h, ").<pre class=\"log\">line one\n&lt;script&gt;alert(1)&lt;/script&gt; | `x`</pre>"));
    assert_non_null(strstr(h, "met the SLO at no tested rate"));
    assert_non_null(strstr(h, "Run environment:"));
    assert_null(strstr(h, "<script"));
    assert_null(strstr(h, "<img"));
    /* charts: rate charts with the SLO lines, distributions of the capacity runs, timelines */
    assert_non_null(strstr(h, ">SLO 1500 ms</text>"));
    assert_non_null(strstr(h, ">SLO 50 ms</text>"));
    assert_non_null(strstr(h, ">baseline @ 6/s</text>"));        /* capacity run */
    assert_non_null(strstr(h, ">no-prefix-cache @ 2/s</text>")); /* none passed: lowest rate */
    /* 2 cost + 2 rate + 2 CDF + a timeline per measured run with samples (10 - fp8-kv's 3) */
    assert_int_equal(st_test_count(h, "<svg"), 6 + 7);
    assert_int_equal(st_test_count(h, "No metric samples for any run of this configuration."), 1);
    assert_non_null(strstr(h, "Not exposed by the engine: running, waiting, preemptions."));
    assert_int_equal(st_test_count(h, "Not exposed by the engine"), 1); /* generic names and aliases read */
    /* preemptions is a counter (1000 + k): drawn as the increase since the run began, so the
     * right axis ends near the running count (27), not at 1000 */
    const char *tl = h + pos(h, "<section id=\"timelines\">");
    assert_null(strstr(tl, ">1000</text>"));
    assert_non_null(strstr(tl, ">30</text>"));
    assert_null(strstr(h, "banner-prediction"));
    assert_null(strstr(h, "banner-partial"));
    free(h);
    st_store_close(s);
}

static void audit_report_partial_prediction_nostore(void **state)
{
    (void)state;
    st_store *s = make_store(1);
    char *h = render(s, 0, 1);
    assert_non_null(strstr(h, "id=\"banner-partial\""));
    assert_non_null(strstr(h, "interrupted by SIGINT"));
    assert_non_null(strstr(h, "id=\"banner-prediction\""));
    /* without the store: no per-request distributions, no metric samples */
    assert_non_null(strstr(h, "No per-request latencies at a capacity rate to show."));
    assert_non_null(strstr(h, "No server-side metrics were scraped in this audit"));
    free(h);
    /* rendering twice gives the same bytes */
    char *x = render(s, 1, 0), *y = render(s, 1, 0);
    assert_string_equal(x, y);
    free(x);
    free(y);
    st_store_close(s);
}

static void audit_report_write(void **state)
{
    (void)state;
    st_store *s = make_store(0);
    char err[256] = "", path[300];
    assert_int_equal(st_report_html_write(s, dir, NULL, err, sizeof err), 0);
    snprintf(path, sizeof path, "%s/report.html", dir);
    size_t len = 0;
    char *d = st_test_slurp(path, &len);
    assert_non_null(d);
    assert_true(len > 10000);
    assert_true(strncmp(d, "<!DOCTYPE html>", 15) == 0);
    const char *keep = getenv("SERVETUNE_HTML_KEEP"); /* to look at it */
    if (keep && *keep) {
        char kp[512];
        snprintf(kp, sizeof kp, "%s/audit-report.html", keep);
        FILE *f = fopen(kp, "wb");
        if (f) {
            fwrite(d, 1, len, f);
            fclose(f);
        }
    }
    assert_int_equal(st_report_html_write(s, "/nonexistent-dir", NULL, err, sizeof err), -1);
    assert_true(err[0] != '\0');
    st_store_close(s);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test_teardown(audit_report_content, rm_dir),
        cmocka_unit_test_teardown(audit_report_partial_prediction_nostore, rm_dir),
        cmocka_unit_test_teardown(prediction_generator, rm_dir),
        cmocka_unit_test_teardown(audit_report_write, rm_dir),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
