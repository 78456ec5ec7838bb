/* The client's traffic in an audit: the trace's statistics and the advice they imply
 * (load/trace_stats.h), with the KV cache of the configuration from the engine model. The
 * audit stores the result (JSON, schema servetune.traffic/1) for the report's "Your traffic"
 * section; `servetune trace stats` prints the same. */
#ifndef ST_AUDIT_TRAFFIC_H
#define ST_AUDIT_TRAFFIC_H
#include <stddef.h>

#include "audit/spec.h"
#include "core/buf.h"
#include "load/trace_stats.h"

/* The KV cache and max_model_len the engine model gives `vllm serve` with argv ("serve" MODEL
 * FLAGS...; gpu when --gpu is not among the flags). what gets "MODEL on GPU". 0, or -1 with the
 * reason (the configuration would not start, unknown model or GPU). */
int st_traffic_engine_model(int argc, char **argv, const char *gpu, st_traffic_engine *e, char *what, size_t whatlen,
                            char *err, size_t errlen);

/* Reads the spec's trace and returns the traffic JSON (malloc'd string) for the baseline
 * configuration. 0, or -1 with err (the trace cannot be read). A baseline the engine model
 * does not know leaves the KV figures out. */
/* The --max-model-len a plan gives its candidates when the spec sets none: the trace's longest
 * prompt + output (after the spec's filters) rounded up to ST_MML_ROUND, at most the model's own
 * context (the baseline's, per the engine model; *capped 1 then). *reject: the share of the
 * trace's requests longer than it, which every run leaves out (st_sweep_workload_ctx) rather than
 * sending them to be refused. 0, or -1 with err (the trace cannot be read). */
int st_traffic_len_auto(const st_spec *s, long *len, double *reject, int *capped, char *err, size_t errlen);

/* `peak_rate: trace`: sets s->peak_rate to the trace's busiest complete minute (after the spec's
 * trace filters), or its mean rate when it spans less than a minute, and s->peak_source to say
 * which. Nothing for a stated peak. 0, or -1 with err (the trace cannot be read, or has no
 * timestamps to take a rate from). */
int st_audit_resolve_peak(st_spec *s, char *err, size_t errlen);
/* The trace's busiest complete minute in req/s (NAN: no complete minute, no timestamps). */
double st_audit_trace_peak(const st_spec *s, double *mean_rps, char *err, size_t errlen);

/* A traffic day from the trace (spec traffic.hourly_rps: trace, or none with a trace workload):
 * sets s->traffic's hourly rates from h (load/hourly.h: the rate in each hour of the day the
 * trace covers, after the spec's trace filters), the hours it covers as the ones priced, and the
 * day's source (UTC, or hours from the first request). Nothing for a stated day. */
void st_audit_day_from_hourly(st_spec *s, const st_hourly_profile *h);
/* Reads the spec's trace for st_audit_day_from_hourly. A trace that covers no hour for long
 * enough leaves the day unpriced (hours_known 0), which is no error. 0, or -1 with err (the trace
 * cannot be read). */
int st_audit_resolve_day(st_spec *s, char *err, size_t errlen);
/* One sentence on where s's traffic day comes from, into b (plain text): nothing for a stated day;
 * "The day is the trace's own: ..." with its clock and the hours it covers. */
void st_audit_day_source_say(const st_spec *s, st_buf *b);

/* workload.trace_replay: spread: o (the reader's options for the spec's trace) gains a sample
 * fraction so that about n of the N requests it keeps are read, as whole sessions spread over the
 * whole trace (deterministic, seeded by workload.seed); nothing when N <= n. 0, or -1 with err. */
int st_audit_trace_spread(const st_spec *s, st_trace_opts *o, uint64_t n, char *err, size_t errlen);

/* What an audit's runs replay of the trace: each run sends the trace's first requests (a burst
 * run requests_per_rate of them; a sustained run as many as its duration needs, at least
 * search.min_window_requests), or with trace_replay: spread a sample of that many spread over the
 * whole trace, so a long trace is replayed only in part, and that part may share prefixes far
 * less than the whole (reuse grows with the span, and thins with a sample). */
typedef struct st_replay_share {
    uint64_t replayed, total;     /* requests a run replays (at least), of the trace's kept requests */
    int at_least;                 /* a sustained run: replayed is the least it replays */
    int spread;                   /* a sample over the whole trace (trace_replay: spread), not its first rows */
    int prefix_known;             /* the trace says how prompts overlap */
    double hit_replayed, hit_all; /* the ideal prefix-cache hit rate of those first requests, of the whole */
    int differs;                  /* the two differ by more than ST_REPLAY_HIT_DIFF (absolute) */
} st_replay_share;
#define ST_REPLAY_HIT_DIFF 0.05
/* 0, or -1 with err (the trace cannot be read). */
int st_audit_replay_share(const st_spec *s, st_replay_share *out, char *err, size_t errlen);
/* One sentence about *r into b when the runs replay a part of the trace (nothing otherwise). */
void st_replay_share_say(const st_replay_share *r, st_buf *b);

int st_audit_traffic_json(const st_spec *s, char **json, char *err, size_t errlen);

#endif
