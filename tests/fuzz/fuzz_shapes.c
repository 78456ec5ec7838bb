/* Fuzzes the engine model over model shapes, degenerate ones included (tests/emu_shapes.h): the
 * shape check, the memory plan, the KV block pool of the planned size and a two-request run must
 * agree and end in bounded time, with no overflow under UBSan. The same property runs as a unit
 * test (tests/unit/test_emu_shapes.c). A config.json given as text (input starting with '{') goes
 * through the parser first: what it accepts must pass st_emu_model_check. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "../emu_shapes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    char why[1200];
    if (size && data[0] == '{') {
        st_emu_model m;
        char err[512];
        if (st_emu_model_parse_config((const char *)data, size, "fuzz", &m, err, sizeof err) == 0 &&
            st_emu_model_check(&m, err, sizeof err)) {
            fprintf(stderr, "parsed but out of range: %s\n", err);
            abort();
        }
        return 0;
    }
    if (shape_case(data, size, why, sizeof why) < 0) {
        fprintf(stderr, "%s\n", why);
        abort();
    }
    return 0;
}
