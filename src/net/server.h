/* A small HTTP/1.1 server on the event loop (net/loop.h), used by the emulator's HTTP
 * front end and by the test and benchmark servers. It parses requests with net/http1.h
 * (the project's one HTTP parser) and gives each complete request to a handler, which
 * answers at once or streams the answer later (from timers) on keep-alive connections.
 *
 * ---------------------------------------------------------------------------------------
 * Lifecycle
 *   st_loop *l = st_loop_new();
 *   st_server_config cfg = { .host = "127.0.0.1", .port = 0, .handler = h, .arg = ctx };
 *   st_server *s = st_server_new(l, &cfg, err, sizeof err);  // NULL + reason if the port is taken
 *   st_server_port(s);                                          // the bound port (port 0 = ephemeral)
 *   st_loop_run(l);  ...  st_server_free(s); st_loop_free(l);
 *
 * Handling a request
 *   void h(void *arg, const st_http_parser *req, st_server_resp *resp);
 *   req->method, req->target, st_http_header(req, "name"), req->body.data / req->body.len
 *   (the body is complete; req is valid only during the call: copy what you keep).
 *   The handler must, before returning, either
 *     (a) answer completely:  st_server_respond(resp, 200, "application/json", NULL, body, len);
 *     (b) start a stream and register a cancel callback:
 *           st_server_stream_start(resp, 200, "text/event-stream", NULL);
 *           st_server_resp_on_cancel(resp, my_cancel, my_state);
 *         then later (e.g. from st_loop timers) call st_server_sse_send / st_server_stream_write
 *         any number of times and finally st_server_stream_end(resp);
 *     (c) or register a cancel callback and answer later with st_server_respond (a deferred
 *         complete answer).
 *
 * Validity of the st_server_resp handle
 *   The handle is valid from the handler call until EITHER the response is finished by you
 *   (st_server_respond, st_server_stream_end or st_server_resp_abort return; the handle must not be
 *   used after that) OR your cancel callback has been called (the client disconnected, the
 *   connection failed, or the server is being freed; the handle is invalid once the
 *   callback returns, and the callback must not call st_server_* functions on it).
 *   The cancel callback is never called from inside an st_server_* call you make: a failure
 *   detected during a write is reported by that call's -1 and then by the cancel callback
 *   from the loop shortly after. After st_server_stream_end/respond no cancel callback comes.
 *   If a handler returns without answering and without a cancel callback, a later client
 *   disconnect simply frees the handle: do not keep it.
 *
 * Writes and back-pressure
 *   Every write is attempted on the socket at once (so st_now() right after an
 *   st_server_sse_send is the time the bytes were handed to the kernel); what the kernel does
 *   not take is buffered per connection up to cfg.max_out bytes. A write that would exceed
 *   that returns -1 and writes nothing (the response stays valid; you may retry later or
 *   st_server_resp_abort). st_server_resp_pending() says how much is still buffered.
 *
 * Connections: HTTP/1.1 keep-alive (or close when the client asks, or HTTP/1.0); pipelined
 * requests are answered in order (the next is parsed after the previous response is
 * finished). Bad requests get 400/413/431 and the connection is closed. Connections over
 * cfg.max_conns are accepted and closed at once. All sockets use TCP_NODELAY. With
 * cfg.idle_timeout_s, a connection with no request in progress (idle between requests) is closed
 * after that long; with cfg.header_timeout_s, a request must arrive whole (head and body) within
 * that long of its first byte, however it trickles in (slowloris), else the connection is closed
 * (without it, each byte restarts the idle timeout). A long stream is never cut.
 * --------------------------------------------------------------------------------------- */
#ifndef ST_SERVER_H
#define ST_SERVER_H
#include <stddef.h>
#include <stdint.h>

#include "net/http1.h"
#include "net/loop.h"

typedef struct st_server st_server;
typedef struct st_server_resp st_server_resp;

typedef void (*st_server_handler)(void *arg, const st_http_parser *req, st_server_resp *resp);
typedef void (*st_server_cancel_cb)(void *arg, st_server_resp *resp);

typedef struct st_server_config {
    const char *host; /* numeric IPv4/IPv6 address to listen on; NULL: "127.0.0.1" */
    uint16_t port;    /* 0: an ephemeral port */
    st_server_handler handler;
    void *arg;
    st_http_limits limits;   /* request limits (0 fields: 64 KiB head, 100 headers, 8 MiB body) */
    size_t max_out;          /* per-connection buffered output limit (0: 8 MiB) */
    uint32_t max_conns;      /* open connections (0: 20000) */
    int backlog;             /* listen backlog (0: 4096) */
    double idle_timeout_s;   /* close a connection that has no request in progress and has not
                                  completed one for this long, e.g. 5 like uvicorn (0: never) */
    double header_timeout_s; /* a request must arrive whole within this long of its first byte
                                (0: no limit but the idle timeout) */
} st_server_config;

st_server *st_server_new(st_loop *l, const st_server_config *cfg, char *err, size_t errlen);
/* Closes the listener and every connection (cancel callbacks of open streams are called). */
void st_server_free(st_server *s);
uint16_t st_server_port(const st_server *s);
uint32_t st_server_conn_count(const st_server *s);

/* A complete response with Content-Length. extra_headers: NULL or "Name: value\r\n" lines.
 * content_type may be NULL (no Content-Type). Finishes the response. 0 or -1 (the
 * connection is gone or the response does not fit in max_out; the response is finished
 * either way and the handle must not be used again). */
int st_server_respond(st_server_resp *r, int status, const char *content_type, const char *extra_headers,
                      const void *body, size_t len);
/* Sends the head of a chunked response. For "text/event-stream" Cache-Control: no-cache is
 * added. 0 or -1. */
int st_server_stream_start(st_server_resp *r, int status, const char *content_type, const char *extra_headers);
/* One chunk (len > 0). 0, or -1 (connection gone, or max_out would be exceeded). */
int st_server_stream_write(st_server_resp *r, const void *data, size_t len);
/* One SSE event as one chunk: "data: <line>\n" for each line of data, then "\n". */
int st_server_sse_send(st_server_resp *r, const char *data, size_t len);
/* The last chunk; finishes the response (the handle is invalid afterwards). 0 or -1. */
int st_server_stream_end(st_server_resp *r);
/* Closes the connection now (after trying once to flush what is buffered); rst: send a TCP
 * reset instead of a clean close. Finishes the response; no cancel callback follows. */
void st_server_resp_abort(st_server_resp *r, int rst);
/* Writes bytes verbatim (for test servers that must send broken HTTP). 0 or -1. */
int st_server_resp_raw(st_server_resp *r, const void *data, size_t len);
/* Registers the callback for a client disconnect before the response is finished. */
void st_server_resp_on_cancel(st_server_resp *r, st_server_cancel_cb cb, void *arg);
/* Bytes accepted by st_server_* writes but not yet taken by the kernel. */
size_t st_server_resp_pending(const st_server_resp *r);

#endif
