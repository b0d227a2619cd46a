/* ops.h — the small element-wise and reduction ops of the K3 forward pass.
 *
 * All in f32 storage with double accumulation for the reductions (RMS, L2,
 * softmax sums), which keeps the engine within ~1e-6 of the float64 oracle. */
#ifndef K3_MODEL_OPS_H
#define K3_MODEL_OPS_H

#include "quant/wmat.h"

#include <math.h>
#include <stdint.h>

static inline float k3_sigmoid(float x) {
    float e = expf(-fabsf(x));
    return x >= 0 ? 1.0f / (1.0f + e) : e / (1.0f + e);
}
static inline float k3_silu(float x) {
    return x * k3_sigmoid(x);
}
static inline float k3_softplus(float x) {
    return x > 20.0f ? x : log1pf(expf(x));
}

/* SiTU(up, gate) = beta*tanh(gate/beta)*sigmoid(gate) * [lbeta*tanh(up/lbeta)] (no clip if lbeta =
 * 0). */
static inline float k3_situ(float up, float gate, float beta, float lbeta) {
    float act = beta * tanhf(gate / beta) * k3_sigmoid(gate);
    if (lbeta > 0) up = lbeta * tanhf(up / lbeta);
    return act * up;
}

/* u[i] <- k3_situ(u[i], g[i], beta, lbeta) for i < n: the MLP/expert activation in place. */
void k3_situ_vec(float *u, const float *g, int64_t n, float beta, float lbeta);

/* out[i] = x[i] / sqrt(mean(x^2) + eps) * (w ? w[i] : 1); out may alias x. */
void k3_rmsnorm(const float *x, int64_t n, const float *w, double eps, float *out);
/* Row-wise RMSNorm of a [T, n] matrix. */
void k3_rmsnorm_rows(const float *x, int64_t T, int64_t n, const float *w, double eps, float *out);
/* x[i] *= scale / sqrt(sum(x^2) + eps) (L2 normalisation with a folded scale). */
void k3_l2norm_scaled(float *x, int64_t n, double eps, float scale);
/* In-place softmax over n values (n >= 1; -INFINITY entries get weight 0). */
void k3_softmax(float *x, int64_t n);

#endif
