/* The runner against a misbehaving server on 127.0.0.1: every kind of failure
 * becomes a failed record with its reason while the run goes on; TTFT is measured from the
 * scheduled time when the server is slow (no coordinated omission). */
#include "harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "load/arrival.h"
#include "load/runner.h"
#include "mock_server.h"

typedef struct run_ctx {
    st_workload w;
    st_ns *sched;
    st_run_result res;
} run_ctx;

/* n synthetic requests, constant rate (or all at once when rate <= 0). */
static int bench_api = ST_API_COMPLETIONS;

static int run_bench_ex(const char *url, uint32_t n, double rate, uint32_t maxc, double timeout_s, size_t max_event,
                        uint32_t warmup, int stream, run_ctx *rc)
{
    st_synth_params sp = { .input_len = 32, .output_len = 4, .num_requests = n, .seed = 1 };
    char err[256];
    assert_int_equal(st_workload_synthetic(&sp, &rc->w, err, sizeof err), 0);
    rc->sched = calloc(n, sizeof *rc->sched);
    st_arrival a = { rate > 0 ? ST_ARR_CONSTANT : ST_ARR_INF, rate > 0 ? rate : INFINITY, 1, 1 };
    assert_int_equal(st_arrival_schedule(&a, n, rc->sched), 0);
    st_runner_config cfg = { 0 };
    cfg.url = url;
    cfg.api = bench_api;
    cfg.stream = stream;
    cfg.warmup = warmup;
    cfg.model = "mock-model";
    cfg.work = &rc->w;
    cfg.schedule = rc->sched;
    cfg.max_concurrency = maxc;
    cfg.timeout_s = timeout_s;
    cfg.max_event = max_event;
    int r = st_runner_run(&cfg, &rc->res, err, sizeof err);
    if (r < 0)
        fail_msg("runner: %s", err);
    return r;
}

static int run_bench(const char *url, uint32_t n, double rate, uint32_t maxc, double timeout_s, size_t max_event,
                     run_ctx *rc)
{
    return run_bench_ex(url, n, rate, maxc, timeout_s, max_event, 0, 1, rc);
}

static void run_free(run_ctx *rc)
{
    st_run_result_free(&rc->res);
    st_workload_free(&rc->w);
    free(rc->sched);
}

static void expect(const st_record *r, st_req_status st, const char *needle)
{
    if (r->status != st)
        fail_msg("request %u: status %s (%s), expected %s", r->id, st_req_status_name(r->status),
                 r->error ? r->error : "-", st_req_status_name(st));
    if (needle && (!r->error || !strstr(r->error, needle)))
        fail_msg("request %u: error '%s' does not mention '%s'", r->id, r->error ? r->error : "(none)", needle);
    assert_true(r->end >= 0 || (st == ST_REQ_ABORTED && r->sent < 0));
}

static void ok_stream_records_every_time(void **state)
{
    (void)state;
    mock *m = mock_start();
    m->tokens = 6;
    mock_run(m);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/ok", mock_port(m));
    run_ctx rc = { 0 };
    run_bench(url, 20, 500, 0, 10, 0, &rc);
    for (uint32_t i = 0; i < 20; i++) {
        const st_record *r = &rc.res.records[i];
        expect(r, ST_REQ_OK, NULL);
        assert_int_equal(r->n_events, 6);
        assert_int_equal(r->output_tokens, 6);
        assert_int_equal(r->usage_reported, 1);
        assert_int_equal(r->input_tokens, 32);
        assert_true(r->scheduled <= r->sent && r->sent <= r->first_byte && r->first_byte <= r->first_token &&
                    r->first_token <= r->end);
        for (uint32_t k = 1; k < r->n_events; k++)
            assert_true(st_record_event(r, k) >= st_record_event(r, k - 1));
        assert_null(r->error);
    }
    assert_true(rc.res.connections_opened >= 1);
    run_free(&rc);
    mock_stop(m);
}

