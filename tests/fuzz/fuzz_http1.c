/* libFuzzer target: the HTTP/1.1 request and response parsers, input split in pieces.
 * Byte 0: bit 0 = request/response, bit 1 = collect body, bits 2-7 = piece size. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "net/http1.h"

static int on_body(void *arg, const char *d, size_t n)
{
    size_t *total = arg;
    *total += n;
    if (n)
        (void)d[n - 1];
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t ctl = data[0];
    data++, size--;
    st_http_limits lim = { 512, 16, 4096 };
    st_http_cbs cbs = { NULL, on_body };
    size_t total = 0;
    st_http_parser p;
    st_http_parser_init(&p, (ctl & 1) ? ST_HTTP_REQUEST : ST_HTTP_RESPONSE, &lim, (ctl & 2) ? NULL : &cbs, &total);
    size_t piece = (size_t)(ctl >> 2) + 1, pos = 0;
    int guard = 0;
    while (pos < size && guard++ < 100000) {
        size_t n = size - pos < piece ? size - pos : piece;
        ssize_t r = st_http_feed(&p, (const char *)data + pos, n);
        if (r < 0)
            break;
        pos += (size_t)r;
        if (p.state == ST_HTTP_DONE) {
            for (uint32_t i = 0; i < p.nhdrs; i++)
                (void)strlen(p.hdrs[i].name), (void)strlen(p.hdrs[i].value);
            (void)st_http_header(&p, "content-type");
            st_http_parser_reset(&p);
        }
    }
    (void)st_http_eof(&p);
    st_http_parser_free(&p);
    return 0;
}
