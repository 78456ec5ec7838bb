/* The fidelity benchmark's library half: published real-hardware vLLM measurements
 * (bench/fidelity/measurements.json, schema in bench/fidelity/README.md) turned into engine-model
 * runs with the point's exact setup and load, and the predicted figures compared with the
 * published ones. Pure: the caller reads the file; nothing here does I/O.
 *
 * Use: st_fid_parse(text) -> points; for each, st_fid_config() (the engine configuration:
 * GPU, model, dtypes, flags, vLLM version) and st_fid_predict() (the workload and load the
 * point describes, simulated in virtual time, summarised like `vllm bench serve`); then
 * st_fid_compare() for the predicted/published ratios and st_fid_summarise() for the median
 * and worst errors of a split. docs/fidelity.md describes the method and its assumptions. */
#ifndef ST_BENCH_FIDELITY_HARNESS_H
#define ST_BENCH_FIDELITY_HARNESS_H
#include <stddef.h>
#include <stdint.h>

#include "emu/config.h"

#define ST_FID_ID_MAX 128
#define ST_FID_NAME_MAX 160

/* A distribution as published (NAN: not published). */
typedef struct st_fid_dist {
    double mean, p50, p95, p99;
} st_fid_dist;

typedef enum { ST_FID_FIT = 0, ST_FID_TEST = 1 } st_fid_split;
typedef enum { ST_FID_RATE = 0, ST_FID_CONCURRENCY = 1 } st_fid_mode;
/* vllm bench serve's datasets: random (with --random-prefix-len: one shared prefix before every
 * prompt), sharegpt, prefix_repetition (num_prefixes shared prefixes, each followed by unique
 * suffixes, prompts shuffled). */
typedef enum { ST_FID_RANDOM = 0, ST_FID_SHAREGPT = 1, ST_FID_PREFIX_REP = 2 } st_fid_dataset;

typedef struct st_fid_point {
    char id[ST_FID_ID_MAX];
    st_fid_split split;
    /* setup */
    char gpu[ST_FID_NAME_MAX], model[ST_FID_NAME_MAX], weights[ST_FID_NAME_MAX], kv_dtype[32];
    uint32_t tp, vllm_version;
    uint32_t max_num_seqs, max_num_batched_tokens, max_model_len; /* 0: vLLM's default */
    double gpu_memory_utilization;                                /* 0: default */
    int prefix_caching;                                           /* -1: default (on) */
    int enforce_eager;
    /* load */
    st_fid_mode mode;
    double rate;              /* req/s (INFINITY: all at once); mode rate */
    uint32_t clients;         /* mode concurrency: closed-loop clients */
    uint32_t max_concurrency; /* mode rate: cap on requests in flight (0: none) */
    uint32_t num_prompts;
    st_fid_dataset dataset;
    uint32_t input_len, output_len; /* random: the unique part (after the prefix); prefix_repetition:
                                       prefix + suffix */
    uint32_t prefix_len;            /* random: shared prefix tokens; prefix_repetition: each prefix's */
    uint32_t num_prefixes;          /* prefix_repetition: distinct prefixes (vLLM's default 10) */
    double range_ratio;
    int chat;                         /* chat endpoint: the server adds the chat template's tokens to every prompt */
    double total_input, total_output; /* published totals (NAN: not published) */
    uint64_t seed;
    double burstiness; /* the gaps' gamma shape (vllm bench serve --burstiness; 1: Poisson) */
    /* The source's procedure (st_fid_parse fills it from the harness's table of sources that
     * measured several points one after another on one server, docs/fidelity.md "Sweeps on one
     * server"): sweep is the index of the point's sweep (-1: a fresh server, the default),
     * sweep_pos its place in the sweep's run order; the whole sweep ran `rounds` times, after
     * `preruns` unpublished runs of its first workload; the figures are those of round `round`
     * (1-based; 0: the mean of every round's figures, as the source averaged them). */
    int sweep;
    uint32_t sweep_pos, rounds, round, preruns;
    int sweep_desc;                   /* the sweep ran from the highest load down */
    char source[2 * ST_FID_NAME_MAX]; /* repo/path of the source file */
    /* The lab: the source's repository (else its URL's host), i.e. one measurement setup: its
     * client, network path and server host (docs/fidelity.md, "The lab's own latency"). */
    char lab[ST_FID_NAME_MAX];
    /* published figures */
    double req_s, out_tok_s, total_tok_s;
    st_fid_dist ttft_ms, tpot_ms, itl_ms;
    double kv_tokens; /* published "GPU KV cache size" in tokens (NAN: not published) */
} st_fid_point;

/* Parses the data set (a JSON array of points). *out is malloc'ed (free()). 0, or -1 with err. */
int st_fid_parse(const char *json, size_t len, st_fid_point **out, uint32_t *n, char *err, size_t errlen);

