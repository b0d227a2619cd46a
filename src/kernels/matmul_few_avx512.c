/* matmul_few_avx512.c — AVX-512 few-token product (2..16 tokens: batched
 * decode, and the routed experts of a prefill, a handful of tokens each).
 * bf16 has its own kernel (matmul_few_bf16_avx512.c); this file runs f32,
 * f16, MXFP4 and affine and dispatches.
 *
 * The prefill tile (matmul_avx512.c) first packs every weight into a k-major
 * panel; with a handful of tokens the packing costs more than the FMAs. Here
 * the weights are read in place: a block of RB rows x TB tokens (16 x 1,
 * 8 x 2, 4 x 3, 4 x 4; more tokens in groups of at most 4: 2 x 8 measured
 * 1.5x slower) keeps one 16-lane accumulator per (row, token); per step of
 * 16 columns the
 * RB rows are decoded to f32 in registers (the same floats as the panel
 * decoders: f16 conversion, MXFP4 2*E2M1 x half-scale, affine
 * fma(code, scale, bias)) and each is multiplied with the TB token vectors.
 * The 16 accumulators are then summed lane-wise by one transposing tree (the
 * same tree for every accumulator) into one vector whose lane i is output i.
 *
 * Per output the arithmetic is fixed by K alone: lane l accumulates columns
 * l, l+16, l+32, ... in order from zero (a zero-masked tail past K), then the
 * lanes are summed ((0+2)+(1+3)) within each 4-lane chunk and the chunks
 * ((0+1)+(2+3)). So token t's result does not depend on T, on the block
 * shape, on row slices or on threads (tests/test_kernels_matmul.c). It
 * differs from the one-token matvec and from the panel tile in rounding only.
 * The column loops also fetch the next 16 rows into L2 (l2fetch.h), which
 * changes no result. */
#include "kernels/avx512.h"
#include "kernels/avx2.h"
#include "kernels/avx2_decode.h"
#include "kernels/l2fetch.h"
#include "quant/dtype.h"

#include "kernels/runtime.h"

#include <immintrin.h>
#include <omp.h>
#include <string.h>

#define K3_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define K3_AVX512_INLINE                                                                           \
    static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx2,fma,"       \
                                                       "f16c")))
#include "kernels/few_reduce_avx512.h"

/* k3_mxfp4_half_scale(e) for every E8M0 byte e (filled before main). */
static float half_scale[256];
__attribute__((constructor)) static void half_scale_init(void) {
    for (int e = 0; e < 256; e++) half_scale[e] = k3_mxfp4_half_scale((uint8_t)e);
}

/* Format kinds the block kernel is instantiated for. */
enum { F_F32, F_F16, F_MXFP4, F_AFF8, F_AFFX, F_MXFP4V };

/* The 16 lookup indices of MXFP4 codes c..c+15 of a row: byte j/2 of the 8
 * into dword j, shifted so its low nibble is the code of column c + j
 * (F_MXFP4), or the same by one AVX-512 VBMI vpmultishiftqb of the 8 bytes
 * broadcast to every qword: dword 2q gets bits 8q.., dword 2q+1 bits
 * 8q+4.. (F_MXFP4V; only run where the CPU has VBMI, kind_of; written as
 * asm so this file keeps its target). The same indices either way. */
K3_AVX512_INLINE __m512i mx_idx(const uint8_t *row, int64_t c, int kind) {
    if (kind == F_MXFP4) {
        const __m512i sh = _mm512_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4);
        __m128i b = _mm_loadl_epi64((const __m128i *)(const void *)(row + c / 2));
        return _mm512_srlv_epi32(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(b, b)), sh);
    }
    const __m512i ctl =
        _mm512_setr_epi64(0 | 4LL << 32, 8 | 12LL << 32, 16 | 20LL << 32, 24 | 28LL << 32,
                          32 | 36LL << 32, 40 | 44LL << 32, 48 | 52LL << 32, 56 | 60LL << 32);
    int64_t q8;
    memcpy(&q8, row + c / 2, 8);
    __m512i src = _mm512_set1_epi64(q8), idx;
    __asm__("vpmultishiftqb %2, %1, %0" : "=v"(idx) : "v"(ctl), "v"(src));
    return idx;
}