/* One run through every failure mode in turn on one keep-alive pool, strictly one at a time:
 * each ends with its reason and the next request still runs. */
static void every_failure_mode_in_one_run(void **state)
{
    (void)state;
    mock *m = mock_start();
    static const struct {
        int mode;
        st_req_status st;
        const char *needle;
    } plan[] = {
        { M_OK, ST_REQ_OK, NULL },
        { M_500, ST_REQ_HTTP_STATUS, "HTTP 500: boom" },
        { M_OK, ST_REQ_OK, NULL },
        { M_ERREVENT, ST_REQ_STREAM_ERROR, "overloaded" },
        { M_MALFORMED, ST_REQ_MALFORMED, "malformed event" },
        { M_OVERSIZED, ST_REQ_TOO_LARGE, "SSE" },
        { M_OK, ST_REQ_OK, NULL },
        { M_STALL, ST_REQ_TIMEOUT, "no complete response" },
        { M_RESET, ST_REQ_RESET, NULL },
        { M_CLOSE, ST_REQ_RESET, "before the response was complete" },
        { M_INCOMPLETE, ST_REQ_INCOMPLETE, "without a final event" },
        { M_BADHTTP, ST_REQ_MALFORMED, "HTTP" },
        { M_OK, ST_REQ_OK, NULL },
    };
    int np = (int)(sizeof plan / sizeof plan[0]);
    for (int i = 0; i < np; i++)
        m->seq[i] = plan[i].mode;
    m->nseq = np;
    mock_run(m);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/seq", mock_port(m));
    run_ctx rc = { 0 };
    run_bench(url, (uint32_t)np, 0, 1, 0.5, 16 * 1024, &rc);
    for (int i = 0; i < np; i++)
        expect(&rc.res.records[i], plan[i].st, plan[i].needle);
    assert_int_equal(rc.res.records[1].http_status, 500);
    assert_int_equal(rc.res.records[3].n_events, 1); /* the token before the error was recorded */
    assert_int_equal(atomic_load(&m->requests), np);
    run_free(&rc);
    mock_stop(m);
}

/* Warm-ups run first; the measured schedule starts when they have all finished; a bounded
 * pool is reused (connections never exceed max_concurrency on a keep-alive server). */
static void warmup_and_pool_reuse(void **state)
{
    (void)state;
    mock *m = mock_start();
    mock_run(m);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/ok", mock_port(m));
    run_ctx rc = { 0 };
    run_bench_ex(url, 24, 400, 2, 10, 0, 4, 1, &rc);
    st_ns warm_end = 0;
    for (uint32_t i = 0; i < 4; i++) {
        assert_int_equal(rc.res.records[i].warmup, 1);
        expect(&rc.res.records[i], ST_REQ_OK, NULL);
        if (rc.res.records[i].end > warm_end)
            warm_end = rc.res.records[i].end;
    }
    for (uint32_t i = 4; i < 24; i++) {
        assert_int_equal(rc.res.records[i].warmup, 0);
        expect(&rc.res.records[i], ST_REQ_OK, NULL);
        assert_true(rc.res.records[i].scheduled >= warm_end);
    }
    assert_true(rc.res.connections_opened <= 2);
    assert_true(rc.res.max_in_flight <= 2);
    run_free(&rc);
    mock_stop(m);
}

static void non_streaming_requests(void **state)
{
    (void)state;
    mock *m = mock_start();
    mock_run(m);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/ok", mock_port(m));
    run_ctx rc = { 0 };
    run_bench_ex(url, 5, 200, 0, 10, 0, 0, 0, &rc);
    for (uint32_t i = 0; i < 5; i++) {
        const st_record *r = &rc.res.records[i];
        expect(r, ST_REQ_OK, NULL);
        assert_int_equal(r->output_tokens, 3);
        assert_int_equal(r->usage_reported, 1);
        assert_true(r->first_token == r->end);
    }
    run_free(&rc);
    mock_stop(m);
}

