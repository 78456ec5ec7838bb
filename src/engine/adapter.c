#include "engine/adapter.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/parse.h"
#include "emu/flags.h"

#define VLLM_IMAGE "vllm/vllm-openai:latest"
#define TGI_IMAGE "ghcr.io/huggingface/text-generation-inference:latest"
/* vLLM's entry under another name and tensor-parallel flag: the emulator and an endpoint speak
 * vLLM's API and stand for vLLM in the deploy snippets. */
#define VLLM_KIND(kind_name, tp)                                                                                       \
    {                                                                                                                  \
        .name = kind_name, .api = ST_API_COMPLETIONS, .metrics_dialect = ST_DIALECT_VLLM, .version_path = "/version",  \
        .version_key = "version", .models_path = "/v1/models", .program = { "vllm", "serve" }, .model_flag = NULL,     \
        .host_flag = "--host", .metrics_flag = NULL, .deploy_port = 8000, .image = VLLM_IMAGE,                         \
        .image_cpu = VLLM_IMAGE, .tp_flag = tp,                                                                        \
    }
/* One entry per engine kind (adapter.h: st_engine_kind_info). An endpoint is never started nor
 * deployed. */
static const st_engine_kind_info kinds[ST_ENGINE__COUNT] = {
    [ST_ENGINE_VLLM] = VLLM_KIND("vllm", "--tensor-parallel-size"),
    [ST_ENGINE_SGLANG] = { .name = "sglang",
                           .api = ST_API_COMPLETIONS,
                           .metrics_dialect = ST_DIALECT_SGLANG,
                           .version_path = "/version",
                           .version_key = "version",
                           .models_path = "/v1/models",
                           .program = { "python3", "-m", "sglang.launch_server" },
                           .model_flag = "--model-path",
                           .host_flag = "--host",
                           .metrics_flag = "--enable-metrics",
                           .deploy_port = 30000,
                           .image = "lmsysorg/sglang:latest",
                           .image_cpu = "lmsysorg/sglang:latest",
                           .tp_flag = "--tp" },
    [ST_ENGINE_TGI] = { .name = "tgi",
                        .api = ST_API_TGI,
                        .metrics_dialect = ST_DIALECT_TGI,
                        .version_path = "/version",
                        .version_key = "version",
                        .models_path = "/info",
                        .program = { "text-generation-launcher" },
                        .model_flag = "--model-id",
                        .host_flag = "--hostname",
                        .metrics_flag = NULL,
                        .deploy_port = 8080,
                        .image = TGI_IMAGE,
                        .image_cpu = TGI_IMAGE,
                        .tp_flag = "--num-shard" },
    [ST_ENGINE_LLAMACPP] = { .name = "llamacpp",
                             .api = ST_API_COMPLETIONS,
                             .metrics_dialect = ST_DIALECT_LLAMACPP,
                             .version_path = "/props",
                             .version_key = "build_info",
                             .models_path = "/v1/models",
                             .program = { "llama-server" },
                             .model_flag = "-m",
                             .host_flag = "--host",
                             .metrics_flag = "--metrics",
                             .deploy_port = 8080,
                             .image = "ghcr.io/ggml-org/llama.cpp:server-cuda",
                             .image_cpu = "ghcr.io/ggml-org/llama.cpp:server",
                             .tp_flag = NULL },
    [ST_ENGINE_EMULATOR] = VLLM_KIND("emulator", NULL),
    [ST_ENGINE_ENDPOINT] = VLLM_KIND("endpoint", NULL),
};

const st_engine_kind_info *st_engine_kind_info_of(st_engine_kind k)
{
    return (k >= 0 && k < ST_ENGINE__COUNT) ? &kinds[k] : NULL;
}

const char *st_engine_kind_name(st_engine_kind k)
{
    return (k >= 0 && k < ST_ENGINE__COUNT) ? kinds[k].name : "unknown";
}

int st_engine_kind_from_name(const char *s, st_engine_kind *out)
{
    for (int i = 0; i < ST_ENGINE__COUNT; i++)
        if (s && !strcmp(s, kinds[i].name)) {
            *out = (st_engine_kind)i;
            return 0;
        }
    return -1;
}


