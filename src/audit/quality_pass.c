/* The quality pass of one configuration (audit/quality_pass.h). */
#include "audit/quality_pass.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/sweep.h"
#include "core/clock.h"
#include "core/util.h"
#include "load/api.h"
#include "load/tokenize.h"

/* The prompts' seed: apart from every rate's (the same prompts for every configuration). */
#define QUALITY_SEED_SALT 0x7175616c697479ULL /* "quality" */
/* The largest answer read back (top-k lists of every token). */
#define QUALITY_ANSWER_MAX ((size_t)64 << 20)
#define QUALITY_BODY_MAX ((size_t)16 << 20)

void st_quality_ref_free(st_quality_ref *r)
{
    for (uint32_t i = 0; r->ans && i < r->n; i++)
        st_qanswer_free(&r->ans[i]);
    free(r->ans);
    free(r->probe);
    memset(r, 0, sizeof *r);
}

/* The probe text's ids through the engine's /tokenize: 1 with ids, 0 when the engine has none
 * (404/405 or no answer), -1 on a malformed answer (err). */
static int probe_ids(st_executor *x, st_qapi api, const char *model, uint32_t **ids, size_t *n, size_t *cap, char *err,
                     size_t errlen)
{
    st_buf body, ans;
    st_buf_init(&body, 4096);
    st_buf_init(&ans, QUALITY_ANSWER_MAX);
    if (api == ST_QAPI_LLAMACPP) {
        st_buf_puts(&body, "{\"content\":");
        st_buf_json_str(&body, ST_QUALITY_PROBE_TEXT);
        st_buf_puts(&body, ",\"add_special\":false}");
    } else {
        st_buf_puts(&body, "{");
        if (model) {
            st_buf_puts(&body, "\"model\":");
            st_buf_json_str(&body, model);
            st_buf_puts(&body, ",");
        }
        st_buf_puts(&body, "\"prompt\":");
        st_buf_json_str(&body, ST_QUALITY_PROBE_TEXT);
        st_buf_puts(&body, ",\"add_special_tokens\":false}");
    }
    int status = 0, rc = 0;
    char e2[256];
    if (x->ops->post(x, "/tokenize", body.data, body.len, &ans, &status, e2, sizeof e2) == 0 && status >= 200 &&
        status < 300) {
        int64_t k = st_tokenize_parse_ids(ans.data ? ans.data : "", ans.len, ids, cap);
        if (k < 0) {
            st_errf(err, errlen, "/tokenize answered without token ids");
            rc = -1;
        } else {
            *n = (size_t)k;
            rc = 1;
        }
    }
    st_buf_free(&body);
    st_buf_free(&ans);
    return rc;
}

/* One prompt's answer: 0, or -1 with err (the request failed or the answer is malformed). */
static int ask(st_executor *x, st_qapi api, const char *model, const st_work_item *it, const uint32_t *extra,
               uint32_t n_extra, uint32_t max_tokens, uint32_t top_k, int score, st_qanswer *out, char *err,
               size_t errlen)
{
    st_buf body, ans, text;
    st_buf_init(&body, QUALITY_BODY_MAX);
    st_buf_init(&ans, QUALITY_ANSWER_MAX);
    st_buf_init(&text, QUALITY_BODY_MAX);
    uint32_t *ids = NULL, n_ids = 0;
    int rc = -1;
    if (it->input_ids) {
        n_ids = it->input_len + n_extra;
        ids = malloc((size_t)(n_ids ? n_ids : 1) * sizeof *ids);
        if (!ids) {
            st_errf(err, errlen, "out of memory");
            goto out;
        }
        memcpy(ids, it->input_ids, (size_t)it->input_len * sizeof *ids);
        if (n_extra)
            memcpy(ids + it->input_len, extra, (size_t)n_extra * sizeof *ids);
    } else if (st_workload_text(it, &text)) {
        st_errf(err, errlen, "a prompt without text");
        goto out;
    }
    if (st_quality_body(api, model, ids, n_ids, ids ? NULL : text.data, max_tokens, top_k, score, &body)) {
        st_errf(err, errlen, "the request could not be built");
        goto out;
    }
    int status = 0;
    if (x->ops->post(x, st_quality_path(api), body.data, body.len, &ans, &status, err, errlen))
        goto out;
    if (status < 200 || status >= 300) {
        char msg[300];
        st_api_error_message(ans.data ? ans.data : "", ans.len, msg, sizeof msg);
        st_errf(err, errlen, "POST %s: HTTP %d: %s", st_quality_path(api), status, msg);
        goto out;
    }
    rc = st_quality_parse(api, ans.data ? ans.data : "", ans.len, out, err, errlen);
out:
    free(ids);
    st_buf_free(&body);
    st_buf_free(&ans);
    st_buf_free(&text);
    return rc;
}

