/* servetune audit SPEC -o DIR: run every configuration of a spec on the engine, find each
 * one's capacity at the SLO, price it, and write the report. Exit codes: docs/exit-codes.md. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit/shard.h"
#include "audit/spec.h"
#include "audit/store.h"
#include "audit/sweep.h"
#include "cli/cli.h"
#include "emu/calib.h"
#include "core/file.h"
#include "core/opts.h"
#include "core/version.h"
#include "report/report.h"

/* The only global: what the signal handler sets. */
static volatile sig_atomic_t audit_stop;
static volatile sig_atomic_t audit_signal;

static void on_signal(int sig)
{
    audit_stop = 1;
    audit_signal = sig;
}

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
           "at each rate with an open-loop streaming load, finds the highest rate that meets the SLO, prices it,\n"
           "and writes DIR/report.html, DIR/report.md, DIR/report.json and DIR/results.csv. Every finished rate\n"
           "run is kept in DIR/results.sqlite the moment it ends; engine logs go to DIR/logs/.\n\n"
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
           "Exit codes: 0 done; 1 done but a configuration failed (did not start, crashed, hung) or a run\n"
           "broke; 2 bad arguments or an invalid spec; 4 interrupted (SIGINT/SIGTERM): what finished is kept\n"
           "and the report says it is partial. --merge exits as an audit would; --slurm exits 0 once submitted\n"
           "(with --wait: as the audit, 4 when interrupted and its jobs cancelled); --status exits 0.\n"
           "The spec format: docs/audit-spec.md.\n");
}

