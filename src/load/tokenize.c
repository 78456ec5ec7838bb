/* Exact prompt lengths through the engine's /tokenize (load/tokenize.h). */
#include "load/tokenize.h"

#include <errno.h>
#include <jansson.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/clock.h"
#include "core/json.h"
#include "core/rng.h"
#include "net/http1.h"
#include "net/tls.h"
#include "net/url.h"

/* The request (the text as JSON) and the words a fitted text may hold. */
#define TOKENIZE_REQ_MAX ((size_t)256 << 20)
#define FIT_SEED 0x66697474657874ULL /* "fittext" */

/* ---- fitting ---------------------------------------------------------------------------- */

/* The words of the fitted text: ids, grown from a seeded stream when the text is short. */
static int fit_text(const uint32_t *ids, uint32_t n, st_buf *out)
{
    st_work_item w = { 0 };
    w.input_ids = (uint32_t *)ids;
    w.input_len = n;
    st_buf_reset(out);
    return n ? st_workload_text(&w, out) : 0;
}

int st_prompt_fit(st_work_item *it, uint32_t target, uint32_t keep_words, st_count_fn count, void *arg,
                  uint32_t *measured, char *err, size_t errlen)
{
    *measured = 0;
    if (target == 0 || target > ST_WORKLOAD_MAX_TOKENS) {
        snprintf(err, errlen, "cannot fit a prompt of %u tokens", target);
        return -1;
    }
    /* a pool of ids: the item's own, then a continuation (room for twice the target) */
    uint32_t own = it->input_ids ? it->input_len : 0;
    uint32_t cap = target * 2 + 64 > own ? target * 2 + 64 : own;
    uint32_t *pool = malloc((size_t)cap * sizeof *pool);
    if (!pool) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (own)
        memcpy(pool, it->input_ids, (size_t)own * sizeof *pool);
    st_workload_fill_ids(FIT_SEED ^ ((uint64_t)it->id + 1) * 0x9e3779b97f4a7c15ULL, pool + own, cap - own);
    if (keep_words > target)
        keep_words = target;
    st_buf text, best;
    st_buf_init(&text, TOKENIZE_REQ_MAX);
    st_buf_init(&best, TOKENIZE_REQ_MAX);
    uint32_t words = target, best_count = 0, c = 0, swap_from = 0;
    int64_t best_gap = INT64_MAX, prev_gap = 0;
    uint32_t prev_words = 0;
    int rc = 1;
    for (int round = 0; round < ST_FIT_ROUNDS; round++) {
        if (fit_text(pool, words, &text) < 0) {
            snprintf(err, errlen, "the prompt text is too long");
            rc = -1;
            break;
        }
        if (count(arg, text.data ? text.data : "", text.len, &c, err, errlen) < 0) {
            rc = -1;
            break;
        }
        int64_t gap = (int64_t)c - (int64_t)target;
        if (llabs(gap) < llabs(best_gap)) {
            best_gap = gap;
            best_count = c;
            st_buf_reset(&best);
            st_buf_append(&best, text.data ? text.data : "", text.len);
        }
        if (gap == 0) {
            rc = 0;
            break;
        }
        /* one more or one fewer word jumps over the target (a word of two tokens at the end):
         * try another word in the last place instead */
        if (round && (words == prev_words + 1 || words + 1 == prev_words) && (gap > 0) != (prev_gap > 0) &&
            words > keep_words && words < cap) {
            if (!swap_from)
                swap_from = words;
            if (swap_from + 1 < cap) {
                uint32_t tmp = pool[words - 1];
                pool[words - 1] = pool[swap_from];
                pool[swap_from++] = tmp;
                prev_gap = gap;
                prev_words = words;
                continue;
            }
        }
        /* one word is about one token: move by the difference; past the target once, one word
         * at a time */
        int flipped = round && (gap > 0) != (prev_gap > 0);
        prev_gap = gap;
        prev_words = words;
        int64_t nw = (int64_t)words - (flipped ? (gap > 0 ? 1 : -1) : gap);
        if (nw < (int64_t)(keep_words ? keep_words : 1))
            nw = keep_words ? keep_words : 1;
        if (nw > (int64_t)cap)
            nw = cap;
        if ((uint32_t)nw == words)
            break; /* cannot move further */
        words = (uint32_t)nw;
    }
    if (rc >= 0) {
        char *t = st_buf_error(&best) ? NULL : strdup(best.data ? best.data : "");
        if (!t) {
            snprintf(err, errlen, "out of memory");
            rc = -1;
        } else {
            free(it->input_text);
            it->input_text = t;
            free(it->input_ids);
            it->input_ids = NULL;
            it->own_key = 0; /* its ids are gone (load/workload.h) */
            it->input_len = best_count;
            *measured = best_count;
        }
    }
    st_buf_free(&text);
    st_buf_free(&best);
    free(pool);
    return rc;
}

