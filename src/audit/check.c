#include "audit/check.h"
#include "audit/sweep.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit/executor.h"
#include "audit/traffic.h"
#include "core/strv.h"
#include "emu/catalog.h"
#include "emu/config.h"
#include "emu/flags.h"
#include "engine/process.h"
#include "engine/specdec.h"
#include "load/trace.h"
#include "load/workload.h"
#include "net/url.h"

/* The synthetic workload through the function the sweep builds it with (one request of the
 * spec's lengths), or the trace read as the sweep reads it; the warm-up must fit too. */
/* Rows of a trace whose prompt is text (the client's own words, sent verbatim). */
static int count_text_rows(void *arg, const st_trace_row *row, char *err, size_t errlen)
{
    if (row->item && row->item->input_text)
        (*(uint64_t *)arg)++;
    return 0;
}

/* *random_prompts: 1 when the prompts are random token ids (the synthetic workload, or a trace
 * of which fewer than half the requests carry their text), what speculation cannot be judged on. */
static int check_workload(const st_spec *s, uint32_t *n_run, int *random_prompts, char *err, size_t errlen)
{
    char e[512];
    st_workload w;
    *n_run = s->workload.requests_per_rate;
    *random_prompts = 1;
    if (s->workload.agent) /* read whole when the spec was (audit/spec.h): its graphs are sound */
        return 0;
    if (s->workload.kind == ST_WL_TRACE) {
        /* every row read as the sweep reads them (a malformed one is an error now, not mid-audit) */
        st_trace_counts c;
        uint64_t text_rows = 0;
        st_trace_opts o;
        st_spec_trace_opts(s, &o);
        if (st_trace_read_file(s->workload.trace, &o, count_text_rows, &text_rows, &c, NULL, e, sizeof e)) {
            snprintf(err, errlen, "%s: workload.trace: %s", s->path, e);
            return -1;
        }
        if (!c.kept) {
            char d[400];
            st_trace_counts_describe(&c, d, sizeof d);
            snprintf(err, errlen, "%s: workload.trace: %s holds no requests (%s)", s->path, s->workload.trace, d);
            return -1;
        }
        uint64_t n = c.kept;
        *random_prompts = 2 * text_rows < c.kept;
        if (s->warmup_requests > n) {
            snprintf(err, errlen,
                     "%s: warmup_requests: %u is more than the trace's %llu requests (the warm-up replays the "
                     "trace's first requests)",
                     s->path, s->warmup_requests, (unsigned long long)n);
            return -1;
        }
        if (n < *n_run)
            *n_run = (uint32_t)n;
        return 0;
    }
    st_synth_params p;
    st_spec_synth(s, 1, s->workload.seed, &p);
    if (st_workload_synthetic(&p, &w, e, sizeof e)) {
        snprintf(err, errlen, "%s: workload: %s", s->path, e);
        return -1;
    }
    st_workload_free(&w);
    if (s->warmup_requests > ST_WORKLOAD_MAX_REQUESTS) {
        snprintf(err, errlen, "%s: warmup_requests: at most %u", s->path, ST_WORKLOAD_MAX_REQUESTS);
        return -1;
    }
    return 0;
}

/* "spec.yaml:LINE: configurations[NAME]: ", or "spec.yaml: engine.flags: " for the implicit
 * baseline (no configurations list). */
static void where(const st_spec *s, const st_spec_config *c, char *err, size_t errlen)
{
    if (c->line)
        snprintf(err, errlen, "%s:%d: configurations[%s]: ", s->path, c->line, c->name);
    else
        snprintf(err, errlen, "%s: engine.flags: ", s->path);
}

#define ST_CHECK_GPU_KEYS_MAX 32 /* the catalog's GPU names listed in a warning */
#define ST_CHECK_PATH_MAX 4096   /* the program's path, as found */
#define ST_CHECK_PEAK_FACTOR 3.0 /* a stated peak this far from the trace's busiest minute is warned about */

/* The longest synthetic request against the engine's context (--max-model-len, else the model's):
 * the server refuses a request whose prompt plus requested output exceeds it, so a spec whose
 * every longest request would fail is refused here rather than after the engine started. A
 * trace's lengths are its own (checked as it is read). */
