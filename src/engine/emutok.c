#include "engine/emutok.h"

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

uint32_t st_emutok_count(const char *text, size_t len) { return st_emutok_encode(text, len, 0, NULL, 0); }

uint32_t st_emutok_word_id(const char *w, size_t n, uint32_t vocab)
{
    if (n >= 1 && n <= 4) {
        uint64_t v = 0;
        size_t k = 0;
        for (; k < n && w[k] >= 'a' && w[k] <= 'z'; k++)
            v = v * 26 + (uint64_t)(w[k] - 'a' + 1);
        if (k == n && v >= 1 && v - 1 < vocab)
            return (uint32_t)(v - 1);
    }
    uint64_t h = 1469598103934665603ULL;
    for (size_t k = 0; k < n; k++)
        h = (h ^ (unsigned char)w[k]) * 1099511628211ULL;
    uint32_t lo = vocab > 2000 ? 1000 : 0;
    return lo + (uint32_t)(h % (vocab - lo));
}

uint32_t st_emutok_encode(const char *text, size_t len, uint32_t vocab, uint32_t *ids, uint32_t max)
{
    uint32_t n = 0;
    for (size_t i = 0; i < len;) {
        while (i < len && is_space(text[i]))
            i++;
        if (i >= len)
            break;
        size_t s = i;
        while (i < len && !is_space(text[i]))
            i++;
        if (n < max)
            ids[n] = st_emutok_word_id(text + s, i - s, vocab);
        n++;
    }
    return n;
}

int st_emutok_word(uint32_t id, char out[8])
{
    uint64_t v = (uint64_t)id + 1;
    char tmp[8];
    int n = 0;
    while (v > 0 && n < 7) {
        uint64_t r = (v - 1) % 26;
        tmp[n++] = (char)('a' + r);
        v = (v - 1) / 26;
    }
    for (int i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    out[n] = 0;
    return n;
}
