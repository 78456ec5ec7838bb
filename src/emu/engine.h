/* The engine model: vLLM V1's scheduler over the paged KV cache with prefix caching, and
 * the roofline step time. Driven by an injected clock (core/clock.h): the HTTP emulator
 * runs it on the (scaled) wall clock, st_emu_sim on virtual time. No I/O.
 *
 * Use: st_emu_engine_new(resolved config) -> st_emu_add_request(...) for each arrival ->
 * st_emu_step(): schedules one step at clock.now(), applies it and returns its duration
 * and the tokens it emits; they are due at start + duration (the caller delivers them
 * then and does not call st_emu_step again before that time). */
#ifndef ST_EMU_ENGINE_H
#define ST_EMU_ENGINE_H
#include <stddef.h>
#include <stdint.h>

#include "core/clock.h"
#include "emu/config.h"

typedef struct st_emu_engine st_emu_engine;

/* Builds an engine; cfg is resolved with st_emu_memory_plan first (a refusal is returned as
 * -1 with vLLM's message in err). mem_out (may be NULL) receives the memory plan. */
int st_emu_engine_new(const st_emu_config *cfg, st_clock clock, st_emu_engine **out, st_emu_memory *mem_out, char *err,
                      size_t errlen);
void st_emu_engine_free(st_emu_engine *e);
const st_emu_config *st_emu_engine_config(const st_emu_engine *e);
const st_emu_memory *st_emu_engine_memory(const st_emu_engine *e);

typedef struct st_emu_req_params {
    uint64_t id;         /* caller's id; must be unique among live requests (not checked: O(1) add) */
    const uint32_t *ids; /* prompt token ids (copied) */
    uint32_t n_ids;
    uint64_t max_tokens; /* 0: max_model_len - prompt; as the client gave it (refused above max_model_len) */
    uint32_t min_tokens; /* accepted; the model always generates max_tokens (ignore_eos) */
    int ignore_eos;
    st_ns arrival; /* engine time; -1: clock.now() */
    int chat;      /* a /v1/chat/completions request (its API-server costs: fe_chat_factor) */
    void *user;    /* returned in events */
    /* Prompt tokens whose KV cache the request brings with it (a decode worker of disaggregated
     * serving: vLLM's KV connector loaded them from the prefill worker before it is scheduled).
     * At its first admission they count as computed, as vLLM's scheduler counts a connector's
     * external hit: blocks are allocated for them, and the last prompt token is recomputed
     * (at most n_ids - 1 count; vllm/v1/core/sched/scheduler.py, _update_waiting_for_remote_kv).
     * Not counted as prefix-cache hits; a preempted request recomputes them. 0: none. */
    uint32_t kv_external;
    /* A seeded prompt: its ids are st_emu_output_tokens(seed, 0, n_ids, vocab) and ids may be NULL
     * (nothing reads them). The caller promises that no other request this engine sees shares a full
     * block with it: none has the same seed, no explicit ids equal them, no later prompt contains
     * them. Its blocks are then keyed in the prefix cache by (seed, block index), and a block holding
     * generated tokens by (its parent's key, n_ids, id), instead of hashing the ids: keys are equal
     * exactly when the ids are (up to a 64-bit collision, as between hashes). Since only the request
     * itself can look its blocks up (its recomputation after a preemption), they stay out of the
     * cache map (unlisted, emu/blocks.h) until a preemption lists them, and its admissions look
     * nothing up before that. Every result is the same as with its ids, without generating, copying
     * or hashing them (emu/sim.c: a one-run session without explicit ids or dependent items).
     *
     * keyed_from > 0: only the ids from keyed_from on are the seed's own (a workload item's unique
     * tail after a shared prefix; load/workload.h, st_work_item.own_key); ids holds at least its first
     * keyed_from ids (copied, the rest never read). The blocks that lie within them are hashed from
     * them as any prompt's; the blocks from the one holding position keyed_from on are keyed by
     * (their parent's hash, the ids of that block before keyed_from, seed, keyed_from). The promise
     * covers only those blocks: other requests may share the leading ones.
     *
     * replayed: other requests may carry the same seed and keyed_from, meaning the same ids (a later
     * run of a session replaying the same workload item, which would hit this one's blocks). Its
     * blocks are then listed and looked up as any request's; the promise above is relaxed to
     * "a request with the same seed and keyed_from has the same ids", which makes the keys equal
     * exactly when the ids are. */
    int seeded;
    uint64_t seed;
    uint32_t keyed_from;
    int replayed;
    /* Optional: the prefix-cache hashes of its first n_hashes full blocks, the chain the engine
     * would compute from its ids (st_emu_block_hash from parent 0), given so that a prefix many
     * requests share is hashed once (emu/sim.c: a lazy workload's shared prefix). Only blocks whose
     * hashes come from its ids are taken (below keyed_from when seeded, within the prompt). */
    const uint64_t *hashes;
    uint32_t n_hashes;
} st_emu_req_params;

