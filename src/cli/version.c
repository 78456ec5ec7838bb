#include <stdio.h>

#include "cli/cli.h"
#include "core/version.h"

int cmd_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("servetune %s\n", ST_VERSION);
    return ST_EXIT_OK;
}

int st_cli_usage_error(const char *cmd, const char *reason)
{
    fprintf(stderr, "servetune %s: %s\n", cmd, reason);
    fprintf(stderr, "Try 'servetune %s --help' for more information.\n", cmd);
    return ST_EXIT_USAGE;
}
