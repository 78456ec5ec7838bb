/* servetune trace stats FILE: what a trace or a production log says about the traffic, and
 * the serving advice it implies (docs/trace-format.md). Also the trace options that bench
 * shares (st_cli_trace_opts). */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/traffic.h"
#include "cli/agents.h"
#include "cli/cli.h"
#include "core/file.h"
#include "core/opts.h"
#include "core/parse.h"
#include "emu/config.h"
#include "emu/flags.h"
#include "emu/specstep.h"
#include "engine/gguf.h"
#include "engine/spmtok.h"
#include "load/spec_trace.h"
#include "load/tokenize.h"
#include "load/trace_stats.h"

/* The traffic JSON written with --json. */
#define TRACE_JSON_MAX ((size_t)1 << 20)

void st_cli_trace_opts(st_cli_trace *t, st_opt *opts, int *n)
{
    const st_opt add[ST_CLI_TRACE_OPTS] = {
        { "trace-format", 0, ST_OPT_STR, &t->format, "F",
          "auto|servetune|mooncake|azure|burstgpt|litellm|csv (default auto: from the content)", 0, 0, 0 },
        { "trace-window", 0, ST_OPT_STR, &t->window, "FROM:TO",
          "keep requests from FROM to TO after the trace's first one (durations: 3600, 90m, 2h; TO may be empty)", 0, 0,
          0 },
        { "trace-model", 0, ST_OPT_STR, &t->model, "NAME", "keep only this model's requests", 0, 0, 0 },
        { "trace-sample", 0, ST_OPT_DOUBLE, &t->sample, "F", "keep this fraction of requests (whole sessions)", 1e-9, 1,
          0 },
        { "trace-block-size", 0, ST_OPT_LONG, &t->block_size, "N", "tokens per Mooncake hash id (default 512)", 1,
          1048576, 0 },
        { "trace-max-bad", 0, ST_OPT_LONG, &t->max_bad, "N",
          "skip and count up to N malformed rows (default 0: the first is an error)", 0, 1e9, 0 },
        { "trace-columns", 0, ST_OPT_STR, &t->columns, "MAP",
          "plain CSV: field=Column,... (fields timestamp, input_tokens, output_tokens, model, session_id, turn, "
          "status, end_time, timestamp_ms, ignore)",
          0, 0, 0 },
    };
    for (int i = 0; i < ST_CLI_TRACE_OPTS; i++)
        opts[(*n)++] = add[i];
}

int st_cli_trace_resolve(st_cli_trace *t, uint64_t seed, st_trace_opts *o, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    if (t->format && st_trace_format_from_name(t->format, &o->format) < 0) {
        snprintf(err, errlen, "--trace-format: expected auto, servetune, mooncake, azure, burstgpt, litellm or csv");
        return -1;
    }
    if (t->window) {
        const char *colon = strchr(t->window, ':');
        char a[64] = "", b[64] = "";
        if (!colon || (size_t)(colon - t->window) >= sizeof a || strlen(colon + 1) >= sizeof b) {
            snprintf(err, errlen, "--trace-window: expected FROM:TO (e.g. 3600:7200, 1m:, :90m)");
            return -1;
        }
        memcpy(a, t->window, (size_t)(colon - t->window));
        snprintf(b, sizeof b, "%s", colon + 1);
        const char *bad = a[0] && st_parse_duration_s(a, &o->window_from_s) < 0 ? a
                          : b[0] && st_parse_duration_s(b, &o->window_to_s) < 0 ? b
                                                                                : NULL;
        if (bad) {
            snprintf(err, errlen, "--trace-window: '%s' is not a duration (seconds, or with a unit: 500ms, 90m, 2h)",
                     bad);
            return -1;
        }
        if (b[0] && o->window_to_s <= o->window_from_s) {
            snprintf(err, errlen, "--trace-window: expected FROM:TO with FROM < TO, got '%s'", t->window);
            return -1;
        }
    }
    o->model = t->model;
    o->sample = t->sample;
    o->seed = seed;
    o->block_size = (uint32_t)t->block_size;
    o->max_bad = (uint32_t)t->max_bad;
    o->max_context = (uint32_t)t->max_context;
    if (t->columns) {
        if (st_trace_colmap_parse(t->columns, &t->colmap, err, errlen) < 0)
            return -1;
        o->columns = &t->colmap;
    }
    return 0;
}

static void print_len(const char *what, const st_len_pct *p)
{
    printf("%-22s p50 %u, p90 %u, p95 %u, p99 %u, max %u (mean %.0f)\n", what, p->p50, p->p90, p->p95, p->p99, p->max,
           p->mean);
}

