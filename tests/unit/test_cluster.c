/* What an audit across a cluster is submitted as (cluster/cluster.h, core/buf.h, cluster/slurm.h's
 * parsers, the spec's cluster block): shell words that sh reads back byte for byte whatever they
 * hold; batch scripts that, run by bash as Slurm would, start servetune with exactly the intended
 * argument vector (hostile paths and names); the submit script run against a recording `sbatch`;
 * the sbatch argument vectors; the Kubernetes manifest parsed back with libyaml. */
#include "harness.h"

#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "cluster/jobs.h"
#include "cluster/k8s.h"
#include "cluster/slurm.h"
#include "audit/spec.h"
#include "core/file.h"

static char tmp[256];

static int setup(void **state)
{
    (void)state;
    snprintf(tmp, sizeof tmp, "/tmp/st_cluster_ut.XXXXXX");
    return mkdtemp(tmp) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf -- '%s'", tmp);
    if (!strncmp(tmp, "/tmp/st_cluster_ut.", 19))
        (void)!system(cmd);
    return 0;
}

/* Words that break naive quoting. */
static const char *HOSTILE[] = {
    "plain",
    "",
    "two words",
    "it's",
    "''",
    "'\\''",
    "\"double\"",
    "$HOME $(touch /tmp/st_cluster_pwned) `id`",
    "back\\slash\\",
    "new\nline\n",
    "tab\there",
    "%j %A_%a %%",
    "*?[a-z]{1,2}~",
    "-leading-dash",
    ";|&<>()!#",
    "utf-8: \xc3\xa9\xe2\x82\xac",
};
#define N_HOSTILE (sizeof HOSTILE / sizeof *HOSTILE)

/* Runs argv, returns its exit status; output in out (freed by the caller). */
static int run(char *const *argv, st_buf *out)
{
    char err[256];
    st_buf_init(out, 1 << 20);
    int rc = st_slurm_run(argv, 30, out, err, sizeof err);
    if (rc < 0)
        fail_msg("%s: %s", argv[0], err);
    return rc;
}

static void sh_quote_round_trips_through_sh(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_HOSTILE; i++) {
        st_buf cmd, out;
        st_buf_init(&cmd, 4096);
        st_buf_puts(&cmd, "printf '%s|' ");
        st_buf_shell_quote(&cmd, HOSTILE[i]);
        st_buf_puts(&cmd, " ");
        st_buf_shell_quote(&cmd, HOSTILE[i]);
        assert_int_equal(st_buf_error(&cmd), ST_BUF_OK);
        const char *shells[] = { "/bin/sh", "/bin/bash" };
        for (int k = 0; k < 2; k++) {
            char *argv[] = { (char *)shells[k], "-c", cmd.data, NULL };
            assert_int_equal(run(argv, &out), 0);
            char want[512];
            snprintf(want, sizeof want, "%s|%s|", HOSTILE[i], HOSTILE[i]);
            if (strcmp(out.data ? out.data : "", want))
                fail_msg("%s read back [%s] as [%s]", shells[k], HOSTILE[i], out.data ? out.data : "");
            st_buf_free(&out);
        }
        st_buf_free(&cmd);
    }
    assert_int_equal(access("/tmp/st_cluster_pwned", F_OK), -1);
    assert_true(st_shell_plain("--partition=gpu"));
    assert_false(st_shell_plain("a b"));
    assert_false(st_shell_plain(""));
    assert_false(st_shell_plain("$x"));
}

/* A folder whose name is as hostile as a path gets (no NUL, no '/', no backslash). */
static void hostile_dir(char *out, size_t n, const char *leaf)
{
    snprintf(out, n, "%s/%s it's \"$(x)\" `y` %%j;&", tmp, leaf);
    assert_int_equal(mkdir(out, 0755), 0);
}

