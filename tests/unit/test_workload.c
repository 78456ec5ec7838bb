#include "harness.h"

#include <stdio.h>
#include <unistd.h>

#include "core/rng.h"
#include "load/workload.h"

static void synth_lengths_prefix_and_ids(void **state)
{
    (void)state;
    st_synth_params p = { .input_len = 1000,
                          .output_len = 100,
                          .range_ratio = 0.2,
                          .prefix_len = 600,
                          .num_requests = 500,
                          .seed = 1,
                          .vocab_size = 5000 };
    st_workload w;
    char err[256];
    assert_int_equal(st_workload_synthetic(&p, &w, err, sizeof err), 0);
    assert_int_equal(w.n, 500);
    uint32_t in_min = UINT32_MAX, in_max = 0, out_min = UINT32_MAX, out_max = 0;
    for (uint32_t i = 0; i < w.n; i++) {
        st_work_item *it = &w.items[i];
        assert_int_equal(it->id, i);
        assert_true(it->arrival == -1);
        assert_true(it->input_len >= 800 && it->input_len <= 1200);
        assert_true(it->output_len >= 80 && it->output_len <= 120);
        in_min = it->input_len < in_min ? it->input_len : in_min;
        in_max = it->input_len > in_max ? it->input_len : in_max;
        out_min = it->output_len < out_min ? it->output_len : out_min;
        out_max = it->output_len > out_max ? it->output_len : out_max;
        assert_int_equal(it->prefix_len, 600);
        assert_memory_equal(it->input_ids, w.items[0].input_ids, 600 * sizeof(uint32_t));
        for (uint32_t k = 0; k < it->input_len; k++)
            assert_true(it->input_ids[k] >= ST_WORKLOAD_VOCAB_LO && it->input_ids[k] < 5000);
        if (i > 0) /* the rest is not shared */
            assert_memory_not_equal(it->input_ids + 600, w.items[0].input_ids + 600, 50 * sizeof(uint32_t));
    }
    /* The whole range is used (500 draws over 401 values). */
    assert_true(in_min <= 805 && in_max >= 1195);
    assert_true(out_min <= 81 && out_max >= 119);
    st_workload_free(&w);
}

static void synth_reproducible(void **state)
{
    (void)state;
    st_synth_params p = {
        .input_len = 64, .output_len = 8, .range_ratio = 0.5, .prefix_len = 16, .num_requests = 50, .seed = 77
    };
    st_workload a, b, c;
    char err[256];
    assert_int_equal(st_workload_synthetic(&p, &a, err, sizeof err), 0);
    assert_int_equal(st_workload_synthetic(&p, &b, err, sizeof err), 0);
    p.seed = 78;
    assert_int_equal(st_workload_synthetic(&p, &c, err, sizeof err), 0);
    int differs = 0;
    for (uint32_t i = 0; i < a.n; i++) {
        assert_int_equal(a.items[i].input_len, b.items[i].input_len);
        assert_int_equal(a.items[i].output_len, b.items[i].output_len);
        assert_memory_equal(a.items[i].input_ids, b.items[i].input_ids, a.items[i].input_len * sizeof(uint32_t));
        differs |= a.items[i].input_len != c.items[i].input_len || a.items[i].input_ids[0] != c.items[i].input_ids[0];
    }
    assert_true(differs);
    st_workload_free(&a);
    st_workload_free(&b);
    st_workload_free(&c);
}

/* st_workload_fill_ids draws exactly what st_rng_range would, id by id (its divisor and rejection
 * limit are worked out once): the ids of every workload stay the same. */
static void fill_ids_match_rng_range(void **state)
{
    (void)state;
    enum { N = 20000 };
    static uint32_t ids[N];
    for (uint64_t seed = 1; seed < 40; seed += 7) {
        st_workload_fill_ids(seed * 0x9e3779b97f4a7c15ULL, ids, N);
        st_rng r;
        st_rng_seed(&r, seed * 0x9e3779b97f4a7c15ULL);
        for (uint32_t i = 0; i < N; i++) {
            uint32_t want = st_rng_range(&r, ST_WORKLOAD_VOCAB_LO, ST_WORKLOAD_VOCAB_DEFAULT - 1);
            if (ids[i] != want)
                fail_msg("seed %llu, id %u: %u, st_rng_range gives %u", (unsigned long long)seed, i, ids[i], want);
        }
    }
}

