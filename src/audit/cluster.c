#include "audit/cluster.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ---- shell ---- */

int st_buf_sh_argv(st_buf *b, const st_strv *argv)
{
    for (int i = 0; i < argv->n; i++) {
        if (i)
            st_buf_puts(b, " ");
        st_buf_shell_quote(b, argv->v[i]);
    }
    return st_buf_error(b) ? -1 : 0;
}

/* ---- Slurm ---- */

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int st_slurm_array_spec(const st_slurm_plan *p, char *out, size_t n)
{
    if (p->n_indices <= 0 || n == 0)
        return -1;
    int *v = malloc(sizeof *v * (size_t)p->n_indices);
    if (!v)
        return -1;
    memcpy(v, p->indices, sizeof *v * (size_t)p->n_indices);
    qsort(v, (size_t)p->n_indices, sizeof *v, cmp_int);
    size_t off = 0;
    int rc = 0;
    out[0] = '\0';
    for (int i = 0; i < p->n_indices && rc == 0;) {
        int j = i;
        while (j + 1 < p->n_indices && v[j + 1] <= v[j] + 1)
            j++;
        int w = v[j] > v[i] ? snprintf(out + off, n - off, "%s%d-%d", off ? "," : "", v[i], v[j])
                            : snprintf(out + off, n - off, "%s%d", off ? "," : "", v[i]);
        if (w < 0 || (size_t)w >= n - off)
            rc = -1;
        else
            off += (size_t)w;
        i = j + 1;
    }
    if (rc == 0 && p->max_concurrent > 0) {
        int w = snprintf(out + off, n - off, "%%%d", p->max_concurrent);
        if (w < 0 || (size_t)w >= n - off)
            rc = -1;
    }
    free(v);
    return rc;
}

/* The comment lines that say what made the script. */
static void header(st_buf *b, const st_slurm_plan *p, const char *what)
{
    st_buf_printf(b,
                  "#!/bin/bash\n"
                  "# %s\n"
                  "# Written by servetune %s (servetune audit --slurm); kept for inspection. The sbatch options\n"
                  "# are in %s/%s; every word below is single-quoted (no expansion).\n",
                  what, p->version ? p->version : "?", ST_CLUSTER_DIR, ST_CLUSTER_SUBMIT);
}

int st_slurm_task_script(const st_slurm_plan *p, st_buf *b)
{
    header(b, p,
           "servetune audit: one Slurm array task per configuration; the array index is its position in the "
           "spec.");
    st_buf_puts(b, "set -u\n# array index -> configuration\ncase \"${SLURM_ARRAY_TASK_ID:-}\" in\n");
    for (int i = 0; i < p->n_configs; i++) {
        st_buf_printf(b, "  %d) config=", i);
        st_buf_shell_quote(b, p->configs[i]);
        st_buf_puts(b, " ;;\n");
    }
    st_buf_puts(b, "  *) echo \"servetune: no configuration at array index ${SLURM_ARRAY_TASK_ID:-(unset)}\" >&2; "
                   "exit 2 ;;\nesac\n");
    st_buf_puts(b, "# the configuration's shard: DIR/shards/NAME.sqlite (continued, not repeated, when the task\n"
                   "# runs again after a requeue)\nexec ");
    st_buf_shell_quote(b, p->servetune);
    st_buf_puts(b, " audit --only=\"$config\" --resume --expect-spec-hash=");
    st_buf_shell_quote(b, p->spec_hash);
    st_buf_puts(b, " --output=");
    st_buf_shell_quote(b, p->out_dir);
    st_buf_puts(b, " -- ");
    st_buf_shell_quote(b, p->spec_path);
    st_buf_puts(b, "\n");
    return st_buf_error(b) ? -1 : 0;
}

int st_slurm_merge_script(const st_slurm_plan *p, st_buf *b)
{
    header(b, p, "servetune audit: merges the configurations' shards into results.sqlite and writes the reports.");
    st_buf_puts(b, "set -u\nexec ");
    st_buf_shell_quote(b, p->servetune);
    st_buf_puts(b, " audit --expect-spec-hash=");
    st_buf_shell_quote(b, p->spec_hash);
    st_buf_puts(b, " --merge=");
    st_buf_shell_quote(b, p->out_dir);
    st_buf_puts(b, "\n");
    return st_buf_error(b) ? -1 : 0;
}

/* Pushes prefix followed by val as one word. */
static int pushf(st_strv *v, const char *prefix, const char *val)
{
    size_t n = strlen(prefix) + strlen(val) + 1;
    char *s = malloc(n);
    if (!s)
        return -1;
    snprintf(s, n, "%s%s", prefix, val);
    int rc = st_strv_push(v, s);
    free(s);
    return rc;
}

/* The job output file: DIR/cluster/logs/NAME with DIR's '%' doubled (Slurm expands %-patterns over
 * the whole path, the working directory of a relative one included). */
