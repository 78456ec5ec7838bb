/* Trace readers (load/trace.h): every format with a small sample and the requests it must
 * become, format detection, filters, counted skips, "file:line: reason" errors, sessions,
 * and the same result whatever the chunking of the input. */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "core/buf.h"
#include "load/trace.h"

static int load(const char *text, const st_trace_load_opts *o, st_workload *w, st_trace_counts *c, st_trace_format *fmt,
                char *err, size_t errlen)
{
    return st_trace_load_buffer(text, strlen(text), "t", o, w, c, fmt, err, errlen);
}

static void opts(st_trace_load_opts *o) { st_trace_load_opts_default(o); }

static void expect_error(const char *text, const st_trace_load_opts *o, const char *want)
{
    st_workload w;
    char err[700];
    if (load(text, o, &w, NULL, NULL, err, sizeof err) == 0)
        fail_msg("accepted: %s", text);
    if (!strstr(err, want))
        fail_msg("error \"%s\" lacks \"%s\"", err, want);
    assert_null(w.items);
}

static void mooncake_blocks_shared(void **state)
{
    (void)state;
    const char *t = "{\"timestamp\": 0, \"input_length\": 1000, \"output_length\": 10, \"hash_ids\": [0, 1]}\n"
                    "{\"timestamp\": 3000, \"input_length\": 700, \"output_length\": 5, \"hash_ids\": [0, 2]}\n"
                    "{\"timestamp\": 3000, \"input_length\": 512, \"output_length\": 7, \"hash_ids\": [0]}\n"
                    "{\"timestamp\": 4500, \"input_length\": 1024, \"output_length\": 1, \"hash_ids\": [0, 1]}\n";
    st_workload w;
    st_trace_counts c;
    st_trace_format f;
    char err[300];
    assert_int_equal(load(t, NULL, &w, &c, &f, err, sizeof err), 0);
    assert_int_equal(f, ST_TRACE_MOONCAKE);
    assert_int_equal(w.n, 4);
    assert_int_equal(c.kept, 4);
    assert_true(w.items[0].arrival == 0);
    assert_true(w.items[1].arrival == 3 * ST_NS_PER_S);
    assert_true(w.items[3].arrival == 4500 * ST_NS_PER_MS);
    assert_int_equal(w.items[0].input_len, 1000);
    assert_int_equal(w.items[1].output_len, 5);
    assert_int_equal(w.items[2].input_len, 512);
    /* block 0 is shared by all four; block 1 by requests 0 and 3 (1000 and 1024 tokens: the
     * first 488 tokens of block 1 are common); block 2 is request 1's own */
    for (int i = 1; i < 4; i++)
        assert_memory_equal(w.items[0].input_ids, w.items[i].input_ids, 512 * sizeof(uint32_t));
    assert_memory_equal(w.items[0].input_ids + 512, w.items[3].input_ids + 512, 488 * sizeof(uint32_t));
    assert_memory_not_equal(w.items[0].input_ids + 512, w.items[1].input_ids + 512, 188 * sizeof(uint32_t));
    st_workload_free(&w);
    /* another salt (an audit's next run): other ids, the same sharing among the requests */
    st_workload w2, w3;
    st_trace_load_opts so;
    opts(&so);
    so.read.salt = 0x5eed;
    assert_int_equal(load(t, NULL, &w2, &c, &f, err, sizeof err), 0);
    assert_int_equal(load(t, &so, &w3, &c, &f, err, sizeof err), 0);
    assert_memory_not_equal(w2.items[0].input_ids, w3.items[0].input_ids, 512 * sizeof(uint32_t));
    for (int i = 1; i < 4; i++)
        assert_memory_equal(w3.items[0].input_ids, w3.items[i].input_ids, 512 * sizeof(uint32_t));
    assert_memory_equal(w3.items[0].input_ids + 512, w3.items[3].input_ids + 512, 488 * sizeof(uint32_t));
    st_workload_free(&w2);
    st_workload_free(&w3);
    /* a different block size must be given */
    expect_error("{\"timestamp\": 0, \"input_length\": 1000, \"output_length\": 1, \"hash_ids\": [0, 1, 2]}\n", NULL,
                 "t:1: hash_ids has 3 blocks, but input_length 1000 needs 2 blocks of 512 tokens");
    st_trace_load_opts o;
    opts(&o);
    o.read.block_size = 16;
    assert_int_equal(load("{\"timestamp\": 0, \"input_length\": 40, \"output_length\": 1, \"hash_ids\": [7, 8, 9]}\n",
                          &o, &w, NULL, NULL, err, sizeof err),
                     0);
    st_workload_free(&w);
    expect_error("{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [0], \"x\": 1}\n", NULL,
                 "t:1: unknown key \"x\" in a Mooncake row");
    expect_error("{\"timestamp\": 0, \"input_length\": -5, \"output_length\": 1}\n", NULL,
                 "t:1: input_length must be a non-negative integer");
    expect_error("{\"timestamp\": 0, \"input_length\": 5000000, \"output_length\": 1}\n", NULL,
                 "above the largest supported length");
    expect_error("{\"input_length\": 5, \"output_length\": 1}\n", NULL, "t:1: timestamp is required");
}

