/* Disaggregated prefill/decode on the engine model: a pool of prefill workers, a pool of decode
 * workers, and the KV cache sent from one to the other over a connector. Pure: no I/O.
 *
 *   - the KV transfer: bytes per prompt token from the model's shape and KV cache dtype (every
 *     layer's K and V), over the connector's bandwidth (each of a worker's GPUs sends its shard
 *     on its own link) after its latency;
 *   - per-worker rates from the engine model's step time (st_emu_step_seconds), the static
 *     arithmetic AIConfigurator uses (no queueing): a prefill worker prefills one request at a
 *     time in chunks of its token budget (its rate 1 / that time, zero when one request's
 *     prefill alone is over the TTFT SLO); a decode worker runs the largest batch whose step
 *     stays within the TPOT SLO, the KV cache and --max-num-seqs (its rate batch / (output
 *     tokens x step time)); a configuration that speculates (cfg->spec) decodes with its
 *     verification step, whose time per token (emu/specstep.h: the step over the tokens each
 *     step emits) stands for the step time in both;
 *   - AIConfigurator's rate matching: x prefill and y decode workers serve
 *     min(x P s_p, y D s_d) requests/s, s_p and s_d its correction scales (defaults 0.9 and 0.92,
 *     aiconfigurator/sdk/task.py, TaskConfig's disagg defaults; DisaggInferenceSession's
 *     match_workers in aiconfigurator/sdk/inference_session.py), the xPyD picked for the most
 *     requests/s per GPU at a given GPU count;
 *   - a prefill worker's link must carry its requests' KV: when x P s_p x bytes per request is
 *     more than its links carry, the link, not the prefill, sets the rate (said, with the
 *     bandwidth it needed). */
#ifndef ST_PLAN_DISAGG_H
#define ST_PLAN_DISAGG_H
#include <stddef.h>

#include "emu/config.h"

/* AIConfigurator's default correction scales for disaggregated serving (TaskConfig). */
#define ST_DISAGG_PREFILL_SCALE 0.9
#define ST_DISAGG_DECODE_SCALE 0.92
/* Workers of one kind at most in an xPyD search. */
#define ST_DISAGG_WORKERS_MAX 64

typedef struct st_disagg_link {
    const char *name;   /* "nvlink", "infiniband", "pcie", "ethernet" */
    double bytes_per_s; /* one GPU's link, one direction */
    double latency_s;   /* a transfer's fixed cost */
    const char *source; /* where the bandwidth comes from */
} st_disagg_link;

/* The connector presets by name (case-insensitive). 0, or -1 when unknown (names lists them). */
int st_disagg_link_find(const char *name, st_disagg_link *out);
/* The preset names, comma-separated (for messages and --help). */
const char *st_disagg_link_names(void);
/* The connector a worker on gpu uses when none is named: NVLink where the GPU has it (an
 * all-reduce link of 100 GB/s or more in the catalog), else PCIe. */
const char *st_disagg_link_default(const char *gpu);

/* KV cache bytes of one token (the whole model: every layer's K and V) in kv's dtype. */
double st_disagg_kv_bytes_per_token(const st_emu_model *m, st_emu_dtype kv);
/* Seconds to send `tokens` tokens' KV from a worker of tp GPUs over l. */
double st_disagg_transfer_s(const st_disagg_link *l, int tp, double tokens, double bytes_per_token);

/* AIConfigurator's rate matching: min(x P s_p, y D s_d). */
double st_disagg_rate_match(double prefill_rps, int x, double s_p, double decode_rps, int y, double s_d);

/* The workload and SLO of a disaggregated estimate. */
typedef struct st_disagg_work {
    double input_tokens;           /* mean prompt */
    double cached_tokens;          /* of which a shared prefix the prefill worker has cached */
    double output_tokens;          /* mean output */
    double ttft_slo_s, tpot_slo_s; /* 0: none */
    double window_s;               /* queueing runs (plan/disagg_sim.h): arrivals over at least this long
                                      (the spec's search.min_window); 0: the requests given */
    double growth_p;               /* and a TTFT trend is growth below this p-value (1 - the spec's
                                      search.confidence); 0: no growth test */
} st_disagg_work;

struct st_spec;
/* The workload and SLO of spec (its mean prompt, shared prefix, output; SLO terms 0 and 1). */
void st_disagg_work_of_spec(const struct st_spec *spec, st_disagg_work *out);

typedef struct st_disagg_worker {
    double prefill_rps;   /* one prefill worker (0: one prefill alone is over the TTFT SLO) */
    double prefill_s;     /* one request's prefill */
    double decode_rps;    /* one decode worker (0: no batch within the TPOT SLO) */
    double decode_batch;  /* its batch */
    double decode_step_s; /* its step time (the TPOT); speculating, its time per token */
    double kv_bytes;      /* one request's KV sent */
} st_disagg_worker;

/* Per-worker rates of cfg (resolved by st_emu_memory_plan, mem its plan). 0, or -1 with why. */
int st_disagg_worker_rates(const st_emu_config *cfg, const st_emu_memory *mem, const st_disagg_work *w,
                           st_disagg_worker *out, char *why, size_t n);

typedef struct st_disagg_pick {
    int x, y;   /* prefill and decode workers */
    double rps; /* rate matched, correction scales applied, link limit applied */
    double rps_per_gpu;
    double transfer_s;    /* one request's KV transfer */
    double link_need_bps; /* what each prefill worker's links must carry at that rate */
    int link_limited;     /* the link, not the prefill, sets the rate */
    double ttft_s;        /* static: prefill + transfer (no queueing) */
    double tpot_s;        /* static: the decode step */
} st_disagg_pick;

/* The xPyD of total_gpus GPUs (workers of tp GPUs each, x + y = total_gpus / tp, both >= 1) with
 * the most requests/s per GPU (ties: fewer prefill workers). 0, or -1 when none serves. */
int st_disagg_best(const st_disagg_worker *wk, int tp, int total_gpus, double s_p, double s_d, const st_disagg_link *l,
                   st_disagg_pick *out);

#endif
