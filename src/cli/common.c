/* What several subcommands share: the usage error, and the start and end of audit and predict
 * (cli/cli.h). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stdlib.h>

#include "audit/check.h"
#include "audit/executor.h"
#include "audit/spec.h"
#include "audit/store.h"
#include "audit/traffic.h"
#include "cli/agents.h"
#include "cli/cli.h"
#include "core/file.h"
#include "core/version.h"
#include "emu/calib.h"
#include "engine/process.h"
#include "load/trace.h"
#include "load/workload.h"
#include "plan/attrib.h"
#include "plan/prices.h"
#include "report/report.h"

int st_cli_usage_error(const char *cmd, const char *reason)
{
    fprintf(stderr, "servetune %s: %s\n", cmd, reason);
    fprintf(stderr, "Try 'servetune %s --help' for more information.\n", cmd);
    return ST_EXIT_USAGE;
}

int st_cli_parse(const char *cmd, const st_opt *opts, int argc, char **argv, int allow_unknown, st_opts_result *res,
                 void (*help)(const st_opt *opts), char *err, size_t errlen)
{
    if (st_opts_parse(opts, argc - 1, argv + 1, allow_unknown, res, err, errlen))
        return st_cli_usage_error(cmd, err);
    if (res->help) {
        help(opts);
        return ST_EXIT_OK;
    }
    return -1;
}

int st_cli_refuse_input_as_output(const char *cmd, const char *opt, const char *out, const char *in, const char *what)
{
    if (!st_same_file(out, in))
        return ST_EXIT_OK;
    char m[1200];
    snprintf(m, sizeof m, "%s %.500s is %s (%.500s): refusing to replace it", opt, out, what, in);
    return st_cli_usage_error(cmd, m);
}

/* ---- signals: the only globals, what the handler sets ---- */

static volatile sig_atomic_t cli_stop;
static volatile sig_atomic_t cli_signal;

static void on_signal(int sig)
{
    cli_stop = 1;
    cli_signal = sig;
}

volatile sig_atomic_t *st_cli_catch_signals(volatile sig_atomic_t **which)
{
    if (which)
        *which = &cli_signal;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    return &cli_stop;
}

const char *st_cli_signal_name(void) { return cli_signal == SIGTERM ? "SIGTERM" : "SIGINT"; }

/* ---- audit and predict ---- */

void st_cli_run_init(st_cli_run *r, const char *cmd)
{
    memset(r, 0, sizeof *r);
    r->cmd = cmd;
    r->lock_fd = -1;
    r->out = stderr;
}

int st_cli_run_spec(st_cli_run *r, const char *spec_path)
{
    char err[1024] = "";
    r->spec_path = spec_path;
    if (st_spec_load(spec_path, &r->spec, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return ST_EXIT_USAGE;
    }
    r->have_spec = 1;
    if (st_spec_check(&r->spec, err, sizeof err) || st_spec_secrets(&r->spec, &r->secrets, err, sizeof err) ||
        st_audit_resolve_peak(&r->spec, err, sizeof err) || st_audit_resolve_day(&r->spec, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return ST_EXIT_USAGE;
    }
    if (r->spec.peak_source != ST_PEAK_STATED)
        fprintf(stderr, "%s: peak_rate: trace: %.3g req/s, %s\n", spec_path, r->spec.peak_rate,
                r->spec.peak_source == ST_PEAK_BUSIEST_MINUTE ? "the trace's busiest minute"
                                                              : "the trace's mean rate (it spans less than a minute)");
    st_buf w;
    st_buf_init(&w, ST_CLI_WARNINGS_MAX);
    /* predict starts nothing: where the engine's program is does not matter to it */
    if (st_spec_warnings(&r->spec, strcmp(r->cmd, "predict") != 0, &w) && w.data) {
        for (char *line = w.data, *nl; *line; line = nl + 1) {
            nl = strchr(line, '\n');
            if (!nl)
                break;
            fprintf(stderr, "%s: warning: %.*s\n", spec_path, (int)(nl - line), line);
        }
    }
    st_buf_free(&w);
    return ST_EXIT_OK;
}

/* What DIR/results.sqlite holds: -1 none, 0 a measured audit, 1 a prediction; -2 unreadable. */
static int dir_holds(const char *dir, char *err, size_t errlen)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, ST_STORE_FILE);
    if (access(path, F_OK))
        return -1;
    st_store *s;
    if (st_store_open_read(dir, &s, err, errlen))
        return -2;
    st_audit_row a;
    int have = st_store_audit_get(s, &a);
    int pred = have == 1 && a.prediction;
    if (have == 1)
        st_audit_row_free(&a);
    st_store_close(s);
    if (have < 0) {
        snprintf(err, errlen, "%s: cannot read %s", dir, ST_STORE_FILE);
        return -2;
    }
    return have == 1 ? pred : -1;
}

