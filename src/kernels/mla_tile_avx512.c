/* mla_tile_avx512.c — the tiled MLA attention's block step in 16-lane AVX-512
 * (mla_tile.h; the body is mla_tile_impl.h). Scores 4 rows x 4 tokens a tile,
 * finished by one 16-way horizontal sum; values 4 rows x 4 vectors a tile:
 * 16 FMAs per 8 loads in both, FMA-bound while the block sits in L1/L2. */
#include <immintrin.h>

#define TILE_TARGET "avx512f,avx512bw,avx512vl,avx2,fma,f16c"
#define TILE_ATTR __attribute__((target(TILE_TARGET)))
#define TILE_INLINE static inline __attribute__((always_inline, target(TILE_TARGET)))
#define K3_AVX512_INLINE TILE_INLINE
#include "kernels/hsum16_avx512.h"

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
#define VSET1(x) _mm512_set1_ps(x)
#define VMASK(n) ((__mmask16)((n) >= 16 ? 0xffffu : (1u << (n)) - 1u))
#define TR 4
#define TT 4
#define VR 4
#define VC 4
#define TILE_HSUM(a, o) _mm512_storeu_ps(o, reduce_add16(a))

#include "kernels/mla_tile_impl.h"
