/* kda_ops_avx2.c — the AVX2+FMA versions of the kda_ops.h ops: the short
 * conv of 8 channels with kernel 4 (channels in lanes, the reference's bits)
 * and the delta-rule step (the row's dots in double lanes). */
#include "kernels/avx2.h"
#include "kernels/kda_ops.h"

#include <immintrin.h>
#include <math.h>

#define K3_AVX2_INLINE static inline __attribute__((always_inline, target("avx2,fma,f16c")))

/* The reference conv (kda_ops.c) for 8 adjacent channels with kernel 4 (the release value):
 * channels in vector lanes, the same double products and sums in the same
 * order (the reference keeps the product in its own statement, so no
 * compiler contracts it into an FMA), so every lane's bits are those of
 * the reference. z, w and state as in k3_conv_channels, with
 * channel i at +i (w at +i*4). */
__attribute__((target("avx2,fma,f16c"))) void
k3_conv8_k4_avx2(float *z, int64_t T, int64_t ld, const float *w, float *state, int64_t sld) {
    __m256d wl[4], wh[4], hl[3], hh[3];
    for (int j = 0; j < 4; j++) {
        wl[j] = _mm256_setr_pd(w[j], w[4 + j], w[8 + j], w[12 + j]);
        wh[j] = _mm256_setr_pd(w[16 + j], w[20 + j], w[24 + j], w[28 + j]);
    }
    for (int j = 0; j < 3; j++) {
        __m256 s = _mm256_loadu_ps(state + j * sld);
        hl[j] = _mm256_cvtps_pd(_mm256_castps256_ps128(s));
        hh[j] = _mm256_cvtps_pd(_mm256_extractf128_ps(s, 1));
    }
    for (int64_t t = 0; t < T; t++) {
        __m256 zt = _mm256_loadu_ps(z + t * ld);
        __m256d zl = _mm256_cvtps_pd(_mm256_castps256_ps128(zt));
        __m256d zh = _mm256_cvtps_pd(_mm256_extractf128_ps(zt, 1));
        __m256d ul = _mm256_mul_pd(wl[3], zl), uh = _mm256_mul_pd(wh[3], zh);
        for (int j = 0; j < 3; j++) {
            ul = _mm256_add_pd(ul, _mm256_mul_pd(wl[j], hl[j]));
            uh = _mm256_add_pd(uh, _mm256_mul_pd(wh[j], hh[j]));
        }
        hl[0] = hl[1], hl[1] = hl[2], hl[2] = zl;
        hh[0] = hh[1], hh[1] = hh[2], hh[2] = zh;
        _mm256_storeu_ps(z + t * ld, _mm256_set_m128(_mm256_cvtpd_ps(uh), _mm256_cvtpd_ps(ul)));
    }
    for (int j = 0; j < 3; j++)
        _mm256_storeu_ps(state + j * sld,
                         _mm256_set_m128(_mm256_cvtpd_ps(hh[j]), _mm256_cvtpd_ps(hl[j])));
}

K3_AVX2_INLINE __m256d lo_pd(__m256 v) {
    return _mm256_cvtps_pd(_mm256_castps256_ps128(v));
}
K3_AVX2_INLINE __m256d hi_pd(__m256 v) {
    return _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
}
K3_AVX2_INLINE double hsum_pd(__m256d a, __m256d b, __m256d c, __m256d d) {
    __m256d s = _mm256_add_pd(_mm256_add_pd(a, b), _mm256_add_pd(c, d));
    __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
    return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
}

/* Si *= alpha, then return Si . k in double (kd = k widened). Four
 * accumulators over 16 floats a step hide the FMA latency. */
