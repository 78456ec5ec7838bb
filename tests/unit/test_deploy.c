/* Deploy snippets (report/deploy.h): exact command lines for the example spec, a Kubernetes
 * manifest that parses as YAML with the fields a cluster needs, the RunPod worker's variables,
 * and quoting that survives hostile names and values. */
#include "harness.h"

#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml.h>

#include "audit/spec.h"
#include "report/deploy.h"

static st_spec spec;

static int load_example(void **state)
{
    (void)state;
    char err[512];
    if (st_spec_load("examples/qwen3-8b-h100.yaml", &spec, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return 0;
}

static int free_spec(void **state)
{
    (void)state;
    st_spec_free(&spec);
    return 0;
}

static const st_spec_config *cfg(const char *name)
{
    const st_spec_config *c = st_spec_find_config(&spec, name);
    assert_non_null(c);
    return c;
}

static void commands_for_the_example(void **state)
{
    (void)state;
    st_buf b;
    st_buf_init(&b, 1 << 16);
    /* the emulator's own flags (--gpu, --time-scale) are left out: the snippet is vLLM's */
    assert_int_equal(st_deploy_command(&spec, cfg("fp8-all"), &b), 0);
    assert_string_equal(b.data, "vllm serve Qwen/Qwen3-8B-FP8 --max-model-len 8192 --kv-cache-dtype fp8 "
                                "--max-num-batched-tokens 8192 --host 0.0.0.0 --port 8000\n");
    st_buf_reset(&b);
    st_deploy_opts o = { .replicas = 3 };
    assert_int_equal(st_deploy_docker(&spec, cfg("no-prefix-cache"), &o, &b), 0);
    assert_string_equal(b.data, "docker run --rm --gpus 1 --ipc=host -p 8000:8000 -v "
                                "\"$HOME/.cache/huggingface:/root/.cache/huggingface\" vllm/vllm-openai:latest "
                                "--model Qwen/Qwen3-8B --max-model-len 8192 --max-num-batched-tokens 2048 "
                                "--no-enable-prefix-caching --host 0.0.0.0 --port 8000\n");
    st_buf_reset(&b);
    assert_int_equal(st_deploy_runpod_env(&spec, cfg("no-prefix-cache"), &b), 0);
    assert_string_equal(b.data, "MODEL_NAME=Qwen/Qwen3-8B\nMAX_MODEL_LEN=8192\nMAX_NUM_BATCHED_TOKENS=2048\n"
                                "ENABLE_PREFIX_CACHING=false\n");
    st_buf_reset(&b);
    assert_int_equal(st_deploy_markdown(&spec, cfg("baseline"), &o, &b), 0);
    assert_non_null(strstr(b.data, "## Deploy baseline"));
    assert_non_null(strstr(b.data, "```yaml\napiVersion: apps/v1"));
    assert_non_null(strstr(b.data, "MAX_NUM_BATCHED_TOKENS=2048"));
    st_buf_free(&b);
}

/* ---- a small YAML reader for the manifest ------------------------------------------------ */

typedef struct ydoc {
    yaml_document_t d[4];
    int n;
} ydoc;

static void yload(const char *text, ydoc *y)
{
    yaml_parser_t p;
    yaml_parser_initialize(&p);
    yaml_parser_set_input_string(&p, (const unsigned char *)text, strlen(text));
    y->n = 0;
    for (;;) {
        assert_true(y->n < 4);
        if (!yaml_parser_load(&p, &y->d[y->n]))
            fail_msg("manifest does not parse as YAML: %s (line %zu)\n%s", p.problem, p.problem_mark.line + 1, text);
        if (!yaml_document_get_root_node(&y->d[y->n])) {
            yaml_document_delete(&y->d[y->n]);
            break;
        }
        y->n++;
    }
    yaml_parser_delete(&p);
}

/* The node at a dotted path: keys for mappings, indexes for sequences. */
static yaml_node_t *yat(yaml_document_t *d, const char *path)
{
    yaml_node_t *n = yaml_document_get_root_node(d);
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *tok = strtok(buf, "."); tok && n; tok = strtok(NULL, ".")) {
        yaml_node_t *next = NULL;
        if (n->type == YAML_MAPPING_NODE) {
            for (yaml_node_pair_t *pr = n->data.mapping.pairs.start; pr < n->data.mapping.pairs.top; pr++) {
                yaml_node_t *k = yaml_document_get_node(d, pr->key);
                if (k->type == YAML_SCALAR_NODE && !strcmp((char *)k->data.scalar.value, tok))
                    next = yaml_document_get_node(d, pr->value);
            }
        } else if (n->type == YAML_SEQUENCE_NODE) {
            long i = strtol(tok, NULL, 10);
            if (i >= 0 && i < n->data.sequence.items.top - n->data.sequence.items.start)
                next = yaml_document_get_node(d, n->data.sequence.items.start[i]);
        }
        n = next;
    }
    return n;
}

static const char *ystr(yaml_document_t *d, const char *path)
{
    yaml_node_t *n = yat(d, path);
    if (!n || n->type != YAML_SCALAR_NODE)
        fail_msg("no scalar at %s", path);
    return (const char *)n->data.scalar.value;
}

static long ylen(yaml_document_t *d, const char *path)
{
    yaml_node_t *n = yat(d, path);
    assert_non_null(n);
    assert_int_equal(n->type, YAML_SEQUENCE_NODE);
    return n->data.sequence.items.top - n->data.sequence.items.start;
}

static void kubernetes_manifest(void **state)
{
    (void)state;
    st_buf b;
    st_buf_init(&b, 1 << 16);
    st_deploy_opts o = { .replicas = 3 };
    assert_int_equal(st_deploy_k8s(&spec, cfg("fp8-all"), &o, &b), 0);
    ydoc y;
    yload(b.data, &y);
    assert_int_equal(y.n, 2);
    yaml_document_t *dep = &y.d[0], *svc = &y.d[1];
    assert_string_equal(ystr(dep, "apiVersion"), "apps/v1");
    assert_string_equal(ystr(dep, "kind"), "Deployment");
    assert_string_equal(ystr(dep, "metadata.name"), "fp8-all");
    assert_string_equal(ystr(dep, "spec.replicas"), "3");
    assert_non_null(strstr(b.data, "matchLabels:\n      app.kubernetes.io/name: \"fp8-all\""));
    const char *c0 = "spec.template.spec.containers.0";
    char p[160];
    snprintf(p, sizeof p, "%s.image", c0);
    assert_string_equal(ystr(dep, p), "vllm/vllm-openai:latest");
    snprintf(p, sizeof p, "%s.args", c0);
    long na = ylen(dep, p);
    const char *want[] = { "--model",
                           "Qwen/Qwen3-8B-FP8",
                           "--max-model-len",
                           "8192",
                           "--kv-cache-dtype",
                           "fp8",
                           "--max-num-batched-tokens",
                           "8192",
                           "--host",
                           "0.0.0.0",
                           "--port",
                           "8000" };
    assert_int_equal(na, (long)(sizeof want / sizeof *want));
    for (long i = 0; i < na; i++) {
        snprintf(p, sizeof p, "%s.args.%ld", c0, i);
        assert_string_equal(ystr(dep, p), want[i]);
    }
    snprintf(p, sizeof p, "%s.resources.limits", c0);
    yaml_node_t *lim = yat(dep, p);
    assert_non_null(lim); /* "nvidia.com/gpu" has a dot: look it up by hand */
    int found = 0;
    for (yaml_node_pair_t *pr = lim->data.mapping.pairs.start; pr < lim->data.mapping.pairs.top; pr++) {
        yaml_node_t *k = yaml_document_get_node(dep, pr->key), *v = yaml_document_get_node(dep, pr->value);
        if (!strcmp((char *)k->data.scalar.value, "nvidia.com/gpu")) {
            assert_string_equal((char *)v->data.scalar.value, "1");
            found = 1;
        }
    }
    assert_true(found);
    const char *probes[] = { "startupProbe", "readinessProbe", "livenessProbe" };
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s.%s.httpGet.path", c0, probes[i]);
        assert_string_equal(ystr(dep, p), "/health");
        snprintf(p, sizeof p, "%s.%s.httpGet.port", c0, probes[i]);
        assert_string_equal(ystr(dep, p), "http");
    }
    snprintf(p, sizeof p, "%s.ports.0.containerPort", c0);
    assert_string_equal(ystr(dep, p), "8000");
    assert_string_equal(ystr(svc, "kind"), "Service");
    assert_string_equal(ystr(svc, "spec.ports.0.port"), "8000");
    assert_string_equal(ystr(svc, "spec.ports.0.targetPort"), "http");
    for (int i = 0; i < y.n; i++)
        yaml_document_delete(&y.d[i]);
    /* the scrape annotations (keys with dots and slashes) are there as text */
    assert_non_null(strstr(b.data, "prometheus.io/scrape: \"true\""));
    assert_non_null(strstr(b.data, "prometheus.io/port: \"8000\""));
    st_buf_free(&b);
}

