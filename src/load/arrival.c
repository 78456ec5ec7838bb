#include "load/arrival.h"

#include <math.h>
#include <string.h>

#include "core/rng.h"

static const char *kind_names[] = { "poisson", "constant", "gamma", "inf" };

int st_arrival_kind_from_name(const char *name, st_arrival_kind *out)
{
    if (!name)
        return -1;
    for (int i = 0; i < 4; i++)
        if (strcmp(name, kind_names[i]) == 0) {
            *out = (st_arrival_kind)i;
            return 0;
        }
    return -1;
}

const char *st_arrival_kind_name(st_arrival_kind k) { return ((unsigned)k < 4) ? kind_names[k] : "unknown"; }

int st_arrival_schedule(const st_arrival *a, uint32_t n, st_ns *sched_out)
{
    if (!a || (n && !sched_out))
        return -1;
    if (a->kind == ST_ARR_INF || (a->rate > 0 && isinf(a->rate))) {
        for (uint32_t i = 0; i < n; i++)
            sched_out[i] = 0;
        return 0;
    }
    if (!(a->rate > 0))
        return -1;
    if (a->kind == ST_ARR_GAMMA && (!(a->burstiness > 0) || isinf(a->burstiness)))
        return -1;
    if (a->kind != ST_ARR_POISSON && a->kind != ST_ARR_CONSTANT && a->kind != ST_ARR_GAMMA)
        return -1;
    st_rng r;
    st_rng_seed(&r, a->seed);
    /* Accumulate in seconds (double) and round each absolute time, so rounding errors do
     * not add up over a long schedule. */
    double t = 0;
    const double max_s = 9.0e9; /* st_ns holds about 292 years; stop far below that */
    for (uint32_t i = 0; i < n; i++) {
        if (i > 0) {
            double gap;
            switch (a->kind) {
            case ST_ARR_CONSTANT: gap = 1.0 / a->rate; break;
            case ST_ARR_GAMMA: gap = st_rng_gamma(&r, a->burstiness, 1.0 / (a->rate * a->burstiness)); break;
            default: gap = st_rng_exp(&r, a->rate); break;
            }
            if (!(gap >= 0))
                return -1;
            t += gap;
            if (a->kind == ST_ARR_CONSTANT)
                t = (double)i / a->rate; /* exact multiples, no drift */
            if (t > max_s)
                return -1;
        }
        st_ns v = (st_ns)llround(t * 1e9);
        if (i > 0 && v < sched_out[i - 1])
            v = sched_out[i - 1];
        sched_out[i] = v;
    }
    return 0;
}

int st_arrival_retime(st_ns *times, uint32_t n, double target_rate)
{
    if (n == 0)
        return 0;
    if (!times || !(target_rate > 0))
        return -1;
    for (uint32_t i = 1; i < n; i++)
        if (times[i] < times[i - 1])
            return -1;
    st_ns t0 = times[0];
    if (isinf(target_rate) || n < 2) {
        for (uint32_t i = 0; i < n; i++)
            times[i] = 0;
        return isinf(target_rate) || n < 2 ? 0 : -1;
    }
    st_ns span = times[n - 1] - t0;
    if (span <= 0)
        return -1;
    /* New span = (n - 1) / target_rate seconds. */
    double scale = ((double)(n - 1) / target_rate * 1e9) / (double)span;
    for (uint32_t i = 0; i < n; i++)
        times[i] = (st_ns)llround((double)(times[i] - t0) * scale);
    for (uint32_t i = 1; i < n; i++)
        if (times[i] < times[i - 1])
            times[i] = times[i - 1];
    return 0;
}
