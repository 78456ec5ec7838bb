/* --check = run: every spec the check accepts can run, so each thing a run would trip on is
 * refused before anything starts, with the key named (audit/check.h). Also the spec parser's own
 * refusals of hostile input: deep nesting (in linear time), a NUL in a string, an absurd peak, a
 * literal secret in the command or one that starts with '-'. */
#include "harness.h"

#include <stdio.h>
#include <unistd.h>

#include "audit/check.h"
#include "audit/executor.h"
#include "audit/spec.h"
#include "load/workload.h"

/* An emulator spec; %s parts: engine extra lines, flags extra, workload, rates, root extra. */
#define FMT                                                                                                            \
    "engine:\n"                                                                                                        \
    "  kind: %s\n"                                                                                                     \
    "  model: Qwen/Qwen3-8B\n"                                                                                         \
    "%s"                                                                                                               \
    "  flags: [--gpu, H100%s]\n"                                                                                       \
    "hardware: {gpu: H100, price_per_gpu_hour: 2.5}\n"                                                                 \
    "peak_rate: 10\n"                                                                                                  \
    "workload: {%s}\n"                                                                                                 \
    "rates: [%s]\n"                                                                                                    \
    "slo: {ttft_p95_ms: 1500, tpot_p95_ms: 50}\n"                                                                      \
    "%s"

typedef struct spec_case {
    const char *what;
    const char *kind, *engine, *flags, *workload, *rates, *extra;
    const char *want; /* in the error; NULL: accepted */
} spec_case;

/* Parse and check as audit, --check and predict do: 0 accepted, -1 refused (err says why). */
static int parse_and_check(const spec_case *c, char *err, size_t errlen)
{
    char text[4096];
    snprintf(text, sizeof text, FMT, c->kind ? c->kind : "emulator", c->engine ? c->engine : "",
             c->flags ? c->flags : "", c->workload ? c->workload : "input_tokens: 100, output_tokens: 10",
             c->rates ? c->rates : "1, 2", c->extra ? c->extra : "");
    st_spec s;
    if (st_spec_parse("t.yaml", text, strlen(text), &s, err, errlen))
        return -1;
    int rc = st_spec_check(&s, err, errlen);
    st_spec_free(&s);
    return rc;
}

