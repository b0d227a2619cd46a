/* matvec_mxfp4_avx512.c — the AVX-512 MXFP4 matrix-vector product (decode of
 * the release's expert format) with exact f32 activations.
 *
 * The 4-bit E2M1 codes are decoded straight to f32 by a 16-entry table
 * lookup (vpermps reads only the low 4 bits of each 32-bit index lane), so no
 * code is masked, widened from bytes or converted from integers:
 *
 *   per 64 bytes of a row (128 codes = 4 groups of 32, one E8M0 scale each):
 *     load 16 dwords, vpermd them so lane l holds dword 4*(l%4) + l/4
 *       (lane l then belongs to group l%4, for every nibble of the dword)
 *     8 times: vpermps(dword >> 4k, table) -> 16 f32 weights, FMA with x
 *     one FMA with [s0 s1 s2 s3] x 4 (vbroadcastf32x4 of the row's f32 scales)
 *
 * That is 25 vector uops per 64 bytes (the kernel it replaces needed about
 * 11 per 16: byte->dword widening, int->float conversion, a scalar scale
 * per group). x is permuted once per call to match the lane order:
 * xq[128b + 16k + l] = x[128b + 32(l%4) + 8(l/4) + k]. Columns past the last
 * full 128 (1 to 3 groups) are done per group with one dword per byte
 * (vpmovzxbd), against xq[32g + j] = x[32g + 2j], xq[32g + 16 + j] = x[32g + 2j + 1].
 *
 * The E8M0 scales of a row are turned into f32 16 at a time (e << 23; 0 is
 * 2^-127, 0xff NaN, as in k3_wmat_row). Products E2M1 * x are exact in f32;
 * each group's sum is multiplied by its exact power-of-two scale, so the
 * result differs from the reference only by f32 accumulation. Each row is
 * computed by the same instruction sequence whatever the thread split.
 *
 * The column-block product (k3_matvec_colblocks_serial: a row-parallel sum
 * over 8 blocks, as in the routed experts' down products) computes each
 * block's part of a row with the same sequence on that block's columns, but
 * reads the row once, converts its scales once, and does the horizontal adds
 * of 16 rows together. Through k3_matvec per block, each (row, block) paid a
 * full row's fixed cost: K3's expert down (3584 x 3072, 8 blocks of 12
 * groups) ran at 10.5 GB/s against 20 for the whole matrix, the bench
 * preset's (512 x 256: one group a block) at 2.6. */
#include "kernels/avx2.h"
#include "kernels/avx512.h"
#include "kernels/scratch.h"

#include <immintrin.h>

#define K3_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define K3_AVX512_INLINE                                                                           \
    static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx2,fma,"       \
                                                       "f16c")))

#include "kernels/hsum16_avx512.h"

#define SC_CHUNK 64 /* groups whose scales are converted at once (16 blocks) */

/* x in the kernel's lane order (see the top of the file); xq has K floats.
 * Block b of 128 is x[b + 32g + 8q + k] (g group, q quarter, k index) read
 * as xq[b + 16k + 4q + g]: eight gathers of 16 lanes. It runs once per call,
 * and the decode schedules call the kernel on pieces of ~64 KiB of weights
 * (steal.h, mvset.h): a 32 x 3584 call took 7.1 us with the scalar loop and
 * takes 5.4 with the gathers (bench/kmicro.c, one thread). */
K3_AVX512 static void permute_x(const float *x, int64_t K, float *xq) {
    const int64_t full = K / 128 * 128;
    const __m512i base =
        _mm512_setr_epi32(0, 32, 64, 96, 8, 40, 72, 104, 16, 48, 80, 112, 24, 56, 88, 120);
    for (int64_t b = 0; b < full; b += 128)
        for (int k = 0; k < 8; k++)
            _mm512_storeu_ps(
                xq + b + 16 * k,
                _mm512_i32gather_ps(_mm512_add_epi32(base, _mm512_set1_epi32(k)), x + b, 4));
    for (int64_t g = full; g < K; g += 32)
        for (int j = 0; j < 16; j++) {
            xq[g + j] = x[g + 2 * j];
            xq[g + 16 + j] = x[g + 2 * j + 1];
        }
}

/* f32 scales 2^(e-127) of n <= SC_CHUNK E8M0 bytes (0 -> 2^-127, 0xff -> NaN). */
K3_AVX512_INLINE void scales_f32(const uint8_t *e, int n, float *out) {
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512i b = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, e + i));
        __m512i v = _mm512_slli_epi32(b, 23);
        v = _mm512_mask_mov_epi32(v, _mm512_cmpeq_epi32_mask(b, _mm512_setzero_si512()),
                                  _mm512_set1_epi32(0x00400000));
        v = _mm512_mask_mov_epi32(v, _mm512_cmpeq_epi32_mask(b, _mm512_set1_epi32(255)),
                                  _mm512_set1_epi32(0x7fc00000));
        _mm512_storeu_si512(out + i, v);
    }
}

