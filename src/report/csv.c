#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/csv.h"
#include "report/distrust.h"
#include "report/report.h"

static void cell_num(st_buf *b, double v)
{
    if (isfinite(v))
        st_buf_printf(b, ",%.10g", v);
    else if (isinf(v))
        st_buf_puts(b, ",inf");
    else
        st_buf_puts(b, ",");
}

/* A text cell after a comma (core/csv.h: quoted, formulas neutralised). */
static void cell_str(st_buf *b, const char *s, int first)
{
    if (!first)
        st_buf_puts(b, ",");
    st_csv_put_text(b, s);
}

int st_report_csv(const st_report *r, st_buf *b)
{
    st_buf_puts(b, "rank,config,is_baseline,is_pick,status,capacity_rps,capacity_vs_baseline,output_tps,"
                   "usd_per_1m_output_tokens,cost_vs_baseline,ttft_p95_ms,tpot_p95_ms,pass_rate,fail_rate,"
                   "highest_tested_passed,grid_capacity_rps,refined_capacity_rps,sustained_rps,replicas_at_peak,"
                   "monthly_usd,note,method,capacity_ci_low,capacity_ci_high,binding,boundary,runs,engine_minutes,"
                   "max_throughput_rps" ST_REP_QUALITY_CSV_HEAD "\n");
    int named = st_report_named_pick(r);
    for (int k = 0; k < r->n_cfg; k++) {
        int i = r->order[k];
        const st_rep_cfg *c = &r->cfg[i];
        st_buf_printf(b, "%d", k + 1);
        cell_str(b, c->name, 0);
        st_buf_printf(b, ",%d,%d", i == 0, i == named);
        cell_str(b, st_rep_status_name(c->status), 0);
        int ok = c->status == ST_REP_OK;
        cell_num(b, ok ? c->cap->capacity_rps : NAN);
        cell_num(b, c->cap_vs_base);
        cell_num(b, ok ? c->cap->output_tps : NAN);
        cell_num(b, ok ? c->cost.usd_per_1m : NAN);
        cell_num(b, c->cost_vs_base);
        cell_num(b, c->ttft_p95_ms);
        cell_num(b, c->tpot_p95_ms);
        cell_num(b, c->cap->has_pass ? c->cap->pass_rate : NAN);
        cell_num(b, c->cap->has_fail_above ? c->cap->fail_rate : NAN);
        st_buf_printf(b, ",%d", ok && c->cap->highest_tested_passed);
        cell_num(b, c->grid.capacity_rps);
        cell_num(b, r->refine ? c->refined.capacity_rps : NAN);
        cell_num(b, c->cap->sustained_rps);
        if (ok)
            st_buf_printf(b, ",%ld", c->cost.replicas);
        else
            st_buf_puts(b, ",");
        cell_num(b, ok ? c->cost.monthly_usd : NAN);
        cell_str(b, c->note[0] ? c->note : NULL, 0);
        const st_capacity *cp = c->cap;
        cell_str(b, st_spec_method_name(&r->spec), 0);
        if (r->sustained) {
            char bind[48];
            st_report_binding(r, c, bind, sizeof bind);
            cell_num(b, cp->has_pass ? cp->ci_lo : NAN);
            cell_num(b, cp->has_pass ? cp->ci_hi : NAN);
            cell_str(b, strcmp(bind, "-") ? bind : NULL, 0); /* none: an empty field */
            cell_str(b, cp->has_pass && cp->has_fail_above ? (cp->cliff ? "cliff" : "smooth") : NULL, 0);
            st_buf_printf(b, ",%d", cp->runs);
            cell_num(b, cp->engine_s / 60);
            cell_num(b, cp->max_throughput_rps);
        } else {
            st_buf_puts(b, ",,,,,,,");
        }
        st_rep_quality_csv(r, i, b);
        st_buf_puts(b, "\n");
    }
    return st_buf_error(b) ? -1 : 0;
}
