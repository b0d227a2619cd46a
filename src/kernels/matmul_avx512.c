/* matmul_avx512.c — AVX-512 tiled matrix-matrix product (prefill: many tokens).
 *
 * The AVX2 panel product (matmul_avx2.c) with 16-lane registers: per block
 * of 32 rows the weights are dequantized once per call (by the AVX2 row
 * decoder) and stored k-major (P[k][32], thread-local scratch, L2-resident);
 * a 12-token x 32-row register tile (24 of the 32 zmm registers) broadcasts
 * X[t, k] against two vectors of P per k. Prefill is FMA-bound and this
 * CPU's AVX-512 FMA peak is ~1.65x its AVX2 one (measured 132-138 vs 80-84
 * GFLOP/s per core), so here, unlike the decode kernels, 16 lanes pay.
 *
 * Every (t, r) is accumulated by one FMA per k in column order starting from
 * zero, exactly as in the AVX2 tile, so the results are bitwise those of
 * k3_matmul_avx2 (tested) and do not depend on T, the tile or threads. */
#include "kernels/avx2.h"
#include "kernels/runtime.h"
#include "kernels/avx2_decode.h"
#include "kernels/panel.h"
#include "kernels/avx512.h"
#include "kernels/scratch.h"
#include "quant/dtype.h"

#include <immintrin.h>
#include <omp.h>
#include <string.h>

#define K3_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define K3_AVX512_INLINE                                                                           \
    static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx2,fma,"       \
                                                       "f16c")))

enum { PANEL_ROWS = 32, TILE_TOKENS = 12, PANEL_COLS = 1024 };

/* Eight rows of an MLX affine matrix straight into panel columns g..g+7:
 * per group the rows' scales and biases are broadcast once, each 8-code
 * block is decoded and scaled in registers (the AVX2 row decoder's
 * fma(code, s, b), so the panel holds the same floats) and transposed. */
K3_AVX512_INLINE void pack_affine_rows(const k3_wmat *W, int64_t r0, int m, float *P, int bits,
                                       int G) {
    const uint8_t *rp[8], *sp[8], *bp[8];
    for (int i = 0; i < 8; i++) { /* rows past m are never read */
        int64_t r = i < m ? r0 + i : 0;
        rp[i] = W->data + (size_t)r * W->row_stride;
        sp[i] = W->scales + (size_t)r * W->scale_stride;
        bp[i] = W->biases + (size_t)r * W->bias_stride;
    }
    const __m256 z = _mm256_setzero_ps();
    for (int64_t g = 0; g < W->cols / G; g++) {
        __m256 sc[8], bi[8];
        for (int i = 0; i < 8; i++) {
            sc[i] = i < m ? _mm256_set1_ps(k3_wmat_elt(W->scale_fmt, sp[i], g)) : z;
            bi[i] = i < m ? _mm256_set1_ps(k3_wmat_elt(W->scale_fmt, bp[i], g)) : z;
        }
        for (int j = 0; j < G; j += 8) {
            const int64_t c = g * G + j;
#define DEC(i) (i < m ? _mm256_fmadd_ps(k3_dec8_codes(rp[i], c, bits), sc[i], bi[i]) : z)
            k3_transpose8_regs(DEC(0), DEC(1), DEC(2), DEC(3), DEC(4), DEC(5), DEC(6), DEC(7),
                               P + c * PANEL_ROWS, PANEL_ROWS);
#undef DEC
        }
    }
}

/* pack_affine_rows with bits and group as constants. */
#define AFFINE_PACK(B)                                                                             \
    K3_AVX512 static void pack_affine_##B(const k3_wmat *W, int64_t r0, int m, float *P) {         \
        if (W->group == 32)                                                                        \
            pack_affine_rows(W, r0, m, P, B, 32);                                                  \
        else if (W->group == 64)                                                                   \
            pack_affine_rows(W, r0, m, P, B, 64);                                                  \
        else                                                                                       \
            pack_affine_rows(W, r0, m, P, B, 128);                                                 \
    }
AFFINE_PACK(2)
AFFINE_PACK(3)
AFFINE_PACK(4)
AFFINE_PACK(5)
AFFINE_PACK(6)
AFFINE_PACK(8)
#undef AFFINE_PACK

/* Eight affine rows into the panel, or 0 for a width without a direct path. */
static int pack_affine(const k3_wmat *W, int64_t r0, int m, float *P) {
    typedef void (*pack_fn)(const k3_wmat *, int64_t, int, float *);
    static const pack_fn by_bits[9] = {
        [2] = pack_affine_2, [3] = pack_affine_3, [4] = pack_affine_4,
        [5] = pack_affine_5, [6] = pack_affine_6, [8] = pack_affine_8};
    if (W->bits < 0 || W->bits > 8 || !by_bits[W->bits]) return 0;
    by_bits[W->bits](W, r0, m, P);
    return 1;
}

/* Decode rows [r0, r0+n) (n <= 32) into the k-major panel P[k*32 + i], eight
 * rows at a time; rows n..31 are zero. Float and affine formats go straight
 * from the weights; MXFP4 through the AVX2 row decoder and the 8 x kp
 * temporary `rows`. */
