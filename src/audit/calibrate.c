/* servetune calibrate: measured runs -> the engine model's constants (calibrate.h). */
#include "audit/calibrate.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "audit/executor.h"
#include "audit/spec.h"
#include "audit/store.h"
#include "core/util.h"
#include "emu/fit.h"
#include "emu/steptime.h"
#include "load/stats.h"

/* A constant is identified when a 25 % change moves some predicted figure by at least 2 %,
 * and not in the same way (|cosine| of the two change vectors >= 0.98) as one chosen before. */
#define CAL_PROBE_FACTOR 1.25
#define CAL_MIN_EFFECT 0.02
#define CAL_MAX_COSINE 0.98
#define CAL_MIN_REQUESTS 10
#define CAL_SWEEPS 3
/* A weak prior: each fitted constant pays CAL_PRIOR x log(value / default)^2 per measured
 * figure, so that a constant the runs barely constrain stays near its default instead of
 * drifting to whatever absorbs noise (a maximum a posteriori fit). */
#define CAL_PRIOR 0.002

const char *st_cal_fig_name(int f)
{
    static const char *n[ST_CAL_NFIG] = { "throughput", "ttft_p50", "ttft_p95", "tpot_p50", "tpot_p95" };
    return f >= 0 && f < ST_CAL_NFIG ? n[f] : "?";
}

void st_calibrate_set_init(st_calibrate_set *s) { memset(s, 0, sizeof *s); }

void st_calibrate_set_free(st_calibrate_set *s)
{
    for (uint32_t i = 0; i < s->n; i++) {
        free(s->runs[i].items);
        free(s->runs[i].ids);
        free(s->runs[i].prompts_sig);
    }
    free(s->runs);
    st_strv_free(&s->configs);
    memset(s, 0, sizeof *s);
}

static st_calibrate_run *new_run(st_calibrate_set *s)
{
    size_t cap = s->cap;
    if (st_grow((void **)&s->runs, &cap, (size_t)s->n + 1, sizeof *s->runs, 16) || cap > UINT32_MAX)
        return NULL;
    s->cap = (uint32_t)cap;
    st_calibrate_run *r = &s->runs[s->n];
    memset(r, 0, sizeof *r);
    for (int f = 0; f < ST_CAL_NFIG; f++)
        r->measured[f] = r->predicted[f] = NAN;
    r->same_prompts_as = -1;
    return r;
}

/* ---- figures from records (the same for measured and predicted) ---------------------------- */

static void figures(const st_record *rec, uint32_t n, double out[ST_CAL_NFIG])
{
    for (int f = 0; f < ST_CAL_NFIG; f++)
        out[f] = NAN;
    double *v = malloc((n ? n : 1) * sizeof *v);
    if (!v)
        return;
    st_ns t0 = -1, t1 = -1;
    double gen = 0;
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        const st_record *r = &rec[i];
        if (r->warmup || r->status != ST_REQ_OK || r->sent < 0)
            continue;
        if (t0 < 0 || r->sent < t0)
            t0 = r->sent;
        if (r->end > t1)
            t1 = r->end;
        gen += r->output_tokens;
        v[k++] = (r->first_token - r->scheduled) / 1e6;
    }
    if (k >= 1 && t1 > t0)
        out[ST_CAL_TPUT] = gen / ((t1 - t0) / 1e9);
    st_dist d;
    st_dist_compute(v, k, &d);
    out[ST_CAL_TTFT50] = d.p50;
    out[ST_CAL_TTFT95] = d.p95;
    k = 0;
    for (uint32_t i = 0; i < n; i++) {
        const st_record *r = &rec[i];
        if (!r->warmup && r->status == ST_REQ_OK && r->output_tokens > 1 && r->first_token >= 0)
            v[k++] = (r->end - r->first_token) / 1e6 / (r->output_tokens - 1);
    }
    st_dist_compute(v, k, &d);
    out[ST_CAL_TPOT50] = d.p50;
    out[ST_CAL_TPOT95] = d.p95;
    free(v);
}

/* The run's requests for the model: arrival = scheduled time, the lengths as served, prompts
 * sharing their first `prefix` tokens (the workload's shared prefix) and unique after. */
