/* The HTML report in a real browser: headless Chromium (Debian's `chromium` package) loads a
 * sample report with realistic data, dumps its DOM and takes a screenshot. Fails on any
 * console message (the report has no scripts, so any message is an error: a script that ran,
 * a Content-Security-Policy violation, a resource it tried to fetch), on a missing section,
 * on markup injected through hostile strings, and on a trivial screenshot.
 *
 * How console errors are caught: `--enable-logging=stderr --v=0` makes Chromium print every
 * console message to stderr as `...:CONSOLE:<line>] "<message>", source: <url>`. A probe page
 * that calls console.error and throws checks first that this capture works with the installed
 * Chromium; if it does not, the test fails instead of passing blind.
 *
 * Skips (cmocka skip) only when no chromium executable is found: SERVETUNE_CHROMIUM when set
 * (a path that is not executable means none), else chromium or chromium-browser on PATH. SERVETUNE_HTML_KEEP=DIR keeps report.html,
 * report.png, report-print.pdf and the DOM there, to look at. */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "audit/store.h"
#include "core/buf.h"
#include "html_sample.h"
#include "report/html.h"
#include "report/html_audit.h"

#define CHROME_TIMEOUT_S 90

static char g_chrome[512];
static char g_dir[256];

static int find_chromium(void)
{
    const char *env = getenv("SERVETUNE_CHROMIUM"); /* set: that one, or none */
    if (env && *env) {
        if (access(env, X_OK) != 0)
            return -1;
        snprintf(g_chrome, sizeof g_chrome, "%s", env);
        return 0;
    }
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/bin:/bin";
    static const char *const names[] = { "chromium", "chromium-browser" };
    for (size_t k = 0; k < 2; k++) {
        const char *p = path;
        while (*p) {
            const char *e = strchr(p, ':');
            size_t n = e ? (size_t)(e - p) : strlen(p);
            char cand[512];
            if (n && n < 400) {
                snprintf(cand, sizeof cand, "%.*s/%s", (int)n, p, names[k]);
                if (access(cand, X_OK) == 0) {
                    snprintf(g_chrome, sizeof g_chrome, "%s", cand);
                    return 0;
                }
            }
            p += n;
            if (*p == ':')
                p++;
        }
    }
    return -1;
}

/* cmocka's skip() with the reason printed (TAP: "# ..."). */
#define skip_no_chromium()                                                                                             \
    do {                                                                                                               \
        print_message("# chromium is not installed (apt-get install chromium): skipped\n");                            \
        skip();                                                                                                        \
    } while (0)

static int write_file(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    int ok = fwrite(data, 1, len, f) == len;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    st_buf b;
    st_buf_init(&b, (size_t)256 << 20);
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        if (st_buf_append(&b, chunk, n) < 0)
            break;
    fclose(f);
    if (!b.data)
        st_buf_append(&b, "", 0);
    *len = b.len;
    return b.data;
}

/* Runs chromium headless on url with one mode argument; stdout and stderr to files.
 * Returns the exit status, or -1 on a failure to start or a timeout (its group is killed). */
static int run_chromium(const char *mode_arg, const char *url, const char *out_path, const char *err_path)
{
    char profile[320], size_arg[] = "--window-size=1280,2400";
    snprintf(profile, sizeof profile, "--user-data-dir=%s/profile", g_dir);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        setpgid(0, 0);
        int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (o < 0 || e < 0)
            _exit(126);
        dup2(o, 1);
        dup2(e, 2);
        char *argv[] = { g_chrome,
                         "--headless",
                         "--disable-gpu",
                         "--no-sandbox",
                         "--no-first-run",
                         "--disable-extensions",
                         "--hide-scrollbars",
                         "--enable-logging=stderr",
                         "--v=0",
                         profile,
                         size_arg,
                         (char *)mode_arg,
                         (char *)url,
                         NULL };
        execv(g_chrome, argv);
        _exit(127);
    }
    setpgid(pid, pid);
    int status = 0;
    struct timespec ts = { 0, 50 * 1000 * 1000 };
    for (int i = 0; i < CHROME_TIMEOUT_S * 20; i++) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) {
            kill(-pid, SIGKILL); /* helpers it left behind, if any */
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        }
        nanosleep(&ts, NULL);
    }
    kill(-pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

/* Lines of Chromium's stderr that report a console message; copied into out. */
static int console_lines(const char *err_text, st_buf *out)
{
    int n = 0;
    const char *p = err_text;
    while (p && *p) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (memmem(p, len, ":CONSOLE", 8) || memmem(p, len, "Uncaught", 8)) {
            n++;
            st_buf_append(out, p, len);
            st_buf_puts(out, "\n");
        }
        p = e ? e + 1 : NULL;
    }
    return n;
}

