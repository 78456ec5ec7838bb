/* The emulator's HTTP front end. One thread, one epoll loop (net/loop.h): requests are parsed
 * by net/server.h, generation requests go into the engine model, one loop timer runs the
 * model's steps on the scaled wall clock and streams each step's tokens when it ends. */
#include "engine/emu_server.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/parse.h"
#include "core/clock.h"
#include "core/util.h"
#include "emu/engine.h"
#include "engine/emutok.h"
#include "engine/pseudolm.h"
#include "net/loop.h"
#include "net/server.h"

/* Small JSON answers (errors, the model list), the label set of a metric line, the /metrics
 * page, and the per-step chunk of streamed text. */
#define EMU_SMALL_JSON_MAX 8192
#define EMU_LABELS_MAX 400
#define EMU_METRICS_MAX ((size_t)1 << 20)
#define EMU_CHUNK_MAX ((size_t)1 << 16)

#define EMU_VERSION "0.10.1+servetune.emulator"
#define RESP_MAX (64u << 20)
/* Room for a response's head beside its body in the server's output buffer. */
#define RESP_HEAD_MAX (64u << 10)
/* A stream's answer waiting for its client in this process (beyond what the kernel's socket
 * buffers took): past EMU_STREAM_PENDING_MAX bytes its token production is held (st_emu_hold),
 * as a server stops generating into the full socket of a client that does not read; it resumes
 * once the client has read it down to half that. Checked every EMU_DRAIN_POLL_NS. */
#define EMU_STREAM_PENDING_MAX ((size_t)256 << 10)
#define EMU_DRAIN_POLL_NS (5 * ST_NS_PER_MS)

/* ---------------------------------------------------------------------------------------
 * Histograms for /metrics */
#define HMAX 40
typedef struct hist {
    const char *name, *help;
    double bounds[HMAX];
    int nb;
    uint64_t counts[HMAX + 1];
    double sum;
    uint64_t count;
} hist;

static void hist_set(hist *h, const char *name, const char *help, const double *b, int nb)
{
    memset(h, 0, sizeof *h);
    h->name = name;
    h->help = help;
    h->nb = nb > HMAX ? HMAX : nb;
    memcpy(h->bounds, b, (size_t)h->nb * sizeof *b);
}

static void hist_obs(hist *h, double v)
{
    int i = 0;
    while (i < h->nb && v > h->bounds[i])
        i++;
    h->counts[i]++;
    h->sum += v;
    h->count++;
}

/* ---------------------------------------------------------------------------------------
 * Server state */
typedef enum { API_COMPL = 0, API_CHAT = 1 } api_t;

/* The most log-probabilities per position the emulator returns (vLLM's default --max-logprobs). */
#define EMU_MAX_LOGPROBS 20

typedef struct stream_t stream_t;
struct stream_t {
    struct st_emulator *em;
    st_server_resp *resp;
    uint64_t id;
    api_t api;
    int streaming, include_usage, continuous;
    uint32_t prompt_tokens, max_tokens, n_out;
    uint32_t n_reason;  /* the first n_reason output tokens are reasoning */
    uint32_t cached;    /* prompt tokens the prefix cache served */
    uint32_t fail_at;   /* mid-stream failure before this output token (0: none) */
    st_ns last_token_e; /* emulated time of the previous token (ITL) */
    st_buf text;        /* non-streaming: accumulated output */
    st_buf rtext;       /* non-streaming chat: accumulated reasoning */
    char rid[48];
    long created;
    char head[320]; /* the chunk prefix {"id":..,"object":..,"created":..,"model":.. */
    size_t head_len;
    int cancelled;
    int held; /* its token production held: its client does not read (EMU_STREAM_PENDING_MAX) */
    stream_t *next_dead;
    /* log-probabilities from the pseudo language model (engine/pseudolm.h; non-streaming
     * completions): the top logprobs of each generated token, tokens named by id or by word */
    uint32_t logprobs;
    int lp_ids;
    uint64_t plm_h;   /* the prompt's hash */
    st_buf prompt_lp; /* prompt_logprobs, as JSON (empty: not asked) */
};

typedef struct jitter_t {
    uint64_t bins[2001]; /* 10 us bins up to 20 ms, last = overflow */
    uint64_t n;
    st_ns max;
} jitter_t;

typedef struct st_emulator {
    st_emu_config cfg;
    const st_emu_server_opts *o;
    const st_log *log;
    st_loop *loop;
    st_server *srv;
    st_emu_engine *eng;
    st_ns t0; /* wall (monotonic) start */
    double K;
    st_ns override_e; /* engine clock override (-1: read the wall clock) */
    st_timer step_timer;
    int step_active;
    st_emu_step_result res;
    st_ns step_end_e;
    uint64_t next_id;
    long requests_seen;
    stream_t *dead; /* streams freed after the in-flight step is delivered */
    /* streams held for a client that does not read, and the timer that looks at them */
    stream_t **held;
    uint32_t n_held;
    size_t cap_held;
    st_timer drain_timer;
    uint64_t holds; /* times a stream was held (servetune:emulator_stream_holds_total) */
    FILE *gt;
    uint64_t rng;
    const char *model_id;
    jitter_t jit;
    /* the process against the model's schedule (servetune:emulator_* on /metrics): tokens sent,
     * those that reached the socket more than EMU_LATE_TOKEN_S of engine time after their
     * scheduled time, and engine time dropped when the steps fell too far behind to catch up */
    uint64_t tok_sent, tok_late, tok_very_late;
    double dropped_s;
    /* metrics */
    hist h_ttft, h_itl, h_e2e, h_queue, h_prefill, h_decode, h_ptok, h_gtok, h_iter;
    uint64_t success_stop, success_length, success_abort;
    st_buf mbuf, cbuf;
} st_emulator;

/* How far (wall time) the step schedule may fall behind and still catch up. */
#define EMU_MAX_CATCHUP_NS (50 * ST_NS_PER_MS)
/* A token sent this much engine time after the model's schedule counts as late, and very late
 * beyond the second (the audit notes runs where many were: the host, not the modelled engine,
 * set those latencies). */
#define EMU_LATE_TOKEN_S 0.010
#define EMU_VERY_LATE_TOKEN_S 0.100

static st_ns emu_now(void *ctx)
{
    st_emulator *em = ctx;
    if (em->override_e >= 0)
        return em->override_e;
    return (st_ns)((double)(st_now() - em->t0) * em->K);
}

static st_ns wall_of(st_emulator *em, st_ns e) { return em->t0 + (st_ns)((double)e / em->K); }

static double rng_uniform(st_emulator *em)
{
    uint64_t x = em->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    em->rng = x;
    return (double)(x >> 11) / 9007199254740992.0;
}

/* ---------------------------------------------------------------------------------------
 * Responses */
static void respond_json(st_server_resp *r, int status, const char *body)
{
    st_server_respond(r, status, "application/json", NULL, body, strlen(body));
}

static const char *err_type(int status)
{
    switch (status) {
    case 400: return "BadRequestError";
    case 401: return "AuthenticationError";
    case 404: return "NotFoundError";
    case 501: return "NotImplementedError";
    default: return "InternalServerError";
    }
}

static void respond_error(st_server_resp *r, int status, const char *msg, const char *param)
{
    st_buf b;
    st_buf_init(&b, EMU_SMALL_JSON_MAX);
    st_buf_puts(&b, "{\"error\":{\"message\":");
    st_buf_json_str(&b, msg);
    st_buf_printf(&b, ",\"type\":\"%s\",\"param\":", err_type(status));
    if (param)
        st_buf_json_str(&b, param);
    else
        st_buf_puts(&b, "null");
    st_buf_printf(&b, ",\"code\":%d}}", status);
    st_server_respond(r, status, "application/json", NULL, b.data, b.len);
    st_buf_free(&b);
}

/* A 200 with b's JSON when it is whole; an error answer when it did not fit (never a connection
 * closed without an answer). The server's max_out is RESP_MAX and more: a whole b always fits. */
static void respond_whole(st_server_resp *r, const st_buf *b)
{
    if (st_buf_error(b)) {
        char msg[160];
        snprintf(msg, sizeof msg, "The answer would exceed %u bytes; send a shorter input.", RESP_MAX);
        respond_error(r, 400, msg, NULL);
        return;
    }
    st_server_respond(r, 200, "application/json", NULL, b->data, b->len);
}

static void stream_free(stream_t *s)
{
    st_buf_free(&s->prompt_lp);
    st_buf_free(&s->text);
    st_buf_free(&s->rtext);
    free(s);
}

