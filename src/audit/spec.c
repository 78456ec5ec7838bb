#include "audit/spec.h"

#include "load/agent.h"
#include "load/agent_file.h"
#include "core/file.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "core/parse.h"
#include "core/secret.h"

#define SPEC_MAX_LIST ST_SPEC_MAX_ITEMS

static const char *metric_names[ST_SLO__COUNT] = { "ttft", "tpot", "itl", "e2e", "ttfat", "makespan" };

const char *st_slo_metric_name(st_slo_metric m) { return (m >= 0 && m < ST_SLO__COUNT) ? metric_names[m] : "unknown"; }

static void envv_free(st_envv *e)
{
    for (int i = 0; i < e->n; i++) {
        free(e->key[i]);
        free(e->val[i]);
    }
    free(e->key);
    free(e->val);
    memset(e, 0, sizeof *e);
}

void st_spec_free(st_spec *s)
{
    if (!s)
        return;
    free(s->path);
    st_strv_free(&s->engine.command);
    free(s->engine.model);
    free(s->engine.served_name);
    st_strv_free(&s->engine.flags);
    envv_free(&s->engine.env);
    free(s->engine.url);
    free(s->engine.api_key_env);
    free(s->hardware.gpu);
    free(s->workload.trace);
    free(s->workload.arrival);
    free(s->rates);
    for (int i = 0; i < s->n_configs; i++) {
        st_spec_config *c = &s->configs[i];
        free(c->name);
        st_strv_free(&c->add_flags);
        st_strv_free(&c->remove_flags);
        free(c->model);
        envv_free(&c->env);
        free(c->reason);
    }
    free(s->configs);
    free(s->cluster.slurm.partition);
    free(s->cluster.slurm.account);
    free(s->cluster.slurm.time);
    st_strv_free(&s->cluster.slurm.sbatch_args);
    free(s->cluster.kubernetes.image);
    free(s->cluster.kubernetes.ns);
    free(s->cluster.kubernetes.volume_claim);
    free(s->cluster.kubernetes.gpu_resource);
    st_strv_free(&s->plan.gpus);
    for (int i = 0; i < s->plan.n_weights; i++) {
        free(s->plan.weights[i]);
        free(s->plan.checkpoints[i]);
    }
    st_strv_free(&s->plan.kv_dtypes);
    free(s->plan.prices);
    for (int i = 0; i < s->plan.n_spec; i++) {
        free(s->plan.spec[i].method);
        free(s->plan.spec[i].model);
    }
    free(s->plan.provider);
    free(s->traffic.serverless_provider);
    memset(s, 0, sizeof *s);
}

/* ---- parsing context ---- */

typedef struct pctx {
    yaml_document_t *doc;
    const char *name;
    char *err;
    size_t errlen;
    int failed;
} pctx;

static int failf(pctx *p, const yaml_node_t *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int failf(pctx *p, const yaml_node_t *n, const char *fmt, ...)
{
    if (p->failed)
        return -1;
    p->failed = 1;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n)
        snprintf(p->err, p->errlen, "%s:%zu: %s", p->name, n->start_mark.line + 1, msg);
    else
        snprintf(p->err, p->errlen, "%s: %s", p->name, msg);
    return -1;
}

static yaml_node_t *node(pctx *p, int id) { return yaml_document_get_node(p->doc, id); }

static const char *scalar(const yaml_node_t *n)
{
    return (n && n->type == YAML_SCALAR_NODE) ? (const char *)n->data.scalar.value : NULL;
}

/* A key table: the keys a mapping may hold. */
typedef struct keydef {
    const char *key;
    yaml_node_t *val; /* filled */
    yaml_node_t *keynode;
} keydef;

/* Fills keys[i].val from mapping n; unknown and duplicate keys are errors. */
static int read_map(pctx *p, yaml_node_t *n, const char *what, keydef *keys, int nkeys)
{
    if (!n || n->type != YAML_MAPPING_NODE)
        return failf(p, n, "%s: expected a mapping", what);
    for (yaml_node_pair_t *pr = n->data.mapping.pairs.start; pr < n->data.mapping.pairs.top; pr++) {
        yaml_node_t *k = node(p, pr->key), *v = node(p, pr->value);
        const char *ks = scalar(k);
        if (!ks)
            return failf(p, k, "%s: keys must be plain words", what);
        int found = 0;
        for (int i = 0; i < nkeys; i++) {
            if (strcmp(keys[i].key, ks))
                continue;
            if (keys[i].val)
                return failf(p, k, "%s: duplicate key '%s' (first at line %zu)", what, ks,
                             keys[i].keynode->start_mark.line + 1);
            keys[i].val = v;
            keys[i].keynode = k;
            found = 1;
        }
        if (!found) {
            char known[512] = "";
            size_t off = 0;
            for (int i = 0; i < nkeys && off < sizeof known; i++)
                off += (size_t)snprintf(known + off, sizeof known - off, "%s%s", i ? ", " : "", keys[i].key);
            return failf(p, k, "%s: unknown key '%s' (known: %s)", what, ks, known);
        }
    }
    return 0;
}

static yaml_node_t *kv(keydef *keys, int nkeys, const char *key)
{
    for (int i = 0; i < nkeys; i++)
        if (!strcmp(keys[i].key, key))
            return keys[i].val;
    return NULL;
}

static int get_str(pctx *p, yaml_node_t *n, const char *what, char **out)
{
    const char *s = scalar(n);
    if (!s)
        return failf(p, n, "%s: expected a string", what);
    if (!*s)
        return failf(p, n, "%s: must not be empty", what);
    free(*out);
    *out = strdup(s);
    return *out ? 0 : failf(p, n, "out of memory");
}

static int get_double(pctx *p, yaml_node_t *n, const char *what, double *out, double lo, int lo_excl)
{
    const char *s = scalar(n);
    double d;
    if (!s || st_parse_double(s, &d) || !isfinite(d))
        return failf(p, n, "%s: expected a number, got '%s'", what, s ? s : "(not a scalar)");
    if (lo_excl ? d <= lo : d < lo)
        return failf(p, n, "%s: must be %s %g, got %s", what, lo_excl ? ">" : ">=", lo, s);
    *out = d;
    return 0;
}

static int get_u32(pctx *p, yaml_node_t *n, const char *what, uint32_t *out, uint32_t lo)
{
    const char *s = scalar(n);
    long l;
    if (!s || st_parse_long(s, &l))
        return failf(p, n, "%s: expected a whole number, got '%s'", what, s ? s : "(not a scalar)");
    if (l < (long)lo || l > (long)UINT32_MAX)
        return failf(p, n, "%s: must be at least %u, got %ld", what, lo, l);
    *out = (uint32_t)l;
    return 0;
}

static int get_bool(pctx *p, yaml_node_t *n, const char *what, int *out)
{
    const char *s = scalar(n);
    if (s && (!strcasecmp(s, "true") || !strcasecmp(s, "yes") || !strcasecmp(s, "on")))
        *out = 1;
    else if (s && (!strcasecmp(s, "false") || !strcasecmp(s, "no") || !strcasecmp(s, "off")))
        *out = 0;
    else
        return failf(p, n, "%s: expected true or false", what);
    return 0;
}

static int get_strlist(pctx *p, yaml_node_t *n, const char *what, st_strv *out)
{
    if (!n || n->type != YAML_SEQUENCE_NODE)
        return failf(p, n, "%s: expected a list of strings, e.g. [--flag, value]", what);
    int count = (int)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (count > SPEC_MAX_LIST)
        return failf(p, n, "%s: more than %d items", what, SPEC_MAX_LIST);
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
        yaml_node_t *e = node(p, *it);
        const char *s = scalar(e);
        if (!s)
            return failf(p, e, "%s: each item must be a string", what);
        if (!*s)
            return failf(p, e, "%s: empty item", what);
        if (st_strv_push(out, s))
            return failf(p, e, "out of memory");
    }
    return 0;
}

/* A secret must be referenced by name: a variable whose name looks like a credential
 * (st_secret_name) may only hold a ${VAR} reference, so the spec (which is stored with the
 * results) never holds one. */
static int looks_secret(const char *name) { return st_secret_name(name); }

static int is_pure_ref(const char *v)
{
    size_t n = strlen(v);
    if (n < 4 || v[0] != '$' || v[1] != '{' || v[n - 1] != '}')
        return 0;
    for (size_t i = 2; i + 1 < n; i++)
        if (!(isalnum((unsigned char)v[i]) || v[i] == '_'))
            return 0;
    return 1;
}

static int valid_env_name(const char *k)
{
    if (!*k || isdigit((unsigned char)*k))
        return 0;
    for (; *k; k++)
        if (!(isalnum((unsigned char)*k) || *k == '_'))
            return 0;
    return 1;
}

/* An environment mapping: at most SPEC_MAX_LIST variables (refused before any is looked at, so
 * the time taken is bounded whatever the file holds), each name checked once against the ones
 * before it (at most SPEC_MAX_LIST^2 / 2 comparisons). */
static int get_env(pctx *p, yaml_node_t *n, const char *what, st_envv *out)
{
    if (!n || n->type != YAML_MAPPING_NODE)
        return failf(p, n, "%s: expected a mapping NAME: value", what);
    long count = (long)(n->data.mapping.pairs.top - n->data.mapping.pairs.start);
    if (count > SPEC_MAX_LIST)
        return failf(p, n, "%s: more than %d variables", what, SPEC_MAX_LIST);
    for (yaml_node_pair_t *pr = n->data.mapping.pairs.start; pr < n->data.mapping.pairs.top; pr++) {
        yaml_node_t *k = node(p, pr->key), *v = node(p, pr->value);
        const char *ks = scalar(k), *vs = scalar(v);
        if (!ks || !valid_env_name(ks))
            return failf(p, k, "%s: '%s' is not a valid environment variable name", what, ks ? ks : "?");
        if (!vs)
            return failf(p, v, "%s: %s: expected a string value", what, ks);
        for (int i = 0; i < out->n; i++)
            if (!strcmp(out->key[i], ks))
                return failf(p, k, "%s: duplicate variable '%s'", what, ks);
        if (looks_secret(ks) && *vs && !is_pure_ref(vs))
            return failf(p, v,
                         "%s: %s looks like a secret: write a reference such as ${%s} (the spec is stored "
                         "with the results; secrets never are)",
                         what, ks, ks);
        char **nk = realloc(out->key, sizeof(char *) * (size_t)(out->n + 1));
        if (!nk)
            return failf(p, k, "out of memory");
        out->key = nk;
        char **nv = realloc(out->val, sizeof(char *) * (size_t)(out->n + 1));
        if (!nv)
            return failf(p, k, "out of memory");
        out->val = nv;
        out->key[out->n] = strdup(ks);
        out->val[out->n] = strdup(vs);
        out->n++;
        if (!out->key[out->n - 1] || !out->val[out->n - 1])
            return failf(p, k, "out of memory");
    }
    return 0;
}

/* A flag whose name looks like a credential (--api-key, --hf-token...) may only take a ${VAR}
 * reference as its value: the flags are stored with the results and shown in reports. Its value
 * is the next token whatever it starts with (a key may begin with '-'). */
static int check_flag_secrets(pctx *p, yaml_node_t *n, const char *what, const st_strv *v)
{
    for (int i = 0; i < v->n; i++) {
        const char *t = v->v[i];
        if (t[0] != '-' || t[1] != '-')
            continue;
        const char *eq = strchr(t, '=');
        char name[128];
        size_t nl = eq ? (size_t)(eq - t) : strlen(t);
        if (nl >= sizeof name)
            continue;
        memcpy(name, t, nl);
        name[nl] = '\0';
        if (!looks_secret(name))
            continue;
        const char *val = eq ? eq + 1 : (i + 1 < v->n ? v->v[i + 1] : NULL);
        if (val && !is_pure_ref(val))
            return failf(p, n,
                         "%s: %.*s looks like a secret: give it as a reference such as ${MY_KEY} (expanded from the "
                         "environment when the engine starts; flags are stored with the results)",
                         what, (int)nl, t);
    }
    return 0;
}

/* ---- sections ---- */

