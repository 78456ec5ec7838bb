/* Simulation speed of the engine model (emu/sim.h) on one core: simulated requests per wall second
 * (CPU time) with runs of decode steps taken at once (the default) and one step at a time
 * (st_emu_config.step_by_step), on 300-token and 2,000-token outputs, and the largest relative
 * difference between the two paths' per-request end times (they should agree).
 *
 * Workload: Qwen3-8B (bf16) on one H100 SXM, unique 512-token prompts (items without ids: st_emu_sim_run
 * sends them as seeded prompts, emu/engine.h, keyed by seed, neither generated nor hashed; the
 * step-by-step path hashes them), open loop at a fixed rate
 * (300-token outputs: 20 req/s, ~70 running; 2,000-token outputs: 5 req/s, where the KV cache runs
 * full and requests wait for blocks), then closed loop with 8 clients (few sequences per step: the
 * per-step work weighs most there), then 2,000-token outputs at 2.5 req/s (~75 running, about as many
 * as the 300-token open loop, with room in the KV cache: a request's cost against its output length). A third run takes the skipping path without recording the per-token
 * times (st_emu_run_opts.no_token_times): the engine model's own speed, without the records' token times.
 * Usage: build/bench/simspeed [REQUESTS [on|off|bare [W]]] (default 4000 requests, every path; on / off / bare: only
 * that path, for profiling, run three times: once on records in fresh memory, whose pages the run touches
 * first, then twice on the same records, as a plan's successive runs reuse freed memory; W 1-5: only the
 * W-th workload above). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/util.h"
#include "emu/catalog.h"
#include "emu/config.h"
#include "emu/sim.h"
#include "load/record.h"

/* CPU seconds of this process: the figure for one core that other work on the machine does not
 * inflate (wall time on a busy host counts the time it waited for the core). */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

typedef struct outcome {
    double wall, req_per_s;
    st_emu_sim_stats st;
} outcome;

/* One run; records stay filled for the comparison. 0 or -1. */
static int run_once(const st_emu_config *base, int step_by_step, int no_token_times, const st_emu_sim_item *it,
                    uint32_t n, uint32_t clients, st_record *rec, outcome *out)
{
    st_emu_config c = *base;
    c.step_by_step = step_by_step;
    char err[512];
    st_emu_run_opts o = { .clients = clients, .no_token_times = no_token_times };
    double t0 = cpu_s();
    int rc = st_emu_sim_run_opts(&c, it, n, &o, rec, &out->st, NULL, err, sizeof err);
    if (rc < 0) {
        fprintf(stderr, "simspeed: %s\n", err);
        return -1;
    }
    out->wall = cpu_s() - t0;
    out->req_per_s = n / out->wall;
    return 0;
}

static double rel_diff(double a, double b)
{
    double m = fabs(a) > fabs(b) ? fabs(a) : fabs(b);
    return m > 0 ? fabs(a - b) / m : 0;
}

