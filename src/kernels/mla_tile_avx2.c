/* mla_tile_avx2.c — the tiled MLA attention's block step in 8-lane AVX2+FMA
 * (mla_tile.h; the body is mla_tile_impl.h), tiles sized to 16 registers:
 * scores 3 vectors of rows x 4 tokens, values 2 rows x 4 vectors. */
#include <immintrin.h>

#define TILE_TARGET "avx2,fma,f16c"
#define TILE_ATTR __attribute__((target(TILE_TARGET)))
#define TILE_INLINE static inline __attribute__((always_inline, target(TILE_TARGET)))

#define TILE_FN(name) name##_avx2
typedef __m256 vf;
typedef __m256i vmask;
#define VW 8
#define VZERO _mm256_setzero_ps()
#define VLOAD(p) _mm256_loadu_ps(p)
#define VLOADM(p, k) _mm256_maskload_ps(p, k)
#define VSTORE(p, v) _mm256_storeu_ps(p, v)
#define VSTOREM(p, k, v) _mm256_maskstore_ps(p, k, v)
#define VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define VMUL(a, b) _mm256_mul_ps(a, b)
#define VADD(a, b) _mm256_add_ps(a, b)
#define VSUB(a, b) _mm256_sub_ps(a, b)
#define VMAX(a, b) _mm256_max_ps(a, b)
#define VSET1(x) _mm256_set1_ps(x)
#define VMASK(n) _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
#define DOT_ROWS 4 /* 4 rows fill half a vector: dot products score them faster */
#define TILE_HSUM(v) hsum8(v)
#define VHMAX(v) hmax8(v)
#define VHSUM(v) hadd8(v)

TILE_INLINE float hmax8(__m256 v) { /* halves, quarters, pairs */
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_max_ss(x, _mm_movehdup_ps(x)));
}

TILE_INLINE float hadd8(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_add_ss(x, _mm_movehdup_ps(x)));
}

/* Lane i of the result = the sum of the lanes of v[i]: pairs of vectors
 * folded into 128-bit halves, then a 4 x 4 transposing sum inside each half,
 * which leaves v[2k + L]'s sum at lane 4L + k; reading the inputs in that
 * transposed order puts v[i]'s sum at lane i. */
TILE_INLINE __m256 hsum8(const __m256 *v) {
    __m256 s[4];
    for (int m = 0; m < 4; m++) {
        __m256 a = v[(2 * m) % 2 * 4 + (2 * m) / 2], b = v[(2 * m + 1) % 2 * 4 + (2 * m + 1) / 2];
        s[m] =
            _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
    }
    __m256 x = _mm256_add_ps(_mm256_unpacklo_ps(s[0], s[1]), _mm256_unpackhi_ps(s[0], s[1]));
    __m256 y = _mm256_add_ps(_mm256_unpacklo_ps(s[2], s[3]), _mm256_unpackhi_ps(s[2], s[3]));
    return _mm256_add_ps(_mm256_shuffle_ps(x, y, 0x44), _mm256_shuffle_ps(x, y, 0xee));
}

#define SV 3
#define ST 4
#define WR 2
#define WC 4

#include "kernels/mla_tile_impl.h"
