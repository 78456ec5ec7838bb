/* Speculative decoding measured on the real llama-server (built by scripts/install-llamacpp):
 * a 30M Llama target written by `servetune gguf` (f16) with two drafts of the same vocabulary,
 * the same weights quantized to q8_0 (high acceptance) and another random model (near none);
 * `servetune bench` reads each response's timings.draft_n / draft_n_accepted into its records
 * and its summary. Greedy decoding (--temp 0 on the server): an acceptance that depends on the
 * weights alone. Without a build the tests skip (they fail under SERVETUNE_REQUIRE_LLAMACPP=1). */
#include "harness.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define ST_IT_TMP_PREFIX "/tmp/st_llama_spec_it."
#include "audit_util.h"
#include "llamacpp_util.h"
#include "emu/specstep.h"
#include "engine/gguf.h"

#define ALIAS "llama-30m"
#define BENCH_LIMIT_S 180.0

/* What one bench run measured: the mean client TPOT of its measured requests, and its decode
 * phase's tokens (after each request's first), draft tokens and accepted ones (llama-server's
 * timings). */
typedef struct bench_out {
    double rate, tpot_ms, tokens, drafted, accepted;
    double srv_token_ms; /* llama-server's own decode time per generated token (timings.predicted_ms / _n) */
} bench_out;

#define SERVER_ARGS "-c", "1024", "-t", "1", "--temp", "0", "--alias", ALIAS
#define REQUESTS 8

/* Runs the bench against a llama-server of `model` with `draft` (NULL: none) and `np` slots:
 * REQUESTS requests of 32 prompt and 48 output tokens, all sent at once (with one slot, served one
 * at a time; with np, np at a time). */
static void bench_server_np(const char *dir, const char *model, const char *draft, const char *name, int np,
                            bench_out *o)
{
    memset(o, 0, sizeof *o);
    llama_srv s;
    char nps[16];
    snprintf(nps, sizeof nps, "%d", np);
    const char *with[] = { "-md", draft, "--spec-type", "draft-simple", "--spec-draft-n-max",
                           "8",   "-np", nps,           SERVER_ARGS,    NULL };
    const char *plain[] = { "-np", nps, SERVER_ARGS, NULL };
    if (llama_start(&s, dir, model, tmp, draft ? with : plain, LLAMA_READY_S)) {
        llama_stop(&s);
        fail_msg("llama-server (%s) did not become ready:\n%s", name, llama_log_tail(&s));
    }
    char url[64], json[600], nreq[16];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", s.port);
    snprintf(json, sizeof json, "%s/bench-%s.json", tmp, name);
    snprintf(nreq, sizeof nreq, "%d", REQUESTS);
    const char *b[] = { "bench", "--url",           url,  "--api", "completions", "--model", ALIAS, "--input-tokens",
                        "32",    "--output-tokens", "48", "-n",    nreq,          "--rate",  "inf", "--seed",
                        "5",     "--json",          json, "-q",    NULL };
    int rc = run_servetune(b, BENCH_LIMIT_S);
    llama_stop(&s);
    if (rc != 0 && rc != 3)
        fail_msg("servetune bench (%s) exited %d", name, rc);
    json_error_t je;
    json_t *j = json_load_file(json, 0, &je);
    if (!j)
        fail_msg("%s: %s", json, je.text);
    json_int_t sum_d = 0, sum_a = 0, n = 0;
    double gen_ms = 0, gen_n = 0;
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(j, "records"), i, r)
    {
        if (json_is_true(json_object_get(r, "warmup")))
            continue;
        sum_d += json_integer_value(json_object_get(r, "server_draft_tokens"));
        sum_a += json_integer_value(json_object_get(r, "server_draft_accepted"));
        o->tokens += (double)json_integer_value(json_object_get(r, "output_tokens")) - 1;
        o->tpot_ms += json_number_value(json_object_get(r, "tpot_ms"));
        gen_ms += json_number_value(json_object_get(r, "server_gen_ms"));
        gen_n += json_number_value(json_object_get(r, "server_gen_tokens"));
        n++;
    }
    assert_int_equal(n, REQUESTS);
    o->tpot_ms /= (double)n;
    o->srv_token_ms = gen_n > 0 ? gen_ms / gen_n : NAN;
    o->drafted = (double)sum_d;
    o->accepted = (double)sum_a;
    json_t *sp = json_object_get(json_object_get(j, "summary"), "speculation");
    if (draft) {
        if (!json_is_object(sp))
            fail_msg("draft %s: no speculation block in the summary", name);
        assert_int_equal(json_integer_value(json_object_get(sp, "requests")), REQUESTS);
        assert_true(json_integer_value(json_object_get(sp, "draft_tokens")) > 0);
        assert_int_equal(json_integer_value(json_object_get(sp, "draft_tokens")), sum_d);
        assert_int_equal(json_integer_value(json_object_get(sp, "accepted_tokens")), sum_a);
        o->rate = json_real_value(json_object_get(sp, "acceptance_rate"));
        print_message("# draft %s: %.0f of %.0f draft tokens accepted (%.1f%%), TPOT %.2f ms\n", name, o->accepted,
                      o->drafted, 100 * o->rate, o->tpot_ms);
    } else {
        print_message("# %s without a draft, %d slot(s): TPOT %.2f ms (the server's %.3f ms a token)\n", name, np,
                      o->tpot_ms, o->srv_token_ms);
    }
    json_decref(j);
}

