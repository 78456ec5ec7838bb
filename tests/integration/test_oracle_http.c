/* The oracle end to end: `servetune audit` against an HTTP server whose capacity is known
 * (tests/oracle_queue.h: one FIFO slot, exponential service, the first token leaves when the
 * service ends, so the highest rate with p95 TTFT <= S is mu - ln(20) / S). The server is this
 * test binary itself run as `test_oracle_http oracle-serve MODEL --time-scale K --mu X --seed N
 * --host H --port P` (the audit starts it through the vllm adapter with `command:`, waits for
 * /health and /v1/models, scrapes its /metrics, and stops it). It speaks the streaming
 * completions API the load uses and serves in its own time K times faster than the wall clock,
 * so the test stays short. K is 5: the client and the server (both built with sanitizers, on 2
 * cores) spend a few wall milliseconds per request, which count K times in the server's time; at
 * K = 10 that overhead raised the measured p95 TTFT by 50-300 ms near the capacity and the search
 * found 12-13 req/s instead of 15. The audit's sustained capacity must land within 15 % of the analytic
 * value, a rate above the service rate must be found over-saturated, and no server may be left
 * running. Near the capacity a 1,000-request window's p95 is uncertain (the queue builds and
 * drains over many requests): calls that are not confident are replicated, and a false confident
 * failure just under the capacity (a window whose queue happened to build) can collapse the bracket
 * late in the search, which then needs runs left to narrow it again: the search gets 20 runs.
 * Bounded: one audit, at most 560 s (about 200 s on 2 cores). */
#include "harness.h"

#define ST_IT_TMP_PREFIX "/tmp/st_oracle_it."
#include "audit_util.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/parse.h"
#include "net/loop.h"
#include "net/server.h"
#include "oracle_queue.h"

/* ---- the oracle server ---- */

static volatile sig_atomic_t serve_stop;

static void on_term(int sig)
{
    (void)sig;
    serve_stop = 1;
}

typedef struct oserver {
    st_loop *l;
    oracle_queue q;
    double k; /* engine seconds per wall second */
    st_ns t0; /* wall start */
    uint32_t in_system;
    const char *model;
} oserver;

typedef struct ostream {
    st_timer t;
    st_server_resp *resp;
    oserver *o;
} ostream;

static double engine_now(const oserver *o) { return st_ns_to_s(st_now() - o->t0) * o->k; }

static void stream_free(ostream *s)
{
    st_timer_disarm(s->o->l, &s->t);
    free(s);
}

static void on_cancel(void *arg, st_server_resp *r)
{
    (void)r;
    ostream *s = arg;
    if (--s->o->in_system == 0) /* the last one in the system aborted: no backlog is left */
        oracle_queue_empty(&s->o->q, engine_now(s->o));
    stream_free(s);
}

/* The service ended: the first token, the last one, the usage and [DONE]. */
static void on_depart(st_loop *l, void *arg)
{
    (void)l;
    ostream *s = arg;
    static const char a[] = "{\"id\":\"c\",\"choices\":[{\"index\":0,\"text\":\" a\",\"finish_reason\":null}]}";
    static const char b[] = "{\"id\":\"c\",\"choices\":[{\"index\":0,\"text\":\" b\",\"finish_reason\":\"length\"}]}";
    static const char u[] = "{\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":16,\"completion_tokens\":2,"
                            "\"total_tokens\":18}}";
    st_server_resp_on_cancel(s->resp, NULL, NULL);
    st_server_sse_send(s->resp, a, sizeof a - 1);
    st_server_sse_send(s->resp, b, sizeof b - 1);
    st_server_sse_send(s->resp, u, sizeof u - 1);
    st_server_sse_send(s->resp, "[DONE]", 6);
    st_server_stream_end(s->resp);
    s->o->in_system--;
    stream_free(s);
}

