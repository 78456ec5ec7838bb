/* Distrust leads: when the host limited the figures, when the pick and the current setup tie, or
 * when requests failed at a configuration's lowest rate, the headline says so first and names no
 * winner (report/distrust.h); the same store without those reasons names its pick. Each check
 * prints the headline it read. */
#include "harness.h"

#include <jansson.h>
#include <stdio.h>
#include <unistd.h>

#include "audit/store.h"
#include "core/buf.h"
#include "report/report.h"
#include "report/whopays_day.h"

enum { PLAIN, HOST, TIE, FAILED };

static void put_run(st_store *s, const char *cfg, int seq, double rate, const char *verdict, double delivered,
                    int client_limited, uint32_t failed)
{
    st_run_row r = { .config = (char *)cfg,
                     .seq = seq,
                     .rate = rate,
                     .grid = 1,
                     .verdict = (char *)verdict,
                     .why = (char *)(strcmp(verdict, "pass") ? "p95 TTFT 2250 ms > 1500 ms (x1.50)" : "ok"),
                     .planned = 200,
                     .sent = 200,
                     .completed = 200 - failed,
                     .failed = failed,
                     .duration_s = 200 / delivered,
                     .delivered_rps = delivered,
                     .output_tps = delivered * 300,
                     .sustained_rps = delivered,
                     .ttft_p95_ms = 800,
                     .tpot_p95_ms = 40,
                     .lag_p99_ms = client_limited ? 900 : 1,
                     .client_limited = client_limited,
                     .worst_ratio = 0.8 };
    char key[64];
    snprintf(key, sizeof key, "%s-%d", cfg, seq);
    st_store_hash(key, strlen(key), r.run_key);
    assert_int_equal(st_store_run_put(s, &r, NULL, 0, NULL, 0), 0);
}

/* The example spec as a burst test: the current setup and fp8-kv ran, shaped by what. */
static st_store *store_of(int what, char *dir)
{
    strcpy(dir, "/tmp/st_distrust.XXXXXX");
    assert_non_null(mkdtemp(dir));
    st_store *s;
    char err[256];
    assert_int_equal(st_store_open(dir, &s, err, sizeof err), 0);
    FILE *f = fopen("examples/qwen3-8b-h100.yaml", "rb");
    assert_non_null(f);
    static char spec[1 << 16];
    size_t len = fread(spec, 1, sizeof spec - 1, f);
    fclose(f);
    spec[len] = '\0';
    char *mode = strstr(spec, "mode: sustained");
    assert_non_null(mode);
    memcpy(mode, "mode: burst    ", 15);
    assert_int_equal(st_store_audit_begin(s, "examples/qwen3-8b-h100.yaml", spec, len, "0.1.0", 0, err, sizeof err), 0);
    const char *names[] = { "baseline", "fp8-kv" };
    for (int i = 0; i < 2; i++) {
        st_config_row c = {
            .name = (char *)names[i], .idx = i == 0 ? 0 : 3, .status = "done", .startup_s = 3.5, .argv = "x"
        };
        assert_int_equal(st_store_config_put(s, &c), 0);
    }
    put_run(s, "baseline", 0, 2, "pass", 1.98, 0, what == FAILED ? 7 : 0);
    put_run(s, "baseline", 1, 4, "pass", 3.95, 0, 0);
    put_run(s, "baseline", 2, 6, "fail", 5.1, 0, 0);
    put_run(s, "fp8-kv", 0, 2, "pass", 1.98, 0, 0);
    put_run(s, "fp8-kv", 1, 4, "pass", 3.95, 0, 0);
    if (what != TIE) {
        put_run(s, "fp8-kv", 2, 6, "pass", 5.9, 0, 0);
        put_run(s, "fp8-kv", 3, 8, "pass", 7.9, what == HOST, 0);
        put_run(s, "fp8-kv", 4, 10, "fail", 8.5, 0, 0);
    } else {
        put_run(s, "fp8-kv", 1, 4, "pass", 3.99, 0, 0); /* replaces seq 1: +1 % delivered, noise */
        put_run(s, "fp8-kv", 2, 6, "fail", 5.2, 0, 0);
    }
    assert_int_equal(st_store_audit_finish(s, 0, NULL), 0);
    return s;
}

