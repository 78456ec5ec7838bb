/* servetune trace cost on a two-tenant workload (tenant A: long prompts, short answers; B: short
 * prompts, long answers), as a child process. The ground truth is computed here, apart from the
 * command: the engine model is driven step by step on its own virtual clock, and each step's
 * duration is split over its sequences from first principles (FLOPs when the step is
 * compute-bound, bytes read and written when it is memory-bound: the weights by scheduled
 * tokens, each sequence's KV cache by its own context). Each tenant's model-based share must be
 * within 5 % of that truth; the flat per-token and per-second splits are printed beside it.
 * Also: a bill with idle hours reconciled to the cent, batch events stamped with the bucket. */
#include "harness.h"

#include <ftw.h>
#include <jansson.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "emu/catalog.h"
#include "emu/config.h"
#include "emu/engine.h"

#define N_REQ 300
#define RATE 2.5        /* requests per second */
#define T0 1796032800.0 /* 2026-11-30T10:00:00Z */

static char dir[] = "/tmp/st-cost-XXXXXX";

typedef struct req {
    double t;
    uint32_t in, out;
    int tenant; /* 0 A, 1 B */
} req;

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

static void workload(req *r)
{
    uint64_t s = 42;
    double t = 0;
    for (int i = 0; i < N_REQ; i++) {
        double u = ((double)lcg(&s) + 1) / 2147483649.0;
        t += -log(u) / RATE;
        r[i].t = t;
        r[i].tenant = (int)(lcg(&s) % 2);
        if (r[i].tenant == 0) {
            r[i].in = 3000 + (uint32_t)(lcg(&s) % 2000);
            r[i].out = 10 + (uint32_t)(lcg(&s) % 20);
        } else {
            r[i].in = 50 + (uint32_t)(lcg(&s) % 100);
            r[i].out = 400 + (uint32_t)(lcg(&s) % 300);
        }
    }
}

static void write_log(const char *path, const req *r)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "[\n");
    for (int i = 0; i < N_REQ; i++) {
        time_t sec = (time_t)floor(T0 + r[i].t);
        struct tm tm;
        gmtime_r(&sec, &tm);
        char ts[64];
        strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
        fprintf(f,
                "%s{\"startTime\": \"%s.%06dZ\", \"prompt_tokens\": %u, \"completion_tokens\": %u, \"model\": "
                "\"qwen3-8b\", \"status\": \"success\", \"user\": \"%s\", \"metadata\": {\"feature\": \"%s\"}}\n",
                i ? "," : "", ts, (int)((T0 + r[i].t - floor(T0 + r[i].t)) * 1e6), r[i].in, r[i].out,
                r[i].tenant ? "tenant-B" : "tenant-A", r[i].tenant ? "chat" : "summarise");
    }
    fprintf(f, "]\n");
    fclose(f);
}

static st_ns vnow(void *ctx) { return *(st_ns *)ctx; }

