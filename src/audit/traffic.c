/* The client's traffic in an audit (audit/traffic.h). */
#include "audit/traffic.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/strv.h"
#include "emu/flags.h"

int st_traffic_engine_model(int argc, char **argv, const char *gpu, st_traffic_engine *e, char *what, size_t whatlen,
                            char *err, size_t errlen)
{
    memset(e, 0, sizeof *e);
    st_emu_config cfg;
    const char *model = NULL;
    if (st_emu_config_of_argv(argc, argv, gpu, &cfg, &model, err, errlen))
        return -1;
    st_emu_memory mem;
    if (st_emu_memory_plan(&cfg, &mem, err, errlen) < 0)
        return -1;
    e->kv_tokens = mem.kv_tokens;
    e->max_model_len = mem.max_model_len;
    e->model_context = cfg.model.max_position;
    if (what && whatlen) {
        snprintf(what, whatlen, "%s on %s%s per the engine model", model ? model : "the model", cfg.gpu.name,
                 cfg.tp > 1 ? " (tensor parallel)" : "");
        e->what = what;
    }
    return 0;
}

/* The baseline's KV cache and context, from the engine model ("serve MODEL FLAGS"); zeroed when
 * it does not know the configuration. */
static void base_engine(const st_spec *s, st_traffic_engine *e, char *what, size_t whatlen)
{
    memset(e, 0, sizeof *e);
    char kerr[512];
    st_strv flags = { 0 };
    const st_spec_config *base = s->n_configs > 0 ? &s->configs[0] : NULL;
    if (base && st_spec_config_flags(s, base, &flags) == 0) {
        char **argv = calloc((size_t)flags.n + 3, sizeof *argv);
        if (argv) {
            int argc = 0;
            argv[argc++] = "serve";
            argv[argc++] = (char *)st_spec_config_model(s, base);
            for (int i = 0; i < flags.n; i++)
                argv[argc++] = flags.v[i];
            if (st_traffic_engine_model(argc, argv, s->hardware.gpu, e, what, whatlen, kerr, sizeof kerr) < 0)
                memset(e, 0, sizeof *e);
            free(argv);
        }
    }
    st_strv_free(&flags);
}

/* The spec's trace (its filters applied) read into trace statistics, with their result in t. The
 * statistics (the caller frees them), or NULL with err. */
static st_trace_stats *spec_trace_stats(const st_spec *s, st_traffic *t, char *err, size_t errlen)
{
    st_trace_stats *ts = st_trace_stats_new();
    if (!ts) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    st_trace_opts o;
    st_spec_trace_opts(s, &o);
    if (st_trace_read_file(s->workload.trace, &o, st_trace_stats_row_cb, ts, NULL, NULL, err, errlen) < 0) {
        st_trace_stats_free(ts);
        return NULL;
    }
    st_trace_stats_result(ts, t);
    return ts;
}

int st_traffic_len_auto(const st_spec *s, long *len, double *reject, int *capped, char *err, size_t errlen)
{
    *len = ST_MML_ROUND;
    *reject = 0;
    *capped = 0;
    st_traffic t;
    st_trace_stats *ts = spec_trace_stats(s, &t, err, errlen);
    if (!ts)
        return -1;
    st_traffic_engine e;
    base_engine(s, &e, NULL, 0);
    uint64_t longest = t.requests ? t.total.max : 1;
    uint64_t l = (longest + ST_MML_ROUND - 1) / ST_MML_ROUND * ST_MML_ROUND;
    if (e.model_context && l > e.model_context) {
        l = e.model_context;
        *capped = 1;
    }
    *len = (long)l;
    *reject = t.requests ? st_trace_stats_share_above(ts, l) : 0;
    st_trace_stats_free(ts);
    return 0;
}

