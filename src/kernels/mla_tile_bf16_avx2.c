/* mla_tile_bf16_avx2.c — the tiled MLA attention's block step over a bf16
 * cache in AVX2 (mla_tile_bf16_impl.h): 8 values widened a load. */
#include <immintrin.h>

#define TILE_ATTR __attribute__((target("avx2,fma,f16c")))
#define TILE_FN(name) name##_avx2

#include "quant/dtype.h"

TILE_ATTR static void widen_avx2(float *d, const uint16_t *s, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + i)));
        _mm256_storeu_ps(d + i, _mm256_castsi256_ps(_mm256_slli_epi32(u, 16)));
    }
    for (; i < n; i++) d[i] = k3_bf16_to_f32(s[i]);
}
#define WIDEN(d, s, n) widen_avx2(d, s, n)

#include "kernels/mla_tile_bf16_impl.h"