/* A lazy synthetic workload (st_workload_synthetic_lazy) is the same workload: every item's whole
 * prompt (st_work_item_ids), lengths and own_key as the eager one's, its shared prefix held once;
 * items with equal tails have equal keys only (each tail its own). Both vLLM's and servetune's
 * semantics, with and without a prefix, and a vocabulary that rejects draws. */
static void synth_lazy_same_ids(void **state)
{
    (void)state;
    static const uint32_t prefixes[] = { 0, 37, 500 };
    for (int v = 0; v < 2; v++)
        for (size_t k = 0; k < sizeof prefixes / sizeof *prefixes; k++) {
            st_synth_params p = { .input_len = 900,
                                  .output_len = 50,
                                  .range_ratio = 0.4,
                                  .prefix_len = prefixes[k],
                                  .num_requests = 40,
                                  .seed = 5 + k,
                                  .vllm_semantics = v,
                                  .vocab_size = v ? 151643 : 0 };
            st_workload a, b;
            char err[256];
            assert_int_equal(st_workload_synthetic(&p, &a, err, sizeof err), 0);
            assert_int_equal(st_workload_synthetic_lazy(&p, &b, err, sizeof err), 0);
            assert_int_equal(a.n, b.n);
            uint32_t *ids = malloc(4000 * sizeof *ids);
            assert_non_null(ids);
            for (uint32_t i = 0; i < a.n; i++) {
                assert_false(a.items[i].lazy);
                assert_true(b.items[i].lazy);
                assert_int_equal(a.items[i].input_len, b.items[i].input_len);
                assert_int_equal(a.items[i].output_len, b.items[i].output_len);
                assert_int_equal(b.items[i].own_from, prefixes[k]);
                assert_true(a.items[i].own_key != 0);
                assert_true(a.items[i].own_key == b.items[i].own_key);
                assert_true(i == 0 || a.items[i].own_key != a.items[i - 1].own_key);
                assert_true(b.items[i].input_ids == b.shared_ids);
                assert_int_equal(st_work_item_ids(&b.items[i], ids), 0);
                assert_memory_equal(ids, a.items[i].input_ids, a.items[i].input_len * sizeof *ids);
            }
            free(ids);
            st_workload_free(&a);
            st_workload_free(&b);
        }
}

static void synth_invalid(void **state)
{
    (void)state;
    st_workload w;
    char err[256];
    st_synth_params p = { .input_len = 100, .output_len = 10, .range_ratio = 0.5, .prefix_len = 60, .num_requests = 5 };
    assert_int_equal(st_workload_synthetic(&p, &w, err, sizeof err), -1);
    assert_non_null(strstr(err, "prefix"));
    p.prefix_len = 50; /* = the lower bound: fine */
    assert_int_equal(st_workload_synthetic(&p, &w, err, sizeof err), 0);
    st_workload_free(&w);
    p.range_ratio = 1.0;
    assert_int_equal(st_workload_synthetic(&p, &w, err, sizeof err), -1);
    p.range_ratio = 0;
    p.num_requests = 0;
    assert_int_equal(st_workload_synthetic(&p, &w, err, sizeof err), -1);
    p.num_requests = 1;
    p.vocab_size = 10;
    assert_int_equal(st_workload_synthetic(&p, &w, err, sizeof err), -1);
    /* r = 0: exact lengths. */
    st_synth_params q = { .input_len = 37, .output_len = 5, .num_requests = 20, .seed = 3 };
    assert_int_equal(st_workload_synthetic(&q, &w, err, sizeof err), 0);
    for (uint32_t i = 0; i < w.n; i++) {
        assert_int_equal(w.items[i].input_len, 37);
        assert_int_equal(w.items[i].output_len, 5);
    }
    st_workload_free(&w);
}

