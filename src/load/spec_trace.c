/* Offline n-gram acceptance over a log with text (load/spec_trace.h). */
#include "load/spec_trace.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "load/workload.h"

struct st_spec_stats {
    st_ngram_params p[ST_SPEC_PARAMS_MAX];
    st_ngram_replay *r[ST_SPEC_PARAMS_MAX];
    int n;
    st_spec_tokenize_fn tok;
    void *tok_arg;
    st_spec_counts c;
    st_ngram_acc total[ST_SPEC_PARAMS_MAX];
    st_ngram_acc (*by_cat)[ST_SPEC_CATEGORIES_MAX + 1]; /* [param][category]; the last is "other" */
    char cat[ST_SPEC_CATEGORIES_MAX + 1][ST_SPEC_CATEGORY_LEN];
    int n_cat;
    int other_used;
    /* scratch */
    uint32_t *ids;
    size_t ids_cap;
    uint32_t *part;
    size_t part_cap;
    char *text;
    size_t text_cap;
};

void st_ngram_params_name(const st_ngram_params *p, char *out, size_t cap)
{
    if (p->max_model_len)
        snprintf(out, cap, "ngram:%u,%u,%u,%u", p->k, p->min_n, p->max_n, p->max_model_len);
    else
        snprintf(out, cap, "ngram:%u,%u,%u", p->k, p->min_n, p->max_n);
}

st_spec_stats *st_spec_stats_new(const st_ngram_params *p, int n, st_spec_tokenize_fn tok, void *tok_arg, char *err,
                                 size_t errlen)
{
    if (n < 1 || n > ST_SPEC_PARAMS_MAX) {
        snprintf(err, errlen, "1 to %d sets of n-gram parameters, not %d", ST_SPEC_PARAMS_MAX, n);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (st_ngram_params_check(&p[i], err, errlen))
            return NULL;
    st_spec_stats *s = calloc(1, sizeof *s);
    if (!s)
        goto oom;
    s->by_cat = calloc((size_t)n, sizeof *s->by_cat);
    if (!s->by_cat)
        goto oom;
    s->n = n;
    s->tok = tok;
    s->tok_arg = tok_arg;
    for (int i = 0; i < n; i++) {
        s->p[i] = p[i];
        s->r[i] = st_ngram_replay_new(&p[i]);
        if (!s->r[i])
            goto oom;
    }
    return s;
oom:
    st_spec_stats_free(s);
    snprintf(err, errlen, "out of memory");
    return NULL;
}

void st_spec_stats_free(st_spec_stats *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n; i++)
        st_ngram_replay_free(s->r[i]);
    free(s->by_cat);
    free(s->ids);
    free(s->part);
    free(s->text);
    free(s);
}

__attribute__((format(printf, 3, 4))) static void bad(st_spec_stats *s, uint64_t line, const char *fmt, ...)
{
    if (s->c.n_bad_first >= ST_SPEC_BAD_KEPT)
        return;
    char *o = s->c.bad_first[s->c.n_bad_first++];
    int w = snprintf(o, 320, "line %llu: ", (unsigned long long)line);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o + w, 320 - (size_t)w, fmt, ap);
    va_end(ap);
}

/* A JSON array of ids appended to s->ids at *n. 1 appended, 0 not ids, -1 out of memory. */
static int take_ids(st_spec_stats *s, json_t *a, size_t *n)
{
    if (!json_is_array(a))
        return 0;
    size_t m = json_array_size(a);
    for (size_t i = 0; i < m; i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 0xffffffffLL)
            return 0;
    }
    if (st_grow((void **)&s->ids, &s->ids_cap, *n + m + 1, sizeof *s->ids, 256))
        return -1;
    for (size_t i = 0; i < m; i++)
        s->ids[(*n)++] = (uint32_t)json_integer_value(json_array_get(a, i));
    return 1;
}

/* The text of a message's content: a string, or an array of parts {"type": "text", "text"}. */
static int append_text(st_spec_stats *s, size_t *len, const char *t, size_t n)
{
    if (st_grow((void **)&s->text, &s->text_cap, *len + n + 2, 1, 256))
        return -1;
    memcpy(s->text + *len, t, n);
    *len += n;
    s->text[*len] = '\0';
    return 0;
}

