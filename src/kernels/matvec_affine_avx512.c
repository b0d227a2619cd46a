/* matvec_affine_avx512.c — AVX-512 matrix-vector products for MLX affine
 * 2/3/4/5/6-bit weights with exact f32 activations (8-bit: matvec_avx512.c).
 *
 * Decode of these widths is bound by vector instructions, not memory, so the
 * kernel spends as few as it can per code. A block of a row is spread over
 * the 16 dword lanes of a zmm register so that lane l holds the D codes of
 * columns [l*D, l*D + D) of the block, in place:
 *
 *   bits  D  block cols  block bytes  lane l holds
 *     2  16     256          64       dword l (no move)
 *     4   8     128          64       dword l (no move)
 *     3   8     128          48       bytes 3l..3l+2 (vpermb, AVX-512 VBMI)
 *     6   4      64          48       bytes 3l..3l+2 (vpermb)
 *     5   4      64          40       l even: bytes 5j..5j+2, l odd: 5j+2..5j+4
 *                                     (j = l/2; the odd lane's codes start at bit 4)
 *
 * Digit d of every lane is isolated with one AND, which leaves
 * code * 2^(o_l + d*bits) (o_l: the lane's start bit, 4 or 0), converted
 * exactly by vcvtudq2ps (at most `bits` significant bits; the top digit of a
 * 2/4-bit dword sets bit 31, hence the unsigned form), and multiplied by x
 * permuted and scaled once per call to match:
 *
 *   xp[block + 16d + l] = x[block + l*D + d] * 2^(h - o_l - d*bits)
 *
 * h is half the largest shift, so the factors stay within 2^-15..2^15 (an
 * activation would have to be below 2^-111 or above 2^112 to lose bits); the
 * row's sum is multiplied by 2^-h at the end. Per block: D x (AND, convert,
 * FMA) in two chains (2 bits: a 16-entry vpermps table decodes two codes per
 * shift instead, x unscaled; see block_dot_2), then one FMA with the per-lane group scales (a
 * broadcast when the block lies inside one group, else vpermps of the row's
 * f32 scales). The bias term sum_g b_g * xsum_g is a separate dot per row.
 * Columns past the last full block: masked loads (never reading past the
 * row), zero activations and zero scales in the padding lanes. Every row is
 * computed by the same instructions whatever the thread split. */
#include "kernels/avx2.h"
#include "kernels/avx512.h"
#include "kernels/runtime.h"
#include "kernels/scratch.h"
#include "quant/dtype.h"

#include <immintrin.h>
#include <math.h>

/* 2/4 bits need F+BW+VL only; 3/5/6 bits add VBMI (vpermb), in their own functions so that
 * no VBMI instruction can reach the 2/4-bit code run on CPUs without it. */
#define K3_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define K3_AVX512_INLINE                                                                           \
    static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx2,fma,"       \
                                                       "f16c")))
#define K3_AVX512V __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx2,fma,f16c")))
#define K3_AVX512V_INLINE                                                                          \
    static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx512vbmi,"     \
                                                       "avx2,fma,f16c")))

#include "kernels/hsum16_avx512.h"

#ifndef K3_PF_BYTES
#define K3_PF_BYTES 2048
#endif

/* Codes per lane, block columns and bytes, and h (see the top of the file). */
static inline int lane_codes(int bits) {
    return bits == 2 ? 16 : bits == 3 || bits == 4 ? 8 : 4;
}
static inline int block_cols(int bits) {
    return 16 * lane_codes(bits);
}
static inline int block_bytes(int bits) {
    return block_cols(bits) * bits / 8;
}
static inline int half_shift(int bits) {
    if (bits == 2) return 0; /* decoded by table, unscaled (block_dot_2) */
    int top = bits == 5 ? 4 + 3 * 5 : (lane_codes(bits) - 1) * bits; /* largest o_l + d*bits */
    return top / 2;
}
/* Start bit of lane l's first code inside its dword. */
static inline int lane_offset(int bits, int l) {
    return bits == 5 && (l & 1) ? 4 : 0;
}

int k3_avx512_affine_supports(const k3_wmat *W) {
    if (W->fmt != K3_W_AFFINE || !k3_avx2_supports(W)) return 0;
    if (W->bits == 2 || W->bits == 4) return 1;
    return (W->bits == 3 || W->bits == 5 || W->bits == 6) && k3_cpu_has_avx512_vbmi();
}

