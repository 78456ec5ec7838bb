#include "load/api.h"

#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/parse.h"
#include "core/util.h"

static const char *api_names[] = { "completions", "chat", "tgi", "llamacpp", "sglang" };

int st_api_from_name(const char *name, st_api_kind *out)
{
    if (!name)
        return -1;
    for (int i = 0; i < 5; i++)
        if (strcmp(name, api_names[i]) == 0) {
            *out = (st_api_kind)i;
            return 0;
        }
    if (strcmp(name, "llama.cpp") == 0) {
        *out = ST_API_LLAMACPP;
        return 0;
    }
    return -1;
}

const char *st_api_name(st_api_kind k) { return ((unsigned)k < 5) ? api_names[k] : "unknown"; }

const char *st_api_path(st_api_kind k, int stream)
{
    switch (k) {
    case ST_API_COMPLETIONS: return "/v1/completions";
    case ST_API_CHAT: return "/v1/chat/completions";
    case ST_API_TGI: return stream ? "/generate_stream" : "/generate";
    case ST_API_LLAMACPP: return "/completion";
    case ST_API_SGLANG: return "/generate";
    }
    return "/";
}

int st_api_sends_done(st_api_kind k) { return k == ST_API_COMPLETIONS || k == ST_API_CHAT || k == ST_API_SGLANG; }

int st_api_takes_ids(st_api_kind k) { return k == ST_API_COMPLETIONS || k == ST_API_LLAMACPP || k == ST_API_SGLANG; }

/* ---- request bodies ---------------------------------------------------------------- */

static int put_u32(st_buf *b, uint32_t v)
{
    char tmp[10];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (st_buf_reserve(b, (size_t)n) < 0)
        return -1;
    while (n)
        b->data[b->len++] = tmp[--n];
    b->data[b->len] = '\0';
    return 0;
}

static int put_ids(st_buf *b, const uint32_t *ids, uint32_t n)
{
    /* Reserve the worst case once (10 digits + comma each) when it fits the maximum. */
    size_t worst = (size_t)n * 11 + 2;
    if (st_buf_fits(b, worst))
        (void)st_buf_reserve(b, worst);
    if (st_buf_append(b, "[", 1) < 0)
        return -1;
    for (uint32_t i = 0; i < n; i++) {
        if (i && st_buf_append(b, ",", 1) < 0)
            return -1;
        if (put_u32(b, ids[i]) < 0)
            return -1;
    }
    return st_buf_append(b, "]", 1);
}

/* The prompt as a JSON string. Derived words are plain ASCII letters, so they need no
 * escaping and are appended between quotes directly. */
/* The item's own text (without a session's history). */
static int put_own_text(st_buf *b, const st_work_item *it)
{
    if (it->input_text)
        return st_buf_json_str(b, it->input_text);
    if (!it->input_ids)
        return -1;
    if (st_buf_append(b, "\"", 1) < 0 || st_workload_text(it, b) < 0)
        return -1;
    return st_buf_append(b, "\"", 1);
}

/* The whole prompt as text: a session turn's history, then its own text. */
static int put_text(st_buf *b, const st_work_item *it)
{
    if (!it->n_history)
        return put_own_text(b, it);
    st_buf t;
    st_buf_init(&t, b->max);
    int rc = st_workload_prompt_text(it, &t) < 0 ? -1 : st_buf_json_strn(b, t.data ? t.data : "", t.len);
    st_buf_free(&t);
    return rc;
}

/* Session turns go as text: their history is text the server returned. */
static int as_ids(const st_work_item *it) { return it->input_ids && !it->session; }

static int put_prompt(st_buf *b, const st_work_item *it)
{
    if (as_ids(it))
        return put_ids(b, it->input_ids, it->input_len);
    return put_text(b, it);
}

/* Chat messages: a session's history as alternating user / assistant turns, then the user's
 * new text. */
static int put_messages(st_buf *b, const st_work_item *it)
{
    int rc = st_buf_puts(b, "\"messages\":[");
    for (uint32_t k = 0; k < it->n_history; k++) {
        rc |= st_buf_printf(b, "{\"role\":\"%s\",\"content\":", k % 2 ? "assistant" : "user");
        rc |= st_buf_json_str(b, it->history[k] ? it->history[k] : "");
        rc |= st_buf_puts(b, "},");
    }
    rc |= st_buf_puts(b, "{\"role\":\"user\",\"content\":");
    rc |= put_own_text(b, it);
    rc |= st_buf_puts(b, "}]");
    return rc ? -1 : 0;
}

