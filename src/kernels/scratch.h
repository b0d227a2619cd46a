/* scratch.h — per-thread reusable buffers for kernels.
 *
 * Kernels need small temporaries (a dequantized row panel, per-group sums of
 * x). Allocating them per call would put malloc in the token loop, so each
 * thread keeps a few buffers that only grow: after the first call of a given
 * size no allocation happens. Freed at thread exit. */
#ifndef K3_KERNELS_SCRATCH_H
#define K3_KERNELS_SCRATCH_H

#include <stddef.h>
#include <stdint.h>

enum {
    K3_SCRATCH_PANEL = 0,
    K3_SCRATCH_XPERM_T, /* few-token bf16: the tokens' de-interleaved activations */
    K3_SCRATCH_XPERM_B, /* few-token column blocks: every block's prepared activations */
    K3_SCRATCH_ROWSC,
    K3_SCRATCH_KDA,  /* model/kda.c: one layer's activations (main thread) */
    K3_SCRATCH_XTOK, /* the token-lane product: the tokens' transposed activations */
    K3_SCRATCH_N
};

/* A 64-byte aligned buffer of at least `bytes` for this thread in slot `slot`
 * (contents undefined). Dies on out-of-memory (the sizes are tiny). */
void *k3_scratch(int slot, size_t bytes);

/* Prepared activations kept across the claims of one parallel loop.
 *
 * A decode product prepares its activation before it reads a weight: the
 * affine kernels sum x per group, the affine 2-6 bit and MXFP4 kernels
 * permute it into their lane order, the int8 path quantizes it. The work-
 * stealing loops (mvset.c, model/rowpar.c, model/moe.c) call a product's
 * serial form once per claim of ~64 KiB of rows, so without a memory of it the
 * preparation ran once per claim: on the real slice's 4-bit 7168-column rows,
 * once per 16 rows, and 42% of the decode time went to permuting x.
 *
 * Between k3_prep_open() and k3_prep_close() on one thread the caller promises
 * that no activation a kernel reads changes. k3_prep_buf then keeps each
 * preparation, keyed by its kind, the input's address and a shape word that
 * holds every other parameter the preparation depends on, and hands it back
 * ready on the next call with the same key: the same bits, since a
 * preparation is a function of the input alone. Outside such a span, or after
 * any open or close, nothing is reused. */
enum { /* one per layout: the AVX2 and AVX-512 kernels permute differently */
       K3_PREP_AFFINE = 1,
       K3_PREP_AFFINE8,
       K3_PREP_MXFP4,
       K3_PREP_I8,
       K3_PREP_I8_BLOCKS,
       K3_PREP_AVX2_PLANES,
       K3_PREP_AVX2_XSUM,
       K3_PREP_AVX2_MXFP4,
       K3_PREP_BF16_FEW
};

void k3_prep_open(void);
void k3_prep_close(void);

/* A 64-byte aligned buffer of `bytes` for (kind, x, shape): *ready is 1 when
 * it holds that preparation already, else 0 and the caller fills it now,
 * before its next k3_prep_buf call on this thread. */
void *k3_prep_buf(int kind, const void *x, uint64_t shape, size_t bytes, int *ready);

/* A shape word: the columns and up to three small parameters (each < 256). */
static inline uint64_t k3_prep_shape(int64_t cols, int a, int b, int c) {
    return (uint64_t)cols | (uint64_t)(a & 255) << 40 | (uint64_t)(b & 255) << 48 |
           (uint64_t)(c & 255) << 56;
}

/* The same for column blocks xb[0..nb) of bc columns each: 0 (do not keep)
 * unless they lie end to end from xb[0], so that xb[0] names them all. */
static inline uint64_t k3_prep_blocks_shape(const float *const *xb, int nb, int64_t bc, int a,
                                            int b) {
    for (int i = 1; i < nb; i++)
        if (xb[i] != xb[0] + i * bc) return 0;
    return k3_prep_shape(bc, a, b, nb);
}

#endif
