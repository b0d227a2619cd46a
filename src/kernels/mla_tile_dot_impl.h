/* mla_tile_dot_impl.h — the scores and softmax of a block for a group of few
 * rows (a decode of one or a few heads, a small verify batch), included by
 * mla_tile_impl.h (internal to src/kernels). With few rows, rows in lanes
 * would leave most lanes empty; here the cached row is in the lanes instead:
 * each score is a dot product over the dimensions, R rows x T tokens of them
 * (R * T = VW) accumulated at once, then reduced into one vector whose lane
 * r * T + t is the score of row r against token t (TILE_HSUM, the includer's
 * transposing reduction). The scores sit row-major, S[row * K3_TILE_TOK +
 * token], and the weighted sum reads them with those strides.
 *
 * The includer also defines TILE_HSUM(v): lane i = the sum of the lanes of
 * v[i], for VW vectors v; VHMAX(v), VHSUM(v): the max, the sum of v's
 * lanes. As in the rest of the step, the instructions a row sees depend on
 * the group's row count and the block bounds only. */

/* Dot products of rows q[0..R) against tokens y[0..T) over d dimensions,
 * added to acc[r * T + t], a vector of dimensions at a time (the tail under
 * a mask, zero past d). */
TILE_INLINE void TILE_FN(dot_part)(vf *acc, int R, int T, const float *const *q,
                                   const float *const *y, int d) {
    int k = 0;
    for (; k + VW <= d; k += VW) {
        vf x[VW];
#pragma GCC unroll 16
        for (int r = 0; r < R; r++) x[r] = VLOAD(q[r] + k);
#pragma GCC unroll 16
        for (int t = 0; t < T; t++) {
            vf yv = VLOAD(y[t] + k);
#pragma GCC unroll 16
            for (int r = 0; r < R; r++) acc[r * T + t] = VFMA(x[r], yv, acc[r * T + t]);
        }
    }
    if (k == d) return;
    vmask m = VMASK(d - k);
    vf x[VW];
#pragma GCC unroll 16
    for (int r = 0; r < R; r++) x[r] = VLOADM(q[r] + k, m);
#pragma GCC unroll 16
    for (int t = 0; t < T; t++) {
        vf yv = VLOADM(y[t] + k, m);
#pragma GCC unroll 16
        for (int r = 0; r < R; r++) acc[r * T + t] = VFMA(x[r], yv, acc[r * T + t]);
    }
}

/* Scores of rows [r0, r0 + R) (past g: the last row again, not stored)
 * against tokens [t0, t0 + T) of the block (past jn: the last token again;
 * stored, never read), into S[row * K3_TILE_TOK + token]. */
TILE_INLINE void TILE_FN(dot_tile)(const k3_mla_tile_args *a, const k3_tile_group *gr, int R, int T,
                                   int r0, int64_t j0, int t0, int jn, float *S) {
    const float *q[VW], *qp[VW], *yk[VW], *yp[VW];
    for (int r = 0; r < R; r++) {
        int i = r0 + r < gr->g ? r0 + r : gr->g - 1;
        q[r] = gr->q[i], qp[r] = gr->qp[i];
    }
    for (int t = 0; t < T; t++) {
        int64_t j = j0 + (t0 + t < jn ? t0 + t : jn - 1);
        yk[t] = a->K + j * a->ldk, yp[t] = a->P + j * a->ldp;
    }
    vf acc[VW];
#pragma GCC unroll 16
    for (int i = 0; i < VW; i++) acc[i] = VZERO;
    TILE_FN(dot_part)(acc, R, T, q, yk, a->dk);
    if (a->dp) TILE_FN(dot_part)(acc, R, T, qp, yp, a->dp);
    float s[VW] __attribute__((aligned(64)));
    VSTORE(s, VMUL(VSET1(a->scale), TILE_HSUM(acc)));
    for (int r = 0; r < R && r0 + r < gr->g; r++)
        memcpy(S + (int64_t)(r0 + r) * K3_TILE_TOK + t0, s + r * T, sizeof(float) * (size_t)T);
}

