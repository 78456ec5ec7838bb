/* The fidelity benchmark: published measurements -> engine-model runs -> ratios. fidelity.h. */
#include "emu/fidelity.h"

#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/util.h"
#include "emu/catalog.h"
#include "emu/sim.h"
#include "load/record.h"
#include "load/stats.h"

/* Assumptions of the harness (docs/fidelity.md "What the model is fed"):
 * - chat endpoints add the chat template to every prompt; the published input totals are the
 *   client's counts. Qwen's template around one user message ("<|im_start|>user\n",
 *   "<|im_end|>\n<|im_start|>assistant\n") is about 10 tokens.
 * - ShareGPT lengths (vLLM's sharegpt sampler over ShareGPT_V3_unfiltered_cleaned_split) are
 *   not published per request: lognormal input and output lengths with the published means
 *   and a spread of sigma 1.0, filtered as vLLM's sampler filters (both >= 4, prompt <= 1024,
 *   prompt + output <= 2048). Means when a source publishes no totals: the Qwen3 tokenizer's
 *   totals of the same 1000-prompt sample (217,393 in / 201,648 out). */
#define FID_CHAT_TEMPLATE_TOKENS 10
#define FID_SHAREGPT_SIGMA 1.0
#define FID_SHAREGPT_IN_MEAN 217.393
#define FID_SHAREGPT_OUT_MEAN 201.648
#define FID_SHAREGPT_MAX_IN 1024
#define FID_SHAREGPT_MAX_TOTAL 2048
#define FID_SHAREGPT_MIN 4

/* ---- parsing ----------------------------------------------------------------------------- */

static double jnum(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    if (json_is_number(v))
        return json_number_value(v);
    if (json_is_string(v) && !strcmp(json_string_value(v), "inf"))
        return INFINITY;
    return NAN;
}

static uint32_t jnum_u32(json_t *o, const char *k)
{
    double d = jnum(o, k);
    return isfinite(d) && d > 0 && d < 4e9 ? (uint32_t)d : 0;
}

static void jstr(json_t *o, const char *k, char *out, size_t len)
{
    const char *s = json_string_value(json_object_get(o, k));
    snprintf(out, len, "%s", s ? s : "");
}

static void jdist(json_t *o, const char *k, st_fid_dist *d)
{
    json_t *v = json_object_get(o, k);
    d->mean = jnum(v, "mean");
    d->p50 = jnum(v, "p50");
    d->p95 = jnum(v, "p95");
    d->p99 = jnum(v, "p99");
}

