/* Fuzzes the hot-path JSON scanner and the per-API event parsers built on it: nothing may
 * read out of bounds, and a document the validator accepts must be walkable. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/json.h"
#include "load/api.h"
#include "load/tokenize.h"

static void walk(const st_json_val *v, int depth)
{
    if (depth > ST_JSON_MAX_DEPTH + 2)
        abort();
    char buf[64];
    double d;
    uint64_t u;
    int b;
    switch (v->type) {
    case ST_JSON_STRING:
        if (st_json_str(v, buf, sizeof buf, NULL) < 0)
            abort(); /* validated strings always decode */
        break;
    case ST_JSON_NUMBER:
        (void)st_json_num(v, &d);
        (void)st_json_u64(v, &u);
        break;
    case ST_JSON_TRUE:
    case ST_JSON_FALSE:
        if (st_json_bool(v, &b) < 0)
            abort();
        break;
    case ST_JSON_OBJECT:
    case ST_JSON_ARRAY: {
        st_json_iter it;
        st_json_val k, x;
        int rc;
        st_json_iter_init(&it, v);
        while ((rc = st_json_iter_next(&it, &k, &x)) == 1)
            walk(&x, depth + 1);
        if (rc < 0)
            abort(); /* a validated container iterates cleanly */
        if (v->type == ST_JSON_ARRAY) {
            /* The one-pass element reader sees the same elements. */
            static const char *const keys[] = { "text", "a" };
            st_json_iter i2;
            st_json_val y, out[2];
            st_json_iter_init(&it, v);
            st_json_iter_init(&i2, v);
            for (;;) {
                int r1 = st_json_iter_next(&it, NULL, &x), r2 = st_json_iter_next_fields(&i2, keys, 2, &y, out);
                if (r1 != r2 || (r1 == 1 && (x.p != y.p || x.len != y.len || x.type != y.type)))
                    abort();
                if (r1 != 1)
                    break;
            }
        }
        break;
    }
    default: break;
    }
}

static int depth_of(json_t *j)
{
    int d = 0;
    size_t i;
    const char *k;
    json_t *v;
    if (json_is_array(j)) {
        json_array_foreach(j, i, v)
        {
            int x = depth_of(v);
            d = x > d ? x : d;
        }
        return d + 1;
    }
    if (json_is_object(j)) {
        json_object_foreach(j, k, v)
        {
            int x = depth_of(v);
            d = x > d ? x : d;
        }
        return d + 1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Copy into an exact-size heap buffer so ASan catches any read past the end. */
    char *p = malloc(size ? size : 1);
    if (!p)
        return 0;
    memcpy(p, data, size);
    st_json_val root, v;
    int ours = st_json_parse(p, size, &root);
    /* Differential check: what jansson (a strict parser) accepts, we accept too, up to our
     * nesting limit. (jansson reads a raw NUL byte as the end of input, so those inputs
     * are left out.) */
    json_t *j = memchr(p, '\0', size) ? NULL : json_loadb(p, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    if (j) {
        if (depth_of(j) < ST_JSON_MAX_DEPTH && ours != 0)
            abort();
        json_decref(j);
    }
    if (ours == 0) {
        walk(&root, 0);
        static const char *paths[] = { "choices[0].text", "usage.prompt_tokens_details.cached_tokens",
                                       "error.message",   "[0].generated_text",
                                       "a.b[3].c",        "meta_info.finish_reason.type" };
        for (size_t i = 0; i < sizeof paths / sizeof *paths; i++)
            (void)st_json_get(&root, paths[i], &v);
    }
    /* Unvalidated views must stay in bounds too. */
    if (size > 0) {
        st_json_val raw = { p[0] == '[' ? ST_JSON_ARRAY : ST_JSON_OBJECT, p, size };
        (void)st_json_get(&raw, "choices[0].delta.content", &v);
        (void)st_json_count(&raw);
    }
    st_api_event ev;
    for (int k = ST_API_COMPLETIONS; k <= ST_API_SGLANG; k++) {
        st_api_event_reset(&ev);
        (void)st_api_parse_event((st_api_kind)k, p, size, &ev);
        if (memchr(ev.error, '\0', sizeof ev.error) == NULL)
            abort();
        if (ev.reasoning > ev.tokens)
            abort();
        /* the answer text a session keeps, <think> spans left out */
        st_buf ans;
        st_buf_init(&ans, 1 << 16);
        int think = 0;
        (void)st_api_append_text(&ev.content, 1, &think, &ans);
        st_buf_free(&ans);
        (void)st_api_parse_response((st_api_kind)k, p, size, &ev);
    }
    char msg[128];
    st_api_error_message(p, size, msg, sizeof msg);
    uint32_t count;
    (void)st_tokenize_parse(p, size, &count);
    free(p);
    return 0;
}
