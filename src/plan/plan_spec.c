#include "plan/plan_spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "core/strv.h"
#include "core/util.h"
#include "emu/flags.h"

/* The flags the plan sets per candidate: they leave the baseline (with their values). */
static const char *const plan_flags[] = { "--max-num-seqs",         "--max-num-batched-tokens",
                                          "--max-model-len",        "--kv-cache-dtype",
                                          "--tensor-parallel-size", "-tp",
                                          "--quantization",         "-q",
                                          "--speculative-config",   NULL };

static int is_plan_flag(const char *t, int base_spec)
{
    if (base_spec && !strncmp(t, "--speculative-config", 20) && (t[20] == '\0' || t[20] == '='))
        return 0;
    for (int i = 0; plan_flags[i]; i++) {
        size_t n = strlen(plan_flags[i]);
        if (!strncmp(t, plan_flags[i], n) && (t[n] == '\0' || t[n] == '='))
            return 1;
    }
    return 0;
}

void st_plan_config_name(const st_plan_candidate *c, char *out, size_t n)
{
    char raw[256];
    int off = snprintf(raw, sizeof raw, "%s-tp%d-%s-kv%s", c->gpu, c->tp, c->weights,
                       strcmp(c->kv_dtype, "auto") ? c->kv_dtype : "auto");
    if (c->max_num_seqs > 0 && off < (int)sizeof raw)
        off += snprintf(raw + off, sizeof raw - (size_t)off, "-seqs%ld", c->max_num_seqs);
    if (c->max_batched > 0 && off < (int)sizeof raw)
        off += snprintf(raw + off, sizeof raw - (size_t)off, "-bt%ld", c->max_batched);
    if (c->max_model_len > 0 && off < (int)sizeof raw)
        off += snprintf(raw + off, sizeof raw - (size_t)off, "-len%ld", c->max_model_len);
    if (c->spec && off < (int)sizeof raw)
        snprintf(raw + off, sizeof raw - (size_t)off, "-%s-k%d", c->spec->method, c->spec_k);
    st_slug(raw, out, n, n);
}

/* ---- building the document ---------------------------------------------------------------- */

typedef struct wdoc {
    yaml_document_t *d;
    int bad;
} wdoc;

static int scalar(wdoc *w, const char *s, yaml_scalar_style_t style)
{
    int id = yaml_document_add_scalar(w->d, NULL, (yaml_char_t *)s, (int)strlen(s), style);
    if (!id)
        w->bad = 1;
    return id;
}

static int str(wdoc *w, const char *s) { return scalar(w, s, YAML_DOUBLE_QUOTED_SCALAR_STYLE); }

static int num(wdoc *w, double v)
{
    char b[64];
    snprintf(b, sizeof b, "%.10g", v);
    return scalar(w, b, YAML_PLAIN_SCALAR_STYLE);
}

static void pair(wdoc *w, int map, int key, int val)
{
    if (!map || !key || !val || !yaml_document_append_mapping_pair(w->d, map, key, val))
        w->bad = 1;
}

static void item(wdoc *w, int seq, int val)
{
    if (!seq || !val || !yaml_document_append_sequence_item(w->d, seq, val))
        w->bad = 1;
}

static int mapping(wdoc *w, yaml_mapping_style_t style)
{
    int id = yaml_document_add_mapping(w->d, NULL, style);
    if (!id)
        w->bad = 1;
    return id;
}

static int sequence(wdoc *w, yaml_sequence_style_t style)
{
    int id = yaml_document_add_sequence(w->d, NULL, style);
    if (!id)
        w->bad = 1;
    return id;
}