/* ---- the /tokenize client --------------------------------------------------------------- */

struct st_tokenizer {
    st_url url;
    char path[2200];
    st_api_kind api;
    char *model, *auth;
    st_tls_ctx *tls_ctx;
    st_tls *tls;
    int fd;
    double timeout_s;
    int missing;
    uint32_t calls;
    st_buf req, body;
};

int st_tokenize_parse(const char *body, size_t len, uint32_t *count)
{
    st_json_val root, v;
    if (st_json_parse(body, len, &root) < 0)
        return -1;
    if (root.type == ST_JSON_ARRAY) {
        long n = st_json_count(&root);
        if (n < 0)
            return -1;
        *count = (uint32_t)n;
        return 0;
    }
    if (root.type != ST_JSON_OBJECT)
        return -1;
    if (st_json_get_u32(&root, "count", count) == 0)
        return 0;
    if (st_json_obj_get(&root, "tokens", 6, &v) == 0 && v.type == ST_JSON_ARRAY) {
        long n = st_json_count(&v);
        if (n < 0)
            return -1;
        *count = (uint32_t)n;
        return 0;
    }
    return -1;
}

st_tokenizer *st_tokenizer_new(const char *base_url, st_api_kind api, const char *model, const char *api_key,
                               int insecure, const char *ca_file, double timeout_s, char *err, size_t errlen)
{
    st_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    t->fd = -1;
    t->api = api;
    t->timeout_s = timeout_s > 0 ? timeout_s : 30;
    st_buf_init(&t->req, TOKENIZE_REQ_MAX);
    st_buf_init(&t->body, ST_TOKENIZE_BODY_MAX);
    if (st_url_parse(base_url, &t->url, err, errlen) < 0) {
        st_tokenizer_free(t);
        return NULL;
    }
    /* /tokenize sits at the server's root, next to /v1 */
    char root[2048];
    snprintf(root, sizeof root, "%s", t->url.path);
    size_t rl = strlen(root);
    static const char *const api_suffixes[] = { "/v1/chat/completions", "/v1/completions",
                                                "/generate_stream",     "/generate",
                                                "/completion",          "/v1" };
    for (size_t k = 0; k < sizeof api_suffixes / sizeof api_suffixes[0]; k++) {
        size_t sl = strlen(api_suffixes[k]);
        while (rl > 1 && root[rl - 1] == '/')
            root[--rl] = '\0';
        if (rl >= sl && !strcmp(root + rl - sl, api_suffixes[k])) {
            root[rl - sl] = '\0';
            rl -= sl;
        }
    }
    snprintf(t->path, sizeof t->path, "%s/tokenize", rl && strcmp(root, "/") ? root : "");
    if (model)
        t->model = strdup(model);
    if (api_key && *api_key) {
        size_t kl = strlen(api_key) + 32;
        t->auth = malloc(kl);
        if (t->auth)
            snprintf(t->auth, kl, "Authorization: Bearer %s", api_key);
    }
    if (t->url.https) {
        t->tls_ctx = st_tls_ctx_new(!insecure, ca_file, err, errlen);
        if (!t->tls_ctx) {
            st_tokenizer_free(t);
            return NULL;
        }
    }
    return t;
}

static void conn_close(st_tokenizer *t)
{
    st_tls_free(t->tls);
    t->tls = NULL;
    if (t->fd >= 0)
        close(t->fd);
    t->fd = -1;
}

void st_tokenizer_free(st_tokenizer *t)
{
    if (!t)
        return;
    conn_close(t);
    st_tls_ctx_free(t->tls_ctx);
    if (t->auth) {
        volatile char *p = t->auth; /* the key must not linger in freed memory */
        while (*p)
            *p++ = 0;
        free(t->auth);
    }
    free(t->model);
    st_buf_free(&t->req);
    st_buf_free(&t->body);
    free(t);
}

int st_tokenizer_missing(const st_tokenizer *t) { return t->missing; }
uint32_t st_tokenizer_calls(const st_tokenizer *t) { return t->calls; }

static int wait_fd(int fd, short ev, st_ns deadline)
{
    st_ns left = deadline - st_now();
    if (left <= 0)
        return -1;
    struct pollfd pf = { fd, ev, 0 };
    int pr;
    do
        pr = poll(&pf, 1, (int)(left / ST_NS_PER_MS) + 1);
    while (pr < 0 && errno == EINTR);
    return pr > 0 ? 0 : -1;
}

