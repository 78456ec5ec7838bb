/* Fuzzes the Prometheus text parser and the lookups on top of it: bounded reads only,
 * and the iteration always ends. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/metrics.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *p = malloc(size ? size : 1);
    if (!p)
        return 0;
    memcpy(p, data, size);
    st_prom_iter it;
    st_prom_sample s;
    char err[128], buf[32];
    int rc;
    size_t steps = 0;
    st_prom_iter_init(&it, p, size);
    while ((rc = st_prom_next(&it, &s, err, sizeof err)) != 0) {
        if (++steps > size + 1)
            abort(); /* every call consumes at least one line */
        if (rc == 1) {
            if (s.name < p || s.name + s.name_len > p + size)
                abort();
            (void)st_prom_label(&s, "le", buf, sizeof buf);
            (void)st_prom_label(&s, "model_name", buf, sizeof buf);
            (void)st_prom_match(&s, "engine=0,model_name=m");
        }
    }
    double v;
    uint32_t c;
    (void)st_prom_get(p, size, "a", "x=1", &v);
    (void)st_prom_sum(p, size, "vllm:num_requests_running", NULL, &v, &c);
    st_prom_hist h;
    if (st_prom_histogram(p, size, "h", NULL, &h) == 0)
        (void)st_prom_hist_quantile(&h, 0.95);
    st_engine_metrics m;
    (void)st_metrics_read(ST_DIALECT_VLLM, p, size, &m);
    free(p);
    return 0;
}
