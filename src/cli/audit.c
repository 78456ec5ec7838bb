/* servetune audit SPEC -o DIR: run every configuration of a spec on the engine, find each
 * one's capacity at the SLO, price it, and write the report. Exit codes: docs/exit-codes.md. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster/shard.h"
#include "audit/spec.h"
#include "audit/store.h"
#include "audit/sweep.h"
#include "cli/cli.h"
#include "emu/calib.h"
#include "core/opts.h"
#include "engine/process.h"

static void help(const st_opt *opts)
{
    printf("usage: servetune audit SPEC -o DIR [--resume] [--quiet]\n"
           "       servetune audit --check SPEC\n"
           "       servetune audit SPEC -o DIR --only NAME[,NAME]       (one machine's share: DIR/shards/NAME.sqlite)\n"
           "       servetune audit SPEC -o DIR --slurm [--partition P] [--account A] [--time T] [--sbatch-arg ARG]...\n"
           "                                      [--dry-run] [--wait] [--resume]\n"
           "       servetune audit SPEC --k8s-manifest FILE [--k8s-image IMAGE] [--k8s-pvc CLAIM]\n"
           "       servetune audit --merge DIR | --status DIR\n\n"
           "Runs every configuration of the audit spec on its engine: starts the engine, warms it up, drives it\n"
           "with an open-loop streaming load (or a closed loop at the spec's concurrencies), searches for the\n"
           "highest rate it sustains within the SLO (each run measures a steady-state window; a growing queue is\n"
           "over-saturated; search.mode: burst is the old fixed-count test, and with concurrency: levels a\n"
           "fixed-count closed loop, as vllm bench serve --max-concurrency C --num-prompts N), prices it, and\n"
           "writes DIR/report.html, DIR/report.md, DIR/report.json and DIR/results.csv (DIR and its parents are\n"
           "made when missing). Every finished run is kept in\n"
           "DIR/results.sqlite the moment it ends; engine logs go to DIR/logs/. --check also refuses bounds that\n"
           "make a steady state impossible (docs/audit-method.md). With multi-turn sessions (workload.sessions:\n"
           "a trace's conversations replayed, or synthetic ones) the rates are sessions starting per second and\n"
           "each later turn follows the answer to the one before it (docs/audit-spec.md). With a quality: block,\n"
           "each configuration also answers the same prompts greedily with top-k log-probabilities after its\n"
           "search, compared with the baseline's answers (KL divergence, same top-1, exact match; limits that rule\n"
           "a configuration out of the pick; docs/quality.md).\n\n"
           "A trace workload: workload.trace_max_tokens, trace_window and trace_sample filter the rows replayed,\n"
           "trace_replay: spread samples them over the whole trace (default: its first rows), peak_rate: trace\n"
           "takes the peak from its busiest minute, traffic: {hourly_rps: trace} the traffic day from its rate in\n"
           "each hour of the day (only the hours it covers); a configuration's runs leave out the requests longer than "
           "its\n"
           "context (as bench does), and --check says that share, and the share a run replays with its prefix\n"
           "reuse against the whole trace's. The headline names no winner when the host limited the figures,\n"
           "configurations tie within their intervals, or requests failed at the lowest rate.\n\n"
           "An agent trace as workload.trace (a WEKA-style agentic trace or task-graph JSONL, detected from the\n"
           "content; docs/trace-format.md): an agent-trace audit. Each run replays its task graphs open loop across\n"
           "tasks at the run's task rate and closed within a task (a request sent when its parents answered plus\n"
           "its gap); the rates and the capacity are in tasks starting per second (tasks/s), the capacity also in\n"
           "req/s delivered; slo: makespan_pNN_ms bounds the task makespan. concurrency:, sessions:, think_time,\n"
           "the trace filters and peak_rate: trace are refused with it (docs/audit-spec.md). A configuration's\n"
           "runs leave out, whole, the tasks holding a request longer than its context (its prompt as grown by\n"
           "its parents' answers, plus its output), and --check says how many tasks and requests.\n\n"
           "Options:\n");
    st_opts_usage(stdout, opts);
    printf("\nExamples:\n"
           "  servetune audit --check examples/qwen3-8b-h100.yaml\n"
           "  servetune audit examples/qwen3-8b-h100.yaml -o audit-out\n"
           "  servetune audit examples/qwen3-8b-h100.yaml -o audit-out --resume   # after an interruption\n"
           "  servetune report audit-out                                         # re-render the reports\n"
           "  servetune audit spec.yaml -o /shared/out --slurm --partition gpu --time 4:00:00 --wait\n"
           "  servetune audit --status /shared/out\n"
           "  servetune audit spec.yaml -o out --only baseline,fp8-kv   # by hand: then copy out/shards/, servetune "
           "report out\n\n"
           "Across machines (docs/cluster.md): --only runs the configurations named into their own shards,\n"
           "DIR/shards/NAME.sqlite, and writes no report; --merge (or servetune report DIR) merges the shards into\n"
           "DIR/results.sqlite and writes the reports as a single-machine audit would; shards of another spec text\n"
           "are refused. --slurm submits one job array (one task per configuration, each asking for\n"
           "gpus_per_replica GPUs) and a merge job that runs after it; the batch scripts are kept in DIR/cluster/.\n\n"
           "--check runs every check a run makes before it starts (the same function): a spec it accepts runs.\n"
           "One servetune at a time may run an audit in DIR (it is locked; --only runs of different\n"
           "configurations share it); --resume first stops any engine an earlier, killed audit of DIR left\n"
           "running. Secrets (the API key, every ${VAR} value) are removed from everything written: database,\n"
           "reports, engine logs, this output (docs/audit-spec.md, Secrets).\n\n"
           "Exit codes: 0 done; 1 done but a configuration failed (did not start, crashed, hung, or every one\n"
           "of its requests failed) or a run broke; 2 bad arguments, an invalid spec, or DIR refused (in use,\n"
           "another spec, a prediction): nothing in DIR was changed; 4 interrupted (SIGINT/SIGTERM): what\n"
           "finished is kept and the report says it is partial. --merge exits as an audit would (4 when SIGINT/\n"
           "SIGTERM stopped the merge: rolled back, DIR unchanged); --slurm exits\n"
           "0 once submitted (with --wait: as the audit, 4 when interrupted and its jobs cancelled); --status\n"
           "exits 0.\n"
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
    if (spec->search.mode == ST_SEARCH_SUSTAINED)
        printf("%s: OK: %s engine, model %s, %d configuration%s; sustained search from %d %s, at most %u runs of "
               "at most %g s each per configuration\n",
               spec_path, st_engine_kind_name(spec->engine.kind), spec->engine.model, spec->n_configs,
               spec->n_configs == 1 ? "" : "s", spec->n_rates, spec->closed_loop ? "concurrency levels" : "rates",
               spec->search.max_runs, spec->search.max_duration_s);
    else if (spec->closed_loop)
        printf("%s: OK: %s engine, model %s, %d configuration%s x %d concurrency level%s (%d%s fixed-count closed-loop "
               "runs of %u requests, as vllm bench serve --max-concurrency C --num-prompts %u)\n",
               spec_path, st_engine_kind_name(spec->engine.kind), spec->engine.model, spec->n_configs,
               spec->n_configs == 1 ? "" : "s", spec->n_rates, spec->n_rates == 1 ? "" : "s", planned,
               spec->search.mode == ST_SEARCH_REFINE ? "+" : "", spec->workload.requests_per_rate,
               spec->workload.requests_per_rate);
    else
        printf("%s: OK: %s engine, model %s, %d configuration%s x %d rate%s (%d rate runs of %u requests at most; a "
               "burst test)\n",
               spec_path, st_engine_kind_name(spec->engine.kind), spec->engine.model, spec->n_configs,
               spec->n_configs == 1 ? "" : "s", spec->n_rates, spec->n_rates == 1 ? "" : "s", planned,
               spec->workload.requests_per_rate);
}

/* One `audit` command: its options, and the run it opens (closed by st_cli_run_close). */
typedef struct audit_cmd {
    const char *out_dir, *calib_path, *merge_dir, *status_dir;
    int check, resume, quiet, slurm, no_prediction;
    st_cluster_cli cl;
    st_opts_result res;
    st_cli_run r;
    char err[1024];
} audit_cmd;

