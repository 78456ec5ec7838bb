/* Offline n-gram acceptance over logs with text (load/spec_trace.h): each line shape, the
 * counters by hand, and every line that cannot be replayed counted under its reason and named. */
#include "harness.h"

#include <stdio.h>

#include "load/spec_trace.h"
#include "load/tokenize.h"
#include "load/trace.h"

/* A toy tokenizer: one id per space-separated word, the word's first letter - 'a' + 1 (so
 * "a b c" is 1 2 3); a word starting with 'X' cannot be mapped. */
static int64_t toy(void *arg, const char *text, size_t len, uint32_t **ids, size_t *cap, char *err, size_t errlen)
{
    int *calls = arg;
    (*calls)++;
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        while (i < len && (text[i] == ' ' || text[i] == '\n'))
            i++;
        if (i == len)
            break;
        if (text[i] == 'X') {
            snprintf(err, errlen, "no token for 'X'");
            return -1;
        }
        if (n == *cap) {
            size_t c = *cap ? 2 * *cap : 16;
            uint32_t *p = realloc(*ids, c * sizeof *p);
            if (!p)
                return -1;
            *ids = p;
            *cap = c;
        }
        (*ids)[n++] = (uint32_t)(text[i] - 'a' + 1);
        while (i < len && text[i] != ' ' && text[i] != '\n')
            i++;
    }
    return (int64_t)n;
}

static st_spec_stats *make(int *calls, int with_tok)
{
    st_ngram_params p = { .k = 3, .min_n = 2, .max_n = 2, .max_model_len = 0 };
    char err[200];
    st_spec_stats *s = st_spec_stats_new(&p, 1, with_tok ? toy : NULL, calls, err, sizeof err);
    if (!s)
        fail_msg("%s", err);
    return s;
}

static void add(st_spec_stats *s, const char *line, uint64_t no)
{
    assert_int_equal(st_spec_stats_add_line(s, line, strlen(line), no), 0);
}

/* The same request (prompt 1..10, the completion repeats it: 3 steps, 2 drafts, 6 of 6 accepted,
 * as in test_ngram) given as ids, as text, as chat messages and as an OpenAI log. */
static void shapes(void **state)
{
    (void)state;
    int calls = 0;
    st_spec_stats *s = make(&calls, 1);
    add(s, "{\"input_ids\": [1,2,3,4,5,6,7,8,9,10], \"output_ids\": [1,2,3,4,5,6,7,8,9,10], \"category\": \"ids\"}", 1);
    add(s, "{\"text\": \"a b c d e f g h i j\", \"completion\": \"a b c d e f g h i j\", \"category\": \"text\"}", 2);
    add(s, "   ", 3);
    add(s, "# a comment", 4);
    add(s,
        "{\"messages\": [{\"role\": \"system\", \"content\": \"a b c d e\"}, {\"role\": \"user\", \"content\": "
        "[{\"type\": \"text\", \"text\": \"f g h i j\"}]}], \"output_text\": \"a b c d e f g h i j\"}",
        5);
    add(s,
        "{\"request\": {\"model\": \"m\", \"prompt\": \"a b c d e f g h i j\"}, \"response\": {\"choices\": "
        "[{\"text\": \"a b c d e f g h i j\"}]}}",
        6);
    add(s,
        "{\"request\": {\"messages\": [{\"role\": \"user\", \"content\": \"a b c d e f g h i j\"}]}, \"response\": "
        "{\"choices\": [{\"message\": {\"role\": \"assistant\", \"content\": \"a b c d e f g h i j\"}}]}}",
        7);
    const st_spec_counts *c = st_spec_stats_counts(s);
    assert_int_equal(c->lines, 5);
    assert_int_equal(c->replayed, 5);
    assert_int_equal(c->from_ids, 1);
    assert_int_equal(c->from_text, 4);
    assert_int_equal(c->prompt_tokens, 50);
    assert_int_equal(c->completion_tokens, 50);
    assert_int_equal(calls, 8);
    const st_ngram_acc *a = st_spec_stats_total(s, 0);
    assert_int_equal(a->requests, 5);
    assert_int_equal(a->steps, 15);
    assert_int_equal(a->no_proposal, 5);
    assert_int_equal(a->drafts, 10);
    assert_int_equal(a->draft_tokens, 30);
    assert_int_equal(a->accepted, 30);
    assert_int_equal(st_spec_stats_n_categories(s), 2);
    assert_string_equal(st_spec_stats_category(s, 0), "ids");
    assert_int_equal(st_spec_stats_by_category(s, 0, 1)->requests, 1);
    assert_int_equal(st_spec_stats_by_category(s, 0, 1)->accepted, 6);

    json_t *j = st_spec_stats_json(s, "toy");
    json_t *r0 = json_array_get(json_object_get(j, "results"), 0);
    assert_string_equal(json_string_value(json_object_get(r0, "spec")), "ngram:3,2,2");
    assert_int_equal(json_integer_value(json_object_get(r0, "num_drafts")), 10);
    assert_int_equal(json_integer_value(json_object_get(r0, "num_accepted_tokens")), 30);
    assert_near(json_real_value(json_object_get(r0, "mean_acceptance_length")), 4.0, 1e-12);
    assert_int_equal(json_array_size(json_object_get(r0, "num_accepted_tokens_per_pos")), 3);
    assert_non_null(json_object_get(json_object_get(r0, "by_category"), "text"));
    json_decref(j);
    st_spec_stats_free(s);
}

