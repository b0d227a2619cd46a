/* test_kernels_vmath.c — the vector exp/tanh/sigmoid/SiLU/SiTU/sum-of-squares
 * (kernels/vmath.h) against their libm references: dense sweeps over the bit
 * patterns of each function's interesting range with the ulp error bound
 * asserted (and printed), edge values (0, -0, +-inf, nan, overflow, denormal
 * results), odd lengths (masked tails), and position independence (a result
 * does not depend on where in an array its element sits). */
#include "kernels/runtime.h"
#include "kernels/vmath.h"
#include "t.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef void (*vfn)(const float *, float *, int64_t);

/* Distance in units in the last place, over the ordered integer image of floats. */
static int64_t ulp_dist(float a, float b) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b) ? 0 : INT64_MAX;
    int32_t ia, ib;
    memcpy(&ia, &a, 4), memcpy(&ib, &b, 4);
    int64_t oa = ia < 0 ? (int64_t)INT32_MIN - ia : ia, ob = ib < 0 ? (int64_t)INT32_MIN - ib : ib;
    return oa > ob ? oa - ob : ob - oa;
}

/* Max ulp error of fn (vector) vs the same function in the reference mode over
 * every `step`-th float in [lo, hi] (both signs when lo < 0 < hi). */
static int64_t sweep(vfn fn, float lo, float hi, uint32_t step) {
    enum { N = 4099 };
    static float x[N], yv[N], yr[N];
    int64_t worst = 0;
    int n = 0;
    for (double s = -1; s <= 1; s += 2) {
        float a = s < 0 ? (lo < 0 ? 0 : -1) : (hi > 0 ? 0 : -1);
        if (a < 0) continue;
        float end = s < 0 ? -lo : hi;
        for (uint32_t b = 0;; b += step) {
            float v;
            memcpy(&v, &b, 4);
            if (!(v <= end) || b > 0x7f7fffffu) break;
            x[n++] = (float)s * v;
            if (n == N) {
                k3_kernels_set_mode(K3_KERNELS_AUTO);
                fn(x, yv, n);
                k3_kernels_set_mode(K3_KERNELS_REF);
                fn(x, yr, n);
                for (int i = 0; i < n; i++) {
                    int64_t d = ulp_dist(yv[i], yr[i]);
                    if (d > worst) worst = d;
                }
                n = 0;
            }
        }
    }
    if (n) {
        k3_kernels_set_mode(K3_KERNELS_AUTO);
        fn(x, yv, n);
        k3_kernels_set_mode(K3_KERNELS_REF);
        fn(x, yr, n);
        for (int i = 0; i < n; i++) {
            int64_t d = ulp_dist(yv[i], yr[i]);
            if (d > worst) worst = d;
        }
    }
    k3_kernels_set_mode(K3_KERNELS_AUTO);
    return worst;
}

/* SiTU as a function of one argument: the clipped up-projection (gate fixed)
 * and the gate activation (up fixed, no clip). */
static float situ_buf[4099];
static void situ_up(const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) situ_buf[i] = 0.5f, y[i] = x[i];
    k3_vsitu(y, situ_buf, n, 4.0f, 25.0f);
}
static void situ_gate(const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = 1.5f;
    k3_vsitu(y, x, n, 4.0f, 0.0f);
}

#define STEP 53u /* every 53rd float: ~20 M points over the sweeps */

TEST(exp_within_1ulp_of_libm) {
    int64_t e = sweep(k3_vexp, -104.0f, 89.0f, STEP);
    printf("  exp: max %lld ulp\n", (long long)e);
    CHECK(e <= 1, "exp %lld ulp", (long long)e);
}

TEST(tanh_within_2ulp_of_libm) {
    int64_t e = sweep(k3_vtanh, -20.0f, 20.0f, STEP);
    printf("  tanh: max %lld ulp\n", (long long)e);
    CHECK(e <= 2, "tanh %lld ulp", (long long)e);
}

TEST(sigmoid_2ulp_silu_3ulp_of_libm) {
    int64_t s = sweep(k3_vsigmoid, -110.0f, 110.0f, STEP);
    /* below -85 SiLU's result is denormal and x (~100) scales sigmoid's
     * absolute error there: checked in absolute terms by edge_values_as_libm */
    int64_t l = sweep(k3_vsilu, -85.0f, 110.0f, STEP);
    printf("  sigmoid: max %lld ulp, silu: max %lld ulp\n", (long long)s, (long long)l);
    CHECK(s <= 2 && l <= 3, "sigmoid %lld silu %lld", (long long)s, (long long)l);
}

TEST(situ_within_6ulp_of_scalar) {
    int64_t u = sweep(situ_up, -200.0f, 200.0f, 2 * STEP);
    int64_t g = sweep(situ_gate, -85.0f, 200.0f, 2 * STEP);
    printf("  situ: max %lld ulp (up), %lld ulp (gate)\n", (long long)u, (long long)g);
    CHECK(u <= 6 && g <= 6, "situ %lld %lld ulp", (long long)u, (long long)g);
}

