#include "net/tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

struct st_tls_ctx {
    SSL_CTX *ctx;
    int verify;
};

struct st_tls {
    SSL *ssl;
    int verify;
};

static void ssl_err(char *err, size_t errlen, const char *what)
{
    unsigned long e = ERR_get_error();
    char buf[256] = "";
    if (e)
        ERR_error_string_n(e, buf, sizeof buf);
    ERR_clear_error();
    if (err && errlen)
        st_errf(err, errlen, "%s%s%s", what, buf[0] ? ": " : "", buf);
}

st_tls_ctx *st_tls_ctx_new(int verify, const char *ca_file, char *err, size_t errlen)
{
    st_tls_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->verify = verify;
    c->ctx = SSL_CTX_new(TLS_client_method());
    if (!c->ctx) {
        ssl_err(err, errlen, "SSL_CTX_new");
        free(c);
        return NULL;
    }
    SSL_CTX_set_min_proto_version(c->ctx, TLS1_2_VERSION);
    SSL_CTX_set_mode(c->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    if (verify) {
        SSL_CTX_set_verify(c->ctx, SSL_VERIFY_PEER, NULL);
        int ok =
            ca_file ? SSL_CTX_load_verify_locations(c->ctx, ca_file, NULL) : SSL_CTX_set_default_verify_paths(c->ctx);
        if (ok != 1) {
            ssl_err(err, errlen, "cannot load CA certificates");
            SSL_CTX_free(c->ctx);
            free(c);
            return NULL;
        }
    } else {
        SSL_CTX_set_verify(c->ctx, SSL_VERIFY_NONE, NULL);
    }
    return c;
}

void st_tls_ctx_free(st_tls_ctx *c)
{
    if (!c)
        return;
    SSL_CTX_free(c->ctx);
    free(c);
}

st_tls *st_tls_new(st_tls_ctx *c, int fd, const char *host, char *err, size_t errlen)
{
    st_tls *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->verify = c->verify;
    t->ssl = SSL_new(c->ctx);
    if (!t->ssl || SSL_set_fd(t->ssl, fd) != 1) {
        ssl_err(err, errlen, "SSL_new");
        st_tls_free(t);
        return NULL;
    }
    unsigned char ip[16];
    int is_ip = inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1;
    if (!is_ip)
        SSL_set_tlsext_host_name(t->ssl, host);
    if (c->verify) {
        X509_VERIFY_PARAM *vp = SSL_get0_param(t->ssl);
        X509_VERIFY_PARAM_set_hostflags(vp, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        int ok = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(vp, host) : X509_VERIFY_PARAM_set1_host(vp, host, 0);
        if (ok != 1) {
            ssl_err(err, errlen, "cannot set the expected host name");
            st_tls_free(t);
            return NULL;
        }
    }
    SSL_set_connect_state(t->ssl);
    return t;
}

void st_tls_free(st_tls *t)
{
    if (!t)
        return;
    if (t->ssl)
        SSL_free(t->ssl);
    free(t);
}

static int classify(st_tls *t, int rc, const char *what, char *err, size_t errlen)
{
    int e = SSL_get_error(t->ssl, rc);
    switch (e) {
    case SSL_ERROR_WANT_READ: return ST_TLS_WANT_READ;
    case SSL_ERROR_WANT_WRITE: return ST_TLS_WANT_WRITE;
    case SSL_ERROR_ZERO_RETURN: return ST_TLS_CLOSED;
    case SSL_ERROR_SYSCALL:
        if (ERR_peek_error() == 0) {
            if (err && errlen)
                st_errf(err, errlen, "%s: %s", what, errno ? strerror(errno) : "connection closed by peer");
            ERR_clear_error();
            return ST_TLS_ERROR;
        }
        break;
    default: break;
    }
    long vr = SSL_get_verify_result(t->ssl);
    if (t->verify && vr != X509_V_OK) {
        if (err && errlen)
            st_errf(err, errlen, "%s: certificate verification failed: %s", what, X509_verify_cert_error_string(vr));
        ERR_clear_error();
        return ST_TLS_ERROR;
    }
    ssl_err(err, errlen, what);
    return ST_TLS_ERROR;
}

int st_tls_handshake(st_tls *t, char *err, size_t errlen)
{
    ERR_clear_error();
    errno = 0;
    int rc = SSL_do_handshake(t->ssl);
    if (rc == 1)
        return 0;
    int c = classify(t, rc, "TLS handshake", err, errlen);
    return c == ST_TLS_CLOSED ? ST_TLS_ERROR : c;
}

ssize_t st_tls_read(st_tls *t, void *buf, size_t len, char *err, size_t errlen)
{
    ERR_clear_error();
    errno = 0;
    size_t got = 0;
    int rc = SSL_read_ex(t->ssl, buf, len, &got);
    if (rc == 1)
        return (ssize_t)got;
    return classify(t, 0, "TLS read", err, errlen);
}

ssize_t st_tls_write(st_tls *t, const void *buf, size_t len, char *err, size_t errlen)
{
    ERR_clear_error();
    errno = 0;
    size_t put = 0;
    int rc = SSL_write_ex(t->ssl, buf, len, &put);
    if (rc == 1)
        return (ssize_t)put;
    return classify(t, 0, "TLS write", err, errlen);
}

int st_tls_pending(const st_tls *t) { return SSL_pending(t->ssl); }
