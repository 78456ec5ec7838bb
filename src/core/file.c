#include "core/file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *st_read_file(const char *path, size_t max, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = max < 65536 ? max : 65536, n = 0;
    char *buf = malloc(cap + 1);
    for (;;) {
        if (!buf) {
            snprintf(err, errlen, "%s: out of memory", path);
            break;
        }
        n += fread(buf + n, 1, cap - n, f);
        if (ferror(f)) {
            snprintf(err, errlen, "%s: read error: %s", path, strerror(errno));
            break;
        }
        if (n < cap) { /* end of file */
            fclose(f);
            buf[n] = '\0';
            *len = n;
            return buf;
        }
        if (cap >= max) {
            if (fgetc(f) == EOF && !ferror(f)) { /* exactly max bytes */
                fclose(f);
                buf[n] = '\0';
                *len = n;
                return buf;
            }
            snprintf(err, errlen, "%s: larger than %zu bytes", path, max);
            break;
        }
        size_t ncap = cap * 2 < max ? cap * 2 : max;
        char *p = realloc(buf, ncap + 1);
        if (!p) {
            free(buf);
            buf = NULL;
            continue;
        }
        buf = p;
        cap = ncap;
    }
    free(buf);
    fclose(f);
    return NULL;
}
