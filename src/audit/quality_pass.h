/* The quality pass of one configuration on its running engine (docs/quality.md): the spec's
 * quality.prompts prompts from the workload, each answered greedily with top-k log-probabilities
 * through the executor's post op; the baseline's answers are kept as the reference, every other
 * configuration's compared with them (audit/drift.h), free-running, and teacher-forced where the
 * engine scores a prompt (vLLM's prompt_logprobs). Before that, the tokenizers are compared: a probe
 * text through /tokenize must give the same ids as on the baseline. */
#ifndef ST_AUDIT_QUALITY_PASS_H
#define ST_AUDIT_QUALITY_PASS_H
#include <signal.h>

#include "audit/executor.h"
#include "audit/quality.h"

/* The baseline's answers (filled by the baseline's pass). Zero-initialise; st_quality_ref_free. */
typedef struct st_quality_ref {
    int have;        /* the baseline's pass ran and answered */
    st_qanswer *ans; /* per prompt */
    uint32_t n;
    uint32_t *probe; /* the probe text's ids on the baseline (NULL: no /tokenize) */
    size_t n_probe, cap_probe;
    int probe_checked; /* 1: the baseline's /tokenize answered */
} st_quality_ref;
void st_quality_ref_free(st_quality_ref *r);

/* The text every configuration's tokenizer must split the same way. */
#define ST_QUALITY_PROBE_TEXT "The quick brown fox jumps over the lazy dog; 12,345.67 units cost $8.90 each."

/* Runs the pass of configuration ci (0: the baseline, which fills ref) on x's running engine.
 * out is filled (status, figures, note in words) and judged against the spec's limits; log (may be
 * NULL) gets one line of what happened. 0, or 1 when interrupted (*stop). */
int st_quality_pass(st_executor *x, const st_spec *spec, int ci, st_quality_ref *ref, volatile sig_atomic_t *stop,
                    st_quality_result *out);

#endif
