/* hsum16_avx512.h — sixteen horizontal sums at once, bit for bit those of
 * _mm512_reduce_add_ps (internal to src/kernels). A kernel that computes a
 * row's sum as reduce_add(v) can then finish 16 rows (or 16 column blocks)
 * together with the same bits: the column-block products of
 * matvec_mxfp4_avx512.c and matvec_affine_avx512.c. (few_reduce_avx512.h is
 * another tree, the few-token kernels'.) The includer defines
 * K3_AVX512_INLINE (static inline with its AVX-512 target). */
#ifndef K3_KERNELS_HSUM16_AVX512_H
#define K3_KERNELS_HSUM16_AVX512_H

#include <immintrin.h>

#ifndef K3_AVX512_INLINE
#error "define K3_AVX512_INLINE before including hsum16_avx512.h"
#endif

/* Lane i of the result is _mm512_reduce_add_ps(a[i]), bit for bit: the same
 * tree (lanes i and i+8, then i and i+4 of that, then 0+2 and 1+3, then the
 * two) for 16 vectors at once, 31 shuffles and 15 adds instead of 16
 * reductions' 16 x 6 dependent steps. */
K3_AVX512_INLINE __m512 reduce_add16(const __m512 *a) {
    __m512 c[8], d[4];
#pragma GCC unroll 8
    for (int p = 0; p < 8; p++) /* lane l: a[2p] or a[2p+1]'s lanes l and l+8 */
        c[p] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], 0x44),
                             _mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], 0xee));
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++) /* 128-bit lane j: a[4q + j]'s first 4 partial sums */
        d[q] = _mm512_add_ps(_mm512_shuffle_f32x4(c[2 * q], c[2 * q + 1], 0x88),
                             _mm512_shuffle_f32x4(c[2 * q], c[2 * q + 1], 0xdd));
    __m512 e0 = _mm512_add_ps(_mm512_shuffle_ps(d[0], d[1], 0x44),
                              _mm512_shuffle_ps(d[0], d[1], 0xee)),
           e1 = _mm512_add_ps(_mm512_shuffle_ps(d[2], d[3], 0x44),
                              _mm512_shuffle_ps(d[2], d[3], 0xee));
    __m512 f = _mm512_add_ps(_mm512_shuffle_ps(e0, e1, 0x88), _mm512_shuffle_ps(e0, e1, 0xdd));
    /* f[4l + j] is a[4j + l]'s sum */
    return _mm512_permutexvar_ps(
        _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), f);
}

#endif
