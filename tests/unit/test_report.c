/* Reports from a hand-made result store (the example spec, made-up runs): the headline, the
 * order, the cost figures against hand-computed values, partial marking, escaping. */
#include "harness.h"

#include <jansson.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit/store.h"
#include "load/trace_stats.h"
#include "report/html_audit.h"
#include "report/report.h"
#include "report/traffic.h"

static char dir[256];

static int rm_dir(void **state)
{
    (void)state;
    const char *files[] = { "results.sqlite", "results.sqlite-wal", "results.sqlite-shm", "report.md",
                            "report.json",    "results.csv",        "report.html" };
    char p[512];
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
    return 0;
}

/* Writes every report of s into dir and returns report.md's text (st_test_slurp's buffer). */
static char *written_md(st_store *s)
{
    char err[256] = "", p[512];
    if (st_report_write_all(s, dir, err, sizeof err))
        fail_msg("%s", err);
    size_t len = 0;
    snprintf(p, sizeof p, "%s/report.md", dir);
    char *md = st_test_slurp(p, &len);
    assert_non_null(md);
    return md;
}

static void put_run(st_store *s, const char *cfg, int seq, double rate, const char *verdict, double delivered)
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
                     .ttft_p95_ms = 800,
                     .tpot_p95_ms = 40,
                     .worst_ratio = 0.8 };
    char key[64];
    snprintf(key, sizeof key, "%s-%d", cfg, seq);
    st_store_hash(key, strlen(key), r.run_key);
    assert_int_equal(st_store_run_put(s, &r, NULL, 0, NULL, 0), 0);
}

static int low_peak;         /* make_store_as: the spec's peak at 1 req/s (every configuration needs 1 replica) */
static int base_not_started; /* make_store: the baseline ran no rate */

static st_store *make_store_as(int partial, int burst)
{
    snprintf(dir, sizeof dir, "/tmp/st_report_test.XXXXXX");
    assert_non_null(mkdtemp(dir));
    st_store *s;
    char err[256];
    assert_int_equal(st_store_open(dir, &s, err, sizeof err), 0);
    size_t len = 0;
    char *spec = st_test_slurp("examples/qwen3-8b-h100.yaml", &len);
    /* the runs below are a burst test's (the example itself searches sustained rates) */
    char *mode = spec ? strstr(spec, "mode: sustained") : NULL;
    assert_non_null(mode);
    if (burst)
        memcpy(mode, "mode: burst    ", 15);
    char *peak = strstr(spec, "peak_rate: 60");
    assert_non_null(peak);
    if (low_peak)
        memcpy(peak, "peak_rate: 1 ", 13);
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
                            .argv = "servetune emulate serve Qwen/Qwen3-8B" };
        if (i == 0) /* the engine's /version answer is text from outside: the report escapes it */
            c.facts = "{\"engine_version\":\"0.9<img src=x onerror=alert(1)>*x*\"}";
        if (i == 2) {
            c.status = "failed";
            c.startup_s = NAN;
            c.failure_class = "oom";
            /* vLLM's longest refusal: its end (what would fit) must reach the report whole */
            c.failure_detail = "ValueError: To serve at least one request with the models's max seq len (131072), "
                               "(20.00 GiB KV cache is needed, which is larger than the available KV cache memory "
                               "(0.30 GiB). Based on the available memory, the estimated maximum model length is "
                               "1952. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
                               "initializing the engine.";
            c.log_tail = "line one\n<script>alert(1)</script> | `x`";
        }
        assert_int_equal(st_store_config_put(s, &c), 0);
    }
    /* baseline: passes 2, 4, 6 (delivers 5.9), fails 8 */
    if (!base_not_started) {
        put_run(s, "baseline", 0, 2, "pass", 1.98);
        put_run(s, "baseline", 1, 4, "pass", 3.95);
        put_run(s, "baseline", 2, 6, "pass", 5.9);
        put_run(s, "baseline", 3, 8, "fail", 7.1);
    }
    put_run(s, "no-prefix-cache", 0, 2, "fail", 1.9);
    put_run(s, "fp8-kv", 0, 8, "pass", 7.9);
    put_run(s, "fp8-kv", 1, 12, "pass", 11.8);
    put_run(s, "fp8-kv", 2, 16, "fail", 13);
    put_run(s, "fp8-all", 0, 8, "pass", 7.95);
    put_run(s, "fp8-all", 1, 12, "fail", 10);
    if (partial)
        assert_int_equal(st_store_audit_finish(s, 1, "interrupted by SIGINT"), 0);
    else
        assert_int_equal(st_store_audit_finish(s, 0, NULL), 0);
    return s;
}