static void print_traffic(const char *path, st_trace_format fmt, const st_trace_counts *c, const st_traffic *t,
                          const st_traffic_advice *a)
{
    char d[600];
    st_trace_counts_describe(c, d, sizeof d);
    printf("%-22s %s (%s)\n", "Trace", path, st_trace_format_name(fmt));
    printf("%-22s %s\n", "Read", d);
    for (uint32_t i = 0; i < c->n_bad_first; i++)
        printf("%-22s %s\n", i ? "" : "Malformed rows", c->bad_first[i]);
    if (t->has_times) {
        printf("%-22s %llu over %.1f s\n", "Requests", (unsigned long long)t->requests, t->span_s);
        if (isnan(t->mean_rps))
            printf("%-22s unknown (%s)\n", "Rate", st_traffic_no_rate_reason(t->requests));
        else if (t->minutes)
            printf("%-22s mean %.3g req/s; over %u whole minute%s: p50 %.3g, p95 %.3g, peak %.3g req/s%s\n", "Rate",
                   t->mean_rps, t->minutes, t->minutes == 1 ? "" : "s", t->p50_minute_rps, t->p95_minute_rps,
                   t->peak_minute_rps, t->minutes_capped ? " (the first year only)" : "");
        else
            printf("%-22s mean %.3g req/s (shorter than a minute: no per-minute rates)\n", "Rate", t->mean_rps);
        if (!isnan(t->gap_cv) && (t->gap_cv < ST_TRACE_CONSTANT_CV || !isfinite(t->gamma_shape)))
            printf("%-22s CV of the gaps %.3g (evenly spaced; 1 = Poisson)\n", "Burstiness", t->gap_cv);
        else if (!isnan(t->gap_cv))
            printf("%-22s CV of the gaps %.3g (gamma shape %.3g; 1 = Poisson)\n", "Burstiness", t->gap_cv,
                   t->gamma_shape);
        else
            printf("%-22s unknown (%s)\n", "Burstiness",
                   t->out_of_order ? "the rows are not in time order" : "too few requests");
    } else {
        printf("%-22s %llu (no timestamps)\n", "Requests", (unsigned long long)t->requests);
    }
    print_len("Input tokens", &t->in);
    print_len("Output tokens", &t->out);
    print_len("Input + output", &t->total);
    if (t->prefix_known)
        printf("%-22s %.1f%% of prompt tokens in shared prefixes; an ideal prefix cache would serve %.1f%%%s\n",
               "Prefix sharing", 100 * t->shared_share, 100 * t->ideal_hit_rate,
               t->prefix_lower_bound ? " (lower bounds: too many distinct blocks to track)" : "");
    else
        printf("%-22s not recorded in this trace\n", "Prefix sharing");
    if (t->sessions)
        printf("%-22s %llu sessions, %.2f turns each on average (max %u); %llu requests are later turns\n", "Sessions",
               (unsigned long long)t->sessions, t->turns_mean, t->turns_max, (unsigned long long)t->later_turns);
    printf("\nAdvice\n");
    for (int i = 0; i < a->n_lines; i++)
        printf("  - %s\n", a->lines[i]);
}

/* The vocabulary files llama.cpp ships are under 8 MB. */
#define VOCAB_FILE_MAX ((size_t)64 << 20)

static int64_t spm_tokenize(void *arg, const char *text, size_t len, uint32_t **ids, size_t *cap, char *err,
                            size_t errlen)
{
    return st_spmtok_encode(arg, text, len, ids, cap, err, errlen);
}

static void print_acc_row(const char *name, const st_ngram_acc *a)
{
    st_ngram_figures f;
    st_ngram_figures_of(a, &f);
    char pos[400] = "";
    size_t w = 0;
    for (uint32_t i = 0; i < f.n_pos && w + 16 < sizeof pos; i++)
        w += (size_t)snprintf(pos + w, sizeof pos - w, "%s%.0f%%", i ? " " : "", 100 * f.pos_rate[i]);
    if (!a->drafts)
        printf("  %-20s %8llu  no draft in %llu steps (%.1f%% without a proposal)\n", name,
               (unsigned long long)a->requests, (unsigned long long)a->steps, 100 * f.no_proposal_share);
    else
        printf("  %-20s %8llu  %9.1f%%  %9.2f  %10.1f%%  %9.2f  %s\n", name, (unsigned long long)a->requests,
               100 * f.acceptance_rate, f.mean_accept_len, 100 * f.no_proposal_share, f.tokens_per_step, pos);
}

