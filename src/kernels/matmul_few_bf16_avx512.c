/* matmul_few_bf16_avx512.c — the AVX-512 few-token product on bf16 weights
 * (the dense layers and lm_head of a batched decode step: 2..8 tokens).
 *
 * A bf16 is the top half of an f32, so 32 weights (64 bytes, 16 dwords) are
 * two f32 vectors without any conversion: `dword & 0xffff0000` is the odd
 * columns, `dword << 16` the even ones. The tokens' activations are
 * de-interleaved once per call to match (per 32 columns: the 16 even
 * columns, then the 16 odd ones; zeros past K), so each 32 weights cost one
 * load, one AND and one shift for all the tokens, and then 2 FMAs per token
 * (the kernel this replaces widened every 16 weights with vpmovzxwd + shift
 * per row block and token group). A tile of 4 rows x TB <= 5 tokens keeps one
 * accumulator per (row, token) (20 + 8 weights + 2 activations of the 32
 * registers); 6..10 tokens are two balanced groups; columns go in chunks so
 * the TB tokens' activations of a chunk (<= 32 KiB) stay in L1 while 16
 * rows stream through it.
 *
 * Per output the arithmetic is fixed by K alone: lane l accumulates
 * fma(even column 32j + 2l), then fma(odd column 32j + 2l + 1) for j = 0,
 * 1, ... in order from zero (zero-masked past K), and the 16 lanes are then
 * summed by the tree of reduce16 (few_reduce_avx512.h). So token t's result
 * does not depend on T, the tile, the row range or the threads; it differs
 * from the one-token matvec and the panel tile in rounding only. */
#include "kernels/avx2.h"
#include "kernels/runtime.h"
#include "kernels/avx512.h"
#include "kernels/scratch.h"

#include <immintrin.h>

#define K3_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define K3_AVX512_INLINE                                                                           \
    static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx2,fma,"       \
                                                       "f16c")))
#include "kernels/few_reduce_avx512.h"

#define ROWS 16 /* rows per pass over a column chunk */
/* Tokens per tile: 2 rows x 8 tokens ran T = 8 at 0.7x the speed of two
 * passes of 4 x 4 (bench/kmicro.c, 16384 x 7168). Up to 5: a verify step of
 * 8 drafts (T = 9) runs as 5 + 4 instead of 3 + 3 + 3, one conversion of the
 * weights fewer; 1024 x 1024 bf16, one core, CPU time: T = 9 103 -> 115
 * GFLOP/s, T = 5 (one group instead of 3 + 2) 77 -> 111, T = 13 104 -> 121. */
#define MAX_TB 5

/* Each row's data is also fetched into L1 this many bytes ahead (512
 * columns; past a chunk's end, into the row's next chunk). The fetch of the
 * next 16 rows into L2 alone left the loads waiting: 12288 x 7168 from
 * memory, one core (bench/kmicro.c), 8 tokens 80-89 -> 92-113 GFLOP/s and 4
 * tokens 54-65 -> 74-80 (768-2048 bytes ahead measured alike). */
#define PF_ROW_AHEAD 1024

/* Columns per chunk for TB tokens: TB * KC * 4 bytes <= 32 KiB, KC % 32 == 0. */
#define KC(TB) ((int64_t)(8192 / (TB)) & ~(int64_t)31)

/* Stride of a token's prepared activations: K rounded up to 32. */
static int64_t kpad(int64_t K) {
    return (K + 31) & ~(int64_t)31;
}

/* One block of 32 columns: d[rr] holds row rr's 32 bf16 weights; each
 * 32-bit lane splits into its even column (low half, shifted up) and its odd
 * column (high half, masked), multiplied with token t's de-interleaved
 * activations x[t * ldx + 0..15] (even) and [16..31] (odd). */
