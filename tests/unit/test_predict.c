/* The executor split behind servetune predict: the sweep on the engine-model executor (no
 * server, no sockets, virtual time). A refusal vLLM would make is a failed configuration with
 * vLLM's message; a bad flag is a bad_flag row; the prediction flag round-trips through the
 * store into every report; the engine's state is stored as metric samples; the shared flag
 * parser builds the configuration the emulator would; suggested rates bracket the capacities
 * found by bisection. */
#include "harness.h"

#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit/executor.h"
#include "audit/spec.h"
#include "audit/store.h"
#include "audit/suggest.h"
#include "audit/sweep.h"
#include "core/buf.h"
#include "emu/flags.h"
#include "load/steady.h"
#include "report/html_audit.h"
#include "report/report.h"

static char dir[256];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/st_predict_test.XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf -- '%s'", dir);
    if (strncmp(dir, "/tmp/st_predict_test.", 21) == 0)
        (void)!system(cmd);
    return 0;
}

static const char *SPEC =
    "engine:\n  kind: vllm\n  model: Qwen/Qwen3-8B\n"
    "  flags: [--max-model-len, '4096']\n"
    "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.0}\n"
    "peak_rate: 10\n"
    "workload: {input_tokens: 512, output_tokens: 32, requests_per_rate: 40, seed: 3}\n"
    "rates: [2, 8, 32, 128]\nwarmup_requests: 2\n"
    "slo: {ttft_p95_ms: 2500, tpot_p95_ms: 20}\n"
    "configurations:\n"
    "  - name: baseline\n"
    "  - name: seqs-2\n    add_flags: [--max-num-seqs, '2']\n"
    "  - name: no-room\n    add_flags: [--max-model-len, '40960', --gpu-memory-utilization, '0.30']\n"
    "  - name: bad-kv\n    add_flags: [--kv-cache-dtype, fp7]\n"
    "  - name: weights-oom\n    model: Qwen/Qwen3-32B\n    add_flags: [--gpu, RTX4090]\n"
    "search: {mode: burst}\n";

static volatile sig_atomic_t never;

/* Runs the prediction of SPEC into dir; returns the store (open). */
static st_store *predict(st_spec *spec, st_sweep_result *res)
{
    char err[1024];
    assert_int_equal(st_spec_parse("t.yaml", SPEC, strlen(SPEC), spec, err, sizeof err), 0);
    st_store *s;
    assert_int_equal(st_store_open(dir, &s, err, sizeof err), 0);
    assert_int_equal(st_store_audit_begin(s, "t.yaml", SPEC, strlen(SPEC), "t", 0, err, sizeof err), 0);
    assert_int_equal(st_store_meta_put(s, "prediction", "1"), 0);
    st_executor *x;
    char logdir[400];
    snprintf(logdir, sizeof logdir, "%s/logs", dir);
    assert_int_equal(st_exec_model_new(spec, logdir, &x, err, sizeof err), 0);
    assert_true(x->prediction);
    st_sweep_opts o = { .out_dir = dir, .quiet = 1, .stop = &never, .executor = x };
    if (st_sweep_run(spec, s, &o, res, err, sizeof err))
        fail_msg("sweep: %s", err);
    st_executor_free(x);
    st_store_audit_finish(s, 0, NULL);
    return s;
}

static const st_config_row *row_of(const st_config_row *rows, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(rows[i].name, name))
            return &rows[i];
    fail_msg("no row %s", name);
    return NULL;
}

