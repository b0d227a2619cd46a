/* matvec_avx2.c — AVX2+FMA matrix-vector products (decode: one token), every format.
 *
 * Decode is memory-bound, so each weight is decoded in registers and used at
 * once; nothing is written back. Affine rows accumulate sum(q*x) per group and
 * apply the scale once per group, with the bias term b*sum(x over the group)
 * from per-group sums of x computed once per call. Rows are split over
 * OpenMP threads by k3_parallel_rows (rows.c); each row's result does not
 * depend on the split. */
#include "kernels/avx2.h"
#include "kernels/runtime.h"
#include "kernels/avx2_decode.h"
#include "kernels/scratch.h"
#include "quant/dtype.h"

#include <omp.h>

int k3_avx2_supports(const k3_wmat *W) {
    switch (W->fmt) {
    case K3_W_F32:
    case K3_W_F16:
    case K3_W_BF16:
        return 1;
    case K3_W_MXFP4:
        return W->group == 32 && W->cols % 32 == 0;
    case K3_W_AFFINE:
        if (W->group != 32 && W->group != 64 && W->group != 128) return 0;
        if (W->bits < 2 || W->bits > 8 || W->bits == 7) return 0;
        if (W->scale_fmt != K3_W_BF16 && W->scale_fmt != K3_W_F16 && W->scale_fmt != K3_W_F32)
            return 0;
        return W->cols % W->group == 0;
    }
    return 0;
}

/* Dot product of one f32/f16/bf16 row with x; FMT is a constant after inlining. */
K3_AVX2_INLINE float dot_float_row(k3_wfmt fmt, const uint8_t *row, const float *x, int64_t K) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t c = 0;
#define DEC(cc)                                                                                    \
    (fmt == K3_W_F32   ? k3_dec8_f32(row, cc)                                                      \
     : fmt == K3_W_F16 ? k3_dec8_f16(row, cc)                                                      \
                       : k3_dec8_bf16(row, cc))
    const int esz = fmt == K3_W_F32 ? 4 : 2;
    for (; c + 32 <= K; c += 32) {
        /* software prefetch K3_PF_STREAM_BYTES ahead (avx2.h) */
        _mm_prefetch((const char *)row + c * esz + K3_PF_STREAM_BYTES, _MM_HINT_T0);
        if (esz == 4)
            _mm_prefetch((const char *)row + c * esz + K3_PF_STREAM_BYTES + 64, _MM_HINT_T0);
        a0 = _mm256_fmadd_ps(DEC(c), _mm256_loadu_ps(x + c), a0);
        a1 = _mm256_fmadd_ps(DEC(c + 8), _mm256_loadu_ps(x + c + 8), a1);
        a2 = _mm256_fmadd_ps(DEC(c + 16), _mm256_loadu_ps(x + c + 16), a2);
        a3 = _mm256_fmadd_ps(DEC(c + 24), _mm256_loadu_ps(x + c + 24), a3);
    }
    for (; c + 8 <= K; c += 8) a0 = _mm256_fmadd_ps(DEC(c), _mm256_loadu_ps(x + c), a0);
#undef DEC
    float s = k3_hsum256(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; c < K; c++) s += k3_wmat_elt(fmt, row, c) * x[c];
    return s;
}

/* dot_float_row of two rows at once, *s0 and *s1 bit for bit what it gives
 * each: every row keeps its own accumulators and instruction order, and the
 * two share each load of x. Past K of about 8192 x (4 bytes a column) leaves
 * L1, and one row at a time read 2 bytes of it from L2 per weight byte
 * (bf16 at K=12288: 20-25 GB/s on one core against 34-40 at K=7168).
 * Prefetches past a row's end (pf_end bytes from its start) move pf_jump
 * bytes on, to the rows read next (see AFFINE_ROWS_VEC in
 * matvec_affine_avx512.c); straight on, row 0's fell into row 1. */
K3_AVX2_INLINE void dot_float_rows2(k3_wfmt fmt, const uint8_t *r0, const uint8_t *r1,
                                    const float *x, int64_t K, int64_t pf_end, int64_t pf_jump,
                                    float *s0, float *s1) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    int64_t c = 0;
