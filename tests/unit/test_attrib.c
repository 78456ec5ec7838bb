/* plan/attrib: cents split by largest remainder sum to the total exactly; a step's time is split
 * by each sequence's work (a prefill chunk over a decode, a long-context decode over a short one)
 * and sums to the step; tenant fields from LiteLLM rows, rows without the field counted as
 * "unattributed"; bills parsed (RunPod JSON, CSV, bad rows named); a replay reconciled to a bill
 * with idle hours, to the cent per bucket. */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "emu/catalog.h"
#include "emu/config.h"
#include "emu/engine.h"
#include "plan/attrib.h"
#include "report/whopays.h"

#include "emu_config.h"

static void setup_cfg(st_emu_config *c)
{
    emu_config_of(c, "H100", "Qwen/Qwen3-8B");
    char err[512];
    st_emu_memory mem;
    assert_int_equal(st_emu_memory_plan(c, &mem, err, sizeof err), 0);
}

static void cents_exact(void **state)
{
    (void)state;
    int64_t out[4];
    double w[4] = { 1, 1, 1, 0 };
    st_attrib_cents(100, w, 4, out); /* 33.33 each: the odd cent to the first (a tie) */
    assert_int_equal(out[0], 34);
    assert_int_equal(out[1], 33);
    assert_int_equal(out[2], 33);
    assert_int_equal(out[3], 0);
    double w2[3] = { 0.5, 0.3, 0.2 };
    st_attrib_cents(7, w2, 3, out); /* 3.5, 2.1, 1.4: floors 3+2+1 = 6, the cent to the largest remainder */
    assert_int_equal(out[0], 4);
    assert_int_equal(out[1], 2);
    assert_int_equal(out[2], 1);
    double z[2] = { 0, 0 };
    st_attrib_cents(269, z, 2, out); /* nothing to weigh: all to the last (the idle line) */
    assert_int_equal(out[0], 0);
    assert_int_equal(out[1], 269);
    /* many uneven weights: always the exact total */
    double many[17];
    int64_t o17[17];
    for (int k = 1; k < 500; k += 7) {
        for (int i = 0; i < 17; i++)
            many[i] = fmod(i * 0.37 + k * 0.11, 1.0) + (i == 3 ? 5 : 0);
        st_attrib_cents(k * 13 + 1, many, 17, o17);
        int64_t s = 0;
        for (int i = 0; i < 17; i++) {
            assert_true(o17[i] >= 0);
            s += o17[i];
        }
        assert_int_equal(s, k * 13 + 1);
    }
}

static void step_split(void **state)
{
    (void)state;
    st_emu_config c;
    setup_cfg(&c);
    double out[3];
    /* alone in its step: all of it */
    st_emu_seq_work one = { .id = 1, .new_tokens = 1, .context = 500, .decode = 1, .sampled = 1 };
    st_attrib_split_step(&c, &one, 1, 0.02, out);
    assert_near(out[0], 0.02, 1e-12);
    /* a 2000-token prefill chunk beside a decode: the prefill pays most of the step */
    st_emu_seq_work mix[2] = { { .id = 1, .new_tokens = 2000, .context = 0, .sampled = 1 },
                               { .id = 2, .new_tokens = 1, .context = 300, .decode = 1, .sampled = 1 } };
    st_attrib_split_step(&c, mix, 2, 0.1, out);
    assert_near(out[0] + out[1], 0.1, 1e-9);
    assert_true(out[0] > 0.95 * 0.1);
    /* three decodes (memory-bound): the one reading a long KV cache pays more */
    st_emu_seq_work dec[3] = { { .id = 1, .new_tokens = 1, .context = 100, .decode = 1, .sampled = 1 },
                               { .id = 2, .new_tokens = 1, .context = 100, .decode = 1, .sampled = 1 },
                               { .id = 3, .new_tokens = 1, .context = 30000, .decode = 1, .sampled = 1 } };
    st_attrib_split_step(&c, dec, 3, 0.03, out);
    assert_near(out[0] + out[1] + out[2], 0.03, 1e-9);
    assert_near(out[0], out[1], 1e-12);
    assert_true(out[2] > out[0] * 1.05);
    for (int i = 0; i < 3; i++)
        assert_true(out[i] > 0);
}

