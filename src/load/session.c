/* Multi-turn sessions at run time (load/session.h). */
#include "load/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The text of one user turn. */
#define SESSION_TURN_TEXT_MAX ((size_t)64 << 20)

static void drop_history(st_work_item *it)
{
    for (uint32_t k = 0; k < it->n_history; k++)
        free(it->history[k]);
    free(it->history);
    it->history = NULL;
    it->n_history = 0;
}

void st_session_on_end(void *arg, st_runner_ctl *r, uint32_t i, const st_record *rec, const char *answer,
                       size_t answer_len)
{
    st_workload *w = arg;
    if (!w || i >= w->n)
        return;
    st_work_item *it = &w->items[i];
    uint32_t j = it->next;
    if (!j || j >= w->n || j == i) {
        drop_history(it); /* the session ends here */
        return;
    }
    st_work_item *nx = &w->items[j];
    char why[160];
    if (rec->status != ST_REQ_OK || !answer) {
        snprintf(why, sizeof why, "not sent: turn %u of its session %s", it->turn + 1,
                 rec->status == ST_REQ_SKIPPED ? "was skipped"
                 : rec->status != ST_REQ_OK    ? "failed"
                                               : "answered more than the 4 MiB servetune keeps");
        drop_history(it);
        st_runner_skip(r, j, why); /* and, through this hook, every later turn */
        return;
    }
    /* the conversation so far: the history of this turn, its text, the answer */
    char **h = realloc(it->history, ((size_t)it->n_history + 2) * sizeof *h);
    st_buf ut;
    st_buf_init(&ut, SESSION_TURN_TEXT_MAX);
    int ok = h && st_workload_text(it, &ut) == 0;
    if (h)
        it->history = h;
    char *user = ok ? strdup(ut.data ? ut.data : "") : NULL;
    char *ans = ok ? strndup(answer, answer_len) : NULL;
    st_buf_free(&ut);
    if (!user || !ans) {
        free(user);
        free(ans);
        drop_history(it);
        st_runner_skip(r, j, "not sent: out of memory for the session's history");
        return;
    }
    h[it->n_history] = user;
    h[it->n_history + 1] = ans;
    drop_history(nx);
    nx->history = h;
    nx->n_history = it->n_history + 2;
    it->history = NULL;
    it->n_history = 0;
    st_runner_release(r, j, nx->think);
}

int st_turn_rows(const st_record *recs, uint32_t n, st_turn_row *rows)
{
    memset(rows, 0, ST_TURN_ROWS * sizeof *rows);
    double *ttft = malloc((size_t)(n ? n : 1) * sizeof *ttft);
    double *ttfat = malloc((size_t)(n ? n : 1) * sizeof *ttfat);
    if (!ttft || !ttfat) {
        free(ttft);
        free(ttfat);
        return -1;
    }
    int used = 0;
    for (int t = 0; t < ST_TURN_ROWS; t++) {
        st_turn_row *row = &rows[t];
        row->turn = (uint32_t)t + 1;
        uint32_t a = 0, b = 0;
        for (uint32_t i = 0; i < n; i++) {
            const st_record *x = &recs[i];
            if (!x->session || x->warmup)
                continue;
            uint32_t k = x->turn < ST_TURN_ROWS - 1 ? x->turn : ST_TURN_ROWS - 1;
            if (k != (uint32_t)t)
                continue;
            row->requests++;
            if (x->status != ST_REQ_OK)
                continue;
            row->completed++;
            ttft[a++] = st_record_ttft(x);
            if (x->first_answer >= 0)
                ttfat[b++] = st_record_ttfat(x);
            row->prompt_tokens += x->prompt_reported ? x->prompt_reported : x->input_tokens;
            row->cached_tokens += x->cached_tokens;
            if (x->cached_tokens)
                row->cached_reported = 1;
        }
        st_dist_compute(ttft, a, &row->ttft);
        st_dist_compute(ttfat, b, &row->ttfat);
        if (row->requests)
            used = t + 1;
    }
    free(ttft);
    free(ttfat);
    return used;
}
