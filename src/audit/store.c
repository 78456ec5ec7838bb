#include "audit/store.h"

#include <errno.h>
#include <math.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stddef.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/util.h"

#define STORE_ERR_MAX 256

struct st_store {
    sqlite3 *db;
    char err[STORE_ERR_MAX];           /* the message of the last failed write, kept past its ROLLBACK */
    const st_secrets *secrets;         /* removed from every text written (st_store_set_secrets) */
    const volatile sig_atomic_t *stop; /* st_store_set_stop */
    char *tidy;                        /* read-only: the file whose -wal and -shm this open created */
};

/* SQLite's progress handler: nonzero interrupts the statement (SQLITE_INTERRUPT, rolled back). */
static int store_progress(void *arg)
{
    const st_store *s = arg;
    return s->stop && *s->stop;
}

void st_store_set_stop(st_store *s, const volatile sig_atomic_t *stop)
{
    s->stop = stop;
    sqlite3_progress_handler(s->db, stop ? 1000 : 0, stop ? store_progress : NULL, s);
}

static const char *SCHEMA =
    "PRAGMA synchronous=FULL;"
    "PRAGMA foreign_keys=ON;"
    "CREATE TABLE IF NOT EXISTS audit("
    " id INTEGER PRIMARY KEY CHECK (id = 1), spec_hash TEXT NOT NULL, spec_path TEXT, spec_text TEXT NOT NULL,"
    " version TEXT, started INTEGER, finished INTEGER, partial INTEGER NOT NULL DEFAULT 1, note TEXT);"
    "CREATE TABLE IF NOT EXISTS configs("
    " name TEXT PRIMARY KEY, idx INTEGER NOT NULL, status TEXT NOT NULL, started INTEGER, startup_s REAL,"
    " failure_class TEXT, failure_detail TEXT, log_tail TEXT, argv TEXT, facts TEXT);"
    "CREATE TABLE IF NOT EXISTS runs("
    " id INTEGER PRIMARY KEY, config TEXT NOT NULL, seq INTEGER NOT NULL, rate REAL, grid INTEGER NOT NULL,"
    " run_key TEXT NOT NULL UNIQUE, verdict TEXT NOT NULL, why TEXT, stopped_early INTEGER NOT NULL,"
    " planned INTEGER, sent INTEGER, completed INTEGER, failed INTEGER, duration_s REAL, delivered_rps REAL,"
    " output_tps REAL, sustained_rps REAL, offered_rps_achieved REAL, worst_ratio REAL,"
    " ttft_p50_ms REAL, ttft_p95_ms REAL, ttft_p99_ms REAL, tpot_p50_ms REAL, tpot_p95_ms REAL, tpot_p99_ms REAL,"
    " itl_p95_ms REAL, e2e_p95_ms REAL, lag_p99_ms REAL, terms TEXT, client_limited INTEGER,"
    " summary TEXT, started INTEGER, ended INTEGER);"
    "CREATE TABLE IF NOT EXISTS requests("
    " run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, id INTEGER NOT NULL, warmup INTEGER,"
    " status TEXT, http_status INTEGER, scheduled INTEGER, sent INTEGER, first_byte INTEGER,"
    " first_token INTEGER, end_t INTEGER, input_tokens INTEGER, output_requested INTEGER,"
    " output_tokens INTEGER, cached_tokens INTEGER, usage_reported INTEGER,"
    " events BLOB, error TEXT, srv_prompt INTEGER, srv_gen INTEGER, srv_gen_n INTEGER,"
    " prompt_reported INTEGER, first_answer INTEGER, reasoning_tokens INTEGER, session INTEGER, turn INTEGER,"
    " PRIMARY KEY (run_id, id));"
    "CREATE TABLE IF NOT EXISTS metrics("
    " run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, t REAL NOT NULL, name TEXT NOT NULL,"
    " value REAL);"
    "CREATE INDEX IF NOT EXISTS metrics_run ON metrics(run_id);"
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);";

void st_store_hash(const void *data, size_t len, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL);
    for (unsigned i = 0; i < 32 && i < mdlen; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
    out[64] = '\0';
}

const char *st_store_errmsg(const st_store *s)
{
    if (!s || !s->db)
        return "no database";
    return s->err[0] ? s->err : sqlite3_errmsg(s->db);
}

/* Request columns that came after the first results databases: the server's timings
 * (llama.cpp), the prompt tokens the server counted, the first answer token and the reasoning
 * tokens (reasoning models), the session and turn of a multi-turn request. A database without them gets them (NULL: not known), so that
 * --resume and `servetune report` keep working on it. 0, or -1 with the SQLite message in *e. */
static int add_later_columns(st_store *s, char **e)
{
    static const char *const cols[][2] = {
        { "srv_prompt", "INTEGER" },      { "srv_gen", "INTEGER" },      { "srv_gen_n", "INTEGER" },
        { "prompt_reported", "INTEGER" }, { "first_answer", "INTEGER" }, { "reasoning_tokens", "INTEGER" },
        { "session", "INTEGER" },         { "turn", "INTEGER" },
    };
    for (size_t i = 0; i < sizeof cols / sizeof *cols; i++) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(s->db, "SELECT 1 FROM pragma_table_info('requests') WHERE name = ?", -1, &st, NULL) !=
            SQLITE_OK)
            return -1;
        sqlite3_bind_text(st, 1, cols[i][0], -1, SQLITE_STATIC);
        int have = sqlite3_step(st) == SQLITE_ROW;
        sqlite3_finalize(st);
        if (have)
            continue;
        char sql[160];
        snprintf(sql, sizeof sql, "ALTER TABLE requests ADD COLUMN %s %s;", cols[i][0], cols[i][1]);
        if (sqlite3_exec(s->db, sql, NULL, NULL, e) != SQLITE_OK)
            return -1;
    }
    return 0;
}

int st_store_open(const char *dir, st_store **out, char *err, size_t errlen)
{
    *out = NULL;
    if (mkdir(dir, 0755) && errno != EEXIST) {
        snprintf(err, errlen, "%s: %s", dir, strerror(errno));
        return -1;
    }
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, ST_STORE_FILE) >= sizeof path) {
        snprintf(err, errlen, "%s: path too long", dir);
        return -1;
    }
    return st_store_open_file(path, 0, out, err, errlen);
}

int st_store_open_read(const char *dir, st_store **out, char *err, size_t errlen)
{
    *out = NULL;
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, ST_STORE_FILE) >= sizeof path) {
        snprintf(err, errlen, "%s: path too long", dir);
        return -1;
    }
    return st_store_open_file(path, ST_STORE_READONLY, out, err, errlen);
}

/* An existing database file as found before SQLite opens it: 0 for a non-empty regular file (a
 * symlink is followed: a dangling one is "No such file or directory"), else -1 with err. */
static int existing_file(const char *path, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file, not a servetune results database", path);
        return -1;
    }
    if (st.st_size == 0) {
        snprintf(err, errlen, "%s: empty (0 bytes), not a servetune results database", path);
        return -1;
    }
    return 0;
}

/* SQLite's message for the connection's last error, with what to do about a read-only database
 * (a hot journal that cannot be rolled back here, a file or folder without write access). */
