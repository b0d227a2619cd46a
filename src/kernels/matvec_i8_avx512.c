/* matvec_i8_avx512.c — AVX-512 VNNI decode products with int8 activations (see matvec_i8.h).
 * Compiled for VNNI + VBMI; k3_i8_supports() requires both before anything here runs.
 *
 * vpdpbusd multiplies 64 unsigned bytes by 64 signed bytes and adds groups of
 * four into 16 int32 lanes. The weight codes are the unsigned side: a 64-byte
 * chunk of a row holds P = 8/bits "planes" of codes (code k of every byte,
 * isolated with shift + AND, never moved), and the quantized activation is
 * permuted once per product to match (xperm[chunk*64P + 64k + j] =
 * q[chunk*64P + P*j + k]). All P planes of lane i cover the same 4P columns,
 * hence one activation block, so they go into one int32 accumulator; per
 * chunk that accumulator is converted once and scaled per lane by
 * d_block * s_group (dlane: d per lane, prepared with xperm).
 * 3/5/6-bit codes (AVX-512 VBMI): a chunk is 64 columns in 8*bits bytes; vpermb puts
 * the `bits` bytes of 8 codes into each qword and vpmultishiftqb + AND cut out one code
 * per byte, in column order (the activation keeps its natural order, as at 8 bits).
 * MXFP4: one vpermb per 64 nibbles maps each code to 12 + 2*E2M1 (0..24, the
 * unsigned side; vpermb reads only the low 6 bits of each index byte, so the
 * neighbouring nibble needs no mask), and each lane's accumulator starts at
 * -12 * (sum of its 8 activation bytes), prepared once per product: the lane
 * then holds exactly dot(2*E2M1, q), as the reference. Scale 2^(e-128) per block.
 * Column counts that end inside a chunk use masked loads; the activation
 * padding is zero. */
#include "kernels/avx2.h"
#include "kernels/matvec_i8.h"
#include "kernels/scratch.h"
#include "quant/dtype.h"

#include <immintrin.h>
#include <string.h>

/* Software prefetch distance in a row's code stream. One core, 16384 x 7168, int8
 * activations: MXFP4 17-18 GB/s at 2 KiB, 20-21 at 4 KiB; affine 8 17-20 / 23-24; 8 KiB
 * was faster at 8 bits but fell to 14-18 in some runs (bench/notes/decode-kernels.md). */
#ifndef K3_I8_PF_BYTES
#define K3_I8_PF_BYTES 4096
#endif

#define K3_VNNI                                                                                    \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,avx2,fma,f16c")))
#define K3_VNNI_INLINE                                                                             \
    static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx512vnni,"     \
                                                       "avx512vbmi,avx2,fma,f16c")))

/* The prepared activation, shared by every row (the calling thread's scratch). */
typedef struct {
    k3_rows_ctx rows;    /* first: k3_parallel_rows hands this back to the workers */
    const int8_t *xq;    /* permuted quantized activation, chunk-padded with zeros */
    const float *dlane;  /* d_block for each int32 lane of each chunk (0 past cols) */
    const float *xs;     /* affine: per-group sums of x^ for the bias term */
    const int32_t *xoff; /* MXFP4: -12 * sum of each lane's 8 activation bytes, per chunk */
    /* 3/5/6 bits: vpermb source byte and vpmultishiftqb bit offset of each output byte */
    _Alignas(64) uint8_t perm[64];
    _Alignas(64) uint8_t shift[64];
} i8_ctx;

/* Planes per byte (8/bits for 2/4/8 bits; 1 for 3/5/6, decoded to one code per byte). */
static inline int planes(int bits) {
    return bits == 0 || bits == 4 ? 2 : bits == 2 ? 4 : 1;
}

/* Bytes of a row per 64-byte step: 64, or 8*bits for 3/5/6 bits (bits 0: MXFP4). */
static inline int chunk_bytes(int bits) {
    return bits == 3 || bits == 5 || bits == 6 ? 8 * bits : 64;
}

