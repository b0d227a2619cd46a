/* attnres.c — Block Attention Residuals mixing (spec §2.3): per token, softmax
 * over candidates of (c_j . w) / rms(c_j), then the weighted sum of the raw
 * (un-normalized) candidates.
 *
 * The fast mix reduces c_j . w and c_j . c_j in double lanes over fixed chunks
 * of ATTNRES_CHUNK columns and adds the chunk sums in chunk order, so the
 * logits are the same whichever thread computed which chunk. Many tokens:
 * threads split the tokens. One token (decode): threads split the chunks of D
 * for the sums and for the weighted sum, and every thread forms the same
 * softmax from the shared chunk sums. Both give the bits of one thread. */
#include "kernels/cpu.h"
#include "base/par.h"
#include "model/model.h"

#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define ATTNRES_MAX 4096
#define ATTNRES_CHUNK 256 /* columns per partial sum: fixed, never the thread count */

#define AR_AVX2 __attribute__((target("avx2,fma")))

void k3_attnres_mix_ref(float *const *R, int n, const float *p, const float *w, int64_t T,
                        int64_t D, double eps, float *out) {
    if (n == 0) {
        memcpy(out, p, sizeof(float) * (size_t)(T * D));
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < T; t++) {
        double logit[ATTNRES_MAX + 1], mx = -INFINITY, sum = 0;
        for (int j = 0; j <= n; j++) {
            const float *v = (j < n ? R[j] : p) + t * D;
            double dot = 0, ss = 0;
            for (int64_t d = 0; d < D; d++) {
                dot += (double)v[d] * w[d];
                ss += (double)v[d] * v[d];
            }
            logit[j] = dot / sqrt(ss / (double)D + eps);
            mx = logit[j] > mx ? logit[j] : mx;
        }
        for (int j = 0; j <= n; j++) sum += (logit[j] = exp(logit[j] - mx));
        float *o = out + t * D;
        for (int64_t d = 0; d < D; d++) {
            double a = 0;
            for (int j = 0; j <= n; j++) a += logit[j] * (double)(j < n ? R[j] : p)[t * D + d];
            o[d] = (float)(a / sum);
        }
    }
}

/* Candidate j of the mix: a block snapshot, or the current partial sum p. */
static const float *cand(float *const *R, int n, const float *p, int j) {
    return j < n ? R[j] : p;
}

/* dot = v[d0..d1) . w[d0..d1), ss = v . v over the same range, in double lanes. */
AR_AVX2 static void chunk_sums_avx2(const float *v, const float *w, int64_t d0, int64_t d1,
                                    double *dot, double *ss) {
    __m256d a0 = _mm256_setzero_pd(), a1 = a0, s0 = a0, s1 = a0;
    int64_t d = d0;
    for (; d + 8 <= d1; d += 8) {
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
    for (; d < d1; d++) {
        da += (double)v[d] * w[d];
        ds += (double)v[d] * v[d];
    }
    *dot = da;
    *ss = ds;
}

/* o[d0..d1) = sum_j wt[j] c_j[d0..d1) in double, wt already normalized. */
AR_AVX2 static void mix_range_avx2(float *const *R, int n, const float *p, int64_t off,
                                   const double *wt, int64_t d0, int64_t d1, float *o) {
    int64_t d = d0;
    for (; d + 4 <= d1; d += 4) {
        __m256d a = _mm256_setzero_pd();
        for (int j = 0; j <= n; j++) {
            __m256d c = _mm256_cvtps_pd(_mm_loadu_ps(cand(R, n, p, j) + off + d));
            a = _mm256_fmadd_pd(_mm256_set1_pd(wt[j]), c, a);
        }
        _mm_storeu_ps(o + d, _mm256_cvtpd_ps(a));
    }
    for (; d < d1; d++) {
        double a = 0;
        for (int j = 0; j <= n; j++) a = fma(wt[j], (double)cand(R, n, p, j)[off + d], a);
        o[d] = (float)a;
    }
}

/* Softmax weights of the n+1 candidates from their chunk sums part[j][c][2]. */
static void weights_from_sums(const double *part, int n, int nc, int64_t D, double eps,
                              double *wt) {
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j <= n; j++) {
        double dot = 0, ss = 0;
        for (int c = 0; c < nc; c++) {
            dot += part[(j * nc + c) * 2];
            ss += part[(j * nc + c) * 2 + 1];
        }
        wt[j] = dot / sqrt(ss / (double)D + eps);
        mx = wt[j] > mx ? wt[j] : mx;
    }
    for (int j = 0; j <= n; j++) sum += (wt[j] = exp(wt[j] - mx));
    for (int j = 0; j <= n; j++) wt[j] /= sum;
}