/* A program that writes its arguments, NUL-separated, to $ST_ARGS_OUT. */
static void recorder(const char *path, const char *stdout_text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f,
            "#!/bin/sh\nfor a in \"$@\"; do printf '%%s\\0' \"$a\"; done >>\"$ST_ARGS_OUT\"\nprintf '\\n' "
            ">>\"$ST_ARGS_OUT\"\n%s",
            stdout_text ? stdout_text : "");
    fclose(f);
    assert_int_equal(chmod(path, 0755), 0);
}

/* The recorded argument vectors: line k (0-based), its words split at NULs into words. */
static int recorded(const char *path, int line, char words[][600], int max)
{
    size_t len;
    char err[256];
    char *t = st_read_file(path, 1 << 20, &len, err, sizeof err);
    assert_non_null(t);
    size_t i = 0;
    for (int l = 0; l < line && i < len; i++)
        if (t[i] == '\n' && (i == 0 || t[i - 1] == '\0'))
            l++;
    int n = 0;
    while (i < len && !(t[i] == '\n' && (i == 0 || t[i - 1] == '\0')) && n < max) {
        size_t k = strlen(t + i);
        snprintf(words[n++], 600, "%s", t + i);
        i += k + 1;
    }
    free(t);
    return n;
}

static const char *CONFIGS[] = { "baseline", "-dash", "x+y.z_1" };
static const int ALL[] = { 0, 1, 2 };

static st_slurm_plan plan_in(const char *bin, const char *spec, const char *out)
{
    static const char *sargs[] = { "--qos=it's $(x)", "--comment=a b" };
    st_slurm_plan p = { .servetune = bin,
                        .spec_path = spec,
                        .out_dir = out,
                        .spec_hash = "0123abcd",
                        .configs = CONFIGS,
                        .n_configs = 3,
                        .indices = ALL,
                        .n_indices = 3,
                        .partition = "gpu",
                        .account = "team-a",
                        .time = "1:00:00",
                        .gpus = 2,
                        .gpu_request = ST_GPU_GRES,
                        .max_concurrent = 0,
                        .sbatch_args = sargs,
                        .n_sbatch_args = 2,
                        .version = "test" };
    return p;
}

static void task_script_starts_servetune_with_exact_arguments(void **state)
{
    (void)state;
    char d[512], bin[700], spec[700], out[700], script[700], args[700], merge[700];
    hostile_dir(d, sizeof d, "bin");
    snprintf(bin, sizeof bin, "%s/serve tune's", d);
    recorder(bin, NULL);
    snprintf(spec, sizeof spec, "%s/spec $(z).yaml", d);
    snprintf(out, sizeof out, "%s/out\nline", d);
    snprintf(args, sizeof args, "%s/args", tmp);
    setenv("ST_ARGS_OUT", args, 1);
    st_slurm_plan p = plan_in(bin, spec, out);
    st_buf b;
    st_buf_init(&b, ST_SLURM_SCRIPT_MAX);
    assert_int_equal(st_slurm_task_script(&p, &b), 0);
    snprintf(script, sizeof script, "%s/tasks.sbatch", tmp);
    char err[256];
    assert_int_equal(st_write_file_atomic(script, b.data, b.len, err, sizeof err), 0);
    st_buf_free(&b);
    for (int idx = 0; idx < 3; idx++) {
        char id[16];
        snprintf(id, sizeof id, "%d", idx);
        setenv("SLURM_ARRAY_TASK_ID", id, 1);
        char *argv[] = { "/bin/bash", script, NULL };
        st_buf o;
        assert_int_equal(run(argv, &o), 0);
        st_buf_free(&o);
        char w[16][600];
        int n = recorded(args, idx, w, 16);
        char only[100];
        snprintf(only, sizeof only, "--only=%s", CONFIGS[idx]);
        char outarg[800];
        snprintf(outarg, sizeof outarg, "--output=%s", out);
        const char *want[] = { "audit", only, "--resume", "--expect-spec-hash=0123abcd", outarg, "--", spec };
        assert_int_equal(n, 7);
        for (int k = 0; k < 7; k++)
            assert_string_equal(w[k], want[k]);
    }
    /* an index past the configurations runs nothing and says so */
    setenv("SLURM_ARRAY_TASK_ID", "3", 1);
    char *argv[] = { "/bin/bash", script, NULL };
    st_buf o;
    assert_int_equal(run(argv, &o), 2);
    assert_non_null(strstr(o.data, "no configuration at array index 3"));
    st_buf_free(&o);
    unsetenv("SLURM_ARRAY_TASK_ID");

    /* the merge script */
    st_buf_init(&b, ST_SLURM_SCRIPT_MAX);
    assert_int_equal(st_slurm_merge_script(&p, &b), 0);
    snprintf(merge, sizeof merge, "%s/merge.sbatch", tmp);
    assert_int_equal(st_write_file_atomic(merge, b.data, b.len, err, sizeof err), 0);
    st_buf_free(&b);
    char *margv[] = { "/bin/bash", merge, NULL };
    assert_int_equal(run(margv, &o), 0);
    st_buf_free(&o);
    char w[16][600];
    int n = recorded(args, 3, w, 16);
    char mo[800];
    snprintf(mo, sizeof mo, "--merge=%s", out);
    assert_int_equal(n, 3);
    assert_string_equal(w[0], "audit");
    assert_string_equal(w[1], "--expect-spec-hash=0123abcd");
    assert_string_equal(w[2], mo);
}