K3_VNNI void k3_i8_quantize_avx512(const float *x, int64_t n, int8_t *q, float *d, int32_t *isum) {
    for (int64_t b = 0; b < n / K3_I8_BLOCK; b++) {
        const float *xb = x + b * K3_I8_BLOCK;
        __m512 a = _mm512_loadu_ps(xb), c = _mm512_loadu_ps(xb + 16);
        float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(c)));
        const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        __m512i qa = _mm512_cvtps_epi32(_mm512_mul_ps(a, _mm512_set1_ps(inv)));
        __m512i qc = _mm512_cvtps_epi32(_mm512_mul_ps(c, _mm512_set1_ps(inv)));
        _mm_storeu_si128((__m128i *)(void *)(q + b * K3_I8_BLOCK), _mm512_cvtsepi32_epi8(qa));
        _mm_storeu_si128((__m128i *)(void *)(q + b * K3_I8_BLOCK + 16), _mm512_cvtsepi32_epi8(qc));
        d[b] = amax / 127.0f;
        isum[b] = _mm512_reduce_add_epi32(_mm512_add_epi32(qa, qc));
    }
}

/* Bytes [c, c+64) of q, zero past K. */
K3_VNNI_INLINE __m512i load_q(const int8_t *q, int64_t c, int64_t K) {
    const int64_t left = K - c;
    if (left >= 64) return _mm512_loadu_si512((const void *)(q + c));
    if (left <= 0) return _mm512_setzero_si512();
    return _mm512_maskz_loadu_epi8(_cvtu64_mask64((1ull << left) - 1), q + c);
}

/* xperm and dlane for P planes per byte; nch chunks of 64P columns (zero past K). Plane k
 * of a chunk is byte P*j + k of its 64P activation bytes: one vpermt2b of two 64-byte
 * halves (P 2), or of each 128-byte half and a blend (P 4). MXFP4 (xoff != NULL): also
 * -12 * the sum of each int32 lane's activation bytes over both planes. */
K3_VNNI static void permute_activation(const int8_t *q, const float *d, int64_t K, int P,
                                       int8_t *xperm, float *dlane, int32_t *xoff) {
    const int64_t CH = 64 * P, nch = (K + CH - 1) / CH, nb = K / K3_I8_BLOCK;
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    _Alignas(64) uint8_t ix[4][64];
    for (int k = 0; k < P; k++)
        for (int j = 0; j < 64; j++) ix[k][j] = (uint8_t)((P * j + k) & 127);
    for (int64_t ch = 0; ch < nch; ch++) {
        const int64_t c0 = ch * CH;
        int8_t *o = xperm + c0;
        if (P == 1) {
            _mm512_store_si512((void *)o, load_q(q, c0, K));
        } else if (P == 2) {
            __m512i a = load_q(q, c0, K), b = load_q(q, c0 + 64, K);
            for (int k = 0; k < 2; k++)
                _mm512_store_si512((void *)(o + 64 * k),
                                   _mm512_permutex2var_epi8(a, _mm512_load_si512(ix[k]), b));
        } else {
            __m512i a = load_q(q, c0, K), b = load_q(q, c0 + 64, K), c = load_q(q, c0 + 128, K),
                    e = load_q(q, c0 + 192, K);
            for (int k = 0; k < 4; k++) {
                __m512i i = _mm512_load_si512(ix[k]);
                __m512i lo = _mm512_permutex2var_epi8(a, i, b),
                        hi = _mm512_permutex2var_epi8(c, i, e);
                _mm512_store_si512((void *)(o + 64 * k),
                                   _mm512_mask_blend_epi8(0xffffffff00000000ull, lo, hi));
            }
        }
        /* lane i covers columns c0 + 4P i .. + 4P - 1, all in block (c0 + 4P i) / 32 */
        const int64_t b0 = c0 / K3_I8_BLOCK, nbc = CH / K3_I8_BLOCK;
        const int64_t have = nb - b0 < nbc ? nb - b0 : nbc;
        __m512 dw = _mm512_maskz_loadu_ps((__mmask16)((1u << have) - 1), d + b0);
        __m512i bi = _mm512_srli_epi32(lane, P == 1 ? 3 : P == 2 ? 2 : 1);
        _mm512_storeu_ps(dlane + ch * 16, _mm512_permutexvar_ps(bi, dw));
        if (xoff) { /* P 2 */
            __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1),
                                            _mm512_load_si512((const void *)o));
            s = _mm512_dpbusd_epi32(s, _mm512_set1_epi8(1),
                                    _mm512_load_si512((const void *)(o + 64)));
            _mm512_storeu_si512((void *)(xoff + ch * 16),
                                _mm512_mullo_epi32(s, _mm512_set1_epi32(-12)));
        }
    }
}

