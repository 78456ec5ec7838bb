#include "load/workload.h"

#include "load/agent.h"

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

void st_work_item_free(st_work_item *it)
{
    if (!it)
        return;
    if (!it->lazy) /* a lazy item's ids are the workload's shared prefix */
        free(it->input_ids);
    free(it->input_text);
    it->input_ids = NULL;
    it->input_text = NULL;
    for (uint32_t i = 0; i < it->n_history; i++)
        free(it->history[i]);
    free(it->history);
    it->history = NULL;
    it->n_history = 0;
    free(it->children);
    it->children = NULL;
    it->n_children = 0;
}

void st_workload_free(st_workload *w)
{
    if (!w)
        return;
    for (uint32_t i = 0; i < w->n; i++)
        st_work_item_free(&w->items[i]);
    free(w->items);
    free(w->shared_ids);
    w->shared_ids = NULL;
    w->items = NULL;
    w->n = 0;
    w->n_dependent = 0;
    w->n_sessions = 0;
    w->n_tasks = 0;
}

/* x mod d for a divisor fixed over many calls, without a division (Lemire, Kaser and Kurz,
 * "Faster remainder by direct computation", 2019): m = ceil(2^128 / d) once, then two
 * multiplications per remainder; exact for every 64-bit x and every d >= 1. */
#ifdef __SIZEOF_INT128__
typedef struct fastmod {
    unsigned __int128 m;
    uint64_t d;
} fastmod;

static fastmod fastmod_of(uint64_t d) { return (fastmod){ (unsigned __int128)-1 / d + 1, d }; }

static uint64_t fastmod_rem(const fastmod *f, uint64_t x)
{
    unsigned __int128 low = f->m * x; /* mod 2^128 */
    unsigned __int128 bottom = ((low & UINT64_MAX) * f->d) >> 64;
    unsigned __int128 top = (low >> 64) * f->d;
    return (uint64_t)((bottom + top) >> 64);
}
#else /* no 128-bit integers: the division */
typedef struct fastmod {
    uint64_t d;
} fastmod;

static fastmod fastmod_of(uint64_t d) { return (fastmod){ d }; }
static uint64_t fastmod_rem(const fastmod *f, uint64_t x) { return x % f->d; }
#endif

/* n draws of st_rng_range(r, ST_WORKLOAD_VOCAB_LO, hi_excl - 1), the same values from the same
 * generator state, with the range's rejection limit and divisor worked out once. */
static void fill_ids(st_rng *r, uint32_t *ids, uint32_t n, uint32_t hi_excl)
{
    uint32_t lo = ST_WORKLOAD_VOCAB_LO, hi = hi_excl - 1;
    if (lo >= hi) { /* st_rng_range draws nothing then */
        for (uint32_t i = 0; i < n; i++)
            ids[i] = lo;
        return;
    }
    uint64_t span = (uint64_t)hi - lo + 1;
    uint64_t limit = UINT64_MAX - (UINT64_MAX % span) - 1;
    fastmod f = fastmod_of(span);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t x;
        do
            x = st_rng_next(r);
        while (x > limit);
        ids[i] = lo + (uint32_t)fastmod_rem(&f, x);
    }
}

/* A name of the ids fill_ids(r, ..., hi_excl) draws from r's state now (st_work_item.own_key): the
 * generator's whole state and the range, hashed; never 0. Equal states draw equal ids. */
static uint64_t stream_key(const st_rng *r, uint32_t hi_excl)
{
    uint64_t h = st_mix64(0x6f776e6b6579ULL ^ hi_excl);
    for (int k = 0; k < 4; k++)
        h = st_mix64(h ^ r->s[k]) + 0x9e3779b97f4a7c15ULL * (uint64_t)(k + 1);
    return h ? h : 1;
}

