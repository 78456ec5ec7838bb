/* Disaggregated prefill/decode with queueing in both pools, on the engine model in virtual time
 * (emu/pool.h). Requests arrive open loop (Poisson at the rate) at a pool of x prefill engines,
 * each routed to the least loaded; a prefill engine runs the prompt and samples one token (its
 * answer, max_tokens 1). Then its KV cache goes to the decode pool over the prefill engine's
 * link (plan/disagg.h's connector: latency + prompt tokens x bytes per token / bandwidth; one
 * transfer after another on each prefill engine's link, so a link that cannot keep up queues).
 * Then a pool of y decode engines, the request routed to the least loaded, arriving with its
 * prompt's KV cache present (st_emu_req_params.kv_external: the last prompt token recomputed,
 * as vLLM's scheduler does, then the decode). TTFT runs from the arrival to the decode engine's
 * first token (prefill queue + prefill + answer + transfer + decode queue + first step), TPOT is
 * each request's (last - first token) / (tokens - 1). Pure: no I/O. */
#ifndef ST_PLAN_DISAGG_SIM_H
#define ST_PLAN_DISAGG_SIM_H
#include <stddef.h>
#include <stdint.h>

#include "emu/config.h"
#include "emu/sim.h"
#include "plan/disagg.h"

/* The most requests of one run (its time: about a second a pool at the engine model's ~20,000
 * requests/s with 300-token outputs, docs/engine-model.md "Speed", build/bench/simspeed). */
#define ST_DISAGG_SIM_MAX_REQUESTS 20000u

/* One offered rate of an xPyD. */
typedef struct st_disagg_sim {
    double rate;       /* offered requests/s of the whole setup */
    uint32_t n;        /* requests simulated */
    uint32_t answered; /* of them, every output token delivered */
    double ttft_p50_s, ttft_p95_s;
    double tpot_p50_s, tpot_p95_s;
    double prefill_p95_s;  /* arrival -> the prefill engine's answer (its queue and prefill) */
    double transfer_p95_s; /* the answer -> the KV at the decode pool (the link's queue included) */
    double duration_s;     /* the first arrival to the last token */
    double ttft_slope;     /* TTFT against the arrival time (s/s): a growing queue when > 0 */
    int growing;           /* that slope is growth: over ST_SUSTAIN_GROWTH_MARGIN and significant at
                              w->growth_p (the sustained search's test, audit/sustain.h) */
    int meets;             /* every request answered, no growth, p95 TTFT and TPOT within the SLO (0: no term) */
} st_disagg_sim;

/* The xPyD of x prefill and y decode engines of cfg (resolved by st_emu_memory_plan), each of tp
 * GPUs, over link l, at `rate`: items[0..n) (input ids, lengths, chat; arrivals replaced by a
 * Poisson schedule from seed; session fields must be unset), w's SLO. When rate x w->window_s is
 * more than n, the run takes that many requests (at most ST_DISAGG_SIM_MAX_REQUESTS): the items
 * again, each copy keeping the prefix its item shares with the next one (a shared system prompt)
 * and fresh tokens after it (a repeated prompt would be a prefix-cache hit). 0, or -1 with why. */
int st_disagg_simulate(const st_emu_config *cfg, const st_emu_sim_item *items, uint32_t n, int x, int y, int tp,
                       const st_disagg_link *l, const st_disagg_work *w, double rate, uint64_t seed, st_disagg_sim *out,
                       char *why, size_t whylen);

/* The sustained capacity of that xPyD at the SLO: the highest rate (within rel_tol) at which
 * st_disagg_simulate meets it, searched from `start` (e.g. the static rate-matched figure)
 * upwards by doubling (at most 4 x start) while it meets, then by bisection. *out: the run at
 * the capacity (rate 0 when not even start / 2^10 meets). 0, or -1 with why. */
int st_disagg_sim_capacity(const st_emu_config *cfg, const st_emu_sim_item *items, uint32_t n, int x, int y, int tp,
                           const st_disagg_link *l, const st_disagg_work *w, double start, uint64_t seed,
                           double rel_tol, st_disagg_sim *out, char *why, size_t whylen);

#endif
