#include "cluster/shard.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit/store.h"
#include "core/buf.h"
#include "core/util.h"

/* The note of a partial merged audit names the configurations concerned, within this. */
#define MERGE_NOTE_MAX 1024

int st_shard_path(const char *dir, const char *config, char *out, size_t n)
{
    int w = snprintf(out, n, "%s/%s/%s%s", dir, ST_SHARD_DIR, config, ST_SHARD_EXT);
    return w < 0 || (size_t)w >= n ? -1 : 0;
}

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int st_shard_results_kind(const char *dir, char *err, size_t errlen)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, ST_STORE_FILE);
    if (!file_exists(path))
        return 0;
    st_store *s;
    if (st_store_open_file(path, ST_STORE_READONLY, &s, err, errlen))
        return -1;
    st_audit_row a;
    int have = st_store_audit_get(s, &a);
    int kind = 0;
    if (have < 0) {
        st_errf(err, errlen, "%s: %s", path, st_store_errmsg(s));
        kind = -1;
    } else if (have == 1) {
        st_audit_row_free(&a);
        char *m = NULL;
        kind = st_store_meta_get(s, ST_SHARD_META_KEY, &m) == 1 ? 2 : 1;
        free(m);
    }
    st_store_close(s);
    return kind;
}

/* The configuration name of a shard file name ("NAME.sqlite"), or 0 for anything else (journals,
 * temporary files, hidden files). */
static int shard_name(const char *file, char *name, size_t n)
{
    size_t fl = strlen(file), el = strlen(ST_SHARD_EXT);
    if (file[0] == '.' || fl <= el || strcmp(file + fl - el, ST_SHARD_EXT) || fl - el >= n)
        return 0;
    memcpy(name, file, fl - el);
    name[fl - el] = '\0';
    return 1;
}

int st_shard_any(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, ST_SHARD_DIR);
    DIR *d = opendir(path);
    if (!d)
        return 0;
    int any = 0;
    struct dirent *e;
    char name[128];
    while (!any && (e = readdir(d)))
        any = shard_name(e->d_name, name, sizeof name);
    closedir(d);
    return any;
}

int st_shard_finished(const st_shard_info *s)
{
    return s->present && s->readable && (!strcmp(s->status, "done") || !strcmp(s->status, "failed"));
}

/* Fills what the shard of one configuration holds. */
static void scan_one(const char *dir, const char *name, st_shard_info *o)
{
    memset(o, 0, sizeof *o);
    snprintf(o->name, sizeof o->name, "%s", name);
    char path[4200];
    if (st_shard_path(dir, name, path, sizeof path)) {
        snprintf(o->why, sizeof o->why, "path too long");
        return;
    }
    if (!file_exists(path))
        return;
    o->present = 1;
    st_store *s;
    char err[256];
    if (st_store_open_file(path, ST_STORE_READONLY, &s, err, sizeof err)) {
        snprintf(o->why, sizeof o->why, "%s", err);
        return;
    }
    st_audit_row a;
    int have = st_store_audit_get(s, &a);
    if (have != 1) {
        snprintf(o->why, sizeof o->why, "%s", have < 0 ? st_store_errmsg(s) : "holds no audit yet");
        st_store_close(s);
        return;
    }
    memcpy(o->spec_hash, a.spec_hash, sizeof o->spec_hash);
    o->partial = a.partial;
    o->started = a.started;
    o->finished = a.finished;
    st_audit_row_free(&a);
    st_config_row *rows;
    int nr;
    st_run_row *runs;
    int nrun;
    if (st_store_configs_get(s, &rows, &nr) || st_store_runs_get(s, name, &runs, &nrun)) {
        snprintf(o->why, sizeof o->why, "%s", st_store_errmsg(s));
        st_store_close(s);
        return;
    }
    for (int i = 0; i < nr; i++)
        if (!strcmp(rows[i].name, name))
            snprintf(o->status, sizeof o->status, "%s", rows[i].status ? rows[i].status : "");
    o->runs = nrun;
    o->readable = 1;
    st_config_rows_free(rows, nr);
    st_run_rows_free(runs, nrun);
    st_store_close(s);
}

