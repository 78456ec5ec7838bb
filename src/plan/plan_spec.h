/* Audit specs for the plan's candidates: the user's spec with its engine, hardware and
 * configurations replaced by the candidates', every other key (workload, SLO, rates, search,
 * timeouts, traffic, cluster) kept as written. The plan evaluates each candidate through such a
 * spec (so what it predicts is exactly what the written spec will measure), and
 * `servetune plan --write-spec` writes the best ones for a real audit.
 *
 * The engine becomes vLLM (`kind: vllm`): the emulator's own flags (--gpu, --time-scale, ...)
 * and the flags the plan sets (--max-num-seqs, --max-num-batched-tokens, --max-model-len,
 * --kv-cache-dtype, --tensor-parallel-size / -tp) leave the baseline; each configuration adds its
 * own. All candidates of one spec share its GPU and GPUs per replica (an audit runs on one kind
 * of machine). A speculating candidate adds --speculative-config, and the spec written gets a
 * speculation block with its acceptance (docs/plan.md "Speculative decoding"). No I/O: YAML text in, YAML text out (libyaml's emitter). */
#ifndef ST_PLAN_PLAN_SPEC_H
#define ST_PLAN_PLAN_SPEC_H
#include <stddef.h>

#include "plan/plan.h"
#include "core/buf.h"

/* A configuration name for c: "h100-tp2-fp8-kvfp8-seqs256-bt8192-len8192" (letters, digits, '-'). */
void st_plan_config_name(const st_plan_candidate *c, char *out, size_t n);

/* Writes the spec for cands[0..n) (same gpu and tp; cands[0] is the audit's baseline) from the
 * user's spec text (name for messages) into out. A comment header says where it came from.
 * 0, or -1 with err. */
int st_plan_spec_write(const char *base_name, const char *base_text, size_t base_len,
                       const st_plan_candidate *const *cands, int n, const char *header, st_buf *out, char *err,
                       size_t errlen);

/* The spec the engine model evaluates candidate c with: st_plan_spec_write's, with c's
 * speculation acceptance as the emulator's flags (--spec-acceptance, --spec-draft-share) in its
 * configuration instead of a speculation block (each variant its own method's). */
int st_plan_spec_write_model(const char *base_name, const char *base_text, size_t base_len, const st_plan_candidate *c,
                             st_buf *out, char *err, size_t errlen);

#endif
