/* cmd_tokenize.c — `k3 tokenize` (placeholder until its issue lands). */
#include "cli/cli.h"

#include <stdio.h>

int cmd_tokenize(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "k3 tokenize: not built yet\n");
    return 2;
}
