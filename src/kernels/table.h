/* table.h — the per-format kernel table behind matmul.h (private to
 * src/kernels/), in the manner of ggml's type traits: for each weight format
 * and kernel family, the kernels that run each kind of product. matmul.c
 * looks the row up once per call and runs what it names; adding a format
 * means adding its row in table.c (and the kernels it names).
 *
 * A row applies where its family's SIMD kernels take W (takes(W): format and
 * shape); otherwise, and in the reference family, the scalar reference runs
 * (matmul_ref.c). Within a row, a product with several candidate kernels
 * lists them as tiers, best first: the first whose takes(W) holds (NULL:
 * always) runs. */
#ifndef K3_KERNELS_TABLE_H
#define K3_KERNELS_TABLE_H

#include "quant/wmat.h"

typedef int (*k3_takes_fn)(const k3_wmat *W);
typedef void (*k3_mv_fn)(const k3_wmat *W, const float *x, float *y);
typedef void (*k3_mm_fn)(const k3_wmat *W, const float *X, int64_t T, float *Y);
/* One token against nb column blocks (matmul.h); 0: not taken (nothing done). */
typedef int (*k3_cb_fn)(const k3_wmat *W, int nb, const float *const *xb, float *const *y);

typedef struct {
    k3_takes_fn takes;
    k3_mv_fn fn;
} k3_mv_tier;

typedef struct {
    k3_takes_fn takes;
    k3_cb_fn fn; /* NULL: block by block */
} k3_cb_tier;

/* A few-token kernel that runs row ranges on activations prepared once, so
 * threads, or the column blocks of one product, share one preparation. */
typedef struct {
    /* X as rows() reads it: X itself or this thread's scratch. */
    const float *(*prepare)(const k3_wmat *W, const float *X, int64_t T);
    /* Floats the preparation takes (0: rows() reads X itself), and the
     * preparation into a buffer of the caller's. */
    int64_t (*prepared_floats)(const k3_wmat *W, int64_t T);
    void (*prepare_into)(const k3_wmat *W, const float *X, int64_t T, float *Xp);
    /* Rows [r0, r1) of Y [T, W->rows], on the calling thread. */
    void (*rows)(const k3_wmat *W, int64_t r0, int64_t r1, const float *Xp, int64_t T, float *Y);
} k3_few_rows_kernel;

#define K3_TIERS 3

/* One weight format in one kernel family. */
typedef struct {
    k3_takes_fn takes;                  /* the family's kernels take W (NULL: never) */
    k3_mv_tier matvec[K3_TIERS];        /* one token; the last tier takes all */
    k3_cb_tier colblocks[K3_TIERS];     /* one token, column blocks (of the first block's view) */
    k3_mm_fn matmul;                    /* many tokens: the tile */
    k3_mm_fn few;                       /* few tokens on the calling thread (k3_matmul_few) */
    int64_t few_tokens;                 /* k3_matmul runs few_rows up to this many tokens */
    const k3_few_rows_kernel *few_rows; /* NULL: none (few_tokens is 0) */
} k3_fmt_kernels;

/* The row of W's format in the active kernel family (runtime.h). */
const k3_fmt_kernels *k3_kernels_for(const k3_wmat *W);

#endif
