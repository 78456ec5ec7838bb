/* Agent task graphs at run time (load/agent_run.h). */
#include "load/agent_run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "load/output.h"

/* A node's prompt text with its parents' answers. */
#define AGENT_PROMPT_TEXT_MAX ((size_t)64 << 20)
#define WAITING_DONE UINT32_MAX /* a node skipped or released: nothing more counts it down */

static uint32_t words(const char *s, size_t n)
{
    uint32_t w = 0;
    int in = 0;
    for (size_t k = 0; k < n; k++) {
        int sp = s[k] == ' ' || s[k] == '\n' || s[k] == '\t' || s[k] == '\r';
        if (!sp && !in)
            w++;
        in = !sp;
    }
    return w;
}

/* Appends the answer to node j's prompt text (its own text first, the first time). 0 or -1. */
static int grow_prompt(st_work_item *nx, const char *answer, size_t answer_len)
{
    st_buf t;
    st_buf_init(&t, AGENT_PROMPT_TEXT_MAX);
    int rc = st_workload_text(nx, &t);
    if (rc == 0 && answer_len)
        rc = st_buf_append(&t, " ", 1) < 0 || st_buf_append(&t, answer, answer_len) < 0 ? -1 : 0;
    char *s = rc == 0 ? strndup(t.data ? t.data : "", t.len) : NULL;
    st_buf_free(&t);
    if (!s)
        return -1;
    free(nx->input_text);
    nx->input_text = s;
    free(nx->input_ids); /* the text holds them now (an agent node is sent as text) */
    nx->input_ids = NULL;
    nx->input_len = words(s, strlen(s));
    return 0;
}

void st_agent_on_end(void *arg, st_runner_ctl *r, uint32_t i, const st_record *rec, const char *answer,
                     size_t answer_len)
{
    st_workload *w = arg;
    if (!w || i >= w->n)
        return;
    st_work_item *it = &w->items[i];
    for (uint32_t c = 0; c < it->n_children; c++) {
        uint32_t j = it->children[c];
        if (j >= w->n || j == i)
            continue;
        st_work_item *nx = &w->items[j];
        if (nx->waiting == WAITING_DONE || nx->waiting == 0)
            continue;
        const char *why = NULL;
        if (rec->status != ST_REQ_OK)
            why = rec->status == ST_REQ_SKIPPED ? "not sent: a request it waits for in its task was skipped"
                                                : "not sent: a request it waits for in its task failed";
        else if (nx->grow && !answer)
            why = "not sent: a request it waits for answered more than the 4 MiB servetune keeps";
        else if (nx->grow && grow_prompt(nx, answer, answer_len) < 0)
            why = "not sent: out of memory for its prompt";
        if (why) {
            nx->waiting = WAITING_DONE;
            st_runner_skip(r, j, why); /* and, through this hook, the nodes that wait for it */
            continue;
        }
        if (--nx->waiting == 0) {
            nx->waiting = WAITING_DONE;
            st_runner_release(r, j, nx->think);
        }
    }
}

/* ---- figures ---------------------------------------------------------------------------------- */