static int conn_open(st_tokenizer *t, st_ns deadline, char *err, size_t errlen)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%u", t->url.port);
    int gai = getaddrinfo(t->url.host, ps, &hints, &ai);
    if (gai || !ai) {
        snprintf(err, errlen, "cannot resolve %.100s: %s", t->url.host, gai_strerror(gai));
        return -1;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        freeaddrinfo(ai);
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    if (rc < 0 && errno != EINPROGRESS) {
        snprintf(err, errlen, "connect to %.100s: %s", t->url.hostport, strerror(errno));
        close(fd);
        return -1;
    }
    if (rc < 0) {
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (wait_fd(fd, POLLOUT, deadline) < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr) {
            snprintf(err, errlen, "connect to %.100s: %s", t->url.hostport, soerr ? strerror(soerr) : "timed out");
            close(fd);
            return -1;
        }
    }
    t->fd = fd;
    if (t->url.https) {
        t->tls = st_tls_new(t->tls_ctx, fd, t->url.host, err, errlen);
        if (!t->tls) {
            conn_close(t);
            return -1;
        }
        for (;;) {
            int hs = st_tls_handshake(t->tls, err, errlen);
            if (hs == 0)
                break;
            if ((hs != ST_TLS_WANT_READ && hs != ST_TLS_WANT_WRITE) ||
                wait_fd(fd, hs == ST_TLS_WANT_READ ? POLLIN : POLLOUT, deadline) < 0) {
                if (hs == ST_TLS_WANT_READ || hs == ST_TLS_WANT_WRITE)
                    snprintf(err, errlen, "TLS handshake timed out");
                conn_close(t);
                return -1;
            }
        }
    }
    return 0;
}

static ssize_t conn_write(st_tokenizer *t, const char *p, size_t n, st_ns deadline, char *err, size_t errlen)
{
    size_t off = 0;
    while (off < n) {
        ssize_t w;
        if (t->tls) {
            w = st_tls_write(t->tls, p + off, n - off, err, errlen);
            if (w == ST_TLS_WANT_READ || w == ST_TLS_WANT_WRITE) {
                if (wait_fd(t->fd, w == ST_TLS_WANT_READ ? POLLIN : POLLOUT, deadline) < 0)
                    return -1;
                continue;
            }
        } else {
            w = send(t->fd, p + off, n - off, MSG_NOSIGNAL);
            if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
                if (wait_fd(t->fd, POLLOUT, deadline) < 0)
                    return -1;
                continue;
            }
        }
        if (w <= 0)
            return -1;
        off += (size_t)w;
    }
    return (ssize_t)off;
}

/* One exchange on the open connection: 0 with the parser done, 1 when the connection was
 * closed before any answer byte (a stale keep-alive connection: retry), -1 error. */
static int exchange(st_tokenizer *t, st_http_parser *p, st_ns deadline, char *err, size_t errlen)
{
    if (conn_write(t, t->req.data, t->req.len, deadline, err, errlen) < 0) {
        snprintf(err, errlen, "sending to %.100s failed", t->url.hostport);
        return 1;
    }
    char buf[16384];
    int got = 0;
    for (;;) {
        ssize_t n;
        if (t->tls) {
            n = st_tls_read(t->tls, buf, sizeof buf, err, errlen);
            if (n == ST_TLS_WANT_READ || n == ST_TLS_WANT_WRITE) {
                if (wait_fd(t->fd, n == ST_TLS_WANT_READ ? POLLIN : POLLOUT, deadline) < 0) {
                    snprintf(err, errlen, "no answer from %s within %.0f s", t->path, t->timeout_s);
                    return -1;
                }
                continue;
            }
            if (n == ST_TLS_CLOSED)
                n = 0;
        } else {
            n = recv(t->fd, buf, sizeof buf, 0);
            if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
                if (wait_fd(t->fd, POLLIN, deadline) < 0) {
                    snprintf(err, errlen, "no answer from %s within %.0f s", t->path, t->timeout_s);
                    return -1;
                }
                continue;
            }
        }
        if (n < 0) {
            snprintf(err, errlen, "reading from %.100s failed", t->url.hostport);
            return got ? -1 : 1;
        }
        if (n == 0) {
            if (got && st_http_eof(p) == 0)
                return 0;
            snprintf(err, errlen, "%.100s closed the connection", t->url.hostport);
            return got ? -1 : 1;
        }
        got = 1;
        if (st_http_feed(p, buf, (size_t)n) < 0) {
            snprintf(err, errlen, "malformed answer from %s: %s", t->path, p->errmsg);
            return -1;
        }
        if (p->state == ST_HTTP_DONE)
            return 0;
    }
}