/* The engine model of `vllm serve MODEL --gpu GPU [flags]` (as st_traffic_engine_model reads it). */
static int spec_engine_config(int argc, char **argv, const char *gpu, st_emu_config *cfg, st_emu_memory *mem, char *err,
                              size_t errlen)
{
    if (st_emu_config_of_argv(argc, argv, gpu, cfg, NULL, err, errlen))
        return -1;
    return st_emu_memory_plan(cfg, mem, err, errlen) < 0 ? -1 : 0;
}

/* What the engine model makes of each acceptance: TPOT without and with speculation at a few
 * batch sizes, and the batch from which it stops paying (emu/specstep.h). */
static void print_spec_engine(const st_spec_stats *s, const st_emu_config *cfg, const st_emu_memory *mem,
                              const char *what)
{
    const st_spec_counts *c = st_spec_stats_counts(s);
    if (!c->replayed)
        return;
    uint32_t ctx = (uint32_t)((c->prompt_tokens + c->completion_tokens / 2) / c->replayed);
    printf("\nThe engine model (%s), decoding at the log's mean context of %u tokens; n-gram lookup's own "
           "CPU time not counted:\n",
           what, ctx);
    static const uint32_t batches[] = { 1, 8, 32, 128, 512 };
    /* the batch the KV cache holds at that context, and the scheduler allows */
    uint64_t fit = ctx ? mem->kv_tokens / ctx : mem->max_num_seqs;
    uint32_t max_seqs = fit < mem->max_num_seqs ? (uint32_t)(fit ? fit : 1) : mem->max_num_seqs;
    for (int i = 0; i < st_spec_stats_n_params(s); i++) {
        const st_ngram_acc *a = st_spec_stats_total(s, i);
        char name[80];
        st_ngram_params_name(st_spec_stats_params(s, i), name, sizeof name);
        if (!a->drafts || !a->steps) {
            printf("  %-20s no draft: nothing to gain\n", name);
            continue;
        }
        st_emu_spec_accept acc = { (double)a->drafts / (double)a->steps, (double)a->draft_tokens / (double)a->drafts,
                                   (double)a->accepted / (double)a->drafts };
        printf("  %-20s TPOT", name);
        for (size_t b = 0; b < sizeof batches / sizeof *batches; b++) {
            st_emu_spec_point p;
            if (batches[b] > max_seqs || st_emu_spec_point_at(cfg, batches[b], ctx, &acc, 0, &p))
                continue;
            printf("%s batch %u: %.2f -> %.2f ms (%+.0f%%)", b ? ";" : "", batches[b], 1e3 * p.tpot_plain_s,
                   1e3 * p.tpot_spec_s, 100 * (p.ratio - 1));
        }
        uint32_t be = st_emu_spec_breakeven(cfg, max_seqs, ctx, &acc, 0);
        if (be)
            printf("\n  %-20s stops paying from a batch of %u sequences (verification compute binds)\n", "", be);
        else
            printf("\n  %-20s pays at every batch the KV cache holds at this context (up to %u sequences)\n", "",
                   max_seqs);
    }
}

static void print_spec(const st_spec_stats *s, const char *tokens_from)
{
    const st_spec_counts *c = st_spec_stats_counts(s);
    printf("\nSpeculative decoding: vLLM's n-gram proposer replayed at temperature 0 (docs/speculative.md)\n");
    printf("%-22s %llu of %llu requests replayed (%llu prompt, %llu completion tokens); ids: %llu from the log, "
           "%llu from text by %s\n",
           "Read", (unsigned long long)c->replayed, (unsigned long long)c->lines, (unsigned long long)c->prompt_tokens,
           (unsigned long long)c->completion_tokens, (unsigned long long)c->from_ids, (unsigned long long)c->from_text,
           tokens_from ? tokens_from : "no tokenizer");
    uint64_t skipped = c->malformed + c->no_prompt + c->no_completion + c->no_tokenizer + c->untokenized + c->too_long;
    if (skipped) {
        printf("%-22s %llu: %llu without a completion, %llu without a prompt, %llu text without a tokenizer, %llu "
               "not tokenized, %llu malformed, %llu too long\n",
               "Not replayed", (unsigned long long)skipped, (unsigned long long)c->no_completion,
               (unsigned long long)c->no_prompt, (unsigned long long)c->no_tokenizer,
               (unsigned long long)c->untokenized, (unsigned long long)c->malformed, (unsigned long long)c->too_long);
        for (uint32_t i = 0; i < c->n_bad_first; i++)
            printf("%-22s %s\n", "", c->bad_first[i]);
    }
    if (!c->replayed)
        return;
    printf("  %-20s %8s  %10s  %9s  %11s  %9s  %s\n", "ngram:K,MIN,MAX", "requests", "acceptance", "mean len",
           "no proposal", "tok/step", "acceptance per position");
    int nc = st_spec_stats_n_categories(s);
    for (int i = 0; i < st_spec_stats_n_params(s); i++) {
        char name[80];
        st_ngram_params_name(st_spec_stats_params(s, i), name, sizeof name);
        print_acc_row(name, st_spec_stats_total(s, i));
        /* one category holding every request says nothing more */
        for (int k = 0; k < nc && !(nc == 1 && st_spec_stats_by_category(s, i, 0)->requests ==
                                                   st_spec_stats_total(s, i)->requests);
             k++) {
            char cn[100];
            snprintf(cn, sizeof cn, "  %s", st_spec_stats_category(s, k));
            print_acc_row(cn, st_spec_stats_by_category(s, i, k));
        }
    }
    printf("  (acceptance = accepted / draft tokens; mean len = 1 + accepted / drafts, vLLM's mean acceptance\n"
           "   length; tok/step = completion tokens per decode step, the most speculation can save)\n");
}

