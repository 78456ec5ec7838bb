/* Agent traces on the command line (cli/agents.h). */
#include "cli/agents.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/file.h"
#include "core/opts.h"
#include "emu/flags.h"
#include "emu/sim.h"
#include "load/arrival.h"
#include "load/output.h"

static void dist_line(FILE *f, const char *what, const st_dist *d)
{
    if (!d->n)
        fprintf(f, "%-30s-\n", what);
    else
        fprintf(f, "%-30s%.1f / %.1f / %.1f ms (p50 / p95 / max)\n", what, d->p50 * 1e3, d->p95 * 1e3, d->max * 1e3);
}

void st_cli_agent_print(FILE *f, const st_agent_run_stats *s)
{
    fprintf(f, "---------------Agent tasks----------------\n");
    fprintf(f, "%-30s%u of %u (%u of %u requests)\n", "Tasks completed:", s->completed, s->tasks, s->nodes_ok,
            s->nodes);
    if (isfinite(s->tasks_per_s))
        fprintf(f, "%-30s%.4g\n", "Task throughput (tasks/s):", s->tasks_per_s);
    dist_line(f, "Task makespan:", &s->makespan);
    dist_line(f, "Critical-path TTFT sum:", &s->cp_ttft);
    dist_line(f, "Node TTFT:", &s->node_ttft);
    if (s->slo_makespan_s > 0)
        fprintf(f, "%-30s%u of %u within %.0f ms\n", "Makespan SLO:", s->slo_met, s->completed,
                s->slo_makespan_s * 1e3);
    for (uint32_t d = 0; d < s->n_depth_rows; d++) {
        const st_agent_depth_row *r = &s->depth[d];
        if (!r->requests)
            continue;
        char what[40];
        snprintf(what, sizeof what, "TTFT at depth %u%s:", r->depth, d == ST_AGENT_DEPTH_ROWS - 1 ? "+" : "");
        if (r->ttft.n)
            fprintf(f, "%-30s%.1f / %.1f ms (p50 / p95), %u of %u\n", what, r->ttft.p50 * 1e3, r->ttft.p95 * 1e3,
                    r->completed, r->requests);
        else
            fprintf(f, "%-30s- (0 of %u)\n", what, r->requests);
    }
}

/* ---- trace stats ---------------------------------------------------------------------------- */

json_t *st_cli_agent_shape_json(const char *path, const st_agent_graph *g, const st_agent_stats *s)
{
    json_t *o = json_object();
    json_object_set_new(o, "trace", json_string(path));
    json_object_set_new(o, "format", json_string(g->format == ST_AGENT_FMT_WEKA ? "weka" : "task-graph"));
    json_object_set_new(o, "tasks", json_integer(s->tasks));
    json_object_set_new(o, "requests", json_integer(s->nodes));
    json_object_set_new(o, "background_requests", json_integer(s->background));
    json_object_set_new(o, "input_tokens", json_integer((json_int_t)s->input_tokens));
    json_object_set_new(o, "output_tokens", json_integer((json_int_t)s->output_tokens));
    json_t *fo = json_object();
    json_object_set_new(fo, "nodes", json_integer(s->fanouts));
    json_object_set_new(fo, "width_max", json_integer(s->width_max));
    json_object_set_new(fo, "width_mean", s->fanouts ? json_real(s->width_mean) : json_null());
    json_t *wc = json_object();
    for (uint32_t w = 2; w <= ST_AGENT_WIDTH_ROWS + 1; w++) {
        char k[16];
        snprintf(k, sizeof k, "%u%s", w, w > ST_AGENT_WIDTH_ROWS ? "+" : "");
        if (s->width_count[w])
            json_object_set_new(wc, k, json_integer(s->width_count[w]));
    }
    json_object_set_new(fo, "widths", wc);
    json_object_set_new(o, "fan_out", fo);
    json_object_set_new(o, "joins", json_integer(s->joins));
    json_object_set_new(o, "depth_max", json_integer(s->depth_max));
    json_object_set_new(o, "depth_mean", json_real(s->depth_mean));
    json_object_set_new(o, "requests_per_task_max", json_integer(s->nodes_per_task_max));
    json_t *b = json_object();
    json_object_set_new(b, "references", json_integer((json_int_t)s->block_refs));
    json_object_set_new(b, "unique", json_integer((json_int_t)s->blocks_unique));
    json_object_set_new(b, "shared", json_integer((json_int_t)s->blocks_shared));
    json_object_set_new(b, "reuse",
                        s->block_refs ? json_real(1.0 - (double)s->blocks_unique / s->block_refs) : json_null());
    json_object_set_new(o, "blocks", b);
    json_object_set_new(o, "ideal_prefix_hit_tokens", json_integer((json_int_t)s->ideal_hit_tokens));
    json_object_set_new(o, "ideal_prefix_hit_rate", json_real(s->ideal_hit_rate));
    json_t *in = json_array();
    for (uint32_t i = 0; i < g->n; i++)
        json_array_append_new(in, json_integer(g->nodes[i].input_len));
    json_object_set_new(o, "input_lengths", in);
    return o;
}