static int check_context(const st_spec *s, const st_emu_config *cfg, char *e, size_t elen)
{
    if (s->workload.kind != ST_WL_SYNTHETIC)
        return 0;
    uint32_t ctx = cfg->max_model_len ? cfg->max_model_len : cfg->model.max_position;
    double r = s->workload.range_ratio;
    /* the generator's longest lengths (load/workload.c): floor(L (1 + r)), vLLM's semantics ceil */
    double (*up)(double) = s->workload.vllm_semantics ? ceil : floor;
    double in = up(s->workload.input_tokens * (1 + r) - (s->workload.vllm_semantics ? 1e-9 : 0)),
           out = up(s->workload.output_tokens * (1 + r) - (s->workload.vllm_semantics ? 1e-9 : 0));
    if (s->workload.vllm_semantics)
        in += s->workload.shared_prefix;
    const char *what = "the longest prompt";
    if (s->workload.sessions.on && s->workload.sessions.turns_max > 1) {
        /* the last turn carries the conversation so far: every earlier answer and user text */
        in += (s->workload.sessions.turns_max - 1) * (out + floor(s->workload.sessions.user_tokens * (1 + r)));
        what = "the longest session's last turn";
    }
    if (ctx == 0 || in + out <= ctx)
        return 0;
    snprintf(e, elen,
             "%s (%.0f tokens) plus its requested output (%.0f) exceeds the context of %u tokens (--max-model-len or "
             "the model's): the server would refuse it; shorten workload.input_tokens / output_tokens%s or raise "
             "--max-model-len",
             what, in, out, ctx, s->workload.sessions.on ? " / sessions.turns" : "");
    return -1;
}

/* The emulator's own parser on what the adapter would start ("serve MODEL FLAGS..."), with the
 * GPU from --gpu or SERVETUNE_EMULATE_GPU (spec, configuration or servetune's environment). */
static int check_emulator_flags(const st_spec *s, const st_spec_config *c, const st_launch *l, char *err, size_t errlen)
{
    int skip = s->engine.command.n ? s->engine.command.n : 3; /* [servetune emulate serve] */
    int argc = 0;
    char **argv = calloc((size_t)l->argv.n + 1, sizeof *argv);
    if (!argv) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    argv[argc++] = "serve";
    for (int i = skip; i < l->argv.n; i++)
        argv[argc++] = l->argv.v[i];
    st_emu_args A;
    st_emu_args_defaults(&A);
    st_opt opts[ST_EMU_ARGS_TABLE_MAX];
    st_emu_args_table(&A, opts);
    st_opts_result r;
    char e[1024] = "";
    int rc = st_emu_args_parse(&A, opts, argc, argv, &r, e, sizeof e);
    if (rc == 0 && (!A.gpu || !*A.gpu)) {
        for (int i = 0; i < c->env.n; i++)
            if (!strcmp(c->env.key[i], "SERVETUNE_EMULATE_GPU"))
                A.gpu = c->env.val[i];
        for (int i = 0; (!A.gpu || !*A.gpu) && i < s->engine.env.n; i++)
            if (!strcmp(s->engine.env.key[i], "SERVETUNE_EMULATE_GPU"))
                A.gpu = s->engine.env.val[i];
        if (!A.gpu || !*A.gpu)
            A.gpu = getenv("SERVETUNE_EMULATE_GPU");
        if (!A.gpu || !*A.gpu) {
            snprintf(e, sizeof e,
                     "the emulator needs --gpu NAME (H100, H200, A100, L40S, RTX4090, or a GPU file) in the flags; "
                     "hardware.gpu only prices the audit");
            rc = -1;
        }
    }
    st_emu_config cfg;
    int resolved = 0;
    if (rc == 0 && strstr(A.gpu, "${") == NULL) {
        rc = st_emu_args_config(&A, &cfg, e, sizeof e);
        resolved = rc == 0;
    }
    st_opts_result_free(&r);
    free(argv);
    if (rc) {
        where(s, c, err, errlen);
        size_t k = strlen(err);
        snprintf(err + k, errlen - k, "the emulator refuses its flags: %s", e);
        return -1;
    }
    if (resolved && check_context(s, &cfg, e, sizeof e)) {
        where(s, c, err, errlen);
        size_t k = strlen(err);
        snprintf(err + k, errlen - k, "%s", e);
        return -1;
    }
    return 0;
}

