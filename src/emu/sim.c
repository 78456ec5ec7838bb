#include "emu/sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "emu/blocks.h"
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
    /* The run's shared-prefix hash chain (prefix_hashes): of pre_n blocks of the ids at pre_ids */
    const uint32_t *pre_ids;
    uint64_t *pre_hash;
    uint32_t pre_n, pre_cap;
    uint64_t id_base;
    arr_ev *order; /* send order of the current run */
    uint32_t order_cap;
    uint32_t *fifo; /* in-flight requests in send order (timeouts, stop) */
    uint32_t fifo_cap;
    st_ns *slots; /* with a cap on requests in flight: when each slot (is / will be) free, FIFO */
    uint32_t slots_cap;
    /* The shared step timeline (load/record.h: st_tok_chunk): each step's delivery base (a run of
     * steps': fitted into segments within ST_EMU_TOKEN_TOL_NS) written once, less tl_shift, into the
     * current chunk (this session holds one reference on
     * it; the records' segments hold theirs). A sequence's token of a step is due at the step's base
     * plus its own offset, its place on the API server's queue; when a sequence ahead of others
     * finishes, their places move up by its share, and tl_shift grows by that share so that their
     * offsets against the timeline stay the same: a sequence's record extends one reference run
     * after run. */
    st_tok_chunk *tl;
    st_ns tl_shift;
    st_tok_seg *segs; /* a run's delivery times fitted (run_skip), before they go to the timeline */
    size_t segs_cap;
    int one_run;   /* st_emu_session_one_run: the engine sees one run's requests, no others */
    uint32_t runs; /* runs started */
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
    free(s->pre_hash);
    st_tok_chunk_unref(s->tl);
    free(s->segs);
    free(s->order);
    free(s->fifo);
    free(s->slots);
    free(s);
}

void st_emu_session_stats(const st_emu_session *s, st_emu_stats *out) { st_emu_get_stats(s->e, out); }

void st_emu_session_one_run(st_emu_session *s) { s->one_run = 1; }

/* Segments of token events a record gets room for when its request is sent (more grow as they come). */
#define SIM_SEGS_RESERVE 4u
/* Segments in a timeline chunk (36 KiB): a new chunk starts when a run's do not fit in the current one. */
#define SIM_TL_CHUNK 1024u

static const char STOPPED_RUNNING[] = "the run was stopped before this request completed";
static const char STOPPED_UNSENT[] = "the run was stopped before this request was sent";
static const char TIMED_OUT[] = "no completion within the request timeout";

/* ---- one run: its state and the pieces of the loop ------------------------------------ */

typedef struct run {
    st_emu_session *S;
    st_emu_engine *e;
    const st_emu_sim_item *items;
    uint32_t n;
    const st_emu_run_opts *o;
    st_record *rec;
    st_emu_sim_stats s;
    st_emu_stats es0;
    st_ns t0;      /* the clock at the run's start (absolute) */
    uint64_t base; /* engine ids: base + item index */
    uint32_t vocab;
    int seeded;       /* items without ids go as seeded prompts (run_seeded) */
    uint32_t cap;     /* requests in flight at most: clients (closed loop) or max_concurrency; 0 none */
    int closed;       /* closed loop: each client sends its next item when its request ends */
    uint32_t next;    /* next position in the send order */
    uint32_t arrived; /* open loop: positions of the send order whose arrival has come */
    /* with a cap: the slot-free times in order (a ring of cap + n entries: cap at 0, then each
     * request's end as its client sees it); a request goes out at max(arrival, free slot) */
    uint32_t slot_head, slot_tail;
    uint32_t fifo_head, fifo_tail;
    st_ns next_tick; /* run time */
    st_ns last_due;  /* the latest token delivery so far (absolute; the run ends after it) */
    st_emu_run_progress p;
    char *err;
    size_t errlen;
    /* sessions: the items on the schedule (the others are dependent turns), the released turns
     * waiting for their send time (a min-heap by time), and each dependent turn's whole prompt */
    uint32_t n_sched;
    arr_ev *rel;
    uint32_t n_rel, released;
    uint32_t **prompt;
    uint32_t *prompt_len;
    uint64_t segs_done, events_done; /* segments and token events of the requests finished so far */
    uint32_t *step_items;            /* on_step: the item index of each sequence of the step */
    uint32_t cap_step_items;
    /* agent task graphs: the parents each node still waits for, and a stack to skip a failed
     * node's descendants */
    uint32_t *waiting, *dag_stack;
    /* runs of steps go on past completions and sends (st_emu_skip_steps_hooked): no token times and
     * no reasoning to record, so a request's record needs only its first and last token */
    int hooked;
    int hook_failed; /* a hook ran out of memory: the run stops with that error */
} run;

static const char SESSION_ENDED[] = "not sent: an earlier turn of its session did not complete";

static st_ns run_now(const run *R) { return R->S->vc.t - R->t0; }

/* The latest due time of a step's events (absolute), or -1. */
static st_ns ev_last_due(const st_emu_step_result *res)
{
    st_ns d = -1;
    for (uint32_t k = 0; k < res->n_events; k++)
        if (res->events[k].due > d)
            d = res->events[k].due;
    return d;
}

/* A request left the client's flight (finished, failed, rejected, timed out) at run time `at`:
 * with a cap, its slot is free again then. Completions are handled in time order, so the ring
 * stays sorted. */
static void slot_freed(run *R, st_ns at)
{
    R->p.in_flight--;
    if (R->cap)
        R->S->slots[R->slot_tail++] = at;
}

/* Only a dependent item's prompt carries generated tokens (a session's answer, a parent's output):
 * without one, generated blocks need no listing in the prefix cache (engine.h). The reference path
 * (step_by_step) lists every block. */
static void set_output_prompts(st_emu_session *S, const st_emu_sim_item *items, uint32_t n)
{
    int on = st_emu_engine_config(S->e)->step_by_step;
    for (uint32_t i = 0; i < n && !on; i++)
        on = items[i].dependent;
    st_emu_set_output_prompts(S->e, on);
}

