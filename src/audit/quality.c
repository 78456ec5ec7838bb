/* The quality pass's requests, answers, limits and stored result (audit/quality.h). */
#include "audit/quality.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "load/output.h"

st_qapi st_quality_api(const st_spec *s, char *why, size_t whylen)
{
    if (s->engine.kind == ST_ENGINE_LLAMACPP)
        return ST_QAPI_LLAMACPP;
    if (s->engine.kind == ST_ENGINE_TGI || st_spec_api(s) == ST_API_TGI) {
        st_errf(why, whylen,
                "TGI's API returns no top-k log-probabilities of the generated tokens (details.top_tokens is not "
                "asked): the answers were not compared");
        return ST_QAPI_NONE;
    }
    return ST_QAPI_OPENAI;
}

const char *st_quality_path(st_qapi a) { return a == ST_QAPI_LLAMACPP ? "/completion" : "/v1/completions"; }

void st_qanswer_free(st_qanswer *a)
{
    free(a->tok);
    free(a->scored);
    memset(a, 0, sizeof *a);
}

int st_quality_body(st_qapi a, const char *model, const uint32_t *ids, uint32_t n_ids, const char *text,
                    uint32_t max_tokens, uint32_t top_k, int score, st_buf *out)
{
    st_buf_puts(out, "{");
    if (model && a == ST_QAPI_OPENAI) {
        st_buf_puts(out, "\"model\":");
        st_buf_json_str(out, model);
        st_buf_puts(out, ",");
    }
    st_buf_puts(out, "\"prompt\":");
    if (ids) {
        st_buf_puts(out, "[");
        for (uint32_t i = 0; i < n_ids; i++)
            st_buf_printf(out, "%s%u", i ? "," : "", ids[i]);
        st_buf_puts(out, "]");
    } else {
        st_buf_json_str(out, text ? text : "");
    }
    if (score)
        max_tokens = 1;
    if (a == ST_QAPI_LLAMACPP)
        st_buf_printf(out, ",\"n_predict\":%u,\"temperature\":0,\"n_probs\":%u,\"cache_prompt\":%s,\"stream\":false}",
                      max_tokens, top_k, score ? "true" : "false");
    else {
        st_buf_printf(out,
                      ",\"max_tokens\":%u,\"temperature\":0,\"logprobs\":%u,\"return_tokens_as_token_ids\":true,"
                      "\"stream\":false",
                      max_tokens, top_k);
        if (score)
            st_buf_printf(out, ",\"prompt_logprobs\":%u", top_k);
        st_buf_puts(out, "}");
    }
    return st_buf_error(out) ? -1 : 0;
}

static int push_tok(st_qtok **arr, uint32_t *n, uint32_t *cap, st_qtok **out)
{
    size_t c = *cap;
    if (st_grow((void **)arr, &c, (size_t)*n + 1, sizeof **arr, 0))
        return -1;
    *cap = (uint32_t)c;
    *out = &(*arr)[(*n)++];
    memset(*out, 0, sizeof **out);
    (*out)->logp = NAN;
    return 0;
}

/* An OpenAI token name: "token_id:N" (return_tokens_as_token_ids) gives N; another string (a
 * server that ignores the option) an id from its bytes (FNV-1a, 31 bits): the same string is the
 * same token on both sides of a comparison. */
static int32_t name_id(const char *s)
{
    if (!strncmp(s, "token_id:", 9)) {
        char *end;
        long v = strtol(s + 9, &end, 10);
        if (*end == '\0' && v >= 0 && v <= INT32_MAX)
            return (int32_t)v;
    }
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return (int32_t)(h & 0x7fffffffu);
}

/* Keeps the top_k entries of a list (a server may send more). */
static void add_top(st_qtok *t, int32_t id, double lp)
{
    if (t->k < ST_QUALITY_MAX_TOP_K) {
        t->ids[t->k] = id;
        t->lp[t->k++] = lp;
        return;
    }
    uint32_t lo = 0;
    for (uint32_t i = 1; i < t->k; i++)
        if (t->lp[i] < t->lp[lo])
            lo = i;
    if (lp > t->lp[lo]) {
        t->ids[lo] = id;
        t->lp[lo] = lp;
    }
}

