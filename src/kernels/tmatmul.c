/* tmatmul.c — the transposed weight product (see tmatmul.h): the reference,
 * and the run-time choice of it or the AVX2 token blocks, split over threads
 * a block of tokens each. */
#include "kernels/tmatmul.h"
#include "base/mem.h"
#include "base/par.h"
#include "kernels/avx2.h"
#include "kernels/runtime.h"

#include <stdlib.h>

#define TMAT_TOKENS 64 /* tokens per block: each block decodes W once */

/* Reads each row of W once and scatters it into every output row (axpy form),
 * accumulating in double. */
void k3_tmatmul_ref(const k3_wmat *W, const float *X, int64_t T, float *Y) {
    int64_t R = W->rows, C = W->cols;
    double *acc = k3_xcalloc((size_t)(T * C > 0 ? T * C : 1), sizeof *acc);
    float *row = k3_xmalloc(sizeof(float) * (size_t)(C ? C : 1));
    for (int64_t r = 0; r < R; r++) {
        k3_wmat_row(W, r, 0, C, row);
        for (int64_t t = 0; t < T; t++) {
            double xv = X[t * R + r];
            double *a = acc + t * C;
            for (int64_t c = 0; c < C; c++) a[c] += xv * row[c];
        }
    }
    for (int64_t i = 0; i < T * C; i++) Y[i] = (float)acc[i];
    free(row);
    free(acc);
}

static int use_ref(const k3_wmat *W) {
    return k3_kernels_active() == K3_KERNELS_REF || W->cols > K3_TMATMUL_MAX_COLS;
}

static void block(const k3_wmat *W, const float *X, int64_t T, int64_t b, float *Y) {
    int64_t t1 = (b + 1) * TMAT_TOKENS;
    k3_tmatmul_block_avx2(W, X, b * TMAT_TOKENS, t1 < T ? t1 : T, Y);
}

void k3_tmatmul_serial(const k3_wmat *W, const float *X, int64_t T, float *Y) {
    if (use_ref(W)) {
        k3_tmatmul_ref(W, X, T, Y);
        return;
    }
    for (int64_t b = 0; b < (T + TMAT_TOKENS - 1) / TMAT_TOKENS; b++) block(W, X, T, b, Y);
}

void k3_tmatmul(const k3_wmat *W, const float *X, int64_t T, float *Y) {
    int64_t nblk = (T + TMAT_TOKENS - 1) / TMAT_TOKENS;
    if (use_ref(W) || !k3_par_worth(nblk > 1)) { /* no region of one thread (base/par.h) */
        k3_tmatmul_serial(W, X, T, Y);
        return;
    }
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t b = 0; b < nblk; b++) block(W, X, T, b, Y);
}
