/* The emulator's deterministic tokenizer (engine/emutok.h). */
#include "harness.h"

#include <stdio.h>

#include "engine/emutok.h"

static void words_and_roundtrip(void **state)
{
    (void)state;
    const char *t = "  The quick\tbrown\n fox  ";
    assert_int_equal(st_emutok_count(t, strlen(t)), 4);
    uint32_t ids[8], again[8];
    assert_int_equal(st_emutok_encode(t, strlen(t), 151936, ids, 8), 4);
    assert_int_equal(st_emutok_encode(t, strlen(t), 151936, again, 8), 4);
    assert_memory_equal(ids, again, sizeof ids[0] * 4);
    for (int i = 0; i < 4; i++)
        assert_true(ids[i] < 151936);
    /* ids -> words -> ids for every id of a vocabulary sample */
    for (uint32_t id = 0; id < 151936; id += 37) {
        char w[8];
        int n = st_emutok_word(id, w);
        assert_true(n >= 1 && n <= 4);
        uint32_t back;
        assert_int_equal(st_emutok_encode(w, (size_t)n, 151936, &back, 1), 1);
        if (back != id)
            fail_msg("id %u -> '%s' -> %u", id, w, back);
    }
    char w[8];
    st_emutok_word(0, w);
    assert_string_equal(w, "a");
    st_emutok_word(26, w);
    assert_string_equal(w, "aa");
    /* only max ids are written, the count is still returned */
    assert_int_equal(st_emutok_encode("a b c d e", 9, 1000, ids, 2), 5);
    assert_int_equal(st_emutok_count("", 0), 0);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(words_and_roundtrip),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
