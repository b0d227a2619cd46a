/* cmd_chat.c — `k3 chat` (placeholder until its issue lands). */
#include "cli/cli.h"

#include <stdio.h>

int cmd_chat(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "k3 chat: not built yet\n");
    return 2;
}