static void bench_server(const char *dir, const char *model, const char *draft, const char *name, bench_out *o)
{
    bench_server_np(dir, model, draft, name, 1, o);
}

static double measured(const char *dir, const char *target, const char *draft, const char *name)
{
    bench_out o;
    bench_server(dir, target, draft, name, &o);
    return o.rate;
}

static void quantized_and_foreign_drafts(void **state)
{
    (void)state;
    const char *dir;
    LLAMACPP_OR_SKIP(dir);
    char target[600], q8[600], other[600];
    snprintf(target, sizeof target, "%s/target.gguf", tmp);
    snprintf(q8, sizeof q8, "%s/draft-q8.gguf", tmp);
    snprintf(other, sizeof other, "%s/draft-other.gguf", tmp);
    const char *seed1[] = { "--seed", "1", NULL }, *seed2[] = { "--seed", "2", NULL };
    llama_make_model(dir, "llama", "30M", NULL, target, seed1);
    llama_make_model(dir, "llama", "30M", "q8_0", q8, seed1);
    llama_make_model(dir, "llama", "30M", NULL, other, seed2);
    double same = measured(dir, target, q8, "q8");
    double foreign = measured(dir, target, other, "other");
    /* the same weights draft what the target decodes; another random model almost never does */
    assert_true(same > 0.5);
    assert_true(foreign < same / 2);
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* A forward pass's cost on llama-server for `model`: prompt processing of n tokens (a new prompt
 * each time, no prompt cache), fitted as a + b n seconds by a robust line over n = 2..16. */
static void pass_costs(const char *dir, const char *model, const char *name, double *a, double *b)
{
    llama_srv s;
    const char *args[] = { "-np", "1", SERVER_ARGS, NULL };
    if (llama_start(&s, dir, model, tmp, args, LLAMA_READY_S)) {
        llama_stop(&s);
        fail_msg("llama-server (%s) did not become ready:\n%s", name, llama_log_tail(&s));
    }
    static const int sizes[] = { 2, 4, 6, 8, 10, 12, 16 };
    enum { PTS = 3 * 7 };
    double px[PTS], py[PTS];
    int m = 0;
    uint32_t x = 12345;
    for (int rep = -1; rep < 3; rep++) { /* rep -1: a warm-up, not counted */
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
            char body[1024];
            int len = snprintf(body, sizeof body, "{\"prompt\":[");
            for (int t = 0; t < sizes[k]; t++) {
                x = x * 1103515245u + 12345u;
                len += snprintf(body + len, sizeof body - (size_t)len, "%s%u", t ? "," : "", 1000 + (x >> 8) % 30000);
            }
            snprintf(body + len, sizeof body - (size_t)len,
                     "],\"n_predict\":1,\"cache_prompt\":false,\"temperature\":0}");
            http_res r;
            if (http_do(s.port, "POST", "/completion", body, NULL, 30000, &r) || r.status != 200)
                fail_msg("%s: /completion: status %d: %s", name, r.status, r.body.data ? r.body.data : "");
            json_t *j = json_loads(r.body.data, 0, NULL);
            http_res_free(&r);
            assert_non_null(j);
            json_t *tm = json_object_get(j, "timings");
            double n = (double)json_integer_value(json_object_get(tm, "prompt_n"));
            double ms = json_number_value(json_object_get(tm, "prompt_ms"));
            json_decref(j);
            assert_true(n >= sizes[k] && ms > 0);
            if (rep < 0 || m >= PTS)
                continue;
            px[m] = n;
            py[m++] = ms / 1e3;
        }
    }
    llama_stop(&s);
    /* Theil-Sen: the median of the pairwise slopes, then of the intercepts (a shared machine's
     * stalls make a few points far slower; least squares would follow them) */
    static double sl[PTS * PTS];
    int k = 0;
    for (int i = 0; i < m; i++)
        for (int j = i + 1; j < m; j++)
            if (px[j] != px[i])
                sl[k++] = (py[j] - py[i]) / (px[j] - px[i]);
    assert_true(k > 0);
    qsort(sl, (size_t)k, sizeof *sl, cmp_double);
    *b = sl[k / 2];
    for (int i = 0; i < m; i++)
        sl[i] = py[i] - *b * px[i];
    qsort(sl, (size_t)m, sizeof *sl, cmp_double);
    *a = sl[m / 2];
    print_message("# %s: a pass of n tokens takes %.3f + %.3f n ms\n", name, 1e3 * *a, 1e3 * *b);
    assert_true(*b > 0);
    if (*a < 0)
        *a = 0;
}

