#include "emu/sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu/engine.h"

typedef struct { st_ns t; uint32_t i; } arr_ev;

static int cmp_arr(const void *a, const void *b)
{
    const arr_ev *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

int st_emu_sim_run(const st_emu_config *cfg, const st_emu_sim_item *items, uint32_t n,
                   st_record *records, st_emu_sim_stats *stats, char *err, size_t errlen)
{
    return st_emu_sim_run_limited(cfg, items, n, 0, records, stats, err, errlen);
}

int st_emu_sim_run_limited(const st_emu_config *cfg, const st_emu_sim_item *items, uint32_t n,
                           uint32_t max_concurrency, st_record *records, st_emu_sim_stats *stats,
                           char *err, size_t errlen)
{
    uint32_t in_flight = 0;
    st_ns full_until = -1; /* last time a slot freed while every slot was taken */
    st_emu_sim_stats s = { 0 };
    for (uint32_t i = 0; i < n; i++)
        st_record_init(&records[i], i);
    st_vclock vc = { 0 };
    st_emu_engine *e;
    if (st_emu_engine_new(cfg, st_clock_virtual(&vc), &e, NULL, err, errlen) < 0)
        return -1;
    arr_ev *order = malloc((n ? n : 1) * sizeof *order);
    uint32_t *idbuf = NULL;
    uint32_t idcap = 0;
    if (!order) {
        st_emu_engine_free(e);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (uint32_t i = 0; i < n; i++)
        order[i] = (arr_ev){ items[i].arrival < 0 ? 0 : items[i].arrival, i };
    qsort(order, n, sizeof *order, cmp_arr);
    uint32_t vocab = cfg->model.vocab;
    uint32_t next = 0;
    int rc = 0;
    for (;;) {
        /* admit every arrival up to now */
        while (next < n && order[next].t <= vc.t && (!max_concurrency || in_flight < max_concurrency)) {
            uint32_t i = order[next++].i;
            const st_emu_sim_item *it = &items[i];
            st_record *r = &records[i];
            r->scheduled = order[next - 1].t;
            r->sent = (max_concurrency && r->scheduled <= full_until) ? full_until : r->scheduled;
            in_flight++;
            r->input_tokens = it->input_len;
            r->output_requested = it->output_len;
            const uint32_t *ids = it->input_ids;
            if (!ids) {
                if (it->input_len > idcap) {
                    uint32_t *nb = realloc(idbuf, (size_t)it->input_len * sizeof *nb);
                    if (!nb) {
                        snprintf(err, errlen, "out of memory");
                        rc = -1;
                        goto out;
                    }
                    idbuf = nb;
                    idcap = it->input_len;
                }
                for (uint32_t k = 0; k < it->input_len; k++)
                    idbuf[k] = st_emu_output_token(0x5eed0000ULL + i, k, vocab);
                ids = idbuf;
            }
            st_emu_req_params p = { .id = i, .ids = ids, .n_ids = it->input_len,
                                    .max_tokens = it->output_len, .ignore_eos = 1,
                                    .arrival = r->sent, .user = r };
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
                    full_until = vc.t;
            }
        }
        if (!st_emu_has_work(e)) {
            if (next >= n)
                break;
            if (order[next].t > vc.t)
                vc.t = order[next].t;
            continue;
        }
        st_emu_step_result res;
        int sr = st_emu_step(e, &res);
        if (sr < 0) {
            snprintf(err, errlen, "engine step failed (out of memory)");
            rc = -1;
            goto out;
        }
        st_ns end = res.start + res.duration;
        s.busy_s += res.duration / 1e9;
        for (uint32_t k = 0; k < res.n_events; k++) {
            const st_emu_event *ev = &res.events[k];
            st_record *r = ev->user;
            if (ev->first) {
                r->first_token = r->first_byte = end;
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
        vc.t = end;
    }
    s.duration = vc.t;
    st_emu_stats es;
    st_emu_get_stats(e, &es);
    s.steps = es.steps;
    s.preemptions = es.preemptions;
    s.prefix_queries = es.prefix_queries;
    s.prefix_hits = es.prefix_hits;
    s.generated_tokens = es.generation_tokens;
    s.prompt_tokens = es.prompt_tokens;
out:
    free(order);
    free(idbuf);
    st_emu_engine_free(e);
    if (stats)
        *stats = s;
    return rc;
}