/* The options of `audit` into opts (room for AUDIT_OPTS_MAX). */
#define AUDIT_OPTS_MAX 32
static void audit_options(audit_cmd *x, st_opt *opts)
{
    const st_opt o[] = {
        { "output", 'o', ST_OPT_STR, &x->out_dir, "DIR",
          "output folder (created; holds the database, logs and reports)", 0, 0, 0 },
        { "check", 0, ST_OPT_FLAG, &x->check, NULL, "validate the spec as a run would (nothing is started) and exit", 0,
          0, 0 },
        { "resume", 0, ST_OPT_FLAG, &x->resume, NULL,
          "continue an interrupted audit in DIR without repeating finished runs", 0, 0, 0 },
        { "quiet", 'q', ST_OPT_FLAG, &x->quiet, NULL, "no progress output, only the final lines", 0, 0, 0 },
        { "calibration", 0, ST_OPT_STR, &x->calib_path, "FILE",
          "calibrates the prediction made before the measurement (servetune calibrate)", 0, 0, 0 },
        { "no-prediction", 0, ST_OPT_FLAG, &x->no_prediction, NULL,
          "skip the engine-model prediction made first (and its comparison in the report)", 0, 0, 0 },
        { "only", 0, ST_OPT_STR, &x->cl.only, "NAME[,NAME]",
          "run only these configurations, each into DIR/shards/NAME.sqlite (no report: see --merge)", 0, 0, 0 },
        { "only-index", 0, ST_OPT_LONG, &x->cl.only_index, "N",
          "run only configuration N (0 = the first of the spec) into its shard (Slurm/Kubernetes index)", 0, 100000,
          0 },
        { "merge", 0, ST_OPT_STR, &x->merge_dir, "DIR",
          "merge DIR/shards/*.sqlite into DIR/results.sqlite and write the reports (as servetune report DIR)", 0, 0,
          0 },
        { "status", 0, ST_OPT_STR, &x->status_dir, "DIR",
          "how far a distributed audit in DIR is: each configuration's shard, and its Slurm task when submitted", 0, 0,
          0 },
        { "expect-spec-hash", 0, ST_OPT_STR, &x->cl.expect_hash, "SHA256",
          "refuse to run (or merge) unless the spec text has this SHA-256 (the generated job scripts pass it)", 0, 0,
          0 },
        { "slurm", 0, ST_OPT_FLAG, &x->slurm, NULL,
          "submit a Slurm job array (one task per configuration) and a merge job; with --resume only what is missing",
          0, 0, 0 },
        { "partition", 0, ST_OPT_STR, &x->cl.partition, "P", "sbatch --partition (default: cluster.slurm.partition)", 0,
          0, 0 },
        { "account", 0, ST_OPT_STR, &x->cl.account, "A", "sbatch --account (default: cluster.slurm.account)", 0, 0, 0 },
        { "time", 0, ST_OPT_STR, &x->cl.time, "T", "sbatch --time per task, e.g. 4:00:00 (default: cluster.slurm.time)",
          0, 0, 0 },
        { "gpus-per-task", 0, ST_OPT_LONG, &x->cl.gpus_per_task, "N",
          "GPUs each task asks for (default: cluster.slurm.gpus_per_task, else hardware.gpus_per_replica)", 1, 1024,
          0 },
        { "gpu-request", 0, ST_OPT_STR, &x->cl.gpu_request, "KIND",
          "how GPUs are asked for: gres (--gres=gpu:N, default), gpus (--gpus=N) or none", 0, 0, 0 },
        { "max-concurrent", 0, ST_OPT_LONG, &x->cl.max_concurrent, "N", "array tasks running at once (--array=...%N)",
          1, 100000, 0 },
        { "sbatch-arg", 0, ST_OPT_LIST, &x->cl.sbatch_args, "ARG",
          "one more sbatch argument for both jobs, e.g. --sbatch-arg=--qos=high (repeatable)", 0, 0, 0 },
        { "dry-run", 0, ST_OPT_FLAG, &x->cl.dry_run, NULL,
          "with --slurm: write the batch scripts and DIR/cluster/submit.sh, submit nothing", 0, 0, 0 },
        { "wait", 0, ST_OPT_FLAG, &x->cl.wait, NULL,
          "with --slurm: follow the jobs until the merge ends (SIGINT cancels them with scancel)", 0, 0, 0 },
        { "k8s-manifest", 0, ST_OPT_STR, &x->cl.k8s_manifest, "FILE",
          "write a Kubernetes ConfigMap + Indexed Job (one index per configuration) to FILE", 0, 0, 0 },
        { "k8s-image", 0, ST_OPT_STR, &x->cl.k8s_image, "IMAGE",
          "the pods' image (default: cluster.kubernetes.image; checked as it)", 0, 0, 0 },
        { "k8s-namespace", 0, ST_OPT_STR, &x->cl.k8s_namespace, "NS",
          "namespace (default: cluster.kubernetes.namespace; checked as it)", 0, 0, 0 },
        { "k8s-pvc", 0, ST_OPT_STR, &x->cl.k8s_pvc, "CLAIM",
          "the PersistentVolumeClaim mounted as the output folder (default: cluster.kubernetes.volume_claim; "
          "checked as it)",
          0, 0, 0 },
        { NULL, 0, 0, NULL, NULL, NULL, 0, 0, 0 },
    };
    _Static_assert(sizeof o / sizeof o[0] <= AUDIT_OPTS_MAX, "audit's options fit");
    memcpy(opts, o, sizeof o);
}

