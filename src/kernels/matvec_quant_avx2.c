/* matvec_quant_avx2.c — AVX2 matrix-vector products for affine 2/3/4/6/8-bit weights.
 *
 * Quantized decode is limited by instructions, not memory: converting codes
 * to floats and the FMA already take the two vector ALU ports. So codes are
 * never shifted into place. A block of packed bytes is widened so that each
 * 32-bit lane holds D consecutive codes (a byte: 1 code at 8 bits, 2 at 4, 4
 * at 2; three bytes: 4 codes at 6 bits, 8 at 3), and digit d is isolated with
 * one AND, which leaves code*2^(d*bits). x is permuted and scaled once per
 * call to match (xp[block + 8d + l] = x[block + l*D + d] * 2^-(d*bits), exact
 * powers of two), so each digit costs AND + convert + FMA.
 *
 * Per row: sum_g s_g * sum_{c in g} q_c x_c + sum_g b_g * xsum_g, with the
 * scales and biases of the row converted to f32 in vector steps first. */
#include "kernels/avx2.h"
#include "kernels/avx2_decode.h"
#include "kernels/scratch.h"
#include "quant/dtype.h"

/* Columns per block: 8 lanes x D codes. */
static int block_cols(int bits) {
    return bits == 8 ? 8 : bits == 4 ? 16 : bits == 3 ? 64 : 32;
}

/* xp[c0 + 8d + l] = x[c0 + l*D + d] * 2^-(d*bits) for every block c0. */
static void permute_x(const float *x, int64_t K, int bits, float *xp) {
    const int bc = block_cols(bits), D = bc / 8;
    float s[8]; /* 2^-(d*bits), once per call (ldexpf per block was 1-2% of decode) */
    for (int d = 0; d < D; d++) s[d] = ldexpf(1.0f, -d * bits);
    for (int64_t c0 = 0; c0 < K; c0 += bc)
        for (int d = 0; d < D; d++)
            for (int l = 0; l < 8; l++) xp[c0 + 8 * d + l] = x[c0 + l * D + d] * s[d];
}

/* n scales/biases of type fmt -> f32 out[0..n). */
K3_AVX2_INLINE void to_f32(k3_wfmt fmt, const uint8_t *p, int64_t n, float *out) {
    int64_t i = 0;
    if (fmt == K3_W_F32) {
        memcpy(out, p, sizeof(float) * (size_t)n);
        return;
    }
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(p + 2 * i));
        __m256 v = fmt == K3_W_F16
                       ? _mm256_cvtph_ps(h)
                       : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
        _mm256_storeu_ps(out + i, v);
    }
    for (; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        out[i] = fmt == K3_W_F16 ? k3_f16_to_f32(h) : k3_bf16_to_f32(h);
    }
}

/* The lanes of one block: bytes widened to 32 bits (8/4/2-bit: 8 bytes), or
 * 3-byte groups (6/3-bit: 24 bytes, two 16-byte loads inside the block). */
K3_AVX2_INLINE __m256i block_lanes(const uint8_t *p, int bits) {
    if (bits == 8 || bits == 4 || bits == 2)
        return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p));
    __m256i v = _mm256_loadu2_m128i((const __m128i *)(const void *)(p + 8),
                                    (const __m128i *)(const void *)p);
    const __m256i idx = _mm256_setr_epi8(0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11, -1, 4, 5,
                                         6, -1, 7, 8, 9, -1, 10, 11, 12, -1, 13, 14, 15, -1);
    return _mm256_shuffle_epi8(v, idx);
}

/* a[(first + d) % 4] += (lanes & digit d mask) * xp[8d..] for the D digits.
 * Four accumulators rotate so consecutive FMAs do not wait on each other
 * (FMA latency is 4 cycles, throughput 2 per cycle). */
K3_AVX2_INLINE void block_fma(__m256i v, const float *xp, int bits, int first, __m256 a[4]) {
    const int D = block_cols(bits) / 8;
    const int mask = (1 << bits) - 1;
#pragma GCC unroll 8
    for (int d = 0; d < D; d++) {
        __m256i q = bits == 8 ? v : _mm256_and_si256(v, _mm256_set1_epi32(mask << (d * bits)));
        __m256 f = _mm256_cvtepi32_ps(q);
        a[(first + d) & 3] = _mm256_fmadd_ps(f, _mm256_loadu_ps(xp + 8 * d), a[(first + d) & 3]);
    }
}

/* sum_g s_g * (q . x)_g for one row; blocks never straddle groups except
 * 3-bit blocks (64 columns) with group 32, whose two halves are scaled apart. */
