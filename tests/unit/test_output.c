#include "harness.h"

#include <jansson.h>
#include <stdio.h>

#include "load/output.h"

#define MS(x) ((st_ns)(x)*ST_NS_PER_MS)

static st_record recs[3];

static int setup(void **state)
{
    (void)state;
    for (uint32_t i = 0; i < 3; i++)
        st_record_init(&recs[i], i);
    recs[0].warmup = 1;
    recs[0].scheduled = 0, recs[0].sent = 0, recs[0].first_token = MS(5), recs[0].end = MS(9);
    recs[0].output_tokens = 1;
    st_record_add_event(&recs[0], MS(5));
    recs[1].scheduled = MS(10), recs[1].sent = MS(11), recs[1].first_byte = MS(50), recs[1].first_token = MS(60);
    recs[1].end = MS(260), recs[1].input_tokens = 100, recs[1].output_requested = 3, recs[1].output_tokens = 3;
    recs[1].cached_tokens = 64, recs[1].usage_reported = 1, recs[1].http_status = 200;
    st_record_add_event(&recs[1], MS(60));
    st_record_add_event(&recs[1], MS(160));
    st_record_add_event(&recs[1], MS(260));
    recs[2].scheduled = MS(1010), recs[2].sent = MS(1012), recs[2].end = MS(1100), recs[2].http_status = 400;
    recs[2].input_tokens = 100, recs[2].output_requested = 3;
    const char *msg = "bad \"request\",\nsecond line";
    st_record_set_error(&recs[2], ST_REQ_HTTP_STATUS, msg, strlen(msg));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++)
        st_record_free(&recs[i]);
    return 0;
}

static st_bench_info make_info(void)
{
    st_bench_info in = { 0 };
    in.url = "http://127.0.0.1:8000";
    in.api = "completions";
    in.model = "Qwen/Qwen3-8B";
    in.stream = 1;
    in.workload = "synthetic";
    in.input_len = 100, in.output_len = 3, in.range_ratio = 0, in.seed = 7;
    in.num_requests = 3, in.warmup = 1;
    in.arrival = "poisson", in.rate = 1.0, in.burstiness = 1;
    in.timeout_s = 30;
    in.opts.slo.ttft_s = 0.1;
    in.opts.slo.tpot_s = 0.2;
    in.max_lag_ms = 10;
    in.started_wall_ns = 1764400000LL * 1000000000LL;
    return in;
}

static char *capture_json(const st_bench_info *in, const st_summary *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(st_output_json_write(f, in, s, recs, 3), 0);
    fclose(f);
    return buf;
}

