/* A trace as an audit, predict and plan replay it: the spec's trace filters (trace_max_tokens,
 * trace_window, trace_sample), requests longer than a configuration's context left out and said
 * (--check's warning, the sweep's workload), and the automatic --max-model-len of a plan (the
 * trace's longest, at most the model's context). Each check names what it found. */
#include "harness.h"

#include <jansson.h>

#include <stdio.h>
#include <unistd.h>

#include "audit/check.h"
#include "audit/spec.h"
#include "audit/sweep.h"
#include "audit/traffic.h"
#include "core/buf.h"
#include "plan/day.h"
#include "load/hourly.h"
#include "load/trace.h"
#include "load/trace_stats.h"
#include "load/workload.h"

/* A servetune JSONL trace of n rows, one a second; row i is long (long_len input tokens) when
 * long_every divides i + 1, else 1000 input tokens; 100 output tokens each. */
static void write_trace(char *path, int n, int long_every, uint32_t long_len)
{
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    for (int i = 0; i < n; i++)
        fprintf(f, "{\"timestamp\": %d, \"input_tokens\": %u, \"output_tokens\": 100}\n", i,
                long_every && (i + 1) % long_every == 0 ? long_len : 1000u);
    fclose(f);
}

/* An emulator spec (burst runs: a trace is not repeated to fill a run) over trace with flags_extra after --gpu H100 and workload_extra keys. */
static int spec_of(st_spec *s, const char *trace, const char *flags_extra, const char *workload_extra, char *err,
                   size_t errlen)
{
    char text[2048];
    snprintf(text, sizeof text,
             "engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100%s]}\n"
             "hardware: {gpu: H100, price_per_gpu_hour: 2.5}\npeak_rate: 10\n"
             "workload: {trace: '%s'%s}\nrates: [1]\nwarmup_requests: 0\n"
             "slo: {ttft_p95_ms: 1500, tpot_p95_ms: 50}\nsearch: {mode: burst}\n",
             flags_extra, trace, workload_extra);
    return st_spec_parse("t.yaml", text, strlen(text), s, err, errlen);
}

/* 4 of 10 requests are longer than --max-model-len 4096: --check says the share (and passes, the
 * rest can run); the sweep's workload for that configuration leaves them out; with
 * trace_max_tokens the spec filters them for every configuration and nothing is said. */
static void over_context_is_said_and_left_out(void **state)
{
    (void)state;
    char trace[] = "/tmp/st_trace_spec_XXXXXX";
    write_trace(trace, 10, 5, 5000); /* rows 5 and 10 are long */
    char err[1024] = "";
    st_spec s;
    if (spec_of(&s, trace, ", --max-model-len, '4096'", "", err, sizeof err))
        fail_msg("spec: %s", err);
    uint32_t ctx = st_sweep_config_context(&s, &s.configs[0]);
    if (ctx != 4096)
        fail_msg("the configuration's context is %u, expected 4096 (--max-model-len)", ctx);
    uint64_t over, total;
    assert_int_equal(st_sweep_trace_over_context(&s, ctx, &over, &total, err, sizeof err), 0);
    if (over != 2 || total != 10)
        fail_msg("over the context: %llu of %llu, expected 2 of 10", (unsigned long long)over,
                 (unsigned long long)total);
    if (st_spec_check(&s, err, sizeof err))
        fail_msg("--check refused a trace of which 80 %% fits: %s", err);
    st_buf b;
    st_buf_init(&b, 1 << 16);
    st_spec_warnings(&s, 0, &b);
    const char *want = "2 of the trace's 10 requests (20.0 %) are longer (prompt + output) than its context of 4096";
    if (!b.data || !strstr(b.data, want))
        fail_msg("--check's warnings '%s' lack '%s'", b.data ? b.data : "", want);
    st_buf_free(&b);
    st_workload w;
    assert_int_equal(st_sweep_workload_ctx(&s, 1, 100, ctx, &w, err, sizeof err), 0);
    if (w.n != 8)
        fail_msg("the configuration's workload holds %u requests, expected the 8 within its context", w.n);
    for (uint32_t i = 0; i < w.n; i++)
        if (w.items[i].input_len + w.items[i].output_len > ctx)
            fail_msg("request %u (%u + %u tokens) is longer than the context %u", i, w.items[i].input_len,
                     w.items[i].output_len, ctx);
    st_workload_free(&w);
    st_spec_free(&s);

    /* the spec's own filter: nothing left over the context, nothing said */
    if (spec_of(&s, trace, ", --max-model-len, '4096'", ", trace_max_tokens: 2000", err, sizeof err))
        fail_msg("spec: %s", err);
    assert_int_equal(st_sweep_trace_over_context(&s, ctx, &over, &total, err, sizeof err), 0);
    if (over != 0 || total != 8)
        fail_msg("with trace_max_tokens 2000: %llu over of %llu, expected 0 of 8", (unsigned long long)over,
                 (unsigned long long)total);
    st_buf_init(&b, 1 << 16);
    st_spec_warnings(&s, 0, &b);
    if (b.data && strstr(b.data, "longer (prompt + output)"))
        fail_msg("a filtered trace is still said to be over the context: %s", b.data);
    st_buf_free(&b);
    st_spec_free(&s);

    /* every request too long: --check refuses (the runs would send nothing) */
    if (spec_of(&s, trace, ", --max-model-len, '512'", "", err, sizeof err))
        fail_msg("spec: %s", err);
    if (st_spec_check(&s, err, sizeof err) == 0 || !strstr(err, "every one of the trace's 10 requests"))
        fail_msg("--check accepted a trace none of whose requests fits 512 tokens (err '%s')", err);
    st_spec_free(&s);
    unlink(trace);
}

