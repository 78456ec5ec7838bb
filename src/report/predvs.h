/* Predicted vs measured: a measured audit runs `servetune predict` on its own spec first (the
 * engine model, seconds, DIR/prediction/), stores a summary of the prediction in the results
 * database (meta "predicted", JSON), and every report shows, per configuration, the predicted
 * and the measured capacity, TTFT p95 and TPOT p95 side by side with the error. The figures
 * are compared at the same offered rate (the measured capacity rate; after a sustained
 * measurement the model runs once more at that rate, st_cli_predict_at_measured), so the error
 * is the model's, not the grid's. Renderers are pure functions of the loaded model.
 *
 * Summary JSON (meta "predicted"): {"calibration": FILE|null, "configs": [{"name": N, "status":
 * "ok"|..., "pass_rate": R|null, "capacity_rps": X|null, "rates": [{"rate": R, "verdict": V,
 * "ttft_p95_ms": T, "tpot_p95_ms": P, "output_tps": O}, ...]}, ...]} */
#ifndef ST_REPORT_PREDVS_H
#define ST_REPORT_PREDVS_H
#include <stddef.h>

#include "audit/store.h"
#include "core/buf.h"

#define ST_PREDVS_META "predicted"
#define ST_PREDVS_RATES_MAX 64

typedef struct st_predvs_rate {
    double rate, ttft_p95_ms, tpot_p95_ms, output_tps;
    char verdict[16];
} st_predvs_rate;

typedef struct st_predvs_cfg {
    char name[128];
    char status[24];
    double pass_rate, capacity_rps; /* NAN when nothing passed */
    st_predvs_rate rates[ST_PREDVS_RATES_MAX];
    int n_rates;
} st_predvs_cfg;

typedef struct st_predvs {
    int present;
    char calibration[256]; /* the calibration file the prediction used, or "" */
    st_predvs_cfg *cfg;
    int n_cfg;
} st_predvs;

/* The summary of a prediction's store (the report model of DIR/prediction), as JSON text in
 * out. calibration: the file name or NULL. 0, or -1 with err. */
int st_predvs_summarise(st_store *pred, const char *calibration, st_buf *out, char *err, size_t errlen);
/* Parses the meta value. 0 (p->present), or -1 on malformed JSON (p->present = 0). */
int st_predvs_parse(const char *json, st_predvs *p);
void st_predvs_free(st_predvs *p);
/* The predicted configuration of that name, or NULL. */
const st_predvs_cfg *st_predvs_find(const st_predvs *p, const char *name);
/* The predicted figures at offered rate `rate` (exact match within 1e-9 relative), or NULL. */
const st_predvs_rate *st_predvs_at(const st_predvs_cfg *c, double rate);

struct st_report;
/* The "Predicted vs measured" section (markdown), nothing when the audit has no prediction. */
void st_predvs_markdown(const struct st_report *r, st_buf *b);
/* The report.json member value (an object, or JSON null). */
struct json_t;
struct json_t *st_predvs_json(const struct st_report *r);
/* The comparison as table rows for other renderers: for configuration i, the cells
 * capacity predicted / measured / error, TTFT p95 predicted / measured / error, TPOT p95 ...
 * (9 strings written into cells[9][32]). 0, or -1 when there is nothing to compare. */
int st_predvs_cells(const struct st_report *r, int i, char cells[9][32]);

#endif