static st_store *make_store(int partial) { return make_store_as(partial, 1); }

/* An interrupted sustained audit whose configuration ran but decided nothing (one undecided
 * run): no capacity, and the report says it ran rather than "not run"; a configuration whose
 * engine crashed after running a rate "failed", not "did not start". */
static void ran_but_undecided_is_not_not_run(void **state)
{
    (void)state;
    st_store *s = make_store_as(1, 0);
    st_config_row c = { .name = "fp8-ckpt", .idx = 4, .status = "done", .startup_s = 3.5, .argv = "x" };
    assert_int_equal(st_store_config_put(s, &c), 0);
    put_run(s, "fp8-ckpt", 0, 25.6, "undecided", 20);
    /* and one whose engine started, ran a rate and then crashed: not "did not start" */
    st_config_row crash = { .name = "no-prefix-cache",
                            .idx = 1,
                            .status = "failed",
                            .startup_s = 3.5,
                            .failure_class = "crash",
                            .failure_detail = "the engine exited or crashed: exit status 1",
                            .argv = "x" };
    assert_int_equal(st_store_config_put(s, &crash), 0);
    st_report r;
    char err[256];
    assert_int_equal(st_report_load(s, &r, err, sizeof err), 0);
    assert_int_equal(r.cfg[4].status, ST_REP_NOT_RUN);
    assert_string_equal(r.cfg[4].note, "its 1 run decided nothing (undecided) before the audit was interrupted");
    st_report_free(&r);
    char *md = written_md(s);
    assert_non_null(strstr(md, "no capacity: its 1 run decided nothing (undecided) before the audit was interrupted"));
    assert_null(strstr(md, "**fp8-ckpt**: not run"));
    assert_non_null(strstr(md, "| fp8-ckpt | no verdict: its 1 run decided nothing"));
    assert_non_null(strstr(md, "Of the 6 configurations tested, ")); /* it ran: counted as tested */
    assert_non_null(strstr(md, "| no-prefix-cache | engine failed: crash: the engine exited or crashed"));
    assert_non_null(strstr(md, "the engine failed before any rate passed (crash"));
    st_store_close(s);
    rm_dir(NULL);
}

/* A sustained search whose bracket ends at an undecided run: the tables call that end undecided,
 * as the search's log does, never "failed". */
static void undecided_end_is_not_failed(void **state)
{
    (void)state;
    st_store *s = make_store_as(0, 0);
    st_config_row c = { .name = "fp8-ckpt", .idx = 4, .status = "done", .startup_s = 3.5, .argv = "x" };
    assert_int_equal(st_store_config_put(s, &c), 0);
    put_run(s, "fp8-ckpt", 0, 12, "pass", 11.9);
    put_run(s, "fp8-ckpt", 1, 19.2, "undecided", 15);
    st_report r;
    char err[256];
    assert_int_equal(st_report_load(s, &r, err, sizeof err), 0);
    assert_true(r.cfg[4].cap->has_fail_above && r.cfg[4].cap->fail_rate == 19.2);
    assert_true(r.cfg[4].cap->fail_undecided);
    assert_false(r.cfg[0].cap->fail_undecided); /* the baseline's 8 failed */
    st_report_free(&r);
    char *md = written_md(s);
    assert_non_null(strstr(md, ".. 19.2 (undecided) |"));
    assert_null(strstr(md, "(undecided) (not confident)")); /* no call was made there */
    char p[512];
    size_t len;
    snprintf(p, sizeof p, "%s/report.html", dir);
    const char *html = st_test_slurp(p, &len);
    assert_non_null(html);
    assert_non_null(strstr(html, "undecided at 19.2"));
    assert_null(strstr(html, "failed at 19.2"));
    st_store_close(s);
    rm_dir(NULL);
}

