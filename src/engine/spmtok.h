/* A tokenizer read from a GGUF vocabulary (tokenizer.ggml.*): llama.cpp's SentencePiece
 * tokenizer (tokenizer.ggml.model "llama": llama-vocab.cpp, llm_tokenizer_spm_session), so that
 * a trace's text becomes the token ids llama.cpp would feed the model, with no engine running
 * (servetune trace stats --spec, docs/speculative.md). Pure: the caller reads the file.
 *
 * What it does, as llama.cpp does with add_special = false and parse_special = false: a space
 * before the text when tokenizer.ggml.add_space_prefix is true (the default), every ' ' as
 * U+2581, the text split into UTF-8 characters, the adjacent pair whose joined text is a token
 * of highest score merged first (ties: the leftmost), and the pieces that are no token as their
 * bytes' <0xXX> tokens. Not done: user-defined tokens split out before the merge (the shipped
 * SPM vocabularies have none). Other tokenizer models (BPE "gpt2", WordPiece, ...) are refused
 * with the reason. */
#ifndef ST_ENGINE_SPMTOK_H
#define ST_ENGINE_SPMTOK_H
#include <stddef.h>
#include <stdint.h>

#include "engine/gguf.h"

#define ST_SPM_TEXT_MAX ((size_t)64 << 20) /* longest text tokenized at once (bytes) */

typedef struct st_spmtok st_spmtok;

/* The tokenizer of a parsed GGUF file's metadata. NULL with the reason in err. */
st_spmtok *st_spmtok_from_gguf(const st_gguf *g, char *err, size_t errlen);
void st_spmtok_free(st_spmtok *t);
uint32_t st_spmtok_vocab_size(const st_spmtok *t);

/* Tokenizes text[0..len). *ids is grown as needed (realloc: start with NULL and 0); returns the
 * number of ids, or -1 when out of memory, the text is longer than ST_SPM_TEXT_MAX, or a byte has
 * no token (err says which). */
int64_t st_spmtok_encode(st_spmtok *t, const char *text, size_t len, uint32_t **ids, size_t *cap, char *err,
                         size_t errlen);

#endif
