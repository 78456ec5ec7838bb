#include "plan/attrib.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/buf.h"
#include "core/csv.h"
#include "core/json.h"
#include "core/util.h"
#include "core/rng.h"
#include "emu/engine.h"
#include "emu/sim.h"
#include "emu/steptime.h"

#define ATTRIB_OUT_MAX ((size_t)256 << 20)
#define ATTRIB_HOUR_CELLS_MAX ((size_t)200000) /* tenant x hour cells written to JSON */

/* ---- tenant keys ---- */

/* A JSON value as text: a string unescaped, a number or boolean as written, an array of strings
 * joined with '+'. 1 when non-empty. */
static int val_text(const st_json_val *v, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (v->type == ST_JSON_STRING) {
        st_json_str(v, buf, cap, NULL);
    } else if (v->type == ST_JSON_NUMBER || v->type == ST_JSON_TRUE || v->type == ST_JSON_FALSE) {
        size_t n = v->len < cap - 1 ? v->len : cap - 1;
        memcpy(buf, v->p, n);
        buf[n] = '\0';
    } else if (v->type == ST_JSON_ARRAY) {
        st_json_iter it;
        st_json_val k, e;
        size_t used = 0;
        if (st_json_iter_init(&it, v) < 0)
            return 0;
        while (st_json_iter_next(&it, &k, &e) == 1) {
            char one[ST_ATTRIB_KEY_MAX];
            if (!val_text(&e, one, sizeof one))
                continue;
            int w = snprintf(buf + used, cap - used, "%s%s", used ? "+" : "", one);
            if (w < 0 || (size_t)w >= cap - used)
                break;
            used += (size_t)w;
        }
    }
    return buf[0] != '\0';
}

static int json_key(const st_trace_row *row, const char *path, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (!row->json)
        return 0;
    st_json_val obj = { ST_JSON_OBJECT, row->json, row->json_len }, v;
    if (st_json_get(&obj, path, &v) != 0)
        return 0;
    return val_text(&v, buf, cap);
}

/* A request tag "feature:X" (or "feature=X"): X. */
static int feature_tag(const st_trace_row *row, char *buf, size_t cap)
{
    if (!row->json)
        return 0;
    st_json_val obj = { ST_JSON_OBJECT, row->json, row->json_len }, tags, k, e;
    if (st_json_get(&obj, "request_tags", &tags) != 0 || tags.type != ST_JSON_ARRAY)
        return 0;
    st_json_iter it;
    if (st_json_iter_init(&it, &tags) < 0)
        return 0;
    while (st_json_iter_next(&it, &k, &e) == 1) {
        char t[ST_ATTRIB_KEY_MAX];
        if (e.type != ST_JSON_STRING || st_json_str(&e, t, sizeof t, NULL) != 0)
            continue;
        if (!strncmp(t, "feature:", 8) || !strncmp(t, "feature=", 8)) {
            snprintf(buf, cap, "%s", t + 8);
            return buf[0] != '\0';
        }
    }
    return 0;
}

int st_attrib_row_key(const st_trace_row *row, const char *by, char *buf, size_t cap)
{
    if (!cap)
        return 0;
    buf[0] = '\0';
    if (!strcmp(by, "user"))
        return json_key(row, "user", buf, cap) || json_key(row, "metadata.user_api_key_user_id", buf, cap);
    if (!strcmp(by, "team"))
        return json_key(row, "team_id", buf, cap) || json_key(row, "metadata.user_api_key_team_id", buf, cap);
    if (!strcmp(by, "tag"))
        return json_key(row, "request_tags", buf, cap);
    if (!strcmp(by, "feature"))
        return json_key(row, "metadata.feature", buf, cap) || feature_tag(row, buf, cap);
    if (!strcmp(by, "session")) {
        if (row->session_id && *row->session_id)
            snprintf(buf, cap, "%s", row->session_id);
        return buf[0] != '\0';
    }
    if (!strcmp(by, "model")) {
        if (row->model && *row->model)
            snprintf(buf, cap, "%s", row->model);
        return buf[0] != '\0';
    }
    return json_key(row, by, buf, cap);
}

/* ---- rows ---- */

void st_attrib_init(st_attrib *a, const char *by)
{
    memset(a, 0, sizeof *a);
    snprintf(a->by, sizeof a->by, "%s", by);
}

void st_attrib_free(st_attrib *a)
{
    for (uint32_t i = 0; i < a->n_tenants; i++)
        free(a->t[i].name);
    free(a->t);
    free(a->tix);
    free(a->req);
    free(a->hour_gpu);
    memset(a, 0, sizeof *a);
}

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

/* Rebuilds the index with room for twice the tenants (load at most one half). */
static int tix_rebuild(st_attrib *a, size_t slots)
{
    uint32_t *t = calloc(slots, sizeof *t);
    if (!t)
        return -1;
    for (uint32_t i = 0; i < a->n_tenants; i++) {
        size_t k = name_hash(a->t[i].name) & (slots - 1);
        while (t[k])
            k = (k + 1) & (slots - 1);
        t[k] = i + 1;
    }
    free(a->tix);
    a->tix = t;
    a->n_tix = slots;
    return 0;
}

