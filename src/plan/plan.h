/* The plan's search: which candidate (GPU x GPUs per replica x weight format x KV cache dtype x
 * engine limits) serves the traffic within the SLO for the least money, found with as few
 * exact evaluations as the answer needs. Pure: the engine is behind two callbacks
 * (st_plan_ops), so the search is tested with engines whose answer is known
 * (docs/plan.md derives it).
 *
 * Branch and bound on cost:
 *   1. screen every candidate: does it fit (the memory plan), and an upper bound on any rate
 *      it can sustain. No sustained rate is above it, so price x GPUs / (bound x output tokens
 *      per request x 3600) x 1e6 is a lower bound on the candidate's $ per 1M output tokens;
 *   2. take the candidates in order of that lower bound (a heap): a candidate with the screen's
 *      coarse bound gets a tighter one (refine) and goes back in its new place; one with a tight
 *      bound is evaluated exactly (the sustained search at the SLO). Stop when the top_k best
 *      costs found are all at or below the lowest bound left: nothing left can enter the top k.
 *      Candidates not evaluated are reported as "pruned" with their bound. A candidate whose screen says it behaves as one already evaluated (same)
 *      takes that one's results without an evaluation of its own.
 * Screens run on `threads` threads; evaluations in order, one at a time.
 * The frontiers are over the evaluated candidates that met the SLO: $ per 1M output tokens
 * against p95 TTFT at capacity, and against the weight format's quality risk (bf16 0, fp8 1,
 * 8-bit integer 2, 4-bit 3). */
#ifndef ST_PLAN_PLAN_H
#define ST_PLAN_PLAN_H
#include <stddef.h>
#include <stdint.h>

#include "plan/prices.h"
#include "audit/spec.h"

/* Candidates searched without asking: a larger space is refused with its count unless
 * --max-candidates raises the limit (st_plan_enumerate's max). */
#define ST_PLAN_MAX_CANDIDATES 20000
/* Candidates the CLI takes from the heap at once (refined or evaluated on the worker threads): a
 * constant, not the core count, so what the search does and finds is the same on any machine. */
#define ST_PLAN_BATCH 4
#define ST_PLAN_BATCH_MAX 64
#define ST_PLAN_WHY_MAX 240

typedef enum st_plan_state {
    ST_PLAN_REFUSED = 0, /* does not fit or cannot run: why says which constraint */
    ST_PLAN_PRUNED,      /* fits; its cost bound cannot reach the top k: not evaluated */
    ST_PLAN_NONE_PASSED, /* evaluated: met the SLO at no rate */
    ST_PLAN_OK,          /* evaluated: capacity and cost known */
} st_plan_state;
const char *st_plan_state_name(st_plan_state s); /* "refused", "pruned", "none passed", "ok" */

/* Whether speculative decoding pays on a candidate (st_plan_model_spec_pay, docs/plan.md
 * "Speculative decoding"): the engine model's verification step against a plain decode step
 * (emu/specstep.h) at the workload's mean context. */
typedef struct st_plan_spec_pay {
    int ok;               /* figures computed */
    double ratio_1;       /* TPOT speculating / plain at one sequence (below 1: it pays) */
    uint32_t breakeven;   /* the batch (1, 2, 4, ...) from which it no longer pays; 0: pays up to max_num_seqs */
    double breakeven_rps; /* about the request rate at which plain decoding runs that batch */
    double batch_at_cap;  /* about the batch the candidate runs at its capacity */
    double ratio_at_cap;  /* TPOT speculating / plain at that batch */
} st_plan_spec_pay;

