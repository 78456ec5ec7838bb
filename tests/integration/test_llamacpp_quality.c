/* The quality figures against llama.cpp's own reference, on the real engine: a Llama 30M with
 * random weights written by `servetune gguf` (its logits scaled so the next-token distributions are
 * concentrated, as a trained model's are), f16 as the baseline against q8_0 and q4_0 weights
 * (llama-quantize) and a q8_0 KV cache. llama-perplexity --kl-divergence-base / --kl-divergence
 * scores a text file in chunks of CTX tokens (the second half of each chunk); servetune scores the
 * same tokens teacher-forced through llama-server's /completion (n_probs, one position per request,
 * the prefix cached), with the quality pass's own request body, answer parser and drift arithmetic
 * (audit/quality.h, audit/drift.h): mean KL divergence within 10 % of llama-perplexity's, same
 * top-1 within 0.5 percentage points. */
#include "harness.h"

#include <stdio.h>

#include "audit/drift.h"
#include "audit/quality.h"
#include "load/tokenize.h"
#include "llamacpp_util.h"

#define CTX 128
#define CHUNKS 2
#define TOP_K 64
#define LOGIT_SCALE "24"

static char tmp[256];

static int setup(void **state)
{
    (void)state;
    snprintf(tmp, sizeof tmp, "/tmp/st_llq_it.XXXXXX");
    return mkdtemp(tmp) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf -- '%s'", tmp);
    if (!getenv("ST_IT_KEEP") && !strncmp(tmp, "/tmp/st_llq_it.", 15))
        (void)!system(cmd);
    return 0;
}

/* A text of ordinary words, deterministic, long enough for CHUNKS chunks of CTX tokens. */
static void write_text(const char *path)
{
    static const char *const w[] = { "the",    "river",  "carried",  "small",   "boats", "past", "old",
                                     "houses", "while",  "children", "watched", "from",  "a",    "bridge",
                                     "near",   "market", "where",    "bread",   "and",   "fish", "were",
                                     "sold",   "every",  "morning",  "before",  "rain",  "came", "down" };
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    uint64_t z = 12345;
    for (int i = 0; i < 1600; i++) {
        z = z * 6364136223846793005ULL + 1442695040888963407ULL;
        fprintf(f, "%s%s", w[(z >> 33) % (sizeof w / sizeof *w)], i % 13 == 12 ? ".\n" : " ");
    }
    fclose(f);
}

typedef struct kl_ref {
    double mean, p99, same_top1;
} kl_ref;

/* Runs llama-perplexity; with out, parses its KL divergence statistics. */
static void perplexity(const char *dir, const char *model, const char *text, const char *base, int compare,
                       const char *const *extra, kl_ref *out)
{
    char bin[1200], log[600], ctx[16], chunks[16];
    snprintf(bin, sizeof bin, "%s/bin/llama-perplexity", dir);
    snprintf(log, sizeof log, "%s/perplexity.log", tmp);
    snprintf(ctx, sizeof ctx, "%d", CTX);
    snprintf(chunks, sizeof chunks, "%d", CHUNKS);
    char *argv[40] = { bin,        "-m",   (char *)model, "-f", (char *)text,           "-c",        ctx,
                       "--chunks", chunks, "-t",          "2",  "--kl-divergence-base", (char *)base };
    int n = 13;
    if (compare)
        argv[n++] = "--kl-divergence";
    for (int i = 0; extra && extra[i]; i++)
        argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    int rc = llama_run(argv, log, 300);
    if (rc)
        fail_msg("llama-perplexity exited %d (see %s)", rc, log);
    if (!out)
        return;
    FILE *f = fopen(log, "r");
    assert_non_null(f);
    char line[512];
    out->mean = out->p99 = out->same_top1 = NAN;
    while (fgets(line, sizeof line, f)) {
        double v;
        if (sscanf(line, "Mean    KLD: %lf", &v) == 1)
            out->mean = v;
        else if (sscanf(line, "99.0%%   KLD: %lf", &v) == 1)
            out->p99 = v;
        else if (sscanf(line, "Same top p: %lf", &v) == 1)
            out->same_top1 = v / 100;
    }
    fclose(f);
    if (isnan(out->mean) || isnan(out->p99) || isnan(out->same_top1))
        fail_msg("no KL divergence statistics in %s", log);
}