static int tenant_index(st_attrib *a, const char *name, uint32_t *out)
{
    if (!a->tix && tix_rebuild(a, 64) < 0)
        return -1;
    size_t k = name_hash(name) & (a->n_tix - 1);
    for (; a->tix[k]; k = (k + 1) & (a->n_tix - 1))
        if (!strcmp(a->t[a->tix[k] - 1].name, name)) {
            *out = a->tix[k] - 1;
            return 0;
        }
    if (a->n_tenants >= ST_ATTRIB_TENANTS_MAX)
        return -1;
    if (st_grow((void **)&a->t, &a->cap_t, a->n_tenants + 1u, sizeof *a->t, 16) < 0)
        return -1;
    st_attrib_tenant *t = &a->t[a->n_tenants];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    if (!t->name)
        return -1;
    *out = a->n_tenants++;
    if ((size_t)a->n_tenants * 2 > a->n_tix)
        return tix_rebuild(a, a->n_tix * 2);
    a->tix[k] = *out + 1;
    return 0;
}

int st_attrib_row_cb(void *arg, const st_trace_row *row, char *err, size_t errlen)
{
    st_attrib *a = arg;
    if (!row->has_ts) {
        snprintf(err, errlen, "the log has no timestamps: a cost split needs each request's time");
        return -1;
    }
    if (a->n_req >= ST_ATTRIB_ROWS_MAX) {
        snprintf(err, errlen, "more than %u requests (use --trace-window)", ST_ATTRIB_ROWS_MAX);
        return -1;
    }
    char key[ST_ATTRIB_KEY_MAX];
    if (!st_attrib_row_key(row, a->by, key, sizeof key))
        snprintf(key, sizeof key, "%s", ST_ATTRIB_UNATTRIBUTED);
    st_text_sanitize(key, 0);
    uint32_t ti;
    if (tenant_index(a, key, &ti) < 0 ||
        st_grow((void **)&a->req, &a->cap_req, a->n_req + 1u, sizeof *a->req, 1024) < 0) {
        snprintf(err, errlen, a->n_tenants >= ST_ATTRIB_TENANTS_MAX ? "more than 100000 tenants" : "out of memory");
        return -1;
    }
    double dur = isfinite(row->end_s) && row->end_s >= row->ts_s ? row->end_s - row->ts_s : NAN;
    a->req[a->n_req++] = (st_attrib_req){ row->ts_s, dur, row->input_len, row->output_len, ti, row->session };
    return 0;
}

/* ---- the step split ---- */

static void batch_add(st_emu_batch *b, const st_emu_seq_work *w, double sign)
{
    double nn = w->new_tokens, prior = w->context;
    b->tokens = (uint32_t)((double)b->tokens + sign * nn);
    b->decode_tokens = (uint32_t)((double)b->decode_tokens + sign * w->decode);
    b->seqs = (uint32_t)((double)b->seqs + sign);
    b->sampled = (uint32_t)((double)b->sampled + sign * w->sampled);
    b->attn_pairs += sign * (nn * prior + nn * (nn + 1) / 2.0);
    b->kv_read_tokens += sign * prior;
}

void st_attrib_split_step(const st_emu_config *cfg, const st_emu_seq_work *work, uint32_t n, double dur_s, double *out)
{
    if (n == 0)
        return;
    st_emu_batch b = { 0 };
    for (uint32_t k = 0; k < n; k++)
        batch_add(&b, &work[k], 1);
    st_emu_step_breakdown full;
    st_emu_step_seconds(cfg, &b, &full);
    int compute_bound = full.compute_s >= full.memory_s;
    double x = compute_bound ? full.compute_s : full.memory_s, sum = 0;
    for (uint32_t k = 0; k < n; k++) {
        st_emu_batch o = b;
        batch_add(&o, &work[k], -1);
        double m = 0;
        if (o.seqs > 0) {
            st_emu_step_breakdown bd;
            st_emu_step_seconds(cfg, &o, &bd);
            m = x - (compute_bound ? bd.compute_s : bd.memory_s);
        } else {
            m = x; /* alone in the step: all of it */
        }
        out[k] = m > 0 ? m : 0;
        sum += out[k];
    }
    double shared = dur_s - sum;
    if (shared < 0) { /* the marginals overlap: scale them to the step */
        for (uint32_t k = 0; k < n; k++)
            out[k] = sum > 0 ? out[k] * dur_s / sum : dur_s / n;
        return;
    }
    for (uint32_t k = 0; k < n; k++)
        out[k] += b.tokens ? shared * work[k].new_tokens / b.tokens : shared / n;
}

typedef struct replay_ctx {
    st_attrib *a;
    const st_emu_config *cfg;
    const uint32_t *map; /* item index -> request index */
    double start_s;      /* the run's start (epoch) */
    double *w;
    size_t cap_w;
    double end_s; /* the last step's end (epoch) */
    int oom;
} replay_ctx;

static void hour_add(st_attrib *a, double t, double dur, uint32_t tenant, double amount)
{
    /* spread amount over [t, t + dur) by the hours it covers */
    double end = t + dur;
    while (amount > 0) {
        int64_t h = (int64_t)floor(t / 3600.0);
        double hend = (double)(h + 1) * 3600.0;
        double part = end <= hend || dur <= 0 ? amount : amount * (hend - t) / (end - t);
        int64_t idx = h - a->hour0;
        if (idx >= 0 && idx < (int64_t)a->n_hours)
            a->hour_gpu[(size_t)idx * a->n_tenants + tenant] += part;
        amount -= part;
        if (end <= hend || dur <= 0)
            break;
        t = hend;
    }
}

