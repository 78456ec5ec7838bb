/* Readiness probe against an in-process net/server on 127.0.0.1 (a thread runs its loop). */
#include "harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "engine/adapter.h"
#include "engine/probe.h"
#include "engine/process.h"
#include "net/server.h"

typedef struct srv {
    st_loop *loop;
    st_server *server;
    atomic_int stop;
    atomic_int health_status;
    const char *models_body;
    pthread_t th;
} srv;

static void handler(void *arg, const st_http_parser *req, st_server_resp *resp)
{
    srv *s = arg;
    if (!strcmp(req->target, "/health")) {
        st_server_respond(resp, atomic_load(&s->health_status), NULL, NULL, "", 0);
    } else if (!strcmp(req->target, "/v1/models")) {
        st_server_respond(resp, 200, "application/json", NULL, s->models_body, strlen(s->models_body));
    } else {
        st_server_respond(resp, 404, "text/plain", NULL, "nope", 4);
    }
}

static void *run(void *arg)
{
    srv *s = arg;
    while (!atomic_load(&s->stop))
        st_loop_run_once(s->loop, 20 * ST_NS_PER_MS);
    return NULL;
}

static void start(srv *s, const char *models)
{
    memset(s, 0, sizeof *s);
    atomic_store(&s->health_status, 200);
    s->models_body = models;
    s->loop = st_loop_new();
    char err[256];
    st_server_config cfg = { .host = "127.0.0.1", .port = 0, .handler = handler, .arg = s };
    s->server = st_server_new(s->loop, &cfg, err, sizeof err);
    if (!s->server)
        fail_msg("%s", err);
    pthread_create(&s->th, NULL, run, s);
}

static void stop(srv *s)
{
    atomic_store(&s->stop, 1);
    pthread_join(s->th, NULL);
    st_server_free(s->server);
    st_loop_free(s->loop);
}

static st_launch launch_for(int port, const char *model)
{
    st_launch l = { 0 };
    l.host = "127.0.0.1";
    l.port = port;
    l.expected_model = (char *)model;
    l.health_path = "/health";
    l.models_path = "/v1/models";
    return l;
}

static void ready_wrong_model_and_refused(void **state)
{
    (void)state;
    srv s;
    start(&s, "{\"object\":\"list\",\"data\":[{\"id\":\"m1\",\"object\":\"model\"}]}");
    int port = st_server_port(s.server);
    char d[512];
    st_launch l = launch_for(port, "m1");
    assert_int_equal(st_adapter_probe(&l, 2, d, sizeof d), ST_PROBE_READY);
    l = launch_for(port, "Qwen/Qwen3-8B");
    assert_int_equal(st_adapter_probe(&l, 2, d, sizeof d), ST_PROBE_WRONG_SERVER);
    assert_non_null(strstr(d, "lists m1, not Qwen/Qwen3-8B"));
    atomic_store(&s.health_status, 503);
    l = launch_for(port, "m1");
    assert_int_equal(st_adapter_probe(&l, 2, d, sizeof d), ST_PROBE_NOT_YET);
    assert_non_null(strstr(d, "HTTP 503"));
    /* the raw GET */
    st_buf body;
    st_buf_init(&body, 1 << 16);
    int status;
    char err[256];
    assert_int_equal(st_probe_get("127.0.0.1", port, "/v1/models", NULL, 2, &status, &body, err, sizeof err), 0);
    assert_int_equal(status, 200);
    assert_non_null(strstr(body.data, "\"m1\""));
    assert_int_equal(st_probe_get("127.0.0.1", port, "/other", NULL, 2, &status, &body, err, sizeof err), 0);
    assert_int_equal(status, 404);
    st_buf_free(&body);
    stop(&s);
    /* nothing listens any more */
    assert_int_equal(st_adapter_probe(&l, 1, d, sizeof d), ST_PROBE_NOT_YET);
    assert_non_null(strstr(d, "refused"));
}

static void non_engine_server_is_not_ours(void **state)
{
    (void)state;
    srv s;
    start(&s, "<html>hello</html>");
    char d[512];
    st_launch l = launch_for(st_server_port(s.server), "m1");
    assert_int_equal(st_adapter_probe(&l, 2, d, sizeof d), ST_PROBE_WRONG_SERVER);
    stop(&s);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(ready_wrong_model_and_refused),
        cmocka_unit_test(non_engine_server_is_not_ours),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
