/* The audit against a server whose capacity is known (tests/oracle_queue.h: M/M/1, one FIFO slot,
 * exponential service, TTFT = sojourn time, so the highest rate with p95 TTFT <= S is
 * mu - ln(20) / S). The queue is simulated in virtual time behind the executor interface
 * (audit/executor.h), and the audit's own sweep, sustained runs, search, store and report model
 * find its capacity: for 3 service rates x 2 SLOs x 3 seeds it must land within the tolerance of
 * the analytic value, from above and below the knee, and a burst-mode grid on the same server must
 * overstate it. Bounded: each audit is a handful of simulated runs (milliseconds each). */
#include "harness.h"

#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit/executor.h"
#include "audit/spec.h"
#include "audit/store.h"
#include "audit/sweep.h"
#include "engine/metrics.h"
#include "oracle_queue.h"
#include "report/report.h"

static char dir[256];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/st_oracle_test.XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf -- '%s'", dir);
    if (!getenv("ORACLE_KEEP") && strncmp(dir, "/tmp/st_oracle_test.", 20) == 0)
        (void)!system(cmd);
    return 0;
}

/* ---- the M/M/1 executor, in virtual time ---- */

#define TICK_S 20

typedef struct mm1x {
    double mu;
    uint64_t seed;
    uint64_t runs;
} mm1x;

static int mm1_start(st_executor *x, const st_spec_config *c, st_config_row *row)
{
    (void)c;
    x->time_scale = 1;
    row->startup_s = 0;
    free(row->facts);
    row->facts = strdup("{}");
    return 0;
}

static void mm1_stop(st_executor *x) { (void)x; }

static void mm1_free(st_executor *x)
{
    free(x->impl);
    free(x);
}

static void push(st_exec_out *o, uint32_t *cap, double t, st_metric m, double v)
{
    if (o->n_samples == *cap) {
        *cap = *cap ? *cap * 2 : 256;
        o->samples = realloc(o->samples, sizeof *o->samples * *cap);
    }
    o->samples[o->n_samples++] = (st_metrics_sample){ .t = t, .name = st_metrics_name(m), .value = v };
}

/* The records as a client would have seen them at time t (ns). */
static void view_at(const st_record *full, st_record *v, uint32_t n, st_ns t)
{
    for (uint32_t i = 0; i < n; i++) {
        v[i] = full[i];
        if (v[i].scheduled > t) {
            v[i].sent = v[i].first_byte = v[i].first_token = v[i].end = -1;
            st_record_truncate_events(&v[i], 0);
            continue;
        }
        if (v[i].first_token > t) {
            v[i].first_token = v[i].first_byte = -1;
            st_record_truncate_events(&v[i], 0);
        }
        if (v[i].end > t) {
            v[i].end = -1;
            v[i].output_tokens = 0;
            st_record_truncate_events(&v[i], 1);
        }
    }
}

static int mm1_run(st_executor *x, const st_exec_rate *in, st_config_row *row, st_exec_out *out, char *err,
                   size_t errlen)
{
    (void)row;
    (void)err;
    (void)errlen;
    mm1x *M = x->impl;
    memset(out, 0, sizeof *out);
    uint32_t n = in->w->n;
    out->records = calloc(n, sizeof *out->records);
    out->n = n;
    oracle_queue q;
    oracle_queue_init(&q, M->mu, M->seed * 1000003 + M->runs++);
    st_ns horizon = 0;
    for (uint32_t i = 0; i < n; i++) {
        st_record *r = &out->records[i];
        st_record_init(r, i);
        r->warmup = i < in->warmup;
        r->scheduled = r->sent = in->sched[i];
        double d = oracle_queue_depart(&q, st_ns_to_s(in->sched[i]));
        st_ns dn = (st_ns)llround(d * 1e9);
        r->first_byte = r->first_token = dn;
        r->end = dn + 1000;
        st_record_add_event(r, dn);
        st_record_add_event(r, dn + 1000);
        r->input_tokens = in->w->items[i].input_len;
        r->output_requested = 2;
        r->output_tokens = 2;
        r->status = ST_REQ_OK;
        if (r->end > horizon)
            horizon = r->end;
    }
    if (in->warmup >= n || !in->tick)
        return 0;
    st_record *view = malloc(sizeof *view * n);
    uint32_t cap = 0;
    /* a tick every TICK_S of virtual time (the windows last thousands of seconds) */
    for (st_ns t = TICK_S * ST_NS_PER_S; t <= horizon + TICK_S * ST_NS_PER_S; t += TICK_S * ST_NS_PER_S) {
        view_at(out->records, view, n, t);
        uint32_t insys = 0;
        st_runner_progress p = { .elapsed = t, .total = n, .records = view };
        for (uint32_t i = 0; i < n; i++) {
            if (view[i].sent >= 0)
                p.sent++;
            if (view[i].end >= 0)
                p.completed++;
            else if (view[i].sent >= 0)
                insys++;
        }
        p.in_flight = insys;
        push(out, &cap, st_ns_to_s(t), ST_MET_RUNNING, insys > 0);
        push(out, &cap, st_ns_to_s(t), ST_MET_WAITING, insys > 0 ? insys - 1 : 0);
        if (in->tick(in->tick_arg, &p, out->samples, out->n_samples)) {
            /* stopped: what was in flight is aborted, what had not arrived never was */
            for (uint32_t i = 0; i < n; i++) {
                st_record *r = &out->records[i];
                if (r->scheduled > t) {
                    r->sent = r->first_byte = r->first_token = -1;
                    r->end = -1;
                    st_record_truncate_events(r, 0);
                    r->output_tokens = 0;
                    st_record_set_error(r, ST_REQ_ABORTED, "stopped", 7);
                } else if (r->end > t) {
                    if (r->first_token > t)
                        r->first_token = r->first_byte = -1;
                    st_record_truncate_events(r, r->first_token >= 0 ? 1 : 0);
                    r->end = t;
                    r->output_tokens = r->n_events;
                    st_record_set_error(r, ST_REQ_ABORTED, "stopped", 7);
                }
            }
            out->stopped = 1;
            break;
        }
    }
    free(view);
    return 0;
}