static void handler(void *arg, const st_http_parser *req, st_server_resp *resp)
{
    oserver *o = arg;
    char body[512];
    if (!strcmp(req->target, "/health")) {
        st_server_respond(resp, 200, "text/plain", NULL, "", 0);
    } else if (!strcmp(req->target, "/v1/models")) {
        int n = snprintf(body, sizeof body, "{\"object\":\"list\",\"data\":[{\"id\":\"%s\",\"object\":\"model\"}]}",
                         o->model);
        st_server_respond(resp, 200, "application/json", NULL, body, (size_t)n);
    } else if (!strcmp(req->target, "/metrics")) {
        int n = snprintf(body, sizeof body,
                         "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"%s\"} %u\n"
                         "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"%s\"} %u\n",
                         o->model, o->in_system > 0, o->model, o->in_system > 0 ? o->in_system - 1 : 0);
        st_server_respond(resp, 200, "text/plain; version=0.0.4", NULL, body, (size_t)n);
    } else if (strstr(req->target, "/v1/completions")) {
        ostream *s = calloc(1, sizeof *s);
        if (!s) {
            st_server_respond(resp, 503, "text/plain", NULL, "", 0);
            return;
        }
        s->resp = resp;
        s->o = o;
        double d = oracle_queue_depart(&o->q, engine_now(o));
        o->in_system++;
        st_server_stream_start(resp, 200, "text/event-stream", NULL);
        st_server_resp_on_cancel(resp, on_cancel, s);
        st_timer_init(&s->t, on_depart, s);
        st_timer_arm(o->l, &s->t, o->t0 + (st_ns)(d / o->k * 1e9));
    } else {
        st_server_respond(resp, 404, "text/plain", NULL, "no", 2);
    }
}

