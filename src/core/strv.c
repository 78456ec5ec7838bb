#include "core/strv.h"

#include <stdlib.h>
#include <string.h>

void st_strv_free(st_strv *v)
{
    for (int i = 0; i < v->n; i++)
        free(v->v[i]);
    free(v->v);
    v->v = NULL;
    v->n = 0;
}

int st_strv_push(st_strv *v, const char *s)
{
    char **nv = realloc(v->v, sizeof(char *) * (size_t)(v->n + 1));
    if (!nv)
        return -1;
    v->v = nv;
    if (!(v->v[v->n] = strdup(s)))
        return -1;
    v->n++;
    return 0;
}

int st_strv_push_split(st_strv *v, const char *s, char sep)
{
    const char seps[2] = { sep, '\0' };
    for (const char *p = s; *p;) {
        size_t len = strcspn(p, seps);
        if (len) {
            char *field = strndup(p, len);
            int bad = !field || st_strv_push(v, field);
            free(field);
            if (bad)
                return -1;
        }
        p += len + (p[len] == sep);
    }
    return 0;
}

int st_strv_has(const st_strv *v, const char *s)
{
    for (int i = 0; i < v->n; i++)
        if (!strcmp(v->v[i], s))
            return 1;
    return 0;
}
