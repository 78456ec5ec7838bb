/* Run figures from records (hand-made records with known times), the early-stop counts and
 * lower bounds, the time-scale conversion, and the run key. */
#include "harness.h"

#include <stdio.h>

#include "audit/figures.h"
#include "audit/sweep.h"

#define MS ST_NS_PER_MS

static st_audit_slo slo(void)
{
    st_audit_slo s = { .n = 2 };
    s.terms[0] = (st_slo_term){ ST_SLO_TTFT, 95, 1500 };
    s.terms[1] = (st_slo_term){ ST_SLO_TPOT, 95, 50 };
    return s;
}

/* Request i: scheduled at i x 100 ms, sent at once, first token 200 ms later, then 10 tokens
 * 20 ms apart (TPOT 20 ms). */
static void make(st_record *r, int n)
{
    for (int i = 0; i < n; i++) {
        st_record_init(&r[i], (uint32_t)i);
        r[i].scheduled = i * 100 * MS;
        r[i].sent = r[i].scheduled;
        r[i].first_byte = r[i].first_token = r[i].scheduled + 200 * MS;
        for (int e = 0; e < 10; e++)
            st_record_add_event(&r[i], r[i].first_token + e * 20 * MS);
        r[i].end = r[i].first_token + 9 * 20 * MS;
        r[i].output_tokens = r[i].output_requested = 10;
        r[i].input_tokens = 100;
    }
}

static void figures_from_records(void **state)
{
    (void)state;
    st_record r[10];
    make(r, 10);
    st_audit_slo s = slo();
    st_run_row row = { 0 };
    st_rate_figures f;
    assert_int_equal(st_audit_figures(&s, r, 10, 10, &row, &f), 0);
    assert_int_equal(row.completed, 10);
    assert_int_equal(f.failed, 0);
    assert_int_equal(f.errors, 0);
    /* first send 0, last end 900 + 200 + 180 = 1280 ms: 10 / 1.28 s */
    assert_near(row.duration_s, 1.28, 1e-9);
    assert_near(row.delivered_rps, 10 / 1.28, 1e-9);
    assert_near(row.output_tps, 100 / 1.28, 1e-9);
    assert_near(f.value_ms[0], 200, 1e-6);
    assert_near(f.value_ms[1], 20, 1e-6);
    assert_near(row.ttft_p95_ms, 200, 1e-6);
    /* one timed-out request: an error, and the rate cannot pass */
    r[3].status = ST_REQ_TIMEOUT;
    assert_int_equal(st_audit_figures(&s, r, 10, 10, &row, &f), 0);
    assert_int_equal(f.errors, 1);
    assert_int_equal(row.completed, 9);
    st_verdict_info v;
    st_capacity_verdict(&s, &f, &v);
    assert_int_equal(v.verdict, ST_VERDICT_FAIL);
    assert_non_null(strstr(v.why, "1 of 10 requests failed"));
    /* time scale: every time x5 */
    r[3].status = ST_REQ_OK;
    st_audit_scale_records(r, 10, 5);
    assert_int_equal(r[2].scheduled, 1000 * MS);
    assert_int_equal(st_record_event(&r[2], 9), (200 + 200 + 180) * MS * 5);
    assert_int_equal(st_audit_figures(&s, r, 10, 10, &row, &f), 0);
    assert_near(f.value_ms[0], 1000, 1e-6);
    assert_near(f.value_ms[1], 100, 1e-6);
    for (int i = 0; i < 10; i++)
        st_record_free(&r[i]);
}


/* A reasoning model: the SLO may name the time to the first ANSWER token. */
static void ttfat_term(void **state)
{
    (void)state;
    st_record r[10];
    make(r, 10);
    for (int i = 0; i < 10; i++) {
        r[i].first_answer = st_record_event(&r[i], 6); /* 6 reasoning tokens, then the answer */
        r[i].reasoning_tokens = 6;
    }
    st_audit_slo s = slo();
    s.terms[s.n++] = (st_slo_term){ ST_SLO_TTFAT, 95, 300 };
    st_run_row row = { 0 };
    st_rate_figures f;
    assert_int_equal(st_audit_figures(&s, r, 10, 10, &row, &f), 0);
    assert_near(f.value_ms[0], 200, 1e-6);
    assert_near(f.value_ms[2], 200 + 6 * 20, 1e-6);
    st_verdict_info v;
    st_capacity_verdict(&s, &f, &v);
    assert_int_equal(v.verdict, ST_VERDICT_FAIL); /* 320 ms > 300 ms */
    /* the early-stop count and the lower bound see it too */
    uint32_t br[ST_SLO_MAX_TERMS], failed;
    st_audit_breaches(&s, r, 10, 10000 * MS, 1, 0, br, &failed);
    assert_int_equal(br[2], 10);
    double lb[ST_SLO_MAX_TERMS];
    uint32_t due;
    assert_int_equal(st_audit_lower_bounds(&s, r, 10, lb, &due), 0);
    assert_near(lb[2], 320, 1e-6);
    st_audit_scale_records(r, 10, 2);
    assert_int_equal(r[1].first_answer, (100 + 200 + 120) * MS * 2);
    for (int i = 0; i < 10; i++)
        st_record_free(&r[i]);
    assert_string_equal(st_slo_metric_name(ST_SLO_TTFAT), "ttfat");
}

