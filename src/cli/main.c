/* servetune: measure and price LLM serving configurations. main() only dispatches. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/util.h"

#define ST_HELP_WORDS_MAX 4 /* "servetune help trace stats": the words passed on */

static const st_cmd commands[] = {
    { "audit", cmd_audit, "run every configuration of an audit spec, find capacity at the SLO, price it" },
    { "plan", cmd_plan, "the cheapest GPU, quantization and engine limits for an SLO, on the engine model, priced" },
    { "predict", cmd_predict, "the audit of a spec on the engine model in virtual time, in seconds (a prediction)" },
    { "bench", cmd_bench, "drive a running endpoint with an open-loop load and measure it" },
    { "calibrate", cmd_calibrate, "fit the engine model's constants to your own measurements (a calibration file)" },
    { "report", cmd_report, "re-render an audit's reports from its results database" },
    { "trace", cmd_trace,
      "read a trace or a production log: trace stats FILE (rates, lengths, prefixes, advice), trace cost LOG (who pays "
      "for the GPU)" },
    { "gguf", cmd_gguf, "write a GGUF model of a real architecture with random weights (for llama.cpp)" },
    { "version", cmd_version, "print the version" },
    { "emulate", cmd_emulate, "run the vLLM-compatible engine emulator (emulate serve MODEL --gpu NAME)" },
    { NULL, NULL, NULL },
};

static void usage(FILE *f)
{
    fprintf(f, "usage: servetune COMMAND [OPTIONS]\n\n"
               "Measure what an LLM serving configuration is worth: drive an engine with an\n"
               "open-loop streaming load, find its capacity at a latency SLO, and price it.\n\n"
               "Commands:\n");
    for (const st_cmd *c = commands; c->name; c++)
        fprintf(f, "  %-10s %s\n", c->name, c->summary);
    fprintf(f, "\n'servetune COMMAND --help' describes each command.\n");
}

int main(int argc, char **argv)
{
    /* Writes to a closed socket must come back as EPIPE, never kill the process. */
    signal(SIGPIPE, SIG_IGN);
    st_heap_for_runs(); /* predict and plan run simulation after simulation */
    if (argc < 2) {
        usage(stderr);
        return ST_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "help") && argc >= 3) {
        /* "servetune help COMMAND" is "servetune COMMAND --help" */
        for (const st_cmd *c = commands; c->name; c++)
            if (!strcmp(argv[2], c->name)) {
                /* its words (e.g. "trace stats"), then --help */
                char *hv[ST_HELP_WORDS_MAX + 2];
                int n = 0;
                for (int i = 2; i < argc && n < ST_HELP_WORDS_MAX; i++)
                    hv[n++] = argv[i];
                hv[n++] = "--help";
                hv[n] = NULL;
                return c->fn(n, hv);
            }
        fprintf(stderr, "servetune: unknown command '%s'\n", argv[2]);
        usage(stderr);
        return ST_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return ST_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version"))
        return cmd_version(argc - 1, argv + 1);
    for (const st_cmd *c = commands; c->name; c++)
        if (!strcmp(argv[1], c->name))
            return c->fn(argc - 1, argv + 1);
    fprintf(stderr, "servetune: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return ST_EXIT_USAGE;
}
