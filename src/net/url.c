#include "net/url.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/util.h"

static int url_fail(char *err, size_t errlen, const char *msg)
{
    if (err && errlen)
        st_errf(err, errlen, "%s", msg);
    return -1;
}

int st_url_parse(const char *s, st_url *u, char *err, size_t errlen)
{
    memset(u, 0, sizeof *u);
    for (const char *c = s; *c; c++)
        if ((unsigned char)*c <= 0x20 || *c == 0x7f)
            return url_fail(err, errlen, "URL contains whitespace or control characters");
    const char *p;
    if (!strncasecmp(s, "http://", 7)) {
        p = s + 7;
    } else if (!strncasecmp(s, "https://", 8)) {
        u->https = 1;
        p = s + 8;
    } else {
        return url_fail(err, errlen, "URL must start with http:// or https://");
    }
    size_t alen = strcspn(p, "/?#");
    const char *auth_end = p + alen;
    if (memchr(p, '@', alen))
        return url_fail(err, errlen, "URL user information is not supported");
    const char *host = p, *host_end, *port_s = NULL;
    if (*p == '[') {
        const char *rb = memchr(p, ']', alen);
        if (!rb)
            return url_fail(err, errlen, "unterminated IPv6 literal in URL");
        host = p + 1;
        host_end = rb;
        u->ipv6 = 1;
        for (const char *c = host; c < host_end; c++)
            if (!*c ||
                !(strchr("0123456789abcdefABCDEF:.%", *c) ||
                  (c > host && memchr(host, '%', (size_t)(c - host)) && (((*c | 0x20) >= 'a' && (*c | 0x20) <= 'z')))))
                return url_fail(err, errlen, "bad IPv6 literal in URL");
        if (rb + 1 < auth_end) {
            if (rb[1] != ':')
                return url_fail(err, errlen, "bad text after the IPv6 literal in URL");
            port_s = rb + 2;
        }
    } else {
        const char *colon = memchr(p, ':', alen);
        host_end = colon ? colon : auth_end;
        if (colon)
            port_s = colon + 1;
        for (const char *c = host; c < host_end; c++)
            if (!(((*c | 0x20) >= 'a' && (*c | 0x20) <= 'z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '.' ||
                  *c == '_'))
                return url_fail(err, errlen, "bad character in URL host");
    }
    size_t hl = (size_t)(host_end - host);
    if (hl == 0)
        return url_fail(err, errlen, "URL has no host");
    if (hl >= sizeof u->host)
        return url_fail(err, errlen, "URL host too long");
    memcpy(u->host, host, hl);
    u->host[hl] = '\0';
    u->port = u->https ? 443 : 80;
    int explicit_port = 0;
    if (port_s) {
        if (port_s == auth_end)
            return url_fail(err, errlen, "URL has an empty port");
        long port = 0;
        for (const char *c = port_s; c < auth_end; c++) {
            if (*c < '0' || *c > '9' || c - port_s >= 5)
                return url_fail(err, errlen, "bad URL port");
            port = port * 10 + (*c - '0');
        }
        if (port < 1 || port > 65535)
            return url_fail(err, errlen, "URL port out of range");
        u->port = (uint16_t)port;
        explicit_port = u->port != (u->https ? 443 : 80);
    }
    const char *lb = u->ipv6 ? "[" : "", *rbk = u->ipv6 ? "]" : "";
    if (explicit_port)
        snprintf(u->hostport, sizeof u->hostport, "%s%s%s:%u", lb, u->host, rbk, u->port);
    else
        snprintf(u->hostport, sizeof u->hostport, "%s%s%s", lb, u->host, rbk);
    const char *path = auth_end;
    size_t pl = strcspn(path, "#");
    if (pl + 2 > sizeof u->path)
        return url_fail(err, errlen, "URL path too long");
    size_t off = 0;
    if (pl == 0 || path[0] == '?')
        u->path[off++] = '/';
    memcpy(u->path + off, path, pl);
    u->path[off + pl] = '\0';
    return 0;
}

int st_url_join(const st_url *u, const char *api_path, char *out, size_t outlen)
{
    size_t bl = strcspn(u->path, "?");
    while (bl > 0 && u->path[bl - 1] == '/')
        bl--;
    size_t al = strlen(api_path);
    /* an OpenAI-style base URL (".../v1", as clients take it) already holds the API's version:
     * "/v1" + "/v1/completions" -> "/v1/completions", as GET /v1/models and /tokenize treat it */
    if (bl >= 3 && !memcmp(u->path + bl - 3, "/v1", 3) && !strncmp(api_path, "/v1/", 4))
        bl -= 3;
    if (bl >= al && al > 0 && !memcmp(u->path + bl - al, api_path, al)) {
        int n = snprintf(out, outlen, "%.*s", (int)bl, u->path);
        return n < 0 || (size_t)n >= outlen ? -1 : 0;
    }
    int n = snprintf(out, outlen, "%.*s%s", (int)bl, u->path, api_path);
    return n < 0 || (size_t)n >= outlen ? -1 : 0;
}
