#include "report/format.h"
#include "report/plan_report.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/cost.h"
#include "plan/plan_spec.h"
#include "report/day.h"

static void slo_words(const st_spec *s, st_buf *b)
{
    for (int i = 0; i < s->slo.n; i++) {
        const st_slo_term *t = &s->slo.terms[i];
        char up[16];
        snprintf(up, sizeof up, "%s", st_slo_metric_name(t->metric));
        for (char *p = up; *p; p++)
            *p = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
        st_buf_printf(b, "%sp%g %s <= %g ms", i ? ", " : "", t->pct, up, t->max_ms);
    }
}

static st_cost cost_of(const st_plan_result *r, const st_plan_candidate *c)
{
    st_cost_in in = { .capacity_rps = c->capacity_rps,
                      .output_tps = c->output_tps,
                      .price_per_gpu_hour = c->price_per_gpu_hour,
                      .gpus_per_replica = c->tp,
                      .peak_rps = r->spec->peak_rate };
    st_cost out;
    (void)st_cost_compute(&in, &out);
    return out;
}

static void limits(const st_plan_candidate *c, st_buf *b)
{
    st_buf_printf(b, "%s x%d, %s weights, KV cache %s", c->gpu, c->tp, c->weights, c->kv_dtype);
    if (c->max_num_seqs > 0)
        st_buf_printf(b, ", --max-num-seqs %ld", c->max_num_seqs);
    if (c->max_batched > 0)
        st_buf_printf(b, ", --max-num-batched-tokens %ld", c->max_batched);
    if (c->max_model_len > 0)
        st_buf_printf(b, ", --max-model-len %ld", c->max_model_len);
    if (c->spec)
        st_buf_printf(b, ", speculating (%s, k %d)", c->spec->method, c->spec_k);
}

static void money(st_buf *b, double v)
{
    char t[32];
    st_fmt_money(t, sizeof t, v);
    st_buf_puts(b, t);
}

static void answer(const st_plan_result *r, st_buf *b)
{
    st_buf_puts(b, "## Answer\n\n");
    if (r->best < 0) {
        st_buf_printf(b, "No candidate met the SLO (");
        slo_words(r->spec, b);
        st_buf_puts(b, ") at any rate on the engine model. The reasons are below; widen the search (more GPUs per "
                       "replica, fp8 weights) or relax the SLO.\n\n");
        return;
    }
    const st_plan_candidate *w = &r->c[r->best];
    char name[128];
    st_plan_config_name(w, name, sizeof name);
    st_cost k = cost_of(r, w);
    st_buf_printf(b, "The cheapest way found to serve this workload within the SLO (");
    slo_words(r->spec, b);
    st_buf_printf(b, ") is **%s**: ", name);
    limits(w, b);
    /* the provider's name comes from a price list (perhaps the user's): escaped for Markdown */
    st_buf_printf(b, ", at $%.4g per GPU-hour (", w->price_per_gpu_hour);
    st_md_text(b, w->provider ? w->provider : "price list");
    st_buf_printf(b, "). It sustains %s%.3g requests/s (%.0f output tokens/s) at ",
                  w->capacity_capped ? "at least " : "", w->capacity_rps, w->output_tps);
    money(b, w->usd_per_1m);
    st_buf_printf(b, " per 1M output tokens; at the stated peak of %.3g requests/s that is %ld replica%s, about ",
                  r->spec->peak_rate, k.replicas, k.replicas == 1 ? "" : "s");
    money(b, k.monthly_usd);
    st_buf_puts(b, " a month.");
    if (r->baseline_ok) {
        const st_plan_candidate *c = &r->baseline;
        st_cost kb = cost_of(r, c);
        st_buf_printf(b, " The current setup (");
        limits(c, b);
        st_buf_printf(b, ", $%.4g per GPU-hour) sustains %.3g requests/s at ", c->price_per_gpu_hour, c->capacity_rps);
        money(b, c->usd_per_1m);
        st_buf_printf(b, " per 1M output tokens (%ld replicas, ", kb.replicas);
        money(b, kb.monthly_usd);
        double rel = w->usd_per_1m / c->usd_per_1m - 1;
        if (fabs(rel) < 0.005)
            st_buf_puts(b, " a month): the plan's pick costs the same per token.");
        else
            st_buf_printf(b, " a month): the plan's pick costs %.0f %% %s per token.", fabs(rel) * 100,
                          rel < 0 ? "less" : "more");
    } else if (r->baseline.state != ST_PLAN_REFUSED) {
        st_buf_printf(b, " The current setup met the SLO at no rate on the model (%s).", r->baseline.why);
    } else {
        st_buf_printf(b, " The current setup could not be modelled: %s.", r->baseline.why);
    }
    st_buf_puts(b, "\n\nThis is a PREDICTION from servetune's engine model, not a measurement: run the audit spec "
                   "below on the hardware before you commit to it.\n\n");
}