/* Ask for cached rows [j, j + T) (those below n) ahead of their tile: a
 * group's first walk over a block waits on memory otherwise (the hardware's
 * prefetch alone falls behind when each cached value feeds only a few
 * vectors of rows). The first group of a chunk asks (gr->ahead); the others
 * find the block in cache. */
TILE_INLINE void TILE_FN(prefetch_tokens)(const k3_mla_tile_args *a, int64_t j, int T) {
    for (int t = 0; t < T && j + t < a->n; t++) {
        const char *k = (const char *)(a->K + (j + t) * a->ldk);
        const char *p = (const char *)(a->P + (j + t) * a->ldp);
        for (int b = 0; b < a->dk * 4; b += 64) __builtin_prefetch(k + b);
        for (int b = 0; b < a->dp * 4; b += 64) __builtin_prefetch(p + b);
    }
}

/* The block's scores for the group's rows: R rows x T tokens a tile, R the
 * largest of 4, 2, 1 dividing the row count (a tile of VW dot products;
 * VW / R tokens of cached rows stay in L1 while every row takes them). */
TILE_ATTR static void TILE_FN(dot_scores)(const k3_mla_tile_args *a, const k3_tile_group *gr,
                                          int64_t j0, int jn, float *S) {
    const int g = gr->g, R = g % 4 == 0 ? 4 : g % 2 == 0 ? 2 : 1, T = VW / R;
    for (int t0 = 0; t0 < jn; t0 += T) {
        if (gr->ahead) TILE_FN(prefetch_tokens)(a, j0 + t0 + T, T);
        for (int r0 = 0; r0 < g; r0 += R) {
            if (R == 4)
                TILE_FN(dot_tile)(a, gr, 4, VW / 4, r0, j0, t0, jn, S);
            else if (R == 2)
                TILE_FN(dot_tile)(a, gr, 2, VW / 2, r0, j0, t0, jn, S);
            else
                TILE_FN(dot_tile)(a, gr, 1, VW, r0, j0, t0, jn, S);
        }
    }
}

/* The online softmax of mla_tile_impl.h's softmax, a row at a time over
 * row-major scores, a vector of tokens at a time: scores past the row's
 * length (and past jn, up to a whole vector) -inf, the new max, weights
 * exp(s - max) in place (0 in the padding), alpha for the running sums, the
 * weight sum updated by the vector of the row's weights (VHMAX and VHSUM, the
 * includer's horizontal max and sum). */
TILE_ATTR static void TILE_FN(dot_softmax)(k3_tile_group *gr, int64_t j0, int jn, float *S,
                                           float *alpha) {
    const int jp = (jn + VW - 1) / VW * VW; /* <= K3_TILE_TOK, a multiple of VW */
    float part[K3_TILE_GROUP];
    for (int i = 0; i < gr->g; i++) {
        float *s = S + (int64_t)i * K3_TILE_TOK;
        int64_t jv = gr->len[i] - j0;
        for (int64_t t = jv < 0 ? 0 : jv < jn ? jv : jn; t < jp; t++) s[t] = -INFINITY;
        vf mv = VLOAD(s);
        for (int t = VW; t < jp; t += VW) mv = VMAX(mv, VLOAD(s + t));
        float m = VHMAX(mv), mold = gr->mx[i];
        m = m > mold ? m : mold;
        float mu = m > -FLT_MAX ? m : -FLT_MAX;
        alpha[i] = mold - mu;
        gr->mx[i] = m;
        vf muv = VSET1(mu);
        for (int t = 0; t < jp; t += VW) VSTORE(s + t, VSUB(VLOAD(s + t), muv));
        k3_vexp(s, s, jp);
        vf sv = VLOAD(s);
        for (int t = VW; t < jp; t += VW) sv = VADD(sv, VLOAD(s + t));
        part[i] = VHSUM(sv);
    }
    k3_vexp(alpha, alpha, gr->g);
    for (int i = 0; i < gr->g; i++) gr->sum[i] = gr->sum[i] * alpha[i] + part[i];
}
