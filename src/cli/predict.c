/* servetune predict SPEC [-o DIR] [--suggest-rates]: the audit of a spec on the engine model in
 * virtual time (audit/executor.h, the model executor): no server, no sockets, no child process.
 * Same sweep, store and reports as `servetune audit`, marked as a prediction. docs/predict.md. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit/executor.h"
#include "audit/spec.h"
#include "audit/store.h"
#include "audit/suggest.h"
#include "audit/sweep.h"
#include "cli/agents.h"
#include "cli/cli.h"
#include "core/opts.h"
#include "core/file.h"
#include "core/version.h"
#include "emu/calib.h"
#include "emu/consts.h"
#include "emu/specstep.h"
#include "emu/sim.h"
#include "load/workload.h"
#include "plan/disagg.h"
#include "plan/disagg_sim.h"
#include "report/format.h"
#include "report/predvs.h"
#include "report/report.h"

/* predict --disagg: the options, and the markdown section's size limit. */
typedef struct disagg_opts {
    const char *connector; /* NULL: by the GPU (st_disagg_link_default) */
    long gpus;             /* 0: 8 x each configuration's tensor parallelism */
    double s_p, s_d;
    int no_queueing; /* --disagg-static: the rate matching alone */
} disagg_opts;
#define PREDICT_DISAGG_MD_MAX ((size_t)1 << 20)

static void help(const st_opt *opts)
{
    printf("usage: servetune predict SPEC [-o DIR] [--suggest-rates] [--calibration FILE] [--quiet]\n\n"
           "Runs the audit of SPEC on servetune's engine model (vLLM V1's scheduler, paged KV cache with prefix\n"
           "caching, and the GPU's step time) in virtual time: no server is started, nothing is measured, and it\n"
           "takes seconds. Same configurations, workloads, rates, warm-up, early stop, capacity search, prices\n"
           "and reports as `servetune audit` (DIR/report.md, report.html, report.json, results.csv,\n"
           "results.sqlite), every one marked as a PREDICTION. Use it to compare configurations before renting\n"
           "GPUs and to choose the rates worth measuring. Concurrency levels run as the audit runs them: a\n"
           "sustained closed loop, or with search.mode: burst a fixed-count closed loop of requests_per_rate\n"
           "requests (vllm bench serve --max-concurrency C --num-prompts N). With --disagg, each configuration\n"
           "is also priced as the best disaggregated prefill/decode xPyD at equal GPUs (static rate matching on\n"
           "the model, a KV link that cannot keep up named with the bandwidth it needed), then run with queueing\n"
           "in both pools (x prefill and y decode engines of the model behind least-loaded routers, the KV\n"
           "transfer between them): p50/p95 TTFT and TPOT by rate and the capacity at the SLO beside the static\n"
           "figure (--disagg-static: the static figure alone). A section of the reports, a prediction of a setup\n"
           "that was not measured. A spec whose workload.trace is an agent trace replays its task graphs and\n"
           "searches the capacity in tasks/s, as the audit does; --agents FILE replays one at a single rate\n"
           "without a spec.\n\n"
           "Options:\n");
    st_opts_usage(stdout, opts);
    printf("\nExamples:\n"
           "  servetune predict examples/qwen3-8b-h100.yaml -o predict-out\n"
           "  servetune predict examples/qwen3-8b-h100.yaml --suggest-rates   # a rates: line for the real audit\n"
           "  servetune report predict-out                                     # re-render (still a prediction)\n"
           "  servetune predict my.yaml --calibration calib.json               # with constants fitted to your audit\n"
           "  servetune predict examples/qwen3-8b-h100.yaml --disagg --connector pcie  # xPyD, same GPUs\n"
           "  servetune predict --agents examples/agent-tasks.jsonl --model Qwen/Qwen3-8B --gpu H100  # agent tasks\n\n"
           "Engines: kinds vllm and emulator are modelled (their vLLM flags through the emulator's parser;\n"
           "the GPU from --gpu, SERVETUNE_EMULATE_GPU in the spec's env, or hardware.gpu; --time-scale is\n"
           "ignored). Other kinds are refused: the model knows vLLM's flags and scheduler only. Multi-turn\n"
           "sessions (workload.sessions) run as in an audit: each later turn after the turn before it, its\n"
           "prompt holding the tokens the model generated for that turn.\n"
           "Speculative decoding (--speculative-config in a configuration's flags) is served with the\n"
           "acceptance of the spec's speculation: {acceptance: A} or the flags' --spec-acceptance; a table of\n"
           "TPOT with and without it by batch size says where it stops paying (docs/speculative.md).\n"
           "Exit codes: 0 done; 1 done but a configuration was refused (does not fit, bad flag) or the reports\n"
           "could not be written; 2 bad arguments, an invalid spec or an engine the model cannot stand for;\n"
           "4 interrupted. More: docs/predict.md.\n");
}

/* The model note (meta "model_note") and its latency sentence: named limits. */
#define MODEL_NOTE_MAX 1100
#define MODEL_NOTE_LATENCY_MAX 600

/* A calibrated constant, or NAN when the calibration (if any) does not set it. */
static double calibrated(const st_emu_calib *calib, const char *name)
{
    const st_calib_knob *k = st_calib_knob_find(name);
    int idx = k ? (int)(k - st_calib_knobs()) : -1;
    return calib && idx >= 0 && calib->set[idx] ? calib->value[idx] : NAN;
}

/* How the engine was modelled, for the report's "Method and limits". The TTFT's largest
 * unknown is the setup's own fixed latency outside the engine (published setups: ~6-55 ms,
 * docs/fidelity.md "The lab's own latency"): the note says which one the prediction used, for
 * the spec's API (a chat request pays it times the chat factor, emu/engine.c). */
