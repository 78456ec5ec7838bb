/* Small helpers every layer needs once: growing an array by doubling, ordering doubles for qsort,
 * white space, text made safe, slugs, and writing an error message into a caller's buffer. */
#ifndef ST_CORE_UTIL_H
#define ST_CORE_UTIL_H
#include <stddef.h>

/* Makes room for `need` elements of `elem` bytes in *arr (capacity *cap, counted in elements):
 * doubles from `first` (16 when 0) until it fits. 0, or -1 when out of memory or the size would
 * overflow (the array is left as it was). */
int st_grow(void **arr, size_t *cap, size_t need, size_t elem, size_t first);

/* qsort comparator of doubles, ascending; NaN sorts after every number (a total order). */
int st_cmp_double(const void *a, const void *b);

/* Makes text from elsewhere (a server's answer, an engine's log) safe for a terminal and a report:
 * every C0 control character (escape included), DEL and UTF-8-encoded C1 control is replaced by a
 * space, in place (newlines too unless keep_newlines). The length does not change. */
void st_text_sanitize(char *s, int keep_newlines);

/* A name safe in a DNS label, a file name and a shell word: s lower-cased, every run of other
 * characters one '-', no '-' at either end, at most max bytes (and n - 1); "" when nothing is
 * left. */
void st_slug(const char *s, char *out, size_t n, size_t max);

/* White space as JSON and the trace and log formats have it: space, tab, CR, LF. */
static inline int st_is_ws(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
/* Drops the white space at both ends of the n bytes at *p. */
void st_trim(const char **p, size_t *n);
/* 1 when a line of n bytes says nothing: only white space, or a '#' comment after it. */
int st_line_is_blank(const char *s, size_t n);

/* vsnprintf into err (nothing when err is NULL or errlen 0). */
void st_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The C library's heap tuned for a process that runs many simulations one after another (predict,
 * plan, the benchmarks that stand for them): the memory a run frees at the heap's top is kept, up to
 * ST_HEAP_KEEP_BYTES, rather than handed back to the kernel, and blocks up to ST_HEAP_MMAP_BYTES come
 * from the heap rather than from a mapping of their own, so the next run reuses pages instead of
 * faulting fresh ones in (glibc gives back everything past 128 KiB by default). Call once at start;
 * with another C library it does nothing. */
#define ST_HEAP_KEEP_BYTES (64u << 20)
#define ST_HEAP_MMAP_BYTES (32u << 20)
void st_heap_for_runs(void);

#endif