int st_cli_agent_trace_stats(const char *path, const char *json_path)
{
    st_agent_graph g;
    st_agent_stats s;
    char err[1024];
    if (st_agent_load_file(path, 0, &g, NULL, err, sizeof err)) {
        fprintf(stderr, "servetune trace stats: %s\n", err);
        return ST_EXIT_USAGE;
    }
    int status = ST_EXIT_OK;
    if (st_agent_stats_compute(&g, &s)) {
        fprintf(stderr, "servetune trace stats: out of memory\n");
        st_agent_graph_free(&g);
        return ST_EXIT_FAIL;
    }
    printf("Agent trace %s (%s)\n", path, g.format == ST_AGENT_FMT_WEKA ? "WEKA-style agentic trace" : "task graphs");
    printf("%-34s%u\n", "Tasks:", s.tasks);
    printf("%-34s%u (%u in background sub-agents)\n", "Requests:", s.nodes, s.background);
    printf("%-34s%llu in, %llu out\n", "Tokens:", (unsigned long long)s.input_tokens,
           (unsigned long long)s.output_tokens);
    printf("%-34s%u (max width %u, mean %.2f)\n", "Fan-out points (2+ children):", s.fanouts, s.width_max,
           s.width_mean);
    for (uint32_t w = 2; w <= ST_AGENT_WIDTH_ROWS + 1; w++)
        if (s.width_count[w])
            printf("  width %u%s%*s%u\n", w, w > ST_AGENT_WIDTH_ROWS ? "+" : "", w > ST_AGENT_WIDTH_ROWS ? 23 : 24, "",
                   s.width_count[w]);
    printf("%-34s%u\n", "Joins (2+ parents):", s.joins);
    printf("%-34s%u (mean of the tasks' deepest: %.2f)\n", "Depth (max):", s.depth_max, s.depth_mean);
    printf("%-34s%u\n", "Requests per task (max):", s.nodes_per_task_max);
    printf("%-34s%llu references, %llu unique, %llu shared (reuse %.1f %%)\n",
           "Blocks:", (unsigned long long)s.block_refs, (unsigned long long)s.blocks_unique,
           (unsigned long long)s.blocks_shared,
           s.block_refs ? 100.0 * (1.0 - (double)s.blocks_unique / s.block_refs) : 0.0);
    printf("%-34s%.1f %% (%llu of %llu prompt tokens)\n", "Ideal prefix-cache hit rate:", 100 * s.ideal_hit_rate,
           (unsigned long long)s.ideal_hit_tokens, (unsigned long long)s.prompt_tokens);
    if (json_path) {
        json_t *o = st_cli_agent_shape_json(path, &g, &s);
        char *text = o ? json_dumps(o, JSON_INDENT(1) | JSON_REAL_PRECISION(10)) : NULL;
        json_decref(o);
        if (!text || st_write_file_atomic(json_path, text, strlen(text), err, sizeof err)) {
            fprintf(stderr, "servetune trace stats: %s\n", text ? err : "out of memory");
            status = ST_EXIT_FAIL;
        }
        free(text);
    }
    st_agent_graph_free(&g);
    return status;
}

/* ---- predict --agents ---------------------------------------------------------------------------- */

static void predict_usage(const st_opt *opts)
{
    printf("usage: servetune predict --agents FILE --model MODEL --gpu GPU [--rate R] [vLLM flags]\n\n"
           "Replays agent task graphs (a WEKA-style agentic trace or task-graph JSONL, docs/trace-format.md)\n"
           "on the engine model (vLLM's scheduler, paged KV cache with prefix caching, the GPU's step time)\n"
           "in virtual time: each task's first request on the arrival schedule (open loop across tasks), each\n"
           "other request when the last of its parents answered plus its gap (closed loop within a task), its\n"
           "prompt grown by their answers (task-graph nodes). Prints the task makespan, the critical-path TTFT,\n"
           "the TTFT by depth and the tasks/s, as `servetune bench` measures them against a server.\n\n"
           "Options:\n");
    st_opts_usage(stdout, opts);
    printf("\nExamples:\n"
           "  servetune predict --agents examples/agent-tasks.jsonl --model Qwen/Qwen3-8B --gpu H100\n"
           "  servetune predict --agents trace.json --model Qwen/Qwen3-8B --gpu H100 --rate 0.5 --json out.json\n\n"
           "Without --rate: the tasks' own start times (task-graph `start`), else every task at once.\n"
           "Exit codes: 0 done; 1 a request failed or a file could not be written; 2 bad arguments or trace.\n");
}