static void stream_release(st_emulator *em, stream_t *s)
{
    /* the in-flight step's events may still name it: free after delivery */
    if (em->step_active) {
        s->next_dead = em->dead;
        em->dead = s;
    } else {
        stream_free(s);
    }
}

static void unhold_at(st_emulator *em, uint32_t i)
{
    em->held[i]->held = 0;
    em->held[i] = em->held[--em->n_held];
}

static void on_cancel(void *arg, st_server_resp *resp)
{
    (void)resp;
    stream_t *s = arg;
    st_emulator *em = s->em;
    for (uint32_t i = 0; s->held && i < em->n_held; i++)
        if (em->held[i] == s)
            unhold_at(em, i);
    s->cancelled = 1;
    s->resp = NULL;
    if (st_emu_abort(em->eng, s->id) == 0)
        em->success_abort++;
    stream_release(em, s);
}

/* vLLM reports prompt_tokens_details only with --enable-prompt-tokens-details. */
static void prompt_details(st_buf *b, const stream_t *s)
{
    if (s->em->o->prompt_tokens_details)
        st_buf_printf(b, ",\"prompt_tokens_details\":{\"cached_tokens\":%u}", s->cached);
}

static void usage_json(st_buf *b, const stream_t *s)
{
    st_buf_printf(b, "{\"prompt_tokens\":%u,\"total_tokens\":%u,\"completion_tokens\":%u", s->prompt_tokens,
                  s->prompt_tokens + s->n_out, s->n_out);
    if (s->em->o->prompt_tokens_details)
        prompt_details(b, s);
    else
        st_buf_puts(b, ",\"prompt_tokens_details\":null");
    st_buf_puts(b, "}");
}

static void chunk_head_init(stream_t *s)
{
    st_buf b;
    st_buf_init(&b, sizeof s->head - 1);
    st_buf_printf(&b, "{\"id\":\"%s\",\"object\":\"%s\",\"created\":%ld,\"model\":", s->rid,
                  s->api == API_CHAT ? "chat.completion.chunk" : "text_completion", s->created);
    if (st_buf_json_str(&b, s->em->model_id) < 0)
        st_buf_puts(&b, "\"model\"");
    memcpy(s->head, b.data, b.len);
    s->head_len = b.len;
    st_buf_free(&b);
}

static void chunk_head(st_buf *b, const stream_t *s) { st_buf_append(b, s->head, s->head_len); }

static void write_ground_truth(st_emulator *em, const stream_t *s, const st_emu_event *ev, st_ns end_e)
{
    if (!em->gt)
        return;
    fprintf(em->gt,
            "{\"id\":\"%s\",\"arrival_s\":%.9f,\"first_scheduled_s\":%.9f,\"first_token_s\":%.9f,"
            "\"finish_s\":%.9f,\"first_token_wall_ns\":%lld,\"finish_wall_ns\":%lld,\"arrival_wall_ns\":%lld,"
            "\"prompt_tokens\":%u,\"output_tokens\":%u,\"cached_tokens\":%u}\n",
            s->rid, ev->arrival / 1e9, ev->first_scheduled / 1e9, ev->first_token / 1e9, end_e / 1e9,
            (long long)wall_of(em, ev->first_token), (long long)wall_of(em, end_e), (long long)wall_of(em, ev->arrival),
            ev->prompt_tokens, ev->n_out, ev->cached_tokens);
    fflush(em->gt);
}

/* The pseudo language model of this configuration: its weight format and KV cache type as a
 * perturbation (16-bit: none). */
static void plm_of(const st_emulator *em, st_plm *m)
{
    st_emu_dtype w = em->cfg.weight_dtype;
    int wb = w == ST_EMU_FP8 ? 8 : (w == ST_EMU_INT4_AWQ || w == ST_EMU_INT4_GPTQ) ? 4 : 16;
    st_plm_init(m, em->cfg.model.vocab, wb, em->cfg.kv_dtype == ST_EMU_FP8 ? 8 : 16);
}

static void plm_name(st_buf *b, uint32_t id, int by_id)
{
    char w[8];
    if (by_id) {
        st_buf_printf(b, "\"token_id:%u\"", id);
        return;
    }
    st_emutok_word(id, w);
    st_buf_printf(b, "\" %s\"", w);
}

/* OpenAI's completions logprobs of the answer's s->n_out tokens, greedy on the pseudo model
 * ({tokens, token_logprobs, top_logprobs, text_offset}); null when not asked. */
static void plm_logprobs(const st_emulator *em, const stream_t *s, st_buf *b)
{
    if (!s->logprobs) {
        st_buf_puts(b, "null");
        return;
    }
    st_plm m;
    plm_of(em, &m);
    uint32_t k = s->logprobs, ids[ST_PLM_CANDIDATES];
    double lp[ST_PLM_CANDIDATES];
    uint64_t h = s->plm_h;
    st_buf top, toks, tlp;
    st_buf_init(&top, RESP_MAX);
    st_buf_init(&toks, RESP_MAX);
    st_buf_init(&tlp, RESP_MAX);
    for (uint32_t i = 0; i < s->n_out; i++) {
        st_plm_next(&m, h, k, ids, lp);
        st_buf_puts(&toks, i ? "," : "");
        plm_name(&toks, ids[0], s->lp_ids);
        st_buf_printf(&tlp, "%s%.9g", i ? "," : "", lp[0]);
        st_buf_puts(&top, i ? ",{" : "{");
        for (uint32_t j = 0; j < k; j++) {
            st_buf_puts(&top, j ? "," : "");
            plm_name(&top, ids[j], s->lp_ids);
            st_buf_printf(&top, ":%.9g", lp[j]);
        }
        st_buf_puts(&top, "}");
        h = st_plm_extend(h, ids[0]);
    }
    st_buf_puts(b, "{\"tokens\":[");
    st_buf_append(b, toks.data, toks.len);
    st_buf_puts(b, "],\"token_logprobs\":[");
    st_buf_append(b, tlp.data, tlp.len);
    st_buf_puts(b, "],\"top_logprobs\":[");
    st_buf_append(b, top.data, top.len);
    st_buf_puts(b, "]}");
    st_buf_free(&top);
    st_buf_free(&toks);
    st_buf_free(&tlp);
}

/* vLLM's prompt_logprobs of the prompt ids: null for the first, then {"ID": {"logprob", "rank",
 * "decoded_token"}} with the prompt's token and the top k. */
static void plm_prompt_logprobs(const st_emulator *em, const uint32_t *p, uint32_t n, uint32_t k, st_buf *b)
{
    st_plm m;
    plm_of(em, &m);
    uint32_t ids[ST_PLM_CANDIDATES];
    double lp[ST_PLM_CANDIDATES];
    st_buf_puts(b, "[null");
    uint64_t h = st_plm_hash_ids(NULL, 0);
    for (uint32_t i = 0; i < n; i++) {
        if (i > 0) {
            st_plm_next(&m, h, ST_PLM_CANDIDATES, ids, lp);
            st_buf_puts(b, ",{");
            int own = 0;
            for (uint32_t j = 0; j < ST_PLM_CANDIDATES; j++) {
                int is_own = ids[j] == p[i];
                if (j >= k && !is_own)
                    continue;
                own |= is_own;
                st_buf_printf(b, "%s\"%u\":{\"logprob\":%.9g,\"rank\":%u}", b->data[b->len - 1] == '{' ? "" : ",",
                              ids[j], lp[j], j + 1);
            }
            if (!own) /* outside the candidates: probability 0 */
                st_buf_printf(b, "%s\"%u\":{\"logprob\":-9999.0,\"rank\":%u}", b->data[b->len - 1] == '{' ? "" : ",",
                              p[i], m.vocab);
            st_buf_puts(b, "}");
        }
        h = st_plm_extend(h, p[i]);
    }
    st_buf_puts(b, "]");
}

/* The words of an event's tokens, separated by spaces: one, or a burst of 1 + the accepted draft
 * tokens with speculation (sent in one chunk, as vLLM streams a verification step's tokens). */
#define EMU_BURST_TEXT_MAX (8 * (ST_EMU_SPEC_MAX_K + 1))
static void burst_words(const st_emulator *em, const st_emu_event *ev, char *out, size_t n)
{
    uint32_t k = ev->n_tokens ? ev->n_tokens : 1;
    size_t len = 0;
    out[0] = '\0';
    for (uint32_t j = 0; j < k && len + 9 < n; j++) {
        char w[8];
        st_emutok_word(st_emu_output_token(ev->id, ev->n_out - k + j, em->cfg.model.vocab), w);
        len += (size_t)snprintf(out + len, n - len, "%s%s", j ? " " : "", w);
    }
}