static void azure_csv(void **state)
{
    (void)state;
    const char *t = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                    "2023-11-16 18:17:03.9799600,4808,10\n"
                    "2023-11-16 18:17:04.0319600,3180,8\n"
                    "2023-11-16 18:17:05.2792720,1145,7\r\n";
    st_workload w;
    st_trace_format f;
    char err[300];
    assert_int_equal(load(t, NULL, &w, NULL, &f, err, sizeof err), 0);
    assert_int_equal(f, ST_TRACE_AZURE);
    assert_int_equal(w.n, 3);
    assert_int_equal(w.items[0].input_len, 4808);
    assert_int_equal(w.items[0].output_len, 10);
    assert_true(llabs(w.items[1].arrival - 52 * ST_NS_PER_MS) < 1000);
    assert_true(llabs(w.items[2].arrival - (st_ns)(1.299312 * 1e9)) < 1000);
    st_workload_free(&w);
    /* the 2024 release: six digits and an offset */
    const char *u = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                    "2024-05-10 00:00:00.009930+00:00,100,5\n"
                    "2024-05-10 02:00:01.509930+02:00,200,6\n";
    assert_int_equal(load(u, NULL, &w, NULL, &f, err, sizeof err), 0);
    /* 02:00:01.5 at +02:00 is 00:00:01.5 UTC */
    assert_true(llabs(w.items[1].arrival - 1500 * ST_NS_PER_MS) < 1000);
    st_workload_free(&w);
    expect_error("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9,abc,10\n", NULL,
                 "t:2: column ContextTokens is not a token count: \"abc\"");
    expect_error("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9,-3,10\n", NULL,
                 "t:2: column ContextTokens is negative");
    expect_error("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9,3\n", NULL,
                 "t:2: 2 fields, the header has 3");
    expect_error("TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,3,4\n", NULL,
                 "t:2: column TIMESTAMP: \"yesterday\" is not a time");
}

static void burstgpt_failed_rows_apart(void **state)
{
    (void)state;
    const char *t = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                    "5,ChatGPT,472,18,490,Conversation log\n"
                    "45,ChatGPT,1087,0,1087,Conversation log\n"
                    "118,GPT-4,417,276,693,API log\n"
                    "120,ChatGPT,30,8,38,API log\n";
    st_workload w;
    st_trace_counts c;
    st_trace_format f;
    char err[300];
    assert_int_equal(load(t, NULL, &w, &c, &f, err, sizeof err), 0);
    assert_int_equal(f, ST_TRACE_BURSTGPT);
    assert_int_equal(c.rows, 4);
    assert_int_equal(c.failed, 1); /* 0 response tokens: a failed request, not replayed */
    assert_int_equal(w.n, 3);
    assert_true(w.items[1].arrival == 113 * ST_NS_PER_S);
    assert_int_equal(w.items[1].input_len, 417);
    assert_int_equal(w.items[1].output_len, 276);
    st_workload_free(&w);
    /* model filter */
    st_trace_load_opts o;
    opts(&o);
    o.read.model = "GPT-4";
    assert_int_equal(load(t, &o, &w, &c, NULL, err, sizeof err), 0);
    assert_int_equal(w.n, 1);
    assert_int_equal(c.model, 2);
    assert_int_equal(w.items[0].input_len, 417);
    st_workload_free(&w);
    char d[400];
    st_trace_counts_describe(&c, d, sizeof d);
    assert_non_null(strstr(d, "1 failed in the log"));
    assert_non_null(strstr(d, "2 other models"));
    /* the announced Session ID column groups turns */
    const char *s = "Timestamp,Session ID,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                    "5,a,ChatGPT,100,10,110,Conversation log\n"
                    "9,a,ChatGPT,150,20,170,Conversation log\n";
    assert_int_equal(load(s, NULL, &w, &c, NULL, err, sizeof err), 0);
    assert_int_equal(c.sessions, 1);
    assert_int_equal(w.n, 2);
    assert_int_equal(w.n_dependent, 1);
    st_workload_free(&w);
    expect_error("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type,Region\n", NULL,
                 "t:1: unknown column \"Region\" in a BurstGPT trace");
}

static const char *litellm_doc =
    "[\n"
    "  {\n"
    "    \"request_id\": \"r1\", \"call_type\": \"acompletion\", \"api_key\": \"88dc28\", \"spend\": 0.0001,\n"
    "    \"total_tokens\": 130, \"prompt_tokens\": 100, \"completion_tokens\": 30,\n"
    "    \"startTime\": \"2025-01-15T10:20:30.500000Z\", \"endTime\": \"2025-01-15T10:20:32.000000Z\",\n"
    "    \"model\": \"hosted_vllm/Qwen/Qwen3-8B\", \"model_group\": \"qwen3-8b\", \"user\": \"u1\",\n"
    "    \"metadata\": {\"user_api_key_team_id\": \"t1\", \"tags\": [\"a\", \"b\"]},\n"
    "    \"session_id\": \"s1\", \"status\": \"success\", \"messages\": {}, \"response\": {}\n"
    "  },\n"
    "  {\"request_id\": \"r2\", \"prompt_tokens\": 50, \"completion_tokens\": 0, \"model\": \"m\",\n"
    "   \"startTime\": \"2025-01-15T10:20:31Z\", \"endTime\": \"2025-01-15T10:20:31.1Z\", \"status\": \"failure\"},\n"
    "  {\"request_id\": \"r3\", \"prompt_tokens\": 145, \"completion_tokens\": 12, \"model_group\": \"qwen3-8b\",\n"
    "   \"startTime\": \"2025-01-15T10:20:34Z\", \"endTime\": \"2025-01-15T10:20:35Z\", \"session_id\": \"s1\",\n"
    "   \"status\": \"success\"}\n"
    "]\n";

