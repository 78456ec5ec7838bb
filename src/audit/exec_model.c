/* The engine-model executor (audit/executor.h) behind `servetune predict`: each configuration's
 * vLLM flags go through the emulator's own parser (emu/flags.h) into an st_emu_config; the
 * memory plan refuses what vLLM would refuse (with its message, classified like a real engine
 * log); each rate runs on one engine-model session (emu/sim.h) in virtual time, so the prefix
 * cache carries over from the warm-up and earlier rates as it does on a running server. The
 * engine's state is sampled every emulated second under the generic metric names a /metrics
 * scrape would store. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "audit/executor.h"
#include "core/buf.h"
#include "core/util.h"
#include "emu/calib.h"
#include "emu/consts.h"
#include "emu/flags.h"
#include "emu/sim.h"
#include "engine/process.h"
#include "engine/metrics.h"

/* The command line shown for a configuration, and its engine facts JSON. */
#define CMD_MAX ((size_t)1 << 16)
#define FACTS_MAX 4096

#define MODEL_TICK_NS ST_NS_PER_S

typedef struct model_exec {
    const st_spec *spec;
    char logdir[4096];
    int have_logdir;
    st_emu_session *sess;          /* the current configuration's engine, NULL when none */
    const st_emu_calib *calib;     /* --calibration, or NULL */
    int calib_applied;             /* to the current configuration */
    int calib_extrapolation_noted; /* the current configuration's log says so once */
    double reasoning_share;        /* the current configuration's emulated reasoning (--reasoning-share) */
} model_exec;

int st_exec_model_supported(const st_spec *spec, char *why, size_t whylen)
{
    st_engine_kind k = spec->engine.kind;
    if (k == ST_ENGINE_VLLM || k == ST_ENGINE_EMULATOR)
        return 1;
    snprintf(why, whylen,
             "servetune predict models vLLM V1 (engine kinds vllm and emulator); this spec's engine is %s, whose "
             "flags and scheduler the model does not know. To predict it as if it were vLLM, copy the spec with "
             "`kind: vllm` and vLLM's flags",
             st_engine_kind_name(k));
    return 0;
}

static void log_lines(model_exec *M, const char *name, const char *text)
{
    if (!M->have_logdir)
        return;
    char path[4400];
    snprintf(path, sizeof path, "%s/%s.log", M->logdir, name);
    FILE *f = fopen(path, "a");
    if (!f)
        return;
    fputs(text, f);
    fclose(f);
}

/* A refusal as vLLM would print it, classified like a real engine's log (engine/process.h). */
static void refuse(model_exec *M, const st_spec_config *c, st_config_row *row, const char *log, int exit_status)
{
    log_lines(M, c->name, log);
    char detail[ST_PROC_DETAIL_MAX];
    st_fail_class fc = st_proc_classify(log, 1, exit_status << 8, 0, detail, sizeof detail);
    if (fc == ST_FAIL_NONE)
        fc = ST_FAIL_CRASH;
    st_exec_fill_failure(row, fc, detail, NULL, NULL);
    free(row->log_tail);
    row->log_tail = strdup(log);
}

/* The value of NAME in the configuration's environment, then the spec's (NULL: none). */
static const char *env_of(const st_spec *s, const st_spec_config *c, const char *name)
{
    for (int i = 0; i < c->env.n; i++)
        if (!strcmp(c->env.key[i], name))
            return c->env.val[i];
    for (int i = 0; i < s->engine.env.n; i++)
        if (!strcmp(s->engine.env.key[i], name))
            return s->engine.env.val[i];
    return NULL;
}

