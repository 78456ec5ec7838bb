/* Engine metrics under servetune's generic names: for each engine dialect, which of its
 * Prometheus names (engine/prom.h parses the text) carry each generic metric, and the
 * turning of one /metrics scrape into timestamped samples that the audit stores. Pure. */
#ifndef ST_ENGINE_METRICS_H
#define ST_ENGINE_METRICS_H
#include <stddef.h>
#include <stdint.h>

#include "engine/prom.h"

/* Generic metrics, named the same for every engine. */
typedef enum st_metric {
    ST_MET_KV_USAGE,          /* KV cache usage, a fraction 0..1 */
    ST_MET_RUNNING,           /* requests running */
    ST_MET_WAITING,           /* requests waiting */
    ST_MET_PREEMPTIONS,       /* counter */
    ST_MET_PREFIX_HITS,       /* counter, tokens */
    ST_MET_PREFIX_QUERIES,    /* counter, tokens */
    ST_MET_PROMPT_TOKENS,     /* counter */
    ST_MET_GENERATION_TOKENS, /* counter */
    ST_MET_PREFIX_HIT_RATE,   /* gauge 0..1, for engines that expose a rate instead of counters */
    /* servetune's emulator only: the process against the model's schedule */
    ST_MET_EMU_TOKENS,    /* counter, tokens sent */
    ST_MET_EMU_LATE,      /* counter, tokens sent more than 10 ms of engine time late */
    ST_MET_EMU_VERY_LATE, /* counter, tokens sent more than 100 ms of engine time late */
    ST_MET_EMU_DROPPED_S, /* counter, engine seconds lost when the process fell behind */
    /* speculative decoding (vLLM's spec_decode counters, docs/speculative.md) */
    ST_MET_SPEC_DRAFTS,       /* counter, verification steps with a draft (num_drafts) */
    ST_MET_SPEC_DRAFT_TOKENS, /* counter, draft tokens proposed */
    ST_MET_SPEC_ACCEPTED,     /* counter, draft tokens accepted */
    ST_MET__COUNT
} st_metric;

/* "kv_usage", "running", "waiting", "preemptions", "prefix_hits", "prefix_queries",
 * "prompt_tokens", "generation_tokens", "prefix_hit_rate", "emu_tokens", "emu_late_tokens",
 * "emu_very_late_tokens", "emu_dropped_s", "spec_drafts", "spec_draft_tokens", "spec_accepted_tokens". */
const char *st_metrics_name(st_metric m);
int st_metrics_from_name(const char *name, st_metric *out);
/* The metrics dialects: whose Prometheus names an engine's /metrics uses. Each engine kind names
 * its dialect in the engine-kind table (engine/adapter.h: the emulator and an endpoint speak
 * vLLM's). */
typedef enum st_metrics_dialect {
    ST_DIALECT_VLLM = 0,
    ST_DIALECT_SGLANG,
    ST_DIALECT_TGI,
    ST_DIALECT_LLAMACPP,
    ST_DIALECT__COUNT
} st_metrics_dialect;
/* "vllm", "sglang", "tgi", "llamacpp" ("?" outside the enum). */
const char *st_metrics_dialect_name(st_metrics_dialect d);
/* A dialect by name: "vllm" (also "emulator", which exposes vLLM's names), "sglang", "tgi",
 * "llamacpp" (also "llama.cpp"). 0, or -1 when unknown. */
int st_metrics_dialect_from_name(const char *name, st_metrics_dialect *out);
/* The dialect's names for m, in order of preference, NULL-terminated; NULL when the dialect
 * has no such metric (or is not one). */
const char *const *st_metrics_engine_names(st_metrics_dialect d, st_metric m);
/* 1 when m is a fraction that is averaged across label sets (kv_usage, prefix_hit_rate);
 * the others are summed (several engines / data-parallel ranks add up). */
int st_metrics_is_fraction(st_metric m);

typedef struct st_engine_metrics {
    double v[ST_MET__COUNT]; /* NAN when the engine does not expose it or it is missing */
    uint32_t found;          /* bit (1u << m) set when v[m] was read */
} st_engine_metrics;
/* Reads every generic metric from a scraped body: for each, the first of the engine's
 * names that has samples. 0, or -1 for a value outside st_metrics_dialect. */
int st_metrics_read(st_metrics_dialect d, const char *text, size_t len, st_engine_metrics *out);

/* The engine's own latency histograms (base names, without _bucket), NULL if none:
 * which = "ttft", "itl" (inter-token / time per output token), "e2e", "queue". */
const char *const *st_metrics_hist_names(st_metrics_dialect d, const char *which);

/* One stored sample of an engine metric over a run. */
typedef struct st_metrics_sample {
    double t;         /* seconds from the run's start */
    const char *name; /* generic name, e.g. "kv_usage" (static on scrape; owned when read back) */
    double value;
} st_metrics_sample;

/* Scraping: turns one /metrics scrape into the audit's generic samples (engine/metrics.h names:
 * kv_usage, running, waiting, preemptions, prefix_hits, prefix_queries, prompt_tokens,
 * generation_tokens, prefix_hit_rate; the emulator's emu_tokens, emu_late_tokens,
 * emu_very_late_tokens, emu_dropped_s), per engine dialect, plus the engine's own TTFT
 * histogram when it exposes one (vLLM / the emulator: vllm:time_to_first_token_seconds;
 * SGLang: sglang:time_to_first_token_seconds), stored as plain samples so that the notes
 * (report/notes.h) can take its change over a run:
 *   ttft_le_NN   the upper bound (seconds) of finite bucket NN (00, 01, ... ascending)
 *   ttft_cum_NN  its cumulative count
 *   ttft_count   the histogram's _count (the +Inf bucket), ttft_sum its _sum
 * (at most ST_METRICS_HIST_MAX finite buckets; an engine with more has its histogram left
 * out). */
#define ST_METRICS_HIST_MAX 48
/* Also vLLM's accepted draft tokens by position (vllm:spec_decode_num_accepted_tokens_per_pos,
 * label position="i"), as spec_accepted_pos_NN for the first ST_METRICS_SPEC_POS_MAX positions. */
#define ST_METRICS_SPEC_POS_MAX 16
#define ST_METRICS_SCRAPE_MAX (20 + 2 * ST_METRICS_HIST_MAX + 2 + ST_METRICS_SPEC_POS_MAX)

/* Fills out[0..return) (names are static strings; t is left for the caller). */
int st_metrics_scrape(st_metrics_dialect d, const char *body, size_t len, st_metrics_sample *out, int max);

/* How often to scrape, in wall milliseconds (a multiple of 50), for an engine running time_scale
 * emulated seconds per wall second (1 for a real engine): once per emulated second, but at most
 * every 100 ms of wall time and at least once a wall second. */
int st_metrics_scrape_interval_ms(double time_scale);

#endif
