/* test_kernels_ops.c — the model's small vector ops, each against its scalar
 * reference (K3_KERNELS=ref) on awkward sizes: the double-accumulated dot and
 * sum of squares and the weighted row mix of Block AttnRes (vmath.h), KDA's
 * short conv of a group of channels (kda_ops.h; the delta-rule step is in
 * test_model_kda.c), and the transposed product of absorbed MLA (tmatmul.h),
 * threaded against serial as well. Where the vector op promises the
 * reference's bits the check is bitwise; otherwise within a bound of the
 * summed magnitudes. */
#include "helpers.h"
#include "kernels/kernels.h"
#include "t.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

static const int64_t SIZES[] = {0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 100, 255, 257, 1001};
#define NSIZES ((int)(sizeof SIZES / sizeof SIZES[0]))

static float *randv(int64_t n, float scale) {
    float *p = malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) p[i] = (float)t_rand() * scale;
    return p;
}

TEST(dot_sumsq_within_double_rounding_of_reference) {
    for (int s = 0; s < NSIZES; s++) {
        const int64_t n = SIZES[s];
        float *v = randv(n + 3, 4.0f), *w = randv(n + 3, 2.0f);
        double mag_d = 0, mag_s = 0;
        for (int64_t i = 0; i < n; i++) {
            mag_d += fabs((double)v[i + 3] * w[i + 3]);
            mag_s += (double)v[i + 3] * v[i + 3];
        }
        double d1, s1, d0, s0;
        k3_kernels_set_mode(K3_KERNELS_AUTO);
        k3_vdot_sumsq_d(v + 3, w + 3, n, &d1, &s1); /* unaligned start */
        k3_kernels_set_mode(K3_KERNELS_REF);
        k3_vdot_sumsq_d(v + 3, w + 3, n, &d0, &s0);
        const double tol = (double)(n + 4) * 2.3e-16; /* per unit of magnitude */
        CHECK(fabs(d1 - d0) <= tol * mag_d, "n=%lld dot %.17g vs %.17g", (long long)n, d1, d0);
        CHECK(fabs(s1 - s0) <= tol * mag_s, "n=%lld ss %.17g vs %.17g", (long long)n, s1, s0);
        free(v);
        free(w);
    }
    k3_kernels_set_mode(K3_KERNELS_AUTO);
}

TEST(mix_gives_the_reference_bits) {
    const int ms[] = {1, 2, 5, 17};
    for (int mi = 0; mi < 4; mi++) {
        const int m = ms[mi];
        for (int s = 0; s < NSIZES; s++) {
            const int64_t n = SIZES[s], off = 5;
            float *rows[17];
            double wt[17];
            for (int j = 0; j < m; j++) {
                rows[j] = randv(n + off, 3.0f);
                wt[j] = t_rand() * 0.5 + 0.5;
            }
            float *o1 = randv(n, 1.0f), *o0 = randv(n, 1.0f);
            k3_kernels_set_mode(K3_KERNELS_AUTO);
            k3_vmix_d((const float *const *)rows, m, off, wt, n, o1);
            k3_kernels_set_mode(K3_KERNELS_REF);
            k3_vmix_d((const float *const *)rows, m, off, wt, n, o0);
            CHECK(!memcmp(o1, o0, sizeof(float) * (size_t)n), "m=%d n=%lld", m, (long long)n);
            for (int j = 0; j < m; j++) free(rows[j]);
            free(o1);
            free(o0);
        }
    }
    k3_kernels_set_mode(K3_KERNELS_AUTO);
}

/* n channels at stride ld over T tokens, fed in two calls (the state carries
 * the history over), vector family against the reference, bitwise. */
static void conv_case(int64_t n, int K, int64_t T, int64_t ld, int64_t split) {
    float *w = randv(n * K, 0.7f), *z0 = randv(T * ld, 2.0f), *st0 = randv((K - 1) * ld, 1.0f);
    float *z1 = malloc(sizeof(float) * (size_t)(T * ld)),
          *st1 = malloc(sizeof(float) * (size_t)((K - 1) * ld + 1));
    memcpy(z1, z0, sizeof(float) * (size_t)(T * ld));
    memcpy(st1, st0, sizeof(float) * (size_t)((K - 1) * ld));
    k3_kernels_set_mode(K3_KERNELS_AUTO);
    k3_conv_channels(z1, split, ld, n, w, K, st1, ld);
    k3_conv_channels(z1 + split * ld, T - split, ld, n, w, K, st1, ld);
    k3_kernels_set_mode(K3_KERNELS_REF);
    k3_conv_channels(z0, split, ld, n, w, K, st0, ld);
    k3_conv_channels(z0 + split * ld, T - split, ld, n, w, K, st0, ld);
    k3_kernels_set_mode(K3_KERNELS_AUTO);
    CHECK(!memcmp(z1, z0, sizeof(float) * (size_t)(T * ld)), "n=%lld K=%d T=%lld outputs",
          (long long)n, K, (long long)T);
    CHECK(!memcmp(st1, st0, sizeof(float) * (size_t)((K - 1) * ld)), "n=%lld K=%d T=%lld state",
          (long long)n, K, (long long)T);
    free(w);
    free(z0);
    free(z1);
    free(st0);
    free(st1);
}

