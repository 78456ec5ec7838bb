/* The engine model against the published measurements (bench/fidelity/measurements.json,
 * docs/fidelity.md): the median and worst errors of each split must not get worse than the
 * figures written down below (today's, with a small margin). A change that moves the model
 * away from real vLLM fails here and must either be fixed or come with new, documented
 * figures. `build/bench/fidelity` prints the same figures with every point. */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/file.h"
#include "emu/calib.h"
#include "emu/catalog.h"
#include "fidelity/harness.h"

#define DATA "bench/fidelity/measurements.json"

/* Ceilings: median |error| and the number of points off by more than 2x, per split and metric
 * (throughput, TTFT p50, TTFT tail, TPOT). Measured today (docs/fidelity.md, 117 points, issue
 * 21's step model with piecewise CUDA graphs, the all-reduce at NCCL's rates, the sourced eager
 * launch cost and Marlin prefill ratio, refitted on all of them): fit 6.7 / 8.7 / 7.3 / 5.1 %, 9
 * points beyond 2x; test 8.3 / 11.8 / 8.4 / 7.2 %, 2 points beyond 2x. The ceilings add 0.8-1.3
 * points. Against main's before the merge (fit 6 / 14 / 13 / 11 %, 15; test 9 / 14 / 12 / 24 %,
 * 5) all are tighter but the fit split's throughput, 6 -> 7.5 %: the refit with the piecewise-
 * graph gap and the fitted engine-core CPU per step (0.82 ms against its 0.2 ms source: the small
 * models' CPU-bound steps, docs/fidelity.md) trades it (3.9 -> 6.7 %) for the fit split's TTFT
 * and TPOT (11.7 / 10.9 / 8.6 -> 8.7 / 7.3 / 5.1 %) and the test split's TPOT (21.2 -> 7.2 %).
 * The A100 SXM keeps its kernel GEMM efficiency (0.86, tests/unit/test_emu_kernels.c) where the
 * fit wanted 0.64 for GPUStack's A100 points. */
#define FID_FIT_TPUT 0.075
#define FID_FIT_TTFT50 0.10
#define FID_FIT_TTFTT 0.085
#define FID_FIT_TPOT 0.06
#define FID_FIT_FAR 10
#define FID_TEST_TPUT 0.095
#define FID_TEST_TTFT50 0.13
#define FID_TEST_TTFTT 0.095
#define FID_TEST_TPOT 0.085
#define FID_TEST_FAR 3
/* Leave-one-lab-out on the sourced constants (`build/bench/fidelity --lolo --free none`, the
 * headline figure: no lab's data reaches another lab's prediction), pooled held-out medians,
 * measured today: 10.2 / 13.0 / 9.4 / 9.9 %, over 9 labs. The ceilings add 0.8-1 point. */
#define FID_LOLO_TPUT 0.11
#define FID_LOLO_TTFT50 0.14
#define FID_LOLO_TTFTT 0.105
#define FID_LOLO_TPOT 0.11
#define FID_LOLO_MIN_LABS 8
/* KV cache size against the published startup logs (within 0.6 % for the five setups of the
 * first 60 points) */
#define FID_KV_TOKENS_TOL 0.02
/* Labs whose servers' memory the model does not describe, with how far off it is and why: their
 * KV size is checked against their own tolerance, not the 2 %. */
static const struct {
    const char *lab;
    double tol;
    const char *why;
} KV_EXCEPTIONS[] = {
    { "tgarg01/silybench-data", 0.05,
      "vLLM 0.30.0 (the model's memory constants come from 0.11-0.19 logs): 2-4 % more KV predicted than logged" },
    { "enginrect/llmso", 0.30,
      "RTX 4090 under Windows + WSL2: the desktop holds ~1.3 GiB of VRAM (nvidia-smi idle 1,338 MiB) and the lab runs "
      "vLLM 0.27's V2 model runner; neither is modelled (0.90 to 1.27 of the logged KV)" },
};