/* Five LiteLLM rows over 10:00:00 - 10:00:04 UTC: users a, b, none; tags; metadata. */
static const char LOG[] =
    "[{\"startTime\": \"2026-11-30T10:00:00Z\", \"endTime\": \"2026-11-30T10:00:02Z\", \"prompt_tokens\": 2000, "
    "\"completion_tokens\": 20, \"model\": \"m\", \"user\": \"a\", \"team_id\": \"t1\", \"request_tags\": "
    "[\"feature:search\", \"web\"], \"metadata\": {\"project\": \"p1\"}},\n"
    " {\"startTime\": \"2026-11-30T10:00:01Z\", \"prompt_tokens\": 50, \"completion_tokens\": 300, \"model\": \"m\", "
    "\"user\": \"b\", \"metadata\": {\"user_api_key_team_id\": \"t2\", \"feature\": \"chat\"}},\n"
    " {\"startTime\": \"2026-11-30T10:00:02Z\", \"prompt_tokens\": 60, \"completion_tokens\": 200, \"model\": \"m\", "
    "\"user\": null},\n"
    " {\"startTime\": \"2026-11-30T10:00:03Z\", \"prompt_tokens\": 1500, \"completion_tokens\": 10, \"model\": \"m\", "
    "\"user\": \"\"},\n"
    " {\"startTime\": \"2026-11-30T10:00:04Z\", \"prompt_tokens\": 40, \"completion_tokens\": 250, \"model\": \"m\", "
    "\"user\": \"b\"}]\n";

static uint32_t find_tenant(const st_attrib *a, const char *name)
{
    for (uint32_t i = 0; i < a->n_tenants; i++)
        if (!strcmp(a->t[i].name, name))
            return i;
    fail_msg("no tenant %s", name);
    return 0;
}

