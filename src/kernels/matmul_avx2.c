/* matmul_avx2.c — AVX2+FMA tiled matrix-matrix product (prefill: many tokens).
 *
 * Y[t, r] = sum_c W[r, c] X[t, c]. Weights are dequantized once per call into
 * an f32 panel of up to PANEL_ROWS rows (thread-local scratch, L2-resident),
 * then a 3-row x 4-token register tile (12 accumulators) walks the full K for
 * every group of 4 tokens, so each weight is decoded once and used T times and
 * each X tile is reused by all rows of the panel. Activations stay f32.
 *
 * Every (t, r) is accumulated by the same instruction sequence (8 lanes in
 * column order, then a fixed horizontal sum) whatever T, the panel height or
 * the thread count, so results do not depend on threading. */
#include "kernels/avx2.h"
#include "kernels/avx2_decode.h"
#include "kernels/scratch.h"
#include "quant/dtype.h"

#include <omp.h>

#define PANEL_ROWS 24 /* multiple of the 3-row tile */

static inline int64_t round8(int64_t k) {
    return (k + 7) & ~(int64_t)7;
}

static inline float elt_at(k3_wfmt fmt, const uint8_t *p, int64_t i) {
    uint16_t h;
    float f;
    switch (fmt) {
    case K3_W_F32:
        memcpy(&f, p + 4 * i, 4);
        return f;
    case K3_W_F16:
        memcpy(&h, p + 2 * i, 2);
        return k3_f16_to_f32(h);
    default:
        memcpy(&h, p + 2 * i, 2);
        return k3_bf16_to_f32(h);
    }
}

K3_AVX2_INLINE void decode_float_row(k3_wfmt fmt, const uint8_t *row, int64_t K, float *out) {
    int64_t c = 0;
    for (; c + 8 <= K; c += 8) {
        __m256 v = fmt == K3_W_F32   ? k3_dec8_f32(row, c)
                   : fmt == K3_W_F16 ? k3_dec8_f16(row, c)
                                     : k3_dec8_bf16(row, c);
        _mm256_storeu_ps(out + c, v);
    }
    for (; c < K; c++) out[c] = elt_at(fmt, row, c);
    for (; c < round8(K); c++) out[c] = 0.0f;
}

K3_AVX2_INLINE void decode_affine_row(const k3_wmat *W, int64_t r, float *out, int bits, int G) {
    const uint8_t *row = W->data + (size_t)r * W->row_stride;
    const uint8_t *sc = W->scales + (size_t)r * W->scale_stride;
    const uint8_t *bi = W->biases + (size_t)r * W->bias_stride;
    for (int64_t g = 0; g < W->cols / G; g++) {
        __m256 s = _mm256_set1_ps(elt_at(W->scale_fmt, sc, g));
        __m256 b = _mm256_set1_ps(elt_at(W->scale_fmt, bi, g));
        for (int j = 0; j < G; j += 8) {
            int64_t c = g * G + j;
            _mm256_storeu_ps(out + c, _mm256_fmadd_ps(k3_dec8_codes(row, c, bits), s, b));
        }
    }
}

#define AFFINE_DECODE(B)                                                                           \
    K3_AVX2 static void decode_affine_##B(const k3_wmat *W, int64_t r, float *out) {               \
        if (W->group == 32)                                                                        \
            decode_affine_row(W, r, out, B, 32);                                                   \
        else if (W->group == 64)                                                                   \
            decode_affine_row(W, r, out, B, 64);                                                   \
        else                                                                                       \
            decode_affine_row(W, r, out, B, 128);                                                  \
    }
AFFINE_DECODE(2)
AFFINE_DECODE(3)
AFFINE_DECODE(4)
AFFINE_DECODE(5)
AFFINE_DECODE(6)
AFFINE_DECODE(8)

K3_AVX2 static void decode_mxfp4_row(const k3_wmat *W, int64_t r, float *out) {
    const uint8_t *row = W->data + (size_t)r * W->row_stride;
    const uint8_t *sc = W->scales + (size_t)r * W->scale_stride;
    for (int64_t g = 0; g < W->cols / 32; g++) {
        __m256 w[4], s = _mm256_set1_ps(k3_mxfp4_half_scale(sc[g]));
        k3_dec32_mxfp4(row + g * 16, w);
        for (int i = 0; i < 4; i++) _mm256_storeu_ps(out + g * 32 + 8 * i, _mm256_mul_ps(w[i], s));
    }
}

K3_AVX2 void k3_avx2_decode_row(const k3_wmat *W, int64_t r, float *out) {
    switch (W->fmt) {
    case K3_W_F32:
        decode_float_row(K3_W_F32, W->data + (size_t)r * W->row_stride, W->cols, out);
        break;
    case K3_W_F16:
        decode_float_row(K3_W_F16, W->data + (size_t)r * W->row_stride, W->cols, out);
        break;
    case K3_W_BF16:
        decode_float_row(K3_W_BF16, W->data + (size_t)r * W->row_stride, W->cols, out);
        break;
    case K3_W_MXFP4:
        decode_mxfp4_row(W, r, out);
        break;
    case K3_W_AFFINE:
        switch (W->bits) {
        case 2:
            decode_affine_2(W, r, out);
            break;
        case 3:
            decode_affine_3(W, r, out);
            break;
        case 4:
            decode_affine_4(W, r, out);
            break;
        case 5:
            decode_affine_5(W, r, out);
            break;
        case 6:
            decode_affine_6(W, r, out);
            break;
        default:
            decode_affine_8(W, r, out);
            break;
        }
        break;
    }
}

