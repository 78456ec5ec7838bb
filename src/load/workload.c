#include "load/workload.h"
#include "core/file.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/util.h"

/* Seeds of the id streams of trace requests given as token counts: fixed, so a trace
 * always expands to the same ids. */
#define TRACE_UNIQUE_SEED 0x7472616365756e71ULL /* "traceunq" */
#define TRACE_PREFIX_SEED 0x7472616365707266ULL /* "traceprf" */
#define TRACE_FILE_MAX ((size_t)1 << 30)

void st_work_item_free(st_work_item *it)
{
    if (!it)
        return;
    free(it->input_ids);
    free(it->input_text);
    it->input_ids = NULL;
    it->input_text = NULL;
}

void st_workload_free(st_workload *w)
{
    if (!w)
        return;
    for (uint32_t i = 0; i < w->n; i++)
        st_work_item_free(&w->items[i]);
    free(w->items);
    w->items = NULL;
    w->n = 0;
}

static void fill_ids(st_rng *r, uint32_t *ids, uint32_t n, uint32_t hi_excl)
{
    for (uint32_t i = 0; i < n; i++)
        ids[i] = st_rng_range(r, ST_WORKLOAD_VOCAB_LO, hi_excl - 1);
}

/* ---- synthetic ---------------------------------------------------------------------- */

int st_workload_synthetic(const st_synth_params *p, st_workload *out, char *err, size_t errlen)
{
    out->items = NULL;
    out->n = 0;
    uint32_t vocab = p->vocab_size ? p->vocab_size : ST_WORKLOAD_VOCAB_DEFAULT;
    double r = p->range_ratio;
    if (p->num_requests == 0 || p->num_requests > ST_WORKLOAD_MAX_REQUESTS) {
        st_errf(err, errlen, "number of requests must be in 1..%u", ST_WORKLOAD_MAX_REQUESTS);
        return -1;
    }
    if (!(r >= 0 && r < 1)) {
        st_errf(err, errlen, "range ratio must be in [0, 1), got %g", r);
        return -1;
    }
    if (p->input_len == 0 || p->output_len == 0) {
        st_errf(err, errlen, "input and output lengths must be at least 1 token");
        return -1;
    }
    if (vocab <= ST_WORKLOAD_VOCAB_LO) {
        st_errf(err, errlen, "vocabulary size must exceed %u, got %u", ST_WORKLOAD_VOCAB_LO, vocab);
        return -1;
    }
    uint32_t in_lo = (uint32_t)floor(p->input_len * (1 - r));
    uint32_t in_hi = (uint32_t)floor(p->input_len * (1 + r));
    uint32_t out_lo = (uint32_t)floor(p->output_len * (1 - r));
    uint32_t out_hi = (uint32_t)floor(p->output_len * (1 + r));
    if (in_lo < 1)
        in_lo = 1;
    if (out_lo < 1)
        out_lo = 1;
    if (in_hi > ST_WORKLOAD_MAX_TOKENS || out_hi > ST_WORKLOAD_MAX_TOKENS) {
        st_errf(err, errlen, "lengths above %u tokens are not supported", ST_WORKLOAD_MAX_TOKENS);
        return -1;
    }
    if (p->prefix_len > in_lo) {
        st_errf(err, errlen,
                "shared prefix (%u tokens) is longer than the shortest prompt (%u tokens); the input "
                "length includes the prefix",
                p->prefix_len, in_lo);
        return -1;
    }
    st_work_item *items = calloc(p->num_requests, sizeof *items);
    uint32_t *prefix = p->prefix_len ? malloc((size_t)p->prefix_len * sizeof *prefix) : NULL;
    if (!items || (p->prefix_len && !prefix)) {
        free(items);
        free(prefix);
        st_errf(err, errlen, "out of memory");
        return -1;
    }
    st_rng rng;
    st_rng_seed(&rng, p->seed);
    /* Lengths first, then the prefix, then each request's own ids (the order vLLM uses). */
    for (uint32_t i = 0; i < p->num_requests; i++) {
        items[i].id = i;
        items[i].arrival = -1;
        items[i].input_len = st_rng_range(&rng, in_lo, in_hi);
        items[i].output_len = st_rng_range(&rng, out_lo, out_hi);
        items[i].prefix_group = 0;
        items[i].prefix_len = p->prefix_len;
    }
    fill_ids(&rng, prefix, p->prefix_len, vocab);
    out->items = items;
    out->n = p->num_requests;
    for (uint32_t i = 0; i < p->num_requests; i++) {
        st_work_item *it = &items[i];
        it->input_ids = malloc((size_t)it->input_len * sizeof *it->input_ids);
        if (!it->input_ids) {
            st_workload_free(out);
            free(prefix);
            st_errf(err, errlen, "out of memory");
            return -1;
        }
        if (p->prefix_len)
            memcpy(it->input_ids, prefix, (size_t)p->prefix_len * sizeof *prefix);
        fill_ids(&rng, it->input_ids + p->prefix_len, it->input_len - p->prefix_len, vocab);
    }
    free(prefix);
    return 0;
}