/* One delivered event's words and what they are. */
typedef struct tok_ctx {
    const char *word;   /* its tokens' words */
    int reasoning;      /* reasoning tokens */
    int first_answer;   /* the answer's first token */
    int finished;       /* the request's last event */
    const char *reason; /* its finish reason */
} tok_ctx;

/* The event observed in the metrics' histograms (and the ground truth, at the request's end). */
static void deliver_metrics(st_emulator *em, stream_t *s, const st_emu_event *ev, st_ns end_e, int finished)
{
    if (ev->first) {
        hist_obs(&em->h_ttft, (end_e - ev->arrival) / 1e9);
        /* vLLM's queue time starts when the engine core queued the request, after the API server */
        hist_obs(&em->h_queue, (ev->first_scheduled - ev->queued) / 1e9);
        hist_obs(&em->h_prefill, (end_e - ev->first_scheduled) / 1e9);
    } else {
        hist_obs(&em->h_itl, (end_e - s->last_token_e) / 1e9);
    }
    s->last_token_e = end_e;
    if (finished) {
        hist_obs(&em->h_e2e, (end_e - ev->arrival) / 1e9);
        hist_obs(&em->h_decode, (end_e - ev->first_token) / 1e9);
        hist_obs(&em->h_ptok, ev->prompt_tokens);
        hist_obs(&em->h_gtok, ev->n_out);
        if (ev->finish == ST_EMU_FINISH_STOP)
            em->success_stop++;
        else
            em->success_length++;
        write_ground_truth(em, s, ev, end_e);
    }
}

/* A non-streaming request's whole response, sent at its end. */
static void whole_respond(st_emulator *em, stream_t *s, const char *reason)
{
    st_buf b;
    st_buf_init(&b, RESP_MAX);
    if (s->api == API_CHAT) {
        st_buf_printf(&b, "{\"id\":\"%s\",\"object\":\"chat.completion\",\"created\":%ld,\"model\":", s->rid,
                      s->created);
        st_buf_json_str(&b, em->model_id);
        st_buf_puts(&b, ",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"reasoning_content\":");
        if (s->rtext.len)
            st_buf_json_strn(&b, s->rtext.data, s->rtext.len);
        else
            st_buf_puts(&b, "null");
        st_buf_puts(&b, ",\"content\":");
        st_buf_json_strn(&b, s->text.data ? s->text.data : "", s->text.len);
        st_buf_printf(
            &b,
            ",\"tool_calls\":[]},\"logprobs\":null,\"finish_reason\":\"%s\",\"stop_reason\":null}],\"usage\":", reason);
    } else {
        st_buf_printf(&b, "{\"id\":\"%s\",\"object\":\"text_completion\",\"created\":%ld,\"model\":", s->rid,
                      s->created);
        st_buf_json_str(&b, em->model_id);
        st_buf_puts(&b, ",\"choices\":[{\"index\":0,\"text\":");
        st_buf_json_strn(&b, s->text.data ? s->text.data : "", s->text.len);
        st_buf_puts(&b, ",\"logprobs\":");
        plm_logprobs(em, s, &b);
        st_buf_printf(&b, ",\"finish_reason\":\"%s\",\"stop_reason\":null,\"prompt_logprobs\":", reason);
        if (s->prompt_lp.len)
            st_buf_append(&b, s->prompt_lp.data, s->prompt_lp.len);
        else
            st_buf_puts(&b, "null");
        st_buf_puts(&b, "}],\"usage\":");
    }
    usage_json(&b, s);
    st_buf_puts(&b, "}");
    st_server_respond(s->resp, 200, "application/json", NULL, b.data, b.len);
    st_buf_free(&b);
}

/* A non-streaming request: the words kept, the response sent at the end. 1 when done. */
static int deliver_whole(st_emulator *em, stream_t *s, const st_emu_event *ev, const tok_ctx *t)
{
    /* a token that does not fit the response limit leaves the body short (never cut mid-word) */
    if (t->reasoning && s->api == API_CHAT)
        (void)st_buf_printf(&s->rtext, " %s", t->word);
    else
        (void)st_buf_printf(&s->text, "%s %s",
                            s->api == API_CHAT               ? ""
                            : t->reasoning && ev->n_out == 1 ? "<think>"
                            : t->first_answer                ? "</think>"
                                                             : "",
                            t->word);
    if (!t->finished)
        return 0;
    whole_respond(em, s, t->reason);
    return 1;
}

/* A mid-stream fault injected: an error event, then the stream's end; the request aborted. */
static void stream_fault(st_emulator *em, stream_t *s)
{
    const char *e = "{\"error\":{\"message\":\"EngineCore encountered an issue (injected mid-stream fault)\","
                    "\"type\":\"InternalServerError\",\"param\":null,\"code\":500}}";
    st_server_sse_send(s->resp, e, strlen(e));
    st_server_sse_send(s->resp, "[DONE]", 6);
    st_server_stream_end(s->resp);
    st_emu_abort(em->eng, s->id);
    em->success_abort++;
}

/* The chat stream's first chunk: the assistant's role (and the usage so far, continuous usage). */
static void chunk_role(stream_t *s, st_buf *b)
{
    chunk_head(b, s);
    st_buf_puts(b, ",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":"
                   "null,\"finish_reason\":null}]");
    if (s->continuous) {
        st_buf_puts(b, ",\"usage\":");
        st_buf_printf(b, "{\"prompt_tokens\":%u,\"total_tokens\":%u,\"completion_tokens\":0", s->prompt_tokens,
                      s->prompt_tokens);
        prompt_details(b, s);
        st_buf_puts(b, "}");
    }
    st_buf_puts(b, "}");
    st_server_sse_send(s->resp, b->data, b->len);
    st_buf_reset(b);
}

