/* Virtual-time simulation: runs a workload through the engine model to completion, as fast
 * as the CPU allows, and fills one st_record per request exactly as the HTTP load generator
 * would (times relative to the run start, every token event). Used by `servetune predict`. */
#ifndef ST_EMU_SIM_H
#define ST_EMU_SIM_H
#include <stddef.h>
#include <stdint.h>

#include "core/clock.h"
#include "emu/config.h"
#include "load/record.h"

/* One request of the workload (the integrator maps load/workload.h's st_work_item onto it:
 * arrival from the arrival process, input_ids/input_len/output_len from the item). */
typedef struct st_emu_sim_item {
    st_ns arrival;            /* ns from the run start, nondecreasing not required */
    const uint32_t *input_ids; /* input_len ids, or NULL: unique deterministic ids */
    uint32_t input_len;
    uint32_t output_len;      /* max_tokens (ignore_eos) */
} st_emu_sim_item;

typedef struct st_emu_sim_stats {
    st_ns duration;           /* virtual time from 0 to the last completion */
    uint64_t steps, preemptions, prefix_queries, prefix_hits;
    uint64_t generated_tokens, prompt_tokens;
    uint32_t completed, rejected;
    uint32_t max_running, max_waiting;
    double max_kv_usage;
    double busy_s;            /* sum of step durations */
} st_emu_sim_stats;

/* Runs items[0..n) on a fresh engine built from cfg. records[i] is initialised here
 * (st_record_init) and filled for item i: scheduled = sent = arrival, first_byte =
 * first_token, every token event, end, tokens; a request the engine rejects (too long)
 * gets ST_REQ_HTTP_STATUS 400 with vLLM's message. Returns 0, or -1 with err (startup
 * refusal, out of memory). A stop callback is not needed: the run always terminates. */
int st_emu_sim_run(const st_emu_config *cfg, const st_emu_sim_item *items, uint32_t n,
                   st_record *records, st_emu_sim_stats *stats, char *err, size_t errlen);
/* The same with a client-side concurrency limit (like `vllm bench serve --max-concurrency`):
 * an arrival waits until fewer than max_concurrency requests are in flight; its record's
 * `sent` is when it went out (scheduled stays the arrival). 0 = no limit. */
int st_emu_sim_run_limited(const st_emu_config *cfg, const st_emu_sim_item *items, uint32_t n,
                           uint32_t max_concurrency, st_record *records, st_emu_sim_stats *stats,
                           char *err, size_t errlen);

#endif