/* ---- text ---------------------------------------------------------------------------- */

static const char *const words[256] = {
    "the",       "of",      "and",       "to",        "in",       "is",        "was",     "for",      "on",
    "that",      "with",    "as",        "by",        "at",       "from",      "his",     "her",      "they",
    "are",       "this",    "had",       "not",       "but",      "be",        "have",    "one",      "all",
    "were",      "when",    "we",        "there",     "can",      "an",        "which",   "their",    "said",
    "if",        "do",      "will",      "each",      "about",    "how",       "up",      "out",      "them",
    "then",      "she",     "many",      "some",      "so",       "these",     "would",   "other",    "into",
    "has",       "more",    "two",       "like",      "him",      "see",       "time",    "could",    "no",
    "make",      "than",    "first",     "been",      "its",      "who",       "now",     "people",   "my",
    "made",      "over",    "did",       "down",      "only",     "way",       "find",    "use",      "may",
    "water",     "long",    "little",    "very",      "after",    "words",     "called",  "just",     "where",
    "most",      "know",    "get",       "through",   "back",     "much",      "before",  "go",       "good",
    "new",       "write",   "our",       "used",      "me",       "man",       "too",     "any",      "day",
    "same",      "right",   "look",      "think",     "also",     "around",    "another", "came",     "come",
    "work",      "three",   "word",      "must",      "because",  "does",      "part",    "even",     "place",
    "well",      "such",    "here",      "take",      "why",      "things",    "help",    "put",      "years",
    "different", "away",    "again",     "off",       "went",     "old",       "number",  "great",    "tell",
    "men",       "say",     "small",     "every",     "found",    "still",     "between", "name",     "should",
    "home",      "big",     "give",      "air",       "line",     "set",       "own",     "under",    "read",
    "last",      "never",   "us",        "left",      "end",      "along",     "while",   "might",    "next",
    "sound",     "below",   "saw",       "something", "thought",  "both",      "few",     "those",    "always",
    "looked",    "show",    "large",     "often",     "together", "asked",     "house",   "world",    "going",
    "want",      "school",  "important", "until",     "form",     "food",      "keep",    "children", "feet",
    "land",      "side",    "without",   "boy",       "once",     "animals",   "life",    "enough",   "took",
    "sometimes", "four",    "head",      "above",     "kind",     "began",     "almost",  "live",     "page",
    "got",       "earth",   "need",      "far",       "hand",     "high",      "year",    "mother",   "light",
    "parts",     "country", "father",    "let",       "night",    "following", "picture", "being",    "study",
    "second",    "eyes",    "soon",      "times",     "story",    "boys",      "since",   "white",    "days",
    "ever",      "paper",   "hard",      "near",      "sentence", "better",    "best",    "across",   "during",
    "today",     "others",  "however",   "sure",
};

