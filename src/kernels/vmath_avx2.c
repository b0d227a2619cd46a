/* vmath_avx2.c — AVX2+FMA versions of the vmath.h functions (8 floats a step).
 *
 * exp: Cody-Waite reduction x = n ln2 + r (|r| <= ln2/2, the ln2 split makes
 * n*ln2_hi exact), the Cephes degree-7 polynomial for e^r, and 2^n applied as
 * two factors 2^(n/2) so results in the denormal range and up to FLT_MAX come
 * out with one rounding. Inputs are clamped to [-104, 88.8] first, which
 * maps to exactly 0 and +inf as libm does; nan is passed through.
 * tanh: the Cephes odd polynomial for |x| < 0.625, else 1 - 2/(e^{2|x|} + 1)
 * with x's sign (saturates to +-1, keeps -0).
 * Tails (n % 8) go through the same code with masked loads and stores, so the
 * result of every element depends on its input only. */
#include "kernels/vmath.h"

#include <immintrin.h>
#include <math.h>

#define K3_AVX2 __attribute__((target("avx2,fma,f16c")))
#define K3_AVX2_INLINE static inline __attribute__((always_inline, target("avx2,fma,f16c")))

/* The lanes i < n of a masked access (n in 1..7). */
K3_AVX2_INLINE __m256i tail_mask(int64_t n) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), idx);
}

K3_AVX2_INLINE __m256 exp8(__m256 x) {
    const __m256 C1 = _mm256_set1_ps(0.693359375f), C2 = _mm256_set1_ps(-2.12194440e-4f);
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-104.0f)), _mm256_set1_ps(88.8f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, C1, xc);
    r = _mm256_fnmadd_ps(n, C2, r);
    __m256 p = _mm256_set1_ps(1.9875691500E-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507E-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073E-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894E-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459E-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201E-1f));
    __m256 e = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
    e = _mm256_add_ps(e, _mm256_set1_ps(1.0f));
    __m256i ni = _mm256_cvtps_epi32(n), n1 = _mm256_srai_epi32(ni, 1);
    __m256i n2 = _mm256_sub_epi32(ni, n1), bias = _mm256_set1_epi32(127);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    __m256 y = _mm256_mul_ps(_mm256_mul_ps(e, s1), s2);
    return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

K3_AVX2_INLINE __m256 tanh8(__m256 x) {
    const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f);
    __m256 ax = _mm256_andnot_ps(sign, x);
    __m256 z = _mm256_mul_ps(ax, ax);
    __m256 p = _mm256_set1_ps(-5.70498872745E-3f);
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(2.06390887954E-2f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-5.37397155531E-2f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(1.33314422036E-1f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-3.33332819422E-1f));
    __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(ax, z), p, ax);
    __m256 e = exp8(_mm256_add_ps(ax, ax));
    __m256 big = _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
    __m256 r = _mm256_blendv_ps(big, small, _mm256_cmp_ps(ax, _mm256_set1_ps(0.625f), _CMP_LT_OQ));
    return _mm256_or_ps(r, _mm256_and_ps(x, sign)); /* odd: |tanh| with x's sign, -0 kept */
}

/* x >= 0 ? 1/(1+e) : e/(1+e) with e = exp(-|x|), as the scalar k3_sigmoid. */
K3_AVX2_INLINE __m256 sigmoid8(__m256 x) {
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 e = exp8(_mm256_or_ps(x, _mm256_set1_ps(-0.0f)));
    __m256 num = _mm256_blendv_ps(e, one, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GE_OQ));
    return _mm256_div_ps(num, _mm256_add_ps(one, e));
}

K3_AVX2_INLINE __m256 silu8(__m256 x) {
    return _mm256_mul_ps(x, sigmoid8(x));
}

/* y = f(x) over n floats, the tail through masked loads and stores. */
#define K3_VMAP(f)                                                                                 \
    int64_t i = 0;                                                                                 \
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, f(_mm256_loadu_ps(x + i)));                 \
    if (i < n) {                                                                                   \
        __m256i m = tail_mask(n - i);                                                              \
        _mm256_maskstore_ps(y + i, m, f(_mm256_maskload_ps(x + i, m)));                            \
    }

K3_AVX2 void k3_vexp_avx2(const float *x, float *y, int64_t n){K3_VMAP(exp8)} K3_AVX2
    void k3_vtanh_avx2(const float *x, float *y, int64_t n){K3_VMAP(tanh8)} K3_AVX2
    void k3_vsigmoid_avx2(const float *x, float *y, int64_t n){K3_VMAP(sigmoid8)} K3_AVX2
    void k3_vsilu_avx2(const float *x, float *y, int64_t n){K3_VMAP(silu8)}

K3_AVX2_INLINE __m256 situ8(__m256 u, __m256 g, __m256 beta, __m256 lbeta, int clip) {
    __m256 act = _mm256_mul_ps(_mm256_mul_ps(beta, tanh8(_mm256_div_ps(g, beta))), sigmoid8(g));
    if (clip) u = _mm256_mul_ps(lbeta, tanh8(_mm256_div_ps(u, lbeta)));
    return _mm256_mul_ps(act, u);
}