static void read_log(st_attrib *a, const char *by)
{
    char err[512];
    st_attrib_init(a, by);
    st_trace_opts o = { 0 };
    st_trace_counts c;
    if (st_trace_read_buffer(LOG, sizeof LOG - 1, "log.json", &o, st_attrib_row_cb, a, &c, NULL, err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(c.kept, 5);
    assert_int_equal(a->n_req, 5);
}

static void tenant_fields(void **state)
{
    (void)state;
    st_attrib a;
    read_log(&a, "user");
    assert_int_equal(a.n_tenants, 3); /* a, b, unattributed (null and "" both) */
    uint32_t rows[3] = { 0, 0, 0 };
    for (uint32_t i = 0; i < a.n_req; i++)
        rows[a.req[i].tenant]++;
    assert_int_equal(rows[find_tenant(&a, "a")], 1);
    assert_int_equal(rows[find_tenant(&a, "b")], 2);
    assert_int_equal(rows[find_tenant(&a, ST_ATTRIB_UNATTRIBUTED)], 2);
    st_attrib_free(&a);
    read_log(&a, "team");
    find_tenant(&a, "t1");
    find_tenant(&a, "t2"); /* from metadata.user_api_key_team_id */
    find_tenant(&a, ST_ATTRIB_UNATTRIBUTED);
    assert_int_equal(a.n_tenants, 3);
    st_attrib_free(&a);
    read_log(&a, "feature");
    find_tenant(&a, "search"); /* the request tag feature:search */
    find_tenant(&a, "chat");   /* metadata.feature */
    st_attrib_free(&a);
    read_log(&a, "tag");
    find_tenant(&a, "feature:search+web");
    st_attrib_free(&a);
    read_log(&a, "metadata.project");
    find_tenant(&a, "p1");
    assert_int_equal(a.n_tenants, 2);
    st_attrib_free(&a);
    read_log(&a, "model");
    assert_int_equal(a.n_tenants, 1);
    st_attrib_free(&a);
}

/* Many tenants: each row finds its own (the name index grows), rows without one go together. */
static void many_tenants(void **state)
{
    (void)state;
    enum { ROWS = 3000, USERS = 1000 };
    static char log[ROWS * 160];
    size_t n = 0;
    n += (size_t)snprintf(log + n, sizeof log - n, "[");
    for (int i = 0; i < ROWS; i++) {
        char user[40] = "";
        if (i % 7 != 3)
            snprintf(user, sizeof user, ", \"user\": \"u%d\"", (i * 37) % USERS);
        n += (size_t)snprintf(log + n, sizeof log - n,
                              "%s{\"startTime\": %d, \"prompt_tokens\": 10, \"completion_tokens\": 5%s}\n",
                              i ? "," : "", 1000 + i, user);
    }
    n += (size_t)snprintf(log + n, sizeof log - n, "]");
    assert_true(n < sizeof log - 1);
    st_attrib a;
    st_attrib_init(&a, "user");
    char err[512];
    st_trace_opts o = { 0 };
    if (st_trace_read_buffer(log, n, "many.json", &o, st_attrib_row_cb, &a, NULL, NULL, err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(a.n_req, ROWS);
    assert_int_equal(a.n_tenants, USERS + 1);
    for (uint32_t i = 0; i < a.n_req; i++) {
        int row = (int)a.req[i].ts_s - 1000;
        char want[40];
        if (row % 7 == 3)
            snprintf(want, sizeof want, "%s", ST_ATTRIB_UNATTRIBUTED);
        else
            snprintf(want, sizeof want, "u%d", (row * 37) % USERS);
        assert_string_equal(a.t[a.req[i].tenant].name, want);
    }
    st_attrib_free(&a);
}

/* A session's turns share their prompt prefix in the replay: the same log with session ids costs
 * less GPU time than without (the prefix cache serves the history), and its split still sums to
 * the busy time. */
static double session_busy(int with_sessions, uint32_t replicas)
{
    static char log[16384];
    size_t n = 0;
    n += (size_t)snprintf(log + n, sizeof log - n, "[");
    for (int s = 0; s < 5; s++)
        for (int t = 0; t < 4; t++) {
            char sid[48] = "";
            if (with_sessions)
                snprintf(sid, sizeof sid, ", \"session_id\": \"s%d\"", s);
            n += (size_t)snprintf(log + n, sizeof log - n,
                                  "%s{\"startTime\": %d, \"prompt_tokens\": %d, \"completion_tokens\": 5, "
                                  "\"user\": \"u%d\"%s}\n",
                                  n > 1 ? "," : "", 1000 + t * 20 + s, 8000 + t * 1000, s % 2, sid);
        }
    n += (size_t)snprintf(log + n, sizeof log - n, "]");
    st_attrib a;
    st_attrib_init(&a, "user");
    char err[512];
    st_trace_opts o = { 0 };
    if (st_trace_read_buffer(log, n, "s.json", &o, st_attrib_row_cb, &a, NULL, NULL, err, sizeof err))
        fail_msg("%s", err);
    st_emu_config c;
    setup_cfg(&c);
    if (st_attrib_replay(&a, &c, replicas, err, sizeof err))
        fail_msg("%s", err);
    double g = 0;
    uint64_t req = 0;
    for (uint32_t i = 0; i < a.n_tenants; i++) {
        g += a.t[i].gpu_s;
        req += a.t[i].requests;
    }
    assert_near(g, a.busy_s, 1e-6 * a.busy_s);
    assert_int_equal(req, 20);
    double busy = a.busy_s;
    st_attrib_free(&a);
    return busy;
}

static void sessions_share_prefix(void **state)
{
    (void)state;
    double with = session_busy(1, 1), without = session_busy(0, 1);
    print_message("busy: %.3f s with sessions, %.3f s without\n", with, without);
    assert_true(with < 0.7 * without);
    /* on 3 replicas a session keeps to one (affinity): its history is still in that cache */
    double with3 = session_busy(1, 3), without3 = session_busy(0, 3);
    print_message("3 replicas: %.3f s with sessions, %.3f s without\n", with3, without3);
    assert_true(with3 < 0.7 * without3);
}

static void replay_and_reconcile(void **state)
{
    (void)state;
    st_emu_config c;
    setup_cfg(&c);
    st_attrib a;
    read_log(&a, "user");
    char err[512];
    if (st_attrib_replay(&a, &c, 1, err, sizeof err))
        fail_msg("%s", err);
    assert_true(a.steps > 0);
    assert_true(a.busy_s > 0);
    /* nothing lost: the tenants' GPU seconds are the busy time */
    double g = 0, st = 0, sd = 0, sm = 0;
    uint64_t req = 0;
    for (uint32_t i = 0; i < a.n_tenants; i++) {
        g += a.t[i].gpu_s;
        sm += a.t[i].share_model;
        st += a.t[i].share_tokens;
        sd += a.t[i].share_duration;
        req += a.t[i].requests;
    }
    assert_int_equal(req, 5); /* the rows without a user are counted, not dropped */
    assert_near(g, a.busy_s, 1e-6 * a.busy_s);
    assert_near(sm, 1, 1e-9);
    assert_near(st, 1, 1e-9);
    assert_near(sd, 1, 1e-9);
    assert_near(a.busy_s + a.idle_s, a.span_s, 1e-6);
    /* user a: 2000 prompt tokens, 20 answers; b: 90 prompt, 550 answers. Per token a pays most;
     * on the GPU the decodes of b weigh more than their token count says */
    uint32_t ia = find_tenant(&a, "a"), ib = find_tenant(&a, "b");
    assert_true(a.t[ia].share_tokens > a.t[ib].share_tokens);
    assert_true(a.t[ib].share_model > a.t[ib].share_tokens);
    /* a bill: 09:00 (before the log: all idle), 10:00 (the log), 11:00 (after), in dollars
     * that do not divide evenly; one record of 10:00 is split over two endpoints */
    static const char BILL[] =
        "{\"data\": [{\"amount\": 2.69, \"endpointId\": \"e1\", \"gpuTypeId\": \"H100\", \"time\": "
        "\"2026-11-30T09:00:00Z\"},\n"
        "{\"amount\": 1.333, \"endpointId\": \"e1\", \"time\": \"2026-11-30T10:00:00Z\", \"timeBilledMs\": 4000},\n"
        "{\"amount\": 1.01, \"endpointId\": \"e2\", \"time\": \"2026-11-30T10:00:00Z\", \"timeBilledMs\": 4000},\n"
        "{\"amount\": 0.07, \"podId\": \"p9\", \"time\": \"2026-11-30T11:00:00Z\"}]}";
    st_bill b;
    if (st_bill_parse("bill.json", BILL, sizeof BILL - 1, 0, &b, err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(b.n, 3);
    assert_near(b.width_s, 3600, 0);
    assert_int_equal(b.b[1].cents, 234);
    assert_string_equal(b.b[1].id, "e1+e2");
    assert_near(b.b[1].billed_s, 8, 1e-9); /* serverless: 8 s billed in that hour */
    st_recon r;
    if (st_attrib_reconcile(&a, &b, &r, err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(r.uncovered, 2);
    int64_t per[3] = { 0, 0, 0 }, idle[3] = { 0, 0, 0 };
    for (uint32_t k = 0; k < r.n; k++) {
        per[r.v[k].bucket] += r.v[k].cents;
        if (r.v[k].tenant == a.n_tenants)
            idle[r.v[k].bucket] += r.v[k].cents;
    }
    assert_int_equal(per[0], 269); /* to the cent, per bucket */
    assert_int_equal(per[1], 234);
    assert_int_equal(per[2], 7);
    assert_int_equal(idle[0], 269); /* hours the log does not cover: unattributed idle */
    assert_int_equal(idle[2], 7);
    assert_true(idle[1] > 0 && idle[1] < 234); /* the log's hour: the billed 8 s, partly busy */
    assert_true(a.busy_s < 8);
    assert_int_equal(r.total_cents, 269 + 234 + 7);
    /* the report's "Who pays" section from the same split */
    char *js = st_attrib_json(&a, 2.5, NULL, NULL);
    assert_non_null(js);
    json_t *wp = st_rep_who_pays_load(js);
    free(js);
    assert_non_null(wp);
    st_buf md;
    st_buf_init(&md, 1 << 20);
    st_rep_who_pays_markdown(wp, &md);
    static char cells[ST_REP_WHOPAYS_ROWS + 2][ST_REP_WHOPAYS_COLS][ST_REP_WHOPAYS_CELL];
    char intro[700];
    assert_int_equal(st_rep_who_pays_table(wp, cells, intro, sizeof intro), 4); /* b, unattributed, a, idle */
    assert_string_equal(cells[0][0], "b");
    assert_string_equal(cells[3][0], "idle (unattributed)");
    assert_non_null(strstr(intro, "by user"));
    json_decref(wp);
    assert_non_null(md.data);
    assert_non_null(strstr(md.data, "## Who pays"));
    assert_non_null(strstr(md.data, "| unattributed | 2 |"));
    assert_non_null(strstr(md.data, "| idle (unattributed) |"));
    /* largest GPU time first: b's decodes before a's single prefill-heavy request */
    assert_true(strstr(md.data, "| b | 2 |") < strstr(md.data, "| a | 1 |"));
    st_buf_free(&md);
    assert_null(st_rep_who_pays_load("{\"tenants\": 3}")); /* malformed: the section is left out */
    char *ev = st_recon_events(&a, &b, &r, "cost", 0);
    assert_non_null(ev);
    assert_non_null(strstr(ev, "\"timestamp\": \"2026-11-30T09:00:00Z\""));
    assert_null(strstr(ev, "\"timestamp\": \"2026-12")); /* never ingest time */
    assert_non_null(strstr(ev, "\"distinct_id\": \"user:idle (unattributed)\""));
    free(ev);
    ev = st_recon_events(&a, &b, &r, "cost", 1);
    assert_non_null(ev);
    assert_non_null(strstr(ev, "\"distinct_id\": \"user:idle (unattributed)\"")); /* idle keeps the prefix */
    free(ev);
    char *csv = st_recon_csv(&a, &b, &r);
    assert_non_null(csv);
    assert_non_null(strstr(csv, "2026-11-30T09:00:00Z,3600,idle (unattributed),2.69,"));
    free(csv);
    st_recon_free(&r);
    st_bill_free(&b);
    st_attrib_free(&a);
}

static void bills(void **state)
{
    (void)state;
    st_bill b;
    char err[512];
    static const char CSV[] = "time,amount\n2026-11-29,10.00\n2026-11-30,5.5\n2026-12-02,1\n";
    if (st_bill_parse("b.csv", CSV, sizeof CSV - 1, 0, &b, err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(b.n, 3);
    assert_near(b.width_s, 86400, 0); /* whole days apart: daily buckets */
    assert_int_equal(b.b[1].cents, 550);
    st_bill_free(&b);
    static const char BAD[] = "time,amount\n2026-11-29T01:00:00Z,10\n2026-11-29T02:00:00Z,-1\n";
    assert_int_equal(st_bill_parse("b.csv", BAD, sizeof BAD - 1, 0, &b, err, sizeof err), -1);
    assert_non_null(strstr(err, "b.csv:3: amount"));
    static const char NOCOL[] = "when,amount\n1,2\n";
    assert_int_equal(st_bill_parse("b.csv", NOCOL, sizeof NOCOL - 1, 0, &b, err, sizeof err), -1);
    assert_non_null(strstr(err, "time and amount"));
    static const char JBAD[] = "[{\"amount\": 1, \"time\": \"yesterday\"}]";
    assert_int_equal(st_bill_parse("b.json", JBAD, sizeof JBAD - 1, 0, &b, err, sizeof err), -1);
    assert_non_null(strstr(err, "record 1: time"));
    static const char JSTR[] = "[{\"amount\": \"2.69\", \"time\": 1796032800}]";
    if (st_bill_parse("b.json", JSTR, sizeof JSTR - 1, 0, &b, err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(b.b[0].cents, 269);
    assert_near(b.b[0].t_s, 1796032800.0, 0);
    st_bill_free(&b);
    static const char EMPTY[] = "[]";
    assert_int_equal(st_bill_parse("b.json", EMPTY, sizeof EMPTY - 1, 0, &b, err, sizeof err), -1);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(cents_exact),
        cmocka_unit_test(step_split),
        cmocka_unit_test(tenant_fields),
        cmocka_unit_test(many_tenants),
        cmocka_unit_test(sessions_share_prefix),
        cmocka_unit_test(replay_and_reconcile),
        cmocka_unit_test(bills),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
