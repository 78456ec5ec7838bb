/* Trace readers: production logs and public LLM traces read natively, as a stream, into one
 * row shape (st_trace_row) that the workload builder (load/workload.h) and the traffic
 * statistics (load/trace_stats.h) consume. docs/trace-format.md documents every format with
 * a sample.
 *
 * Formats (detected from the content, or forced with st_trace_opts.format):
 *   servetune  servetune's own JSONL (input_tokens / input_ids / text, output_tokens, ...)
 *   mooncake   Mooncake JSONL: timestamp (ms), input_length, output_length, hash_ids (one id
 *              per block of block_size tokens; requests sharing an id share that block)
 *   azure      Azure LLM inference trace CSV: TIMESTAMP,ContextTokens,GeneratedTokens
 *   burstgpt   BurstGPT CSV: Timestamp,Model,Request tokens,Response tokens,Total tokens,
 *              Log Type (rows with 0 response tokens are failed requests: counted apart)
 *   litellm    a LiteLLM proxy spend log: a JSON array of rows (or {"data": [...]}, or one row
 *              per line) with startTime, endTime, prompt_tokens, completion_tokens, model,
 *              session_id, status
 *   csv        a CSV with named columns (timestamp, input_tokens, output_tokens, model,
 *              session_id, turn, status, ...)
 *
 * The reader is a push parser with no I/O: feed it bytes in chunks of any size; it calls the
 * row callback once per kept row. Memory is bounded: one line (or one JSON element) of at
 * most ST_TRACE_LINE_MAX bytes, and one entry per open session. st_trace_read_file is the one
 * function that reads a file (in ST_TRACE_CHUNK pieces).
 *
 * Nothing is dropped silently: every row that is not given to the callback is counted in
 * st_trace_counts under its reason (failed, outside the window, other model, not sampled,
 * empty, longer than the context, malformed; the later turns of a session go with its first
 * turn's reason), and the first malformed rows are kept as
 * "file:line: reason". A malformed row is an error unless max_bad allows skipping it. */
#ifndef ST_TRACE_H
#define ST_TRACE_H
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "load/workload.h"

typedef enum st_trace_format {
    ST_TRACE_AUTO = 0,
    ST_TRACE_SERVETUNE,
    ST_TRACE_MOONCAKE,
    ST_TRACE_AZURE,
    ST_TRACE_BURSTGPT,
    ST_TRACE_LITELLM,
    ST_TRACE_CSV,
    ST_TRACE__COUNT
} st_trace_format;

/* "auto", "servetune", "mooncake", "azure", "burstgpt", "litellm", "csv". */
const char *st_trace_format_name(st_trace_format f);
int st_trace_format_from_name(const char *name, st_trace_format *out);

#define ST_TRACE_CHUNK ((size_t)1 << 20)
/* Bytes looked at before the rest (a UTF-8 byte-order mark is skipped; gzip, zstd, xz, bzip2
 * and zip files are named as such, binary data refused). */
#define ST_TRACE_SNIFF 8u
/* An over-long line is reported as soon as it passes ST_TRACE_LINE_MAX; when malformed rows
 * may be skipped, the rest of it is skipped up to this many bytes without a newline, then the
 * stream is refused (a device or a broken exporter's FIFO is not read for ever). */
#define ST_TRACE_SKIP_MAX ((uint64_t)64 << 20)
#define ST_TRACE_BLOCK_DEFAULT 512u  /* Mooncake's hash block (tokens) */
#define ST_TRACE_HASH_IDS_MAX 65536u /* hash ids per row */
#define ST_TRACE_SESSIONS_MAX (1u << 20)
#define ST_TRACE_FIELD_MAX 256u /* model name, session id */
#define ST_TRACE_CSV_COLUMNS_MAX 64
#define ST_TRACE_BAD_KEPT 5 /* malformed rows whose reason is kept */
#define ST_TRACE_COLUMN_MAP_MAX 16

