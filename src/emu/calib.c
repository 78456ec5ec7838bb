/* Calibration files (calib.h). */
#include "emu/calib.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "emu/consts.h"

#define KNOB(f, lo, hi, lg, what)                                                                                      \
    {                                                                                                                  \
#f, offsetof(st_emu_tuning, f), lo, hi, lg, what                                                               \
    }

/* Bounds: GEMMs reach 0.5-0.9 of the dense peak and weight streaming 0.65-0.92 of the
 * bandwidth in published measurements; the CPU and front-end costs span what a Python
 * server costs per request / token / step on a modern CPU (docs/engine-model.md). */
static const st_calib_knob knobs[] = {
    KNOB(gemm_eff, 0.5, 0.9, 0, "fraction of the 16-bit dense peak large GEMMs reach (prefill)"),
    KNOB(bw_eff, 0.65, 0.92, 0, "fraction of the peak bandwidth weight and KV reads reach (decode)"),
    KNOB(attn_eff, 0.3, 0.8, 0, "attention kernels' fraction of the 16-bit peak"),
    KNOB(kv_bw_rel, 0.6, 1.2, 0, "paged KV-cache read efficiency relative to bw_eff"),
    KNOB(fp8_gemm_rel, 0.5, 1.0, 0, "fp8 W8A8 GEMM efficiency relative to gemm_eff"),
    /* fp8 reads up to 1.1: vLLM's fp8 GEMM at one token streams its weights at 1.07 of the bf16
     * GEMV's rate on an H100 (N=6144 K=4096, vllm-project/vllm#17126; consts.h EMU_FP8_BW_REL) */
    KNOB(fp8_bw_rel, 0.6, 1.1, 0, "fp8 weight-read efficiency relative to bw_eff"),
    KNOB(moe_gemm_rel, 0.3, 1.0, 0, "fused-MoE GEMM efficiency relative to gemm_eff"),
    KNOB(marlin_bw_rel, 0.6, 1.0, 0, "weight-only (Marlin) read efficiency relative to bw_eff"),
    KNOB(int4_gemm_rel, 0.45, 1.0, 0,
         "Marlin (4-bit, fp8 weight-only) GEMM efficiency at prefill sizes relative to a 16-bit GEMM"),
    KNOB(step_gpu_s, 5e-5, 0.003, 1, "GPU-side fixed cost of a step (s)"),
    KNOB(step_cpu_s, 1e-4, 0.005, 1, "engine-core CPU per step (s)"),
    KNOB(seq_cpu_s, 1e-6, 5e-5, 1, "engine-core CPU per scheduled sequence per step (s)"),
    KNOB(layer_graph_s, 5e-7, 3e-5, 1, "per-layer cost under CUDA graphs (s)"),
    KNOB(layer_eager_s, 5e-5, 1.5e-3, 1, "per-layer kernel launches with --enforce-eager (s)"),
    KNOB(fe_latency_s, 0.002, 0.06, 1, "API server: fixed latency of a request (s)"),
    KNOB(fe_req_cpu_s, 0.0005, 0.03, 1, "API server: CPU per request (s)"),
    KNOB(fe_token_cpu_s, 5e-6, 2e-4, 1, "API server: CPU per streamed token (s)"),
    KNOB(fe_chat_factor, 1.0, 4.0, 0, "API server: cost of a chat request relative to a completions one"),
    { NULL, 0, 0, 0, 0, NULL },
};

const st_calib_knob *st_calib_knobs(void) { return knobs; }

const st_calib_knob *st_calib_knob_find(const char *name)
{
    for (const st_calib_knob *k = knobs; k->name; k++)
        if (!strcmp(k->name, name))
            return k;
    return NULL;
}

double st_calib_knob_get(const st_emu_tuning *t, const st_calib_knob *k)
{
    double v;
    memcpy(&v, (const char *)t + k->offset, sizeof v);
    return v;
}

void st_calib_knob_set(st_emu_tuning *t, const st_calib_knob *k, double v)
{
    memcpy((char *)t + k->offset, &v, sizeof v);
}

void st_calib_identity(st_emu_calib *c, const st_emu_config *cfg)
{
    const st_emu_model *m = &cfg->model;
    snprintf(c->gpu, sizeof c->gpu, "%s", cfg->gpu.name);
    snprintf(c->model, sizeof c->model, "%s", m->name);
    c->layers = m->layers;
    c->hidden = m->hidden;
    c->intermediate = m->intermediate;
    c->heads = m->heads;
    c->kv_heads = m->kv_heads;
    c->head_dim = m->head_dim;
    c->vocab = m->vocab;
    c->experts = m->experts;
    c->weights = cfg->weight_dtype;
    c->tp = cfg->tp;
    c->vllm_version = cfg->vllm_version;
}