/* A log written as one JSON array (LiteLLM's spend logs exported, a ShareGPT file): each element
 * is read as a line (its number: its position from 1). 0, or -1 with err. */
static int spec_read_array(FILE *f, const char *path, st_spec_stats *s, char *err, size_t errlen)
{
    json_error_t je;
    json_t *root = json_loadf(f, 0, &je);
    if (!root) {
        snprintf(err, errlen, "%s:%d: not a JSON array: %s", path, je.line, je.text);
        return -1;
    }
    int rc = 0;
    size_t i;
    json_t *el;
    json_array_foreach(root, i, el)
    {
        char *text = json_dumps(el, JSON_COMPACT | JSON_ENCODE_ANY);
        if (!text || st_spec_stats_add_line(s, text, strlen(text), (uint64_t)i + 1)) {
            free(text);
            snprintf(err, errlen, "out of memory");
            rc = -1;
            break;
        }
        free(text);
    }
    json_decref(root);
    return rc;
}

/* Reads path line by line into s (or, when it is one JSON array, element by element). 0, or -1
 * with err. */
int st_cli_spec_read(const char *path, st_spec_stats *s, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    int c;
    while ((c = getc(f)) != EOF && (c == ' ' || c == '\t' || c == '\n' || c == '\r'))
        ;
    if (c == '[') {
        rewind(f);
        int arc = spec_read_array(f, path, s, err, errlen);
        fclose(f);
        return arc;
    }
    rewind(f);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    uint64_t no = 0;
    int rc = 0;
    while ((n = getline(&line, &cap, f)) >= 0) {
        no++;
        if ((size_t)n > ST_SPEC_LINE_MAX) {
            snprintf(err, errlen, "%s:%llu: a line of %zd bytes (at most %zu)", path, (unsigned long long)no, n,
                     ST_SPEC_LINE_MAX);
            rc = -1;
            break;
        }
        if (st_spec_stats_add_line(s, line, (size_t)n, no)) {
            snprintf(err, errlen, "out of memory");
            rc = -1;
            break;
        }
    }
    if (!rc && ferror(f)) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        rc = -1;
    }
    free(line);
    fclose(f);
    return rc;
}

/* One `trace stats` command: its options, and what it opens (freed by stats_free). */
typedef struct stats_cmd {
    st_cli_trace T;
    const char *json_path, *model, *gpu, *vocab, *tok_url, *tok_api;
    st_strlist specs;
    long kv_tokens, max_model_len, seed;
    st_opts_result pr;
    char err[1024];
    st_trace_stats *ts;
    st_spec_stats *ss;
    st_spmtok *tok;
    st_tokenizer *etok;
    char tokens_from[1200];
    st_emu_config ecfg;
    st_emu_memory emem;
    int have_ecfg;
    st_traffic_engine e;
    char what[300];
} stats_cmd;