K3_AVX512_INLINE void fma_block(__m512 acc[4][MAX_TB], const __m512i *d, const float *x,
                                int64_t ldx, int RB, int TB) {
    const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
    __m512 we[4], wo[4];
#pragma GCC unroll 4
    for (int rr = 0; rr < RB; rr++) {
        we[rr] = _mm512_castsi512_ps(_mm512_slli_epi32(d[rr], 16));
        wo[rr] = _mm512_castsi512_ps(_mm512_and_si512(d[rr], hi));
    }
#pragma GCC unroll 5
    for (int t = 0; t < TB; t++) {
        const __m512 xe = _mm512_loadu_ps(x + t * ldx);
        const __m512 xo = _mm512_loadu_ps(x + t * ldx + 16);
#pragma GCC unroll 4
        for (int rr = 0; rr < RB; rr++) {
            acc[rr][t] = _mm512_fmadd_ps(we[rr], xe, acc[rr][t]);
            acc[rr][t] = _mm512_fmadd_ps(wo[rr], xo, acc[rr][t]);
        }
    }
}

/* Rows [r0, r0 + nr) (nr <= ROWS) for TB tokens of xd (prepared, stride
 * ldx) into Y[t * ldy + r]; tiles of RB rows. */
K3_AVX512_INLINE void rows_tb(const k3_wmat *W, int64_t r0, int nr, const float *xd, int64_t ldx,
                              float *Y, int64_t ldy, int RB, int TB) {
    const int64_t K = W->cols, nfull = K / 32 * 32;
    const size_t rs = W->row_stride;
    const __mmask32 tail = (__mmask32)((1ull << (K - nfull)) - 1);
    __m512 keep[ROWS][MAX_TB]; /* [row][token], parked between chunks */
    for (int64_t c0 = 0; c0 < K; c0 += KC(TB)) {
        const int64_t c1 = K - c0 <= KC(TB) ? K : c0 + KC(TB);
        const int64_t cf = c1 < nfull ? c1 : nfull; /* full blocks end */
        for (int i = 0; i < nr; i += RB) {
            const uint8_t *row[4];
#pragma GCC unroll 4
            for (int rr = 0; rr < RB; rr++)
                row[rr] = W->data + (size_t)(r0 + (i + rr < nr ? i + rr : i)) * rs;
            __m512 acc[4][MAX_TB];
#pragma GCC unroll 4
            for (int rr = 0; rr < RB; rr++)
#pragma GCC unroll 5
                for (int t = 0; t < TB; t++)
                    acc[rr][t] = c0 == 0 ? _mm512_setzero_ps() : keep[i + rr][t];
            int64_t c = c0;
            for (; c < cf; c += 32) {
                __m512i d[4];
#pragma GCC unroll 4
                for (int rr = 0; rr < RB; rr++) {
                    const uint8_t *p = row[rr] + 2 * c;
                    _mm_prefetch((const char *)p + ROWS * rs, _MM_HINT_T1);
                    _mm_prefetch((const char *)p + PF_ROW_AHEAD, _MM_HINT_T0);
                    d[rr] = _mm512_loadu_si512(p);
                }
                fma_block(acc, d, xd + c, ldx, RB, TB);
            }
            if (c < c1) { /* the last 1..31 columns, zero-masked (x is zero there too) */
                __m512i d[4];
#pragma GCC unroll 4
                for (int rr = 0; rr < RB; rr++)
                    d[rr] = _mm512_maskz_loadu_epi16(tail, row[rr] + 2 * c);
                fma_block(acc, d, xd + c, ldx, RB, TB);
            }
#pragma GCC unroll 4
            for (int rr = 0; rr < RB; rr++)
#pragma GCC unroll 5
                for (int t = 0; t < TB; t++) keep[i + rr][t] = acc[rr][t];
        }
    }
    /* every (row, token) sum by the same tree: 16 rows of one token at a time */
    for (int t = 0; t < TB; t++) {
        __m512 a[16];
        for (int i = 0; i < 16; i++) a[i] = i < nr ? keep[i][t] : _mm512_setzero_ps();
        __m512 y = reduce16(a);
        _mm512_mask_storeu_ps(Y + t * ldy + r0, (__mmask16)((1u << nr) - 1), y);
    }
}

#define ROWS_TB(TB, RB)                                                                            \
    K3_AVX512 static void bf_rows_##TB(const k3_wmat *W, int64_t r0, int nr, const float *xd,      \
                                       int64_t ldx, float *Y, int64_t ldy) {                       \
        rows_tb(W, r0, nr, xd, ldx, Y, ldy, RB, TB);                                               \
    }
