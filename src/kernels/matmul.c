/* matmul.c — kernel dispatch for k3_matvec / k3_matmul and their serial forms.
 *
 * AVX2 kernels when the CPU has them and the format/shape is supported (see
 * avx2.h), the AVX-512 decode kernels on top where available (avx512.h),
 * otherwise the scalar reference. K3_KERNELS=ref or
 * k3_kernels_set_mode(K3_KERNELS_REF) forces the reference (tests, debugging).
 *
 * The serial entries set the per-thread flag of runtime.h that the kernels'
 * parallel loops read (k3_kernels_serial): the same code runs, on this thread only, so the
 * bits are those of the threaded entries. */
#include "kernels/matmul.h"
#include "kernels/avx2.h"
#include "kernels/avx512.h"
#include "kernels/runtime.h"
#include "kernels/matvec_i8.h"
#include "kernels/scratch.h"

#include <omp.h>

static int use_avx2(const k3_wmat *W) {
    return k3_kernels_active() != K3_KERNELS_REF && k3_avx2_supports(W);
}

/* Decode product: AVX-512 where it exists for the format, else AVX2. */
static void matvec_fast(const k3_wmat *W, const float *x, float *y) {
    if (k3_act_int8() && k3_i8_supports(W)) /* opt-in, lossy: matvec_i8.h */
        k3_matvec_i8(W, x, y);
    else if (k3_kernels_active() == K3_KERNELS_AVX512 && k3_avx512_supports(W))
        k3_matvec_avx512(W, x, y);
    else
        k3_matvec_avx2(W, x, y);
}

void k3_matvec(const k3_wmat *W, const float *x, float *y) {
    if (W->rows <= 0) return;
    if (use_avx2(W))
        matvec_fast(W, x, y);
    else
        k3_matvec_ref(W, x, y);
}

/* 2..8 tokens (batched decode; the float formats up to 16, MXFP4 up to 24)
 * on AVX-512: the few-token kernel, which reads the weights in place instead
 * of packing panels (the panel tile wins above that; on Zen 5 the few-token
 * kernel was 1.2-1.6x faster for bf16 experts of 256x512 at 9..16 tokens and
 * even on 1024x1024 and 2048x7168, while affine 4/8-bit panels stayed
 * ahead: bench/kmicro.c). For MXFP4 the token-lane kernel takes over at 25
 * (matmul_tok_avx512.c): at K3's expert shapes (384 x 3584, 3584 x 384,
 * 3072 x 3584, one core, Zen 5) the few-token kernel ran 122-141 GFLOP/s
 * from 17 to 24 tokens against 84-129 for token lanes, level at 26, behind
 * at 28. Rows are split over the threads in blocks of FEW_ROWS (dynamic: a
 * preempted thread's blocks go to the other; each row's result does not
 * depend on the split). */
#define K3_FEW_TOKENS 8
#define K3_FEW_TOKENS_FLOAT 16 /* f32/f16/bf16 */
#define K3_FEW_TOKENS_MXFP4 24
#define FEW_ROWS 64

/* The most tokens k3_matmul gives the few-token kernel, by format. */
static int64_t few_tokens_max(const k3_wmat *W) {
    switch (W->fmt) {
    case K3_W_AFFINE:
        return K3_FEW_TOKENS;
    case K3_W_MXFP4:
        return K3_FEW_TOKENS_MXFP4;
    default:
        return K3_FEW_TOKENS_FLOAT;
    }
}

static int use_few_avx512(const k3_wmat *W) {
    return k3_kernels_active() == K3_KERNELS_AVX512 && k3_few_avx512_supports(W);
}

static void matmul_few_threaded(const k3_wmat *W, const float *X, int64_t T, float *Y) {
    const int64_t R = W->rows, nb = (R + FEW_ROWS - 1) / FEW_ROWS;
    if (nb == 1 || R * W->cols * T < 65536 || k3_kernels_serial()) {
        k3_matmul_few_avx512(W, X, T, Y);
        return;
    }
    const float *Xp = k3_few_avx512_prepare(W, X, T); /* once, shared by the threads */
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t b = 0; b < nb; b++)
        k3_matmul_few_rows_avx512(
            W, b * FEW_ROWS, b * FEW_ROWS + FEW_ROWS < R ? b * FEW_ROWS + FEW_ROWS : R, Xp, T, Y);
}

