/* matvec_i8.c — the opt-in int8-activation decode path (see matvec_i8.h):
 * the switch, which matrices it handles, and the scalar reference of its
 * arithmetic (activation quantization, integer block dots, scale application)
 * that the AVX-512 VNNI kernel (matvec_i8_avx512.c) is tested against. */
#include "kernels/matvec_i8.h"
#include "base/mem.h"
#include "kernels/avx2_decode.h"
#include "kernels/runtime.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int k3_i8_format_ok(const k3_wmat *W) {
    if (W->cols <= 0 || W->cols % K3_I8_BLOCK) return 0;
    if (W->fmt == K3_W_MXFP4) return W->group == 32;
    if (W->fmt != K3_W_AFFINE) return 0;
    if (W->bits < 2 || W->bits > 8 || W->bits == 7) return 0;
    if (W->group != 32 && W->group != 64 && W->group != 128) return 0;
    if (W->scale_fmt != K3_W_BF16 && W->scale_fmt != K3_W_F16 && W->scale_fmt != K3_W_F32) return 0;
    return W->cols % W->group == 0;
}

/* MXFP4 rows narrower than this keep f32 activations. The expert down
 * products run in column blocks of 32-96 MXFP4 columns (rowpar.h: 8 blocks
 * of the bench preset's 256, 4 of K3's 384), where the int8 kernel's work per
 * row (scale window, masked partial chunk, reduction) outweighs the row:
 * bench/kmicro.c, 16 rows, 8 blocks of 32 columns, 1.1-1.6 us against 0.3-0.7
 * for the f32 kernel; at 256 columns the two are level, from 384 int8 leads. */
#define K3_I8_MXFP4_MIN_COLS 256

int k3_i8_supports(const k3_wmat *W) {
    if (W->fmt == K3_W_MXFP4 && W->cols < K3_I8_MXFP4_MIN_COLS) return 0;
    /* VBMI for every width: the kernel file is compiled with it (the 3/5/6-bit decoder
     * uses vpermb + vpmultishiftqb), so a VNNI-only CPU (Cascade Lake) must not run it */
    return k3_act_int8() && k3_kernels_active() == K3_KERNELS_AVX512 && k3_cpu_has_avx512_vnni() &&
           k3_cpu_has_avx512_vbmi() && k3_i8_format_ok(W);
}

/* round-half-even under the default rounding mode, like cvtps2dq */
static int8_t quantize_one(float v) {
    float r = nearbyintf(v);
    if (!(r == r)) return 0; /* NaN input: keep the cast defined */
    return (int8_t)(r > 127.0f ? 127 : r < -127.0f ? -127 : (int)r);
}

void k3_i8_quantize_ref(const float *x, int64_t n, int8_t *q, float *d, int32_t *isum) {
    for (int64_t b = 0; b < n / K3_I8_BLOCK; b++) {
        const float *xb = x + b * K3_I8_BLOCK;
        float amax = 0.0f;
        for (int i = 0; i < K3_I8_BLOCK; i++) amax = fmaxf(amax, fabsf(xb[i]));
        const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        int32_t s = 0;
        for (int i = 0; i < K3_I8_BLOCK; i++) {
            q[b * K3_I8_BLOCK + i] = quantize_one(xb[i] * inv);
            s += q[b * K3_I8_BLOCK + i];
        }
        d[b] = amax / 127.0f;
        isum[b] = s;
    }
}

void k3_i8_group_sums(const float *d, const int32_t *isum, int64_t n, int group, float *xs) {
    const int per = group / K3_I8_BLOCK;
    for (int64_t g = 0; g < n / group; g++) {
        float s = 0.0f;
        for (int j = 0; j < per; j++) s += d[g * per + j] * (float)isum[g * per + j];
        xs[g] = s;
    }
}

/* Code c of an affine row (LSB-first bit stream; 3/5/6-bit codes may straddle two bytes). */
static int affine_code(const uint8_t *row, int64_t c, int bits) {
    int64_t bit = c * bits;
    unsigned v = row[bit / 8];
    if (bit % 8 + bits > 8) v |= (unsigned)row[bit / 8 + 1] << 8;
    return (int)(v >> (bit % 8)) & ((1 << bits) - 1);
}

/* 2 * E2M1 value of the code for column c of an MXFP4 row (-12..12). */
static int mxfp4_code2(const uint8_t *row, int64_t c) {
    static const int8_t lut[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    return lut[(row[c / 2] >> (4 * (c & 1))) & 15];
}

/* Integer dot of block b of row r with the quantized activation. */
static int32_t block_dot(const k3_wmat *W, const uint8_t *row, int64_t b, const int8_t *q) {
    int32_t s = 0;
    for (int64_t c = b * K3_I8_BLOCK; c < (b + 1) * K3_I8_BLOCK; c++)
        s += (W->fmt == K3_W_MXFP4 ? mxfp4_code2(row, c) : affine_code(row, c, W->bits)) * q[c];
    return s;
}

static double ref_row(const k3_wmat *W, int64_t r, const int8_t *q, const float *d,
                      const float *xs) {
    const uint8_t *row = W->data + (size_t)r * W->row_stride;
    const uint8_t *sc = W->scales + (size_t)r * W->scale_stride;
    double y = 0.0;
    if (W->fmt == K3_W_MXFP4) {
        for (int64_t b = 0; b < W->cols / K3_I8_BLOCK; b++)
            y += (double)k3_mxfp4_half_scale(sc[b]) * d[b] * block_dot(W, row, b, q);
        return y;
    }
    const uint8_t *bi = W->biases + (size_t)r * W->bias_stride;
    const int per = W->group / K3_I8_BLOCK;
    for (int64_t g = 0; g < W->cols / W->group; g++) {
        double a = 0.0;
        for (int j = 0; j < per; j++)
            a += (double)d[g * per + j] * block_dot(W, row, g * per + j, q);
        y += (double)k3_wmat_elt(W->scale_fmt, sc, g) * a +
             (double)k3_wmat_elt(W->scale_fmt, bi, g) * xs[g];
    }
    return y;
}

void k3_matvec_i8_ref(const k3_wmat *W, const float *x, float *y) {
    const int64_t K = W->cols, nb = K / K3_I8_BLOCK;
    int8_t *q = k3_xmalloc((size_t)K);
    float *d = k3_xmalloc(sizeof(float) * (size_t)(2 * nb));
    int32_t *isum = k3_xmalloc(sizeof(int32_t) * (size_t)nb);
    float *xs = d + nb;
    k3_i8_quantize_ref(x, K, q, d, isum);
    if (W->fmt == K3_W_AFFINE) k3_i8_group_sums(d, isum, K, W->group, xs);
    for (int64_t r = 0; r < W->rows; r++) y[r] = (float)ref_row(W, r, q, d, xs);
    free(q);
    free(d);
    free(isum);
}
