/* The fit minimiser, calibration files (round trip, refusals, extrapolation) and the fidelity
 * benchmark's parsing, configuration and comparison. */
#include "harness.h"

#include <stdio.h>

#include "core/buf.h"
#include "emu/calib.h"
#include "emu/catalog.h"
#include "emu/consts.h"
#include "fidelity/harness.h"
#include "emu/fit.h"

static double bowl(void *arg, const double *x, int moved)
{
    int *calls = arg;
    (*calls)++;
    (void)moved;
    double a = x[0] - 3.0, b = log(x[1]) - log(0.01), c = x[2] - 0.5;
    return a * a + b * b + 4 * c * c;
}

static void fit_finds_a_bounded_minimum(void **state)
{
    (void)state;
    st_fit_param p[3] = {
        { "a", 1.0, 0.0, 10.0, 0, 0, 0 },
        { "b", 1.0, 1e-4, 10.0, 1, 0, 0 },
        { "c", 0.9, 0.6, 1.0, 0, 0, 0 }, /* the minimum (0.5) is outside: the bound is the answer */
    };
    int calls = 0;
    st_fit_result r;
    assert_int_equal(st_fit_minimise(p, 3, bowl, &calls, 4, &r), 0);
    assert_near(p[0].value, 3.0, 0.02);
    assert_near(log(p[1].value), log(0.01), 0.05);
    assert_near(p[2].value, 0.6, 0.01);
    assert_true(r.loss < r.loss0);
    assert_int_equal(r.evaluations, calls);
    /* a log parameter needs positive bounds */
    st_fit_param bad = { "x", 1, 0, 1, 1, 0, 0 };
    assert_int_equal(st_fit_minimise(&bad, 1, bowl, &calls, 1, &r), -1);
}

/* A warm start searches only a window around the best value so far: near the minimum it finds
 * it; far from it, each sweep moves it at most half a window towards it, where a whole-range
 * search finds it. */
static void fit_warm_start_stays_in_its_window(void **state)
{
    (void)state;
    int calls = 0;
    st_fit_result r;
    st_fit_param near[3] = {
        { "a", 3.4, 0.0, 10.0, 0, 0, 0.1 },
        { "b", 0.01, 1e-4, 10.0, 1, 0, 0.1 },
        { "c", 0.6, 0.6, 1.0, 0, 0, 0.1 },
    };
    assert_int_equal(st_fit_minimise(near, 3, bowl, &calls, 3, &r), 0);
    assert_near(near[0].value, 3.0, 0.02);
    st_fit_param far[3] = {
        { "a", 8.0, 0.0, 10.0, 0, 0, 0.1 },
        { "b", 0.01, 1e-4, 10.0, 1, 0, 0.1 },
        { "c", 0.6, 0.6, 1.0, 0, 0, 0.1 },
    };
    assert_int_equal(st_fit_minimise(far, 3, bowl, &calls, 3, &r), 0);
    assert_true(far[0].value >= 8.0 - 3 * 0.5 - 1e-9 && far[0].value < 8.0);
    far[0] = (st_fit_param){ "a", 8.0, 0.0, 10.0, 0, 0, 0 };
    assert_int_equal(st_fit_minimise(far, 3, bowl, &calls, 3, &r), 0);
    assert_near(far[0].value, 3.0, 0.02);
}

static void config_for(st_emu_config *c, const char *gpu, const char *model)
{
    char err[256];
    st_emu_gpu g;
    st_emu_model m;
    assert_int_equal(st_emu_gpu_find(gpu, &g, err, sizeof err), 0);
    assert_int_equal(st_emu_model_find(model, &m, err, sizeof err), 0);
    st_emu_config_init(c, &g, &m);
}

