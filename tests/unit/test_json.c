#include "harness.h"

#include "core/json.h"

static st_json_val parse_ok(const char *s)
{
    st_json_val v;
    if (st_json_parse(s, strlen(s), &v) != 0)
        fail_msg("did not parse: %s", s);
    return v;
}

static void json_valid_and_invalid(void **state)
{
    (void)state;
    const char *good[] = { "{}",       "[]",   " {\"a\" : [1, -2.5e3, true, false, null, \"x\"]} ",
                           "0",        "-0.0", "\"\\u00e9\\ud83d\\ude00\\n\"",
                           "[[[[]]]]", "1E+2", "{\"a\":{\"b\":{}}}" };
    const char *bad[] = { "",      " ",       "{",           "}",        "[1,]",        "{\"a\":1,}", "{'a':1}",
                          "01",    "1.",      ".5",          "+1",       "1e",          "tru",        "nul",
                          "\"abc", "\"\\x\"", "\"\\u12g4\"", "\"a\tb\"", "{\"a\" 1}",   "{1:2}",      "[1 2]",
                          "{} {}", "[1]]",    "\"\\",        "-",        "[\"a\"\"b\"]" };
    st_json_val v;
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        if (st_json_parse(good[i], strlen(good[i]), &v) != 0)
            fail_msg("rejected valid: %s", good[i]);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (st_json_parse(bad[i], strlen(bad[i]), &v) == 0)
            fail_msg("accepted invalid: %s", bad[i]);
    /* Depth limit. */
    char deep[200];
    memset(deep, '[', 100);
    memset(deep + 100, ']', 100);
    assert_int_equal(st_json_parse(deep, 200, &v), -1);
    assert_int_equal(st_json_parse(deep + 100 - 30, 60, &v), 0);
    /* Length is honoured: a valid prefix inside a longer buffer. */
    assert_int_equal(st_json_parse("{}xyz", 2, &v), 0);
    assert_int_equal(v.type, ST_JSON_OBJECT);
}

static void json_paths(void **state)
{
    (void)state;
    const char *doc =
        "{\"id\":\"x\",\"choices\":[{\"index\":0,\"text\":\" said \\\"text\\\": 1\",\"finish_reason\":null},"
        "{\"index\":1,\"text\":\"b\"}],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":34,"
        "\"prompt_tokens_details\":{\"cached_tokens\":8}},\"error\":null,\"nested\":{\"text\":\"inner\"},"
        "\"text\":\"outer\"}";
    st_json_val root = parse_ok(doc), v;
    char buf[64];
    assert_int_equal(st_json_get(&root, "choices[0].text", &v), 0);
    assert_int_equal(st_json_str(&v, buf, sizeof buf, NULL), 0);
    assert_string_equal(buf, " said \"text\": 1");
    assert_int_equal(st_json_get(&root, "choices[1].text", &v), 0);
    assert_true(st_json_str_eq(&v, "b", 1));
    assert_int_equal(st_json_get(&root, "choices[2].text", &v), 1);
    assert_int_equal(v.type, ST_JSON_ABSENT);
    /* Top-level "text" is found, not the nested one nor the one inside a string. */
    assert_int_equal(st_json_get_str(&root, "text", buf, sizeof buf), 0);
    assert_string_equal(buf, "outer");
    assert_int_equal(st_json_get_str(&root, "nested.text", buf, sizeof buf), 0);
    assert_string_equal(buf, "inner");
    uint32_t u = 0;
    assert_int_equal(st_json_get_u32(&root, "usage.completion_tokens", &u), 0);
    assert_int_equal(u, 34);
    assert_int_equal(st_json_get_u32(&root, "usage.prompt_tokens_details.cached_tokens", &u), 0);
    assert_int_equal(u, 8);
    /* null vs absent */
    assert_int_equal(st_json_get(&root, "error", &v), 0);
    assert_int_equal(v.type, ST_JSON_NULL);
    assert_int_equal(st_json_get(&root, "error.message", &v), 1);
    assert_int_equal(st_json_get(&root, "missing", &v), 1);
    assert_int_equal(st_json_get(&root, "choices[0].finish_reason", &v), 0);
    assert_int_equal(v.type, ST_JSON_NULL);
    assert_int_equal(st_json_get_u32(&root, "choices[0].finish_reason", &u), 1);
    /* Wrong types along the path are "absent"; wrong reader type is -1. */
    assert_int_equal(st_json_get(&root, "id.x", &v), 1);
    assert_int_equal(st_json_get(&root, "usage[0]", &v), 1);
    assert_int_equal(st_json_get_u32(&root, "id", &u), -1);
    /* Bad paths. */
    assert_int_equal(st_json_get(&root, "a..b", &v), -1);
    assert_int_equal(st_json_get(&root, "choices[x]", &v), -1);
    assert_int_equal(st_json_get(&root, "choices[0", &v), -1);
    assert_int_equal(st_json_get(&root, ".a", &v), -1);
    assert_int_equal(st_json_count(&root), 6);
    assert_int_equal(st_json_get(&root, "choices", &v), 0);
    assert_int_equal(st_json_count(&v), 2);
    /* Root array path. */
    st_json_val arr = parse_ok("[{\"generated_text\":\"hi\"}]");
    assert_int_equal(st_json_get_str(&arr, "[0].generated_text", buf, sizeof buf), 0);
    assert_string_equal(buf, "hi");
}