/* Lines that cannot be replayed: counted under their reason, the first five named. */
static void refusals(void **state)
{
    (void)state;
    int calls = 0;
    st_spec_stats *s = make(&calls, 1);
    add(s, "{\"input_tokens\": 100, \"output_tokens\": 20}", 1);
    add(s, "{\"text\": \"a b c\", \"output_tokens\": 20}", 2);
    add(s, "not json", 3);
    add(s, "[1, 2]", 4);
    add(s, "{\"text\": \"a X c\", \"completion\": \"a b\"}", 5);
    add(s, "{\"text\": \"a b c\", \"completion\": \"X\"}", 6);
    add(s, "{\"messages\": [], \"completion\": \"a\"}", 7);
    const st_spec_counts *c = st_spec_stats_counts(s);
    assert_int_equal(c->lines, 7);
    assert_int_equal(c->replayed, 0);
    assert_int_equal(c->no_prompt, 2);
    assert_int_equal(c->no_completion, 1);
    assert_int_equal(c->malformed, 2);
    assert_int_equal(c->untokenized, 2);
    assert_int_equal(c->n_bad_first, 5);
    assert_non_null(strstr(c->bad_first[0], "line 1: token counts only"));
    assert_non_null(strstr(c->bad_first[1], "line 2: no completion"));
    assert_non_null(strstr(c->bad_first[2], "line 3: invalid JSON"));
    assert_non_null(strstr(c->bad_first[3], "line 4: not a JSON object"));
    assert_non_null(strstr(c->bad_first[4], "line 5: the prompt: no token for 'X'"));
    st_spec_stats_free(s);

    /* text without a tokenizer: named, never a zero acceptance */
    s = make(&calls, 0);
    add(s, "{\"text\": \"a b c\", \"completion\": \"a b\"}", 1);
    add(s, "{\"input_ids\": [1, 2], \"completion\": \"a b\"}", 2);
    c = st_spec_stats_counts(s);
    assert_int_equal(c->no_tokenizer, 2);
    assert_int_equal(c->replayed, 0);
    assert_non_null(strstr(c->bad_first[0], "no tokenizer given"));
    assert_int_equal(st_spec_stats_total(s, 0)->steps, 0);
    st_spec_stats_free(s);
}

static void categories_bounded(void **state)
{
    (void)state;
    int calls = 0;
    st_spec_stats *s = make(&calls, 0);
    char line[200];
    for (int i = 0; i < ST_SPEC_CATEGORIES_MAX + 3; i++) {
        snprintf(line, sizeof line, "{\"input_ids\": [1,2,1], \"output_ids\": [2,1,2], \"category\": \"c%d\"}", i);
        add(s, line, (uint64_t)i + 1);
    }
    assert_int_equal(st_spec_stats_n_categories(s), ST_SPEC_CATEGORIES_MAX + 1);
    assert_string_equal(st_spec_stats_category(s, ST_SPEC_CATEGORIES_MAX), "other");
    assert_int_equal(st_spec_stats_by_category(s, 0, ST_SPEC_CATEGORIES_MAX)->requests, 3);
    st_spec_stats_free(s);

    st_ngram_params bad = { .k = 0, .min_n = 1, .max_n = 1 };
    char err[200];
    assert_null(st_spec_stats_new(&bad, 1, NULL, NULL, err, sizeof err));
    assert_non_null(strstr(err, "num_speculative_tokens"));
}

/* ShareGPT conversations and chat logs that hold their answers: each answer is a request whose
 * prompt is every turn before it. */
