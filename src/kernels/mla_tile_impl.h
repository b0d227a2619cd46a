/* mla_tile_impl.h — the block step of the tiled MLA attention (mla_tile.h),
 * written once over a vector type and instantiated by mla_tile_avx512.c and
 * mla_tile_avx2.c (internal to src/kernels). The includer defines:
 *   TILE_FN(name)  the function's name with the ISA suffix
 *   TILE_ATTR      the target attribute of every function here
 *   TILE_INLINE    static inline always_inline with that target
 *   vf, vmask, VW  vector type, lane mask type, lanes
 *   VZERO, VLOAD(p), VLOADM(p, k), VSTORE(p, v), VSTOREM(p, k, v), VFMA(a, b, c),
 *   VMUL(a, b), VSET1(x),
 *   VMASK(n)       (the first min(n, VW) lanes, n >= 0)
 *   TR, TT         rows x tokens of the score tile, VR, VC rows x vectors of
 *                  the value tile (sized to the register file)
 *   TILE_HSUM(a, o)  o[i] = horizontal sum of a[i] for the TR*TT accumulators
 *
 * Every row's numbers come from the same instructions wherever it sits in a
 * tile (padding rows and tokens repeat a real one and are discarded), so a
 * row's result depends on its data and the block bounds only. */
#include "kernels/mla_tile.h"
#include "kernels/vmath.h"

#include <math.h>
#include <string.h>

/* o[r][t] = x[r] . y[t] over d floats for TR rows and TT tokens. */
TILE_INLINE void TILE_FN(dots)(const float *const *x, const float *const *y, int d,
                               float o[TR * TT]) {
    vf acc[TR * TT];
#pragma GCC unroll 16
    for (int i = 0; i < TR * TT; i++) acc[i] = VZERO;
    int k = 0;
    for (; k + VW <= d; k += VW) {
        vf yv[TT];
#pragma GCC unroll 8
        for (int t = 0; t < TT; t++) yv[t] = VLOAD(y[t] + k);
#pragma GCC unroll 8
        for (int r = 0; r < TR; r++) {
            vf xv = VLOAD(x[r] + k);
#pragma GCC unroll 8
            for (int t = 0; t < TT; t++) acc[r * TT + t] = VFMA(xv, yv[t], acc[r * TT + t]);
        }
    }
    if (k < d) {
        vmask m = VMASK(d - k);
        vf yv[TT];
#pragma GCC unroll 8
        for (int t = 0; t < TT; t++) yv[t] = VLOADM(y[t] + k, m);
#pragma GCC unroll 8
        for (int r = 0; r < TR; r++) {
            vf xv = VLOADM(x[r] + k, m);
#pragma GCC unroll 8
            for (int t = 0; t < TT; t++) acc[r * TT + t] = VFMA(xv, yv[t], acc[r * TT + t]);
        }
    }
    TILE_HSUM(acc, o);
}

/* S[i][j] = scale * (q_i . K[j0+j] + qp_i . P[j0+j]) for the block's rows and tokens. */
TILE_ATTR static void TILE_FN(scores)(const k3_mla_tile_args *a, const k3_tile_rows *rw, int64_t j0,
                                      int jn, float S[][K3_TILE_TOK]) {
    for (int r0 = 0; r0 < rw->g; r0 += TR) {
        const float *xq[TR], *xp[TR];
        for (int r = 0; r < TR; r++) {
            int i = r0 + r < rw->g ? r0 + r : rw->g - 1;
            xq[r] = rw->q[i], xp[r] = rw->qp[i];
        }
        for (int t0 = 0; t0 < jn; t0 += TT) {
            const float *yk[TT], *yp[TT];
            for (int t = 0; t < TT; t++) {
                int64_t j = j0 + (t0 + t < jn ? t0 + t : jn - 1);
                yk[t] = a->K + j * a->ldk, yp[t] = a->P + j * a->ldp;
            }
            float dk[TR * TT], dp[TR * TT];
            TILE_FN(dots)(xq, yk, a->dk, dk);
            if (a->dp) TILE_FN(dots)(xp, yp, a->dp, dp);
            for (int r = 0; r < TR && r0 + r < rw->g; r++)
                for (int t = 0; t < TT && t0 + t < jn; t++)
                    S[r0 + r][t0 + t] =
                        a->scale * (dk[r * TT + t] + (a->dp ? dp[r * TT + t] : 0.0f));
        }
    }
}