static int setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/st-html-browser-XXXXXX");
    if (!mkdtemp(g_dir))
        return -1;
    return 0;
}

static void rm_rf(const char *dir)
{
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/rm", "rm", "-rf", dir, (char *)NULL);
        _exit(127);
    }
    if (pid > 0)
        waitpid(pid, NULL, 0);
}

static int teardown(void **state)
{
    (void)state;
    rm_rf(g_dir);
    return 0;
}

static void keep(const char *name)
{
    const char *dir = getenv("SERVETUNE_HTML_KEEP");
    if (!dir || !*dir)
        return;
    char src[400], dst[1024];
    snprintf(src, sizeof src, "%s/%s", g_dir, name);
    snprintf(dst, sizeof dst, "%s/%s", dir, name);
    size_t len;
    char *d = read_file(src, &len);
    if (d)
        write_file(dst, d, len);
    free(d);
}

static void console_capture_works(void **state)
{
    (void)state;
    if (find_chromium() < 0)
        skip_no_chromium();
    char page[400], url[420], out[400], err[400];
    snprintf(page, sizeof page, "%s/probe.html", g_dir);
    snprintf(url, sizeof url, "file://%s", page);
    snprintf(out, sizeof out, "%s/probe.dom", g_dir);
    snprintf(err, sizeof err, "%s/probe.err", g_dir);
    const char *probe = "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>probe</title>"
                        "</head><body><p>probe</p><script>console.error('ST-PROBE-ERROR');"
                        "throw new Error('ST-PROBE-UNCAUGHT');</script></body></html>";
    assert_int_equal(write_file(page, probe, strlen(probe)), 0);
    assert_int_equal(run_chromium("--dump-dom", url, out, err), 0);
    size_t len;
    char *e = read_file(err, &len);
    assert_non_null(e);
    st_buf lines;
    st_buf_init(&lines, 1 << 20);
    int n = console_lines(e, &lines);
    if (n < 2 || !strstr(e, "ST-PROBE-ERROR") || !strstr(e, "ST-PROBE-UNCAUGHT"))
        fail_msg("Chromium's console capture does not work (found %d console lines); stderr:\n%.3000s", n, e);
    st_buf_free(&lines);
    free(e);
}