static void refusals_are_failed_configurations(void **state)
{
    (void)state;
    st_spec spec;
    st_sweep_result res;
    st_store *s = predict(&spec, &res);
    assert_false(res.interrupted);
    assert_int_equal(res.configs_failed, 3);
    st_config_row *rows;
    int n;
    assert_int_equal(st_store_configs_get(s, &rows, &n), 0);
    assert_int_equal(n, 5);
    assert_string_equal(row_of(rows, n, "baseline")->status, "done");
    assert_string_equal(row_of(rows, n, "seqs-2")->status, "done");
    const st_config_row *r = row_of(rows, n, "no-room");
    assert_string_equal(r->status, "failed");
    assert_string_equal(r->failure_class, "oom");
    assert_non_null(strstr(r->failure_detail, "estimated maximum model length"));
    assert_non_null(strstr(r->log_tail, "Engine core initialization failed"));
    r = row_of(rows, n, "bad-kv");
    assert_string_equal(r->status, "failed");
    assert_string_equal(r->failure_class, "bad_flag");
    assert_non_null(strstr(r->failure_detail, "invalid choice: 'fp7'"));
    r = row_of(rows, n, "weights-oom");
    assert_string_equal(r->failure_class, "oom");
    assert_non_null(strstr(r->failure_detail, "OutOfMemoryError"));
    /* a started configuration states the KV cache line as facts */
    assert_non_null(strstr(row_of(rows, n, "baseline")->facts, "GPU KV cache size"));
    st_config_rows_free(rows, n);
    /* failed configurations have no runs; the others have every grid rate (run or skipped) */
    st_run_row *runs;
    int nr;
    assert_int_equal(st_store_runs_get(s, "no-room", &runs, &nr), 0);
    assert_int_equal(nr, 0);
    st_run_rows_free(runs, nr);
    assert_int_equal(st_store_runs_get(s, "baseline", &runs, &nr), 0);
    assert_int_equal(nr, 4);
    /* the engine's state sampled every emulated second, under the scraper's generic names */
    st_metrics_sample *m;
    uint32_t nm;
    assert_int_equal(st_store_samples_get(s, runs[0].id, &m, &nm), 0);
    int kv = 0, running = 0, hits = 0;
    double tmax = 0;
    for (uint32_t i = 0; i < nm; i++) {
        kv += !strcmp(m[i].name, "kv_usage");
        running += !strcmp(m[i].name, "running");
        hits += !strcmp(m[i].name, "prefix_hits");
        if (m[i].t > tmax)
            tmax = m[i].t;
    }
    /* rate 2 with 40 requests lasts about 20 emulated s: about 20 samples of each */
    assert_true(kv >= 10 && kv == running && kv == hits);
    assert_true(tmax >= 10 && tmax <= runs[0].duration_s + 1.5);
    st_store_samples_free(m, nm);
    st_run_rows_free(runs, nr);
    st_store_close(s);
    st_spec_free(&spec);
}

static void prediction_flag_round_trips(void **state)
{
    (void)state;
    st_spec spec;
    st_sweep_result res;
    st_store *s = predict(&spec, &res);
    assert_int_equal(st_store_meta_put(s, "suggested_rates", "rates: [1, 2, 4]"), 0);
    st_store_close(s);
    st_spec_free(&spec);
    /* reopened from the file alone, as servetune report does */
    char err[512];
    assert_int_equal(st_store_open(dir, &s, err, sizeof err), 0);
    st_audit_row a;
    assert_int_equal(st_store_audit_get(s, &a), 1);
    assert_int_equal(a.prediction, 1);
    assert_string_equal(a.suggested_rates, "rates: [1, 2, 4]");
    st_audit_row_free(&a);
    st_report r;
    assert_int_equal(st_report_load(s, &r, err, sizeof err), 0);
    assert_int_equal(r.audit.prediction, 1);
    st_buf b;
    st_buf_init(&b, 1 << 24);
    assert_int_equal(st_report_markdown(&r, &b), 0);
    assert_non_null(strstr(b.data, "**PREDICTION.**"));
    assert_non_null(strstr(b.data, "rates: \\[1, 2, 4\\]"));
    st_buf_reset(&b);
    assert_int_equal(st_report_json(&r, &b), 0);
    assert_true(strstr(b.data, "\"prediction\": true") || strstr(b.data, "\"prediction\":true"));
    st_buf_reset(&b);
    assert_int_equal(st_report_headline(&r, &b), 0);
    assert_true(!strncmp(b.data, "Prediction", 10));
    st_buf_free(&b);
    st_report_free(&r);
    /* and a store without the flag is not a prediction */
    assert_int_equal(st_store_meta_put(s, "prediction", "0"), 0);
    assert_int_equal(st_store_audit_get(s, &a), 1);
    assert_int_equal(a.prediction, 0);
    st_audit_row_free(&a);
    assert_int_equal(st_report_load(s, &r, err, sizeof err), 0);
    st_buf_init(&b, 1 << 24);
    assert_int_equal(st_report_markdown(&r, &b), 0);
    assert_null(strstr(b.data, "PREDICTION"));
    st_buf_free(&b);
    st_report_free(&r);
    st_store_close(s);
}