int st_shard_scan(const char *dir, const char *const *names, int n, st_shard_info **out)
{
    *out = calloc((size_t)(n > 0 ? n : 1), sizeof **out);
    if (!*out)
        return -1;
    for (int i = 0; i < n; i++)
        scan_one(dir, names[i], &(*out)[i]);
    return 0;
}

/* ---- merge ---- */

typedef struct shard {
    char name[128];
    char path[4200];
    int idx; /* in the spec */
    st_audit_row audit;
    char status[16];
} shard;

static void shards_free(shard *v, int n)
{
    for (int i = 0; i < n; i++)
        st_audit_row_free(&v[i].audit);
    free(v);
}

/* Opens a shard read-write (a journal left by a task killed mid-write is rolled back), checks that
 * it holds an audit and rows of its own configuration only, and reads its audit row. */
static int read_shard(shard *sh, char *err, size_t errlen)
{
    st_store *s;
    if (st_store_open_file(sh->path, ST_STORE_ROLLBACK | ST_STORE_EXISTING, &s, err, errlen))
        return -1;
    int rc = -1;
    st_config_row *rows = NULL;
    st_run_row *runs = NULL;
    int nr = 0, nrun = 0;
    int have = st_store_audit_get(s, &sh->audit);
    if (have != 1) {
        st_errf(err, errlen, "%s: %s", sh->path, have < 0 ? st_store_errmsg(s) : "holds no audit");
        goto out;
    }
    if (st_store_configs_get(s, &rows, &nr) || st_store_runs_get(s, NULL, &runs, &nrun)) {
        st_errf(err, errlen, "%s: %s", sh->path, st_store_errmsg(s));
        goto out;
    }
    for (int i = 0; i < nr; i++) {
        if (strcmp(rows[i].name, sh->name)) {
            st_errf(err, errlen, "%s: holds configuration '%s' (a shard holds only its own)", sh->path, rows[i].name);
            goto out;
        }
        snprintf(sh->status, sizeof sh->status, "%s", rows[i].status ? rows[i].status : "");
    }
    for (int i = 0; i < nrun; i++)
        if (!runs[i].config || strcmp(runs[i].config, sh->name)) {
            st_errf(err, errlen, "%s: holds runs of configuration '%s' (a shard holds only its own)", sh->path,
                    runs[i].config ? runs[i].config : "?");
            goto out;
        }
    rc = 0;
out:
    st_config_rows_free(rows, nr);
    st_run_rows_free(runs, nrun);
    st_store_close(s);
    return rc;
}