enum {
    ST_EMU_ADD_OK = 0,
    ST_EMU_ADD_TOO_LONG = -1, /* prompt (+ max_tokens) over max_model_len: HTTP 400 */
    ST_EMU_ADD_INVALID = -2,  /* empty prompt, token id out of vocab */
    ST_EMU_ADD_NOMEM = -3,
};
/* Queues a request (waiting). On rejection err holds vLLM's message (for TOO_LONG:
 * "You passed N input tokens and requested M output tokens. However, ..."). */
int st_emu_add_request(st_emu_engine *e, const st_emu_req_params *p, char *err, size_t errlen);
/* Removes a live request (client went away); its blocks are freed. 0 or -1 if unknown. */
int st_emu_abort(st_emu_engine *e, uint64_t id);
/* Holds (on = 1) or resumes (on = 0) the token production of request id: a held request keeps
 * its place and its KV cache but is left out of the steps, as a server stops generating into the
 * full socket of a client that does not read. 0, or -1 when no such request is live. */
int st_emu_hold(st_emu_engine *e, uint64_t id, int on);

/* Whether a later prompt may carry tokens this engine generated (a session's next turn, an agent's
 * child, a client that sends an answer back). On (the default): every full block is listed in the
 * prefix cache by its hash as it fills. Off: a full block holding generated tokens is registered
 * unlisted (emu/blocks.h: it counts as cached, its reuse as an eviction, but it is not hashed or
 * put in the cache map) and is listed only when its request is preempted, since the request's
 * recomputation looks up its own blocks; a finished request's generated blocks stay unlisted. When
 * no prompt carries generated tokens, nothing looks such a block up but its own request, so every
 * result is the same either way (tests/unit/test_emu_skip.c); off saves hashing each generated
 * token and the cache map's work for its blocks. The virtual-time driver (emu/sim.h) turns it off
 * for a run without dependent items (sessions, agent graphs). */
void st_emu_set_output_prompts(st_emu_engine *e, int on);

typedef enum st_emu_finish { ST_EMU_NOT_FINISHED = 0, ST_EMU_FINISH_LENGTH, ST_EMU_FINISH_STOP } st_emu_finish;

/* One request's output in a step. */
typedef struct st_emu_event {
    uint64_t id;
    void *user;
    uint32_t n_tokens;    /* tokens in this event: 1, or 1 + the accepted draft tokens with speculation (a burst);
                          token j's id is st_emu_output_token(id, n_out - n_tokens + j) (computed by whoever
                          needs the text: most drivers read only the counts and times) */
    uint32_t n_out;       /* output tokens so far, including this event's */
    uint8_t first;        /* first output token of the request */
    st_emu_finish finish; /* set on the last token */
    uint32_t prompt_tokens, cached_tokens;       /* prompt length; prefix-cache hit (first admission) */
    st_ns arrival, first_scheduled, first_token; /* engine times (first_token: this step's end if first) */
    st_ns queued; /* engine time it reached the engine core's waiting queue: arrival plus the API server
                     model's queue, cost and fixed latency (vLLM's queued timestamp) */
    st_ns due;    /* engine time the client receives it: the step's end, later when the API-server model
                  (st_emu_tuning.fe_token_cpu_s) is behind with streaming */
} st_emu_event;

