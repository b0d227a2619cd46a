/* tmatmul.h — the transposed weight product Y = X W (X [T, W.rows], Y [T,
 * W.cols]): each row of W is decoded once and added into every token's
 * output. The absorbed MLA path needs it where W_UK is stored [nope, r] and
 * the query must be folded through it the other way.
 *
 * The AVX2 version adds in f32 lanes (one FMA per element and row, rows in
 * order), the reference in double; a token's result depends on its own row
 * of X alone, never on T, the token blocks or the threads. */
#ifndef K3_KERNELS_TMATMUL_H
#define K3_KERNELS_TMATMUL_H

#include "quant/wmat.h"

/* Widest W (cols) the AVX2 version takes: its decoded row lives on the
 * stack. Wider matrices use the reference. */
#define K3_TMATMUL_MAX_COLS 4096

/* Y[t, c] = sum_r W[r, c] X[t, r], blocks of tokens split over threads. */
void k3_tmatmul(const k3_wmat *W, const float *X, int64_t T, float *Y);
/* The same bits on the calling thread alone. */
void k3_tmatmul_serial(const k3_wmat *W, const float *X, int64_t T, float *Y);
/* The reference: accumulated in double. */
void k3_tmatmul_ref(const k3_wmat *W, const float *X, int64_t T, float *Y);

#endif
