/* A small, fast, seedable pseudo-random generator: xoshiro256** (Blackman & Vigna), whose
 * 256-bit state is filled from a 64-bit seed with splitmix64, as its authors recommend.
 * Each user owns its st_rng (no global state), so runs are reproducible from their seed.
 * Not for cryptography. */
#ifndef ST_RNG_H
#define ST_RNG_H
#include <stdint.h>

typedef struct st_rng {
    uint64_t s[4];
} st_rng;

void st_rng_seed(st_rng *r, uint64_t seed);
uint64_t st_rng_next(st_rng *r);
/* Uniform in [0, 1) with 53 random bits. */
double st_rng_uniform(st_rng *r);
/* Uniform integer in [lo, hi] (inclusive), without modulo bias; lo > hi returns lo. */
uint32_t st_rng_range(st_rng *r, uint32_t lo, uint32_t hi);
/* Exponential with the given rate (mean 1/rate); rate <= 0 or NaN returns INFINITY. */
double st_rng_exp(st_rng *r, double rate);
/* Standard normal (Marsaglia polar method). */
double st_rng_normal(st_rng *r);
/* Gamma(shape k, scale theta), mean k*theta, by Marsaglia & Tsang (2000); shape < 1 uses
 * the boost Gamma(k) = Gamma(k+1) * U^(1/k). Invalid parameters return NAN. */
double st_rng_gamma(st_rng *r, double shape, double scale);
/* splitmix64 step: also handy to derive independent seeds (seed ^ stream id). */
uint64_t st_splitmix64(uint64_t *state);
/* splitmix64's finaliser alone: a 64-bit hash of x (bijective, every output bit depends on every
 * input bit). The one hash of keys and ids (hash tables, block hashes, session keys, samples). */
static inline uint64_t st_mix64(uint64_t z) /* inline: the hot loops of block hashes and hash maps call it */
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
/* What st_splitmix64 returns from state z (the state not kept): st_mix64 of z plus the golden
 * ratio. */
static inline uint64_t st_splitmix64_of(uint64_t z) { return st_mix64(z + 0x9e3779b97f4a7c15ULL); }

#endif
