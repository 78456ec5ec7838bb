/* The engine model against published real-hardware vLLM measurements (docs/fidelity.md).
 *
 *   build/bench/fidelity [--data FILE] [--summary] [--split fit|test] [--detail] [--fit [--sweeps N]]
 *
 * Runs every point of bench/fidelity/measurements.json through the engine model with the
 * point's exact setup and load, prints the predicted/published ratios for throughput, TTFT
 * p50 and tail (p95, else p99) and TPOT, then the median and worst absolute errors separately
 * for the fit split and the test split. --fit fits the model's free constants on the fit
 * split only (coordinate descent, emu/fit.h) and prints them as they go into consts.h and the
 * GPU catalog; the test split is never looked at while fitting. --split prints one split only
 * (work on the model looks at the fit split's residuals only); --detail adds each point's
 * predicted and published figures. Exit status 0; 2 on bad input. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/file.h"
#include "emu/fidelity.h"
#include "emu/fit.h"

#define DATA_MAX (16u << 20)
#define DEFAULT_DATA "bench/fidelity/measurements.json"

typedef struct point_run {
    st_emu_config cfg;
    int cfg_ok;
    char err[512];
    st_fid_figures f;
    st_fid_ratios r;
    double loss;
} point_run;

static void run_point(const st_fid_point *pts, uint32_t n, uint32_t i, point_run *pr)
{
    const st_fid_point *p = &pts[i];
    char err[512] = "";
    if (!pr->cfg_ok) {
        memset(&pr->r, 0, sizeof pr->r);
        for (int m = 0; m < ST_FID_M_COUNT; m++)
            pr->r.r[m] = NAN;
        pr->loss = ST_FID_REFUSED_LOSS;
        return;
    }
    if (st_fid_predict_in(pts, n, i, &pr->cfg, &pr->f, err, sizeof err) < 0) {
        snprintf(pr->err, sizeof pr->err, "%s", err);
        pr->f.refused = 1;
    } else if (pr->f.refused) {
        snprintf(pr->err, sizeof pr->err, "refused: %.400s", err);
    } else {
        pr->err[0] = 0;
    }
    st_fid_compare(p, &pr->f, &pr->r);
    pr->loss = st_fid_loss(&pr->r, pr->f.refused);
}

static void fmt_ratio(char *out, size_t len, double r)
{
    if (isfinite(r))
        snprintf(out, len, "%6.2f", r);
    else
        snprintf(out, len, "%6s", "-");
}

static void fmt_pair(char *out, size_t len, double pred, double pub)
{
    if (isfinite(pub))
        snprintf(out, len, "%.4g/%.4g", pred, pub);
    else
        snprintf(out, len, "-");
}

/* --detail: the predicted and published figures themselves (pred/pub). */
static void print_detail(const st_fid_point *p, const point_run *pr)
{
    const st_fid_figures *f = &pr->f;
    char a[48], b[48], c[48], d[48], e[48], g[48], h[48];
    fmt_pair(a, sizeof a, f->out_tok_s, p->out_tok_s);
    fmt_pair(b, sizeof b, f->req_s, p->req_s);
    fmt_pair(c, sizeof c, f->ttft_ms.p50, p->ttft_ms.p50);
    fmt_pair(d, sizeof d, f->ttft_ms.p95, p->ttft_ms.p95);
    fmt_pair(e, sizeof e, f->ttft_ms.p99, p->ttft_ms.p99);
    fmt_pair(g, sizeof g, f->tpot_ms.p50, p->tpot_ms.p50);
    fmt_pair(h, sizeof h, f->tpot_ms.p99, p->tpot_ms.p99);
    printf("      out_tok_s %s  req_s %s  ttft p50 %s p95 %s p99 %s  tpot p50 %s p99 %s", a, b, c, d, e, g, h);
    fmt_pair(a, sizeof a, f->ttft_ms.mean, p->ttft_ms.mean);
    fmt_pair(b, sizeof b, f->tpot_ms.mean, p->tpot_ms.mean);
    printf("  ttft mean %s  tpot mean %s  preempt %u\n", a, b, f->preemptions);
}

