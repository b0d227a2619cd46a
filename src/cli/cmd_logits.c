/* cmd_logits.c — `k3 logits` (placeholder until its issue lands). */
#include "cli/cli.h"

#include <stdio.h>

int cmd_logits(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "k3 logits: not built yet\n");
    return 2;
}