static int items_from_records(st_calibrate_run *run, const st_record *rec, uint32_t n, uint32_t prefix)
{
    uint32_t m = 0;
    size_t total = 0;
    double sin = 0, sout = 0;
    for (uint32_t i = 0; i < n; i++)
        if (!rec[i].warmup && rec[i].sent >= 0 && rec[i].input_tokens > 0) {
            m++;
            total += rec[i].input_tokens;
        }
    run->items = calloc(m ? m : 1, sizeof *run->items);
    run->ids = malloc((total ? total : 1) * sizeof *run->ids);
    if (!run->items || !run->ids)
        return -1;
    uint32_t vocab = run->cfg.model.vocab;
    size_t off = 0;
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        const st_record *r = &rec[i];
        if (r->warmup || r->sent < 0 || r->input_tokens == 0)
            continue;
        uint32_t out = r->status == ST_REQ_OK && r->output_tokens > 0 ? r->output_tokens : r->output_requested;
        uint32_t *ids = run->ids + off;
        for (uint32_t t = 0; t < r->input_tokens; t++)
            ids[t] = t < prefix ? st_emu_output_token(0xC0FFEEULL, t, vocab)
                                : st_emu_output_token(0xBEEF0000ULL + k, t, vocab);
        run->items[k++] = (st_emu_sim_item){ .arrival = r->scheduled > 0 ? r->scheduled : 0,
                                             .input_ids = ids,
                                             .input_len = r->input_tokens,
                                             .output_len = out ? out : 1 };
        off += r->input_tokens;
        sin += r->input_tokens;
        sout += out;
    }
    run->n = k;
    run->mean_in = k ? sin / k : 0;
    run->mean_out = k ? sout / k : 0;
    return 0;
}

/* What makes a run's records unfit to be replayed, named: none at all (the database's request
 * records were deleted, or never written), or prompts the server counted as 0 tokens (a length
 * that cannot be replayed: the engine model has no empty prompt). 0, or -1 with err about `what`. */
static int records_usable(const st_record *rec, uint32_t n, const char *what, char *err, size_t errlen)
{
    if (n == 0) {
        snprintf(err, errlen,
                 "%s: no request records in the database (deleted to save space?): calibrate replays each "
                 "request's arrival and lengths",
                 what);
        return -1;
    }
    uint32_t measured = 0, empty = 0;
    for (uint32_t i = 0; i < n; i++)
        if (!rec[i].warmup && rec[i].sent >= 0) {
            measured++;
            empty += rec[i].input_tokens == 0;
        }
    if (empty) {
        snprintf(err, errlen,
                 "%s: %u of its %u measured requests have 0-token prompts: a run with 0-token prompts cannot be "
                 "replayed (were its lengths counted by a server whose /tokenize answered 0?)",
                 what, empty, measured);
        return -1;
    }
    return 0;
}

/* ---- sources ---------------------------------------------------------------------------- */

int st_calibrate_check_configs(const st_calibrate_set *s, const st_strv *names, char *err, size_t errlen)
{
    for (int k = 0; k < names->n; k++) {
        if (st_strv_has(&s->configs, names->v[k]))
            continue;
        size_t o =
            (size_t)snprintf(err, errlen, "--config: no configuration '%s' in the audits (they have:", names->v[k]);
        for (int i = 0; i < s->configs.n && o < errlen; i++)
            o += (size_t)snprintf(err + o, errlen - o, "%s %s", i ? "," : "", s->configs.v[i]);
        if (o < errlen)
            snprintf(err + o, errlen - o, ")");
        return -1;
    }
    return 0;
}

/* A measured run's records into the calibration run: the figures it measured and the requests
 * the engine model replays. 0, or -1 with err (no usable records, out of memory). */