static int push_output(st_strv *v, const char *dir, const char *name)
{
    size_t n = strlen("--output=") + 2 * strlen(dir) + strlen(ST_CLUSTER_LOGS) + strlen(name) + 3;
    char *s = malloc(n);
    if (!s)
        return -1;
    size_t k = (size_t)snprintf(s, n, "--output=");
    for (const char *c = dir; *c; c++) {
        if (*c == '%')
            s[k++] = '%';
        s[k++] = *c;
    }
    snprintf(s + k, n - k, "/%s/%s", ST_CLUSTER_LOGS, name);
    int rc = st_strv_push(v, s);
    free(s);
    return rc;
}

int st_slurm_dir_ok(const char *dir, char *why, size_t n)
{
    for (const char *c = dir; *c; c++) {
        if (*c == '\\') {
            snprintf(why, n,
                     "Slurm reads a backslash in an output path as 'no %%-patterns', so the tasks' output "
                     "files would collide: choose an output folder without '\\'");
            return -1;
        }
        if ((unsigned char)*c < ' ' || *c == 127) {
            snprintf(why, n,
                     "the output folder's path holds a control character (a newline?): Slurm's job "
                     "options cannot carry it");
            return -1;
        }
    }
    return 0;
}

/* The options both jobs share: working directory, partition, account, time, the user's. */
static int common_args(const st_slurm_plan *p, st_strv *v)
{
    int rc = pushf(v, "--chdir=", p->out_dir);
    if (p->partition)
        rc |= pushf(v, "--partition=", p->partition);
    if (p->account)
        rc |= pushf(v, "--account=", p->account);
    if (p->time)
        rc |= pushf(v, "--time=", p->time);
    return rc;
}

static int user_args(const st_slurm_plan *p, st_strv *v)
{
    int rc = 0;
    for (int i = 0; i < p->n_sbatch_args; i++)
        rc |= st_strv_push(v, p->sbatch_args[i]);
    return rc;
}

int st_slurm_array_argv(const st_slurm_plan *p, const char *script, st_strv *v)
{
    char arr[4096], gpus[32];
    if (st_slurm_array_spec(p, arr, sizeof arr))
        return -1;
    snprintf(gpus, sizeof gpus, "%d", p->gpus);
    int rc = st_strv_push(v, "sbatch");
    rc |= st_strv_push(v, "--parsable");
    rc |= st_strv_push(v, "--job-name=servetune-audit");
    rc |= pushf(v, "--array=", arr);
    rc |= st_strv_push(v, "--ntasks=1");
    /* a preempted or requeued task runs again and continues its shard (--resume) */
    rc |= st_strv_push(v, "--requeue");
    rc |= st_strv_push(v, "--open-mode=append");
    rc |= push_output(v, p->out_dir, "task-%A_%a.out");
    rc |= common_args(p, v);
    if (p->gpu_request == ST_GPU_GRES)
        rc |= pushf(v, "--gres=gpu:", gpus);
    else if (p->gpu_request == ST_GPU_GPUS)
        rc |= pushf(v, "--gpus=", gpus);
    rc |= user_args(p, v);
    rc |= st_strv_push(v, script);
    return rc ? -1 : 0;
}

int st_slurm_merge_argv(const st_slurm_plan *p, const char *script, const char *array_job, st_strv *v)
{
    int rc = st_strv_push(v, "sbatch");
    rc |= st_strv_push(v, "--parsable");
    rc |= st_strv_push(v, "--job-name=servetune-merge");
    if (array_job)
        rc |= pushf(v, "--dependency=afterany:", array_job);
    rc |= st_strv_push(v, "--ntasks=1");
    rc |= st_strv_push(v, "--open-mode=append");
    rc |= push_output(v, p->out_dir, "merge-%j.out");
    rc |= common_args(p, v);
    rc |= user_args(p, v);
    rc |= st_strv_push(v, script);
    return rc ? -1 : 0;
}

int st_slurm_submit_script(const st_strv *array_argv, const st_strv *merge_argv, st_buf *b)
{
    st_buf_puts(b, "#!/bin/sh\n"
                   "# The submission of this audit as servetune made it (it runs sbatch with an argument vector,\n"
                   "# never through a shell), written out to read or to run by hand: sh submit.sh\n"
                   "set -eu\n");
    if (array_argv) {
        st_buf_puts(b, "array=$(");
        st_buf_sh_argv(b, array_argv);
        st_buf_puts(b, ")\narray=${array%%;*}\necho \"job array: $array\"\n");
        /* the merge's dependency goes in after its leading words: sbatch --parsable ... */
        st_buf_puts(b, "sbatch --dependency=afterany:\"$array\"");
        for (int i = 1; i < merge_argv->n; i++) {
            st_buf_puts(b, " ");
            st_buf_shell_quote(b, merge_argv->v[i]);
        }
        st_buf_puts(b, "\n");
    } else {
        st_buf_sh_argv(b, merge_argv);
        st_buf_puts(b, "\n");
    }
    return st_buf_error(b) ? -1 : 0;
}

int st_slurm_parse_jobid(const char *text, char *id, size_t n)
{
    const char *s = text;
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
        s++;
    size_t len = strspn(s, "0123456789");
    if (len == 0 || len >= n || len > 20)
        return -1;
    const char *rest = s + len;
    if (*rest && *rest != ';' && *rest != '\n' && *rest != '\r' && *rest != ' ')
        return -1;
    memcpy(id, s, len);
    id[len] = '\0';
    return 0;
}

