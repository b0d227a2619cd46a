/* ids.c — the growable id list (ids.h). */
#include "text/ids.h"

#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

void k3_ids_push(k3_ids *v, int32_t id) {
    if (v->n == v->cap) {
        v->cap = v->cap ? v->cap * 2 : 64;
        v->ids = k3_xrealloc(v->ids, sizeof(int32_t) * v->cap);
    }
    v->ids[v->n++] = id;
}

void k3_ids_free(k3_ids *v) {
    free(v->ids);
    memset(v, 0, sizeof *v);
}
