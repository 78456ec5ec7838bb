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
