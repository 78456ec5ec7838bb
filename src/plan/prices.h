/* GPU price lists: $ per GPU-hour by GPU, provider and billing kind, each figure with its
 * source and date. servetune ships one (data/gpu-prices.csv, built into the binary, documented
 * in docs/prices.md); a user's own CSV replaces it. No I/O here: the caller reads the file.
 *
 * Columns (a header row names them; order free, unknown columns ignored):
 *   gpu_key           required: the GPU as the engine model's catalog names it (H100, H100-NVL,
 *                     H200, A100, A100-PCIe, L40S, RTX4090, ...)
 *   usd_per_gpu_hour  required: a number > 0, at most 1000 (for serverless: the per-second price x 3600)
 *   kind              on-demand (default), spot, marketplace, serverless (per-second,
 *                     scale-to-zero), serverless-active, endpoint, suspect (never used)
 *   provider, offering, source, source_date, note   text, shown with the figure
 * A row that breaks a rule is an error naming its line ("prices.csv:12: usd_per_gpu_hour:
 * expected a number > 0, got 'n/a'"): a price list is used whole or not at all. */
#ifndef ST_PLAN_PRICES_H
#define ST_PLAN_PRICES_H
#include <stddef.h>
#include <stdint.h>

#define ST_PRICES_MAX_BYTES ((size_t)16 << 20)
#define ST_PRICES_MAX_ROWS 100000
/* The highest usd_per_gpu_hour a row may give (as a spec's hardware.price_per_gpu_hour). */
#define ST_PRICES_MAX_USD_PER_GPU_HOUR 1000.0

typedef enum st_price_kind {
    ST_PRICE_ON_DEMAND = 0,
    ST_PRICE_SPOT,
    ST_PRICE_MARKETPLACE,
    ST_PRICE_SERVERLESS,
    ST_PRICE_SERVERLESS_ACTIVE,
    ST_PRICE_ENDPOINT,
    ST_PRICE_SUSPECT,
    ST_PRICE__COUNT
} st_price_kind;

const char *st_price_kind_name(st_price_kind k);

typedef struct st_price {
    char *gpu_key, *provider, *offering, *source, *source_date;
    st_price_kind kind;
    double usd_per_gpu_hour;
    uint32_t line; /* in the file */
} st_price;

typedef struct st_prices {
    char *origin; /* the file name, or "built-in" */
    st_price *v;
    int n;
} st_prices;

/* Parses a price list. name is used in messages. 0, or -1 with "NAME:LINE: reason". */
int st_prices_parse(const char *name, const char *text, size_t len, st_prices *out, char *err, size_t errlen);
/* The price list built into servetune (data/gpu-prices.csv). */
int st_prices_builtin(st_prices *out, char *err, size_t errlen);
void st_prices_free(st_prices *p);

/* The price of gpu_key of that kind: provider's (case-insensitive) when provider is given,
 * else the lowest listed; when there is none, that of "<GPU>-unspecified" (a source that does
 * not say SXM, PCIe or NVL: H100-NVL falls back to H100-unspecified). NULL when none. */
const st_price *st_prices_pick(const st_prices *p, const char *gpu_key, st_price_kind kind, const char *provider);
/* The distinct GPU keys that have a price of that kind, in file order (at most max). */
int st_prices_gpus(const st_prices *p, st_price_kind kind, const char **keys, int max);

#endif
