/* vLLM's `serve` command line as the engine model understands it: one parser shared by the
 * HTTP emulator (`servetune emulate serve`) and `servetune predict`, so that a flag means the
 * same to both and a bad flag is refused with the same message.
 *
 * Use: st_emu_args_defaults(&a); st_emu_args_table(&a, opts) gives the st_opt table (core/opts.h)
 * whose targets live in a; st_emu_args_parse() parses argv ("serve" MODEL FLAGS...) with it;
 * st_emu_args_config() turns the parsed values into an st_emu_config (GPU and model looked up in
 * the catalog or read from a file). No output: every refusal is returned as text. */
#ifndef ST_EMU_FLAGS_H
#define ST_EMU_FLAGS_H
#include <stddef.h>

#include "core/opts.h"
#include "emu/config.h"

typedef struct st_emu_args {
    /* server (the emulator's HTTP side; predict ignores them) */
    const char *host, *served, *api_key, *ground_truth;
    long port, seed, crash_after, hang_after;
    double time_scale, startup_delay, f500, fmid, reasoning_share, keep_alive_s, header_timeout_s, host_stall;
    int no_model, fail_start, jitter, quiet, prompt_details;
    /* engine */
    const char *model, *gpu, *kv_dtype, *quant, *dtype, *calibration, *vllm_version;
    long max_model_len, max_num_seqs, max_batched, tp, block_size;
    double util, slowdown;
    int prefix_on, prefix_off, eager, async_on, async_off;
    /* speculative decoding: vLLM's --speculative-config JSON; the emulator's acceptance inputs */
    const char *spec_config, *spec_acceptance;
    double spec_draft_share; /* -1: not given */
} st_emu_args;

#define ST_EMU_ARGS_TABLE_MAX 48

/* The highest --time-scale K. Timers, wake-ups and the load generator's schedule keep wall-clock
 * milliseconds; at K each of them is K engine milliseconds, so beyond 1000 one millisecond of host
 * jitter is more than an engine second: larger than the latencies an audit measures. */
#define ST_EMU_TIME_SCALE_MAX 1000.0

void st_emu_args_defaults(st_emu_args *a);
/* Fills opts (at least ST_EMU_ARGS_TABLE_MAX entries, terminated) with targets in a. */
void st_emu_args_table(st_emu_args *a, st_opt *opts);

/* 1 when flag (a word such as "--time-scale" or "--time-scale=5") is one of the emulator's own
 * flags that vLLM does not have (--gpu, --time-scale, --no-model, --ground-truth, --print-jitter,
 * --quiet, --spec-acceptance, --spec-draft-share, --fault-*): they are dropped from anything meant for a real vLLM. Such a flag takes
 * a value unless it is one of the switches (st_emu_flag_takes_value). */
int st_emu_flag_emulator_only(const char *flag);
int st_emu_flag_takes_value(const char *flag);

/* Outcome classes, as vLLM shows them. */
enum {
    ST_EMU_ARGS_OK = 0,
    ST_EMU_ARGS_USAGE = -1,   /* argparse-like refusal: "vllm serve: error: MSG", exit 2 */
    ST_EMU_ARGS_STARTUP = -2, /* fails at startup (model not found, quantization mismatch): exit 1 */
};

/* Parses argv[0..argc) (the words after `emulate`: "serve" MODEL FLAGS...; "-tp" is read as
 * --tensor-parallel-size) into a with the table opts. r receives the opts result (help,
 * unknown flags; free with st_opts_result_free even on failure). 0 or ST_EMU_ARGS_USAGE with
 * err (the message without the "vllm serve: error: " prefix). */
int st_emu_args_parse(st_emu_args *a, const st_opt *opts, int argc, char **argv, st_opts_result *r, char *err,
                      size_t errlen);

/* Speculative decoding from `--speculative-config JSON` (vLLM's SpeculativeConfig: method ngram,
 * draft_model, eagle, eagle3, medusa, mtp or a *_mtp type, or a draft "model" without a method;
 * num_speculative_tokens) into c->spec, with the acceptance from `--spec-acceptance A` (a per-token
 * rate) or `A1/A2/...` (by position: P(position i accepted | a draft), vLLM's accepted_per_pos / drafts)
 * and `--spec-draft-share F` (the share of steps with a draft; default 1, or 0 for ngram without an
 * acceptance: on random ids n-gram lookup finds nothing). Without an acceptance, 0: the draft tokens
 * cost and none is kept (what random-id prompts give). A draft model is looked up like the target
 * (catalog or config.json path); EAGLE / MTP drafters are one decoder layer of the target's shape.
 * c must hold the target (st_emu_config_init). 0, or ST_EMU_ARGS_USAGE / ST_EMU_ARGS_STARTUP. */
int st_emu_spec_of_args(const st_emu_args *a, st_emu_config *c, char *err, size_t errlen);

/* Validates a and builds the engine configuration (before the memory plan). a->gpu must be set
 * (the caller applies its fallback). 0, ST_EMU_ARGS_USAGE or ST_EMU_ARGS_STARTUP with vLLM's
 * message in err. */
int st_emu_args_config(const st_emu_args *a, st_emu_config *out, char *err, size_t errlen);

/* The engine configuration of `vllm serve` arguments (argv[0] the model, then flags), parsed
 * and validated as the emulator does, with gpu when the flags name none (neither: "no GPU given
 * (--gpu)"). *model (may be NULL) gets the model's name, a pointer into argv. 0 or -1 with err. */
int st_emu_config_of_argv(int argc, char **argv, const char *gpu, st_emu_config *out, const char **model, char *err,
                          size_t errlen);

#endif
