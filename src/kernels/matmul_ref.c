/* matmul_ref.c — scalar reference products: dequantize a row, accumulate in double. */
#include "kernels/matmul.h"
#include "base/mem.h"

#include <stdlib.h>

void k3_matmul_ref(const k3_wmat *W, const float *X, int64_t T, float *Y) {
    int64_t R = W->rows, C = W->cols;
#pragma omp parallel
    {
        float *row = k3_xmalloc(sizeof(float) * (size_t)(C ? C : 1));
#pragma omp for schedule(static)
        for (int64_t r = 0; r < R; r++) {
            k3_wmat_row(W, r, 0, C, row);
            for (int64_t t = 0; t < T; t++) {
                const float *x = X + t * C;
                double acc = 0.0;
                for (int64_t c = 0; c < C; c++) acc += (double)row[c] * (double)x[c];
                Y[t * R + r] = (float)acc;
            }
        }
        free(row);
    }
}

void k3_matvec_ref(const k3_wmat *W, const float *x, float *y) {
    k3_matmul_ref(W, x, 1, y);
}
