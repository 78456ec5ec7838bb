/* servetune trace stats --spec: the figures end to end (ids given in the log), a vocabulary
 * written here and read back, and bad input refused or named. */
#include "harness.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <unistd.h>

#include "emu_util.h"
#include "engine/gguf.h"

static char dir[64];

static void write_file(const char *name, const char *text, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int run(char *out, size_t cap, const char *a1, const char *a2, const char *a3, const char *a4, const char *a5,
               const char *a6, const char *a7)
{
    char *argv[12] = { (char *)st_test_bin(), "trace", "stats" };
    int n = 3;
    const char *more[] = { a1, a2, a3, a4, a5, a6, a7 };
    for (int i = 0; i < 7 && more[i]; i++)
        argv[n++] = (char *)more[i];
    argv[n] = NULL;
    return st_test_capture(argv, out, cap);
}

static int sink(void *ctx, const void *p, size_t n) { return fwrite(p, 1, n, ctx) == n ? 0 : -1; }

/* A vocabulary-only GGUF: the tokenizer keys alone (model, tokens, scores). */
static void write_vocab(const char *path, const char *model)
{
    st_gguf g;
    st_gguf_init(&g);
    const char *tok[260];
    float sc[260];
    char bytes[256][7];
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        tok[b] = bytes[b];
        sc[b] = -100;
    }
    tok[256] = "\xE2\x96\x81";
    tok[257] = "a";
    tok[258] = "b";
    tok[259] = "\xE2\x96\x81"
               "a";
    for (int i = 256; i < 260; i++)
        sc[i] = -1;
    assert_int_equal(st_gguf_set_str(&g, "general.architecture", "llama"), 0);
    assert_int_equal(st_gguf_set_str(&g, "tokenizer.ggml.model", model), 0);
    assert_int_equal(st_gguf_set_arr_str(&g, "tokenizer.ggml.tokens", 260, tok), 0);
    assert_int_equal(st_gguf_set_arr_num(&g, "tokenizer.ggml.scores", ST_GGUF_F32, 260, sc), 0);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    char err[200];
    if (st_gguf_write(&g, NULL, NULL, sink, f, err, sizeof err))
        fail_msg("%s", err);
    fclose(f);
    st_gguf_free(&g);
}

static void figures_from_ids(void **state)
{
    (void)state;
    char log[300], js[300], out[16384];
    /* prompt 1..10 and the completion repeating it (test_ngram: 6 of 6 draft tokens accepted,
     * 2 drafts, 3 steps), and a row of counts only */
    write_file("ids.jsonl",
               "{\"input_ids\": [1,2,3,4,5,6,7,8,9,10], \"output_ids\": [1,2,3,4,5,6,7,8,9,10]}\n"
               "{\"input_tokens\": 100, \"output_tokens\": 20}\n",
               log, sizeof log);
    snprintf(js, sizeof js, "%s/out.json", dir);
    int rc = run(out, sizeof out, log, "--spec", "ngram:3,2,2", "--spec", "ngram:1,1,1", "--json", js);
    if (rc != 0)
        fail_msg("exit %d: %s", rc, out);
    assert_non_null(strstr(out, "Speculative decoding"));
    assert_non_null(strstr(out, "line 2: token counts only"));
    json_error_t je;
    json_t *j = json_load_file(js, 0, &je);
    assert_non_null(j);
    json_t *spec = json_object_get(j, "speculation");
    json_t *r0 = json_array_get(json_object_get(spec, "results"), 0);
    assert_string_equal(json_string_value(json_object_get(r0, "spec")), "ngram:3,2,2");
    assert_int_equal(json_integer_value(json_object_get(r0, "num_drafts")), 2);
    assert_int_equal(json_integer_value(json_object_get(r0, "num_draft_tokens")), 6);
    assert_int_equal(json_integer_value(json_object_get(r0, "num_accepted_tokens")), 6);
    assert_near(json_real_value(json_object_get(r0, "mean_acceptance_length")), 4.0, 1e-9);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(spec, "counts"), "no_prompt")), 1);
    /* the traffic figures are there too */
    assert_int_equal(json_integer_value(json_object_get(j, "requests")), 2);
    json_decref(j);
}

/* A log written as one JSON array (LiteLLM's exported spend logs, a ShareGPT file): its elements
 * are read as the lines of a JSONL log, numbered from 1; a broken array is refused. */
static void json_array_log(void **state)
{
    (void)state;
    char log[300], js[300], out[16384];
    write_file("ids.json",
               "  [{\"input_ids\": [1,2,3,4,5,6,7,8,9,10], \"output_ids\": [1,2,3,4,5,6,7,8,9,10]},\n"
               "   {\"input_tokens\": 100, \"output_tokens\": 20}]\n",
               log, sizeof log);
    snprintf(js, sizeof js, "%s/arr.json", dir);
    int rc = run(out, sizeof out, log, "--spec", "ngram:3,2,2", "--json", js, NULL, NULL);
    if (rc != 0)
        fail_msg("exit %d: %s", rc, out);
    assert_non_null(strstr(out, "line 2: token counts only"));
    json_t *j = json_load_file(js, 0, NULL);
    assert_non_null(j);
    json_t *spec = json_object_get(j, "speculation");
    json_t *r0 = json_array_get(json_object_get(spec, "results"), 0);
    assert_int_equal(json_integer_value(json_object_get(r0, "num_drafts")), 2);
    assert_int_equal(json_integer_value(json_object_get(r0, "num_accepted_tokens")), 6);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(spec, "counts"), "lines")), 2);
    json_decref(j);
    write_file("broken.json", "[{\"input_ids\": [1,2,3]}, \n", log, sizeof log);
    rc = run(out, sizeof out, log, "--spec", "ngram:3,2,2", NULL, NULL, NULL, NULL);
    assert_true(rc != 0);
    assert_non_null(strstr(out, "not a JSON array"));
}

