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

/* One `trace cost` command: its options, and what it reads and builds (freed by cost_free). */
typedef struct cost_cmd {
    st_cli_trace T;
    const char *model, *gpu, *by, *bill_path, *bucket, *csv_path, *json_path, *events_path, *event_name;
    const char *spec_path, *prices_path, *provider, *audit_dir;
    double price, width, usd_h;
    long replicas, seed;
    int raw_ids, have_spec;
    st_opts_result pr;
    char err[1024];
    st_attrib A;
    st_bill bill;
    st_recon R;
    st_spec spec;
    st_prices P;
    char **av;
    st_emu_config cfg;
    char price_what[300];
} cost_cmd;

/* The options of `trace cost` into opts (room for 40), their count in *n. */
static void cost_options(cost_cmd *x, st_opt *opts, int *n)
{
    st_cli_trace_opts(&x->T, opts, n);
    const st_opt more[] = {
        { "model", 0, ST_OPT_STR, &x->model, "MODEL", "the served model (vLLM flags after it pass through)", 0, 0, 0 },
        { "gpu", 0, ST_OPT_STR, &x->gpu, "NAME", "the GPU (H100, A100, ...)", 0, 0, 0 },
        { "spec", 0, ST_OPT_STR, &x->spec_path, "FILE",
          "an audit spec: its model, baseline flags, GPU, GPUs per replica and price", 0, 0, 0 },
        { "audit", 0, ST_OPT_STR, &x->audit_dir, "DIR",
          "an audit's or a prediction's folder: the spec it ran (as --spec)", 0, 0, 0 },
        { "by", 0, ST_OPT_STR, &x->by, "FIELD",
          "user (default), team, tag, feature, session, model, end_user, or any field of the log's rows "
          "(metadata.project)",
          0, 0, 0 },
        { "replicas", 0, ST_OPT_LONG, &x->replicas, "N",
          "replicas that served the log (rows round-robin, a session's turns to one; default 1)", 1, 4096, 0 },
        { "price-per-gpu-hour", 0, ST_OPT_DOUBLE, &x->price, "USD",
          "the GPU's price (else the spec's or the price list's)", 1e-9, 1e6, 0 },
        { "prices", 0, ST_OPT_STR, &x->prices_path, "FILE", "a price list CSV instead of the built-in one", 0, 0, 0 },
        { "provider", 0, ST_OPT_STR, &x->provider, "NAME", "the price list's provider (default: the lowest price)", 0,
          0, 0 },
        { "bill", 0, ST_OPT_STR, &x->bill_path, "FILE",
          "RunPod billing records (JSON) or a CSV of time,amount: split each bucket's amount to the cent", 0, 0, 0 },
        { "bucket", 0, ST_OPT_STR, &x->bucket, "hour|day", "the bill's bucket (default: from its times)", 0, 0, 0 },
        { "csv", 0, ST_OPT_STR, &x->csv_path, "FILE", "write the split (with --bill: the bill's lines) as CSV", 0, 0,
          0 },
        { "json", 0, ST_OPT_STR, &x->json_path, "FILE", "write the split (and the bill's lines) as JSON", 0, 0, 0 },
        { "events", 0, ST_OPT_STR, &x->events_path, "FILE",
          "with --bill: product-analytics batch events, one per tenant and bucket, stamped with the bucket's time", 0,
          0, 0 },
        { "raw-ids", 0, ST_OPT_FLAG, &x->raw_ids, NULL,
          "events: distinct_id is the tenant's name as it is (default FIELD:NAME)", 0, 0, 0 },
        { "event-name", 0, ST_OPT_STR, &x->event_name, "NAME", "the events' name (default servetune_tenant_cost)", 0, 0,
          0 },
        { "seed", 0, ST_OPT_LONG, &x->seed, "N", "seed of --trace-sample (default 0)", 0, 9.2e18, 0 },
        { 0 },
    };
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++)
        opts[(*n)++] = more[i];
}

/* The options that go together, the bill's bucket width, and the spec (--spec or --audit) with
 * the model, GPU and price it gives. 0, or the exit status. */
