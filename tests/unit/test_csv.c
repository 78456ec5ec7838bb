/* core/csv: RFC 4180 records, quoting, line numbers in errors. */
#include "harness.h"

#include <stdio.h>

#include "core/csv.h"

static void records_and_quotes(void **state)
{
    (void)state;
    const char *t = "gpu,usd,note\r\nH100,2.49,\"on-demand, \"\"list\"\" price\"\n\n"
                    "A100,,\"two\nlines\"\nL4,0.8\n";
    st_csv c;
    char err[160];
    st_csv_init(&c, t, strlen(t));
    assert_int_equal(st_csv_next(&c, err, sizeof err), 1);
    assert_int_equal(c.n, 3);
    assert_int_equal(st_csv_find(&c, "usd"), 1);
    assert_int_equal(st_csv_find(&c, "nope"), -1);
    assert_int_equal(st_csv_next(&c, err, sizeof err), 1);
    assert_string_equal(c.field[0], "H100");
    assert_string_equal(c.field[2], "on-demand, \"list\" price");
    assert_int_equal(c.len[2], strlen("on-demand, \"list\" price"));
    assert_int_equal(c.rec_line, 2);
    assert_int_equal(st_csv_next(&c, err, sizeof err), 1);
    assert_int_equal(c.rec_line, 4); /* the blank line is skipped */
    assert_string_equal(c.field[1], "");
    assert_string_equal(c.field[2], "two\nlines");
    assert_int_equal(st_csv_next(&c, err, sizeof err), 1);
    assert_int_equal(c.rec_line, 6);
    assert_int_equal(c.n, 2);
    assert_int_equal(st_csv_next(&c, err, sizeof err), 0);
    st_csv_free(&c);
}

static void bad_records(void **state)
{
    (void)state;
    struct {
        const char *text, *err;
    } cases[] = {
        { "a,b\n\"open,x\n", "line 2: a quoted field is not closed" },
        { "a\n\"x\"y\n", "line 2: text after a closing quote" },
        { "a\nx\"y\n", "line 2: a quote inside an unquoted field" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        st_csv c;
        char err[160] = "";
        st_csv_init(&c, cases[i].text, strlen(cases[i].text));
        int rc;
        while ((rc = st_csv_next(&c, err, sizeof err)) == 1)
            ;
        assert_int_equal(rc, -1);
        if (strncmp(err, cases[i].err, strlen(cases[i].err)))
            fail_msg("got '%s', want '%s'", err, cases[i].err);
        st_csv_free(&c);
    }
    /* a record with more fields than the reader holds is refused, not cut */
    char many[4 * ST_CSV_MAX_FIELDS + 8];
    size_t n = 0;
    for (int i = 0; i <= ST_CSV_MAX_FIELDS; i++)
        n += (size_t)snprintf(many + n, sizeof many - n, "%s1", i ? "," : "");
    st_csv c;
    char err[160];
    st_csv_init(&c, many, n);
    assert_int_equal(st_csv_next(&c, err, sizeof err), -1);
    assert_non_null(strstr(err, "more than 256 fields"));
    st_csv_free(&c);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(records_and_quotes),
        cmocka_unit_test(bad_records),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