/* 16 weights of row r from column c (c % 16 == 0) as f32; lanes >= n are 0
 * (n < 16 only for the float formats' last step). */
K3_AVX512_INLINE __m512 dec16(const k3_wmat *W, int64_t r, int64_t c, int n, int kind) {
    const uint8_t *row = W->data + (size_t)r * W->row_stride;
    const __mmask16 m = n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
    if (kind == F_F32) return _mm512_maskz_loadu_ps(m, row + 4 * c);
    if (kind == F_F16) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + 2 * c));
    if (kind == F_MXFP4 || kind == F_MXFP4V) {
        /* the code of column c + j in the low 4 bits of dword j (mx_idx);
         * vpermps reads only those bits of each index and gives 2 * E2M1 as
         * f32 (the same floats as converting the old int8 table), times the
         * half scale from a 256-entry table */
        const __m512 lut = _mm512_setr_ps(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
        const uint8_t *sc = W->scales + (size_t)r * W->scale_stride;
        return _mm512_mul_ps(_mm512_permutexvar_ps(mx_idx(row, c, kind), lut),
                             _mm512_set1_ps(half_scale[sc[c / 32]]));
    }
    /* affine: the codes only; block() applies fma(q, scale, bias) */
    __m512 q;
    if (kind == F_AFF8) {
        q = _mm512_cvtepi32_ps(
            _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(row + c))));
    } else {
        __m256 q0 = k3_dec8_codes(row, c, W->bits), q1 = k3_dec8_codes(row, c + 8, W->bits);
        q = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(q0)),
                                                _mm256_castps_pd(q1), 1));
    }
    return q;
}

/* MXFP4 columns from c on in steps of 32 while they fit before c1 (every
 * MXFP4 chunk: K and the chunks are multiples of 32), returning where it
 * stopped, for block(). Per row and 32 columns the 16-entry table is scaled
 * once (lut x half-scale: the products dec16 forms lane by lane, so the same
 * floats) and serves both halves of 16, then every token gets its two FMAs
 * in dec16's column order: the bits of the 16-column loop, with one multiply
 * and one scale lookup per 32 weights instead of per 16 (1.1-1.56x on
 * 3072x3584 at 1..16 tokens, 384x3584, 3584x384; bench/notes/decode-kernels.md). */
