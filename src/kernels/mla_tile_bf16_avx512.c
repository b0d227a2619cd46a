/* mla_tile_bf16_avx512.c — the tiled MLA attention's block step over a bf16
 * cache in AVX-512 (mla_tile_bf16_impl.h): 16 values widened a load. */
#include <immintrin.h>

#define TILE_ATTR __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define TILE_FN(name) name##_avx512

#include "quant/dtype.h"

TILE_ATTR static void widen_avx512(float *d, const uint16_t *s, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i u = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(s + i)));
        _mm512_storeu_ps(d + i, _mm512_castsi512_ps(_mm512_slli_epi32(u, 16)));
    }
    for (; i < n; i++) d[i] = k3_bf16_to_f32(s[i]);
}
#define WIDEN(d, s, n) widen_avx512(d, s, n)

#include "kernels/mla_tile_bf16_impl.h"