static int content_text(st_spec_stats *s, json_t *c, size_t *len, int *found)
{
    if (json_is_string(c)) {
        *found = 1;
        return append_text(s, len, json_string_value(c), json_string_length(c));
    }
    if (json_is_array(c)) {
        size_t i;
        json_t *part;
        json_array_foreach(c, i, part)
        {
            json_t *t = json_object_get(part, "text");
            if (json_is_string(t)) {
                *found = 1;
                if (append_text(s, len, json_string_value(t), json_string_length(t)))
                    return -1;
            }
        }
    }
    return 0;
}

/* The prompt's text into s->text (NUL-terminated): 1 found, 0 none, -1 out of memory. */
static int prompt_text(st_spec_stats *s, json_t *o, size_t *len)
{
    *len = 0;
    json_t *t = json_object_get(o, "text");
    if (!json_is_string(t))
        t = json_object_get(o, "prompt");
    if (json_is_string(t))
        return append_text(s, len, json_string_value(t), json_string_length(t)) ? -1 : 1;
    json_t *m = json_object_get(o, "messages");
    if (!json_is_array(m))
        return 0;
    int found = 0;
    size_t i;
    json_t *msg;
    json_array_foreach(m, i, msg)
    {
        if (*len && append_text(s, len, "\n", 1))
            return -1;
        if (content_text(s, json_object_get(msg, "content"), len, &found))
            return -1;
    }
    return found;
}

/* The completion's text: 1 found, 0 none, -1 out of memory. */
static int completion_text(st_spec_stats *s, json_t *o, size_t *len)
{
    *len = 0;
    static const char *const keys[] = { "completion", "output_text", "response" };
    for (int k = 0; k < 3; k++) {
        json_t *t = json_object_get(o, keys[k]);
        if (json_is_string(t))
            return append_text(s, len, json_string_value(t), json_string_length(t)) ? -1 : 1;
    }
    json_t *resp = json_object_get(o, "response");
    json_t *choices = json_object_get(json_is_object(resp) ? resp : o, "choices");
    json_t *c0 = json_array_get(choices, 0);
    if (!json_is_object(c0))
        return 0;
    json_t *t = json_object_get(json_object_get(c0, "message"), "content");
    if (!json_is_string(t))
        t = json_object_get(c0, "text");
    if (!json_is_string(t))
        return 0;
    return append_text(s, len, json_string_value(t), json_string_length(t)) ? -1 : 1;
}

/* Tokenizes s->text[0..len) and appends the ids at *n. 0, or -1 with err. */
static int tokenize_append(st_spec_stats *s, size_t len, size_t *n, char *err, size_t errlen)
{
    int64_t m = s->tok(s->tok_arg, s->text, len, &s->part, &s->part_cap, err, errlen);
    if (m < 0)
        return -1;
    if (st_grow((void **)&s->ids, &s->ids_cap, *n + (size_t)m + 1, sizeof *s->ids, 256)) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    memcpy(s->ids + *n, s->part, (size_t)m * sizeof *s->ids);
    *n += (size_t)m;
    return 0;
}

static int category_of(st_spec_stats *s, json_t *o)
{
    json_t *c = json_object_get(o, "category");
    if (!json_is_string(c))
        return -1;
    const char *name = json_string_value(c);
    for (int i = 0; i < s->n_cat; i++)
        if (!strncmp(s->cat[i], name, ST_SPEC_CATEGORY_LEN - 1) && strlen(name) < ST_SPEC_CATEGORY_LEN)
            return i;
    if (s->n_cat < ST_SPEC_CATEGORIES_MAX && strlen(name) < ST_SPEC_CATEGORY_LEN) {
        snprintf(s->cat[s->n_cat], ST_SPEC_CATEGORY_LEN, "%s", name);
        return s->n_cat++;
    }
    s->other_used = 1;
    return ST_SPEC_CATEGORIES_MAX;
}

/* Replays s->ids[0..n) (the first n_prompt the prompt) under every set of parameters. 0 or -1
 * (out of memory). */