/* The chunk of one event's words, its finish reason on the last. */
static void chunk_token(stream_t *s, const st_emu_event *ev, const tok_ctx *t, st_buf *b)
{
    chunk_head(b, s);
    if (s->api == API_CHAT) {
        st_buf_puts(b, t->reasoning ? ",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\" "
                                    : ",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" ");
        st_buf_puts(b, t->word);
        st_buf_puts(b, "\"},\"logprobs\":null,\"finish_reason\":");
    } else {
        /* a reasoning model served without a reasoning parser: the span is in the text */
        st_buf_puts(b, ",\"choices\":[{\"index\":0,\"text\":\"");
        st_buf_puts(b, t->reasoning && ev->n_out == 1 ? "<think> " : t->first_answer ? "</think> " : " ");
        st_buf_puts(b, t->word);
        st_buf_puts(b, "\",\"logprobs\":null,\"finish_reason\":");
    }
    if (t->finished)
        st_buf_printf(b, "\"%s\",\"stop_reason\":null}]", t->reason);
    else
        st_buf_puts(b, "null,\"stop_reason\":null}]");
    if (s->continuous) {
        st_buf_printf(b, ",\"usage\":{\"prompt_tokens\":%u,\"total_tokens\":%u,\"completion_tokens\":%u",
                      s->prompt_tokens, s->prompt_tokens + s->n_out, s->n_out);
        prompt_details(b, s);
        st_buf_puts(b, "}");
    }
    st_buf_puts(b, "}");
}

/* A token sent: how late it left against its deadline (and the jitter histogram when asked). */
static void stream_lateness(st_emulator *em, st_ns deadline_wall)
{
    st_ns late_w = st_now() - deadline_wall;
    em->tok_sent++;
    em->tok_late += (double)late_w * em->K > EMU_LATE_TOKEN_S * 1e9;
    em->tok_very_late += (double)late_w * em->K > EMU_VERY_LATE_TOKEN_S * 1e9;
    if (!em->o->print_jitter)
        return;
    st_ns late = st_now() - deadline_wall;
    if (late < 0)
        late = 0;
    size_t bin = (size_t)(late / 10000);
    if (bin > 2000)
        bin = 2000;
    em->jit.bins[bin]++;
    em->jit.n++;
    if (late > em->jit.max)
        em->jit.max = late;
}

/* The stream's end: the usage chunk when asked, then [DONE]. */
static void stream_close(stream_t *s, st_buf *b)
{
    if (s->include_usage) {
        st_buf_reset(b);
        chunk_head(b, s);
        st_buf_puts(b, ",\"choices\":[],\"usage\":");
        st_buf_printf(b, "{\"prompt_tokens\":%u,\"total_tokens\":%u,\"completion_tokens\":%u", s->prompt_tokens,
                      s->prompt_tokens + s->n_out, s->n_out);
        prompt_details(b, s);
        st_buf_puts(b, "}}");
        st_server_sse_send(s->resp, b->data, b->len);
    }
    st_server_sse_send(s->resp, "[DONE]", 6);
    st_server_stream_end(s->resp);
}

/* A streaming request: the event's chunk sent (after the role chunk, first). 1 when done. */
static int deliver_stream(st_emulator *em, stream_t *s, const st_emu_event *ev, const tok_ctx *t, st_ns deadline_wall)
{
    st_buf b = em->cbuf; /* reused across events: no allocation per token */
    st_buf_reset(&b);
    if (s->fail_at && ev->n_out >= s->fail_at && !t->finished) {
        em->cbuf = b;
        stream_fault(em, s);
        return 1;
    }
    if (ev->first && s->api == API_CHAT)
        chunk_role(s, &b);
    chunk_token(s, ev, t, &b);
    if (st_server_sse_send(s->resp, b.data, b.len) == 0)
        stream_lateness(em, deadline_wall);
    if (t->finished)
        stream_close(s, &b);
    em->cbuf = b;
    return t->finished;
}

/* Delivers one engine event (a token, or a burst of them) to its stream. Returns 1 when the stream is done. */
static int deliver(st_emulator *em, stream_t *s, const st_emu_event *ev, st_ns end_e, st_ns deadline_wall)
{
    uint32_t n_tok = ev->n_tokens ? ev->n_tokens : 1;
    if (n_tok > 1 && s->n_reason && ev->n_out - n_tok < s->n_reason && ev->n_out > s->n_reason) {
        /* a burst across the end of the reasoning: its reasoning part, then its answer */
        st_emu_event a = *ev, b = *ev;
        a.n_tokens = s->n_reason - (ev->n_out - n_tok);
        a.n_out = s->n_reason;
        a.finish = ST_EMU_NOT_FINISHED;
        b.first = 0;
        b.n_tokens = n_tok - a.n_tokens;
        return deliver(em, s, &a, end_e, deadline_wall) || deliver(em, s, &b, end_e, deadline_wall);
    }
    char word[EMU_BURST_TEXT_MAX];
    burst_words(em, ev, word, sizeof word);
    s->n_out = ev->n_out;
    if (ev->first)
        s->cached = ev->cached_tokens;
    tok_ctx t = { .word = word,
                  .reasoning = ev->n_out <= s->n_reason, /* this token is reasoning */
                  .first_answer = ev->n_out == s->n_reason + 1 && s->n_reason > 0,
                  .finished = ev->finish != ST_EMU_NOT_FINISHED,
                  .reason = ev->finish == ST_EMU_FINISH_STOP ? "stop" : "length" };
    deliver_metrics(em, s, ev, end_e, t.finished);
    if (!s->streaming)
        return deliver_whole(em, s, ev, &t);
    return deliver_stream(em, s, ev, &t, deadline_wall);
}

/* ---------------------------------------------------------------------------------------
 * The step loop */
static void arm_now(st_emulator *em)
{
    if (!st_timer_armed(&em->step_timer))
        st_timer_arm(em->loop, &em->step_timer, st_now());
}

static void start_step(st_emulator *em, st_ns start_e)
{
    em->override_e = start_e;
    int rc = st_emu_step(em->eng, &em->res);
    em->override_e = -1;
    if (rc == 1 && st_emu_has_work(em->eng)) {
        /* every waiting request is still in the API server model: wake when the first leaves */
        st_ns ready = st_emu_next_ready(em->eng);
        st_timer_arm(em->loop, &em->step_timer, wall_of(em, ready > start_e ? ready : start_e));
        return;
    }
    if (rc != 0)
        return;
    if (em->o->no_model)
        em->res.duration = 0;
    em->step_active = 1;
    em->step_end_e = em->res.start + em->res.duration;
    hist_obs(&em->h_iter, em->res.tokens);
    st_timer_arm(em->loop, &em->step_timer, wall_of(em, em->step_end_e));
}

/* Holds s's token production while its client leaves its answer unread. 0, or -1 (out of memory:
 * not held, the server's own output limit still bounds it). */
static int hold_stream(st_emulator *em, stream_t *s)
{
    if (st_grow((void **)&em->held, &em->cap_held, (size_t)em->n_held + 1, sizeof *em->held, 16))
        return -1;
    if (st_emu_hold(em->eng, s->id, 1))
        return -1;
    s->held = 1;
    em->held[em->n_held++] = s;
    em->holds++;
    if (!st_timer_armed(&em->drain_timer))
        st_timer_arm(em->loop, &em->drain_timer, st_now() + EMU_DRAIN_POLL_NS);
    return 0;
}

static void on_drain_timer(st_loop *l, void *arg)
{
    (void)l;
    st_emulator *em = arg;
    int resumed = 0;
    for (uint32_t i = em->n_held; i-- > 0;) {
        stream_t *s = em->held[i];
        if (s->resp && st_server_resp_pending(s->resp) > EMU_STREAM_PENDING_MAX / 2)
            continue;
        st_emu_hold(em->eng, s->id, 0);
        unhold_at(em, i);
        resumed = 1;
    }
    if (resumed && !em->step_active)
        arm_now(em);
    if (em->n_held)
        st_timer_arm(em->loop, &em->drain_timer, st_now() + EMU_DRAIN_POLL_NS);
}

static void on_step_timer(st_loop *l, void *arg)
{
    (void)l;
    st_emulator *em = arg;
    st_ns next_start = -1;
    if (em->step_active && em->o->fault_host_stall_s > 0) { /* a busy host: the process wakes late */
        struct timespec ts = { (time_t)em->o->fault_host_stall_s, (long)(fmod(em->o->fault_host_stall_s, 1.0) * 1e9) };
        nanosleep(&ts, NULL);
    }
    if (em->step_active) {
        st_ns deadline = wall_of(em, em->step_end_e);
        for (uint32_t i = 0; i < em->res.n_events; i++) {
            const st_emu_event *ev = &em->res.events[i];
            stream_t *s = ev->user;
            if (s->cancelled)
                continue;
            if (deliver(em, s, ev, em->step_end_e, deadline))
                stream_free(s);
            else if (s->streaming && s->resp && !s->held && st_server_resp_pending(s->resp) > EMU_STREAM_PENDING_MAX)
                hold_stream(em, s); /* its client does not read: no more tokens into its socket */
        }
        em->step_active = 0;
        next_start = em->step_end_e;
        while (em->dead) {
            stream_t *d = em->dead;
            em->dead = d->next_dead;
            stream_free(d);
        }
    }
    if (st_emu_has_work(em->eng)) {
        /* A busy engine starts the next step where the last one ended (the model's schedule),
         * also when this process woke late: the GPU being modelled does not slow down because
         * the host's CPU was busy, so the steps catch up (their timers are already due). Only a
         * lag beyond EMU_MAX_CATCHUP_NS of wall time (the emulator itself overloaded) drops
         * time, and then the figures are slower than the model: the ground truth shows it. */
        st_ns now_e = emu_now(em);
        int keep = next_start >= 0 && (double)(now_e - next_start) <= (double)EMU_MAX_CATCHUP_NS * em->K;
        if (!keep && next_start >= 0 && now_e > next_start)
            em->dropped_s += (double)(now_e - next_start) / 1e9;
        start_step(em, keep ? next_start : now_e);
    }
}

/* ---------------------------------------------------------------------------------------
 * Endpoints */
static int check_auth(st_emulator *em, const st_http_parser *req, st_server_resp *resp)
{
    if (!em->o->api_key)
        return 0;
    const char *h = st_http_header(req, "authorization");
    if (h && !strncmp(h, "Bearer ", 7) && !strcmp(h + 7, em->o->api_key))
        return 0;
    respond_json(resp, 401, "{\"error\":\"Unauthorized\"}");
    return -1;
}

static void new_rid(st_emulator *em, char *out, size_t len, const char *prefix)
{
    uint64_t a = (uint64_t)(rng_uniform(em) * 18446744073709551615.0), b = em->next_id * 0x9e3779b97f4a7c15ULL;
    snprintf(out, len, "%s%016llx%016llx", prefix, (unsigned long long)a, (unsigned long long)b);
}

/* Prompt ids from a completions "prompt" value. Returns count, -1 on a bad shape (err set). */
static int64_t prompt_ids(st_emulator *em, json_t *p, uint32_t **out, char *err, size_t errlen)
{
    uint32_t vocab = em->cfg.model.vocab;
    if (json_is_array(p) && json_array_size(p) == 1 &&
        (json_is_array(json_array_get(p, 0)) || json_is_string(json_array_get(p, 0))))
        p = json_array_get(p, 0);
    if (json_is_string(p)) {
        const char *t = json_string_value(p);
        size_t n = json_string_length(p);
        uint32_t cnt = st_emutok_count(t, n);
        *out = malloc(((size_t)cnt + 1) * sizeof **out);
        if (!*out)
            return -1;
        st_emutok_encode(t, n, vocab, *out, cnt);
        return cnt;
    }
    if (json_is_array(p)) {
        size_t n = json_array_size(p);
        *out = malloc((n + 1) * sizeof **out);
        if (!*out)
            return -1;
        for (size_t i = 0; i < n; i++) {
            json_t *v = json_array_get(p, i);
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= vocab) {
                free(*out);
                *out = NULL;
                snprintf(err, errlen,
                         json_is_integer(v) ? "Token id %lld is out of vocabulary"
                                            : "prompt must be a string, an array of strings, an array of tokens, or an "
                                              "array of token arrays",
                         json_is_integer(v) ? (long long)json_integer_value(v) : 0LL);
                return -1;
            }
            (*out)[i] = (uint32_t)json_integer_value(v);
        }
        return (int64_t)n;
    }
    snprintf(err, errlen,
             "prompt must be a string, an array of strings, an array of tokens, or an array of token arrays");
    return -1;
}

