/* matmul.h — products of a k3_wmat with f32 activations.
 *
 * k3_matvec / k3_matmul are the entry points the model uses; they pick the
 * fastest kernel for the format and CPU and split rows over OpenMP threads.
 * The *_serial variants run the same kernels on the calling thread only (they
 * never open an OpenMP region) and give the same bits: callers that split
 * work themselves (many small products in one parallel region) use them.
 * The *_ref functions are the scalar references every fast path is tested
 * against (dequantize a row, accumulate in double). */
#ifndef K3_KERNELS_MATMUL_H
#define K3_KERNELS_MATMUL_H

#include "quant/wmat.h"

/* y[r] = sum_c W[r,c] x[c], r in [0, rows). */
void k3_matvec(const k3_wmat *W, const float *x, float *y);
/* Y[t, r] = sum_c W[r,c] X[t, c] for t in [0,T). X is [T, cols], Y is [T, rows]. */
void k3_matmul(const k3_wmat *W, const float *X, int64_t T, float *Y);

/* Bitwise the same as k3_matvec / k3_matmul, on the calling thread alone. */
void k3_matvec_serial(const k3_wmat *W, const float *x, float *y);
void k3_matmul_serial(const k3_wmat *W, const float *X, int64_t T, float *Y);

/* One token against nb column blocks of W (cols = nb * bc): for every row r
 * and block b, y[b][r] = sum_{c < bc} W[r, b*bc + c] xb[b][c], on the calling
 * thread. Bitwise k3_matvec_serial on each block's column view; the float
 * formats, and on AVX-512 MXFP4, affine 2-8 bits and the int8-activation
 * path, read each row once, its blocks in turn, instead of one strided pass
 * per block (the sharded-to-all products of rowpar.h and the routed experts'
 * down products, one decoded token). */
void k3_matvec_colblocks_serial(const k3_wmat *W, int nb, const float *const *xb, float *const *y);

/* Most column blocks k3_matmul_few_colblocks_serial walks together (more:
 * block after block). */
#define K3_COLBLOCKS_MAX 16

/* T tokens against nb column blocks of W (cols = nb * bc): Yb[b] [T, W->rows]
 * = the product of block b's column view with Xb[b] [T, bc], on the calling
 * thread. Bitwise k3_matmul_few on each block's view; on the few-token
 * AVX-512 kernel each block's activations are prepared once and the rows go
 * 16 at a time with every block inside, so each row is read once in address
 * order instead of as nb strided pieces (the down products of a decode
 * batch's experts, model/moe.c). */
void k3_matmul_few_colblocks_serial(const k3_wmat *W, int nb, const float *const *Xb, int64_t T,
                                    float *const *Yb);

/* Few-token product (experts in prefill: a handful of tokens each; a
 * decode batch), on the calling thread: each weight row is decoded once and
 * dotted with all T token vectors, with no k-major panel. Token t's result
 * does not depend on T, the row range or the thread, so not on how many
 * tokens share the call (tests/test_kernels_matmul.c few_rows_same_bits);
 * on AVX-512 it differs from k3_matvec's in rounding only. Any T works; it
 * pays off for T <= ~8 (16 for MXFP4 and the float formats). */
void k3_matmul_few(const k3_wmat *W, const float *X, int64_t T, float *Y);

void k3_matvec_ref(const k3_wmat *W, const float *x, float *y);
void k3_matmul_ref(const k3_wmat *W, const float *X, int64_t T, float *Y);

#endif
