/* Agent task graphs at run time (load/agent.h builds the workload): the runner's end hook that
 * sends a node when the last of its parents answered, plus its gap, its prompt grown by their
 * answers (the text the server actually returned, in the order the answers came back) when the
 * node grows; open loop across tasks (their first nodes keep the arrival schedule), closed
 * within one. A node that fails skips the nodes that wait for it, and theirs. And the task
 * figures of a run's records: makespan, critical-path TTFT, TTFT by depth, tasks/s. */
#ifndef ST_AGENT_RUN_H
#define ST_AGENT_RUN_H
#include <jansson.h>
#include <stdint.h>

#include "load/record.h"
#include "load/runner.h"
#include "load/stats.h"
#include "load/workload.h"

/* The end hook; arg is the st_workload the runner sends (its items' waiting counts and, for
 * nodes that grow, their prompt texts change as the run goes). */
void st_agent_on_end(void *arg, st_runner_ctl *r, uint32_t i, const st_record *rec, const char *answer,
                     size_t answer_len);

#define ST_AGENT_DEPTH_ROWS 8 /* TTFT by depth: 0..6, the last row 7 and deeper */
typedef struct st_agent_depth_row {
    uint32_t depth; /* the last row: this depth and deeper */
    uint32_t requests, completed;
    st_dist ttft; /* seconds, from the node's release (its last parent's answer + its gap) */
} st_agent_depth_row;

typedef struct st_agent_run_stats {
    uint32_t tasks;     /* tasks with a measured node */
    uint32_t completed; /* tasks whose every node completed */
    uint32_t nodes, nodes_ok;
    /* completed tasks: from the first node's scheduled time to the last node's end, s */
    st_dist makespan;
    /* completed tasks: the TTFT summed along the critical path (from the last node to end, up
     * through the parent that answered last, to the first node), s */
    st_dist cp_ttft;
    uint32_t cp_nodes_max; /* the longest critical path, in nodes */
    st_dist node_ttft;     /* every completed node, s */
    double span_s;         /* the first task's start to the last node's end */
    double tasks_per_s;    /* completed tasks / span_s (NAN when none) */
    /* completed tasks meeting the makespan SLO (when one was given), and their share */
    double slo_makespan_s;
    uint32_t slo_met;
    st_agent_depth_row depth[ST_AGENT_DEPTH_ROWS];
    uint32_t n_depth_rows; /* rows with requests */
} st_agent_run_stats;

/* The figures of a run of an agent workload (w->n_tasks > 0; recs[i] is item i's record).
 * slo_makespan_s > 0: also count the completed tasks within it. 0, or -1 out of memory. */
int st_agent_run_stats_compute(const st_workload *w, const st_record *recs, uint32_t n, double slo_makespan_s,
                               st_agent_run_stats *s);

/* Task makespans from a run's records alone (tasks are sessions: a record's session, the task's
 * first node its turn 0), for the audit's makespan SLO term. Times are record ns times k (engine
 * seconds per ns); a node's time is its sent time when closed, else its scheduled time, and counts
 * only up to now_s. For each task whose first node arrived within [w0, w1] (s): its makespan (the
 * last node's end minus the first node's arrival) when every node completed; online, a task still
 * running whose elapsed time already exceeds lim_s gives that elapsed time (a breach known now);
 * a task with a failed node gives none (its requests count as failed). Values in seconds into out
 * (at least n entries); returns their count, or -1 out of memory. */
int st_agent_makespans(const st_record *recs, uint32_t n, int closed, double k, double now_s, double w0, double w1,
                       int online, double lim_s, double *out);

/* The figures as JSON (bench --json "tasks", docs/bench-json.md): times in ms. NULL out of memory. */
json_t *st_agent_run_stats_json(const st_agent_run_stats *s);

#endif