int st_cli_clear_prediction(const char *dir, char *err, size_t errlen)
{
    int holds = dir_holds(dir, err, errlen);
    if (holds == -2)
        return -1;
    if (holds == 0) {
        snprintf(err, errlen, "%.900s holds a measured audit; a prediction never replaces one (use another -o)", dir);
        return -1;
    }
    /* an earlier prediction is replaced: it is recomputed in seconds */
    static const char *suffix[] = { "", "-wal", "-shm" };
    for (int i = 0; holds == 1 && i < 3; i++) {
        char path[4400];
        snprintf(path, sizeof path, "%.4000s/%s%s", dir, ST_STORE_FILE, suffix[i]);
        unlink(path);
    }
    return 0;
}

int st_cli_run_open(st_cli_run *r, const char *out_dir, int resume, int prediction)
{
    char err[1024] = "";
    r->out_dir = out_dir;
    if (st_mkdir_p(out_dir, err, sizeof err)) { /* its parents too: -o runs/today */
        fprintf(stderr, "servetune %s: %s\n", r->cmd, err);
        return ST_EXIT_USAGE;
    }
    /* one servetune per folder; what it holds is checked before anything in it changes */
    if (st_dir_lock(out_dir, 0, &r->lock_fd, err, sizeof err)) {
        fprintf(stderr, "servetune %s: %s\n", r->cmd, err);
        return ST_EXIT_USAGE;
    }
    int holds = dir_holds(out_dir, err, sizeof err);
    if (holds == -2) {
        fprintf(stderr, "servetune %s: %s\n", r->cmd, err);
        return ST_EXIT_USAGE;
    }
    if (holds == 1 && !prediction) {
        fprintf(stderr, "servetune %s: %s holds a prediction (servetune predict); a measured audit needs another -o\n",
                r->cmd, out_dir);
        return ST_EXIT_USAGE;
    }
    if (holds == 0 && prediction) {
        fprintf(stderr, "servetune %s: %s holds a measured audit; a prediction never replaces one (use another -o)\n",
                r->cmd, out_dir);
        return ST_EXIT_USAGE;
    }
    if (holds == 1 && prediction && st_cli_clear_prediction(out_dir, err, sizeof err)) {
        fprintf(stderr, "servetune %s: %s\n", r->cmd, err);
        return ST_EXIT_USAGE;
    }
    size_t tlen = 0;
    char *text = st_read_file(r->spec_path, ST_SPEC_MAX_BYTES, &tlen, err, sizeof err);
    int rc = !text || st_store_open(out_dir, &r->store, err, sizeof err) ||
             st_store_audit_begin(r->store, r->spec_path, text, tlen, ST_VERSION, resume, err, sizeof err);
    free(text);
    if (rc) {
        fprintf(stderr, "servetune %s: %s\n", r->cmd, err);
        return ST_EXIT_USAGE;
    }
    st_store_set_secrets(r->store, &r->secrets);
    /* progress lines quote engines and servers: no secret reaches the terminal either */
    FILE *f = st_secrets_stream(stderr, &r->secrets);
    if (f)
        r->out = f;
    return ST_EXIT_OK;
}

void st_cli_print_headline(st_store *s)
{
    st_report rep;
    char err[512];
    if (st_report_load(s, &rep, err, sizeof err))
        return;
    st_buf hl;
    st_buf_init(&hl, ST_REPORT_HEADLINE_MAX);
    st_report_headline(&rep, &hl);
    printf("%s\n", hl.data ? hl.data : "");
    st_buf_free(&hl);
    st_report_free(&rep);
}

/* Configurations in which requests were sent and every one failed: the audit measured nothing
 * there (a wrong key, a wrong model name, a proxy answering errors), which is a failure even
 * though the engine ran. Prints one line for each; returns their count. */