static void db_errmsg(sqlite3 *db, const char *path, char *err, size_t errlen)
{
    int x = sqlite3_extended_errcode(db);
    if ((x & 0xff) == SQLITE_READONLY) {
        snprintf(err, errlen,
                 "%s: %s: %s; check that this user may write the file and its folder (a write to it was "
                 "interrupted and must be rolled back first), then run the command again",
                 path, sqlite3_errmsg(db),
                 x == SQLITE_READONLY_ROLLBACK || x == SQLITE_READONLY_RECOVERY
                     ? "it has a hot journal (an interrupted write) that needs write access to roll back"
                     : "the database is read-only here");
        return;
    }
    snprintf(err, errlen, "%s: %s", path, sqlite3_errmsg(db));
}

/* Whether the open database holds servetune's tables (checked before anything is written to
 * it). 1 yes, 0 no (err says what it is), -1 the file could not be read (err). */
static int is_servetune_db(sqlite3 *db, const char *path, char *err, size_t errlen)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db,
                           "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('runs', 'requests')",
                           -1, &st, NULL) != SQLITE_OK) {
        int code = sqlite3_errcode(db);
        if (code == SQLITE_NOTADB)
            snprintf(err, errlen, "%s: not an SQLite database, not a servetune results database", path);
        else
            db_errmsg(db, path, err, errlen);
        return -1;
    }
    int rc = sqlite3_step(st);
    long long n = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    if (rc != SQLITE_ROW)
        db_errmsg(db, path, err, errlen);
    sqlite3_finalize(st);
    if (n < 0)
        return -1;
    if (n != 2) { /* every servetune database, the first ones included, has these two */
        snprintf(err, errlen, "%s: an SQLite database without servetune's tables (another program's?): not opened",
                 path);
        return 0;
    }
    return 1;
}

/* Whether the requests table lacks a column add_later_columns adds (an older servetune's file). */
static int lacks_later_columns(sqlite3 *db)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM pragma_table_info('requests') WHERE name = 'turn'", -1, &st,
                           NULL) != SQLITE_OK)
        return 0;
    int lacks = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int64(st, 0) == 0;
    sqlite3_finalize(st);
    return lacks;
}

int st_store_open_file(const char *path, int flags, st_store **out, char *err, size_t errlen)
{
    *out = NULL;
    int ro = (flags & ST_STORE_READONLY) != 0, existing = ro || (flags & ST_STORE_EXISTING);
    struct stat fst;
    /* a file already there must be servetune's before anything is written to it */
    int check = existing || (stat(path, &fst) == 0 && fst.st_size > 0);
    if (existing && existing_file(path, err, errlen))
        return -1;
    st_store *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int oflags = ro ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | (existing ? 0 : SQLITE_OPEN_CREATE);
    int wal_before = 1;
    if (ro) {
        char side[4200];
        snprintf(side, sizeof side, "%s-wal", path);
        wal_before = access(side, F_OK) == 0;
        snprintf(side, sizeof side, "%s-shm", path);
        wal_before |= access(side, F_OK) == 0;
    }
    if (sqlite3_open_v2(path, &s->db, oflags | SQLITE_OPEN_FULLMUTEX, NULL) != SQLITE_OK) {
        if (s->db)
            db_errmsg(s->db, path, err, errlen);
        else
            snprintf(err, errlen, "%s: cannot open", path);
        st_store_close(s);
        return -1;
    }
    sqlite3_busy_timeout(s->db, 5000);
    if (check) {
        int ours = is_servetune_db(s->db, path, err, errlen);
        if (ours < 0 && ro &&
            (sqlite3_extended_errcode(s->db) == SQLITE_READONLY_ROLLBACK ||
             sqlite3_extended_errcode(s->db) == SQLITE_READONLY_RECOVERY)) {
            /* a hot journal: only a writer can roll it back (the file is servetune's if the
             * check passes once it is) */
            sqlite3_close(s->db);
            s->db = NULL;
            if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX, NULL) == SQLITE_OK) {
                sqlite3_busy_timeout(s->db, 5000);
                ours = is_servetune_db(s->db, path, err, errlen);
            } else if (s->db) {
                db_errmsg(s->db, path, err, errlen);
            }
        }
        if (ours != 1) {
            st_store_close(s);
            return -1;
        }
    }
    if (ro) {
        if (!wal_before)
            s->tidy = strdup(path);       /* NULL without memory: the files stay, nothing else changes */
        if (lacks_later_columns(s->db)) { /* an older servetune's database: its later columns added */
            sqlite3_close(s->db);
            char *e = NULL;
            if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX, NULL) != SQLITE_OK ||
                add_later_columns(s, &e)) {
                if (e)
                    snprintf(err, errlen, "%s: %s", path, e);
                else
                    db_errmsg(s->db, path, err, errlen);
                sqlite3_free(e);
                st_store_close(s);
                return -1;
            }
            sqlite3_busy_timeout(s->db, 5000);
        }
        *out = s;
        return 0;
    }
    /* A shard lives on a filesystem that other hosts share: WAL's shared-memory index cannot be
     * shared between hosts, a rollback journal can. */
    const char *journal = (flags & ST_STORE_ROLLBACK) ? "PRAGMA journal_mode=DELETE;" : "PRAGMA journal_mode=WAL;";
    char *e = NULL;
    if (sqlite3_exec(s->db, journal, NULL, NULL, &e) != SQLITE_OK ||
        sqlite3_exec(s->db, SCHEMA, NULL, NULL, &e) != SQLITE_OK || add_later_columns(s, &e)) {
        snprintf(err, errlen, "%s: %s", path, e ? e : "schema");
        sqlite3_free(e);
        st_store_close(s);
        return -1;
    }
    *out = s;
    return 0;
}