int st_workload_text(const st_work_item *it, st_buf *out)
{
    if (!it || !out)
        return -1;
    if (it->input_text)
        return st_buf_puts(out, it->input_text);
    if (!it->input_ids)
        return -1;
    for (uint32_t i = 0; i < it->input_len; i++) {
        const char *w = words[it->input_ids[i] & 255u];
        size_t n = strlen(w);
        if (st_buf_reserve(out, n + 1) < 0)
            return -1;
        if (i)
            out->data[out->len++] = ' ';
        memcpy(out->data + out->len, w, n);
        out->len += n;
        out->data[out->len] = '\0';
    }
    return 0;
}

/* ---- traces ---------------------------------------------------------------------------- */

static int get_count(json_t *v, const char *name, uint32_t lo, uint32_t *out, char *err, size_t errlen)
{
    if (!json_is_integer(v)) {
        st_errf(err, errlen, "%s must be an integer", name);
        return -1;
    }
    json_int_t x = json_integer_value(v);
    if (x < (json_int_t)lo || x > (json_int_t)ST_WORKLOAD_MAX_TOKENS) {
        st_errf(err, errlen, "%s must be in %u..%u, got %lld", name, lo, ST_WORKLOAD_MAX_TOKENS, (long long)x);
        return -1;
    }
    *out = (uint32_t)x;
    return 0;
}

static uint32_t count_words(const char *s)
{
    uint32_t n = 0;
    int in = 0;
    for (; *s; s++) {
        int sp = *s == ' ' || *s == '\t' || *s == '\n' || *s == '\r';
        if (!sp && !in)
            n++;
        in = !sp;
    }
    return n;
}

