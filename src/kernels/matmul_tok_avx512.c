/* matmul_tok_avx512.c — the prefill product with token lanes, for a few dozen tokens.
 *
 * The panel product (matmul_avx512.c) puts 32 rows in a register's lanes,
 * so it must transpose every weight into a k-major panel first. At 32
 * tokens a panel serves only three 12-token tiles, and the packing took 35%
 * of the product: one core, bf16 1024 x 7168, 104-106 GFLOP/s with packing
 * against 160-165 with it skipped (a timing hack, wrong results).
 *
 * Here the lanes hold tokens instead. The activations are transposed once
 * per call (Xt: per block of 32 tokens, k-major, tokens past T zero), which
 * every row then shares; the weights are only decoded, row by row, by the
 * AVX2 row decoder (no transpose). A tile is 12 rows x 32 tokens (24 zmm):
 * per k it loads the tokens' two vectors and broadcasts each row's weight.
 * That alone gained nothing in the model: with the weights coming from
 * memory, the decode (where nothing overlaps the read) took what the
 * transposes had (perf, v32k real slice, 32 tokens: tok_rows 27.5% and the
 * row decoder 21% of samples). So the tiles also fetch the next chunk's
 * rows into L2 as they run. Prefill of 32 tokens on the v32k real slice,
 * anonymous weights, 3 alternating rounds: 2 threads 16.1-17.5 -> 17.6-18.7,
 * 1 thread 8.5-8.9 -> 9.5-9.6 tok/s.
 *
 * bf16 rows skip the decode: the tiles broadcast each weight straight from the
 * row and widen it there (bf16_lanes), one more instruction per weight and row
 * where the FMAs leave room, and the rows stream into the tiles. The decoder
 * had taken 14% of a 32-token prefill's samples on the real slice beside 18%
 * for the tiles; one core, bf16 4096 x 7168 at 32 tokens from memory, 164-175
 * -> 187-247 GFLOP/s. Other formats are still decoded first.
 *
 * Each output Y[t, r] is still the panel tile's chain: one FMA per k, in
 * column order, from zero, of the same decoded weight and the same x
 * (column chunks store and reload the f32 partial sum exactly), so the bits
 * are those of k3_matmul_avx2 and k3_matmul_avx512 (tested), whichever of
 * the two layouts a product takes. */
#include "kernels/avx2.h"
#include "kernels/runtime.h"
#include "kernels/avx512.h"
#include "kernels/l2fetch.h"
#include "kernels/panel.h"
#include "kernels/scratch.h"

#include <immintrin.h>
#include <omp.h>
#include <string.h>

#define K3_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define K3_AVX512_INLINE                                                                           \
    static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx2,fma,"       \
                                                       "f16c")))

/* A tile is TOK_ROWS rows x TOK_LANES tokens; a thread's claim is BLOCK_ROWS
 * rows (four tiles), decoded once per column chunk of TOK_COLS, so that the
 * tokens' chunk is read from L2 once per 48 rows, not per tile. */
enum { TOK_ROWS = 12, BLOCK_ROWS = 48, TOK_LANES = 32, TOK_COLS = 1024 };

/* Xt[b][k][32] = X[32 b + l, k] for the T tokens, zero past T: 8 x 8 blocks
 * through k3_transpose8, the ragged edges one by one. */
K3_AVX512 static void transpose_tokens(const float *X, int64_t T, int64_t K, float *Xt) {
    const int64_t nb = (T + TOK_LANES - 1) / TOK_LANES, K8 = K / 8 * 8;
    memset(Xt, 0, sizeof(float) * (size_t)(nb * K * TOK_LANES));
    for (int64_t t0 = 0; t0 < T; t0 += 8) {
        float *dst = Xt + t0 / TOK_LANES * K * TOK_LANES + t0 % TOK_LANES;
        const float *src = X + t0 * K;
        if (T - t0 >= 8) {
            for (int64_t k = 0; k < K8; k += 8)
                k3_transpose8(src + k, K, dst + k * TOK_LANES, TOK_LANES);
            for (int64_t k = K8; k < K; k++)
                for (int l = 0; l < 8; l++) dst[k * TOK_LANES + l] = src[l * K + k];
        } else {
            for (int l = 0; l < T - t0; l++)
                for (int64_t k = 0; k < K; k++) dst[k * TOK_LANES + l] = src[l * K + k];
        }
    }
}

/* out[i][0..32) (+)= sum over k < K of Xt[k][0..32) * Wf[i][k] for rows i < NR,
 * the second 16 tokens only when NV is 2 (both compile-time constants after
 * inlining); from zero, or (acc) from the partial sums in out. */
#define ACC(i)                                                                                     \
    __m512 a##i = _mm512_setzero_ps(), b##i = a##i;                                                \
    if (acc && NR > i) {                                                                           \
        a##i = _mm512_load_ps(out + i * TOK_LANES);                                                \
        if (NV > 1) b##i = _mm512_load_ps(out + i * TOK_LANES + 16);                               \
    }
