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
    double cpu_s;        /* the server's main thread's CPU time over the run (srv_cpu_s) */
} bench_out;

/* The CPU time llama-server's main thread (its task loop, which runs every model pass, sampling
 * and speculation with -t 1) has had so far: the first field of /proc/PID/task/PID/schedstat, in
 * ns. Unlike the wall clock it leaves out the time the thread waited for a core, which on a
 * machine shared with other work is most of the noise; on an idle one the two are the same. */
static double srv_cpu_s(const llama_srv *s)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/schedstat", (int)s->p.pid, (int)s->p.pid);
    FILE *f = fopen(path, "r");
    unsigned long long ns = 0;
    int ok = f && fscanf(f, "%llu", &ns) == 1;
    if (f)
        fclose(f);
    if (!ok)
        fail_msg("%s: cannot read the server's CPU time", path);
    return (double)ns / 1e9;
}


#define SERVER_ARGS "-c", "1024", "-t", "1", "--temp", "0", "--alias", ALIAS
#define REQUESTS 8

/* Starts llama-server for `model` with `draft` (NULL: none) and `np` slots. */
static void srv_open(llama_srv *s, const char *dir, const char *model, const char *draft, int np, const char *name)
{
    char nps[16];
    snprintf(nps, sizeof nps, "%d", np);
    const char *with[] = { "-md", draft, "--spec-type", "draft-simple", "--spec-draft-n-max",
                           "8",   "-np", nps,           SERVER_ARGS,    NULL };
    const char *plain[] = { "-np", nps, SERVER_ARGS, NULL };
    if (llama_start(s, dir, model, tmp, draft ? with : plain, LLAMA_READY_S)) {
        llama_stop(s);
        fail_msg("llama-server (%s) did not become ready:\n%s", name, llama_log_tail(s));
    }
}

/* The bench against the running server s: REQUESTS requests of 32 prompt and 48 output tokens,
 * at most `conc` at a time (0: all sent at once, served as the server's slots allow); `draft`
 * says whether s speculates. */
static void bench_n(const llama_srv *s, const char *name, int draft, int conc, int nreq_, int say, bench_out *o)
{
    memset(o, 0, sizeof *o);
    char url[64], json[600], nreq[16], cs[16];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", s->port);
    snprintf(json, sizeof json, "%s/bench-%s.json", tmp, name);
    snprintf(nreq, sizeof nreq, "%d", nreq_);
    snprintf(cs, sizeof cs, "%d", conc);
    const char *b[] = { "bench", "--url",           url,  "--api", "completions", "--model", ALIAS, "--input-tokens",
                        "32",    "--output-tokens", "48", "-n",    nreq,          "--rate",  "inf", "--seed",
                        "5",     "--json",          json, "-q",    NULL,          NULL,      NULL };
    if (conc > 0) {
        b[19] = "--max-concurrency";
        b[20] = cs;
    }
    double cpu0 = srv_cpu_s(s);
    int rc = run_servetune(b, BENCH_LIMIT_S);
    o->cpu_s = srv_cpu_s(s) - cpu0;
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
    assert_int_equal(n, nreq_);
    o->tpot_ms /= (double)n;
    o->srv_token_ms = gen_n > 0 ? gen_ms / gen_n : NAN;
    o->drafted = (double)sum_d;
    o->accepted = (double)sum_a;
    json_t *sp = json_object_get(json_object_get(j, "summary"), "speculation");
    if (draft) {
        if (!json_is_object(sp))
            fail_msg("draft %s: no speculation block in the summary", name);
        assert_int_equal(json_integer_value(json_object_get(sp, "requests")), nreq_);
        assert_true(json_integer_value(json_object_get(sp, "draft_tokens")) > 0);
        assert_int_equal(json_integer_value(json_object_get(sp, "draft_tokens")), sum_d);
        assert_int_equal(json_integer_value(json_object_get(sp, "accepted_tokens")), sum_a);
        o->rate = json_real_value(json_object_get(sp, "acceptance_rate"));
        if (say)
            print_message("# draft %s: %.0f of %.0f draft tokens accepted (%.1f%%), TPOT %.2f ms\n", name, o->accepted,
                          o->drafted, 100 * o->rate, o->tpot_ms);
    } else if (say) {
        print_message("# %s without a draft, %s: TPOT %.2f ms (the server's %.3f ms a token)\n", name,
                      conc == 1 ? "one at a time" : "several at a time", o->tpot_ms, o->srv_token_ms);
    }
    json_decref(j);
}

