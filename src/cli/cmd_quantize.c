/* cmd_quantize.c — `k3 quantize` (placeholder until its issue lands). */
#include "cli/cli.h"

#include <stdio.h>

int cmd_quantize(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "k3 quantize: not built yet\n");
    return 2;
}
