#include "plan/cost.h"

#include <limits.h>
#include <math.h>
#include <string.h>

long st_cost_replicas(double rps, double capacity)
{
    if (!(rps > 0) || !(capacity > 0))
        return 0;
    double r = rps / capacity;
    /* ceil of a ratio that is an integer up to rounding must not add a replica: compare with a
     * relative tolerance of 1e-9. */
    double c = ceil(r);
    if (c - r > 1 - 1e-9)
        c -= 1;
    /* a rate far beyond any capacity: the count saturates instead of overflowing a long */
    if (!(c < ST_COST_MAX_REPLICAS))
        return (long)ST_COST_MAX_REPLICAS;
    return c < 1 ? 1 : (long)c;
}

int st_cost_compute(const st_cost_in *in, st_cost *out)
{
    memset(out, 0, sizeof *out);
    out->usd_per_1m = NAN;
    out->monthly_usd = NAN;
    out->replica_hour_usd = in->price_per_gpu_hour * in->gpus_per_replica;
    if (!(in->capacity_rps > 0) || !(in->output_tps > 0) || !isfinite(in->capacity_rps) || !isfinite(in->output_tps) ||
        in->gpus_per_replica < 1 || !(in->price_per_gpu_hour > 0))
        return -1;
    out->valid = 1;
    out->usd_per_1m = in->price_per_gpu_hour * in->gpus_per_replica / (in->output_tps * 3600.0) * 1e6;
    out->replicas = st_cost_replicas(in->peak_rps, in->capacity_rps);
    out->monthly_usd = (double)out->replicas * in->gpus_per_replica * in->price_per_gpu_hour * ST_COST_HOURS_PER_MONTH;
    return 0;
}

double st_cost_rel_change(double value, double base)
{
    if (!isfinite(value) || !isfinite(base) || base == 0)
        return NAN;
    return (value - base) / base;
}

int st_cost_pick(const st_cost_pick_in *c, int n)
{
    int best = -1;
    for (int i = 0; i < n; i++) {
        if (!c[i].passed || !isfinite(c[i].usd_per_1m))
            continue;
        if (best < 0 || c[i].usd_per_1m < c[best].usd_per_1m ||
            (c[i].usd_per_1m == c[best].usd_per_1m && c[i].capacity_rps > c[best].capacity_rps))
            best = i;
    }
    return best;
}