static void suggested_rates_bracket_capacity(void **state)
{
    (void)state;
    /* the grid itself */
    const double caps[] = { 6.1, 43.5, 0, NAN, 17 };
    double out[32];
    int n = st_suggest_rates(caps, 5, 7, out, 32);
    assert_true(n >= 4 && n <= 7);
    assert_true(out[0] <= 0.5 * 6.1);
    assert_true(out[n - 1] >= 1.5 * 43.5);
    for (int i = 1; i < n; i++)
        assert_true(out[i] > out[i - 1]);
    assert_near(st_suggest_nice(3.3, 0), 3, 1e-12);
    assert_near(st_suggest_nice(3.3, 1), 4, 1e-12);
    assert_near(st_suggest_nice(65.25, 1), 80, 1e-9);
    assert_near(st_suggest_nice(0.031, 0), 0.03, 1e-12);
    assert_int_equal(st_suggest_rates(caps + 2, 2, 7, out, 32), 0);
    char line[256];
    st_suggest_format((const double[]){ 1.5, 3, 60 }, 3, 1, line, sizeof line);
    assert_string_equal(line, "rates: [1.5, 3, 60, inf]");
    /* on the model: capacities by bisection, then a grid that brackets every one */
    st_spec spec;
    char err[1024];
    assert_int_equal(st_spec_parse("t.yaml", SPEC, strlen(SPEC), &spec, err, sizeof err), 0);
    double pass[2];
    for (int i = 0; i < 2; i++) {
        st_executor *x;
        assert_int_equal(st_exec_model_new(&spec, NULL, &x, err, sizeof err), 0);
        st_sweep_bisect_result b;
        if (st_sweep_bisect(&spec, x, i, 0.02, &b, err, sizeof err))
            fail_msg("bisect: %s", err);
        st_executor_free(x);
        assert_false(b.failed_start);
        assert_true(b.pass_rate > 0 && isfinite(b.fail_rate));
        assert_true(b.fail_rate / b.pass_rate - 1 <= 0.02);
        assert_true(b.capacity_rps > 0 && b.capacity_rps <= b.pass_rate * 1.5);
        assert_true(b.runs >= 3 && b.runs <= 60);
        pass[i] = b.pass_rate;
    }
    assert_true(pass[0] > 1.5 * pass[1]); /* max-num-seqs 2 has far less capacity */
    n = st_suggest_rates(pass, 2, 6, out, 32);
    for (int i = 0; i < 2; i++) {
        int below = 0, above = 0;
        for (int k = 0; k < n; k++) {
            below |= out[k] <= pass[i];
            above |= out[k] > pass[i] * 1.02;
        }
        assert_true(below && above);
    }
    /* a configuration that does not start has no capacity, and says why */
    st_executor *x;
    assert_int_equal(st_exec_model_new(&spec, NULL, &x, err, sizeof err), 0);
    st_sweep_bisect_result b;
    assert_int_equal(st_sweep_bisect(&spec, x, 2, 0.02, &b, err, sizeof err), 0);
    assert_true(b.failed_start);
    assert_non_null(strstr(b.why, "KV cache")); /* out of memory / KV cache does not fit */
    st_executor_free(x);
    st_spec_free(&spec);
}

/* The sustained search on the engine model: every run is judged on its window (sustained, SLO
 * missed, over-saturated or undecided), the capacity has a bracket within the tolerance (or says why
 * not) and an interval; a closed loop (`concurrency:`) keeps at most that many requests in flight
 * and prices the delivered rate at the highest concurrency that holds the SLO. */
