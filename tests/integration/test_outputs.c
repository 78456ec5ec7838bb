/* Output files are written safely by the commands that take a path: `trace stats --json FILE`
 * and `gguf -o FILE` refuse a FIFO or a symlink at FILE (a device node the same way: core/file.h)
 * and leave it as it was, instead of replacing it with a regular file or following the link. */
#include "harness.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static void outputs_refuse_fifos_and_symlinks(void **state)
{
    (void)state;
    char dir[] = "/tmp/st-outputsXXXXXX", trace[128], fifo[128], link[128], target[128], out[8192];
    assert_non_null(mkdtemp(dir));
    snprintf(trace, sizeof trace, "%s/t.jsonl", dir);
    FILE *f = fopen(trace, "w");
    assert_non_null(f);
    for (int i = 0; i < 20; i++)
        fprintf(f, "{\"timestamp\": %d, \"input_tokens\": 100, \"output_tokens\": 10}\n", i);
    fclose(f);
    snprintf(fifo, sizeof fifo, "%s/out.fifo", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    char *a[] = { (char *)st_test_bin(), "trace", "stats", trace, "--json", fifo, NULL };
    int rc = st_test_capture(a, out, sizeof out);
    assert_true(rc != 0);
    if (!strstr(out, "is a FIFO, not a regular file; refusing to replace it"))
        fail_msg("trace stats said: %s", out);
    struct stat st;
    assert_int_equal(lstat(fifo, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    /* a symlink at the output: refused, its target untouched */
    snprintf(target, sizeof target, "%s/target", dir);
    f = fopen(target, "w");
    fputs("keep", f);
    fclose(f);
    snprintf(link, sizeof link, "%s/out.json", dir);
    assert_int_equal(symlink(target, link), 0);
    char *b[] = { (char *)st_test_bin(), "trace", "stats", trace, "--json", link, NULL };
    rc = st_test_capture(b, out, sizeof out);
    assert_true(rc != 0);
    if (!strstr(out, "is a symbolic link, not a regular file"))
        fail_msg("trace stats said: %s", out);
    assert_true(file_has(target, "keep"));
    /* gguf -o: refused before anything is built (so before the vocabulary is read) */
    char *g[] = {
        (char *)st_test_bin(), "gguf", "--arch", "llama", "--size", "30M", "--vocab", trace, "-o", fifo, NULL
    };
    rc = st_test_capture(g, out, sizeof out);
    assert_true(rc != 0);
    if (!strstr(out, "out.fifo: is a FIFO, not a regular file; refusing to replace it"))
        fail_msg("gguf said: %s", out);
    assert_int_equal(lstat(fifo, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    /* a plain path: written */
    char plain[128];
    snprintf(plain, sizeof plain, "%s/stats.json", dir);
    char *c[] = { (char *)st_test_bin(), "trace", "stats", trace, "--json", plain, NULL };
    rc = st_test_capture(c, out, sizeof out);
    if (rc != 0)
        fail_msg("trace stats exited %d: %s", rc, out);
    assert_int_equal(lstat(plain, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    unlink(plain);
    unlink(link);
    unlink(target);
    unlink(fifo);
    unlink(trace);
    assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(outputs_refuse_fifos_and_symlinks),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