static int put_model(st_buf *b, const char *model)
{
    if (!model)
        return 0;
    if (st_buf_puts(b, "\"model\":") < 0 || st_buf_json_str(b, model) < 0)
        return -1;
    return st_buf_append(b, ",", 1);
}

int st_api_build_body(st_api_kind k, const char *model, const st_work_item *it, int stream, st_buf *out)
{
    return st_api_build_body_t(k, model, it, stream, -1, out);
}

int st_api_build_body_t(st_api_kind k, const char *model, const st_work_item *it, int stream, double temperature,
                        st_buf *out)
{
    if (!it || !out || (!it->input_ids && !it->input_text))
        return -1;
    uint32_t n = it->output_len;
    const char *tf = stream ? "true" : "false";
    int rc = 0;
    switch (k) {
    case ST_API_COMPLETIONS:
        rc |= st_buf_append(out, "{", 1);
        rc |= put_model(out, model);
        rc |= st_buf_puts(out, "\"prompt\":");
        rc |= put_prompt(out, it);
        rc |= st_buf_printf(out, ",\"max_tokens\":%u,\"min_tokens\":%u,\"ignore_eos\":true,\"stream\":%s", n, n, tf);
        if (temperature >= 0)
            rc |= st_buf_printf(out, ",\"temperature\":%.17g", temperature);
        if (stream)
            rc |= st_buf_puts(out, ",\"stream_options\":{\"include_usage\":true}");
        rc |= st_buf_append(out, "}", 1);
        break;
    case ST_API_CHAT:
        rc |= st_buf_append(out, "{", 1);
        rc |= put_model(out, model);
        rc |= put_messages(out, it);
        rc |= st_buf_printf(out,
                            ",\"max_completion_tokens\":%u,\"max_tokens\":%u,\"min_tokens\":%u,"
                            "\"ignore_eos\":true,\"stream\":%s",
                            n, n, n, tf);
        if (temperature >= 0)
            rc |= st_buf_printf(out, ",\"temperature\":%.17g", temperature);
        if (stream)
            rc |= st_buf_puts(out, ",\"stream_options\":{\"include_usage\":true}");
        rc |= st_buf_append(out, "}", 1);
        break;
    case ST_API_TGI:
        rc |= st_buf_puts(out, "{\"inputs\":");
        rc |= put_text(out, it);
        rc |= st_buf_printf(out, ",\"parameters\":{\"max_new_tokens\":%u,\"details\":true", n);
        if (temperature > 0)
            rc |= st_buf_printf(out, ",\"temperature\":%.17g,\"do_sample\":true", temperature);
        rc |= st_buf_puts(out, "}}");
        break;
    case ST_API_LLAMACPP:
        rc |= st_buf_puts(out, "{\"prompt\":");
        rc |= put_prompt(out, it);
        rc |= st_buf_printf(out, ",\"n_predict\":%u,\"ignore_eos\":true,\"stream\":%s,\"cache_prompt\":true", n, tf);
        if (temperature >= 0)
            rc |= st_buf_printf(out, ",\"temperature\":%.17g", temperature);
        rc |= st_buf_append(out, "}", 1);
        break;
    case ST_API_SGLANG:
        rc |= st_buf_append(out, "{", 1);
        if (as_ids(it)) {
            rc |= st_buf_puts(out, "\"input_ids\":");
            rc |= put_ids(out, it->input_ids, it->input_len);
        } else {
            rc |= st_buf_puts(out, "\"text\":");
            rc |= put_text(out, it);
        }
        rc |= st_buf_printf(out,
                            ",\"sampling_params\":{\"max_new_tokens\":%u,\"min_new_tokens\":%u,"
                            "\"ignore_eos\":true",
                            n, n);
        if (temperature >= 0)
            rc |= st_buf_printf(out, ",\"temperature\":%.17g", temperature);
        rc |= st_buf_printf(out, "},\"stream\":%s}", tf);
        break;
    default: return -1;
    }
    return rc ? -1 : 0;
}

/* ---- responses and stream events ------------------------------------------------- */

void st_api_event_reset(st_api_event *ev) { memset(ev, 0, sizeof *ev); }

