/* Exact prompt lengths (load/tokenize.h): fitting a text to a count with a tokenizer that is
 * not one token a word, keeping a shared prefix, and the /tokenize answer shapes. */
#include "harness.h"

#include <stdio.h>

#include "load/tokenize.h"

/* A chat template of 9 tokens, and words of 6+ letters counted as two tokens. */
static int fake_count(void *arg, const char *text, size_t len, uint32_t *count, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    int *calls = arg;
    (*calls)++;
    uint32_t n = 9;
    size_t i = 0;
    while (i < len) {
        while (i < len && text[i] == ' ')
            i++;
        size_t s = i;
        while (i < len && text[i] != ' ')
            i++;
        if (i > s)
            n += i - s >= 6 ? 2 : 1;
    }
    *count = n;
    return 0;
}

static int failing_count(void *arg, const char *text, size_t len, uint32_t *count, char *err, size_t errlen)
{
    (void)arg;
    (void)text;
    (void)len;
    (void)count;
    snprintf(err, errlen, "no /tokenize on this server");
    return -1;
}

static void fit_exact_and_prefix_kept(void **state)
{
    (void)state;
    for (uint32_t target = 20; target < 3000; target = target * 3 + 7) {
        uint32_t *ids = malloc(target * sizeof *ids);
        for (uint32_t i = 0; i < target; i++)
            ids[i] = 1000 + (i * 2654435761u) % 31000;
        st_work_item a = { .id = 1, .input_ids = ids, .input_len = target, .output_len = 1, .prefix_len = 10 };
        st_buf before;
        st_buf_init(&before, 1 << 24);
        st_workload_text(&a, &before);
        int calls = 0;
        uint32_t got;
        char err[200];
        int rc = st_prompt_fit(&a, target, 10, fake_count, &calls, &got, err, sizeof err);
        assert_int_equal(rc, 0);
        assert_int_equal(got, target);
        assert_int_equal(a.input_len, target);
        assert_null(a.input_ids);
        uint32_t check;
        fake_count(&calls, a.input_text, strlen(a.input_text), &check, err, sizeof err);
        assert_int_equal(check, target);
        assert_true(calls <= ST_FIT_ROUNDS + 1);
        /* the first 10 words (the shared prefix) are those of the ids */
        size_t end = 0;
        for (int words = 0; end < before.len && words < 10; end++)
            if (before.data[end] == ' ')
                words++;
        if (end && before.data[end - 1] == ' ')
            end--;
        assert_int_equal(strncmp(before.data, a.input_text, end), 0);
        st_buf_free(&before);
        st_work_item_free(&a);
    }
    /* a counter that fails: the reason comes back */
    uint32_t ids[4] = { 1000, 1001, 1002, 1003 };
    st_work_item b = { .input_len = 4, .output_len = 1 };
    b.input_ids = malloc(sizeof ids);
    memcpy(b.input_ids, ids, sizeof ids);
    uint32_t got;
    char err[200];
    assert_int_equal(st_prompt_fit(&b, 4, 0, failing_count, NULL, &got, err, sizeof err), -1);
    assert_non_null(strstr(err, "no /tokenize"));
    assert_non_null(b.input_ids); /* unchanged */
    st_work_item_free(&b);
}

static void tokenize_answers(void **state)
{
    (void)state;
    uint32_t n;
    const char *vllm = "{\"count\":7,\"max_model_len\":40960,\"tokens\":[1,2,3,4,5,6,7],\"token_strs\":null}";
    assert_int_equal(st_tokenize_parse(vllm, strlen(vllm), &n), 0);
    assert_int_equal(n, 7);
    const char *llama = "{\"tokens\":[12,13,14]}";
    assert_int_equal(st_tokenize_parse(llama, strlen(llama), &n), 0);
    assert_int_equal(n, 3);
    const char *tgi =
        "[{\"id\":1,\"text\":\"a\",\"start\":0,\"stop\":1},{\"id\":2,\"text\":\"b\",\"start\":1,\"stop\":2}]";
    assert_int_equal(st_tokenize_parse(tgi, strlen(tgi), &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(st_tokenize_parse("{\"detail\":\"Not Found\"}", 22, &n), -1);
    assert_int_equal(st_tokenize_parse("nope", 4, &n), -1);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(fit_exact_and_prefix_kept),
        cmocka_unit_test(tokenize_answers),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}