static void on_step(void *arg, st_ns start, const st_emu_step_result *res, const uint32_t *item)
{
    replay_ctx *c = arg;
    st_attrib *a = c->a;
    if (st_grow((void **)&c->w, &c->cap_w, res->seqs ? res->seqs : 1, sizeof *c->w, 64) < 0) {
        c->oom = 1;
        return;
    }
    double dur = (double)res->duration / 1e9, t = c->start_s + (double)start / 1e9;
    st_attrib_split_step(c->cfg, res->work, res->seqs, dur, c->w);
    for (uint32_t k = 0; k < res->seqs; k++) {
        uint32_t tn = a->req[c->map[item[k]]].tenant;
        a->t[tn].gpu_s += c->w[k];
        hour_add(a, t, dur, tn, c->w[k]);
    }
    a->busy_s += dur;
    a->steps++;
    if (t + dur > c->end_s)
        c->end_s = t + dur;
}

/* Session prompt ids: in [1000, 32000), clear of every supported tokenizer's special tokens
 * (as docs/trace-format.md's generated prompts). */
#define ATTRIB_ID_LO 1000u
#define ATTRIB_ID_SPAN 31000u

static int cmp_req_time(const void *x, const void *y)
{
    const st_attrib_req *p = x, *q = y;
    return p->ts_s < q->ts_s ? -1 : p->ts_s > q->ts_s;
}

/* The requests sorted by time, the hours they span (bounded) and the figures of a previous replay reset. */
static int replay_hours(st_attrib *a, char *err, size_t errlen)
{
    qsort(a->req, a->n_req, sizeof *a->req, cmp_req_time);
    a->t0_s = a->req[0].ts_s;
    double last = a->req[a->n_req - 1].ts_s;
    a->hour0 = (int64_t)floor(a->t0_s / 3600.0);
    /* room for the replay to run past the last arrival: a day, then checked */
    double hours = floor(last / 3600.0) - (double)a->hour0 + 25;
    if (hours > ST_ATTRIB_HOURS_MAX) {
        snprintf(err, errlen, "the log spans more than %u hours (use --trace-window)", ST_ATTRIB_HOURS_MAX - 25);
        return -1;
    }
    a->n_hours = (uint32_t)hours;
    free(a->hour_gpu); /* a second replay starts over */
    a->busy_s = 0;
    a->steps = 0;
    for (uint32_t i = 0; i < a->n_tenants; i++) {
        st_attrib_tenant *t = &a->t[i];
        t->gpu_s = t->duration_s = 0;
        t->requests = t->in_tokens = t->out_tokens = 0;
    }
    a->hour_gpu = calloc((size_t)a->n_hours * a->n_tenants, sizeof *a->hour_gpu);
    return 0;
}

/* What the replay works with: the engine model, the callback's context and the scratch arrays. */
typedef struct replay_run {
    st_attrib *a;
    uint32_t replicas;
    st_emu_config cfg;
    replay_ctx c;
    st_emu_sim_item *items; /* one replica's requests */
    st_record *rec;         /* and their records */
    uint32_t *map;          /* request -> replica, then a replica's item -> request */
    uint32_t *sids;         /* the session prompts' ids */
    uint32_t *byrep;        /* the requests replica by replica, in time order */
    uint32_t *rstart;       /* where each replica's requests start in byrep */
    double *sim_dur;        /* each request's duration in the replay */
} replay_run;

/* Each request's replica: a session stays on one (session affinity), other rows go round-robin;
 * byrep lists the requests replica by replica, in time order (a counting sort). */
static void replay_assign(replay_run *p)
{
    const st_attrib *a = p->a;
    uint32_t *map = p->map, *rstart = p->rstart, replicas = p->replicas;
    for (uint32_t i = 0; i < a->n_req; i++) {
        const st_attrib_req *q = &a->req[i];
        map[i] = q->session ? (uint32_t)(st_mix64(q->session) % replicas) : i % replicas;
        rstart[map[i] + 1]++;
    }
    for (uint32_t r = 0; r < replicas; r++)
        rstart[r + 1] += rstart[r];
    for (uint32_t i = 0; i < a->n_req; i++) /* rstart[r] moves to replica r's end */
        p->byrep[rstart[map[i]]++] = i;
    for (uint32_t r = replicas; r > 0; r--) /* and back to its start */
        rstart[r] = rstart[r - 1];
    rstart[0] = 0;
}

/* Replica r's requests as items (map: item -> request); *stoks: their sessions' prompt tokens. */
static uint32_t replica_items(replay_run *p, uint32_t r, uint64_t *stoks)
{
    const st_attrib *a = p->a;
    uint32_t n = 0;
    *stoks = 0;
    for (uint32_t k = p->rstart[r]; k < p->rstart[r + 1]; k++) {
        uint32_t i = p->byrep[k];
        const st_attrib_req *q = &a->req[i];
        p->items[n] = (st_emu_sim_item){ .arrival = (st_ns)((q->ts_s - a->t0_s) * 1e9),
                                         .input_len = q->in ? q->in : 1,
                                         .output_len = q->out ? q->out : 1 };
        if (q->session)
            *stoks += p->items[n].input_len;
        p->map[n++] = i;
    }
    return n;
}

/* The prompt ids of the replica's session requests: token t of a session's stream, from its key. */
static int replica_session_ids(replay_run *p, uint32_t n, uint64_t stoks, char *err, size_t errlen)
{
    if (stoks > ST_ATTRIB_SESSION_TOKENS_MAX) {
        snprintf(err, errlen, "the sessions' prompts hold more than 2^28 tokens (use --trace-window)");
        return -1;
    }
    free(p->sids);
    p->sids = stoks ? malloc(stoks * sizeof *p->sids) : NULL;
    if (stoks && !p->sids) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (uint32_t k = 0, used = 0; k < n; k++) {
        const st_attrib_req *q = &p->a->req[p->map[k]];
        if (!q->session)
            continue;
        uint32_t *ids = p->sids + used;
        for (uint32_t t = 0; t < p->items[k].input_len; t++) /* token t of the session's stream */
            ids[t] = ATTRIB_ID_LO + (uint32_t)(st_mix64(q->session * 0x9E3779B97F4A7C15ULL + t) % ATTRIB_ID_SPAN);
        p->items[k].input_ids = ids;
        used += p->items[k].input_len;
    }
    return 0;
}