static void text_from_ids(void **state)
{
    (void)state;
    st_synth_params p = { .input_len = 40, .output_len = 4, .prefix_len = 20, .num_requests = 2, .seed = 9 };
    st_workload w;
    char err[256];
    assert_int_equal(st_workload_synthetic(&p, &w, err, sizeof err), 0);
    st_buf a, b;
    st_buf_init(&a, 1 << 16);
    st_buf_init(&b, 1 << 16);
    assert_int_equal(st_workload_text(&w.items[0], &a), 0);
    assert_int_equal(st_workload_text(&w.items[1], &b), 0);
    /* One word per token, plain letters and single spaces. */
    int spaces = 0;
    for (size_t i = 0; i < a.len; i++) {
        char c = a.data[i];
        assert_true((c >= 'a' && c <= 'z') || c == ' ');
        spaces += c == ' ';
    }
    assert_int_equal(spaces, 39);
    /* The shared prefix gives identical leading text: the first 20 words match. */
    size_t cut = 0;
    for (int words = 0; cut < a.len && words < 20; cut++)
        if (a.data[cut] == ' ')
            words++;
    assert_true(cut > 20);
    assert_memory_equal(a.data, b.data, cut);
    /* Deterministic. */
    st_buf c;
    st_buf_init(&c, 1 << 16);
    st_workload_text(&w.items[0], &c);
    assert_string_equal(a.data, c.data);
    /* Bounded. */
    st_buf tiny;
    st_buf_init(&tiny, 10);
    assert_int_equal(st_workload_text(&w.items[0], &tiny), -1);
    st_work_item t = { .input_text = "hello there", .input_len = 2 };
    st_buf_reset(&c);
    assert_int_equal(st_workload_text(&t, &c), 0);
    assert_string_equal(c.data, "hello there");
    st_buf_free(&a);
    st_buf_free(&b);
    st_buf_free(&c);
    st_buf_free(&tiny);
    st_workload_free(&w);
}

static void trace_parse_good(void **state)
{
    (void)state;
    const char *t =
        "# a comment\n"
        "{\"timestamp\": 10.0, \"input_tokens\": 50, \"output_tokens\": 7, \"prefix_group\": 3, \"prefix_len\": 20}\n"
        "\n"
        "{\"timestamp\": 10.5, \"input_ids\": [1,2,3], \"output_tokens\": 2}\r\n"
        "{\"timestamp\": 12.25, \"text\": \"hi \\\"you\\\" there\", \"output_tokens\": 1}\n"
        "{\"timestamp\": 12.25, \"input_tokens\": 30, \"output_tokens\": 9, \"prefix_group\": 3, \"prefix_len\": 25}";
    st_workload w;
    char err[256];
    assert_int_equal(st_workload_trace_parse(t, strlen(t), "t.jsonl", &w, err, sizeof err), 0);
    assert_int_equal(w.n, 4);
    assert_true(w.items[0].arrival == 0);
    assert_true(w.items[1].arrival == 500 * ST_NS_PER_MS);
    assert_true(w.items[2].arrival == 2250 * ST_NS_PER_MS);
    assert_true(w.items[3].arrival == 2250 * ST_NS_PER_MS);
    assert_int_equal(w.items[0].input_len, 50);
    assert_int_equal(w.items[0].output_len, 7);
    assert_int_equal(w.items[1].input_len, 3);
    assert_int_equal(w.items[1].input_ids[2], 3);
    assert_null(w.items[2].input_ids);
    assert_string_equal(w.items[2].input_text, "hi \"you\" there");
    assert_int_equal(w.items[2].input_len, 3);
    /* Same group: the first min(20, 25) ids are shared, the rest not. */
    assert_memory_equal(w.items[0].input_ids, w.items[3].input_ids, 20 * sizeof(uint32_t));
    assert_memory_not_equal(w.items[0].input_ids + 25, w.items[3].input_ids + 25, 5 * sizeof(uint32_t));
    for (uint32_t i = 0; i < w.items[0].input_len; i++)
        assert_true(w.items[0].input_ids[i] >= ST_WORKLOAD_VOCAB_LO);
    /* Reproducible. */
    st_workload w2;
    assert_int_equal(st_workload_trace_parse(t, strlen(t), "t.jsonl", &w2, err, sizeof err), 0);
    assert_memory_equal(w.items[3].input_ids, w2.items[3].input_ids, 30 * sizeof(uint32_t));
    st_workload_free(&w2);
    st_workload_free(&w);
    /* No timestamps at all: arrival -1. */
    const char *u = "{\"input_tokens\": 5, \"output_tokens\": 1}\n{\"input_tokens\": 6, \"output_tokens\": 1}\n";
    assert_int_equal(st_workload_trace_parse(u, strlen(u), "u", &w, err, sizeof err), 0);
    assert_true(w.items[0].arrival == -1 && w.items[1].arrival == -1);
    st_workload_free(&w);
}