static void table(const st_plan_result *r, st_buf *b)
{
    st_buf_printf(b,
                  "## Candidates\n\n%d candidates explored in %.2f s (%.0f candidates/s): %d refused (do not fit or "
                  "cannot run), %d evaluated with the sustained search (%d more took the results of an identical "
                  "engine), %d pruned (their cost bound could not reach the top %d: %d on the proven bound, %d on "
                  "the simulated estimate), %d met the SLO.\n\n",
                  r->stats.candidates, r->seconds, r->seconds > 0 ? r->stats.candidates / r->seconds : 0,
                  r->stats.refused, r->stats.evaluated, r->stats.shared, r->stats.pruned,
                  r->spec->plan.top > 0 ? r->spec->plan.top : 3, r->stats.pruned_proven,
                  r->stats.pruned - r->stats.pruned_proven, r->stats.passed);
    int *idx = malloc(sizeof *idx * (size_t)(r->n > 0 ? r->n : 1));
    if (!idx) {
        st_buf_fail(b, ST_BUF_NO_MEM);
        return;
    }
    int m = st_plan_order(r->c, r->n, idx, ST_PLAN_REPORT_ROWS), capped = 0;
    if (m) {
        int sp = r->spec_variants > 0; /* a decoding column when speculation was searched */
        st_buf_printf(
            b,
            "| # | GPU x per replica | weights | KV | max seqs | batched tokens | max len |%s $/GPU-h | capacity "
            "(req/s) | output tok/s | $ per 1M output tok | replicas at peak | monthly | frontier |\n"
            "|---|---|---|---|---|---|---|%s---|---|---|---|---|---|---|\n",
            sp ? " decoding |" : "", sp ? "---|" : "");
        for (int i = 0; i < m; i++) {
            const st_plan_candidate *c = &r->c[idx[i]];
            st_cost k = cost_of(r, c);
            st_buf_printf(b, "| %d | %s x%d | %s | %s | %ld | %ld | %ld | ", c->rank, c->gpu, c->tp, c->weights,
                          c->kv_dtype, c->max_num_seqs, c->max_batched, c->max_model_len);
            if (sp && c->spec)
                st_buf_printf(b, "%s k%d | ", c->spec->method, c->spec_k);
            else if (sp)
                st_buf_puts(b, "plain | ");
            st_buf_printf(b, "%.4g | %s%.3g | %.0f | ", c->price_per_gpu_hour, c->capacity_capped ? ">= " : "",
                          c->capacity_rps, c->output_tps);
            capped += c->capacity_capped;
            money(b, c->usd_per_1m);
            st_buf_printf(b, " | %ld | ", k.replicas);
            money(b, k.monthly_usd);
            st_buf_printf(b, " | %s%s |\n", c->on_frontier & 1 ? "latency " : "", c->on_frontier & 2 ? "quality" : "");
        }
        st_buf_puts(b, "\n");
        if (capped)
            st_buf_printf(b,
                          "%d of these passed the highest rate the search tried (\">=\"): their capacity is at least "
                          "that rate, not measured (it and their cost per token may be better); add higher rates to "
                          "the spec's `rates` to measure it.\n\n",
                          capped);
    }
    free(idx);
}

/* A method's acceptance in words: "0.7 a draft token" or "0.9/0.7/0.5 by position", and its
 * share of steps with a draft when given. */
