#include "report/day.h"

#include <math.h>
#include <stdio.h>

#include "audit/traffic.h"
#include "report/format.h"

const char *const st_rep_day_head[1 + ST_REP_DAY_CELLS] = { "setup",
                                                            "replicas at peak",
                                                            "peak-sized",
                                                            "autoscaled",
                                                            "serverless",
                                                            "cheapest",
                                                            "utilization of the peak-sized fleet",
                                                            "serverless wins below",
                                                            "requests meeting a cold start" };

const char *const st_rep_day_note =
    "A request that meets a cold start waits that much longer for its first token; when more than 5 % of "
    "requests do, the p95 TTFT of a serverless deployment is the cold start, not the engine's.";

void st_rep_day_intro(st_buf *b, const st_spec *s, double serverless_price_per_gpu_s, const char *serverless_from)
{
    double peak = 0, sum = 0, rps[24];
    int n = st_day_spec_hours(s, rps);
    for (int h = 0; h < n; h++) {
        peak = rps[h] > peak ? rps[h] : peak;
        sum += rps[h];
    }
    if (s->traffic.day_source != ST_DAY_STATED) {
        st_audit_day_source_say(s, b);
        st_buf_puts(b, " ");
    }
    st_buf_printf(b,
                  "The %s: %.3g requests/s at its peak hour, %.3g on average, %.0f requests in all. "
                  "Dedicated replicas sized for the peak, autoscaled hour by hour (a replica starts %.0f s "
                  "before its hour, at least %d always on), or serverless workers billed per second",
                  s->traffic.day_source == ST_DAY_STATED ? "spec's day"
                  : n < 24                               ? "hours priced"
                                                         : "trace's day",
                  peak, n ? sum / n : 0, sum * 3600, s->traffic.scale_up_delay_s, s->traffic.min_replicas);
    if (serverless_price_per_gpu_s > 0)
        st_buf_printf(b, " ($%.6g per GPU-second, %s; idle timeout %.0f s, cold start %.0f s)",
                      serverless_price_per_gpu_s, serverless_from ? serverless_from : "", s->traffic.idle_timeout_s,
                      s->traffic.cold_start_s);
    else
        st_buf_puts(b, " (no serverless price for this GPU: not priced)");
    st_buf_puts(b, ". The cost of one day:");
}

void st_rep_day_cells(const st_day_cost *d, char cells[ST_REP_DAY_CELLS][ST_REP_DAY_CELL_MAX])
{
    snprintf(cells[0], ST_REP_DAY_CELL_MAX, "%ld", d->peak_replicas);
    st_fmt_money(cells[1], ST_REP_DAY_CELL_MAX, d->peak_usd);
    st_fmt_money(cells[2], ST_REP_DAY_CELL_MAX, d->autoscaled_usd);
    st_fmt_money(cells[3], ST_REP_DAY_CELL_MAX, d->serverless_usd);
    snprintf(cells[4], ST_REP_DAY_CELL_MAX, "%s", d->cheapest ? d->cheapest : "-");
    snprintf(cells[5], ST_REP_DAY_CELL_MAX, "%.0f %%", 100 * d->utilization);
    if (isfinite(d->break_even_utilization))
        snprintf(cells[6], ST_REP_DAY_CELL_MAX, "%.0f %%", 100 * d->break_even_utilization);
    else
        snprintf(cells[6], ST_REP_DAY_CELL_MAX, "-");
    snprintf(cells[7], ST_REP_DAY_CELL_MAX, "%.1f %%", 100 * d->cold_share);
}

void st_rep_day_markdown(st_buf *b, const st_spec *s, double serverless_price_per_gpu_s, const char *serverless_from,
                         const char *const *who, const st_day_cost *const *d, int n)
{
    if (!s->traffic.set || n <= 0)
        return;
    st_buf_puts(b, "## A traffic day\n\n");
    st_rep_day_intro(b, s, serverless_price_per_gpu_s, serverless_from);
    st_buf_puts(b, "\n\n|");
    for (int c = 0; c <= ST_REP_DAY_CELLS; c++)
        st_buf_printf(b, " %s |", st_rep_day_head[c]);
    st_buf_puts(b, "\n|");
    for (int c = 0; c <= ST_REP_DAY_CELLS; c++)
        st_buf_puts(b, "---|");
    st_buf_puts(b, "\n");
    for (int i = 0; i < n; i++) {
        char cells[ST_REP_DAY_CELLS][ST_REP_DAY_CELL_MAX];
        st_rep_day_cells(d[i], cells);
        st_buf_printf(b, "| %s |", who[i]);
        for (int c = 0; c < ST_REP_DAY_CELLS; c++)
            st_buf_printf(b, " %s |", cells[c]);
        st_buf_puts(b, "\n");
    }
    st_buf_printf(b, "\n%s\n\n", st_rep_day_note);
}

json_t *st_rep_day_json(const st_day_cost *d)
{
    json_t *o = json_object();
    json_object_set_new(o, "peak_replicas", json_integer(d->peak_replicas));
    json_object_set_new(o, "peak_sized_usd", st_jnum_or_null(d->peak_usd));
    json_object_set_new(o, "autoscaled_usd", st_jnum_or_null(d->autoscaled_usd));
    json_object_set_new(o, "serverless_usd", st_jnum_or_null(d->serverless_usd));
    json_object_set_new(o, "cheapest", json_string(d->cheapest ? d->cheapest : ""));
    json_object_set_new(o, "utilization", st_jnum_or_null(d->utilization));
    json_object_set_new(o, "break_even_utilization", st_jnum_or_null(d->break_even_utilization));
    json_object_set_new(o, "cold_start_share", st_jnum_or_null(d->cold_share));
    return o;
}