/* A deep copy of node n of src into w's document. */
static int copy(wdoc *w, yaml_document_t *src, yaml_node_t *n, int depth)
{
    if (!n || depth > 64) {
        w->bad = 1;
        return 0;
    }
    switch (n->type) {
    case YAML_SCALAR_NODE: {
        int id = yaml_document_add_scalar(w->d, NULL, n->data.scalar.value, (int)n->data.scalar.length,
                                          n->data.scalar.style);
        if (!id)
            w->bad = 1;
        return id;
    }
    case YAML_SEQUENCE_NODE: {
        int id = sequence(w, n->data.sequence.style);
        for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top && !w->bad; it++)
            item(w, id, copy(w, src, yaml_document_get_node(src, *it), depth + 1));
        return id;
    }
    case YAML_MAPPING_NODE: {
        int id = mapping(w, n->data.mapping.style);
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top && !w->bad; p++) {
            int k = copy(w, src, yaml_document_get_node(src, p->key), depth + 1);
            int v = copy(w, src, yaml_document_get_node(src, p->value), depth + 1);
            pair(w, id, k, v);
        }
        return id;
    }
    default: w->bad = 1; return 0;
    }
}

static const char *key_of(yaml_document_t *d, yaml_node_pair_t *p)
{
    yaml_node_t *k = yaml_document_get_node(d, p->key);
    return k && k->type == YAML_SCALAR_NODE ? (const char *)k->data.scalar.value : "";
}

/* The baseline flags of the user's engine.flags, less the emulator's and the plan's. */
static void base_flags(wdoc *w, yaml_document_t *src, yaml_node_t *flags, int seq, int base_spec)
{
    if (!flags || flags->type != YAML_SEQUENCE_NODE)
        return;
    st_strv v = { 0 };
    for (yaml_node_item_t *it = flags->data.sequence.items.start; it < flags->data.sequence.items.top; it++) {
        yaml_node_t *e = yaml_document_get_node(src, *it);
        if (e && e->type == YAML_SCALAR_NODE && st_strv_push(&v, (const char *)e->data.scalar.value))
            w->bad = 1;
    }
    for (int i = 0; i < v.n; i++) {
        const char *t = v.v[i];
        int value_next = i + 1 < v.n && v.v[i + 1][0] != '-' && !strchr(t, '=');
        if (st_emu_flag_emulator_only(t)) {
            if (st_emu_flag_takes_value(t) && value_next)
                i++;
            continue;
        }
        if (is_plan_flag(t, base_spec)) {
            if (value_next)
                i++;
            continue;
        }
        item(w, seq, str(w, t));
    }
    st_strv_free(&v);
}

static int engine_node(wdoc *w, yaml_document_t *src, yaml_node_t *eng, const st_plan_candidate *c)
{
    int m = mapping(w, YAML_BLOCK_MAPPING_STYLE);
    pair(w, m, scalar(w, "kind", YAML_PLAIN_SCALAR_STYLE), scalar(w, "vllm", YAML_PLAIN_SCALAR_STYLE));
    pair(w, m, scalar(w, "model", YAML_PLAIN_SCALAR_STYLE), str(w, c->model));
    int emulator = 0;
    yaml_node_t *flags = NULL;
    if (eng && eng->type == YAML_MAPPING_NODE) {
        for (yaml_node_pair_t *p = eng->data.mapping.pairs.start; p < eng->data.mapping.pairs.top; p++) {
            yaml_node_t *v = yaml_document_get_node(src, p->value);
            if (!strcmp(key_of(src, p), "kind"))
                emulator = v && v->type == YAML_SCALAR_NODE && !strcmp((char *)v->data.scalar.value, "emulator");
            if (!strcmp(key_of(src, p), "flags"))
                flags = v;
        }
        for (yaml_node_pair_t *p = eng->data.mapping.pairs.start; p < eng->data.mapping.pairs.top; p++) {
            const char *k = key_of(src, p);
            /* kind, model and flags are the plan's; the emulator's command is not vLLM's; the port
             * stays the audit's choice */
            if (!strcmp(k, "kind") || !strcmp(k, "model") || !strcmp(k, "flags") || !strcmp(k, "port") ||
                (emulator && !strcmp(k, "command")))
                continue;
            pair(w, m, copy(w, src, yaml_document_get_node(src, p->key), 0),
                 copy(w, src, yaml_document_get_node(src, p->value), 0));
        }
    }
    int seq = sequence(w, YAML_FLOW_SEQUENCE_STYLE);
    base_flags(w, src, flags, seq, c->base_spec);
    pair(w, m, scalar(w, "flags", YAML_PLAIN_SCALAR_STYLE), seq);
    return m;
}