/* The options of `trace stats` into opts (room for 32), their count in *n. */
static void stats_options(stats_cmd *x, st_opt *opts, int *n)
{
    st_cli_trace_opts(&x->T, opts, n);
    const st_opt more[] = {
        { "trace-max-context", 0, ST_OPT_LONG, &x->T.max_context, "N",
          "skip and count requests whose prompt + output exceed N tokens", 1, 1e9, 0 },
        { "seed", 0, ST_OPT_LONG, &x->seed, "N", "seed of --trace-sample (default 0)", 0, 9.2e18, 0 },
        { "json", 0, ST_OPT_STR, &x->json_path, "FILE",
          "write the figures and the advice as JSON (FILE.tmp, then renamed; a FIFO, device or symlink at FILE is "
          "refused)",
          0, 0, 0 },
        { "kv-tokens", 0, ST_OPT_LONG, &x->kv_tokens, "N", "the KV cache size in tokens, for the advice", 1, 1e12, 0 },
        { "max-model-len", 0, ST_OPT_LONG, &x->max_model_len, "N", "the current context limit, for the advice", 1, 1e9,
          0 },
        { "model", 0, ST_OPT_STR, &x->model, "MODEL",
          "with --gpu: the KV cache from the engine model of `vllm serve MODEL` (other vLLM flags pass through)", 0, 0,
          0 },
        { "gpu", 0, ST_OPT_STR, &x->gpu, "NAME", "the GPU of --model (H100, A100, ...)", 0, 0, 0 },
        { "spec", 0, ST_OPT_LIST, &x->specs, "ngram:K[,MIN,MAX]",
          "offline acceptance of vLLM's n-gram speculation on the logged text (K: a number, K1/K2/..., or LO..HI; "
          "repeatable; MIN = MAX = 5 by default; the log: JSON lines, or one JSON array)",
          0, 0, 0 },
        { "tokenize", 0, ST_OPT_STR, &x->tok_url, "URL",
          "with --spec: token ids from this running engine's /tokenize (vLLM, SGLang, llama.cpp, the emulator)", 0, 0,
          0 },
        { "tokenize-api", 0, ST_OPT_STR, &x->tok_api, "API",
          "the API of --tokenize's server: completions (default), chat, llamacpp, sglang", 0, 0, 0 },
        { "vocab", 0, ST_OPT_STR, &x->vocab, "FILE.gguf",
          "with --spec: tokenize the text with this GGUF vocabulary (SentencePiece, e.g. llama.cpp's "
          "ggml-vocab-llama-spm.gguf)",
          0, 0, 0 },
        { 0 },
    };
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++)
        opts[(*n)++] = more[i];
}

/* `trace stats --help`. */
static void stats_help(const st_opt *opts)
{
    printf("usage: servetune trace stats FILE [OPTIONS] [--model MODEL --gpu GPU [vLLM flags]]\n\n"
           "What a trace or a production log says about the traffic: request rate over time (mean,\n"
           "p95 of the per-minute rates, peak, burstiness), input/output length percentiles, prefix\n"
           "sharing and the hit rate an ideal prefix cache would get, sessions, and the advice that\n"
           "follows (--max-model-len, the KV cache, prefix caching). Formats: servetune JSONL,\n"
           "Mooncake, Azure, BurstGPT, LiteLLM spend logs, CSV (docs/trace-format.md). FILE '-' is\n"
           "stdin. The file streams: memory stays bounded whatever its size. A gzip file (.jsonl.gz)\n"
           "is read as it is, other compressed files are named (zstd-compressed: decompress it first);\n"
           "a UTF-8 byte-order mark is skipped; a device is refused and a FIFO read with lines of at\n"
           "most 4 MiB, reported as soon as one is longer. SIGINT/SIGTERM stop the reading at once\n"
           "(exit 4, nothing printed or written). An agent trace (WEKA-style agentic trace, task-graph\n"
           "JSONL) gets its shape instead: fan-out widths, joins, depth, shared blocks and the ideal\n"
           "prefix-cache hit rate (docs/trace-format.md, \"Agent traces\").\n\n"
           "Examples:\n"
           "  servetune trace stats mooncake_trace.jsonl\n"
           "  servetune trace stats spend_logs.json --trace-model qwen3-8b --model Qwen/Qwen3-8B --gpu H100\n"
           "  servetune trace stats chats.jsonl --spec ngram:2 --spec ngram:4 --spec ngram:4,2,5 \\\n"
           "      --vocab ggml-vocab-llama-spm.gguf\n"
           "  servetune trace stats chats.jsonl --spec ngram:1..8 --tokenize http://127.0.0.1:8000\n\n"
           "--spec replays vLLM's n-gram proposer over each logged prompt + completion (token ids from\n"
           "the log, or the text tokenized with --vocab or the engine's --tokenize): acceptance rate,\n"
           "mean acceptance length, per position, and the share of steps without a proposal, exact at\n"
           "temperature 0. Lines with prompt text or messages and the completion (servetune JSONL with\n"
           "\"completion\", OpenAI request/response logs, ShareGPT conversations); lines without them\n"
           "are counted and named. With --model/--gpu, the engine model's TPOT with and without it\n"
           "(docs/speculative.md).\n\n"
           "Options:\n");
    st_opts_usage(stdout, opts);
}