typedef struct st_plan_candidate {
    /* what it is (strings not owned) */
    const char *gpu;                               /* the GPU (catalog key) */
    int tp;                                        /* GPUs per replica */
    const char *weights;                           /* "bf16", "fp8", "int8", "awq", "gptq" */
    const char *model;                             /* the checkpoint served */
    const char *kv_dtype;                          /* "auto", "fp8" */
    long max_num_seqs, max_batched, max_model_len; /* 0: the engine's default */
    const st_plan_specm *spec;                     /* speculative decoding (NULL: none): method and acceptance */
    int spec_k;                                    /* its draft tokens (num_speculative_tokens) */
    const st_spec_accept *spec_acc;                /* the acceptance it is planned with (st_plan_spec_accept) */
    int base_spec; /* 1: the baseline's own --speculative-config stays (the current setup); 0: it leaves */
    double price_per_gpu_hour;
    const char *provider; /* where the price comes from */
    /* what the search found */
    st_plan_state state;
    char why[ST_PLAN_WHY_MAX]; /* refused / none passed: the reason */
    double bound_rps;          /* screen: no rate above it is sustained */
    double bound_tps;          /* screen, when > 0: a proven bound on the output tokens/s of any
                                  sustained rate (the cost bound uses the lower of it and
                                  bound_rps x the most output tokens per request) */
    int bound_estimate;        /* 1: bound_rps is refine's estimate (a simulation with a margin),
                                  not the screen's proven bound */
    double est_tps;            /* refine's estimate of the output tokens/s of any sustained rate (the
                                  saturated run's with the same margin; 0: none): the cost bound
                                  uses the lowest of it, bound_tps and bound_rps x the most output
                                  tokens per request */
    double lb_usd_per_1m;      /* the cost bound from it */
    double capacity_rps;       /* sustained capacity at the SLO (OK) */
    int capacity_capped;       /* no rate above it failed (the search's highest rate passed): a lower bound */
    double output_tps;         /* output tokens/s at capacity */
    double ttft_p95_ms, tpot_p95_ms;
    double usd_per_1m;
    uint64_t same;   /* screen: candidates with the same nonzero value behave the same on the engine
                        (e.g. a --max-num-seqs their batch never reaches): one is evaluated for all */
    int rank;        /* 1 = cheapest evaluated; 0 when not OK */
    int on_frontier; /* bit 0: $ vs p95 TTFT, bit 1: $ vs quality risk */
    /* measured drift of its checkpoint and KV cache against the current setup's (an audit's
     * quality pass, st_plan_quality_apply): mean KL divergence, nats */
    int has_kld;
    double kld;
    /* speculation on a pick (the CLI fills it for the top candidates): its own figures when it
     * speculates, else its speculative twin's (the same candidate with speculation: spec_twin, -1
     * when the plan tried none) */
    st_plan_spec_pay pay;
    int spec_twin;
} st_plan_candidate;

/* One measured configuration: checkpoint, KV cache dtype ("auto", "fp8") and its mean KL
 * divergence against the baseline (0 for the baseline itself). */
typedef struct st_plan_qmeasure {
    const char *model;
    const char *kv_dtype;
    double kld;
} st_plan_qmeasure;
/* Gives every candidate with the same checkpoint and KV cache dtype as a measurement its figure;
 * the number of candidates given one. */
int st_plan_quality_apply(st_plan_candidate *c, int n, const st_plan_qmeasure *m, int nm);
/* 1 when every candidate that met the SLO has a measured figure: the cost-vs-quality frontier is
 * then over the measured mean KL divergence instead of the format's quality risk. */
int st_plan_quality_measured(const st_plan_candidate *c, int n);

/* The quality risk of a weight format: bf16/fp16 0, fp8 1, int8 2, awq/gptq (4-bit) 3. */
int st_plan_quality_risk(const char *weights);

typedef struct st_plan_ops {
    /* Fills c->bound_rps (> 0) when c fits, else returns -1 with the reason (which limit). Cheap:
     * called for every candidate, from several threads at once (one candidate each). */
    int (*screen)(void *arg, st_plan_candidate *c, char *why, size_t whylen);
    /* A tighter bound (c->bound_rps lowered, never raised) and c->same, for the candidates the
     * screen's bound leaves in the race; NULL: the screen's bound is final. -1: refused (why). */
    int (*refine)(void *arg, st_plan_candidate *c, char *why, size_t whylen);
    /* The sustained search: fills capacity_rps, output_tps, ttft_p95_ms, tpot_p95_ms (capacity 0:
     * met the SLO at no rate, why says how). 0, or -1 with why when it could not run. */
    int (*evaluate)(void *arg, st_plan_candidate *c, char *why, size_t whylen);
    void *arg;
} st_plan_ops;

typedef struct st_plan_stats {
    int candidates, refused, screened, evaluated, pruned, passed;
    int refined;       /* tighter bounds computed */
    int shared;        /* results taken from an equivalent candidate's evaluation (same) */
    int pruned_proven; /* of pruned: on the screen's proven bound (the rest on refine's estimate) */
} st_plan_stats;