static void print_points(const st_fid_point *pts, const point_run *pr, uint32_t n, int only_split, int detail)
{
    printf("%-3s %-54s %-4s %8s %8s %8s %8s  %s\n", "#", "point", "split", "thrpt", "ttft50", "ttft_t", "tpot",
           "(predicted/published; published figure used)");
    for (uint32_t i = 0; i < n; i++) {
        if (only_split >= 0 && pts[i].split != (st_fid_split)only_split)
            continue;
        char a[16], b[16], c[16], d[16];
        fmt_ratio(a, sizeof a, pr[i].r.r[ST_FID_M_THROUGHPUT]);
        fmt_ratio(b, sizeof b, pr[i].r.r[ST_FID_M_TTFT_P50]);
        fmt_ratio(c, sizeof c, pr[i].r.r[ST_FID_M_TTFT_TAIL]);
        fmt_ratio(d, sizeof d, pr[i].r.r[ST_FID_M_TPOT]);
        printf("%-3u %-54.54s %-4s %8s %8s %8s %8s  %s/%s/%s/%s%s%s\n", i + 1, pts[i].id,
               pts[i].split == ST_FID_TEST ? "test" : "fit", a, b, c, d, pr[i].r.which[0] ? pr[i].r.which[0] : "-",
               pr[i].r.which[1] ? pr[i].r.which[1] : "-", pr[i].r.which[2] ? pr[i].r.which[2] : "-",
               pr[i].r.which[3] ? pr[i].r.which[3] : "-", pr[i].err[0] ? "  " : "", pr[i].err);
        if (detail)
            print_detail(&pts[i], &pr[i]);
    }
}

static void print_summary(const st_fid_point *pts, const point_run *pr, uint32_t n, int only_split)
{
    st_fid_ratios *rs = calloc(n ? n : 1, sizeof *rs);
    if (!rs)
        return;
    for (uint32_t i = 0; i < n; i++)
        rs[i] = pr[i].r;
    static const char *target[ST_FID_M_COUNT] = { "<= 10 %", "-", "<= 15 %", "<= 10 %" };
    for (int split = 0; split < 2; split++) {
        if (only_split >= 0 && split != only_split)
            continue;
        printf("\n%s split:\n", split ? "TEST" : "FIT");
        printf("  %-11s %4s %12s %12s  %-10s %s\n", "metric", "n", "median |err|", "worst |err|", "target",
               "worst point");
        for (int m = 0; m < ST_FID_M_COUNT; m++) {
            st_fid_stat s;
            st_fid_summarise(pts, rs, n, (st_fid_split)split, m, &s);
            printf("  %-11s %4u %11.1f%% %11.1f%%  %-10s %s\n", st_fid_metric_name(m), s.n, 100 * s.median_abs,
                   100 * s.worst_abs, target[m], s.worst_index >= 0 ? pts[s.worst_index].id : "-");
        }
        uint32_t far = 0, refused = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (pts[i].split != (st_fid_split)split)
                continue;
            if (pr[i].f.refused || !pr[i].cfg_ok) {
                refused++;
                continue;
            }
            for (int m = 0; m < ST_FID_M_COUNT; m++)
                if (isfinite(rs[i].r[m]) && (rs[i].r[m] > 2 || rs[i].r[m] < 0.5)) {
                    far++;
                    break;
                }
        }
        printf("  points with a metric off by more than 2x: %u; not predicted (refused or unknown): %u\n", far,
               refused);
    }
    free(rs);
}

/* ---- fitting ----------------------------------------------------------------------------- */

typedef enum { SCOPE_ALL, SCOPE_GPU, SCOPE_FP8, SCOPE_MARLIN, SCOPE_INT4, SCOPE_EAGER, SCOPE_MOE } scope;

typedef struct fparam {
    st_fit_param p;
    scope sc;
    char gpu[64];  /* SCOPE_GPU: the catalog name */
    size_t offset; /* in st_emu_tuning */
} fparam;

typedef struct fit_ctx {
    const st_fid_point *pts;
    point_run *pr;
    uint32_t n;
    fparam *fp;
    int k;
    int calls;
} fit_ctx;

static int affects(const fparam *f, const point_run *pr)
{
    switch (f->sc) {
    case SCOPE_ALL: return 1;
    case SCOPE_GPU: return !strcmp(pr->cfg.gpu.name, f->gpu);
    case SCOPE_FP8: return pr->cfg.weight_dtype == ST_EMU_FP8 && pr->cfg.gpu.fp8_flops > 0;
    case SCOPE_MARLIN:
        return pr->cfg.weight_dtype == ST_EMU_INT4_AWQ || pr->cfg.weight_dtype == ST_EMU_INT4_GPTQ ||
               (pr->cfg.weight_dtype == ST_EMU_FP8 && pr->cfg.gpu.fp8_flops <= 0);
    case SCOPE_INT4: return pr->cfg.weight_dtype == ST_EMU_INT4_AWQ || pr->cfg.weight_dtype == ST_EMU_INT4_GPTQ;
    case SCOPE_EAGER: return 1; /* prefill steps beyond the graph sizes run eagerly everywhere */
    case SCOPE_MOE: return pr->cfg.model.experts > 0;
    }
    return 1;
}