static void remove_dir(const char *dir)
{
    const char *files[] = { "results.sqlite", "results.sqlite-wal", "results.sqlite-shm",
                            "report.md",      "report.json",        "results.csv",
                            "report.html",    "deploy.md",          "deploy-k8s.yaml" };
    char p[512];
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
}

/* The configuration each other output marks as the pick: the results table's "**pick**", results.csv's
 * is_pick, and the deploy snippets st_report_write_all writes ("(none)" where none is). */
typedef struct marked {
    char md[64], csv[64], deploy[64], day[64]; /* day: the configuration "who pays" prices a traffic day at */
} marked;

static void marked_picks(st_store *s, const st_report *r, const char *dir, marked *m)
{
    snprintf(m->md, sizeof m->md, "(none)");
    snprintf(m->csv, sizeof m->csv, "(none)");
    snprintf(m->deploy, sizeof m->deploy, "(none)");
    snprintf(m->day, sizeof m->day, "(none)");
    /* "who pays" over a traffic day (report/whopays_day.h), given a tenant mix, a day and a price */
    st_report rr = *r;
    rr.who_pays = json_pack("{s:[{s:s,s:f}]}", "tenants", "tenant", "a", "share_model", 1.0);
    assert_non_null(rr.who_pays);
    rr.day_present = 1;
    rr.spec.hardware.price_per_gpu_hour = 2.0;
    rr.spec.traffic.hour_known[0] = 1;
    rr.spec.traffic.hourly_rps[0] = 1.0;
    int day_ok[2] = { 0, 0 };
    for (int i = 0; i < 2 && i < rr.n_cfg; i++) {
        day_ok[i] = rr.cfg[i].day_ok; /* (the configurations are the report's own: put back below) */
        rr.cfg[i].day_ok = 1;
    }
    st_rep_wp_day wd;
    if (st_rep_who_pays_day(&rr, &wd))
        snprintf(m->day, sizeof m->day, "%s", wd.config);
    for (int i = 0; i < 2 && i < rr.n_cfg; i++)
        rr.cfg[i].day_ok = day_ok[i];
    json_decref(rr.who_pays);
    st_buf b;
    st_buf_init(&b, 1 << 22);
    assert_int_equal(st_report_markdown(r, &b), 0);
    const char *names[] = { "baseline", "fp8-kv" };
    for (int i = 0; i < 2; i++) {
        char want[64];
        snprintf(want, sizeof want, "| %s%s **pick** |", names[i], i ? "" : " (current)");
        if (strstr(b.data, want))
            snprintf(m->md, sizeof m->md, "%s", names[i]);
    }
    st_buf_reset(&b);
    assert_int_equal(st_report_csv(r, &b), 0);
    for (const char *line = strchr(b.data, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        char name[64];
        int base, pick;
        if (sscanf(line + 1, "%*d,%63[^,],%d,%d", name, &base, &pick) == 3 && pick)
            snprintf(m->csv, sizeof m->csv, "%s", name);
    }
    st_buf_free(&b);
    char err[256], p[512];
    assert_int_equal(st_report_write_all(s, dir, err, sizeof err), 0);
    snprintf(p, sizeof p, "%s/deploy.md", dir);
    FILE *f = fopen(p, "r");
    if (f) {
        char line[256] = "";
        if (fgets(line, sizeof line, f) && !strncmp(line, "# Deploying ", 12))
            snprintf(m->deploy, sizeof m->deploy, "%.*s", (int)strcspn(line + 12, "\n"), line + 12);
        fclose(f);
    }
}

static void headline_of(int what, char *out, size_t cap, char *pick, size_t pick_cap, char *why, size_t why_cap,
                        marked *m)
{
    char dir[64], err[256];
    st_store *s = store_of(what, dir);
    st_report r;
    if (st_report_load(s, &r, err, sizeof err))
        fail_msg("%s", err);
    st_buf b;
    st_buf_init(&b, 1 << 16);
    st_report_headline(&r, &b);
    snprintf(out, cap, "%s", b.data ? b.data : "");
    st_buf_free(&b);
    st_buf_init(&b, 1 << 22);
    assert_int_equal(st_report_json(&r, &b), 0);
    json_t *j = json_loads(b.data, 0, NULL);
    assert_non_null(j);
    json_t *h = json_object_get(j, "headline");
    const char *p = json_string_value(json_object_get(h, "pick"));
    snprintf(pick, pick_cap, "%s", p ? p : "(null)");
    char *w = json_dumps(json_object_get(h, "no_winner_because"), JSON_COMPACT);
    snprintf(why, why_cap, "%s", w ? w : "");
    free(w);
    json_decref(j);
    st_buf_free(&b);
    marked_picks(s, &r, dir, m);
    st_report_free(&r);
    st_store_close(s);
    remove_dir(dir);
}

static void expect(int what, const char *lead, const char *json_why)
{
    char h[8192], pick[64], why[128];
    marked m;
    headline_of(what, h, sizeof h, pick, sizeof pick, why, sizeof why, &m);
    /* no other output names the pick the headline does not */
    if (strcmp(m.md, "(none)") || strcmp(m.csv, "(none)") || strcmp(m.deploy, "(none)") || strcmp(m.day, "(none)"))
        fail_msg("no winner named, yet report.md marks %s, results.csv %s, deploy.md %s, who pays prices the day at %s",
                 m.md, m.csv, m.deploy, m.day);
    if (strncmp(h, lead, strlen(lead)))
        fail_msg("the headline does not start with '%s': %s", lead, h);
    if (strstr(h, "the best, fp8-kv") || strstr(h, "beats"))
        fail_msg("the headline names a winner: %s", h);
    if (!strstr(h, "The figures, not a ranking: baseline (the current setup)"))
        fail_msg("the headline lacks the figures without a ranking: %s", h);
    if (strcmp(pick, "(null)"))
        fail_msg("report.json's headline.pick is %s, expected null", pick);
    if (strcmp(why, json_why))
        fail_msg("report.json's headline.no_winner_because is %s, expected %s", why, json_why);
}

static void plain_names_its_pick(void **state)
{
    (void)state;
    char h[8192], pick[64], why[128];
    marked m;
    headline_of(PLAIN, h, sizeof h, pick, sizeof pick, why, sizeof why, &m);
    if (strcmp(m.md, "fp8-kv") || strcmp(m.csv, "fp8-kv") || strcmp(m.deploy, "fp8-kv") || strcmp(m.day, "fp8-kv"))
        fail_msg("plain: report.md marks %s, results.csv %s, deploy.md %s, who pays prices the day at %s", m.md, m.csv,
                 m.deploy, m.day);
    if (!strstr(h, "the best, fp8-kv, serves 7.90 requests/s") || strstr(h, "No winner"))
        fail_msg("the plain headline does not name fp8-kv: %s", h);
    if (strcmp(pick, "fp8-kv") || strcmp(why, "[]"))
        fail_msg("plain: pick %s, no_winner_because %s", pick, why);
}

static void host_limited_names_no_winner(void **state)
{
    (void)state;
    expect(HOST,
           "No winner is named: this host limited the measurement (fp8-kv: the load generator lagged its schedule)",
           "[\"host_limited\"]");
}

static void tie_names_no_winner(void **state)
{
    (void)state;
    expect(TIE,
           "No winner is named: fp8-kv and the current setup (baseline) tie within their intervals (both passed "
           "4.00 req/s and failed 6.00 req/s: the grid cannot tell them apart)",
           "[\"tie\"]");
}

static void unloaded_failures_name_no_winner(void **state)
{
    (void)state;
    expect(FAILED,
           "No winner is named: baseline's requests failed even at its lowest rate (2.00 req/s: 7 of 200, refused or "
           "broken rather than slow)",
           "[\"failed_unloaded\"]");
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(plain_names_its_pick),
        cmocka_unit_test(host_limited_names_no_winner),
        cmocka_unit_test(tie_names_no_winner),
        cmocka_unit_test(unloaded_failures_name_no_winner),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}
