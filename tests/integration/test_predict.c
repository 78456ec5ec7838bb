/* servetune predict against servetune audit on the HTTP emulator, same spec: the
 * prediction (engine model, virtual time, no sockets) must find the same capacities as the
 * measured audit (the same engine model served over HTTP at a time scale), within the noise of
 * finite runs. Also: the prediction is marked as such in every report and survives
 * `servetune report`; a configuration vLLM would refuse is a failed row in both.
 *
 * Tolerance, and why: both runs send the same requests (same workload seeds and arrival
 * schedules) to the same scheduler and step-time model, so they differ only by what HTTP and the
 * wall clock add to the emulator: token delivery a little after the step ends, timer and
 * scheduling jitter multiplied by the time scale, and the early stop judged once a wall second
 * (10 emulated s) instead of once an emulated second. The spec puts each configuration's
 * boundary (found by bisection on the model: baseline ~42 req/s, seqs-3 ~6.1 req/s) near the
 * geometric middle of its grid step, and the SLO margins at the rates either side at >= 25 %,
 * so that noise cannot move a verdict: we require the SAME grid bracket (highest passing and
 * lowest failing rate) for every configuration, and the capacity (delivered req/s at the
 * highest passing rate, a ratio of a finite run's count and duration) within 15 %: the drain of
 * the last requests dominates a 60-request run's duration and moves by a few percent with the
 * delivery jitter. */
#include "harness.h"

#define ST_IT_TMP_PREFIX "/tmp/st_predict_it."
#include "audit_util.h"

#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"

/* The emulator runs at 5x real time: its steps near capacity last ~3 ms of wall time (at 10x,
 * ~1.5 ms, a loaded 2-core machine's HTTP and timer overheads made the audit's TPOT 35 % longer
 * than the engine model's, and the two capacities disagreed). */
static void write_spec(const char *path, const char *extra_configs)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f,
            "engine:\n  kind: emulator\n  model: Qwen/Qwen3-8B\n"
            "  flags: [--gpu, H100, --time-scale, '5', --max-model-len, '4096', --seed, '%d']\n"
            "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.0}\n"
            "peak_rate: 10\n"
            "workload: {input_tokens: 512, output_tokens: 64, requests_per_rate: 60, seed: 3}\n"
            "rates: [4, 8, 16, 32, 64]\nwarmup_requests: 2\n"
            "slo: {ttft_p95_ms: 2500, tpot_p95_ms: 20}\n"
            "configurations:\n"
            "  - name: baseline\n"
            "  - name: seqs-3\n    add_flags: [--max-num-seqs, '3']\n%s"
            "timeouts: {startup: 8s, request: 60s, stop_grace: 2s}\n"
            "search: {mode: burst}\n",
            (int)getpid(), extra_configs);
    fclose(f);
}