static void breaches_and_lower_bounds(void **state)
{
    (void)state;
    st_record r[20];
    make(r, 20);
    st_audit_slo s = slo();
    /* at t = 1 s nobody waits over 1.5 s and TPOT is 20 ms: no breach */
    uint32_t br[ST_SLO_MAX_TERMS], failed;
    st_audit_breaches(&s, r, 20, 1000 * MS, 1, 0, br, &failed);
    assert_int_equal(br[0], 0);
    assert_int_equal(br[1], 0);
    assert_int_equal(failed, 0);
    /* requests 0..4 still waiting for a first token: at t = 1.2 s they waited 1.2 .. 0.8 s (no
     * breach); at 2 s, 2.0 .. 1.6 s: five breaches */
    for (int i = 0; i < 5; i++) {
        r[i].first_token = r[i].first_byte = r[i].end = -1;
        st_record_truncate_events(&r[i], 0);
    }
    st_audit_breaches(&s, r, 20, 1200 * MS, 1, 0, br, &failed);
    assert_int_equal(br[0], 0);
    st_audit_breaches(&s, r, 20, 2000 * MS, 1, 0, br, &failed);
    assert_int_equal(br[0], 5);
    /* with an emulator time scale of 2 the waits at 1.2 s wall are 2.4 .. 1.6 s: five */
    st_audit_breaches(&s, r, 20, 1200 * MS, 2, 0, br, &failed);
    assert_int_equal(br[0], 5);
    /* a failed request counts */
    r[10].status = ST_REQ_HTTP_STATUS;
    st_audit_breaches(&s, r, 20, 2000 * MS, 1, 0, br, &failed);
    assert_int_equal(failed, 1);
    r[10].status = ST_REQ_OK;

    /* after an early stop at 2.5 s (aborted requests end then): lower bounds */
    for (int i = 0; i < 20; i++)
        if (r[i].end < 0 || r[i].end > 2500 * MS) {
            r[i].status = ST_REQ_ABORTED;
            r[i].end = 2500 * MS;
        }
    double lb[ST_SLO_MAX_TERMS];
    uint32_t due;
    assert_int_equal(st_audit_lower_bounds(&s, r, 20, lb, &due), 0);
    assert_int_equal(due, 20); /* every request was scheduled by 1.9 s */
    /* TTFT values: five at 2.5 - 0.0 .. 0.4 s = 2.5, 2.4, 2.3, 2.2, 2.1 s; fifteen at 0.2 s.
     * p95 of 20: rank 18.05 -> between 2.4 and 2.5 s */
    assert_near(lb[0], 2400 + 0.05 * 100, 1e-6);
    for (int i = 0; i < 20; i++)
        st_record_free(&r[i]);
}

