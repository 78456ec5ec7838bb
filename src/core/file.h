/* Whole-file reads with a size limit (specs, traces, GPU and model files, logs), and whole-file
 * writes that a reader never sees half done (reports, results). */
#ifndef ST_FILE_H
#define ST_FILE_H
#include <stddef.h>

/* Reads the whole file at path into a malloc'd, NUL-terminated buffer (its length in *len).
 * A file larger than max bytes is an error ("PATH: larger than MAX bytes"), never silently
 * cut. Returns NULL with a reason in err (prefixed by the path) on any failure. */
char *st_read_file(const char *path, size_t max, size_t *len, char *err, size_t errlen);

/* An output file written safely (every file servetune writes for the user: reports, -o, --json,
 * --write-spec): the data goes to "PATH.tmp" beside it, created with O_EXCL | O_NOFOLLOW (a
 * planted symlink or file there is removed, never followed), is flushed to disk, then renamed
 * over path, so a reader never sees it half done. An existing path that is not a regular file
 * (a symlink, FIFO, device node, folder) is refused by name, never replaced:
 * "PATH: is a FIFO, not a regular file; refusing to replace it".
 * Use: st_outfile_open, write to o.fd, st_outfile_commit (or st_outfile_abort on failure). */
typedef struct st_outfile {
    int fd;          /* the temporary file, open for writing */
    char path[4096]; /* the destination */
    char tmp[4100];  /* PATH.tmp */
} st_outfile;
/* 0 with o->fd open, or -1 with "PATH: reason" in err. */
int st_outfile_open(st_outfile *o, const char *path, char *err, size_t errlen);
/* Flushes, closes and renames over the destination (checked again just before). 0, or -1 with
 * "PATH: reason" in err and the temporary file removed. */
int st_outfile_commit(st_outfile *o, char *err, size_t errlen);
/* Closes and removes the temporary file; the destination is left as it was. */
void st_outfile_abort(st_outfile *o);
/* 0 when path does not exist or is a regular file; -1 with "PATH: is a ..., not a regular file;
 * refusing to replace it" (or lstat's reason) in err otherwise. */
int st_outfile_check(const char *path, char *err, size_t errlen);

/* Writes len bytes to path as an st_outfile does. 0, or -1 with "PATH: reason" in err (errno's
 * text: "No space left on device"); on failure path is left as it was and the temporary file
 * is removed. */
int st_write_file_atomic(const char *path, const void *data, size_t len, char *err, size_t errlen);

/* Writes / reads exactly len bytes on fd, retrying when a signal interrupts. 0, or -1 with errno
 * set (EIO when the descriptor took or gave nothing: a full pipe's reader gone, an early EOF). */
int st_fd_write_all(int fd, const void *buf, size_t len);
int st_fd_read_all(int fd, void *buf, size_t len);

/* Locks the folder dir against another process (flock on the folder itself, without waiting;
 * nothing is written into it): exclusive, or shared (holders of shared locks exclude only an
 * exclusive one). 0 with *fd holding the lock (closing it, or the process ending however it ends,
 * releases it); -1 with err when dir cannot be opened or "DIR is in use by another servetune" when
 * another process holds a conflicting lock. A file system without flock (some network ones) gives
 * 0 with *fd -1: no lock, nothing refused. */
int st_dir_lock(const char *dir, int shared, int *fd, char *err, size_t errlen);

/* The lock file that serializes the writers of an audit folder's results (a merge of shards,
 * `servetune report`), beside the folder lock an audit holds (st_dir_lock). */
#define ST_LOCK_FILE ".servetune.lock"
/* Locks dir against another process through DIR/ST_LOCK_FILE (created when missing with
 * O_NOFOLLOW, never a symlink followed; flock, exclusive, without waiting). 0 with *fd holding the
 * lock (closing it releases it); -1 with "DIR is in use by another servetune (a report or merge is
 * running there)" or the reason the file could not be opened. A file system without flock gives 0
 * with the file open and nothing held. */
int st_dir_lock_file(const char *dir, int *fd, char *err, size_t errlen);

/* 1 when both paths exist and are the same file (the same device and inode: another name, a
 * link, "./x" for "x"), 0 otherwise (either NULL or missing). An output that is one of the
 * command's inputs would replace what it reads. */
int st_same_file(const char *a, const char *b);
/* Makes the folder path (its parent must exist); one that exists already is fine. 0, or -1 with
 * "PATH: reason" in err. */
int st_mkdir(const char *path, char *err, size_t errlen);

/* The longest path st_mkdir_p and st_mkdir_parents take. */
#define ST_PATH_MAX 4096

/* Makes the folder path and every missing folder above it (as `mkdir -p`); folders that exist
 * already are fine. 0, or -1 with "PATH: reason" in err naming the folder that could not be made
 * (a file in the way: "Not a directory"; a path longer than ST_PATH_MAX). */
int st_mkdir_p(const char *path, char *err, size_t errlen);

/* Makes the folders above the file path (st_mkdir_p of its parent; nothing for a bare name), so
 * that `-o out/run.json` works when out/ does not exist yet. 0, or -1 with err. */
int st_mkdir_parents(const char *file_path, char *err, size_t errlen);

#endif
