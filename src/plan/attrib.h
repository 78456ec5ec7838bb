/* GPU cost apportioned to tenants (servetune trace cost, docs/cost-attribution.md).
 *
 * A log's requests are replayed on the engine model at their recorded times; each engine
 * step's duration is split over the sequences in it by their share of the step's work, as the
 * step-time model (emu/steptime.h) itself counts it: the step's binding roofline term (compute
 * or memory) is evaluated with and without each sequence, the difference is that sequence's
 * marginal work (its prefill tokens' FLOPs, its decode with the KV cache it reads), and what no
 * single sequence accounts for (the weight read, the per-step overheads) is split by scheduled
 * tokens. Time the engine is not stepping is idle, its own line. Beside it, the two flat
 * allocations gateways use: by tokens (input + output) and by request duration.
 *
 * A bill (RunPod billing records, or a CSV of time, amount) is then reconciled: per bucket,
 * the billed amount is split over the tenants' GPU seconds in that bucket and the idle rest,
 * in cents, by largest remainder, so the lines sum to the bill to the cent.
 *
 * No I/O: the caller reads the files and writes the outputs. */
#ifndef ST_PLAN_ATTRIB_H
#define ST_PLAN_ATTRIB_H
#include <stddef.h>
#include <stdint.h>

#include "emu/config.h"
#include "load/trace.h"

#define ST_ATTRIB_UNATTRIBUTED "unattributed"
#define ST_ATTRIB_IDLE "idle (unattributed)"
#define ST_ATTRIB_KEY_MAX 256u           /* bytes of one tenant name */
#define ST_ATTRIB_TENANTS_MAX 100000u    /* distinct tenants */
#define ST_ATTRIB_ROWS_MAX (1u << 24)    /* requests replayed */
#define ST_ATTRIB_HOURS_MAX (24u * 400u) /* hours a log may span */
#define ST_ATTRIB_BILL_ROWS_MAX 100000u  /* bill records */
#define ST_ATTRIB_BILL_MAX_BYTES ((size_t)64 << 20)
#define ST_ATTRIB_SESSION_TOKENS_MAX ((uint64_t)1 << 28) /* prompt ids of session turns held at once */

/* The tenant of one trace row under `by`: user, team, end_user, tag, feature, session, model,
 * or any other field (a JSON path into a LiteLLM row: metadata.project, ...). Writes it to buf
 * and returns 1, or 0 when the row does not carry it (buf ""). docs/cost-attribution.md says
 * where each one is looked for. */
int st_attrib_row_key(const st_trace_row *row, const char *by, char *buf, size_t cap);

typedef struct st_attrib_tenant {
    char *name;
    uint64_t requests, in_tokens, out_tokens;
    double duration_s; /* sum of request durations (the log's end - start, else the replay's) */
    double gpu_s;      /* engine seconds from the step split (model-based) */
    double share_model, share_tokens, share_duration; /* of the busy (attributed) time, 0..1 */
} st_attrib_tenant;

typedef struct st_attrib_req {
    double ts_s;  /* the row's time (epoch seconds, or as written) */
    double dur_s; /* end - start from the log, NAN when it has none */
    uint32_t in, out, tenant;
    uint64_t session; /* the log's session key (0: none): a session's turns share their prompt prefix */
} st_attrib_req;

typedef struct st_attrib {
    char by[64];
    st_attrib_tenant *t;
    uint32_t n_tenants;
    size_t cap_t;
    uint32_t *tix; /* open-addressing index of tenant names: slot -> tenant + 1 (0 empty) */
    size_t n_tix;
    st_attrib_req *req;
    uint32_t n_req;
    size_t cap_req;
    int truncated; /* set by the caller: only the log's first rows were read (said in the JSON) */
    /* after st_attrib_replay */
    uint32_t replicas;
    double t0_s;   /* the first request's time */
    double span_s; /* from the first arrival to the last step's end */
    double busy_s; /* engine seconds stepping (all replicas) */
    double idle_s; /* replicas x span - busy */
    uint64_t steps;
    int64_t hour0;    /* floor(t0 / 3600) */
    uint32_t n_hours; /* hours from hour0 the replay reaches */
    double *hour_gpu; /* n_hours x n_tenants engine seconds */
} st_attrib;