static int has_word(const st_strv *v, const char *w)
{
    for (int i = 0; i < v->n; i++)
        if (!strcmp(v->v[i], w))
            return 1;
    return 0;
}

static void sbatch_argv_and_array_spec(void **state)
{
    (void)state;
    st_slurm_plan p = plan_in("/bin/servetune", "/s/spec.yaml", "/out/100%");
    st_strv v = { 0 };
    assert_int_equal(st_slurm_array_argv(&p, "/out/100%/cluster/tasks.sbatch", &v), 0);
    assert_string_equal(v.v[0], "sbatch");
    assert_true(has_word(&v, "--parsable"));
    assert_true(has_word(&v, "--array=0-2"));
    assert_true(has_word(&v, "--gres=gpu:2"));
    assert_true(has_word(&v, "--partition=gpu"));
    assert_true(has_word(&v, "--account=team-a"));
    assert_true(has_word(&v, "--time=1:00:00"));
    assert_true(has_word(&v, "--chdir=/out/100%"));
    assert_true(has_word(&v, "--requeue"));
    /* Slurm expands %-patterns over the whole output path: DIR's % is doubled */
    assert_true(has_word(&v, "--output=/out/100%%/cluster/logs/task-%A_%a.out"));
    /* the user's arguments come last before the script, so they override */
    assert_string_equal(v.v[v.n - 3], "--qos=it's $(x)");
    assert_string_equal(v.v[v.n - 2], "--comment=a b");
    assert_string_equal(v.v[v.n - 1], "/out/100%/cluster/tasks.sbatch");
    st_strv_free(&v);

    p.gpu_request = ST_GPU_GPUS;
    assert_int_equal(st_slurm_array_argv(&p, "t", &v), 0);
    assert_true(has_word(&v, "--gpus=2"));
    assert_false(has_word(&v, "--gres=gpu:2"));
    st_strv_free(&v);
    p.gpu_request = ST_GPU_NONE;
    assert_int_equal(st_slurm_array_argv(&p, "t", &v), 0);
    for (int i = 0; i < v.n; i++)
        assert_true(strncmp(v.v[i], "--gres", 6) && strncmp(v.v[i], "--gpus", 6));
    st_strv_free(&v);

    assert_int_equal(st_slurm_merge_argv(&p, "m", "77", &v), 0);
    assert_true(has_word(&v, "--dependency=afterany:77"));
    assert_true(has_word(&v, "--output=/out/100%%/cluster/logs/merge-%j.out"));
    assert_false(has_word(&v, "--requeue"));
    for (int i = 0; i < v.n; i++)
        assert_null(strstr(v.v[i], "--array"));
    st_strv_free(&v);

    int idx[] = { 8, 0, 2, 1, 5, 7 };
    p.indices = idx;
    p.n_indices = 6;
    char a[64];
    assert_int_equal(st_slurm_array_spec(&p, a, sizeof a), 0);
    assert_string_equal(a, "0-2,5,7-8");
    p.max_concurrent = 2;
    assert_int_equal(st_slurm_array_spec(&p, a, sizeof a), 0);
    assert_string_equal(a, "0-2,5,7-8%2");
    int one[] = { 4 };
    p.indices = one;
    p.n_indices = 1;
    p.max_concurrent = 0;
    assert_int_equal(st_slurm_array_spec(&p, a, sizeof a), 0);
    assert_string_equal(a, "4");
    assert_int_equal(st_slurm_array_spec(&p, a, 1), -1);

    char why[256];
    assert_int_equal(st_slurm_dir_ok("/a/it's $x %j", why, sizeof why), 0);
    assert_int_equal(st_slurm_dir_ok("/a\\b", why, sizeof why), -1);
    assert_non_null(strstr(why, "backslash"));
    assert_int_equal(st_slurm_dir_ok("/a\nb", why, sizeof why), -1);
}

