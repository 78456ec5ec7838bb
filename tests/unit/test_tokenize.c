/* Exact prompt lengths (load/tokenize.h): fitting a text to a count with a tokenizer that is
 * not one token a word, keeping a shared prefix, and the /tokenize answer shapes. */
#include "harness.h"

#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "load/tokenize.h"

/* A chat template of 9 tokens, and words of 6+ letters counted as two tokens. */
static int fake_count(void *arg, const char *text, size_t len, uint32_t *count, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    int *calls = arg;
    (*calls)++;
    uint32_t n = 9;
    size_t i = 0;
    while (i < len) {
        while (i < len && text[i] == ' ')
            i++;
        size_t s = i;
        while (i < len && text[i] != ' ')
            i++;
        if (i > s)
            n += i - s >= 6 ? 2 : 1;
    }
    *count = n;
    return 0;
}

static int failing_count(void *arg, const char *text, size_t len, uint32_t *count, char *err, size_t errlen)
{
    (void)arg;
    (void)text;
    (void)len;
    (void)count;
    snprintf(err, errlen, "no /tokenize on this server");
    return -1;
}

static void fit_exact_and_prefix_kept(void **state)
{
    (void)state;
    for (uint32_t target = 20; target < 3000; target = target * 3 + 7) {
        uint32_t *ids = malloc(target * sizeof *ids);
        for (uint32_t i = 0; i < target; i++)
            ids[i] = 1000 + (i * 2654435761u) % 31000;
        st_work_item a = { .id = 1, .input_ids = ids, .input_len = target, .output_len = 1, .prefix_len = 10 };
        st_buf before;
        st_buf_init(&before, 1 << 24);
        st_workload_text(&a, &before);
        int calls = 0;
        uint32_t got;
        char err[200];
        int rc = st_prompt_fit(&a, target, 10, fake_count, &calls, &got, err, sizeof err);
        assert_int_equal(rc, 0);
        assert_int_equal(got, target);
        assert_int_equal(a.input_len, target);
        assert_null(a.input_ids);
        uint32_t check;
        fake_count(&calls, a.input_text, strlen(a.input_text), &check, err, sizeof err);
        assert_int_equal(check, target);
        assert_true(calls <= ST_FIT_ROUNDS + 1);
        /* the first 10 words (the shared prefix) are those of the ids */
        size_t end = 0;
        for (int words = 0; end < before.len && words < 10; end++)
            if (before.data[end] == ' ')
                words++;
        if (end && before.data[end - 1] == ' ')
            end--;
        assert_int_equal(strncmp(before.data, a.input_text, end), 0);
        st_buf_free(&before);
        st_work_item_free(&a);
    }
    /* a counter that fails: the reason comes back */
    uint32_t ids[4] = { 1000, 1001, 1002, 1003 };
    st_work_item b = { .input_len = 4, .output_len = 1 };
    b.input_ids = malloc(sizeof ids);
    memcpy(b.input_ids, ids, sizeof ids);
    uint32_t got;
    char err[200];
    assert_int_equal(st_prompt_fit(&b, 4, 0, failing_count, NULL, &got, err, sizeof err), -1);
    assert_non_null(strstr(err, "no /tokenize"));
    assert_non_null(b.input_ids); /* unchanged */
    st_work_item_free(&b);
}