static int parse_point(json_t *p, st_fid_point *o, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    jstr(p, "id", o->id, sizeof o->id);
    json_t *s = json_object_get(p, "setup"), *l = json_object_get(p, "load"), *m = json_object_get(p, "measured");
    if (!o->id[0] || !json_is_object(s) || !json_is_object(l) || !json_is_object(m)) {
        snprintf(err, errlen, "point '%s': id, setup, load and measured are required", o->id);
        return -1;
    }
    const char *split = json_string_value(json_object_get(p, "split"));
    if (!split || (strcmp(split, "fit") && strcmp(split, "test"))) {
        snprintf(err, errlen, "point '%s': split must be fit or test", o->id);
        return -1;
    }
    o->split = !strcmp(split, "test") ? ST_FID_TEST : ST_FID_FIT;
    jstr(s, "gpu", o->gpu, sizeof o->gpu);
    /* the catalog key when the data names one (e.g. an unnamed checkpoint), else the HF id */
    jstr(s, "model_catalog_key", o->model, sizeof o->model);
    if (!o->model[0])
        jstr(s, "model", o->model, sizeof o->model);
    jstr(s, "weights", o->weights, sizeof o->weights);
    jstr(s, "kv_cache_dtype", o->kv_dtype, sizeof o->kv_dtype);
    o->tp = jnum_u32(s, "tensor_parallel_size");
    if (!o->tp)
        o->tp = 1;
    o->vllm_version = st_emu_parse_vllm_version(json_string_value(json_object_get(s, "vllm_version")));
    o->max_num_seqs = jnum_u32(s, "max_num_seqs");
    o->max_num_batched_tokens = jnum_u32(s, "max_num_batched_tokens");
    o->max_model_len = jnum_u32(s, "max_model_len");
    double u = jnum(s, "gpu_memory_utilization");
    o->gpu_memory_utilization = isfinite(u) ? u : 0;
    json_t *pc = json_object_get(s, "enable_prefix_caching");
    o->prefix_caching = json_is_boolean(pc) ? json_is_true(pc) : -1;
    o->enforce_eager = json_is_true(json_object_get(s, "enforce_eager"));
    const char *mode = json_string_value(json_object_get(l, "mode"));
    o->mode = mode && !strcmp(mode, "concurrency") ? ST_FID_CONCURRENCY : ST_FID_RATE;
    double v = jnum(l, "value");
    if (o->mode == ST_FID_CONCURRENCY) {
        o->clients = isfinite(v) && v >= 1 ? (uint32_t)v : 0;
        if (!o->clients) {
            snprintf(err, errlen, "point '%s': concurrency needs a value >= 1", o->id);
            return -1;
        }
    } else {
        if (!(v > 0)) {
            snprintf(err, errlen, "point '%s': rate must be > 0 or \"inf\"", o->id);
            return -1;
        }
        o->rate = v;
        o->max_concurrency = jnum_u32(l, "max_concurrency");
    }
    o->num_prompts = jnum_u32(l, "num_prompts");
    if (!o->num_prompts) {
        snprintf(err, errlen, "point '%s': num_prompts is required", o->id);
        return -1;
    }
    const char *ds = json_string_value(json_object_get(l, "dataset"));
    o->dataset = ds && !strcmp(ds, "sharegpt") ? ST_FID_SHAREGPT : ST_FID_RANDOM;
    o->input_len = jnum_u32(l, "input_len");
    o->output_len = jnum_u32(l, "output_len");
    if (o->dataset == ST_FID_RANDOM && (!o->input_len || !o->output_len)) {
        snprintf(err, errlen, "point '%s': a random dataset needs input_len and output_len", o->id);
        return -1;
    }
    double rr = jnum(l, "range_ratio");
    o->range_ratio = isfinite(rr) && rr > 0 && rr < 1 ? rr : 0;
    const char *ep = json_string_value(json_object_get(l, "endpoint"));
    o->chat = ep && strstr(ep, "chat") != NULL;
    o->total_input = jnum(l, "total_input_tokens");
    o->total_output = jnum(l, "total_output_tokens");
    double seed = jnum(l, "seed");
    o->seed = isfinite(seed) && seed >= 0 ? (uint64_t)seed : 0;
    o->req_s = jnum(m, "req_s");
    o->out_tok_s = jnum(m, "out_tok_s");
    o->total_tok_s = jnum(m, "total_tok_s");
    jdist(m, "ttft_ms", &o->ttft_ms);
    jdist(m, "tpot_ms", &o->tpot_ms);
    jdist(m, "itl_ms", &o->itl_ms);
    o->kv_tokens = jnum(json_object_get(s, "published_memory"), "kv_tokens");
    return 0;
}

int st_fid_parse(const char *json, size_t len, st_fid_point **out, uint32_t *n, char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    json_error_t je;
    json_t *root = json_loadb(json, len, 0, &je);
    json_t *arr = root;
    if (json_is_object(root))
        arr = json_object_get(root, "points");
    if (!json_is_array(arr)) {
        snprintf(err, errlen, "measurements: expected a JSON array of points (%s)", root ? "wrong shape" : je.text);
        json_decref(root);
        return -1;
    }
    size_t k = json_array_size(arr);
    st_fid_point *pts = calloc(k ? k : 1, sizeof *pts);
    if (!pts) {
        json_decref(root);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < k; i++)
        if (parse_point(json_array_get(arr, i), &pts[i], err, errlen) < 0) {
            free(pts);
            json_decref(root);
            return -1;
        }
    json_decref(root);
    *out = pts;
    *n = (uint32_t)k;
    return 0;
}

/* ---- configuration --------------------------------------------------------------------- */

static int starts(const char *s, const char *prefix) { return !strncmp(s, prefix, strlen(prefix)); }

