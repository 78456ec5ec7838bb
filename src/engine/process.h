/* Engine process lifecycle: start an argument vector (fork + execve, never a shell) in its own
 * process group with stdout/stderr appended to a log file, check it is alive, stop it
 * (SIGTERM to the group, SIGKILL after a grace period, reap everything: nothing is left
 * running), read the log's tail and classify why a start failed.
 *
 * Crash safety: the engine gets SIGTERM when the process that started it dies, even by
 * SIGKILL (prctl PR_SET_PDEATHSIG, set in the child before exec), so it shuts down with its own
 * workers instead of holding the port and the GPU. It and everything it starts carry
 * SERVETUNE_ENGINE_TAG=<tag> in their environment, so a later servetune can find and stop
 * whatever an earlier one left behind (st_proc_kill_tagged).
 *
 * Secrets: with o->redact, the engine's output goes through a pipe to a thread that removes
 * every secret before it reaches the log file, as it is written (an engine that prints its
 * arguments or environment never leaves a secret on disk, even when servetune is killed).
 *
 * st_proc_start makes the calling process a child subreaper (prctl PR_SET_CHILD_SUBREAPER) so
 * that an engine's own children, orphaned when the engine dies, are reaped here too. */
#ifndef ST_ENGINE_PROCESS_H
#define ST_ENGINE_PROCESS_H
#include <stddef.h>
#include <sys/types.h>

#include "core/clock.h"
#include "core/secret.h"

/* The environment variable that marks an engine and its descendants. */
#define ST_ENGINE_TAG_VAR "SERVETUNE_ENGINE_TAG"
/* And the one that marks one launch of an engine (servetune's pid and the start's time): the
 * tag is the audit folder's, shared by the array tasks of a cluster audit on one node, so
 * st_proc_stop stops what carries the launch's mark, never another task's engine. */
#define ST_ENGINE_LAUNCH_VAR "SERVETUNE_ENGINE_LAUNCH"
/* A tag's room (st_proc_dir_tag's are 19 characters); a longer one is refused by st_proc_start. */
#define ST_PROC_TAG_MAX 64

struct st_proc_pump;
typedef struct st_proc {
    pid_t pid;                 /* also the process group id; 0 when not started */
    int exited;                /* the leader was reaped */
    int wstatus;               /* its wait status when exited */
    st_ns started;             /* st_now() at spawn */
    struct st_proc_pump *pump; /* the redacting log writer (o->redact), or NULL */
    char tag[ST_PROC_TAG_MAX]; /* o->tag, or "" */
    char launch[48];           /* with a tag, this launch's mark: st_proc_stop also stops what carries it */
} st_proc;

typedef struct st_proc_opts {
    char *const *argv;          /* argv[0] is looked up on PATH */
    const char *const *env_key; /* additions / overrides of the environment */
    const char *const *env_val; /* values; ${VAR} is expanded from this process's environment */
    int n_env;
    const char *log_path;     /* stdout and stderr are appended here; NULL: /dev/null */
    const st_secrets *redact; /* removed from the output before it reaches the log (copied); NULL: none */
    const char *tag;          /* ST_ENGINE_TAG_VAR's value for the engine and its descendants, or NULL */
} st_proc_opts;

/* 0, or -1 with the reason in err (program not found, log not writable, ${VAR} unset...). */
int st_proc_start(st_proc *p, const st_proc_opts *o, char *err, size_t errlen);
/* 1 while the leader runs; 0 once it exited (reaped, status in p->wstatus; its last output is
 * in the log by then). */
int st_proc_alive(st_proc *p);
/* SIGTERM to the group, SIGKILL after grace_s, reaps every member; then, when the engine was
 * started with a tag, the same for every process carrying this launch's mark outside the group (a worker that
 * called setsid, such as Ray's raylet, or a daemonizing helper): nothing the engine started is
 * left running. 0 when nothing of the group and no tagged process is left, -1 if something
 * survived SIGKILL for 5 s (should not happen). Safe to call twice. */