K3_AVX512_INLINE int64_t mx_block32(const k3_wmat *W, const int64_t *rr_of, const float *X,
                                    __m512 *acc, int RB, int TB, int kind, int64_t c, int64_t c1,
                                    k3_l2fetch *pf) {
    const int64_t K = W->cols;
    const __m512 lut = _mm512_setr_ps(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
    for (; c + 32 <= c1; c += 32) {
        __m512 x0[4], x1[4];
#pragma GCC unroll 4
        for (int tt = 0; tt < TB; tt++) {
            x0[tt] = _mm512_loadu_ps(X + tt * K + c);
            x1[tt] = _mm512_loadu_ps(X + tt * K + c + 16);
        }
#pragma GCC unroll 16
        for (int rr = 0; rr < RB; rr++) {
            const uint8_t *row = W->data + (size_t)rr_of[rr] * W->row_stride;
            const uint8_t *sc = W->scales + (size_t)rr_of[rr] * W->scale_stride;
            const __m512 ls = _mm512_mul_ps(lut, _mm512_set1_ps(half_scale[sc[c / 32]]));
            const __m512 w0 = _mm512_permutexvar_ps(mx_idx(row, c, kind), ls);
            const __m512 w1 = _mm512_permutexvar_ps(mx_idx(row, c + 16, kind), ls);
#pragma GCC unroll 4
            for (int tt = 0; tt < TB; tt++) {
                acc[tt * RB + rr] = _mm512_fmadd_ps(w0, x0[tt], acc[tt * RB + rr]);
                acc[tt * RB + rr] = _mm512_fmadd_ps(w1, x1[tt], acc[tt * RB + rr]);
            }
        }
        k3_l2fetch_step(pf);
    }
    return c;
}

/* The affine scale and bias of row r's group at column c, broadcast. */
K3_AVX512_INLINE void affine_sb(const k3_wmat *W, int64_t r, int64_t c, __m512 *s, __m512 *b) {
    const int64_t g = c / W->group;
    *s = _mm512_set1_ps(k3_wmat_elt(W->scale_fmt, W->scales + (size_t)r * W->scale_stride, g));
    *b = _mm512_set1_ps(k3_wmat_elt(W->scale_fmt, W->biases + (size_t)r * W->bias_stride, g));
}

/* Columns [c0, c1) of the block of rows i < nr (<= RB) and tokens t < TB;
 * accumulator tt*RB + rr is (row rr, token tt). RB and TB are constants
 * after inlining; rows past nr repeat row 0 and are not stored. Between
 * column chunks the accumulators wait in `keep` (stored and reloaded as
 * they are: the arithmetic is that of one pass); on the last chunk they
 * are summed into Y[t, r0 + i]. */
K3_AVX512_INLINE void block(const k3_wmat *W, int64_t r0, int nr, const float *X, float *Y,
                            int64_t ldy, int RB, int TB, int kind, int64_t c0, int64_t c1,
                            __m512 *keep, k3_l2fetch *pf) {
    const int64_t K = W->cols;
    __m512 acc[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) acc[i] = c0 == 0 || i >= RB * TB ? _mm512_setzero_ps() : keep[i];
    int64_t rr_of[16];
#pragma GCC unroll 16
    for (int rr = 0; rr < RB; rr++) rr_of[rr] = r0 + (rr < nr ? rr : 0);
    int64_t c = c0;
    const int affine = kind == F_AFF8 || kind == F_AFFX;
    const int64_t gm = affine ? W->group - 1 : 0;
    __m512 sv[16], bv[16]; /* affine: the current group's scale and bias per row */
#pragma GCC unroll 16
    for (int rr = 0; rr < RB; rr++) sv[rr] = bv[rr] = _mm512_setzero_ps();
    if (kind == F_MXFP4 || kind == F_MXFP4V)
        c = mx_block32(W, rr_of, X, acc, RB, TB, kind, c, c1, pf);
    for (; c + 16 <= c1; c += 16) {
        __m512 w[16];
        if (affine && (c == c0 || !(c & gm))) {
#pragma GCC unroll 16
            for (int rr = 0; rr < RB; rr++) affine_sb(W, rr_of[rr], c, &sv[rr], &bv[rr]);
        }
#pragma GCC unroll 16
        for (int rr = 0; rr < RB; rr++) {
            w[rr] = dec16(W, rr_of[rr], c, 16, kind);
            if (affine) w[rr] = _mm512_fmadd_ps(w[rr], sv[rr], bv[rr]);
        }
#pragma GCC unroll 16
        for (int tt = 0; tt < TB; tt++) {
            __m512 x = _mm512_loadu_ps(X + tt * K + c);
#pragma GCC unroll 16
            for (int rr = 0; rr < RB; rr++)
                acc[tt * RB + rr] = _mm512_fmadd_ps(w[rr], x, acc[tt * RB + rr]);
        }
        k3_l2fetch_step(pf);
    }
    if (c < c1) { /* float formats only, last chunk: zero-masked tail */
        const int n = (int)(c1 - c);
        const __mmask16 m = (__mmask16)((1u << n) - 1);
        __m512 w[16];
#pragma GCC unroll 16
        for (int rr = 0; rr < RB; rr++) w[rr] = dec16(W, rr_of[rr], c, n, kind);
#pragma GCC unroll 16
        for (int tt = 0; tt < TB; tt++) {
            __m512 x = _mm512_maskz_loadu_ps(m, X + tt * K + c);
#pragma GCC unroll 16
            for (int rr = 0; rr < RB; rr++)
                acc[tt * RB + rr] = _mm512_fmadd_ps(w[rr], x, acc[tt * RB + rr]);
        }
    }
    if (c1 < K) {
#pragma GCC unroll 16
        for (int i = 0; i < RB * TB; i++) keep[i] = acc[i];
        return;
    }
    __m512 y = reduce16(acc);
    /* token tt's rows are lanes [tt*RB, tt*RB + nr): one masked store each */
#pragma GCC unroll 16
    for (int tt = 0; tt < TB; tt++) {
        __mmask16 m = (__mmask16)(((1u << nr) - 1) << (tt * RB));
        _mm512_mask_storeu_ps(Y + tt * ldy + r0 - tt * RB, m, y);
    }
}

/* Rows [r0, r0+nr) (nr <= 16) for TB tokens, in row blocks of RB = 16 / TB,
 * over column chunks of KC(TB): the TB token vectors of a chunk (<= 16 KiB)
 * stay in L1 while every row block streams its weights (without chunks the
 * tokens' columns come from L2 for every row block: measured 3.9 GB/s for
 * bf16 at T = 8 on an 8192 x 4096 matrix, against 9.6 at T = 4). */
#define KC(TB) ((int64_t)(4096 / (TB)) & ~(int64_t)31)
#define ROWS_FN(KIND, TB, RB)                                                                      \
    K3_AVX512 static void rows_##KIND##_##TB(const k3_wmat *W, int64_t r0, int nr, const float *X, \
                                             float *Y, int64_t ldy, k3_l2fetch *pf) {              \
        __m512 keep[16 / RB][16];                                                                  \
        const int64_t K = W->cols;                                                                 \
        for (int64_t c0 = 0; c0 < K; c0 += KC(TB)) {                                               \
            const int64_t c1 = K - c0 <= KC(TB) ? K : c0 + KC(TB);                                 \
            for (int i = 0; i < nr; i += RB)                                                       \
                block(W, r0 + i, nr - i < RB ? nr - i : RB, X, Y, ldy, RB, TB, KIND, c0, c1,       \
                      keep[i / RB], pf);                                                           \
        }                                                                                          \
    }
