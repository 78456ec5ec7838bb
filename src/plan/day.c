#include "plan/day.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plan/cost.h"
#include "plan/prices.h"
#include "audit/spec.h"
#include "load/hourly.h"

/* Serverless workers up on average in a slot with request rate rps (billed worker-seconds per
 * second), and the share of its requests that meet a cold worker (docs/plan.md). */
static void serverless_slot(double rps, const st_day_opts *o, double *workers, double *cold_share)
{
    *workers = 0;
    *cold_share = 0;
    if (!(rps > 0))
        return;
    double full = floor(rps / o->capacity_rps);
    double x = rps - full * o->capacity_rps; /* the overflow rate the marginal worker sees */
    double up = 1 - exp(-x * (o->idle_timeout_s + o->service_s));
    double colds = x * exp(-x * o->idle_timeout_s); /* cold starts per second */
    *workers = full + up + colds * o->cold_start_s;
    *cold_share = colds / rps;
}

static int check_opts(const st_day_opts *o, char *err, size_t errlen)
{
    const char *bad = NULL;
    if (!(o->capacity_rps > 0) || !isfinite(o->capacity_rps))
        bad = "capacity must be a positive number of requests/s";
    else if (o->gpus_per_replica < 1)
        bad = "GPUs per replica must be at least 1";
    else if (!(o->price_per_gpu_hour >= 0) || !isfinite(o->price_per_gpu_hour))
        bad = "the dedicated price per GPU-hour must be a number >= 0";
    else if (!(o->scale_up_delay_s >= 0) || !isfinite(o->scale_up_delay_s))
        bad = "the scale-up delay must be a number of seconds >= 0";
    else if (o->min_replicas < 0)
        bad = "the replica floor must be >= 0";
    else if (o->serverless_price_per_gpu_s > 0 &&
             (!(o->idle_timeout_s >= 0) || !(o->cold_start_s >= 0) || !(o->service_s >= 0) ||
              !isfinite(o->idle_timeout_s + o->cold_start_s + o->service_s + o->serverless_price_per_gpu_s)))
        bad = "serverless idle timeout, cold start and service time must be numbers of seconds >= 0";
    if (bad)
        snprintf(err, errlen, "traffic day: %s", bad);
    return bad ? -1 : 0;
}

int st_day_price(const double *rps, int n, double slot_s, const st_day_opts *o, st_day_slot *slots, st_day_cost *out,
                 char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->serverless_usd = NAN;
    out->break_even_utilization = NAN;
    out->utilization = NAN;
    if (n < 1 || n > ST_DAY_MAX_SLOTS || !(slot_s > 0) || !isfinite(slot_s)) {
        snprintf(err, errlen, "traffic day: 1 to %d slots of a positive length", ST_DAY_MAX_SLOTS);
        return -1;
    }
    if (check_opts(o, err, errlen))
        return -1;
    double peak = 0;
    for (int i = 0; i < n; i++) {
        if (!(rps[i] >= 0) || !isfinite(rps[i])) {
            snprintf(err, errlen, "traffic day: slot %d: the rate must be a number >= 0 (got %g)", i, rps[i]);
            return -1;
        }
        peak = rps[i] > peak ? rps[i] : peak;
    }
    double slot_h = slot_s / 3600.0, gpu_h = o->price_per_gpu_hour * o->gpus_per_replica;
    int serverless = o->serverless_price_per_gpu_s > 0;
    out->n = n;
    out->slot_s = slot_s;
    out->peak_replicas = st_cost_replicas(peak, o->capacity_rps);
    if (out->peak_replicas < o->min_replicas)
        out->peak_replicas = o->min_replicas;
    out->peak_usd = (double)out->peak_replicas * n * slot_h * gpu_h;
    long prev = 0;
    double cold_requests = 0, worker_s = 0;
    for (int i = 0; i < n; i++) {
        long r = st_cost_replicas(rps[i], o->capacity_rps);
        if (r < o->min_replicas)
            r = o->min_replicas;
        double hours = (double)r * slot_h;
        if (r > prev) /* the added replicas start early enough to be ready */
            hours += (double)(r - prev) * o->scale_up_delay_s / 3600.0;
        out->autoscaled_replica_hours += hours;
        prev = r;
        double w = 0, cs = 0;
        if (serverless)
            serverless_slot(rps[i], o, &w, &cs);
        worker_s += w * slot_s;
        cold_requests += cs * rps[i] * slot_s;
        out->requests += rps[i] * slot_s;
        if (slots) {
            slots[i].rps = rps[i];
            slots[i].replicas = r;
            slots[i].serverless_workers = w;
            slots[i].cold_share = cs;
        }
    }
    out->autoscaled_usd = out->autoscaled_replica_hours * gpu_h;
    if (out->peak_replicas > 0)
        out->utilization = out->requests / ((double)out->peak_replicas * o->capacity_rps * n * slot_s);
    const char *best = "peak-sized";
    double best_usd = out->peak_usd;
    if (out->autoscaled_usd < best_usd) {
        best = "autoscaled";
        best_usd = out->autoscaled_usd;
    }
    if (serverless) {
        out->serverless_gpu_hours = worker_s * o->gpus_per_replica / 3600.0;
        out->serverless_usd = worker_s * o->gpus_per_replica * o->serverless_price_per_gpu_s;
        out->cold_share = out->requests > 0 ? cold_requests / out->requests : 0;
        out->break_even_utilization = o->price_per_gpu_hour / (o->serverless_price_per_gpu_s * 3600.0);
        if (out->serverless_usd < best_usd)
            best = "serverless";
    }
    out->cheapest = best;
    return 0;
}