static int run_from_records(st_calibrate_run *run, st_store *store, const st_run_row *rr, const st_spec *spec,
                            const char *dir, char *err, size_t errlen)
{
    st_record *rec = NULL;
    uint32_t nrec = 0;
    if (st_store_records_get(store, rr->id, &rec, &nrec) < 0) {
        snprintf(err, errlen, "%s: %s", dir, st_store_errmsg(store));
        return -1;
    }
    char what[600];
    snprintf(what, sizeof what, "%s: run %s @ %g req/s", dir, rr->config, rr->rate);
    if (records_usable(rec, nrec, what, err, errlen) < 0) {
        st_records_free(rec, nrec);
        return -1;
    }
    figures(rec, nrec, run->measured);
    int ir =
        items_from_records(run, rec, nrec, spec->workload.kind == ST_WL_SYNTHETIC ? spec->workload.shared_prefix : 0);
    st_records_free(rec, nrec);
    for (uint32_t k = 0; ir == 0 && k < run->n; k++)
        run->items[k].chat = st_spec_api(spec) == ST_API_CHAT;
    if (ir < 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    run->rate = rr->rate;
    if (isinf(rr->rate))
        snprintf(run->label, sizeof run->label, "%s @ inf", rr->config);
    else
        snprintf(run->label, sizeof run->label, "%s @ %g req/s", rr->config, rr->rate);
    return 0;
}

int st_calibrate_add_audit(st_calibrate_set *s, const char *dir, const st_strv *configs, double max_rate,
                           int allow_prediction, char *err, size_t errlen)
{
    st_store *store = NULL;
    /* read, never create: a folder that is not an audit's is refused as it is */
    char path[4096];
    struct stat sb;
    if (snprintf(path, sizeof path, "%s/%s", dir, ST_STORE_FILE) >= (int)sizeof path) {
        snprintf(err, errlen, "%s: path too long", dir);
        return -1;
    }
    if (stat(dir, &sb) || !S_ISDIR(sb.st_mode)) {
        snprintf(err, errlen, "%s: %s", dir, errno == ENOENT ? "no such folder" : "not an audit's output folder");
        return -1;
    }
    if (stat(path, &sb)) {
        snprintf(err, errlen, "%s: no results database (%s: an audit's output folder has one)", dir, ST_STORE_FILE);
        return -1;
    }
    /* opened as `servetune report` opens it: a database from an older servetune gets its later
     * columns (nothing else is written) */
    if (st_store_open_file(path, ST_STORE_READONLY, &store, err, errlen) < 0)
        return -1;
    int added = -1;
    st_audit_row a = { 0 };
    st_spec spec;
    int have_spec = 0;
    st_run_row *runs = NULL;
    int nruns = 0;
    int g = st_store_audit_get(store, &a);
    if (g <= 0) {
        snprintf(err, errlen, "%s: %s", dir, g == 0 ? "the database holds no audit" : st_store_errmsg(store));
        goto out;
    }
    if (a.prediction && !allow_prediction) {
        snprintf(err, errlen,
                 "%s holds a prediction (servetune predict), not measurements: calibrate from a measured audit", dir);
        goto out;
    }
    if (st_spec_parse(a.spec_path ? a.spec_path : "spec", a.spec_text, strlen(a.spec_text), &spec, err, errlen) < 0)
        goto out;
    have_spec = 1;
    for (int i = 0; i < spec.n_configs; i++) /* the names, once each, for st_calibrate_check_configs */
        if (!st_strv_has(&s->configs, spec.configs[i].name) && st_strv_push(&s->configs, spec.configs[i].name)) {
            snprintf(err, errlen, "out of memory");
            goto out;
        }
    if (st_store_runs_get(store, NULL, &runs, &nruns) < 0) {
        snprintf(err, errlen, "%s: %s", dir, st_store_errmsg(store));
        goto out;
    }
    added = 0;
    for (int i = 0; i < nruns; i++) {
        st_run_row *rr = &runs[i];
        if (configs && !st_strv_has(configs, rr->config))
            continue;
        if (!rr->verdict || (strcmp(rr->verdict, "pass") && strcmp(rr->verdict, "fail")) || rr->stopped_early ||
            rr->completed < CAL_MIN_REQUESTS)
            continue; /* skipped, errored or early-stopped runs are not steady measurements */
        if (max_rate > 0 && !(rr->rate <= max_rate))
            continue;
        const st_spec_config *c = st_spec_find_config(&spec, rr->config);
        if (!c)
            continue;
        st_calibrate_run *run = new_run(s);
        if (!run) {
            snprintf(err, errlen, "out of memory");
            added = -1;
            goto out;
        }
        char cerr[1024];
        if (st_exec_model_config(&spec, c, &run->cfg, NULL, 0, NULL, cerr, sizeof cerr) != 0) {
            snprintf(err, errlen, "%s: configuration %s: the engine model cannot run it: %s", dir, rr->config, cerr);
            added = -1;
            goto out;
        }
        /* the fit starts from the model's defaults, whatever calibration the measured engine
         * (an emulator) was given */
        st_emu_tuning_defaults(&run->cfg.tune, &run->cfg.gpu);
        if (run_from_records(run, store, rr, &spec, dir, err, errlen)) {
            added = -1;
            goto out;
        }
        s->n++;
        added++;
    }
out:
    st_run_rows_free(runs, nruns);
    if (have_spec)
        st_spec_free(&spec);
    st_audit_row_free(&a);
    st_store_close(store);
    return added;
}

static st_ns jns(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? (st_ns)json_integer_value(v) : json_is_real(v) ? (st_ns)json_real_value(v) : -1;
}

int st_calibrate_add_bench_json(st_calibrate_set *s, const char *label, const char *text, size_t len,
                                const st_emu_config *cfg, double time_scale, char *err, size_t errlen)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, 0, &je);
    json_t *recs = json_object_get(root, "records");
    const char *schema = json_string_value(json_object_get(root, "schema"));
    if (!json_is_object(root) || !schema || strncmp(schema, "servetune.bench/", 16) || !json_is_array(recs)) {
        snprintf(err, errlen, "%s: not a servetune bench --json file (schema servetune.bench/1 with records)", label);
        json_decref(root);
        return -1;
    }
    size_t n = json_array_size(recs);
    st_record *rec = calloc(n ? n : 1, sizeof *rec);
    if (!rec) {
        json_decref(root);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_array_get(recs, i);
        st_record *r = &rec[i];
        st_record_init(r, (uint32_t)i);
        r->warmup = json_is_true(json_object_get(o, "warmup"));
        const char *st = json_string_value(json_object_get(o, "status"));
        r->status = st && !strcmp(st, "ok") ? ST_REQ_OK : ST_REQ_ABORTED;
        double k = time_scale > 0 ? time_scale : 1;
        st_ns sc = jns(o, "scheduled_ns"), se = jns(o, "sent_ns"), ft = jns(o, "first_token_ns"), en = jns(o, "end_ns");
        r->scheduled = sc >= 0 ? (st_ns)(sc * k) : -1;
        r->sent = se >= 0 ? (st_ns)(se * k) : -1;
        r->first_token = ft >= 0 ? (st_ns)(ft * k) : -1;
        r->end = en >= 0 ? (st_ns)(en * k) : -1;
        json_t *it = json_object_get(o, "input_tokens"), *ot = json_object_get(o, "output_tokens"),
               *orq = json_object_get(o, "output_requested");
        r->input_tokens = json_is_integer(it) ? (uint32_t)json_integer_value(it) : 0;
        r->output_tokens = json_is_integer(ot) ? (uint32_t)json_integer_value(ot) : 0;
        r->output_requested = json_is_integer(orq) ? (uint32_t)json_integer_value(orq) : r->output_tokens;
    }
    json_t *wl = json_object_get(json_object_get(root, "config"), "workload");
    json_t *pl = json_object_get(wl, "prefix_len");
    uint32_t prefix = json_is_integer(pl) ? (uint32_t)json_integer_value(pl) : 0;
    json_t *ar = json_object_get(json_object_get(root, "config"), "arrival");
    json_t *rate = json_object_get(ar, "rate_rps");
    int rc = -1;
    st_calibrate_run *run = new_run(s);
    if (!run) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    run->cfg = *cfg;
    if (records_usable(rec, (uint32_t)n, label, err, errlen) < 0)
        goto out;
    figures(rec, (uint32_t)n, run->measured);
    if (items_from_records(run, rec, (uint32_t)n, prefix) < 0) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    if (run->n < CAL_MIN_REQUESTS) {
        snprintf(err, errlen, "%s: fewer than %d measured requests", label, CAL_MIN_REQUESTS);
        free(run->items);
        free(run->ids);
        goto out;
    }
    run->rate = json_is_number(rate)   ? json_number_value(rate) / (time_scale > 0 ? time_scale : 1)
                : json_is_string(rate) ? INFINITY
                                       : 0;
    /* the file's cap, bounded by the run's own size: a cap above the number of requests never
     * binds (the same as none), and a value from the file never sizes anything beyond the run */
    json_t *mc = json_object_get(ar, "max_concurrency");
    json_int_t mcv = json_is_integer(mc) ? json_integer_value(mc) : 0;
    run->max_concurrency = mcv > 0 && mcv < (json_int_t)run->n ? (uint32_t)mcv : 0;
    snprintf(run->label, sizeof run->label, "%s", label);
    /* the same workload (seed included) makes the same prompts: a later run found them in the
     * server's prefix cache, which the replay on a fresh engine model does not */
    run->prompts_sig = json_is_object(wl) ? json_dumps(wl, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    for (uint32_t i = 0; i < s->n && run->prompts_sig && run->same_prompts_as < 0; i++)
        if (s->runs[i].prompts_sig && !strcmp(s->runs[i].prompts_sig, run->prompts_sig))
            run->same_prompts_as = (int)i;
    s->n++;
    rc = 0;
out:
    st_records_free(rec, n);
    json_decref(root);
    return rc;
}