/* The E2M1 table and the dword order of a 64-byte step (see the top). */
#define MXFP4_LUT                                                                                  \
    _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f, -1.0f, -1.5f,     \
                   -2.0f, -3.0f, -4.0f, -6.0f)
#define MXFP4_PERM _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15)

/* Groups [g0, g1) of a row (g0, g1 multiples of 4; g counted from the row's
 * or column view's first group) into *y0 / *y1 by 64-byte steps, the scales
 * of groups g0.. in s; pf: prefetch K3_PF_STREAM_BYTES ahead. */
K3_AVX512_INLINE void mxfp4_full(const uint8_t *row, const float *xq, const float *s, int64_t g0,
                                 int64_t g1, int pf, __m512 *y0, __m512 *y1) {
    const __m512 lut = MXFP4_LUT;
    const __m512i perm = MXFP4_PERM;
    for (int64_t g = g0; g < g1; g += 4) {
        const uint8_t *p = row + g * 16;
        const float *xb = xq + g * 32;
        if (pf) _mm_prefetch((const char *)p + K3_PF_STREAM_BYTES, _MM_HINT_T0);
        __m512i d = _mm512_permutexvar_epi32(perm, _mm512_loadu_si512(p));
        __m512 a0 = _mm512_mul_ps(_mm512_permutexvar_ps(d, lut), _mm512_loadu_ps(xb));
        __m512 a1 = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(d, 4), lut),
                                  _mm512_loadu_ps(xb + 16));
#define NIB(k, acc)                                                                                \
    acc = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(d, 4 * (k)), lut),               \
                          _mm512_loadu_ps(xb + 16 * (k)), acc)
        NIB(2, a0);
        NIB(3, a1);
        NIB(4, a0);
        NIB(5, a1);
        NIB(6, a0);
        NIB(7, a1);
#undef NIB
        __m512 s4 = _mm512_broadcast_f32x4(_mm_loadu_ps(s + (g - g0)));
        if (g & 4)
            *y1 = _mm512_fmadd_ps(_mm512_add_ps(a0, a1), s4, *y1);
        else
            *y0 = _mm512_fmadd_ps(_mm512_add_ps(a0, a1), s4, *y0);
    }
}

/* Trailing groups [g0, g1) (1..3 past the last full step), one dword per
 * byte, into *y0; the scales of groups g0.. in s. */
K3_AVX512_INLINE void mxfp4_tail(const uint8_t *row, const float *xq, const float *s, int64_t g0,
                                 int64_t g1, __m512 *y0) {
    const __m512 lut = MXFP4_LUT;
    for (int64_t g = g0; g < g1; g++) {
        __m512i d = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(row + g * 16)));
        __m512 a = _mm512_mul_ps(_mm512_permutexvar_ps(d, lut), _mm512_loadu_ps(xq + g * 32));
        a = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(d, 4), lut),
                            _mm512_loadu_ps(xq + g * 32 + 16), a);
        *y0 = _mm512_fmadd_ps(a, _mm512_set1_ps(s[g - g0]), *y0);
    }
}

/* Row r's sum before its horizontal add: y0 + y1 over the row's groups. */
K3_AVX512_INLINE __m512 mxfp4_row_vec(const k3_wmat *W, int64_t r, const float *xq) {
    const uint8_t *row = W->data + (size_t)r * W->row_stride;
    const uint8_t *sc = W->scales + (size_t)r * W->scale_stride;
    const int64_t ng = W->cols / 32, nfull = ng / 4 * 4;
    float s[SC_CHUNK] __attribute__((aligned(64)));
    /* the scales of the row 8 ahead: a second, slower stream (1/16 of the
     * bytes) that the weights' prefetch does not cover */
    _mm_prefetch((const char *)sc + 8 * W->scale_stride, _MM_HINT_T0);
    _mm_prefetch((const char *)sc + 8 * W->scale_stride + 64, _MM_HINT_T0);
    __m512 y0 = _mm512_setzero_ps(), y1 = y0;
    for (int64_t g0 = 0; g0 < nfull; g0 += SC_CHUNK) {
        const int64_t g1 = g0 + SC_CHUNK < nfull ? g0 + SC_CHUNK : nfull;
        scales_f32(sc + g0, (int)(g1 - g0), s);
        mxfp4_full(row, xq, s, g0, g1, 1, &y0, &y1);
    }
    if (nfull < ng) {
        scales_f32(sc + nfull, (int)(ng - nfull), s);
        mxfp4_tail(row, xq, s, nfull, ng, &y0);
    }
    return _mm512_add_ps(y0, y1);
}

