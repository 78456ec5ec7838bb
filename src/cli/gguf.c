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

int cmd_gguf(int argc, char **argv)
{
    const char *arch = NULL, *size = NULL, *vocab_path = NULL, *out = NULL, *type = "f16", *show_path = NULL,
               *name = NULL;
    long seed = 1, n_embd = -1, n_layer = -1, n_head = -1, n_head_kv = -1, n_ff = -1, ctx = -1, tied = -1;
    double rope_base = -1, norm_eps = -1, logit_scale = 1;
    int list = 0, quiet = 0;
    const st_opt opts[] = {
        { "arch", 0, ST_OPT_STR, &arch, "ARCH", "llama or qwen2", 0, 0, 0 },
        { "size", 0, ST_OPT_STR, &size, "SIZE", "a preset of that architecture (see below), e.g. 30M", 0, 0, 0 },
        { "vocab", 0, ST_OPT_STR, &vocab_path, "FILE", "a GGUF file with the tokenizer (tokenizer.* keys are copied)",
          0, 0, 0 },
        { "output", 'o', ST_OPT_STR, &out, "FILE",
          "where to write the model (written to FILE.tmp, then renamed; an existing FILE that is a FIFO, device or "
          "symlink is refused)",
          0, 0, 0 },
        { "seed", 0, ST_OPT_LONG, &seed, "N", "seed of the weights (1)", 0, 9.0e18, 0 },
        { "type", 0, ST_OPT_STR, &type, "TYPE", "f16 or f32 for the 2-D weights (f16); norms and biases are f32", 0, 0,
          0 },
        { "n-embd", 0, ST_OPT_LONG, &n_embd, "N", "override: embedding length", 1, ST_MG_MAX_EMBD, 0 },
        { "n-layer", 0, ST_OPT_LONG, &n_layer, "N", "override: number of blocks", 1, ST_MG_MAX_LAYER, 0 },
        { "n-head", 0, ST_OPT_LONG, &n_head, "N", "override: attention heads", 1, ST_MG_MAX_HEAD, 0 },
        { "n-head-kv", 0, ST_OPT_LONG, &n_head_kv, "N", "override: key/value heads", 1, ST_MG_MAX_HEAD, 0 },
        { "n-ff", 0, ST_OPT_LONG, &n_ff, "N", "override: feed-forward length", 1, ST_MG_MAX_FF, 0 },
        { "ctx", 0, ST_OPT_LONG, &ctx, "N", "override: context length the model declares", 16, ST_MG_MAX_CTX, 0 },
        { "rope-base", 0, ST_OPT_DOUBLE, &rope_base, "F", "override: rope frequency base", 1, 1e9, 0 },
        { "norm-eps", 0, ST_OPT_DOUBLE, &norm_eps, "F", "override: RMS norm epsilon", 1e-12, 0.1, 0 },
        { "logit-scale", 0, ST_OPT_DOUBLE, &logit_scale, "F",
          "output_norm's weights (1): multiplies the logits; 20-30 makes the next-token distributions as "
          "concentrated as a trained model's (for measuring quantization drift, docs/quality.md)",
          0.01, 1000, 0 },
        { "tied", 0, ST_OPT_LONG, &tied, "0|1", "override: 1 = output reuses token_embd, 0 = its own output.weight", 0,
          1, 0 },
        { "name", 0, ST_OPT_STR, &name, "TEXT", "general.name (\"servetune random ARCH SIZE seed N\")", 0, 0, 0 },
        { "show", 0, ST_OPT_STR, &show_path, "FILE",
          "describe a GGUF file (metadata, tensor types, parameters) and exit", 0, 0, 0 },
        { "list", 0, ST_OPT_FLAG, &list, NULL, "list the presets and exit", 0, 0, 0 },
        { "quiet", 'q', ST_OPT_FLAG, &quiet, NULL, "print nothing on success", 0, 0, 0 },
        { NULL, 0, 0, NULL, NULL, NULL, 0, 0, 0 },
    };
    st_opts_result res;
    char err[1024] = "";
    int rc = ST_EXIT_OK;
    char *vbytes = NULL;
    int have_vocab = 0, have_g = 0;
    st_gguf vocab, g;
    if (st_opts_parse(opts, argc - 1, argv + 1, 0, &res, err, sizeof err)) {
        rc = st_cli_usage_error("gguf", err);
        goto out;
    }
    if (res.help) {
        help(opts);
        goto out;
    }
    if (res.npos) {
        rc = st_cli_usage_error("gguf", "unexpected argument (options only)");
        goto out;
    }
    if (list) {
        char presets[2048];
        st_mg_presets(presets, sizeof presets);
        fputs(presets, stdout);
        goto out;
    }
    if (show_path) {
        rc = show(show_path);
        goto out;
    }
    if (!arch || !size || !vocab_path || !out) {
        rc = st_cli_usage_error("gguf", "--arch, --size, --vocab and -o are required");
        goto out;
    }
    st_mg_shape s;
    if (st_mg_preset(arch, size, &s, err, sizeof err)) {
        rc = st_cli_usage_error("gguf", err);
        goto out;
    }
    if (n_embd > 0)
        s.n_embd = (uint32_t)n_embd;
    if (n_layer > 0)
        s.n_layer = (uint32_t)n_layer;
    if (n_head > 0)
        s.n_head = (uint32_t)n_head;
    if (n_head_kv > 0)
        s.n_head_kv = (uint32_t)n_head_kv;
    if (n_ff > 0)
        s.n_ff = (uint32_t)n_ff;
    if (ctx > 0)
        s.n_ctx = (uint32_t)ctx;
    if (rope_base > 0)
        s.rope_base = rope_base;
    if (norm_eps > 0)
        s.norm_eps = norm_eps;
    if (tied >= 0)
        s.tied = (int)tied;
    if (st_mg_check(&s, err, sizeof err)) {
        rc = st_cli_usage_error("gguf", err);
        goto out;
    }
    uint32_t wtype;
    if (!strcmp(type, "f16"))
        wtype = ST_GGML_F16;
    else if (!strcmp(type, "f32"))
        wtype = ST_GGML_F32;
    else {
        rc = st_cli_usage_error("gguf", "--type must be f16 or f32");
        goto out;
    }

    if (st_outfile_check(out, err, sizeof err)) { /* said before the model is built */
        fprintf(stderr, "servetune gguf: %s\n", err);
        rc = ST_EXIT_FAIL;
        goto out;
    }
    st_ns t0 = st_now();
    size_t vlen;
    vbytes = st_read_file(vocab_path, VOCAB_MAX_BYTES, &vlen, err, sizeof err);
    if (!vbytes || st_gguf_parse(vbytes, vlen, vlen, &vocab, err, sizeof err)) {
        fprintf(stderr, "servetune gguf: %s%s%s\n", vbytes ? vocab_path : "", vbytes ? ": " : "", err);
        rc = ST_EXIT_FAIL;
        goto out;
    }
    have_vocab = 1;
    char gname[256];
    if (!name) {
        snprintf(gname, sizeof gname, "servetune random %s %s seed %ld", arch, size, seed);
        name = gname;
    }
    uint64_t n_vocab = 0;
    if (st_mg_build(&s, &vocab, wtype, name, &g, &n_vocab, err, sizeof err)) {
        fprintf(stderr, "servetune gguf: %s: %s\n", vocab_path, err);
        rc = ST_EXIT_FAIL;
        goto out;
    }
    have_g = 1;
    if (st_mkdir_parents(out, err, sizeof err)) {
        fprintf(stderr, "servetune gguf: %s\n", err);
        rc = ST_EXIT_FAIL;
        goto out;
    }
    /* written safely: OUT.tmp (O_EXCL | O_NOFOLLOW) renamed over OUT; a FIFO, device or
     * symlink at OUT is refused, never replaced */
    st_outfile of;
    if (st_outfile_open(&of, out, err, sizeof err)) {
        fprintf(stderr, "servetune gguf: %s\n", err);
        rc = ST_EXIT_FAIL;
        goto out;
    }
    int dfd = dup(of.fd);
    FILE *f = dfd >= 0 ? fdopen(dfd, "wb") : NULL;
    if (!f) {
        fprintf(stderr, "servetune gguf: %s: %s\n", out, strerror(errno));
        if (dfd >= 0)
            close(dfd);
        st_outfile_abort(&of);
        rc = ST_EXIT_FAIL;
        goto out;
    }
    st_mg_filler fill;
    st_mg_filler_init(&fill, &g, (uint64_t)seed);
    fill.logit_scale = (float)logit_scale;
    int wrc = st_gguf_write(&g, st_mg_fill, &fill, sink_file, f, err, sizeof err);
    long fbytes = ftell(f);
    if (fclose(f) && !wrc) {
        snprintf(err, sizeof err, "closing: %s", strerror(errno));
        wrc = -1;
    }
    if (wrc) {
        st_outfile_abort(&of);
        fprintf(stderr, "servetune gguf: %s: %s\n", out, err);
    } else if (st_outfile_commit(&of, err, sizeof err)) {
        fprintf(stderr, "servetune gguf: %s\n", err); /* err names the file */
        wrc = -1;
    }
    uint64_t n_t = g.n_t;
    if (wrc) {
        rc = ST_EXIT_FAIL;
        goto out;
    }
    if (!quiet)
        printf("%s: %s %s, %.1fM parameters (n_embd %" PRIu32 ", n_layer %" PRIu32 ", n_head %" PRIu32 "/%" PRIu32
               " kv, n_ff %" PRIu32 ", ctx %" PRIu32 ", vocab %" PRIu64 "), %" PRIu64
               " tensors %s, %.1f MB, seed %ld, %.2f s\n",
               out, arch, size, (double)st_mg_params(&s, n_vocab) / 1e6, s.n_embd, s.n_layer, s.n_head, s.n_head_kv,
               s.n_ff, s.n_ctx, n_vocab, n_t, type, (double)fbytes / 1e6, seed, st_ns_to_s(st_now() - t0));
out:
    free(vbytes);
    if (have_vocab)
        st_gguf_free(&vocab);
    if (have_g)
        st_gguf_free(&g);
    st_opts_result_free(&res);
    return rc;
}