/* The options that do not go together with a SPEC (only: --only or --only-index given): the
 * reason, or NULL. */
static const char *audit_conflict(const audit_cmd *x, int only)
{
    if (x->slurm && only)
        return "--slurm runs every configuration (each task runs its own --only)";
    if ((x->cl.dry_run || x->cl.wait) && !x->slurm)
        return "--dry-run and --wait go with --slurm";
    if (x->cl.k8s_manifest && (x->slurm || only))
        return "--k8s-manifest writes a manifest; it runs nothing";
    if (x->cl.expect_hash && !only)
        return "--expect-spec-hash goes with --only, --only-index or --merge";
    return NULL;
}

/* The audit on this machine into -o DIR: the prediction first, then the sweep, then the report.
 * The exit status. */
static int audit_measure(audit_cmd *x)
{
    st_cli_run *r = &x->r;
    const char *out_dir = x->out_dir;
    int rc;
    if (st_shard_any(out_dir)) {
        fprintf(stderr,
                "servetune audit: %s holds shards of a distributed audit: run configurations with --only or "
                "--slurm --resume, merge with servetune report %s\n",
                out_dir, out_dir);
        return ST_EXIT_USAGE;
    }
    if ((rc = st_cli_run_open(r, out_dir, x->resume, 0)) != ST_EXIT_OK)
        return rc;
    stop_stale_engines(r);
    st_cli_store_traffic(r->store, &r->spec);
    /* the prediction first (seconds), compared with the measurement in the report */
    st_emu_calib calib;
    const char *calib_path = x->calib_path;
    int predicted = !x->no_prediction && (!calib_path || st_cli_load_calibration(calib_path, &r->spec, &calib) == 0);
    if (predicted)
        st_cli_predict_first(&r->spec, r->spec_path, out_dir, r->store, calib_path, calib_path ? &calib : NULL,
                             x->quiet);
    volatile sig_atomic_t *stop = st_cli_catch_signals(NULL);
    char self[4096];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    self[sl > 0 ? sl : 0] = '\0';
    st_sweep_opts so = { .out_dir = out_dir,
                         .resume = x->resume,
                         .quiet = x->quiet,
                         .tty = isatty(STDERR_FILENO),
                         .out = r->out,
                         .self_exe = sl > 0 ? self : NULL,
                         .stop = stop };
    st_sweep_result sr;
    if (!x->quiet)
        fprintf(r->out, "servetune audit: %d configuration%s of %s, results in %s\n", r->spec.n_configs,
                r->spec.n_configs == 1 ? "" : "s", r->spec_path, out_dir);
    int srun = st_sweep_run(&r->spec, r->store, &so, &sr, x->err, sizeof x->err);
    if (srun)
        fprintf(r->out, "servetune audit: %s\n", x->err);
    else if (predicted && !sr.interrupted)
        st_cli_predict_at_measured(&r->spec, r->store, calib_path ? &calib : NULL, stop);
    return st_cli_run_finish(r, &sr, srun != 0, "Report");
}

