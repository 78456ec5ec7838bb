/* The capacity search on the engine model in virtual time (emu/sim.h): each rate is a
 * simulated run of the example's traffic on Qwen3-8B / H100; the verdicts, the refine policy
 * and the early stop are checked on it. No server, no sockets, no wall clock. */
#include "harness.h"

#include <stdio.h>

#include "audit/capacity.h"
#include "audit/figures.h"
#include "audit/store.h"
#include "emu/catalog.h"
#include "emu/config.h"
#include "emu/sim.h"
#include "load/arrival.h"
#include "load/workload.h"

#define N 100

typedef struct simrun {
    st_record rec[N];
    st_rate_result rr;
    st_verdict_info v;
    st_ns duration;
} simrun;

static st_audit_slo slo(void)
{
    st_audit_slo s = { .n = 2 };
    s.terms[0] = (st_slo_term){ ST_SLO_TTFT, 95, 1500 };
    s.terms[1] = (st_slo_term){ ST_SLO_TPOT, 95, 50 };
    return s;
}

static void run_rate(double rate, simrun *out)
{
    st_emu_gpu g;
    st_emu_model m;
    char err[512];
    assert_int_equal(st_emu_gpu_find("H100", &g, err, sizeof err), 0);
    assert_int_equal(st_emu_model_find("Qwen/Qwen3-8B", &m, err, sizeof err), 0);
    st_emu_config c;
    st_emu_config_init(&c, &g, &m);
    c.max_model_len = 8192;
    c.max_num_batched_tokens = 2048;
    st_synth_params p = {
        .input_len = 3000, .output_len = 300, .range_ratio = 0.1, .prefix_len = 2000, .num_requests = N, .seed = 1
    };
    st_workload w;
    assert_int_equal(st_workload_synthetic(&p, &w, err, sizeof err), 0);
    st_ns sched[N];
    st_arrival a = { .kind = isinf(rate) ? ST_ARR_INF : ST_ARR_POISSON, .rate = rate, .burstiness = 1, .seed = 9 };
    assert_int_equal(st_arrival_schedule(&a, N, sched), 0);
    st_emu_sim_item it[N];
    for (int i = 0; i < N; i++)
        it[i] = (st_emu_sim_item){ .arrival = sched[i],
                                   .input_ids = w.items[i].input_ids,
                                   .input_len = w.items[i].input_len,
                                   .output_len = w.items[i].output_len };
    st_emu_sim_stats ss;
    if (st_emu_sim_run(&c, it, N, out->rec, &ss, err, sizeof err))
        fail_msg("sim: %s", err);
    st_workload_free(&w);
    out->duration = ss.duration;
    st_audit_slo s = slo();
    st_run_row row = { 0 };
    st_rate_figures f;
    assert_int_equal(st_audit_figures(&s, out->rec, N, N, &row, &f), 0);
    st_capacity_verdict(&s, &f, &out->v);
    out->rr = (st_rate_result){ .rate = rate,
                                .verdict = out->v.verdict,
                                .worst_ratio = out->v.worst_ratio,
                                .delivered_rps = row.delivered_rps,
                                .output_tps = row.output_tps,
                                .sustained_rps = row.sustained_rps,
                                .requests = N };
}

static void free_run(simrun *r)
{
    for (int i = 0; i < N; i++)
        st_record_free(&r->rec[i]);
}

/* The records as the load generator would have seen them at time t. */
static void view_at(const st_record *full, st_record *v, st_ns t)
{
    for (int i = 0; i < N; i++) {
        v[i] = full[i];
        v[i].segs = NULL;
        v[i].n_segs = v[i].cap_segs = v[i].n_events = 0;
        v[i].error = NULL;
        if (v[i].scheduled > t) {
            v[i].sent = v[i].first_byte = v[i].first_token = v[i].end = -1;
            continue;
        }
        if (v[i].first_token > t)
            v[i].first_token = v[i].first_byte = -1;
        if (v[i].end > t) {
            v[i].end = -1;
            v[i].status = ST_REQ_OK;
            v[i].output_tokens = 0;
        }
    }
}

static void refine_on_the_engine_model(void **state)
{
    (void)state;
    double rates[] = { 8, 32, 128 };
    st_search_params sp = { rates, 3, ST_SEARCH_REFINE, 0.1, 0, N, 0, 0 };
    st_rate_result rr[32];
    simrun *runs = calloc(32, sizeof *runs);
    int n = 0;
    for (int guard = 0; guard < 25 && n < 32; guard++) {
        st_next nx;
        st_capacity_next(&sp, rr, n, &nx);
        if (nx.action == ST_NEXT_STOP)
            break;
        assert_int_equal(nx.action, ST_NEXT_RUN);
        run_rate(nx.rate, &runs[n]);
        rr[n] = runs[n].rr;
        rr[n].grid = nx.grid;
        n++;
    }
    st_capacity grid, ref;
    st_capacity_compute(rr, n, 1, &grid);
    st_capacity_compute(rr, n, 0, &ref);
    if (!grid.has_pass || !grid.has_fail_above) {
        for (int i = 0; i < n; i++)
            free_run(&runs[i]);
        free(runs);
        fail_msg("expected the grid 8, 32, 128 req/s to bracket the capacity (pass %d, fail above %d)", grid.has_pass,
                 grid.has_fail_above);
    }
    assert_true(ref.has_pass && ref.has_fail_above);
    assert_true(ref.pass_rate >= grid.pass_rate);
    assert_true(ref.fail_rate <= grid.fail_rate);
    assert_true(n > 3); /* refine added rates */
    /* stopped within the tolerance (the runs are capped, and this bracket needs few) */
    if ((ref.fail_rate - ref.pass_rate) / ref.pass_rate > 0.1 + 1e-9)
        fail_msg("refined bracket [%g, %g] wider than 10 %%", ref.pass_rate, ref.fail_rate);
    /* the capacity is what was delivered at the passing rate */
    assert_near(ref.capacity_rps, rr[ref.pass_index].delivered_rps, 0);
    for (int i = 0; i < n; i++)
        free_run(&runs[i]);
    free(runs);
}

/* Early stop never turns a pass into a fail, and on an overloaded rate it stops well before
 * the run would have ended. */
static void early_stop_is_sound_and_saves_time(void **state)
{
    (void)state;
    double rates[] = { 1, 4, 16, INFINITY };
    st_audit_slo s = slo();
    int saved = 0;
    for (size_t k = 0; k < sizeof rates / sizeof *rates; k++) {
        simrun *r = calloc(1, sizeof *r);
        run_rate(rates[k], r);
        st_record view[N];
        st_ns first_stop = -1;
        for (st_ns t = 0; t <= r->duration; t += ST_NS_PER_S / 2) {
            view_at(r->rec, view, t);
            uint32_t br[ST_SLO_MAX_TERMS], failed;
            st_audit_breaches(&s, view, N, t, 1.0, 0, br, &failed);
            if (st_capacity_sure_fail(&s, N, br, failed)) {
                first_stop = t;
                break;
            }
        }
        if (first_stop >= 0 && r->v.verdict == ST_VERDICT_PASS)
            fail_msg("rate %g: early stop at %.1f s but the full run passed (%s)", rates[k], st_ns_to_s(first_stop),
                     r->v.why);
        if (first_stop >= 0 && first_stop < r->duration / 2)
            saved++;
        free_run(r);
        free(r);
    }
    assert_true(saved >= 1);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(refine_on_the_engine_model),
        cmocka_unit_test(early_stop_is_sound_and_saves_time),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