static const st_executor_ops mm1_ops = {
    .name = "mm1", .start_config = mm1_start, .run_rate = mm1_run, .stop_config = mm1_stop, .free = mm1_free
};

static st_executor *mm1_new(const st_spec *spec, double mu, uint64_t seed)
{
    st_executor *x = calloc(1, sizeof *x);
    mm1x *M = calloc(1, sizeof *M);
    M->mu = mu;
    M->seed = seed;
    x->ops = &mm1_ops;
    x->spec = spec;
    x->time_scale = 1;
    x->impl = M;
    return x;
}

/* ---- an audit of the oracle ---- */

static volatile sig_atomic_t never;

typedef struct found {
    int has;
    double capacity, ci_lo, ci_hi, pass, fail;
    int runs;
    double engine_s;
} found;

/* Audits the M/M/1 oracle (service rate mu, p95 TTFT limit slo_s) with `search` (a YAML mapping)
 * and the given rates; the report model's capacity of the one configuration. */
static found audit_oracle(double mu, double slo_s, uint64_t seed, const char *rates, const char *search,
                          uint32_t per_rate)
{
    char spec_text[2048], err[1024];
    snprintf(spec_text, sizeof spec_text,
             "engine: {kind: endpoint, model: mm1, url: 'http://127.0.0.1:9'}\n"
             "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 1.0}\n"
             "peak_rate: 10\n"
             "workload: {input_tokens: 16, output_tokens: 2, requests_per_rate: %u, seed: %llu}\n"
             "rates: [%s]\nwarmup_requests: 0\n"
             "slo: {ttft_p95_ms: %.6g, tpot_p95_ms: 100000}\n"
             "search: %s\n"
             "timeouts: {request: 600s}\n",
             per_rate, (unsigned long long)seed, rates, slo_s * 1e3, search);
    st_spec spec;
    if (st_spec_parse("oracle.yaml", spec_text, strlen(spec_text), &spec, err, sizeof err))
        fail_msg("spec: %s", err);
    char sub[400];
    static int k;
    snprintf(sub, sizeof sub, "%s/a%d", dir, k++);
    st_store *s;
    assert_int_equal(st_store_open(sub, &s, err, sizeof err), 0);
    st_store_set_durable(s, 0);
    assert_int_equal(st_store_audit_begin(s, "oracle.yaml", spec_text, strlen(spec_text), "t", 0, err, sizeof err), 0);
    st_executor *x = mm1_new(&spec, mu, seed);
    st_sweep_opts o = {
        .out_dir = sub, .quiet = !getenv("ORACLE_VERBOSE"), .out = stderr, .stop = &never, .executor = x
    };
    st_sweep_result res;
    if (st_sweep_run(&spec, s, &o, &res, err, sizeof err))
        fail_msg("sweep: %s", err);
    st_executor_free(x);
    st_store_audit_finish(s, 0, NULL);
    st_report r;
    if (st_report_load(s, &r, err, sizeof err))
        fail_msg("report: %s", err);
    const st_capacity *c = r.cfg[0].cap;
    found f = { c->has_pass, c->capacity_rps, c->ci_lo, c->ci_hi, c->pass_rate, c->fail_rate, c->runs, c->engine_s };
    st_report_free(&r);
    st_store_close(s);
    st_spec_free(&spec);
    return f;
}

