#include "report/deploy.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "core/strv.h"
#include "core/util.h"
#include "emu/flags.h"

/* The engine the snippets are for: the emulator stands for vLLM. */
static st_engine_kind deploy_kind(const st_spec *s)
{
    return s->engine.kind == ST_ENGINE_EMULATOR ? ST_ENGINE_VLLM : s->engine.kind;
}

int st_deploy_supported(const st_spec *s) { return s->engine.kind != ST_ENGINE_ENDPOINT; }

/* Where each engine listens in its container (and on the host in the bare command). */
static int engine_port(st_engine_kind k)
{
    const st_engine_kind_info *ki = st_engine_kind_info_of(k);
    return ki ? ki->deploy_port : 8000;
}

static const char *default_image(st_engine_kind k, int gpus)
{
    const st_engine_kind_info *ki = st_engine_kind_info_of(k);
    return !ki ? "vllm/vllm-openai:latest" : gpus > 0 ? ki->image : ki->image_cpu;
}

/* The flag that sets GPUs per replica, per engine (NULL: none). */
static const char *tp_flag(st_engine_kind k)
{
    const st_engine_kind_info *ki = st_engine_kind_info_of(k);
    return ki ? ki->tp_flag : NULL;
}

/* Whether word t is flag name, alone or as name=value. */
static int is_flag(const char *t, const char *name)
{
    size_t n = strlen(name);
    return !strncmp(t, name, n) && (t[n] == '\0' || t[n] == '=');
}

static int has_flag(const st_strv *f, const char *name)
{
    for (int i = 0; i < f->n; i++)
        if (is_flag(f->v[i], name))
            return 1;
    return 0;
}

/* The configuration's flags as the deployed engine takes them: without host and port (the
 * snippet sets them), without the emulator's own flags, with the GPUs per replica. */
static int deploy_flags(const st_spec *s, const st_spec_config *c, st_strv *out)
{
    st_strv all = { 0 };
    if (st_spec_config_flags(s, c, &all))
        return -1;
    int rc = 0, emu = s->engine.kind == ST_ENGINE_EMULATOR;
    for (int i = 0; i < all.n && !rc; i++) {
        const char *t = all.v[i];
        int next_is_value = i + 1 < all.n && all.v[i + 1][0] != '-' && !strchr(t, '=');
        int drop = is_flag(t, "--host") || is_flag(t, "--port") || is_flag(t, "--hostname");
        if (emu && st_emu_flag_emulator_only(t)) {
            if (st_emu_flag_takes_value(t) && next_is_value)
                i++;
            continue;
        }
        if (drop) {
            if (next_is_value)
                i++;
            continue;
        }
        rc = st_strv_push(out, t);
    }
    const char *tp = tp_flag(deploy_kind(s));
    if (!rc && tp && s->hardware.gpus_per_replica > 1 && !has_flag(out, tp) &&
        !(deploy_kind(s) == ST_ENGINE_VLLM && has_flag(out, "-tp"))) {
        char n[16];
        snprintf(n, sizeof n, "%d", s->hardware.gpus_per_replica);
        rc = st_strv_push(out, tp) || st_strv_push(out, n);
    }
    st_strv_free(&all);
    return rc;
}

/* The engine's arguments after its program: model, flags, host and port. */
static int engine_args(const st_spec *s, const st_spec_config *c, const char *model, st_strv *out)
{
    st_engine_kind k = deploy_kind(s);
    char port[16];
    snprintf(port, sizeof port, "%d", engine_port(k));
    const st_engine_kind_info *ki = st_engine_kind_info_of(k);
    if (!ki)
        return -1;
    int rc = ki->model_flag ? st_strv_push(out, ki->model_flag) : 0;
    rc = rc || st_strv_push(out, model);
    rc = rc || deploy_flags(s, c, out);
    rc = rc || st_strv_push(out, ki->host_flag) || st_strv_push(out, "0.0.0.0") || st_strv_push(out, "--port") ||
         st_strv_push(out, port);
    if (!rc && ki->metrics_flag && !has_flag(out, ki->metrics_flag))
        rc = st_strv_push(out, ki->metrics_flag);
    return rc;
}