static int parse_engine(pctx *p, yaml_node_t *n, st_spec *s)
{
    keydef k[] = { { "kind", 0, 0 },        { "command", 0, 0 }, { "model", 0, 0 }, { "served_model_name", 0, 0 },
                   { "flags", 0, 0 },       { "env", 0, 0 },     { "url", 0, 0 },   { "api", 0, 0 },
                   { "api_key_env", 0, 0 }, { "port", 0, 0 } };
    int nk = (int)(sizeof k / sizeof *k);
    if (read_map(p, n, "engine", k, nk))
        return -1;
    yaml_node_t *v;
    if (!(v = kv(k, nk, "kind")))
        return failf(p, n, "engine: 'kind' is required (vllm, sglang, tgi, llamacpp, emulator, endpoint)");
    if (st_engine_kind_from_name(scalar(v), &s->engine.kind))
        return failf(p, v, "engine.kind: unknown engine '%s' (vllm, sglang, tgi, llamacpp, emulator, endpoint)",
                     scalar(v) ? scalar(v) : "?");
    if (!(v = kv(k, nk, "model")))
        return failf(p, n, "engine: 'model' is required");
    if (get_str(p, v, "engine.model", &s->engine.model))
        return -1;
    if ((v = kv(k, nk, "served_model_name")) && get_str(p, v, "engine.served_model_name", &s->engine.served_name))
        return -1;
    if ((v = kv(k, nk, "command"))) {
        if (s->engine.kind == ST_ENGINE_ENDPOINT)
            return failf(p, v, "engine.command: an endpoint is already running; nothing is started");
        if (get_strlist(p, v, "engine.command", &s->engine.command) ||
            check_flag_secrets(p, v, "engine.command", &s->engine.command))
            return -1;
        if (s->engine.command.n == 0)
            return failf(p, v, "engine.command: must not be empty (leave it out for the default)");
    }
    if ((v = kv(k, nk, "flags")) && (get_strlist(p, v, "engine.flags", &s->engine.flags) ||
                                     check_flag_secrets(p, v, "engine.flags", &s->engine.flags)))
        return -1;
    if ((v = kv(k, nk, "env")) && get_env(p, v, "engine.env", &s->engine.env))
        return -1;
    if ((v = kv(k, nk, "url"))) {
        if (get_str(p, v, "engine.url", &s->engine.url))
            return -1;
        if (strncmp(s->engine.url, "http://", 7) && strncmp(s->engine.url, "https://", 8))
            return failf(p, v, "engine.url: expected http://HOST:PORT or https://..., got '%s'", s->engine.url);
        if (s->engine.kind != ST_ENGINE_ENDPOINT)
            return failf(p, v, "engine.url: only for kind endpoint (other engines are started on 127.0.0.1)");
    } else if (s->engine.kind == ST_ENGINE_ENDPOINT) {
        return failf(p, n, "engine: kind endpoint needs 'url'");
    }
    if ((v = kv(k, nk, "api"))) {
        if (!scalar(v) || st_api_from_name(scalar(v), &s->engine.api))
            return failf(p, v, "engine.api: unknown API '%s' (completions, chat, tgi, llamacpp, sglang)",
                         scalar(v) ? scalar(v) : "?");
        s->engine.api_set = 1;
    }
    if ((v = kv(k, nk, "api_key_env"))) {
        if (get_str(p, v, "engine.api_key_env", &s->engine.api_key_env))
            return -1;
        if (!valid_env_name(s->engine.api_key_env))
            return failf(p, v,
                         "engine.api_key_env: the NAME of an environment variable (the key itself is never "
                         "written in a spec)");
    }
    if ((v = kv(k, nk, "port"))) {
        uint32_t port;
        if (get_u32(p, v, "engine.port", &port, 1))
            return -1;
        if (port > 65535)
            return failf(p, v, "engine.port: must be 1..65535");
        if (s->engine.kind == ST_ENGINE_ENDPOINT)
            return failf(p, v, "engine.port: an endpoint's port is part of its url");
        s->engine.port = (int)port;
    }
    return 0;
}

static int parse_hardware(pctx *p, yaml_node_t *n, st_spec *s)
{
    keydef k[] = { { "gpu", 0, 0 }, { "gpus_per_replica", 0, 0 }, { "price_per_gpu_hour", 0, 0 } };
    int nk = 3;
    if (read_map(p, n, "hardware", k, nk))
        return -1;
    yaml_node_t *v;
    if (!(v = kv(k, nk, "gpu")))
        return failf(p, n, "hardware: 'gpu' is required (e.g. H100)");
    if (get_str(p, v, "hardware.gpu", &s->hardware.gpu))
        return -1;
    s->hardware.gpus_per_replica = 1;
    if ((v = kv(k, nk, "gpus_per_replica"))) {
        uint32_t g;
        if (get_u32(p, v, "hardware.gpus_per_replica", &g, 1))
            return -1;
        if (g > 1024)
            return failf(p, v, "hardware.gpus_per_replica: at most 1024");
        s->hardware.gpus_per_replica = (int)g;
    }
    if (!(v = kv(k, nk, "price_per_gpu_hour")))
        return failf(p, n, "hardware: 'price_per_gpu_hour' is required (US$ per GPU-hour)");
    if (get_double(p, v, "hardware.price_per_gpu_hour", &s->hardware.price_per_gpu_hour, 0, 1))
        return -1;
    if (s->hardware.price_per_gpu_hour > ST_SPEC_MAX_PRICE_PER_GPU_HOUR)
        return failf(p, v, "hardware.price_per_gpu_hour: at most %g (US$ per GPU-hour), got %s",
                     ST_SPEC_MAX_PRICE_PER_GPU_HOUR, scalar(v));
    return 0;
}

/* "N" or "MIN-MAX" turns per session, within 1..ST_SPEC_MAX_TURNS. */
static int get_turns(pctx *p, yaml_node_t *n, uint32_t *lo, uint32_t *hi)
{
    const char *t = scalar(n);
    if (st_parse_range_u32(t, 1, ST_SPEC_MAX_TURNS, lo, hi))
        return failf(p, n, "workload.sessions.turns: expected N or MIN-MAX (e.g. 2-6) within 1..%u, got '%s'",
                     ST_SPEC_MAX_TURNS, t ? t : "(not a scalar)");
    return 0;
}

/* A think time between turns (what names the key in the message), within 0..ST_SPEC_MAX_THINK_S. */
static int get_think(pctx *p, yaml_node_t *n, const char *what, double *out)
{
    const char *t = scalar(n);
    double d;
    if (!t || st_parse_duration_s(t, &d) || !(d >= 0) || d > ST_SPEC_MAX_THINK_S)
        return failf(p, n, "%s: expected a duration in 0..%g s such as 0, 5 or 500ms", what, ST_SPEC_MAX_THINK_S);
    *out = d;
    return 0;
}

/* workload.sessions: `replay` or `flat` for a trace; a mapping for synthetic sessions. */
static int parse_sessions(pctx *p, yaml_node_t *n, st_spec *s)
{
    const char *m = scalar(n);
    if (s->workload.kind == ST_WL_TRACE) {
        if (!m || (strcmp(m, "replay") && strcmp(m, "flat")))
            return failf(p, n,
                         "workload.sessions: with a trace, expected replay (conversations: each later turn sent when "
                         "the turn before it ended, with the server's real answers) or flat (every row on its "
                         "recorded time)");
        s->workload.sessions.on = !strcmp(m, "replay");
        return 0;
    }
    if (m)
        return failf(p, n,
                     "workload.sessions: a synthetic workload takes a mapping (turns, user_tokens, think_time, "
                     "think); replay and flat are for a trace");
    keydef k[] = {
        { "turns", 0, 0 }, { "user_tokens", 0, 0 }, { "think_time", 0, 0 }, { "think", 0, 0 }, { "fan_out", 0, 0 }
    };
    int nk = (int)(sizeof k / sizeof *k);
    if (read_map(p, n, "workload.sessions", k, nk))
        return -1;
    if (s->workload.vllm_semantics)
        return failf(p, n,
                     "workload.sessions: not with semantics: vllm (a session's first prompt is input_tokens, its "
                     "shared_prefix the system prompt within it)");
    s->workload.sessions.on = 1;
    s->workload.sessions.turns_min = s->workload.sessions.turns_max = 4;
    s->workload.sessions.user_tokens = 64;
    yaml_node_t *v;
    if ((v = kv(k, nk, "turns")) && get_turns(p, v, &s->workload.sessions.turns_min, &s->workload.sessions.turns_max))
        return -1;
    if ((v = kv(k, nk, "user_tokens")) &&
        get_u32(p, v, "workload.sessions.user_tokens", &s->workload.sessions.user_tokens, 1))
        return -1;
    if ((v = kv(k, nk, "think_time")) && get_think(p, v, "workload.sessions.think_time", &s->workload.sessions.think_s))
        return -1;
    if ((v = kv(k, nk, "think"))) {
        const char *t = scalar(v);
        if (!t || (strcmp(t, "constant") && strcmp(t, "exponential")))
            return failf(p, v, "workload.sessions.think: expected constant or exponential (with mean think_time)");
        s->workload.sessions.think_exp = !strcmp(t, "exponential");
    }
    if ((v = kv(k, nk, "fan_out"))) { /* agent tasks: fan-out and join (load/agent.h) */
        const char *t = scalar(v);
        if (st_parse_range_u32(t, 1, ST_AGENT_FAN_OUT_MAX, &s->workload.sessions.fan_out_min,
                               &s->workload.sessions.fan_out_max))
            return failf(p, v, "workload.sessions.fan_out: expected N or MIN-MAX workers within 1..%u, got '%s'",
                         ST_AGENT_FAN_OUT_MAX, t ? t : "(not a scalar)");
        if (s->workload.sessions.turns_max < 2)
            return failf(p, v,
                         "workload.sessions.fan_out: needs turns of 2 or more (each later turn of the planner "
                         "fans out and joins)");
        return 0; /* (a task's prompts do not grow turn after turn: no conversation length to check) */
    }
    /* the longest conversation must stay within the longest prompt a workload holds */
    double r = 1 + s->workload.range_ratio;
    double longest = ceil(s->workload.input_tokens * r) +
                     (double)(s->workload.sessions.turns_max - 1) *
                         (ceil(s->workload.output_tokens * r) + ceil(s->workload.sessions.user_tokens * r));
    if (longest > ST_WORKLOAD_MAX_TOKENS)
        return failf(p, n, "workload.sessions: a %u-turn conversation grows to about %.0f tokens, more than %u",
                     s->workload.sessions.turns_max, longest, ST_WORKLOAD_MAX_TOKENS);
    return 0;
}

/* workload.trace_max_tokens, trace_window, trace_sample: which of the trace's rows the audit
 * replays (st_spec_trace_opts), as bench's --trace-max-context, --trace-window, --trace-sample. */
static int parse_trace_filters(pctx *p, keydef *k, int nk, st_spec *s)
{
    yaml_node_t *v;
    if ((v = kv(k, nk, "trace_max_tokens"))) {
        if (get_u32(p, v, "workload.trace_max_tokens", &s->workload.trace_max_tokens, 2))
            return -1;
        if (s->workload.trace_max_tokens > ST_WORKLOAD_MAX_TOKENS)
            return failf(p, v, "workload.trace_max_tokens: at most %u", ST_WORKLOAD_MAX_TOKENS);
    }
    if ((v = kv(k, nk, "trace_window"))) {
        const char *t = scalar(v), *colon = t ? strchr(t, ':') : NULL;
        char a[64] = "", b[64] = "";
        double from = 0, to = 0;
        int ok = colon && (size_t)(colon - t) < sizeof a && strlen(colon + 1) < sizeof b;
        if (ok) {
            memcpy(a, t, (size_t)(colon - t));
            a[colon - t] = '\0';
            snprintf(b, sizeof b, "%s", colon + 1);
            ok = (!a[0] || (st_parse_duration_s(a, &from) == 0 && from >= 0 && isfinite(from))) &&
                 (!b[0] || (st_parse_duration_s(b, &to) == 0 && to > from && isfinite(to)));
        }
        if (!ok)
            return failf(p, v,
                         "workload.trace_window: expected 'FROM:TO' with FROM < TO, durations after the trace's first "
                         "request (e.g. '1h:2h', '0:10m', '30m:'), got '%s'",
                         t ? t : "(not a scalar)");
        s->workload.trace_from_s = from;
        s->workload.trace_to_s = to;
    }
    if ((v = kv(k, nk, "trace_sample"))) {
        if (get_double(p, v, "workload.trace_sample", &s->workload.trace_sample, 0, 1))
            return -1;
        if (s->workload.trace_sample > 1)
            return failf(p, v, "workload.trace_sample: a fraction in (0, 1], e.g. 0.1 for one request in ten");
    }
    if ((v = kv(k, nk, "trace_replay"))) {
        const char *m = scalar(v);
        if (!m || (strcmp(m, "first") && strcmp(m, "spread")))
            return failf(p, v,
                         "workload.trace_replay: expected first (a run replays the trace's first requests) or spread "
                         "(a sample of whole sessions over the whole trace)");
        s->workload.trace_spread = !strcmp(m, "spread");
    }
    return 0;
}

void st_spec_trace_opts(const st_spec *s, st_trace_opts *o)
{
    memset(o, 0, sizeof *o);
    o->max_context = s->workload.trace_max_tokens;
    o->window_from_s = s->workload.trace_from_s;
    o->window_to_s = s->workload.trace_to_s;
    o->sample = s->workload.trace_sample;
    o->seed = s->workload.seed;
}

static void resolve_beside(const char *name, char **path);

/* workload.trace naming an agent trace (load/agent_file.h: its first bytes, the path resolved
 * against the spec's folder as st_spec_parse resolves it): its task graphs replayed whole, open loop
 * across tasks at the run's task rate (tasks/s), closed within one; the trace readers' filters and
 * the session keys mean nothing to it and are refused. 0, or -1 (failf). */