static void begin_event(st_api_event *ev)
{
    uint32_t cum = ev->cum_tokens;
    int think = ev->in_think;
    memset(ev, 0, sizeof *ev);
    ev->cum_tokens = cum;
    ev->in_think = think;
}

/* ---- <think> spans ---- */

enum { VIS_ANSWER = 1, VIS_REASON = 2, VIS_TAG = 4 }; /* VIS_TAG: a <think> or </think> tag */

/* 1 when an escaped JSON string body has a character other than blanks (and \n \t \r). */
static int has_visible(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c == ' ')
            continue;
        if (c == '\\' && i + 1 < n && (p[i + 1] == 'n' || p[i + 1] == 't' || p[i + 1] == 'r')) {
            i++;
            continue;
        }
        return 1;
    }
    return 0;
}

/* Walks text (unescaped) through <think> spans: returns VIS_ANSWER when a visible character
 * sits outside a span, VIS_REASON when one sits inside, and leaves *in_think at the end
 * state. When out is set, the text outside the spans is appended to it. */
static int think_walk(const char *t, size_t n, int *in_think, st_buf *out)
{
    int flags = 0;
    size_t i = 0, run = 0;
    while (i < n) {
        if (t[i] == '<') {
            if (!*in_think && n - i >= 7 && !memcmp(t + i, "<think>", 7)) {
                if (out && i > run)
                    st_buf_append(out, t + run, i - run);
                *in_think = 1;
                flags |= VIS_TAG;
                i += 7;
                run = i;
                continue;
            }
            if (*in_think && n - i >= 8 && !memcmp(t + i, "</think>", 8)) {
                *in_think = 0;
                flags |= VIS_TAG;
                i += 8;
                run = i;
                continue;
            }
        }
        char c = t[i];
        if (c != ' ' && c != '\n' && c != '\t' && c != '\r')
            flags |= *in_think ? VIS_REASON : VIS_ANSWER;
        i++;
    }
    if (out && !*in_think && n > run)
        st_buf_append(out, t + run, n - run);
    return flags;
}

/* Classifies a text field of an event. */
static int think_scan(const st_json_val *v, int *in_think)
{
    if (v->type != ST_JSON_STRING || v->len < 2)
        return 0;
    const char *p = v->p + 1;
    size_t n = v->len - 2;
    if (!memchr(p, '<', n) && !memmem(p, n, "\\u003c", 6) && !memmem(p, n, "\\u003C", 6))
        return has_visible(p, n) ? (*in_think ? VIS_REASON : VIS_ANSWER) : 0;
    char buf[8192];
    size_t len = 0;
    if (st_json_str(v, buf, sizeof buf, &len) < 0)
        return 0;
    return think_walk(buf, len, in_think, NULL);
}

int st_api_append_text(const st_json_val *v, int strip_think, int *in_think, st_buf *out)
{
    if (v->type != ST_JSON_STRING)
        return 0;
    size_t cap = v->len + 1, len = 0;
    char small[4096];
    char *buf = cap <= sizeof small ? small : malloc(cap);
    if (!buf)
        return -1;
    int rc = st_json_str(v, buf, cap, &len) < 0 ? -1 : 0;
    if (rc == 0) {
        if (strip_think)
            think_walk(buf, len, in_think, out);
        else
            st_buf_append(out, buf, len);
    }
    if (buf != small)
        free(buf);
    return rc || st_buf_error(out) ? -1 : 0;
}

/* An event's answer text: counts its tokens as answer or reasoning. */
static void classify(st_api_event *ev, const st_json_val *text, uint32_t ntok)
{
    int f = think_scan(text, &ev->in_think);
    if (f & VIS_ANSWER)
        ev->answer_visible = 1;
    else if ((f & (VIS_REASON | VIS_TAG)) || ev->in_think)
        ev->reasoning += ntok;
}

static void set_err(st_api_event *ev, const char *msg) { st_strlcpy(ev->error, msg, sizeof ev->error); }

/* The top-level keys any API's event may carry, read in one pass over the object. */
enum {
    F_ERROR,
    F_OBJECT,
    F_MESSAGE,
    F_ERROR_TYPE,
    F_CHOICES,
    F_USAGE,
    F_TOKEN,
    F_GENERATED_TEXT,
    F_DETAILS,
    F_CONTENT,
    F_STOP,
    F_TEXT,
    F_META_INFO,
    F_TOKENS_PREDICTED,
    F_TOKENS_EVALUATED,
    F_TIMINGS,
    F__COUNT
};
static const char *const root_keys[F__COUNT] = {
    "error",     "object",           "message",          "error_type", "choices", "usage",
    "token",     "generated_text",   "details",          "content",    "stop",    "text",
    "meta_info", "tokens_predicted", "tokens_evaluated", "timings",
};

