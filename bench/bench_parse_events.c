/* Throughput of the per-event parser on the hot path (one vLLM completions chunk and one
 * chat chunk, as a server sends them). The load generator needs >= 200,000 events/s on one
 * core in total, so parsing should cost a small fraction of that budget.
 * Usage: build/bench/bench_parse_events [iterations] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "load/api.h"

int main(int argc, char **argv)
{
    long iters = argc > 1 ? atol(argv[1]) : 2000000;
    const char *chunks[2] = {
        "{\"id\":\"cmpl-8d1e3c0d5a6b4e0f9a2b7c1d3e4f5a6b\",\"object\":\"text_completion\",\"created\":1732871234,"
        "\"model\":\"Qwen/Qwen3-8B\",\"choices\":[{\"index\":0,\"text\":\" the\",\"logprobs\":null,"
        "\"finish_reason\":null,\"stop_reason\":null}],\"usage\":null}",
        "{\"id\":\"chatcmpl-8d1e3c0d5a6b4e0f9a2b7c1d3e4f5a6b\",\"object\":\"chat.completion.chunk\","
        "\"created\":1732871234,\"model\":\"Qwen/Qwen3-8B\",\"choices\":[{\"index\":0,\"delta\":"
        "{\"content\":\" the\"},\"logprobs\":null,\"finish_reason\":null}]}",
    };
    st_api_kind kinds[2] = { ST_API_COMPLETIONS, ST_API_CHAT };
    for (int c = 0; c < 2; c++) {
        size_t len = strlen(chunks[c]);
        st_api_event ev;
        st_api_event_reset(&ev);
        uint64_t tokens = 0;
        st_ns t0 = st_now();
        for (long i = 0; i < iters; i++) {
            if (st_api_parse_event(kinds[c], chunks[c], len, &ev) < 0)
                return 1;
            tokens += ev.tokens;
        }
        double s = st_ns_to_s(st_now() - t0);
        printf("%-12s %zu-byte chunk: %.0f events/s (%.0f ns/event, %.0f MB/s), tokens %llu\n", st_api_name(kinds[c]),
               len, iters / s, s * 1e9 / iters, iters * (double)len / s / 1e6, (unsigned long long)tokens);
    }
    return 0;
}
