/* Arrival processes: when each request of an open-loop run is meant to be sent.
 *   poisson   exponential gaps with mean 1/rate (the default)
 *   constant  gaps of exactly 1/rate
 *   gamma     gamma gaps with shape = burstiness and scale = 1/(rate * burstiness): the mean
 *             gap stays 1/rate, the coefficient of variation is 1/sqrt(burstiness)
 *             (burstiness 1 is Poisson, < 1 burstier, > 1 smoother), as vLLM's bench does
 *   inf       every request at t = 0 (also any kind with rate = INFINITY)
 * The first request is scheduled at t = 0 and each later one a gap after the previous one
 * (vLLM's convention). Pure; the same seed gives the same schedule. */
#ifndef ST_ARRIVAL_H
#define ST_ARRIVAL_H
#include <stdint.h>

#include "core/clock.h"

typedef enum { ST_ARR_POISSON, ST_ARR_CONSTANT, ST_ARR_GAMMA, ST_ARR_INF } st_arrival_kind;

typedef struct st_arrival {
    st_arrival_kind kind;
    double rate;       /* requests per second, > 0 (INFINITY: all at once) */
    double burstiness; /* gamma shape, > 0; ignored by the other kinds */
    uint64_t seed;
} st_arrival;

/* "poisson", "constant", "gamma", "inf". 0 or -1. */
int st_arrival_kind_from_name(const char *name, st_arrival_kind *out);
const char *st_arrival_kind_name(st_arrival_kind k);

/* Fills sched_out[0..n) with ns offsets from the start, nondecreasing. 0, or -1 on invalid
 * parameters (rate <= 0 or NaN, gamma burstiness <= 0 or not finite). */
int st_arrival_schedule(const st_arrival *a, uint32_t n, st_ns *sched_out);

/* Re-times a trace to a target mean rate while keeping its relative burstiness: every gap
 * is scaled by the same factor so that (n - 1) / (last - first) = target_rate, and the
 * result starts at 0. times must be nondecreasing. target_rate INFINITY puts everything at
 * 0. Returns -1 when target_rate <= 0 / NaN, times decrease, or the trace has no time span
 * to scale (n >= 2 and all times equal); n < 2 just sets times[0] = 0. */
int st_arrival_retime(st_ns *times, uint32_t n, double target_rate);

#endif
