/* fmapeak.c — one core's f32 FMA peak: 16 independent chains of 512-bit
 * FMAs in registers, CPU time of the thread, best of 5 (the figure the
 * "fraction of peak" of bench/RESULTS.md divides by). Each chain starts from
 * a different value: chains that start equal stay equal, and the compiler
 * folds them into one. Not built by the Makefile:
 *
 *     cc -O2 bench/fmapeak.c -o build/fmapeak && build/fmapeak
 *
 * Check `objdump -d build/fmapeak` shows 16 vfmadd...ps %zmm in the loop. */
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

static double cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

#define CHAIN(i) __m512 a##i = _mm512_add_ps(y, _mm512_set1_ps(i * 0.01f));
#define STEP(i) a##i = _mm512_fmadd_ps(a##i, x, y);
#define ALL(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11) M(12) M(13) M(14) M(15)

__attribute__((target("avx512f,fma"), noinline)) static float run(long n, float fx, float fy) {
    const __m512 x = _mm512_set1_ps(fx), y = _mm512_set1_ps(fy);
    ALL(CHAIN)
    for (long i = 0; i < n; i++) {
        ALL(STEP)
    }
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                             _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
    s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
    s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a12, a13), _mm512_add_ps(a14, a15)));
    return _mm512_reduce_add_ps(s);
}

int main(void) {
    const long n = 20000000;
    double best = 1e9, sum = 0;
    for (int r = 0; r < 5; r++) {
        double t = cpu();
        sum += run(n, 0.999f, 1e-4f);
        t = cpu() - t;
        if (t < best) best = t;
    }
    printf("%.1f GFLOP/s f32 FMA, 16 chains of 512 bits, best of 5 (checksum %g)\n",
           n * 16.0 * 32 / best / 1e9, sum);
    return 0;
}
