#include "emu/pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu/engine.h"
#include "load/workload.h"

/* A request's last token, due at t from engine eng: the router counts it answered then. */
typedef struct done_ev {
    st_ns t;
    uint32_t eng;
} done_ev;

typedef struct pool {
    uint32_t k;
    st_vclock *vc;
    st_emu_engine **e;
    uint32_t *outstanding; /* per engine, as the router counts them */
    done_ev *heap;         /* min-heap by t of the answers not yet counted */
    uint32_t n_heap;
    st_emu_pool_out *out;
    const st_emu_sim_item *items;
    int skip; /* runs of decode steps at once (st_emu_skip_steps) */
    uint32_t *idbuf, idcap, vocab;
} pool;

static void heap_push(pool *P, st_ns t, uint32_t eng)
{
    uint32_t i = P->n_heap++;
    while (i > 0 && P->heap[(i - 1) / 2].t > t) {
        P->heap[i] = P->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    P->heap[i] = (done_ev){ t, eng };
}

static done_ev heap_pop(pool *P)
{
    done_ev top = P->heap[0], last = P->heap[--P->n_heap];
    uint32_t i = 0;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= P->n_heap)
            break;
        if (c + 1 < P->n_heap && P->heap[c + 1].t < P->heap[c].t)
            c++;
        if (P->heap[c].t >= last.t)
            break;
        P->heap[i] = P->heap[c];
        i = c;
    }
    if (P->n_heap)
        P->heap[i] = last;
    return top;
}

static void record_step(pool *P, uint32_t k, const st_emu_step_result *res)
{
    for (uint32_t j = 0; j < res->n_events; j++) {
        const st_emu_event *ev = &res->events[j];
        st_emu_pool_out *o = ev->user;
        if (o->first_token < 0)
            o->first_token = ev->due;
        o->tokens += ev->n_tokens;
        if (ev->finish != ST_EMU_NOT_FINISHED) {
            o->end = ev->due;
            heap_push(P, ev->due, k);
        }
    }
}

static void record_skip(pool *P, uint32_t k, const st_emu_skip_result *sk)
{
    for (uint32_t q = 0; q < sk->seqs; q++) {
        const st_emu_skip_seq *sq = &sk->seq[q];
        st_emu_pool_out *o = sq->user;
        if (sq->first && o->first_token < 0)
            o->first_token = sk->due[sq->from] + sq->due_off;
        o->tokens += sk->steps - sq->from;
        if (sq->finish != ST_EMU_NOT_FINISHED) { /* in the run's last step */
            o->end = sk->due[sk->steps - 1] + sq->due_off;
            heap_push(P, o->end, k);
        }
    }
}

/* Runs engine k's steps that start before t. 0, or -1 (out of memory, or a request that can
 * never fit: err set). */
static int advance(pool *P, uint32_t k, st_ns t, char *err, size_t errlen)
{
    st_emu_engine *e = P->e[k];
    st_vclock *vc = &P->vc[k];
    while (st_emu_has_work(e) && vc->t < t) {
        if (P->skip) {
            st_emu_skip_result sk;
            int kr = st_emu_skip_steps(e, t, &sk);
            if (kr < 0)
                goto nomem;
            if (kr == 0) {
                record_skip(P, k, &sk);
                vc->t = sk.start[sk.steps];
                continue;
            }
        }
        st_emu_step_result res;
        int sr = st_emu_step(e, &res);
        if (sr == -2) {
            snprintf(err, errlen, "internal error: a request needs more KV blocks than the engine has");
            return -1;
        }
        if (sr < 0)
            goto nomem;
        if (sr == 0) {
            record_step(P, k, &res);
            vc->t = res.start + res.duration;
            continue;
        }
        /* nothing schedulable yet: the waiting head is still in the API server model */
        st_ns ready = st_emu_next_ready(e);
        if (ready < 0)
            break;
        vc->t = ready >= t ? t : (ready > vc->t ? ready : vc->t + 1);
    }
    return 0;
nomem:
    snprintf(err, errlen, "engine step failed (out of memory)");
    return -1;
}

static const uint32_t *item_ids(pool *P, uint32_t i)
{
    const st_emu_sim_item *it = &P->items[i];
    if (it->input_ids && !it->lazy && !(it->fresh_from > 0 && it->fresh_from < it->input_len))
        return it->input_ids;
    if (it->input_len > P->idcap) {
        uint32_t *nb = realloc(P->idbuf, (size_t)it->input_len * sizeof *nb);
        if (!nb)
            return NULL;
        P->idbuf = nb;
        P->idcap = it->input_len;
    }
    /* the ids st_emu_sim_run gives the same item: a request keeps its prompt from pool to pool */
    uint32_t from = it->input_ids || it->lazy ? it->fresh_from : 0;
    if (it->lazy) { /* its whole prompt drawn (load/workload.h), then its own ids from fresh_from */
        st_work_item_ids(it->lazy, P->idbuf);
        if (!(from > 0 && from < it->input_len))
            return P->idbuf;
    } else if (from) /* the engine copies the ids when the request is added: one buffer serves */
        memcpy(P->idbuf, it->input_ids, (size_t)from * sizeof *P->idbuf);
    st_emu_output_tokens(0x5eed0000ULL + i, from, it->input_len - from, P->vocab, P->idbuf + from);
    return P->idbuf;
}

