/* Agent task graphs: traffic whose requests depend on each other beyond a linear conversation
 * (a planner fans out to sub-agents, waits for all of them, then goes on). Two formats are read
 * (docs/trace-format.md, "Agent traces"):
 *
 * - the WEKA-style agentic trace (the format of the Weka KV-cache tester's captures, replayed by
 *   AIPerf and inference-perf): one JSON object per conversation (a file holding one, or JSONL
 *   of them) with block_size, hash_id_scope and `requests`, an ordered list of API calls
 *   (type "n" or "s": t, in, out, hash_ids, think_time, api_time) and sub-agent markers
 *   (type "subagent": agent_id, status, its own nested `requests`). A request depends on the
 *   request before it in its chain; a sub-agent's first request on the parent's request before
 *   the marker; the parent's request after the marker waits for the sub-agent's last request
 *   (not when the marker's status is "async_launched": a background agent).
 * - a task-graph JSONL, one node a line: {"task", "id", "parents", "input_tokens",
 *   "output_tokens", "gap", "blocks", "block_tokens", "start"}.
 *
 * Both become one st_agent_graph: tasks of nodes, each node with its parents (a DAG, one root
 * per task), its lengths, the gap between its last parent's answer and its start, and the hash
 * ids of its leading prompt blocks. Parsing does no I/O: bytes in, graph or "name:line: reason"
 * out (a cycle, a parent that never appears, a bad value). */
#ifndef ST_AGENT_H
#define ST_AGENT_H
#include <stddef.h>
#include <stdint.h>

#include "load/workload.h"

#define ST_AGENT_MAX_NODES 1000000u /* nodes in one file */
#define ST_AGENT_MAX_PARENTS 4096u  /* parents of one node */
#define ST_AGENT_MAX_BLOCKS 65536u  /* hash ids of one node */
#define ST_AGENT_ID_MAX 128u        /* a node's or a task's name, bytes */
#define ST_AGENT_BLOCK_DEFAULT 64u  /* block_tokens of the task-graph JSONL when absent */
#define ST_AGENT_GAP_MAX_S 86400.0  /* the longest gap */
#define ST_AGENT_NEST_MAX 32u       /* sub-agents within sub-agents */

typedef enum st_agent_format {
    ST_AGENT_FMT_NONE = 0,
    ST_AGENT_FMT_WEKA,  /* WEKA-style agentic trace */
    ST_AGENT_FMT_GRAPH, /* task-graph JSONL */
} st_agent_format;

typedef struct st_agent_node {
    uint32_t task; /* index into st_agent_graph.tasks */
    uint32_t line; /* 1-based line of the node (of its object) in the file */
    char id[ST_AGENT_ID_MAX];
    uint32_t input_len; /* tokens of its own prompt (graph: before its parents' answers) */
    uint32_t output_len;
    double t_s;                     /* the recorded start, s from its task's start (WEKA; graph: -1) */
    double gap_s;                   /* between its last parent's answer and its start (a root: its task's start) */
    uint32_t *parents, n_parents;   /* node indices */
    uint32_t *children, n_children; /* node indices */
    uint64_t *blocks;               /* hash ids of its leading blocks of block_size tokens */
    uint32_t n_blocks, block_size;
    uint32_t depth; /* 0 for the root: 1 + the deepest parent */
    int grow;       /* its prompt grows by its parents' answers (graph); 0: WEKA */
    int background; /* WEKA: in an async_launched sub-agent (nothing waits for it) */
} st_agent_node;

typedef struct st_agent_task {
    char name[ST_AGENT_ID_MAX];
    double start_s; /* the task's arrival, s (graph `start`), or -1 */
    uint32_t root;  /* its node without parents */
    uint32_t n_nodes;
    int local_scope; /* its hash ids name blocks of this task only (WEKA hash_id_scope local) */
} st_agent_task;

typedef struct st_agent_graph {
    st_agent_format format;
    st_agent_node *nodes;
    uint32_t n;
    st_agent_task *tasks;
    uint32_t n_tasks;
    uint32_t *order; /* n node indices, every parent before its children (task by task) */
} st_agent_graph;

/* Which agent format the bytes are in (ST_AGENT_FMT_NONE: neither; another reader's). */
st_agent_format st_agent_sniff(const char *data, size_t len);
/* Parses either format. 0, or -1 with "name:line: reason" in err. */
int st_agent_parse(const char *data, size_t len, const char *name, st_agent_graph *g, char *err, size_t errlen);
void st_agent_graph_free(st_agent_graph *g);

/* The graph as a workload: each task's root on the schedule (arrival its task's start, relative
 * to the first, or -1 when the tasks have no start), every other node a dependent item with its
 * children, parents count, gap (think) and grow; session = task + 1, turn = depth. Prompt ids:
 * each hash id's block is the same ids wherever it appears (in its task with a local scope),
 * the rest unique per node; salt gives another run other ids with the same sharing. 0 or -1. */
int st_agent_workload(const st_agent_graph *g, uint64_t salt, st_workload *out, char *err, size_t errlen);