static void count_check(const char *dom, const char *needle, int min, const char *what)
{
    int n = 0;
    for (const char *p = dom; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    if (n < min)
        fail_msg("%s: found %d of \"%s\" in the DOM, expected at least %d", what, n, needle, min);
}

/* Loads a rendered report; checks console, sections, banners and injected markup. */
static void check_report_dom(int hostile, int partial, int prediction, const char *tag)
{
    sample_store *st = calloc(1, sizeof *st);
    assert_non_null(st);
    const st_html_report *r = sample_report(st, hostile, partial, prediction);
    char page[400], url[420], out[400], err[400], msg[256];
    snprintf(page, sizeof page, "%s/%s.html", g_dir, tag);
    snprintf(url, sizeof url, "file://%s", page);
    snprintf(out, sizeof out, "%s/%s.dom", g_dir, tag);
    snprintf(err, sizeof err, "%s/%s.err", g_dir, tag);
    if (st_html_write_file(r, page, 0, msg, sizeof msg) < 0)
        fail_msg("write: %s", msg);
    free(st);
    assert_int_equal(run_chromium("--dump-dom", url, out, err), 0);
    size_t dl, el;
    char *dom = read_file(out, &dl), *e = read_file(err, &el);
    assert_non_null(dom);
    assert_non_null(e);
    st_buf lines;
    st_buf_init(&lines, 1 << 20);
    if (console_lines(e, &lines) > 0)
        fail_msg("console messages while loading %s:\n%s", tag, lines.data);
    st_buf_free(&lines);
    static const char *const sections[] = { "<section id=\"headline\">",
                                            "<section id=\"setup\">",
                                            "<section id=\"results\">",
                                            "<section id=\"changes\">",
                                            "<section id=\"method\">",
                                            "<section id=\"timelines\">",
                                            "id=\"results-table\"",
                                            "id=\"changes-table\"",
                                            "id=\"chart-cost\"",
                                            "id=\"chart-rates\"",
                                            "id=\"chart-dist\"",
                                            "id=\"notes\"",
                                            "</html>" };
    for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++)
        if (!strstr(dom, sections[i]))
            fail_msg("%s: missing %s in the rendered DOM", tag, sections[i]);
    /* 2 cost bars + 2 rate charts + 2 CDFs + 6 configurations that ran x their runs */
    count_check(dom, "<svg", 6 + 6 * SAMPLE_RATES, tag);
    count_check(dom, "<tr", 1 + SAMPLE_CFGS, tag);
    if (strstr(dom, "<script") || strstr(dom, "<img") || strstr(dom, "onerror=\"") || strstr(dom, "onload=\"") ||
        strstr(dom, "<b>examples"))
        fail_msg("%s: markup from a hostile string reached the DOM", tag);
    if (hostile && !strstr(dom, "&lt;script&gt;alert('oom')"))
        fail_msg("%s: the hostile status text is not shown as text", tag);
    if (partial != (strstr(dom, "id=\"banner-partial\"") != NULL))
        fail_msg("%s: PARTIAL banner %s", tag, partial ? "missing" : "shown unflagged");
    if (prediction != (strstr(dom, "id=\"banner-prediction\"") != NULL))
        fail_msg("%s: PREDICTION banner %s", tag, prediction ? "missing" : "shown unflagged");
    free(dom);
    free(e);
}

