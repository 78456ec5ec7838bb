/* Speculative decoding in an engine's command line (docs/speculative.md): found, described and
 * validated before anything starts, so that `audit --check` refuses what the engine would refuse
 * at startup. Pure.
 *
 *   vLLM       --speculative-config JSON (also --speculative_config, =JSON): a JSON object whose
 *              "method" is one vLLM knows (ngram, ngram_gpu, suffix, medusa, mlp_speculator,
 *              draft_model, eagle, eagle3, dflash, extract_hidden_states, mtp and the *_mtp model
 *              types) or, without a method, a draft "model" (vLLM infers the method);
 *              num_speculative_tokens a whole number >= 1 (required for ngram); ngram's
 *              prompt_lookup_min/max >= 1, min <= max (one given: the other takes its value;
 *              none: both 5, as vLLM's SpeculativeConfig).
 *   SGLang     --speculative-algorithm EAGLE | EAGLE3 | NEXTN | STANDALONE | NGRAM, with
 *              --speculative-num-steps, --speculative-eagle-topk, --speculative-num-draft-tokens
 *              (whole numbers >= 1) and --speculative-draft-model-path.
 *   llama.cpp  -md / --model-draft / --spec-draft-model FILE, --spec-type TYPE[,TYPE] (none,
 *              draft-simple, draft-eagle3, draft-mtp, draft-dflash, draft-dspark, ngram-simple,
 *              ngram-map-k, ngram-map-k4v, ngram-mod, ngram-cache: the pinned llama-server's),
 *              --spec-draft-n-max / --spec-draft-n-min (>= 0), --spec-draft-p-min / --draft-p-min
 *              (0..1). A draft model without --spec-type is loaded but drafts nothing on the pinned
 *              llama-server unless the GGUF names its speculative types: found, and said in the
 *              summary. --draft, --draft-n, --draft-max, --draft-min and --draft-n-min were removed
 *              from the pinned llama-server (it exits on them): refused, naming the new flag. */
#ifndef ST_ENGINE_SPECDEC_H
#define ST_ENGINE_SPECDEC_H
#include <stddef.h>
#include <stdint.h>

typedef enum { ST_SPECDEC_NONE = 0, ST_SPECDEC_VLLM, ST_SPECDEC_SGLANG, ST_SPECDEC_LLAMACPP } st_specdec_engine;

typedef struct st_specdec {
    st_specdec_engine engine;
    char method[48]; /* "ngram", "eagle3", "draft_model", "EAGLE", "draft-simple", ... */
    int draft_free;  /* n-gram / suffix lookup: no draft model; acceptance computable offline (vLLM ngram) */
    uint32_t k;      /* draft tokens per step (0: the engine's default) */
    uint32_t lookup_min, lookup_max; /* vLLM ngram's window */
    char draft_model[256];           /* "" when none */
    char summary[400];               /* one line: "vLLM ngram, 4 draft tokens, lookup 5..5" */
} st_specdec;

/* Looks for speculation among argv[0..n) (an engine's flags, or its whole command line).
 * 0 none; 1 found (d filled); -1 invalid, with the reason naming the flag in err. */
int st_specdec_from_argv(const char *const *argv, int n, st_specdec *d, char *err, size_t errlen);

#endif
