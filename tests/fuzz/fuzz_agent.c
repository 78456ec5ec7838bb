/* Fuzzes the agent-trace readers (load/agent.h: the WEKA-style agentic trace and the task-graph
 * JSONL): they accept or refuse with a "name:line: reason" message, never read out of bounds; an
 * accepted graph has one root a task, parents before children in its order, depths that grow
 * along every edge, and a workload of as many items whose dependent ones count their parents;
 * against a context, the tasks left out whole and the rest still such a graph. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "load/agent.h"

/* One root a task, parents before children in the order, depths that grow along every edge. */
static void check_graph(const st_agent_graph *gp)
{
    const st_agent_graph g = *gp;
    uint32_t *pos = malloc((size_t)(g.n ? g.n : 1) * sizeof *pos);
    if (!pos)
        abort();
    for (uint32_t k = 0; k < g.n; k++)
        pos[g.order[k]] = k;
    for (uint32_t i = 0; i < g.n; i++) {
        const st_agent_node *x = &g.nodes[i];
        if (x->task >= g.n_tasks || (!x->n_parents && g.tasks[x->task].root != i))
            abort();
        for (uint32_t j = 0; j < x->n_parents; j++)
            if (pos[x->parents[j]] >= pos[i] || g.nodes[x->parents[j]].depth >= x->depth)
                abort();
    }
    free(pos);
}

/* Against a context one token short of the first node's: its task (at least) is left out whole,
 * the rest a sound graph whose every node fits. */
static void check_context(st_agent_graph *g)
{
    uint64_t need = st_agent_node_context(g, 0);
    if (need < 2 || need > UINT32_MAX)
        return;
    uint32_t n = g->n, tasks = g->n_tasks;
    st_agent_fit f;
    if (st_agent_keep_within(g, (uint32_t)(need - 1), &f))
        return;
    if (!f.tasks_over || f.tasks != tasks || g->n_tasks != tasks - f.tasks_over || g->n != n - f.requests_over)
        abort();
    for (uint32_t i = 0; i < g->n; i++)
        if (st_agent_node_context(g, i) >= need)
            abort();
    check_graph(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    st_agent_graph g;
    char err[512];
    if (st_agent_parse((const char *)data, size, "fuzz", &g, err, sizeof err) < 0) {
        if (strncmp(err, "fuzz:", 5) != 0)
            abort();
        return 0;
    }
    check_graph(&g);
    st_agent_stats s;
    if (st_agent_stats_compute(&g, &s) == 0 && (s.nodes != g.n || s.ideal_hit_tokens > s.prompt_tokens))
        abort();
    st_workload w;
    if (g.n <= 4096 && st_agent_workload(&g, 1, &w, err, sizeof err) == 0) {
        if (w.n != g.n || w.n_dependent != g.n - g.n_tasks)
            abort();
        for (uint32_t i = 0; i < w.n; i++)
            if ((i < w.n - w.n_dependent) != (w.items[i].n_parents == 0))
                abort();
        st_workload_free(&w);
    }
    check_context(&g);
    st_agent_graph_free(&g);
    return 0;
}
