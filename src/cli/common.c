/* What several subcommands share. */
#include <stdio.h>

#include <stdlib.h>

#include "audit/spec.h"
#include "audit/store.h"
#include "audit/traffic.h"
#include "cli/cli.h"
#include "load/trace.h"
#include "load/workload.h"

int st_cli_usage_error(const char *cmd, const char *reason)
{
    fprintf(stderr, "servetune %s: %s\n", cmd, reason);
    fprintf(stderr, "Try 'servetune %s --help' for more information.\n", cmd);
    return ST_EXIT_USAGE;
}

int st_cli_load_spec(const char *path, struct st_spec *spec)
{
    char err[1024] = "";
    if (st_spec_load(path, spec, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    if (spec->workload.kind == ST_WL_TRACE) {
        /* every row is read (a malformed one is an error now, not mid-audit), none is kept */
        st_trace_counts c;
        if (st_trace_read_file(spec->workload.trace, NULL, NULL, NULL, &c, NULL, err, sizeof err)) {
            fprintf(stderr, "%s: workload.trace: %s\n", path, err);
            st_spec_free(spec);
            return -1;
        }
        if (!c.kept) {
            char d[400];
            st_trace_counts_describe(&c, d, sizeof d);
            fprintf(stderr, "%s: workload.trace: %s holds no requests (%s)\n", path, spec->workload.trace, d);
            st_spec_free(spec);
            return -1;
        }
    }
    return 0;
}

void st_cli_store_traffic(struct st_store *store, const struct st_spec *spec)
{
    if (spec->workload.kind != ST_WL_TRACE)
        return;
    char *json = NULL, err[1024];
    if (st_audit_traffic_json(spec, &json, err, sizeof err) < 0)
        fprintf(stderr, "servetune: the trace's statistics are left out of the report: %s\n", err);
    else if (st_store_meta_put(store, "traffic", json) < 0)
        fprintf(stderr, "servetune: the trace's statistics are left out of the report: %s\n", st_store_errmsg(store));
    free(json);
}