static void json_escaped_keys_and_strings(void **state)
{
    (void)state;
    st_json_val root = parse_ok("{\"k\\u0065y\":1,\"a\\\"b\":2,\"s\":\"\\u00e9\\ud83d\\ude00\\ud800x\\/\\t\"}"), v;
    uint32_t u;
    assert_int_equal(st_json_get_u32(&root, "key", &u), 0);
    assert_int_equal(u, 1);
    assert_int_equal(st_json_obj_get(&root, "a\"b", 3, &v), 0);
    assert_int_equal(st_json_u32(&v, &u), 0);
    assert_int_equal(u, 2);
    char buf[32];
    size_t n;
    assert_int_equal(st_json_get(&root, "s", &v), 0);
    assert_int_equal(st_json_str(&v, buf, sizeof buf, &n), 0);
    assert_string_equal(buf, "\xc3\xa9\xf0\x9f\x98\x80\xef\xbf\xbdx/\t");
    assert_int_equal(n, strlen(buf));
    /* Truncation: bounded buffer, flagged, NUL-terminated, no partial character. */
    char small[4];
    assert_int_equal(st_json_str(&v, small, sizeof small, &n), 1);
    assert_int_equal(n, 2);
    assert_string_equal(small, "\xc3\xa9");
    assert_true(st_json_str_nonempty(&v));
    st_json_val e = parse_ok("\"\"");
    assert_false(st_json_str_nonempty(&e));
    assert_true(st_json_str_eq(&e, "", 0));
}

static void json_numbers(void **state)
{
    (void)state;
    st_json_val root = parse_ok("{\"a\":12,\"b\":-3,\"c\":2.5,\"d\":1e3,\"e\":18446744073709551615,"
                                "\"f\":18446744073709551616,\"g\":4294967296,\"h\":true}");
    uint64_t x;
    uint32_t u;
    double d;
    st_json_val v;
    st_json_get(&root, "a", &v);
    assert_int_equal(st_json_u64(&v, &x), 0);
    assert_true(x == 12);
    st_json_get(&root, "b", &v);
    assert_int_equal(st_json_u64(&v, &x), -1);
    assert_int_equal(st_json_num(&v, &d), 0);
    assert_near(d, -3, 0);
    st_json_get(&root, "c", &v);
    assert_int_equal(st_json_u64(&v, &x), -1);
    assert_int_equal(st_json_get_num(&root, "c", &d), 0);
    assert_near(d, 2.5, 0);
    st_json_get(&root, "d", &v);
    assert_int_equal(st_json_u64(&v, &x), 0);
    assert_true(x == 1000);
    st_json_get(&root, "e", &v);
    assert_int_equal(st_json_u64(&v, &x), 0);
    assert_true(x == UINT64_MAX);
    st_json_get(&root, "f", &v);
    assert_int_equal(st_json_u64(&v, &x), -1);
    st_json_get(&root, "g", &v);
    assert_int_equal(st_json_u32(&v, &u), -1);
    int b = 0;
    st_json_get(&root, "h", &v);
    assert_int_equal(st_json_bool(&v, &b), 0);
    assert_int_equal(b, 1);
    assert_int_equal(st_json_num(&v, &d), -1);
}

static void json_iterate(void **state)
{
    (void)state;
    st_json_val root = parse_ok("{\"a\":[1,2,3],\"b\":{\"c\":\"d\"}}"), k, v;
    st_json_iter it;
    assert_int_equal(st_json_iter_init(&it, &root), 0);
    int n = 0;
    while (st_json_iter_next(&it, &k, &v) == 1) {
        assert_int_equal(k.type, ST_JSON_STRING);
        n++;
    }
    assert_int_equal(n, 2);
    assert_int_equal(st_json_iter_next(&it, &k, &v), 0);
    /* A view that was never validated: lookups fail instead of reading out of bounds. */
    st_json_val broken = { ST_JSON_OBJECT, "{\"a\":[1,2", 9 };
    assert_int_equal(st_json_get(&broken, "a[5]", &v), -1);
    assert_int_equal(st_json_get(&broken, "b", &v), -1);
}