/* --trace-columns for the plain CSV: field=Column pairs (field: timestamp, timestamp_ms,
 * end_time, input_tokens, output_tokens, model, session_id, turn, status, ignore). */
typedef struct st_trace_colmap {
    char field[ST_TRACE_COLUMN_MAP_MAX][32];
    char column[ST_TRACE_COLUMN_MAP_MAX][96];
    int n;
} st_trace_colmap;
/* Parses "field=Column,field=Column". 0, or -1 with err. */
int st_trace_colmap_parse(const char *spec, st_trace_colmap *out, char *err, size_t errlen);

typedef struct st_trace_opts {
    st_trace_format format;         /* ST_TRACE_AUTO: detect from the content */
    uint32_t block_size;            /* Mooncake hash block in tokens (0: ST_TRACE_BLOCK_DEFAULT) */
    double window_from_s;           /* keep rows whose time since the first row is in [from, to) */
    double window_to_s;             /* 0: no end */
    const char *model;              /* keep only rows of this model (NULL: all) */
    double sample;                  /* keep this fraction of rows (whole sessions), in (0, 1]; 0: 1 */
    uint64_t seed;                  /* of the sample */
    uint32_t max_bad;               /* malformed rows skipped (counted) before one is an error */
    uint32_t max_context;           /* rows whose prompt + output exceed it are skipped (0: no check) */
    uint64_t max_rows;              /* stop after this many kept rows (0: all) */
    const st_trace_colmap *columns; /* plain CSV column names (may be NULL) */
    uint64_t salt;                  /* mixed into the token ids generated for rows given as counts (0: none): another
                    * salt gives other prompts with the same sharing among them (a fresh prefix
                    * cache's view of the trace), as an audit's runs at different rates need */
    /* nonzero (a SIGINT/SIGTERM handler): reading ends at the next line or chunk, -1 with
     * "interrupted" (counts.interrupted); NULL: never */
    const volatile sig_atomic_t *stop;
} st_trace_opts;

typedef struct st_trace_counts {
    uint64_t lines;         /* lines read */
    uint64_t rows;          /* request rows parsed (kept or not; malformed excluded) */
    uint64_t kept;          /* given to the callback */
    uint64_t failed;        /* failed requests in the log (kept apart) */
    uint64_t window;        /* outside the time window */
    uint64_t model;         /* another model */
    uint64_t sampled_out;   /* not in the sample */
    uint64_t empty;         /* zero input or output tokens */
    uint64_t too_long;      /* prompt + output above max_context (and later turns of that session) */
    uint64_t bad;           /* malformed rows skipped under max_bad */
    uint64_t orphaned;      /* later turns of a session whose earlier turn was malformed (skipped) */
    uint64_t unsorted;      /* rows earlier than the row before them */
    uint64_t sessions;      /* distinct sessions among kept rows */
    uint64_t think_long;    /* kept later turns whose pause after the turn before exceeds ST_TRACE_THINK_CAP_S */
    double think_longest_s; /* the longest such pause (0: none) */
    double quantum_s;       /* the kept rows' times are all multiples of this coarse clock (at least
                           * ST_TRACE_QUANTUM_MIN_S) and some share one: 0 when not (st_trace_quantum) */
    uint64_t quantum_ties;  /* kept rows whose time equals the row before them */
    int stopped;            /* max_rows reached before the end */
    int interrupted;        /* the stop flag ended the reading (the counts are those so far) */
    char bad_first[ST_TRACE_BAD_KEPT][320];
    uint32_t n_bad_first;
} st_trace_counts;