/* Steps r over the n ids fill_ids(r, ids, n, hi_excl) draws, with the same draws and rejections. */
static void skip_ids(st_rng *r, uint32_t n, uint32_t hi_excl)
{
    uint32_t lo = ST_WORKLOAD_VOCAB_LO, hi = hi_excl - 1;
    if (lo >= hi)
        return;
    uint64_t span = (uint64_t)hi - lo + 1;
    uint64_t limit = UINT64_MAX - (UINT64_MAX % span) - 1;
    for (uint32_t i = 0; i < n; i++)
        while (st_rng_next(r) > limit)
            ;
}

int st_work_item_ids(const st_work_item *it, uint32_t *out)
{
    if (!it->lazy) {
        if (!it->input_ids)
            return -1;
        memcpy(out, it->input_ids, (size_t)it->input_len * sizeof *out);
        return 0;
    }
    if (it->own_from)
        memcpy(out, it->input_ids, (size_t)it->own_from * sizeof *out);
    st_rng r = it->tail;
    fill_ids(&r, out + it->own_from, it->input_len - it->own_from, it->tail_hi);
    return 0;
}

void st_workload_fill_ids(uint64_t seed, uint32_t *ids, uint32_t n)
{
    st_rng r;
    st_rng_seed(&r, seed);
    fill_ids(&r, ids, n, ST_WORKLOAD_VOCAB_DEFAULT);
}

/* ---- synthetic ---------------------------------------------------------------------- */

/* Each item's ids after the prefix (shared by the items when lazy, else copied into each), drawn
 * from rng, or for lazy items stepped over. 0, or -1 out of memory. */
static int synth_ids(const st_synth_params *p, uint32_t *prefix, st_rng *rng, uint32_t vocab, int lazy,
                     st_workload *out)
{
    for (uint32_t i = 0; i < out->n; i++) {
        st_work_item *it = &out->items[i];
        it->own_from = p->prefix_len;
        it->own_key = stream_key(rng, vocab);
        if (lazy) {
            it->lazy = 1;
            it->input_ids = prefix;
            it->tail = *rng;
            it->tail_hi = vocab;
            skip_ids(rng, it->input_len - p->prefix_len, vocab);
            continue;
        }
        it->input_ids = malloc((size_t)it->input_len * sizeof *it->input_ids);
        if (!it->input_ids)
            return -1;
        if (p->prefix_len)
            memcpy(it->input_ids, prefix, (size_t)p->prefix_len * sizeof *prefix);
        fill_ids(rng, it->input_ids + p->prefix_len, it->input_len - p->prefix_len, vocab);
    }
    return 0;
}

static int synthetic(const st_synth_params *p, int lazy, st_workload *out, char *err, size_t errlen);

int st_workload_synthetic(const st_synth_params *p, st_workload *out, char *err, size_t errlen)
{
    return synthetic(p, 0, out, err, errlen);
}

int st_workload_synthetic_lazy(const st_synth_params *p, st_workload *out, char *err, size_t errlen)
{
    return synthetic(p, 1, out, err, errlen);
}

