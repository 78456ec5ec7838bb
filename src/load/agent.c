/* Agent task graphs: the WEKA-style agentic trace and the task-graph JSONL (load/agent.h). */
#include "load/agent.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/rng.h"
#include "core/util.h"

#define NONE UINT32_MAX
/* Seeds of the prompt ids (load/workload.h st_workload_fill_ids) */
#define AGENT_BLOCK_SEED 0x61676e74626c6bULL
#define AGENT_UNIQUE_SEED 0x61676e74756e71ULL
#define AGENT_REASON_MAX 400

static uint64_t fnv(const char *s, uint64_t h)
{
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ULL;
    return h;
}

/* ---- the parser's state ---------------------------------------------------------------- */

typedef struct idlist {
    uint32_t *v;
    uint32_t n;
    size_t cap;
} idlist;

typedef struct pctx {
    const char *data;
    size_t len;
    const char *name;
    size_t cur_off; /* line_at's cursor: the line of data[cur_off] is cur_line */
    uint32_t cur_line;
    st_agent_graph *g;
    size_t node_cap, task_cap;
    double *end_s;                /* WEKA: each node's recorded end (t + api_time), s */
    double *start_s;              /* graph: each node's `start`, or -1 */
    char (**pn)[ST_AGENT_ID_MAX]; /* graph: each node's parent names until they are resolved */
    size_t extra_cap;
    /* name -> index maps (open addressing, slot = index + 1; 0 empty) */
    uint32_t *tmap, *nmap;
    size_t tmap_cap, nmap_cap;
    int weka_relative;                /* sub-agents' times are relative to their marker */
    uint32_t graph_bs, graph_bs_line; /* graph: the file's block_tokens, and the line that gave it */
    char *err;
    size_t errlen;
} pctx;