/* ---- prediction ---------------------------------------------------------------------- */

static int predict_run(st_calibrate_run *run, const st_emu_tuning *t, const volatile sig_atomic_t *stop, char *err,
                       size_t errlen)
{
    st_emu_config c = run->cfg;
    if (t)
        c.tune = *t;
    st_emu_session *S;
    if (st_emu_session_new(&c, &S, NULL, err, errlen) < 0)
        return -1;
    st_record *rec = calloc(run->n + 1, sizeof *rec);
    int rc = -1;
    if (!rec) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    /* one request first, as the audit's warm-up: the shared prefix is cached */
    st_emu_sim_item warm = run->items[0];
    warm.arrival = 0;
    st_emu_run_opts wo = { .stop = stop };
    int stopped = 0;
    if (st_emu_session_run(S, &warm, 1, &wo, rec, NULL, &stopped, err, errlen) < 0)
        goto out;
    st_record_free(&rec[0]);
    st_emu_run_opts o = { .max_concurrency = run->max_concurrency, .stop = stop };
    if (!stopped && st_emu_session_run(S, run->items, run->n, &o, rec, NULL, &stopped, err, errlen) < 0)
        goto out;
    if (stopped) {
        snprintf(err, errlen, "interrupted");
        goto out;
    }
    figures(rec, run->n, run->predicted);
    rc = 0;
out:
    st_records_free(rec, run->n);
    st_emu_session_free(S);
    return rc;
}

