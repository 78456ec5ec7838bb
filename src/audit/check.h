/* What a spec must pass beyond its syntax (audit/spec.h) before anything runs: the one
 * validation path of `servetune audit --check`, `audit` and `predict`, so that every spec
 * --check accepts runs, and audit and predict accept the same specs. It checks, with the
 * reason naming the spec and the key:
 *   - the synthetic workload can be built (the same function the sweep builds it with: lengths
 *     within what is supported, the shared prefix within the shortest prompt) and the warm-up
 *     with it; a trace can be read and holds at least the warm-up requests;
 *   - an endpoint's url parses (net/url.h);
 *   - each configuration's launch can be built (audit/spec.h st_spec_launch: no ${VAR} left on
 *     the command line, a valid --time-scale...), and for the emulator its flags pass the
 *     emulator's own parser and a GPU is named (--gpu, or SERVETUNE_EMULATE_GPU);
 *   - every ${VAR} is set and long enough to be redacted, the API key too (st_spec_secrets);
 *   - a rate run ends within ST_CHECK_MAX_RUN_S at the lowest rate;
 *   - a sustained spec's bounds leave room for a measured window (audit/sweep.h
 *     st_sweep_check_bounds).
 * Reads the environment and the trace file; starts nothing. */
#ifndef ST_AUDIT_CHECK_H
#define ST_AUDIT_CHECK_H
#include <stddef.h>

#include "audit/spec.h"
#include "core/buf.h"

/* The longest a rate run may be planned to last (requests / rate), in seconds. */
#define ST_CHECK_MAX_RUN_S 86400.0

/* 0, or -1 with "spec.yaml: key: what is wrong" in err. */
int st_spec_check(const st_spec *s, char *err, size_t errlen);

/* What a valid spec may still get wrong, as warnings (one line each, appended to out): with
 * starts_engine (an audit, which starts the engine here), its program missing from PATH; for an
 * engine the engine model stands for (emulator, vllm), each configuration's flags that the model
 * does not know and so ignores (on the emulator and in every prediction such a flag changes
 * nothing, so a misspelt one (--kv-cache-dtyp) silently measures the baseline again; real vLLM
 * would refuse it at startup), and a configuration whose --tensor-parallel-size is not
 * hardware.gpus_per_replica (the cost is priced for the latter). Returns the number of warnings. */
int st_spec_warnings(const st_spec *s, int starts_engine, st_buf *out);

#endif