/* A configuration that speculates: its flags valid, and not judged on random-id prompts unless
 * the spec insists (docs/speculative.md). */
static int check_speculation(const st_spec *s, const st_spec_config *c, const st_launch *l, int random_prompts,
                             char *err, size_t errlen)
{
    st_specdec d;
    char e[600];
    int rc = st_specdec_from_argv((const char *const *)l->argv.v, l->argv.n, &d, e, sizeof e);
    if (rc == 0)
        return 0;
    where(s, c, err, errlen);
    size_t k = strlen(err);
    if (rc < 0) {
        snprintf(err + k, errlen - k, "%s", e);
        return -1;
    }
    if (!random_prompts || s->workload.allow_synthetic_speculation)
        return 0;
    snprintf(err + k, errlen - k,
             "speculates (%s) on prompts of random token ids (%s), on which n-gram lookup and draft models accept "
             "almost nothing: the audit would measure only the speculation's cost. Audit it on the client's text (a "
             "workload.trace whose requests carry their text; `servetune trace stats LOG --spec ngram:K` estimates "
             "the n-gram acceptance offline), or set workload.allow_synthetic_speculation: true to run it anyway "
             "(the report then says why it is not evidence)",
             d.summary,
             s->workload.kind == ST_WL_TRACE ? "the trace's requests are token counts" : "the synthetic workload");
    return -1;
}

static int check_launches(const st_spec *s, int random_prompts, char *err, size_t errlen)
{
    if (s->engine.kind == ST_ENGINE_ENDPOINT) {
        st_url u;
        char e[300];
        if (st_url_parse(s->engine.url, &u, e, sizeof e)) {
            snprintf(err, errlen, "%s: engine.url: %s", s->path, e);
            return -1;
        }
    }
    for (int i = 0; i < s->n_configs; i++) {
        const st_spec_config *c = &s->configs[i];
        st_launch l;
        char e[600];
        /* any port and program path: the launch is built, never started */
        if (st_spec_launch(s, c, 8000, "servetune", &l, e, sizeof e)) {
            where(s, c, err, errlen);
            size_t k = strlen(err);
            snprintf(err + k, errlen - k, "%s", e);
            return -1;
        }
        int rc = s->engine.kind == ST_ENGINE_EMULATOR ? check_emulator_flags(s, c, &l, err, errlen) : 0;
        if (!rc)
            rc = check_speculation(s, c, &l, random_prompts, err, errlen);
        st_launch_free(&l);
        if (rc)
            return -1;
        /* vLLM with a local model folder: a shape that makes no sense (a stub or a typo in its
         * config.json) is refused here, as the emulator refuses it, naming the field and range */
        const char *model = c->model ? c->model : s->engine.model;
        char cj[4200];
        snprintf(cj, sizeof cj, "%s/config.json", model ? model : "");
        if (s->engine.kind == ST_ENGINE_VLLM && model && access(cj, R_OK) == 0) {
            st_emu_model m;
            if (st_emu_model_load_file(model, &m, e, sizeof e)) {
                where(s, c, err, errlen);
                size_t k = strlen(err);
                snprintf(err + k, errlen - k, "model %s: %s", model, e);
                return -1;
            }
        }
    }
    return 0;
}

/* An agent trace's tasks that hold a request longer than configuration c's context ctx: left out
 * of its runs, whole (st_sweep_agent_over_context). 1 when said, else 0. */
