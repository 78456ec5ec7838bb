/* Drift between two configurations' answers, from the top-k log-probabilities an engine reports
 * (docs/quality.md). Pure: no I/O; the accumulator allocates its arrays (st_drift_free).
 *
 * A position is one next-token distribution reported as its top-k tokens with their natural
 * log-probabilities. Two positions are compared only when both distributions were computed on the
 * same context (teacher-forced: the candidate scored the baseline's answer; free-running: the
 * answers' common prefix and the first position where they differ).
 *
 * KL(baseline || candidate) of one position is computed over a partition of the vocabulary: every
 * token in the baseline's top-k that the candidate's top-k lists too, each its own cell, plus one
 * cell for the rest (probability 1 - the listed ones, on each side). By the data-processing
 * inequality this is a lower bound of the full-vocabulary KL divergence; it equals it when the
 * listed tokens hold the mass. The baseline's mass left in the rest cell is kept (rest_base) so a
 * reader sees how much of the distribution the figure saw.
 *
 * Percentiles interpolate linearly between closest ranks (load/stats.h), as llama-perplexity does. */
#ifndef ST_AUDIT_DRIFT_H
#define ST_AUDIT_DRIFT_H
#include <stddef.h>
#include <stdint.h>

/* One next-token distribution. */
typedef struct st_lp_pos {
    int32_t token;     /* the token that follows at this position (the answer's token) */
    double token_logp; /* its log-probability in this distribution; NAN when not reported */
    uint32_t k;        /* listed tokens (0: the engine reported none) */
    const int32_t *ids;
    const double *logp; /* natural logs, any order */
} st_lp_pos;

/* One compared position. */
typedef struct st_drift_tok {
    double kld;       /* KL(baseline || candidate) over the partition above, nats, >= 0 */
    int same_top1;    /* the most probable listed token is the same on both sides */
    double dp;        /* p_candidate(token) - p_baseline(token) of the baseline's token; NAN when
                         the candidate's probability of it is unknown (not listed) */
    double rest_base; /* the baseline's probability outside the compared cells */
} st_drift_tok;

/* Compares one position. 0, or -1 when either side lists no token (k == 0). */
int st_drift_token(const st_lp_pos *base, const st_lp_pos *cand, st_drift_tok *out);

/* Adds positions and answers; then st_drift_summarize. Zero-initialise. */
typedef struct st_drift_acc {
    double *kld, *dp, *div;
    size_t n_kld, cap_kld, n_dp, cap_dp, n_div, cap_div;
    uint64_t same_top1;
    double rest_base_sum;
    uint64_t missing; /* positions skipped: a side reported no log-probabilities */
    uint32_t answers, exact;
} st_drift_acc;

/* Teacher-forced: base[i] and cand[i] are distributions at the same position of the same text
 * (n of them). 0, or -1 when out of memory. */
int st_drift_add_forced(st_drift_acc *a, const st_lp_pos *base, const st_lp_pos *cand, uint32_t n);
/* Free-running: one prompt's two greedy answers, base (nb tokens) and cand (nc tokens), each
 * position with the distribution its token was drawn from. Counts the answer (exact when the two
 * token sequences are equal), its first divergence (the first index where the tokens differ, or
 * the shorter length when one answer is a prefix of the other) and compares the positions up to
 * and including it (the only ones computed on the same context). 0, or -1 when out of memory. */
int st_drift_add_free(st_drift_acc *a, const st_lp_pos *base, uint32_t nb, const st_lp_pos *cand, uint32_t nc);

typedef struct st_drift_summary {
    uint64_t positions;                                  /* compared positions */
    uint64_t missing;                                    /* positions a side reported no log-probabilities for */
    double kld_mean, kld_p50, kld_p90, kld_p99, kld_max; /* nats; NAN with no position */
    double same_top1;                                    /* share 0..1 */
    uint64_t dp_n;                                       /* positions with a known delta-p */
    double dp_mean, dp_p01, dp_p50, dp_p99;              /* probability differences */
    double rest_base_mean;                               /* mean baseline probability outside the compared cells */
    uint32_t answers, exact;                             /* free-running answers compared, equal ones */
    double exact_match;                                  /* exact / answers; NAN with no answer */
    uint32_t diverged;                                   /* answers that differ */
    double div_mean, div_p50;                            /* first divergence position (tokens) over those that differ */
} st_drift_summary;

/* Fills out from a (its arrays are reordered). */
void st_drift_summarize(st_drift_acc *a, st_drift_summary *out);
void st_drift_free(st_drift_acc *a);

#endif
