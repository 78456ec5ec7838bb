#include "engine/process.h"

#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/file.h"

extern char **environ;

#define ENV_VALUE_MAX 8192
/* How long the log writer waits for the rest of an engine's output once it exited. */
#define PUMP_EXIT_WAIT_S 2.0

int st_proc_env_expand(const char *in, char *out, size_t outlen, char *err, size_t errlen)
{
    size_t o = 0;
    for (const char *p = in; *p;) {
        if (p[0] == '$' && p[1] == '{') {
            const char *end = strchr(p + 2, '}');
            if (!end) {
                snprintf(err, errlen, "'%s': unterminated ${", in);
                return -1;
            }
            char name[256];
            size_t nl = (size_t)(end - p - 2);
            if (nl == 0 || nl >= sizeof name) {
                snprintf(err, errlen, "'%s': bad ${NAME}", in);
                return -1;
            }
            memcpy(name, p + 2, nl);
            name[nl] = '\0';
            const char *v = getenv(name);
            if (!v) {
                snprintf(err, errlen, "environment variable %s is not set", name);
                return -1;
            }
            size_t vl = strlen(v);
            if (o + vl + 1 > outlen) {
                snprintf(err, errlen, "value of %s too long", name);
                return -1;
            }
            memcpy(out + o, v, vl);
            o += vl;
            p = end + 1;
        } else {
            if (o + 2 > outlen) {
                snprintf(err, errlen, "'%.40s...': too long", in);
                return -1;
            }
            out[o++] = *p++;
        }
    }
    out[o] = '\0';
    return 0;
}

/* environ with the additions applied (same name: replaced) and the tag. Strings are malloc'd. */
static char **build_env(const st_proc_opts *o, const char *launch, char *err, size_t errlen)
{
    size_t n = 0;
    while (environ && environ[n])
        n++;
    char **env = calloc(n + (size_t)o->n_env + 3, sizeof(char *));
    if (!env) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    size_t k = 0, tl = strlen(ST_ENGINE_TAG_VAR), ll = strlen(ST_ENGINE_LAUNCH_VAR);
    for (size_t i = 0; i < n; i++) {
        int overridden = o->tag && ((!strncmp(environ[i], ST_ENGINE_TAG_VAR, tl) && environ[i][tl] == '=') ||
                                    (!strncmp(environ[i], ST_ENGINE_LAUNCH_VAR, ll) && environ[i][ll] == '='));
        for (int j = 0; j < o->n_env; j++) {
            size_t kl = strlen(o->env_key[j]);
            if (!strncmp(environ[i], o->env_key[j], kl) && environ[i][kl] == '=')
                overridden = 1;
        }
        if (!overridden && !(env[k++] = strdup(environ[i])))
            goto oom;
    }
    for (int j = 0; j < o->n_env; j++) {
        char val[ENV_VALUE_MAX];
        if (st_proc_env_expand(o->env_val[j], val, sizeof val, err, errlen))
            goto fail;
        size_t l = strlen(o->env_key[j]) + strlen(val) + 2;
        if (!(env[k] = malloc(l)))
            goto oom;
        snprintf(env[k++], l, "%s=%s", o->env_key[j], val);
    }
    if (o->tag) {
        size_t l = tl + strlen(o->tag) + 2;
        if (!(env[k] = malloc(l)))
            goto oom;
        snprintf(env[k++], l, "%s=%s", ST_ENGINE_TAG_VAR, o->tag);
        l = ll + strlen(launch) + 2;
        if (!(env[k] = malloc(l)))
            goto oom;
        snprintf(env[k++], l, "%s=%s", ST_ENGINE_LAUNCH_VAR, launch);
    }
    env[k] = NULL;
    return env;
oom:
    snprintf(err, errlen, "out of memory");
fail:
    for (size_t i = 0; i < k; i++)
        free(env[i]);
    free(env);
    return NULL;
}