/* The server closes each keep-alive connection 50 ms after a complete answer; the client
 * reuses it before that, so the next request dies with no byte of answer: it is retried once
 * on a fresh connection and succeeds. */
static void stale_keepalive_is_retried(void **state)
{
    (void)state;
    mock *m = mock_start();
    mock_run(m);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/closelater", mock_port(m));
    run_ctx rc = { 0 };
    run_bench(url, 6, 0, 1, 10, 0, &rc);
    for (uint32_t i = 0; i < 6; i++)
        expect(&rc.res.records[i], ST_REQ_OK, NULL);
    assert_true(rc.res.retries >= 1);
    run_free(&rc);
    mock_stop(m);
}

/* [DONE] arrives but the HTTP message never ends: each request is complete at [DONE], and
 * under max_concurrency 1 the next one gets its connection after the drain timeout. */
static void done_without_message_end(void **state)
{
    (void)state;
    mock *m = mock_start();
    mock_run(m);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/noterm", mock_port(m));
    run_ctx rc = { 0 };
    run_bench(url, 3, 0, 1, 10, 0, &rc);
    for (uint32_t i = 0; i < 3; i++) {
        expect(&rc.res.records[i], ST_REQ_OK, NULL);
        assert_int_equal(rc.res.records[i].output_tokens, 4);
    }
    assert_int_equal(rc.res.connections_opened, 3);
    assert_true(rc.res.records[2].sent - rc.res.records[1].end >= 40 * ST_NS_PER_MS);
    run_free(&rc);
    mock_stop(m);
}

/* An API without [DONE] (TGI): the request completes at the end of the body, after the
 * event that carries details; the token count comes from details.generated_tokens. */
static void tgi_stream_without_done(void **state)
{
    (void)state;
    mock *m = mock_start();
    m->tokens = 5;
    mock_run(m);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/tgi", mock_port(m));
    run_ctx rc = { 0 };
    bench_api = ST_API_TGI;
    run_bench(url, 4, 500, 2, 10, 0, &rc);
    bench_api = ST_API_COMPLETIONS;
    for (uint32_t i = 0; i < 4; i++) {
        const st_record *r = &rc.res.records[i];
        expect(r, ST_REQ_OK, NULL);
        assert_int_equal(r->n_events, 5);
        assert_int_equal(r->output_tokens, 5);
        assert_int_equal(r->usage_reported, 1);
    }
    assert_true(rc.res.connections_opened <= 2);
    run_free(&rc);
    mock_stop(m);
}

static uint16_t closed_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = 0 };
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    bind(fd, (struct sockaddr *)&a, sizeof a);
    socklen_t l = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &l);
    close(fd); /* nothing listens there now */
    return ntohs(a.sin_port);
}

static void refused_and_tls_failures(void **state)
{
    (void)state;
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/", closed_port());
    run_ctx rc = { 0 };
    run_bench(url, 5, 1000, 0, 2, 0, &rc);
    for (uint32_t i = 0; i < 5; i++)
        expect(&rc.res.records[i], ST_REQ_CONNECT, "refused");
    run_free(&rc);

    /* https to a plain-HTTP server: the handshake fails */
    mock *m = mock_start();
    mock_run(m);
    snprintf(url, sizeof url, "https://127.0.0.1:%u/ok", mock_port(m));
    run_ctx rc2 = { 0 };
    run_bench(url, 3, 1000, 0, 2, 0, &rc2);
    for (uint32_t i = 0; i < 3; i++)
        expect(&rc2.res.records[i], ST_REQ_TLS, "TLS");
    run_free(&rc2);
    mock_stop(m);
}

/* The server takes 50 ms per request and the client may have one in flight, while the
 * schedule asks for one every 10 ms: request k can only start at ~50k ms, so its TTFT from
 * the SCHEDULED time grows by ~40 ms per request. A generator that measured from its own
 * send time would report ~50 ms for every request. */
