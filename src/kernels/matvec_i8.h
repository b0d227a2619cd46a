/* matvec_i8.h — the opt-in int8-activation decode path (lossy, off by default).
 *
 * With K3_ACT=int8 (or k3_act_int8_set(1)) decode products on quantized
 * weights quantize the activation vector to int8 per block and use integer
 * dot products (VNNI). It changes results slightly, so it is never the
 * default; k3_matvec asks k3_i8_supports() first and falls back otherwise.
 *
 * Arithmetic (the same in the scalar reference and the AVX-512 VNNI kernel):
 *   x is cut into blocks of 32; block b gets d_b = max|x_b| / 127 and
 *   q_c = round-half-even(x_c * (127 / max|x_b|)) in [-127, 127] (0 for an
 *   all-zero block), so x^_c = d_b q_c and |x_c - x^_c| <= d_b / 2.
 *   Affine weights (w = s_g code + b_g per group g):
 *     y = sum_g s_g * sum_{b in g} d_b * dot(code, q)_b + b_g * xs_g,
 *     xs_g = sum_{b in g} d_b * sum(q_b)   (the *quantized* sums: see below)
 *   MXFP4 (w = 2^(e_b-127) * E2M1): y = sum_b 2^(e_b-128) d_b dot(2*E2M1, q)_b.
 * With the quantized sums the path computes exactly W x^ (up to f32
 * rounding), so |y - W x| <= sum_b (d_b / 2) sum_{c in b} |w_c|. Using the
 * exact f32 sums of x instead would leave the error sum_c s_g code_c (x_c -
 * x^_c), whose weights s*code (0 .. s(2^bits-1)) are on average about twice
 * as large as |w| (centered by the bias): the quantized sums are the more
 * accurate choice, and they keep the simple bound.
 *
 * Handled: MLX affine bits 2, 3, 4, 5, 6, 8 with group 32/64/128 and
 * bf16/f16/f32 scales, and MXFP4 of 256 columns or more (narrower MXFP4
 * views, the experts' down blocks, run faster with f32 activations: matvec_i8.c)
 * — on CPUs with AVX-512 VNNI and VBMI (Ice Lake and later, Zen 4);
 * K3_KERNELS=avx2 or ref turns the path off.
 * Threads split rows (k3_parallel_rows): results do not depend on the
 * thread count. The activation is quantized once per product by the calling
 * thread into its scratch, before the rows are split.
 *
 * Note for callers that run products inside their own parallel region (a
 * serial matvec entry): the hook is in matmul.c's matvec_fast; a new entry
 * should call k3_matvec_i8 under the same condition. */
#ifndef K3_KERNELS_MATVEC_I8_H
#define K3_KERNELS_MATVEC_I8_H

#include "kernels/runtime.h"
#include "quant/wmat.h"

/* Columns per activation block (one d_b). */
#define K3_I8_BLOCK 32

/* The switch (k3_act_int8, k3_act_int8_set) is in runtime.h. */
/* 1 if the path is on and has a kernel for W on this CPU. */
int k3_i8_supports(const k3_wmat *W);
/* 1 if there is a kernel for W's format and shape, whatever the switch and the CPU. */
int k3_i8_format_ok(const k3_wmat *W);
/* y = W x through the int8 path (threads over rows like k3_matvec). Needs k3_i8_supports(W). */
void k3_matvec_i8(const k3_wmat *W, const float *x, float *y);

/* The scalar reference of the same arithmetic (any CPU; needs k3_i8_format_ok(W)). */
void k3_matvec_i8_ref(const k3_wmat *W, const float *x, float *y);

/* Quantize x[0..n) (n a multiple of 32): q[n], d[n/32], isum[n/32] = sum of q per block. */
void k3_i8_quantize_ref(const float *x, int64_t n, int8_t *q, float *d, int32_t *isum);
/* Bitwise the same as k3_i8_quantize_ref, AVX-512 (needs VNNI + VBMI, as the kernel). */
void k3_i8_quantize_avx512(const float *x, int64_t n, int8_t *q, float *d, int32_t *isum);
/* xs[g] = sum_{b in g} d_b * isum_b in f32, blocks in ascending order (group a multiple of 32). */
void k3_i8_group_sums(const float *d, const int32_t *isum, int64_t n, int group, float *xs);

/* The AVX-512 VNNI kernel behind k3_matvec_i8 (matvec_i8_avx512.c). */
void k3_matvec_i8_avx512(const k3_wmat *W, const float *x, float *y);
/* k3_matvec_colblocks_serial (matmul.h) on this path: bitwise k3_matvec_i8 on
 * each block's column view, each row read once for all its blocks. Needs
 * k3_i8_supports on the block view; 0 (nothing done) for more than 16 blocks. */
int k3_matvec_i8_colblocks_avx512(const k3_wmat *W, int nb, const float *const *xb,
                                  float *const *y);

#endif
