/* Fuzzes the GGUF parser (engine/gguf.h): malformed files must be refused with a reason, never
 * crash or over-read; what it accepts must serialise back to a header it accepts again, with
 * the same keys, tensors and data offsets. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 16))
        return 0;
    /* an exact-size copy: any read past the end is caught by ASan */
    uint8_t *p = malloc(size ? size : 1);
    if (!p)
        return 0;
    memcpy(p, data, size);
    st_gguf g;
    char err[256] = "";
    if (st_gguf_parse(p, size, size, &g, err, sizeof err)) {
        if (!err[0] || g.n_kv || g.n_t)
            abort();
        free(p);
        return 0;
    }
    if (g.data_offset > size || (g.n_t && g.data_offset % g.alignment))
        abort();
    for (size_t i = 0; i < g.n_kv; i++) {
        const st_gguf_value *v = &g.kv[i].v;
        if (v->type == ST_GGUF_ARR && v->elem == ST_GGUF_STR)
            for (uint64_t k = 0; k < v->n && k < 64; k++) {
                const char *s;
                uint64_t n;
                if (st_gguf_arr_str(v, k, &s, &n) || s < (const char *)v->raw ||
                    s + n > (const char *)v->raw + v->raw_len)
                    abort();
            }
    }
    unsigned char *h;
    size_t hl;
    if (st_gguf_header(&g, &h, &hl, err, sizeof err) == 0) {
        st_gguf r;
        /* the same description, so the same data layout, within the original file size */
        if (st_gguf_parse(h, hl, hl + g.data_size, &r, err, sizeof err))
            abort();
        if (r.n_kv != g.n_kv || r.n_t != g.n_t || r.data_size != g.data_size || hl != r.data_offset)
            abort();
        for (size_t i = 0; i < g.n_t; i++)
            if (strcmp(r.t[i].name, g.t[i].name) || r.t[i].offset != g.t[i].offset || r.t[i].nbytes != g.t[i].nbytes)
                abort();
        st_gguf_free(&r);
        free(h);
    }
    st_gguf_free(&g);
    free(p);
    return 0;
}
