/* few_reduce_avx512.h — the transposing sum shared by the AVX-512
 * few-token kernels (matmul_few_avx512.c, matmul_few_bf16_avx512.c): lane i
 * of reduce16(a) is the sum of a[i]'s 16 lanes, by the same tree for every i,
 * so that both kernels round a token's output the same way. The includer
 * defines K3_AVX512_INLINE (static inline with its AVX-512 target). */
#ifndef K3_KERNELS_FEW_REDUCE_AVX512_H
#define K3_KERNELS_FEW_REDUCE_AVX512_H

#include <immintrin.h>

#ifndef K3_AVX512_INLINE
#error "define K3_AVX512_INLINE before including few_reduce_avx512.h"
#endif

K3_AVX512_INLINE __m512 reduce16(const __m512 *a) {
    __m512 s[8], u[4];
#pragma GCC unroll 16
    for (int p = 0; p < 8; p++)
        s[p] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * p], a[2 * p + 1]),
                             _mm512_unpackhi_ps(a[2 * p], a[2 * p + 1]));
#pragma GCC unroll 16
    for (int q = 0; q < 4; q++) {
        __m512d lo = _mm512_castps_pd(s[2 * q]), hi = _mm512_castps_pd(s[2 * q + 1]);
        u[q] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(lo, hi)),
                             _mm512_castpd_ps(_mm512_unpackhi_pd(lo, hi)));
    }
    __m512 v0 = _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], 0x88),
                              _mm512_shuffle_f32x4(u[0], u[1], 0xdd));
    __m512 v1 = _mm512_add_ps(_mm512_shuffle_f32x4(u[2], u[3], 0x88),
                              _mm512_shuffle_f32x4(u[2], u[3], 0xdd));
    return _mm512_add_ps(_mm512_shuffle_f32x4(v0, v1, 0x88), _mm512_shuffle_f32x4(v0, v1, 0xdd));
}

#endif
