/* chat_effort.c — OpenAI's reasoning_effort values on K3's thinking
 * (chat.h): the one mapping that the renderer and every API route share. */
#include <string.h>

#include "text/chat.h"

int k3_chat_effort_map(const char *v, const char **effort) {
    static const char *const map[][2] = {{"minimal", "low"}, {"low", "low"},   {"medium", "high"},
                                         {"high", "high"},   {"xhigh", "max"}, {"max", "max"}};
    if (!strcmp(v, "none")) return 0;
    for (size_t i = 0; i < sizeof map / sizeof *map; i++)
        if (!strcmp(v, map[i][0])) return *effort = map[i][1], 1;
    return -1;
}