int st_calibrate_predict(st_calibrate_set *s, const st_emu_tuning *t, char *err, size_t errlen)
{
    for (uint32_t i = 0; i < s->n; i++)
        if (predict_run(&s->runs[i], t, s->stop, err, errlen) < 0)
            return -1;
    return 0;
}

static double loss_of(const st_calibrate_set *s)
{
    double l = 0;
    for (uint32_t i = 0; i < s->n; i++)
        for (int f = 0; f < ST_CAL_NFIG; f++) {
            double m = s->runs[i].measured[f], p = s->runs[i].predicted[f];
            if (isfinite(m) && m > 0) {
                double x = isfinite(p) && p > 0 ? log(p / m) : 5.0;
                l += x * x;
            }
        }
    return l;
}

/* ---- the fit --------------------------------------------------------------------------- */

typedef struct cal_ctx {
    st_calibrate_set *s;
    st_emu_tuning base;
    double prior; /* CAL_PRIOR x the number of measured figures */
    const st_calib_knob *k[32];
    int nk;
    int failed;
    char err[512];
    int evaluations; /* of the objective, for the progress callback */
    double best;     /* the lowest loss so far */
} cal_ctx;

static double objective(void *arg, const double *x, int moved)
{
    (void)moved;
    cal_ctx *C = arg;
    if (C->failed)
        return INFINITY; /* an error or an interruption: the minimiser's remaining calls cost nothing */
    st_emu_tuning t = C->base;
    for (int i = 0; i < C->nk; i++)
        st_calib_knob_set(&t, C->k[i], x[i]);
    if (st_calibrate_predict(C->s, &t, C->err, sizeof C->err) < 0) {
        C->failed = 1;
        return INFINITY;
    }
    double pen = 0;
    for (int i = 0; i < C->nk; i++) {
        double d = st_calib_knob_get(&C->base, C->k[i]);
        if (d > 0 && x[i] > 0) {
            double l = log(x[i] / d);
            pen += l * l;
        }
    }
    double l = loss_of(C->s) + C->prior * pen;
    C->evaluations++;
    if (!(l >= C->best))
        C->best = l;
    if (C->s->progress)
        C->s->progress(C->s->progress_arg, "fit", C->evaluations, 0, C->best);
    return l;
}