static int64_t chunk_end(int c, int64_t D) {
    int64_t e = (int64_t)(c + 1) * ATTNRES_CHUNK;
    return e < D ? e : D;
}

/* Token t entirely on the calling thread; part has (n+1)*nc*2 doubles. */
static void mix_token(float *const *R, int n, const float *p, const float *w, int64_t t, int64_t D,
                      double eps, double *part, double *wt, float *out) {
    int nc = (int)((D + ATTNRES_CHUNK - 1) / ATTNRES_CHUNK);
    for (int j = 0; j <= n; j++)
        for (int c = 0; c < nc; c++)
            chunk_sums_avx2(cand(R, n, p, j) + t * D, w, (int64_t)c * ATTNRES_CHUNK,
                            chunk_end(c, D), &part[(j * nc + c) * 2], &part[(j * nc + c) * 2 + 1]);
    weights_from_sums(part, n, nc, D, eps, wt);
    mix_range_avx2(R, n, p, t * D, wt, 0, D, out + t * D);
}

/* mix_one_split: one token, chunks of D split over the threads (the decode
 * step), from this many candidate floats ((n + 1) x D) on: below it the mix is a few
 * microseconds on one thread, less than the region's start and its three
 * barriers (each a futex call in libgomp). Same bits either way: the chunk
 * sums and each output element do not depend on the split. */
#define ONE_SPLIT_MIN 65536

static void mix_one_split(float *const *R, int n, const float *p, const float *w, int64_t D,
                          double eps, float *out) {
    int nc = (int)((D + ATTNRES_CHUNK - 1) / ATTNRES_CHUNK);
    double part[2 * 64 * 32]; /* (n+1) * nc <= 2048: checked by the caller */
#pragma omp parallel
    {
        double wt[64];
#pragma omp for schedule(static)
        for (int k = 0; k < (n + 1) * nc; k++)
            chunk_sums_avx2(cand(R, n, p, k / nc), w, (int64_t)(k % nc) * ATTNRES_CHUNK,
                            chunk_end(k % nc, D), &part[k * 2], &part[k * 2 + 1]);
        weights_from_sums(part, n, nc, D, eps, wt); /* after the for's barrier: same on all */
#pragma omp for schedule(static)
        for (int c = 0; c < nc; c++)
            mix_range_avx2(R, n, p, 0, wt, (int64_t)c * ATTNRES_CHUNK, chunk_end(c, D), out);
    }
}

/* The tokens of mix_tokens, shared by the threads of a region or, called
 * outside one, all on the calling thread (the orphaned `omp for`). */
static void mix_token_rows(float *const *R, int n, const float *p, const float *w, int64_t T,
                           int64_t D, double eps, float *out) {
    int nc = (int)((D + ATTNRES_CHUNK - 1) / ATTNRES_CHUNK);
    double part_s[2 * 64 * 32], wt_s[64];
    double *part = part_s, *wt = wt_s;
    double *heap = NULL;
    if ((n + 1) * nc > 64 * 32 || n + 1 > 64) { /* bigger than any K3 config: heap */
        heap = malloc(sizeof(double) * (size_t)((n + 1) * nc * 2 + n + 1));
        part = heap;
        wt = heap + (n + 1) * nc * 2;
    }
#pragma omp for schedule(static)
    for (int64_t t = 0; t < T; t++) mix_token(R, n, p, w, t, D, eps, part, wt, out);
    free(heap);
}

static void mix_tokens(float *const *R, int n, const float *p, const float *w, int64_t T, int64_t D,
                       double eps, float *out) {
    if (k3_par_direct(T * D * (n + 1) >= 32768)) { /* no region of one thread (base/par.h) */
        mix_token_rows(R, n, p, w, T, D, eps, out);
        return;
    }
#pragma omp parallel
    mix_token_rows(R, n, p, w, T, D, eps, out);
}

void k3_attnres_mix(float *const *R, int n, const float *p, const float *w, int64_t T, int64_t D,
                    double eps, float *out) {
    if (n == 0) {
        if (out != p) memcpy(out, p, sizeof(float) * (size_t)(T * D));
        return;
    }
    if (k3_kernels_active() == K3_KERNELS_REF || !k3_cpu_has_avx2()) { /* cached (cpu.c) */
        k3_attnres_mix_ref(R, n, p, w, T, D, eps, out);
        return;
    }
    int nc = (int)((D + ATTNRES_CHUNK - 1) / ATTNRES_CHUNK);
    if (T == 1 && n + 1 <= 64 && (n + 1) * nc <= 64 * 32 &&
        k3_par_worth((n + 1) * D >= ONE_SPLIT_MIN))
        mix_one_split(R, n, p, w, D, eps, out);
    else
        mix_tokens(R, n, p, w, T, D, eps, out);
}