static int parse_llamacpp(json_t *root, st_qanswer *out, char *err, size_t errlen)
{
    json_t *probs = json_object_get(root, "completion_probabilities");
    if (!json_is_array(probs) || json_array_size(probs) == 0) {
        if (!json_is_string(json_object_get(root, "content"))) {
            st_errf(err, errlen, "an answer without content");
            return -1;
        }
        out->no_logprobs = 1;
        return 0;
    }
    size_t i;
    json_t *e;
    json_array_foreach(probs, i, e)
    {
        json_t *id = json_object_get(e, "id"), *lp = json_object_get(e, "logprob");
        json_t *top = json_object_get(e, "top_logprobs");
        if (!json_is_integer(id) || !json_is_array(top)) {
            st_errf(err, errlen, "completion_probabilities[%zu]: no id or top_logprobs", i);
            return -1;
        }
        st_qtok *t;
        if (push_tok(&out->tok, &out->n, &out->cap, &t)) {
            st_errf(err, errlen, "out of memory");
            return -1;
        }
        t->token = (int32_t)json_integer_value(id);
        if (json_is_number(lp))
            t->logp = json_number_value(lp);
        size_t j;
        json_t *x;
        json_array_foreach(top, j, x)
        {
            json_t *xi = json_object_get(x, "id"), *xl = json_object_get(x, "logprob");
            if (json_is_integer(xi) && json_is_number(xl))
                add_top(t, (int32_t)json_integer_value(xi), json_number_value(xl));
        }
    }
    return 0;
}

/* vLLM's prompt_logprobs: a list per prompt token (null for the first), each {"ID": {"logprob",
 * "rank", "decoded_token"}} holding the prompt's token and the top-k. */
static int parse_prompt_logprobs(json_t *pl, st_qanswer *out, char *err, size_t errlen)
{
    size_t i;
    json_t *e;
    json_array_foreach(pl, i, e)
    {
        st_qtok *t;
        if (push_tok(&out->scored, &out->n_scored, &out->cap_scored, &t)) {
            st_errf(err, errlen, "out of memory");
            return -1;
        }
        t->token = -1;
        if (!json_is_object(e))
            continue;
        const char *key;
        json_t *v;
        json_object_foreach(e, key, v)
        {
            json_t *lp = json_object_get(v, "logprob");
            if (!json_is_number(lp))
                continue;
            int32_t id = name_id(key);
            char *end;
            long l = strtol(key, &end, 10);
            if (*end == '\0' && l >= 0 && l <= INT32_MAX)
                id = (int32_t)l;
            add_top(t, id, json_number_value(lp));
        }
    }
    return 0;
}

static int parse_openai(json_t *root, st_qanswer *out, char *err, size_t errlen)
{
    json_t *ch = json_array_get(json_object_get(root, "choices"), 0);
    if (!json_is_object(ch)) {
        st_errf(err, errlen, "an answer without choices");
        return -1;
    }
    json_t *pl = json_object_get(ch, "prompt_logprobs");
    if (!pl)
        pl = json_object_get(root, "prompt_logprobs");
    if (json_is_array(pl) && parse_prompt_logprobs(pl, out, err, errlen))
        return -1;
    json_t *lp = json_object_get(ch, "logprobs");
    json_t *toks = json_object_get(lp, "tokens"), *tlp = json_object_get(lp, "token_logprobs");
    json_t *top = json_object_get(lp, "top_logprobs");
    if (!json_is_array(toks) || !json_is_array(top) || json_array_size(toks) == 0) {
        out->no_logprobs = 1;
        return 0;
    }
    size_t i;
    json_t *e;
    json_array_foreach(toks, i, e)
    {
        if (!json_is_string(e)) {
            st_errf(err, errlen, "logprobs.tokens[%zu]: not a string", i);
            return -1;
        }
        st_qtok *t;
        if (push_tok(&out->tok, &out->n, &out->cap, &t)) {
            st_errf(err, errlen, "out of memory");
            return -1;
        }
        t->token = name_id(json_string_value(e));
        json_t *l = json_array_get(tlp, i);
        if (json_is_number(l))
            t->logp = json_number_value(l);
        json_t *m = json_array_get(top, i);
        const char *key;
        json_t *v;
        json_object_foreach(m, key, v)
        {
            if (json_is_number(v))
                add_top(t, name_id(key), json_number_value(v));
        }
    }
    return 0;
}