/* The words of v, each shell-quoted, each after a space. */
static void words(st_buf *b, const st_strv *v)
{
    for (int i = 0; i < v->n; i++) {
        st_buf_puts(b, " ");
        st_buf_shell_quote(b, v->v[i]);
    }
}

/* A value for a shell: literal text single-quoted, each ${VAR} left to the shell ("${VAR}"). */
static void shell_value(st_buf *b, const char *v)
{
    if (!*v) {
        st_buf_puts(b, "''");
        return;
    }
    while (*v) {
        const char *ref = strstr(v, "${");
        const char *end = ref ? strchr(ref, '}') : NULL;
        size_t lit = ref && end ? (size_t)(ref - v) : strlen(v);
        if (lit) {
            char piece[1024];
            size_t n = lit < sizeof piece - 1 ? lit : sizeof piece - 1;
            memcpy(piece, v, n);
            piece[n] = '\0';
            st_buf_shell_quote(b, piece);
            v += n;
            continue;
        }
        st_buf_printf(b, "\"%.*s\"", (int)(end - ref + 1), ref);
        v = end + 1;
    }
}

/* The spec's environment, then the configuration's (which wins), in order, each name once. */
typedef struct envpair {
    const char *key, *val;
} envpair;

static int env_list(const st_spec *s, const st_spec_config *c, envpair *out, int max)
{
    int n = 0;
    const st_envv *lists[2] = { &s->engine.env, &c->env };
    for (int l = 0; l < 2; l++)
        for (int i = 0; i < lists[l]->n; i++) {
            int j = 0;
            while (j < n && strcmp(out[j].key, lists[l]->key[i]))
                j++;
            if (j == n && n < max)
                n++;
            if (j < n) {
                out[j].key = lists[l]->key[i];
                out[j].val = lists[l]->val[i];
            }
        }
    return n;
}

#define DEPLOY_ENV_MAX 128

int st_deploy_command(const st_spec *s, const st_spec_config *c, st_buf *out)
{
    if (!st_deploy_supported(s))
        return -1;
    st_engine_kind k = deploy_kind(s);
    st_strv args = { 0 };
    int rc = engine_args(s, c, st_spec_config_model(s, c), &args);
    envpair env[DEPLOY_ENV_MAX];
    int ne = env_list(s, c, env, DEPLOY_ENV_MAX);
    for (int i = 0; i < ne; i++) {
        st_buf_printf(out, "%s=", env[i].key);
        shell_value(out, env[i].val);
        st_buf_puts(out, " ");
    }
    if (s->engine.command.n && s->engine.kind != ST_ENGINE_EMULATOR) {
        /* the program the audit started, as the spec names it */
        for (int i = 0; i < s->engine.command.n; i++) {
            if (i)
                st_buf_puts(out, " ");
            st_buf_shell_quote(out, s->engine.command.v[i]);
        }
    } else {
        const st_engine_kind_info *ki = st_engine_kind_info_of(k);
        for (int i = 0; ki && i < ST_ENGINE_PROGRAM_WORDS && ki->program[i]; i++)
            st_buf_printf(out, "%s%s", i ? " " : "", ki->program[i]);
    }
    words(out, &args);
    st_buf_puts(out, "\n");
    st_strv_free(&args);
    return rc || st_buf_error(out) ? -1 : 0;
}

/* The folder and file name of a model path (llama.cpp takes a file, mounted into the container). */
static void split_path(const char *p, char *dir, size_t dn, const char **base)
{
    const char *slash = strrchr(p, '/');
    *base = slash ? slash + 1 : p;
    if (!slash)
        snprintf(dir, dn, ".");
    else if (slash == p)
        snprintf(dir, dn, "/");
    else
        snprintf(dir, dn, "%.*s", (int)(slash - p), p);
}

