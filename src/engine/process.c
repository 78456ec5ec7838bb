#include "engine/process.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
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

extern char **environ;

#define ENV_VALUE_MAX 8192

int st_env_expand(const char *in, char *out, size_t outlen, char *err, size_t errlen)
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

/* environ with the additions applied (same name: replaced). Strings are malloc'd. */
static char **build_env(const st_proc_opts *o, char *err, size_t errlen)
{
    size_t n = 0;
    while (environ && environ[n])
        n++;
    char **env = calloc(n + (size_t)o->n_env + 1, sizeof(char *));
    if (!env) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int overridden = 0;
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
        if (st_env_expand(o->env_val[j], val, sizeof val, err, errlen))
            goto fail;
        size_t l = strlen(o->env_key[j]) + strlen(val) + 2;
        if (!(env[k] = malloc(l)))
            goto oom;
        snprintf(env[k++], l, "%s=%s", o->env_key[j], val);
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

int st_proc_start(st_proc *p, const st_proc_opts *o, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    if (!o->argv || !o->argv[0]) {
        snprintf(err, errlen, "empty command");
        return -1;
    }
    /* Orphans of the engine (its workers, when it dies first) become our children, so
     * st_proc_stop can reap them instead of leaving zombies or strays. */
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    char **env = build_env(o, err, errlen);
    if (!env)
        return -1;
    int rc = -1;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    int logfd = -1;
    if (o->log_path) {
        logfd = open(o->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (logfd < 0) {
            snprintf(err, errlen, "%s: %s", o->log_path, strerror(errno));
            goto out;
        }
        posix_spawn_file_actions_adddup2(&fa, logfd, 1);
        posix_spawn_file_actions_adddup2(&fa, logfd, 2);
    } else {
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    }
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    /* Own process group (so the group can be signalled as a whole), default signal handling
     * and an empty mask whatever the audit has blocked. */
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    sigdelset(&all, SIGKILL);
    sigdelset(&all, SIGSTOP);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &all);
    pid_t pid;
    int e = posix_spawnp(&pid, o->argv[0], &fa, &at, o->argv, env);
    if (e) {
        snprintf(err, errlen, "cannot start '%s': %s", o->argv[0], strerror(e));
        goto out;
    }
    p->pid = pid;
    p->started = st_now();
    rc = 0;
out:
    if (logfd >= 0)
        close(logfd);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
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
        return 0;
    }
    if (r < 0 && errno == ECHILD) {
        p->exited = 1;
        return 0;
    }
    return 1;
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

int st_proc_stop(st_proc *p, double grace_s)
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

int st_log_tail(const char *path, size_t max_bytes, int max_lines, char **out)
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

void st_redact(char *text, const char *secret)
{
    if (!text || !secret || !*secret)
        return;
    size_t sl = strlen(secret), rl = sl >= 3 ? 3 : sl;
    char *p, *from = text;
    while ((p = strstr(from, secret))) {
        size_t rest = strlen(p + sl);
        memcpy(p, "***", rl);
        memmove(p + rl, p + sl, rest + 1);
        from = p + rl;
    }
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
    if (l > 300)
        l = 300;
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

int st_port_free(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    /* No SO_REUSEADDR: a listener (or a socket in TIME_WAIT the engine could not reuse either)
     * counts as taken. */
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

int st_port_pick(void)
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
