/* What an audit spread over a cluster is submitted as (docs/cluster.md). Text and argument
 * vectors only: nothing here runs anything (audit/slurm.h runs sbatch, squeue and scancel).
 *
 * Slurm: one job array, one task per configuration (the array index is the configuration's
 * position in the spec), each task running `servetune audit --only=NAME --resume` into its own
 * shard (audit/shard.h); then one job that depends on the array (afterany: it runs however the
 * tasks ended) and merges the shards and writes the reports. The sbatch options are arguments of
 * the sbatch argument vector (never #SBATCH lines, which sbatch would tokenise itself); the batch
 * scripts hold the servetune command lines, every word single-quoted (core/buf.h st_buf_shell_quote). Job output
 * goes to DIR/cluster/logs/, DIR's '%' doubled in the --output pattern (st_slurm_dir_ok refuses
 * what Slurm cannot carry there: a backslash, a control character).
 *
 * Kubernetes: a ConfigMap holding the spec text and an Indexed Job (one completion index per
 * configuration) whose pods run the same command with --only-index into a PersistentVolumeClaim
 * mounted as the output folder. Every string is written as a YAML double-quoted scalar. */
#ifndef ST_AUDIT_CLUSTER_H
#define ST_AUDIT_CLUSTER_H
#include <stddef.h>

#include "audit/spec.h"
#include "core/buf.h"
#include "core/strv.h"

#define ST_CLUSTER_DIR "cluster"         /* DIR/cluster: scripts, job record, job output */
#define ST_CLUSTER_TASKS "tasks.sbatch"  /* the array's batch script */
#define ST_CLUSTER_MERGE "merge.sbatch"  /* the merge job's batch script */
#define ST_CLUSTER_SUBMIT "submit.sh"    /* the submission as a shell script (to read, or run by hand) */
#define ST_CLUSTER_JOBS "jobs.json"      /* the jobs submitted (for --status, --resume, --wait) */
#define ST_CLUSTER_LOGS "cluster/logs"   /* job output, relative to DIR */
#define ST_CLUSTER_SCRIPT_MAX (1u << 20) /* a generated script or manifest */

/* What is submitted. Paths are absolute; configs lists every configuration in spec order. */
typedef struct st_slurm_plan {
    const char *servetune; /* the servetune binary the jobs run */
    const char *spec_path;
    const char *out_dir;
    const char *spec_hash; /* SHA-256 of the spec text: tasks refuse a spec that changed since */
    const char *const *configs;
    int n_configs;
    const int *indices; /* the array indices (configuration positions) to submit */
    int n_indices;
    const char *partition, *account, *time; /* NULL: Slurm's defaults */
    int gpus;                               /* GPUs per task */
    st_gpu_request gpu_request;
    int max_concurrent; /* 0: no throttle */
    const char *const *sbatch_args;
    int n_sbatch_args;
    const char *version; /* servetune's, for the scripts' header */
} st_slurm_plan;

/* The array's batch script: maps SLURM_ARRAY_TASK_ID to the configuration's name and runs its
 * shard. 0, or -1 when out (of at most ST_CLUSTER_SCRIPT_MAX bytes) is not whole. */
int st_slurm_task_script(const st_slurm_plan *p, st_buf *out);
/* The merge job's batch script (servetune audit --merge DIR). */
int st_slurm_merge_script(const st_slurm_plan *p, st_buf *out);
/* Whether Slurm can take dir as a job's output folder: 0, or -1 with why. */
int st_slurm_dir_ok(const char *dir, char *why, size_t n);
/* "0-5", "1,3-4" (ranges of the sorted indices), with "%N" when max_concurrent is set. */
int st_slurm_array_spec(const st_slurm_plan *p, char *out, size_t n);
/* The sbatch argument vectors (argv[0] "sbatch"). script is the batch script's path; the merge
 * job depends on array_job (afterany) when it is not NULL. 0, or -1 out of memory. */
int st_slurm_array_argv(const st_slurm_plan *p, const char *script, st_strv *argv);
int st_slurm_merge_argv(const st_slurm_plan *p, const char *script, const char *array_job, st_strv *argv);
/* The submission as a POSIX shell script: the array's sbatch, then the merge's with the array's
 * job id as its dependency (array_argv may be NULL: the merge alone). */
int st_slurm_submit_script(const st_strv *array_argv, const st_strv *merge_argv, st_buf *out);
/* Appends argv as one shell command line, every word quoted as needed. */
int st_buf_sh_argv(st_buf *b, const st_strv *argv);
/* The job id in `sbatch --parsable` output ("1234" or "1234;cluster"). 0, or -1. */
int st_slurm_parse_jobid(const char *text, char *id, size_t n);

/* The Kubernetes manifest. */
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
