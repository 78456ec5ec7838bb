#include "harness.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "core/buf.h"
#include "core/clock.h"
#include "core/file.h"
#include "core/opts.h"
#include "core/parse.h"
#include "core/secret.h"
#include "core/strv.h"
#include "core/util.h"

static void buf_respects_max(void **state)
{
    (void)state;
    st_buf b;
    st_buf_init(&b, 8);
    assert_int_equal(st_buf_puts(&b, "12345678"), 0);
    assert_int_equal(st_buf_puts(&b, "9"), -1);
    assert_int_equal(b.len, 8);
    assert_string_equal(b.data, "12345678");
    st_buf_consume(&b, 3);
    assert_string_equal(b.data, "45678");
    st_buf_free(&b);
}

/* A refused append sets an error that stays: later appends that would fit are refused too,
 * so a writer checks once at the end and a document is never silently missing a piece. */
static void buf_error_is_sticky(void **state)
{
    (void)state;
    st_buf b;
    char why[96];
    st_buf_init(&b, 8);
    assert_int_equal(st_buf_puts(&b, "1234567"), 0);
    assert_int_equal(st_buf_error(&b), ST_BUF_OK);
    assert_string_equal(st_buf_strerror(&b, why, sizeof why), "");
    assert_int_equal(st_buf_puts(&b, "89"), -1);
    assert_int_equal(st_buf_error(&b), ST_BUF_TOO_BIG);
    assert_int_equal(st_buf_puts(&b, "8"), -1); /* would fit, but the output is no longer whole */
    assert_int_equal(st_buf_printf(&b, "%d", 8), -1);
    assert_int_equal(st_buf_json_str(&b, ""), -1);
    assert_int_equal(b.len, 7);
    assert_string_equal(b.data, "1234567");
    assert_string_equal(st_buf_strerror(&b, why, sizeof why), "output exceeds its limit of 8 bytes");
    st_buf_consume(&b, 2); /* consuming keeps the error */
    assert_int_equal(st_buf_error(&b), ST_BUF_TOO_BIG);
    st_buf_reset(&b); /* starting again clears it */
    assert_int_equal(st_buf_error(&b), ST_BUF_OK);
    assert_int_equal(st_buf_puts(&b, "12345678"), 0);
    /* an escaped string that does not fit leaves nothing of itself behind */
    st_buf_reset(&b);
    assert_int_equal(st_buf_puts(&b, "ab"), 0);
    assert_int_equal(st_buf_json_str(&b, "cdefgh"), -1);
    assert_string_equal(b.data, "ab");
    st_buf_reset(&b);
    assert_int_equal(st_buf_html(&b, "<<<"), -1);
    assert_int_equal(b.len, 0);
    st_buf_fail(&b, ST_BUF_NO_MEM);
    assert_int_equal(st_buf_error(&b), ST_BUF_TOO_BIG); /* the first error is the one kept */
    st_buf_free(&b);
}

/* What sh reads back from "printf %s WORD". */
static void sh_read_back(const char *word, char *out, size_t cap)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "printf %%s %s", word);
    char *argv[] = { "/bin/sh", "-c", cmd, NULL };
    st_test_capture(argv, out, cap);
}

static void buf_shell_quote_round_trips(void **state)
{
    (void)state;
    const char *words[] = { "plain", "--max-num-seqs=256",
                            "",      "two words",
                            "it's",  "'",
                            "''",    "$HOME",
                            "`id`",  "a;b|c&d",
                            "x\ny",  "\\back",
                            "*?[]",  "~user",
                            "#hash", "tab\there",
                            "\"dq\"" };
    for (size_t i = 0; i < sizeof words / sizeof *words; i++) {
        st_buf b;
        st_buf_init(&b, 1024);
        assert_int_equal(st_buf_shell_quote(&b, words[i]), 0);
        char back[1024];
        sh_read_back(b.data, back, sizeof back);
        if (strcmp(back, words[i]))
            fail_msg("quoted as [%s], sh read back [%s], want [%s]", b.data, back, words[i]);
        st_buf_free(&b);
    }
    st_buf b;
    st_buf_init(&b, 64);
    st_buf_shell_quote(&b, "safe-word_1.2/x");
    assert_string_equal(b.data, "safe-word_1.2/x"); /* nothing to quote */
    st_buf_reset(&b);
    st_buf_shell_quote(&b, "it's");
    assert_string_equal(b.data, "'it'\\''s'");
    st_buf_free(&b);
}

