#include "engine/metrics_scrape.h"

#include <math.h>

#include "engine/metrics.h"

/* Static names for the histogram samples (the store keeps the name pointer until the run is
 * written, so they must outlive the scrape). */
static const char *const le_names[ST_SCRAPE_HIST_MAX] = {
    "ttft_le_00", "ttft_le_01", "ttft_le_02", "ttft_le_03", "ttft_le_04", "ttft_le_05",
    "ttft_le_06", "ttft_le_07", "ttft_le_08", "ttft_le_09", "ttft_le_10", "ttft_le_11",
    "ttft_le_12", "ttft_le_13", "ttft_le_14", "ttft_le_15", "ttft_le_16", "ttft_le_17",
    "ttft_le_18", "ttft_le_19", "ttft_le_20", "ttft_le_21", "ttft_le_22", "ttft_le_23",
    "ttft_le_24", "ttft_le_25", "ttft_le_26", "ttft_le_27", "ttft_le_28", "ttft_le_29",
    "ttft_le_30", "ttft_le_31", "ttft_le_32", "ttft_le_33", "ttft_le_34", "ttft_le_35",
    "ttft_le_36", "ttft_le_37", "ttft_le_38", "ttft_le_39", "ttft_le_40", "ttft_le_41",
    "ttft_le_42", "ttft_le_43", "ttft_le_44", "ttft_le_45", "ttft_le_46", "ttft_le_47",
};
static const char *const cum_names[ST_SCRAPE_HIST_MAX] = {
    "ttft_cum_00", "ttft_cum_01", "ttft_cum_02", "ttft_cum_03", "ttft_cum_04", "ttft_cum_05",
    "ttft_cum_06", "ttft_cum_07", "ttft_cum_08", "ttft_cum_09", "ttft_cum_10", "ttft_cum_11",
    "ttft_cum_12", "ttft_cum_13", "ttft_cum_14", "ttft_cum_15", "ttft_cum_16", "ttft_cum_17",
    "ttft_cum_18", "ttft_cum_19", "ttft_cum_20", "ttft_cum_21", "ttft_cum_22", "ttft_cum_23",
    "ttft_cum_24", "ttft_cum_25", "ttft_cum_26", "ttft_cum_27", "ttft_cum_28", "ttft_cum_29",
    "ttft_cum_30", "ttft_cum_31", "ttft_cum_32", "ttft_cum_33", "ttft_cum_34", "ttft_cum_35",
    "ttft_cum_36", "ttft_cum_37", "ttft_cum_38", "ttft_cum_39", "ttft_cum_40", "ttft_cum_41",
    "ttft_cum_42", "ttft_cum_43", "ttft_cum_44", "ttft_cum_45", "ttft_cum_46", "ttft_cum_47",
};

static int put(st_metric_sample *out, int n, int max, const char *name, double v)
{
    if (n >= max || !isfinite(v))
        return n;
    out[n].t = 0;
    out[n].name = name;
    out[n].value = v;
    return n + 1;
}

/* The engine's TTFT histogram, when it has one and it fits in what is left of out. */
static int ttft_hist(const char *dialect, const char *body, size_t len, st_metric_sample *out, int n, int max)
{
    const char *const *names = st_metrics_hist_names(dialect, "ttft");
    st_prom_hist h;
    for (; names && *names; names++) {
        if (st_prom_histogram(body, len, *names, NULL, &h) != 0 || !h.n)
            continue;
        uint32_t finite = 0;
        while (finite < h.n && isfinite(h.le[finite]))
            finite++;
        if (finite > ST_SCRAPE_HIST_MAX || n + 2 * (int)finite + 2 > max)
            return n;
        for (uint32_t i = 0; i < finite; i++) {
            n = put(out, n, max, le_names[i], h.le[i]);
            n = put(out, n, max, cum_names[i], h.count[i]);
        }
        n = put(out, n, max, "ttft_count", h.total);
        n = put(out, n, max, "ttft_sum", h.sum);
        return n;
    }
    return n;
}

/* The Prometheus text is parsed by engine/metrics (the project's one parser); this only turns
 * its generic figures into samples to store. */
int st_scrape_parse(const char *dialect, const char *body, size_t len, st_metric_sample *out, int max)
{
    st_engine_metrics m;
    if (st_metrics_read(dialect, body, len, &m))
        return 0;
    int n = 0;
    for (int k = 0; k < ST_MET__COUNT && n < max; k++) {
        if (!(m.found & (1u << k)) || !isfinite(m.v[k]))
            continue;
        n = put(out, n, max, st_metric_name((st_metric)k), m.v[k]);
    }
    return ttft_hist(dialect, body, len, out, n, max);
}

int st_scrape_interval_ms(double time_scale)
{
    if (!(time_scale > 1))
        return 1000;
    int ms = (int)(1000 / time_scale) / 50 * 50;
    return ms < 100 ? 100 : ms;
}