int st_agent_run_stats_compute(const st_workload *w, const st_record *recs, uint32_t n, double slo_makespan_s,
                               st_agent_run_stats *s)
{
    memset(s, 0, sizeof *s);
    s->slo_makespan_s = slo_makespan_s > 0 ? slo_makespan_s : 0;
    s->tasks_per_s = NAN;
    if (n > w->n)
        n = w->n;
    uint32_t T = w->n_tasks;
    double *mk = malloc((size_t)(T ? T : 1) * sizeof *mk), *cp = malloc((size_t)(T ? T : 1) * sizeof *cp);
    double *tt = malloc((size_t)(n ? n : 1) * sizeof *tt), *dt = malloc((size_t)(n ? n : 1) * sizeof *dt);
    /* per task: its first node, its last-ending node, whether every node completed, whether measured */
    uint32_t *root = malloc((size_t)(T ? T : 1) * sizeof *root), *last = malloc((size_t)(T ? T : 1) * sizeof *last);
    uint8_t *bad = calloc(T ? T : 1, 1), *seen = calloc(T ? T : 1, 1);
    uint32_t *lastpar = malloc((size_t)(n ? n : 1) * sizeof *lastpar); /* the parent that ended last */
    int rc = -1;
    if (!mk || !cp || !tt || !dt || !root || !last || !bad || !seen || !lastpar)
        goto out;
    for (uint32_t t = 0; t < T; t++)
        root[t] = last[t] = UINT32_MAX;
    for (uint32_t i = 0; i < n; i++)
        lastpar[i] = UINT32_MAX;
    /* the parent of each node that ended last (the one that released it) */
    for (uint32_t i = 0; i < n; i++) {
        const st_work_item *it = &w->items[i];
        for (uint32_t c = 0; c < it->n_children; c++) {
            uint32_t j = it->children[c];
            if (j >= n || recs[i].end < 0)
                continue;
            if (lastpar[j] == UINT32_MAX || recs[i].end > recs[lastpar[j]].end)
                lastpar[j] = i;
        }
    }
    st_ns t_first = -1, t_last = -1;
    uint32_t nt = 0;
    for (uint32_t i = 0; i < n; i++) {
        const st_work_item *it = &w->items[i];
        const st_record *x = &recs[i];
        if (!it->session || it->session > T || x->warmup)
            continue;
        uint32_t t = it->session - 1;
        seen[t] = 1;
        s->nodes++;
        if (!it->n_parents)
            root[t] = i;
        if (x->status != ST_REQ_OK || x->end < 0) {
            bad[t] = 1;
        } else {
            s->nodes_ok++;
            tt[nt++] = st_record_ttft(x);
            if (last[t] == UINT32_MAX || x->end > recs[last[t]].end)
                last[t] = i;
            if (t_last < 0 || x->end > t_last)
                t_last = x->end;
        }
        uint32_t d = it->turn < ST_AGENT_DEPTH_ROWS - 1 ? it->turn : ST_AGENT_DEPTH_ROWS - 1;
        s->depth[d].requests++;
        if (x->status == ST_REQ_OK && x->end >= 0)
            s->depth[d].completed++;
    }
    st_dist_compute(tt, nt, &s->node_ttft);
    for (uint32_t d = 0; d < ST_AGENT_DEPTH_ROWS; d++) {
        st_agent_depth_row *row = &s->depth[d];
        row->depth = d;
        uint32_t k = 0;
        for (uint32_t i = 0; i < n; i++) {
            const st_work_item *it = &w->items[i];
            const st_record *x = &recs[i];
            uint32_t dd = it->turn < ST_AGENT_DEPTH_ROWS - 1 ? it->turn : ST_AGENT_DEPTH_ROWS - 1;
            if (!it->session || x->warmup || dd != d || x->status != ST_REQ_OK || x->end < 0)
                continue;
            dt[k++] = st_record_ttft(x);
        }
        st_dist_compute(dt, k, &row->ttft);
        if (row->requests)
            s->n_depth_rows = d + 1;
    }
    uint32_t nm = 0;
    for (uint32_t t = 0; t < T; t++) {
        if (!seen[t])
            continue;
        s->tasks++;
        if (root[t] != UINT32_MAX && recs[root[t]].scheduled >= 0 && (t_first < 0 || recs[root[t]].scheduled < t_first))
            t_first = recs[root[t]].scheduled;
        if (bad[t] || root[t] == UINT32_MAX || last[t] == UINT32_MAX)
            continue;
        s->completed++;
        mk[nm] = (double)(recs[last[t]].end - recs[root[t]].scheduled) / 1e9;
        if (s->slo_makespan_s > 0 && mk[nm] <= s->slo_makespan_s)
            s->slo_met++;
        double sum = 0;
        uint32_t hops = 0;
        for (uint32_t j = last[t]; j != UINT32_MAX && hops <= n; j = lastpar[j], hops++)
            sum += st_record_ttft(&recs[j]);
        if (hops > s->cp_nodes_max)
            s->cp_nodes_max = hops;
        cp[nm] = sum;
        nm++;
    }
    st_dist_compute(mk, nm, &s->makespan);
    st_dist_compute(cp, nm, &s->cp_ttft);
    if (t_first >= 0 && t_last > t_first) {
        s->span_s = (double)(t_last - t_first) / 1e9;
        s->tasks_per_s = s->completed / s->span_s;
    }
    rc = 0;
out:
    free(mk);
    free(cp);
    free(tt);
    free(dt);
    free(root);
    free(last);
    free(bad);
    free(seen);
    free(lastpar);
    return rc;
}

