/* What several subcommands share. */
#include <stdio.h>

#include "audit/spec.h"
#include "cli/cli.h"
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
        st_workload w;
        if (st_workload_trace_load(spec->workload.trace, &w, err, sizeof err)) {
            fprintf(stderr, "%s: workload.trace: %s\n", path, err);
            st_spec_free(spec);
            return -1;
        }
        st_workload_free(&w);
    }
    return 0;
}