static void accept_words(const st_spec_accept *a, st_buf *b)
{
    if (!a) {
        st_buf_puts(b, "no acceptance");
        return;
    }
    if (a->n_pos) {
        for (uint32_t i = 0; i < a->n_pos; i++)
            st_buf_printf(b, "%s%.3g", i ? "/" : "", a->pos[i]);
        st_buf_puts(b, " by position");
    } else
        st_buf_printf(b, "%.3g a draft token", a->acceptance);
    if (a->draft_share >= 0)
        st_buf_printf(b, ", drafts in %.0f %% of steps", 100 * a->draft_share);
}

/* Where speculation stops paying, in words, from a pay figure. */
static void pay_words(const st_plan_spec_pay *p, st_buf *b)
{
    st_buf_printf(b, "TPOT x%.2f of plain decoding at one sequence", p->ratio_1);
    if (p->breakeven)
        st_buf_printf(b,
                      "; it stops paying from a batch of %u sequences (about %.3g requests/s of plain decoding), "
                      "where verifying the draft tokens binds on compute",
                      p->breakeven, p->breakeven_rps);
    else
        st_buf_puts(b, "; it pays at every batch up to --max-num-seqs");
    if (p->batch_at_cap > 0)
        st_buf_printf(b, "; at this candidate's capacity the batch is about %.0f sequence%s, where it gives TPOT x%.2f",
                      p->batch_at_cap, p->batch_at_cap < 1.5 ? "" : "s", p->ratio_at_cap);
}

/* What became of a plain pick's speculative twin, in words. */
static void twin_state(const st_plan_candidate *t, st_buf *b)
{
    switch (t->state) {
    case ST_PLAN_OK:
        st_buf_puts(b, "costs ");
        money(b, t->usd_per_1m);
        st_buf_printf(b, " per 1M output tokens (%.3g requests/s)", t->capacity_rps);
        break;
    case ST_PLAN_PRUNED:
        st_buf_puts(b, "was pruned (its cost bound, ");
        money(b, t->lb_usd_per_1m);
        st_buf_puts(b, ", could not reach the top)");
        break;
    case ST_PLAN_NONE_PASSED: st_buf_puts(b, "met the SLO at no rate"); break;
    default: st_buf_printf(b, "was refused (%s)", t->why); break;
    }
}

static void spec_pick(const st_plan_result *r, const st_plan_candidate *c, st_buf *b)
{
    char name[160];
    st_plan_config_name(c, name, sizeof name);
    st_buf_printf(b, "- #%d %s: ", c->rank, name);
    if (c->spec) {
        st_buf_printf(b, "speculates (%s, k %d, acceptance ", c->spec->method, c->spec_k);
        accept_words(c->spec_acc, b);
        st_buf_puts(b, "); ");
        if (!c->pay.ok) {
            st_buf_puts(b, "the engine model gave no figures for its verification step.\n");
            return;
        }
        pay_words(&c->pay, b);
        double at = c->pay.ratio_at_cap > 0 ? c->pay.ratio_at_cap : c->pay.ratio_1;
        st_buf_puts(b, at >= 1 ? ". Speculation does not pay at its capacity's batch: its rank comes from the rest.\n"
                               : ". Speculation pays here.\n");
        return;
    }
    if (c->spec_twin < 0) {
        st_buf_puts(b, "decodes plainly; no speculative variant of it was tried.\n");
        return;
    }
    const st_plan_candidate *t = &r->c[c->spec_twin];
    st_buf_printf(b, "decodes plainly. With speculation (%s, k %d, acceptance ", t->spec->method, t->spec_k);
    accept_words(t->spec_acc, b);
    st_buf_puts(b, ") the same setup ");
    twin_state(t, b);
    if (c->pay.ok) {
        st_buf_puts(b, "; ");
        pay_words(&c->pay, b);
    }
    if (t->state == ST_PLAN_OK && t->usd_per_1m < c->usd_per_1m)
        st_buf_puts(b, ": the speculating variant is cheaper per token and ranks above it.\n");
    else if (c->pay.ok && c->pay.ratio_at_cap >= 1)
        st_buf_puts(b, ": speculation does not pay at this load.\n");
    else
        st_buf_puts(b, ": speculation does not make it cheaper per token here.\n");
}