/* Scales of groups [w, w+16) of one row as f32 (zeros past ng): affine bf16/f16/f32, or
 * (mx) MXFP4 E8M0 exponents -> 2^(e-128) (half the scale: the code table is doubled), NaN
 * for 255. Loaded straight from the row: no scratch copy, one window per 16 groups. */
K3_VNNI_INLINE __m512 scale_window(int mx, k3_wfmt fmt, const uint8_t *p, int64_t w, int64_t ng) {
    const __mmask16 m = ng - w >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (ng - w)) - 1);
    if (mx) {
        __m512i e = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, p + w));
        __m512i u = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
        __m512i sub = _mm512_srlv_epi32(_mm512_set1_epi32(0x00400000),
                                        _mm512_sub_epi32(_mm512_set1_epi32(1), e));
        u = _mm512_mask_mov_epi32(u, _mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2)), sub);
        u = _mm512_mask_mov_epi32(u, _mm512_cmpeq_epi32_mask(e, _mm512_set1_epi32(255)),
                                  _mm512_set1_epi32(0x7fc00000));
        return _mm512_castsi512_ps(_mm512_maskz_mov_epi32(m, u));
    }
    if (fmt == K3_W_F32) return _mm512_maskz_loadu_ps(m, p + 4 * w);
    __m256i h = _mm256_maskz_loadu_epi16(m, p + 2 * w);
    if (fmt == K3_W_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* 64 code bytes at p, masked when fewer than 64 remain. */
K3_VNNI_INLINE __m512i load_chunk(const uint8_t *p, int64_t left) {
    if (left >= 64) return _mm512_loadu_si512((const void *)p);
    return _mm512_maskz_loadu_epi8(_cvtu64_mask64((1ull << left) - 1), p);
}

/* int32 lanes of one affine chunk: sum over the P planes of code * xperm. */
K3_VNNI_INLINE __m512i affine_chunk(__m512i v, const int8_t *xq, int bits) {
    const int P = 8 / bits;
    const __m512i m = _mm512_set1_epi8((char)((1 << bits) - 1));
    __m512i acc = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int k = 0; k < P; k++) {
        __m512i codes = bits == 8 ? v : _mm512_and_si512(_mm512_srli_epi16(v, k * bits), m);
        acc = _mm512_dpbusd_epi32(acc, codes, _mm512_load_si512((const void *)(xq + 64 * k)));
    }
    return acc;
}

/* int32 lanes of one 3/5/6-bit chunk (64 codes in 8*bits bytes): one code per byte. */
K3_VNNI_INLINE __m512i odd_chunk(__m512i v, const i8_ctx *c, const int8_t *xq, int bits) {
    __m512i t = _mm512_permutexvar_epi8(_mm512_load_si512((const void *)c->perm), v);
    t = _mm512_multishift_epi64_epi8(_mm512_load_si512((const void *)c->shift), t);
    t = _mm512_and_si512(t, _mm512_set1_epi8((char)((1 << bits) - 1)));
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), t, _mm512_load_si512((const void *)xq));
}

/* int32 lanes of one MXFP4 chunk: 12 + 2 E2M1 against the activation, from the lane's
 * offset -12 * sum(q) (xo), so each lane is dot(2 E2M1, q). */
