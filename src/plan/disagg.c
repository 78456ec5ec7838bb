#include "plan/disagg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "audit/spec.h"
#include "emu/specstep.h"
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
     * prompt and half its output on average) and --max-num-seqs; with speculation, the time per
     * token of a verification step */
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
        /* speculating, a sequence emits the accepted tokens and one more a verification step: its
         * time per token (emu/specstep.h), which the TPOT SLO and the rate then count */
        st_emu_spec_point sp;
        if (cfg->spec.k && st_emu_spec_point_cfg(cfg, (uint32_t)bsz, (uint32_t)ctx, &sp) == 0)
            st = sp.tpot_spec_s;
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
