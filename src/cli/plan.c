/* servetune plan SPEC: the cheapest GPU, GPUs per replica, weight format, KV cache dtype and engine
 * limits that serve the spec's workload within its SLO, found on the engine model before anything
 * is rented (plan/plan.h, plan/plan_model.h), priced from a dated price list (plan/prices.h),
 * with a traffic day (plan/day.h) and the top candidates written as an audit spec to measure
 * them (plan/plan_spec.h). docs/plan.md. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit/check.h"
#include "plan/cost.h"
#include "plan/day.h"
#include "plan/disagg.h"
#include "plan/disagg_sim.h"
#include "emu/catalog.h"
#include "emu/config.h"
#include "emu/sim.h"
#include "audit/sweep.h"
#include "audit/executor.h"
#include "plan/plan.h"
#include "plan/plan_model.h"
#include "plan/plan_spec.h"
#include "plan/prices.h"
#include "audit/quality.h"
#include "audit/spec.h"
#include "audit/traffic.h"
#include "audit/store.h"
#include "cli/cli.h"
#include "core/clock.h"
#include "core/file.h"
#include "core/opts.h"
#include "core/util.h"
#include "report/deploy.h"
#include "report/format.h"
#include "load/spec_trace.h"
#include "load/trace.h"
#include "load/workload.h"
#include "report/plan_report.h"

#define PLAN_OUT_MAX ((size_t)64 << 20)
/* Requests of a trace read for the p99 length. */
/* Audit specs written at most (one per machine among the top candidates). */
#define PLAN_SPECS_MAX 8
/* --disagg: requests in the two-pool queueing runs (a p95 with 20 above it; more when the spec's
 * min_window takes more), and the queueing capacity search's tolerance. */
#define PLAN_DISAGG_REQUESTS 400u
#define PLAN_DISAGG_TOLERANCE 0.03
/* --disagg: top candidates priced disaggregated at most (the pick and the next ones, --top): each
 * a capacity search of a dozen two-pool runs. */
#define PLAN_DISAGG_TOP_MAX 8

static void help(const st_opt *opts)
{
    printf(
        "usage: servetune plan SPEC [-o DIR] [--write-spec FILE] [--top K] [--prices FILE] [--provider NAME]\n\n"
        "Finds, on servetune's engine model, the cheapest way to serve the spec's workload within its SLO: every\n"
        "combination of GPU x GPUs per replica x weight format x KV cache dtype x --max-num-seqs x\n"
        "--max-num-batched-tokens (the spec's plan: block, or the defaults in docs/plan.md), each priced per GPU-hour\n"
        "from a dated price list, each capacity the sustained rate within the SLO that `servetune predict` finds.\n"
        "Prints the answer and the best candidates; writes DIR/plan.md and DIR/plan.json; with --write-spec, the top\n"
        "K candidates as an audit spec to measure on the hardware. With a traffic: block, the cost of a day as\n"
        "dedicated replicas (peak-sized or autoscaled) and as serverless workers (traffic: {hourly_rps: trace}: the\n"
        "trace's own rate in each hour of the day it covers). With --quality DIR (an audit\n"
        "with a quality: block, docs/quality.md), the cost-vs-quality frontier uses the drift the audit measured\n"
        "for each checkpoint and KV cache (mean KL divergence against its baseline) instead of the format's label.\n"
        "With plan.speculation (methods, draft lengths k, each with an acceptance: a measured one, or n-gram lookup's\n"
        "offline estimate from `servetune trace stats LOG --spec ngram:K`), every candidate also runs with "
        "speculative\n"
        "decoding (--speculative-config), and the picks say whether it pays and from which batch (and about which\n"
        "rate) verifying the draft tokens binds; without an acceptance speculation is not considered (the plan says\n"
        "why); --spec-acceptance A gives every method that rate. docs/plan.md, \"Speculative decoding\".\n\n"
        "Options:\n");
    st_opts_usage(stdout, opts);
    printf("\nExamples:\n"
           "  servetune plan examples/plan-qwen3-8b.yaml\n"
           "  servetune plan examples/plan-qwen3-8b.yaml --write-spec measure.yaml   # then: servetune audit "
           "measure.yaml\n"
           "  servetune plan my.yaml --prices my-prices.csv --provider mycloud\n\n"
           "Exit codes: 0 a plan (even when no candidate met the SLO: the plan says why); 2 bad arguments, an\n"
           "invalid spec or price list, a GPU without a price, an engine the model cannot stand for; 1 the\n"
           "outputs could not be written; 4 interrupted (SIGINT/SIGTERM, within a second): nothing written, an\n"
           "earlier plan in DIR left as it was. Every figure is a PREDICTION. More: docs/plan.md, docs/prices.md.\n");
}

/* The drift an audit measured (DIR/results.sqlite: its spec and each configuration's quality
 * result) as measurements by checkpoint and KV cache dtype: the baseline 0, every measured
 * configuration its mean KL divergence. *out (strings owned by *audit_spec, which the caller
 * frees) and the count, or -1 with err. */
static int load_quality(const char *dir, st_spec *audit_spec, st_plan_qmeasure **out, char *err, size_t errlen)
{
    st_store *st = NULL;
    st_audit_row a = { 0 };
    *out = NULL;
    if (st_store_open_read(dir, &st, err, errlen))
        return -1;
    if (st_store_audit_get(st, &a) != 1 || !a.spec_text ||
        st_spec_parse(a.spec_path ? a.spec_path : dir, a.spec_text, strlen(a.spec_text), audit_spec, err, errlen)) {
        if (!err[0])
            snprintf(err, errlen, "%s: no audit spec in its results database", dir);
        st_audit_row_free(&a);
        st_store_close(st);
        return -1;
    }
    st_audit_row_free(&a);
    int n = 0;
    *out = calloc((size_t)audit_spec->n_configs + 1, sizeof **out);
    for (int i = 0; *out && i < audit_spec->n_configs; i++) {
        const st_spec_config *c = &audit_spec->configs[i];
        char key[ST_QUALITY_KEY_MAX], *v = NULL;
        st_quality_result q;
        st_quality_key(c->name, key, sizeof key);
        if (st_store_meta_get(st, key, &v) == 1 && v && st_quality_from_json(v, strlen(v), &q) == 0 &&
            (q.status == ST_Q_REFERENCE || (q.status == ST_Q_MEASURED && isfinite(q.d.kld_mean)))) {
            st_strv flags = { 0 };
            const char *kv = "auto";
            if (st_spec_config_flags(audit_spec, c, &flags) == 0)
                for (int k = 0; k + 1 < flags.n; k++)
                    if (!strcmp(flags.v[k], "--kv-cache-dtype") && strstr(flags.v[k + 1], "fp8"))
                        kv = "fp8";
            st_strv_free(&flags);
            (*out)[n++] = (st_plan_qmeasure){ st_spec_config_model(audit_spec, c), kv,
                                              q.status == ST_Q_REFERENCE ? 0 : q.d.kld_mean };
        }
        free(v);
    }
    st_store_close(st);
    if (!*out) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (n == 0) {
        snprintf(err, errlen, "%s: no quality measurement (the audit's spec needs a quality: block)", dir);
        free(*out);
        *out = NULL;
        return -1;
    }
    return n;
}

/* --max-model-len from the workload: its longest request (input + output), rounded up to 256; a
 * trace's longest at most the model's context, with the share of requests longer than that (which
 * every run leaves out, as servetune bench does: st_traffic_len_auto). */
static int len_auto(const st_spec *s, long *len, double *reject, char *err, size_t errlen)
{
    *reject = 0;
    if (s->workload.kind != ST_WL_TRACE) {
        double r = s->workload.range_ratio;
        double prefix = s->workload.vllm_semantics ? s->workload.shared_prefix : 0; /* on top, unspread */
        double longest = prefix + ceil(s->workload.input_tokens * (1 + r)) + ceil(s->workload.output_tokens * (1 + r));
        *len = (long)(ceil(longest / 256) * 256);
        return 0;
    }
    int capped;
    return st_traffic_len_auto(s, len, reject, &capped, err, errlen);
}

/* vLLM's n-gram lookup window when --speculative-config gives none (prompt_lookup_min = max = 5:
 * vllm/config/speculative.py). */
#define PLAN_NGRAM_LOOKUP 5

