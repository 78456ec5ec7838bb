/* Multi-turn sessions at run time: the runner's end hook (load/runner.h) that sends a session's
 * next turn when the turn before it ended, after its think time, with the conversation so far
 * in front of its new text: the earlier prompts and the answers the server ACTUALLY returned
 * (reasoning left out, as chat templates drop it), so the engine's prefix cache sees what it
 * sees in production. Open loop across sessions (their first turns keep the arrival schedule),
 * closed loop within one. A turn that fails ends its session: the later turns are recorded as
 * skipped. And the per-turn figures of a run's records. */
#ifndef ST_SESSION_H
#define ST_SESSION_H
#include <math.h>
#include <stdint.h>

#include "load/record.h"
#include "load/runner.h"
#include "load/stats.h"
#include "load/workload.h"

/* The end hook; arg is the st_workload the runner sends (its items' histories are filled and
 * moved along each session as it goes). */
void st_session_on_end(void *arg, st_runner_ctl *r, uint32_t i, const st_record *rec, const char *answer,
                       size_t answer_len);

/* Per-turn figures (turn 1 is a session's first request). Turns at and above ST_TURN_ROWS
 * share the last row. */
#define ST_TURN_ROWS 16
typedef struct st_turn_row {
    uint32_t turn;                /* 1-based; the last row: this turn and later */
    uint32_t requests, completed; /* measured records of this turn */
    st_dist ttft;                 /* seconds, completed requests */
    st_dist ttfat;                /* time to first answer token (reasoning models), seconds */
    uint64_t prompt_tokens;       /* sent (the server's count when reported) */
    uint64_t cached_tokens;       /* prompt tokens the server reported as cached */
    int cached_reported;          /* at least one request reported its cached tokens */
} st_turn_row;

/* Fills rows[0..ST_TURN_ROWS) from the records of session requests; returns the number of
 * rows with requests (0 when no record is in a session), or -1 when out of memory. */
int st_turn_rows(const st_record *recs, uint32_t n, st_turn_row *rows);
/* The share of a turn row's prompt tokens the server reported as cached; NAN when it reported
 * none (or the row has no prompt tokens). */
static inline double st_turn_cached_share(const st_turn_row *w)
{
    return w->cached_reported && w->prompt_tokens ? (double)w->cached_tokens / (double)w->prompt_tokens : NAN;
}

#endif