static int64_t chat_ids(st_emulator *em, json_t *msgs, uint32_t **out, char *err, size_t errlen)
{
    if (!json_is_array(msgs) || json_array_size(msgs) == 0) {
        snprintf(err, errlen, "messages must be a non-empty array");
        return -1;
    }
    uint32_t vocab = em->cfg.model.vocab;
    size_t total = 4;
    for (size_t i = 0; i < json_array_size(msgs); i++) {
        json_t *c = json_object_get(json_array_get(msgs, i), "content");
        if (json_is_string(c))
            total += 2 + st_emutok_count(json_string_value(c), json_string_length(c));
        else
            total += 2;
    }
    *out = malloc(total * sizeof **out);
    if (!*out)
        return -1;
    size_t n = 0;
    /* a chat template: <start> role content <end> per message, then the generation prompt */
    for (size_t i = 0; i < json_array_size(msgs); i++) {
        json_t *m = json_array_get(msgs, i);
        if (!json_is_object(m)) {
            free(*out);
            *out = NULL;
            snprintf(err, errlen, "each message must be an object");
            return -1;
        }
        const char *role = json_string_value(json_object_get(m, "role"));
        (*out)[n++] = 151644 % vocab;
        (*out)[n++] = role ? st_emutok_word_id(role, strlen(role), vocab) : 1;
        json_t *c = json_object_get(m, "content");
        if (json_is_string(c))
            n += st_emutok_encode(json_string_value(c), json_string_length(c), vocab, *out + n, (uint32_t)(total - n));
    }
    /* the generation prompt opens the assistant's turn (as chat templates do), so a next turn
     * that carries this answer as an assistant message repeats the same tokens */
    (*out)[n++] = 151644 % vocab;
    (*out)[n++] = st_emutok_word_id("assistant", 9, vocab);
    return (int64_t)n;
}

/* A generation request as read from its body. */
typedef struct gen_req {
    json_t *root;
    api_t api;
    int streaming;
    json_t *so;    /* stream_options */
    uint32_t *ids; /* the prompt's token ids */
    int64_t n;     /* how many */
    json_int_t max_tokens;
    json_t *mn; /* min_tokens */
} gen_req;

/* The body read: JSON, the model, the stream options and the prompt's ids. -1: answered with an error. */
static int gen_parse(st_emulator *em, const st_http_parser *req, st_server_resp *resp, gen_req *g)
{
    json_error_t je;
    json_t *root = g->root = json_loadb(req->body.data ? req->body.data : "", req->body.len, 0, &je);
    char err[1024];
    if (!root || !json_is_object(root)) {
        snprintf(err, sizeof err, "Invalid JSON body: %s", je.text);
        respond_error(resp, 400, err, NULL);
        return -1;
    }
    const char *model = json_string_value(json_object_get(root, "model"));
    if (model && strcmp(model, em->model_id)) {
        snprintf(err, sizeof err, "The model `%s` does not exist.", model);
        respond_error(resp, 404, err, "model");
        return -1;
    }
    g->streaming = json_is_true(json_object_get(root, "stream"));
    g->so = json_object_get(root, "stream_options");
    if (g->so && !json_is_null(g->so) && !g->streaming) {
        respond_error(resp, 400, "Stream options can only be defined when `stream=True`.", "stream_options");
        return -1;
    }
    g->n = g->api == API_CHAT ? chat_ids(em, json_object_get(root, "messages"), &g->ids, err, sizeof err)
                              : prompt_ids(em, json_object_get(root, "prompt"), &g->ids, err, sizeof err);
    if (g->n < 0) {
        respond_error(resp, 400, err, NULL);
        return -1;
    }
    return 0;
}

/* max_completion_tokens (chat) or max_tokens: an integer of at least 1 when given. -1: answered with an error. */
static int gen_max_tokens(st_server_resp *resp, gen_req *g)
{
    json_t *mt = g->api == API_CHAT ? json_object_get(g->root, "max_completion_tokens") : NULL;
    if (!mt || json_is_null(mt))
        mt = json_object_get(g->root, "max_tokens");
    g->max_tokens = g->api == API_CHAT ? 0 : 16;
    if (!mt || json_is_null(mt))
        return 0;
    /* an integral number written as a real (1e12) is an integer, as pydantic's lax mode reads it */
    double mv = json_is_real(mt) ? json_real_value(mt) : 0;
    int integral = json_is_integer(mt) || (json_is_real(mt) && mv == floor(mv) && fabs(mv) < 9.2e18);
    json_int_t v = json_is_integer(mt) ? json_integer_value(mt) : integral ? (json_int_t)mv : 0;
    if (!integral || v < 1) {
        char why[160], given[64];
        if (json_is_integer(mt) || json_is_real(mt))
            snprintf(given, sizeof given, "%.17g", json_is_integer(mt) ? (double)v : mv);
        else
            snprintf(given, sizeof given, "%s",
                     json_is_string(mt)    ? "a string"
                     : json_is_boolean(mt) ? "a boolean"
                                           : "not a number");
        if (json_is_integer(mt))
            snprintf(given, sizeof given, "%lld", (long long)v);
        snprintf(why, sizeof why, "max_tokens must be %s, got %s", integral ? "at least 1" : "an integer", given);
        respond_error(resp, 400, why, "max_tokens");
        return -1;
    }
    g->max_tokens = v; /* the engine refuses more than the context, quoting it */
    return 0;
}

/* One choice, min_tokens in range, a prompt; and the injected HTTP 500 fault. -1: answered with an error. */
static int gen_limits(st_emulator *em, st_server_resp *resp, gen_req *g)
{
    /* one choice per request: a request for several would be answered with one and counted as one */
    json_t *nc = json_object_get(g->root, "n");
    if (nc && !json_is_null(nc) && !(json_is_integer(nc) && json_integer_value(nc) == 1)) {
        respond_error(resp, 400, "n must be 1: the emulator generates one choice per request", "n");
        return -1;
    }
    json_t *mn = g->mn = json_object_get(g->root, "min_tokens");
    if (mn && !json_is_null(mn) &&
        (!json_is_integer(mn) || json_integer_value(mn) < 0 ||
         (g->max_tokens && json_integer_value(mn) > g->max_tokens))) {
        char why[200];
        if (json_is_integer(mn))
            snprintf(why, sizeof why, "min_tokens must be non-negative and not above max_tokens (%lld), got %lld",
                     (long long)g->max_tokens, (long long)json_integer_value(mn));
        else
            snprintf(why, sizeof why, "min_tokens must be an integer");
        respond_error(resp, 400, why, "min_tokens");
        return -1;
    }
    if (g->n == 0) {
        respond_error(resp, 400, "The prompt cannot be empty.", NULL);
        return -1;
    }
    /* fault: HTTP 500 */
    if (em->o->fault_500_rate > 0 && rng_uniform(em) < em->o->fault_500_rate) {
        respond_error(resp, 500, "EngineCore encountered an issue (injected fault).", NULL);
        return -1;
    }
    return 0;
}

