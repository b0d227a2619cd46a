/* mla_tile_avx512.c — the tiled MLA attention's block step in 16-lane AVX-512
 * (mla_tile.h; the body is mla_tile_impl.h). Scores 3 vectors of rows x 8
 * tokens a tile (24 accumulators, 11 loads per 24 FMAs); values 6 rows x 4
 * vectors a tile (24 accumulators, 10 loads per 24 FMAs): FMA-bound while
 * the block sits in L1/L2. */
#include <immintrin.h>

#define TILE_TARGET "avx512f,avx512bw,avx512vl,avx2,fma,f16c"
#define TILE_ATTR __attribute__((target(TILE_TARGET)))
#define TILE_INLINE static inline __attribute__((always_inline, target(TILE_TARGET)))

#define TILE_FN(name) name##_avx512
typedef __m512 vf;
typedef __mmask16 vmask;
#define VW 16
#define VZERO _mm512_setzero_ps()
#define VLOAD(p) _mm512_loadu_ps(p)
#define VLOADM(p, k) _mm512_maskz_loadu_ps(k, p)
#define VSTORE(p, v) _mm512_storeu_ps(p, v)
#define VSTOREM(p, k, v) _mm512_mask_storeu_ps(p, k, v)
#define VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define VMUL(a, b) _mm512_mul_ps(a, b)
#define VADD(a, b) _mm512_add_ps(a, b)
#define VSUB(a, b) _mm512_sub_ps(a, b)
#define VMAX(a, b) _mm512_max_ps(a, b)
#define VSET1(x) _mm512_set1_ps(x)
#define VMASK(n) ((__mmask16)((n) >= 16 ? 0xffffu : (1u << (n)) - 1u))
#define DOT_ROWS 8 /* 8 rows fill half a vector: dot products score them faster */
#define TILE_HSUM(v) hsum16(v)
#define VHMAX(v) _mm512_reduce_max_ps(v)
#define VHSUM(v) _mm512_reduce_add_ps(v)

/* Lane i of the result = the sum of the lanes of v[i]: pairs of vectors
 * folded into halves, then quarters, then a 4 x 4 transposing sum inside each
 * 128-bit lane, which leaves v[4k + L]'s sum at lane 4L + k; reading the
 * inputs in that transposed order puts v[i]'s sum at lane i. */
TILE_INLINE __m512 hsum16(const __m512 *v) {
    __m512 s[8], u[4];
    for (int m = 0; m < 8; m++) {
        __m512 a = v[(2 * m) % 4 * 4 + (2 * m) / 4], b = v[(2 * m + 1) % 4 * 4 + (2 * m + 1) / 4];
        s[m] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xee));
    }
    for (int n = 0; n < 4; n++)
        u[n] = _mm512_add_ps(_mm512_shuffle_f32x4(s[2 * n], s[2 * n + 1], 0x88),
                             _mm512_shuffle_f32x4(s[2 * n], s[2 * n + 1], 0xdd));
    __m512 x = _mm512_add_ps(_mm512_unpacklo_ps(u[0], u[1]), _mm512_unpackhi_ps(u[0], u[1]));
    __m512 y = _mm512_add_ps(_mm512_unpacklo_ps(u[2], u[3]), _mm512_unpackhi_ps(u[2], u[3]));
    return _mm512_add_ps(_mm512_shuffle_ps(x, y, 0x44), _mm512_shuffle_ps(x, y, 0xee));
}

#define SV 3
#define ST 8
#define WR 6
#define WC 4

#include "kernels/mla_tile_impl.h"