static void speculation(const st_plan_result *r, st_buf *b)
{
    if (!r->spec->plan.n_spec && !r->spec->speculation.given)
        return;
    st_buf_puts(b, "## Speculative decoding\n\n");
    if (r->spec_variants)
        st_buf_printf(b,
                      "%d speculative variant%s of every candidate searched beside plain decoding, on the engine "
                      "model's verification step (k + 1 tokens scored per sequence, the proposer's cost; "
                      "docs/speculative.md) with the acceptance given.",
                      r->spec_variants, r->spec_variants == 1 ? "" : "s");
    if (r->spec_why[0])
        st_buf_printf(b, "%s%s.", r->spec_variants ? " " : "", r->spec_why);
    if (r->spec_variants && r->spec->workload.kind == ST_WL_SYNTHETIC)
        st_buf_puts(b, " To audit a speculating configuration, replay the client's own text: on this spec's synthetic "
                       "prompts (random ids) `--check` refuses it, as they accept almost nothing.");
    st_buf_puts(b, "\n\n");
    int idx[64], n = st_plan_order(r->c, r->n, idx, r->spec_picks < 64 ? r->spec_picks : 64);
    for (int i = 0; i < n && r->spec_variants; i++)
        spec_pick(r, &r->c[idx[i]], b);
    if (n && r->spec_variants)
        st_buf_puts(b, "\n");
}

static void frontier(const st_plan_result *r, st_buf *b)
{
    int measured = st_plan_quality_measured(r->c, r->n);
    if (measured)
        st_buf_puts(b, "## Frontiers\n\nNo other evaluated candidate is at least as cheap and at least as good on the "
                       "other axis. Quality is the drift an audit measured for each checkpoint and KV cache (plan "
                       "--quality: its quality pass, the mean KL divergence of the next-token distributions against "
                       "its baseline, in nats; docs/quality.md), not the format's label.\n\n"
                       "| candidate | $ per 1M output tok | p95 TTFT (ms) at capacity | measured mean KLD | on the "
                       "frontier of |\n|---|---|---|---|---|\n");
    else
        st_buf_puts(b, "## Frontiers\n\nNo other evaluated candidate is at least as cheap and at least as good on the "
                       "other axis. Quality risk ranks the weight format (bf16 0, fp8 1, int8 2, 4-bit 3); it is not a "
                       "measurement of output quality: check that on your own prompts before switching (an audit's "
                       "quality: block measures it; plan --quality DIR then uses it here).\n\n"
                       "| candidate | $ per 1M output tok | p95 TTFT (ms) at capacity | quality risk | on the frontier "
                       "of |\n|---|---|---|---|---|\n");
    int *idx = malloc(sizeof *idx * (size_t)(r->n > 0 ? r->n : 1));
    if (!idx) {
        st_buf_fail(b, ST_BUF_NO_MEM);
        return;
    }
    int m = st_plan_order(r->c, r->n, idx, r->n);
    for (int i = 0; i < m; i++) {
        const st_plan_candidate *c = &r->c[idx[i]];
        if (!c->on_frontier)
            continue;
        char name[128];
        st_plan_config_name(c, name, sizeof name);
        st_buf_printf(b, "| %s | ", name);
        money(b, c->usd_per_1m);
        if (isfinite(c->ttft_p95_ms))
            st_buf_printf(b, " | %.0f", c->ttft_p95_ms);
        else
            st_buf_puts(b, " | -");
        if (measured)
            st_buf_printf(b, " | %.3g", c->kld);
        else
            st_buf_printf(b, " | %d", st_plan_quality_risk(c->weights));
        st_buf_printf(b, " | %s%s%s |\n", c->on_frontier & 1 ? "cost vs TTFT" : "", c->on_frontier == 3 ? ", " : "",
                      c->on_frontier & 2 ? "cost vs quality" : "");
    }
    st_buf_puts(b, "\n");
    free(idx);
}

