/* Agent traces on the command line (load/agent.h): detecting and reading the file, the task
 * figures as a table, `servetune trace stats` on an agent trace, and `servetune predict --agents`
 * (the engine model replays the task graphs in virtual time). docs/trace-format.md, docs/predict.md. */
#ifndef ST_CLI_AGENTS_H
#define ST_CLI_AGENTS_H
#include <stdint.h>
#include <stdio.h>

#include "load/agent.h"
#include "load/agent_run.h"

#define ST_CLI_AGENT_FILE_MAX ((size_t)1 << 30) /* an agent trace is read whole */

/* The agent format of the file at path, from its first bytes (ST_AGENT_FMT_NONE: another trace
 * format, or unreadable: the trace readers say why). */
st_agent_format st_cli_agent_detect(const char *path);
/* Reads and parses the file (g may be NULL) and builds its workload (w may be NULL); salt as
 * st_agent_workload. 0, or -1 with "path:line: reason" in err. */
int st_cli_agent_load(const char *path, uint64_t salt, st_agent_graph *g, st_workload *w, char *err, size_t errlen);
/* The task figures after a run, as the lines of bench's table. */
void st_cli_agent_print(FILE *f, const st_agent_run_stats *s);
/* servetune trace stats on an agent trace (json_path may be NULL): the exit status. */
int st_cli_agent_trace_stats(const char *path, const char *json_path);
/* servetune predict --agents FILE ...: the exit status. */
int st_cli_predict_agents(int argc, char **argv);

#endif
