#include "harness.h"

#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "audit/store.h"

static char dir[256];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/st_store_test.XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char p[512];
    const char *files[] = { "results.sqlite", "results.sqlite-wal", "results.sqlite-shm" };
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
    return 0;
}

static void hash_is_sha256(void **state)
{
    (void)state;
    char h[65];
    st_store_hash("abc", 3, h);
    assert_string_equal(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

static void audit_begin_resume_rules(void **state)
{
    (void)state;
    st_store *s;
    char err[256];
    assert_int_equal(st_store_open(dir, &s, err, sizeof err), 0);
    const char *spec = "engine: {}\n";
    assert_int_equal(st_store_audit_begin(s, "a.yaml", spec, strlen(spec), "0.1", 0, err, sizeof err), 0);
    /* a second fresh audit in the same folder is refused */
    assert_int_equal(st_store_audit_begin(s, "a.yaml", spec, strlen(spec), "0.1", 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "--resume"));
    /* resuming with another spec is refused */
    assert_int_equal(st_store_audit_begin(s, "a.yaml", "x", 1, "0.1", 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "spec changed"));
    assert_int_equal(st_store_audit_begin(s, "a.yaml", spec, strlen(spec), "0.1", 1, err, sizeof err), 0);
    st_audit_row a;
    assert_int_equal(st_store_audit_get(s, &a), 1);
    assert_int_equal(a.partial, 1);
    assert_string_equal(a.spec_text, spec);
    st_audit_row_free(&a);
    assert_int_equal(st_store_audit_finish(s, 1, "interrupted by SIGINT"), 0);
    assert_int_equal(st_store_audit_get(s, &a), 1);
    assert_int_equal(a.partial, 1);
    assert_string_equal(a.note, "interrupted by SIGINT");
    assert_true(a.finished > 0);
    st_audit_row_free(&a);
    st_store_close(s);
}

static void runs_records_samples_round_trip(void **state)
{
    (void)state;
    st_store *s;
    char err[256];
    assert_int_equal(st_store_open(dir, &s, err, sizeof err), 0);
    st_config_row c = { .name = "fp8-kv", .idx = 1, .status = "done", .startup_s = 12.5, .argv = "vllm serve m" };
    assert_int_equal(st_store_config_put(s, &c), 0);
    st_config_row c0 = { .name = "baseline",
                         .idx = 0,
                         .status = "failed",
                         .startup_s = NAN,
                         .failure_class = "oom",
                         .log_tail = "CUDA out of memory\n" };
    assert_int_equal(st_store_config_put(s, &c0), 0);

    st_record recs[3];
    for (uint32_t i = 0; i < 3; i++) {
        st_record_init(&recs[i], i);
        recs[i].scheduled = 1000 * i;
        recs[i].sent = 1000 * i + 5;
        recs[i].first_token = 50000 + i;
        recs[i].end = 90000 + i;
        recs[i].output_tokens = 3;
        recs[i].input_tokens = 100;
        for (int e = 0; e < 3; e++)
            st_record_add_event(&recs[i], 50000 + i + e * 20000);
    }
    recs[1].srv_prompt = 12345678; /* the server's timings (llama.cpp), ns */
    recs[1].srv_gen = 98765432;
    recs[1].srv_gen_n = 3;
    recs[1].prompt_reported = 104;                      /* as the server counted the prompt (usage) */
    recs[1].first_answer = recs[1].first_token + 20000; /* a reasoning model's first answer token */
    recs[1].reasoning_tokens = 1;
    recs[0].first_answer = -1; /* all reasoning: no answer token */
    recs[1].session = 7;       /* a multi-turn session's third turn */
    recs[1].turn = 2;
    recs[2].status = ST_REQ_TIMEOUT;
    recs[2].end = 1LL << 40;
    st_record_set_error(&recs[2], ST_REQ_TIMEOUT, "timed out", 9);
    st_metrics_sample ms[] = { { 0.5, "kv_cache_usage", 0.25 }, { 1.5, "num_running", 7 } };

    st_run_row r = { .config = "fp8-kv",
                     .seq = 0,
                     .rate = INFINITY,
                     .grid = 1,
                     .verdict = "fail",
                     .why = "1 of 3 requests did not complete",
                     .planned = 3,
                     .sent = 3,
                     .completed = 2,
                     .failed = 1,
                     .duration_s = 2.0,
                     .delivered_rps = 1.0,
                     .output_tps = 3.0,
                     .sustained_rps = NAN,
                     .worst_ratio = INFINITY,
                     .ttft_p95_ms = 50.2,
                     .n_terms = 2,
                     .term_ms = { 50.2, 20.01 } };
    st_store_hash("run-1", 5, r.run_key);
    assert_int_equal(st_store_run_put(s, &r, recs, 3, ms, 2), 0);
    assert_true(r.id > 0);

    st_run_row g;
    assert_int_equal(st_store_run_find(s, r.run_key, &g), 1);
    assert_true(isinf(g.rate));
    assert_true(isinf(g.worst_ratio));
    assert_true(isnan(g.sustained_rps));
    assert_string_equal(g.verdict, "fail");
    assert_int_equal(g.completed, 2);
    assert_int_equal(g.n_terms, 2);
    assert_near(g.term_ms[1], 20.01, 1e-12);
    st_record *back;
    uint32_t nb;
    assert_int_equal(st_store_records_get(s, g.id, &back, &nb), 0);
    assert_int_equal(nb, 3);
    assert_int_equal(back[1].n_events, 3);
    assert_int_equal(st_record_event(&back[1], 2), 50001 + 40000);
    assert_int_equal(back[2].status, ST_REQ_TIMEOUT);
    assert_int_equal(back[2].end, 1LL << 40);
    assert_string_equal(back[2].error, "timed out");
    assert_int_equal(back[0].sent, 5);
    assert_int_equal(back[1].srv_prompt, 12345678);
    assert_int_equal(back[1].srv_gen, 98765432);
    assert_int_equal(back[1].srv_gen_n, 3);
    assert_int_equal(back[0].srv_prompt, -1); /* not reported */
    assert_int_equal(back[0].srv_gen, -1);
    assert_int_equal(back[1].prompt_reported, 104);
    assert_int_equal(back[0].prompt_reported, 0); /* not reported */
    assert_int_equal(back[1].first_answer, 50001 + 20000);
    assert_int_equal(back[1].reasoning_tokens, 1);
    assert_int_equal(back[0].first_answer, -1);
    assert_int_equal(back[1].session, 7);
    assert_int_equal(back[1].turn, 2);
    assert_int_equal(back[0].session, 0); /* not in a session */
    st_records_free(back, nb);
    st_metrics_sample *mb;
    uint32_t nm;
    assert_int_equal(st_store_samples_get(s, g.id, &mb, &nm), 0);
    assert_int_equal(nm, 2);
    assert_string_equal(mb[1].name, "num_running");
    assert_near(mb[0].value, 0.25, 0);
    st_store_samples_free(mb, nm);
    int64_t old_id = g.id;
    st_run_row_free(&g);

    /* replacing the run by key drops the old records and samples */
    r.verdict = "pass";
    assert_int_equal(st_store_run_put(s, &r, recs, 1, NULL, 0), 0);
    (void)old_id;
    assert_int_equal(st_store_records_get(s, r.id, &back, &nb), 0);
    assert_int_equal(nb, 1);
    st_record_free(&back[0]);
    free(back);
    assert_int_equal(st_store_samples_get(s, r.id, &mb, &nm), 0);
    assert_int_equal(nm, 0);
    free(mb);

    st_run_row r2 = { .config = "baseline", .seq = 0, .rate = 2, .grid = 1, .verdict = "pass", .planned = 1 };
    st_store_hash("run-2", 5, r2.run_key);
    assert_int_equal(st_store_run_put(s, &r2, NULL, 0, NULL, 0), 0);
    st_run_row *rows;
    int n;
    assert_int_equal(st_store_runs_get(s, NULL, &rows, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(rows[0].config, "baseline"); /* by config index */
    assert_string_equal(rows[1].verdict, "pass");
    st_run_rows_free(rows, n);
    assert_int_equal(st_store_run_find(s, "nope", &g), 0);

    st_config_row *cr;
    assert_int_equal(st_store_configs_get(s, &cr, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(cr[0].failure_class, "oom");
    assert_true(isnan(cr[0].startup_s));
    assert_near(cr[1].startup_s, 12.5, 0);
    st_config_rows_free(cr, n);
    for (int i = 0; i < 3; i++)
        st_record_free(&recs[i]);
    st_store_close(s);

    /* everything survives closing and reopening */
    assert_int_equal(st_store_open(dir, &s, err, sizeof err), 0);
    assert_int_equal(st_store_runs_get(s, "fp8-kv", &rows, &n), 0);
    assert_int_equal(n, 1);
    st_run_rows_free(rows, n);
    st_store_close(s);
}

/* A database written before the requests had server timings gets the columns on open, keeps
 * its rows, and takes new ones. */
static void old_database_gets_timing_columns(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/results.sqlite", dir);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(
        sqlite3_exec(db,
                     "CREATE TABLE runs(id INTEGER PRIMARY KEY, config TEXT NOT NULL, seq INTEGER NOT NULL,"
                     " rate REAL, grid INTEGER NOT NULL, run_key TEXT NOT NULL UNIQUE, verdict TEXT NOT NULL,"
                     " why TEXT, stopped_early INTEGER NOT NULL, planned INTEGER, sent INTEGER,"
                     " completed INTEGER, failed INTEGER, duration_s REAL, delivered_rps REAL,"
                     " output_tps REAL, sustained_rps REAL, offered_rps_achieved REAL, worst_ratio REAL,"
                     " ttft_p50_ms REAL, ttft_p95_ms REAL, ttft_p99_ms REAL, tpot_p50_ms REAL,"
                     " tpot_p95_ms REAL, tpot_p99_ms REAL, itl_p95_ms REAL, e2e_p95_ms REAL,"
                     " lag_p99_ms REAL, terms TEXT, client_limited INTEGER, summary TEXT, started INTEGER,"
                     " ended INTEGER);"
                     "INSERT INTO runs(id, config, seq, grid, run_key, verdict, stopped_early)"
                     " VALUES (1, 'base', 0, 1, 'k', 'pass', 0);"
                     "CREATE TABLE requests(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
                     " id INTEGER NOT NULL, warmup INTEGER, status TEXT, http_status INTEGER,"
                     " scheduled INTEGER, sent INTEGER, first_byte INTEGER, first_token INTEGER,"
                     " end_t INTEGER, input_tokens INTEGER, output_requested INTEGER,"
                     " output_tokens INTEGER, cached_tokens INTEGER, usage_reported INTEGER, events BLOB,"
                     " error TEXT, PRIMARY KEY (run_id, id));"
                     "INSERT INTO requests(run_id, id, status, scheduled, sent, first_token, end_t)"
                     " VALUES (1, 0, 'ok', 0, 5, 100, 200);",
                     NULL, NULL, NULL),
        SQLITE_OK);
    sqlite3_close(db);
    st_store *s;
    char err[256];
    assert_int_equal(st_store_open(dir, &s, err, sizeof err), 0);
    st_record *back;
    uint32_t nb;
    assert_int_equal(st_store_records_get(s, 1, &back, &nb), 0);
    assert_int_equal(nb, 1);
    assert_int_equal(back[0].first_token, 100);
    assert_int_equal(back[0].srv_prompt, -1);
    assert_int_equal(back[0].first_answer, 100); /* not stored then: the first token was the answer's */
    assert_int_equal(back[0].prompt_reported, 0);
    assert_int_equal(back[0].session, 0); /* not stored then */
    st_record_free(&back[0]);
    free(back);
    st_store_close(s);
    /* a second open finds the columns there */
    assert_int_equal(st_store_open(dir, &s, err, sizeof err), 0);
    st_store_close(s);
}

static void open_fails_cleanly(void **state)
{
    (void)state;
    st_store *s;
    char err[256] = "";
    assert_int_equal(st_store_open("/proc/nonexistent/x", &s, err, sizeof err), -1);
    assert_null(s);
    assert_true(strlen(err) > 0);
}

/* Opening to read never creates or writes: a missing folder or file, a dangling symlink (its target
 * is not created), a 0-byte file and another program's SQLite file are refused by name and left
 * as they were; a servetune database opens read-only. */
static void reading_never_creates_or_writes(void **state)
{
    (void)state;
    st_store *s = NULL;
    char err[512] = "", p[600], tgt[600];
    /* a folder that does not exist: not made */
    snprintf(p, sizeof p, "%s/none", dir);
    assert_int_equal(st_store_open_read(p, &s, err, sizeof err), -1);
    struct stat st;
    assert_int_equal(stat(p, &st), -1);
    /* a dangling symlink: its target is not created */
    snprintf(p, sizeof p, "%s/results.sqlite", dir);
    snprintf(tgt, sizeof tgt, "%s/elsewhere.sqlite", dir);
    assert_int_equal(symlink(tgt, p), 0);
    assert_int_equal(st_store_open_read(dir, &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "No such file"));
    assert_int_equal(stat(tgt, &st), -1);
    unlink(p);
    /* a 0-byte file: refused by name, still 0 bytes */
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(st_store_open_read(dir, &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "results.sqlite: empty (0 bytes), not a servetune results database"));
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_size, 0);
    /* the same file opened to merge it as a shard: refused, not given tables */
    assert_int_equal(st_store_open_file(p, ST_STORE_ROLLBACK | ST_STORE_EXISTING, &s, err, sizeof err), -1);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_size, 0);
    unlink(p);
    /* another program's SQLite file: refused for reading and for writing, its tables unchanged */
    sqlite3 *db;
    assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "CREATE TABLE t(x); INSERT INTO t VALUES (1);", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(st_store_open_read(dir, &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "an SQLite database without servetune's tables"));
    assert_int_equal(st_store_open(dir, &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "without servetune's tables"));
    assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
    sqlite3_stmt *q;
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master", -1, &q, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(q, 0), 1);
    sqlite3_finalize(q);
    sqlite3_close(db);
    unlink(p);
    /* text that is not a database */
    f = fopen(p, "w");
    fputs("hello, not a database, long enough to be read as a header............................................"
          "..........",
          f);
    fclose(f);
    assert_int_equal(st_store_open_read(dir, &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "not an SQLite database"));
    unlink(p);
    /* servetune's own: opened read-only (a write fails) */
    assert_int_equal(st_store_open(dir, &s, err, sizeof err), 0);
    st_store_close(s);
    assert_int_equal(st_store_open_read(dir, &s, err, sizeof err), 0);
    assert_int_equal(st_store_meta_put(s, "k", "v"), -1);
    st_store_close(s);
}

/* With secrets set, every text the store writes has them removed: a request's error (a server
 * that echoed the key), a failure detail and log tail, the command line, the engine facts, a run's
 * why, a note, a meta value. */
static void secrets_never_reach_the_database(void **state)
{
    (void)state;
    const char *key = "sk-store-test-4f2a";
    st_store *s;
    char err[256];
    assert_int_equal(st_store_open(dir, &s, err, sizeof err), 0);
    st_secrets sec = { 0 };
    assert_int_equal(st_secrets_add(&sec, key), 0);
    st_store_set_secrets(s, &sec);
    assert_int_equal(st_store_audit_begin(s, "spec.yaml", "x: 1", 4, "test", 0, err, sizeof err), 0);
    st_config_row c = { .name = "baseline",
                        .status = "failed",
                        .startup_s = NAN,
                        .failure_class = "crash",
                        .failure_detail = "crash: bad key sk-store-test-4f2a",
                        .log_tail = "args: --api-key sk-store-test-4f2a\n",
                        .argv = "vllm serve m --api-key sk-store-test-4f2a",
                        .facts = "{\"engine_version\":\"sk-store-test-4f2a\"}" };
    assert_int_equal(st_store_config_put(s, &c), 0);
    st_record rec;
    st_record_init(&rec, 0);
    const char *echo = "HTTP 401: invalid key Bearer sk-store-test-4f2a";
    st_record_set_error(&rec, ST_REQ_HTTP_STATUS, echo, strlen(echo));
    st_run_row r = { .config = "baseline",
                     .rate = 1,
                     .grid = 1,
                     .verdict = "fail",
                     .why = "key sk-store-test-4f2a refused",
                     .planned = 1,
                     .sent = 1,
                     .failed = 1 };
    memset(r.run_key, 'a', 64);
    assert_int_equal(st_store_run_put(s, &r, &rec, 1, NULL, 0), 0);
    st_record_free(&rec);
    assert_int_equal(st_store_meta_put(s, "model_note", "with sk-store-test-4f2a"), 0);
    assert_int_equal(st_store_audit_finish(s, 1, "stopped: sk-store-test-4f2a"), 0);
    st_store_close(s);
    st_secrets_free(&sec);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "grep -rqa -- '%s' '%s'", key, dir);
    assert_int_not_equal(system(cmd), 0);
    assert_int_equal(st_store_open(dir, &s, err, sizeof err), 0);
    st_record *back;
    uint32_t n;
    assert_int_equal(st_store_records_get(s, r.id, &back, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(back[0].error, "HTTP 401: invalid key Bearer ***");
    st_record_free(&back[0]);
    free(back);
    st_store_close(s);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(hash_is_sha256),
        cmocka_unit_test_setup_teardown(audit_begin_resume_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(runs_records_samples_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(old_database_gets_timing_columns, setup, teardown),
        cmocka_unit_test(open_fails_cleanly),
        cmocka_unit_test_setup_teardown(reading_never_creates_or_writes, setup, teardown),
        cmocka_unit_test_setup_teardown(secrets_never_reach_the_database, setup, teardown),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