static void model_note(const st_spec *spec, const st_emu_calib *calib, char *out, size_t n)
{
    st_strv flags = { 0 };
    st_spec_config_flags(spec, &spec->configs[0], &flags);
    const char *gpu = NULL;
    for (int i = 0; i + 1 < flags.n && !gpu; i++)
        if (!strcmp(flags.v[i], "--gpu"))
            gpu = flags.v[i + 1];
    double lat = calibrated(calib, "fe_latency_s"), chat = calibrated(calib, "fe_chat_factor");
    int own = isfinite(lat);
    if (!own)
        lat = EMU_FE_LATENCY_S;
    if (!isfinite(chat))
        chat = EMU_FE_CHAT_FACTOR;
    char per[160] = "";
    if (st_spec_api(spec) == ST_API_CHAT) {
        snprintf(per, sizeof per, " (%.1f ms x %.2f, a chat request's cost)", lat * 1e3, chat);
        lat *= chat;
    }
    char latency[MODEL_NOTE_LATENCY_MAX];
    if (own)
        snprintf(latency, sizeof latency,
                 " TTFT includes %.0f ms%s of fixed latency outside the engine, the value the calibration fitted to "
                 "this setup.",
                 lat * 1e3, per);
    else
        snprintf(latency, sizeof latency,
                 " TTFT includes %.0f ms%s of fixed latency outside the engine (HTTP, tokenisation, the first token's "
                 "way back), the model's default for a setup it has not measured; published setups range from about "
                 "6 to 55 ms, so a low-load TTFT can be off by tens of ms: %s",
                 lat * 1e3, per,
                 calib ? "the calibration did not fit it (its runs did not move TTFT enough to identify it)."
                       : "servetune calibrate on an audit of this setup fits its own.");
    snprintf(out, n,
             "The spec's engine (%s) was modelled as vLLM V1 on %s%s; virtual time, so the emulator's --time-scale "
             "does not apply; requests are never lost or delayed by a network or a client.%s",
             st_engine_kind_name(spec->engine.kind), gpu ? gpu : spec->hardware.gpu,
             gpu ? " (its --gpu flag)" : " (hardware.gpu)", latency);
    st_strv_free(&flags);
}

/* Speculative decoding on the engine model (emu/specstep.h): for each configuration that speculates
 * (--speculative-config), TPOT without and with it at a few batch sizes, at the workload's mean
 * context, and the batch from which it stops paying. Returns how many configurations speculate. */
static int spec_table(FILE *out, const st_spec *spec, const st_emu_calib *calib)
{
    static const uint32_t batches[] = { 1, 8, 32, 128, 512 };
    int n = 0;
    for (int i = 0; i < spec->n_configs; i++) {
        st_emu_config cfg;
        st_emu_memory mem;
        char err[1024];
        if (st_exec_model_config(spec, &spec->configs[i], &cfg, NULL, 0, NULL, err, sizeof err) || !cfg.spec.k)
            continue;
        if (calib && st_calib_check(calib, &cfg, err, sizeof err, NULL, 0) == 0)
            st_calib_apply(calib, &cfg);
        if (st_emu_memory_plan(&cfg, &mem, err, sizeof err))
            continue;
        if (!n++)
            fprintf(out, "\nSpeculative decoding on the engine model (docs/speculative.md): TPOT without -> with it, "
                         "by batch, at the workload's mean context\n");
        uint32_t ctx = (uint32_t)(st_spec_mean_input(spec) + spec->workload.output_tokens / 2.0);
        uint64_t fit = ctx ? mem.kv_tokens / ctx : mem.max_num_seqs;
        uint32_t max_seqs = fit < mem.max_num_seqs ? (uint32_t)(fit ? fit : 1) : mem.max_num_seqs;
        st_emu_spec_accept a;
        st_emu_spec_accept_of(&cfg.spec, &a);
        fprintf(out,
                "  %s: %u draft tokens%s, %.2f tokens per step (%.0f%% of steps drafting, %.2f accepted a draft)%s\n",
                spec->configs[i].name, cfg.spec.k, cfg.spec.draft_model ? " from a draft model" : " by n-gram lookup",
                st_emu_spec_tokens_per_step(&cfg.spec), 100 * a.draft_share, a.accepted,
                a.accepted > 0 ? ""
                               : " -- none accepted (give the acceptance: speculation.acceptance in the spec, or "
                                 "--spec-acceptance in the flags)");
        fprintf(out, "    %-8s %12s %12s %8s\n", "batch", "TPOT plain", "speculating", "change");
        for (size_t b = 0; b < sizeof batches / sizeof *batches; b++) {
            st_emu_spec_point p;
            if (batches[b] > max_seqs || st_emu_spec_point_cfg(&cfg, batches[b], ctx, &p))
                continue;
            fprintf(out, "    %-8u %9.2f ms %9.2f ms %+7.0f%%\n", batches[b], 1e3 * p.tpot_plain_s, 1e3 * p.tpot_spec_s,
                    100 * (p.ratio - 1));
        }
        uint32_t be = 0;
        for (uint32_t s = 1; s <= max_seqs && s; s *= 2) {
            st_emu_spec_point p;
            if (st_emu_spec_point_cfg(&cfg, s, ctx, &p))
                break;
            if (p.ratio >= 1) {
                be = s;
                break;
            }
        }
        if (be == 1)
            fprintf(out, "    it does not pay at any batch\n");
        else if (be)
            fprintf(out, "    it stops paying from a batch of %u sequences (verification compute binds)\n", be);
        else
            fprintf(out, "    it pays at every batch the KV cache holds at this context (up to %u sequences)\n",
                    max_seqs);
    }
    return n;
}

/* --suggest-rates: each configuration's capacity on the model (the spec's own search: sustained, or
 * bisection for a burst test), then the grid. */