static int cost_check(cost_cmd *x)
{
    if (!x->by || !*x->by || strlen(x->by) >= sizeof x->A.by)
        return st_cli_usage_error("trace cost", "--by: expected a field name");
    if (x->bucket && !strcmp(x->bucket, "hour"))
        x->width = 3600;
    else if (x->bucket && !strcmp(x->bucket, "day"))
        x->width = 86400;
    else if (x->bucket)
        return st_cli_usage_error("trace cost", "--bucket: expected hour or day");
    if (x->events_path && !x->bill_path)
        return st_cli_usage_error("trace cost", "--events needs --bill (events are per billing bucket)");
    if (x->spec_path && x->audit_dir)
        return st_cli_usage_error("trace cost", "--spec and --audit are alternatives");
    if (x->spec_path || x->audit_dir) {
        if ((x->spec_path ? st_spec_load(x->spec_path, &x->spec, x->err, sizeof x->err)
                          : audit_spec(x->audit_dir, &x->spec, x->err, sizeof x->err)) < 0) {
            fprintf(stderr, "servetune trace cost: %s\n", x->err);
            return ST_EXIT_USAGE;
        }
        x->have_spec = 1;
        if (!x->model)
            x->model = x->spec.engine.model;
        if (!x->gpu)
            x->gpu = x->spec.hardware.gpu;
        if (x->price <= 0 && x->spec.hardware.price_per_gpu_hour > 0)
            x->price = x->spec.hardware.price_per_gpu_hour;
    }
    if (!x->model || !x->gpu)
        return st_cli_usage_error("trace cost", "the engine model needs --model and --gpu (or --spec, --audit)");
    return ST_EXIT_OK;
}

/* The engine model: `vllm serve MODEL --gpu GPU [spec flags] [flags]`. 0, or the exit status. */
static int cost_engine(cost_cmd *x)
{
    size_t nflags = x->have_spec ? (size_t)x->spec.engine.flags.n : 0;
    char **av = x->av = calloc((size_t)x->pr.nunknown + nflags + 8, sizeof *av);
    if (!av)
        return ST_EXIT_FAIL;
    int ac = 0;
    av[ac++] = "serve";
    av[ac++] = (char *)x->model;
    av[ac++] = "--gpu";
    av[ac++] = (char *)x->gpu;
    char tpbuf[16];
    if (x->have_spec && x->spec.hardware.gpus_per_replica > 1) {
        snprintf(tpbuf, sizeof tpbuf, "%d", x->spec.hardware.gpus_per_replica);
        av[ac++] = "--tensor-parallel-size";
        av[ac++] = tpbuf;
    }
    for (size_t i = 0; i < nflags; i++)
        av[ac++] = x->spec.engine.flags.v[i];
    for (int i = 0; i < x->pr.nunknown; i++)
        av[ac++] = x->pr.unknown[i];
    if (st_emu_config_of_argv(ac, av, x->gpu, &x->cfg, NULL, x->err, sizeof x->err)) {
        fprintf(stderr, "servetune trace cost: the engine model of %s on %s: %s\n", x->model, x->gpu, x->err);
        return ST_EXIT_USAGE;
    }
    return ST_EXIT_OK;
}

/* The price of one replica-hour (x->usd_h) and where it comes from. 0, or the exit status. */
static int cost_price(cost_cmd *x)
{
    if (x->price > 0) {
        snprintf(x->price_what, sizeof x->price_what, "$%.4g per GPU-hour%s", x->price,
                 x->have_spec && x->spec.hardware.price_per_gpu_hour == x->price ? " (the audit's spec)" : "");
    } else {
        int prc;
        if (x->prices_path) {
            size_t len;
            char *text = st_read_file(x->prices_path, COST_PRICES_FILE_MAX, &len, x->err, sizeof x->err);
            prc = text ? st_prices_parse(x->prices_path, text, len, &x->P, x->err, sizeof x->err) : -1;
            free(text);
        } else {
            prc = st_prices_builtin(&x->P, x->err, sizeof x->err);
        }
        const st_price *p = prc == 0 ? st_prices_pick(&x->P, x->gpu, ST_PRICE_ON_DEMAND, x->provider) : NULL;
        if (!p) {
            fprintf(stderr, "servetune trace cost: %s\n",
                    prc < 0 ? x->err : "no on-demand price for this GPU in the price list (give --price-per-gpu-hour)");
            return ST_EXIT_USAGE;
        }
        x->price = p->usd_per_gpu_hour;
        snprintf(x->price_what, sizeof x->price_what, "$%.4g per GPU-hour (%s, %s %s)", x->price, x->P.origin,
                 p->provider ? p->provider : "", p->gpu_key);
    }
    x->usd_h = x->price * (x->cfg.tp ? x->cfg.tp : 1);
    return ST_EXIT_OK;
}