static void buf_json_and_html_escape(void **state)
{
    (void)state;
    st_buf b;
    st_buf_init(&b, 1024);
    st_buf_json_str(&b, "a\"b\\c\n\x01");
    assert_string_equal(b.data, "\"a\\\"b\\\\c\\n\\u0001\"");
    st_buf_reset(&b);
    st_buf_html(&b, "<script>alert('x')&</script>");
    assert_string_equal(b.data, "&lt;script&gt;alert(&#39;x&#39;)&amp;&lt;/script&gt;");
    st_buf_free(&b);
}

static void parse_strict_numbers(void **state)
{
    (void)state;
    double d;
    long l;
    assert_int_equal(st_parse_double("1.5", &d), 0);
    assert_near(d, 1.5, 0);
    assert_int_equal(st_parse_double("1.5x", &d), -1);
    assert_int_equal(st_parse_double("", &d), -1);
    assert_int_equal(st_parse_long("42", &l), 0);
    assert_int_equal(l, 42);
    assert_int_equal(st_parse_long("4 2", &l), -1);
    assert_int_equal(st_parse_rate("inf", &d), 0);
    assert_true(isinf(d));
    assert_int_equal(st_parse_rate("0", &d), -1);
    assert_int_equal(st_parse_duration_s("250ms", &d), 0);
    assert_near(d, 0.25, 1e-12);
    assert_int_equal(st_parse_duration_s("2m", &d), 0);
    assert_near(d, 120, 0);
    assert_int_equal(st_parse_duration_s("2h", &d), 0); /* a trace window's '1h:2h' (docs/audit-spec.md) */
    assert_near(d, 7200, 0);
    assert_int_equal(st_parse_duration_s("2d", &d), -1);
    assert_int_equal(st_parse_duration_s("2 h", &d), -1);
    /* bounded: no duration overflows a nanosecond clock */
    assert_int_equal(st_parse_duration_s("1e11", &d), -1);
    assert_int_equal(st_parse_duration_s("1e300m", &d), -1);
    assert_int_equal(st_parse_duration_s("31536000", &d), 0);
    assert_true(st_s_to_ns(1e11) > 0);
    assert_true(st_s_to_ns(1e300) == ST_NS_MAX);
    assert_true(st_now() + st_s_to_ns(1e300) > st_now()); /* a deadline that far is still later */
    char f[32];
    assert_string_equal(st_fmt_shortest(f, sizeof f, 0.005, 1), "0.005");
    assert_string_equal(st_fmt_shortest(f, sizeof f, 10, 1), "10.0");
    assert_string_equal(st_fmt_shortest(f, sizeof f, 10, 0), "10");
    assert_string_equal(st_fmt_shortest(f, sizeof f, 0.1 + 0.2, 0), "0.30000000000000004");
    assert_string_equal(st_fmt_shortest(f, sizeof f, 2560, 1), "2560.0");
    assert_string_equal(st_fmt_shortest(f, sizeof f, 1e-6, 1), "1e-06");
    assert_string_equal(st_fmt_shortest(f, sizeof f, 5e6, 1), "5e+06");
    assert_string_equal(st_fmt_shortest(f, sizeof f, 1234567.0, 1), "1.234567e+06");
}