static void check_refuses_what_a_run_would(void **state)
{
    (void)state;
    setenv("ST_CHECK_KEY", "sk-check-0123456789", 1);
    setenv("ST_CHECK_SHORT", "ab", 1);
    unsetenv("ST_CHECK_UNSET");
    unsetenv("SERVETUNE_EMULATE_GPU");
    const spec_case cases[] = {
        { "a plain spec", 0, 0, 0, 0, 0, 0, NULL },
        { "lengths past the supported maximum", 0, 0, 0, "input_tokens: 3000000, output_tokens: 10", 0, 0,
          "workload: lengths above 2097152 tokens are not supported" },
        { "output past the maximum once ranged", 0, 0, 0, "input_tokens: 100, output_tokens: 2000000, range_ratio: 0.1",
          0, 0, "are not supported" },
        { "prompts shorter than the shared prefix", 0, 0, 0,
          "input_tokens: 1000, output_tokens: 10, shared_prefix: 600, range_ratio: 0.5", 0, 0,
          "shared prefix (600 tokens) is longer than the shortest prompt (500 tokens)" },
        { "a malformed endpoint URL", "endpoint", "  url: 'http://exa mple:80/v1'\n", 0, 0, 0, 0,
          "t.yaml: engine.url:" },
        { "an endpoint URL with a bad port", "endpoint", "  url: 'http://127.0.0.1:99999'\n", 0, 0, 0, 0,
          "engine.url:" },
        { "an emulator flag value the emulator refuses", 0, 0, ", --max-num-seqs, lots", 0, 0, 0,
          "the emulator refuses its flags: --max-num-seqs: expected an integer, got 'lots'" },
        { "an emulator block size it refuses", 0, 0, ", --block-size, '7'", 0, 0, 0, "the emulator refuses its flags" },
        { "an unset ${VAR} in the environment", 0, "  env: {HF_TOKEN: '${ST_CHECK_UNSET}'}\n", 0, 0, 0, 0,
          "engine.env.HF_TOKEN: the environment variable ST_CHECK_UNSET is not set" },
        { "an unset API key variable", "endpoint", "  url: 'http://127.0.0.1:9'\n  api_key_env: ST_CHECK_UNSET\n", 0, 0,
          0, 0, "engine.api_key_env: the environment variable ST_CHECK_UNSET is not set" },
        { "a ${VAR} too short to redact", 0, "  env: {HF_TOKEN: '${ST_CHECK_SHORT}'}\n", 0, 0, 0, 0,
          "expands to fewer than 4 characters" },
        { "a secret flag through the environment", "vllm", 0, ", --api-key, '${ST_CHECK_KEY}'", 0, 0, 0, NULL },
        { "a ${VAR} where only the command line could carry it", "vllm", 0, ", --hf-token, '${ST_CHECK_KEY}'", 0, 0, 0,
          "--hf-token: a ${VAR} value would be visible in the engine's command line" },
        { "a ${VAR} in a flag that is no secret", "vllm", 0, ", --max-model-len, '${ST_CHECK_KEY}'", 0, 0, 0,
          "would be visible in the engine's command line" },
        { "a warm-up that could not be built", 0, 0, 0, 0, 0, "warmup_requests: 20000000\n",
          "warmup_requests: at most 1000000" },
        { "rates so low a burst run would take years", 0, 0, 0, 0, "0.000001, 1", "search: {mode: burst}\n",
          "would last" },
        { "a day-long burst run is the limit", 0, 0, 0, "input_tokens: 100, output_tokens: 10, requests_per_rate: 86",
          "0.001", "search: {mode: burst}\n", NULL },
        { "a sustained window longer than max_duration", 0, 0, 0, 0, "0.001", "search: {max_duration: 300s}\n",
          "longer than search.max_duration (300 s)" },
        { "prompts past the emulator's --max-model-len", 0, 0, ", --max-model-len, '4096'",
          "input_tokens: 4000, output_tokens: 100, range_ratio: 0.1", 0, 0,
          "the longest prompt (4400 tokens) plus its requested output (110) exceeds the context of 4096 tokens" },
        { "prompts within it", 0, 0, ", --max-model-len, '4096'", "input_tokens: 3500, output_tokens: 100", 0, 0,
          NULL },
        { "a time scale past the emulator's bound", 0, 0, ", --time-scale, '1e9'", 0, 0, 0,
          "--time-scale 1e9: expected a number in (0, 1000]" },
        { "a vllm that forwards a time scale past the bound", "vllm", 0, ", --time-scale, '1001'", 0, 0, 0,
          "--time-scale 1001: expected a number in (0, 1000]" },
        { "the highest time scale", 0, 0, ", --time-scale, '1000'", 0, 0, 0, NULL },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char err[1024] = "";
        int rc = parse_and_check(&cases[i], err, sizeof err);
        if (!cases[i].want && rc)
            fail_msg("%s: refused: %s", cases[i].what, err);
        if (cases[i].want && !rc)
            fail_msg("%s: accepted", cases[i].what);
        if (cases[i].want && !strstr(err, cases[i].want))
            fail_msg("%s: '%s' lacks '%s'", cases[i].what, err, cases[i].want);
    }
    unsetenv("ST_CHECK_KEY");
    unsetenv("ST_CHECK_SHORT");
}

/* The emulator needs a GPU: --gpu, or SERVETUNE_EMULATE_GPU in the spec's or servetune's
 * environment (what the emulator reads); hardware.gpu alone prices the audit and would let
 * predict (which falls back to it) and audit (whose emulator refuses to start) disagree. */
/* The time scale shortens the request timeout in wall time, never under a second (or under the
 * timeout itself when that is shorter): at --time-scale 1000, a 300 s timeout is 1 s of wall
 * time, not 0.3 s. */
static void wall_timeout_has_a_floor(void **state)
{
    (void)state;
    assert_float_equal(st_exec_wall_timeout(300, 1), 300, 1e-9);
    assert_float_equal(st_exec_wall_timeout(300, 20), 15, 1e-9);
    assert_float_equal(st_exec_wall_timeout(300, 1000), ST_EXEC_WALL_TIMEOUT_MIN_S, 1e-9);
    assert_float_equal(st_exec_wall_timeout(300, 1e9), ST_EXEC_WALL_TIMEOUT_MIN_S, 1e-9);
    assert_float_equal(st_exec_wall_timeout(0.2, 1), 0.2, 1e-9);  /* a timeout asked that short stays so */
    assert_float_equal(st_exec_wall_timeout(0.2, 50), 0.2, 1e-9); /* the scale never shortens it further */
    assert_float_equal(st_exec_wall_timeout(300, 0), 300, 1e-9);  /* no scale: as given */
}