int st_proc_find_program(const char *argv0, char *out, size_t n)
{
    if (strchr(argv0, '/')) {
        snprintf(out, n, "%s", argv0);
        return 0;
    }
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path; *p;) {
        size_t l = strcspn(p, ":");
        if ((size_t)snprintf(out, n, "%.*s%s%s", (int)l, p, l ? "/" : "", argv0) < n && access(out, X_OK) == 0)
            return 0;
        p += l;
        if (*p == ':')
            p++;
    }
    errno = ENOENT;
    return -1;
}

/* ---- the redacting log writer ---- */

#define PUMP_CHUNK 65536
#define PUMP_POLL_MS 100

struct st_proc_pump {
    pthread_t th;
    int rfd, logfd;
    st_secrets secrets;
    atomic_llong stop_at; /* st_ns after which the pump stops waiting for EOF (0: wait) */
    char buf[PUMP_CHUNK];
    size_t held;
};

/* A log that is not writable any more loses the output; it is never written in clear. */
static void pump_write(int fd, const char *p, size_t n) { (void)st_fd_write_all(fd, p, n); }

/* Redacts what is buffered and writes it out, keeping back a possible secret's start unless all. */
static void pump_flush(struct st_proc_pump *u, int all)
{
    u->held = st_secrets_redact_n(&u->secrets, u->buf, u->held);
    size_t keep = all ? 0 : st_secrets_partial_tail(&u->secrets, u->buf, u->held);
    if (keep > PUMP_CHUNK / 2)
        keep = 0; /* a "secret" that long is not one: never stall the engine's output */
    pump_write(u->logfd, u->buf, u->held - keep);
    memmove(u->buf, u->buf + u->held - keep, keep);
    u->held = keep;
}

static void *pump_main(void *arg)
{
    struct st_proc_pump *u = arg;
    for (;;) {
        long long stop = atomic_load(&u->stop_at);
        struct pollfd pf = { .fd = u->rfd, .events = POLLIN };
        int pr = poll(&pf, 1, stop ? 0 : PUMP_POLL_MS);
        if (pr < 0 && errno != EINTR)
            break;
        if (pr > 0) {
            ssize_t n = read(u->rfd, u->buf + u->held, PUMP_CHUNK - u->held);
            if (n == 0)
                break; /* every writer closed: the engine and its children are gone */
            if (n < 0 && errno != EINTR && errno != EAGAIN)
                break;
            if (n > 0) {
                u->held += (size_t)n;
                pump_flush(u, 0);
                continue;
            }
        }
        if (stop && st_now() >= stop)
            break;
    }
    pump_flush(u, 1);
    return NULL;
}

/* Waits at most wait_s for the engine's output to end, then stops the writer and frees it. */
static void pump_finish(st_proc *p, double wait_s)
{
    struct st_proc_pump *u = p->pump;
    if (!u)
        return;
    st_ns at = st_now() + st_s_to_ns(wait_s);
    atomic_store(&u->stop_at, at > 0 ? at : 1);
    pthread_join(u->th, NULL);
    close(u->rfd);
    close(u->logfd);
    st_secrets_free(&u->secrets);
    free(u);
    p->pump = NULL;
}

