/* A trace's day, hour by hour: the request rate in each hour of the day, from the rows' own
 * times (docs/trace-format.md, "The hourly profile"). Pure accumulation, no I/O.
 *
 * The clock: times from a calendar (a date, or a number of seconds since the epoch at least
 * ST_HOURLY_CALENDAR_MIN_S) give hours of the day in UTC; other times (seconds from the start of
 * the log, as Mooncake's) give hours counted from the first request (hour 0 is the trace's first
 * hour). Each hour's rate is its requests over the seconds of that hour the trace spans (first to
 * last arrival), over every day it spans; an hour the trace spans less than ST_HOURLY_MIN_COVER_S
 * of has no rate (NAN): a trace shorter than a day gives only the hours it covers, never a
 * guess for the others. */
#ifndef ST_LOAD_HOURLY_H
#define ST_LOAD_HOURLY_H
#include <stdint.h>

/* 2001-09-09 in seconds since the epoch: no serving log predates it, and a clock counted from
 * the start of a log stays below it for any log shorter than 31 years. */
#define ST_HOURLY_CALENDAR_MIN_S 1e9
/* Half an hour: an hour's rate over less is set by where the trace happens to start or stop
 * (a busy first minute would stand for the whole hour). */
#define ST_HOURLY_MIN_COVER_S 1800.0

typedef enum { ST_HOURLY_NONE = 0, ST_HOURLY_UTC, ST_HOURLY_FROM_FIRST } st_hourly_clock;
/* "utc", "from_first_request", "none" */
const char *st_hourly_clock_name(st_hourly_clock c);

typedef struct st_hourly {
    int has;
    double first_ts, min_ts, max_ts;
    uint64_t utc[24], rel[24]; /* requests per hour of the day on either clock */
} st_hourly;

typedef struct st_hourly_profile {
    st_hourly_clock clock;
    double rps[24];       /* NAN: an hour the trace covers less than ST_HOURLY_MIN_COVER_S of */
    double covered_s[24]; /* seconds of each hour within the trace's span, over all its days */
    int hours;            /* hours with a rate */
    double span_s;        /* first to last arrival */
} st_hourly_profile;

/* Adds a request at time ts (seconds: since the epoch, or since the log's start). */
void st_hourly_add(st_hourly *h, double ts);
/* The profile of what was added (clock NONE and no hours without times). */
void st_hourly_result(const st_hourly *h, st_hourly_profile *out);

#endif