static void tokenize_answers(void **state)
{
    (void)state;
    uint32_t n;
    const char *vllm = "{\"count\":7,\"max_model_len\":40960,\"tokens\":[1,2,3,4,5,6,7],\"token_strs\":null}";
    assert_int_equal(st_tokenize_parse(vllm, strlen(vllm), &n), 0);
    assert_int_equal(n, 7);
    const char *llama = "{\"tokens\":[12,13,14]}";
    assert_int_equal(st_tokenize_parse(llama, strlen(llama), &n), 0);
    assert_int_equal(n, 3);
    const char *tgi =
        "[{\"id\":1,\"text\":\"a\",\"start\":0,\"stop\":1},{\"id\":2,\"text\":\"b\",\"start\":1,\"stop\":2}]";
    assert_int_equal(st_tokenize_parse(tgi, strlen(tgi), &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(st_tokenize_parse("{\"detail\":\"Not Found\"}", 22, &n), -1);
    assert_int_equal(st_tokenize_parse("nope", 4, &n), -1);
}

/* A /tokenize server on 127.0.0.1 answering every request with `answer` (one request a
 * connection, "Connection: close"); bounded in connections and in time. */
typedef struct tok_server {
    int fd;
    int port;
    const char *answer;
    atomic_int stop;
    pthread_t th;
} tok_server;

static void *tok_server_main(void *arg)
{
    tok_server *t = arg;
    for (int conns = 0; conns < 32 && !atomic_load(&t->stop);) {
        struct pollfd pf = { .fd = t->fd, .events = POLLIN };
        if (poll(&pf, 1, 50) <= 0)
            continue;
        int c = accept(t->fd, NULL, NULL);
        if (c < 0)
            continue;
        conns++;
        char req[65536];
        size_t got = 0;
        long want = -1;
        for (int reads = 0; reads < 1000 && got < sizeof req - 1; reads++) {
            struct pollfd cp = { .fd = c, .events = POLLIN };
            if (poll(&cp, 1, 2000) <= 0)
                break;
            ssize_t n = read(c, req + got, sizeof req - 1 - got);
            if (n <= 0)
                break;
            got += (size_t)n;
            req[got] = '\0';
            const char *end = strstr(req, "\r\n\r\n");
            if (end && want < 0) {
                const char *cl = strcasestr(req, "content-length:");
                want = (long)(end + 4 - req) + (cl ? atol(cl + 15) : 0);
            }
            if (want >= 0 && (long)got >= want)
                break;
        }
        char resp[512];
        int rl = snprintf(resp, sizeof resp,
                          "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                          "Connection: close\r\n\r\n%s",
                          strlen(t->answer), t->answer);
        ssize_t w = write(c, resp, (size_t)rl);
        (void)w;
        close(c);
    }
    return NULL;
}

static void tok_server_start(tok_server *t, const char *answer)
{
    memset(t, 0, sizeof *t);
    t->answer = answer;
    t->fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(t->fd >= 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = 0, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof a;
    assert_int_equal(bind(t->fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(t->fd, 8), 0);
    assert_int_equal(getsockname(t->fd, (struct sockaddr *)&a, &al), 0);
    t->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&t->th, NULL, tok_server_main, t), 0);
}

static void tok_server_stop(tok_server *t)
{
    atomic_store(&t->stop, 1);
    pthread_join(t->th, NULL);
    close(t->fd);
}

/* A /tokenize answer is checked before it becomes a prompt's length: a count of 0 for a text
 * that is not empty, or one above the longest prompt servetune handles (ST_WORKLOAD_MAX_TOKENS),
 * is an error naming the server; the prompts keep their ids. */
static void tokenize_lies_are_refused(void **state)
{
    (void)state;
    static const struct {
        const char *answer, *text, *want; /* want NULL: accepted */
        uint32_t count;
    } cases[] = {
        { "{\"count\":0}", "hello world", "answered 0 tokens for a text of 11 bytes", 0 },
        { "{\"count\":10000000}", "hello world", "answered 10000000 tokens, above the 2097152", 0 },
        { "{\"count\":2097153}", "hello", "answered 2097153 tokens, above the 2097152", 0 },
        { "{\"count\":2}", "hello world", NULL, 2 },
        { "{\"count\":2097152}", "hello", NULL, 2097152 },
        { "{\"count\":0}", "", NULL, 0 }, /* an empty text may well be no token */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tok_server srv;
        tok_server_start(&srv, cases[i].answer);
        char url[64], err[512] = "", where[64];
        snprintf(url, sizeof url, "http://127.0.0.1:%d/v1", srv.port);
        snprintf(where, sizeof where, "http://127.0.0.1:%d/tokenize", srv.port);
        st_tokenizer *t = st_tokenizer_new(url, ST_API_CHAT, "m", NULL, 0, NULL, 5, err, sizeof err);
        assert_non_null(t);
        uint32_t n = 12345;
        int rc = st_tokenizer_count(t, cases[i].text, strlen(cases[i].text), &n, err, sizeof err);
        if (cases[i].want) {
            if (rc != -1 || !strstr(err, cases[i].want) || !strstr(err, where))
                fail_msg("%s: rc %d, err '%s'", cases[i].answer, rc, err);
        } else {
            if (rc != 0)
                fail_msg("%s: refused: %s", cases[i].answer, err);
            assert_int_equal(n, cases[i].count);
        }
        assert_int_equal(st_tokenizer_missing(t), 0);
        st_tokenizer_free(t);
        tok_server_stop(&srv);
    }
    /* fitting a workload stops at the first lie, and the prompt keeps its ids and length */
    tok_server srv;
    tok_server_start(&srv, "{\"count\":0}");
    char url[64], err[512] = "";
    snprintf(url, sizeof url, "http://127.0.0.1:%d", srv.port);
    st_tokenizer *t = st_tokenizer_new(url, ST_API_CHAT, "m", NULL, 0, NULL, 5, err, sizeof err);
    assert_non_null(t);
    st_workload w = { 0 };
    w.n = 1;
    w.items = calloc(1, sizeof *w.items);
    assert_non_null(w.items);
    uint32_t *ids = malloc(40 * sizeof *ids);
    assert_non_null(ids);
    for (uint32_t i = 0; i < 40; i++)
        ids[i] = 1000 + i;
    w.items[0] = (st_work_item){ .id = 0, .input_ids = ids, .input_len = 40, .output_len = 1 };
    uint32_t fitted, exact;
    assert_int_equal(st_prompt_fit_work(&w, t, NULL, &fitted, &exact, err, sizeof err), -1);
    assert_non_null(strstr(err, "answered 0 tokens"));
    assert_int_equal(fitted, 0);
    assert_non_null(w.items[0].input_ids);
    assert_int_equal(w.items[0].input_len, 40);
    free(w.items[0].input_ids);
    free(w.items[0].input_text);
    free(w.items);
    st_tokenizer_free(t);
    tok_server_stop(&srv);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(fit_exact_and_prefix_kept),
        cmocka_unit_test(tokenize_answers),
        cmocka_unit_test(tokenize_lies_are_refused),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}
