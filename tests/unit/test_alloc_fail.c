/* Allocation failures: each parser and the result store is run again and again with its N-th
 * allocation failing, for N = 1, 2, ... until a run makes no more allocations than N. Every run
 * must end cleanly: no crash, no leak (LeakSanitizer checks after each run under ASan), and
 * either an error with its message or a success whose results equal those of the run without
 * a failure (an allocation whose failure is absorbed must not change what is read).
 *
 * The allocator is replaced for the whole test binary: this file defines malloc, calloc,
 * realloc, strdup and strndup, which the dynamic linker prefers to the C library's (and to
 * ASan's, which they call), so that the allocations of libyaml, Jansson, SQLite and the C
 * library (fopen, ...) fail as well as servetune's own.
 *
 * ST_ALLOC_FAIL_TRACE=N prints the stack of the N-th allocation of each target when it fails
 * (build with -rdynamic, or read the addresses with addr2line). */
#include "harness.h"

#include <execinfo.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit/spec.h"
#include "audit/store.h"
#include "core/csv.h"
#include "core/json.h"
#include "emu/catalog.h"
#include "load/trace.h"
#include "plan/prices.h"

/* ---- the failing allocator ---- */

/* ASan's allocator (when the binary is built with it), else the C library's. */
extern void *__interceptor_malloc(size_t) __attribute__((weak));
extern void *__interceptor_calloc(size_t, size_t) __attribute__((weak));
extern void *__interceptor_realloc(void *, size_t) __attribute__((weak));
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern int __lsan_do_recoverable_leak_check(void) __attribute__((weak));
extern void __sanitizer_set_death_callback(void (*)(void)) __attribute__((weak));
extern void __lsan_disable(void) __attribute__((weak));
extern void __lsan_enable(void) __attribute__((weak));

static struct {
    long countdown; /* > 0: the allocation that brings it to 0 fails */
    long calls;     /* allocations since the count was armed */
    int fired;      /* the failure happened */
    const char *what;
    long n;
    long trace_n; /* ST_ALLOC_FAIL_TRACE=N: print where allocation N is made when it fails */
} inj;

/* Not instrumented: the dynamic linker allocates while ASan initialises, before its shadow
 * memory exists. */
#define ALLOCATOR __attribute__((no_sanitize("address", "undefined"), noinline))

ALLOCATOR static int fail_now(void)
{
    if (inj.countdown <= 0)
        return 0;
    inj.calls++;
    if (--inj.countdown == 0) {
        inj.fired = 1;
        if (inj.n == inj.trace_n) {
            void *pc[32];
            fprintf(stderr, "%s: allocation %ld fails here:\n", inj.what, inj.n);
            backtrace_symbols_fd(pc, backtrace(pc, 32), 2);
        }
        return 1;
    }
    return 0;
}

ALLOCATOR void *malloc(size_t n)
{
    if (fail_now())
        return NULL;
    return __interceptor_malloc ? __interceptor_malloc(n) : __libc_malloc(n);
}

ALLOCATOR void *calloc(size_t a, size_t b)
{
    if (fail_now())
        return NULL;
    return __interceptor_calloc ? __interceptor_calloc(a, b) : __libc_calloc(a, b);
}

ALLOCATOR void *realloc(void *p, size_t n)
{
    if (fail_now())
        return NULL;
    return __interceptor_realloc ? __interceptor_realloc(p, n) : __libc_realloc(p, n);
}

ALLOCATOR char *strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p)
        memcpy(p, s, n);
    return p;
}

