/* Fuzzes the bill parser (plan/attrib.h: RunPod billing JSON or a time,amount CSV): it accepts
 * or refuses with a message, never reads out of bounds; an accepted bill has its buckets in time
 * order, non-negative amounts and an hourly or daily width; its cents split by largest remainder
 * sums to each bucket's amount. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plan/attrib.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    st_bill b;
    char err[512];
    if (st_bill_parse("fuzz", (const char *)data, size, 0, &b, err, sizeof err) < 0) {
        if (!err[0])
            abort();
        return 0;
    }
    if (b.n == 0 || (b.width_s != 3600 && b.width_s != 86400))
        abort();
    double w[3] = { 0.25, 1.0 / 3, 0.4 };
    int64_t c[3];
    for (uint32_t i = 0; i < b.n; i++) {
        if (b.b[i].cents < 0 || (i && b.b[i].t_s < b.b[i - 1].t_s))
            abort();
        st_attrib_cents(b.b[i].cents, w, 3, c);
        if (c[0] + c[1] + c[2] != b.b[i].cents)
            abort();
    }
    st_bill_free(&b);
    return 0;
}
