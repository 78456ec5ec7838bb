#include "core/opts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/parse.h"
#include "core/util.h"

static const st_opt *find_long(const st_opt *opts, const char *name, size_t len)
{
    for (const st_opt *o = opts; o->name; o++)
        if (strlen(o->name) == len && !strncmp(o->name, name, len))
            return o;
    return NULL;
}

static const st_opt *find_short(const st_opt *opts, char c)
{
    for (const st_opt *o = opts; o->name; o++)
        if (o->short_name && o->short_name == c)
            return o;
    return NULL;
}

static int set_value(const st_opt *o, const char *v, char *err, size_t errlen)
{
    double d;
    long l;
    switch (o->kind) {
    case ST_OPT_FLAG: *(int *)o->dest = o->ival ? o->ival : 1; return 0;
    case ST_OPT_STR: *(const char **)o->dest = v; return 0;
    case ST_OPT_LIST: {
        st_strlist *sl = o->dest;
        if (sl->n >= ST_STRLIST_MAX) {
            st_errf(err, errlen, "--%s: given more than %d times", o->name, ST_STRLIST_MAX);
            return -1;
        }
        sl->v[sl->n++] = v;
        return 0;
    }
    case ST_OPT_LONG:
        if (st_parse_long(v, &l) < 0) {
            st_errf(err, errlen, "--%s: expected an integer, got '%s'", o->name, v);
            return -1;
        }
        if (o->min < o->max && (l < o->min || l > o->max)) {
            st_errf(err, errlen, "--%s: %ld is out of range [%g, %g]", o->name, l, o->min, o->max);
            return -1;
        }
        *(long *)o->dest = l;
        return 0;
    case ST_OPT_DOUBLE:
        if (st_parse_double(v, &d) < 0) {
            st_errf(err, errlen, "--%s: expected a number, got '%s'", o->name, v);
            return -1;
        }
        if (o->min < o->max && (d < o->min || d > o->max)) {
            st_errf(err, errlen, "--%s: %g is out of range [%g, %g]", o->name, d, o->min, o->max);
            return -1;
        }
        *(double *)o->dest = d;
        return 0;
    case ST_OPT_RATE:
        if (st_parse_rate(v, &d) < 0) {
            st_errf(err, errlen, "--%s: expected a positive number or 'inf', got '%s'", o->name, v);
            return -1;
        }
        *(double *)o->dest = d;
        return 0;
    case ST_OPT_DURATION:
        if (st_parse_duration_s(v, &d) < 0) {
            st_errf(err, errlen, "--%s: expected a duration such as 30, 500ms or 2m, got '%s'", o->name, v);
            return -1;
        }
        *(double *)o->dest = d;
        return 0;
    }
    return -1;
}

static int parse(const st_opt *opts, int argc, char **argv, int allow_unknown, st_opts_result *res, char *err,
                 size_t errlen)
{
    memset(res, 0, sizeof *res);
    res->pos = calloc((size_t)argc + 1, sizeof *res->pos);
    res->unknown = calloc((size_t)argc + 1, sizeof *res->unknown);
    if (!res->pos || !res->unknown) {
        st_errf(err, errlen, "out of memory");
        return -1;
    }
    int only_pos = 0;
    for (int i = 0; i < argc; i++) {
        char *a = argv[i];
        if (only_pos || a[0] != '-' || a[1] == '\0') {
            res->pos[res->npos++] = a;
            continue;
        }
        if (!strcmp(a, "--")) {
            only_pos = 1;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            res->help = 1;
            continue;
        }
        const st_opt *o;
        const char *val = NULL;
        if (a[1] == '-') {
            const char *name = a + 2;
            const char *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            o = find_long(opts, name, len);
            if (eq)
                val = eq + 1;
            if (!o) {
                if (!allow_unknown) {
                    st_errf(err, errlen, "unknown option '%.*s'", (int)(len + 2), a);
                    return -1;
                }
                res->unknown[res->nunknown++] = a;
                if (!eq && i + 1 < argc && argv[i + 1][0] != '-')
                    res->unknown[res->nunknown++] = argv[++i];
                continue;
            }
        } else {
            o = a[2] == '\0' ? find_short(opts, a[1]) : NULL;
            if (!o) {
                st_errf(err, errlen, "unknown option '%s'", a);
                return -1;
            }
        }
        if (o->kind == ST_OPT_FLAG) {
            if (val) {
                st_errf(err, errlen, "--%s takes no value", o->name);
                return -1;
            }
        } else if (!val) {
            if (i + 1 >= argc) {
                st_errf(err, errlen, "--%s needs a value (%s)", o->name, o->metavar ? o->metavar : "VALUE");
                return -1;
            }
            val = argv[++i];
        }
        if (set_value(o, val, err, errlen) < 0)
            return -1;
    }
    return 0;
}

int st_opts_parse(const st_opt *opts, int argc, char **argv, int allow_unknown, st_opts_result *res, char *err,
                  size_t errlen)
{
    int rc = parse(opts, argc, argv, allow_unknown, res, err, errlen);
    if (rc < 0)
        st_opts_result_free(res); /* nothing for the caller to free on failure */
    return rc;
}

void st_opts_result_free(st_opts_result *res)
{
    free(res->pos);
    free(res->unknown);
    memset(res, 0, sizeof *res);
}

void st_opts_usage(FILE *f, const st_opt *opts)
{
    for (const st_opt *o = opts; o->name; o++) {
        char lhs[64];
        if (o->short_name)
            snprintf(lhs, sizeof lhs, "-%c, --%s%s%s", o->short_name, o->name, o->kind == ST_OPT_FLAG ? "" : " ",
                     o->kind == ST_OPT_FLAG ? "" : (o->metavar ? o->metavar : "VALUE"));
        else
            snprintf(lhs, sizeof lhs, "    --%s%s%s", o->name, o->kind == ST_OPT_FLAG ? "" : " ",
                     o->kind == ST_OPT_FLAG ? "" : (o->metavar ? o->metavar : "VALUE"));
        fprintf(f, "  %-34s %s\n", lhs, o->help ? o->help : "");
    }
}