void st_store_close(st_store *s)
{
    if (!s)
        return;
    sqlite3_close(s->db);
    /* A read-only open of a WAL database at rest creates its -wal and -shm files, which a
     * read-only connection cannot remove: a read would leave two files behind. The last
     * connection that may write removes them when it closes (SQLite knows from its locks whether
     * it is the last, so a writer that started meanwhile keeps them); opening one and closing it
     * writes nothing to the database. */
    if (s->tidy) {
        sqlite3 *db = NULL;
        if (sqlite3_open_v2(s->tidy, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK)
            sqlite3_exec(db, "SELECT count(*) FROM sqlite_master;", NULL, NULL, NULL);
        sqlite3_close(db);
        free(s->tidy);
    }
    free(s);
}

/* ---- small helpers ---- */

/* Keeps the last error's message with the system's reason ("disk I/O error (No space left on
 * device)"), before a ROLLBACK replaces SQLite's with "not an error". */
static void keep_err(st_store *s)
{
    int e = errno; /* the failed write's, when SQLite's own record of it is gone */
    int se = sqlite3_system_errno(s->db), code = sqlite3_errcode(s->db) & 0xff;
    if (!se && (code == SQLITE_IOERR || code == SQLITE_FULL))
        se = e;
    if (se)
        snprintf(s->err, sizeof s->err, "%s (%s)", sqlite3_errmsg(s->db), strerror(se));
    else if (code == SQLITE_READONLY)
        snprintf(s->err, sizeof s->err,
                 "%s: check that this user may write the database and its folder (a hot journal left by an "
                 "interrupted write needs write access to be rolled back)",
                 sqlite3_errmsg(s->db));
    else
        snprintf(s->err, sizeof s->err, "%s", sqlite3_errmsg(s->db));
}

static int exec(st_store *s, const char *sql)
{
    return sqlite3_exec(s->db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
}

/* "out of memory" as the store's message (a copy or a bound text that could not be made). -1. */
static int nomem(st_store *s)
{
    snprintf(s->err, sizeof s->err, "out of memory");
    return -1;
}

/* A text column as a malloc'd copy, NULL for SQL NULL. *bad is set when the copy (or SQLite's
 * conversion to text) ran out of memory: a value lost is never read as a value absent. */
static char *col_str(sqlite3_stmt *st, int i, int *bad)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    if (!t) {
        if (sqlite3_column_type(st, i) != SQLITE_NULL)
            *bad = 1;
        return NULL;
    }
    char *c = strdup((const char *)t);
    if (!c)
        *bad = 1;
    return c;
}

static double col_dbl(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}

/* Reads every row of st (prepared and bound) into *rows, elements of `elem` bytes grown `first` at a
 * time, each filled by read_row (0, or -1 when out of memory: the row is then freed), and finalizes
 * st. 0 with *n rows read; or -1 ("out of memory" the store's message when it was that) with the rows
 * freed by free_rows, *rows NULL and *n 0. */
static int read_rows(st_store *s, sqlite3_stmt *st, void **rows, size_t *n, size_t elem, size_t first,
                     int (*read_row)(sqlite3_stmt *st, void *row), void (*free_rows)(void *rows, size_t n))
{
    size_t cap = 0;
    int rc;
    s->err[0] = '\0';
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (st_grow(rows, &cap, *n + 1, elem, first) || read_row(st, (char *)*rows + *n * elem)) {
            rc = SQLITE_NOMEM;
            break;
        }
        (*n)++;
    }
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE)
        return 0;
    if (rc == SQLITE_NOMEM)
        nomem(s);
    free_rows(*rows, *n);
    *rows = NULL;
    *n = 0;
    return -1;
}

static void bind_dbl(sqlite3_stmt *st, int i, double v)
{
    if (isnan(v))
        sqlite3_bind_null(st, i);
    else
        sqlite3_bind_double(st, i, v);
}

/* Binding a text copies it, which can fail: the text binders return SQLite's code (SQLITE_OK 0),
 * and a statement whose bindings failed is never stepped (it would store NULL in their place). */
static int bind_str(sqlite3_stmt *st, int i, const char *v)
{
    return v ? sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, i);
}

/* Text that may hold what a server or an engine said: bound with the secrets removed. */
static int bind_text(const st_store *s, sqlite3_stmt *st, int i, const char *v)
{
    if (!v || !s->secrets || !s->secrets->n)
        return bind_str(st, i, v);
    char *c = strdup(v);
    if (!c)
        return SQLITE_NOMEM; /* never the text in clear */
    st_secrets_redact(s->secrets, c);
    int rc = bind_str(st, i, c);
    free(c);
    return rc;
}

void st_store_set_secrets(st_store *s, const st_secrets *secrets) { s->secrets = secrets; }

/* A rate is stored as REAL; inf as the text 'inf' (SQLite would store it but JSON and CSV
 * exports of the database are clearer this way). */
static void bind_rate(sqlite3_stmt *st, int i, double r)
{
    if (isinf(r))
        sqlite3_bind_text(st, i, "inf", -1, SQLITE_STATIC); /* static: nothing copied, cannot fail */
    else
        sqlite3_bind_double(st, i, r);
}

static double col_rate(sqlite3_stmt *st, int i)
{
    if (sqlite3_column_type(st, i) == SQLITE_TEXT)
        return INFINITY;
    return col_dbl(st, i);
}

/* ---- audit ---- */

void st_audit_row_free(st_audit_row *a)
{
    free(a->spec_path);
    free(a->spec_text);
    free(a->version);
    free(a->note);
    free(a->suggested_rates);
    free(a->disagg_md);
    free(a->disagg);
    free(a->model_note);
    free(a->traffic);
    memset(a, 0, sizeof *a);
}

int st_store_audit_get(st_store *s, st_audit_row *out)
{
    memset(out, 0, sizeof *out);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT spec_hash, spec_path, spec_text, version, started, finished, partial, note "
                           "FROM audit WHERE id = 1",
                           -1, &st, NULL) != SQLITE_OK)
        return -1;
    s->err[0] = '\0';
    int rc = sqlite3_step(st), bad = 0;
    if (rc == SQLITE_ROW) {
        const unsigned char *h = sqlite3_column_text(st, 0);
        snprintf(out->spec_hash, sizeof out->spec_hash, "%s", h ? (const char *)h : "");
        out->spec_path = col_str(st, 1, &bad);
        out->spec_text = col_str(st, 2, &bad);
        out->version = col_str(st, 3, &bad);
        out->started = sqlite3_column_int64(st, 4);
        out->finished = sqlite3_column_int64(st, 5);
        out->partial = sqlite3_column_int(st, 6);
        out->note = col_str(st, 7, &bad);
        rc = 1;
    } else {
        rc = rc == SQLITE_DONE ? 0 : -1;
    }
    sqlite3_finalize(st);
    if (rc == 1) {
        char *p = NULL;
        int got = st_store_meta_get(s, "prediction", &p);
        if (got == 1)
            out->prediction = !strcmp(p, "1");
        free(p);
        if (got < 0 || st_store_meta_get(s, "suggested_rates", &out->suggested_rates) < 0 ||
            st_store_meta_get(s, "model_note", &out->model_note) < 0 ||
            st_store_meta_get(s, "disagg_md", &out->disagg_md) < 0 ||
            st_store_meta_get(s, "disagg", &out->disagg) < 0 || st_store_meta_get(s, "traffic", &out->traffic) < 0)
            rc = -1;
    }
    if (rc == 1 && bad)
        rc = nomem(s);
    if (rc < 0)
        st_audit_row_free(out);
    return rc;
}

int st_store_meta_put(st_store *s, const char *key, const char *value)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db, "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", -1, &st, NULL) != SQLITE_OK)
        return -1;
    int rc = bind_str(st, 1, key) | bind_text(s, st, 2, value) ? nomem(s) : sqlite3_step(st) == SQLITE_DONE ? 0 : -1;
    sqlite3_finalize(st);
    return rc;
}

int st_store_meta_get(st_store *s, const char *key, char **out)
{
    *out = NULL;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db, "SELECT value FROM meta WHERE key = ?", -1, &st, NULL) != SQLITE_OK)
        return -1;
    int rc = bind_str(st, 1, key) ? SQLITE_NOMEM : sqlite3_step(st), bad = 0;
    if (rc == SQLITE_ROW) {
        *out = col_str(st, 0, &bad);
        rc = bad ? nomem(s) : *out ? 1 : 0;
    } else {
        rc = rc == SQLITE_DONE ? 0 : rc == SQLITE_NOMEM ? nomem(s) : -1;
    }
    sqlite3_finalize(st);
    return rc;
}