int st_exec_model_config(const st_spec *s, const st_spec_config *c, st_emu_config *cfg, char *cmd, size_t cmdlen,
                         st_strv *unknown, char *err, size_t errlen)
{
    st_strv flags = { 0 };
    if (st_spec_config_flags(s, c, &flags)) {
        snprintf(err, errlen, "out of memory");
        return ST_EMU_ARGS_USAGE;
    }
    const char *model = st_spec_config_model(s, c);
    /* "serve MODEL FLAGS": what the adapter hands vLLM or the emulator, without host and port */
    int argc = 0;
    char **argv = calloc((size_t)flags.n + 3, sizeof *argv);
    if (!argv) {
        st_strv_free(&flags);
        snprintf(err, errlen, "out of memory");
        return ST_EMU_ARGS_USAGE;
    }
    st_buf b;
    st_buf_init(&b, CMD_MAX);
    argv[argc++] = "serve";
    argv[argc++] = (char *)model;
    st_buf_printf(&b, "engine model of: vllm serve %s", model);
    for (int i = 0; i < flags.n; i++) {
        argv[argc++] = flags.v[i];
        st_buf_printf(&b, " %s", flags.v[i]);
    }
    if (cmd && cmdlen)
        snprintf(cmd, cmdlen, "%s", b.data ? b.data : "");
    st_buf_free(&b);
    st_emu_args A;
    st_emu_args_defaults(&A);
    st_opt opts[ST_EMU_ARGS_TABLE_MAX];
    st_emu_args_table(&A, opts);
    st_opts_result r;
    int rc = st_emu_args_parse(&A, opts, argc, argv, &r, err, errlen);
    if (rc == 0) {
        if (!A.gpu || !*A.gpu)
            A.gpu = env_of(s, c, "SERVETUNE_EMULATE_GPU");
        if (!A.gpu || !*A.gpu)
            A.gpu = s->hardware.gpu;
        char acc[ST_SPEC_ACCEPT_POS_MAX * 24];
        if (A.spec_config && !A.spec_acceptance && s->speculation.given) {
            /* the spec's acceptance for a configuration whose flags give none */
            size_t n = 0;
            if (!s->speculation.n_pos)
                snprintf(acc, sizeof acc, "%.17g", s->speculation.acceptance);
            for (uint32_t i = 0; i < s->speculation.n_pos && n < sizeof acc; i++)
                n += (size_t)snprintf(acc + n, sizeof acc - n, "%s%.17g", i ? "/" : "", s->speculation.pos[i]);
            A.spec_acceptance = acc;
            if (A.spec_draft_share < 0 && s->speculation.draft_share >= 0)
                A.spec_draft_share = s->speculation.draft_share;
        }
        rc = st_emu_args_config(&A, cfg, err, errlen);
    }
    for (int i = 0; rc == 0 && unknown && i < r.nunknown; i++)
        if (r.unknown[i][0] == '-' && st_strv_push(unknown, r.unknown[i]) < 0)
            rc = ST_EMU_ARGS_USAGE;
    st_opts_result_free(&r);
    free(argv);
    st_strv_free(&flags);
    return rc;
}

static int model_start(st_executor *x, const st_spec_config *c, st_config_row *row)
{
    model_exec *M = x->impl;
    const st_spec *s = M->spec;
    st_emu_session_free(M->sess);
    M->sess = NULL;
    M->calib_extrapolation_noted = 0;
    x->time_scale = 1; /* virtual time: the emulator's --time-scale does not apply */
    char err[2048] = "", log[4096];
    char *cmd = malloc(CMD_MAX);
    st_strv unknown = { 0 };
    st_emu_config cfg;
    int rc = cmd ? st_exec_model_config(s, c, &cfg, cmd, CMD_MAX, &unknown, err, sizeof err) : ST_EMU_ARGS_USAGE;
    if (!cmd)
        snprintf(err, sizeof err, "out of memory");
    free(row->argv);
    row->argv = strdup(cmd ? cmd : "");
    free(cmd);
    snprintf(log, sizeof log, "--- servetune predict: %s\n", row->argv ? row->argv : "");
    log_lines(M, c->name, log);
    for (int i = 0; rc == 0 && i < unknown.n; i++) {
        snprintf(log, sizeof log, "WARNING ignoring vLLM flag %s (no effect on the engine model's timing)\n",
                 unknown.v[i]);
        log_lines(M, c->name, log);
    }
    st_strv_free(&unknown);
    if (rc == ST_EMU_ARGS_USAGE) {
        snprintf(log, sizeof log, "vllm serve: error: %s\n", err);
        refuse(M, c, row, log, 2);
        return -1;
    }
    if (rc) {
        snprintf(log, sizeof log, "ERROR %s\n", err);
        refuse(M, c, row, log, 1);
        return -1;
    }
    M->calib_applied = 0;
    if (M->calib) {
        char why[512], note[512];
        if (st_calib_check(M->calib, &cfg, why, sizeof why, note, sizeof note) == 0) {
            st_calib_apply(M->calib, &cfg);
            M->calib_applied = 1;
            snprintf(log, sizeof log, "INFO engine model calibrated (--calibration)%s%s\n", note[0] ? ": " : "", note);
        } else {
            snprintf(log, sizeof log, "WARNING calibration not applied: %s; the model's defaults are used\n", why);
        }
        log_lines(M, c->name, log);
    }
    st_emu_memory mem;
    memset(&mem, 0, sizeof mem);
    M->reasoning_share = cfg.reasoning_share;
    if (st_emu_session_new(&cfg, &M->sess, &mem, err, sizeof err)) {
        M->sess = NULL;
        snprintf(log, sizeof log,
                 "ERROR EngineCore failed to start.\n%s\nRuntimeError: Engine core initialization failed. See root "
                 "cause above. Failed core proc(s): {}\n",
                 err);
        refuse(M, c, row, log, 1);
        return -1;
    }
    char l1[128], l2[128], graphs[96] = "";
    st_emu_memory_log_lines(&mem, l1, sizeof l1, l2, sizeof l2);
    if (mem.cudagraph_graphs)
        snprintf(graphs, sizeof graphs, "INFO Estimated CUDA graph memory: %.2f GiB total (%u graphs)\n",
                 mem.cudagraph_bytes / EMU_GIB, mem.cudagraph_graphs);
    snprintf(
        log, sizeof log,
        "INFO Model loading took %.4f GiB\n%sINFO Memory profiling: total GPU memory %.2f GiB; requested %.2f GiB; "
        "model weights %.2f GiB; non_torch_memory %.2f GiB; PyTorch activation peak memory %.2f GiB; the rest "
        "of the memory reserved for KV Cache is %.2f GiB.\nINFO %s\nINFO %s\nINFO max_num_seqs=%u, "
        "max_num_batched_tokens=%u, max_model_len=%u, num_gpu_blocks=%u\n",
        mem.weight_bytes / EMU_GIB, graphs, mem.total_bytes / EMU_GIB, mem.requested_bytes / EMU_GIB,
        mem.weight_bytes / EMU_GIB, mem.non_torch_bytes / EMU_GIB, mem.activation_bytes / EMU_GIB,
        mem.kv_bytes / EMU_GIB, l1, l2, mem.max_num_seqs, mem.max_num_batched_tokens, mem.max_model_len,
        mem.num_blocks);
    log_lines(M, c->name, log);
    st_buf f;
    st_buf_init(&f, FACTS_MAX);
    st_buf_puts(&f, "{\"engine_version\":\"servetune engine model (vLLM V1)\",\"kv_cache_line\":");
    st_buf_json_str(&f, l1);
    st_buf_puts(&f, ",\"max_concurrency_line\":");
    st_buf_json_str(&f, l2);
    st_buf_puts(&f, ",\"gpu\":");
    st_buf_json_str(&f, cfg.gpu.name);
    st_buf_puts(&f, "}");
    free(row->facts);
    row->facts = strdup(f.data ? f.data : "{}");
    st_buf_free(&f);
    row->startup_s = 0;
    return 0;
}