int st_day_from_hours(const int *hours, const double *rates, int n, double rps[24], char *err, size_t errlen)
{
    int seen[24] = { 0 };
    for (int i = 0; i < n; i++) {
        int h = hours[i];
        if (h < 0 || h > 23) {
            snprintf(err, errlen, "traffic: hour %d is not 0..23", h);
            return -1;
        }
        if (seen[h]) {
            snprintf(err, errlen, "traffic: hour %d is given twice", h);
            return -1;
        }
        if (!(rates[i] >= 0) || !isfinite(rates[i])) {
            snprintf(err, errlen, "traffic: hour %d: the rate must be a number >= 0 (got %g)", h, rates[i]);
            return -1;
        }
        seen[h] = 1;
        rps[h] = rates[i];
    }
    for (int h = 0; h < 24; h++)
        if (!seen[h]) {
            snprintf(err, errlen, "traffic: hour %d is missing (a day names every hour 0..23; write 0 for none)", h);
            return -1;
        }
    return 0;
}

int st_day_spec_hours(const st_spec *s, double rps[24])
{
    int n = 0;
    for (int h = 0; h < 24; h++)
        if (s->traffic.hour_known[h])
            rps[n++] = s->traffic.hourly_rps[h];
    return n;
}

int st_day_of_spec(const st_spec *s, const st_prices *prices, const st_day_setup *u, st_day_cost *out,
                   st_day_serverless *sl, char *err, size_t errlen)
{
    sl->price_per_gpu_s = 0;
    sl->from = NULL;
    if (!s->traffic.set) {
        snprintf(err, errlen, "the spec gives no traffic day");
        return -1;
    }
    if (!(u->capacity_rps > 0)) {
        snprintf(err, errlen, "no capacity within the SLO");
        return -1;
    }
    if (s->traffic.serverless_price_per_gpu_s > 0) {
        sl->price_per_gpu_s = s->traffic.serverless_price_per_gpu_s;
        sl->from = "the spec";
    } else if (prices && u->gpu_key) {
        const st_price *p = st_prices_pick(prices, u->gpu_key, ST_PRICE_SERVERLESS, s->traffic.serverless_provider);
        if (p) {
            sl->price_per_gpu_s = p->usd_per_gpu_hour / 3600.0;
            sl->from = p->provider;
        }
    }
    double out_tok = s->workload.output_tokens > 0 ? s->workload.output_tokens : 1;
    double service =
        (isfinite(u->ttft_ms) ? u->ttft_ms / 1e3 : 0) + (isfinite(u->tpot_ms) ? u->tpot_ms / 1e3 * (out_tok - 1) : 0);
    st_day_opts o = { .capacity_rps = u->capacity_rps,
                      .gpus_per_replica = u->gpus_per_replica,
                      .price_per_gpu_hour = u->price_per_gpu_hour,
                      .scale_up_delay_s = s->traffic.scale_up_delay_s,
                      .min_replicas = s->traffic.min_replicas,
                      .serverless_price_per_gpu_s = sl->price_per_gpu_s,
                      .idle_timeout_s = s->traffic.idle_timeout_s,
                      .cold_start_s = s->traffic.cold_start_s,
                      .service_s = service };
    double rps[24];
    int n = st_day_spec_hours(s, rps);
    if (n == 0) {
        snprintf(err, errlen, "traffic day: the trace covers no hour of the day for at least %.0f minutes",
                 ST_HOURLY_MIN_COVER_S / 60);
        return -1;
    }
    return st_day_price(rps, n, 3600, &o, NULL, out, err, errlen);
}