#define DEC(row, cc)                                                                               \
    (fmt == K3_W_F32   ? k3_dec8_f32(row, cc)                                                      \
     : fmt == K3_W_F16 ? k3_dec8_f16(row, cc)                                                      \
                       : k3_dec8_bf16(row, cc))
    const int esz = fmt == K3_W_F32 ? 4 : 2;
    for (; c + 32 <= K; c += 32) {
        int64_t pf = c * esz + K3_PF_STREAM_BYTES;
        if (pf >= pf_end) pf += pf_jump;
        _mm_prefetch((const char *)r0 + pf, _MM_HINT_T0);
        _mm_prefetch((const char *)r1 + pf, _MM_HINT_T0);
        if (esz == 4) {
            _mm_prefetch((const char *)r0 + pf + 64, _MM_HINT_T0);
            _mm_prefetch((const char *)r1 + pf + 64, _MM_HINT_T0);
        }
        const __m256 x0 = _mm256_loadu_ps(x + c), x1 = _mm256_loadu_ps(x + c + 8),
                     x2 = _mm256_loadu_ps(x + c + 16), x3 = _mm256_loadu_ps(x + c + 24);
        a0 = _mm256_fmadd_ps(DEC(r0, c), x0, a0);
        b0 = _mm256_fmadd_ps(DEC(r1, c), x0, b0);
        a1 = _mm256_fmadd_ps(DEC(r0, c + 8), x1, a1);
        b1 = _mm256_fmadd_ps(DEC(r1, c + 8), x1, b1);
        a2 = _mm256_fmadd_ps(DEC(r0, c + 16), x2, a2);
        b2 = _mm256_fmadd_ps(DEC(r1, c + 16), x2, b2);
        a3 = _mm256_fmadd_ps(DEC(r0, c + 24), x3, a3);
        b3 = _mm256_fmadd_ps(DEC(r1, c + 24), x3, b3);
    }
    for (; c + 8 <= K; c += 8) {
        const __m256 xc = _mm256_loadu_ps(x + c);
        a0 = _mm256_fmadd_ps(DEC(r0, c), xc, a0);
        b0 = _mm256_fmadd_ps(DEC(r1, c), xc, b0);
    }
#undef DEC
    float t0 = k3_hsum256(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    float t1 = k3_hsum256(_mm256_add_ps(_mm256_add_ps(b0, b1), _mm256_add_ps(b2, b3)));
    for (int64_t j = c; j < K; j++) t0 += k3_wmat_elt(fmt, r0, j) * x[j];
    for (int64_t j = c; j < K; j++) t1 += k3_wmat_elt(fmt, r1, j) * x[j];
    *s0 = t0;
    *s1 = t1;
}

/* dot_float_rows2 for W's format (each branch a constant-format copy). */
K3_AVX2_INLINE void dot_float_rows2_of(const k3_wmat *W, const uint8_t *r0, const float *x,
                                       int64_t K, int64_t pf_end, int64_t pf_jump, float *s0,
                                       float *s1) {
    const uint8_t *r1 = r0 + W->row_stride;
    if (W->fmt == K3_W_F32)
        dot_float_rows2(K3_W_F32, r0, r1, x, K, pf_end, pf_jump, s0, s1);
    else if (W->fmt == K3_W_F16)
        dot_float_rows2(K3_W_F16, r0, r1, x, K, pf_end, pf_jump, s0, s1);
    else
        dot_float_rows2(K3_W_BF16, r0, r1, x, K, pf_end, pf_jump, s0, s1);
}

/* Rows from K3_FLOAT_PAIR_COLS columns on (x of 32 KiB and more, past what
 * streaming leaves of L1) go in pairs; narrower ones one at a time, which
 * measured as fast there and kept 2-thread decode where it was. */
#define K3_FLOAT_PAIR_COLS 8192

K3_AVX2 static void float_rows(const k3_rows_ctx *c, int64_t r0, int64_t r1) {
    const k3_wmat *W = c->W;
    const int64_t K = W->cols, st = (int64_t)W->row_stride;
    const int64_t rb = K * (W->fmt == K3_W_F32 ? 4 : 2);
    int64_t r = r0;
    for (; K >= K3_FLOAT_PAIR_COLS && r + 2 <= r1; r += 2) /* prefetching into the next pair */
        dot_float_rows2_of(W, W->data + (size_t)r * W->row_stride, c->x, K, rb,
                           r + 4 <= W->rows ? 2 * st - rb : 0, &c->y[r], &c->y[r + 1]);
    for (; r < r1; r++) {
        const uint8_t *row = W->data + (size_t)r * W->row_stride;
        if (W->fmt == K3_W_F32)
            c->y[r] = dot_float_row(K3_W_F32, row, c->x, K);
        else if (W->fmt == K3_W_F16)
            c->y[r] = dot_float_row(K3_W_F16, row, c->x, K);
        else
            c->y[r] = dot_float_row(K3_W_BF16, row, c->x, K);
    }
}