/* Online softmax of row i's scores (its first jv valid): weights into S[i]
 * (zero past jv), the running max and sum updated, acc rescaled when the max
 * moved. */
TILE_ATTR static void TILE_FN(softmax_row)(float *s, int jv, int jn, float *acc, int dv) {
    float *mx = acc + dv, *sum = acc + dv + 1;
    float mb = s[0];
    for (int j = 1; j < jv; j++) mb = s[j] > mb ? s[j] : mb;
    float mnew = mb > *mx ? mb : *mx;
    for (int j = 0; j < jv; j++) s[j] -= mnew;
    k3_vexp(s, s, jv);
    for (int j = jv; j < jn; j++) s[j] = 0;
    float add = 0;
    for (int j = 0; j < jv; j++) add += s[j];
    if (mnew != *mx) {
        float alpha = *mx == -INFINITY ? 0.0f : expf(*mx - mnew);
        vf av = VSET1(alpha);
        int k = 0;
        for (; k + VW <= dv; k += VW) VSTORE(acc + k, VMUL(av, VLOAD(acc + k)));
        if (k < dv) {
            vmask m = VMASK(dv - k);
            VSTOREM(acc + k, m, VMUL(av, VLOADM(acc + k, m)));
        }
        *sum *= alpha;
        *mx = mnew;
    }
    *sum += add;
}

/* acc_i += sum_j S[i][j] V[j0 + j] for the block's rows, VR rows x VC vectors a tile. */
TILE_ATTR static void TILE_FN(wsum)(const k3_mla_tile_args *a, const k3_tile_rows *rw, int64_t j0,
                                    int jn, float S[][K3_TILE_TOK]) {
    const int dv = a->dv;
    for (int r0 = 0; r0 < rw->g; r0 += VR) {
        int ri[VR];
        for (int r = 0; r < VR; r++) ri[r] = r0 + r < rw->g ? r0 + r : rw->g - 1;
        for (int c0 = 0; c0 < dv; c0 += VC * VW) {
            vmask m[VC];
            vf acc[VR * VC];
#pragma GCC unroll 8
            for (int c = 0; c < VC; c++) {
                int left = dv - c0 - c * VW;
                m[c] = VMASK(left > 0 ? left : 0);
            }
#pragma GCC unroll 8
            for (int r = 0; r < VR; r++)
#pragma GCC unroll 8
                for (int c = 0; c < VC; c++)
                    acc[r * VC + c] = VLOADM(rw->acc[ri[r]] + c0 + c * VW, m[c]);
            const float *vrow = a->V + j0 * a->ldv + c0;
            for (int j = 0; j < jn; j++, vrow += a->ldv) {
                vf v[VC];
#pragma GCC unroll 8
                for (int c = 0; c < VC; c++) v[c] = VLOADM(vrow + c * VW, m[c]);
#pragma GCC unroll 8
                for (int r = 0; r < VR; r++) {
                    vf p = VSET1(S[ri[r]][j]);
#pragma GCC unroll 8
                    for (int c = 0; c < VC; c++) acc[r * VC + c] = VFMA(p, v[c], acc[r * VC + c]);
                }
            }
#pragma GCC unroll 8
            for (int r = 0; r < VR; r++) /* constant indices: acc stays in registers */
#pragma GCC unroll 8
                for (int c = 0; c < VC; c++)
                    if (r0 + r < rw->g)
                        VSTOREM(rw->acc[r0 + r] + c0 + c * VW, m[c], acc[r * VC + c]);
        }
    }
}

TILE_ATTR void TILE_FN(k3_mla_tile_block)(const k3_mla_tile_args *a, const k3_tile_rows *rw,
                                          int64_t j0, int64_t j1) {
    float S[K3_TILE_ROWS][K3_TILE_TOK];
    int jn = (int)(j1 - j0);
    TILE_FN(scores)(a, rw, j0, jn, S);
    for (int i = 0; i < rw->g; i++) {
        int64_t jv = rw->len[i] - j0;
        jv = jv < 0 ? 0 : jv > jn ? jn : jv;
        if (jv == 0)
            memset(S[i], 0, sizeof S[i]);
        else
            TILE_FN(softmax_row)(S[i], (int)jv, jn, rw->acc[i], a->dv);
    }
    TILE_FN(wsum)(a, rw, j0, jn, S);
}
