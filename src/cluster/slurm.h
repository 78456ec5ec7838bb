/* An audit spread over a Slurm cluster (docs/cluster.md): what is submitted (batch scripts and
 * sbatch argument vectors, pure text) and the commands that submit, watch and cancel it
 * (sbatch, squeue and scancel, each started with an argument vector: posix_spawnp, never a
 * shell, its output captured and bounded, its run bounded in time).
 *
 * Slurm: one job array, one task per configuration (the array index is the configuration's
 * position in the spec), each task running `servetune audit --only=NAME --resume` into its own
 * shard (cluster/shard.h); then one job that depends on the array (afterany: it runs however the
 * tasks ended) and merges the shards and writes the reports. The sbatch options are arguments of
 * the sbatch argument vector (never #SBATCH lines, which sbatch would tokenise itself); the batch
 * scripts hold the servetune command lines, every word single-quoted (core/buf.h st_buf_shell_quote). Job output
 * goes to DIR/cluster/logs/, DIR's '%' doubled in the --output pattern (st_slurm_dir_ok refuses
 * what Slurm cannot carry there: a backslash, a control character).
 */
#ifndef ST_CLUSTER_SLURM_H
#define ST_CLUSTER_SLURM_H
#include <stddef.h>

#include "audit/spec.h"
#include "core/buf.h"
#include "core/strv.h"

#define ST_SLURM_SCRIPT_MAX (1u << 20) /* a generated batch script */
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
 * shard. 0, or -1 when out (of at most ST_SLURM_SCRIPT_MAX bytes) is not whole. */
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
/* The job id in `sbatch --parsable` output ("1234" or "1234;cluster"). 0, or -1. */
int st_slurm_parse_jobid(const char *text, char *id, size_t n);


/* ---- running Slurm's commands ---- */
#define ST_SLURM_CMD_TIMEOUT_S 60.0 /* one sbatch/squeue/scancel */
#define ST_SLURM_OUT_MAX (1u << 20) /* what one of them may print */
#define ST_SLURM_JOBID_MAX 32

/* Runs argv (argv[0] looked up on PATH), stdout and stderr captured into out (together, in
 * order), for at most timeout_s (then SIGKILL). The exit status (0..255, 128+N for signal N), or
 * -1 with err when it could not be run. */
int st_slurm_run(char *const *argv, double timeout_s, st_buf *out, char *err, size_t errlen);

/* Submits with sbatch argv (it must have --parsable): 0 with the job id in id, or -1 with err
 * (sbatch's own message). */
int st_slurm_submit(char *const *argv, char *id, size_t idlen, char *err, size_t errlen);

/* The state of one array task or job as squeue shows it. */
typedef struct st_slurm_task {
    char job[ST_SLURM_JOBID_MAX]; /* the array's (or the job's) id */
    int task;                     /* array index, -1 for a job that is not an array */
    char state[24];               /* PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, ... */
} st_slurm_task;
/* Whether a state is one a job leaves (it runs or will run). */
int st_slurm_state_active(const char *state);
/* The tasks of job id that squeue still knows (any state). 0 (n may be 0: Slurm forgot the
 * job), or -1 with err. */
int st_slurm_query(const char *id, st_slurm_task **out, int *n, char *err, size_t errlen);
/* Parses squeue -h -r -t all -o '%F|%K|%T' output (library-shaped for the tests). */
int st_slurm_parse_queue(const char *text, st_slurm_task **out, int *n);
/* scancel the jobs (ids). 0, or -1 with err. */
int st_slurm_cancel(const char *const *ids, int n, char *err, size_t errlen);

#endif