/* A traffic day from the trace (traffic.hourly_rps: trace), read back from the traffic the audit
 * stored (the trace file is gone): the report prices the two hours the trace covers, says the day
 * is the trace's and that the other hours are not priced; report.json's day names its source. */
static void day_from_stored_traffic(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/st_report_test.XXXXXX");
    assert_non_null(mkdtemp(dir));
    st_store *s;
    char err[256];
    assert_int_equal(st_store_open(dir, &s, err, sizeof err), 0);
    const char *spec = "engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100]}\n"
                       "hardware: {gpu: H100, price_per_gpu_hour: 2.5}\npeak_rate: 3\n"
                       "workload: {trace: /nonexistent/servetune-trace.jsonl}\nrates: [2, 4, 8]\n"
                       "search: {mode: burst}\nwarmup_requests: 0\nslo: {ttft_p95_ms: 1500, tpot_p95_ms: 50}\n"
                       "configurations: [{name: baseline}]\ntraffic: {hourly_rps: trace}\n";
    assert_int_equal(st_store_audit_begin(s, "t.yaml", spec, strlen(spec), "0.1.0", 0, err, sizeof err), 0);
    st_config_row c = { .name = "baseline", .idx = 0, .status = "done", .startup_s = 3.5, .argv = "x" };
    assert_int_equal(st_store_config_put(s, &c), 0);
    put_run(s, "baseline", 0, 2, "pass", 1.98);
    put_run(s, "baseline", 1, 4, "pass", 3.95);
    put_run(s, "baseline", 2, 8, "fail", 7.1);
    char traffic[1024] = "{\"schema\": \"servetune.traffic/1\", \"requests\": 5400, \"rate\": {\"hourly\": "
                         "{\"clock\": \"utc\", \"hours\": 2, \"rps\": [";
    for (int h = 0; h < 24; h++)
        snprintf(traffic + strlen(traffic), sizeof traffic - strlen(traffic), "%s%s", h ? ", " : "",
                 h == 9    ? "1.0"
                 : h == 10 ? "0.5"
                           : "null");
    snprintf(traffic + strlen(traffic), sizeof traffic - strlen(traffic), "], \"covered_s\": []}}}");
    assert_int_equal(st_store_meta_put(s, "traffic", traffic), 0);
    assert_int_equal(st_store_audit_finish(s, 0, NULL), 0);
    char *md = written_md(s);
    const char *day = strstr(md, "## A traffic day");
    assert_non_null(day);
    assert_non_null(strstr(day, "The day is the trace's own: its requests per hour of the day (UTC"));
    assert_non_null(strstr(day, "It covers 2 of the 24 hours"));
    assert_non_null(strstr(day, "1 requests/s at its peak hour, 0.75 on average, 5400 requests in all"));
    char p[512];
    size_t len;
    snprintf(p, sizeof p, "%s/report.json", dir);
    json_t *j = json_loads(st_test_slurp(p, &len), 0, NULL);
    assert_non_null(j);
    json_t *td = json_object_get(j, "traffic_day");
    assert_string_equal(json_string_value(json_object_get(td, "source")), "trace_utc");
    assert_true(json_is_null(json_array_get(json_object_get(td, "hourly_rps"), 0)));
    assert_true(json_number_value(json_array_get(json_object_get(td, "hourly_rps"), 9)) == 1.0);
    json_decref(j);
    st_store_close(s);
    rm_dir(NULL);
}

/* The current setup failed with vLLM's longest refusal: the headline keeps it whole, with what
 * would fit at its end. */