/* Replica r's requests run on the engine model: the steps split by on_step, each request's duration kept. */
static int replay_replica(replay_run *p, uint32_t r, char *err, size_t errlen)
{
    uint64_t stoks;
    uint32_t n = replica_items(p, r, &stoks);
    if (!n)
        return 0;
    if (replica_session_ids(p, n, stoks, err, errlen) < 0)
        return -1;
    for (uint32_t i = 0; i < n; i++)
        st_record_init(&p->rec[i], i);
    st_emu_session *S = NULL;
    if (st_emu_session_new(&p->cfg, &S, NULL, err, errlen) < 0)
        return -1;
    st_emu_run_opts o = { .on_step = on_step, .step_arg = &p->c };
    st_emu_sim_stats ss;
    int x = st_emu_session_run(S, p->items, n, &o, p->rec, &ss, NULL, err, errlen);
    st_emu_session_free(S);
    if (x < 0 || p->c.oom) {
        if (p->c.oom)
            snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (uint32_t i = 0; i < n; i++)
        if (p->rec[i].end > 0 && p->rec[i].sent >= 0)
            p->sim_dur[p->map[i]] = (double)(p->rec[i].end - p->rec[i].sent) / 1e9;
    for (uint32_t i = 0; i < n; i++)
        st_record_free(&p->rec[i]);
    return 0;
}

/* The span, the idle time and each tenant's counts and shares (model time, tokens, duration). */
static void replay_shares(st_attrib *a, const replay_run *p)
{
    a->span_s = p->c.end_s - a->t0_s;
    a->idle_s = p->replicas * a->span_s - a->busy_s;
    if (a->idle_s < 0)
        a->idle_s = 0;
    double tok = 0, dur = 0, gpu = 0;
    for (uint32_t i = 0; i < a->n_req; i++) {
        const st_attrib_req *q = &a->req[i];
        st_attrib_tenant *t = &a->t[q->tenant];
        double d = isfinite(q->dur_s) ? q->dur_s : p->sim_dur[i];
        t->requests++;
        t->in_tokens += q->in;
        t->out_tokens += q->out;
        t->duration_s += d;
        tok += (double)q->in + q->out;
        dur += d;
    }
    for (uint32_t i = 0; i < a->n_tenants; i++)
        gpu += a->t[i].gpu_s;
    for (uint32_t i = 0; i < a->n_tenants; i++) {
        st_attrib_tenant *t = &a->t[i];
        t->share_model = gpu > 0 ? t->gpu_s / gpu : 0;
        t->share_tokens = tok > 0 ? ((double)t->in_tokens + t->out_tokens) / tok : 0;
        t->share_duration = dur > 0 ? t->duration_s / dur : 0;
    }
}

int st_attrib_replay(st_attrib *a, const st_emu_config *cfg_in, uint32_t replicas, char *err, size_t errlen)
{
    if (a->n_req == 0) {
        snprintf(err, errlen, "no requests");
        return -1;
    }
    if (replicas == 0)
        replicas = 1;
    a->replicas = replicas;
    replay_run p = { .a = a, .replicas = replicas, .cfg = *cfg_in };
    st_emu_memory mem;
    if (st_emu_memory_plan(&p.cfg, &mem, err, errlen) < 0 || replay_hours(a, err, errlen) < 0)
        return -1;
    int rc = -1;
    p.items = calloc(a->n_req, sizeof *p.items);
    p.rec = calloc(a->n_req, sizeof *p.rec);
    p.map = calloc(a->n_req, sizeof *p.map);
    p.c = (replay_ctx){ .a = a, .cfg = &p.cfg, .map = p.map, .start_s = a->t0_s, .end_s = a->t0_s };
    p.sim_dur = calloc(a->n_req, sizeof *p.sim_dur);
    p.byrep = malloc((size_t)a->n_req * sizeof *p.byrep);
    p.rstart = calloc((size_t)replicas + 1, sizeof *p.rstart);
    if (!a->hour_gpu || !p.items || !p.rec || !p.map || !p.sim_dur || !p.byrep || !p.rstart) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    replay_assign(&p);
    for (uint32_t r = 0; r < replicas; r++)
        if (replay_replica(&p, r, err, errlen) < 0)
            goto out;
    replay_shares(a, &p);
    rc = 0;
out:
    free(p.items);
    free(p.rec);
    free(p.map);
    free(p.sids);
    free(p.byrep);
    free(p.rstart);
    free(p.sim_dur);
    free(p.c.w);
    return rc;
}

/* ---- bills ---- */

void st_bill_free(st_bill *b)
{
    free(b->b);
    memset(b, 0, sizeof *b);
}

static int bill_add(st_bill *b, size_t *cap, double t, int64_t cents, double billed_s, const char *id, const char *gpu)
{
    for (uint32_t i = 0; i < b->n; i++) /* records of one time are one bucket */
        if (b->b[i].t_s == t) {
            st_bill_bucket *k = &b->b[i];
            k->cents += cents;
            k->billed_s += billed_s;
            if (id && *id && !strstr(k->id, id)) {
                size_t l = strlen(k->id);
                snprintf(k->id + l, sizeof k->id - l, "%s%s", l ? "+" : "", id);
            }
            return 0;
        }
    if (b->n >= ST_ATTRIB_BILL_ROWS_MAX || st_grow((void **)&b->b, cap, b->n + 1u, sizeof *b->b, 64) < 0)
        return -1;
    st_bill_bucket *k = &b->b[b->n++];
    memset(k, 0, sizeof *k);
    k->t_s = t;
    k->cents = cents;
    k->billed_s = billed_s;
    snprintf(k->id, sizeof k->id, "%s", id ? id : "");
    snprintf(k->gpu, sizeof k->gpu, "%s", gpu ? gpu : "");
    return 0;
}

static int cmp_bucket(const void *x, const void *y)
{
    const st_bill_bucket *p = x, *q = y;
    return p->t_s < q->t_s ? -1 : p->t_s > q->t_s;
}

static int parse_time_text(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end != s && *end == '\0' && isfinite(v)) {
        *out = v > 1e11 ? v / 1000.0 : v; /* epoch milliseconds */
        return 0;
    }
    if (strlen(s) == 10 && s[4] == '-' && s[7] == '-') { /* a date: its midnight (UTC) */
        char d[32];
        snprintf(d, sizeof d, "%sT00:00:00Z", s);
        return st_trace_parse_datetime(d, strlen(d), out);
    }
    return st_trace_parse_datetime(s, strlen(s), out);
}

