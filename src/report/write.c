#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/file.h"
#include "report/deploy.h"
#include "report/distrust.h"

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

/* DIR/deploy.md and DIR/deploy-k8s.yaml for the headline pick, sized at its replicas at peak;
 * nothing when nothing passed, the headline names no winner, or the engine is an endpoint (an older deploy.md is removed, so
 * a re-rendered report never shows the deploy snippets of an earlier pick). */
static int write_deploy(const st_report *r, const char *dir, st_buf *b, char *err, size_t errlen)
{
    char path[4096];
    const char *names[] = { "deploy.md", "deploy-k8s.yaml" };
    int pick = st_report_named_pick(r);
    if (pick < 0 || !st_deploy_supported(&r->spec)) {
        for (int i = 0; i < 2; i++) {
            snprintf(path, sizeof path, "%s/%s", dir, names[i]);
            (void)unlink(path);
        }
        return 0;
    }
    const st_rep_cfg *c = &r->cfg[pick];
    st_deploy_opts o = { .replicas = c->cost.replicas };
    st_buf_reset(b);
    st_buf_printf(b,
                  "# Deploying %s\n\nThe configuration the audit picked (the cheapest per output token within the "
                  "SLO), as snippets to run it. Sized for the stated peak: %ld replica%s. Check the image tag "
                  "against the engine version you audited.\n\n",
                  c->name, c->cost.replicas, c->cost.replicas == 1 ? "" : "s");
    if (st_deploy_markdown(&r->spec, c->spec, &o, b) || write_file(dir, names[0], b, err, errlen))
        return -1;
    st_buf_reset(b);
    if (st_deploy_k8s(&r->spec, c->spec, &o, b) || write_file(dir, names[1], b, err, errlen))
        return -1;
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
    if (!rc && write_deploy(&r, dir, &b, err, errlen))
        rc = -1;
    if (rc && !err[0]) {
        char why[96];
        snprintf(err, errlen, "report: %s", st_buf_error(&b) ? st_buf_strerror(&b, why, sizeof why) : "out of memory");
    }
    st_buf_free(&b);
    st_report_free(&r);
    return rc;
}