static void run_key_depends_on_what_defines_a_run(void **state)
{
    (void)state;
    const char *t = "engine: {kind: emulator, model: m, flags: [--gpu, H100]}\n"
                    "hardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 1\n"
                    "workload: {input_tokens: 10, output_tokens: 5}\nrates: [1, 2]\n"
                    "slo: {ttft_p95_ms: 100, tpot_p95_ms: 10}\n"
                    "configurations:\n  - name: a\n  - name: b\n    add_flags: [--kv-cache-dtype, fp8]\n";
    st_spec s;
    char err[256];
    assert_int_equal(st_spec_parse("t.yaml", t, strlen(t), &s, err, sizeof err), 0);
    char k1[65], k2[65], k3[65], k4[65];
    st_sweep_run_key(&s, &s.configs[0], 1, k1);
    st_sweep_run_key(&s, &s.configs[0], 1, k2);
    st_sweep_run_key(&s, &s.configs[0], 2, k3);
    st_sweep_run_key(&s, &s.configs[1], 1, k4);
    assert_string_equal(k1, k2);
    assert_string_not_equal(k1, k3);
    assert_string_not_equal(k1, k4);
    assert_int_equal(strlen(k1), 64);
    /* the price does not define a run; the SLO does (early stop depends on it) */
    s.hardware.price_per_gpu_hour = 9;
    st_sweep_run_key(&s, &s.configs[0], 1, k2);
    assert_string_equal(k1, k2);
    s.slo.terms[0].max_ms = 200;
    st_sweep_run_key(&s, &s.configs[0], 1, k2);
    assert_string_not_equal(k1, k2);
    /* a chat API's prompts fitted with /tokenize are other prompts than estimated ones */
    s.engine.api_set = 1;
    s.engine.api = ST_API_CHAT;
    assert_true(st_spec_fits_prompts(&s));
    st_sweep_run_key(&s, &s.configs[0], 1, k1);
    s.workload.exact_prompts_off = 1;
    assert_false(st_spec_fits_prompts(&s));
    st_sweep_run_key(&s, &s.configs[0], 1, k2);
    assert_string_not_equal(k1, k2);
    /* vLLM's prompt semantics make other prompts */
    st_sweep_run_key(&s, &s.configs[0], 1, k1);
    s.workload.vllm_semantics = 1;
    st_sweep_run_key(&s, &s.configs[0], 1, k2);
    assert_string_not_equal(k1, k2);
    s.workload.vllm_semantics = 0;
    /* multi-turn sessions send other requests, and each of their parameters counts */
    st_sweep_run_key(&s, &s.configs[0], 1, k1);
    s.workload.sessions.on = 1;
    s.workload.sessions.turns_min = s.workload.sessions.turns_max = 4;
    s.workload.sessions.user_tokens = 64;
    st_sweep_run_key(&s, &s.configs[0], 1, k2);
    assert_string_not_equal(k1, k2);
    s.workload.sessions.think_s = 2;
    st_sweep_run_key(&s, &s.configs[0], 1, k3);
    assert_string_not_equal(k2, k3);
    s.workload.sessions.turns_max = 6;
    st_sweep_run_key_sustained(&s, &s.configs[0], 1, 0, 100, k4);
    s.workload.sessions.turns_max = 4;
    st_sweep_run_key_sustained(&s, &s.configs[0], 1, 0, 100, k1);
    assert_string_not_equal(k1, k4);
    /* a fixed-count closed loop at concurrency 1 is another run than an open loop at 1 req/s */
    s.workload.sessions.on = 0;
    st_sweep_run_key(&s, &s.configs[0], 1, k1);
    s.closed_loop = 1;
    st_sweep_run_key(&s, &s.configs[0], 1, k2);
    assert_string_not_equal(k1, k2);
    st_spec_free(&s);
}

/* A closed loop's requests are due from their send: twenty all due at 0 (a closed loop's
 * schedule) with five sent, at 2 s: the fifteen still waiting for a client's slot break no TTFT
 * limit (they are not due), while an open loop counts them, as it counts any request it could not
 * send on schedule. TTFT runs from the send. */
static void closed_loop_breaches_from_send(void **state)
{
    (void)state;
    st_record r[20];
    make(r, 20);
    for (int i = 0; i < 20; i++) {
        r[i].scheduled = 0;
        if (i >= 5) {
            r[i].sent = r[i].first_token = r[i].first_byte = r[i].end = -1;
            st_record_truncate_events(&r[i], 0);
        }
    }
    st_audit_slo s = slo();
    uint32_t br[ST_SLO_MAX_TERMS], failed;
    st_audit_breaches(&s, r, 20, 2000 * MS, 1, 1, br, &failed);
    assert_int_equal(br[0], 0);
    st_audit_breaches(&s, r, 20, 2000 * MS, 1, 0, br, &failed);
    assert_int_equal(br[0], 15);
    /* request 4 was sent at 400 ms and has its first token 200 ms later: 200 ms, not 600 */
    s.terms[0].max_ms = 300;
    st_audit_breaches(&s, r, 20, 2000 * MS, 1, 1, br, &failed);
    assert_int_equal(br[0], 0);
    for (int i = 0; i < 20; i++)
        st_record_free(&r[i]);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(figures_from_records),
        cmocka_unit_test(ttfat_term),
        cmocka_unit_test(breaches_and_lower_bounds),
        cmocka_unit_test(closed_loop_breaches_from_send),
        cmocka_unit_test(run_key_depends_on_what_defines_a_run),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