/* Room for a run of n items in the session's send order, in-flight list and slot ring. 0 or -1. */
static int run_reserve(run *R, uint32_t n)
{
    st_emu_session *S = R->S;
    if (n > S->order_cap) {
        arr_ev *no = realloc(S->order, (size_t)n * sizeof *no);
        if (!no)
            return -1;
        S->order = no;
        S->order_cap = n;
    }
    if (n > S->fifo_cap) {
        uint32_t *nf = realloc(S->fifo, (size_t)n * sizeof *nf);
        if (!nf)
            return -1;
        S->fifo = nf;
        S->fifo_cap = n;
    }
    if (R->cap && (size_t)R->cap + n > S->slots_cap) {
        st_ns *ns = realloc(S->slots, ((size_t)R->cap + n) * sizeof *ns);
        if (!ns)
            return -1;
        S->slots = ns;
        S->slots_cap = R->cap + n;
    }
    return 0;
}

/* The records initialised (st_record_init), also when out of memory, and the run's send order. 0 or -1. */
static int run_prepare(run *R)
{
    st_emu_session *S = R->S;
    uint32_t n = R->n;
    set_output_prompts(S, R->items, n);
    if (run_reserve(R, n) < 0) {
        for (uint32_t i = 0; i < n; i++)
            st_record_init(&R->rec[i], i);
        return -1;
    }
    for (uint32_t k = 0; k < R->cap; k++)
        S->slots[R->slot_tail++] = 0;
    R->n_sched = 0;
    int sorted = 1; /* the send order as it comes (items by arrival, as a workload's are): no sort */
    for (uint32_t i = 0; i < n; i++) {
        const st_emu_sim_item *it = &R->items[i];
        st_record *r = &R->rec[i];
        st_record_init(r, i);
        r->warmup = i < R->o->warmup;
        r->input_tokens = it->input_len;
        r->output_requested = it->output_len;
        r->session = it->session;
        r->turn = it->turn;
        if (it->dependent) { /* released when the turn before it ends */
            r->scheduled = -1;
            continue;
        }
        /* closed loop: items go out in their order, whatever their arrival */
        arr_ev *o = &S->order[R->n_sched];
        *o = (arr_ev){ R->closed ? 0 : (it->arrival < 0 ? 0 : it->arrival), i };
        r->scheduled = R->closed ? -1 : o->t;
        sorted = sorted && (R->n_sched == 0 || cmp_arr(o - 1, o) < 0);
        R->n_sched++;
    }
    if (!R->closed && !sorted)
        qsort(S->order, R->n_sched, sizeof *S->order, cmp_arr);
    if (R->n_sched < n) {
        R->rel = malloc((size_t)(n - R->n_sched) * sizeof *R->rel);
        R->prompt = calloc(n, sizeof *R->prompt);
        R->prompt_len = calloc(n, sizeof *R->prompt_len);
        if (!R->rel || !R->prompt || !R->prompt_len)
            return -1;
        int dag = 0;
        for (uint32_t i = 0; i < n && !dag; i++)
            dag = R->items[i].n_parents || R->items[i].n_children;
        if (dag) {
            R->waiting = malloc((size_t)n * sizeof *R->waiting);
            R->dag_stack = malloc((size_t)n * sizeof *R->dag_stack);
            if (!R->waiting || !R->dag_stack)
                return -1;
            for (uint32_t i = 0; i < n; i++)
                R->waiting[i] = R->items[i].n_parents;
        }
    }
    R->p.total = n;
    return 0;
}

/* ---- sessions: a turn's end releases the next turn ------------------------------------- */

static void rel_push(run *R, st_ns t, uint32_t i)
{
    uint32_t k = R->n_rel++;
    R->rel[k] = (arr_ev){ t, i };
    while (k > 0) {
        uint32_t up = (k - 1) / 2;
        if (cmp_arr(&R->rel[up], &R->rel[k]) <= 0)
            break;
        arr_ev x = R->rel[up];
        R->rel[up] = R->rel[k];
        R->rel[k] = x;
        k = up;
    }
}

static arr_ev rel_pop(run *R)
{
    arr_ev top = R->rel[0];
    R->rel[0] = R->rel[--R->n_rel];
    for (uint32_t k = 0;;) {
        uint32_t a = 2 * k + 1, b = a + 1, m = k;
        if (a < R->n_rel && cmp_arr(&R->rel[a], &R->rel[m]) < 0)
            m = a;
        if (b < R->n_rel && cmp_arr(&R->rel[b], &R->rel[m]) < 0)
            m = b;
        if (m == k)
            break;
        arr_ev x = R->rel[m];
        R->rel[m] = R->rel[k];
        R->rel[k] = x;
        k = m;
    }
    return top;
}

/* The session of item i ends unfinished: its later turns are not sent. */
static void skip_later_turns(run *R, uint32_t i)
{
    for (uint32_t j = R->items[i].next; j && j < R->n && j != i; j = R->items[j].next) {
        st_record *r = &R->rec[j];
        if (r->status != ST_REQ_OK || r->sent >= 0)
            break; /* already over or sent */
        st_record_set_error(r, ST_REQ_SKIPPED, SESSION_ENDED, sizeof SESSION_ENDED - 1);
        R->p.failed++;
    }
}

static const uint32_t *item_ids(run *R, uint32_t i);

/* Item i completed at run time `at`: its session's next turn gets its prompt (this turn's
 * prompt, the answer the engine generated, the next turn's new tokens) and is released after its
 * think time. 0, or -1 out of memory. */
static int release_next(run *R, uint32_t i, st_ns at)
{
    uint32_t j = R->items[i].next;
    if (!R->prompt || !j || j >= R->n || j == i || !R->items[j].dependent)
        return 0;
    const st_emu_sim_item *nx = &R->items[j];
    uint32_t own = R->prompt[i] ? R->prompt_len[i] : R->items[i].input_len;
    uint32_t from = R->items[i].n_reason < R->rec[i].output_tokens ? R->items[i].n_reason : R->rec[i].output_tokens;
    uint32_t answer = R->rec[i].output_tokens - from;
    uint64_t len = (uint64_t)own + answer + nx->input_len;
    uint32_t *p = len <= UINT32_MAX ? malloc((size_t)len * sizeof *p) : NULL;
    if (!p)
        return -1;
    if (R->prompt[i]) {
        memcpy(p, R->prompt[i], (size_t)own * sizeof *p);
    } else {
        const uint32_t *ids = item_ids(R, i);
        if (!ids) {
            free(p);
            return -1;
        }
        memcpy(p, ids, (size_t)own * sizeof *p);
    }
    for (uint32_t k = 0; k < answer; k++)
        p[own + k] = st_emu_output_token(R->base + i, from + k, R->vocab);
    const uint32_t *mine = item_ids(R, j);
    if (!mine) {
        free(p);
        return -1;
    }
    memcpy(p + own + answer, mine, (size_t)nx->input_len * sizeof *p);
    free(R->prompt[i]);
    R->prompt[i] = NULL;
    R->prompt[j] = p;
    R->prompt_len[j] = (uint32_t)len;
    R->rec[j].input_tokens = (uint32_t)len;
    rel_push(R, at + (nx->think > 0 ? nx->think : 0), j);
    return 0;
}