/* xp (see the top of the file), zero past column K; nblk*block_cols floats. */
static void permute_x(const float *x, int64_t K, int bits, float *xp) {
    const int D = lane_codes(bits), BC = block_cols(bits), h = half_shift(bits);
    const int64_t nblk = (K + BC - 1) / BC;
    float f[2][16];
    for (int o = 0; o < 2; o++)
        for (int d = 0; d < D; d++) f[o][d] = bits == 2 ? 1.0f : ldexpf(1.0f, h - 4 * o - d * bits);
    for (int64_t b = 0; b < nblk; b++)
        for (int d = 0; d < D; d++)
            for (int l = 0; l < 16; l++) {
                int64_t c = b * BC + (int64_t)l * D + d;
                xp[b * BC + 16 * d + l] = c < K ? x[c] * f[lane_offset(bits, l) / 4][d] : 0.0f;
            }
}

/* n scales/biases of type fmt -> f32 out[0..n), then 16 zeros. */
K3_AVX512_INLINE void to_f32_padded(k3_wfmt fmt, const uint8_t *p, int64_t n, float *out) {
    int64_t i = 0;
    if (fmt == K3_W_F32) {
        memcpy(out, p, sizeof(float) * (size_t)n);
        i = n;
    }
    for (; i < n; i += 16) { /* the last 16 masked (zeros past n): no scalar loop */
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m256i h = _mm256_maskz_loadu_epi16(m, p + 2 * i);
        __m512 v = fmt == K3_W_F16
                       ? _mm512_cvtph_ps(h)
                       : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
        _mm512_storeu_ps(out + i, v);
    }
    _mm512_storeu_ps(out + n, _mm512_setzero_ps());
}

/* Rows r .. r+n-1's scales and biases in f32, zero-padded: row i's scales
 * at sb + i * 2*(ng+16), its biases ng+16 floats after them. */
K3_AVX512_INLINE void rows_scales_f32(const k3_wmat *W, int64_t r, int n, int64_t ng, float *sb) {
    for (int i = 0; i < n; i++) {
        float *sc = sb + i * 2 * (ng + 16), *bi = sc + ng + 16;
        to_f32_padded(W->scale_fmt, W->scales + (size_t)(r + i) * W->scale_stride, ng, sc);
        to_f32_padded(W->scale_fmt, W->biases + (size_t)(r + i) * W->bias_stride, ng, bi);
    }
}

/* Prefetch the scales and biases of rows r .. r+n-1 (those that exist): the
 * rows a caller converts next, two more streams beside the weights that no
 * weight prefetch covers (their loads took 5% of exact q4 decode samples on
 * the v32k slice). */
K3_AVX512_INLINE void prefetch_rows_scales(const k3_wmat *W, int64_t r, int n, int64_t ng) {
    const int64_t bytes = ng * (W->scale_fmt == K3_W_F32 ? 4 : 2);
    for (int i = 0; i < n && r + i < W->rows; i++) {
        const char *s = (const char *)W->scales + (size_t)(r + i) * W->scale_stride;
        const char *b = (const char *)W->biases + (size_t)(r + i) * W->bias_stride;
        for (int64_t o = 0; o < bytes; o += 64) {
            _mm_prefetch(s + o, _MM_HINT_T0);
            _mm_prefetch(b + o, _MM_HINT_T0);
        }
    }
}

/* Mask of digit d in every lane (per-lane for 5 bits: odd lanes start at bit 4). */
K3_AVX512_INLINE __m512i digit_mask(int bits, int d) {
    const unsigned m = ((1u << bits) - 1u) << (d * bits);
    if (bits != 5) return _mm512_set1_epi32((int)m);
    return _mm512_mask_blend_epi32(0xaaaa, _mm512_set1_epi32((int)m),
                                   _mm512_set1_epi32((int)(m << 4)));
}

/* Where each lane's bytes come from in a 3/5/6-bit block (vpermb indices;
 * byte 3 of every dword is zeroed by the mask). */
static const uint8_t perm36[64] __attribute__((aligned(64))) = {
    0,  1,  2,  0,  3,  4,  5,  0,  6,  7,  8,  0,  9,  10, 11, 0,  12, 13, 14, 0,  15, 16,
    17, 0,  18, 19, 20, 0,  21, 22, 23, 0,  24, 25, 26, 0,  27, 28, 29, 0,  30, 31, 32, 0,
    33, 34, 35, 0,  36, 37, 38, 0,  39, 40, 41, 0,  42, 43, 44, 0,  45, 46, 47, 0};
static const uint8_t perm5[64] __attribute__((aligned(64))) = {
    0,  1,  2,  0,  2,  3,  4,  0,  5,  6,  7,  0,  7,  8,  9,  0,  10, 11, 12, 0,  12, 13,
    14, 0,  15, 16, 17, 0,  17, 18, 19, 0,  20, 21, 22, 0,  22, 23, 24, 0,  25, 26, 27, 0,
    27, 28, 29, 0,  30, 31, 32, 0,  32, 33, 34, 0,  35, 36, 37, 0,  37, 38, 39, 0};

