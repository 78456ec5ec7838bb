/* One table drives each subcommand's command line: the options, their help text and
 * their defaults live in a st_opt array; st_opts_parse fills the destinations and
 * st_opts_usage prints the help. Misuse is reported as one line in err (the caller prints
 * it with the usage to stderr and exits 2).
 *
 * Accepted forms: --name value, --name=value, -x value (when short is set), and "--"
 * ending options. Flags take no value. Everything that is not an option is positional. */
#ifndef ST_OPTS_H
#define ST_OPTS_H
#include <stddef.h>
#include <stdio.h>

typedef enum {
    ST_OPT_FLAG,     /* int *: set to ival (1 when ival is 0) */
    ST_OPT_STR,      /* const char **: points into argv */
    ST_OPT_LONG,     /* long *, checked against [min, max] when min < max */
    ST_OPT_DOUBLE,   /* double *, checked against [min, max] when min < max */
    ST_OPT_RATE,     /* double *: positive number or "inf" */
    ST_OPT_DURATION, /* double * seconds: "30", "500ms", "2m" */
    ST_OPT_LIST,     /* st_strlist *: the option may repeat; each value appended */
} st_opt_kind;

#define ST_STRLIST_MAX 64
typedef struct st_strlist {
    const char *v[ST_STRLIST_MAX];
    int n;
} st_strlist;

typedef struct st_opt {
    const char *name; /* long name without the dashes; NULL ends the table */
    char short_name;  /* 0 for none */
    st_opt_kind kind;
    void *dest;
    const char *metavar; /* shown in the help, e.g. "N" or "URL" */
    const char *help;    /* one line; the default is part of the text */
    double min, max;
    int ival;
} st_opt;

typedef struct st_opts_result {
    char **pos; /* positional arguments, in order (allocated array of argv pointers) */
    int npos;
    char **unknown; /* unknown options (only when allow_unknown): "--flag" or "--flag=value" */
    int nunknown;
    int help; /* --help or -h was given */
} st_opts_result;

/* Parses argv[0..argc) (argv[0] is NOT skipped: pass argv+1 for a subcommand's own
 * arguments). With allow_unknown, an unknown --option is collected in result.unknown;
 * when the next word does not start with "-" it is taken as that option's value and
 * collected with it as a separate element. Returns 0, or -1 with a one-line reason in err; on
 * failure res is already freed (and zeroed, so st_opts_result_free on it is harmless). */
int st_opts_parse(const st_opt *opts, int argc, char **argv, int allow_unknown, st_opts_result *res, char *err,
                  size_t errlen);
void st_opts_result_free(st_opts_result *res);
/* Prints "  --name METAVAR   help" lines for the table. */
void st_opts_usage(FILE *f, const st_opt *opts);

#endif