static void long_failure_in_headline(void **state)
{
    (void)state;
    base_not_started = 1;
    st_store *s = make_store(0);
    base_not_started = 0;
    st_config_row c = { .name = "baseline",
                        .idx = 0,
                        .status = "failed",
                        .startup_s = NAN,
                        .failure_class = "oom",
                        .failure_detail = "ValueError: To serve at least one request with the models's max seq len "
                                          "(131072), (20.00 GiB KV cache is needed, which is larger than the available "
                                          "KV cache memory (0.30 GiB). Based on the available memory, the estimated "
                                          "maximum model length is 1952. Try increasing `gpu_memory_utilization` or "
                                          "decreasing `max_model_len` when initializing the engine.",
                        .argv = "x" };
    assert_int_equal(st_store_config_put(s, &c), 0);
    char *md = written_md(s);
    const char *head = strstr(md, "## Headline");
    assert_non_null(head);
    const char *end = strstr(head, "## Setup");
    assert_non_null(end);
    const char *hit = strstr(head, "when initializing the engine.");
    if (!hit || hit > end)
        fail_msg("%.2000s", head);
    st_store_close(s);
    rm_dir(NULL);
}

/* A pick that needs as many replicas as the current setup: the headline says so instead of "1
 * replica instead of 1". */
static void same_replicas_headline(void **state)
{
    (void)state;
    low_peak = 1;
    st_store *s = make_store(0);
    low_peak = 0;
    char *md = written_md(s);
    if (!strstr(md, "at the stated peak of 1.00 requests/s both need 1 replica (about $1,818 a month)"))
        fail_msg("%.1500s", md);
    assert_null(strstr(md, "1 replica instead of 1"));
    st_store_close(s);
    rm_dir(NULL);
}

static void model_costs_and_order(void **state)
{
    (void)state;
    st_store *s = make_store(0);
    st_report r;
    char err[256];
    assert_int_equal(st_report_load(s, &r, err, sizeof err), 0);
    assert_int_equal(r.n_cfg, 6);
    /* baseline: 5.9 req/s, 1770 tok/s -> 2.49e6 / (1770 x 3600) = 0.390772 $/1M; ceil(60/5.9) = 11 replicas;
     * 11 x 2.49 x 730 = 19994.7 */
    assert_int_equal(r.cfg[0].status, ST_REP_OK);
    assert_near(r.cfg[0].cap->capacity_rps, 5.9, 1e-12);
    assert_near(r.cfg[0].cost.usd_per_1m, 2.49e6 / (1770.0 * 3600), 1e-12);
    assert_int_equal(r.cfg[0].cost.replicas, 11);
    assert_near(r.cfg[0].cost.monthly_usd, 19994.7, 1e-6);
    assert_near(r.cfg[0].cap->fail_rate, 8, 0);
    /* fp8-kv: 11.8 req/s, 3540 tok/s -> 0.195386 $/1M (-50 %), 6 replicas, 10906.2 $ */
    assert_int_equal(r.pick, 3);
    assert_near(r.cfg[3].cost.usd_per_1m, 2.49e6 / (3540.0 * 3600), 1e-12);
    assert_near(r.cfg[3].cost_vs_base, -0.5, 1e-12);
    assert_near(r.cfg[3].cap_vs_base, 1.0, 1e-12);
    assert_int_equal(r.cfg[3].cost.replicas, 6);
    assert_near(r.cfg[3].cost.monthly_usd, 10906.2, 1e-6);
    assert_int_equal(r.cfg[1].status, ST_REP_NONE_PASSED);
    assert_int_equal(r.cfg[2].status, ST_REP_FAILED);
    assert_int_equal(r.cfg[4].status, ST_REP_NOT_RUN);
    /* cheapest first: fp8-kv, fp8-all, baseline, then none passed, failed, not run (the headline counts
     * only the configurations tested) */
    int want[] = { 3, 5, 0, 1, 2, 4 };
    for (int i = 0; i < 6; i++)
        assert_int_equal(r.order[i], want[i]);
    st_buf b;
    st_buf_init(&b, 1 << 16);
    st_report_headline(&r, &b);
    const char *expect =
        "Of the 5 configurations tested (1 more not run yet), the best, fp8-kv, serves 11.8 requests/s within the SLO "
        "(p95 TTFT <= 1500 ms, p95 TPOT <= 50 ms) in a burst test of 200 requests per rate (not a sustained "
        "rate), against 5.90 for the current setup (baseline), which "
        "moves cost per million output tokens from $0.391 to $0.195 (-50 %); at the stated peak of "
        "60.0 requests/s that is 6 replicas instead of 11, about $10,906 a month instead of $19,995.";
    if (strcmp(b.data, expect))
        fail_msg("headline:\n%s\nwant:\n%s", b.data, expect);
    st_buf_free(&b);
    st_report_free(&r);
    st_store_close(s);
}