static int suggest(const st_spec *spec, st_store *store, const st_emu_calib *calib, int quiet,
                   volatile sig_atomic_t *stop, char *line, size_t linelen)
{
    double caps[256];
    int nc = 0;
    char err[1024];
    line[0] = '\0';
    if (!quiet)
        fprintf(stderr, spec->search.mode == ST_SEARCH_SUSTAINED
                            ? "servetune predict: sustained capacities on the model (the search's own tolerance):\n"
                            : "servetune predict: capacities by bisection on the model (within 2 %%):\n");
    for (int i = 0; i < spec->n_configs && nc < 256; i++) {
        st_executor *x;
        if (st_exec_model_new(spec, NULL, &x, err, sizeof err))
            return -1;
        st_exec_model_set_calibration(x, calib);
        x->stop = stop;
        st_sweep_bisect_result b;
        int rc = st_sweep_bisect(spec, x, i, 0.02, &b, err, sizeof err);
        st_executor_free(x);
        if (*stop)
            return 1; /* interrupted: no suggestion */
        if (rc) {
            fprintf(stderr, "servetune predict: %s: %s\n", spec->configs[i].name, err);
            continue;
        }
        if (b.failed_start || !(b.pass_rate > 0)) {
            printf("  %-24s no capacity: %s\n", spec->configs[i].name, b.why);
            continue;
        }
        if (!isfinite(b.fail_rate))
            printf("  %-24s passes at every rate up to %.4g req/s (%d runs)\n", spec->configs[i].name, b.pass_rate,
                   b.runs);
        else if (spec->search.mode == ST_SEARCH_SUSTAINED)
            printf("  %-24s sustained at %.4g, not at %.4g %s (%d runs)\n", spec->configs[i].name, b.pass_rate,
                   b.fail_rate, spec->closed_loop ? "concurrent requests" : "req/s", b.runs);
        else
            printf("  %-24s capacity between %.4g and %.4g req/s offered (%.4g req/s delivered; %d runs)\n",
                   spec->configs[i].name, b.pass_rate, b.fail_rate, b.capacity_rps, b.runs);
        caps[nc++] = b.pass_rate;
    }
    int finite = 0, with_inf = 0;
    for (int i = 0; i < spec->n_rates; i++) {
        if (isfinite(spec->rates[i]))
            finite++;
        else
            with_inf = 1;
    }
    double rates[32];
    int nr = st_suggest_rates(caps, nc, finite < 5 ? 7 : finite, rates, 32);
    if (!nr) {
        printf("No suggested rates: no configuration met the SLO on the model.\n");
        return 0;
    }
    st_suggest_format(rates, nr, with_inf, line, linelen);
    printf("Suggested for the measured audit (0.5 x the lowest to 1.5 x the highest capacity):\n  %s\n", line);
    st_store_meta_put(store, "suggested_rates", line);
    return 0;
}

int st_cli_predict_first(const st_spec *spec, const char *spec_path, const char *audit_dir, st_store *audit_store,
                         const char *calib_path, const st_emu_calib *calib, int quiet)
{
    char err[1024] = "", dir[4200];
    char *have = NULL;
    if (st_store_meta_get(audit_store, ST_PREDVS_META, &have) == 1) {
        free(have); /* --resume: the prediction was made when the audit began */
        return 0;
    }
    if (!st_exec_model_supported(spec, err, sizeof err))
        return 0; /* an engine the model cannot stand for: no prediction, nothing to compare */
    snprintf(dir, sizeof dir, "%s/prediction", audit_dir);
    size_t tlen = 0;
    char *text = st_read_file(spec_path, ST_SPEC_MAX_BYTES, &tlen, err, sizeof err);
    st_store *store = NULL;
    char note[MODEL_NOTE_MAX];
    model_note(spec, calib, note, sizeof note);
    if (!text || st_cli_clear_prediction(dir, err, sizeof err) || st_store_open(dir, &store, err, sizeof err) ||
        st_store_audit_begin(store, spec_path, text, tlen, ST_VERSION, 0, err, sizeof err) ||
        st_store_meta_put(store, "prediction", "1") || st_store_meta_put(store, "model_note", note)) {
        fprintf(stderr, "servetune audit: the prediction before the measurement failed: %s\n", err);
        free(text);
        st_store_close(store);
        return -1;
    }
    free(text);
    st_store_set_durable(store, 0);
    char logdir[4300];
    snprintf(logdir, sizeof logdir, "%s/logs", dir);
    st_executor *x = NULL;
    st_sweep_result sr;
    memset(&sr, 0, sizeof sr);
    int srun = -1;
    if (st_exec_model_new(spec, logdir, &x, err, sizeof err) == 0) {
        st_exec_model_set_calibration(x, calib);
        x->stop = st_cli_catch_signals(NULL);
        st_sweep_opts so = { .out_dir = dir, .quiet = 1, .tty = 0, .out = stderr, .stop = x->stop, .executor = x };
        srun = st_sweep_run(spec, store, &so, &sr, err, sizeof err);
        st_executor_free(x);
    }
    st_store_audit_finish(store, srun != 0, srun ? "stopped by an error" : NULL);
    int rc = -1;
    st_buf sum;
    st_buf_init(&sum, ST_REPORT_MAX_BYTES);
    char rerr[512] = "";
    if (srun == 0 && st_report_write_all(store, dir, rerr, sizeof rerr) == 0 &&
        st_predvs_summarise(store, calib_path, &sum, rerr, sizeof rerr) == 0 && sum.data &&
        st_store_meta_put(audit_store, ST_PREDVS_META, sum.data) == 0)
        rc = 0;
    if (rc)
        fprintf(stderr, "servetune audit: the prediction before the measurement failed: %s\n",
                srun      ? err
                : rerr[0] ? rerr
                          : st_store_errmsg(audit_store));
    else if (!quiet)
        fprintf(stderr,
                "servetune audit: predicted first on the engine model (%s/report.md); the report compares it "
                "with the measurement\n",
                dir);
    st_buf_free(&sum);
    st_store_close(store);
    return rc;
}

/* The summary's configuration named name (or NULL). */
static json_t *summary_config(json_t *root, const char *name)
{
    size_t k;
    json_t *c;
    json_array_foreach(json_object_get(root, "configs"), k, c)
    {
        const char *n = json_string_value(json_object_get(c, "name"));
        if (n && !strcmp(n, name))
            return c;
    }
    return NULL;
}

