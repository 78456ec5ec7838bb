/* Logging to stderr with a level. The level lives in the caller's context struct
 * (st_log); there is no global logger. Messages never contain secrets: callers pass
 * API keys to nothing that logs. */
#ifndef ST_LOG_H
#define ST_LOG_H
#include <stdio.h>

typedef enum { ST_LOG_ERROR = 0, ST_LOG_WARN = 1, ST_LOG_INFO = 2, ST_LOG_DEBUG = 3 } st_log_level;

typedef struct st_log {
    st_log_level level;
    FILE *out;          /* NULL means stderr */
    const char *prefix; /* e.g. "servetune" or "(APIServer pid=1)"; may be NULL */
} st_log;

void st_logf(const st_log *lg, st_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
