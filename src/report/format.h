/* Number and text formatting shared by the report renderers (internal to src/report). */
#ifndef ST_REPORT_FORMAT_H
#define ST_REPORT_FORMAT_H
#include <stddef.h>

#include <jansson.h>

#include "core/buf.h"
#include "load/output.h" /* st_jnum_or_null */

/* "12.3", "0.85", "1,234"; "-" for NAN. */
void st_fmt_num(char *out, size_t n, double v);
/* "$0.576", "$12.40", "$14,542"; "-" for NAN. */
void st_fmt_usd(char *out, size_t n, double v);
/* "+40 %", "-28 %", "0 %"; "-" for NAN. */
void st_fmt_pct(char *out, size_t n, double rel);
/* "inf" or the rate. */
void st_fmt_rate(char *out, size_t n, double r);
/* Appends s as a markdown table cell / inline text: | and newlines neutralised, and characters
 * that would start markup (<, >, `, *, _, [, ]) escaped. */
int st_md_text(st_buf *b, const char *s);
/* Appends s inside `code` (backticks in s replaced by '). */
int st_md_code(st_buf *b, const char *s);

struct st_disagg_sim;
/* One two-pool run's figures (plan/disagg_sim.h) as a JSON object: rate, requests, answered, p50/p95
 * TTFT and TPOT, prefill and transfer p95 (ms; null when not measured), growing, meets_slo. */
json_t *st_disagg_sim_json(const struct st_disagg_sim *q);
/* "$0.172", "$359", "$1,016"; "-" for NAN (the plan's and the traffic day's tables). */
void st_fmt_money(char *out, size_t n, double v);
/* The method's sentence on what a sustained capacity's output tok/s (and so its $ per 1M) is. */
extern const char *const st_rep_output_tps_note;
/* "2026-11-29 14:15 UTC" from wall ns. */
void st_fmt_date(char *out, size_t n, long long wall_ns);

#endif