/* The summary's entry of cfg at rate (as st_predvs_at matches it), or NULL. */
static json_t *summary_rate(json_t *cfg, double rate)
{
    size_t k;
    json_t *r;
    json_array_foreach(json_object_get(cfg, "rates"), k, r)
    {
        json_t *v = json_object_get(r, "rate");
        if (json_is_number(v) && fabs(json_number_value(v) - rate) <= 1e-9 * fmax(1, fabs(rate)))
            return r;
    }
    return NULL;
}

int st_cli_predict_at_measured(const st_spec *spec, st_store *audit_store, const st_emu_calib *calib,
                               volatile sig_atomic_t *stop)
{
    char *text = NULL, err[1024] = "", why[600];
    if (st_store_meta_get(audit_store, ST_PREDVS_META, &text) != 1)
        return 0;
    json_error_t je;
    json_t *root = json_loads(text, 0, &je);
    free(text);
    if (!root)
        return 0; /* a malformed summary is not shown anyway */
    st_report rep;
    st_executor *x = NULL;
    int rc = -1, added = 0;
    if (st_report_load(audit_store, &rep, err, sizeof err)) {
        json_decref(root);
        fprintf(stderr, "servetune audit: the prediction at the measured rates: %s\n", err);
        return -1;
    }
    if (st_exec_model_new(spec, NULL, &x, err, sizeof err))
        goto out;
    st_exec_model_set_calibration(x, calib);
    x->stop = stop;
    for (int i = 0; i < rep.n_cfg && i < spec->n_configs && !(stop && *stop); i++) {
        const st_rep_cfg *c = &rep.cfg[i];
        json_t *pc = summary_config(root, c->name);
        if (c->status != ST_REP_OK || !pc || !isfinite(c->cap->pass_rate))
            continue;
        /* a rate the prediction ran (not one it skipped) is compared as it is */
        json_t *have = summary_rate(pc, c->cap->pass_rate);
        if (have && json_is_number(json_object_get(have, "ttft_p95_ms")) &&
            json_is_number(json_object_get(have, "tpot_p95_ms")))
            continue;
        json_t *rs = json_object_get(pc, "rates");
        if (!have && (!json_is_array(rs) || json_array_size(rs) >= ST_PREDVS_RATES_MAX))
            continue;
        st_rate_result r;
        int pr = st_sweep_probe(spec, x, i, c->cap->pass_rate, stop, &r, why, sizeof why, err, sizeof err);
        if (pr < 0)
            goto out;
        if (pr > 0)
            continue; /* the model refuses the configuration: the summary says so already */
        json_t *ro = have ? have : json_object();
        json_object_set_new(ro, "rate", json_real(c->cap->pass_rate));
        json_object_set_new(ro, "verdict", json_string(st_verdict_name(r.verdict)));
        json_object_set_new(ro, "ttft_p95_ms", st_jnum_or_null(r.n_terms > 0 ? r.value_ms[0] : NAN));
        json_object_set_new(ro, "tpot_p95_ms", st_jnum_or_null(r.n_terms > 1 ? r.value_ms[1] : NAN));
        json_object_set_new(ro, "output_tps", st_jnum_or_null(r.output_tps));
        if (!have)
            json_array_append_new(rs, ro);
        added++;
    }
    rc = 0;
    if (added) {
        char *out = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(17));
        if (!out || st_store_meta_put(audit_store, ST_PREDVS_META, out)) {
            snprintf(err, sizeof err, "%s", out ? st_store_errmsg(audit_store) : "out of memory");
            rc = -1;
        }
        free(out);
    }
out:
    if (rc)
        fprintf(stderr, "servetune audit: the prediction at the measured rates: %s\n", err);
    st_executor_free(x);
    st_report_free(&rep);
    json_decref(root);
    return rc;
}

/* predict --disagg with queueing: the requests of each rate (a p95 with 20 above it) and the
 * capacity search's tolerance, as plan --disagg's (PLAN_DISAGG_REQUESTS, PLAN_DISAGG_TOLERANCE in
 * cli/plan.c); the rates, as fractions of the static rate-matched figure. */
#define PREDICT_DISAGG_REQUESTS 400u
#define PREDICT_DISAGG_TOLERANCE 0.03
static const double disagg_fracs[] = { 0.25, 0.5, 0.75, 1.0 };

/* One --disagg prediction: the spec, the options, the workload and SLO, the queueing runs'
 * requests (NULL: static only), the static table (b) and the queueing table (q). */
typedef struct disagg_ctx {
    const st_spec *spec;
    const disagg_opts *o;
    const st_emu_calib *calib;
    st_disagg_work wk;
    const st_emu_sim_item *items;
    uint32_t n;
    st_buf *b, *q;
} disagg_ctx;

/* One row of the queueing table and its JSON object in arr. */
static void disagg_queue_row(const disagg_ctx *x, const char *name, const st_disagg_pick *pk, const char *what,
                             const st_disagg_sim *s, json_t *arr)
{
    json_t *j = st_disagg_sim_json(s);
    json_object_set_new(j, "what", json_string(what));
    json_array_append_new(arr, j);
    st_buf_printf(x->q, "| %s | %dP%dD | %.2f (%s) | %.0f / %.0f ms | %.1f / %.1f ms | %.0f ms | %.2f ms | %s |\n",
                  name, pk->x, pk->y, s->rate, what, s->ttft_p50_s * 1e3, s->ttft_p95_s * 1e3, s->tpot_p50_s * 1e3,
                  s->tpot_p95_s * 1e3, s->prefill_p95_s * 1e3, s->transfer_p95_s * 1e3,
                  s->meets ? "met" : (s->answered < s->n ? "not met (requests refused)" : "not met"));
}

