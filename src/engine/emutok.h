/* The emulator's tokenizer (engine/emu_server.h serves it on /tokenize; the load uses it to
 * count a trace's text against the emulator). Pure. */
#ifndef ST_ENGINE_EMUTOK_H
#define ST_ENGINE_EMUTOK_H
#include <stddef.h>
#include <stdint.h>

/* The deterministic tokenizer: one token per whitespace-separated word. A word of 1-4
 * lower-case letters is read as a bijective base-26 number and, when below vocab, is that
 * id; any other word is hashed into [1000, vocab). st_emutok_word writes the canonical word
 * of an id, so tokenize(detokenize(ids)) == ids. */
uint32_t st_emutok_count(const char *text, size_t len);
/* The id of one word (n bytes, no white space). */
uint32_t st_emutok_word_id(const char *w, size_t n, uint32_t vocab);
/* Fills ids (at most max); returns the number of tokens (may exceed max: only max written). */
uint32_t st_emutok_encode(const char *text, size_t len, uint32_t vocab, uint32_t *ids, uint32_t max);
/* Writes the word of id into out (NUL-terminated, at most 8 bytes); returns its length. */
int st_emutok_word(uint32_t id, char out[8]);

#endif