/* The model's output layer against its blocks' linear layers, in parameters (from the GGUF's
 * tensors): what one more logits row costs relative to one more token through the blocks. */
static double row_share(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    static char head[1 << 20];
    size_t got = fread(head, 1, sizeof head, f);
    fclose(f);
    st_gguf g;
    char err[300];
    if (st_gguf_parse(head, got, (uint64_t)size, &g, err, sizeof err))
        fail_msg("%s: %s", path, err);
    double out = 0, blocks = 0;
    for (size_t i = 0; i < g.n_t; i++) {
        const st_gguf_tensor *t = &g.t[i];
        if (t->n_dims != 2)
            continue;
        double n = (double)t->ne[0] * (double)t->ne[1];
        if (!strcmp(t->name, "output.weight"))
            out = n;
        else if (!strncmp(t->name, "blk.", 4))
            blocks += n;
    }
    st_gguf_free(&g);
    assert_true(out > 0 && blocks > 0);
    return out / blocks;
}

/* The model's inputs for one model from servers without speculation: its pass a + b n (prompt
 * processing, a graph built each time, one sampling) and its decode served alone (a graph reused,
 * one sampling and one streamed token a step). tok_s, the per-token sampling and streaming, is
 * taken out of both; what prompt processing's fixed cost has beyond the decode pass's is the graph
 * build. */
static void model_costs(const char *dir, const char *model, const char *name, double tok_s, double *a, double *b,
                        double *graph)
{
    double pp_a;
    pass_costs(dir, model, name, &pp_a, b);
    bench_out alone;
    bench_server(dir, model, NULL, name, &alone);
    *a = alone.srv_token_ms / 1e3 - *b - tok_s;
    *graph = pp_a - *a - tok_s;
    if (*a < 0)
        *a = 0;
    if (*graph < 0)
        *graph = 0;
    print_message("# %s: a decode pass %.3f + %.3f n ms, a graph build %.3f ms\n", name, 1e3 * *a, 1e3 * *b,
                  1e3 * *graph);
}

/* The engine model's llama.cpp step (emu/specstep.h) with llama.cpp's measured pass costs and the
 * measured acceptance, against the TPOT change each draft makes: within 15 % for both. The costs
 * come from servers without a draft: each model's prompt processing and decode, and the target's
 * decode at 4 sequences a step (each sequence more costs a token's pass, a logits row and the
 * per-token sampling and streaming, which the single-sequence decode then no longer counts as a
 * fixed cost); the speculative runs give only their draft and accepted counts to the model. The
 * measured change is the ratio of two runs made next to each other (the target without a draft
 * just before each speculative run), so that the load of a shared machine, which moves a step's
 * time by 2-3x over minutes, moves both. */