static void model_stop(st_executor *x)
{
    model_exec *M = x->impl;
    st_emu_session_free(M->sess);
    M->sess = NULL;
}

typedef struct model_tick {
    const st_exec_rate *in;
    st_exec_out *out;
    size_t cap;
    int oom;
} model_tick;

static void push_sample(model_tick *T, double t, st_metric m, double v)
{
    st_exec_out *o = T->out;
    if (st_grow((void **)&o->samples, &T->cap, (size_t)o->n_samples + 1, sizeof *o->samples, 512)) {
        T->oom = 1;
        return;
    }
    o->samples[o->n_samples++] = (st_metrics_sample){ .t = t, .name = st_metrics_name(m), .value = v };
}

static void sample(model_tick *T, st_ns now, const st_emu_stats *es)
{
    double t = st_ns_to_s(now);
    push_sample(T, t, ST_MET_KV_USAGE, es->kv_usage);
    push_sample(T, t, ST_MET_RUNNING, es->running);
    push_sample(T, t, ST_MET_WAITING, es->waiting);
    push_sample(T, t, ST_MET_PREEMPTIONS, (double)es->preemptions);
    push_sample(T, t, ST_MET_PREFIX_HITS, (double)es->prefix_hits);
    push_sample(T, t, ST_MET_PREFIX_QUERIES, (double)es->prefix_queries);
    push_sample(T, t, ST_MET_PROMPT_TOKENS, (double)es->prompt_tokens);
    push_sample(T, t, ST_MET_GENERATION_TOKENS, (double)es->generation_tokens);
}

static int model_on_tick(void *arg, st_ns now, const st_emu_stats *es, const st_emu_run_progress *ep,
                         const st_record *recs, uint32_t n)
{
    model_tick *T = arg;
    if (!T->in->warmup)
        sample(T, now, es);
    if (!T->in->tick)
        return 0;
    st_runner_progress p = { .elapsed = now,
                             .total = n,
                             .arrived = ep->arrived,
                             .sent = ep->sent,
                             .completed = ep->completed,
                             .failed = ep->failed,
                             .in_flight = ep->in_flight,
                             .output_tokens = ep->output_tokens,
                             .records = recs };
    return T->in->tick(T->in->tick_arg, &p, T->out->samples, T->out->n_samples);
}

