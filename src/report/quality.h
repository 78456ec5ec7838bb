/* "Quality vs baseline": the quality pass's result per configuration (audit/quality.h), read from
 * the store's meta table ("quality/NAME"), in every report: a table (mean and p99 KL divergence,
 * same top-1, exact match, first divergence, the pass's cost), a plain-words note on what the
 * figures can and cannot say, the headline's sentence on the pick, and the rule that a
 * configuration beyond a quality limit is never the pick. Renderers are pure functions of the
 * loaded model. */
#ifndef ST_REPORT_QUALITY_H
#define ST_REPORT_QUALITY_H
#include "audit/quality.h"
#include "audit/store.h"
#include "core/buf.h"

typedef struct st_rep_quality {
    int present;          /* some configuration has a result */
    st_quality_result *q; /* per configuration (spec order) */
    unsigned char *has;   /* 1 when q[i] was stored */
} st_rep_quality;

struct st_report;
/* Reads every configuration's result (n_cfg and spec filled). 0, or -1 out of memory. */
int st_rep_quality_load(st_store *s, struct st_report *r);
void st_rep_quality_free(st_rep_quality *q);
/* 1 when configuration i was measured and is beyond a quality limit (never the pick). */
int st_rep_quality_fails(const struct st_report *r, int i);
/* The headline's words on configuration i (the pick): what was measured on which prompts, or
 * nothing when no pass ran. Appends one or two sentences starting with a space. Returns 1 when it
 * said something about its answers (the reader need not be asked to check them). */
int st_rep_quality_headline(const struct st_report *r, int i, st_buf *b);
/* The markdown section (nothing without results). */
void st_rep_quality_markdown(const struct st_report *r, st_buf *b);
/* The report.json member value: {"note": ..., "configs": [...]} or JSON null. */
struct json_t;
struct json_t *st_rep_quality_json(const struct st_report *r);
/* results.csv: the header's added columns (",quality_status,...") and one row's cells. */
#define ST_REP_QUALITY_CSV_HEAD                                                                                        \
    ",quality_status,quality_mode,quality_prompts,quality_synthetic_prompts,quality_mean_kld,quality_p99_kld,"         \
    "quality_same_top1,quality_exact_match,quality_first_divergence_p50,quality_engine_minutes,quality_pass,"          \
    "quality_note"
void st_rep_quality_csv(const struct st_report *r, int i, st_buf *b);
/* Table cells for the HTML report: configuration i's ST_REP_QUALITY_COLS - 1 figures (after its
 * name), -1 when it has no result. */
#define ST_REP_QUALITY_COLS 9
#define ST_REP_QUALITY_CELL 160
extern const char *const st_rep_quality_head[ST_REP_QUALITY_COLS];
int st_rep_quality_cells(const struct st_report *r, int i, char cells[ST_REP_QUALITY_COLS - 1][ST_REP_QUALITY_CELL]);
/* The plain-words note under the table (the same in every renderer). */
void st_rep_quality_note(const struct st_report *r, st_buf *b);

#endif
