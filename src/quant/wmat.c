/* wmat.c — scalar dequantization and views of k3_wmat (the reference for every kernel). */
#include "quant/wmat.h"
#include "quant/dtype.h"

#include <string.h>

const char *k3_wfmt_name(k3_wfmt f) {
    switch (f) {
    case K3_W_F32:
        return "f32";
    case K3_W_F16:
        return "f16";
    case K3_W_BF16:
        return "bf16";
    case K3_W_MXFP4:
        return "mxfp4";
    case K3_W_AFFINE:
        return "affine";
    }
    return "?";
}

/* Code number c of a row packed LSB-first with `bits` bits per code. */
static uint32_t affine_code(const uint8_t *row, int bits, int64_t c) {
    uint64_t bit = (uint64_t)c * (uint64_t)bits;
    const uint8_t *p = row + (bit >> 3);
    unsigned sh = (unsigned)(bit & 7);
    uint32_t v = p[0];
    if (sh + (unsigned)bits > 8) v |= (uint32_t)p[1] << 8;
    return (v >> sh) & ((1u << bits) - 1);
}

void k3_wmat_row(const k3_wmat *W, int64_t r, int64_t c0, int64_t n, float *out) {
    const uint8_t *row = W->data + (size_t)r * W->row_stride;
    switch (W->fmt) {
    case K3_W_F32:
    case K3_W_F16:
    case K3_W_BF16:
        for (int64_t i = 0; i < n; i++) out[i] = k3_wmat_elt(W->fmt, row, c0 + i);
        break;
    case K3_W_MXFP4: {
        const uint8_t *sc = W->scales + (size_t)r * W->scale_stride;
        for (int64_t i = 0; i < n; i++) {
            int64_t c = c0 + i;
            uint8_t b = row[c >> 1];
            uint8_t code = (c & 1) ? (b >> 4) : (b & 15);
            out[i] = k3_e2m1_table[code] * k3_e8m0_to_f32(sc[c / 32]);
        }
        break;
    }
    case K3_W_AFFINE: {
        const uint8_t *sc = W->scales + (size_t)r * W->scale_stride;
        const uint8_t *bi = W->biases + (size_t)r * W->bias_stride;
        for (int64_t i = 0; i < n; i++) {
            int64_t c = c0 + i, g = c / W->group;
            float s = k3_wmat_elt(W->scale_fmt, sc, g), b = k3_wmat_elt(W->scale_fmt, bi, g);
            out[i] = s * (float)affine_code(row, W->bits, c) + b;
        }
        break;
    }
    }
}

k3_wmat k3_wmat_rows(const k3_wmat *W, int64_t r0, int64_t n) {
    k3_wmat v = *W;
    v.rows = n;
    v.data += (size_t)r0 * W->row_stride;
    if (v.scales) v.scales += (size_t)r0 * W->scale_stride;
    if (v.biases) v.biases += (size_t)r0 * W->bias_stride;
    return v;
}

static size_t elt_size(k3_wfmt f) {
    return f == K3_W_F32 ? 4 : 2;
}

k3_wmat k3_wmat_cols(const k3_wmat *W, int64_t c0, int64_t n) {
    k3_wmat v = *W;
    v.cols = n;
    switch (W->fmt) {
    case K3_W_F32:
    case K3_W_F16:
    case K3_W_BF16:
        v.data += (size_t)c0 * elt_size(W->fmt);
        break;
    case K3_W_MXFP4:
        v.data += (size_t)c0 / 2;
        v.scales += (size_t)c0 / 32;
        break;
    case K3_W_AFFINE: {
        size_t g = (size_t)c0 / (size_t)W->group, es = elt_size(W->scale_fmt);
        v.data += (size_t)c0 * (size_t)W->bits / 8;
        v.scales += g * es;
        v.biases += g * es;
        break;
    }
    }
    return v;
}

uint64_t k3_wmat_bytes(const k3_wmat *W) {
    uint64_t r = (uint64_t)W->rows, c = (uint64_t)W->cols;
    switch (W->fmt) {
    case K3_W_F32:
        return r * c * 4;
    case K3_W_F16:
    case K3_W_BF16:
        return r * c * 2;
    case K3_W_MXFP4:
        return r * (c / 2 + c / 32);
    case K3_W_AFFINE:
        return r *
               (c * (uint64_t)W->bits / 8 + 2 * (c / (uint64_t)W->group) * elt_size(W->scale_fmt));
    }
    return 0;
}