/* The graph's whole tasks, in file order, as a workload of at least min_items items (the audit's
 * run of n requests): a pass over every task, then more passes while short (each pass's prompt
 * ids salted anew, so a pass never finds the one before it in a prefix cache; the sharing within
 * a pass kept), the last pass cut after the task that reaches min_items (min_items 0 or at most
 * the graph's nodes: the first tasks that reach it). Timed tasks: a later pass's starts follow
 * one mean gap between starts after the previous pass's last. Sessions (tasks) numbered across
 * passes; at most ST_WORKLOAD_MAX_REQUESTS items. Pass 0 is st_agent_workload(g, salt). 0 or -1. */
int st_agent_workload_n(const st_agent_graph *g, uint64_t salt, uint32_t min_items, st_workload *out, char *err,
                        size_t errlen);

/* Synthetic agent tasks (`sessions:` with `fan_out:`, bench --sessions N --fan-out W): p->sessions
 * tasks, each a planner request of first_input tokens (its first prefix_len shared by every
 * task), then turns - 1 rounds (turns uniform in [turns_min, turns_max]) in which the planner's
 * last request fans out to W workers (W uniform in [fan_out_min, fan_out_max], at most
 * ST_AGENT_FAN_OUT_MAX), each a prompt of the shared prefix and user_input new tokens grown by the
 * planner's answer, and a join: the planner's first prompt again and user_input new tokens, grown
 * by every worker's answer. Every request asks for output_len tokens; lengths spread by
 * range_ratio; think_s (exponential with that mean when think_exp) is every request's gap. The
 * tasks' first requests are on the schedule (their arrival -1), the rest dependent. 0 or -1. */
#define ST_AGENT_FAN_OUT_MAX 256u
int st_agent_sessions(const st_session_params *p, st_workload *out, char *err, size_t errlen);

/* Tasks against a context (a server's --max-model-len, or its model's max position). A node needs
 * its prompt as the graph grows it (its own input, plus each parent's answer of up to its
 * output_tokens when it grows by them) plus its own output: a node that needs more than the
 * context would be refused (HTTP 400) and could not run, nor could the nodes that wait for it; the
 * rest of its task would be a different task. So such a task is left out whole. */
typedef struct st_agent_fit {
    uint32_t context;                   /* tokens (0: no limit) */
    uint32_t tasks, requests;           /* the graph's */
    uint32_t tasks_over, requests_over; /* tasks holding a node over the context, and all their nodes */
    uint32_t nodes_over;                /* the nodes themselves over it */
    uint32_t first;                     /* the first of those nodes in the file (UINT32_MAX: none) */
    uint64_t first_need;                /* its prompt + output, tokens */
} st_agent_fit;
/* The tokens node i needs (as above). */
uint64_t st_agent_node_context(const st_agent_graph *g, uint32_t i);
/* The graph against ctx (0: nothing is over it) into *f; over (g->n_tasks flags, may be NULL):
 * 1 for each task left out. 0, or -1 out of memory. */
int st_agent_fit_context(const st_agent_graph *g, uint32_t ctx, uint8_t *over, st_agent_fit *f);
/* Removes from g the tasks flagged in drop (g->n_tasks flags) and their nodes, the others kept in
 * their order (indices renumbered; a graph may be left with no task). 0, or -1 out of memory (g
 * unchanged). */
int st_agent_graph_drop_tasks(st_agent_graph *g, const uint8_t *drop);
/* st_agent_fit_context, then the tasks over ctx removed from g. 0, or -1 out of memory. */
int st_agent_keep_within(st_agent_graph *g, uint32_t ctx, st_agent_fit *f);

/* The shape of a graph (`servetune trace stats` on an agent trace). */
#define ST_AGENT_WIDTH_ROWS 9 /* fan-out widths 2..9, the last row 9 and more */
typedef struct st_agent_stats {
    uint32_t tasks, nodes, roots_timed;
    uint32_t background; /* WEKA: nodes of background sub-agents */
    uint32_t fanouts;    /* nodes with two children or more */
    uint32_t width_max;
    double width_mean;                             /* over the fan-out nodes */
    uint32_t width_count[ST_AGENT_WIDTH_ROWS + 2]; /* [w] for w = 2..9, [10]: more */
    uint32_t joins;                                /* nodes with two parents or more */
    uint32_t depth_max;                            /* the deepest node (nodes on the longest path - 1) */
    double depth_mean;                             /* of the tasks' deepest nodes */
    uint32_t nodes_per_task_max;
    uint64_t input_tokens, output_tokens;
    /* blocks: references (hash ids over all nodes), distinct blocks, blocks met by 2+ nodes */
    uint64_t block_refs, blocks_unique, blocks_shared;
    /* Ideal prefix-cache hit rate: nodes in their recorded order (WEKA: start times; graph:
     * task starts, then parents before children), one set of blocks seen so far (per task
     * with a local scope); a node's hit is its leading blocks already seen (up to the first
     * that is not) times the block size, at most its prompt; the rate is the hits over the
     * prompts' tokens (an unbounded cache that never evicts). */
    uint64_t ideal_hit_tokens, prompt_tokens;
    double ideal_hit_rate;
} st_agent_stats;
int st_agent_stats_compute(const st_agent_graph *g, st_agent_stats *s);

#endif