static double kv_tol(const char *lab)
{
    for (size_t i = 0; i < sizeof KV_EXCEPTIONS / sizeof KV_EXCEPTIONS[0]; i++)
        if (!strcmp(KV_EXCEPTIONS[i].lab, lab))
            return KV_EXCEPTIONS[i].tol;
    return FID_KV_TOKENS_TOL;
}

typedef struct ceiling {
    double median[ST_FID_M_COUNT];
    uint32_t beyond_2x; /* points with any metric off by more than 2x */
} ceiling;

static const ceiling FIT_CEILING = { { FID_FIT_TPUT, FID_FIT_TTFT50, FID_FIT_TTFTT, FID_FIT_TPOT }, FID_FIT_FAR };
static const ceiling TEST_CEILING = { { FID_TEST_TPUT, FID_TEST_TTFT50, FID_TEST_TTFTT, FID_TEST_TPOT }, FID_TEST_FAR };

/* Published points from a data file, parsed; the test fails with the reason when they cannot be read. */
static st_fid_point *load_file(const char *path, uint32_t *n)
{
    char err[512];
    size_t len;
    char *text = st_read_file(path, 16u << 20, &len, err, sizeof err);
    if (!text)
        fail_msg("%s: %s", path, err);
    st_fid_point *pts;
    if (st_fid_parse(text, len, &pts, n, err, sizeof err) != 0)
        fail_msg("%s: %s", path, err);
    free(text);
    return pts;
}

/* The published points (DATA). */
static st_fid_point *load_points(uint32_t *n) { return load_file(DATA, n); }

static void figures_do_not_get_worse(void **state)
{
    (void)state;
    char err[512];
    uint32_t n;
    st_fid_point *pts = load_points(&n);
    assert_true(n >= 100);
    st_fid_ratios *r = calloc(n, sizeof *r);
    uint32_t far[2] = { 0, 0 }, tests = 0, kv_checked = 0;
    for (uint32_t i = 0; i < n; i++) {
        st_emu_config c;
        st_fid_figures f;
        if (st_fid_config(&pts[i], &c, err, sizeof err) < 0)
            fail_msg("point %s: %s", pts[i].id, err);
        if (st_fid_predict_in(pts, n, i, &c, &f, err, sizeof err) < 0)
            fail_msg("point %s: %s", pts[i].id, err);
        if (f.refused)
            fail_msg("point %s: the model refuses a configuration real vLLM served: %s", pts[i].id, err);
        st_fid_compare(&pts[i], &f, &r[i]);
        /* the memory plan against the server's own startup log, where published */
        if (isfinite(pts[i].kv_tokens) && !(fabs(f.kv_tokens / pts[i].kv_tokens - 1) <= kv_tol(pts[i].lab)))
            fail_msg("point %s: KV cache %.0f tokens, the server logged %.0f (tolerance %.0f %%)", pts[i].id,
                     f.kv_tokens, pts[i].kv_tokens, 100 * kv_tol(pts[i].lab));
        kv_checked += isfinite(pts[i].kv_tokens);
        tests += pts[i].split == ST_FID_TEST;
        for (int m = 0; m < ST_FID_M_COUNT; m++)
            if (isfinite(r[i].r[m]) && (r[i].r[m] > 2 || r[i].r[m] < 0.5)) {
                far[pts[i].split]++;
                break;
            }
    }
    assert_true(tests >= 10);
    assert_true(kv_checked >= 5);
    for (int split = 0; split < 2; split++) {
        const ceiling *cl = split ? &TEST_CEILING : &FIT_CEILING;
        for (int m = 0; m < ST_FID_M_COUNT; m++) {
            st_fid_stat s;
            st_fid_summarise(pts, r, n, (st_fid_split)split, m, &s);
            printf("# %s %-10s n=%u median |err| %.1f %% (ceiling %.1f %%), worst %.1f %%\n", split ? "test" : "fit",
                   st_fid_metric_name(m), s.n, 100 * s.median_abs, 100 * cl->median[m], 100 * s.worst_abs);
            assert_true(s.n > 0);
            if (!(s.median_abs <= cl->median[m]))
                fail_msg("%s split, %s: median |error| %.1f %% is above its ceiling %.1f %%", split ? "test" : "fit",
                         st_fid_metric_name(m), 100 * s.median_abs, 100 * cl->median[m]);
        }
        printf("# %s: %u points off by more than 2x (ceiling %u)\n", split ? "test" : "fit", far[split], cl->beyond_2x);
        assert_true(far[split] <= cl->beyond_2x);
    }
    free(r);
    free(pts);
}

