#include "audit/plan_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/executor.h"
#include "audit/plan_spec.h"
#include "audit/sweep.h"
#include "core/buf.h"
#include "emu/config.h"
#include "emu/sim.h"
#include "load/record.h"
#include "load/trace.h"
#include "load/workload.h"

#define PLAN_SPEC_MAX ((size_t)1 << 20)

/* The candidate's audit spec, parsed. 0, or -1 with why. */
static int candidate_spec(const st_plan_model *m, const st_plan_candidate *c, st_spec *out, char *why, size_t n)
{
    st_buf b;
    st_buf_init(&b, PLAN_SPEC_MAX);
    const st_plan_candidate *one[] = { c };
    int rc = st_plan_spec_write(m->base_name, m->base_text, m->base_len, one, 1, NULL, &b, why, n);
    if (rc == 0 && st_spec_parse(m->base_name, b.data, b.len, out, why, n))
        rc = -1;
    st_buf_free(&b);
    return rc;
}

/* The spec's workload for n requests (synthetic, or the trace's first n). */
static int workload(const st_spec *s, uint32_t n, st_workload *w, char *why, size_t whylen)
{
    memset(w, 0, sizeof *w);
    if (s->workload.kind == ST_WL_TRACE) {
        st_trace_load_opts o;
        st_trace_load_opts_default(&o);
        o.sessions = ST_TRACE_SESSIONS_FLAT;
        o.read.max_rows = n;
        return st_trace_load(s->workload.trace, &o, w, NULL, NULL, why, whylen);
    }
    st_synth_params p = { .input_len = s->workload.input_tokens,
                          .output_len = s->workload.output_tokens,
                          .range_ratio = s->workload.range_ratio,
                          .prefix_len = s->workload.shared_prefix,
                          .num_requests = n,
                          .seed = s->workload.seed };
    return st_workload_synthetic(&p, w, why, whylen);
}

static int cmp_ns(const void *a, const void *b)
{
    st_ns x = *(const st_ns *)a, y = *(const st_ns *)b;
    return x < y ? -1 : x > y;
}

/* Completions per second in the middle half of a closed-loop run that keeps `clients` requests
 * in flight (the engine's maximum throughput on this workload). */
static double saturated_rps(const st_emu_config *cfg, const st_spec *s, uint32_t clients, char *why, size_t n)
{
    uint32_t reqs = clients * ST_PLAN_BOUND_PER_CLIENT;
    reqs = reqs < ST_PLAN_BOUND_MIN ? ST_PLAN_BOUND_MIN : reqs > ST_PLAN_BOUND_MAX ? ST_PLAN_BOUND_MAX : reqs;
    st_workload w;
    if (workload(s, reqs, &w, why, n))
        return -1;
    double rps = -1;
    st_emu_sim_item *items = calloc(w.n ? w.n : 1, sizeof *items);
    st_record *recs = calloc(w.n ? w.n : 1, sizeof *recs);
    st_ns *ends = calloc(w.n ? w.n : 1, sizeof *ends);
    st_emu_sim_stats st;
    if (!items || !recs || !ends) {
        snprintf(why, n, "out of memory");
        goto out;
    }
    st_emu_sim_items_from_workload(&w, NULL, items);
    if (st_emu_sim_run_closed(cfg, items, w.n, clients, recs, &st, why, n))
        goto out;
    uint32_t k = 0;
    for (uint32_t i = 0; i < w.n; i++)
        if (recs[i].status == ST_REQ_OK && recs[i].end > 0)
            ends[k++] = recs[i].end;
    if (k < 8) {
        snprintf(why, n, "only %u of %u requests completed when saturated", k, w.n);
        goto out;
    }
    qsort(ends, k, sizeof *ends, cmp_ns);
    uint32_t a = k / 4, b = 3 * k / 4;
    double span = (double)(ends[b] - ends[a]) / 1e9;
    rps = span > 0 ? (double)(b - a) / span : (double)k / ((double)ends[k - 1] / 1e9);
out:
    for (uint32_t i = 0; recs && i < w.n; i++)
        st_record_free(&recs[i]);
    free(recs);
    free(items);
    free(ends);
    st_workload_free(&w);
    return rps;
}

static int screen(void *arg, st_plan_candidate *c, char *why, size_t n)
{
    st_plan_model *m = arg;
    st_spec s;
    if (candidate_spec(m, c, &s, why, n))
        return -1;
    int rc = -1;
    st_emu_config cfg;
    st_emu_memory mem;
    if (st_exec_model_config(&s, &s.configs[0], &cfg, NULL, 0, NULL, why, n))
        goto out;
    if (st_emu_memory_plan(&cfg, &mem, why, n))
        goto out;
    double rps = saturated_rps(&cfg, &s, mem.max_num_seqs, why, n);
    if (!(rps > 0))
        goto out;
    c->bound_rps = rps * ST_PLAN_BOUND_MARGIN;
    rc = 0;
out:
    st_spec_free(&s);
    return rc;
}

static int evaluate(void *arg, st_plan_candidate *c, char *why, size_t n)
{
    st_plan_model *m = arg;
    st_spec s;
    if (candidate_spec(m, c, &s, why, n))
        return -1;
    st_executor *x = NULL;
    int rc = -1;
    if (st_exec_model_new(&s, NULL, &x, why, n))
        goto out;
    st_sweep_bisect_result r;
    if (st_sweep_bisect(&s, x, 0, m->tolerance, &r, why, n))
        goto out;
    if (r.failed_start) {
        snprintf(why, n, "%s", r.why);
        goto out;
    }
    c->capacity_rps = r.pass_rate > 0 ? r.capacity_rps : 0;
    c->output_tps = c->capacity_rps * s.workload.output_tokens;
    c->ttft_p95_ms = NAN;
    c->tpot_p95_ms = NAN;
    if (!(r.pass_rate > 0))
        snprintf(why, n, "met the SLO at no rate down to %.3g req/s", r.fail_rate);
    rc = 0;
out:
    if (x)
        st_executor_free(x);
    st_spec_free(&s);
    return rc;
}

void st_plan_model_ops(st_plan_model *m, st_plan_ops *ops)
{
    ops->screen = screen;
    ops->evaluate = evaluate;
    ops->arg = m;
}
