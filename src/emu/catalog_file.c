/* The only I/O of the catalogs: read a small file and hand its bytes to the pure parsers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/file.h"
#include "emu/calib.h"
#include "emu/catalog.h"

#define CATALOG_FILE_MAX (1 << 20)

static char *read_small(const char *path, size_t *len, char *err, size_t errlen)
{
    return st_read_file(path, CATALOG_FILE_MAX, len, err, errlen);
}

int st_emu_gpu_load_file(const char *path, st_emu_gpu *out, char *err, size_t errlen)
{
    size_t n;
    char *b = read_small(path, &n, err, errlen);
    if (!b)
        return -1;
    int rc = st_emu_gpu_parse(b, n, out, err, errlen);
    free(b);
    return rc;
}

int st_emu_model_load_file(const char *path, st_emu_model *out, char *err, size_t errlen)
{
    char p[4096];
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        snprintf(p, sizeof p, "%s/config.json", path);
    else
        snprintf(p, sizeof p, "%s", path);
    size_t n;
    char *b = read_small(p, &n, err, errlen);
    if (!b)
        return -1;
    int rc = st_emu_model_parse_config(b, n, path, out, err, errlen);
    free(b);
    return rc;
}

int st_calib_load_file(const char *path, st_emu_calib *out, char *err, size_t errlen)
{
    size_t n;
    char *b = read_small(path, &n, err, errlen);
    if (!b)
        return -1;
    char e2[512];
    int rc = st_calib_parse(b, n, out, e2, sizeof e2);
    if (rc < 0)
        snprintf(err, errlen, "%s: %s", path, e2);
    free(b);
    return rc;
}
