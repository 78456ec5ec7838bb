/* A rate run's figures, computed from its per-request records only (load/stats.h), so that
 * every number in a report can be recomputed from the stored records: counts, delivered
 * req/s and output tok/s (first send .. last completion), the steady-state ("sustained")
 * throughput, latency percentiles, and the value of each SLO term. Pure. */
#ifndef ST_AUDIT_FIGURES_H
#define ST_AUDIT_FIGURES_H
#include <stdint.h>

#include "audit/capacity.h"
#include "audit/spec.h"
#include "audit/store.h"
#include "load/record.h"

/* Fills the figures of row (counts, throughputs, percentiles in ms, SLO term values) and f
 * (for the verdict) from records[0..n) (warm-up records are ignored). planned: the requests
 * the run was meant to measure. 0, or -1 when out of memory. */
int st_audit_figures(const st_audit_slo *slo, const st_record *recs, uint32_t n, uint32_t planned, st_run_row *row,
                     st_rate_figures *f);

/* Multiplies every time of the records by k (an emulator's time scale: wall -> emulated). */
void st_audit_scale_records(st_record *recs, uint32_t n, double k);

/* Early-stop counts at time `now` (ns from the run's start, same clock as the records): for each
 * SLO term, the requests already known to exceed it (TTFT: first token later than the limit, or
 * none yet and waiting longer than the limit; E2E likewise; TPOT/ITL: from completed requests
 * and, for TPOT, a lower bound from tokens so far), and the requests that already failed.
 * time_scale converts the record clock to the SLO's clock. closed: a closed loop, whose requests are
 * due from their send (one still waiting for a client's slot is not judged yet). */
void st_audit_breaches(const st_audit_slo *slo, const st_record *recs, uint32_t n, st_ns now, double time_scale,
                       int closed, uint32_t *breaches, uint32_t *failed);

/* After an early stop: for each SLO term, the percentile over the requests due by the time the
 * run stopped, counting a request that had no first token yet as having one at the stop (so the
 * figures are lower bounds of what the full run would have shown). ITL terms: NAN. due gets the
 * number of such requests. 0, or -1 when out of memory. */
int st_audit_lower_bounds(const st_audit_slo *slo, const st_record *recs, uint32_t n, double *value_ms, uint32_t *due);

#endif