int st_deploy_docker(const st_spec *s, const st_spec_config *c, const st_deploy_opts *o, st_buf *out)
{
    if (!st_deploy_supported(s))
        return -1;
    st_engine_kind k = deploy_kind(s);
    int gpus = k == ST_ENGINE_LLAMACPP && !strcmp(s->hardware.gpu, "CPU") ? 0 : s->hardware.gpus_per_replica;
    const char *model = st_spec_config_model(s, c);
    char dir[4096], inside[4200];
    const char *base = model;
    if (k == ST_ENGINE_LLAMACPP) {
        split_path(model, dir, sizeof dir, &base);
        snprintf(inside, sizeof inside, "/models/%s", base);
        model = inside;
    }
    st_strv args = { 0 };
    int rc = engine_args(s, c, model, &args);
    int port = engine_port(k);
    st_buf_puts(out, "docker run --rm");
    if (gpus > 0)
        st_buf_printf(out, " --gpus %d", gpus);
    if (k == ST_ENGINE_VLLM || k == ST_ENGINE_SGLANG)
        st_buf_puts(out, " --ipc=host");
    if (k == ST_ENGINE_TGI)
        st_buf_puts(out, " --shm-size 1g");
    st_buf_printf(out, " -p %d:%d", port, port);
    if (k == ST_ENGINE_LLAMACPP) {
        char vol[4300];
        snprintf(vol, sizeof vol, "%s:/models:ro", dir);
        st_buf_puts(out, " -v ");
        st_buf_shell_quote(out, vol);
    } else if (k == ST_ENGINE_TGI) {
        st_buf_puts(out, " -v \"$PWD/data:/data\"");
    } else {
        st_buf_puts(out, " -v \"$HOME/.cache/huggingface:/root/.cache/huggingface\"");
    }
    envpair env[DEPLOY_ENV_MAX];
    int ne = env_list(s, c, env, DEPLOY_ENV_MAX);
    for (int i = 0; i < ne; i++) {
        st_buf_printf(out, " -e %s=", env[i].key);
        shell_value(out, env[i].val);
    }
    st_buf_puts(out, " ");
    st_buf_shell_quote(out, o && o->image ? o->image : default_image(k, gpus));
    if (k == ST_ENGINE_SGLANG)
        st_buf_puts(out, " python3 -m sglang.launch_server");
    if (k == ST_ENGINE_VLLM) /* the image's entrypoint is `vllm serve`; the model goes with --model */
        st_buf_puts(out, " --model");
    words(out, &args);
    st_buf_puts(out, "\n");
    st_strv_free(&args);
    return rc || st_buf_error(out) ? -1 : 0;
}

void st_deploy_k8s_name(const char *config, char *out, size_t n)
{
    st_slug(config, out, n, 63);
    if (!out[0])
        snprintf(out, n, "llm");
}

/* A YAML double-quoted scalar: JSON string syntax, which YAML reads the same. */
static void yq(st_buf *b, const char *s) { st_buf_json_str(b, s); }

/* A whole ${VAR} reference: its name in name[]. */
static int whole_ref(const char *v, char *name, size_t n)
{
    size_t l = strlen(v);
    if (l < 4 || strncmp(v, "${", 2) || v[l - 1] != '}' || strchr(v + 2, '$'))
        return 0;
    snprintf(name, n, "%.*s", (int)(l - 3), v + 2);
    return 1;
}

static void k8s_env(st_buf *b, const st_spec *s, const st_spec_config *c, const char *name)
{
    envpair env[DEPLOY_ENV_MAX];
    int ne = env_list(s, c, env, DEPLOY_ENV_MAX);
    if (!ne)
        return;
    st_buf_puts(b, "          env:\n");
    for (int i = 0; i < ne; i++) {
        char ref[256];
        st_buf_puts(b, "            - name: ");
        yq(b, env[i].key);
        st_buf_puts(b, "\n");
        if (whole_ref(env[i].val, ref, sizeof ref)) {
            /* a reference stays one: the value comes from a Secret the user creates */
            st_buf_printf(b, "              valueFrom:\n                secretKeyRef:\n                  name: ");
            char sec[80];
            snprintf(sec, sizeof sec, "%.60s-env", name);
            yq(b, sec);
            st_buf_puts(b, "\n                  key: ");
            yq(b, ref);
            st_buf_puts(b, "\n");
        } else {
            st_buf_puts(b, "              value: ");
            yq(b, env[i].val);
            st_buf_puts(b, "\n");
        }
    }
}