static int perr(pctx *P, uint32_t line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int perr(pctx *P, uint32_t line, const char *fmt, ...)
{
    char why[AGENT_REASON_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    st_errf(P->err, P->errlen, "%s:%u: %s", P->name, line, why);
    return -1;
}

/* The 1-based line of a byte of the data (the cursor moves forward as the parser does). */
static uint32_t line_at(pctx *P, const char *p)
{
    size_t off = (size_t)(p - P->data);
    if (off < P->cur_off) {
        P->cur_off = 0;
        P->cur_line = 1;
    }
    for (size_t i = P->cur_off; i < off && i < P->len; i++)
        if (P->data[i] == '\n')
            P->cur_line++;
    P->cur_off = off;
    return P->cur_line;
}

/* The next line of data that is neither blank nor a comment ('#'): *s and *l (its newline left
 * out); *off moves past it and *lineno counts every line passed. 0 when none is left. */
static int next_line(const char *data, size_t len, size_t *off, uint32_t *lineno, const char **s, size_t *l)
{
    while (*off < len) {
        const char *p = data + *off, *nl = memchr(p, '\n', len - *off);
        size_t n = nl ? (size_t)(nl - p) : len - *off;
        *off += n + (nl ? 1 : 0);
        ++*lineno;
        if (!st_line_is_blank(p, n)) {
            *s = p;
            *l = n;
            return 1;
        }
    }
    return 0;
}

static int oom(pctx *P)
{
    st_errf(P->err, P->errlen, "%s: out of memory", P->name);
    return -1;
}

static int idlist_add(idlist *l, uint32_t v)
{
    if (st_grow((void **)&l->v, &l->cap, (size_t)l->n + 1, sizeof *l->v, 8))
        return -1;
    l->v[l->n++] = v;
    return 0;
}

/* ---- name maps --------------------------------------------------------------------------- */

static uint64_t node_key(uint32_t task, const char *id) { return fnv(id, st_splitmix64_of(task + 1)); }

static int map_grow(uint32_t **map, size_t *cap, size_t used, uint64_t (*key)(pctx *, uint32_t), pctx *P)
{
    if (used * 2 < *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 1024;
    uint32_t *nm = calloc(nc, sizeof *nm);
    if (!nm)
        return -1;
    for (size_t i = 0; i < *cap; i++) {
        if (!(*map)[i])
            continue;
        size_t h = (size_t)key(P, (*map)[i] - 1) & (nc - 1);
        while (nm[h])
            h = (h + 1) & (nc - 1);
        nm[h] = (*map)[i];
    }
    free(*map);
    *map = nm;
    *cap = nc;
    return 0;
}

static uint64_t task_key_of(pctx *P, uint32_t t) { return fnv(P->g->tasks[t].name, 0xcbf29ce484222325ULL); }
static uint64_t node_key_of(pctx *P, uint32_t i) { return node_key(P->g->nodes[i].task, P->g->nodes[i].id); }

/* The node `id` of task `task`, or NONE. */
static uint32_t node_find(pctx *P, uint32_t task, const char *id)
{
    if (!P->nmap_cap)
        return NONE;
    size_t h = (size_t)node_key(task, id) & (P->nmap_cap - 1);
    for (; P->nmap[h]; h = (h + 1) & (P->nmap_cap - 1)) {
        const st_agent_node *x = &P->g->nodes[P->nmap[h] - 1];
        if (x->task == task && !strcmp(x->id, id))
            return P->nmap[h] - 1;
    }
    return NONE;
}

static int node_put(pctx *P, uint32_t i)
{
    if (map_grow(&P->nmap, &P->nmap_cap, P->g->n, node_key_of, P))
        return -1;
    size_t h = (size_t)node_key_of(P, i) & (P->nmap_cap - 1);
    while (P->nmap[h])
        h = (h + 1) & (P->nmap_cap - 1);
    P->nmap[h] = i + 1;
    return 0;
}

/* ---- nodes and tasks ------------------------------------------------------------------------ */

static int new_task(pctx *P, const char *name, int local, uint32_t *out)
{
    st_agent_graph *g = P->g;
    if (st_grow((void **)&g->tasks, &P->task_cap, (size_t)g->n_tasks + 1, sizeof *g->tasks, 16))
        return oom(P);
    st_agent_task *t = &g->tasks[g->n_tasks];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->start_s = -1;
    t->root = NONE;
    t->local_scope = local;
    *out = g->n_tasks++;
    return 0;
}

/* The task named `name` (graph format), created on first sight. */
static int task_of(pctx *P, const char *name, uint32_t *out)
{
    uint64_t k = fnv(name, 0xcbf29ce484222325ULL);
    if (P->tmap_cap) {
        for (size_t h = (size_t)k & (P->tmap_cap - 1); P->tmap[h]; h = (h + 1) & (P->tmap_cap - 1))
            if (!strcmp(P->g->tasks[P->tmap[h] - 1].name, name)) {
                *out = P->tmap[h] - 1;
                return 0;
            }
    }
    if (new_task(P, name, 0, out))
        return -1;
    if (map_grow(&P->tmap, &P->tmap_cap, P->g->n_tasks, task_key_of, P))
        return oom(P);
    size_t h = (size_t)k & (P->tmap_cap - 1);
    while (P->tmap[h])
        h = (h + 1) & (P->tmap_cap - 1);
    P->tmap[h] = *out + 1;
    return 0;
}

static int new_node(pctx *P, uint32_t task, uint32_t line, uint32_t *out)
{
    st_agent_graph *g = P->g;
    if (g->n >= ST_AGENT_MAX_NODES)
        return perr(P, line, "more than %u requests in one file", ST_AGENT_MAX_NODES);
    if (st_grow((void **)&g->nodes, &P->node_cap, (size_t)g->n + 1, sizeof *g->nodes, 64))
        return oom(P);
    size_t c = P->extra_cap;
    if (st_grow((void **)&P->end_s, &c, (size_t)g->n + 1, sizeof *P->end_s, 64))
        return oom(P);
    c = P->extra_cap;
    if (st_grow((void **)&P->start_s, &c, (size_t)g->n + 1, sizeof *P->start_s, 64))
        return oom(P);
    c = P->extra_cap;
    if (st_grow((void **)&P->pn, &c, (size_t)g->n + 1, sizeof *P->pn, 64))
        return oom(P);
    P->extra_cap = c;
    st_agent_node *x = &g->nodes[g->n];
    memset(x, 0, sizeof *x);
    x->task = task;
    x->line = line;
    x->t_s = -1;
    P->end_s[g->n] = 0;
    P->start_s[g->n] = -1;
    P->pn[g->n] = NULL;
    *out = g->n++;
    g->tasks[task].n_nodes++;
    return 0;
}

static int add_parent(pctx *P, uint32_t node, uint32_t parent)
{
    st_agent_node *x = &P->g->nodes[node];
    if (x->n_parents >= ST_AGENT_MAX_PARENTS)
        return perr(P, x->line, "more than %u parents", ST_AGENT_MAX_PARENTS);
    uint32_t *np = realloc(x->parents, ((size_t)x->n_parents + 1) * sizeof *np);
    if (!np)
        return oom(P);
    x->parents = np;
    x->parents[x->n_parents++] = parent;
    return 0;
}

/* hash ids of a node (an array of non-negative integers) */
static int read_blocks(pctx *P, uint32_t node, const st_json_val *v, const char *key)
{
    st_agent_node *x = &P->g->nodes[node];
    if (st_json_is_nothing(v))
        return 0;
    long n = st_json_count(v);
    if (v->type != ST_JSON_ARRAY || n < 0)
        return perr(P, x->line, "%s: expected an array of block hash ids", key);
    if ((unsigned long)n > ST_AGENT_MAX_BLOCKS)
        return perr(P, x->line, "%s: more than %u blocks", key, ST_AGENT_MAX_BLOCKS);
    x->blocks = malloc((size_t)(n ? n : 1) * sizeof *x->blocks);
    if (!x->blocks)
        return oom(P);
    st_json_iter it;
    st_json_val k, e;
    st_json_iter_init(&it, v);
    while (st_json_iter_next(&it, &k, &e) == 1) {
        uint64_t h;
        if (st_json_u64(&e, &h))
            return perr(P, x->line, "%s[%u]: expected a non-negative integer", key, x->n_blocks);
        x->blocks[x->n_blocks++] = h;
    }
    return 0;
}

/* An optional number in [0, max]: 0 absent (*out untouched), 1 read, -1 bad (err set). */
static int opt_num(pctx *P, uint32_t line, const st_json_val *obj, const char *key, double max, double *out)
{
    st_json_val v;
    st_json_obj_get(obj, key, strlen(key), &v);
    if (st_json_is_nothing(&v))
        return 0;
    double d;
    if (st_json_num(&v, &d) || !isfinite(d) || d < 0 || d > max)
        return perr(P, line, "%s: expected a number of seconds in 0..%g", key, max);
    *out = d;
    return 1;
}

static int req_u32(pctx *P, uint32_t line, const st_json_val *obj, const char *key, uint32_t lo, uint32_t *out)
{
    st_json_val v;
    st_json_obj_get(obj, key, strlen(key), &v);
    if (st_json_is_nothing(&v))
        return perr(P, line, "%s: missing", key);
    if (st_json_u32(&v, out) || *out < lo || *out > ST_WORKLOAD_MAX_TOKENS)
        return perr(P, line, "%s: expected a whole number of tokens in %u..%u", key, lo, ST_WORKLOAD_MAX_TOKENS);
    return 0;
}

/* A name given as a string or an integer. 0, 1 absent, -1 bad. */
static int read_name(const st_json_val *v, char *buf, size_t cap)
{
    if (st_json_is_nothing(v))
        return 1;
    uint64_t u;
    if (v->type == ST_JSON_STRING) {
        size_t l;
        if (st_json_str(v, buf, cap, &l) || l == 0 || l >= cap || memchr(buf, 0, l))
            return -1;
        return 0;
    }
    if (st_json_u64(v, &u))
        return -1;
    snprintf(buf, cap, "%llu", (unsigned long long)u);
    return 0;
}

/* ---- the WEKA-style agentic trace ---------------------------------------------------------- */

/* Whether some sub-agent's first request starts before its marker: the raw captures' convention
 * (inner times relative to the marker); otherwise inner times are the trace's own. */
static int weka_scan_relative(const st_json_val *reqs, unsigned nest)
{
    if (nest > ST_AGENT_NEST_MAX || reqs->type != ST_JSON_ARRAY)
        return 0;
    st_json_iter it;
    st_json_val k, e;
    st_json_iter_init(&it, reqs);
    while (st_json_iter_next(&it, &k, &e) == 1) {
        st_json_val type, inner, first, ft;
        double t, t1;
        if (st_json_obj_get(&e, "type", 4, &type) || !st_json_str_eq(&type, "subagent", 8))
            continue;
        if (st_json_obj_get(&e, "requests", 8, &inner) || inner.type != ST_JSON_ARRAY)
            continue;
        if (!st_json_arr_get(&inner, 0, &first) && !st_json_obj_get(&first, "t", 1, &ft) && !st_json_num(&ft, &t1)) {
            st_json_val mt;
            if (!st_json_obj_get(&e, "t", 1, &mt) && !st_json_num(&mt, &t) && t1 < t)
                return 1;
        }
        if (weka_scan_relative(&inner, nest + 1))
            return 1;
    }
    return 0;
}

/* One chain of requests (the main agent's, or a sub-agent's): each request after the one before
 * it, and after the sub-agents started between them (unless they run in the background). Its
 * ends (its last request and the sub-agents nothing joined) go to *ends. */
static int weka_chain(pctx *P, const st_json_val *reqs, uint32_t task, const char *agent, double t0, uint32_t spawn,
                      int bg, unsigned nest, idlist *ends)
{
    st_agent_graph *g = P->g;
    uint32_t last = NONE, k = 0;
    idlist joins = { 0 };
    int rc = -1;
    st_json_iter it;
    st_json_val key, e;
    st_json_iter_init(&it, reqs);
    int r;
    while ((r = st_json_iter_next(&it, &key, &e)) == 1) {
        uint32_t line = line_at(P, e.p);
        st_json_val type;
        if (e.type != ST_JSON_OBJECT) {
            perr(P, line, "requests: expected objects");
            goto out;
        }
        st_json_obj_get(&e, "type", 4, &type);
        double t = 0;
        if (opt_num(P, line, &e, "t", 1e9, &t) < 0)
            goto out;
        double t_abs = t + t0;
        if (st_json_str_eq(&type, "n", 1) || st_json_str_eq(&type, "s", 1)) {
            uint32_t node, in, out_len = 0;
            if (req_u32(P, line, &e, "in", 1, &in) < 0)
                goto out;
            st_json_val ov;
            st_json_obj_get(&e, "out", 3, &ov);
            if (st_json_u32(&ov, &out_len) || out_len > ST_WORKLOAD_MAX_TOKENS) {
                perr(P, line, "out: expected a whole number of tokens in 0..%u", ST_WORKLOAD_MAX_TOKENS);
                goto out;
            }
            if (new_node(P, task, line, &node))
                goto out;
            st_agent_node *x = &g->nodes[node];
            snprintf(x->id, sizeof x->id, "%.100s%s%u", agent ? agent : "", agent ? "." : "r", k++);
            x->input_len = in;
            x->output_len = out_len ? out_len : 1; /* a request asks for one token at least */
            x->t_s = t_abs;
            x->background = bg;
            st_json_val hv;
            st_json_obj_get(&e, "hash_ids", 8, &hv);
            if (read_blocks(P, node, &hv, "hash_ids"))
                goto out;
            x->block_size = 0; /* set by the caller (the trace's block_size) */
            uint32_t from = last != NONE ? last : spawn;
            if (from != NONE && add_parent(P, node, from))
                goto out;
            for (uint32_t j = 0; j < joins.n; j++)
                if (add_parent(P, node, joins.v[j]))
                    goto out;
            joins.n = 0;
            x = &g->nodes[node];
            double think = -1, api = 0;
            if (opt_num(P, line, &e, "think_time", ST_AGENT_GAP_MAX_S, &think) < 0 ||
                opt_num(P, line, &e, "api_time", 1e7, &api) < 0)
                goto out;
            double ready = 0;
            for (uint32_t j = 0; j < x->n_parents; j++)
                if (P->end_s[x->parents[j]] > ready)
                    ready = P->end_s[x->parents[j]];
            /* the recorded pause: the think time, else the start after the last parent's end (its
             * start when the trace has no api_time: an upper bound) */
            x->gap_s = !x->n_parents ? 0 : think >= 0 ? think : t_abs > ready ? t_abs - ready : 0;
            if (x->gap_s > ST_AGENT_GAP_MAX_S)
                x->gap_s = ST_AGENT_GAP_MAX_S;
            P->end_s[node] = t_abs + api;
            last = node;
        } else if (st_json_str_eq(&type, "subagent", 8)) {
            if (nest >= ST_AGENT_NEST_MAX) {
                perr(P, line, "sub-agents nested deeper than %u", ST_AGENT_NEST_MAX);
                goto out;
            }
            st_json_val inner, sv, av;
            st_json_obj_get(&e, "requests", 8, &inner);
            if (inner.type != ST_JSON_ARRAY) {
                perr(P, line, "subagent: requests: expected an array");
                goto out;
            }
            char aid[64] = "agent";
            st_json_obj_get(&e, "agent_id", 8, &av);
            if (read_name(&av, aid, sizeof aid) < 0) {
                perr(P, line, "agent_id: expected a name of at most %zu bytes", sizeof aid - 1);
                goto out;
            }
            st_json_obj_get(&e, "status", 6, &sv);
            int async = st_json_str_eq(&sv, "async_launched", 14);
            idlist sub = { 0 };
            int src = weka_chain(P, &inner, task, aid, P->weka_relative ? t_abs : 0, last != NONE ? last : spawn,
                                 bg || async, nest + 1, &sub);
            for (uint32_t j = 0; src == 0 && !async && j < sub.n; j++)
                if (idlist_add(&joins, sub.v[j]))
                    src = oom(P);
            free(sub.v);
            if (src)
                goto out;
        } else {
            perr(P, line, "type: expected \"n\", \"s\" or \"subagent\"");
            goto out;
        }
    }
    if (r < 0) {
        perr(P, line_at(P, reqs->p), "requests: malformed JSON");
        goto out;
    }
    if (last != NONE && idlist_add(ends, last))
        goto nomem;
    for (uint32_t j = 0; j < joins.n; j++)
        if (idlist_add(ends, joins.v[j]))
            goto nomem;
    rc = 0;
    goto out;
nomem:
    oom(P);
out:
    free(joins.v);
    return rc;
}

/* One trace object (one conversation: one task). */
static int weka_trace(pctx *P, const st_json_val *obj, uint32_t index)
{
    uint32_t line = line_at(P, obj->p);
    if (obj->type != ST_JSON_OBJECT)
        return perr(P, line, "expected a trace object");
    char name[ST_AGENT_ID_MAX];
    st_json_val v;
    st_json_obj_get(obj, "id", 2, &v);
    int nr = read_name(&v, name, sizeof name);
    if (nr < 0)
        return perr(P, line, "id: expected a name of at most %u bytes", ST_AGENT_ID_MAX - 1);
    if (nr > 0)
        snprintf(name, sizeof name, "trace%u", index + 1);
    uint32_t bs;
    st_json_obj_get(obj, "block_size", 10, &v);
    if (st_json_u32(&v, &bs) || bs == 0 || bs > 1u << 20)
        return perr(P, line, "block_size: expected a whole number of tokens in 1..%u", 1u << 20);
    st_json_obj_get(obj, "hash_id_scope", 13, &v);
    int local = 1;
    if (st_json_str_eq(&v, "global", 6))
        local = 0;
    else if (!st_json_is_nothing(&v) && !st_json_str_eq(&v, "local", 5))
        return perr(P, line, "hash_id_scope: expected \"local\" or \"global\"");
    st_json_val reqs;
    st_json_obj_get(obj, "requests", 8, &reqs);
    if (reqs.type != ST_JSON_ARRAY || st_json_count(&reqs) <= 0)
        return perr(P, line, "requests: expected a non-empty array");
    uint32_t task, first = P->g->n;
    if (new_task(P, name, local, &task))
        return -1;
    P->weka_relative = weka_scan_relative(&reqs, 0);
    idlist ends = { 0 };
    int rc = weka_chain(P, &reqs, task, NULL, 0, NONE, 0, 0, &ends);
    free(ends.v);
    if (rc)
        return -1;
    if (P->g->n == first)
        return perr(P, line, "the trace has no request (only empty sub-agents)");
    for (uint32_t i = first; i < P->g->n; i++)
        P->g->nodes[i].block_size = bs;
    return 0;
}

static int parse_weka(pctx *P)
{
    st_json_val root;
    if (st_json_parse(P->data, P->len, &root) == 0) /* one trace object */
        return weka_trace(P, &root, 0);
    /* JSONL: a trace object a line */
    uint32_t lineno = 0, k = 0;
    const char *s;
    size_t l;
    for (size_t off = 0; next_line(P->data, P->len, &off, &lineno, &s, &l);) {
        if (st_json_parse(s, l, &root) < 0)
            return perr(P, lineno, "not a JSON trace object (malformed JSON)");
        if (weka_trace(P, &root, k++))
            return -1;
    }
    return 0;
}

/* ---- the task-graph JSONL ------------------------------------------------------------------ */

static int graph_line(pctx *P, const char *s, size_t l, uint32_t line)
{
    st_json_val obj;
    if (st_json_parse(s, l, &obj) < 0 || obj.type != ST_JSON_OBJECT)
        return perr(P, line, "expected a JSON object (a node)");
    static const char *const keys[] = { "task", "id",     "parents",      "input_tokens", "output_tokens",
                                        "gap",  "blocks", "block_tokens", "start" };
    st_json_val v[9];
    st_json_obj_fields(&obj, keys, 9, v);
    char tname[ST_AGENT_ID_MAX], id[ST_AGENT_ID_MAX];
    if (read_name(&v[0], tname, sizeof tname))
        return perr(P, line, "task: expected a name (a string or an integer, at most %u bytes)", ST_AGENT_ID_MAX - 1);
    if (read_name(&v[1], id, sizeof id))
        return perr(P, line, "id: expected a name (a string or an integer, at most %u bytes)", ST_AGENT_ID_MAX - 1);
    uint32_t task, node, in, out_len;
    if (req_u32(P, line, &obj, "input_tokens", 1, &in) || req_u32(P, line, &obj, "output_tokens", 1, &out_len))
        return -1;
    if (task_of(P, tname, &task))
        return -1;
    uint32_t dup = node_find(P, task, id);
    if (dup != NONE)
        return perr(P, line, "node %s appears twice in task %s (first on line %u)", id, tname, P->g->nodes[dup].line);
    if (new_node(P, task, line, &node))
        return -1;
    st_agent_node *x = &P->g->nodes[node];
    snprintf(x->id, sizeof x->id, "%s", id);
    x->input_len = in;
    x->output_len = out_len;
    x->grow = 1;
    if (node_put(P, node))
        return oom(P);
    if (opt_num(P, line, &obj, "gap", ST_AGENT_GAP_MAX_S, &x->gap_s) < 0 ||
        opt_num(P, line, &obj, "start", 1e10, &P->start_s[node]) < 0)
        return -1;
    if (!st_json_is_nothing(&v[7])) { /* one block size for the whole file */
        uint32_t bs;
        if (st_json_u32(&v[7], &bs) || !bs || bs > 1u << 20)
            return perr(P, line, "block_tokens: expected a whole number in 1..%u", 1u << 20);
        if (P->graph_bs && bs != P->graph_bs)
            return perr(P, line, "block_tokens: %u, but line %u gave %u (one block size a file)", bs, P->graph_bs_line,
                        P->graph_bs);
        P->graph_bs = bs;
        P->graph_bs_line = line;
    }
    if (read_blocks(P, node, &v[6], "blocks"))
        return -1;
    if (!st_json_is_nothing(&v[2])) {
        long n = st_json_count(&v[2]);
        if (v[2].type != ST_JSON_ARRAY || n < 0)
            return perr(P, line, "parents: expected an array of node ids");
        if ((unsigned long)n > ST_AGENT_MAX_PARENTS)
            return perr(P, line, "more than %u parents", ST_AGENT_MAX_PARENTS);
        if (n) {
            P->pn[node] = calloc((size_t)n, sizeof *P->pn[node]);
            if (!P->pn[node])
                return oom(P);
            st_json_iter it;
            st_json_val k, e;
            st_json_iter_init(&it, &v[2]);
            uint32_t j = 0;
            while (st_json_iter_next(&it, &k, &e) == 1) {
                if (read_name(&e, P->pn[node][j], ST_AGENT_ID_MAX))
                    return perr(P, line, "parents[%u]: expected a node id", j);
                for (uint32_t q = 0; q < j; q++)
                    if (!strcmp(P->pn[node][q], P->pn[node][j]))
                        return perr(P, line, "parents: %s listed twice", P->pn[node][j]);
                j++;
            }
            x->n_parents = j; /* names for now: resolved once every line is read */
        }
    }
    return 0;
}

static int parse_graph(pctx *P)
{
    uint32_t lineno = 0;
    const char *s;
    size_t l;
    for (size_t off = 0; next_line(P->data, P->len, &off, &lineno, &s, &l);)
        if (graph_line(P, s, l, lineno))
            return -1;
    /* parents by name -> indices */
    st_agent_graph *g = P->g;
    for (uint32_t i = 0; i < g->n; i++)
        g->nodes[i].block_size = P->graph_bs ? P->graph_bs : ST_AGENT_BLOCK_DEFAULT;
    for (uint32_t i = 0; i < g->n; i++) {
        st_agent_node *x = &g->nodes[i];
        uint32_t np = x->n_parents;
        x->n_parents = 0;
        for (uint32_t j = 0; j < np; j++) {
            const char *pname = P->pn[i][j];
            uint32_t p = node_find(P, x->task, pname);
            if (p == NONE)
                return perr(P, x->line, "node %s: its parent %s never appears in task %s", x->id, pname,
                            g->tasks[x->task].name);
            if (p == i)
                return perr(P, x->line, "node %s is its own parent (a cycle)", x->id);
            if (add_parent(P, i, p))
                return -1;
        }
    }
    return 0;
}

/* ---- the graph's shape: children, order, depth, roots --------------------------------------- */

/* each node's children array, filled from the parents; indeg[i] = node i's parent count */
static int link_children(pctx *P, uint32_t *nc, uint32_t *indeg)
{
    st_agent_graph *g = P->g;
    for (uint32_t i = 0; i < g->n; i++)
        for (uint32_t j = 0; j < g->nodes[i].n_parents; j++)
            nc[g->nodes[i].parents[j]]++;
    for (uint32_t i = 0; i < g->n; i++) {
        st_agent_node *x = &g->nodes[i];
        if (nc[i] && !(x->children = malloc((size_t)nc[i] * sizeof *x->children)))
            return oom(P);
        indeg[i] = x->n_parents;
    }
    for (uint32_t i = 0; i < g->n; i++)
        for (uint32_t j = 0; j < g->nodes[i].n_parents; j++) {
            st_agent_node *p = &g->nodes[g->nodes[i].parents[j]];
            p->children[p->n_children++] = i;
        }
    return 0;
}

/* Kahn: roots in file order, then each node once its parents are placed; returns the nodes placed */
static uint32_t kahn_order(st_agent_graph *g, uint32_t *indeg)
{
    uint32_t head = 0, tail = 0;
    for (uint32_t i = 0; i < g->n; i++)
        if (!indeg[i])
            g->order[tail++] = i;
    while (head < tail) {
        uint32_t i = g->order[head++];
        st_agent_node *x = &g->nodes[i];
        for (uint32_t j = 0; j < x->n_children; j++) {
            st_agent_node *c = &g->nodes[x->children[j]];
            if (c->depth < x->depth + 1)
                c->depth = x->depth + 1;
            if (--indeg[x->children[j]] == 0)
                g->order[tail++] = x->children[j];
        }
    }
    return tail;
}

/* a node left unplaced's first unplaced parent, or NONE */
static uint32_t unplaced_parent(const st_agent_graph *g, const uint32_t *indeg, uint32_t y)
{
    const st_agent_node *x = &g->nodes[y];
    for (uint32_t j = 0; j < x->n_parents; j++)
        if (indeg[x->parents[j]])
            return x->parents[j];
    return NONE;
}

/* a node on a cycle: walk up from a node left over until a node repeats; then the cycle's node on the
   first line */
static uint32_t cycle_node(const st_agent_graph *g, const uint32_t *indeg)
{
    uint32_t c = NONE;
    for (uint32_t i = 0; i < g->n && c == NONE; i++)
        if (indeg[i])
            c = i;
    for (uint32_t step = 0; step < g->n; step++) {
        const st_agent_node *x = &g->nodes[c];
        for (uint32_t j = 0; j < x->n_parents; j++)
            if (indeg[x->parents[j]]) {
                c = x->parents[j];
                break;
            }
    }
    uint32_t best = c;
    for (uint32_t y = c, step = 0; step < g->n; step++) {
        uint32_t nx = unplaced_parent(g, indeg, y);
        if (nx == NONE || nx == c)
            break;
        y = nx;
        if (g->nodes[y].line < g->nodes[best].line)
            best = y;
    }
    return best;
}

/* a cycle of parents reported from its node on the first line, with up to 8 of its nodes */
static int cycle_error(pctx *P, const uint32_t *indeg)
{
    const st_agent_graph *g = P->g;
    uint32_t c = cycle_node(g, indeg);
    char path[240] = "";
    size_t pl = 0;
    uint32_t y = c;
    for (int hops = 0; hops < 8; hops++) {
        pl += (size_t)snprintf(path + pl, sizeof path - pl, "%s%.40s", hops ? " <- " : "", g->nodes[y].id);
        if (pl >= sizeof path)
            break;
        uint32_t nx = unplaced_parent(g, indeg, y);
        if (nx == NONE)
            break;
        y = nx;
        if (y == c) {
            snprintf(path + pl, sizeof path - pl, " <- %.40s", g->nodes[c].id);
            break;
        }
    }
    return perr(P, g->nodes[c].line, "node %s of task %s is on a cycle of parents (%s): no node of it can start",
                g->nodes[c].id, g->tasks[g->nodes[c].task].name, path);
}

/* one root a task; the graph format's `start` on every root or none, and only on roots */
static int assign_roots(pctx *P)
{
    st_agent_graph *g = P->g;
    int timed = -1;
    for (uint32_t i = 0; i < g->n; i++) {
        st_agent_node *x = &g->nodes[i];
        st_agent_task *t = &g->tasks[x->task];
        if (x->n_parents)
            continue;
        if (t->root != NONE)
            return perr(P, x->line,
                        "task %s has a second node without parents (%s; the first, %s, is on line %u): a task "
                        "starts from one node",
                        t->name, x->id, g->nodes[t->root].id, g->nodes[t->root].line);
        t->root = i;
        if (g->format == ST_AGENT_FMT_GRAPH) {
            int has = P->start_s[i] >= 0;
            if (timed >= 0 && has != timed)
                return perr(P, x->line, "start: given on some tasks' first nodes and not on others (task %s)", t->name);
            timed = has;
            t->start_s = P->start_s[i];
        }
    }
    for (uint32_t i = 0; i < g->n; i++)
        if (g->nodes[i].n_parents && P->start_s[i] >= 0)
            return perr(P, g->nodes[i].line, "start: only a task's first node (no parents) gives the task's start");
    return 0;
}

/* the graph's shape: children, a topological order with depths, one root a task */
static int finish(pctx *P)
{
    st_agent_graph *g = P->g;
    if (g->n == 0) {
        st_errf(P->err, P->errlen, "%s:1: no request in the file", P->name);
        return -1;
    }
    uint32_t *nc = calloc(g->n, sizeof *nc), *indeg = calloc(g->n, sizeof *indeg);
    g->order = malloc((size_t)g->n * sizeof *g->order);
    int rc = -1;
    if (!nc || !indeg || !g->order)
        oom(P);
    else if (link_children(P, nc, indeg) == 0) {
        if (kahn_order(g, indeg) < g->n)
            cycle_error(P, indeg);
        else
            rc = assign_roots(P);
    }
    free(nc);
    free(indeg);
    return rc;
}

/* ---- entry points ---------------------------------------------------------------------------- */

/* A WEKA-style trace object: a "requests" array and a numeric "block_size". */
static int weka_shaped(const st_json_val *obj)
{
    st_json_val v, b;
    st_json_obj_get(obj, "requests", 8, &v);
    st_json_obj_get(obj, "block_size", 10, &b);
    return v.type == ST_JSON_ARRAY && b.type == ST_JSON_NUMBER;
}

st_agent_format st_agent_sniff(const char *data, size_t len)
{
    st_json_val root, v, t;
    if (st_json_parse(data, len, &root) == 0 && root.type == ST_JSON_OBJECT && weka_shaped(&root))
        return ST_AGENT_FMT_WEKA; /* (else perhaps one task-graph line) */
    /* the first line that is not blank or a comment */
    const char *s;
    size_t l, off = 0;
    uint32_t lineno = 0;
    if (!next_line(data, len, &off, &lineno, &s, &l) || st_json_parse(s, l, &root) < 0 || root.type != ST_JSON_OBJECT)
        return ST_AGENT_FMT_NONE;
    if (weka_shaped(&root))
        return ST_AGENT_FMT_WEKA;
    st_json_obj_get(&root, "task", 4, &t);
    st_json_obj_get(&root, "parents", 7, &v);
    return !st_json_is_nothing(&t) && v.type == ST_JSON_ARRAY ? ST_AGENT_FMT_GRAPH : ST_AGENT_FMT_NONE;
}

void st_agent_graph_free(st_agent_graph *g)
{
    if (!g)
        return;
    for (uint32_t i = 0; i < g->n; i++) {
        free(g->nodes[i].parents);
        free(g->nodes[i].children);
        free(g->nodes[i].blocks);
    }
    free(g->nodes);
    free(g->tasks);
    free(g->order);
    memset(g, 0, sizeof *g);
}

int st_agent_parse(const char *data, size_t len, const char *name, st_agent_graph *g, char *err, size_t errlen)
{
    memset(g, 0, sizeof *g);
    pctx P = { .data = data, .len = len, .name = name, .cur_line = 1, .g = g, .err = err, .errlen = errlen };
    g->format = st_agent_sniff(data, len);
    int rc;
    if (g->format == ST_AGENT_FMT_WEKA)
        rc = parse_weka(&P);
    else if (g->format == ST_AGENT_FMT_GRAPH)
        rc = parse_graph(&P);
    else {
        st_errf(err, errlen,
                "%s:1: not an agent trace (a WEKA-style trace object with block_size and requests, or task-graph "
                "JSONL lines with task and parents)",
                name);
        rc = -1;
    }
    if (rc == 0)
        rc = finish(&P);
    for (uint32_t i = 0; P.pn && i < g->n; i++)
        free(P.pn[i]);
    free(P.pn);
    free(P.end_s);
    free(P.start_s);
    free(P.tmap);
    free(P.nmap);
    if (rc)
        st_agent_graph_free(g);
    return rc;
}

/* ---- the workload ------------------------------------------------------------------------------ */

static void node_ids(const st_agent_graph *g, uint32_t i, uint64_t salt, uint32_t *ids)
{
    const st_agent_node *x = &g->nodes[i];
    uint64_t scope = g->tasks[x->task].local_scope ? st_splitmix64_of(0x7a5c0000ULL + x->task) : 0;
    uint32_t k = 0, n = x->input_len, bs = x->block_size ? x->block_size : ST_AGENT_BLOCK_DEFAULT;
    for (uint32_t b = 0; b < x->n_blocks && k < n; b++) {
        uint32_t m = n - k < bs ? n - k : bs;
        st_workload_fill_ids(AGENT_BLOCK_SEED ^ salt ^ scope ^ st_splitmix64_of(x->blocks[b] + 1), ids + k, m);
        k += m;
    }
    if (k < n)
        st_workload_fill_ids(AGENT_UNIQUE_SEED ^ salt ^ st_splitmix64_of(((uint64_t)i + 1) * 0xbf58476d1ce4e5b9ULL),
                             ids + k, n - k);
}

int st_agent_workload(const st_agent_graph *g, uint64_t salt, st_workload *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    uint32_t *item = malloc((size_t)(g->n ? g->n : 1) * sizeof *item);
    out->items = calloc(g->n ? g->n : 1, sizeof *out->items);
    if (!item || !out->items) {
        free(item);
        free(out->items);
        out->items = NULL;
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    /* the roots first (the scheduled items), then the other nodes in file order */
    uint32_t k = 0;
    for (uint32_t t = 0; t < g->n_tasks; t++)
        item[g->tasks[t].root] = k++;
    for (uint32_t i = 0; i < g->n; i++)
        if (g->nodes[i].n_parents)
            item[i] = k++;
    double t0 = -1;
    for (uint32_t t = 0; t < g->n_tasks; t++)
        if (g->tasks[t].start_s >= 0 && (t0 < 0 || g->tasks[t].start_s < t0))
            t0 = g->tasks[t].start_s;
    out->n = g->n;
    out->n_dependent = g->n - g->n_tasks;
    out->n_tasks = g->n_tasks;
    for (uint32_t i = 0; i < g->n; i++) {
        const st_agent_node *x = &g->nodes[i];
        st_work_item *it = &out->items[item[i]];
        it->id = item[i];
        it->arrival = -1;
        if (!x->n_parents && t0 >= 0)
            it->arrival = (st_ns)llround((g->tasks[x->task].start_s - t0) * 1e9);
        it->input_len = x->input_len;
        it->output_len = x->output_len;
        it->session = x->task + 1;
        it->turn = x->depth;
        it->think = (st_ns)llround(x->gap_s * 1e9);
        it->n_parents = it->waiting = x->n_parents;
        it->grow = x->grow;
        it->input_ids = malloc((size_t)x->input_len * sizeof *it->input_ids);
        it->children = x->n_children ? malloc((size_t)x->n_children * sizeof *it->children) : NULL;
        if (!it->input_ids || (x->n_children && !it->children)) {
            free(item);
            st_workload_free(out);
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        node_ids(g, i, salt, it->input_ids);
        for (uint32_t j = 0; j < x->n_children; j++)
            it->children[j] = item[x->children[j]];
        it->n_children = x->n_children;
    }
    free(item);
    return 0;
}

/* ---- the shape ---------------------------------------------------------------------------------- */

typedef struct bslot {
    uint64_t hash;
    uint32_t scope; /* 0 global, else task + 1 */
    uint32_t refs;  /* 0: empty */
} bslot;

typedef struct bset {
    bslot *s;
    size_t cap, used;
} bset;

static uint64_t bkey(uint32_t scope, uint64_t hash) { return st_splitmix64_of(hash ^ st_splitmix64_of(scope)); }

static bslot *bset_find(bset *b, uint32_t scope, uint64_t hash)
{
    if (!b->cap)
        return NULL;
    for (size_t h = (size_t)bkey(scope, hash) & (b->cap - 1); b->s[h].refs; h = (h + 1) & (b->cap - 1))
        if (b->s[h].hash == hash && b->s[h].scope == scope)
            return &b->s[h];
    return NULL;
}

static int bset_add(bset *b, uint32_t scope, uint64_t hash)
{
    bslot *f = bset_find(b, scope, hash);
    if (f) {
        f->refs++;
        return 0;
    }
    if ((b->used + 1) * 2 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 1024;
        bslot *ns = calloc(nc, sizeof *ns);
        if (!ns)
            return -1;
        for (size_t i = 0; i < b->cap; i++) {
            if (!b->s[i].refs)
                continue;
            size_t h = (size_t)bkey(b->s[i].scope, b->s[i].hash) & (nc - 1);
            while (ns[h].refs)
                h = (h + 1) & (nc - 1);
            ns[h] = b->s[i];
        }
        free(b->s);
        b->s = ns;
        b->cap = nc;
    }
    size_t h = (size_t)bkey(scope, hash) & (b->cap - 1);
    while (b->s[h].refs)
        h = (h + 1) & (b->cap - 1);
    b->s[h] = (bslot){ hash, scope, 1 };
    b->used++;
    return 0;
}

typedef struct ord_ctx {
    const st_agent_graph *g;
    const uint32_t *pos;
} ord_ctx;

static int cmp_replay(const void *a, const void *b, void *arg)
{
    const ord_ctx *c = arg;
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    const st_agent_node *x = &c->g->nodes[i], *y = &c->g->nodes[j];
    double sx = c->g->tasks[x->task].start_s, sy = c->g->tasks[y->task].start_s;
    if (sx != sy)
        return sx < sy ? -1 : 1;
    if (x->task != y->task)
        return x->task < y->task ? -1 : 1;
    if (x->t_s >= 0 && y->t_s >= 0 && x->t_s != y->t_s)
        return x->t_s < y->t_s ? -1 : 1;
    return c->pos[i] < c->pos[j] ? -1 : c->pos[i] > c->pos[j];
}

int st_agent_stats_compute(const st_agent_graph *g, st_agent_stats *s)
{
    memset(s, 0, sizeof *s);
    s->tasks = g->n_tasks;
    s->nodes = g->n;
    uint32_t *pos = malloc((size_t)(g->n ? g->n : 1) * sizeof *pos);
    uint32_t *seq = malloc((size_t)(g->n ? g->n : 1) * sizeof *seq);
    uint32_t *deep = calloc(g->n_tasks ? g->n_tasks : 1, sizeof *deep);
    bset B = { 0 };
    int rc = -1;
    if (!pos || !seq || !deep)
        goto out;
    uint64_t width_sum = 0;
    for (uint32_t k = 0; k < g->n; k++) {
        pos[g->order[k]] = k;
        seq[k] = g->order[k];
    }
    for (uint32_t i = 0; i < g->n; i++) {
        const st_agent_node *x = &g->nodes[i];
        s->input_tokens += x->input_len;
        s->output_tokens += x->output_len;
        s->background += x->background != 0;
        if (x->n_parents >= 2)
            s->joins++;
        if (x->n_children >= 2) {
            s->fanouts++;
            width_sum += x->n_children;
            if (x->n_children > s->width_max)
                s->width_max = x->n_children;
            s->width_count[x->n_children <= ST_AGENT_WIDTH_ROWS ? x->n_children : ST_AGENT_WIDTH_ROWS + 1]++;
        }
        if (x->depth > deep[x->task])
            deep[x->task] = x->depth;
        if (x->depth > s->depth_max)
            s->depth_max = x->depth;
    }
    s->width_mean = s->fanouts ? (double)width_sum / s->fanouts : 0;
    double dsum = 0;
    for (uint32_t t = 0; t < g->n_tasks; t++) {
        dsum += deep[t];
        if (g->tasks[t].n_nodes > s->nodes_per_task_max)
            s->nodes_per_task_max = g->tasks[t].n_nodes;
        s->roots_timed += g->tasks[t].start_s >= 0;
    }
    s->depth_mean = g->n_tasks ? dsum / g->n_tasks : 0;
    ord_ctx oc = { g, pos };
    qsort_r(seq, g->n, sizeof *seq, cmp_replay, &oc);
    for (uint32_t k = 0; k < g->n; k++) {
        const st_agent_node *x = &g->nodes[seq[k]];
        uint32_t scope = g->tasks[x->task].local_scope ? x->task + 1 : 0;
        uint32_t bs = x->block_size ? x->block_size : ST_AGENT_BLOCK_DEFAULT, lead = 0;
        while (lead < x->n_blocks && bset_find(&B, scope, x->blocks[lead]))
            lead++;
        uint64_t hit = (uint64_t)lead * bs;
        s->ideal_hit_tokens += hit < x->input_len ? hit : x->input_len;
        s->prompt_tokens += x->input_len;
        for (uint32_t b = 0; b < x->n_blocks; b++)
            if (bset_add(&B, scope, x->blocks[b]))
                goto out;
        s->block_refs += x->n_blocks;
    }
    for (size_t i = 0; i < B.cap; i++)
        if (B.s[i].refs) {
            s->blocks_unique++;
            s->blocks_shared += B.s[i].refs >= 2;
        }
    s->ideal_hit_rate = s->prompt_tokens ? (double)s->ideal_hit_tokens / (double)s->prompt_tokens : 0;
    rc = 0;
out:
    free(pos);
    free(seq);
    free(deep);
    free(B.s);
    return rc;
}

/* ---- synthetic agent tasks ---------------------------------------------------------------------- */

static void spread(uint32_t v, double r, uint32_t *lo, uint32_t *hi)
{
    *lo = (uint32_t)floor(v * (1 - r));
    *hi = (uint32_t)floor(v * (1 + r));
    if (*lo < 1)
        *lo = 1;
    if (*hi < *lo)
        *hi = *lo;
}

static void rng_ids(st_rng *r, uint32_t *ids, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        ids[i] = st_rng_range(r, ST_WORKLOAD_VOCAB_LO, ST_WORKLOAD_VOCAB_DEFAULT - 1);
}

/* the lengths' ranges of synthetic tasks (first prompt, new user tokens, answer) */
typedef struct {
    uint32_t f_lo, f_hi, u_lo, u_hi, o_lo, o_hi;
} sess_ranges;

/* the fan-out range and the longest prompt (a join: the first prompt, new tokens, every worker's answer)
   checked; the ranges set */
static int sessions_check(const st_session_params *p, sess_ranges *R, char *err, size_t errlen)
{
    if (p->fan_out_min < 1 || p->fan_out_max < p->fan_out_min || p->fan_out_max > ST_AGENT_FAN_OUT_MAX) {
        st_errf(err, errlen, "fan-out must be a range within 1..%u", ST_AGENT_FAN_OUT_MAX);
        return -1;
    }
    spread(p->first_input, p->range_ratio, &R->f_lo, &R->f_hi);
    spread(p->user_input, p->range_ratio, &R->u_lo, &R->u_hi);
    spread(p->output_len, p->range_ratio, &R->o_lo, &R->o_hi);
    uint64_t longest = (uint64_t)R->f_hi + R->u_hi + (uint64_t)p->fan_out_max * R->o_hi;
    if ((uint64_t)p->prefix_len + R->u_hi > longest)
        longest = (uint64_t)p->prefix_len + R->u_hi + R->o_hi;
    if (longest > ST_WORKLOAD_MAX_TOKENS) {
        st_errf(err, errlen, "a join of %u workers grows to %llu tokens, more than %u", p->fan_out_max,
                (unsigned long long)longest, ST_WORKLOAD_MAX_TOKENS);
        return -1;
    }
    return 0;
}

/* the shape first: rounds and widths of every task (*rounds, *width allocated), *total requests */
static int sessions_shape(const st_session_params *p, st_rng *rng, uint32_t **rounds_out, uint32_t **width_out,
                          uint64_t *total_out, char *err, size_t errlen)
{
    uint32_t T = p->sessions;
    uint32_t *rounds = malloc((size_t)T * sizeof *rounds);
    uint64_t total = 0, nw = 0;
    if (!rounds) {
        st_errf(err, errlen, "out of memory");
        return -1;
    }
    for (uint32_t t = 0; t < T; t++) {
        rounds[t] = st_rng_range(rng, p->turns_min, p->turns_max) - 1;
        nw += rounds[t];
    }
    uint32_t *width = malloc((size_t)(nw ? nw : 1) * sizeof *width);
    if (!width) {
        free(rounds);
        st_errf(err, errlen, "out of memory");
        return -1;
    }
    for (uint64_t k = 0; k < nw; k++) {
        width[k] = st_rng_range(rng, p->fan_out_min, p->fan_out_max);
        total += width[k] + 1;
    }
    total += T;
    if (total > ST_WORKLOAD_MAX_REQUESTS) {
        free(rounds);
        free(width);
        st_errf(err, errlen, "%llu requests in all, more than %u", (unsigned long long)total, ST_WORKLOAD_MAX_REQUESTS);
        return -1;
    }
    *rounds_out = rounds;
    *width_out = width;
    *total_out = total;
    return 0;
}

/* the synthetic tasks being generated: items in task order (roots first, then workers and joins) */
typedef struct {
    const st_session_params *p;
    const sess_ranges *R;
    st_rng *rng;
    st_work_item *items;
    const uint32_t *prefix;
    uint32_t dep; /* the next dependent item */
} sess_gen;

/* task t's first request (the planner's): the shared prefix, then its own tokens */
static int sessions_root(sess_gen *G, uint32_t t)
{
    const st_session_params *p = G->p;
    st_work_item *root = &G->items[t];
    root->id = t;
    root->arrival = -1;
    root->session = t + 1;
    root->input_len = st_rng_range(G->rng, G->R->f_lo, G->R->f_hi);
    root->output_len = st_rng_range(G->rng, G->R->o_lo, G->R->o_hi);
    root->prefix_len = p->prefix_len;
    if (!(root->input_ids = malloc((size_t)root->input_len * sizeof *root->input_ids)))
        return -1;
    memcpy(root->input_ids, G->prefix, (size_t)p->prefix_len * sizeof *G->prefix);
    rng_ids(G->rng, root->input_ids + p->prefix_len, root->input_len - p->prefix_len);
    return 0;
}

/* round r of task t: W workers from the planner's request `from`, then their join (at *from after) */
static int sessions_round(sess_gen *G, uint32_t t, uint32_t r, uint32_t W, uint32_t *from)
{
    const st_session_params *p = G->p;
    const st_work_item *root = &G->items[t];
    uint32_t join = G->dep + W;
    st_work_item *pl = &G->items[*from];
    if (!(pl->children = malloc((size_t)W * sizeof *pl->children)))
        return -1;
    for (uint32_t k = 0; k <= W; k++) {
        uint32_t idx = G->dep++;
        st_work_item *it = &G->items[idx];
        int is_join = k == W;
        it->id = idx;
        it->arrival = -1;
        it->session = t + 1;
        it->turn = 2 * r + 1 + (uint32_t)is_join;
        it->grow = 1;
        it->output_len = st_rng_range(G->rng, G->R->o_lo, G->R->o_hi);
        uint32_t own = is_join ? root->input_len : p->prefix_len, u = st_rng_range(G->rng, G->R->u_lo, G->R->u_hi);
        it->input_len = own + u;
        double th = p->think_exp ? st_rng_exp(G->rng, p->think_s > 0 ? 1.0 / p->think_s : 0) : p->think_s;
        it->think = (st_ns)llround(isfinite(th) ? th * 1e9 : 0);
        it->n_parents = it->waiting = is_join ? W : 1;
        if (!(it->input_ids = malloc((size_t)it->input_len * sizeof *it->input_ids)))
            return -1;
        memcpy(it->input_ids, is_join ? root->input_ids : G->prefix, (size_t)own * sizeof *G->prefix);
        rng_ids(G->rng, it->input_ids + own, u);
        if (is_join)
            continue;
        pl->children[pl->n_children++] = idx;
        if (!(it->children = malloc(sizeof *it->children)))
            return -1;
        it->children[0] = join;
        it->n_children = 1;
    }
    *from = join;
    return 0;
}

int st_agent_sessions(const st_session_params *p, st_workload *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    sess_ranges R;
    if (sessions_check(p, &R, err, errlen))
        return -1;
    st_rng rng;
    st_rng_seed(&rng, p->seed ^ 0x6167656e74736b73ULL);
    uint32_t T = p->sessions, *rounds, *width;
    uint64_t total;
    if (sessions_shape(p, &rng, &rounds, &width, &total, err, errlen))
        return -1;
    st_work_item *items = calloc((size_t)total, sizeof *items);
    uint32_t *prefix = malloc((size_t)(p->prefix_len ? p->prefix_len : 1) * sizeof *prefix);
    int rc = items && prefix ? 0 : -1;
    out->items = items;
    out->n = items ? (uint32_t)total : 0;
    out->n_dependent = (uint32_t)total - T;
    out->n_tasks = T;
    if (prefix)
        rng_ids(&rng, prefix, p->prefix_len);
    sess_gen G = { .p = p, .R = &R, .rng = &rng, .items = items, .prefix = prefix, .dep = T };
    uint64_t wk = 0;
    for (uint32_t t = 0; t < T && rc == 0; t++) {
        rc = sessions_root(&G, t);
        uint32_t from = t; /* the planner's request the next round fans out from */
        for (uint32_t r = 0; r < rounds[t] && rc == 0; r++)
            rc = sessions_round(&G, t, r, width[wk++], &from);
    }
    free(rounds);
    free(width);
    free(prefix);
    if (rc) {
        st_workload_free(out);
        st_errf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

/* ---- repeated passes (the audit's runs) ------------------------------------------------------- */

/* Tasks to take from each pass: whole passes, then the first tasks of the last one, until at
 * least min_items nodes. *passes and *last_tasks (tasks of the last pass). */
static int agent_passes(const st_agent_graph *g, uint32_t min_items, uint32_t *passes, uint32_t *last_tasks)
{
    *passes = 1;
    *last_tasks = g->n_tasks;
    if (!g->n_tasks || !g->n)
        return -1;
    uint64_t total = 0, want = min_items ? min_items : g->n;
    for (uint32_t p = 0;; p++)
        for (uint32_t t = 0; t < g->n_tasks; t++) {
            total += g->tasks[t].n_nodes;
            if (total >= want) {
                *passes = p + 1;
                *last_tasks = t + 1;
                return total > ST_WORKLOAD_MAX_REQUESTS ? -1 : 0;
            }
        }
}

/* One pass's items moved into out (tasks [0, ntask) of it; the rest freed): roots from *ri,
 * dependent nodes from *di, sessions after sess0, arrivals shifted by shift when timed. */
static void agent_pass_merge(st_workload *pw, uint32_t ntask, uint32_t sess0, st_ns shift, st_workload *out,
                             uint32_t *ri, uint32_t *di, uint32_t *map)
{
    uint32_t ns = pw->n - pw->n_dependent;
    for (uint32_t i = 0; i < pw->n; i++) {
        int keep = pw->items[i].session - 1 < ntask;
        map[i] = !keep ? UINT32_MAX : i < ns ? (*ri)++ : (*di)++;
    }
    for (uint32_t i = 0; i < pw->n; i++) {
        st_work_item *it = &pw->items[i];
        if (map[i] == UINT32_MAX) {
            st_work_item_free(it);
            continue;
        }
        for (uint32_t j = 0; j < it->n_children; j++)
            it->children[j] = map[it->children[j]];
        it->id = map[i];
        it->session += sess0;
        if (i < ns && it->arrival >= 0)
            it->arrival += shift;
        out->items[map[i]] = *it;
    }
    free(pw->items);
    memset(pw, 0, sizeof *pw);
}

int st_agent_workload_n(const st_agent_graph *g, uint64_t salt, uint32_t min_items, st_workload *out, char *err,
                        size_t errlen)
{
    memset(out, 0, sizeof *out);
    uint32_t passes, last;
    if (agent_passes(g, min_items, &passes, &last)) {
        snprintf(err, errlen, g->n ? "more than %u requests" : "no tasks", ST_WORKLOAD_MAX_REQUESTS);
        return -1;
    }
    uint32_t roots = (passes - 1) * g->n_tasks + last, n = 0;
    for (uint32_t p = 0; p < passes; p++)
        for (uint32_t t = 0; t < (p + 1 < passes ? g->n_tasks : last); t++)
            n += g->tasks[t].n_nodes;
    /* a pass's length: the starts' span plus one mean gap between starts (a second without span) */
    double lo = INFINITY, hi = -INFINITY;
    for (uint32_t t = 0; t < g->n_tasks; t++)
        if (g->tasks[t].start_s >= 0) {
            lo = fmin(lo, g->tasks[t].start_s);
            hi = fmax(hi, g->tasks[t].start_s);
        }
    double span = g->n_tasks > 1 && hi > lo ? (hi - lo) * g->n_tasks / (g->n_tasks - 1) : 1.0;
    out->items = calloc(n, sizeof *out->items);
    uint32_t *map = malloc((size_t)g->n * sizeof *map);
    if (!out->items || !map) {
        free(map);
        free(out->items);
        out->items = NULL;
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    uint32_t ri = 0, di = roots;
    for (uint32_t p = 0; p < passes; p++) {
        st_workload pw;
        if (st_agent_workload(g, p ? salt ^ st_splitmix64_of(0xa6e4700000000000ULL + p) : salt, &pw, err, errlen)) {
            out->n = ri; /* (only the roots so far are whole: the dependents' slots follow them) */
            for (uint32_t i = roots; i < di; i++)
                st_work_item_free(&out->items[i]);
            free(map);
            st_workload_free(out);
            return -1;
        }
        agent_pass_merge(&pw, p + 1 < passes ? g->n_tasks : last, p * g->n_tasks, (st_ns)llround(span * p * 1e9), out,
                         &ri, &di, map);
    }
    free(map);
    out->n = n;
    out->n_dependent = n - roots;
    out->n_tasks = roots;
    return 0;
}
