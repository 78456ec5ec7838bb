/* servetune gguf: writes a GGUF model of a real architecture's shapes with seeded random weights
 * and a real tokenizer (engine/modelgen.h), for timing llama.cpp without downloading weights;
 * --show describes any GGUF file. docs/llamacpp.md. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/clock.h"
#include "core/file.h"
#include "core/opts.h"
#include "engine/gguf.h"
#include "engine/modelgen.h"

#define VOCAB_MAX_BYTES ((size_t)64 << 20)   /* the shipped vocab-only files are under 8 MB */
#define SHOW_PREFIX_BYTES ((size_t)64 << 20) /* --show reads the header from this much of a file */
#define SHOW_MAX_KEYS 40                     /* --show lists this many scalar keys at most */

static void help(const st_opt *opts)
{
    char presets[2048];
    st_mg_presets(presets, sizeof presets);
    printf("usage: servetune gguf --arch ARCH --size SIZE --vocab VOCAB.gguf -o OUT.gguf [--seed N] [--type f16|f32]\n"
           "                      [--n-embd N] [--n-layer N] [--n-head N] [--n-head-kv N] [--n-ff N] [--ctx N] ...\n"
           "       servetune gguf --show FILE.gguf\n"
           "       servetune gguf --list\n\n"
           "Writes a GGUF model that llama.cpp loads and runs: the tensor names, shapes and hyperparameters of a\n"
           "real architecture (Llama or Qwen2), the tokenizer copied from a vocab-only GGUF (llama.cpp ships them\n"
           "in models/: ggml-vocab-llama-spm.gguf, ggml-vocab-qwen2.gguf, ...), and random weights from a seeded\n"
           "generator (uniform, standard deviation 0.02; norms 1). It is for timing a serving engine, not for\n"
           "text: the same kernels run as for trained weights of that shape. Same arguments, same bytes.\n"
           "Quantized variants (q8_0, q4_0): llama-quantize OUT.gguf OUT-q8_0.gguf q8_0 (scripts/make-models).\n\n"
           "Options:\n");
    st_opts_usage(stdout, opts);
    printf("\nPresets (the size counts the parameters with the architecture's own vocabulary):\n%s", presets);
    printf("\nExamples:\n"
           "  servetune gguf --arch llama --size 30M --vocab ggml-vocab-llama-spm.gguf -o llama-30m.gguf\n"
           "  servetune gguf --arch qwen2 --size 30M --vocab ggml-vocab-qwen2.gguf --n-layer 8 -o q.gguf --seed 7\n"
           "  servetune gguf --show llama-30m.gguf\n"
           "Exit codes: 0 written; 1 the vocabulary could not be read or the file not written; 2 bad arguments.\n");
}

/* The first min(size, max) bytes of path; *file_size gets the whole size. */
static unsigned char *read_prefix(const char *path, size_t max, size_t *len, uint64_t *file_size, char *err,
                                  size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file", path);
        fclose(f);
        return NULL;
    }
    *file_size = (uint64_t)st.st_size;
    size_t want = (uint64_t)st.st_size < max ? (size_t)st.st_size : max;
    unsigned char *p = malloc(want ? want : 1);
    if (!p || fread(p, 1, want, f) != want) {
        snprintf(err, errlen, "%s: %s", path, p ? "short read" : "out of memory");
        free(p);
        fclose(f);
        return NULL;
    }
    fclose(f);
    *len = want;
    return p;
}

static void show_value(const st_gguf_value *v)
{
    switch (v->type) {
    case ST_GGUF_STR:
        printf("%.*s%s", v->str_len > 80 ? 80 : (int)v->str_len, v->str, v->str_len > 80 ? "..." : "");
        break;
    case ST_GGUF_ARR: printf("[%" PRIu64 " elements]", v->n); break;
    case ST_GGUF_F32:
    case ST_GGUF_F64: printf("%g", v->f); break;
    case ST_GGUF_I8:
    case ST_GGUF_I16:
    case ST_GGUF_I32:
    case ST_GGUF_I64: printf("%" PRId64, v->i); break;
    default: printf("%" PRIu64, v->u); break;
    }
}