/* submit.sh, run against a recording sbatch, submits exactly the argument vectors servetune uses,
 * the merge after the array's id. */
static void submit_script_submits_the_same_vectors(void **state)
{
    (void)state;
    char d[512], sb[700], args[700], path[1400], script[700];
    hostile_dir(d, sizeof d, "fakebin");
    snprintf(sb, sizeof sb, "%s/sbatch", d);
    recorder(sb, "echo '4242;cluster'\n");
    snprintf(args, sizeof args, "%s/sbatch-args", tmp);
    setenv("ST_ARGS_OUT", args, 1);
    char out[600];
    snprintf(out, sizeof out, "%s/o'ut %%j", tmp);
    st_slurm_plan p = plan_in("/bin/servetune", "/s/spec.yaml", out);
    st_strv a = { 0 }, m = { 0 };
    assert_int_equal(st_slurm_array_argv(&p, "/x/tasks $1.sbatch", &a), 0);
    assert_int_equal(st_slurm_merge_argv(&p, "/x/merge.sbatch", NULL, &m), 0);
    st_buf b;
    st_buf_init(&b, ST_SLURM_SCRIPT_MAX);
    assert_int_equal(st_slurm_submit_script(&a, &m, &b), 0);
    snprintf(script, sizeof script, "%s/submit.sh", tmp);
    char err[256];
    assert_int_equal(st_write_file_atomic(script, b.data, b.len, err, sizeof err), 0);
    st_buf_free(&b);
    snprintf(path, sizeof path, "%s:%s", d, getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
    char *old = strdup(getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
    setenv("PATH", path, 1);
    char *argv[] = { "/bin/sh", script, NULL };
    st_buf o;
    int rc = run(argv, &o);
    setenv("PATH", old, 1);
    free(old);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(o.data, "job array: 4242"));
    st_buf_free(&o);
    char w[64][600];
    int n = recorded(args, 0, w, 64);
    assert_int_equal(n, a.n - 1);
    for (int i = 1; i < a.n; i++)
        assert_string_equal(w[i - 1], a.v[i]);
    n = recorded(args, 1, w, 64);
    assert_int_equal(n, m.n); /* the merge's words plus --dependency */
    assert_string_equal(w[0], "--dependency=afterany:4242");
    for (int i = 1; i < m.n; i++)
        assert_string_equal(w[i], m.v[i]);
    st_strv_free(&a);
    st_strv_free(&m);
}

static void job_ids_and_queue_lines(void **state)
{
    (void)state;
    char id[32];
    assert_int_equal(st_slurm_parse_jobid("1234\n", id, sizeof id), 0);
    assert_string_equal(id, "1234");
    assert_int_equal(st_slurm_parse_jobid("77;cluster\n", id, sizeof id), 0);
    assert_string_equal(id, "77");
    assert_int_equal(st_slurm_parse_jobid("sbatch: error: x", id, sizeof id), -1);
    assert_int_equal(st_slurm_parse_jobid("12x", id, sizeof id), -1);
    assert_int_equal(st_slurm_parse_jobid("", id, sizeof id), -1);
    st_slurm_task *t;
    int n;
    assert_int_equal(
        st_slurm_parse_queue("12|0|RUNNING\n12|1|PENDING\n12|2|CANCELLED by 0\n13|N/A|PENDING\ngarbage\n", &t, &n), 0);
    assert_int_equal(n, 4);
    assert_string_equal(t[0].job, "12");
    assert_int_equal(t[0].task, 0);
    assert_string_equal(t[0].state, "RUNNING");
    assert_int_equal(t[2].task, 2);
    assert_string_equal(t[2].state, "CANCELLED");
    assert_string_equal(t[3].job, "13");
    assert_int_equal(t[3].task, -1);
    free(t);
    assert_true(st_slurm_state_active("PENDING"));
    assert_true(st_slurm_state_active("RUNNING"));
    assert_false(st_slurm_state_active("COMPLETED"));
    assert_false(st_slurm_state_active("TIMEOUT"));
    assert_false(st_slurm_state_active("CANCELLED"));
}

/* ---- the Kubernetes manifest, read back with libyaml ---- */

static yaml_node_t *ykey(yaml_document_t *d, yaml_node_t *m, const char *key)
{
    if (!m || m->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(d, p->key);
        if (k && k->type == YAML_SCALAR_NODE && !strcmp((const char *)k->data.scalar.value, key))
            return yaml_document_get_node(d, p->value);
    }
    return NULL;
}

static yaml_node_t *yidx(yaml_document_t *d, yaml_node_t *s, int i)
{
    if (!s || s->type != YAML_SEQUENCE_NODE || i >= (int)(s->data.sequence.items.top - s->data.sequence.items.start))
        return NULL;
    return yaml_document_get_node(d, s->data.sequence.items.start[i]);
}

static int ylen(yaml_node_t *s)
{
    return s && s->type == YAML_SEQUENCE_NODE ? (int)(s->data.sequence.items.top - s->data.sequence.items.start) : -1;
}

static const char *yval(yaml_node_t *n)
{
    if (!n || n->type != YAML_SCALAR_NODE)
        fail_msg("expected a scalar");
    return (const char *)n->data.scalar.value;
}

/* Walks a dotted path of mapping keys ("spec.template.spec"). */
static yaml_node_t *ypath(yaml_document_t *d, yaml_node_t *n, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *save = NULL, *k = strtok_r(buf, ".", &save); k && n; k = strtok_r(NULL, ".", &save))
        n = ykey(d, n, k);
    if (!n)
        fail_msg("manifest: no %s", path);
    return n;
}

