/* Models of real architectures with random weights, as GGUF descriptions that llama.cpp loads:
 * the shapes, metadata and tensor names of Llama and Qwen2 (llama.cpp src/models/llama.cpp,
 * src/models/qwen2.cpp, src/llama-arch.cpp, src/llama-model.cpp's load_hparams), a tokenizer
 * copied from a vocab-only GGUF, and weights drawn from a seeded generator.
 *
 * Timing a serving engine needs the kernels and shapes of a real model, not trained weights:
 * outputs are forced to a fixed length (ignore_eos, n_predict), so the text being noise changes
 * nothing. The weights are small (uniform, standard deviation 0.02, like GPT-2's initialisation;
 * norms at 1) so activations stay finite in f16 and f32.
 *
 * Deterministic: the same shape, vocabulary, type and seed give the same bytes. Each tensor's
 * values come from its own generator seeded with (seed, tensor name), so they do not depend on
 * the order or chunking of the writes. No I/O. */
#ifndef ST_ENGINE_MODELGEN_H
#define ST_ENGINE_MODELGEN_H
#include <stddef.h>
#include <stdint.h>

#include "core/rng.h"
#include "engine/gguf.h"

typedef enum st_mg_arch { ST_MG_LLAMA, ST_MG_QWEN2 } st_mg_arch;

typedef struct st_mg_shape {
    st_mg_arch arch;
    uint32_t n_embd;    /* embedding_length */
    uint32_t n_layer;   /* block_count */
    uint32_t n_head;    /* attention.head_count */
    uint32_t n_head_kv; /* attention.head_count_kv (grouped-query attention when < n_head) */
    uint32_t n_ff;      /* feed_forward_length */
    uint32_t n_ctx;     /* context_length (what the model was "trained" for) */
    double rope_base;   /* rope.freq_base */
    double norm_eps;    /* attention.layer_norm_rms_epsilon */
    int tied;           /* no output.weight: the output reuses token_embd (Qwen2 small models) */
    int qkv_bias;       /* attn_q/k/v.bias (Qwen2) */
} st_mg_shape;

/* Largest shape values accepted (a model of tens of millions to a few billion parameters). */
#define ST_MG_MAX_EMBD 16384u
#define ST_MG_MAX_LAYER 256u
#define ST_MG_MAX_HEAD 256u
#define ST_MG_MAX_FF 65536u
#define ST_MG_MAX_CTX 1048576u

/* The named presets: arch "llama" or "qwen2", size e.g. "30M" (st_mg_presets lists them).
 * 0, or -1 with the known names in err. */
int st_mg_preset(const char *arch, const char *size, st_mg_shape *out, char *err, size_t errlen);
/* One line per preset ("llama 30M  n_embd 384 ...") into out, for --help and --list. */
void st_mg_presets(char *out, size_t n);
const char *st_mg_arch_name(st_mg_arch a);
int st_mg_arch_parse(const char *s, st_mg_arch *out);

/* Checks a shape: ranges, n_embd a multiple of n_head with an even head size, n_head a multiple
 * of n_head_kv, n_embd and n_ff multiples of 32 (whole q4_0/q8_0 blocks per row). */
int st_mg_check(const st_mg_shape *s, char *err, size_t errlen);
/* Parameters of the shape with n_vocab tokens (biases and norms included). */
uint64_t st_mg_params(const st_mg_shape *s, uint64_t n_vocab);

/* The model's GGUF description into out (initialised here): metadata (general.*, the
 * architecture's hyperparameters, every tokenizer.* key of vocab) and tensor infos, 2-D weights
 * of wtype (ST_GGML_F16 or ST_GGML_F32), 1-D tensors f32 (as llama.cpp's converter writes them).
 * vocab must hold tokenizer.ggml.tokens. *n_vocab gets the vocabulary size. 0, or -1 with err. */
int st_mg_build(const st_mg_shape *s, const st_gguf *vocab, uint32_t wtype, const char *name, st_gguf *out,
                uint64_t *n_vocab, char *err, size_t errlen);

/* The fill callback for st_gguf_write over a description made by st_mg_build. */
typedef struct st_mg_filler {
    const st_gguf *g;
    uint64_t seed;
    float logit_scale; /* output_norm's weights (1: like every norm): scales the logits, so the
                          next-token distributions are as concentrated as a trained model's */
    size_t ti;         /* tensor being filled, its next byte and its generator */
    uint64_t next;
    st_rng rng;
} st_mg_filler;
void st_mg_filler_init(st_mg_filler *f, const st_gguf *g, uint64_t seed);
int st_mg_fill(void *ctx, size_t ti, uint64_t off, void *dst, size_t n);

#endif
