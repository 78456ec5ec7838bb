#include "cluster/k8s.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
