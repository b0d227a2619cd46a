/* kda_ops.c — the scalar references of kda_ops.h and the run-time choice
 * between them and the AVX2 versions (kda_ops_avx2.c). */
#include "kernels/kda_ops.h"
#include "kernels/avx2.h"
#include "kernels/runtime.h"

static int use_vector(void) {
    return k3_kernels_active() != K3_KERNELS_REF;
}

/* The causal conv of one channel over T tokens (z at stride ld, its K-1
 * history in state at stride sld, oldest first, updated); z gets the
 * pre-activation sums, accumulated in double. */
static void conv_channel(float *z, int64_t T, int64_t ld, const float *wc, int K, float *state,
                         int64_t sld) {
    float hist[16]; /* the last K-1 inputs, oldest first (K <= 17) */
    for (int j = 0; j < K - 1; j++) hist[j] = state[j * sld];
    for (int64_t t = 0; t < T; t++) {
        float zt = z[t * ld];
        double u = (double)wc[K - 1] * zt;
        for (int j = 0; j < K - 1; j++) {
            double p = (double)wc[j] * hist[j]; /* own statement: never contracted into */
            u += p;                             /* an FMA, so the AVX2 conv matches it */
        }
        for (int j = 0; j + 1 < K - 1; j++) hist[j] = hist[j + 1];
        if (K > 1) hist[K - 2] = zt;
        z[t * ld] = (float)u;
    }
    for (int j = 0; j < K - 1; j++) state[j * sld] = hist[j];
}

void k3_conv_channels_ref(float *z, int64_t T, int64_t ld, int64_t n, const float *w, int K,
                          float *state, int64_t sld) {
    for (int64_t c = 0; c < n; c++) conv_channel(z + c, T, ld, w + c * K, K, state + c, sld);
}

void k3_conv_channels(float *z, int64_t T, int64_t ld, int64_t n, const float *w, int K,
                      float *state, int64_t sld) {
    if (n == 8 && K == 4 && use_vector())
        k3_conv8_k4_avx2(z, T, ld, w, state, sld);
    else
        k3_conv_channels_ref(z, T, ld, n, w, K, state, sld);
}

/* One gated delta-rule step for one head: S [dv, dk] (row i = value index). */
void k3_kda_step_ref(float *S, int dk, int dv, const float *q, const float *k, const float *v,
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

void k3_kda_step(float *S, int dk, int dv, const float *q, const float *k, const float *v,
                 const float *alpha, float beta, float *y) {
    if (use_vector() && dk <= K3_KDA_VEC_MAX_DK)
        k3_kda_step_avx2(S, dk, dv, q, k, v, alpha, beta, y);
    else
        k3_kda_step_ref(S, dk, dv, q, k, v, alpha, beta, y);
}