int st_fid_config(const st_fid_point *p, st_emu_config *cfg, char *err, size_t errlen)
{
    st_emu_gpu g;
    st_emu_model m;
    if (st_emu_gpu_find(p->gpu, &g, err, errlen) < 0 || st_emu_model_find(p->model, &m, err, errlen) < 0)
        return -1;
    st_emu_config_init(cfg, &g, &m);
    char w[ST_FID_NAME_MAX];
    size_t i = 0;
    for (; p->weights[i] && i + 1 < sizeof w; i++)
        w[i] = (char)tolower((unsigned char)p->weights[i]);
    w[i] = 0;
    if (starts(w, "fp8"))
        cfg->weight_dtype = ST_EMU_FP8;
    else if (starts(w, "awq"))
        cfg->weight_dtype = ST_EMU_INT4_AWQ;
    else if (starts(w, "gptq"))
        cfg->weight_dtype = ST_EMU_INT4_GPTQ;
    else if (starts(w, "fp16"))
        cfg->weight_dtype = ST_EMU_FP16;
    else if (starts(w, "bf16"))
        cfg->weight_dtype = ST_EMU_BF16;
    cfg->kv_dtype = starts(p->kv_dtype, "fp8") ? ST_EMU_FP8 : ST_EMU_BF16;
    cfg->tp = p->tp;
    cfg->max_num_seqs = p->max_num_seqs;
    cfg->max_num_batched_tokens = p->max_num_batched_tokens;
    cfg->max_model_len = p->max_model_len;
    if (p->gpu_memory_utilization > 0)
        cfg->gpu_memory_utilization = p->gpu_memory_utilization;
    if (p->prefix_caching >= 0)
        cfg->enable_prefix_caching = p->prefix_caching;
    cfg->enforce_eager = p->enforce_eager;
    if (p->vllm_version)
        cfg->vllm_version = p->vllm_version;
    return 0;
}

/* ---- workload ----------------------------------------------------------------------------- */

static uint32_t clamp_len(double v) { return v < 1 ? 1 : v > 4e6 ? 4000000 : (uint32_t)lround(v); }

/* ShareGPT-like lengths (see the assumptions above): lognormal pairs with the target means,
 * rejected where vLLM's sampler would skip the conversation; the location is corrected until
 * the filtered sample has the target means. */
static void sharegpt_lengths(uint32_t n, double mean_in, double mean_out, uint64_t seed, uint32_t *in, uint32_t *out)
{
    const double s = FID_SHAREGPT_SIGMA;
    double mu_in = log(mean_in) - s * s / 2, mu_out = log(mean_out) - s * s / 2;
    for (int iter = 0; iter < 6; iter++) {
        st_rng r;
        st_rng_seed(&r, seed ^ 0x5a5a5a5aULL);
        double sum_in = 0, sum_out = 0;
        for (uint32_t i = 0; i < n; i++) {
            in[i] = clamp_len(mean_in);
            out[i] = clamp_len(mean_out);
            for (int tries = 0; tries < 1000; tries++) {
                uint32_t a = clamp_len(exp(mu_in + s * st_rng_normal(&r)));
                uint32_t b = clamp_len(exp(mu_out + s * st_rng_normal(&r)));
                if (a < FID_SHAREGPT_MIN || b < FID_SHAREGPT_MIN || a > FID_SHAREGPT_MAX_IN ||
                    a + b > FID_SHAREGPT_MAX_TOTAL)
                    continue;
                in[i] = a;
                out[i] = b;
                break;
            }
            sum_in += in[i];
            sum_out += out[i];
        }
        /* the filter trims the tails: move the location until the means match */
        mu_in += log(mean_in / (sum_in / n));
        mu_out += log(mean_out / (sum_out / n));
    }
}

/* Fills items (lengths and arrivals) for the point. */
static void make_items(const st_fid_point *p, st_emu_sim_item *items, uint32_t *in, uint32_t *out)
{
    uint32_t n = p->num_prompts;
    if (p->dataset == ST_FID_SHAREGPT) {
        double mi = isfinite(p->total_input) ? p->total_input / n : FID_SHAREGPT_IN_MEAN;
        double mo = isfinite(p->total_output) ? p->total_output / n : FID_SHAREGPT_OUT_MEAN;
        sharegpt_lengths(n, mi, mo, p->seed, in, out);
    } else {
        /* vLLM's random dataset: lengths uniform in [len (1 - r), len (1 + r)]; the published
         * totals (outputs stop early without ignore_eos) set the means */
        double mi = isfinite(p->total_input) ? p->total_input / n : p->input_len;
        double mo = isfinite(p->total_output) ? p->total_output / n : p->output_len;
        st_rng r;
        st_rng_seed(&r, p->seed ^ 0x1234ULL);
        for (uint32_t i = 0; i < n; i++) {
            double ui = p->range_ratio > 0 ? 1 + p->range_ratio * (2 * st_rng_uniform(&r) - 1) : 1;
            double uo = p->range_ratio > 0 ? 1 + p->range_ratio * (2 * st_rng_uniform(&r) - 1) : 1;
            in[i] = clamp_len(mi * ui);
            out[i] = clamp_len(mo * uo);
        }
    }
    st_rng ar;
    st_rng_seed(&ar, p->seed ^ 0xa771ULL);
    double t = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (p->mode == ST_FID_RATE && isfinite(p->rate) && i > 0)
            t += st_rng_exp(&ar, p->rate);
        uint32_t ilen = in[i] + (p->chat ? FID_CHAT_TEMPLATE_TOKENS : 0);
        items[i] = (st_emu_sim_item){
            .arrival = (st_ns)(t * 1e9), .input_ids = NULL, .input_len = ilen, .output_len = out[i], .chat = p->chat
        };
    }
}