static void litellm_spend_logs(void **state)
{
    (void)state;
    st_workload w;
    st_trace_counts c;
    st_trace_format f;
    char err[300];
    assert_int_equal(load(litellm_doc, NULL, &w, &c, &f, err, sizeof err), 0);
    assert_int_equal(f, ST_TRACE_LITELLM);
    assert_int_equal(c.rows, 3);
    assert_int_equal(c.failed, 1);
    assert_int_equal(c.sessions, 1);
    assert_int_equal(w.n, 2);
    assert_int_equal(w.n_sessions, 1);
    assert_int_equal(w.n_dependent, 1);
    /* turn 0: the whole prompt; turn 1: only the new text (145 - 100 - 30 = 15), sent 2 s after
     * turn 0 ended (the log has end times) */
    assert_int_equal(w.items[0].input_len, 100);
    assert_int_equal(w.items[0].output_len, 30);
    assert_int_equal(w.items[0].next, 1);
    assert_int_equal(w.items[1].turn, 1);
    assert_int_equal(w.items[1].input_len, 15);
    assert_true(w.items[1].think == 2 * ST_NS_PER_S);
    assert_true(w.items[1].arrival == -1);
    st_workload_free(&w);
    /* flattened: the second prompt is the first, a 30-token stand-in answer, and 15 new tokens */
    st_trace_load_opts o;
    opts(&o);
    o.sessions = ST_TRACE_SESSIONS_FLAT;
    assert_int_equal(load(litellm_doc, &o, &w, NULL, NULL, err, sizeof err), 0);
    assert_int_equal(w.n, 2);
    assert_int_equal(w.n_dependent, 0);
    assert_int_equal(w.items[1].input_len, 145);
    assert_memory_equal(w.items[0].input_ids, w.items[1].input_ids, 100 * sizeof(uint32_t));
    assert_true(w.items[1].arrival == 3500 * ST_NS_PER_MS);
    st_workload_free(&w);
    /* the same log newest first (as LiteLLM lists it): the counts say its sessions need sorting */
    const char *rev = "[{\"prompt_tokens\": 145, \"completion_tokens\": 12, \"startTime\": \"2025-01-15T10:20:34Z\", "
                      "\"session_id\": \"s1\", \"status\": \"success\"},\n"
                      " {\"prompt_tokens\": 100, \"completion_tokens\": 30, \"startTime\": \"2025-01-15T10:20:30Z\", "
                      "\"session_id\": \"s1\", \"status\": \"success\"}]\n";
    assert_int_equal(load(rev, NULL, &w, &c, NULL, err, sizeof err), 0);
    char line[512];
    st_trace_counts_describe(&c, line, sizeof line);
    assert_int_equal(c.unsorted, 1);
    assert_non_null(strstr(line, "sort the log by time (oldest first)"));
    st_workload_free(&w);
    /* model filter matches model_group or model */
    opts(&o);
    o.read.model = "qwen3-8b";
    assert_int_equal(load(litellm_doc, &o, &w, &c, NULL, err, sizeof err), 0);
    assert_int_equal(w.n, 2);
    st_workload_free(&w);
    /* {"data": [...]} on one line, and one row per line */
    const char *v2 = "{\"data\": [{\"startTime\": \"2025-01-15 10:00:00\", \"prompt_tokens\": 9, "
                     "\"completion_tokens\": 3}, {\"startTime\": \"2025-01-15 10:00:02\", \"prompt_tokens\": 8, "
                     "\"completion_tokens\": 4}], \"total\": 2, \"page\": 1}\n";
    assert_int_equal(load(v2, NULL, &w, &c, &f, err, sizeof err), 0);
    assert_int_equal(f, ST_TRACE_LITELLM);
    assert_int_equal(w.n, 2);
    assert_true(w.items[1].arrival == 2 * ST_NS_PER_S);
    st_workload_free(&w);
    const char *jl = "{\"startTime\": \"2025-01-15T10:00:05Z\", \"prompt_tokens\": 9, \"completion_tokens\": 3}\n"
                     "{\"startTime\": \"2025-01-15T10:00:01Z\", \"prompt_tokens\": 8, \"completion_tokens\": 4}\n";
    /* newest first, as the proxy lists them: sorted, and counted */
    assert_int_equal(load(jl, NULL, &w, &c, &f, err, sizeof err), 0);
    assert_int_equal(c.unsorted, 1);
    assert_int_equal(w.items[0].input_len, 8);
    assert_true(w.items[0].arrival == 0 && w.items[1].arrival == 4 * ST_NS_PER_S);
    st_workload_free(&w);
    expect_error("[\n {\"startTime\": \"2025-01-15T10:00:05Z\", \"prompt_tokens\": 9, \"completion_tokens\": 3},\n"
                 " {\"startTime\": \"soon\", \"prompt_tokens\": 9, \"completion_tokens\": 3}\n]\n",
                 NULL, "t:3: startTime is not a date and time");
    expect_error("[\n {\"startTime\": \"2025-01-15T10:00:05Z\", \"prompt_tokens\": 9, \"completion_tokens\": 3},\n",
                 NULL, "t:2: the JSON document ends early");
    /* on one line, with or without its newline, and with blank lines after it: the line that holds it */
    const char *one = "[{\"startTime\": \"2025-01-15T10:00:05Z\", \"prompt_tokens\": 9, \"completion_tokens\": 3}";
    expect_error(one, NULL, "t:1: the JSON document ends early");
    char more[200];
    snprintf(more, sizeof more, "%s\n\n\n", one);
    expect_error(more, NULL, "t:1: the JSON document ends early");
}

