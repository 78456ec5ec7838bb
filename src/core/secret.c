#include "core/secret.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define REDACTED "***"

int st_secrets_add(st_secrets *s, const char *value)
{
    if (!value || !*value)
        return 0;
    size_t l = strlen(value);
    if (l < ST_SECRET_MIN_LEN)
        return -1;
    for (int i = 0; i < s->n; i++)
        if (s->len[i] == l && !memcmp(s->v[i], value, l))
            return 0;
    if (s->n >= ST_SECRETS_MAX)
        return -1;
    char *c = strdup(value);
    if (!c)
        return -1;
    /* longest first: a secret that contains another is replaced whole */
    int at = s->n;
    while (at > 0 && s->len[at - 1] < l) {
        s->v[at] = s->v[at - 1];
        s->len[at] = s->len[at - 1];
        at--;
    }
    s->v[at] = c;
    s->len[at] = l;
    s->n++;
    return 0;
}

void st_secrets_free(st_secrets *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n; i++)
        free(s->v[i]);
    memset(s, 0, sizeof *s);
}

int st_secrets_copy(st_secrets *dst, const st_secrets *src)
{
    memset(dst, 0, sizeof *dst);
    for (int i = 0; src && i < src->n; i++)
        if (st_secrets_add(dst, src->v[i])) {
            st_secrets_free(dst);
            return -1;
        }
    return 0;
}

size_t st_secrets_redact_n(const st_secrets *s, char *buf, size_t n)
{
    if (!s || !buf)
        return n;
    for (int i = 0; i < s->n; i++) {
        size_t sl = s->len[i], rl = strlen(REDACTED), from = 0;
        char *p;
        while (from + sl <= n && (p = memmem(buf + from, n - from, s->v[i], sl))) {
            size_t at = (size_t)(p - buf);
            memcpy(p, REDACTED, rl);
            memmove(p + rl, p + sl, n - at - sl);
            n -= sl - rl;
            from = at + rl;
        }
    }
    return n;
}

void st_secrets_redact(const st_secrets *s, char *text)
{
    if (!s || !text || !s->n)
        return;
    size_t n = st_secrets_redact_n(s, text, strlen(text));
    text[n] = '\0';
}

size_t st_secrets_partial_tail(const st_secrets *s, const char *buf, size_t n)
{
    size_t hold = 0;
    for (int i = 0; s && i < s->n; i++) {
        size_t sl = s->len[i];
        /* the longest k < sl with buf's last k bytes == the secret's first k bytes */
        for (size_t k = (sl - 1 < n ? sl - 1 : n); k > hold; k--)
            if (!memcmp(buf + n - k, s->v[i], k)) {
                hold = k;
                break;
            }
    }
    return hold;
}

int st_secret_name(const char *name)
{
    static const char *words[] = { "KEY",        "TOKEN",       "SECRET", "PASSWORD",     "PASSWD",
                                   "CREDENTIAL", "CREDENTIALS", "APIKEY", "AUTHORIZATION" };
    const char *p = name;
    while (p && *p) {
        while (*p == '_' || *p == '-')
            p++;
        const char *w = p;
        while (*p && *p != '_' && *p != '-')
            p++;
        size_t wl = (size_t)(p - w);
        for (size_t k = 0; k < sizeof words / sizeof *words; k++)
            if (wl == strlen(words[k]) && !strncasecmp(w, words[k], wl))
                return 1;
    }
    return 0;
}

/* ---- the redacting stream ---- */

typedef struct rstream {
    FILE *under;
    const st_secrets *s;
    char held[ST_SECRETS_STREAM_BUF * 2]; /* bytes not yet passed on */
    size_t n;
} rstream;

static void pass_on(rstream *r, int all)
{
    r->n = st_secrets_redact_n(r->s, r->held, r->n);
    size_t hold = all ? 0 : st_secrets_partial_tail(r->s, r->held, r->n);
    size_t out = r->n - hold;
    if (out) {
        fwrite(r->held, 1, out, r->under);
        fflush(r->under);
    }
    memmove(r->held, r->held + out, hold);
    r->n = hold;
}

static ssize_t rs_write(void *cookie, const char *buf, size_t size)
{
    rstream *r = cookie;
    size_t done = 0;
    while (done < size) {
        size_t room = sizeof r->held - r->n, k = size - done < room ? size - done : room;
        memcpy(r->held + r->n, buf + done, k);
        r->n += k;
        done += k;
        pass_on(r, 0);
        if (r->n == sizeof r->held) /* held back a whole buffer: cannot be a secret's start */
            pass_on(r, 1);
    }
    return (ssize_t)size;
}

static int rs_close(void *cookie)
{
    rstream *r = cookie;
    pass_on(r, 1);
    free(r);
    return 0;
}

FILE *st_secrets_stream(FILE *under, const st_secrets *s)
{
    rstream *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->under = under;
    r->s = s;
    cookie_io_functions_t io = { .write = rs_write, .close = rs_close };
    FILE *f = fopencookie(r, "w", io);
    if (!f) {
        free(r);
        return NULL;
    }
    setvbuf(f, NULL, _IOFBF, ST_SECRETS_STREAM_BUF);
    return f;
}
