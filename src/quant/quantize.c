/* quantize.c — MLX affine and MXFP4 quantizers (algorithms in quantize.h). */
#include "quant/quantize.h"
#include "base/err.h"
#include "quant/dtype.h"

#include <math.h>
#include <string.h>

static size_t scale_size(k3_wfmt f) {
    return f == K3_W_F32 ? 4 : 2;
}

size_t k3_affine_row_bytes(int64_t cols, int bits) {
    return (size_t)cols * (size_t)bits / 8;
}

size_t k3_affine_scale_row_bytes(int64_t cols, int group, k3_wfmt scale_fmt) {
    return (size_t)(cols / group) * scale_size(scale_fmt);
}

static void put_scale(k3_wfmt f, uint8_t *p, int64_t i, float v) {
    if (f == K3_W_F32) {
        memcpy(p + 4 * i, &v, 4);
        return;
    }
    uint16_t h = f == K3_W_F16 ? k3_f32_to_f16(v) : k3_f32_to_bf16(v);
    memcpy(p + 2 * i, &h, 2);
}

/* OR `bits`-wide code q in as code number c of an LSB-first packed row. */
static void put_code(uint8_t *row, int bits, int64_t c, uint32_t q) {
    uint64_t bit = (uint64_t)c * (uint64_t)bits;
    uint8_t *p = row + (bit >> 3);
    unsigned sh = (unsigned)(bit & 7);
    uint32_t v = q << sh;
    p[0] |= (uint8_t)v;
    if (sh + (unsigned)bits > 8) p[1] |= (uint8_t)(v >> 8);
}

/* One group, exactly as MLX affine_quantize (f32 arithmetic, rintf = round half even). */
static void affine_group(const float *w, int G, int bits, float *s_out, float *b_out, uint8_t *row,
                         int64_t c0) {
    const float n_bins = (float)((1 << bits) - 1);
    float mx = w[0], mn = w[0];
    for (int i = 1; i < G; i++) {
        mx = w[i] > mx ? w[i] : mx;
        mn = w[i] < mn ? w[i] : mn;
    }
    int mask = fabsf(mn) > fabsf(mx);
    float s = fmaxf((mx - mn) / n_bins, 1e-7f);
    s = mask ? s : -s;
    float edge = mask ? mn : mx;
    float q0 = rintf(edge / s);
    if (q0 != 0.0f) s = edge / q0;
    float b = q0 == 0.0f ? 0.0f : edge;
    for (int i = 0; i < G; i++) {
        float q = rintf((w[i] - b) / s);
        q = q < 0.0f ? 0.0f : q > n_bins ? n_bins : q;
        put_code(row, bits, c0 + i, (uint32_t)q);
    }
    *s_out = s;
    *b_out = b;
}

int k3_quantize_affine(const float *W, int64_t rows, int64_t cols, int bits, int group,
                       k3_wfmt scale_fmt, uint8_t *codes, uint8_t *scales, uint8_t *biases) {
    if (bits < 2 || bits > 8 || bits == 7)
        return k3_seterr("affine quantization: bits %d not in {2,3,4,5,6,8}", bits);
    if (group != 32 && group != 64 && group != 128)
        return k3_seterr("affine quantization: group size %d not in {32,64,128}", group);
    if (cols <= 0 || cols % group)
        return k3_seterr("affine quantization: %lld columns is not a multiple of the group size %d",
                         (long long)cols, group);
    if (scale_fmt != K3_W_BF16 && scale_fmt != K3_W_F16 && scale_fmt != K3_W_F32)
        return k3_seterr("affine quantization: scales must be bf16, f16 or f32");
    const size_t rb = k3_affine_row_bytes(cols, bits);
    const size_t sb = k3_affine_scale_row_bytes(cols, group, scale_fmt);
    memset(codes, 0, rb * (size_t)rows);
#pragma omp parallel for schedule(static) if (rows * cols > 65536)
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t g = 0; g < cols / group; g++) {
            float s, b;
            affine_group(W + r * cols + g * group, group, bits, &s, &b, codes + r * rb, g * group);
            put_scale(scale_fmt, scales + r * sb, g, s);
            put_scale(scale_fmt, biases + r * sb, g, b);
        }
    }
    return 0;
}

/* Nearest E2M1 magnitude code (0..7) for a >= 0, ties to the even code. */
static int e2m1_code(float a) {
    int best = 0;
    float bd = INFINITY;
    for (int c = 0; c < 8; c++) {
        float d = fabsf(a - k3_e2m1_table[c]);
        if (d < bd || (d == bd && !(c & 1))) {
            bd = d;
            best = c;
        }
    }
    return best;
}

/* E8M0 exponent of a group: smallest e with amax <= 6 * 2^e, as the biased byte. */
static uint8_t mxfp4_scale(float amax) {
    if (!(amax > 0.0f) || !isfinite(amax)) return 127;
    int e = (int)ceilf(log2f(amax / 6.0f));
    while (e > -127 && amax <= 6.0f * ldexpf(1.0f, e - 1)) e--; /* log2f rounding guard */
    while (amax > 6.0f * ldexpf(1.0f, e)) e++;
    e = e < -127 ? -127 : e > 127 ? 127 : e;
    return (uint8_t)(e + 127);
}

int k3_quantize_mxfp4(const float *W, int64_t rows, int64_t cols, uint8_t *packed,
                      uint8_t *scales) {
    if (cols <= 0 || cols % 32)
        return k3_seterr("mxfp4 quantization: %lld columns is not a multiple of 32",
                         (long long)cols);
#pragma omp parallel for schedule(static) if (rows * cols > 65536)
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t g = 0; g < cols / 32; g++) {
            const float *w = W + r * cols + g * 32;
            float amax = 0.0f;
            for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(w[i]));
            uint8_t s = mxfp4_scale(amax);
            float inv = ldexpf(1.0f, 127 - (int)s);
            scales[r * (cols / 32) + g] = s;
            uint8_t *p = packed + r * (cols / 2) + g * 16;
            for (int i = 0; i < 32; i += 2) {
                int c0 = e2m1_code(fabsf(w[i]) * inv), c1 = e2m1_code(fabsf(w[i + 1]) * inv);
                if (w[i] < 0 && c0) c0 |= 8;
                if (w[i + 1] < 0 && c1) c1 |= 8;
                p[i / 2] = (uint8_t)(c0 | (c1 << 4));
            }
        }
    }
    return 0;
}

k3_wmat k3_wmat_affine(int64_t rows, int64_t cols, int bits, int group, k3_wfmt scale_fmt,
                       const uint8_t *codes, const uint8_t *scales, const uint8_t *biases) {
    k3_wmat w = {0};
    w.fmt = K3_W_AFFINE;
    w.rows = rows;
    w.cols = cols;
    w.data = codes;
    w.row_stride = k3_affine_row_bytes(cols, bits);
    w.scales = scales;
    w.biases = biases;
    w.scale_stride = w.bias_stride = k3_affine_scale_row_bytes(cols, group, scale_fmt);
    w.scale_fmt = scale_fmt;
    w.bits = bits;
    w.group = group;
    return w;
}

k3_wmat k3_wmat_mxfp4(int64_t rows, int64_t cols, const uint8_t *packed, const uint8_t *scales) {
    k3_wmat w = {0};
    w.fmt = K3_W_MXFP4;
    w.rows = rows;
    w.cols = cols;
    w.data = packed;
    w.row_stride = (size_t)cols / 2;
    w.scales = scales;
    w.scale_stride = (size_t)cols / 32;
    w.bits = 4;
    w.group = 32;
    return w;
}