static void calibration_round_trip_and_refusals(void **state)
{
    (void)state;
    st_emu_config c;
    config_for(&c, "H100", "Qwen/Qwen3-8B");
    st_emu_calib cal;
    memset(&cal, 0, sizeof cal);
    st_calib_identity(&cal, &c);
    const st_calib_knob *bw = st_calib_knob_find("bw_eff"), *lat = st_calib_knob_find("fe_latency_s");
    assert_non_null(bw);
    assert_non_null(lat);
    cal.value[bw - st_calib_knobs()] = 0.71;
    cal.set[bw - st_calib_knobs()] = 1;
    cal.value[lat - st_calib_knobs()] = 0.015;
    cal.set[lat - st_calib_knobs()] = 1;
    cal.range.rate_max = 8;
    st_buf b;
    st_buf_init(&b, 1 << 16);
    st_calib_write(&cal, "\"defaulted\": []", &b);
    assert_false(st_buf_error(&b));
    st_emu_calib back;
    char err[512], why[512], note[512];
    assert_int_equal(st_calib_parse(b.data, b.len, &back, err, sizeof err), 0);
    st_buf_free(&b);
    assert_int_equal(st_calib_check(&back, &c, why, sizeof why, note, sizeof note), 0);
    st_calib_apply(&back, &c);
    assert_near(c.tune.bw_eff, 0.71, 1e-9);
    assert_near(c.tune.fe_latency_s, 0.015, 1e-9);
    /* another GPU, another model, other weights: refused with the reason */
    st_emu_config o;
    config_for(&o, "A100", "Qwen/Qwen3-8B");
    assert_int_equal(st_calib_check(&back, &o, why, sizeof why, NULL, 0), -1);
    assert_non_null(strstr(why, "GPU H100 SXM 80GB"));
    config_for(&o, "H100", "Qwen/Qwen3-32B");
    assert_int_equal(st_calib_check(&back, &o, why, sizeof why, NULL, 0), -1);
    assert_non_null(strstr(why, "model"));
    config_for(&o, "H100", "Qwen/Qwen3-8B-FP8");
    assert_int_equal(st_calib_check(&back, &o, why, sizeof why, NULL, 0), -1);
    assert_non_null(strstr(why, "fp8 weights"));
    /* another TP size is a note, not a refusal */
    config_for(&o, "H100", "Qwen/Qwen3-8B");
    o.tp = 2;
    assert_int_equal(st_calib_check(&back, &o, why, sizeof why, note, sizeof note), 0);
    assert_non_null(strstr(note, "tensor-parallel size 1"));
    /* extrapolation beyond 1.5 x the measured rates is flagged */
    assert_int_equal(st_calib_extrapolates(&back, 10, 0, 1.5, why, sizeof why), 0);
    assert_int_equal(st_calib_extrapolates(&back, 13, 0, 1.5, why, sizeof why), 1);
    assert_non_null(strstr(why, "extrapolates"));
    assert_int_equal(st_calib_extrapolates(&back, INFINITY, 0, 1.5, why, sizeof why), 1);
    /* malformed files */
    const char *bad[] = {
        "{}",
        "{\"schema\":\"servetune-calibration/1\",\"gpu\":\"H100 SXM 80GB\",\"model\":\"m\",\"model_shape\":{\"layers\":"
        "36,\"hidden\":4096,\"heads\":32,\"vocab\":151936},\"weights\":\"bfloat16\",\"tuning\":{\"warp_drive\":1}}",
        "{\"schema\":\"servetune-calibration/1\",\"gpu\":\"H100 SXM 80GB\",\"model\":\"m\",\"model_shape\":{\"layers\":"
        "36,\"hidden\":4096,\"heads\":32,\"vocab\":151936},\"weights\":\"bfloat16\",\"tuning\":{\"bw_eff\":3}}",
        "{\"schema\":\"servetune-calibration/1\",\"gpu\":\"H100 SXM 80GB\",\"model\":\"m\",\"model_shape\":{\"layers\":"
        "36,\"hidden\":4096,\"heads\":32,\"vocab\":151936},\"weights\":\"int3\",\"tuning\":{}}",
        "not json",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(st_calib_parse(bad[i], strlen(bad[i]), &back, err, sizeof err), -1);
}

static const char *TWO_POINTS =
    "[{\"id\":\"a\",\"split\":\"fit\",\"source\":{},\"setup\":{\"gpu\":\"A100 80GB PCIe\",\"model\":\"Qwen/Qwen3-32B\","
    "\"model_catalog_key\":\"qwen3-32b\",\"weights\":\"awq-int4 (g128)\",\"kv_cache_dtype\":\"fp8_e4m3\","
    "\"tensor_parallel_size\":1,\"vllm_version\":\"0.19.0\",\"max_model_len\":8192,\"gpu_memory_utilization\":0.9,"
    "\"enforce_eager\":true},\"load\":{\"mode\":\"concurrency\",\"value\":4,\"num_prompts\":16,\"dataset\":\"random\","
    "\"input_len\":512,\"output_len\":64,\"range_ratio\":0.0,\"endpoint\":\"/v1/chat/completions\"},"
    "\"measured\":{\"out_tok_s\":100,\"ttft_ms\":{\"p99\":900},\"tpot_ms\":{\"mean\":40}}},"
    "{\"id\":\"b\",\"split\":\"test\",\"source\":{},\"setup\":{\"gpu\":\"H100 SXM 80GB\",\"model\":\"Qwen/Qwen3-8B\","
    "\"weights\":\"bf16\",\"kv_cache_dtype\":\"auto\",\"tensor_parallel_size\":1},\"load\":{\"mode\":\"rate\","
    "\"value\":\"inf\",\"num_prompts\":50,\"dataset\":\"sharegpt\",\"total_input_tokens\":10000,"
    "\"total_output_tokens\":9000},\"measured\":{\"req_s\":5,\"ttft_ms\":{\"p50\":400,\"p95\":900}}}]";

/* A point's lab: the source's repository, else its URL's host; a lab with its own fitted
 * front-end latency gets it in st_fid_config, every other one the model's default. */
static void fidelity_labs_have_their_own_latency(void **state)
{
    (void)state;
    static const char *THREE =
        "[{\"id\":\"a\",\"split\":\"fit\",\"source\":{\"repo\":\"DO-Solutions/gtc-2026-doks\",\"path\":\"r.md\"},"
        "\"setup\":{\"gpu\":\"H100 SXM 80GB\",\"model\":\"Qwen/Qwen3-8B\",\"weights\":\"bf16\"},\"load\":{\"mode\":"
        "\"rate\",\"value\":1,\"num_prompts\":10,\"dataset\":\"random\",\"input_len\":64,\"output_len\":8},"
        "\"measured\":{\"req_s\":1}},"
        "{\"id\":\"b\",\"split\":\"fit\",\"source\":{\"url\":\"https://example.org/blog/post\"},"
        "\"setup\":{\"gpu\":\"H100 SXM 80GB\",\"model\":\"Qwen/Qwen3-8B\",\"weights\":\"bf16\"},\"load\":{\"mode\":"
        "\"rate\",\"value\":1,\"num_prompts\":10,\"dataset\":\"random\",\"input_len\":64,\"output_len\":8},"
        "\"measured\":{\"req_s\":1}},"
        "{\"id\":\"c\",\"split\":\"test\",\"source\":{},"
        "\"setup\":{\"gpu\":\"H100 SXM 80GB\",\"model\":\"Qwen/Qwen3-8B\",\"weights\":\"bf16\"},\"load\":{\"mode\":"
        "\"rate\",\"value\":1,\"num_prompts\":10,\"dataset\":\"random\",\"input_len\":64,\"output_len\":8},"
        "\"measured\":{\"req_s\":1}}]";
    char err[512];
    st_fid_point *pts;
    uint32_t n;
    assert_int_equal(st_fid_parse(THREE, strlen(THREE), &pts, &n, err, sizeof err), 0);
    assert_int_equal(n, 3);
    assert_string_equal(pts[0].lab, "DO-Solutions/gtc-2026-doks");
    assert_string_equal(pts[1].lab, "example.org");
    assert_string_equal(pts[2].lab, "c");
    double own = st_fid_lab_fe_latency(pts[0].lab);
    assert_true(isfinite(own) && own > 0);
    assert_true(isnan(st_fid_lab_fe_latency(pts[1].lab)));
    st_emu_config c, d;
    assert_int_equal(st_fid_config(&pts[0], &c, err, sizeof err), 0);
    assert_near(c.tune.fe_latency_s, own, 1e-15);
    assert_int_equal(st_fid_config(&pts[1], &d, err, sizeof err), 0);
    assert_near(d.tune.fe_latency_s, EMU_FE_LATENCY_S, 1e-15);
    assert_true(fabs(own - EMU_FE_LATENCY_S) > 1e-4);
    free(pts);
}

static void fidelity_points_run(void **state)
{
    (void)state;
    char err[512];
    st_fid_point *pts;
    uint32_t n;
    assert_int_equal(st_fid_parse(TWO_POINTS, strlen(TWO_POINTS), &pts, &n, err, sizeof err), 0);
    assert_int_equal(n, 2);
    assert_int_equal(pts[0].split, ST_FID_FIT);
    assert_int_equal(pts[0].mode, ST_FID_CONCURRENCY);
    assert_int_equal(pts[0].clients, 4);
    assert_int_equal(pts[0].chat, 1);
    assert_int_equal(pts[1].split, ST_FID_TEST);
    assert_true(isinf(pts[1].rate));
    st_emu_config c;
    assert_int_equal(st_fid_config(&pts[0], &c, err, sizeof err), 0);
    assert_int_equal(c.weight_dtype, ST_EMU_INT4_AWQ);
    assert_int_equal(c.kv_dtype, ST_EMU_FP8);
    assert_int_equal(c.enforce_eager, 1);
    assert_int_equal(c.vllm_version, 1900);
    assert_near(c.gpu.mem_bw / 1e12, 1.935, 1e-9);
    st_fid_figures f;
    st_fid_ratios r[2];
    assert_int_equal(st_fid_predict(&pts[0], &c, &f, err, sizeof err), 0);
    assert_int_equal(f.refused, 0);
    assert_int_equal(f.completed, 16);
    st_fid_compare(&pts[0], &f, &r[0]);
    assert_true(isfinite(r[0].r[ST_FID_M_THROUGHPUT]));
    assert_string_equal(r[0].which[ST_FID_M_TTFT_TAIL], "p99");
    assert_string_equal(r[0].which[ST_FID_M_TPOT], "mean");
    assert_true(isnan(r[0].r[ST_FID_M_TTFT_P50]));
    assert_int_equal(st_fid_config(&pts[1], &c, err, sizeof err), 0);
    assert_int_equal(st_fid_predict(&pts[1], &c, &f, err, sizeof err), 0);
    st_fid_compare(&pts[1], &f, &r[1]);
    assert_string_equal(r[1].which[ST_FID_M_THROUGHPUT], "req_s");
    assert_true(st_fid_loss(&r[1], 0) >= 0);
    assert_near(st_fid_loss(&r[1], 1), ST_FID_REFUSED_LOSS, 1e-12);
    st_fid_stat s;
    st_fid_summarise(pts, r, 2, ST_FID_TEST, ST_FID_M_THROUGHPUT, &s);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.worst_index, 1);
    assert_near(s.median_abs, fabs(r[1].r[ST_FID_M_THROUGHPUT] - 1), 1e-12);
    free(pts);
    /* a point without its split, or with a random dataset missing lengths, is refused */
    const char *bad = "[{\"id\":\"x\",\"setup\":{},\"load\":{},\"measured\":{}}]";
    assert_int_equal(st_fid_parse(bad, strlen(bad), &pts, &n, err, sizeof err), -1);
}

