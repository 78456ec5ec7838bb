/* Fuzzes the trace parser (one line and a whole buffer of lines): errors must be reported,
 * never crash, and everything allocated must be freed. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "load/workload.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 16))
        return 0;
    char *p = malloc(size ? size : 1);
    if (!p)
        return 0;
    memcpy(p, data, size);
    st_work_item it;
    int has_ts;
    double ts;
    char err[256];
    if (st_trace_parse_line(p, size, 0, &it, &has_ts, &ts, err, sizeof err) == 0) {
        if (!it.input_ids && !it.input_text)
            abort();
        if (it.input_ids && it.prefix_len > it.input_len)
            abort();
        st_work_item_free(&it);
    }
    st_workload w;
    if (st_workload_trace_parse(p, size, "fuzz", &w, err, sizeof err) == 0) {
        for (uint32_t i = 0; i < w.n; i++)
            if (i && w.items[i].arrival >= 0 && w.items[i].arrival < w.items[i - 1].arrival)
                abort();
        st_workload_free(&w);
    } else if (w.items || w.n) {
        abort();
    }
    free(p);
    return 0;
}
