/* mla_tile_avx2.c — the tiled MLA attention's block step in 8-lane AVX2+FMA
 * (mla_tile.h; the body is mla_tile_impl.h), tiles sized to 16 registers:
 * scores 2 rows x 4 tokens, values 2 rows x 4 vectors. */
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
#define VSET1(x) _mm256_set1_ps(x)
#define VMASK(n) _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
#define TR 2
#define TT 4
#define VR 2
#define VC 4

TILE_INLINE float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#define TILE_HSUM(a, o)                                                                            \
    do {                                                                                           \
        for (int i_ = 0; i_ < TR * TT; i_++) (o)[i_] = hsum8((a)[i_]);                             \
    } while (0)

#include "kernels/mla_tile_impl.h"
