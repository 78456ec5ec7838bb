/* audit/calibrate's reading of `servetune bench --json` files: what the file says is bounded by
 * the run itself (a max_concurrency of 1e15 is no cap, never an allocation of that size). */
#include "harness.h"

#include "audit/calibrate.h"
#include "core/buf.h"

/* A bench --json text of n requests, sent 0.1 s apart, with the given max_concurrency (JSON). */
static char *bench_json(int n, const char *max_concurrency)
{
    st_buf b;
    st_buf_init(&b, 1 << 20);
    st_buf_printf(&b,
                  "{\"schema\": \"servetune.bench/1\", \"config\": {\"arrival\": {\"rate_rps\": 10, "
                  "\"max_concurrency\": %s}, \"workload\": {\"prefix_len\": 0}}, \"records\": [",
                  max_concurrency);
    for (int i = 0; i < n; i++) {
        long long t = (long long)i * 100000000LL;
        st_buf_printf(&b,
                      "%s{\"status\": \"ok\", \"scheduled_ns\": %lld, \"sent_ns\": %lld, \"first_token_ns\": %lld, "
                      "\"end_ns\": %lld, \"input_tokens\": 20, \"output_tokens\": 4}",
                      i ? ", " : "", t, t, t + 20000000LL, t + 50000000LL);
    }
    st_buf_puts(&b, "]}");
    return b.data;
}

static void max_concurrency_is_bounded_by_the_run(void **state)
{
    (void)state;
    struct {
        const char *value;
        uint32_t want;
    } cases[] = { { "1000000000000000", 0 }, { "4294967297", 0 }, { "12", 0 }, { "5", 5 }, { "-3", 0 } };
    st_emu_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.model.vocab = 1000;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *text = bench_json(12, cases[i].value);
        st_calibrate_set s;
        st_calibrate_set_init(&s);
        char err[256] = "";
        if (st_calibrate_add_bench_json(&s, "b.json", text, strlen(text), &cfg, 1, err, sizeof err) < 0)
            fail_msg("case %zu: %s", i, err);
        assert_int_equal(s.n, 1);
        if (s.runs[0].max_concurrency != cases[i].want)
            fail_msg("case %zu (%s): max_concurrency %u, want %u", i, cases[i].value, s.runs[0].max_concurrency,
                     cases[i].want);
        assert_true(s.runs[0].max_concurrency < s.runs[0].n);
        st_calibrate_set_free(&s);
        free(text);
    }
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(max_concurrency_is_bounded_by_the_run),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