K3_AVX2_INLINE float row_codes_dot(const uint8_t *row, const float *xp, const float *sc, int64_t K,
                                   int bits, int G) {
    const int bc = block_cols(bits), bb = bc * bits / 8, D = bc / 8;
    __m256 y0 = _mm256_setzero_ps(), y1 = y0;
    if (bc > G) { /* 3-bit, group 32: lanes 0-3 are group 2b, lanes 4-7 group 2b+1 */
        for (int64_t b = 0; b < K / bc; b++) {
            __m256 a[4];
            a[0] = a[1] = a[2] = a[3] = _mm256_setzero_ps();
            block_fma(block_lanes(row + b * bb, bits), xp + b * bc, bits, 0, a);
            __m256 s =
                _mm256_blend_ps(_mm256_set1_ps(sc[2 * b]), _mm256_set1_ps(sc[2 * b + 1]), 0xf0);
            __m256 sum = _mm256_add_ps(_mm256_add_ps(a[0], a[1]), _mm256_add_ps(a[2], a[3]));
            if (b & 1)
                y1 = _mm256_fmadd_ps(sum, s, y1);
            else
                y0 = _mm256_fmadd_ps(sum, s, y0);
        }
        return k3_hsum256(_mm256_add_ps(y0, y1));
    }
    const int per_group = G / bc;
    for (int64_t g = 0; g < K / G; g++) {
        /* prefetch 2 KiB ahead: the hardware streamer stops at page boundaries */
        _mm_prefetch((const char *)row + g * (G * bits / 8) + 2048, _MM_HINT_T0);
        __m256 a[4];
        a[0] = a[1] = a[2] = a[3] = _mm256_setzero_ps();
#pragma GCC unroll 16
        for (int j = 0; j < per_group; j++) {
            int64_t b = g * per_group + j;
            block_fma(block_lanes(row + b * bb, bits), xp + b * bc, bits, j * D, a);
        }
        __m256 sum = _mm256_add_ps(_mm256_add_ps(a[0], a[1]), _mm256_add_ps(a[2], a[3]));
        if (g & 1)
            y1 = _mm256_fmadd_ps(sum, _mm256_broadcast_ss(sc + g), y1);
        else
            y0 = _mm256_fmadd_ps(sum, _mm256_broadcast_ss(sc + g), y0);
    }
    return k3_hsum256(_mm256_add_ps(y0, y1));
}

K3_AVX2_INLINE float bias_dot(const float *b, const float *xsum, int64_t ng) {
    __m256 a = _mm256_setzero_ps();
    int64_t g = 0;
    for (; g + 8 <= ng; g += 8)
        a = _mm256_fmadd_ps(_mm256_loadu_ps(b + g), _mm256_loadu_ps(xsum + g), a);
    float s = k3_hsum256(a);
    for (; g < ng; g++) s += b[g] * xsum[g];
    return s;
}

/* One row with bits and G constant after inlining; sb: 2*ng floats of scratch. */
K3_AVX2_INLINE float affine_row(const k3_wmat *W, int64_t r, const float *xp, const float *xsum,
                                float *sb, int bits, int G) {
    const int64_t K = W->cols, ng = K / G;
    to_f32(W->scale_fmt, W->scales + (size_t)r * W->scale_stride, ng, sb);
    to_f32(W->scale_fmt, W->biases + (size_t)r * W->bias_stride, ng, sb + ng);
    return row_codes_dot(W->data + (size_t)r * W->row_stride, xp, sb, K, bits, G) +
           bias_dot(sb + ng, xsum, ng);
}

/* Row-range workers with bits and G as constants; k3_parallel_rows splits the rows. */
#define AFFINE_ROWS_G(B, G)                                                                        \
    K3_AVX2 static void affine_rows_##B##_##G(const k3_rows_ctx *c, int64_t r0, int64_t r1) {      \
        const int64_t ng = c->W->cols / G;                                                         \
        float *sb = k3_scratch(K3_SCRATCH_ROWSC, sizeof(float) * (size_t)(2 * ng + 16));           \
        for (int64_t r = r0; r < r1; r++) c->y[r] = affine_row(c->W, r, c->xp, c->xsum, sb, B, G); \
    }
#define AFFINE_ROWS(B)                                                                             \
    AFFINE_ROWS_G(B, 32)                                                                           \
    AFFINE_ROWS_G(B, 64)                                                                           \
    AFFINE_ROWS_G(B, 128)                                                                          \
    static k3_rows_fn affine_rows_##B(int group) {                                                 \
        if (group == 32) return affine_rows_##B##_32;                                              \
        return group == 64 ? affine_rows_##B##_64 : affine_rows_##B##_128;                         \
    }
AFFINE_ROWS(2)
AFFINE_ROWS(3)
AFFINE_ROWS(4)
AFFINE_ROWS(6)
AFFINE_ROWS(8)

int k3_avx2_digit_planes(int bits, int64_t cols) {
    if (bits == 3) return cols % 64 == 0; /* 3-bit blocks are 64 columns */
    return bits == 2 || bits == 4 || bits == 6 || bits == 8;
}

void k3_matvec_affine_planes_avx2(const k3_wmat *W, const float *x, float *y) {
    const int64_t K = W->cols;
    int ready;
    float *xp = k3_prep_buf(K3_PREP_AVX2_PLANES, x, k3_prep_shape(K, W->bits, W->group, 0),
                            sizeof(float) * (size_t)(K + 64 + K / W->group + 1), &ready);
    float *xsum = xp + K + 64;
    if (!ready) {
        k3_avx2_group_sums(x, K, W->group, xsum);
        permute_x(x, K, W->bits, xp);
    }
    k3_rows_fn fn = W->bits == 2   ? affine_rows_2(W->group)
                    : W->bits == 3 ? affine_rows_3(W->group)
                    : W->bits == 4 ? affine_rows_4(W->group)
                    : W->bits == 6 ? affine_rows_6(W->group)
                                   : affine_rows_8(W->group);
    k3_rows_ctx c = {W, x, xp, xsum, y};
    k3_parallel_rows(&c, fn);
}