/* predict --agents' options. */
typedef struct predict_agents_args {
    const char *path, *model, *gpu, *json_path, *arrival;
    double rate, slo_ms;
    long seed;
    int quiet;
} predict_agents_args;

/* The engine model: `vllm serve MODEL --gpu GPU [flags]`, the flags those predict did not take
 * (argv kept in *av_out, freed by the caller). ST_EXIT_OK, or an exit status. */
static int agents_engine_config(const predict_agents_args *a, const st_opts_result *pr, st_emu_config *cfg,
                                char ***av_out)
{
    char err[1024];
    char **av = calloc((size_t)pr->nunknown + 8, sizeof *av);
    *av_out = av;
    if (!av)
        return ST_EXIT_FAIL;
    int ac = 0;
    av[ac++] = "serve";
    av[ac++] = (char *)a->model;
    av[ac++] = "--gpu";
    av[ac++] = (char *)a->gpu;
    for (int i = 0; i < pr->nunknown; i++)
        av[ac++] = pr->unknown[i];
    if (st_emu_config_of_argv(ac, av, a->gpu, cfg, NULL, err, sizeof err)) {
        fprintf(stderr, "servetune predict: the engine model of %s on %s: %s\n", a->model, a->gpu, err);
        return ST_EXIT_USAGE;
    }
    return ST_EXIT_OK;
}

/* The start times of w's ns starting requests: the arrival process at --rate, else the trace's
 * own starts (0 when it has none). ST_EXIT_OK, or an exit status. */
static int agents_schedule(const predict_agents_args *a, st_arrival_kind kind, const st_workload *w, uint32_t ns,
                           st_ns *sched)
{
    if (isfinite(a->rate)) {
        st_arrival arr = { .kind = kind, .rate = a->rate, .burstiness = 1, .seed = (uint64_t)a->seed };
        if (st_arrival_schedule(&arr, ns, sched) < 0)
            return st_cli_usage_error("predict", "bad arrival parameters");
    } else {
        for (uint32_t i = 0; i < ns; i++)
            sched[i] = w->items[i].arrival >= 0 ? w->items[i].arrival : 0;
    }
    return ST_EXIT_OK;
}

/* The figures as JSON into --json's file. ST_EXIT_OK, or ST_EXIT_FAIL. */
static int agents_write_json(const predict_agents_args *a, const st_agent_run_stats *as, const st_emu_sim_stats *ss)
{
    char err[1024];
    int status = ST_EXIT_OK;
    json_t *o = json_object();
    json_object_set_new(o, "schema", json_string("servetune.agents-predict/1"));
    json_object_set_new(o, "prediction", json_true());
    json_object_set_new(o, "trace", json_string(a->path));
    json_object_set_new(o, "model", json_string(a->model));
    json_object_set_new(o, "gpu", json_string(a->gpu));
    json_object_set_new(o, "rate", isfinite(a->rate) ? json_real(a->rate) : json_null());
    json_object_set_new(o, "tasks", st_agent_run_stats_json(as));
    json_object_set_new(o, "prefix_hit_tokens", json_integer((json_int_t)ss->prefix_hits));
    json_object_set_new(o, "prompt_tokens", json_integer((json_int_t)ss->prompt_tokens));
    char *text = json_dumps(o, JSON_INDENT(1) | JSON_REAL_PRECISION(10));
    json_decref(o);
    if (!text || st_write_file_atomic(a->json_path, text, strlen(text), err, sizeof err)) {
        fprintf(stderr, "servetune predict: %s\n", text ? err : "out of memory");
        status = ST_EXIT_FAIL;
    }
    free(text);
    return status;
}

/* Runs w's n requests (ns of them starting, the others dependent) on the engine model and reports
 * the task figures. The exit status. */