void st_launch_free(st_launch *l)
{
    st_strv_free(&l->argv);
    st_strv_free(&l->env_key);
    st_strv_free(&l->env_val);
    free(l->expected_model);
    free(l->base_url);
    free(l->host);
    memset(l, 0, sizeof *l);
}

const char *st_flag_value(const st_strv *flags, const char *name)
{
    size_t nl = strlen(name);
    for (int i = 0; i < flags->n; i++) {
        const char *t = flags->v[i];
        if (strncmp(t, name, nl))
            continue;
        if (t[nl] == '=')
            return t + nl + 1;
        if (t[nl] == '\0' && i + 1 < flags->n)
            return flags->v[i + 1];
    }
    return NULL;
}

static int push_all(st_strv *v, const char *const *a)
{
    for (; *a; a++)
        if (st_strv_push(v, *a))
            return -1;
    return 0;
}

const char *st_adapter_secret_env(st_engine_kind k, const char *flag)
{
    /* the engines' own names: vLLM's envs.VLLM_API_KEY (the emulator reads it too), TGI's
     * clap `env` (API_KEY), llama.cpp's LLAMA_API_KEY */
    static const struct {
        st_engine_kind kind;
        const char *flag, *env;
    } map[] = {
        { ST_ENGINE_VLLM, "--api-key", "VLLM_API_KEY" },
        { ST_ENGINE_EMULATOR, "--api-key", "VLLM_API_KEY" },
        { ST_ENGINE_TGI, "--api-key", "API_KEY" },
        { ST_ENGINE_LLAMACPP, "--api-key", "LLAMA_API_KEY" },
    };
    for (size_t i = 0; flag && i < sizeof map / sizeof *map; i++)
        if (map[i].kind == k && !strcmp(map[i].flag, flag))
            return map[i].env;
    return NULL;
}

/* Copies flags without --host/--port (and their values); a flag whose value is a ${VAR} reference
 * goes to the environment instead (st_adapter_secret_env). 0, or -1 with err. */
static int push_flags(st_launch *out, st_engine_kind kind, const st_strv *flags, char *err, size_t errlen)
{
    static const char *drop[] = { "--host", "--port", "--hostname" };
    st_strv *v = &out->argv;
    for (int i = 0; i < flags->n; i++) {
        const char *t = flags->v[i];
        int skip = 0;
        for (size_t d = 0; d < sizeof drop / sizeof *drop; d++) {
            size_t dl = strlen(drop[d]);
            if (!strncmp(t, drop[d], dl) && (t[dl] == '=' || t[dl] == '\0')) {
                skip = t[dl] == '=' ? 1 : 2;
            }
        }
        if (skip) {
            i += skip - 1;
            continue;
        }
        const char *eq = t[0] == '-' ? strchr(t, '=') : NULL;
        const char *val = eq ? eq + 1 : (t[0] == '-' && i + 1 < flags->n ? flags->v[i + 1] : NULL);
        if (val && strstr(val, "${")) {
            char name[128];
            size_t nl = eq ? (size_t)(eq - t) : strlen(t);
            snprintf(name, sizeof name, "%.*s", (int)(nl < sizeof name ? nl : sizeof name - 1), t);
            const char *env = st_adapter_secret_env(kind, name);
            if (!env) {
                snprintf(err, errlen,
                         "%s: a ${VAR} value would be visible in the engine's command line; give it through the "
                         "engine's environment (engine.env) instead",
                         name);
                return -1;
            }
            if (st_strv_push(&out->env_key, env) || st_strv_push(&out->env_val, val))
                goto oom;
            i += eq ? 0 : 1;
            continue;
        }
        if (strstr(t, "${")) {
            snprintf(err, errlen, "'%.100s': a ${VAR} would be visible in the engine's command line", t);
            return -1;
        }
        if (st_strv_push(v, t))
            goto oom;
    }
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
    return -1;
}

/* The name the server lists: vLLM-like engines take --served-model-name; llama-server lists its
 * --alias / -a (comma-separated: the first is the id), else the model's path (*add_alias: name it). */
static const char *launch_served(const st_engine_desc *d, const st_strv *fl, char *alias, size_t n, int *add_alias)
{
    const char *served = NULL;
    *add_alias = 0;
    if (d->kind == ST_ENGINE_LLAMACPP) {
        served = st_flag_value(fl, "--alias");
        if (!served)
            served = st_flag_value(fl, "-a");
        if (served) {
            snprintf(alias, n, "%.*s", (int)strcspn(served, ","), served);
            served = alias;
        } else {
            *add_alias = 1;
        }
    } else {
        served = st_flag_value(fl, "--served-model-name");
    }
    return served ? served : d->served_name;
}

