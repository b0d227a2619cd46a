/* rowpar.c — canonical blocked order of sharded-to-all products (see rowpar.h). */
#include "model/rowpar.h"

#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "kernels/matmul.h"

/* Tokens per pass: bounds the per-block buffers of a long prefill. */
#define TCHUNK 256

static int blocks_for(int64_t cols_full, const k3_wmat *W) {
    int64_t g = (W->fmt == K3_W_MXFP4 || W->fmt == K3_W_AFFINE) && W->group > 0 ? W->group : 1;
    int nb = K3_ROWPAR_BLOCKS;
    while (nb > 1 && (cols_full % nb || (cols_full / nb) % g)) nb /= 2;
    return nb;
}

int k3_rowpar_local_blocks(const k3_model *m, const k3_wmat *W) {
    int N = m->tp_size > 1 ? m->tp_size : 1;
    int nb = blocks_for(W->cols * N, W);
    return nb % N == 0 ? nb / N : 1;
}

void k3_tree_init(k3_tree_sum *t, int64_t len) {
    memset(t, 0, sizeof *t);
    t->len = len;
}

void k3_tree_add(k3_tree_sum *t, const float *leaf) {
    float *cur = k3_xmalloc(sizeof(float) * (size_t)(t->len ? t->len : 1));
    memcpy(cur, leaf, sizeof(float) * (size_t)t->len);
    int lvl = 0;
    while (lvl < 31 && t->slot[lvl]) { /* binary counter: merge equal-sized subtrees */
        for (int64_t i = 0; i < t->len; i++) cur[i] = t->slot[lvl][i] + cur[i];
        free(t->slot[lvl]);
        t->slot[lvl++] = NULL;
    }
    t->slot[lvl] = cur;
}

void k3_tree_finish(k3_tree_sum *t, float *out) {
    float *acc = NULL;
    for (int lvl = 0; lvl < 32; lvl++) {
        if (!t->slot[lvl]) continue;
        if (acc) {
            for (int64_t i = 0; i < t->len; i++) acc[i] = t->slot[lvl][i] + acc[i];
            free(t->slot[lvl]);
        } else {
            acc = t->slot[lvl];
        }
        t->slot[lvl] = NULL;
    }
    if (acc)
        memcpy(out, acc, sizeof(float) * (size_t)t->len);
    else
        memset(out, 0, sizeof(float) * (size_t)t->len);
    free(acc);
}

void k3_tree_reduce(float *const *parts, int n, int64_t len) {
    for (int s = 1; s < n; s *= 2)
        for (int i = 0; i + s < n; i += 2 * s)
            for (int64_t j = 0; j < len; j++) parts[i][j] = parts[i][j] + parts[i + s][j];
}

void k3_rowpar_matmul(const k3_model *m, const k3_wmat *W, const float *X, int64_t T, float *Y) {
    int nb = k3_rowpar_local_blocks(m, W);
    if (nb == 1) {
        k3_matmul(W, X, T, Y);
        return;
    }
    int64_t bc = W->cols / nb, R = W->rows, tc = T < TCHUNK ? T : TCHUNK;
    float *xb = k3_xmalloc(sizeof(float) * (size_t)(tc * bc));
    float *yb = k3_xmalloc(sizeof(float) * (size_t)(tc * R));
    for (int64_t t0 = 0; t0 < T; t0 += tc) {
        int64_t n = T - t0 < tc ? T - t0 : tc;
        k3_tree_sum acc;
        k3_tree_init(&acc, n * R);
        for (int b = 0; b < nb; b++) {
            k3_wmat Wb = k3_wmat_cols(W, b * bc, bc);
            for (int64_t t = 0; t < n; t++)
                memcpy(xb + t * bc, X + (t0 + t) * W->cols + b * bc, sizeof(float) * (size_t)bc);
            k3_matmul(&Wb, xb, n, yb);
            k3_tree_add(&acc, yb);
        }
        k3_tree_finish(&acc, Y + t0 * R);
    }
    free(xb);
    free(yb);
}