/* The picked xPyD with queueing in both pools (plan/disagg_sim.h): p50/p95 TTFT and TPOT at
 * fractions of the static figure and at the aggregated capacity, and the sustained capacity at
 * the SLO. Into c's "queueing" and the queueing table; a failed run is said in both. */
static void disagg_queueing(const disagg_ctx *x, const char *name, const st_emu_config *cfg, const st_disagg_pick *pk,
                            int tp, const st_disagg_link *l, double agg, json_t *c)
{
    json_t *q = json_object(), *rows = json_array();
    json_object_set_new(c, "queueing", q);
    json_object_set_new(q, "requests", json_integer(x->n));
    json_object_set_new(q, "rates", rows);
    uint64_t seed = x->spec->workload.seed;
    char why[512] = "", what[64];
    st_disagg_sim s;
    for (size_t k = 0; k < sizeof disagg_fracs / sizeof *disagg_fracs + 1; k++) {
        int at_agg = k == sizeof disagg_fracs / sizeof *disagg_fracs;
        if (at_agg && !(isfinite(agg) && agg > 0))
            break;
        double rate = at_agg ? agg : disagg_fracs[k] * pk->rps;
        if (at_agg)
            snprintf(what, sizeof what, "the aggregated capacity");
        else
            snprintf(what, sizeof what, "%.2f x static", disagg_fracs[k]);
        if (st_disagg_simulate(cfg, x->items, x->n, pk->x, pk->y, tp, l, &x->wk, rate, seed, &s, why, sizeof why))
            goto fail;
        disagg_queue_row(x, name, pk, what, &s, rows);
    }
    if (st_disagg_sim_capacity(cfg, x->items, x->n, pk->x, pk->y, tp, l, &x->wk, pk->rps, seed,
                               PREDICT_DISAGG_TOLERANCE, &s, why, sizeof why))
        goto fail;
    json_object_set_new(q, "capacity_rps", json_real(s.rate));
    json_object_set_new(q, "capacity_per_gpu", json_real(s.rate / (double)((pk->x + pk->y) * tp)));
    if (s.rate > 0) {
        disagg_queue_row(x, name, pk, "**the capacity at the SLO**", &s, rows);
        json_object_set_new(json_array_get(rows, json_array_size(rows) - 1), "what",
                            json_string("the capacity at the SLO"));
    } else
        st_buf_printf(x->q, "| %s | %dP%dD | **no rate meets the SLO** | | | | | |\n", name, pk->x, pk->y);
    return;
fail:
    json_object_set_new(q, "error", json_string(why));
    st_buf_printf(x->q, "| %s | %dP%dD | not simulated: %s | | | | | |\n", name, pk->x, pk->y, why);
}

/* The link column of the static table. */
static void disagg_link_text(const st_disagg_pick *pk, const st_disagg_link *l, int tp, char *out, size_t n)
{
    if (pk->link_limited)
        snprintf(out, n,
                 "**cannot keep up**: needs %.1f GB/s over %s, which carries %.1f GB/s a prefill worker; the rate "
                 "is what the link carries",
                 pk->link_need_bps / 1e9, l->name, l->bytes_per_s * tp / 1e9);
    else
        snprintf(out, n, "%.2f of %.0f GB/s, %.2f ms a transfer", pk->link_need_bps / 1e9, l->bytes_per_s * tp / 1e9,
                 pk->transfer_s * 1e3);
}

/* The static figures of a pick into c. */
static void disagg_pick_json(const disagg_ctx *x, const st_disagg_worker *wr, const st_disagg_pick *pk,
                             const st_disagg_link *l, int tp, long gpus, double matched, json_t *c)
{
    json_object_set_new(c, "x", json_integer(pk->x));
    json_object_set_new(c, "y", json_integer(pk->y));
    json_object_set_new(c, "prefill_worker_rps", json_real(wr->prefill_rps));
    json_object_set_new(c, "decode_worker_rps", json_real(wr->decode_rps));
    json_object_set_new(c, "rate_matched_rps", json_real(matched));
    json_object_set_new(c, "rps", json_real(pk->rps));
    json_object_set_new(c, "rps_per_gpu", json_real(pk->rps_per_gpu));
    json_object_set_new(c, "ttft_static_ms", json_real(pk->ttft_s * 1e3));
    json_object_set_new(c, "tpot_static_ms", json_real(pk->tpot_s * 1e3));
    json_object_set_new(c, "kv_bytes_per_request", json_real(wr->kv_bytes));
    json_object_set_new(c, "transfer_ms", json_real(pk->transfer_s * 1e3));
    json_object_set_new(c, "link_need_gbps", json_real(pk->link_need_bps / 1e9));
    json_object_set_new(c, "link_gbps", json_real(l->bytes_per_s * tp / 1e9));
    json_object_set_new(c, "link_limited", json_boolean(pk->link_limited));
    if (x->spec->hardware.price_per_gpu_hour > 0 && pk->rps > 0 && x->wk.output_tokens > 0)
        json_object_set_new(c, "usd_per_1m_output_tokens",
                            json_real(x->spec->hardware.price_per_gpu_hour * (double)gpus /
                                      (pk->rps * x->wk.output_tokens * 3600) * 1e6));
}

/* Configuration i of the spec as its best xPyD: a row of the static table (and of the queueing
 * table), its JSON object c. agg: the same GPUs aggregated (req/s per replica; NAN: not found). */
