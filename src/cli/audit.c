/* servetune audit SPEC -o DIR: run every configuration of a spec on the engine, find each
 * one's capacity at the SLO, price it, and write the report. Exit codes: docs/exit-codes.md. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit/spec.h"
#include "audit/store.h"
#include "audit/sweep.h"
#include "cli/cli.h"
#include "core/opts.h"
#include "engine/process.h"

static void help(const st_opt *opts)
{
    printf("usage: servetune audit SPEC -o DIR [--resume] [--quiet]\n"
           "       servetune audit --check SPEC\n\n"
           "Runs every configuration of the audit spec on its engine: starts the engine, warms it up, drives it\n"
           "at each rate with an open-loop streaming load, finds the highest rate that meets the SLO, prices it,\n"
           "and writes DIR/report.html, DIR/report.md, DIR/report.json and DIR/results.csv. Every finished rate\n"
           "run is kept in DIR/results.sqlite the moment it ends; engine logs go to DIR/logs/.\n\n"
           "Options:\n");
    st_opts_usage(stdout, opts);
    printf("\nExamples:\n"
           "  servetune audit --check examples/qwen3-8b-h100.yaml\n"
           "  servetune audit examples/qwen3-8b-h100.yaml -o audit-out\n"
           "  servetune audit examples/qwen3-8b-h100.yaml -o audit-out --resume   # after an interruption\n"
           "  servetune report audit-out                                         # re-render the reports\n\n"
           "--check runs every check a run makes before it starts (the same function): a spec it accepts runs.\n"
           "One servetune at a time may use DIR (it is locked); --resume first stops any engine an earlier,\n"
           "killed audit of DIR left running. Secrets (the API key, every ${VAR} value) are removed from\n"
           "everything written: database, reports, engine logs, this output (docs/audit-spec.md, Secrets).\n\n"
           "Exit codes: 0 done; 1 done but a configuration failed (did not start, crashed, hung, or every one\n"
           "of its requests failed) or a run broke; 2 bad arguments, an invalid spec, or DIR refused (in use,\n"
           "another spec, a prediction): nothing in DIR was changed; 4 interrupted (SIGINT/SIGTERM): what\n"
           "finished is kept and the report says it is partial.\n"
           "The spec format: docs/audit-spec.md.\n");
}

/* Engines an earlier audit of this folder left running (servetune was killed before it could
 * stop them: process.h explains how they are found). */
static void stop_stale_engines(st_cli_run *r)
{
    char logdir[4200], tag[64];
    snprintf(logdir, sizeof logdir, "%s/logs", r->out_dir);
    if (st_proc_dir_tag(logdir, tag, sizeof tag))
        return; /* no logs folder: no engine was ever started here */
    int n = st_proc_kill_tagged(tag, r->spec.timeouts.stop_grace_s);
    if (n > 0)
        fprintf(r->out, "servetune audit: stopped %d engine process%s left running by an earlier audit of %s\n", n,
                n == 1 ? "" : "es", r->out_dir);
}

static void print_check(const st_spec *spec, const char *spec_path)
{
    int planned = spec->n_configs * spec->n_rates;
    printf("%s: OK: %s engine, model %s, %d configuration%s x %d rate%s (%d rate runs of %u requests at most)\n",
           spec_path, st_engine_kind_name(spec->engine.kind), spec->engine.model, spec->n_configs,
           spec->n_configs == 1 ? "" : "s", spec->n_rates, spec->n_rates == 1 ? "" : "s", planned,
           spec->workload.requests_per_rate);
}

int cmd_audit(int argc, char **argv)
{
    const char *out_dir = NULL;
    int check = 0, resume = 0, quiet = 0;
    const st_opt opts[] = {
        { "output", 'o', ST_OPT_STR, &out_dir, "DIR", "output folder (created; holds the database, logs and reports)",
          0, 0, 0 },
        { "check", 0, ST_OPT_FLAG, &check, NULL, "validate the spec as a run would (nothing is started) and exit", 0, 0,
          0 },
        { "resume", 0, ST_OPT_FLAG, &resume, NULL,
          "continue an interrupted audit in DIR without repeating finished runs", 0, 0, 0 },
        { "quiet", 'q', ST_OPT_FLAG, &quiet, NULL, "no progress output, only the final lines", 0, 0, 0 },
        { NULL, 0, 0, NULL, NULL, NULL, 0, 0, 0 },
    };
    st_opts_result res;
    st_cli_run r;
    st_cli_run_init(&r, "audit");
    char err[1024] = "";
    int rc = ST_EXIT_OK;
    if (st_opts_parse(opts, argc - 1, argv + 1, 0, &res, err, sizeof err)) {
        rc = st_cli_usage_error("audit", err);
        goto out;
    }
    if (res.help) {
        help(opts);
        goto out;
    }
    if (res.npos != 1) {
        rc = st_cli_usage_error("audit", "expected one SPEC file");
        goto out;
    }
    if ((rc = st_cli_run_spec(&r, res.pos[0])) != ST_EXIT_OK)
        goto out;
    if (check) {
        print_check(&r.spec, r.spec_path);
        goto out;
    }
    if (!out_dir) {
        rc = st_cli_usage_error("audit", "-o DIR is required");
        goto out;
    }
    if ((rc = st_cli_run_open(&r, out_dir, resume, 0)) != ST_EXIT_OK)
        goto out;
    stop_stale_engines(&r);
    volatile sig_atomic_t *stop = st_cli_catch_signals();
    char self[4096];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    self[sl > 0 ? sl : 0] = '\0';
    st_sweep_opts so = { .out_dir = out_dir,
                         .resume = resume,
                         .quiet = quiet,
                         .tty = isatty(STDERR_FILENO),
                         .out = r.out,
                         .self_exe = sl > 0 ? self : NULL,
                         .stop = stop };
    st_sweep_result sr;
    if (!quiet)
        fprintf(r.out, "servetune audit: %d configuration%s of %s, results in %s\n", r.spec.n_configs,
                r.spec.n_configs == 1 ? "" : "s", r.spec_path, out_dir);
    int srun = st_sweep_run(&r.spec, r.store, &so, &sr, err, sizeof err);
    if (srun)
        fprintf(r.out, "servetune audit: %s\n", err);
    rc = st_cli_run_finish(&r, &sr, srun != 0, "Report");
out:
    st_cli_run_close(&r);
    st_opts_result_free(&res);
    return rc;
}