static int show(const char *path)
{
    char err[512];
    size_t len;
    uint64_t size;
    unsigned char *p = read_prefix(path, SHOW_PREFIX_BYTES, &len, &size, err, sizeof err);
    st_gguf g;
    if (!p || st_gguf_parse(p, len, size, &g, err, sizeof err)) {
        fprintf(stderr, "servetune gguf: %s%s%s\n", p ? path : "", p ? ": " : "", err);
        free(p);
        return ST_EXIT_FAIL;
    }
    free(p);
    printf("%s: GGUF v%" PRIu32 ", %zu metadata keys, %zu tensors, %" PRIu64 " bytes (data at %" PRIu64 ")\n", path,
           g.version, g.n_kv, g.n_t, size, g.data_offset);
    int shown = 0;
    for (size_t i = 0; i < g.n_kv && shown < SHOW_MAX_KEYS; i++) {
        printf("  %-44s ", g.kv[i].key);
        show_value(&g.kv[i].v);
        printf("\n");
        shown++;
    }
    if (g.n_kv > (size_t)shown)
        printf("  ... %zu more keys\n", g.n_kv - (size_t)shown);
    uint64_t params = 0, count[64] = { 0 }, bytes[64] = { 0 };
    for (size_t i = 0; i < g.n_t; i++) {
        params += st_gguf_tensor_elems(&g.t[i]);
        if (g.t[i].type < 64) {
            count[g.t[i].type]++;
            bytes[g.t[i].type] += g.t[i].nbytes;
        }
    }
    printf("  parameters %" PRIu64 " (%.1fM)\n", params, (double)params / 1e6);
    for (uint32_t t = 0; t < 64; t++)
        if (count[t]) {
            const char *tn = "?";
            st_ggml_type_info(t, &tn, NULL, NULL);
            printf("  %-6s %4" PRIu64 " tensors, %" PRIu64 " bytes\n", tn, count[t], bytes[t]);
        }
    st_gguf_free(&g);
    return ST_EXIT_OK;
}

static int sink_file(void *ctx, const void *p, size_t n) { return fwrite(p, 1, n, ctx) == n ? 0 : -1; }

/* One `gguf` command: its options and its error text. */
typedef struct gguf_cmd {
    const char *arch, *size, *vocab_path, *out, *type, *show_path, *name;
    long seed, n_embd, n_layer, n_head, n_head_kv, n_ff, ctx, tied;
    double rope_base, norm_eps, logit_scale;
    int list, quiet;
    st_opts_result res;
    char err[1024];
} gguf_cmd;

/* The options of `gguf` into opts (room for GGUF_OPTS_MAX). */
#define GGUF_OPTS_MAX 24
static void gguf_options(gguf_cmd *x, st_opt *opts)
{
    const st_opt o[] = {
        { "arch", 0, ST_OPT_STR, &x->arch, "ARCH", "llama or qwen2", 0, 0, 0 },
        { "size", 0, ST_OPT_STR, &x->size, "SIZE", "a preset of that architecture (see below), e.g. 30M", 0, 0, 0 },
        { "vocab", 0, ST_OPT_STR, &x->vocab_path, "FILE",
          "a GGUF file with the tokenizer (tokenizer.* keys are copied)", 0, 0, 0 },
        { "output", 'o', ST_OPT_STR, &x->out, "FILE",
          "where to write the model (written to FILE.tmp, then renamed; an existing FILE that is a FIFO, device or "
          "symlink is refused)",
          0, 0, 0 },
        { "seed", 0, ST_OPT_LONG, &x->seed, "N", "seed of the weights (1)", 0, 9.0e18, 0 },
        { "type", 0, ST_OPT_STR, &x->type, "TYPE", "f16 or f32 for the 2-D weights (f16); norms and biases are f32", 0,
          0, 0 },
        { "n-embd", 0, ST_OPT_LONG, &x->n_embd, "N", "override: embedding length", 1, ST_MG_MAX_EMBD, 0 },
        { "n-layer", 0, ST_OPT_LONG, &x->n_layer, "N", "override: number of blocks", 1, ST_MG_MAX_LAYER, 0 },
        { "n-head", 0, ST_OPT_LONG, &x->n_head, "N", "override: attention heads", 1, ST_MG_MAX_HEAD, 0 },
        { "n-head-kv", 0, ST_OPT_LONG, &x->n_head_kv, "N", "override: key/value heads", 1, ST_MG_MAX_HEAD, 0 },
        { "n-ff", 0, ST_OPT_LONG, &x->n_ff, "N", "override: feed-forward length", 1, ST_MG_MAX_FF, 0 },
        { "ctx", 0, ST_OPT_LONG, &x->ctx, "N", "override: context length the model declares", 16, ST_MG_MAX_CTX, 0 },
        { "rope-base", 0, ST_OPT_DOUBLE, &x->rope_base, "F", "override: rope frequency base", 1, 1e9, 0 },
        { "norm-eps", 0, ST_OPT_DOUBLE, &x->norm_eps, "F", "override: RMS norm epsilon", 1e-12, 0.1, 0 },
        { "logit-scale", 0, ST_OPT_DOUBLE, &x->logit_scale, "F",
          "output_norm's weights (1): multiplies the logits; 20-30 makes the next-token distributions as "
          "concentrated as a trained model's (for measuring quantization drift, docs/quality.md)",
          0.01, 1000, 0 },
        { "tied", 0, ST_OPT_LONG, &x->tied, "0|1", "override: 1 = output reuses token_embd, 0 = its own output.weight",
          0, 1, 0 },
        { "name", 0, ST_OPT_STR, &x->name, "TEXT", "general.name (\"servetune random ARCH SIZE seed N\")", 0, 0, 0 },
        { "show", 0, ST_OPT_STR, &x->show_path, "FILE",
          "describe a GGUF file (metadata, tensor types, parameters) and exit", 0, 0, 0 },
        { "list", 0, ST_OPT_FLAG, &x->list, NULL, "list the presets and exit", 0, 0, 0 },
        { "quiet", 'q', ST_OPT_FLAG, &x->quiet, NULL, "print nothing on success", 0, 0, 0 },
        { NULL, 0, 0, NULL, NULL, NULL, 0, 0, 0 },
    };
    _Static_assert(sizeof o / sizeof o[0] <= GGUF_OPTS_MAX, "gguf's options fit");
    memcpy(opts, o, sizeof o);
}