static int agent_context_warning(const st_spec *s, const st_spec_config *c, uint32_t ctx, st_buf *out)
{
    st_sweep_agent_fit a;
    char err[768];
    if (!ctx || !s->workload.agent || st_sweep_agent_over_context(s, ctx, &a, err, sizeof err) || !a.fit.tasks_over ||
        a.fit.tasks_over >= a.fit.tasks)
        return 0;
    const st_agent_fit *f = &a.fit;
    st_buf_printf(out,
                  "configuration '%s': %u of the agent trace's %u tasks (%.1f %%; %u of its %u requests) hold a "
                  "request longer (prompt as grown by its parents' answers + output) than its context of %u tokens "
                  "(%u such request%s, the first: node %s of task %s, %llu tokens): the server would refuse it and "
                  "the rest of its task could not run, so its runs leave those tasks out whole and its figures are "
                  "for the rest (raise --max-model-len to serve them)\n",
                  c->name, f->tasks_over, f->tasks, 100.0 * f->tasks_over / f->tasks, f->requests_over, f->requests,
                  ctx, f->nodes_over, f->nodes_over == 1 ? "" : "s", a.node, a.task, (unsigned long long)f->first_need);
    return 1;
}

/* A trace against each configuration's context: one that holds no request the configuration can
 * serve (every one longer than its context) would run nothing. The share left out is a warning
 * (st_spec_warnings). */
static int check_trace_context(const st_spec *s, char *err, size_t errlen)
{
    for (int i = 0; i < s->n_configs; i++) {
        const st_spec_config *c = &s->configs[i];
        uint32_t ctx = st_sweep_config_context(s, c);
        uint64_t over, total;
        char e[768];
        st_sweep_agent_fit a;
        if (ctx && s->workload.agent && st_sweep_agent_over_context(s, ctx, &a, e, sizeof e) == 0 && a.fit.tasks &&
            a.fit.tasks_over == a.fit.tasks) {
            where(s, c, err, errlen);
            size_t l = strlen(err);
            snprintf(err + l, errlen - l,
                     "every one of the agent trace's %u tasks holds a request longer (prompt as grown by its "
                     "parents' answers + output) than the configuration's context of %u tokens (the first: node %s "
                     "of task %s, %llu tokens): the server would refuse them, so no task could run; raise "
                     "--max-model-len",
                     a.fit.tasks, ctx, a.node, a.task, (unsigned long long)a.fit.first_need);
            return -1;
        }
        if (!ctx || st_sweep_trace_over_context(s, ctx, &over, &total, e, sizeof e) || !total || over < total)
            continue;
        where(s, c, err, errlen);
        size_t l = strlen(err);
        snprintf(err + l, errlen - l,
                 "every one of the trace's %llu requests is longer (prompt + output) than the configuration's context "
                 "of %u tokens: the server would refuse them all; raise --max-model-len or filter the trace "
                 "(workload.trace_max_tokens)",
                 (unsigned long long)total, ctx);
        return -1;
    }
    return 0;
}

int st_spec_check(const st_spec *s, char *err, size_t errlen)
{
    uint32_t n_run;
    int random_prompts;
    if (check_workload(s, &n_run, &random_prompts, err, errlen) || check_launches(s, random_prompts, err, errlen) ||
        check_trace_context(s, err, errlen))
        return -1;
    st_secrets sec;
    if (st_spec_secrets(s, &sec, err, errlen))
        return -1;
    st_secrets_free(&sec);
    /* a burst run sends its requests_per_rate (rates are increasing: the first is the slowest); a
     * sustained run is bounded by search.max_duration, checked below */
    if (s->search.mode != ST_SEARCH_SUSTAINED && !s->closed_loop && s->n_rates > 0 && isfinite(s->rates[0]) &&
        n_run / s->rates[0] > ST_CHECK_MAX_RUN_S) {
        snprintf(err, errlen,
                 "%s: rates: at %g req/s a run of %u requests would last %.0f hours (at most %.0f): raise the rate "
                 "or lower workload.requests_per_rate",
                 s->path, s->rates[0], n_run, n_run / s->rates[0] / 3600, ST_CHECK_MAX_RUN_S / 3600);
        return -1;
    }
    /* a sustained spec's bounds must leave room for a measured window (audit/sweep.h) */
    return st_sweep_check_bounds(s, err, errlen);
}

/* 1 when prog is an executable file where st_proc_start would look for it. */
static int program_found(const char *prog)
{
    char path[ST_CHECK_PATH_MAX];
    return st_proc_find_program(prog, path, sizeof path) == 0 && access(path, X_OK) == 0;
}