/* trace_window and trace_sample keep the rows bench's --trace-window / --trace-sample would;
 * the filters are refused on a synthetic workload and out of their range. */
static void spec_trace_filters(void **state)
{
    (void)state;
    char trace[] = "/tmp/st_trace_spec_XXXXXX";
    write_trace(trace, 100, 0, 0);
    char err[1024] = "";
    st_spec s;
    if (spec_of(&s, trace, "", ", trace_window: '10:30'", err, sizeof err))
        fail_msg("spec: %s", err);
    st_workload w;
    assert_int_equal(st_sweep_workload(&s, 1, 1000, &w, err, sizeof err), 0);
    if (w.n != 20)
        fail_msg("trace_window 10:30 kept %u rows, expected 20 (seconds 10..29)", w.n);
    st_workload_free(&w);
    st_spec_free(&s);
    /* hours, as docs/audit-spec.md writes them ('1h:2h'): 0.01 h = 36 s */
    if (spec_of(&s, trace, "", ", trace_window: '0h:0.01h'", err, sizeof err))
        fail_msg("spec: %s", err);
    assert_int_equal(st_sweep_workload(&s, 1, 1000, &w, err, sizeof err), 0);
    if (w.n != 36)
        fail_msg("trace_window 0h:0.01h kept %u rows, expected 36 (seconds 0..35)", w.n);
    st_workload_free(&w);
    st_spec_free(&s);
    if (spec_of(&s, trace, "", ", trace_sample: 0.25", err, sizeof err))
        fail_msg("spec: %s", err);
    assert_int_equal(st_sweep_workload(&s, 1, 1000, &w, err, sizeof err), 0);
    if (w.n < 10 || w.n > 45)
        fail_msg("trace_sample 0.25 kept %u of 100 rows, expected about 25", w.n);
    st_workload_free(&w);
    st_spec_free(&s);
    static const struct {
        const char *workload, *want;
    } bad[] = {
        { ", trace_window: '30:10'", "workload.trace_window: expected 'FROM:TO' with FROM < TO" },
        { ", trace_sample: 1.5", "workload.trace_sample: a fraction in (0, 1]" },
        { ", trace_max_tokens: 1", "workload.trace_max_tokens: must be at least 2" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (spec_of(&s, trace, "", bad[i].workload, err, sizeof err) == 0) {
            st_spec_free(&s);
            fail_msg("'%s' was accepted", bad[i].workload);
        }
        if (!strstr(err, bad[i].want))
            fail_msg("'%s': error '%s' lacks '%s'", bad[i].workload, err, bad[i].want);
    }
    const char *syn = "engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100]}\n"
                      "hardware: {gpu: H100, price_per_gpu_hour: 2.5}\npeak_rate: 10\n"
                      "workload: {input_tokens: 100, output_tokens: 10, trace_sample: 0.5}\nrates: [1]\n"
                      "slo: {ttft_p95_ms: 1500, tpot_p95_ms: 50}\n";
    if (st_spec_parse("t.yaml", syn, strlen(syn), &s, err, sizeof err) == 0) {
        st_spec_free(&s);
        fail_msg("trace_sample on a synthetic workload was accepted");
    }
    if (!strstr(err, "filters a trace"))
        fail_msg("synthetic trace_sample: error '%s'", err);
    unlink(trace);
}

/* A plan's automatic --max-model-len covers the trace's longest request up to the model's own
 * context (Qwen3-8B: 40,960): a p99 would refuse the longest 1 %, and one refused request fails
 * a run. The share beyond the context is the share every run leaves out. */
static void plan_len_covers_the_trace(void **state)
{
    (void)state;
    char trace[] = "/tmp/st_trace_spec_XXXXXX";
    write_trace(trace, 200, 100, 9000); /* 2 rows of 9,100 tokens: above the p99 (1,100) */
    char err[1024] = "";
    st_spec s;
    if (spec_of(&s, trace, "", "", err, sizeof err))
        fail_msg("spec: %s", err);
    long len;
    double reject;
    int capped;
    assert_int_equal(st_traffic_len_auto(&s, &len, &reject, &capped, err, sizeof err), 0);
    if (len != 9216 || reject != 0 || capped)
        fail_msg("len %ld (reject %.3f, capped %d), expected 9216 covering the longest 9,100 tokens, 0, 0", len, reject,
                 capped);
    st_spec_free(&s);
    unlink(trace);
    char trace2[] = "/tmp/st_trace_spec_XXXXXX";
    write_trace(trace2, 100, 20, 60000); /* 5 rows of 60,100 tokens: beyond the model's context */
    if (spec_of(&s, trace2, "", "", err, sizeof err))
        fail_msg("spec: %s", err);
    assert_int_equal(st_traffic_len_auto(&s, &len, &reject, &capped, err, sizeof err), 0);
    if (len != 40960 || !capped)
        fail_msg("len %ld (capped %d), expected the model's context 40960", len, capped);
    assert_near(reject, 0.05, 1e-9);
    st_spec_free(&s);
    unlink(trace2);
}

/* Timestamps on a 3 s clock (Mooncake's), several requests a tick: the quantum is found, the ties
 * are not read as burstiness (the recorded gaps' CV is above 1.2, "bursty"; spread over their
 * ticks the gaps are smoother than Poisson), the advice and the counts line say so, and a load
 * spreads each tick's requests over it. Times of a fine clock are not quantized. */
static void quantized_times_are_spread(void **state)
{
    (void)state;
    char text[16384];
    size_t off = 0;
    int rows = 0;
    for (int tick = 0; tick < 60; tick++)
        for (int j = 0; j < 1 + (tick * 7) % 5; j++, rows++)
            off += (size_t)snprintf(text + off, sizeof text - off,
                                    "{\"timestamp\": %d, \"input_tokens\": 100, \"output_tokens\": 10}\n", 3 * tick);
    st_trace_stats *ts = st_trace_stats_new();
    st_trace_counts c;
    char err[512];
    assert_int_equal(
        st_trace_read_buffer(text, off, "q.jsonl", NULL, st_trace_stats_row_cb, ts, &c, NULL, err, sizeof err), 0);
    st_traffic t;
    st_trace_stats_result(ts, &t);
    if (!(c.quantum_s == 3 && t.quantum_s == 3))
        fail_msg("quantum: counts %g, stats %g, expected 3 s", c.quantum_s, t.quantum_s);
    if (!(t.gap_cv_recorded > 1.2))
        fail_msg("the recorded gaps' CV is %.3f, expected above 1.2 (ties as zero gaps)", t.gap_cv_recorded);
    if (!(t.gap_cv < 0.8))
        fail_msg("the spread gaps' CV is %.3f, expected below 0.8 (a steady clock's ticks)", t.gap_cv);
    st_traffic_advice a;
    st_traffic_advise(ts, &t, NULL, &a);
    int said = 0;
    for (int i = 0; i < a.n_lines; i++)
        said |= strstr(a.lines[i], "quantized to 3 s") != NULL;
    if (!said)
        fail_msg("no advice line says the times are quantized to 3 s");
    char d[800];
    st_trace_counts_describe(&c, d, sizeof d);
    if (!strstr(d, "times quantized to 3 s"))
        fail_msg("the counts line '%s' does not say the quantum", d);
    st_trace_stats_free(ts);
    st_trace_load_opts o;
    st_trace_load_opts_default(&o);
    st_workload w;
    assert_int_equal(st_trace_load_buffer(text, off, "q.jsonl", &o, &w, NULL, NULL, err, sizeof err), 0);
    assert_int_equal((int)w.n, rows);
    for (uint32_t i = 1; i < w.n; i++) {
        if (w.items[i].arrival <= w.items[i - 1].arrival)
            fail_msg("request %u arrives at %lld ns, not after %lld: a tick's requests were not spread", i,
                     (long long)w.items[i].arrival, (long long)w.items[i - 1].arrival);
        if (w.items[i].arrival >= 3 * (st_ns)1000000000 * 60)
            fail_msg("request %u spread past the last tick", i);
    }
    st_workload_free(&w);

    /* a fine clock (microseconds): no quantum */
    off = 0;
    for (int i = 0; i < 50; i++)
        off += (size_t)snprintf(text + off, sizeof text - off,
                                "{\"timestamp\": %.6f, \"input_tokens\": 100, \"output_tokens\": 10}\n",
                                i * 0.731 + (i % 3) * 0.000117);
    assert_int_equal(st_trace_read_buffer(text, off, "f.jsonl", NULL, NULL, NULL, &c, NULL, err, sizeof err), 0);
    if (c.quantum_s != 0)
        fail_msg("a microsecond clock read as quantized to %g s", c.quantum_s);
}

/* The trace's busiest minute: `peak_rate: trace` takes it (and says so), a stated peak 15x it is
 * warned about at --check, and `peak_rate: trace` without a trace is refused. Minute 1 of the
 * trace holds 120 requests (2 req/s), minutes 0 and 2 hold 30 each. */
static void peak_from_the_trace(void **state)
{
    (void)state;
    char trace[] = "/tmp/st_trace_spec_XXXXXX";
    int fd = mkstemp(trace);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    for (int i = 0; i < 30; i++)
        fprintf(f, "{\"timestamp\": %.3f, \"input_tokens\": 100, \"output_tokens\": 10}\n", i * 2.0);
    for (int i = 0; i < 120; i++)
        fprintf(f, "{\"timestamp\": %.3f, \"input_tokens\": 100, \"output_tokens\": 10}\n", 60 + i * 0.5);
    for (int i = 0; i < 31; i++)
        fprintf(f, "{\"timestamp\": %.3f, \"input_tokens\": 100, \"output_tokens\": 10}\n", 120 + i * 2.0);
    fclose(f);
    char err[1024] = "", text[2048];
    st_spec s;
    snprintf(text, sizeof text,
             "engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100]}\n"
             "hardware: {gpu: H100, price_per_gpu_hour: 2.5}\npeak_rate: trace\n"
             "workload: {trace: '%s'}\nrates: [1]\nwarmup_requests: 0\nslo: {ttft_p95_ms: 1500, tpot_p95_ms: 50}\n",
             trace);
    if (st_spec_parse("t.yaml", text, strlen(text), &s, err, sizeof err))
        fail_msg("peak_rate: trace: %s", err);
    assert_int_equal(s.peak_source, ST_PEAK_FROM_TRACE);
    assert_int_equal(st_audit_resolve_peak(&s, err, sizeof err), 0);
    if (s.peak_source != ST_PEAK_BUSIEST_MINUTE || fabs(s.peak_rate - 2.0) > 1e-9)
        fail_msg("peak %g req/s (source %d), expected the busiest minute's 2 req/s", s.peak_rate, (int)s.peak_source);
    st_spec_free(&s);

    snprintf(text, sizeof text,
             "engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100]}\n"
             "hardware: {gpu: H100, price_per_gpu_hour: 2.5}\npeak_rate: 30\n"
             "workload: {trace: '%s'}\nrates: [1]\nwarmup_requests: 0\nslo: {ttft_p95_ms: 1500, tpot_p95_ms: 50}\n",
             trace);
    if (st_spec_parse("t.yaml", text, strlen(text), &s, err, sizeof err))
        fail_msg("spec: %s", err);
    st_buf b;
    st_buf_init(&b, 1 << 16);
    st_spec_warnings(&s, 0, &b);
    const char *want = "peak_rate: 30 req/s is 15x the trace's busiest minute (2 req/s)";
    if (!b.data || !strstr(b.data, want))
        fail_msg("--check's warnings '%s' lack '%s'", b.data ? b.data : "", want);
    st_buf_free(&b);
    st_spec_free(&s);

    const char *syn =
        "engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100]}\n"
        "hardware: {gpu: H100, price_per_gpu_hour: 2.5}\npeak_rate: trace\n"
        "workload: {input_tokens: 100, output_tokens: 10}\nrates: [1]\nslo: {ttft_p95_ms: 1500, tpot_p95_ms: 50}\n";
    if (st_spec_parse("t.yaml", syn, strlen(syn), &s, err, sizeof err) == 0) {
        st_spec_free(&s);
        fail_msg("peak_rate: trace without a trace was accepted");
    }
    if (!strstr(err, "peak_rate: 'trace' takes the peak from workload.trace"))
        fail_msg("peak_rate: trace, synthetic: error '%s'", err);
    unlink(trace);
}

/* A run replays the trace's first rows: a trace whose first 20 requests share nothing and whose
 * other 80 share one 4-block prefix. With 20 requests a run, --check says the runs replay 20 %
 * of it and see an ideal prefix-cache hit rate of 0 % against the whole trace's, and the stored
 * traffic carries the same ("replayed"); with 100 requests a run nothing is said. */
static void replayed_share_and_its_prefixes(void **state)
{
    (void)state;
    char trace[] = "/tmp/st_trace_spec_XXXXXX";
    int fd = mkstemp(trace);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    for (int i = 0; i < 100; i++) {
        if (i < 20)
            fprintf(
                f,
                "{\"timestamp\": %d, \"input_length\": 2048, \"output_length\": 10, \"hash_ids\": [%d, %d, %d, %d]}\n",
                i * 1000, 1000 + 4 * i, 1001 + 4 * i, 1002 + 4 * i, 1003 + 4 * i);
        else
            fprintf(f,
                    "{\"timestamp\": %d, \"input_length\": 2048, \"output_length\": 10, \"hash_ids\": [1, 2, 3, 4]}\n",
                    i * 1000);
    }
    fclose(f);
    char err[1024] = "";
    for (int k = 0; k < 2; k++) {
        st_spec s;
        if (spec_of(&s, trace, "", k ? ", requests_per_rate: 100" : ", requests_per_rate: 20", err, sizeof err))
            fail_msg("spec: %s", err);
        st_replay_share rs;
        assert_int_equal(st_audit_replay_share(&s, &rs, err, sizeof err), 0);
        st_buf b;
        st_buf_init(&b, 1 << 16);
        st_spec_warnings(&s, 0, &b);
        const char *want = "workload.trace: each run replays the trace's first 20 of its 100 requests (20.0 %); their "
                           "ideal prefix-cache hit rate is 0.0 % against 79.0 % for the whole trace: the runs see less "
                           "prefix reuse than the trace holds";
        if (!k && (!rs.differs || !b.data || !strstr(b.data, want)))
            fail_msg("20 a run: differs %d (%.3f vs %.3f), warnings '%s' lack '%s'", rs.differs, rs.hit_replayed,
                     rs.hit_all, b.data ? b.data : "", want);
        if (k && (rs.differs || (b.data && strstr(b.data, "each run replays"))))
            fail_msg("the whole trace a run: differs %d, warnings '%s'", rs.differs, b.data ? b.data : "");
        st_buf_free(&b);
        char *json = NULL;
        assert_int_equal(st_audit_traffic_json(&s, &json, err, sizeof err), 0);
        json_t *j = json_loads(json, 0, NULL);
        json_t *r = json_object_get(j, "replayed");
        if (json_integer_value(json_object_get(r, "requests")) != (k ? 100 : 20) ||
            json_integer_value(json_object_get(r, "of")) != 100 || json_is_true(json_object_get(r, "differs")) != !k)
            fail_msg("traffic's replayed: %s", json);
        json_decref(j);
        free(json);
        st_spec_free(&s);
    }
    /* trace_replay: spread: about 20 requests sampled over the whole trace (its 99 s), not its first 20 s */
    st_spec s;
    if (spec_of(&s, trace, "", ", requests_per_rate: 20, trace_replay: spread", err, sizeof err))
        fail_msg("spec: %s", err);
    st_workload w;
    assert_int_equal(st_sweep_workload(&s, 1, 20, &w, err, sizeof err), 0);
    st_ns last = w.n ? w.items[w.n - 1].arrival : 0;
    if (w.n < 8 || w.n > 20 || last < 60 * (st_ns)1000000000)
        fail_msg("spread: %u requests, the last at %.1f s: expected about 20 over most of the 99 s", w.n, last / 1e9);
    st_workload_free(&w);
    st_replay_share rs;
    assert_int_equal(st_audit_replay_share(&s, &rs, err, sizeof err), 0);
    st_buf b;
    st_buf_init(&b, 4096);
    st_replay_share_say(&rs, &b);
    if (!rs.spread || !b.data || !strstr(b.data, "each run replays a sample of"))
        fail_msg("spread: replay share says '%s'", b.data ? b.data : "");
    printf("# spread: %u requests over %.1f s; %s\n", (unsigned)rs.replayed, last / 1e9, b.data);
    st_buf_free(&b);
    st_spec_free(&s);
    unlink(trace);
}

/* A day spec from the trace's own times (traffic.hourly_rps: trace): a trace of 2024-05-10 09:00
 * to 10:59:58 UTC, one request a second in hour 9 and one every 2 s in hour 10, gives those two
 * hours (UTC) at 1 and ~0.5 req/s and no others (it covers two hours: the day is priced over
 * them, never extrapolated), and says so; a clock from the log's start counts hours from its
 * first request; a spec's own 24 rates are kept; no rates without a trace is refused. */
static void day_from_the_trace(void **state)
{
    (void)state;
    char trace[] = "/tmp/st_trace_day_XXXXXX";
    int fd = mkstemp(trace);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    const double t9 = 1715299200.0 + 9 * 3600; /* 2024-05-10 09:00:00 UTC */
    for (int i = 0; i < 3600; i++)
        fprintf(f, "{\"timestamp\": %.1f, \"input_tokens\": 100, \"output_tokens\": 10}\n", t9 + i);
    for (int i = 0; i < 1800; i++)
        fprintf(f, "{\"timestamp\": %.1f, \"input_tokens\": 100, \"output_tokens\": 10}\n", t9 + 3600 + 2.0 * i);
    fclose(f);
    char err[1024] = "", text[2048];
    const char *head = "engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100]}\n"
                       "hardware: {gpu: H100, price_per_gpu_hour: 2.5}\npeak_rate: trace\nrates: [1]\n"
                       "warmup_requests: 0\nslo: {ttft_p95_ms: 1500, tpot_p95_ms: 50}\n";
    st_spec s;
    snprintf(text, sizeof text, "%sworkload: {trace: '%s'}\ntraffic: {hourly_rps: trace}\n", head, trace);
    if (st_spec_parse("t.yaml", text, strlen(text), &s, err, sizeof err))
        fail_msg("hourly_rps: trace: %s", err);
    assert_int_equal(s.traffic.day_source, ST_DAY_FROM_TRACE);
    assert_int_equal(st_audit_resolve_day(&s, err, sizeof err), 0);
    assert_int_equal(s.traffic.day_source, ST_DAY_TRACE_UTC);
    assert_int_equal(s.traffic.hours_known, 2);
    assert_true(s.traffic.hour_known[9] && s.traffic.hour_known[10] && !s.traffic.hour_known[8]);
    if (fabs(s.traffic.hourly_rps[9] - 1.0) > 1e-3 || fabs(s.traffic.hourly_rps[10] - 0.5) > 1e-3)
        fail_msg("hours 9 and 10 at %g and %g req/s, expected 1 and 0.5", s.traffic.hourly_rps[9],
                 s.traffic.hourly_rps[10]);
    /* priced over the two hours it covers: one replica of 1 req/s for 2 hours at $2.5 */
    st_day_setup u = {
        .capacity_rps = 1, .gpus_per_replica = 1, .price_per_gpu_hour = 2.5, .ttft_ms = NAN, .tpot_ms = NAN
    };
    st_day_cost d;
    st_day_serverless sl;
    assert_int_equal(st_day_of_spec(&s, NULL, &u, &d, &sl, err, sizeof err), 0);
    assert_int_equal(d.n, 2);
    assert_true(fabs(d.peak_usd - 5.0) < 1e-9 && fabs(d.requests - 5400) < 2);
    st_buf b;
    st_buf_init(&b, 4096);
    st_audit_day_source_say(&s, &b);
    if (!b.data || !strstr(b.data, "(UTC, from its calendar times)") ||
        !strstr(b.data, "covers 2 of the 24 hours (each for at least 30 minutes, priced as a whole hour at the rate "
                        "it had): the day is priced over those 2 hours only, not extrapolated"))
        fail_msg("the day's source said as '%s'", b.data ? b.data : "");
    st_buf_free(&b);
    st_spec_free(&s);

    /* the spec's own day is kept, trace or not */
    char day[512] = "traffic: {hourly_rps: [";
    for (int h = 0; h < 24; h++)
        snprintf(day + strlen(day), sizeof day - strlen(day), "%s%d", h ? ", " : "", h + 1);
    snprintf(text, sizeof text, "%sworkload: {trace: '%s'}\n%s]}\n", head, trace, day);
    if (st_spec_parse("t.yaml", text, strlen(text), &s, err, sizeof err))
        fail_msg("a stated day: %s", err);
    assert_int_equal(st_audit_resolve_day(&s, err, sizeof err), 0);
    assert_int_equal(s.traffic.day_source, ST_DAY_STATED);
    assert_int_equal(s.traffic.hours_known, 24);
    assert_true(s.traffic.hourly_rps[9] == 10 && s.traffic.hourly_rps[23] == 24);
    st_spec_free(&s);

    /* no day and no trace: refused, naming the key */
    snprintf(text, sizeof text,
             "engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100]}\n"
             "hardware: {gpu: H100, price_per_gpu_hour: 2.5}\npeak_rate: 3\nrates: [1]\nwarmup_requests: 0\n"
             "slo: {ttft_p95_ms: 1500, tpot_p95_ms: 50}\nworkload: {input_tokens: 100, output_tokens: 10}\n"
             "traffic: {hourly_rps: trace}\n");
    assert_int_equal(st_spec_parse("t.yaml", text, strlen(text), &s, err, sizeof err), -1);
    if (!strstr(err, "traffic.hourly_rps: 'trace' takes the day from workload.trace"))
        fail_msg("refused with '%s'", err);
    unlink(trace);

    /* times from the log's start (Mooncake's): hours from the first request; 90 minutes cover
     * hour 0 wholly and hour 1 for 30 minutes, both priced */
    st_hourly hr;
    memset(&hr, 0, sizeof hr);
    for (int i = 0; i <= 5400; i++)
        st_hourly_add(&hr, 12.0 + i);
    st_hourly_profile p;
    st_hourly_result(&hr, &p);
    assert_int_equal(p.clock, ST_HOURLY_FROM_FIRST);
    assert_int_equal(p.hours, 2);
    assert_true(fabs(p.rps[0] - 1.0) < 1e-3 && fabs(p.rps[1] - 1.0) < 1e-3 && isnan(p.rps[2]));
    /* 20 minutes: no hour covered for long enough, so no day (and no guess) */
    memset(&hr, 0, sizeof hr);
    for (int i = 0; i <= 1200; i++)
        st_hourly_add(&hr, i);
    st_hourly_result(&hr, &p);
    assert_int_equal(p.hours, 0);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(over_context_is_said_and_left_out),
        cmocka_unit_test(spec_trace_filters),
        cmocka_unit_test(plan_len_covers_the_trace),
        cmocka_unit_test(quantized_times_are_spread),
        cmocka_unit_test(peak_from_the_trace),
        cmocka_unit_test(day_from_the_trace),
        cmocka_unit_test(replayed_share_and_its_prefixes),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}