static int agent_trace(pctx *p, keydef *k, int nk, st_spec *s)
{
    char *path = strdup(s->workload.trace);
    if (!path)
        return failf(p, NULL, "out of memory");
    resolve_beside(p->name, &path);
    s->workload.agent = (int)st_agent_detect_file(path);
    if (!s->workload.agent) {
        free(path);
        return 0;
    }
    /* read whole now: a cycle or a missing parent is the spec's error, and its requests per task
     * size the runs (st_spec_turns_mean) */
    st_agent_graph g;
    char e[768];
    int rc = st_agent_load_file(path, 0, &g, NULL, e, sizeof e);
    free(path);
    if (rc)
        return failf(p, kv(k, nk, "trace"), "workload.trace: %s", e);
    s->workload.agent_requests_per_task = g.n_tasks ? (double)g.n / g.n_tasks : 1;
    st_agent_graph_free(&g);
    const char *no[] = { "trace_max_tokens", "trace_window", "trace_sample", "trace_replay", "sessions", "think_time" };
    yaml_node_t *v;
    for (int i = 0; i < 6; i++)
        if ((v = kv(k, nk, no[i])))
            return failf(p, v,
                         "workload.%s: not with an agent trace (%s): its task graphs replay whole, each node when "
                         "its parents answered plus its recorded gap; remove it",
                         no[i], s->workload.trace);
    s->workload.sessions.on = 1; /* a task is a session: the rate counts task starts */
    return 0;
}

/* workload.trace: the trace named, the synthetic sizes refused, an agent trace read or the trace filters */
static int workload_trace(pctx *p, keydef *k, int nk, st_spec *s)
{
    yaml_node_t *v = kv(k, nk, "trace");
    s->workload.kind = ST_WL_TRACE;
    if (get_str(p, v, "workload.trace", &s->workload.trace))
        return -1;
    const char *syn[] = { "input_tokens", "output_tokens", "range_ratio", "shared_prefix", "semantics" };
    for (int i = 0; i < 5; i++)
        if ((v = kv(k, nk, syn[i])))
            return failf(p, v, "workload.%s: a trace gives the token sizes; remove it or the trace", syn[i]);
    if (agent_trace(p, k, nk, s) || (!s->workload.agent && parse_trace_filters(p, k, nk, s)))
        return -1;
    return 0;
}

/* a synthetic workload: no trace filters; its token sizes, prefix and prefix semantics */
static int workload_synthetic(pctx *p, yaml_node_t *n, keydef *k, int nk, st_spec *s)
{
    yaml_node_t *v;
    const char *tf[] = { "trace_max_tokens", "trace_window", "trace_sample", "trace_replay" };
    for (int i = 0; i < 4; i++)
        if ((v = kv(k, nk, tf[i])))
            return failf(p, v, "workload.%s: filters a trace; the workload has none (workload.trace)", tf[i]);
    s->workload.kind = ST_WL_SYNTHETIC;
    if (!(v = kv(k, nk, "input_tokens")))
        return failf(p, n, "workload: 'input_tokens' is required (or 'trace')");
    if (get_u32(p, v, "workload.input_tokens", &s->workload.input_tokens, 1))
        return -1;
    if (!(v = kv(k, nk, "output_tokens")))
        return failf(p, n, "workload: 'output_tokens' is required (or 'trace')");
    if (get_u32(p, v, "workload.output_tokens", &s->workload.output_tokens, 1))
        return -1;
    if ((v = kv(k, nk, "range_ratio"))) {
        if (get_double(p, v, "workload.range_ratio", &s->workload.range_ratio, 0, 0))
            return -1;
        if (s->workload.range_ratio >= 1)
            return failf(p, v, "workload.range_ratio: must be in [0, 1), e.g. 0.1 for +-10 %%");
    }
    if ((v = kv(k, nk, "semantics"))) {
        const char *m = scalar(v);
        if (!m || (strcmp(m, "servetune") && strcmp(m, "vllm")))
            return failf(p, v,
                         "workload.semantics: expected servetune (the prefix counts within input_tokens) or "
                         "vllm (on top of it, as vllm bench serve's --random-prefix-len)");
        s->workload.vllm_semantics = !strcmp(m, "vllm");
    }
    if ((v = kv(k, nk, "shared_prefix"))) {
        if (get_u32(p, v, "workload.shared_prefix", &s->workload.shared_prefix, 0))
            return -1;
        if (!s->workload.vllm_semantics && s->workload.shared_prefix >= s->workload.input_tokens)
            return failf(p, v, "workload.shared_prefix: %u must be smaller than input_tokens (%u)",
                         s->workload.shared_prefix, s->workload.input_tokens);
    }
    return 0;
}

/* the keys of every workload's runs: requests a rate, seed, arrival, speculation, temperature, prompts */
static int workload_runs(pctx *p, keydef *k, int nk, st_spec *s)
{
    yaml_node_t *v;
    if ((v = kv(k, nk, "requests_per_rate"))) {
        if (get_u32(p, v, "workload.requests_per_rate", &s->workload.requests_per_rate, 1))
            return -1;
        if (s->workload.requests_per_rate > ST_SPEC_MAX_REQUESTS)
            return failf(p, v, "workload.requests_per_rate: at most %u", ST_SPEC_MAX_REQUESTS);
    }
    if ((v = kv(k, nk, "seed"))) {
        const char *ss = scalar(v);
        if (!ss || st_parse_u64(ss, &s->workload.seed))
            return failf(p, v, "workload.seed: expected a whole number >= 0");
    }
    if ((v = kv(k, nk, "arrival"))) {
        const char *a = scalar(v);
        if (!a || (strcmp(a, "poisson") && strcmp(a, "constant") && strcmp(a, "gamma")))
            return failf(p, v, "workload.arrival: expected poisson, constant or gamma");
        if (get_str(p, v, "workload.arrival", &s->workload.arrival))
            return -1;
    }
    if ((v = kv(k, nk, "allow_synthetic_speculation")) &&
        get_bool(p, v, "workload.allow_synthetic_speculation", &s->workload.allow_synthetic_speculation))
        return -1;
    if ((v = kv(k, nk, "temperature"))) {
        if (get_double(p, v, "workload.temperature", &s->workload.temperature, 0, 0))
            return -1;
        if (s->workload.temperature > ST_SPEC_MAX_TEMPERATURE)
            return failf(p, v, "workload.temperature: at most %g", ST_SPEC_MAX_TEMPERATURE);
        s->workload.temperature_set = 1;
    }
    if ((v = kv(k, nk, "exact_prompts"))) {
        const char *m = scalar(v);
        if (!m || (strcmp(m, "auto") && strcmp(m, "off")))
            return failf(p, v,
                         "workload.exact_prompts: expected auto (text APIs: each prompt fitted with the engine's "
                         "/tokenize) or off (lengths estimated, one token a word)");
        s->workload.exact_prompts_off = !strcmp(m, "off");
    }
    return 0;
}

/* burstiness (gamma arrivals only), sessions and a replayed trace's think time */
static int workload_timing(pctx *p, keydef *k, int nk, st_spec *s)
{
    yaml_node_t *v;
    s->workload.burstiness = 1.0;
    if ((v = kv(k, nk, "burstiness"))) {
        if (get_double(p, v, "workload.burstiness", &s->workload.burstiness, 0, 1))
            return -1;
        if (!s->workload.arrival || strcmp(s->workload.arrival, "gamma"))
            return failf(p, v, "workload.burstiness: only with arrival: gamma");
    }
    if ((v = kv(k, nk, "sessions")) && parse_sessions(p, v, s))
        return -1;
    if ((v = kv(k, nk, "think_time"))) {
        /* a replayed trace: one think time for every later turn (as bench --think-time) */
        if (s->workload.kind != ST_WL_TRACE || !s->workload.sessions.on)
            return failf(p, v,
                         "workload.think_time: only with a trace and sessions: replay (synthetic sessions take "
                         "sessions.think_time)");
        if (get_think(p, v, "workload.think_time", &s->workload.sessions.think_s))
            return -1;
        s->workload.sessions.think_set = 1;
    }
    return 0;
}

/* workload: a trace or synthetic sizes, then the keys of every workload */
static int parse_workload(pctx *p, yaml_node_t *n, st_spec *s)
{
    keydef k[] = { { "input_tokens", 0, 0 },
                   { "output_tokens", 0, 0 },
                   { "range_ratio", 0, 0 },
                   { "shared_prefix", 0, 0 },
                   { "requests_per_rate", 0, 0 },
                   { "seed", 0, 0 },
                   { "trace", 0, 0 },
                   { "arrival", 0, 0 },
                   { "burstiness", 0, 0 },
                   { "semantics", 0, 0 },
                   { "exact_prompts", 0, 0 },
                   { "sessions", 0, 0 },
                   { "think_time", 0, 0 },
                   { "allow_synthetic_speculation", 0, 0 },
                   { "temperature", 0, 0 },
                   { "trace_max_tokens", 0, 0 },
                   { "trace_window", 0, 0 },
                   { "trace_sample", 0, 0 },
                   { "trace_replay", 0, 0 } };
    int nk = (int)(sizeof k / sizeof *k);
    if (read_map(p, n, "workload", k, nk))
        return -1;
    s->workload.seed = 1;
    s->workload.requests_per_rate = 200;
    if (kv(k, nk, "trace") ? workload_trace(p, k, nk, s) : workload_synthetic(p, n, k, nk, s))
        return -1;
    if (workload_runs(p, k, nk, s) || workload_timing(p, k, nk, s))
        return -1;
    return 0;
}

static int parse_rates(pctx *p, yaml_node_t *n, st_spec *s)
{
    if (!n || n->type != YAML_SEQUENCE_NODE)
        return failf(p, n, "rates: expected a list of request rates (req/s) or inf, e.g. [1, 2, 4, inf]");
    int count = (int)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (count == 0)
        return failf(p, n, "rates: the list is empty; give at least one rate");
    if (count > ST_SPEC_MAX_RATES)
        return failf(p, n, "rates: more than %d rates", ST_SPEC_MAX_RATES);
    s->rates = calloc((size_t)count, sizeof(double));
    if (!s->rates)
        return failf(p, n, "out of memory");
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
        yaml_node_t *e = node(p, *it);
        const char *r = scalar(e);
        double d;
        if (!r || st_parse_rate(r, &d) || !(d > 0) || (isfinite(d) && d > ST_SPEC_MAX_RATE))
            return failf(p, e, "rates: '%s' is not a positive rate up to %g req/s, or inf", r ? r : "(not a scalar)",
                         ST_SPEC_MAX_RATE);
        for (int i = 0; i < s->n_rates; i++)
            if (s->rates[i] == d)
                return failf(p, e, "rates: %s is listed twice", r);
        if (s->n_rates > 0 && d < s->rates[s->n_rates - 1])
            return failf(p, e, "rates: must be increasing (%s comes after %g)", r, s->rates[s->n_rates - 1]);
        s->rates[s->n_rates++] = d;
    }
    return 0;
}

static int parse_concurrency(pctx *p, yaml_node_t *n, st_spec *s)
{
    if (!n || n->type != YAML_SEQUENCE_NODE)
        return failf(p, n, "concurrency: expected a list of concurrency levels (requests in flight), e.g. [1, 16, 64]");
    int count = (int)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (count == 0)
        return failf(p, n, "concurrency: the list is empty; give at least one level");
    if (count > ST_SPEC_MAX_RATES)
        return failf(p, n, "concurrency: more than %d levels", ST_SPEC_MAX_RATES);
    s->rates = calloc((size_t)count, sizeof(double));
    if (!s->rates)
        return failf(p, n, "out of memory");
    s->closed_loop = 1;
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
        yaml_node_t *e = node(p, *it);
        uint32_t c;
        if (get_u32(p, e, "concurrency", &c, 1))
            return -1;
        if (c > ST_SPEC_MAX_CONCURRENCY)
            return failf(p, e, "concurrency: at most %d", ST_SPEC_MAX_CONCURRENCY);
        if (s->n_rates > 0 && c <= s->rates[s->n_rates - 1])
            return failf(p, e, "concurrency: must be increasing (%u comes after %g)", c, s->rates[s->n_rates - 1]);
        s->rates[s->n_rates++] = c;
    }
    return 0;
}

static int parse_slo_key(const char *k, st_slo_term *t)
{
    /* <metric>_p<pct>_ms */
    for (int m = 0; m < ST_SLO__COUNT; m++) {
        size_t ml = strlen(metric_names[m]);
        if (strncmp(k, metric_names[m], ml) || strncmp(k + ml, "_p", 2))
            continue;
        const char *pp = k + ml + 2;
        static const struct {
            const char *s;
            double v;
        } pcts[] = { { "50", 50 }, { "90", 90 }, { "95", 95 }, { "99", 99 } };
        for (size_t i = 0; i < sizeof pcts / sizeof *pcts; i++) {
            size_t pl = strlen(pcts[i].s);
            if (!strncmp(pp, pcts[i].s, pl) && !strcmp(pp + pl, "_ms")) {
                t->metric = (st_slo_metric)m;
                t->pct = pcts[i].v;
                return 0;
            }
        }
    }
    return -1;
}

