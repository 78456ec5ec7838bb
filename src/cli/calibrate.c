/* servetune calibrate DIR... [--bench-json FILE --engine "MODEL FLAGS"] -o calib.json: the engine
 * model's free constants fitted to one deployment's measurements (audit/calibrate.h). The file it
 * writes is what predict, emulate and audit take with --calibration. docs/calibrate.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/calibrate.h"
#include "cli/cli.h"
#include "core/clock.h"
#include "core/file.h"
#include "core/opts.h"
#include "core/strv.h"
#include "emu/flags.h"

#define CALIB_INPUT_MAX ((size_t)256 << 20)
#define CALIB_OUT_MAX ((size_t)4 << 20)
#define ENGINE_WORDS_MAX 64

static void help(const st_opt *opts)
{
    printf("usage: servetune calibrate DIR... [--bench-json FILE --engine \"MODEL FLAGS\"] -o FILE\n\n"
           "Fits the engine model's free constants (GPU efficiencies, engine and API-server overheads) to\n"
           "measurements of one deployment: audit directories (their results.sqlite) and/or `servetune bench\n"
           "--json` runs together with the engine's vLLM flags. Every measured run is replayed on the model with\n"
           "its own requests and arrival times; the constants the runs can identify are fitted to the measured\n"
           "throughput, TTFT p50/p95 and TPOT p50/p95, the others stay at their defaults (the output says why).\n"
           "Prints each run's measured and predicted figures, and writes FILE for --calibration of predict,\n"
           "emulate and audit. One GPU, model and weight quantisation per file.\n\n"
           "Options:\n");
    st_opts_usage(stdout, opts);
    printf("\nExamples:\n"
           "  servetune calibrate audit-out -o calib.json        # an audit of one deployment\n"
           "  servetune calibrate demo-out --config baseline,batched-8k,no-prefix-cache -o calib.json\n"
           "      # the example audit's bf16 configurations (its fp8 ones are another deployment)\n"
           "  servetune calibrate audit-out --config baseline --max-rate 16 -o calib.json   # lower rates only\n"
           "  servetune calibrate --bench-json run1.json --bench-json run2.json \\\n"
           "      --engine \"Qwen/Qwen3-8B --max-num-seqs 256 --gpu H100\" -o calib.json\n"
           "  servetune predict my.yaml --calibration calib.json\n\n"
           "Exit codes: 0 written; 1 no usable runs or the fit failed; 2 bad arguments, unreadable input, or\n"
           "runs of different deployments; 4 interrupted (SIGINT/SIGTERM stop the fit within a second): FILE not\n"
           "written. More: docs/calibrate.md.\n");
}

/* The bench runs' engine: "MODEL [vLLM flags] --gpu NAME" through the emulator's parser. */
static int engine_config(const char *spec, st_emu_config *cfg, char *err, size_t errlen)
{
    char *copy = strdup(spec);
    char *argv[ENGINE_WORDS_MAX + 2];
    int argc = 0;
    if (!copy) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    argv[argc++] = "serve";
    for (char *save = NULL, *w = strtok_r(copy, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
        if (argc >= ENGINE_WORDS_MAX) {
            snprintf(err, errlen, "--engine: more than %d words", ENGINE_WORDS_MAX);
            free(copy);
            return -1;
        }
        if (!strcmp(w, "vllm") && argc == 1)
            continue; /* "vllm serve MODEL ..." is accepted too */
        if (!strcmp(w, "serve") && argc == 1)
            continue;
        argv[argc++] = w;
    }
    st_emu_args A;
    st_emu_args_defaults(&A);
    st_opt opts[ST_EMU_ARGS_TABLE_MAX];
    st_emu_args_table(&A, opts);
    st_opts_result r;
    int rc = st_emu_args_parse(&A, opts, argc, argv, &r, err, errlen);
    if (rc == 0)
        rc = st_emu_args_config(&A, cfg, err, errlen);
    if (rc == 0)
        st_emu_tuning_defaults(&cfg->tune, &cfg->gpu); /* the fit starts from the defaults */
    st_opts_result_free(&r);
    free(copy);
    return rc ? -1 : 0;
}

/* The --bench-json runs, each replayed on the engine --engine describes. 0, or -1 said on stderr. */
static int add_bench_runs(st_calibrate_set *set, const st_strlist *bench, const char *engine, double time_scale)
{
    char err[2048];
    st_emu_config cfg;
    if (engine_config(engine, &cfg, err, sizeof err) < 0) {
        fprintf(stderr, "servetune calibrate: --engine: %s\n", err);
        return -1;
    }
    for (int i = 0; i < bench->n; i++) {
        size_t len;
        char *text = st_read_file(bench->v[i], CALIB_INPUT_MAX, &len, err, sizeof err);
        if (!text || st_calibrate_add_bench_json(set, bench->v[i], text, len, &cfg, time_scale, err, sizeof err) < 0) {
            fprintf(stderr, "servetune calibrate: %s\n", err);
            free(text);
            return -1;
        }
        free(text);
        int same = set->runs[set->n - 1].same_prompts_as;
        if (same >= 0)
            fprintf(stderr,
                    "servetune calibrate: warning: %s sent the same prompts as %s (the same workload and seed): "
                    "the server's prefix cache held them, while each run is replayed on a fresh engine model; "
                    "measure with a different --seed per run, or with --no-enable-prefix-caching\n",
                    bench->v[i], set->runs[same].label);
    }
    return 0;
}

/* The calibration file (with the fit's report in it) into out, whole or not at all (b: the
 * caller's buffer). 0, or -1 said on stderr. */
static int write_calibration(const char *out, const st_calibrate_set *set, const st_calibrate_report *rep,
                             const st_emu_calib *cal, st_buf *b)
{
    char err[2048];
    st_buf extra;
    st_buf_init(&extra, CALIB_OUT_MAX);
    st_calibrate_report_json(set, rep, &extra);
    st_calib_write(cal, extra.data, b);
    int bad = st_buf_error(&extra) || st_buf_error(b);
    st_buf_free(&extra);
    if (bad || st_mkdir_parents(out, err, sizeof err) ||
        st_write_file_atomic(out, b->data, b->len, err, sizeof err) < 0) {
        if (bad)
            fprintf(stderr, "servetune calibrate: %s: the calibration is too large to write\n", out);
        else
            fprintf(stderr, "servetune calibrate: cannot write %s\n", err);
        return -1;
    }
    return 0;
}

/* The fit's report, then each fitted constant, those left at their default, and the range measured. */
static void print_fitted(const st_calibrate_set *set, const st_calibrate_report *rep, const st_emu_calib *cal)
{
    st_buf t;
    st_buf_init(&t, CALIB_OUT_MAX);
    st_calibrate_report_text(set, rep, &t);
    printf("%s", t.data ? t.data : "");
    st_buf_free(&t);
    printf("Fitted (%s, %s, %s weights):\n", cal->gpu, cal->model, st_emu_dtype_name(cal->weights));
    int i = 0;
    for (const st_calib_knob *k = st_calib_knobs(); k->name; k++, i++)
        if (cal->set[i])
            printf("  %-16s %-10.4g %s\n", k->name, cal->value[i], k->what);
    for (uint32_t j = 0; j < rep->n_skipped; j++)
        printf("  %-16s default    %s\n", rep->skipped[j].name, rep->skipped[j].why);
    if (cal->range.rate_max > 0)
        printf("Measured up to %.4g req/s: predictions beyond %.4g req/s are flagged as extrapolations.\n",
               cal->range.rate_max, cal->range.rate_max * 1.5);
}

/* Progress of the fit on stderr, at most once every CALIB_PROGRESS_S seconds: a fit over many
 * runs replays each of them on the engine model hundreds of times (tens of seconds). */
#define CALIB_PROGRESS_S 5.0
typedef struct fit_progress {
    st_ns t0, last;
} fit_progress;

static void on_progress(void *arg, const char *phase, int done, int total, double loss)
{
    fit_progress *p = arg;
    st_ns now = st_now();
    if ((double)(now - p->last) / 1e9 < CALIB_PROGRESS_S)
        return;
    p->last = now;
    double el = (double)(now - p->t0) / 1e9;
    if (!strcmp(phase, "probe"))
        fprintf(stderr, "servetune calibrate: %.0f s: which constants the runs identify: %d of %d probed\n", el, done,
                total);
    else
        fprintf(stderr, "servetune calibrate: %.0f s: fit: %d evaluations, loss %.4g so far\n", el, done, loss);
}

/* -o naming one of the --bench-json runs: a measured run is never replaced by the fit made from it. */
static int refuse_replacing_a_run(const char *out, const st_strlist *bench)
{
    for (int i = 0; i < bench->n; i++) {
        int rc = st_cli_refuse_input_as_output("calibrate", "-o", out, bench->v[i], "a --bench-json run it reads");
        if (rc != ST_EXIT_OK)
            return rc;
    }
    return ST_EXIT_OK;
}

int cmd_calibrate(int argc, char **argv)
{
    const char *out = NULL, *engine = NULL;
    st_strlist bench = { 0 }, configs = { 0 };
    st_strv names = { 0 }; /* the --config names, one each */
    double max_rate = NAN, time_scale = 1;
    int quiet = 0, allow_prediction = 0;
    const st_opt opts[] = {
        { "output", 'o', ST_OPT_STR, &out, "FILE",
          "the calibration file to write (required; FILE.tmp, then renamed; a FIFO, device or symlink at FILE is "
          "refused)",
          0, 0, 0 },
        { "bench-json", 0, ST_OPT_LIST, &bench, "FILE", "a `servetune bench --json` run (repeatable; needs --engine)",
          0, 0, 0 },
        { "engine", 0, ST_OPT_STR, &engine, "\"MODEL FLAGS\"",
          "the engine the bench runs measured: model, vLLM flags and --gpu NAME", 0, 0, 0 },
        { "time-scale", 0, ST_OPT_DOUBLE, &time_scale, "K",
          "the bench runs measured servetune's emulator at --time-scale K (their times x K; default 1)", 0, 0, 0 },
        { "config", 0, ST_OPT_LIST, &configs, "NAME[,NAME...]",
          "only these configurations of the audits (repeatable; default: all). One deployment: the same GPU, model "
          "and weights",
          0, 0, 0 },
        { "max-rate", 0, ST_OPT_DOUBLE, &max_rate, "R", "only runs at offered rates up to R req/s (default: all)", 0, 0,
          0 },
        { "allow-prediction", 0, ST_OPT_FLAG, &allow_prediction, NULL,
          "accept a prediction's directory as input (tests of calibrate itself)", 0, 0, 0 },
        { "quiet", 'q', ST_OPT_FLAG, &quiet, NULL, "print only the final line", 0, 0, 0 },
        { NULL, 0, 0, NULL, NULL, NULL, 0, 0, 0 },
    };
    st_opts_result res;
    char err[2048] = "";
    int rc = ST_EXIT_USAGE;
    st_calibrate_set set;
    st_calibrate_set_init(&set);
    st_buf b;
    st_buf_init(&b, CALIB_OUT_MAX);
    const char *usage = NULL;
    if ((rc = st_cli_parse("calibrate", opts, argc, argv, 0, &res, help, err, sizeof err)) >= 0)
        goto out;
    rc = ST_EXIT_USAGE;
    if (!out)
        usage = "-o FILE is required";
    else if (res.npos == 0 && bench.n == 0)
        usage = "give at least one audit DIR or --bench-json FILE";
    else if (!(time_scale > 0))
        usage = "--time-scale must be > 0";
    else if (!isnan(max_rate) && !(max_rate > 0))
        usage = "--max-rate must be > 0 req/s";
    else if (bench.n > 0 && !engine)
        usage = "--bench-json needs --engine \"MODEL FLAGS --gpu NAME\"";
    if (usage) {
        rc = st_cli_usage_error("calibrate", usage);
        goto out;
    }
    if ((rc = refuse_replacing_a_run(out, &bench)) != ST_EXIT_OK)
        goto out;
    rc = ST_EXIT_USAGE;                 /* what the failures below exit with unless they say otherwise */
    for (int i = 0; i < configs.n; i++) /* --config a,b --config c: the names a, b and c */
        if (st_strv_push_split(&names, configs.v[i], ',')) {
            fprintf(stderr, "servetune calibrate: out of memory\n");
            goto out;
        }
    for (int i = 0; i < res.npos; i++) {
        int k = st_calibrate_add_audit(&set, res.pos[i], configs.n ? &names : NULL, isnan(max_rate) ? 0 : max_rate,
                                       allow_prediction, err, sizeof err);
        if (k < 0) {
            fprintf(stderr, "servetune calibrate: %s\n", err);
            goto out;
        }
        if (!quiet)
            fprintf(stderr, "servetune calibrate: %s: %d measured run%s\n", res.pos[i], k, k == 1 ? "" : "s");
    }
    if (configs.n && res.npos && st_calibrate_check_configs(&set, &names, err, sizeof err) < 0) {
        fprintf(stderr, "servetune calibrate: %s\n", err);
        goto out;
    }
    if (bench.n > 0 && add_bench_runs(&set, &bench, engine, time_scale))
        goto out;
    st_emu_calib cal;
    st_calibrate_report rep;
    volatile sig_atomic_t *stop = st_cli_catch_signals(NULL);
    set.stop = stop;
    fit_progress fp = { .t0 = st_now(), .last = st_now() };
    if (!quiet) {
        set.progress = on_progress;
        set.progress_arg = &fp;
        fprintf(stderr, "servetune calibrate: fitting the engine model to %u run%s...\n", set.n, set.n == 1 ? "" : "s");
    }
    if (st_calibrate_fit(&set, &cal, &rep, err, sizeof err) < 0) {
        if (*stop) { /* FILE is written whole or not at all: an earlier one stays as it was */
            fprintf(stderr, "servetune calibrate: interrupted by %s during the fit: %s not written\n",
                    st_cli_signal_name(), out);
            rc = ST_EXIT_INTERRUPTED;
            goto out;
        }
        fprintf(stderr, "servetune calibrate: %s\n", err);
        rc = strstr(err, "different deployments") ? ST_EXIT_USAGE : ST_EXIT_FAIL;
        goto out;
    }
    if (write_calibration(out, &set, &rep, &cal, &b)) {
        rc = ST_EXIT_FAIL;
        goto out;
    }
    if (!quiet)
        print_fitted(&set, &rep, &cal);
    printf("Calibration: %s (%u run%s, median |error| %.1f %% after the fit)\n", out, set.n, set.n == 1 ? "" : "s",
           100 * rep.median_abs_err);
    rc = ST_EXIT_OK;
out:
    st_strv_free(&names);
    st_buf_free(&b);
    st_calibrate_set_free(&set);
    st_opts_result_free(&res);
    return rc;
}