/* The register tile: rows p[0..3) of the panel (stride kp) times NT tokens of
 * X (stride K), written to Y[t, r0 + i] for i < nr. NT is a constant after
 * inlining, so the 3*NT accumulators live in registers. */
K3_AVX2_INLINE void tile(const float *p, int64_t kp, const float *X, int64_t K, int NT, float *Y,
                         int64_t R, int nr) {
    __m256 acc[3][4];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < NT; j++) acc[i][j] = _mm256_setzero_ps();
    const int64_t k8 = K & ~(int64_t)7;
    for (int64_t k = 0; k < k8; k += 8) {
        __m256 w0 = _mm256_loadu_ps(p + k), w1 = _mm256_loadu_ps(p + kp + k),
               w2 = _mm256_loadu_ps(p + 2 * kp + k);
        for (int j = 0; j < NT; j++) {
            __m256 xv = _mm256_loadu_ps(X + j * K + k);
            acc[0][j] = _mm256_fmadd_ps(w0, xv, acc[0][j]);
            acc[1][j] = _mm256_fmadd_ps(w1, xv, acc[1][j]);
            acc[2][j] = _mm256_fmadd_ps(w2, xv, acc[2][j]);
        }
    }
    if (k8 < K) { /* column tail: masked X load, the panel is zero-padded */
        __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(K - k8)),
                                       _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        __m256 w0 = _mm256_loadu_ps(p + k8), w1 = _mm256_loadu_ps(p + kp + k8),
               w2 = _mm256_loadu_ps(p + 2 * kp + k8);
        for (int j = 0; j < NT; j++) {
            __m256 xv = _mm256_maskload_ps(X + j * K + k8, m);
            acc[0][j] = _mm256_fmadd_ps(w0, xv, acc[0][j]);
            acc[1][j] = _mm256_fmadd_ps(w1, xv, acc[1][j]);
            acc[2][j] = _mm256_fmadd_ps(w2, xv, acc[2][j]);
        }
    }
    for (int i = 0; i < nr; i++)
        for (int j = 0; j < NT; j++) Y[j * R + i] = k3_hsum256(acc[i][j]);
}

K3_AVX2 static void tile_any(const float *p, int64_t kp, const float *X, int64_t K, int nt,
                             float *Y, int64_t R, int nr) {
    switch (nt) {
    case 4:
        tile(p, kp, X, K, 4, Y, R, nr);
        break;
    case 3:
        tile(p, kp, X, K, 3, Y, R, nr);
        break;
    case 2:
        tile(p, kp, X, K, 2, Y, R, nr);
        break;
    default:
        tile(p, kp, X, K, 1, Y, R, nr);
        break;
    }
}

/* Rows [r0, r0+n) of Y for all T tokens: decode the panel, then sweep tiles.
 * Token tiles are the outer loop so one X tile serves every row of the panel. */
K3_AVX2 static void panel_product(const k3_wmat *W, int64_t r0, int n, const float *X, int64_t T,
                                  float *Y) {
    const int64_t K = W->cols, kp = round8(K), R = W->rows;
    const int nrow3 = (n + 2) / 3 * 3;
    float *p = k3_scratch(K3_SCRATCH_PANEL, sizeof(float) * (size_t)(kp * nrow3));
    for (int i = 0; i < n; i++) k3_avx2_decode_row(W, r0 + i, p + i * kp);
    for (int i = n; i < nrow3; i++) memset(p + i * kp, 0, sizeof(float) * (size_t)kp);
    for (int64_t t = 0; t < T; t += 4) {
        int nt = T - t < 4 ? (int)(T - t) : 4;
        for (int i = 0; i < n; i += 3)
            tile_any(p + i * kp, kp, X + t * K, K, nt, Y + t * R + r0 + i, R,
                     n - i < 3 ? n - i : 3);
    }
}

/* Panel height: full PANEL_ROWS when there are enough rows to keep every
 * thread busy, smaller (a multiple of 3) for short matrices such as experts. */
static int panel_rows(int64_t R, int threads) {
    int64_t want = (R + 4 * threads - 1) / (4 * threads);
    want = (want + 2) / 3 * 3;
    if (want < 3) want = 3;
    if (want > PANEL_ROWS) want = PANEL_ROWS;
    return (int)want;
}

void k3_matmul_avx2(const k3_wmat *W, const float *X, int64_t T, float *Y) {
    const int64_t R = W->rows;
    const int pr = panel_rows(R, omp_get_max_threads());
    const int64_t npanels = (R + pr - 1) / pr;
    const int par = R * W->cols * T >= 65536 && npanels > 1;
#pragma omp parallel for schedule(dynamic, 1) if (par)
    for (int64_t b = 0; b < npanels; b++) {
        int64_t r0 = b * pr;
        int n = R - r0 < pr ? (int)(R - r0) : pr;
        panel_product(W, r0, n, X, T, Y);
    }
}