/* The refusals, grouped by their reason's first words. */
static void refusals(const st_plan_result *r, st_buf *b)
{
    typedef struct {
        char why[90];
        int n;
        const st_plan_candidate *eg;
    } grp;
    grp g[12];
    int ng = 0, other = 0, none = 0;
    for (int i = 0; i < r->n; i++) {
        const st_plan_candidate *c = &r->c[i];
        if (c->state == ST_PLAN_NONE_PASSED)
            none++;
        if (c->state != ST_PLAN_REFUSED)
            continue;
        char key[90];
        snprintf(key, sizeof key, "%.89s", c->why);
        int j = 0;
        while (j < ng && strcmp(g[j].why, key))
            j++;
        if (j == ng) {
            if (ng == 12) {
                other++;
                continue;
            }
            memcpy(g[ng].why, key, sizeof key);
            g[ng].n = 0;
            g[ng].eg = c;
            ng++;
        }
        g[j].n++;
    }
    if (!ng && !none)
        return;
    st_buf_puts(b, "## Why not the others\n\n");
    for (int j = 0; j < ng; j++) {
        char name[128];
        st_plan_config_name(g[j].eg, name, sizeof name);
        st_buf_printf(b, "- %d refused, e.g. %s: %s\n", g[j].n, name, g[j].eg->why);
    }
    if (other)
        st_buf_printf(b, "- %d refused for other reasons (plan.json lists each)\n", other);
    if (none)
        st_buf_printf(b, "- %d fit but met the SLO at no rate\n", none);
    st_buf_puts(b, "\n");
}

static void traffic(const st_plan_result *r, st_buf *b)
{
    const char *who[2];
    const st_day_cost *d[2];
    int n = 0;
    if (r->day_ok) {
        who[n] = "the plan's pick";
        d[n++] = &r->day;
    }
    if (r->day_base_ok) {
        who[n] = "the current setup";
        d[n++] = &r->day_base;
    }
    st_rep_day_markdown(b, r->spec, r->serverless_price_per_gpu_s, r->serverless_from, who, d, n);
    /* the current setup's GPU may have another serverless price than the pick's */
    if (n && r->day_base_ok && r->day_ok && r->base_serverless_price_per_gpu_s != r->serverless_price_per_gpu_s) {
        if (r->base_serverless_price_per_gpu_s > 0)
            st_buf_printf(b, "The current setup's GPU (%s) is priced serverless at $%.6g per GPU-second (%s).\n\n",
                          r->baseline.gpu, r->base_serverless_price_per_gpu_s,
                          r->base_serverless_from ? r->base_serverless_from : "");
        else
            st_buf_printf(
                b, "The current setup's GPU (%s) has no serverless price: its serverless cost is not priced.\n\n",
                r->baseline.gpu);
    }
}

/* --disagg: the pick as its best xPyD, both figures named (disagg.md has the rest). */
static void disagg_words(const st_plan_result *r, st_buf *b)
{
    if (!r->disagg.set)
        return;
    st_buf_printf(b,
                  "## Disaggregated prefill/decode (--disagg)\n\nThe pick as %dP%dD on %ld GPUs (disagg.md, "
                  "disagg.json; a prediction, no disaggregated setup was measured): **static** %.2f requests/s "
                  "(AIConfigurator's rate matching, no queueing); **with queueing** ",
                  r->disagg.x, r->disagg.y, r->disagg.gpus, r->disagg.static_rps);
    if (isnan(r->disagg.queueing_rps))
        st_buf_puts(b, "not estimated (disagg.md says why)");
    else if (r->disagg.queueing_rps > 0)
        st_buf_printf(b, "%.2f requests/s", r->disagg.queueing_rps);
    else
        st_buf_puts(b, "no rate meets the SLO");
    st_buf_printf(b,
                  " (both pools run on the engine model: the highest rate whose p95 TTFT and TPOT meet the SLO); "
                  "the pick aggregated on as many GPUs: %.2f requests/s.\n\n",
                  r->disagg.aggregated_rps);
}

