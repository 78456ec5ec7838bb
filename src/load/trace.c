/* Trace readers (load/trace.h): one push parser for every format, rows out through a
 * callback. The servetune format is parsed by load/workload.c (jansson, as before); every
 * other format here with core/json's allocation-free scanner and a small CSV splitter, so a
 * large trace streams at the speed of the disk. */
#include "load/trace.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "core/buf.h"
#include "core/util.h"
#include "core/csv.h"
#include "core/json.h"
#include "core/rng.h"

static const char *const format_names[ST_TRACE__COUNT] = { "auto",     "servetune", "mooncake", "azure",
                                                           "burstgpt", "litellm",   "csv" };

const char *st_trace_format_name(st_trace_format f)
{
    return ((unsigned)f < ST_TRACE__COUNT) ? format_names[f] : "unknown";
}

int st_trace_format_from_name(const char *name, st_trace_format *out)
{
    for (int i = 0; name && i < ST_TRACE__COUNT; i++)
        if (!strcmp(name, format_names[i])) {
            *out = (st_trace_format)i;
            return 0;
        }
    return -1;
}

/* ---- small parsers ---------------------------------------------------------------- */


/* A token count: digits, optionally followed by ".0..." (some exports write 12.0). */
static int parse_count(const char *p, size_t n, const char *what, uint32_t *out, char *err, size_t errlen)
{
    st_trim(&p, &n);
    if (n == 0) {
        st_errf(err, errlen, "%s is empty", what);
        return -1;
    }
    if (p[0] == '-') {
        st_errf(err, errlen, "%s is negative (%.*s)", what, (int)(n > 40 ? 40 : n), p);
        return -1;
    }
    uint64_t v = 0;
    size_t i = 0;
    for (; i < n && p[i] >= '0' && p[i] <= '9'; i++) {
        v = v * 10 + (uint64_t)(p[i] - '0');
        if (v > (uint64_t)1 << 40)
            break;
    }
    if (i < n && p[i] == '.' && i > 0) {
        size_t k = i + 1;
        while (k < n && p[k] == '0')
            k++;
        if (k == n)
            i = n;
    }
    if (i == 0 || i != n) {
        st_errf(err, errlen, "%s is not a token count: \"%.*s\"", what, (int)(n > 40 ? 40 : n), p);
        return -1;
    }
    if (v > ST_WORKLOAD_MAX_TOKENS) {
        st_errf(err, errlen, "%s %llu is above the largest supported length (%u tokens)", what, (unsigned long long)v,
                ST_WORKLOAD_MAX_TOKENS);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

static int parse_number(const char *p, size_t n, double *out)
{
    st_trim(&p, &n);
    char tmp[64];
    if (n == 0 || n >= sizeof tmp)
        return -1;
    memcpy(tmp, p, n);
    tmp[n] = '\0';
    char *end;
    errno = 0;
    double v = strtod(tmp, &end);
    if (end != tmp + n || errno || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

/* Days from 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static int digits(const char *s, size_t len, size_t at, size_t n, int *out)
{
    if (at + n > len)
        return -1;
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[at + i];
        if (c < '0' || c > '9')
            return -1;
        v = v * 10 + (c - '0');
    }
    *out = v;
    return 0;
}

int st_trace_parse_datetime(const char *s, size_t len, double *out)
{
    st_trim(&s, &len);
    int Y, M, D, h, m, sec;
    if (digits(s, len, 0, 4, &Y) || len < 19 || s[4] != '-' || digits(s, len, 5, 2, &M) || s[7] != '-' ||
        digits(s, len, 8, 2, &D) || (s[10] != ' ' && s[10] != 'T') || digits(s, len, 11, 2, &h) || s[13] != ':' ||
        digits(s, len, 14, 2, &m) || s[16] != ':' || digits(s, len, 17, 2, &sec))
        return -1;
    if (M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || sec > 60)
        return -1;
    size_t i = 19;
    double frac = 0, scale = 0.1;
    if (i < len && (s[i] == '.' || s[i] == ',')) {
        i++;
        size_t start = i;
        while (i < len && s[i] >= '0' && s[i] <= '9') {
            frac += (s[i] - '0') * scale;
            scale /= 10;
            i++;
        }
        if (i == start)
            return -1;
    }
    int offset = 0;
    if (i < len && (s[i] == 'Z' || s[i] == 'z')) {
        i++;
    } else if (i < len && (s[i] == '+' || s[i] == '-')) {
        int sign = s[i] == '-' ? -1 : 1, oh, om = 0;
        i++;
        if (digits(s, len, i, 2, &oh))
            return -1;
        i += 2;
        if (i < len && s[i] == ':')
            i++;
        if (i < len) {
            if (digits(s, len, i, 2, &om))
                return -1;
            i += 2;
        }
        if (oh > 23 || om > 59)
            return -1;
        offset = sign * (oh * 3600 + om * 60);
    }
    if (i != len)
        return -1;
    int64_t days = days_from_civil(Y, (unsigned)M, (unsigned)D);
    *out = (double)(days * 86400 + h * 3600 + m * 60 + sec - offset) + frac;
    return 0;
}

/* A time field: a number of seconds, or a date and time. */
static int parse_time(const char *p, size_t n, double *out)
{
    if (parse_number(p, n, out) == 0)
        return 0;
    return st_trace_parse_datetime(p, n, out);
}

static uint64_t fnv64(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    return h ? h : 1;
}

/* ---- column map ------------------------------------------------------------------- */

enum {
    COL_NONE = 0,
    COL_TIMESTAMP,
    COL_TIMESTAMP_MS,
    COL_END_TIME,
    COL_INPUT,
    COL_OUTPUT,
    COL_MODEL,
    COL_SESSION,
    COL_TURN,
    COL_STATUS,
    COL_IGNORE,
    COL__COUNT
};

static const char *const col_field_names[COL__COUNT] = { "",         "timestamp",    "timestamp_ms",
                                                         "end_time", "input_tokens", "output_tokens",
                                                         "model",    "session_id",   "turn",
                                                         "status",   "ignore" };

/* Names the plain CSV recognises (compared after lower-casing, with ' ' and '-' read as '_'). */
static const struct {
    const char *name;
    int field;
} col_aliases[] = {
    { "timestamp", COL_TIMESTAMP },
    { "time", COL_TIMESTAMP },
    { "start_time", COL_TIMESTAMP },
    { "starttime", COL_TIMESTAMP },
    { "arrival_time", COL_TIMESTAMP },
    { "timestamp_ms", COL_TIMESTAMP_MS },
    { "end_time", COL_END_TIME },
    { "endtime", COL_END_TIME },
    { "input_tokens", COL_INPUT },
    { "prompt_tokens", COL_INPUT },
    { "input_length", COL_INPUT },
    { "context_tokens", COL_INPUT },
    { "contexttokens", COL_INPUT },
    { "request_tokens", COL_INPUT },
    { "output_tokens", COL_OUTPUT },
    { "completion_tokens", COL_OUTPUT },
    { "output_length", COL_OUTPUT },
    { "generated_tokens", COL_OUTPUT },
    { "generatedtokens", COL_OUTPUT },
    { "response_tokens", COL_OUTPUT },
    { "model", COL_MODEL },
    { "model_group", COL_MODEL },
    { "session_id", COL_SESSION },
    { "session", COL_SESSION },
    { "conversation_id", COL_SESSION },
    { "turn", COL_TURN },
    { "status", COL_STATUS },
    { "request_id", COL_IGNORE },
    { "id", COL_IGNORE },
    { "user", COL_IGNORE },
    { "team_id", COL_IGNORE },
    { "total_tokens", COL_IGNORE },
};

int st_trace_colmap_parse(const char *spec, st_trace_colmap *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    const char *p = spec;
    while (p && *p) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        const char *eq = memchr(p, '=', n);
        if (!eq || eq == p || eq == p + n - 1) {
            st_errf(err, errlen, "--trace-columns: expected field=Column, got \"%.*s\"", (int)(n > 60 ? 60 : n), p);
            return -1;
        }
        size_t fl = (size_t)(eq - p), cl = n - fl - 1;
        int known = 0;
        for (int f = 1; f < COL__COUNT; f++)
            if (strlen(col_field_names[f]) == fl && !strncmp(col_field_names[f], p, fl))
                known = 1;
        if (!known) {
            st_errf(err, errlen,
                    "--trace-columns: unknown field \"%.*s\" (fields: timestamp, timestamp_ms, end_time, input_tokens, "
                    "output_tokens, model, session_id, turn, status, ignore)",
                    (int)(fl > 40 ? 40 : fl), p);
            return -1;
        }
        if (out->n >= ST_TRACE_COLUMN_MAP_MAX || fl >= sizeof out->field[0] || cl >= sizeof out->column[0]) {
            st_errf(err, errlen, "--trace-columns: too many or too long entries");
            return -1;
        }
        memcpy(out->field[out->n], p, fl);
        out->field[out->n][fl] = '\0';
        memcpy(out->column[out->n], eq + 1, cl);
        out->column[out->n][cl] = '\0';
        out->n++;
        p = comma ? comma + 1 : NULL;
    }
    return 0;
}

static void norm_name(const char *p, size_t n, char *out, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < cap; i++) {
        char c = p[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        else if (c == ' ' || c == '-')
            c = '_';
        out[k++] = c;
    }
    out[k] = '\0';
}

/* ---- the reader ------------------------------------------------------------------- */

typedef struct sess_ent {
    uint64_t key;
    uint32_t full_prev, out_prev;
    double ts_prev, end_prev;
    uint32_t turns;
    uint8_t state; /* 0 free, 1 kept, 2 dropped (window), 3 dropped (sample), 4 dropped (model),
                      5 dropped (too long), 6 dropped (empty / malformed turn) */
} sess_ent;

enum { S_FREE = 0, S_KEPT, S_WINDOW, S_SAMPLE, S_MODEL, S_TOO_LONG, S_EMPTY, S_BROKEN };

typedef struct field {
    const char *p;
    size_t n;
} field;

struct st_trace_reader {
    st_trace_opts o;
    st_trace_quantum quantum; /* the kept rows' times */
    char name[256];
    st_trace_row_cb cb;
    void *arg;
    st_trace_format fmt;
    int decided;  /* format and mode known */
    int doc_mode; /* a JSON document whose rows are the elements of its first array */
    int stopped, failed;
    st_buf line; /* the current (partial) line */
    int line_too_long;
    uint64_t skipped; /* bytes of the over-long line being skipped */
    /* the stream's first bytes, looked at before anything else (byte-order mark, compression) */
    int sniffed;
    unsigned char head[ST_TRACE_SNIFF];
    size_t nhead;
    uint64_t lineno;
    /* JSON document splitter */
    int jdepth, jin_str, jesc, jarr_depth, jdone, jin_elem;
    int jtop_obj; /* the document is an object: its rows are the array under "data" */
    char jkey[8]; /* the last string at the top object's level (its keys), cut to 7 bytes */
    size_t jkey_len;
    int jkey_cap; /* capturing that string */
    st_buf elem;
    uint64_t elem_line;
    uint64_t jlast_line; /* the line of the document's last byte that is not white space */
    /* CSV */
    int have_header;
    int ncol;
    int col[ST_TRACE_CSV_COLUMNS_MAX];
    char colname[ST_TRACE_CSV_COLUMNS_MAX][64];
    field fields[ST_TRACE_CSV_COLUMNS_MAX];
    st_csv csv; /* the current line's fields */
    /* times */
    int ts_mode; /* -1 unknown, 0 none, 1 all */
    int have_t0;
    double t0, prev_ts;
    /* per row scratch */
    uint64_t *hash;
    size_t hash_cap;
    char model[ST_TRACE_FIELD_MAX], model2[ST_TRACE_FIELD_MAX], session_id[ST_TRACE_FIELD_MAX];
    /* sessions */
    sess_ent *sess;
    uint32_t sess_cap, sess_n;
    st_trace_counts c;
};

st_trace_reader *st_trace_reader_new(const st_trace_opts *o, const char *name, st_trace_row_cb cb, void *arg)
{
    st_trace_reader *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    if (o)
        r->o = *o;
    if (!r->o.block_size)
        r->o.block_size = ST_TRACE_BLOCK_DEFAULT;
    if (!(r->o.sample > 0 && r->o.sample <= 1))
        r->o.sample = 1;
    snprintf(r->name, sizeof r->name, "%s", name ? name : "trace");
    r->cb = cb;
    r->arg = arg;
    r->fmt = r->o.format;
    r->ts_mode = -1;
    r->jarr_depth = -1;
    st_buf_init(&r->line, ST_TRACE_LINE_MAX + 1);
    st_buf_init(&r->elem, ST_TRACE_LINE_MAX + 1);
    st_csv_init(&r->csv, "", 0);
    return r;
}

void st_trace_reader_free(st_trace_reader *r)
{
    if (!r)
        return;
    st_buf_free(&r->line);
    st_buf_free(&r->elem);
    st_csv_free(&r->csv);
    free(r->hash);
    free(r->sess);
    free(r);
}

const st_trace_counts *st_trace_reader_counts(const st_trace_reader *r) { return &r->c; }
st_trace_format st_trace_reader_format(const st_trace_reader *r) { return r->fmt; }

/* Session table: open addressing on the 64-bit key. NULL when full (ST_TRACE_SESSIONS_MAX)
 * or out of memory. */
static sess_ent *sess_get(st_trace_reader *r, uint64_t key, int *created)
{
    *created = 0;
    if (r->sess_n * 2 >= r->sess_cap) {
        uint32_t nc = r->sess_cap ? r->sess_cap * 2 : 1024;
        if (nc / 2 > ST_TRACE_SESSIONS_MAX)
            return NULL;
        sess_ent *ns = calloc(nc, sizeof *ns);
        if (!ns)
            return NULL;
        for (uint32_t i = 0; i < r->sess_cap; i++)
            if (r->sess[i].state) {
                uint32_t h = (uint32_t)st_mix64(r->sess[i].key) & (nc - 1);
                while (ns[h].state)
                    h = (h + 1) & (nc - 1);
                ns[h] = r->sess[i];
            }
        free(r->sess);
        r->sess = ns;
        r->sess_cap = nc;
    }
    uint32_t h = (uint32_t)st_mix64(key) & (r->sess_cap - 1);
    while (r->sess[h].state) {
        if (r->sess[h].key == key)
            return &r->sess[h];
        h = (h + 1) & (r->sess_cap - 1);
    }
    memset(&r->sess[h], 0, sizeof r->sess[h]);
    r->sess[h].key = key;
    r->sess[h].state = S_KEPT;
    r->sess_n++;
    *created = 1;
    return &r->sess[h];
}

static int hash_reserve(st_trace_reader *r, uint32_t n)
{
    return st_grow((void **)&r->hash, &r->hash_cap, n, sizeof *r->hash, 64);
}

static void copy_field(char *dst, size_t cap, const char *p, size_t n)
{
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, p, n);
    dst[n] = '\0';
}

/* Raw fields of a row before the common steps. */
typedef struct raw_row {
    int has_ts;
    double ts;
    double end; /* NAN */
    uint32_t in, out;
    int failed;
    const char *model, *model2;
    const char *session_id;
    size_t session_len;
    int has_turn;
    uint32_t turn;
    double think; /* NAN */
    const uint64_t *hash;
    uint32_t n_hash;
    int has_pg;
    uint32_t pg, pl;
    st_work_item *item;
    int input_is_new;        /* servetune: input_tokens of a later turn is the new text */
    const st_json_val *json; /* the row's JSON object (JSON formats), or NULL */
} raw_row;

/* Records a malformed row: an error, or a counted skip under max_bad. 0 skip, -1 error. */
static int bad_row(st_trace_reader *r, uint64_t line, const char *why, char *err, size_t errlen)
{
    char msg[320];
    snprintf(msg, sizeof msg, "%s:%llu: %s", r->name, (unsigned long long)line, why);
    if (r->c.bad >= r->o.max_bad) {
        if (r->o.max_bad)
            st_errf(err, errlen, "%s (more than --trace-max-bad %u malformed rows)", msg, r->o.max_bad);
        else
            st_errf(err, errlen, "%s", msg);
        return -1;
    }
    r->c.bad++;
    if (r->c.n_bad_first < ST_TRACE_BAD_KEPT)
        snprintf(r->c.bad_first[r->c.n_bad_first++], sizeof r->c.bad_first[0], "%s", msg);
    return 0;
}

/* A row on its way through emit's steps; EMIT_ON: the row goes on to the next step. */
enum { EMIT_ON = 2 };
typedef struct emit_ctx {
    double rel;    /* seconds since the first timestamp */
    sess_ent *se;  /* the row's session, or NULL */
    uint64_t skey; /* its key */
    int first;     /* the session's first turn (or no session) */
    uint32_t full; /* the prompt as the server sees it */
    uint32_t newl; /* the user's new text */
    double think;  /* NAN */
    uint32_t turn; /* earlier turns of the session */
} emit_ctx;

/* Timestamps: all rows or none, sorted (servetune's own format), not too far apart. */
static int emit_times(st_trace_reader *r, uint64_t line, const raw_row *w, emit_ctx *e, char *err, size_t errlen)
{
    char why[300];
    if (r->ts_mode < 0)
        r->ts_mode = w->has_ts;
    else if (r->ts_mode != w->has_ts) {
        snprintf(why, sizeof why, "%s",
                 w->has_ts ? "timestamp given, but earlier requests have none (all or none must have one)"
                           : "timestamp missing, but earlier requests have one (all or none must have one)");
        r->c.rows--;
        return bad_row(r, line, why, err, errlen);
    }
    if (!w->has_ts)
        return EMIT_ON;
    if (!r->have_t0) {
        r->have_t0 = 1;
        r->t0 = r->prev_ts = w->ts;
    }
    if (w->ts < r->prev_ts) {
        if (r->fmt == ST_TRACE_SERVETUNE) {
            snprintf(why, sizeof why,
                     "timestamp %.9g is earlier than the previous request's %.9g (the trace must be sorted by "
                     "time)",
                     w->ts, r->prev_ts);
            r->c.rows--;
            return bad_row(r, line, why, err, errlen);
        }
        r->c.unsorted++;
    }
    r->prev_ts = w->ts;
    e->rel = w->ts - r->t0;
    if (fabs(e->rel) > 1e9) {
        r->c.rows--;
        return bad_row(r, line, "timestamp too far from the first one", err, errlen);
    }
    return EMIT_ON;
}

/* The row's session found or made; a later turn of a dropped session is counted and skipped. */
static int emit_session(st_trace_reader *r, uint64_t line, const raw_row *w, emit_ctx *e, char *err, size_t errlen)
{
    int created = 0;
    if (w->session_id) {
        e->skey = fnv64(w->session_id, w->session_len);
        e->se = sess_get(r, e->skey, &created);
        if (!e->se) {
            st_errf(err, errlen, "%s:%llu: more than %u sessions (or out of memory)", r->name, (unsigned long long)line,
                    ST_TRACE_SESSIONS_MAX);
            return -1;
        }
        if (!created) {
            switch (e->se->state) {
            case S_WINDOW: r->c.window++; return 0;
            case S_SAMPLE: r->c.sampled_out++; return 0;
            case S_MODEL: r->c.model++; return 0;
            case S_TOO_LONG: r->c.too_long++; return 0;
            case S_EMPTY: r->c.empty++; return 0;
            case S_BROKEN: r->c.orphaned++; return 0;
            default: break;
            }
        }
    }
    e->first = !e->se || created;
    return EMIT_ON;
}

/* The prompt as the server sees it, the user's new text and the think time; turns in order. */
static int emit_history(st_trace_reader *r, uint64_t line, const raw_row *w, emit_ctx *e, char *err, size_t errlen)
{
    sess_ent *se = e->se;
    e->full = e->newl = w->in;
    if (se && !e->first) {
        e->turn = se->turns;
        uint64_t hist = (uint64_t)se->full_prev + se->out_prev;
        if (w->input_is_new) {
            e->newl = w->in;
            uint64_t f = hist + w->in;
            e->full = f > ST_WORKLOAD_MAX_TOKENS ? ST_WORKLOAD_MAX_TOKENS + 1 : (uint32_t)f;
        } else {
            e->newl = w->in > hist ? (uint32_t)(w->in - hist) : 1;
        }
        if (!isnan(w->think))
            e->think = w->think;
        else if (w->has_ts && !isnan(se->end_prev))
            e->think = w->ts - se->end_prev;
        else if (w->has_ts)
            e->think = w->ts - se->ts_prev;
        if (!isnan(e->think) && e->think < 0)
            e->think = 0;
    }
    if (w->has_turn && w->turn != e->turn) {
        char why[300];
        snprintf(why, sizeof why, "turn %u of session \"%.*s\" comes after %u earlier turn%s (turns must be in order)",
                 w->turn, (int)(w->session_len > 60 ? 60 : w->session_len), w->session_id, e->turn,
                 e->turn == 1 ? "" : "s");
        if (se && e->first) {
            se->state = S_BROKEN;
        }
        r->c.rows--;
        return bad_row(r, line, why, err, errlen);
    }
    return EMIT_ON;
}

/* Filters: a session is kept or dropped as a whole, on its first turn; then the lengths. */
static int emit_filter(st_trace_reader *r, uint64_t line, const raw_row *w, emit_ctx *e, char *err, size_t errlen)
{
    sess_ent *se = e->se;
    if (e->first) {
        int drop = 0;
        if (w->in == 0 || w->out == 0) {
            r->c.empty++;
            drop = S_EMPTY;
        } else if (w->has_ts && (r->o.window_from_s > 0 || r->o.window_to_s > 0) &&
                   (e->rel < r->o.window_from_s || (r->o.window_to_s > 0 && e->rel >= r->o.window_to_s))) {
            r->c.window++;
            drop = S_WINDOW;
        } else if (r->o.model &&
                   !((w->model && !strcmp(w->model, r->o.model)) || (w->model2 && !strcmp(w->model2, r->o.model)))) {
            r->c.model++;
            drop = S_MODEL;
        } else if (r->o.sample < 1) {
            uint64_t k = se ? e->skey : r->c.rows;
            double u = (double)(st_mix64(k ^ st_mix64(r->o.seed + 0x5a17)) >> 11) / 9007199254740992.0;
            if (u >= r->o.sample) {
                r->c.sampled_out++;
                drop = S_SAMPLE;
            }
        }
        if (drop) {
            if (se)
                se->state = (uint8_t)drop;
            return 0;
        }
    } else if (w->in == 0 || w->out == 0) {
        r->c.empty++;
        se->state = S_EMPTY;
        return 0;
    }
    if (r->o.max_context && (uint64_t)e->full + w->out > r->o.max_context) {
        r->c.too_long++;
        if (se)
            se->state = S_TOO_LONG;
        return 0;
    }
    if (e->full > ST_WORKLOAD_MAX_TOKENS) {
        char why[300];
        snprintf(why, sizeof why, "the session's prompt grows past %u tokens", ST_WORKLOAD_MAX_TOKENS);
        if (se)
            se->state = S_BROKEN;
        return bad_row(r, line, why, err, errlen);
    }
    return EMIT_ON;
}

/* A kept row: its session's state advanced, the row handed to the callback, the counts kept. */
static int emit_row(st_trace_reader *r, uint64_t line, const raw_row *w, const emit_ctx *e, char *err, size_t errlen)
{
    sess_ent *se = e->se;
    if (se) {
        if (e->first)
            r->c.sessions++;
        se->full_prev = e->full;
        se->out_prev = w->out;
        se->ts_prev = w->has_ts ? w->ts : 0;
        se->end_prev = w->end;
        se->turns++;
    }
    st_trace_row row;
    memset(&row, 0, sizeof row);
    row.line = line;
    row.index = r->c.kept;
    row.has_ts = w->has_ts;
    row.ts_s = w->ts;
    row.rel_s = e->rel;
    row.end_s = w->end;
    row.input_len = e->full;
    row.output_len = w->out;
    row.model = w->model && *w->model ? w->model : (w->model2 && *w->model2 ? w->model2 : NULL);
    row.session = se ? e->skey : 0;
    row.session_id = se ? r->session_id : NULL;
    row.turn = e->turn;
    row.new_len = e->newl;
    row.think_s = e->think; /* as recorded; a replay caps it (ST_TRACE_THINK_CAP_S) */
    row.hash_ids = w->hash;
    row.n_hash = w->n_hash;
    row.block_size = r->o.block_size;
    row.has_prefix_group = w->has_pg;
    row.prefix_group = w->pg;
    row.prefix_len = w->pl;
    row.item = w->item;
    if (w->json) {
        row.json = w->json->p;
        row.json_len = w->json->len;
    }
    if (!isnan(e->think) && e->think > ST_TRACE_THINK_CAP_S) {
        r->c.think_long++;
        if (e->think > r->c.think_longest_s)
            r->c.think_longest_s = e->think;
    }
    if (w->has_ts)
        st_trace_quantum_add(&r->quantum, e->rel);
    r->c.kept++;
    r->c.quantum_s = st_trace_quantum_s(&r->quantum);
    r->c.quantum_ties = r->quantum.ties;
    char why[300];
    int rc = r->cb ? r->cb(r->arg, &row, why, sizeof why) : 0;
    if (rc < 0) {
        st_errf(err, errlen, "%s:%llu: %s", r->name, (unsigned long long)line, why);
        return -1;
    }
    if (rc > 0 || (r->o.max_rows && r->c.kept >= r->o.max_rows)) {
        r->c.stopped = 1;
        return 1;
    }
    return 0;
}

/* The steps every format shares: times, filters, sessions, the callback. 0, 1 stop, -1 error. */
static int emit(st_trace_reader *r, uint64_t line, raw_row *w, char *err, size_t errlen)
{
    r->c.rows++;
    emit_ctx e = { .think = NAN };
    int rc = emit_times(r, line, w, &e, err, errlen);
    if (rc != EMIT_ON)
        return rc;
    if (w->failed) {
        r->c.failed++;
        return 0;
    }
    if ((rc = emit_session(r, line, w, &e, err, errlen)) != EMIT_ON ||
        (rc = emit_history(r, line, w, &e, err, errlen)) != EMIT_ON ||
        (rc = emit_filter(r, line, w, &e, err, errlen)) != EMIT_ON)
        return rc;
    return emit_row(r, line, w, &e, err, errlen);
}

/* ---- servetune JSONL ---- */

static int row_servetune(st_trace_reader *r, const char *p, size_t n, uint64_t line, char *err, size_t errlen)
{
    st_work_item it;
    st_trace_native x;
    char why[384];
    int rc = st_trace_parse_native(p, n, (uint32_t)r->c.kept, r->o.salt, &it, &x, why, sizeof why);
    if (rc == 1)
        return 0;
    if (rc < 0)
        return bad_row(r, line, why, err, errlen);
    raw_row w;
    memset(&w, 0, sizeof w);
    w.has_ts = x.has_ts;
    w.ts = x.ts_s;
    w.end = NAN;
    w.in = it.input_len;
    w.out = it.output_len;
    if (x.model[0]) {
        snprintf(r->model, sizeof r->model, "%s", x.model);
        w.model = r->model;
    }
    if (x.session[0]) {
        snprintf(r->session_id, sizeof r->session_id, "%s", x.session);
        w.session_id = r->session_id;
        w.session_len = strlen(r->session_id);
        w.input_is_new = 1;
    }
    w.has_turn = x.has_turn;
    w.turn = x.turn;
    w.think = x.has_think ? x.think_s : NAN;
    w.has_pg = x.has_prefix_group;
    w.pg = it.prefix_group;
    w.pl = it.prefix_len;
    w.item = &it;
    rc = emit(r, line, &w, err, errlen);
    st_work_item_free(&it);
    return rc;
}

/* ---- Mooncake JSONL ---- */

static int row_mooncake(st_trace_reader *r, const st_json_val *obj, uint64_t line, char *err, size_t errlen)
{
    static const char *const keys[] = { "timestamp", "input_length", "output_length", "hash_ids" };
    char why[300];
    st_json_iter it;
    st_json_val k, v, ts = { 0 }, in = { 0 }, out = { 0 }, hs = { 0 };
    if (st_json_iter_init(&it, obj) < 0)
        return bad_row(r, line, "expected a JSON object", err, errlen);
    int rc;
    while ((rc = st_json_iter_next(&it, &k, &v)) == 1) {
        st_json_val *slot = NULL;
        for (int i = 0; i < 4; i++)
            if (st_json_str_eq(&k, keys[i], strlen(keys[i])))
                slot = i == 0 ? &ts : i == 1 ? &in : i == 2 ? &out : &hs;
        if (!slot) {
            char kn[64];
            st_json_str(&k, kn, sizeof kn, NULL);
            snprintf(why, sizeof why,
                     "unknown key \"%s\" in a Mooncake row (expected timestamp, input_length, output_length, "
                     "hash_ids)",
                     kn);
            return bad_row(r, line, why, err, errlen);
        }
        if (slot->type != ST_JSON_ABSENT) {
            return bad_row(r, line, "duplicate key", err, errlen);
        }
        *slot = v;
    }
    if (rc < 0)
        return bad_row(r, line, "invalid JSON", err, errlen);
    raw_row w;
    memset(&w, 0, sizeof w);
    w.end = NAN;
    w.think = NAN;
    double tsv;
    if (ts.type == ST_JSON_ABSENT)
        return bad_row(r, line, "timestamp is required (milliseconds)", err, errlen);
    if (st_json_num(&ts, &tsv) < 0 || !(tsv >= 0))
        return bad_row(r, line, "timestamp must be a non-negative number of milliseconds", err, errlen);
    w.has_ts = 1;
    w.ts = tsv / 1e3;
    uint64_t u;
    if (in.type != ST_JSON_NUMBER || st_json_u64(&in, &u) < 0)
        return bad_row(r, line, "input_length must be a non-negative integer", err, errlen);
    if (u > ST_WORKLOAD_MAX_TOKENS) {
        snprintf(why, sizeof why, "input_length %llu is above the largest supported length (%u tokens)",
                 (unsigned long long)u, ST_WORKLOAD_MAX_TOKENS);
        return bad_row(r, line, why, err, errlen);
    }
    w.in = (uint32_t)u;
    if (out.type != ST_JSON_NUMBER || st_json_u64(&out, &u) < 0)
        return bad_row(r, line, "output_length must be a non-negative integer", err, errlen);
    if (u > ST_WORKLOAD_MAX_TOKENS) {
        snprintf(why, sizeof why, "output_length %llu is above the largest supported length (%u tokens)",
                 (unsigned long long)u, ST_WORKLOAD_MAX_TOKENS);
        return bad_row(r, line, why, err, errlen);
    }
    w.out = (uint32_t)u;
    uint32_t nh = 0;
    if (hs.type != ST_JSON_ABSENT) {
        if (hs.type != ST_JSON_ARRAY)
            return bad_row(r, line, "hash_ids must be an array of block ids", err, errlen);
        st_json_iter hi;
        st_json_val hk, hv;
        st_json_iter_init(&hi, &hs);
        while ((rc = st_json_iter_next(&hi, &hk, &hv)) == 1) {
            uint64_t id;
            if (hv.type != ST_JSON_NUMBER || st_json_u64(&hv, &id) < 0)
                return bad_row(r, line, "hash_ids must hold non-negative integers", err, errlen);
            if (nh >= ST_TRACE_HASH_IDS_MAX)
                return bad_row(r, line, "hash_ids is too long", err, errlen);
            if (hash_reserve(r, nh + 1) < 0) {
                st_errf(err, errlen, "%s:%llu: out of memory", r->name, (unsigned long long)line);
                return -1;
            }
            r->hash[nh++] = id;
        }
        if (rc < 0)
            return bad_row(r, line, "invalid JSON in hash_ids", err, errlen);
        uint32_t bs = r->o.block_size;
        uint32_t need = (w.in + bs - 1) / bs;
        if (nh != need) {
            snprintf(why, sizeof why,
                     "hash_ids has %u block%s, but input_length %u needs %u blocks of %u tokens (a different block "
                     "size? --trace-block-size)",
                     nh, nh == 1 ? "" : "s", w.in, need, bs);
            return bad_row(r, line, why, err, errlen);
        }
    }
    w.hash = r->hash;
    w.n_hash = nh;
    return emit(r, line, &w, err, errlen);
}

/* ---- LiteLLM spend log rows ---- */

static int row_litellm(st_trace_reader *r, const st_json_val *obj, uint64_t line, char *err, size_t errlen)
{
    static const char *const keys[] = { "startTime",   "endTime",    "prompt_tokens", "completion_tokens", "model",
                                        "model_group", "session_id", "status",        "start_time",        "end_time" };
    enum { K_START, K_END, K_PROMPT, K_COMPL, K_MODEL, K_GROUP, K_SESSION, K_STATUS, K_START2, K_END2 };
    st_json_val v[10];
    if (obj->type != ST_JSON_OBJECT)
        return bad_row(r, line, "expected a JSON object", err, errlen);
    int frc = st_json_obj_fields(obj, keys, 10, v);
    if (frc < 0)
        return bad_row(r, line, "invalid JSON", err, errlen);
    raw_row w;
    memset(&w, 0, sizeof w);
    w.end = NAN;
    w.think = NAN;
    char buf[96];
    const st_json_val *st = v[K_START].type != ST_JSON_ABSENT ? &v[K_START] : &v[K_START2];
    const st_json_val *en = v[K_END].type != ST_JSON_ABSENT ? &v[K_END] : &v[K_END2];
    if (st->type == ST_JSON_STRING) {
        size_t bl;
        if (st_json_str(st, buf, sizeof buf, &bl) != 0 || st_trace_parse_datetime(buf, bl, &w.ts) < 0)
            return bad_row(r, line, "startTime is not a date and time", err, errlen);
        w.has_ts = 1;
    } else if (st->type == ST_JSON_NUMBER) {
        if (st_json_num(st, &w.ts) < 0)
            return bad_row(r, line, "startTime is not a number", err, errlen);
        w.has_ts = 1;
    } else {
        return bad_row(r, line, "startTime is required", err, errlen);
    }
    if (en->type == ST_JSON_STRING) {
        size_t bl;
        if (st_json_str(en, buf, sizeof buf, &bl) != 0 || st_trace_parse_datetime(buf, bl, &w.end) < 0)
            return bad_row(r, line, "endTime is not a date and time", err, errlen);
    } else if (en->type == ST_JSON_NUMBER) {
        (void)st_json_num(en, &w.end);
    }
    uint64_t u;
    if (v[K_PROMPT].type != ST_JSON_NUMBER || st_json_u64(&v[K_PROMPT], &u) < 0)
        return bad_row(r, line, "prompt_tokens must be a non-negative integer", err, errlen);
    if (u > ST_WORKLOAD_MAX_TOKENS)
        return bad_row(r, line, "prompt_tokens is above the largest supported length", err, errlen);
    w.in = (uint32_t)u;
    if (v[K_COMPL].type != ST_JSON_NUMBER || st_json_u64(&v[K_COMPL], &u) < 0)
        return bad_row(r, line, "completion_tokens must be a non-negative integer", err, errlen);
    if (u > ST_WORKLOAD_MAX_TOKENS)
        return bad_row(r, line, "completion_tokens is above the largest supported length", err, errlen);
    w.out = (uint32_t)u;
    r->model[0] = r->model2[0] = '\0';
    if (v[K_GROUP].type == ST_JSON_STRING)
        st_json_str(&v[K_GROUP], r->model, sizeof r->model, NULL);
    if (v[K_MODEL].type == ST_JSON_STRING)
        st_json_str(&v[K_MODEL], r->model2, sizeof r->model2, NULL);
    w.model = r->model;
    w.model2 = r->model2;
    w.json = obj;
    if (v[K_SESSION].type == ST_JSON_STRING && st_json_str_nonempty(&v[K_SESSION])) {
        size_t sl;
        st_json_str(&v[K_SESSION], r->session_id, sizeof r->session_id, &sl);
        w.session_id = r->session_id;
        w.session_len = sl;
    }
    if (v[K_STATUS].type == ST_JSON_STRING) {
        char s[32];
        st_json_str(&v[K_STATUS], s, sizeof s, NULL);
        if (strcasecmp(s, "success") != 0 && s[0])
            w.failed = 1;
    }
    return emit(r, line, &w, err, errlen);
}

/* ---- CSV ---- */

/* Splits one CSV line into r->fields with core/csv (RFC 4180; a quoted field may not span
 * lines here, since the reader streams line by line). Returns the number of fields or -1. */
static int csv_split(st_trace_reader *r, const char *p, size_t n, char *why, size_t whylen)
{
    st_csv_free(&r->csv);
    st_csv_init(&r->csv, p, n);
    char e[200];
    int rc = st_csv_next(&r->csv, e, sizeof e);
    if (rc < 0) {
        const char *m = strncmp(e, "line ", 5) ? e : strstr(e, ": ");
        snprintf(why, whylen, "%s", m && m != e ? m + 2 : e);
        return -1;
    }
    if (rc == 0)
        return 0;
    if (r->csv.n > ST_TRACE_CSV_COLUMNS_MAX) {
        snprintf(why, whylen, "more than %d columns", ST_TRACE_CSV_COLUMNS_MAX);
        return -1;
    }
    for (int i = 0; i < r->csv.n; i++) {
        r->fields[i].p = r->csv.field[i];
        r->fields[i].n = r->csv.len[i];
    }
    return r->csv.n;
}

static const char *azure_cols[] = { "TIMESTAMP", "ContextTokens", "GeneratedTokens" };
static const char *burst_cols[] = { "Timestamp",       "Model",        "Request tokens",
                                    "Response tokens", "Total tokens", "Log Type" };

static int header_has(st_trace_reader *r, int nf, const char *name)
{
    for (int i = 0; i < nf; i++) {
        const char *p = r->fields[i].p;
        size_t n = r->fields[i].n;
        st_trim(&p, &n);
        if (n == strlen(name) && !strncasecmp(p, name, n))
            return 1;
    }
    return 0;
}

/* A header read as one column that holds ';', a tab or '|': a spreadsheet's export in another
 * locale, named as such. 1 with err, or 0. */
static int other_separator(const st_trace_reader *r, char *err, size_t errlen)
{
    const char *sep = strpbrk(r->colname[0], ";\t|");
    if (!sep)
        return 0;
    const char *what = *sep == ';' ? "semicolons" : *sep == '\t' ? "tabs" : "'|'";
    const char *tr = *sep == ';' ? ";" : *sep == '\t' ? "\\t" : "|";
    st_errf(err, errlen,
            "%s:%llu: the header is one column, \"%s\": the file looks separated by %s, but a CSV trace is separated "
            "by commas (convert it first, e.g. tr '%s' ',')",
            r->name, (unsigned long long)r->lineno, r->colname[0], what, tr);
    return 1;
}

/* Reads the header line: column i -> field. 0 or -1 (err set). */
static int csv_header(st_trace_reader *r, const char *p, size_t n, char *err, size_t errlen)
{
    char why[300];
    int nf = csv_split(r, p, n, why, sizeof why);
    if (nf < 0) {
        st_errf(err, errlen, "%s:%llu: %s", r->name, (unsigned long long)r->lineno, why);
        return -1;
    }
    if (r->fmt == ST_TRACE_AUTO) {
        if (nf == 3 && header_has(r, nf, azure_cols[0]) && header_has(r, nf, azure_cols[1]) &&
            header_has(r, nf, azure_cols[2]))
            r->fmt = ST_TRACE_AZURE;
        else if (header_has(r, nf, "Request tokens") && header_has(r, nf, "Response tokens"))
            r->fmt = ST_TRACE_BURSTGPT;
        else
            r->fmt = ST_TRACE_CSV;
    }
    r->ncol = nf;
    for (int i = 0; i < nf; i++) {
        const char *fp = r->fields[i].p;
        size_t fn = r->fields[i].n;
        st_trim(&fp, &fn);
        copy_field(r->colname[i], sizeof r->colname[i], fp, fn);
        r->col[i] = COL_NONE;
    }
    if (r->fmt == ST_TRACE_AZURE) {
        static const int f[3] = { COL_TIMESTAMP, COL_INPUT, COL_OUTPUT };
        for (int i = 0; i < nf; i++)
            for (int k = 0; k < 3; k++)
                if (!strcasecmp(r->colname[i], azure_cols[k]))
                    r->col[i] = f[k];
        for (int i = 0; i < nf; i++)
            if (r->col[i] == COL_NONE) {
                st_errf(err, errlen, "%s:%llu: unknown column \"%s\" in an Azure trace (expected %s,%s,%s)", r->name,
                        (unsigned long long)r->lineno, r->colname[i], azure_cols[0], azure_cols[1], azure_cols[2]);
                return -1;
            }
    } else if (r->fmt == ST_TRACE_BURSTGPT) {
        static const int f[6] = { COL_TIMESTAMP, COL_MODEL, COL_INPUT, COL_OUTPUT, COL_IGNORE, COL_IGNORE };
        for (int i = 0; i < nf; i++) {
            for (int k = 0; k < 6; k++)
                if (!strcasecmp(r->colname[i], burst_cols[k]))
                    r->col[i] = f[k];
            /* the release notes announce these two: a session id, and the request's duration */
            if (!strcasecmp(r->colname[i], "Session ID") || !strcasecmp(r->colname[i], "SessionID"))
                r->col[i] = COL_SESSION;
            if (!strcasecmp(r->colname[i], "Elapsed time"))
                r->col[i] = COL_IGNORE;
            if (r->col[i] == COL_NONE) {
                st_errf(err, errlen,
                        "%s:%llu: unknown column \"%s\" in a BurstGPT trace (expected Timestamp, Model, Request "
                        "tokens, Response tokens, Total tokens, Log Type; Session ID and Elapsed time are optional)",
                        r->name, (unsigned long long)r->lineno, r->colname[i]);
                return -1;
            }
        }
    } else {
        for (int i = 0; i < nf; i++) {
            const st_trace_colmap *m = r->o.columns;
            for (int k = 0; m && k < m->n; k++)
                if (!strcmp(m->column[k], r->colname[i]))
                    for (int f = 1; f < COL__COUNT; f++)
                        if (!strcmp(col_field_names[f], m->field[k]))
                            r->col[i] = f;
            if (r->col[i] == COL_NONE) {
                char nm[64];
                norm_name(r->colname[i], strlen(r->colname[i]), nm, sizeof nm);
                for (size_t k = 0; k < sizeof col_aliases / sizeof col_aliases[0]; k++)
                    if (!strcmp(nm, col_aliases[k].name))
                        r->col[i] = col_aliases[k].field;
            }
            if (r->col[i] == COL_NONE && nf == 1 && other_separator(r, err, errlen))
                return -1;
            if (r->col[i] == COL_NONE) {
                st_errf(err, errlen,
                        "%s:%llu: unknown column \"%s\" (known: timestamp, timestamp_ms, end_time, input_tokens, "
                        "output_tokens, model, session_id, turn, status and their usual aliases; name it with "
                        "--trace-columns input_tokens=%s, or skip it with --trace-columns ignore=%s)",
                        r->name, (unsigned long long)r->lineno, r->colname[i], r->colname[i], r->colname[i]);
                return -1;
            }
        }
    }
    int have_in = 0, have_out = 0;
    for (int i = 0; i < nf; i++) {
        for (int j = 0; j < i; j++)
            if (r->col[i] == r->col[j] && r->col[i] != COL_IGNORE) {
                st_errf(err, errlen, "%s:%llu: columns \"%s\" and \"%s\" both give %s", r->name,
                        (unsigned long long)r->lineno, r->colname[j], r->colname[i], col_field_names[r->col[i]]);
                return -1;
            }
        have_in |= r->col[i] == COL_INPUT;
        have_out |= r->col[i] == COL_OUTPUT;
    }
    if (!have_in || !have_out) {
        st_errf(err, errlen, "%s:%llu: the header names no %s column", r->name, (unsigned long long)r->lineno,
                !have_in ? "input_tokens" : "output_tokens");
        return -1;
    }
    r->have_header = 1;
    return 0;
}

static int row_csv(st_trace_reader *r, const char *p, size_t n, uint64_t line, char *err, size_t errlen)
{
    char why[300];
    int nf = csv_split(r, p, n, why, sizeof why);
    if (nf < 0)
        return bad_row(r, line, why, err, errlen);
    if (nf != r->ncol) {
        snprintf(why, sizeof why, "%d field%s, the header has %d", nf, nf == 1 ? "" : "s", r->ncol);
        return bad_row(r, line, why, err, errlen);
    }
    raw_row w;
    memset(&w, 0, sizeof w);
    w.end = NAN;
    w.think = NAN;
    int have_ts_col = 0;
    for (int i = 0; i < nf; i++) {
        const char *fp = r->fields[i].p;
        size_t fn = r->fields[i].n;
        st_trim(&fp, &fn);
        char what[96];
        snprintf(what, sizeof what, "column %s", r->colname[i]);
        switch (r->col[i]) {
        case COL_TIMESTAMP:
        case COL_TIMESTAMP_MS:
            have_ts_col = 1;
            if (fn == 0)
                break;
            if (parse_time(fp, fn, &w.ts) < 0 || (r->col[i] == COL_TIMESTAMP_MS && isnan(w.ts))) {
                snprintf(why, sizeof why, "%s: \"%.*s\" is not a time (seconds, or a date and time)", what,
                         (int)(fn > 40 ? 40 : fn), fp);
                return bad_row(r, line, why, err, errlen);
            }
            if (r->col[i] == COL_TIMESTAMP_MS)
                w.ts /= 1e3;
            if (w.ts < 0) {
                snprintf(why, sizeof why, "%s: negative time", what);
                return bad_row(r, line, why, err, errlen);
            }
            w.has_ts = 1;
            break;
        case COL_END_TIME:
            if (fn && parse_time(fp, fn, &w.end) < 0) {
                snprintf(why, sizeof why, "%s: \"%.*s\" is not a time", what, (int)(fn > 40 ? 40 : fn), fp);
                return bad_row(r, line, why, err, errlen);
            }
            break;
        case COL_INPUT:
            if (parse_count(fp, fn, what, &w.in, why, sizeof why) < 0)
                return bad_row(r, line, why, err, errlen);
            break;
        case COL_OUTPUT:
            if (parse_count(fp, fn, what, &w.out, why, sizeof why) < 0)
                return bad_row(r, line, why, err, errlen);
            break;
        case COL_MODEL:
            copy_field(r->model, sizeof r->model, fp, fn);
            w.model = r->model;
            break;
        case COL_SESSION:
            if (fn) {
                copy_field(r->session_id, sizeof r->session_id, fp, fn);
                w.session_id = r->session_id;
                w.session_len = strlen(r->session_id);
            }
            break;
        case COL_TURN:
            if (fn) {
                if (parse_count(fp, fn, what, &w.turn, why, sizeof why) < 0)
                    return bad_row(r, line, why, err, errlen);
                w.has_turn = 1;
            }
            break;
        case COL_STATUS: {
            char s[32];
            copy_field(s, sizeof s, fp, fn);
            if (s[0] && strcasecmp(s, "success") && strcasecmp(s, "ok") && strcasecmp(s, "200") &&
                strcasecmp(s, "completed"))
                w.failed = 1;
            break;
        }
        default: break;
        }
    }
    if (have_ts_col && !w.has_ts)
        return bad_row(r, line, "the timestamp is empty", err, errlen);
    if (r->fmt == ST_TRACE_BURSTGPT && w.out == 0)
        w.failed = 1; /* BurstGPT: 0 response tokens marks a failed request */
    return emit(r, line, &w, err, errlen);
}

/* ---- records -------------------------------------------------------------------- */

/* A JSON object (one JSONL line or one element of a document), by format. */
static int json_record(st_trace_reader *r, const char *p, size_t n, uint64_t line, char *err, size_t errlen)
{
    if (r->fmt == ST_TRACE_SERVETUNE)
        return row_servetune(r, p, n, line, err, errlen);
    st_json_val v;
    if (st_json_parse(p, n, &v) < 0)
        return bad_row(r, line, "invalid JSON", err, errlen);
    if (r->fmt == ST_TRACE_MOONCAKE) {
        if (v.type != ST_JSON_OBJECT)
            return bad_row(r, line, "expected a JSON object", err, errlen);
        return row_mooncake(r, &v, line, err, errlen);
    }
    if (v.type == ST_JSON_OBJECT && !r->doc_mode) {
        /* one line holding a whole {"data": [...]} document */
        st_json_val data;
        if (st_json_obj_get(&v, "data", 4, &data) == 0 && data.type == ST_JSON_ARRAY) {
            st_json_iter it;
            st_json_val k, e;
            st_json_iter_init(&it, &data);
            int rc;
            while ((rc = st_json_iter_next(&it, &k, &e)) == 1) {
                int x = row_litellm(r, &e, line, err, errlen);
                if (x)
                    return x;
            }
            return rc < 0 ? bad_row(r, line, "invalid JSON", err, errlen) : 0;
        }
    }
    return row_litellm(r, &v, line, err, errlen);
}

/* The format of a JSON line, from its keys. */
static st_trace_format detect_json(const char *p, size_t n)
{
    st_json_val v, f[8];
    static const char *const keys[] = { "input_tokens", "input_ids", "text",      "output_tokens",
                                        "input_length", "hash_ids",  "startTime", "prompt_tokens" };
    if (st_json_parse(p, n, &v) < 0 || v.type != ST_JSON_OBJECT)
        return ST_TRACE_SERVETUNE; /* its parser says what is wrong */
    if (st_json_obj_fields(&v, keys, 8, f) < 0)
        return ST_TRACE_SERVETUNE;
    if (f[4].type || f[5].type)
        return ST_TRACE_MOONCAKE;
    if (f[6].type || f[7].type)
        return ST_TRACE_LITELLM;
    st_json_val data;
    if (st_json_obj_get(&v, "data", 4, &data) == 0 && data.type == ST_JSON_ARRAY)
        return ST_TRACE_LITELLM;
    return ST_TRACE_SERVETUNE;
}

static int doc_feed(st_trace_reader *r, const char *d, size_t n, char *err, size_t errlen);

/* One complete line (without its newline). 0, 1 stop, -1 error. */
static int handle_line(st_trace_reader *r, const char *p, size_t n, char *err, size_t errlen)
{
    uint64_t line = r->lineno;
    if (memchr(p, '\0', n))
        return bad_row(r, line, "NUL byte in line", err, errlen);
    const char *q = p;
    size_t m = n;
    st_trim(&q, &m);
    if (m == 0)
        return 0;
    if (!r->decided) {
        if (q[0] == '#')
            return 0;
        int json = q[0] == '{' || q[0] == '[';
        if (r->fmt == ST_TRACE_AUTO && json) {
            if (q[0] == '[' || q[m - 1] != '}') {
                r->fmt = ST_TRACE_LITELLM;
                r->doc_mode = 1;
            } else {
                r->fmt = detect_json(q, m);
            }
        } else if (r->fmt == ST_TRACE_LITELLM && json && (q[0] == '[' || q[m - 1] != '}')) {
            r->doc_mode = 1;
        }
        r->decided = 1;
        if (r->doc_mode) {
            /* replay this line into the document splitter, with its newline */
            int rc = doc_feed(r, p, n, err, errlen);
            if (rc)
                return rc;
            return doc_feed(r, "\n", 1, err, errlen);
        }
        if (r->fmt == ST_TRACE_AUTO || r->fmt == ST_TRACE_AZURE || r->fmt == ST_TRACE_BURSTGPT ||
            r->fmt == ST_TRACE_CSV) {
            if (r->fmt != ST_TRACE_AUTO && json) {
                st_errf(err, errlen, "%s:%llu: the format %s is CSV, but this line is JSON", r->name,
                        (unsigned long long)line, st_trace_format_name(r->fmt));
                return -1;
            }
            return csv_header(r, q, m, err, errlen);
        }
    }
    switch (r->fmt) {
    case ST_TRACE_SERVETUNE:
    case ST_TRACE_MOONCAKE:
    case ST_TRACE_LITELLM:
        if (q[0] == '#')
            return 0;
        return json_record(r, q, m, line, err, errlen);
    default: return row_csv(r, p, n, line, err, errlen);
    }
}

/* The JSON document splitter: rows are the objects directly inside the document's first
 * array. Bytes are scanned once; an element is copied into r->elem (bounded). */
static int doc_feed(st_trace_reader *r, const char *d, size_t n, char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        char c = d[i];
        if (r->jdone) {
            if (!st_is_ws(c)) {
                st_errf(err, errlen, "%s:%llu: text after the end of the JSON document", r->name,
                        (unsigned long long)r->lineno);
                return -1;
            }
            if (c == '\n')
                r->lineno++;
            continue;
        }
        if (!st_is_ws((char)c))
            r->jlast_line = r->lineno;
        if (r->jin_elem && st_buf_append(&r->elem, &c, 1) < 0) {
            st_errf(err, errlen, "%s:%llu: a row is longer than %u bytes", r->name, (unsigned long long)r->elem_line,
                    ST_TRACE_LINE_MAX);
            return -1;
        }
        if (c == '\n')
            r->lineno++;
        if (r->jin_str) {
            if (r->jesc)
                r->jesc = 0;
            else if (c == '\\')
                r->jesc = 1;
            else if (c == '"')
                r->jin_str = r->jkey_cap = 0;
            else if (r->jkey_cap && r->jkey_len + 1 < sizeof r->jkey)
                r->jkey[r->jkey_len++] = c;
            else if (r->jkey_cap)
                r->jkey_len = sizeof r->jkey; /* longer than any key looked for */
            continue;
        }
        if (c == '"') {
            r->jin_str = 1;
            if (r->jtop_obj && r->jdepth == 1) { /* a key (or a value) of the top object */
                r->jkey_cap = 1;
                r->jkey_len = 0;
            }
            continue;
        }
        if (c == '{' || c == '[') {
            if (r->jdepth == 0)
                r->jtop_obj = c == '{';
            /* the rows: the document's array, or, in an object, the array under "data" (LiteLLM's
             * {"data": [...], "total": N}); any other array is part of something else */
            int rows = !r->jtop_obj || (r->jdepth == 1 && r->jkey_len == 4 && !memcmp(r->jkey, "data", 4));
            if (r->jarr_depth < 0 && c == '[' && rows)
                r->jarr_depth = r->jdepth + 1;
            else if (r->jdepth == r->jarr_depth && !r->jin_elem) {
                if (c != '{') {
                    st_errf(err, errlen, "%s:%llu: expected a JSON object", r->name, (unsigned long long)r->lineno);
                    return -1;
                }
                r->jin_elem = 1;
                r->elem_line = r->lineno;
                st_buf_reset(&r->elem);
                st_buf_append(&r->elem, &c, 1);
            }
            if (++r->jdepth > ST_JSON_MAX_DEPTH) {
                st_errf(err, errlen, "%s:%llu: JSON nested too deep", r->name, (unsigned long long)r->lineno);
                return -1;
            }
            continue;
        }
        if (c == '}' || c == ']') {
            if (r->jdepth == 0) {
                st_errf(err, errlen, "%s:%llu: unbalanced JSON", r->name, (unsigned long long)r->lineno);
                return -1;
            }
            r->jdepth--;
            if (r->jin_elem && r->jdepth == r->jarr_depth) {
                r->jin_elem = 0;
                int rc = json_record(r, r->elem.data, r->elem.len, r->elem_line, err, errlen);
                if (rc)
                    return rc;
            } else if (c == ']' && r->jdepth == r->jarr_depth - 1) {
                r->jarr_depth = -2; /* the rows' array ended: the rest is ignored */
            }
            if (r->jdepth == 0) {
                r->jdone = 1;
                if (r->jtop_obj && r->jarr_depth == -1) {
                    /* an object without a "data" array: one JSONL row, longer than a line may be */
                    st_errf(err, errlen,
                            "%s:1: the first row is longer than %u bytes (the limit of one JSONL line), or a JSON "
                            "document without a \"data\" array of rows",
                            r->name, ST_TRACE_LINE_MAX);
                    return -1;
                }
            }
            continue;
        }
        if (!r->jin_elem && r->jdepth == r->jarr_depth && !st_is_ws(c) && c != ',') {
            st_errf(err, errlen, "%s:%llu: expected a JSON object", r->name, (unsigned long long)r->lineno);
            return -1;
        }
    }
    return 0;
}

/* Whether the first non-blank byte of the current line (what is buffered, then p) opens a JSON
 * object or array ('{' or '['). */
static int starts_with_brace(const st_trace_reader *r, const char *p, size_t n)
{
    for (size_t i = 0; i < r->line.len; i++)
        if (!st_is_ws(r->line.data[i]))
            return r->line.data[i] == '{' || r->line.data[i] == '[';
    for (size_t i = 0; i < n; i++)
        if (!st_is_ws(p[i]))
            return p[i] == '{' || p[i] == '[';
    return 0;
}

/* What the stream's first bytes say (n of them, all there are when fewer than ST_TRACE_SNIFF):
 * the length of a UTF-8 byte-order mark to skip, or -1 with the reason for a compressed or
 * binary file (named as what it is). */
static int sniff(const st_trace_reader *r, const unsigned char *h, size_t n, char *err, size_t errlen)
{
    static const struct {
        const char *magic;
        size_t len;
        const char *what, *tool;
    } packed[] = {
        { "\x1f\x8b", 2, "gzip", "gunzip -k" },
        { "\x28\xb5\x2f\xfd", 4, "zstd", "zstd -d" },
        { "\xfd\x37\x7a\x58\x5a", 5, "xz", "unxz -k" },
        { "BZh", 3, "bzip2", "bunzip2 -k" },
        { "PK\x03\x04", 4, "zip", "unzip" },
    };
    for (size_t i = 0; i < sizeof packed / sizeof *packed; i++)
        if (n >= packed[i].len && !memcmp(h, packed[i].magic, packed[i].len)) {
            st_errf(err, errlen, "%s: %s-compressed: decompress it first (%s FILE)", r->name, packed[i].what,
                    packed[i].tool);
            return -1;
        }
    if (n >= 3 && !memcmp(h, "\xef\xbb\xbf", 3))
        return 3; /* UTF-8 byte-order mark (Windows tools write one): not part of the first line */
    if (memchr(h, '\0', n)) {
        st_errf(err, errlen, "%s: binary data (a NUL byte in its first bytes), not a text trace", r->name);
        return -1;
    }
    return 0;
}

static int feed_text(st_trace_reader *r, const char *data, size_t len, char *err, size_t errlen);

/* The first ST_TRACE_SNIFF bytes are held until they can be looked at (sniff), then fed on. */
static int feed_head(st_trace_reader *r, char *err, size_t errlen)
{
    r->sniffed = 1;
    int skip = sniff(r, r->head, r->nhead, err, errlen);
    if (skip < 0) {
        r->failed = 1;
        return -1;
    }
    return feed_text(r, (const char *)r->head + skip, r->nhead - (size_t)skip, err, errlen);
}

int st_trace_reader_feed(st_trace_reader *r, const char *data, size_t len, char *err, size_t errlen)
{
    if (r->failed)
        return -1;
    if (r->stopped)
        return 1;
    if (!r->sniffed) {
        size_t k = sizeof r->head - r->nhead < len ? sizeof r->head - r->nhead : len;
        memcpy(r->head + r->nhead, data, k);
        r->nhead += k;
        data += k;
        len -= k;
        if (r->nhead < sizeof r->head)
            return 0;
        int rc = feed_head(r, err, errlen);
        if (rc)
            return rc;
    }
    return feed_text(r, data, len, err, errlen);
}

/* Reports the current line as over-long, once, as soon as it passes the limit (not at its
 * newline, which may never come). 0, or -1. */
static int too_long_now(st_trace_reader *r, char *err, size_t errlen)
{
    char why[160];
    snprintf(why, sizeof why, "line is longer than %u bytes (the limit of one row)", ST_TRACE_LINE_MAX);
    int rc = bad_row(r, r->lineno + 1, why, err, errlen);
    if (rc)
        r->failed = 1;
    return rc;
}

static int feed_text(st_trace_reader *r, const char *data, size_t len, char *err, size_t errlen)
{
    if (r->failed)
        return -1;
    if (r->stopped)
        return 1;
    size_t pos = 0;
    while (pos < len) {
        if (r->o.stop && *r->o.stop) {
            r->c.interrupted = 1;
            r->failed = 1;
            st_errf(err, errlen, "%s: interrupted at line %llu", r->name, (unsigned long long)r->lineno + 1);
            return -1;
        }
        if (r->doc_mode) {
            int rc = doc_feed(r, data + pos, len - pos, err, errlen);
            if (rc) {
                r->failed = rc < 0;
                r->stopped = rc > 0;
            }
            return rc;
        }
        const char *nl = memchr(data + pos, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - (data + pos)) : len - pos;
        if (!r->decided && !r->line_too_long && r->line.len + n > ST_TRACE_LINE_MAX &&
            (r->fmt == ST_TRACE_AUTO || r->fmt == ST_TRACE_LITELLM) && starts_with_brace(r, data + pos, n)) {
            /* a first line longer than any row: a minified JSON document */
            r->fmt = ST_TRACE_LITELLM;
            r->doc_mode = r->decided = 1;
            r->lineno++;
            int rc = doc_feed(r, r->line.data ? r->line.data : "", r->line.len, err, errlen);
            st_buf_reset(&r->line);
            if (!rc)
                rc = doc_feed(r, data + pos, len - pos, err, errlen);
            if (rc) {
                r->failed = rc < 0;
                r->stopped = rc > 0;
            }
            return rc;
        }
        if (r->line_too_long) {
            /* skipping an over-long line (already reported): a stream without newlines (a
             * device, a broken exporter's FIFO) is not read on for ever */
            r->skipped += n;
            if (r->skipped > ST_TRACE_SKIP_MAX) {
                st_errf(err, errlen, "%s:%llu: no newline in %llu bytes: not a trace with one row per line", r->name,
                        (unsigned long long)r->lineno + 1, (unsigned long long)r->skipped);
                r->failed = 1;
                return -1;
            }
        } else if (st_buf_append(&r->line, data + pos, n) < 0 || r->line.len > ST_TRACE_LINE_MAX) {
            r->line_too_long = 1;
            r->skipped = r->line.len;
            st_buf_reset(&r->line);
            if (too_long_now(r, err, errlen))
                return -1;
        }
        pos += n;
        if (!nl)
            break;
        pos++;
        r->lineno++;
        r->c.lines++;
        int rc = 0;
        if (!r->line_too_long) /* an over-long one was reported when it passed the limit */
            rc = handle_line(r, r->line.data ? r->line.data : "", r->line.len, err, errlen);
        st_buf_reset(&r->line);
        r->line_too_long = 0;
        r->skipped = 0;
        if (rc) {
            r->failed = rc < 0;
            r->stopped = rc > 0;
            return rc;
        }
        if (r->doc_mode && pos < len) {
            rc = doc_feed(r, data + pos, len - pos, err, errlen);
            if (rc) {
                r->failed = rc < 0;
                r->stopped = rc > 0;
            }
            return rc;
        }
    }
    return 0;
}

int st_trace_reader_finish(st_trace_reader *r, char *err, size_t errlen)
{
    if (r->failed)
        return -1;
    if (r->stopped)
        return 0;
    if (!r->sniffed) { /* fewer bytes than the sniff looks at: the whole stream */
        int rc = feed_head(r, err, errlen);
        if (rc < 0)
            return -1;
        if (rc > 0)
            return 0;
    }
    if (!r->doc_mode && (r->line.len || r->line_too_long)) {
        r->lineno++;
        r->c.lines++;
        int rc = 0;
        if (!r->line_too_long)
            rc = handle_line(r, r->line.data, r->line.len, err, errlen);
        st_buf_reset(&r->line);
        if (rc < 0) {
            r->failed = 1;
            return -1;
        }
        if (rc > 0)
            return 0;
    }
    if (r->doc_mode) {
        if (!r->jdone && r->jdepth > 0) {
            /* named at its last line that holds anything, not at the empty one after its newline */
            st_errf(err, errlen, "%s:%llu: the JSON document ends early", r->name,
                    (unsigned long long)(r->jlast_line ? r->jlast_line : r->lineno));
            r->failed = 1;
            return -1;
        }
        if (r->lineno == 0 || r->c.lines < r->lineno)
            r->c.lines = r->lineno;
    }
    return 0;
}

/* ---- files ---------------------------------------------------------------------- */

int st_trace_read_buffer(const char *data, size_t len, const char *name, const st_trace_opts *o, st_trace_row_cb cb,
                         void *arg, st_trace_counts *counts, st_trace_format *fmt, char *err, size_t errlen)
{
    st_trace_reader *r = st_trace_reader_new(o, name, cb, arg);
    if (!r) {
        st_errf(err, errlen, "%s: out of memory", name);
        return -1;
    }
    int rc = st_trace_reader_feed(r, data, len, err, errlen);
    if (rc >= 0)
        rc = st_trace_reader_finish(r, err, errlen);
    if (counts)
        *counts = r->c;
    if (fmt)
        *fmt = r->fmt;
    st_trace_reader_free(r);
    return rc < 0 ? -1 : 0;
}

/* A gzip-compressed file, inflated as it is read (members one after another, as gunzip does). */
typedef struct gz_in {
    z_stream zs;
    int on;    /* the file is gzip (decided on its first bytes) */
    int ended; /* the last member ended (more input starts another) */
    char *out; /* ST_TRACE_CHUNK bytes */
} gz_in;

/* Inflates n bytes of the file into the reader. 0, 1 (stop), -1 with err. */
static int gz_feed(gz_in *g, st_trace_reader *r, const char *path, char *in, size_t n, char *err, size_t errlen)
{
    g->zs.next_in = (Bytef *)in;
    g->zs.avail_in = (uInt)n;
    while (g->zs.avail_in > 0) {
        if (g->ended) {
            if (inflateReset(&g->zs) != Z_OK)
                return st_errf(err, errlen, "%s: gzip: cannot start the next member", path), -1;
            g->ended = 0;
        }
        g->zs.next_out = (Bytef *)g->out;
        g->zs.avail_out = (uInt)ST_TRACE_CHUNK;
        int zr = inflate(&g->zs, Z_NO_FLUSH);
        if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR) {
            st_errf(err, errlen, "%s: gzip data is corrupt (%s)", path, g->zs.msg ? g->zs.msg : "inflate failed");
            return -1;
        }
        size_t got = ST_TRACE_CHUNK - g->zs.avail_out;
        if (got) {
            int rc = st_trace_reader_feed(r, g->out, got, err, errlen);
            if (rc)
                return rc;
        }
        if (zr == Z_STREAM_END)
            g->ended = 1;
        else if (zr == Z_BUF_ERROR && got == 0)
            break; /* needs more input */
    }
    return 0;
}