static void expect_trace_error(const char *text, const char *want)
{
    st_workload w;
    char err[512];
    if (st_workload_trace_parse(text, strlen(text), "bad.jsonl", &w, err, sizeof err) == 0)
        fail_msg("accepted: %s", text);
    if (!strstr(err, want))
        fail_msg("error \"%s\" lacks \"%s\"", err, want);
    assert_null(w.items);
}

static void trace_parse_errors(void **state)
{
    (void)state;
    expect_trace_error("{\"input_tokens\": 5, \"output_tokens\": 1}\n{\"input_tokens\": 5}\n",
                       "bad.jsonl:2: output_tokens is required");
    expect_trace_error("\n\n{\"input_tokens\": 5, \"output_tokens\": 1,}\n", "bad.jsonl:3: invalid JSON");
    expect_trace_error("{\"input_tokens\": 5, \"output_tokens\": 1, \"max_tokens\": 3}",
                       "bad.jsonl:1: unknown key \"max_tokens\"");
    expect_trace_error("{\"output_tokens\": 1}", "bad.jsonl:1: the input is missing");
    expect_trace_error("{\"input_ids\": [1,2], \"text\": \"x\", \"output_tokens\": 1}", "not both");
    expect_trace_error("{\"input_ids\": [1,-2], \"output_tokens\": 1}", "input_ids[1]");
    expect_trace_error("{\"input_ids\": [1,2], \"input_tokens\": 3, \"output_tokens\": 1}", "differs");
    expect_trace_error("{\"input_tokens\": 0, \"output_tokens\": 1}", "input_tokens must be in");
    expect_trace_error("{\"input_tokens\": 5, \"output_tokens\": 1.5}", "output_tokens must be an integer");
    expect_trace_error("{\"input_tokens\": 5, \"output_tokens\": 1, \"prefix_group\": 1, \"prefix_len\": 6}",
                       "exceeds");
    expect_trace_error("{\"input_tokens\": 5, \"output_tokens\": 1, \"prefix_len\": 2}", "needs a prefix_group");
    expect_trace_error("{\"timestamp\": 2, \"input_tokens\": 5, \"output_tokens\": 1}\n"
                       "{\"timestamp\": 1, \"input_tokens\": 5, \"output_tokens\": 1}",
                       "bad.jsonl:2: timestamp 1 is earlier");
    expect_trace_error("{\"timestamp\": 2, \"input_tokens\": 5, \"output_tokens\": 1}\n"
                       "{\"input_tokens\": 5, \"output_tokens\": 1}",
                       "bad.jsonl:2: timestamp missing");
    expect_trace_error("{\"timestamp\": -1, \"input_tokens\": 5, \"output_tokens\": 1}", "non-negative");
    expect_trace_error("[1,2]", "expected a JSON object");
    expect_trace_error("# only a comment\n\n", "holds no requests");
    expect_trace_error("{\"input_tokens\": 5, \"output_tokens\": 1, \"input_tokens\": 6}", "bad.jsonl:1: invalid JSON");
    /* Over-long line. */
    size_t big = ST_TRACE_LINE_MAX + 10;
    char *line = malloc(big + 1);
    assert_non_null(line);
    memset(line, ' ', big);
    line[big] = '\0';
    expect_trace_error(line, "bad.jsonl:1: line is longer than");
    free(line);
}

static void trace_load_file(void **state)
{
    (void)state;
    char path[] = "/tmp/st_trace_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    for (int i = 0; i < 1000; i++)
        fprintf(f, "{\"timestamp\": %d.5, \"input_tokens\": %d, \"output_tokens\": 3}\n", i, 10 + i % 7);
    fclose(f);
    st_workload w;
    char err[256];
    assert_int_equal(st_workload_trace_load(path, &w, err, sizeof err), 0);
    assert_int_equal(w.n, 1000);
    assert_true(w.items[999].arrival == 999 * ST_NS_PER_S);
    assert_int_equal(w.items[999].input_len, 10 + 999 % 7);
    st_workload_free(&w);
    unlink(path);
    assert_int_equal(st_workload_trace_load(path, &w, err, sizeof err), -1);
    assert_non_null(strstr(err, path));
}


