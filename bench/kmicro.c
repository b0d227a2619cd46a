/* kmicro.c — single-thread kernel timing by thread CPU time (robust on shared machines).
 *
 * Times k3_matvec (T = 1) or k3_matmul on an R x K matrix of f32-derived
 * weights: bits 0 = bf16, 2..8 = MLX affine group 64 (bf16 scales),
 * 104 = MXFP4. Best of 7 calls, CPU time of the calling thread, 1 OpenMP
 * thread. Not built by the Makefile:
 *
 *     cc -O2 -fopenmp -Iinclude -Isrc bench/kmicro.c build/libk3.a -lm -o build/kmicro
 *     build/kmicro 512 4096 1 4      # R K T bits
 *     K3_KMICRO_FEW=1 build/kmicro 256 512 6 0   # k3_matmul_few instead (T = 1 too)
 *     K3_KMICRO_NB=8 build/kmicro 512 256 1 104  # k3_matvec_colblocks_serial, 8 blocks
 *     K3_KMICRO_INNER=100 build/kmicro 256 512 1 4  # 100 calls per clock reading
 */
#include "kernels/matmul.h"
#include "quant/quantize.h"
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}
int main(int argc, char **argv) {
    omp_set_num_threads(1);
    int64_t R = atoi(argv[1]), K = atoi(argv[2]), T = atoi(argv[3]);
    int bits = argc > 4 ? atoi(argv[4]) : 0;
    float *W = malloc(4 * R * K), *X = malloc(4 * K * T), *Y = malloc(4 * R * T);
    for (int64_t i = 0; i < R * K; i++) W[i] = (float)((i * 7919) % 2001 - 1000) * 1e-3f;
    for (int64_t i = 0; i < K * T; i++) X[i] = (float)((i * 31) % 2001 - 1000) * 1e-3f;
    k3_wmat w = {0};
    uint8_t *c = malloc(R * K), *s = malloc(R * K), *b = malloc(R * K);
    uint16_t *h = malloc(2 * R * K);
    if (bits == 0) {
        for (int64_t i = 0; i < R * K; i++) {
            uint32_t u;
            memcpy(&u, &W[i], 4);
            h[i] = u >> 16;
        }
        w.fmt = K3_W_BF16;
        w.rows = R;
        w.cols = K;
        w.data = (uint8_t *)h;
        w.row_stride = 2 * K;
    } else if (bits == 4 + 100) {
        k3_quantize_mxfp4(W, R, K, c, s);
        w = k3_wmat_mxfp4(R, K, c, s);
    } else {
        k3_quantize_affine(W, R, K, bits, 64, K3_W_BF16, c, s, b);
        w = k3_wmat_affine(R, K, bits, 64, K3_W_BF16, c, s, b);
    }
    /* K3_KMICRO_NB=n (T = 1): k3_matvec_colblocks_serial over n column blocks */
    const int nb = getenv("K3_KMICRO_NB") ? atoi(getenv("K3_KMICRO_NB")) : 1;
    const float *xb[64];
    float *yb[64];
    float *Yb = malloc(4 * R * (nb > 0 ? nb : 1));
    for (int i = 0; i < nb && i < 64; i++) {
        xb[i] = X + i * (K / nb);
        yb[i] = Yb + i * R;
    }
    double best = 1e9;
    const int reps = getenv("K3_KMICRO_REPS") ? atoi(getenv("K3_KMICRO_REPS")) : 7;
    /* K3_KMICRO_INNER=n: n calls per timing, for products of a few microseconds, where
     * reading the thread's CPU clock (a system call in some guests) would weigh */
    const int inner = getenv("K3_KMICRO_INNER") ? atoi(getenv("K3_KMICRO_INNER")) : 1;
    for (int r = 0; r < reps; r++) {
        double t0 = cpu();
        for (int i = 0; i < inner; i++) {
            if (T == 1 && nb > 1)
                k3_matvec_colblocks_serial(&w, nb, xb, yb);
            else if (T == 1 && !getenv("K3_KMICRO_FEW"))
                k3_matvec(&w, X, Y);
            else if (getenv("K3_KMICRO_FEW")) /* the few-token row-dot kernel */
                k3_matmul_few(&w, X, T, Y);
            else
                k3_matmul(&w, X, T, Y);
        }
        double t = (cpu() - t0) / inner;
        if (t < best) best = t;
    }
    printf("R=%lld K=%lld T=%lld bits=%d nb=%d: %.1f us cpu, %.2f GFLOP/s, %.2f GB/s weights\n",
           (long long)R, (long long)K, (long long)T, bits, nb, best * 1e6,
           2.0 * R * K * T / best / 1e9, (double)k3_wmat_bytes(&w) / best / 1e9);
}