/* `audit` once its options are in x: a mode chosen (merge, status, check, manifest, Slurm,
 * shards, or the audit here) and run. The exit status. */
static int audit_run(audit_cmd *x, const st_opt *opts, int argc, char **argv)
{
    int parsed = st_cli_parse("audit", opts, argc, argv, 0, &x->res, help, x->err, sizeof x->err);
    if (parsed >= 0)
        return parsed;
    if (x->merge_dir || x->status_dir) {
        if (x->res.npos || (x->merge_dir && x->status_dir) || x->slurm || x->check || x->out_dir)
            return st_cli_usage_error("audit", "--merge DIR and --status DIR take no SPEC and no other mode");
        return x->merge_dir ? st_cli_merge_report(x->merge_dir, x->cl.expect_hash, x->quiet, 1)
                            : st_cli_audit_status(x->status_dir);
    }
    if (x->res.npos != 1)
        return st_cli_usage_error("audit", "expected one SPEC file");
    int only = x->cl.only || x->cl.only_index >= 0, rc;
    const char *conflict = audit_conflict(x, only);
    if (conflict)
        return st_cli_usage_error("audit", conflict);
    if ((rc = st_cli_run_spec(&x->r, x->res.pos[0])) != ST_EXIT_OK)
        return rc;
    if (x->check) {
        print_check(&x->r.spec, x->r.spec_path);
        return ST_EXIT_OK;
    }
    if (x->cl.k8s_manifest)
        return st_cli_audit_k8s(&x->r.spec, x->r.spec_path, &x->cl);
    if (!x->out_dir)
        return st_cli_usage_error("audit", "-o DIR is required");
    if (x->slurm || only) {
        volatile sig_atomic_t *sig;
        volatile sig_atomic_t *stop = st_cli_catch_signals(&sig);
        return x->slurm ? st_cli_audit_slurm(&x->r.spec, x->r.spec_path, x->out_dir, &x->cl, x->resume, stop)
                        : st_cli_audit_shards(&x->r.spec, x->r.spec_path, x->out_dir, &x->cl, x->resume, x->quiet, stop,
                                              sig);
    }
    return audit_measure(x);
}

int cmd_audit(int argc, char **argv)
{
    audit_cmd x;
    memset(&x, 0, sizeof x);
    x.cl.only_index = -1;
    st_opt opts[AUDIT_OPTS_MAX];
    audit_options(&x, opts);
    st_cli_run_init(&x.r, "audit");
    int rc = audit_run(&x, opts, argc, argv);
    st_cli_run_close(&x.r);
    st_opts_result_free(&x.res);
    return rc;
}
