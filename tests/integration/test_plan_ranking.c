/* The plan ranks what was measured as the measurements rank it. Among the published
 * measurements (bench/fidelity/measurements.json), points with the same model, workload and load
 * but another configuration (GPU, GPUs per replica, KV cache dtype) are alternatives a plan
 * chooses between: each is priced at the built-in list's lowest on-demand price of its GPU, and
 * its cost per output token, predicted by the engine model as the plan predicts it, must order
 * every pair the way the published throughput orders it. Pairs whose published costs are within
 * RANK_TIE of each other are ties (their order is the sources' noise) and are not counted. */
#include "harness.h"

#include <math.h>
#include <stdio.h>

#include "plan/prices.h"
#include "core/file.h"
#include "emu/catalog.h"
#include "fidelity/harness.h"

#define DATA "bench/fidelity/measurements.json"
#define RANK_TIE 0.10
/* Pairs ordered against the measurement today, at most (docs/plan.md, "Against published
 * measurements"): 2 of 6, both H100 vs A100 SXM on Qwen3-14B -- one has GPUStack's H100 point #5
 * (128-token prompts, 4 outputs: the lab's serving path is ~4x slower per request than any other
 * source, docs/fidelity.md), the other is ShareGPT, where the model's H100 / A100 speed ratio
 * (2.1x) is above the published one (1.7x) and the list prices put A100 SXM at half an H100's. A
 * change that orders more pairs against the measurements fails here. */
#define RANK_DISAGREE_MAX 2

/* The price list's key of a point's GPU: the catalog key that resolves to the same GPU. */
static const char *gpu_key(const char *gpu)
{
    st_emu_gpu a, b;
    char err[300];
    if (st_emu_gpu_find(gpu, &a, err, sizeof err))
        return NULL;
    const char *keys[32];
    int n = st_emu_gpu_keys(keys, 32);
    for (int i = 0; i < n; i++)
        if (!st_emu_gpu_find(keys[i], &b, err, sizeof err) && !strcmp(a.name, b.name))
            return keys[i];
    return NULL;
}

static int same_load(const st_fid_point *a, const st_fid_point *b)
{
    return !strcmp(a->model, b->model) && !strcmp(a->weights, b->weights) && a->dataset == b->dataset &&
           a->input_len == b->input_len && a->output_len == b->output_len && a->mode == b->mode &&
           a->num_prompts == b->num_prompts && a->clients == b->clients &&
           ((isinf(a->rate) && isinf(b->rate)) || a->rate == b->rate);
}

/* Published and predicted output tokens/s (req/s where the source gives no token rate). */
static double published(const st_fid_point *p) { return isfinite(p->out_tok_s) ? p->out_tok_s : p->req_s; }

static void measured_pairs_rank_as_measured(void **state)
{
    (void)state;
    char err[512];
    size_t len;
    char *text = st_read_file(DATA, 16u << 20, &len, err, sizeof err);
    if (!text)
        fail_msg("%s", err);
    st_fid_point *pts;
    uint32_t n;
    assert_int_equal(st_fid_parse(text, len, &pts, &n, err, sizeof err), 0);
    free(text);
    st_prices prices;
    assert_int_equal(st_prices_builtin(&prices, err, sizeof err), 0);
    double *cost_pub = calloc(n, sizeof *cost_pub), *cost_pred = calloc(n, sizeof *cost_pred);
    assert_non_null(cost_pub);
    assert_non_null(cost_pred);
    for (uint32_t i = 0; i < n; i++) {
        cost_pub[i] = cost_pred[i] = NAN;
        const char *k = gpu_key(pts[i].gpu);
        const st_price *pr = k ? st_prices_pick(&prices, k, ST_PRICE_ON_DEMAND, NULL) : NULL;
        double pub = published(&pts[i]);
        if (!pr || !isfinite(pub) || !(pub > 0))
            continue;
        st_emu_config c;
        st_fid_figures f;
        if (st_fid_config(&pts[i], &c, err, sizeof err) || st_fid_predict_in(pts, n, i, &c, &f, err, sizeof err) ||
            f.refused)
            continue;
        double pred = isfinite(pts[i].out_tok_s) ? f.out_tok_s : f.req_s;
        double gpu_h = pr->usd_per_gpu_hour * (pts[i].tp ? pts[i].tp : 1);
        cost_pub[i] = gpu_h / pub;
        cost_pred[i] = gpu_h / pred;
    }
    int pairs = 0, agree = 0, ties = 0, test_pairs = 0, test_agree = 0;
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = i + 1; j < n; j++) {
            if (!isfinite(cost_pub[i]) || !isfinite(cost_pub[j]) || !same_load(&pts[i], &pts[j]))
                continue;
            double gap = cost_pub[i] / cost_pub[j];
            if (fabs(log(gap)) < log(1 + RANK_TIE)) {
                ties++;
                continue;
            }
            int ok = (cost_pub[i] < cost_pub[j]) == (cost_pred[i] < cost_pred[j]);
            pairs++;
            agree += ok;
            int held_out = pts[i].split == ST_FID_TEST || pts[j].split == ST_FID_TEST;
            test_pairs += held_out;
            test_agree += held_out && ok;
            fprintf(stderr,
                    "# %s pair %s (%s x%u) vs %s (%s x%u): published %.3g vs %.3g $/tok-rate, predicted %.3g vs %.3g\n",
                    ok ? "agrees:" : "DISAGREES:", pts[i].id, pts[i].gpu, pts[i].tp, pts[j].id, pts[j].gpu, pts[j].tp,
                    cost_pub[i], cost_pub[j], cost_pred[i], cost_pred[j]);
        }
    fprintf(stderr, "# %d of %d pairs ordered as measured (%d of %d with a held-out point); %d ties\n", agree, pairs,
            test_agree, test_pairs, ties);
    assert_true(pairs >= 6);
    if (pairs - agree > RANK_DISAGREE_MAX)
        fail_msg("%d pairs ordered against the measurements (at most %d)", pairs - agree, RANK_DISAGREE_MAX);
    free(cost_pub);
    free(cost_pred);
    free(pts);
    st_prices_free(&prices);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(measured_pairs_rank_as_measured),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