K3_VNNI_INLINE __m512i mxfp4_chunk(__m512i v, const int8_t *xq, const int32_t *xo) {
    const __m512i lut = _mm512_broadcast_i32x4(
        _mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
    __m512i lo = _mm512_permutexvar_epi8(v, lut);
    __m512i hi = _mm512_permutexvar_epi8(_mm512_srli_epi16(v, 4), lut);
    __m512i acc = _mm512_dpbusd_epi32(_mm512_loadu_si512((const void *)xo), lo,
                                      _mm512_load_si512((const void *)xq));
    return _mm512_dpbusd_epi32(acc, hi, _mm512_load_si512((const void *)(xq + 64)));
}

/* int32 lanes of chunk ch (codes v) in the format of bits (0: MXFP4). */
K3_VNNI_INLINE __m512i chunk_ints(const i8_ctx *c, __m512i v, int64_t ch, int bits) {
    const int64_t CH = 64 * planes(bits);
    if (bits == 0) return mxfp4_chunk(v, c->xq + ch * CH, c->xoff + ch * 16);
    if (chunk_bytes(bits) != 64) return odd_chunk(v, c, c->xq + ch * CH, bits);
    return affine_chunk(v, c->xq + ch * CH, bits);
}

/* Lane i of a chunk (P planes) lies in group (4P i) / G, counted from the chunk's
 * first group: those group offsets, one per lane. */
K3_VNNI_INLINE __m512i lane_groups(int P, int G) {
    const int shift = (G == 32 ? 5 : G == 64 ? 6 : 7) - (P == 1 ? 2 : P == 2 ? 3 : 4);
    return _mm512_srli_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), shift);
}

/* The four rows r .. r+3 of a pass over rows [.., R), past R the last row again
 * (computed, not stored), and the mask of those to store. */
K3_VNNI_INLINE __mmask8 four_rows(int64_t r, int64_t R, int64_t rr[4]) {
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) rr[k] = r + k < R ? r + k : R - 1;
    return (__mmask8)((1u << (R - r < 4 ? R - r : 4)) - 1);
}

/* Four rows r[0..3] as 16 partial sums each (out[k]), in lockstep: over chunks, int
 * lanes * dlane * per-lane scale, plus (affine) the bias term sum_g b_g xs_g. The rows
 * share each chunk's activation and dlane loads; each row gets the instructions and
 * order it would get alone, so its sums do not depend on its neighbours. bits 0 =
 * MXFP4 (P 2, group 32). */
K3_VNNI_INLINE void rows4_partials(const i8_ctx *c, const int64_t *r, int bits, int G,
                                   __m512 *out) {
    const k3_wmat *W = c->rows.W;
    const int mx = bits == 0, P = planes(bits), B = chunk_bytes(bits);
    const int64_t K = W->cols, ng = K / G, nbytes = K * (mx ? 4 : bits) / 8, CH = 64 * P;
    const int64_t span = (CH + G - 1) / G; /* groups one chunk touches */
    /* past a row's end the prefetch goes on in the next four's row, not in the row
     * beside it (which this four reads already) */
    const int64_t jump = 4 * (int64_t)W->row_stride - nbytes;
    const uint8_t *row[4], *sc[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        row[k] = W->data + (size_t)r[k] * W->row_stride;
        sc[k] = W->scales + (size_t)r[k] * W->scale_stride;
        /* the scales (and biases) are streams of their own, a few bytes per row: fetch
         * them 8 rows ahead, as the codes are fetched 4 KiB ahead */
        _mm_prefetch((const char *)sc[k] + 8 * W->scale_stride, _MM_HINT_T0);
        if (!mx)
            _mm_prefetch((const char *)W->biases + (size_t)(r[k] + 8) * W->bias_stride,
                         _MM_HINT_T0);
    }
    const __m512i idx = lane_groups(P, G);
    int64_t w = 0; /* scale windows: groups [w, w+16) in S[k] */
    __m512 S[4], y0[4], y1[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        S[k] = scale_window(mx, W->scale_fmt, sc[k], 0, ng);
        y0[k] = y1[k] = _mm512_setzero_ps();
    }
    for (int64_t ch = 0; ch * B < nbytes; ch++) {
        const int64_t base = ch * CH / G;
        if (base + span > w + 16) {
            w = base; /* the window starts at this chunk's first group: 16/span chunks each */
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) S[k] = scale_window(mx, W->scale_fmt, sc[k], w, ng);
        }
        /* prefetch ahead: the hardware streamer stops at page boundaries */
        const int64_t pf = ch * B + K3_I8_PF_BYTES, left = nbytes - ch * B;
        const __m512i si = _mm512_add_epi32(idx, _mm512_set1_epi32((int)(base - w)));
        const __m512 dl = _mm512_loadu_ps(c->dlane + ch * 16);
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            _mm_prefetch((const char *)row[k] + pf + (pf >= nbytes ? jump : 0), _MM_HINT_T0);
            __m512i a = chunk_ints(c, load_chunk(row[k] + ch * B, left < B ? left : B), ch, bits);
            __m512 f = _mm512_mul_ps(dl, _mm512_permutexvar_ps(si, S[k]));
            if (ch & 1)
                y1[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a), f, y1[k]);
            else
                y0[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a), f, y0[k]);
        }
    }
    if (!mx)
        for (int64_t g = 0; g < ng; g += 16) {
            __mmask16 m = ng - g >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (ng - g)) - 1);
            const __m512 xs = _mm512_maskz_loadu_ps(m, c->xs + g);
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                const uint8_t *bi = W->biases + (size_t)r[k] * W->bias_stride;
                y1[k] = _mm512_fmadd_ps(scale_window(0, W->scale_fmt, bi, g, ng), xs, y1[k]);
            }
        }
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) out[k] = _mm512_add_ps(y0[k], y1[k]);
}

