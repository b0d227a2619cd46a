/* cmd_render.c — `k3 render` (placeholder until its issue lands). */
#include "cli/cli.h"

#include <stdio.h>

int cmd_render(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "k3 render: not built yet\n");
    return 2;
}
