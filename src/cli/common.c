/* What several subcommands share. */
#include <stdio.h>

#include <stdlib.h>

#include "audit/executor.h"
#include "audit/spec.h"
#include "audit/store.h"
#include "audit/traffic.h"
#include "cli/cli.h"
#include "emu/calib.h"
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

int st_cli_load_calibration(const char *path, const struct st_spec *spec, struct st_emu_calib *out)
{
    char err[1024];
    if (st_calib_load_file(path, out, err, sizeof err)) {
        fprintf(stderr, "servetune: --calibration %s\n", err);
        return -1;
    }
    if (!spec)
        return 0;
    int matched = 0;
    char why[4][512];
    int nwhy = 0;
    for (int i = 0; i < spec->n_configs; i++) {
        st_emu_config cfg;
        char r[512];
        if (st_exec_model_config(spec, &spec->configs[i], &cfg, NULL, 0, NULL, err, sizeof err))
            continue; /* refused later with its own message */
        if (st_calib_check(out, &cfg, r, sizeof r, NULL, 0) == 0)
            matched++;
        else {
            if (nwhy < 4)
                snprintf(why[nwhy++], sizeof why[0], "%s", r);
            fprintf(stderr,
                    "servetune: --calibration %s does not apply to configuration %s (%s): it runs on the "
                    "model's defaults\n",
                    path, spec->configs[i].name, r);
        }
    }
    if (!matched) {
        fprintf(stderr, "servetune: --calibration %s is refused: it matches no configuration of the spec (%s)\n", path,
                nwhy ? why[0] : "no configuration could be modelled");
        return -1;
    }
    return 0;
}