/* Two points of the DO sweep (a source measured on one server, in the harness's table), given
 * in reverse order, and one point of a fresh server. */
#define SWEEP_SETUP                                                                                                    \
    "\"setup\":{\"gpu\":\"H100 SXM "                                                                                   \
    "80GB\",\"model\":\"Qwen/Qwen3-8B\",\"weights\":\"bf16\",\"kv_cache_dtype\":\"auto\","                             \
    "\"tensor_parallel_size\":1,\"vllm_version\":\"0.14.1\",\"max_model_len\":8192}"
#define SWEEP_LOAD(rate)                                                                                               \
    "\"load\":{\"mode\":\"rate\",\"value\":" rate ",\"num_prompts\":40,\"dataset\":\"random\",\"input_len\":2048,"     \
    "\"output_len\":32,\"range_ratio\":0.0,\"seed\":0,\"burstiness\":1.0,\"endpoint\":\"/v1/completions\"},"           \
    "\"measured\":{\"out_tok_s\":100,\"ttft_ms\":{\"p50\":100}}"
static const char *SWEEP =
    "[{\"id\":\"s-r2.0\",\"split\":\"fit\",\"source\":{\"repo\":\"DO-Solutions/gtc-2026-doks\",\"path\":"
    "\"dev/vllm/benchmarks/phase0/20260224-185458/report.md\"}," SWEEP_SETUP "," SWEEP_LOAD(
        "2.0") "},"
               "{\"id\":\"s-r1.0\",\"split\":\"fit\",\"source\":{\"repo\":\"DO-Solutions/gtc-2026-doks\",\"path\":"
               "\"dev/vllm/benchmarks/phase0/20260224-185458/report.md\"}," SWEEP_SETUP
               "," SWEEP_LOAD("1.0") "},"
                                     "{\"id\":\"c-r3\",\"split\":\"test\",\"source\":{\"repo\":\"someone/"
                                     "else\",\"path\":\"x.md\"}," SWEEP_SETUP "," SWEEP_LOAD("1.0") "}]";

