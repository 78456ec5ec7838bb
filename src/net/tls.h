/* TLS client connections through OpenSSL, driven by the event loop (non-blocking).
 * Certificate verification is ON unless the context was made with verify = 0
 * (`--insecure`); the server name is sent with SNI and checked against the certificate
 * (DNS name or IP address). */
#ifndef ST_TLS_H
#define ST_TLS_H
#include <stddef.h>
#include <sys/types.h>

typedef struct st_tls_ctx st_tls_ctx;
typedef struct st_tls st_tls;

/* Result of a non-blocking operation that did not complete. */
enum { ST_TLS_WANT_READ = -2, ST_TLS_WANT_WRITE = -3, ST_TLS_ERROR = -1, ST_TLS_CLOSED = -4 };

/* verify: check the certificate chain and name; ca_file: extra CA bundle (PEM) or NULL for
 * the system store. NULL with a reason in err on failure. */
st_tls_ctx *st_tls_ctx_new(int verify, const char *ca_file, char *err, size_t errlen);
void st_tls_ctx_free(st_tls_ctx *c);

/* A client connection on connected non-blocking socket fd for host (used for SNI and the
 * name check; IP literals are checked as IP addresses and not sent as SNI). */
st_tls *st_tls_new(st_tls_ctx *c, int fd, const char *host, char *err, size_t errlen);
void st_tls_free(st_tls *t);
/* 0 when the handshake is complete, ST_TLS_WANT_READ/WRITE to call again when the fd is
 * ready, ST_TLS_ERROR with a reason (including the verification result) in err. */
int st_tls_handshake(st_tls *t, char *err, size_t errlen);
/* Bytes read (>0), ST_TLS_CLOSED at the end of the stream, WANT_*, or ERROR. */
ssize_t st_tls_read(st_tls *t, void *buf, size_t len, char *err, size_t errlen);
/* Bytes written (>0), WANT_*, or ERROR. Retries must pass the same buffer (OpenSSL rule). */
ssize_t st_tls_write(st_tls *t, const void *buf, size_t len, char *err, size_t errlen);
/* Bytes already decrypted and buffered inside OpenSSL (read them before waiting on the fd). */
int st_tls_pending(const st_tls *t);

#endif
