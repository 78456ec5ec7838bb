/* A bounded parser of the Prometheus text exposition format (0.0.4), as engines serve it on
 * /metrics, with histogram helpers. Pure: takes the scraped body, allocates nothing.
 *
 * Format handled: one sample per line, `name{label="value",...} value [timestamp_ms]`;
 * `#` lines (HELP, TYPE, comments) and blank lines skipped; label values with the escapes
 * \\ \" \n; values as Go's ParseFloat reads them (+Inf, -Inf, NaN included); a trailing
 * comma in the label set; blanks around tokens. Lines longer than ST_PROM_LINE_MAX are
 * reported as malformed and skipped; a malformed line never stops the iteration. */
#ifndef ST_ENGINE_PROM_H
#define ST_ENGINE_PROM_H
#include <stddef.h>
#include <stdint.h>

#define ST_PROM_LINE_MAX 65536
#define ST_PROM_BUCKETS_MAX 64

typedef struct st_prom_sample {
    const char *name; /* view into the text */
    size_t name_len;
    const char *labels; /* the text between the braces (may be empty); see st_prom_label */
    size_t labels_len;
    double value;
    int has_timestamp;
    int64_t timestamp_ms;
    uint32_t line; /* 1-based line number */
} st_prom_sample;

typedef struct st_prom_iter {
    const char *p, *end;
    uint32_t line;
} st_prom_iter;

void st_prom_iter_init(st_prom_iter *it, const char *text, size_t len);
/* 1: a sample in *s; 0: end of text; -1: a malformed line (reason in err, "line N: ..."),
 * skipped: call again to continue. */
int st_prom_next(st_prom_iter *it, st_prom_sample *s, char *err, size_t errlen);

/* The unescaped value of label `name` of a sample: 0 found (truncated to cap - 1 bytes when
 * longer; always NUL-terminated), 1 absent, -1 malformed label text. */
int st_prom_label(const st_prom_sample *s, const char *name, char *buf, size_t cap);
/* 1 when the sample has every label of `match`, written "k=v,k2=v2" (values without
 * commas; NULL or "" matches every sample). */
int st_prom_match(const st_prom_sample *s, const char *match);

/* The first sample named `name` (exact) that matches: 0 found, 1 absent. */
int st_prom_get(const char *text, size_t len, const char *name, const char *match, double *out);
/* Sum over every matching sample named `name` (all label sets): 0 with *count > 0, 1 when
 * none (sum 0). count may be NULL. */
int st_prom_sum(const char *text, size_t len, const char *name, const char *match, double *sum, uint32_t *count);

/* A histogram: cumulative bucket counts by upper bound (le, ascending, +Inf last), summed
 * over every matching label set. */
typedef struct st_prom_hist {
    uint32_t n;
    double le[ST_PROM_BUCKETS_MAX];
    double count[ST_PROM_BUCKETS_MAX];
    double sum, total; /* name_sum and name_count */
} st_prom_hist;
/* Reads base_bucket / base_sum / base_count. 0 found (n > 0), 1 absent, -1 more than
 * ST_PROM_BUCKETS_MAX distinct bounds. */
int st_prom_histogram(const char *text, size_t len, const char *base, const char *match, st_prom_hist *h);
/* Per-interval histogram: later - earlier, bucket by bucket (bounds must agree; -1 if not). */
int st_prom_hist_delta(const st_prom_hist *earlier, const st_prom_hist *later, st_prom_hist *out);
/* Prometheus' histogram_quantile: linear interpolation inside the bucket holding rank
 * q * total (q in [0, 1]); the lowest bucket interpolates from 0; a rank in the +Inf bucket
 * returns the highest finite bound. NAN when empty. */
double st_prom_hist_quantile(const st_prom_hist *h, double q);

#endif