/* One request of the trace, as the callback sees it. Pointers are valid during the callback. */
typedef struct st_trace_row {
    uint64_t line;  /* where the row starts (1-based) */
    uint64_t index; /* position among kept rows (0-based) */
    int has_ts;
    double ts_s;        /* the row's time in seconds as written (epoch for dates) */
    double rel_s;       /* seconds since the first row's time (0 without timestamps) */
    double end_s;       /* the request's end time when the log has one, else NAN */
    uint32_t input_len; /* the whole prompt, history of the session included */
    uint32_t output_len;
    const char *model; /* NUL-terminated, or NULL */
    /* Sessions (multi-turn): session is a 64-bit key of the session id (0: none). turn counts
     * the session's earlier kept rows. new_len is the user's new text in this turn (input_len
     * minus the previous turn's prompt and answer; input_len for turn 0), think_s the pause
     * between the previous turn's end and this turn (NAN when the log cannot tell). */
    uint64_t session;
    const char *session_id;
    uint32_t turn;
    uint32_t new_len;
    double think_s;
    /* Prefix sharing: Mooncake hash ids (one per block_size tokens), or a servetune
     * prefix_group with prefix_len shared leading tokens. */
    const uint64_t *hash_ids;
    uint32_t n_hash;
    uint32_t block_size;
    int has_prefix_group;
    uint32_t prefix_group, prefix_len;
    /* servetune JSONL: the parsed item (ids or text). The callback may take input_ids /
     * input_text (set them to NULL); the reader frees what is left. NULL for other formats. */
    st_work_item *item;
    /* The row's whole JSON object for the JSON formats that keep open keys (LiteLLM: user,
     * team_id, end_user, request_tags, metadata, ...), for readers of tenant fields
     * (plan/attrib.h); NULL for the others. Valid during the callback. */
    const char *json;
    size_t json_len;
} st_trace_row;

/* Quantized timestamps: a log written on a coarse clock (Mooncake's public traces: every time a
 * multiple of 3 s, dozens of requests on one tick) has ties that are the clock's, not bursts.
 * The times (seconds since the first row) are accumulated in whole microseconds; they are called
 * quantized when every one is a multiple of a quantum of at least ST_TRACE_QUANTUM_MIN_S, over at
 * least ST_TRACE_QUANTUM_MIN_ROWS rows of which at least 1 in ST_TRACE_QUANTUM_TIES_PER share a
 * tick with the row before (a handful of hand-written times, or a rare tie, is no clock). Statistics then measure the gaps with each quantum's requests spread
 * evenly within it (load/trace_stats.h), and a replay spreads them so (st_trace_spread_ties). */
#define ST_TRACE_QUANTUM_MIN_S 0.1
#define ST_TRACE_QUANTUM_MIN_ROWS 20u
#define ST_TRACE_QUANTUM_TIES_PER 20u
typedef struct st_trace_quantum {
    uint64_t gcd_us;  /* of the times seen so far (0: none but 0) */
    int inexact;      /* a time that is no whole microsecond: a fine clock */
    uint64_t n, ties; /* times seen; those equal to the one before */
    double prev;
} st_trace_quantum;
void st_trace_quantum_add(st_trace_quantum *q, double rel_s);
/* The quantum in seconds, or 0 when the times are not quantized. */
double st_trace_quantum_s(const st_trace_quantum *q);
/* Spreads sorted times t[0..n) of a quantized trace: the k times equal to one tick T become
 * T + i * quantum / k (i = 0..k-1), so a replay sends a tick's requests evenly over it rather
 * than at once. */
void st_trace_spread_ties(double *t, uint32_t n, double quantum_s);

/* Returns 0 to go on, 1 to stop reading (not an error), -1 to fail with err. */
typedef int (*st_trace_row_cb)(void *arg, const st_trace_row *row, char *err, size_t errlen);

typedef struct st_trace_reader st_trace_reader;

/* name is used in messages ("name:line: reason"). NULL when out of memory. */
st_trace_reader *st_trace_reader_new(const st_trace_opts *o, const char *name, st_trace_row_cb cb, void *arg);
/* Feeds bytes. 0, 1 when the callback (or max_rows) stopped the reading, -1 with err. */
int st_trace_reader_feed(st_trace_reader *r, const char *data, size_t len, char *err, size_t errlen);
/* The end of the input (a last line without a newline is a row). 0 or -1. */
int st_trace_reader_finish(st_trace_reader *r, char *err, size_t errlen);
const st_trace_counts *st_trace_reader_counts(const st_trace_reader *r);
st_trace_format st_trace_reader_format(const st_trace_reader *r);
void st_trace_reader_free(st_trace_reader *r);