int st_store_set_durable(st_store *s, int durable)
{
    return exec(s, durable ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=OFF");
}

int st_store_audit_begin(st_store *s, const char *spec_path, const char *spec_text, size_t spec_len,
                         const char *version, int resume, char *err, size_t errlen)
{
    char hash[65];
    st_store_hash(spec_text, spec_len, hash);
    st_audit_row a;
    int have = st_store_audit_get(s, &a);
    if (have < 0) {
        snprintf(err, errlen, "results database: %s", st_store_errmsg(s));
        return -1;
    }
    if (have && !resume) {
        /* --resume only helps when it is this spec's audit */
        if (strcmp(a.spec_hash, hash))
            snprintf(err, errlen, "the output folder already holds an audit of another spec (%s): choose another -o",
                     a.spec_path ? a.spec_path : "?");
        else
            snprintf(err, errlen,
                     "the output folder already holds an audit of this spec; use --resume to continue it, or "
                     "another -o");
        st_audit_row_free(&a);
        return -1;
    }
    if (have && strcmp(a.spec_hash, hash)) {
        st_audit_row_free(&a);
        snprintf(err, errlen, "cannot resume: the spec changed since the stored audit (a new audit needs another -o)");
        return -1;
    }
    if (have)
        st_audit_row_free(&a);
    sqlite3_stmt *st;
    const char *sql = have ? "UPDATE audit SET partial = 1, finished = NULL, note = NULL WHERE id = 1"
                           : "INSERT INTO audit(id, spec_hash, spec_path, spec_text, version, started, partial) "
                             "VALUES (1, ?, ?, ?, ?, ?, 1)";
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "results database: %s", st_store_errmsg(s));
        return -1;
    }
    int b = 0;
    if (!have) {
        b = bind_str(st, 1, hash) | bind_str(st, 2, spec_path) |
            sqlite3_bind_text(st, 3, spec_text, (int)spec_len, SQLITE_TRANSIENT) | bind_str(st, 4, version);
        sqlite3_bind_int64(st, 5, st_wall_ns());
    }
    s->err[0] = '\0';
    int rc = b ? nomem(s) : sqlite3_step(st) == SQLITE_DONE ? 0 : -1;
    sqlite3_finalize(st);
    if (rc)
        snprintf(err, errlen, "results database: %s", st_store_errmsg(s));
    return rc;
}

int st_store_audit_finish(st_store *s, int partial, const char *note)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db, "UPDATE audit SET finished = ?, partial = ?, note = ? WHERE id = 1", -1, &st, NULL) !=
        SQLITE_OK)
        return -1;
    sqlite3_bind_int64(st, 1, st_wall_ns());
    sqlite3_bind_int(st, 2, partial);
    s->err[0] = '\0';
    int rc = bind_text(s, st, 3, note) ? nomem(s) : sqlite3_step(st) == SQLITE_DONE ? 0 : -1;
    sqlite3_finalize(st);
    return rc;
}

/* ---- configs ---- */

void st_config_row_free(st_config_row *c)
{
    free(c->name);
    free(c->status);
    free(c->failure_class);
    free(c->failure_detail);
    free(c->log_tail);
    free(c->argv);
    free(c->facts);
    memset(c, 0, sizeof *c);
}

void st_config_rows_free(st_config_row *rows, int n)
{
    for (int i = 0; i < n; i++)
        st_config_row_free(&rows[i]);
    free(rows);
}

int st_store_config_put(st_store *s, const st_config_row *c)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "INSERT OR REPLACE INTO configs(name, idx, status, started, startup_s, failure_class, "
                           "failure_detail, log_tail, argv, facts) VALUES (?,?,?,?,?,?,?,?,?,?)",
                           -1, &st, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_int(st, 2, c->idx);
    sqlite3_bind_int64(st, 4, c->started);
    bind_dbl(st, 5, c->startup_s);
    int b = bind_str(st, 1, c->name) | bind_str(st, 3, c->status ? c->status : "pending") |
            bind_str(st, 6, c->failure_class) | bind_text(s, st, 7, c->failure_detail) |
            bind_text(s, st, 8, c->log_tail) | bind_text(s, st, 9, c->argv) | bind_text(s, st, 10, c->facts);
    int rc = b ? nomem(s) : sqlite3_step(st) == SQLITE_DONE ? 0 : -1;
    if (rc && !b)
        keep_err(s);
    sqlite3_finalize(st);
    return rc;
}

/* Reads a row of the configs query (read_rows). */
static int read_config(sqlite3_stmt *st, void *row)
{
    st_config_row *c = row;
    int bad = 0;
    memset(c, 0, sizeof *c);
    c->name = col_str(st, 0, &bad);
    c->idx = sqlite3_column_int(st, 1);
    c->status = col_str(st, 2, &bad);
    c->started = sqlite3_column_int64(st, 3);
    c->startup_s = col_dbl(st, 4);
    c->failure_class = col_str(st, 5, &bad);
    c->failure_detail = col_str(st, 6, &bad);
    c->log_tail = col_str(st, 7, &bad);
    c->argv = col_str(st, 8, &bad);
    c->facts = col_str(st, 9, &bad);
    if (bad)
        st_config_row_free(c);
    return bad ? -1 : 0;
}

static void free_configs(void *rows, size_t n) { st_config_rows_free(rows, (int)n); }

int st_store_configs_get(st_store *s, st_config_row **out, int *n)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT name, idx, status, started, startup_s, failure_class, failure_detail, log_tail, "
                           "argv, facts FROM configs ORDER BY idx",
                           -1, &st, NULL) != SQLITE_OK)
        return -1;
    size_t k = 0;
    int rc = read_rows(s, st, (void **)out, &k, sizeof **out, 8, read_config, free_configs);
    *n = (int)k;
    return rc;
}

/* ---- runs ---- */

void st_run_row_free(st_run_row *r)
{
    free(r->config);
    free(r->verdict);
    free(r->why);
    free(r->summary_json);
    memset(r, 0, sizeof *r);
}

void st_run_rows_free(st_run_row *rows, int n)
{
    for (int i = 0; i < n; i++)
        st_run_row_free(&rows[i]);
    free(rows);
}

static void terms_to_text(const st_run_row *r, char *buf, size_t n)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < r->n_terms && i < ST_STORE_TERMS && off < n; i++)
        off += (size_t)snprintf(buf + off, n - off, "%s%.17g", i ? " " : "", r->term_ms[i]);
}

static void terms_from_text(st_run_row *r, const char *t)
{
    r->n_terms = 0;
    while (t && *t && r->n_terms < ST_STORE_TERMS) {
        char *end;
        double v = strtod(t, &end);
        if (end == t)
            break;
        r->term_ms[r->n_terms++] = v;
        t = end;
    }
}

/* The runs table's columns after its id, in order: the INSERT that writes a run and the SELECT
 * that reads it are generated from this table, and each value is bound and read by its kind. */
