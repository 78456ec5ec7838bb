#include "engine/metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- engine names -------------------------------------------------------------------- */

static const char *const met_names[ST_MET__COUNT] = {
    "kv_usage",        "running",        "waiting",           "preemptions",
    "prefix_hits",     "prefix_queries", "prompt_tokens",     "generation_tokens",
    "prefix_hit_rate", "emu_tokens",     "emu_late_tokens",   "emu_very_late_tokens",
    "emu_dropped_s",   "spec_drafts",    "spec_draft_tokens", "spec_accepted_tokens",
};

const char *st_metrics_name(st_metric m) { return ((unsigned)m < ST_MET__COUNT) ? met_names[m] : "unknown"; }

int st_metrics_from_name(const char *name, st_metric *out)
{
    for (int i = 0; name && i < ST_MET__COUNT; i++)
        if (strcmp(name, met_names[i]) == 0) {
            *out = (st_metric)i;
            return 0;
        }
    return -1;
}

int st_metrics_is_fraction(st_metric m) { return m == ST_MET_KV_USAGE || m == ST_MET_PREFIX_HIT_RATE; }

#define L(...) ((const char *const[]){ __VA_ARGS__, NULL })

/* Sources: the engine reference (docs/reference/engine-reference.md) and the engines'
 * metric definitions. vLLM counters are exposed with _total. Names marked "assumed" come
 * from the engines' sources as remembered, not from the reference; a missing name is just
 * reported missing. */
