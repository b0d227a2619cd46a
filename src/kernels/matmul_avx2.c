/* matmul_avx2.c — AVX2+FMA tiled matrix-matrix product (prefill: many tokens).
 *
 * Y[t, r] = sum_c W[r, c] X[t, c]. Per block of 16 rows, the weights are
 * dequantized once per call and stored k-major (P[k][16], thread-local scratch,
 * L2-resident); then a 6-token x 16-row register tile (12 accumulators)
 * broadcasts X[t, k] against two vectors of P per k (BLIS-style outer
 * product), so each weight is decoded once and used for all T tokens, the
 * accumulators map directly onto contiguous Y rows and no horizontal sums are
 * needed. Activations stay f32.
 *
 * Every (t, r) is accumulated by one FMA per k in column order whatever T,
 * the tile or the thread count, so results do not depend on threading or on
 * how a prompt is split into chunks. */
#include "kernels/avx2.h"
#include "kernels/runtime.h"
#include "kernels/avx2_decode.h"
#include "kernels/panel.h"
#include "kernels/scratch.h"
#include "quant/dtype.h"

#include <omp.h>

K3_AVX2_INLINE void decode_float_row(k3_wfmt fmt, const uint8_t *row, int64_t K, float *out) {
    int64_t c = 0;
    for (; c + 8 <= K; c += 8) {
        __m256 v = fmt == K3_W_F32   ? k3_dec8_f32(row, c)
                   : fmt == K3_W_F16 ? k3_dec8_f16(row, c)
                                     : k3_dec8_bf16(row, c);
        _mm256_storeu_ps(out + c, v);
    }
    for (; c < K; c++) out[c] = k3_wmat_elt(fmt, row, c);
    for (; c < k3_round8(K); c++) out[c] = 0.0f;
}

