/* mla_tile_bf16_impl.h — the block step of the tiled MLA attention over a
 * bf16 cache (mla_tile.h), instantiated by mla_tile_bf16_avx512.c and
 * mla_tile_bf16_avx2.c (internal to src/kernels). The includer defines:
 *   TILE_FN(name)  the function's name with the ISA suffix
 *   TILE_ATTR      the target attribute of every function here
 *   WIDEN(d, s, n) d[0..n) = the bf16 s[0..n) as f32 (exact)
 *
 * The block's cached rows are widened once into a stage on the stack, then
 * the f32 step (mla_tile_impl.h) scores and sums them with every row of the
 * group. Widening once per block and group costs one conversion per cached
 * value per 16 rows, where converting inside the tiles would redo it for
 * every 4 rows; the bytes read from memory, which bound long contexts, are
 * halved either way. */
#include "kernels/mla_tile.h"

#include <stdlib.h>

#define STAGE_FLOATS (K3_TILE_TOK * 640) /* 80 KiB: a whole block at K3's 512 + 64 */

/* Widen rows [s0, s0 + tn) of the bf16 cache into K, P (and V unless it is K). */
TILE_ATTR static void TILE_FN(stage_rows)(const k3_mla_tile_args *a, int64_t s0, int64_t tn,
                                          float *K, float *P, float *V) {
    for (int64_t t = 0; t < tn; t++) {
        WIDEN(K + t * a->dk, a->K16 + (s0 + t) * a->ldk, a->dk);
        if (a->dp) WIDEN(P + t * a->dp, a->P16 + (s0 + t) * a->ldp, a->dp);
        if (V != K) WIDEN(V + t * a->dv, a->V16 + (s0 + t) * a->ldv, a->dv);
    }
}

TILE_ATTR void TILE_FN(k3_mla_tile_block_bf16)(const k3_mla_tile_args *a, k3_tile_group *gr,
                                               int64_t j0, int64_t j1) {
    int shared = a->V16 == a->K16 && a->ldv == a->ldk && a->dv == a->dk; /* absorbed: K = V */
    int64_t width = a->dk + a->dp + (shared ? 0 : a->dv);
    float stage_s[STAGE_FLOATS], *stage = stage_s;
    int64_t step = STAGE_FLOATS / (width > 0 ? width : 1);
    if (step > j1 - j0) step = j1 - j0;
    if (step < 1) { /* wider than any model's cache: a heap stage of one token */
        step = 1;
        stage = malloc(sizeof(float) * (size_t)width);
        if (!stage) abort();
    }
    int64_t longest = 0;
    for (int i = 0; i < gr->g; i++) longest = gr->len[i] > longest ? gr->len[i] : longest;
    for (int64_t s0 = j0; s0 < j1 && s0 < longest; s0 += step) {
        int64_t tn = j1 - s0 < step ? j1 - s0 : step;
        float *K = stage, *P = K + tn * a->dk, *V = shared ? K : P + tn * a->dp;
        TILE_FN(stage_rows)(a, s0, tn, K, P, V);
        k3_mla_tile_args b = *a;
        b.K = K, b.ldk = a->dk, b.P = P, b.ldp = a->dp, b.V = V, b.ldv = a->dv;
        b.K16 = b.V16 = b.P16 = NULL;
        b.n = tn;
        /* the stage's token 0 is cached row s0: lengths count from there meanwhile */
        for (int i = 0; i < gr->g; i++) gr->len[i] -= s0;
        TILE_FN(k3_mla_tile_block)(&b, gr, 0, tn);
        for (int i = 0; i < gr->g; i++) gr->len[i] += s0;
    }
    if (stage != stage_s) free(stage);
}
