/* The HTML report of an audit: the adapter from the audit's report model (report/report.h)
 * and its result store to the HTML renderer's input (report/html.h).
 *
 * From the model: title, headline (st_report_headline), setup, the results rows (capacity,
 * bracket, grid/refined/sustained, output tok/s, $ per 1M, vs current, p95s, replicas,
 * monthly), what each configuration changes, the rate points of every configuration, and
 * notes from the same facts the markdown report states. From the store: the per-request
 * TTFT/TPOT of the capacity run (the lowest measured rate when nothing passed) and the
 * /metrics samples of every run.
 *
 * Metric names read from the store: the generic names of engine/metrics.h (kv_usage,
 * running, waiting, preemptions), else these spellings (a "vllm:"-style prefix is ignored):
 *   KV cache usage (fraction): kv_cache_usage, kv_cache_usage_perc, gpu_cache_usage_perc,
 *                              token_usage, kv_cache_usage_ratio
 *   running:                   num_running, running, num_requests_running, num_running_reqs
 *   waiting:                   num_waiting, waiting, num_requests_waiting, num_queue_reqs
 *   preemptions:               num_preemptions, preemptions, num_preemptions_total,
 *                              preemptions_total (a counter: drawn as the increase since the
 *                              run's first sample)
 * Samples with the same time form one point; other names are ignored. */
#ifndef ST_REPORT_HTML_AUDIT_H
#define ST_REPORT_HTML_AUDIT_H
#include <stddef.h>

#include "audit/store.h"
#include "core/buf.h"
#include "report/report.h"

typedef struct st_html_audit_opts {
    int prediction; /* made by the engine model (servetune predict): the PREDICTION banner */
} st_html_audit_opts;

/* Renders the report of r into out. s may be NULL: then no latency distributions and no
 * timelines (the model alone has neither). opts may be NULL. 0, or -1 with err. */
int st_report_html(const st_report *r, st_store *s, const st_html_audit_opts *opts, st_buf *out, char *err,
                   size_t errlen);

/* Loads the model from s and writes DIR/report.html atomically. 0, or -1 with err. */
int st_report_html_write(st_store *s, const char *dir, const st_html_audit_opts *opts, char *err, size_t errlen);

#endif
