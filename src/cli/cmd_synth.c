/* cmd_synth.c — `k3 synth` (placeholder until its issue lands). */
#include "cli/cli.h"

#include <stdio.h>

int cmd_synth(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "k3 synth: not built yet\n");
    return 2;
}
