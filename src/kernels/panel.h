/* panel.h — packing weight rows into the k-major panels of the prefill tiles
 * (internal to src/kernels; shared by matmul_avx2.c and matmul_avx512.c).
 *
 * A panel holds `ld` rows (16 for the AVX2 tile, 32 for the AVX-512 one) as
 * P[k * ld + i]. Rows are packed eight at a time: each 8 x 8 block of columns
 * is decoded in registers and transposed into the panel, with no row buffer
 * in between. AVX2 code; the AVX-512 file inlines it (a subset target). */
#ifndef K3_KERNELS_PANEL_H
#define K3_KERNELS_PANEL_H

#include "kernels/avx2_decode.h"
#include "quant/dtype.h"

static inline int64_t k3_round8(int64_t k) {
    return (k + 7) & ~(int64_t)7;
}

/* Columns per chunk of the AVX-512 prefill products (the panel and the
 * token-lane one), chunk columns at most: a multiple of every group size,
 * so a chunk is a column view that decodes like a whole matrix. Only
 * matrices wider than 4 chunks are cut (their panel, 512 KiB and more, and
 * the tokens' rows no longer share the L2): at 3584 columns (MXFP4 experts,
 * T = 128) chunks measured 4-9% slower than the whole panel. The whole row
 * also when the group does not divide `chunk`. */
static inline int64_t k3_prefill_chunk_cols(const k3_wmat *W, int64_t chunk) {
    int64_t g = W->fmt == K3_W_MXFP4 || W->fmt == K3_W_AFFINE ? W->group : 8;
    return g > 0 && chunk % g == 0 && W->cols > 4 * chunk ? chunk : W->cols;
}

/* dst[c * ld + i] = r_i[c] for eight 8-lane rows. */
K3_AVX2_INLINE void k3_transpose8_regs(__m256 r0, __m256 r1, __m256 r2, __m256 r3, __m256 r4,
                                       __m256 r5, __m256 r6, __m256 r7, float *dst, int64_t ld) {
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1),
           t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3),
           t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
           t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee),
           u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee),
           u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee),
           u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
    _mm256_storeu_ps(dst + 0 * ld, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(dst + 1 * ld, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(dst + 2 * ld, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(dst + 3 * ld, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(dst + 4 * ld, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(dst + 5 * ld, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(dst + 6 * ld, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps(dst + 7 * ld, _mm256_permute2f128_ps(u3, u7, 0x31));
}

/* dst[c * ld + i] = src[i * lds + c] for an 8 x 8 block in memory. */
K3_AVX2_INLINE void k3_transpose8(const float *src, int64_t lds, float *dst, int64_t ld) {
    k3_transpose8_regs(_mm256_loadu_ps(src), _mm256_loadu_ps(src + lds),
                       _mm256_loadu_ps(src + 2 * lds), _mm256_loadu_ps(src + 3 * lds),
                       _mm256_loadu_ps(src + 4 * lds), _mm256_loadu_ps(src + 5 * lds),
                       _mm256_loadu_ps(src + 6 * lds), _mm256_loadu_ps(src + 7 * lds), dst, ld);
}

/* Rows [r0, r0+m) (m <= 8; m <= 0 gives zeros) of an f32/f16/bf16 matrix
 * into panel columns 0..7 of P (stride ld), rows past m zero; the columns
 * from cols to the next multiple of 8 are zero too. */
K3_AVX2_INLINE void k3_pack_float_rows(const k3_wmat *W, int64_t r0, int m, float *P, int64_t ld) {
    const int64_t K = W->cols, kp = k3_round8(K);
    const uint8_t *rp[8];
    for (int i = 0; i < 8; i++) /* rows past m are never read */
        rp[i] = W->data + (size_t)(i < m ? r0 + i : 0) * W->row_stride;
    const __m256 z = _mm256_setzero_ps();
    int64_t k = 0;
#define DEC(i)                                                                                     \
    (i < m ? (W->fmt == K3_W_F32   ? k3_dec8_f32(rp[i], k)                                         \
              : W->fmt == K3_W_F16 ? k3_dec8_f16(rp[i], k)                                         \
                                   : k3_dec8_bf16(rp[i], k))                                       \
           : z)
    for (; k + 8 <= K; k += 8)
        k3_transpose8_regs(DEC(0), DEC(1), DEC(2), DEC(3), DEC(4), DEC(5), DEC(6), DEC(7),
                           P + k * ld, ld);
#undef DEC
    if (k < kp) { /* the last partial column block, zero-padded */
        float tail[8][8] __attribute__((aligned(32))) = {{0}};
        for (int i = 0; i < m; i++)
            for (int64_t c = k; c < K; c++) tail[i][c - k] = k3_wmat_elt(W->fmt, rp[i], c);
        k3_transpose8(&tail[0][0], 8, P + k * ld, ld);
    }
}

#endif