/* Per-tenant GPU seconds from the engine model's own steps, split from first principles. */
static void ground_truth(const req *r, double truth[2])
{
    char err[512];
    st_emu_gpu g;
    st_emu_model m;
    assert_int_equal(st_emu_gpu_find("H100", &g, err, sizeof err), 0);
    assert_int_equal(st_emu_model_find("Qwen/Qwen3-8B", &m, err, sizeof err), 0);
    st_emu_config c;
    st_emu_config_init(&c, &g, &m);
    st_ns now = 0;
    st_clock clk = { vnow, &now };
    st_emu_engine *e;
    if (st_emu_engine_new(&c, clk, &e, NULL, err, sizeof err))
        fail_msg("%s", err);
    const st_emu_config *rc = st_emu_engine_config(e);
    double wbytes = st_emu_model_weight_bytes(&rc->model, rc->weight_dtype);
    double kvtok = st_emu_model_kv_bytes_per_token(&rc->model, rc->kv_dtype);
    double attn = 4.0 * rc->model.layers * rc->model.heads * rc->model.head_dim;
    static uint32_t ids[8192];
    static double fl[1024], by[1024];
    int next = 0;
    truth[0] = truth[1] = 0;
    for (uint64_t guard = 0; guard < 10000000; guard++) {
        while (next < N_REQ && (st_ns)(r[next].t * 1e9) <= now) {
            for (uint32_t k = 0; k < r[next].in; k++) /* a prompt of its own: no prefix shared */
                ids[k] = 1000 + (uint32_t)(((uint64_t)(next + 1) * 2654435761u + k * 40503u) % 30000);
            st_emu_req_params p = { .id = (uint64_t)next + 1,
                                    .ids = ids,
                                    .n_ids = r[next].in,
                                    .max_tokens = r[next].out,
                                    .ignore_eos = 1,
                                    .arrival = (st_ns)(r[next].t * 1e9) };
            assert_int_equal(st_emu_add_request(e, &p, err, sizeof err), ST_EMU_ADD_OK);
            next++;
        }
        st_emu_step_result res;
        int s = st_emu_has_work(e) ? st_emu_step(e, &res) : 1;
        assert_true(s >= 0);
        if (s == 0) {
            assert_true(res.seqs <= 1024);
            double dur = (double)res.duration / 1e9, sf = 0, sb = 0;
            for (uint32_t k = 0; k < res.seqs; k++) {
                const st_emu_seq_work *w = &res.work[k];
                double nn = w->new_tokens, ctx = w->context;
                fl[k] = 2.0 * rc->model.active_params * nn + attn * (nn * ctx + nn * (nn + 1) / 2.0);
                by[k] = wbytes * nn / res.tokens + kvtok * (ctx + nn);
                sf += fl[k];
                sb += by[k];
            }
            int compute = res.compute_s >= res.memory_s;
            for (uint32_t k = 0; k < res.seqs; k++)
                truth[r[res.work[k].id - 1].tenant] += dur * (compute ? fl[k] / sf : by[k] / sb);
            now = res.start + res.duration;
            continue;
        }
        st_ns t = st_emu_has_work(e) ? st_emu_next_ready(e) : -1;
        st_ns a = next < N_REQ ? (st_ns)(r[next].t * 1e9) : -1;
        if (t < 0 && a < 0)
            break;
        st_ns to = t < 0 ? a : (a < 0 || t < a ? t : a);
        now = to > now ? to : now + 1;
    }
    assert_int_equal(next, N_REQ);
    assert_false(st_emu_has_work(e));
    st_emu_engine_free(e);
}

static json_t *run_cost(const char *log, const char *json_out, const char *extra1, const char *extra2,
                        const char *extra3)
{
    static char out[1 << 16];
    char *argv[20] = { (char *)st_test_bin(),
                       "trace",
                       "cost",
                       (char *)log,
                       "--model",
                       "Qwen/Qwen3-8B",
                       "--gpu",
                       "H100",
                       "--by",
                       "user",
                       "--json",
                       (char *)json_out };
    int n = 12;
    if (extra1)
        argv[n++] = (char *)extra1;
    if (extra2)
        argv[n++] = (char *)extra2;
    if (extra3)
        argv[n++] = (char *)extra3;
    argv[n] = NULL;
    int st = st_test_capture(argv, out, sizeof out);
    if (st != 0)
        fail_msg("servetune trace cost exited %d:\n%s", st, out);
    print_message("%s", out);
    json_error_t je;
    json_t *j = json_load_file(json_out, 0, &je);
    assert_non_null(j);
    return j;
}

