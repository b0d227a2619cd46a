/* avx2_decode.h — AVX2 decoders: 8 (or 32) weights of one row -> __m256 f32.
 *
 * Internal to the AVX2 kernels (matvec_avx2.c, matmul_avx2.c). Every function
 * is static, always inlined and compiled for avx2+fma+f16c, so callers must be
 * in functions with the same target attribute. Column c is always a multiple
 * of 8 (affine: the start of 8 codes, which is byte-aligned for every width).
 * No function reads a byte outside the 8 (32) weights it decodes. */
#ifndef K3_KERNELS_AVX2_DECODE_H
#define K3_KERNELS_AVX2_DECODE_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define K3_AVX2 __attribute__((target("avx2,fma,f16c")))
#define K3_AVX2_INLINE static inline __attribute__((always_inline, target("avx2,fma,f16c")))

K3_AVX2_INLINE __m256 k3_dec8_f32(const uint8_t *row, int64_t c) {
    return _mm256_loadu_ps((const float *)(const void *)(row + 4 * c));
}

K3_AVX2_INLINE __m256 k3_dec8_f16(const uint8_t *row, int64_t c) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(row + 2 * c)));
}

K3_AVX2_INLINE __m256 k3_dec8_bf16(const uint8_t *row, int64_t c) {
    __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(row + 2 * c));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* Eight affine codes (unscaled, as floats 0..2^bits-1) starting at code c.
 * The 8 codes occupy exactly `bits` bytes starting at byte c*bits/8. For the
 * widths that do not divide a 32-bit word, each lane gathers the two bytes
 * holding its code with pshufb, then shifts by its bit offset. */
K3_AVX2_INLINE __m256 k3_dec8_codes(const uint8_t *row, int64_t c, int bits) {
    const uint8_t *p = row + c * bits / 8;
    __m256i q;
    if (bits == 8) {
        q = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p));
    } else if (bits == 4) {
        uint32_t w;
        memcpy(&w, p, 4);
        q = _mm256_srlv_epi32(_mm256_set1_epi32((int)w),
                              _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
        q = _mm256_and_si256(q, _mm256_set1_epi32(15));
    } else if (bits == 2) {
        uint16_t w;
        memcpy(&w, p, 2);
        q = _mm256_srlv_epi32(_mm256_set1_epi32(w), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14));
        q = _mm256_and_si256(q, _mm256_set1_epi32(3));
    } else {
        /* assembled in registers: a memcpy of 3/5/6 bytes into a stack u64
         * followed by a vector load stalls on store forwarding */
        uint64_t w;
        if (bits == 3) {
            uint16_t lo;
            memcpy(&lo, p, 2);
            w = lo | (uint64_t)p[2] << 16;
        } else {
            uint32_t lo;
            memcpy(&lo, p, 4);
            if (bits == 5) {
                w = lo | (uint64_t)p[4] << 32;
            } else {
                uint16_t hi;
                memcpy(&hi, p + 4, 2);
                w = lo | (uint64_t)hi << 32;
            }
        }
        __m256i v = _mm256_set1_epi64x((long long)w);
        /* lane i needs bytes b = (i*bits)/8 and b+1 in its low 16 bits; shift (i*bits)%8 */
        __m256i idx, sh;
        if (bits == 3) {
            idx = _mm256_setr_epi8(0, 1, -1, -1, 0, 1, -1, -1, 0, 1, -1, -1, 1, 2, -1, -1, 1, 2, -1,
                                   -1, 1, 2, -1, -1, 2, 3, -1, -1, 2, 3, -1, -1);
            sh = _mm256_setr_epi32(0, 3, 6, 1, 4, 7, 2, 5);
        } else if (bits == 5) {
            idx = _mm256_setr_epi8(0, 1, -1, -1, 0, 1, -1, -1, 1, 2, -1, -1, 1, 2, -1, -1, 2, 3, -1,
                                   -1, 3, 4, -1, -1, 3, 4, -1, -1, 4, 5, -1, -1);
            sh = _mm256_setr_epi32(0, 5, 2, 7, 4, 1, 6, 3);
        } else {
            idx = _mm256_setr_epi8(0, 1, -1, -1, 0, 1, -1, -1, 1, 2, -1, -1, 2, 3, -1, -1, 3, 4, -1,
                                   -1, 3, 4, -1, -1, 4, 5, -1, -1, 5, 6, -1, -1);
            sh = _mm256_setr_epi32(0, 6, 4, 2, 0, 6, 4, 2);
        }
        q = _mm256_srlv_epi32(_mm256_shuffle_epi8(v, idx), sh);
        q = _mm256_and_si256(q, _mm256_set1_epi32((1 << bits) - 1));
    }
    return _mm256_cvtepi32_ps(q);
}

/* One MXFP4 group: 32 codes in 16 bytes (low nibble = even column) -> four
 * vectors holding 2*E2M1 (integers -12..12, exact in int8); the caller
 * multiplies by half the E8M0 scale. */
K3_AVX2_INLINE void k3_dec32_mxfp4(const uint8_t *p, __m256 out[4]) {
    const __m128i lut = _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
    __m128i b = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i m = _mm_set1_epi8(15);
    __m128i lo = _mm_shuffle_epi8(lut, _mm_and_si128(b, m));
    __m128i hi = _mm_shuffle_epi8(lut, _mm_and_si128(_mm_srli_epi16(b, 4), m));
    __m128i c0 = _mm_unpacklo_epi8(lo, hi); /* columns 0..15 */
    __m128i c1 = _mm_unpackhi_epi8(lo, hi); /* columns 16..31 */
    out[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(c0));
    out[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(c0, 8)));
    out[2] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(c1));
    out[3] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(c1, 8)));
}

/* Half of 2^(s-127) (the MXFP4 LUT above is doubled); s = 255 is NaN. */
static inline float k3_mxfp4_half_scale(uint8_t s) {
    if (s == 0xff) return NAN;
    uint32_t u = s >= 2 ? (uint32_t)(s - 1) << 23 : (s == 1 ? 0x00400000u : 0x00200000u);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

K3_AVX2_INLINE float k3_hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#endif
