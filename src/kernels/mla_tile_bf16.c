/* mla_tile_bf16.c — the scalar double reference of the tiled MLA attention
 * over a bf16 cache (mla_tile.h: K16, V16, P16): the same sums as the f32
 * reference in mla_tile.c, each cached value read as bf16 and widened
 * exactly. The fast path is the f32 block step on widened blocks
 * (mla_tile_bf16_impl.h). */
#include "kernels/mla_tile.h"
#include "quant/dtype.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Row i = (h, t) of a, as mla_tile.c numbers them. */
static int64_t row_len(const k3_mla_tile_args *a, int64_t i) {
    int64_t len = a->off + i % a->nt + 1;
    return len < a->n ? len : a->n;
}

/* Row i's score against cached row j, in double. */
static double score(const k3_mla_tile_args *a, int64_t i, int64_t j) {
    const float *q = a->q + (i / a->nt) * a->q_h + (i % a->nt) * a->q_t;
    const uint16_t *k = a->K16 + j * a->ldk;
    double d = 0;
    for (int c = 0; c < a->dk; c++) d += (double)q[c] * k3_bf16_to_f32(k[c]);
    if (a->dp) {
        const float *qp = a->qp + (i / a->nt) * a->qp_h + (i % a->nt) * a->qp_t;
        const uint16_t *p = a->P16 + j * a->ldp;
        for (int c = 0; c < a->dp; c++) d += (double)qp[c] * k3_bf16_to_f32(p[c]);
    }
    return d * a->scale;
}

/* Row i's output: max score, then the weights and their sum in double. */
static void row_ref(const k3_mla_tile_args *a, int64_t i, double *acc) {
    int64_t len = row_len(a, i);
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < len; j++) {
        double d = score(a, i, j);
        mx = d > mx ? d : mx;
    }
    for (int64_t j = 0; j < len; j++) {
        double w = exp(score(a, i, j) - mx);
        const uint16_t *v = a->V16 + j * a->ldv;
        sum += w;
        for (int c = 0; c < a->dv; c++) acc[c] += w * k3_bf16_to_f32(v[c]);
    }
    float *o = a->out + (i / a->nt) * a->o_h + (i % a->nt) * a->o_t;
    for (int c = 0; c < a->dv; c++) o[c] = (float)(acc[c] / sum);
}

void k3_mla_tile_ref_bf16(const k3_mla_tile_args *a) {
    double *acc = malloc(sizeof(double) * (size_t)(a->dv > 0 ? a->dv : 1));
    if (!acc) abort();
    for (int64_t i = 0; i < a->nh * a->nt; i++) {
        memset(acc, 0, sizeof(double) * (size_t)a->dv);
        row_ref(a, i, acc);
    }
    free(acc);
}