static void disagg_config(const disagg_ctx *x, int i, double agg_replica, json_t *c)
{
    const st_spec_config *sc = &x->spec->configs[i];
    const disagg_opts *o = x->o;
    json_object_set_new(c, "configuration", json_string(sc->name));
    st_emu_config cfg;
    st_emu_memory mem;
    char why[1024] = "";
    if (st_exec_model_config(x->spec, sc, &cfg, NULL, 0, NULL, why, sizeof why)) {
        json_object_set_new(c, "error", json_string(why));
        st_buf_printf(x->b, "| %s | | | not modelled: %s | | | | | |\n", sc->name, why);
        return;
    }
    if (x->calib && st_calib_check(x->calib, &cfg, why, sizeof why, NULL, 0) == 0)
        st_calib_apply(x->calib, &cfg);
    int tp = cfg.tp ? (int)cfg.tp : 1;
    long gpus = o->gpus > 0 ? o->gpus : 8L * tp;
    st_disagg_link l;
    const char *conn = o->connector ? o->connector : st_disagg_link_default(cfg.gpu.name);
    st_disagg_link_find(conn, &l); /* checked when the options were read; the default is a preset */
    json_object_set_new(c, "gpus", json_integer(gpus));
    json_object_set_new(c, "connector", json_string(l.name));
    /* the same GPUs aggregated: replicas of tp GPUs at the predicted capacity */
    double agg = agg_replica * (double)(gpus / tp);
    json_object_set_new(c, "aggregated_rps", st_jnum_or_null(agg));
    char aggs[64] = "not found";
    if (isfinite(agg))
        snprintf(aggs, sizeof aggs, "%.2f (%ld x %d GPU%s)", agg, gpus / tp, tp, tp == 1 ? "" : "s");
    st_disagg_worker wr;
    if (st_emu_memory_plan(&cfg, &mem, why, sizeof why) ||
        st_disagg_worker_rates(&cfg, &mem, &x->wk, &wr, why, sizeof why)) {
        json_object_set_new(c, "error", json_string(why));
        st_buf_printf(x->b, "| %s | %ld | %s | none serves: %s | | | %s | | |\n", sc->name, gpus, l.name, why, aggs);
        return;
    }
    st_disagg_pick pk;
    if (st_disagg_best(&wr, tp, (int)gpus, o->s_p, o->s_d, &l, &pk)) {
        json_object_set_new(c, "error", json_string("no xPyD serves (it takes two workers at least)"));
        st_buf_printf(x->b, "| %s | %ld | %s | none serves | %.2f / %.2f | | %s | | |\n", sc->name, gpus, l.name,
                      wr.prefill_rps, wr.decode_rps, aggs);
        return;
    }
    double matched = st_disagg_rate_match(wr.prefill_rps, pk.x, o->s_p, wr.decode_rps, pk.y, o->s_d);
    disagg_pick_json(x, &wr, &pk, &l, tp, gpus, matched, c);
    if (cfg.spec.k) { /* its decode workers verify drafts: their rate and TPOT are per token emitted */
        json_t *sp = json_object();
        json_object_set_new(sp, "k", json_integer(cfg.spec.k));
        json_object_set_new(sp, "tokens_per_step", json_real(st_emu_spec_tokens_per_step(&cfg.spec)));
        json_object_set_new(c, "decode_speculation", sp);
    }
    char link[300];
    disagg_link_text(&pk, &l, tp, link, sizeof link);
    st_buf_printf(x->b,
                  "| %s | %ld | %s | %dP%dD | %.2f / %.2f | %.2f (rate matched: min(%d x %.2f x %.2f, %d x %.2f x "
                  "%.2f) = %.2f) | %s | %.0f ms / %.1f ms | %s |\n",
                  sc->name, gpus, l.name, pk.x, pk.y, wr.prefill_rps, wr.decode_rps, pk.rps, pk.x, wr.prefill_rps,
                  o->s_p, pk.y, wr.decode_rps, o->s_d, matched, aggs, pk.ttft_s * 1e3, pk.tpot_s * 1e3, link);
    if (x->items)
        disagg_queueing(x, sc->name, &cfg, &pk, tp, &l, agg, c);
}

/* The section's opening: what it is, and the static table's head. */
static void disagg_intro(st_buf *b, const disagg_opts *o)
{
    st_buf_printf(b,
                  "## Disaggregated prefill/decode (a prediction)\n\n**A prediction: no disaggregated setup was "
                  "measured.** Each configuration below is also priced as prefill and decode workers of its own "
                  "GPUs per replica, the KV cache of each request sent from one to the other, the xPyD with the most "
                  "requests/s per GPU at equal GPUs by AIConfigurator's rate matching: min(x x prefill rate x %.2f, "
                  "y x decode rate x %.2f), static (no queueing: TTFT and TPOT are one request's), beside the same "
                  "GPUs aggregated at the capacity predicted above. Disaggregation does not raise throughput by "
                  "itself; it separates TTFT from TPOT. A configuration that speculates (--speculative-config) "
                  "does so in its decode workers: their step verifies each sequence's draft, and their rate and "
                  "TPOT count the tokens a step emits (docs/speculative.md); its prefill workers draft nothing.\n\n",
                  o->s_p, o->s_d);
    st_buf_puts(b, "| configuration | GPUs | connector | xPyD | prefill / decode worker req/s | disaggregated req/s "
                   "(static) | aggregated req/s (predicted) | TTFT / TPOT (static) | KV link |\n"
                   "|---|---|---|---|---|---|---|---|---|\n");
}

/* The queueing table's opening. */
static void disagg_queue_intro(st_buf *q, uint32_t n)
{
    st_buf_printf(q,
                  "\n### With queueing (the engine model, both pools)\n\n"
                  "The same xPyD run on the engine model in virtual time, Poisson arrivals at each rate (%u "
                  "requests, more when the spec's min_window at that rate takes more): x prefill engines behind a "
                  "least-loaded router, each prefilling a prompt and "
                  "answering its first token; the KV cache over the prefill engine's link, one transfer after "
                  "another; y decode engines behind a least-loaded router, each request arriving with its "
                  "prompt's KV cache (the last prompt token recomputed, as vLLM's scheduler does with a KV "
                  "connector). TTFT runs from the arrival to the decode engine's first token; TPOT is each "
                  "request's. The capacity at the SLO is the highest rate whose p95s meet it with no growing queue "
                  "(within %.0f %%), beside the static figure above, which has no queue and prefills one request "
                  "at a time.\n\n"
                  "| configuration | xPyD | offered req/s | TTFT p50 / p95 | TPOT p50 / p95 | prefill p95 (queue "
                  "included) | KV transfer p95 | SLO |\n|---|---|---|---|---|---|---|---|\n",
                  n, PREDICT_DISAGG_TOLERANCE * 100);
}

