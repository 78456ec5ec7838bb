/* A growable list of owned strings (argv tokens, flag lists). A zeroed st_strv is empty. */
#ifndef ST_CORE_STRV_H
#define ST_CORE_STRV_H

typedef struct st_strv {
    char **v;
    int n;
} st_strv;

void st_strv_free(st_strv *v);
/* Appends a copy of s. 0, or -1 when out of memory (v unchanged). */
int st_strv_push(st_strv *v, const char *s);
/* Appends each non-empty field of s split at sep ("a,b,,c": a, b and c). 0, or -1 when out of
 * memory (the fields before it stay). */
int st_strv_push_split(st_strv *v, const char *s, char sep);
/* 1 when v holds a string equal to s. */
int st_strv_has(const st_strv *v, const char *s);

#endif
