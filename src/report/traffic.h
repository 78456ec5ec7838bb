/* The report's "Your traffic" section: what the client's trace says (rates, lengths, prefix
 * sharing, sessions) and the advice computed from it, as the audit stored it (meta "traffic",
 * JSON servetune.traffic/1, audit/traffic.h). Parsed once into lines every renderer shows. */
#ifndef ST_REPORT_TRAFFIC_H
#define ST_REPORT_TRAFFIC_H
#include <jansson.h>

#include "core/buf.h"

#define ST_REP_TRAFFIC_ROWS 14
#define ST_REP_TRAFFIC_ADVICE 8

typedef struct st_rep_traffic {
    int present;
    char key[ST_REP_TRAFFIC_ROWS][40];
    char value[ST_REP_TRAFFIC_ROWS][400];
    int n_rows;
    char advice[ST_REP_TRAFFIC_ADVICE][480];
    int n_advice;
    json_t *json; /* the stored document (for report.json) */
} st_rep_traffic;

/* From the stored JSON text (NULL: no traffic section). 0, or -1 when it does not parse (the
 * section is then left out). */
int st_rep_traffic_load(const char *json_text, st_rep_traffic *t);
void st_rep_traffic_free(st_rep_traffic *t);
/* "## Your traffic" with its table and advice (nothing when absent). */
void st_rep_traffic_markdown(const st_rep_traffic *t, st_buf *b);

#endif
