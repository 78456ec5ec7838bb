/* Suggested rates for a measured audit, from capacities predicted on the engine model
 * (servetune predict --suggest-rates). Pure. */
#ifndef ST_AUDIT_SUGGEST_H
#define ST_AUDIT_SUGGEST_H
#include <stddef.h>

/* The nice number (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8 x 10^k) nearest to x below it (up = 0) or
 * above it (up = 1). x > 0. */
double st_suggest_nice(double x, int up);

/* A geometric grid of about `points` rates (2..24) from 0.5 x the lowest to 1.5 x the highest of
 * caps[0..n) (offered req/s at which each configuration's capacity lies; values <= 0 or not
 * finite are ignored), rounded to nice numbers (the first down, the last up, the others to the
 * nearest), strictly increasing: the first rate is <= 0.5 x the lowest capacity and the last
 * >= 1.5 x the highest, so every capacity lies inside the grid. Returns the number of rates
 * written (<= max), 0 when there is no capacity. */
int st_suggest_rates(const double *caps, int n, int points, double *out, int max);

/* "rates: [a, b, c]" (with ", inf" appended when with_inf). */
void st_suggest_format(const double *rates, int n, int with_inf, char *out, size_t outlen);

#endif