static int parse_slo(pctx *p, yaml_node_t *n, st_spec *s)
{
    if (!n || n->type != YAML_MAPPING_NODE)
        return failf(p, n, "slo: expected a mapping (ttft_p95_ms: ..., tpot_p95_ms: ...)");
    st_audit_slo *slo = &s->slo;
    slo->n = 2;
    slo->terms[0] = (st_slo_term){ ST_SLO_TTFT, 95, -1 };
    slo->terms[1] = (st_slo_term){ ST_SLO_TPOT, 95, -1 };
    for (yaml_node_pair_t *pr = n->data.mapping.pairs.start; pr < n->data.mapping.pairs.top; pr++) {
        yaml_node_t *k = node(p, pr->key), *v = node(p, pr->value);
        const char *ks = scalar(k);
        st_slo_term t;
        if (!ks || parse_slo_key(ks, &t))
            return failf(p, k,
                         "slo: unknown key '%s' (expected METRIC_pPCT_ms with METRIC ttft, tpot, itl, e2e, ttfat or "
                         "makespan and "
                         "PCT 50, 90, 95 or 99, e.g. e2e_p99_ms)",
                         ks ? ks : "?");
        double ms;
        char what[80];
        snprintf(what, sizeof what, "slo.%s", ks);
        if (get_double(p, v, what, &ms, 0, 1))
            return -1;
        int slot = -1;
        for (int i = 0; i < slo->n; i++)
            if (slo->terms[i].metric == t.metric && slo->terms[i].pct == t.pct)
                slot = i;
        if (slot >= 0 && slo->terms[slot].max_ms >= 0)
            return failf(p, k, "slo: duplicate key '%s'", ks);
        if (slot < 0) {
            if (slo->n >= ST_SLO_MAX_TERMS)
                return failf(p, k, "slo: too many terms");
            slot = slo->n++;
        }
        t.max_ms = ms;
        slo->terms[slot] = t;
    }
    if (slo->terms[0].max_ms < 0)
        return failf(p, n, "slo: 'ttft_p95_ms' is required");
    if (slo->terms[1].max_ms < 0)
        return failf(p, n, "slo: 'tpot_p95_ms' is required");
    return 0;
}

/* The option name of a flag token ("--x=1" -> "--x"), or NULL when it is not an option. */
static size_t flag_name_len(const char *tok)
{
    if (tok[0] != '-' || !tok[1] || (tok[1] >= '0' && tok[1] <= '9') || tok[1] == '.')
        return 0;
    const char *eq = strchr(tok, '=');
    return eq ? (size_t)(eq - tok) : strlen(tok);
}

static int parse_configs(pctx *p, yaml_node_t *n, st_spec *s)
{
    if (!n || n->type != YAML_SEQUENCE_NODE)
        return failf(p, n, "configurations: expected a list of configurations (- name: ...)");
    int count = (int)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (count == 0)
        return failf(p, n, "configurations: the list is empty");
    if (count > SPEC_MAX_LIST)
        return failf(p, n, "configurations: more than %d", SPEC_MAX_LIST);
    s->configs = calloc((size_t)count, sizeof *s->configs);
    if (!s->configs)
        return failf(p, n, "out of memory");
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
        yaml_node_t *e = node(p, *it);
        st_spec_config *c = &s->configs[s->n_configs++];
        c->line = (int)e->start_mark.line + 1;
        keydef k[] = { { "name", 0, 0 },  { "add_flags", 0, 0 }, { "remove_flags", 0, 0 },
                       { "model", 0, 0 }, { "env", 0, 0 },       { "reason", 0, 0 } };
        int nk = (int)(sizeof k / sizeof *k);
        if (read_map(p, e, "configurations[]", k, nk))
            return -1;
        yaml_node_t *v;
        if (!(v = kv(k, nk, "name")))
            return failf(p, e, "configurations: each configuration needs a 'name'");
        if (get_str(p, v, "configurations[].name", &c->name))
            return -1;
        for (const char *q = c->name; *q; q++)
            if (!(isalnum((unsigned char)*q) || *q == '-' || *q == '_' || *q == '.' || *q == '+'))
                return failf(p, v, "configurations: name '%s': use letters, digits, - _ . + only (it names files)",
                             c->name);
        if (strlen(c->name) > 64)
            return failf(p, v, "configurations: name '%s' is longer than 64 characters", c->name);
        for (int i = 0; i < s->n_configs - 1; i++)
            if (!strcmp(s->configs[i].name, c->name))
                return failf(p, v, "configurations: duplicate name '%s' (first at line %d)", c->name,
                             s->configs[i].line);
        char what[128];
        snprintf(what, sizeof what, "configurations[%s].add_flags", c->name);
        if ((v = kv(k, nk, "add_flags")) &&
            (get_strlist(p, v, what, &c->add_flags) || check_flag_secrets(p, v, what, &c->add_flags)))
            return -1;
        if (c->add_flags.n && !flag_name_len(c->add_flags.v[0]))
            return failf(p, v, "%s: must start with a flag (--name), got '%s'", what, c->add_flags.v[0]);
        snprintf(what, sizeof what, "configurations[%s].remove_flags", c->name);
        if ((v = kv(k, nk, "remove_flags"))) {
            if (get_strlist(p, v, what, &c->remove_flags))
                return -1;
            for (int i = 0; i < c->remove_flags.n; i++)
                if (!flag_name_len(c->remove_flags.v[i]) || strchr(c->remove_flags.v[i], '='))
                    return failf(p, v, "%s: '%s' is not a flag name (e.g. --enable-prefix-caching)", what,
                                 c->remove_flags.v[i]);
        }
        snprintf(what, sizeof what, "configurations[%s].model", c->name);
        if ((v = kv(k, nk, "model")) && get_str(p, v, what, &c->model))
            return -1;
        snprintf(what, sizeof what, "configurations[%s].env", c->name);
        if ((v = kv(k, nk, "env")) && get_env(p, v, what, &c->env))
            return -1;
        if ((v = kv(k, nk, "reason"))) {
            snprintf(what, sizeof what, "configurations[%s].reason", c->name);
            if (get_str(p, v, what, &c->reason))
                return -1;
            if (strchr(c->reason, '\n'))
                return failf(p, v, "%s: one line, please", what);
        }
        if (s->engine.kind == ST_ENGINE_ENDPOINT && (c->add_flags.n || c->remove_flags.n || c->model || c->env.n))
            return failf(p, e,
                         "configurations[%s]: an endpoint is not started by servetune, so a configuration "
                         "cannot change its flags, model or environment",
                         c->name);
    }
    return 0;
}

const char *st_spec_method_name(const st_spec *s)
{
    if (s->search.mode == ST_SEARCH_SUSTAINED)
        return s->closed_loop ? "sustained-concurrency" : "sustained";
    return s->closed_loop ? "closed-loop-count" : "burst";
}

const char *st_search_mode_name(st_search_mode m)
{
    switch (m) {
    case ST_SEARCH_GRID: return "burst";
    case ST_SEARCH_REFINE: return "burst-refine";
    case ST_SEARCH_SUSTAINED: return "sustained";
    }
    return "?";
}

static int get_positive_duration(pctx *p, yaml_node_t *v, const char *what, double *out)
{
    const char *t = scalar(v);
    double d;
    if (!t || st_parse_duration_s(t, &d) || !(d > 0) || !isfinite(d) || d > ST_SPEC_MAX_DURATION_S)
        return failf(p, v, "%s: expected a positive duration up to %g s such as 600, 30s, 500ms or 10m, got '%s'", what,
                     ST_SPEC_MAX_DURATION_S, t ? t : "(not a scalar)");
    *out = d;
    return 0;
}

static int parse_search(pctx *p, yaml_node_t *n, st_spec *s)
{
    keydef k[] = { { "mode", 0, 0 },         { "tolerance", 0, 0 },   { "request_budget", 0, 0 },
                   { "early_stop", 0, 0 },   { "skip_margin", 0, 0 }, { "confidence", 0, 0 },
                   { "max_duration", 0, 0 }, { "min_window", 0, 0 },  { "min_window_requests", 0, 0 },
                   { "warmup_e2e", 0, 0 },   { "max_runs", 0, 0 },    { "max_replicates", 0, 0 },
                   { "start", 0, 0 } };
    int nk = (int)(sizeof k / sizeof *k);
    if (read_map(p, n, "search", k, nk))
        return -1;
    yaml_node_t *v;
    if ((v = kv(k, nk, "mode"))) {
        const char *m = scalar(v);
        if (m && (!strcmp(m, "grid") || !strcmp(m, "burst")))
            s->search.mode = ST_SEARCH_GRID;
        else if (m && (!strcmp(m, "refine") || !strcmp(m, "burst-refine")))
            s->search.mode = ST_SEARCH_REFINE;
        else if (m && !strcmp(m, "sustained"))
            s->search.mode = ST_SEARCH_SUSTAINED;
        else
            return failf(p, v, "search.mode: expected sustained, burst (also: grid) or burst-refine (also: refine)");
    }
    if ((v = kv(k, nk, "tolerance"))) {
        if (get_double(p, v, "search.tolerance", &s->search.tolerance, 0, 1))
            return -1;
        if (s->search.tolerance >= 1)
            return failf(p, v, "search.tolerance: a fraction of the passing rate, e.g. 0.1 (must be < 1)");
    }
    if ((v = kv(k, nk, "request_budget")) && get_u32(p, v, "search.request_budget", &s->search.request_budget, 0))
        return -1;
    if ((v = kv(k, nk, "early_stop")) && get_bool(p, v, "search.early_stop", &s->search.early_stop))
        return -1;
    if ((v = kv(k, nk, "skip_margin"))) {
        if (get_double(p, v, "search.skip_margin", &s->search.skip_margin, 0, 0))
            return -1;
        if (s->search.skip_margin != 0 && s->search.skip_margin <= 1)
            return failf(p, v, "search.skip_margin: 0 (never skip) or a factor > 1, e.g. 2");
    }
    if ((v = kv(k, nk, "confidence"))) {
        if (get_double(p, v, "search.confidence", &s->search.confidence, 0, 1))
            return -1;
        if (s->search.confidence < 0.5 || s->search.confidence > 0.999)
            return failf(p, v, "search.confidence: between 0.5 and 0.999, e.g. 0.95");
    }
    if ((v = kv(k, nk, "max_duration")) &&
        get_positive_duration(p, v, "search.max_duration", &s->search.max_duration_s))
        return -1;
    if ((v = kv(k, nk, "min_window")) && get_positive_duration(p, v, "search.min_window", &s->search.min_window_s))
        return -1;
    if ((v = kv(k, nk, "min_window_requests"))) {
        if (get_u32(p, v, "search.min_window_requests", &s->search.min_window_requests, 20))
            return -1;
        if (s->search.min_window_requests > 1000000)
            return failf(p, v, "search.min_window_requests: at most 1000000");
    }
    if ((v = kv(k, nk, "warmup_e2e"))) {
        if (get_double(p, v, "search.warmup_e2e", &s->search.warmup_e2e, 0, 0))
            return -1;
        if (s->search.warmup_e2e > 100)
            return failf(p, v, "search.warmup_e2e: at most 100 (median E2Es)");
    }
    if ((v = kv(k, nk, "max_runs"))) {
        if (get_u32(p, v, "search.max_runs", &s->search.max_runs, 1))
            return -1;
        if (s->search.max_runs > ST_SEARCH_MAX_RUNS)
            return failf(p, v, "search.max_runs: at most %d", ST_SEARCH_MAX_RUNS);
    }
    if ((v = kv(k, nk, "max_replicates"))) {
        if (get_u32(p, v, "search.max_replicates", &s->search.max_replicates, 1))
            return -1;
        if (s->search.max_replicates > 10)
            return failf(p, v, "search.max_replicates: at most 10");
    }
    if ((v = kv(k, nk, "start"))) {
        const char *t = scalar(v);
        double d;
        if (t && !strcmp(t, "grid"))
            s->search.start = ST_START_GRID;
        else if (t && !strcmp(t, "predict"))
            s->search.start = ST_START_PREDICT;
        else if (t && !strcmp(t, "auto"))
            s->search.start = ST_START_AUTO;
        else if (t && !st_parse_double(t, &d) && d > 0 && isfinite(d)) {
            s->search.start = ST_START_RATE;
            s->search.start_rate = d;
        } else
            return failf(p, v, "search.start: expected auto, grid, predict or a rate (req/s, or a concurrency)");
    }
    return 0;
}

static int parse_timeouts(pctx *p, yaml_node_t *n, st_spec *s)
{
    keydef k[] = { { "startup", 0, 0 }, { "request", 0, 0 }, { "stop_grace", 0, 0 } };
    int nk = 3;
    if (read_map(p, n, "timeouts", k, nk))
        return -1;
    double *dst[] = { &s->timeouts.startup_s, &s->timeouts.request_s, &s->timeouts.stop_grace_s };
    for (int i = 0; i < nk; i++) {
        if (!k[i].val)
            continue;
        const char *t = scalar(k[i].val);
        double d;
        if (!t || st_parse_duration_s(t, &d) || !(d > 0) || !isfinite(d) || d > ST_SPEC_MAX_TIMEOUT_S)
            return failf(p, k[i].val,
                         "timeouts.%s: expected a positive duration of at most %g s (a day) such as 600, 30s, "
                         "500ms or 10m, got '%s'",
                         k[i].key, ST_SPEC_MAX_TIMEOUT_S, t ? t : "(not a scalar)");
        *dst[i] = d;
    }
    return 0;
}