static void plain_csv_named_columns(void **state)
{
    (void)state;
    const char *t = "timestamp,input_tokens,output_tokens,model,session_id\n"
                    "2025-03-01T12:00:00Z,1000,100,\"big, model\",\n"
                    "2025-03-01T12:00:00.25Z,200,20,small,\n";
    st_workload w;
    st_trace_format f;
    char err[400];
    assert_int_equal(load(t, NULL, &w, NULL, &f, err, sizeof err), 0);
    assert_int_equal(f, ST_TRACE_CSV);
    assert_int_equal(w.n, 2);
    assert_true(w.items[1].arrival == 250 * ST_NS_PER_MS);
    st_workload_free(&w);
    st_trace_load_opts o;
    opts(&o);
    o.read.model = "big, model";
    assert_int_equal(load(t, &o, &w, NULL, NULL, err, sizeof err), 0);
    assert_int_equal(w.n, 1);
    assert_int_equal(w.items[0].input_len, 1000);
    st_workload_free(&w);
    /* aliases, seconds as numbers, no timestamp column at all */
    assert_int_equal(load("prompt_tokens,completion_tokens\n5,6\n7,8\n", NULL, &w, NULL, NULL, err, sizeof err), 0);
    assert_true(w.items[0].arrival == -1);
    assert_int_equal(w.items[1].output_len, 8);
    st_workload_free(&w);
    /* an unknown column is an error with the way out; --trace-columns maps or ignores it */
    const char *u = "t_s,prompt_len,gen_len,region\n0.5,10,2,eu\n1.5,20,3,us\n";
    expect_error(u, NULL, "t:1: unknown column \"t_s\"");
    st_trace_colmap m;
    assert_int_equal(st_trace_colmap_parse("timestamp=t_s,input_tokens=prompt_len,output_tokens=gen_len,ignore=region",
                                           &m, err, sizeof err),
                     0);
    opts(&o);
    o.read.columns = &m;
    assert_int_equal(load(u, &o, &w, NULL, NULL, err, sizeof err), 0);
    assert_int_equal(w.n, 2);
    assert_int_equal(w.items[1].input_len, 20);
    assert_true(w.items[1].arrival == ST_NS_PER_S);
    st_workload_free(&w);
    assert_int_equal(st_trace_colmap_parse("inputs=x", &m, err, sizeof err), -1);
    assert_non_null(strstr(err, "unknown field \"inputs\""));
    expect_error("input_tokens,output_tokens\n\"5,6\n", NULL, "t:2: a quoted field is not closed");
    expect_error("input_tokens,model\n5,m\n", NULL, "t:1: the header names no output_tokens column");
    expect_error("input_tokens,prompt_tokens,output_tokens\n", NULL, "both give input_tokens");
    /* a "\u0000" in a JSONL string: said in the user's words, not the JSON library's flag name */
    expect_error("{\"text\": \"a\\u0000b\", \"output_tokens\": 5}\n", NULL,
                 "t:1: invalid JSON at column 19: a string holds \\u0000 (a NUL character)");
    /* a spreadsheet's export with another separator: named as such, not as an unknown column to map */
    expect_error("timestamp;input_tokens;output_tokens\n0;100;10\n", NULL,
                 "t:1: the header is one column, \"timestamp;input_tokens;output_tokens\": the file looks separated by "
                 "semicolons, but a CSV trace is separated by commas (convert it first, e.g. tr ';' ',')");
    expect_error("timestamp\tinput_tokens\toutput_tokens\n0\t100\t10\n", NULL, "separated by tabs");
}