/* The offered rate of a run: (n - 1) / the span of its arrivals (sessions: of their first turns);
 * INFINITY for all at once. */
static double offered_rate(const st_exec_rate *in)
{
    uint32_t n = in->w->n - in->w->n_dependent;
    if (n < 2 || !in->sched)
        return 0;
    st_ns lo = in->sched[0], hi = in->sched[0];
    for (uint32_t i = 1; i < n; i++) {
        lo = in->sched[i] < lo ? in->sched[i] : lo;
        hi = in->sched[i] > hi ? in->sched[i] : hi;
    }
    return hi > lo ? (n - 1) / ((hi - lo) / 1e9) : INFINITY;
}

static int model_run_rate(st_executor *x, const st_exec_rate *in, st_config_row *row, st_exec_out *out, char *err,
                          size_t errlen)
{
    model_exec *M = x->impl;
    memset(out, 0, sizeof *out);
    if (!M->sess) {
        snprintf(err, errlen, "no engine model (the configuration did not start)");
        return -1;
    }
    if (M->calib && M->calib_applied && !in->warmup && !M->calib_extrapolation_noted) {
        char why[300], log[400];
        if (st_calib_extrapolates(M->calib, offered_rate(in), 0, ST_CALIB_SLACK, why, sizeof why)) {
            snprintf(log, sizeof log, "WARNING %s\n", why);
            log_lines(M, row->name ? row->name : "model", log);
            fprintf(stderr, "servetune: %s: %s\n", row->name ? row->name : "configuration", why);
            M->calib_extrapolation_noted = 1;
        }
    }
    uint32_t n = in->w->n;
    st_emu_sim_item *items = calloc(n ? n : 1, sizeof *items);
    out->records = calloc(n ? n : 1, sizeof *out->records);
    if (!items || !out->records) {
        free(items);
        free(out->records);
        out->records = NULL;
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    st_emu_sim_items_from_workload(in->w, in->sched, items);
    int chat = st_spec_api(M->spec) == ST_API_CHAT;
    for (uint32_t i = 0; i < n; i++) { /* as the emulator's HTTP server: floor(share x max_tokens) */
        items[i].chat = chat;
        items[i].n_reason = (uint32_t)floor(M->reasoning_share * items[i].output_len);
    }
    model_tick T = { .in = in, .out = out };
    if (!in->warmup) {
        st_emu_stats es;
        st_emu_session_stats(M->sess, &es);
        sample(&T, 0, &es);
    }
    /* a closed loop runs on the model's own closed-loop driver (`clients`); a capped open loop
     * on its concurrency limit */
    st_emu_run_opts o = { .warmup = in->warmup,
                          .max_concurrency = in->closed_loop ? 0 : in->max_concurrency,
                          .clients = in->closed_loop ? in->max_concurrency : 0,
                          .timeout = in->timeout_s > 0 ? (st_ns)(in->timeout_s * 1e9) : 0,
                          .tick = MODEL_TICK_NS,
                          .on_tick = model_on_tick,
                          .arg = &T,
                          .stop = x->stop };
    st_emu_sim_stats ss;
    int stopped = 0;
    int rc = st_emu_session_run(M->sess, items, n, &o, out->records, &ss, &stopped, err, errlen);
    out->n = n;
    free(items);
    if (rc || T.oom) {
        if (!rc)
            snprintf(err, errlen, "out of memory");
        st_exec_out_free(out);
        return -1;
    }
    out->stopped = stopped;
    return 0;
}

static void model_free(st_executor *x)
{
    model_stop(x);
    free(x->impl);
    free(x);
}

void st_exec_model_set_calibration(st_executor *x, const st_emu_calib *calib)
{
    model_exec *M = x->impl;
    M->calib = calib;
}

static const st_executor_ops model_ops = { .name = "model",
                                           .start_config = model_start,
                                           .run_rate = model_run_rate,
                                           .stop_config = model_stop,
                                           .free = model_free };

int st_exec_model_new(const st_spec *spec, const char *logdir, st_executor **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!st_exec_model_supported(spec, err, errlen))
        return -1;
    st_executor *x = calloc(1, sizeof *x);
    model_exec *M = calloc(1, sizeof *M);
    if (!x || !M) {
        free(x);
        free(M);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    M->spec = spec;
    if (logdir) {
        snprintf(M->logdir, sizeof M->logdir, "%s", logdir);
        M->have_logdir = 1;
    }
    x->ops = &model_ops;
    x->spec = spec;
    x->time_scale = 1;
    x->prediction = 1;
    x->impl = M;
    *out = x;
    return 0;
}