static void emulator_needs_a_gpu(void **state)
{
    (void)state;
    unsetenv("SERVETUNE_EMULATE_GPU");
#define NO_GPU                                                                                                         \
    "engine: {kind: emulator, model: Qwen/Qwen3-8B%s}\n"                                                               \
    "hardware: {gpu: H100, price_per_gpu_hour: 2.5}\npeak_rate: 10\n"                                                  \
    "workload: {input_tokens: 100, output_tokens: 10}\nrates: [1]\n"                                                   \
    "slo: {ttft_p95_ms: 1500, tpot_p95_ms: 50}\n"
    char text[1024], err[1024] = "";
    st_spec s;
    snprintf(text, sizeof text, NO_GPU, "");
    assert_int_equal(st_spec_parse("t.yaml", text, strlen(text), &s, err, sizeof err), 0);
    assert_int_equal(st_spec_check(&s, err, sizeof err), -1);
    assert_non_null(strstr(err, "the emulator needs --gpu NAME"));
    st_spec_free(&s);
    snprintf(text, sizeof text, NO_GPU, ", env: {SERVETUNE_EMULATE_GPU: H200}");
    assert_int_equal(st_spec_parse("t.yaml", text, strlen(text), &s, err, sizeof err), 0);
    assert_int_equal(st_spec_check(&s, err, sizeof err), 0);
    st_spec_free(&s);
    setenv("SERVETUNE_EMULATE_GPU", "A100", 1);
    snprintf(text, sizeof text, NO_GPU, "");
    assert_int_equal(st_spec_parse("t.yaml", text, strlen(text), &s, err, sizeof err), 0);
    assert_int_equal(st_spec_check(&s, err, sizeof err), 0);
    st_spec_free(&s);
    unsetenv("SERVETUNE_EMULATE_GPU");
}

/* A trace shorter than the warm-up would silently warm up with fewer requests: refused. */
static void trace_shorter_than_the_warmup(void **state)
{
    (void)state;
    char trace[] = "/tmp/st_check_trace_XXXXXX";
    int fd = mkstemp(trace);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    for (int i = 0; i < 3; i++)
        fprintf(f, "{\"timestamp\": %d, \"input_tokens\": 10, \"output_tokens\": 5}\n", i);
    fclose(f);
    char text[1024], err[1024] = "";
    snprintf(text, sizeof text,
             "engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100]}\n"
             "hardware: {gpu: H100, price_per_gpu_hour: 2.5}\npeak_rate: 10\n"
             "workload: {trace: '%s'}\nrates: [1]\nwarmup_requests: 5\n"
             "slo: {ttft_p95_ms: 1500, tpot_p95_ms: 50}\n",
             trace);
    st_spec s;
    assert_int_equal(st_spec_parse("t.yaml", text, strlen(text), &s, err, sizeof err), 0);
    assert_int_equal(st_spec_check(&s, err, sizeof err), -1);
    assert_non_null(strstr(err, "warmup_requests: 5 is more than the trace's 3 requests"));
    st_spec_free(&s);
    unlink(trace);
}

/* A replayed trace whose next turn comes 3 days later: the check says the replay caps the pause
 * (ST_TRACE_THINK_CAP_S), naming the limit; with workload.think_time set it has nothing to say. */