/* The text's tokens as llama-perplexity takes them (the server's /tokenize with BOS). */
static uint32_t *tokenize(int port, const char *text_path, size_t *n)
{
    FILE *f = fopen(text_path, "r");
    assert_non_null(f);
    static char text[1 << 16];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = '\0';
    st_buf body;
    st_buf_init(&body, 1 << 20);
    st_buf_puts(&body, "{\"content\":");
    st_buf_json_str(&body, text);
    st_buf_puts(&body, ",\"add_special\":true}");
    http_res r;
    assert_int_equal(http_do(port, "POST", "/tokenize", body.data, NULL, 30000, &r), 0);
    assert_int_equal(r.status, 200);
    uint32_t *ids = NULL;
    size_t cap = 0;
    int64_t k = st_tokenize_parse_ids(r.body.data, r.body.len, &ids, &cap);
    assert_true(k >= CTX * CHUNKS);
    *n = (size_t)k;
    http_res_free(&r);
    st_buf_free(&body);
    return ids;
}

/* The positions llama-perplexity scores: chunk c's tokens (its first replaced by BOS), positions
 * CTX/2 .. CTX-2, each the distribution of the next token. */
#define FIRST (CTX / 2)
#define PER_CHUNK (CTX - 1 - FIRST)
#define POSITIONS (CHUNKS * PER_CHUNK)

/* Scores every position on the server at port: out[POSITIONS]. */
static void score(int port, const uint32_t *toks, st_qtok *out)
{
    uint32_t ctx[CTX];
    for (int c = 0; c < CHUNKS; c++) {
        memcpy(ctx, toks + (size_t)c * CTX, sizeof ctx);
        ctx[0] = toks[0]; /* BOS */
        for (int i = FIRST; i < CTX - 1; i++) {
            st_buf body;
            st_buf_init(&body, 1 << 20);
            assert_int_equal(st_quality_body(ST_QAPI_LLAMACPP, NULL, ctx, (uint32_t)i + 1, NULL, 1, TOP_K, 1, &body),
                             0);
            http_res r;
            /* the prompt evaluated whole (cache_prompt false), in one batch as llama-perplexity evaluates
             * its chunks: on a cached prefix the server decodes one token with other kernels, whose
             * rounding is another (small) source of drift than the one compared here */
            static char nb[1 << 16];
            char *cp = strstr(body.data, "\"cache_prompt\":true");
            assert_non_null(cp);
            snprintf(nb, sizeof nb, "%.*s\"cache_prompt\":false%s", (int)(cp - body.data), body.data, cp + 19);
            const char *send = nb;
            assert_int_equal(http_do(port, "POST", "/completion", send, NULL, 30000, &r), 0);
            if (r.status != 200)
                fail_msg("/completion: HTTP %d: %.300s", r.status, r.body.data ? r.body.data : "");
            st_qanswer a;
            char err[256];
            if (st_quality_parse(ST_QAPI_LLAMACPP, r.body.data, r.body.len, &a, err, sizeof err))
                fail_msg("answer: %s", err);
            assert_true(a.n >= 1);
            assert_int_equal(a.tok[0].k, TOP_K);
            st_qtok *t = &out[c * PER_CHUNK + (i - FIRST)];
            *t = a.tok[0];
            t->token = (int32_t)ctx[i + 1]; /* the text's next token */
            t->logp = NAN;
            st_qanswer_free(&a);
            http_res_free(&r);
            st_buf_free(&body);
        }
    }
}

static void serve_and_score(const char *dir, const char *model, const char *const *flags, const uint32_t *toks,
                            st_qtok *out)
{
    char sub[400];
    snprintf(sub, sizeof sub, "%s/srv", tmp);
    mkdir(sub, 0755);
    const char *base[] = { "-c", "512", "-np", "1", "-t", "2", NULL, NULL, NULL, NULL, NULL, NULL, NULL };
    int n = 6;
    for (int i = 0; flags && flags[i]; i++)
        base[n++] = flags[i];
    llama_srv s;
    if (llama_start(&s, dir, model, sub, base, LLAMA_READY_S)) {
        llama_stop(&s);
        fail_msg("llama-server did not start: %s", llama_log_tail(&s));
    }
    score(s.port, toks, out);
    llama_stop(&s);
}