int st_quality_parse(st_qapi a, const char *body, size_t len, st_qanswer *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    json_error_t je;
    json_t *root = json_loadb(body, len, 0, &je);
    if (!json_is_object(root)) {
        json_decref(root);
        st_errf(err, errlen, "not a JSON object: %s", je.text);
        return -1;
    }
    int rc = a == ST_QAPI_LLAMACPP ? parse_llamacpp(root, out, err, errlen) : parse_openai(root, out, err, errlen);
    json_decref(root);
    if (rc)
        st_qanswer_free(out);
    return rc;
}

void st_quality_views(const st_qtok *tok, uint32_t n, st_lp_pos *out)
{
    for (uint32_t i = 0; i < n; i++)
        out[i] = (st_lp_pos){
            .token = tok[i].token, .token_logp = tok[i].logp, .k = tok[i].k, .ids = tok[i].ids, .logp = tok[i].lp
        };
}

static const char *const qstatus_names[] = { "measured", "reference", "no_logprobs", "refused", "failed" };

const char *st_qstatus_name(st_qstatus s)
{
    return (unsigned)s < sizeof qstatus_names / sizeof *qstatus_names ? qstatus_names[s] : "failed";
}

int st_qstatus_from_name(const char *n, st_qstatus *out)
{
    for (unsigned i = 0; i < sizeof qstatus_names / sizeof *qstatus_names; i++)
        if (!strcmp(n, qstatus_names[i])) {
            *out = (st_qstatus)i;
            return 0;
        }
    return -1;
}

