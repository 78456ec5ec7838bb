/* Subcommands. Each lives in src/cli/<name>.c and is listed in main.c's table.
 * A subcommand gets its own arguments (argv[0] is the subcommand name) and returns the
 * process exit status; see docs/exit-codes.md. */
#ifndef ST_CLI_H
#define ST_CLI_H

/* Exit codes shared by every subcommand. */
enum {
    ST_EXIT_OK = 0,
    ST_EXIT_FAIL = 1,           /* the run happened but something failed (see the output) */
    ST_EXIT_USAGE = 2,          /* bad arguments or spec */
    ST_EXIT_CLIENT_LIMITED = 3, /* bench: the load generator could not keep the schedule */
    ST_EXIT_INTERRUPTED = 4,    /* SIGINT/SIGTERM: partial results kept */
};

typedef struct st_cmd {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} st_cmd;

/* Prints "servetune NAME: reason" and the usage hint to stderr; returns ST_EXIT_USAGE. */
int st_cli_usage_error(const char *cmd, const char *reason);

/* Loads and validates an audit spec for audit and predict, its trace included (an unreadable
 * trace is a spec error found before anything starts). 0, or -1 after printing the reason
 * ("file:line: what is wrong") to stderr. */
struct st_spec;
int st_cli_load_spec(const char *path, struct st_spec *spec);

int cmd_version(int argc, char **argv);
int cmd_audit(int argc, char **argv);
int cmd_predict(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_emulate(int argc, char **argv);
int cmd_gguf(int argc, char **argv);

#endif
