/* wmat.h — a weight matrix in any storage format, as a typed view.
 *
 * Every Linear in the model is a k3_wmat: logical shape [rows, cols] with
 * y[r] = sum_c W[r,c] x[c]. The view points into memory-mapped checkpoint
 * bytes (never copied); strides allow row and column slices for tensor
 * parallelism without copying.
 *
 * Formats
 *   F32, F16, BF16  element (r,c) at data + r*row_stride + c*elt_size
 *   MXFP4           two E2M1 codes per byte, low nibble = even column;
 *                   E8M0 scale per 32 columns at scales + r*scale_stride + c/32
 *   AFFINE          MLX affine: `bits`-wide unsigned codes packed LSB-first in
 *                   a little-endian byte stream per row; per group of `group`
 *                   columns W = scale*q + bias, scale/bias of type scale_fmt. */
#ifndef K3_QUANT_WMAT_H
#define K3_QUANT_WMAT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "quant/dtype.h"

typedef enum { K3_W_F32 = 0, K3_W_F16, K3_W_BF16, K3_W_MXFP4, K3_W_AFFINE } k3_wfmt;

typedef struct k3_wmat {
    k3_wfmt fmt;
    int64_t rows, cols;
    const uint8_t *data;
    size_t row_stride; /* bytes from row r to row r+1 in data */
    /* MXFP4 and AFFINE only */
    const uint8_t *scales;
    size_t scale_stride;   /* bytes between rows of scales */
    const uint8_t *biases; /* AFFINE only; same layout as scales */
    size_t bias_stride;
    k3_wfmt scale_fmt; /* AFFINE: K3_W_BF16, K3_W_F16 or K3_W_F32 */
    int bits;          /* AFFINE: 2,3,4,5,6,8; MXFP4: 4 */
    int group;         /* AFFINE: 32/64/128; MXFP4: 32 */
} k3_wmat;

/* Scalar element i of an f32 / f16 / bf16 array (weights, affine scales and biases). */
static inline float k3_wmat_elt(k3_wfmt fmt, const uint8_t *p, int64_t i) {
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

/* Bits a weight takes in W's data, its scales and biases aside. */
static inline int k3_wmat_weight_bits(const k3_wmat *W) {
    switch (W->fmt) {
    case K3_W_F32:
        return 32;
    case K3_W_F16:
    case K3_W_BF16:
        return 16;
    default:
        return W->bits;
    }
}

/* Name of a format, for messages ("bf16", "mxfp4", "affine4/64"...). */
const char *k3_wfmt_name(k3_wfmt f);

/* Dequantize columns [c0, c0+n) of row r into out[0..n). For quantized formats
 * c0 and n must be multiples of the group size, except that n may end at cols. */
void k3_wmat_row(const k3_wmat *W, int64_t r, int64_t c0, int64_t n, float *out);

/* Views (no copy). rows: [r0, r0+n). cols: [c0, c0+n); c0 must be group-aligned. */
k3_wmat k3_wmat_rows(const k3_wmat *W, int64_t r0, int64_t n);
k3_wmat k3_wmat_cols(const k3_wmat *W, int64_t c0, int64_t n);

/* Bytes a full pass over W reads (data + scales + biases), for roofline numbers. */
uint64_t k3_wmat_bytes(const k3_wmat *W);

#endif