/* The options that go together, and the trace options resolved into o. 0, or the exit status. */
static int stats_check(stats_cmd *x, st_trace_opts *o)
{
    if (x->pr.nunknown && !x->model) {
        char m[200];
        snprintf(m, sizeof m, "unknown option %.100s", x->pr.unknown[0]);
        return st_cli_usage_error("trace stats", m);
    }
    if ((x->model != NULL) != (x->gpu != NULL))
        return st_cli_usage_error("trace stats", "--model and --gpu go together");
    if (st_cli_trace_resolve(&x->T, (uint64_t)x->seed, o, x->err, sizeof x->err) < 0)
        return st_cli_usage_error("trace stats", x->err);
    if ((x->vocab || x->tok_url) && !x->specs.n)
        return st_cli_usage_error("trace stats", x->vocab ? "--vocab goes with --spec" : "--tokenize goes with --spec");
    if (x->vocab && x->tok_url)
        return st_cli_usage_error("trace stats", "--vocab or --tokenize, not both");
    return ST_EXIT_OK;
}

/* --vocab: the SentencePiece tokenizer of a GGUF vocabulary. 0, or the exit status. */
static int stats_vocab(stats_cmd *x)
{
    size_t vlen = 0;
    char *vb = st_read_file(x->vocab, VOCAB_FILE_MAX, &vlen, x->err, sizeof x->err);
    st_gguf g;
    if (!vb || st_gguf_parse(vb, vlen, vlen, &g, x->err, sizeof x->err)) {
        fprintf(stderr, "servetune trace stats: --vocab %s: %s\n", x->vocab, x->err);
        free(vb);
        return ST_EXIT_USAGE;
    }
    x->tok = st_spmtok_from_gguf(&g, x->err, sizeof x->err);
    st_gguf_free(&g);
    free(vb);
    if (!x->tok) {
        fprintf(stderr, "servetune trace stats: --vocab %s: %s\n", x->vocab, x->err);
        return ST_EXIT_USAGE;
    }
    const char *base = strrchr(x->vocab, '/');
    snprintf(x->tokens_from, sizeof x->tokens_from,
             "%s (SentencePiece as llama.cpp, %u tokens; no BOS, no chat "
             "template)",
             base ? base + 1 : x->vocab, st_spmtok_vocab_size(x->tok));
    return ST_EXIT_OK;
}

/* --tokenize: a running engine's /tokenize. 0, or the exit status. */
static int stats_tokenizer(stats_cmd *x)
{
    st_api_kind ak;
    if (st_api_from_name(x->tok_api, &ak) || ak == ST_API_TGI)
        return st_cli_usage_error("trace stats", "--tokenize-api: completions, chat, llamacpp or sglang");
    x->etok = st_tokenizer_new(x->tok_url, ak, NULL, NULL, 0, NULL, 30, x->err, sizeof x->err);
    if (!x->etok) {
        fprintf(stderr, "servetune trace stats: --tokenize %s: %s\n", x->tok_url, x->err);
        return ST_EXIT_USAGE;
    }
    snprintf(x->tokens_from, sizeof x->tokens_from,
             "%s/tokenize (the engine's tokenizer; no special tokens, no "
             "chat template)",
             x->tok_url);
    return ST_EXIT_OK;
}

/* --spec: the n-gram parameters, the tokenizer, and the log's speculation replayed. 0, or the
 * exit status. */
static int stats_spec(stats_cmd *x, const char *path)
{
    st_ngram_params sp[ST_SPEC_PARAMS_MAX];
    int nsp = 0, status;
    for (int i = 0; i < x->specs.n; i++) {
        int got = st_ngram_params_parse_list(x->specs.v[i], sp + nsp, ST_SPEC_PARAMS_MAX - nsp, x->err, sizeof x->err);
        if (got < 0) {
            char m[1100];
            snprintf(m, sizeof m, "--spec %s", x->err);
            return st_cli_usage_error("trace stats", m);
        }
        nsp += got;
    }
    if (!strcmp(path, "-"))
        return st_cli_usage_error("trace stats", "--spec reads the file twice: give a file, not stdin");
    if (x->vocab && (status = stats_vocab(x)) != ST_EXIT_OK)
        return status;
    if (x->tok_url && (status = stats_tokenizer(x)) != ST_EXIT_OK)
        return status;
    x->ss = st_spec_stats_new(sp, nsp,
                              x->tok    ? spm_tokenize
                              : x->etok ? st_tokenizer_ids
                                        : NULL,
                              x->tok ? (void *)x->tok : x->etok, x->err, sizeof x->err);
    if (!x->ss || st_cli_spec_read(path, x->ss, x->err, sizeof x->err)) {
        fprintf(stderr, "servetune trace stats: %s\n", x->err);
        return x->ss ? ST_EXIT_USAGE : ST_EXIT_FAIL;
    }
    return ST_EXIT_OK;
}