static void sustained_and_closed_loop_on_the_model(void **state)
{
    (void)state;
    static const char *specs[2] = {
        "engine:\n  kind: vllm\n  model: Qwen/Qwen3-8B\n  flags: [--max-model-len, '4096']\n"
        "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.0}\npeak_rate: 10\n"
        "workload: {input_tokens: 512, output_tokens: 32, seed: 3}\n"
        "rates: [4, 16, 64]\nwarmup_requests: 2\n"
        "slo: {ttft_p95_ms: 1000, tpot_p95_ms: 11}\n"
        "search: {min_window: 10s, min_window_requests: 100, max_duration: 120s}\n",
        "engine:\n  kind: vllm\n  model: Qwen/Qwen3-8B\n  flags: [--max-model-len, '4096']\n"
        "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.0}\npeak_rate: 10\n"
        "workload: {input_tokens: 512, output_tokens: 32, seed: 3}\n"
        "concurrency: [1, 8, 64, 512]\nwarmup_requests: 2\n"
        "slo: {ttft_p95_ms: 1000, tpot_p95_ms: 11}\n"
        "search: {min_window: 10s, min_window_requests: 100, max_duration: 120s}\n",
    };
    for (int k = 0; k < 2; k++) {
        char err[1024];
        st_spec spec;
        assert_int_equal(st_spec_parse("t.yaml", specs[k], strlen(specs[k]), &spec, err, sizeof err), 0);
        assert_int_equal(st_spec_check_bounds(&spec, err, sizeof err), 0);
        char sub[400];
        snprintf(sub, sizeof sub, "%s/s%d", dir, k);
        st_store *s;
        assert_int_equal(st_store_open(sub, &s, err, sizeof err), 0);
        assert_int_equal(st_store_audit_begin(s, "t.yaml", specs[k], strlen(specs[k]), "t", 0, err, sizeof err), 0);
        assert_int_equal(st_store_meta_put(s, "prediction", "1"), 0);
        st_executor *x;
        assert_int_equal(st_exec_model_new(&spec, NULL, &x, err, sizeof err), 0);
        st_sweep_opts o = { .out_dir = sub, .quiet = 1, .stop = &never, .executor = x };
        st_sweep_result res;
        if (st_sweep_run(&spec, s, &o, &res, err, sizeof err))
            fail_msg("sweep: %s", err);
        st_executor_free(x);
        st_store_audit_finish(s, 0, NULL);
        assert_true(res.runs_measured >= 2 && res.runs_measured <= (int)spec.search.max_runs);
        st_report r;
        assert_int_equal(st_report_load(s, &r, err, sizeof err), 0);
        assert_true(r.sustained);
        const st_rep_cfg *c = &r.cfg[0];
        if (c->status != ST_REP_OK)
            fail_msg("spec %d: status %s: %s", k, st_rep_status_name(c->status), c->note);
        assert_true(c->cap->sustained && c->cap->has_pass && c->cap->has_fail_above);
        assert_true(c->cap->ci_lo <= c->cap->ci_hi);
        for (int j = 0; j < c->n_runs; j++) {
            st_verdict v = st_verdict_from_name(c->runs[j].verdict);
            assert_true(v == ST_VERDICT_PASS || v == ST_VERDICT_FAIL || v == ST_VERDICT_OVERSAT ||
                        v == ST_VERDICT_UNDECIDED);
            assert_non_null(c->runs[j].summary_json);
        }
        /* the reports say it in words: the method, the verdicts, the search's table and charts */
        st_buf b;
        st_buf_init(&b, 1 << 24);
        assert_int_equal(st_report_markdown(&r, &b), 0);
        assert_non_null(strstr(b.data, "**Capacity at SLO** is the highest"));
        assert_non_null(strstr(b.data, "| Binding term | Boundary | Runs | Engine-minutes | Max throughput"));
        assert_non_null(strstr(b.data, "| sustained"));
        assert_null(strstr(b.data, "| pass"));
        st_buf_reset(&b);
        char herr[256];
        assert_int_equal(st_report_html(&r, s, NULL, &b, herr, sizeof herr), 0);
        assert_non_null(strstr(b.data, "id=\"search-table\""));
        assert_non_null(strstr(b.data, "Requests in flight at the bracket's ends"));
        assert_non_null(strstr(b.data, "interval"));
        st_buf_reset(&b);
        assert_int_equal(st_report_json(&r, &b), 0);
        assert_non_null(strstr(b.data, k ? "\"method\": \"sustained-concurrency\"" : "\"method\": \"sustained\""));
        assert_non_null(strstr(b.data, "\"verdict_text\": \"sustained\""));
        st_buf_reset(&b);
        assert_int_equal(st_report_csv(&r, &b), 0);
        assert_non_null(strstr(b.data, ",method,capacity_ci_low,capacity_ci_high,binding,boundary,runs,"));
        st_buf_free(&b);
        if (k == 0) {
            /* open loop: the capacity is the offered rate that was sustained */
            assert_near(c->cap->capacity_rps, c->cap->pass_rate, 0);
            assert_true(c->cap->fail_rate / c->cap->pass_rate - 1 <= spec.search.tolerance + 1e-9 ||
                        c->cap->runs >= (int)spec.search.max_runs);
        } else {
            /* closed loop: whole concurrencies; the delivered rate at the highest passing one */
            assert_near(c->cap->pass_rate, floor(c->cap->pass_rate), 0);
            assert_true(c->cap->capacity_rps > 0 && c->cap->capacity_rps != c->cap->pass_rate);
            st_record *recs;
            uint32_t nr;
            const st_run_row *pr = &c->runs[c->cap->pass_index];
            assert_int_equal(st_store_records_get(s, pr->id, &recs, &nr), 0);
            /* never more requests in flight than the concurrency */
            double t[200], y[200], mx = 0;
            for (int i = 0; i < 200; i++)
                t[i] = pr->duration_s * (i + 0.5) / 200;
            assert_int_equal(st_inflight_at(recs, nr, 1, t, 200, y), 0);
            for (int i = 0; i < 200; i++)
                mx = y[i] > mx ? y[i] : mx;
            assert_true(mx <= pr->rate && mx >= 1);
            st_records_free(recs, nr);
        }
        st_report_free(&r);
        st_store_close(s);
        st_spec_free(&spec);
    }
}

