/* mla_tile_impl.h — the block step of the tiled MLA attention (mla_tile.h),
 * written once over a vector type and instantiated by mla_tile_avx512.c and
 * mla_tile_avx2.c (internal to src/kernels). The includer defines:
 *   TILE_FN(name)  the function's name with the ISA suffix
 *   TILE_ATTR      the target attribute of every function here
 *   TILE_INLINE    static inline always_inline with that target
 *   vf, vmask, VW  vector type, lane mask type, lanes
 *   VZERO, VLOAD(p), VLOADM(p, k), VSTORE(p, v), VSTOREM(p, k, v), VFMA(a, b, c),
 *   VMUL(a, b), VADD(a, b), VSUB(a, b), VMAX(a, b), VSET1(x),
 *   VMASK(n)       (the first min(n, VW) lanes, n >= 0)
 *   SV, ST         row vectors x tokens of the score tile, WR, WC rows x
 *                  vectors of the value tile (sized to the register file)
 *
 * A group's rows sit in the lanes of its transposed queries, so the scores
 * are an outer product per dimension: one broadcast cached value times SV
 * vectors of rows, no horizontal sums, and the online softmax runs on whole
 * vectors of rows. The weighted sum broadcasts each row's weight against
 * vectors of the cached row. Every lane's (row's) numbers come from the same
 * instructions wherever it sits (padding rows and tokens repeat or zero a real
 * one and are discarded), so a row's result depends on its data and the block
 * bounds only. Tokens past a row's length score -inf and weigh exactly 0, and
 * a block wholly past it (taken because another row of the group reaches it)
 * scales the row's sums by exp(0) = 1 and adds 0 to them: its sums stay
 * bitwise as they were (the cached values being finite), so the bounds of
 * blocks past a row's length do not matter either. */
#include "kernels/mla_tile.h"
#include "kernels/vmath.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* Scores of nv row vectors from v0 against the ST tokens at yk (keys) and yp
 * (shared keys): S[t * gp + lane] = scale * (q . K[t] + qp . P[t]), the sum
 * one fused chain per lane over the dimensions in order. */
TILE_INLINE void TILE_FN(score_tile)(const k3_mla_tile_args *a, const k3_tile_group *gr, int nv,
                                     int v0, const float *const *yk, const float *const *yp,
                                     float *S) {
    vf acc[SV * ST];
#pragma GCC unroll 32
    for (int i = 0; i < SV * ST; i++) acc[i] = VZERO;
    const int64_t ld = gr->gp;
    const float *qt = gr->qt + v0 * VW;
    for (int k = 0; k < a->dk; k++, qt += ld) {
        vf x[SV];
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) x[v] = VLOAD(qt + v * VW);
#pragma GCC unroll 8
        for (int t = 0; t < ST; t++) {
            vf y = VSET1(yk[t][k]);
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++) acc[v * ST + t] = VFMA(x[v], y, acc[v * ST + t]);
        }
    }
    for (int k = 0; k < a->dp; k++, qt += ld) {
        vf x[SV];
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) x[v] = VLOAD(qt + v * VW);
#pragma GCC unroll 8
        for (int t = 0; t < ST; t++) {
            vf y = VSET1(yp[t][k]);
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++) acc[v * ST + t] = VFMA(x[v], y, acc[v * ST + t]);
        }
    }
    vf sc = VSET1(a->scale);
#pragma GCC unroll 8
    for (int t = 0; t < ST; t++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) VSTORE(S + t * ld + (v0 + v) * VW, VMUL(sc, acc[v * ST + t]));
}

/* The scores of every lane of the group against cached rows [j0, j0 + jn),
 * ST tokens a tile (the last tile repeats the last token; its extra rows of S
 * are never read). */
TILE_ATTR static void TILE_FN(scores)(const k3_mla_tile_args *a, const k3_tile_group *gr,
                                      int64_t j0, int jn, float *S) {
    const int nvec = gr->gp / VW;
    for (int t0 = 0; t0 < jn; t0 += ST) {
        const float *yk[ST], *yp[ST];
        for (int t = 0; t < ST; t++) {
            int64_t j = j0 + (t0 + t < jn ? t0 + t : jn - 1);
            yk[t] = a->K + j * a->ldk, yp[t] = a->P + j * a->ldp;
        }
        float *St = S + (int64_t)t0 * gr->gp;
        for (int v0 = 0; v0 < nvec; v0 += SV) {
            int nv = nvec - v0 < SV ? nvec - v0 : SV;
            if (nv == SV) /* constant row-vector counts: the tile stays in registers */
                TILE_FN(score_tile)(a, gr, SV, v0, yk, yp, St);
            else if (nv == 2)
                TILE_FN(score_tile)(a, gr, 2, v0, yk, yp, St);
            else
                TILE_FN(score_tile)(a, gr, 1, v0, yk, yp, St);
        }
    }
}

/* Online softmax of the block, a vector of rows at a time: scores past a
 * row's length become -inf, the running max moves to mnew, the scores become
 * weights exp(s - mnew) in place, alpha = exp(old max - mnew) is the factor the
 * row's running sums take, and the weight sums are updated. A row with no
 * valid score yet keeps max -inf; -FLT_MAX stands in for it in the
 * exponents, so its weights and alpha are 0, never NaN. */