/* A 3/5/6-bit block's bytes moved into their lanes (byte 3 of each dword zero). */
K3_AVX512V_INLINE __m512i spread(__m512i v, int bits) {
    return _mm512_maskz_permutexvar_epi8(0x7777777777777777ull,
                                         _mm512_load_si512(bits == 5 ? perm5 : perm36), v);
}

/* A 2-bit block: vpermps reads only the low 4 bits of each index lane, i.e.
 * two codes, so a table lookup decodes code 2k (table j & 3) or 2k+1
 * (table j >> 2) of v >> 4k without a mask or a conversion: per two codes one
 * shift, two vpermps and two FMAs (5 uops, against 6 for AND + convert + FMA),
 * and the x factors are 1. */
K3_AVX512_INLINE __m512 block_dot_2(__m512i v, const float *xb) {
    const __m512 lo = _mm512_setr_ps(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3);
    const __m512 hi = _mm512_setr_ps(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    __m512 t0 = _mm512_mul_ps(_mm512_permutexvar_ps(v, lo), _mm512_loadu_ps(xb));
    __m512 t1 = _mm512_mul_ps(_mm512_permutexvar_ps(v, hi), _mm512_loadu_ps(xb + 16));
#pragma GCC unroll 8
    for (int k = 1; k < 8; k++) {
        __m512i u = _mm512_srli_epi32(v, 4 * k);
        t0 = _mm512_fmadd_ps(_mm512_permutexvar_ps(u, lo), _mm512_loadu_ps(xb + 32 * k), t0);
        t1 = _mm512_fmadd_ps(_mm512_permutexvar_ps(u, hi), _mm512_loadu_ps(xb + 32 * k + 16), t1);
    }
    return _mm512_add_ps(t0, t1);
}

/* One block (lanes in place): sum over its D digits of convert(v & mask_d) * xp_d, per lane. */
K3_AVX512_INLINE __m512 block_dot(__m512i v, const float *xb, int bits) {
    const int D = lane_codes(bits);
    if (bits == 2) return block_dot_2(v, xb);
    /* digit 0 of 3/4 bits: a vpermps table on the low 4 bits (j & 7, or j), no AND or convert */
    const __m512 tab = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, bits == 3 ? 0 : 8, bits == 3 ? 1 : 9,
                                      bits == 3 ? 2 : 10, bits == 3 ? 3 : 11, bits == 3 ? 4 : 12,
                                      bits == 3 ? 5 : 13, bits == 3 ? 6 : 14, bits == 3 ? 7 : 15);
    __m512 f0 = bits == 3 || bits == 4
                    ? _mm512_permutexvar_ps(v, tab)
                    : _mm512_cvtepu32_ps(_mm512_and_si512(v, digit_mask(bits, 0)));
    __m512 t0 = _mm512_mul_ps(f0, _mm512_loadu_ps(xb));
    __m512 t1 = _mm512_mul_ps(_mm512_cvtepu32_ps(_mm512_and_si512(v, digit_mask(bits, 1))),
                              _mm512_loadu_ps(xb + 16));
#pragma GCC unroll 16
    for (int d = 2; d < D; d++) {
        __m512 f = _mm512_cvtepu32_ps(_mm512_and_si512(v, digit_mask(bits, d)));
        if (d & 1)
            t1 = _mm512_fmadd_ps(f, _mm512_loadu_ps(xb + 16 * d), t1);
        else
            t0 = _mm512_fmadd_ps(f, _mm512_loadu_ps(xb + 16 * d), t0);
    }
    return _mm512_add_ps(t0, t1);
}

/* The per-lane group scales of the block starting at column c0. */
K3_AVX512_INLINE __m512 block_scales(const float *sc, int64_t c0, int bits, int G) {
    const int D = lane_codes(bits), BC = block_cols(bits);
    if (BC <= G) return _mm512_set1_ps(sc[c0 / G]);
    const int sh = G == 32 ? 5 : G == 64 ? 6 : 7;
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i idx = _mm512_srli_epi32(_mm512_mullo_epi32(lane, _mm512_set1_epi32(D)), sh);
    return _mm512_permutexvar_ps(idx, _mm512_loadu_ps(sc + c0 / G));
}

K3_AVX512_INLINE float bias_dot(const float *b, const float *xsum, int64_t ng) {
    __m512 a = _mm512_setzero_ps();
    int64_t g = 0;
    for (; g + 16 <= ng; g += 16)
        a = _mm512_fmadd_ps(_mm512_loadu_ps(b + g), _mm512_loadu_ps(xsum + g), a);
    float s = g ? _mm512_reduce_add_ps(a) : 0.0f; /* the same +0 when the loop did not run */
    for (; g < ng; g++) s += b[g] * xsum[g];
    return s;
}