typedef enum {
    RUN_TEXT,   /* char * */
    RUN_SAFE,   /* char *, written with the secrets removed (bind_text) */
    RUN_INT,    /* int */
    RUN_U32,    /* uint32_t */
    RUN_I64,    /* int64_t */
    RUN_RATE,   /* double, inf as 'inf' (bind_rate) */
    RUN_FIGURE, /* double, NaN as NULL, infinities as +-1e308 */
    RUN_KEY,    /* char run_key[65] */
    RUN_TERMS,  /* the SLO terms (n_terms, term_ms) as text */
} run_kind;

static const struct run_col {
    const char *name;
    run_kind kind;
    size_t off;
} RUN_COLUMNS[] = {
    { "config", RUN_TEXT, offsetof(st_run_row, config) },
    { "seq", RUN_INT, offsetof(st_run_row, seq) },
    { "rate", RUN_RATE, offsetof(st_run_row, rate) },
    { "grid", RUN_INT, offsetof(st_run_row, grid) },
    { "run_key", RUN_KEY, offsetof(st_run_row, run_key) },
    { "verdict", RUN_TEXT, offsetof(st_run_row, verdict) },
    { "why", RUN_SAFE, offsetof(st_run_row, why) },
    { "stopped_early", RUN_INT, offsetof(st_run_row, stopped_early) },
    { "planned", RUN_U32, offsetof(st_run_row, planned) },
    { "sent", RUN_U32, offsetof(st_run_row, sent) },
    { "completed", RUN_U32, offsetof(st_run_row, completed) },
    { "failed", RUN_U32, offsetof(st_run_row, failed) },
    { "duration_s", RUN_FIGURE, offsetof(st_run_row, duration_s) },
    { "delivered_rps", RUN_FIGURE, offsetof(st_run_row, delivered_rps) },
    { "output_tps", RUN_FIGURE, offsetof(st_run_row, output_tps) },
    { "sustained_rps", RUN_FIGURE, offsetof(st_run_row, sustained_rps) },
    { "offered_rps_achieved", RUN_FIGURE, offsetof(st_run_row, offered_rps_achieved) },
    { "worst_ratio", RUN_FIGURE, offsetof(st_run_row, worst_ratio) },
    { "ttft_p50_ms", RUN_FIGURE, offsetof(st_run_row, ttft_p50_ms) },
    { "ttft_p95_ms", RUN_FIGURE, offsetof(st_run_row, ttft_p95_ms) },
    { "ttft_p99_ms", RUN_FIGURE, offsetof(st_run_row, ttft_p99_ms) },
    { "tpot_p50_ms", RUN_FIGURE, offsetof(st_run_row, tpot_p50_ms) },
    { "tpot_p95_ms", RUN_FIGURE, offsetof(st_run_row, tpot_p95_ms) },
    { "tpot_p99_ms", RUN_FIGURE, offsetof(st_run_row, tpot_p99_ms) },
    { "itl_p95_ms", RUN_FIGURE, offsetof(st_run_row, itl_p95_ms) },
    { "e2e_p95_ms", RUN_FIGURE, offsetof(st_run_row, e2e_p95_ms) },
    { "lag_p99_ms", RUN_FIGURE, offsetof(st_run_row, lag_p99_ms) },
    { "terms", RUN_TERMS, offsetof(st_run_row, n_terms) },
    { "client_limited", RUN_INT, offsetof(st_run_row, client_limited) },
    { "summary", RUN_SAFE, offsetof(st_run_row, summary_json) },
    { "started", RUN_I64, offsetof(st_run_row, started) },
    { "ended", RUN_I64, offsetof(st_run_row, ended) },
};
#define RUN_NCOLS (sizeof RUN_COLUMNS / sizeof *RUN_COLUMNS)
/* Room for the generated statements (the column names are about 400 bytes). */
#define RUN_SQL_MAX 2048

/* "id, config, seq, ..." with each name after prefix ("r." in a join); "?,?,..." when marks. */
static void run_cols_sql(char *buf, size_t cap, const char *prefix, int marks)
{
    size_t off = (size_t)snprintf(buf, cap, "%s", marks ? "" : prefix);
    if (!marks)
        off += (size_t)snprintf(buf + off, cap - off, "id");
    for (size_t i = 0; i < RUN_NCOLS && off < cap; i++) {
        const char *sep = i || !marks ? ", " : "";
        if (marks)
            off += (size_t)snprintf(buf + off, cap - off, "%s?", sep);
        else
            off += (size_t)snprintf(buf + off, cap - off, "%s%s%s", sep, prefix, RUN_COLUMNS[i].name);
    }
}

/* Binds a run's columns from parameter 1 on: SQLITE_OK, or the code of a text binding that failed. */
static int bind_run(const st_store *s, sqlite3_stmt *st, const st_run_row *r)
{
    int b = SQLITE_OK;
    for (size_t i = 0; i < RUN_NCOLS; i++) {
        const void *f = (const char *)r + RUN_COLUMNS[i].off;
        int c = (int)i + 1;
        switch (RUN_COLUMNS[i].kind) {
        case RUN_TEXT: {
            const char *v = *(char *const *)f;
            b |= bind_str(st, c, !v && !strcmp(RUN_COLUMNS[i].name, "verdict") ? "error" : v);
            break;
        }
        case RUN_SAFE: b |= bind_text(s, st, c, *(char *const *)f); break;
        case RUN_INT: sqlite3_bind_int(st, c, *(const int *)f); break;
        case RUN_U32: sqlite3_bind_int64(st, c, *(const uint32_t *)f); break;
        case RUN_I64: sqlite3_bind_int64(st, c, *(const int64_t *)f); break;
        case RUN_RATE: bind_rate(st, c, *(const double *)f); break;
        case RUN_FIGURE: {
            double d = *(const double *)f;
            if (isinf(d))
                sqlite3_bind_double(st, c, d > 0 ? 1e308 : -1e308);
            else
                bind_dbl(st, c, d);
            break;
        }
        case RUN_KEY: b |= bind_str(st, c, r->run_key); break;
        case RUN_TERMS: {
            char terms[ST_STORE_TERMS * 26 + 1];
            terms_to_text(r, terms, sizeof terms);
            b |= bind_str(st, c, terms);
            break;
        }
        }
    }
    return b;
}

/* Reads a row of "SELECT id, <the columns>". 0, or -1 when out of memory (r is then freed). */
static int read_run(sqlite3_stmt *st, void *row)
{
    st_run_row *r = row;
    memset(r, 0, sizeof *r);
    int bad = 0;
    r->id = sqlite3_column_int64(st, 0);
    for (size_t i = 0; i < RUN_NCOLS; i++) {
        void *f = (char *)r + RUN_COLUMNS[i].off;
        int c = (int)i + 1;
        switch (RUN_COLUMNS[i].kind) {
        case RUN_TEXT:
        case RUN_SAFE: *(char **)f = col_str(st, c, &bad); break;
        case RUN_INT: *(int *)f = sqlite3_column_int(st, c); break;
        case RUN_U32: *(uint32_t *)f = (uint32_t)sqlite3_column_int64(st, c); break;
        case RUN_I64: *(int64_t *)f = sqlite3_column_int64(st, c); break;
        case RUN_RATE: *(double *)f = col_rate(st, c); break;
        case RUN_FIGURE: {
            /* Infinite figures (a worst ratio when requests failed) are stored as +-1e308. */
            double d = col_dbl(st, c);
            *(double *)f = fabs(d) >= 1e308 ? (d > 0 ? INFINITY : -INFINITY) : d;
            break;
        }
        case RUN_KEY: {
            const unsigned char *k = sqlite3_column_text(st, c);
            if (!k && sqlite3_column_type(st, c) != SQLITE_NULL)
                bad = 1;
            snprintf(r->run_key, sizeof r->run_key, "%s", k ? (const char *)k : "");
            break;
        }
        case RUN_TERMS: {
            const char *t = (const char *)sqlite3_column_text(st, c);
            if (!t && sqlite3_column_type(st, c) != SQLITE_NULL)
                bad = 1;
            terms_from_text(r, t);
            break;
        }
        }
    }
    if (!bad)
        return 0;
    st_run_row_free(r);
    return -1;
}