static void bench_at(const llama_srv *s, const char *name, int draft, int conc, bench_out *o)
{
    bench_n(s, name, draft, conc, REQUESTS, 1, o);
}

/* Runs the bench against a llama-server of `model` with `draft` (NULL: none), one slot. */
static void bench_server(const char *dir, const char *model, const char *draft, const char *name, bench_out *o)
{
    llama_srv s;
    srv_open(&s, dir, model, draft, 1, name);
    bench_at(&s, name, draft != NULL, 0, o);
    llama_stop(&s);
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

#define PP_MAX 64

/* Prompt processing on the running llama-server s: three prompts of each of n = 2..16 tokens (a new
 * prompt each time, no prompt cache, one token generated), their (n, seconds of the server's main
 * thread's CPU: the request's handling, the pass, one sampling) appended to px, py (room for cap). */
static void pp_points(const llama_srv *s, const char *name, uint32_t *seed, double *px, double *py, int *m, int cap)
{
    /* the first two warm the server up after the other servers' runs (its weights out of the caches) */
    static const int sizes[] = { 16, 16, 2, 4, 6, 8, 10, 12, 16, 2, 4, 6, 8, 10, 12, 16, 2, 4, 6, 8, 10, 12, 16 };
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        char body[1024];
        int len = snprintf(body, sizeof body, "{\"prompt\":[");
        for (int t = 0; t < sizes[k]; t++) {
            *seed = *seed * 1103515245u + 12345u;
            len += snprintf(body + len, sizeof body - (size_t)len, "%s%u", t ? "," : "", 1000 + (*seed >> 8) % 30000);
        }
        snprintf(body + len, sizeof body - (size_t)len, "],\"n_predict\":1,\"cache_prompt\":false,\"temperature\":0}");
        http_res r;
        double cpu0 = srv_cpu_s(s);
        if (http_do(s->port, "POST", "/completion", body, NULL, 30000, &r) || r.status != 200)
            fail_msg("%s: /completion: status %d: %s", name, r.status, r.body.data ? r.body.data : "");
        double cpu = srv_cpu_s(s) - cpu0;
        json_t *j = json_loads(r.body.data, 0, NULL);
        http_res_free(&r);
        assert_non_null(j);
        double n = (double)json_integer_value(json_object_get(json_object_get(j, "timings"), "prompt_n"));
        json_decref(j);
        assert_true(n >= sizes[k] && cpu > 0);
        if (k < 2 || *m >= cap)
            continue;
        px[*m] = n;
        py[(*m)++] = cpu;
    }
}

/* A forward pass's cost a + b n from prompt processing's points: Theil-Sen, the median of the
 * pairwise slopes, then of the intercepts (a shared machine's stalls make a few points far slower;
 * least squares would follow them). */