static void child_exec(const char *path, char *const *argv, char **env, int outfd, int errpipe, pid_t parent)
{
    /* Only async-signal-safe calls from here to execve: the parent may have other threads. */
    setpgid(0, 0);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            sigaction(sig, &dfl, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    /* SIGTERM when servetune dies; a parent already gone before this line is caught by getppid */
    prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
    if (getppid() != parent)
        _exit(127);
    int nullfd = open("/dev/null", O_RDWR);
    if (nullfd >= 0)
        dup2(nullfd, 0);
    int o = outfd >= 0 ? outfd : nullfd;
    if (o >= 0) {
        dup2(o, 1);
        dup2(o, 2);
    }
    execve(path, argv, env);
    int e = errno;
    ssize_t w = write(errpipe, &e, sizeof e);
    (void)w;
    _exit(127);
}

int st_proc_start(st_proc *p, const st_proc_opts *o, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    if (!o->argv || !o->argv[0]) {
        snprintf(err, errlen, "empty command");
        return -1;
    }
    if (o->tag && (size_t)snprintf(p->tag, sizeof p->tag, "%s", o->tag) >= sizeof p->tag) {
        p->tag[0] = '\0';
        snprintf(err, errlen, "engine tag longer than %d characters", ST_PROC_TAG_MAX - 1);
        return -1;
    }
    if (o->tag)
        snprintf(p->launch, sizeof p->launch, "%ld-%lld", (long)getpid(), (long long)st_now());
    /* Orphans of the engine (its workers, when it dies first) become our children, so
     * st_proc_stop can reap them instead of leaving zombies or strays. */
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    char path[4096];
    if (st_proc_find_program(o->argv[0], path, sizeof path)) {
        snprintf(err, errlen, "cannot start '%s': %s", o->argv[0], strerror(errno));
        return -1;
    }
    char **env = build_env(o, p->launch, err, errlen);
    if (!env)
        return -1;
    int rc = -1, logfd = -1, outfd = -1, errp[2] = { -1, -1 }, outp[2] = { -1, -1 };
    struct st_proc_pump *u = NULL;
    if (o->log_path) {
        logfd = open(o->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (logfd < 0) {
            snprintf(err, errlen, "%s: %s", o->log_path, strerror(errno));
            goto out;
        }
        outfd = logfd;
        if (o->redact && o->redact->n) {
            u = calloc(1, sizeof *u);
            if (!u || pipe2(outp, O_CLOEXEC) || st_secrets_copy(&u->secrets, o->redact)) {
                snprintf(err, errlen, "cannot set up the engine's log: %s", u ? strerror(errno) : "out of memory");
                goto out;
            }
            outfd = outp[1];
        }
    }
    if (pipe2(errp, O_CLOEXEC)) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        goto out;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "cannot start '%s': %s", o->argv[0], strerror(errno));
        goto out;
    }
    if (pid == 0)
        child_exec(path, o->argv, env, outfd, errp[1], parent);
    /* the group exists before anything is signalled (the child also calls setpgid) */
    setpgid(pid, pid);
    close(errp[1]);
    errp[1] = -1;
    int e = 0;
    ssize_t got;
    while ((got = read(errp[0], &e, sizeof e)) < 0 && errno == EINTR)
        ;
    if (got == (ssize_t)sizeof e) {
        int st;
        waitpid(pid, &st, 0);
        snprintf(err, errlen, "cannot start '%s': %s", o->argv[0], strerror(e));
        goto out;
    }
    p->pid = pid;
    p->started = st_now();
    if (u) {
        close(outp[1]);
        outp[1] = -1;
        u->rfd = outp[0];
        u->logfd = logfd;
        outp[0] = logfd = -1;
        if (pthread_create(&u->th, NULL, pump_main, u)) {
            /* no writer: the engine's output is dropped rather than written in clear */
            close(u->rfd);
            close(u->logfd);
            st_secrets_free(&u->secrets);
            free(u);
        } else {
            p->pump = u;
        }
        u = NULL;
    }
    rc = 0;
out:
    for (int i = 0; i < 2; i++) {
        if (errp[i] >= 0)
            close(errp[i]);
        if (outp[i] >= 0)
            close(outp[i]);
    }
    if (logfd >= 0)
        close(logfd);
    if (u) {
        st_secrets_free(&u->secrets);
        free(u);
    }
    for (char **q = env; *q; q++)
        free(*q);
    free(env);
    return rc;
}

int st_proc_alive(st_proc *p)
{
    if (p->pid <= 0 || p->exited)
        return 0;
    int st;
    pid_t r = waitpid(p->pid, &st, WNOHANG);
    if (r == p->pid) {
        p->exited = 1;
        p->wstatus = st;
    } else if (r < 0 && errno == ECHILD) {
        p->exited = 1;
    } else {
        return 1;
    }
    /* its last words (why it failed) must be in the log before anyone reads it */
    pump_finish(p, PUMP_EXIT_WAIT_S);
    return 0;
}

/* Reaps whatever of the group has exited; 1 when no member of the group is left. */
static int reap_group(st_proc *p)
{
    for (int i = 0; i < 4096; i++) {
        int st;
        pid_t r = waitpid(-p->pid, &st, WNOHANG);
        if (r <= 0)
            break;
        if (r == p->pid) {
            p->exited = 1;
            p->wstatus = st;
        }
    }
    if (kill(-p->pid, 0) < 0 && errno == ESRCH)
        return 1;
    return 0;
}