/* The queueing runs' requests: the spec's workload (n of them). NULL with err when it cannot
 * be built or holds sessions (the pools run independent requests). */
static st_emu_sim_item *disagg_items(const st_spec *spec, st_workload *w, uint32_t n, char *err, size_t errlen)
{
    if (st_sweep_workload(spec, spec->workload.seed, n, w, err, errlen))
        return NULL;
    st_emu_sim_item *items = calloc(w->n ? w->n : 1, sizeof *items);
    if (!items) {
        snprintf(err, errlen, "out of memory");
        st_workload_free(w);
        return NULL;
    }
    st_emu_sim_items_from_workload(w, NULL, items);
    for (uint32_t i = 0; i < w->n; i++)
        if (items[i].dependent) {
            snprintf(err, errlen,
                     "a workload of sessions is priced static only (the pools run independent "
                     "requests)");
            free(items);
            st_workload_free(w);
            return NULL;
        }
    return items;
}

/* predict --disagg: each configuration also priced as the best xPyD of its own workers (its GPU,
 * weights, KV dtype and limits; workers of its tensor parallelism) at equal GPUs, by
 * AIConfigurator's rate matching on the engine model's step time (plan/disagg.h), beside the same
 * GPUs aggregated at the capacity this prediction found, and (unless o->no_queueing) that xPyD
 * with queueing in both pools (plan/disagg_sim.h). Stored as meta "disagg_md" and "disagg"
 * (report.md, report.json and report.html render them). 0, or -1 with err (a store error). */
static int disagg_predict(const st_spec *spec, st_store *store, const st_emu_calib *calib, const disagg_opts *o,
                          char *err, size_t errlen)
{
    st_report rep;
    int have_rep = st_report_load(store, &rep, err, errlen) == 0;
    st_buf b, q;
    st_buf_init(&b, PREDICT_DISAGG_MD_MAX);
    st_buf_init(&q, PREDICT_DISAGG_MD_MAX);
    json_t *root = json_object(), *cs = json_array();
    json_object_set_new(root, "measured", json_false());
    json_object_set_new(root, "prefill_scale", json_real(o->s_p));
    json_object_set_new(root, "decode_scale", json_real(o->s_d));
    disagg_ctx x = { .spec = spec, .o = o, .calib = calib, .b = &b, .q = &q };
    st_disagg_work_of_spec(spec, &x.wk);
    st_workload w;
    char qwhy[512] = "";
    st_emu_sim_item *items = o->no_queueing ? NULL : disagg_items(spec, &w, PREDICT_DISAGG_REQUESTS, qwhy, sizeof qwhy);
    x.items = items;
    x.n = items ? w.n : 0;
    disagg_intro(&b, o);
    if (items)
        disagg_queue_intro(&q, x.n);
    else if (!o->no_queueing)
        st_buf_printf(&q, "\nNo queueing estimate: %s.\n", qwhy);
    for (int i = 0; i < spec->n_configs; i++) {
        json_t *c = json_object();
        json_array_append_new(cs, c);
        double agg = NAN;
        if (have_rep && i < rep.n_cfg && rep.cfg[i].status == ST_REP_OK && rep.cfg[i].cap &&
            isfinite(rep.cfg[i].cap->capacity_rps) && !spec->closed_loop)
            agg = rep.cfg[i].cap->capacity_rps;
        disagg_config(&x, i, agg, c);
    }
    st_buf_puts(&b, q.data ? q.data : "");
    st_buf_puts(&b, "\nTo deploy one (vLLM, not measured): prefill workers with `--kv-transfer-config "
                    "'{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_producer\"}'`, decode workers with "
                    "`\"kv_role\":\"kv_consumer\"`, and a router (vLLM's disaggregated prefill proxy, llm-d or "
                    "Dynamo). Measure it before relying on it.\n\n");
    json_object_set_new(root, "queueing", json_boolean(items != NULL));
    json_object_set_new(root, "configurations", cs);
    char *js = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(root);
    int rc = 0;
    if (st_buf_error(&b) || st_buf_error(&q) || !js) {
        snprintf(err, errlen, "the disaggregated section: out of memory or over %zu bytes", PREDICT_DISAGG_MD_MAX);
        rc = -1;
    } else if (st_store_meta_put(store, "disagg_md", b.data) || st_store_meta_put(store, "disagg", js)) {
        snprintf(err, errlen, "%s", st_store_errmsg(store));
        rc = -1;
    }
    if (items) {
        free(items);
        st_workload_free(&w);
    }
    free(js);
    st_buf_free(&b);
    st_buf_free(&q);
    if (have_rep)
        st_report_free(&rep);
    return rc;
}

/* The --disagg options that can be wrong: 0, or -1 with err. */
static int disagg_opts_check(int disagg, const disagg_opts *o, char *err, size_t errlen)
{
    st_disagg_link l;
    if (disagg && o->connector && st_disagg_link_find(o->connector, &l)) {
        snprintf(err, errlen, "--connector %s: not one of %s", o->connector, st_disagg_link_names());
        return -1;
    }
    if (!disagg && o->no_queueing) {
        snprintf(err, errlen, "--disagg-static goes with --disagg");
        return -1;
    }
    return 0;
}

