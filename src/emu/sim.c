#include "emu/sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu/engine.h"
#include "load/workload.h"

typedef struct {
    st_ns t;
    uint32_t i;
} arr_ev;

static int cmp_arr(const void *a, const void *b)
{
    const arr_ev *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

struct st_emu_session {
    st_vclock vc;
    st_emu_engine *e;
    uint32_t *idbuf;
    uint32_t idcap;
    uint64_t id_base;
    arr_ev *order;
    uint32_t order_cap;
};

int st_emu_session_new(const st_emu_config *cfg, st_emu_session **out, st_emu_memory *mem_out, char *err, size_t errlen)
{
    *out = NULL;
    st_emu_session *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (st_emu_engine_new(cfg, st_clock_virtual(&s->vc), &s->e, mem_out, err, errlen) < 0) {
        free(s);
        return -1;
    }
    *out = s;
    return 0;
}

void st_emu_session_free(st_emu_session *s)
{
    if (!s)
        return;
    st_emu_engine_free(s->e);
    free(s->idbuf);
    free(s->order);
    free(s);
}

void st_emu_session_stats(const st_emu_session *s, st_emu_stats *out) { st_emu_get_stats(s->e, out); }

static const char STOPPED_RUNNING[] = "the run was stopped before this request completed";
static const char STOPPED_UNSENT[] = "the run was stopped before this request was sent";
static const char TIMED_OUT[] = "no completion within the request timeout";

int st_emu_session_run(st_emu_session *S, const st_emu_sim_item *items, uint32_t n, const st_emu_run_opts *o,
                       st_record *records, st_emu_sim_stats *stats, int *stopped, char *err, size_t errlen)
{
    static const st_emu_run_opts none = { 0 };
    if (!o)
        o = &none;
    uint32_t max_concurrency = o->max_concurrency;
    uint32_t in_flight = 0;
    st_ns full_until = -1; /* last time a slot freed while every slot was taken (run time) */
    st_emu_sim_stats s = { 0 };
    st_emu_engine *e = S->e;
    st_vclock *vc = &S->vc;
    const st_ns t0 = vc->t;
    const uint64_t base = S->id_base;
    S->id_base += (uint64_t)n + 1;
    if (stopped)
        *stopped = 0;
    for (uint32_t i = 0; i < n; i++) {
        st_record_init(&records[i], i);
        records[i].warmup = i < o->warmup;
    }
    if (n > S->order_cap) {
        arr_ev *no = realloc(S->order, (size_t)n * sizeof *no);
        if (!no) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        S->order = no;
        S->order_cap = n;
    }
    arr_ev *order = S->order;
    for (uint32_t i = 0; i < n; i++) {
        order[i] = (arr_ev){ items[i].arrival < 0 ? 0 : items[i].arrival, i };
        records[i].scheduled = order[i].t;
        records[i].input_tokens = items[i].input_len;
        records[i].output_requested = items[i].output_len;
    }
    qsort(order, n, sizeof *order, cmp_arr);
    st_emu_stats es0;
    st_emu_get_stats(e, &es0);
    uint32_t vocab = st_emu_engine_config(e)->model.vocab;
    uint32_t next = 0;
    st_ns next_tick = o->tick > 0 ? o->tick : INT64_MAX; /* run time */
    int rc = 0, stop = 0;
    for (;;) {
        st_ns now = vc->t - t0;
        /* admit every arrival up to now */
        while (next < n && order[next].t <= now && (!max_concurrency || in_flight < max_concurrency)) {
            uint32_t i = order[next++].i;
            const st_emu_sim_item *it = &items[i];
            st_record *r = &records[i];
            r->sent = (max_concurrency && r->scheduled <= full_until) ? full_until : r->scheduled;
            in_flight++;
            const uint32_t *ids = it->input_ids;
            if (!ids) {
                if (it->input_len > S->idcap) {
                    uint32_t *nb = realloc(S->idbuf, (size_t)it->input_len * sizeof *nb);
                    if (!nb) {
                        snprintf(err, errlen, "out of memory");
                        rc = -1;
                        goto out;
                    }
                    S->idbuf = nb;
                    S->idcap = it->input_len;
                }
                for (uint32_t k = 0; k < it->input_len; k++)
                    S->idbuf[k] = st_emu_output_token(0x5eed0000ULL + i, k, vocab);
                ids = S->idbuf;
            }
            st_emu_req_params p = { .id = base + i,
                                    .ids = ids,
                                    .n_ids = it->input_len,
                                    .max_tokens = it->output_len,
                                    .ignore_eos = 1,
                                    .arrival = t0 + r->sent,
                                    .user = r };
            char why[512];
            int a = st_emu_add_request(e, &p, why, sizeof why);
            if (a == ST_EMU_ADD_NOMEM) {
                snprintf(err, errlen, "out of memory");
                rc = -1;
                goto out;
            }
            if (a != ST_EMU_ADD_OK) {
                r->http_status = 400;
                r->first_byte = r->end = r->scheduled;
                st_record_set_error(r, ST_REQ_HTTP_STATUS, why, strlen(why));
                s.rejected++;
                if (max_concurrency && in_flight-- == max_concurrency)
                    full_until = now;
            }
        }
        /* ticks due by now (the records reflect the engine at vc->t, at most one step later) */
        while (next_tick <= now && !stop) {
            if (o->timeout > 0)
                for (uint32_t i = 0; i < n; i++) {
                    st_record *r = &records[i];
                    if (r->sent >= 0 && r->end < 0 && r->status == ST_REQ_OK && next_tick - r->sent > o->timeout) {
                        st_emu_abort(e, base + i);
                        r->end = next_tick;
                        st_record_set_error(r, ST_REQ_TIMEOUT, TIMED_OUT, sizeof TIMED_OUT - 1);
                        if (max_concurrency && in_flight-- == max_concurrency)
                            full_until = next_tick;
                    }
                }
            if (o->on_tick) {
                st_emu_stats es;
                st_emu_get_stats(e, &es);
                stop = o->on_tick(o->arg, next_tick, &es, records, n) != 0;
            }
            next_tick += o->tick;
        }
        if (stop) {
            for (uint32_t i = 0; i < n; i++) {
                st_record *r = &records[i];
                if (r->end >= 0 || r->status != ST_REQ_OK)
                    continue;
                if (r->sent >= 0) {
                    st_emu_abort(e, base + i);
                    r->end = now;
                    st_record_set_error(r, ST_REQ_ABORTED, STOPPED_RUNNING, sizeof STOPPED_RUNNING - 1);
                } else {
                    st_record_set_error(r, ST_REQ_ABORTED, STOPPED_UNSENT, sizeof STOPPED_UNSENT - 1);
                }
            }
            if (stopped)
                *stopped = 1;
            break;
        }
        if (!st_emu_has_work(e)) {
            if (next >= n)
                break;
            st_ns target = order[next].t;
            if (target > now) {
                /* idle until the next arrival; ticks in between still happen */
                if (next_tick < target)
                    target = next_tick;
                vc->t = t0 + target;
            } else if (max_concurrency && in_flight >= max_concurrency) {
                snprintf(err, errlen, "internal error: no work but every slot taken");
                rc = -1;
                goto out;
            }
            continue;
        }
        st_emu_step_result res;
        int sr = st_emu_step(e, &res);
        if (sr < 0) {
            snprintf(err, errlen, "engine step failed (out of memory)");
            rc = -1;
            goto out;
        }
        st_ns end_abs = res.start + res.duration, end = end_abs - t0;
        s.busy_s += res.duration / 1e9;
        for (uint32_t k = 0; k < res.n_events; k++) {
            const st_emu_event *ev = &res.events[k];
            st_record *r = ev->user;
            if (ev->first) {
                r->first_token = r->first_byte = end;
                r->first_answer = end; /* the model has no reasoning: the first token is the answer's */
                r->http_status = 200;
                r->cached_tokens = ev->cached_tokens;
            }
            if (st_record_add_event(r, end) < 0) {
                snprintf(err, errlen, "out of memory");
                rc = -1;
                goto out;
            }
            r->output_tokens = ev->n_out;
            if (ev->finish) {
                r->end = end;
                r->usage_reported = 1;
                r->status = ST_REQ_OK;
                s.completed++;
                if (max_concurrency && in_flight-- == max_concurrency)
                    full_until = end;
            }
        }
        st_emu_stats es;
        st_emu_get_stats(e, &es);
        if (es.running > s.max_running)
            s.max_running = es.running;
        if (es.waiting > s.max_waiting)
            s.max_waiting = es.waiting;
        if (es.kv_usage > s.max_kv_usage)
            s.max_kv_usage = es.kv_usage;
        vc->t = end_abs > vc->t ? end_abs : vc->t;
    }
    s.duration = vc->t - t0;
    st_emu_stats es;
    st_emu_get_stats(e, &es);
    s.steps = es.steps - es0.steps;
    s.preemptions = es.preemptions - es0.preemptions;
    s.prefix_queries = es.prefix_queries - es0.prefix_queries;
    s.prefix_hits = es.prefix_hits - es0.prefix_hits;
    s.generated_tokens = es.generation_tokens - es0.generation_tokens;
    s.prompt_tokens = es.prompt_tokens - es0.prompt_tokens;
out:
    if (stats)
        *stats = s;
    return rc;
}

int st_emu_sim_run(const st_emu_config *cfg, const st_emu_sim_item *items, uint32_t n, st_record *records,
                   st_emu_sim_stats *stats, char *err, size_t errlen)
{
    return st_emu_sim_run_limited(cfg, items, n, 0, records, stats, err, errlen);
}

int st_emu_sim_run_limited(const st_emu_config *cfg, const st_emu_sim_item *items, uint32_t n, uint32_t max_concurrency,
                           st_record *records, st_emu_sim_stats *stats, char *err, size_t errlen)
{
    for (uint32_t i = 0; i < n; i++)
        st_record_init(&records[i], i);
    if (stats)
        memset(stats, 0, sizeof *stats);
    st_emu_session *S;
    if (st_emu_session_new(cfg, &S, NULL, err, errlen) < 0)
        return -1;
    st_emu_run_opts o = { .max_concurrency = max_concurrency };
    int rc = st_emu_session_run(S, items, n, &o, records, stats, NULL, err, errlen);
    st_emu_session_free(S);
    return rc;
}

void st_emu_sim_items_from_workload(const struct st_workload *w, const st_ns *sched, st_emu_sim_item *items_out)
{
    for (uint32_t i = 0; i < w->n; i++) {
        const st_work_item *it = &w->items[i];
        st_ns a = sched ? sched[i] : it->arrival;
        items_out[i] = (st_emu_sim_item){ .arrival = a < 0 ? 0 : a,
                                          .input_ids = it->input_ids,
                                          .input_len = it->input_len,
                                          .output_len = it->output_len };
    }
}