static void pp_fit(const double *px, const double *py, int m, double *a, double *b)
{
    static double sl[PP_MAX * PP_MAX];
    assert_true(m <= PP_MAX);
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

/* The figures of one pass of one draft's comparison (measure_pass): prompt processing's points on
 * the three servers, and the runs. */
typedef struct spec_meas {
    double tx[PP_MAX], ty[PP_MAX], dx[PP_MAX], dy[PP_MAX], sx[PP_MAX], sy[PP_MAX];
    int tm, dm, sm;
    bench_out one, four, dft, with, again;
} spec_meas;

#define PASSES 5
#define PASS_REQUESTS 8 /* the runs without speculation: a few tenths of a second each */
#define SPEC_REQUESTS 4 /* the speculative run: the foreign draft's takes seconds */
#define PROMPT 32.0     /* the bench's prompt tokens */

/* The main thread's CPU per token of a run's decode phase: its CPU less each request's prompt
 * processing and handling (pp(PROMPT) by the fit a + b n of the same server's), over the tokens
 * after each request's first. */
static double decode_cpu(const bench_out *o, double nreq, double pp_a, double pp_b)
{
    return (o->cpu_s - nreq * (pp_a + pp_b * PROMPT)) / o->tokens;
}

/* The model's inputs from the runs without speculation, in the server's main thread's CPU time.
 * The target's decode one request at a time (T1: a graph reused, one sampling and one streamed
 * token a step) and 4 at a time in its 4 slots (T4 a step): each sequence more in the step costs a
 * token's pass, a logits row and its sampling and streaming, so tok_s = (T4 - T1) / 3 - b - row,
 * and T1 - b - tok_s is the decode pass's fixed cost; what prompt processing's fixed cost (a graph
 * built each time, one sampling, the request's handling) has beyond it is the graph build. The
 * draft's the same from its own decode and prompt processing, less the target's per-token work
 * (the same vocabulary and server), its sampling of a draft token (top-k 10 over that vocabulary)
 * taken as that per-token work. The target's T1 into *t1. */
static void costs_of(const spec_meas *m, const char *target, st_emu_llama_costs *c, double *t1)
{
    double pp_a, dpp_a;
    pp_fit(m->tx, m->ty, m->tm, &pp_a, &c->tgt_b);
    pp_fit(m->dx, m->dy, m->dm, &dpp_a, &c->dft_b);
    c->tgt_row_s = c->tgt_b * row_share(target);
    *t1 =
        (decode_cpu(&m->one, PASS_REQUESTS, pp_a, c->tgt_b) + decode_cpu(&m->again, PASS_REQUESTS, pp_a, c->tgt_b)) / 2;
    double t4 = 4 * decode_cpu(&m->four, PASS_REQUESTS, pp_a, c->tgt_b);
    c->tok_s = (t4 - *t1) / 3 - c->tgt_b - c->tgt_row_s;
    c->tok_s = c->tok_s > 0 ? c->tok_s : 0;
    c->tgt_a = *t1 - c->tgt_b - c->tok_s;
    c->tgt_graph_s = pp_a - c->tgt_a - c->tok_s;
    c->tgt_graph_s = c->tgt_graph_s > 0 ? c->tgt_graph_s : 0;
    c->dft_a = decode_cpu(&m->dft, PASS_REQUESTS, dpp_a, c->dft_b) - c->dft_b - c->tok_s;
    c->dft_a = c->dft_a > 0 ? c->dft_a : 0;
    c->dft_graph_s = dpp_a - c->dft_a - c->tok_s;
    c->dft_graph_s = c->dft_graph_s > 0 ? c->dft_graph_s : 0;
    c->dft_sample_s = c->tok_s;
    assert_true(c->tgt_a > 0);
}

/* One pass over the three servers (the target without speculation with 4 slots, the draft alone,
 * the target with the draft): prompt processing on each, decode and speculative decode, the
 * target's decode alone first and last, a few seconds in all. */
static void measure_pass(const llama_srv *ts, const llama_srv *ds, const llama_srv *ss, const char *name,
                         uint32_t *seed, spec_meas *m)
{
    memset(m, 0, sizeof *m);
    pp_points(ts, "target", seed, m->tx, m->ty, &m->tm, PP_MAX);
    pp_points(ds, name, seed, m->dx, m->dy, &m->dm, PP_MAX);
    pp_points(ss, name, seed, m->sx, m->sy, &m->sm, PP_MAX);
    bench_n(ts, "target", 0, 1, PASS_REQUESTS, 0, &m->one);
    bench_n(ts, "target", 0, 0, PASS_REQUESTS, 0, &m->four); /* all at once: 4 at a time in the 4 slots */
    bench_n(ds, name, 0, 1, PASS_REQUESTS, 0, &m->dft);
    bench_n(ss, name, 1, 1, SPEC_REQUESTS, 0, &m->with);
    bench_n(ts, "target", 0, 1, PASS_REQUESTS, 0, &m->again);
}

/* The engine model's llama.cpp step (emu/specstep.h) with llama.cpp's measured pass costs and the
 * measured acceptance, against the TPOT change each draft makes: within 15 % for both. The costs
 * come from the runs without speculation (costs_of); the speculative runs give only their draft
 * and accepted counts to the model; the measured change is the speculative server's TPOT over the
 * plain one's in the same pass (measure_pass). Of PASSES passes the median error counts: a pass
 * that another process's burst hit is one of the extremes. */
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
    double err[2][PASSES], meas[2][PASSES], pred[2][PASSES], acc[2] = { 0, 0 };
    static spec_meas m;
    for (int i = 0; i < 2; i++) {
        llama_srv ts, ds, ss;
        srv_open(&ts, dir, target, NULL, 4, "target");
        srv_open(&ds, dir, drafts[i], NULL, 1, names[i]);
        srv_open(&ss, dir, target, drafts[i], 1, names[i]);
        uint32_t seed = 12345;
        double drafted = 0;
        for (int p = -1; p < PASSES; p++) { /* pass -1 warms the servers up */
            measure_pass(&ts, &ds, &ss, names[i], &seed, &m);
            if (p < 0)
                continue;
            st_emu_llama_costs c = { .n_max = 8 };
            double t1, spa, spb;
            costs_of(&m, target, &c, &t1);
            /* the speculative server's prompt processing (the target's and the draft's) and handling */
            pp_fit(m.sx, m.sy, m.sm, &spa, &spb);
            double spec = decode_cpu(&m.with, SPEC_REQUESTS, spa, spb);
            st_emu_llama_spec q;
            assert_int_equal(st_emu_spec_llamacpp(&c, m.with.tokens, m.with.drafted, m.with.accepted, &q), 0);
            meas[i][p] = spec / t1;
            pred[i][p] = q.ratio;
            err[i][p] = q.ratio / meas[i][p] - 1;
            acc[i] += m.with.accepted;
            drafted += m.with.drafted;
            print_message("# %s pass %d (CPU ms a token): target %.3f alone, %.3f a step of 4 (a pass %.3f + %.3f n, "
                          "a logits row %.3f, a graph %.3f, a token's sampling and streaming %.3f); draft a pass "
                          "%.3f + %.3f n, a graph %.3f; %.0f of %.0f accepted, %.2f draft passes a step; TPOT %.3f "
                          "-> %.3f measured (x%.3f; the client's wall clock x%.3f), predicted x%.3f: %+.1f %%\n",
                          names[i], p + 1, 1e3 * t1, 1e3 * (c.tgt_a + 4 * (c.tgt_b + c.tok_s) + 3 * c.tgt_row_s),
                          1e3 * c.tgt_a, 1e3 * c.tgt_b, 1e3 * c.tgt_row_s, 1e3 * c.tgt_graph_s, 1e3 * c.tok_s,
                          1e3 * c.dft_a, 1e3 * c.dft_b, 1e3 * c.dft_graph_s, m.with.accepted, m.with.drafted,
                          q.draft_passes, 1e3 * t1, 1e3 * spec, meas[i][p],
                          m.with.tpot_ms / ((m.one.tpot_ms + m.again.tpot_ms) / 2), q.ratio, 100 * err[i][p]);
        }
        llama_stop(&ts);
        llama_stop(&ds);
        llama_stop(&ss);
        acc[i] = drafted > 0 ? acc[i] / drafted : 0;
    }
    for (int i = 0; i < 2; i++) {
        qsort(err[i], PASSES, sizeof err[i][0], cmp_double);
        qsort(meas[i], PASSES, sizeof meas[i][0], cmp_double);
        qsort(pred[i], PASSES, sizeof pred[i][0], cmp_double);
        double e = err[i][PASSES / 2];
        print_message("# draft %s: acceptance %.1f %%; TPOT change measured x%.3f, predicted x%.3f (medians of %d "
                      "passes); the prediction %+.1f %% off the measurement (the median pass)\n",
                      names[i], 100 * acc[i], meas[i][PASSES / 2], pred[i][PASSES / 2], PASSES, 100 * e);
        if (fabs(e) > 0.15)
            fail_msg("draft %s: the predicted TPOT change is %+.1f %% off the measured one (15 %% allowed)", names[i],
                     100 * e);
    }
    /* the foreign draft, all of whose tokens are rejected, costs more than it saves, and more than
     * the draft the target accepts */
    assert_true(meas[1][PASSES / 2] > 1 && pred[1][PASSES / 2] > 1);
    assert_true(meas[1][PASSES / 2] > meas[0][PASSES / 2] && pred[1][PASSES / 2] > pred[0][PASSES / 2]);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test_setup_teardown(quantized_and_foreign_drafts, setup, teardown),
        cmocka_unit_test_setup_teardown(predicted_tpot_change, setup, teardown),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