/* One k's acceptance from its replay: by position (accepted at i / drafts) and the share of steps
 * with a draft. 0, or -1 with why (no draft). */
static int replay_accept(const st_ngram_acc *a, uint32_t k, st_spec_accept *out, char *why, size_t n)
{
    memset(out, 0, sizeof *out);
    if (!a->drafts || !a->steps) {
        snprintf(why, n, "n-gram lookup made no draft in the trace's replay");
        return -1;
    }
    out->given = 1;
    out->n_pos = k < ST_SPEC_ACCEPT_POS_MAX ? k : ST_SPEC_ACCEPT_POS_MAX;
    for (uint32_t i = 0; i < out->n_pos; i++)
        out->pos[i] = (double)a->accepted_pos[i] / (double)a->drafts;
    out->draft_share = (double)a->drafts / (double)a->steps;
    return 0;
}

/* acceptance: trace: vLLM's n-gram proposer replayed over the workload trace's logged prompts and
 * completions (their token ids: load/spec_trace.h), one acceptance per k; what could not be
 * replayed is named in the method's trace_why. 0, or -1 with err (the trace could not be read). */
static int trace_acceptance(st_spec *s, st_plan_specm *m, char *err, size_t errlen)
{
    if (s->workload.kind != ST_WL_TRACE || !s->workload.trace) {
        snprintf(m->trace_why, sizeof m->trace_why, "acceptance: trace needs a workload.trace with the logged text");
        return 0;
    }
    st_ngram_params p[ST_PLAN_LIST_MAX];
    for (int q = 0; q < m->n_k; q++)
        p[q] = (st_ngram_params){ (uint32_t)m->k[q], PLAN_NGRAM_LOOKUP, PLAN_NGRAM_LOOKUP, 0 };
    st_spec_stats *ss = st_spec_stats_new(p, m->n_k, NULL, NULL, err, errlen);
    if (!ss || st_cli_spec_read(s->workload.trace, ss, err, errlen)) {
        st_spec_stats_free(ss);
        return -1;
    }
    const st_spec_counts *c = st_spec_stats_counts(ss);
    if (!c->replayed)
        snprintf(m->trace_why, sizeof m->trace_why,
                 "none of the trace's %llu lines has a prompt and a completion as token ids (%llu without a "
                 "completion, %llu text only: tokenize them with `servetune trace stats LOG --spec ngram:K --vocab "
                 "GGUF` and give its acceptance)",
                 (unsigned long long)c->lines, (unsigned long long)c->no_completion,
                 (unsigned long long)c->no_tokenizer);
    for (int q = 0; q < m->n_k && c->replayed; q++)
        (void)replay_accept(st_spec_stats_total(ss, q), p[q].k, &m->acc_k[q], m->trace_why, sizeof m->trace_why);
    st_spec_stats_free(ss);
    return 0;
}

/* The plan's inputs from the workload: --max-model-len (plan.max_model_len, else len_auto) and the
 * n-gram acceptance of the methods that ask for the trace's. 0, or -1 with err. */
static int workload_inputs(st_spec *s, long *len, double *reject, char *err, size_t errlen)
{
    for (int i = 0; i < s->plan.n_spec; i++)
        if (s->plan.spec[i].acc_trace && trace_acceptance(s, &s->plan.spec[i], err, errlen))
            return -1;
    if (len_auto(s, len, reject, err, errlen))
        return -1;
    if (s->plan.max_model_len > 0)
        *len = s->plan.max_model_len;
    return 0;
}

/* FILE for the first spec, FILE-2.yaml, FILE-3.yaml ... for the next (before the extension). */
static void spec_path(const char *base, int i, char *out, size_t n)
{
    if (i == 0) {
        snprintf(out, n, "%s", base);
        return;
    }
    const char *dot = strrchr(base, '.'), *slash = strrchr(base, '/');
    if (dot && (!slash || dot > slash))
        snprintf(out, n, "%.*s-%d%s", (int)(dot - base), base, i + 1, dot);
    else
        snprintf(out, n, "%s-%d", base, i + 1);
}

/* The top k, grouped by machine (GPU x GPUs per replica), each group one audit spec. */
static int write_specs(st_plan_result *r, const char *spec_text, size_t spec_len, const char *file, int k,
                       char paths[][4200], char *err, size_t errlen)
{
    int *idx = malloc(sizeof *idx * (size_t)(r->n > 0 ? r->n : 1));
    const st_plan_candidate **grp = malloc(sizeof *grp * (size_t)(k > 0 ? k : 1));
    int rc = -1, nspec = 0, m = idx ? st_plan_order(r->c, r->n, idx, k) : 0;
    st_buf b;
    st_buf_init(&b, PLAN_OUT_MAX);
    if (!idx || !grp) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    int used[ST_PLAN_REPORT_ROWS * 8] = { 0 };
    for (int i = 0; i < m && nspec < PLAN_SPECS_MAX; i++) {
        if (used[i])
            continue;
        int ng = 0;
        for (int j = i; j < m; j++) {
            const st_plan_candidate *a = &r->c[idx[i]], *c = &r->c[idx[j]];
            if (!used[j] && !strcmp(a->gpu, c->gpu) && a->tp == c->tp) {
                grp[ng++] = c;
                used[j] = 1;
            }
        }
        char header[1024];
        snprintf(header, sizeof header,
                 "# Written by servetune plan from %s: the plan's candidates on %s x%d, best first (the first is the\n"
                 "# audit's baseline). Every figure in the reasons below is a PREDICTION of the engine model; this\n"
                 "# audit measures them. Run: servetune audit THIS_FILE -o DIR (on that hardware).\n",
                 r->spec_path, grp[0]->gpu, grp[0]->tp);
        st_buf_reset(&b);
        if (st_plan_spec_write(r->spec_path, spec_text, spec_len, grp, ng, header, &b, err, errlen))
            goto out;
        spec_path(file, nspec, paths[nspec], sizeof paths[nspec]);
        if (st_mkdir_parents(paths[nspec], err, errlen) ||
            st_write_file_atomic(paths[nspec], b.data, b.len, err, errlen))
            goto out;
        r->written[nspec] = paths[nspec];
        nspec++;
    }
    rc = 0;
out:
    st_buf_free(&b);
    free(idx);
    free(grp);
    return rc;
}

/* The traffic day of candidate c (ok stays 0 when it has no capacity). */
static void day_of(const st_plan_result *r, const st_plan_candidate *c, const st_prices *p, st_day_cost *d, int *ok,
                   double *sls, const char **from)
{
    *ok = 0;
    if (!r->spec->traffic.set || c->state != ST_PLAN_OK)
        return;
    st_day_setup u = { .capacity_rps = c->capacity_rps,
                       .gpus_per_replica = c->tp,
                       .price_per_gpu_hour = c->price_per_gpu_hour,
                       .gpu_key = c->gpu,
                       .ttft_ms = c->ttft_p95_ms,
                       .tpot_ms = c->tpot_p95_ms };
    st_day_serverless sl;
    char err[200];
    if (st_day_of_spec(r->spec, p, &u, d, &sl, err, sizeof err) == 0) {
        *ok = 1;
        *sls = sl.price_per_gpu_s;
        *from = sl.from;
    }
}

/* DIR/deploy.md and DIR/deploy-k8s.yaml for the plan's pick (report/deploy.h), from the audit spec
 * that would measure it, sized at its replicas at the stated peak. */