static void versus_llama_perplexity(void **state)
{
    (void)state;
    const char *dir;
    LLAMACPP_OR_SKIP(dir);
    char ppl[1200];
    snprintf(ppl, sizeof ppl, "%s/bin/llama-perplexity", dir);
    if (access(ppl, X_OK)) {
        const char *req = getenv("SERVETUNE_REQUIRE_LLAMACPP");
        if (req && !strcmp(req, "1"))
            fail_msg("no llama-perplexity in %s/bin (scripts/install-llamacpp builds it)", dir);
        print_message("# no llama-perplexity in the build (run scripts/install-llamacpp): skipped\n");
        skip();
    }
    char f16[400], q8[400], q4[400], text[400], kld[400];
    snprintf(f16, sizeof f16, "%s/m-f16.gguf", tmp);
    snprintf(q8, sizeof q8, "%s/m-q8_0.gguf", tmp);
    snprintf(q4, sizeof q4, "%s/m-q4_0.gguf", tmp);
    snprintf(text, sizeof text, "%s/text.txt", tmp);
    snprintf(kld, sizeof kld, "%s/base.kld", tmp);
    const char *const gen[] = { "--logit-scale", LOGIT_SCALE, NULL };
    llama_make_model(dir, "llama", "30M", NULL, f16, gen);
    llama_make_model(dir, "llama", "30M", "q8_0", q8, gen);
    llama_make_model(dir, "llama", "30M", "q4_0", q4, gen);
    write_text(text);
    perplexity(dir, f16, text, kld, 0, NULL, NULL);

    /* servetune: the baseline's distributions, then each candidate's, on the same tokens */
    size_t nt;
    uint32_t *toks;
    {
        char sub[400];
        snprintf(sub, sizeof sub, "%s/srv", tmp);
        mkdir(sub, 0755);
        const char *fl[] = { "-c", "512", "-np", "1", "-t", "2", NULL };
        llama_srv s;
        if (llama_start(&s, dir, f16, sub, fl, LLAMA_READY_S)) {
            llama_stop(&s);
            fail_msg("llama-server did not start: %s", llama_log_tail(&s));
        }
        toks = tokenize(s.port, text, &nt);
        llama_stop(&s);
    }
    static st_qtok base[POSITIONS], cand[POSITIONS];
    serve_and_score(dir, f16, NULL, toks, base);
    static const char *const kv_flags[] = { "-ctk", "q8_0", "-ctv", "q8_0", "-fa", "on", NULL };
    const struct {
        const char *name, *model;
        const char *const *flags;
    } cases[] = { { "q8_0", q8, NULL }, { "q4_0", q4, NULL }, { "q8_0 KV cache", f16, kv_flags } };
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
        kl_ref ref;
        perplexity(dir, cases[ci].model, text, kld, 1, cases[ci].flags, &ref);
        serve_and_score(dir, cases[ci].model, cases[ci].flags, toks, cand);
        st_lp_pos bv[POSITIONS], cv[POSITIONS];
        st_quality_views(base, POSITIONS, bv);
        st_quality_views(cand, POSITIONS, cv);
        st_drift_acc acc = { 0 };
        assert_int_equal(st_drift_add_forced(&acc, bv, cv, POSITIONS), 0);
        st_drift_summary d;
        st_drift_summarize(&acc, &d);
        st_drift_free(&acc);
        print_message("# f16 vs %s, %d positions: mean KLD servetune %.6f llama-perplexity %.6f; p99 KLD %.6f / %.6f; "
                      "same top-1 %.2f %% / %.2f %%; baseline mass outside the top %d: %.4f\n",
                      cases[ci].name, POSITIONS, d.kld_mean, ref.mean, d.kld_p99, ref.p99, 100 * d.same_top1,
                      100 * ref.same_top1, TOP_K, d.rest_base_mean);
        assert_int_equal(d.positions, POSITIONS);
        assert_true(ref.mean > 0);
        if (!(fabs(d.kld_mean - ref.mean) <= 0.10 * ref.mean))
            fail_msg("%s: mean KLD %.6f, llama-perplexity %.6f: more than 10 %% apart", cases[ci].name, d.kld_mean,
                     ref.mean);
        if (!(fabs(d.same_top1 - ref.same_top1) <= 0.005))
            fail_msg("%s: same top-1 %.3f %%, llama-perplexity %.3f %%: more than 0.5 points apart", cases[ci].name,
                     100 * d.same_top1, 100 * ref.same_top1);
    }
    free(toks);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test_setup_teardown(versus_llama_perplexity, setup, teardown),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