static void trace_think_gaps_capped(void **state)
{
    (void)state;
    char trace[] = "/tmp/st_check_think_XXXXXX";
    int fd = mkstemp(trace);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fprintf(f, "{\"timestamp\": 0, \"session\": \"a\", \"input_tokens\": 10, \"output_tokens\": 5}\n"
               "{\"timestamp\": 259200, \"session\": \"a\", \"input_tokens\": 10, \"output_tokens\": 5}\n");
    fclose(f);
    for (int set = 0; set < 2; set++) {
        char text[1024], err[1024] = "";
        snprintf(text, sizeof text,
                 "engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100]}\n"
                 "hardware: {gpu: H100, price_per_gpu_hour: 2.5}\npeak_rate: 10\n"
                 "workload: {trace: '%s', sessions: replay%s}\nrates: [1]\nwarmup_requests: 0\n"
                 "slo: {ttft_p95_ms: 1500, tpot_p95_ms: 50}\n",
                 trace, set ? ", think_time: 2" : "");
        st_spec s;
        if (st_spec_parse("t.yaml", text, strlen(text), &s, err, sizeof err))
            fail_msg("%s", err);
        st_buf b;
        st_buf_init(&b, 1 << 16);
        st_spec_warnings(&s, 0, &b);
        const char *want = "workload.trace: 1 pause between a session's turns is longer than 600 s (the longest "
                           "259200 s, 3.0 days): the replay waits 600 s instead";
        if (!set && !(b.data && strstr(b.data, want)))
            fail_msg("warnings '%s' lack '%s'", b.data ? b.data : "", want);
        if (set)
            assert_true(!b.data || !strstr(b.data, "pause between"));
        st_buf_free(&b);
        st_spec_free(&s);
    }
    unlink(trace);
}

static int parse_text(const char *text, size_t len, char *err, size_t errlen)
{
    st_spec s;
    int rc = st_spec_parse("t.yaml", text, len, &s, err, errlen);
    if (!rc)
        st_spec_free(&s);
    return rc;
}

/* Hostile YAML: a megabyte of nesting is refused at depth 65 (before libyaml's scanner spends
 * time proportional to the depth on every token); a NUL inside a string is an error, not a
 * string cut short; a peak past 1e9 req/s; a literal secret in engine.command; a secret value
 * that starts with '-' (it is still the flag's value). */
static void hostile_yaml_is_refused(void **state)
{
    (void)state;
    char err[1024];
    size_t n = ST_SPEC_MAX_BYTES - 16;
    char *deep = malloc(n + 1);
    memcpy(deep, "engine: ", 8);
    for (size_t i = 8; i < n; i++)
        deep[i] = i % 4 == 0 ? '{' : i % 4 == 1 ? 'a' : i % 4 == 2 ? ':' : ' ';
    deep[n] = '\0';
    assert_int_equal(parse_text(deep, n, err, sizeof err), -1);
    assert_non_null(strstr(err, "nested deeper than 64 levels"));
    memset(deep + 8, '[', n - 8);
    assert_int_equal(parse_text(deep, n, err, sizeof err), -1);
    assert_non_null(strstr(err, "nested deeper than 64 levels"));
    free(deep);

    const char *base = "engine: {kind: vllm, model: \"Qwen\\0/evil\"}\n"
                       "hardware: {gpu: H100, price_per_gpu_hour: 2.5}\npeak_rate: 10\n"
                       "workload: {input_tokens: 100, output_tokens: 10}\nrates: [1]\n"
                       "slo: {ttft_p95_ms: 1500, tpot_p95_ms: 50}\n";
    assert_int_equal(parse_text(base, strlen(base), err, sizeof err), -1);
    assert_non_null(strstr(err, "t.yaml:1: a NUL character inside a string"));

    static const struct {
        const char *engine, *root, *want;
    } c[] = {
        { "", "peak_rate: 1e300\n", "peak_rate: at most 1e+09 req/s" },
        { ", command: [vllm, serve, --api-key, sk-literal-123]", "peak_rate: 10\n",
          "engine.command: --api-key looks like a secret" },
        { ", flags: [--api-key, -sk-starts-with-a-dash]", "peak_rate: 10\n",
          "engine.flags: --api-key looks like a secret" },
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        char text[1024];
        snprintf(text, sizeof text,
                 "engine: {kind: vllm, model: m%s}\nhardware: {gpu: H100, price_per_gpu_hour: 2.5}\n%s"
                 "workload: {input_tokens: 100, output_tokens: 10}\nrates: [1]\n"
                 "slo: {ttft_p95_ms: 1500, tpot_p95_ms: 50}\n",
                 c[i].engine, c[i].root);
        assert_int_equal(parse_text(text, strlen(text), err, sizeof err), -1);
        if (!strstr(err, c[i].want))
            fail_msg("'%s' lacks '%s'", err, c[i].want);
    }
}

/* A flag the engine model does not know is a warning (a typo would measure the baseline again on
 * the emulator); the flags it models and those it knows to have no effect are not. */