static const char *gpu_request_names[] = { "gres", "gpus", "none" };

const char *st_gpu_request_name(st_gpu_request g)
{
    return (g >= ST_GPU_GRES && g <= ST_GPU_NONE) ? gpu_request_names[g] : "unknown";
}

int st_gpu_request_from_name(const char *name, st_gpu_request *out)
{
    for (int i = 0; name && i <= ST_GPU_NONE; i++)
        if (!strcmp(name, gpu_request_names[i])) {
            *out = (st_gpu_request)i;
            return 0;
        }
    return -1;
}

/* A word for a Slurm or Kubernetes field: printable ASCII without spaces, quotes or backslashes
 * (the value travels in an argument vector, but names with such bytes are mistakes). */
static int get_word(pctx *p, yaml_node_t *n, const char *what, char **out)
{
    if (get_str(p, n, what, out))
        return -1;
    for (const char *c = *out; *c; c++)
        if (*c <= ' ' || *c >= 127 || strchr("'\"\\`$", *c))
            return failf(p, n, "%s: '%s' is not a name (no spaces, quotes, $ or control characters)", what, *out);
    return 0;
}

static int get_count(pctx *p, yaml_node_t *n, const char *what, int *out, uint32_t lo, uint32_t hi)
{
    uint32_t v;
    if (get_u32(p, n, what, &v, lo))
        return -1;
    if (v > hi)
        return failf(p, n, "%s: at most %u", what, hi);
    *out = (int)v;
    return 0;
}

static int parse_slurm(pctx *p, yaml_node_t *n, st_spec *s)
{
    keydef k[] = { { "partition", 0, 0 },     { "account", 0, 0 },     { "time", 0, 0 },
                   { "gpus_per_task", 0, 0 }, { "gpu_request", 0, 0 }, { "max_concurrent", 0, 0 },
                   { "sbatch_args", 0, 0 } };
    int nk = (int)(sizeof k / sizeof *k);
    if (read_map(p, n, "cluster.slurm", k, nk))
        return -1;
    yaml_node_t *v;
    if ((v = kv(k, nk, "partition")) && get_word(p, v, "cluster.slurm.partition", &s->cluster.slurm.partition))
        return -1;
    if ((v = kv(k, nk, "account")) && get_word(p, v, "cluster.slurm.account", &s->cluster.slurm.account))
        return -1;
    if ((v = kv(k, nk, "time"))) {
        if (get_word(p, v, "cluster.slurm.time", &s->cluster.slurm.time))
            return -1;
        if (strspn(s->cluster.slurm.time, "0123456789:-") != strlen(s->cluster.slurm.time))
            return failf(p, v, "cluster.slurm.time: a Slurm time limit such as 90, 2:00:00 or 1-12:00:00");
    }
    if ((v = kv(k, nk, "gpus_per_task")) &&
        get_count(p, v, "cluster.slurm.gpus_per_task", &s->cluster.slurm.gpus_per_task, 1, 1024))
        return -1;
    if ((v = kv(k, nk, "gpu_request")) && st_gpu_request_from_name(scalar(v), &s->cluster.slurm.gpu_request))
        return failf(p, v, "cluster.slurm.gpu_request: expected gres, gpus or none");
    if ((v = kv(k, nk, "max_concurrent")) &&
        get_count(p, v, "cluster.slurm.max_concurrent", &s->cluster.slurm.max_concurrent, 1, 100000))
        return -1;
    if ((v = kv(k, nk, "sbatch_args")) &&
        (get_strlist(p, v, "cluster.slurm.sbatch_args", &s->cluster.slurm.sbatch_args) ||
         check_flag_secrets(p, v, "cluster.slurm.sbatch_args", &s->cluster.slurm.sbatch_args)))
        return -1;
    return 0;
}

/* A Kubernetes name: lower-case letters, digits, '-' and '.', starting and ending with a letter or
 * digit, at most max characters (RFC 1123). */
static int k8s_name_ok(const char *v, size_t max)
{
    size_t n = strlen(v);
    if (!n || n > max || !isalnum((unsigned char)v[0]) || !isalnum((unsigned char)v[n - 1]))
        return 0;
    for (const char *c = v; *c; c++)
        if (!(islower((unsigned char)*c) || isdigit((unsigned char)*c) || *c == '-' || *c == '.'))
            return 0;
    return 1;
}

/* A word for a command line or a manifest: printable ASCII without spaces, quotes, '\\', '`', '$'. */
static int word_ok(const char *v)
{
    for (const char *c = v; *c; c++)
        if (*c <= ' ' || *c >= 127 || strchr("'\"\\`$", *c))
            return 0;
    return 1;
}

int st_spec_k8s_value_check(st_k8s_value which, const char *what, const char *v, char *err, size_t errlen)
{
    if (!v || !*v) {
        snprintf(err, errlen, "%s: must not be empty", what);
        return -1;
    }
    if (!word_ok(v)) {
        int printable = 1; /* the value is quoted back only when that prints it as it is */
        for (const char *c = v; *c; c++)
            printable &= *c >= ' ' && *c < 127;
        if (printable)
            snprintf(err, errlen, "%s: '%s' is not a name (no spaces, quotes, $ or control characters)", what, v);
        else
            snprintf(err, errlen, "%s: not a name (a control character or a byte outside ASCII)", what);
        return -1;
    }
    if (which == ST_K8S_NAMESPACE && (!k8s_name_ok(v, 63) || strchr(v, '.'))) {
        snprintf(err, errlen, "%s: lower-case letters, digits and '-' (at most 63)", what);
        return -1;
    }
    if (which == ST_K8S_VOLUME_CLAIM && !k8s_name_ok(v, 253)) {
        snprintf(err, errlen, "%s: lower-case letters, digits, '-' and '.'", what);
        return -1;
    }
    return 0;
}

static int parse_kubernetes(pctx *p, yaml_node_t *n, st_spec *s)
{
    keydef k[] = { { "image", 0, 0 },
                   { "namespace", 0, 0 },
                   { "volume_claim", 0, 0 },
                   { "gpu_resource", 0, 0 },
                   { "parallelism", 0, 0 } };
    int nk = (int)(sizeof k / sizeof *k);
    if (read_map(p, n, "cluster.kubernetes", k, nk))
        return -1;
    yaml_node_t *v;
    static const struct {
        const char *key, *what;
        st_k8s_value which;
    } named[] = { { "image", "cluster.kubernetes.image", ST_K8S_IMAGE },
                  { "namespace", "cluster.kubernetes.namespace", ST_K8S_NAMESPACE },
                  { "volume_claim", "cluster.kubernetes.volume_claim", ST_K8S_VOLUME_CLAIM } };
    char **dst[] = { &s->cluster.kubernetes.image, &s->cluster.kubernetes.ns, &s->cluster.kubernetes.volume_claim };
    for (int i = 0; i < 3; i++) {
        char msg[600];
        if (!(v = kv(k, nk, named[i].key)))
            continue;
        if (get_word(p, v, named[i].what, dst[i]))
            return -1;
        if (st_spec_k8s_value_check(named[i].which, named[i].what, *dst[i], msg, sizeof msg))
            return failf(p, v, "%s", msg);
    }
    if ((v = kv(k, nk, "gpu_resource")) &&
        get_word(p, v, "cluster.kubernetes.gpu_resource", &s->cluster.kubernetes.gpu_resource))
        return -1;
    if ((v = kv(k, nk, "parallelism")) &&
        get_count(p, v, "cluster.kubernetes.parallelism", &s->cluster.kubernetes.parallelism, 1, 100000))
        return -1;
    return 0;
}

static int parse_cluster(pctx *p, yaml_node_t *n, st_spec *s)
{
    keydef k[] = { { "slurm", 0, 0 }, { "kubernetes", 0, 0 } };
    if (read_map(p, n, "cluster", k, 2))
        return -1;
    if (k[0].val && parse_slurm(p, k[0].val, s))
        return -1;
    if (k[1].val && parse_kubernetes(p, k[1].val, s))
        return -1;
    return 0;
}

static void set_defaults(st_spec *s)
{
    s->search.mode = ST_SEARCH_SUSTAINED;
    s->search.tolerance = 0.1;
    s->search.request_budget = 0;
    s->search.early_stop = 1;
    s->search.skip_margin = 2.0;
    s->search.confidence = 0.95;
    s->search.max_duration_s = 300;
    s->search.min_window_s = 20;
    s->search.min_window_requests = 200;
    s->search.warmup_e2e = 2;
    s->search.max_runs = 12;
    s->search.max_replicates = 3;
    s->search.start = ST_START_AUTO;
    s->timeouts.startup_s = 900;
    s->timeouts.request_s = 300;
    s->timeouts.stop_grace_s = 15;
    s->warmup_requests = 10;
}

/* A list of whole numbers (at most ST_PLAN_LIST_MAX, each in [lo, hi]). */
static int get_longs(pctx *p, yaml_node_t *n, const char *what, long *out, int *count, long lo, long hi)
{
    if (!n || n->type != YAML_SEQUENCE_NODE)
        return failf(p, n, "%s: expected a list of whole numbers", what);
    *count = 0;
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
        yaml_node_t *e = node(p, *it);
        const char *t = scalar(e);
        long l;
        if (!t || st_parse_long(t, &l) || l < lo || l > hi)
            return failf(p, e, "%s: expected whole numbers from %ld to %ld, got '%s'", what, lo, hi,
                         t ? t : "(not a scalar)");
        if (*count == ST_PLAN_LIST_MAX)
            return failf(p, e, "%s: at most %d values", what, ST_PLAN_LIST_MAX);
        out[(*count)++] = l;
    }
    if (!*count)
        return failf(p, n, "%s: an empty list (leave the key out for the default)", what);
    return 0;
}

static int get_duration(pctx *p, yaml_node_t *n, const char *what, double *out)
{
    const char *t = scalar(n);
    double d;
    if (!t || st_parse_duration_s(t, &d) || !(d >= 0) || !isfinite(d) || d > ST_SPEC_MAX_DURATION_S)
        return failf(p, n, "%s: expected a duration up to %g s such as 600, 30s, 500ms or 10m, got '%s'", what,
                     ST_SPEC_MAX_DURATION_S, t ? t : "(not a scalar)");
    *out = d;
    return 0;
}

static const char *const weight_formats[] = { "bf16", "fp16", "fp8", "int8", "awq", "gptq", NULL };

static int parse_plan_speculation(pctx *p, yaml_node_t *n, st_spec *s);

static int parse_plan(pctx *p, yaml_node_t *n, st_spec *s)
{
    keydef k[] = { { "gpus", 0, 0 },          { "gpus_per_replica", 0, 0 },
                   { "checkpoints", 0, 0 },   { "kv_cache_dtype", 0, 0 },
                   { "max_num_seqs", 0, 0 },  { "max_num_batched_tokens", 0, 0 },
                   { "max_model_len", 0, 0 }, { "prices", 0, 0 },
                   { "provider", 0, 0 },      { "top", 0, 0 },
                   { "speculation", 0, 0 } };
    int nk = (int)(sizeof k / sizeof *k);
    if (read_map(p, n, "plan", k, nk))
        return -1;
    s->plan.set = 1;
    s->plan.top = 3;
    yaml_node_t *v;
    if ((v = kv(k, nk, "gpus")) && get_strlist(p, v, "plan.gpus", &s->plan.gpus))
        return -1;
    long tps[ST_PLAN_LIST_MAX];
    if ((v = kv(k, nk, "gpus_per_replica"))) {
        if (get_longs(p, v, "plan.gpus_per_replica", tps, &s->plan.n_tp, 1, 64))
            return -1;
        for (int i = 0; i < s->plan.n_tp; i++)
            s->plan.tp[i] = (int)tps[i];
    }
    if ((v = kv(k, nk, "checkpoints"))) {
        if (v->type != YAML_MAPPING_NODE || v->data.mapping.pairs.top == v->data.mapping.pairs.start)
            return failf(p, v,
                         "plan.checkpoints: a mapping of weight format to checkpoint, e.g. {bf16: Qwen/Qwen3-8B, "
                         "fp8: Qwen/Qwen3-8B-FP8}");
        for (yaml_node_pair_t *pr = v->data.mapping.pairs.start; pr < v->data.mapping.pairs.top; pr++) {
            yaml_node_t *key = node(p, pr->key), *val = node(p, pr->value);
            const char *w = scalar(key);
            int known = 0;
            for (int i = 0; w && weight_formats[i]; i++)
                known |= !strcmp(w, weight_formats[i]);
            if (!known)
                return failf(p, key, "plan.checkpoints: '%s' is not a weight format (bf16, fp16, fp8, int8, awq, gptq)",
                             w ? w : "(not a scalar)");
            if (s->plan.n_weights == ST_PLAN_LIST_MAX)
                return failf(p, key, "plan.checkpoints: at most %d", ST_PLAN_LIST_MAX);
            for (int i = 0; i < s->plan.n_weights; i++)
                if (!strcmp(s->plan.weights[i], w))
                    return failf(p, key, "plan.checkpoints: %s is given twice", w);
            int i = s->plan.n_weights++;
            s->plan.weights[i] = strdup(w);
            if (!s->plan.weights[i] || get_str(p, val, "plan.checkpoints", &s->plan.checkpoints[i]))
                return s->plan.weights[i] ? -1 : failf(p, key, "out of memory");
        }
    }
    if ((v = kv(k, nk, "kv_cache_dtype"))) {
        if (get_strlist(p, v, "plan.kv_cache_dtype", &s->plan.kv_dtypes))
            return -1;
        for (int i = 0; i < s->plan.kv_dtypes.n; i++) {
            const char *d = s->plan.kv_dtypes.v[i];
            if (strcmp(d, "auto") && strcmp(d, "fp8") && strcmp(d, "fp8_e4m3") && strcmp(d, "fp8_e5m2") &&
                strcmp(d, "bfloat16"))
                return failf(p, v, "plan.kv_cache_dtype: '%s' is not one of auto, bfloat16, fp8, fp8_e4m3, fp8_e5m2",
                             d);
        }
    }
    if ((v = kv(k, nk, "max_num_seqs")) &&
        get_longs(p, v, "plan.max_num_seqs", s->plan.max_num_seqs, &s->plan.n_seqs, 1, 100000))
        return -1;
    if ((v = kv(k, nk, "max_num_batched_tokens")) &&
        get_longs(p, v, "plan.max_num_batched_tokens", s->plan.max_batched, &s->plan.n_batched, 16, 10000000))
        return -1;
    if ((v = kv(k, nk, "max_model_len")) && v->type == YAML_SEQUENCE_NODE) {
        if (get_longs(p, v, "plan.max_model_len", s->plan.max_model_lens, &s->plan.n_len, 16, 100000000))
            return -1;
        s->plan.max_model_len = s->plan.max_model_lens[0];
    } else if (v) {
        const char *t = scalar(v);
        if (!t || strcmp(t, "auto")) {
            uint32_t m;
            if (get_u32(p, v, "plan.max_model_len", &m, 16))
                return -1;
            s->plan.max_model_len = m;
        }
    }
    if ((v = kv(k, nk, "prices")) && get_str(p, v, "plan.prices", &s->plan.prices))
        return -1;
    if ((v = kv(k, nk, "provider")) && get_str(p, v, "plan.provider", &s->plan.provider))
        return -1;
    if ((v = kv(k, nk, "top")) && get_count(p, v, "plan.top", &s->plan.top, 1, 64))
        return -1;
    if ((v = kv(k, nk, "speculation")) && parse_plan_speculation(p, v, s))
        return -1;
    return 0;
}