/* Every constant in the tree that the fit sets (emu/calib.c's knobs: consts.h, each catalog
 * GPU's efficiencies, each lab's own latency) sits inside its bounds, at least ST_FID_BOUND_NEAR
 * of the range from either, unless st_fid_bound_reason documents why: a constant on its bound is
 * the fit absorbing a mechanism the model lacks. */
static int on_bound(const st_calib_knob *k, double v)
{
    double lo = k->log ? log(k->lo) : k->lo, hi = k->log ? log(k->hi) : k->hi, u = k->log ? log(v) : v;
    double d = (u - lo) < (hi - u) ? (u - lo) : (hi - u);
    return !(d / (hi - lo) >= ST_FID_BOUND_NEAR);
}

static void no_constant_on_a_bound(void **state)
{
    (void)state;
    const char *keys[32];
    int nk = st_emu_gpu_keys(keys, 32), bad = 0, checked = 0;
    for (int g = 0; g < nk; g++) {
        st_emu_gpu gpu;
        char err[256];
        assert_int_equal(st_emu_gpu_find(keys[g], &gpu, err, sizeof err), 0);
        st_emu_tuning t;
        st_emu_tuning_defaults(&t, &gpu);
        for (const st_calib_knob *k = st_calib_knobs(); k->name; k++) {
            double v = st_calib_knob_get(&t, k);
            char name[96];
            snprintf(name, sizeof name, "%s@%s", k->name, keys[g]);
            checked++;
            if (on_bound(k, v) && !st_fid_bound_reason(name)) {
                printf("# %s = %g sits on its bound [%g, %g] without a documented reason\n", name, v, k->lo, k->hi);
                bad++;
            }
        }
    }
    /* the labs' own latencies */
    uint32_t n;
    st_fid_point *pts = load_points(&n);
    const st_calib_knob *fe = st_calib_knob_find("fe_latency_s");
    assert_non_null(fe);
    for (uint32_t i = 0; i < n; i++) {
        double v = st_fid_lab_fe_latency(pts[i].lab);
        char name[ST_FID_NAME_MAX + 16];
        snprintf(name, sizeof name, "fe_latency_s@%s", pts[i].lab);
        if (isfinite(v) && on_bound(fe, v) && !st_fid_bound_reason(name)) {
            printf("# %s = %g sits on its bound without a documented reason\n", name, v);
            bad++;
        }
    }
    free(pts);
    printf("# %d constants checked against their bounds, %d on a bound without a reason\n", checked, bad);
    assert_true(checked > 0);
    assert_int_equal(bad, 0);
}

/* Leave-one-lab-out's calibration input (bench/fidelity.c --lab-latency cal): each lab's
 * calibration point is its lowest-load, short-prompt point with a p50 (else mean) TTFT, and the
 * latency solved from it reproduces that TTFT whatever latency the configuration started with; a
 * TTFT beyond what the bounds allow gives the bound; a lab with long prompts or tail TTFTs only
 * has none. */
static int id_is(const st_fid_point *pts, int i, const char *id) { return i >= 0 && !strcmp(pts[i].id, id); }