static void report_loads_cleanly(void **state)
{
    (void)state;
    if (find_chromium() < 0)
        skip_no_chromium();
    check_report_dom(0, 0, 0, "plain");
    check_report_dom(1, 0, 0, "hostile");
    check_report_dom(1, 1, 1, "flagged");
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void report_screenshot(void **state)
{
    (void)state;
    if (find_chromium() < 0)
        skip_no_chromium();
    sample_store *st = calloc(1, sizeof *st);
    assert_non_null(st);
    const st_html_report *r = sample_report(st, 0, 0, 0);
    char page[400], url[420], png[400], shot[420], out[400], err[400], msg[256];
    snprintf(page, sizeof page, "%s/report.html", g_dir);
    snprintf(url, sizeof url, "file://%s", page);
    snprintf(png, sizeof png, "%s/report.png", g_dir);
    snprintf(shot, sizeof shot, "--screenshot=%s", png);
    snprintf(out, sizeof out, "%s/shot.out", g_dir);
    snprintf(err, sizeof err, "%s/shot.err", g_dir);
    if (st_html_write_file(r, page, 0, msg, sizeof msg) < 0)
        fail_msg("write: %s", msg);
    free(st);
    assert_int_equal(run_chromium(shot, url, out, err), 0);
    size_t len, el;
    unsigned char *d = (unsigned char *)read_file(png, &len);
    char *e = read_file(err, &el);
    assert_non_null(e);
    st_buf lines;
    st_buf_init(&lines, 1 << 20);
    if (console_lines(e, &lines) > 0)
        fail_msg("console messages while taking the screenshot:\n%s", lines.data);
    st_buf_free(&lines);
    free(e);
    if (!d)
        fail_msg("no screenshot at %s", png);
    static const unsigned char sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
    assert_true(len > 33);
    assert_memory_equal(d, sig, 8);
    assert_memory_equal(d + 12, "IHDR", 4);
    assert_int_equal(be32(d + 16), 1280);
    assert_int_equal(be32(d + 20), 2400);
    /* a blank or nearly blank page of this size compresses to a few kB; the charts, table
     * and text of the report do not */
    if (len < 60000)
        fail_msg("screenshot is only %zu bytes: the page looks empty", len);
    free(d);
    keep("report.html");
    keep("report.png");
    keep("plain.dom");
}

static void report_prints_to_pdf(void **state)
{
    (void)state;
    if (find_chromium() < 0)
        skip_no_chromium();
    char page[400], url[420], pdf[400], arg[420], out[400], err[400];
    snprintf(page, sizeof page, "%s/report.html", g_dir);
    snprintf(url, sizeof url, "file://%s", page);
    snprintf(pdf, sizeof pdf, "%s/report-print.pdf", g_dir);
    snprintf(arg, sizeof arg, "--print-to-pdf=%s", pdf);
    snprintf(out, sizeof out, "%s/pdf.out", g_dir);
    snprintf(err, sizeof err, "%s/pdf.err", g_dir);
    struct stat sb;
    if (stat(page, &sb) != 0) { /* the screenshot test writes it; write it here if run alone */
        sample_store *st = calloc(1, sizeof *st);
        assert_non_null(st);
        char msg[256];
        if (st_html_write_file(sample_report(st, 0, 0, 0), page, 0, msg, sizeof msg) < 0)
            fail_msg("write: %s", msg);
        free(st);
    }
    assert_int_equal(run_chromium(arg, url, out, err), 0);
    size_t len;
    char *d = read_file(pdf, &len);
    if (!d)
        fail_msg("no PDF at %s", pdf);
    assert_true(len > 20000);
    assert_memory_equal(d, "%PDF-", 5);
    /* several pages: the report is long, and print CSS must not squeeze it onto one */
    int pages = 0;
    for (const char *p = d; (p = memmem(p, len - (size_t)(p - d), "/Type /Page", 11)) != NULL; p += 11)
        if (p[11] != 's')
            pages++;
    if (pages < 3)
        fail_msg("printed PDF has %d pages", pages);
    free(d);
    keep("report-print.pdf");
}

/* End to end: a small audit on the emulator (servetune audit), its HTML report from the
 * result store, loaded in Chromium. */
static const char small_spec[] = "engine:\n"
                                 "  kind: emulator\n"
                                 "  model: Qwen/Qwen3-8B\n"
                                 "  flags: [--gpu, H100, --time-scale, \"20\", --max-model-len, \"8192\"]\n"
                                 "hardware:\n"
                                 "  gpu: H100\n"
                                 "  gpus_per_replica: 1\n"
                                 "  price_per_gpu_hour: 2.49\n"
                                 "peak_rate: 60\n"
                                 "workload:\n"
                                 "  input_tokens: 1000\n"
                                 "  output_tokens: 100\n"
                                 "  range_ratio: 0.1\n"
                                 "  shared_prefix: 500\n"
                                 "  requests_per_rate: 40\n"
                                 "  seed: 1\n"
                                 "rates: [4, 16, inf]\n"
                                 "search: {mode: burst}\n"
                                 "warmup_requests: 4\n"
                                 "slo:\n"
                                 "  ttft_p95_ms: 1500\n"
                                 "  tpot_p95_ms: 50\n"
                                 "configurations:\n"
                                 "  - name: baseline\n"
                                 "    reason: the current setup <b>as is</b>\n"
                                 "  - name: fp8-kv\n"
                                 "    add_flags: [--kv-cache-dtype, fp8]\n"
                                 "    reason: half the KV bytes per token\n";

static void audit_report_in_browser(void **state)
{
    (void)state;
    if (find_chromium() < 0)
        skip_no_chromium();
    char spec[400], out[400], log[400], err[512] = "";
    snprintf(spec, sizeof spec, "%s/small.yaml", g_dir);
    snprintf(out, sizeof out, "%s/audit-out", g_dir);
    snprintf(log, sizeof log, "%s/audit.log", g_dir);
    assert_int_equal(write_file(spec, small_spec, strlen(small_spec)), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setpgid(0, 0);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execl(st_test_bin(), "servetune", "audit", spec, "-o", out, "--quiet", (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid);
    int status = 0, done = 0;
    struct timespec ts = { 0, 100 * 1000 * 1000 };
    for (int i = 0; i < 3000 && !done; i++) { /* at most 300 s */
        if (waitpid(pid, &status, WNOHANG) == pid)
            done = 1;
        else
            nanosleep(&ts, NULL);
    }
    if (!done) {
        kill(-pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    kill(-pid, SIGKILL); /* an engine it left behind, if any */
    size_t ll;
    char *lt = read_file(log, &ll);
    if (!done || !WIFEXITED(status) || WEXITSTATUS(status) > 1)
        fail_msg("servetune audit did not finish (exit %d): %.2000s", WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                 lt ? lt : "");
    free(lt);

    st_store *s = NULL;
    if (st_store_open(out, &s, err, sizeof err) != 0)
        fail_msg("store: %s", err);
    if (st_report_html_write(s, out, NULL, err, sizeof err) != 0)
        fail_msg("report.html: %s", err);
    st_store_close(s);

    char page[420], url[440], dom[420], derr[420];
    snprintf(page, sizeof page, "%s/report.html", out);
    snprintf(url, sizeof url, "file://%s", page);
    snprintf(dom, sizeof dom, "%s/audit.dom", g_dir);
    snprintf(derr, sizeof derr, "%s/audit.err", g_dir);
    assert_int_equal(run_chromium("--dump-dom", url, dom, derr), 0);
    size_t dl, el;
    char *d = read_file(dom, &dl), *e = read_file(derr, &el);
    assert_non_null(d);
    assert_non_null(e);
    st_buf lines;
    st_buf_init(&lines, 1 << 20);
    if (console_lines(e, &lines) > 0)
        fail_msg("console messages while loading the audit's report:\n%s", lines.data);
    st_buf_free(&lines);
    static const char *const need[] = { "<section id=\"headline\">",
                                        "<section id=\"setup\">",
                                        "<section id=\"results\">",
                                        "<section id=\"changes\">",
                                        "<section id=\"method\">",
                                        "id=\"results-table\"",
                                        "id=\"chart-cost\"",
                                        "id=\"chart-rates\"",
                                        "fp8-kv",
                                        "half the KV bytes per token",
                                        "the current setup &lt;b&gt;as is&lt;/b&gt;" };
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (!strstr(d, need[i]))
            fail_msg("the audit's report lacks %s", need[i]);
    count_check(d, "<svg", 4, "audit report");
    if (getenv("SERVETUNE_HTML_KEEP") && *getenv("SERVETUNE_HTML_KEEP")) {
        size_t hl;
        char *h = read_file(page, &hl);
        char dst[1024];
        snprintf(dst, sizeof dst, "%s/small-audit-report.html", getenv("SERVETUNE_HTML_KEEP"));
        if (h)
            write_file(dst, h, hl);
        free(h);
    }
    free(d);
    free(e);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(console_capture_works),   cmocka_unit_test(report_loads_cleanly),
        cmocka_unit_test(report_screenshot),       cmocka_unit_test(report_prints_to_pdf),
        cmocka_unit_test(audit_report_in_browser),
    };
    return cmocka_run_group_tests(t, setup, teardown);
}