static void k8s_manifest_is_valid_yaml(void **state)
{
    (void)state;
    const char *spec_text = "engine:\n  kind: vllm   # it's \"quoted\" $(x) \\ back\n\tweird: \x01\n  model: m\n"
                            "# \xc3\xa9t\xc3\xa9\n";
    st_k8s_plan p = { .name = "servetune-audit-0123abcd",
                      .ns = "bench",
                      .image = "registry.example/servetune:1.0",
                      .volume_claim = "audit-results",
                      .gpu_resource = NULL,
                      .gpus = 2,
                      .gpu_request = ST_GPU_GRES,
                      .parallelism = 0,
                      .spec_text = spec_text,
                      .spec_len = strlen(spec_text),
                      .spec_hash = "0123abcd",
                      .configs = CONFIGS,
                      .n_configs = 3,
                      .version = "test" };
    st_buf b;
    st_buf_init(&b, ST_K8S_MANIFEST_MAX);
    assert_int_equal(st_k8s_manifest(&p, &b), 0);
    yaml_parser_t parser;
    assert_true(yaml_parser_initialize(&parser));
    yaml_parser_set_input_string(&parser, (const unsigned char *)b.data, b.len);
    yaml_document_t cm, job;
    if (!yaml_parser_load(&parser, &cm))
        fail_msg("YAML: %s at line %zu", parser.problem, parser.problem_mark.line + 1);
    assert_true(yaml_parser_load(&parser, &job));
    yaml_node_t *c = yaml_document_get_root_node(&cm), *j = yaml_document_get_root_node(&job);
    assert_non_null(c);
    assert_non_null(j);
    yaml_document_t end;
    assert_true(yaml_parser_load(&parser, &end));
    assert_null(yaml_document_get_root_node(&end)); /* two documents, no more */
    yaml_document_delete(&end);

    assert_string_equal(yval(ypath(&cm, c, "apiVersion")), "v1");
    assert_string_equal(yval(ypath(&cm, c, "kind")), "ConfigMap");
    assert_string_equal(yval(ypath(&cm, c, "metadata.name")), "servetune-audit-0123abcd-spec");
    assert_string_equal(yval(ypath(&cm, c, "metadata.namespace")), "bench");
    /* the spec text comes back byte for byte */
    assert_string_equal(yval(ykey(&cm, ypath(&cm, c, "data"), "spec.yaml")), spec_text);

    assert_string_equal(yval(ypath(&job, j, "apiVersion")), "batch/v1");
    assert_string_equal(yval(ypath(&job, j, "kind")), "Job");
    assert_string_equal(yval(ypath(&job, j, "metadata.name")), "servetune-audit-0123abcd");
    assert_string_equal(yval(ypath(&job, j, "spec.completionMode")), "Indexed");
    assert_string_equal(yval(ypath(&job, j, "spec.completions")), "3");
    assert_string_equal(yval(ypath(&job, j, "spec.parallelism")), "3");
    yaml_node_t *pod = ypath(&job, j, "spec.template.spec");
    assert_string_equal(yval(ykey(&job, pod, "restartPolicy")), "Never");
    yaml_node_t *ctr = yidx(&job, ykey(&job, pod, "containers"), 0);
    assert_non_null(ctr);
    assert_string_equal(yval(ykey(&job, ctr, "image")), "registry.example/servetune:1.0");
    yaml_node_t *cmd = ykey(&job, ctr, "command");
    const char *want[] = { "servetune",
                           "audit",
                           "--output=/results",
                           "--only-index=$(SERVETUNE_INDEX)",
                           "--resume",
                           "--expect-spec-hash=0123abcd",
                           "--",
                           "/etc/servetune/spec.yaml" };
    assert_int_equal(ylen(cmd), 8);
    for (int i = 0; i < 8; i++)
        assert_string_equal(yval(yidx(&job, cmd, i)), want[i]);
    /* $(SERVETUNE_INDEX) is expanded by the kubelet only for a variable the container defines */
    yaml_node_t *env = yidx(&job, ykey(&job, ctr, "env"), 0);
    assert_string_equal(yval(ykey(&job, env, "name")), "SERVETUNE_INDEX");
    assert_string_equal(yval(ypath(&job, env, "valueFrom.fieldRef.fieldPath")),
                        "metadata.annotations['batch.kubernetes.io/job-completion-index']");
    assert_string_equal(yval(ykey(&job, ypath(&job, ctr, "resources.limits"), "nvidia.com/gpu")), "2");
    yaml_node_t *vols = ykey(&job, pod, "volumes");
    assert_int_equal(ylen(vols), 2);
    assert_string_equal(yval(ypath(&job, yidx(&job, vols, 0), "configMap.name")), "servetune-audit-0123abcd-spec");
    assert_string_equal(yval(ypath(&job, yidx(&job, vols, 1), "persistentVolumeClaim.claimName")), "audit-results");
    yaml_node_t *mounts = ykey(&job, ctr, "volumeMounts");
    assert_string_equal(yval(ykey(&job, yidx(&job, mounts, 0), "mountPath")), "/etc/servetune");
    assert_string_equal(yval(ykey(&job, yidx(&job, mounts, 1), "mountPath")), "/results");
    yaml_document_delete(&cm);
    yaml_document_delete(&job);
    yaml_parser_delete(&parser);
    st_buf_free(&b);

    /* no GPU asked for: no resources; parallelism as given; no namespace */
    p.gpu_request = ST_GPU_NONE;
    p.parallelism = 1;
    p.ns = NULL;
    st_buf_init(&b, ST_K8S_MANIFEST_MAX);
    assert_int_equal(st_k8s_manifest(&p, &b), 0);
    assert_null(strstr(b.data, "resources:"));
    assert_null(strstr(b.data, "namespace:"));
    assert_non_null(strstr(b.data, "parallelism: 1\n"));
    st_buf_free(&b);
}

