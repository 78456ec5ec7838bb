#include "harness.h"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include "net/url.h"

typedef struct ucase {
    const char *in;
    int ok;
    int https;
    const char *host;
    unsigned port;
    const char *hostport;
    const char *path;
} ucase;

static const ucase cases[] = {
    { "http://localhost:8000", 1, 0, "localhost", 8000, "localhost:8000", "/" },
    { "http://localhost:8000/", 1, 0, "localhost", 8000, "localhost:8000", "/" },
    { "HTTPS://api.example.com/v1", 1, 1, "api.example.com", 443, "api.example.com", "/v1" },
    { "https://api.example.com:443/x?y=1#frag", 1, 1, "api.example.com", 443, "api.example.com", "/x?y=1" },
    { "http://127.0.0.1", 1, 0, "127.0.0.1", 80, "127.0.0.1", "/" },
    { "http://h:80?q", 1, 0, "h", 80, "h", "/?q" },
    { "http://[::1]:9000/p", 1, 0, "::1", 9000, "[::1]:9000", "/p" },
    { "https://[fe80::1%25eth0]/", 1, 1, "fe80::1%25eth0", 443, "[fe80::1%25eth0]", "/" },
    { "http://[::1]", 1, 0, "::1", 80, "[::1]", "/" },
    { "ftp://h/", 0 },
    { "localhost:8000", 0 },
    { "http://", 0 },
    { "http:///path", 0 },
    { "http://h:/", 0 },
    { "http://h:0/", 0 },
    { "http://h:65536/", 0 },
    { "http://h:123456/", 0 },
    { "http://h:8a/", 0 },
    { "http://user:pw@h/", 0 },
    { "http://h /", 0 },
    { "http://h/\r\n", 0 },
    { "http://[::1/", 0 },
    { "http://[::1]x/", 0 },
    { "http://[zz]/", 0 },
    { "http://h^x/", 0 },
};

static void url_cases(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const ucase *c = &cases[i];
        st_url u;
        char err[128] = "";
        int rc = st_url_parse(c->in, &u, err, sizeof err);
        if (!c->ok) {
            if (rc == 0)
                fail_msg("'%s' accepted, expected an error", c->in);
            assert_true(err[0] != '\0');
            continue;
        }
        if (rc != 0)
            fail_msg("'%s' rejected: %s", c->in, err);
        assert_int_equal(u.https, c->https);
        assert_string_equal(u.host, c->host);
        assert_int_equal(u.port, c->port);
        assert_string_equal(u.hostport, c->hostport);
        assert_string_equal(u.path, c->path);
    }
}

static void url_join(void **state)
{
    (void)state;
    st_url u;
    char out[256];
    assert_int_equal(st_url_parse("http://h:1", &u, NULL, 0), 0);
    assert_int_equal(st_url_join(&u, "/v1/completions", out, sizeof out), 0);
    assert_string_equal(out, "/v1/completions");
    assert_int_equal(st_url_parse("http://h:1/proxy/", &u, NULL, 0), 0);
    assert_int_equal(st_url_join(&u, "/v1/completions", out, sizeof out), 0);
    assert_string_equal(out, "/proxy/v1/completions");
    assert_int_equal(st_url_parse("http://h:1/v1/completions", &u, NULL, 0), 0);
    assert_int_equal(st_url_join(&u, "/v1/completions", out, sizeof out), 0);
    assert_string_equal(out, "/v1/completions");
    assert_int_equal(st_url_join(&u, "/v1/completions", out, 5), -1);
    /* an OpenAI-style base URL ending in /v1: its version is not doubled */
    const char *bases[] = { "http://h:1/v1", "http://h:1/v1/", "http://h:1/proxy/v1" };
    const char *want[] = { "/v1/chat/completions", "/v1/chat/completions", "/proxy/v1/chat/completions" };
    for (int i = 0; i < 3; i++) {
        assert_int_equal(st_url_parse(bases[i], &u, NULL, 0), 0);
        assert_int_equal(st_url_join(&u, "/v1/chat/completions", out, sizeof out), 0);
        assert_string_equal(out, want[i]);
    }
    /* other APIs' paths are not versioned: appended as they are */
    assert_int_equal(st_url_parse("http://h:1/v1", &u, NULL, 0), 0);
    assert_int_equal(st_url_join(&u, "/generate_stream", out, sizeof out), 0);
    assert_string_equal(out, "/v1/generate_stream");
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(url_cases),
        cmocka_unit_test(url_join),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
