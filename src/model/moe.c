/* moe.c — dense SiTU MLP and the latent MoE (spec §2.6, §2.7): sigmoid router
 * with selection-only correction bias and optional grouped top-k, routed
 * experts in the latent space (tokens gathered per expert so each expert's
 * weights are read once per call), routed_expert_norm, up-projection, and the
 * shared experts on the full hidden. */
#include "base/mem.h"
#include "kernels/matmul.h"
#include "model/model.h"
#include "model/ops.h"
#include "model/rowpar.h"

#include <stdlib.h>
#include <string.h>

void k3_mlp_forward(const k3_model *m, const k3_mlp_w *w, const float *x, int64_t T, float *out) {
    k3_mlp_partial(m, w, x, T, out);
    k3_model_reduce(m, out, T * w->down.rows);
}

void k3_mlp_partial(const k3_model *m, const k3_mlp_w *w, const float *x, int64_t T, float *out) {
    int64_t I = w->gate.rows;
    float *g = k3_xmalloc(sizeof(float) * (size_t)(T * I));
    float *u = k3_xmalloc(sizeof(float) * (size_t)(T * I));
    k3_matmul(&w->gate, x, T, g);
    k3_matmul(&w->up, x, T, u);
    float beta = (float)m->c->situ_beta, lbeta = (float)m->c->situ_linear_beta;
    k3_situ_vec(u, g, T * I, beta, lbeta);
    k3_rowpar_matmul(m, &w->down, u, T, out); /* canonical block order (rowpar.h) */
    free(g);
    free(u);
}

/* Index of the largest v[i] among i with !taken[i]; ties go to the lower index. */
static int argmax_free(const float *v, const uint8_t *taken, int n) {
    int best = -1;
    for (int i = 0; i < n; i++)
        if (!taken[i] && (best < 0 || v[i] > v[best])) best = i;
    return best;
}

/* MLX group limiting: score each group by the sum of its top-2 biased scores and
 * set the scores of the n_group - topk_group weakest groups to 0.0 (not -inf).
 * Groups with equal scores: the lower-numbered one is dropped first (stable sort). */
static void limit_groups(const k3_config *c, float *s) {
    int G = c->num_expert_group, per = c->num_experts / G;
    float gs[1024];
    uint8_t dropped[1024] = {0};
    for (int g = 0; g < G; g++) {
        float a = -INFINITY, b = -INFINITY; /* top-2 */
        for (int i = 0; i < per; i++) {
            float v = s[g * per + i];
            if (v > a) {
                b = a;
                a = v;
            } else if (v > b) {
                b = v;
            }
        }
        gs[g] = a + b;
    }
    for (int k = 0; k < G - c->topk_group; k++) {
        int worst = -1;
        for (int g = 0; g < G; g++)
            if (!dropped[g] && (worst < 0 || gs[g] < gs[worst])) worst = g;
        dropped[worst] = 1;
        for (int i = 0; i < per; i++) s[worst * per + i] = 0.0f;
    }
}

void k3_moe_select(const k3_config *c, const float *logits, const float *bias, int *idx,
                   float *wts) {
    int E = c->num_experts, K = c->num_experts_per_token;
    float *score = k3_xmalloc(sizeof(float) * (size_t)E),
          *sel = k3_xmalloc(sizeof(float) * (size_t)E);
    uint8_t *taken = k3_xcalloc((size_t)E, 1);
    for (int e = 0; e < E; e++) {
        score[e] = k3_sigmoid(logits[e]);
        sel[e] = score[e] + bias[e];
    }
    if (c->num_expert_group > 1) limit_groups(c, sel);
    double sum = 0;
    for (int k = 0; k < K; k++) {
        idx[k] = argmax_free(sel, taken, E);
        taken[idx[k]] = 1;
        wts[k] = score[idx[k]];
        sum += wts[k];
    }
    for (int k = 0; k < K; k++) {
        if (K > 1 && c->moe_renormalize) wts[k] = (float)(wts[k] / (sum + 1e-20));
        wts[k] *= (float)c->routed_scaling_factor;
    }
    free(score);
    free(sel);
    free(taken);
}

/* Block b (of the rank's nb column blocks, spec §5.1 / rowpar.h) of one expert on the n
 * tokens routed to it: y[tok] += wt * down_b(SiTU(up_b x, gate_b x)), where up_b / gate_b
 * are rows [b*ml, (b+1)*ml) and down_b the same columns. The blocks of an expert sum to it. */