double st_audit_trace_peak(const st_spec *s, double *mean_rps, char *err, size_t errlen)
{
    *mean_rps = NAN;
    if (s->workload.kind != ST_WL_TRACE) {
        snprintf(err, errlen, "the workload is not a trace");
        return NAN;
    }
    st_traffic t;
    st_trace_stats *ts = spec_trace_stats(s, &t, err, errlen);
    if (!ts)
        return NAN;
    st_trace_stats_free(ts);
    *mean_rps = t.mean_rps;
    double peak = t.minutes > 0 ? t.peak_minute_rps : NAN;
    if (isnan(peak) && isnan(t.mean_rps))
        snprintf(err, errlen, "%s", t.has_times ? "the trace holds one request" : "the trace has no timestamps");
    return peak;
}

int st_audit_resolve_peak(st_spec *s, char *err, size_t errlen)
{
    if (s->peak_source == ST_PEAK_STATED)
        return 0;
    double mean, peak = st_audit_trace_peak(s, &mean, err, errlen);
    if (peak > 0) {
        s->peak_rate = peak;
        s->peak_source = ST_PEAK_BUSIEST_MINUTE;
        return 0;
    }
    if (mean > 0) {
        s->peak_rate = mean;
        s->peak_source = ST_PEAK_TRACE_MEAN;
        return 0;
    }
    char e[512];
    snprintf(e, sizeof e, "%s", err);
    snprintf(err, errlen, "%s: peak_rate: trace: %s: give the peak in requests per second", s->path, e);
    return -1;
}

void st_audit_day_from_hourly(st_spec *s, const st_hourly_profile *h)
{
    if (!s->traffic.set || s->traffic.day_source == ST_DAY_STATED)
        return;
    s->traffic.hours_known = 0;
    for (int i = 0; i < 24; i++) {
        int known = h->clock != ST_HOURLY_NONE && !isnan(h->rps[i]);
        s->traffic.hour_known[i] = (unsigned char)known;
        s->traffic.hourly_rps[i] = known ? h->rps[i] : 0;
        s->traffic.hours_known += known;
    }
    s->traffic.day_source = h->clock == ST_HOURLY_UTC          ? ST_DAY_TRACE_UTC
                            : h->clock == ST_HOURLY_FROM_FIRST ? ST_DAY_TRACE_FIRST
                                                               : ST_DAY_FROM_TRACE;
}

int st_audit_resolve_day(st_spec *s, char *err, size_t errlen)
{
    if (!s->traffic.set || s->traffic.day_source == ST_DAY_STATED || s->workload.kind != ST_WL_TRACE)
        return 0;
    st_traffic t;
    st_trace_stats *ts = spec_trace_stats(s, &t, err, errlen);
    int rc = ts ? 0 : -1;
    if (ts)
        st_audit_day_from_hourly(s, &t.hourly);
    st_trace_stats_free(ts);
    if (rc) {
        char e[512];
        snprintf(e, sizeof e, "%s", err);
        snprintf(err, errlen, "%s: traffic.hourly_rps: trace: %s", s->path, e);
    }
    return rc;
}

void st_audit_day_source_say(const st_spec *s, st_buf *b)
{
    if (!s->traffic.set || s->traffic.day_source == ST_DAY_STATED)
        return;
    int n = s->traffic.hours_known;
    if (n == 0) {
        st_buf_printf(b,
                      "The day would be the trace's own, and the trace covers no hour of the day for at least %.0f "
                      "minutes (or has no timestamps): no day is priced.",
                      ST_HOURLY_MIN_COVER_S / 60);
        return;
    }
    st_buf_printf(b,
                  "The day is the trace's own: its requests per hour of the day (%s), after the spec's trace filters",
                  s->traffic.day_source == ST_DAY_TRACE_UTC ? "UTC, from its calendar times"
                                                            : "hours counted from its first request, as its times "
                                                              "are not calendar times");
    if (s->workload.trace_sample > 0 && s->workload.trace_sample < 1)
        st_buf_printf(b, " (trace_sample %.3g: the rates are of the sample, not the whole trace)",
                      s->workload.trace_sample);
    if (n < 24)
        st_buf_printf(b,
                      ". It covers %d of the 24 hours (each for at least %.0f minutes, priced as a whole hour at the "
                      "rate it had): the day is priced over those %d hours only, not extrapolated to the others",
                      n, ST_HOURLY_MIN_COVER_S / 60, n);
    st_buf_puts(b, ".");
}

