#include "core/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/util.h"

char *st_read_file(const char *path, size_t max, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        st_errf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = max < 65536 ? max : 65536, n = 0;
    char *buf = malloc(cap + 1);
    for (;;) {
        if (!buf) {
            st_errf(err, errlen, "%s: out of memory", path);
            break;
        }
        n += fread(buf + n, 1, cap - n, f);
        if (ferror(f)) {
            st_errf(err, errlen, "%s: read error: %s", path, strerror(errno));
            break;
        }
        if (n < cap) { /* end of file */
            fclose(f);
            buf[n] = '\0';
            *len = n;
            return buf;
        }
        if (cap >= max) {
            if (fgetc(f) == EOF && !ferror(f)) { /* exactly max bytes */
                fclose(f);
                buf[n] = '\0';
                *len = n;
                return buf;
            }
            st_errf(err, errlen, "%s: larger than %zu bytes", path, max);
            break;
        }
        size_t ncap = cap * 2 < max ? cap * 2 : max;
        char *p = realloc(buf, ncap + 1);
        if (!p) {
            free(buf);
            buf = NULL;
            continue;
        }
        buf = p;
        cap = ncap;
    }
    free(buf);
    fclose(f);
    return NULL;
}

/* The temporary file beside path, created afresh: O_EXCL fails on anything already there (a
 * symlink included: with O_EXCL the last component is never followed), which is then
 * unlinked (unlink removes a link, not its target) and the create tried once more. */
static int create_tmp(const char *tmp)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0 || errno != EEXIST)
            return fd;
        if (unlink(tmp) != 0 && errno != ENOENT)
            return -1;
    }
    errno = EEXIST;
    return -1;
}

/* Exactly len bytes to (writing) or from fd, retrying short transfers and EINTR; a transfer of
 * nothing is EIO. (write only reads p: the cast in st_fd_write_all drops no promise.) */