TEST(conv_channels_give_the_reference_bits) {
    const int64_t Ts[] = {1, 2, 3, 7, 19};
    for (int i = 0; i < 5; i++) {
        const int64_t T = Ts[i];
        for (int64_t split = 0; split <= T; split += T > 3 ? 3 : 1) {
            conv_case(8, 4, T, 13, split); /* the vector case, at an odd stride */
            conv_case(5, 4, T, 13, split); /* a short last item: the reference path */
            conv_case(8, 3, T, 8, split);  /* another kernel size */
        }
    }
}

/* Y = X W, T tokens, vector (f32 sums of R terms) against the double
 * reference within (R + 1) f32 roundings of sum_r |X W| per element;
 * threaded against serial bitwise. */
static void tmatmul_case(int64_t R, int64_t C, int64_t T, k3_wfmt fmt) {
    owned_mat m = make_mat(fmt, R, C, 0, 0, K3_W_BF16);
    float *X = randv(T * R, 1.0f), *Wd = malloc(sizeof(float) * (size_t)(R * C));
    float *y1 = malloc(sizeof(float) * (size_t)(T * C)),
          *y2 = malloc(sizeof(float) * (size_t)(T * C));
    float *y0 = malloc(sizeof(float) * (size_t)(T * C));
    for (int64_t r = 0; r < R; r++) k3_wmat_row(&m.w, r, 0, C, Wd + r * C);
    k3_tmatmul_ref(&m.w, X, T, y0);
    k3_tmatmul(&m.w, X, T, y1);
    k3_tmatmul_serial(&m.w, X, T, y2);
    CHECK(!memcmp(y1, y2, sizeof(float) * (size_t)(T * C)), "R=%lld C=%lld T=%lld threaded",
          (long long)R, (long long)C, (long long)T);
    for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < C; c++) {
            double mag = 0;
            for (int64_t r = 0; r < R; r++) mag += fabs((double)X[t * R + r] * Wd[r * C + c]);
            CHECK(fabs((double)y1[t * C + c] - y0[t * C + c]) <= (double)(R + 1) * 1.2e-7 * mag,
                  "R=%lld C=%lld T=%lld at (%lld, %lld)", (long long)R, (long long)C, (long long)T,
                  (long long)t, (long long)c);
        }
    free_mat(&m);
    free(X);
    free(Wd);
    free(y0);
    free(y1);
    free(y2);
}

TEST(tmatmul_within_bound_of_reference) {
    const int64_t Rs[] = {1, 5, 40}, Cs[] = {1, 7, 33}, Ts[] = {1, 3, 64, 65, 130};
    omp_set_num_threads(2);
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 5; c++) tmatmul_case(Rs[a], Cs[b], Ts[c], K3_W_BF16);
    tmatmul_case(9, 17, 70, K3_W_F32);
    tmatmul_case(9, 17, 70, K3_W_F16);
}

/* Wider than the vector version's stack row, and under K3_KERNELS=ref: the
 * reference itself. */
TEST(tmatmul_falls_back_to_reference) {
    const int64_t R = 3, T = 2;
    const int64_t Cs[] = {K3_TMATMUL_MAX_COLS + 1, 40};
    for (int i = 0; i < 2; i++) {
        const int64_t C = Cs[i];
        owned_mat m = make_mat(K3_W_F32, R, C, 0, 0, K3_W_BF16);
        float *X = randv(T * R, 1.0f);
        float *y0 = malloc(sizeof(float) * (size_t)(T * C)),
              *y1 = malloc(sizeof(float) * (size_t)(T * C));
        if (i == 1) k3_kernels_set_mode(K3_KERNELS_REF);
        k3_tmatmul_ref(&m.w, X, T, y0);
        k3_tmatmul(&m.w, X, T, y1);
        k3_kernels_set_mode(K3_KERNELS_AUTO);
        CHECK(!memcmp(y0, y1, sizeof(float) * (size_t)(T * C)), "C=%lld", (long long)C);
        free_mat(&m);
        free(X);
        free(y0);
        free(y1);
    }
}

int main(void) {
    t_seed(41);
    RUN(dot_sumsq_within_double_rounding_of_reference);
    RUN(mix_gives_the_reference_bits);
    RUN(conv_channels_give_the_reference_bits);
    RUN(tmatmul_within_bound_of_reference);
    RUN(tmatmul_falls_back_to_reference);
    return t_done();
}
