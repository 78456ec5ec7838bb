/* Calibration files: the engine model's free constants (st_emu_tuning) fitted to one
 * deployment's own measurements by `servetune calibrate` (docs/calibrate.md), for one GPU, one
 * model and one weight quantisation, with the range of load the fit saw and its quality.
 * `predict`, `emulate` and the audit take one with --calibration FILE. Pure: text in, text out.
 *
 * File (JSON, schema "servetune-calibration/1"):
 *   {"schema": ..., "gpu": "H100 SXM 80GB", "model": "Qwen/Qwen3-8B",
 *    "model_shape": {"layers":36,"hidden":4096,...}, "weights": "bfloat16",
 *    "tensor_parallel_size": 1, "vllm_version": "0.10.1",
 *    "tuning": {"bw_eff": 0.86, ...}        only the constants the data identified
 *    "defaulted": ["fe_token_cpu_s", ...], why each was left at its default in "notes"
 *    "range": {"rate_max": 16, "concurrency_max": 0, "output_tps_max": 5200, ...},
 *    "quality": {...}}                      per-run residuals (written, not read back) */
#ifndef ST_EMU_CALIB_H
#define ST_EMU_CALIB_H
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "emu/config.h"

#define ST_CALIB_SCHEMA "servetune-calibration/1"
#define ST_CALIB_NAME_MAX 160

/* The tunable constants: name (the JSON key), where it lives, and the bounds a fit may move
 * it within (physical limits and published measurements: docs/engine-model.md). */
typedef struct st_calib_knob {
    const char *name;
    size_t offset; /* in st_emu_tuning */
    double lo, hi;
    int log; /* searched in log space */
    const char *what;
} st_calib_knob;
/* The table (NULL-terminated by name). */
const st_calib_knob *st_calib_knobs(void);
const st_calib_knob *st_calib_knob_find(const char *name);
double st_calib_knob_get(const st_emu_tuning *t, const st_calib_knob *k);
void st_calib_knob_set(st_emu_tuning *t, const st_calib_knob *k, double v);

typedef struct st_calib_range {
    double rate_max;                /* highest offered req/s measured (0: none) */
    double concurrency_max;         /* highest closed-loop concurrency (0: none) */
    double output_tps_max;          /* highest output tokens/s measured */
    double input_mean, output_mean; /* mean tokens per request of the runs */
} st_calib_range;

typedef struct st_emu_calib {
    char gpu[64];
    char model[ST_CALIB_NAME_MAX];
    uint32_t layers, hidden, intermediate, heads, kv_heads, head_dim, vocab, experts;
    st_emu_dtype weights;
    uint32_t tp;
    uint32_t vllm_version; /* 0: not stated */
    /* the fitted constants (set[i] marks which of st_calib_knobs() are in the file) */
    double value[32];
    int set[32];
    st_calib_range range;
} st_emu_calib;

/* The identity of a configuration, taken into a calibration (gpu, model shape, weights, tp). */
void st_calib_identity(st_emu_calib *c, const st_emu_config *cfg);
/* 0 when c applies to cfg; -1 with the reason ("calibrated for GPU A100 80GB SXM; this
 * configuration runs on H100 SXM 80GB"). A different tensor-parallel size or vLLM version is
 * not a refusal: *note (may be NULL) gets a warning instead. */
int st_calib_check(const st_emu_calib *c, const st_emu_config *cfg, char *why, size_t whylen, char *note,
                   size_t notelen);
/* Overrides cfg->tune with the file's constants. */
void st_calib_apply(const st_emu_calib *c, st_emu_config *cfg);

/* Parses a calibration file. 0, or -1 with err. */
int st_calib_parse(const char *text, size_t len, st_emu_calib *out, char *err, size_t errlen);
/* Reads FILE and parses it (the only I/O here; emu/catalog_file.c). */
int st_calib_load_file(const char *path, st_emu_calib *out, char *err, size_t errlen);
/* Writes the identity, constants and range as JSON into b, with extra members (already JSON:
 * `"defaulted":[...],"notes":[...],"quality":{...}`, may be NULL) before the closing brace. */
void st_calib_write(const st_emu_calib *c, const char *extra, st_buf *b);

/* Whether a load is beyond what the calibration saw by more than a factor `slack` (1.5 is
 * the default the CLI uses): 1 with a sentence in why, else 0. rate: offered req/s (INFINITY
 * for all at once, 0 unknown); concurrency: closed-loop clients (0: open loop). */
int st_calib_extrapolates(const st_emu_calib *c, double rate, double concurrency, double slack, char *why,
                          size_t whylen);

#endif