/* ---- prediction --------------------------------------------------------------------------- */

static void fill_dist(double *vals, uint32_t n, st_fid_dist *d)
{
    st_dist s;
    st_dist_compute(vals, n, &s);
    d->mean = s.mean;
    d->p50 = s.p50;
    d->p95 = s.p95;
    d->p99 = s.p99;
}

int st_fid_predict(const st_fid_point *p, const st_emu_config *cfg, st_fid_figures *f, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    uint32_t n = p->num_prompts;
    st_emu_config c = *cfg;
    st_emu_memory mem;
    if (st_emu_memory_plan(&c, &mem, err, errlen) < 0) {
        f->refused = 1;
        return 0;
    }
    f->kv_tokens = (double)mem.kv_tokens;
    st_emu_sim_item *items = calloc(n, sizeof *items);
    st_record *rec = calloc(n, sizeof *rec);
    uint32_t *in = calloc(n, sizeof *in), *out = calloc(n, sizeof *out);
    double *v = NULL;
    int rc = -1;
    if (!items || !rec || !in || !out) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    make_items(p, items, in, out);
    st_emu_sim_stats ss;
    if (p->mode == ST_FID_CONCURRENCY)
        rc = st_emu_sim_run_closed(&c, items, n, p->clients, rec, &ss, err, errlen);
    else
        rc = st_emu_sim_run_limited(&c, items, n, p->max_concurrency, rec, &ss, err, errlen);
    if (rc < 0)
        goto done;
    rc = -1;
    /* like vllm bench serve: the duration runs from the first request sent to the last end */
    st_ns t0 = -1, t1 = 0;
    uint64_t gen = 0, prompt = 0, itl_n = 0;
    for (uint32_t i = 0; i < n; i++) {
        const st_record *r = &rec[i];
        if (r->status != ST_REQ_OK)
            continue;
        f->completed++;
        if (t0 < 0 || r->sent < t0)
            t0 = r->sent;
        if (r->end > t1)
            t1 = r->end;
        gen += r->output_tokens;
        prompt += r->input_tokens;
        itl_n += r->n_events > 1 ? r->n_events - 1 : 0;
    }
    f->preemptions = (uint32_t)ss.preemptions;
    f->duration_s = t0 >= 0 ? (t1 - t0) / 1e9 : 0;
    if (f->duration_s > 0) {
        f->req_s = f->completed / f->duration_s;
        f->out_tok_s = gen / f->duration_s;
        f->total_tok_s = (gen + prompt) / f->duration_s;
    }
    v = malloc(((size_t)n + itl_n + 1) * sizeof *v);
    if (!v) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++)
        if (rec[i].status == ST_REQ_OK)
            v[k++] = (rec[i].first_token - rec[i].sent) / 1e6;
    fill_dist(v, k, &f->ttft_ms);
    k = 0;
    for (uint32_t i = 0; i < n; i++)
        if (rec[i].status == ST_REQ_OK && rec[i].output_tokens > 1)
            v[k++] = (rec[i].end - rec[i].first_token) / 1e6 / (rec[i].output_tokens - 1);
    fill_dist(v, k, &f->tpot_ms);
    size_t m = 0;
    for (uint32_t i = 0; i < n; i++)
        if (rec[i].status == ST_REQ_OK)
            for (uint32_t e = 1; e < rec[i].n_events; e++)
                v[m++] = (rec[i].events[e] - rec[i].events[e - 1]) / 1e6;
    fill_dist(v, (uint32_t)m, &f->itl_ms);
    rc = 0;