static int all_failed_configs(st_cli_run *r)
{
    st_run_row *runs = NULL;
    int n = 0, bad = 0;
    if (st_store_runs_get(r->store, NULL, &runs, &n))
        return 0;
    for (int i = 0; i < n;) {
        int j = i;
        uint32_t sent = 0, completed = 0;
        for (; j < n && !strcmp(runs[j].config, runs[i].config); j++) {
            sent += runs[j].sent;
            completed += runs[j].completed;
        }
        if (sent > 0 && completed == 0) {
            fprintf(r->out, "servetune %s: %s: every one of its %u requests failed (the report's runs say why)\n",
                    r->cmd, runs[i].config, sent);
            bad++;
        }
        i = j;
    }
    st_run_rows_free(runs, n);
    return bad;
}

int st_cli_run_finish(st_cli_run *r, const st_sweep_result *sr, int sweep_failed, const char *what)
{
    int rc = sweep_failed ? ST_EXIT_FAIL : ST_EXIT_OK;
    char note[128] = "";
    if (sr->interrupted)
        snprintf(note, sizeof note, "interrupted by %s", st_cli_signal_name());
    else if (sweep_failed)
        snprintf(note, sizeof note, "stopped by an error");
    st_store_audit_finish(r->store, sr->interrupted || sweep_failed, note[0] ? note : NULL);
    /* interrupted: the aborted requests are no failure of the configuration */
    int all_failed = sr->interrupted ? 0 : all_failed_configs(r);
    fflush(r->out);
    char err[512] = "";
    if (st_report_write_all(r->store, r->out_dir, err, sizeof err)) {
        fprintf(stderr, "servetune %s: report: %s\n", r->cmd, err);
        rc = ST_EXIT_FAIL;
    } else {
        /* interrupted, the process ends as soon as the reports are written: the headline (a second
         * reading of every run) is in the partial report */
        if (sr->interrupted)
            printf("Partial results (%s)\n", note);
        else
            st_cli_print_headline(r->store);
        printf("%s: %s/report.html (also report.md, report.json, results.csv; database results.sqlite)\n", what,
               r->out_dir);
    }
    if (sr->interrupted)
        return ST_EXIT_INTERRUPTED;
    if (rc == ST_EXIT_OK && (sr->configs_failed > 0 || all_failed > 0))
        rc = ST_EXIT_FAIL;
    return rc;
}

void st_cli_run_close(st_cli_run *r)
{
    if (r->out && r->out != stderr)
        fclose(r->out);
    r->out = stderr;
    st_store_close(r->store);
    r->store = NULL;
    if (r->have_spec)
        st_spec_free(&r->spec);
    r->have_spec = 0;
    st_secrets_free(&r->secrets);
    if (r->lock_fd >= 0)
        close(r->lock_fd);
    r->lock_fd = -1;
}

#define WHO_PAYS_ROWS_MAX 100000u /* requests of the trace the report's "Who pays" replays */

/* "Who pays": when the trace names tenants (the first of team, user, feature, end_user that some
 * row carries), the GPU time of the baseline configuration split over them on the engine model
 * (plan/attrib.h), stored as meta "who_pays" (JSON servetune.cost/1). Returns 1 when stored, 0
 * when the trace names none, -1 with err. */