static void note_add(char *note, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note_add(char *note, size_t n, const char *fmt, ...)
{
    size_t l = strlen(note);
    if (l + 3 >= n)
        return;
    if (l) {
        memcpy(note + l, "; ", 3);
        l += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(note + l, n - l, fmt, ap);
    va_end(ap);
}

void st_quality_judge(const st_spec *s, st_quality_result *r)
{
    r->pass = 1;
    if (r->status != ST_Q_MEASURED)
        return;
    r->note[0] = '\0';
    const st_drift_summary *d = &r->d;
    if (!isnan(s->quality.max_mean_kld)) {
        if (isnan(d->kld_mean))
            note_add(r->note, sizeof r->note, "mean KL divergence not measured (no position compared)");
        else if (d->kld_mean > s->quality.max_mean_kld) {
            r->pass = 0;
            note_add(r->note, sizeof r->note, "mean KL divergence %.4g nats above the limit %.4g", d->kld_mean,
                     s->quality.max_mean_kld);
        }
    }
    if (!isnan(s->quality.min_same_top1)) {
        if (isnan(d->same_top1))
            note_add(r->note, sizeof r->note, "same top-1 not measured (no position compared)");
        else if (d->same_top1 < s->quality.min_same_top1) {
            r->pass = 0;
            note_add(r->note, sizeof r->note, "same top-1 %.1f %% below the limit %.1f %%", 100 * d->same_top1,
                     100 * s->quality.min_same_top1);
        }
    }
    if (!isnan(s->quality.min_exact_match)) {
        if (isnan(d->exact_match))
            note_add(r->note, sizeof r->note, "exact match not measured (no free-running answers)");
        else if (d->exact_match < s->quality.min_exact_match) {
            r->pass = 0;
            note_add(r->note, sizeof r->note, "%u of %u answers identical (%.1f %%), below the limit %.1f %%", d->exact,
                     d->answers, 100 * d->exact_match, 100 * s->quality.min_exact_match);
        }
    }
}

int st_quality_to_json(const st_quality_result *r, st_buf *out)
{
    const st_drift_summary *d = &r->d;
    json_t *o = json_pack("{s:s, s:s, s:i, s:b, s:b, s:o, s:i, s:b, s:s}", "status", st_qstatus_name(r->status), "mode",
                          r->mode, "prompts", (json_int_t)r->prompts, "synthetic", r->synthetic, "emulated",
                          r->emulated, "engine_s", st_jnum_or_null(r->engine_s), "top_k", (json_int_t)r->top_k, "pass",
                          r->pass, "note", r->note);
    if (!o)
        return -1;
    json_t *dj = json_object();
    json_object_set_new(dj, "positions", json_integer((json_int_t)d->positions));
    json_object_set_new(dj, "missing", json_integer((json_int_t)d->missing));
    json_object_set_new(dj, "kld_mean", st_jnum_or_null(d->kld_mean));
    json_object_set_new(dj, "kld_p50", st_jnum_or_null(d->kld_p50));
    json_object_set_new(dj, "kld_p90", st_jnum_or_null(d->kld_p90));
    json_object_set_new(dj, "kld_p99", st_jnum_or_null(d->kld_p99));
    json_object_set_new(dj, "kld_max", st_jnum_or_null(d->kld_max));
    json_object_set_new(dj, "same_top1", st_jnum_or_null(d->same_top1));
    json_object_set_new(dj, "dp_n", json_integer((json_int_t)d->dp_n));
    json_object_set_new(dj, "dp_mean", st_jnum_or_null(d->dp_mean));
    json_object_set_new(dj, "dp_p01", st_jnum_or_null(d->dp_p01));
    json_object_set_new(dj, "dp_p50", st_jnum_or_null(d->dp_p50));
    json_object_set_new(dj, "dp_p99", st_jnum_or_null(d->dp_p99));
    json_object_set_new(dj, "rest_base_mean", st_jnum_or_null(d->rest_base_mean));
    json_object_set_new(dj, "answers", json_integer(d->answers));
    json_object_set_new(dj, "exact", json_integer(d->exact));
    json_object_set_new(dj, "exact_match", st_jnum_or_null(d->exact_match));
    json_object_set_new(dj, "diverged", json_integer(d->diverged));
    json_object_set_new(dj, "div_mean", st_jnum_or_null(d->div_mean));
    json_object_set_new(dj, "div_p50", st_jnum_or_null(d->div_p50));
    json_object_set_new(o, "drift", dj);
    char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    if (!s)
        return -1;
    st_buf_puts(out, s);
    free(s);
    return st_buf_error(out) ? -1 : 0;
}

static double jnum(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static uint64_t jint(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_integer(v) && json_integer_value(v) >= 0 ? (uint64_t)json_integer_value(v) : 0;
}

int st_quality_from_json(const char *text, size_t len, st_quality_result *out)
{
    memset(out, 0, sizeof *out);
    json_t *o = json_loadb(text, len, 0, NULL);
    json_t *st = json_object_get(o, "status"), *dj = json_object_get(o, "drift");
    if (!json_is_object(o) || !json_is_string(st) || st_qstatus_from_name(json_string_value(st), &out->status) ||
        !json_is_object(dj)) {
        json_decref(o);
        return -1;
    }
    const char *m = json_string_value(json_object_get(o, "mode"));
    snprintf(out->mode, sizeof out->mode, "%s", m ? m : "");
    const char *n = json_string_value(json_object_get(o, "note"));
    snprintf(out->note, sizeof out->note, "%s", n ? n : "");
    out->prompts = (uint32_t)jint(o, "prompts");
    out->synthetic = json_is_true(json_object_get(o, "synthetic"));
    out->emulated = json_is_true(json_object_get(o, "emulated"));
    out->pass = json_is_true(json_object_get(o, "pass"));
    out->engine_s = jnum(o, "engine_s");
    out->top_k = (uint32_t)jint(o, "top_k");
    st_drift_summary *d = &out->d;
    d->positions = jint(dj, "positions");
    d->missing = jint(dj, "missing");
    d->kld_mean = jnum(dj, "kld_mean");
    d->kld_p50 = jnum(dj, "kld_p50");
    d->kld_p90 = jnum(dj, "kld_p90");
    d->kld_p99 = jnum(dj, "kld_p99");
    d->kld_max = jnum(dj, "kld_max");
    d->same_top1 = jnum(dj, "same_top1");
    d->dp_n = jint(dj, "dp_n");
    d->dp_mean = jnum(dj, "dp_mean");
    d->dp_p01 = jnum(dj, "dp_p01");
    d->dp_p50 = jnum(dj, "dp_p50");
    d->dp_p99 = jnum(dj, "dp_p99");
    d->rest_base_mean = jnum(dj, "rest_base_mean");
    d->answers = (uint32_t)jint(dj, "answers");
    d->exact = (uint32_t)jint(dj, "exact");
    d->exact_match = jnum(dj, "exact_match");
    d->diverged = (uint32_t)jint(dj, "diverged");
    d->div_mean = jnum(dj, "div_mean");
    d->div_p50 = jnum(dj, "div_p50");
    json_decref(o);
    return 0;
}

void st_quality_key(const char *config, char *out, size_t n) { snprintf(out, n, "quality/%s", config); }
