/* The report's "Who pays" section: when the audited trace names tenants, the baseline's GPU time
 * split over them on the engine model, beside the flat per-token and per-second splits, with
 * idle apart, and the cost per tenant per hour (meta "who_pays", JSON servetune.cost/1 from
 * plan/attrib.h; docs/cost-attribution.md). */
#ifndef ST_REPORT_WHOPAYS_H
#define ST_REPORT_WHOPAYS_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

#define ST_REP_WHOPAYS_ROWS 20  /* tenants shown (the largest); the rest summed */
#define ST_REP_WHOPAYS_HOURS 48 /* hours shown in the per-hour table */

/* The stored document parsed (NULL: absent or unreadable; the section is then left out). */
json_t *st_rep_who_pays_load(const char *json_text);
/* The section's table for the HTML report: up to ST_REP_WHOPAYS_ROWS tenants by GPU time, the
 * rest summed, then idle; cells[r][c] for the columns of st_rep_who_pays_head. Returns the rows
 * (0 when j is NULL). The intro sentence goes to intro. */
#define ST_REP_WHOPAYS_COLS 7
#define ST_REP_WHOPAYS_CELL 128
extern const char *const st_rep_who_pays_head[ST_REP_WHOPAYS_COLS];
uint32_t st_rep_who_pays_table(const json_t *j, char (*cells)[ST_REP_WHOPAYS_COLS][ST_REP_WHOPAYS_CELL], char *intro,
                               size_t intro_cap);
/* "## Who pays" (nothing when j is NULL). */
void st_rep_who_pays_markdown(const json_t *j, st_buf *b);

#endif