static void apply(const fparam *f, const double *x, int k, point_run *pr)
{
    for (int i = 0; i < k; i++)
        if (f[i].sc != SCOPE_GPU || affects(&f[i], pr))
            *(double *)((char *)&pr->cfg.tune + f[i].offset) = x[i];
}

static double objective(void *arg, const double *x, int moved)
{
    fit_ctx *C = arg;
    double total = 0;
    for (uint32_t i = 0; i < C->n; i++) {
        if (C->pts[i].split != ST_FID_FIT || !C->pr[i].cfg_ok)
            continue;
        if (moved < 0 || affects(&C->fp[moved], &C->pr[i])) {
            apply(C->fp, x, C->k, &C->pr[i]);
            run_point(C->pts, C->n, i, &C->pr[i]);
        }
        total += C->pr[i].loss;
    }
    C->calls++;
    if (C->calls % 25 == 0) {
        fprintf(stderr, "  [%d evaluations] loss %.4f\n", C->calls, total);
    }
    return total;
}

#define TUNE(f) offsetof(st_emu_tuning, f)
#define FIT_MIN_GPU_POINTS 3

static int do_fit(const st_fid_point *pts, point_run *pr, uint32_t n, int sweeps)
{
    fparam fp[ST_FIT_MAX_PARAMS];
    int k = 0;
    const st_emu_tuning *t0 = NULL;
    for (uint32_t i = 0; i < n && !t0; i++)
        if (pr[i].cfg_ok)
            t0 = &pr[i].cfg.tune;
    if (!t0)
        return -1;
#define ADD(nm, fld, lo, hi, lg, sc_, gpu_)                                                                            \
    do {                                                                                                               \
        fp[k] = (fparam){ { nm, 0, lo, hi, lg, 0 }, sc_, "", TUNE(fld) };                                              \
        snprintf(fp[k].gpu, sizeof fp[k].gpu, "%s", gpu_);                                                             \
        fp[k].p.value = t0->fld;                                                                                       \
        k++;                                                                                                           \
    } while (0)
    /* Bounds: what the mechanism allows physically or what published microbenchmarks show
     * (docs/engine-model.md), so that a source's own quirks cannot push a constant outside
     * what the hardware does. */
    ADD("fe_latency_s", fe_latency_s, 0.002, 0.06, 1, SCOPE_ALL, "");
    ADD("fe_req_cpu_s", fe_req_cpu_s, 0.0005, 0.03, 1, SCOPE_ALL, "");
    ADD("fe_token_cpu_s", fe_token_cpu_s, 5e-6, 8e-5, 1, SCOPE_ALL, "");
    ADD("fe_chat_factor", fe_chat_factor, 1.0, 4.0, 0, SCOPE_ALL, "");
    ADD("step_cpu_s", step_cpu_s, 2e-4, 0.005, 1, SCOPE_ALL, "");
    ADD("seq_cpu_s", seq_cpu_s, 1e-6, 5e-5, 1, SCOPE_ALL, "");
    ADD("layer_eager_s", layer_eager_s, 1e-5, 2.5e-4, 1, SCOPE_EAGER, "");
    ADD("attn_eff", attn_eff, 0.3, 0.8, 0, SCOPE_ALL, "");
    ADD("kv_bw_rel", kv_bw_rel, 0.35, 1.0, 0, SCOPE_ALL, "");
    ADD("fp8_gemm_rel", fp8_gemm_rel, 0.5, 1.0, 0, SCOPE_FP8, "");
    ADD("fp8_bw_rel", fp8_bw_rel, 0.6, 1.0, 0, SCOPE_FP8, "");
    ADD("marlin_bw_rel", marlin_bw_rel, 0.6, 1.0, 0, SCOPE_MARLIN, "");
    ADD("moe_gemm_rel", moe_gemm_rel, 0.2, 1.0, 0, SCOPE_MOE, "");
    ADD("int4_gemm_rel", int4_gemm_rel, 0.45, 1.0, 0, SCOPE_INT4, "");
    /* per-GPU efficiencies for the GPUs with at least FIT_MIN_GPU_POINTS fit points (fewer
     * would tune a GPU to one figure): GEMMs reach 0.5-0.9 of the dense peak in published
     * cuBLAS measurements, weight streaming 0.65-0.92 of the bandwidth */
    const char *seen[16];
    int ns = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (pts[i].split != ST_FID_FIT || !pr[i].cfg_ok)
            continue;
        int dup = 0;
        for (int j = 0; j < ns; j++)
            dup |= !strcmp(seen[j], pr[i].cfg.gpu.name);
        uint32_t count = 0;
        for (uint32_t j = 0; j < n; j++)
            count += pts[j].split == ST_FID_FIT && pr[j].cfg_ok && !strcmp(pr[j].cfg.gpu.name, pr[i].cfg.gpu.name);
        if (dup || ns == 16 || k + 2 > ST_FIT_MAX_PARAMS || count < FIT_MIN_GPU_POINTS)
            continue;
        seen[ns++] = pr[i].cfg.gpu.name;
        fp[k] = (fparam){ { "gemm_eff", pr[i].cfg.tune.gemm_eff, 0.5, 0.9, 0, 0 }, SCOPE_GPU, "", TUNE(gemm_eff) };
        snprintf(fp[k].gpu, sizeof fp[k].gpu, "%s", pr[i].cfg.gpu.name);
        k++;
        fp[k] = (fparam){ { "bw_eff", pr[i].cfg.tune.bw_eff, 0.65, 0.92, 0, 0 }, SCOPE_GPU, "", TUNE(bw_eff) };
        snprintf(fp[k].gpu, sizeof fp[k].gpu, "%s", pr[i].cfg.gpu.name);
        k++;
    }
    st_fit_param p[ST_FIT_MAX_PARAMS];
    for (int i = 0; i < k; i++)
        p[i] = fp[i].p;
    fit_ctx C = { pts, pr, n, fp, k, 0 };
    st_fit_result res;
    st_ns t0w = st_now();
    if (st_fit_minimise(p, k, objective, &C, sweeps, &res) < 0) {
        fprintf(stderr, "fit: the starting point is unusable\n");
        return -1;
    }
    double x[ST_FIT_MAX_PARAMS];
    for (int i = 0; i < k; i++)
        x[i] = p[i].value;
    for (uint32_t i = 0; i < n; i++)
        if (pr[i].cfg_ok) {
            apply(fp, x, k, &pr[i]);
            run_point(pts, n, i, &pr[i]);
        }
    printf("fit on the fit split: loss %.4f -> %.4f, %d evaluations, %d sweeps, %.0f s\n", res.loss0, res.loss,
           res.evaluations, res.sweeps, (st_now() - t0w) / 1e9);
    for (int i = 0; i < k; i++)
        printf("  %-16s %-16s %.6g\n", p[i].name, fp[i].gpu[0] ? fp[i].gpu : "(global)", p[i].value);
    return 0;
}