/* The record's token event times, 8 bytes each, little-endian (the requests table's `events`). */
static void put_events(uint8_t *dst, const st_record *x)
{
    st_event_it it;
    st_ns t;
    st_events_begin(&it, x);
    for (uint32_t i = 0; st_events_next(&it, &t); i++) {
        uint64_t v = (uint64_t)t;
        for (int b = 0; b < 8; b++)
            dst[8 * i + (uint32_t)b] = (uint8_t)(v >> (8 * b));
    }
}

/* Binds one record to the requests INSERT (its events as a blob in *blob, grown as needed).
 * SQLITE_OK, or SQLITE_NOMEM when a copy could not be made. */
static int bind_request(const st_store *s, sqlite3_stmt *rq, int64_t run_id, const st_record *x, uint8_t **blob)
{
    int k = 1;
    sqlite3_bind_int64(rq, k++, run_id);
    sqlite3_bind_int64(rq, k++, x->id);
    sqlite3_bind_int(rq, k++, x->warmup);
    sqlite3_bind_text(rq, k++, st_req_status_name(x->status), -1, SQLITE_STATIC);
    sqlite3_bind_int(rq, k++, x->http_status);
    sqlite3_bind_int64(rq, k++, x->scheduled);
    sqlite3_bind_int64(rq, k++, x->sent);
    sqlite3_bind_int64(rq, k++, x->first_byte);
    sqlite3_bind_int64(rq, k++, x->first_token);
    sqlite3_bind_int64(rq, k++, x->end);
    sqlite3_bind_int64(rq, k++, x->input_tokens);
    sqlite3_bind_int64(rq, k++, x->output_requested);
    sqlite3_bind_int64(rq, k++, x->output_tokens);
    sqlite3_bind_int64(rq, k++, x->cached_tokens);
    sqlite3_bind_int(rq, k++, x->usage_reported);
    if (x->n_events) {
        uint8_t *nb = realloc(*blob, (size_t)x->n_events * 8);
        if (!nb)
            return SQLITE_NOMEM;
        *blob = nb;
        put_events(nb, x);
        if (sqlite3_bind_blob(rq, k++, nb, (int)(x->n_events * 8), SQLITE_TRANSIENT))
            return SQLITE_NOMEM;
    } else {
        sqlite3_bind_null(rq, k++);
    }
    if (bind_text(s, rq, k++, x->error))
        return SQLITE_NOMEM;
    if (x->srv_prompt >= 0) {
        sqlite3_bind_int64(rq, k, x->srv_prompt);
        sqlite3_bind_int64(rq, k + 1, x->srv_gen);
        sqlite3_bind_int64(rq, k + 2, x->srv_gen_n);
    }
    k += 3;
    if (x->prompt_reported)
        sqlite3_bind_int64(rq, k, x->prompt_reported);
    k++;
    sqlite3_bind_int64(rq, k++, x->first_answer); /* -1: no answer token; NULL only in older databases */
    sqlite3_bind_int64(rq, k++, x->reasoning_tokens);
    if (x->session) { /* NULL: not in a session */
        sqlite3_bind_int64(rq, k, x->session);
        sqlite3_bind_int64(rq, k + 1, x->turn);
    }
    k += 2;
    return SQLITE_OK;
}

