/* The engine model against published real-hardware vLLM measurements (docs/fidelity.md).
 *
 *   build/bench/fidelity [--data FILE] [--summary] [--split fit|test] [--detail]
 *                        [--fit | --cv | --cv-select | --lolo] [--free LIST] [--lambda L] [--folds K]
 *                        [--start sourced|tree] [--set NAME=VALUE]... [--sweeps N] [--jobs J]
 *                        [--labs on|off] [--lab-latency cal|default]
 *
 * Runs every point of bench/fidelity/measurements.json through the engine model with the
 * point's exact setup and load, prints the predicted/published ratios for throughput, TTFT
 * p50 and tail (p95, else p99) and TPOT, then the median and worst absolute errors separately
 * for the fit split and the test split.
 *
 * --fit fits the free constants (--free; the model's own set by default) on the fit split only
 * (coordinate descent, emu/fit.h) from their sourced defaults (--start tree: from the values in
 * the tree), with a shrinkage penalty of weight --lambda pulling each towards its sourced
 * default, and prints them as they go into consts.h and the GPU catalog. Constants that are not
 * free stay where --start puts them. The test split is never looked at while fitting.
 *
 * --cv cross-validates that fit WITHIN the fit split: the fit points are dealt into K folds
 * (per GPU, in file order, every K-th point, as the test split itself was dealt), each fold is
 * predicted by a fit on the other K-1, and the held-out errors are pooled: the figure that
 * decides which constants are free (docs/fidelity.md, "Which constants are free").
 * --cv-select runs that decision: forward selection of free constants by cross-validated
 * error, then the shrinkage weight (long: see docs/fidelity.md for its time).
 *
 * Each lab (st_fid_point.lab) with enough fit points that publish a TTFT has its own front-end
 * latency, fe_latency_s@LAB, fitted with the rest; --labs off gives every point the global one
 * (a setup the model has not seen). In --free, NAME@* stands for every per-GPU or per-lab
 * refinement of NAME.
 *
 * --lolo is leave-one-lab-out cross-validation, the figure that measures generalisation: each
 * lab (st_fid_point.lab: one measurement setup) is predicted by a fit on every other lab's
 * points, from the sourced defaults, without its own front-end latency; prints the pooled and
 * per-lab median errors, the per-regime table (short/long context x low/high concurrency x
 * 16-bit/quantised weights, st_fid_point_regime) and every fold's constants on a bound.
 * --lab-latency cal (the default) gives every lab the front-end latency its own calibration
 * point implies (one declared low-load point per lab, not scored; st_fid_lab_cal_point), a lab without
 * one the other labs' median; --lab-latency default gives every lab the global latency.
 * The sourced bw_eff of a GPU whose memory has a published device-copy rate (st_emu_gpu.copy_eff,
 * consts.h EMU_COPY_EFF_*: GDDR6X, HBM2e) is that rate, else EMU_BW_EFF_DEFAULT; a free bw_eff@GPU
 * starts there.
 * --fit prints every constant with its distance from its nearer bound.
 *
 * --split prints one split only (work on the model looks at the fit split's residuals only);
 * --detail adds each point's predicted and published figures. Exit status 0; 2 on bad input. */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/file.h"
#include "emu/calib.h"
#include "emu/consts.h"
#include "fidelity/harness.h"
#include "emu/fit.h"
#include "emu/steptime.h"

#define DATA_MAX (16u << 20)
#define DEFAULT_DATA "bench/fidelity/measurements.json"
#define MAX_KNOBS ST_FIT_MAX_PARAMS
#define MAX_SWEEPS 64
#define MAX_FOLDS 16
#define MAX_JOBS 16
/* A GPU gets its own efficiencies only with at least this many fit points. */
#define FIT_MIN_GPU_POINTS 3
/* A lab gets its own front-end latency only with at least this many fit points with a TTFT. */
#define FIT_MIN_LAB_POINTS 3
/* At most this many GPUs / labs get their own knobs. */
#define MAX_OWN_GPUS 16
#define MAX_OWN_LABS 16
#define KNOB_NAME_MAX 48
#define FREE_LIST_MAX 1024

/* The constants the model leaves free (fitted); every other one stays at its sourced default
 * (or, with --start tree, the tree's value). Issue 21's set: the engine-core and front-end
 * costs, the paged-KV rate, the per-format relative efficiencies (each only moves its own
 * points) and every GPU's GEMM / GEMV efficiencies and lab's latency; attn_eff is sourced (the
 * former fit put it on its bound) and fe_chat_factor keeps its value from issue 10's fit.
 * --cv judges a set within the fit split, --lolo across labs (docs/fidelity.md). */
#define FREE_DEFAULT                                                                                                   \
    "fe_latency_s,fe_latency_s@*,fe_req_cpu_s,fe_token_cpu_s,step_cpu_s,seq_cpu_s,kv_bw_rel,layer_eager_s,fp8_gemm_"   \
    "rel,fp8_bw_rel,marlin_bw_rel,moe_gemm_rel,int4_gemm_rel,gemm_eff@*,bw_eff@*"

typedef struct point_run {
    st_emu_config cfg;
    st_emu_tuning tree; /* the tuning in the tree (consts.h and the catalog) */
    const char *lab;    /* the point's lab (st_fid_point.lab) */
    int cfg_ok;
    char err[512];
    st_fid_figures f;
    st_fid_ratios r;
    double loss;
    double fe_cal; /* --lolo: the lab's front-end latency from its calibration point (NAN: none) */
} point_run;

/* ---- the free constants --------------------------------------------------------------------- */

typedef struct knob {
    char name[KNOB_NAME_MAX];
    size_t offset; /* in st_emu_tuning */
    double lo, hi;
    int log;
    st_fid_scope sc;
    double def;               /* the sourced default */
    const char *why;          /* its source */
    char of[ST_FID_NAME_MAX]; /* per-GPU knobs: the catalog name it applies to; per-lab: the lab */
    int parent;               /* per-GPU / per-lab knobs: the global knob it refines (-1: a global knob) */
    int free;
    double value;
} knob;

#define TUNE(f) offsetof(st_emu_tuning, f)

/* A lab's own front-end latency (st_fid_lab_fe_latency): the fit refines fe_latency_s per lab
 * (fe_latency_s@LAB) for every lab with at least FIT_MIN_LAB_POINTS fit points that publish a
 * TTFT; the values it finds go into bench/fidelity/harness.c's table. */
static double lab_fe(const char *lab) { return lab ? st_fid_lab_fe_latency(lab) : NAN; }

static int has_ttft(const st_fid_point *p)
{
    return isfinite(p->ttft_ms.p50) || isfinite(p->ttft_ms.p95) || isfinite(p->ttft_ms.p99) ||
           isfinite(p->ttft_ms.mean);
}

typedef struct model_knobs {
    knob k[MAX_KNOBS];
    int n;
    int start_tree; /* frozen knobs at the tree's values instead of the sourced defaults */
    double lambda;  /* shrinkage weight */
    double set[MAX_KNOBS];
    int is_set[MAX_KNOBS]; /* --set NAME=VALUE: the knob starts (or stays) there */
    /* warm starts for cross-validation: fold f's fit starts knob i at init[f][i] where warm[i]:
     * WARM_SEARCH searches within WARM_WIDTH of its range around it, WARM_HOLD keeps it there */
    double init[MAX_FOLDS][MAX_KNOBS];
    int warm[MAX_KNOBS];
    /* leave-one-lab-out: fold f holds out lab fold_lab[f]; while a fold is fitted, held_lab is
     * its lab, whose own knobs (fe_latency_s@LAB) neither fit nor apply */
    const char *fold_lab[MAX_FOLDS];
    const char *held_lab;
    /* --lolo --lab-latency cal: each lab's calibration point (st_fid_lab_cal_point; -1: none), whose
     * published TTFT gives the lab its front-end latency (solve_lab_fe) */
    int lab_cal;
    int cal_point[MAX_FOLDS];
    double cal_start[MAX_FOLDS]; /* each lab's latency at the start values (NAN: none) */
} model_knobs;
#define WARM_SEARCH 1
#define WARM_HOLD 2
#define WARM_WIDTH 0.25

static int knob_index(const model_knobs *M, const char *name)
{
    for (int i = 0; i < M->n; i++)
        if (!strcmp(M->k[i].name, name))
            return i;
    return -1;
}