/* The request's stream: its id, its options and its buffers. NULL: out of memory. */
static stream_t *gen_stream_new(st_emulator *em, st_server_resp *resp, const gen_req *g)
{
    stream_t *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->em = em;
    s->resp = resp;
    s->api = g->api;
    s->streaming = g->streaming;
    s->include_usage = g->streaming && json_is_true(json_object_get(g->so, "include_usage"));
    s->continuous = s->include_usage && json_is_true(json_object_get(g->so, "continuous_usage_stats"));
    s->id = ++em->next_id;
    s->prompt_tokens = (uint32_t)g->n;
    s->created = (long)(st_wall_ns() / ST_NS_PER_S);
    new_rid(em, s->rid, sizeof s->rid, g->api == API_CHAT ? "chatcmpl-" : "cmpl-");
    chunk_head_init(s);
    st_buf_init(&s->text, RESP_MAX);
    st_buf_init(&s->rtext, RESP_MAX);
    return s;
}

/* The completions API's logprobs and prompt_logprobs, when asked (not streamed). */
static void gen_logprobs(st_emulator *em, stream_t *s, const gen_req *g)
{
    json_t *lpj = json_object_get(g->root, "logprobs"), *plj = json_object_get(g->root, "prompt_logprobs");
    int whole = g->api != API_CHAT && !g->streaming;
    if (whole && json_is_integer(lpj) && json_integer_value(lpj) > 0) {
        json_int_t k = json_integer_value(lpj);
        s->logprobs = (uint32_t)(k > EMU_MAX_LOGPROBS ? EMU_MAX_LOGPROBS : k);
        s->lp_ids = json_is_true(json_object_get(g->root, "return_tokens_as_token_ids"));
        s->plm_h = st_plm_hash_ids(g->ids, (uint32_t)g->n);
    }
    st_buf_init(&s->prompt_lp, RESP_MAX);
    if (whole && json_is_integer(plj) && json_integer_value(plj) > 0) {
        json_int_t k = json_integer_value(plj);
        plm_prompt_logprobs(em, g->ids, (uint32_t)g->n, (uint32_t)(k > EMU_MAX_LOGPROBS ? EMU_MAX_LOGPROBS : k),
                            &s->prompt_lp);
    }
}

/* A completions or chat request: checked as vLLM checks it, then queued on the engine model. */
static void handle_generate(st_emulator *em, const st_http_parser *req, st_server_resp *resp, api_t api)
{
    gen_req g = { .api = api };
    if (gen_parse(em, req, resp, &g) < 0 || gen_max_tokens(resp, &g) < 0 || gen_limits(em, resp, &g) < 0) {
        free(g.ids);
        json_decref(g.root);
        return;
    }
    stream_t *s = gen_stream_new(em, resp, &g);
    if (!s) {
        respond_error(resp, 500, "out of memory", NULL);
        free(g.ids);
        json_decref(g.root);
        return;
    }
    st_emu_req_params p = { .id = s->id,
                            .ids = g.ids,
                            .n_ids = (uint32_t)g.n,
                            .max_tokens = (uint64_t)g.max_tokens,
                            .min_tokens = g.mn ? (uint32_t)json_integer_value(g.mn) : 0,
                            .ignore_eos = json_is_true(json_object_get(g.root, "ignore_eos")),
                            .chat = api == API_CHAT,
                            .arrival = -1,
                            .user = s };
    gen_logprobs(em, s, &g);
    json_decref(g.root);
    char err[1024];
    int rc = st_emu_add_request(em->eng, &p, err, sizeof err);
    free(g.ids);
    if (rc != ST_EMU_ADD_OK) {
        respond_error(resp, rc == ST_EMU_ADD_NOMEM ? 500 : 400, err, rc == ST_EMU_ADD_TOO_LONG ? "input_tokens" : NULL);
        stream_free(s);
        return;
    }
    s->max_tokens =
        p.max_tokens ? (uint32_t)p.max_tokens : em->cfg.max_model_len - (uint32_t)g.n; /* <= max_model_len */
    s->n_reason = (uint32_t)floor(em->o->reasoning_share * s->max_tokens);
    if (em->o->fault_midstream_rate > 0 && g.streaming && s->max_tokens >= 2 &&
        rng_uniform(em) < em->o->fault_midstream_rate)
        s->fail_at = s->max_tokens / 2;
    if (g.streaming)
        st_server_stream_start(resp, 200, "text/event-stream; charset=utf-8", NULL);
    st_server_resp_on_cancel(resp, on_cancel, s);
    arm_now(em);
}

static void handle_models(st_emulator *em, st_server_resp *resp)
{
    st_buf b;
    st_buf_init(&b, EMU_SMALL_JSON_MAX);
    st_buf_puts(&b, "{\"object\":\"list\",\"data\":[{\"id\":");
    st_buf_json_str(&b, em->model_id);
    st_buf_printf(&b, ",\"object\":\"model\",\"created\":%ld,\"owned_by\":\"vllm\",\"root\":",
                  (long)(st_wall_ns() / ST_NS_PER_S));
    st_buf_json_str(&b, em->cfg.model.name);
    st_buf_printf(&b, ",\"parent\":null,\"max_model_len\":%u,\"permission\":[]}]}", em->cfg.max_model_len);
    st_server_respond(resp, 200, "application/json", NULL, b.data, b.len);
    st_buf_free(&b);
}

static void handle_tokenize(st_emulator *em, const st_http_parser *req, st_server_resp *resp)
{
    json_error_t je;
    json_t *root = json_loadb(req->body.data ? req->body.data : "", req->body.len, 0, &je);
    char err[512];
    if (!root || !json_is_object(root)) {
        respond_error(resp, 400, "Invalid JSON body", NULL);
        json_decref(root);
        return;
    }
    const char *model = json_string_value(json_object_get(root, "model"));
    if (model && strcmp(model, em->model_id)) {
        snprintf(err, sizeof err, "The model `%s` does not exist.", model);
        respond_error(resp, 404, err, "model");
        json_decref(root);
        return;
    }
    uint32_t *ids = NULL;
    json_t *msgs = json_object_get(root, "messages");
    int64_t n = msgs ? chat_ids(em, msgs, &ids, err, sizeof err)
                     : prompt_ids(em, json_object_get(root, "prompt"), &ids, err, sizeof err);
    json_decref(root);
    if (n < 0) {
        respond_error(resp, 400, err, NULL);
        return;
    }
    st_buf b;
    st_buf_init(&b, RESP_MAX);
    st_buf_printf(&b, "{\"count\":%lld,\"max_model_len\":%u,\"tokens\":[", (long long)n, em->cfg.max_model_len);
    for (int64_t i = 0; i < n; i++)
        st_buf_printf(&b, i ? ",%u" : "%u", ids[i]);
    st_buf_puts(&b, "],\"token_strs\":null}");
    respond_whole(resp, &b);
    st_buf_free(&b);
    free(ids);
}

static void handle_detokenize(st_emulator *em, const st_http_parser *req, st_server_resp *resp)
{
    json_error_t je;
    json_t *root = json_loadb(req->body.data ? req->body.data : "", req->body.len, 0, &je);
    json_t *t = root ? json_object_get(root, "tokens") : NULL;
    if (!json_is_array(t)) {
        respond_error(resp, 400, "tokens must be an array of token ids", "tokens");
        json_decref(root);
        return;
    }
    st_buf b;
    st_buf_init(&b, RESP_MAX);
    st_buf text;
    st_buf_init(&text, RESP_MAX);
    for (size_t i = 0; i < json_array_size(t); i++) {
        json_t *v = json_array_get(t, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= em->cfg.model.vocab) {
            respond_error(resp, 400, "Token id out of vocabulary", "tokens");
            st_buf_free(&b);
            st_buf_free(&text);
            json_decref(root);
            return;
        }
        char w[8];
        st_emutok_word((uint32_t)json_integer_value(v), w);
        st_buf_printf(&text, i ? " %s" : "%s", w);
    }
    st_buf_puts(&b, "{\"prompt\":");
    st_buf_json_strn(&b, text.data ? text.data : "", text.len);
    st_buf_puts(&b, "}");
    if (st_buf_error(&text))
        st_buf_fail(&b, st_buf_error(&text));
    respond_whole(resp, &b);
    st_buf_free(&b);
    st_buf_free(&text);
    json_decref(root);
}