#define SUSTAINED                                                                                                      \
    "{mode: sustained, tolerance: 0.1, min_window: 60s, min_window_requests: 6000, max_duration: 12000s, max_runs: "   \
    "16}"

/* 3 service rates x 2 SLOs (the knee at half and at three quarters of mu) x 3 seeds. */
static void capacity_within_tolerance_of_the_analytic_value(void **state)
{
    (void)state;
    const double mus[] = { 2, 5, 10 };
    const double knee[] = { 0.5, 0.75 };
    int inside_ci = 0, total = 0;
    double worst = 0;
    for (int m = 0; m < 3; m++)
        for (int k = 0; k < 2; k++)
            for (uint64_t seed = 1; seed <= 3; seed++) {
                double mu = mus[m];
                double slo = log(20) / ((1 - knee[k]) * mu);
                double truth = oracle_mm1_capacity(mu, slo);
                char rates[128];
                snprintf(rates, sizeof rates, "%g, %g, %g, %g", 0.4 * mu, 0.8 * mu, 1.2 * mu, 2 * mu);
                found f = audit_oracle(mu, slo, seed, rates, SUSTAINED, 100);
                if (!f.has)
                    fail_msg("mu %g, knee %g, seed %llu: no capacity found (analytic %g)", mu, knee[k],
                             (unsigned long long)seed, truth);
                double err = fabs(f.capacity - truth) / truth;
                printf("# mu %4g  S %6.3f s  seed %llu  analytic %7.4g  found %7.4g (%+5.1f %%)  CI %.4g-%.4g  "
                       "bracket %.4g-%.4g  %d runs, %.0f s\n",
                       mu, slo, (unsigned long long)seed, truth, f.capacity, 100 * (f.capacity - truth) / truth,
                       f.ci_lo, f.ci_hi, f.pass, f.fail, f.runs, f.engine_s);
                if (err > worst)
                    worst = err;
                /* the search tolerance (10 %) plus the sampling error of one window */
                if (err > 0.12)
                    fail_msg("mu %g, knee %g, seed %llu: found %g, analytic %g (%.1f %% off)", mu, knee[k],
                             (unsigned long long)seed, f.capacity, truth, err * 100);
                inside_ci += f.ci_lo <= truth && truth <= f.ci_hi;
                total++;
            }
    printf("# worst %.1f %%; the interval held the analytic capacity in %d of %d audits\n", worst * 100, inside_ci,
           total);
    assert_true(inside_ci >= total * 2 / 3);
}

/* Starting above the knee (every grid rate over-saturates) and below it (every grid rate passes):
 * the search goes down, or up, to the same answer. */
static void found_from_above_and_below(void **state)
{
    (void)state;
    double mu = 10, slo = log(20) / (0.5 * mu), truth = oracle_mm1_capacity(mu, slo);
    found above = audit_oracle(mu, slo, 7, "30, 60", SUSTAINED, 100);
    found below = audit_oracle(mu, slo, 7, "1, 2", SUSTAINED, 100);
    assert_true(above.has && below.has);
    printf("# from above %.4g, from below %.4g, analytic %.4g\n", above.capacity, below.capacity, truth);
    assert_true(fabs(above.capacity - truth) / truth <= 0.12);
    assert_true(fabs(below.capacity - truth) / truth <= 0.12);
}

/* A burst grid of 100 requests per rate on the same server passes rates the queue cannot sustain
 * (it starts empty and the run ends before the queue has grown), so its capacity overstates the
 * analytic one; the sustained search does not. */
static void burst_grid_overstates(void **state)
{
    (void)state;
    double mu = 10, slo = log(20) / (0.25 * mu), truth = oracle_mm1_capacity(mu, slo);
    const char *grid = "5, 6, 7, 8, 9, 10, 12";
    int over = 0;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        found burst = audit_oracle(mu, slo, seed, grid, "{mode: burst, skip_margin: 0}", 100);
        found sus = audit_oracle(mu, slo, seed, grid, SUSTAINED, 100);
        printf("# seed %llu: analytic %.4g, burst %.4g (passed at %g offered), sustained %.4g\n",
               (unsigned long long)seed, truth, burst.capacity, burst.pass, sus.capacity);
        over += burst.has && burst.pass > truth * 1.1 && burst.capacity > truth;
        assert_true(fabs(sus.capacity - truth) / truth <= 0.12);
    }
    if (over < 2)
        fail_msg("the burst grid overstated the capacity in %d of 3 seeds", over);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test_setup_teardown(capacity_within_tolerance_of_the_analytic_value, setup, teardown),
        cmocka_unit_test_setup_teardown(found_from_above_and_below, setup, teardown),
        cmocka_unit_test_setup_teardown(burst_grid_overstates, setup, teardown),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