/* The fields each API reads (fewer keys to compare per member on the hot path). */
static const signed char api_fields[5][9] = {
    [ST_API_COMPLETIONS] = { F_ERROR, F_OBJECT, F_MESSAGE, F_CHOICES, F_USAGE, F_TIMINGS, -1 },
    [ST_API_CHAT] = { F_ERROR, F_OBJECT, F_MESSAGE, F_CHOICES, F_USAGE, F_TIMINGS, -1 },
    [ST_API_TGI] = { F_ERROR, F_OBJECT, F_MESSAGE, F_ERROR_TYPE, F_TOKEN, F_GENERATED_TEXT, F_DETAILS, -1 },
    [ST_API_LLAMACPP] = { F_ERROR, F_OBJECT, F_MESSAGE, F_CONTENT, F_STOP, F_TOKENS_PREDICTED, F_TOKENS_EVALUATED,
                          F_TIMINGS, -1 },
    [ST_API_SGLANG] = { F_ERROR, F_OBJECT, F_MESSAGE, F_TEXT, F_META_INFO, -1 },
};

/* Reads the API's fields of root into f[F__COUNT] (the others absent). */
static int read_fields(st_api_kind k, const st_json_val *root, st_json_val *f)
{
    const char *keys[F__COUNT];
    st_json_val vals[F__COUNT];
    int n = 0;
    for (int i = 0; i < F__COUNT; i++)
        f[i] = (st_json_val){ ST_JSON_ABSENT, NULL, 0 };
    if ((unsigned)k >= 5)
        return -1;
    while (n < 9 && api_fields[k][n] >= 0) {
        keys[n] = root_keys[(int)api_fields[k][n]];
        n++;
    }
    if (st_json_obj_fields(root, keys, n, vals) < 0)
        return -1;
    for (int i = 0; i < n; i++)
        f[(int)api_fields[k][i]] = vals[i];
    return 0;
}

static void copy_str(const st_json_val *v, char *msg, size_t cap)
{
    if (st_json_str(v, msg, cap, NULL) < 0 && cap)
        msg[0] = '\0';
}

/* Error shapes. Returns 1 (message in msg) when the fields are those of an error body. */
static int extract_error(const st_json_val *f, char *msg, size_t cap)
{
    const st_json_val *e = &f[F_ERROR];
    if (!st_json_is_nothing(e)) {
        if (e->type == ST_JSON_OBJECT) {
            if (st_json_get_str(e, "message", msg, cap) != 0 || !msg[0]) {
                if (st_json_get_str(e, "type", msg, cap) != 0 || !msg[0])
                    st_strlcpy(msg, "error object without a message", cap);
            }
        } else if (e->type == ST_JSON_STRING) {
            /* TGI: {"error": "...", "error_type": "..."} */
            size_t n = 0;
            if (st_json_str_nonempty(&f[F_ERROR_TYPE])) {
                char t[64];
                copy_str(&f[F_ERROR_TYPE], t, sizeof t);
                n = st_strlcpy(msg, t, cap);
                if (n + 2 < cap) {
                    memcpy(msg + n, ": ", 3);
                    n += 2;
                } else {
                    n = 0;
                }
            }
            if (n < cap)
                copy_str(e, msg + n, cap - n);
        } else {
            size_t n = e->len < cap - 1 ? e->len : cap - 1;
            memcpy(msg, e->p, n);
            msg[n] = '\0';
        }
        return 1;
    }
    if (st_json_str_eq(&f[F_OBJECT], "error", 5)) {
        copy_str(&f[F_MESSAGE], msg, cap);
        if (!msg[0])
            st_strlcpy(msg, "error object without a message", cap);
        return 1;
    }
    return 0;
}

static void read_openai_usage(const st_json_val *u, st_api_event *ev)
{
    if (u->type != ST_JSON_OBJECT)
        return;
    static const char *const keys[] = { "prompt_tokens", "completion_tokens", "prompt_tokens_details",
                                        "completion_tokens_details" };
    st_json_val v[4];
    if (st_json_obj_fields(u, keys, 4, v) < 0)
        return;
    ev->has_usage = 1;
    (void)st_json_u32(&v[0], &ev->usage_prompt);
    (void)st_json_u32(&v[1], &ev->usage_completion);
    (void)st_json_get_u32(&v[2], "cached_tokens", &ev->usage_cached);
    (void)st_json_get_u32(&v[3], "reasoning_tokens", &ev->usage_reasoning);
}