/* ---- agent task graphs: a node's end counts down its children --------------------------- */

static const char TASK_NODE_ENDED[] = "not sent: a request it waits for in its task did not complete";

/* Item i ended unfinished: its descendants not sent yet are skipped. */
static void skip_children(run *R, uint32_t i)
{
    if (!R->dag_stack || !R->items[i].n_children)
        return;
    uint32_t top = 0;
    R->dag_stack[top++] = i;
    while (top) {
        const st_emu_sim_item *x = &R->items[R->dag_stack[--top]];
        for (uint32_t c = 0; c < x->n_children; c++) {
            uint32_t j = x->children[c];
            if (j >= R->n || !R->items[j].dependent)
                continue;
            st_record *r = &R->rec[j];
            if (r->status != ST_REQ_OK || r->sent >= 0)
                continue; /* already skipped (another parent) or over */
            st_record_set_error(r, ST_REQ_SKIPPED, TASK_NODE_ENDED, sizeof TASK_NODE_ENDED - 1);
            R->p.failed++;
            R->dag_stack[top++] = j;
        }
    }
}

/* Item i completed at run time `at`: each child gets its answer (when it grows by it) and, once
 * its last parent is in, is released after its gap. 0, or -1 out of memory. */
static int release_children(run *R, uint32_t i, st_ns at)
{
    const st_emu_sim_item *it = &R->items[i];
    if (!R->waiting || !it->n_children)
        return 0;
    uint32_t from = it->n_reason < R->rec[i].output_tokens ? it->n_reason : R->rec[i].output_tokens;
    uint32_t answer = R->rec[i].output_tokens - from;
    for (uint32_t c = 0; c < it->n_children; c++) {
        uint32_t j = it->children[c];
        if (j >= R->n || j == i || !R->items[j].dependent || !R->waiting[j])
            continue;
        const st_emu_sim_item *ch = &R->items[j];
        if (!R->prompt[j]) { /* its own prompt first */
            const uint32_t *own = item_ids(R, j);
            uint32_t *p = malloc((size_t)(ch->input_len ? ch->input_len : 1) * sizeof *p);
            if (!own || !p) {
                free(p);
                return -1;
            }
            memcpy(p, own, (size_t)ch->input_len * sizeof *p);
            R->prompt[j] = p;
            R->prompt_len[j] = ch->input_len;
        }
        if (ch->grow && answer) {
            uint64_t len = (uint64_t)R->prompt_len[j] + answer;
            uint32_t *p = len <= UINT32_MAX ? realloc(R->prompt[j], (size_t)len * sizeof *p) : NULL;
            if (!p)
                return -1;
            for (uint32_t k = 0; k < answer; k++)
                p[R->prompt_len[j] + k] = st_emu_output_token(R->base + i, from + k, R->vocab);
            R->prompt[j] = p;
            R->prompt_len[j] = (uint32_t)len;
        }
        R->rec[j].input_tokens = R->prompt_len[j];
        if (--R->waiting[j] == 0)
            rel_push(R, at + (ch->think > 0 ? ch->think : 0), j);
    }
    return 0;
}

static void run_free_sessions(run *R)
{
    free(R->waiting);
    free(R->dag_stack);
    for (uint32_t i = 0; R->prompt && i < R->n; i++)
        free(R->prompt[i]);
    free(R->prompt);
    free(R->prompt_len);
    free(R->rel);
}

/* Whether the run's items without ids can go to the engine as seeded prompts (engine.h,
 * st_emu_req_params.seeded: keyed in the prefix cache by seed instead of their ids' hashes, which are
 * then neither generated nor hashed). Item i's ids are st_emu_output_tokens(0x5eed0000 + i), so the
 * items' seeds differ; the engine's promise holds when no other request carries such ids: the
 * engine sees only this run (a later run of a session would reuse the seeds, maybe with ids), no
 * item has explicit ids (which could equal them) and none is dependent (a session's later turn or
 * an agent's child carries its parent's prompt). The step-by-step reference path hashes the ids, so
 * tests/unit/test_emu_skip.c compares the two keyings too. */
static int run_seeded(const run *R)
{
    if (!R->S->one_run || st_emu_engine_config(R->e)->step_by_step)
        return 0;
    for (uint32_t i = 0; i < R->n; i++)
        if (R->items[i].input_ids || R->items[i].lazy || R->items[i].dependent)
            return 0;
    return 1;
}

/* Prompt ids of item i: its own, or unique deterministic ids. */
static const uint32_t *item_ids(run *R, uint32_t i)
{
    const st_emu_sim_item *it = &R->items[i];
    if (it->input_ids && !it->lazy)
        return it->input_ids;
    st_emu_session *S = R->S;
    if (it->input_len > S->idcap) {
        uint32_t *nb = realloc(S->idbuf, (size_t)it->input_len * sizeof *nb);
        if (!nb)
            return NULL;
        S->idbuf = nb;
        S->idcap = it->input_len;
    }
    if (it->lazy) /* its tail drawn now */
        return st_work_item_ids(it->lazy, S->idbuf) < 0 ? NULL : S->idbuf;
    st_emu_output_tokens(0x5eed0000ULL + i, 0, it->input_len, R->vocab, S->idbuf);
    return S->idbuf;
}