static int hardware_node(wdoc *w, const st_plan_candidate *c)
{
    int m = mapping(w, YAML_BLOCK_MAPPING_STYLE);
    pair(w, m, scalar(w, "gpu", YAML_PLAIN_SCALAR_STYLE), str(w, c->gpu));
    pair(w, m, scalar(w, "gpus_per_replica", YAML_PLAIN_SCALAR_STYLE), num(w, c->tp));
    pair(w, m, scalar(w, "price_per_gpu_hour", YAML_PLAIN_SCALAR_STYLE), num(w, c->price_per_gpu_hour));
    return m;
}

static void add_flag(wdoc *w, int seq, const char *flag, const char *value)
{
    item(w, seq, str(w, flag));
    item(w, seq, str(w, value));
}

/* --speculative-config JSON for c's method and draft length. */
static void spec_json(const st_plan_candidate *c, char *out, size_t n)
{
    if (c->spec->model)
        snprintf(out, n, "{\"method\":\"%s\",\"model\":\"%s\",\"num_speculative_tokens\":%d}", c->spec->method,
                 c->spec->model, c->spec_k);
    else
        snprintf(out, n, "{\"method\":\"%s\",\"num_speculative_tokens\":%d}", c->spec->method, c->spec_k);
}

/* An acceptance as --spec-acceptance writes it: A, or A1/A2/... by position (at most k of them). */
static void accept_text(const st_spec_accept *a, int k, char *out, size_t n)
{
    size_t off = 0;
    out[0] = 0;
    if (!a->n_pos)
        snprintf(out, n, "%.10g", a->acceptance);
    for (uint32_t i = 0; i < a->n_pos && i < (uint32_t)k && off < n; i++)
        off += (size_t)snprintf(out + off, n - off, "%s%.10g", i ? "/" : "", a->pos[i]);
}

/* c's speculation flags: --speculative-config; for the engine model (for_model) also its
 * acceptance (--spec-acceptance, --spec-draft-share: the emulator's own flags, which a real vLLM
 * does not take; a written spec carries them in its speculation block instead). */
static void spec_flags(wdoc *w, int fl, const st_plan_candidate *c, const st_spec_accept *a, int for_model)
{
    char b[700];
    spec_json(c, b, sizeof b);
    add_flag(w, fl, "--speculative-config", b);
    if (!for_model || !a)
        return;
    accept_text(a, c->spec_k, b, sizeof b);
    add_flag(w, fl, "--spec-acceptance", b);
    if (a->draft_share >= 0) {
        snprintf(b, sizeof b, "%.10g", a->draft_share);
        add_flag(w, fl, "--spec-draft-share", b);
    }
}