#define ROW(i)                                                                                     \
    do {                                                                                           \
        if (NR > i) {                                                                              \
            __m512 w = BF ? bf16_lanes(Wb + i * ldw + 2 * k) : _mm512_set1_ps(Wf[i * ldw + k]);    \
            a##i = _mm512_fmadd_ps(x0, w, a##i);                                                   \
            if (NV > 1) b##i = _mm512_fmadd_ps(x1, w, b##i);                                       \
        }                                                                                          \
    } while (0)
#define OUT(i)                                                                                     \
    do {                                                                                           \
        if (NR > i) {                                                                              \
            _mm512_store_ps(out + i * TOK_LANES, a##i);                                            \
            if (NV > 1) _mm512_store_ps(out + i * TOK_LANES + 16, b##i);                           \
        }                                                                                          \
    } while (0)
/* The bf16 weight at p in every f32 lane: its 16 bits broadcast to every 16-bit
 * lane, the low half of each 32-bit lane cleared, which is the f32 it stands for. */
K3_AVX512_INLINE __m512 bf16_lanes(const uint8_t *p) {
    uint16_t b;
    memcpy(&b, p, 2); /* rows need not be 2-byte aligned */
    return _mm512_castsi512_ps(
        _mm512_and_si512(_mm512_set1_epi16((short)b), _mm512_set1_epi32((int)0xffff0000u)));
}

/* BF (a constant): the rows are bf16 as stored (Wb, ldw bytes apart), each weight
 * widened where it is broadcast, instead of f32 rows decoded before (Wf, ldw floats). */
K3_AVX512_INLINE void tok_tile(const float *Wf, const uint8_t *Wb, int BF, int64_t ldw,
                               const float *Xt, int64_t K, int acc, int NR, int NV, float *out,
                               k3_l2fetch pf) {
    ACC(0) ACC(1) ACC(2) ACC(3) ACC(4) ACC(5) ACC(6) ACC(7) ACC(8) ACC(9) ACC(10) ACC(11);
    for (int64_t k = 0; k < K; k++) {
        k3_l2fetch_step(&pf);
        const __m512 x0 = _mm512_load_ps(Xt + k * TOK_LANES);
        const __m512 x1 = NV > 1 ? _mm512_load_ps(Xt + k * TOK_LANES + 16) : x0;
        ROW(0);
        ROW(1);
        ROW(2);
        ROW(3);
        ROW(4);
        ROW(5);
        ROW(6);
        ROW(7);
        ROW(8);
        ROW(9);
        ROW(10);
        ROW(11);
    }
    OUT(0);
    OUT(1);
    OUT(2);
    OUT(3);
    OUT(4);
    OUT(5);
    OUT(6);
    OUT(7);
    OUT(8);
    OUT(9);
    OUT(10);
    OUT(11);
}
#undef ACC
#undef ROW
#undef OUT

/* One instantiation per (rows, token vectors), so each keeps only the
 * accumulators it uses. */
#define TOK_TILE_ANY(NAME, BF, WT)                                                                 \
    K3_AVX512 static void NAME(const WT *W, int64_t ldw, const float *Xt, int64_t K, int acc,      \
                               int nr, int nv, float *out, k3_l2fetch pf) {                        \
        const float *Wf = BF ? NULL : (const float *)(const void *)W;                              \
        const uint8_t *Wb = BF ? (const uint8_t *)(const void *)W : NULL;                          \
        switch (nr) {                                                                              \
            TOK_CASE(12, BF);                                                                      \
            TOK_CASE(11, BF);                                                                      \
            TOK_CASE(10, BF);                                                                      \
            TOK_CASE(9, BF);                                                                       \
            TOK_CASE(8, BF);                                                                       \
            TOK_CASE(7, BF);                                                                       \
            TOK_CASE(6, BF);                                                                       \
            TOK_CASE(5, BF);                                                                       \
            TOK_CASE(4, BF);                                                                       \
            TOK_CASE(3, BF);                                                                       \
            TOK_CASE(2, BF);                                                                       \
        default:                                                                                   \
            TOK_CASE(1, BF);                                                                       \
        }                                                                                          \
    }
#define TOK_CASE(n, BF)                                                                            \
    case n:                                                                                        \
        if (nv > 1)                                                                                \
            tok_tile(Wf, Wb, BF, ldw, Xt, K, acc, n, 2, out, pf);                                  \
        else                                                                                       \
            tok_tile(Wf, Wb, BF, ldw, Xt, K, acc, n, 1, out, pf);                                  \
        return
TOK_TILE_ANY(tok_tile_any, 0, float)
TOK_TILE_ANY(tok_tile_any_bf16, 1, uint8_t)
#undef TOK_CASE
#undef TOK_TILE_ANY

/* The prefetch share of tile g (rows g .. g+11 of the block) in the chunk
 * that follows: rows [nr0, nr0 + nn) of W, columns [c1, c1 + kn1), spread
 * over the tile's kn iterations. */
static k3_l2fetch tok_share(const k3_wmat *W, int64_t nr0, int nn, int64_t c1, int64_t kn1, int g,
                            int64_t kn) {
    const k3_l2fetch none = {0};
    const int rows = nn - g < TOK_ROWS ? nn - g : TOK_ROWS;
    if (rows <= 0 || kn1 <= 0) return none;
    const int64_t bits = k3_wmat_weight_bits(W);
    return k3_l2fetch_rows(W->data + (size_t)(nr0 + g) * W->row_stride + (size_t)(c1 * bits / 8),
                           W->row_stride, (size_t)((kn1 * bits + 7) / 8), rows, kn);
}

/* Rows [r0, r0+nr) (nr <= 48) of Y for all T tokens: per column chunk, the
 * rows are decoded (row-major, no transpose), then every 32-token block runs
 * the tiles of 12 rows over them, continuing the partial sums of the
 * previous chunk. The weights come from memory in the decode, where nothing
 * else runs, so the first token block's tiles fetch the next chunk's rows
 * into L2 as they go (after the last chunk, the next block's first). */
K3_AVX512 static void tok_rows(const k3_wmat *W, int64_t r0, int nr, const float *Xt, int64_t T,
                               float *Y) {
    const int64_t K = W->cols, R = W->rows, kc = k3_prefill_chunk_cols(W, TOK_COLS),
                  ldw = k3_round8(kc) + 16;
    const int64_t nb = (T + TOK_LANES - 1) / TOK_LANES, per_b = BLOCK_ROWS * TOK_LANES;
    float *buf =
        k3_scratch(K3_SCRATCH_PANEL, sizeof(float) * (size_t)(BLOCK_ROWS * ldw + nb * per_b));
    float *Wf = buf, *part = buf + BLOCK_ROWS * ldw; /* part[b][48][32]: the partial sums */
    /* bf16 rows are read as stored, each weight widened in the tile (no decode pass) */
    const int bf = W->fmt == K3_W_BF16;
    const int64_t ldb = (int64_t)W->row_stride;
    for (int64_t c0 = 0; c0 < K; c0 += kc) {
        const int64_t kn = K - c0 < kc ? K - c0 : kc;
        const k3_wmat V = kn == K ? *W : k3_wmat_cols(W, c0, kn);
        if (!bf)
            for (int i = 0; i < nr; i++) k3_avx2_decode_row(&V, r0 + i, Wf + i * ldw);
        /* what follows: this block's next chunk, or the next block's first */
        const int last = c0 + kc >= K;
        const int64_t nr0 = last ? r0 + BLOCK_ROWS : r0, c1 = last ? 0 : c0 + kc;
        const int nn = last ? (R - nr0 < BLOCK_ROWS ? (int)(R - nr0) : BLOCK_ROWS) : nr;
        const int64_t kn1 = K - c1 < kc ? K - c1 : kc;
        for (int64_t b = 0; b < nb; b++) {
            const int nv = T - b * TOK_LANES > 16 ? 2 : 1;
            for (int g = 0; g < nr; g += TOK_ROWS) {
                const k3_l2fetch none = {0};
                const float *xt = Xt + (b * K + c0) * TOK_LANES;
                const int n = nr - g < TOK_ROWS ? nr - g : TOK_ROWS;
                float *o = part + b * per_b + g * TOK_LANES;
                const k3_l2fetch pf = b == 0 ? tok_share(W, nr0, nn, c1, kn1, g, kn) : none;
                if (bf)
                    tok_tile_any_bf16(W->data + (r0 + g) * ldb + 2 * c0, ldb, xt, kn, c0 > 0, n, nv,
                                      o, pf);
                else
                    tok_tile_any(Wf + g * ldw, ldw, xt, kn, c0 > 0, n, nv, o, pf);
            }
        }
    }
    for (int64_t t = 0; t < T; t++) {
        const float *p = part + t / TOK_LANES * per_b + t % TOK_LANES;
        for (int i = 0; i < nr; i++) Y[t * R + r0 + i] = p[i * TOK_LANES];
    }
}

/* The OpenMP region lives in this plain function (see k3_parallel_rows). */
void k3_matmul_tok_avx512(const k3_wmat *W, const float *X, int64_t T, float *Y) {
    const int64_t R = W->rows, K = W->cols, nblocks = (R + BLOCK_ROWS - 1) / BLOCK_ROWS;
    const int64_t nb = (T + TOK_LANES - 1) / TOK_LANES;
    float *Xt = k3_scratch(K3_SCRATCH_XTOK, sizeof(float) * (size_t)(nb * K * TOK_LANES));
    transpose_tokens(X, T, K, Xt); /* once, shared by the threads */
    if (R * K * T < 65536 || nblocks == 1 || k3_kernels_serial()) {
        for (int64_t r0 = 0; r0 < R; r0 += BLOCK_ROWS)
            tok_rows(W, r0, R - r0 < BLOCK_ROWS ? (int)(R - r0) : BLOCK_ROWS, Xt, T, Y);
        return;
    }
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t b = 0; b < nblocks; b++) {
        int64_t r0 = b * BLOCK_ROWS;
        tok_rows(W, r0, R - r0 < BLOCK_ROWS ? (int)(R - r0) : BLOCK_ROWS, Xt, T, Y);
    }
}