/* Whether item i goes to the engine keyed by its own_key (engine.h, st_emu_req_params.keyed_from):
 * it names its own ids, no other prompt is built on it (a session's earlier turn, an agent's parent:
 * the later prompt carries its ids, which would be hashed) and it is none itself (its prompt is built
 * here), it keeps its ids (fresh_from replaces them), and the engine is not the step-by-step reference
 * (which hashes every prompt, so tests/unit/test_emu_skip.c compares the two keyings). Each condition
 * is the item's own or the session's, so a session's runs treat one item alike: a later run replaying
 * it finds its blocks by the same keys, as it would by its ids (replayed: listed as anyone's, except
 * in a one-run session, where no other request can carry them). */
static int item_keyed(const run *R, const st_emu_sim_item *it)
{
    return it->own_key && (it->input_ids || it->lazy) && it->own_from < it->input_len && !it->dependent && !it->next &&
           !it->n_children && !it->fresh_from && !st_emu_engine_config(R->e)->step_by_step;
}

/* The hash chain of a keyed lazy item's leading full blocks (the workload's shared prefix, which its
 * lazy items share: one buffer), computed once a run and given to the engine for each of them
 * (st_emu_req_params.hashes). Within a run the buffer does not change; each run computes it anew.
 * The number of blocks in *n (0: none, also when out of memory: the engine then hashes). */
static const uint64_t *prefix_hashes(run *R, const st_emu_sim_item *it, uint32_t *n)
{
    st_emu_session *S = R->S;
    uint32_t bs = st_emu_engine_config(R->e)->block_size;
    uint32_t nb = it->own_from / bs;
    *n = 0;
    if (!it->lazy || !nb)
        return NULL;
    if (S->pre_ids != it->input_ids || S->pre_n < nb) {
        if (nb > S->pre_cap) {
            uint64_t *h = realloc(S->pre_hash, (size_t)nb * sizeof *h);
            if (!h)
                return NULL;
            S->pre_hash = h;
            S->pre_cap = nb;
        }
        for (uint32_t j = 0; j < nb; j++)
            S->pre_hash[j] = st_emu_block_hash(j ? S->pre_hash[j - 1] : 0, it->input_ids + (size_t)j * bs, bs);
        S->pre_ids = it->input_ids;
        S->pre_n = nb;
    }
    *n = nb;
    return S->pre_hash;
}

/* Segments a request of `out` tokens will likely need, from those finished so far (their mean, plus
 * two), so that most records are allocated once (load/record.c grows one by a quarter when it needs
 * more): SIM_SEGS_RESERVE before enough finished. A record holds ~1 segment when its request runs
 * undisturbed (a reference to the shared timeline), so a larger margin is mostly untouched memory,
 * paid for in page faults (simspeed 20000 on 1: 4,196 with 8, 3,265 with 2). */
static uint32_t segs_expected(const run *R, uint32_t out)
{
    if (R->events_done < 1000)
        return SIM_SEGS_RESERVE;
    double x = (double)out * (double)R->segs_done / (double)R->events_done + 2;
    return x > out + 1.0 ? out + 1 : (uint32_t)x;
}

/* Sends item i at run time `sent`. 0, or -1 (out of memory: err set). */
static int send_item(run *R, uint32_t i, st_ns sent)
{
    const st_emu_sim_item *it = &R->items[i];
    st_record *r = &R->rec[i];
    r->sent = sent;
    if (R->closed)
        r->scheduled = sent; /* a closed-loop client sends when it is ready: no schedule to lag */
    R->p.sent++;
    R->p.in_flight++;
    R->S->fifo[R->fifo_tail++] = i;
    int keyed = !R->seeded && item_keyed(R, it); /* only its leading own_from ids are read */
    const uint32_t *ids = R->seeded                    ? NULL
                          : keyed                      ? it->input_ids
                          : it->dependent && R->prompt ? R->prompt[i]
                                                       : item_ids(R, i);
    uint32_t n_ids = it->dependent && R->prompt ? R->prompt_len[i] : it->input_len;
    if (!ids && n_ids && !R->seeded && !keyed) { /* an empty prompt has no ids: the engine refuses it, as vLLM does */
        snprintf(R->err, R->errlen, "out of memory");
        return -1;
    }
    if (!R->o->no_token_times && st_record_reserve_segs(r, segs_expected(R, it->output_len)) < 0) {
        snprintf(R->err, R->errlen, "out of memory");
        return -1;
    }
    st_emu_req_params p = { .id = R->base + i,
                            .ids = ids,
                            .n_ids = n_ids,
                            .max_tokens = it->output_len,
                            .ignore_eos = 1,
                            .chat = it->chat,
                            .kv_external = it->dependent ? 0 : it->kv_external,
                            .arrival = R->t0 + sent,
                            .user = r,
                            .seeded = R->seeded,
                            .seed = 0x5eed0000ULL + i };
    if (keyed) {
        p.seeded = 1;
        p.seed = it->own_key;
        p.keyed_from = it->own_from;
        p.replayed = !R->S->one_run;
        p.hashes = prefix_hashes(R, it, &p.n_hashes);
    }
    char why[512];
    int a = st_emu_add_request(R->e, &p, why, sizeof why);
    if (a == ST_EMU_ADD_NOMEM) {
        snprintf(R->err, R->errlen, "out of memory");
        return -1;
    }
    if (a != ST_EMU_ADD_OK) {
        r->http_status = 400;
        r->first_byte = r->end = sent;
        st_record_set_error(r, ST_REQ_HTTP_STATUS, why, strlen(why));
        R->s.rejected++;
        R->p.failed++;
        slot_freed(R, sent);
        skip_later_turns(R, i);
        skip_children(R, i);
    }
    return 0;
}

/* Sends everything due at run time `now`: open loop, the arrivals up to now; with a cap, each
 * once a slot is free (at max(arrival, the slot's free time)); closed loop, the next item in
 * order whenever a client's slot is free. */
