#include "engine/api.h"

#include <string.h>

#include "core/json.h"
#include "core/parse.h"

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

const char *st_api_name(st_api_kind k)
{
    return ((unsigned)k < 5) ? api_names[k] : "unknown";
}

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

int st_api_sends_done(st_api_kind k)
{
    return k == ST_API_COMPLETIONS || k == ST_API_CHAT || k == ST_API_SGLANG;
}

int st_api_takes_ids(st_api_kind k)
{
    return k == ST_API_COMPLETIONS || k == ST_API_LLAMACPP || k == ST_API_SGLANG;
}

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
    if (worst <= b->max - b->len)
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
static int put_text(st_buf *b, const st_work_item *it)
{
    if (it->input_text)
        return st_buf_json_str(b, it->input_text);
    if (!it->input_ids)
        return -1;
    if (st_buf_append(b, "\"", 1) < 0 || st_workload_text(it, b) < 0)
        return -1;
    return st_buf_append(b, "\"", 1);
}

static int put_prompt(st_buf *b, const st_work_item *it)
{
    if (it->input_ids)
        return put_ids(b, it->input_ids, it->input_len);
    return put_text(b, it);
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
        if (stream)
            rc |= st_buf_puts(out, ",\"stream_options\":{\"include_usage\":true}");
        rc |= st_buf_append(out, "}", 1);
        break;
    case ST_API_CHAT:
        rc |= st_buf_append(out, "{", 1);
        rc |= put_model(out, model);
        rc |= st_buf_puts(out, "\"messages\":[{\"role\":\"user\",\"content\":");
        rc |= put_text(out, it);
        rc |= st_buf_printf(out, "}],\"max_completion_tokens\":%u,\"max_tokens\":%u,\"min_tokens\":%u,"
                                 "\"ignore_eos\":true,\"stream\":%s", n, n, n, tf);
        if (stream)
            rc |= st_buf_puts(out, ",\"stream_options\":{\"include_usage\":true}");
        rc |= st_buf_append(out, "}", 1);
        break;
    case ST_API_TGI:
        rc |= st_buf_puts(out, "{\"inputs\":");
        rc |= put_text(out, it);
        rc |= st_buf_printf(out, ",\"parameters\":{\"max_new_tokens\":%u,\"details\":true}}", n);
        break;
    case ST_API_LLAMACPP:
        rc |= st_buf_puts(out, "{\"prompt\":");
        rc |= put_prompt(out, it);
        rc |= st_buf_printf(out, ",\"n_predict\":%u,\"ignore_eos\":true,\"stream\":%s,\"cache_prompt\":true}", n, tf);
        break;
    case ST_API_SGLANG:
        rc |= st_buf_append(out, "{", 1);
        if (it->input_ids) {
            rc |= st_buf_puts(out, "\"input_ids\":");
            rc |= put_ids(out, it->input_ids, it->input_len);
        } else {
            rc |= st_buf_puts(out, "\"text\":");
            rc |= put_text(out, it);
        }
        rc |= st_buf_printf(out, ",\"sampling_params\":{\"max_new_tokens\":%u,\"min_new_tokens\":%u,"
                                 "\"ignore_eos\":true},\"stream\":%s}", n, n, tf);
        break;
    default:
        return -1;
    }
    return rc ? -1 : 0;
}

/* ---- responses and stream events ------------------------------------------------- */

void st_api_event_reset(st_api_event *ev)
{
    memset(ev, 0, sizeof *ev);
}

static void begin_event(st_api_event *ev)
{
    uint32_t cum = ev->cum_tokens;
    memset(ev, 0, sizeof *ev);
    ev->cum_tokens = cum;
}

static void set_err(st_api_event *ev, const char *msg)
{
    st_strlcpy(ev->error, msg, sizeof ev->error);
}

/* Error shapes. Returns 1 (message in msg) when root is an error body. */
static int extract_error(const st_json_val *root, char *msg, size_t cap)
{
    st_json_val e, x;
    if (root->type != ST_JSON_OBJECT)
        return 0;
    if (st_json_obj_get(root, "error", 5, &e) == 0 && !st_json_is_nothing(&e)) {
        if (e.type == ST_JSON_OBJECT) {
            if (st_json_get_str(&e, "message", msg, cap) != 0 || !msg[0]) {
                if (st_json_get_str(&e, "type", msg, cap) != 0 || !msg[0])
                    st_strlcpy(msg, "error object without a message", cap);
            }
        } else if (e.type == ST_JSON_STRING) {
            /* TGI: {"error": "...", "error_type": "..."} */
            char t[64];
            size_t n = 0;
            if (st_json_get_str(root, "error_type", t, sizeof t) == 0 && t[0]) {
                n = st_strlcpy(msg, t, cap);
                if (n + 2 < cap) {
                    memcpy(msg + n, ": ", 3);
                    n += 2;
                } else {
                    n = 0;
                }
            }
            if (n < cap)
                st_json_str(&e, msg + n, cap - n, NULL);
        } else {
            size_t n = e.len < cap - 1 ? e.len : cap - 1;
            memcpy(msg, e.p, n);
            msg[n] = '\0';
        }
        return 1;
    }
    if (st_json_obj_get(root, "object", 6, &x) == 0 && st_json_str_eq(&x, "error", 5)) {
        if (st_json_get_str(root, "message", msg, cap) != 0 || !msg[0])
            st_strlcpy(msg, "error object without a message", cap);
        return 1;
    }
    return 0;
}