static int replay(st_spec_stats *s, size_t n_prompt, size_t n, int cat, int used_text, uint64_t line)
{
    if (n > ST_NGRAM_TOKENS_MAX) {
        s->c.too_long++;
        bad(s, line, "%zu tokens (at most %u replayed)", n, ST_NGRAM_TOKENS_MAX);
        return 0;
    }
    for (int k = 0; k < s->n; k++) {
        st_ngram_acc one;
        memset(&one, 0, sizeof one);
        if (st_ngram_replay_request(s->r[k], s->ids, n_prompt, n - n_prompt, &one))
            return -1;
        st_ngram_acc_add(&s->total[k], &one);
        if (cat >= 0)
            st_ngram_acc_add(&s->by_cat[k][cat], &one);
    }
    s->c.replayed++;
    if (used_text)
        s->c.from_text++;
    else
        s->c.from_ids++;
    s->c.prompt_tokens += n_prompt;
    s->c.completion_tokens += n - n_prompt;
    return 0;
}

static int is_answer(const char *role)
{
    return role && (!strcmp(role, "assistant") || !strcmp(role, "gpt") || !strcmp(role, "model") ||
                    !strcmp(role, "chatgpt") || !strcmp(role, "bing") || !strcmp(role, "bard"));
}

/* A conversation with its answers in it: ShareGPT's "conversations" [{"from", "value"}], or chat
 * "messages" with assistant turns and no separate completion. Each answer is one request whose
 * prompt is the turns before it. 1 handled, 0 not such a line, -1 out of memory. */
static int conversation(st_spec_stats *s, json_t *root, int cat, uint64_t line)
{
    json_t *conv = json_object_get(root, "conversations");
    int sharegpt = json_is_array(conv);
    if (!sharegpt)
        conv = json_object_get(root, "messages");
    if (!json_is_array(conv))
        return 0;
    size_t m = json_array_size(conv), answers = 0;
    for (size_t i = 1; i < m; i++) {
        json_t *t = json_array_get(conv, i), *r = json_object_get(t, "from");
        if (!json_is_string(r))
            r = json_object_get(t, "role");
        answers += is_answer(json_string_value(r));
    }
    if (!answers && sharegpt) {
        s->c.no_completion++;
        bad(s, line, "a conversation without an answer (no gpt / assistant turn after the first)");
        return 1;
    }
    if (!answers)
        return 0; /* chat messages: the prompt, the completion looked for elsewhere */
    if (!s->tok) {
        s->c.no_tokenizer++;
        bad(s, line, "a conversation's text, and no tokenizer given (--vocab)");
        return 1;
    }
    for (size_t i = 1; i < m; i++) {
        json_t *t = json_array_get(conv, i), *r = json_object_get(t, "from");
        if (!json_is_string(r))
            r = json_object_get(t, "role");
        if (!is_answer(json_string_value(r)))
            continue;
        size_t tlen = 0, n = 0;
        int found = 0;
        char err[200];
        for (size_t j = 0; j < i; j++) {
            json_t *u = json_array_get(conv, j), *v = json_object_get(u, "value");
            if (!v)
                v = json_object_get(u, "content");
            if (tlen && append_text(s, &tlen, "\n", 1))
                return -1;
            if (content_text(s, v, &tlen, &found))
                return -1;
        }
        if (!found) {
            s->c.no_prompt++;
            bad(s, line, "turn %zu: no text before the answer", i);
            continue;
        }
        if (tokenize_append(s, tlen, &n, err, sizeof err)) {
            s->c.untokenized++;
            bad(s, line, "turn %zu, the prompt: %s", i, err);
            continue;
        }
        size_t n_prompt = n;
        json_t *v = json_object_get(t, "value");
        if (!v)
            v = json_object_get(t, "content");
        tlen = 0;
        found = 0;
        if (content_text(s, v, &tlen, &found))
            return -1;
        if (!found) {
            s->c.no_completion++;
            bad(s, line, "turn %zu: an answer without text", i);
            continue;
        }
        if (tokenize_append(s, tlen, &n, err, sizeof err)) {
            s->c.untokenized++;
            bad(s, line, "turn %zu, the answer: %s", i, err);
            continue;
        }
        if (replay(s, n_prompt, n, cat, 1, line))
            return -1;
    }
    return 1;
}

