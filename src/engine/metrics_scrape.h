/* Turns one /metrics scrape into the audit's generic samples (engine/metrics.h names:
 * kv_usage, running, waiting, preemptions, prefix_hits, prefix_queries, prompt_tokens,
 * generation_tokens, prefix_hit_rate), per engine dialect. The Prometheus text parsing itself belongs to
 * engine/metrics (LOAD helper); this is only the audit's glue. */
#ifndef ST_ENGINE_METRICS_SCRAPE_H
#define ST_ENGINE_METRICS_SCRAPE_H
#include <stddef.h>

#include "audit/store.h"

#define ST_SCRAPE_MAX 16

/* Fills out[0..return) (names are static strings; t is left for the caller). */
int st_scrape_parse(const char *dialect, const char *body, size_t len, st_metric_sample *out, int max);

#endif