static void json_round_trip(void **state)
{
    (void)state;
    st_bench_info in = make_info();
    st_summary s;
    assert_int_equal(st_summary_compute(recs, 3, &in.opts, &s), 0);
    char *text = capture_json(&in, &s);
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    if (!j)
        fail_msg("output is not JSON: %s", e.text);
    assert_string_equal(json_string_value(json_object_get(j, "schema")), "servetune.bench/1");
    assert_string_equal(json_string_value(json_object_get(j, "started_at")), "2025-11-29T07:06:40Z");
    json_t *cfg = json_object_get(j, "config");
    assert_string_equal(json_string_value(json_object_get(cfg, "api")), "completions");
    assert_near(json_real_value(json_object_get(json_object_get(cfg, "slo"), "ttft_ms")), 100, 1e-9);
    assert_true(json_is_null(json_object_get(json_object_get(cfg, "slo"), "e2e_ms")));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(cfg, "workload"), "input_len")), 100);
    json_t *sum = json_object_get(j, "summary");
    json_t *req = json_object_get(sum, "requests");
    assert_int_equal(json_integer_value(json_object_get(req, "completed")), 1);
    assert_int_equal(json_integer_value(json_object_get(req, "failed")), 1);
    assert_int_equal(json_integer_value(json_object_get(req, "warmup")), 1);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(req, "failed_by_reason"), "http_status")), 1);
    json_t *ttft = json_object_get(json_object_get(sum, "latency_ms"), "ttft");
    assert_near(json_real_value(json_object_get(ttft, "p50")), 50, 1e-9);
    assert_int_equal(json_integer_value(json_object_get(ttft, "n")), 1);
    /* One request: no TPOT spread issue; 3 tokens over 200 ms -> 100 ms. */
    assert_near(json_real_value(json_object_get(json_object_get(json_object_get(sum, "latency_ms"), "tpot"), "mean")),
                100, 1e-9);
    assert_near(json_real_value(json_object_get(sum, "duration_s")), 1.089, 1e-9);
    assert_near(json_real_value(json_object_get(sum, "offered_rate_rps")), 1.0, 1e-9);
    /* Goodput: TTFT 50 ms <= 100, TPOT 100 <= 200. */
    assert_int_equal(json_integer_value(json_object_get(sum, "good")), 1);
    json_t *st = json_object_get(sum, "steady_state");
    assert_true(json_is_true(json_object_get(st, "valid")));
    assert_near(json_real_value(json_object_get(st, "end_s")), 1.010, 1e-9);
    /* NaN becomes null: no ITL in... there are 2 gaps, so ITL exists; client lag too. */
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(json_object_get(sum, "latency_ms"), "itl"), "n")), 2);
    json_t *records = json_object_get(j, "records");
    assert_int_equal(json_array_size(records), 3);
    json_t *r1 = json_array_get(records, 1);
    assert_string_equal(json_string_value(json_object_get(r1, "status")), "ok");
    assert_true(json_is_null(json_object_get(r1, "error")));
    assert_int_equal(json_integer_value(json_object_get(r1, "first_token_ns")), MS(60));
    assert_near(json_real_value(json_object_get(r1, "ttft_ms")), 50, 1e-9);
    assert_near(json_real_value(json_object_get(r1, "lag_ms")), 1, 1e-9);
    json_t *ev = json_object_get(r1, "event_times_ns");
    assert_int_equal(json_array_size(ev), 3);
    assert_int_equal(json_integer_value(json_array_get(ev, 2)), MS(260));
    assert_true(json_is_true(json_object_get(r1, "usage_reported")));
    json_t *r2 = json_array_get(records, 2);
    assert_string_equal(json_string_value(json_object_get(r2, "status")), "http_status");
    /* the server's line break is a space: no control character reaches a file or a terminal */
    assert_string_equal(json_string_value(json_object_get(r2, "error")), "bad \"request\", second line");
    assert_true(json_is_null(json_object_get(r2, "first_token_ns")));
    assert_true(json_is_null(json_object_get(r2, "ttft_ms")));
    assert_true(json_is_true(json_object_get(json_array_get(records, 0), "warmup")));
    assert_false(json_is_true(json_object_get(json_object_get(j, "self_check"), "client_limited")));
    json_decref(j);
    free(text);
}

static void json_inf_rate_and_limited(void **state)
{
    (void)state;
    st_bench_info in = make_info();
    in.rate = INFINITY;
    in.client_limited = 1;
    in.limited_reason = "p99 event-loop delay 12 ms > 10 ms";
    st_summary s;
    st_summary_compute(recs, 3, NULL, &s);
    char *text = capture_json(&in, &s);
    json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(json_object_get(j, "config"), "arrival"), "rate_rps")),
        "inf");
    json_t *sc = json_object_get(j, "self_check");
    assert_true(json_is_true(json_object_get(sc, "client_limited")));
    assert_string_equal(json_string_value(json_object_get(sc, "reason")), in.limited_reason);
    assert_true(st_output_client_limited(&in, &s));
    json_decref(j);
    free(text);
}