/* OpenAI completions / chat choices; msgkey is "delta" (chat stream) or "message". */
static void read_choices(const st_json_val *choices, int chat, const char *msgkey, st_api_event *ev)
{
    if (choices->type != ST_JSON_ARRAY)
        return;
    st_json_iter it;
    st_json_val c, v[3];
    const char *keys[3] = { "finish_reason", chat ? msgkey : "text", "token_ids" };
    st_json_iter_init(&it, choices);
    while (st_json_iter_next_fields(&it, keys, 3, &c, v) == 1) {
        if (c.type != ST_JSON_OBJECT)
            continue;
        if (!chat) {
            long nid = v[2].type == ST_JSON_ARRAY ? st_json_count(&v[2]) : 0;
            uint32_t nt = nid > 0 ? (uint32_t)nid : st_json_str_nonempty(&v[1]) ? 1 : 0;
            ev->tokens += nt;
            if (nt) {
                if (ev->content.type == ST_JSON_ABSENT)
                    ev->content = v[1];
                classify(ev, &v[1], nt);
            }
        } else if (v[1].type == ST_JSON_OBJECT) {
            static const char *const dkeys[] = { "content", "reasoning_content", "reasoning" };
            st_json_val d[3];
            if (st_json_obj_fields(&v[1], dkeys, 3, d) == 0) {
                int has_c = st_json_str_nonempty(&d[0]);
                int has_r = st_json_str_nonempty(&d[1]) || st_json_str_nonempty(&d[2]);
                if (has_c || has_r) {
                    ev->tokens += 1;
                    if (has_c) {
                        if (ev->content.type == ST_JSON_ABSENT)
                            ev->content = d[0];
                        int f = think_scan(&d[0], &ev->in_think);
                        if (f & VIS_ANSWER)
                            ev->answer_visible = 1;
                        else if (has_r || (f & (VIS_REASON | VIS_TAG)) || ev->in_think)
                            ev->reasoning += 1;
                    } else {
                        ev->reasoning += 1;
                    }
                }
            }
        }
        if (!st_json_is_nothing(&v[0]))
            ev->finished = 1;
    }
}

static void read_tgi(const st_json_val *f, st_api_event *ev)
{
    const st_json_val *tok = &f[F_TOKEN], *det = &f[F_DETAILS];
    if (tok->type == ST_JSON_OBJECT) {
        st_json_val sp;
        int special = 0;
        if (st_json_obj_get(tok, "special", 7, &sp) == 0)
            (void)st_json_bool(&sp, &special);
        if (!special) {
            ev->tokens = 1;
            st_json_val tx;
            if (st_json_obj_get(tok, "text", 4, &tx) == 0) {
                ev->content = tx;
                classify(ev, &tx, 1);
            }
        }
    }
    if (!st_json_is_nothing(&f[F_GENERATED_TEXT]))
        ev->finished = 1;
    if (det->type == ST_JSON_OBJECT) {
        ev->finished = 1;
        if (st_json_get_u32(det, "generated_tokens", &ev->usage_completion) == 0)
            ev->has_usage = 1;
    }
}

/* llama.cpp's `timings` {prompt_ms, predicted_ms, predicted_n, ...}: all three or nothing. */
static void read_timings(const st_json_val *t, st_api_event *ev)
{
    if (t->type != ST_JSON_OBJECT)
        return;
    static const char *const keys[] = { "prompt_ms", "predicted_ms", "predicted_n" };
    st_json_val v[3];
    double pm, gm;
    uint32_t gn;
    if (st_json_obj_fields(t, keys, 3, v) < 0 || st_json_num(&v[0], &pm) || st_json_num(&v[1], &gm) ||
        st_json_u32(&v[2], &gn) || !(pm >= 0) || !(gm >= 0))
        return;
    ev->has_timings = 1;
    ev->srv_prompt_ms = pm;
    ev->srv_gen_ms = gm;
    ev->srv_gen_n = gn;
    uint32_t dn, da;
    if (st_json_get_u32(t, "draft_n", &dn) == 0 && st_json_get_u32(t, "draft_n_accepted", &da) == 0 && da <= dn) {
        ev->has_draft = 1;
        ev->srv_draft_n = dn;
        ev->srv_draft_accepted = da;
    }
}