static int wait_group(st_proc *p, double secs)
{
    st_ns deadline = st_now() + st_s_to_ns(secs);
    for (;;) {
        if (reap_group(p))
            return 1;
        if (st_now() >= deadline)
            return 0;
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
}

static int stop_group(st_proc *p, double grace_s)
{
    if (p->pid <= 0)
        return 0;
    if (reap_group(p))
        return 0;
    kill(-p->pid, SIGTERM);
    if (wait_group(p, grace_s))
        return 0;
    kill(-p->pid, SIGKILL);
    return wait_group(p, 5.0) ? 0 : -1;
}

static int kill_tagged(const char *var, const char *tag, double grace_s, int reap, int *left);

int st_proc_stop(st_proc *p, double grace_s)
{
    int rc = stop_group(p, grace_s);
    /* what left the group (setsid) still carries the tag; the group went first, so an engine
     * that stops its own workers on SIGTERM had the grace period to do so */
    int left = 0;
    if (p->pid > 0 && p->launch[0])
        kill_tagged(ST_ENGINE_LAUNCH_VAR, p->launch, grace_s, 1, &left);
    pump_finish(p, PUMP_EXIT_WAIT_S);
    return rc || left ? -1 : 0;
}

void st_proc_describe(const st_proc *p, char *out, size_t n)
{
    if (!p->exited)
        snprintf(out, n, "running");
    else if (WIFEXITED(p->wstatus))
        snprintf(out, n, "exit status %d", WEXITSTATUS(p->wstatus));
    else if (WIFSIGNALED(p->wstatus))
        snprintf(out, n, "killed by signal %d (%s)", WTERMSIG(p->wstatus), strsignal(WTERMSIG(p->wstatus)));
    else
        snprintf(out, n, "ended (status 0x%x)", p->wstatus);
}

int st_proc_log_tail(const char *path, size_t max_bytes, int max_lines, char **out)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat sb;
    if (fstat(fd, &sb)) {
        close(fd);
        return -1;
    }
    off_t start = sb.st_size > (off_t)max_bytes ? sb.st_size - (off_t)max_bytes : 0;
    char *buf = malloc(max_bytes + 1);
    if (!buf) {
        close(fd);
        return -1;
    }
    ssize_t got = pread(fd, buf, max_bytes, start);
    close(fd);
    if (got < 0) {
        free(buf);
        return -1;
    }
    buf[got] = '\0';
    /* Drop a partial first line when we started mid-file, trailing newlines, then keep the
     * last max_lines lines. */
    char *s = buf;
    if (start > 0) {
        char *nl = strchr(s, '\n');
        if (nl)
            s = nl + 1;
    }
    size_t len = strlen(s);
    while (len && (s[len - 1] == '\n' || s[len - 1] == '\r'))
        s[--len] = '\0';
    int lines = 0;
    char *from = s;
    for (size_t i = len; i > 0; i--) {
        if (s[i - 1] == '\n' && ++lines >= max_lines) {
            from = s + i;
            break;
        }
    }
    /* Control characters other than newline and tab would garble reports. */
    for (char *q = from; *q; q++)
        if ((unsigned char)*q < 0x20 && *q != '\n' && *q != '\t')
            *q = ' ';
    *out = strdup(from);
    free(buf);
    return *out ? 0 : -1;
}