static int by_idx(const void *a, const void *b)
{
    const shard *x = a, *y = b;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* Lists DIR/shards/NAME.sqlite. */
static int list_shards(const char *dir, shard **out, int *n, char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, ST_SHARD_DIR);
    DIR *d = opendir(path);
    if (!d) {
        st_errf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char name[128];
        if (!shard_name(e->d_name, name, sizeof name))
            continue;
        if (st_grow((void **)out, &cap, (size_t)*n + 1, sizeof **out, 16)) {
            st_errf(err, errlen, "out of memory");
            rc = -1;
            break;
        }
        shard *sh = &(*out)[(*n)++];
        memset(sh, 0, sizeof *sh);
        snprintf(sh->name, sizeof sh->name, "%s", name);
        if (st_shard_path(dir, name, sh->path, sizeof sh->path)) {
            st_errf(err, errlen, "%s: path too long", dir);
            rc = -1;
            break;
        }
    }
    closedir(d);
    if (rc == 0 && *n == 0) {
        st_errf(err, errlen, "%s: no shards (DIR/%s/NAME%s, written by servetune audit --only)", path, ST_SHARD_DIR,
                ST_SHARD_EXT);
        rc = -1;
    }
    if (rc) {
        shards_free(*out, *n);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

/* Checks every shard against the spec (the first shard's, or expect_hash): the same spec hash, the
 * same version, a configuration of the spec. Sorts them in the spec's order. */
static int check_shards(shard *v, int n, const char *expect_hash, st_spec *spec, char *err, size_t errlen)
{
    const char *ref = expect_hash ? expect_hash : v[0].audit.spec_hash;
    for (int i = 0; i < n; i++)
        if (strcmp(v[i].audit.spec_hash, ref)) {
            if (expect_hash)
                st_errf(err, errlen,
                        "%s: an audit of another spec (its spec hash %.12s, expected %.12s): refused; a shard "
                        "holds the results of one spec text",
                        v[i].path, v[i].audit.spec_hash, expect_hash);
            else
                st_errf(err, errlen,
                        "shards of different specs: %s (spec hash %.12s) and %s (spec hash %.12s): refused; "
                        "move the shards of the other audit away",
                        v[0].path, v[0].audit.spec_hash, v[i].path, v[i].audit.spec_hash);
            return -1;
        }
    for (int i = 1; i < n; i++)
        if (strcmp(v[i].audit.version ? v[i].audit.version : "", v[0].audit.version ? v[0].audit.version : "")) {
            st_errf(err, errlen, "shards written by different servetune versions: %s (%s) and %s (%s): refused",
                    v[0].path, v[0].audit.version ? v[0].audit.version : "?", v[i].path,
                    v[i].audit.version ? v[i].audit.version : "?");
            return -1;
        }
    char perr[512];
    const char *text = v[0].audit.spec_text ? v[0].audit.spec_text : "";
    if (st_spec_parse(v[0].audit.spec_path ? v[0].audit.spec_path : "spec", text, strlen(text), spec, perr,
                      sizeof perr)) {
        st_errf(err, errlen, "%s: stored spec: %s", v[0].path, perr);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        v[i].idx = -1;
        for (int k = 0; k < spec->n_configs; k++)
            if (!strcmp(spec->configs[k].name, v[i].name))
                v[i].idx = k;
        if (v[i].idx < 0) {
            st_errf(err, errlen, "%s: '%s' is not a configuration of the spec: refused", v[i].path, v[i].name);
            st_spec_free(spec);
            return -1;
        }
    }
    qsort(v, (size_t)n, sizeof *v, by_idx);
    return 0;
}

/* The merged audit row: the spec of the shards, the earliest start, the latest end, partial when a
 * configuration is missing or did not finish (the note names them). */
static void merged_audit(const shard *v, int n, const st_spec *spec, st_merge_result *res, st_audit_row *a,
                         st_buf *note)
{
    memset(a, 0, sizeof *a);
    memcpy(a->spec_hash, v[0].audit.spec_hash, sizeof a->spec_hash);
    a->spec_path = v[0].audit.spec_path;
    a->spec_text = v[0].audit.spec_text;
    a->version = v[0].audit.version;
    a->started = v[0].audit.started;
    for (int i = 0; i < n; i++) {
        if (v[i].audit.started && v[i].audit.started < a->started)
            a->started = v[i].audit.started;
        if (v[i].audit.finished > a->finished)
            a->finished = v[i].audit.finished;
    }
    int k = 0, first = 1;
    for (int c = 0; c < spec->n_configs; c++) {
        while (k < n && v[k].idx < c)
            k++;
        const char *why = NULL;
        char buf[300];
        if (k >= n || v[k].idx != c) {
            res->missing++;
            why = "no shard";
        } else if (strcmp(v[k].status, "done") && strcmp(v[k].status, "failed")) {
            res->unfinished++;
            snprintf(buf, sizeof buf, "%s%s%s", v[k].status[0] ? v[k].status : "not started",
                     v[k].audit.note ? ": " : "", v[k].audit.note ? v[k].audit.note : "");
            why = buf;
        }
        if (!why)
            continue;
        st_buf_printf(note, "%s%s (%s)", first ? "configurations without results: " : ", ", spec->configs[c].name, why);
        first = 0;
    }
    res->partial = res->missing + res->unfinished > 0;
    a->partial = res->partial;
    a->note = res->partial && note->data && !st_buf_error(note) ? note->data : (res->partial ? "partial" : NULL);
}

static void remove_sidecars(const char *db)
{
    static const char *ext[] = { "-wal", "-shm", "-journal" };
    char p[4300];
    for (size_t i = 0; i < sizeof ext / sizeof *ext; i++) {
        snprintf(p, sizeof p, "%s%s", db, ext[i]);
        unlink(p);
    }
}

static void sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

int st_shard_merge(const char *dir, const char *expect_hash, const volatile sig_atomic_t *stop, st_merge_result *res,
                   char *err, size_t errlen)
{
    memset(res, 0, sizeof *res);
    int kind = st_shard_results_kind(dir, err, errlen);
    if (kind < 0)
        return -1;
    if (kind == 1) {
        st_errf(err, errlen,
                "%s/%s holds a single-machine audit: it is never replaced by a merge of shards (use another -o)", dir,
                ST_STORE_FILE);
        return -1;
    }
    shard *v;
    int n;
    if (list_shards(dir, &v, &n, err, errlen))
        return -1;
    st_spec spec;
    int rc = -1;
    for (int i = 0; i < n; i++)
        if (read_shard(&v[i], err, errlen)) {
            shards_free(v, n);
            return -1;
        }
    if (check_shards(v, n, expect_hash, &spec, err, errlen)) {
        shards_free(v, n);
        return -1;
    }
    char final[4200], tmp[4300];
    snprintf(final, sizeof final, "%s/%s", dir, ST_STORE_FILE);
    snprintf(tmp, sizeof tmp, "%s/.%s.merge-%ld", dir, ST_STORE_FILE, (long)getpid());
    unlink(tmp);
    remove_sidecars(tmp);
    st_store *out = NULL;
    st_buf note;
    st_buf_init(&note, MERGE_NOTE_MAX);
    if (st_store_open_file(tmp, ST_STORE_ROLLBACK, &out, err, errlen))
        goto done;
    st_store_set_stop(out, stop);
    for (int i = 0; i < n; i++) {
        if ((stop && *stop) || st_store_merge_shard(out, v[i].path, err, errlen)) {
            if (stop && *stop) {
                res->interrupted = 1;
                st_errf(err, errlen, "interrupted while merging %s (%d of %d shards merged): %s/%s is unchanged",
                        v[i].path, i, n, dir, ST_STORE_FILE);
            }
            goto done;
        }
    }
    res->shards = n;
    res->n_configs = spec.n_configs;
    memcpy(res->spec_hash, v[0].audit.spec_hash, sizeof res->spec_hash);
    st_audit_row a;
    merged_audit(v, n, &spec, res, &a, &note);
    char count[16];
    snprintf(count, sizeof count, "%d", n);
    /* the trace's statistics are the same in every shard (meta "traffic"): the first one's */
    const char *traffic = NULL;
    for (int i = 0; i < n && !traffic; i++)
        traffic = v[i].audit.traffic;
    st_store_set_stop(out, NULL); /* the last few rows: the file is complete once they are in */
    if (st_store_audit_put(out, &a) || st_store_meta_put(out, ST_SHARD_META_KEY, count) ||
        (traffic && st_store_meta_put(out, "traffic", traffic))) {
        st_errf(err, errlen, "%s: %s", tmp, st_store_errmsg(out));
        goto done;
    }
    st_store_close(out);
    out = NULL;
    /* The old database's journals belong to it, not to the new file. */
    remove_sidecars(final);
    if (rename(tmp, final)) {
        st_errf(err, errlen, "%s: %s", final, strerror(errno));
        goto done;
    }
    sync_dir(dir);
    rc = 0;
done:
    st_store_close(out);
    if (rc) {
        unlink(tmp);
        remove_sidecars(tmp);
    }
    st_buf_free(&note);
    st_spec_free(&spec);
    shards_free(v, n);
    return rc;
}

int st_shard_spec(const char *dir, st_spec *spec, char *err, size_t errlen)
{
    shard *v;
    int n;
    if (list_shards(dir, &v, &n, err, errlen))
        return -1;
    int rc = -1;
    for (int i = 0; i < n && rc; i++) {
        st_store *s;
        if (st_store_open_file(v[i].path, ST_STORE_READONLY, &s, err, errlen))
            continue;
        st_audit_row a;
        if (st_store_audit_get(s, &a) == 1) {
            const char *t = a.spec_text ? a.spec_text : "";
            rc = st_spec_parse(a.spec_path ? a.spec_path : "spec", t, strlen(t), spec, err, errlen);
            st_audit_row_free(&a);
        }
        st_store_close(s);
    }
    if (rc && !err[0])
        st_errf(err, errlen, "%s/%s: no shard holds an audit yet", dir, ST_SHARD_DIR);
    shards_free(v, n);
    return rc;
}