static int synthetic(const st_synth_params *p, int lazy, st_workload *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
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
    if (p->vllm_semantics) {
        /* vLLM's RandomDataset: floor below, ceil above, the prefix on top of the drawn length */
        in_hi = (uint32_t)ceil(p->input_len * (1 + r));
        out_hi = (uint32_t)ceil(p->output_len * (1 + r));
        if ((uint64_t)in_hi + p->prefix_len > ST_WORKLOAD_MAX_TOKENS) {
            st_errf(err, errlen, "lengths above %u tokens are not supported", ST_WORKLOAD_MAX_TOKENS);
            return -1;
        }
        if ((uint64_t)in_lo + p->prefix_len < 1) {
            st_errf(err, errlen, "the shortest prompt would be empty: raise the input length or the prefix");
            return -1;
        }
    }
    if (in_lo < 1 && !p->vllm_semantics)
        in_lo = 1;
    if (out_lo < 1)
        out_lo = 1;
    if (out_hi < 1)
        out_hi = 1;
    if (in_hi > ST_WORKLOAD_MAX_TOKENS || out_hi > ST_WORKLOAD_MAX_TOKENS) {
        st_errf(err, errlen, "lengths above %u tokens are not supported", ST_WORKLOAD_MAX_TOKENS);
        return -1;
    }
    if (!p->vllm_semantics && p->prefix_len > in_lo) {
        st_errf(err, errlen,
                "shared prefix (%u tokens) is longer than the shortest prompt (%u tokens); the input "
                "length includes the prefix (vLLM's --random-prefix-len comes on top of the input length: use "
                "--random-input-len / --random-prefix-len for that meaning)",
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
        items[i].input_len = st_rng_range(&rng, in_lo, in_hi) + (p->vllm_semantics ? p->prefix_len : 0);
        items[i].output_len = st_rng_range(&rng, out_lo, out_hi);
        items[i].prefix_group = 0;
        items[i].prefix_len = p->prefix_len;
    }
    fill_ids(&rng, prefix, p->prefix_len, vocab);
    out->items = items;
    out->n = p->num_requests;
    if (lazy)
        out->shared_ids = prefix; /* the workload's from here on */
    if (synth_ids(p, prefix, &rng, vocab, lazy, out) < 0) {
        st_workload_free(out);
        if (!lazy)
            free(prefix);
        st_errf(err, errlen, "out of memory");
        return -1;
    }
    if (!lazy)
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
    st_trace_native x;
    int rc = st_trace_parse_native(line, len, index, 0, it, &x, err, errlen);
    *has_ts = rc == 0 && x.has_ts;
    *ts_s = rc == 0 ? x.ts_s : 0;
    return rc;
}

/* A native trace row's fields, each NULL when the row does not give it. */
typedef struct native_keys {
    json_t *ts, *in_tok, *in_ids, *text, *out_tok, *pg, *pl;
    json_t *sess, *turn, *think, *model, *completion, *out_ids, *cat;
} native_keys;

/* Sorts the row's keys into k; an unknown key is an error. */
static int native_collect(json_t *root, native_keys *k, char *err, size_t errlen)
{
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val)
    {
        if (strcmp(key, "timestamp") == 0)
            k->ts = val;
        else if (strcmp(key, "input_tokens") == 0)
            k->in_tok = val;
        else if (strcmp(key, "input_ids") == 0)
            k->in_ids = val;
        else if (strcmp(key, "text") == 0)
            k->text = val;
        else if (strcmp(key, "output_tokens") == 0)
            k->out_tok = val;
        else if (strcmp(key, "prefix_group") == 0)
            k->pg = val;
        else if (strcmp(key, "prefix_len") == 0)
            k->pl = val;
        else if (strcmp(key, "session") == 0)
            k->sess = val;
        else if (strcmp(key, "turn") == 0)
            k->turn = val;
        else if (strcmp(key, "think_time") == 0)
            k->think = val;
        else if (strcmp(key, "model") == 0)
            k->model = val;
        else if (strcmp(key, "completion") == 0) /* the logged answer: trace stats --spec */
            k->completion = val;
        else if (strcmp(key, "output_ids") == 0)
            k->out_ids = val;
        else if (strcmp(key, "category") == 0)
            k->cat = val;
        else {
            st_errf(err, errlen,
                    "unknown key \"%.64s\" (expected timestamp, input_tokens, input_ids, text, "
                    "output_tokens, prefix_group, prefix_len, session, turn, think_time, model, completion, "
                    "output_ids, category)",
                    key);
            return -1;
        }
    }
    return 0;
}