static void json_obj_fields_one_pass(void **state)
{
    (void)state;
    static const char *const keys[] = { "a", "b\"q", "missing", "c" };
    st_json_val out[4];
    const char *doc = "{\"a\":1,\"b\\\"q\":[2],\"c\":{\"a\":3},\"a\":4}";
    /* An unparsed view: obj_fields validates while it reads. */
    st_json_val raw = { ST_JSON_OBJECT, doc, strlen(doc) };
    assert_int_equal(st_json_obj_fields(&raw, keys, 4, out), 0);
    uint32_t u;
    assert_int_equal(st_json_u32(&out[0], &u), 0);
    assert_int_equal(u, 1); /* the first occurrence wins */
    assert_int_equal(out[1].type, ST_JSON_ARRAY);
    assert_int_equal(out[2].type, ST_JSON_ABSENT);
    assert_int_equal(out[3].type, ST_JSON_OBJECT);
    /* Trailing garbage, truncation and bad members are caught. */
    const char *bad[] = { "{\"a\":1} x", "{\"a\":1", "{\"a\":1,\"b\":tru}", "{\"a\":1}}", "{\"a\" 1}" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        st_json_val v = { ST_JSON_OBJECT, bad[i], strlen(bad[i]) };
        if (st_json_obj_fields(&v, keys, 4, out) != -1)
            fail_msg("accepted: %s", bad[i]);
        assert_int_equal(out[0].type, ST_JSON_ABSENT);
    }
    st_json_val ws = { ST_JSON_OBJECT, "{\"z\":1}  \r\n", 11 };
    assert_int_equal(st_json_obj_fields(&ws, keys, 4, out), 1);
    st_json_val arr = parse_ok("[1]");
    assert_int_equal(st_json_obj_fields(&arr, keys, 4, out), 1);
}

static void json_iter_next_fields_matches(void **state)
{
    (void)state;
    st_json_val arr =
        parse_ok("[{\"text\":\"a\",\"finish_reason\":null}, 7, {\"x\":{\"text\":1}},{\"te\\u0078t\":\"b\"} ,[]]");
    static const char *const keys[] = { "text", "finish_reason" };
    st_json_iter a, b;
    st_json_val va, vb, out[2];
    st_json_iter_init(&a, &arr);
    st_json_iter_init(&b, &arr);
    int n = 0, ra, rb;
    const st_json_type want_text[] = { ST_JSON_STRING, ST_JSON_ABSENT, ST_JSON_ABSENT, ST_JSON_STRING, ST_JSON_ABSENT };
    while ((ra = st_json_iter_next_fields(&a, keys, 2, &va, out)) == 1) {
        rb = st_json_iter_next(&b, NULL, &vb);
        assert_int_equal(rb, 1);
        assert_int_equal(va.type, vb.type);
        assert_ptr_equal(va.p, vb.p);
        assert_int_equal(va.len, vb.len);
        assert_int_equal(out[0].type, want_text[n]);
        n++;
    }
    assert_int_equal(ra, 0);
    assert_int_equal(n, 5);
    assert_int_equal(st_json_iter_next(&b, NULL, &vb), 0);
    /* Malformed elements stop the iteration with -1. */
    const char *bad = "[{\"text\":1,}]";
    st_json_val raw = { ST_JSON_ARRAY, bad, strlen(bad) };
    st_json_iter_init(&a, &raw);
    assert_int_equal(st_json_iter_next_fields(&a, keys, 2, &va, out), -1);
    assert_int_equal(st_json_iter_next_fields(&a, keys, 2, &va, out), -1);
    /* Not for objects. */
    st_json_val obj = parse_ok("{\"a\":1}");
    st_json_iter_init(&a, &obj);
    assert_int_equal(st_json_iter_next_fields(&a, keys, 2, &va, out), -1);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(json_valid_and_invalid),
        cmocka_unit_test(json_paths),
        cmocka_unit_test(json_escaped_keys_and_strings),
        cmocka_unit_test(json_numbers),
        cmocka_unit_test(json_iterate),
        cmocka_unit_test(json_obj_fields_one_pass),
        cmocka_unit_test(json_iter_next_fields_matches),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