static int send_due(run *R, st_ns now)
{
    const arr_ev *order = R->S->order;
    /* sessions' later turns released by now (open loop without a cap: nothing waits) */
    while (R->n_rel && R->rel[0].t <= now) {
        arr_ev e = rel_pop(R);
        R->rec[e.i].scheduled = e.t;
        R->released++;
        if (send_item(R, e.i, e.t) < 0)
            return -1;
    }
    if (!R->closed)
        while (R->arrived < R->n_sched && order[R->arrived].t <= now)
            R->arrived++;
    while (R->next < R->n_sched) {
        st_ns at = R->closed ? 0 : order[R->next].t;
        if (R->cap) {
            if (R->slot_head == R->slot_tail)
                break; /* every slot taken */
            st_ns free_at = R->S->slots[R->slot_head];
            at = at > free_at ? at : free_at;
        }
        if (at > now)
            break;
        if (R->cap)
            R->slot_head++;
        if (send_item(R, order[R->next++].i, at) < 0)
            return -1;
    }
    if (R->next < R->n_sched) { /* the next one's item and record, read and written when it is sent */
        const char *it = (const char *)&R->items[order[R->next].i], *rec = (const char *)&R->rec[order[R->next].i];
        __builtin_prefetch(it);
        __builtin_prefetch(it + sizeof *R->items - 1);
        __builtin_prefetch(rec);
        __builtin_prefetch(rec + sizeof *R->rec - 1);
    }
    if (R->closed)
        R->arrived = R->next;
    R->p.arrived = R->arrived + R->released;
    return 0;
}

/* Aborts in-flight requests sent more than the timeout before `at` (oldest first). */
static void expire(run *R, st_ns at)
{
    st_emu_session *S = R->S;
    while (R->fifo_head < R->fifo_tail) {
        uint32_t i = S->fifo[R->fifo_head];
        st_record *r = &R->rec[i];
        if (r->end >= 0 || r->status != ST_REQ_OK) {
            R->fifo_head++; /* already over */
            continue;
        }
        if (R->o->timeout <= 0 || at - r->sent <= R->o->timeout)
            break;
        R->fifo_head++;
        st_emu_abort(R->e, R->base + i);
        r->end = at;
        st_record_set_error(r, ST_REQ_TIMEOUT, TIMED_OUT, sizeof TIMED_OUT - 1);
        R->p.failed++;
        slot_freed(R, at);
        skip_later_turns(R, i);
        skip_children(R, i);
    }
}

/* The ticks due by `now`. Returns 1 when on_tick asked to stop. */
static int run_ticks(run *R, st_ns now)
{
    const st_emu_run_opts *o = R->o;
    while (R->next_tick <= now) {
        st_ns t = R->next_tick;
        R->next_tick += o->tick;
        expire(R, t);
        if (o->on_tick) {
            st_emu_stats es;
            st_emu_get_stats(R->e, &es);
            R->p.elapsed = t;
            if (o->on_tick(o->arg, t, &es, &R->p, R->rec, R->n))
                return 1;
        }
    }
    return 0;
}

/* Stops the run at `now`: requests in flight are aborted, the unsent ones marked. */
static void run_stop(run *R, st_ns now)
{
    st_emu_session *S = R->S;
    for (uint32_t k = R->fifo_head; k < R->fifo_tail; k++) {
        uint32_t i = S->fifo[k];
        st_record *r = &R->rec[i];
        if (r->end >= 0 || r->status != ST_REQ_OK)
            continue;
        st_emu_abort(R->e, R->base + i);
        r->end = now;
        st_record_set_error(r, ST_REQ_ABORTED, STOPPED_RUNNING, sizeof STOPPED_RUNNING - 1);
    }
    for (uint32_t k = R->next; k < R->n_sched; k++)
        st_record_set_error(&R->rec[S->order[k].i], ST_REQ_ABORTED, STOPPED_UNSENT, sizeof STOPPED_UNSENT - 1);
    /* sessions: later turns not sent yet (released or not) */
    for (uint32_t i = 0; R->prompt && i < R->n; i++)
        if (R->items[i].dependent && R->rec[i].sent < 0 && R->rec[i].status == ST_REQ_OK)
            st_record_set_error(&R->rec[i], ST_REQ_ABORTED, STOPPED_UNSENT, sizeof STOPPED_UNSENT - 1);
}

/* Request r completed at run time `at`: its record closed, its client slot freed, its session's
 * next turn and its task's children released (one place for a step and for a run of steps).
 * 0, or -1 out of memory. */
static int finish(run *R, st_record *r, st_ns at)
{
    r->end = at;
    r->usage_reported = 1;
    r->status = ST_REQ_OK;
    R->segs_done += r->n_segs;
    R->events_done += r->n_events;
    R->s.completed++;
    R->p.completed++;
    slot_freed(R, at);
    if (release_next(R, (uint32_t)(r - R->rec), at) < 0 || release_children(R, (uint32_t)(r - R->rec), at) < 0) {
        snprintf(R->err, R->errlen, "out of memory");
        return -1;
    }
    return 0;
}

/* Writes the segments g[0..m) of delivery times (absolute engine times), less tl_shift, to the
 * session's timeline, in one chunk; *first gets the chunk's index of their first event. 0, or -1
 * out of memory. */
static int tl_append(st_emu_session *S, const st_tok_seg *g, uint32_t m, uint32_t *first)
{
    if (!S->tl || S->tl->cap - S->tl->n < m) {
        st_tok_chunk *c = st_tok_chunk_new(m > SIM_TL_CHUNK ? m : SIM_TL_CHUNK);
        if (!c)
            return -1;
        st_tok_chunk_unref(S->tl); /* the records that reference it keep it */
        S->tl = c;
    }
    for (uint32_t j = 0; j < m; j++) {
        st_tok_seg x = g[j];
        x.t0 -= S->tl_shift;
        uint32_t f = st_tok_chunk_add(S->tl, &x);
        if (j == 0)
            *first = f;
    }
    return 0;
}

/* Records a step's token events at the times the clients receive them (the step's end, or
 * later when the API-server model is behind). 0, or -1. */