static void ttft_from_scheduled_time(void **state)
{
    (void)state;
    mock *m = mock_start();
    m->slow_ms = 50;
    m->tokens = 1;
    mock_run(m);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/slow", mock_port(m));
    run_ctx rc = { 0 };
    run_bench(url, 8, 100, 1, 10, 0, &rc);
    for (uint32_t i = 0; i < 8; i++)
        expect(&rc.res.records[i], ST_REQ_OK, NULL);
    const st_record *last = &rc.res.records[7];
    double ttft = st_record_ttft(last);
    double from_send = st_ns_to_s(last->first_token - last->sent);
    print_message("# last request: TTFT from schedule %.1f ms, from send %.1f ms, lag %.1f ms\n", ttft * 1e3,
                  from_send * 1e3, st_record_lag(last) * 1e3);
    assert_true(ttft >= 0.3); /* 7 * 50 - 70 + 50 = 330 ms expected */
    assert_true(from_send < ttft - 0.2);
    assert_true(st_record_lag(last) >= 0.25); /* the wait for a slot is recorded, not hidden */
    /* waiting for a max-concurrency slot is not client lag: only request 0 (which found a
     * free slot) counts in the self-check's dispatch lag */
    assert_int_equal(rc.res.dispatch_lag.n, 1);
    run_free(&rc);
    mock_stop(m);
}

static void *raise_stop_later(void *a)
{
    volatile sig_atomic_t *stop = a;
    usleep(300 * 1000);
    *stop = 1;
    return NULL;
}

static void stop_flag_aborts_the_rest(void **state)
{
    (void)state;
    mock *m = mock_start();
    mock_run(m);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/stall", mock_port(m));
    st_synth_params sp = { .input_len = 16, .output_len = 4, .num_requests = 10, .seed = 1 };
    st_workload w;
    char err[256];
    assert_int_equal(st_workload_synthetic(&sp, &w, err, sizeof err), 0);
    st_ns sched[10];
    for (int i = 0; i < 10; i++)
        sched[i] = i < 3 ? 0 : 3600 * ST_NS_PER_S; /* 7 requests an hour away */
    volatile sig_atomic_t stop = 0;
    st_runner_config cfg = { 0 };
    cfg.url = url;
    cfg.api = ST_API_COMPLETIONS;
    cfg.stream = 1;
    cfg.model = "m";
    cfg.work = &w;
    cfg.schedule = sched;
    cfg.timeout_s = 60;
    cfg.stop = &stop;
    st_run_result res;
    pthread_t th;
    pthread_create(&th, NULL, raise_stop_later, (void *)&stop); /* like a SIGINT 300 ms in */
    st_ns t0 = st_now();
    assert_int_equal(st_runner_run(&cfg, &res, err, sizeof err), 0);
    pthread_join(th, NULL);
    assert_true(st_now() - t0 < 10 * ST_NS_PER_S);
    assert_int_equal(res.interrupted, 1);
    for (int i = 0; i < 10; i++) {
        expect(&res.records[i], ST_REQ_ABORTED, "stopped");
        if (i >= 3)
            assert_true(res.records[i].sent < 0);
    }
    st_run_result_free(&res);
    st_workload_free(&w);
    mock_stop(m);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(ok_stream_records_every_time), cmocka_unit_test(every_failure_mode_in_one_run),
        cmocka_unit_test(refused_and_tls_failures),     cmocka_unit_test(warmup_and_pool_reuse),
        cmocka_unit_test(non_streaming_requests),       cmocka_unit_test(stale_keepalive_is_retried),
        cmocka_unit_test(done_without_message_end),     cmocka_unit_test(tgi_stream_without_done),
        cmocka_unit_test(ttft_from_scheduled_time),     cmocka_unit_test(stop_flag_aborts_the_rest),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
