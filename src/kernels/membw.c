/* membw.c — streaming-read bandwidth measurement (see membw.h). */
#include "kernels/membw.h"
#include "base/mem.h"
#include "kernels/avx2_decode.h"
#include "kernels/runtime.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* XOR of every 32-byte word of [p, p+n) (n a multiple of 128). */
K3_AVX2 static uint64_t xor_avx2(const uint8_t *p, size_t n) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < n; i += 128) {
        a0 = _mm256_xor_si256(a0, _mm256_loadu_si256((const __m256i *)(p + i)));
        a1 = _mm256_xor_si256(a1, _mm256_loadu_si256((const __m256i *)(p + i + 32)));
        a2 = _mm256_xor_si256(a2, _mm256_loadu_si256((const __m256i *)(p + i + 64)));
        a3 = _mm256_xor_si256(a3, _mm256_loadu_si256((const __m256i *)(p + i + 96)));
    }
    __m256i a = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
    __m128i h = _mm_xor_si128(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    return (uint64_t)_mm_cvtsi128_si64(h) ^ (uint64_t)_mm_extract_epi64(h, 1);
}

static uint64_t xor_scalar(const uint8_t *p, size_t n) {
    uint64_t x = 0, w;
    for (size_t i = 0; i + 8 <= n; i += 8) {
        memcpy(&w, p + i, 8);
        x ^= w;
    }
    return x;
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

#define SPAN_BLOCK ((size_t)64 << 10) /* unit of the static split over threads */

double k3_membw_read_spans(const k3_span *s, int n, int passes) {
    /* Blocks of SPAN_BLOCK bytes over all spans (the last of a span shorter). */
    size_t nb = 0, total = 0;
    for (int i = 0; i < n; i++)
        nb += (s[i].bytes / 128 + SPAN_BLOCK / 128 - 1) / (SPAN_BLOCK / 128);
    if (!nb) return 0.0;
    const uint8_t **bp = malloc(nb * sizeof *bp);
    size_t *bl = malloc(nb * sizeof *bl), k = 0;
    if (!bp || !bl) {
        free(bp);
        free(bl);
        return 0.0;
    }
    for (int i = 0; i < n; i++) {
        size_t len = s[i].bytes & ~(size_t)127;
        for (size_t o = 0; o < len; o += SPAN_BLOCK, k++) {
            bp[k] = (const uint8_t *)s[i].p + o;
            bl[k] = len - o < SPAN_BLOCK ? len - o : SPAN_BLOCK;
            total += bl[k];
        }
    }
    if (passes < 1) passes = 1;
    double *rate = malloc(sizeof(double) * (size_t)passes);
    int avx2 = k3_cpu_has_avx2();
    volatile uint64_t sink = 0;
    for (int p = -1; p < passes; p++) { /* pass -1 pages the spans in, untimed */
        double t0 = k3_now();
        uint64_t x = 0;
#pragma omp parallel for schedule(static) reduction(^ : x)
        for (size_t b = 0; b < k; b++)
            x ^= avx2 ? xor_avx2(bp[b], bl[b]) : xor_scalar(bp[b], bl[b]);
        double dt = k3_now() - t0;
        sink ^= x;
        if (p >= 0) rate[p] = (double)total / (dt > 0 ? dt : 1e-9);
    }
    (void)sink;
    qsort(rate, (size_t)passes, sizeof(double), cmp_double);
    double med = rate[passes / 2];
    free(rate);
    free(bp);
    free(bl);
    return med;
}
