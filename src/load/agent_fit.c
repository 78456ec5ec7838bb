/* Agent task graphs against a context length (load/agent.h). */
#include "load/agent.h"

#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX

uint64_t st_agent_node_context(const st_agent_graph *g, uint32_t i)
{
    const st_agent_node *x = &g->nodes[i];
    uint64_t need = (uint64_t)x->input_len + x->output_len;
    for (uint32_t j = 0; x->grow && j < x->n_parents; j++) /* each parent's answer, at its longest */
        need += g->nodes[x->parents[j]].output_len;
    return need;
}

int st_agent_fit_context(const st_agent_graph *g, uint32_t ctx, uint8_t *over, st_agent_fit *f)
{
    memset(f, 0, sizeof *f);
    f->context = ctx;
    f->tasks = g->n_tasks;
    f->requests = g->n;
    f->first = NONE;
    uint8_t *o = over ? over : calloc(g->n_tasks ? g->n_tasks : 1, 1);
    if (!o)
        return -1;
    memset(o, 0, g->n_tasks);
    for (uint32_t i = 0; ctx && i < g->n; i++) {
        uint64_t need = st_agent_node_context(g, i);
        if (need <= ctx)
            continue;
        f->nodes_over++;
        if (f->first == NONE) {
            f->first = i;
            f->first_need = need;
        }
        o[g->nodes[i].task] = 1;
    }
    for (uint32_t t = 0; t < g->n_tasks; t++)
        if (o[t]) {
            f->tasks_over++;
            f->requests_over += g->tasks[t].n_nodes;
        }
    if (!over)
        free(o);
    return 0;
}

/* Node i's parents or children renumbered (a task's nodes name only nodes of the same task). */
static void renumber(uint32_t *v, uint32_t n, const uint32_t *nmap)
{
    for (uint32_t k = 0; k < n; k++)
        v[k] = nmap[v[k]];
}

int st_agent_graph_drop_tasks(st_agent_graph *g, const uint8_t *drop)
{
    uint32_t *nmap = malloc((size_t)(g->n ? g->n : 1) * sizeof *nmap);
    uint32_t *tmap = malloc((size_t)(g->n_tasks ? g->n_tasks : 1) * sizeof *tmap);
    if (!nmap || !tmap) {
        free(nmap);
        free(tmap);
        return -1;
    }
    uint32_t nt = 0, nn = 0;
    for (uint32_t t = 0; t < g->n_tasks; t++)
        tmap[t] = drop[t] ? NONE : nt++;
    for (uint32_t i = 0; i < g->n; i++)
        nmap[i] = tmap[g->nodes[i].task] == NONE ? NONE : nn++;
    /* nodes moved down in place (nmap[i] <= i: a slot is free or already moved from) */
    for (uint32_t i = 0; i < g->n; i++) {
        st_agent_node *x = &g->nodes[i];
        if (nmap[i] == NONE) {
            free(x->parents);
            free(x->children);
            free(x->blocks);
            continue;
        }
        renumber(x->parents, x->n_parents, nmap);
        renumber(x->children, x->n_children, nmap);
        x->task = tmap[x->task];
        if (nmap[i] != i)
            g->nodes[nmap[i]] = *x;
    }
    for (uint32_t t = 0; t < g->n_tasks; t++)
        if (tmap[t] != NONE) {
            g->tasks[tmap[t]] = g->tasks[t];
            g->tasks[tmap[t]].root = nmap[g->tasks[t].root];
        }
    uint32_t k = 0;
    for (uint32_t j = 0; j < g->n; j++)
        if (nmap[g->order[j]] != NONE)
            g->order[k++] = nmap[g->order[j]];
    g->n = nn;
    g->n_tasks = nt;
    free(nmap);
    free(tmap);
    return 0;
}

int st_agent_keep_within(st_agent_graph *g, uint32_t ctx, st_agent_fit *f)
{
    uint8_t *over = malloc(g->n_tasks ? g->n_tasks : 1);
    int rc = !over || st_agent_fit_context(g, ctx, over, f) ? -1 : 0;
    if (rc == 0 && f->tasks_over)
        rc = st_agent_graph_drop_tasks(g, over);
    free(over);
    return rc;
}