/* The row's timestamp and session fields (session, turn, think_time) into x. */
static int native_session(const native_keys *k, st_trace_native *x, char *err, size_t errlen)
{
    if (k->ts) {
        if (!json_is_number(k->ts) || !isfinite(json_number_value(k->ts)) || json_number_value(k->ts) < 0) {
            st_errf(err, errlen, "timestamp must be a non-negative number of seconds");
            return -1;
        }
        x->has_ts = 1;
        x->ts_s = json_number_value(k->ts);
    }
    json_t *sess = k->sess;
    if (sess) {
        if (json_is_string(sess) && json_string_length(sess) > 0 && json_string_length(sess) < sizeof x->session &&
            strlen(json_string_value(sess)) == json_string_length(sess)) {
            snprintf(x->session, sizeof x->session, "%s", json_string_value(sess));
        } else if (json_is_integer(sess) && json_integer_value(sess) >= 0) {
            snprintf(x->session, sizeof x->session, "%lld", (long long)json_integer_value(sess));
        } else {
            st_errf(err, errlen, "session must be a non-empty string (at most %zu bytes) or a non-negative integer",
                    sizeof x->session - 1);
            return -1;
        }
    }
    if (k->turn) {
        if (!sess) {
            st_errf(err, errlen, "turn needs a session");
            return -1;
        }
        if (!json_is_integer(k->turn) || json_integer_value(k->turn) < 0 || json_integer_value(k->turn) > 1000000) {
            st_errf(err, errlen, "turn must be an integer in 0..1000000");
            return -1;
        }
        x->has_turn = 1;
        x->turn = (uint32_t)json_integer_value(k->turn);
    }
    json_t *think = k->think;
    if (think) {
        if (!sess) {
            st_errf(err, errlen, "think_time needs a session");
            return -1;
        }
        if (!json_is_number(think) || !isfinite(json_number_value(think)) || json_number_value(think) < 0 ||
            json_number_value(think) > ST_SESSION_THINK_MAX_S) {
            st_errf(err, errlen, "think_time must be a number of seconds in 0..%g", ST_SESSION_THINK_MAX_S);
            return -1;
        }
        x->has_think = 1;
        x->think_s = json_number_value(think);
    }
    return 0;
}

/* The row's model, completion, category and output_ids checked; the model copied into x. */
static int native_answer(const native_keys *k, st_trace_native *x, char *err, size_t errlen)
{
    json_t *model = k->model;
    if (model) {
        if (!json_is_string(model) || json_string_length(model) >= sizeof x->model ||
            strlen(json_string_value(model)) != json_string_length(model)) {
            st_errf(err, errlen, "model must be a string (at most %zu bytes)", sizeof x->model - 1);
            return -1;
        }
        snprintf(x->model, sizeof x->model, "%s", json_string_value(model));
    }
    if (k->completion && !json_is_string(k->completion)) {
        st_errf(err, errlen, "completion must be a string (the logged answer)");
        return -1;
    }
    if (k->cat && !json_is_string(k->cat)) {
        st_errf(err, errlen, "category must be a string");
        return -1;
    }
    if (k->out_ids) {
        size_t n = json_is_array(k->out_ids) ? json_array_size(k->out_ids) : 0;
        for (size_t i = 0; i < n; i++) {
            json_t *el = json_array_get(k->out_ids, i);
            if (!json_is_integer(el) || json_integer_value(el) < 0 || json_integer_value(el) > (json_int_t)UINT32_MAX)
                n = 0;
        }
        if (n == 0 || n > ST_WORKLOAD_MAX_TOKENS) {
            st_errf(err, errlen, "output_ids must be a non-empty array of at most %u token ids",
                    ST_WORKLOAD_MAX_TOKENS);
            return -1;
        }
    }
    return 0;
}

/* The output length: output_tokens, else the logged answer's length. */
static int native_output(const native_keys *k, st_work_item *it, char *err, size_t errlen)
{
    if (!k->out_tok && (k->out_ids || k->completion)) { /* the logged answer's length */
        uint32_t n = k->out_ids ? (uint32_t)json_array_size(k->out_ids) : count_words(json_string_value(k->completion));
        it->output_len = n ? n : 1;
        return 0;
    }
    if (!k->out_tok) {
        st_errf(err, errlen, "output_tokens is required (or the logged completion or output_ids)");
        return -1;
    }
    return get_count(k->out_tok, "output_tokens", 1, &it->output_len, err, errlen);
}

