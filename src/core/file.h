/* Whole-file reads with a size limit (specs, traces, GPU and model files, logs). */
#ifndef ST_FILE_H
#define ST_FILE_H
#include <stddef.h>

/* Reads the whole file at path into a malloc'd, NUL-terminated buffer (its length in *len).
 * A file larger than max bytes is an error ("PATH: larger than MAX bytes"), never silently
 * cut. Returns NULL with a reason in err (prefixed by the path) on any failure. */
char *st_read_file(const char *path, size_t max, size_t *len, char *err, size_t errlen);

#endif
