/* Monotonic time in nanoseconds, its own type. Every interval in servetune is measured
 * with st_now(); wall time (st_wall_ns) is only for labelling results with a date. */
#ifndef ST_CLOCK_H
#define ST_CLOCK_H
#include <stdint.h>

typedef int64_t st_ns;

#define ST_NS_PER_US 1000LL
#define ST_NS_PER_MS 1000000LL
#define ST_NS_PER_S 1000000000LL

/* CLOCK_MONOTONIC, read at every call (never cached per loop tick). */
st_ns st_now(void);
/* CLOCK_REALTIME, for timestamps shown to people. */
st_ns st_wall_ns(void);
/* Sleeps until the monotonic deadline (absolute). */
void st_sleep_until(st_ns deadline);

static inline double st_ns_to_ms(st_ns t) { return (double)t / 1e6; }
static inline double st_ns_to_s(st_ns t) { return (double)t / 1e9; }
/* Saturates at +-ST_NS_MAX (2^62 ns, about 146 years: st_now() plus it still fits an st_ns)
 * instead of overflowing; NaN gives 0. */
#define ST_NS_MAX ((st_ns)1 << 62)
static inline st_ns st_s_to_ns(double s)
{
    double ns = s * 1e9;
    if (!(ns == ns))
        return 0;
    if (ns >= (double)ST_NS_MAX)
        return ST_NS_MAX;
    if (ns <= -(double)ST_NS_MAX)
        return -ST_NS_MAX;
    return (st_ns)ns;
}

/* An injectable clock: the engine model and anything else that must run both on the
 * wall clock and on virtual time takes one of these instead of calling st_now(). */
typedef struct st_clock {
    st_ns (*now)(void *ctx);
    void *ctx;
} st_clock;

/* A clock that reads st_now(). */
st_clock st_clock_monotonic(void);

/* A virtual clock: time only moves when the owner sets it. */
typedef struct st_vclock {
    st_ns t;
} st_vclock;
st_clock st_clock_virtual(st_vclock *vc);

#endif