static const char *fail_names[ST_FAIL__COUNT] = {
    [ST_FAIL_NONE] = "none",
    [ST_FAIL_OOM] = "oom",
    [ST_FAIL_BAD_FLAG] = "bad_flag",
    [ST_FAIL_PORT_TAKEN] = "port_taken",
    [ST_FAIL_EXEC] = "exec",
    [ST_FAIL_CRASH] = "crash",
    [ST_FAIL_TIMEOUT] = "timeout",
    [ST_FAIL_HANG] = "hang",
    [ST_FAIL_WRONG_SERVER] = "wrong_server",
    [ST_FAIL_BAD_MODEL] = "bad_model",
};
static const char *fail_texts[ST_FAIL__COUNT] = {
    [ST_FAIL_NONE] = "no failure",
    [ST_FAIL_OOM] = "out of memory / KV cache does not fit",
    [ST_FAIL_BAD_FLAG] = "the engine rejected an argument",
    [ST_FAIL_PORT_TAKEN] = "the port was already in use",
    [ST_FAIL_EXEC] = "the engine program could not be started",
    [ST_FAIL_CRASH] = "the engine exited or crashed",
    [ST_FAIL_TIMEOUT] = "the engine was not ready before the startup timeout",
    [ST_FAIL_HANG] = "the engine stopped answering",
    [ST_FAIL_WRONG_SERVER] = "a different server answers on the port",
    [ST_FAIL_BAD_MODEL] = "the model could not be loaded (missing, corrupt or unsupported file)",
};

const char *st_fail_class_name(st_fail_class c) { return (c >= 0 && c < ST_FAIL__COUNT) ? fail_names[c] : "unknown"; }
const char *st_fail_class_text(st_fail_class c) { return (c >= 0 && c < ST_FAIL__COUNT) ? fail_texts[c] : "unknown"; }

/* The last line of the tail that contains needle (case-insensitive), copied into detail. */
static int find_line(const char *tail, const char *needle, char *detail, size_t dl)
{
    const char *hit = NULL;
    for (const char *p = tail; (p = strcasestr(p, needle)); p++)
        hit = p;
    if (!hit)
        return 0;
    const char *b = hit;
    while (b > tail && b[-1] != '\n')
        b--;
    const char *e = strchr(hit, '\n');
    size_t l = e ? (size_t)(e - b) : strlen(b);
    while (l && isspace((unsigned char)*b)) {
        b++;
        l--;
    }
    if (l > ST_PROC_DETAIL_MAX - 1)
        l = ST_PROC_DETAIL_MAX - 1;
    snprintf(detail, dl, "%.*s", (int)l, b);
    return 1;
}