/* The four sums of a0..a3 in one pass (cheaper than four horizontal reductions, which
 * dominate short rows). Each row's 16 values are added in the same pattern. */
K3_VNNI_INLINE __m128 sum4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
    __m512 s01 = _mm512_add_ps(_mm512_unpacklo_ps(a0, a1), _mm512_unpackhi_ps(a0, a1));
    __m512 s23 = _mm512_add_ps(_mm512_unpacklo_ps(a2, a3), _mm512_unpackhi_ps(a2, a3));
    __m512 s = _mm512_add_ps(_mm512_shuffle_ps(s01, s23, 0x44), _mm512_shuffle_ps(s01, s23, 0xee));
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(s),
                             _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1)));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

/* Rows [r0, r1) in fours (past r1 the last row is repeated), with bits and G constant
 * after inlining (bits 0: MXFP4). sum4 adds every row's values in the same pattern
 * whatever its position, so results do not depend on how rows are split over threads. */
K3_VNNI_INLINE void i8_rows(const k3_rows_ctx *rc, int64_t r0, int64_t r1, int bits, int G) {
    const i8_ctx *c = (const i8_ctx *)rc;
    for (int64_t r = r0; r < r1; r += 4) {
        int64_t rr[4];
        const __mmask8 n = four_rows(r, r1, rr);
        __m512 a[4];
        rows4_partials(c, rr, bits, G, a);
        _mm_mask_storeu_ps(rc->y + r, n, sum4(a[0], a[1], a[2], a[3]));
    }
}

/* The affine instantiations P_B_G of a kernel as a [bits 2,3,4,5,6,8][group
 * 32,64,128] table. */