/* The engine's command line: its command (or program), the model, the flags, the address and the
 * metrics flag. 0, or -1 with err (empty: out of memory). */
static int launch_argv(const st_engine_desc *d, const st_engine_kind_info *ki, const char *self_exe, int port,
                       int add_alias, st_launch *out, char *err, size_t errlen)
{
    static const st_strv none = { 0 };
    const st_strv *fl = d->flags ? d->flags : &none;
    const st_strv *cmd = d->command ? d->command : &none;
    char portbuf[16];
    snprintf(portbuf, sizeof portbuf, "%d", port);
    st_strv *a = &out->argv;
    int have_cmd = cmd->n > 0;
    int rc = 0;
    if (have_cmd && d->kind != ST_ENGINE_ENDPOINT)
        for (int i = 0; i < cmd->n && !rc; i++) {
            if (strstr(cmd->v[i], "${")) {
                snprintf(err, errlen, "engine.command: a ${VAR} would be visible in the engine's command line");
                return -1;
            }
            rc = st_strv_push(a, cmd->v[i]);
        }
    if (d->kind == ST_ENGINE_ENDPOINT || !ki)
        return rc ? -1 : 0;
    if (!have_cmd && d->kind == ST_ENGINE_EMULATOR) {
        if (!self_exe) {
            snprintf(err, errlen, "the emulator needs the path of the servetune binary");
            return -1;
        }
        rc = rc || push_all(a, (const char *[]){ self_exe, "emulate", "serve", NULL });
    } else if (!have_cmd) {
        rc = rc || push_all(a, ki->program);
    }
    if (ki->model_flag)
        rc = rc || st_strv_push(a, ki->model_flag);
    rc = rc || st_strv_push(a, d->model) || push_flags(out, d->kind, fl, err, errlen);
    /* without an alias llama-server lists the model's path: name it what the spec expects */
    if (add_alias && out->expected_model)
        rc = rc || push_all(a, (const char *[]){ "--alias", out->expected_model, NULL });
    rc = rc || push_all(a, (const char *[]){ ki->host_flag, "127.0.0.1", "--port", portbuf, NULL });
    /* sglang also takes --enable-metrics=VALUE; llama-server only the bare flag */
    if (!rc && ki->metrics_flag && (d->kind != ST_ENGINE_SGLANG || !st_flag_value(fl, ki->metrics_flag))) {
        int has = 0;
        for (int i = 0; i < fl->n; i++)
            has |= !strcmp(fl->v[i], ki->metrics_flag);
        if (!has)
            rc = st_strv_push(a, ki->metrics_flag);
    }
    return rc ? -1 : 0;
}

/* An endpoint's address from its URL, http://host[:port][/prefix]. */
static int launch_endpoint(const char *u, st_launch *out, char *err, size_t errlen)
{
    int tls = !strncmp(u, "https://", 8);
    const char *h = u + (tls ? 8 : 7);
    size_t ul = strlen(u);
    while (ul > 0 && u[ul - 1] == '/')
        ul--;
    out->base_url = strndup(u, ul);
    const char *hend = h + strcspn(h, ":/");
    out->host = strndup(h, (size_t)(hend - h));
    out->port = tls ? 443 : 80;
    if (*hend == ':') {
        long pl;
        char pb[8];
        size_t n = strcspn(hend + 1, "/");
        if (n == 0 || n >= sizeof pb) {
            snprintf(err, errlen, "engine.url: bad port in '%s'", u);
            return -1;
        }
        memcpy(pb, hend + 1, n);
        pb[n] = '\0';
        if (st_parse_long(pb, &pl) || pl < 1 || pl > 65535) {
            snprintf(err, errlen, "engine.url: bad port in '%s'", u);
            return -1;
        }
        out->port = (int)pl;
    }
    return 0;
}