/* --model/--gpu: the engine model's KV cache and context limit for the advice (and its config for
 * the speculation's TPOT); --kv-tokens and --max-model-len over them. 0, or the exit status. */
static int stats_engine(stats_cmd *x)
{
    memset(&x->e, 0, sizeof x->e);
    if (x->model) {
        char **av = calloc((size_t)x->pr.nunknown + 5, sizeof *av);
        int ac = 0;
        if (!av)
            return ST_EXIT_FAIL;
        av[ac++] = "serve";
        av[ac++] = (char *)x->model;
        av[ac++] = "--gpu";
        av[ac++] = (char *)x->gpu;
        for (int i = 0; i < x->pr.nunknown; i++)
            av[ac++] = x->pr.unknown[i];
        int rc = st_traffic_engine_model(ac, av, x->gpu, &x->e, x->what, sizeof x->what, x->err, sizeof x->err);
        if (rc == 0 && x->ss)
            x->have_ecfg = spec_engine_config(ac, av, x->gpu, &x->ecfg, &x->emem, x->err, sizeof x->err) == 0;
        free(av);
        if (rc < 0) {
            fprintf(stderr, "servetune trace stats: the engine model of %s on %s: %s\n", x->model, x->gpu, x->err);
            return ST_EXIT_USAGE;
        }
    }
    if (x->kv_tokens > 0)
        x->e.kv_tokens = (uint64_t)x->kv_tokens;
    if (x->max_model_len > 0)
        x->e.max_model_len = (uint32_t)x->max_model_len;
    return ST_EXIT_OK;
}

/* A log the traffic reader does not know, read with --spec: the speculation figures alone. The
 * exit status. */
static int stats_spec_only(stats_cmd *x, const char *path)
{
    const char *from = x->tokens_from[0] ? x->tokens_from : NULL;
    printf("%-22s %s\n%-22s not read: %s\n", "Trace", path, "Traffic", x->err);
    print_spec(x->ss, from);
    int status = st_spec_stats_counts(x->ss)->replayed ? ST_EXIT_OK : ST_EXIT_FAIL;
    if (x->json_path) {
        json_t *j = json_object();
        json_object_set_new(j, "traffic_error", json_string(x->err));
        json_object_set_new(j, "speculation", st_spec_stats_json(x->ss, from));
        char *js = json_dumps(j, JSON_INDENT(2));
        json_decref(j);
        if (!js || st_write_file_atomic(x->json_path, js, strlen(js), x->err, sizeof x->err) < 0) {
            fprintf(stderr, "servetune trace stats: cannot write %s\n", js ? x->err : x->json_path);
            status = ST_EXIT_FAIL;
        }
        free(js);
    }
    return status;
}

/* --json: the figures, the advice and the speculation. 0, or ST_EXIT_FAIL. */
static int stats_json(stats_cmd *x, const st_traffic *t, const st_traffic_advice *a, const st_trace_counts *c,
                      st_trace_format fmt, const char *path)
{
    json_t *j = st_traffic_json(t, a, c, fmt, path);
    if (j && x->ss)
        json_object_set_new(j, "speculation", st_spec_stats_json(x->ss, x->tokens_from[0] ? x->tokens_from : NULL));
    if (j && x->e.kv_tokens && x->what[0])
        json_object_set_new(json_object_get(j, "advice"), "engine", json_string(x->what));
    char *s = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
    json_decref(j);
    int status = ST_EXIT_OK;
    if (!s || st_mkdir_parents(x->json_path, x->err, sizeof x->err) ||
        st_write_file_atomic(x->json_path, s, strlen(s), x->err, sizeof x->err) < 0) {
        if (s)
            fprintf(stderr, "servetune trace stats: cannot write %s\n", x->err);
        else
            fprintf(stderr, "servetune trace stats: cannot write %s: out of memory\n", x->json_path);
        status = ST_EXIT_FAIL;
    }
    free(s);
    return status;
}

/* The trace read into the statistics, then the figures and the advice printed (and written with
 * --json). The exit status. */
