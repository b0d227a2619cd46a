/* matvec_avx512.c — AVX-512 matrix-vector products: the dispatch for MXFP4
 * (the release expert format, in matvec_mxfp4_avx512.c) and MLX affine 8-bit.
 *
 * Affine 8-bit: 16 codes per u8 -> i32 -> f32 conversion and one FMA (the
 * AVX2 kernel needs two of each for the same codes): 10-11 -> 12-13.6 GB/s
 * on one core for a cache-resident 512x4096, q8 model decode +11% at 2
 * threads, +20% at 1 (Zen 5). Affine 2/3/4/5/6-bit: matvec_affine_avx512.c. */
#include "kernels/avx512.h"
#include "kernels/avx2.h"
#include "kernels/runtime.h"
#include "kernels/scratch.h"
#include "quant/dtype.h"

#include <immintrin.h>

#define K3_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define K3_AVX512_INLINE                                                                           \
    static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx2,fma,"       \
                                                       "f16c")))
#include "kernels/hsum16_avx512.h"

int k3_avx512_supports(const k3_wmat *W) {
    if (W->fmt == K3_W_AFFINE) /* shapes as for AVX2 */
        return W->bits == 8 ? k3_avx2_supports(W) : k3_avx512_affine_supports(W);
    return W->fmt == K3_W_MXFP4 && W->group == 32 && W->cols % 32 == 0;
}

/* One 8-bit affine row (of a row view of K columns at row, sc, bi): sum_g s_g
 * * (q . x)_g + sum_g b_g * xsum_g, 16 codes per step (u8 -> i32 -> f32, one
 * FMA), two accumulators per group; returns the vector whose horizontal sum
 * is the first term, the bias term in *bsum_out. */
K3_AVX512_INLINE __m512 affine8_row_vec(const uint8_t *row, const uint8_t *sc, const uint8_t *bi,
                                        k3_wfmt sfmt, int64_t K, const float *x, const float *xsum,
                                        int G, float *bsum_out) {
    __m512 y0 = _mm512_setzero_ps(), y1 = y0;
    float bsum = 0.0f;
    for (int64_t g = 0; g < K / G; g++) {
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
        __m512 s = _mm512_set1_ps(k3_wmat_elt(sfmt, sc, g));
        if (g & 1)
            y1 = _mm512_fmadd_ps(_mm512_add_ps(a0, a1), s, y1);
        else
            y0 = _mm512_fmadd_ps(_mm512_add_ps(a0, a1), s, y0);
        bsum += k3_wmat_elt(sfmt, bi, g) * xsum[g];
    }
    *bsum_out = bsum;
    return _mm512_add_ps(y0, y1);
}

K3_AVX512_INLINE float affine8_row(const k3_wmat *W, int64_t r, const float *x, const float *xsum,
                                   int G) {
    float bsum;
    __m512 v = affine8_row_vec(
        W->data + (size_t)r * W->row_stride, W->scales + (size_t)r * W->scale_stride,
        W->biases + (size_t)r * W->bias_stride, W->scale_fmt, W->cols, x, xsum, G, &bsum);
    return _mm512_reduce_add_ps(v) + bsum;
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
    int ready;
    float *xsum = k3_prep_buf(K3_PREP_AFFINE8, x, k3_prep_shape(W->cols, W->group, 1, 0),
                              sizeof(float) * (size_t)(ng + 1), &ready);
    if (!ready) k3_avx2_group_sums(x, W->cols, W->group, xsum);
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

/* Rows per step and most blocks of the 8-bit column-block product. */
#define CB8_ROWS 16
#define CB8_MAX_BLOCKS 16

/* k3_matvec_colblocks_serial for affine 8-bit (see avx512.h): each row read
 * once, its blocks in turn, each block's vector and bias term those
 * affine8_row computes on the block's column view, the horizontal adds of 16
 * rows of a block together (reduce_add16: the bits of _mm512_reduce_add_ps). */
K3_AVX512_INLINE void affine8_cb(const k3_wmat *W, int nb, const float *const *xb,
                                 const float *xsum, float *const *y, int G) {
    const int64_t bc = W->cols / nb, ngb = bc / G, R = W->rows;
    /* block b's codes, scales and biases start where k3_wmat_cols(W, b * bc, bc)
     * puts them; offsets from one row pointer (16 column views measured 15%
     * slower on 128-column blocks) */
    const size_t es = W->scale_fmt == K3_W_F32 ? 4 : 2;
    __m512 acc[CB8_MAX_BLOCKS][CB8_ROWS];
    float bs[CB8_MAX_BLOCKS][CB8_ROWS];
    for (int64_t r0 = 0; r0 < R; r0 += CB8_ROWS) {
        const int n = R - r0 < CB8_ROWS ? (int)(R - r0) : CB8_ROWS;
        for (int i = 0; i < n; i++) {
            const int64_t r = r0 + i;
            const uint8_t *row = W->data + (size_t)r * W->row_stride;
            const uint8_t *sc = W->scales + (size_t)r * W->scale_stride;
            const uint8_t *bi = W->biases + (size_t)r * W->bias_stride;
            for (int b = 0; b < nb; b++)
                acc[b][i] = affine8_row_vec(row + b * bc, sc + (size_t)(b * ngb) * es,
                                            bi + (size_t)(b * ngb) * es, W->scale_fmt, bc, xb[b],
                                            xsum + b * (ngb + 1), G, &bs[b][i]);
        }
        for (int b = 0; b < nb; b++) {
            float out[CB8_ROWS] __attribute__((aligned(64)));
            for (int i = n; i < CB8_ROWS; i++) acc[b][i] = _mm512_setzero_ps();
            _mm512_store_ps(out, reduce_add16(acc[b]));
            for (int i = 0; i < n; i++) y[b][r0 + i] = out[i] + bs[b][i];
        }
    }
}

#define AFFINE8_CB(G)                                                                              \
    K3_AVX512 static void affine8_cb_##G(const k3_wmat *W, int nb, const float *const *xb,         \
                                         const float *xsum, float *const *y) {                     \
        affine8_cb(W, nb, xb, xsum, y, G);                                                         \
    }
AFFINE8_CB(32)
AFFINE8_CB(64)
AFFINE8_CB(128)

static int affine8_colblocks(const k3_wmat *W, int nb, const float *const *xb, float *const *y) {
    if (nb < 1 || nb > CB8_MAX_BLOCKS) return 0;
    const int G = W->group;
    const int64_t bc = W->cols / nb, ngb = bc / G;
    if (bc % G) return 0;
    int ready;
    float *xsum = k3_prep_buf(K3_PREP_AFFINE8, xb[0], k3_prep_blocks_shape(xb, nb, bc, G, nb),
                              sizeof(float) * (size_t)(nb * (ngb + 1)), &ready);
    for (int b = 0; b < nb && !ready; b++) k3_avx2_group_sums(xb[b], bc, G, xsum + b * (ngb + 1));
    (G == 32 ? affine8_cb_32 : G == 64 ? affine8_cb_64 : affine8_cb_128)(W, nb, xb, xsum, y);
    return 1;
}

int k3_matvec_colblocks_avx512(const k3_wmat *W, int nb, const float *const *xb, float *const *y) {
    if (W->fmt == K3_W_AFFINE && W->bits == 8) return affine8_colblocks(W, nb, xb, y);
    if (W->fmt == K3_W_AFFINE) return k3_matvec_affine_colblocks_avx512(W, nb, xb, y);
    return k3_matvec_mxfp4_colblocks_avx512(W, nb, xb, y);
}