static void conversations(void **state)
{
    (void)state;
    int calls = 0;
    st_spec_stats *s = make(&calls, 1);
    add(s,
        "{\"id\": \"x\", \"conversations\": [{\"from\": \"human\", \"value\": \"a b c d e f g h i j\"}, "
        "{\"from\": \"gpt\", \"value\": \"a b c d e f g h i j\"}, {\"from\": \"human\", \"value\": \"k\"}, "
        "{\"from\": \"gpt\", \"value\": \"a b c\"}]}",
        1);
    const st_spec_counts *c = st_spec_stats_counts(s);
    assert_int_equal(c->lines, 1);
    assert_int_equal(c->replayed, 2);
    assert_int_equal(c->prompt_tokens, 10 + 21);
    assert_int_equal(c->completion_tokens, 10 + 3);
    /* the second: [k a] has no match, [a b] proposes c d e, cut to the one logged token left */
    const st_ngram_acc *a = st_spec_stats_total(s, 0);
    assert_int_equal(a->steps, 3 + 2);
    assert_int_equal(a->drafts, 2 + 1);
    assert_int_equal(a->draft_tokens, 6 + 1);
    assert_int_equal(a->accepted, 6 + 1);
    assert_int_equal(a->truncated, 2);
    /* OpenAI-style messages with the answer last */
    add(s,
        "{\"messages\": [{\"role\": \"user\", \"content\": \"a b c d e f g h i j\"}, {\"role\": \"assistant\", "
        "\"content\": \"a b c d e f g h i j\"}]}",
        2);
    assert_int_equal(c->replayed, 3);
    /* a conversation without an answer: named */
    add(s, "{\"conversations\": [{\"from\": \"human\", \"value\": \"a b\"}]}", 3);
    assert_int_equal(c->replayed, 3);
    assert_int_equal(c->no_completion, 1);
    st_spec_stats_free(s);
    /* without a tokenizer: named */
    s = make(&calls, 0);
    add(s, "{\"conversations\": [{\"from\": \"human\", \"value\": \"a\"}, {\"from\": \"gpt\", \"value\": \"b\"}]}", 1);
    assert_int_equal(st_spec_stats_counts(s)->no_tokenizer, 1);
    assert_non_null(strstr(st_spec_stats_counts(s)->bad_first[0], "a conversation's text"));
    st_spec_stats_free(s);
}

/* The ids of /tokenize answers: vLLM / the emulator {"tokens": [ids]}, llama.cpp with pieces
 * [{"id", "piece"}]; anything else refused. */
static void tokenize_ids(void **state)
{
    (void)state;
    uint32_t *ids = NULL;
    size_t cap = 0;
    const char *v = "{\"count\":3,\"max_model_len\":4096,\"tokens\":[5,0,4294967295],\"token_strs\":null}";
    assert_int_equal(st_tokenize_parse_ids(v, strlen(v), &ids, &cap), 3);
    assert_int_equal(ids[0], 5);
    assert_int_equal(ids[2], 4294967295u);
    const char *l = "{\"tokens\":[{\"id\":7,\"piece\":\"a\"},{\"id\":8,\"piece\":\"b\"}]}";
    assert_int_equal(st_tokenize_parse_ids(l, strlen(l), &ids, &cap), 2);
    assert_int_equal(ids[1], 8);
    const char *e = "{\"tokens\":[]}";
    assert_int_equal(st_tokenize_parse_ids(e, strlen(e), &ids, &cap), 0);
    const char *bad[] = { "{\"count\":3}", "[1,2]", "{\"tokens\":[-1]}", "{\"tokens\":[\"x\"]}", "nope" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(st_tokenize_parse_ids(bad[i], strlen(bad[i]), &ids, &cap), -1);
    free(ids);
}

static int out_len_cb(void *arg, const st_trace_row *row, char *err, size_t errlen)
{
    uint32_t *out = arg;
    out[row->index] = row->output_len;
    return 0;
}

/* The servetune JSONL reader takes the logged completion: its length is the output length when
 * output_tokens is absent (ids counted, text by words); a completion that is no string is refused. */
static void servetune_jsonl_completion(void **state)
{
    (void)state;
    const char *t = "{\"text\": \"a b\", \"completion\": \"one two three\", \"category\": \"x\"}\n"
                    "{\"input_ids\": [1, 2], \"output_ids\": [5, 6, 7, 8]}\n"
                    "{\"text\": \"a b\", \"completion\": \"one two\", \"output_tokens\": 9}\n";
    uint32_t out[3] = { 0 };
    st_trace_counts c;
    char err[300];
    if (st_trace_read_buffer(t, strlen(t), "t", NULL, out_len_cb, out, &c, NULL, err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(c.kept, 3);
    assert_int_equal(out[0], 3);
    assert_int_equal(out[1], 4);
    assert_int_equal(out[2], 9);
    const char *bad = "{\"text\": \"a b\", \"completion\": 3}\n";
    assert_int_equal(st_trace_read_buffer(bad, strlen(bad), "t", NULL, out_len_cb, out, &c, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "completion must be a string"));
    const char *bad2 = "{\"text\": \"a b\", \"output_ids\": []}\n";
    assert_int_equal(st_trace_read_buffer(bad2, strlen(bad2), "t", NULL, out_len_cb, out, &c, NULL, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "output_ids must be"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shapes),
        cmocka_unit_test(refusals),
        cmocka_unit_test(categories_bounded),
        cmocka_unit_test(servetune_jsonl_completion),
        cmocka_unit_test(conversations),
        cmocka_unit_test(tokenize_ids),
    };
    return cmocka_run_group_tests(tests, 0, 0);
}
