/* cmd_serve.c — `k3 serve` (placeholder until its issue lands). */
#include "cli/cli.h"

#include <stdio.h>

int cmd_serve(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "k3 serve: not built yet\n");
    return 2;
}