/* The block sums before the horizontal add of nr rows (1..ROWS_MAX, a
 * constant after inlining) of K columns starting at `row`, `stride` bytes
 * apart: out[i] = y0 + y1 of row i, whose f32 scales (zero-padded past its
 * groups) are at sc + i * sc_ld; bits and G are constants too. The rows go
 * through each block together so that they share its loads of xp: a
 * 7168-column xp is 28 KiB, which streaming weights push out of L1, and one
 * row at a time then reads 8 bytes of xp from L2 per byte of 4-bit weights.
 * Every row gets the instructions it would get alone, in the same order, so
 * its sum does not depend on nr. Defined twice: with VBMI for 3/5/6 bits
 * (SPREAD = vpermb), without for 2/4.
 *
 * Each row prefetches K3_PF_BYTES ahead in the order the bytes are used: a
 * prefetch that falls pf_end bytes or more past `row` (the end of the row)
 * moves pf_jump bytes on, to where the caller goes next (the next group's
 * row i: nr * stride - row bytes; 0 when there is none). Straight on, it
 * fetched row i+1, which this group is already reading, and nothing fetched
 * the first K3_PF_BYTES of the next group's rows 2..nr ahead of their use. */
#define ROWS_MAX 8
#define AFFINE_ROWS_VEC(NAME, ATTR, SPREAD)                                                        \
    ATTR void NAME(const uint8_t *row, int64_t stride, int nr, int64_t K, const float *xp,         \
                   const float *sc, int64_t sc_ld, int bits, int G, int64_t pf_end,                \
                   int64_t pf_jump, __m512 *out) {                                                 \
        const int64_t rb = K * bits / 8;                                                           \
        const int BB = block_bytes(bits), BC = block_cols(bits);                                   \
        const int64_t nblk = (K + BC - 1) / BC;                                                    \
        /* blocks whose 64-byte load stays inside the row */                                       \
        int64_t nsafe = rb >= 64 ? (rb - 64) / BB + 1 : 0;                                         \
        if (nsafe > nblk) nsafe = nblk;                                                            \
        __m512 y0[ROWS_MAX], y1[ROWS_MAX];                                                         \
        _Pragma("GCC unroll 8") for (int i = 0; i < nr; i++) y0[i] = y1[i] = _mm512_setzero_ps();  \
        int64_t b = 0;                                                                             \
        for (; b + 1 < nsafe; b += 2) {                                                            \
            const int64_t pf =                                                                     \
                b * BB + K3_PF_BYTES + (b * BB + K3_PF_BYTES >= pf_end ? pf_jump : 0);             \
            _Pragma("GCC unroll 8") for (int i = 0; i < nr; i++) {                                 \
                const uint8_t *ri = row + i * stride;                                              \
                const float *si = sc + i * sc_ld;                                                  \
                _mm_prefetch((const char *)ri + pf, _MM_HINT_T0);                                  \
                _mm_prefetch((const char *)ri + pf + 64, _MM_HINT_T0);                             \
                __m512 t0 =                                                                        \
                    block_dot(SPREAD(_mm512_loadu_si512(ri + b * BB), bits), xp + b * BC, bits);   \
                __m512 t1 = block_dot(SPREAD(_mm512_loadu_si512(ri + (b + 1) * BB), bits),         \
                                      xp + (b + 1) * BC, bits);                                    \
                y0[i] = _mm512_fmadd_ps(t0, block_scales(si, b * BC, bits, G), y0[i]);             \
                y1[i] = _mm512_fmadd_ps(t1, block_scales(si, (b + 1) * BC, bits, G), y1[i]);       \
            }                                                                                      \
        }                                                                                          \
        for (; b < nblk; b++) {                                                                    \
            int64_t left = rb - b * BB, lanes = (K - b * BC) / lane_codes(bits);                   \
            __mmask64 m = left >= 64 ? ~0ull : (1ull << left) - 1;                                 \
            /* lanes past column K: zero scales, as the padding of a whole row's */                \
            __mmask16 sm = lanes >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << lanes) - 1);       \
            _Pragma("GCC unroll 8") for (int i = 0; i < nr; i++) {                                 \
                __m512 t =                                                                         \
                    block_dot(SPREAD(_mm512_maskz_loadu_epi8(m, row + i * stride + b * BB), bits), \
                              xp + b * BC, bits);                                                  \
                __m512 s = _mm512_maskz_mov_ps(sm, block_scales(sc + i * sc_ld, b * BC, bits, G)); \
                y0[i] = _mm512_fmadd_ps(t, s, y0[i]);                                              \
            }                                                                                      \
        }                                                                                          \
        _Pragma("GCC unroll 8") for (int i = 0; i < nr; i++) out[i] = _mm512_add_ps(y0[i], y1[i]); \
    }

/* A row's result from its horizontal sum: the scale 2^-h and the bias term. */
K3_AVX512_INLINE float row_result(float sum, const float *bi, const float *xsum, int64_t ng,
                                  int bits) {
    return sum * ldexpf(1.0f, -half_shift(bits)) + bias_dot(bi, xsum, ng);
}