static void metric_head(st_buf *b, const char *name, const char *type, const char *help)
{
    st_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void emit_hist(st_emulator *em, st_buf *b, const hist *h, const char *labels)
{
    metric_head(b, h->name, "histogram", h->help);
    uint64_t cum = 0;
    for (int i = 0; i < h->nb; i++) {
        cum += h->counts[i];
        char le[32];
        st_fmt_shortest(le, sizeof le, h->bounds[i], 1);
        st_buf_printf(b, "%s_bucket{%s,le=\"%s\"} %llu\n", h->name, labels, le, (unsigned long long)cum);
    }
    cum += h->counts[h->nb];
    st_buf_printf(b, "%s_bucket{%s,le=\"+Inf\"} %llu\n", h->name, labels, (unsigned long long)cum);
    st_buf_printf(b, "%s_count{%s} %llu\n", h->name, labels, (unsigned long long)h->count);
    char sum[32];
    st_buf_printf(b, "%s_sum{%s} %s\n", h->name, labels, st_fmt_shortest(sum, sizeof sum, h->sum, 1));
    (void)em;
}

static void handle_metrics(st_emulator *em, st_server_resp *resp)
{
    st_emu_stats s;
    st_emu_get_stats(em->eng, &s);
    st_buf *b = &em->mbuf;
    st_buf_reset(b);
    char labels[512];
    st_buf lb;
    st_buf_init(&lb, EMU_LABELS_MAX);
    st_buf_puts(&lb, "engine=\"0\",model_name=");
    st_buf_json_str(&lb, em->model_id);
    snprintf(labels, sizeof labels, "%s", lb.data);
    st_buf_free(&lb);
    metric_head(b, "vllm:num_requests_running", "gauge", "Number of requests in model execution batches.");
    st_buf_printf(b, "vllm:num_requests_running{%s} %u\n", labels, s.running);
    metric_head(b, "vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.");
    st_buf_printf(b, "vllm:num_requests_waiting{%s} %u\n", labels, s.waiting);
    metric_head(b, "vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.");
    st_buf_printf(b, "vllm:kv_cache_usage_perc{%s} %.9g\n", labels, s.kv_usage);
    metric_head(b, "vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig");
    st_buf_printf(b,
                  "vllm:cache_config_info{block_size=\"%u\",cache_dtype=\"%s\",enable_prefix_caching=\"%s\","
                  "engine=\"0\",gpu_memory_utilization=\"%g\",num_gpu_blocks=\"%u\"} 1\n",
                  em->cfg.block_size, em->cfg.kv_dtype == ST_EMU_FP8 ? "fp8" : "auto",
                  em->cfg.enable_prefix_caching ? "True" : "False", em->cfg.gpu_memory_utilization, s.num_blocks);
    struct {
        const char *name, *help;
        uint64_t v;
    } ctr[] = {
        { "vllm:num_preemptions_total", "Cumulative number of preemption from the engine.", s.preemptions },
        { "vllm:prompt_tokens_total", "Number of prefill tokens processed.", s.prompt_tokens },
        { "vllm:generation_tokens_total", "Number of generation tokens processed.", s.generation_tokens },
        { "vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.",
          s.prefix_queries },
        { "vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.", s.prefix_hits },
        { "servetune:emulator_tokens_total", "Tokens the emulator sent.", em->tok_sent },
        { "servetune:emulator_tokens_late_total",
          "Tokens sent more than 10 ms of engine time after the model's schedule (the host was busy).", em->tok_late },
        { "servetune:emulator_tokens_very_late_total",
          "Tokens sent more than 100 ms of engine time after the model's schedule.", em->tok_very_late },
        { "servetune:emulator_stream_holds_total",
          "Times a stream's token production was held because its client did not read its answer.", em->holds },
    };
    for (size_t i = 0; i < sizeof ctr / sizeof ctr[0]; i++) {
        metric_head(b, ctr[i].name, "counter", ctr[i].help);
        st_buf_printf(b, "%s{%s} %llu\n", ctr[i].name, labels, (unsigned long long)ctr[i].v);
    }
    if (em->cfg.spec.k) { /* vllm/v1/spec_decode/metrics.py: only served with a --speculative-config */
        const struct {
            const char *name, *help;
            uint64_t v;
        } sp[] = {
            { "vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts.", s.spec_drafts },
            { "vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.", s.spec_draft_tokens },
            { "vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.", s.spec_accepted },
        };
        for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++) {
            metric_head(b, sp[i].name, "counter", sp[i].help);
            st_buf_printf(b, "%s{%s} %llu\n", sp[i].name, labels, (unsigned long long)sp[i].v);
        }
        metric_head(b, "vllm:spec_decode_num_accepted_tokens_per_pos_total", "counter",
                    "Accepted tokens per draft position.");
        for (uint32_t i = 0; i < em->cfg.spec.k && i < ST_EMU_SPEC_MAX_K; i++)
            st_buf_printf(b, "vllm:spec_decode_num_accepted_tokens_per_pos_total{%s,position=\"%u\"} %llu\n", labels, i,
                          (unsigned long long)s.spec_accepted_pos[i]);
    }
    metric_head(b, "servetune:emulator_dropped_seconds_total", "counter",
                "Engine seconds the model lost when the process fell too far behind its schedule to catch up.");
    st_buf_printf(b, "servetune:emulator_dropped_seconds_total{%s} %.9g\n", labels, em->dropped_s);
    metric_head(b, "vllm:request_success_total", "counter", "Count of successfully processed requests.");
    st_buf_printf(b, "vllm:request_success_total{%s,finished_reason=\"stop\"} %llu\n", labels,
                  (unsigned long long)em->success_stop);
    st_buf_printf(b, "vllm:request_success_total{%s,finished_reason=\"length\"} %llu\n", labels,
                  (unsigned long long)em->success_length);
    st_buf_printf(b, "vllm:request_success_total{%s,finished_reason=\"abort\"} %llu\n", labels,
                  (unsigned long long)em->success_abort);
    const hist *hs[] = { &em->h_ttft,   &em->h_itl,  &em->h_e2e,  &em->h_queue, &em->h_prefill,
                         &em->h_decode, &em->h_ptok, &em->h_gtok, &em->h_iter };
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
        emit_hist(em, b, hs[i], labels);
    st_server_respond(resp, 200, "text/plain; version=0.0.4; charset=utf-8", NULL, b->data, b->len);
}

static void handler(void *arg, const st_http_parser *req, st_server_resp *resp)
{
    st_emulator *em = arg;
    char path[256];
    snprintf(path, sizeof path, "%s", req->target ? req->target : "/");
    char *q = strchr(path, '?');
    if (q)
        *q = 0;
    int get = !strcmp(req->method, "GET") || !strcmp(req->method, "HEAD");
    int post = !strcmp(req->method, "POST");
    if (!strcmp(path, "/health")) {
        st_server_respond(resp, 200, NULL, NULL, "", 0);
        return;
    }
    if (!strcmp(path, "/metrics") && get) {
        handle_metrics(em, resp);
        return;
    }
    if (!strcmp(path, "/version") && get) {
        respond_json(resp, 200, "{\"version\":\"" EMU_VERSION "\"}");
        return;
    }
    int gen = !strcmp(path, "/v1/completions") || !strcmp(path, "/v1/chat/completions");
    int known = gen || !strcmp(path, "/v1/models") || !strcmp(path, "/tokenize") || !strcmp(path, "/detokenize") ||
                !strcmp(path, "/reset_prefix_cache");
    if (!known) {
        respond_json(resp, 404, "{\"detail\":\"Not Found\"}");
        return;
    }
    if (check_auth(em, req, resp) < 0)
        return;
    if (!strcmp(path, "/v1/models")) {
        if (!get)
            respond_json(resp, 405, "{\"detail\":\"Method Not Allowed\"}");
        else
            handle_models(em, resp);
        return;
    }
    if (!post) {
        respond_json(resp, 405, "{\"detail\":\"Method Not Allowed\"}");
        return;
    }
    if (!strcmp(path, "/reset_prefix_cache")) {
        if (st_emu_reset_prefix_cache(em->eng) < 0)
            st_logf(em->log, ST_LOG_WARN, "Failed to reset prefix cache because some blocks (%u) are not freed yet",
                    st_emu_engine_memory(em->eng)->num_blocks);
        st_server_respond(resp, 200, NULL, NULL, "", 0);
        return;
    }
    if (!strcmp(path, "/tokenize")) {
        handle_tokenize(em, req, resp);
        return;
    }
    if (!strcmp(path, "/detokenize")) {
        handle_detokenize(em, req, resp);
        return;
    }
    /* generation: crash / hang faults count these requests */
    em->requests_seen++;
    if (em->o->fault_crash_after > 0 && em->requests_seen > em->o->fault_crash_after) {
        st_logf(em->log, ST_LOG_ERROR, "EngineCore encountered a fatal error (injected crash after %ld requests).",
                em->o->fault_crash_after);
        _exit(1);
    }
    if (em->o->fault_hang_after > 0 && em->requests_seen > em->o->fault_hang_after) {
        st_logf(em->log, ST_LOG_WARN, "injected hang after %ld requests: not responding any more",
                em->o->fault_hang_after);
        sigset_t ss;
        sigemptyset(&ss);
        sigaddset(&ss, SIGTERM);
        sigaddset(&ss, SIGINT);
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        sigprocmask(SIG_UNBLOCK, &ss, NULL);
        for (;;)
            pause();
    }
    handle_generate(em, req, resp, !strcmp(path, "/v1/chat/completions") ? API_CHAT : API_COMPL);
}