static void servetune_sessions(void **state)
{
    (void)state;
    /* native sessions: input_tokens of a later turn is the user's new text */
    const char *t = "{\"timestamp\": 0, \"session\": \"a\", \"input_tokens\": 100, \"output_tokens\": 20}\n"
                    "{\"timestamp\": 0.5, \"session\": 7, \"input_tokens\": 50, \"output_tokens\": 5}\n"
                    "{\"timestamp\": 3, \"session\": \"a\", \"turn\": 1, \"think_time\": 1.5, \"input_tokens\": 10, "
                    "\"output_tokens\": 20}\n"
                    "{\"timestamp\": 9, \"session\": \"a\", \"input_tokens\": 10, \"output_tokens\": 20}\n"
                    "{\"timestamp\": 10, \"input_tokens\": 3, \"output_tokens\": 1}\n";
    st_workload w;
    st_trace_counts c;
    char err[300];
    assert_int_equal(load(t, NULL, &w, &c, NULL, err, sizeof err), 0);
    assert_int_equal(c.sessions, 2);
    assert_int_equal(w.n, 5);
    assert_int_equal(w.n_dependent, 2);
    /* scheduled first: a (0 s), 7 (0.5 s), the lone row (10 s); then a's turns 1 and 2 */
    assert_true(w.items[2].arrival == 10 * ST_NS_PER_S);
    assert_int_equal(w.items[0].session, w.items[3].session);
    assert_int_equal(w.items[0].next, 3);
    assert_int_equal(w.items[3].next, 4);
    assert_int_equal(w.items[4].next, 0);
    assert_true(w.items[3].think == 1500 * ST_NS_PER_MS);
    /* no think_time: the gap between the two turns' start times */
    assert_true(w.items[4].think == 6 * ST_NS_PER_S);
    assert_int_equal(w.items[4].input_len, 10);
    st_workload_free(&w);
    expect_error("{\"session\": \"a\", \"input_tokens\": 1, \"output_tokens\": 1}\n"
                 "{\"session\": \"a\", \"turn\": 2, \"input_tokens\": 1, \"output_tokens\": 1}\n",
                 NULL, "t:2: turn 2 of session \"a\" comes after 1 earlier turn (turns must be in order)");
    expect_error("{\"turn\": 1, \"input_tokens\": 1, \"output_tokens\": 1}\n", NULL, "t:1: turn needs a session");
    /* off: every row alone */
    st_trace_load_opts o;
    opts(&o);
    o.sessions = ST_TRACE_SESSIONS_OFF;
    assert_int_equal(load(t, &o, &w, &c, NULL, err, sizeof err), 0);
    assert_int_equal(w.n_dependent, 0);
    assert_int_equal(w.n_sessions, 0);
    st_workload_free(&w);
    /* a next turn 3 days later (a foreign log's times): the replay waits ST_TRACE_THINK_CAP_S,
     * and the counts say so */
    const char *days = "{\"timestamp\": 0, \"session\": \"a\", \"input_tokens\": 100, \"output_tokens\": 20}\n"
                       "{\"timestamp\": 259200, \"session\": \"a\", \"input_tokens\": 10, \"output_tokens\": 20}\n"
                       "{\"timestamp\": 259300, \"session\": \"a\", \"input_tokens\": 10, \"output_tokens\": 20}\n";
    assert_int_equal(load(days, NULL, &w, &c, NULL, err, sizeof err), 0);
    assert_int_equal(w.n_dependent, 2);
    assert_true(w.items[1].think == (st_ns)(ST_TRACE_THINK_CAP_S * 1e9));
    assert_true(w.items[2].think == 100 * ST_NS_PER_S); /* a short pause is kept as recorded */
    assert_int_equal(c.think_long, 1);
    char line[600];
    st_trace_counts_describe(&c, line, sizeof line);
    if (!strstr(line, "1 pause between a session's turns longer than 600 s (the longest 259200 s): a replay waits "
                      "600 s instead"))
        fail_msg("got '%s'", line);
    st_workload_free(&w);
}

static void filters_and_counted_skips(void **state)
{
    (void)state;
    st_buf b;
    st_buf_init(&b, 1 << 20);
    st_buf_puts(&b, "TIMESTAMP,ContextTokens,GeneratedTokens\n");
    for (int i = 0; i < 200; i++)
        st_buf_printf(&b, "2024-01-01 00:%02d:%02d,%d,%d\n", i / 60, i % 60, i == 7 ? 0 : 100 + i, 10);
    st_workload w;
    st_trace_counts c;
    char err[300];
    st_trace_load_opts o;
    opts(&o);
    o.read.window_from_s = 60;
    o.read.window_to_s = 120;
    assert_int_equal(load(b.data, &o, &w, &c, NULL, err, sizeof err), 0);
    assert_int_equal(w.n, 60);
    assert_int_equal(c.window, 139);
    assert_int_equal(c.empty, 1); /* row 7: 0 context tokens */
    assert_int_equal(w.items[0].input_len, 160);
    assert_true(w.items[0].arrival == 0); /* the replay starts at the window's first request */
    st_workload_free(&w);
    /* a sample is reproducible and about the fraction asked */
    opts(&o);
    o.read.sample = 0.25;
    o.read.seed = 3;
    assert_int_equal(load(b.data, &o, &w, &c, NULL, err, sizeof err), 0);
    uint32_t n1 = w.n;
    assert_true(n1 > 25 && n1 < 75);
    assert_int_equal(c.sampled_out + c.kept + c.empty, 200);
    st_workload_free(&w);
    assert_int_equal(load(b.data, &o, &w, &c, NULL, err, sizeof err), 0);
    assert_int_equal(w.n, n1);
    st_workload_free(&w);
    /* longer than the context: skipped and counted */
    opts(&o);
    o.read.max_context = 200;
    assert_int_equal(load(b.data, &o, &w, &c, NULL, err, sizeof err), 0);
    assert_int_equal(c.too_long, 109); /* rows 91..199: 100 + i + 10 > 200 */
    assert_int_equal(w.n, 90);
    st_workload_free(&w);
    /* max rows */
    opts(&o);
    o.read.max_rows = 5;
    assert_int_equal(load(b.data, &o, &w, &c, NULL, err, sizeof err), 0);
    assert_int_equal(w.n, 5);
    assert_true(c.stopped);
    st_workload_free(&w);
    st_buf_free(&b);
    /* malformed rows: an error, or skipped and counted under --trace-max-bad */
    const char *bad = "input_tokens,output_tokens\n5,6\nx,1\n7,8\n-1,2\n9,9\n";
    expect_error(bad, NULL, "t:3: column input_tokens is not a token count: \"x\"");
    opts(&o);
    o.read.max_bad = 2;
    assert_int_equal(load(bad, &o, &w, &c, NULL, err, sizeof err), 0);
    assert_int_equal(w.n, 3);
    assert_int_equal(c.bad, 2);
    assert_int_equal(c.n_bad_first, 2);
    assert_string_equal(c.bad_first[1], "t:5: column input_tokens is negative (-1)");
    st_workload_free(&w);
    o.read.max_bad = 1;
    expect_error(bad, &o, "t:5: column input_tokens is negative (-1) (more than --trace-max-bad 1 malformed rows)");
    /* everything filtered away: the error says what was skipped */
    opts(&o);
    o.read.model = "none";
    expect_error("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n1,m,1,1,2,API log\n", &o,
                 "the trace holds no requests (1 request rows, 0 kept; skipped: 1 other models)");
}