static void predicted_tpot_change(void **state)
{
    (void)state;
    const char *dir;
    LLAMACPP_OR_SKIP(dir);
    char target[600], q8[600], other[600];
    snprintf(target, sizeof target, "%s/target.gguf", tmp);
    snprintf(q8, sizeof q8, "%s/draft-q8.gguf", tmp);
    snprintf(other, sizeof other, "%s/draft-other.gguf", tmp);
    const char *seed1[] = { "--seed", "1", NULL }, *seed2[] = { "--seed", "2", NULL };
    llama_make_model(dir, "llama", "30M", NULL, target, seed1);
    llama_make_model(dir, "llama", "30M", "q8_0", q8, seed1);
    llama_make_model(dir, "llama", "30M", NULL, other, seed2);
    const char *drafts[2] = { q8, other }, *names[2] = { "q8", "other" };
    st_emu_llama_spec pred[2];
    double meas[2];
    for (int i = 0; i < 2; i++) {
        st_emu_llama_costs c = { .n_max = 8 };
        double pp_a;
        pass_costs(dir, target, "target", &pp_a, &c.tgt_b);
        c.tgt_row_s = c.tgt_b * row_share(target);
        bench_out one, four;
        bench_server_np(dir, target, NULL, "target", 4, &four);
        bench_server(dir, target, NULL, "target", &one);
        /* a sequence more in the step: its token's pass, a logits row, its sampling and streaming */
        c.tok_s = (four.srv_token_ms - one.srv_token_ms) / 3e3 - c.tgt_b - c.tgt_row_s;
        if (c.tok_s < 0)
            c.tok_s = 0;
        c.tgt_a = one.srv_token_ms / 1e3 - c.tgt_b - c.tok_s;
        c.tgt_graph_s = pp_a - c.tgt_a - c.tok_s;
        if (c.tgt_graph_s < 0)
            c.tgt_graph_s = 0;
        print_message("# target: a decode pass %.3f + %.3f n ms, a logits row %.3f ms, a graph build %.3f ms, a "
                      "token's sampling and streaming %.3f ms\n",
                      1e3 * c.tgt_a, 1e3 * c.tgt_b, 1e3 * c.tgt_row_s, 1e3 * c.tgt_graph_s, 1e3 * c.tok_s);
        assert_true(c.tgt_a > 0);
        model_costs(dir, drafts[i], names[i], c.tok_s, &c.dft_a, &c.dft_b, &c.dft_graph_s);
        /* the draft's top-k sampling over the same vocabulary, as the target's per-token work (its
         * streaming is small beside the pass over the vocabulary) */
        c.dft_sample_s = c.tok_s;
        bench_out plain, with;
        bench_server(dir, target, NULL, "target", &plain);
        bench_server(dir, target, drafts[i], names[i], &with);
        assert_int_equal(st_emu_spec_llamacpp(&c, with.tokens, with.drafted, with.accepted, &pred[i]), 0);
        meas[i] = with.tpot_ms / plain.tpot_ms;
        print_message("# draft %s: %.0f of %.0f accepted (%.1f%%), %.2f draft tokens and %.2f draft passes a step; "
                      "TPOT %.2f -> %.2f ms measured (x%.3f), %.2f -> %.2f ms predicted (x%.3f): %+.1f %%\n",
                      names[i], with.accepted, with.drafted, 100 * with.rate, pred[i].draft_per_step,
                      pred[i].draft_passes, plain.tpot_ms, with.tpot_ms, meas[i], 1e3 * pred[i].tpot_plain_s,
                      1e3 * pred[i].tpot_spec_s, pred[i].ratio, 100 * (pred[i].ratio / meas[i] - 1));
    }
    for (int i = 0; i < 2; i++)
        if (fabs(pred[i].ratio / meas[i] - 1) > 0.15)
            fail_msg("draft %s: the predicted TPOT change x%.3f is %+.1f %% off the measured x%.3f (15 %% allowed)",
                     names[i], pred[i].ratio, 100 * (pred[i].ratio / meas[i] - 1), meas[i]);
    /* the foreign draft, all of whose tokens are rejected, costs more than it saves, and more than
     * the draft the target accepts */
    assert_true(meas[1] > 1 && pred[1].ratio > 1);
    assert_true(meas[1] > meas[0] && pred[1].ratio > pred[0].ratio);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test_setup_teardown(quantized_and_foreign_drafts, setup, teardown),
        cmocka_unit_test_setup_teardown(predicted_tpot_change, setup, teardown),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
