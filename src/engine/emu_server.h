/* servetune's vLLM-compatible emulator: an HTTP server (net/server.h) in front of the engine
 * model (emu/engine.h). Steps of the model run on the wall clock scaled by time_scale
 * (K emulated seconds per wall second); everything reported (metrics, ground truth) is in
 * emulated time. Endpoints, faults and the model: docs/emulator.md. */
#ifndef ST_ENGINE_EMU_SERVER_H
#define ST_ENGINE_EMU_SERVER_H
#include <stddef.h>
#include <stdint.h>

#include "core/log.h"
#include "emu/config.h"

typedef struct st_emu_server_opts {
    const char *host;              /* "127.0.0.1" when NULL (vLLM's default is 0.0.0.0) */
    double keep_alive_s;           /* idle keep-alive connections are closed after this (0: never) */
    double header_timeout_s;       /* a request must arrive within this of its first byte (0: no limit) */
    uint16_t port;                 /* 0: ephemeral (printed in the log) */
    const char *served_model_name; /* id in /v1/models and responses */
    const char *api_key;           /* NULL: no auth; never logged */
    double time_scale;             /* K > 0 */
    int no_model;                  /* step time 0: the server's own speed */
    const char *ground_truth;      /* JSONL path or NULL */
    uint64_t seed;
    /* Fault injection (tests of the audit only) */
    double fault_startup_delay_s;
    int fault_startup_fail;
    long fault_crash_after;      /* exit abruptly when request N+1 arrives (0: off) */
    long fault_hang_after;       /* stop responding when request N+1 arrives (0: off) */
    double fault_500_rate;       /* fraction of generation requests answered 500 */
    double fault_midstream_rate; /* fraction of streams that fail half-way */
    double fault_host_stall_s;   /* the process stalls this long (wall) before sending a step's tokens */
    int print_jitter;            /* print token emission jitter percentiles at exit */
    /* A reasoning model: the first floor(share x max_tokens) output tokens of each request are
     * reasoning (chat: delta.reasoning_content, message.reasoning_content; completions: text
     * inside <think> ... </think>). 0: none. */
    double reasoning_share;
    int prompt_tokens_details; /* --enable-prompt-tokens-details: usage reports cached_tokens */
} st_emu_server_opts;

/* Runs the server until SIGINT/SIGTERM. The engine config must be resolved
 * (st_emu_memory_plan ok). Returns 0 on a clean stop, -1 with err on a startup failure. */
int st_emu_server_run(const st_emu_config *cfg, const st_emu_server_opts *o, const st_log *log, char *err,
                      size_t errlen);

#endif