/* POSTs body to t->path on the open (or a new) connection: 0 with the answer in *p (any
 * status; freed by the caller), or -1 with err. */
static int post_raw(st_tokenizer *t, const char *data, size_t len, st_http_parser *p, char *err, size_t errlen)
{
    const char *hdrs[3];
    int nh = 0;
    hdrs[nh++] = "User-Agent: servetune";
    if (t->auth)
        hdrs[nh++] = t->auth;
    st_buf_reset(&t->req);
    int rc = st_http_write_request(&t->req, "POST", t->url.hostport, t->path, hdrs, nh, "application/json", data, len);
    if (rc < 0) {
        snprintf(err, errlen, "the request to %s could not be built", t->path);
        return -1;
    }
    st_ns deadline = st_now() + st_s_to_ns(t->timeout_s);
    st_http_limits lim = { .max_head = 64 * 1024, .max_headers = 100, .max_body = ST_TOKENIZE_BODY_MAX };
    rc = -1;
    for (int attempt = 0; attempt < 2; attempt++) {
        int fresh = t->fd < 0;
        if (fresh && conn_open(t, deadline, err, errlen) < 0)
            return -1;
        st_http_parser_init(p, ST_HTTP_RESPONSE, &lim, NULL, NULL);
        int x = exchange(t, p, deadline, err, errlen);
        if (x == 0) {
            rc = 0;
            break;
        }
        st_http_parser_free(p);
        conn_close(t);
        if (x < 0 || fresh)
            return -1;
        /* a stale keep-alive connection: once more on a new one */
    }
    if (rc < 0)
        return -1;
    t->calls++;
    if (!p->keep_alive)
        conn_close(t);
    return 0;
}

/* POSTs text to /tokenize and leaves the 2xx answer in *p (freed by the caller). plain: the text
 * itself, no chat template and no special tokens (its ids, for trace stats --spec). 0, or -1 with
 * err (p freed). */
static int tok_post(st_tokenizer *t, const char *text, size_t len, int plain, st_http_parser *p, char *err,
                    size_t errlen)
{
    st_buf body;
    st_buf_init(&body, TOKENIZE_REQ_MAX);
    st_buf_puts(&body, "{");
    if (t->model && t->api != ST_API_TGI) {
        st_buf_puts(&body, "\"model\":");
        st_buf_json_str(&body, t->model);
        st_buf_puts(&body, ",");
    }
    if (plain && t->api == ST_API_LLAMACPP) {
        st_buf_puts(&body, "\"content\":");
        st_buf_json_strn(&body, text, len);
        st_buf_puts(&body, ",\"add_special\":false}");
    } else if (plain) {
        st_buf_puts(&body, "\"prompt\":");
        st_buf_json_strn(&body, text, len);
        st_buf_puts(&body, ",\"add_special_tokens\":false}");
    } else if (t->api == ST_API_CHAT) {
        st_buf_puts(&body, "\"messages\":[{\"role\":\"user\",\"content\":");
        st_buf_json_strn(&body, text, len);
        st_buf_puts(&body, "}],\"add_generation_prompt\":true}");
    } else if (t->api == ST_API_TGI) {
        st_buf_puts(&body, "\"inputs\":");
        st_buf_json_strn(&body, text, len);
        st_buf_puts(&body, "}");
    } else {
        st_buf_puts(&body, "\"prompt\":");
        st_buf_json_strn(&body, text, len);
        st_buf_puts(&body, "}");
    }
    if (st_buf_error(&body)) {
        st_buf_free(&body);
        snprintf(err, errlen, "the prompt text is too long to count");
        return -1;
    }
    int rc = post_raw(t, body.data, body.len, p, err, errlen);
    st_buf_free(&body);
    if (rc)
        return -1;
    int status = p->status;
    if (status == 404 || status == 405) {
        t->missing = 1;
        snprintf(err, errlen, "no /tokenize on this server (HTTP %d at %s)", status, t->path);
        st_http_parser_free(p);
        return -1;
    }
    if (status < 200 || status >= 300) {
        char msg[300];
        st_api_error_message(p->body.data ? p->body.data : "", p->body.len, msg, sizeof msg);
        snprintf(err, errlen, "POST %s: HTTP %d: %s", t->path, status, msg);
        st_http_parser_free(p);
        return -1;
    }
    return 0;
}