/* The front-end latency fitted for a lab (st_fid_point.lab) on its fit points; NAN when the
 * lab has none (the model's default applies). */
double st_fid_lab_fe_latency(const char *lab);

/* The engine configuration of a point (with the model's default tuning and its lab's own
 * front-end latency, st_fid_lab_fe_latency). 0, or -1 with err (GPU or model not in the
 * catalog). */
int st_fid_config(const st_fid_point *p, st_emu_config *cfg, char *err, size_t errlen);

/* Predicted figures, in the units the data set uses. */
typedef struct st_fid_figures {
    int refused; /* the engine model refused to start (err says why) */
    double req_s, out_tok_s, total_tok_s;
    st_fid_dist ttft_ms, tpot_ms, itl_ms;
    double kv_tokens;
    double duration_s;
    uint32_t completed, preemptions;
} st_fid_figures;

/* Runs the point's workload and load on cfg (st_fid_config's, possibly re-tuned) in virtual
 * time on a fresh engine. 0 (a refusal is 0 with out->refused and the reason in err), or -1
 * with err. */
int st_fid_predict(const st_fid_point *p, const st_emu_config *cfg, st_fid_figures *out, char *err, size_t errlen);
/* Point i of pts[0..n) as its source measured it: a point of a sweep (p->sweep >= 0) replays
 * the sweep on one engine in its run order (its prefix cache carries over from run to run, as
 * the server's did), round after round, and takes its figures from its own run(s); any other
 * point runs as st_fid_predict. cfg is point i's configuration (a sweep shares one setup). */
int st_fid_predict_in(const st_fid_point *pts, uint32_t n, uint32_t i, const st_emu_config *cfg, st_fid_figures *out,
                      char *err, size_t errlen);
/* Every point of sweep `sweep` at once (one replay; out[j] for each point j of the sweep, the
 * other entries untouched): what st_fid_predict_in gives each of them, for the cost of one. */
int st_fid_predict_sweep(const st_fid_point *pts, uint32_t n, int sweep, const st_emu_config *cfg, st_fid_figures *out,
                         char *err, size_t errlen);

/* The compared metrics. */
enum {
    ST_FID_M_THROUGHPUT = 0, /* output tok/s, else req/s, else total tok/s (what is published) */
    ST_FID_M_TTFT_P50,       /* p50, else mean */
    ST_FID_M_TTFT_TAIL,      /* p95, else p99 */
    ST_FID_M_TPOT,           /* p50, else mean */
    ST_FID_M_COUNT
};
const char *st_fid_metric_name(int m);

/* predicted / published per metric (NAN where not published or not predicted), and which
 * published figure each used ("out_tok_s", "p99", ...). */
typedef struct st_fid_ratios {
    double r[ST_FID_M_COUNT];
    const char *which[ST_FID_M_COUNT];
} st_fid_ratios;
void st_fid_compare(const st_fid_point *p, const st_fid_figures *f, st_fid_ratios *out);

/* Median and worst absolute error (|ratio - 1|) of one metric over the points of one split
 * (NAN ratios skipped). worst_index: the point (-1 when n == 0). median_lo..median_hi: a
 * distribution-free confidence interval of the median error at >= ST_FID_MEDIAN_CI (the order
 * statistics x(j) and x(n+1-j), 1-based, with the largest j for which P(Binomial(n, 1/2) < j)
 * <= (1 - CI) / 2; NAN below 6 points, where no such j exists): with a few dozen points a
 * median's uncertainty is several points, and a target is met only as far as it says. */
#define ST_FID_MEDIAN_CI 0.95
typedef struct st_fid_stat {
    uint32_t n;
    double median_abs, worst_abs;
    double median_lo, median_hi;
    int worst_index;
} st_fid_stat;

/* The j above for n points (0 when none qualifies). */
uint32_t st_fid_median_ci_rank(uint32_t n);
void st_fid_summarise(const st_fid_point *pts, const st_fid_ratios *ratios, uint32_t n, st_fid_split split, int metric,
                      st_fid_stat *out);

/* The loss the fit minimises for one point: the sum over published metrics of a pseudo-Huber
 * loss of log(ratio), d^2 (sqrt(1 + (log(ratio) / d)^2) - 1) with d = ST_FID_LOSS_SCALE:
 * quadratic for errors within ~10 % (the targets' scale), linear beyond. The targets are
 * medians of absolute errors, and a point a source's own circumstances put 2-5x off (effects
 * no configuration describes, docs/fidelity.md) must not drag every constant towards it, as a
 * squared loss lets it. Refusals cost ST_FID_REFUSED_LOSS. */
#define ST_FID_LOSS_SCALE 0.1
#define ST_FID_REFUSED_LOSS 25.0
double st_fid_loss(const st_fid_ratios *r, int refused);