/* What sh makes of a command line: its words, one per line (printf '%s\n' "$@"). */
static void sh_words(const char *cmdline, char *out, size_t cap)
{
    char script[8192];
    size_t cl = strcspn(cmdline, "\n"); /* the snippet's final newline */
    snprintf(script, sizeof script, "set -- %.*s; printf '%%s\\n' \"$@\"", (int)cl, cmdline);
    char *argv[] = { "/bin/sh", "-c", script, NULL };
    st_test_capture(argv, out, cap);
}

static void hostile_names_and_values(void **state)
{
    (void)state;
    const char *text = "engine:\n  kind: vllm\n  model: \"org/My Model's\"\n"
                       "  flags: [--served-model-name, \"a b;c\", --host, 1.2.3.4, --chat-template, \"$(rm -rf ~)\"]\n"
                       "  env: {HF_TOKEN: \"${HF_TOKEN}\", GREETING: \"it's ${USER}\"}\n"
                       "hardware: {gpu: H100, gpus_per_replica: 2, price_per_gpu_hour: 2}\npeak_rate: 5\n"
                       "workload: {input_tokens: 10, output_tokens: 5}\nrates: [1]\n"
                       "slo: {ttft_p95_ms: 100, tpot_p95_ms: 10}\n"
                       "configurations:\n  - name: Base_Line.1+x\n";
    st_spec s;
    char err[512];
    if (st_spec_parse("h.yaml", text, strlen(text), &s, err, sizeof err))
        fail_msg("%s", err);
    st_buf b;
    st_buf_init(&b, 1 << 16);
    assert_int_equal(st_deploy_command(&s, &s.configs[0], &b), 0);
    /* environment first (references left to the shell), then the words exactly as given */
    const char *prefix = "HF_TOKEN=\"${HF_TOKEN}\" GREETING='it'\\''s '\"${USER}\" vllm serve ";
    if (strncmp(b.data, prefix, strlen(prefix)))
        fail_msg("got %s", b.data);
    char words[4096];
    sh_words(b.data + strlen(prefix) - strlen("vllm serve "), words, sizeof words);
    assert_string_equal(words, "vllm\nserve\norg/My Model's\n--served-model-name\na b;c\n--chat-template\n"
                               "$(rm -rf ~)\n--tensor-parallel-size\n2\n--host\n0.0.0.0\n--port\n8000\n");
    st_buf_reset(&b);
    assert_int_equal(st_deploy_k8s(&s, &s.configs[0], NULL, &b), 0);
    ydoc y;
    yload(b.data, &y);
    assert_string_equal(ystr(&y.d[0], "metadata.name"), "base-line-1-x");
    assert_string_equal(ystr(&y.d[0], "spec.template.spec.containers.0.args.1"), "org/My Model's");
    assert_string_equal(ystr(&y.d[0], "spec.template.spec.containers.0.env.0.valueFrom.secretKeyRef.key"), "HF_TOKEN");
    assert_string_equal(ystr(&y.d[0], "spec.template.spec.containers.0.env.1.value"), "it's ${USER}");
    for (int i = 0; i < y.n; i++)
        yaml_document_delete(&y.d[i]);
    st_buf_free(&b);
    char nm[64];
    st_deploy_k8s_name("--", nm, sizeof nm);
    assert_string_equal(nm, "llm");
    st_deploy_k8s_name("A_very_long_name_that_goes_on_and_on_and_on_past_sixty_three_characters_x", nm, sizeof nm);
    assert_true(strlen(nm) <= 63);
    assert_true(nm[strlen(nm) - 1] != '-');
    st_spec_free(&s);

    /* an endpoint has nothing to deploy */
    const char *ep = "engine: {kind: endpoint, model: m, url: \"http://127.0.0.1:9\"}\n"
                     "hardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 5\n"
                     "workload: {input_tokens: 10, output_tokens: 5}\nrates: [1]\n"
                     "slo: {ttft_p95_ms: 100, tpot_p95_ms: 10}\n";
    assert_int_equal(st_spec_parse("e.yaml", ep, strlen(ep), &s, err, sizeof err), 0);
    st_buf_init(&b, 1024);
    assert_int_equal(st_deploy_command(&s, &s.configs[0], &b), -1);
    assert_int_equal(st_deploy_supported(&s), 0);
    st_buf_free(&b);
    st_spec_free(&s);
}