int main(int argc, char **argv)
{
    const char *data = DEFAULT_DATA;
    int fit = 0, sweeps = 3, points = 1, only_split = -1, detail = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--data") && i + 1 < argc)
            data = argv[++i];
        else if (!strcmp(argv[i], "--fit"))
            fit = 1;
        else if (!strcmp(argv[i], "--sweeps") && i + 1 < argc)
            sweeps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--summary"))
            points = 0;
        else if (!strcmp(argv[i], "--detail"))
            detail = 1;
        else if (!strcmp(argv[i], "--split") && i + 1 < argc &&
                 (!strcmp(argv[i + 1], "fit") || !strcmp(argv[i + 1], "test")))
            only_split = !strcmp(argv[++i], "test") ? ST_FID_TEST : ST_FID_FIT;
        else {
            fprintf(stderr, "usage: %s [--data FILE] [--summary] [--split fit|test] [--detail] [--fit [--sweeps N]]\n",
                    argv[0]);
            return 2;
        }
    }
    char err[1024];
    size_t len;
    char *text = st_read_file(data, DATA_MAX, &len, err, sizeof err);
    if (!text) {
        fprintf(stderr, "fidelity: %s\n", err);
        return 2;
    }
    st_fid_point *pts;
    uint32_t n;
    int rc = st_fid_parse(text, len, &pts, &n, err, sizeof err);
    free(text);
    if (rc < 0) {
        fprintf(stderr, "fidelity: %s\n", err);
        return 2;
    }
    point_run *pr = calloc(n ? n : 1, sizeof *pr);
    if (!pr)
        return 2;
    st_ns t0 = st_now();
    for (uint32_t i = 0; i < n; i++) {
        pr[i].cfg_ok = st_fid_config(&pts[i], &pr[i].cfg, pr[i].err, sizeof pr[i].err) == 0;
        run_point(pts, n, i, &pr[i]);
    }
    double wall = (st_now() - t0) / 1e9;
    if (fit && do_fit(pts, pr, n, sweeps) < 0)
        rc = 2;
    printf("engine model vs %u published vLLM measurements (%s)\n", n, data);
    if (points)
        print_points(pts, pr, n, only_split, detail);
    print_summary(pts, pr, n, only_split);
    printf("\n(all %u points simulated in %.2f s wall)\n", n, wall);
    free(pr);
    free(pts);
    return rc;
}