static void streamed_equals_tree(void **state)
{
    (void)state;
    st_bench_info in = make_info();
    st_summary s;
    st_summary_compute(recs, 3, &in.opts, &s);
    char *text = capture_json(&in, &s);
    json_t *streamed = json_loads(text, 0, NULL);
    json_t *tree = st_output_json(&in, &s, recs, 3);
    assert_non_null(streamed);
    assert_non_null(tree);
    /* Same document (reals compared as written, at the writer's 15 significant digits). */
    char *a = json_dumps(streamed, JSON_SORT_KEYS | JSON_COMPACT | JSON_REAL_PRECISION(15));
    char *b = json_dumps(tree, JSON_SORT_KEYS | JSON_COMPACT | JSON_REAL_PRECISION(15));
    assert_non_null(a);
    assert_non_null(b);
    assert_string_equal(a, b);
    free(a);
    free(b);
    /* One line per record. */
    assert_non_null(strstr(text, "\n  {\"id\":1,"));
    json_decref(streamed);
    json_decref(tree);
    free(text);
    /* No records at all. */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(st_output_json_write(f, &in, &s, NULL, 0), 0);
    fclose(f);
    json_t *j = json_loads(buf, 0, NULL);
    assert_non_null(j);
    assert_int_equal(json_array_size(json_object_get(j, "records")), 0);
    json_decref(j);
    free(buf);
}

static void csv_rows(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(st_output_csv(f, recs, 3), 0);
    fclose(f);
    /* Header + 3 rows, every row with the header's number of fields (quotes respected). */
    int lines = 0, fields = 0, header_fields = 0, inq = 0;
    for (char *p = buf; *p; p++) {
        if (*p == '"')
            inq = !inq;
        else if (*p == ',' && !inq)
            fields++;
        else if (*p == '\n' && !inq) {
            if (lines == 0)
                header_fields = fields;
            else
                assert_int_equal(fields, header_fields);
            lines++;
            fields = 0;
        }
    }
    assert_int_equal(lines, 4);
    assert_non_null(strstr(buf, "\n1,0,ok,200,10.000000,11.000000,50.000000,60.000000,260.000000,50.000000,100.000000,"
                                "250.000000,1.000000,100,3,3,64,1,3,,,,,,0,,,\n")); /* no server timings */
    assert_non_null(strstr(buf, "\"bad \"\"request\"\", second line\""));
    assert_non_null(strstr(buf, "2,0,http_status,400,1010.000000,1012.000000,,,1100.000000,,,"));
    free(buf);
}

/* The server's own timings (llama.cpp) in every output: per record, in the summary, the table. */
static void server_timings_out(void **state)
{
    (void)state;
    recs[1].srv_prompt = MS(40), recs[1].srv_gen = MS(150), recs[1].srv_gen_n = 3;
    st_bench_info in = make_info();
    st_summary s;
    assert_int_equal(st_summary_compute(recs, 3, &in.opts, &s), 0);
    char *text = capture_json(&in, &s);
    json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    json_t *sv = json_object_get(json_object_get(j, "summary"), "server_timings_ms");
    assert_int_equal(json_integer_value(json_object_get(sv, "requests")), 1);
    /* TTFT 50 ms from the scheduled time, prompt 40 ms; TPOT 100 ms, the server's 75 ms */
    assert_near(json_real_value(json_object_get(json_object_get(sv, "ttft_minus_prompt"), "p50")), 10, 1e-9);
    assert_near(json_real_value(json_object_get(json_object_get(sv, "tpot_minus_server_tpot"), "p50")), 25, 1e-9);
    assert_near(json_real_value(json_object_get(json_object_get(sv, "prompt"), "max")), 40, 1e-9);
    json_t *r1 = json_array_get(json_object_get(j, "records"), 1);
    assert_near(json_real_value(json_object_get(r1, "server_prompt_ms")), 40, 1e-9);
    assert_near(json_real_value(json_object_get(r1, "server_gen_ms")), 150, 1e-9);
    assert_int_equal(json_integer_value(json_object_get(r1, "server_gen_tokens")), 3);
    assert_true(json_is_null(json_object_get(json_array_get(json_object_get(j, "records"), 2), "server_prompt_ms")));
    json_decref(j);
    free(text);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(st_output_csv(f, recs, 3), 0);
    fclose(f);
    assert_non_null(strstr(buf, ",server_prompt_ms,server_gen_ms,server_gen_tokens,"));
    assert_non_null(strstr(buf, ",64,1,3,,40.000000,150.000000,3,,0,,,\n"));
    free(buf);
    f = open_memstream(&buf, &len);
    st_output_table(f, &in, &s);
    fclose(f);
    assert_non_null(strstr(buf, "Server-reported timings (1 requests"));
    assert_non_null(strstr(buf, "TTFT - prompt p50 / p99:    10.000 / 10.000 ms"));
    free(buf);
    /* without timings the summary says null */
    recs[1].srv_prompt = recs[1].srv_gen = -1;
    assert_int_equal(st_summary_compute(recs, 3, &in.opts, &s), 0);
    text = capture_json(&in, &s);
    j = json_loads(text, 0, NULL);
    assert_true(json_is_null(json_object_get(json_object_get(j, "summary"), "server_timings_ms")));
    json_decref(j);
    free(text);
}

