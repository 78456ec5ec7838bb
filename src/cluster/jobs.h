/* The cluster folder of a distributed audit, DIR/cluster (docs/cluster.md): the batch scripts,
 * the job output and the record of what was submitted (jobs.json: one entry per submission with
 * its array and merge job ids and the configuration indices it covered), which --status,
 * --resume and --wait read. */
#ifndef ST_CLUSTER_JOBS_H
#define ST_CLUSTER_JOBS_H
#include <jansson.h>
#include <stddef.h>

#define ST_CLUSTER_DIR "cluster"         /* DIR/cluster: scripts, job record, job output */
#define ST_CLUSTER_TASKS "tasks.sbatch"  /* the array's batch script */
#define ST_CLUSTER_MERGE "merge.sbatch"  /* the merge job's batch script */
#define ST_CLUSTER_SUBMIT "submit.sh"    /* the submission as a shell script (to read, or run by hand) */
#define ST_CLUSTER_JOBS "jobs.json"      /* the jobs submitted (for --status, --resume, --wait) */
#define ST_CLUSTER_LOGS "cluster/logs"   /* job output, relative to DIR */
#define ST_CLUSTER_SCRIPT_MAX (1u << 20) /* a generated script or manifest */
#define ST_CLUSTER_JOBS_MAX (1u << 20)   /* DIR/cluster/jobs.json */

/* DIR/cluster/FILE into out. 0, or -1 when it does not fit. */
int st_jobs_path(const char *dir, const char *file, char *out, size_t n);
/* The record, or NULL when there is none or it cannot be read (then err says why; err is
 * empty when there is none). */
json_t *st_jobs_load(const char *dir, char *err, size_t errlen);
/* Replaces the record (atomically). 0, or -1 with err. */
int st_jobs_save(const char *dir, json_t *jobs, char *err, size_t errlen);
/* The record's last submission, or NULL. */
json_t *st_jobs_last(json_t *jobs);
/* A string member of a submission, or NULL. */
const char *st_jobs_str(json_t *submission, const char *key);
/* Every job id of every submission (array and merge jobs), pointing into jobs: *ids is
 * malloc'd (the caller frees it). 0, or -1 out of memory. */
int st_jobs_ids(json_t *jobs, const char ***ids, int *n);
/* Whether the submission covered configuration index idx. */
int st_jobs_covers(json_t *submission, int idx);

#endif