done:
    for (uint32_t i = 0; rec && i < n; i++)
        st_record_free(&rec[i]);
    free(rec);
    free(items);
    free(in);
    free(out);
    free(v);
    return rc;
}

/* ---- comparison --------------------------------------------------------------------------- */

const char *st_fid_metric_name(int m)
{
    static const char *names[ST_FID_M_COUNT] = { "throughput", "ttft_p50", "ttft_tail", "tpot" };
    return m >= 0 && m < ST_FID_M_COUNT ? names[m] : "?";
}

static double ratio(double pred, double pub) { return isfinite(pub) && pub > 0 && isfinite(pred) ? pred / pub : NAN; }

void st_fid_compare(const st_fid_point *p, const st_fid_figures *f, st_fid_ratios *o)
{
    for (int m = 0; m < ST_FID_M_COUNT; m++) {
        o->r[m] = NAN;
        o->which[m] = NULL;
    }
    if (f->refused)
        return;
    if (isfinite(p->out_tok_s)) {
        o->r[ST_FID_M_THROUGHPUT] = ratio(f->out_tok_s, p->out_tok_s);
        o->which[ST_FID_M_THROUGHPUT] = "out_tok_s";
    } else if (isfinite(p->req_s)) {
        o->r[ST_FID_M_THROUGHPUT] = ratio(f->req_s, p->req_s);
        o->which[ST_FID_M_THROUGHPUT] = "req_s";
    } else if (isfinite(p->total_tok_s)) {
        o->r[ST_FID_M_THROUGHPUT] = ratio(f->total_tok_s, p->total_tok_s);
        o->which[ST_FID_M_THROUGHPUT] = "total_tok_s";
    }
    if (isfinite(p->ttft_ms.p50)) {
        o->r[ST_FID_M_TTFT_P50] = ratio(f->ttft_ms.p50, p->ttft_ms.p50);
        o->which[ST_FID_M_TTFT_P50] = "p50";
    } else if (isfinite(p->ttft_ms.mean)) {
        o->r[ST_FID_M_TTFT_P50] = ratio(f->ttft_ms.mean, p->ttft_ms.mean);
        o->which[ST_FID_M_TTFT_P50] = "mean";
    }
    if (isfinite(p->ttft_ms.p95)) {
        o->r[ST_FID_M_TTFT_TAIL] = ratio(f->ttft_ms.p95, p->ttft_ms.p95);
        o->which[ST_FID_M_TTFT_TAIL] = "p95";
    } else if (isfinite(p->ttft_ms.p99)) {
        o->r[ST_FID_M_TTFT_TAIL] = ratio(f->ttft_ms.p99, p->ttft_ms.p99);
        o->which[ST_FID_M_TTFT_TAIL] = "p99";
    }
    if (isfinite(p->tpot_ms.p50)) {
        o->r[ST_FID_M_TPOT] = ratio(f->tpot_ms.p50, p->tpot_ms.p50);
        o->which[ST_FID_M_TPOT] = "p50";
    } else if (isfinite(p->tpot_ms.mean)) {
        o->r[ST_FID_M_TPOT] = ratio(f->tpot_ms.mean, p->tpot_ms.mean);
        o->which[ST_FID_M_TPOT] = "mean";
    }
}

void st_fid_summarise(const st_fid_point *pts, const st_fid_ratios *ratios, uint32_t n, st_fid_split split, int metric,
                      st_fid_stat *out)
{
    memset(out, 0, sizeof *out);
    out->worst_index = -1;
    out->median_abs = out->worst_abs = NAN;
    double *v = malloc((n ? n : 1) * sizeof *v);
    if (!v)
        return;
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (pts[i].split != split || !isfinite(ratios[i].r[metric]))
            continue;
        double e = fabs(ratios[i].r[metric] - 1);
        v[k++] = e;
        if (out->worst_index < 0 || e > out->worst_abs) {
            out->worst_abs = e;
            out->worst_index = (int)i;
        }
    }
    out->n = k;
    if (k) {
        qsort(v, k, sizeof *v, st_cmp_double);
        out->median_abs = k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
    }
    free(v);
}

double st_fid_loss(const st_fid_ratios *r, int refused)
{
    if (refused)
        return ST_FID_REFUSED_LOSS;
    double l = 0;
    for (int m = 0; m < ST_FID_M_COUNT; m++)
        if (isfinite(r->r[m]) && r->r[m] > 0) {
            double x = log(r->r[m]);
            l += x * x;
        }
    return l;
}