static void files_written_and_escaped(void **state)
{
    (void)state;
    st_store *s = make_store(1);
    char err[256] = "";
    if (st_report_write_all(s, dir, err, sizeof err))
        fail_msg("%s", err);
    char p[512];
    size_t len = 0;
    snprintf(p, sizeof p, "%s/report.md", dir);
    char *md = st_test_slurp(p, &len);
    assert_non_null(md);
    const char *sections[] = { "## Headline",
                               "## Setup",
                               "## Results, cheapest first",
                               "## What each configuration changes",
                               "## Evidence per rate",
                               "## Method and limits",
                               "> **Partial report.**",
                               "Partial results (the audit did not finish: interrupted by SIGINT)",
                               "| none passed (see notes)",
                               "did not start: oom",
                               "decreasing \\`max\\_model\\_len\\` when initializing the engine.",
                               "not run",
                               "adds `--kv-cache-dtype fp8`",
                               "Measured on servetune's emulator",
                               "(version 0.9&lt;img src=x onerror=alert(1)>\\*x\\*)" };
    for (size_t i = 0; i < sizeof sections / sizeof *sections; i++)
        if (!strstr(md, sections[i]))
            fail_msg("report.md lacks '%s'", sections[i]);
    snprintf(p, sizeof p, "%s/report.html", dir);
    struct stat hs;
    assert_int_equal(stat(p, &hs), 0); /* the HTML report is written with the others */
    assert_true(hs.st_size > 1000);
    /* raw only inside the fenced log block */
    const char *first = strstr(md, "<script>");
    assert_non_null(first);
    assert_null(strstr(first + 1, "<script>"));
    assert_non_null(strstr(md, "```\nline one\n<script>alert(1)</script> | 'x'\n```"));

    snprintf(p, sizeof p, "%s/report.json", dir);
    char *js = st_test_slurp(p, &len);
    json_error_t je;
    json_t *root = json_loadb(js, len, 0, &je);
    if (!root)
        fail_msg("report.json: %s (line %d)", je.text, je.line);
    assert_true(json_is_true(json_object_get(root, "partial")));
    assert_string_equal(json_string_value(json_object_get(json_object_get(root, "headline"), "pick")), "fp8-kv");
    json_t *cfgs = json_object_get(root, "configurations");
    assert_int_equal(json_array_size(cfgs), 6);
    json_t *kv = json_array_get(cfgs, 3);
    assert_near(json_real_value(json_object_get(json_object_get(kv, "cost"), "monthly_usd")), 10906.2, 1e-6);
    assert_true(json_is_null(json_object_get(json_array_get(cfgs, 2), "cost")));
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(json_array_get(cfgs, 2), "failure"), "class")), "oom");
    json_decref(root);

    /* the pick's deploy snippets, sized at its replicas at peak */
    snprintf(p, sizeof p, "%s/deploy.md", dir);
    char *dep = st_test_slurp(p, &len);
    assert_non_null(dep);
    assert_non_null(strstr(dep, "# Deploying fp8-kv"));
    assert_non_null(strstr(dep, "Sized for the stated peak: 6 replicas."));
    assert_non_null(strstr(dep, "--kv-cache-dtype fp8 --host 0.0.0.0 --port 8000"));
    snprintf(p, sizeof p, "%s/deploy-k8s.yaml", dir);
    char *k8s = st_test_slurp(p, &len);
    assert_non_null(k8s);
    assert_non_null(strstr(k8s, "  replicas: 6\n"));

    snprintf(p, sizeof p, "%s/results.csv", dir);
    char *csv = st_test_slurp(p, &len);
    assert_non_null(strstr(csv, "rank,config,is_baseline"));
    assert_non_null(strstr(csv, "\n1,fp8-kv,0,1,ok,11.8,1,3540,"));
    assert_non_null(strstr(csv, "\n3,baseline,1,0,ok,5.9,"));
    st_store_close(s);
    rm_dir(NULL);
}