/* One sequence's part of a step (the terms the step time is computed from, per sequence). */
typedef struct st_emu_seq_work {
    uint64_t id;
    void *user;
    uint32_t new_tokens; /* tokens scheduled for it this step: a prefill chunk, or 1 decode */
    uint32_t context;    /* tokens already in its KV cache, read by this step's attention */
    uint8_t decode;      /* counted in the step's decode tokens */
    uint8_t sampled;     /* produces a token this step (an lm_head row) */
} st_emu_seq_work;

typedef struct st_emu_step_result {
    st_ns start, duration; /* the tokens are due at start + duration */
    st_ns due_base;        /* the API server's start on this step's events (the step's end, later when it is
                              behind): event i is due at due_base plus its place on the server's queue */
    uint32_t tokens, decode_tokens, prefill_tokens, seqs;
    st_emu_event *events; /* owned by the engine, valid until the next st_emu_step */
    uint32_t n_events;
    uint64_t *admitted; /* ids moved waiting -> running this step, in order */
    uint32_t n_admitted;
    uint64_t *preempted; /* ids preempted this step, in order */
    uint32_t n_preempted;
    double compute_s, memory_s; /* roofline parts of the duration */
    st_emu_seq_work *work;      /* the step's sequences (seqs of them), owned by the engine like events */
} st_emu_step_result;

/* Runs one step. 0 when a step ran; 1 when there is nothing to schedule (idle, or every
 * waiting request still in the API server: see st_emu_next_ready; res->duration = 0); -1 on
 * internal error (out of memory); -2 when the waiting head needs more KV blocks than the whole
 * pool (the memory plan refuses such a max_model_len, so only a broken plan gets here). */
int st_emu_step(st_emu_engine *e, st_emu_step_result *res);

/* One sequence of a run of steps (st_emu_skip_steps). */
typedef struct st_emu_skip_seq {
    uint64_t id;
    void *user;
    uint32_t n_out;         /* output tokens before the run: its token of step j is number n_out + j - from + 1 */
    uint32_t from;          /* the run's step of its first token in the run: 0, or the step that admitted it (its
                             prefill's token); steps when it has none (a chunked prefill admitted by the last step) */
    uint8_t first;          /* its token of step `from` is its first (a request the run admitted) */
    uint32_t cached_tokens; /* with first: its prefix-cache hit (st_emu_event.cached_tokens) */
    st_ns first_due;        /* with first: when its first token reaches its client (engine time) */
    st_ns due_off;          /* its token of step j is due at due[j] + due_off (the API-server queue's order) */
    st_emu_finish finish;   /* set when its last token was in the run's last step (it left the engine) */
} st_emu_skip_seq;

/* A run of steps taken at once: what `steps` calls of st_emu_step would have done. */
typedef struct st_emu_skip_result {
    uint32_t steps;             /* steps taken (>= 1 when st_emu_skip_steps returns 0) */
    uint32_t seqs;              /* sequences in the run (decodes, and those admitted), in st_emu_step's event order */
    const st_emu_skip_seq *seq; /* seqs of them */
    const st_ns *start;         /* steps + 1 engine times: each step's start, then the last step's end */
    const st_ns *due;           /* steps: when each step's first token reaches its client */
    uint32_t running_peak;      /* the most running requests, and the highest KV usage, st_emu_get_stats */
    double kv_usage_peak;       /* gives after any step of the run */
    uint32_t waiting_peak;      /* the most waiting requests after any step of the run */
} st_emu_skip_result;