static void read_llamacpp(const st_json_val *f, st_api_event *ev)
{
    if (st_json_str_nonempty(&f[F_CONTENT])) {
        ev->tokens = 1;
        ev->content = f[F_CONTENT];
        classify(ev, &f[F_CONTENT], 1);
    }
    int stop = 0;
    (void)st_json_bool(&f[F_STOP], &stop);
    if (!stop)
        return;
    ev->finished = 1;
    uint32_t pred = 0, eval = 0, prompt_n = 0, cache_n = 0;
    int have_pred = st_json_u32(&f[F_TOKENS_PREDICTED], &pred) == 0;
    int have_eval = st_json_u32(&f[F_TOKENS_EVALUATED], &eval) == 0;
    int have_pn = st_json_get_u32(&f[F_TIMINGS], "prompt_n", &prompt_n) == 0;
    int have_cn = st_json_get_u32(&f[F_TIMINGS], "cache_n", &cache_n) == 0;
    if (!have_pred)
        have_pred = st_json_get_u32(&f[F_TIMINGS], "predicted_n", &pred) == 0;
    if (!have_eval && have_pn) {
        eval = prompt_n + (have_cn ? cache_n : 0);
        have_eval = 1;
    }
    if (have_pred || have_eval) {
        ev->has_usage = 1;
        ev->usage_completion = pred;
        ev->usage_prompt = eval;
        if (have_cn)
            ev->usage_cached = cache_n;
        else if (have_eval && have_pn && eval >= prompt_n)
            ev->usage_cached = eval - prompt_n;
    }
}

/* Returns 1 when the event is an SGLang abort (reported as an error). */
static int read_sglang(const st_json_val *f, st_api_event *ev, int streaming)
{
    const st_json_val *meta = &f[F_META_INFO];
    uint32_t ct = 0;
    int have_ct = 0;
    if (meta->type == ST_JSON_OBJECT) {
        static const char *const keys[] = { "completion_tokens", "prompt_tokens", "cached_tokens", "finish_reason" };
        st_json_val m[4];
        (void)st_json_obj_fields(meta, keys, 4, m);
        have_ct = st_json_u32(&m[0], &ct) == 0;
        if (have_ct) {
            ev->has_usage = 1;
            ev->usage_completion = ct;
            (void)st_json_u32(&m[1], &ev->usage_prompt);
            (void)st_json_u32(&m[2], &ev->usage_cached);
        }
        const st_json_val *fr = &m[3];
        if (!st_json_is_nothing(fr)) {
            st_json_val ty;
            if (fr->type == ST_JSON_OBJECT && st_json_obj_get(fr, "type", 4, &ty) == 0 &&
                st_json_str_eq(&ty, "abort", 5)) {
                ev->is_error = 1;
                if (st_json_get_str(fr, "message", ev->error, sizeof ev->error) != 0 || !ev->error[0])
                    set_err(ev, "request aborted by the server");
                return 1;
            }
            ev->finished = 1;
        }
    }
    int text = st_json_str_nonempty(&f[F_TEXT]);
    if (text) {
        ev->content = f[F_TEXT]; /* cumulative: the whole answer so far */
        ev->content_cumulative = 1;
    }
    if (!streaming)
        ev->tokens = have_ct ? ct : (uint32_t)text;
    else if (have_ct)
        ev->tokens = ct > ev->cum_tokens ? ct - ev->cum_tokens : 0;
    else
        ev->tokens = (uint32_t)text;
    return 0;
}


