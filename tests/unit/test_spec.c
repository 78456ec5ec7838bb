#include "harness.h"

#include <stdio.h>

#include "audit/spec.h"

static const char *MIN = "engine:\n"
                         "  kind: vllm\n"
                         "  model: m\n"
                         "  flags: [--max-num-seqs, '64', --enable-prefix-caching, --block-size=16]\n"
                         "hardware: {gpu: H100, price_per_gpu_hour: 2.5}\n"
                         "peak_rate: 10\n"
                         "workload: {input_tokens: 100, output_tokens: 10}\n"
                         "rates: [1, 2, inf]\n"
                         "slo: {ttft_p95_ms: 1500, tpot_p95_ms: 50}\n";

/* Parses MIN with `extra` appended; returns rc and leaves the error in err. */
static int parse_with(const char *extra, st_spec *s, char *err, size_t errlen)
{
    char text[4096];
    snprintf(text, sizeof text, "%s%s", MIN, extra);
    return st_spec_parse("t.yaml", text, strlen(text), s, err, errlen);
}

static void example_spec_loads(void **state)
{
    (void)state;
    st_spec s;
    char err[512] = "";
    int rc = st_spec_load("examples/qwen3-8b-h100.yaml", &s, err, sizeof err);
    if (rc)
        fail_msg("%s", err);
    assert_int_equal(s.engine.kind, ST_ENGINE_EMULATOR);
    assert_string_equal(s.engine.model, "Qwen/Qwen3-8B");
    assert_int_equal(s.hardware.gpus_per_replica, 1);
    assert_near(s.hardware.price_per_gpu_hour, 2.49, 1e-12);
    assert_int_equal(s.workload.input_tokens, 3000);
    assert_int_equal(s.workload.output_tokens, 300);
    assert_int_equal(s.workload.shared_prefix, 2000);
    assert_int_equal(s.n_rates, 7);
    assert_near(s.rates[6], 32, 0);
    assert_int_equal(s.search.mode, ST_SEARCH_SUSTAINED);
    char err2[512];
    assert_int_equal(st_spec_check_bounds(&s, err2, sizeof err2), 0);
    assert_int_equal(s.n_configs, 6);
    assert_string_equal(s.configs[0].name, "baseline");
    assert_string_equal(s.configs[4].model, "Qwen/Qwen3-8B-FP8");
    assert_near(s.slo.terms[0].max_ms, 1500, 0);
    assert_near(s.slo.terms[1].max_ms, 50, 0);
    assert_near(s.timeouts.startup_s, 300, 0);
    st_spec_free(&s);
}

static void defaults_and_implicit_baseline(void **state)
{
    (void)state;
    st_spec s;
    char err[512] = "";
    assert_int_equal(parse_with("", &s, err, sizeof err), 0);
    assert_int_equal(s.n_configs, 1);
    assert_string_equal(s.configs[0].name, "baseline");
    assert_int_equal(s.workload.requests_per_rate, 200);
    /* the sustained search is the default; its bounds */
    assert_int_equal(s.search.mode, ST_SEARCH_SUSTAINED);
    assert_near(s.search.confidence, 0.95, 0);
    assert_near(s.search.max_duration_s, 300, 0);
    assert_near(s.search.min_window_s, 20, 0);
    assert_int_equal(s.search.min_window_requests, 200);
    assert_near(s.search.warmup_e2e, 2, 0);
    assert_int_equal(s.search.max_runs, 12);
    assert_int_equal(s.search.max_replicates, 3);
    assert_int_equal(s.search.start, ST_START_AUTO);
    assert_false(s.closed_loop);
    assert_int_equal(s.search.early_stop, 1);
    assert_int_equal(s.slo.n, 2);
    assert_int_equal(s.engine.port, 0);
    st_spec_free(&s);
}

typedef struct bad_case {
    const char *extra; /* appended to MIN (or a whole spec when full) */
    int full;
    const char *want; /* substring of the error, including file:line */
} bad_case;