int st_spec_stats_add_line(st_spec_stats *s, const char *text, size_t len, uint64_t line)
{
    if (st_line_is_blank(text, len))
        return 0;
    s->c.lines++;
    json_error_t jerr;
    json_t *root = json_loadb(text, len, 0, &jerr);
    if (!json_is_object(root)) {
        s->c.malformed++;
        if (root)
            bad(s, line, "not a JSON object");
        else
            bad(s, line, "invalid JSON at column %d: %s", jerr.column, st_trace_json_reason(jerr.text));
        json_decref(root);
        return 0;
    }
    int rc = 0;
    json_t *req = json_object_get(root, "request");
    if (!json_is_object(req))
        req = json_object_get(root, "body");
    if (!json_is_object(req))
        req = root;
    char err[200];
    size_t n = 0, tlen = 0;
    if (req == root && !json_object_get(root, "output_ids") && !json_object_get(root, "input_ids")) {
        size_t clen;
        int ct = completion_text(s, root, &clen);
        if (ct < 0)
            goto oom;
        if (!ct) { /* a conversation that holds its answers */
            int cv = conversation(s, root, category_of(s, root), line);
            if (cv < 0)
                goto oom;
            if (cv)
                goto out;
        }
    }
    /* the prompt */
    int got = take_ids(s, json_object_get(req, "input_ids"), &n);
    if (got < 0)
        goto oom;
    int used_text = 0;
    if (!got) {
        int pt = prompt_text(s, req, &tlen);
        if (pt < 0)
            goto oom;
        if (!pt) {
            s->c.no_prompt++;
            if (json_object_get(req, "input_tokens") || json_object_get(req, "input_length") ||
                json_object_get(req, "prompt_tokens"))
                bad(s, line, "token counts only, no text: nothing to replay");
            else
                bad(s, line, "no prompt (text, prompt, messages or input_ids)");
            goto out;
        }
        if (!s->tok) {
            s->c.no_tokenizer++;
            bad(s, line, "text without token ids, and no tokenizer given (--vocab)");
            goto out;
        }
        if (tokenize_append(s, tlen, &n, err, sizeof err)) {
            s->c.untokenized++;
            bad(s, line, "the prompt: %s", err);
            goto out;
        }
        used_text = 1;
    }
    size_t n_prompt = n;
    got = take_ids(s, json_object_get(root, "output_ids"), &n);
    if (got < 0)
        goto oom;
    if (!got) {
        int ct = completion_text(s, root, &tlen);
        if (ct < 0)
            goto oom;
        if (!ct) {
            s->c.no_completion++;
            bad(s, line, "no completion (completion, output_text, response, choices[0] or output_ids)");
            goto out;
        }
        if (!s->tok) {
            s->c.no_tokenizer++;
            bad(s, line, "completion text without token ids, and no tokenizer given (--vocab)");
            goto out;
        }
        if (tokenize_append(s, tlen, &n, err, sizeof err)) {
            s->c.untokenized++;
            bad(s, line, "the completion: %s", err);
            goto out;
        }
        used_text = 1;
    }
    if (replay(s, n_prompt, n, category_of(s, root), used_text, line))
        goto oom;
out:
    json_decref(root);
    return rc;
oom:
    json_decref(root);
    return -1;
}

const st_spec_counts *st_spec_stats_counts(const st_spec_stats *s) { return &s->c; }
int st_spec_stats_n_params(const st_spec_stats *s) { return s->n; }
const st_ngram_params *st_spec_stats_params(const st_spec_stats *s, int i) { return &s->p[i]; }
const st_ngram_acc *st_spec_stats_total(const st_spec_stats *s, int i) { return &s->total[i]; }
int st_spec_stats_n_categories(const st_spec_stats *s) { return s->n_cat + (s->other_used ? 1 : 0); }
const char *st_spec_stats_category(const st_spec_stats *s, int c) { return c < s->n_cat ? s->cat[c] : "other"; }
const st_ngram_acc *st_spec_stats_by_category(const st_spec_stats *s, int i, int c)
{
    return &s->by_cat[i][c < s->n_cat ? c : ST_SPEC_CATEGORIES_MAX];
}

static json_t *num_or_null(double v) { return v == v ? json_real(v) : json_null(); }