/* row_result of n <= 16 rows at once, lane i for row i, when a row has
 * fewer than 16 groups (bias_dot is then its scalar loop alone): the same
 * products and sums in the same order, so the same bits. Row i's biases are
 * at bi + i * ld. The column-block product's blocks are that narrow on
 * small experts (K3's down, 3072 columns in 8 blocks: 6 groups of 64 a
 * block), where the scalar loop took about a fifth of the time. */
K3_AVX512_INLINE __m512 row_results16(__m512 sums, const float *bi, int64_t ld, int n,
                                      const float *xsum, int64_t ng, int bits) {
    const __mmask16 m = (__mmask16)((1u << n) - 1);
    const __m512i idx =
        _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                           _mm512_set1_epi32((int)ld));
    __m512 s = _mm512_setzero_ps();
    for (int64_t g = 0; g < ng; g++) {
        __m512 b = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, bi + g, 4);
        s = _mm512_add_ps(s, _mm512_mul_ps(b, _mm512_set1_ps(xsum[g])));
    }
    return _mm512_add_ps(_mm512_mul_ps(sums, _mm512_set1_ps(ldexpf(1.0f, -half_shift(bits)))), s);
}

/* Rows r .. r+nr-1 (nr a constant, at most ROWS_MAX) into y[r..]; sb:
 * ROWS_MAX * 2*(ng+16) floats for their f32 scales and biases. */
#define AFFINE_ROWS_N(NAME, VEC, ATTR)                                                             \
    ATTR void NAME(const k3_wmat *W, int64_t r, int nr, const float *xp, const float *xsum,        \
                   float *sb, float *y, int bits, int G) {                                         \
        const int64_t ng = W->cols / G, ld = 2 * (ng + 16);                                        \
        const int64_t rb = W->cols * bits / 8, st = (int64_t)W->row_stride;                        \
        rows_scales_f32(W, r, nr, ng, sb);                                                         \
        prefetch_rows_scales(W, r + nr, nr, ng);                                                   \
        __m512 v[ROWS_MAX];                                                                        \
        VEC(W->data + (size_t)r * W->row_stride, st, nr, W->cols, xp, sb, ld, bits, G, rb,         \
            r + 2 * nr <= W->rows ? nr * st - rb : 0, v);                                          \
        for (int i = 0; i < nr; i++)                                                               \
            y[r + i] =                                                                             \
                row_result(_mm512_reduce_add_ps(v[i]), sb + i * ld + ng + 16, xsum, ng, bits);     \
    }
#define NO_SPREAD(v, bits) (v)
AFFINE_ROWS_VEC(affine_rows_vec, K3_AVX512_INLINE, NO_SPREAD)
AFFINE_ROWS_VEC(affine_rows_vec_v, K3_AVX512V_INLINE, spread)
AFFINE_ROWS_N(affine_rows_n, affine_rows_vec, K3_AVX512_INLINE)
AFFINE_ROWS_N(affine_rows_n_v, affine_rows_vec_v, K3_AVX512V_INLINE)

/* Threads' row ranges, ROWS_MAX rows at a time (a row's result does not
 * depend on how many go together, so neither does the thread split's). */
#define AFFINE_ROWS_G(B, G)                                                                        \
    ROWS_ATTR_##B static void affine_rows_##B##_##G(const k3_rows_ctx *c, int64_t r0,              \
                                                    int64_t r1) {                                  \
        const int64_t ng = c->W->cols / G;                                                         \
        float *sb =                                                                                \
            k3_scratch(K3_SCRATCH_ROWSC, sizeof(float) * (size_t)(ROWS_MAX * 2 * (ng + 16)));      \
        int64_t r = r0;                                                                            \
        for (; r + ROWS_MAX <= r1; r += ROWS_MAX)                                                  \
            ROW_FN_##B(c->W, r, ROWS_MAX, c->xp, c->xsum, sb, c->y, B, G);                         \
        for (; r < r1; r++) ROW_FN_##B(c->W, r, 1, c->xp, c->xsum, sb, c->y, B, G);                \
    }
#define ROWS_ATTR_2 K3_AVX512
#define ROWS_ATTR_4 K3_AVX512
#define ROWS_ATTR_3 K3_AVX512V
#define ROWS_ATTR_5 K3_AVX512V
#define ROWS_ATTR_6 K3_AVX512V
#define ROW_FN_2 affine_rows_n
#define ROW_FN_4 affine_rows_n
#define ROW_FN_3 affine_rows_n_v
#define ROW_FN_5 affine_rows_n_v
#define ROW_FN_6 affine_rows_n_v
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
AFFINE_ROWS(5)
AFFINE_ROWS(6)

