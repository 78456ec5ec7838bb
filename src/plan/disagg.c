#include "plan/disagg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "audit/spec.h"
#include "emu/catalog.h"
#include "emu/sim.h"
#include "emu/steptime.h"
#include "load/arrival.h"
#include "load/record.h"

/* Connector presets: one GPU's link, one direction. Latencies are a transfer's setup (the
 * connector's handshake and the first bytes), orders of magnitude, not measurements. */
static const st_disagg_link links[] = {
    { "nvlink", 450e9, 10e-6,
      "NVLink 4 (H100 SXM): 900 GB/s per GPU both directions, NVIDIA H100 Tensor Core GPU datasheet" },
    { "infiniband", 50e9, 20e-6, "InfiniBand NDR, 400 Gb/s per port (one per GPU), NVIDIA ConnectX-7 datasheet" },
    { "pcie", 64e9, 20e-6, "PCIe 5.0 x16, 32 GT/s x 16 lanes (~64 GB/s per direction), PCI-SIG PCIe 5.0 spec" },
    { "ethernet", 12.5e9, 50e-6, "100 Gb/s Ethernet (one NIC per GPU), IEEE 802.3" },
};

int st_disagg_link_find(const char *name, st_disagg_link *out)
{
    for (size_t i = 0; name && i < sizeof links / sizeof *links; i++)
        if (!strcasecmp(name, links[i].name)) {
            *out = links[i];
            return 0;
        }
    return -1;
}

const char *st_disagg_link_names(void) { return "nvlink, infiniband, pcie, ethernet"; }

const char *st_disagg_link_default(const char *gpu)
{
    st_emu_gpu g;
    char why[200];
    return gpu && st_emu_gpu_find(gpu, &g, why, sizeof why) == 0 && g.link_bw >= 100e9 ? "nvlink" : "pcie";
}

void st_disagg_work_of_spec(const st_spec *s, st_disagg_work *out)
{
    *out = (st_disagg_work){ .input_tokens = st_spec_mean_input(s),
                             .cached_tokens = s->workload.shared_prefix,
                             .output_tokens = s->workload.output_tokens,
                             .ttft_slo_s = s->slo.n > 0 ? s->slo.terms[0].max_ms / 1e3 : 0,
                             .tpot_slo_s = s->slo.n > 1 ? s->slo.terms[1].max_ms / 1e3 : 0,
                             .window_s = s->search.min_window_s,
                             .growth_p = 1 - s->search.confidence };
}

double st_disagg_kv_bytes_per_token(const st_emu_model *m, st_emu_dtype kv)
{
    return st_emu_model_kv_bytes_per_token(m, kv);
}

double st_disagg_transfer_s(const st_disagg_link *l, int tp, double tokens, double bytes_per_token)
{
    double bw = l->bytes_per_s * (tp > 0 ? tp : 1);
    return l->latency_s + tokens * bytes_per_token / bw;
}

double st_disagg_rate_match(double prefill_rps, int x, double s_p, double decode_rps, int y, double s_d)
{
    /* in AIConfigurator's order: the corrected throughput, times the workers */
    double p = prefill_rps * s_p * x, d = decode_rps * s_d * y;
    return p < d ? p : d;
}

