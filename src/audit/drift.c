/* Drift between two configurations' top-k log-probabilities (audit/drift.h). */
#include "audit/drift.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "load/stats.h"

/* A probability below which a rest cell counts as empty (rounding of the listed log-probs). */
#define DRIFT_REST_EPS 1e-9
/* The floor of the candidate's rest cell when the baseline's is not empty: the candidate listed
 * more than all of its mass (rounding), so its rest is taken as this instead of zero. */
#define DRIFT_Q_FLOOR 1e-12

static double clamp01(double x) { return x < 0 ? 0 : x > 1 ? 1 : x; }

/* Index of id in p's list, or -1. */
static int find_id(const st_lp_pos *p, int32_t id)
{
    for (uint32_t i = 0; i < p->k; i++)
        if (p->ids[i] == id)
            return (int)i;
    return -1;
}

static int32_t top1(const st_lp_pos *p)
{
    uint32_t best = 0;
    for (uint32_t i = 1; i < p->k; i++)
        if (p->logp[i] > p->logp[best])
            best = i;
    return p->ids[best];
}

/* The probability p gives token t: its own token_logp when t is its token, else from its list;
 * NAN when unknown. */
static double prob_of(const st_lp_pos *p, int32_t t)
{
    if (t == p->token && isfinite(p->token_logp))
        return exp(p->token_logp);
    int i = find_id(p, t);
    return i < 0 ? NAN : exp(p->logp[i]);
}

int st_drift_token(const st_lp_pos *base, const st_lp_pos *cand, st_drift_tok *out)
{
    if (base->k == 0 || cand->k == 0)
        return -1;
    double kl = 0, sum_p = 0, sum_q = 0;
    for (uint32_t i = 0; i < base->k; i++) {
        int j = find_id(cand, base->ids[i]);
        if (j < 0)
            continue;
        double p = exp(base->logp[i]), q = exp(cand->logp[j]);
        sum_p += p;
        sum_q += q;
        if (p > 0)
            kl += p * (base->logp[i] - cand->logp[j]);
    }
    double rp = clamp01(1 - sum_p), rq = clamp01(1 - sum_q);
    if (rp > DRIFT_REST_EPS)
        kl += rp * log(rp / (rq > DRIFT_Q_FLOOR ? rq : DRIFT_Q_FLOOR));
    out->kld = kl > 0 ? kl : 0; /* rounding of the listed figures can make a tiny negative sum */
    out->same_top1 = top1(base) == top1(cand);
    double pb = prob_of(base, base->token), pc = prob_of(cand, base->token);
    out->dp = isnan(pb) || isnan(pc) ? NAN : pc - pb;
    out->rest_base = rp;
    return 0;
}

static int push(double **arr, size_t *n, size_t *cap, double v)
{
    if (st_grow((void **)arr, cap, *n + 1, sizeof **arr, 0))
        return -1;
    (*arr)[(*n)++] = v;
    return 0;
}

static int add_pos(st_drift_acc *a, const st_lp_pos *b, const st_lp_pos *c)
{
    st_drift_tok t;
    if (st_drift_token(b, c, &t)) {
        a->missing++;
        return 0;
    }
    if (push(&a->kld, &a->n_kld, &a->cap_kld, t.kld))
        return -1;
    if (!isnan(t.dp) && push(&a->dp, &a->n_dp, &a->cap_dp, t.dp))
        return -1;
    a->same_top1 += (uint64_t)t.same_top1;
    a->rest_base_sum += t.rest_base;
    return 0;
}

int st_drift_add_forced(st_drift_acc *a, const st_lp_pos *base, const st_lp_pos *cand, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (add_pos(a, &base[i], &cand[i]))
            return -1;
    return 0;
}

int st_drift_add_free(st_drift_acc *a, const st_lp_pos *base, uint32_t nb, const st_lp_pos *cand, uint32_t nc)
{
    uint32_t m = nb < nc ? nb : nc, d = 0;
    while (d < m && base[d].token == cand[d].token)
        d++;
    a->answers++;
    if (d == m && nb == nc) {
        a->exact++;
    } else if (push(&a->div, &a->n_div, &a->cap_div, (double)d)) {
        return -1;
    }
    /* positions 0..d share their context (d itself: the first token drawn differently) */
    uint32_t last = d < m ? d : m == 0 ? 0 : m - 1;
    for (uint32_t i = 0; m > 0 && i <= last; i++)
        if (add_pos(a, &base[i], &cand[i]))
            return -1;
    return 0;
}

/* Sorts v[0..n) (n > 0) and returns its mean. */
static double sort_mean(double *v, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += v[i];
    qsort(v, n, sizeof *v, st_cmp_double);
    return s / (double)n;
}

void st_drift_summarize(st_drift_acc *a, st_drift_summary *out)
{
    memset(out, 0, sizeof *out);
    out->positions = a->n_kld;
    out->missing = a->missing;
    out->kld_mean = out->kld_p50 = out->kld_p90 = out->kld_p99 = out->kld_max = NAN;
    out->same_top1 = out->rest_base_mean = NAN;
    out->dp_mean = out->dp_p01 = out->dp_p50 = out->dp_p99 = NAN;
    out->exact_match = out->div_mean = out->div_p50 = NAN;
    if (a->n_kld > 0) {
        uint32_t n = (uint32_t)a->n_kld;
        out->kld_mean = sort_mean(a->kld, n);
        out->kld_p50 = st_percentile_sorted(a->kld, n, 50);
        out->kld_p90 = st_percentile_sorted(a->kld, n, 90);
        out->kld_p99 = st_percentile_sorted(a->kld, n, 99);
        out->kld_max = a->kld[n - 1];
        out->same_top1 = (double)a->same_top1 / (double)n;
        out->rest_base_mean = a->rest_base_sum / (double)n;
    }
    if (a->n_dp > 0) {
        uint32_t n = (uint32_t)a->n_dp;
        out->dp_n = n;
        out->dp_mean = sort_mean(a->dp, n);
        out->dp_p01 = st_percentile_sorted(a->dp, n, 1);
        out->dp_p50 = st_percentile_sorted(a->dp, n, 50);
        out->dp_p99 = st_percentile_sorted(a->dp, n, 99);
    }
    out->answers = a->answers;
    out->exact = a->exact;
    if (a->answers > 0)
        out->exact_match = (double)a->exact / (double)a->answers;
    out->diverged = (uint32_t)a->n_div;
    if (a->n_div > 0) {
        out->div_mean = sort_mean(a->div, a->n_div);
        out->div_p50 = st_percentile_sorted(a->div, (uint32_t)a->n_div, 50);
    }
}

void st_drift_free(st_drift_acc *a)
{
    free(a->kld);
    free(a->dp);
    free(a->div);
    memset(a, 0, sizeof *a);
}
