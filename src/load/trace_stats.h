/* Traffic statistics over a trace's rows (load/trace.h), in one streaming pass and bounded
 * memory, and the serving advice they imply (docs/trace-format.md, "servetune trace stats").
 * No I/O: feed rows with st_trace_stats_add (st_trace_stats_row_cb fits st_trace_read_file).
 *
 * What is computed:
 *   rate      requests per minute over the trace's span: mean, p50, p95 and peak (the busiest
 *             minute), in req/s, over the complete minutes counted from the first request
 *             (none in a trace shorter than a minute); burstiness as the coefficient of variation (CV) of the gaps
 *             between arrivals (1 for Poisson arrivals, above 1 burstier), with the gamma
 *             shape 1/CV^2 that servetune bench --arrival gamma --burstiness takes to replay it;
 *   lengths   input, output and input+output percentiles (nearest rank; exact below 65536
 *             tokens, within 1/1024 above: an HDR histogram of fixed size);
 *   prefixes  the share of prompt tokens that belong to a prefix shared with another request,
 *             and the hit rate an ideal (unbounded) prefix cache of ST_TRAFFIC_CACHE_BLOCK-token
 *             blocks would get: Mooncake hash_ids blocks, servetune token ids (hashed in
 *             blocks, chained), and sessions (a later turn's history is the earlier prompt and
 *             answer). More than ST_TRAFFIC_KEYS_MAX distinct blocks: the figures become lower
 *             bounds (flagged);
 *   sessions  sessions, turns per session, share of requests that are later turns.
 * Advice (st_traffic_advise): --max-model-len from the p99 (and p95) of input+output with the
 * share of requests it would reject; the traffic against the KV cache (given in tokens, e.g.
 * from the engine model); whether prefix caching pays. */
#ifndef ST_TRACE_STATS_H
#define ST_TRACE_STATS_H
#include <jansson.h>
#include <stdint.h>

#include "load/hourly.h"
#include "load/trace.h"

#define ST_TRAFFIC_CACHE_BLOCK 16u           /* vLLM's KV block: the unit of prefix caching */
#define ST_TRAFFIC_KEYS_MAX (1u << 21)       /* distinct prefix blocks and sessions tracked */
#define ST_TRAFFIC_MINUTES_MAX (366u * 1440) /* per-minute rates over at most a year */
#define ST_TRAFFIC_LEN_MAX (1u << 23)        /* lengths above are counted in the top bucket */

typedef struct st_trace_stats st_trace_stats;

st_trace_stats *st_trace_stats_new(void);
void st_trace_stats_free(st_trace_stats *s);
/* Adds one row. 0, or -1 when out of memory. */
int st_trace_stats_add(st_trace_stats *s, const st_trace_row *row);
/* A st_trace_row_cb (arg: the st_trace_stats). */
int st_trace_stats_row_cb(void *arg, const st_trace_row *row, char *err, size_t errlen);

typedef struct st_len_pct {
    uint32_t p50, p90, p95, p99, max;
    double mean;
} st_len_pct;

