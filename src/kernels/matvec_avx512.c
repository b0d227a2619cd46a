/* matvec_avx512.c — AVX-512 matrix-vector products: the dispatch for MXFP4
 * (the release expert format, in matvec_mxfp4_avx512.c) and MLX affine 8-bit.
 *
 * Affine 8-bit: 16 codes per u8 -> i32 -> f32 conversion and one FMA (the
 * AVX2 kernel needs two of each for the same codes): 10-11 -> 12-13.6 GB/s
 * on one core for a cache-resident 512x4096, q8 model decode +11% at 2
 * threads, +20% at 1 (Zen 5). Affine 2/3/4/5/6-bit: matvec_affine_avx512.c. */
#include "kernels/avx512.h"
#include "kernels/avx2.h"
#include "kernels/cpu.h"
#include "kernels/scratch.h"
#include "quant/dtype.h"

#include <immintrin.h>

#define K3_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define K3_AVX512_INLINE                                                                           \
    static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx2,fma,"       \
                                                       "f16c")))

int k3_cpu_has_avx512(void) {
#if defined(__x86_64__)
    static int has = -1; /* cached, as in cpu.c */
    if (has < 0) {
        __builtin_cpu_init();
        has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
              __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx2") &&
              __builtin_cpu_supports("fma") && k3_cpu_has_f16c();
    }
    return has;
#else
    return 0;
#endif
}

int k3_avx512_supports(const k3_wmat *W) {
    if (W->fmt == K3_W_AFFINE) /* shapes as for AVX2 */
        return W->bits == 8 ? k3_avx2_supports(W) : k3_avx512_affine_supports(W);
    return W->fmt == K3_W_MXFP4 && W->group == 32 && W->cols % 32 == 0;
}

/* One 8-bit affine row: sum_g s_g * (q . x)_g + sum_g b_g * xsum_g, 16 codes
 * per step (u8 -> i32 -> f32, one FMA), two accumulators per group. */
K3_AVX512_INLINE float affine8_row(const k3_wmat *W, int64_t r, const float *x, const float *xsum,
                                   int G) {
    const uint8_t *row = W->data + (size_t)r * W->row_stride;
    const uint8_t *sc = W->scales + (size_t)r * W->scale_stride;
    const uint8_t *bi = W->biases + (size_t)r * W->bias_stride;
    __m512 y0 = _mm512_setzero_ps(), y1 = y0;
    float bsum = 0.0f;
    for (int64_t g = 0; g < W->cols / G; g++) {
        const uint8_t *p = row + g * G;
        const float *xg = x + g * G;
        _mm_prefetch((const char *)p + 2048, _MM_HINT_T0);
        __m512 a0 = _mm512_setzero_ps(), a1 = a0;
        for (int j = 0; j < G; j += 32) {
            __m512 q0 = _mm512_cvtepi32_ps(
                _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(p + j))));
            __m512 q1 = _mm512_cvtepi32_ps(
                _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(p + j + 16))));
            a0 = _mm512_fmadd_ps(q0, _mm512_loadu_ps(xg + j), a0);
            a1 = _mm512_fmadd_ps(q1, _mm512_loadu_ps(xg + j + 16), a1);
        }
        __m512 s = _mm512_set1_ps(k3_wmat_elt(W->scale_fmt, sc, g));
        if (g & 1)
            y1 = _mm512_fmadd_ps(_mm512_add_ps(a0, a1), s, y1);
        else
            y0 = _mm512_fmadd_ps(_mm512_add_ps(a0, a1), s, y0);
        bsum += k3_wmat_elt(W->scale_fmt, bi, g) * xsum[g];
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(y0, y1)) + bsum;
}

#define AFFINE8_ROWS(G)                                                                            \
    K3_AVX512 static void affine8_rows_##G(const k3_rows_ctx *c, int64_t r0, int64_t r1) {         \
        for (int64_t r = r0; r < r1; r++) c->y[r] = affine8_row(c->W, r, c->x, c->xsum, G);        \
    }
AFFINE8_ROWS(32)
AFFINE8_ROWS(64)
AFFINE8_ROWS(128)

static void matvec_affine8(const k3_wmat *W, const float *x, float *y) {
    const int64_t ng = W->cols / W->group;
    float *xsum = k3_scratch(K3_SCRATCH_XSUM, sizeof(float) * (size_t)(ng + 1));
    k3_avx2_group_sums(x, W->cols, W->group, xsum);
    k3_rows_ctx c = {W, x, x, xsum, y};
    k3_parallel_rows(&c, W->group == 32   ? affine8_rows_32
                         : W->group == 64 ? affine8_rows_64
                                          : affine8_rows_128);
}

void k3_matvec_avx512(const k3_wmat *W, const float *x, float *y) {
    if (W->fmt == K3_W_AFFINE && W->bits == 8)
        matvec_affine8(W, x, y);
    else if (W->fmt == K3_W_AFFINE)
        k3_matvec_affine_avx512(W, x, y);
    else
        k3_matvec_mxfp4_avx512(W, x, y);
}