static void opts_table(void **state)
{
    (void)state;
    long n = 5;
    double rate = 1;
    const char *url = NULL;
    int flag = 0;
    st_strlist hdr = { 0 };
    const st_opt opts[] = {
        { "num", 'n', ST_OPT_LONG, &n, "N", "count", 1, 100, 0 },
        { "rate", 0, ST_OPT_RATE, &rate, "R", "rate", 0, 0, 0 },
        { "url", 0, ST_OPT_STR, &url, "URL", "url", 0, 0, 0 },
        { "no-x", 0, ST_OPT_FLAG, &flag, NULL, "off", 0, 0, -1 },
        { "header", 'H', ST_OPT_LIST, &hdr, "H", "hdr", 0, 0, 0 },
        { 0 },
    };
    char *argv[] = {
        "pos1", "-n", "7", "--rate=inf", "--url", "http://x", "--no-x", "-H", "a: b", "-H", "c: d", "pos2"
    };
    st_opts_result r;
    char err[256];
    assert_int_equal(st_opts_parse(opts, 12, argv, 0, &r, err, sizeof err), 0);
    assert_int_equal(n, 7);
    assert_true(isinf(rate));
    assert_string_equal(url, "http://x");
    assert_int_equal(flag, -1);
    assert_int_equal(hdr.n, 2);
    assert_int_equal(r.npos, 2);
    assert_string_equal(r.pos[1], "pos2");
    st_opts_result_free(&r);

    char *bad[] = { "-n", "1000" };
    assert_int_equal(st_opts_parse(opts, 2, bad, 0, &r, err, sizeof err), -1);
    assert_non_null(strstr(err, "out of range"));
    /* a failed parse leaves nothing to free (and freeing again is harmless) */
    assert_null(r.pos);
    assert_null(r.unknown);
    st_opts_result_free(&r);
    char *unk[] = { "--weird", "v", "--num", "3" };
    assert_int_equal(st_opts_parse(opts, 4, unk, 0, &r, err, sizeof err), -1);
    assert_null(r.pos);
    assert_int_equal(st_opts_parse(opts, 4, unk, 1, &r, err, sizeof err), 0);
    assert_int_equal(r.nunknown, 2);
    assert_int_equal(n, 3);
    st_opts_result_free(&r);
}

static void virtual_clock(void **state)
{
    (void)state;
    st_vclock vc = { .t = 5 };
    st_clock c = st_clock_virtual(&vc);
    assert_int_equal(c.now(c.ctx), 5);
    vc.t = 10;
    assert_int_equal(c.now(c.ctx), 10);
    st_clock m = st_clock_monotonic();
    st_ns a = m.now(m.ctx), b = st_now();
    assert_true(b >= a);
}

static void read_file_bounded(void **state)
{
    (void)state;
    char path[] = "/tmp/st-test-readXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    char data[100000];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (char)('a' + i % 26);
    assert_int_equal(write(fd, data, sizeof data), (ssize_t)sizeof data);
    close(fd);
    char err[256];
    size_t len = 0;
    char *b = st_read_file(path, sizeof data, &len, err, sizeof err);
    assert_non_null(b);
    assert_int_equal(len, sizeof data);
    assert_memory_equal(b, data, sizeof data);
    assert_int_equal(b[len], '\0');
    free(b);
    assert_null(st_read_file(path, sizeof data - 1, &len, err, sizeof err));
    assert_non_null(strstr(err, "larger than 99999 bytes"));
    unlink(path);
    assert_null(st_read_file(path, 10, &len, err, sizeof err));
    assert_non_null(strstr(err, path));
}

/* Output files are written safely: a FIFO, a device node or a symlink at the destination is
 * refused by name and left as it was; a symlink planted at PATH.tmp is not followed. */
