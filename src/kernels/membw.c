/* membw.c — streaming-read bandwidth measurement (see membw.h). */
#include "kernels/membw.h"
#include "base/mem.h"
#include "kernels/avx2_decode.h"
#include "kernels/cpu.h"

#include <stdint.h>
#include <stdlib.h>

/* Sum of all floats in [p, p+n): the result is used so the loads stay. */
K3_AVX2 static float sum_avx2(const float *p, size_t n) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 32 <= n; i += 32) {
        a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
        a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
        a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
        a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
    }
    return k3_hsum256(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}

static float sum_scalar(const float *p, size_t n) {
    float s = 0;
    for (size_t i = 0; i < n; i++) s += p[i];
    return s;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double k3_membw_read(size_t bytes, int passes) {
    size_t n = bytes / sizeof(float) & ~(size_t)1023;
    float *buf = k3_alloc(n * sizeof(float)); /* zero-filled: pages are touched */
    if (!buf) return 0.0;
    if (passes < 1) passes = 1;
    double *rate = malloc(sizeof(double) * (size_t)passes);
    int avx2 = k3_cpu_has_avx2();
    volatile float sink = 0;
    for (int p = 0; p < passes; p++) {
        double t0 = k3_now();
        float total = 0;
        /* static schedule over 1024-float blocks: each thread streams its share */
#pragma omp parallel for schedule(static) reduction(+ : total)
        for (size_t b = 0; b < n / 1024; b++)
            total += avx2 ? sum_avx2(buf + b * 1024, 1024) : sum_scalar(buf + b * 1024, 1024);
        double dt = k3_now() - t0;
        sink += total;
        rate[p] = (double)(n * sizeof(float)) / (dt > 0 ? dt : 1e-9);
    }
    (void)sink;
    qsort(rate, (size_t)passes, sizeof(double), cmp_double);
    double med = rate[passes / 2];
    free(rate);
    k3_free(buf);
    return med;
}
