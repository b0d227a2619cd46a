/* states.c — sequence state blocks: the kept spares and the reserve (model.h).
 *
 * Every sequence of a model has a state block of the same size: every KDA
 * layer's conv and recurrent state (at K3's real size 465 MB). A fresh block
 * costs a page fault per page on its first touch; on a VM that hands freed
 * memory back to its host (free page reporting) that is ~11 ms for the bench
 * preset's 3.4 MB, against ~0.6 ms to copy into a block already touched.
 * k3 serve's prompt cache makes one per snapshot and per restore, so a burst
 * of new requests waits on those faults before its first token.
 *
 * So a freed block is kept for the next sequence (K3_SPARE_STATES blocks and
 * K3_SPARE_BYTES at most), and a caller with idle time (the server's worker
 * between requests) can ask for a reserve: k3_model_state_reserve sets how
 * many bytes of blocks to keep ready, k3_model_state_refill faults in the
 * next piece of one more block while fewer are kept. Freed blocks are then
 * kept up to the reserve as well. Memory stays at the high-water mark the
 * caller allowed. */
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "model/model.h"

static int64_t kda_P(const k3_config *c) {
    return (int64_t)c->kda_heads * c->kda_head_dim;
}

int64_t k3_kda_conv_floats(const k3_config *c) {
    return ((c->kda_conv_kernel - 1) * 3 * kda_P(c) + 1 + 15) & ~(int64_t)15;
}

int64_t k3_kda_S_floats(const k3_config *c) {
    return ((int64_t)c->kda_heads * c->kda_head_dim * c->kda_head_dim + 15) & ~(int64_t)15;
}

size_t k3_model_state_bytes(const k3_model *m) {
    const k3_config *c = m->c;
    int64_t floats = 0;
    for (int i = 0; i < c->num_hidden_layers; i++)
        if (m->L[i].is_kda) floats += k3_kda_conv_floats(c) + k3_kda_S_floats(c);
    return sizeof(float) * (size_t)floats;
}

/* How many freed blocks of `bytes` each are kept (under spare_mu). */
static int keep_limit(const k3_model *m, size_t bytes) {
    int cap = bytes ? (int)(K3_SPARE_BYTES / bytes) : K3_SPARE_STATES;
    if (cap > K3_SPARE_STATES) cap = K3_SPARE_STATES;
    return m->reserve > cap ? m->reserve : cap;
}

float *k3_state_block_take(k3_model *m) {
    pthread_mutex_lock(&m->spare_mu);
    float *p = m->n_spare ? m->spare[--m->n_spare] : NULL;
    pthread_mutex_unlock(&m->spare_mu);
    return p;
}

/* Keep p if fewer than the limit are kept; returns 1 if kept (under spare_mu). */
static int keep_locked(k3_model *m, float *p, size_t bytes) {
    if (m->n_spare >= keep_limit(m, bytes)) return 0;
    if (m->n_spare == m->cap_spare) {
        int cap = m->cap_spare ? 2 * m->cap_spare : K3_SPARE_STATES;
        m->spare = k3_xrealloc(m->spare, sizeof *m->spare * (size_t)cap);
        m->cap_spare = cap;
    }
    m->spare[m->n_spare++] = p;
    return 1;
}

void k3_state_block_give(k3_model *m, float *p, size_t bytes) {
    if (!p) return;
    pthread_mutex_lock(&m->spare_mu);
    int kept = keep_locked(m, p, bytes);
    pthread_mutex_unlock(&m->spare_mu);
    if (!kept) k3_big_free(p);
}

void k3_state_blocks_free(k3_model *m) {
    k3_big_free(m->filling);
    m->filling = NULL;
    for (int i = 0; i < m->n_spare; i++) k3_big_free(m->spare[i]);
    free(m->spare);
    m->spare = NULL;
    m->n_spare = m->cap_spare = 0;
}

void k3_model_state_reserve(k3_model *m, size_t bytes, int max_blocks) {
    size_t block = k3_model_state_bytes(m);
    size_t n = block ? bytes / block : 0;
    if (max_blocks < 0) max_blocks = 0;
    pthread_mutex_lock(&m->spare_mu);
    m->reserve = n > (size_t)max_blocks ? max_blocks : (int)n;
    while (m->n_spare > keep_limit(m, block)) k3_big_free(m->spare[--m->n_spare]);
    pthread_mutex_unlock(&m->spare_mu);
}

/* A block is faulted in 8 MiB per refill call (m->refill_step; tests make it
 * smaller), so an idle caller that checks for work between calls waits at
 * most ~25 ms on these VMs (at K3's real size one block takes seconds). */
#define REFILL_STEP ((size_t)8 << 20)

int k3_model_state_refill(k3_model *m) {
    size_t block = k3_model_state_bytes(m);
    pthread_mutex_lock(&m->spare_mu);
    int want = block && m->n_spare < m->reserve;
    pthread_mutex_unlock(&m->spare_mu);
    if (!want) { /* full, or the reserve shrank while a block was half done */
        k3_big_free(m->filling);
        m->filling = NULL;
        return 0;
    }
    if (!m->filling) {
        m->filling = k3_big_calloc(block);
        if (!m->filling) return 0; /* out of memory: the reserve is advice */
        m->filled = 0;
    }
    size_t step = m->refill_step ? m->refill_step : REFILL_STEP;
    size_t n = block - m->filled < step ? block - m->filled : step;
    memset((char *)m->filling + m->filled, 0, n); /* the write faults these pages in */
    m->filled += n;
    if (m->filled < block) return 1;
    float *p = m->filling;
    m->filling = NULL;
    pthread_mutex_lock(&m->spare_mu);
    int kept = m->n_spare < m->reserve && keep_locked(m, p, block);
    pthread_mutex_unlock(&m->spare_mu);
    if (!kept) k3_big_free(p);
    return kept;
}

int k3_model_state_kept(k3_model *m) {
    pthread_mutex_lock(&m->spare_mu);
    int n = m->n_spare;
    pthread_mutex_unlock(&m->spare_mu);
    return n;
}