ROWS_TB(1, 4)
ROWS_TB(2, 4)
ROWS_TB(3, 4)
ROWS_TB(4, 4)
ROWS_TB(5, 4)

typedef void (*rows_fn)(const k3_wmat *, int64_t, int, const float *, int64_t, float *, int64_t);
static const rows_fn table[MAX_TB] = {bf_rows_1, bf_rows_2, bf_rows_3, bf_rows_4, bf_rows_5};

int64_t k3_few_bf16_prepared_floats(const k3_wmat *W, int64_t T) {
    return T * kpad(W->cols) + 16;
}

/* Per 32 columns: the 16 even ones, then the 16 odd ones, zeros past K (two
 * masked loads and two permutes per block: a verify step prepares every
 * product's activations, and the scalar loop cost 1.5% of it). */
K3_AVX512 void k3_few_bf16_prepare_into(const k3_wmat *W, const float *X, int64_t T, float *xd) {
    const int64_t K = W->cols, ld = kpad(K);
    const __m512i even =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    for (int64_t t = 0; t < T; t++) {
        const float *x = X + t * K;
        float *o = xd + t * ld;
        for (int64_t c = 0; c < ld; c += 32) {
            const int64_t n = K - c; /* columns left, 1.. */
            const __mmask16 m0 = n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1);
            const __mmask16 m1 = n >= 32 ? 0xffff : n <= 16 ? 0 : (__mmask16)((1u << (n - 16)) - 1);
            const __m512 a = _mm512_maskz_loadu_ps(m0, x + c);
            const __m512 b = _mm512_maskz_loadu_ps(m1, x + c + 16);
            _mm512_storeu_ps(o + c, _mm512_permutex2var_ps(a, even, b));
            _mm512_storeu_ps(o + c + 16, _mm512_permutex2var_ps(a, odd, b));
        }
    }
}

const float *k3_few_bf16_prepare(const k3_wmat *W, const float *X, int64_t T) {
    float *xd =
        k3_scratch(K3_SCRATCH_XPERM_T, sizeof(float) * (size_t)k3_few_bf16_prepared_floats(W, T));
    k3_few_bf16_prepare_into(W, X, T, xd);
    return xd;
}

void k3_matmul_few_bf16_rows(const k3_wmat *W, int64_t r0, int64_t r1, const float *xd, int64_t T,
                             float *Y) {
    const int64_t ld = kpad(W->cols), R = W->rows;
    for (int64_t r = r0; r < r1; r += ROWS) {
        const int nr = r1 - r < ROWS ? (int)(r1 - r) : ROWS;
        for (int64_t t = 0; t < T;) {
            const int64_t left = T - t, groups = (left + MAX_TB - 1) / MAX_TB;
            const int tb = (int)((left + groups - 1) / groups);
            table[tb - 1](W, r, nr, xd + t * ld, ld, Y + t * R, R);
            t += tb;
        }
    }
}

int k3_bf16_few_supports(const k3_wmat *W) {
    return W->fmt == K3_W_BF16 && W->cols >= K3_BF16_FEW_MIN_COLS && k3_cpu_has_avx512();
}

/* k3_parallel_rows worker: c->xp is the prepared (de-interleaved) activation. */
static void matvec_rows(const k3_rows_ctx *c, int64_t r0, int64_t r1) {
    k3_matmul_few_bf16_rows(c->W, r0, r1, c->xp, 1, c->y);
}

/* The work-stealing loops call this once per claim of a few rows, so the
 * de-interleaved x is kept across their claims (scratch.h k3_prep_buf). */
void k3_matvec_bf16_few_avx512(const k3_wmat *W, const float *x, float *y) {
    int ready;
    float *xp = k3_prep_buf(K3_PREP_BF16_FEW, x, k3_prep_shape(W->cols, 0, 0, 0),
                            sizeof(float) * (size_t)k3_few_bf16_prepared_floats(W, 1), &ready);
    if (!ready) k3_few_bf16_prepare_into(W, x, 1, xp);
    k3_rows_ctx c = {W, x, xp, NULL, y};
    k3_parallel_rows(&c, matvec_rows);
}
