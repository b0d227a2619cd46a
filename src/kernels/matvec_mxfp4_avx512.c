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
 * computed by the same instruction sequence whatever the thread split. */
#include "kernels/avx2.h"
#include "kernels/avx512.h"
#include "kernels/scratch.h"

#include <immintrin.h>

#define K3_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define K3_AVX512_INLINE                                                                           \
    static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx2,fma,"       \
                                                       "f16c")))

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

K3_AVX512_INLINE float mxfp4_row(const k3_wmat *W, int64_t r, const float *xq) {
    const __m512 lut = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f,
                                      -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f);
    const __m512i perm = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
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
        for (int64_t g = g0; g < g1; g += 4) {
            const uint8_t *p = row + g * 16;
            const float *xb = xq + g * 32;
            _mm_prefetch((const char *)p + K3_PF_STREAM_BYTES, _MM_HINT_T0);
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
            __m512 s4 = _mm512_broadcast_f32x4(_mm_load_ps(s + (g - g0)));
            if (g & 4)
                y1 = _mm512_fmadd_ps(_mm512_add_ps(a0, a1), s4, y1);
            else
                y0 = _mm512_fmadd_ps(_mm512_add_ps(a0, a1), s4, y0);
        }
    }
    if (nfull < ng) { /* 1..3 trailing groups, one dword per byte */
        scales_f32(sc + nfull, (int)(ng - nfull), s);
        for (int64_t g = nfull; g < ng; g++) {
            __m512i d = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(row + g * 16)));
            __m512 a = _mm512_mul_ps(_mm512_permutexvar_ps(d, lut), _mm512_loadu_ps(xq + g * 32));
            a = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(d, 4), lut),
                                _mm512_loadu_ps(xq + g * 32 + 16), a);
            y0 = _mm512_fmadd_ps(a, _mm512_set1_ps(s[g - nfull]), y0);
        }
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(y0, y1));
}

K3_AVX512 static void mxfp4_rows(const k3_rows_ctx *c, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) c->y[r] = mxfp4_row(c->W, r, c->xp);
}

void k3_matvec_mxfp4_avx512(const k3_wmat *W, const float *x, float *y) {
    const int64_t K = W->cols;
    float *xq = k3_scratch(K3_SCRATCH_XPERM, sizeof(float) * (size_t)(K + 64));
    permute_x(x, K, xq);
    k3_rows_ctx c = {W, x, xq, NULL, y};
    k3_parallel_rows(&c, mxfp4_rows);
}
