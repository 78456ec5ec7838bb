/* http:// and https:// URLs: scheme, host (name, IPv4, or [IPv6] literal), port, path.
 * Pure parsing, no DNS. */
#ifndef ST_URL_H
#define ST_URL_H
#include <stddef.h>
#include <stdint.h>

typedef struct st_url {
    int https;
    char host[256];     /* without brackets for IPv6 literals */
    uint16_t port;      /* explicit, or 80/443 */
    int ipv6;           /* host is an IPv6 literal */
    char hostport[272]; /* the Host header value: host[:port] (port only when not default) */
    char path[2048];    /* path and query, always starting with '/'; fragment dropped */
} st_url;

/* 0, or -1 with a one-line reason in err. Rejects userinfo, empty hosts, bad ports,
 * whitespace or control characters, and other schemes. */
int st_url_parse(const char *s, st_url *u, char *err, size_t errlen);
/* Joins a base URL's path with an API path: "/" + "/v1/x" -> "/v1/x",
 * "/proxy/" + "/v1/x" -> "/proxy/v1/x", "/v1/" + "/v1/x" -> "/v1/x" (a base that ends with the
 * API's version, as OpenAI clients write it); when the base path already ends with api_path it is
 * used as is. 0 or -1 (too long). */
int st_url_join(const st_url *u, const char *api_path, char *out, size_t outlen);

#endif