/* traffic.hourly_rps: 24 rates, or `trace` (or left out with a trace workload): the trace's own
 * hours (st_audit_resolve_day). v: the key's value, or NULL. */
static int parse_hourly(pctx *p, yaml_node_t *n, yaml_node_t *v, st_spec *s)
{
    const char *sv = v ? scalar(v) : NULL;
    if (!v || (sv && !strcmp(sv, "trace"))) {
        if (s->workload.kind != ST_WL_TRACE)
            return failf(p, v ? v : n,
                         v ? "traffic.hourly_rps: 'trace' takes the day from workload.trace, and the workload has "
                             "none: give 24 request rates (req/s), hour 0 to 23"
                           : "traffic.hourly_rps: required (24 request rates, hour 0 to 23; or 'trace' with a "
                             "trace workload)");
        s->traffic.day_source = ST_DAY_FROM_TRACE;
        return 0;
    }
    if (v->type != YAML_SEQUENCE_NODE || v->data.sequence.items.top - v->data.sequence.items.start != 24)
        return failf(p, v,
                     "traffic.hourly_rps: a list of exactly 24 request rates (req/s), hour 0 to 23; write 0 "
                     "for an hour without traffic; or 'trace' to take them from workload.trace");
    int h = 0;
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++, h++) {
        char what[40];
        snprintf(what, sizeof what, "traffic.hourly_rps[%d]", h);
        if (get_double(p, node(p, *it), what, &s->traffic.hourly_rps[h], 0, 0))
            return -1;
        s->traffic.hour_known[h] = 1;
    }
    s->traffic.hours_known = 24;
    return 0;
}

static int parse_traffic(pctx *p, yaml_node_t *n, st_spec *s)
{
    keydef k[] = {
        { "hourly_rps", 0, 0 }, { "scale_up_delay", 0, 0 }, { "min_replicas", 0, 0 }, { "serverless", 0, 0 }
    };
    int nk = (int)(sizeof k / sizeof *k);
    if (read_map(p, n, "traffic", k, nk))
        return -1;
    s->traffic.set = 1;
    s->traffic.scale_up_delay_s = 600;
    s->traffic.idle_timeout_s = 5;
    s->traffic.cold_start_s = 60;
    if (parse_hourly(p, n, kv(k, nk, "hourly_rps"), s))
        return -1;
    yaml_node_t *v;
    if ((v = kv(k, nk, "scale_up_delay")) && get_duration(p, v, "traffic.scale_up_delay", &s->traffic.scale_up_delay_s))
        return -1;
    if ((v = kv(k, nk, "min_replicas")) && get_count(p, v, "traffic.min_replicas", &s->traffic.min_replicas, 0, 100000))
        return -1;
    if ((v = kv(k, nk, "serverless"))) {
        keydef sk[] = {
            { "idle_timeout", 0, 0 }, { "cold_start", 0, 0 }, { "provider", 0, 0 }, { "price_per_gpu_second", 0, 0 }
        };
        int nsk = (int)(sizeof sk / sizeof *sk);
        if (read_map(p, v, "traffic.serverless", sk, nsk))
            return -1;
        yaml_node_t *w;
        if ((w = kv(sk, nsk, "idle_timeout")) &&
            get_duration(p, w, "traffic.serverless.idle_timeout", &s->traffic.idle_timeout_s))
            return -1;
        if ((w = kv(sk, nsk, "cold_start")) &&
            get_duration(p, w, "traffic.serverless.cold_start", &s->traffic.cold_start_s))
            return -1;
        if ((w = kv(sk, nsk, "provider")) &&
            get_str(p, w, "traffic.serverless.provider", &s->traffic.serverless_provider))
            return -1;
        if ((w = kv(sk, nsk, "price_per_gpu_second")) &&
            get_double(p, w, "traffic.serverless.price_per_gpu_second", &s->traffic.serverless_price_per_gpu_s, 0, 1))
            return -1;
    }
    return 0;
}

/* An acceptance (a rate per draft token, or a list by position) and an optional draft_share
 * (nodes v and share, share may be NULL) into *a; what names the block in messages. */
static int parse_accept(pctx *p, yaml_node_t *v, yaml_node_t *share, const char *what, st_spec_accept *a)
{
    a->given = 1;
    a->draft_share = -1;
    char w[96];
    snprintf(w, sizeof w, "%s.acceptance", what);
    if (v->type == YAML_SEQUENCE_NODE) {
        for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
            yaml_node_t *e = node(p, *it);
            double d;
            if (a->n_pos >= ST_SPEC_ACCEPT_POS_MAX)
                return failf(p, v, "%s: at most %d positions", w, ST_SPEC_ACCEPT_POS_MAX);
            if (get_double(p, e, w, &d, 0, 0))
                return -1;
            if (d > 1 || (a->n_pos && d > a->pos[a->n_pos - 1]))
                return failf(p, e,
                             "%s: each position's acceptance is within 0..1 and at most the one before it (a draft "
                             "token is accepted only when every one before it is)",
                             w);
            a->pos[a->n_pos++] = d;
        }
        if (!a->n_pos)
            return failf(p, v, "%s: an empty list", w);
    } else {
        if (get_double(p, v, w, &a->acceptance, 0, 0))
            return -1;
        if (a->acceptance > 1)
            return failf(p, v, "%s: a share of draft tokens, within 0..1", w);
    }
    snprintf(w, sizeof w, "%s.draft_share", what);
    if (share && get_double(p, share, w, &a->draft_share, 0, 0))
        return -1;
    if (share && a->draft_share > 1)
        return failf(p, share, "%s: a share of decode steps, within 0..1", w);
    return 0;
}

int st_spec_accept_parse(const char *text, st_spec_accept *a, char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    a->given = 1;
    a->draft_share = -1;
    const char *p = text ? text : "";
    double vals[ST_SPEC_ACCEPT_POS_MAX];
    uint32_t n = 0;
    while (*p) {
        char *end;
        double x = strtod(p, &end);
        if (end == p || !(x >= 0 && x <= 1) || (*end && *end != '/') || (*end == '/' && !end[1])) {
            snprintf(err, errlen,
                     "expected A or A1/A2/... (the acceptance per draft token, or by position), each within "
                     "0..1, got '%s'",
                     text);
            return -1;
        }
        if (n >= ST_SPEC_ACCEPT_POS_MAX) {
            snprintf(err, errlen, "at most %d positions, got '%s'", ST_SPEC_ACCEPT_POS_MAX, text);
            return -1;
        }
        if (n && x > vals[n - 1]) {
            snprintf(err, errlen,
                     "each position's acceptance is at most the one before it (a draft token is accepted only when "
                     "every one before it is), got '%s'",
                     text);
            return -1;
        }
        vals[n++] = x;
        p = *end ? end + 1 : end;
    }
    if (!n) {
        snprintf(err, errlen, "expected A or A1/A2/..., got an empty value");
        return -1;
    }
    if (n == 1) {
        a->acceptance = vals[0];
    } else {
        memcpy(a->pos, vals, n * sizeof vals[0]);
        a->n_pos = n;
    }
    return 0;
}

/* speculation: {acceptance: A | [A1, A2, ...], draft_share: F} */
static int parse_speculation(pctx *p, yaml_node_t *n, st_spec *s)
{
    keydef k[] = { { "acceptance", 0, 0 }, { "draft_share", 0, 0 } };
    int nk = 2;
    if (read_map(p, n, "speculation", k, nk))
        return -1;
    yaml_node_t *v = kv(k, nk, "acceptance");
    if (!v)
        return failf(p, n, "speculation: 'acceptance' is required (a rate per draft token, or a list by position)");
    return parse_accept(p, v, kv(k, nk, "draft_share"), "speculation", &s->speculation);
}

/* vLLM's --speculative-config methods the engine model serves (emu/flags.c). */
static int spec_method_known(const char *m)
{
    static const char *const known[] = { "ngram",  "ngram_gpu",      "suffix", "draft_model", "eagle",
                                         "eagle3", "mlp_speculator", "medusa", "mtp",         NULL };
    size_t n = strlen(m);
    for (int i = 0; known[i]; i++)
        if (!strcmp(m, known[i]))
            return 1;
    return n > 4 && !strcmp(m + n - 4, "_mtp");
}

/* One entry of plan.speculation: {method: M, k: [K, ...], model: DRAFT, acceptance: A, draft_share: F} */
static int parse_plan_specm(pctx *p, yaml_node_t *n, st_plan_specm *m)
{
    keydef k[] = {
        { "method", 0, 0 }, { "k", 0, 0 }, { "model", 0, 0 }, { "acceptance", 0, 0 }, { "draft_share", 0, 0 }
    };
    int nk = (int)(sizeof k / sizeof *k);
    if (read_map(p, n, "plan.speculation", k, nk))
        return -1;
    if (!kv(k, nk, "method") || !kv(k, nk, "k"))
        return failf(p, n, "plan.speculation: each method needs 'method' and 'k' (draft tokens, one or a list)");
    if (get_str(p, kv(k, nk, "method"), "plan.speculation.method", &m->method))
        return -1;
    if (!spec_method_known(m->method))
        return failf(p, kv(k, nk, "method"),
                     "plan.speculation.method: '%s' is not one the engine model serves (ngram, ngram_gpu, suffix, "
                     "draft_model, eagle, eagle3, medusa, mlp_speculator, mtp, *_mtp)",
                     m->method);
    yaml_node_t *v = kv(k, nk, "model");
    if (v && get_str(p, v, "plan.speculation.model", &m->model))
        return -1;
    if (!strcmp(m->method, "draft_model") && !m->model)
        return failf(p, n, "plan.speculation: method draft_model needs 'model' (the draft checkpoint)");
    long ks[ST_PLAN_LIST_MAX];
    v = kv(k, nk, "k");
    if (v->type != YAML_SEQUENCE_NODE) {
        uint32_t one;
        if (get_u32(p, v, "plan.speculation.k", &one, 1))
            return -1;
        ks[0] = one;
        m->n_k = 1;
    } else if (get_longs(p, v, "plan.speculation.k", ks, &m->n_k, 1, ST_SPEC_ACCEPT_POS_MAX))
        return -1;
    for (int i = 0; i < m->n_k; i++) {
        if (ks[i] > ST_SPEC_ACCEPT_POS_MAX)
            return failf(p, v, "plan.speculation.k: at most %d draft tokens", ST_SPEC_ACCEPT_POS_MAX);
        m->k[i] = (int)ks[i];
    }
    if ((v = kv(k, nk, "acceptance")) && scalar(v) && !strcmp(scalar(v), "trace")) {
        if (strcmp(m->method, "ngram") && strcmp(m->method, "ngram_gpu"))
            return failf(p, v,
                         "plan.speculation.acceptance: 'trace' is n-gram lookup's offline replay of the trace; %s's "
                         "acceptance cannot be computed offline: give a measured one",
                         m->method);
        if (kv(k, nk, "draft_share"))
            return failf(p, kv(k, nk, "draft_share"), "plan.speculation: the trace's replay gives the draft share");
        m->acc_trace = 1;
        return 0;
    }
    if (v)
        return parse_accept(p, v, kv(k, nk, "draft_share"), "plan.speculation", &m->acc);
    if (kv(k, nk, "draft_share"))
        return failf(p, kv(k, nk, "draft_share"), "plan.speculation: draft_share without an acceptance");
    return 0;
}

