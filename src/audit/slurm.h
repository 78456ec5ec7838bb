/* Talking to Slurm: sbatch, squeue and scancel, each started with an argument vector
 * (posix_spawnp, never a shell), its output captured (bounded) and its run bounded in time.
 * What is submitted is audit/cluster.h's. */
#ifndef ST_AUDIT_SLURM_H
#define ST_AUDIT_SLURM_H
#include <stddef.h>

#include "core/buf.h"

#define ST_SLURM_CMD_TIMEOUT_S 60.0 /* one sbatch/squeue/scancel */
#define ST_SLURM_OUT_MAX (1u << 20) /* what one of them may print */
#define ST_SLURM_JOBID_MAX 32

/* Runs argv (argv[0] looked up on PATH), stdout and stderr captured into out (together, in
 * order), for at most timeout_s (then SIGKILL). The exit status (0..255, 128+N for signal N), or
 * -1 with err when it could not be run. */
int st_cmd_run(char *const *argv, double timeout_s, st_buf *out, char *err, size_t errlen);

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