static int fd_all(int fd, char *p, size_t len, int writing)
{
    while (len > 0) {
        ssize_t n = writing ? write(fd, p, len) : read(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = EIO;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int st_fd_write_all(int fd, const void *buf, size_t len) { return fd_all(fd, (char *)buf, len, 1); }

int st_fd_read_all(int fd, void *buf, size_t len) { return fd_all(fd, buf, len, 0); }

static const char *file_kind(mode_t m)
{
    if (S_ISLNK(m))
        return "a symbolic link";
    if (S_ISFIFO(m))
        return "a FIFO";
    if (S_ISCHR(m))
        return "a character device";
    if (S_ISBLK(m))
        return "a block device";
    if (S_ISDIR(m))
        return "a folder";
    if (S_ISSOCK(m))
        return "a socket";
    return "not a plain file";
}

int st_outfile_check(const char *path, char *err, size_t errlen)
{
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT)
            return 0;
        st_errf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (S_ISREG(st.st_mode))
        return 0;
    st_errf(err, errlen, "%s: is %s, not a regular file; refusing to replace it", path, file_kind(st.st_mode));
    return -1;
}

int st_outfile_open(st_outfile *o, const char *path, char *err, size_t errlen)
{
    o->fd = -1;
    if ((size_t)snprintf(o->path, sizeof o->path, "%s", path) >= sizeof o->path ||
        (size_t)snprintf(o->tmp, sizeof o->tmp, "%s.tmp", path) >= sizeof o->tmp) {
        st_errf(err, errlen, "%.200s...: path too long", path);
        return -1;
    }
    if (st_outfile_check(path, err, errlen))
        return -1;
    o->fd = create_tmp(o->tmp);
    if (o->fd < 0) {
        st_errf(err, errlen, "%s: %s", path, strerror(errno)); /* the user's name, not the temporary's */
        return -1;
    }
    return 0;
}

void st_outfile_abort(st_outfile *o)
{
    if (o->fd >= 0) {
        close(o->fd);
        o->fd = -1;
    }
    unlink(o->tmp);
}

int st_outfile_commit(st_outfile *o, char *err, size_t errlen)
{
    int e = fsync(o->fd) != 0 ? errno : 0;
    if (close(o->fd) != 0 && !e)
        e = errno;
    o->fd = -1;
    if (!e && st_outfile_check(o->path, err, errlen)) { /* planted while the data was written */
        unlink(o->tmp);
        return -1;
    }
    if (!e && rename(o->tmp, o->path) != 0)
        e = errno;
    if (e) {
        st_errf(err, errlen, "%s: %s", o->path, strerror(e));
        unlink(o->tmp);
        return -1;
    }
    return 0;
}

int st_write_file_atomic(const char *path, const void *data, size_t len, char *err, size_t errlen)
{
    st_outfile o;
    if (st_outfile_open(&o, path, err, errlen))
        return -1;
    if (st_fd_write_all(o.fd, data, len)) {
        st_errf(err, errlen, "%s: %s", path, strerror(errno));
        st_outfile_abort(&o);
        return -1;
    }
    return st_outfile_commit(&o, err, errlen);
}

int st_dir_lock(const char *dir, int shared, int *fd, char *err, size_t errlen)
{
    *fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (*fd < 0) {
        st_errf(err, errlen, "%s: %s", dir, strerror(errno));
        return -1;
    }
    if (flock(*fd, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) == 0)
        return 0;
    int e = errno;
    close(*fd);
    *fd = -1;
    if (e == EWOULDBLOCK) {
        st_errf(err, errlen, "%s is in use by another servetune (an audit or prediction is running there)", dir);
        return -1;
    }
    if (e == ENOLCK || e == EOPNOTSUPP || e == ENOSYS || e == EINVAL || e == EBADF)
        return 0; /* no flock on this file system: nothing to hold */
    st_errf(err, errlen, "%s: cannot lock: %s", dir, strerror(e));
    return -1;
}

int st_dir_lock_file(const char *dir, int *fd, char *err, size_t errlen)
{
    char path[4200];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, ST_LOCK_FILE) >= sizeof path) {
        st_errf(err, errlen, "%s: path too long", dir);
        return -1;
    }
    *fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (*fd < 0) {
        st_errf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (flock(*fd, LOCK_EX | LOCK_NB) == 0)
        return 0;
    int e = errno;
    if (e == ENOLCK || e == EOPNOTSUPP || e == ENOSYS || e == EINVAL)
        return 0; /* no flock on this file system: nothing to hold */
    close(*fd);
    *fd = -1;
    if (e == EWOULDBLOCK)
        st_errf(err, errlen,
                "%s is in use by another servetune (a report or merge is running there); try again when it ends", dir);
    else
        st_errf(err, errlen, "%s: cannot lock: %s", path, strerror(e));
    return -1;
}

int st_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    if (!a || !b || stat(a, &sa) != 0 || stat(b, &sb) != 0)
        return 0;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

int st_mkdir(const char *path, char *err, size_t errlen)
{
    if (mkdir(path, 0755) && errno != EEXIST) {
        st_errf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

int st_mkdir_p(const char *path, char *err, size_t errlen)
{
    size_t n = path ? strlen(path) : 0;
    if (n == 0) {
        st_errf(err, errlen, "an empty folder name");
        return -1;
    }
    if (n >= ST_PATH_MAX) {
        st_errf(err, errlen, "%.200s...: a path longer than %d bytes", path, ST_PATH_MAX);
        return -1;
    }
    char b[ST_PATH_MAX];
    memcpy(b, path, n + 1);
    /* each prefix that ends before a '/' (the root and repeated slashes skipped), then the whole */
    for (size_t i = 1; i <= n; i++) {
        if (i < n && (b[i] != '/' || b[i - 1] == '/'))
            continue;
        char c = b[i];
        b[i] = '\0';
        struct stat st;
        int rc = 0;
        if (mkdir(b, 0755) && errno != EEXIST)
            rc = -1;
        else if (stat(b, &st) == 0 && !S_ISDIR(st.st_mode)) {
            errno = ENOTDIR;
            rc = -1;
        }
        if (rc) {
            st_errf(err, errlen, "%s: %s", b, strerror(errno));
            return -1;
        }
        b[i] = c;
    }
    return 0;
}

int st_mkdir_parents(const char *file_path, char *err, size_t errlen)
{
    const char *slash = file_path ? strrchr(file_path, '/') : NULL;
    if (!slash || slash == file_path)
        return 0;
    size_t n = (size_t)(slash - file_path);
    if (n >= ST_PATH_MAX) {
        st_errf(err, errlen, "%.200s...: a path longer than %d bytes", file_path, ST_PATH_MAX);
        return -1;
    }
    char b[ST_PATH_MAX];
    memcpy(b, file_path, n);
    b[n] = '\0';
    return st_mkdir_p(b, err, errlen);
}