static int store_who_pays(struct st_store *store, const struct st_spec *spec, char *err, size_t errlen)
{
    static const char *const fields[] = { "team", "user", "feature", "end_user" };
    if (spec->n_configs < 1)
        return 0;
    st_attrib a;
    st_trace_opts o;
    memset(&o, 0, sizeof o);
    o.max_rows = WHO_PAYS_ROWS_MAX; /* the report's section stays seconds of work on a huge log */
    st_trace_counts c;
    int found = 0;
    for (size_t f = 0; f < sizeof fields / sizeof fields[0] && !found; f++) {
        st_attrib_init(&a, fields[f]);
        if (st_trace_read_file(spec->workload.trace, &o, st_attrib_row_cb, &a, &c, NULL, err, errlen) < 0) {
            st_attrib_free(&a);
            return -1;
        }
        for (uint32_t i = 0; i < a.n_tenants && !found; i++)
            found = strcmp(a.t[i].name, ST_ATTRIB_UNATTRIBUTED) != 0;
        if (!found)
            st_attrib_free(&a);
    }
    if (!found)
        return 0;
    a.truncated = c.stopped;
    st_emu_config cfg;
    int rc = -1;
    if (st_exec_model_config(spec, &spec->configs[0], &cfg, NULL, 0, NULL, err, errlen) == 0 &&
        st_attrib_replay(&a, &cfg, 1, err, errlen) == 0) {
        double price = spec->hardware.price_per_gpu_hour;
        if (price <= 0) {
            st_prices P;
            if (st_prices_builtin(&P, err, errlen) == 0) {
                const st_price *p =
                    spec->hardware.gpu ? st_prices_pick(&P, spec->hardware.gpu, ST_PRICE_ON_DEMAND, NULL) : NULL;
                price = p ? p->usd_per_gpu_hour : 0;
                st_prices_free(&P);
            }
        }
        char *json = st_attrib_json(&a, price * (cfg.tp ? cfg.tp : 1), NULL, NULL);
        if (!json)
            snprintf(err, errlen, "out of memory");
        else if (st_store_meta_put(store, "who_pays", json) < 0)
            snprintf(err, errlen, "%s", st_store_errmsg(store));
        else
            rc = 1;
        free(json);
    }
    st_attrib_free(&a);
    return rc;
}

/* An agent trace's shape (cli/agents.h), stored as meta "agent_trace" for the report. */
static void store_agent_trace(struct st_store *store, const struct st_spec *spec)
{
    st_agent_graph g;
    st_agent_stats as;
    char err[1024];
    if (st_agent_load_file(spec->workload.trace, 0, &g, NULL, err, sizeof err)) {
        fprintf(stderr, "servetune: the agent trace's shape is left out of the report: %s\n", err);
        return;
    }
    json_t *o = st_agent_stats_compute(&g, &as) ? NULL : st_cli_agent_shape_json(spec->workload.trace, &g, &as);
    st_agent_graph_free(&g);
    if (o)
        json_object_del(o, "input_lengths"); /* one number a request: the report needs the shape only */
    char *json = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(10)) : NULL;
    json_decref(o);
    if (!json || st_store_meta_put(store, "agent_trace", json) < 0)
        fprintf(stderr, "servetune: the agent trace's shape is left out of the report: %s\n",
                json ? st_store_errmsg(store) : "out of memory");
    free(json);
}

void st_cli_store_traffic(struct st_store *store, const struct st_spec *spec)
{
    if (spec->workload.kind != ST_WL_TRACE)
        return;
    if (spec->workload.agent) {
        store_agent_trace(store, spec);
        return;
    }
    char werr[1024];
    if (store_who_pays(store, spec, werr, sizeof werr) < 0)
        fprintf(stderr, "servetune: \"Who pays\" is left out of the report: %s\n", werr);
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
    /* which configurations it fits: said once when none does (the refusal), else one line per
     * configuration left on the model's defaults */
    int matched = 0, n_cfg = spec->n_configs;
    char(*why)[512] = calloc((size_t)(n_cfg ? n_cfg : 1), sizeof *why);
    if (!why) {
        fprintf(stderr, "servetune: out of memory\n");
        return -1;
    }
    for (int i = 0; i < n_cfg; i++) {
        st_emu_config cfg;
        if (st_exec_model_config(spec, &spec->configs[i], &cfg, NULL, 0, NULL, err, sizeof err))
            continue; /* refused later with its own message */
        if (st_calib_check(out, &cfg, why[i], sizeof why[i], NULL, 0) == 0) {
            matched++;
            why[i][0] = '\0';
        }
    }
    int rc = 0;
    if (!matched) {
        const char *first = NULL;
        for (int i = 0; i < n_cfg && !first; i++)
            first = why[i][0] ? why[i] : NULL;
        fprintf(stderr, "servetune: --calibration %s is refused: it matches no configuration of the spec (%s)\n", path,
                first ? first : "no configuration could be modelled");
        rc = -1;
    } else {
        for (int i = 0; i < n_cfg; i++)
            if (why[i][0])
                fprintf(stderr,
                        "servetune: --calibration %s does not apply to configuration %s (%s): it runs on the "
                        "model's defaults\n",
                        path, spec->configs[i].name, why[i]);
    }
    free(why);
    return rc;
}
