/* matmul.h — products of a k3_wmat with f32 activations.
 *
 * k3_matvec / k3_matmul are the entry points the model uses; they pick the
 * fastest kernel for the format and CPU and split rows over OpenMP threads.
 * The *_ref functions are the scalar references every fast path is tested
 * against (dequantize a row, accumulate in double). */
#ifndef K3_KERNELS_MATMUL_H
#define K3_KERNELS_MATMUL_H

#include "quant/wmat.h"

/* y[r] = sum_c W[r,c] x[c], r in [0, rows). */
void k3_matvec(const k3_wmat *W, const float *x, float *y);
/* Y[t, r] = sum_c W[r,c] X[t, c] for t in [0,T). X is [T, cols], Y is [T, rows]. */
void k3_matmul(const k3_wmat *W, const float *X, int64_t T, float *Y);

void k3_matvec_ref(const k3_wmat *W, const float *x, float *y);
void k3_matmul_ref(const k3_wmat *W, const float *X, int64_t T, float *Y);

#endif
