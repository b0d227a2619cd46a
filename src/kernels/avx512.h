/* avx512.h — optional AVX-512 decode kernels (internal to src/kernels).
 *
 * Quantized decode is instruction-bound in AVX2 (see matvec_quant_avx2.c).
 * Of the decode kernels the MXFP4 and affine 8-bit matvecs have AVX-512
 * versions (where they measured faster); the prefill tile has one for every
 * format (FMA-bound, where 16 lanes pay).
 * Chosen at run time when the CPU has AVX-512 F+BW (K3_KERNELS=avx2 forbids
 * it). Same determinism as the AVX2 kernels: results do not depend on the
 * thread count (they differ from the AVX2 results in rounding only). */
#ifndef K3_KERNELS_AVX512_H
#define K3_KERNELS_AVX512_H

#include "kernels/runtime.h" /* k3_cpu_has_avx512 */
#include "quant/wmat.h"

/* 1 if k3_matvec_avx512 handles W (MXFP4 with cols % 32 == 0, affine 8-bit, affine
 * 2/4-bit, and 3/5/6-bit where the CPU has AVX-512 VBMI). */
int k3_avx512_supports(const k3_wmat *W);
void k3_matvec_avx512(const k3_wmat *W, const float *x, float *y);
/* k3_matvec_colblocks_serial (matmul.h) for what k3_matvec_avx512 handles:
 * bitwise k3_matvec_avx512 on each block's column view, each row read once
 * for all its blocks; 0 (nothing done) for a shape the format's kernel does
 * not take (see below; affine 8-bit: over 16 blocks). */
int k3_matvec_colblocks_avx512(const k3_wmat *W, int nb, const float *const *xb, float *const *y);
/* The MXFP4 case of k3_matvec_avx512 (matvec_mxfp4_avx512.c). */
void k3_matvec_mxfp4_avx512(const k3_wmat *W, const float *x, float *y);
/* k3_matvec_colblocks_serial (matmul.h) for MXFP4, bitwise k3_matvec_mxfp4_avx512
 * on each block's column view; 0 (nothing done) for a shape it does not take
 * (blocks not whole groups, over 16 blocks, rows over 1024 groups). */
int k3_matvec_mxfp4_colblocks_avx512(const k3_wmat *W, int nb, const float *const *xb,
                                     float *const *y);
/* The affine 2/3/4/5/6-bit case (matvec_affine_avx512.c) and its shape/CPU test. */
int k3_avx512_affine_supports(const k3_wmat *W);
void k3_matvec_affine_avx512(const k3_wmat *W, const float *x, float *y);
/* k3_matvec_colblocks_serial (matmul.h) for affine 2/3/4/5/6-bit, bitwise
 * k3_matvec_affine_avx512 on each block's column view; 0 (nothing done) for a
 * shape it does not take (blocks not whole 16-lane blocks, over 16 blocks). */
int k3_matvec_affine_colblocks_avx512(const k3_wmat *W, int nb, const float *const *xb,
                                      float *const *y);
/* The prefill tile in 16-lane registers (matmul_avx512.c): every format the
 * AVX2 kernels support (same decoder), bitwise equal to k3_matmul_avx2. */
void k3_matmul_avx512(const k3_wmat *W, const float *X, int64_t T, float *Y);
/* The same product with tokens in the lanes (matmul_tok_avx512.c): no weight
 * transpose, the activations transposed once per call; bitwise equal to
 * k3_matmul_avx512. For a few dozen tokens, where packing the panel weighs. */
void k3_matmul_tok_avx512(const k3_wmat *W, const float *X, int64_t T, float *Y);
/* The few-token product (matmul_few_avx512.c): weights read in place, no
 * panel; token t's result depends on W's row and X's token t alone (not on
 * T, the row range or threads). Serial. Any T; meant for T <= 16. */
int k3_few_avx512_supports(const k3_wmat *W);
/* MXFP4 codes decoded with AVX-512 VBMI where the CPU has it (1, the
 * default) or without (0): the same floats, so the same bits (tests). */
void k3_few_avx512_set_vbmi(int on);
void k3_matmul_few_avx512(const k3_wmat *W, const float *X, int64_t T, float *Y);
/* X as the rows kernel reads it: X itself, or for bf16 the tokens
 * de-interleaved per 32 columns in this thread's scratch (valid until the
 * thread's next prepare; other threads may read it meanwhile). */
const float *k3_few_avx512_prepare(const k3_wmat *W, const float *X, int64_t T);
/* Rows [r0, r1) of Y [T, W->rows] only (a thread's share), on prepared X. */
void k3_matmul_few_rows_avx512(const k3_wmat *W, int64_t r0, int64_t r1, const float *Xp, int64_t T,
                               float *Y);
/* Floats X takes once prepared (0: the kernel reads X itself), and the
 * preparation into a buffer of the caller's (several at once: the column
 * blocks of k3_matmul_few_colblocks_serial). */
int64_t k3_few_avx512_prepared_floats(const k3_wmat *W, int64_t T);
void k3_few_avx512_prepare_into(const k3_wmat *W, const float *X, int64_t T, float *Xp);
/* The bf16 case (matmul_few_bf16_avx512.c). */
const float *k3_few_bf16_prepare(const k3_wmat *W, const float *X, int64_t T);
int64_t k3_few_bf16_prepared_floats(const k3_wmat *W, int64_t T);
void k3_few_bf16_prepare_into(const k3_wmat *W, const float *X, int64_t T, float *xd);
/* k3_matvec of a bf16 W (of K3_BF16_FEW_MIN_COLS columns or more) through
 * the few-token tile (T = 1): bitwise the row
 * of k3_matmul_few for any T, so a decode step and a verify pass give a
 * token the same dense products; threads split the rows in 16-row blocks
 * (k3_parallel_rows), which changes no bit. On Zen 4 one core streamed
 * 16384 x 7168 from memory at 24 GB/s this way against 11 GB/s through the
 * AVX2 row dots (bench/kmicro.c). */
void k3_matvec_bf16_few_avx512(const k3_wmat *W, const float *x, float *y);
/* Rows of at least this many columns: on narrower ones (the bench preset's
 * 256-column expert down rows) the tile's per-16-row sums cost more than the
 * row dots (512 x 256 from L2: 27-30 against 42 GB/s; the bench preset's
 * decode ran 0.72x with every bf16 row on the tile, 1.07x with this bound). */
#define K3_BF16_FEW_MIN_COLS 1024
/* 1 if k3_matvec_bf16_few_avx512 takes W: bf16 of K3_BF16_FEW_MIN_COLS
 * columns or more (the AVX-512 float row of table.c asks it for f32 and f16
 * too, which keep the row dots). */
int k3_bf16_few_supports(const k3_wmat *W);
void k3_matmul_few_bf16_rows(const k3_wmat *W, int64_t r0, int64_t r1, const float *xd, int64_t T,
                             float *Y);

#endif