static const char *const *const vllm_names[ST_MET__COUNT] = {
    [ST_MET_KV_USAGE] = L("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    [ST_MET_RUNNING] = L("vllm:num_requests_running"),
    [ST_MET_WAITING] = L("vllm:num_requests_waiting"),
    [ST_MET_PREEMPTIONS] = L("vllm:num_preemptions_total", "vllm:num_preemptions"),
    [ST_MET_PREFIX_HITS] = L("vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits"),
    [ST_MET_PREFIX_QUERIES] = L("vllm:prefix_cache_queries_total", "vllm:prefix_cache_queries"),
    [ST_MET_PROMPT_TOKENS] = L("vllm:prompt_tokens_total", "vllm:prompt_tokens"),
    [ST_MET_GENERATION_TOKENS] = L("vllm:generation_tokens_total", "vllm:generation_tokens"),
    [ST_MET_PREFIX_HIT_RATE] = L("vllm:gpu_prefix_cache_hit_rate"), /* V0 only */
    /* servetune's emulator (engine/emu_server.c), absent from vLLM */
    [ST_MET_EMU_TOKENS] = L("servetune:emulator_tokens_total"),
    [ST_MET_EMU_LATE] = L("servetune:emulator_tokens_late_total"),
    [ST_MET_EMU_VERY_LATE] = L("servetune:emulator_tokens_very_late_total"),
    [ST_MET_EMU_DROPPED_S] = L("servetune:emulator_dropped_seconds_total"),
    /* vllm/v1/spec_decode/metrics.py (counters, _total when exposed) */
    [ST_MET_SPEC_DRAFTS] = L("vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_drafts"),
    [ST_MET_SPEC_DRAFT_TOKENS] = L("vllm:spec_decode_num_draft_tokens_total", "vllm:spec_decode_num_draft_tokens"),
    [ST_MET_SPEC_ACCEPTED] = L("vllm:spec_decode_num_accepted_tokens_total", "vllm:spec_decode_num_accepted_tokens"),
};
static const char *const *const sglang_names[ST_MET__COUNT] = {
    [ST_MET_KV_USAGE] = L("sglang:token_usage"),
    [ST_MET_RUNNING] = L("sglang:num_running_reqs"),
    [ST_MET_WAITING] = L("sglang:num_queue_reqs"),         /* assumed */
    [ST_MET_PREEMPTIONS] = L("sglang:num_retracted_reqs"), /* assumed (newer SGLang) */
    [ST_MET_PROMPT_TOKENS] = L("sglang:prompt_tokens_total"),
    [ST_MET_GENERATION_TOKENS] = L("sglang:generation_tokens_total"),
    [ST_MET_PREFIX_HIT_RATE] = L("sglang:cache_hit_rate"),
};
static const char *const *const tgi_names[ST_MET__COUNT] = {
    [ST_MET_RUNNING] = L("tgi_batch_current_size"),                     /* assumed */
    [ST_MET_WAITING] = L("tgi_queue_size"),                             /* assumed */
    [ST_MET_PROMPT_TOKENS] = L("tgi_request_input_length_sum"),         /* assumed */
    [ST_MET_GENERATION_TOKENS] = L("tgi_request_generated_tokens_sum"), /* assumed */
};
/* llama-server --metrics (tools/server/server-context.cpp; checked against the server that
 * scripts/install-llamacpp builds): requests_processing (slots busy), requests_deferred
 * (requests waiting for a free slot), tokens_predicted_total, prompt_tokens_total (prompt tokens
 * evaluated, cached ones excluded) and prompt_tokens_cached_total (reused from a slot's cache).
 * kv_cache_usage_ratio is from older servers (this one has no KV usage gauge). The generic
 * prompt_tokens and prefix_queries count every prompt token, as vLLM's do: evaluated + cached
 * (st_metrics_read adds them up). */
#define LLAMACPP_PROMPT "llamacpp:prompt_tokens_total"
#define LLAMACPP_CACHED "llamacpp:prompt_tokens_cached_total"
static const char *const *const llamacpp_names[ST_MET__COUNT] = {
    [ST_MET_KV_USAGE] = L("llamacpp:kv_cache_usage_ratio"),
    [ST_MET_RUNNING] = L("llamacpp:requests_processing"),
    [ST_MET_WAITING] = L("llamacpp:requests_deferred"),
    [ST_MET_PREFIX_HITS] = L(LLAMACPP_CACHED),
    [ST_MET_PROMPT_TOKENS] = L(LLAMACPP_PROMPT),
    [ST_MET_GENERATION_TOKENS] = L("llamacpp:tokens_predicted_total"),
};

/* Each dialect's table of names, in st_metrics_dialect's order. */
static const char *const *const *const dialect_tables[ST_DIALECT__COUNT] = {
    [ST_DIALECT_VLLM] = vllm_names,
    [ST_DIALECT_SGLANG] = sglang_names,
    [ST_DIALECT_TGI] = tgi_names,
    [ST_DIALECT_LLAMACPP] = llamacpp_names,
};
static const char *const dialect_names[ST_DIALECT__COUNT] = {
    [ST_DIALECT_VLLM] = "vllm",
    [ST_DIALECT_SGLANG] = "sglang",
    [ST_DIALECT_TGI] = "tgi",
    [ST_DIALECT_LLAMACPP] = "llamacpp",
};

static const char *const *const *engine_table(st_metrics_dialect d)
{
    return (unsigned)d < ST_DIALECT__COUNT ? dialect_tables[d] : NULL;
}

const char *st_metrics_dialect_name(st_metrics_dialect d)
{
    return (unsigned)d < ST_DIALECT__COUNT ? dialect_names[d] : "?";
}

int st_metrics_dialect_from_name(const char *name, st_metrics_dialect *out)
{
    if (!name)
        return -1;
    for (int d = 0; d < ST_DIALECT__COUNT; d++)
        if (!strcmp(name, dialect_names[d])) {
            *out = (st_metrics_dialect)d;
            return 0;
        }
    if (!strcmp(name, "emulator") || !strcmp(name, "llama.cpp")) { /* the emulator speaks vLLM's names */
        *out = name[0] == 'e' ? ST_DIALECT_VLLM : ST_DIALECT_LLAMACPP;
        return 0;
    }
    return -1;
}

const char *const *st_metrics_engine_names(st_metrics_dialect d, st_metric m)
{
    const char *const *const *t = engine_table(d);
    if (!t || (unsigned)m >= ST_MET__COUNT)
        return NULL;
    return t[m];
}

int st_metrics_read(st_metrics_dialect d, const char *text, size_t len, st_engine_metrics *out)
{
    const char *const *const *t = engine_table(d);
    out->found = 0;
    for (int m = 0; m < ST_MET__COUNT; m++)
        out->v[m] = NAN;
    if (!t)
        return -1;
    for (int m = 0; m < ST_MET__COUNT; m++) {
        for (const char *const *name = t[m]; name && *name; name++) {
            double sum;
            uint32_t count;
            if (st_prom_sum(text, len, *name, NULL, &sum, &count) == 0) {
                out->v[m] = st_metrics_is_fraction((st_metric)m) ? sum / count : sum;
                out->found |= 1u << m;
                break;
            }
        }
    }
    if (t == llamacpp_names && (out->found & (1u << ST_MET_PROMPT_TOKENS)) &&
        (out->found & (1u << ST_MET_PREFIX_HITS))) {
        /* evaluated + cached = every prompt token; the cached ones are the prefix hits */
        out->v[ST_MET_PROMPT_TOKENS] += out->v[ST_MET_PREFIX_HITS];
        out->v[ST_MET_PREFIX_QUERIES] = out->v[ST_MET_PROMPT_TOKENS];
        out->found |= 1u << ST_MET_PREFIX_QUERIES;
    }
    return 0;
}

/* File-scope compound literals have static storage, so these may be returned. */
static const char *const *const vllm_hist[4] = {
    L("vllm:time_to_first_token_seconds"),
    L("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    L("vllm:e2e_request_latency_seconds"),
    L("vllm:request_queue_time_seconds"),
};
static const char *const *const sglang_hist[4] = {
    /* assumed */
    L("sglang:time_to_first_token_seconds"),
    L("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
    L("sglang:e2e_request_latency_seconds"),
    NULL,
};

const char *const *st_metrics_hist_names(st_metrics_dialect d, const char *which)
{
    const char *const *const *t = engine_table(d);
    if (!t || !which)
        return NULL;
    static const char *const kinds[4] = { "ttft", "itl", "e2e", "queue" };
    for (int i = 0; i < 4; i++)
        if (strcmp(which, kinds[i]) == 0) {
            if (t == vllm_names)
                return vllm_hist[i];
            if (t == sglang_names)
                return sglang_hist[i];
        }
    return NULL;
}

/* ---- scraping ------------------------------------------------------------------------ */

/* Static names for the histogram samples (the store keeps the name pointer until the run is
 * written, so they must outlive the scrape). */
static const char *const le_names[ST_METRICS_HIST_MAX] = {
    "ttft_le_00", "ttft_le_01", "ttft_le_02", "ttft_le_03", "ttft_le_04", "ttft_le_05", "ttft_le_06", "ttft_le_07",
    "ttft_le_08", "ttft_le_09", "ttft_le_10", "ttft_le_11", "ttft_le_12", "ttft_le_13", "ttft_le_14", "ttft_le_15",
    "ttft_le_16", "ttft_le_17", "ttft_le_18", "ttft_le_19", "ttft_le_20", "ttft_le_21", "ttft_le_22", "ttft_le_23",
    "ttft_le_24", "ttft_le_25", "ttft_le_26", "ttft_le_27", "ttft_le_28", "ttft_le_29", "ttft_le_30", "ttft_le_31",
    "ttft_le_32", "ttft_le_33", "ttft_le_34", "ttft_le_35", "ttft_le_36", "ttft_le_37", "ttft_le_38", "ttft_le_39",
    "ttft_le_40", "ttft_le_41", "ttft_le_42", "ttft_le_43", "ttft_le_44", "ttft_le_45", "ttft_le_46", "ttft_le_47",
};
static const char *const cum_names[ST_METRICS_HIST_MAX] = {
    "ttft_cum_00", "ttft_cum_01", "ttft_cum_02", "ttft_cum_03", "ttft_cum_04", "ttft_cum_05", "ttft_cum_06",
    "ttft_cum_07", "ttft_cum_08", "ttft_cum_09", "ttft_cum_10", "ttft_cum_11", "ttft_cum_12", "ttft_cum_13",
    "ttft_cum_14", "ttft_cum_15", "ttft_cum_16", "ttft_cum_17", "ttft_cum_18", "ttft_cum_19", "ttft_cum_20",
    "ttft_cum_21", "ttft_cum_22", "ttft_cum_23", "ttft_cum_24", "ttft_cum_25", "ttft_cum_26", "ttft_cum_27",
    "ttft_cum_28", "ttft_cum_29", "ttft_cum_30", "ttft_cum_31", "ttft_cum_32", "ttft_cum_33", "ttft_cum_34",
    "ttft_cum_35", "ttft_cum_36", "ttft_cum_37", "ttft_cum_38", "ttft_cum_39", "ttft_cum_40", "ttft_cum_41",
    "ttft_cum_42", "ttft_cum_43", "ttft_cum_44", "ttft_cum_45", "ttft_cum_46", "ttft_cum_47",
};

static int put(st_metrics_sample *out, int n, int max, const char *name, double v)
{
    if (n >= max || !isfinite(v))
        return n;
    out[n].t = 0;
    out[n].name = name;
    out[n].value = v;
    return n + 1;
}

/* The engine's TTFT histogram, when it has one and it fits in what is left of out. */
static int ttft_hist(st_metrics_dialect dialect, const char *body, size_t len, st_metrics_sample *out, int n, int max)
{
    const char *const *names = st_metrics_hist_names(dialect, "ttft");
    st_prom_hist h;
    for (; names && *names; names++) {
        if (st_prom_histogram(body, len, *names, NULL, &h) != 0 || !h.n)
            continue;
        uint32_t finite = 0;
        while (finite < h.n && isfinite(h.le[finite]))
            finite++;
        if (finite > ST_METRICS_HIST_MAX || n + 2 * (int)finite + 2 > max)
            return n;
        for (uint32_t i = 0; i < finite; i++) {
            n = put(out, n, max, le_names[i], h.le[i]);
            n = put(out, n, max, cum_names[i], h.count[i]);
        }
        n = put(out, n, max, "ttft_count", h.total);
        n = put(out, n, max, "ttft_sum", h.sum);
        return n;
    }
    return n;
}

static const char *const pos_names[ST_METRICS_SPEC_POS_MAX] = {
    "spec_accepted_pos_00", "spec_accepted_pos_01", "spec_accepted_pos_02", "spec_accepted_pos_03",
    "spec_accepted_pos_04", "spec_accepted_pos_05", "spec_accepted_pos_06", "spec_accepted_pos_07",
    "spec_accepted_pos_08", "spec_accepted_pos_09", "spec_accepted_pos_10", "spec_accepted_pos_11",
    "spec_accepted_pos_12", "spec_accepted_pos_13", "spec_accepted_pos_14", "spec_accepted_pos_15",
};

/* vLLM's accepted draft tokens by position, summed over the other labels (engines, ranks). */
static int spec_positions(st_metrics_dialect dialect, const char *body, size_t len, st_metrics_sample *out, int n,
                          int max)
{
    if (engine_table(dialect) != vllm_names)
        return n;
    double v[ST_METRICS_SPEC_POS_MAX];
    int seen[ST_METRICS_SPEC_POS_MAX] = { 0 };
    static const char *const names[] = { "vllm:spec_decode_num_accepted_tokens_per_pos_total",
                                         "vllm:spec_decode_num_accepted_tokens_per_pos" };
    for (int k = 0; k < 2; k++) {
        st_prom_iter it;
        st_prom_sample s;
        char err[64], pos[16];
        int any = 0, rc;
        size_t nl = strlen(names[k]);
        st_prom_iter_init(&it, body, len);
        while ((rc = st_prom_next(&it, &s, err, sizeof err)) != 0) {
            if (rc < 0 || s.name_len != nl || memcmp(s.name, names[k], nl) ||
                st_prom_label(&s, "position", pos, sizeof pos) != 0)
                continue;
            char *end;
            long p = strtol(pos, &end, 10);
            if (*end || p < 0 || p >= ST_METRICS_SPEC_POS_MAX || !isfinite(s.value))
                continue;
            v[p] = seen[p] ? v[p] + s.value : s.value;
            seen[p] = 1;
            any = 1;
        }
        if (any)
            break;
    }
    for (int p = 0; p < ST_METRICS_SPEC_POS_MAX; p++)
        if (seen[p])
            n = put(out, n, max, pos_names[p], v[p]);
    return n;
}

/* The Prometheus text is parsed by engine/metrics (the project's one parser); this only turns
 * its generic figures into samples to store. */
int st_metrics_scrape(st_metrics_dialect dialect, const char *body, size_t len, st_metrics_sample *out, int max)
{
    st_engine_metrics m;
    if (st_metrics_read(dialect, body, len, &m))
        return 0;
    int n = 0;
    for (int k = 0; k < ST_MET__COUNT && n < max; k++) {
        if (!(m.found & (1u << k)) || !isfinite(m.v[k]))
            continue;
        n = put(out, n, max, st_metrics_name((st_metric)k), m.v[k]);
    }
    n = spec_positions(dialect, body, len, out, n, max);
    return ttft_hist(dialect, body, len, out, n, max);
}

int st_metrics_scrape_interval_ms(double time_scale)
{
    if (!(time_scale > 1))
        return 1000;
    int ms = (int)(1000 / time_scale) / 50 * 50;
    return ms < 100 ? 100 : ms;
}
