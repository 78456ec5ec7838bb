/* A trace's day, hour by hour (load/hourly.h). */
#include "load/hourly.h"

#include <math.h>
#include <string.h>

#define DAY_S 86400.0
#define HOUR_S 3600.0

const char *st_hourly_clock_name(st_hourly_clock c)
{
    return c == ST_HOURLY_UTC ? "utc" : c == ST_HOURLY_FROM_FIRST ? "from_first_request" : "none";
}

/* The hour of the day (0..23) of clock time x, seconds. */
static int hour_of(double x)
{
    double h = fmod(floor(x / HOUR_S), 24.0);
    return (int)(h < 0 ? h + 24 : h);
}

void st_hourly_add(st_hourly *h, double ts)
{
    if (!isfinite(ts))
        return;
    if (!h->has) {
        h->has = 1;
        h->first_ts = h->min_ts = h->max_ts = ts;
    }
    h->min_ts = ts < h->min_ts ? ts : h->min_ts;
    h->max_ts = ts > h->max_ts ? ts : h->max_ts;
    h->utc[hour_of(ts)]++;
    h->rel[hour_of(ts - h->first_ts)]++;
}

/* Adds to cov[] the seconds of each hour of the day within [lo, hi] (clock time): whole days at
 * once, then the rest hour by hour (at most 25 pieces). */
static void cover(double lo, double hi, double cov[24])
{
    double days = floor((hi - lo) / DAY_S);
    for (int i = 0; i < 24; i++)
        cov[i] += days * HOUR_S;
    for (double t = lo + days * DAY_S; t < hi;) {
        double next = (floor(t / HOUR_S) + 1) * HOUR_S, end = next < hi ? next : hi;
        cov[hour_of(t)] += end - t;
        t = end;
    }
}

void st_hourly_result(const st_hourly *h, st_hourly_profile *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < 24; i++)
        out->rps[i] = NAN;
    if (!h->has)
        return;
    out->span_s = h->max_ts - h->min_ts;
    out->clock = h->min_ts >= ST_HOURLY_CALENDAR_MIN_S ? ST_HOURLY_UTC : ST_HOURLY_FROM_FIRST;
    double origin = out->clock == ST_HOURLY_UTC ? 0 : h->first_ts;
    const uint64_t *n = out->clock == ST_HOURLY_UTC ? h->utc : h->rel;
    cover(h->min_ts - origin, h->max_ts - origin, out->covered_s);
    for (int i = 0; i < 24; i++)
        if (out->covered_s[i] >= ST_HOURLY_MIN_COVER_S) {
            out->rps[i] = (double)n[i] / out->covered_s[i];
            out->hours++;
        }
}