/* The RunPod block is pasted into a console or sourced: sh reads every value back exactly, and
 * nothing in a value runs (the payload here only prints, were it ever run). */
static void runpod_values_quoted_for_the_shell(void **state)
{
    (void)state;
    const char *text = "engine:\n  kind: vllm\n  model: \"org/My Model's\"\n"
                       "  flags: [--served-model-name, \"a b;echo INJECTED\", --chat-template, \"$(echo INJECTED)\","
                       " \"--tokenizer=`echo INJECTED`\"]\n"
                       "  env: {GREETING: \"it's ${ST_TEST_UNSET_VAR}x\"}\n"
                       "hardware: {gpu: H100, price_per_gpu_hour: 2}\npeak_rate: 5\n"
                       "workload: {input_tokens: 10, output_tokens: 5}\nrates: [1]\n"
                       "slo: {ttft_p95_ms: 100, tpot_p95_ms: 10}\n";
    st_spec s;
    char err[512];
    if (st_spec_parse("r.yaml", text, strlen(text), &s, err, sizeof err))
        fail_msg("%s", err);
    st_buf b;
    st_buf_init(&b, 1 << 16);
    assert_int_equal(st_deploy_runpod_env(&s, &s.configs[0], &b), 0);
    char script[8192], out[4096];
    snprintf(script, sizeof script,
             "unset ST_TEST_UNSET_VAR; %s\nprintf '%%s\\n' \"$MODEL_NAME\" \"$SERVED_MODEL_NAME\" \"$CHAT_TEMPLATE\" "
             "\"$TOKENIZER\" \"$GREETING\"",
             b.data);
    char *argv[] = { "/bin/sh", "-c", script, NULL };
    st_test_capture(argv, out, sizeof out);
    if (strcmp(out, "org/My Model's\na b;echo INJECTED\n$(echo INJECTED)\n`echo INJECTED`\nit's x\n"))
        fail_msg("the block\n%s\nread back as\n%s", b.data, out);
    st_buf_free(&b);
    st_spec_free(&s);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(commands_for_the_example),
        cmocka_unit_test(kubernetes_manifest),
        cmocka_unit_test(hostile_names_and_values),
        cmocka_unit_test(runpod_values_quoted_for_the_shell),
    };
    return cmocka_run_group_tests(t, load_example, free_spec);
}