int cmd_audit(int argc, char **argv)
{
    const char *out_dir = NULL, *calib_path = NULL;
    int check = 0, resume = 0, quiet = 0, slurm = 0, no_prediction = 0;
    const char *merge_dir = NULL, *status_dir = NULL;
    st_cluster_cli cl = { .only_index = -1 };
    const st_opt opts[] = {
        { "output", 'o', ST_OPT_STR, &out_dir, "DIR", "output folder (created; holds the database, logs and reports)",
          0, 0, 0 },
        { "check", 0, ST_OPT_FLAG, &check, NULL, "validate the spec and exit (nothing is started)", 0, 0, 0 },
        { "resume", 0, ST_OPT_FLAG, &resume, NULL,
          "continue an interrupted audit in DIR without repeating finished runs", 0, 0, 0 },
        { "quiet", 'q', ST_OPT_FLAG, &quiet, NULL, "no progress output, only the final lines", 0, 0, 0 },
        { "calibration", 0, ST_OPT_STR, &calib_path, "FILE",
          "calibrates the prediction made before the measurement (servetune calibrate)", 0, 0, 0 },
        { "no-prediction", 0, ST_OPT_FLAG, &no_prediction, NULL,
          "skip the engine-model prediction made first (and its comparison in the report)", 0, 0, 0 },
        { "only", 0, ST_OPT_STR, &cl.only, "NAME[,NAME]",
          "run only these configurations, each into DIR/shards/NAME.sqlite (no report: see --merge)", 0, 0, 0 },
        { "only-index", 0, ST_OPT_LONG, &cl.only_index, "N",
          "run only configuration N (0 = the first of the spec) into its shard (Slurm/Kubernetes index)", 0, 100000,
          0 },
        { "merge", 0, ST_OPT_STR, &merge_dir, "DIR",
          "merge DIR/shards/*.sqlite into DIR/results.sqlite and write the reports (as servetune report DIR)", 0, 0,
          0 },
        { "status", 0, ST_OPT_STR, &status_dir, "DIR",
          "how far a distributed audit in DIR is: each configuration's shard, and its Slurm task when submitted", 0, 0,
          0 },
        { "expect-spec-hash", 0, ST_OPT_STR, &cl.expect_hash, "SHA256",
          "refuse to run (or merge) unless the spec text has this SHA-256 (the generated job scripts pass it)", 0, 0,
          0 },
        { "slurm", 0, ST_OPT_FLAG, &slurm, NULL,
          "submit a Slurm job array (one task per configuration) and a merge job; with --resume only what is missing",
          0, 0, 0 },
        { "partition", 0, ST_OPT_STR, &cl.partition, "P", "sbatch --partition (default: cluster.slurm.partition)", 0, 0,
          0 },
        { "account", 0, ST_OPT_STR, &cl.account, "A", "sbatch --account (default: cluster.slurm.account)", 0, 0, 0 },
        { "time", 0, ST_OPT_STR, &cl.time, "T", "sbatch --time per task, e.g. 4:00:00 (default: cluster.slurm.time)", 0,
          0, 0 },
        { "gpus-per-task", 0, ST_OPT_LONG, &cl.gpus_per_task, "N",
          "GPUs each task asks for (default: cluster.slurm.gpus_per_task, else hardware.gpus_per_replica)", 1, 1024,
          0 },
        { "gpu-request", 0, ST_OPT_STR, &cl.gpu_request, "KIND",
          "how GPUs are asked for: gres (--gres=gpu:N, default), gpus (--gpus=N) or none", 0, 0, 0 },
        { "max-concurrent", 0, ST_OPT_LONG, &cl.max_concurrent, "N", "array tasks running at once (--array=...%N)", 1,
          100000, 0 },
        { "sbatch-arg", 0, ST_OPT_LIST, &cl.sbatch_args, "ARG",
          "one more sbatch argument for both jobs, e.g. --sbatch-arg=--qos=high (repeatable)", 0, 0, 0 },
        { "dry-run", 0, ST_OPT_FLAG, &cl.dry_run, NULL,
          "with --slurm: write the batch scripts and DIR/cluster/submit.sh, submit nothing", 0, 0, 0 },
        { "wait", 0, ST_OPT_FLAG, &cl.wait, NULL,
          "with --slurm: follow the jobs until the merge ends (SIGINT cancels them with scancel)", 0, 0, 0 },
        { "k8s-manifest", 0, ST_OPT_STR, &cl.k8s_manifest, "FILE",
          "write a Kubernetes ConfigMap + Indexed Job (one index per configuration) to FILE", 0, 0, 0 },
        { "k8s-image", 0, ST_OPT_STR, &cl.k8s_image, "IMAGE", "the pods' image (default: cluster.kubernetes.image)", 0,
          0, 0 },
        { "k8s-namespace", 0, ST_OPT_STR, &cl.k8s_namespace, "NS", "namespace (default: cluster.kubernetes.namespace)",
          0, 0, 0 },
        { "k8s-pvc", 0, ST_OPT_STR, &cl.k8s_pvc, "CLAIM",
          "the PersistentVolumeClaim mounted as the output folder (default: cluster.kubernetes.volume_claim)", 0, 0,
          0 },
        { NULL, 0, 0, NULL, NULL, NULL, 0, 0, 0 },
    };
    st_opts_result res;
    char err[1024] = "";
    if (st_opts_parse(opts, argc - 1, argv + 1, 0, &res, err, sizeof err))
        return st_cli_usage_error("audit", err);
    if (res.help) {
        help(opts);
        st_opts_result_free(&res);
        return ST_EXIT_OK;
    }
    if (merge_dir || status_dir) {
        int npos = res.npos;
        st_opts_result_free(&res);
        if (npos || (merge_dir && status_dir) || slurm || check || out_dir)
            return st_cli_usage_error("audit", "--merge DIR and --status DIR take no SPEC and no other mode");
        return merge_dir ? st_cli_merge_report(merge_dir, cl.expect_hash, quiet, 1) : st_cli_audit_status(status_dir);
    }
    if (res.npos != 1) {
        st_opts_result_free(&res);
        return st_cli_usage_error("audit", "expected one SPEC file");
    }
    const char *conflict = NULL;
    int only = cl.only || cl.only_index >= 0;
    if (slurm && only)
        conflict = "--slurm runs every configuration (each task runs its own --only)";
    else if ((cl.dry_run || cl.wait) && !slurm)
        conflict = "--dry-run and --wait go with --slurm";
    else if (cl.k8s_manifest && (slurm || only))
        conflict = "--k8s-manifest writes a manifest; it runs nothing";
    else if (cl.expect_hash && !only)
        conflict = "--expect-spec-hash goes with --only, --only-index or --merge";
    if (conflict) {
        st_opts_result_free(&res);
        return st_cli_usage_error("audit", conflict);
    }
    const char *spec_path = res.pos[0];
    st_spec spec;
    if (st_cli_load_spec(spec_path, &spec)) {
        st_opts_result_free(&res);
        return ST_EXIT_USAGE;
    }
    if (check) {
        int planned = spec.n_configs * spec.n_rates;
        printf("%s: OK: %s engine, model %s, %d configuration%s x %d rate%s (%d rate runs of %u requests at most)\n",
               spec_path, st_engine_kind_name(spec.engine.kind), spec.engine.model, spec.n_configs,
               spec.n_configs == 1 ? "" : "s", spec.n_rates, spec.n_rates == 1 ? "" : "s", planned,
               spec.workload.requests_per_rate);
        st_spec_free(&spec);
        st_opts_result_free(&res);
        return ST_EXIT_OK;
    }
    if (cl.k8s_manifest) {
        int krc = st_cli_audit_k8s(&spec, spec_path, &cl);
        st_spec_free(&spec);
        st_opts_result_free(&res);
        return krc;
    }
    if (!out_dir) {
        st_spec_free(&spec);
        st_opts_result_free(&res);
        return st_cli_usage_error("audit", "-o DIR is required");
    }
    if (slurm || only) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        int crc = slurm
                      ? st_cli_audit_slurm(&spec, spec_path, out_dir, &cl, resume, &audit_stop)
                      : st_cli_audit_shards(&spec, spec_path, out_dir, &cl, resume, quiet, &audit_stop, &audit_signal);
        st_spec_free(&spec);
        st_opts_result_free(&res);
        return crc;
    }
    if (st_shard_any(out_dir)) {
        fprintf(stderr,
                "servetune audit: %s holds shards of a distributed audit: run configurations with --only or "
                "--slurm --resume, merge with servetune report %s\n",
                out_dir, out_dir);
        st_spec_free(&spec);
        st_opts_result_free(&res);
        return ST_EXIT_USAGE;
    }
    int rc = ST_EXIT_OK;
    size_t tlen = 0;
    char *text = st_read_file(spec_path, ST_SPEC_MAX_BYTES, &tlen, err, sizeof err);
    st_store *store = NULL;
    if (!text || st_store_open(out_dir, &store, err, sizeof err) ||
        st_store_audit_begin(store, spec_path, text, tlen, ST_VERSION, resume, err, sizeof err)) {
        fprintf(stderr, "servetune audit: %s\n", err);
        free(text);
        st_store_close(store);
        st_spec_free(&spec);
        st_opts_result_free(&res);
        return ST_EXIT_USAGE;
    }
    free(text);
    st_audit_row prev;
    if (st_store_audit_get(store, &prev) == 1) {
        int pred = prev.prediction;
        st_audit_row_free(&prev);
        if (pred) {
            fprintf(stderr,
                    "servetune audit: %s holds a prediction (servetune predict); a measured audit needs another -o\n",
                    out_dir);
            st_store_close(store);
            st_spec_free(&spec);
            st_opts_result_free(&res);
            return ST_EXIT_USAGE;
        }
    }

    st_cli_store_traffic(store, &spec);
    /* the prediction first (seconds), compared with the measurement in the report */
    st_emu_calib calib;
    if (!no_prediction && (!calib_path || st_cli_load_calibration(calib_path, &spec, &calib) == 0))
        st_cli_predict_first(&spec, spec_path, out_dir, store, calib_path, calib_path ? &calib : NULL, quiet);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    char self[4096];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    self[sl > 0 ? sl : 0] = '\0';
    st_sweep_opts so = { .out_dir = out_dir,
                         .resume = resume,
                         .quiet = quiet,
                         .tty = isatty(STDERR_FILENO),
                         .out = stderr,
                         .self_exe = sl > 0 ? self : NULL,
                         .stop = &audit_stop };
    st_sweep_result sr;
    if (!quiet)
        fprintf(stderr, "servetune audit: %d configuration%s of %s, results in %s\n", spec.n_configs,
                spec.n_configs == 1 ? "" : "s", spec_path, out_dir);
    int srun = st_sweep_run(&spec, store, &so, &sr, err, sizeof err);
    if (srun) {
        fprintf(stderr, "servetune audit: %s\n", err);
        rc = ST_EXIT_FAIL;
    }
    int partial = sr.interrupted || srun != 0;
    char note[128] = "";
    if (sr.interrupted)
        snprintf(note, sizeof note, "interrupted by %s", audit_signal == SIGTERM ? "SIGTERM" : "SIGINT");
    else if (srun)
        snprintf(note, sizeof note, "stopped by an error");
    st_store_audit_finish(store, partial, note[0] ? note : NULL);
    char rerr[512] = "";
    if (st_report_write_all(store, out_dir, rerr, sizeof rerr)) {
        fprintf(stderr, "servetune audit: report: %s\n", rerr);
        rc = ST_EXIT_FAIL;
    } else {
        /* the headline, for the terminal */
        st_report r;
        if (st_report_load(store, &r, rerr, sizeof rerr) == 0) {
            st_buf hl;
            st_buf_init(&hl, ST_REPORT_HEADLINE_MAX);
            st_report_headline(&r, &hl);
            printf("%s\n", hl.data ? hl.data : "");
            st_buf_free(&hl);
            st_report_free(&r);
        }
        printf("Report: %s/report.html (also report.md, report.json, results.csv; database results.sqlite)\n", out_dir);
    }
    st_store_close(store);
    st_spec_free(&spec);
    st_opts_result_free(&res);
    if (sr.interrupted)
        return ST_EXIT_INTERRUPTED;
    if (rc == ST_EXIT_OK && sr.configs_failed > 0)
        rc = ST_EXIT_FAIL;
    return rc;
}