/* The input's form checked, its token count (input_tokens) into *count and its prefix group and length. */
static int native_prefix(const native_keys *k, uint32_t *count, st_work_item *it, st_trace_native *x, char *err,
                         size_t errlen)
{
    if (k->in_ids && k->text) {
        st_errf(err, errlen, "give either input_ids or text, not both");
        return -1;
    }
    if (!k->in_ids && !k->text && !k->in_tok) {
        st_errf(err, errlen, "the input is missing: give input_tokens, input_ids or text");
        return -1;
    }
    if (k->in_tok && get_count(k->in_tok, "input_tokens", 1, count, err, errlen) < 0)
        return -1;
    json_t *pg = k->pg;
    if (pg) {
        if (!json_is_integer(pg) || json_integer_value(pg) < 0 || json_integer_value(pg) > (json_int_t)UINT32_MAX) {
            st_errf(err, errlen, "prefix_group must be a non-negative integer");
            return -1;
        }
        it->prefix_group = (uint32_t)json_integer_value(pg);
        x->has_prefix_group = 1;
    }
    if (k->pl && get_count(k->pl, "prefix_len", 0, &it->prefix_len, err, errlen) < 0)
        return -1;
    if (k->pl && !pg) {
        st_errf(err, errlen, "prefix_len needs a prefix_group");
        return -1;
    }
    return 0;
}

/* The input as token ids (input_ids); count is input_tokens when given. */
static int native_input_ids(const native_keys *k, uint32_t count, st_work_item *it, char *err, size_t errlen)
{
    json_t *in_ids = k->in_ids;
    if (!json_is_array(in_ids) || json_array_size(in_ids) == 0) {
        st_errf(err, errlen, "input_ids must be a non-empty array of token ids");
        return -1;
    }
    size_t n = json_array_size(in_ids);
    if (n > ST_WORKLOAD_MAX_TOKENS) {
        st_errf(err, errlen, "input_ids has %zu ids, more than %u", n, ST_WORKLOAD_MAX_TOKENS);
        return -1;
    }
    if (k->in_tok && count != n) {
        st_errf(err, errlen, "input_tokens (%u) differs from the number of input_ids (%zu)", count, n);
        return -1;
    }
    it->input_ids = malloc(n * sizeof *it->input_ids);
    if (!it->input_ids) {
        st_errf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *el = json_array_get(in_ids, i);
        if (!json_is_integer(el) || json_integer_value(el) < 0 || json_integer_value(el) > (json_int_t)UINT32_MAX) {
            st_errf(err, errlen, "input_ids[%zu] is not a token id (a non-negative integer)", i);
            return -1;
        }
        it->input_ids[i] = (uint32_t)json_integer_value(el);
    }
    it->input_len = (uint32_t)n;
    return 0;
}

/* The input as text; its length is input_tokens when given, else its word count. */
static int native_input_text(const native_keys *k, uint32_t count, st_work_item *it, char *err, size_t errlen)
{
    json_t *text = k->text;
    if (!json_is_string(text) || json_string_length(text) == 0) {
        st_errf(err, errlen, "text must be a non-empty string");
        return -1;
    }
    if (strlen(json_string_value(text)) != json_string_length(text)) {
        st_errf(err, errlen, "text must not contain NUL characters");
        return -1;
    }
    it->input_text = strdup(json_string_value(text));
    if (!it->input_text) {
        st_errf(err, errlen, "out of memory");
        return -1;
    }
    it->input_len = k->in_tok ? count : count_words(it->input_text);
    if (it->input_len == 0)
        it->input_len = 1;
    return 0;
}