static void read_openai_usage(const st_json_val *root, st_api_event *ev)
{
    st_json_val u;
    if (st_json_obj_get(root, "usage", 5, &u) != 0 || u.type != ST_JSON_OBJECT)
        return;
    ev->has_usage = 1;
    (void)st_json_get_u32(&u, "prompt_tokens", &ev->usage_prompt);
    (void)st_json_get_u32(&u, "completion_tokens", &ev->usage_completion);
    (void)st_json_get_u32(&u, "prompt_tokens_details.cached_tokens", &ev->usage_cached);
}

static int is_present(const st_json_val *obj, const char *key)
{
    st_json_val v;
    return st_json_obj_get(obj, key, strlen(key), &v) == 0 && !st_json_is_nothing(&v);
}

/* OpenAI completions / chat choices. field: "text" (completions) or the delta/message
 * object name (chat). */
static void read_choices(const st_json_val *root, int chat, const char *msgkey, st_api_event *ev)
{
    st_json_val choices, c;
    if (st_json_obj_get(root, "choices", 7, &choices) != 0 || choices.type != ST_JSON_ARRAY)
        return;
    st_json_iter it;
    st_json_iter_init(&it, &choices);
    while (st_json_iter_next(&it, NULL, &c) == 1) {
        if (c.type != ST_JSON_OBJECT)
            continue;
        if (!chat) {
            st_json_val t, ids;
            long nid = 0;
            if (st_json_obj_get(&c, "token_ids", 9, &ids) == 0 && ids.type == ST_JSON_ARRAY)
                nid = st_json_count(&ids);
            if (nid > 0)
                ev->tokens += (uint32_t)nid;
            else if (st_json_obj_get(&c, "text", 4, &t) == 0 && st_json_str_nonempty(&t))
                ev->tokens += 1;
        } else {
            st_json_val d, t;
            if (st_json_obj_get(&c, msgkey, strlen(msgkey), &d) == 0 && d.type == ST_JSON_OBJECT) {
                if ((st_json_obj_get(&d, "content", 7, &t) == 0 && st_json_str_nonempty(&t)) ||
                    (st_json_obj_get(&d, "reasoning_content", 17, &t) == 0 && st_json_str_nonempty(&t)) ||
                    (st_json_obj_get(&d, "reasoning", 9, &t) == 0 && st_json_str_nonempty(&t)))
                    ev->tokens += 1;
            }
        }
        if (is_present(&c, "finish_reason"))
            ev->finished = 1;
    }
}

static void read_tgi(const st_json_val *root, st_api_event *ev)
{
    st_json_val tok, sp, det;
    if (st_json_obj_get(root, "token", 5, &tok) == 0 && tok.type == ST_JSON_OBJECT) {
        int special = 0;
        if (st_json_obj_get(&tok, "special", 7, &sp) == 0)
            (void)st_json_bool(&sp, &special);
        if (!special)
            ev->tokens = 1;
    }
    if (is_present(root, "generated_text"))
        ev->finished = 1;
    if (st_json_obj_get(root, "details", 7, &det) == 0 && det.type == ST_JSON_OBJECT) {
        ev->finished = 1;
        if (st_json_get_u32(&det, "generated_tokens", &ev->usage_completion) == 0)
            ev->has_usage = 1;
    }
}