/* clang-format off */
#define I8_BLOCKS_TABLE(P)                                                                         \
    {{P##_2_32, P##_2_64, P##_2_128}, {P##_3_32, P##_3_64, P##_3_128},                             \
     {P##_4_32, P##_4_64, P##_4_128}, {P##_5_32, P##_5_64, P##_5_128},                             \
     {P##_6_32, P##_6_64, P##_6_128}, {P##_8_32, P##_8_64, P##_8_128}}
/* clang-format on */

/* Where W's affine format sits in an I8_BLOCKS_TABLE. */
static inline int bits_row(const k3_wmat *W) {
    return W->bits == 8 ? 5 : W->bits - 2;
}
static inline int group_col(const k3_wmat *W) {
    return W->group == 32 ? 0 : W->group == 64 ? 1 : 2;
}

#define I8_ROWS(B, G)                                                                              \
    K3_VNNI static void i8_rows_##B##_##G(const k3_rows_ctx *rc, int64_t r0, int64_t r1) {         \
        i8_rows(rc, r0, r1, B, G);                                                                 \
    }
#define I8_ROWS_BITS(B) I8_ROWS(B, 32) I8_ROWS(B, 64) I8_ROWS(B, 128)
I8_ROWS_BITS(2)
I8_ROWS_BITS(3)
I8_ROWS_BITS(4)
I8_ROWS_BITS(5)
I8_ROWS_BITS(6)
I8_ROWS_BITS(8)
I8_ROWS(0, 32)

static k3_rows_fn pick_rows(const k3_wmat *W) {
    static const k3_rows_fn t[6][3] = I8_BLOCKS_TABLE(i8_rows);
    return W->fmt == K3_W_MXFP4 ? i8_rows_0_32 : t[bits_row(W)][group_col(W)];
}

/* Bytes of scratch one product's prepared activation takes (see prepare). */
static size_t prepared_bytes(const k3_wmat *W) {
    const int64_t K = W->cols, nb = K / K3_I8_BLOCK;
    const int P = planes(W->fmt == K3_W_MXFP4 ? 0 : W->bits);
    const int64_t nch = (K + 64 * P - 1) / (64 * P);
    /* q[K], xperm[64P nch], then d[nb], isum[nb], xs[ng <= nb], dlane[16 nch], xoff[16 nch] */
    return (size_t)(K + 64) / 64 * 64 + (size_t)(nch * 64 * P) +
           sizeof(float) * (size_t)(3 * nb + 32 * nch);
}

/* The activation x of a product on W, quantized, summed and permuted into buf
 * (prepared_bytes(W), 64-byte aligned; already there when ready), and the
 * context its rows read. */
K3_VNNI static void prepare(const k3_wmat *W, const float *x, uint8_t *buf, int ready, i8_ctx *c) {
    const int64_t K = W->cols, nb = K / K3_I8_BLOCK;
    const int mx = W->fmt == K3_W_MXFP4, P = planes(mx ? 0 : W->bits);
    const int64_t nch = (K + 64 * P - 1) / (64 * P);
    int8_t *q = (int8_t *)buf;
    int8_t *xperm = q + (K + 64) / 64 * 64;
    float *d = (float *)(void *)(xperm + nch * 64 * P);
    int32_t *isum = (int32_t *)(void *)(d + nb);
    float *xs = d + 2 * nb, *dlane = d + 3 * nb;
    int32_t *xoff = mx ? (int32_t *)(void *)(dlane + 16 * nch) : NULL;
    if (!ready) {
        k3_i8_quantize_avx512(x, K, q, d, isum);
        if (W->fmt == K3_W_AFFINE) k3_i8_group_sums(d, isum, K, W->group, xs);
        permute_activation(q, d, K, P, xperm, dlane, xoff);
    }
    c->rows = (k3_rows_ctx){W, x, NULL, NULL, NULL};
    c->xq = xperm, c->dlane = dlane, c->xs = xs, c->xoff = xoff;
    if (mx || chunk_bytes(W->bits) == 64) return; /* perm and shift serve 3/5/6 bits only */
    for (int i = 0; i < 64; i++) { /* output byte 8q + j = code j of the q-th 8-code run */
        c->perm[i] = (uint8_t)(W->bits * (i / 8) + i % 8);
        c->shift[i] = (uint8_t)(W->bits * (i % 8));
    }
}

void k3_matvec_i8_avx512(const k3_wmat *W, const float *x, float *y) {
    i8_ctx c;
    int ready;
    /* the layout depends on the format, bits and group, all in the shape word */
    uint8_t *buf = k3_prep_buf(K3_PREP_I8, x, k3_prep_shape(W->cols, W->fmt, W->bits, W->group),
                               prepared_bytes(W), &ready);
    prepare(W, x, buf, ready, &c);
    c.rows.y = y;
    k3_parallel_rows(&c.rows, pick_rows(W));
}

/* Most column blocks k3_matvec_i8_colblocks_avx512 takes. */
#define I8_CB_MAX 16

/* Rows [0, R) of every block in fours, block after block within each four
 * (the four rows are read once, front to back), each (four, block) exactly
 * as i8_rows computes those rows of the block's view. */
K3_VNNI_INLINE void i8_cb_rows(const i8_ctx *c, int nb, int64_t R, float *const *y, int bits,
                               int G) {
    for (int64_t r = 0; r < R; r += 4) {
        int64_t rr[4];
        const __mmask8 n = four_rows(r, R, rr);
        for (int b = 0; b < nb; b++) {
            __m512 a[4];
            rows4_partials(&c[b], rr, bits, G, a);
            _mm_mask_storeu_ps(y[b] + r, n, sum4(a[0], a[1], a[2], a[3]));
        }
    }
}

/* Narrow affine column blocks: bc columns a block, at most a chunk's CH = 64P, so q = CH /
 * bc blocks share each chunk of a full-width row (a small model's expert down and o_proj:
 * 64 columns a block, half a chunk at 4 bits). Each block's own product spends a row's
 * setup and a chunk's instructions on a fraction of a chunk (6.6 GB/s at 4 bits on the
 * bench preset's expert down, 14 at 8 bits). Here every chunk of
 * the whole row runs once through the whole-width context c, and each block's L = 16 / q
 * lanes are compressed down to lanes [0, L), zeros above. Lane for lane these are the
 * values rows4_partials gives in the block's own product: the same int32 sums, per-lane
 * scale and FMA onto zero, and the same bias term (each block has one chunk, so its y1
 * holds only the bias), so sum4 gives the same bits. narrow_fits says when this applies. */
K3_VNNI_INLINE void i8_narrow_rows(const i8_ctx *c, int nb, int64_t R, float *const *y, int bits,
                                   int G) {
    const k3_wmat *W = c->rows.W;
    const int P = planes(bits), B = chunk_bytes(bits);
    const int64_t K = W->cols, ng = K / G, CH = 64 * P, nch = K / CH, bc = K / nb;
    const int q = (int)(CH / bc), L = 16 / q, ngb = (int)(bc / G);
    const __m512i idx = lane_groups(P, G);
    const __m512 zero = _mm512_setzero_ps();
    const __m512 xs = _mm512_maskz_loadu_ps((__mmask16)((1u << ng) - 1), c->xs);
    for (int64_t r = 0; r < R; r += 4) {
        int64_t rr[4];
        const __mmask8 n = four_rows(r, R, rr);
        const uint8_t *rw[4];
        __m512 S[4], bias[4];
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            rw[k] = W->data + (size_t)rr[k] * W->row_stride;
            S[k] =
                scale_window(0, W->scale_fmt, W->scales + (size_t)rr[k] * W->scale_stride, 0, ng);
            const uint8_t *bi = W->biases + (size_t)rr[k] * W->bias_stride;
            bias[k] = _mm512_fmadd_ps(scale_window(0, W->scale_fmt, bi, 0, ng), xs, zero);
        }
        for (int64_t ch = 0; ch < nch; ch++) {
            const __m512i sidx = _mm512_add_epi32(idx, _mm512_set1_epi32((int)(ch * CH / G)));
            const __m512 dl = _mm512_loadu_ps(c->dlane + ch * 16);
            __m512 v[4];
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                _mm_prefetch((const char *)rw[k] + ch * B + K3_I8_PF_BYTES, _MM_HINT_T0);
                __m512i a = chunk_ints(c, load_chunk(rw[k] + ch * B, B), ch, bits);
                __m512 f = _mm512_mul_ps(dl, _mm512_permutexvar_ps(sidx, S[k]));
                v[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a), f, zero);
            }
            for (int j = 0; j < q; j++) {
                const int64_t b = ch * q + j;
                const __mmask16 lm = (__mmask16)(((1u << L) - 1) << (j * L));
                const __mmask16 bm = (__mmask16)(((1u << ngb) - 1) << (b * ngb));
#define K3_NARROW_LANES(k)                                                                         \
    _mm512_add_ps(_mm512_maskz_compress_ps(lm, v[k]), _mm512_maskz_compress_ps(bm, bias[k]))
                _mm_mask_storeu_ps(y[b] + r, n,
                                   sum4(K3_NARROW_LANES(0), K3_NARROW_LANES(1), K3_NARROW_LANES(2),
                                        K3_NARROW_LANES(3)));
#undef K3_NARROW_LANES
            }
        }
    }
}