static int amount_cents(double v, int64_t *out)
{
    if (!isfinite(v) || v < 0 || v > 1e13)
        return -1;
    *out = llround(v * 100.0);
    return 0;
}

static int bill_json(const char *name, const char *text, size_t len, st_bill *out, size_t *cap, char *err,
                     size_t errlen)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, 0, &je);
    if (!root) {
        snprintf(err, errlen, "%s:%d: %s", name, je.line, je.text);
        return -1;
    }
    json_t *arr = json_is_array(root) ? root : json_object_get(root, "data");
    int rc = 0;
    if (!json_is_array(arr)) {
        snprintf(err, errlen, "%s: expected an array of billing records (or {\"data\": [...]})", name);
        rc = -1;
    }
    size_t i;
    json_t *row;
    json_array_foreach(rc == 0 ? arr : NULL, i, row)
    {
        if (!json_is_object(row)) {
            snprintf(err, errlen, "%s: record %zu: expected an object", name, i + 1);
            rc = -1;
            break;
        }
        json_t *am = json_object_get(row, "amount"), *tm = json_object_get(row, "time");
        json_t *ms = json_object_get(row, "timeBilledMs");
        const char *id = json_string_value(json_object_get(row, "endpointId"));
        if (!id)
            id = json_string_value(json_object_get(row, "podId"));
        const char *gpu = json_string_value(json_object_get(row, "gpuTypeId"));
        double t;
        int64_t cents;
        double amv = json_is_number(am) ? json_number_value(am) : NAN;
        if (json_is_string(am)) { /* "2.69": some API versions send decimals as strings */
            char *end;
            const char *sv = json_string_value(am);
            amv = strtod(sv, &end);
            if (end == sv || *end)
                amv = NAN;
        }
        if (amount_cents(amv, &cents) < 0) {
            snprintf(err, errlen, "%s: record %zu: amount must be a number >= 0", name, i + 1);
            rc = -1;
            break;
        }
        if (json_is_number(tm)) {
            t = json_number_value(tm);
            if (t > 1e11)
                t /= 1000.0;
        } else if (!json_is_string(tm) || parse_time_text(json_string_value(tm), &t) < 0) {
            snprintf(err, errlen, "%s: record %zu: time must be a date and time (or epoch seconds)", name, i + 1);
            rc = -1;
            break;
        }
        double billed = json_is_number(ms) ? json_number_value(ms) / 1000.0 : 0;
        if (billed < 0 || !isfinite(billed)) {
            snprintf(err, errlen, "%s: record %zu: timeBilledMs must be >= 0", name, i + 1);
            rc = -1;
            break;
        }
        if (bill_add(out, cap, t, cents, billed, id, gpu) < 0) {
            snprintf(err, errlen, "%s: more than %u records, or out of memory", name, ST_ATTRIB_BILL_ROWS_MAX);
            rc = -1;
            break;
        }
    }
    json_decref(root);
    return rc;
}

static int bill_csv(const char *name, const char *text, size_t len, st_bill *out, size_t *cap, char *err, size_t errlen)
{
    st_csv c;
    st_csv_init(&c, text, len);
    char e[200];
    int rc = 0, it = -1, ia = -1, ib = -1, ii = -1;
    int x = st_csv_next(&c, e, sizeof e);
    if (x <= 0) {
        snprintf(err, errlen, "%s: %s", name, x < 0 ? e : "empty");
        st_csv_free(&c);
        return -1;
    }
    it = st_csv_find(&c, "time");
    ia = st_csv_find(&c, "amount");
    ib = st_csv_find(&c, "timeBilledMs");
    ii = st_csv_find(&c, "endpointId");
    if (it < 0 || ia < 0) {
        snprintf(err, errlen, "%s:1: expected a header with the columns time and amount", name);
        st_csv_free(&c);
        return -1;
    }
    while ((x = st_csv_next(&c, e, sizeof e)) == 1) {
        if (c.n == 1 && c.len[0] == 0)
            continue;
        if (it >= c.n || ia >= c.n) {
            snprintf(err, errlen, "%s:%u: expected %d columns", name, c.rec_line, (it > ia ? it : ia) + 1);
            rc = -1;
            break;
        }
        double t, am;
        int64_t cents;
        char *end;
        if (parse_time_text(c.field[it], &t) < 0) {
            snprintf(err, errlen, "%s:%u: time is not a date and time", name, c.rec_line);
            rc = -1;
            break;
        }
        am = strtod(c.field[ia], &end);
        if (end == c.field[ia] || *end || amount_cents(am, &cents) < 0) {
            snprintf(err, errlen, "%s:%u: amount must be a number >= 0", name, c.rec_line);
            rc = -1;
            break;
        }
        double billed = ib >= 0 && ib < c.n ? strtod(c.field[ib], NULL) / 1000.0 : 0;
        if (bill_add(out, cap, t, cents, billed > 0 ? billed : 0, ii >= 0 && ii < c.n ? c.field[ii] : NULL, NULL) < 0) {
            snprintf(err, errlen, "%s: more than %u records, or out of memory", name, ST_ATTRIB_BILL_ROWS_MAX);
            rc = -1;
            break;
        }
    }
    if (x < 0) {
        snprintf(err, errlen, "%s: %s", name, e);
        rc = -1;
    }
    st_csv_free(&c);
    return rc;
}