K3_AVX2_INLINE void decode_affine_row(const k3_wmat *W, int64_t r, float *out, int bits, int G) {
    const uint8_t *row = W->data + (size_t)r * W->row_stride;
    const uint8_t *sc = W->scales + (size_t)r * W->scale_stride;
    const uint8_t *bi = W->biases + (size_t)r * W->bias_stride;
    for (int64_t g = 0; g < W->cols / G; g++) {
        __m256 s = _mm256_set1_ps(k3_wmat_elt(W->scale_fmt, sc, g));
        __m256 b = _mm256_set1_ps(k3_wmat_elt(W->scale_fmt, bi, g));
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

/* Decode rows [r0, r0+n) (n <= 16) into the k-major panel P[k*16 + i];
 * rows n..15 are zero. Float formats go straight from the weights; the
 * quantized ones through the row decoder and `rows`, a 16 x kp temporary. */
K3_AVX2 static void pack_panel(const k3_wmat *W, int64_t r0, int n, float *rows, float *P) {
    const int64_t kp = k3_round8(W->cols);
    if (W->fmt == K3_W_F32 || W->fmt == K3_W_F16 || W->fmt == K3_W_BF16) {
        k3_pack_float_rows(W, r0, n < 8 ? n : 8, P, 16);
        k3_pack_float_rows(W, r0 + 8, n - 8, P + 8, 16); /* m <= 0: zero columns */
        return;
    }
    for (int i = 0; i < n; i++) k3_avx2_decode_row(W, r0 + i, rows + i * kp);
    if (n < 16) memset(rows + n * kp, 0, sizeof(float) * (size_t)((16 - n) * kp));
    for (int64_t k = 0; k < kp; k += 8) {
        k3_transpose8(rows + k, kp, P + k * 16, 16);
        k3_transpose8(rows + 8 * kp + k, kp, P + k * 16 + 8, 16);
    }
}

/* Y[j, 0..nr) = sum_k X[j, k] P[k, 0..nr) for j < NT (a compile-time
 * constant after inlining). The 2*NT accumulators are named variables, not an
 * array: GCC keeps an accumulator array in memory here. Each output lane
 * accumulates k in order with one FMA per k, whatever the tiling. */
#define TILE_ROW(j)                                                                                \
    if (NT > j) {                                                                                  \
        __m256 a = _mm256_broadcast_ss(X + j * K + k);                                             \
        c##j##0 = _mm256_fmadd_ps(a, b0, c##j##0);                                                 \
        c##j##1 = _mm256_fmadd_ps(a, b1, c##j##1);                                                 \
    }
#define TILE_STORE(j)                                                                              \
    if (NT > j) {                                                                                  \
        if (nr == 16) {                                                                            \
            _mm256_storeu_ps(Y + j * R, c##j##0);                                                  \
            _mm256_storeu_ps(Y + j * R + 8, c##j##1);                                              \
        } else {                                                                                   \
            _mm256_maskstore_ps(Y + j * R, m0, c##j##0);                                           \
            _mm256_maskstore_ps(Y + j * R + 8, m1, c##j##1);                                       \
        }                                                                                          \
    }
K3_AVX2_INLINE void tile(const float *P, const float *X, int64_t K, int NT, float *Y, int64_t R,
                         int nr) {
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
           c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    for (int64_t k = 0; k < K; k++) {
        __m256 b0 = _mm256_load_ps(P + k * 16), b1 = _mm256_load_ps(P + k * 16 + 8);
        TILE_ROW(0) TILE_ROW(1) TILE_ROW(2) TILE_ROW(3) TILE_ROW(4) TILE_ROW(5)
    }
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(nr), lane);
    __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(nr - 8), lane);
    TILE_STORE(0) TILE_STORE(1) TILE_STORE(2) TILE_STORE(3) TILE_STORE(4) TILE_STORE(5)
}
#undef TILE_ROW
#undef TILE_STORE

K3_AVX2 static void tile_any(const float *P, const float *X, int64_t K, int nt, float *Y, int64_t R,
                             int nr) {
    switch (nt) {
    case 6:
        tile(P, X, K, 6, Y, R, nr);
        break;
    case 5:
        tile(P, X, K, 5, Y, R, nr);
        break;
    case 4:
        tile(P, X, K, 4, Y, R, nr);
        break;
    case 3:
        tile(P, X, K, 3, Y, R, nr);
        break;
    case 2:
        tile(P, X, K, 2, Y, R, nr);
        break;
    default:
        tile(P, X, K, 1, Y, R, nr);
        break;
    }
}

/* Rows [r0, r0+n) of Y for all T tokens: pack the panel once, then one
 * register tile per 6 tokens. */
K3_AVX2 static void panel_product(const k3_wmat *W, int64_t r0, int n, const float *X, int64_t T,
                                  float *Y) {
    const int64_t K = W->cols, kp = k3_round8(K), R = W->rows;
    float *buf = k3_scratch(K3_SCRATCH_PANEL, sizeof(float) * (size_t)(32 * kp));
    float *rows = buf, *P = buf + 16 * kp;
    pack_panel(W, r0, n, rows, P);
    for (int64_t t = 0; t < T; t += 6) {
        int nt = T - t < 6 ? (int)(T - t) : 6;
        tile_any(P, X + t * K, K, nt, Y + t * R + r0, R, n);
    }
}

void k3_matmul_avx2(const k3_wmat *W, const float *X, int64_t T, float *Y) {
    const int64_t R = W->rows, npanels = (R + 15) / 16;
    if (R * W->cols * T < 65536 || npanels == 1 || k3_kernels_serial()) {
        for (int64_t r0 = 0; r0 < R; r0 += 16)
            panel_product(W, r0, R - r0 < 16 ? (int)(R - r0) : 16, X, T, Y);
        return;
    }
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t b = 0; b < npanels; b++) {
        int64_t r0 = b * 16;
        panel_product(W, r0, R - r0 < 16 ? (int)(R - r0) : 16, X, T, Y);
    }
}

/* Dot of a decoded row (f32, L1-resident) with one token: four accumulators
 * over 32 columns, then 8-column steps, then the scalar tail; the same
 * sequence for every token and every T. */
K3_AVX2_INLINE float dot_f32_row(const float *w, const float *x, int64_t K) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t c = 0;
    for (; c + 32 <= K; c += 32) {
        a0 = _mm256_fmadd_ps(_mm256_load_ps(w + c), _mm256_loadu_ps(x + c), a0);
        a1 = _mm256_fmadd_ps(_mm256_load_ps(w + c + 8), _mm256_loadu_ps(x + c + 8), a1);
        a2 = _mm256_fmadd_ps(_mm256_load_ps(w + c + 16), _mm256_loadu_ps(x + c + 16), a2);
        a3 = _mm256_fmadd_ps(_mm256_load_ps(w + c + 24), _mm256_loadu_ps(x + c + 24), a3);
    }
    for (; c + 8 <= K; c += 8)
        a0 = _mm256_fmadd_ps(_mm256_load_ps(w + c), _mm256_loadu_ps(x + c), a0);
    float s = k3_hsum256(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; c < K; c++) s += w[c] * x[c];
    return s;
}

/* Few tokens (experts in prefill): the k-major panel and its transpose cost
 * as much as the FMAs when each weight serves only a handful of tokens, so
 * each row is decoded once into an aligned L1 buffer and dotted with every
 * token. Serial: callers split the work. */
K3_AVX2 void k3_matmul_few_avx2(const k3_wmat *W, const float *X, int64_t T, float *Y) {
    const int64_t K = W->cols, R = W->rows;
    float *row = k3_scratch(K3_SCRATCH_PANEL, sizeof(float) * (size_t)k3_round8(K));
    for (int64_t r = 0; r < R; r++) {
        k3_avx2_decode_row(W, r, row);
        for (int64_t t = 0; t < T; t++) Y[t * R + r] = dot_f32_row(row, X + t * K, K);
    }
}
