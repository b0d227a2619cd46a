/* scratch.h — per-thread reusable buffers for kernels.
 *
 * Kernels need small temporaries (a dequantized row panel, per-group sums of
 * x). Allocating them per call would put malloc in the token loop, so each
 * thread keeps a few buffers that only grow: after the first call of a given
 * size no allocation happens. Freed at thread exit. */
#ifndef K3_KERNELS_SCRATCH_H
#define K3_KERNELS_SCRATCH_H

#include <stddef.h>

enum {
    K3_SCRATCH_PANEL = 0,
    K3_SCRATCH_XSUM,
    K3_SCRATCH_XPERM,
    K3_SCRATCH_XPERM_T, /* few-token bf16: the tokens' de-interleaved activations */
    K3_SCRATCH_XPERM_B, /* few-token column blocks: every block's prepared activations */
    K3_SCRATCH_ROWSC,
    K3_SCRATCH_I8_Q, /* int8 path: each product's prepared activation (matvec_i8_avx512.c) */
    K3_SCRATCH_KDA,  /* model/kda.c: one layer's activations (main thread) */
    K3_SCRATCH_N
};

/* A 64-byte aligned buffer of at least `bytes` for this thread in slot `slot`
 * (contents undefined). Dies on out-of-memory (the sizes are tiny). */
void *k3_scratch(int slot, size_t bytes);

#endif