K3_AVX2 void k3_matvec_avx2_float_colblocks(const k3_wmat *W, int nb, const float *const *xb,
                                            float *const *y) {
    const int64_t bc = W->cols / nb, st = (int64_t)W->row_stride;
    const size_t esz = W->fmt == K3_W_F32 ? 4 : 2;
    const int64_t L = W->cols * (int64_t)esz, bB = bc * (int64_t)esz;
    int64_t r = 0;
    for (; W->cols >= K3_FLOAT_PAIR_COLS && r + 2 <= W->rows; r += 2) { /* pairs share x */
        const uint8_t *row = W->data + (size_t)r * W->row_stride;
        const int64_t jump = r + 4 <= W->rows ? 2 * st - L : 0; /* after the last block */
        for (int b = 0; b < nb; b++)
            dot_float_rows2_of(W, row + b * bB, xb[b], bc, L - b * bB, jump, &y[b][r],
                               &y[b][r + 1]);
    }
    for (; r < W->rows; r++) {
        const uint8_t *row = W->data + (size_t)r * W->row_stride;
        for (int b = 0; b < nb; b++) {
            const uint8_t *seg = row + (size_t)(b * bc) * esz;
            if (W->fmt == K3_W_F32)
                y[b][r] = dot_float_row(K3_W_F32, seg, xb[b], bc);
            else if (W->fmt == K3_W_F16)
                y[b][r] = dot_float_row(K3_W_F16, seg, xb[b], bc);
            else
                y[b][r] = dot_float_row(K3_W_BF16, seg, xb[b], bc);
        }
    }
}

static void matvec_float(const k3_wmat *W, const float *x, float *y) {
    k3_rows_ctx c = {W, x, NULL, NULL, y};
    k3_parallel_rows(&c, float_rows);
}

/* One affine row: sum_g s_g * sum_{c in g} q_c x_c + b_g * xsum_g. */
K3_AVX2_INLINE float dot_affine_row(const k3_wmat *W, int64_t r, const float *x, const float *xsum,
                                    int bits, int G) {
    const uint8_t *row = W->data + (size_t)r * W->row_stride;
    const uint8_t *sc = W->scales + (size_t)r * W->scale_stride;
    const uint8_t *bi = W->biases + (size_t)r * W->bias_stride;
    const int64_t ng = W->cols / G;
    __m256 yv = _mm256_setzero_ps();
    float bsum = 0.0f;
    for (int64_t g = 0; g < ng; g++) {
        const int64_t c0 = g * G;
        __m256 q0 = _mm256_setzero_ps(), q1 = q0;
        for (int j = 0; j < G; j += 16) {
            q0 = _mm256_fmadd_ps(k3_dec8_codes(row, c0 + j, bits), _mm256_loadu_ps(x + c0 + j), q0);
            q1 = _mm256_fmadd_ps(k3_dec8_codes(row, c0 + j + 8, bits),
                                 _mm256_loadu_ps(x + c0 + j + 8), q1);
        }
        yv = _mm256_fmadd_ps(_mm256_add_ps(q0, q1),
                             _mm256_set1_ps(k3_wmat_elt(W->scale_fmt, sc, g)), yv);
        bsum += k3_wmat_elt(W->scale_fmt, bi, g) * xsum[g];
    }
    return k3_hsum256(yv) + bsum;
}

/* The affine row-range workers with `bits` and `group` as constants. */
#define AFFINE_MATVEC(B, G)                                                                        \
    K3_AVX2 static void matvec_affine_##B##_##G(const k3_rows_ctx *c, int64_t r0, int64_t r1) {    \
        for (int64_t r = r0; r < r1; r++) c->y[r] = dot_affine_row(c->W, r, c->x, c->xsum, B, G);  \
    }
#define AFFINE_BITS(B) AFFINE_MATVEC(B, 32) AFFINE_MATVEC(B, 64) AFFINE_MATVEC(B, 128)
AFFINE_BITS(2)
AFFINE_BITS(3)
AFFINE_BITS(4)
AFFINE_BITS(5)
AFFINE_BITS(6)
AFFINE_BITS(8)

static k3_rows_fn affine_kernel(int bits, int group) {
#define PICK(B)                                                                                    \
    case B:                                                                                        \
        return group == 32   ? matvec_affine_##B##_32                                              \
               : group == 64 ? matvec_affine_##B##_64                                              \
                             : matvec_affine_##B##_128;
    switch (bits) {
        PICK(2)
        PICK(3)
        PICK(4)
        PICK(5)
        PICK(6)
        PICK(8)
    }
#undef PICK
    return NULL;
}