static double cap_field(json_t *root, const char *name, const char *field)
{
    json_t *cap = json_object_get(config_named(root, name), "capacity");
    json_t *v = json_is_object(cap) ? json_object_get(cap, field) : NULL;
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static void test_predict_agrees_with_audit(void **state)
{
    (void)state;
    char spec[512], adir[512], pdir[512], p[600];
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    snprintf(adir, sizeof adir, "%s/audit", tmp);
    snprintf(pdir, sizeof pdir, "%s/predict", tmp);
    /* a configuration vLLM refuses at startup: one 4096-token sequence's KV does not fit */
    write_spec(spec, "  - name: no-room\n    add_flags: [--gpu-memory-utilization, '0.22']\n");
    st_ns t0 = st_now();
    int prc = run_servetune((const char *[]){ "predict", spec, "-o", pdir, "-q", NULL }, 60);
    double predict_s = st_ns_to_s(st_now() - t0);
    assert_int_equal(prc, 1); /* done, one configuration refused */
    t0 = st_now();
    int arc = run_servetune((const char *[]){ "audit", spec, "-o", adir, "-q", NULL }, 120);
    double audit_s = st_ns_to_s(st_now() - t0);
    assert_int_equal(arc, 1);
    json_t *A = load_json(adir), *P = load_json(pdir);
    assert_true(json_is_true(json_object_get(P, "prediction")));
    assert_true(json_is_false(json_object_get(A, "prediction")));
    static const char *names[] = { "baseline", "seqs-3" };
    for (int i = 0; i < 2; i++) {
        double ap = cap_field(A, names[i], "pass_rate"), pp = cap_field(P, names[i], "pass_rate");
        double af = cap_field(A, names[i], "fail_rate"), pf = cap_field(P, names[i], "fail_rate");
        double ac = cap_field(A, names[i], "rps"), pc = cap_field(P, names[i], "rps");
        fprintf(stderr, "# %s: audit bracket [%g, %g] capacity %.3f req/s; predict [%g, %g] %.3f req/s (%+.1f %%)\n",
                names[i], ap, af, ac, pp, pf, pc, 100 * (pc / ac - 1));
        if (pp != ap)
            fail_msg("%s: predict passed %g req/s, the audit %g", names[i], pp, ap);
        if (!(pf == af || (isnan(pf) && isnan(af)))) /* the same failing rate, or none failed */
            fail_msg("%s: predict's lowest failing rate %g req/s, the audit's %g", names[i], pf, af);
        if (!(fabs(pc / ac - 1) <= 0.15))
            fail_msg("%s: predicted capacity %.3f req/s vs %.3f measured (%+.1f %%), expected within 15 %%", names[i],
                     pc, ac, 100 * (pc / ac - 1));
    }
    /* the two capacities differ a lot: agreeing on both is not luck */
    assert_true(cap_field(P, "baseline", "rps") > 3 * cap_field(P, "seqs-3", "rps"));
    /* the refusal is the same failed row, with vLLM's message, in both */
    for (int k = 0; k < 2; k++) {
        json_t *f = json_object_get(config_named(k ? A : P, "no-room"), "failure");
        assert_true(json_is_object(f));
        assert_string_equal(json_string_value(json_object_get(f, "class")), "oom");
    }
    json_decref(A);
    json_decref(P);
    fprintf(stderr, "# predict %.2f s, audit %.1f s (wall, this build)\n", predict_s, audit_s);
    /* marked as a prediction everywhere, and still after servetune report */
    snprintf(p, sizeof p, "%s/report.md", pdir);
    assert_true(file_has(p, "**PREDICTION.**"));
    /* the TTFT's largest unknown, the setup's own fixed latency, is named with the default used */
    assert_true(file_has(p, "of fixed latency outside the engine"));
    assert_true(file_has(p, "servetune calibrate on an audit of this setup"));
    assert_false(file_has(p, "## A traffic day")); /* the spec gives no traffic: block */
    assert_int_equal(run_servetune((const char *[]){ "report", pdir, "-q", NULL }, 30), 0);
    assert_true(file_has(p, "**PREDICTION.**"));
    snprintf(p, sizeof p, "%s/report.html", pdir);
    assert_true(file_has(p, "banner-prediction"));
    snprintf(p, sizeof p, "%s/report.md", adir);
    assert_false(file_has(p, "**PREDICTION.**"));
    snprintf(p, sizeof p, "%s/report.html", adir);
    assert_false(file_has(p, "id=\"banner-prediction\""));
    /* a prediction never replaces a measured audit */
    assert_int_equal(run_servetune((const char *[]){ "predict", spec, "-o", adir, "-q", NULL }, 30), 2);
}

static void test_predict_refuses_other_engines(void **state)
{
    (void)state;
    char spec[512], dir[512];
    snprintf(spec, sizeof spec, "%s/sglang.yaml", tmp);
    snprintf(dir, sizeof dir, "%s/sg", tmp);
    FILE *f = fopen(spec, "w");
    assert_non_null(f);
    fprintf(f, "engine: {kind: sglang, model: Qwen/Qwen3-8B}\n"
               "hardware: {gpu: H100, price_per_gpu_hour: 2.0}\npeak_rate: 10\n"
               "workload: {input_tokens: 64, output_tokens: 8, requests_per_rate: 4}\n"
               "rates: [1]\nslo: {ttft_p95_ms: 2500, tpot_p95_ms: 100}\n");
    fclose(f);
    assert_int_equal(run_servetune((const char *[]){ "predict", spec, "-o", dir, NULL }, 30), 2);
    char p[600];
    snprintf(p, sizeof p, "%s/servetune.out", tmp);
    assert_true(file_has(p, "models vLLM V1"));
    struct stat sb;
    snprintf(p, sizeof p, "%s/results.sqlite", dir);
    assert_true(stat(p, &sb) != 0); /* nothing written */
}

/* A sustained audit: its search tries other rates than the prediction made first, so after the
 * measurement the engine model runs once at each measured capacity rate and the report compares
 * TTFT and TPOT at the same offered rate (never "-" for a configuration that passed on both). */
static void test_sustained_audit_compared_at_its_capacity(void **state)
{
    (void)state;
    char spec[512], dir[512];
    snprintf(spec, sizeof spec, "%s/sus.yaml", tmp);
    snprintf(dir, sizeof dir, "%s/sus", tmp);
    FILE *f = fopen(spec, "w");
    assert_non_null(f);
    /* time scale 4: light on the host (a lagging emulator would move the capacity, not this check) */
    fprintf(f, "engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100, --time-scale, '4']}\n"
               "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.0}\npeak_rate: 10\n"
               "workload: {input_tokens: 512, output_tokens: 64}\nrates: [4, 8, 16, 32]\n"
               "slo: {ttft_p95_ms: 2500, tpot_p95_ms: 30}\n"
               "search: {max_duration: 40s, min_window: 10s, min_window_requests: 60, max_runs: 6}\n"
               "timeouts: {startup: 8s, request: 60s, stop_grace: 2s}\n");
    fclose(f);
    assert_int_equal(run_servetune((const char *[]){ "audit", spec, "-o", dir, "-q", NULL }, 240), 0);
    json_t *A = load_json(dir);
    json_t *pv = json_object_get(A, "predicted_vs_measured");
    assert_true(json_is_object(pv));
    json_t *c = json_array_get(json_object_get(pv, "configurations"), 0);
    assert_non_null(c);
    double at = json_number_value(json_object_get(c, "at_rate"));
    assert_true(fabs(at - cap_field(A, "baseline", "pass_rate")) <= 1e-9 * at);
    double pt = json_number_value(json_object_get(c, "ttft_p95_ms_predicted"));
    double pp = json_number_value(json_object_get(c, "tpot_p95_ms_predicted"));
    double mt = json_number_value(json_object_get(c, "ttft_p95_ms_measured"));
    double mp = json_number_value(json_object_get(c, "tpot_p95_ms_measured"));
    fprintf(stderr,
            "# at %.4g req/s: TTFT p95 predicted %.1f measured %.1f ms, TPOT p95 predicted %.2f measured %.2f ms\n", at,
            pt, mt, pp, mp);
    assert_true(pt > 0 && mt > 0 && pp > 0 && mp > 0);
    json_decref(A);
}

/* A spec with a traffic day: every report prices the day for each configuration that met the
 * SLO, and the figures follow from the capacity (a flat day of 10 req/s, serverless at the spec's
 * price): peak-sized = ceil(10 / capacity) replicas x 24 h x the GPU-hour price. */
static void test_predict_prices_a_traffic_day(void **state)
{
    (void)state;
    char spec[512], dir[512], p[600];
    snprintf(spec, sizeof spec, "%s/day.yaml", tmp);
    snprintf(dir, sizeof dir, "%s/day", tmp);
    FILE *f = fopen(spec, "w");
    assert_non_null(f);
    fprintf(f, "engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100]}\n"
               "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.0}\npeak_rate: 10\n"
               "workload: {input_tokens: 512, output_tokens: 64, requests_per_rate: 60, seed: 3}\n"
               "rates: [4, 8, 16, 32, 64]\nslo: {ttft_p95_ms: 2500, tpot_p95_ms: 20}\n"
               "configurations:\n  - name: baseline\n  - name: seqs-8\n    add_flags: [--max-num-seqs, '8']\n"
               "search: {mode: burst}\n"
               "traffic:\n  hourly_rps: [10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, "
               "10, 10, 10, 10, 10]\n  scale_up_delay: 0s\n  serverless: {price_per_gpu_second: 0.001}\n");
    fclose(f);
    assert_int_equal(run_servetune((const char *[]){ "predict", spec, "-o", dir, "-q", NULL }, 60), 0);
    json_t *P = load_json(dir);
    json_t *day = json_object_get(P, "traffic_day");
    assert_true(json_is_object(day));
    assert_true(fabs(json_number_value(json_object_get(day, "serverless_price_per_gpu_s")) - 0.001) < 1e-12);
    json_t *cs = json_object_get(day, "configurations");
    assert_int_equal(json_array_size(cs), 2);
    size_t i;
    json_t *c;
    json_array_foreach(cs, i, c)
    {
        const char *name = json_string_value(json_object_get(c, "configuration"));
        double cap = cap_field(P, name, "rps");
        assert_true(cap > 0);
        long replicas = (long)ceil(10 / cap - 1e-9);
        assert_int_equal(json_integer_value(json_object_get(c, "peak_replicas")), replicas);
        assert_true(fabs(json_number_value(json_object_get(c, "peak_sized_usd")) - replicas * 24 * 2.0) < 1e-6);
        /* a flat day and no scale-up delay: autoscaling saves nothing, every hour is that fleet */
        assert_true(fabs(json_number_value(json_object_get(c, "autoscaled_usd")) - replicas * 24 * 2.0) < 1e-6);
        assert_true(json_number_value(json_object_get(c, "serverless_usd")) > 0);
    }
    json_decref(P);
    snprintf(p, sizeof p, "%s/report.md", dir);
    assert_true(file_has(p, "## A traffic day"));
    assert_true(file_has(p, "| seqs-8 |"));
    snprintf(p, sizeof p, "%s/report.html", dir);
    assert_true(file_has(p, "<section id=\"day\">"));
    assert_true(file_has(p, "A traffic day"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_predict_agrees_with_audit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_predict_refuses_other_engines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_predict_prices_a_traffic_day, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sustained_audit_compared_at_its_capacity, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