static int parse_plan_speculation(pctx *p, yaml_node_t *n, st_spec *s)
{
    if (!n || n->type != YAML_SEQUENCE_NODE || n->data.sequence.items.top == n->data.sequence.items.start)
        return failf(p, n,
                     "plan.speculation: a list of methods, e.g. [{method: ngram, k: [3, 5], acceptance: 0.6}, "
                     "{method: draft_model, model: Qwen/Qwen3-0.6B, k: 4, acceptance: 0.7}]");
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
        if (s->plan.n_spec == ST_PLAN_SPEC_MAX)
            return failf(p, n, "plan.speculation: at most %d methods", ST_PLAN_SPEC_MAX);
        if (parse_plan_specm(p, node(p, *it), &s->plan.spec[s->plan.n_spec++]))
            return -1;
    }
    return 0;
}

static int get_share(pctx *p, yaml_node_t *n, const char *what, double *out)
{
    if (get_double(p, n, what, out, 0, 0))
        return -1;
    if (*out > 1)
        return failf(p, n, "%s: a share between 0 and 1 (0.9 = 90 %%), got %s", what, scalar(n));
    return 0;
}

static int parse_quality(pctx *p, yaml_node_t *n, st_spec *s)
{
    keydef k[] = {
        { "enabled", 0, 0 }, { "prompts", 0, 0 }, { "top_k", 0, 0 }, { "max_tokens", 0, 0 }, { "limits", 0, 0 }
    };
    int nk = (int)(sizeof k / sizeof *k);
    if (read_map(p, n, "quality", k, nk))
        return -1;
    s->quality.enabled = 1;
    yaml_node_t *v;
    if ((v = kv(k, nk, "enabled")) && get_bool(p, v, "quality.enabled", &s->quality.enabled))
        return -1;
    const struct {
        const char *key, *what;
        uint32_t *out, hi;
    } counts[] = { { "prompts", "quality.prompts", &s->quality.prompts, ST_QUALITY_MAX_PROMPTS },
                   { "top_k", "quality.top_k", &s->quality.top_k, ST_QUALITY_MAX_TOP_K },
                   { "max_tokens", "quality.max_tokens", &s->quality.max_tokens, ST_QUALITY_MAX_MAX_TOKENS } };
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
        int c = 0;
        if ((v = kv(k, nk, counts[i].key))) {
            if (get_count(p, v, counts[i].what, &c, 1, counts[i].hi))
                return -1;
            *counts[i].out = (uint32_t)c;
        }
    }
    if ((v = kv(k, nk, "limits"))) {
        keydef lk[] = { { "max_mean_kld", 0, 0 }, { "min_same_top1", 0, 0 }, { "min_exact_match", 0, 0 } };
        int nlk = (int)(sizeof lk / sizeof *lk);
        if (read_map(p, v, "quality.limits", lk, nlk))
            return -1;
        yaml_node_t *w;
        if ((w = kv(lk, nlk, "max_mean_kld"))) {
            if (get_double(p, w, "quality.limits.max_mean_kld", &s->quality.max_mean_kld, 0, 0))
                return -1;
            if (s->quality.max_mean_kld > ST_QUALITY_MAX_KLD)
                return failf(p, w, "quality.limits.max_mean_kld: at most %g nats, got %s", ST_QUALITY_MAX_KLD,
                             scalar(w));
        }
        if ((w = kv(lk, nlk, "min_same_top1")) &&
            get_share(p, w, "quality.limits.min_same_top1", &s->quality.min_same_top1))
            return -1;
        if ((w = kv(lk, nlk, "min_exact_match")) &&
            get_share(p, w, "quality.limits.min_exact_match", &s->quality.min_exact_match))
            return -1;
    }
    return 0;
}

/* peak_rate: trace needs a request trace. 0, or -1 (failf). */
static int peak_refusal(pctx *p, yaml_node_t *peak, const st_spec *s)
{
    if (s->peak_source == ST_PEAK_FROM_TRACE && s->workload.kind != ST_WL_TRACE)
        return failf(p, peak,
                     "peak_rate: 'trace' takes the peak from workload.trace, and the workload has none: "
                     "give the peak in requests per second");
    if (s->peak_source == ST_PEAK_FROM_TRACE && s->workload.agent)
        return failf(p, peak,
                     "peak_rate: 'trace' reads a request trace's busiest minute; an agent trace's tasks are replayed "
                     "at the rates given: give the peak in requests per second");
    return 0;
}

/* concurrency: (closed loop) not with sessions or an agent trace, whose rates count starts. 0, or
 * -1 (failf). */
static int conc_refusal(pctx *p, yaml_node_t *conc, const st_spec *s)
{
    if (s->workload.agent)
        return failf(p, conc,
                     "concurrency: not with an agent trace (workload.trace): its tasks arrive open loop at a task "
                     "rate and run closed within one; give rates in tasks/s");
    if (s->workload.sessions.on)
        return failf(p, conc,
                     "concurrency: not with multi-turn sessions (workload.sessions): their rate is the rate at "
                     "which sessions start; give rates");
    return 0;
}

static int parse_root(pctx *p, yaml_node_t *root, st_spec *s)
{
    keydef k[] = { { "engine", 0, 0 },   { "hardware", 0, 0 },       { "peak_rate", 0, 0 },
                   { "workload", 0, 0 }, { "rates", 0, 0 },          { "warmup_requests", 0, 0 },
                   { "slo", 0, 0 },      { "configurations", 0, 0 }, { "search", 0, 0 },
                   { "timeouts", 0, 0 }, { "cluster", 0, 0 },        { "plan", 0, 0 },
                   { "traffic", 0, 0 },  { "concurrency", 0, 0 },    { "speculation", 0, 0 },
                   { "quality", 0, 0 } };
    int nk = (int)(sizeof k / sizeof *k);
    s->quality.prompts = ST_QUALITY_PROMPTS;
    s->quality.top_k = ST_QUALITY_TOP_K;
    s->quality.max_tokens = ST_QUALITY_MAX_TOKENS;
    s->quality.max_mean_kld = s->quality.min_same_top1 = s->quality.min_exact_match = NAN;
    if (!root)
        return failf(p, NULL, "the spec is empty");
    if (read_map(p, root, "spec", k, nk))
        return -1;
    yaml_node_t *v;
#define REQUIRE(key)                                                                                                   \
    if (!(v = kv(k, nk, key)))                                                                                         \
        return failf(p, root, "'%s' is required", key);
    REQUIRE("engine");
    if (parse_engine(p, v, s))
        return -1;
    REQUIRE("hardware");
    if (parse_hardware(p, v, s))
        return -1;
    REQUIRE("peak_rate");
    yaml_node_t *peak = v;
    const char *pv = scalar(peak);
    if (pv && !strcmp(pv, "trace")) {
        s->peak_source = ST_PEAK_FROM_TRACE; /* resolved from the trace (st_audit_resolve_peak) */
        s->peak_rate = NAN;
    } else {
        if (get_double(p, v, "peak_rate", &s->peak_rate, 0, 1))
            return -1;
        if (s->peak_rate > ST_SPEC_MAX_PEAK_RATE)
            return failf(p, v, "peak_rate: at most %g req/s", ST_SPEC_MAX_PEAK_RATE);
    }
    REQUIRE("workload");
    if (parse_workload(p, v, s))
        return -1;
    if (peak_refusal(p, peak, s))
        return -1;
    yaml_node_t *conc = kv(k, nk, "concurrency");
    if (conc && kv(k, nk, "rates"))
        return failf(p, conc, "concurrency: give either rates (open loop) or concurrency (closed loop), not both");
    if (conc) {
        if (conc_refusal(p, conc, s) || parse_concurrency(p, conc, s))
            return -1;
    } else {
        REQUIRE("rates");
        if (parse_rates(p, v, s))
            return -1;
    }
    if ((v = kv(k, nk, "warmup_requests"))) {
        if (get_u32(p, v, "warmup_requests", &s->warmup_requests, 0))
            return -1;
        if (s->warmup_requests > ST_SPEC_MAX_REQUESTS)
            return failf(p, v, "warmup_requests: at most %u", ST_SPEC_MAX_REQUESTS);
    }
    REQUIRE("slo");
    if (parse_slo(p, v, s))
        return -1;
    for (int i = 0; i < s->slo.n; i++) /* a task is a session: the makespan term needs them */
        if (s->slo.terms[i].metric == ST_SLO_MAKESPAN && !s->workload.sessions.on)
            return failf(p, v,
                         "slo: makespan_* needs tasks: workload.sessions (synthetic agent tasks with fan_out, or "
                         "sessions: replay of a trace); a task's makespan runs from its first request's arrival to "
                         "its last request's end");
#undef REQUIRE
    if ((v = kv(k, nk, "configurations"))) {
        if (parse_configs(p, v, s))
            return -1;
    } else {
        s->configs = calloc(1, sizeof *s->configs);
        if (!s->configs || !(s->configs[0].name = strdup("baseline")))
            return failf(p, NULL, "out of memory");
        s->n_configs = 1;
    }
    if ((v = kv(k, nk, "search")) && parse_search(p, v, s))
        return -1;
    if ((v = kv(k, nk, "timeouts")) && parse_timeouts(p, v, s))
        return -1;
    if ((v = kv(k, nk, "cluster")) && parse_cluster(p, v, s))
        return -1;
    if ((v = kv(k, nk, "plan")) && parse_plan(p, v, s))
        return -1;
    if ((v = kv(k, nk, "traffic")) && parse_traffic(p, v, s))
        return -1;
    if ((v = kv(k, nk, "speculation")) && parse_speculation(p, v, s))
        return -1;
    if ((v = kv(k, nk, "quality")) && parse_quality(p, v, s))
        return -1;
    /* burst modes with concurrency: each level is a fixed-count closed loop of requests_per_rate
     * requests (as vllm bench serve --max-concurrency C --num-prompts N) */
    return 0;
}

/* A first pass over the YAML events, before the document is built: nesting deeper than
 * ST_SPEC_MAX_DEPTH is refused as soon as it is seen (libyaml's scanner takes time proportional to
 * the depth for each token, so a deeply nested file would take quadratic time, and its loader
 * recurses), and so is a NUL inside a string (it would cut the string short silently). Syntax
 * errors are left to the loader, which names them. */
static int prescan(const char *name, const char *text, size_t len, char *err, size_t errlen)
{
    yaml_parser_t ps;
    if (!yaml_parser_initialize(&ps)) {
        snprintf(err, errlen, "%s: out of memory", name);
        return -1;
    }
    yaml_parser_set_input_string(&ps, (const unsigned char *)text, len);
    int depth = 0, rc = 0;
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&ps, &ev)) {
            if (ps.error == YAML_MEMORY_ERROR) { /* not a syntax error: the checks would be skipped */
                snprintf(err, errlen, "%s: out of memory", name);
                rc = -1;
            }
            break;
        }
        yaml_event_type_t t = ev.type;
        if (t == YAML_SEQUENCE_START_EVENT || t == YAML_MAPPING_START_EVENT) {
            if (++depth > ST_SPEC_MAX_DEPTH) {
                snprintf(err, errlen, "%s:%zu: nested deeper than %d levels", name, ev.start_mark.line + 1,
                         ST_SPEC_MAX_DEPTH);
                rc = -1;
            }
        } else if (t == YAML_SEQUENCE_END_EVENT || t == YAML_MAPPING_END_EVENT) {
            depth--;
        } else if (t == YAML_SCALAR_EVENT && memchr(ev.data.scalar.value, '\0', ev.data.scalar.length)) {
            snprintf(err, errlen, "%s:%zu: a NUL character inside a string", name, ev.start_mark.line + 1);
            rc = -1;
        }
        yaml_event_delete(&ev);
        if (rc || t == YAML_STREAM_END_EVENT)
            break;
    }
    yaml_parser_delete(&ps);
    return rc;
}

/* A relative path in a spec named NAME is relative to NAME's folder. */
static void resolve_beside(const char *name, char **path)
{
    if (!*path || (*path)[0] == '/')
        return;
    const char *slash = strrchr(name, '/');
    if (!slash)
        return;
    size_t dl = (size_t)(slash - name) + 1, tl = strlen(*path);
    char *full = malloc(dl + tl + 1);
    if (!full)
        return;
    memcpy(full, name, dl);
    memcpy(full + dl, *path, tl + 1);
    free(*path);
    *path = full;
}

