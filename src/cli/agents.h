/* Agent traces on the command line (load/agent.h; the file read by load/agent_file.h): the task
 * figures as a table, `servetune trace stats` on an agent trace (and its shape as JSON, also
 * stored by an agent-trace audit for its reports), and `servetune predict --agents` (the engine
 * model replays the task graphs in virtual time). docs/trace-format.md, docs/predict.md. */
#ifndef ST_CLI_AGENTS_H
#define ST_CLI_AGENTS_H
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "load/agent.h"
#include "load/agent_file.h"
#include "load/agent_run.h"

/* The task figures after a run, as the lines of bench's table. */
void st_cli_agent_print(FILE *f, const st_agent_run_stats *s);
/* The graph's shape as JSON (`trace stats --json`, and an audit's meta "agent_trace" for its
 * report): NULL out of memory. */
json_t *st_cli_agent_shape_json(const char *path, const st_agent_graph *g, const st_agent_stats *s);
/* servetune trace stats on an agent trace (json_path may be NULL): the exit status. */
int st_cli_agent_trace_stats(const char *path, const char *json_path);
/* servetune predict --agents FILE ...: the exit status. */
int st_cli_predict_agents(int argc, char **argv);

#endif
