/* cmd_generate.c — `k3 generate` (placeholder until its issue lands). */
#include "cli/cli.h"

#include <stdio.h>

int cmd_generate(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "k3 generate: not built yet\n");
    return 2;
}