/* A token count: ids are generated, the group's prefix first. */
static int native_input_count(uint32_t count, uint32_t index, uint64_t salt, st_work_item *it, char *err, size_t errlen)
{
    if (it->prefix_len > count) {
        st_errf(err, errlen, "prefix_len (%u) exceeds input_tokens (%u)", it->prefix_len, count);
        return -1;
    }
    it->input_len = count;
    it->input_ids = malloc((size_t)count * sizeof *it->input_ids);
    if (!it->input_ids) {
        st_errf(err, errlen, "out of memory");
        return -1;
    }
    st_rng r;
    st_rng_seed(&r, TRACE_PREFIX_SEED ^ salt ^ ((uint64_t)it->prefix_group * 0x9e3779b97f4a7c15ULL));
    fill_ids(&r, it->input_ids, it->prefix_len, ST_WORKLOAD_VOCAB_DEFAULT);
    st_rng_seed(&r, TRACE_UNIQUE_SEED ^ salt ^ ((uint64_t)(index + 1) * 0xbf58476d1ce4e5b9ULL));
    fill_ids(&r, it->input_ids + it->prefix_len, count - it->prefix_len, ST_WORKLOAD_VOCAB_DEFAULT);
    return 0;
}

/* A parsed row's fields, phase by phase, into it and x. */
static int native_fields(json_t *root, uint32_t index, uint64_t salt, st_work_item *it, st_trace_native *x, char *err,
                         size_t errlen)
{
    if (!json_is_object(root)) {
        st_errf(err, errlen, "expected a JSON object");
        return -1;
    }
    native_keys k = { 0 };
    uint32_t count = 0;
    if (native_collect(root, &k, err, errlen) < 0 || native_session(&k, x, err, errlen) < 0 ||
        native_answer(&k, x, err, errlen) < 0 || native_output(&k, it, err, errlen) < 0 ||
        native_prefix(&k, &count, it, x, err, errlen) < 0)
        return -1;
    int rc = k.in_ids ? native_input_ids(&k, count, it, err, errlen)
             : k.text ? native_input_text(&k, count, it, err, errlen)
                      : native_input_count(count, index, salt, it, err, errlen);
    if (rc < 0)
        return -1;
    if (it->prefix_len > it->input_len) {
        st_errf(err, errlen, "prefix_len (%u) exceeds the input length (%u)", it->prefix_len, it->input_len);
        return -1;
    }
    return 0;
}

const char *st_trace_json_reason(const char *parser_text)
{
    if (strstr(parser_text, "JSON_ALLOW_NUL"))
        return "a string holds \\u0000 (a NUL character), which no prompt, name or id may hold";
    return parser_text;
}

int st_trace_parse_native(const char *line, size_t len, uint32_t index, uint64_t salt, st_work_item *it,
                          st_trace_native *x, char *err, size_t errlen)
{
    memset(it, 0, sizeof *it);
    memset(x, 0, sizeof *x);
    it->id = index;
    it->arrival = -1;
    if (st_line_is_blank(line, len))
        return 1;
    json_error_t jerr;
    json_t *root = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        st_errf(err, errlen, "invalid JSON at column %d: %s", jerr.column, st_trace_json_reason(jerr.text));
        return -1;
    }
    int rc = native_fields(root, index, salt, it, x, err, errlen);
    json_decref(root);
    if (rc < 0)
        st_work_item_free(it);
    return rc;
}


int st_workload_prompt_text(const st_work_item *it, st_buf *out)
{
    if (!it || !out)
        return -1;
    for (uint32_t i = 0; i < it->n_history; i++) {
        if (i && st_buf_append(out, " ", 1) < 0)
            return -1;
        if (it->history[i] && st_buf_puts(out, it->history[i]) < 0)
            return -1;
    }
    if (it->n_history && st_buf_append(out, " ", 1) < 0)
        return -1;
    return st_workload_text(it, out);
}

uint32_t st_workload_history_tokens(const st_work_item *it)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < it->n_history; i++)
        if (it->history[i])
            n += count_words(it->history[i]);
    return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

/* ---- synthetic sessions ---------------------------------------------------------------- */