int cmd_predict(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) /* agent task graphs: their own command line (cli/agents.h) */
        if (!strcmp(argv[i], "--agents") || !strncmp(argv[i], "--agents=", 9))
            return st_cli_predict_agents(argc, argv);
    const char *out_dir = "predict-out", *calib_path = NULL;
    int quiet = 0, suggest_rates = 0, disagg = 0;
    disagg_opts dopt = { .connector = NULL, .gpus = 0, .s_p = ST_DISAGG_PREFILL_SCALE, .s_d = ST_DISAGG_DECODE_SCALE };
    const st_opt opts[] = {
        { "output", 'o', ST_OPT_STR, &out_dir, "DIR",
          "output folder (predict-out; made with its parents when missing); an earlier prediction there is replaced", 0,
          0, 0 },
        { "calibration", 0, ST_OPT_STR, &calib_path, "FILE",
          "engine-model constants from `servetune calibrate` (applied to the configurations it matches)", 0, 0, 0 },
        { "suggest-rates", 0, ST_OPT_FLAG, &suggest_rates, NULL,
          "find each configuration's capacity on the model (the spec's search) and suggest a rates: list", 0, 0, 0 },
        { "disagg", 0, ST_OPT_FLAG, &disagg, NULL,
          "also price each configuration as the best disaggregated xPyD at equal GPUs (a report section; static, "
          "not measured)",
          0, 0, 0 },
        { "connector", 0, ST_OPT_STR, &dopt.connector, "NAME",
          "the KV transfer's link for --disagg: nvlink, infiniband, pcie, ethernet (default: nvlink on a GPU with "
          "NVLink, else pcie)",
          0, 0, 0 },
        { "disagg-gpus", 0, ST_OPT_LONG, &dopt.gpus, "N",
          "GPUs of each disaggregated setup (default 8 x the configuration's tensor parallelism)", 2, 4096, 0 },
        { "disagg-static", 0, ST_OPT_FLAG, &dopt.no_queueing, NULL,
          "--disagg without the queueing simulation of both pools: AIConfigurator's static rate matching alone", 0, 0,
          0 },
        { "prefill-scale", 0, ST_OPT_DOUBLE, &dopt.s_p, "S",
          "the prefill workers' correction scale of the rate matching (default 0.9, AIConfigurator's)", 0.01, 1.0, 0 },
        { "decode-scale", 0, ST_OPT_DOUBLE, &dopt.s_d, "S",
          "the decode workers' correction scale (default 0.92, AIConfigurator's)", 0.01, 1.0, 0 },
        { "quiet", 'q', ST_OPT_FLAG, &quiet, NULL, "no progress output, only the final lines", 0, 0, 0 },
        { NULL, 0, 0, NULL, NULL, NULL, 0, 0, 0 },
    };
    st_opts_result res;
    st_cli_run r;
    st_cli_run_init(&r, "predict");
    char err[1024] = "";
    int rc = st_cli_parse("predict", opts, argc, argv, 0, &res, help, err, sizeof err);
    if (rc >= 0)
        goto out;
    rc = ST_EXIT_OK;
    if (res.npos != 1) {
        rc = st_cli_usage_error("predict", "expected one SPEC file");
        goto out;
    }
    if (disagg_opts_check(disagg, &dopt, err, sizeof err)) {
        rc = st_cli_usage_error("predict", err);
        goto out;
    }
    if ((rc = st_cli_run_spec(&r, res.pos[0])) != ST_EXIT_OK)
        goto out;
    if (!st_exec_model_supported(&r.spec, err, sizeof err)) {
        fprintf(stderr, "servetune predict: %s\n", err);
        rc = ST_EXIT_USAGE;
        goto out;
    }
    st_emu_calib calib;
    if (calib_path && st_cli_load_calibration(calib_path, &r.spec, &calib)) {
        rc = ST_EXIT_USAGE;
        goto out;
    }
    if ((rc = st_cli_run_open(&r, out_dir, 0, 1)) != ST_EXIT_OK)
        goto out;
    st_cli_store_traffic(r.store, &r.spec);
    char note[MODEL_NOTE_MAX];
    model_note(&r.spec, calib_path ? &calib : NULL, note, sizeof note);
    if (st_store_meta_put(r.store, "prediction", "1") || st_store_meta_put(r.store, "model_note", note)) {
        fprintf(stderr, "servetune predict: results database: %s\n", st_store_errmsg(r.store));
        rc = ST_EXIT_FAIL;
        goto out;
    }
    /* the runs are recomputed in seconds: no fsync per run */
    st_store_set_durable(r.store, 0);
    volatile sig_atomic_t *stop = st_cli_catch_signals(NULL);
    char logdir[4200];
    snprintf(logdir, sizeof logdir, "%s/logs", out_dir);
    st_executor *x = NULL;
    st_sweep_result sr;
    memset(&sr, 0, sizeof sr);
    int srun = -1;
    if (st_exec_model_new(&r.spec, logdir, &x, err, sizeof err) == 0) {
        st_exec_model_set_calibration(x, calib_path ? &calib : NULL);
        x->stop = stop;
        st_sweep_opts so = {
            .out_dir = out_dir, .quiet = quiet, .tty = isatty(STDERR_FILENO), .out = r.out, .stop = stop, .executor = x
        };
        if (!quiet)
            fprintf(r.out, "servetune predict: %d configuration%s of %s on the engine model, results in %s\n",
                    r.spec.n_configs, r.spec.n_configs == 1 ? "" : "s", r.spec_path, out_dir);
        srun = st_sweep_run(&r.spec, r.store, &so, &sr, err, sizeof err);
        st_executor_free(x);
    }
    if (srun)
        fprintf(r.out, "servetune predict: %s\n", err);
    if (!quiet && !srun)
        spec_table(r.out, &r.spec, calib_path ? &calib : NULL);
    char line[1024] = "";
    if (suggest_rates && !sr.interrupted && !srun &&
        suggest(&r.spec, r.store, calib_path ? &calib : NULL, quiet, stop, line, sizeof line) == 1)
        sr.interrupted = 1;
    if (disagg && !sr.interrupted && !srun &&
        disagg_predict(&r.spec, r.store, calib_path ? &calib : NULL, &dopt, err, sizeof err))
        fprintf(stderr, "servetune predict: --disagg: %s\n", err);
    rc = st_cli_run_finish(&r, &sr, srun != 0, "Prediction");
out:
    st_cli_run_close(&r);
    st_opts_result_free(&res);
    return rc;
}
