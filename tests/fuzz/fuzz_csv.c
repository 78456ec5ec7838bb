/* Fuzzes the CSV record reader: every call either consumes input or ends, fields stay inside
 * the scratch buffer and are NUL-terminated at their length. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/csv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *p = malloc(size ? size : 1);
    if (!p)
        return 0;
    memcpy(p, data, size);
    st_csv c;
    char err[160];
    st_csv_init(&c, p, size);
    size_t steps = 0;
    int rc;
    while ((rc = st_csv_next(&c, err, sizeof err)) == 1) {
        if (++steps > size + 1)
            abort(); /* each record consumes at least one byte */
        for (int i = 0; i < c.n; i++)
            if (strlen(c.field[i]) > c.len[i] || c.field[i][c.len[i]] != '\0')
                abort();
        (void)st_csv_find(&c, "gpu");
    }
    st_csv_free(&c);
    free(p);
    return 0;
}
