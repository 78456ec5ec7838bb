#include "engine/metrics_scrape.h"

#include <math.h>

#include "engine/metrics.h"

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
        out[n].t = 0;
        out[n].name = st_metric_name((st_metric)k);
        out[n].value = m.v[k];
        n++;
    }
    return n;
}
