/* Virtual-time simulation: runs a workload through the engine model to completion, as fast
 * as the CPU allows, and fills one st_record per request exactly as the HTTP load generator
 * would (times relative to the run start, every token event). Used by `servetune predict`. */
#ifndef ST_EMU_SIM_H
#define ST_EMU_SIM_H
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "core/clock.h"
#include "emu/config.h"
#include "emu/engine.h"
#include "load/record.h"

/* The token times of a run of decode steps are kept as segments (load/record.h: st_tok_seg, on the
 * session's shared timeline), each time within this many ns of the time the step-by-step model gives
 * it (step times are whole ns, so a run's times lie on a smooth curve only to about 1 ns a step):
 * 1e-5 of a 10 ms step, far below any figure a report prints. Every other time of a record is
 * exact. */
#define ST_EMU_TOKEN_TOL_NS 100

struct st_work_item;

/* One request of the workload (st_emu_sim_items_from_workload maps load/workload.h's st_work_item onto it:
 * arrival from the arrival process, input_ids/input_len/output_len from the item). */
typedef struct st_emu_sim_item {
    st_ns arrival;             /* ns from the run start, nondecreasing not required */
    const uint32_t *input_ids; /* input_len ids, or NULL: unique deterministic ids */
    uint32_t input_len;
    uint32_t output_len;  /* max_tokens (ignore_eos) */
    int chat;             /* sent to /v1/chat/completions (the API-server model's chat costs) */
    uint32_t kv_external; /* prompt tokens whose KV cache it brings (st_emu_req_params: a disaggregated
                             decode worker's request); 0: none */
    uint32_t fresh_from;  /* emu/pool only: with input_ids, the ids from this position on are replaced by
                             the item's own unique ones (a copy of a workload item that keeps its shared
                             prefix, not its whole prompt); 0: input_ids as they are */
    /* own_key != 0: the ids from own_from on (own_from < input_len) are this item's own, drawn from a
     * stream own_key names (load/workload.h, st_work_item.own_key: the same key and own_from, the same
     * ids there). Such an item goes to the engine as a seeded prompt (engine.h: keyed_from = own_from,
     * seed = own_key): its leading own_from ids are hashed, its own blocks keyed instead, with the same
     * results; see item_keyed in sim.c for when. */
    uint32_t own_from;
    uint64_t own_key;
    /* A lazy workload item (load/workload.h st_work_item.lazy): input_ids holds only its first
     * own_from ids; its whole prompt comes from st_work_item_ids(lazy) where one is needed (when it is
     * not keyed). NULL: input_ids as above. */
    const struct st_work_item *lazy;
    uint32_t n_reason; /* a reasoning model: the first n_reason output tokens are reasoning (the
                            record's first_answer is the token after them; -1 when none follows) */
    /* Multi-turn sessions (open loop without a cap only): a DEPENDENT item is a session's later
     * turn, not on the schedule (arrival unused): it is sent `think` after the turn before it
     * ended, and its prompt is that turn's prompt, the answer tokens the engine generated for it
     * (reasoning left out, as a chat template drops it) and then its own input_len new tokens.
     * next: the index of the session's next turn (0: none). A turn that fails, times out or is
     * stopped ends its session: the later turns are recorded as ST_REQ_SKIPPED (or aborted
     * unsent when the run stops). session/turn go into the record. */
    int dependent;
    uint32_t next;
    st_ns think;
    uint32_t session, turn;
    /* Agent task graphs (load/agent.h; open loop without a cap only): a dependent item with
     * n_parents > 0 is sent `think` after the LAST of its parents completed (each parent lists it
     * in its children); its prompt is its own input_len tokens followed, when grow, by each
     * parent's answer tokens (reasoning left out) in the order the parents completed. A parent
     * that fails, times out or is refused skips its children, and theirs (ST_REQ_SKIPPED). */
    const uint32_t *children;
    uint32_t n_children, n_parents;
    int grow;
} st_emu_sim_item;