static void validation_errors_name_file_and_line(void **state)
{
    (void)state;
    static const bad_case cases[] = {
        { "bogus: 1\n", 0, "t.yaml:10: spec: unknown key 'bogus'" },
        { "configurations:\n  - name: a\n  - name: b\n  - name: a\n", 0,
          "t.yaml:13: configurations: duplicate name 'a' (first at line 11)" },
        { "configurations:\n  - name: a\n    colour: red\n", 0, "t.yaml:12: configurations[]: unknown key 'colour'" },
        { "search: {mode: fast}\n", 0,
          "t.yaml:10: search.mode: expected sustained, burst (also: grid) or burst-refine (also: refine)" },
        { "search: {max_duration: forever}\n", 0, "t.yaml:10: search.max_duration: expected a positive duration" },
        { "search: {min_window_requests: 5}\n", 0, "t.yaml:10: search.min_window_requests: must be at least 20" },
        { "search: {confidence: 0.2}\n", 0, "t.yaml:10: search.confidence: between 0.5 and 0.999" },
        { "search: {start: somewhere}\n", 0, "t.yaml:10: search.start: expected auto, grid, predict or a rate" },
        { "search: {max_runs: 1000}\n", 0, "t.yaml:10: search.max_runs: at most 64" },
        { "concurrency: [1, 4]\n", 0, "concurrency: give either rates (open loop) or concurrency (closed loop)" },
        { "slo2: 1\n", 0, "unknown key 'slo2'" },
        { "timeouts: {startup: -3}\n", 0, "t.yaml:10: timeouts.startup: expected a positive duration" },
        { "timeouts: {request: 1e11}\n", 0, "t.yaml:10: timeouts.request: expected a positive duration" },
        { "timeouts: {request: 100000}\n", 0,
          "t.yaml:10: timeouts.request: expected a positive duration of at most 86400 s (a day)" },
        { "configurations:\n  - name: x\n    env: {HF_TOKEN: hf_abc}\n", 0,
          "t.yaml:12: configurations[x].env: HF_TOKEN looks like a secret" },
        { "configurations:\n  - name: 'a b'\n", 0, "t.yaml:11: configurations: name 'a b'" },
        { "configurations:\n  - name: x\n    add_flags: ['8192']\n", 0, "must start with a flag" },
        { "configurations:\n  - name: x\n    add_flags: [--api-key, sk-123]\n", 0,
          "t.yaml:12: configurations[x].add_flags: --api-key looks like a secret" },
        { "configurations:\n  - name: x\n    add_flags: ['--hf-token=hf_1']\n", 0, "--hf-token looks like a secret" },
        { "configurations: []\n", 0, "t.yaml:10: configurations: the list is empty" },
        { "warmup_requests: -1\n", 0, "t.yaml:10: warmup_requests: must be at least 0" },
        /* whole specs */
        { "engine: {kind: vllm, model: m}\nhardware: {gpu: H100, price_per_gpu_hour: -2}\npeak_rate: 1\n"
          "workload: {input_tokens: 1, output_tokens: 1}\nrates: [1]\nslo: {ttft_p95_ms: 1, tpot_p95_ms: 1}\n",
          1, "t.yaml:2: hardware.price_per_gpu_hour: must be > 0, got -2" },
        { "engine: {kind: vllm, model: m}\nhardware: {gpu: H100, price_per_gpu_hour: 1e300}\npeak_rate: 1\n"
          "workload: {input_tokens: 1, output_tokens: 1}\nrates: [1]\nslo: {ttft_p95_ms: 1, tpot_p95_ms: 1}\n",
          1, "t.yaml:2: hardware.price_per_gpu_hour: at most 1000 (US$ per GPU-hour), got 1e300" },
        { "engine: {kind: vllm, model: m}\nhardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 1\n"
          "workload: {input_tokens: 1, output_tokens: 1}\nrates: []\nslo: {ttft_p95_ms: 1, tpot_p95_ms: 1}\n",
          1, "t.yaml:5: rates: the list is empty" },
        { "engine: {kind: vllm, model: m}\nhardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 1\n"
          "workload: {input_tokens: 1, output_tokens: 1}\nrates: [1, 4, 2]\nslo: {ttft_p95_ms: 1, tpot_p95_ms: 1}\n",
          1, "t.yaml:5: rates: must be increasing (2 comes after 4)" },
        { "engine: {kind: vllm, model: m}\nhardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 1\n"
          "workload: {input_tokens: 1, output_tokens: 1}\nrates: [1, fast]\nslo: {ttft_p95_ms: 1, tpot_p95_ms: 1}\n",
          1, "t.yaml:5: rates: 'fast' is not a positive rate" },
        { "engine: {kind: vllm, model: m}\nhardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 1\n"
          "workload: {input_tokens: 1, output_tokens: 1}\nrates: [1]\nslo: {ttft_p95_ms: 1}\n",
          1, "t.yaml:6: slo: 'tpot_p95_ms' is required" },
        { "engine: {kind: vllm, model: m}\nhardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 1\n"
          "workload: {input_tokens: 1, output_tokens: 1}\nrates: [1]\nslo: {ttft_p95_ms: 1, tpot_p95_ms: 1, "
          "e2e_p42_ms: 3}\n",
          1, "t.yaml:6: slo: unknown key 'e2e_p42_ms'" },
        { "engine: {kind: mystery, model: m}\n", 1, "t.yaml:1: engine.kind: unknown engine 'mystery'" },
        { "engine: {kind: endpoint, model: m}\n", 1, "t.yaml:1: engine: kind endpoint needs 'url'" },
        { "engine:\n  kind: vllm\n  model: m\n  kind: tgi\n", 1,
          "t.yaml:4: engine: duplicate key 'kind' (first at line 2)" },
        { "engine: {kind: vllm, model: m}\nhardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 1\n"
          "workload: {input_tokens: 10, output_tokens: 1, shared_prefix: 10}\nrates: [1]\nslo: {ttft_p95_ms: 1, "
          "tpot_p95_ms: 1}\n",
          1, "t.yaml:4: workload.shared_prefix: 10 must be smaller than input_tokens (10)" },
        { "engine: {kind: vllm, model: m}\nhardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 1\n"
          "workload: {input_tokens: 10, output_tokens: 1, semantics: guidellm}\nrates: [1]\nslo: {ttft_p95_ms: 1, "
          "tpot_p95_ms: 1}\n",
          1, "t.yaml:4: workload.semantics: expected servetune" },
        { "engine: {kind: vllm, model: m}\nhardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 1\n"
          "workload: {input_tokens: 10, output_tokens: 1, exact_prompts: sometimes}\nrates: [1]\nslo: {ttft_p95_ms: 1, "
          "tpot_p95_ms: 1}\n",
          1, "t.yaml:4: workload.exact_prompts: expected auto" },
        { "engine: {kind: vllm, model: m}\nhardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 1\n"
          "workload: {trace: t.jsonl, semantics: vllm}\nrates: [1]\nslo: {ttft_p95_ms: 1, tpot_p95_ms: 1}\n",
          1, "t.yaml:4: workload.semantics: a trace gives the token sizes" },
        { "engine: {kind: vllm, model: m}\nhardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 1\n"
          "workload: {input_tokens: 1, output_tokens: 1}\nconcurrency: [4, 2]\nslo: {ttft_p95_ms: 1, tpot_p95_ms: 1}\n",
          1, "t.yaml:5: concurrency: must be increasing (2 comes after 4)" },
        { "engine: {kind: vllm, model: m}\nhardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 1\n"
          "workload: {input_tokens: 1, output_tokens: 1}\nconcurrency: [1, 2.5]\nslo: {ttft_p95_ms: 1, tpot_p95_ms: "
          "1}\n",
          1, "t.yaml:5: concurrency: expected a whole number" },
        /* multi-turn sessions */
        { "engine: {kind: vllm, model: m}\nhardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 1\n"
          "workload: {trace: t.jsonl, sessions: yes}\nrates: [1]\nslo: {ttft_p95_ms: 1, tpot_p95_ms: 1}\n",
          1, "t.yaml:4: workload.sessions: with a trace, expected replay" },
        { "engine: {kind: vllm, model: m}\nhardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 1\n"
          "workload: {trace: t.jsonl, sessions: {turns: 3}}\nrates: [1]\nslo: {ttft_p95_ms: 1, tpot_p95_ms: 1}\n",
          1, "t.yaml:4: workload.sessions: with a trace, expected replay" },
        { "engine: {kind: vllm, model: m}\nhardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 1\n"
          "workload: {input_tokens: 10, output_tokens: 1, sessions: replay}\nrates: [1]\nslo: {ttft_p95_ms: 1, "
          "tpot_p95_ms: 1}\n",
          1, "t.yaml:4: workload.sessions: a synthetic workload takes a mapping" },
        { "engine: {kind: vllm, model: m}\nhardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 1\n"
          "workload:\n  input_tokens: 10\n  output_tokens: 1\n  sessions: {turns: 5-2}\nrates: [1]\n"
          "slo: {ttft_p95_ms: 1, tpot_p95_ms: 1}\n",
          1, "t.yaml:7: workload.sessions.turns: expected N or MIN-MAX" },
        { "engine: {kind: vllm, model: m}\nhardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 1\n"
          "workload:\n  input_tokens: 10\n  output_tokens: 1\n  sessions: {turns: 0}\nrates: [1]\n"
          "slo: {ttft_p95_ms: 1, tpot_p95_ms: 1}\n",
          1, "t.yaml:7: workload.sessions.turns: expected N or MIN-MAX (e.g. 2-6) within 1..1000, got '0'" },
        { "engine: {kind: vllm, model: m}\nhardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 1\n"
          "workload:\n  input_tokens: 10\n  output_tokens: 1\n  sessions:\n    user_tokens: 0\nrates: [1]\n"
          "slo: {ttft_p95_ms: 1, tpot_p95_ms: 1}\n",
          1, "t.yaml:8: workload.sessions.user_tokens: must be at least 1" },
        { "engine: {kind: vllm, model: m}\nhardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 1\n"
          "workload:\n  input_tokens: 10\n  output_tokens: 1\n  sessions:\n    think_time: -1\nrates: [1]\n"
          "slo: {ttft_p95_ms: 1, tpot_p95_ms: 1}\n",
          1, "t.yaml:8: workload.sessions.think_time: expected a duration" },
        { "engine: {kind: vllm, model: m}\nhardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 1\n"
          "workload:\n  input_tokens: 10\n  output_tokens: 1\n  sessions:\n    think: gaussian\nrates: [1]\n"
          "slo: {ttft_p95_ms: 1, tpot_p95_ms: 1}\n",
          1, "t.yaml:8: workload.sessions.think: expected constant or exponential" },
        { "engine: {kind: vllm, model: m}\nhardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 1\n"
          "workload:\n  input_tokens: 10\n  output_tokens: 1\n  sessions:\n    rounds: 3\nrates: [1]\n"
          "slo: {ttft_p95_ms: 1, tpot_p95_ms: 1}\n",
          1, "t.yaml:8: workload.sessions: unknown key 'rounds'" },
        { "engine: {kind: vllm, model: m}\nhardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 1\n"
          "workload: {input_tokens: 10, output_tokens: 1, semantics: vllm, sessions: {turns: 2}}\nrates: [1]\n"
          "slo: {ttft_p95_ms: 1, tpot_p95_ms: 1}\n",
          1, "t.yaml:4: workload.sessions: not with semantics: vllm" },
        { "engine: {kind: vllm, model: m}\nhardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 1\n"
          "workload: {input_tokens: 100000, output_tokens: 100000, sessions: {turns: 30}}\nrates: [1]\n"
          "slo: {ttft_p95_ms: 1, tpot_p95_ms: 1}\n",
          1, "t.yaml:4: workload.sessions: a 30-turn conversation grows to about 3001856 tokens, more than 2097152" },
        { "engine: {kind: vllm, model: m}\nhardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 1\n"
          "workload: {trace: t.jsonl, sessions: replay}\nconcurrency: [1, 2]\nslo: {ttft_p95_ms: 1, tpot_p95_ms: 1}\n",
          1, "t.yaml:5: concurrency: not with multi-turn sessions (workload.sessions)" },
        { "engine: {kind: vllm, model: m}\nhardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 1\n"
          "workload: {trace: t.jsonl, think_time: 2}\nrates: [1]\nslo: {ttft_p95_ms: 1, tpot_p95_ms: 1}\n",
          1, "t.yaml:4: workload.think_time: only with a trace and sessions: replay" },
        { "engine: {kind: vllm, model: m}\nhardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 1\n"
          "workload: {trace: t.jsonl, sessions: replay, think_time: soon}\nrates: [1]\n"
          "slo: {ttft_p95_ms: 1, tpot_p95_ms: 1}\n",
          1, "t.yaml:4: workload.think_time: expected a duration" },
        { "engine: [1\n", 1, "t.yaml:2: YAML syntax" },
        { "", 1, "t.yaml: the spec is empty" },
        { "engine: {kind: vllm, model: m}\n", 1, "t.yaml:1: 'hardware' is required" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        st_spec s;
        char err[512] = "";
        int rc = cases[i].full ? st_spec_parse("t.yaml", cases[i].extra, strlen(cases[i].extra), &s, err, sizeof err)
                               : parse_with(cases[i].extra, &s, err, sizeof err);
        if (rc == 0) {
            st_spec_free(&s);
            fail_msg("case %zu accepted; want error '%s'", i, cases[i].want);
        }
        if (!strstr(err, cases[i].want))
            fail_msg("case %zu: error '%s' does not contain '%s'", i, err, cases[i].want);
    }
}

/* workload.sessions: a trace's conversations replayed (or flat, the default), or synthetic
 * sessions with bench's parameters; the generator gets them (st_spec_sessions). */
static void sessions_keys(void **state)
{
    (void)state;
    const char *head = "engine: {kind: vllm, model: m}\nhardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 1\n"
                       "rates: [1]\nslo: {ttft_p95_ms: 1, tpot_p95_ms: 1}\n";
    char t[1024], err[512] = "";
    st_spec s;
    const char *modes[] = { "", ", sessions: flat", ", sessions: replay" };
    for (int i = 0; i < 3; i++) {
        snprintf(t, sizeof t, "%sworkload: {trace: t.jsonl%s}\n", head, modes[i]);
        assert_int_equal(st_spec_parse("t.yaml", t, strlen(t), &s, err, sizeof err), 0);
        assert_int_equal(s.workload.sessions.on, i == 2); /* flat unless asked: as before the key */
        assert_int_equal(s.workload.sessions.think_set, 0);
        assert_true(st_spec_turns_mean(&s) == 1);
        st_spec_free(&s);
    }
    /* a replayed trace's think time replaced */
    snprintf(t, sizeof t, "%sworkload: {trace: t.jsonl, sessions: replay, think_time: 1500ms}\n", head);
    assert_int_equal(st_spec_parse("t.yaml", t, strlen(t), &s, err, sizeof err), 0);
    assert_int_equal(s.workload.sessions.think_set, 1);
    assert_near(s.workload.sessions.think_s, 1.5, 1e-12);
    st_spec_free(&s);
    /* synthetic: the defaults (bench's) */
    snprintf(t, sizeof t, "%sworkload: {input_tokens: 300, output_tokens: 20, shared_prefix: 100, sessions: {}}\n",
             head);
    assert_int_equal(st_spec_parse("t.yaml", t, strlen(t), &s, err, sizeof err), 0);
    assert_int_equal(s.workload.sessions.on, 1);
    assert_int_equal(s.workload.sessions.turns_min, 4);
    assert_int_equal(s.workload.sessions.turns_max, 4);
    assert_int_equal(s.workload.sessions.user_tokens, 64);
    assert_true(s.workload.sessions.think_s == 0);
    assert_int_equal(s.workload.sessions.think_exp, 0);
    st_spec_free(&s);
    snprintf(t, sizeof t,
             "%sworkload:\n  input_tokens: 300\n  output_tokens: 20\n  shared_prefix: 100\n  seed: 5\n"
             "  sessions: {turns: 2-6, user_tokens: 40, think_time: 500ms, think: exponential}\n",
             head);
    assert_int_equal(st_spec_parse("t.yaml", t, strlen(t), &s, err, sizeof err), 0);
    assert_int_equal(s.workload.sessions.turns_min, 2);
    assert_int_equal(s.workload.sessions.turns_max, 6);
    assert_int_equal(s.workload.sessions.user_tokens, 40);
    assert_near(s.workload.sessions.think_s, 0.5, 1e-12);
    assert_int_equal(s.workload.sessions.think_exp, 1);
    assert_near(st_spec_turns_mean(&s), 4, 0);
    /* about n requests: ceil(n / 4) sessions, the first prompt input_tokens with the shared prefix */
    st_session_params p;
    st_spec_sessions(&s, 101, 9, &p);
    assert_int_equal(p.sessions, 26);
    assert_int_equal(p.first_input, 300);
    assert_int_equal(p.prefix_len, 100);
    assert_int_equal(p.user_input, 40);
    assert_int_equal(p.output_len, 20);
    st_workload w;
    assert_int_equal(st_workload_sessions(&p, &w, err, sizeof err), 0);
    assert_int_equal(w.n_sessions, 26);
    assert_int_equal(w.n - w.n_dependent, 26);
    for (uint32_t i = 0; i < w.n; i++)
        assert_true(w.items[i].turn == 0 ? w.items[i].input_len == 300 : w.items[i].input_len == 40);
    st_workload_free(&w);
    st_spec_sessions(&s, 1, 9, &p); /* at least one session */
    assert_int_equal(p.sessions, 1);
    st_spec_free(&s);
}

/* workload.semantics: vllm: vllm bench serve's random dataset (the prefix on top of the input
 * length), so a prefix longer than input_tokens is fine; the prompts follow (st_spec_synth). */
static void vllm_prompt_semantics(void **state)
{
    (void)state;
    const char *t = "engine: {kind: vllm, model: m}\nhardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 1\n"
                    "workload: {input_tokens: 1000, output_tokens: 10, shared_prefix: 2000, range_ratio: 0.5, "
                    "semantics: vllm}\nrates: [1]\nslo: {ttft_p95_ms: 1, tpot_p95_ms: 1}\n";
    st_spec s;
    char err[512];
    assert_int_equal(st_spec_parse("t.yaml", t, strlen(t), &s, err, sizeof err), 0);
    assert_int_equal(s.workload.vllm_semantics, 1);
    assert_true(st_spec_mean_input(&s) == 3000);
    st_synth_params p;
    st_spec_synth(&s, 200, 7, &p);
    st_workload w;
    assert_int_equal(st_workload_synthetic(&p, &w, err, sizeof err), 0);
    for (uint32_t i = 0; i < w.n; i++) /* 2000 + [500, 1500] */
        assert_true(w.items[i].input_len >= 2500 && w.items[i].input_len <= 3500);
    st_workload_free(&w);
    st_spec_free(&s);
    /* servetune's own: the prefix counts within input_tokens */
    assert_int_equal(parse_with("", &s, err, sizeof err), 0);
    assert_int_equal(s.workload.vllm_semantics, 0);
    assert_true(st_spec_mean_input(&s) == 100);
    st_spec_free(&s);
}

static void secret_reference_and_extra_slo_terms_accepted(void **state)
{
    (void)state;
    st_spec s;
    char err[512] = "";
    int rc = parse_with("configurations:\n  - name: x\n    env: {HF_TOKEN: '${HF_TOKEN}', OTHER: plain}\n"
                        "    add_flags: [--api-key, '${MY_KEY}', --max-num-seqs, '8']\n",
                        &s, err, sizeof err);
    if (rc)
        fail_msg("%s", err);
    assert_string_equal(s.configs[0].env.val[0], "${HF_TOKEN}");
    st_spec_free(&s);
    const char *t =
        "engine: {kind: endpoint, model: m, url: 'http://127.0.0.1:9', api_key_env: MY_KEY}\n"
        "hardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 1\n"
        "workload: {input_tokens: 10, output_tokens: 2}\nrates: [1]\n"
        "slo: {tpot_p95_ms: 40, ttft_p95_ms: 900, e2e_p99_ms: 20000, itl_p99_ms: 200, ttfat_p90_ms: 4000}\n";
    rc = st_spec_parse("t.yaml", t, strlen(t), &s, err, sizeof err);
    if (rc)
        fail_msg("%s", err);
    assert_int_equal(s.slo.n, 5);
    assert_int_equal(s.slo.terms[4].metric, ST_SLO_TTFAT);
    assert_near(s.slo.terms[4].pct, 90, 0);
    assert_near(s.slo.terms[4].max_ms, 4000, 0);
    assert_near(s.slo.terms[0].max_ms, 900, 0);
    assert_near(s.slo.terms[1].max_ms, 40, 0);
    assert_int_equal(s.slo.terms[2].metric, ST_SLO_E2E);
    assert_near(s.slo.terms[2].pct, 99, 0);
    assert_int_equal(s.slo.terms[3].metric, ST_SLO_ITL);
    assert_string_equal(s.engine.api_key_env, "MY_KEY");
    st_spec_free(&s);
}

static void config_flags_replace_and_remove(void **state)
{
    (void)state;
    st_spec s;
    char err[512] = "";
    int rc = parse_with("configurations:\n"
                        "  - name: base\n"
                        "  - name: more-seqs\n    add_flags: [--max-num-seqs, '256', --kv-cache-dtype=fp8]\n"
                        "  - name: no-pc\n    remove_flags: [--enable-prefix-caching, --block-size]\n"
                        "    add_flags: [--no-enable-prefix-caching]\n    model: other\n",
                        &s, err, sizeof err);
    if (rc)
        fail_msg("%s", err);
    st_strv f;
    assert_int_equal(st_spec_config_flags(&s, &s.configs[0], &f), 0);
    assert_int_equal(f.n, 4);
    st_strv_free(&f);
    assert_int_equal(st_spec_config_flags(&s, &s.configs[1], &f), 0);
    const char *want1[] = { "--enable-prefix-caching", "--block-size=16", "--max-num-seqs", "256",
                            "--kv-cache-dtype=fp8" };
    assert_int_equal(f.n, 5);
    for (int i = 0; i < 5; i++)
        assert_string_equal(f.v[i], want1[i]);
    st_strv_free(&f);
    assert_int_equal(st_spec_config_flags(&s, &s.configs[2], &f), 0);
    const char *want2[] = { "--max-num-seqs", "64", "--no-enable-prefix-caching" };
    assert_int_equal(f.n, 3);
    for (int i = 0; i < 3; i++)
        assert_string_equal(f.v[i], want2[i]);
    st_strv_free(&f);
    assert_string_equal(st_spec_config_model(&s, &s.configs[2]), "other");
    assert_string_equal(st_spec_config_model(&s, &s.configs[1]), "m");
    assert_non_null(st_spec_find_config(&s, "no-pc"));
    assert_null(st_spec_find_config(&s, "nope"));
    st_spec_free(&s);
}

/* concurrency: closed-loop levels; the search keys with units. */
static void concurrency_and_search_keys(void **state)
{
    (void)state;
    st_spec s;
    char err[512] = "";
    const char *t = "engine: {kind: vllm, model: m}\nhardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 1\n"
                    "workload: {input_tokens: 10, output_tokens: 2}\nconcurrency: [1, 16, 64, 256]\n"
                    "slo: {ttft_p95_ms: 900, tpot_p95_ms: 40}\n"
                    "search: {max_duration: 2m, min_window: 500ms, min_window_requests: 50, warmup_e2e: 1.5, "
                    "confidence: 0.9, max_runs: 20, max_replicates: 2, start: 12.5, request_budget: 5000}\n";
    if (st_spec_parse("t.yaml", t, strlen(t), &s, err, sizeof err))
        fail_msg("%s", err);
    assert_true(s.closed_loop);
    assert_int_equal(s.n_rates, 4);
    assert_near(s.rates[3], 256, 0);
    assert_near(s.search.max_duration_s, 120, 0);
    assert_near(s.search.min_window_s, 0.5, 1e-12);
    assert_int_equal(s.search.min_window_requests, 50);
    assert_near(s.search.warmup_e2e, 1.5, 0);
    assert_near(s.search.confidence, 0.9, 0);
    assert_int_equal(s.search.max_runs, 20);
    assert_int_equal(s.search.max_replicates, 2);
    assert_int_equal(s.search.start, ST_START_RATE);
    assert_near(s.search.start_rate, 12.5, 0);
    assert_int_equal(st_spec_check_bounds(&s, err, sizeof err), 0);
    st_spec_free(&s);
    /* the burst modes keep their old names */
    assert_int_equal(parse_with("search: {mode: grid}\n", &s, err, sizeof err), 0);
    assert_int_equal(s.search.mode, ST_SEARCH_GRID);
    assert_string_equal(st_search_mode_name(s.search.mode), "burst");
    st_spec_free(&s);
    assert_int_equal(parse_with("search: {mode: refine}\n", &s, err, sizeof err), 0);
    assert_int_equal(s.search.mode, ST_SEARCH_REFINE);
    assert_string_equal(st_spec_method_name(&s), "burst");
    st_spec_free(&s);
    /* concurrency levels with a burst mode: fixed-count closed loops, named so */
    const char *cl = "engine: {kind: vllm, model: m}\nhardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 1\n"
                     "workload: {input_tokens: 1, output_tokens: 1, requests_per_rate: 500}\nconcurrency: [1, 2]\n"
                     "slo: {ttft_p95_ms: 1, tpot_p95_ms: 1}\nsearch: {mode: burst}\n";
    assert_int_equal(st_spec_parse("t.yaml", cl, strlen(cl), &s, err, sizeof err), 0);
    assert_true(s.closed_loop);
    assert_int_equal(s.search.mode, ST_SEARCH_GRID);
    assert_int_equal(s.workload.requests_per_rate, 500);
    assert_string_equal(st_spec_method_name(&s), "closed-loop-count");
    s.search.mode = ST_SEARCH_SUSTAINED;
    assert_string_equal(st_spec_method_name(&s), "sustained-concurrency");
    st_spec_free(&s);
}

/* Bounds that make a steady state impossible whatever the engine does are refused with the reason. */
static void impossible_bounds_refused(void **state)
{
    (void)state;
    static const struct {
        const char *extra, *want;
    } cases[] = {
        { "search: {max_duration: 10s, min_window: 30s}\n",
          "search.max_duration (10 s) is shorter than search.min_window (30 s)" },
        { "search: {request_budget: 100}\n",
          "search.request_budget (100 requests) is below search.min_window_requests" },
        { "search: {max_duration: 60s}\n",
          "at 1 req/s (the lowest rate) the 200 window requests arrive over 200 s, longer than search.max_duration" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        st_spec s;
        char err[512] = "";
        if (parse_with(cases[i].extra, &s, err, sizeof err))
            fail_msg("case %zu: %s", i, err);
        assert_int_equal(st_spec_check_bounds(&s, err, sizeof err), -1);
        if (!strstr(err, cases[i].want))
            fail_msg("case %zu: '%s' does not contain '%s'", i, err, cases[i].want);
        st_spec_free(&s);
    }
    /* a burst spec has no such bounds; a sustained one within them passes */
    st_spec s;
    char err[512] = "";
    assert_int_equal(parse_with("search: {mode: burst, max_duration: 10s, min_window: 30s}\n", &s, err, sizeof err), 0);
    assert_int_equal(st_spec_check_bounds(&s, err, sizeof err), 0);
    st_spec_free(&s);
    assert_int_equal(parse_with("", &s, err, sizeof err), 0);
    assert_int_equal(st_spec_check_bounds(&s, err, sizeof err), 0);
    st_spec_free(&s);
    /* inf alone has no steady state */
    const char *t = "engine: {kind: vllm, model: m}\nhardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 1\n"
                    "workload: {input_tokens: 10, output_tokens: 2}\nrates: [inf]\n"
                    "slo: {ttft_p95_ms: 900, tpot_p95_ms: 40}\n";
    assert_int_equal(st_spec_parse("t.yaml", t, strlen(t), &s, err, sizeof err), 0);
    assert_int_equal(st_spec_check_bounds(&s, err, sizeof err), -1);
    assert_non_null(strstr(err, "needs at least one finite rate"));
    st_spec_free(&s);
}

/* A spec whose engine.env (where = 0) or a configuration's env (where = 1) holds n variables. */
static int parse_env_of(int where, int n, st_spec *s, char *err, size_t errlen)
{
    size_t cap = 64 + (size_t)n * 16 + strlen(MIN) + 256;
    char *text = malloc(cap), *env = malloc((size_t)n * 16 + 8);
    assert_non_null(text);
    assert_non_null(env);
    size_t o = 0;
    for (int i = 0; i < n; i++)
        o += (size_t)snprintf(env + o, 16, "%sV%d: x", i ? ", " : "", i);
    env[o] = '\0';
    const char *flags = strstr(MIN, "  flags:");
    if (where == 0)
        snprintf(text, cap, "%.*s  env: {%s}\n%s", (int)(flags - MIN), MIN, env, flags);
    else
        snprintf(text, cap, "%sconfigurations:\n  - name: c\n    env: {%s}\n", MIN, env);
    int rc = st_spec_parse("t.yaml", text, strlen(text), s, err, errlen);
    free(text);
    free(env);
    return rc;
}

/* An environment mapping holds at most ST_SPEC_MAX_ITEMS variables, as a list holds at most that
 * many items: the engine is never started with more, and no spec makes the check slow. */
static void env_mappings_are_capped(void **state)
{
    (void)state;
    for (int where = 0; where < 2; where++) {
        st_spec s;
        char err[512] = "";
        assert_int_equal(parse_env_of(where, ST_SPEC_MAX_ITEMS, &s, err, sizeof err), 0);
        assert_int_equal(where ? s.configs[0].env.n : s.engine.env.n, ST_SPEC_MAX_ITEMS);
        st_spec_free(&s);
        assert_int_equal(parse_env_of(where, ST_SPEC_MAX_ITEMS + 1, &s, err, sizeof err), -1);
        assert_non_null(strstr(err, where ? "configurations[c].env: more than 256 variables"
                                          : "engine.env: more than 256 variables"));
        assert_non_null(strstr(err, "t.yaml:"));
    }
}

static void missing_file_is_an_error(void **state)
{
    (void)state;
    st_spec s;
    char err[512] = "";
    assert_int_equal(st_spec_load("/nonexistent/spec.yaml", &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "/nonexistent/spec.yaml: No such file"));
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(example_spec_loads),
        cmocka_unit_test(defaults_and_implicit_baseline),
        cmocka_unit_test(validation_errors_name_file_and_line),
        cmocka_unit_test(vllm_prompt_semantics),
        cmocka_unit_test(sessions_keys),
        cmocka_unit_test(secret_reference_and_extra_slo_terms_accepted),
        cmocka_unit_test(config_flags_replace_and_remove),
        cmocka_unit_test(concurrency_and_search_keys),
        cmocka_unit_test(impossible_bounds_refused),
        cmocka_unit_test(missing_file_is_an_error),
        cmocka_unit_test(env_mappings_are_capped),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
