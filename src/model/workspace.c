/* workspace.c — grow-only scratch buffers of the forward pass (workspace.h):
 * a buffer is reallocated only when a pass needs more than it holds, and every
 * growth is counted so tests can check that decoding allocates nothing. */
#include "model/workspace.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_uint_fast64_t g_grows;

void k3_workspace_count_grow(void) {
    atomic_fetch_add(&g_grows, 1);
}

uint64_t k3_workspace_grows(void) {
    return (uint64_t)atomic_load(&g_grows);
}

void *k3_grow(k3_grow_buf *b, size_t bytes) {
    if (bytes <= b->cap && b->p) return b->p;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < bytes) cap *= 2; /* doubling: a few grows, then none */
    free(b->p);
    b->p = aligned_alloc(64, cap);
    if (!b->p) {
        fprintf(stderr, "k3: out of memory (workspace of %zu bytes)\n", cap);
        abort();
    }
    b->cap = cap;
    k3_workspace_count_grow();
    return b->p;
}

void k3_workspace_free(k3_workspace *ws) {
    free(ws->act.p);
    free(ws->blocks.p);
    free(ws->head.p);
    free(ws->batch.p);
    for (int i = 0; i < K3_MLA_WS_N; i++) free(ws->mla[i].p);
    memset(ws, 0, sizeof *ws);
}