int st_spec_parse(const char *name, const char *text, size_t len, st_spec *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    set_defaults(out);
    pctx p = { .name = name, .err = err, .errlen = errlen };
    if (len > ST_SPEC_MAX_BYTES) {
        snprintf(err, errlen, "%s: larger than %u bytes", name, (unsigned)ST_SPEC_MAX_BYTES);
        return -1;
    }
    if (prescan(name, text, len, err, errlen))
        return -1;
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser)) {
        snprintf(err, errlen, "%s: out of memory", name);
        return -1;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        snprintf(err, errlen, "%s:%zu: YAML syntax: %s%s%s", name, parser.problem_mark.line + 1,
                 parser.problem ? parser.problem : "error", parser.context ? " " : "",
                 parser.context ? parser.context : "");
        yaml_parser_delete(&parser);
        return -1;
    }
    p.doc = &doc;
    out->path = strdup(name);
    int rc = parse_root(&p, yaml_document_get_root_node(&doc), out);
    /* A second document in the same file is a mistake worth naming. */
    if (rc == 0) {
        yaml_document_t doc2;
        if (yaml_parser_load(&parser, &doc2)) {
            if (yaml_document_get_root_node(&doc2)) {
                snprintf(err, errlen, "%s:%zu: only one YAML document is allowed", name,
                         yaml_document_get_root_node(&doc2)->start_mark.line + 1);
                rc = -1;
            }
            yaml_document_delete(&doc2);
        }
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    if (rc) {
        st_spec_free(out);
        set_defaults(out);
        return -1;
    }
    /* A trace path (and a price list) is relative to the spec's folder. */
    resolve_beside(name, &out->workload.trace);
    resolve_beside(name, &out->plan.prices);
    return 0;
}

int st_spec_load(const char *path, st_spec *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    size_t n;
    char *buf = st_read_file(path, ST_SPEC_MAX_BYTES, &n, err, errlen);
    if (!buf)
        return -1;
    int rc = st_spec_parse(path, buf, n, out, err, errlen);
    free(buf);
    return rc;
}

/* ---- configuration flags ---- */

/* Whether token i of v is option `name` (len nl), and how many tokens it spans. */
static int flag_span(const st_strv *v, int i, const char *name, size_t nl)
{
    const char *t = v->v[i];
    size_t tl = flag_name_len(t);
    if (!tl || tl != nl || strncmp(t, name, nl))
        return 0;
    if (t[tl] == '=')
        return 1;
    if (i + 1 < v->n && !flag_name_len(v->v[i + 1]))
        return 2;
    return 1;
}

static int remove_flag(st_strv *v, const char *name, size_t nl)
{
    for (int i = 0; i < v->n;) {
        int span = flag_span(v, i, name, nl);
        if (!span) {
            i++;
            continue;
        }
        for (int j = 0; j < span; j++)
            free(v->v[i + j]);
        memmove(&v->v[i], &v->v[i + span], sizeof(char *) * (size_t)(v->n - i - span));
        v->n -= span;
    }
    return 0;
}

int st_spec_config_flags(const st_spec *s, const st_spec_config *c, st_strv *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < s->engine.flags.n; i++)
        if (st_strv_push(out, s->engine.flags.v[i]))
            goto fail;
    for (int i = 0; i < c->remove_flags.n; i++)
        remove_flag(out, c->remove_flags.v[i], strlen(c->remove_flags.v[i]));
    for (int i = 0; i < c->add_flags.n; i++) {
        size_t nl = flag_name_len(c->add_flags.v[i]);
        if (nl)
            remove_flag(out, c->add_flags.v[i], nl);
    }
    for (int i = 0; i < c->add_flags.n; i++)
        if (st_strv_push(out, c->add_flags.v[i]))
            goto fail;
    return 0;
fail:
    st_strv_free(out);
    return -1;
}

const char *st_spec_config_model(const st_spec *s, const st_spec_config *c)
{
    return (c && c->model) ? c->model : s->engine.model;
}

int st_spec_check_bounds(const st_spec *s, char *err, size_t errlen)
{
    if (s->search.mode != ST_SEARCH_SUSTAINED)
        return 0;
    const char *f = s->path ? s->path : "spec";
    double need = s->search.min_window_s;
    if (s->search.max_duration_s < need) {
        snprintf(err, errlen,
                 "%s: search.max_duration (%g s) is shorter than search.min_window (%g s): no run could measure its "
                 "window, so no rate could be shown to be sustained",
                 f, s->search.max_duration_s, need);
        return -1;
    }
    if (s->search.request_budget && s->search.request_budget < s->search.min_window_requests) {
        snprintf(err, errlen,
                 "%s: search.request_budget (%u requests) is below search.min_window_requests (%u): no run could fill "
                 "its window",
                 f, s->search.request_budget, s->search.min_window_requests);
        return -1;
    }
    if (!s->closed_loop) {
        double low = INFINITY;
        for (int i = 0; i < s->n_rates; i++)
            if (isfinite(s->rates[i]) && s->rates[i] < low)
                low = s->rates[i];
        /* requests per second at that rate: a synthetic session brings its mean turns */
        double per = st_spec_turns_mean(s);
        if (isfinite(low) && s->search.min_window_requests / (low * per) > s->search.max_duration_s) {
            snprintf(err, errlen,
                     "%s: at %g %s (the lowest rate) the %u window requests arrive over %g s, longer than "
                     "search.max_duration (%g s): raise max_duration, lower min_window_requests, or drop the rate",
                     f, low, st_spec_rate_unit(s), s->search.min_window_requests,
                     s->search.min_window_requests / (low * per), s->search.max_duration_s);
            return -1;
        }
        if (!isfinite(low)) {
            snprintf(err, errlen,
                     "%s: rates: the sustained search needs at least one finite rate (inf sends every "
                     "request at once: it has no steady state)",
                     f);
            return -1;
        }
    }
    return 0;
}

const st_spec_config *st_spec_find_config(const st_spec *s, const char *name)
{
    for (int i = 0; i < s->n_configs; i++)
        if (!strcmp(s->configs[i].name, name))
            return &s->configs[i];
    return NULL;
}

int st_spec_launch(const st_spec *s, const st_spec_config *c, int port, const char *self_exe, st_launch *out, char *err,
                   size_t errlen)
{
    st_strv flags = { 0 };
    if (st_spec_config_flags(s, c, &flags)) {
        memset(out, 0, sizeof *out);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    st_engine_desc d = {
        .kind = s->engine.kind,
        .command = &s->engine.command,
        .model = st_spec_config_model(s, c),
        .flags = &flags,
        .served_name = s->engine.served_name,
        .url = s->engine.url,
        .api_set = s->engine.api_set,
        .api = s->engine.api,
    };
    int rc = st_adapter_launch(&d, port, self_exe, out, err, errlen);
    st_strv_free(&flags);
    return rc;
}

/* ---- secrets ---- */

/* Adds the value of every ${NAME} in text to out. 0, or -1 with err naming where. */
static int ref_secrets(const char *text, const char *where, st_secrets *out, char *err, size_t errlen)
{
    for (const char *q = text; (q = strstr(q, "${"));) {
        const char *end = strchr(q + 2, '}');
        if (!end) {
            snprintf(err, errlen, "%s: '%.60s': unterminated ${", where, text);
            return -1;
        }
        char name[256];
        size_t nl = (size_t)(end - q - 2);
        if (!nl || nl >= sizeof name) {
            snprintf(err, errlen, "%s: '%.60s': bad ${NAME}", where, text);
            return -1;
        }
        memcpy(name, q + 2, nl);
        name[nl] = '\0';
        const char *val = getenv(name);
        if (!val) {
            snprintf(err, errlen, "%s: the environment variable %s is not set", where, name);
            return -1;
        }
        if (*val && strlen(val) < ST_SECRET_MIN_LEN) {
            snprintf(err, errlen,
                     "%s: ${%s} expands to fewer than %d characters: a ${VAR} is a secret, and one that short cannot "
                     "be told apart from ordinary text; write the value itself",
                     where, name, ST_SECRET_MIN_LEN);
            return -1;
        }
        if (st_secrets_add(out, val)) {
            snprintf(err, errlen, "%s: more than %d secrets", where, ST_SECRETS_MAX);
            return -1;
        }
        q = end + 1;
    }
    return 0;
}

static int strv_secrets(const st_strv *v, const char *where, st_secrets *out, char *err, size_t errlen)
{
    for (int i = 0; i < v->n; i++)
        if (ref_secrets(v->v[i], where, out, err, errlen))
            return -1;
    return 0;
}

static int env_secrets(const st_envv *e, const char *where, st_secrets *out, char *err, size_t errlen)
{
    for (int i = 0; i < e->n; i++) {
        char w[200];
        snprintf(w, sizeof w, "%s.%s", where, e->key[i]);
        if (ref_secrets(e->val[i], w, out, err, errlen))
            return -1;
    }
    return 0;
}

int st_spec_secrets(const st_spec *s, st_secrets *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (s->engine.api_key_env) {
        const char *key = getenv(s->engine.api_key_env);
        if (!key || !*key) {
            snprintf(err, errlen, "%s: engine.api_key_env: the environment variable %s is not set", s->path,
                     s->engine.api_key_env);
            goto fail;
        }
        if (strlen(key) < ST_SECRET_MIN_LEN || st_secrets_add(out, key)) {
            snprintf(err, errlen, "%s: engine.api_key_env: the key in %s is shorter than %d characters", s->path,
                     s->engine.api_key_env, ST_SECRET_MIN_LEN);
            goto fail;
        }
    }
    char where[200];
    snprintf(where, sizeof where, "%s: engine.command", s->path);
    if (strv_secrets(&s->engine.command, where, out, err, errlen))
        goto fail;
    snprintf(where, sizeof where, "%s: engine.flags", s->path);
    if (strv_secrets(&s->engine.flags, where, out, err, errlen))
        goto fail;
    snprintf(where, sizeof where, "%s: engine.env", s->path);
    if (env_secrets(&s->engine.env, where, out, err, errlen))
        goto fail;
    for (int i = 0; i < s->n_configs; i++) {
        const st_spec_config *c = &s->configs[i];
        snprintf(where, sizeof where, "%s: configurations[%s].add_flags", s->path, c->name);
        if (strv_secrets(&c->add_flags, where, out, err, errlen))
            goto fail;
        snprintf(where, sizeof where, "%s: configurations[%s].env", s->path, c->name);
        if (env_secrets(&c->env, where, out, err, errlen))
            goto fail;
    }
    return 0;
fail:
    st_secrets_free(out);
    return -1;
}

void st_spec_synth(const st_spec *s, uint32_t n, uint64_t seed, st_synth_params *p)
{
    *p = (st_synth_params){ .input_len = s->workload.input_tokens,
                            .output_len = s->workload.output_tokens,
                            .range_ratio = s->workload.range_ratio,
                            .prefix_len = s->workload.shared_prefix,
                            .num_requests = n,
                            .seed = seed,
                            .vllm_semantics = s->workload.vllm_semantics };
}

const char *st_spec_rate_unit(const st_spec *s)
{
    return s->workload.agent ? "tasks/s" : s->workload.sessions.on ? "sessions/s" : "req/s";
}

double st_spec_turns_mean(const st_spec *s)
{
    if (s->workload.agent)
        return s->workload.agent_requests_per_task;
    if (s->workload.kind != ST_WL_SYNTHETIC || !s->workload.sessions.on)
        return 1;
    double turns = (s->workload.sessions.turns_min + s->workload.sessions.turns_max) / 2.0;
    if (s->workload.sessions.fan_out_max) /* agent tasks: a planner turn, then workers and a join per round */
        return 1 + (turns - 1) * ((s->workload.sessions.fan_out_min + s->workload.sessions.fan_out_max) / 2.0 + 1);
    return turns;
}

void st_spec_sessions(const st_spec *s, uint32_t n, uint64_t seed, st_session_params *p)
{
    double k = ceil(n / st_spec_turns_mean(s));
    *p = (st_session_params){ .sessions = k < 1 ? 1 : (uint32_t)k,
                              .turns_min = s->workload.sessions.turns_min,
                              .turns_max = s->workload.sessions.turns_max,
                              .first_input = s->workload.input_tokens,
                              .user_input = s->workload.sessions.user_tokens,
                              .output_len = s->workload.output_tokens,
                              .prefix_len = s->workload.shared_prefix,
                              .range_ratio = s->workload.range_ratio,
                              .think_s = s->workload.sessions.think_s,
                              .think_exp = s->workload.sessions.think_exp,
                              .seed = seed,
                              .fan_out_min = s->workload.sessions.fan_out_min,
                              .fan_out_max = s->workload.sessions.fan_out_max };
}

double st_spec_mean_input(const st_spec *s)
{
    return (double)s->workload.input_tokens + (s->workload.vllm_semantics ? s->workload.shared_prefix : 0);
}

st_api_kind st_spec_api(const st_spec *s)
{
    const st_engine_kind_info *ki = st_engine_kind_info_of(s->engine.kind);
    return s->engine.api_set ? s->engine.api : ki ? ki->api : ST_API_COMPLETIONS;
}

int st_spec_fits_prompts(const st_spec *s)
{
    st_api_kind api = st_spec_api(s);
    int text = api == ST_API_CHAT || api == ST_API_TGI;
    /* a session's later turns carry the conversation's real text: not fitted */
    return text && !s->workload.exact_prompts_off && !s->workload.sessions.on;
}
