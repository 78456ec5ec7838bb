/* The "A traffic day" section the plan and the audit reports share: what one day of the spec's
 * traffic (spec `traffic:`) costs each setup, dedicated peak-sized, autoscaled or serverless
 * (plan/day.h prices it). Pure renderers of figures already computed. */
#ifndef ST_REPORT_DAY_H
#define ST_REPORT_DAY_H
#include <jansson.h>

#include "plan/day.h"
#include "audit/spec.h"
#include "core/buf.h"

/* Columns of the day's table: the setup, then ST_REP_DAY_CELLS figures. */
#define ST_REP_DAY_CELLS 8
#define ST_REP_DAY_CELL_MAX 32
extern const char *const st_rep_day_head[1 + ST_REP_DAY_CELLS];

/* The section's opening paragraph (plain text, no markup): the day's peak, mean and requests,
 * how the fleet scales and the serverless price used (0: not priced). */
void st_rep_day_intro(st_buf *b, const st_spec *s, double serverless_price_per_gpu_s, const char *serverless_from);
/* The note under the table (plain text). */
extern const char *const st_rep_day_note;
/* One setup's figures as text, in st_rep_day_head's order after the setup. */
void st_rep_day_cells(const st_day_cost *d, char cells[ST_REP_DAY_CELLS][ST_REP_DAY_CELL_MAX]);
/* "## A traffic day", its paragraph, a table of n setups (who[i], d[i]) and the note. */
void st_rep_day_markdown(st_buf *b, const st_spec *s, double serverless_price_per_gpu_s, const char *serverless_from,
                         const char *const *who, const st_day_cost *const *d, int n);
/* One setup's day as JSON (report-json and plan.json share the field names). */
json_t *st_rep_day_json(const st_day_cost *d);

#endif