/* The catalog key of a GPU name ("H100 SXM 80GB" -> "H100"). */
static const char *gpu_key(const char *name)
{
    const char *keys[32];
    int nk = st_emu_gpu_keys(keys, 32);
    for (int i = 0; i < nk; i++) {
        st_emu_gpu g;
        char err[128];
        if (st_emu_gpu_find(keys[i], &g, err, sizeof err) == 0 && !strcmp(g.name, name))
            return keys[i];
    }
    return name;
}

/* The global knobs (the harness's sourced defaults, st_fid_sourced_knobs, with emu/calib.c's
 * bounds: what the mechanism allows physically or what published microbenchmarks show), then
 * gemm_eff@GPU and bw_eff@GPU for every GPU with enough fit points. */
static int build_knobs(const st_fid_point *pts, const point_run *pr, uint32_t n, int no_labs, model_knobs *M)
{
    memset(M, 0, sizeof *M);
    int ng;
    const st_fid_sourced *src = st_fid_sourced_knobs(&ng);
    for (int i = 0; i < ng && M->n < MAX_KNOBS; i++) {
        knob *k = &M->k[M->n++];
        snprintf(k->name, sizeof k->name, "%s", src[i].name);
        k->offset = src[i].offset;
        k->sc = src[i].scope;
        k->def = src[i].def;
        k->why = src[i].why;
        k->parent = -1;
        const st_calib_knob *ck = st_calib_knob_find(k->name);
        if (!ck) {
            fprintf(stderr, "fidelity: no bounds for %s in emu/calib.c\n", k->name);
            return -1;
        }
        k->lo = ck->lo;
        k->hi = ck->hi;
        k->log = ck->log;
    }
    const char *seen[MAX_OWN_GPUS];
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
        if (dup || ns == MAX_OWN_GPUS || M->n + 2 > MAX_KNOBS || count < FIT_MIN_GPU_POINTS)
            continue;
        seen[ns++] = pr[i].cfg.gpu.name;
        for (int e = 0; e < 2; e++) {
            int parent = knob_index(M, e ? "bw_eff" : "gemm_eff");
            knob *k = &M->k[M->n++];
            *k = M->k[parent];
            snprintf(k->name, sizeof k->name, "%s@%s", e ? "bw_eff" : "gemm_eff", gpu_key(pr[i].cfg.gpu.name));
            snprintf(k->of, sizeof k->of, "%s", pr[i].cfg.gpu.name);
            k->sc = ST_FID_SCOPE_GPU;
            k->parent = parent;
            k->why = "this GPU's own value (shrunk towards the global one)";
            if (e && pr[i].cfg.gpu.copy_eff > 0) {
                k->def = pr[i].cfg.gpu.copy_eff; /* its memory's published copy rate (consts.h) */
                k->why = "this GPU's memory: a published device copy's fraction of the peak (consts.h EMU_COPY_EFF_*)";
            }
        }
    }
    /* fe_latency_s@LAB for every lab with enough fit points that publish a TTFT */
    const char *labs[MAX_OWN_LABS];
    int nl = 0;
    for (uint32_t i = 0; i < n && !no_labs; i++) {
        if (pts[i].split != ST_FID_FIT || !pr[i].cfg_ok || !has_ttft(&pts[i]))
            continue;
        int dup = 0;
        for (int j = 0; j < nl; j++)
            dup |= !strcmp(labs[j], pts[i].lab);
        uint32_t count = 0;
        for (uint32_t j = 0; j < n; j++)
            count += pts[j].split == ST_FID_FIT && pr[j].cfg_ok && has_ttft(&pts[j]) && !strcmp(pts[j].lab, pts[i].lab);
        if (dup || nl == MAX_OWN_LABS || M->n + 1 > MAX_KNOBS || count < FIT_MIN_LAB_POINTS)
            continue;
        /* named by the repository's owner, or by the whole lab when two labs share an owner */
        char name[KNOB_NAME_MAX];
        size_t owner = strcspn(pts[i].lab, "/");
        snprintf(name, sizeof name, "fe_latency_s@%.*s", (int)(owner < 34 ? owner : 34), pts[i].lab);
        if (knob_index(M, name) >= 0)
            snprintf(name, sizeof name, "fe_latency_s@%.34s", pts[i].lab);
        if (knob_index(M, name) >= 0) {
            fprintf(stderr, "fidelity: lab %s: its knob's name is taken; it keeps the global latency\n", pts[i].lab);
            continue;
        }
        labs[nl++] = pts[i].lab;
        int parent = knob_index(M, "fe_latency_s");
        knob *k = &M->k[M->n++];
        *k = M->k[parent];
        snprintf(k->name, sizeof k->name, "%s", name);
        snprintf(k->of, sizeof k->of, "%s", pts[i].lab);
        k->sc = ST_FID_SCOPE_LAB;
        k->parent = parent;
        k->why = "this lab's own fixed latency (its client and network path)";
    }
    return 0;
}

/* --free LIST: comma-separated knob names, or "all" / "none". 0, or -1 with the bad name. */
static int set_free(model_knobs *M, const char *list, char *bad, size_t badlen)
{
    for (int i = 0; i < M->n; i++)
        M->k[i].free = 0;
    if (!strcmp(list, "none"))
        return 0;
    if (!strcmp(list, "all")) {
        for (int i = 0; i < M->n; i++)
            M->k[i].free = 1;
        return 0;
    }
    char buf[FREE_LIST_MAX];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        size_t tl = strlen(tok);
        if (tl > 2 && !strcmp(tok + tl - 2, "@*")) {
            /* NAME@*: every per-GPU / per-lab refinement of NAME */
            tok[tl - 2] = 0;
            int parent = knob_index(M, tok);
            if (parent < 0) {
                snprintf(bad, badlen, "%s@*", tok);
                return -1;
            }
            for (int j = 0; j < M->n; j++)
                if (M->k[j].parent == parent)
                    M->k[j].free = 1;
            continue;
        }
        int i = knob_index(M, tok);
        if (i < 0) {
            snprintf(bad, badlen, "%s", tok);
            return -1;
        }
        M->k[i].free = 1;
    }
    return 0;
}

static void free_list(const model_knobs *M, char *out, size_t len)
{
    size_t used = 0;
    out[0] = 0;
    for (int i = 0; i < M->n && used + 1 < len; i++)
        if (M->k[i].free) {
            int w = snprintf(out + used, len - used, "%s%s", used ? "," : "", M->k[i].name);
            if (w < 0)
                break;
            used += (size_t)w < len - used ? (size_t)w : len - used - 1;
        }
    if (!out[0])
        snprintf(out, len, "none");
}

static int knob_count_free(const model_knobs *M)
{
    int c = 0;
    for (int i = 0; i < M->n; i++)
        c += M->k[i].free;
    return c;
}

/* Where every knob starts (and where a frozen one stays): its sourced default, or with
 * start_tree the value in the tree (a per-GPU knob: that GPU's catalog value). */
static void reset_values(model_knobs *M, const point_run *pr, uint32_t n)
{
    for (int i = 0; i < M->n; i++) {
        knob *k = &M->k[i];
        k->value = k->def; /* a per-GPU knob: the global one's, or its memory's copy rate */
        if (!M->start_tree)
            continue;
        if (k->sc == ST_FID_SCOPE_LAB && isfinite(lab_fe(k->of))) {
            k->value = lab_fe(k->of);
            continue;
        }
        for (uint32_t j = 0; j < n; j++) {
            if (!pr[j].cfg_ok || (k->sc == ST_FID_SCOPE_GPU && strcmp(pr[j].cfg.gpu.name, k->of)))
                continue;
            /* the product's value (pr->tree also holds the point's lab's own latency) */
            st_emu_tuning product;
            st_emu_tuning_defaults(&product, &pr[j].cfg.gpu);
            k->value = *(const double *)((const char *)&product + k->offset);
            break;
        }
    }
    for (int i = 0; i < M->n; i++)
        if (M->is_set[i])
            M->k[i].value = M->set[i];
}