static void vllm_random_semantics(void **state)
{
    (void)state;
    /* vllm bench serve --random-input-len 1000 --random-prefix-len 2000 --random-range-ratio 0.5:
     * prompts are 2000 + [500, 1500] tokens, outputs [max(1, floor(O/2)), ceil(1.5 O)] */
    st_synth_params p = { .input_len = 1000,
                          .output_len = 3,
                          .range_ratio = 0.5,
                          .prefix_len = 2000,
                          .num_requests = 400,
                          .seed = 9,
                          .vllm_semantics = 1 };
    st_workload w;
    char err[300];
    assert_int_equal(st_workload_synthetic(&p, &w, err, sizeof err), 0);
    uint32_t lo = UINT32_MAX, hi = 0, olo = UINT32_MAX, ohi = 0;
    for (uint32_t i = 0; i < w.n; i++) {
        lo = w.items[i].input_len < lo ? w.items[i].input_len : lo;
        hi = w.items[i].input_len > hi ? w.items[i].input_len : hi;
        olo = w.items[i].output_len < olo ? w.items[i].output_len : olo;
        ohi = w.items[i].output_len > ohi ? w.items[i].output_len : ohi;
        assert_memory_equal(w.items[i].input_ids, w.items[0].input_ids, 2000 * sizeof(uint32_t));
    }
    assert_true(lo >= 2500 && hi <= 3500 && lo < 2550 && hi > 3450);
    assert_true(olo == 1 && ohi == 5); /* floor(1.5) = 1, ceil(4.5) = 5 */
    st_workload_free(&w);
    /* servetune's meaning refuses a prefix longer than the shortest prompt, and says why */
    p.vllm_semantics = 0;
    assert_int_equal(st_workload_synthetic(&p, &w, err, sizeof err), -1);
    assert_non_null(strstr(err, "--random-input-len"));
}

static void synthetic_sessions(void **state)
{
    (void)state;
    st_session_params p = { .sessions = 20,
                            .turns_min = 2,
                            .turns_max = 5,
                            .first_input = 300,
                            .user_input = 40,
                            .output_len = 30,
                            .prefix_len = 100,
                            .think_s = 1.5,
                            .seed = 4 };
    st_workload w;
    char err[300];
    assert_int_equal(st_workload_sessions(&p, &w, err, sizeof err), 0);
    assert_int_equal(w.n_sessions, 20);
    assert_int_equal(w.n - w.n_dependent, 20);
    uint32_t seen = 0;
    for (uint32_t s = 0; s < 20; s++) {
        /* the first turns are scheduled, the later ones follow their chain */
        st_work_item *it = &w.items[s];
        assert_int_equal(it->session, s + 1);
        assert_int_equal(it->turn, 0);
        assert_int_equal(it->input_len, 300);
        assert_int_equal(it->prefix_len, 100);
        assert_memory_equal(it->input_ids, w.items[0].input_ids, 100 * sizeof(uint32_t));
        uint32_t turns = 1;
        while (it->next) {
            assert_true(it->next >= 20);
            st_work_item *nx = &w.items[it->next];
            assert_int_equal(nx->session, s + 1);
            assert_int_equal(nx->turn, turns);
            assert_int_equal(nx->input_len, 40);
            assert_true(nx->think == 1500 * ST_NS_PER_MS);
            it = nx;
            turns++;
        }
        assert_true(turns >= 2 && turns <= 5);
        seen += turns;
    }
    assert_int_equal(seen, w.n);
    st_workload_free(&w);
    p.turns_max = 1;
    assert_int_equal(st_workload_sessions(&p, &w, err, sizeof err), -1);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(synth_lengths_prefix_and_ids),
        cmocka_unit_test(synth_reproducible),
        cmocka_unit_test(fill_ids_match_rng_range),
        cmocka_unit_test(synth_invalid),
        cmocka_unit_test(synth_lazy_same_ids),
        cmocka_unit_test(text_from_ids),
        cmocka_unit_test(trace_parse_good),
        cmocka_unit_test(trace_parse_errors),
        cmocka_unit_test(trace_load_file),
        cmocka_unit_test(vllm_random_semantics),
        cmocka_unit_test(synthetic_sessions),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
