/* Writes a synthetic trace of about SIZE bytes in one of the formats servetune reads, for the
 * reading benchmark (bench/trace_read.sh): Mooncake JSONL (hash ids with shared prefixes),
 * Azure CSV, BurstGPT CSV, or a LiteLLM spend log (one JSON array). Deterministic.
 *   trace_gen FORMAT SIZE_MB > FILE */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: trace_gen mooncake|azure|burstgpt|litellm SIZE_MB\n");
        return 2;
    }
    const char *fmt = argv[1];
    unsigned long long limit = strtoull(argv[2], NULL, 10) << 20, written = 0;
    static char buf[1 << 16];
    uint64_t next_hash = 1000;
    double ts = 0;
    if (!strcmp(fmt, "azure"))
        written += (unsigned long long)printf("TIMESTAMP,ContextTokens,GeneratedTokens\n");
    else if (!strcmp(fmt, "burstgpt"))
        written += (unsigned long long)printf("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n");
    else if (!strcmp(fmt, "litellm"))
        written += (unsigned long long)printf("[\n");
    else if (strcmp(fmt, "mooncake")) {
        fprintf(stderr, "unknown format %s\n", fmt);
        return 2;
    }
    for (uint64_t i = 0; written < limit; i++) {
        ts += rnd(1000) / 4000.0;
        uint32_t in = 100 + rnd(16000), out = 1 + rnd(800);
        int n;
        if (!strcmp(fmt, "mooncake")) {
            /* a few shared system prompts (ids 0..9), then the request's own blocks */
            n = snprintf(buf, sizeof buf,
                         "{\"timestamp\": %llu, \"input_length\": %u, \"output_length\": %u, "
                         "\"hash_ids\": [",
                         (unsigned long long)(ts * 1000), in, out);
            uint32_t blocks = (in + 511) / 512;
            for (uint32_t b = 0; b < blocks; b++)
                n += snprintf(buf + n, sizeof buf - (size_t)n, b ? ", %llu" : "%llu",
                              (unsigned long long)(b == 0 ? rnd(10) : next_hash++));
            n += snprintf(buf + n, sizeof buf - (size_t)n, "]}\n");
        } else if (!strcmp(fmt, "azure")) {
            time_t t = (time_t)(1700150000 + ts);
            struct tm tm;
            gmtime_r(&t, &tm);
            n = snprintf(buf, sizeof buf, "%04d-%02d-%02d %02d:%02d:%02d.%07u,%u,%u\n", tm.tm_year + 1900,
                         tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, rnd(10000000), in, out);
        } else if (!strcmp(fmt, "burstgpt")) {
            n = snprintf(buf, sizeof buf, "%u,%s,%u,%u,%u,%s\n", (unsigned)ts, rnd(4) ? "ChatGPT" : "GPT-4", in,
                         rnd(50) ? out : 0, in + out, rnd(2) ? "Conversation log" : "API log");
        } else {
            time_t t = (time_t)(1736900000 + ts);
            struct tm tm;
            gmtime_r(&t, &tm);
            char day[16], hms[16];
            strftime(day, sizeof day, "%Y-%m-%d", &tm);
            strftime(hms, sizeof hms, "%H:%M:%S", &tm);
            n = snprintf(buf, sizeof buf,
                         "%s{\"request_id\": \"chatcmpl-%016llx\", \"call_type\": \"acompletion\", \"api_key\": "
                         "\"88dc28d0f030c55ed4ab77ed8faf098196cb1c05df778539800c9f1243fe6b4b\", \"spend\": 0.000%u, "
                         "\"total_tokens\": %u, \"prompt_tokens\": %u, \"completion_tokens\": %u, \"startTime\": "
                         "\"%sT%s.%06uZ\", \"endTime\": \"%sT%s.%06uZ\", "
                         "\"model\": \"hosted_vllm/Qwen/Qwen3-8B\", \"model_group\": \"qwen3-8b\", \"user\": \"u%u\", "
                         "\"metadata\": {\"user_api_key_team_id\": \"t%u\", \"tags\": []}, \"cache_hit\": \"False\", "
                         "\"session_id\": \"s%u\", \"status\": \"success\"}\n",
                         i ? "," : "", (unsigned long long)i, rnd(1000), in + out, in, out, day, hms, rnd(1000000), day,
                         hms, 999999, rnd(1000), rnd(20), (unsigned)(i / 4));
        }
        fwrite(buf, 1, (size_t)n, stdout);
        written += (unsigned long long)n;
    }
    if (!strcmp(fmt, "litellm"))
        printf("]\n");
    return 0;
}