static int affects(const knob *k, const point_run *pr)
{
    switch (k->sc) {
    case ST_FID_SCOPE_ALL: return 1;
    case ST_FID_SCOPE_GPU: return !strcmp(pr->cfg.gpu.name, k->of);
    case ST_FID_SCOPE_LAB: return !strcmp(pr->lab, k->of);
    case ST_FID_SCOPE_FP8: return pr->cfg.weight_dtype == ST_EMU_FP8 && pr->cfg.gpu.fp8_flops > 0;
    case ST_FID_SCOPE_MARLIN: return st_emu_marlin_weights(&pr->cfg);
    case ST_FID_SCOPE_EAGER: return pr->cfg.enforce_eager; /* steps beyond the graph sizes launch at a fixed cost */
    case ST_FID_SCOPE_MOE: return pr->cfg.model.experts > 0;
    }
    return 1;
}

/* The point's tuning under the knobs' current values. gemm_eff / bw_eff: the GPU's own knob when
 * free, else the global knob when free, else the start (the GPU's tree value, or the default).
 * fe_latency_s: the lab's own knob when free, set, or in the tree (st_fid_lab_fe_latency), else
 * the global one. */
static void apply(const model_knobs *M, point_run *pr)
{
    st_emu_tuning *t = &pr->cfg.tune;
    *t = pr->tree;
    for (int i = 0; i < M->n; i++) {
        const knob *k = &M->k[i];
        if (k->parent >= 0)
            continue;
        double v = k->value;
        if (k->offset == TUNE(gemm_eff) || k->offset == TUNE(bw_eff)) {
            if (!k->free && !M->is_set[i] && M->start_tree)
                v = *(const double *)((const char *)&pr->tree + k->offset);
            else if (!k->free && !M->is_set[i] && k->offset == TUNE(bw_eff) && pr->cfg.gpu.copy_eff > 0)
                v = pr->cfg.gpu.copy_eff; /* the sourced value: its memory's published copy rate */
        }
        for (int j = 0; j < M->n; j++) {
            const knob *c = &M->k[j];
            int own =
                c->free || M->is_set[j] || (c->sc == ST_FID_SCOPE_LAB && M->start_tree && isfinite(lab_fe(c->of)));
            if (c->sc == ST_FID_SCOPE_LAB && M->held_lab && !strcmp(c->of, M->held_lab))
                own = 0; /* the held-out lab's own latency is not known */
            if (c->parent == i && own && affects(c, pr))
                v = c->value;
        }
        *(double *)((char *)t + k->offset) = v;
    }
    if (isfinite(pr->fe_cal))
        t->fe_latency_s = pr->fe_cal; /* --lolo: the lab's calibration input */
}

/* The shrinkage penalty: lambda x the sum over free knobs of ((u - u0) / s)^2, u in search units
 * (log for log knobs), u0 the sourced default (a per-GPU knob: the global knob's value), s a
 * quarter of the knob's range. */
static double penalty(const model_knobs *M)
{
    if (M->lambda <= 0)
        return 0;
    double sum = 0;
    for (int i = 0; i < M->n; i++) {
        const knob *k = &M->k[i];
        if (!k->free)
            continue;
        double c = k->parent >= 0 ? M->k[k->parent].value : k->def;
        double u = k->log ? log(k->value) : k->value, u0 = k->log ? log(c) : c;
        double s = ((k->log ? log(k->hi) - log(k->lo) : k->hi - k->lo)) / 4;
        sum += (u - u0) * (u - u0) / (s * s);
    }
    return M->lambda * sum;
}

/* ---- running the points ----------------------------------------------------------------------- */

typedef struct harness {
    const st_fid_point *pts;
    point_run *pr;
    uint32_t n;
    st_fid_figures *sweep_buf; /* n entries, for st_fid_predict_sweep */
} harness;

