/* What the headline must say before any winner: reasons to distrust the comparison it would make,
 * in words, first (docs/report-json.md, "headline"). Pure: reads the report model and its notes.
 *
 * Three reasons, each about the configurations the headline compares (its pick and the current
 * setup):
 *   host     the host limited the figures: the load generator lagged its schedule (note
 *            client_limited) or the emulator fell behind its model (note emulator_lagged);
 *   tie      the two capacities lie within each other's interval (a sustained search's
 *            confidence intervals overlap), or a burst test found the same capacity: the audit
 *            cannot tell which serves more, whatever the point figures' difference;
 *   failed   requests failed at a configuration's lowest measured rate: failures that do not
 *            come from load (a request the server refuses, a broken flag) decide its verdict.
 * When any holds for the pick or the current setup, the headline names no winner: it says why,
 * then each configuration's figures without a ranking. */
#ifndef ST_REPORT_DISTRUST_H
#define ST_REPORT_DISTRUST_H
#include "core/buf.h"

struct st_report;

typedef struct st_distrust {
    int host;   /* host-limited figures (pick or current setup) */
    int tie;    /* the pick and the current setup tie within their intervals */
    int failed; /* failures at the lowest rate (pick or current setup) */
} st_distrust;

/* Finds the reasons (all zero when the headline may name its pick as it stands). */
void st_report_distrust_find(const struct st_report *r, st_distrust *d);
/* The pick the headline names: r->pick, or -1 when nothing passed or a reason above holds. The
 * results table's marker, results.csv's is_pick, report.json's headline.pick, the HTML's highlight
 * and the deploy snippets all follow it, so no output names a pick the headline does not. */
int st_report_named_pick(const struct st_report *r);
/* The lead sentences for d, then the figures without a ranking, appended to b (plain text).
 * Nothing when d holds no reason. */
void st_report_distrust_lead(const struct st_report *r, const st_distrust *d, st_buf *b);

#endif