ALLOCATOR char *strndup(const char *s, size_t max)
{
    size_t n = strnlen(s, max);
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

/* libyaml 0.2.5's loader leaks a mapping's pair stack when the document's node stack then cannot
 * grow (yaml_parser_load_mapping's error path frees the tag and anchor only): not servetune's to
 * fix. A document servetune forgot to delete would still show in every other test's leak check. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:yaml_parser_load\n"; }
const char *__lsan_default_options(void);
const char *__lsan_default_options(void) { return "print_suppressions=0"; }

static void say_where(void) { fprintf(stderr, "died in %s with allocation %ld failing\n", inj.what, inj.n); }

/* A leak check scans the whole heap (about 0.1 s under ASan): after each of the first LEAK_FIRST
 * runs of a target, then every LEAK_EVERY runs and after the last one. ST_ALLOC_FAIL_LEAKS=each
 * checks after every run, to name the allocation whose failure leaks. */
#define LEAK_FIRST 8
#define LEAK_EVERY 512

/* A target: runs once, 0 with *digest summarising what it read, or -1 with err. */
typedef int (*target_fn)(const void *arg, char *err, size_t errlen, uint64_t *digest);

static uint64_t mixin(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ULL; }

/* Runs fn with allocation 1, 2, ... failing until a run completes with fewer allocations. */
static void sweep(const char *what, target_fn fn, const void *arg)
{
    char err[1024];
    uint64_t want = 0, got;
    inj.what = what;
    inj.n = 0;
    if (__sanitizer_set_death_callback)
        __sanitizer_set_death_callback(say_where);
    const char *t = getenv("ST_ALLOC_FAIL_TRACE");
    inj.trace_n = t ? atol(t) : 0;
    if (inj.trace_n) {
        void *pc[2];
        if (__lsan_disable)
            __lsan_disable(); /* the unwinder's library stays loaded: not a leak */
        backtrace(pc, 2);     /* loads it before any allocation may fail */
        if (__lsan_enable)
            __lsan_enable();
    }
    if (fn(arg, err, sizeof err, &want) != 0)
        fail_msg("%s: fails without an allocation failure: %s", what, err);
    long absorbed = 0, first_absorbed = 0, last_check = 0;
    const char *leaks = getenv("ST_ALLOC_FAIL_LEAKS");
    int each = leaks && !strcmp(leaks, "each");
    for (long n = 1;; n++) {
        err[0] = '\0';
        got = 0;
        inj.n = n;
        inj.fired = 0;
        inj.calls = 0;
        inj.countdown = n;
        int rc = fn(arg, err, sizeof err, &got);
        inj.countdown = 0;
        /* a leak found is named by the range of allocations whose failure may have left it */
        if (__lsan_do_recoverable_leak_check && (each || n <= LEAK_FIRST || n % LEAK_EVERY == 0 || !inj.fired) &&
            __lsan_do_recoverable_leak_check())
            fail_msg("%s: memory leaked when allocation %ld failed (or one of the %ld before it since the last check)",
                     what, n, each || n <= LEAK_FIRST ? 0L : n - last_check - 1);
        if (each || n <= LEAK_FIRST || n % LEAK_EVERY == 0)
            last_check = n;
        if (!inj.fired) {
            if (rc != 0 || got != want)
                fail_msg("%s: the run with every allocation succeeding differs (%s)", what, rc ? err : "other results");
            printf("# %s: %ld allocations, each failed in turn: %ld errors with a message, %ld absorbed (the "
                   "first: %ld)\n",
                   what, n - 1, n - 1 - absorbed, absorbed, first_absorbed);
            break;
        }
        if (rc == 0 && got != want)
            fail_msg("%s: allocation %ld failed, yet it succeeded with other results", what, n);
        if (rc == 0) {
            if (!absorbed++)
                first_absorbed = n;
        } else if (err[0] == '\0')
            fail_msg("%s: allocation %ld failed without a message", what, n);
    }
}

/* ---- targets ---- */

static int json_target(const void *arg, char *err, size_t errlen, uint64_t *digest)
{
    const char *doc = arg;
    st_json_val v;
    if (st_json_parse(doc, strlen(doc), &v) != 0) {
        snprintf(err, errlen, "not JSON");
        return -1;
    }
    st_json_val x;
    if (st_json_get(&v, "choices[0].delta.content", &x) != 0) {
        snprintf(err, errlen, "no content");
        return -1;
    }
    *digest = mixin((uint64_t)x.len, (uint64_t)x.type);
    return 0;
}

static int model_config_target(const void *arg, char *err, size_t errlen, uint64_t *digest)
{
    const char *doc = arg;
    st_emu_model m;
    if (st_emu_model_parse_config(doc, strlen(doc), "Qwen/Qwen3-8B", &m, err, errlen) != 0)
        return -1;
    *digest = mixin((uint64_t)m.params, (uint64_t)m.max_position);
    return 0;
}

static int gpu_target(const void *arg, char *err, size_t errlen, uint64_t *digest)
{
    const char *doc = arg;
    st_emu_gpu g;
    if (st_emu_gpu_parse(doc, strlen(doc), &g, err, errlen) != 0)
        return -1;
    *digest = mixin((uint64_t)(g.mem_bytes), (uint64_t)g.bf16_flops);
    return 0;
}

static int gpu_file_target(const void *arg, char *err, size_t errlen, uint64_t *digest)
{
    st_emu_gpu g;
    if (st_emu_gpu_load_file(arg, &g, err, errlen) != 0)
        return -1;
    *digest = mixin((uint64_t)(g.mem_bytes), (uint64_t)g.bf16_flops);
    return 0;
}

static int csv_target(const void *arg, char *err, size_t errlen, uint64_t *digest)
{
    const char *text = arg;
    st_csv c;
    st_csv_init(&c, text, strlen(text));
    int rc;
    uint64_t h = 0;
    while ((rc = st_csv_next(&c, err, errlen)) == 1)
        for (int i = 0; i < c.n; i++)
            h = mixin(h, c.len[i]);
    st_csv_free(&c);
    *digest = h;
    return rc;
}

static int prices_target(const void *arg, char *err, size_t errlen, uint64_t *digest)
{
    const char *text = arg;
    st_prices p;
    if (st_prices_parse("prices.csv", text, strlen(text), &p, err, errlen) != 0)
        return -1;
    *digest = (uint64_t)p.n;
    st_prices_free(&p);
    return 0;
}

static int spec_target(const void *arg, char *err, size_t errlen, uint64_t *digest)
{
    const char *text = arg;
    st_spec s;
    if (st_spec_parse("spec.yaml", text, strlen(text), &s, err, errlen) != 0)
        return -1;
    *digest = mixin((uint64_t)s.n_configs, (uint64_t)s.n_rates);
    st_spec_free(&s);
    return 0;
}

/* A trace read into a workload (the reader, its format's row parser, the workload builder). */
static int trace_target(const void *arg, char *err, size_t errlen, uint64_t *digest)
{
    const char *text = arg;
    st_trace_load_opts o;
    st_trace_load_opts_default(&o);
    o.sessions = ST_TRACE_SESSIONS_FLAT;
    st_workload w;
    if (st_trace_load_buffer(text, strlen(text), "trace", &o, &w, NULL, NULL, err, errlen) != 0)
        return -1;
    uint64_t h = w.n;
    for (uint32_t i = 0; i < w.n; i++)
        h = mixin(mixin(h, w.items[i].input_len), w.items[i].output_len);
    st_workload_free(&w);
    *digest = h;
    return 0;
}

static int trace_file_target(const void *arg, char *err, size_t errlen, uint64_t *digest)
{
    st_trace_load_opts o;
    st_trace_load_opts_default(&o);
    st_workload w;
    if (st_trace_load(arg, &o, &w, NULL, NULL, err, errlen) != 0)
        return -1;
    *digest = w.n;
    st_workload_free(&w);
    return 0;
}

static void rm_store(const char *dir)
{
    char p[512];
    const char *files[] = { ST_STORE_FILE, ST_STORE_FILE "-wal", ST_STORE_FILE "-shm", ST_STORE_FILE "-journal" };
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
}

#define STORE_FAIL(s)                                                                                                  \
    do {                                                                                                               \
        snprintf(err, errlen, "%s", st_store_errmsg(s));                                                               \
        goto out;                                                                                                      \
    } while (0)

/* An audit written into a fresh store (its spec, a configuration, a run with its records and
 * metric samples), then read back from a second, read-only opening. */
static int store_target(const void *arg, char *err, size_t errlen, uint64_t *digest)
{
    const char *root = arg;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/audit", root);
    rm_store(dir);
    int rc = -1;
    st_store *s = NULL, *r = NULL;
    st_record recs[2];
    for (uint32_t i = 0; i < 2; i++)
        st_record_init(&recs[i], i);
    st_run_row *rows = NULL;
    int n_rows = 0;
    st_record *back = NULL;
    uint32_t n_back = 0;
    st_metrics_sample *ms = NULL;
    uint32_t n_ms = 0;
    st_audit_row a;
    int have_audit = 0;

    if (st_store_open(dir, &s, err, errlen) != 0)
        goto out;
    if (st_store_set_durable(s, 0) != 0)
        STORE_FAIL(s);
    const char *spec = "engine: {kind: emulator}\n";
    if (st_store_audit_begin(s, "a.yaml", spec, strlen(spec), "0.1", 0, err, errlen) != 0)
        goto out;
    st_config_row c = { .name = "baseline", .idx = 0, .status = "done", .startup_s = 1.5, .argv = "vllm serve m" };
    if (st_store_config_put(s, &c) != 0)
        STORE_FAIL(s);
    for (uint32_t i = 0; i < 2; i++) {
        recs[i].scheduled = 1000 * i;
        recs[i].sent = 1000 * i + 5;
        recs[i].first_token = 50000 + i;
        recs[i].end = 90000 + i;
        recs[i].output_tokens = 2;
        recs[i].input_tokens = 100;
        for (int e = 0; e < 2; e++)
            if (st_record_add_event(&recs[i], 50000 + i + e * 20000) != 0) {
                snprintf(err, errlen, "out of memory");
                goto out;
            }
    }
    st_metrics_sample samples[] = { { 0.5, "kv_cache_usage", 0.25 } };
    st_run_row run = { .config = "baseline",
                       .rate = 2,
                       .grid = 1,
                       .verdict = "pass",
                       .why = "all within the SLO",
                       .planned = 2,
                       .sent = 2,
                       .completed = 2,
                       .summary_json = "{\"x\": 1}" };
    st_store_hash("run-1", 5, run.run_key);
    if (st_store_run_put(s, &run, recs, 2, samples, 1) != 0)
        STORE_FAIL(s);
    if (st_store_audit_finish(s, 0, NULL) != 0)
        STORE_FAIL(s);
    st_store_close(s);
    s = NULL;

    if (st_store_open_read(dir, &r, err, errlen) != 0)
        goto out;
    int got = st_store_audit_get(r, &a);
    if (got < 0)
        STORE_FAIL(r);
    have_audit = got == 1;
    if (st_store_runs_get(r, NULL, &rows, &n_rows) != 0)
        STORE_FAIL(r);
    if (n_rows != 1) {
        snprintf(err, errlen, "%d runs read back", n_rows);
        goto out;
    }
    if (st_store_records_get(r, rows[0].id, &back, &n_back) != 0)
        STORE_FAIL(r);
    if (st_store_samples_get(r, rows[0].id, &ms, &n_ms) != 0)
        STORE_FAIL(r);
    uint64_t h = mixin(mixin(n_back, n_ms), (uint64_t)have_audit);
    for (uint32_t i = 0; i < n_back; i++)
        h = mixin(mixin(h, back[i].n_events), (uint64_t)back[i].end);
    *digest = mixin(h, rows[0].completed);
    rc = 0;
out:
    if (have_audit)
        st_audit_row_free(&a);
    st_records_free(back, n_back);
    if (ms)
        st_store_samples_free(ms, n_ms);
    if (rows)
        st_run_rows_free(rows, n_rows);
    for (uint32_t i = 0; i < 2; i++)
        st_record_free(&recs[i]);
    if (s)
        st_store_close(s);
    if (r)
        st_store_close(r);
    rm_store(dir);
    if (rc != 0 && err[0] == '\0')
        snprintf(err, errlen, "(no message)");
    return rc;
}

/* ---- samples ---- */

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static void json_scanner(void **state)
{
    (void)state;
    sweep("the JSON scanner", json_target,
          "{\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hello \\u00e9\"}}],\"usage\":null}");
}

static void model_config_json(void **state)
{
    (void)state;
    sweep("a model's config.json", model_config_target,
          "{\"hidden_size\":4096,\"num_hidden_layers\":36,\"num_attention_heads\":32,\"num_key_value_heads\":8,"
          "\"head_dim\":128,\"intermediate_size\":12288,\"max_position_embeddings\":40960,"
          "\"torch_dtype\":\"bfloat16\",\"vocab_size\":151936}");
}

static void gpu_catalog_file(void **state)
{
    (void)state;
    const char *kv = "# my card\nname = MI300X\nmemory_gib=191.5\nbf16_tflops = 1307\nfp8_tflops=2615\n"
                     "bandwidth_tbs=5.3\nlink_gbs=450\n";
    sweep("a GPU file (key = value)", gpu_target, kv);
    sweep("a GPU file (JSON)", gpu_target,
          "{\"name\":\"X\",\"memory_gib\":16,\"bf16_tflops\":100,\"bandwidth_tbs\":0.5,\"gemm_eff\":0.6}");
    char path[] = "/tmp/st_alloc_gpu.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, kv, strlen(kv)), (ssize_t)strlen(kv));
    close(fd);
    sweep("a GPU file read from disk", gpu_file_target, path);
    unlink(path);
}

static void csv_and_price_list(void **state)
{
    (void)state;
    sweep("the CSV reader", csv_target, "a,b,\"c, quoted\"\n1,2,\"x\"\"y\"\n3,4,\n");
    sweep("the price list", prices_target, read_text("data/gpu-prices.csv"));
}

static void spec_yaml(void **state)
{
    (void)state;
    sweep("an audit spec (YAML)", spec_target, read_text("examples/qwen3-8b-h100.yaml"));
}

static void traces(void **state)
{
    (void)state;
    sweep(
        "a servetune trace", trace_target,
        "# a comment\n"
        "{\"timestamp\": 0.0, \"input_tokens\": 300, \"output_tokens\": 30, \"prefix_group\": 1, \"prefix_len\": 200}\n"
        "{\"timestamp\": 0.35, \"input_ids\": [1201, 5512, 883, 14000], \"output_tokens\": 64}\n"
        "{\"timestamp\": 1.2, \"text\": \"Summarise the following text\", \"output_tokens\": 12, \"model\": \"m\"}\n"
        "{\"timestamp\": 2.0, \"session\": \"u42\", \"input_tokens\": 80, \"output_tokens\": 12}\n"
        "{\"timestamp\": 9.5, \"session\": \"u42\", \"turn\": 1, \"think_time\": 6.0, \"input_tokens\": 40, "
        "\"output_tokens\": 9}\n");
    sweep("a Mooncake trace", trace_target,
          "{\"timestamp\": 0, \"input_length\": 1500, \"output_length\": 50, \"hash_ids\": [0, 1, 2]}\n"
          "{\"timestamp\": 0, \"input_length\": 1200, \"output_length\": 49, \"hash_ids\": [0, 14, 15]}\n"
          "{\"timestamp\": 3052, \"input_length\": 900, \"output_length\": 52, \"hash_ids\": [46, 47]}\n");
    sweep("an Azure trace", trace_target,
          "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,4808,10\n"
          "2023-11-16 18:17:04.0319600,3180,8\n");
    sweep(
        "a BurstGPT trace", trace_target,
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,472,18,490,Conversation log\n"
        "45,ChatGPT,1087,0,1087,Conversation log\n118,GPT-4,417,276,693,API log\n");
    const char *litellm =
        "[{\"request_id\": \"c1\", \"startTime\": \"2025-01-15T10:20:30.500000Z\", \"endTime\": "
        "\"2025-01-15T10:20:32.000000Z\", \"prompt_tokens\": 100, \"completion_tokens\": 30, \"model_group\": \"q\", "
        "\"user\": \"u1\", \"metadata\": {\"user_api_key_team_id\": \"t1\"}, \"session_id\": \"s1\", \"status\": "
        "\"success\"},\n {\"request_id\": \"c2\", \"startTime\": \"2025-01-15T10:20:34Z\", \"endTime\": "
        "\"2025-01-15T10:20:35Z\", \"prompt_tokens\": 145, \"completion_tokens\": 12, \"model_group\": \"q\", "
        "\"session_id\": \"s1\", \"status\": \"success\"}]\n";
    sweep("a LiteLLM spend log (array)", trace_target, litellm);
    sweep("a LiteLLM spend log (rows per line)", trace_target,
          "{\"startTime\": \"2025-01-15T10:20:30Z\", \"prompt_tokens\": 100, \"completion_tokens\": 30, \"status\": "
          "\"success\"}\n{\"startTime\": \"2025-01-15T10:20:31Z\", \"prompt_tokens\": 10, \"completion_tokens\": 3, "
          "\"status\": \"failure\"}\n");
    sweep("a CSV trace with named columns", trace_target,
          "timestamp,input_tokens,output_tokens,model,session_id,status\n2025-03-01T12:00:00Z,1000,100,q,,success\n"
          "2025-03-01T12:00:00.25Z,200,20,q,,success\n");

    char path[] = "/tmp/st_alloc_trace.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, litellm, strlen(litellm)), (ssize_t)strlen(litellm));
    close(fd);
    sweep("a trace read from disk", trace_file_target, path);
    unlink(path);
}

static void store(void **state)
{
    (void)state;
    /* thousands of databases: in memory when the host has /dev/shm */
    char root[64];
    snprintf(root, sizeof root, "%s/st_alloc_store.XXXXXX", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    assert_non_null(mkdtemp(root));
    sweep("the result store", store_target, root);
    rmdir(root);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(json_scanner),
        cmocka_unit_test(model_config_json),
        cmocka_unit_test(gpu_catalog_file),
        cmocka_unit_test(csv_and_price_list),
        cmocka_unit_test(spec_yaml),
        cmocka_unit_test(traces),
        cmocka_unit_test(store),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