/* Takes the run of steps that starts now (clock.now()) in one call, when the next step is a pure
 * decode step but for admissions: every running request decodes one token, none is held. A waiting
 * request a step admits (as st_emu_step would) is prefilled in that step and decodes from the next
 * one on; a chunked prefill (its prompt over the step's token budget) ends the run with its step. The
 * run ends with the first step in which a request finishes (it leaves the engine as in st_emu_step),
 * or before a step that would differ: a block allocation that would fail (a preemption), a step
 * starting at or after `horizon` (engine time: the caller's next event, an arrival, a tick). The
 * engine's state, counters and clock-independent results are those of the same steps run one by
 * one with st_emu_step (docs/engine-model.md, "Step skipping"); the caller advances its clock to
 * res->start[res->steps]. Arrays are owned by the engine, valid until the next call. 0 when
 * steps ran; 1 when none could (res->steps = 0: run st_emu_step); -1 out of memory. */
int st_emu_skip_steps(st_emu_engine *e, st_ns horizon, st_emu_skip_result *res);

/* A driver that follows a run of steps as it goes: the run then goes on past requests' last tokens
 * and past the driver's own events, and ends only at `horizon` (or for the other reasons above). */
typedef struct st_emu_skip_hooks {
    /* Called before a step that starts at or after `next` (engine time; INT64_MAX: never) with the
     * step's start t, as if the run had ended before it: the driver adds the requests due by t
     * (st_emu_add_request, the only engine call allowed here) and returns its next event time. */
    st_ns (*due)(void *arg, st_ns t);
    /* Called after the step in which a request's last token was (it has left the engine): its entry
     * (finish set), its tokens in the run (from `from` on), and when its last token reaches its client.
     * Makes no engine call. Returns the driver's next event time. */
    st_ns (*finished)(void *arg, const st_emu_skip_seq *sq, uint32_t tokens, st_ns due);
    void *arg;
    st_ns next;
} st_emu_skip_hooks;
/* st_emu_skip_steps with hooks (NULL: the same). The result's entries with finish set were given to
 * hooks->finished; the others are the requests still running. Its peaks are those after every step. */
int st_emu_skip_steps_hooked(st_emu_engine *e, st_ns horizon, st_emu_skip_hooks *hooks, st_emu_skip_result *res);
int st_emu_has_work(const st_emu_engine *e);
/* When the next step can schedule something: now when requests are running, the time the
 * oldest waiting request leaves the API server model (st_emu_tuning.fe_*) when none is, -1
 * with no work. A driver whose st_emu_step returned 1 with work left waits until then. */
st_ns st_emu_next_ready(const st_emu_engine *e);

/* Deterministic output token: the n-th output token of request id (shared with the server's
 * detokenizer so texts are reproducible). */
uint32_t st_emu_output_token(uint64_t id, uint32_t n, uint32_t vocab);
/* out[k] = st_emu_output_token(id, from + k, vocab) for k < n, the same values without a division
 * per token (the unique prompt ids the virtual-time drivers give an item without ids of its own). */
void st_emu_output_tokens(uint64_t id, uint32_t from, uint32_t n, uint32_t vocab, uint32_t *out);

/* State for metrics. Counters are cumulative since start. */
typedef struct st_emu_stats {
    uint32_t running, waiting;
    double kv_usage; /* 1 - free blocks / blocks (a fraction) */
    uint32_t num_blocks, free_blocks;
    uint64_t preemptions;
    uint64_t prefix_queries, prefix_hits; /* tokens */
    uint64_t prompt_tokens, generation_tokens;
    uint64_t finished_length, finished_stop, finished_abort;
    uint64_t steps;
    uint64_t steps_skipped; /* of steps, those taken in runs by st_emu_skip_steps */
    uint64_t evictions;
    /* speculative decoding (vLLM's spec_decode counters) */
    uint64_t spec_drafts, spec_draft_tokens, spec_accepted;
    uint64_t spec_accepted_pos[ST_EMU_SPEC_MAX_K];
} st_emu_stats;
void st_emu_get_stats(const st_emu_engine *e, st_emu_stats *s);

/* vLLM's /reset_prefix_cache: 0, or -1 while blocks are in use. */
int st_emu_reset_prefix_cache(st_emu_engine *e);
/* Consistency check of blocks vs requests (tests): no leak, no double reference. */
int st_emu_engine_check(const st_emu_engine *e, char *err, size_t errlen);

#endif