void k3_matvec_affine_avx512(const k3_wmat *W, const float *x, float *y) {
    const int64_t K = W->cols, BC = block_cols(W->bits), nxp = (K + BC - 1) / BC * BC;
    int ready;
    float *xp = k3_prep_buf(K3_PREP_AFFINE, x, k3_prep_shape(K, W->bits, W->group, 1),
                            sizeof(float) * (size_t)(nxp + K / W->group + 1), &ready);
    float *xsum = xp + nxp;
    if (!ready) {
        k3_avx2_group_sums(x, K, W->group, xsum);
        permute_x(x, K, W->bits, xp);
    }
    k3_rows_fn fn = W->bits == 2   ? affine_rows_2(W->group)
                    : W->bits == 3 ? affine_rows_3(W->group)
                    : W->bits == 4 ? affine_rows_4(W->group)
                    : W->bits == 5 ? affine_rows_5(W->group)
                                   : affine_rows_6(W->group);
    k3_rows_ctx c = {W, x, xp, xsum, y};
    k3_parallel_rows(&c, fn);
}

/* Rows per step of the column-block product (below). */
#define CB_ROWS 16
/* Most column blocks it takes. */
#define CB_MAX_BLOCKS 16
/* Floats of one block's permuted x: bc rounded up to whole 16-lane blocks. */
static inline int64_t cb_x_stride(int64_t bc, int bits) {
    return (bc + block_cols(bits) - 1) / block_cols(bits) * block_cols(bits);
}

/* The column-block product's results for rows r0 .. r0+n-1 from each block's
 * 16 row sums (acc[b][i]: row i's lanes): per block the 16 rows' horizontal adds
 * together (reduce_add16, the bits of _mm512_reduce_add_ps) and row_result with
 * the block's biases (row i's at sb + i * ld, past its ng scales) and group sums. */
K3_AVX512_INLINE void cb_results(__m512 (*acc)[CB_ROWS], int nb, int n, int64_t r0, const float *sb,
                                 int64_t ld, int64_t ng, int64_t ngb, const float *xsum,
                                 float *const *y, int bits) {
    for (int b = 0; b < nb; b++) {
        float out[CB_ROWS] __attribute__((aligned(64)));
        for (int i = n; i < CB_ROWS; i++) acc[b][i] = _mm512_setzero_ps();
        const __m512 sums = reduce_add16(acc[b]);
        const float *bi = sb + ng + 16 + b * ngb, *xs = xsum + b * (ngb + 1);
        if (ngb < 16) {
            _mm512_mask_storeu_ps(y[b] + r0, (__mmask16)((1u << n) - 1),
                                  row_results16(sums, bi, ld, n, xs, ngb, bits));
            continue;
        }
        _mm512_store_ps(out, sums);
        for (int i = 0; i < n; i++) y[b][r0 + i] = row_result(out[i], bi + i * ld, xs, ngb, bits);
    }
}

/* k3_matvec_colblocks_serial (matmul.h) on nb blocks of bc columns, 16 rows
 * at a time: each row's scales and biases converted once for all blocks, the
 * rows read front to back ROWS_MAX at a time, every block's sum vector the
 * one affine_rows_n computes on that block's column view (VEC on the block's
 * bytes, x and scales), then per block the 16 rows' horizontal adds together
 * (reduce_add16, the bits of _mm512_reduce_add_ps) and row_result with the
 * block's biases and group sums. Each block's x is permuted on its own,
 * zero-padded to whole 16-lane blocks (xs floats), and the lanes of a
 * partial last block take zero scales (AFFINE_ROWS_VEC's tail), so a block
 * that ends inside a 16-lane block (K3's 2-bit expert down: 384 columns a
 * block, 256 a 16-lane block) computes what its column view alone would,
 * never touching the next block's x or scales. */
