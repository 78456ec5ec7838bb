#include "core/rng.h"

#include <math.h>

uint64_t st_splitmix64(uint64_t *state) { return st_mix64(*state += 0x9e3779b97f4a7c15ULL); }

void st_rng_seed(st_rng *r, uint64_t seed)
{
    uint64_t sm = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = st_splitmix64(&sm);
    /* The all-zero state is the one state xoshiro cannot leave; splitmix64 output makes it
     * practically impossible, but guard anyway. */
    if (!(r->s[0] | r->s[1] | r->s[2] | r->s[3]))
        r->s[0] = 1;
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t st_rng_next(st_rng *r)
{
    uint64_t *s = r->s;
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double st_rng_uniform(st_rng *r) { return (double)(st_rng_next(r) >> 11) * 0x1.0p-53; }

uint32_t st_rng_range(st_rng *r, uint32_t lo, uint32_t hi)
{
    if (lo >= hi)
        return lo;
    uint64_t span = (uint64_t)hi - lo + 1; /* <= 2^32 */
    /* Rejection sampling on the top bits keeps every value equally likely. */
    uint64_t limit = UINT64_MAX - (UINT64_MAX % span) - 1;
    uint64_t x;
    do
        x = st_rng_next(r);
    while (x > limit);
    return lo + (uint32_t)(x % span);
}

double st_rng_exp(st_rng *r, double rate)
{
    if (!(rate > 0))
        return INFINITY;
    /* 1 - U is in (0, 1], so the log is finite. */
    return -log(1.0 - st_rng_uniform(r)) / rate;
}

double st_rng_normal(st_rng *r)
{
    double u, v, s;
    do {
        u = 2.0 * st_rng_uniform(r) - 1.0;
        v = 2.0 * st_rng_uniform(r) - 1.0;
        s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    return u * sqrt(-2.0 * log(s) / s);
}

double st_rng_gamma(st_rng *r, double shape, double scale)
{
    if (!(shape > 0) || !(scale > 0) || isinf(shape) || isinf(scale))
        return NAN;
    if (shape < 1.0) {
        double u;
        do
            u = st_rng_uniform(r);
        while (u == 0.0);
        return st_rng_gamma(r, shape + 1.0, scale) * pow(u, 1.0 / shape);
    }
    const double d = shape - 1.0 / 3.0;
    const double c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x, v;
        do {
            x = st_rng_normal(r);
            v = 1.0 + c * x;
        } while (v <= 0.0);
        v = v * v * v;
        double u = st_rng_uniform(r);
        if (u < 1.0 - 0.0331 * (x * x) * (x * x))
            return d * v * scale;
        if (u > 0.0 && log(u) < 0.5 * x * x + d * (1.0 - v + log(v)))
            return d * v * scale;
    }
}