int st_plan_report_markdown(const st_plan_result *r, st_buf *b)
{
    const st_spec *s = r->spec;
    st_buf_printf(b, "# Plan for %s\n\n", st_spec_config_model(s, &s->configs[0]));
    st_buf_puts(b,
                "> **Prediction.** Every figure here comes from servetune's engine model, not from a measurement.\n\n");
    answer(r, b);
    table(r, b);
    speculation(r, b);
    frontier(r, b);
    refusals(r, b);
    traffic(r, b);
    disagg_words(r, b);
    st_buf_puts(b, "## Next step\n\n");
    if (r->written[0]) {
        st_buf_puts(b, "Measure the top candidates on the hardware with the audit spec");
        st_buf_puts(b, r->written[1] ? "s (one per machine):\n\n" : ":\n\n");
        for (int i = 0; i < 16 && r->written[i]; i++)
            st_buf_printf(b, "    servetune audit %s -o audit-%d\n", r->written[i], i + 1);
        st_buf_puts(b, "\n");
    }
    if (r->best >= 0) {
        st_buf_puts(b,
                    "deploy.md and deploy-k8s.yaml in the output folder hold the pick as commands to run (vllm serve, "
                    "docker run, a Kubernetes Deployment and Service, RunPod's variables); use them once the audit "
                    "confirms it.\n\n");
    }
    if (!r->written[0])
        st_buf_puts(b, "`servetune plan SPEC --write-spec FILE` writes the top candidates as an audit spec to measure "
                       "them on the hardware.\n\n");
    st_buf_printf(
        b,
        "## Method and limits\n\n"
        "- The workload, SLO and search are the spec's (`%s`); each candidate runs as the audit spec that "
        "would measure it, through `servetune predict`'s sustained search on the engine model (docs/predict.md; "
        "its measured error against published vLLM figures is in docs/fidelity.md).\n"
        "- --max-model-len: %ld",
        r->spec_path, r->len_auto);
    if (s->plan.max_model_len > 0)
        st_buf_puts(b, " (the spec's plan.max_model_len)");
    else
        st_buf_printf(b,
                      " from the workload (its longest input + output, rounded up, at most the model's context; "
                      "%.1f %% of the requests are longer: every run leaves them out, as servetune bench does)",
                      100 * r->len_reject_share);
    st_buf_puts(b, ".\n- Prices: ");
    st_md_text(b, r->prices ? r->prices->origin : "the built-in list");
    st_buf_puts(b, ", ");
    st_md_text(b, r->provider && *r->provider ? r->provider : "the lowest");
    st_buf_printf(
        b,
        " on-demand price per GPU-hour; every figure's source and date is in "
        "docs/prices.md. Prices move: pass your own with --prices.\n"
        "- The search prunes with bounds: first a proven one (the most output tokens a second any mix of the "
        "engine model's steps can deliver within the candidate's limits and KV cache, whatever the SLO), then "
        "for the candidates it leaves in the race an estimate (its maximum throughput on the model with its "
        "batch kept full, times %.2f); candidates whose bound cannot enter the top %d are not evaluated "
        "(plan.json lists them with their bound and its kind).\n"
        "- Not modelled: output quality under quantization, multi-node tensor parallelism, engines other "
        "than vLLM.\n",
        1.25, s->plan.top > 0 ? s->plan.top : 3);
    return st_buf_error(b) ? -1 : 0;
}

static json_t *spec_json(const st_plan_candidate *c)
{
    if (!c->spec)
        return json_null();
    json_t *o = json_object();
    json_object_set_new(o, "method", json_string(c->spec->method));
    json_object_set_new(o, "model", c->spec->model ? json_string(c->spec->model) : json_null());
    json_object_set_new(o, "num_speculative_tokens", json_integer(c->spec_k));
    const st_spec_accept *a = c->spec_acc;
    if (a && a->n_pos) {
        json_t *p = json_array();
        for (uint32_t i = 0; i < a->n_pos; i++)
            json_array_append_new(p, json_real(a->pos[i]));
        json_object_set_new(o, "acceptance_by_position", p);
    } else if (a)
        json_object_set_new(o, "acceptance", json_real(a->acceptance));
    if (a && a->draft_share >= 0)
        json_object_set_new(o, "draft_share", json_real(a->draft_share));
    return o;
}

