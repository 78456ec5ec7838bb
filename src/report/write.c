#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "report/html_audit.h"
#include "report/report.h"

#define REPORT_MAX (64u << 20)

/* Writes atomically: DIR/name.tmp then rename, so a reader never sees half a report. */
static int write_file(const char *dir, const char *name, const st_buf *b, char *err, size_t errlen)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
        return -1;
    }
    size_t n = b->len ? fwrite(b->data, 1, b->len, f) : 0;
    int bad = n != b->len;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path)) {
        snprintf(err, errlen, "%s: write failed", path);
        unlink(tmp);
        return -1;
    }
    return 0;
}

int st_report_write_all(st_store *s, const char *dir, char *err, size_t errlen)
{
    st_report r;
    if (st_report_load(s, &r, err, errlen))
        return -1;
    int rc = 0;
    st_html_audit_opts hopts = { .prediction = r.audit.prediction };
    st_buf b;
    st_buf_init(&b, REPORT_MAX);
    if (st_report_markdown(&r, &b) || write_file(dir, "report.md", &b, err, errlen))
        rc = -1;
    st_buf_reset(&b);
    if (!rc && (st_report_json(&r, &b) || write_file(dir, "report.json", &b, err, errlen)))
        rc = -1;
    st_buf_reset(&b);
    if (!rc && (st_report_csv(&r, &b) || write_file(dir, "results.csv", &b, err, errlen)))
        rc = -1;
    st_buf_reset(&b);
    if (!rc && (st_report_html(&r, s, &hopts, &b, err, errlen) || write_file(dir, "report.html", &b, err, errlen)))
        rc = -1;
    if (rc && !err[0])
        snprintf(err, errlen, "report too large");
    st_buf_free(&b);
    st_report_free(&r);
    return rc;
}
