/* avx2.h — the AVX2+FMA kernels behind k3_matvec / k3_matmul (internal to src/kernels).
 *
 * Call only when k3_cpu_has_avx2() and k3_avx2_supports(W). Both split rows
 * over OpenMP threads; every output element is computed by the same
 * instruction sequence whatever the thread count, so threaded results are
 * bitwise identical to single-threaded ones. */
#ifndef K3_KERNELS_AVX2_H
#define K3_KERNELS_AVX2_H

#include "kernels/runtime.h" /* k3_kernels_serial */
#include "quant/wmat.h"

/* Software prefetch distance of the decode kernels that stream at the memory
 * rate (f32/f16/bf16 rows, MXFP4): bytes ahead in the weight stream. The
 * hardware streamer stops at 4 KiB page boundaries of the mapped checkpoint,
 * and at ~30 GB/s per core (Zen 5) 2 KiB covers only ~70 ns of memory
 * latency: one core, thread CPU time, 176 MiB bf16 streaming 18-20 GB/s at
 * 2 KiB, 23-27 at 4 KiB, 26-30 at 8 KiB, 27 at 16 KiB; MXFP4 (93 MiB)
 * 12-15.5 / 14.5-17.6 / 15.6-18.7 / 18.1-18.4 (bench/notes/decode-kernels.md). The affine
 * kernels keep their own 2 KiB (K3_PF_BYTES): 4-bit measured 4% slower at 8. */
#ifndef K3_PF_STREAM_BYTES
#define K3_PF_STREAM_BYTES 8192
#endif

/* 1 if the AVX2 kernels handle W's format and shape (quantized formats need
 * cols to be a multiple of the group size). */
int k3_avx2_supports(const k3_wmat *W);

void k3_matvec_avx2(const k3_wmat *W, const float *x, float *y);
/* k3_matvec_colblocks_serial (matmul.h) for f32/f16/bf16: row by row, each
 * block with the dot k3_matvec_avx2 uses on the block's view. */
void k3_matvec_avx2_float_colblocks(const k3_wmat *W, int nb, const float *const *xb,
                                    float *const *y);
void k3_matmul_avx2(const k3_wmat *W, const float *X, int64_t T, float *Y);
/* k3_matmul_few on the calling thread (matmul.h): row r is decoded once into
 * an L1 buffer and dotted with every token. */
void k3_matmul_few_avx2(const k3_wmat *W, const float *X, int64_t T, float *Y);

/* Affine matvec by digit planes (matvec_quant_avx2.c) for the widths where
 * k3_avx2_digit_planes(bits, cols); other widths use the generic decoder. */
int k3_avx2_digit_planes(int bits, int64_t cols);
void k3_matvec_affine_planes_avx2(const k3_wmat *W, const float *x, float *y);

/* The AVX2 versions of the kda_ops.h ops (kda_ops_avx2.c): the conv of 8
 * channels with kernel 4, and the delta-rule step for dk <= K3_KDA_VEC_MAX_DK. */
void k3_conv8_k4_avx2(float *z, int64_t T, int64_t ld, const float *w, float *state, int64_t sld);
void k3_kda_step_avx2(float *S, int dk, int dv, const float *q, const float *k, const float *v,
                      const float *alpha, float beta, float *y);

/* Tokens [t0, t1) of the transposed product Y = X W (tmatmul.h), in f32
 * lanes; W->cols <= K3_TMATMUL_MAX_COLS. */
void k3_tmatmul_block_avx2(const k3_wmat *W, const float *X, int64_t t0, int64_t t1, float *Y);

/* The inputs of a row-parallel product, passed to the row-range workers. */
typedef struct {
    const k3_wmat *W;
    const float *x, *xp, *xsum; /* x, x permuted/scaled for the format, per-group sums */
    float *y;
} k3_rows_ctx;
typedef void (*k3_rows_fn)(const k3_rows_ctx *c, int64_t r0, int64_t r1);

/* The two helpers below are in rows.c.
 *
 * fn(c, r0, r1) over [0, R) in blocks of 16 rows, split over OpenMP threads
 * when R*cols is large enough and !k3_kernels_serial(). The OpenMP region lives in this plain
 * function and the SIMD code in target-attributed workers: clang does not
 * give an outlined OpenMP body the target features of its enclosing function
 * (intrinsics inlined there fail to compile). */
void k3_parallel_rows(const k3_rows_ctx *c, k3_rows_fn fn);

/* xsum[g] = sum of x over group g of G columns (8-lane f32 sums), g < K/G:
 * the bias term sum_g b_g * xsum_g of the affine decode kernels. */
void k3_avx2_group_sums(const float *x, int64_t K, int G, float *xsum);

/* Dequantize the whole of row r into out[0..kp) (kp = cols rounded up to 8;
 * the padding is zero). Used by the matmul panels. */
void k3_avx2_decode_row(const k3_wmat *W, int64_t r, float *out);

#endif