static json_t *acc_json(const st_ngram_acc *a)
{
    st_ngram_figures f;
    st_ngram_figures_of(a, &f);
    json_t *o = json_object();
    json_object_set_new(o, "requests", json_integer((json_int_t)a->requests));
    json_object_set_new(o, "acceptance_rate", num_or_null(f.acceptance_rate));
    json_object_set_new(o, "mean_acceptance_length", num_or_null(f.mean_accept_len));
    json_object_set_new(o, "no_proposal_share", num_or_null(f.no_proposal_share));
    json_object_set_new(o, "tokens_per_step", num_or_null(f.tokens_per_step));
    json_object_set_new(o, "steps", json_integer((json_int_t)a->steps));
    json_object_set_new(o, "steps_without_proposal", json_integer((json_int_t)a->no_proposal));
    json_object_set_new(o, "num_drafts", json_integer((json_int_t)a->drafts));
    json_object_set_new(o, "num_draft_tokens", json_integer((json_int_t)a->draft_tokens));
    json_object_set_new(o, "num_accepted_tokens", json_integer((json_int_t)a->accepted));
    json_object_set_new(o, "draft_tokens_past_completion", json_integer((json_int_t)a->truncated));
    json_t *pos = json_array(), *cnt = json_array();
    for (uint32_t i = 0; i < f.n_pos; i++) {
        json_array_append_new(pos, num_or_null(f.pos_rate[i]));
        json_array_append_new(cnt, json_integer((json_int_t)a->accepted_pos[i]));
    }
    json_object_set_new(o, "acceptance_per_position", pos);
    json_object_set_new(o, "num_accepted_tokens_per_pos", cnt);
    return o;
}

json_t *st_spec_stats_json(const st_spec_stats *s, const char *tokens_from)
{
    json_t *o = json_object();
    const st_spec_counts *c = &s->c;
    json_object_set_new(o, "proposer", json_string("vLLM ngram (prompt lookup), replayed at temperature 0"));
    json_object_set_new(o, "token_ids", json_string(tokens_from ? tokens_from : "from the log"));
    json_t *cj = json_object();
    json_object_set_new(cj, "lines", json_integer((json_int_t)c->lines));
    json_object_set_new(cj, "replayed", json_integer((json_int_t)c->replayed));
    json_object_set_new(cj, "ids_from_log", json_integer((json_int_t)c->from_ids));
    json_object_set_new(cj, "ids_from_text", json_integer((json_int_t)c->from_text));
    json_object_set_new(cj, "malformed", json_integer((json_int_t)c->malformed));
    json_object_set_new(cj, "no_prompt", json_integer((json_int_t)c->no_prompt));
    json_object_set_new(cj, "no_completion", json_integer((json_int_t)c->no_completion));
    json_object_set_new(cj, "no_tokenizer", json_integer((json_int_t)c->no_tokenizer));
    json_object_set_new(cj, "untokenized", json_integer((json_int_t)c->untokenized));
    json_object_set_new(cj, "too_long", json_integer((json_int_t)c->too_long));
    json_object_set_new(cj, "prompt_tokens", json_integer((json_int_t)c->prompt_tokens));
    json_object_set_new(cj, "completion_tokens", json_integer((json_int_t)c->completion_tokens));
    json_t *bf = json_array();
    for (uint32_t i = 0; i < c->n_bad_first; i++)
        json_array_append_new(bf, json_string(c->bad_first[i]));
    json_object_set_new(cj, "skipped_first", bf);
    json_object_set_new(o, "counts", cj);
    json_t *res = json_array();
    for (int i = 0; i < s->n; i++) {
        char name[80];
        st_ngram_params_name(&s->p[i], name, sizeof name);
        json_t *r = acc_json(&s->total[i]);
        json_object_set_new(r, "spec", json_string(name));
        json_object_set_new(r, "num_speculative_tokens", json_integer(s->p[i].k));
        json_object_set_new(r, "prompt_lookup_min", json_integer(s->p[i].min_n));
        json_object_set_new(r, "prompt_lookup_max", json_integer(s->p[i].max_n));
        int nc = st_spec_stats_n_categories(s);
        if (nc) {
            json_t *bc = json_object();
            for (int k = 0; k < nc; k++)
                json_object_set_new(bc, st_spec_stats_category(s, k), acc_json(st_spec_stats_by_category(s, i, k)));
            json_object_set_new(r, "by_category", bc);
        }
        json_array_append_new(res, r);
    }
    json_object_set_new(o, "results", res);
    return o;
}
