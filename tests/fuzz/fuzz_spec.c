/* The audit spec parser on arbitrary bytes: it must reject or accept without crashing, leaking
 * or reading out of bounds, and an accepted spec must give consistent configuration flags. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "audit/spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    st_spec s;
    char err[512];
    if (st_spec_parse("fuzz.yaml", (const char *)data, size, &s, err, sizeof err) == 0) {
        for (int i = 0; i < s.n_configs; i++) {
            st_strv f;
            if (st_spec_config_flags(&s, &s.configs[i], &f) == 0)
                st_strv_free(&f);
            if (!st_spec_config_model(&s, &s.configs[i]))
                abort();
        }
        st_spec_free(&s);
    } else if (!err[0]) {
        abort(); /* a rejection always says why */
    }
    return 0;
}