/* --bill, read before the replay: a bad bill fails at once. 0, or the exit status. */
static int cost_bill(cost_cmd *x)
{
    size_t len;
    char *text = st_read_file(x->bill_path, ST_ATTRIB_BILL_MAX_BYTES, &len, x->err, sizeof x->err);
    if (!text || st_bill_parse(x->bill_path, text, len, x->width, &x->bill, x->err, sizeof x->err) < 0) {
        free(text);
        fprintf(stderr, "servetune trace cost: %s\n", x->err);
        return ST_EXIT_USAGE;
    }
    free(text);
    return ST_EXIT_OK;
}

/* The log read into the tenants' requests, then replayed through the engine model. 0, or the
 * exit status. */
static int cost_replay(cost_cmd *x, const char *path)
{
    st_attrib_init(&x->A, x->by);
    st_trace_opts o;
    if (st_cli_trace_resolve(&x->T, (uint64_t)x->seed, &o, x->err, sizeof x->err) < 0)
        return st_cli_usage_error("trace cost", x->err);
    st_trace_counts c;
    st_trace_format fmt;
    if (st_trace_read_file(path, &o, st_attrib_row_cb, &x->A, &c, &fmt, x->err, sizeof x->err) < 0) {
        fprintf(stderr, "servetune trace cost: %s\n", x->err);
        return ST_EXIT_USAGE;
    }
    char d[600];
    st_trace_counts_describe(&c, d, sizeof d);
    printf("%-22s %s (%s)\n%-22s %s\n", "Log", path, st_trace_format_name(fmt), "Read", d);
    if (!x->A.n_req) {
        fprintf(stderr, "servetune trace cost: %s: no requests kept\n", path);
        return ST_EXIT_FAIL;
    }
    if (x->A.n_tenants == 1 && !strcmp(x->A.t[0].name, ST_ATTRIB_UNATTRIBUTED))
        fprintf(stderr,
                "servetune trace cost: no row of %s carries '%s': every request is unattributed "
                "(docs/cost-attribution.md lists the fields)\n",
                path, x->by);
    if (st_attrib_replay(&x->A, &x->cfg, x->replicas > 0 ? (uint32_t)x->replicas : 1, x->err, sizeof x->err) < 0) {
        fprintf(stderr, "servetune trace cost: the replay: %s\n", x->err);
        return ST_EXIT_FAIL;
    }
    return ST_EXIT_OK;
}

/* The bill split over the tenants to the cent, printed per tenant over the whole bill. 0, or the
 * exit status. */
static int cost_reconcile(cost_cmd *x)
{
    const st_attrib *A = &x->A;
    const st_recon *R = &x->R;
    if (st_attrib_reconcile(&x->A, &x->bill, &x->R, x->err, sizeof x->err) < 0) {
        fprintf(stderr, "servetune trace cost: %s\n", x->err);
        return ST_EXIT_FAIL;
    }
    printf("\nBill %s: %u %s bucket%s, $%lld.%02lld; the log reaches %u of them; idle (unattributed) "
           "$%lld.%02lld\n",
           x->bill_path, x->bill.n, x->bill.width_s >= 86400 ? "daily" : "hourly", x->bill.n == 1 ? "" : "s",
           (long long)(R->total_cents / 100), (long long)(R->total_cents % 100), x->bill.n - R->uncovered,
           (long long)(R->idle_cents / 100), (long long)(R->idle_cents % 100));
    /* per tenant over the whole bill */
    for (uint32_t i = 0; i <= A->n_tenants; i++) {
        int64_t cents = 0;
        for (uint32_t k = 0; k < R->n; k++)
            if (R->v[k].tenant == i)
                cents += R->v[k].cents;
        printf("  %-24.24s $%lld.%02lld\n", i < A->n_tenants ? A->t[i].name : ST_ATTRIB_IDLE, (long long)(cents / 100),
               (long long)(cents % 100));
    }
    return ST_EXIT_OK;
}