static int write_deploy(const st_plan_result *r, const char *text, size_t len, const char *dir, char *err,
                        size_t errlen)
{
    if (r->best < 0)
        return 0;
    const st_plan_candidate *w = &r->c[r->best];
    const st_plan_candidate *one[] = { w };
    st_buf b;
    st_buf_init(&b, PLAN_OUT_MAX);
    st_spec s;
    int have = 0, rc = -1;
    if (st_plan_spec_write(r->spec_path, text, len, one, 1, NULL, &b, err, errlen) ||
        st_spec_parse(r->spec_path, b.data, b.len, &s, err, errlen))
        goto out;
    have = 1;
    st_cost_in in = { .capacity_rps = w->capacity_rps,
                      .output_tps = w->output_tps,
                      .price_per_gpu_hour = w->price_per_gpu_hour,
                      .gpus_per_replica = w->tp,
                      .peak_rps = r->spec->peak_rate };
    st_cost k;
    (void)st_cost_compute(&in, &k);
    st_deploy_opts o = { .replicas = k.replicas };
    char path[4200];
    st_buf_reset(&b);
    st_buf_printf(&b,
                  "# Deploying the plan's pick\n\n%s x%d, as `servetune plan` predicted it (measure it with the audit "
                  "spec first). Sized for the stated peak: %ld replica%s.\n\n",
                  w->gpu, w->tp, k.replicas, k.replicas == 1 ? "" : "s");
    if (st_deploy_markdown(&s, &s.configs[0], &o, &b))
        goto out;
    snprintf(path, sizeof path, "%s/deploy.md", dir);
    if (st_write_file_atomic(path, b.data, b.len, err, errlen))
        goto out;
    st_buf_reset(&b);
    if (st_deploy_k8s(&s, &s.configs[0], &o, &b))
        goto out;
    snprintf(path, sizeof path, "%s/deploy-k8s.yaml", dir);
    if (st_write_file_atomic(path, b.data, b.len, err, errlen))
        goto out;
    rc = 0;
out:
    if (rc && !err[0])
        snprintf(err, errlen, "deploy snippets: too large");
    if (have)
        st_spec_free(&s);
    st_buf_free(&b);
    return rc;
}

static int write_outputs(const st_plan_result *r, const char *dir, char *err, size_t errlen)
{
    char path[4200];
    st_buf b;
    st_buf_init(&b, PLAN_OUT_MAX);
    int rc = -1;
    if (st_mkdir_p(dir, err, errlen))
        goto out;
    if (st_plan_report_markdown(r, &b)) {
        snprintf(err, errlen, "plan.md: too large");
        goto out;
    }
    snprintf(path, sizeof path, "%s/plan.md", dir);
    if (st_write_file_atomic(path, b.data, b.len, err, errlen))
        goto out;
    st_buf_reset(&b);
    if (st_plan_report_json(r, &b)) {
        snprintf(err, errlen, "plan.json: too large");
        goto out;
    }
    snprintf(path, sizeof path, "%s/plan.json", dir);
    if (st_write_file_atomic(path, b.data, b.len, err, errlen))
        goto out;
    rc = 0;
out:
    st_buf_free(&b);
    return rc;
}

/* Speculation on the top k picks (docs/plan.md "Speculative decoding"): whether it pays, where it
 * stops paying; a plain pick's figures are its speculative twin's (the same candidate with the
 * cheapest speculation variant), at the pick's own batch. */
static void spec_assess(st_plan_result *r, st_plan_model *m, int k)
{
    r->spec_variants = st_plan_spec_variants(r->spec, r->spec_why, sizeof r->spec_why);
    int idx[64], n = st_plan_order(r->c, r->n, idx, k < 64 ? k : 64);
    r->spec_picks = n;
    char why[ST_PLAN_WHY_MAX];
    for (int i = 0; i < n && r->spec_variants; i++) {
        st_plan_candidate *c = &r->c[idx[i]];
        if (c->spec) {
            (void)st_plan_model_spec_pay(m, c, c, &c->pay, why, sizeof why);
            continue;
        }
        int best = -1;
        for (int j = 0; j < r->n; j++) {
            const st_plan_candidate *t = &r->c[j];
            if (!t->spec || strcmp(t->gpu, c->gpu) || t->tp != c->tp || strcmp(t->model, c->model) ||
                strcmp(t->kv_dtype, c->kv_dtype) || t->max_num_seqs != c->max_num_seqs ||
                t->max_batched != c->max_batched || t->max_model_len != c->max_model_len)
                continue;
            if (best < 0 ||
                (t->state == ST_PLAN_OK && (r->c[best].state != ST_PLAN_OK || t->usd_per_1m < r->c[best].usd_per_1m)))
                best = j;
        }
        c->spec_twin = best;
        if (best >= 0)
            (void)st_plan_model_spec_pay(m, &r->c[best], c, &c->pay, why, sizeof why);
    }
}

/* The progress line: on a terminal rewritten in place, at most PLAN_PROGRESS_S apart; else (with
 * --progress) one line each time. */
#define PLAN_PROGRESS_S 0.5
typedef struct progress_state {
    int n, tty, shown;
    double last;
} progress_state;

static void show_progress(void *arg, const st_plan_progress *p)
{
    progress_state *ps = arg;
    if (ps->shown && p->seconds - ps->last < PLAN_PROGRESS_S && p->left > 0)
        return;
    ps->last = p->seconds;
    ps->shown = 1;
    /* the ETA: the candidates left at the pace of those settled so far (refined ones count half) */
    double work = p->done + 0.5 * p->refined;
    double eta = work > 0 && p->left > 0 ? p->seconds / work * p->left : 0;
    fprintf(stderr, "%splan: %d candidates: %d settled, %d pruned, %d left (%.1f s%s", ps->tty ? "\r" : "", ps->n,
            p->done, p->pruned, p->left, p->seconds, p->left > 0 && work > 0 ? ", ETA " : "");
    if (p->left > 0 && work > 0)
        fprintf(stderr, "%.0f s", eta);
    fprintf(stderr, ")%s", ps->tty ? "   " : "\n");
}

/* plan --disagg's options. */
typedef struct disagg_opts {
    const char *connector;
    long gpus;
    double s_p, s_d;
} disagg_opts;

/* The static figures of the picked xPyD (AIConfigurator's rate matching, no queueing) into j. */
static void disagg_static_json(const st_plan_candidate *w, const st_disagg_worker *wr, const st_disagg_pick *pk,
                               const st_disagg_link *l, long gpus, double agg_rps, const disagg_opts *o, double out_tok,
                               json_t *j)
{
    json_object_set_new(j, "measured", json_false());
    json_object_set_new(j, "gpu", json_string(w->gpu));
    json_object_set_new(j, "gpus_per_replica", json_integer(w->tp));
    json_object_set_new(j, "weights", json_string(w->weights));
    json_object_set_new(j, "kv_cache_dtype", json_string(w->kv_dtype));
    json_object_set_new(j, "gpus", json_integer(gpus));
    json_object_set_new(j, "connector", json_string(l->name));
    json_object_set_new(j, "x", json_integer(pk->x));
    json_object_set_new(j, "y", json_integer(pk->y));
    json_object_set_new(j, "aggregated_rps", json_real(agg_rps));
    if (w->spec) { /* its decode workers verify drafts (st_disagg_worker_rates) */
        json_t *sp = json_object();
        json_object_set_new(sp, "method", json_string(w->spec->method));
        json_object_set_new(sp, "k", json_integer(w->spec_k));
        json_object_set_new(j, "decode_speculation", sp);
    }
    json_t *st = json_object();
    json_object_set_new(j, "static", st);
    json_object_set_new(st, "what", json_string("AIConfigurator's rate matching: min(x P s_p, y D s_d), no queueing"));
    json_object_set_new(st, "prefill_worker_rps", json_real(wr->prefill_rps));
    json_object_set_new(st, "decode_worker_rps", json_real(wr->decode_rps));
    json_object_set_new(st, "prefill_scale", json_real(o->s_p));
    json_object_set_new(st, "decode_scale", json_real(o->s_d));
    json_object_set_new(st, "rate_matched_rps",
                        json_real(st_disagg_rate_match(wr->prefill_rps, pk->x, o->s_p, wr->decode_rps, pk->y, o->s_d)));
    json_object_set_new(st, "rps", json_real(pk->rps));
    json_object_set_new(st, "rps_per_gpu", json_real(pk->rps_per_gpu));
    json_object_set_new(st, "ttft_ms", json_real(pk->ttft_s * 1e3));
    json_object_set_new(st, "tpot_ms", json_real(pk->tpot_s * 1e3));
    json_object_set_new(st, "transfer_ms", json_real(pk->transfer_s * 1e3));
    json_object_set_new(st, "link_need_gbps", json_real(pk->link_need_bps / 1e9));
    json_object_set_new(st, "link_limited", json_boolean(pk->link_limited));
    if (w->price_per_gpu_hour > 0 && pk->rps > 0 && out_tok > 0)
        json_object_set_new(st, "usd_per_1m_output_tokens",
                            json_real(w->price_per_gpu_hour * (double)gpus / (pk->rps * out_tok * 3600) * 1e6));
}