/* ---- the spec's cluster block ---- */

static const char *MIN = "engine: {kind: vllm, model: m}\n"
                         "hardware: {gpu: H100, gpus_per_replica: 2, price_per_gpu_hour: 2.5}\n"
                         "peak_rate: 10\n"
                         "workload: {input_tokens: 100, output_tokens: 10}\n"
                         "rates: [1, 2]\n"
                         "slo: {ttft_p95_ms: 1500, tpot_p95_ms: 50}\n";

static int parse_with(const char *extra, st_spec *s, char *err, size_t errlen)
{
    char text[4096];
    snprintf(text, sizeof text, "%s%s", MIN, extra);
    return st_spec_parse("t.yaml", text, strlen(text), s, err, errlen);
}

static void spec_cluster_block(void **state)
{
    (void)state;
    st_spec s;
    char err[512] = "";
    int rc = parse_with("cluster:\n  slurm:\n    partition: gpu\n    account: team-a\n    time: 1-12:00:00\n"
                        "    gpus_per_task: 4\n    gpu_request: gpus\n    max_concurrent: 3\n"
                        "    sbatch_args: [--qos=high, --constraint=h100]\n"
                        "  kubernetes:\n    image: reg/servetune:1\n    namespace: bench\n    volume_claim: out.v1\n"
                        "    gpu_resource: amd.com/gpu\n    parallelism: 2\n",
                        &s, err, sizeof err);
    if (rc)
        fail_msg("%s", err);
    assert_string_equal(s.cluster.slurm.partition, "gpu");
    assert_string_equal(s.cluster.slurm.account, "team-a");
    assert_string_equal(s.cluster.slurm.time, "1-12:00:00");
    assert_int_equal(s.cluster.slurm.gpus_per_task, 4);
    assert_int_equal(s.cluster.slurm.gpu_request, ST_GPU_GPUS);
    assert_int_equal(s.cluster.slurm.max_concurrent, 3);
    assert_int_equal(s.cluster.slurm.sbatch_args.n, 2);
    assert_string_equal(s.cluster.slurm.sbatch_args.v[1], "--constraint=h100");
    assert_string_equal(s.cluster.kubernetes.image, "reg/servetune:1");
    assert_string_equal(s.cluster.kubernetes.ns, "bench");
    assert_string_equal(s.cluster.kubernetes.volume_claim, "out.v1");
    assert_string_equal(s.cluster.kubernetes.gpu_resource, "amd.com/gpu");
    assert_int_equal(s.cluster.kubernetes.parallelism, 2);
    st_spec_free(&s);
    /* absent: defaults */
    assert_int_equal(parse_with("", &s, err, sizeof err), 0);
    assert_null(s.cluster.slurm.partition);
    assert_int_equal(s.cluster.slurm.gpu_request, ST_GPU_GRES);
    assert_int_equal(s.cluster.slurm.gpus_per_task, 0);
    st_spec_free(&s);
    struct {
        const char *extra, *msg;
    } bad[] = {
        { "cluster:\n  lsf: {}\n", "t.yaml:8: cluster: unknown key 'lsf'" },
        { "cluster:\n  slurm:\n    gpu_request: many\n", "cluster.slurm.gpu_request: expected gres, gpus or none" },
        { "cluster:\n  slurm:\n    time: soon\n", "cluster.slurm.time: a Slurm time limit" },
        { "cluster:\n  slurm:\n    partition: \"a b\"\n", "cluster.slurm.partition: 'a b' is not a name" },
        { "cluster:\n  slurm:\n    gpus_per_task: 0\n", "cluster.slurm.gpus_per_task: must be at least 1" },
        { "cluster:\n  slurm:\n    sbatch_args: [--comment, x, --api-key, sk-1]\n", "looks like a secret" },
        { "cluster:\n  kubernetes:\n    namespace: Bench\n", "cluster.kubernetes.namespace: lower-case" },
        { "cluster:\n  kubernetes:\n    image: \"$(evil)\"\n", "is not a name" },
        { "cluster:\n  kubernetes:\n    volume_claim: Out\n", "cluster.kubernetes.volume_claim: lower-case" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = '\0';
        assert_int_equal(parse_with(bad[i].extra, &s, err, sizeof err), -1);
        if (!strstr(err, bad[i].msg))
            fail_msg("case %zu: got [%s], expected [%s]", i, err, bad[i].msg);
    }
}

/* The checks of cluster.kubernetes's values, as --k8s-image, --k8s-namespace and --k8s-pvc use
 * them: what kubectl would refuse, or what would not be YAML, is refused with the option named. */
static void k8s_values_are_checked(void **state)
{
    (void)state;
    static const struct {
        st_k8s_value which;
        const char *v, *want; /* want NULL: accepted */
    } cases[] = {
        { ST_K8S_IMAGE, "registry.example/servetune:1.2@sha256:ab12", NULL },
        { ST_K8S_IMAGE, "", "--x: must not be empty" },
        { ST_K8S_IMAGE, "Bad Name", "--x: 'Bad Name' is not a name" },
        { ST_K8S_IMAGE, "img\"q", "is not a name" },
        { ST_K8S_IMAGE, "img'q", "is not a name" },
        { ST_K8S_IMAGE, "img$x", "is not a name" },
        { ST_K8S_IMAGE, "img\x7f", "--x: not a name (a control character or a byte outside ASCII)" },
        { ST_K8S_IMAGE, "img\xc3\x28", "a byte outside ASCII" }, /* invalid UTF-8 */
        { ST_K8S_IMAGE, "img\n", "a control character" },
        { ST_K8S_NAMESPACE, "bench-1", NULL },
        { ST_K8S_NAMESPACE, "Bad Name", "is not a name" },
        { ST_K8S_NAMESPACE, "Bench", "--x: lower-case letters, digits and '-' (at most 63)" },
        { ST_K8S_NAMESPACE, "a.b", "lower-case letters, digits and '-'" },
        { ST_K8S_NAMESPACE, "-a", "lower-case" },
        { ST_K8S_NAMESPACE, "a234567890123456789012345678901234567890123456789012345678901234", "at most 63" },
        { ST_K8S_NAMESPACE, "", "must not be empty" },
        { ST_K8S_VOLUME_CLAIM, "out.v1", NULL },
        { ST_K8S_VOLUME_CLAIM, "Out", "--x: lower-case letters, digits, '-' and '.'" },
        { ST_K8S_VOLUME_CLAIM, "out.", "lower-case" },
        { ST_K8S_VOLUME_CLAIM, "o\x7f", "not a name" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char err[300] = "";
        int rc = st_spec_k8s_value_check(cases[i].which, "--x", cases[i].v, err, sizeof err);
        if (!cases[i].want && rc)
            fail_msg("case %zu: refused: %s", i, err);
        if (cases[i].want && (rc != -1 || !strstr(err, cases[i].want)))
            fail_msg("case %zu: rc %d, got [%s], expected [%s]", i, rc, err, cases[i].want);
    }
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(sh_quote_round_trips_through_sh),
        cmocka_unit_test_setup_teardown(task_script_starts_servetune_with_exact_arguments, setup, teardown),
        cmocka_unit_test(sbatch_argv_and_array_spec),
        cmocka_unit_test_setup_teardown(submit_script_submits_the_same_vectors, setup, teardown),
        cmocka_unit_test(job_ids_and_queue_lines),
        cmocka_unit_test(k8s_manifest_is_valid_yaml),
        cmocka_unit_test(k8s_values_are_checked),
        cmocka_unit_test(spec_cluster_block),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
