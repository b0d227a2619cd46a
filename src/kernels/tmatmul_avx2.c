/* tmatmul_avx2.c — the AVX2 token block of the transposed weight product
 * (tmatmul.h): each row of W decoded once, then added into every token's
 * output row in f32 lanes. */
#include "kernels/avx2.h"
#include "kernels/tmatmul.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#define TM_AVX2 __attribute__((target("avx2,fma")))

TM_AVX2 static void axpy1_avx2(float *y, float w, const float *x, int n) {
    __m256 wv = _mm256_set1_ps(w);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i,
                         _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] = fmaf(w, x[i], y[i]);
}

/* Tokens [t0, t1) of Y[T, W.cols] = X W (X [T, W.rows]). */
TM_AVX2 void k3_tmatmul_block_avx2(const k3_wmat *W, const float *X, int64_t t0, int64_t t1,
                                   float *Y) {
    int64_t R = W->rows, C = W->cols;
    float row[K3_TMATMUL_MAX_COLS];
    memset(Y + t0 * C, 0, sizeof(float) * (size_t)((t1 - t0) * C));
    for (int64_t r = 0; r < R; r++) {
        k3_wmat_row(W, r, 0, C, row);
        for (int64_t t = t0; t < t1; t++) axpy1_avx2(Y + t * C, X[t * R + r], row, (int)C);
    }
}