static void finish_point(const st_fid_point *p, point_run *pr, int rc, const char *err)
{
    if (rc < 0) {
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

static void unpredicted(point_run *pr)
{
    memset(&pr->r, 0, sizeof pr->r);
    for (int m = 0; m < ST_FID_M_COUNT; m++)
        pr->r.r[m] = NAN;
    pr->loss = ST_FID_REFUSED_LOSS;
}

/* Reruns the points with want[i] set (a point of a sweep reruns its whole sweep, once, and every
 * point of it gets its figures). */
static void run_points(harness *H, const unsigned char *want)
{
    const st_fid_point *pts = H->pts;
    unsigned char done[MAX_SWEEPS] = { 0 };
    for (uint32_t i = 0; i < H->n; i++) {
        if (!want[i])
            continue;
        point_run *pr = &H->pr[i];
        if (!pr->cfg_ok) {
            unpredicted(pr);
            continue;
        }
        char err[512] = "";
        int s = pts[i].sweep;
        if (s >= 0 && s < MAX_SWEEPS) {
            if (done[s])
                continue;
            done[s] = 1;
            int rc = st_fid_predict_sweep(pts, H->n, s, &pr->cfg, H->sweep_buf, err, sizeof err);
            for (uint32_t j = 0; j < H->n; j++)
                if (pts[j].sweep == s && H->pr[j].cfg_ok) {
                    H->pr[j].f = H->sweep_buf[j];
                    if (rc < 0)
                        H->pr[j].f.refused = 1;
                    finish_point(&pts[j], &H->pr[j], rc, err);
                }
        } else {
            int rc = st_fid_predict_in(pts, H->n, i, &pr->cfg, &pr->f, err, sizeof err);
            finish_point(&pts[i], pr, rc, err);
        }
    }
}

static void run_all(harness *H)
{
    unsigned char *want = malloc(H->n ? H->n : 1);
    if (!want)
        return;
    memset(want, 1, H->n);
    run_points(H, want);
    free(want);
}

/* ---- printing -------------------------------------------------------------------------------- */

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

static void print_row(const st_fid_point *p, uint32_t i, const st_fid_ratios *r, const char *tag, const char *err)
{
    char a[16], b[16], c[16], d[16];
    fmt_ratio(a, sizeof a, r->r[ST_FID_M_THROUGHPUT]);
    fmt_ratio(b, sizeof b, r->r[ST_FID_M_TTFT_P50]);
    fmt_ratio(c, sizeof c, r->r[ST_FID_M_TTFT_TAIL]);
    fmt_ratio(d, sizeof d, r->r[ST_FID_M_TPOT]);
    printf("%-3u %-54.54s %-4s %8s %8s %8s %8s  %s/%s/%s/%s%s%s\n", i + 1, p->id, tag, a, b, c, d,
           r->which[0] ? r->which[0] : "-", r->which[1] ? r->which[1] : "-", r->which[2] ? r->which[2] : "-",
           r->which[3] ? r->which[3] : "-", err && err[0] ? "  " : "", err ? err : "");
}

static void print_points(const st_fid_point *pts, const point_run *pr, uint32_t n, int only_split, int detail)
{
    printf("%-3s %-54s %-4s %8s %8s %8s %8s  %s\n", "#", "point", "split", "thrpt", "ttft50", "ttft_t", "tpot",
           "(predicted/published; published figure used)");
    for (uint32_t i = 0; i < n; i++) {
        if (only_split >= 0 && pts[i].split != (st_fid_split)only_split)
            continue;
        print_row(&pts[i], i, &pr[i].r, pts[i].split == ST_FID_TEST ? "test" : "fit", pr[i].err);
        if (detail)
            print_detail(&pts[i], &pr[i]);
    }
}

/* The memory plan against the servers' startup logs ("GPU KV cache size: N tokens"), once per
 * setup that publishes it: the KV cache the model sizes bounds every batch it predicts. */
static void print_memory(const st_fid_point *pts, const point_run *pr, uint32_t n)
{
    int header = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!isfinite(pts[i].kv_tokens) || !(pr[i].f.kv_tokens > 0))
            continue;
        int seen = 0;
        for (uint32_t j = 0; j < i && !seen; j++)
            seen = isfinite(pts[j].kv_tokens) && pts[j].kv_tokens == pts[i].kv_tokens &&
                   !strcmp(pts[j].model, pts[i].model) && !strcmp(pts[j].gpu, pts[i].gpu);
        if (seen)
            continue;
        if (!header) {
            printf("\nmemory plan (KV cache tokens, predicted / published; first point of each setup):\n");
            header = 1;
        }
        printf("  %-3u %-54.54s %9.0f / %-9.0f %6.3f\n", i + 1, pts[i].id, pr[i].f.kv_tokens, pts[i].kv_tokens,
               pr[i].f.kv_tokens / pts[i].kv_tokens);
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
        printf("  %-11s %4s %12s %13s %12s  %-10s %s\n", "metric", "n", "median |err|", "95 % CI", "worst |err|",
               "target", "worst point");
        for (int m = 0; m < ST_FID_M_COUNT; m++) {
            st_fid_stat s;
            st_fid_summarise(pts, rs, n, (st_fid_split)split, m, &s);
            char ci[32] = "-";
            if (isfinite(s.median_lo))
                snprintf(ci, sizeof ci, "%.1f-%.1f%%", 100 * s.median_lo, 100 * s.median_hi);
            printf("  %-11s %4u %11.1f%% %13s %11.1f%%  %-10s %s\n", st_fid_metric_name(m), s.n, 100 * s.median_abs, ci,
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

/* ---- fitting --------------------------------------------------------------------------------- */

typedef struct fit_ctx {
    harness *H;
    model_knobs *M;
    const unsigned char *train; /* the points the loss is summed over */
    int map[MAX_KNOBS];         /* minimiser parameter -> knob */
    int k;
    int calls;
    int quiet;
    unsigned char *want;
} fit_ctx;

static double objective(void *arg, const double *x, int moved)
{
    fit_ctx *C = arg;
    harness *H = C->H;
    for (int i = 0; i < C->k; i++)
        C->M->k[C->map[i]].value = x[i];
    const knob *mk = moved >= 0 ? &C->M->k[C->map[moved]] : NULL;
    for (uint32_t i = 0; i < H->n; i++) {
        C->want[i] = 0;
        if (!C->train[i] || !H->pr[i].cfg_ok)
            continue;
        if (!mk || affects(mk, &H->pr[i])) {
            apply(C->M, &H->pr[i]);
            C->want[i] = 1;
        }
    }
    run_points(H, C->want);
    double total = 0;
    for (uint32_t i = 0; i < H->n; i++)
        if (C->train[i] && H->pr[i].cfg_ok)
            total += H->pr[i].loss;
    total += penalty(C->M);
    C->calls++;
    if (!C->quiet && C->calls % 25 == 0)
        fprintf(stderr, "  [%d evaluations] loss %.4f\n", C->calls, total);
    return total;
}

/* Fits the free knobs on the points with train[i] set, from the knobs' current values. Leaves
 * the knobs at the best values and every point's tuning applied (and, when run_after, every
 * point rerun). Returns the penalised training loss, NAN on failure. */
static double fit(harness *H, model_knobs *M, const unsigned char *train, int sweeps, int quiet, st_fit_result *res)
{
    fit_ctx C;
    memset(&C, 0, sizeof C);
    C.H = H;
    C.M = M;
    C.train = train;
    C.quiet = quiet;
    C.want = malloc(H->n ? H->n : 1);
    if (!C.want)
        return NAN;
    st_fit_param p[MAX_KNOBS];
    for (int i = 0; i < M->n; i++)
        if (M->k[i].free) {
            const knob *k = &M->k[i];
            p[C.k] = (st_fit_param){ k->name,
                                     k->value,
                                     k->lo,
                                     k->hi,
                                     k->log,
                                     M->warm[i] == WARM_HOLD,
                                     M->warm[i] == WARM_SEARCH ? WARM_WIDTH : 0 };
            C.map[C.k++] = i;
        }
    for (uint32_t i = 0; i < H->n; i++)
        if (H->pr[i].cfg_ok)
            apply(M, &H->pr[i]);
    double loss = NAN;
    if (C.k == 0) {
        loss = objective(&C, NULL, -1);
        if (res)
            *res = (st_fit_result){ loss, loss, 1, 0 };
    } else if (st_fit_minimise(p, C.k, objective, &C, sweeps, res) == 0) {
        for (int i = 0; i < C.k; i++)
            M->k[C.map[i]].value = p[i].value;
        loss = res->loss;
    }
    for (uint32_t i = 0; i < H->n; i++)
        if (H->pr[i].cfg_ok)
            apply(M, &H->pr[i]);
    free(C.want);
    return loss;
}

/* How far v sits from the nearer bound of k, as a fraction of its range (search units: log for
 * log knobs); 0 = on a bound. */
static double bound_distance(const knob *k, double v)
{
    double lo = k->log ? log(k->lo) : k->lo, hi = k->log ? log(k->hi) : k->hi, u = k->log ? log(v) : v;
    if (!(hi > lo))
        return NAN;
    double d = (u - lo) < (hi - u) ? (u - lo) : (hi - u);
    return d / (hi - lo);
}

/* Every knob with its bounds and its distance from the nearer one; a free knob within
 * ST_FID_BOUND_NEAR of a bound is flagged, with the documented reason where there is one
 * (st_fid_bound_reason). Returns the number of free knobs on a bound without a reason. */
static int print_knobs(const model_knobs *M, int all)
{
    int unexplained = 0;
    printf("  %-26s %-7s %-11s %-21s %-9s %s\n", "constant", "", "value", "bounds", "to bound",
           "(sourced default: source)");
    for (int i = 0; i < M->n; i++) {
        const knob *k = &M->k[i];
        if (!all && !k->free)
            continue;
        double d = bound_distance(k, k->value);
        char range[48];
        snprintf(range, sizeof range, "[%.3g, %.3g]", k->lo, k->hi);
        printf("  %-26s %-7s %-11.6g %-21s %7.1f%%  (sourced default %.6g: %s)\n", k->name, k->free ? "FREE" : "frozen",
               k->value, range, 100 * d, k->def, k->why);
        if (k->free && d < ST_FID_BOUND_NEAR) {
            const char *why = st_fid_bound_reason(k->name);
            printf("      ON ITS BOUND: %s\n",
                   why ? why : "no documented reason (the fit absorbs a missing mechanism)");
            unexplained += !why;
        }
    }
    return unexplained;
}

static int do_fit(harness *H, model_knobs *M, int sweeps)
{
    unsigned char *train = calloc(H->n ? H->n : 1, 1);
    if (!train)
        return -1;
    for (uint32_t i = 0; i < H->n; i++)
        train[i] = H->pts[i].split == ST_FID_FIT;
    reset_values(M, H->pr, H->n);
    st_fit_result res = { 0 };
    st_ns t0 = st_now();
    double loss = fit(H, M, train, sweeps, 0, &res);
    free(train);
    if (!isfinite(loss)) {
        fprintf(stderr, "fit: the starting point is unusable\n");
        return -1;
    }
    run_all(H);
    char fl[FREE_LIST_MAX];
    free_list(M, fl, sizeof fl);
    printf("fit on the fit split (%d free, lambda %g, from the %s values): loss %.4f -> %.4f (penalty %.4f), %d "
           "evaluations, %d sweeps, %.0f s\n",
           knob_count_free(M), M->lambda, M->start_tree ? "tree's" : "sourced", res.loss0, res.loss, penalty(M),
           res.evaluations, res.sweeps, (st_now() - t0) / 1e9);
    printf("  free: %s\n", fl);
    int on_bound = print_knobs(M, 1);
    printf("  free constants on a bound without a documented reason: %d\n", on_bound);
    return 0;
}

/* ---- cross-validation within the fit split ---------------------------------------------------- */

/* Fold of every fit point: per GPU, in file order, the j-th fit point of its GPU goes to fold
 * j mod K (how the test split itself was dealt, one in three per GPU); -1 for test points. */
static void assign_folds(const st_fid_point *pts, const point_run *pr, uint32_t n, int K, int *fold)
{
    for (uint32_t i = 0; i < n; i++) {
        fold[i] = -1;
        if (pts[i].split != ST_FID_FIT)
            continue;
        int j = 0;
        for (uint32_t m = 0; m < i; m++)
            j += pts[m].split == ST_FID_FIT && !strcmp(pr[m].cfg.gpu.name, pr[i].cfg.gpu.name);
        fold[i] = j % K;
    }
}

typedef struct cv_result {
    double median[ST_FID_M_COUNT];
    double score;        /* the mean robust loss per held-out point: what selection compares */
    double heldout_loss; /* the same */
    double median_sum;   /* the sum of the four pooled held-out median errors */
    double fold_value[MAX_FOLDS][MAX_KNOBS];
    double fold_train_loss[MAX_FOLDS];
    double fold_lab_fe[MAX_FOLDS];
    int fold_n[MAX_FOLDS];
    st_fid_ratios *r; /* n entries: each fit point's held-out ratios */
} cv_result;

/* What a fold's worker sends back. */
typedef struct fold_msg {
    int fold;
    double value[MAX_KNOBS];
    double train_loss;
    double lab_fe; /* --lolo --lab-latency cal: the held-out lab's latency (NAN: off) */
} fold_msg;
typedef struct point_msg {
    uint32_t index;
    double r[ST_FID_M_COUNT];
} point_msg;

/* ---- a lab's own latency, from its calibration point (--lolo --lab-latency cal) ---------------
 * The fixed latency a request spends outside the engine core is partly the measurement setup's
 * (its client, proxy and network path: 2-48 ms across the labs here, docs/fidelity.md "The lab's
 * own latency"), and no other lab's data can say what a new lab's is. A user has the same
 * problem and the same answer: one low-load measurement of their own setup (`servetune
 * calibrate`). So each lab gives one declared calibration input, its calibration point
 * (st_fid_lab_cal_point); the lab's latency is the one at which the model, with the fold's
 * constants, reproduces that point's TTFT (st_fid_solve_lab_latency), and the point itself is
 * not scored. A lab without one gets the median of the other labs' calibrated latencies. */

static double solve_lab_fe(harness *H, const model_knobs *M, uint32_t ci)
{
    char err[512] = "";
    H->pr[ci].fe_cal = NAN;
    apply(M, &H->pr[ci]);
    return st_fid_solve_lab_latency(H->pts, H->n, ci, &H->pr[ci].cfg, err, sizeof err);
}

/* Gives every point of fold g's lab the latency x (NAN: none) under the knobs' current values. */
static void set_lab_fe(harness *H, const model_knobs *M, const int *fold, int g, double x)
{
    for (uint32_t i = 0; i < H->n; i++)
        if (fold[i] == g) {
            H->pr[i].fe_cal = x;
            if (H->pr[i].cfg_ok)
                apply(M, &H->pr[i]);
        }
}

/* Solves fold g's lab's latency from its calibration point under the knobs' current values and
 * gives it to the lab's points; `fallback` where the lab has none. Returns the latency. */
static double calibrate_lab(harness *H, const model_knobs *M, const int *fold, int g, double fallback)
{
    int ci = M->cal_point[g];
    double x = ci >= 0 ? solve_lab_fe(H, M, (uint32_t)ci) : NAN;
    if (!isfinite(x))
        x = fallback;
    set_lab_fe(H, M, fold, g, x);
    return x;
}

/* One fold: fit on the other folds' points, predict this fold's. */
static int run_fold(harness *H, model_knobs *M, const int *fold, int f, int sweeps, fold_msg *fm, point_msg *out,
                    uint32_t *nout)
{
    unsigned char *train = calloc(H->n ? H->n : 1, 1), *held = calloc(H->n ? H->n : 1, 1);
    if (!train || !held) {
        free(train);
        free(held);
        return -1;
    }
    for (uint32_t i = 0; i < H->n; i++) {
        train[i] = fold[i] >= 0 && fold[i] != f;
        held[i] = fold[i] == f;
    }
    reset_values(M, H->pr, H->n);
    for (int i = 0; i < M->n; i++)
        if (M->warm[i] && M->k[i].free)
            M->k[i].value = M->init[f][i];
    M->held_lab = M->fold_lab[f];
    fm->lab_fe = NAN;
    double cal_median = NAN;
    if (M->lab_cal) {
        /* every other lab's latency from its calibration point at the start values; their
         * median is the latency of a lab without one */
        double v[MAX_FOLDS];
        uint32_t nv = 0;
        for (uint32_t i = 0; i < H->n; i++)
            H->pr[i].fe_cal = NAN;
        for (int g = 0; g < MAX_FOLDS && M->fold_lab[g]; g++) {
            if (g == f || !isfinite(M->cal_start[g]))
                continue;
            set_lab_fe(H, M, fold, g, M->cal_start[g]);
            v[nv++] = M->cal_start[g];
        }
        cal_median = st_fid_median(v, nv);
    }
    st_fit_result res;
    double loss = fit(H, M, train, sweeps, 1, &res);
    if (M->lab_cal)
        fm->lab_fe = calibrate_lab(H, M, fold, f, cal_median); /* the held-out lab's, with the fold's constants */
    run_points(H, held);
    M->held_lab = NULL;
    fm->fold = f;
    fm->train_loss = loss;
    for (int i = 0; i < M->n; i++)
        fm->value[i] = M->k[i].value;
    *nout = 0;
    for (uint32_t i = 0; i < H->n; i++)
        if (held[i]) {
            out[*nout].index = i;
            memcpy(out[*nout].r, H->pr[i].r.r, sizeof out[*nout].r);
            if (M->lab_cal && (int)i == M->cal_point[f])
                for (int m = 0; m < ST_FID_M_COUNT; m++)
                    out[*nout].r[m] = NAN; /* a calibration input, not scored */
            (*nout)++;
        }
    free(train);
    free(held);
    return isfinite(loss) ? 0 : -1;
}

/* K-fold cross-validation of the knobs' free set and lambda; jobs folds at once (fork). With
 * folds_in (each point's fold, -1 for none): those folds instead of assign_folds' (--lolo). */
static int cross_validate(harness *H, model_knobs *M, int K, int sweeps, int jobs, cv_result *cv, const int *folds_in)
{
    int *fold = malloc((H->n ? H->n : 1) * sizeof *fold);
    point_msg *pm = malloc((H->n ? H->n : 1) * sizeof *pm);
    if (!fold || !pm) {
        free(fold);
        free(pm);
        return -1;
    }
    if (folds_in)
        memcpy(fold, folds_in, H->n * sizeof *fold);
    else
        assign_folds(H->pts, H->pr, H->n, K, fold);
    for (uint32_t i = 0; i < H->n; i++)
        for (int m = 0; m < ST_FID_M_COUNT; m++) {
            cv->r[i].r[m] = NAN;
            cv->r[i].which[m] = NULL;
        }
    int rc = 0;
    if (jobs <= 1) {
        for (int f = 0; f < K && rc == 0; f++) {
            fold_msg fm;
            uint32_t np = 0;
            rc = run_fold(H, M, fold, f, sweeps, &fm, pm, &np);
            for (int i = 0; i < M->n; i++)
                cv->fold_value[f][i] = fm.value[i];
            cv->fold_train_loss[f] = fm.train_loss;
            cv->fold_lab_fe[f] = fm.lab_fe;
            cv->fold_n[f] = (int)np;
            for (uint32_t j = 0; j < np; j++)
                memcpy(cv->r[pm[j].index].r, pm[j].r, sizeof pm[j].r);
        }
    } else {
        int next = 0, running = 0, fds[MAX_FOLDS];
        pid_t pids[MAX_FOLDS];
        for (int f = 0; f < K; f++)
            pids[f] = -1;
        while ((next < K || running > 0) && rc == 0) {
            while (next < K && running < jobs) {
                int p[2];
                if (pipe(p) < 0) {
                    rc = -1;
                    break;
                }
                fflush(NULL);
                pid_t pid = fork();
                if (pid < 0) {
                    close(p[0]);
                    close(p[1]);
                    rc = -1;
                    break;
                }
                if (pid == 0) {
                    close(p[0]);
                    fold_msg fm;
                    uint32_t np = 0;
                    int r = run_fold(H, M, fold, next, sweeps, &fm, pm, &np);
                    int ok = r == 0 && st_fd_write_all(p[1], &fm, sizeof fm) == 0 &&
                             st_fd_write_all(p[1], &np, sizeof np) == 0 &&
                             st_fd_write_all(p[1], pm, np * sizeof *pm) == 0;
                    _exit(ok ? 0 : 1);
                }
                close(p[1]);
                fds[next] = p[0];
                pids[next] = pid;
                next++;
                running++;
            }
            /* collect the oldest running fold */
            int f = -1;
            for (int j = 0; j < K && f < 0; j++)
                if (pids[j] > 0)
                    f = j;
            if (f < 0)
                break;
            fold_msg fm;
            uint32_t np = 0;
            if (st_fd_read_all(fds[f], &fm, sizeof fm) < 0 || st_fd_read_all(fds[f], &np, sizeof np) < 0 || np > H->n ||
                st_fd_read_all(fds[f], pm, np * sizeof *pm) < 0)
                rc = -1;
            close(fds[f]);
            int st = 0;
            waitpid(pids[f], &st, 0);
            pids[f] = 0;
            running--;
            if (rc == 0) {
                for (int i = 0; i < M->n; i++)
                    cv->fold_value[f][i] = fm.value[i];
                cv->fold_train_loss[f] = fm.train_loss;
                cv->fold_lab_fe[f] = fm.lab_fe;
                cv->fold_n[f] = (int)np;
                for (uint32_t j = 0; j < np; j++)
                    memcpy(cv->r[pm[j].index].r, pm[j].r, sizeof pm[j].r);
            }
        }
        for (int f = 0; f < K; f++)
            if (pids[f] > 0) {
                close(fds[f]);
                waitpid(pids[f], NULL, 0);
            }
    }
    /* pooled held-out figures */
    double *v = malloc((H->n ? H->n : 1) * sizeof *v);
    if (!v)
        rc = -1;
    cv->median_sum = 0;
    for (int m = 0; m < ST_FID_M_COUNT && v; m++) {
        uint32_t k = 0;
        for (uint32_t i = 0; i < H->n; i++)
            if (fold[i] >= 0 && isfinite(cv->r[i].r[m]))
                v[k++] = fabs(cv->r[i].r[m] - 1);
        cv->median[m] = st_fid_median(v, k);
        cv->median_sum += cv->median[m];
    }
    double lsum = 0;
    uint32_t ln = 0;
    for (uint32_t i = 0; i < H->n; i++)
        if (fold[i] >= 0) {
            lsum += st_fid_loss(&cv->r[i], 0);
            ln++;
        }
    cv->heldout_loss = ln ? lsum / ln : NAN;
    cv->score = cv->heldout_loss;
    free(v);
    free(fold);
    free(pm);
    return rc;
}

static void print_cv(const harness *H, const model_knobs *M, int K, const cv_result *cv, int detail)
{
    char fl[FREE_LIST_MAX];
    free_list(M, fl, sizeof fl);
    printf("cross-validation within the fit split: %d folds (per GPU, every %d-th fit point), lambda %g, from the %s "
           "values\n  free (%d): %s\n",
           K, K, M->lambda, M->start_tree ? "tree's" : "sourced", knob_count_free(M), fl);
    printf("  %-5s %9s %11s", "fold", "held out", "train loss");
    for (int i = 0; i < M->n; i++)
        if (M->k[i].free)
            printf(" %s", M->k[i].name);
    printf("\n");
    for (int f = 0; f < K; f++) {
        printf("  %-5d %9d %11.4f", f, cv->fold_n[f], cv->fold_train_loss[f]);
        for (int i = 0; i < M->n; i++)
            if (M->k[i].free)
                printf(" %.4g", cv->fold_value[f][i]);
        printf("\n");
    }
    if (detail) {
        printf("  held-out ratios (predicted/published, each point predicted by the fit without its fold):\n");
        for (uint32_t i = 0; i < H->n; i++)
            if (H->pts[i].split == ST_FID_FIT) {
                st_fid_ratios r = cv->r[i], w;
                st_fid_figures one = { 0 };
                one.req_s = one.out_tok_s = one.total_tok_s = 1;
                one.ttft_ms = one.tpot_ms = (st_fid_dist){ 1, 1, 1, 1 };
                st_fid_compare(&H->pts[i], &one, &w); /* which published figure each metric uses */
                for (int m = 0; m < ST_FID_M_COUNT; m++)
                    r.which[m] = w.which[m];
                print_row(&H->pts[i], i, &r, "cv", NULL);
            }
    }
    printf("  CV (pooled held-out) median |err|: throughput %.1f %%, ttft_p50 %.1f %%, ttft_tail %.1f %%, tpot %.1f "
           "%%; sum %.1f %%; held-out loss %.4f per point\n",
           100 * cv->median[0], 100 * cv->median[1], 100 * cv->median[2], 100 * cv->median[3], 100 * cv->median_sum,
           cv->heldout_loss);
}

/* --cv-select: forward selection. From nothing free, each round frees the knob whose freeing
 * lowers the CV loss (the fit's robust loss, per held-out point: smooth where the medians the
 * targets are stated in move in steps) the most, and stops when none lowers it by at least
 * CV_MIN_GAIN (about 1 %). The first round tries every knob from its
 * sourced default; later rounds screen the CV_KEEP knobs that did best in the round before,
 * each fold fitting only the new knob (from its default) with the knobs chosen so far held at
 * that fold's values; the pick is then refit jointly (warm-started) for its CV score and the
 * next round's values. Then the shrinkage weight is chosen from CV_LAMBDAS on the selected set
 * (full fits from the defaults). Every figure is printed as it comes. */
#define CV_MIN_GAIN 0.0005
#define CV_KEEP 8
static const double CV_LAMBDAS[] = { 0, 0.001, 0.003, 0.01, 0.03 };

static void print_cv_line(const char *what, const cv_result *cv, double secs)
{
    printf("select: %-34s CV loss %.4f (medians tput %.1f ttft50 %.1f tail %.1f tpot %.1f, sum %.1f %%) %.0f s\n", what,
           cv->score, 100 * cv->median[0], 100 * cv->median[1], 100 * cv->median[2], 100 * cv->median[3],
           100 * cv->median_sum, secs);
    fflush(stdout);
}

/* One cross-validation, timed and printed as "select: WHAT ...". */
static int cv_run(harness *H, model_knobs *M, int K, int sweeps, int jobs, cv_result *cv, const char *what)
{
    st_ns t0 = st_now();
    if (cross_validate(H, M, K, sweeps, jobs, cv, NULL) < 0)
        return -1;
    print_cv_line(what, cv, (st_now() - t0) / 1e9);
    return 0;
}

/* Every fold starts from vals; the free knobs but `except` are held (WARM_HOLD) or searched
 * near their start (WARM_SEARCH) after the first round. */
static void warm_start(model_knobs *M, double (*vals)[MAX_KNOBS], int K, int except, int round, int mode)
{
    for (int f = 0; f < K; f++)
        for (int j = 0; j < M->n; j++)
            M->init[f][j] = vals[f][j];
    for (int j = 0; j < M->n; j++)
        M->warm[j] = M->k[j].free && j != except && round > 1 ? mode : 0;
}

static int cv_select(harness *H, model_knobs *M, int K, int sweeps, int jobs)
{
    int rc = -1;
    cv_result cv;
    memset(&cv, 0, sizeof cv);
    cv.r = calloc(H->n ? H->n : 1, sizeof *cv.r);
    double *score = calloc(MAX_KNOBS, sizeof *score);
    double(*best_vals)[MAX_KNOBS] = calloc(MAX_FOLDS, sizeof *best_vals);
    char what[96], fl[FREE_LIST_MAX];
    if (!cv.r || !score || !best_vals)
        goto out;
    M->lambda = 0;
    set_free(M, "none", NULL, 0);
    memset(M->warm, 0, sizeof M->warm);
    if (cv_run(H, M, K, sweeps, jobs, &cv, "nothing free") < 0)
        goto out;
    double best = cv.score;
    for (int i = 0; i < M->n; i++)
        score[i] = -INFINITY; /* untried: every knob is a candidate in the first round */
    for (int round = 1;; round++) {
        /* candidates: every knob in round 1, then the CV_KEEP best of the last round */
        int cand[MAX_KNOBS], nc = 0;
        for (int i = 0; i < M->n; i++)
            if (!M->k[i].free)
                cand[nc++] = i;
        for (int a = 1; a < nc; a++)
            for (int b = a; b > 0 && score[cand[b - 1]] > score[cand[b]]; b--) {
                int t = cand[b];
                cand[b] = cand[b - 1];
                cand[b - 1] = t;
            }
        if (round > 1 && nc > CV_KEEP)
            nc = CV_KEEP;
        int pick = -1;
        double pick_score = best;
        for (int c = 0; c < nc; c++) {
            int i = cand[c];
            M->k[i].free = 1;
            /* screening: the knobs chosen so far stay at their fold's values */
            warm_start(M, best_vals, K, i, round, WARM_HOLD);
            snprintf(what, sizeof what, "round %d + %s", round, M->k[i].name);
            if (cv_run(H, M, K, sweeps, jobs, &cv, what) < 0)
                goto out;
            score[i] = cv.score;
            if (cv.score < pick_score - CV_MIN_GAIN) {
                pick = i;
                pick_score = cv.score;
            }
            M->k[i].free = 0;
        }
        if (pick < 0)
            break;
        /* the pick, refit jointly with the knobs chosen before (warm): its CV score and the next
         * round's starting values */
        M->k[pick].free = 1;
        warm_start(M, best_vals, K, pick, round, WARM_SEARCH);
        snprintf(what, sizeof what, "round %d refit with %s", round, M->k[pick].name);
        if (cv_run(H, M, K, sweeps, jobs, &cv, what) < 0)
            goto out;
        if (cv.score > best - CV_MIN_GAIN) {
            /* the joint refit does not keep what the screening found: stop here */
            M->k[pick].free = 0;
            break;
        }
        best = cv.score;
        memcpy(best_vals, cv.fold_value, MAX_FOLDS * sizeof *best_vals);
        free_list(M, fl, sizeof fl);
        printf("select: round %d frees %s: CV loss %.4f; free: %s\n", round, M->k[pick].name, best, fl);
        fflush(stdout);
    }
    memset(M->warm, 0, sizeof M->warm);
    double best_lambda = 0;
    for (size_t j = 0; j < sizeof CV_LAMBDAS / sizeof CV_LAMBDAS[0]; j++) {
        M->lambda = CV_LAMBDAS[j];
        snprintf(what, sizeof what, "lambda %g (full fits)", M->lambda);
        if (cv_run(H, M, K, sweeps, jobs, &cv, what) < 0)
            goto out;
        if (j == 0 || cv.score < best - CV_MIN_GAIN) {
            best = cv.score;
            best_lambda = M->lambda;
        }
    }
    M->lambda = best_lambda;
    free_list(M, fl, sizeof fl);
    printf("select: chosen: lambda %g, free (%d): %s (CV loss %.4f)\n", best_lambda, knob_count_free(M), fl, best);
    rc = 0;
out:
    free(cv.r);
    free(score);
    free(best_vals);
    return rc;
}

/* ---- leave-one-lab-out ------------------------------------------------------------------------ */

/* Each point's fold: its lab's index (M->fold_lab). The number of labs, or -1 when there are
 * more than MAX_FOLDS. */
static int lab_folds(const harness *H, model_knobs *M, int *fold)
{
    int K = 0;
    for (uint32_t i = 0; i < H->n; i++) {
        int f = -1;
        for (int j = 0; j < K && f < 0; j++)
            if (!strcmp(M->fold_lab[j], H->pts[i].lab))
                f = j;
        if (f < 0) {
            if (K == MAX_FOLDS)
                return -1;
            M->fold_lab[K] = H->pts[i].lab;
            f = K++;
        }
        fold[i] = f;
    }
    return K;
}

static void median_row(const harness *H, const cv_result *cv, const unsigned char *in, double *med, uint32_t *n)
{
    double *v = malloc((H->n ? H->n : 1) * sizeof *v);
    for (int m = 0; m < ST_FID_M_COUNT; m++) {
        uint32_t k = 0;
        for (uint32_t i = 0; v && i < H->n; i++)
            if (in[i] && isfinite(cv->r[i].r[m]))
                v[k++] = fabs(cv->r[i].r[m] - 1);
        med[m] = v ? st_fid_median(v, k) : NAN;
        n[m] = k;
    }
    free(v);
}

static void print_med(const double *med, const uint32_t *n)
{
    for (int m = 0; m < ST_FID_M_COUNT; m++) {
        if (n[m])
            printf(" %6.1f%% (%3u)", 100 * med[m], n[m]);
        else
            printf(" %14s", "-");
    }
    printf("\n");
}

/* --lolo: every lab predicted by a fit on the other labs' points (both splits), from the sourced
 * defaults; the held-out lab's own front-end latency is unknown to its fold. Prints each fold's
 * constants (flagging those on a bound), the per-lab and pooled median errors, and the per-regime
 * table (st_fid_regime). */
static int leave_one_lab_out(harness *H, model_knobs *M, int sweeps, int jobs, int detail)
{
    int rc = -1;
    int *fold = malloc((H->n ? H->n : 1) * sizeof *fold);
    unsigned char *in = calloc(H->n ? H->n : 1, 1);
    cv_result cv;
    memset(&cv, 0, sizeof cv);
    cv.r = calloc(H->n ? H->n : 1, sizeof *cv.r);
    if (!fold || !in || !cv.r)
        goto out;
    int K = lab_folds(H, M, fold);
    if (K < 2) {
        fprintf(stderr, "fidelity: --lolo needs 2 to %d labs\n", MAX_FOLDS);
        goto out;
    }
    /* each lab's calibrated latency at the start values (the same in every fold that trains on it) */
    reset_values(M, H->pr, H->n);
    for (int f = 0; f < K; f++) {
        M->cal_point[f] = M->lab_cal ? st_fid_lab_cal_point(H->pts, H->n, M->fold_lab[f]) : -1;
        M->cal_start[f] = M->cal_point[f] >= 0 ? calibrate_lab(H, M, fold, f, NAN) : NAN;
    }
    for (uint32_t i = 0; i < H->n; i++)
        H->pr[i].fe_cal = NAN;
    st_ns t0 = st_now();
    if (cross_validate(H, M, K, sweeps, jobs, &cv, fold) < 0)
        goto out;
    char fl[FREE_LIST_MAX];
    free_list(M, fl, sizeof fl);
    printf("leave-one-lab-out: %d labs, each predicted by a fit on the other labs' points (%d sweeps, lambda %g, "
           "from the %s values; %.0f s)\n  free (%d): %s\n",
           K, sweeps, M->lambda, M->start_tree ? "tree's" : "sourced", (st_now() - t0) / 1e9, knob_count_free(M), fl);
    int on_bound = 0;
    for (int f = 0; f < K; f++) {
        printf("  fold %d (without %s): train loss %.4f; on a bound:", f, M->fold_lab[f], cv.fold_train_loss[f]);
        int any = 0;
        for (int i = 0; i < M->n; i++) {
            const knob *k = &M->k[i];
            if (!k->free || (k->sc == ST_FID_SCOPE_LAB && !strcmp(k->of, M->fold_lab[f])))
                continue;
            double d = bound_distance(k, cv.fold_value[f][i]);
            if (d < ST_FID_BOUND_NEAR) {
                const char *why = st_fid_bound_reason(k->name);
                printf(" %s=%.4g%s", k->name, cv.fold_value[f][i], why ? " (documented)" : "");
                on_bound += !why;
                any = 1;
            }
        }
        printf("%s\n", any ? "" : " none");
        if (M->lab_cal) {
            int ci = M->cal_point[f];
            printf("    its latency: %.1f ms, %s%s\n", 1e3 * cv.fold_lab_fe[f],
                   ci >= 0 ? "from its calibration point (not scored) "
                           : "the other labs' median (no calibration point)",
                   ci >= 0 ? H->pts[ci].id : "");
        }
    }
    if (detail)
        for (uint32_t i = 0; i < H->n; i++)
            print_row(&H->pts[i], i, &cv.r[i], "lolo", NULL);
    double med[ST_FID_M_COUNT];
    uint32_t cnt[ST_FID_M_COUNT];
    printf("\n  %-44s %14s %14s %14s %14s\n", "held-out lab: median |err| (n)", "throughput", "ttft_p50", "ttft_tail",
           "tpot");
    for (int f = 0; f < K; f++) {
        for (uint32_t i = 0; i < H->n; i++)
            in[i] = fold[i] == f;
        median_row(H, &cv, in, med, cnt);
        printf("  %-44.44s", M->fold_lab[f]);
        print_med(med, cnt);
    }
    memset(in, 1, H->n);
    median_row(H, &cv, in, med, cnt);
    printf("  %-44s", "ALL (pooled held-out)");
    print_med(med, cnt);
    printf("  LOLO median |err|: throughput %.1f %% (target 10), ttft_tail %.1f %% (target 15), tpot %.1f %% (target "
           "10); ttft_p50 %.1f %%\n",
           100 * med[ST_FID_M_THROUGHPUT], 100 * med[ST_FID_M_TTFT_TAIL], 100 * med[ST_FID_M_TPOT],
           100 * med[ST_FID_M_TTFT_P50]);
    printf("\n  per regime (held-out, pooled): %-16s %14s %14s %14s %14s\n", "", "throughput", "ttft_p50", "ttft_tail",
           "tpot");
    for (int cell = 0; cell < 8; cell++) {
        for (uint32_t i = 0; i < H->n; i++) {
            st_fid_regime g;
            st_fid_point_regime(&H->pts[i], &g);
            in[i] =
                g.long_context == (cell >> 2 & 1) && g.high_concurrency == (cell >> 1 & 1) && g.quantized == (cell & 1);
        }
        median_row(H, &cv, in, med, cnt);
        printf("  %-5s context, %-4s concurrency, %-9s weights", cell & 4 ? "long" : "short", cell & 2 ? "high" : "low",
               cell & 1 ? "quantized" : "16-bit");
        print_med(med, cnt);
    }
    printf("  (long context: mean prompt >= %d tokens; high concurrency: >= %d sequences in flight, from the published "
           "output rate x TPOT, else the load's concurrency)\n",
           ST_FID_LONG_CONTEXT, ST_FID_HIGH_CONCURRENCY);
    printf("  fitted constants on a bound without a documented reason, over all folds: %d\n", on_bound);
    rc = 0;
out:
    free(fold);
    free(in);
    free(cv.r);
    return rc;
}

/* ---- main ------------------------------------------------------------------------------------ */

static void usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s [--data FILE] [--summary] [--split fit|test] [--detail]\n"
            "          [--fit | --cv | --cv-select | --lolo] [--free LIST|all|none] [--lambda L] [--folds K]\n"
            "          [--start sourced|tree] [--set NAME=VALUE]... [--sweeps N] [--jobs J] [--labs on|off]\n"
            "          [--lab-latency cal|default]\n"
            "  sourced start: every constant at its sourced default; a GPU's bw_eff at its memory's published\n"
            "  copy rate where the catalog has one (GDDR6X 0.91, HBM2e 0.87), else 0.80\n",
            argv0);
}

int main(int argc, char **argv)
{
    const char *data = DEFAULT_DATA, *free_arg = FREE_DEFAULT;
    int fit_mode = 0, cv_mode = 0, select_mode = 0, lolo_mode = 0, sweeps = 3, points = 1, only_split = -1, detail = 0;
    int folds = 5, jobs = 1, start_tree = -1, no_labs = 0, lab_cal = 1;
    double lambda = 0;
    const char *sets[MAX_KNOBS];
    int nsets = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--data") && i + 1 < argc)
            data = argv[++i];
        else if (!strcmp(argv[i], "--fit"))
            fit_mode = 1;
        else if (!strcmp(argv[i], "--cv"))
            cv_mode = 1;
        else if (!strcmp(argv[i], "--cv-select"))
            select_mode = 1;
        else if (!strcmp(argv[i], "--lolo"))
            lolo_mode = 1;
        else if (!strcmp(argv[i], "--free") && i + 1 < argc)
            free_arg = argv[++i];
        else if (!strcmp(argv[i], "--set") && i + 1 < argc && nsets < MAX_KNOBS)
            sets[nsets++] = argv[++i];
        else if (!strcmp(argv[i], "--lambda") && i + 1 < argc)
            lambda = atof(argv[++i]);
        else if (!strcmp(argv[i], "--folds") && i + 1 < argc)
            folds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--jobs") && i + 1 < argc)
            jobs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--start") && i + 1 < argc &&
                 (!strcmp(argv[i + 1], "sourced") || !strcmp(argv[i + 1], "tree")))
            start_tree = !strcmp(argv[++i], "tree");
        else if (!strcmp(argv[i], "--sweeps") && i + 1 < argc)
            sweeps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--summary"))
            points = 0;
        else if (!strcmp(argv[i], "--detail"))
            detail = 1;
        else if (!strcmp(argv[i], "--labs") && i + 1 < argc &&
                 (!strcmp(argv[i + 1], "on") || !strcmp(argv[i + 1], "off")))
            no_labs = !strcmp(argv[++i], "off");
        else if (!strcmp(argv[i], "--lab-latency") && i + 1 < argc &&
                 (!strcmp(argv[i + 1], "cal") || !strcmp(argv[i + 1], "default")))
            lab_cal = !strcmp(argv[++i], "cal");
        else if (!strcmp(argv[i], "--split") && i + 1 < argc &&
                 (!strcmp(argv[i + 1], "fit") || !strcmp(argv[i + 1], "test")))
            only_split = !strcmp(argv[++i], "test") ? ST_FID_TEST : ST_FID_FIT;
        else {
            usage(argv[0]);
            return 2;
        }
    }
    if (folds < 2 || folds > MAX_FOLDS || jobs < 1 || jobs > MAX_JOBS || sweeps < 1 || !(lambda >= 0) ||
        fit_mode + cv_mode + select_mode + lolo_mode > 1) {
        usage(argv[0]);
        return 2;
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
    st_fid_figures *buf = calloc(n ? n : 1, sizeof *buf);
    if (!pr || !buf)
        return 2;
    harness H = { pts, pr, n, buf };
    for (uint32_t i = 0; i < n; i++) {
        pr[i].cfg_ok = st_fid_config(&pts[i], &pr[i].cfg, pr[i].err, sizeof pr[i].err) == 0;
        pr[i].tree = pr[i].cfg.tune;
        pr[i].lab = pts[i].lab;
        pr[i].fe_cal = NAN;
    }
    model_knobs M;
    if (build_knobs(pts, pr, n, no_labs, &M) < 0)
        return 2;
    /* fits start from the sourced defaults, a what-if run (--set) from the tree's values */
    M.start_tree = start_tree >= 0 ? start_tree : !(fit_mode || cv_mode || select_mode || lolo_mode);
    M.lambda = lambda;
    M.lab_cal = lolo_mode && lab_cal;
    char bad[KNOB_NAME_MAX];
    if (set_free(&M, free_arg, bad, sizeof bad) < 0) {
        fprintf(stderr, "fidelity: --free: no constant '%s'; the constants:\n", bad);
        for (int i = 0; i < M.n; i++)
            fprintf(stderr, "  %s\n", M.k[i].name);
        return 2;
    }
    for (int i = 0; i < nsets; i++) {
        char name[KNOB_NAME_MAX];
        const char *eq = strchr(sets[i], '=');
        size_t nl = eq ? (size_t)(eq - sets[i]) : 0;
        int k = -1;
        if (eq && nl < sizeof name) {
            memcpy(name, sets[i], nl);
            name[nl] = 0;
            k = knob_index(&M, name);
        }
        char *end = NULL;
        double v = eq ? strtod(eq + 1, &end) : NAN;
        if (k < 0 || !end || *end || !(v > 0)) {
            fprintf(stderr, "fidelity: --set %s: expected NAME=VALUE with a constant's name and a value > 0\n",
                    sets[i]);
            return 2;
        }
        M.set[k] = v;
        M.is_set[k] = 1;
    }
    if (lolo_mode) {
        rc = leave_one_lab_out(&H, &M, sweeps, jobs, detail) < 0 ? 2 : 0;
        free(pr);
        free(buf);
        free(pts);
        return rc;
    }
    if (!fit_mode && !cv_mode && !select_mode) {
        /* the tree's values (each lab's own latency included), or a what-if run: the sourced
         * defaults with --start sourced, with the --set ones */
        set_free(&M, "none", NULL, 0);
        reset_values(&M, pr, n);
        for (uint32_t i = 0; i < n; i++)
            if (pr[i].cfg_ok)
                apply(&M, &pr[i]);
    }
    if (cv_mode || select_mode) {
        cv_result cv;
        memset(&cv, 0, sizeof cv);
        cv.r = calloc(n ? n : 1, sizeof *cv.r);
        st_ns t0 = st_now();
        if (!cv.r)
            rc = 2;
        else if (select_mode ? cv_select(&H, &M, folds, sweeps, jobs) < 0
                             : cross_validate(&H, &M, folds, sweeps, jobs, &cv, NULL) < 0)
            rc = 2;
        else if (!select_mode)
            print_cv(&H, &M, folds, &cv, detail);
        printf("(%.0f s wall)\n", (st_now() - t0) / 1e9);
        free(cv.r);
        free(pr);
        free(buf);
        free(pts);
        return rc;
    }
    st_ns t0 = st_now();
    run_all(&H);
    double wall = (st_now() - t0) / 1e9;
    if (fit_mode && do_fit(&H, &M, sweeps) < 0)
        rc = 2;
    printf("engine model vs %u published vLLM measurements (%s)\n", n, data);
    if (points)
        print_points(pts, pr, n, only_split, detail);
    print_summary(pts, pr, n, only_split);
    print_memory(pts, pr, n);
    printf("\n(all %u points simulated in %.2f s wall)\n", n, wall);
    free(pr);
    free(buf);
    free(pts);
    return rc;
}