static void on_signal(st_loop *l, int fd, uint32_t events, void *arg)
{
    (void)events;
    (void)arg;
    struct signalfd_siginfo si;
    while (read(fd, &si, sizeof si) == (ssize_t)sizeof si) {
    }
    st_loop_stop(l);
}

static void setup_hists(st_emulator *em)
{
    static const double ttft[] = { 0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
                                   1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0 };
    static const double itl[] = { 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                  0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0 };
    static const double req[] = { 0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
                                  30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0 };
    double tok[HMAX];
    int nt = 0;
    for (double base = 1; nt < HMAX - 3; base *= 10) {
        const double m[3] = { 1, 2, 5 };
        int stop = 0;
        for (int k = 0; k < 3; k++) {
            double v = base * m[k];
            if (v > em->cfg.max_model_len) {
                stop = 1;
                break;
            }
            tok[nt++] = v;
        }
        if (stop)
            break;
    }
    double it[HMAX];
    int ni = 0;
    it[ni++] = 1;
    for (double v = 8; v <= em->cfg.max_num_batched_tokens && ni < HMAX; v *= 2)
        it[ni++] = v;
    hist_set(&em->h_ttft, "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttft, 22);
    hist_set(&em->h_itl, "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", itl, 19);
    hist_set(&em->h_e2e, "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", req, 21);
    hist_set(&em->h_queue, "vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
             req, 21);
    hist_set(&em->h_prefill, "vllm:request_prefill_time_seconds",
             "Histogram of time spent in PREFILL phase for request.", req, 21);
    hist_set(&em->h_decode, "vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.",
             req, 21);
    hist_set(&em->h_ptok, "vllm:request_prompt_tokens", "Number of prefill tokens processed.", tok, nt);
    hist_set(&em->h_gtok, "vllm:request_generation_tokens", "Number of generation tokens processed.", tok, nt);
    hist_set(&em->h_iter, "vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", it, ni);
}

static void print_jitter(const st_emulator *em)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
    fprintf(stderr,
            "server CPU %.2f s (user %.2f, system %.2f) for %llu token events: %.0f token events per CPU-second\n", cpu,
            ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6, ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6,
            (unsigned long long)em->jit.n, cpu > 0 ? em->jit.n / cpu : 0);
    if (!em->jit.n)
        return;
    uint64_t c = 0, p50 = 0, p99 = 0, p999 = 0;
    for (size_t i = 0; i <= 2000; i++) {
        c += em->jit.bins[i];
        if (!p50 && c * 2 >= em->jit.n)
            p50 = i + 1;
        if (!p99 && c * 100 >= em->jit.n * 99)
            p99 = i + 1;
        if (!p999 && c * 1000 >= em->jit.n * 999)
            p999 = i + 1;
    }
    fprintf(stderr,
            "token emission jitter vs the model's schedule: %llu tokens, p50 <= %.2f ms, p99 <= %.2f ms, "
            "p99.9 <= %.2f ms, max %.3f ms\n",
            (unsigned long long)em->jit.n, p50 * 0.01, p99 * 0.01, p999 * 0.01, em->jit.max / 1e6);
}

int st_emu_server_run(const st_emu_config *cfg, const st_emu_server_opts *o, const st_log *log, char *err,
                      size_t errlen)
{
    st_emulator *em = calloc(1, sizeof *em);
    if (!em) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    em->cfg = *cfg;
    if (o->no_model)
        em->cfg.no_frontend = 1; /* the server itself is what is measured */
    em->o = o;
    em->log = log;
    em->K = o->time_scale > 0 ? o->time_scale : 1.0;
    em->override_e = -1;
    em->rng = o->seed * 0x9e3779b97f4a7c15ULL + 0x1234567ULL;
    if (!em->rng)
        em->rng = 1;
    em->model_id = o->served_model_name ? o->served_model_name : cfg->model.name;
    st_buf_init(&em->mbuf, EMU_METRICS_MAX);
    st_buf_init(&em->cbuf, EMU_CHUNK_MAX);
    em->t0 = st_now();
    int rc = -1;
    int sfd = -1;
    if (st_emu_engine_new(&em->cfg, (st_clock){ emu_now, em }, &em->eng, NULL, err, errlen) < 0)
        goto out;
    setup_hists(em);
    if (o->ground_truth) {
        em->gt = fopen(o->ground_truth, "w");
        if (!em->gt) {
            snprintf(err, errlen, "cannot open --ground-truth file %s: %s", o->ground_truth, strerror(errno));
            goto out;
        }
    }
    em->loop = st_loop_new();
    if (!em->loop) {
        snprintf(err, errlen, "cannot create the event loop");
        goto out;
    }
    sigset_t ss;
    sigemptyset(&ss);
    sigaddset(&ss, SIGTERM);
    sigaddset(&ss, SIGINT);
    sigprocmask(SIG_BLOCK, &ss, NULL);
    sfd = signalfd(-1, &ss, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sfd < 0 || st_loop_add_fd(em->loop, sfd, ST_EV_READ, on_signal, em) < 0) {
        snprintf(err, errlen, "signalfd: %s", strerror(errno));
        goto out;
    }
    st_timer_init(&em->step_timer, on_step_timer, em);
    st_timer_init(&em->drain_timer, on_drain_timer, em);
    st_server_config sc = { .host = o->host ? o->host : "127.0.0.1",
                            .port = o->port,
                            .handler = handler,
                            .arg = em,
                            .max_conns = 20000,
                            .backlog = 4096,
                            .max_out = RESP_MAX + RESP_HEAD_MAX,
                            .idle_timeout_s = o->keep_alive_s,
                            .header_timeout_s = o->header_timeout_s };
    em->srv = st_server_new(em->loop, &sc, err, errlen);
    if (!em->srv)
        goto out;
    if (o->print_jitter)
        st_loop_set_spin(em->loop, 200000);
    st_logf(log, ST_LOG_INFO, "Starting vLLM API server 0 on http://%s:%u", sc.host, st_server_port(em->srv));
    st_logf(log, ST_LOG_INFO,
            "Available routes are: /health, /metrics, /version, /v1/models, /v1/completions, "
            "/v1/chat/completions, /tokenize, /detokenize, /reset_prefix_cache");
    st_logf(log, ST_LOG_INFO, "Application startup complete.");
    em->t0 = st_now(); /* emulated time starts when the server is ready */
    if (st_loop_run(em->loop) < 0) {
        snprintf(err, errlen, "event loop failed");
        goto out;
    }
    st_logf(log, ST_LOG_INFO, "Shutting down");
    if (o->print_jitter)
        print_jitter(em);
    rc = 0;
out:
    if (em->srv)
        st_server_free(em->srv); /* cancels open streams */
    if (em->step_active) {
        em->step_active = 0;
    }
    while (em->dead) {
        stream_t *d = em->dead;
        em->dead = d->next_dead;
        stream_free(d);
    }
    if (em->loop) {
        st_timer_disarm(em->loop, &em->step_timer);
        st_timer_disarm(em->loop, &em->drain_timer);
        st_loop_free(em->loop);
    }
    if (sfd >= 0)
        close(sfd);
    if (em->gt)
        fclose(em->gt);
    st_emu_engine_free(em->eng);
    st_buf_free(&em->mbuf);
    st_buf_free(&em->cbuf);
    free(em->held);
    free(em);
    return rc;
}