int st_disagg_worker_rates(const st_emu_config *cfg, const st_emu_memory *mem, const st_disagg_work *w,
                           st_disagg_worker *out, char *why, size_t n)
{
    memset(out, 0, sizeof *out);
    /* the shared prefix is cached only where prefix caching is on */
    double in = w->input_tokens, cached = cfg->enable_prefix_caching && w->cached_tokens < in ? w->cached_tokens : 0;
    double u = in - cached, outn = w->output_tokens > 1 ? w->output_tokens : 1;
    double budget = mem->max_num_batched_tokens;
    if (!(u >= 1) || !(budget >= 1)) {
        snprintf(why, n, "no prompt tokens to prefill");
        return -1;
    }
    /* prefill: one request at a time, in chunks of the token budget (the last chunk samples) */
    double done = cached, t = 0;
    while (done < in) {
        double c = in - done < budget ? in - done : budget;
        st_emu_batch b = { .tokens = (uint32_t)c,
                           .seqs = 1,
                           .sampled = done + c >= in,
                           .attn_pairs = c * done + c * (c + 1) / 2,
                           .kv_read_tokens = done };
        t += st_emu_step_seconds(cfg, &b, NULL);
        done += c;
    }
    out->prefill_s = t;
    out->prefill_rps = t > 0 && (!(w->ttft_slo_s > 0) || t <= w->ttft_slo_s) ? 1.0 / t : 0;
    /* decode: the largest batch within the TPOT SLO, the KV cache (each request holds its
     * prompt and half its output on average) and --max-num-seqs */
    double ctx = in + outn / 2;
    double fit = floor((double)mem->kv_tokens / (in + outn));
    double bmax = mem->max_num_seqs < fit ? mem->max_num_seqs : fit;
    double best = 0, best_t = 0;
    for (double bsz = 1; bsz <= bmax; bsz++) {
        st_emu_batch b = { .tokens = (uint32_t)bsz,
                           .decode_tokens = (uint32_t)bsz,
                           .seqs = (uint32_t)bsz,
                           .sampled = (uint32_t)bsz,
                           .attn_pairs = bsz * ctx,
                           .kv_read_tokens = bsz * ctx };
        double st = st_emu_step_seconds(cfg, &b, NULL);
        if (w->tpot_slo_s > 0 && st > w->tpot_slo_s)
            break;
        if (bsz / st > (best_t > 0 ? best / best_t : 0)) {
            best = bsz;
            best_t = st;
        }
    }
    out->decode_batch = best;
    out->decode_step_s = best_t;
    out->decode_rps = best > 0 ? best / (outn * best_t) : 0;
    out->kv_bytes = in * st_disagg_kv_bytes_per_token(&cfg->model, cfg->kv_dtype);
    if (!(out->prefill_rps > 0) && !(out->decode_rps > 0))
        snprintf(why, n, "neither a prefill (%.0f ms) nor a decode step within the SLO", t * 1e3);
    else if (!(out->prefill_rps > 0))
        snprintf(why, n, "one prefill takes %.0f ms, over the TTFT SLO", t * 1e3);
    else if (!(out->decode_rps > 0))
        snprintf(why, n, "no decode batch within the TPOT SLO");
    return out->prefill_rps > 0 && out->decode_rps > 0 ? 0 : -1;
}