/* Whether speculation pays on a pick (its own figures, or its speculative twin's at its batch). */
static json_t *pay_json(const st_plan_result *r, const st_plan_candidate *c)
{
    json_t *o = json_object();
    char name[160] = "";
    if (!c->spec && c->spec_twin >= 0)
        st_plan_config_name(&r->c[c->spec_twin], name, sizeof name);
    json_object_set_new(o, "twin", name[0] ? json_string(name) : json_null());
    json_object_set_new(o, "tpot_ratio_at_1", st_jnum_or_null(c->pay.ratio_1));
    json_object_set_new(o, "stops_paying_at_batch", c->pay.breakeven ? json_integer(c->pay.breakeven) : json_null());
    json_object_set_new(o, "stops_paying_at_rps", st_jnum_or_null(c->pay.breakeven ? c->pay.breakeven_rps : NAN));
    json_object_set_new(o, "batch_at_capacity", st_jnum_or_null(c->pay.batch_at_cap > 0 ? c->pay.batch_at_cap : NAN));
    json_object_set_new(o, "tpot_ratio_at_capacity",
                        st_jnum_or_null(c->pay.batch_at_cap > 0 ? c->pay.ratio_at_cap : NAN));
    return o;
}

static json_t *cand_json(const st_plan_result *r, const st_plan_candidate *c)
{
    char name[128];
    st_plan_config_name(c, name, sizeof name);
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(name));
    json_object_set_new(o, "state", json_string(st_plan_state_name(c->state)));
    json_object_set_new(o, "gpu", json_string(c->gpu ? c->gpu : ""));
    json_object_set_new(o, "gpus_per_replica", json_integer(c->tp));
    json_object_set_new(o, "weights", json_string(c->weights ? c->weights : ""));
    json_object_set_new(o, "model", json_string(c->model ? c->model : ""));
    json_object_set_new(o, "kv_cache_dtype", json_string(c->kv_dtype ? c->kv_dtype : ""));
    json_object_set_new(o, "max_num_seqs", json_integer(c->max_num_seqs));
    json_object_set_new(o, "max_num_batched_tokens", json_integer(c->max_batched));
    json_object_set_new(o, "max_model_len", json_integer(c->max_model_len));
    json_object_set_new(o, "price_per_gpu_hour", json_real(c->price_per_gpu_hour));
    json_object_set_new(o, "price_from", json_string(c->provider ? c->provider : ""));
    json_object_set_new(o, "bound_rps", st_jnum_or_null(c->bound_rps > 0 ? c->bound_rps : NAN));
    json_object_set_new(o, "bound_output_tps", st_jnum_or_null(c->bound_tps > 0 ? c->bound_tps : NAN));
    json_object_set_new(o, "bound_kind", json_string(c->bound_estimate ? "estimate" : "proven"));
    json_object_set_new(o, "cost_bound_usd_per_1m", st_jnum_or_null(c->lb_usd_per_1m));
    json_object_set_new(o, "capacity_rps", st_jnum_or_null(c->state == ST_PLAN_OK ? c->capacity_rps : NAN));
    json_object_set_new(o, "capacity_is_lower_bound", json_boolean(c->state == ST_PLAN_OK && c->capacity_capped));
    json_object_set_new(o, "output_tps", st_jnum_or_null(c->state == ST_PLAN_OK ? c->output_tps : NAN));
    json_object_set_new(o, "ttft_p95_ms", st_jnum_or_null(c->ttft_p95_ms));
    json_object_set_new(o, "tpot_p95_ms", st_jnum_or_null(c->tpot_p95_ms));
    json_object_set_new(o, "usd_per_1m_output_tokens", st_jnum_or_null(c->usd_per_1m));
    if (c->state == ST_PLAN_OK) {
        st_cost k = cost_of(r, c);
        json_object_set_new(o, "replicas_at_peak", json_integer(k.replicas));
        json_object_set_new(o, "monthly_usd", st_jnum_or_null(k.monthly_usd));
    }
    json_object_set_new(o, "rank", c->rank ? json_integer(c->rank) : json_null());
    json_object_set_new(o, "frontier_cost_ttft", json_boolean(c->on_frontier & 1));
    json_object_set_new(o, "frontier_cost_quality", json_boolean(c->on_frontier & 2));
    json_object_set_new(o, "quality_risk", json_integer(st_plan_quality_risk(c->weights)));
    json_object_set_new(o, "measured_mean_kld", c->has_kld ? json_real(c->kld) : json_null());
    json_object_set_new(o, "why", c->why[0] ? json_string(c->why) : json_null());
    json_object_set_new(o, "speculation", spec_json(c));
    if (c->pay.ok)
        json_object_set_new(o, "speculation_pays", pay_json(r, c));
    return o;
}

