/* A deterministic pseudo language model: the emulator's log-probabilities (docs/quality.md), so
 * that the quality pass is tested end to end without a real model. Pure, no state beyond its
 * parameters. Its figures are no evidence of any real model's quality.
 *
 * After a context (a 64-bit hash of its tokens) the next token is one of ST_PLM_CANDIDATES
 * candidates drawn from the context's hash; candidate j has the logit -ST_PLM_SLOPE * j plus, for a
 * perturbed model, noise x a standard normal drawn from (context, candidate, the perturbation's
 * salt). Tokens outside the candidates have probability 0. A weight format or KV cache type is a
 * perturbation: 16-bit weights none, 8-bit a little, 4-bit more (st_plm_noise), so configurations
 * of the same model differ as a quantized model differs from its original, deterministically. */
#ifndef ST_ENGINE_PSEUDOLM_H
#define ST_ENGINE_PSEUDOLM_H
#include <stdint.h>

#define ST_PLM_CANDIDATES 64
#define ST_PLM_SLOPE 0.5
/* Perturbations (logit standard deviations) of 8-bit and 4-bit weights and an 8-bit KV cache. */
#define ST_PLM_NOISE_8BIT 0.15
#define ST_PLM_NOISE_4BIT 0.6
#define ST_PLM_NOISE_KV8 0.1

typedef struct st_plm {
    uint32_t vocab; /* ids in [1, vocab) */
    double noise;   /* logit perturbation (0: the reference model) */
    uint64_t salt;  /* which perturbation */
} st_plm;

/* The perturbation of a weight format and a KV cache format, each "16" (none), "8" or "4" bits:
 * the noise (independent perturbations add in variance) and its salt. */
void st_plm_init(st_plm *m, uint32_t vocab, int weight_bits, int kv_bits);
/* The hash of a prompt, and of a context extended by one token. */
uint64_t st_plm_hash_ids(const uint32_t *ids, uint32_t n);
uint64_t st_plm_extend(uint64_t h, uint32_t token);
/* The k (<= ST_PLM_CANDIDATES) most probable next tokens after context h, most probable first:
 * ids and natural log-probabilities. */
void st_plm_next(const st_plm *m, uint64_t h, uint32_t k, uint32_t *ids, double *logp);

#endif
