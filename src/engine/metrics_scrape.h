/* Turns one /metrics scrape into the audit's generic samples (engine/metrics.h names:
 * kv_usage, running, waiting, preemptions, prefix_hits, prefix_queries, prompt_tokens,
 * generation_tokens, prefix_hit_rate), per engine dialect, plus the engine's own TTFT
 * histogram when it exposes one (vLLM / the emulator: vllm:time_to_first_token_seconds;
 * SGLang: sglang:time_to_first_token_seconds), stored as plain samples so that the notes
 * (audit/notes.h) can take its change over a run:
 *   ttft_le_NN   the upper bound (seconds) of finite bucket NN (00, 01, ... ascending)
 *   ttft_cum_NN  its cumulative count
 *   ttft_count   the histogram's _count (the +Inf bucket), ttft_sum its _sum
 * (at most ST_SCRAPE_HIST_MAX finite buckets; an engine with more has its histogram left
 * out). The Prometheus text parsing itself belongs to engine/metrics; this is
 * only the audit's glue. */
#ifndef ST_ENGINE_METRICS_SCRAPE_H
#define ST_ENGINE_METRICS_SCRAPE_H
#include <stddef.h>

#include "audit/store.h"

#define ST_SCRAPE_HIST_MAX 48
#define ST_SCRAPE_MAX (16 + 2 * ST_SCRAPE_HIST_MAX + 2)

/* Fills out[0..return) (names are static strings; t is left for the caller). */
int st_scrape_parse(const char *dialect, const char *body, size_t len, st_metric_sample *out, int max);

/* How often to scrape, in wall milliseconds (a multiple of 50), for an engine running time_scale
 * emulated seconds per wall second (1 for a real engine): once per emulated second, but at most
 * every 100 ms of wall time and at least once a wall second. */
int st_scrape_interval_ms(double time_scale);

#endif