int st_deploy_k8s(const st_spec *s, const st_spec_config *c, const st_deploy_opts *o, st_buf *out)
{
    if (!st_deploy_supported(s))
        return -1;
    st_engine_kind k = deploy_kind(s);
    char name[64];
    st_deploy_k8s_name(c->name, name, sizeof name);
    int gpus = s->hardware.gpus_per_replica, port = engine_port(k);
    st_strv args = { 0 };
    int rc = engine_args(s, c, st_spec_config_model(s, c), &args);
    long replicas = o && o->replicas > 0 ? o->replicas : 1;
    st_buf_puts(out, "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: ");
    yq(out, name);
    st_buf_puts(out, "\n  labels:\n    app.kubernetes.io/name: ");
    yq(out, name);
    st_buf_printf(out,
                  "\n    app.kubernetes.io/managed-by: servetune\nspec:\n  replicas: %ld\n  selector:\n"
                  "    matchLabels:\n      app.kubernetes.io/name: ",
                  replicas);
    yq(out, name);
    st_buf_puts(out, "\n  template:\n    metadata:\n      labels:\n        app.kubernetes.io/name: ");
    yq(out, name);
    st_buf_printf(out,
                  "\n      annotations:\n        prometheus.io/scrape: \"true\"\n        prometheus.io/port: \"%d\"\n"
                  "        prometheus.io/path: \"/metrics\"\n    spec:\n      containers:\n        - name: engine\n"
                  "          image: ",
                  port);
    yq(out, o && o->image ? o->image : default_image(k, gpus));
    st_buf_puts(out, "\n");
    if (k == ST_ENGINE_SGLANG)
        st_buf_puts(out, "          command: [\"python3\", \"-m\", \"sglang.launch_server\"]\n");
    st_buf_puts(out, "          args:\n");
    if (k == ST_ENGINE_VLLM)
        st_buf_puts(out, "            - \"--model\"\n");
    for (int i = 0; i < args.n; i++) {
        st_buf_puts(out, "            - ");
        yq(out, args.v[i]);
        st_buf_puts(out, "\n");
    }
    st_buf_printf(out, "          ports:\n            - name: http\n              containerPort: %d\n", port);
    k8s_env(out, s, c, name);
    if (gpus > 0)
        st_buf_printf(out,
                      "          resources:\n            limits:\n              nvidia.com/gpu: %d\n"
                      "            requests:\n              nvidia.com/gpu: %d\n",
                      gpus, gpus);
    /* /health answers 200 once the model is loaded: a long startup budget, then quick checks */
    st_buf_puts(
        out, "          startupProbe:\n            httpGet:\n              path: /health\n              port: http\n"
             "            periodSeconds: 10\n            failureThreshold: 180\n"
             "          readinessProbe:\n            httpGet:\n              path: /health\n              port: http\n"
             "            periodSeconds: 5\n            failureThreshold: 3\n"
             "          livenessProbe:\n            httpGet:\n              path: /health\n              port: http\n"
             "            periodSeconds: 10\n            failureThreshold: 6\n");
    if (k == ST_ENGINE_VLLM || k == ST_ENGINE_SGLANG || k == ST_ENGINE_TGI)
        st_buf_puts(out, "          volumeMounts:\n            - name: dshm\n              mountPath: /dev/shm\n"
                         "      volumes:\n        - name: dshm\n          emptyDir:\n            medium: Memory\n");
    st_buf_puts(out, "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: ");
    yq(out, name);
    st_buf_puts(out, "\n  labels:\n    app.kubernetes.io/name: ");
    yq(out, name);
    st_buf_puts(out, "\nspec:\n  selector:\n    app.kubernetes.io/name: ");
    yq(out, name);
    st_buf_printf(out, "\n  ports:\n    - name: http\n      port: %d\n      targetPort: http\n", port);
    st_strv_free(&args);
    return rc || st_buf_error(out) ? -1 : 0;
}