/* Edge inputs must give exactly what libm gives (nan as nan). */
TEST(edge_values_as_libm) {
    float dn;
    uint32_t dnb = 1; /* the smallest denormal */
    memcpy(&dn, &dnb, 4);
    float x[] = {0.0f,     -0.0f,    INFINITY, -INFINITY, NAN,     88.7f,    88.72283f,
                 88.7229f, 89.0f,    1e30f,    -87.3f,    -100.0f, -103.9f,  -103.97f,
                 -104.0f,  -200.0f,  -1e30f,   dn,        -dn,     1e-30f,   0.625f,
                 -0.625f,  0.62499f, 9.1f,     -9.1f,     1e-45f,  3.0e-39f, -50.0f};
    int n = (int)(sizeof x / sizeof x[0]);
    vfn fns[] = {k3_vexp, k3_vtanh, k3_vsigmoid, k3_vsilu};
    const char *names[] = {"exp", "tanh", "sigmoid", "silu"};
    for (int f = 0; f < 4; f++) {
        float yv[32], yr[32];
        fns[f](x, yv, n);
        k3_kernels_set_mode(K3_KERNELS_REF);
        fns[f](x, yr, n);
        k3_kernels_set_mode(K3_KERNELS_AUTO);
        for (int i = 0; i < n; i++) {
            int exact = isinf(yr[i]) || yr[i] == 0 || fabsf(yr[i]) == 1;
            int64_t d = ulp_dist(yv[i], yr[i]);
            int ok = isnan(yr[i]) ? isnan(yv[i]) /* the sign of a nan is not meaningful */
                     : exact      ? d == 0 && signbit(yv[i]) == signbit(yr[i])
                     : fabsf(yr[i]) < 1e-36f ? fabsf(yv[i] - yr[i]) < 1e-43f /* denormal */
                                             : d <= 2;
            CHECK(ok, "%s(%g) = %g, libm %g", names[f], (double)x[i], (double)yv[i], (double)yr[i]);
        }
    }
}

/* An element's result does not depend on its offset or on the array length. */
TEST(results_independent_of_position) {
    enum { N = 133 };
    float x[N], full[N], part[N];
    for (int i = 0; i < N; i++) x[i] = (float)t_rand() * 12;
    vfn fns[] = {k3_vexp, k3_vtanh, k3_vsigmoid, k3_vsilu};
    for (int f = 0; f < 4; f++) {
        fns[f](x, full, N);
        for (int off = 0; off < 9; off++)
            for (int len = 1; off + len <= N; len += 13) {
                fns[f](x + off, part, len);
                CHECK(!memcmp(part, full + off, sizeof(float) * (size_t)len), "f %d off %d len %d",
                      f, off, len);
            }
    }
}

TEST(situ_odd_lengths_match_scalar) {
    for (int n = 1; n < 40; n += 3) {
        float u[40], g[40], uv[40], ur[40];
        for (int i = 0; i < n; i++) u[i] = (float)t_rand() * 60, g[i] = (float)t_rand() * 20;
        memcpy(uv, u, sizeof u), memcpy(ur, u, sizeof u);
        k3_vsitu(uv, g, n, 4.0f, 25.0f);
        k3_kernels_set_mode(K3_KERNELS_REF);
        k3_vsitu(ur, g, n, 4.0f, 25.0f);
        k3_kernels_set_mode(K3_KERNELS_AUTO);
        for (int i = 0; i < n; i++) CHECK(ulp_dist(uv[i], ur[i]) <= 6, "n %d i %d", n, i);
    }
}

TEST(sumsq_matches_double_sum) {
    int sizes[] = {0, 1, 7, 8, 15, 16, 17, 33, 130, 1023};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int n = sizes[s];
        float x[1024];
        double ref = 0;
        for (int i = 0; i < n; i++) x[i] = (float)t_rand() * 5, ref += (double)x[i] * x[i];
        CHECK_NEAR(k3_vsumsq(x, n), ref, 1e-12 * (ref + 1));
    }
}

/* The vector y += a*x in double gives the scalar reference's bits (a
 * multiply then an add, no FMA) on lengths around the vector width. */
TEST(axpy_d_matches_scalar_bits) {
    for (int n = 0; n < 40; n++) {
        float x[40];
        double yv[40], yr[40], a = t_rand() * 3;
        for (int i = 0; i < n; i++) x[i] = (float)t_rand() * 7, yv[i] = yr[i] = t_rand() * 1e3;
        k3_vaxpy_d(yv, a, x, n);
        k3_kernels_set_mode(K3_KERNELS_REF);
        k3_vaxpy_d(yr, a, x, n);
        k3_kernels_set_mode(K3_KERNELS_AUTO);
        for (int i = 0; i < n; i++) {
            double want = yr[i];
            CHECK(!memcmp(&yv[i], &want, sizeof want), "n %d i %d: %.17g vs %.17g", n, i, yv[i],
                  want);
        }
        CHECK(n == 0 || yr[0] != 0, "n %d: reference left y unchanged", n);
    }
}

int main(void) {
    RUN(exp_within_1ulp_of_libm);
    RUN(tanh_within_2ulp_of_libm);
    RUN(sigmoid_2ulp_silu_3ulp_of_libm);
    RUN(situ_within_6ulp_of_scalar);
    RUN(edge_values_as_libm);
    RUN(results_independent_of_position);
    RUN(situ_odd_lengths_match_scalar);
    RUN(sumsq_matches_double_sum);
    RUN(axpy_d_matches_scalar_bits);
    return t_done();
}