/* ---- Kubernetes ---- */

/* A YAML double-quoted scalar: JSON's escapes are YAML's. */
static int yq(st_buf *b, const char *s) { return st_buf_json_str(b, s); }

int st_k8s_manifest(const st_k8s_plan *p, st_buf *b)
{
    char cm[300], idx[32];
    snprintf(cm, sizeof cm, "%s-spec", p->name);
    st_buf_printf(
        b,
        "# servetune audit on Kubernetes: a ConfigMap with the spec, and an Indexed Job whose pod of\n"
        "# completion index I runs configuration I of the spec into its own shard on the volume.\n"
        "# Written by servetune %s (servetune audit --k8s-manifest); docs/cluster.md.\n"
        "# Apply:   kubectl apply -f THIS_FILE\n"
        "# Follow:  kubectl get pods -l job-name=%s\n"
        "# Merge:   when the Job ended, servetune report DIR on the volume (or servetune audit --merge DIR)\n",
        p->version ? p->version : "?", p->name);
    st_buf_puts(b, "# index -> configuration:\n");
    for (int i = 0; i < p->n_configs; i++)
        st_buf_printf(b, "#   %d %s\n", i, st_shell_plain(p->configs[i]) ? p->configs[i] : "(see the spec)");
    st_buf_puts(b, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ");
    yq(b, cm);
    if (p->ns) {
        st_buf_puts(b, "\n  namespace: ");
        yq(b, p->ns);
    }
    st_buf_puts(b, "\n  labels:\n    app.kubernetes.io/name: servetune\ndata:\n  spec.yaml: ");
    st_buf_json_strn(b, p->spec_text, p->spec_len);
    st_buf_puts(b, "\n---\napiVersion: batch/v1\nkind: Job\nmetadata:\n  name: ");
    yq(b, p->name);
    if (p->ns) {
        st_buf_puts(b, "\n  namespace: ");
        yq(b, p->ns);
    }
    st_buf_puts(b, "\n  labels:\n    app.kubernetes.io/name: servetune\n  annotations:\n"
                   "    servetune/spec-sha256: ");
    yq(b, p->spec_hash);
    st_buf_printf(b,
                  "\nspec:\n  completionMode: Indexed\n  completions: %d\n  parallelism: %d\n"
                  "  backoffLimit: %d\n  template:\n    metadata:\n      labels:\n"
                  "        app.kubernetes.io/name: servetune\n    spec:\n      restartPolicy: Never\n"
                  "      containers:\n        - name: audit\n          image: ",
                  p->n_configs, p->parallelism > 0 ? p->parallelism : p->n_configs, p->n_configs);
    yq(b, p->image);
    /* The index comes from the pod's annotation through an environment variable defined here, so
     * $(SERVETUNE_INDEX) in the command is expanded by the kubelet (no shell). */
    st_buf_puts(b, "\n          env:\n            - name: SERVETUNE_INDEX\n              valueFrom:\n"
                   "                fieldRef:\n"
                   "                  fieldPath: \"metadata.annotations['batch.kubernetes.io/job-completion-index']\"\n"
                   "          command:\n");
    char spec_in_pod[300];
    snprintf(spec_in_pod, sizeof spec_in_pod, "%s/spec.yaml", ST_K8S_SPEC_DIR);
    char hash_arg[100];
    snprintf(hash_arg, sizeof hash_arg, "--expect-spec-hash=%s", p->spec_hash);
    const char *cmd[] = {
        "servetune", "audit",    "--output=" ST_K8S_OUT, "--only-index=$(SERVETUNE_INDEX)", "--resume", hash_arg,
        "--",        spec_in_pod
    };
    for (size_t i = 0; i < sizeof cmd / sizeof *cmd; i++) {
        st_buf_puts(b, "            - ");
        yq(b, cmd[i]);
        st_buf_puts(b, "\n");
    }
    if (p->gpu_request != ST_GPU_NONE && p->gpus > 0) {
        snprintf(idx, sizeof idx, "%d", p->gpus);
        st_buf_puts(b, "          resources:\n            limits:\n              ");
        yq(b, p->gpu_resource ? p->gpu_resource : "nvidia.com/gpu");
        st_buf_printf(b, ": %s\n", idx);
    }
    st_buf_puts(b, "          volumeMounts:\n            - name: spec\n              mountPath: ");
    yq(b, ST_K8S_SPEC_DIR);
    st_buf_puts(b, "\n              readOnly: true\n            - name: results\n              mountPath: ");
    yq(b, ST_K8S_OUT);
    st_buf_puts(b, "\n      volumes:\n        - name: spec\n          configMap:\n            name: ");
    yq(b, cm);
    st_buf_puts(b, "\n        - name: results\n          persistentVolumeClaim:\n            claimName: ");
    yq(b, p->volume_claim);
    st_buf_puts(b, "\n");
    return st_buf_error(b) ? -1 : 0;
}