/* One two-pool run as a line of disagg.md. */
static void disagg_run_line(st_buf *b, const char *what, const st_disagg_sim *q, const char *end)
{
    st_buf_printf(
        b,
        "- %s: %.2f requests/s, p95 TTFT %.0f ms (p50 %.0f; the prefill pool's p95 %.0f ms with its "
        "queue, the KV transfer's p95 %.2f ms), p95 TPOT %.1f ms (p50 %.1f), %u of %u requests answered%s%s\n",
        what, q->rate, q->ttft_p95_s * 1e3, q->ttft_p50_s * 1e3, q->prefill_p95_s * 1e3, q->transfer_p95_s * 1e3,
        q->tpot_p95_s * 1e3, q->tpot_p50_s * 1e3, q->answered, q->n,
        q->meets     ? ", within the SLO"
        : q->growing ? ", not within the SLO (a growing queue)"
                     : ", not within the SLO",
        end);
}

/* The queueing runs' requests: PLAN_DISAGG_REQUESTS of s's workload (w, freed by the caller with
 * the items). NULL with err. */
static st_emu_sim_item *disagg_items(const st_spec *s, st_workload *w, char *err, size_t errlen)
{
    if (st_sweep_workload(s, s->workload.seed, PLAN_DISAGG_REQUESTS, w, err, errlen))
        return NULL;
    st_emu_sim_item *items = calloc(w->n ? w->n : 1, sizeof *items);
    if (!items) {
        st_workload_free(w);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    st_emu_sim_items_from_workload(w, NULL, items);
    return items;
}

/* With queueing: the picked xPyD as two pools on the engine model (plan/disagg_sim.h), run at
 * the lower of the aggregated and static figures, and its sustained capacity at the SLO
 * (st_disagg_sim_capacity, searched from the static figure). Into b and j's "queueing" (a run
 * that fails is said in both); -1 with err only when the workload cannot be built. */
static int disagg_queueing(const st_spec *s, const st_emu_config *cfg, const st_disagg_pick *pk, int tp,
                           const st_disagg_link *l, const st_disagg_work *wk, double agg_rps, double price, st_buf *b,
                           json_t *j, char *err, size_t errlen)
{
    st_workload qw;
    st_emu_sim_item *items = disagg_items(s, &qw, err, errlen);
    if (!items)
        return -1;
    json_t *q = json_object();
    json_object_set_new(j, "queueing", q);
    json_object_set_new(q, "what",
                        json_string("both pools run on the engine model with Poisson arrivals "
                                    "(st_disagg_sim_capacity): the highest rate whose p95 TTFT and TPOT "
                                    "meet the SLO with no growing queue"));
    json_object_set_new(q, "requests", json_integer(qw.n));
    json_object_set_new(q, "tolerance", json_real(PLAN_DISAGG_TOLERANCE));
    json_object_set_new(q, "start_rps", json_real(pk->rps));
    st_buf_printf(b,
                  "## With queueing (both pools on the engine model)\n\n"
                  "The same %dP%dD run on the engine model in virtual time: Poisson arrivals (%u requests, more when "
                  "the spec's min_window at the rate takes more) at %d prefill engine%s behind a least-loaded router, "
                  "each prefilling a prompt and answering its first token; the KV cache over the prefill engine's "
                  "link, one transfer after another; %d decode engine%s behind a least-loaded router, each request "
                  "arriving with its prompt's KV cache. TTFT runs from the arrival to the decode engine's first "
                  "token, TPOT is each request's. **Which figure is which**: the rate-matched requests/s above is "
                  "static (AIConfigurator's arithmetic: no queue, one prefill at a time); the capacity here is the "
                  "queueing one, the highest rate whose p95s meet the SLO with no growing queue in this run (within "
                  "%.0f %%, searched from the static figure).\n\n",
                  pk->x, pk->y, qw.n, pk->x, pk->x == 1 ? "" : "s", pk->y, pk->y == 1 ? "" : "s",
                  PLAN_DISAGG_TOLERANCE * 100);
    char why[512] = "";
    st_disagg_sim qa, qc;
    double at = agg_rps < pk->rps ? agg_rps : pk->rps;
    uint64_t seed = s->workload.seed;
    if (st_disagg_simulate(cfg, items, qw.n, pk->x, pk->y, tp, l, wk, at, seed, &qa, why, sizeof why) == 0) {
        disagg_run_line(b, at == agg_rps ? "at the aggregated setup's capacity" : "at the static rate-matched figure",
                        &qa, ";");
        json_object_set_new(q, "at", st_disagg_sim_json(&qa));
    }
    if (st_disagg_sim_capacity(cfg, items, qw.n, pk->x, pk->y, tp, l, wk, pk->rps, seed, PLAN_DISAGG_TOLERANCE, &qc,
                               why, sizeof why)) {
        json_object_set_new(q, "error", json_string(why));
        st_buf_printf(b, "- not estimated: %s.\n\n", why);
    } else {
        json_object_set_new(q, "capacity_rps", json_real(qc.rate));
        json_object_set_new(q, "capacity_per_gpu", json_real(qc.rate / (double)((pk->x + pk->y) * tp)));
        if (qc.rate > 0) {
            json_object_set_new(q, "capacity", st_disagg_sim_json(&qc));
            if (price > 0 && wk->output_tokens > 0)
                json_object_set_new(q, "usd_per_1m_output_tokens",
                                    json_real(price / (qc.rate * wk->output_tokens * 3600) * 1e6));
            disagg_run_line(b, "**the highest rate within the SLO** (the queueing capacity)", &qc, ":");
            st_buf_printf(b, "  %.3f requests/s a GPU, $%.4f per 1M output tokens.\n\n",
                          qc.rate / (double)((pk->x + pk->y) * tp),
                          price / (qc.rate * (wk->output_tokens > 0 ? wk->output_tokens : 1) * 3600) * 1e6);
        } else
            st_buf_printf(b, "- no rate meets the SLO with queueing.\n\n");
    }
    free(items);
    st_workload_free(&qw);
    return 0;
}

/* One candidate priced disaggregated: it alone as a spec (st_plan_spec_write), its engine-model
 * configuration and memory, the workload and SLO, the connector and the GPUs. */
typedef struct disagg_cand {
    st_spec s;
    int have;
    st_emu_config cfg;
    st_emu_memory mem;
    st_disagg_work wk;
    st_disagg_link l;
    long gpus;
} disagg_cand;

static void disagg_cand_free(disagg_cand *d)
{
    if (d->have)
        st_spec_free(&d->s);
    d->have = 0;
}

/* d for candidate w. 0, or -1 with err (d freed by disagg_cand_free either way). */
static int disagg_cand_of(const st_plan_result *r, const char *text, size_t len, const st_plan_candidate *w,
                          const disagg_opts *o, disagg_cand *d, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    const char *conn = o->connector ? o->connector : st_disagg_link_default(w->gpu);
    if (st_disagg_link_find(conn, &d->l)) {
        snprintf(err, errlen, "--connector %s: not one of %s", conn, st_disagg_link_names());
        return -1;
    }
    d->gpus = o->gpus > 0 ? o->gpus : 8 * w->tp;
    const st_plan_candidate *one[] = { w };
    st_buf sb;
    st_buf_init(&sb, PLAN_OUT_MAX);
    int rc = -1;
    if (st_plan_spec_write(r->spec_path, text, len, one, 1, NULL, &sb, err, errlen) ||
        st_spec_parse(r->spec_path, sb.data, sb.len, &d->s, err, errlen))
        goto out;
    d->have = 1;
    if (st_exec_model_config(&d->s, &d->s.configs[0], &d->cfg, NULL, 0, NULL, err, errlen) ||
        st_emu_memory_plan(&d->cfg, &d->mem, err, errlen))
        goto out;
    st_disagg_work_of_spec(&d->s, &d->wk);
    rc = 0;
out:
    st_buf_free(&sb);
    return rc;
}

/* Disaggregated prefill/decode for the plan's pick: its GPU, weights, KV dtype and limits as
 * prefill and decode workers of its GPUs per replica, the best xPyD at `gpus` GPUs by
 * AIConfigurator's rate matching (static, no queueing), against the pick aggregated on as many
 * GPUs, then that xPyD with queueing in both pools (disagg_queueing). Into b (markdown) and j
 * (disagg.json); 0, or -1 with err. */
static int disagg_section(const st_plan_result *r, const char *text, size_t len, const disagg_opts *o, st_buf *b,
                          json_t *j, char *err, size_t errlen)
{
    const st_plan_candidate *w = &r->c[r->best];
    disagg_cand d;
    int rc = -1;
    if (disagg_cand_of(r, text, len, w, o, &d, err, errlen))
        goto out;
    const st_disagg_link l = d.l;
    const st_emu_config *cfg = &d.cfg;
    const st_disagg_work wk = d.wk;
    long gpus = d.gpus;
    st_disagg_worker wr;
    char why[300] = "";
    st_buf_printf(b,
                  "# Disaggregated prefill/decode for the plan's pick\n\n%s x%d, %s weights, KV cache %s, as "
                  "prefill and decode workers of %d GPU%s each, %ld GPUs in all, the KV cache sent over %s "
                  "(%.0f GB/s a GPU, %.0f us a transfer; %s). **A prediction: no disaggregated setup was "
                  "measured**. Two figures: the static one below is AIConfigurator's arithmetic (no queueing: TTFT "
                  "and TPOT are one request's, not p95s under load); the queueing one after it runs both pools on "
                  "the engine model (p95s under load, the capacity at the SLO).\n\n",
                  w->gpu, w->tp, w->weights, w->kv_dtype, w->tp, w->tp == 1 ? "" : "s", gpus, l.name,
                  l.bytes_per_s / 1e9, l.latency_s * 1e6, l.source);
    if (w->spec)
        st_buf_printf(b,
                      "The pick speculates (%s, k %d): its decode workers verify each sequence's draft, and their "
                      "rate and TPOT count the tokens a step emits (docs/speculative.md); its prefill workers draft "
                      "nothing.\n\n",
                      w->spec->method, w->spec_k);
    if (st_disagg_worker_rates(cfg, &d.mem, &wk, &wr, why, sizeof why)) {
        st_buf_printf(b, "No disaggregated setup serves within the SLO: %s.\n", why);
        rc = 0;
        goto out;
    }
    st_disagg_pick pk;
    double agg_rps = w->capacity_rps * (double)(gpus / w->tp);
    st_buf_printf(b,
                  "- a prefill worker: one request's prefill takes %.1f ms: %.2f requests/s;\n"
                  "- a decode worker: batch %.0f at %.1f ms a step: %.2f requests/s;\n"
                  "- KV per request: %.1f MB (%.0f prompt tokens x %.0f KB a token).\n\n",
                  wr.prefill_s * 1e3, wr.prefill_rps, wr.decode_batch, wr.decode_step_s * 1e3, wr.decode_rps,
                  wr.kv_bytes / 1e6, wk.input_tokens, wr.kv_bytes / wk.input_tokens / 1e3);
    if (st_disagg_best(&wr, w->tp, (int)gpus, o->s_p, o->s_d, &l, &pk)) {
        st_buf_printf(b, "No xPyD of %ld GPUs serves (it takes two workers at least).\n", gpus);
        rc = 0;
        goto out;
    }
    double price = w->price_per_gpu_hour * (double)gpus;
    double out_tok = d.s.workload.output_tokens;
    st_buf_printf(
        b,
        "| setup | GPUs | requests/s | per GPU | $ per 1M output tokens | TTFT | TPOT "
        "|\n|---|---|---|---|---|---|---|\n"
        "| %dP%dD, static (rate matched: min(%d x %.2f x %.2f, %d x %.2f x %.2f)) | %ld | %.2f | %.3f | %.4f | %.0f ms "
        "(static) | %.1f ms (static) |\n"
        "| aggregated, %ld replicas (the plan's sustained search) | %ld | %.2f | %.3f | %.4f | %.0f ms (p95) | "
        "%.1f ms (p95) |\n\n",
        pk.x, pk.y, pk.x, wr.prefill_rps, o->s_p, pk.y, wr.decode_rps, o->s_d, gpus, pk.rps, pk.rps_per_gpu,
        price / (pk.rps * out_tok * 3600) * 1e6, pk.ttft_s * 1e3, pk.tpot_s * 1e3, gpus / w->tp, gpus, agg_rps,
        agg_rps / (double)gpus, price / (agg_rps * out_tok * 3600) * 1e6, w->ttft_p95_ms, w->tpot_p95_ms);
    if (pk.link_limited)
        st_buf_printf(b,
                      "**The KV transfer cannot keep up**: each prefill worker would send %.1f GB/s over %s, which "
                      "carries %.1f GB/s for %d GPU%s; the rate above is what the link carries. A faster connector "
                      "(--connector) or fewer requests a prefill worker would lift it.\n\n",
                      pk.link_need_bps / 1e9, l.name, l.bytes_per_s * w->tp / 1e9, w->tp, w->tp == 1 ? "" : "s");
    else
        st_buf_printf(b,
                      "Each prefill worker sends %.2f GB/s of KV (its links carry %.0f GB/s); a request's transfer "
                      "takes %.2f ms.\n\n",
                      pk.link_need_bps / 1e9, l.bytes_per_s * w->tp / 1e9, pk.transfer_s * 1e3);
    disagg_static_json(w, &wr, &pk, &l, gpus, agg_rps, o, out_tok, j);
    if (disagg_queueing(&d.s, cfg, &pk, w->tp, &l, &wk, agg_rps, price, b, j, err, errlen))
        goto out;
    st_buf_printf(b,
                  "## Deploying it (vLLM, not measured)\n\n```sh\n# %d prefill worker%s:\nvllm serve %s "
                  "--tensor-parallel-size %d --kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":"
                  "\"kv_producer\"}'\n# %d decode worker%s:\nvllm serve %s --tensor-parallel-size %d "
                  "--kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_consumer\"}'\n```\n\n"
                  "A router sends each request to a prefill worker first and its decode to a decode worker (vLLM's "
                  "disaggregated prefill example proxy, llm-d or Dynamo). Disaggregation does not raise throughput "
                  "by itself (vLLM's docs say so); it separates TTFT from TPOT. Measure it before relying on it.\n",
                  pk.x, pk.x == 1 ? "" : "s", w->model, w->tp, pk.y, pk.y == 1 ? "" : "s", w->model, w->tp);
    rc = 0;
out:
    disagg_cand_free(&d);
    return rc;
}

/* A top candidate after the pick as its own best xPyD at its GPUs: the static figure and that
 * xPyD's queueing capacity (st_disagg_sim_capacity, searched from the static figure), a row of b
 * and an object of arr. */
static void disagg_other(const st_plan_result *r, const char *text, size_t len, const st_plan_candidate *c,
                         const disagg_opts *o, st_buf *b, json_t *arr)
{
    char err[512] = "", name[300];
    snprintf(name, sizeof name, "%s x%d, %s weights, KV %s", c->gpu, c->tp, c->weights, c->kv_dtype);
    if (c->max_num_seqs > 0 || c->max_batched > 0)
        snprintf(name + strlen(name), sizeof name - strlen(name), ", seqs %ld, batched tokens %ld", c->max_num_seqs,
                 c->max_batched);
    json_t *e = json_object();
    json_array_append_new(arr, e);
    json_object_set_new(e, "candidate", json_string(name));
    disagg_cand d;
    st_disagg_worker wr;
    st_disagg_pick pk;
    st_workload qw;
    st_emu_sim_item *items = NULL;
    st_disagg_sim q;
    if (disagg_cand_of(r, text, len, c, o, &d, err, sizeof err) ||
        st_disagg_worker_rates(&d.cfg, &d.mem, &d.wk, &wr, err, sizeof err))
        goto fail;
    if (st_disagg_best(&wr, c->tp, (int)d.gpus, o->s_p, o->s_d, &d.l, &pk)) {
        snprintf(err, sizeof err, "no xPyD of %ld GPUs serves", d.gpus);
        goto fail;
    }
    double agg = c->capacity_rps * (double)(d.gpus / c->tp);
    json_object_set_new(e, "gpus", json_integer(d.gpus));
    json_object_set_new(e, "connector", json_string(d.l.name));
    json_object_set_new(e, "x", json_integer(pk.x));
    json_object_set_new(e, "y", json_integer(pk.y));
    json_object_set_new(e, "static_rps", json_real(pk.rps));
    json_object_set_new(e, "aggregated_rps", json_real(agg));
    if (!(items = disagg_items(&d.s, &qw, err, sizeof err)))
        goto fail;
    int bad = st_disagg_sim_capacity(&d.cfg, items, qw.n, pk.x, pk.y, c->tp, &d.l, &d.wk, pk.rps, d.s.workload.seed,
                                     PLAN_DISAGG_TOLERANCE, &q, err, sizeof err);
    free(items);
    st_workload_free(&qw);
    if (bad)
        goto fail;
    json_object_set_new(e, "queueing_capacity_rps", json_real(q.rate));
    if (q.rate > 0) {
        json_object_set_new(e, "queueing_capacity", st_disagg_sim_json(&q));
        st_buf_printf(b, "| %s | %ld | %dP%dD | %.2f | %.2f | %.0f / %.1f ms | %.2f |\n", name, d.gpus, pk.x, pk.y,
                      pk.rps, q.rate, q.ttft_p95_s * 1e3, q.tpot_p95_s * 1e3, agg);
    } else
        st_buf_printf(b, "| %s | %ld | %dP%dD | %.2f | no rate meets the SLO | | %.2f |\n", name, d.gpus, pk.x, pk.y,
                      pk.rps, agg);
    disagg_cand_free(&d);
    return;
fail:
    disagg_cand_free(&d);
    json_object_set_new(e, "error", json_string(err));
    st_buf_printf(b, "| %s | | none serves: %s | | | | |\n", name, err);
}

/* The plan's next top candidates after the pick (at most k in all, --top), each as its own best
 * xPyD with both figures (disagg_other). Into b and j's "others". */
static void disagg_others(const st_plan_result *r, const char *text, size_t len, const disagg_opts *o, int k, st_buf *b,
                          json_t *j)
{
    int idx[PLAN_DISAGG_TOP_MAX];
    int m = st_plan_order(r->c, r->n, idx, k < PLAN_DISAGG_TOP_MAX ? k : PLAN_DISAGG_TOP_MAX);
    if (m < 2)
        return;
    json_t *arr = json_array();
    json_object_set_new(j, "others", arr);
    st_buf_printf(b,
                  "\n## The next top candidates, disaggregated\n\nEach of the plan's next cheapest candidates (up to "
                  "--top in all) as its own best xPyD on as many GPUs (its GPU's connector unless --connector names "
                  "one): the static rate-matched "
                  "requests/s (AIConfigurator's arithmetic, no queueing) and the queueing capacity of that xPyD "
                  "(both pools run on the engine model, as above), beside the candidate aggregated.\n\n"
                  "| candidate | GPUs | xPyD | static req/s | queueing capacity req/s | p95 TTFT / TPOT at it | "
                  "aggregated req/s |\n|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < m; i++)
        if (idx[i] != r->best)
            disagg_other(r, text, len, &r->c[idx[i]], o, b, arr);
}

/* One `plan` command: its options, the spec, prices and candidates it loads, and the result
 * (freed by plan_free). */
typedef struct plan_cmd {
    const char *out_dir, *write_spec, *prices_path, *provider, *quality_dir, *spec_acceptance;
    long top, max_cand, threads;
    int quiet, progress, disagg;
    disagg_opts dopt;
    st_opts_result res;
    st_spec spec;
    int have_spec, have_prices;
    st_prices prices;
    st_plan_candidate *cand;
    st_plan_model *model;
    char *text;
    size_t text_len;
    char err[1024];
    char paths[PLAN_SPECS_MAX][4200];
    st_plan_result r;
} plan_cmd;

/* The options of `plan` into opts (room for PLAN_OPTS_MAX). */
#define PLAN_OPTS_MAX 24
static void plan_options(plan_cmd *x, st_opt *opts)
{
    const st_opt o[] = {
        { "out", 'o', ST_OPT_STR, &x->out_dir, "DIR", "where plan.md and plan.json go (default plan-out)", 0, 0, 0 },
        { "output", 0, ST_OPT_STR, &x->out_dir, "DIR", "the same as --out (the name audit and predict use)", 0, 0, 0 },
        { "write-spec", 0, ST_OPT_STR, &x->write_spec, "FILE",
          "write the top candidates as an audit spec (one per machine: FILE, FILE-2, ...)", 0, 0, 0 },
        { "top", 0, ST_OPT_LONG, &x->top, "K", "candidates kept exactly and written (default: plan.top, 3)", 1, 64, 0 },
        { "prices", 0, ST_OPT_STR, &x->prices_path, "FILE",
          "your price list (CSV, docs/prices.md); default: plan.prices, else built in", 0, 0, 0 },
        { "provider", 0, ST_OPT_STR, &x->provider, "NAME", "whose prices (default: plan.provider, else the lowest)", 0,
          0, 0 },
        { "max-candidates", 0, ST_OPT_LONG, &x->max_cand, "N",
          "search up to N candidates (default 20000: a larger space is refused with its count)", 1, 100000000, 0 },
        { "threads", 0, ST_OPT_LONG, &x->threads, "N",
          "worker threads (default: every CPU; the result is the same on any number)", 1, 64, 0 },
        { "progress", 0, ST_OPT_FLAG, &x->progress, NULL,
          "a progress line on stderr (done / pruned / left, ETA); the default when stderr is a terminal", 0, 0, 0 },
        { "disagg", 0, ST_OPT_FLAG, &x->disagg, NULL,
          "also price the pick as disaggregated prefill/decode workers (DIR/disagg.md, DIR/disagg.json: the "
          "static rate matching, and its xPyD run with queueing in both pools on the engine model; not measured)",
          0, 0, 0 },
        { "connector", 0, ST_OPT_STR, &x->dopt.connector, "NAME",
          "the KV transfer's link for --disagg: nvlink, infiniband, pcie, ethernet (default: nvlink on a GPU with "
          "NVLink, else pcie)",
          0, 0, 0 },
        { "disagg-gpus", 0, ST_OPT_LONG, &x->dopt.gpus, "N",
          "GPUs of the disaggregated setup (default 8 x GPUs per replica)", 2, 4096, 0 },
        { "prefill-scale", 0, ST_OPT_DOUBLE, &x->dopt.s_p, "S",
          "the prefill workers' correction scale of the rate matching (default 0.9, AIConfigurator's)", 0.01, 1.0, 0 },
        { "decode-scale", 0, ST_OPT_DOUBLE, &x->dopt.s_d, "S",
          "the decode workers' correction scale (default 0.92, AIConfigurator's)", 0.01, 1.0, 0 },
        { "quality", 0, ST_OPT_STR, &x->quality_dir, "DIR",
          "an audit's folder: the drift its quality pass measured per checkpoint and KV cache replaces the format's "
          "quality risk on the cost-vs-quality frontier",
          0, 0, 0 },
        { "spec-acceptance", 0, ST_OPT_STR, &x->spec_acceptance, "A|A1/A2/..",
          "the acceptance of speculative decoding for every method of plan.speculation (per draft token, or by "
          "position), in place of the spec's: the plan then tries each method and k at that rate",
          0, 0, 0 },
        { "quiet", 'q', ST_OPT_FLAG, &x->quiet, NULL, "print only where the outputs went", 0, 0, 0 },
        { 0 },
    };
    _Static_assert(sizeof o / sizeof o[0] <= PLAN_OPTS_MAX, "plan's options fit");
    memcpy(opts, o, sizeof o);
}

/* The spec read, checked and fit for the search (no multi-turn sessions). 0, or the exit
 * status. */
static int plan_spec(plan_cmd *x, const char *spec_file)
{
    if (!(x->text = st_read_file(spec_file, ST_SPEC_MAX_BYTES, &x->text_len, x->err, sizeof x->err)) ||
        st_spec_parse(spec_file, x->text, x->text_len, &x->spec, x->err, sizeof x->err)) {
        fprintf(stderr, "%s\n", x->err);
        return ST_EXIT_USAGE;
    }
    x->have_spec = 1;
    if (st_spec_check(&x->spec, x->err, sizeof x->err) || st_audit_resolve_peak(&x->spec, x->err, sizeof x->err) ||
        st_audit_resolve_day(&x->spec, x->err, sizeof x->err) ||
        !st_exec_model_supported(&x->spec, x->err, sizeof x->err)) {
        fprintf(stderr, "%s\n", x->err);
        return ST_EXIT_USAGE;
    }
    if (x->spec.workload.sessions.on) {
        fprintf(stderr,
                "%s: servetune plan does not search with multi-turn sessions (workload.sessions): its bounds run the "
                "engine model closed loop, which a session's turns or an agent trace's tasks (each request waiting "
                "for the answers before it) do not fit. Plan a copy with `sessions: flat` (a trace) or without the "
                "sessions block, then audit or predict the candidates with sessions\n",
                spec_file);
        return ST_EXIT_USAGE;
    }
    return ST_EXIT_OK;
}

/* --spec-acceptance: the acceptance of every method of plan.speculation (and the spec's
 * speculation block), in place of what the spec gives, a trace replay included; each keeps its
 * draft share. 0, or the exit status. */
static int plan_spec_acceptance(plan_cmd *x)
{
    if (!x->spec_acceptance)
        return ST_EXIT_OK;
    st_spec_accept a;
    char why[300];
    if (st_spec_accept_parse(x->spec_acceptance, &a, why, sizeof why)) {
        fprintf(stderr, "servetune plan: --spec-acceptance: %s\n", why);
        return ST_EXIT_USAGE;
    }
    st_spec *s = &x->spec;
    if (!s->plan.n_spec) {
        fprintf(stderr,
                "servetune plan: --spec-acceptance: the spec's plan.speculation names no method to try at that rate "
                "(e.g. plan: {speculation: [{method: ngram, k: [2, 4]}]}; docs/plan.md, \"Speculative decoding\")\n");
        return ST_EXIT_USAGE;
    }
    for (int i = 0; i < s->plan.n_spec; i++) {
        st_plan_specm *m = &s->plan.spec[i];
        double share = m->acc.given ? m->acc.draft_share : s->speculation.given ? s->speculation.draft_share : -1;
        for (int q = 0; q < m->n_k; q++)
            if (a.n_pos > (uint32_t)m->k[q]) {
                fprintf(stderr, "servetune plan: --spec-acceptance: %u positions for %s's %d draft tokens\n", a.n_pos,
                        m->method, m->k[q]);
                return ST_EXIT_USAGE;
            }
        m->acc = a;
        m->acc.draft_share = share;
        m->acc_trace = 0;
    }
    double share = s->speculation.given ? s->speculation.draft_share : -1;
    s->speculation = a;
    s->speculation.draft_share = share;
    return ST_EXIT_OK;
}

/* The price list: --prices, plan.prices, else the built-in one. 0, or the exit status. */
static int plan_prices(plan_cmd *x)
{
    const char *pp = x->prices_path ? x->prices_path : x->spec.plan.prices;
    if (pp) {
        size_t plen;
        char *ptext = st_read_file(pp, ST_PRICES_MAX_BYTES, &plen, x->err, sizeof x->err);
        if (!ptext || st_prices_parse(pp, ptext, plen, &x->prices, x->err, sizeof x->err)) {
            free(ptext);
            fprintf(stderr, "servetune plan: %s\n", x->err);
            return ST_EXIT_USAGE;
        }
        free(ptext);
    } else if (st_prices_builtin(&x->prices, x->err, sizeof x->err)) {
        fprintf(stderr, "servetune plan: %s\n", x->err);
        return ST_EXIT_USAGE;
    }
    x->have_prices = 1;
    return ST_EXIT_OK;
}

/* The candidates enumerated at the context limit (automatic or plan.max_model_len), with the
 * quality --quality measured. 0, or the exit status. */
static int plan_candidates(plan_cmd *x, const char *spec_file)
{
    st_plan_result *r = &x->r;
    const char *prov = x->provider ? x->provider : x->spec.plan.provider;
    *r = (st_plan_result){ .spec = &x->spec, .spec_path = spec_file, .prices = &x->prices, .provider = prov };
    if (workload_inputs(&x->spec, &r->len_auto, &r->len_reject_share, x->err, sizeof x->err)) {
        fprintf(stderr, "servetune plan: %s\n", x->err);
        return ST_EXIT_USAGE;
    }
    if (st_plan_enumerate_max(&x->spec, &x->prices, prov, r->len_auto, x->max_cand, &x->cand, &r->n, x->err,
                              sizeof x->err)) {
        fprintf(stderr, "servetune plan: %s\n", x->err);
        return ST_EXIT_USAGE;
    }
    r->c = x->cand;
    if (x->quality_dir) {
        st_plan_qmeasure *qm = NULL;
        st_spec qspec;
        memset(&qspec, 0, sizeof qspec);
        int nq = load_quality(x->quality_dir, &qspec, &qm, x->err, sizeof x->err);
        if (nq < 0) {
            fprintf(stderr, "servetune plan: --quality: %s\n", x->err);
            st_spec_free(&qspec);
            return ST_EXIT_USAGE;
        }
        int given = st_plan_quality_apply(x->cand, r->n, qm, nq);
        if (!x->quiet)
            fprintf(stderr,
                    "servetune plan: %d measured checkpoint and KV cache pairs from %s, for %d of %d candidates\n", nq,
                    x->quality_dir, given, r->n);
        free(qm);
        st_spec_free(&qspec); /* the candidates keep their own strings */
    }
    return ST_EXIT_OK;
}

/* The current setup, the same way as the candidates (never pruned). */
static void plan_baseline(plan_cmd *x, const st_plan_ops *ops)
{
    st_plan_baseline(&x->spec, &x->r.baseline);
    st_plan_candidate *b = &x->r.baseline;
    b->capacity_rps = b->output_tps = b->ttft_p95_ms = b->tpot_p95_ms = b->usd_per_1m = NAN;
    if (ops->screen(ops->arg, b, b->why, sizeof b->why)) {
        b->state = ST_PLAN_REFUSED;
    } else if (ops->evaluate(ops->arg, b, b->why, sizeof b->why)) {
        b->state = ST_PLAN_REFUSED;
    } else if (b->capacity_rps > 0 && b->output_tps > 0) {
        b->state = ST_PLAN_OK;
        b->usd_per_1m = b->price_per_gpu_hour * b->tp / (b->output_tps * 3600.0) * 1e6;
        x->r.baseline_ok = 1;
    } else {
        b->state = ST_PLAN_NONE_PASSED;
    }
}

/* The search over the candidates on the engine model, keeping the k best, then the current
 * setup. 0, or the exit status (interrupted: nothing written). */
static int plan_search(plan_cmd *x, const char *spec_file, int k)
{
    st_plan_result *r = &x->r;
    const st_spec *spec = &x->spec;
    if (st_plan_model_new(spec_file, x->text, x->text_len, spec,
                          spec->search.tolerance > 0 ? spec->search.tolerance : 0.05, &x->model, x->err,
                          sizeof x->err)) {
        fprintf(stderr, "servetune plan: %s\n", x->err);
        return ST_EXIT_USAGE;
    }
    volatile sig_atomic_t *stop = st_cli_catch_signals(NULL);
    st_plan_model_set_stop(x->model, stop);
    st_plan_ops ops;
    st_plan_model_ops(x->model, &ops);
    if (!x->quiet)
        fprintf(stderr, "servetune plan: %d candidates on the engine model (%s)...\n", r->n, x->prices.origin);
    st_ns t0 = st_now();
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    /* the bound's tokens per request: the most a request can have (a candidate is priced on what
     * its runs delivered, at most that), so the bound stays below every candidate's cost */
    double out_max =
        spec->workload.output_tokens > 0 ? spec->workload.output_tokens * (1 + spec->workload.range_ratio) : 1;
    progress_state ps = { .n = r->n, .tty = isatty(2) };
    st_plan_search_opts so = { .threads = x->threads > 0 ? (int)x->threads
                                          : cpus > 0     ? (int)cpus
                                                         : 1,
                               .batch = ST_PLAN_BATCH,
                               .progress = x->progress || (ps.tty && !x->quiet) ? show_progress : NULL,
                               .progress_arg = &ps };
    r->best = st_plan_search_opt(x->cand, r->n, k, out_max, &ops, &so, &r->stats);
    spec_assess(r, x->model, k);
    if (ps.shown)
        fprintf(stderr, ps.tty ? "\n" : "");
    plan_baseline(x, &ops);
    r->seconds = (double)(st_now() - t0) / 1e9;
    if (*stop) {
        /* the candidates' results are incomplete: nothing is written (an earlier plan in DIR stays
         * as it was) */
        fprintf(stderr, "servetune plan: interrupted by %s after %.2f s: nothing written\n", st_cli_signal_name(),
                r->seconds);
        return ST_EXIT_INTERRUPTED;
    }
    return ST_EXIT_OK;
}

/* --disagg: the pick and the next top candidates priced disaggregated into db (disagg.md) and dj
 * (disagg.json), the pick's two figures into x->r.disagg (plan.md, plan.json). 0, or -1 with
 * x->err. */
static int disagg_compute(plan_cmd *x, int k, st_buf *db, json_t *dj)
{
    if (disagg_section(&x->r, x->text, x->text_len, &x->dopt, db, dj, x->err, sizeof x->err))
        return -1;
    disagg_others(&x->r, x->text, x->text_len, &x->dopt, k, db, dj);
    json_t *st = json_object_get(dj, "static"), *q = json_object_get(dj, "queueing");
    if (!st)
        return 0; /* no xPyD serves: disagg.md says why */
    x->r.disagg.set = 1;
    x->r.disagg.x = (int)json_integer_value(json_object_get(dj, "x"));
    x->r.disagg.y = (int)json_integer_value(json_object_get(dj, "y"));
    x->r.disagg.gpus = (long)json_integer_value(json_object_get(dj, "gpus"));
    x->r.disagg.static_rps = json_number_value(json_object_get(st, "rps"));
    x->r.disagg.aggregated_rps = json_number_value(json_object_get(dj, "aggregated_rps"));
    json_t *cap = json_object_get(q, "capacity_rps");
    x->r.disagg.queueing_rps = json_is_number(cap) ? json_number_value(cap) : NAN;
    return 0;
}

/* --disagg's outputs: DIR/disagg.md (db, also on stdout without -q) and DIR/disagg.json (dj). 0,
 * or -1 with x->err. */
static int disagg_write(plan_cmd *x, const st_buf *db, json_t *dj)
{
    char dpath[4200];
    snprintf(dpath, sizeof dpath, "%s/disagg.md", x->out_dir);
    if (st_write_file_atomic(dpath, db->data, db->len, x->err, sizeof x->err))
        return -1;
    char *js = json_dumps(dj, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
    if (!js) {
        snprintf(x->err, sizeof x->err, "disagg.json: out of memory");
        return -1;
    }
    snprintf(dpath, sizeof dpath, "%s/disagg.json", x->out_dir);
    int rc = st_write_file_atomic(dpath, js, strlen(js), x->err, sizeof x->err);
    free(js);
    if (!rc && !x->quiet)
        fwrite(db->data, 1, db->len, stdout);
    return rc;
}

/* The traffic days of the pick and the current setup, then every output: the specs of the top
 * k, plan.md/plan.json, the deploy snippets, disagg.md/disagg.json, the summary. 0, or the exit status. */
static int plan_write_with(plan_cmd *x, int k, st_buf *db, json_t *dj)
{
    st_plan_result *r = &x->r;
    int disagg = x->disagg && r->best >= 0;
    if (disagg && disagg_compute(x, k, db, dj)) {
        fprintf(stderr, "servetune plan: --disagg: %s\n", x->err);
        return ST_EXIT_FAIL;
    }
    if (r->best >= 0)
        day_of(r, &x->cand[r->best], &x->prices, &r->day, &r->day_ok, &r->serverless_price_per_gpu_s,
               &r->serverless_from);
    day_of(r, &r->baseline, &x->prices, &r->day_base, &r->day_base_ok, &r->base_serverless_price_per_gpu_s,
           &r->base_serverless_from);
    if (x->write_spec && r->best >= 0 &&
        write_specs(r, x->text, x->text_len, x->write_spec, k, x->paths, x->err, sizeof x->err)) {
        fprintf(stderr, "servetune plan: %s\n", x->err);
        return ST_EXIT_FAIL;
    }
    if (write_outputs(r, x->out_dir, x->err, sizeof x->err) ||
        write_deploy(r, x->text, x->text_len, x->out_dir, x->err, sizeof x->err)) {
        fprintf(stderr, "servetune plan: %s\n", x->err);
        return ST_EXIT_FAIL;
    }
    if (disagg && disagg_write(x, db, dj)) {
        fprintf(stderr, "servetune plan: --disagg: %s\n", x->err);
        return ST_EXIT_FAIL;
    }
    if (!x->quiet) {
        st_buf md;
        st_buf_init(&md, PLAN_OUT_MAX);
        if (st_plan_report_markdown(r, &md) == 0)
            fwrite(md.data, 1, md.len, stdout);
        st_buf_free(&md);
    }
    fprintf(stderr, "servetune plan: %d candidates in %.2f s (%.0f candidates/s); %s/plan.md, %s/plan.json", r->n,
            r->seconds, r->seconds > 0 ? r->n / r->seconds : 0, x->out_dir, x->out_dir);
    for (int i = 0; i < PLAN_SPECS_MAX && r->written[i]; i++)
        fprintf(stderr, ", %s", r->written[i]);
    fprintf(stderr, "\n");
    return ST_EXIT_OK;
}

/* plan_write_with, --disagg's outputs held until DIR is written. */
static int plan_write(plan_cmd *x, int k)
{
    st_buf db;
    st_buf_init(&db, PLAN_OUT_MAX);
    json_t *dj = json_object();
    int rc = plan_write_with(x, k, &db, dj);
    st_buf_free(&db);
    json_decref(dj);
    return rc;
}

/* `plan` once its options are in x: parsed, the spec, prices and candidates loaded, searched,
 * written. The exit status. */
static int plan_run(plan_cmd *x, const st_opt *opts, int argc, char **argv)
{
    int parsed = st_cli_parse("plan", opts, argc, argv, 0, &x->res, help, x->err, sizeof x->err);
    if (parsed >= 0)
        return parsed;
    if (x->res.npos != 1)
        return st_cli_usage_error("plan", "expected one SPEC");
    st_disagg_link link_check;
    if (x->disagg && x->dopt.connector && st_disagg_link_find(x->dopt.connector, &link_check)) {
        snprintf(x->err, sizeof x->err, "--connector %s: not one of %s", x->dopt.connector, st_disagg_link_names());
        return st_cli_usage_error("plan", x->err);
    }
    const char *spec_file = x->res.pos[0];
    int rc = plan_spec(x, spec_file);
    if (rc == ST_EXIT_OK)
        rc = plan_spec_acceptance(x);
    if (rc == ST_EXIT_OK)
        rc = plan_prices(x);
    if (rc == ST_EXIT_OK)
        rc = plan_candidates(x, spec_file);
    if (rc != ST_EXIT_OK)
        return rc;
    int refused = st_cli_refuse_input_as_output("plan", "--write-spec", x->write_spec, spec_file, "the spec it reads");
    if (refused != ST_EXIT_OK)
        return refused;
    /* the output folders are made now: one that cannot be is said before the search, not after it */
    if (st_mkdir_p(x->out_dir, x->err, sizeof x->err) ||
        (x->write_spec && st_mkdir_parents(x->write_spec, x->err, sizeof x->err))) {
        fprintf(stderr, "servetune plan: cannot write the outputs: %s\n", x->err);
        return ST_EXIT_USAGE;
    }
    int k = x->top > 0 ? (int)x->top : x->spec.plan.set ? x->spec.plan.top : 3;
    rc = plan_search(x, spec_file, k);
    return rc == ST_EXIT_OK ? plan_write(x, k) : rc;
}

int cmd_plan(int argc, char **argv)
{
    plan_cmd x;
    memset(&x, 0, sizeof x);
    x.out_dir = "plan-out";
    x.dopt =
        (disagg_opts){ .connector = NULL, .gpus = 0, .s_p = ST_DISAGG_PREFILL_SCALE, .s_d = ST_DISAGG_DECODE_SCALE };
    st_opt opts[PLAN_OPTS_MAX];
    plan_options(&x, opts);
    int rc = plan_run(&x, opts, argc, argv);
    st_plan_model_free(x.model);
    free(x.cand);
    if (x.have_prices)
        st_prices_free(&x.prices);
    if (x.have_spec)
        st_spec_free(&x.spec);
    free(x.text);
    st_opts_result_free(&x.res);
    return rc;
}
