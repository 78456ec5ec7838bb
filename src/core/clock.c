#include "core/clock.h"

#include <errno.h>
#include <time.h>

st_ns st_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (st_ns)ts.tv_sec * ST_NS_PER_S + ts.tv_nsec;
}

st_ns st_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (st_ns)ts.tv_sec * ST_NS_PER_S + ts.tv_nsec;
}

void st_sleep_until(st_ns deadline)
{
    struct timespec ts = { .tv_sec = deadline / ST_NS_PER_S, .tv_nsec = deadline % ST_NS_PER_S };
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

static st_ns mono_now(void *ctx)
{
    (void)ctx;
    return st_now();
}

st_clock st_clock_monotonic(void) { return (st_clock){ .now = mono_now, .ctx = 0 }; }

static st_ns virt_now(void *ctx) { return ((st_vclock *)ctx)->t; }

st_clock st_clock_virtual(st_vclock *vc) { return (st_clock){ .now = virt_now, .ctx = vc }; }