static void lab_latency_from_its_calibration_point(void **state)
{
    (void)state;
    char err[512];
    uint32_t n;
    st_fid_point *pts = load_points(&n);
    int g = st_fid_lab_cal_point(pts, n, "gpustack/gpustack");
    if (!id_is(pts, g, "gpustack-h100-qwen3-8b-bf16-sharegpt-c1"))
        fail_msg("GPUStack's calibration point is %s, expected its concurrency-1 point", g >= 0 ? pts[g].id : "none");
    int iog = st_fid_lab_cal_point(pts, n, "IOG-Foundation/llm-inference-benchmarks");
    assert_true(iog >= 0);
    assert_true(strstr(pts[iog].id, "-r1") != NULL); /* its 1 req/s rung, not a higher rate */
    /* silybench publishes tail TTFTs only, the vLLM blog 20k-token prompts: none */
    assert_int_equal(st_fid_lab_cal_point(pts, n, "tgarg01/silybench-data"), -1);
    assert_int_equal(st_fid_lab_cal_point(pts, n, "vllm-project/vllm-project.github.io"), -1);
    assert_int_equal(st_fid_lab_cal_point(pts, n, "no/such-lab"), -1);

    const st_calib_knob *fe = st_calib_knob_find("fe_latency_s");
    assert_non_null(fe);
    int cases[2] = { g, iog };
    for (int c = 0; c < 2; c++) {
        uint32_t i = (uint32_t)cases[c];
        st_emu_config cfg;
        assert_int_equal(st_fid_config(&pts[i], &cfg, err, sizeof err), 0);
        double x[2];
        for (int start = 0; start < 2; start++) {
            cfg.tune.fe_latency_s = start ? fe->hi : fe->lo;
            x[start] = st_fid_solve_lab_latency(pts, n, i, &cfg, err, sizeof err);
            if (!isfinite(x[start]))
                fail_msg("%s: %s", pts[i].id, err);
        }
        assert_true(fabs(x[0] - x[1]) < 1e-9); /* the configuration's own latency does not matter */
        assert_true(x[0] > fe->lo && x[0] < fe->hi);
        cfg.tune.fe_latency_s = x[0];
        st_fid_figures f;
        assert_int_equal(st_fid_predict_in(pts, n, i, &cfg, &f, err, sizeof err), 0);
        double got = isfinite(pts[i].ttft_ms.p50) ? f.ttft_ms.p50 : f.ttft_ms.mean;
        double want = isfinite(pts[i].ttft_ms.p50) ? pts[i].ttft_ms.p50 : pts[i].ttft_ms.mean;
        printf("# %s: lab latency %.1f ms, TTFT %.2f ms (published %.2f)\n", pts[i].id, 1e3 * x[0], got, want);
        if (!(fabs(got / want - 1) <= 2 * ST_FID_CAL_TOLERANCE))
            fail_msg("%s: at the solved latency the TTFT is %.2f ms, published %.2f", pts[i].id, got, want);
        /* a published TTFT no latency within the bounds reaches gives the bound */
        pts[i].ttft_ms.p50 = isfinite(pts[i].ttft_ms.p50) ? 100 * want : NAN;
        pts[i].ttft_ms.mean = 100 * want;
        assert_true(st_fid_solve_lab_latency(pts, n, i, &cfg, err, sizeof err) == fe->hi);
        pts[i].ttft_ms.p50 = isfinite(pts[i].ttft_ms.p50) ? want / 100 : NAN;
        pts[i].ttft_ms.mean = want / 100;
        assert_true(st_fid_solve_lab_latency(pts, n, i, &cfg, err, sizeof err) == fe->lo);
    }
    free(pts);
}

/* Leave-one-lab-out without a fit (st_fid_lolo_sourced, the same figures `build/bench/fidelity
 * --lolo --free none` prints): the pooled held-out medians stay under their ceilings, every point
 * but the labs' calibration inputs is scored, and the data still spans enough labs. */
