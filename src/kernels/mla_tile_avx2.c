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
#define SV 3
#define ST 4
#define WR 2
#define WC 4

#include "kernels/mla_tile_impl.h"
