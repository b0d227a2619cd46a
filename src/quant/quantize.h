/* quantize.h — f32 -> MLX affine and f32 -> MXFP4 quantizers (what `k3 quantize` writes).
 *
 * Both quantize each row of W [rows, cols] along cols, and write exactly the
 * layout k3_wmat reads (and MLX stores):
 *   affine  codes: `bits`-wide, packed LSB-first into a little-endian byte
 *           stream per row (= MLX's uint32 words for every width), cols*bits/8
 *           bytes per row; scales and biases [rows, cols/group] in scale_fmt.
 *           Per group, as MLX `affine_quantize`: with n = 2^bits - 1,
 *           s = max((max-min)/n, 1e-7), signed towards the edge of larger
 *           magnitude (min if |min| > |max|, else max), then nudged so that
 *           edge/s is an integer (0 is exactly representable), b = edge,
 *           q = clip(round_half_even((w - b)/s), 0, n); s and b are computed in
 *           f32 and rounded to scale_fmt afterwards.
 *   mxfp4   codes: E2M1, two per byte, low nibble = even column; one E8M0
 *           scale per 32 columns: the smallest power of two 2^e with
 *           max|w| <= 6*2^e (nothing clips), each value rounded to the nearest
 *           E2M1 (ties to even). An all-zero group gets scale 2^0.
 * Round-trip bounds (tested): affine |w - deq| <= |s| (half a step from
 * rounding, up to one step at a clipped edge) plus the scale_fmt rounding of
 * s and b; mxfp4 |w - deq| <= half the E2M1 spacing at |w|, times 2^e. */
#ifndef K3_QUANT_QUANTIZE_H
#define K3_QUANT_QUANTIZE_H

#include "quant/wmat.h"

#include <stddef.h>
#include <stdint.h>

/* Bytes of one packed row / of one row of scales (or biases). */
size_t k3_affine_row_bytes(int64_t cols, int bits);
size_t k3_affine_scale_row_bytes(int64_t cols, int group, k3_wfmt scale_fmt);

/* Quantize W [rows, cols] (row-major f32). cols must be a multiple of group
 * (and of 32); bits in {2,3,4,5,6,8}; group in {32,64,128}; scale_fmt
 * bf16/f16/f32. codes: rows*k3_affine_row_bytes, scales/biases:
 * rows*k3_affine_scale_row_bytes. Returns 0, or -1 + k3_seterr on bad args. */
int k3_quantize_affine(const float *W, int64_t rows, int64_t cols, int bits, int group,
                       k3_wfmt scale_fmt, uint8_t *codes, uint8_t *scales, uint8_t *biases);

/* Quantize W [rows, cols] to MXFP4; cols a multiple of 32. packed:
 * rows*cols/2 bytes, scales: rows*cols/32 bytes. Returns 0 or -1 + k3_seterr. */
int k3_quantize_mxfp4(const float *W, int64_t rows, int64_t cols, uint8_t *packed, uint8_t *scales);

/* k3_wmat views over buffers laid out as above (dense, no padding). */
k3_wmat k3_wmat_affine(int64_t rows, int64_t cols, int bits, int group, k3_wfmt scale_fmt,
                       const uint8_t *codes, const uint8_t *scales, const uint8_t *biases);
k3_wmat k3_wmat_mxfp4(int64_t rows, int64_t cols, const uint8_t *packed, const uint8_t *scales);

#endif