static void two_tenants(void **state)
{
    (void)state;
    static req r[N_REQ];
    workload(r);
    char log[256], js[256];
    snprintf(log, sizeof log, "%s/log.json", dir);
    snprintf(js, sizeof js, "%s/cost.json", dir);
    write_log(log, r);
    double truth[2];
    ground_truth(r, truth);
    json_t *j = run_cost(log, js, NULL, NULL, NULL);
    json_t *ts = json_object_get(j, "tenants");
    assert_int_equal(json_array_size(ts), 2);
    double tot = truth[0] + truth[1];
    for (size_t i = 0; i < 2; i++) {
        json_t *t = json_array_get(ts, i);
        const char *name = json_string_value(json_object_get(t, "tenant"));
        int k = !strcmp(name, "tenant-B");
        double want = truth[k] / tot;
        double model = json_real_value(json_object_get(t, "share_model"));
        double tok = json_real_value(json_object_get(t, "share_tokens"));
        double dur = json_real_value(json_object_get(t, "share_duration"));
        print_message("%s: truth %.2f%%, model-based %.2f%% (%+.1f%% of the truth), per-token %.2f%% (%+.1f%%), "
                      "per-second %.2f%% (%+.1f%%)\n",
                      name, 100 * want, 100 * model, 100 * (model / want - 1), 100 * tok, 100 * (tok / want - 1),
                      100 * dur, 100 * (dur / want - 1));
        assert_near(model, want, 0.05 * want);
    }
    /* the tenants' GPU seconds add up to the engine's busy time, idle apart */
    double g = 0;
    for (size_t i = 0; i < 2; i++)
        g += json_real_value(json_object_get(json_array_get(ts, i), "gpu_s"));
    assert_near(g, json_real_value(json_object_get(j, "busy_s")), 1e-3);
    assert_near(g, tot, 0.02 * tot); /* the replay's steps are the engine's steps */
    json_decref(j);
}

static void bill_to_the_cent(void **state)
{
    (void)state;
    static req r[N_REQ];
    workload(r);
    char log[256], js[256], bill[256], ev[256], csv[256];
    snprintf(log, sizeof log, "%s/log.json", dir);
    snprintf(js, sizeof js, "%s/bill-cost.json", dir);
    snprintf(bill, sizeof bill, "%s/bill.csv", dir);
    snprintf(ev, sizeof ev, "%s/events.json", dir);
    snprintf(csv, sizeof csv, "%s/lines.csv", dir);
    write_log(log, r);
    FILE *f = fopen(bill, "w");
    assert_non_null(f);
    /* 09:00 before the log (idle), 10:00 the log, 11:00 after it (idle) */
    fprintf(f, "time,amount\n2026-11-30T09:00:00Z,2.69\n2026-11-30T10:00:00Z,3.01\n2026-11-30T11:00:00Z,0.99\n");
    fclose(f);
    static char out[1 << 16];
    char *argv[] = { (char *)st_test_bin(),
                     "trace",
                     "cost",
                     log,
                     "--model",
                     "Qwen/Qwen3-8B",
                     "--gpu",
                     "H100",
                     "--by",
                     "feature",
                     "--bill",
                     bill,
                     "--json",
                     js,
                     "--events",
                     ev,
                     "--csv",
                     csv,
                     NULL };
    int st = st_test_capture(argv, out, sizeof out);
    if (st != 0)
        fail_msg("exit %d:\n%s", st, out);
    json_error_t je;
    json_t *j = json_load_file(js, 0, &je);
    assert_non_null(j);
    json_t *b = json_object_get(j, "bill"), *lines = json_object_get(b, "lines");
    assert_int_equal(json_integer_value(json_object_get(b, "uncovered_buckets")), 2);
    json_int_t per[3] = { 0, 0, 0 };
    const char *starts[3] = { "2026-11-30T09:00:00Z", "2026-11-30T10:00:00Z", "2026-11-30T11:00:00Z" };
    int tenants_in_log_hour = 0;
    for (size_t i = 0; i < json_array_size(lines); i++) {
        json_t *l = json_array_get(lines, i);
        const char *bs = json_string_value(json_object_get(l, "bucket_start"));
        for (int k = 0; k < 3; k++)
            if (!strcmp(bs, starts[k])) {
                per[k] += json_integer_value(json_object_get(l, "cents"));
                if (k != 1)
                    assert_true(json_is_true(json_object_get(l, "idle")));
                else if (!json_is_true(json_object_get(l, "idle")))
                    tenants_in_log_hour++;
            }
    }
    assert_int_equal(per[0], 269);
    assert_int_equal(per[1], 301);
    assert_int_equal(per[2], 99);
    assert_int_equal(tenants_in_log_hour, 2);
    json_decref(j);
    /* one event per tenant and bucket, stamped with the bucket */
    j = json_load_file(ev, 0, &je);
    assert_non_null(j);
    json_t *batch = json_object_get(j, "batch");
    assert_int_equal(json_array_size(batch), 5); /* idle at 09, summarise + chat + idle at 10, idle at 11 */
    for (size_t i = 0; i < json_array_size(batch); i++) {
        const char *t = json_string_value(json_object_get(json_array_get(batch, i), "timestamp"));
        assert_true(!strcmp(t, starts[0]) || !strcmp(t, starts[1]) || !strcmp(t, starts[2]));
    }
    json_decref(j);
    assert_true(file_has(csv, "2026-11-30T10:00:00Z,3600,summarise,"));
}

