/* audit/prices: the built-in price list parses whole; picks by GPU, kind and provider; a
 * user's list with a bad row is refused naming the line. */
#include "harness.h"

#include "plan/prices.h"

static void builtin_list(void **state)
{
    (void)state;
    st_prices p;
    char err[256];
    if (st_prices_builtin(&p, err, sizeof err))
        fail_msg("%s", err);
    assert_true(p.n >= 100);
    /* every row has its source and a date (or "undated") */
    for (int i = 0; i < p.n; i++) {
        assert_true(p.v[i].source[0] != '\0');
        assert_true(p.v[i].source_date[0] != '\0');
    }
    const st_price *h = st_prices_pick(&p, "H100", ST_PRICE_ON_DEMAND, NULL);
    assert_non_null(h);
    assert_near(h->usd_per_gpu_hour, 2.69, 1e-12); /* the lowest on-demand H100 SXM listed */
    h = st_prices_pick(&p, "h100", ST_PRICE_ON_DEMAND, "lambda");
    assert_non_null(h);
    assert_near(h->usd_per_gpu_hour, 3.99, 1e-12);
    assert_null(st_prices_pick(&p, "H100", ST_PRICE_ON_DEMAND, "no-such-cloud"));
    /* serverless H100 prices do not name the form factor: they stand for every H100 */
    const st_price *s = st_prices_pick(&p, "H100-NVL", ST_PRICE_SERVERLESS, NULL);
    assert_non_null(s);
    assert_string_equal(s->gpu_key, "H100-unspecified");
    /* a row marked suspect is never picked */
    for (int i = 0; i < p.n; i++)
        if (p.v[i].kind == ST_PRICE_SUSPECT)
            assert_true(st_prices_pick(&p, p.v[i].gpu_key, ST_PRICE_ON_DEMAND, p.v[i].provider) != &p.v[i]);
    const char *keys[64];
    int n = st_prices_gpus(&p, ST_PRICE_ON_DEMAND, keys, 64);
    assert_true(n >= 10);
    st_prices_free(&p);
}

static void user_lists(void **state)
{
    (void)state;
    st_prices p;
    char err[256];
    const char *ok = "provider,gpu_key,usd_per_gpu_hour\nmine,H100,1.5\nmine,\"A100\",0.9\n";
    assert_int_equal(st_prices_parse("mine.csv", ok, strlen(ok), &p, err, sizeof err), 0);
    assert_int_equal(p.n, 2);
    assert_int_equal(p.v[1].kind, ST_PRICE_ON_DEMAND);
    assert_near(st_prices_pick(&p, "A100", ST_PRICE_ON_DEMAND, NULL)->usd_per_gpu_hour, 0.9, 0);
    st_prices_free(&p);
    struct {
        const char *text, *err;
    } bad[] = {
        { "gpu,price\nH100,2\n", "x.csv:1: the header must name the columns gpu_key and usd_per_gpu_hour" },
        { "gpu_key,usd_per_gpu_hour\nH100,2\nA100,n/a\n",
          "x.csv:3: usd_per_gpu_hour: expected a number > 0 and at most 1000, got 'n/a'" },
        { "gpu_key,usd_per_gpu_hour\nH100,-1\n",
          "x.csv:2: usd_per_gpu_hour: expected a number > 0 and at most 1000, got '-1'" },
        { "gpu_key,usd_per_gpu_hour\nH100,1e300\n",
          "x.csv:2: usd_per_gpu_hour: expected a number > 0 and at most 1000, got '1e300'" },
        { "gpu_key,usd_per_gpu_hour\n,2\n", "x.csv:2: gpu_key: empty" },
        { "gpu_key,usd_per_gpu_hour,kind\nH100,2,reserved\n", "x.csv:2: kind: 'reserved' is not one of" },
        { "gpu_key,usd_per_gpu_hour\n", "x.csv: no prices after the header" },
        { "", "x.csv: empty" },
        { "gpu_key,usd_per_gpu_hour\n\"H100,2\n", "x.csv: line 2: a quoted field is not closed" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = '\0';
        assert_int_equal(st_prices_parse("x.csv", bad[i].text, strlen(bad[i].text), &p, err, sizeof err), -1);
        if (strncmp(err, bad[i].err, strlen(bad[i].err)))
            fail_msg("case %zu: got '%s', want '%s'", i, err, bad[i].err);
        assert_int_equal(p.n, 0);
        assert_null(p.v);
    }
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(builtin_list),
        cmocka_unit_test(user_lists),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