/* The model's shape: the preset with the overrides, checked, and the 2-D weights' type. 0, or
 * the exit status. */
static int gguf_shape(gguf_cmd *x, st_mg_shape *s, uint32_t *wtype)
{
    if (st_mg_preset(x->arch, x->size, s, x->err, sizeof x->err))
        return st_cli_usage_error("gguf", x->err);
    if (x->n_embd > 0)
        s->n_embd = (uint32_t)x->n_embd;
    if (x->n_layer > 0)
        s->n_layer = (uint32_t)x->n_layer;
    if (x->n_head > 0)
        s->n_head = (uint32_t)x->n_head;
    if (x->n_head_kv > 0)
        s->n_head_kv = (uint32_t)x->n_head_kv;
    if (x->n_ff > 0)
        s->n_ff = (uint32_t)x->n_ff;
    if (x->ctx > 0)
        s->n_ctx = (uint32_t)x->ctx;
    if (x->rope_base > 0)
        s->rope_base = x->rope_base;
    if (x->norm_eps > 0)
        s->norm_eps = x->norm_eps;
    if (x->tied >= 0)
        s->tied = (int)x->tied;
    if (st_mg_check(s, x->err, sizeof x->err))
        return st_cli_usage_error("gguf", x->err);
    if (!strcmp(x->type, "f16"))
        *wtype = ST_GGML_F16;
    else if (!strcmp(x->type, "f32"))
        *wtype = ST_GGML_F32;
    else
        return st_cli_usage_error("gguf", "--type must be f16 or f32");
    return ST_EXIT_OK;
}

/* The model g written to -o with its seeded weights, its size in *fbytes. Written safely:
 * OUT.tmp (O_EXCL | O_NOFOLLOW) renamed over OUT; a FIFO, device or symlink at OUT is refused,
 * never replaced. 0, or -1 (said on stderr). */
static int gguf_write(gguf_cmd *x, const st_gguf *g, long *fbytes)
{
    if (st_mkdir_parents(x->out, x->err, sizeof x->err)) {
        fprintf(stderr, "servetune gguf: %s\n", x->err);
        return -1;
    }
    st_outfile of;
    if (st_outfile_open(&of, x->out, x->err, sizeof x->err)) {
        fprintf(stderr, "servetune gguf: %s\n", x->err);
        return -1;
    }
    int dfd = dup(of.fd);
    FILE *f = dfd >= 0 ? fdopen(dfd, "wb") : NULL;
    if (!f) {
        fprintf(stderr, "servetune gguf: %s: %s\n", x->out, strerror(errno));
        if (dfd >= 0)
            close(dfd);
        st_outfile_abort(&of);
        return -1;
    }
    st_mg_filler fill;
    st_mg_filler_init(&fill, g, (uint64_t)x->seed);
    fill.logit_scale = (float)x->logit_scale;
    int wrc = st_gguf_write(g, st_mg_fill, &fill, sink_file, f, x->err, sizeof x->err);
    *fbytes = ftell(f);
    if (fclose(f) && !wrc) {
        snprintf(x->err, sizeof x->err, "closing: %s", strerror(errno));
        wrc = -1;
    }
    if (wrc) {
        st_outfile_abort(&of);
        fprintf(stderr, "servetune gguf: %s: %s\n", x->out, x->err);
    } else if (st_outfile_commit(&of, x->err, sizeof x->err)) {
        fprintf(stderr, "servetune gguf: %s\n", x->err); /* err names the file */
        wrc = -1;
    }
    return wrc;
}