static int parse_common(st_api_kind k, const char *data, size_t len, st_api_event *ev, int streaming)
{
    st_json_val root, f[F__COUNT];
    if (!data) {
        set_err(ev, "missing data");
        return -1;
    }
    if (streaming && len > 0 && data[0] == '{') {
        /* The hot path: one pass reads the fields and validates the whole event. */
        root.type = ST_JSON_OBJECT;
        root.p = data;
        root.len = len;
    } else if (st_json_parse(data, len, &root) < 0) {
        set_err(ev, streaming ? "malformed JSON in stream event" : "malformed JSON response body");
        return -1;
    }
    /* TGI's compatibility route and SGLang batches answer with an array: use element 0. */
    if (!streaming && root.type == ST_JSON_ARRAY && (k == ST_API_TGI || k == ST_API_SGLANG)) {
        st_json_val first;
        if (st_json_arr_get(&root, 0, &first) != 0) {
            set_err(ev, "empty array response");
            return -1;
        }
        root = first;
    }
    if (root.type != ST_JSON_OBJECT) {
        set_err(ev, "response is not a JSON object");
        return -1;
    }
    if (read_fields(k, &root, f) < 0) {
        set_err(ev, streaming ? "malformed JSON in stream event" : "malformed JSON response body");
        return -1;
    }
    if (extract_error(f, ev->error, sizeof ev->error)) {
        ev->is_error = 1;
        return 0;
    }
    switch (k) {
    case ST_API_COMPLETIONS:
    case ST_API_CHAT:
        read_choices(&f[F_CHOICES], k == ST_API_CHAT, streaming ? "delta" : "message", ev);
        read_openai_usage(&f[F_USAGE], ev);
        read_timings(&f[F_TIMINGS], ev);
        if (!streaming) {
            if (ev->has_usage)
                ev->tokens = ev->usage_completion;
            else if (ev->tokens)
                ev->tokens = 1;
        }
        break;
    case ST_API_TGI:
        read_tgi(f, ev);
        if (!streaming)
            ev->tokens = ev->has_usage ? ev->usage_completion : (uint32_t)st_json_str_nonempty(&f[F_GENERATED_TEXT]);
        break;
    case ST_API_LLAMACPP:
        read_llamacpp(f, ev);
        read_timings(&f[F_TIMINGS], ev);
        if (!streaming && ev->has_usage)
            ev->tokens = ev->usage_completion;
        break;
    case ST_API_SGLANG:
        if (read_sglang(f, ev, streaming))
            return 0;
        break;
    default: set_err(ev, "unknown API"); return -1;
    }
    if (!streaming) {
        /* one body: the reasoning share is what the server's usage says */
        ev->reasoning = ev->usage_reasoning < ev->tokens ? ev->usage_reasoning : ev->tokens;
        ev->answer_visible = ev->tokens > ev->reasoning;
    }
    return 0;
}

int st_api_parse_event(st_api_kind k, const char *data, size_t len, st_api_event *ev)
{
    begin_event(ev);
    if (!data) {
        set_err(ev, "missing event data");
        return -1;
    }
    const char *p = data;
    st_trim(&p, &len);
    if (len == 6 && memcmp(p, "[DONE]", 6) == 0) {
        ev->done = 1;
        return 0;
    }
    int rc = parse_common(k, p, len, ev, 1);
    if (rc == 0)
        ev->cum_tokens += ev->tokens;
    return rc;
}

int st_api_parse_response(st_api_kind k, const char *body, size_t len, st_api_event *ev)
{
    st_api_event_reset(ev);
    if (!body) {
        set_err(ev, "missing response body");
        return -1;
    }
    const char *p = body;
    st_trim(&p, &len);
    int rc = parse_common(k, p, len, ev, 0);
    if (rc == 0 && !ev->is_error) {
        ev->finished = 1;
        ev->done = 1;
        ev->cum_tokens = ev->tokens;
    }
    return rc;
}

void st_api_error_message(const char *body, size_t len, char *msg, size_t cap)
{
    if (!msg || cap == 0)
        return;
    msg[0] = '\0';
    if (!body)
        return;
    const char *p = body;
    st_trim(&p, &len);
    st_json_val root, d, f[F__COUNT];
    if (st_json_parse(p, len, &root) == 0) {
        if (root.type == ST_JSON_OBJECT && st_json_obj_fields(&root, root_keys, F__COUNT, f) >= 0 &&
            extract_error(f, msg, cap))
            return;
        /* FastAPI / Starlette: {"detail": "..."} */
        if (root.type == ST_JSON_OBJECT && st_json_obj_get(&root, "detail", 6, &d) == 0 && d.type == ST_JSON_STRING &&
            st_json_str(&d, msg, cap, NULL) >= 0)
            return;
        if (root.type == ST_JSON_OBJECT && st_json_str_nonempty(&f[F_MESSAGE]) &&
            st_json_str(&f[F_MESSAGE], msg, cap, NULL) >= 0)
            return;
    }
    size_t n = len < cap - 1 ? len : cap - 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        msg[i] = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
    }
    msg[n] = '\0';
}