/* Feeding the bytes one at a time gives the rows feeding them at once gives. */
typedef struct rows_seen {
    uint32_t n;
    uint64_t sum;
} rows_seen;

static int count_row(void *arg, const st_trace_row *r, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    rows_seen *s = arg;
    s->n++;
    s->sum += r->line * 1000003u + r->input_len * 31u + r->output_len + (uint64_t)(r->rel_s * 1e3) + r->turn;
    return 0;
}

static void chunking_does_not_matter(void **state)
{
    (void)state;
    const char *samples[] = {
        litellm_doc,
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,4808,10\n2023-11-16 "
        "18:17:04.0319600,3180,8",
        "{\"timestamp\": 0, \"input_length\": 1000, \"output_length\": 10, \"hash_ids\": [0, 1]}\n"
        "{\"timestamp\": 3000, \"input_length\": 700, \"output_length\": 5, \"hash_ids\": [0, 2]}",
    };
    for (size_t k = 0; k < sizeof samples / sizeof samples[0]; k++) {
        rows_seen a = { 0 }, b = { 0 };
        char err[300];
        assert_int_equal(
            st_trace_read_buffer(samples[k], strlen(samples[k]), "t", NULL, count_row, &a, NULL, NULL, err, sizeof err),
            0);
        st_trace_reader *r = st_trace_reader_new(NULL, "t", count_row, &b);
        for (size_t i = 0; samples[k][i]; i++)
            assert_int_equal(st_trace_reader_feed(r, samples[k] + i, 1, err, sizeof err), 0);
        assert_int_equal(st_trace_reader_finish(r, err, sizeof err), 0);
        st_trace_reader_free(r);
        assert_true(a.n > 0);
        assert_int_equal(a.n, b.n);
        assert_true(a.sum == b.sum);
    }
}

static void datetimes(void **state)
{
    (void)state;
    double t;
    assert_int_equal(st_trace_parse_datetime("1970-01-01 00:00:00", 19, &t), 0);
    assert_true(t == 0);
    assert_int_equal(st_trace_parse_datetime("2000-03-01T00:00:00Z", 20, &t), 0);
    assert_true(t == 951868800.0);
    const char *s = "2023-11-16 18:17:03.9799600";
    assert_int_equal(st_trace_parse_datetime(s, strlen(s), &t), 0);
    assert_true(fabs(t - 1700158623.97996) < 1e-5);
    s = "2024-05-10T00:00:00-05:30";
    assert_int_equal(st_trace_parse_datetime(s, strlen(s), &t), 0);
    assert_true(t == 1715299200.0 + 5.5 * 3600);
    assert_int_equal(st_trace_parse_datetime("2024-13-01 00:00:00", 19, &t), -1);
    assert_int_equal(st_trace_parse_datetime("2024-01-01 00:00:00 junk", 24, &t), -1);
    assert_int_equal(st_trace_parse_datetime("2024-01-01", 10, &t), -1);
    st_trace_format f;
    assert_int_equal(st_trace_format_from_name("burstgpt", &f), 0);
    assert_int_equal(f, ST_TRACE_BURSTGPT);
    assert_string_equal(st_trace_format_name(ST_TRACE_LITELLM), "litellm");
    assert_int_equal(st_trace_format_from_name("sharegpt", &f), -1);
}

static void forced_format(void **state)
{
    (void)state;
    st_trace_load_opts o;
    opts(&o);
    o.read.format = ST_TRACE_AZURE;
    expect_error("{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1}\n", &o,
                 "t:1: the format azure is CSV, but this line is JSON");
    expect_error("a,b,c\n1,2,3\n", &o, "t:1: unknown column \"a\" in an Azure trace");
    opts(&o);
    o.read.format = ST_TRACE_MOONCAKE;
    expect_error("{\"input_tokens\": 1, \"output_tokens\": 1}\n", &o, "t:1: unknown key \"input_tokens\"");
}

/* The stop flag (a SIGINT/SIGTERM handler's) ends the reading before the next line: -1 with
 * "interrupted", counts.interrupted; the rows given so far are those before it. */
static void the_stop_flag_ends_the_reading(void **state)
{
    (void)state;
    const char *text = "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5}\n"
                       "{\"timestamp\": 1000, \"input_length\": 10, \"output_length\": 5}\n";
    volatile sig_atomic_t stop = 1;
    st_trace_opts o;
    memset(&o, 0, sizeof o);
    o.stop = &stop;
    rows_seen a = { 0 };
    st_trace_counts c;
    char err[512] = "";
    assert_int_equal(st_trace_read_buffer(text, strlen(text), "t", &o, count_row, &a, &c, NULL, err, sizeof err), -1);
    assert_true(c.interrupted);
    assert_int_equal(a.n, 0);
    assert_non_null(strstr(err, "interrupted at line 1"));
    stop = 0;
    assert_int_equal(st_trace_read_buffer(text, strlen(text), "t", &o, count_row, &a, &c, NULL, err, sizeof err), 0);
    assert_false(c.interrupted);
    assert_int_equal(a.n, 2);
}

/* Files as users have them: a UTF-8 byte-order mark is skipped; a compressed file is named as
 * such; binary data is refused. */