/* The change vector of the predicted figures when knob k moves by CAL_PROBE_FACTOR. */
static int probe(st_calibrate_set *s, const st_emu_tuning *base, const st_calib_knob *k, double *base_pred, double *vec,
                 char *err, size_t errlen)
{
    st_emu_tuning t = *base;
    double v = st_calib_knob_get(base, k), nv = v * CAL_PROBE_FACTOR;
    if (nv > k->hi)
        nv = v / CAL_PROBE_FACTOR;
    st_calib_knob_set(&t, k, nv);
    if (st_calibrate_predict(s, &t, err, errlen) < 0)
        return -1;
    uint32_t j = 0;
    for (uint32_t i = 0; i < s->n; i++)
        for (int f = 0; f < ST_CAL_NFIG; f++, j++) {
            double a = base_pred[j], b = s->runs[i].predicted[f];
            vec[j] = isfinite(a) && isfinite(b) && a > 0 && b > 0 && isfinite(s->runs[i].measured[f]) ? log(b / a) : 0;
        }
    return 0;
}

static int relevant(const st_calib_knob *k, const st_emu_config *c)
{
    if (!strcmp(k->name, "fp8_gemm_rel") || !strcmp(k->name, "fp8_bw_rel"))
        return c->weight_dtype == ST_EMU_FP8 && c->gpu.fp8_flops > 0;
    if (!strcmp(k->name, "marlin_bw_rel") || !strcmp(k->name, "int4_gemm_rel"))
        return st_emu_marlin_weights(c);
    if (!strcmp(k->name, "moe_gemm_rel"))
        return c->model.experts > 0;
    if (!strcmp(k->name, "step_gpu_s") || !strcmp(k->name, "layer_graph_s"))
        return 0; /* indistinguishable from step_cpu_s in any measurement */
    return 1;
}

/* The candidates to fit (indices into cand, into chosen; their count), in order of influence
 * (norm): a candidate that moves the figures like one already chosen (|cosine| >= CAL_MAX_COSINE
 * between their effect vectors, nv figures each in vec) is skipped, said in rep. */
static int separable(const st_calib_knob *const *cand, int nc, const double *vec, size_t nv, const double *norm,
                     st_calibrate_report *rep, int *chosen)
{
    int order[32];
    for (int i = 0; i < nc; i++)
        order[i] = i;
    for (int i = 0; i < nc; i++)
        for (int j = i + 1; j < nc; j++)
            if (norm[order[j]] > norm[order[i]]) {
                int t = order[i];
                order[i] = order[j];
                order[j] = t;
            }
    int nch = 0;
    for (int oi = 0; oi < nc; oi++) {
        int i = order[oi];
        int dup = -1;
        for (int c = 0; c < nch && dup < 0; c++) {
            int j = chosen[c];
            double dot = 0;
            for (size_t q = 0; q < nv; q++)
                dot += vec[(size_t)i * nv + q] * vec[(size_t)j * nv + q];
            if (norm[i] > 0 && norm[j] > 0 && fabs(dot / (norm[i] * norm[j])) >= CAL_MAX_COSINE)
                dup = j;
        }
        if (dup >= 0) {
            st_calibrate_skip *sk = &rep->skipped[rep->n_skipped++];
            sk->name = cand[i]->name;
            snprintf(sk->why, sizeof sk->why,
                     "not separable from %s in these runs (both move the figures the same way); measure more load "
                     "levels or batch sizes to tell them apart",
                     cand[dup]->name);
            continue;
        }
        chosen[nch++] = i;
    }
    return nch;
}

/* The residuals after the fit (their median and worst into rep; e has room for every figure)
 * and the range of rates, throughputs and lengths the runs cover (into out->range). */
static void residuals_and_range(const st_calibrate_set *s, double *e, st_emu_calib *out, st_calibrate_report *rep)
{
    uint32_t ne = 0;
    rep->worst_abs_err = 0;
    double sin = 0, sout = 0;
    for (uint32_t i = 0; i < s->n; i++) {
        const st_calibrate_run *r = &s->runs[i];
        for (int f = 0; f < ST_CAL_NFIG; f++)
            if (isfinite(r->measured[f]) && r->measured[f] > 0 && isfinite(r->predicted[f])) {
                double x = fabs(r->predicted[f] / r->measured[f] - 1);
                e[ne++] = x;
                rep->worst_abs_err = x > rep->worst_abs_err ? x : rep->worst_abs_err;
            }
        if (isfinite(r->rate) && r->rate > out->range.rate_max)
            out->range.rate_max = r->rate;
        if (isinf(r->rate))
            out->range.rate_max = INFINITY;
        if (isfinite(r->measured[ST_CAL_TPUT]) && r->measured[ST_CAL_TPUT] > out->range.output_tps_max)
            out->range.output_tps_max = r->measured[ST_CAL_TPUT];
        sin += r->mean_in;
        sout += r->mean_out;
    }
    if (isinf(out->range.rate_max))
        out->range.rate_max = 0; /* saturation was measured: no rate is beyond the data */
    out->range.input_mean = sin / s->n;
    out->range.output_mean = sout / s->n;
    st_dist d;
    st_dist_compute(e, ne, &d);
    rep->median_abs_err = d.p50;
}