#define AFFINE_CB(NAME, VEC, ATTR)                                                                 \
    ATTR void NAME(const k3_wmat *W, int nb, const float *xp, const float *xsum, float *sb,        \
                   float *const *y, int bits, int G) {                                             \
        const int64_t bc = W->cols / nb, ngb = bc / G, ng = W->cols / G, R = W->rows;              \
        const int64_t ld = 2 * (ng + 16); /* one row's scales and biases in sb */                  \
        const int64_t xs = cb_x_stride(bc, bits);                                                  \
        __m512 acc[CB_MAX_BLOCKS][CB_ROWS];                                                        \
        for (int64_t r0 = 0; r0 < R; r0 += CB_ROWS) {                                              \
            const int n = R - r0 < CB_ROWS ? (int)(R - r0) : CB_ROWS;                              \
            rows_scales_f32(W, r0, n, ng, sb);                                                     \
            prefetch_rows_scales(W, r0 + CB_ROWS, CB_ROWS, ng);                                    \
            const int64_t rs = (int64_t)W->row_stride, L = W->cols * bits / 8, bB = bc * bits / 8; \
            for (int i = 0; i < n; i += ROWS_MAX) {                                                \
                const uint8_t *row = W->data + (size_t)(r0 + i) * W->row_stride;                   \
                /* after a row's last block: the next group's (or row's) first */                  \
                const int64_t jg = r0 + i + 2 * ROWS_MAX <= R ? ROWS_MAX * rs - L : 0;             \
                for (int b = 0; b < nb; b++) {                                                     \
                    const uint8_t *rb = row + b * bB;                                              \
                    const float *xb = xp + b * xs, *sc = sb + i * ld + b * ngb;                    \
                    if (n - i >= ROWS_MAX)                                                         \
                        VEC(rb, rs, ROWS_MAX, bc, xb, sc, ld, bits, G, L - b * bB, jg,             \
                            &acc[b][i]);                                                           \
                    else                                                                           \
                        for (int j = 0; j < n - i; j++)                                            \
                            VEC(rb + j * rs, rs, 1, bc, xb, sc + j * ld, ld, bits, G, L - b * bB,  \
                                r0 + i + j + 1 < R ? rs - L : 0, &acc[b][i + j]);                  \
                }                                                                                  \
            }                                                                                      \
            cb_results(acc, nb, n, r0, sb, ld, ng, ngb, xsum, y, bits);                            \
        }                                                                                          \
    }
AFFINE_CB(affine_cb, affine_rows_vec, K3_AVX512_INLINE)
AFFINE_CB(affine_cb_v, affine_rows_vec_v, K3_AVX512V_INLINE)

/* Narrow column blocks: bc at most one 16-lane block (BC columns) and a divisor of
 * it, q = BC / bc blocks to each (the bench preset's expert down and MLA o_proj: 64
 * columns a block at 4 bits, half of one). AFFINE_CB spends a whole 16-lane block's
 * instructions, and a call's setup, on each (row, block) there (7 GB/s at 4 bits).
 * Here each 16-lane block of the whole row (x permuted once for the whole width,
 * xp) runs once, and each column block's bc / D lanes are compressed down to lanes
 * [0, bc / D), zeros above. Lane for lane these are what AFFINE_ROWS_VEC's tail
 * gives on the block's own view (the same codes, x factors, scales and FMA onto
 * zero, plus its y1 of zeros), so the sums and all after them are the same bits. */
#define AFFINE_CB_NARROW(NAME, ATTR, SPREAD)                                                       \
    ATTR void NAME(const k3_wmat *W, int nb, const float *xp, const float *xsum, float *sb,        \
                   float *const *y, int bits, int G) {                                             \
        const int64_t bc = W->cols / nb, ngb = bc / G, ng = W->cols / G, R = W->rows;              \
        const int64_t ld = 2 * (ng + 16), rb = W->cols * bits / 8;                                 \
        const int BB = block_bytes(bits), BC = block_cols(bits);                                   \
        const int q = (int)(BC / bc), L = 16 / q;                                                  \
        const int64_t nblk = W->cols / BC;                                                         \
        const __m512 zero = _mm512_setzero_ps();                                                   \
        __m512 acc[CB_MAX_BLOCKS][CB_ROWS];                                                        \
        for (int64_t r0 = 0; r0 < R; r0 += CB_ROWS) {                                              \
            const int n = R - r0 < CB_ROWS ? (int)(R - r0) : CB_ROWS;                              \
            rows_scales_f32(W, r0, n, ng, sb);                                                     \
            prefetch_rows_scales(W, r0 + CB_ROWS, CB_ROWS, ng);                                    \
            for (int i = 0; i < n; i++) {                                                          \
                const uint8_t *row = W->data + (size_t)(r0 + i) * W->row_stride;                   \
                for (int64_t jb = 0; jb < nblk; jb++) {                                            \
                    const int64_t left = rb - jb * BB;                                             \
                    const __mmask64 m = left >= 64 ? ~0ull : (1ull << left) - 1;                   \
                    _mm_prefetch((const char *)row + jb * BB + K3_PF_BYTES, _MM_HINT_T0);          \
                    __m512 t = block_dot(SPREAD(_mm512_maskz_loadu_epi8(m, row + jb * BB), bits),  \
                                         xp + jb * BC, bits);                                      \
                    __m512 v =                                                                     \
                        _mm512_fmadd_ps(t, block_scales(sb + i * ld, jb * BC, bits, G), zero);     \
                    for (int j = 0; j < q; j++)                                                    \
                        acc[jb * q + j][i] = _mm512_add_ps(                                        \
                            _mm512_maskz_compress_ps((__mmask16)(((1u << L) - 1) << (j * L)), v),  \
                            zero);                                                                 \
                }                                                                                  \
            }                                                                                      \
            cb_results(acc, nb, n, r0, sb, ld, ng, ngb, xsum, y, bits);                            \
        }                                                                                          \
    }