int st_audit_trace_spread(const st_spec *s, st_trace_opts *o, uint64_t n, char *err, size_t errlen)
{
    st_trace_counts c;
    st_trace_opts all = *o;
    all.max_rows = 0; /* every row the filters keep */
    if (st_trace_read_file(s->workload.trace, &all, NULL, NULL, &c, NULL, err, errlen))
        return -1;
    if (c.kept > n && n > 0)
        o->sample = (o->sample > 0 ? o->sample : 1.0) * (double)n / (double)c.kept;
    return 0;
}

/* The whole trace's statistics, and those of its first n rows. */
typedef struct two_stats {
    st_trace_stats *all, *first;
    uint64_t n;
} two_stats;

static int two_cb(void *arg, const st_trace_row *row, char *err, size_t errlen)
{
    two_stats *t = arg;
    if (st_trace_stats_row_cb(t->all, row, err, errlen))
        return -1;
    if (row->index < t->n && st_trace_stats_row_cb(t->first, row, err, errlen))
        return -1;
    return 0;
}

/* The rows a run replays (at least): a burst run's requests_per_rate, a sustained run's window. */
static uint64_t replayed_rows(const st_spec *s, int *at_least)
{
    *at_least = s->search.mode == ST_SEARCH_SUSTAINED;
    return *at_least ? s->search.min_window_requests : s->workload.requests_per_rate;
}

static void replay_share_of(const st_spec *s, const two_stats *t, st_replay_share *out)
{
    st_traffic a, f;
    st_trace_stats_result(t->all, &a);
    st_trace_stats_result(t->first, &f);
    out->total = a.requests;
    out->replayed = f.requests;
    out->prefix_known = a.prefix_known;
    out->hit_all = a.ideal_hit_rate;
    out->hit_replayed = f.ideal_hit_rate;
    out->differs =
        out->replayed < out->total && a.prefix_known && fabs(out->hit_all - out->hit_replayed) > ST_REPLAY_HIT_DIFF;
    (void)s;
}

int st_audit_replay_share(const st_spec *s, st_replay_share *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    two_stats t = { .all = st_trace_stats_new(), .first = st_trace_stats_new() };
    t.n = replayed_rows(s, &out->at_least);
    int rc = -1;
    if (!t.all || !t.first) {
        snprintf(err, errlen, "out of memory");
    } else {
        st_trace_opts o;
        st_spec_trace_opts(s, &o);
        rc = st_trace_read_file(s->workload.trace, &o, two_cb, &t, NULL, NULL, err, errlen) < 0 ? -1 : 0;
    }
    if (rc == 0 && s->workload.trace_spread) {
        /* the sample a run replays, read on its own */
        st_trace_stats_free(t.first);
        t.first = st_trace_stats_new();
        st_trace_opts o;
        st_spec_trace_opts(s, &o);
        rc = !t.first ? -1 : st_audit_trace_spread(s, &o, t.n, err, errlen);
        o.max_rows = t.n;
        if (rc == 0)
            rc = st_trace_read_file(s->workload.trace, &o, st_trace_stats_row_cb, t.first, NULL, NULL, err, errlen) < 0
                     ? -1
                     : 0;
    }
    if (rc == 0) {
        int al = out->at_least;
        replay_share_of(s, &t, out);
        out->at_least = al;
        out->spread = s->workload.trace_spread;
    }
    st_trace_stats_free(t.all);
    st_trace_stats_free(t.first);
    return rc;
}

