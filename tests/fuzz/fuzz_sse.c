/* libFuzzer target: the SSE framer, input split in pieces (byte 0 = piece size). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "net/sse.h"

static int on_event(void *arg, const st_sse_event *ev)
{
    size_t *n = arg;
    *n += ev->data_len + strlen(ev->event) + strlen(ev->id);
    if (ev->data_len)
        (void)ev->data[ev->data_len - 1];
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t piece = (size_t)data[0] + 1;
    data++, size--;
    st_sse s;
    st_sse_init(&s, 256);
    size_t total = 0, pos = 0;
    while (pos < size) {
        size_t n = size - pos < piece ? size - pos : piece;
        if (st_sse_feed(&s, (const char *)data + pos, n, on_event, &total) != 0)
            break;
        pos += n;
    }
    (void)st_sse_finish(&s);
    st_sse_free(&s);
    return 0;
}