static void version_str(uint32_t v, char *out, size_t len)
{
    snprintf(out, len, "%u.%u.%u", v / 10000, v / 100 % 100, v % 100);
}

int st_calib_check(const st_emu_calib *c, const st_emu_config *cfg, char *why, size_t whylen, char *note,
                   size_t notelen)
{
    const st_emu_model *m = &cfg->model;
    if (note && notelen)
        note[0] = 0;
    if (strcmp(c->gpu, cfg->gpu.name)) {
        snprintf(why, whylen, "the calibration is for GPU %s; this configuration runs on %s", c->gpu, cfg->gpu.name);
        return -1;
    }
    if (c->layers != m->layers || c->hidden != m->hidden || c->intermediate != m->intermediate ||
        c->heads != m->heads || c->kv_heads != m->kv_heads || c->head_dim != m->head_dim || c->vocab != m->vocab ||
        c->experts != m->experts) {
        snprintf(why, whylen,
                 "the calibration is for model %s (%u layers, hidden %u); this configuration serves %s (%u layers, "
                 "hidden %u)",
                 c->model, c->layers, c->hidden, m->name, m->layers, m->hidden);
        return -1;
    }
    if (c->weights != cfg->weight_dtype) {
        snprintf(why, whylen, "the calibration is for %s weights; this configuration runs %s weights",
                 st_emu_dtype_name(c->weights), st_emu_dtype_name(cfg->weight_dtype));
        return -1;
    }
    if (note && notelen) {
        if (c->tp != cfg->tp)
            snprintf(note, notelen,
                     "the calibration was measured at tensor-parallel size %u, this configuration runs %u: the "
                     "efficiencies carry over, the all-reduce cost is the model's",
                     c->tp, cfg->tp);
        else if (c->vllm_version && c->vllm_version != cfg->vllm_version) {
            char a[16], b[16];
            version_str(c->vllm_version, a, sizeof a);
            version_str(cfg->vllm_version, b, sizeof b);
            snprintf(note, notelen, "the calibration was measured on vLLM %s, the model runs as %s", a, b);
        }
    }
    return 0;
}

void st_calib_apply(const st_emu_calib *c, st_emu_config *cfg)
{
    int i = 0;
    for (const st_calib_knob *k = knobs; k->name; k++, i++)
        if (c->set[i])
            st_calib_knob_set(&cfg->tune, k, c->value[i]);
}

static uint32_t ju32(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) < 0x7fffffff
               ? (uint32_t)json_integer_value(v)
               : 0;
}

static double jdbl(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : 0;
}

static int dtype_of(const char *s, st_emu_dtype *out)
{
    static const st_emu_dtype all[] = { ST_EMU_BF16, ST_EMU_FP16, ST_EMU_FP8, ST_EMU_INT4_AWQ, ST_EMU_INT4_GPTQ };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (s && !strcmp(s, st_emu_dtype_name(all[i]))) {
            *out = all[i];
            return 0;
        }
    return -1;
}