K3_AVX512 static void pack_panel(const k3_wmat *W, int64_t r0, int n, float *rows, float *P) {
    const int64_t kp = k3_round8(W->cols);
    const int is_float = W->fmt == K3_W_F32 || W->fmt == K3_W_F16 || W->fmt == K3_W_BF16;
    for (int g = 0; g < PANEL_ROWS; g += 8) {
        int m = n - g < 8 ? n - g : 8;
        if (m <= 0) {
            for (int64_t k = 0; k < kp; k++) memset(P + k * PANEL_ROWS + g, 0, 8 * sizeof(float));
            continue;
        }
        if (is_float) {
            k3_pack_float_rows(W, r0 + g, m, P + g, PANEL_ROWS);
            continue;
        }
        if (W->fmt == K3_W_AFFINE && pack_affine(W, r0 + g, m, P + g)) continue;
        for (int i = 0; i < m; i++) k3_avx2_decode_row(W, r0 + g + i, rows + i * kp);
        if (m < 8) memset(rows + m * kp, 0, sizeof(float) * (size_t)((8 - m) * kp));
        for (int64_t k = 0; k < kp; k += 8)
            k3_transpose8(rows + k, kp, P + k * PANEL_ROWS + g, PANEL_ROWS);
    }
}

/* Y[j, 0..nr) (+)= sum_k X[j, k] P[k, 0..nr) for j < NT (a compile-time
 * constant after inlining), k < K, X rows ldx apart; named accumulators, one
 * FMA per k in order, starting from zero or (acc) from the f32 partial sums
 * a previous column chunk stored in Y, which continues the same chain. */
#define TILE_ZERO(j)                                                                               \
    __m512 c##j##a = _mm512_setzero_ps(), c##j##b = c##j##a;                                       \
    if (acc && NT > j) {                                                                           \
        c##j##a = _mm512_maskz_loadu_ps(m0, Y + j * R);                                            \
        c##j##b = _mm512_maskz_loadu_ps(m1, Y + j * R + 16);                                       \
    }
#define TILE_ROW(j)                                                                                \
    do {                                                                                           \
        if (NT > j) {                                                                              \
            __m512 a = _mm512_set1_ps(X[j * ldx + k]);                                             \
            c##j##a = _mm512_fmadd_ps(a, b0, c##j##a);                                             \
            c##j##b = _mm512_fmadd_ps(a, b1, c##j##b);                                             \
        }                                                                                          \
    } while (0)
