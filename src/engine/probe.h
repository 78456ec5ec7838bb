/* A small blocking HTTP/1.1 GET for readiness probes and /metrics scrapes (plain HTTP on the
 * engine's host and port). It frames responses with net/http1's parser: one HTTP parser in
 * the project. Never used on the load path. */
#ifndef ST_ENGINE_PROBE_H
#define ST_ENGINE_PROBE_H
#include <stddef.h>

#include "core/buf.h"

/* GET http://host:port/path. 0 with *status and body (bounded by body->max) filled, or -1 with
 * err ("connection refused", "timed out", "malformed response"...). The whole exchange is
 * bounded by timeout_s. auth: a bearer token or NULL (never logged). */
int st_probe_get(const char *host, int port, const char *path, const char *auth, double timeout_s, int *status,
                 st_buf *body, char *err, size_t errlen);

#endif
