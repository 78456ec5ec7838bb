/* The plan's candidates on the engine model (st_plan_ops for plan/plan.h): each candidate
 * becomes the audit spec that would measure it (plan/plan_spec.h), and
 *   screen    builds its engine configuration from that spec's flags, refuses it with vLLM's own
 *             message when the memory plan does (weights, KV cache, max model length), and bounds
 *             its capacity by its maximum throughput: a closed loop that keeps the engine's batch
 *             full (max_num_seqs clients) on the spec's workload, the completions per second
 *             in the middle half of that run, times ST_PLAN_BOUND_MARGIN;
 *   evaluate  runs the sustained search of `servetune predict` on that spec (st_sweep_bisect
 *             on the engine-model executor): the capacity and the latency at it.
 * No I/O besides the engine model's virtual time. */
#ifndef ST_PLAN_PLAN_MODEL_H
#define ST_PLAN_PLAN_MODEL_H
#include <signal.h>
#include <stddef.h>

#include "plan/plan.h"
#include "audit/spec.h"

/* The bound's margin over the measured maximum throughput (the closed loop's middle half is a
 * sample: a bound that is slightly low could prune the best candidate). */
#define ST_PLAN_BOUND_MARGIN 1.25
/* Requests per client in the saturation run (at least ST_PLAN_BOUND_MIN in all). */
#define ST_PLAN_BOUND_PER_CLIENT 3
#define ST_PLAN_BOUND_MIN 200
#define ST_PLAN_BOUND_MAX 6000

typedef struct st_plan_model st_plan_model;

/* The evaluator for the user's spec (name and text: the candidates' specs are made from it).
 * tolerance: of the capacity search. 0, or -1 with err (the spec's workload cannot be built). */
int st_plan_model_new(const char *base_name, const char *base_text, size_t base_len, const st_spec *base,
                      double tolerance, st_plan_model **out, char *err, size_t errlen);
void st_plan_model_free(st_plan_model *m);
/* The interruption flag (a SIGINT/SIGTERM handler sets it): the engine-model runs of every
 * callback stop within a step, and the callbacks refuse ("interrupted"). */
void st_plan_model_set_stop(st_plan_model *m, volatile sig_atomic_t *stop);
/* st_plan_ops backed by m (screens may run on several threads at once). */
void st_plan_model_ops(st_plan_model *m, st_plan_ops *ops);
/* Saturation runs done, and those a memo answered (candidates that differ only in a limit the
 * run never reached share one). */
void st_plan_model_counts(const st_plan_model *m, int *runs, int *memo_hits);

/* Whether speculation pays on candidate c (one that speculates, docs/plan.md "Speculative
 * decoding"): the TPOT ratio speculating / plain at one sequence, the batch (1, 2, 4, ... up to
 * its --max-num-seqs) from which it no longer pays and the rate at which plain decoding runs that
 * batch, and the ratio at the batch candidate `at` runs at its capacity (c itself, or the plain
 * pick c is the twin of). 0, or -1 with why. */
int st_plan_model_spec_pay(st_plan_model *m, const st_plan_candidate *c, const st_plan_candidate *at,
                           st_plan_spec_pay *out, char *why, size_t n);

#endif