static int run_step(run *R, const st_emu_step_result *res)
{
    st_ns end_abs = res->start + res->duration;
    st_emu_session *S = R->S;
    R->s.busy_s += res->duration / 1e9;
    /* the step's delivery base on the timeline (the reference path, step by step, keeps each time
     * as it comes instead) */
    int tl = !R->o->no_token_times && !st_emu_engine_config(R->e)->step_by_step && res->n_events;
    uint32_t first = 0;
    st_tok_seg one = { .t0 = res->due_base, .n = 1 };
    if (tl && tl_append(S, &one, 1, &first) < 0) {
        snprintf(R->err, R->errlen, "out of memory");
        return -1;
    }
    st_ns shift = 0, prev = res->due_base; /* the finished sequences' shares of the queue */
    for (uint32_t k = 0; k < res->n_events; k++) {
        const st_emu_event *ev = &res->events[k];
        st_record *r = ev->user;
        st_ns at = ev->due - R->t0;
        uint32_t n_reason = R->items[r - R->rec].n_reason;
        if (ev->first) {
            r->first_token = r->first_byte = at;
            r->http_status = 200;
            r->cached_tokens = ev->cached_tokens;
        }
        uint32_t n_tok = ev->n_tokens ? ev->n_tokens : 1, from = ev->n_out - n_tok + 1; /* a burst: from..n_out */
        if (from <= n_reason + 1 &&
            ev->n_out >= n_reason + 1) /* the first answer token (the first without reasoning) */
            r->first_answer = at;
        if (from <= n_reason)
            r->reasoning_tokens = ev->n_out < n_reason ? ev->n_out : n_reason;
        int rc = 0;
        if (tl)
            rc = st_record_add_timeline(r, S->tl, first, 1, ev->due - res->due_base - R->t0 + S->tl_shift);
        else if (!R->o->no_token_times)
            rc = st_record_add_event(r, at);
        if (rc < 0) {
            snprintf(R->err, R->errlen, "out of memory");
            return -1;
        }
        if (ev->finish)
            shift += ev->due - prev;
        prev = ev->due;
        r->output_tokens = ev->n_out;
        R->p.output_tokens += n_tok;
        if (ev->finish && finish(R, r, at) < 0)
            return -1;
    }
    S->tl_shift += shift;
    st_emu_stats es;
    st_emu_get_stats(R->e, &es);
    if (es.running > R->s.max_running)
        R->s.max_running = es.running;
    if (es.waiting > R->s.max_waiting)
        R->s.max_waiting = es.waiting;
    if (es.kv_usage > R->s.max_kv_usage)
        R->s.max_kv_usage = es.kv_usage;
    if (end_abs > R->S->vc.t)
        R->S->vc.t = end_abs;
    if (R->last_due < 0 || ev_last_due(res) > R->last_due)
        R->last_due = ev_last_due(res);
    return 0;
}

/* Records a run of steps (st_emu_skip_steps): each sequence's tokens at the times its client receives
 * them, as run_step does step by step (requests finish only in the run's last step; those the run
 * admitted get their first token in it). 0, or -1. */
static int run_skip(run *R, const st_emu_skip_result *sk)
{
    uint32_t k = sk->steps, first = 0;
    st_emu_session *S = R->S;
    for (uint32_t j = 0; j < k; j++)
        R->s.busy_s += (sk->start[j + 1] - sk->start[j]) / 1e9;
    int tl = !R->o->no_token_times; /* the run's delivery times as segments, once for all its sequences */
    if (tl) {
        if (st_grow((void **)&S->segs, &S->segs_cap, k, sizeof *S->segs, 64) < 0 ||
            tl_append(S, S->segs, st_tok_segs_fit(sk->due, k, ST_EMU_TOKEN_TOL_NS, S->segs), &first) < 0) {
            snprintf(R->err, R->errlen, "out of memory");
            return -1;
        }
    }
    st_ns shift = 0; /* the finished sequences' shares of the API server's queue */
    for (uint32_t q = 0; q < sk->seqs; q++) {
        const st_emu_skip_seq *sq = &sk->seq[q];
        st_record *r = sq->user;
        uint32_t n_reason = R->items[r - R->rec].n_reason, from = sq->from, m = k - from; /* its tokens */
        st_ns off = sq->due_off - R->t0; /* its token of step j reaches its client at due[j] + off */
        if (m == 0 || (R->hooked && sq->finish))
            continue; /* a chunked prefill: no token yet; or finished, given to hook_finished */
        if (sq->first) {
            r->first_token = r->first_byte = sq->first_due - R->t0;
            r->http_status = 200;
            r->cached_tokens = sq->cached_tokens;
        }
        if (tl && st_record_add_timeline(r, S->tl, first + from, m, off + S->tl_shift) < 0) {
            snprintf(R->err, R->errlen, "out of memory");
            return -1;
        }
        if (sq->finish)
            shift += sq->due_off - (q ? sq[-1].due_off : 0);
        /* step j emits token n_out + j - from + 1 */
        if (sq->first && n_reason == 0) /* the first answer token is its first */
            r->first_answer = sq->first_due - R->t0;
        else if (n_reason >= sq->n_out && n_reason - sq->n_out < m) /* the first answer token */
            r->first_answer = sk->due[from + n_reason - sq->n_out] + off;
        if (sq->n_out + 1 <= n_reason)
            r->reasoning_tokens = sq->n_out + m < n_reason ? sq->n_out + m : n_reason;
        r->output_tokens = sq->n_out + m;
        R->p.output_tokens += m;
        if (sq->finish && finish(R, r, sk->due[k - 1] + off) < 0) /* in the run's last step, as run_step ends it */
            return -1;
    }
    S->tl_shift += shift;
    if (sk->running_peak > R->s.max_running)
        R->s.max_running = sk->running_peak;
    if (sk->waiting_peak > R->s.max_waiting)
        R->s.max_waiting = sk->waiting_peak;
    if (sk->kv_usage_peak > R->s.max_kv_usage)
        R->s.max_kv_usage = sk->kv_usage_peak;
    st_ns end_abs = sk->start[k];
    if (end_abs > R->S->vc.t)
        R->S->vc.t = end_abs;
    uint32_t q = sk->seqs;
    while (q > 0 && R->hooked && sk->seq[q - 1].finish) /* (those were given to hook_finished) */
        q--;
    st_ns last = q ? sk->due[k - 1] + sk->seq[q - 1].due_off : -1; /* the run's latest delivery */
    if (R->last_due < 0 || last > R->last_due)
        R->last_due = last;
    return 0;
}

/* The run time of the next thing that happens outside the engine: a send (an arrival, a released
 * turn, a free slot) or a tick; INT64_MAX when none is due. A run of steps ends before it. */