/* A run whose requests carry the server's own timings (llama.cpp) shows them beside the client's
 * figures in report.json and report.md. */
static void server_timings_in_reports(void **state)
{
    (void)state;
    st_store *s = make_store(0);
    st_record recs[4];
    for (uint32_t i = 0; i < 4; i++) {
        st_record_init(&recs[i], i);
        recs[i].scheduled = (st_ns)i * 1000000000;
        recs[i].sent = recs[i].scheduled + 100000;
        recs[i].first_token = recs[i].scheduled + (st_ns)(50 + 10 * i) * 1000000; /* TTFT 50..80 ms */
        recs[i].end = recs[i].first_token + 90 * 1000000;                         /* TPOT 30 ms */
        recs[i].output_tokens = recs[i].output_requested = 4;
        recs[i].srv_prompt = 40 * 1000000; /* the server: 40 ms of prompt, 3 steps of 29 ms */
        recs[i].srv_gen = 87 * 1000000;
        recs[i].srv_gen_n = 4;
    }
    recs[3].srv_prompt = recs[3].srv_gen = -1; /* one request without timings */
    st_run_row r = { .config = "baseline", .seq = 9, .rate = 1, .grid = 1, .verdict = "pass", .planned = 4 };
    st_store_hash("timed", 5, r.run_key);
    assert_int_equal(st_store_run_put(s, &r, recs, 4, NULL, 0), 0);
    for (int i = 0; i < 4; i++)
        st_record_free(&recs[i]);
    st_report rep;
    char err[256] = "";
    assert_int_equal(st_report_load(s, &rep, err, sizeof err), 0);
    const st_rep_cfg *c = &rep.cfg[0];
    const st_rep_server *sv = NULL;
    for (int j = 0; j < c->n_runs; j++)
        if (c->runs[j].seq == 9)
            sv = &c->server[j];
    assert_non_null(sv);
    assert_int_equal(sv->srv_n, 3);
    assert_near(sv->srv_prompt_p50_ms, 40, 1e-9);
    assert_near(sv->ttft_gap_p50_ms, 20, 1e-6); /* TTFT 50, 60, 70 minus 40 */
    assert_near(sv->tpot_gap_p50_ms, 1, 1e-6);  /* 30 - 29 */
    assert_int_equal(c->server[0].srv_n, 0);    /* runs without records have none */
    st_report_free(&rep);
    if (st_report_write_all(s, dir, err, sizeof err))
        fail_msg("%s", err);
    char p[512];
    size_t len = 0;
    snprintf(p, sizeof p, "%s/report.md", dir);
    char *md = st_test_slurp(p, &len);
    const char *tt = strstr(md, "Server-reported timings");
    assert_non_null(tt);
    if (!strstr(tt, "| 1 | 3 | 40.0 / 40.0 | 20.0 / 29.8 | 1.00 / 1.00 |"))
        fail_msg("report.md's timings table:\n%.900s", tt);
    snprintf(p, sizeof p, "%s/report.json", dir);
    char *js = st_test_slurp(p, &len);
    json_t *root = json_loadb(js, len, 0, NULL);
    assert_non_null(root);
    json_t *runs = json_object_get(json_array_get(json_object_get(root, "configurations"), 0), "runs");
    int found = 0;
    for (size_t i = 0; i < json_array_size(runs); i++) {
        json_t *tm = json_object_get(json_array_get(runs, i), "server_timings");
        if (json_is_object(tm)) {
            found++;
            assert_int_equal(json_integer_value(json_object_get(tm, "requests")), 3);
            assert_near(json_real_value(json_object_get(tm, "ttft_minus_prompt_p50_ms")), 20, 1e-6);
        } else {
            assert_true(json_is_null(tm));
        }
    }
    assert_int_equal(found, 1);
    json_decref(root);
    st_store_close(s);
    rm_dir(NULL);
}