st_fail_class st_proc_classify(const char *log_tail, int exited, int wstatus, int timed_out, char *detail,
                               size_t detail_len)
{
    static const struct {
        const char *needle;
        st_fail_class c;
    } pats[] = {
        { "which is larger than the available KV cache memory", ST_FAIL_OOM },
        { "No available memory for the cache blocks", ST_FAIL_OOM },
        { "estimated maximum model length", ST_FAIL_OOM },
        { "CUDA out of memory", ST_FAIL_OOM },
        { "OutOfMemoryError", ST_FAIL_OOM },
        { "out of memory", ST_FAIL_OOM },
        { "insufficient memory", ST_FAIL_OOM },
        { "does not fit", ST_FAIL_OOM },
        /* llama.cpp: the KV cache or the weights could not be allocated */
        { "failed to allocate buffer", ST_FAIL_OOM },
        { "Address already in use", ST_FAIL_PORT_TAKEN },
        { "couldn't bind HTTP server socket", ST_FAIL_PORT_TAKEN }, /* llama-server */
        /* llama.cpp: "llama_model_load: error loading model: tensor 'x' data is not within the
         * file bounds, model is corrupted or incomplete", then "failed to load model" */
        { "error loading model", ST_FAIL_BAD_MODEL },
        { "failed to load model", ST_FAIL_BAD_MODEL },
        /* the same for engines that load through transformers / huggingface_hub (vLLM, SGLang,
         * TGI): "OSError: x is not a local folder and is not a valid model identifier listed on
         * 'https://huggingface.co/models'", huggingface_hub's RepositoryNotFoundError */
        { "is not a valid model identifier", ST_FAIL_BAD_MODEL },
        { "RepositoryNotFoundError", ST_FAIL_BAD_MODEL },
        { "error: invalid argument", ST_FAIL_BAD_FLAG },       /* llama-server: unknown option */
        { "Error while handling argument", ST_FAIL_BAD_FLAG }, /* llama-server: bad option value */
        { "unrecognized arguments", ST_FAIL_BAD_FLAG },
        { "invalid choice", ST_FAIL_BAD_FLAG },
        { "error: argument", ST_FAIL_BAD_FLAG },
        { "invalid int value", ST_FAIL_BAD_FLAG },
        { "invalid float value", ST_FAIL_BAD_FLAG },
        { "unknown argument", ST_FAIL_BAD_FLAG },
        { "unexpected argument", ST_FAIL_BAD_FLAG },
        { "invalid value", ST_FAIL_BAD_FLAG },
        { "is greater than the derived max_model_len", ST_FAIL_BAD_FLAG },
        /* vLLM's configuration checks (config/__init__.py), refusals of the flags' values */
        { "must be divisible by tensor parallel size", ST_FAIL_BAD_FLAG },
        { "must be greater than or equal to max_num_seqs", ST_FAIL_BAD_FLAG },
        { "does not match the quantization method specified", ST_FAIL_BAD_FLAG },
        { "GPU memory utilization must be", ST_FAIL_BAD_FLAG },
        { ": error: ", ST_FAIL_BAD_FLAG }, /* argparse: "prog: error: ..." */
    };
    detail[0] = '\0';
    if (timed_out && !exited) {
        snprintf(detail, detail_len, "still not ready at the startup timeout");
        return ST_FAIL_TIMEOUT;
    }
    if (log_tail)
        for (size_t i = 0; i < sizeof pats / sizeof *pats; i++)
            if (pats[i].c != ST_FAIL__COUNT && find_line(log_tail, pats[i].needle, detail, detail_len))
                return pats[i].c;
    if (exited) {
        /* an engine that exited on a Python exception: its message says more than the status */
        char why[ST_PROC_DETAIL_MAX];
        if (log_tail && find_line(log_tail, "ValueError:", why, sizeof why) && WIFEXITED(wstatus) &&
            WEXITSTATUS(wstatus) != 127) {
            snprintf(detail, detail_len, "exit status %d: %s", WEXITSTATUS(wstatus), why);
            return ST_FAIL_CRASH;
        }
        if (WIFSIGNALED(wstatus))
            snprintf(detail, detail_len, "killed by signal %d (%s)", WTERMSIG(wstatus), strsignal(WTERMSIG(wstatus)));
        else if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 127)
            snprintf(detail, detail_len, "exit status 127 (command not found)");
        else if (WIFEXITED(wstatus))
            snprintf(detail, detail_len, "exit status %d", WEXITSTATUS(wstatus));
        else
            snprintf(detail, detail_len, "exited");
        if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 127)
            return ST_FAIL_EXEC;
        return ST_FAIL_CRASH;
    }
    if (timed_out) {
        snprintf(detail, detail_len, "still not ready at the startup timeout");
        return ST_FAIL_TIMEOUT;
    }
    return ST_FAIL_NONE;
}

int st_proc_port_free(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    /* SO_REUSEADDR, as the engines' servers (uvicorn, axum, llama.cpp's httplib, ours) bind: a
     * listener counts as taken, an earlier engine's connection left in TIME_WAIT does not. */
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

int st_proc_port_pick(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = 0, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &al) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* ---- engines left behind ---- */

int st_proc_dir_tag(const char *dir, char *out, size_t n)
{
    char real[PATH_MAX];
    if (!realpath(dir, real))
        return -1;
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
    for (const char *q = real; *q; q++)
        h = (h ^ (unsigned char)*q) * 0x100000001b3ULL;
    snprintf(out, n, "st-%016llx", (unsigned long long)h);
    return 0;
}

/* Whether process pid (of this user) carries var=tag; zombies do not count. */
static int has_tag(pid_t pid, const char *var, const char *tag)
{
    char path[64], want[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[512];
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = '\0';
    const char *rp = strrchr(line, ')');
    if (!rp || rp[1] != ' ' || rp[2] == 'Z' || rp[2] == 'X')
        return 0;
    int wl = snprintf(want, sizeof want, "%s=%s", var, tag);
    snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0; /* another user's, or gone */
    /* entries are NUL-separated; look for the whole entry */
    static const size_t cap = 1 << 20;
    char *buf = malloc(cap + 1);
    ssize_t got = 0, r;
    while (buf && (size_t)got < cap && (r = read(fd, buf + got, cap - (size_t)got)) > 0)
        got += r;
    close(fd);
    int found = 0;
    for (ssize_t i = 0; buf && i < got;) {
        size_t el = strnlen(buf + i, (size_t)(got - i));
        if (el == (size_t)wl && !memcmp(buf + i, want, el))
            found = 1;
        i += (ssize_t)el + 1;
    }
    free(buf);
    return found;
}

/* Up to max pids of tagged processes. */
static int find_tagged(const char *var, const char *tag, pid_t *pids, int max)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    int n = 0;
    pid_t self = getpid();
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        char *end;
        long v = strtol(e->d_name, &end, 10);
        if (*end || v <= 0 || (pid_t)v == self)
            continue;
        if (has_tag((pid_t)v, var, tag))
            pids[n++] = (pid_t)v;
    }
    closedir(d);
    return n;
}

