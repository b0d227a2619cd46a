/* cmd_bench.c — `k3 bench` (placeholder until its issue lands). */
#include "cli/cli.h"

#include <stdio.h>

int cmd_bench(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "k3 bench: not built yet\n");
    return 2;
}