/* Rows of a block for a group of TB tokens: 16 accumulators in all. */
#define FEW_RB(TB) ((TB) == 1 ? 16 : (TB) == 2 ? 8 : 4)
#define KIND_FNS(KIND)                                                                             \
    ROWS_FN(KIND, 1, FEW_RB(1))                                                                    \
    ROWS_FN(KIND, 2, FEW_RB(2))                                                                    \
    ROWS_FN(KIND, 3, FEW_RB(3))                                                                    \
    ROWS_FN(KIND, 4, FEW_RB(4))
KIND_FNS(F_F32)
KIND_FNS(F_F16)
KIND_FNS(F_MXFP4)
KIND_FNS(F_AFF8)
KIND_FNS(F_AFFX)
KIND_FNS(F_MXFP4V)

typedef void (*rows_fn)(const k3_wmat *, int64_t, int, const float *, float *, int64_t,
                        k3_l2fetch *);
#define KIND_TABLE(KIND)                                                                           \
    { rows_##KIND##_1, rows_##KIND##_2, rows_##KIND##_3, rows_##KIND##_4 }
static const rows_fn table[6][4] = {KIND_TABLE(F_F32),  KIND_TABLE(F_F16),  KIND_TABLE(F_MXFP4),
                                    KIND_TABLE(F_AFF8), KIND_TABLE(F_AFFX), KIND_TABLE(F_MXFP4V)};

static int mxfp4_vbmi = 1; /* k3_few_avx512_set_vbmi */

void k3_few_avx512_set_vbmi(int on) {
    mxfp4_vbmi = on;
}

static int kind_of(const k3_wmat *W) {
    switch (W->fmt) {
    case K3_W_F32:
        return F_F32;
    case K3_W_F16:
        return F_F16;
    case K3_W_MXFP4:
        return mxfp4_vbmi && k3_cpu_has_avx512_vbmi() ? F_MXFP4V : F_MXFP4;
    default:
        return W->bits == 8 ? F_AFF8 : F_AFFX;
    }
}

int k3_few_avx512_supports(const k3_wmat *W) {
    return k3_avx2_supports(W); /* the same formats and shapes (group >= 32) */
}

const float *k3_few_avx512_prepare(const k3_wmat *W, const float *X, int64_t T) {
    return W->fmt == K3_W_BF16 ? k3_few_bf16_prepare(W, X, T) : X;
}

int64_t k3_few_avx512_prepared_floats(const k3_wmat *W, int64_t T) {
    return W->fmt == K3_W_BF16 ? k3_few_bf16_prepared_floats(W, T) : 0;
}

void k3_few_avx512_prepare_into(const k3_wmat *W, const float *X, int64_t T, float *Xp) {
    if (W->fmt == K3_W_BF16) k3_few_bf16_prepare_into(W, X, T, Xp);
}

/* Tokens in the next group of a block when `left` remain. */
static int few_group(int64_t left) {
    return left <= 4 ? (int)left : left >= 8 ? 4 : (int)((left + 1) / 2);
}

/* Column steps the kernels take over a block of nr rows for all T tokens
 * (each token group's row blocks of FEW_RB, `cols` steps each). */
static int64_t block_steps(int64_t T, int nr, int64_t cols) {
    int64_t steps = 0;
    for (int64_t t = 0; t < T; t += few_group(T - t))
        steps += (nr + FEW_RB(few_group(T - t)) - 1) / FEW_RB(few_group(T - t)) * cols;
    return steps;
}

void k3_matmul_few_rows_avx512(const k3_wmat *W, int64_t r0, int64_t r1, const float *X, int64_t T,
                               float *Y) {
    if (W->fmt == K3_W_BF16) { /* matmul_few_bf16_avx512.c */
        k3_matmul_few_bf16_rows(W, r0, r1, X, T, Y);
        return;
    }
    const int kind = kind_of(W);
    const int64_t K = W->cols, R = W->rows;
    /* 16 rows at a time, then every token group over them (the rows stay in
     * L1/L2), fetching the next 16 rows (up to R) into L2 as they go: from
     * memory, without it, 3072 x 3584 MXFP4 ran at 99-131 GFLOP/s on one core
     * against 135-163 from L3 (4 and 8 tokens). */
    const int64_t step = kind == F_MXFP4 || kind == F_MXFP4V ? 32 : 16;
    const size_t bytes = (size_t)((K * k3_wmat_weight_bits(W) + 7) / 8);
    for (int64_t r = r0; r < r1; r += 16) {
        const int nr = r1 - r < 16 ? (int)(r1 - r) : 16;
        const int64_t rn = r + 16, nn = R - rn < 16 ? R - rn : 16;
        k3_l2fetch pf = {0};
        if (nn > 0)
            pf = k3_l2fetch_rows(W->data + (size_t)rn * W->row_stride, W->row_stride, bytes, nn,
                                 block_steps(T, nr, K / step));
        for (int64_t t = 0; t < T;) {
            const int tb = few_group(T - t);
            table[kind][tb - 1](W, r, nr, X + t * K, Y + t * R, R, &pf);
            t += tb;
        }
    }
}

void k3_matmul_few_avx512(const k3_wmat *W, const float *X, int64_t T, float *Y) {
    k3_matmul_few_rows_avx512(W, 0, W->rows, k3_few_avx512_prepare(W, X, T), T, Y);
}