/* Compares the probe's ids with the baseline's: 0 the same (or not checked), -1 with the reason. */
static int same_tokenizer(const st_quality_ref *ref, const uint32_t *ids, size_t n, int have, char *why, size_t whylen)
{
    if (!ref->probe_checked || !have)
        return 0;
    size_t m = n < ref->n_probe ? n : ref->n_probe, i = 0;
    while (i < m && ids[i] == ref->probe[i])
        i++;
    if (i == m && n == ref->n_probe)
        return 0;
    st_errf(why, whylen,
            "another tokenizer than the baseline's: the same text is %zu tokens here and %zu on the baseline, "
            "different from token %zu on (another model's vocabulary); answers in different tokens cannot be compared",
            n, ref->n_probe, i);
    return -1;
}

/* The candidate's distributions at every position of the baseline's answer b to prompt it, into
 * tf[b->n] (each position's token the baseline's): OpenAI engines in one request (prompt_logprobs
 * of prompt + answer), llama.cpp one request per position (the prefix cached by the server). 0, or
 * -1 when the engine does not score a given text. */
static int score_answer(st_executor *x, st_qapi api, const char *model, const st_work_item *it, const st_qanswer *b,
                        uint32_t top_k, st_qtok *tf)
{
    char err[256];
    uint32_t *bid = malloc((size_t)b->n * sizeof *bid);
    if (!bid)
        return -1;
    for (uint32_t j = 0; j < b->n; j++)
        bid[j] = (uint32_t)b->tok[j].token;
    int rc = 0;
    if (api == ST_QAPI_OPENAI) {
        st_qanswer sc = { 0 };
        rc = ask(x, api, model, it, bid, b->n, 1, top_k, 1, &sc, err, sizeof err);
        if (rc == 0 && sc.n_scored < it->input_len + b->n)
            rc = -1; /* no prompt_logprobs: free-running only */
        for (uint32_t j = 0; rc == 0 && j < b->n; j++)
            tf[j] = sc.scored[it->input_len + j];
        st_qanswer_free(&sc);
    } else {
        for (uint32_t j = 0; rc == 0 && j < b->n; j++) {
            st_qanswer sc = { 0 };
            rc = ask(x, api, model, it, bid, j, 1, top_k, 1, &sc, err, sizeof err);
            if (rc == 0 && sc.n == 0)
                rc = -1;
            if (rc == 0)
                tf[j] = sc.tok[0];
            st_qanswer_free(&sc);
        }
    }
    for (uint32_t j = 0; rc == 0 && j < b->n; j++) {
        /* the distribution at position j, of the baseline's token there */
        tf[j].token = b->tok[j].token;
        tf[j].logp = NAN;
    }
    free(bid);
    return rc;
}

/* The tokenizer: the baseline's probe kept in ref; a candidate's compared with it. 1 when the
 * candidate tokenizes otherwise (said in out->note), else 0. */