typedef struct st_traffic {
    uint64_t requests;
    int has_times;
    double span_s;   /* first to last arrival */
    double mean_rps; /* (requests - 1) / span */
    double p50_minute_rps, p95_minute_rps, peak_minute_rps;
    uint32_t minutes;         /* complete minutes spanned */
    st_hourly_profile hourly; /* the rate in each hour of the day (load/hourly.h) */
    int minutes_capped;       /* the span exceeded ST_TRAFFIC_MINUTES_MAX: rates over the first part */
    double gap_cv;            /* NAN when unknown (fewer than 3 rows, or out of time order); of quantized
                            * times, the gaps with each tick's requests spread evenly over it */
    double quantum_s;         /* the times' coarse clock (load/trace.h st_trace_quantum; 0: none) */
    uint64_t quantum_ties;    /* requests that share a tick with the one before */
    double gap_cv_recorded;   /* the CV of the gaps as recorded (ties as zero gaps) */
    double gamma_shape;       /* 1 / gap_cv^2 (NAN when unknown) */
    uint64_t out_of_order;    /* rows earlier than the one before them */
    st_len_pct in, out, total;
    uint64_t prompt_tokens, output_tokens;
    uint64_t shared_tokens; /* prompt tokens in a prefix shared with another request */
    uint64_t hit_tokens;    /* prompt tokens an ideal prefix cache would serve */
    double shared_share;    /* shared_tokens / prompt_tokens */
    double ideal_hit_rate;  /* hit_tokens / prompt_tokens */
    int prefix_known;       /* the trace says how prompts overlap (hash ids, ids, sessions) */
    int prefix_lower_bound; /* ST_TRAFFIC_KEYS_MAX reached */
    uint64_t sessions;      /* distinct sessions */
    uint64_t later_turns;   /* requests that are turn 2 or later */
    double turns_mean;      /* per session */
    uint32_t turns_max;
} st_traffic;

/* Fills t from what was added. */
void st_trace_stats_result(const st_trace_stats *s, st_traffic *t);

/* Why a timed trace has no mean rate (mean_rps NaN: its requests span no time), as the text
 * outputs say it instead of "nan": "one request" or "every request at the same time". */
const char *st_traffic_no_rate_reason(uint64_t requests);

/* The share of requests whose input + output exceeds len (0..1). */
double st_trace_stats_share_above(const st_trace_stats *s, uint64_t len);

typedef struct st_traffic_engine {
    uint64_t kv_tokens;     /* KV cache size in tokens (0: unknown) */
    uint32_t max_model_len; /* the configuration's context limit (0: unknown) */
    uint32_t model_context; /* the model's own context, max_position_embeddings (0: unknown) */
    const char *what;       /* "Qwen/Qwen3-8B on H100, vLLM defaults" (may be NULL) */
} st_traffic_engine;

typedef enum { ST_PREFIX_UNKNOWN = 0, ST_PREFIX_LITTLE, ST_PREFIX_SOME, ST_PREFIX_PAYS } st_prefix_verdict;

/* Thresholds of the prefix-caching verdict on the ideal hit rate. */
#define ST_PREFIX_PAYS_AT 0.30
#define ST_PREFIX_SOME_AT 0.05

#define ST_TRAFFIC_ADVICE_LINES 8 /* lines of advice at most */

typedef struct st_traffic_advice {
    uint32_t mml_p99, mml_p95;     /* --max-model-len rounded up to ST_MML_ROUND from the p99 / p95,
                                    * at most the model's context (engine's model_context) */
    int mml_capped;                /* the p99 is above the model's context: mml_p99 is the context */
    double reject_p99, reject_p95; /* share of requests each would reject */
    double reject_current;         /* share the configuration's max_model_len rejects (NAN: unknown) */
    int kv_known;
    uint64_t kv_tokens;
    double kv_fit_mean, kv_fit_p99; /* requests of the mean / p99 input+output the KV cache holds at once */
    double kv_fill_e2e_s;           /* at the p95 minute rate, the KV cache fills when requests last longer */
    double share_over_kv;           /* requests longer than the whole KV cache */
    st_prefix_verdict prefix;
    char lines[ST_TRAFFIC_ADVICE_LINES][400]; /* the advice in words, in order */
    int n_lines;
} st_traffic_advice;

#define ST_MML_ROUND 256u

void st_traffic_advise(const st_trace_stats *s, const st_traffic *t, const st_traffic_engine *e, st_traffic_advice *a);

/* The whole picture as JSON (schema in docs/trace-format.md, "trace stats --json"): traffic,
 * advice, and what the reader read and skipped (counts may be NULL). New reference. */
json_t *st_traffic_json(const st_traffic *t, const st_traffic_advice *a, const st_trace_counts *c, st_trace_format fmt,
                        const char *path);

#endif