static void run_expert(const k3_model *m, const k3_moe_w *w, int e, int b, int64_t ml,
                       const float *xin, int64_t X, const int64_t *tok, const float *wt, int64_t n,
                       double *y) {
    k3_wmat eg = k3_wmat_rows(&w->eg[e], b * ml, ml), eu = k3_wmat_rows(&w->eu[e], b * ml, ml);
    k3_wmat ed = k3_wmat_cols(&w->ed[e], b * ml, ml);
    float *xe = k3_xmalloc(sizeof(float) * (size_t)(n * X));
    float *g = k3_xmalloc(sizeof(float) * (size_t)(n * ml));
    float *u = k3_xmalloc(sizeof(float) * (size_t)(n * ml));
    float *d = k3_xmalloc(sizeof(float) * (size_t)(n * X));
    for (int64_t i = 0; i < n; i++) memcpy(xe + i * X, xin + tok[i] * X, sizeof(float) * (size_t)X);
    k3_matmul(&eg, xe, n, g);
    k3_matmul(&eu, xe, n, u);
    float beta = (float)m->c->situ_beta, lbeta = (float)m->c->situ_linear_beta;
    k3_situ_vec(u, g, n * ml, beta, lbeta);
    k3_matmul(&ed, u, n, d);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < X; j++) y[tok[i] * X + j] += (double)wt[i] * d[i * X + j];
    free(xe);
    free(g);
    free(u);
    free(d);
}

/* Route every token, group the (token, weight) pairs by expert, then per column block run
 * each selected expert once over its tokens; the blocks' sums are added in the canonical
 * tree order (rowpar.h) so that tensor-parallel ranks reproduce one process exactly. */
static void routed_experts(const k3_model *m, const k3_moe_w *w, const float *x, const float *xin,
                           int64_t T, int64_t X, float *ylat) {
    const k3_config *c = m->c;
    int E = c->num_experts, K = c->num_experts_per_token;
    float *logits = k3_xmalloc(sizeof(float) * (size_t)(T * E));
    k3_matmul(&w->router, x, T, logits);
    int *idx = k3_xmalloc(sizeof(int) * (size_t)(T * K));
    float *wts = k3_xmalloc(sizeof(float) * (size_t)(T * K));
    for (int64_t t = 0; t < T; t++)
        k3_moe_select(c, logits + t * E, w->bias, idx + t * K, wts + t * K);
    /* counting sort of the T*K selections by expert, tokens in order within an expert */
    int64_t *start = k3_xcalloc((size_t)E + 1, sizeof(int64_t));
    for (int64_t i = 0; i < T * K; i++) start[idx[i] + 1]++;
    for (int e = 0; e < E; e++) start[e + 1] += start[e];
    int64_t *fill = k3_xmalloc(sizeof(int64_t) * (size_t)(E + 1));
    memcpy(fill, start, sizeof(int64_t) * (size_t)(E + 1));
    int64_t *tok = k3_xmalloc(sizeof(int64_t) * (size_t)(T * K));
    float *wt = k3_xmalloc(sizeof(float) * (size_t)(T * K));
    for (int64_t t = 0; t < T; t++)
        for (int k = 0; k < K; k++) {
            int64_t at = fill[idx[t * K + k]]++;
            tok[at] = t;
            wt[at] = wts[t * K + k];
        }
    int nb = k3_rowpar_local_blocks(m, &w->ed[0]);
    int64_t ml = w->eg[0].rows / nb;
    double *y = k3_xmalloc(sizeof(double) * (size_t)(T * X));
    k3_tree_sum acc;
    k3_tree_init(&acc, T * X);
    for (int b = 0; b < nb; b++) {
        memset(y, 0, sizeof(double) * (size_t)(T * X));
        for (int e = 0; e < E; e++)
            if (start[e + 1] > start[e])
                run_expert(m, w, e, b, ml, xin, X, tok + start[e], wt + start[e],
                           start[e + 1] - start[e], y);
        for (int64_t i = 0; i < T * X; i++) ylat[i] = (float)y[i];
        k3_tree_add(&acc, ylat);
    }
    k3_tree_finish(&acc, ylat);
    free(logits);
    free(idx);
    free(wts);
    free(start);
    free(fill);
    free(tok);
    free(wt);
    free(y);
}

void k3_moe_forward(const k3_model *m, const k3_moe_w *w, const float *x, int64_t T, float *out) {
    const k3_config *c = m->c;
    int64_t D = c->hidden_size, L = c->routed_expert_hidden_size, X = L ? L : D;
    /* ylat [T, X] and, with shared experts, their partial output [T, D] behind it:
     * tensor parallel sums both in ONE all-reduce, before the norm (spec §5.1). */
    int64_t ns = c->num_shared_experts ? T * D : 0;
    float *xin = NULL, *ylat = k3_xmalloc(sizeof(float) * (size_t)(T * X + ns));
    if (L) {
        xin = k3_xmalloc(sizeof(float) * (size_t)(T * L));
        k3_matmul(&w->lat_down, x, T, xin);
    }
    routed_experts(m, w, x, L ? xin : x, T, X, ylat);
    float *shared = ylat + T * X;
    if (ns) k3_mlp_partial(m, &w->shared, x, T, shared);
    k3_model_reduce(m, ylat, T * X + ns); /* before the norm (spec §5.1) */
    if (L && c->latent_moe_use_norm)
        k3_rmsnorm_rows(ylat, T, L, w->lat_norm, c->rms_norm_eps, ylat);
    if (L)
        k3_matmul(&w->lat_up, ylat, T, out);
    else
        memcpy(out, ylat, sizeof(float) * (size_t)(T * D));
    if (ns)
        for (int64_t i = 0; i < T * D; i++) out[i] += shared[i];
    free(xin);
    free(ylat);
}