/* Regimes of the per-regime table (bench/fidelity.c --lolo): a point's mean prompt (the prefix
 * included) is long at ST_FID_LONG_CONTEXT tokens; its concurrency (sequences in flight: the
 * published output rate x TPOT where both are published, else the load's clients, cap, or prompt
 * count for an unpaced burst) is high at ST_FID_HIGH_CONCURRENCY; weights other than 16-bit are
 * quantized. */
#define ST_FID_LONG_CONTEXT 2048
#define ST_FID_HIGH_CONCURRENCY 32
typedef struct st_fid_regime {
    int long_context, high_concurrency, quantized;
    double prompt_tokens, in_flight;
} st_fid_regime;
void st_fid_point_regime(const st_fid_point *p, st_fid_regime *out);

/* A lab's calibration point (leave-one-lab-out, bench/fidelity.c --lab-latency cal): the fixed
 * latency outside the engine core is partly the measurement setup's (client, proxy, network
 * path), so each lab gives one declared low-load point as calibration input, as a user gives
 * `servetune calibrate` one run of their own setup. It is the lab's point with the fewest
 * sequences in flight (st_fid_point_regime) among those that publish a p50 (else mean) TTFT, run
 * at a finite rate or concurrency, with a mean prompt under ST_FID_LONG_CONTEXT tokens (a long
 * prompt's prefill swamps a few ms of latency: not identifiable from it). Its index, or -1 when
 * the lab has none. */
int st_fid_lab_cal_point(const st_fid_point *pts, uint32_t n, const char *lab);
/* The front-end latency (fe_latency_s, within emu/calib.c's bounds) at which point i, run with
 * cfg (its configuration; a sweep replays its sweep, st_fid_predict_in), reproduces its published
 * p50 (else mean) TTFT: TTFT rises with the latency, regula falsi within the bounds, a bound when
 * the TTFT lies beyond what the bounds give. NAN with err on failure. */
#define ST_FID_CAL_ITERATIONS 6
#define ST_FID_CAL_TOLERANCE 0.005
double st_fid_solve_lab_latency(const st_fid_point *pts, uint32_t n, uint32_t i, const st_emu_config *cfg, char *err,
                                size_t errlen);

/* The engine model's sourced defaults (bench/fidelity/sourced.c; docs/engine-model.md "The free
 * constants"): each constant the fit may free, where it applies (its scope: every point, a GPU's
 * or a lab's own refinement, or only points with fp8 weights, Marlin weights, --enforce-eager or
 * experts), its sourced value and the source. bench/fidelity.c's fit starts from these; the
 * leave-one-lab-out figure without a fit (st_fid_lolo_sourced) runs on them. */
typedef enum {
    ST_FID_SCOPE_ALL,
    ST_FID_SCOPE_GPU,
    ST_FID_SCOPE_LAB,
    ST_FID_SCOPE_FP8,
    ST_FID_SCOPE_MARLIN,
    ST_FID_SCOPE_EAGER,
    ST_FID_SCOPE_MOE
} st_fid_scope;
typedef struct st_fid_sourced {
    const char *name; /* emu/calib.c's knob */
    size_t offset;    /* in st_emu_tuning */
    st_fid_scope scope;
    double def;
    const char *why;
} st_fid_sourced;
const st_fid_sourced *st_fid_sourced_knobs(int *n);
/* Sets every sourced constant of t to its sourced value; a GPU's bw_eff to its memory's published
 * copy rate where the catalog has one (st_emu_gpu.copy_eff). */
void st_fid_sourced_tuning(const st_emu_gpu *gpu, st_emu_tuning *t);
/* The median of v[0..k) (sorts v in place); NAN when k is 0. */
double st_fid_median(double *v, uint32_t k);
/* Leave-one-lab-out without a fit (`build/bench/fidelity --lolo --free none`): every point run on
 * the sourced constants (st_fid_sourced_tuning) with its lab's front-end latency solved from the
 * lab's calibration point (st_fid_lab_cal_point, st_fid_solve_lab_latency; a lab without one gets
 * the median of the others'), since no lab's data then reaches another lab's prediction. Fills
 * out[i] with point i's ratios (a calibration point's all NAN: an input, not scored). 0, or -1
 * with err. */
#define ST_FID_LOLO_MAX_LABS 16
int st_fid_lolo_sourced(const st_fid_point *pts, uint32_t n, st_fid_ratios *out, char *err, size_t errlen);

/* A fitted constant within this fraction of its range (log units for log constants) from a
 * bound of emu/calib.c's table counts as on its bound. */
#define ST_FID_BOUND_NEAR 0.01
/* Why a constant may sit on its bound (a mechanism the model does not have, with the evidence),
 * or NULL: the fidelity test fails for a fitted constant on a bound without one. name: a knob
 * of emu/calib.c or its per-GPU / per-lab form ("gemm_eff@H100", "fe_latency_s@LAB"), matched
 * exactly (a per-GPU reason does not cover the constant everywhere). */
const char *st_fid_bound_reason(const char *name);

#endif
