/* audit/calibrate's reading of `servetune bench --json` files: what the file says is bounded by
 * the run itself (a max_concurrency of 1e15 is no cap, never an allocation of that size). */
#include "harness.h"

#include "audit/calibrate.h"
#include "emu_config.h"
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

/* A fit reports its progress (calibrate prints it on stderr): the probes of the constants, done
 * of the total, then the fit's evaluations with the loss so far. */
typedef struct progress_seen {
    int probes, probe_total, last_probe, fits;
    double last_loss;
} progress_seen;

static void seen(void *arg, const char *phase, int done, int total, double loss)
{
    progress_seen *p = arg;
    if (!strcmp(phase, "probe")) {
        p->probes++;
        p->probe_total = total;
        p->last_probe = done;
    } else if (!strcmp(phase, "fit")) {
        p->fits++;
        p->last_loss = loss;
    }
}

static void fit_reports_progress(void **state)
{
    (void)state;
    st_emu_config cfg;
    emu_config_of(&cfg, "H100", "Qwen/Qwen3-8B");
    st_calibrate_set s;
    st_calibrate_set_init(&s);
    char err[512] = "";
    for (int i = 0; i < 2; i++) {
        char *text = bench_json(40 + 20 * i, "null");
        if (st_calibrate_add_bench_json(&s, i ? "b2.json" : "b1.json", text, strlen(text), &cfg, 1, err, sizeof err) <
            0)
            fail_msg("%s", err);
        free(text);
    }
    progress_seen p = { 0 };
    s.progress = seen;
    s.progress_arg = &p;
    st_emu_calib cal;
    st_calibrate_report rep;
    if (st_calibrate_fit(&s, &cal, &rep, err, sizeof err) < 0)
        fail_msg("fit: %s", err);
    if (p.probes < 1 || p.probe_total < 1 || p.last_probe != p.probe_total)
        fail_msg("probe progress: %d calls, last %d of %d (expected every constant probed, the last of all)", p.probes,
                 p.last_probe, p.probe_total);
    if (rep.n_fitted > 0 && (p.fits != rep.evaluations || !(p.last_loss <= rep.loss0)))
        fail_msg("fit progress: %d calls for %d evaluations, last loss %g (start %g)", p.fits, rep.evaluations,
                 p.last_loss, rep.loss0);
    printf("# %d probes of %d constants, %u fitted in %d evaluations (%d progress calls)\n", p.probes, p.probe_total,
           rep.n_fitted, rep.evaluations, p.fits);
    st_calibrate_set_free(&s);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(max_concurrency_is_bounded_by_the_run),
        cmocka_unit_test(fit_reports_progress),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