static void other_engines_are_refused(void **state)
{
    (void)state;
    const char *t = "engine: {kind: sglang, model: Qwen/Qwen3-8B}\n"
                    "hardware: {gpu: H100, price_per_gpu_hour: 2.0}\npeak_rate: 10\n"
                    "workload: {input_tokens: 64, output_tokens: 8}\n"
                    "rates: [1]\nslo: {ttft_p95_ms: 2500, tpot_p95_ms: 100}\n";
    st_spec spec;
    char err[1024];
    assert_int_equal(st_spec_parse("t.yaml", t, strlen(t), &spec, err, sizeof err), 0);
    st_executor *x = NULL;
    assert_int_equal(st_exec_model_new(&spec, NULL, &x, err, sizeof err), -1);
    assert_null(x);
    assert_non_null(strstr(err, "sglang"));
    st_spec_free(&spec);
}

static void flag_parser_builds_the_emulators_config(void **state)
{
    (void)state;
    st_emu_args A;
    st_emu_args_defaults(&A);
    st_opt opts[ST_EMU_ARGS_TABLE_MAX];
    st_emu_args_table(&A, opts);
    char *argv[] = { "serve", "Qwen/Qwen3-8B-FP8",          "-tp",   "2",    "--max-num-seqs=64", "--kv-cache-dtype",
                     "fp8",   "--no-enable-prefix-caching", "--gpu", "H200", "--some-vllm-flag",  "x" };
    st_opts_result r;
    char err[1024];
    assert_int_equal(st_emu_args_parse(&A, opts, 12, argv, &r, err, sizeof err), 0);
    assert_true(r.nunknown >= 1);
    assert_string_equal(r.unknown[0], "--some-vllm-flag");
    st_emu_config c;
    assert_int_equal(st_emu_args_config(&A, &c, err, sizeof err), 0);
    st_opts_result_free(&r);
    assert_int_equal(c.tp, 2);
    assert_int_equal(c.max_num_seqs, 64);
    assert_int_equal(c.kv_dtype, ST_EMU_FP8);
    assert_int_equal(c.weight_dtype, ST_EMU_FP8);
    assert_int_equal(c.enable_prefix_caching, 0);
    assert_non_null(strstr(c.gpu.name, "H200"));
    /* refusals keep their class */
    st_emu_args_defaults(&A);
    st_emu_args_table(&A, opts);
    char *bad[] = { "serve", "Qwen/Qwen3-8B", "--block-size", "7", "--gpu", "H100" };
    assert_int_equal(st_emu_args_parse(&A, opts, 6, bad, &r, err, sizeof err), 0);
    assert_int_equal(st_emu_args_config(&A, &c, err, sizeof err), ST_EMU_ARGS_USAGE);
    assert_non_null(strstr(err, "invalid choice: 7"));
    st_opts_result_free(&r);
    st_emu_args_defaults(&A);
    st_emu_args_table(&A, opts);
    char *unknown[] = { "serve", "no-such/model-7b", "--gpu", "H100" };
    assert_int_equal(st_emu_args_parse(&A, opts, 4, unknown, &r, err, sizeof err), 0);
    assert_int_equal(st_emu_args_config(&A, &c, err, sizeof err), ST_EMU_ARGS_STARTUP);
    st_opts_result_free(&r);
    char *two[] = { "serve", "a", "b" };
    st_emu_args_defaults(&A);
    st_emu_args_table(&A, opts);
    assert_int_equal(st_emu_args_parse(&A, opts, 3, two, &r, err, sizeof err), ST_EMU_ARGS_USAGE);
    assert_non_null(strstr(err, "unrecognized arguments: b"));
    st_opts_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(refusals_are_failed_configurations, setup, teardown),
        cmocka_unit_test_setup_teardown(prediction_flag_round_trips, setup, teardown),
        cmocka_unit_test(suggested_rates_bracket_capacity),
        cmocka_unit_test_setup_teardown(sustained_and_closed_loop_on_the_model, setup, teardown),
        cmocka_unit_test(other_engines_are_refused),
        cmocka_unit_test(flag_parser_builds_the_emulators_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
