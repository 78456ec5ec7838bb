/* servetune trace cost LOG: GPU cost apportioned to tenants from the engine model's replay of
 * the log, beside the flat per-token and per-second splits, and reconciled to a bill
 * (docs/cost-attribution.md; the library is plan/attrib.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/spec.h"
#include "audit/store.h"
#include "cli/cli.h"
#include "core/file.h"
#include "core/opts.h"
#include "core/util.h"
#include "emu/flags.h"
#include "plan/attrib.h"
#include "plan/prices.h"

#define COST_PRICES_FILE_MAX ((size_t)16 << 20)

static void usage(const st_opt *opts)
{
    printf("usage: servetune trace cost LOG --model MODEL --gpu GPU [OPTIONS] [vLLM flags]\n"
           "       servetune trace cost LOG --spec AUDIT.yaml | --audit DIR [OPTIONS]\n\n"
           "Who pays for the GPU: replays the log's requests at their recorded times on the engine\n"
           "model of `vllm serve MODEL` on GPU, splits each engine step's time over the requests in it\n"
           "by their share of the step's work (prefill tokens; decodes with the KV cache they read),\n"
           "keeps idle time as its own line, and sums it by tenant (--by). Beside it: the flat\n"
           "per-token and per-second (request duration) splits, and how far each is from the\n"
           "model-based one. With --bill, the billed amount of each hour or day is split over the\n"
           "tenants' GPU time in it and the idle rest, to the cent. Rows without the --by field are\n"
           "counted as \"unattributed\", never dropped. Price: --price-per-gpu-hour, an audit spec's\n"
           "hardware.price_per_gpu_hour (--spec, or --audit DIR: the spec an audit ran), or the price\n"
           "list (docs/prices.md). docs/cost-attribution.md.\n\n"
           "Examples:\n"
           "  servetune trace cost spend_logs.json --model Qwen/Qwen3-8B --gpu H100 --by team\n"
           "  servetune trace cost spend_logs.json --spec audit.yaml --by feature --bill billing.json \\\n"
           "      --csv cost.csv --json cost.json --events events.json\n\n"
           "Options:\n");
    st_opts_usage(stdout, opts);
}

/* The spec an audit (or prediction) folder ran, from its results database. 0, or -1 with err. */
static int audit_spec(const char *dir, st_spec *out, char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, ST_STORE_FILE);
    st_store *st = NULL;
    if (st_store_open_file(path, ST_STORE_READONLY, &st, err, errlen) < 0)
        return -1;
    st_audit_row a;
    memset(&a, 0, sizeof a);
    int g = st_store_audit_get(st, &a), rc = -1;
    if (g < 0)
        st_errf(err, errlen, "%s: %s", path, st_store_errmsg(st));
    else if (g == 0 || !a.spec_text)
        st_errf(err, errlen, "%s holds no audit", path);
    else
        rc = st_spec_parse(a.spec_path ? a.spec_path : path, a.spec_text, strlen(a.spec_text), out, err, errlen) < 0
                 ? -1
                 : 0;
    if (g == 1)
        st_audit_row_free(&a);
    st_store_close(st);
    return rc;
}

static int write_text(const char *path, char *s, char *err, size_t errlen)
{
    if (!s) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    int rc = st_write_file_atomic(path, s, strlen(s), err, errlen);
    free(s);
    return rc;
}

static void print_table(const st_attrib *a, double usd_h, const char *price_what)
{
    double busy_usd = a->busy_s / 3600.0 * usd_h;
    printf("%-22s %u requests over %.1f s on %u replica%s; %llu engine steps\n", "Replay", a->n_req, a->span_s,
           a->replicas, a->replicas == 1 ? "" : "s", (unsigned long long)a->steps);
    printf("%-22s %.1f s busy, %.1f s idle (%.1f%% busy)\n", "Engine time", a->busy_s, a->idle_s,
           a->busy_s + a->idle_s > 0 ? 100 * a->busy_s / (a->busy_s + a->idle_s) : 0);
    printf("%-22s %s: $%.4f in all, $%.4f busy, $%.4f idle\n\n", "Price", price_what,
           (a->busy_s + a->idle_s) / 3600 * usd_h, busy_usd, a->idle_s / 3600 * usd_h);
    printf("%-24s %8s %10s %10s %9s %9s %9s %9s %9s\n", a->by, "requests", "in tok", "out tok", "GPU s", "model %",
           "tokens %", "durat. %", "$ model");
    double worst_tok = 0, worst_dur = 0;
    for (uint32_t i = 0; i < a->n_tenants; i++) {
        const st_attrib_tenant *t = &a->t[i];
        printf("%-24.24s %8llu %10llu %10llu %9.2f %8.2f%% %8.2f%% %8.2f%% %9.4f\n", t->name,
               (unsigned long long)t->requests, (unsigned long long)t->in_tokens, (unsigned long long)t->out_tokens,
               t->gpu_s, 100 * t->share_model, 100 * t->share_tokens, 100 * t->share_duration, t->gpu_s / 3600 * usd_h);
        if (fabs(t->share_tokens - t->share_model) > worst_tok)
            worst_tok = fabs(t->share_tokens - t->share_model);
        if (fabs(t->share_duration - t->share_model) > worst_dur)
            worst_dur = fabs(t->share_duration - t->share_model);
    }
    printf("%-24s %8s %10s %10s %9.2f %9s %9s %9s %9.4f\n", ST_ATTRIB_IDLE, "", "", "", a->idle_s, "", "", "",
           a->idle_s / 3600 * usd_h);
    printf("\nFlat splits vs the model: per-token off by up to %.1f points of the busy cost, per-second by up to "
           "%.1f points.\n",
           100 * worst_tok, 100 * worst_dur);
}