K3_AVX512_INLINE float mxfp4_row(const k3_wmat *W, int64_t r, const float *xq) {
    return _mm512_reduce_add_ps(mxfp4_row_vec(W, r, xq));
}

K3_AVX512 static void mxfp4_rows(const k3_rows_ctx *c, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) c->y[r] = mxfp4_row(c->W, r, c->xp);
}

void k3_matvec_mxfp4_avx512(const k3_wmat *W, const float *x, float *y) {
    const int64_t K = W->cols;
    int ready;
    float *xq = k3_prep_buf(K3_PREP_MXFP4, x, k3_prep_shape(K, 1, 0, 0),
                            sizeof(float) * (size_t)(K + 64), &ready);
    if (!ready) permute_x(x, K, xq);
    k3_rows_ctx c = {W, x, xq, NULL, y};
    k3_parallel_rows(&c, mxfp4_rows);
}

/* Rows per step of the column-block product, and the most groups a row may
 * have there (its f32 scales live on the stack). */
#define CB_ROWS 16
#define CB_MAX_GROUPS 1024
#define CB_MAX_BLOCKS 16

/* k3_matvec_colblocks_serial for MXFP4 (see avx512.h): each row read once,
 * front to back (one stream, as a plain matvec reads it), its blocks in turn,
 * each block's sum the one mxfp4_row computes on that block's column view
 * with that block's x; the sums of 16 rows wait in a buffer, then per block
 * their horizontal adds run together (reduce_add16) and store one vector. */
K3_AVX512 int k3_matvec_mxfp4_colblocks_avx512(const k3_wmat *W, int nb, const float *const *xb,
                                               float *const *y) {
    const int64_t bc = W->cols / nb, ngb = bc / 32, ng = ngb * nb, nfull = ngb / 4 * 4;
    if (nb < 1 || nb > CB_MAX_BLOCKS || bc % 32 || ng > CB_MAX_GROUPS) return 0;
    const int64_t xs = bc + 64, R = W->rows;
    int ready;
    float *xq = k3_prep_buf(K3_PREP_MXFP4, xb[0], k3_prep_blocks_shape(xb, nb, bc, nb, 0),
                            sizeof(float) * (size_t)(nb * xs), &ready);
    for (int b = 0; b < nb && !ready; b++) permute_x(xb[b], bc, xq + b * xs);
    float s[CB_MAX_GROUPS] __attribute__((aligned(64)));
    __m512 acc[CB_MAX_BLOCKS][CB_ROWS];
    for (int64_t r0 = 0; r0 < R; r0 += CB_ROWS) {
        const int n = R - r0 < CB_ROWS ? (int)(R - r0) : CB_ROWS;
        for (int i = 0; i < n; i++) {
            const uint8_t *row = W->data + (size_t)(r0 + i) * W->row_stride;
            const uint8_t *sc = W->scales + (size_t)(r0 + i) * W->scale_stride;
            _mm_prefetch((const char *)sc + 8 * W->scale_stride, _MM_HINT_T0);
            _mm_prefetch((const char *)sc + 8 * W->scale_stride + 64, _MM_HINT_T0);
            if (!nfull) /* no 64-byte steps to carry the prefetch */
                for (int64_t o = 0; o < ng * 16; o += 64)
                    _mm_prefetch((const char *)row + o + K3_PF_STREAM_BYTES, _MM_HINT_T0);
            for (int64_t g0 = 0; g0 < ng; g0 += SC_CHUNK)
                scales_f32(sc + g0, (int)(ng - g0 < SC_CHUNK ? ng - g0 : SC_CHUNK), s + g0);
            for (int b = 0; b < nb; b++) {
                const uint8_t *rb = row + b * ngb * 16;
                const float *xqb = xq + b * xs, *sb = s + b * ngb;
                __m512 y0 = _mm512_setzero_ps(), y1 = y0;
                mxfp4_full(rb, xqb, sb, 0, nfull, 1, &y0, &y1);
                mxfp4_tail(rb, xqb, sb + nfull, nfull, ngb, &y0);
                acc[b][i] = _mm512_add_ps(y0, y1);
            }
        }
        for (int b = 0; b < nb; b++) {
            for (int i = n; i < CB_ROWS; i++) acc[b][i] = _mm512_setzero_ps();
            _mm512_mask_storeu_ps(y[b] + r0, (__mmask16)((1u << n) - 1), reduce_add16(acc[b]));
        }
    }
    return 1;
}