/* Item i arrives at t: routed to the engine with the fewest outstanding. 0, or -1 with err. */
static int route(pool *P, uint32_t i, st_ns t, char *err, size_t errlen)
{
    for (uint32_t k = 0; k < P->k; k++)
        if (advance(P, k, t, err, errlen))
            return -1;
    while (P->n_heap && P->heap[0].t <= t)
        P->outstanding[heap_pop(P).eng]--;
    uint32_t best = 0;
    for (uint32_t k = 1; k < P->k; k++)
        if (P->outstanding[k] < P->outstanding[best])
            best = k;
    if (P->vc[best].t < t) /* an idle engine waited until now */
        P->vc[best].t = t;
    const st_emu_sim_item *it = &P->items[i];
    st_emu_pool_out *o = &P->out[i];
    o->engine = best;
    const uint32_t *ids = item_ids(P, i);
    if (!ids && it->input_len) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    st_emu_req_params p = { .id = (uint64_t)i + 1,
                            .ids = ids,
                            .n_ids = it->input_len,
                            .max_tokens = it->output_len,
                            .ignore_eos = 1,
                            .chat = it->chat,
                            .kv_external = it->kv_external,
                            .arrival = t,
                            .user = o };
    char why[512];
    int a = st_emu_add_request(P->e[best], &p, why, sizeof why);
    if (a == ST_EMU_ADD_NOMEM) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (a != ST_EMU_ADD_OK) {
        o->rejected = 1;
        o->end = t;
        return 0;
    }
    P->outstanding[best]++;
    return 0;
}

static int cmp_arrival(const void *a, const void *b, void *arg)
{
    const st_emu_sim_item *it = arg;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    st_ns tx = it[x].arrival < 0 ? 0 : it[x].arrival, ty = it[y].arrival < 0 ? 0 : it[y].arrival;
    if (tx != ty)
        return tx < ty ? -1 : 1;
    return x < y ? -1 : x > y;
}

static void pool_free(pool *P)
{
    for (uint32_t k = 0; P->e && k < P->k; k++)
        st_emu_engine_free(P->e[k]);
    free(P->e);
    free(P->vc);
    free(P->outstanding);
    free(P->heap);
    free(P->idbuf);
}

int st_emu_pool_run(const st_emu_config *cfg, uint32_t engines, const st_emu_sim_item *items, uint32_t n,
                    st_emu_pool_out *out, char *err, size_t errlen)
{
    if (engines < 1) {
        snprintf(err, errlen, "a pool takes one engine at least");
        return -1;
    }
    for (uint32_t i = 0; i < n; i++)
        if (items[i].dependent || items[i].n_parents || items[i].n_children) {
            snprintf(err, errlen, "a pool runs independent requests (no sessions, no task graphs)");
            return -1;
        }
    pool P = { .k = engines, .out = out, .items = items, .vocab = cfg->model.vocab };
    P.skip = !cfg->step_by_step;
    P.vc = calloc(engines, sizeof *P.vc);
    P.e = calloc(engines, sizeof *P.e);
    P.outstanding = calloc(engines, sizeof *P.outstanding);
    P.heap = malloc(((size_t)n + 1) * sizeof *P.heap);
    uint32_t *order = malloc(((size_t)n + 1) * sizeof *order);
    int rc = -1;
    if (!P.vc || !P.e || !P.outstanding || !P.heap || !order) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    for (uint32_t k = 0; k < engines; k++)
        if (st_emu_engine_new(cfg, st_clock_virtual(&P.vc[k]), &P.e[k], NULL, err, errlen) < 0)
            goto out;
    for (uint32_t i = 0; i < n; i++) {
        out[i] = (st_emu_pool_out){ .first_token = -1, .end = -1 };
        order[i] = i;
    }
    qsort_r(order, n, sizeof *order, cmp_arrival, (void *)items);
    for (uint32_t j = 0; j < n; j++)
        if (route(&P, order[j], items[order[j]].arrival < 0 ? 0 : items[order[j]].arrival, err, errlen))
            goto out;
    for (uint32_t k = 0; k < engines; k++)
        if (advance(&P, k, INT64_MAX, err, errlen))
            goto out;
    rc = 0;
out:
    free(order);
    pool_free(&P);
    return rc;
}
