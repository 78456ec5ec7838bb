#include "core/log.h"

#include <stdarg.h>
#include <time.h>

static const char *level_name[] = { "ERROR", "WARNING", "INFO", "DEBUG" };

void st_logf(const st_log *lg, st_log_level lvl, const char *fmt, ...)
{
    st_log_level max = lg ? lg->level : ST_LOG_INFO;
    if (lvl > max)
        return;
    FILE *f = (lg && lg->out) ? lg->out : stderr;
    char ts[32];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(ts, sizeof ts, "%m-%d %H:%M:%S", &tm);
    fprintf(f, "%s %s %s", level_name[lvl], ts, (lg && lg->prefix) ? lg->prefix : "servetune");
    fputs(": ", f);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fflush(f);
}