static void read_llamacpp(const st_json_val *root, st_api_event *ev)
{
    st_json_val c, s;
    if (st_json_obj_get(root, "content", 7, &c) == 0 && st_json_str_nonempty(&c))
        ev->tokens = 1;
    int stop = 0;
    if (st_json_obj_get(root, "stop", 4, &s) == 0)
        (void)st_json_bool(&s, &stop);
    if (!stop)
        return;
    ev->finished = 1;
    uint32_t pred = 0, eval = 0, prompt_n = 0, cache_n = 0;
    int have_pred = st_json_get_u32(root, "tokens_predicted", &pred) == 0;
    int have_eval = st_json_get_u32(root, "tokens_evaluated", &eval) == 0;
    int have_pn = st_json_get_u32(root, "timings.prompt_n", &prompt_n) == 0;
    int have_cn = st_json_get_u32(root, "timings.cache_n", &cache_n) == 0;
    if (!have_pred)
        have_pred = st_json_get_u32(root, "timings.predicted_n", &pred) == 0;
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
static int read_sglang(const st_json_val *root, st_api_event *ev, int streaming)
{
    st_json_val meta, t, fr;
    uint32_t ct = 0;
    int have_ct = 0;
    if (st_json_obj_get(root, "meta_info", 9, &meta) == 0 && meta.type == ST_JSON_OBJECT) {
        have_ct = st_json_get_u32(&meta, "completion_tokens", &ct) == 0;
        if (have_ct) {
            ev->has_usage = 1;
            ev->usage_completion = ct;
            (void)st_json_get_u32(&meta, "prompt_tokens", &ev->usage_prompt);
            (void)st_json_get_u32(&meta, "cached_tokens", &ev->usage_cached);
        }
        if (st_json_obj_get(&meta, "finish_reason", 13, &fr) == 0 && !st_json_is_nothing(&fr)) {
            st_json_val ty;
            if (fr.type == ST_JSON_OBJECT && st_json_obj_get(&fr, "type", 4, &ty) == 0 &&
                st_json_str_eq(&ty, "abort", 5)) {
                ev->is_error = 1;
                if (st_json_get_str(&fr, "message", ev->error, sizeof ev->error) != 0 || !ev->error[0])
                    set_err(ev, "request aborted by the server");
                return 1;
            }
            ev->finished = 1;
        }
    }
    int text = st_json_obj_get(root, "text", 4, &t) == 0 && st_json_str_nonempty(&t);
    if (!streaming) {
        ev->tokens = have_ct ? ct : (uint32_t)text;
    } else if (have_ct) {
        ev->tokens = ct > ev->cum_tokens ? ct - ev->cum_tokens : 0;
    } else {
        ev->tokens = (uint32_t)text;
    }
    return 0;
}

static const char *trim(const char *p, size_t *len)
{
    size_t n = *len;
    while (n && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
        p++, n--;
    while (n && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '\r' || p[n - 1] == '\n'))
        n--;
    *len = n;
    return p;
}

static int parse_common(st_api_kind k, const char *data, size_t len, st_api_event *ev, int streaming)
{
    st_json_val root;
    if (!data || st_json_parse(data, len, &root) < 0) {
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
    if (extract_error(&root, ev->error, sizeof ev->error)) {
        ev->is_error = 1;
        return 0;
    }
    switch (k) {
    case ST_API_COMPLETIONS:
    case ST_API_CHAT:
        read_choices(&root, k == ST_API_CHAT, streaming ? "delta" : "message", ev);
        read_openai_usage(&root, ev);
        if (!streaming) {
            if (ev->has_usage)
                ev->tokens = ev->usage_completion;
            else if (ev->tokens)
                ev->tokens = 1;
        }
        break;
    case ST_API_TGI:
        read_tgi(&root, ev);
        if (!streaming) {
            st_json_val g;
            int text = st_json_obj_get(&root, "generated_text", 14, &g) == 0 && st_json_str_nonempty(&g);
            ev->tokens = ev->has_usage ? ev->usage_completion : (uint32_t)text;
        }
        break;
    case ST_API_LLAMACPP:
        read_llamacpp(&root, ev);
        if (!streaming && ev->has_usage)
            ev->tokens = ev->usage_completion;
        break;
    case ST_API_SGLANG:
        if (read_sglang(&root, ev, streaming))
            return 0;
        break;
    default:
        set_err(ev, "unknown API");
        return -1;
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
    const char *p = trim(data, &len);
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
    const char *p = trim(body, &len);
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
    const char *p = trim(body, &len);
    st_json_val root, d;
    if (st_json_parse(p, len, &root) == 0) {
        if (extract_error(&root, msg, cap))
            return;
        /* FastAPI / Starlette: {"detail": "..."} */
        if (root.type == ST_JSON_OBJECT && st_json_obj_get(&root, "detail", 6, &d) == 0 &&
            d.type == ST_JSON_STRING && st_json_str(&d, msg, cap, NULL) >= 0)
            return;
        if (root.type == ST_JSON_OBJECT && st_json_get_str(&root, "message", msg, cap) == 0 && msg[0])
            return;
    }
    size_t n = len < cap - 1 ? len : cap - 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        msg[i] = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
    }
    msg[n] = '\0';
}