int st_calibrate_fit(st_calibrate_set *s, st_emu_calib *out, st_calibrate_report *rep, char *err, size_t errlen)
{
    memset(rep, 0, sizeof *rep);
    memset(out, 0, sizeof *out);
    if (s->n == 0) {
        snprintf(err, errlen, "no measured runs to calibrate from (finished, not early-stopped, >= %d requests)",
                 CAL_MIN_REQUESTS);
        return -1;
    }
    st_calib_identity(out, &s->runs[0].cfg);
    for (uint32_t i = 1; i < s->n; i++) {
        char why[512];
        if (st_calib_check(out, &s->runs[i].cfg, why, sizeof why, NULL, 0) < 0) {
            snprintf(err, errlen,
                     "%s and %s are different deployments: %s. Calibrate one GPU/model/quantization at a "
                     "time (--config NAME picks one configuration of an audit)",
                     s->runs[0].label, s->runs[i].label, why);
            return -1;
        }
    }
    cal_ctx C = { .s = s, .base = s->runs[0].cfg.tune, .best = INFINITY };
    int n_knobs = 0;
    for (const st_calib_knob *k = st_calib_knobs(); k->name; k++)
        n_knobs += relevant(k, &s->runs[0].cfg);
    size_t nv = (size_t)s->n * ST_CAL_NFIG;
    double *base_pred = malloc(nv * sizeof *base_pred), *vec = malloc(nv * 32 * sizeof *vec);
    double norm[32];
    int rc = -1;
    if (!base_pred || !vec) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    if (st_calibrate_predict(s, &C.base, err, errlen) < 0)
        goto out;
    for (uint32_t i = 0, j = 0; i < s->n; i++)
        for (int f = 0; f < ST_CAL_NFIG; f++)
            base_pred[j++] = s->runs[i].predicted[f];
    /* which constants the runs identify, most influential first */
    const st_calib_knob *cand[32];
    int nc = 0;
    for (const st_calib_knob *k = st_calib_knobs(); k->name; k++) {
        if (!relevant(k, &s->runs[0].cfg))
            continue;
        if (probe(s, &C.base, k, base_pred, vec + (size_t)nc * nv, err, errlen) < 0)
            goto out;
        if (s->progress)
            s->progress(s->progress_arg, "probe", nc + (int)rep->n_skipped + 1, n_knobs, NAN);
        double mx = 0, nn = 0;
        for (size_t j = 0; j < nv; j++) {
            double a = fabs(vec[(size_t)nc * nv + j]);
            mx = a > mx ? a : mx;
            nn += a * a;
        }
        norm[nc] = sqrt(nn);
        if (mx < CAL_MIN_EFFECT) {
            st_calibrate_skip *sk = &rep->skipped[rep->n_skipped++];
            sk->name = k->name;
            snprintf(sk->why, sizeof sk->why,
                     "not identified: a %.0f %% change moves no measured figure by %.0f %% or more in these runs",
                     (CAL_PROBE_FACTOR - 1) * 100, CAL_MIN_EFFECT * 100);
            continue;
        }
        cand[nc++] = k;
    }
    int chosen[32];
    int nch = separable(cand, nc, vec, nv, norm, rep, chosen);
    st_fit_param p[32];
    for (int c = 0; c < nch; c++) {
        const st_calib_knob *k = cand[chosen[c]];
        C.k[c] = k;
        double v = st_calib_knob_get(&C.base, k);
        p[c] = (st_fit_param){ k->name, v < k->lo ? k->lo : v > k->hi ? k->hi : v, k->lo, k->hi, k->log, 0, 0 };
    }
    C.nk = nch;
    uint32_t nfig = 0;
    for (uint32_t i = 0; i < s->n; i++)
        for (int f = 0; f < ST_CAL_NFIG; f++)
            nfig += isfinite(s->runs[i].measured[f]) && s->runs[i].measured[f] > 0;
    C.prior = CAL_PRIOR * nfig;
    st_emu_tuning best = C.base;
    if (nch > 0) {
        st_fit_result fr;
        if (st_fit_minimise(p, nch, objective, &C, CAL_SWEEPS, &fr) < 0 || C.failed) {
            snprintf(err, errlen, "the fit failed: %s", C.failed ? C.err : "unusable starting point");
            goto out;
        }
        rep->loss0 = fr.loss0;
        rep->loss = fr.loss;
        rep->evaluations = fr.evaluations;
        for (int c = 0; c < nch; c++) {
            st_calib_knob_set(&best, C.k[c], p[c].value);
            int idx = (int)(C.k[c] - st_calib_knobs());
            out->value[idx] = p[c].value;
            out->set[idx] = 1;
            rep->fitted[rep->n_fitted++] = C.k[c]->name;
        }
    }
    if (st_calibrate_predict(s, &best, err, errlen) < 0)
        goto out;
    if (nch == 0)
        rep->loss0 = rep->loss = loss_of(s);
    residuals_and_range(s, base_pred, out, rep); /* base_pred's room is reused */
    rc = 0;
out:
    free(base_pred);
    free(vec);
    return rc;
}