static void matvec_affine(const k3_wmat *W, const float *x, float *y) {
    if (k3_avx2_digit_planes(W->bits, W->cols)) {
        k3_matvec_affine_planes_avx2(W, x, y);
        return;
    }
    int ready;
    float *xsum = k3_prep_buf(K3_PREP_AVX2_XSUM, x, k3_prep_shape(W->cols, W->group, 0, 0),
                              sizeof(float) * (size_t)(W->cols / W->group + 1), &ready);
    if (!ready) k3_avx2_group_sums(x, W->cols, W->group, xsum);
    k3_rows_ctx c = {W, x, NULL, xsum, y};
    k3_parallel_rows(&c, affine_kernel(W->bits, W->group));
}

/* MXFP4 matvec: per group of 32, the low nibbles (even columns) and high
 * nibbles (odd columns) go through the doubled E2M1 table with pshufb and are
 * widened without re-interleaving; x is permuted once per call to match:
 * xp[32g + 0..7] = x[32g + 0,2..14], [8..15] = even 16..30, [16..23] = odd
 * 1..15, [24..31] = odd 17..31. */
static void permute_x_mxfp4(const float *x, int64_t K, float *xp) {
    for (int64_t g = 0; g < K; g += 32)
        for (int i = 0; i < 8; i++) {
            xp[g + i] = x[g + 2 * i];
            xp[g + 8 + i] = x[g + 16 + 2 * i];
            xp[g + 16 + i] = x[g + 2 * i + 1];
            xp[g + 24 + i] = x[g + 17 + 2 * i];
        }
}

K3_AVX2_INLINE float dot_mxfp4_row(const k3_wmat *W, int64_t r, const float *xp) {
    const __m128i lut = _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
    const __m128i m = _mm_set1_epi8(15);
    const uint8_t *row = W->data + (size_t)r * W->row_stride;
    const uint8_t *sc = W->scales + (size_t)r * W->scale_stride;
    __m256 y0 = _mm256_setzero_ps(), y1 = y0;
    for (int64_t g = 0; g < W->cols / 32; g++) {
        const float *xg = xp + g * 32;
        if (!(g & 3)) _mm_prefetch((const char *)row + g * 16 + K3_PF_STREAM_BYTES, _MM_HINT_T0);
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(row + g * 16));
        __m128i lo = _mm_shuffle_epi8(lut, _mm_and_si128(b, m));
        __m128i hi = _mm_shuffle_epi8(lut, _mm_and_si128(_mm_srli_epi16(b, 4), m));
        __m256 w0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo));
        __m256 w1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(lo, lo)));
        __m256 w2 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi));
        __m256 w3 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(hi, hi)));
        __m256 a = _mm256_mul_ps(w0, _mm256_loadu_ps(xg));
        __m256 c = _mm256_mul_ps(w1, _mm256_loadu_ps(xg + 8));
        a = _mm256_fmadd_ps(w2, _mm256_loadu_ps(xg + 16), a);
        c = _mm256_fmadd_ps(w3, _mm256_loadu_ps(xg + 24), c);
        __m256 s = _mm256_set1_ps(k3_mxfp4_half_scale(sc[g]));
        if (g & 1)
            y1 = _mm256_fmadd_ps(_mm256_add_ps(a, c), s, y1);
        else
            y0 = _mm256_fmadd_ps(_mm256_add_ps(a, c), s, y0);
    }
    return k3_hsum256(_mm256_add_ps(y0, y1));
}

K3_AVX2 static void mxfp4_rows(const k3_rows_ctx *c, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) c->y[r] = dot_mxfp4_row(c->W, r, c->xp);
}

static void matvec_mxfp4(const k3_wmat *W, const float *x, float *y) {
    int ready;
    float *xp = k3_prep_buf(K3_PREP_AVX2_MXFP4, x, k3_prep_shape(W->cols, 0, 0, 0),
                            sizeof(float) * (size_t)(W->cols + 32), &ready);
    if (!ready) permute_x_mxfp4(x, W->cols, xp);
    k3_rows_ctx c = {W, x, xp, NULL, y};
    k3_parallel_rows(&c, mxfp4_rows);
}

void k3_matvec_avx2(const k3_wmat *W, const float *x, float *y) {
    switch (W->fmt) {
    case K3_W_F32:
    case K3_W_F16:
    case K3_W_BF16:
        matvec_float(W, x, y);
        break;
    case K3_W_MXFP4:
        matvec_mxfp4(W, x, y);
        break;
    case K3_W_AFFINE:
        matvec_affine(W, x, y);
        break;
    }
}