int st_disagg_best(const st_disagg_worker *wk, int tp, int total_gpus, double s_p, double s_d, const st_disagg_link *l,
                   st_disagg_pick *out)
{
    memset(out, 0, sizeof *out);
    int workers = tp > 0 ? total_gpus / tp : 0;
    int found = -1;
    for (int x = 1; x < workers && x <= ST_DISAGG_WORKERS_MAX; x++) {
        int y = workers - x;
        if (y > ST_DISAGG_WORKERS_MAX)
            continue;
        double r = st_disagg_rate_match(wk->prefill_rps, x, s_p, wk->decode_rps, y, s_d);
        /* each prefill worker's links carry its share of the requests' KV */
        double link = l->bytes_per_s * tp;
        double need = r / x * wk->kv_bytes;
        int limited = 0;
        if (need > link) {
            r = link / wk->kv_bytes * x;
            limited = 1;
        }
        double per_gpu = r / (double)(workers * tp);
        if (found < 0 || per_gpu > out->rps_per_gpu) {
            out->x = x;
            out->y = y;
            out->rps = r;
            out->rps_per_gpu = per_gpu;
            out->link_need_bps = need;
            out->link_limited = limited;
            found = 0;
        }
    }
    if (found < 0 || !(out->rps > 0))
        return -1;
    out->transfer_s = l->latency_s + wk->kv_bytes / (l->bytes_per_s * tp);
    out->ttft_s = wk->prefill_s + out->transfer_s;
    out->tpot_s = wk->decode_step_s;
    return 0;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The decode step of n sequences at context ctx. */
static double decode_step(const st_emu_config *cfg, double nseq, double ctx)
{
    st_emu_batch b = { .tokens = (uint32_t)ceil(nseq),
                       .decode_tokens = (uint32_t)ceil(nseq),
                       .seqs = (uint32_t)ceil(nseq),
                       .sampled = (uint32_t)ceil(nseq),
                       .attn_pairs = nseq * ctx,
                       .kv_read_tokens = nseq * ctx };
    return st_emu_step_seconds(cfg, &b, NULL);
}

int st_disagg_queueing(const st_emu_config *cfg, const st_emu_memory *mem, const st_emu_sim_item *items, uint32_t n,
                       const st_disagg_worker *wk, const st_disagg_pick *pk, int tp, double rate, double output_tokens,
                       uint64_t seed, st_disagg_queue *out, char *why, size_t whylen)
{
    (void)tp;
    (void)wk;
    memset(out, 0, sizeof *out);
    out->rate = rate;
    if (!(rate > 0) || n < 8 || pk->x < 1 || pk->y < 1) {
        snprintf(why, whylen, "no rate or too few requests to simulate");
        return -1;
    }
    int rc = -1;
    st_emu_sim_item *it = calloc(n, sizeof *it);
    st_ns *sched = calloc(n, sizeof *sched);
    st_record *recs = calloc(n, sizeof *recs);
    double *ttft = calloc(n, sizeof *ttft);
    if (!it || !sched || !recs || !ttft) {
        snprintf(why, whylen, "out of memory");
        goto done;
    }
    /* the prefill pool: one worker's share, each request prefilled and its first token sampled */
    st_arrival a = { .kind = ST_ARR_POISSON, .rate = rate / pk->x, .seed = seed };
    if (st_arrival_schedule(&a, n, sched)) {
        snprintf(why, whylen, "bad arrival rate %g", rate / pk->x);
        goto done;
    }
    double sum_in = 0;
    for (uint32_t i = 0; i < n; i++) {
        it[i] = items[i];
        it[i].arrival = sched[i];
        it[i].output_len = 1;
        it[i].dependent = 0;
        it[i].next = 0;
        sum_in += items[i].input_len;
    }
    st_emu_run_opts o = { .no_token_times = 1 }; /* it reads the first tokens only */
    st_emu_sim_stats st;
    if (st_emu_sim_run_opts(cfg, it, n, &o, recs, &st, NULL, why, whylen))
        goto done;
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++)
        if (recs[i].status == ST_REQ_OK && recs[i].first_token >= 0 && recs[i].sent >= 0)
            ttft[k++] = (double)(recs[i].first_token - recs[i].sent) / 1e9;
    if (k < n / 2) {
        snprintf(why, whylen, "only %u of %u prefills completed", k, n);
        goto done;
    }
    qsort(ttft, k, sizeof *ttft, cmp_d);
    out->prefill_p95_s = ttft[(size_t)ceil(0.95 * k) - 1];
    /* the decode pool's fixed point: N = rate / y x output x step(N), N within the batch limit */
    double outn = output_tokens > 1 ? output_tokens : 1;
    double ctx = sum_in / n + outn / 2;
    double fit = floor((double)mem->kv_tokens / (sum_in / n + outn));
    double bmax = mem->max_num_seqs < fit ? mem->max_num_seqs : fit;
    double lam = rate / pk->y;
    double lo = 0, hi = bmax;
    if (lam * outn * decode_step(cfg, bmax, ctx) > bmax) {
        out->tpot_s = INFINITY;
        out->decode_running = bmax;
        out->overloaded = 1;
    } else {
        /* g(N) = lam x out x step(N) - N is positive near 0 (a step has a fixed cost) and <= 0 at bmax */
        for (int i = 0; i < 60; i++) {
            double mid = (lo + hi) / 2;
            if (lam * outn * decode_step(cfg, mid > 1 ? mid : 1, ctx) > mid)
                lo = mid;
            else
                hi = mid;
        }
        out->decode_running = hi;
        out->tpot_s = decode_step(cfg, hi > 1 ? hi : 1, ctx);
    }
    out->ttft_p95_s = out->prefill_p95_s + pk->transfer_s + (isfinite(out->tpot_s) ? out->tpot_s : 0);
    rc = 0;
done:
    for (uint32_t i = 0; recs && i < n; i++)
        st_record_free(&recs[i]);
    free(it);
    free(sched);
    free(recs);
    free(ttft);
    return rc;
}

static int meets(const st_disagg_queue *q, const st_disagg_work *w)
{
    return !q->overloaded && isfinite(q->tpot_s) && (!(w->ttft_slo_s > 0) || q->ttft_p95_s <= w->ttft_slo_s) &&
           (!(w->tpot_slo_s > 0) || q->tpot_s <= w->tpot_slo_s);
}

int st_disagg_queueing_capacity(const st_emu_config *cfg, const st_emu_memory *mem, const st_emu_sim_item *items,
                                uint32_t n, const st_disagg_worker *wk, const st_disagg_pick *pk, int tp,
                                const st_disagg_work *w, uint64_t seed, double rel_tol, st_disagg_queue *out, char *why,
                                size_t whylen)
{
    memset(out, 0, sizeof *out);
    double lo = 0, hi = pk->rps;
    st_disagg_queue q;
    if (st_disagg_queueing(cfg, mem, items, n, wk, pk, tp, hi, w->output_tokens, seed, &q, why, whylen))
        return -1;
    if (meets(&q, w)) {
        *out = q;
        return 0;
    }
    while (hi - lo > rel_tol * hi) {
        double mid = (lo + hi) / 2;
        if (st_disagg_queueing(cfg, mem, items, n, wk, pk, tp, mid, w->output_tokens, seed, &q, why, whylen))
            return -1;
        if (meets(&q, w)) {
            lo = mid;
            *out = q;
        } else
            hi = mid;
    }
    if (!(lo > 0))
        out->rate = 0;
    return 0;
}