int st_adapter_launch(const st_engine_desc *d, int port, const char *self_exe, st_launch *out, char *err, size_t errlen)
{
    static const st_strv none = { 0 };
    memset(out, 0, sizeof *out);
    if (errlen)
        err[0] = '\0';
    out->time_scale = 1;
    const st_strv *fl = d->flags ? d->flags : &none;
    char alias[512] = "";
    int add_alias;
    const char *served = launch_served(d, fl, alias, sizeof alias, &add_alias);
    out->expected_model = strdup(served ? served : d->model);
    const char *ts = st_flag_value(fl, "--time-scale");
    if (ts) {
        double k;
        if (st_parse_double(ts, &k) || !(k > 0) || !(k <= ST_EMU_TIME_SCALE_MAX)) {
            snprintf(err, errlen, "--time-scale %s: expected a number in (0, %g]", ts, ST_EMU_TIME_SCALE_MAX);
            goto fail;
        }
        out->time_scale = k;
    }
    const st_engine_kind_info *ki = st_engine_kind_info_of(d->kind);
    out->health_path = "/health";
    out->models_path = ki ? ki->models_path : "/v1/models";
    out->metrics_dialect = ki ? ki->metrics_dialect : ST_DIALECT_VLLM;
    out->version_path = ki ? ki->version_path : "/version";
    out->version_key = ki ? ki->version_key : "version";
    if (launch_argv(d, ki, self_exe, port, add_alias, out, err, errlen) < 0) {
        if (!err[0])
            snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (d->kind == ST_ENGINE_ENDPOINT) {
        if (launch_endpoint(d->url, out, err, errlen) < 0)
            goto fail;
    } else {
        char ub[64];
        snprintf(ub, sizeof ub, "http://127.0.0.1:%d", port);
        out->base_url = strdup(ub);
        out->host = strdup("127.0.0.1");
        out->port = port;
    }
    out->api = d->api_set ? d->api : ki ? ki->api : ST_API_COMPLETIONS;
    if (!out->base_url || !out->host || !out->expected_model) {
        snprintf(err, errlen, "out of memory");
        st_launch_free(out);
        return -1;
    }
    return 0;
fail:
    st_launch_free(out);
    return -1;
}

void st_launch_cmdline(const st_launch *l, char *out, size_t n)
{
    st_buf b;
    st_buf_init(&b, ST_LAUNCH_CMDLINE_MAX);
    for (int i = 0; i < l->env_key.n; i++) {
        st_buf_printf(&b, "%s=", l->env_key.v[i]);
        st_buf_shell_quote(&b, l->env_val.v[i]);
        st_buf_puts(&b, " ");
    }
    for (int i = 0; i < l->argv.n; i++) {
        if (i)
            st_buf_puts(&b, " ");
        st_buf_shell_quote(&b, l->argv.v[i]);
    }
    /* a command line longer than the log line keeps its start and says it was cut */
    const char *text = b.data ? b.data : "";
    if (st_buf_error(&b) || b.len >= n)
        snprintf(out, n, "%.*s ...", n > 5 ? (int)(n - 5) : 0, text);
    else
        snprintf(out, n, "%s", text);
    st_buf_free(&b);
}

int st_adapter_models_lists(const char *body, size_t len, const char *model, char *names, size_t names_len)
{
    names[0] = '\0';
    json_error_t je;
    json_t *root = json_loadb(body, len, 0, &je);
    if (!root || !json_is_object(root)) {
        json_decref(root);
        return -1;
    }
    int found = 0, any = 0;
    size_t off = 0;
    json_t *data = json_object_get(root, "data");
    if (json_is_array(data)) {
        size_t i;
        json_t *m;
        json_array_foreach(data, i, m)
        {
            const char *id = json_string_value(json_object_get(m, "id"));
            if (!id)
                continue;
            any = 1;
            if (off < names_len)
                off += (size_t)snprintf(names + off, names_len - off, "%s%s", off ? ", " : "", id);
            if (!strcmp(id, model))
                found = 1;
        }
    }
    /* TGI /info: {"model_id": "..."} */
    const char *mid = json_string_value(json_object_get(root, "model_id"));
    if (mid) {
        any = 1;
        if (off < names_len)
            off += (size_t)snprintf(names + off, names_len - off, "%s%s", off ? ", " : "", mid);
        if (!strcmp(mid, model))
            found = 1;
    }
    json_decref(root);
    if (!any)
        return -1;
    return found;
}