#define SESSIONS_MAX 1000000u

static void range_bounds(uint32_t v, double r, uint32_t *lo, uint32_t *hi)
{
    *lo = (uint32_t)floor(v * (1 - r));
    *hi = (uint32_t)floor(v * (1 + r));
    if (*lo < 1)
        *lo = 1;
    if (*hi < *lo)
        *hi = *lo;
}

/* The token-length ranges of a synthetic session's turns. */
typedef struct session_lens {
    uint32_t f_lo, f_hi; /* first prompt */
    uint32_t u_lo, u_hi; /* a later turn's user input */
    uint32_t o_lo, o_hi; /* an answer */
} session_lens;

/* The session parameters checked and their length ranges into b. */
static int sessions_check(const st_session_params *p, session_lens *b, char *err, size_t errlen)
{
    if (p->sessions == 0 || p->sessions > SESSIONS_MAX) {
        st_errf(err, errlen, "the number of sessions must be in 1..%u", SESSIONS_MAX);
        return -1;
    }
    if (p->turns_min < 1 || p->turns_max < p->turns_min || p->turns_max > ST_SESSION_TURNS_MAX) {
        st_errf(err, errlen, "turns per session must be a range within 1..%u", ST_SESSION_TURNS_MAX);
        return -1;
    }
    if (!(p->range_ratio >= 0 && p->range_ratio < 1)) {
        st_errf(err, errlen, "range ratio must be in [0, 1), got %g", p->range_ratio);
        return -1;
    }
    if (p->first_input == 0 || p->user_input == 0 || p->output_len == 0) {
        st_errf(err, errlen, "input and output lengths must be at least 1 token");
        return -1;
    }
    if (!(p->think_s >= 0 && p->think_s <= ST_SESSION_THINK_MAX_S)) {
        st_errf(err, errlen, "think time must be in 0..%g s", ST_SESSION_THINK_MAX_S);
        return -1;
    }
    range_bounds(p->first_input, p->range_ratio, &b->f_lo, &b->f_hi);
    range_bounds(p->user_input, p->range_ratio, &b->u_lo, &b->u_hi);
    range_bounds(p->output_len, p->range_ratio, &b->o_lo, &b->o_hi);
    if (b->f_hi > ST_WORKLOAD_MAX_TOKENS || b->u_hi > ST_WORKLOAD_MAX_TOKENS || b->o_hi > ST_WORKLOAD_MAX_TOKENS) {
        st_errf(err, errlen, "lengths above %u tokens are not supported", ST_WORKLOAD_MAX_TOKENS);
        return -1;
    }
    if (p->prefix_len > b->f_lo) {
        st_errf(err, errlen, "shared prefix (%u tokens) is longer than the shortest first prompt (%u tokens)",
                p->prefix_len, b->f_lo);
        return -1;
    }
    return 0;
}

/* What generating a workload of synthetic sessions works with. */
typedef struct sessions_gen {
    const st_session_params *p;
    session_lens b;
    st_rng rng;
    const uint32_t *turns;  /* turns of each session */
    const uint32_t *prefix; /* the shared prefix's ids */
} sessions_gen;

