/* kda.c — one Kimi Delta Attention layer (spec §2.4): projections, causal
 * short conv with its state, SiLU, L2-normalised q/k, per-channel forget gate,
 * beta, the gated delta-rule recurrence in fp32, gated output RMSNorm, o_proj. */
#include "base/mem.h"
#include "kernels/matmul.h"
#include "model/model.h"
#include "model/ops.h"
#include "model/rowpar.h"

#include <stdlib.h>
#include <string.h>

/* Causal depthwise conv over [state; z] for C channels, then SiLU, in place on z.
 * state holds the last K-1 pre-conv inputs (oldest first) and is updated.
 * z is [T, ld] with this block's channels at column offset col0. */
void k3_kda_conv(float *z, int64_t T, int64_t ld, int64_t col0, int64_t C, const float *w, int K,
                 float *state, int64_t sld) {
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < C; c++) {
        float hist[16]; /* the last K-1 inputs, oldest first (K <= 17) */
        for (int j = 0; j < K - 1; j++) hist[j] = state[j * sld + col0 + c];
        const float *wc = w + c * K;
        for (int64_t t = 0; t < T; t++) {
            float zt = z[t * ld + col0 + c];
            double u = (double)wc[K - 1] * zt;
            for (int j = 0; j < K - 1; j++) u += (double)wc[j] * hist[j];
            for (int j = 0; j + 1 < K - 1; j++) hist[j] = hist[j + 1];
            if (K > 1) hist[K - 2] = zt;
            z[t * ld + col0 + c] = k3_silu((float)u);
        }
        for (int j = 0; j < K - 1; j++) state[j * sld + col0 + c] = hist[j];
    }
}

/* One gated delta-rule step for one head: S [dv, dk] (row i = value index). */
void k3_kda_step(float *S, int dk, int dv, const float *q, const float *k, const float *v,
                 const float *alpha, float beta, float *y) {
    for (int i = 0; i < dv; i++) {
        float *Si = S + (int64_t)i * dk;
        double m = 0;
        for (int j = 0; j < dk; j++) {
            Si[j] *= alpha[j];
            m += (double)Si[j] * k[j];
        }
        float delta = beta * (v[i] - (float)m);
        double o = 0;
        for (int j = 0; j < dk; j++) {
            Si[j] += delta * k[j];
            o += (double)Si[j] * q[j];
        }
        y[i] = (float)o;
    }
}

/* Decay alpha[t,h,d] from the low-rank gate logits a (in place). */
static void kda_decay(const k3_config *c, const k3_kda_w *w, float *a, int64_t T) {
    int H = c->kda_heads, hd = c->kda_head_dim;
    int64_t P = (int64_t)H * hd;
    float lb = (float)c->kda_gate_lower_bound;
    for (int64_t t = 0; t < T; t++)
        for (int64_t ch = 0; ch < P; ch++) {
            float A = w->A[ch / hd], z = a[t * P + ch] + w->dt_bias[ch];
            float glog = c->kda_has_lower_bound ? lb * k3_sigmoid(A * z) : -A * k3_softplus(z);
            a[t * P + ch] = expf(glog);
        }
}

/* z [T, 3P] = conv+SiLU of the q | k | v projections, with q and k L2-normalised per head. */
static void kda_qkv(const k3_config *cf, const k3_kda_w *w, k3_layer_cache *c, const float *x,
                    int64_t T, float *z, float *tmp) {
    int H = cf->kda_heads, hd = cf->kda_head_dim;
    int64_t P = (int64_t)H * hd;
    for (int b = 0; b < 3; b++) {
        k3_matmul(b == 0 ? &w->q : b == 1 ? &w->k : &w->v, x, T, tmp);
        for (int64_t t = 0; t < T; t++)
            memcpy(z + t * 3 * P + b * P, tmp + t * P, sizeof(float) * (size_t)P);
    }
    k3_kda_conv(z, T, 3 * P, 0, 3 * P, w->conv, cf->kda_conv_kernel, c->conv, 3 * P);
    for (int64_t t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            k3_l2norm_scaled(z + t * 3 * P + h * hd, hd, 1e-6, 1.0f / sqrtf((float)hd));
            k3_l2norm_scaled(z + t * 3 * P + P + h * hd, hd, 1e-6, 1.0f);
        }
}