/* Reads a whole file through a reader ("-" is stdin). counts and fmt may be NULL. 0 (also
 * when stopped early) or -1 with err. */
int st_trace_read_file(const char *path, const st_trace_opts *o, st_trace_row_cb cb, void *arg, st_trace_counts *counts,
                       st_trace_format *fmt, char *err, size_t errlen);

/* The same over bytes in memory. */
int st_trace_read_buffer(const char *data, size_t len, const char *name, const st_trace_opts *o, st_trace_row_cb cb,
                         void *arg, st_trace_counts *counts, st_trace_format *fmt, char *err, size_t errlen);

/* One line about what was read and skipped: "1000 rows, 990 kept; skipped: 10 failed". */
void st_trace_counts_describe(const st_trace_counts *c, char *out, size_t cap);

/* "2023-11-16 18:17:03.9799600", "2024-05-10T00:00:00.009930+00:00", "...Z": seconds since
 * the epoch (UTC; a time without an offset is taken as UTC). 0 or -1. */
int st_trace_parse_datetime(const char *s, size_t len, double *out);

/* ---- traces into workloads (load/trace_load.c) ---- */

/* What to do with a trace's sessions:
 *   REPLAY  conversations: a later turn is sent when the turn before it ended plus the think
 *           time, with the real answers in its prompt (needs a runner with the session hook:
 *           servetune bench);
 *   FLAT    every row on its recorded time; a later turn's prompt is rebuilt from the
 *           recorded lengths (the previous prompt, a stand-in answer of the recorded output
 *           length, the new text), so prefix reuse is as the trace implies (audit, predict);
 *   OFF     every row alone, with a prompt of its own. */
typedef enum { ST_TRACE_SESSIONS_REPLAY = 0, ST_TRACE_SESSIONS_FLAT, ST_TRACE_SESSIONS_OFF } st_trace_sessions;
int st_trace_sessions_from_name(const char *name, st_trace_sessions *out);

typedef struct st_trace_load_opts {
    st_trace_opts read;
    st_trace_sessions sessions;
    double think_s; /* replay: the think time of every later turn; NAN: from the trace */
} st_trace_load_opts;
void st_trace_load_opts_default(st_trace_load_opts *o);

/* The longest pause between a session's turns that a replay waits (seconds): a user who comes
 * back hours or days later (a foreign log's times) is not thinking, and a replay must not wait
 * that long. A longer pause is replayed as this one, counted in st_trace_counts.think_long and
 * said by st_trace_counts_describe and the spec check. */
#define ST_TRACE_THINK_CAP_S 600.0

/* Gaps whose coefficient of variation is below this are called evenly spaced: the advice replays
 * them with a constant schedule (a gamma shape of 1/CV^2 would be huge, or infinite at 0). */
#define ST_TRACE_CONSTANT_CV 0.05

/* Largest number of prompt token ids a loaded trace may hold (4 bytes each). */
#define ST_TRACE_LOAD_TOKENS_MAX ((uint64_t)1 << 28)

/* Reads a trace (any format) into a workload: kept rows in time order (a trace out of order
 * is sorted, and counted in counts->unsorted), ids generated as docs/trace-format.md says
 * (Mooncake blocks from their hash ids), arrival = time since the first row (or -1 without
 * timestamps). counts and fmt may be NULL. 0, or -1 with "file:line: reason". */
int st_trace_load(const char *path, const st_trace_load_opts *o, st_workload *out, st_trace_counts *counts,
                  st_trace_format *fmt, char *err, size_t errlen);
int st_trace_load_buffer(const char *data, size_t len, const char *name, const st_trace_load_opts *o, st_workload *out,
                         st_trace_counts *counts, st_trace_format *fmt, char *err, size_t errlen);

#endif
