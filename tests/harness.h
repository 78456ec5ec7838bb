/* Common includes for the cmocka tests. Each test file ends with
 *   int main(void) { const struct CMUnitTest t[] = {...}; return cmocka_run_group_tests(t, 0, 0); }
 * tests/run.sh runs every binary with TAP output and prints "N passed, N failed". */
#ifndef ST_TEST_HARNESS_H
#define ST_TEST_HARNESS_H
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Asserts |a - b| <= tol. */
#define assert_near(a, b, tol)                                                                                         \
    do {                                                                                                               \
        double a_ = (a), b_ = (b), t_ = (tol);                                                                         \
        if (!(fabs(a_ - b_) <= t_))                                                                                    \
            fail_msg("%s = %.9g, expected %.9g within %.3g", #a, a_, b_, t_);                                          \
    } while (0)

/* How many times needle occurs in hay (occurrences that do not overlap). */
static inline int st_test_count(const char *hay, const char *needle)
{
    int n = 0;
    size_t l = strlen(needle);
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += l)
        n++;
    return n;
}

/* A file's first MiB (less a byte), NUL-terminated, in a buffer the next call reuses; *len its
 * length. NULL when it cannot be opened. */
static inline char *st_test_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    static char buf[1 << 20];
    *len = fread(buf, 1, sizeof buf - 1, f);
    buf[*len] = '\0';
    fclose(f);
    return buf;
}

/* Path of the servetune binary under test (the same build as the test). */
static inline const char *st_test_bin(void)
{
    const char *b = getenv("SERVETUNE_BIN");
    return b ? b : "build-asan/servetune";
}
/* Runs argv (argv[0] a path) with stdout and stderr into out (at most cap - 1 bytes, always
 * NUL-terminated); returns its exit status (-1 when it did not exit). */
#include <sys/wait.h>
#include <unistd.h>
static inline int st_test_capture(char *const *argv, char *out, size_t cap)
{
    int fd[2];
    if (pipe(fd))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        dup2(fd[1], 2);
        close(fd[0]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fd[1]);
    size_t n = 0;
    ssize_t k;
    while (n + 1 < cap && (k = read(fd[0], out + n, cap - 1 - n)) > 0)
        n += (size_t)k;
    out[n] = '\0';
    close(fd[0]);
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
/* Whether the file (its first 4 MiB) contains needle (0 when it cannot be read). */
static inline int file_has(const char *path, const char *needle)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    static char buf[4 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, needle) != NULL;
}
#endif