typedef struct st_emu_sim_stats {
    st_ns duration; /* virtual time from 0 to the last completion */
    uint64_t steps, preemptions, prefix_queries, prefix_hits;
    uint64_t generated_tokens, prompt_tokens;
    uint32_t completed, rejected;
    uint32_t max_running, max_waiting;
    double max_kv_usage;
    double busy_s; /* sum of step durations */
} st_emu_sim_stats;

/* Runs items[0..n) on a fresh engine built from cfg. records[i] is initialised here
 * (st_record_init) and filled for item i: scheduled = sent = arrival, first_byte =
 * first_token, every token event, end, tokens; a request the engine rejects (too long)
 * gets ST_REQ_HTTP_STATUS 400 with vLLM's message. Returns 0, or -1 with err (startup
 * refusal, out of memory). A stop callback is not needed: the run always terminates.
 * A record's token times are references into the session's shared step timeline (load/record.h:
 * st_tok_chunk), not copies: each record holds its own references, so records stay
 * valid after the session is freed and each is freed with st_record_free, in any order. */
int st_emu_sim_run(const st_emu_config *cfg, const st_emu_sim_item *items, uint32_t n, st_record *records,
                   st_emu_sim_stats *stats, char *err, size_t errlen);
/* The same with a client-side concurrency limit (like `vllm bench serve --max-concurrency`):
 * an arrival waits until fewer than max_concurrency requests are in flight; its record's
 * `sent` is when it went out (scheduled stays the arrival). 0 = no limit. */
int st_emu_sim_run_limited(const st_emu_config *cfg, const st_emu_sim_item *items, uint32_t n, uint32_t max_concurrency,
                           st_record *records, st_emu_sim_stats *stats, char *err, size_t errlen);
/* Closed loop (concurrency-driven, like AIPerf's or `vllm bench serve --max-concurrency N
 * --request-rate inf`): `clients` clients each send their next item (in item order; the
 * items' arrivals are ignored) the moment their previous request ends. Records: scheduled =
 * sent = when the client sent it. clients >= 1. */
int st_emu_sim_run_closed(const st_emu_config *cfg, const st_emu_sim_item *items, uint32_t n, uint32_t clients,
                          st_record *records, st_emu_sim_stats *stats, char *err, size_t errlen);

/* One run on a fresh engine with per-run options (st_emu_run_opts below: load, ticks, stop);
 * *stopped (may be NULL) says whether on_tick or the stop flag ended it early. */
struct st_emu_run_opts;
int st_emu_sim_run_opts(const st_emu_config *cfg, const st_emu_sim_item *items, uint32_t n,
                        const struct st_emu_run_opts *o, st_record *records, st_emu_sim_stats *stats, int *stopped,
                        char *err, size_t errlen);

/* Builds sim items from a load/workload.h workload and its arrival schedule (sched[i] ns
 * from the start, e.g. from st_arrival_schedule; NULL: each item's own arrival, -1 -> 0).
 * Items with text only get NULL ids (unique deterministic ids of input_len tokens). A session's
 * later turns (the workload's last n_dependent items) become dependent items.
 * items_out has w->n entries; it points into w (keep w alive while running). */
struct st_workload;
void st_emu_sim_items_from_workload(const struct st_workload *w, const st_ns *sched, st_emu_sim_item *items_out);

/* ---- A session: one engine on one virtual clock that runs workload after workload ----
 * Like a server between benchmark runs: its prefix cache and counters carry over from one run
 * to the next. Each run's records are relative to that run's start (the clock's time when
 * st_emu_session_run is called). Used by `servetune predict` (audit/exec_model.c). */
typedef struct st_emu_session st_emu_session;