static void fidelity_sweeps_replay_the_server(void **state)
{
    (void)state;
    char err[512];
    st_fid_point *pts;
    uint32_t n;
    assert_int_equal(st_fid_parse(SWEEP, strlen(SWEEP), &pts, &n, err, sizeof err), 0);
    assert_int_equal(n, 3);
    /* one sweep, run in ascending rate, once, after one unpublished run of its prompts */
    assert_true(pts[0].sweep >= 0);
    assert_int_equal(pts[0].sweep, pts[1].sweep);
    assert_int_equal(pts[1].sweep_pos, 0);
    assert_int_equal(pts[0].sweep_pos, 1);
    assert_int_equal(pts[0].rounds, 1);
    assert_int_equal(pts[0].preruns, 1);
    assert_int_equal(pts[0].round, 0); /* "-r2.0" is a rate, not a round */
    assert_int_equal(pts[2].sweep, -1);
    assert_near(pts[0].burstiness, 1.0, 0);
    st_emu_config c;
    assert_int_equal(st_fid_config(&pts[1], &c, err, sizeof err), 0);
    st_fid_figures cold, warm;
    assert_int_equal(st_fid_predict_in(pts, n, 2, &c, &cold, err, sizeof err), 0);
    assert_int_equal(st_fid_predict_in(pts, n, 1, &c, &warm, err, sizeof err), 0);
    assert_int_equal(cold.completed, 40);
    assert_int_equal(warm.completed, 40);
    /* the same seed sent the same 2048-token prompts before: the prefix cache serves them */
    assert_true(warm.ttft_ms.p50 < 0.6 * cold.ttft_ms.p50);
    /* vllm bench serve (>= 0.10) sends the last request at n / rate; the duration starts before
     * the first gap */
    assert_true(cold.duration_s >= 40 / 1.0);
    assert_true(cold.duration_s < 40 / 1.0 + 2.0);
    free(pts);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(fit_finds_a_bounded_minimum),         cmocka_unit_test(fit_warm_start_stays_in_its_window),
        cmocka_unit_test(calibration_round_trip_and_refusals), cmocka_unit_test(fidelity_points_run),
        cmocka_unit_test(fidelity_sweeps_replay_the_server),   cmocka_unit_test(fidelity_labs_have_their_own_latency),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
