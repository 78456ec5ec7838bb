/* A pool of identical engines behind a router, in virtual time: every request goes, when it
 * arrives, to the engine with the fewest requests outstanding (sent and not yet answered in
 * full, as the router counts them; ties: the lowest index). Each engine is the engine model
 * (emu/engine.h) on its own virtual clock; between two arrivals the engines run independently,
 * so the pool is exact to the engine model. Used for disaggregated prefill/decode
 * (plan/disagg.h): a prefill pool and a decode pool. No I/O. */
#ifndef ST_EMU_POOL_H
#define ST_EMU_POOL_H
#include <stddef.h>
#include <stdint.h>

#include "core/clock.h"
#include "emu/config.h"
#include "emu/sim.h"

/* What became of one request (times from the run's start, ns). */
typedef struct st_emu_pool_out {
    st_ns first_token; /* its first token reached the client (its due time); -1: none */
    st_ns end;         /* its last token reached the client; -1: none */
    uint32_t tokens;   /* output tokens */
    uint32_t engine;   /* the engine it was routed to */
    int rejected;      /* the engine refused it (too long for max_model_len) */
} st_emu_pool_out;

/* Runs items[0..n) (open loop at their arrivals; the session and agent fields must be unset: -1)
 * on `engines` fresh engines of cfg (resolved as st_emu_engine_new takes it) until every request
 * finished. out[i] is item i's. 0, or -1 with err (startup refusal, out of memory). */
int st_emu_pool_run(const st_emu_config *cfg, uint32_t engines, const st_emu_sim_item *items, uint32_t n,
                    st_emu_pool_out *out, char *err, size_t errlen);

#endif