static int tokenizer(st_executor *x, st_qapi api, const char *model, int ci, st_quality_ref *ref,
                     st_quality_result *out)
{
    char err[512];
    uint32_t *pids = NULL;
    size_t np = 0, pcap = 0;
    int have_probe = probe_ids(x, api, model, &pids, &np, &pcap, err, sizeof err);
    if (ci > 0 && same_tokenizer(ref, pids, np, have_probe == 1, out->note, sizeof out->note)) {
        free(pids);
        return 1;
    }
    if (ci == 0) {
        free(ref->probe);
        ref->probe = pids;
        ref->n_probe = np;
        ref->cap_probe = pcap;
        ref->probe_checked = have_probe == 1;
        pids = NULL;
    }
    free(pids);
    return 0;
}

/* One answer of the candidate (c) against the baseline's (b): free-running into acc and, when
 * teacher, the candidate's scores of prompt + the baseline's answer into forced (*scored set).
 * 0, or -1 out of memory. */
static int compare_answer(st_executor *x, st_qapi api, const char *model, const st_work_item *it, const st_qanswer *b,
                          const st_qanswer *c, uint32_t top_k, int teacher, st_drift_acc *acc, st_drift_acc *forced,
                          int *scored)
{
    st_lp_pos *bv = malloc(((size_t)b->n + c->n + 1) * sizeof *bv);
    if (!bv)
        return -1;
    st_lp_pos *cv = bv + b->n;
    st_quality_views(b->tok, b->n, bv);
    st_quality_views(c->tok, c->n, cv);
    st_drift_add_free(acc, bv, b->n, cv, c->n);
    /* teacher-forced: the candidate scores prompt + the baseline's answer */
    if (teacher && it->input_ids && b->n > 0) {
        st_qtok *tf = calloc(b->n, sizeof *tf);
        st_lp_pos *sv = malloc((size_t)b->n * sizeof *sv);
        if (tf && sv && score_answer(x, api, model, it, b, top_k, tf) == 0) {
            st_quality_views(tf, b->n, sv);
            *scored = 1;
            st_drift_add_forced(forced, bv, sv, b->n);
        }
        free(tf);
        free(sv);
    }
    free(bv);
    return 0;
}

/* A measured candidate's figures: the free-running ones, or (forced: positions were scored) the
 * teacher-forced ones with the whole answers' figures kept. */
static void measured(st_drift_acc *acc, st_drift_acc *forced, st_quality_result *out)
{
    out->status = ST_Q_MEASURED;
    st_drift_summarize(acc, &out->d);
    if (!forced)
        return;
    st_drift_summary f;
    st_drift_summarize(forced, &f);
    f.answers = out->d.answers;
    f.exact = out->d.exact;
    f.exact_match = out->d.exact_match;
    f.diverged = out->d.diverged;
    f.div_mean = out->d.div_mean;
    f.div_p50 = out->d.div_p50;
    out->d = f;
    snprintf(out->mode, sizeof out->mode, "teacher-forced");
}