int st_tokenizer_count(void *arg, const char *text, size_t len, uint32_t *count, char *err, size_t errlen)
{
    st_tokenizer *t = arg;
    st_http_parser p;
    if (tok_post(t, text, len, 0, &p, err, errlen))
        return -1;
    int rc = 0;
    if (st_tokenize_parse(p.body.data ? p.body.data : "", p.body.len, count) < 0) {
        snprintf(err, errlen, "POST %s: an answer without a token count", t->path);
        rc = -1;
    } else if (*count == 0 && len > 0) {
        /* a text of words is at least one token (the chat template adds more): the count is wrong,
         * and would make every prompt's length 0 */
        snprintf(err, errlen, "the server at %s://%s%s answered 0 tokens for a text of %zu bytes: not a count",
                 t->url.https ? "https" : "http", t->url.hostport, t->path, len);
        rc = -1;
    } else if (*count > ST_WORKLOAD_MAX_TOKENS) {
        snprintf(err, errlen,
                 "the server at %s://%s%s answered %u tokens, above the %u tokens servetune handles per prompt "
                 "(a text of %zu bytes): not a count",
                 t->url.https ? "https" : "http", t->url.hostport, t->path, *count, ST_WORKLOAD_MAX_TOKENS, len);
        rc = -1;
    }
    st_http_parser_free(&p);
    return rc;
}

int64_t st_tokenize_parse_ids(const char *body, size_t len, uint32_t **ids, size_t *cap)
{
    json_error_t je;
    json_t *root = json_loadb(body, len, 0, &je);
    json_t *a = json_is_object(root) ? json_object_get(root, "tokens") : NULL;
    size_t n = json_array_size(a);
    int64_t rc = json_is_array(a) ? (int64_t)n : -1;
    if (rc > 0 && n > *cap) {
        uint32_t *q = realloc(*ids, n * sizeof *q);
        if (!q)
            rc = -1;
        else {
            *ids = q;
            *cap = n;
        }
    }
    for (size_t i = 0; rc > 0 && i < n; i++) {
        json_t *v = json_array_get(a, i);
        /* llama.cpp answers [{"id": ..., "piece": ...}] when asked for pieces */
        if (json_is_object(v))
            v = json_object_get(v, "id");
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 0xffffffffLL)
            rc = -1;
        else
            (*ids)[i] = (uint32_t)json_integer_value(v);
    }
    json_decref(root);
    return rc;
}

int64_t st_tokenizer_ids(void *arg, const char *text, size_t len, uint32_t **ids, size_t *cap, char *err, size_t errlen)
{
    st_tokenizer *t = arg;
    if (t->api == ST_API_TGI) {
        snprintf(err, errlen, "TGI's /tokenize is not read for token ids");
        return -1;
    }
    st_http_parser p;
    if (tok_post(t, text, len, 1, &p, err, errlen))
        return -1;
    int64_t n = st_tokenize_parse_ids(p.body.data ? p.body.data : "", p.body.len, ids, cap);
    if (n < 0)
        snprintf(err, errlen, "POST %s: an answer without token ids", t->path);
    st_http_parser_free(&p);
    return n;
}

int st_prompt_fit_work(st_workload *w, st_tokenizer *t, const volatile sig_atomic_t *stop, uint32_t *fitted,
                       uint32_t *exact, char *err, size_t errlen)
{
    *fitted = *exact = 0;
    for (uint32_t i = 0; i < w->n; i++) {
        if (stop && *stop)
            return 1;
        st_work_item *it = &w->items[i];
        if (it->session || !it->input_ids)
            continue;
        uint32_t measured;
        int rc = st_prompt_fit(it, it->input_len, it->prefix_len, st_tokenizer_count, t, &measured, err, errlen);
        if (rc < 0)
            return -1;
        (*fitted)++;
        *exact += rc == 0;
    }
    return 0;
}

int st_tokenizer_post(st_tokenizer *t, const char *path, const char *body, size_t len, st_buf *answer, int *status,
                      char *err, size_t errlen)
{
    char saved[sizeof t->path];
    memcpy(saved, t->path, sizeof saved);
    /* the server's root (the part of t->path before /tokenize) + path */
    size_t root = strlen(t->path) - strlen("/tokenize");
    snprintf(t->path, sizeof t->path, "%.*s%s", (int)root, saved, path);
    st_http_parser p;
    int rc = post_raw(t, body, len, &p, err, errlen);
    memcpy(t->path, saved, sizeof saved);
    if (rc)
        return -1;
    *status = p.status;
    st_buf_reset(answer);
    if (p.body.len)
        st_buf_append(answer, p.body.data, p.body.len);
    st_http_parser_free(&p);
    if (st_buf_error(answer)) {
        snprintf(err, errlen, "POST %s: the answer is too large", path);
        return -1;
    }
    return 0;
}