/* Every renderer, given less room than its whole output, fails: a report is never silently
 * missing a piece (core/buf.h's sticky error). The whole output fits exactly its own length. */
static void too_small_buffer_fails_loudly(void **state)
{
    (void)state;
    st_store *s = make_store(1);
    st_report r;
    char err[256] = "";
    assert_int_equal(st_report_load(s, &r, err, sizeof err), 0);
    for (int which = 0; which < 4; which++) {
        st_buf full;
        st_buf_init(&full, ST_REPORT_MAX_BYTES);
        int rc = which == 0   ? st_report_markdown(&r, &full)
                 : which == 1 ? st_report_json(&r, &full)
                 : which == 2 ? st_report_csv(&r, &full)
                              : st_report_html(&r, s, NULL, &full, err, sizeof err);
        assert_int_equal(rc, 0);
        size_t whole = full.len;
        assert_true(whole > 100);
        /* cut points spread over the document, the last one a single byte short */
        size_t cuts[] = { 1, whole / 7, whole / 3, whole / 2, whole - whole / 5, whole - 2, whole - 1, whole };
        for (size_t k = 0; k < sizeof cuts / sizeof *cuts; k++) {
            st_buf b;
            st_buf_init(&b, cuts[k]);
            err[0] = '\0';
            rc = which == 0   ? st_report_markdown(&r, &b)
                 : which == 1 ? st_report_json(&r, &b)
                 : which == 2 ? st_report_csv(&r, &b)
                              : st_report_html(&r, s, NULL, &b, err, sizeof err);
            if (cuts[k] == whole) {
                assert_int_equal(rc, 0);
                assert_memory_equal(b.data, full.data, whole);
            } else if (rc != -1) {
                fail_msg("renderer %d with %zu of %zu bytes returned %d (a cut report passed as whole)", which, cuts[k],
                         whole, rc);
            }
            if (which == 3 && cuts[k] < whole)
                assert_non_null(strstr(err, "exceeds its limit"));
            st_buf_free(&b);
        }
        st_buf_free(&full);
    }
    st_report_free(&r);
    st_store_close(s);
    rm_dir(NULL);
}

/* The report files are written through a fresh temporary file: a symlink planted where the
 * temporary goes is removed, never followed, and its target stays as it was. */
static void planted_symlink_not_followed(void **state)
{
    (void)state;
    st_store *s = make_store(1);
    char victim[512], link[512], err[256] = "";
    snprintf(victim, sizeof victim, "%s/victim.txt", dir);
    FILE *f = fopen(victim, "w");
    assert_non_null(f);
    fputs("untouched\n", f);
    fclose(f);
    const char *names[] = { "report.md.tmp", "report.json.tmp", "results.csv.tmp", "report.html.tmp" };
    for (size_t i = 0; i < 4; i++) {
        snprintf(link, sizeof link, "%s/%s", dir, names[i]);
        assert_int_equal(symlink(victim, link), 0);
    }
    if (st_report_write_all(s, dir, err, sizeof err))
        fail_msg("%s", err);
    size_t len = 0;
    char *v = st_test_slurp(victim, &len);
    assert_string_equal(v, "untouched\n");
    for (size_t i = 0; i < 4; i++) {
        struct stat st;
        snprintf(link, sizeof link, "%s/%s", dir, names[i]);
        assert_int_equal(lstat(link, &st), -1); /* the temporary is gone after the rename */
        snprintf(link, sizeof link, "%s/%.*s", dir, (int)(strlen(names[i]) - 4), names[i]);
        assert_int_equal(lstat(link, &st), 0);
        assert_true(S_ISREG(st.st_mode));
    }
    st_store_close(s);
    rm_dir(NULL);
}