static st_ns next_event(const run *R)
{
    st_ns t = R->next_tick;
    if (R->n_rel && R->rel[0].t < t)
        t = R->rel[0].t;
    if (R->next < R->n_sched) {
        st_ns a = R->closed ? 0 : R->S->order[R->next].t;
        if (R->cap) {
            if (R->slot_head == R->slot_tail)
                return t; /* every slot taken: a completion frees one, and completions end runs */
            if (R->S->slots[R->slot_head] > a)
                a = R->S->slots[R->slot_head];
        }
        if (a < t)
            t = a;
    }
    return t;
}

/* next_event as an engine time (the hooks' clock). */
static st_ns next_event_abs(const run *R)
{
    st_ns h = next_event(R);
    return h >= INT64_MAX - R->t0 ? INT64_MAX : R->t0 + h;
}

/* st_emu_skip_hooks.due: the sends due by engine time t, as the loop makes them between steps. */
static st_ns hook_due(void *arg, st_ns t)
{
    run *R = arg;
    R->S->vc.t = t;
    if (!R->hook_failed && send_due(R, t - R->t0) < 0)
        R->hook_failed = 1;
    return next_event_abs(R);
}

/* st_emu_skip_hooks.finished: a request's last token in a run, recorded as run_skip records it. */
static st_ns hook_finished(void *arg, const st_emu_skip_seq *sq, uint32_t tokens, st_ns due)
{
    run *R = arg;
    st_record *r = sq->user;
    if (sq->first) { /* (no reasoning: its first token is its first answer token) */
        r->first_token = r->first_byte = r->first_answer = sq->first_due - R->t0;
        r->http_status = 200;
        r->cached_tokens = sq->cached_tokens;
    }
    r->output_tokens = sq->n_out + tokens;
    R->p.output_tokens += tokens;
    if (R->last_due < 0 || due > R->last_due)
        R->last_due = due;
    if (!R->hook_failed && finish(R, r, due - R->t0) < 0)
        R->hook_failed = 1;
    return next_event_abs(R);
}

/* When nothing can run now: the next instant something happens (an arrival, a request leaving
 * the API server model, a tick), or -1 when the run is over. */
static st_ns idle_until(run *R, st_ns now)
{
    st_ns t = -1;
    if (st_emu_has_work(R->e)) {
        st_ns ready = st_emu_next_ready(R->e);
        if (ready >= 0)
            t = ready - R->t0;
    }
    if (R->n_rel && (t < 0 || R->rel[0].t < t))
        t = R->rel[0].t;
    if (R->next < R->n_sched) {
        st_ns a = R->closed ? 0 : R->S->order[R->next].t;
        int can = 1;
        if (R->cap) {
            can = R->slot_head < R->slot_tail;
            if (can && R->S->slots[R->slot_head] > a)
                a = R->S->slots[R->slot_head];
        }
        if (can && (t < 0 || a < t))
            t = a;
    }
    if (t < 0)
        return -1;
    if (t <= now)
        t = now + 1; /* guard: never stand still */
    if (R->next_tick < t)
        t = R->next_tick;
    return t;
}

static void run_finish_stats(run *R)
{
    st_emu_stats es;
    st_emu_get_stats(R->e, &es);
    /* the run lasts until its last token reached its client */
    if (R->last_due > R->S->vc.t)
        R->S->vc.t = R->last_due;
    R->s.duration = R->S->vc.t - R->t0;
    R->s.steps = es.steps - R->es0.steps;
    R->s.preemptions = es.preemptions - R->es0.preemptions;
    R->s.prefix_queries = es.prefix_queries - R->es0.prefix_queries;
    R->s.prefix_hits = es.prefix_hits - R->es0.prefix_hits;
    R->s.generated_tokens = es.generation_tokens - R->es0.generation_tokens;
    R->s.prompt_tokens = es.prompt_tokens - R->es0.prompt_tokens;
}

/* The run of steps that starts now, recorded (st_emu_skip_steps; with hooks when the run records
 * neither token times nor reasoning). 0 when one ran, 1 when none could (the next step is
 * st_emu_step's), -1 with R->err out of memory. */
static int take_run(run *R)
{
    st_emu_skip_result sk;
    int kr;
    if (R->hooked) { /* the run ends at a tick; sends and completions go through the hooks */
        st_emu_skip_hooks hk = { .due = hook_due, .finished = hook_finished, .arg = R };
        hk.next = next_event_abs(R);
        st_ns tick = R->next_tick >= INT64_MAX - R->t0 ? INT64_MAX : R->t0 + R->next_tick;
        kr = st_emu_skip_steps_hooked(R->e, tick, &hk, &sk);
        if (R->hook_failed) {
            snprintf(R->err, R->errlen, "out of memory");
            return -1;
        }
    } else {
        kr = st_emu_skip_steps(R->e, next_event_abs(R), &sk);
    }
    if (kr < 0 || (kr == 0 && run_skip(R, &sk) < 0)) {
        snprintf(R->err, R->errlen, "engine step failed (out of memory)");
        return -1;
    }
    return kr;
}

/* A step shown to the caller's on_step with the item index of each of its sequences. 0, or -1
 * with R->err out of memory. */
static int show_step(run *R, const st_emu_step_result *res)
{
    if (R->cap_step_items < res->seqs) {
        uint32_t *p = realloc(R->step_items, (size_t)res->seqs * sizeof *p);
        if (!p) {
            snprintf(R->err, R->errlen, "out of memory");
            return -1;
        }
        R->step_items = p;
        R->cap_step_items = res->seqs;
    }
    for (uint32_t k = 0; k < res->seqs; k++)
        R->step_items[k] = (uint32_t)(res->work[k].id - R->base);
    R->o->on_step(R->o->step_arg, res->start - R->t0, res, R->step_items);
    return 0;
}