#define TAGGED_MAX 4096
/* How long a stop waits for an exiting child it adopted to become a zombie it can reap. */
#define REAP_EXITING_S 2.0

int st_proc_count_tagged(const char *tag)
{
    pid_t *v = malloc(sizeof *v * TAGGED_MAX);
    if (!v)
        return 0;
    int n = find_tagged(ST_ENGINE_TAG_VAR, tag, v, TAGGED_MAX);
    free(v);
    return n;
}

/* Reaps the processes of v that are our children and have ended; counts (and keeps in v) those
 * that still carry the tag and are not zombies. */
static int tagged_left(const char *var, const char *tag, pid_t *v, int n, int reap)
{
    int left = 0;
    for (int i = 0; i < n; i++) {
        if (v[i] <= 0)
            continue;
        int st;
        if (reap)
            waitpid(v[i], &st, WNOHANG); /* an orphan we adopted as a subreaper; ECHILD otherwise */
        if (has_tag(v[i], var, tag))
            left++;
        else
            v[i] = 0; /* a zombie no longer counts (has_tag) */
    }
    return left;
}

/* Waits at most secs until none of v is left running; how many are. */
static int tagged_wait(const char *var, const char *tag, pid_t *v, int n, double secs, int reap)
{
    st_ns deadline = st_now() + st_s_to_ns(secs);
    for (;;) {
        int left = tagged_left(var, tag, v, n, reap);
        if (!left || st_now() >= deadline)
            return left;
        struct timespec ts = { 0, 20 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
}

static int kill_tagged(const char *var, const char *tag, double grace_s, int reap, int *left)
{
    *left = 0;
    pid_t *v = malloc(sizeof *v * TAGGED_MAX * 2);
    if (!v)
        return 0;
    pid_t *found = v + TAGGED_MAX;
    int n = find_tagged(var, tag, v, TAGGED_MAX);
    memcpy(found, v, sizeof *v * (size_t)n);
    for (int i = 0; i < n; i++)
        kill(v[i], SIGTERM);
    if (tagged_wait(var, tag, v, n, grace_s, reap) > 0) {
        for (int i = 0; i < n; i++)
            if (v[i] > 0)
                kill(v[i], SIGKILL);
        *left = tagged_wait(var, tag, v, n, 5.0, reap);
    }
    /* those that stopped carrying the tag between a wait and a look: reaped when they are our
     * children (a zombie of another parent is that parent's to reap). A process no longer shows its
     * environment once it has let go of its memory, a moment before it becomes a zombie: our child
     * is waited for until it does (REAP_EXITING_S at most). */
    st_ns reap_until = st_now() + st_s_to_ns(REAP_EXITING_S);
    for (int i = 0; reap && i < n; i++) {
        int st;
        while (!v[i] && waitpid(found[i], &st, WNOHANG) == 0 && st_now() < reap_until) {
            struct timespec ts = { 0, 2 * 1000 * 1000 };
            nanosleep(&ts, NULL);
        }
    }
    free(v);
    return n;
}

int st_proc_kill_tagged(const char *tag, double grace_s)
{
    int left;
    return kill_tagged(ST_ENGINE_TAG_VAR, tag, grace_s, 0, &left);
}