/* What a run would start, on this machine: its program on PATH, and llama.cpp's model file.
 * Warnings, not errors: a spec is often checked away from the machine that runs it. */
static int launch_warnings(const st_spec *s, st_buf *out)
{
    if (s->engine.kind == ST_ENGINE_EMULATOR || s->engine.kind == ST_ENGINE_ENDPOINT || s->n_configs == 0)
        return 0;
    int n = 0;
    st_launch l;
    char e[600];
    if (st_spec_launch(s, &s->configs[0], 8000, "servetune", &l, e, sizeof e) == 0) {
        if (l.argv.n > 0 && !program_found(l.argv.v[0])) {
            st_buf_printf(out,
                          "the engine's program '%s' is not on this machine's PATH: a run here would fail to start "
                          "it (install it, put it on PATH, or set engine.command)\n",
                          l.argv.v[0]);
            n++;
        }
        st_launch_free(&l);
    }
    if (s->engine.kind == ST_ENGINE_LLAMACPP && s->engine.model && access(s->engine.model, R_OK) != 0) {
        st_buf_printf(out, "the model file '%s' is not readable from here (%s): a run here would fail to start\n",
                      s->engine.model, strerror(errno));
        n++;
    }
    return n;
}

/* A stated peak far from the trace's own busiest minute (more than ST_CHECK_PEAK_FACTOR either
 * way): the replicas and the monthly cost are sized for the stated one, which may be an example's
 * number kept by mistake. */
static int peak_warning(const st_spec *s, st_buf *out)
{
    if (s->peak_source != ST_PEAK_STATED || s->workload.kind != ST_WL_TRACE || s->workload.agent)
        return 0;
    char e[512];
    double mean, peak = st_audit_trace_peak(s, &mean, e, sizeof e);
    if (!(peak > 0) || (s->peak_rate <= peak * ST_CHECK_PEAK_FACTOR && s->peak_rate >= peak / ST_CHECK_PEAK_FACTOR))
        return 0;
    st_buf_printf(out,
                  "peak_rate: %g req/s is %.3gx the trace's busiest minute (%.3g req/s): the replicas and the monthly "
                  "cost are sized for %g (set peak_rate: trace to size them for the trace's busiest minute)\n",
                  s->peak_rate, s->peak_rate / peak, peak, s->peak_rate);
    return 1;
}

/* A replayed trace's pauses between turns: one of days (a foreign log's times) is capped. 1 when
 * said. */
static int think_warning(const st_spec *s, st_buf *out)
{
    if (s->workload.kind == ST_WL_TRACE && !s->workload.agent && s->workload.sessions.on &&
        !s->workload.sessions.think_set) {
        st_trace_counts c;
        char e[512];
        st_trace_opts o;
        st_spec_trace_opts(s, &o);
        if (st_trace_read_file(s->workload.trace, &o, NULL, NULL, &c, NULL, e, sizeof e) == 0 && c.think_long) {
            st_buf_printf(out,
                          "workload.trace: %llu pause%s between a session's turns %s longer than %g s (the longest "
                          "%.0f s, %.1f days): the replay waits %g s instead (set workload.think_time to choose)\n",
                          (unsigned long long)c.think_long, c.think_long == 1 ? "" : "s",
                          c.think_long == 1 ? "is" : "are", ST_TRACE_THINK_CAP_S, c.think_longest_s,
                          c.think_longest_s / 86400, ST_TRACE_THINK_CAP_S);
            return 1;
        }
    }
    return 0;
}