/* One turn's lengths, think time and ids into it (t: the turn; idx: its slot; prev: the slot before it). */
static int sessions_turn(sessions_gen *g, st_work_item *items, uint32_t s, uint32_t t, uint32_t idx, uint32_t prev)
{
    const st_session_params *p = g->p;
    st_work_item *it = &items[idx];
    it->id = idx;
    it->arrival = -1;
    it->session = s + 1;
    it->turn = t;
    it->output_len = st_rng_range(&g->rng, g->b.o_lo, g->b.o_hi);
    if (t == 0) {
        it->input_len = st_rng_range(&g->rng, g->b.f_lo, g->b.f_hi);
        it->prefix_len = p->prefix_len;
    } else {
        it->input_len = st_rng_range(&g->rng, g->b.u_lo, g->b.u_hi);
        double th = p->think_exp ? st_rng_exp(&g->rng, p->think_s > 0 ? 1.0 / p->think_s : 0) : p->think_s;
        if (!isfinite(th))
            th = 0;
        it->think = (st_ns)llround(th * 1e9);
        items[prev].next = idx;
    }
    it->input_ids = malloc((size_t)it->input_len * sizeof *it->input_ids);
    if (!it->input_ids)
        return -1;
    uint32_t k = 0;
    if (t == 0 && p->prefix_len) {
        memcpy(it->input_ids, g->prefix, (size_t)p->prefix_len * sizeof *g->prefix);
        k = p->prefix_len;
    }
    fill_ids(&g->rng, it->input_ids + k, it->input_len - k, ST_WORKLOAD_VOCAB_DEFAULT);
    return 0;
}

/* Every session's turns into items: a session's first turn in its own slot, later turns after them all. */
static int sessions_fill(sessions_gen *g, st_work_item *items)
{
    uint32_t dep = g->p->sessions; /* next free dependent slot */
    for (uint32_t s = 0; s < g->p->sessions; s++) {
        uint32_t prev = s;
        for (uint32_t t = 0; t < g->turns[s]; t++) {
            uint32_t idx = t == 0 ? s : dep++;
            if (sessions_turn(g, items, s, t, idx, prev) < 0)
                return -1;
            prev = idx;
        }
    }
    return 0;
}

int st_workload_sessions(const st_session_params *p, st_workload *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    sessions_gen g = { .p = p };
    if (sessions_check(p, &g.b, err, errlen) < 0)
        return -1;
    if (p->fan_out_max) /* agent tasks: fan-out and join (load/agent.h) */
        return st_agent_sessions(p, out, err, errlen);
    /* the longest conversation must fit the largest prompt servetune sends */
    uint64_t longest = (uint64_t)g.b.f_hi + (uint64_t)(p->turns_max - 1) * ((uint64_t)g.b.o_hi + g.b.u_hi);
    if (longest > ST_WORKLOAD_MAX_TOKENS) {
        st_errf(err, errlen, "a %u-turn conversation grows to %llu tokens, more than %u", p->turns_max,
                (unsigned long long)longest, ST_WORKLOAD_MAX_TOKENS);
        return -1;
    }
    st_rng_seed(&g.rng, p->seed ^ 0x73657373696f6e73ULL);
    uint32_t *turns = malloc((size_t)p->sessions * sizeof *turns);
    if (!turns) {
        st_errf(err, errlen, "out of memory");
        return -1;
    }
    uint64_t total = 0;
    for (uint32_t s = 0; s < p->sessions; s++) {
        turns[s] = st_rng_range(&g.rng, p->turns_min, p->turns_max);
        total += turns[s];
    }
    if (total > ST_WORKLOAD_MAX_REQUESTS) {
        free(turns);
        st_errf(err, errlen, "%llu turns in all, more than %u requests", (unsigned long long)total,
                ST_WORKLOAD_MAX_REQUESTS);
        return -1;
    }
    st_work_item *items = calloc(total, sizeof *items);
    uint32_t *prefix = p->prefix_len ? malloc((size_t)p->prefix_len * sizeof *prefix) : NULL;
    if (!items || (p->prefix_len && !prefix)) {
        free(items);
        free(prefix);
        free(turns);
        st_errf(err, errlen, "out of memory");
        return -1;
    }
    fill_ids(&g.rng, prefix, p->prefix_len, ST_WORKLOAD_VOCAB_DEFAULT);
    out->items = items;
    out->n = (uint32_t)total;
    out->n_dependent = (uint32_t)total - p->sessions;
    out->n_sessions = p->sessions;
    g.turns = turns;
    g.prefix = prefix;
    int rc = sessions_fill(&g, items);
    free(prefix);
    free(turns);
    if (rc) {
        st_workload_free(out);
        st_errf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}