int st_bill_parse(const char *name, const char *text, size_t len, double width_s, st_bill *out, char *err,
                  size_t errlen)
{
    memset(out, 0, sizeof *out);
    size_t cap = 0, i = 0;
    while (i < len && (text[i] == ' ' || text[i] == '\n' || text[i] == '\r' || text[i] == '\t'))
        i++;
    int rc = i < len && (text[i] == '[' || text[i] == '{') ? bill_json(name, text, len, out, &cap, err, errlen)
                                                           : bill_csv(name, text, len, out, &cap, err, errlen);
    if (rc == 0 && out->n == 0) {
        snprintf(err, errlen, "%s: no billing records", name);
        rc = -1;
    }
    if (rc < 0) {
        st_bill_free(out);
        return -1;
    }
    qsort(out->b, out->n, sizeof *out->b, cmp_bucket);
    if (width_s <= 0) {
        width_s = 3600;
        int days = 1;
        for (uint32_t k = 0; k < out->n; k++)
            if (fmod(out->b[k].t_s, 86400.0) != 0)
                days = 0;
        for (uint32_t k = 1; k < out->n; k++)
            if (fmod(out->b[k].t_s - out->b[k - 1].t_s, 86400.0) != 0)
                days = 0;
        if (days && out->n > 1)
            width_s = 86400;
    }
    out->width_s = width_s;
    return 0;
}

/* ---- reconciliation ---- */

typedef struct rem {
    double r;
    uint32_t i;
} rem;

static int cmp_rem(const void *x, const void *y)
{
    const rem *p = x, *q = y;
    if (p->r != q->r)
        return p->r > q->r ? -1 : 1;
    return p->i < q->i ? -1 : p->i > q->i; /* ties: the lower index first */
}

void st_attrib_cents(int64_t total, const double *w, uint32_t n, int64_t *out)
{
    if (n == 0)
        return;
    double sum = 0;
    for (uint32_t i = 0; i < n; i++)
        sum += w[i] > 0 ? w[i] : 0;
    for (uint32_t i = 0; i < n; i++)
        out[i] = 0;
    if (sum <= 0) {
        out[n - 1] = total;
        return;
    }
    rem *r = malloc((size_t)n * sizeof *r);
    int64_t given = 0;
    for (uint32_t i = 0; i < n; i++) {
        double q = w[i] > 0 ? (double)total * (w[i] / sum) : 0;
        out[i] = (int64_t)floor(q);
        given += out[i];
        if (r)
            r[i] = (rem){ q - (double)out[i], i };
    }
    if (r)
        qsort(r, n, sizeof *r, cmp_rem);
    /* the rest, one cent each, to the largest remainders (lower index first on ties) */
    for (uint32_t k = 0; given < total; k = (k + 1) % n, given++)
        out[r ? r[k].i : k]++;
    for (uint32_t k = 0; given > total; k = (k + 1) % n) /* floating error only */
        if (out[k] > 0) {
            out[k]--;
            given--;
        }
    free(r);
}

void st_recon_free(st_recon *r)
{
    free(r->v);
    memset(r, 0, sizeof *r);
}