static void nothing_passed_headline(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/st_report_test.XXXXXX");
    assert_non_null(mkdtemp(dir));
    st_store *s;
    char err[256];
    assert_int_equal(st_store_open(dir, &s, err, sizeof err), 0);
    const char *spec = "engine: {kind: vllm, model: m}\nhardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 5\n"
                       "workload: {input_tokens: 10, output_tokens: 5}\nrates: [1, 2]\n"
                       "slo: {ttft_p95_ms: 100, tpot_p95_ms: 10}\n";
    assert_int_equal(st_store_audit_begin(s, "x.yaml", spec, strlen(spec), "0.1.0", 0, err, sizeof err), 0);
    st_config_row c = { .name = "baseline", .idx = 0, .status = "done", .startup_s = 1 };
    st_store_config_put(s, &c);
    put_run(s, "baseline", 0, 1, "fail", 0.9);
    st_store_audit_finish(s, 0, NULL);
    st_report r;
    assert_int_equal(st_report_load(s, &r, err, sizeof err), 0);
    st_buf b;
    st_buf_init(&b, 1 << 16);
    st_report_headline(&r, &b);
    assert_non_null(strstr(b.data,
                           "The current setup (baseline) met the SLO (p95 TTFT <= 100 ms, p95 TPOT <= 10 ms) at no "
                           "tested rate. No configuration met the SLO"));
    st_buf_free(&b);
    st_report_free(&r);
    st_store_close(s);
    rm_dir(NULL);
}

/* "Your traffic" of a trace whose requests span no time (one request, or all on one tick): the
 * rate is said to be unknown and why, never printed as "nan". */
static void traffic_rate_without_a_span(void **state)
{
    (void)state;
    const char *texts[2] = { "{\"timestamp\": 5, \"input_tokens\": 100, \"output_tokens\": 10}\n",
                             "{\"timestamp\": 5, \"input_tokens\": 100, \"output_tokens\": 10}\n"
                             "{\"timestamp\": 5, \"input_tokens\": 200, \"output_tokens\": 10}\n" };
    const char *want[2] = { "unknown (one request)", "unknown (every request at the same time)" };
    for (int k = 0; k < 2; k++) {
        st_trace_stats *s = st_trace_stats_new();
        assert_non_null(s);
        st_trace_counts c;
        char err[300];
        assert_int_equal(st_trace_read_buffer(texts[k], strlen(texts[k]), "t.jsonl", NULL, st_trace_stats_row_cb, s, &c,
                                              NULL, err, sizeof err),
                         0);
        st_traffic t;
        st_trace_stats_result(s, &t);
        st_traffic_advice a;
        st_traffic_engine e = { 0 };
        st_traffic_advise(s, &t, &e, &a);
        json_t *j = st_traffic_json(&t, &a, &c, ST_TRACE_SERVETUNE, "t.jsonl");
        char *text = json_dumps(j, 0);
        st_rep_traffic r;
        assert_int_equal(st_rep_traffic_load(text, &r), 0);
        int found = 0;
        for (int i = 0; i < r.n_rows; i++) {
            assert_null(strstr(r.value[i], "nan"));
            if (!strcmp(r.key[i], "Rate")) {
                assert_string_equal(r.value[i], want[k]);
                found = 1;
            }
        }
        assert_true(found);
        st_rep_traffic_free(&r);
        free(text);
        json_decref(j);
        st_trace_stats_free(s);
    }
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test_teardown(model_costs_and_order, rm_dir),
        cmocka_unit_test(ran_but_undecided_is_not_not_run),
        cmocka_unit_test(undecided_end_is_not_failed),
        cmocka_unit_test(day_from_stored_traffic),
        cmocka_unit_test(same_replicas_headline),
        cmocka_unit_test(long_failure_in_headline),
        cmocka_unit_test(files_written_and_escaped),
        cmocka_unit_test(server_timings_in_reports),
        cmocka_unit_test(too_small_buffer_fails_loudly),
        cmocka_unit_test(planted_symlink_not_followed),
        cmocka_unit_test(nothing_passed_headline),
        cmocka_unit_test(traffic_rate_without_a_span),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