/* A vLLM flag as the RunPod worker's variable: --max-num-seqs -> MAX_NUM_SEQS (anything but a
 * letter or digit becomes '_', so the name is always a plain shell variable name). */
static void env_name(const char *flag, char *out, size_t n)
{
    size_t j = 0;
    for (const char *p = flag + 2; *p && *p != '=' && j + 1 < n; p++)
        out[j++] = isalnum((unsigned char)*p) ? (char)toupper((unsigned char)*p) : '_';
    out[j] = '\0';
}

/* One NAME=value line of the RunPod block, the value quoted for the shell (the block is
 * pasted into a console or sourced: a value such as "; cmd" or "$(...)" stays text). */
static void runpod_line(st_buf *out, const char *name, const char *value)
{
    st_buf_printf(out, "%s=", name);
    st_buf_shell_quote(out, value);
    st_buf_puts(out, "\n");
}

int st_deploy_runpod_env(const st_spec *s, const st_spec_config *c, st_buf *out)
{
    if (deploy_kind(s) != ST_ENGINE_VLLM)
        return -1;
    st_strv f = { 0 };
    int rc = deploy_flags(s, c, &f);
    runpod_line(out, "MODEL_NAME", st_spec_config_model(s, c));
    for (int i = 0; i < f.n && !rc; i++) {
        const char *t = f.v[i];
        if (strncmp(t, "--", 2)) {
            /* a short flag such as -tp: the worker has no name for it */
            st_buf_puts(out, "# ");
            st_buf_shell_quote(out, t);
            st_buf_puts(out, ": no worker variable; use VLLM_EXTRA_ARGS\n");
            continue;
        }
        char nm[128];
        const char *eq = strchr(t, '=');
        int no = !strncmp(t, "--no-", 5);
        env_name(no ? t + 3 : t, nm, sizeof nm);
        if (eq)
            runpod_line(out, nm, eq + 1);
        else if (i + 1 < f.n && f.v[i + 1][0] != '-')
            runpod_line(out, nm, f.v[++i]);
        else /* a switch: the worker emits --flag for true and --no-flag for false */
            runpod_line(out, nm, no ? "false" : "true");
    }
    envpair env[DEPLOY_ENV_MAX];
    int ne = env_list(s, c, env, DEPLOY_ENV_MAX);
    for (int i = 0; i < ne; i++) { /* as in the docker snippet: ${VAR} references left to the shell */
        st_buf_printf(out, "%s=", env[i].key);
        shell_value(out, env[i].val);
        st_buf_puts(out, "\n");
    }
    st_strv_free(&f);
    return rc || st_buf_error(out) ? -1 : 0;
}

int st_deploy_markdown(const st_spec *s, const st_spec_config *c, const st_deploy_opts *o, st_buf *out)
{
    if (!st_deploy_supported(s))
        return -1;
    st_buf_printf(out, "## Deploy %s\n\nThe engine's command line, as audited:\n\n```sh\n", c->name);
    int rc = st_deploy_command(s, c, out);
    st_buf_puts(out, "```\n\nIn a container:\n\n```sh\n");
    rc |= st_deploy_docker(s, c, o, out);
    st_buf_puts(out, "```\n\nOn Kubernetes (a Deployment and its Service; `kubectl apply -f`):\n\n```yaml\n");
    rc |= st_deploy_k8s(s, c, o, out);
    st_buf_puts(out, "```\n");
    if (deploy_kind(s) == ST_ENGINE_VLLM) {
        st_buf_puts(out, "\nOn RunPod Serverless (the vLLM worker's environment variables):\n\n```sh\n");
        rc |= st_deploy_runpod_env(s, c, out);
        st_buf_puts(out, "```\n");
    }
    return rc || st_buf_error(out) ? -1 : 0;
}
