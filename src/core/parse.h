/* Strict conversions of text to numbers: the whole string must be consumed, no
 * overflow, no silent defaults (instead of atoi/atof). Return 0 or -1. */
#ifndef ST_PARSE_H
#define ST_PARSE_H
#include <stddef.h>
#include <stdint.h>

int st_parse_double(const char *s, double *out);
int st_parse_long(const char *s, long *out);
int st_parse_u64(const char *s, uint64_t *out);
/* A rate: a positive number or "inf" (stored as INFINITY). */
int st_parse_rate(const char *s, double *out);
/* "N" or "LO-HI" (whole numbers, min <= LO <= HI <= max); N gives LO = HI = N. */
int st_parse_range_u32(const char *s, uint32_t min, uint32_t max, uint32_t *lo, uint32_t *hi);
/* The longest duration st_parse_duration_s accepts (a year): anything longer is a typo or a
 * foreign unit, and every accepted duration fits a nanosecond clock (st_ns) with room to spare. */
#define ST_DURATION_MAX_S (366.0 * 86400.0)
/* A duration with an optional unit suffix (ns, us, ms, s, m, h); bare numbers are seconds, at most
 * ST_DURATION_MAX_S. */
int st_parse_duration_s(const char *s, double *out_seconds);
/* Formats v with the fewest significant digits that read back as the same double,
 * like Python's repr (0.005, 2.5, 1e-06); integral values get ".0" when python_style is set
 * (what prometheus_client prints for histogram bounds). Returns dst. */
char *st_fmt_shortest(char *dst, size_t dstlen, double v, int python_style);
/* Copies at most dstlen-1 bytes and always terminates. Returns the length of src. */
size_t st_strlcpy(char *dst, const char *src, size_t dstlen);

#endif