/* The delta rule over T tokens, heads in parallel; y [T, P]. */
static void kda_recurrence(const k3_config *cf, k3_layer_cache *c, const float *z,
                           const float *alpha, const float *beta, int64_t T, float *y) {
    int H = cf->kda_heads, hd = cf->kda_head_dim;
    int64_t P = (int64_t)H * hd;
#pragma omp parallel for schedule(static)
    for (int h = 0; h < H; h++) {
        float *S = c->S + (int64_t)h * hd * hd;
        for (int64_t t = 0; t < T; t++) {
            const float *zt = z + t * 3 * P + (int64_t)h * hd;
            k3_kda_step(S, hd, hd, zt, zt + P, zt + 2 * P, alpha + t * P + (int64_t)h * hd,
                        beta[t * H + h], y + t * P + (int64_t)h * hd);
        }
    }
}

/* y <- RMSNorm(y per head; o_norm) * sigmoid(gate), gate full-rank or low-rank. */
static void kda_gated_norm(const k3_config *cf, const k3_kda_w *w, const float *x, int64_t T,
                           float *y, float *gate, float *low) {
    int H = cf->kda_heads, hd = cf->kda_head_dim;
    int64_t P = (int64_t)H * hd;
    if (cf->kda_full_rank_gate) {
        k3_matmul(&w->g, x, T, gate);
    } else {
        k3_matmul(&w->ga, x, T, low);
        k3_matmul(&w->gb, low, T, gate);
    }
    for (int64_t t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            float *yh = y + t * P + (int64_t)h * hd, *gh = gate + t * P + (int64_t)h * hd;
            k3_rmsnorm(yh, hd, w->o_norm, cf->rms_norm_eps, yh);
            for (int d = 0; d < hd; d++) yh[d] *= k3_sigmoid(gh[d]);
        }
}

void k3_kda_forward(const k3_model *m, const k3_layer *l, k3_layer_cache *c, const float *x,
                    int64_t T, float *out) {
    const k3_config *cf = m->c;
    const k3_kda_w *w = &l->kda;
    int H = cf->kda_heads, hd = cf->kda_head_dim;
    int64_t P = (int64_t)H * hd, D = cf->hidden_size;
    float *z = k3_xmalloc(sizeof(float) * (size_t)(T * 3 * P)); /* [T, 3P]: q | k | v */
    float *y = k3_xmalloc(sizeof(float) * (size_t)(T * P));
    float *low = k3_xmalloc(sizeof(float) * (size_t)(T * hd));
    float *alpha = k3_xmalloc(sizeof(float) * (size_t)(T * P));
    float *beta = k3_xmalloc(sizeof(float) * (size_t)(T * H));
    kda_qkv(cf, w, c, x, T, z, y);
    k3_matmul(&w->fa, x, T, low); /* forget gate, low rank */
    k3_matmul(&w->fb, low, T, alpha);
    kda_decay(cf, w, alpha, T);
    k3_matmul(&w->b, x, T, beta);
    for (int64_t i = 0; i < T * H; i++) beta[i] = k3_sigmoid(beta[i]);
    kda_recurrence(cf, c, z, alpha, beta, T, y);
    kda_gated_norm(cf, w, x, T, y, alpha /* reused as the gate */, low);
    k3_rowpar_matmul(m, &w->o, y, T, out); /* canonical block order (rowpar.h) */
    k3_model_reduce(m, out, T * D);
    free(z);
    free(y);
    free(low);
    free(alpha);
    free(beta);
}
