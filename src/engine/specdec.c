/* Speculative decoding flags, found and validated (engine/specdec.h). */
#include "engine/specdec.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/parse.h"

/* The value of flag name (any of names) in argv: "--x v" or "--x=v". The last one given wins (as
 * argparse). *present is set when the flag appears (even without a value). */
static const char *flag(const char *const *argv, int n, const char *const *names, int *present, const char **which)
{
    const char *val = NULL;
    for (int i = 0; i < n; i++) {
        for (int k = 0; names[k]; k++) {
            size_t l = strlen(names[k]);
            if (!strncmp(argv[i], names[k], l) && argv[i][l] == '=') {
                val = argv[i] + l + 1;
                *present = 1;
                *which = names[k];
            } else if (!strcmp(argv[i], names[k])) {
                val = i + 1 < n ? argv[i + 1] : NULL;
                *present = 1;
                *which = names[k];
            }
        }
    }
    return val;
}

static int whole(const char *s, long lo, long hi, long *out)
{
    long v;
    if (st_parse_long(s, &v) || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int json_whole(json_t *v, long lo, long *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > 1000000)
        return -1;
    *out = (long)json_integer_value(v);
    return 0;
}

static const char *const vllm_methods[] = { "ngram",       "ngram_gpu", "suffix", "medusa", "mlp_speculator",
                                            "draft_model", "eagle",     "eagle3", "dflash", "extract_hidden_states",
                                            "mtp",         NULL };

static int vllm_method_known(const char *m)
{
    for (int i = 0; vllm_methods[i]; i++)
        if (!strcmp(m, vllm_methods[i]))
            return 1;
    size_t l = strlen(m);
    return l > 4 && !strcmp(m + l - 4, "_mtp"); /* deepseek_mtp, qwen3_next_mtp, ... */
}

static int vllm(const char *flagname, const char *js, st_specdec *d, char *err, size_t errlen)
{
    if (!js) {
        snprintf(err, errlen, "%s needs a JSON value", flagname);
        return -1;
    }
    json_error_t je;
    json_t *o = json_loads(js, JSON_REJECT_DUPLICATES, &je);
    if (!o) {
        snprintf(err, errlen, "%s is not JSON (column %d: %s)", flagname, je.column, je.text);
        return -1;
    }
    int rc = -1;
    if (!json_is_object(o)) {
        snprintf(err, errlen, "%s must be a JSON object ({\"method\": \"ngram\", \"num_speculative_tokens\": 4, ...})",
                 flagname);
        goto out;
    }
    json_t *m = json_object_get(o, "method"), *model = json_object_get(o, "model");
    if (m && !json_is_string(m)) {
        snprintf(err, errlen, "%s: \"method\" must be a string", flagname);
        goto out;
    }
    if (model && !json_is_string(model)) {
        snprintf(err, errlen, "%s: \"model\" must be a string", flagname);
        goto out;
    }
    const char *method = m ? json_string_value(m) : NULL;
    if (method && !strcmp(method, "[ngram]"))
        method = "ngram"; /* the old spelling vLLM still maps */
    if (!method && model && !strcmp(json_string_value(model), "[ngram]"))
        method = "ngram";
    if (method && !vllm_method_known(method)) {
        snprintf(err, errlen,
                 "%s: unknown method \"%.40s\" (vLLM knows ngram, ngram_gpu, suffix, medusa, mlp_speculator, "
                 "draft_model, eagle, eagle3, dflash, extract_hidden_states, mtp and the *_mtp model types)",
                 flagname, method);
        goto out;
    }
    if (!method && !model) {
        snprintf(err, errlen, "%s: neither \"method\" nor a draft \"model\": vLLM cannot tell what to speculate with",
                 flagname);
        goto out;
    }
    d->engine = ST_SPECDEC_VLLM;
    snprintf(d->method, sizeof d->method, "%s", method ? method : "draft_model");
    if (model && strcmp(json_string_value(model), "[ngram]"))
        snprintf(d->draft_model, sizeof d->draft_model, "%s", json_string_value(model));
    long k = 0;
    json_t *kj = json_object_get(o, "num_speculative_tokens");
    if (kj && json_whole(kj, 1, &k)) {
        snprintf(err, errlen, "%s: num_speculative_tokens must be a whole number >= 1", flagname);
        goto out;
    }
    d->k = (uint32_t)k;
    int ngram = !strcmp(d->method, "ngram") || !strcmp(d->method, "ngram_gpu");
    d->draft_free = ngram || !strcmp(d->method, "suffix");
    if (ngram) {
        if (!kj) {
            snprintf(err, errlen, "%s: ngram needs num_speculative_tokens", flagname);
            goto out;
        }
        json_t *lo = json_object_get(o, "prompt_lookup_min"), *hi = json_object_get(o, "prompt_lookup_max");
        long a = 0, b = 0;
        if ((lo && json_whole(lo, 1, &a)) || (hi && json_whole(hi, 1, &b))) {
            snprintf(err, errlen, "%s: prompt_lookup_min and prompt_lookup_max must be whole numbers >= 1", flagname);
            goto out;
        }
        if (!lo && !hi)
            a = b = 5;
        else if (!lo)
            a = b;
        else if (!hi)
            b = a;
        if (a > b) {
            snprintf(err, errlen, "%s: prompt_lookup_min (%ld) is above prompt_lookup_max (%ld)", flagname, a, b);
            goto out;
        }
        d->lookup_min = (uint32_t)a;
        d->lookup_max = (uint32_t)b;
        snprintf(d->summary, sizeof d->summary, "vLLM %s, %u draft tokens, lookup %u..%u", d->method, d->k,
                 d->lookup_min, d->lookup_max);
    } else if (d->k) {
        snprintf(d->summary, sizeof d->summary, "vLLM %s%s%.200s, %u draft tokens", d->method,
                 d->draft_model[0] ? " with " : "", d->draft_model, d->k);
    } else {
        snprintf(d->summary, sizeof d->summary, "vLLM %s%s%.200s (draft tokens from the draft model's config)",
                 d->method, d->draft_model[0] ? " with " : "", d->draft_model);
    }
    rc = 1;
out:
    json_decref(o);
    return rc;
}

static int sglang(const char *algo, const char *const *argv, int n, st_specdec *d, char *err, size_t errlen)
{
    static const char *const known[] = { "EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", NULL };
    int ok = 0;
    for (int i = 0; algo && known[i]; i++)
        ok |= !strcmp(algo, known[i]);
    if (!ok) {
        snprintf(err, errlen,
                 "--speculative-algorithm: unknown algorithm \"%.40s\" (SGLang knows EAGLE, EAGLE3, NEXTN, STANDALONE, "
                 "NGRAM)",
                 algo ? algo : "");
        return -1;
    }
    d->engine = ST_SPECDEC_SGLANG;
    snprintf(d->method, sizeof d->method, "%s", algo);
    d->draft_free = !strcmp(algo, "NGRAM");
    const char *ints[] = { "--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens" };
    for (int i = 0; i < 3; i++) {
        const char *names[] = { ints[i], NULL }, *which = NULL;
        int present = 0;
        long v;
        const char *val = flag(argv, n, names, &present, &which);
        if (present && whole(val, 1, 1000000, &v)) {
            snprintf(err, errlen, "%s must be a whole number >= 1", ints[i]);
            return -1;
        }
        if (present && i == 2)
            d->k = (uint32_t)v;
    }
    const char *dm[] = { "--speculative-draft-model-path", "--speculative-draft-model", NULL }, *which = NULL;
    int present = 0;
    const char *model = flag(argv, n, dm, &present, &which);
    if (model)
        snprintf(d->draft_model, sizeof d->draft_model, "%s", model);
    snprintf(d->summary, sizeof d->summary, "SGLang %s%s%.200s", d->method, d->draft_model[0] ? " with " : "",
             d->draft_model);
    if (d->k) {
        size_t l = strlen(d->summary);
        snprintf(d->summary + l, sizeof d->summary - l, ", %u draft tokens", d->k);
    }
    return 1;
}

static int llamacpp_type_known(const char *t, size_t l)
{
    static const char *const known[] = { "none",          "draft-simple", "draft-eagle3", "draft-mtp",
                                         "draft-dflash",  "draft-dspark", "ngram-simple", "ngram-map-k",
                                         "ngram-map-k4v", "ngram-mod",    "ngram-cache",  NULL };
    for (int i = 0; known[i]; i++)
        if (strlen(known[i]) == l && !strncmp(t, known[i], l))
            return 1;
    return 0;
}

static int llamacpp(const char *const *argv, int n, st_specdec *d, char *err, size_t errlen)
{
    const char *removed[] = { "--draft", "--draft-n", "--draft-max", "--draft-min", "--draft-n-min", NULL };
    int present = 0;
    const char *which = NULL;
    flag(argv, n, removed, &present, &which);
    if (present) {
        snprintf(err, errlen,
                 "%s was removed from the pinned llama-server (it exits on it): use --spec-draft-n-max / "
                 "--spec-draft-n-min (or --spec-ngram-mod-n-max)",
                 which);
        return -1;
    }
    const char *dm[] = { "-md", "--model-draft", "--spec-draft-model", NULL };
    const char *ty[] = { "--spec-type", NULL };
    const char *nmax[] = { "--spec-draft-n-max", NULL }, *nmin[] = { "--spec-draft-n-min", NULL };
    const char *pmin[] = { "--spec-draft-p-min", "--draft-p-min", NULL };
    int has_dm = 0, has_ty = 0, has_max = 0, has_min = 0, has_p = 0;
    const char *model = flag(argv, n, dm, &has_dm, &which);
    if (has_dm && (!model || !*model)) {
        snprintf(err, errlen, "%s needs the draft model's file", which);
        return -1;
    }
    const char *type = flag(argv, n, ty, &has_ty, &which);
    const char *vmax = flag(argv, n, nmax, &has_max, &which);
    const char *vmin = flag(argv, n, nmin, &has_min, &which);
    const char *vp = flag(argv, n, pmin, &has_p, &which);
    if (!has_dm && !has_ty && !has_max && !has_min && !has_p)
        return 0;
    int active = has_dm;
    if (has_ty) {
        if (!type || !*type) {
            snprintf(err, errlen, "--spec-type needs a type");
            return -1;
        }
        for (const char *t = type; *t;) {
            size_t l = strcspn(t, ",");
            if (!llamacpp_type_known(t, l)) {
                snprintf(err, errlen,
                         "--spec-type: unknown type \"%.*s\" (the pinned llama-server knows none, draft-simple, "
                         "draft-eagle3, draft-mtp, draft-dflash, draft-dspark, ngram-simple, ngram-map-k, "
                         "ngram-map-k4v, ngram-mod, ngram-cache)",
                         (int)(l < 40 ? l : 40), t);
                return -1;
            }
            if (!(l == 4 && !strncmp(t, "none", 4)))
                active = 1;
            t += l;
            if (*t == ',')
                t++;
        }
    }
    long vmx = 0, vmn = 0;
    if (has_max && whole(vmax, 0, 1000000, &vmx)) {
        snprintf(err, errlen, "--spec-draft-n-max must be a whole number >= 0");
        return -1;
    }
    if (has_min && whole(vmin, 0, 1000000, &vmn)) {
        snprintf(err, errlen, "--spec-draft-n-min must be a whole number >= 0");
        return -1;
    }
    if (has_max && has_min && vmn > vmx) {
        snprintf(err, errlen, "--spec-draft-n-min (%ld) is above --spec-draft-n-max (%ld)", vmn, vmx);
        return -1;
    }
    if (has_p) {
        char *end;
        double p = vp ? strtod(vp, &end) : -1;
        if (!vp || *end || !(p >= 0 && p <= 1)) {
            snprintf(err, errlen, "--spec-draft-p-min must be a probability in 0..1");
            return -1;
        }
    }
    if (!active)
        return 0; /* draft settings without a draft model or a type: nothing speculates */
    d->engine = ST_SPECDEC_LLAMACPP;
    snprintf(d->method, sizeof d->method, "%.40s", has_ty ? type : "draft-simple");
    d->draft_free = has_ty && !strncmp(type, "ngram", 5) && !has_dm;
    d->k = (uint32_t)vmx;
    if (model)
        snprintf(d->draft_model, sizeof d->draft_model, "%s", model);
    snprintf(d->summary, sizeof d->summary, "llama.cpp %s%s%.160s%s", d->method, d->draft_model[0] ? " with " : "",
             d->draft_model,
             has_ty ? ""
                    : " (no --spec-type: the pinned llama-server drafts only when the draft GGUF names its types; "
                      "add --spec-type draft-simple)");
    if (d->k) {
        size_t l = strlen(d->summary);
        snprintf(d->summary + l, sizeof d->summary - l, ", at most %u draft tokens", d->k);
    }
    return 1;
}

int st_specdec_from_argv(const char *const *argv, int n, st_specdec *d, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    const char *vn[] = { "--speculative-config", "--speculative_config", NULL }, *which = NULL;
    int present = 0;
    const char *js = flag(argv, n, vn, &present, &which);
    if (present)
        return vllm(which, js, d, err, errlen);
    const char *sn[] = { "--speculative-algorithm", NULL };
    const char *algo = flag(argv, n, sn, &present, &which);
    if (present)
        return sglang(algo, argv, n, d, err, errlen);
    return llamacpp(argv, n, d, err, errlen);
}