void st_replay_share_say(const st_replay_share *r, st_buf *b)
{
    if (!r->total || r->replayed >= r->total)
        return;
    if (r->spread)
        st_buf_printf(
            b, "each run replays %sa sample of %llu of the trace's %llu requests (%.1f %%) spread over all of it",
            r->at_least ? "at least " : "", (unsigned long long)r->replayed, (unsigned long long)r->total,
            100.0 * (double)r->replayed / (double)r->total);
    else
        st_buf_printf(b, "each run replays %sthe trace's first %llu of its %llu requests (%.1f %%)",
                      r->at_least ? "at least " : "", (unsigned long long)r->replayed, (unsigned long long)r->total,
                      100.0 * (double)r->replayed / (double)r->total);
    if (r->prefix_known)
        st_buf_printf(b, "; their ideal prefix-cache hit rate is %.1f %% against %.1f %% for the whole trace",
                      100 * r->hit_replayed, 100 * r->hit_all);
    if (r->differs)
        st_buf_printf(b,
                      ": the runs see %s prefix reuse than the trace holds (raise workload.requests_per_rate, or "
                      "choose what is replayed with workload.trace_window or trace_sample)",
                      r->hit_replayed < r->hit_all ? "less" : "more");
}

int st_audit_traffic_json(const st_spec *s, char **json, char *err, size_t errlen)
{
    *json = NULL;
    if (s->workload.kind != ST_WL_TRACE || !s->workload.trace) {
        snprintf(err, errlen, "the workload is not a trace");
        return -1;
    }
    st_trace_stats *ts = st_trace_stats_new();
    if (!ts) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    st_trace_opts o;
    st_spec_trace_opts(s, &o);
    st_trace_counts c;
    st_trace_format fmt;
    st_replay_share rs;
    memset(&rs, 0, sizeof rs);
    two_stats two = { .all = ts, .first = st_trace_stats_new() };
    two.n = replayed_rows(s, &rs.at_least);
    if (!two.first || st_trace_read_file(s->workload.trace, &o, two_cb, &two, &c, &fmt, err, errlen) < 0) {
        if (!two.first)
            snprintf(err, errlen, "out of memory");
        st_trace_stats_free(two.first);
        st_trace_stats_free(ts);
        return -1;
    }
    int al = rs.at_least;
    replay_share_of(s, &two, &rs);
    rs.at_least = al;
    st_trace_stats_free(two.first);
    if (s->workload.trace_spread && st_audit_replay_share(s, &rs, err, errlen)) { /* the sample, read on its own */
        st_trace_stats_free(ts);
        return -1;
    }
    st_traffic t;
    st_trace_stats_result(ts, &t);
    st_traffic_engine e;
    char what[300] = "";
    base_engine(s, &e, what, sizeof what);
    st_traffic_advice a;
    st_traffic_advise(ts, &t, &e, &a);
    json_t *j = st_traffic_json(&t, &a, &c, fmt, s->workload.trace);
    st_trace_stats_free(ts);
    if (j && e.kv_tokens)
        json_object_set_new(json_object_get(j, "advice"), "engine", json_string(what));
    if (j) {
        /* what each run replays of it, and the prefix reuse of that part */
        st_buf said;
        st_buf_init(&said, 1024);
        st_replay_share_say(&rs, &said);
        json_t *r = json_pack("{s:I, s:I, s:b, s:o, s:o, s:b, s:s}", "requests", (json_int_t)rs.replayed, "of",
                              (json_int_t)rs.total, "at_least", rs.at_least, "ideal_hit_rate",
                              rs.prefix_known ? json_real(rs.hit_replayed) : json_null(), "whole_ideal_hit_rate",
                              rs.prefix_known ? json_real(rs.hit_all) : json_null(), "differs", rs.differs, "text",
                              said.data ? said.data : "");
        if (r)
            json_object_set_new(j, "replayed", r);
        st_buf_free(&said);
    }
    *json = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!*json) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}