static void text_with_vocab(void **state)
{
    (void)state;
    char log[300], voc[300], bpe[300], out[16384];
    write_file("text.jsonl", "{\"text\": \"a b a b a b\", \"completion\": \"a b a b a b\"}\n", log, sizeof log);
    snprintf(voc, sizeof voc, "%s/vocab.gguf", dir);
    write_vocab(voc, "llama");
    int rc = run(out, sizeof out, log, "--spec", "ngram:2,1,2", "--vocab", voc, NULL, NULL);
    if (rc != 0)
        fail_msg("exit %d: %s", rc, out);
    assert_non_null(strstr(out, "1 from text by vocab.gguf (SentencePiece"));
    /* without --vocab: named, and no figure */
    rc = run(out, sizeof out, log, "--spec", "ngram:2", NULL, NULL, NULL, NULL);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "no tokenizer given (--vocab)"));
    /* a BPE vocabulary is refused with the reason */
    snprintf(bpe, sizeof bpe, "%s/bpe.gguf", dir);
    write_vocab(bpe, "gpt2");
    rc = run(out, sizeof out, log, "--spec", "ngram:2", "--vocab", bpe, NULL, NULL);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, "tokenizer model 'gpt2' is not supported"));
}

/* Token ids from a running engine's /tokenize (the emulator's: one token a word), as --tokenize
 * says: prompt 1..10 as words and the completion repeating it, the by-hand figures of test_ngram. */
static void ids_from_engine_tokenize(void **state)
{
    (void)state;
    char log[300], js[300], url[64], out[16384];
    write_file("words.jsonl", "{\"text\": \"a b c d e f g h i j\", \"completion\": \"a b c d e f g h i j\"}\n", log,
               sizeof log);
    snprintf(js, sizeof js, "%s/words.json", dir);
    emu_child emu;
    const char *extra[] = { "--quiet", NULL };
    assert_int_equal(emu_start(&emu, "Qwen/Qwen3-8B", "H100", extra, 1), 0);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", emu.port);
    int rc = run(out, sizeof out, log, "--spec", "ngram:3,2,2", "--tokenize", url, "--json", js);
    emu_stop(&emu);
    if (rc != 0)
        fail_msg("exit %d: %s", rc, out);
    assert_non_null(strstr(out, "/tokenize (the engine's tokenizer"));
    json_error_t je;
    json_t *j = json_load_file(js, 0, &je);
    assert_non_null(j);
    json_t *spec = json_object_get(j, "speculation");
    json_t *c = json_object_get(spec, "counts");
    assert_int_equal(json_integer_value(json_object_get(c, "ids_from_text")), 1);
    assert_int_equal(json_integer_value(json_object_get(c, "prompt_tokens")), 10);
    assert_int_equal(json_integer_value(json_object_get(c, "completion_tokens")), 10);
    json_t *r0 = json_array_get(json_object_get(spec, "results"), 0);
    assert_int_equal(json_integer_value(json_object_get(r0, "num_drafts")), 2);
    assert_int_equal(json_integer_value(json_object_get(r0, "num_accepted_tokens")), 6);
    json_decref(j);
    /* nothing listening: refused with the reason, not a zero */
    snprintf(url, sizeof url, "http://127.0.0.1:%d", free_port());
    rc = run(out, sizeof out, log, "--spec", "ngram:3,2,2", "--tokenize", url, NULL, NULL);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "1 not tokenized"));
}

static void bad_arguments(void **state)
{
    (void)state;
    char log[300], out[16384];
    write_file("one.jsonl", "{\"input_ids\": [1,2], \"output_ids\": [1,2]}\n", log, sizeof log);
    assert_int_equal(run(out, sizeof out, log, "--spec", "ngram:0", NULL, NULL, NULL, NULL), 2);
    assert_non_null(strstr(out, "num_speculative_tokens"));
    assert_int_equal(run(out, sizeof out, log, "--spec", "eagle:3", NULL, NULL, NULL, NULL), 2);
    assert_int_equal(run(out, sizeof out, log, "--vocab", "x.gguf", NULL, NULL, NULL, NULL), 2);
    assert_non_null(strstr(out, "--vocab goes with --spec"));
    assert_int_equal(run(out, sizeof out, log, "--spec", "ngram:2", "--vocab", "x.gguf", "--tokenize", "http://h"), 2);
    assert_non_null(strstr(out, "not both"));
    assert_int_equal(run(out, sizeof out, "-", "--spec", "ngram:2", NULL, NULL, NULL, NULL), 2);
    assert_non_null(strstr(out, "not stdin"));
    assert_int_equal(run(out, sizeof out, log, "--spec", "ngram:2", "--vocab", "/nonexistent.gguf", NULL, NULL), 2);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/st-spec-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd_path[300];
    const char *names[] = { "ids.jsonl", "out.json",  "text.jsonl",  "vocab.gguf",
                            "bpe.gguf",  "one.jsonl", "words.jsonl", "words.json" };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(cmd_path, sizeof cmd_path, "%s/%s", dir, names[i]);
        unlink(cmd_path);
    }
    rmdir(dir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(figures_from_ids),         cmocka_unit_test(json_array_log), cmocka_unit_test(text_with_vocab),
        cmocka_unit_test(ids_from_engine_tokenize), cmocka_unit_test(bad_arguments),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