/* Where a search stands, for a progress line: candidates settled (evaluated, shared, refused),
 * pruned so far (the heap's entries the k-th cost already beats), left (still in the race),
 * seconds since the search began. */
typedef struct st_plan_progress {
    int done, pruned, left, refined;
    double seconds;
} st_plan_progress;

typedef struct st_plan_search_opts {
    int threads; /* worker threads for the screens, refines and evaluations (>= 1) */
    int batch;   /* candidates taken from the heap at once (1..ST_PLAN_BATCH_MAX; 0: 1) */
    /* called after the screens and after each batch (may be NULL); from the calling thread */
    void (*progress)(void *arg, const st_plan_progress *p);
    void *progress_arg;
} st_plan_search_opts;

/* Searches c[0..n): every candidate ends in one of the states above, the OK ones with usd_per_1m
 * and rank, the frontiers marked. out_tokens: the most output tokens per request (for the bound:
 * a candidate is priced on the tokens its runs delivered).
 * top_k >= 1. Returns the index of the cheapest OK candidate, or -1 when none met the SLO. */
int st_plan_search(st_plan_candidate *c, int n, int top_k, double out_tokens, const st_plan_ops *ops, int threads,
                   st_plan_stats *stats);
/* The same with options (progress). The candidates are taken o->batch at a time, lowest cost
 * bound first (st_plan_search: one at a time); a batch's refines and evaluations run on
 * o->threads threads and are merged in order, so the result does not depend on the thread
 * count (a batch may evaluate a candidate that one at a time would have pruned). */
int st_plan_search_opt(st_plan_candidate *c, int n, int top_k, double out_tokens, const st_plan_ops *ops,
                       const st_plan_search_opts *o, st_plan_stats *stats);

/* Indexes of the OK candidates cheapest first (ties: higher capacity, then lower p95 TTFT, then
 * order), at most max. Returns how many. */
int st_plan_order(const st_plan_candidate *c, int n, int *idx, int max);

/* The search space of a spec's plan block, defaults where it is silent (docs/plan.md):
 *   gpus            plan.gpus, else every GPU of the engine model's catalog with a price of the
 *                   kind asked (on-demand) in p from provider (NULL: any)
 *   gpus_per_replica plan.gpus_per_replica, else 1, 2, 4, 8
 *   weights         plan.checkpoints, else bf16 = the baseline's model
 *   kv_cache_dtype  plan.kv_cache_dtype, else auto and fp8
 *   max_num_seqs    plan.max_num_seqs, else 64, 128, 256, 512
 *   max_num_batched_tokens  plan.max_num_batched_tokens, else 2048, 8192
 *   max_model_len   plan.max_model_len, else len_auto (the caller's: the workload's longest, at most the model's context)
 * *out (malloc'd, strings point into s and p) gets every combination. 0, or -1 with err: a GPU
 * named that has no price (which list, which provider), a GPU the engine model does not know,
 * no GPU at all, or more than max combinations (max <= 0: ST_PLAN_MAX_CANDIDATES; the message
 * gives the count and asks for --max-candidates). */
int st_plan_enumerate(const st_spec *s, const st_prices *p, const char *provider, long len_auto,
                      st_plan_candidate **out, int *n, char *err, size_t errlen);
int st_plan_enumerate_max(const st_spec *s, const st_prices *p, const char *provider, long len_auto, long max,
                          st_plan_candidate **out, int *n, char *err, size_t errlen);

/* Speculation variants: every usable (method, k) of plan.speculation, each beside every plain
 * candidate. A method is usable when it has an acceptance (its own, else the spec's speculation
 * block): the plan never invents one. Returns how many variants; why (may be NULL) says what
 * was not considered and why, or is empty when every method was. */
int st_plan_spec_variants(const st_spec *s, char *why, size_t whylen);
/* The acceptance method m is tried with at its q-th k: the trace's replay for that k (acceptance:
 * trace), else its own, else the spec's speculation block's; NULL: none. */
const st_spec_accept *st_plan_spec_accept(const st_spec *s, const st_plan_specm *m, int q);

/* The spec's own baseline as a candidate (its GPU, GPUs per replica, price, model and flags): the
 * "current setup" every candidate is compared with. Strings point into s. */
void st_plan_baseline(const st_spec *s, st_plan_candidate *out);

#endif
