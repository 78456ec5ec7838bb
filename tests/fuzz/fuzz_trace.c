/* Fuzzes the trace readers: the servetune line parser, and the streaming reader in every
 * format (detected, and forced), fed whole and in two pieces. Errors must be reported, never
 * crash; everything allocated must be freed; the rows handed out must be consistent. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "load/trace.h"
#include "load/workload.h"

static int check_row(void *arg, const st_trace_row *r, char *err, size_t errlen)
{
    (void)arg;
    (void)err;
    (void)errlen;
    if (r->input_len == 0 || r->output_len == 0 || r->input_len > ST_WORKLOAD_MAX_TOKENS ||
        r->output_len > ST_WORKLOAD_MAX_TOKENS)
        abort();
    if (r->n_hash && (uint64_t)(r->n_hash - 1) * r->block_size >= r->input_len)
        abort();
    if (r->turn > 0 && !r->session)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 16))
        return 0;
    char *p = malloc(size ? size : 1);
    if (!p)
        return 0;
    memcpy(p, data, size);
    st_work_item it;
    int has_ts;
    double ts;
    char err[512];
    if (st_trace_parse_line(p, size, 0, &it, &has_ts, &ts, err, sizeof err) == 0) {
        if (!it.input_ids && !it.input_text)
            abort();
        if (it.input_ids && it.prefix_len > it.input_len)
            abort();
        st_work_item_free(&it);
    }
    /* every format, detected and forced, with a few options */
    for (int f = 0; f < ST_TRACE__COUNT; f++) {
        st_trace_opts o = { 0 };
        o.format = (st_trace_format)f;
        o.max_bad = (size & 1) ? 3 : 0;
        o.block_size = (size & 2) ? 16 : 0;
        st_trace_counts c;
        (void)st_trace_read_buffer(p, size, "fuzz", &o, check_row, NULL, &c, NULL, err, sizeof err);
        if (c.kept > c.rows || c.bad > o.max_bad)
            abort();
        /* in two pieces */
        st_trace_reader *r = st_trace_reader_new(&o, "fuzz", check_row, NULL);
        if (r) {
            size_t half = size / 2;
            if (st_trace_reader_feed(r, p, half, err, sizeof err) == 0 &&
                st_trace_reader_feed(r, p + half, size - half, err, sizeof err) == 0)
                (void)st_trace_reader_finish(r, err, sizeof err);
            st_trace_reader_free(r);
        }
    }
    /* into workloads */
    st_workload w;
    if (st_workload_trace_parse(p, size, "fuzz", &w, err, sizeof err) == 0) {
        for (uint32_t i = 0; i < w.n; i++)
            if (i && w.items[i].arrival >= 0 && w.items[i].arrival < w.items[i - 1].arrival)
                abort();
        st_workload_free(&w);
    } else if (w.items || w.n) {
        abort();
    }
    st_trace_load_opts lo;
    st_trace_load_opts_default(&lo);
    if (st_trace_load_buffer(p, size, "fuzz", &lo, &w, NULL, NULL, err, sizeof err) == 0) {
        for (uint32_t i = 0; i < w.n; i++) {
            if (w.items[i].next && (w.items[i].next >= w.n || w.items[i].next < w.n - w.n_dependent))
                abort();
            if (!w.items[i].input_ids && !w.items[i].input_text)
                abort();
        }
        st_workload_free(&w);
    }
    free(p);
    return 0;
}
