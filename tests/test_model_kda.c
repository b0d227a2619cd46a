/* test_model_kda.c — the vector KDA delta-rule step against the scalar
 * reference on awkward head sizes (dk, dv not multiples of 8 or 16) over many
 * steps of random data, the dispatcher's reference mode, and the parallel
 * elementwise ops of the layer (conv + SiLU, row RMSNorm, SiTU) bitwise equal
 * for 1 and 2 threads. */
#include "kernels/runtime.h"
#include "kernels/vmath.h"
#include "kernels/avx2.h"
#include "kernels/kda_ops.h"
#include "model/model.h"
#include "model/ops.h"
#include "t.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

static float *randv(int64_t n, float scale) {
    float *p = malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) p[i] = (float)t_rand() * scale;
    return p;
}

/* Normalise like the layer does, so the recurrence stays bounded. */
static void unit(float *x, int n) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    for (int i = 0; i < n; i++) x[i] = (float)(x[i] / sqrt(ss + 1e-6));
}

/* 40 steps from a random state; after each, the vector state and output
 * within 4e-6 (relative to the largest magnitude) of the reference. */
static void step_case(int dk, int dv) {
    int64_t n = (int64_t)dk * dv;
    float *S0 = randv(n, 1.0f), *S1 = malloc(sizeof(float) * (size_t)n);
    memcpy(S1, S0, sizeof(float) * (size_t)n);
    float *q = randv(dk, 1), *k = randv(dk, 1), *v = randv(dv, 2), *a = randv(dk, 1);
    float *y0 = randv(dv, 0), *y1 = randv(dv, 0);
    double worst_s = 0, worst_y = 0;
    for (int step = 0; step < 40; step++) {
        for (int j = 0; j < dk; j++)
            q[j] = (float)t_rand(), k[j] = (float)t_rand(),
            a[j] = expf(-5.0f * (float)fabs(t_rand())); /* the gate's range e^-5..1 */
        for (int i = 0; i < dv; i++) v[i] = (float)t_rand() * 2;
        unit(q, dk), unit(k, dk);
        float beta = 0.1f + 0.8f * (float)fabs(t_rand());
        k3_kda_step_ref(S0, dk, dv, q, k, v, a, beta, y0);
        k3_kda_step_avx2(S1, dk, dv, q, k, v, a, beta, y1);
        double ms = 1e-30, my = 1e-30, ds = 0, dy = 0;
        for (int64_t i = 0; i < n; i++)
            ms = fmax(ms, fabs(S0[i])), ds = fmax(ds, fabs((double)S0[i] - S1[i]));
        for (int i = 0; i < dv; i++)
            my = fmax(my, fabs(y0[i])), dy = fmax(dy, fabs((double)y0[i] - y1[i]));
        worst_s = fmax(worst_s, ds / ms), worst_y = fmax(worst_y, dy / my);
    }
    printf("  dk %3d dv %3d: state %.2e, output %.2e (relative to max)\n", dk, dv, worst_s,
           worst_y);
    CHECK(worst_s < 4e-6 && worst_y < 4e-6, "dk %d dv %d: %g %g", dk, dv, worst_s, worst_y);
    free(S0), free(S1), free(q), free(k), free(v), free(a), free(y0), free(y1);
}

TEST(vector_step_matches_reference_awkward_sizes) {
    if (!k3_cpu_has_avx2()) {
        printf("  (no AVX2+FMA: the vector step does not run here)\n");
        CHECK(1);
        return;
    }
    int sizes[][2] = {{7, 7}, {33, 5}, {130, 33}, {128, 128}, {16, 1}, {1, 9}, {24, 130}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) step_case(sizes[i][0], sizes[i][1]);
}

TEST(reference_mode_selects_scalar_step) {
    enum { dk = 33, dv = 7 };
    float S0[dk * dv], S1[dk * dv], q[dk], k[dk], a[dk], v[dv], y0[dv], y1[dv];
    for (int i = 0; i < dk * dv; i++) S0[i] = S1[i] = (float)t_rand();
    for (int j = 0; j < dk; j++) q[j] = (float)t_rand(), k[j] = (float)t_rand(), a[j] = 0.9f;
    for (int i = 0; i < dv; i++) v[i] = (float)t_rand();
    k3_kernels_set_mode(K3_KERNELS_REF);
    k3_kda_step(S0, dk, dv, q, k, v, a, 0.5f, y0);
    k3_kernels_set_mode(K3_KERNELS_AUTO);
    k3_kda_step_ref(S1, dk, dv, q, k, v, a, 0.5f, y1);
    CHECK(!memcmp(S0, S1, sizeof S0) && !memcmp(y0, y1, sizeof y0));
}