void k3_matmul(const k3_wmat *W, const float *X, int64_t T, float *Y) {
    if (W->rows <= 0 || T <= 0) return;
    if (!use_avx2(W)) {
        k3_matmul_ref(W, X, T, Y);
        return;
    }
    if (T == 1)
        matvec_fast(W, X, Y);
    else if (T <= few_tokens_max(W) && use_few_avx512(W))
        matmul_few_threaded(W, X, T, Y);
    else if (k3_kernels_active() == K3_KERNELS_AVX512)
        k3_matmul_avx512(W, X, T, Y);
    else
        k3_matmul_avx2(W, X, T, Y);
}

void k3_matvec_serial(const k3_wmat *W, const float *x, float *y) {
    k3_kernels_serial_enter();
    k3_matvec(W, x, y);
    k3_kernels_serial_leave();
}

void k3_matvec_colblocks_serial(const k3_wmat *W, int nb, const float *const *xb, float *const *y) {
    if (W->rows <= 0 || nb <= 0) return;
    const int64_t bc = W->cols / nb;
    k3_wmat one = k3_wmat_cols(W, 0, bc); /* the view k3_matvec would see */
    const int fl = W->fmt == K3_W_F32 || W->fmt == K3_W_F16 || W->fmt == K3_W_BF16;
    if (fl && use_avx2(&one) && !(k3_act_int8() && k3_i8_supports(&one))) {
        k3_matvec_avx2_float_colblocks(W, nb, xb, y);
        return;
    }
    if (use_avx2(&one)) { /* the kernel matvec_fast picks for a block, all blocks at once */
        if (k3_act_int8() && k3_i8_supports(&one)) {
            if (k3_matvec_i8_colblocks_avx512(W, nb, xb, y)) return;
        } else if (k3_kernels_active() == K3_KERNELS_AVX512 && k3_avx512_supports(&one) &&
                   k3_matvec_colblocks_avx512(W, nb, xb, y)) {
            return;
        }
    }
    for (int b = 0; b < nb; b++) {
        k3_wmat v = k3_wmat_cols(W, b * bc, bc);
        k3_matvec_serial(&v, xb[b], y[b]);
    }
}

/* Rows per step of k3_matmul_few_colblocks_serial: one pass of the
 * few-token kernel. */
#define COLBLOCK_ROWS 16

void k3_matmul_few_colblocks_serial(const k3_wmat *W, int nb, const float *const *Xb, int64_t T,
                                    float *const *Yb) {
    if (W->rows <= 0 || T <= 0 || nb <= 0) return;
    const int64_t bc = W->cols / nb;
    k3_wmat v[K3_COLBLOCKS_MAX];
    v[0] = k3_wmat_cols(W, 0, bc);
    if (nb > K3_COLBLOCKS_MAX || !use_avx2(&v[0]) || !use_few_avx512(&v[0])) {
        for (int b = 0; b < nb; b++) {
            k3_wmat vb = k3_wmat_cols(W, b * bc, bc);
            k3_matmul_few(&vb, Xb[b], T, Yb[b]);
        }
        return;
    }
    const int64_t pf = k3_few_avx512_prepared_floats(&v[0], T);
    float *buf = pf ? k3_scratch(K3_SCRATCH_XPERM_B, sizeof(float) * (size_t)(nb * pf)) : NULL;
    const float *xp[K3_COLBLOCKS_MAX];
    for (int b = 0; b < nb; b++) {
        v[b] = k3_wmat_cols(W, b * bc, bc);
        if (pf) k3_few_avx512_prepare_into(&v[b], Xb[b], T, buf + b * pf);
        xp[b] = pf ? buf + b * pf : Xb[b];
    }
    for (int64_t r = 0; r < W->rows; r += COLBLOCK_ROWS) {
        const int64_t r1 = W->rows - r < COLBLOCK_ROWS ? W->rows : r + COLBLOCK_ROWS;
        for (int b = 0; b < nb; b++) k3_matmul_few_rows_avx512(&v[b], r, r1, xp[b], T, Yb[b]);
    }
}

void k3_matmul_serial(const k3_wmat *W, const float *X, int64_t T, float *Y) {
    k3_kernels_serial_enter();
    k3_matmul(W, X, T, Y);
    k3_kernels_serial_leave();
}

/* The row-dot kernel on the AVX2 formats; the reference (one dot per token
 * and row in double, which is T-independent too) otherwise. */
void k3_matmul_few(const k3_wmat *W, const float *X, int64_t T, float *Y) {
    if (W->rows <= 0 || T <= 0) return;
    k3_kernels_serial_enter();
    if (use_avx2(W) && use_few_avx512(W))
        k3_matmul_few_avx512(W, X, T, Y);
    else if (use_avx2(W))
        k3_matmul_few_avx2(W, X, T, Y);
    else
        k3_matmul_ref(W, X, T, Y);
    k3_kernels_serial_leave();
}