int st_store_run_put(st_store *s, st_run_row *r, const st_record *recs, uint32_t n_recs,
                     const st_metrics_sample *samples, uint32_t n_samples)
{
    sqlite3_stmt *st = NULL, *rq = NULL, *ms = NULL;
    uint8_t *blob = NULL;
    s->err[0] = '\0';
    if (exec(s, "BEGIN IMMEDIATE")) {
        keep_err(s);
        return -1;
    }
    /* Replacing a run removes its records and samples with it (ON DELETE CASCADE). */
    if (sqlite3_prepare_v2(s->db, "DELETE FROM runs WHERE run_key = ?", -1, &st, NULL) != SQLITE_OK)
        goto fail;
    if (bind_str(st, 1, r->run_key))
        goto nomem;
    if (sqlite3_step(st) != SQLITE_DONE)
        goto fail;
    sqlite3_finalize(st);
    st = NULL;
    char cols[RUN_SQL_MAX], marks[RUN_SQL_MAX], sql[2 * RUN_SQL_MAX + 64];
    run_cols_sql(cols, sizeof cols, "", 0);
    run_cols_sql(marks, sizeof marks, "", 1);
    snprintf(sql, sizeof sql, "INSERT INTO runs(%s) VALUES (%s)", cols + strlen("id, "), marks);
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
        goto fail;
    if (bind_run(s, st, r))
        goto nomem;
    if (sqlite3_step(st) != SQLITE_DONE)
        goto fail;
    r->id = sqlite3_last_insert_rowid(s->db);

    if (sqlite3_prepare_v2(s->db,
                           "INSERT INTO requests(run_id, id, warmup, status, http_status, scheduled, sent, first_byte,"
                           " first_token, end_t, input_tokens, output_requested, output_tokens, cached_tokens,"
                           " usage_reported, events, error, srv_prompt, srv_gen, srv_gen_n, prompt_reported,"
                           " first_answer, reasoning_tokens, session, turn)"
                           " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                           -1, &rq, NULL) != SQLITE_OK)
        goto fail;
    for (uint32_t i = 0; i < n_recs; i++) {
        sqlite3_reset(rq);
        sqlite3_clear_bindings(rq);
        if (bind_request(s, rq, r->id, &recs[i], &blob))
            goto nomem;
        if (sqlite3_step(rq) != SQLITE_DONE)
            goto fail;
    }
    if (n_samples) {
        if (sqlite3_prepare_v2(s->db, "INSERT INTO metrics(run_id, t, name, value) VALUES (?,?,?,?)", -1, &ms, NULL) !=
            SQLITE_OK)
            goto fail;
        for (uint32_t i = 0; i < n_samples; i++) {
            sqlite3_reset(ms);
            sqlite3_bind_int64(ms, 1, r->id);
            sqlite3_bind_double(ms, 2, samples[i].t);
            if (bind_str(ms, 3, samples[i].name))
                goto nomem;
            bind_dbl(ms, 4, samples[i].value);
            if (sqlite3_step(ms) != SQLITE_DONE)
                goto fail;
        }
    }
    sqlite3_finalize(st);
    sqlite3_finalize(rq);
    sqlite3_finalize(ms);
    free(blob);
    if (exec(s, "COMMIT") == 0)
        return 0;
    keep_err(s);
    exec(s, "ROLLBACK");
    return -1;
fail:
    /* the reason (e.g. "database or disk is full"), before ROLLBACK replaces it with "not an error" */
    keep_err(s);
    goto out;
nomem:
    nomem(s); /* a text, a blob or the events buffer could not be copied */
out:
    sqlite3_finalize(st);
    sqlite3_finalize(rq);
    sqlite3_finalize(ms);
    free(blob);
    exec(s, "ROLLBACK");
    return -1;
}

int st_store_run_find(st_store *s, const char *run_key, st_run_row *out)
{
    sqlite3_stmt *st;
    char cols[RUN_SQL_MAX], sql[RUN_SQL_MAX + 64];
    run_cols_sql(cols, sizeof cols, "", 0);
    snprintf(sql, sizeof sql, "SELECT %s FROM runs WHERE run_key = ?", cols);
    s->err[0] = '\0';
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
        return -1;
    int rc = bind_str(st, 1, run_key) ? SQLITE_NOMEM : sqlite3_step(st);
    if (rc == SQLITE_ROW)
        rc = read_run(st, out) ? nomem(s) : 1;
    else
        rc = rc == SQLITE_DONE ? 0 : rc == SQLITE_NOMEM ? nomem(s) : -1;
    sqlite3_finalize(st);
    return rc;
}

static void free_runs(void *rows, size_t n) { st_run_rows_free(rows, (int)n); }

int st_store_runs_get(st_store *s, const char *config, st_run_row **out, int *n)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *st;
    char cols[RUN_SQL_MAX], sql[RUN_SQL_MAX + 128];
    run_cols_sql(cols, sizeof cols, config ? "" : "r.", 0);
    if (config)
        snprintf(sql, sizeof sql, "SELECT %s FROM runs WHERE config = ? ORDER BY seq", cols);
    else
        snprintf(sql, sizeof sql,
                 "SELECT %s FROM runs r LEFT JOIN configs c ON c.name = r.config ORDER BY c.idx, r.seq", cols);
    s->err[0] = '\0';
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
        return -1;
    if (config && bind_str(st, 1, config)) {
        sqlite3_finalize(st);
        return nomem(s);
    }
    size_t k = 0;
    int rc = read_rows(s, st, (void **)out, &k, sizeof **out, 16, read_run, free_runs);
    *n = (int)k;
    return rc;
}

/* Reads a row of the requests query (read_rows). */
static int read_record(sqlite3_stmt *st, void *row)
{
    st_record *x = row;
    st_record_init(x, (uint32_t)sqlite3_column_int64(st, 0));
    x->warmup = (uint8_t)sqlite3_column_int(st, 1);
    const char *sn = (const char *)sqlite3_column_text(st, 2);
    x->status = ST_REQ_OK;
    for (int k = 0; sn && k < ST_REQ__COUNT; k++)
        if (!strcmp(sn, st_req_status_name((st_req_status)k)))
            x->status = (st_req_status)k;
    x->http_status = sqlite3_column_int(st, 3);
    x->scheduled = sqlite3_column_int64(st, 4);
    x->sent = sqlite3_column_int64(st, 5);
    x->first_byte = sqlite3_column_int64(st, 6);
    x->first_token = sqlite3_column_int64(st, 7);
    x->end = sqlite3_column_int64(st, 8);
    x->input_tokens = (uint32_t)sqlite3_column_int64(st, 9);
    x->output_requested = (uint32_t)sqlite3_column_int64(st, 10);
    x->output_tokens = (uint32_t)sqlite3_column_int64(st, 11);
    x->cached_tokens = (uint32_t)sqlite3_column_int64(st, 12);
    x->usage_reported = (uint8_t)sqlite3_column_int(st, 13);
    const uint8_t *b = sqlite3_column_blob(st, 14);
    int bl = sqlite3_column_bytes(st, 14);
    int bad = !b && sqlite3_column_type(st, 14) != SQLITE_NULL;
    for (int i = 0; b && i + 8 <= bl && !bad; i += 8) {
        uint64_t v = 0;
        for (int k = 7; k >= 0; k--)
            v = (v << 8) | b[i + k];
        bad = st_record_add_event(x, (st_ns)v) != 0;
    }
    const char *e = (const char *)sqlite3_column_text(st, 15);
    if (e)
        st_record_set_error(x, x->status, e, strlen(e));
    if (bad || (e && !x->error) || (!e && sqlite3_column_type(st, 15) != SQLITE_NULL)) {
        st_record_free(x);
        return -1;
    }
    if (sqlite3_column_type(st, 16) != SQLITE_NULL) {
        x->srv_prompt = sqlite3_column_int64(st, 16);
        x->srv_gen = sqlite3_column_int64(st, 17);
        x->srv_gen_n = (uint32_t)sqlite3_column_int64(st, 18);
    }
    x->prompt_reported = (uint32_t)sqlite3_column_int64(st, 19); /* NULL: 0, not reported */
    /* an older database has no first answer: a request's first token was its answer's */
    x->first_answer = sqlite3_column_type(st, 20) != SQLITE_NULL ? sqlite3_column_int64(st, 20) : x->first_token;
    x->reasoning_tokens = (uint32_t)sqlite3_column_int64(st, 21);
    x->session = (uint32_t)sqlite3_column_int64(st, 22); /* NULL: 0, not in a session */
    x->turn = (uint32_t)sqlite3_column_int64(st, 23);
    return 0;
}

static void free_records(void *rows, size_t n) { st_records_free(rows, n); }

int st_store_records_get(st_store *s, int64_t run_id, st_record **out, uint32_t *n)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(
            s->db,
            "SELECT id, warmup, status, http_status, scheduled, sent, first_byte, first_token, end_t,"
            " input_tokens, output_requested, output_tokens, cached_tokens, usage_reported, events, error,"
            " srv_prompt, srv_gen, srv_gen_n, prompt_reported, first_answer, reasoning_tokens, session, turn"
            " FROM requests WHERE run_id = ? ORDER BY id",
            -1, &st, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_int64(st, 1, run_id);
    size_t k = 0;
    int rc = read_rows(s, st, (void **)out, &k, sizeof **out, 64, read_record, free_records);
    *n = (uint32_t)k;
    return rc;
}

/* Reads a row of the metrics query (read_rows); out of memory: the name, its one copy, was not made. */
static int read_sample(sqlite3_stmt *st, void *row)
{
    st_metrics_sample *m = row;
    int bad = 0;
    m->t = sqlite3_column_double(st, 0);
    m->name = col_str(st, 1, &bad);
    m->value = col_dbl(st, 2);
    return bad ? -1 : 0;
}

static void free_samples(void *rows, size_t n) { st_store_samples_free(rows, (uint32_t)n); }

int st_store_samples_get(st_store *s, int64_t run_id, st_metrics_sample **out, uint32_t *n)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db, "SELECT t, name, value FROM metrics WHERE run_id = ? ORDER BY rowid", -1, &st,
                           NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_int64(st, 1, run_id);
    size_t k = 0;
    int rc = read_rows(s, st, (void **)out, &k, sizeof **out, 64, read_sample, free_samples);
    *n = (uint32_t)k;
    return rc;
}

