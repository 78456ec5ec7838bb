/* The oracle the capacity tests measure against: one FIFO slot with exponential service times
 * (M/M/1 with Poisson arrivals). A request waits for the slot, is served for an Exp(mu) time, and
 * its first token (and its last, right after) leaves when the service ends, so its TTFT is its
 * sojourn time. In M/M/1 the sojourn time is exponential with rate mu - lambda, so the highest
 * rate whose p95 TTFT is within S is
 *     lambda* = mu - ln(20) / S        (analytic capacity, req/s).
 * Above mu the queue grows without bound (over-saturation). Used by tests/unit/test_oracle.c
 * (in virtual time, through the sweep) and tests/integration/test_oracle_http.c (an HTTP server). */
#ifndef ST_ORACLE_QUEUE_H
#define ST_ORACLE_QUEUE_H
#include <math.h>

#include "core/rng.h"

typedef struct oracle_queue {
    double mu;       /* service rate (1/s) */
    double last_dep; /* when the slot frees (s), -INFINITY: free */
    st_rng rng;
} oracle_queue;

static inline void oracle_queue_init(oracle_queue *q, double mu, uint64_t seed)
{
    q->mu = mu;
    q->last_dep = -INFINITY;
    st_rng_seed(&q->rng, seed);
}

/* A request arriving at `arrival` (s, nondecreasing): when its service ends (FIFO, one slot). */
static inline double oracle_queue_depart(oracle_queue *q, double arrival)
{
    double start = arrival > q->last_dep ? arrival : q->last_dep;
    q->last_dep = start + st_rng_exp(&q->rng, q->mu);
    return q->last_dep;
}

/* Every request in the system was cancelled (a client that stopped its run aborts what is still
 * in flight): the slot frees now, as an engine drops aborted requests; without this the next
 * run would queue behind the service of requests nobody waits for. */
static inline void oracle_queue_empty(oracle_queue *q, double now) { q->last_dep = now; }

/* The analytic capacity: the highest rate with p95 sojourn <= slo_s (0 when none). */
static inline double oracle_mm1_capacity(double mu, double slo_s)
{
    double c = mu - log(20) / slo_s;
    return c > 0 ? c : 0;
}

#endif