AFFINE_CB_NARROW(affine_cbn, K3_AVX512_INLINE, NO_SPREAD)
AFFINE_CB_NARROW(affine_cbn_v, K3_AVX512V_INLINE, spread)

typedef void (*affine_cb_fn)(const k3_wmat *, int, const float *, const float *, float *,
                             float *const *);
/* P_B_G: the column-block kernel P (affine_cb or affine_cbn; P_v with VBMI for 3/5/6
 * bits) with bits B and group G constant, and all of them as a [bits][group] table. */
#define AFFINE_BLOCKS_G(P, B, G)                                                                   \
    ROWS_ATTR_##B static void P##_##B##_##G(const k3_wmat *W, int nb, const float *xp,             \
                                            const float *xsum, float *sb, float *const *y) {       \
        VBMI_##B(P)(W, nb, xp, xsum, sb, y, B, G);                                                 \
    }
#define VBMI_2(P) P
#define VBMI_4(P) P
#define VBMI_3(P) P##_v
#define VBMI_5(P) P##_v
#define VBMI_6(P) P##_v
#define AFFINE_BLOCKS_BITS(P, B)                                                                   \
    AFFINE_BLOCKS_G(P, B, 32) AFFINE_BLOCKS_G(P, B, 64) AFFINE_BLOCKS_G(P, B, 128)
#define AFFINE_BLOCKS(P)                                                                           \
    AFFINE_BLOCKS_BITS(P, 2)                                                                       \
    AFFINE_BLOCKS_BITS(P, 3)                                                                       \
    AFFINE_BLOCKS_BITS(P, 4) AFFINE_BLOCKS_BITS(P, 5) AFFINE_BLOCKS_BITS(P, 6)
/* clang-format off */
#define AFFINE_BLOCKS_TABLE(P)                                                                     \
    {{P##_2_32, P##_2_64, P##_2_128}, {P##_3_32, P##_3_64, P##_3_128},                             \
     {P##_4_32, P##_4_64, P##_4_128}, {P##_5_32, P##_5_64, P##_5_128},                             \
     {P##_6_32, P##_6_64, P##_6_128}}
/* clang-format on */
AFFINE_BLOCKS(affine_cb)
AFFINE_BLOCKS(affine_cbn)

int k3_matvec_affine_colblocks_avx512(const k3_wmat *W, int nb, const float *const *xb,
                                      float *const *y) {
    const int bits = W->bits, G = W->group;
    if (nb < 1 || nb > CB_MAX_BLOCKS || bits < 2 || bits > 6 || !k3_avx512_affine_supports(W))
        return 0;
    const int64_t bc = W->cols / nb, ngb = bc / G, ng = W->cols / G, BC = block_cols(bits);
    if (bc % G) return 0;
    float *sb = k3_scratch(K3_SCRATCH_ROWSC, sizeof(float) * (size_t)(CB_ROWS * 2 * (ng + 16)));
    const int gi = G == 32 ? 0 : G == 64 ? 1 : 2;
    /* narrow blocks lying end to end (AFFINE_CB_NARROW): x permuted for the whole width */
    const uint64_t narrow = nb > 1 && bc <= BC && BC % bc == 0 && W->cols % BC == 0
                                ? k3_prep_blocks_shape(xb, nb, bc, bits | 16, G)
                                : 0;
    if (narrow) {
        int ready;
        float *xp = k3_prep_buf(K3_PREP_AFFINE, xb[0], narrow,
                                sizeof(float) * (size_t)(W->cols + nb * (ngb + 1)), &ready);
        float *xsum = xp + W->cols;
        for (int b = 0; b < nb && !ready; b++)
            k3_avx2_group_sums(xb[b], bc, G, xsum + b * (ngb + 1));
        if (!ready) permute_x(xb[0], W->cols, bits, xp);
        static const affine_cb_fn n[5][3] = AFFINE_BLOCKS_TABLE(affine_cbn);
        n[bits - 2][gi](W, nb, xp, xsum, sb, y);
        return 1;
    }
    const int64_t xs = cb_x_stride(bc, bits);
    int ready;
    float *xp = k3_prep_buf(K3_PREP_AFFINE, xb[0], k3_prep_blocks_shape(xb, nb, bc, bits, G),
                            sizeof(float) * (size_t)(nb * xs + nb * (ngb + 1)), &ready);
    float *xsum = xp + nb * xs;
    for (int b = 0; b < nb && !ready; b++) {
        k3_avx2_group_sums(xb[b], bc, G, xsum + b * (ngb + 1));
        permute_x(xb[b], bc, bits, xp + b * xs);
    }
    static const affine_cb_fn t[5][3] = AFFINE_BLOCKS_TABLE(affine_cb);
    t[bits - 2][gi](W, nb, xp, xsum, sb, y);
    return 1;
}