/* Whether i8_narrow_rows serves these affine blocks: each at most a chunk and a divisor
 * of it, whole int8 blocks and groups, at most 16 groups a row (one scale window), and
 * the blocks' activations side by side, so that one whole-width preparation is theirs.
 * (MXFP4 blocks this narrow never come here: they take the f32 kernel, see
 * K3_I8_MXFP4_MIN_COLS.) */
static int narrow_fits(const k3_wmat *W, int nb, const float *const *xb) {
    if (W->fmt != K3_W_AFFINE) return 0;
    const int bits = W->bits;
    const int64_t CH = 64 * planes(bits), bc = W->cols / nb, G = W->group;
    if (nb < 2 || bc * nb != W->cols || bc > CH || CH % bc || W->cols % CH) return 0;
    if (bc % K3_I8_BLOCK || bc % G || W->cols / G > 16) return 0;
    for (int b = 1; b < nb; b++)
        if (xb[b] != xb[0] + b * bc) return 0;
    return 1;
}

typedef void (*i8_cb_fn)(const i8_ctx *, int, int64_t, float *const *);
/* P_B_G: IMPL (i8_cb_rows or i8_narrow_rows) with bits B and group G constant. */
#define I8_BLOCKS_FN(P, IMPL, B, G)                                                                \
    K3_VNNI static void P##_##B##_##G(const i8_ctx *c, int nb, int64_t R, float *const *y) {       \
        IMPL(c, nb, R, y, B, G);                                                                   \
    }
