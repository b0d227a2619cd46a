/* matmul.c — kernel dispatch for k3_matvec / k3_matmul and their serial,
 * few-token and column-block forms.
 *
 * Each entry looks up W's format in the per-format table of the active
 * kernel family (table.h: the AVX2 kernels, the AVX-512 ones on top, or the
 * scalar reference) and runs the kernel it names for the product; where the
 * family's kernels do not take W's shape, the reference. K3_KERNELS=ref or
 * k3_kernels_set_mode(K3_KERNELS_REF) forces the reference (tests,
 * debugging).
 *
 * The serial entries set the per-thread flag of runtime.h that the kernels'
 * parallel loops read (k3_kernels_serial): the same code runs, on this thread only, so the
 * bits are those of the threaded entries. */
#include "kernels/matmul.h"
#include "kernels/runtime.h"
#include "kernels/scratch.h"
#include "kernels/table.h"

#include <omp.h>

/* W's row of the table if the active family's kernels take W, else NULL
 * (the reference runs). */
static const k3_fmt_kernels *fast(const k3_wmat *W) {
    const k3_fmt_kernels *k = k3_kernels_for(W);
    return k->takes && k->takes(W) ? k : NULL;
}

/* The first tier that takes W (the last one takes all). */
static k3_mv_fn pick_matvec(const k3_mv_tier *t, const k3_wmat *W) {
    while (t->takes && !t->takes(W)) t++;
    return t->fn;
}

void k3_matvec(const k3_wmat *W, const float *x, float *y) {
    if (W->rows <= 0) return;
    const k3_fmt_kernels *k = fast(W);
    if (k)
        pick_matvec(k->matvec, W)(W, x, y);
    else
        k3_matvec_ref(W, x, y);
}

/* Rows are split over the threads in blocks of FEW_ROWS (dynamic: a
 * preempted thread's blocks go to the other; each row's result does not
 * depend on the split). */
#define FEW_ROWS 64

static void matmul_few_threaded(const k3_fmt_kernels *k, const k3_wmat *W, const float *X,
                                int64_t T, float *Y) {
    const int64_t R = W->rows, nb = (R + FEW_ROWS - 1) / FEW_ROWS;
    if (nb == 1 || R * W->cols * T < 65536 || k3_kernels_serial()) {
        k->few(W, X, T, Y);
        return;
    }
    const float *Xp = k->few_rows->prepare(W, X, T); /* once, shared by the threads */
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t b = 0; b < nb; b++)
        k->few_rows->rows(W, b * FEW_ROWS,
                          b * FEW_ROWS + FEW_ROWS < R ? b * FEW_ROWS + FEW_ROWS : R, Xp, T, Y);
}

void k3_matmul(const k3_wmat *W, const float *X, int64_t T, float *Y) {
    if (W->rows <= 0 || T <= 0) return;
    const k3_fmt_kernels *k = fast(W);
    if (!k)
        k3_matmul_ref(W, X, T, Y);
    else if (T == 1)
        pick_matvec(k->matvec, W)(W, X, Y);
    else if (T <= k->few_tokens)
        matmul_few_threaded(k, W, X, T, Y);
    else
        k->matmul(W, X, T, Y);
}

void k3_matvec_serial(const k3_wmat *W, const float *x, float *y) {
    k3_kernels_serial_enter();
    k3_matvec(W, x, y);
    k3_kernels_serial_leave();
}

/* The kernel the table names for the first block's view, all blocks at
 * once; block by block where it names none or does not take the shape. */
void k3_matvec_colblocks_serial(const k3_wmat *W, int nb, const float *const *xb, float *const *y) {
    if (W->rows <= 0 || nb <= 0) return;
    const int64_t bc = W->cols / nb;
    k3_wmat one = k3_wmat_cols(W, 0, bc); /* the view k3_matvec would see */
    const k3_fmt_kernels *k = fast(&one);
    if (k) {
        const k3_cb_tier *t = k->colblocks;
        while (t->takes && !t->takes(&one)) t++;
        if (t->fn && t->fn(W, nb, xb, y)) return;
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
    const k3_fmt_kernels *k = fast(&v[0]);
    if (nb > K3_COLBLOCKS_MAX || !k || !k->few_rows) {
        for (int b = 0; b < nb; b++) {
            k3_wmat vb = k3_wmat_cols(W, b * bc, bc);
            k3_matmul_few(&vb, Xb[b], T, Yb[b]);
        }
        return;
    }
    const k3_few_rows_kernel *fr = k->few_rows;
    const int64_t pf = fr->prepared_floats(&v[0], T);
    float *buf = pf ? k3_scratch(K3_SCRATCH_XPERM_B, sizeof(float) * (size_t)(nb * pf)) : NULL;
    const float *xp[K3_COLBLOCKS_MAX];
    for (int b = 0; b < nb; b++) {
        v[b] = k3_wmat_cols(W, b * bc, bc);
        if (pf) fr->prepare_into(&v[b], Xb[b], T, buf + b * pf);
        xp[b] = pf ? buf + b * pf : Xb[b];
    }
    for (int64_t r = 0; r < W->rows; r += COLBLOCK_ROWS) {
        const int64_t r1 = W->rows - r < COLBLOCK_ROWS ? W->rows : r + COLBLOCK_ROWS;
        for (int b = 0; b < nb; b++) fr->rows(&v[b], r, r1, xp[b], T, Yb[b]);
    }
}

void k3_matmul_serial(const k3_wmat *W, const float *X, int64_t T, float *Y) {
    k3_kernels_serial_enter();
    k3_matmul(W, X, T, Y);
    k3_kernels_serial_leave();
}

/* The family's row-dot kernel; the reference (one dot per token and row in
 * double, which is T-independent too) where none takes W. */
void k3_matmul_few(const k3_wmat *W, const float *X, int64_t T, float *Y) {
    if (W->rows <= 0 || T <= 0) return;
    k3_kernels_serial_enter();
    const k3_fmt_kernels *k = fast(W);
    if (k)
        k->few(W, X, T, Y);
    else
        k3_matmul_ref(W, X, T, Y);
    k3_kernels_serial_leave();
}
