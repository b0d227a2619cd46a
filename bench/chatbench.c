/* chatbench.c — time of rendering one chat request (k3_chat_render: tool
 * results matched to calls and reordered, every message rendered), by
 * process CPU time, best of 3. Used for the 40 000-tool-message figure in
 * docs/chat.md. Not built by the Makefile:
 *
 *     cc -O2 -fopenmp -Iinclude -Isrc bench/chatbench.c build/libk3.a \
 *        -ljansson -lpcre2-8 -lm -lpthread -o build/chatbench
 *     build/chatbench < request.json
 */
#include "base/err.h"
#include "text/chat.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(void) {
    json_error_t e;
    json_t *req = json_loadf(stdin, 0, &e);
    if (!req) {
        fprintf(stderr, "chatbench: %s\n", e.text);
        return 1;
    }
    k3_xtml x;
    k3_xtml_init(&x, NULL);
    double best = 1e30;
    size_t len = 0;
    for (int rep = 0; rep < 3; rep++) {
        clock_t c0 = clock();
        char *p = k3_chat_render(&x, req, &len);
        double dt = (double)(clock() - c0) / CLOCKS_PER_SEC;
        if (!p) {
            fprintf(stderr, "chatbench: %s\n", k3_errmsg());
            return 1;
        }
        free(p);
        if (dt < best) best = dt;
    }
    printf("%zu messages -> %zu prompt bytes: %.3f s cpu (best of 3)\n",
           json_array_size(json_object_get(req, "messages")), len, best);
    json_decref(req);
    return 0;
}
