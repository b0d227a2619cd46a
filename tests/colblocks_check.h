/* colblocks_check.h — k3_matvec_colblocks_serial against a per-block product,
 * bit for bit (shared by test_kernels_matmul.c and test_kernels_i8.c). */
#ifndef K3_TESTS_COLBLOCKS_CHECK_H
#define K3_TESTS_COLBLOCKS_CHECK_H

#include "kernels/matmul.h"

#include <stdlib.h>
#include <string.h>

/* The first block (0..nb-1) whose outputs from k3_matvec_colblocks_serial on
 * W with x cut into nb blocks differ from per_block on that block's column
 * view, or -1 when none does. nb <= 32. */
static int colblocks_first_diff(const k3_wmat *W, int nb, const float *x,
                                void (*per_block)(const k3_wmat *, const float *, float *)) {
    const int64_t R = W->rows, bc = W->cols / nb;
    float *ref = malloc(sizeof(float) * (size_t)(nb * R)),
          *got = malloc(sizeof(float) * (size_t)(nb * R));
    const float *xb[32] = {0};
    float *yb[32] = {0};
    for (int b = 0; b < nb; b++) {
        xb[b] = x + b * bc;
        yb[b] = got + b * R;
        k3_wmat v = k3_wmat_cols(W, b * bc, bc);
        per_block(&v, xb[b], ref + b * R);
    }
    k3_matvec_colblocks_serial(W, nb, xb, yb);
    int bad = -1;
    for (int b = 0; b < nb && bad < 0; b++)
        if (memcmp(got + b * R, ref + b * R, sizeof(float) * (size_t)R)) bad = b;
    free(ref), free(got);
    return bad;
}

#endif