int st_quality_pass(st_executor *x, const st_spec *spec, int ci, st_quality_ref *ref, volatile sig_atomic_t *stop,
                    st_quality_result *out)
{
    memset(out, 0, sizeof *out);
    out->top_k = spec->quality.top_k;
    out->prompts = spec->quality.prompts;
    out->engine_s = NAN;
    out->emulated = spec->engine.kind == ST_ENGINE_EMULATOR;
    snprintf(out->mode, sizeof out->mode, "free-running");
    st_drift_summarize(&(st_drift_acc){ 0 }, &out->d);
    char err[512];
    st_qapi api = st_quality_api(spec, err, sizeof err);
    if (api == ST_QAPI_NONE || !x->ops->post) {
        out->status = ST_Q_NO_LOGPROBS;
        snprintf(out->note, sizeof out->note, "%s", api == ST_QAPI_NONE ? err : "no engine to ask (engine model)");
        return 0;
    }
    if (ci > 0 && !ref->have) {
        out->status = ST_Q_REFUSED;
        snprintf(out->note, sizeof out->note,
                 "no reference: the baseline's answers are not in this run (it failed, returned no "
                 "log-probabilities, or ran in another process)");
        return 0;
    }
    const st_spec_config *c = &spec->configs[ci];
    const char *model = spec->engine.served_name ? spec->engine.served_name : st_spec_config_model(spec, c);
    st_ns t0 = st_now();
    if (tokenizer(x, api, model, ci, ref, out)) {
        out->status = ST_Q_REFUSED;
        return 0;
    }
    /* the prompts: the workload's first requests (a session's first turns) */
    st_workload w = { 0 };
    if (st_sweep_workload(spec, spec->workload.seed ^ QUALITY_SEED_SALT, spec->quality.prompts, &w, err, sizeof err)) {
        out->status = ST_Q_FAILED;
        snprintf(out->note, sizeof out->note, "the prompts: %.400s", err);
        return 0;
    }
    uint32_t n = w.n - w.n_dependent;
    if (n > spec->quality.prompts)
        n = spec->quality.prompts;
    out->prompts = n;
    out->synthetic = spec->workload.kind == ST_WL_SYNTHETIC;
    int teacher = ci > 0 && (spec->engine.kind == ST_ENGINE_VLLM || spec->engine.kind == ST_ENGINE_EMULATOR ||
                             spec->engine.kind == ST_ENGINE_LLAMACPP);
    if (ci > 0 && n > ref->n)
        n = ref->n; /* the prompts the baseline answered */
    st_qanswer *ans = calloc(n ? n : 1, sizeof *ans);
    if (!ans) {
        st_workload_free(&w);
        out->status = ST_Q_FAILED;
        snprintf(out->note, sizeof out->note, "out of memory");
        return 0;
    }
    st_drift_acc acc = { 0 }, forced = { 0 }; /* free-running; teacher-forced */
    int rc = 0, no_lp = 0, scored = 0;
    uint32_t i = 0;
    for (; i < n; i++) {
        if (stop && *stop) {
            rc = 1;
            break;
        }
        const st_work_item *it = &w.items[i];
        if (ask(x, api, model, it, NULL, 0, spec->quality.max_tokens, spec->quality.top_k, 0, &ans[i], err,
                sizeof err)) {
            out->status = ST_Q_FAILED;
            snprintf(out->note, sizeof out->note, "prompt %u of %u: %.400s", i + 1, n, err);
            break;
        }
        if (ans[i].no_logprobs || ans[i].n == 0) {
            no_lp = 1;
            break;
        }
        if (ci == 0)
            continue;
        if (compare_answer(x, api, model, it, &ref->ans[i], &ans[i], spec->quality.top_k, teacher, &acc, &forced,
                           &scored)) {
            out->status = ST_Q_FAILED;
            snprintf(out->note, sizeof out->note, "out of memory");
            break;
        }
    }
    out->engine_s = st_ns_to_s(st_now() - t0) * (x->time_scale > 0 ? x->time_scale : 1);
    if (no_lp && out->status != ST_Q_FAILED) {
        out->status = ST_Q_NO_LOGPROBS;
        snprintf(out->note, sizeof out->note,
                 "the engine answered prompt %u without log-probabilities (asked for the top %u): no drift measured",
                 i + 1, spec->quality.top_k);
    } else if (rc == 0 && out->status != ST_Q_FAILED) {
        if (ci == 0) {
            st_quality_ref_free(&(st_quality_ref){ .ans = ref->ans, .n = ref->n });
            ref->ans = ans;
            ref->n = n;
            ref->have = 1;
            ans = NULL;
            out->status = ST_Q_REFERENCE;
        } else {
            measured(&acc, scored ? &forced : NULL, out);
        }
    }
    for (uint32_t j = 0; ans && j < n; j++)
        st_qanswer_free(&ans[j]);
    free(ans);
    st_drift_free(&acc);
    st_drift_free(&forced);
    st_workload_free(&w);
    st_quality_judge(spec, out);
    return rc == 1 ? 1 : 0;
}
