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
#define SV 3
#define ST 8
#define WR 6
#define WC 4

#include "kernels/mla_tile_impl.h"