int st_spec_warnings(const st_spec *s, int starts_engine, st_buf *out)
{
    char why[256];
    int n = 0;
    if (starts_engine)
        n += launch_warnings(s, out);
    n += think_warning(s, out);
    n += peak_warning(s, out);
    /* a run replays the trace's first rows: their prefix reuse against the whole trace's */
    st_replay_share rs;
    char re[512];
    if (s->workload.kind == ST_WL_TRACE && !s->workload.agent && st_audit_replay_share(s, &rs, re, sizeof re) == 0 &&
        rs.differs) {
        st_buf_puts(out, "workload.trace: ");
        st_replay_share_say(&rs, out);
        st_buf_puts(out, "\n");
        n++;
    }
    if (!st_exec_model_supported(s, why, sizeof why))
        return n;
    /* hardware.gpu labels and prices the audit: a name the catalog does not know is allowed (a
     * GPU of one's own), but said, since the price list and the plan cannot use it */
    st_emu_gpu hw;
    int hw_known = s->hardware.gpu && st_emu_gpu_find(s->hardware.gpu, &hw, why, sizeof why) == 0;
    if (s->hardware.gpu && !hw_known && !strchr(s->hardware.gpu, '/')) {
        const char *keys[ST_CHECK_GPU_KEYS_MAX];
        int nk = st_emu_gpu_keys(keys, ST_CHECK_GPU_KEYS_MAX);
        st_buf_printf(out, "hardware.gpu '%s' is not a GPU servetune knows (", s->hardware.gpu);
        for (int k = 0; k < nk; k++)
            st_buf_printf(out, "%s%s", k ? ", " : "", keys[k]);
        st_buf_puts(out, "): it only labels the report and its price; the price list (serverless, plan) cannot "
                         "price it\n");
        n++;
    }

    int gpu_said = 0;
    for (int i = 0; i < s->n_configs; i++) {
        const st_spec_config *c = &s->configs[i];
        st_emu_config cfg;
        st_strv unknown = { 0 };
        char err[512];
        int ok = st_exec_model_config(s, c, &cfg, NULL, 0, &unknown, err, sizeof err) == 0;
        /* the emulator times one GPU, the report prices another (said once: the others read the same) */
        if (ok && hw_known && !gpu_said && s->engine.kind == ST_ENGINE_EMULATOR && strcmp(cfg.gpu.name, hw.name)) {
            st_buf_printf(out,
                          "hardware.gpu is %s but the emulator runs %s (--gpu) for configuration '%s': the report "
                          "prices one and measures the other\n",
                          hw.name, cfg.gpu.name, c->name);
            gpu_said = 1;
            n++;
        }
        /* a replica is priced as hardware.gpus_per_replica GPUs, whatever the engine shards over */
        if (ok && (int)cfg.tp != s->hardware.gpus_per_replica) {
            st_buf_printf(out,
                          "configuration '%s' runs --tensor-parallel-size %u but hardware.gpus_per_replica is %d: "
                          "its $ per token, replicas and monthly cost are priced for %d GPU%s per replica\n",
                          c->name, cfg.tp, s->hardware.gpus_per_replica, s->hardware.gpus_per_replica,
                          s->hardware.gpus_per_replica == 1 ? "" : "s");
            n++;
        }
        /* a trace's requests longer than the configuration's context: left out of its runs */
        uint32_t ctx = ok ? st_sweep_config_context(s, c) : 0;
        n += agent_context_warning(s, c, ctx, out);
        uint64_t over = 0, total = 0;
        if (ctx && st_sweep_trace_over_context(s, ctx, &over, &total, err, sizeof err) == 0 && over && over < total) {
            st_buf_printf(
                out,
                "configuration '%s': %llu of the trace's %llu requests (%.1f %%) are longer (prompt + output) "
                "than its context of %u tokens: the server would refuse them, so its runs leave them out "
                "and its figures are for the rest (raise --max-model-len to serve them, or set "
                "workload.trace_max_tokens to filter the trace for every configuration)\n",
                c->name, (unsigned long long)over, (unsigned long long)total, 100.0 * (double)over / (double)total,
                ctx);
            n++;
        }
        if (ok && unknown.n > 0) {
            st_buf_printf(out, "configuration '%s': ", c->name);
            for (int k = 0; k < unknown.n; k++)
                st_buf_printf(out, "%s%s", k ? ", " : "", unknown.v[k]);
            st_buf_printf(out,
                          " %s not a flag the engine model knows: %s no effect on the %s (check the spelling; real "
                          "vLLM refuses a flag it does not know)\n",
                          unknown.n == 1 ? "is" : "are", unknown.n == 1 ? "it has" : "they have",
                          s->engine.kind == ST_ENGINE_EMULATOR ? "emulator's timing or any prediction"
                                                               : "prediction made before the measurement");
            n++;
        }
        st_strv_free(&unknown);
    }
    return n;
}