static int agents_run(const predict_agents_args *a, const st_emu_config *cfg, st_arrival_kind kind, st_workload *w)
{
    char err[1024];
    uint32_t n = w->n, ns = w->n - w->n_dependent;
    st_ns *sched = calloc(n, sizeof *sched);
    st_emu_sim_item *items = calloc(n, sizeof *items);
    st_record *rec = calloc(n, sizeof *rec);
    int status = ST_EXIT_OK;
    if (!sched || !items || !rec) {
        fprintf(stderr, "servetune predict: out of memory\n");
        status = ST_EXIT_FAIL;
        goto out;
    }
    if ((status = agents_schedule(a, kind, w, ns, sched)) != ST_EXIT_OK)
        goto out;
    st_emu_sim_items_from_workload(w, sched, items);
    st_emu_sim_stats ss;
    if (st_emu_sim_run(cfg, items, n, rec, &ss, err, sizeof err)) {
        fprintf(stderr, "servetune predict: %s\n", err);
        status = ST_EXIT_FAIL;
        n = 0; /* (records not filled) */
        goto out_rec;
    }
    st_agent_run_stats as;
    if (st_agent_run_stats_compute(w, rec, n, a->slo_ms / 1e3, &as)) {
        fprintf(stderr, "servetune predict: out of memory\n");
        status = ST_EXIT_FAIL;
        goto out_rec;
    }
    if (!a->quiet) {
        printf("PREDICTION (engine model, virtual time): %s on %s, %s\n", a->model, a->gpu, a->path);
        st_cli_agent_print(stdout, &as);
        printf("%-30s%.1f %% of prompt tokens\n",
               "Prefix-cache hits:", ss.prompt_tokens ? 100.0 * ss.prefix_hits / ss.prompt_tokens : 0.0);
    }
    if (a->json_path)
        status = agents_write_json(a, &as, &ss);
    if (as.nodes_ok < as.nodes && status == ST_EXIT_OK)
        status = ST_EXIT_FAIL;
out_rec:
    for (uint32_t i = 0; i < n; i++)
        st_record_free(&rec[i]);
out:
    free(rec);
    free(items);
    free(sched);
    return status;
}

int st_cli_predict_agents(int argc, char **argv)
{
    predict_agents_args a = { .arrival = "poisson", .rate = NAN };
    const st_opt opts[] = {
        { "agents", 0, ST_OPT_STR, &a.path, "FILE", "the agent trace (WEKA-style, or task-graph JSONL)", 0, 0, 0 },
        { "model", 0, ST_OPT_STR, &a.model, "MODEL", "the served model (vLLM flags after it pass through)", 0, 0, 0 },
        { "gpu", 0, ST_OPT_STR, &a.gpu, "NAME", "the GPU (H100, A100, ...)", 0, 0, 0 },
        { "rate", 0, ST_OPT_DOUBLE, &a.rate, "R", "tasks starting per second (default: the trace's starts)", 1e-9, 1e9,
          0 },
        { "arrival", 0, ST_OPT_STR, &a.arrival, "KIND", "with --rate: poisson (default) or constant", 0, 0, 0 },
        { "seed", 0, ST_OPT_LONG, &a.seed, "N", "seed of the arrivals and the prompts (default 0)", 0, 9.2e18, 0 },
        { "slo-makespan", 0, ST_OPT_DOUBLE, &a.slo_ms, "MS", "count the tasks whose makespan is at most MS", 0, 1e12,
          0 },
        { "json", 0, ST_OPT_STR, &a.json_path, "FILE", "write the figures as JSON", 0, 0, 0 },
        { "quiet", 'q', ST_OPT_FLAG, &a.quiet, NULL, "no table", 0, 0, 0 },
        { 0 },
    };
    st_opts_result pr;
    char err[1024];
    int status = ST_EXIT_OK;
    st_workload w;
    memset(&w, 0, sizeof w);
    char **av = NULL;
    if ((status = st_cli_parse("predict", opts, argc, argv, 1, &pr, predict_usage, err, sizeof err)) >= 0)
        goto out;
    status = ST_EXIT_OK;
    if (!a.path || !a.model || !a.gpu || pr.npos) {
        status = st_cli_usage_error("predict", "--agents FILE needs --model and --gpu (and no SPEC)");
        goto out;
    }
    st_arrival_kind kind;
    if (st_arrival_kind_from_name(a.arrival, &kind) || (kind != ST_ARR_POISSON && kind != ST_ARR_CONSTANT)) {
        status = st_cli_usage_error("predict", "--arrival: expected poisson or constant");
        goto out;
    }
    st_emu_config cfg;
    if ((status = agents_engine_config(&a, &pr, &cfg, &av)) != ST_EXIT_OK)
        goto out;
    if (st_agent_load_file(a.path, (uint64_t)a.seed, NULL, &w, err, sizeof err)) {
        fprintf(stderr, "servetune predict: %s\n", err);
        status = ST_EXIT_USAGE;
        goto out;
    }
    status = agents_run(&a, &cfg, kind, &w);
out:
    free(av);
    st_workload_free(&w);
    st_opts_result_free(&pr);
    return status;
}