/* n requests of out_len tokens: open loop at `rate` req/s, or with clients > 0 closed loop. */
static int speed(const st_emu_config *c, uint32_t n, uint32_t out_len, double rate, uint32_t clients, int only)
{
    st_emu_sim_item *it = calloc(n, sizeof *it);
    st_record *ra = calloc(n, sizeof *ra), *rb = calloc(n, sizeof *rb), *rc_ = calloc(n, sizeof *rc_);
    if (!it || !ra || !rb || !rc_)
        return -1;
    for (uint32_t i = 0; i < n; i++)
        it[i] = (st_emu_sim_item){ .arrival = (st_ns)(i / rate * 1e9), .input_len = 512, .output_len = out_len };
    outcome on, off, bare;
    if (only >= 0) { /* one path only (profiling): on fresh records, then twice on the same ones */
        int rc1 = run_once(c, only == 1, only == 2, it, n, clients, ra, &on);
        double fresh = on.req_per_s, reused = 0;
        for (int rep = 0; rep < 2 && rc1 == 0; rep++) {
            for (uint32_t i = 0; i < n; i++) /* the next run initialises them */
                st_record_free(&ra[i]);
            rc1 = run_once(c, only == 1, only == 2, it, n, clients, ra, &on);
            if (on.req_per_s > reused)
                reused = on.req_per_s;
        }
        printf("%s: %.0f requests/s simulated (records in fresh memory: the first touch of their pages counted); "
               "%.0f on records reused (best of two)\n",
               only == 1 ? "step by step"
               : only    ? "no token times"
                         : "step skipping on",
               fresh, reused);
        free(it);
        free(ra);
        free(rb);
        free(rc_);
        return rc1;
    }
    int rc = run_once(c, 0, 0, it, n, clients, ra, &on) | run_once(c, 1, 0, it, n, clients, rb, &off) |
             run_once(c, 0, 1, it, n, clients, rc_, &bare);
    if (rc == 0) {
        double worst = 0, segs = 0, events = 0;
        uint32_t bad = 0;
        for (uint32_t i = 0; i < n; i++) {
            double d = rel_diff(ra[i].end, rb[i].end), d2 = rel_diff(rc_[i].end, rb[i].end);
            if (d > worst)
                worst = d;
            if (d2 > worst)
                worst = d2;
            bad += ra[i].n_events != rb[i].n_events;
            segs += ra[i].n_segs;
            events += ra[i].n_events;
        }
        char load[64];
        if (clients)
            snprintf(load, sizeof load, "%u clients (closed loop)", clients);
        else
            snprintf(load, sizeof load, "%.3g req/s (open loop)", rate);
        printf("%5u x (512 in, %4u out), %s: %.1f s simulated, %llu steps, %llu preemptions\n", n, out_len, load,
               on.st.duration / 1e9, (unsigned long long)on.st.steps, (unsigned long long)on.st.preemptions);
        printf("    step skipping on:  %8.1f ms CPU,  %10.0f requests/s simulated\n", on.wall * 1e3, on.req_per_s);
        printf("    step by step:      %8.1f ms CPU,  %10.0f requests/s simulated\n", off.wall * 1e3, off.req_per_s);
        printf("    no token times:    %8.1f ms CPU,  %10.0f requests/s simulated (step skipping; records without the\n"
               "                       per-token times, as plan's saturation runs ask)\n",
               bare.wall * 1e3, bare.req_per_s);
        printf("    speed-up %.1fx; largest relative end-time difference %.2g; records with another token count: %u\n",
               off.wall / on.wall, worst, bad);
        printf("    token times kept as %.1f segments a request, %.1f token events a segment\n", segs / n,
               segs > 0 ? events / segs : 0);
    }
    for (uint32_t i = 0; i < n; i++) {
        st_record_free(&ra[i]);
        st_record_free(&rb[i]);
        st_record_free(&rc_[i]);
    }
    free(it);
    free(ra);
    free(rb);
    free(rc_);
    return rc;
}

int main(int argc, char **argv)
{
    st_heap_for_runs(); /* as servetune's own processes run (cli/main.c) */
    uint32_t n = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 4000;
    if (n == 0)
        n = 4000;
    char err[512];
    st_emu_gpu g;
    st_emu_model m;
    if (st_emu_gpu_find("H100", &g, err, sizeof err) || st_emu_model_find("Qwen/Qwen3-8B", &m, err, sizeof err)) {
        fprintf(stderr, "simspeed: %s\n", err);
        return 1;
    }
    st_emu_config c;
    st_emu_config_init(&c, &g, &m);
    printf("engine model simulation speed (Qwen3-8B bf16 on one H100, build/bench/simspeed %u)\n", n);
    int only = argc > 2 ? (!strcmp(argv[2], "on") ? 0 : !strcmp(argv[2], "bare") ? 2 : 1) : -1;
    uint32_t q = n / 4 ? n / 4 : 1;
    int w = argc > 3 ? atoi(argv[3]) : 0;
    if (((!w || w == 1) && speed(&c, n, 300, 20, 0, only) < 0) ||
        ((!w || w == 2) && speed(&c, q, 2000, 5, 0, only) < 0) ||
        ((!w || w == 3) && speed(&c, n, 300, 0, 8, only) < 0) ||
        ((!w || w == 4) && speed(&c, q, 2000, 0, 8, only) < 0) ||
        ((!w || w == 5) && speed(&c, q, 2000, 2.5, 0, only) < 0))
        return 1;
    return 0;
}