int st_trace_parse_line(const char *line, size_t len, uint32_t index, st_work_item *it, int *has_ts, double *ts_s,
                        char *err, size_t errlen)
{
    memset(it, 0, sizeof *it);
    it->id = index;
    it->arrival = -1;
    *has_ts = 0;
    *ts_s = 0;
    size_t i = 0;
    while (i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r' || line[i] == '\n'))
        i++;
    if (i == len || line[i] == '#')
        return 1;
    json_error_t jerr;
    json_t *root = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        st_errf(err, errlen, "invalid JSON at column %d: %s", jerr.column, jerr.text);
        return -1;
    }
    int rc = -1;
    if (!json_is_object(root)) {
        st_errf(err, errlen, "expected a JSON object");
        goto out;
    }
    json_t *ts = NULL, *in_tok = NULL, *in_ids = NULL, *text = NULL, *out_tok = NULL, *pg = NULL, *pl = NULL;
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val)
    {
        if (strcmp(key, "timestamp") == 0)
            ts = val;
        else if (strcmp(key, "input_tokens") == 0)
            in_tok = val;
        else if (strcmp(key, "input_ids") == 0)
            in_ids = val;
        else if (strcmp(key, "text") == 0)
            text = val;
        else if (strcmp(key, "output_tokens") == 0)
            out_tok = val;
        else if (strcmp(key, "prefix_group") == 0)
            pg = val;
        else if (strcmp(key, "prefix_len") == 0)
            pl = val;
        else {
            st_errf(err, errlen,
                    "unknown key \"%.64s\" (expected timestamp, input_tokens, input_ids, text, "
                    "output_tokens, prefix_group, prefix_len)",
                    key);
            goto out;
        }
    }
    if (ts) {
        if (!json_is_number(ts) || !isfinite(json_number_value(ts)) || json_number_value(ts) < 0) {
            st_errf(err, errlen, "timestamp must be a non-negative number of seconds");
            goto out;
        }
        *has_ts = 1;
        *ts_s = json_number_value(ts);
    }
    if (!out_tok) {
        st_errf(err, errlen, "output_tokens is required");
        goto out;
    }
    if (get_count(out_tok, "output_tokens", 1, &it->output_len, err, errlen) < 0)
        goto out;
    if (in_ids && text) {
        st_errf(err, errlen, "give either input_ids or text, not both");
        goto out;
    }
    if (!in_ids && !text && !in_tok) {
        st_errf(err, errlen, "the input is missing: give input_tokens, input_ids or text");
        goto out;
    }
    uint32_t count = 0;
    if (in_tok && get_count(in_tok, "input_tokens", 1, &count, err, errlen) < 0)
        goto out;
    if (pg) {
        if (!json_is_integer(pg) || json_integer_value(pg) < 0 || json_integer_value(pg) > (json_int_t)UINT32_MAX) {
            st_errf(err, errlen, "prefix_group must be a non-negative integer");
            goto out;
        }
        it->prefix_group = (uint32_t)json_integer_value(pg);
    }
    if (pl && get_count(pl, "prefix_len", 0, &it->prefix_len, err, errlen) < 0)
        goto out;
    if (pl && !pg) {
        st_errf(err, errlen, "prefix_len needs a prefix_group");
        goto out;
    }
    if (in_ids) {
        if (!json_is_array(in_ids) || json_array_size(in_ids) == 0) {
            st_errf(err, errlen, "input_ids must be a non-empty array of token ids");
            goto out;
        }
        size_t n = json_array_size(in_ids);
        if (n > ST_WORKLOAD_MAX_TOKENS) {
            st_errf(err, errlen, "input_ids has %zu ids, more than %u", n, ST_WORKLOAD_MAX_TOKENS);
            goto out;
        }
        if (in_tok && count != n) {
            st_errf(err, errlen, "input_tokens (%u) differs from the number of input_ids (%zu)", count, n);
            goto out;
        }
        it->input_ids = malloc(n * sizeof *it->input_ids);
        if (!it->input_ids) {
            st_errf(err, errlen, "out of memory");
            goto out;
        }
        for (size_t k = 0; k < n; k++) {
            json_t *x = json_array_get(in_ids, k);
            if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > (json_int_t)UINT32_MAX) {
                st_errf(err, errlen, "input_ids[%zu] is not a token id (a non-negative integer)", k);
                goto out;
            }
            it->input_ids[k] = (uint32_t)json_integer_value(x);
        }
        it->input_len = (uint32_t)n;
    } else if (text) {
        if (!json_is_string(text) || json_string_length(text) == 0) {
            st_errf(err, errlen, "text must be a non-empty string");
            goto out;
        }
        if (strlen(json_string_value(text)) != json_string_length(text)) {
            st_errf(err, errlen, "text must not contain NUL characters");
            goto out;
        }
        it->input_text = strdup(json_string_value(text));
        if (!it->input_text) {
            st_errf(err, errlen, "out of memory");
            goto out;
        }
        it->input_len = in_tok ? count : count_words(it->input_text);
        if (it->input_len == 0)
            it->input_len = 1;
    } else {
        /* A token count: ids are generated, the group's prefix first. */
        if (it->prefix_len > count) {
            st_errf(err, errlen, "prefix_len (%u) exceeds input_tokens (%u)", it->prefix_len, count);
            goto out;
        }
        it->input_len = count;
        it->input_ids = malloc((size_t)count * sizeof *it->input_ids);
        if (!it->input_ids) {
            st_errf(err, errlen, "out of memory");
            goto out;
        }
        st_rng r;
        st_rng_seed(&r, TRACE_PREFIX_SEED ^ ((uint64_t)it->prefix_group * 0x9e3779b97f4a7c15ULL));
        fill_ids(&r, it->input_ids, it->prefix_len, ST_WORKLOAD_VOCAB_DEFAULT);
        st_rng_seed(&r, TRACE_UNIQUE_SEED ^ ((uint64_t)(index + 1) * 0xbf58476d1ce4e5b9ULL));
        fill_ids(&r, it->input_ids + it->prefix_len, count - it->prefix_len, ST_WORKLOAD_VOCAB_DEFAULT);
    }
    if (it->prefix_len > it->input_len) {
        st_errf(err, errlen, "prefix_len (%u) exceeds the input length (%u)", it->prefix_len, it->input_len);
        goto out;
    }
    rc = 0;