int st_attrib_reconcile(const st_attrib *a, const st_bill *bill, st_recon *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    uint32_t nt = a->n_tenants + 1; /* + idle */
    double *w = calloc(nt, sizeof *w);
    int64_t *c = calloc(nt, sizeof *c);
    out->v = calloc((size_t)bill->n * nt, sizeof *out->v);
    if (!w || !c || !out->v) {
        free(w);
        free(c);
        st_recon_free(out);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (uint32_t j = 0; j < bill->n; j++) {
        const st_bill_bucket *b = &bill->b[j];
        double busy = 0;
        memset(w, 0, nt * sizeof *w);
        /* the tenants' engine seconds in [t, t + width): whole hours, or a part of one */
        int64_t h_lo = (int64_t)floor(b->t_s / 3600.0) - a->hour0;
        int64_t h_hi = (int64_t)ceil((b->t_s + bill->width_s) / 3600.0) - a->hour0;
        if (h_lo < 0)
            h_lo = 0;
        if (h_hi > (int64_t)a->n_hours)
            h_hi = a->n_hours;
        for (int64_t h = h_lo; h < h_hi; h++) {
            double hs = (double)(a->hour0 + (int64_t)h) * 3600.0, he = hs + 3600.0;
            double lo = hs > b->t_s ? hs : b->t_s, hi = he < b->t_s + bill->width_s ? he : b->t_s + bill->width_s;
            if (hi <= lo)
                continue;
            double f = (hi - lo) / 3600.0;
            for (uint32_t i = 0; i < a->n_tenants; i++) {
                double g = a->hour_gpu[(size_t)h * a->n_tenants + i] * f;
                w[i] += g;
                busy += g;
            }
        }
        double capacity = b->billed_s > 0 ? b->billed_s : (a->replicas ? a->replicas : 1) * bill->width_s;
        w[a->n_tenants] = capacity > busy ? capacity - busy : 0;
        if (busy <= 0)
            out->uncovered++;
        st_attrib_cents(b->cents, w, nt, c);
        for (uint32_t i = 0; i < nt; i++) {
            if (c[i] == 0 && w[i] <= 0)
                continue;
            out->v[out->n++] = (st_recon_line){ j, i, c[i], w[i] };
            out->total_cents += c[i];
            if (i == a->n_tenants)
                out->idle_cents += c[i];
        }
    }
    free(w);
    free(c);
    return 0;
}

/* ---- outputs ---- */

static const char *tname(const st_attrib *a, uint32_t i) { return i < a->n_tenants ? a->t[i].name : ST_ATTRIB_IDLE; }

static void iso_time(double t, char *buf, size_t cap)
{
    time_t s = (time_t)floor(t);
    struct tm tm;
    if (!gmtime_r(&s, &tm) || strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(buf, cap, "%.0f", t);
}

static char *buf_take(st_buf *b)
{
    if (st_buf_error(b) || !b->data) {
        st_buf_free(b);
        return NULL;
    }
    return b->data;
}

char *st_attrib_csv(const st_attrib *a, double usd_h)
{
    st_buf b;
    st_buf_init(&b, ATTRIB_OUT_MAX);
    st_buf_printf(&b, "tenant,requests,input_tokens,output_tokens,gpu_seconds,share_model,share_tokens,"
                      "share_duration,usd_model,usd_tokens,usd_duration\n");
    double busy_usd = a->busy_s / 3600.0 * usd_h;
    for (uint32_t i = 0; i <= a->n_tenants; i++) {
        st_csv_put_text(&b, tname(a, i));
        if (i < a->n_tenants) {
            const st_attrib_tenant *t = &a->t[i];
            st_buf_printf(&b, ",%llu,%llu,%llu,%.3f,%.6f,%.6f,%.6f,%.4f,%.4f,%.4f\n", (unsigned long long)t->requests,
                          (unsigned long long)t->in_tokens, (unsigned long long)t->out_tokens, t->gpu_s, t->share_model,
                          t->share_tokens, t->share_duration, t->gpu_s / 3600.0 * usd_h, t->share_tokens * busy_usd,
                          t->share_duration * busy_usd);
        } else {
            double u = a->idle_s / 3600.0 * usd_h;
            st_buf_printf(&b, ",0,0,0,%.3f,,,,%.4f,%.4f,%.4f\n", a->idle_s, u, u, u);
        }
    }
    return buf_take(&b);
}

char *st_recon_csv(const st_attrib *a, const st_bill *bill, const st_recon *r)
{
    st_buf b;
    st_buf_init(&b, ATTRIB_OUT_MAX);
    st_buf_printf(&b, "bucket_start,bucket_seconds,tenant,amount_usd,gpu_seconds\n");
    for (uint32_t k = 0; k < r->n; k++) {
        const st_recon_line *l = &r->v[k];
        char ts[40];
        iso_time(bill->b[l->bucket].t_s, ts, sizeof ts);
        st_buf_printf(&b, "%s,%.0f,", ts, bill->width_s);
        st_csv_put_text(&b, tname(a, l->tenant));
        st_buf_printf(&b, ",%s%lld.%02lld,%.3f\n", l->cents < 0 ? "-" : "", llabs(l->cents) / 100,
                      llabs(l->cents) % 100, l->gpu_s);
    }
    return buf_take(&b);
}

static json_t *cents_json(int64_t c) { return json_real((double)c / 100.0); }

char *st_attrib_json(const st_attrib *a, double usd_h, const st_bill *bill, const st_recon *r)
{
    json_t *j = json_object(), *ts = json_array();
    if (!j || !ts) {
        json_decref(j);
        json_decref(ts);
        return NULL;
    }
    double busy_usd = a->busy_s / 3600.0 * usd_h;
    json_object_set_new(j, "schema", json_string("servetune.cost/1"));
    json_object_set_new(j, "by", json_string(a->by));
    json_object_set_new(j, "requests", json_integer(a->n_req));
    json_object_set_new(j, "first_rows_only", json_boolean(a->truncated));
    json_object_set_new(j, "replicas", json_integer(a->replicas));
    json_object_set_new(j, "span_s", json_real(a->span_s));
    json_object_set_new(j, "busy_s", json_real(a->busy_s));
    json_object_set_new(j, "idle_s", json_real(a->idle_s));
    json_object_set_new(j, "steps", json_integer((json_int_t)a->steps));
    json_object_set_new(j, "usd_per_replica_hour", json_real(usd_h));
    json_object_set_new(j, "usd_total", json_real((a->busy_s + a->idle_s) / 3600.0 * usd_h));
    json_object_set_new(j, "usd_idle", json_real(a->idle_s / 3600.0 * usd_h));
    for (uint32_t i = 0; i < a->n_tenants; i++) {
        const st_attrib_tenant *t = &a->t[i];
        json_t *o = json_object();
        json_object_set_new(o, "tenant", json_string(t->name));
        json_object_set_new(o, "requests", json_integer((json_int_t)t->requests));
        json_object_set_new(o, "input_tokens", json_integer((json_int_t)t->in_tokens));
        json_object_set_new(o, "output_tokens", json_integer((json_int_t)t->out_tokens));
        json_object_set_new(o, "gpu_s", json_real(t->gpu_s));
        json_object_set_new(o, "share_model", json_real(t->share_model));
        json_object_set_new(o, "share_tokens", json_real(t->share_tokens));
        json_object_set_new(o, "share_duration", json_real(t->share_duration));
        json_object_set_new(o, "usd_model", json_real(t->gpu_s / 3600.0 * usd_h));
        json_object_set_new(o, "usd_tokens", json_real(t->share_tokens * busy_usd));
        json_object_set_new(o, "usd_duration", json_real(t->share_duration * busy_usd));
        json_array_append_new(ts, o);
    }
    json_object_set_new(j, "tenants", ts);
    /* the cost per tenant per hour of the replay (the hours it reaches) */
    uint32_t last_h = 0;
    for (uint32_t h = 0; h < a->n_hours; h++)
        for (uint32_t i = 0; i < a->n_tenants; i++)
            if (a->hour_gpu[(size_t)h * a->n_tenants + i] > 0)
                last_h = h + 1;
    if ((size_t)last_h * a->n_tenants <= ATTRIB_HOUR_CELLS_MAX) {
        json_t *hours = json_array();
        for (uint32_t h = 0; h < last_h; h++) {
            char tbuf[40];
            iso_time((double)(a->hour0 + (int64_t)h) * 3600.0, tbuf, sizeof tbuf);
            json_t *o = json_object(), *u = json_object();
            double busy = 0;
            for (uint32_t i = 0; i < a->n_tenants; i++) {
                double g = a->hour_gpu[(size_t)h * a->n_tenants + i];
                busy += g;
                if (g > 0)
                    json_object_set_new(u, a->t[i].name, json_real(g / 3600.0 * usd_h));
            }
            json_object_set_new(o, "start", json_string(tbuf));
            json_object_set_new(o, "busy_s", json_real(busy));
            json_object_set_new(o, "usd", u);
            json_array_append_new(hours, o);
        }
        json_object_set_new(j, "hours", hours);
    }
    if (bill && r) {
        json_t *bj = json_object(), *lines = json_array();
        json_object_set_new(bj, "bucket_s", json_real(bill->width_s));
        json_object_set_new(bj, "buckets", json_integer(bill->n));
        json_object_set_new(bj, "uncovered_buckets", json_integer(r->uncovered));
        json_object_set_new(bj, "total_usd", cents_json(r->total_cents));
        json_object_set_new(bj, "idle_usd", cents_json(r->idle_cents));
        for (uint32_t k = 0; k < r->n; k++) {
            const st_recon_line *l = &r->v[k];
            char tbuf[40];
            iso_time(bill->b[l->bucket].t_s, tbuf, sizeof tbuf);
            json_t *o = json_object();
            json_object_set_new(o, "bucket_start", json_string(tbuf));
            json_object_set_new(o, "tenant", json_string(tname(a, l->tenant)));
            json_object_set_new(o, "idle", json_boolean(l->tenant == a->n_tenants));
            json_object_set_new(o, "cents", json_integer(l->cents));
            json_object_set_new(o, "gpu_s", json_real(l->gpu_s));
            json_array_append_new(lines, o);
        }
        json_object_set_new(bj, "lines", lines);
        json_object_set_new(j, "bill", bj);
    }
    char *s = json_dumps(j, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    json_decref(j);
    return s;
}

char *st_recon_events(const st_attrib *a, const st_bill *bill, const st_recon *r, const char *event_name, int raw_ids)
{
    json_t *j = json_object(), *batch = json_array();
    if (!j || !batch) {
        json_decref(j);
        json_decref(batch);
        return NULL;
    }
    for (uint32_t k = 0; k < r->n; k++) {
        const st_recon_line *l = &r->v[k];
        const st_bill_bucket *b = &bill->b[l->bucket];
        char tbuf[40], did[ST_ATTRIB_KEY_MAX + 16];
        iso_time(b->t_s, tbuf, sizeof tbuf);
        if (raw_ids && l->tenant < a->n_tenants)
            snprintf(did, sizeof did, "%s", tname(a, l->tenant));
        else
            snprintf(did, sizeof did, "%s:%s", a->by, tname(a, l->tenant));
        json_t *e = json_object(), *p = json_object();
        json_object_set_new(e, "event", json_string(event_name));
        json_object_set_new(e, "timestamp", json_string(tbuf)); /* the bucket's time, never now */
        json_object_set_new(p, "distinct_id", json_string(did));
        json_object_set_new(p, "tenant_field", json_string(a->by));
        json_object_set_new(p, "tenant", json_string(tname(a, l->tenant)));
        json_object_set_new(p, "idle", json_boolean(l->tenant == a->n_tenants));
        json_object_set_new(p, "cost_usd", cents_json(l->cents));
        json_object_set_new(p, "gpu_seconds", json_real(l->gpu_s));
        json_object_set_new(p, "bucket_seconds", json_real(bill->width_s));
        if (b->id[0])
            json_object_set_new(p, "endpoint_id", json_string(b->id));
        if (b->gpu[0])
            json_object_set_new(p, "gpu_type_id", json_string(b->gpu));
        json_object_set_new(e, "properties", p);
        json_array_append_new(batch, e);
    }
    json_object_set_new(j, "batch", batch);
    char *s = json_dumps(j, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    json_decref(j);
    return s;
}