static void output_files_written_safely(void **state)
{
    (void)state;
    char dir[] = "/tmp/st-test-outXXXXXX", path[128], p2[160], tgt[160], err[512] = "";
    assert_non_null(mkdtemp(dir));
    /* a plain file: written, replaced */
    snprintf(path, sizeof path, "%s/out.json", dir);
    assert_int_equal(st_write_file_atomic(path, "one", 3, err, sizeof err), 0);
    assert_int_equal(st_write_file_atomic(path, "two!", 4, err, sizeof err), 0);
    size_t len = 0;
    char *b = st_read_file(path, 100, &len, err, sizeof err);
    assert_non_null(b);
    assert_string_equal(b, "two!");
    free(b);
    /* a FIFO: refused, still a FIFO (a write into it would block: the refusal comes first) */
    snprintf(p2, sizeof p2, "%s/fifo", dir);
    assert_int_equal(mkfifo(p2, 0600), 0);
    assert_int_equal(st_write_file_atomic(p2, "x", 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "is a FIFO, not a regular file; refusing to replace it"));
    struct stat st;
    assert_int_equal(lstat(p2, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    unlink(p2);
    /* a device node (checked, never written) */
    assert_int_equal(st_outfile_check("/dev/null", err, sizeof err), -1);
    assert_non_null(strstr(err, "/dev/null: is a character device"));
    /* a symlink at the destination: refused, its target untouched */
    snprintf(tgt, sizeof tgt, "%s/target", dir);
    assert_int_equal(st_write_file_atomic(tgt, "keep", 4, err, sizeof err), 0);
    snprintf(p2, sizeof p2, "%s/link", dir);
    assert_int_equal(symlink(tgt, p2), 0);
    assert_int_equal(st_write_file_atomic(p2, "evil", 4, err, sizeof err), -1);
    assert_non_null(strstr(err, "is a symbolic link"));
    b = st_read_file(tgt, 100, &len, err, sizeof err);
    assert_string_equal(b, "keep");
    free(b);
    unlink(p2);
    /* a symlink planted at PATH.tmp: removed, never followed */
    snprintf(p2, sizeof p2, "%s.tmp", path);
    assert_int_equal(symlink(tgt, p2), 0);
    st_outfile o;
    assert_int_equal(st_outfile_open(&o, path, err, sizeof err), 0);
    assert_int_equal(st_fd_write_all(o.fd, "three", 5), 0);
    assert_int_equal(st_outfile_commit(&o, err, sizeof err), 0);
    b = st_read_file(tgt, 100, &len, err, sizeof err);
    assert_string_equal(b, "keep");
    free(b);
    b = st_read_file(path, 100, &len, err, sizeof err);
    assert_string_equal(b, "three");
    free(b);
    assert_int_equal(lstat(p2, &st), -1);
    unlink(path);
    unlink(tgt);
    assert_int_equal(rmdir(dir), 0);
}

/* st_grow doubles from its first size and refuses a size that would overflow; st_cmp_double is
 * a total order with NaN last. */
static void util_grow_and_order(void **state)
{
    (void)state;
    int *a = NULL;
    size_t cap = 0;
    assert_int_equal(st_grow((void **)&a, &cap, 1, sizeof *a, 4), 0);
    assert_int_equal(cap, 4);
    assert_int_equal(st_grow((void **)&a, &cap, 4, sizeof *a, 4), 0);
    assert_int_equal(cap, 4);
    assert_int_equal(st_grow((void **)&a, &cap, 9, sizeof *a, 4), 0);
    assert_int_equal(cap, 16);
    for (int i = 0; i < 16; i++)
        a[i] = i;
    assert_int_equal(st_grow((void **)&a, &cap, (size_t)-1 / 2, sizeof *a, 4), -1);
    assert_int_equal(cap, 16);
    assert_int_equal(a[15], 15);
    free(a);
    double v[] = { 3, NAN, -1, 2, NAN, 0 };
    qsort(v, 6, sizeof *v, st_cmp_double);
    assert_true(v[0] == -1 && v[1] == 0 && v[2] == 2 && v[3] == 3);
    assert_true(isnan(v[4]) && isnan(v[5]));
    char err[8];
    st_errf(err, sizeof err, "%s", "truncated here");
    assert_string_equal(err, "truncat");
    st_errf(NULL, 0, "%d", 1);
}

/* Redaction: every occurrence, the longest secret first, NULs in the data, a secret's start held
 * back at the end of a chunk; the stream passes text on redacted even when the secret is cut
 * between two writes; names that look like credentials. */
static void secrets_are_redacted(void **state)
{
    (void)state;
    st_secrets s = { 0 };
    assert_int_equal(st_secrets_add(&s, "abcd"), 0);
    assert_int_equal(st_secrets_add(&s, "xxabcdyy"), 0);
    assert_int_equal(st_secrets_add(&s, "abcd"), 0); /* once */
    assert_int_equal(s.n, 2);
    assert_int_equal(st_secrets_add(&s, "abc"), -1); /* too short to tell from text */
    assert_int_equal(st_secrets_add(&s, NULL), 0);
    char t[] = "k=xxabcdyy and abcd, abcdabcd";
    st_secrets_redact(&s, t);
    assert_string_equal(t, "k=*** and ***, ******");
    char bin[] = { 'a', 'b', 'c', 'd', '\0', 'a', 'b', 'c', 'd', '!' };
    size_t n = st_secrets_redact_n(&s, bin, sizeof bin);
    assert_int_equal(n, 8);
    assert_memory_equal(bin, "***\0***!", 8);
    assert_int_equal(st_secrets_partial_tail(&s, "line xxab", 9), 4);
    assert_int_equal(st_secrets_partial_tail(&s, "line\n", 5), 0);
    char path[] = "/tmp/st_core_secret_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *under = fdopen(fd, "w+");
    FILE *f = st_secrets_stream(under, &s);
    assert_non_null(f);
    fputs("key: xxab", f);
    fflush(f);
    fputs("cdyy done\n", f);
    fclose(f);
    fflush(under);
    rewind(under);
    char got[64] = "";
    assert_non_null(fgets(got, sizeof got, under));
    assert_string_equal(got, "key: *** done\n");
    fclose(under);
    unlink(path);
    st_secrets c;
    assert_int_equal(st_secrets_copy(&c, &s), 0);
    assert_int_equal(c.n, 2);
    st_secrets_free(&c);
    st_secrets_free(&s);
    assert_true(st_secret_name("HF_TOKEN") && st_secret_name("--api-key") && st_secret_name("Authorization"));
    assert_false(st_secret_name("--max-num-batched-tokens") || st_secret_name("MONKEY"));
}

/* Text from a server or an engine loses its control characters: no escape sequence reaches a
 * terminal (ESC, and CSI as the UTF-8-encoded C1 control U+009B). */
static void text_is_sanitized(void **state)
{
    (void)state;
    char t[] = "ok\x1b[2J\x1b]0;pwned\x07 \xc2\x9b"
               "31m caf\xc3\xa9\nnext\x7f";
    st_text_sanitize(t, 1);
    assert_string_equal(t, "ok [2J ]0;pwned    31m caf\xc3\xa9\nnext ");
    st_text_sanitize(t, 0);
    assert_null(strchr(t, '\n'));
}

static void strv_split_and_has(void **state)
{
    (void)state;
    st_strv v = { 0 };
    assert_int_equal(st_strv_push_split(&v, "a,bb,,c,", ','), 0);
    assert_int_equal(st_strv_push_split(&v, "d", ','), 0);
    assert_int_equal(v.n, 4);
    assert_string_equal(v.v[1], "bb");
    assert_true(st_strv_has(&v, "d"));
    assert_false(st_strv_has(&v, ""));
    st_strv_free(&v);
    assert_int_equal(v.n, 0);
}

/* st_mkdir_p makes every missing folder (repeated slashes and an existing prefix fine), refuses a
 * file in the way naming it; st_mkdir_parents makes a file's folders and nothing for a bare name. */
static void mkdir_p_makes_parents(void **state)
{
    (void)state;
    char base[] = "/tmp/st_core_mkdir.XXXXXX", p[256], err[512];
    assert_non_null(mkdtemp(base));
    struct stat st;
    snprintf(p, sizeof p, "%s/a//b/c/", base);
    assert_int_equal(st_mkdir_p(p, err, sizeof err), 0);
    snprintf(p, sizeof p, "%s/a/b/c", base);
    assert_int_equal(stat(p, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st_mkdir_p(p, err, sizeof err), 0); /* exists: fine */
    snprintf(p, sizeof p, "%s/x/y/out.json", base);
    assert_int_equal(st_mkdir_parents(p, err, sizeof err), 0);
    snprintf(p, sizeof p, "%s/x/y", base);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st_mkdir_parents("bare.json", err, sizeof err), 0);
    /* a file where a folder must go */
    snprintf(p, sizeof p, "%s/file", base);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fclose(f);
    snprintf(p, sizeof p, "%s/file/sub", base);
    assert_int_equal(st_mkdir_p(p, err, sizeof err), -1);
    assert_non_null(strstr(err, "/file: Not a directory"));
    assert_int_equal(st_mkdir_p("", err, sizeof err), -1);
    /* st_same_file: the same file under another name (./, a hard link), not a copy or a missing one */
    char q[300], lnk[300], copy[300];
    snprintf(p, sizeof p, "%s/file", base);
    snprintf(q, sizeof q, "%s/./x/../file", base);
    snprintf(lnk, sizeof lnk, "%s/link", base);
    snprintf(copy, sizeof copy, "%s/copy", base);
    assert_int_equal(link(p, lnk), 0);
    f = fopen(copy, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(st_same_file(p, p), 1);
    assert_int_equal(st_same_file(p, q), 1);
    assert_int_equal(st_same_file(lnk, p), 1);
    assert_int_equal(st_same_file(copy, p), 0);
    snprintf(q, sizeof q, "%s/missing", base);
    assert_int_equal(st_same_file(q, q), 0);
    assert_int_equal(st_same_file(NULL, p), 0);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf -- '%s'", base);
    assert_int_equal(system(cmd), 0);
}

/* After st_heap_for_runs, with glibc's heap, a block of 20 MiB comes from the heap (not a mapping of its own), and once
 * freed it stays in the process for the next run (releasable, not given back). */
static void heap_kept_for_runs(void **state)
{
    (void)state;
    st_heap_for_runs();
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) /* (ASan keeps its own heap) */
    struct mallinfo2 m0 = mallinfo2();
    char *p = malloc(20u << 20);
    assert_non_null(p);
    memset(p, 1, 20u << 20);
    struct mallinfo2 m1 = mallinfo2();
    assert_int_equal(m1.hblkhd, m0.hblkhd); /* no new mapping */
    free(p);
    struct mallinfo2 m2 = mallinfo2();
    assert_true(m2.keepcost >= (20u << 20)); /* kept at the heap's top */
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(buf_respects_max),
        cmocka_unit_test(buf_error_is_sticky),
        cmocka_unit_test(buf_shell_quote_round_trips),
        cmocka_unit_test(buf_json_and_html_escape),
        cmocka_unit_test(parse_strict_numbers),
        cmocka_unit_test(opts_table),
        cmocka_unit_test(virtual_clock),
        cmocka_unit_test(read_file_bounded),
        cmocka_unit_test(mkdir_p_makes_parents),
        cmocka_unit_test(output_files_written_safely),
        cmocka_unit_test(util_grow_and_order),
        cmocka_unit_test(secrets_are_redacted),
        cmocka_unit_test(text_is_sanitized),
        cmocka_unit_test(strv_split_and_has),
        cmocka_unit_test(heap_kept_for_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
