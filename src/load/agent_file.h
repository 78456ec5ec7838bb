/* Agent trace files (load/agent.h parses the bytes): which agent format a file is in, from its
 * first bytes, and the file read whole into a graph and its workload. Used by bench, trace stats,
 * predict --agents and the audit's spec (workload.trace naming an agent trace). */
#ifndef ST_AGENT_FILE_H
#define ST_AGENT_FILE_H
#include <stddef.h>
#include <stdint.h>

#include "load/agent.h"

#define ST_AGENT_FILE_MAX ((size_t)1 << 30) /* an agent trace is read whole */

/* The agent format of the file at path, from its first bytes (ST_AGENT_FMT_NONE: another trace
 * format, or unreadable: the trace readers say why). */
st_agent_format st_agent_detect_file(const char *path);
/* Reads and parses the file (g may be NULL) and builds its workload (w may be NULL); salt as
 * st_agent_workload. 0, or -1 with "path:line: reason" in err. */
int st_agent_load_file(const char *path, uint64_t salt, st_agent_graph *g, st_workload *w, char *err, size_t errlen);

#endif