void st_attrib_init(st_attrib *a, const char *by);
void st_attrib_free(st_attrib *a);
/* Adds one row (a st_trace_row_cb: arg is the st_attrib). Rows need a timestamp. */
int st_attrib_row_cb(void *arg, const st_trace_row *row, char *err, size_t errlen);
/* Replays the rows on `replicas` engines of cfg (rows dealt round-robin by time, a session's
 * turns all to one replica) and fills the
 * model-based and flat splits. A session's turns (rows with a session id) get prompts that are
 * prefixes of one token stream per session, so a later turn reuses the earlier turns' prompt in
 * the prefix cache as the log implies (the lengths are the whole prompts, history included); other
 * rows get prompts of their own. 0, or -1 with err (the engine refuses to start, out of memory). */
int st_attrib_replay(st_attrib *a, const st_emu_config *cfg, uint32_t replicas, char *err, size_t errlen);

/* The model-based split of one step (exposed for tests): weights out[k] >= 0 for the n
 * sequences of `work`, summing to dur_s. cfg is resolved (st_emu_memory_plan). */
struct st_emu_seq_work;
void st_attrib_split_step(const st_emu_config *cfg, const struct st_emu_seq_work *work, uint32_t n, double dur_s,
                          double *out);

/* ---- bills ---- */
typedef struct st_bill_bucket {
    double t_s;      /* the bucket's start (epoch seconds) */
    int64_t cents;   /* billed amount */
    double billed_s; /* timeBilledMs / 1000 summed (0 when not given) */
    char id[128];    /* endpointId / podId (joined when several) */
    char gpu[64];    /* gpuTypeId */
} st_bill_bucket;

typedef struct st_bill {
    st_bill_bucket *b;
    uint32_t n;
    double width_s; /* 3600 or 86400 */
} st_bill;

/* Parses RunPod billing records (a JSON array, or {"data": [...]}: amount, time, timeBilledMs,
 * endpointId / podId, gpuTypeId) or a CSV with columns time and amount. Records of the same time
 * are one bucket. width_s: 3600, 86400, or 0 to infer from the times (a day when every gap is a
 * whole number of days, else an hour). 0, or -1 with "name:line: reason" / "name: reason". */
int st_bill_parse(const char *name, const char *text, size_t len, double width_s, st_bill *out, char *err,
                  size_t errlen);
void st_bill_free(st_bill *b);

/* One line of a reconciled bill: a tenant (or idle: tenant == n_tenants) in a bucket. */
typedef struct st_recon_line {
    uint32_t bucket, tenant;
    int64_t cents;
    double gpu_s;
} st_recon_line;

typedef struct st_recon {
    st_recon_line *v;
    uint32_t n;
    int64_t total_cents;
    int64_t idle_cents;
    uint32_t uncovered; /* buckets the log does not reach (all idle) */
} st_recon;

/* Splits each bucket's amount over the tenants' engine seconds in it and the idle rest (the
 * billed seconds when the bill gives them, else replicas x the bucket's width), to the cent. */
int st_attrib_reconcile(const st_attrib *a, const st_bill *bill, st_recon *out, char *err, size_t errlen);
void st_recon_free(st_recon *r);

/* Splits total cents over weights (>= 0) by largest remainder: out sums to total exactly. Ties
 * go to the lower index. All-zero weights: everything to the last index. */
void st_attrib_cents(int64_t total, const double *w, uint32_t n, int64_t *out);

/* Outputs (malloc'd text; NULL when out of memory). The name of tenant n_tenants is
 * ST_ATTRIB_IDLE. usd_per_engine_hour: the price of one replica (GPUs x $/GPU-hour). */
char *st_attrib_csv(const st_attrib *a, double usd_per_engine_hour);
/* JSON servetune.cost/1: the totals, tenants[], hours[] (each hour's cost per tenant, when
 * tenants x hours <= 200000), and with a bill, bill.lines[]. */
char *st_attrib_json(const st_attrib *a, double usd_per_engine_hour, const st_bill *bill, const st_recon *r);
char *st_recon_csv(const st_attrib *a, const st_bill *bill, const st_recon *r);
/* Product-analytics batch events ({"batch": [...]}, PostHog's batch format without its key):
 * one event per tenant and bucket, stamped with the bucket's time. distinct_id is "FIELD:TENANT"
 * ("FIELD:idle (unattributed)" for idle), or with raw_ids the tenant's name as it is (to join
 * events that already use those ids; idle keeps the prefixed form). */
char *st_recon_events(const st_attrib *a, const st_bill *bill, const st_recon *r, const char *event_name, int raw_ids);

#endif
