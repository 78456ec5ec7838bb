#include "core/shquote.h"

#include <string.h>

int st_buf_sh_quote(st_buf *b, const char *s)
{
    if (st_buf_append(b, "'", 1))
        return -1;
    for (const char *p = s ? s : ""; *p;) {
        const char *q = strchr(p, '\'');
        size_t n = q ? (size_t)(q - p) : strlen(p);
        if (st_buf_append(b, p, n))
            return -1;
        if (!q)
            break;
        if (st_buf_append(b, "'\\''", 4))
            return -1;
        p = q + 1;
    }
    return st_buf_append(b, "'", 1);
}

int st_sh_plain(const char *s)
{
    if (!s || !*s)
        return 0;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("@%+=:,./_-", c)))
            return 0;
    }
    return 1;
}