static int configs_node(wdoc *w, const st_plan_candidate *const *cands, int n, int for_model)
{
    int seq = sequence(w, YAML_BLOCK_SEQUENCE_STYLE);
    for (int i = 0; i < n; i++) {
        const st_plan_candidate *c = cands[i];
        char name[128], b[64], reason[400];
        st_plan_config_name(c, name, sizeof name);
        int m = mapping(w, YAML_BLOCK_MAPPING_STYLE);
        pair(w, m, scalar(w, "name", YAML_PLAIN_SCALAR_STYLE), str(w, name));
        pair(w, m, scalar(w, "model", YAML_PLAIN_SCALAR_STYLE), str(w, c->model));
        int fl = sequence(w, YAML_FLOW_SEQUENCE_STYLE);
        if (c->tp > 1) {
            snprintf(b, sizeof b, "%d", c->tp);
            add_flag(w, fl, "--tensor-parallel-size", b);
        }
        if (c->kv_dtype && strcmp(c->kv_dtype, "auto"))
            add_flag(w, fl, "--kv-cache-dtype", c->kv_dtype);
        if (c->max_num_seqs > 0) {
            snprintf(b, sizeof b, "%ld", c->max_num_seqs);
            add_flag(w, fl, "--max-num-seqs", b);
        }
        if (c->max_batched > 0) {
            snprintf(b, sizeof b, "%ld", c->max_batched);
            add_flag(w, fl, "--max-num-batched-tokens", b);
        }
        if (c->max_model_len > 0) {
            snprintf(b, sizeof b, "%ld", c->max_model_len);
            add_flag(w, fl, "--max-model-len", b);
        }
        if (c->spec)
            spec_flags(w, fl, c, c->spec_acc, for_model);
        pair(w, m, scalar(w, "add_flags", YAML_PLAIN_SCALAR_STYLE), fl);
        int off;
        if (c->state == ST_PLAN_OK)
            off = snprintf(reason, sizeof reason,
                           "planned #%d: $%.4g per 1M output tokens at %.4g req/s sustained (predicted), %s weights",
                           c->rank, c->usd_per_1m, c->capacity_rps, c->weights);
        else
            off = snprintf(reason, sizeof reason, "a candidate of servetune plan (%s weights)", c->weights);
        if (c->spec && c->spec_acc && off > 0 && off < (int)sizeof reason) {
            char a[300];
            accept_text(c->spec_acc, c->spec_k, a, sizeof a);
            snprintf(reason + off, sizeof reason - (size_t)off, ", speculating (%s, k %d) at an acceptance of %s",
                     c->spec->method, c->spec_k, a);
        }
        pair(w, m, scalar(w, "reason", YAML_PLAIN_SCALAR_STYLE), str(w, reason));
        item(w, seq, m);
    }
    return seq;
}

/* The written spec's speculation block: the first speculating candidate's acceptance (the engine
 * model reads it for a configuration whose flags carry none, as predict does). 0 when none speculates. */
static int speculation_node(wdoc *w, const st_plan_candidate *const *cands, int n)
{
    const st_plan_candidate *c = NULL;
    for (int i = 0; i < n && !c; i++)
        if (cands[i]->spec && cands[i]->spec_acc)
            c = cands[i];
    if (!c)
        return 0;
    const st_spec_accept *a = c->spec_acc;
    int m = mapping(w, YAML_FLOW_MAPPING_STYLE);
    int v;
    if (a->n_pos) {
        v = sequence(w, YAML_FLOW_SEQUENCE_STYLE);
        for (uint32_t i = 0; i < a->n_pos; i++)
            item(w, v, num(w, a->pos[i]));
    } else
        v = num(w, a->acceptance);
    pair(w, m, scalar(w, "acceptance", YAML_PLAIN_SCALAR_STYLE), v);
    if (a->draft_share >= 0)
        pair(w, m, scalar(w, "draft_share", YAML_PLAIN_SCALAR_STYLE), num(w, a->draft_share));
    return m;
}

/* Appends the emitter's output to the st_buf. */
static int write_cb(void *data, unsigned char *buffer, size_t size)
{
    st_buf *b = data;
    return st_buf_append(b, buffer, size) == 0;
}