int st_plan_report_json(const st_plan_result *r, st_buf *out)
{
    json_t *root = json_object();
    json_object_set_new(root, "schema", json_integer(1));
    json_object_set_new(root, "prediction", json_true());
    json_object_set_new(root, "spec", json_string(r->spec_path ? r->spec_path : ""));
    json_object_set_new(root, "prices", json_string(r->prices ? r->prices->origin : ""));
    json_object_set_new(root, "provider", r->provider ? json_string(r->provider) : json_null());
    json_t *st = json_object();
    json_object_set_new(st, "candidates", json_integer(r->stats.candidates));
    json_object_set_new(st, "refused", json_integer(r->stats.refused));
    json_object_set_new(st, "evaluated", json_integer(r->stats.evaluated));
    json_object_set_new(st, "pruned", json_integer(r->stats.pruned));
    json_object_set_new(st, "passed", json_integer(r->stats.passed));
    json_object_set_new(st, "refined", json_integer(r->stats.refined));
    json_object_set_new(st, "pruned_on_proven_bound", json_integer(r->stats.pruned_proven));
    json_object_set_new(st, "shared", json_integer(r->stats.shared));
    json_object_set_new(st, "seconds", json_real(r->seconds));
    json_object_set_new(st, "candidates_per_s",
                        st_jnum_or_null(r->seconds > 0 ? r->stats.candidates / r->seconds : NAN));
    json_object_set_new(root, "search", st);
    json_object_set_new(root, "max_model_len_auto", json_integer(r->len_auto));
    json_object_set_new(root, "max_model_len_reject_share", st_jnum_or_null(r->len_reject_share));
    json_object_set_new(root, "speculation_variants", json_integer(r->spec_variants));
    json_object_set_new(root, "speculation_note", r->spec_why[0] ? json_string(r->spec_why) : json_null());
    json_object_set_new(root, "best", r->best >= 0 ? cand_json(r, &r->c[r->best]) : json_null());
    json_object_set_new(root, "baseline", cand_json(r, &r->baseline));
    json_t *all = json_array();
    for (int i = 0; i < r->n; i++)
        json_array_append_new(all, cand_json(r, &r->c[i]));
    json_object_set_new(root, "candidates", all);
    if (r->day_ok || r->day_base_ok) {
        json_t *d = json_object();
        if (r->day_ok)
            json_object_set_new(d, "best", st_rep_day_json(&r->day));
        if (r->day_base_ok)
            json_object_set_new(d, "baseline", st_rep_day_json(&r->day_base));
        json_object_set_new(d, "serverless_price_per_gpu_s",
                            st_jnum_or_null(r->serverless_price_per_gpu_s > 0 ? r->serverless_price_per_gpu_s : NAN));
        json_object_set_new(root, "traffic_day", d);
    }
    if (r->disagg.set) {
        json_t *d = json_object();
        json_object_set_new(d, "x", json_integer(r->disagg.x));
        json_object_set_new(d, "y", json_integer(r->disagg.y));
        json_object_set_new(d, "gpus", json_integer(r->disagg.gpus));
        json_object_set_new(d, "static_rps", json_real(r->disagg.static_rps));
        json_object_set_new(d, "queueing_capacity_rps", st_jnum_or_null(r->disagg.queueing_rps));
        json_object_set_new(d, "aggregated_rps", json_real(r->disagg.aggregated_rps));
        json_object_set_new(root, "disaggregated", d);
    }
    json_t *w = json_array();
    for (int i = 0; i < 16 && r->written[i]; i++)
        json_array_append_new(w, json_string(r->written[i]));
    json_object_set_new(root, "specs_written", w);
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    json_decref(root);
    if (!text)
        return -1;
    st_buf_puts(out, text);
    st_buf_puts(out, "\n");
    free(text);
    return st_buf_error(out) ? -1 : 0;
}