#define I8_BLOCKS_BITS(P, IMPL, B)                                                                 \
    I8_BLOCKS_FN(P, IMPL, B, 32) I8_BLOCKS_FN(P, IMPL, B, 64) I8_BLOCKS_FN(P, IMPL, B, 128)
#define I8_BLOCKS_ALL(P, IMPL)                                                                     \
    I8_BLOCKS_BITS(P, IMPL, 2)                                                                     \
    I8_BLOCKS_BITS(P, IMPL, 3)                                                                     \
    I8_BLOCKS_BITS(P, IMPL, 4)                                                                     \
    I8_BLOCKS_BITS(P, IMPL, 5) I8_BLOCKS_BITS(P, IMPL, 6) I8_BLOCKS_BITS(P, IMPL, 8)
I8_BLOCKS_ALL(i8_cb, i8_cb_rows)
I8_BLOCKS_FN(i8_cb, i8_cb_rows, 0, 32)
I8_BLOCKS_ALL(i8_nr, i8_narrow_rows)

static i8_cb_fn pick_cb(const k3_wmat *W) {
    static const i8_cb_fn t[6][3] = I8_BLOCKS_TABLE(i8_cb);
    return W->fmt == K3_W_MXFP4 ? i8_cb_0_32 : t[bits_row(W)][group_col(W)];
}

static i8_cb_fn pick_narrow(const k3_wmat *W) {
    static const i8_cb_fn t[6][3] = I8_BLOCKS_TABLE(i8_nr);
    return t[bits_row(W)][group_col(W)];
}

int k3_matvec_i8_colblocks_avx512(const k3_wmat *W, int nb, const float *const *xb,
                                  float *const *y) {
    if (nb < 1 || nb > I8_CB_MAX) return 0;
    if (narrow_fits(W, nb, xb)) { /* one whole-width preparation for all blocks */
        i8_ctx c;
        int ready;
        uint8_t *buf =
            k3_prep_buf(K3_PREP_I8, xb[0], k3_prep_shape(W->cols, W->fmt, W->bits, W->group),
                        prepared_bytes(W), &ready);
        prepare(W, xb[0], buf, ready, &c);
        pick_narrow(W)(&c, nb, W->rows, y);
        return 1;
    }
    const int64_t bc = W->cols / nb;
    k3_wmat v[I8_CB_MAX];
    i8_ctx c[I8_CB_MAX];
    v[0] = k3_wmat_cols(W, 0, bc);
    const size_t per = (prepared_bytes(&v[0]) + 63) / 64 * 64;
    /* the shape word has no room for the format: a different layout, so a separate kind */
    int ready;
    uint8_t *buf =
        k3_prep_buf(K3_PREP_I8_BLOCKS, xb[0],
                    k3_prep_blocks_shape(xb, nb, bc, W->fmt == K3_W_MXFP4 ? 0 : W->bits, W->group),
                    per * (size_t)nb, &ready);
    for (int b = 0; b < nb; b++) {
        v[b] = k3_wmat_cols(W, b * bc, bc);
        prepare(&v[b], xb[b], buf + per * (size_t)b, ready, &c[b]);
    }
    pick_cb(W)(c, nb, W->rows, y);
    return 1;
}

/* The path's entry (matvec_i8.h): on this CPU, the kernel above. */
void k3_matvec_i8(const k3_wmat *W, const float *x, float *y) {
    k3_matvec_i8_avx512(W, x, y);
}