/* The model built from the shape and the vocabulary's tokenizer, written, and described. The
 * exit status. */
static int gguf_make(gguf_cmd *x, const st_mg_shape *s, uint32_t wtype)
{
    if (st_outfile_check(x->out, x->err, sizeof x->err)) { /* said before the model is built */
        fprintf(stderr, "servetune gguf: %s\n", x->err);
        return ST_EXIT_FAIL;
    }
    int refused = st_cli_refuse_input_as_output("gguf", "-o", x->out, x->vocab_path, "the vocabulary it reads");
    if (refused != ST_EXIT_OK)
        return refused;
    st_ns t0 = st_now();
    size_t vlen;
    st_gguf vocab, g;
    char *vbytes = st_read_file(x->vocab_path, VOCAB_MAX_BYTES, &vlen, x->err, sizeof x->err);
    if (!vbytes || st_gguf_parse(vbytes, vlen, vlen, &vocab, x->err, sizeof x->err)) {
        fprintf(stderr, "servetune gguf: %s%s%s\n", vbytes ? x->vocab_path : "", vbytes ? ": " : "", x->err);
        free(vbytes);
        return ST_EXIT_FAIL;
    }
    char gname[256];
    const char *name = x->name;
    if (!name) {
        snprintf(gname, sizeof gname, "servetune random %s %s seed %ld", x->arch, x->size, x->seed);
        name = gname;
    }
    uint64_t n_vocab = 0;
    int rc = ST_EXIT_FAIL;
    long fbytes = 0;
    if (st_mg_build(s, &vocab, wtype, name, &g, &n_vocab, x->err, sizeof x->err)) {
        fprintf(stderr, "servetune gguf: %s: %s\n", x->vocab_path, x->err);
    } else {
        if (!gguf_write(x, &g, &fbytes))
            rc = ST_EXIT_OK;
        if (rc == ST_EXIT_OK && !x->quiet)
            printf("%s: %s %s, %.1fM parameters (n_embd %" PRIu32 ", n_layer %" PRIu32 ", n_head %" PRIu32 "/%" PRIu32
                   " kv, n_ff %" PRIu32 ", ctx %" PRIu32 ", vocab %" PRIu64 "), %" PRIu64
                   " tensors %s, %.1f MB, seed %ld, %.2f s\n",
                   x->out, x->arch, x->size, (double)st_mg_params(s, n_vocab) / 1e6, s->n_embd, s->n_layer, s->n_head,
                   s->n_head_kv, s->n_ff, s->n_ctx, n_vocab, (uint64_t)g.n_t, x->type, (double)fbytes / 1e6, x->seed,
                   st_ns_to_s(st_now() - t0));
        st_gguf_free(&g);
    }
    free(vbytes);
    st_gguf_free(&vocab);
    return rc;
}

/* `gguf` once its options are in x: --list, --show, or a model made. The exit status. */
static int gguf_run(gguf_cmd *x, const st_opt *opts, int argc, char **argv)
{
    int parsed = st_cli_parse("gguf", opts, argc, argv, 0, &x->res, help, x->err, sizeof x->err);
    if (parsed >= 0)
        return parsed;
    if (x->res.npos)
        return st_cli_usage_error("gguf", "unexpected argument (options only)");
    if (x->list) {
        char presets[2048];
        st_mg_presets(presets, sizeof presets);
        fputs(presets, stdout);
        return ST_EXIT_OK;
    }
    if (x->show_path)
        return show(x->show_path);
    if (!x->arch || !x->size || !x->vocab_path || !x->out)
        return st_cli_usage_error("gguf", "--arch, --size, --vocab and -o are required");
    st_mg_shape s;
    uint32_t wtype = ST_GGML_F16;
    int rc = gguf_shape(x, &s, &wtype);
    return rc == ST_EXIT_OK ? gguf_make(x, &s, wtype) : rc;
}

int cmd_gguf(int argc, char **argv)
{
    gguf_cmd x;
    memset(&x, 0, sizeof x);
    x.type = "f16";
    x.seed = 1;
    x.n_embd = x.n_layer = x.n_head = x.n_head_kv = x.n_ff = x.ctx = x.tied = -1;
    x.rope_base = x.norm_eps = -1;
    x.logit_scale = 1;
    st_opt opts[GGUF_OPTS_MAX];
    gguf_options(&x, opts);
    int rc = gguf_run(&x, opts, argc, argv);
    st_opts_result_free(&x.res);
    return rc;
}
