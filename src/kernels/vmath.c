/* vmath.c — the libm references of vmath.h and the run-time choice between
 * them and the AVX2 versions. */
#include "kernels/vmath.h"
#include "kernels/runtime.h"

#include <math.h>

static int use_vector(void) {
    return k3_kernels_active() != K3_KERNELS_REF;
}

static float sigmoid_ref(float x) {
    float e = expf(-fabsf(x));
    return x >= 0 ? 1.0f / (1.0f + e) : e / (1.0f + e);
}

void k3_vexp(const float *x, float *y, int64_t n) {
    if (use_vector()) {
        k3_vexp_avx2(x, y, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) y[i] = expf(x[i]);
}

void k3_vtanh(const float *x, float *y, int64_t n) {
    if (use_vector()) {
        k3_vtanh_avx2(x, y, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) y[i] = tanhf(x[i]);
}

void k3_vsigmoid(const float *x, float *y, int64_t n) {
    if (use_vector()) {
        k3_vsigmoid_avx2(x, y, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) y[i] = sigmoid_ref(x[i]);
}

void k3_vsilu(const float *x, float *y, int64_t n) {
    if (use_vector()) {
        k3_vsilu_avx2(x, y, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * sigmoid_ref(x[i]);
}

void k3_vsitu(float *u, const float *g, int64_t n, float beta, float lbeta) {
    if (use_vector()) {
        k3_vsitu_avx2(u, g, n, beta, lbeta);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        float act = beta * tanhf(g[i] / beta) * sigmoid_ref(g[i]);
        float up = lbeta > 0 ? lbeta * tanhf(u[i] / lbeta) : u[i];
        u[i] = act * up;
    }
}

double k3_vsumsq(const float *x, int64_t n) {
    if (use_vector()) return k3_vsumsq_avx2(x, n);
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    return ss;
}

void k3_vaxpy_d(double *y, double a, const float *x, int64_t n) {
    if (use_vector()) {
        k3_vaxpy_d_avx2(y, a, x, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        double p = a * (double)x[i]; /* no contraction into an FMA */
        y[i] = y[i] + p;
    }
}

void k3_vdot_sumsq_d(const float *v, const float *w, int64_t n, double *dot, double *ss) {
    if (use_vector()) {
        k3_vdot_sumsq_d_avx2(v, w, n, dot, ss);
        return;
    }
    double da = 0, ds = 0;
    for (int64_t i = 0; i < n; i++) {
        da += (double)v[i] * w[i];
        ds += (double)v[i] * v[i];
    }
    *dot = da;
    *ss = ds;
}

void k3_vmix_d(const float *const *rows, int m, int64_t off, const double *wt, int64_t n,
               float *o) {
    if (use_vector()) {
        k3_vmix_d_avx2(rows, m, off, wt, n, o);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        double a = 0;
        for (int j = 0; j < m; j++) a = fma(wt[j], (double)rows[j][off + i], a);
        o[i] = (float)a;
    }
}