/* A run's counts so far, kept as the run goes (a tick costs O(1), not O(requests)). */
typedef struct st_emu_run_progress {
    st_ns elapsed;  /* run time of this tick */
    uint32_t total; /* items in the run */
    uint32_t arrived, sent, completed, failed, in_flight;
    uint64_t output_tokens; /* token events so far */
} st_emu_run_progress;

/* Per-run options. Load: open loop (items arrive at their arrival times, optionally capped at
 * max_concurrency in flight) or, with clients > 0, closed loop (each of `clients` clients sends
 * its next item when its previous request ended; arrivals ignored; a record's scheduled = sent,
 * -1 until it is sent). */
typedef struct st_emu_run_opts {
    uint32_t max_concurrency; /* open loop: 0 = no cap */
    uint32_t clients;         /* > 0: closed loop with this many clients (max_concurrency unused) */
    uint32_t warmup;          /* records of items [0, warmup) are marked warm-up */
    st_ns timeout;            /* > 0: a request not finished this long after it was sent is
                                  aborted in the engine and recorded as ST_REQ_TIMEOUT (checked
                                  at each tick) */
    st_ns tick;               /* > 0: call on_tick every `tick` of run time (also while idle) */
    int no_token_times;       /* 1: the caller reads no token times: records get no events array
                                  (n_events 0, so no ITL); first token, first answer, end and the
                                  counts as usual, the same as with them (the runs' figures that do not
                                  read token times: plan's saturation runs) */
    /* now: run time (ns); p: the counts so far; recs: the run's records so far (n of them;
     * requests not yet sent have sent == -1). Return nonzero to stop the run now: requests in
     * flight are aborted (ST_REQ_ABORTED, end = now), requests not yet sent get sent = -1 and
     * ST_REQ_ABORTED. */
    int (*on_tick)(void *arg, st_ns now, const st_emu_stats *es, const st_emu_run_progress *p, const st_record *recs,
                   uint32_t n);
    void *arg;
    /* Optional: called after every engine step with the step (res->start is engine time; start is
     * run time) and the item index of each of its sequences (item[k] for res->work[k]; valid during
     * the call). Per-step accounting of GPU time by request (plan/attrib.h). */
    void (*on_step)(void *arg, st_ns start, const st_emu_step_result *res, const uint32_t *item);
    void *step_arg;
    /* Nonzero (set asynchronously, e.g. by a SIGINT/SIGTERM handler): the run stops at the next
     * step, as when on_tick asks (*stopped = 1). NULL: never. */
    const volatile sig_atomic_t *stop;
} st_emu_run_opts;

/* A fresh engine (startup refusal: -1 with vLLM's message in err; mem_out gets the plan, also
 * on refusal: its refusal field says which). */
int st_emu_session_new(const st_emu_config *cfg, st_emu_session **out, st_emu_memory *mem_out, char *err,
                       size_t errlen);
void st_emu_session_free(st_emu_session *s);
/* Declares that s will run once (st_emu_sim_run does so): its items without ids then go to the
 * engine as seeded prompts, neither generated nor hashed (engine.h, st_emu_req_params.seeded), in a
 * run without explicit ids or dependent items; the results are the same. A second run of s fails,
 * since it would reuse the items' seeds. Call before its run. */
void st_emu_session_one_run(st_emu_session *s);
/* Runs items[0..n) (arrivals relative to now) until every request finished or on_tick stopped
 * the run; *stopped (may be NULL) says which. records[i] is initialised here, also on failure (but for
 * a second run of a one-run session), and filled for item i as st_emu_sim_run fills it. The engine is
 * idle on return. 0, or -1 with err. */
int st_emu_session_run(st_emu_session *s, const st_emu_sim_item *items, uint32_t n, const st_emu_run_opts *o,
                       st_record *records, st_emu_sim_stats *stats, int *stopped, char *err, size_t errlen);
/* The engine's counters (cumulative since the session started). */
void st_emu_session_stats(const st_emu_session *s, st_emu_stats *out);

#endif
