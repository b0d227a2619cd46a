/* helpers.h — what several tests need: random weight matrices in every
 * format, and reading, writing and comparing float files.
 *
 * make_mat(fmt, R, K, bits, group, scale_fmt) fills a k3_wmat with random
 * data (row strides padded by 7 bytes so that strides are honoured, MXFP4
 * scales with a subnormal and a near-subnormal exponent); free_mat frees it.
 * They are inline here because they draw from t.h's t_rand, whose state is
 * each test program's own (t_seed). The file helpers are in helpers.c,
 * which the Makefile links into every test program. */
#ifndef K3_TESTS_HELPERS_H
#define K3_TESTS_HELPERS_H

#include <stddef.h>
#include <stdint.h>

/* The whole of PATH as floats (malloc'd, free()); *n their count. NULL if
 * the file cannot be opened. */
float *t_read_floats(const char *path, int64_t *n);
/* Write n bytes of data to path (created or truncated). 0, or -1 if the
 * file could not be written. */
int t_write_file(const char *path, const void *data, size_t n);
/* max |a[i] - b[i]| over i < n, in double; NaN if any difference is NaN. */
double t_max_diff(const float *a, const float *b, int64_t n);

/* helpers.c defines this: it needs the file helpers only, not t.h. */
#ifndef K3_TESTS_HELPERS_FILES_ONLY
#include "kernels/matmul.h"
#include "quant/dtype.h"
#include "t.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    k3_wmat w;
    uint8_t *data, *scales, *biases;
} owned_mat;

static inline void put_scalar(k3_wfmt fmt, uint8_t *p, int64_t i, float v) {
    if (fmt == K3_W_F32) {
        memcpy(p + 4 * i, &v, 4);
    } else {
        uint16_t h = fmt == K3_W_F16 ? k3_f32_to_f16(v) : k3_f32_to_bf16(v);
        memcpy(p + 2 * i, &h, 2);
    }
}

static inline size_t esize(k3_wfmt f) {
    return f == K3_W_F32 ? 4 : 2;
}

/* A random matrix; `pad` extra bytes per row check that strides are honoured. */
static inline owned_mat make_mat(k3_wfmt fmt, int64_t R, int64_t K, int bits, int group,
                                 k3_wfmt sfmt) {
    owned_mat m = {0};
    const size_t pad = 7;
    m.w.fmt = fmt;
    m.w.rows = R;
    m.w.cols = K;
    m.w.bits = bits;
    m.w.group = group;
    m.w.scale_fmt = sfmt;
    size_t rb;
    if (fmt == K3_W_MXFP4)
        rb = (size_t)K / 2;
    else if (fmt == K3_W_AFFINE)
        rb = (size_t)K * (size_t)bits / 8;
    else
        rb = (size_t)K * esize(fmt);
    m.w.row_stride = rb + pad;
    m.data = malloc(m.w.row_stride * (size_t)R + 1);
    for (size_t i = 0; i < m.w.row_stride * (size_t)R; i++)
        m.data[i] = (uint8_t)(t_rand() * 128 + 128);
    if (fmt <= K3_W_BF16)
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = 0; c < K; c++)
                put_scalar(fmt, m.data + r * m.w.row_stride, c, (float)t_rand());
    m.w.data = m.data;
    if (fmt == K3_W_MXFP4) {
        m.w.scale_stride = (size_t)K / 32 + 3;
        m.scales = malloc(m.w.scale_stride * (size_t)R + 1);
        for (size_t i = 0; i < m.w.scale_stride * (size_t)R; i++)
            m.scales[i] = (uint8_t)(124 + (int)(t_rand() * 4)); /* 2^-7 .. 2^1 */
        m.scales[0] = 0;                                        /* subnormal 2^-127 */
        if (R * K > 64) m.scales[1] = 1;
        m.w.scales = m.scales;
    }
    if (fmt == K3_W_AFFINE) {
        int64_t ng = K / group;
        m.w.scale_stride = m.w.bias_stride = (size_t)ng * esize(sfmt) + 2;
        m.scales = malloc(m.w.scale_stride * (size_t)R + 1);
        m.biases = malloc(m.w.bias_stride * (size_t)R + 1);
        for (int64_t r = 0; r < R; r++)
            for (int64_t g = 0; g < ng; g++) {
                put_scalar(sfmt, m.scales + r * m.w.scale_stride, g,
                           (float)(0.01 + 0.02 * t_rand()));
                put_scalar(sfmt, m.biases + r * m.w.bias_stride, g, (float)(0.5 * t_rand()));
            }
        m.w.scales = m.scales;
        m.w.biases = m.biases;
    }
    return m;
}

static inline void free_mat(owned_mat *m) {
    free(m->data);
    free(m->scales);
    free(m->biases);
}

#endif /* K3_TESTS_HELPERS_FILES_ONLY */

#endif
