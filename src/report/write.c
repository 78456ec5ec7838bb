#include <stdio.h>
#include <string.h>

#include "core/file.h"

#include "report/html_audit.h"
#include "report/report.h"


static int write_file(const char *dir, const char *name, const st_buf *b, char *err, size_t errlen)
{
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path) {
        snprintf(err, errlen, "%s: path too long", dir);
        return -1;
    }
    return st_write_file_atomic(path, b->data ? b->data : "", b->len, err, errlen);
}

int st_report_write_all(st_store *s, const char *dir, char *err, size_t errlen)
{
    st_report r;
    if (st_report_load(s, &r, err, errlen))
        return -1;
    int rc = 0;
    st_html_audit_opts hopts = { .prediction = r.audit.prediction };
    st_buf b;
    st_buf_init(&b, ST_REPORT_MAX_BYTES);
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
    if (rc && !err[0]) {
        char why[96];
        snprintf(err, errlen, "report: %s", st_buf_error(&b) ? st_buf_strerror(&b, why, sizeof why) : "out of memory");
    }
    st_buf_free(&b);
    st_report_free(&r);
    return rc;
}