static int spec_write(const char *base_name, const char *base_text, size_t base_len,
                      const st_plan_candidate *const *cands, int n, const char *header, int for_model, st_buf *out,
                      char *err, size_t errlen)
{
    if (n < 1) {
        snprintf(err, errlen, "no candidate to write");
        return -1;
    }
    for (int i = 1; i < n; i++)
        if (strcmp(cands[i]->gpu, cands[0]->gpu) || cands[i]->tp != cands[0]->tp) {
            snprintf(err, errlen, "one spec holds candidates of one GPU and GPUs per replica");
            return -1;
        }
    yaml_parser_t parser;
    yaml_document_t src, dst;
    int rc = -1, have_src = 0, have_dst = 0;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_string(&parser, (const unsigned char *)base_text, base_len);
    if (!yaml_parser_load(&parser, &src)) {
        snprintf(err, errlen, "%s:%zu: %s", base_name, parser.problem_mark.line + 1,
                 parser.problem ? parser.problem : "not YAML");
        goto out;
    }
    have_src = 1;
    yaml_node_t *root = yaml_document_get_root_node(&src);
    if (!root || root->type != YAML_MAPPING_NODE) {
        snprintf(err, errlen, "%s: the spec is not a mapping", base_name);
        goto out;
    }
    if (!yaml_document_initialize(&dst, NULL, NULL, NULL, 1, 1)) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    have_dst = 1;
    wdoc w = { &dst, 0 };
    int top = mapping(&w, YAML_BLOCK_MAPPING_STYLE);
    int had_configs = 0;
    int spec_block = for_model ? 0 : speculation_node(&w, cands, n);
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top && !w.bad; p++) {
        const char *k = key_of(&src, p);
        yaml_node_t *v = yaml_document_get_node(&src, p->value);
        int key = scalar(&w, k, YAML_PLAIN_SCALAR_STYLE);
        if (!strcmp(k, "plan") || (spec_block && !strcmp(k, "speculation")))
            continue; /* the search space, not an audit's; the acceptance the candidates were planned with */
        else if (!strcmp(k, "engine"))
            pair(&w, top, key, engine_node(&w, &src, v, cands[0]));
        else if (!strcmp(k, "hardware"))
            pair(&w, top, key, hardware_node(&w, cands[0]));
        else if (!strcmp(k, "configurations")) {
            pair(&w, top, key, configs_node(&w, cands, n, for_model));
            had_configs = 1;
        } else
            pair(&w, top, key, copy(&w, &src, v, 0));
    }
    if (!had_configs)
        pair(&w, top, scalar(&w, "configurations", YAML_PLAIN_SCALAR_STYLE), configs_node(&w, cands, n, for_model));
    if (spec_block)
        pair(&w, top, scalar(&w, "speculation", YAML_PLAIN_SCALAR_STYLE), spec_block);
    if (w.bad) {
        snprintf(err, errlen, "out of memory building the spec");
        goto out;
    }
    if (header)
        st_buf_puts(out, header);
    yaml_emitter_t em;
    yaml_emitter_initialize(&em);
    yaml_emitter_set_output(&em, write_cb, out);
    yaml_emitter_set_width(&em, 120);
    yaml_emitter_set_unicode(&em, 1);
    int ok = yaml_emitter_open(&em) && yaml_emitter_dump(&em, &dst) && yaml_emitter_close(&em);
    have_dst = 0; /* yaml_emitter_dump deletes the document */
    yaml_emitter_delete(&em);
    if (!ok || st_buf_error(out)) {
        snprintf(err, errlen, "could not write the spec (%s)", st_buf_error(out) ? "too large" : "YAML emitter");
        goto out;
    }
    rc = 0;
out:
    if (have_dst)
        yaml_document_delete(&dst);
    if (have_src)
        yaml_document_delete(&src);
    yaml_parser_delete(&parser);
    return rc;
}

int st_plan_spec_write(const char *base_name, const char *base_text, size_t base_len,
                       const st_plan_candidate *const *cands, int n, const char *header, st_buf *out, char *err,
                       size_t errlen)
{
    return spec_write(base_name, base_text, base_len, cands, n, header, 0, out, err, errlen);
}

int st_plan_spec_write_model(const char *base_name, const char *base_text, size_t base_len, const st_plan_candidate *c,
                             st_buf *out, char *err, size_t errlen)
{
    const st_plan_candidate *one[] = { c };
    return spec_write(base_name, base_text, base_len, one, 1, NULL, 1, out, err, errlen);
}