/* oracle-serve MODEL [--time-scale K] [--mu X] [--seed N] [--host H] [--port P] (other flags ignored) */
static int oracle_serve(int argc, char **argv)
{
    oserver o = { .k = 1, .model = argc > 0 ? argv[0] : "mm1" };
    double mu = 10, seed = 1, port = 0;
    const char *host = "127.0.0.1";
    for (int i = 1; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--time-scale"))
            st_parse_double(argv[++i], &o.k);
        else if (!strcmp(argv[i], "--mu"))
            st_parse_double(argv[++i], &mu);
        else if (!strcmp(argv[i], "--seed"))
            st_parse_double(argv[++i], &seed);
        else if (!strcmp(argv[i], "--port"))
            st_parse_double(argv[++i], &port);
        else if (!strcmp(argv[i], "--host"))
            host = argv[++i];
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    oracle_queue_init(&o.q, mu, (uint64_t)seed);
    o.l = st_loop_new();
    char err[256];
    st_server_config cfg = { .host = host, .port = (uint16_t)port, .handler = handler, .arg = &o };
    st_server *srv = o.l ? st_server_new(o.l, &cfg, err, sizeof err) : NULL;
    if (!srv) {
        fprintf(stderr, "oracle-serve: %s\n", o.l ? err : "out of memory");
        return 1;
    }
    fprintf(stderr, "oracle-serve: M/M/1, mu %g, time scale %g, on %s:%u\n", mu, o.k, host, st_server_port(srv));
    o.t0 = st_now();
    while (!serve_stop)
        st_loop_run_once(o.l, 50 * ST_NS_PER_MS);
    st_server_free(srv);
    st_loop_free(o.l);
    return 0;
}

/* ---- the test ---- */

/* The search's runs, for a failure's log: rate, verdict, confidence, p95 TTFT and why. */
static void print_runs(json_t *c)
{
    size_t i;
    json_t *r;
    json_t *runs = json_object_get(c, "runs");
    json_array_foreach(runs, i, r)
    {
        const char *v = json_string_value(json_object_get(r, "verdict")),
                   *why = json_string_value(json_object_get(r, "why"));
        printf("#   run %zu: %.4g req/s %s%s, p95 TTFT %.4g ms, %s\n", i, json_number_value(json_object_get(r, "rate")),
               v ? v : "?", json_is_true(json_object_get(r, "confident")) ? " (confident)" : "",
               json_number_value(json_object_get(r, "ttft_p95_ms")), why ? why : "");
    }
}

static void audit_finds_the_analytic_capacity(void **state)
{
    (void)state;
    double mu = 20, slo = log(20) / (0.25 * mu), truth = oracle_mm1_capacity(mu, slo); /* 15 req/s */
    char self[4096], spec[512], out[512];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    assert_true(sl > 0);
    self[sl] = '\0';
    snprintf(spec, sizeof spec, "%s/spec.yaml", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    FILE *f = fopen(spec, "w");
    assert_non_null(f);
    fprintf(f,
            "engine:\n  kind: vllm\n  model: mm1\n  command: ['%s', oracle-serve]\n"
            "  flags: [--time-scale, '5', --mu, '%g', --seed, '%d']\n"
            "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.0}\n"
            "peak_rate: 40\n"
            "workload: {input_tokens: 16, output_tokens: 2, seed: 3}\n"
            "rates: [5, 10, 30]\nwarmup_requests: 0\n"
            "slo: {ttft_p95_ms: %.6g, tpot_p95_ms: 100000}\n"
            "search: {tolerance: 0.1, min_window: 20s, min_window_requests: 1000, max_duration: 240s, max_runs: 20, "
            "start: grid}\n"
            "timeouts: {startup: 10s, request: 30s, stop_grace: 2s}\n",
            self, mu, (int)getpid(), slo * 1e3);
    fclose(f);
    const char *args[] = { "audit", spec, "-o", out, NULL };
    assert_int_equal(run_servetune(args, 560), 0);
    json_t *j = load_json(out);
    json_t *c = config_named(j, "baseline");
    json_t *cap = json_object_get(c, "capacity");
    assert_string_equal(json_string_value(json_object_get(cap, "method")), "sustained");
    double found = json_number_value(json_object_get(cap, "rps"));
    printf("# analytic %.4g req/s, found %.4g (%+.1f %%), interval %.4g-%.4g, bracket %.4g-%.4g, %d runs\n", truth,
           found, 100 * (found - truth) / truth, json_number_value(json_object_get(cap, "ci_low")),
           json_number_value(json_object_get(cap, "ci_high")), json_number_value(json_object_get(cap, "pass_rate")),
           json_number_value(json_object_get(cap, "fail_rate")), (int)json_integer_value(json_object_get(cap, "runs")));
    if (!(fabs(found - truth) / truth <= 0.15)) {
        print_runs(c);
        json_decref(j);
        fail_msg("found %g req/s, analytic %g (more than 15 %% off)", found, truth);
    }
    /* every run has a verdict in words; a rate above the service rate is over-saturated (or missed the
     * SLO on the way there, never sustained) */
    json_t *runs = json_object_get(c, "runs");
    size_t i;
    json_t *r;
    int above = 0;
    json_array_foreach(runs, i, r)
    {
        const char *v = json_string_value(json_object_get(r, "verdict"));
        assert_non_null(json_string_value(json_object_get(r, "verdict_text")));
        if (json_number_value(json_object_get(r, "rate")) > mu) {
            above++;
            assert_true(!strcmp(v, "oversaturated") || !strcmp(v, "fail"));
        }
    }
    assert_true(above >= 1);
    json_decref(j);
    /* the engine was stopped: nothing answers on its port any more (the audit stops its group) */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "pgrep -f -- 'oracle-serve mm1 .*--seed %d( |$)' >/dev/null 2>&1", (int)getpid());
    for (int k = 0; k < 50 && system(cmd) == 0; k++) {
        struct timespec ts = { 0, 100000000 };
        nanosleep(&ts, NULL);
    }
    assert_int_not_equal(system(cmd), 0);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "oracle-serve"))
        return oracle_serve(argc - 2, argv + 2);
    const struct CMUnitTest t[] = {
        cmocka_unit_test_setup_teardown(audit_finds_the_analytic_capacity, setup, teardown),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