int st_emu_session_run(st_emu_session *S, const st_emu_sim_item *items, uint32_t n, const st_emu_run_opts *o,
                       st_record *records, st_emu_sim_stats *stats, int *stopped, char *err, size_t errlen)
{
    static const st_emu_run_opts none = { 0 };
    if (!o)
        o = &none;
    if (stopped)
        *stopped = 0;
    if (S->one_run && S->runs) {
        snprintf(err, errlen, "internal error: a one-run session runs once");
        return -1;
    }
    S->runs++;
    S->pre_ids = NULL; /* a run's items may hold other ids at the same place */
    run R = { .S = S, .e = S->e, .items = items, .n = n, .o = o, .rec = records, .err = err, .errlen = errlen };
    R.closed = o->clients > 0;
    R.cap = R.closed ? o->clients : o->max_concurrency;
    R.last_due = -1;
    R.t0 = S->vc.t;
    R.base = S->id_base;
    S->id_base += (uint64_t)n + 1;
    R.vocab = st_emu_engine_config(S->e)->model.vocab;
    R.seeded = run_seeded(&R);
    R.next_tick = o->tick > 0 ? o->tick : INT64_MAX;
    st_emu_get_stats(S->e, &R.es0);
    int rc = 0;
    /* runs of decode steps at once, unless asked otherwise or a caller looks at every step */
    int skip = !st_emu_engine_config(S->e)->step_by_step && !o->on_step;
    R.hooked = skip && o->no_token_times;
    for (uint32_t i = 0; i < n && R.hooked; i++)
        R.hooked = items[i].n_reason == 0;
    for (uint32_t i = 0; i < n; i++)
        if (items[i].dependent && (R.cap || R.closed)) {
            snprintf(err, errlen, "multi-turn sessions run open loop, without a concurrency limit");
            for (uint32_t k = 0; k < n; k++) /* (as run_prepare would) */
                st_record_init(&records[k], k);
            return -1;
        }
    if (run_prepare(&R) < 0) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
        goto out;
    }
    for (;;) {
        st_ns now = run_now(&R);
        if (send_due(&R, now) < 0) {
            rc = -1;
            break;
        }
        /* ticks due by now (the records reflect the engine at the clock, at most one step on);
         * an interruption at once, whatever the virtual time a step covers */
        if ((o->stop && *o->stop) || run_ticks(&R, now)) {
            run_stop(&R, now);
            if (stopped)
                *stopped = 1;
            break;
        }
        int kr = skip ? take_run(&R) : 1;
        if (kr < 0) {
            rc = -1;
            break;
        }
        if (kr == 0)
            continue;
        st_emu_step_result res;
        int sr = st_emu_has_work(R.e) ? st_emu_step(R.e, &res) : 1;
        if (sr < 0) {
            snprintf(err, errlen, "%s",
                     sr == -2 ? "internal error: a request needs more KV blocks than the engine has (it would wait "
                                "forever)"
                              : "engine step failed (out of memory)");
            rc = -1;
            break;
        }
        if (sr == 0) {
            if ((o->on_step && show_step(&R, &res) < 0) || run_step(&R, &res) < 0) {
                rc = -1;
                break;
            }
            continue;
        }
        st_ns t = idle_until(&R, now);
        if (t < 0) {
            if (R.next < R.n_sched) {
                snprintf(err, errlen, "internal error: no work but every slot taken");
                rc = -1;
            }
            break;
        }
        S->vc.t = R.t0 + t; /* idle until then; ticks in between still happen */
    }
    if (rc == 0)
        run_finish_stats(&R);
out:
    run_free_sessions(&R);
    free(R.step_items);
    if (stats)
        *stats = R.s;
    return rc;
}

int st_emu_sim_run(const st_emu_config *cfg, const st_emu_sim_item *items, uint32_t n, st_record *records,
                   st_emu_sim_stats *stats, char *err, size_t errlen)
{
    return st_emu_sim_run_limited(cfg, items, n, 0, records, stats, err, errlen);
}

int st_emu_sim_run_opts(const st_emu_config *cfg, const st_emu_sim_item *items, uint32_t n, const st_emu_run_opts *o,
                        st_record *records, st_emu_sim_stats *stats, int *stopped, char *err, size_t errlen)
{
    if (stats)
        memset(stats, 0, sizeof *stats);
    st_emu_session *S;
    if (st_emu_session_new(cfg, &S, NULL, err, errlen) < 0) {
        for (uint32_t i = 0; i < n; i++)
            st_record_init(&records[i], i);
        return -1;
    }
    st_emu_session_one_run(S);
    /* (the run initialises the records) */
    int rc = st_emu_session_run(S, items, n, o, records, stats, stopped, err, errlen);
    st_emu_session_free(S);
    return rc;
}

int st_emu_sim_run_limited(const st_emu_config *cfg, const st_emu_sim_item *items, uint32_t n, uint32_t max_concurrency,
                           st_record *records, st_emu_sim_stats *stats, char *err, size_t errlen)
{
    st_emu_run_opts o = { .max_concurrency = max_concurrency };
    return st_emu_sim_run_opts(cfg, items, n, &o, records, stats, NULL, err, errlen);
}

int st_emu_sim_run_closed(const st_emu_config *cfg, const st_emu_sim_item *items, uint32_t n, uint32_t clients,
                          st_record *records, st_emu_sim_stats *stats, char *err, size_t errlen)
{
    if (clients == 0) {
        snprintf(err, errlen, "a closed loop needs at least one client");
        return -1;
    }
    st_emu_run_opts o = { .clients = clients };
    return st_emu_sim_run_opts(cfg, items, n, &o, records, stats, NULL, err, errlen);
}

void st_emu_sim_items_from_workload(const struct st_workload *w, const st_ns *sched, st_emu_sim_item *items_out)
{
    for (uint32_t i = 0; i < w->n; i++) {
        const st_work_item *it = &w->items[i];
        st_ns a = sched ? sched[i] : it->arrival;
        items_out[i] = (st_emu_sim_item){ .arrival = a < 0 ? 0 : a,
                                          .input_ids = it->input_ids,
                                          .input_len = it->input_len,
                                          .output_len = it->output_len,
                                          .own_from = it->own_from,
                                          .own_key = it->own_key,
                                          .lazy = it->lazy ? it : NULL,
                                          .dependent = i >= w->n - w->n_dependent,
                                          .next = it->next,
                                          .think = it->think,
                                          .session = it->session,
                                          .turn = it->turn,
                                          .children = it->children,
                                          .n_children = it->n_children,
                                          .n_parents = it->n_parents,
                                          .grow = it->grow };
    }
}
