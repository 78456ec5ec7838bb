#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/version.h"

int cmd_version(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("Usage: servetune version\nPrints servetune's version and exits 0.\n");
            return ST_EXIT_OK;
        }
        fprintf(stderr, "servetune version: unexpected argument '%s' (usage: servetune version)\n", argv[i]);
        return ST_EXIT_USAGE;
    }
    printf("servetune %s\n", ST_VERSION);
    return ST_EXIT_OK;
}