/* --csv, --json and --events. 0, or ST_EXIT_FAIL when one could not be written. */
static int cost_write(cost_cmd *x)
{
    int status = ST_EXIT_OK;
    const char *bp = x->bill_path;
    if (x->csv_path &&
        write_text(x->csv_path, bp ? st_recon_csv(&x->A, &x->bill, &x->R) : st_attrib_csv(&x->A, x->usd_h), x->err,
                   sizeof x->err) < 0) {
        fprintf(stderr, "servetune trace cost: cannot write %s\n", x->err);
        status = ST_EXIT_FAIL;
    }
    if (x->json_path &&
        write_text(x->json_path, st_attrib_json(&x->A, x->usd_h, bp ? &x->bill : NULL, bp ? &x->R : NULL), x->err,
                   sizeof x->err) < 0) {
        fprintf(stderr, "servetune trace cost: cannot write %s\n", x->err);
        status = ST_EXIT_FAIL;
    }
    if (x->events_path && write_text(x->events_path, st_recon_events(&x->A, &x->bill, &x->R, x->event_name, x->raw_ids),
                                     x->err, sizeof x->err) < 0) {
        fprintf(stderr, "servetune trace cost: cannot write %s\n", x->err);
        status = ST_EXIT_FAIL;
    }
    return status;
}

/* `trace cost` once its options are in x: checked, the engine model and price set, the log
 * replayed and its cost split (and reconciled to a bill). The exit status. */
static int cost_run(cost_cmd *x, st_opt *opts, int argc, char **argv)
{
    int parsed = st_cli_parse("trace cost", opts, argc, argv, 1, &x->pr, usage, x->err, sizeof x->err);
    if (parsed >= 0)
        return parsed;
    if (x->pr.npos != 1)
        return st_cli_usage_error("trace cost", "expected one log FILE");
    const char *outs[3][2] = { { "--csv", x->csv_path }, { "--json", x->json_path }, { "--events", x->events_path } };
    for (int i = 0; i < 3; i++) {
        int rc = st_cli_refuse_input_as_output("trace cost", outs[i][0], outs[i][1], x->pr.pos[0], "the log it reads");
        if (rc == ST_EXIT_OK)
            rc = st_cli_refuse_input_as_output("trace cost", outs[i][0], outs[i][1], x->bill_path, "the bill it reads");
        if (rc != ST_EXIT_OK)
            return rc;
    }
    int status = cost_check(x);
    if (status == ST_EXIT_OK)
        status = cost_engine(x);
    if (status == ST_EXIT_OK)
        status = cost_price(x);
    if (status == ST_EXIT_OK && x->bill_path)
        status = cost_bill(x);
    if (status == ST_EXIT_OK)
        status = cost_replay(x, x->pr.pos[0]);
    if (status != ST_EXIT_OK)
        return status;
    print_table(&x->A, x->usd_h, x->price_what);
    if (x->bill_path && (status = cost_reconcile(x)) != ST_EXIT_OK)
        return status;
    return cost_write(x);
}

int st_cli_trace_cost(int argc, char **argv)
{
    cost_cmd x;
    memset(&x, 0, sizeof x);
    x.by = "user";
    x.event_name = "servetune_tenant_cost";
    st_opt opts[40];
    int n = 0;
    cost_options(&x, opts, &n);
    st_attrib_init(&x.A, "user");
    int status = cost_run(&x, opts, argc, argv);
    free(x.av);
    st_recon_free(&x.R);
    st_bill_free(&x.bill);
    st_attrib_free(&x.A);
    st_prices_free(&x.P);
    if (x.have_spec)
        st_spec_free(&x.spec);
    st_opts_result_free(&x.pr);
    return status;
}