K3_AVX2 void k3_vsitu_avx2(float *u, const float *g, int64_t n, float beta, float lbeta) {
    __m256 b = _mm256_set1_ps(beta), lb = _mm256_set1_ps(lbeta);
    int clip = lbeta > 0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(u + i, situ8(_mm256_loadu_ps(u + i), _mm256_loadu_ps(g + i), b, lb, clip));
    if (i < n) {
        __m256i m = tail_mask(n - i);
        __m256 r = situ8(_mm256_maskload_ps(u + i, m), _mm256_maskload_ps(g + i, m), b, lb, clip);
        _mm256_maskstore_ps(u + i, m, r);
    }
}

K3_AVX2_INLINE __m256d sq_lo(__m256 v, __m256d acc) {
    __m256d d = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
    return _mm256_fmadd_pd(d, d, acc);
}
K3_AVX2_INLINE __m256d sq_hi(__m256 v, __m256d acc) {
    __m256d d = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    return _mm256_fmadd_pd(d, d, acc);
}

/* Four double accumulators over 16 floats a step, then 8, then the masked tail. */
K3_AVX2 double k3_vsumsq_avx2(const float *x, int64_t n) {
    __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
        a0 = sq_lo(v0, a0), a1 = sq_hi(v0, a1), a2 = sq_lo(v1, a2), a3 = sq_hi(v1, a3);
    }
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        a0 = sq_lo(v, a0), a1 = sq_hi(v, a1);
    }
    if (i < n) {
        __m256 v = _mm256_maskload_ps(x + i, tail_mask(n - i));
        a2 = sq_lo(v, a2), a3 = sq_hi(v, a3);
    }
    __m256d s = _mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3));
    __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
    return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
}

/* Four doubles per step; the tail one element at a time, same arithmetic. */
K3_AVX2 void k3_vaxpy_d_avx2(double *y, double a, const float *x, int64_t n) {
    const __m256d av = _mm256_set1_pd(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256d p0 = _mm256_mul_pd(av, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
        __m256d p1 = _mm256_mul_pd(av, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
        _mm256_storeu_pd(y + i, _mm256_add_pd(_mm256_loadu_pd(y + i), p0));
        _mm256_storeu_pd(y + i + 4, _mm256_add_pd(_mm256_loadu_pd(y + i + 4), p1));
    }
    for (; i < n; i++) {
        __m128d p = _mm_mul_sd(_mm_set_sd(a), _mm_set_sd((double)x[i]));
        y[i] = _mm_cvtsd_f64(_mm_add_sd(_mm_set_sd(y[i]), p));
    }
}

/* Two double accumulators for each sum over 8 floats a step; the tail one
 * element at a time in double. */
K3_AVX2 void k3_vdot_sumsq_d_avx2(const float *v, const float *w, int64_t n, double *dot,
                                  double *ss) {
    __m256d a0 = _mm256_setzero_pd(), a1 = a0, s0 = a0, s1 = a0;
    int64_t d = 0;
    for (; d + 8 <= n; d += 8) {
        __m256 x = _mm256_loadu_ps(v + d), y = _mm256_loadu_ps(w + d);
        __m256d xl = _mm256_cvtps_pd(_mm256_castps256_ps128(x));
        __m256d xh = _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1));
        __m256d yl = _mm256_cvtps_pd(_mm256_castps256_ps128(y));
        __m256d yh = _mm256_cvtps_pd(_mm256_extractf128_ps(y, 1));
        a0 = _mm256_fmadd_pd(xl, yl, a0);
        a1 = _mm256_fmadd_pd(xh, yh, a1);
        s0 = _mm256_fmadd_pd(xl, xl, s0);
        s1 = _mm256_fmadd_pd(xh, xh, s1);
    }
    double ad[4], sd[4];
    _mm256_storeu_pd(ad, _mm256_add_pd(a0, a1));
    _mm256_storeu_pd(sd, _mm256_add_pd(s0, s1));
    double da = (ad[0] + ad[1]) + (ad[2] + ad[3]), ds = (sd[0] + sd[1]) + (sd[2] + sd[3]);
    for (; d < n; d++) {
        da += (double)v[d] * w[d];
        ds += (double)v[d] * v[d];
    }
    *dot = da;
    *ss = ds;
}

/* Four outputs a step, the rows in order, one FMA per row; the tail one
 * output at a time through fma(), the same arithmetic. */
K3_AVX2 void k3_vmix_d_avx2(const float *const *rows, int m, int64_t off, const double *wt,
                            int64_t n, float *o) {
    int64_t d = 0;
    for (; d + 4 <= n; d += 4) {
        __m256d a = _mm256_setzero_pd();
        for (int j = 0; j < m; j++) {
            __m256d c = _mm256_cvtps_pd(_mm_loadu_ps(rows[j] + off + d));
            a = _mm256_fmadd_pd(_mm256_set1_pd(wt[j]), c, a);
        }
        _mm_storeu_ps(o + d, _mm256_cvtpd_ps(a));
    }
    for (; d < n; d++) {
        double a = 0;
        for (int j = 0; j < m; j++) a = fma(wt[j], (double)rows[j][off + d], a);
        o[d] = (float)a;
    }
}
