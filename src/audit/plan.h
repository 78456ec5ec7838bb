/* The plan's search: which candidate (GPU x GPUs per replica x weight format x KV cache dtype x
 * engine limits) serves the traffic within the SLO for the least money, found with as few
 * exact evaluations as the answer needs. Pure: the engine is behind two callbacks
 * (st_plan_ops), so the search is tested with engines whose answer is known
 * (docs/plan.md derives it).
 *
 * Branch and bound on cost:
 *   1. screen every candidate: does it fit (the memory plan), and an upper bound on any rate
 *      it can sustain (its maximum throughput, saturated). No sustained rate is above it, so
 *      price x GPUs / (bound x output tokens per request x 3600) x 1e6 is a lower bound on the
 *      candidate's $ per 1M output tokens;
 *   2. evaluate exactly (the sustained search at the SLO) in order of that lower bound, and stop
 *      when the top_k best costs found are all at or below the next candidate's lower bound:
 *      nothing left can enter the top k. Candidates not evaluated are reported as "pruned"
 *      with their bound.
 * The frontiers are over the evaluated candidates that met the SLO: $ per 1M output tokens
 * against p95 TTFT at capacity, and against the weight format's quality risk (bf16 0, fp8 1,
 * 8-bit integer 2, 4-bit 3). */
#ifndef ST_AUDIT_PLAN_H
#define ST_AUDIT_PLAN_H
#include <stddef.h>
#include <stdint.h>

#define ST_PLAN_MAX_CANDIDATES 20000
#define ST_PLAN_WHY_MAX 240

typedef enum st_plan_state {
    ST_PLAN_REFUSED = 0, /* does not fit or cannot run: why says which constraint */
    ST_PLAN_PRUNED,      /* fits; its cost bound cannot reach the top k: not evaluated */
    ST_PLAN_NONE_PASSED, /* evaluated: met the SLO at no rate */
    ST_PLAN_OK,          /* evaluated: capacity and cost known */
} st_plan_state;
const char *st_plan_state_name(st_plan_state s); /* "refused", "pruned", "none passed", "ok" */

typedef struct st_plan_candidate {
    /* what it is (strings not owned) */
    const char *gpu;                               /* the GPU (catalog key) */
    int tp;                                        /* GPUs per replica */
    const char *weights;                           /* "bf16", "fp8", "int8", "awq", "gptq" */
    const char *model;                             /* the checkpoint served */
    const char *kv_dtype;                          /* "auto", "fp8" */
    long max_num_seqs, max_batched, max_model_len; /* 0: the engine's default */
    double price_per_gpu_hour;
    const char *provider; /* where the price comes from */
    /* what the search found */
    st_plan_state state;
    char why[ST_PLAN_WHY_MAX]; /* refused / none passed: the reason */
    double bound_rps;          /* screen: no rate above it is sustained */
    double lb_usd_per_1m;      /* the cost bound from it */
    double capacity_rps;       /* sustained capacity at the SLO (OK) */
    double output_tps;         /* output tokens/s at capacity */
    double ttft_p95_ms, tpot_p95_ms;
    double usd_per_1m;
    int rank;        /* 1 = cheapest evaluated; 0 when not OK */
    int on_frontier; /* bit 0: $ vs p95 TTFT, bit 1: $ vs quality risk */
} st_plan_candidate;

/* The quality risk of a weight format: bf16/fp16 0, fp8 1, int8 2, awq/gptq (4-bit) 3. */
int st_plan_quality_risk(const char *weights);

typedef struct st_plan_ops {
    /* Fills c->bound_rps (> 0) when c fits, else returns -1 with the reason (which limit). */
    int (*screen)(void *arg, st_plan_candidate *c, char *why, size_t whylen);
    /* The sustained search: fills capacity_rps, output_tps, ttft_p95_ms, tpot_p95_ms (capacity 0:
     * met the SLO at no rate, why says how). 0, or -1 with why when it could not run. */
    int (*evaluate)(void *arg, st_plan_candidate *c, char *why, size_t whylen);
    void *arg;
} st_plan_ops;

typedef struct st_plan_stats {
    int candidates, refused, screened, evaluated, pruned, passed;
} st_plan_stats;

/* Searches c[0..n): every candidate ends in one of the states above, the OK ones with usd_per_1m
 * and rank, the frontiers marked. out_tokens: mean output tokens per request (for the bound).
 * top_k >= 1. Returns the index of the cheapest OK candidate, or -1 when none met the SLO. */
int st_plan_search(st_plan_candidate *c, int n, int top_k, double out_tokens, const st_plan_ops *ops,
                   st_plan_stats *stats);

/* Indexes of the OK candidates cheapest first (ties: higher capacity, then lower p95 TTFT, then
 * order), at most max. Returns how many. */
int st_plan_order(const st_plan_candidate *c, int n, int *idx, int max);

#endif
