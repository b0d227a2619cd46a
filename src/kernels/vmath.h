/* vmath.h — vector elementwise math for the forward pass: exp, tanh, sigmoid,
 * SiLU, SiTU, and the double-accumulated sums (a sum of squares, a dot
 * product beside it, a weighted sum of rows).
 *
 * Each function has a scalar reference built on libm (chosen by
 * K3_KERNELS=ref / k3_kernels_set_mode(K3_KERNELS_REF), or where the CPU lacks
 * AVX2+FMA) and an AVX2+FMA polynomial version (vmath_avx2.c). The vector
 * versions handle the last n % 8 elements with masked loads through the same
 * instruction sequence, so every element's result depends only on its input,
 * never on its position or on how callers split an array over threads.
 *
 * Accuracy of the vector versions against libm (dense sweeps and edge values
 * in tests/test_kernels_vmath.c): exp <= 1 ulp, tanh <= 2, sigmoid <= 2,
 * SiLU <= 3 (normal results), SiTU <= 6 against the same formula on libm;
 * inf, nan, overflow, +-0 and denormal results as libm gives them. */
#ifndef K3_KERNELS_VMATH_H
#define K3_KERNELS_VMATH_H

#include <stdint.h>

/* y[i] = f(x[i]) for i < n; y may alias x. */
void k3_vexp(const float *x, float *y, int64_t n);
void k3_vtanh(const float *x, float *y, int64_t n);
/* sigmoid(x) = 1/(1+e^-x), computed as e/(1+e) with e = exp(-|x|) for x < 0. */
void k3_vsigmoid(const float *x, float *y, int64_t n);
/* silu(x) = x * sigmoid(x). */
void k3_vsilu(const float *x, float *y, int64_t n);
/* u[i] <- beta*tanh(g/beta)*sigmoid(g) * (lbeta > 0 ? lbeta*tanh(u/lbeta) : u). */
void k3_vsitu(float *u, const float *g, int64_t n, float beta, float lbeta);
/* sum of x[i]^2 accumulated in double (the order depends only on n). */
double k3_vsumsq(const float *x, int64_t n);

/* y[i] += a * (double)x[i] for i < n: a double multiply, then a double add
 * (no fused multiply-add), so the vector version gives the scalar bits. */
void k3_vaxpy_d(double *y, double a, const float *x, int64_t n);

/* *dot = sum_i v[i] w[i] and *ss = sum_i v[i]^2 for i < n, accumulated in
 * double (the order depends only on n): the Block AttnRes logits. */
void k3_vdot_sumsq_d(const float *v, const float *w, int64_t n, double *dot, double *ss);

/* o[i] = sum_j wt[j] rows[j][off + i] for i < n, j < m, accumulated in double
 * with one fused multiply-add per row in row order and rounded once to f32:
 * the vector version gives the scalar bits (the Block AttnRes mix). */
void k3_vmix_d(const float *const *rows, int m, int64_t off, const double *wt, int64_t n, float *o);

/* The AVX2 implementations (vmath_avx2.c); call only where k3_cpu_has_avx2(). */
void k3_vexp_avx2(const float *x, float *y, int64_t n);
void k3_vtanh_avx2(const float *x, float *y, int64_t n);
void k3_vsigmoid_avx2(const float *x, float *y, int64_t n);
void k3_vsilu_avx2(const float *x, float *y, int64_t n);
void k3_vsitu_avx2(float *u, const float *g, int64_t n, float beta, float lbeta);
double k3_vsumsq_avx2(const float *x, int64_t n);
void k3_vaxpy_d_avx2(double *y, double a, const float *x, int64_t n);
void k3_vdot_sumsq_d_avx2(const float *v, const float *w, int64_t n, double *dot, double *ss);
void k3_vmix_d_avx2(const float *const *rows, int m, int64_t off, const double *wt, int64_t n,
                    float *o);

#endif