int st_trace_read_file(const char *path, const st_trace_opts *o, st_trace_row_cb cb, void *arg, st_trace_counts *counts,
                       st_trace_format *fmt, char *err, size_t errlen)
{
    int fd = strcmp(path, "-") ? open(path, O_RDONLY | O_CLOEXEC) : 0;
    if (fd < 0) {
        st_errf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    /* a device (/dev/zero, /dev/urandom) never ends: refused by name; a FIFO or standard input is
     * read, bounded by the line limits (ST_TRACE_LINE_MAX, ST_TRACE_SKIP_MAX) */
    struct stat st;
    if (fd > 0 && fstat(fd, &st) == 0 && (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISDIR(st.st_mode))) {
        st_errf(err, errlen, "%s: is a %s, not a trace file", path,
                S_ISDIR(st.st_mode)   ? "folder"
                : S_ISCHR(st.st_mode) ? "character device"
                                      : "block device");
        if (fd > 0)
            close(fd);
        return -1;
    }
    st_trace_reader *r = st_trace_reader_new(o, path, cb, arg);
    char *buf = malloc(ST_TRACE_CHUNK);
    if (!r || !buf) {
        st_trace_reader_free(r);
        free(buf);
        if (fd > 0)
            close(fd);
        st_errf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    int rc = 0, first = 1;
    gz_in g;
    memset(&g, 0, sizeof g);
    for (;;) {
        if (o && o->stop && *o->stop) {
            r->c.interrupted = 1;
            st_errf(err, errlen, "%s: interrupted at line %llu", path, (unsigned long long)r->lineno + 1);
            rc = -1;
            break;
        }
        ssize_t n = read(fd, buf, ST_TRACE_CHUNK);
        if (n < 0 && errno == EINTR)
            continue; /* a signal: the stop flag is looked at first */
        if (n < 0) {
            st_errf(err, errlen, "%s: %s", path, strerror(errno));
            rc = -1;
            break;
        }
        if (first && n >= 2 && (unsigned char)buf[0] == 0x1f && (unsigned char)buf[1] == 0x8b) {
            /* gzip (a .jsonl.gz as published): inflated as it streams, memory still bounded */
            g.out = malloc(ST_TRACE_CHUNK);
            if (!g.out || inflateInit2(&g.zs, 15 + 16) != Z_OK) {
                st_errf(err, errlen, "%s: out of memory", path);
                rc = -1;
                break;
            }
            g.on = 1;
        }
        first = 0;
        if (n == 0) {
            if (g.on && !g.ended) {
                st_errf(err, errlen, "%s: the gzip data ends early (a truncated file?)", path);
                rc = -1;
                break;
            }
            rc = st_trace_reader_finish(r, err, errlen);
            break;
        }
        rc = g.on ? gz_feed(&g, r, path, buf, (size_t)n, err, errlen)
                  : st_trace_reader_feed(r, buf, (size_t)n, err, errlen);
        if (rc) {
            if (rc > 0)
                rc = 0;
            break;
        }
    }
    if (g.on)
        inflateEnd(&g.zs);
    free(g.out);
    if (counts)
        *counts = r->c;
    if (fmt)
        *fmt = r->fmt;
    st_trace_reader_free(r);
    free(buf);
    if (fd > 0)
        close(fd);
    return rc;
}

static uint64_t gcd_u64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

void st_trace_quantum_add(st_trace_quantum *q, double rel_s)
{
    if (q->n && rel_s == q->prev)
        q->ties++;
    q->prev = rel_s;
    q->n++;
    double us = fabs(rel_s) * 1e6;
    double r = floor(us + 0.5);
    if (!(us < 9e15) || fabs(us - r) > 1e-3 * (1 + us * 1e-12)) {
        q->inexact = 1;
        return;
    }
    q->gcd_us = gcd_u64(q->gcd_us, (uint64_t)r);
}

double st_trace_quantum_s(const st_trace_quantum *q)
{
    if (q->inexact || q->n < ST_TRACE_QUANTUM_MIN_ROWS || q->ties * ST_TRACE_QUANTUM_TIES_PER < q->n ||
        (double)q->gcd_us < ST_TRACE_QUANTUM_MIN_S * 1e6)
        return 0;
    return (double)q->gcd_us / 1e6;
}

void st_trace_spread_ties(double *t, uint32_t n, double quantum_s)
{
    if (!(quantum_s > 0))
        return;
    for (uint32_t i = 0; i < n;) {
        uint32_t j = i + 1;
        while (j < n && t[j] == t[i])
            j++;
        for (uint32_t k = i + 1; k < j; k++)
            t[k] = t[i] + (double)(k - i) * quantum_s / (double)(j - i);
        i = j;
    }
}

void st_trace_counts_describe(const st_trace_counts *c, char *out, size_t cap)
{
    st_buf b;
    st_buf_init(&b, cap ? cap - 1 : 0);
    st_buf_printf(&b, "%llu request rows, %llu kept", (unsigned long long)c->rows, (unsigned long long)c->kept);
    if (c->sessions)
        st_buf_printf(&b, " (%llu session%s)", (unsigned long long)c->sessions, c->sessions == 1 ? "" : "s");
    const struct {
        uint64_t n;
        const char *what;
    } s[] = {
        { c->failed, "failed in the log" },
        { c->window, "outside the time window" },
        { c->model, "other models" },
        { c->sampled_out, "not sampled" },
        { c->empty, "empty (0 input or output tokens)" },
        { c->too_long, "longer than the context" },
        { c->bad, "malformed" },
        { c->orphaned, "later turns of a session broken by a malformed turn" },
    };
    int first = 1;
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
        if (s[i].n) {
            st_buf_printf(&b, "%s%llu %s", first ? "; skipped: " : ", ", (unsigned long long)s[i].n, s[i].what);
            first = 0;
        }
    if (c->stopped)
        st_buf_puts(&b, "; stopped at the request limit");
    if (c->think_long)
        st_buf_printf(&b,
                      "; %llu pause%s between a session's turns longer than %g s (the longest %.0f s): a replay "
                      "waits %g s instead",
                      (unsigned long long)c->think_long, c->think_long == 1 ? "" : "s", ST_TRACE_THINK_CAP_S,
                      c->think_longest_s, ST_TRACE_THINK_CAP_S);
    if (c->quantum_s > 0)
        st_buf_printf(&b,
                      "; times quantized to %g s (%llu requests share a tick with the one before): a tick's requests "
                      "are replayed spread evenly over it, not at once",
                      c->quantum_s, (unsigned long long)c->quantum_ties);
    if (c->unsorted)
        st_buf_printf(&b, "; %llu rows earlier than the row before them (replayed in time order)",
                      (unsigned long long)c->unsorted);
    if (c->unsorted && c->sessions) /* turns are told apart as the rows come */
        st_buf_puts(&b, "; its sessions' turns are taken in the file's order: sort the log by time (oldest first) "
                        "for them");
    if (cap) {
        size_t n = b.len < cap - 1 ? b.len : cap - 1;
        memcpy(out, b.data ? b.data : "", n);
        out[n] = '\0';
    }
    st_buf_free(&b);
}