/* ---- reports ------------------------------------------------------------------------- */

void st_calibrate_report_json(const st_calibrate_set *s, const st_calibrate_report *rep, st_buf *b)
{
    st_buf_puts(b, "\"defaulted\": [");
    for (uint32_t i = 0; i < rep->n_skipped; i++) {
        st_buf_printf(b, "%s{\"name\": ", i ? ", " : "");
        st_buf_json_str(b, rep->skipped[i].name);
        st_buf_puts(b, ", \"why\": ");
        st_buf_json_str(b, rep->skipped[i].why);
        st_buf_puts(b, "}");
    }
    st_buf_printf(b,
                  "],\n  \"quality\": {\"runs\": %u, \"loss_before\": %.6g, \"loss_after\": %.6g, "
                  "\"median_abs_error\": %.4f, \"worst_abs_error\": %.4f, \"residuals\": [",
                  s->n, rep->loss0, rep->loss, rep->median_abs_err, rep->worst_abs_err);
    for (uint32_t i = 0; i < s->n; i++) {
        const st_calibrate_run *r = &s->runs[i];
        st_buf_printf(b, "%s\n    {\"run\": ", i ? "," : "");
        st_buf_json_str(b, r->label);
        for (int f = 0; f < ST_CAL_NFIG; f++) {
            if (!isfinite(r->measured[f]))
                continue;
            st_buf_printf(b, ", \"%s\": {\"measured\": %.6g, \"predicted\": %.6g, \"error\": %.4f}", st_cal_fig_name(f),
                          r->measured[f], isfinite(r->predicted[f]) ? r->predicted[f] : -1,
                          isfinite(r->predicted[f]) && r->measured[f] > 0 ? r->predicted[f] / r->measured[f] - 1 : 0);
        }
        st_buf_puts(b, "}");
    }
    st_buf_puts(b, "\n  ]}");
}

void st_calibrate_report_text(const st_calibrate_set *s, const st_calibrate_report *rep, st_buf *b)
{
    st_buf_printf(b, "%-36s %18s %18s %18s %18s\n", "run (measured -> predicted, error)", "out tok/s", "TTFT p50 ms",
                  "TTFT p95 ms", "TPOT p50 ms");
    static const int show[4] = { ST_CAL_TPUT, ST_CAL_TTFT50, ST_CAL_TTFT95, ST_CAL_TPOT50 };
    for (uint32_t i = 0; i < s->n; i++) {
        const st_calibrate_run *r = &s->runs[i];
        st_buf_printf(b, "%-36.36s", r->label);
        for (int q = 0; q < 4; q++) {
            int f = show[q];
            char cell[64];
            if (isfinite(r->measured[f]) && isfinite(r->predicted[f]) && r->measured[f] > 0)
                snprintf(cell, sizeof cell, "%.4g->%.4g %+.0f%%", r->measured[f], r->predicted[f],
                         100 * (r->predicted[f] / r->measured[f] - 1));
            else
                snprintf(cell, sizeof cell, "-");
            st_buf_printf(b, " %18s", cell);
        }
        st_buf_puts(b, "\n");
    }
    st_buf_printf(b, "fit: loss %.4g -> %.4g over %u runs; median |error| %.1f %%, worst %.1f %%\n", rep->loss0,
                  rep->loss, s->n, 100 * rep->median_abs_err, 100 * rep->worst_abs_err);
}