TILE_ATTR static void TILE_FN(softmax)(k3_tile_group *gr, int64_t j0, int jn, float *S,
                                       float *alpha) {
    const int gp = gr->gp;
    for (int i = 0; i < gr->g; i++) {
        int64_t jv = gr->len[i] - j0;
        for (int64_t t = jv < 0 ? 0 : jv; t < jn; t++) S[t * gp + i] = -INFINITY;
    }
    for (int v = 0; v < gp; v += VW) {
        vf mold = VLOAD(gr->mx + v), m = mold;
        for (int t = 0; t < jn; t++) m = VMAX(m, VLOAD(S + t * gp + v));
        VSTORE(gr->mx + v, m);
        vf mu = VMAX(m, VSET1(-FLT_MAX));
        VSTORE(alpha + v, VSUB(mold, mu));
        for (int t = 0; t < jn; t++) VSTORE(S + t * gp + v, VSUB(VLOAD(S + t * gp + v), mu));
    }
    k3_vexp(S, S, (int64_t)jn * gp);
    k3_vexp(alpha, alpha, gp);
    for (int v = 0; v < gp; v += VW) {
        vf s = VMUL(VLOAD(gr->sum + v), VLOAD(alpha + v));
        for (int t = 0; t < jn; t++) s = VADD(s, VLOAD(S + t * gp + v));
        VSTORE(gr->sum + v, s);
    }
}

/* Rows [r0, r0 + wr) (past g: repeats of the last row, discarded), columns
 * [c0, c0 + WC*VW) under masks m: acc = alpha acc + sum_j S[j][row] V[j0 + j]. */
TILE_INLINE void TILE_FN(wsum_tile)(const k3_mla_tile_args *a, const k3_tile_group *gr, int wr,
                                    int r0, int c0, const vmask *m, int64_t j0, int jn,
                                    const float *S, const float *alpha) {
    int ri[WR];
    for (int r = 0; r < wr; r++) ri[r] = r0 + r < gr->g ? r0 + r : gr->g - 1;
    vf acc[WR * WC];
#pragma GCC unroll 8
    for (int r = 0; r < wr; r++) {
        vf al = VSET1(alpha[ri[r]]);
#pragma GCC unroll 8
        for (int c = 0; c < WC; c++)
            acc[r * WC + c] = VMUL(al, VLOADM(gr->acc[ri[r]] + c0 + c * VW, m[c]));
    }
    const float *vrow = a->V + j0 * a->ldv + c0, *s = S;
    for (int j = 0; j < jn; j++, vrow += a->ldv, s += gr->gp) {
        vf v[WC];
#pragma GCC unroll 8
        for (int c = 0; c < WC; c++) v[c] = VLOADM(vrow + c * VW, m[c]);
#pragma GCC unroll 8
        for (int r = 0; r < wr; r++) {
            vf p = VSET1(s[ri[r]]);
#pragma GCC unroll 8
            for (int c = 0; c < WC; c++) acc[r * WC + c] = VFMA(p, v[c], acc[r * WC + c]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < wr; r++) /* constant indices: acc stays in registers */
#pragma GCC unroll 8
        for (int c = 0; c < WC; c++)
            if (r0 + r < gr->g) VSTOREM(gr->acc[r0 + r] + c0 + c * VW, m[c], acc[r * WC + c]);
}

/* acc_i = alpha_i acc_i + sum_j S[j][i] V[j0 + j] for the group's rows: the
 * value tile is WR rows x WC vectors (half as many rows where the group's row
 * count is a multiple of that and not of WR, so no tile computes padding),
 * columns outer so a slice of the block's values stays in L1 while every row
 * takes it. */
TILE_ATTR static void TILE_FN(wsum)(const k3_mla_tile_args *a, const k3_tile_group *gr, int64_t j0,
                                    int jn, const float *S, const float *alpha) {
    const int dv = a->dv, half = gr->g % WR != 0 && gr->g % (WR / 2) == 0;
    for (int c0 = 0; c0 < dv; c0 += WC * VW) {
        vmask m[WC];
#pragma GCC unroll 8
        for (int c = 0; c < WC; c++) {
            int left = dv - c0 - c * VW;
            m[c] = VMASK(left > 0 ? left : 0);
        }
        if (half)
            for (int r0 = 0; r0 < gr->g; r0 += WR / 2)
                TILE_FN(wsum_tile)(a, gr, WR / 2, r0, c0, m, j0, jn, S, alpha);
        else
            for (int r0 = 0; r0 < gr->g; r0 += WR)
                TILE_FN(wsum_tile)(a, gr, WR, r0, c0, m, j0, jn, S, alpha);
    }
}

TILE_ATTR void TILE_FN(k3_mla_tile_block)(const k3_mla_tile_args *a, k3_tile_group *gr, int64_t j0,
                                          int64_t j1) {
    float S[K3_TILE_TOK * K3_TILE_GROUP] __attribute__((aligned(64)));
    float alpha[K3_TILE_GROUP] __attribute__((aligned(64)));
    int jn = (int)(j1 - j0);
    TILE_FN(scores)(a, gr, j0, jn, S);
    TILE_FN(softmax)(gr, j0, jn, S, alpha);
    TILE_FN(wsum)(a, gr, j0, jn, S, alpha);
}