static void table_text(void **state)
{
    (void)state;
    st_bench_info in = make_info();
    st_summary s;
    st_summary_compute(recs, 3, &in.opts, &s);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    st_output_table(f, &in, &s);
    fclose(f);
    assert_non_null(strstr(buf, "1 completed, 1 failed (http_status 1); 1 warm-up excluded"));
    assert_non_null(strstr(buf, "TTFT"));
    assert_non_null(strstr(buf, "Steady state (0.01 s to 1.01 s"));
    assert_non_null(strstr(buf, "Goodput:"));
    assert_non_null(strstr(buf, "Client self-check:            ok"));
    free(buf);
    in.client_limited = 1;
    in.limited_reason = "loop delay";
    f = open_memstream(&buf, &len);
    st_output_table(f, &in, &s);
    fclose(f);
    assert_non_null(strstr(buf, "CLIENT-LIMITED: loop delay"));
    free(buf);
}

/* The failed requests' line for stderr: the count by reason and the first failed measured
 * request's error (its newline sanitized); nothing when none failed. */
static void failures_line(void **state)
{
    (void)state;
    st_bench_info in = make_info();
    st_summary s;
    st_summary_compute(recs, 3, &in.opts, &s);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    st_output_failures(f, "servetune bench", recs, 3, &s);
    fclose(f);
    assert_string_equal(buf, "servetune bench: 1 of 2 requests failed (http_status 1); the first (request 2): bad "
                             "\"request\", second line\n");
    free(buf);
    st_summary_compute(recs, 2, &in.opts, &s);
    f = open_memstream(&buf, &len);
    st_output_failures(f, "servetune bench", recs, 2, &s);
    fclose(f);
    assert_int_equal(len, 0);
    free(buf);
    /* a skipped turn before it (by index) is passed over for the failure that caused it */
    st_record_set_error(&recs[1], ST_REQ_SKIPPED, "an earlier turn failed", 22);
    st_summary_compute(recs, 3, &in.opts, &s);
    f = open_memstream(&buf, &len);
    st_output_failures(f, "servetune bench", recs, 3, &s);
    fclose(f);
    assert_non_null(strstr(buf, "2 of 2 requests failed (http_status 1, skipped 1); the first (request 2): bad"));
    free(buf);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test_setup_teardown(json_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(json_inf_rate_and_limited, setup, teardown),
        cmocka_unit_test_setup_teardown(streamed_equals_tree, setup, teardown),
        cmocka_unit_test_setup_teardown(csv_rows, setup, teardown),
        cmocka_unit_test_setup_teardown(server_timings_out, setup, teardown),
        cmocka_unit_test_setup_teardown(table_text, setup, teardown),
        cmocka_unit_test_setup_teardown(failures_line, setup, teardown),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