/* servetune predict of a trace that names tenants: report.json carries "who_pays" (the same
 * split as the command), report.md and report.html show the section. */
static void predict_who_pays(void **state)
{
    (void)state;
    static req r[N_REQ];
    workload(r);
    char log[256], spec[256], out_dir[256], p[320];
    snprintf(log, sizeof log, "%s/log.json", dir);
    snprintf(spec, sizeof spec, "%s/spec.yaml", dir);
    snprintf(out_dir, sizeof out_dir, "%s/pred", dir);
    write_log(log, r);
    FILE *f = fopen(spec, "w");
    assert_non_null(f);
    fprintf(f, "engine: {kind: emulator, model: Qwen/Qwen3-8B, flags: [--gpu, H100]}\n"
               "hardware: {gpu: H100, gpus_per_replica: 1, price_per_gpu_hour: 2.0}\npeak_rate: 10\n"
               "workload: {trace: log.json, requests_per_rate: 60}\nrates: [1, 2]\nwarmup_requests: 2\n"
               "slo: {ttft_p95_ms: 5000, tpot_p95_ms: 100}\nsearch: {mode: burst}\n"
               "traffic:\n  hourly_rps: [0, 0, 0, 0, 0, 0, 1, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 1, 1, 0, 0]\n"
               "  scale_up_delay: 0s\n");
    fclose(f);
    static char out[1 << 16];
    char *argv[] = { (char *)st_test_bin(), "predict", spec, "-o", out_dir, "-q", NULL };
    int st = st_test_capture(argv, out, sizeof out);
    if (st != 0)
        fail_msg("predict exited %d:\n%s", st, out);
    snprintf(p, sizeof p, "%s/report.json", out_dir);
    json_error_t je;
    json_t *j = json_load_file(p, 0, &je);
    assert_non_null(j);
    json_t *wp = json_object_get(j, "who_pays");
    assert_true(json_is_object(wp));
    assert_string_equal(json_string_value(json_object_get(wp, "by")), "user");
    assert_int_equal(json_array_size(json_object_get(wp, "tenants")), 2);
    assert_near(json_real_value(json_object_get(wp, "usd_per_replica_hour")), 2.0, 1e-12);
    /* the traffic day's cost per tenant per hour, as report.md shows it: each hour's fleet at the
     * spec's price, the tenants' parts and idle summing to it */
    json_t *wd = json_object_get(j, "who_pays_day");
    assert_true(json_is_object(wd));
    assert_int_equal(json_array_size(json_object_get(wd, "tenants")), 2);
    json_t *hours = json_object_get(wd, "hours");
    assert_int_equal(json_array_size(hours), 24);
    int busy_hours = 0;
    for (size_t h = 0; h < 24; h++) {
        json_t *x = json_array_get(hours, h);
        double usd = json_number_value(json_object_get(x, "usd"));
        double sum = json_number_value(json_object_get(x, "idle_usd"));
        assert_near(usd, 2.0 * (double)json_integer_value(json_object_get(x, "replicas")), 1e-9);
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(x, "by_tenant"), k, v) sum += json_number_value(v);
        assert_near(sum, usd, 1e-9);
        /* the hours with traffic (and only those): the tenants pay a part */
        int paid = usd - json_number_value(json_object_get(x, "idle_usd")) > 1e-9;
        assert_int_equal(paid, json_number_value(json_object_get(x, "rps")) > 0);
        busy_hours += paid;
    }
    assert_int_equal(busy_hours, 16);
    json_decref(j);
    snprintf(p, sizeof p, "%s/report.md", out_dir);
    assert_true(file_has(p, "## Who pays"));
    assert_true(file_has(p, "| tenant-B |"));
    assert_true(file_has(p, "Over the spec's traffic day")); /* the day's cost per tenant per hour */
    assert_true(file_has(p, "| 00 | 0 | 0 | 0.00 | 0.00 | 0.00 | 0.00 |"));
    snprintf(p, sizeof p, "%s/report.html", out_dir);
    assert_true(file_has(p, "<section id=\"who-pays\">"));
    assert_true(file_has(p, "<section id=\"who-pays-day\">"));
    /* the same folder as the engine model and price of trace cost */
    char *argv2[] = { (char *)st_test_bin(), "trace", "cost", log, "--audit", out_dir, NULL };
    st = st_test_capture(argv2, out, sizeof out);
    if (st != 0)
        fail_msg("trace cost --audit exited %d:\n%s", st, out);
    assert_non_null(strstr(out, "$2 per GPU-hour (the audit's spec)"));
}