void st_store_samples_free(st_metrics_sample *m, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        free((char *)m[i].name);
    free(m);
}

/* ---- merging shards ---- */

/* The tables a shard contributes, with the column that holds a run id (renumbered), if any. */
static const struct {
    const char *table;
    const char *run_col;
} MERGE_TABLES[] = {
    { "configs", NULL }, { "runs", "id" }, { "requests", "run_id" }, { "metrics", "run_id" }, { "meta", NULL },
};

#define MERGE_SQL_MAX 4096

/* The columns of schema.table, comma-joined in order; each prefixed by prefix (e.g. "r."),
 * skip left out. 0, or -1 (no such table, or too many columns for out). */
static int table_cols(st_store *s, const char *schema, const char *table, const char *skip, const char *prefix,
                      char *out, size_t n)
{
    char sql[256];
    snprintf(sql, sizeof sql, "PRAGMA %s.table_info(%s)", schema, table);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
        return -1;
    size_t off = 0;
    int cols = 0, rc = 0;
    out[0] = '\0';
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 1);
        if (!name || (skip && !strcmp(name, skip)))
            continue;
        int w = snprintf(out + off, n - off, "%s%s%s", cols ? ", " : "", prefix, name);
        if (w < 0 || (size_t)w >= n - off) {
            rc = -1;
            break;
        }
        off += (size_t)w;
        cols++;
    }
    sqlite3_finalize(st);
    return rc == 0 && cols > 0 ? 0 : -1;
}

static int exec_sql(st_store *s, const char *sql, const char *path, char *err, size_t errlen)
{
    char *e = NULL;
    if (sqlite3_exec(s->db, sql, NULL, NULL, &e) == SQLITE_OK)
        return 0;
    if ((sqlite3_extended_errcode(s->db) & 0xff) == SQLITE_READONLY)
        db_errmsg(s->db, path, err, errlen); /* with what to do about it */
    else
        snprintf(err, errlen, "%s: %s", path, e ? e : sqlite3_errmsg(s->db));
    sqlite3_free(e);
    return -1;
}

int st_store_merge_shard(st_store *s, const char *path, char *err, size_t errlen)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db, "ATTACH DATABASE ? AS shard", -1, &st, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "%s: %s", path, sqlite3_errmsg(s->db));
        return -1;
    }
    int rc = bind_str(st, 1, path) ? SQLITE_NOMEM : sqlite3_step(st) == SQLITE_DONE ? 0 : -1;
    sqlite3_finalize(st);
    if (rc) {
        snprintf(err, errlen, "%s: %s", path, rc == SQLITE_NOMEM ? "out of memory" : sqlite3_errmsg(s->db));
        return -1;
    }
    char mine[MERGE_SQL_MAX / 2], theirs[MERGE_SQL_MAX / 2], rest[MERGE_SQL_MAX / 2], sql[MERGE_SQL_MAX + 512];
    size_t nt = sizeof MERGE_TABLES / sizeof *MERGE_TABLES;
    /* Same tables with the same columns in the same order: a shard of another version of the
     * schema is refused rather than half copied. */
    for (size_t i = 0; i < nt && rc == 0; i++) {
        if (table_cols(s, "main", MERGE_TABLES[i].table, NULL, "", mine, sizeof mine) ||
            table_cols(s, "shard", MERGE_TABLES[i].table, NULL, "", theirs, sizeof theirs) || strcmp(mine, theirs)) {
            snprintf(err, errlen, "%s: table %s differs from this servetune's (written by another version?)", path,
                     MERGE_TABLES[i].table);
            rc = -1;
        }
    }
    if (rc == 0 && exec_sql(s, "BEGIN IMMEDIATE", path, err, errlen))
        rc = -1;
    int in_tx = rc == 0;
    /* Run ids continue after the runs already merged, in the shard's run order: a shard merged
     * alone, or shards merged in the spec's configuration order, number their runs as a
     * single-machine audit does. */
    long long base = 0;
    if (rc == 0 &&
        sqlite3_prepare_v2(s->db, "SELECT coalesce(max(id), 0) FROM main.runs", -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW)
            base = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    if (rc == 0) {
        snprintf(sql, sizeof sql,
                 "DROP TABLE IF EXISTS temp.st_idmap; CREATE TEMP TABLE st_idmap AS SELECT id AS old, %lld + "
                 "row_number() OVER (ORDER BY seq, id) AS new FROM shard.runs",
                 base);
        rc = exec_sql(s, sql, path, err, errlen);
    }
    for (size_t i = 0; i < nt && rc == 0; i++) {
        const char *t = MERGE_TABLES[i].table, *rcol = MERGE_TABLES[i].run_col;
        if (table_cols(s, "main", t, rcol, "x.", rest, sizeof rest) ||
            table_cols(s, "main", t, rcol, "", mine, sizeof mine)) {
            snprintf(err, errlen, "%s: table %s: too many columns", path, t);
            rc = -1;
            break;
        }
        if (!rcol)
            snprintf(sql, sizeof sql, "INSERT %sINTO main.%s(%s) SELECT %s FROM shard.%s x ORDER BY x.rowid",
                     !strcmp(t, "meta") ? "OR IGNORE " : "", t, mine, rest, t);
        else
            snprintf(sql, sizeof sql,
                     "INSERT INTO main.%s(%s, %s) SELECT m.new, %s FROM shard.%s x JOIN temp.st_idmap m ON m.old = "
                     "x.%s ORDER BY x.rowid",
                     t, rcol, mine, rest, t, rcol);
        rc = exec_sql(s, sql, path, err, errlen);
    }
    if (rc == 0)
        rc = exec_sql(s, "DROP TABLE temp.st_idmap", path, err, errlen);
    if (in_tx) {
        if (rc == 0)
            rc = exec_sql(s, "COMMIT", path, err, errlen);
        if (rc)
            exec(s, "ROLLBACK");
    }
    exec(s, "DETACH DATABASE shard");
    return rc;
}

int st_store_audit_put(st_store *s, const st_audit_row *a)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "INSERT OR REPLACE INTO audit(id, spec_hash, spec_path, spec_text, version, started, "
                           "finished, partial, note) VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?)",
                           -1, &st, NULL) != SQLITE_OK)
        return -1;
    int b = bind_str(st, 1, a->spec_hash) | bind_str(st, 2, a->spec_path) |
            bind_str(st, 3, a->spec_text ? a->spec_text : "") | bind_str(st, 4, a->version) | bind_str(st, 8, a->note);
    sqlite3_bind_int64(st, 5, a->started);
    if (a->finished)
        sqlite3_bind_int64(st, 6, a->finished);
    else
        sqlite3_bind_null(st, 6);
    sqlite3_bind_int(st, 7, a->partial);
    s->err[0] = '\0';
    int rc = b ? nomem(s) : sqlite3_step(st) == SQLITE_DONE ? 0 : -1;
    sqlite3_finalize(st);
    return rc;
}