static void unknown_flags_are_warned(void **state)
{
    (void)state;
    const char *t = "engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100]}\n"
                    "hardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 1\n"
                    "workload: {input_tokens: 10, output_tokens: 5}\nrates: [1]\n"
                    "slo: {ttft_p95_ms: 100, tpot_p95_ms: 10}\n"
                    "configurations:\n  - name: baseline\n  - name: fp8-kv\n    add_flags: [--kv-cache-dtype, fp8]\n"
                    "  - name: typo\n    add_flags: [--kv-cache-dtyp, fp8]\n";
    st_spec s;
    char err[512];
    assert_int_equal(st_spec_parse("t.yaml", t, strlen(t), &s, err, sizeof err), 0);
    st_buf b;
    st_buf_init(&b, 1 << 16);
    assert_int_equal(st_spec_warnings(&s, 1, &b), 1);
    assert_non_null(strstr(b.data, "configuration 'typo': --kv-cache-dtyp is not a flag the engine model knows"));
    assert_null(strstr(b.data, "'fp8-kv'"));
    st_buf_free(&b);
    st_spec_free(&s);
    /* hardware.gpu: unknown to the catalog, or another GPU than the emulator runs */
    const char *hw[][2] = { { "H999", "hardware.gpu 'H999' is not a GPU servetune knows" },
                            { "A100", "hardware.gpu is A100 80GB SXM but the emulator runs H100 SXM 80GB" } };
    for (int i = 0; i < 2; i++) {
        char u[1024];
        snprintf(u, sizeof u,
                 "engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100]}\n"
                 "hardware: {gpu: %s, price_per_gpu_hour: 2}\npeak_rate: 1\n"
                 "workload: {input_tokens: 10, output_tokens: 5}\nrates: [1]\n"
                 "slo: {ttft_p95_ms: 100, tpot_p95_ms: 10}\n",
                 hw[i][0]);
        assert_int_equal(st_spec_parse("t.yaml", u, strlen(u), &s, err, sizeof err), 0);
        st_buf_init(&b, 1 << 16);
        assert_int_equal(st_spec_warnings(&s, 1, &b), 1);
        assert_non_null(strstr(b.data, hw[i][1]));
        st_buf_free(&b);
        st_spec_free(&s);
    }
}

/* A launch that cannot work here is said only where the engine is started (an audit), never by a
 * prediction; a tensor-parallel size other than hardware.gpus_per_replica is said either way
 * (the cost is priced for the latter). */
static void launch_and_tp_warnings(void **state)
{
    (void)state;
    const char *t = "engine: {kind: vllm, model: Qwen/Qwen3-8B, command: [servetune-no-such-program-here]}\n"
                    "hardware: {gpu: H100, gpus_per_replica: 2, price_per_gpu_hour: 2}\npeak_rate: 1\n"
                    "workload: {input_tokens: 10, output_tokens: 5}\nrates: [1]\n"
                    "slo: {ttft_p95_ms: 100, tpot_p95_ms: 10}\n"
                    "configurations:\n  - name: tp1\n  - name: tp2\n    add_flags: [--tensor-parallel-size, '2']\n";
    st_spec s;
    char err[512];
    assert_int_equal(st_spec_parse("t.yaml", t, strlen(t), &s, err, sizeof err), 0);
    for (int starts = 0; starts <= 1; starts++) {
        st_buf b;
        st_buf_init(&b, 1 << 16);
        assert_int_equal(st_spec_warnings(&s, starts, &b), 1 + starts);
        assert_non_null(strstr(b.data, "configuration 'tp1' runs --tensor-parallel-size 1 but "
                                       "hardware.gpus_per_replica is 2: its $ per token, replicas and monthly "
                                       "cost are priced for 2 GPUs per replica"));
        assert_null(strstr(b.data, "'tp2'"));
        assert_true((strstr(b.data, "'servetune-no-such-program-here' is not on this machine's PATH") != NULL) ==
                    starts);
        st_buf_free(&b);
    }
    st_spec_free(&s);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(check_refuses_what_a_run_would), cmocka_unit_test(emulator_needs_a_gpu),
        cmocka_unit_test(trace_shorter_than_the_warmup),  cmocka_unit_test(hostile_yaml_is_refused),
        cmocka_unit_test(unknown_flags_are_warned),       cmocka_unit_test(launch_and_tp_warnings),
        cmocka_unit_test(wall_timeout_has_a_floor),       cmocka_unit_test(trace_think_gaps_capped),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}