int st_cli_trace_cost(int argc, char **argv)
{
    st_cli_trace T;
    memset(&T, 0, sizeof T);
    const char *model = NULL, *gpu = NULL, *by = "user", *bill_path = NULL, *bucket = NULL, *csv_path = NULL;
    const char *json_path = NULL, *events_path = NULL, *event_name = "servetune_tenant_cost", *spec_path = NULL;
    const char *prices_path = NULL, *provider = NULL, *audit_dir = NULL;
    double price = 0;
    long replicas = 0, seed = 0;
    int raw_ids = 0;
    st_opt opts[40];
    int n = 0;
    st_cli_trace_opts(&T, opts, &n);
    const st_opt more[] = {
        { "model", 0, ST_OPT_STR, &model, "MODEL", "the served model (vLLM flags after it pass through)", 0, 0, 0 },
        { "gpu", 0, ST_OPT_STR, &gpu, "NAME", "the GPU (H100, A100, ...)", 0, 0, 0 },
        { "spec", 0, ST_OPT_STR, &spec_path, "FILE",
          "an audit spec: its model, baseline flags, GPU, GPUs per replica and price", 0, 0, 0 },
        { "audit", 0, ST_OPT_STR, &audit_dir, "DIR", "an audit's or a prediction's folder: the spec it ran (as --spec)",
          0, 0, 0 },
        { "by", 0, ST_OPT_STR, &by, "FIELD",
          "user (default), team, tag, feature, session, model, end_user, or any field of the log's rows "
          "(metadata.project)",
          0, 0, 0 },
        { "replicas", 0, ST_OPT_LONG, &replicas, "N",
          "replicas that served the log (rows round-robin, a session's turns to one; default 1)", 1, 4096, 0 },
        { "price-per-gpu-hour", 0, ST_OPT_DOUBLE, &price, "USD",
          "the GPU's price (else the spec's or the price list's)", 1e-9, 1e6, 0 },
        { "prices", 0, ST_OPT_STR, &prices_path, "FILE", "a price list CSV instead of the built-in one", 0, 0, 0 },
        { "provider", 0, ST_OPT_STR, &provider, "NAME", "the price list's provider (default: the lowest price)", 0, 0,
          0 },
        { "bill", 0, ST_OPT_STR, &bill_path, "FILE",
          "RunPod billing records (JSON) or a CSV of time,amount: split each bucket's amount to the cent", 0, 0, 0 },
        { "bucket", 0, ST_OPT_STR, &bucket, "hour|day", "the bill's bucket (default: from its times)", 0, 0, 0 },
        { "csv", 0, ST_OPT_STR, &csv_path, "FILE", "write the split (with --bill: the bill's lines) as CSV", 0, 0, 0 },
        { "json", 0, ST_OPT_STR, &json_path, "FILE", "write the split (and the bill's lines) as JSON", 0, 0, 0 },
        { "events", 0, ST_OPT_STR, &events_path, "FILE",
          "with --bill: product-analytics batch events, one per tenant and bucket, stamped with the bucket's time", 0,
          0, 0 },
        { "raw-ids", 0, ST_OPT_FLAG, &raw_ids, NULL,
          "events: distinct_id is the tenant's name as it is (default FIELD:NAME)", 0, 0, 0 },
        { "event-name", 0, ST_OPT_STR, &event_name, "NAME", "the events' name (default servetune_tenant_cost)", 0, 0,
          0 },
        { "seed", 0, ST_OPT_LONG, &seed, "N", "seed of --trace-sample (default 0)", 0, 9.2e18, 0 },
        { 0 },
    };
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++)
        opts[n++] = more[i];
    st_opts_result pr;
    char err[1024];
    int status = ST_EXIT_OK;
    st_attrib A;
    st_attrib_init(&A, "user");
    st_bill bill;
    memset(&bill, 0, sizeof bill);
    st_recon R;
    memset(&R, 0, sizeof R);
    st_spec spec;
    int have_spec = 0;
    st_prices P;
    memset(&P, 0, sizeof P);
    char **av = NULL;
    if (st_opts_parse(opts, argc - 1, argv + 1, 1, &pr, err, sizeof err) < 0) {
        status = st_cli_usage_error("trace cost", err);
        goto out;
    }
    if (pr.help) {
        usage(opts);
        goto out;
    }
    if (pr.npos != 1) {
        status = st_cli_usage_error("trace cost", "expected one log FILE");
        goto out;
    }
    if (!by || !*by || strlen(by) >= sizeof A.by) {
        status = st_cli_usage_error("trace cost", "--by: expected a field name");
        goto out;
    }
    double width = 0;
    if (bucket && !strcmp(bucket, "hour"))
        width = 3600;
    else if (bucket && !strcmp(bucket, "day"))
        width = 86400;
    else if (bucket) {
        status = st_cli_usage_error("trace cost", "--bucket: expected hour or day");
        goto out;
    }
    if (events_path && !bill_path) {
        status = st_cli_usage_error("trace cost", "--events needs --bill (events are per billing bucket)");
        goto out;
    }
    if (spec_path && audit_dir) {
        status = st_cli_usage_error("trace cost", "--spec and --audit are alternatives");
        goto out;
    }
    if (spec_path || audit_dir) {
        if ((spec_path ? st_spec_load(spec_path, &spec, err, sizeof err)
                       : audit_spec(audit_dir, &spec, err, sizeof err)) < 0) {
            fprintf(stderr, "servetune trace cost: %s\n", err);
            status = ST_EXIT_USAGE;
            goto out;
        }
        have_spec = 1;
        if (!model)
            model = spec.engine.model;
        if (!gpu)
            gpu = spec.hardware.gpu;
        if (price <= 0 && spec.hardware.price_per_gpu_hour > 0)
            price = spec.hardware.price_per_gpu_hour;
    }
    if (!model || !gpu) {
        status = st_cli_usage_error("trace cost", "the engine model needs --model and --gpu (or --spec, --audit)");
        goto out;
    }
    /* the engine model: `vllm serve MODEL --gpu GPU [spec flags] [flags]` */
    size_t nflags = have_spec ? (size_t)spec.engine.flags.n : 0;
    av = calloc((size_t)pr.nunknown + nflags + 8, sizeof *av);
    if (!av) {
        status = ST_EXIT_FAIL;
        goto out;
    }
    int ac = 0;
    av[ac++] = "serve";
    av[ac++] = (char *)model;
    av[ac++] = "--gpu";
    av[ac++] = (char *)gpu;
    char tpbuf[16];
    if (have_spec && spec.hardware.gpus_per_replica > 1) {
        snprintf(tpbuf, sizeof tpbuf, "%d", spec.hardware.gpus_per_replica);
        av[ac++] = "--tensor-parallel-size";
        av[ac++] = tpbuf;
    }
    for (size_t i = 0; i < nflags; i++)
        av[ac++] = spec.engine.flags.v[i];
    for (int i = 0; i < pr.nunknown; i++)
        av[ac++] = pr.unknown[i];
    st_emu_config cfg;
    if (st_emu_config_of_argv(ac, av, gpu, &cfg, NULL, err, sizeof err)) {
        fprintf(stderr, "servetune trace cost: the engine model of %s on %s: %s\n", model, gpu, err);
        status = ST_EXIT_USAGE;
        goto out;
    }
    /* the price of one replica-hour */
    char price_what[300];
    if (price > 0) {
        snprintf(price_what, sizeof price_what, "$%.4g per GPU-hour%s", price,
                 have_spec && spec.hardware.price_per_gpu_hour == price ? " (the audit's spec)" : "");
    } else {
        int prc;
        if (prices_path) {
            size_t len;
            char *text = st_read_file(prices_path, COST_PRICES_FILE_MAX, &len, err, sizeof err);
            prc = text ? st_prices_parse(prices_path, text, len, &P, err, sizeof err) : -1;
            free(text);
        } else {
            prc = st_prices_builtin(&P, err, sizeof err);
        }
        const st_price *p = prc == 0 ? st_prices_pick(&P, gpu, ST_PRICE_ON_DEMAND, provider) : NULL;
        if (!p) {
            fprintf(stderr, "servetune trace cost: %s\n",
                    prc < 0 ? err : "no on-demand price for this GPU in the price list (give --price-per-gpu-hour)");
            status = ST_EXIT_USAGE;
            goto out;
        }
        price = p->usd_per_gpu_hour;
        snprintf(price_what, sizeof price_what, "$%.4g per GPU-hour (%s, %s %s)", price, P.origin,
                 p->provider ? p->provider : "", p->gpu_key);
    }
    double usd_h = price * (cfg.tp ? cfg.tp : 1);
    if (bill_path) { /* read before the replay: a bad bill fails at once */
        size_t len;
        char *text = st_read_file(bill_path, ST_ATTRIB_BILL_MAX_BYTES, &len, err, sizeof err);
        if (!text || st_bill_parse(bill_path, text, len, width, &bill, err, sizeof err) < 0) {
            free(text);
            fprintf(stderr, "servetune trace cost: %s\n", err);
            status = ST_EXIT_USAGE;
            goto out;
        }
        free(text);
    }
    st_attrib_init(&A, by);
    st_trace_opts o;
    if (st_cli_trace_resolve(&T, (uint64_t)seed, &o, err, sizeof err) < 0) {
        status = st_cli_usage_error("trace cost", err);
        goto out;
    }
    st_trace_counts c;
    st_trace_format fmt;
    const char *path = pr.pos[0];
    if (st_trace_read_file(path, &o, st_attrib_row_cb, &A, &c, &fmt, err, sizeof err) < 0) {
        fprintf(stderr, "servetune trace cost: %s\n", err);
        status = ST_EXIT_USAGE;
        goto out;
    }
    char d[600];
    st_trace_counts_describe(&c, d, sizeof d);
    printf("%-22s %s (%s)\n%-22s %s\n", "Log", path, st_trace_format_name(fmt), "Read", d);
    if (!A.n_req) {
        fprintf(stderr, "servetune trace cost: %s: no requests kept\n", path);
        status = ST_EXIT_FAIL;
        goto out;
    }
    if (A.n_tenants == 1 && !strcmp(A.t[0].name, ST_ATTRIB_UNATTRIBUTED))
        fprintf(stderr,
                "servetune trace cost: no row of %s carries '%s': every request is unattributed "
                "(docs/cost-attribution.md lists the fields)\n",
                path, by);
    if (st_attrib_replay(&A, &cfg, replicas > 0 ? (uint32_t)replicas : 1, err, sizeof err) < 0) {
        fprintf(stderr, "servetune trace cost: the replay: %s\n", err);
        status = ST_EXIT_FAIL;
        goto out;
    }
    print_table(&A, usd_h, price_what);
    if (bill_path) {
        if (st_attrib_reconcile(&A, &bill, &R, err, sizeof err) < 0) {
            fprintf(stderr, "servetune trace cost: %s\n", err);
            status = ST_EXIT_FAIL;
            goto out;
        }
        printf("\nBill %s: %u %s bucket%s, $%lld.%02lld; the log reaches %u of them; idle (unattributed) "
               "$%lld.%02lld\n",
               bill_path, bill.n, bill.width_s >= 86400 ? "daily" : "hourly", bill.n == 1 ? "" : "s",
               (long long)(R.total_cents / 100), (long long)(R.total_cents % 100), bill.n - R.uncovered,
               (long long)(R.idle_cents / 100), (long long)(R.idle_cents % 100));
        /* per tenant over the whole bill */
        for (uint32_t i = 0; i <= A.n_tenants; i++) {
            int64_t cents = 0;
            for (uint32_t k = 0; k < R.n; k++)
                if (R.v[k].tenant == i)
                    cents += R.v[k].cents;
            printf("  %-24.24s $%lld.%02lld\n", i < A.n_tenants ? A.t[i].name : ST_ATTRIB_IDLE,
                   (long long)(cents / 100), (long long)(cents % 100));
        }
    }
    if (csv_path &&
        write_text(csv_path, bill_path ? st_recon_csv(&A, &bill, &R) : st_attrib_csv(&A, usd_h), err, sizeof err) < 0) {
        fprintf(stderr, "servetune trace cost: cannot write %s\n", err);
        status = ST_EXIT_FAIL;
    }
    if (json_path && write_text(json_path, st_attrib_json(&A, usd_h, bill_path ? &bill : NULL, bill_path ? &R : NULL),
                                err, sizeof err) < 0) {
        fprintf(stderr, "servetune trace cost: cannot write %s\n", err);
        status = ST_EXIT_FAIL;
    }
    if (events_path &&
        write_text(events_path, st_recon_events(&A, &bill, &R, event_name, raw_ids), err, sizeof err) < 0) {
        fprintf(stderr, "servetune trace cost: cannot write %s\n", err);
        status = ST_EXIT_FAIL;
    }
out:
    free(av);
    st_recon_free(&R);
    st_bill_free(&bill);
    st_attrib_free(&A);
    st_prices_free(&P);
    if (have_spec)
        st_spec_free(&spec);
    st_opts_result_free(&pr);
    return status;
}