out:
    json_decref(root);
    if (rc < 0)
        st_work_item_free(it);
    return rc;
}

int st_workload_trace_parse(const char *data, size_t len, const char *name, st_workload *out, char *err, size_t errlen)
{
    out->items = NULL;
    out->n = 0;
    uint32_t cap = 0, lineno = 0;
    int ts_mode = -1; /* -1 unknown, 0 none, 1 all */
    double first_ts = 0, prev_ts = 0;
    char why[384];
    size_t pos = 0;
    while (pos < len) {
        const char *line = data + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - line) : len - pos;
        pos += n + (nl ? 1 : 0);
        lineno++;
        if (n > ST_TRACE_LINE_MAX) {
            st_errf(err, errlen, "%s:%u: line is longer than %u bytes", name, lineno, ST_TRACE_LINE_MAX);
            goto fail;
        }
        if (memchr(line, '\0', n)) {
            st_errf(err, errlen, "%s:%u: NUL byte in line", name, lineno);
            goto fail;
        }
        st_work_item it;
        int has_ts;
        double ts;
        int rc = st_trace_parse_line(line, n, out->n, &it, &has_ts, &ts, why, sizeof why);
        if (rc == 1)
            continue;
        if (rc < 0) {
            st_errf(err, errlen, "%s:%u: %s", name, lineno, why);
            goto fail;
        }
        if (ts_mode < 0) {
            ts_mode = has_ts;
            first_ts = prev_ts = ts;
        } else if (ts_mode != has_ts) {
            st_errf(err, errlen, "%s:%u: %s", name, lineno,
                    has_ts ? "timestamp given, but earlier requests have none (all or none must have one)"
                           : "timestamp missing, but earlier requests have one (all or none must have one)");
            st_work_item_free(&it);
            goto fail;
        } else if (has_ts && ts < prev_ts) {
            st_errf(err, errlen,
                    "%s:%u: timestamp %.9g is earlier than the previous request's %.9g "
                    "(the trace must be sorted by time)",
                    name, lineno, ts, prev_ts);
            st_work_item_free(&it);
            goto fail;
        }
        if (has_ts) {
            prev_ts = ts;
            double rel = ts - first_ts;
            if (rel > 1e9) {
                st_errf(err, errlen, "%s:%u: timestamp too far from the first one", name, lineno);
                st_work_item_free(&it);
                goto fail;
            }
            it.arrival = (st_ns)llround(rel * 1e9);
        }
        if (out->n == cap) {
            if (cap >= ST_WORKLOAD_MAX_REQUESTS) {
                st_errf(err, errlen, "%s:%u: more than %u requests", name, lineno, ST_WORKLOAD_MAX_REQUESTS);
                st_work_item_free(&it);
                goto fail;
            }
            uint32_t nc = cap ? cap * 2 : 64;
            if (nc > ST_WORKLOAD_MAX_REQUESTS)
                nc = ST_WORKLOAD_MAX_REQUESTS;
            st_work_item *p = realloc(out->items, (size_t)nc * sizeof *p);
            if (!p) {
                st_errf(err, errlen, "%s:%u: out of memory", name, lineno);
                st_work_item_free(&it);
                goto fail;
            }
            out->items = p;
            cap = nc;
        }
        out->items[out->n++] = it;
    }
    if (out->n == 0) {
        st_errf(err, errlen, "%s: the trace holds no requests", name);
        goto fail;
    }
    return 0;
fail:
    st_workload_free(out);
    return -1;
}

int st_workload_trace_load(const char *path, st_workload *out, char *err, size_t errlen)
{
    out->items = NULL;
    out->n = 0;
    size_t len;
    char *data = st_read_file(path, TRACE_FILE_MAX, &len, err, errlen);
    if (!data)
        return -1;
    int rc = st_workload_trace_parse(data, len, path, out, err, errlen);
    free(data);
    return rc;
}