json_t *st_agent_run_stats_json(const st_agent_run_stats *s)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "tasks", json_integer(s->tasks));
    json_object_set_new(o, "completed", json_integer(s->completed));
    json_object_set_new(o, "nodes", json_integer(s->nodes));
    json_object_set_new(o, "nodes_completed", json_integer(s->nodes_ok));
    json_object_set_new(o, "makespan_ms", st_output_dist_json(&s->makespan, 1e3));
    json_object_set_new(o, "critical_path_ttft_ms", st_output_dist_json(&s->cp_ttft, 1e3));
    json_object_set_new(o, "critical_path_nodes_max", json_integer(s->cp_nodes_max));
    json_object_set_new(o, "node_ttft_ms", st_output_dist_json(&s->node_ttft, 1e3));
    json_object_set_new(o, "span_s", st_jnum_or_null(s->span_s > 0 ? s->span_s : NAN));
    json_object_set_new(o, "tasks_per_s", st_jnum_or_null(s->tasks_per_s));
    if (s->slo_makespan_s > 0) {
        json_object_set_new(o, "slo_makespan_ms", json_real(s->slo_makespan_s * 1e3));
        json_object_set_new(o, "slo_met", json_integer(s->slo_met));
        json_object_set_new(o, "good_tasks_per_s", st_jnum_or_null(s->span_s > 0 ? s->slo_met / s->span_s : NAN));
    }
    json_t *rows = json_array();
    for (uint32_t d = 0; rows && d < s->n_depth_rows; d++) {
        const st_agent_depth_row *r = &s->depth[d];
        json_t *x = json_object();
        if (!x)
            break;
        json_object_set_new(x, "depth", json_integer(r->depth));
        json_object_set_new(x, "and_deeper", json_boolean(d == ST_AGENT_DEPTH_ROWS - 1));
        json_object_set_new(x, "requests", json_integer(r->requests));
        json_object_set_new(x, "completed", json_integer(r->completed));
        json_object_set_new(x, "ttft_ms", st_output_dist_json(&r->ttft, 1e3));
        json_array_append_new(rows, x);
    }
    json_object_set_new(o, "by_depth", rows ? rows : json_null());
    return o;
}

int st_agent_makespans(const st_record *recs, uint32_t n, int closed, double k, double now_s, double w0, double w1,
                       int online, double lim_s, double *out)
{
    uint32_t ms = 0;
    for (uint32_t i = 0; i < n; i++)
        if (recs[i].session > ms)
            ms = recs[i].session;
    if (!ms)
        return 0;
    if (ms > (1u << 26))
        return -1;
    double *start = malloc(((size_t)ms + 1) * sizeof *start), *last = malloc(((size_t)ms + 1) * sizeof *last);
    uint8_t *state = calloc((size_t)ms + 1, 1); /* bit 0: a node failed; bit 1: a node not ended */
    int rc = -1;
    if (!start || !last || !state)
        goto out;
    for (uint32_t s = 0; s <= ms; s++)
        start[s] = last[s] = NAN;
    for (uint32_t i = 0; i < n; i++) {
        const st_record *r = &recs[i];
        if (!r->session || r->warmup)
            continue;
        st_ns t0 = closed ? r->sent : r->scheduled;
        double a = t0 >= 0 ? (double)t0 * k : NAN, e = r->end >= 0 ? (double)r->end * k : NAN;
        if (r->turn == 0 && a <= now_s)
            start[r->session] = a;
        if (e <= now_s && r->status != ST_REQ_OK)
            state[r->session] |= 1;
        else if (!(e <= now_s))
            state[r->session] |= 2;
        else if (isnan(last[r->session]) || e > last[r->session])
            last[r->session] = e;
    }
    uint32_t m = 0;
    for (uint32_t s = 1; s <= ms; s++) {
        double a = start[s];
        if (isnan(a) || a < w0 || a > w1 || (state[s] & 1))
            continue;
        if (!(state[s] & 2))
            out[m++] = last[s] - a;
        else if (online && now_s - a > lim_s)
            out[m++] = now_s - a; /* still running, already past the limit */
    }
    rc = (int)m;
out:
    free(start);
    free(last);
    free(state);
    return rc;
}