static void bad_input(void **state)
{
    (void)state;
    char log[256];
    snprintf(log, sizeof log, "%s/bad.json", dir);
    FILE *f = fopen(log, "w");
    assert_non_null(f);
    fprintf(f, "[{\"startTime\": \"2026-11-30T10:00:00Z\", \"prompt_tokens\": -4, \"completion_tokens\": 3}]\n");
    fclose(f);
    static char out[1 << 14];
    char *argv[] = { (char *)st_test_bin(), "trace", "cost", log, "--model", "Qwen/Qwen3-8B", "--gpu", "H100", NULL };
    assert_int_equal(st_test_capture(argv, out, sizeof out), 2);
    assert_non_null(strstr(out, "bad.json:1: prompt_tokens"));
    /* an output naming the log itself: refused, the log left as it was */
    char *argv6[] = {
        (char *)st_test_bin(), "trace", "cost", log, "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--csv", log, NULL
    };
    assert_int_equal(st_test_capture(argv6, out, sizeof out), 2);
    assert_non_null(strstr(out, "is the log it reads"));
    f = fopen(log, "r");
    assert_non_null(f);
    char first[64] = "";
    assert_non_null(fgets(first, sizeof first, f));
    fclose(f);
    assert_true(!strncmp(first, "[{\"startTime\"", 13));
    char *argv2[] = { (char *)st_test_bin(), "trace", "cost", log, NULL };
    assert_int_equal(st_test_capture(argv2, out, sizeof out), 2);
    assert_non_null(strstr(out, "--model and --gpu"));
    /* a bad bill fails before the replay */
    char good[256], billp[256];
    snprintf(good, sizeof good, "%s/log.json", dir);
    snprintf(billp, sizeof billp, "%s/bad-bill.csv", dir);
    f = fopen(billp, "w");
    assert_non_null(f);
    fprintf(f, "time,amount\n2026-11-30T10:00:00Z,abc\n");
    fclose(f);
    char *argv4[] = {
        (char *)st_test_bin(), "trace", "cost", good, "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--bill", billp, NULL
    };
    assert_int_equal(st_test_capture(argv4, out, sizeof out), 2);
    assert_non_null(strstr(out, "bad-bill.csv:2: amount must be a number >= 0"));
    assert_null(strstr(out, "Replay"));
    char *argv3[] = { (char *)st_test_bin(), "trace", "cost", "--help", NULL };
    assert_int_equal(st_test_capture(argv3, out, sizeof out), 0);
    assert_non_null(strstr(out, "--bill"));
    /* the command list names it too, not only trace stats */
    char *argv5[] = { (char *)st_test_bin(), "--help", NULL };
    assert_int_equal(st_test_capture(argv5, out, sizeof out), 0);
    assert_non_null(strstr(out, "trace cost LOG"));
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    (void)remove(path); /* best effort: a leftover file only fails the last rmdir */
    return 0;
}

static int setup(void **state)
{
    (void)state;
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    const char *names[] = { "log.json",    "cost.json", "bill-cost.json", "bill.csv",
                            "events.json", "lines.csv", "bad.json",       "bad-bill.csv" };
    char p[300];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    snprintf(p, sizeof p, "%s/spec.yaml", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/pred", dir);
    nftw(p, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    rmdir(dir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(two_tenants),
        cmocka_unit_test(bill_to_the_cent),
        cmocka_unit_test(predict_who_pays),
        cmocka_unit_test(bad_input),
    };
    return cmocka_run_group_tests(t, setup, teardown);
}
