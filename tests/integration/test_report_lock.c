/* One writer of an audit folder's results at a time: `servetune report DIR` and `audit --merge
 * DIR` take the lock file DIR/.servetune.lock (flock), and refuse, by name, while another
 * process holds it (two at once replaced each other's database and files). */
#include "harness.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit/store.h"
#include "core/file.h"

static void report_and_merge_take_the_lock(void **state)
{
    (void)state;
    char dir[] = "/tmp/st-report-lockXXXXXX", lock[128], out[8192];
    assert_non_null(mkdtemp(dir));
    st_store *s;
    char err[512];
    assert_int_equal(st_store_open(dir, &s, err, sizeof err), 0); /* a results database there */
    st_store_close(s);
    snprintf(lock, sizeof lock, "%s/%s", dir, ST_LOCK_FILE);
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0); /* another servetune at work there */
    char *report[] = { (char *)st_test_bin(), "report", dir, NULL };
    int rc = st_test_capture(report, out, sizeof out);
    assert_int_equal(rc, 1);
    if (!strstr(out, "is in use by another servetune (a report or merge is running there)"))
        fail_msg("report said: %s", out);
    char *merge[] = { (char *)st_test_bin(), "audit", "--merge", dir, NULL };
    rc = st_test_capture(merge, out, sizeof out);
    assert_true(rc != 0);
    if (!strstr(out, "is in use by another servetune"))
        fail_msg("merge said: %s", out);
    close(fd);
    /* released: report goes past the lock (the database holds no audit: said as such) */
    rc = st_test_capture(report, out, sizeof out);
    assert_null(strstr(out, "in use by another servetune"));
    const char *files[] = { ST_LOCK_FILE, "results.sqlite", "results.sqlite-wal", "results.sqlite-shm",
                            "report.md",  "report.json",    "report.html",        "results.csv" };
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(lock, sizeof lock, "%s/%s", dir, files[i]);
        unlink(lock);
    }
    assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(report_and_merge_take_the_lock),
    };
    return cmocka_run_group_tests(t, 0, 0);
}