K3_AVX2_INLINE double decay_dot(float *Si, const float *alpha, const float *k, const double *kd,
                                int dk) {
    __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
    int j = 0;
    for (; j + 16 <= dk; j += 16) {
        __m256 s0 = _mm256_mul_ps(_mm256_loadu_ps(Si + j), _mm256_loadu_ps(alpha + j));
        __m256 s1 = _mm256_mul_ps(_mm256_loadu_ps(Si + j + 8), _mm256_loadu_ps(alpha + j + 8));
        _mm256_storeu_ps(Si + j, s0), _mm256_storeu_ps(Si + j + 8, s1);
        a0 = _mm256_fmadd_pd(lo_pd(s0), _mm256_loadu_pd(kd + j), a0);
        a1 = _mm256_fmadd_pd(hi_pd(s0), _mm256_loadu_pd(kd + j + 4), a1);
        a2 = _mm256_fmadd_pd(lo_pd(s1), _mm256_loadu_pd(kd + j + 8), a2);
        a3 = _mm256_fmadd_pd(hi_pd(s1), _mm256_loadu_pd(kd + j + 12), a3);
    }
    for (; j + 8 <= dk; j += 8) {
        __m256 s0 = _mm256_mul_ps(_mm256_loadu_ps(Si + j), _mm256_loadu_ps(alpha + j));
        _mm256_storeu_ps(Si + j, s0);
        a0 = _mm256_fmadd_pd(lo_pd(s0), _mm256_loadu_pd(kd + j), a0);
        a1 = _mm256_fmadd_pd(hi_pd(s0), _mm256_loadu_pd(kd + j + 4), a1);
    }
    double m = hsum_pd(a0, a1, a2, a3);
    for (; j < dk; j++) {
        Si[j] *= alpha[j];
        m += (double)Si[j] * k[j];
    }
    return m;
}

/* Si += delta k (one FMA rounding), then return Si . q in double. */
K3_AVX2_INLINE double update_dot(float *Si, float delta, const float *k, const double *qd,
                                 const float *q, int dk) {
    __m256 dl = _mm256_set1_ps(delta);
    __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
    int j = 0;
    for (; j + 16 <= dk; j += 16) {
        __m256 s0 = _mm256_fmadd_ps(dl, _mm256_loadu_ps(k + j), _mm256_loadu_ps(Si + j));
        __m256 s1 = _mm256_fmadd_ps(dl, _mm256_loadu_ps(k + j + 8), _mm256_loadu_ps(Si + j + 8));
        _mm256_storeu_ps(Si + j, s0), _mm256_storeu_ps(Si + j + 8, s1);
        a0 = _mm256_fmadd_pd(lo_pd(s0), _mm256_loadu_pd(qd + j), a0);
        a1 = _mm256_fmadd_pd(hi_pd(s0), _mm256_loadu_pd(qd + j + 4), a1);
        a2 = _mm256_fmadd_pd(lo_pd(s1), _mm256_loadu_pd(qd + j + 8), a2);
        a3 = _mm256_fmadd_pd(hi_pd(s1), _mm256_loadu_pd(qd + j + 12), a3);
    }
    for (; j + 8 <= dk; j += 8) {
        __m256 s0 = _mm256_fmadd_ps(dl, _mm256_loadu_ps(k + j), _mm256_loadu_ps(Si + j));
        _mm256_storeu_ps(Si + j, s0);
        a0 = _mm256_fmadd_pd(lo_pd(s0), _mm256_loadu_pd(qd + j), a0);
        a1 = _mm256_fmadd_pd(hi_pd(s0), _mm256_loadu_pd(qd + j + 4), a1);
    }
    double o = hsum_pd(a0, a1, a2, a3);
    for (; j < dk; j++) {
        Si[j] = fmaf(delta, k[j], Si[j]);
        o += (double)Si[j] * q[j];
    }
    return o;
}

/* Each row of S is touched twice in a row (decay + k-dot, update + q-dot)
 * while it sits in L1. */
__attribute__((target("avx2,fma,f16c"))) void k3_kda_step_avx2(float *S, int dk, int dv,
                                                               const float *q, const float *k,
                                                               const float *v, const float *alpha,
                                                               float beta, float *y) {
    double kd[K3_KDA_VEC_MAX_DK], qd[K3_KDA_VEC_MAX_DK];
    for (int j = 0; j < dk; j++) kd[j] = k[j], qd[j] = q[j];
    for (int i = 0; i < dv; i++) {
        float *Si = S + (int64_t)i * dk;
        double m = decay_dot(Si, alpha, k, kd, dk);
        float delta = beta * (v[i] - (float)m);
        y[i] = (float)update_dot(Si, delta, k, qd, q, dk);
    }
}