int st_proc_stop(st_proc *p, double grace_s);
/* "exit status N", "killed by signal N (SIGKILL)" or "running". */
void st_proc_describe(const st_proc *p, char *out, size_t n);

/* Expands ${VAR} references from the environment. 0, or -1 naming the unset variable in err. */
int st_proc_env_expand(const char *in, char *out, size_t outlen, char *err, size_t errlen);

/* The last max_lines lines (at most max_bytes) of a file; *out is malloc'd ("" when empty).
 * 0, or -1 when the file cannot be read. */
int st_proc_log_tail(const char *path, size_t max_bytes, int max_lines, char **out);

/* The program st_proc_start would run: argv0 itself when it names a path, else the first
 * executable match on PATH (a default PATH when unset). 0, or -1 with errno ENOENT. */
int st_proc_find_program(const char *argv0, char *out, size_t n);

typedef enum st_fail_class {
    ST_FAIL_NONE = 0,
    ST_FAIL_OOM,          /* out of memory / the KV cache does not fit */
    ST_FAIL_BAD_FLAG,     /* an argument the engine rejected */
    ST_FAIL_PORT_TAKEN,   /* the port was in use */
    ST_FAIL_EXEC,         /* the program could not be started */
    ST_FAIL_CRASH,        /* exited or died by a signal */
    ST_FAIL_TIMEOUT,      /* still not ready at the startup timeout */
    ST_FAIL_HANG,         /* stopped answering while running */
    ST_FAIL_WRONG_SERVER, /* something else answers on the port */
    ST_FAIL_BAD_MODEL,    /* the model file could not be loaded (missing, corrupt, unsupported) */
    ST_FAIL__COUNT
} st_fail_class;
const char *st_fail_class_name(st_fail_class c); /* "oom", "bad_flag", "port_taken", ... */
/* A sentence for people: "out of memory / KV cache does not fit", ... */
const char *st_fail_class_text(st_fail_class c);

/* A failed start's detail: the log line that decided it. vLLM's longest refusals (the KV cache
 * that cannot hold one request at max_model_len, with the estimated maximum model length) run
 * to ~400 characters; the line is kept whole up to this size. */
#define ST_PROC_DETAIL_MAX 640

/* Classifies a failed start from the log tail and how it ended. exited/wstatus describe the
 * process (exited = 0: still running); timed_out: the readiness deadline passed. detail gets the
 * log line that decided it (at most ST_PROC_DETAIL_MAX - 1 characters of it), or the exit
 * status. */
st_fail_class st_proc_classify(const char *log_tail, int exited, int wstatus, int timed_out, char *detail,
                               size_t detail_len);

/* 1 when a TCP listener could bind 127.0.0.1:port now, 0 when it is taken (or not allowed). The
 * probe binds with SO_REUSEADDR, as engines' servers do: a connection of an earlier engine left in
 * TIME_WAIT does not make the port taken, a listener does. */
int st_proc_port_free(int port);
/* A port the kernel considers free right now (bind to port 0). -1 on failure. */
int st_proc_port_pick(void);

/* The tag of the engines of an audit whose logs go to dir: "st-" and 16 hex digits of a hash of
 * dir's real path (the same folder always gives the same tag). -1 when dir does not exist. */
int st_proc_dir_tag(const char *dir, char *out, size_t n);
/* Stops every process of this user whose environment holds ST_ENGINE_TAG_VAR=tag (this process
 * excepted): SIGTERM, then SIGKILL to what is left after grace_s. Returns how many it found.
 * (st_proc_stop does the same for its engine's tag and also reaps the orphans it adopted.) */
int st_proc_kill_tagged(const char *tag, double grace_s);
/* How many processes of this user carry the tag (zombies excepted). */
int st_proc_count_tagged(const char *tag);

#endif