static void leave_one_lab_out_does_not_get_worse(void **state)
{
    (void)state;
    char err[512];
    uint32_t n;
    st_fid_point *pts = load_points(&n);
    st_fid_ratios *r = calloc(n, sizeof *r);
    assert_non_null(r);
    if (st_fid_lolo_sourced(pts, n, r, err, sizeof err) < 0)
        fail_msg("leave-one-lab-out: %s", err);
    const char *labs[ST_FID_LOLO_MAX_LABS];
    int nl = 0;
    uint32_t unscored = 0;
    for (uint32_t i = 0; i < n; i++) {
        int seen = 0, any = 0;
        for (int j = 0; j < nl; j++)
            seen |= !strcmp(labs[j], pts[i].lab);
        if (!seen && nl < ST_FID_LOLO_MAX_LABS)
            labs[nl++] = pts[i].lab;
        for (int m = 0; m < ST_FID_M_COUNT; m++)
            any |= isfinite(r[i].r[m]);
        unscored += !any;
    }
    printf("# leave-one-lab-out: %d labs, %u points not scored (calibration inputs)\n", nl, unscored);
    assert_true(nl >= FID_LOLO_MIN_LABS);
    assert_true(unscored > 0 && unscored < (uint32_t)nl + 1);
    const double lim[ST_FID_M_COUNT] = { FID_LOLO_TPUT, FID_LOLO_TTFT50, FID_LOLO_TTFTT, FID_LOLO_TPOT };
    double *v = malloc(n * sizeof *v);
    assert_non_null(v);
    for (int m = 0; m < ST_FID_M_COUNT; m++) {
        uint32_t k = 0;
        for (uint32_t i = 0; i < n; i++)
            if (isfinite(r[i].r[m]))
                v[k++] = fabs(r[i].r[m] - 1);
        assert_true(k > 0);
        double med = st_fid_median(v, k);
        printf("# lolo %-10s n=%u median |err| %.1f %% (ceiling %.1f %%)\n", st_fid_metric_name(m), k, 100 * med,
               100 * lim[m]);
        if (!(med <= lim[m]))
            fail_msg("leave-one-lab-out, %s: median |error| %.1f %% is above its ceiling %.1f %%",
                     st_fid_metric_name(m), 100 * med, 100 * lim[m]);
    }
    free(v);
    free(r);
    free(pts);
}

/* The cross-check points (CROSSCHECK: more levels of silybench's H100 Qwen3-8B runs, long
 * context at concurrency 32-256, bf16 and fp8, kept outside DATA; bench/fidelity/README.md): the
 * model's throughput within CROSSCHECK_TPUT of each published figure. Today 0.91-1.01x (worst 9 %),
 * and 0.97-1.04x held out with their lab (docs/fidelity.md, "The data"). */
#define CROSSCHECK "bench/fidelity/crosscheck-silybench.json"
#define CROSSCHECK_TPUT 0.15

static void crosscheck_long_context_high_concurrency(void **state)
{
    (void)state;
    char err[512];
    uint32_t n;
    st_fid_point *pts = load_file(CROSSCHECK, &n);
    assert_true(n >= 9);
    for (uint32_t i = 0; i < n; i++) {
        st_emu_config c;
        st_fid_figures f;
        st_fid_ratios r;
        if (st_fid_config(&pts[i], &c, err, sizeof err) < 0 ||
            st_fid_predict_in(pts, n, i, &c, &f, err, sizeof err) < 0)
            fail_msg("point %s: %s", pts[i].id, err);
        assert_false(f.refused);
        st_fid_compare(&pts[i], &f, &r);
        double t = r.r[ST_FID_M_THROUGHPUT];
        printf("# crosscheck %-50s throughput %.2fx\n", pts[i].id, t);
        if (!(fabs(t - 1) <= CROSSCHECK_TPUT))
            fail_msg("point %s: throughput %.2fx the published figure (ceiling %.0f %%)", pts[i].id, t,
                     100 * CROSSCHECK_TPUT);
    }
    free(pts);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(figures_do_not_get_worse),
        cmocka_unit_test(no_constant_on_a_bound),
        cmocka_unit_test(lab_latency_from_its_calibration_point),
        cmocka_unit_test(leave_one_lab_out_does_not_get_worse),
        cmocka_unit_test(crosscheck_long_context_high_concurrency),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