#define TILE_STORE(j)                                                                              \
    do {                                                                                           \
        if (NT > j) {                                                                              \
            _mm512_mask_storeu_ps(Y + j * R, m0, c##j##a);                                         \
            _mm512_mask_storeu_ps(Y + j * R + 16, m1, c##j##b);                                    \
        }                                                                                          \
    } while (0)
K3_AVX512_INLINE void tile(const float *P, const float *X, int64_t ldx, int64_t K, int acc, int NT,
                           float *Y, int64_t R, int nr) {
    const __mmask16 m0 = nr >= 16 ? 0xffff : (__mmask16)((1u << nr) - 1);
    const __mmask16 m1 = nr >= 32 ? 0xffff : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
    TILE_ZERO(0);
    TILE_ZERO(1);
    TILE_ZERO(2);
    TILE_ZERO(3);
    TILE_ZERO(4);
    TILE_ZERO(5);
    TILE_ZERO(6);
    TILE_ZERO(7);
    TILE_ZERO(8);
    TILE_ZERO(9);
    TILE_ZERO(10);
    TILE_ZERO(11);
    for (int64_t k = 0; k < K; k++) {
        __m512 b0 = _mm512_load_ps(P + k * PANEL_ROWS),
               b1 = _mm512_load_ps(P + k * PANEL_ROWS + 16);
        TILE_ROW(0);
        TILE_ROW(1);
        TILE_ROW(2);
        TILE_ROW(3);
        TILE_ROW(4);
        TILE_ROW(5);
        TILE_ROW(6);
        TILE_ROW(7);
        TILE_ROW(8);
        TILE_ROW(9);
        TILE_ROW(10);
        TILE_ROW(11);
    }
    TILE_STORE(0);
    TILE_STORE(1);
    TILE_STORE(2);
    TILE_STORE(3);
    TILE_STORE(4);
    TILE_STORE(5);
    TILE_STORE(6);
    TILE_STORE(7);
    TILE_STORE(8);
    TILE_STORE(9);
    TILE_STORE(10);
    TILE_STORE(11);
}
#undef TILE_ROW
#undef TILE_STORE
#undef TILE_ZERO

/* One instantiation per token count, so each tile keeps only the
 * accumulators it uses in registers. */
K3_AVX512 static void tile_any(const float *P, const float *X, int64_t ldx, int64_t K, int acc,
                               int nt, float *Y, int64_t R, int nr) {
#define CASE(n)                                                                                    \
    case n:                                                                                        \
        tile(P, X, ldx, K, acc, n, Y, R, nr);                                                      \
        return
    switch (nt) {
        CASE(12);
        CASE(11);
        CASE(10);
        CASE(9);
        CASE(8);
        CASE(7);
        CASE(6);
        CASE(5);
        CASE(4);
        CASE(3);
        CASE(2);
    default:
        tile(P, X, ldx, K, acc, 1, Y, R, nr);
    }
#undef CASE
}

/* Rows [r0, r0+n) of Y for all T tokens, one chunk of PANEL_COLS columns at
 * a time: pack the chunk's panel (32 x 1024 floats, 128 KiB: it stays in L2
 * while every 12-token tile reads it, where a whole 7168-column panel plus
 * the tokens' rows did not), then run the tiles over it, each continuing
 * from the partial sums the previous chunk stored in Y. Per output this is
 * the same FMA chain in the same column order as one pass over all columns
 * (the f32 partial sum is stored and reloaded exactly), so the bits do not
 * depend on the chunking. */
K3_AVX512 static void panel_product(const k3_wmat *W, int64_t r0, int n, const float *X, int64_t T,
                                    float *Y) {
    const int64_t K = W->cols, R = W->rows, kc = k3_prefill_chunk_cols(W, PANEL_COLS),
                  kp = k3_round8(kc);
    float *buf = k3_scratch(K3_SCRATCH_PANEL, sizeof(float) * (size_t)((8 + PANEL_ROWS) * kp));
    float *P = buf, *rows = buf + PANEL_ROWS * kp; /* P first: 64-byte aligned */
    for (int64_t c0 = 0; c0 < K; c0 += kc) {
        const int64_t kn = K - c0 < kc ? K - c0 : kc;
        const k3_wmat V = kn == K ? *W : k3_wmat_cols(W, c0, kn);
        pack_panel(&V, r0, n, rows, P);
        for (int64_t t = 0; t < T; t += TILE_TOKENS) {
            int nt = T - t < TILE_TOKENS ? (int)(T - t) : TILE_TOKENS;
            tile_any(P, X + t * K + c0, K, kn, c0 > 0, nt, Y + t * R + r0, R, n);
        }
    }
}

/* Where the token-lane product (matmul_tok_avx512.c) beats the panel: it
 * skips the panel's transposes but fills 16 token lanes, so it pays where
 * the packing weighs and few lanes go empty. kmicro, one core of this Xeon
 * (weights in its L3): MXFP4 3072 x 3584 (K3's experts) at 17-96 tokens
 * 76-168 against 63-136 GFLOP/s, level at 128; bf16 and affine 4-bit
 * 1024 x 7168 at 32 tokens 129-141 against 107-123, but 68-110 against
 * 78-123 at 17, 40 and 48 (half-empty last vectors), level at 24 and 64,
 * behind from 96 on. On the v32k real slice (weights from memory) every
 * product in the token layout prefilled 48 tokens at 18.7-19.1 against
 * 19.8-20.6 tok/s, and 64 at 21.6-22.0 against 20.6-22.4.
 * bf16 since its tiles read the rows as stored (no decode pass), one core of a
 * Zen 5, 4096 x 7168 from memory: 131 against 118 GFLOP/s at 17 tokens, 187
 * against 137 at 24, 214 against 174 at 48, 248 against 190 at 64, 244 against
 * 227 at 256, level at 512 (and 2048 x 12288, 16384 x 1024 and 1024 x 1024 at 64:
 * 239-251 against 188-225); but behind on short rows (the column blocks of
 * o_proj and down): 1024 x 64 / 128 / 256 at 64 tokens 163 / 200 / 223 against
 * 227 / 232 / 229, ahead from 384 columns (232 against 222). */
static int tok_wins(const k3_wmat *W, int64_t T) {
    if (W->fmt == K3_W_MXFP4) return T >= 17 && T <= 96;
    if (W->fmt == K3_W_BF16 && W->cols > 256) return T >= 17 && T <= 256;
    return T >= 25 && T <= 32;
}

/* The OpenMP region lives in this plain function (see k3_parallel_rows). */
void k3_matmul_avx512(const k3_wmat *W, const float *X, int64_t T, float *Y) {
    if (tok_wins(W, T)) {
        k3_matmul_tok_avx512(W, X, T, Y);
        return;
    }
    const int64_t R = W->rows, npanels = (R + PANEL_ROWS - 1) / PANEL_ROWS;
    if (R * W->cols * T < 65536 || npanels == 1 || k3_kernels_serial()) {
        for (int64_t r0 = 0; r0 < R; r0 += PANEL_ROWS)
            panel_product(W, r0, R - r0 < PANEL_ROWS ? (int)(R - r0) : PANEL_ROWS, X, T, Y);
        return;
    }
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t b = 0; b < npanels; b++) {
        int64_t r0 = b * PANEL_ROWS;
        panel_product(W, r0, R - r0 < PANEL_ROWS ? (int)(R - r0) : PANEL_ROWS, X, T, Y);
    }
}