/* f run with 1 and with 2 threads writes the same bytes. */
TEST(conv_norm_situ_threads_bitwise) {
    enum { T = 37, C = 1031, K = 4, N = 40000 };
    float *z = randv(T * C, 3), *w = randv(C * K, 1), *st = randv((K - 1) * C, 1);
    float *z1 = randv(T * C, 0), *z2 = randv(T * C, 0), *s1 = randv((K - 1) * C, 0),
          *s2 = randv((K - 1) * C, 0), *nw = randv(C, 1);
    float *u = randv(N, 40), *g = randv(N, 10), *u1 = randv(N, 0), *u2 = randv(N, 0);
    for (int nt = 1; nt <= 2; nt++) {
        omp_set_num_threads(nt);
        float *zo = nt == 1 ? z1 : z2, *so = nt == 1 ? s1 : s2, *uo = nt == 1 ? u1 : u2;
        memcpy(zo, z, sizeof(float) * T * C), memcpy(so, st, sizeof(float) * (K - 1) * C);
        k3_kda_conv(zo, T, C, 0, C, w, K, so, C);
        k3_rmsnorm_rows(zo, T, C, nw, 1e-5, zo);
        memcpy(uo, u, sizeof(float) * N);
        k3_situ_vec(uo, g, N, 4.0f, 25.0f);
    }
    omp_set_num_threads(2);
    CHECK(!memcmp(z1, z2, sizeof(float) * T * C), "conv + rmsnorm rows");
    CHECK(!memcmp(s1, s2, sizeof(float) * (K - 1) * C), "conv state");
    CHECK(!memcmp(u1, u2, sizeof(float) * N), "situ");
    for (int i = 0; i < N; i += 997) /* and SiTU is SiTU */
        CHECK_NEAR(u1[i], k3_situ(u[i], g[i], 4.0f, 25.0f), 1e-5 * (1 + fabs(u1[i])));
    free(z), free(w), free(st), free(z1), free(z2), free(s1), free(s2), free(nw);
    free(u), free(g), free(u1), free(u2);
}

/* The causal conv of one channel, written out as the spec states it, with
 * the products and sums in double in the engine's order. */
static void conv_channel_ref(float *z, int T, int ld, const float *wc, float *state, int sld) {
    float h[3] = {state[0], state[sld], state[2 * sld]};
    for (int t = 0; t < T; t++) {
        float zt = z[t * ld];
        double u = (double)wc[3] * zt;
        for (int j = 0; j < 3; j++) {
            double p = (double)wc[j] * h[j];
            u += p;
        }
        h[0] = h[1], h[1] = h[2], h[2] = zt;
        z[t * ld] = (float)u;
    }
    for (int j = 0; j < 3; j++) state[j * sld] = h[j];
}

/* k3_kda_conv (8 channels per vector, kernel 4) against that scalar conv
 * followed by the same SiLU: the same bits, output and state, with a
 * channel count that leaves a tail (1031 = 128 x 8 + 7), a column offset
 * and the state carried into a second call. */
TEST(conv_vector_vs_scalar_bitwise) {
    enum { T = 29, C = 1031, LD = 1040, K = 4, C0 = 5 };
    float *z = randv(T * LD, 3), *w = randv(C * K, 1), *st = randv((K - 1) * LD, 1);
    float *z1 = randv(T * LD, 0), *z2 = randv(T * LD, 0), *s1 = randv((K - 1) * LD, 0),
          *s2 = randv((K - 1) * LD, 0);
    memcpy(z1, z, sizeof(float) * T * LD), memcpy(s1, st, sizeof(float) * (K - 1) * LD);
    memcpy(z2, z, sizeof(float) * T * LD), memcpy(s2, st, sizeof(float) * (K - 1) * LD);
    k3_kda_conv(z1, 20, LD, C0, C, w, K, s1, LD);
    k3_kda_conv(z1 + 20 * LD, T - 20, LD, C0, C, w, K, s1, LD);
    for (int c = 0; c < C; c++) {
        conv_channel_ref(z2 + C0 + c, 20, LD, w + c * K, s2 + C0 + c, LD);
        conv_channel_ref(z2 + 20 * LD + C0 + c, T - 20, LD, w + c * K, s2 + C0 + c, LD);
    }
    for (int t = 0; t < T; t++) k3_vsilu(z2 + t * LD + C0, z2 + t * LD + C0, C);
    CHECK(!memcmp(z1, z2, sizeof(float) * T * LD), "conv output");
    CHECK(!memcmp(s1, s2, sizeof(float) * (K - 1) * LD), "conv state");
    free(z), free(w), free(st), free(z1), free(z2), free(s1), free(s2);
}

int main(void) {
    RUN(vector_step_matches_reference_awkward_sizes);
    RUN(reference_mode_selects_scalar_step);
    RUN(conv_norm_situ_threads_bitwise);
    RUN(conv_vector_vs_scalar_bitwise);
    return t_done();
}