static void bom_and_compressed_files(void **state)
{
    (void)state;
    const char *bom = "\xef\xbb\xbf{\"timestamp\": 0, \"input_length\": 100, \"output_length\": 5, \"hash_ids\": [0]}\n"
                      "{\"timestamp\": 1000, \"input_length\": 100, \"output_length\": 5, \"hash_ids\": [1]}\n";
    rows_seen a = { 0 }, b = { 0 };
    char err[400] = "";
    st_trace_format f = ST_TRACE_AUTO;
    if (st_trace_read_buffer(bom, strlen(bom), "t", NULL, count_row, &a, NULL, &f, err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(a.n, 2);
    assert_int_equal(f, ST_TRACE_MOONCAKE);
    /* byte by byte: the mark split over feeds */
    st_trace_reader *r = st_trace_reader_new(NULL, "t", count_row, &b);
    for (size_t i = 0; bom[i]; i++)
        assert_int_equal(st_trace_reader_feed(r, bom + i, 1, err, sizeof err), 0);
    assert_int_equal(st_trace_reader_finish(r, err, sizeof err), 0);
    st_trace_reader_free(r);
    assert_int_equal(b.n, 2);
    /* a CSV with a mark: its first column is still TIMESTAMP */
    const char *csv = "\xef\xbb\xbfTIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,4808,10\n";
    rows_seen c = { 0 };
    assert_int_equal(st_trace_read_buffer(csv, strlen(csv), "t", NULL, count_row, &c, NULL, &f, err, sizeof err), 0);
    assert_int_equal(c.n, 1);
    assert_int_equal(f, ST_TRACE_AZURE);
    /* shorter than the sniff: the whole stream */
    const char *tiny = "\xef\xbb\xbf";
    assert_int_equal(st_trace_read_buffer(tiny, 3, "t", NULL, count_row, &c, NULL, NULL, err, sizeof err), 0);
    static const struct {
        const char *data;
        size_t len;
        const char *want;
    } bad[] = {
        { "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", 10, "t: gzip-compressed: decompress it first (gunzip -k FILE)" },
        { "\x28\xb5\x2f\xfd\x00\x58", 6, "t: zstd-compressed: decompress it first" },
        { "\x00\x00\x00\x00\x00\x00\x00\x00\x00", 9, "t: binary data (a NUL byte in its first bytes)" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = '\0';
        assert_int_equal(
            st_trace_read_buffer(bad[i].data, bad[i].len, "t", NULL, count_row, &c, NULL, NULL, err, sizeof err), -1);
        if (!strstr(err, bad[i].want))
            fail_msg("case %zu: '%s' lacks '%s'", i, err, bad[i].want);
    }
}

/* An over-long line is reported as soon as it passes the limit, not at a newline that may never
 * come; skipping it (max_bad) is bounded too. */
static void overlong_lines_reported_at_once(void **state)
{
    (void)state;
    size_t chunk = (size_t)1 << 20;
    char *x = malloc(chunk);
    assert_non_null(x);
    memset(x, 'x', chunk);
    char err[400] = "";
    rows_seen s = { 0 };
    st_trace_reader *r = st_trace_reader_new(NULL, "t", count_row, &s);
    int rc = 0;
    size_t fed = 0;
    while (rc == 0 && fed <= ST_TRACE_LINE_MAX + chunk) {
        rc = st_trace_reader_feed(r, x, chunk, err, sizeof err);
        fed += chunk;
    }
    assert_int_equal(rc, -1);
    assert_true(fed <= (size_t)ST_TRACE_LINE_MAX + chunk);
    assert_non_null(strstr(err, "t:1: line is longer than 4194304 bytes"));
    st_trace_reader_free(r);
    /* skipped under max_bad: counted, then refused after ST_TRACE_SKIP_MAX bytes without a newline */
    st_trace_opts o = { .max_bad = 5 };
    r = st_trace_reader_new(&o, "t", count_row, &s);
    rc = 0;
    fed = 0;
    while (rc == 0 && fed <= ST_TRACE_SKIP_MAX + 2 * chunk) {
        rc = st_trace_reader_feed(r, x, chunk, err, sizeof err);
        fed += chunk;
    }
    assert_int_equal(rc, -1);
    assert_non_null(strstr(err, "no newline in"));
    assert_int_equal(st_trace_reader_counts(r)->bad, 1);
    st_trace_reader_free(r);
    free(x);
}

/* A JSONL row over the line limit is named as such (not "expected a JSON object"); LiteLLM's
 * /spend/logs array on one line longer than the limit is read like the {"data": [...]} form. */
static void long_first_lines(void **state)
{
    (void)state;
    st_buf b;
    st_buf_init(&b, (size_t)16 << 20);
    st_buf_puts(&b, "{\"timestamp\": 0, \"input_length\": 100, \"output_length\": 5, \"hash_ids\": [0");
    while (b.len <= ST_TRACE_LINE_MAX)
        st_buf_puts(&b, ", 12345678");
    st_buf_puts(&b, "]}\n{\"timestamp\": 1, \"input_length\": 100, \"output_length\": 5, \"hash_ids\": [0]}\n");
    assert_false(st_buf_error(&b));
    rows_seen s = { 0 };
    char err[400] = "";
    assert_int_equal(st_trace_read_buffer(b.data, b.len, "t", NULL, count_row, &s, NULL, NULL, err, sizeof err), -1);
    if (!strstr(err, "t:1: the first row is longer than 4194304 bytes"))
        fail_msg("got '%s'", err);
    for (int form = 0; form < 2; form++) {
        st_buf_reset(&b);
        st_buf_puts(&b, form ? "{\"data\": [" : "[");
        int n = 0;
        while (b.len <= ST_TRACE_LINE_MAX + 1000) {
            st_buf_printf(&b,
                          "%s{\"startTime\": \"2025-01-15T10:%02d:%02dZ\", \"prompt_tokens\": 9, "
                          "\"completion_tokens\": 3, \"metadata\": {\"tags\": [\"a\", \"b\"]}}",
                          n ? ", " : "", (n / 60) % 60, n % 60);
            n++;
        }
        st_buf_puts(&b, form ? "], \"total\": 1}\n" : "]\n");
        assert_false(st_buf_error(&b));
        rows_seen t = { 0 };
        st_trace_format f = ST_TRACE_AUTO;
        if (st_trace_read_buffer(b.data, b.len, "t", NULL, count_row, &t, NULL, &f, err, sizeof err))
            fail_msg("form %d: %s", form, err);
        assert_int_equal(f, ST_TRACE_LITELLM);
        assert_int_equal(t.n, n);
    }
    st_buf_free(&b);
}

/* A gzip file is inflated as it is read (two members, as `cat a.gz b.gz` makes), giving the rows
 * of the plain file; a truncated one is an error that says so. */
static void gzip_files_read(void **state)
{
    (void)state;
    char dir[] = "/tmp/st-trace-gzXXXXXX", gz[64], cut[64];
    assert_non_null(mkdtemp(dir));
    snprintf(gz, sizeof gz, "%s/t.jsonl.gz", dir);
    snprintf(cut, sizeof cut, "%s/cut.jsonl.gz", dir);
    for (int member = 0; member < 2; member++) {
        gzFile z = gzopen(gz, member ? "ab" : "wb");
        assert_non_null(z);
        for (int i = 0; i < 3000; i++)
            gzprintf(z, "{\"timestamp\": %d, \"input_length\": %d, \"output_length\": 5, \"hash_ids\": [%d]}\n",
                     member * 3000000 + i * 1000, 100 + i % 300, i % 7);
        assert_int_equal(gzclose(z), Z_OK);
    }
    rows_seen a = { 0 };
    char err[400] = "";
    st_trace_format f = ST_TRACE_AUTO;
    if (st_trace_read_file(gz, NULL, count_row, &a, NULL, &f, err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(a.n, 6000);
    assert_int_equal(f, ST_TRACE_MOONCAKE);
    /* the first half of the file only */
    FILE *in = fopen(gz, "rb");
    assert_non_null(in);
    static char bytes[1 << 20];
    size_t n = fread(bytes, 1, sizeof bytes, in);
    fclose(in);
    FILE *o = fopen(cut, "wb");
    assert_non_null(o);
    fwrite(bytes, 1, n / 4, o);
    fclose(o);
    rows_seen b = { 0 };
    assert_int_equal(st_trace_read_file(cut, NULL, count_row, &b, NULL, NULL, err, sizeof err), -1);
    if (!strstr(err, "the gzip data ends early"))
        fail_msg("got '%s'", err);
    unlink(gz);
    unlink(cut);
    rmdir(dir);
}

/* Files that never end: a device is refused by name; a FIFO is read, and a line without end in
 * it is refused once it passes the limit (a writer that never closes cannot hold the reader). */
static void devices_and_fifos(void **state)
{
    (void)state;
    char err[400] = "";
    rows_seen s = { 0 };
    assert_int_equal(st_trace_read_file("/dev/zero", NULL, count_row, &s, NULL, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "/dev/zero: is a character device, not a trace file"));
    char dir[] = "/tmp/st-trace-fifoXXXXXX", fifo[64];
    assert_non_null(mkdtemp(dir));
    snprintf(fifo, sizeof fifo, "%s/t.fifo", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) { /* the broken exporter: 6 MiB without a newline, then holds the FIFO open */
        alarm(90);
        int fd = open(fifo, O_WRONLY);
        static char x[1 << 16];
        memset(x, 'x', sizeof x);
        for (int i = 0; fd >= 0 && i < 96; i++)
            if (write(fd, x, sizeof x) < 0)
                _exit(0);
        sleep(85);
        _exit(0);
    }
    alarm(30); /* a reader that waited for a newline would hang here: fail instead */
    int rc = st_trace_read_file(fifo, NULL, count_row, &s, NULL, NULL, err, sizeof err);
    alarm(0);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    unlink(fifo);
    rmdir(dir);
    assert_int_equal(rc, -1);
    if (!strstr(err, "longer than 4194304 bytes"))
        fail_msg("got '%s'", err);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(mooncake_blocks_shared),
        cmocka_unit_test(azure_csv),
        cmocka_unit_test(burstgpt_failed_rows_apart),
        cmocka_unit_test(litellm_spend_logs),
        cmocka_unit_test(plain_csv_named_columns),
        cmocka_unit_test(servetune_sessions),
        cmocka_unit_test(filters_and_counted_skips),
        cmocka_unit_test(chunking_does_not_matter),
        cmocka_unit_test(datetimes),
        cmocka_unit_test(forced_format),
        cmocka_unit_test(the_stop_flag_ends_the_reading),
        cmocka_unit_test(bom_and_compressed_files),
        cmocka_unit_test(overlong_lines_reported_at_once),
        cmocka_unit_test(long_first_lines),
        cmocka_unit_test(devices_and_fifos),
        cmocka_unit_test(gzip_files_read),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}
