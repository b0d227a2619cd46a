/* matmul.c — kernel dispatch for k3_matvec / k3_matmul.
 *
 * Until per-format fast kernels exist, every format uses the scalar reference. */
#include "kernels/matmul.h"

void k3_matvec(const k3_wmat *W, const float *x, float *y) { k3_matvec_ref(W, x, y); }

void k3_matmul(const k3_wmat *W, const float *X, int64_t T, float *Y) {
    k3_matmul_ref(W, X, T, Y);
}