static int stats_report(stats_cmd *x, const char *path, st_trace_opts *o)
{
    x->ts = st_trace_stats_new();
    st_trace_counts c;
    memset(&c, 0, sizeof c);
    st_trace_format fmt;
    o->stop = st_cli_catch_signals(NULL);
    int rc = x->ts ? st_trace_read_file(path, o, st_trace_stats_row_cb, x->ts, &c, &fmt, x->err, sizeof x->err) : -1;
    if (rc < 0 && c.interrupted) { /* nothing printed or written: the figures would be a part's */
        fprintf(stderr, "servetune trace stats: %s by %s: nothing written\n", x->err, st_cli_signal_name());
        return ST_EXIT_INTERRUPTED;
    }
    if (rc < 0 && x->ts && x->ss)
        return stats_spec_only(x, path);
    if (rc < 0) { /* a missing or malformed trace is bad input (docs/exit-codes.md) */
        fprintf(stderr, "servetune trace stats: %s\n", x->ts ? x->err : "out of memory");
        return x->ts ? ST_EXIT_USAGE : ST_EXIT_FAIL;
    }
    int status = ST_EXIT_OK;
    st_traffic t;
    st_trace_stats_result(x->ts, &t);
    st_traffic_advice a;
    st_traffic_advise(x->ts, &t, &x->e, &a);
    if (!t.requests) {
        char d[400];
        st_trace_counts_describe(&c, d, sizeof d);
        fprintf(stderr, "servetune trace stats: %s: no requests kept (%s)\n", path, d);
        status = ST_EXIT_FAIL;
    } else {
        print_traffic(path, fmt, &c, &t, &a);
    }
    if (x->ss) {
        print_spec(x->ss, x->tokens_from[0] ? x->tokens_from : NULL);
        if (x->have_ecfg)
            print_spec_engine(x->ss, &x->ecfg, &x->emem, x->what);
        if (!st_spec_stats_counts(x->ss)->replayed)
            status = ST_EXIT_FAIL;
    }
    if (x->json_path && stats_json(x, &t, &a, &c, fmt, path) != ST_EXIT_OK)
        status = ST_EXIT_FAIL;
    return status;
}

/* The parts of a `trace stats` command that were opened or parsed. */
static void stats_free(stats_cmd *x)
{
    st_trace_stats_free(x->ts);
    st_spec_stats_free(x->ss);
    st_spmtok_free(x->tok);
    st_tokenizer_free(x->etok);
    st_opts_result_free(&x->pr);
}

/* `trace stats` once its options are in x: parsed, checked, then the trace read and reported.
 * The exit status. */
static int stats_run(stats_cmd *x, st_opt *opts, int argc, char **argv)
{
    int parsed = st_cli_parse("trace stats", opts, argc, argv, 1, &x->pr, stats_help, x->err, sizeof x->err);
    if (parsed >= 0)
        return parsed;
    if (x->pr.npos != 1)
        return st_cli_usage_error("trace stats", "expected one trace FILE");
    const char *path = x->pr.pos[0];
    int refused = st_cli_refuse_input_as_output("trace stats", "--json", x->json_path, path, "the trace it reads");
    if (refused != ST_EXIT_OK)
        return refused;
    if (st_agent_detect_file(path) != ST_AGENT_FMT_NONE) /* agent task graphs: their shape (cli/agents.h) */
        return st_cli_agent_trace_stats(path, x->json_path);
    st_trace_opts o;
    int status = stats_check(x, &o);
    if (status == ST_EXIT_OK && x->specs.n)
        status = stats_spec(x, path);
    if (status == ST_EXIT_OK)
        status = stats_engine(x);
    return status == ST_EXIT_OK ? stats_report(x, path, &o) : status;
}

static int trace_stats(int argc, char **argv)
{
    stats_cmd x;
    memset(&x, 0, sizeof x);
    x.tok_api = "completions";
    st_opt opts[32];
    int n = 0;
    stats_options(&x, opts, &n);
    int status = stats_run(&x, opts, argc, argv);
    stats_free(&x);
    return status;
}

int cmd_trace(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        FILE *f = argc < 2 ? stderr : stdout;
        fprintf(f,
                "usage: servetune trace stats|cost FILE [OPTIONS]\n\n"
                "  stats   rates, lengths, prefix sharing, sessions and advice from a trace or a log\n"
                "  cost    the GPU cost apportioned to tenants (users, teams, features, ...), reconciled to a bill\n\n"
                "'servetune trace stats --help' and 'servetune trace cost --help' list the options.\n");
        return argc < 2 ? ST_EXIT_USAGE : ST_EXIT_OK;
    }
    if (!strcmp(argv[1], "stats"))
        return trace_stats(argc - 1, argv + 1);
    if (!strcmp(argv[1], "cost"))
        return st_cli_trace_cost(argc - 1, argv + 1);
    char m[160];
    snprintf(m, sizeof m, "unknown subcommand '%.60s' (expected stats or cost)", argv[1]);
    return st_cli_usage_error("trace", m);
}
