/* What an audit spread over Kubernetes is submitted as (docs/cluster.md): text only.
 *
 * Kubernetes: a ConfigMap holding the spec text and an Indexed Job (one completion index per
 * configuration) whose pods run the same command with --only-index into a PersistentVolumeClaim
 * mounted as the output folder. Every string is written as a YAML double-quoted scalar. */
#ifndef ST_CLUSTER_K8S_H
#define ST_CLUSTER_K8S_H
#include <stddef.h>

#include "audit/spec.h"
#include "core/buf.h"

#define ST_K8S_MANIFEST_MAX (1u << 20) /* a generated manifest */

typedef struct st_k8s_plan {
    const char *name; /* the Job's name (and the ConfigMap's, with "-spec") */
    const char *ns;   /* namespace, or NULL */
    const char *image;
    const char *volume_claim; /* mounted at ST_K8S_OUT */
    const char *gpu_resource; /* e.g. nvidia.com/gpu */
    int gpus;
    st_gpu_request gpu_request;
    int parallelism; /* 0: every index at once */
    const char *spec_text;
    size_t spec_len;
    const char *spec_hash;
    const char *const *configs;
    int n_configs;
    const char *version;
} st_k8s_plan;
#define ST_K8S_SPEC_DIR "/etc/servetune" /* the ConfigMap's mount: ST_K8S_SPEC_DIR/spec.yaml */
#define ST_K8S_OUT "/results"            /* the output folder in the pods */
int st_k8s_manifest(const st_k8s_plan *p, st_buf *out);

#endif
