#include "cluster/jobs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/file.h"
#include "core/util.h"

int st_jobs_path(const char *dir, const char *file, char *out, size_t n)
{
    int k = snprintf(out, n, "%s/%s/%s", dir, ST_CLUSTER_DIR, file);
    return k < 0 || (size_t)k >= n ? -1 : 0;
}

json_t *st_jobs_load(const char *dir, char *err, size_t errlen)
{
    char p[4200];
    err[0] = '\0';
    if (st_jobs_path(dir, ST_CLUSTER_JOBS, p, sizeof p)) {
        st_errf(err, errlen, "%.200s...: the folder's path is too long", dir);
        return NULL;
    }
    if (access(p, F_OK))
        return NULL;
    size_t len;
    char *text = st_read_file(p, ST_CLUSTER_JOBS_MAX, &len, err, errlen);
    if (!text)
        return NULL;
    json_error_t je;
    json_t *j = json_loadb(text, len, 0, &je);
    free(text);
    if (!j || !json_is_object(j)) {
        st_errf(err, errlen, "%.900s: %.100s", p, j ? "not a JSON object" : je.text);
        json_decref(j);
        return NULL;
    }
    return j;
}

int st_jobs_save(const char *dir, json_t *jobs, char *err, size_t errlen)
{
    char p[4200];
    if (st_jobs_path(dir, ST_CLUSTER_JOBS, p, sizeof p)) {
        st_errf(err, errlen, "%.200s...: the folder's path is too long", dir);
        return -1;
    }
    char *text = json_dumps(jobs, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (!text) {
        st_errf(err, errlen, "out of memory");
        return -1;
    }
    int rc = st_write_file_atomic(p, text, strlen(text), err, errlen);
    free(text);
    return rc;
}

json_t *st_jobs_last(json_t *jobs)
{
    json_t *subs = json_object_get(jobs, "submissions");
    size_t n = json_array_size(subs);
    return n ? json_array_get(subs, n - 1) : NULL;
}

const char *st_jobs_str(json_t *submission, const char *key)
{
    return json_string_value(json_object_get(submission, key));
}

int st_jobs_ids(json_t *jobs, const char ***ids, int *n)
{
    json_t *subs = json_object_get(jobs, "submissions");
    *n = 0;
    *ids = calloc(2 * json_array_size(subs) + 1, sizeof **ids);
    if (!*ids)
        return -1;
    size_t i;
    json_t *s;
    json_array_foreach(subs, i, s)
    {
        if (st_jobs_str(s, "array_job"))
            (*ids)[(*n)++] = st_jobs_str(s, "array_job");
        if (st_jobs_str(s, "merge_job"))
            (*ids)[(*n)++] = st_jobs_str(s, "merge_job");
    }
    return 0;
}

int st_jobs_covers(json_t *submission, int idx)
{
    json_t *v = json_object_get(submission, "indices");
    size_t k;
    json_t *x;
    json_array_foreach(v, k, x) if (json_integer_value(x) == idx) return 1;
    return 0;
}