int st_calib_parse(const char *text, size_t len, st_emu_calib *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    json_error_t je;
    json_t *root = json_loadb(text, len, 0, &je);
    if (!json_is_object(root)) {
        snprintf(err, errlen, "calibration file: invalid JSON: %s (line %d)", root ? "not an object" : je.text,
                 root ? 0 : je.line);
        json_decref(root);
        return -1;
    }
    int rc = -1;
    const char *schema = json_string_value(json_object_get(root, "schema"));
    const char *gpu = json_string_value(json_object_get(root, "gpu"));
    const char *model = json_string_value(json_object_get(root, "model"));
    json_t *shape = json_object_get(root, "model_shape");
    json_t *tun = json_object_get(root, "tuning");
    if (!schema || strcmp(schema, ST_CALIB_SCHEMA)) {
        snprintf(err, errlen, "calibration file: schema must be \"%s\"", ST_CALIB_SCHEMA);
        goto out;
    }
    if (!gpu || !model || !json_is_object(shape) || !json_is_object(tun)) {
        snprintf(err, errlen, "calibration file: gpu, model, model_shape and tuning are required");
        goto out;
    }
    snprintf(out->gpu, sizeof out->gpu, "%s", gpu);
    snprintf(out->model, sizeof out->model, "%s", model);
    out->layers = ju32(shape, "layers");
    out->hidden = ju32(shape, "hidden");
    out->intermediate = ju32(shape, "intermediate");
    out->heads = ju32(shape, "heads");
    out->kv_heads = ju32(shape, "kv_heads");
    out->head_dim = ju32(shape, "head_dim");
    out->vocab = ju32(shape, "vocab");
    out->experts = ju32(shape, "experts");
    if (!out->layers || !out->hidden || !out->heads || !out->vocab) {
        snprintf(err, errlen, "calibration file: model_shape needs layers, hidden, heads and vocab");
        goto out;
    }
    if (dtype_of(json_string_value(json_object_get(root, "weights")), &out->weights) < 0) {
        snprintf(err, errlen, "calibration file: weights must be bfloat16, float16, fp8, awq or gptq");
        goto out;
    }
    out->tp = ju32(root, "tensor_parallel_size");
    if (!out->tp)
        out->tp = 1;
    out->vllm_version = st_emu_parse_vllm_version(json_string_value(json_object_get(root, "vllm_version")));
    const char *key;
    json_t *v;
    json_object_foreach(tun, key, v)
    {
        const st_calib_knob *k = st_calib_knob_find(key);
        if (!k) {
            snprintf(err, errlen, "calibration file: unknown constant '%s' in tuning", key);
            goto out;
        }
        double d = json_is_number(v) ? json_number_value(v) : NAN;
        if (!(d >= k->lo * 0.999 && d <= k->hi * 1.001)) {
            snprintf(err, errlen, "calibration file: %s = %g is outside [%g, %g]", key, d, k->lo, k->hi);
            goto out;
        }
        int i = (int)(k - knobs);
        out->value[i] = d;
        out->set[i] = 1;
    }
    json_t *r = json_object_get(root, "range");
    out->range.rate_max = jdbl(r, "rate_max");
    out->range.concurrency_max = jdbl(r, "concurrency_max");
    out->range.output_tps_max = jdbl(r, "output_tps_max");
    out->range.input_mean = jdbl(r, "input_mean");
    out->range.output_mean = jdbl(r, "output_mean");
    rc = 0;
out:
    json_decref(root);
    return rc;
}

void st_calib_write(const st_emu_calib *c, const char *extra, st_buf *b)
{
    char ver[16];
    st_buf_printf(b, "{\n  \"schema\": \"%s\",\n  \"gpu\": ", ST_CALIB_SCHEMA);
    st_buf_json_str(b, c->gpu);
    st_buf_puts(b, ",\n  \"model\": ");
    st_buf_json_str(b, c->model);
    st_buf_printf(b,
                  ",\n  \"model_shape\": {\"layers\": %u, \"hidden\": %u, \"intermediate\": %u, \"heads\": %u, "
                  "\"kv_heads\": %u, \"head_dim\": %u, \"vocab\": %u, \"experts\": %u},\n",
                  c->layers, c->hidden, c->intermediate, c->heads, c->kv_heads, c->head_dim, c->vocab, c->experts);
    st_buf_printf(b, "  \"weights\": \"%s\",\n  \"tensor_parallel_size\": %u,\n", st_emu_dtype_name(c->weights), c->tp);
    if (c->vllm_version) {
        version_str(c->vllm_version, ver, sizeof ver);
        st_buf_printf(b, "  \"vllm_version\": \"%s\",\n", ver);
    }
    st_buf_puts(b, "  \"tuning\": {");
    int i = 0, first = 1;
    for (const st_calib_knob *k = knobs; k->name; k++, i++)
        if (c->set[i]) {
            st_buf_printf(b, "%s\n    \"%s\": %.6g", first ? "" : ",", k->name, c->value[i]);
            first = 0;
        }
    st_buf_printf(b, "%s},\n", first ? "" : "\n  ");
    st_buf_printf(b,
                  "  \"range\": {\"rate_max\": %.6g, \"concurrency_max\": %.6g, \"output_tps_max\": %.6g, "
                  "\"input_mean\": %.6g, \"output_mean\": %.6g}",
                  c->range.rate_max, c->range.concurrency_max, c->range.output_tps_max, c->range.input_mean,
                  c->range.output_mean);
    if (extra && *extra)
        st_buf_printf(b, ",\n  %s", extra);
    st_buf_puts(b, "\n}\n");
}

int st_calib_extrapolates(const st_emu_calib *c, double rate, double concurrency, double slack, char *why,
                          size_t whylen)
{
    if (concurrency > 0) {
        if (c->range.concurrency_max > 0 && concurrency > c->range.concurrency_max * slack) {
            snprintf(why, whylen,
                     "concurrency %g is beyond the calibrated range (up to %g measured): the prediction extrapolates",
                     concurrency, c->range.concurrency_max);
            return 1;
        }
        return 0;
    }
    if (rate > 0 && c->range.rate_max > 0 && (isinf(rate) || rate > c->range.rate_max * slack)) {
        snprintf(why, whylen,
                 "rate %g req/s is beyond the calibrated range (up to %g req/s measured): the prediction "
                 "extrapolates",
                 rate, c->range.rate_max);
        return 1;
    }
    return 0;
}
