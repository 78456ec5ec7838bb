/* servetune trace stats FILE: what a trace or a production log says about the traffic, and
 * the serving advice it implies (docs/trace-format.md). Also the trace options that bench
 * shares (st_cli_trace_opts). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/traffic.h"
#include "cli/cli.h"
#include "core/file.h"
#include "core/opts.h"
#include "core/parse.h"
#include "load/trace_stats.h"

/* The traffic JSON written with --json. */
#define TRACE_JSON_MAX ((size_t)1 << 20)

void st_cli_trace_opts(st_cli_trace *t, st_opt *opts, int *n)
{
    const st_opt add[ST_CLI_TRACE_OPTS] = {
        { "trace-format", 0, ST_OPT_STR, &t->format, "F",
          "auto|servetune|mooncake|azure|burstgpt|litellm|csv (default auto: from the content)", 0, 0, 0 },
        { "trace-window", 0, ST_OPT_STR, &t->window, "FROM:TO",
          "keep requests from FROM to TO after the trace's first one (durations: 3600, 90m; TO may be empty)", 0, 0,
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
        if ((a[0] && st_parse_duration_s(a, &o->window_from_s) < 0) ||
            (b[0] && st_parse_duration_s(b, &o->window_to_s) < 0) || o->window_from_s < 0 || o->window_to_s < 0 ||
            (b[0] && o->window_to_s <= o->window_from_s)) {
            snprintf(err, errlen, "--trace-window: expected FROM:TO with FROM < TO (durations: 3600, 500ms, 90m)");
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
        if (t->minutes)
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

static int trace_stats(int argc, char **argv)
{
    st_cli_trace T;
    memset(&T, 0, sizeof T);
    const char *json_path = NULL, *model = NULL, *gpu = NULL;
    long kv_tokens = 0, max_model_len = 0, seed = 0;
    st_opt opts[32];
    int n = 0;
    st_cli_trace_opts(&T, opts, &n);
    const st_opt more[] = {
        { "trace-max-context", 0, ST_OPT_LONG, &T.max_context, "N",
          "skip and count requests whose prompt + output exceed N tokens", 1, 1e9, 0 },
        { "seed", 0, ST_OPT_LONG, &seed, "N", "seed of --trace-sample (default 0)", 0, 9.2e18, 0 },
        { "json", 0, ST_OPT_STR, &json_path, "FILE",
          "write the figures and the advice as JSON (FILE.tmp, then renamed; a FIFO, device or symlink at FILE is "
          "refused)",
          0, 0, 0 },
        { "kv-tokens", 0, ST_OPT_LONG, &kv_tokens, "N", "the KV cache size in tokens, for the advice", 1, 1e12, 0 },
        { "max-model-len", 0, ST_OPT_LONG, &max_model_len, "N", "the current context limit, for the advice", 1, 1e9,
          0 },
        { "model", 0, ST_OPT_STR, &model, "MODEL",
          "with --gpu: the KV cache from the engine model of `vllm serve MODEL` (other vLLM flags pass through)", 0, 0,
          0 },
        { "gpu", 0, ST_OPT_STR, &gpu, "NAME", "the GPU of --model (H100, A100, ...)", 0, 0, 0 },
        { 0 },
    };
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++)
        opts[n++] = more[i];
    st_opts_result pr;
    char err[1024];
    int status = ST_EXIT_OK;
    st_trace_stats *ts = NULL;
    if (st_opts_parse(opts, argc - 1, argv + 1, 1, &pr, err, sizeof err) < 0) {
        status = st_cli_usage_error("trace stats", err);
        goto out;
    }
    if (pr.help) {
        printf("usage: servetune trace stats FILE [OPTIONS] [--model MODEL --gpu GPU [vLLM flags]]\n\n"
               "What a trace or a production log says about the traffic: request rate over time (mean,\n"
               "p95 of the per-minute rates, peak, burstiness), input/output length percentiles, prefix\n"
               "sharing and the hit rate an ideal prefix cache would get, sessions, and the advice that\n"
               "follows (--max-model-len, the KV cache, prefix caching). Formats: servetune JSONL,\n"
               "Mooncake, Azure, BurstGPT, LiteLLM spend logs, CSV (docs/trace-format.md). FILE '-' is\n"
               "stdin. The file streams: memory stays bounded whatever its size. A gzip file (.jsonl.gz)\n"
               "is read as it is, other compressed files are named (zstd-compressed: decompress it first);\n"
               "a UTF-8 byte-order mark is skipped; a device is refused and a FIFO read with lines of at\n"
               "most 4 MiB, reported as soon as one is longer.\n\n"
               "Examples:\n"
               "  servetune trace stats mooncake_trace.jsonl\n"
               "  servetune trace stats spend_logs.json --trace-model qwen3-8b --model Qwen/Qwen3-8B --gpu H100\n\n"
               "Options:\n");
        st_opts_usage(stdout, opts);
        goto out;
    }
    if (pr.npos != 1) {
        status = st_cli_usage_error("trace stats", "expected one trace FILE");
        goto out;
    }
    const char *path = pr.pos[0];
    if (pr.nunknown && !model) {
        char m[200];
        snprintf(m, sizeof m, "unknown option %.100s", pr.unknown[0]);
        status = st_cli_usage_error("trace stats", m);
        goto out;
    }
    if ((model != NULL) != (gpu != NULL)) {
        status = st_cli_usage_error("trace stats", "--model and --gpu go together");
        goto out;
    }
    st_trace_opts o;
    if (st_cli_trace_resolve(&T, (uint64_t)seed, &o, err, sizeof err) < 0) {
        status = st_cli_usage_error("trace stats", err);
        goto out;
    }
    st_traffic_engine e;
    memset(&e, 0, sizeof e);
    char what[300] = "";
    if (model) {
        char **av = calloc((size_t)pr.nunknown + 5, sizeof *av);
        int ac = 0;
        if (!av) {
            status = ST_EXIT_FAIL;
            goto out;
        }
        av[ac++] = "serve";
        av[ac++] = (char *)model;
        av[ac++] = "--gpu";
        av[ac++] = (char *)gpu;
        for (int i = 0; i < pr.nunknown; i++)
            av[ac++] = pr.unknown[i];
        int rc = st_traffic_engine_model(ac, av, gpu, &e, what, sizeof what, err, sizeof err);
        free(av);
        if (rc < 0) {
            fprintf(stderr, "servetune trace stats: the engine model of %s on %s: %s\n", model, gpu, err);
            status = ST_EXIT_USAGE;
            goto out;
        }
    }
    if (kv_tokens > 0)
        e.kv_tokens = (uint64_t)kv_tokens;
    if (max_model_len > 0)
        e.max_model_len = (uint32_t)max_model_len;
    ts = st_trace_stats_new();
    st_trace_counts c;
    st_trace_format fmt;
    int rc = ts ? st_trace_read_file(path, &o, st_trace_stats_row_cb, ts, &c, &fmt, err, sizeof err) : -1;
    if (rc < 0) { /* a missing or malformed trace is bad input (docs/exit-codes.md) */
        fprintf(stderr, "servetune trace stats: %s\n", ts ? err : "out of memory");
        status = ts ? ST_EXIT_USAGE : ST_EXIT_FAIL;
        goto out;
    }
    st_traffic t;
    st_trace_stats_result(ts, &t);
    st_traffic_advice a;
    st_traffic_advise(ts, &t, &e, &a);
    if (!t.requests) {
        char d[400];
        st_trace_counts_describe(&c, d, sizeof d);
        fprintf(stderr, "servetune trace stats: %s: no requests kept (%s)\n", path, d);
        status = ST_EXIT_FAIL;
    } else {
        print_traffic(path, fmt, &c, &t, &a);
    }
    if (json_path) {
        json_t *j = st_traffic_json(&t, &a, &c, fmt, path);
        if (j && e.kv_tokens && what[0])
            json_object_set_new(json_object_get(j, "advice"), "engine", json_string(what));
        char *s = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
        json_decref(j);
        if (!s || st_write_file_atomic(json_path, s, strlen(s), err, sizeof err) < 0) {
            if (s)
                fprintf(stderr, "servetune trace stats: cannot write %s\n", err);
            else
                fprintf(stderr, "servetune trace stats: cannot write %s: out of memory\n", json_path);
            status = ST_EXIT_FAIL;
        }
        free(s);
    }
out:
    st_trace_stats_free(ts);
    st_opts_result_free(&pr);
    return status;
}

int cmd_trace(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        FILE *f = argc < 2 ? stderr : stdout;
        fprintf(f, "usage: servetune trace stats FILE [OPTIONS]\n\n"
                   "  stats   rates, lengths, prefix sharing, sessions and advice from a trace or a log\n\n"
                   "'servetune trace stats --help' lists the options.\n");
        return argc < 2 ? ST_EXIT_USAGE : ST_EXIT_OK;
    }
    if (!strcmp(argv[1], "stats"))
        return trace_stats(argc - 1, argv + 1);
    char m[160];
    snprintf(m, sizeof m, "unknown subcommand '%.60s' (expected stats)", argv[1]);
    return st_cli_usage_error("trace", m);
}
