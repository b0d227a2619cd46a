/* cmd_detokenize.c — `k3 detokenize` (placeholder until its issue lands). */
#include "cli/cli.h"

#include <stdio.h>

int cmd_detokenize(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "k3 detokenize: not built yet\n");
    return 2;
}
